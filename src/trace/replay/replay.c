/* replay.c - the what-if: run a trace's allocations and frees against an allocator
 * configuration on a fresh simulated device and measure what it would have done.
 * The replay owns its allocator alone, so it drives the policy through the handle's ops
 * without the lock, with the trace's tags interned once up front. Allocations and frees go
 * to the stream the trace recorded and its sync events are replayed, so a stream-ordered
 * policy (cuda_async) reuses memory across streams as it would have in the program. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "hbm/device.h"
#include "hbm/pack.h"
#include "hbm/plan.h"
#include "trace/replay/replay_internal.h"

hbm_status hbmi_replay_result_fail(hbm_replay_result *r, hbm_status s) {
    r->status = s;
    snprintf(r->error, sizeof r->error, "%s", hbm_last_error());
    return s;
}

void hbm_replay_result_release(hbm_replay_result *r) {
    if (!r) return;
    hbmi_free(r->first_oom_report);
    r->first_oom_report = NULL;
}

static void frag_at(hbm_replay_result *r, const hbm_stats *st) {
    r->peak_in_use = st->bytes_in_use;
    r->frag_at_peak = hbm_stats_fragmentation(st);
}

/* For each free event, the index of the alloc it frees (SIZE_MAX when none: a block from
 * before the trace). Computed once per trace and shared by every configuration. */
hbm_status hbmi_replay_prepare(const hbm_trace *t, hbmi_replay_plan *p) {
    memset(p, 0, sizeof *p);
    p->t = t;
    size_t *pair = hbmi_malloc(t->count * sizeof *pair + 1);
    if (!pair) return hbmi_error(HBM_ERR_NOMEM, "out of host memory pairing %zu events", t->count);
    hbmi_map live;
    hbmi_map_init(&live);
    hbm_status s = HBM_OK;
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        uint64_t key = e->addr == UINT64_MAX ? 0 : e->addr, j;
        pair[i] = SIZE_MAX;
        if (e->kind == HBM_EV_ALLOC) {
            s = hbmi_map_put(&live, key, i); /* an address reused without a free: the first block stays live */
        } else if (e->kind == HBM_EV_FREE && hbmi_map_del(&live, key, &j)) {
            pair[i] = (size_t)j;
        }
    }
    hbmi_map_destroy(&live);
    if (!s && !(p->raddr = hbmi_malloc(t->count * sizeof *p->raddr + 1)))
        s = hbmi_error(HBM_ERR_NOMEM, "out of host memory for a replay of %zu events", t->count);
    if (s) {
        hbmi_free(pair);
        return s;
    }
    p->pair = pair;
    return HBM_OK;
}

void hbmi_replay_plan_free(hbmi_replay_plan *p) {
    hbmi_free(p->pair);
    hbmi_free(p->raddr);
    p->pair = NULL;
    p->raddr = NULL;
}

hbm_status hbmi_replay_one(const hbmi_replay_plan *p, const char *device_spec, const hbm_replay_config *cfg,
                           const hbmi_replay_hooks *h, hbm_replay_result *r) {
    const hbm_trace *t = p->t;
    const size_t *pair = p->pair;
    uint64_t *raddr = p->raddr;
    memset(r, 0, sizeof *r);
    hbmi_strlcpy_cut(r->config, sizeof r->config, cfg->text);
    r->first_oom_event = r->last_oom_event = -1;
    hbm_device *dev = NULL;
    hbm_allocator *a = NULL;
    hbm_status s = hbm_device_open(device_spec, &dev);
    if (s) return hbmi_replay_result_fail(r, s);
    if (cfg->status) { /* as hbm_allocator_open would have said */
        r->status = s = cfg->status;
        snprintf(r->error, sizeof r->error, "%s", cfg->error);
        hbm_device_close(dev);
        return s;
    }
    s = hbm_allocator_open_config(dev, &cfg->cfg, &a);
    if (s) {
        hbmi_replay_result_fail(r, s);
        hbm_device_close(dev);
        return s;
    }
    snprintf(r->allocator, sizeof r->allocator, "%s", hbm_allocator_name(a));
    uint32_t ntags = hbm_trace_tag_count(t);
    uint32_t *tagid = hbmi_calloc((size_t)ntags + 1, sizeof *tagid);
    if (!tagid) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory for a replay");
    for (uint32_t i = 1; !s && i <= ntags; i++) s = hbmi_tagtab_intern(a->tags, hbm_trace_tag(t, i), &tagid[i]);
    const hbm_allocator_ops *ops = a->ops;
    void *self = a->self;
    hbm_stats st;
    int quiet = 0, stop = h && h->stop_at_first_oom;
    uint64_t t0 = hbmi_now_ns();
    for (size_t i = 0; !s && i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind == HBM_EV_ALLOC || e->kind == HBM_EV_OOM) {
            uint64_t size = e->requested ? e->requested : e->size, addr;
            raddr[i] = 0; /* 0: not allocated here (failed or empty) */
            if (!size) continue;
            uint32_t tg = e->tag <= ntags ? tagid[e->tag] : 0;
            const hbm_tag *tag = hbm_trace_tag(t, e->tag);
            hbm_status as = ops->alloc_stream ? ops->alloc_stream(self, size, tag, tg, e->stream, &addr)
                                              : ops->alloc(self, size, tag, tg, &addr);
            if (as == HBM_ERR_OOM) { /* the first one reported (the allocator's snapshot), the rest counted */
                if (!r->ooms++) {
                    hbmi_allocator_note_oom(a, size, tg);
                    r->first_oom_event = (int64_t)i;
                    r->first_oom_time_ns = e->time_ns;
                    r->first_oom_bytes = size;
                    if (h && h->on_first_oom) h->on_first_oom(h->user, a, r);
                    quiet = hbmi_oom_quiet_set(1); /* the later ones: no message */
                }
                r->last_oom_event = (int64_t)i;
                r->last_oom_time_ns = e->time_ns;
                if (size > r->largest_oom_bytes) r->largest_oom_bytes = size;
                if (stop) break;
                continue;
            }
            if (as) {
                s = as;
                break;
            }
            r->allocs++;
            ops->stats(self, &st);
            if (st.bytes_in_use > r->peak_in_use) frag_at(r, &st);
            if (e->kind == HBM_EV_OOM) { /* it failed in the original run; here it fits: give it back */
                if ((s = ops->free_stream ? ops->free_stream(self, addr, e->stream) : ops->free(self, addr))) break;
                r->frees++;
                continue;
            }
            raddr[i] = addr + 1; /* +1 so that address 0 is told apart from "none" */
        } else if (e->kind == HBM_EV_FREE && pair[i] != SIZE_MAX) {
            uint64_t addr = raddr[pair[i]];
            if (!addr) continue; /* its allocation failed here */
            if ((s = ops->free_stream ? ops->free_stream(self, addr - 1, e->stream) : ops->free(self, addr - 1))) break;
            r->frees++;
        } else if (e->kind == HBM_EV_SYNC && ops->sync) {
            if ((s = ops->sync(self, e->stream))) break;
        }
        /* segment and free_requested events describe the original allocator, not this one */
    }
    r->seconds = (double)(hbmi_now_ns() - t0) / 1e9;
    r->events = t->count;
    if (r->ooms) hbmi_oom_quiet_set(quiet);
    if (!s) {
        ops->stats(self, &st);
        r->peak_reserved = st.peak_bytes_reserved;
        if (st.peak_bytes_in_use > r->peak_in_use) r->peak_in_use = st.peak_bytes_in_use;
        hbm_device_counters dc;
        if (!hbm_device_counters_get(dev, &dc)) r->device_calls = dc.alloc_calls + dc.free_calls;
    } else {
        hbmi_replay_result_fail(r, s);
    }
    hbmi_free(tagid);
    hbm_allocator_close(a);
    hbm_device_close(dev);
    return s;
}

