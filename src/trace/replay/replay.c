/* replay.c - the what-if: run a trace's allocations and frees against an allocator
 * configuration on a fresh simulated device and measure what it would have done.
 * The replay owns its allocator alone, so it drives the policy through the handle's ops
 * without the lock, with the trace's tags interned once up front. Allocations and frees go
 * to the stream the trace recorded and its sync events are replayed, so a stream-ordered
 * policy (cuda_async) reuses memory across streams as it would have in the program. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_policy.h"
#include "hbm/device.h"
#include "hbm/pack.h"
#include "hbm/device_models.h"
#include "hbm/size.h"
#include "trace/replay/replay_internal.h"
#include "trace/replay/replay_run.h"
#include "trace/replay/twin_internal.h"

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

/* The most bytes PyTorch held reserved at once in t (its segment events, from the start). */
static uint64_t recorded_peak(const hbm_trace *t) {
    uint64_t cur = 0, top = 0;
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind == HBM_EV_SEGMENT_ALLOC || e->kind == HBM_EV_SEGMENT_MAP) cur += e->size;
        else if (e->kind == HBM_EV_SEGMENT_FREE || e->kind == HBM_EV_SEGMENT_UNMAP) cur -= cur >= e->size ? e->size : cur;
        if (cur > top) top = cur;
    }
    return top;
}

static void frag_at(hbm_replay_result *r, const hbm_stats *st) {
    r->peak_in_use = st->bytes_in_use;
    r->frag_at_peak = hbm_stats_fragmentation(st);
}

/* The most bytes live at once, as hbm_timeline_peak counts them on hbm_trace_to_timeline's
 * buffers, without building them: a buffer is an alloc that a free pairs with or that is
 * still live at the end (an address allocated again without a free loses its first
 * alloc, there as here); its bytes count from its alloc to its free, and at equal times
 * frees come first, which in event order they always do. The allocs' slots mark the
 * buffers. *nbuf: the buffers of non-zero size (the
 * timeline's count). Needed only when an address was allocated again without a free:
 * otherwise every alloc is a buffer and the pairing pass counts the bound itself. */
static void lower_bound(const hbm_trace *t, uint64_t *slot, const hbmi_map *live, uint64_t *peak_out, size_t *nbuf_out) {
    for (size_t k = 0; k < live->cap; k++) /* the paired allocs are marked already */
        if (live->s[k].key) slot[live->s[k].val] = 1;
    uint64_t cur = 0, peak = 0;
    size_t nbuf = 0;
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind == HBM_EV_ALLOC && slot[i]) {
            uint64_t size = e->requested ? e->requested : e->size;
            nbuf += size != 0;
            cur += size;
            if (cur > peak) peak = cur;
        } else if (e->kind == HBM_EV_FREE && slot[i]) {
            const hbm_trace_event *a = &t->events[slot[i] - 1];
            cur -= a->requested ? a->requested : a->size;
        }
    }
    *peak_out = peak;
    *nbuf_out = nbuf;
}

/* One slot per event: a free's holds the index + 1 of the alloc it frees (0 when none: a
 * block from before the trace); an alloc's is pairing scratch, read by no replay. And the
 * lower bound.
 * While pairing, an alloc's slot holds its bytes (so a free reads them from the slot it
 * marks, not from the alloc's event: one cache miss, not two), then 1 once a free pairs
 * with it, 0 when a later alloc at its address replaced it: non-zero marks a buffer. */
static hbm_status pair_events(const hbm_trace *t, uint64_t **out, uint64_t *bound, size_t *nbuf) {
    uint64_t *slot = hbmi_malloc(t->count * sizeof *slot + 1);
    if (!slot) return hbmi_error(HBM_ERR_NOMEM, "out of host memory pairing %zu events", t->count);
    hbmi_map live; /* the allocs live while pairing: address -> event index (core/map.h) */
    hbmi_map_init(&live);
    hbm_status s = hbmi_map_reserve(&live, 512);
    uint64_t cur = 0, peak = 0, j;
    size_t n = 0;
    int replaced = 0, had = 0;
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        uint64_t key = e->addr == UINT64_MAX ? 0 : e->addr;
        slot[i] = 0;
        if (e->kind == HBM_EV_ALLOC) {
            uint64_t size = e->requested ? e->requested : e->size;
            s = hbmi_map_swap(&live, key, i, &had, &j); /* an address reused without a free: the new block replaces the first */
            if (had && !s) replaced = 1, slot[j] = 0;
            slot[i] = size;
            n += size != 0;
            cur += size;
            if (cur > peak) peak = cur;
        } else if (e->kind == HBM_EV_FREE && hbmi_map_del(&live, key, &j)) {
            slot[i] = j + 1;
            cur -= slot[j];
            slot[j] = 1; /* a buffer (for lower_bound) */
        }
    }
    if (!s && replaced) lower_bound(t, slot, &live, &peak, &n);
    hbmi_map_destroy(&live);
    if (s) {
        hbmi_free(slot);
        return s;
    }
    *bound = peak;
    *nbuf = n;
    *out = slot;
    return HBM_OK;
}

/* The pairing and the bound, computed once per trace and shared by every configuration. */
hbm_status hbmi_replay_prepare(const hbm_trace *t, hbmi_replay_plan *p) {
    memset(p, 0, sizeof *p);
    p->t = t;
    return pair_events(t, &p->slot, &p->lower_bound, &p->nbuffers);
}

void hbmi_replay_plan_free(hbmi_replay_plan *p) {
    hbmi_free(p->slot);
    p->slot = NULL;
}
hbm_status hbmi_replay_one(const hbmi_replay_plan *p, uint64_t *scratch, const char *device_spec,
                           const hbm_replay_config *cfg, const hbmi_replay_hooks *h, hbm_replay_result *r) {
    const hbm_trace *t = p->t;
    const uint64_t *slot = p->slot; /* the pairing, read only: p serves any number of replays */
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
    s = hbmi_replay_allocator_open(dev, &cfg->cfg, &a);
    if (s) {
        hbmi_replay_result_fail(r, s);
        hbm_device_close(dev);
        return s;
    }
    snprintf(r->allocator, sizeof r->allocator, "%s", hbm_allocator_name(a));
    /* a snapshot of cuda:N: PyTorch's words for an OOM say "GPU N" */
    if (!strncmp(t->device, "cuda:", 5) && t->device[5] >= '0' && t->device[5] <= '9')
        hbmi_allocator_set_ordinal(a, (int)strtol(t->device + 5, NULL, 10));
    uint32_t ntags = hbm_trace_tag_count(t);
    uint32_t *tagid = hbmi_calloc((size_t)ntags + 1, sizeof *tagid);
    const hbm_tag **tagp = hbmi_calloc((size_t)ntags + 1, sizeof *tagp);
    /* per alloc event: its address in this replay + 1 (0: not allocated here); a free reads
     * its alloc's, which the loop wrote before it */
    size_t addrs_bytes = (t->count + 1) * sizeof(uint64_t); /* huge pages when large: read at random */
    uint64_t *addrs = scratch ? scratch : hbmi_zone_alloc(addrs_bytes);
    if (!tagid || !tagp || !addrs) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory for a replay");
    for (uint32_t i = 1; !s && i <= ntags; i++) {
        tagp[i] = hbm_trace_tag(t, i);
        s = hbmi_tagtab_intern(hbmi_allocator_tags(a), tagp[i], &tagid[i]);
    }
    void *self;
    const hbm_allocator_ops *ops = hbmi_allocator_policy(a, &self);
    /* the policy's own bytes-in-use counter where it keeps one: the peak is checked after
     * every allocation, the whole stats taken only when it rises */
    const uint64_t *in_use = hbmi_policy_in_use(a);
    hbm_stats st;
    int quiet = 0, stop = h && h->stop_at_first_oom;
    /* the program's torch.cuda.empty_cache() calls, for PyTorch's two backends: the native
     * allocator's emptyCache (trim = release_cached_blocks) and cudaMallocAsync's
     * (cudaDeviceSynchronize, cudaMemPoolTrimTo(pool, 0)) */
    int empties = !strcmp(t->source, "torch") && ops->trim &&
                  (!strcmp(ops->name, "torch") || !strcmp(ops->name, "cuda_async"));
    size_t run_end = 0; /* the end of the run of segment frees the last one began */
    uint64_t reserved = 0, peak = 0; /* as recorded: now, and the trace's peak (found at the first run) */
    int peak_known = 0;
    uint64_t t0 = hbmi_now_ns();
    for (size_t i = 0; !s && i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind == HBM_EV_ALLOC || e->kind == HBM_EV_OOM) {
            uint64_t size = e->requested ? e->requested : e->size, addr;
            addrs[i] = 0; /* 0: not allocated here (failed or empty) */
            if (!size) continue;
            uint32_t tg = e->tag <= ntags ? tagid[e->tag] : 0;
            const hbm_tag *tag = e->tag <= ntags ? tagp[e->tag] : NULL;
            hbm_status as = ops->alloc_stream ? ops->alloc_stream(self, size, tag, tg, e->stream, &addr)
                                              : ops->alloc(self, size, tag, tg, &addr);
            if (as == HBM_ERR_OOM) { /* the first one reported (the allocator's snapshot), the rest counted */
                if (!r->ooms++) {
                    hbmi_allocator_note_oom(a, size, tg);
                    r->first_oom_event = (int64_t)i;
                    r->first_oom_time_ns = e->time_ns;
                    r->first_oom_bytes = size;
                    if (h && h->on_first_oom) h->on_first_oom(h->user, a, r);
                    quiet = hbmi_allocator_set_quiet(a, 1); /* the later ones: no message */
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
            if (!in_use || *in_use > r->peak_in_use) {
                ops->stats(self, &st);
                if (st.bytes_in_use > r->peak_in_use) frag_at(r, &st);
            }
            if (e->kind == HBM_EV_OOM) { /* it failed in the original run; here it fits: give it back */
                if ((s = ops->free_stream ? ops->free_stream(self, addr, e->stream) : ops->free(self, addr))) break;
                r->frees++;
                continue;
            }
            addrs[i] = addr + 1; /* +1 so that address 0 is told apart from "none" */
        } else if (e->kind == HBM_EV_FREE && slot[i]) {
            uint64_t addr = addrs[slot[i] - 1];
            if (!addr) continue; /* its allocation failed here */
            if ((s = ops->free_stream ? ops->free_stream(self, addr - 1, e->stream) : ops->free(self, addr - 1))) break;
            r->frees++;
        } else if (e->kind == HBM_EV_SYNC && ops->sync) {
            if ((s = ops->sync(self, e->stream))) break;
        } else if (empties && (e->kind == HBM_EV_SEGMENT_ALLOC || e->kind == HBM_EV_SEGMENT_MAP)) {
            reserved += e->size;
        } else if (empties && (e->kind == HBM_EV_SEGMENT_FREE || e->kind == HBM_EV_SEGMENT_UNMAP)) {
            if (i >= run_end) {
                for (run_end = i; run_end < t->count && (t->events[run_end].kind == HBM_EV_SEGMENT_FREE ||
                                                         t->events[run_end].kind == HBM_EV_SEGMENT_UNMAP);)
                    run_end++;
                if (!peak_known) peak = recorded_peak(t), peak_known = 1;
                if (hbmi_twin_run_is_empty_cache(t, i, run_end, reserved, peak) && (s = ops->trim(self))) break;
            }
            reserved -= reserved >= e->size ? e->size : reserved;
        }
        /* other segment events and free_requested describe the original allocator, not this one */
    }
    r->seconds = (double)(hbmi_now_ns() - t0) / 1e9;
    r->events = t->count;
    if (r->ooms) hbmi_allocator_set_quiet(a, quiet);
    if (!s) {
        ops->stats(self, &st);
        r->peak_reserved = st.peak_bytes_reserved;
        if (st.peak_bytes_in_use > r->peak_in_use) r->peak_in_use = st.peak_bytes_in_use;
        hbm_device_counters dc;
        if (!hbm_device_counters_get(dev, &dc)) r->device_calls = dc.alloc_calls + dc.free_calls;
    } else {
        hbmi_replay_result_fail(r, s);
    }
    if (addrs && addrs != scratch) hbmi_zone_free(addrs, addrs_bytes);
    hbmi_free(tagid);
    hbmi_free(tagp);
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
    const char *w;
    uint64_t bytes = hbmi_trace_device_bytes(t, &w);
    if (!t->capacity && !strcmp(t->source, "torch")) {
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
    if (bytes == HBMI_DEVICE_DEFAULT_BYTES) snprintf(buf, cap, "sim:80GiB");
    else snprintf(buf, cap, "sim:%" PRIu64, bytes);
    if (why) *why = w;
    return HBM_OK;
}

/* The packing of t's buffers when there are at most max_buffers, the bound given. */
static hbm_status bounds_pack(const hbm_trace *t, double timeout_s, size_t max_buffers, size_t nbuf, hbm_replay_bounds *out) {
    if (!nbuf || nbuf > max_buffers) return HBM_OK;
    hbm_timeline *tl;
    hbm_status s = hbm_trace_to_timeline(t, &tl);
    if (s) return s;
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
    hbm_timeline_free(tl);
    return s;
}

hbm_status hbmi_replay_bounds(const hbmi_replay_plan *p, double timeout_s, size_t max_buffers, hbm_replay_bounds *out) {
    memset(out, 0, sizeof *out);
    out->lower_bound = p->lower_bound;
    return bounds_pack(p->t, timeout_s, max_buffers, p->nbuffers, out);
}

hbm_status hbm_replay_bounds_get(const hbm_trace *t, double timeout_s, size_t max_buffers, hbm_replay_bounds *out) {
    if (!t || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_bounds_get: NULL argument");
    memset(out, 0, sizeof *out);
    uint64_t *slot;
    size_t nbuf;
    hbm_status s = pair_events(t, &slot, &out->lower_bound, &nbuf);
    if (s) return s;
    hbmi_free(slot);
    return bounds_pack(t, timeout_s, max_buffers, nbuf, out);
}

hbm_status hbmi_replay_allocator_open(hbm_device *dev, const hbm_config *cfg, hbm_allocator **out) {
    *out = NULL;
    const hbm_allocator_ops *ops;
    void *self;
    hbm_status s = hbmi_policy_open(dev, cfg, &ops, &self);
    if (!s) s = hbmi_recorder_over(cfg, dev, &ops, &self);
    return s ? s : hbm_allocator_wrap(ops, self, dev, cfg, out);
}

void hbmi_replay_device_words(const char *spec, char *buf, size_t cap) {
    hbm_device *d;
    hbm_device_info info;
    char sz[32];
    snprintf(buf, cap, "%s", spec);
    if (hbm_device_open(spec, &d)) return;
    hbm_status s = hbm_device_info_get(d, &info);
    hbm_device_close(d);
    if (s) return;
    hbm_size_human(info.total_bytes, sz);
    if (!strncmp(info.name, "sim:", 4)) snprintf(buf, cap, "a simulated device of %s", sz); /* no name= given */
    else snprintf(buf, cap, "%s (%s)", info.name, sz);
}