/* sim:SIZE, or a device name from the planner's table (hbm devices), simulated
 * with that device's capacity. */
hbm_status hbm_replay_device_spec(const char *name, char *buf, size_t cap) {
    if (!name || !buf || !cap) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_device_spec: NULL argument");
    if (!strncmp(name, "sim:", 4)) {
        snprintf(buf, cap, "%s", name);
        return HBM_OK;
    }
    const hbm_device_model *m = hbm_device_model_find(name);
    if (!m) /* the model table's message names the device and where the names are listed */
        return hbmi_error_prefix(HBM_ERR_INVALID, "expected sim:SIZE (e.g. sim:80GiB) or a device name: ");
    snprintf(buf, cap, "sim:%" PRIu64 ",name=%s", m->capacity_bytes, m->name);
    return HBM_OK;
}

hbm_status hbm_replay_default_device(const hbm_trace *t, char *buf, size_t cap, const char **why) {
    if (!t || !buf || !cap) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_default_device: NULL argument");
    const char *w = "hbm's default";
    uint64_t bytes = 80ull << 30;
    if (t->capacity) {
        bytes = t->capacity, w = "the trace's device";
    } else if (!strcmp(t->source, "torch")) {
        uint64_t reserved = 0, peak = 0, at_oom = 0;
        for (size_t i = 0; i < t->count && !at_oom; i++) {
            const hbm_trace_event *e = &t->events[i];
            if (e->kind == HBM_EV_SEGMENT_ALLOC || e->kind == HBM_EV_SEGMENT_MAP) reserved += e->size;
            else if (e->kind == HBM_EV_SEGMENT_FREE || e->kind == HBM_EV_SEGMENT_UNMAP)
                reserved -= reserved >= e->size ? e->size : reserved;
            else if (e->kind == HBM_EV_OOM && e->size) at_oom = reserved + e->size; /* size: CUDA's free bytes */
            if (reserved > peak) peak = reserved;
        }
        if (at_oom) bytes = at_oom, w = "reserved + free at the recorded OOM";
        else if (peak) bytes = peak, w = "the snapshot's peak reserved";
    }
    if (bytes == 80ull << 30) snprintf(buf, cap, "sim:80GiB");
    else snprintf(buf, cap, "sim:%" PRIu64, bytes);
    if (why) *why = w;
    return HBM_OK;
}

hbm_status hbm_replay_bounds_get(const hbm_trace *t, double timeout_s, size_t max_buffers, hbm_replay_bounds *out) {
    if (!t || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_bounds_get: NULL argument");
    memset(out, 0, sizeof *out);
    hbm_timeline *tl;
    hbm_status s = hbm_trace_to_timeline(t, &tl);
    if (s) return s;
    s = hbm_timeline_peak(tl, &out->lower_bound, NULL);
    if (!s && tl->count && tl->count <= max_buffers) {
        hbm_pack_options o;
        hbm_pack_result r;
        hbm_pack_options_default(&o);
        o.algo = HBM_PACK_BEST;
        o.timeout_s = timeout_s;
        s = hbm_pack(tl, &o, &r);
        if (!s) {
            out->packed = r.extent;
            out->proven = r.extent == out->lower_bound;
        }
    }
    hbm_timeline_free(tl);
    return s;
}
