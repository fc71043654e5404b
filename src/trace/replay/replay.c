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
#include "hbm/pack.h"
#include "hbm/plan.h"
#include "hbm/replay_torch.h"
#include "hbm/size.h"
#include "trace/trace_internal.h"

static hbm_status result_fail(hbm_replay_result *r, hbm_status s) {
    r->status = s;
    snprintf(r->error, sizeof r->error, "%s", hbm_last_error());
    return s;
}

/* The OOM report of the allocator's last failure; the allocator's message if the report
 * cannot be written (no memory). */
static char *oom_report(hbm_allocator *a, const char *fallback) {
    size_t len = 0, cap = 1 << 16;
    char *buf = hbmi_malloc(cap);
    if (buf && hbm_oom_report_format(a, buf, cap, &len) == HBM_OK) {
        if (len < cap) return buf;
        char *big = hbmi_realloc(buf, len + 1);
        if (big && hbm_oom_report_format(a, big, len + 1, &len) == HBM_OK) return big;
        buf = big;
    }
    hbmi_free(buf);
    return hbmi_strdup(fallback);
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
static hbm_status pair_events(const hbm_trace *t, size_t **out) {
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
    if (s) {
        hbmi_free(pair);
        return s;
    }
    *out = pair;
    return HBM_OK;
}

static hbm_status replay_one(const hbm_trace *t, const size_t *pair, uint64_t *raddr, const char *device_spec,
                             const char *config, hbm_replay_result *r) {
    memset(r, 0, sizeof *r);
    snprintf(r->config, sizeof r->config, "%s", config);
    r->first_oom_event = -1;
    hbm_device *dev = NULL;
    hbm_allocator *a = NULL;
    hbm_status s = hbm_device_open(device_spec, &dev);
    if (s) return result_fail(r, s);
    s = hbm_allocator_open(dev, config, &a);
    if (s) {
        result_fail(r, s);
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
            if (as == HBM_ERR_OOM) {
                r->ooms++;
                hbmi_allocator_note_oom(a, size, tg);
                if (r->first_oom_event < 0) {
                    r->first_oom_event = (int64_t)i;
                    r->first_oom_time_ns = e->time_ns;
                    r->first_oom_bytes = size;
                    r->first_oom_report = oom_report(a, hbm_last_error());
                }
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
    if (!s) {
        ops->stats(self, &st);
        r->peak_reserved = st.peak_bytes_reserved;
        if (st.peak_bytes_in_use > r->peak_in_use) r->peak_in_use = st.peak_bytes_in_use;
        hbm_device_counters dc;
        if (!hbm_device_counters_get(dev, &dc)) r->device_calls = dc.alloc_calls + dc.free_calls;
    } else {
        result_fail(r, s);
    }
    hbmi_free(tagid);
    hbm_allocator_close(a);
    hbm_device_close(dev);
    return s;
}

hbm_status hbm_replay_many(const hbm_trace *t, const char *device_spec, const char *const *configs, size_t n,
                           hbm_replay_result *results) {
    if (!t || !device_spec || (n && (!configs || !results)))
        return hbmi_error(HBM_ERR_INVALID, "hbm_replay: NULL argument");
    for (size_t c = 0; c < n; c++) {
        memset(&results[c], 0, sizeof results[c]);
        results[c].first_oom_event = -1;
        if (!configs[c]) return hbmi_error(HBM_ERR_INVALID, "hbm_replay: NULL configuration");
        snprintf(results[c].config, sizeof results[c].config, "%s", configs[c]);
    }
    size_t *pair = NULL;
    uint64_t *raddr = NULL;
    hbm_status s = pair_events(t, &pair);
    if (!s && !(raddr = hbmi_malloc(t->count * sizeof *raddr + 1)))
        s = hbmi_error(HBM_ERR_NOMEM, "out of host memory for a replay of %zu events", t->count);
    if (s) {
        for (size_t c = 0; c < n; c++) result_fail(&results[c], s);
    }
    hbm_status first = s;
    for (size_t c = 0; c < n && !s; c++) {
        hbm_status rs = replay_one(t, pair, raddr, device_spec, configs[c], &results[c]);
        if (rs && !first) first = rs;
    }
    hbmi_free(pair);
    hbmi_free(raddr);
    return first;
}

hbm_status hbm_replay(const hbm_trace *t, const char *device_spec, const char *config, hbm_replay_result *r) {
    if (!r) return hbmi_error(HBM_ERR_INVALID, "hbm_replay: NULL result");
    return hbm_replay_many(t, device_spec, &config, 1, r);
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

static void col_size(char *buf, size_t cap, uint64_t v) {
    char h[32];
    snprintf(buf, cap, "%s", hbm_size_xla((int64_t)v, h));
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

/* The table's first row on a PyTorch snapshot replayed with the torch twin: what PyTorch
 * itself did, from the snapshot's segment events. "peak held" is what the live allocations
 * asked at the recorded peak, "calls" the segment events (cudaMalloc / cudaFree, map /
 * unmap), "frag" unknown (the snapshot does not say which free block was largest). */
static hbm_status recorded_row(const hbm_trace *t, const hbm_replay_result *r, size_t n, FILE *f) {
    int twin = 0;
    for (size_t i = 0; i < n; i++) twin |= !strcmp(r[i].allocator, "torch");
    if (!twin || strcmp(t->source, "torch")) return HBM_OK;
    hbm_torch_recorded rec;
    hbm_status s = hbm_torch_recorded_get(t, &rec);
    if (s) return s;
    uint64_t calls = 0;
    for (size_t i = 0; i < t->count; i++) {
        int k = t->events[i].kind;
        calls += k == HBM_EV_SEGMENT_ALLOC || k == HBM_EV_SEGMENT_FREE || k == HBM_EV_SEGMENT_MAP || k == HBM_EV_SEGMENT_UNMAP;
    }
    char a[32], b[32], c[32], w[64];
    col_size(a, sizeof a, rec.requested_at_peak);
    col_size(b, sizeof b, rec.peak_reserved);
    fprintf(f, "%-28s %11s %11s %6s %7" PRIu64 "  ", "recorded (PyTorch)", a, b, "-", calls);
    if (rec.oom_event >= 0)
        fprintf(f, "%s: %s", hbmi_event_when(t, rec.oom_event, t->events[rec.oom_event].time_ns, w, sizeof w),
                hbm_size_xla((int64_t)rec.oom_bytes, c));
    else
        fputs("none", f);
    fprintf(f, "; at its peak (event %" PRId64 ") %s reserved but unallocated, %" PRIu64 " segment%s\n",
            hbmi_event_number(t, rec.peak_event), hbm_size_xla((int64_t)rec.unallocated_at_peak, c), rec.segments_at_peak,
            rec.segments_at_peak == 1 ? "" : "s");
    return HBM_OK;
}

/* The device of a spec in words, as the device itself reads the spec:
 * "sim:85520809984,name=H100-80GB" as "H100-80GB (79.65GiB)", "sim:80GiB" as "a simulated
 * device of 80.00GiB"; a spec that does not open as it is. */
static const char *device_words(const char *spec, char *buf, size_t cap) {
    hbm_device *d;
    hbm_device_info info;
    char sz[32];
    if (hbm_device_open(spec, &d)) return spec;
    hbm_status s = hbm_device_info_get(d, &info);
    hbm_device_close(d);
    if (s) return spec;
    hbm_size_human(info.total_bytes, sz);
    if (!strncmp(info.name, "sim:", 4)) snprintf(buf, cap, "a simulated device of %s", sz); /* no name= given */
    else snprintf(buf, cap, "%s (%s)", info.name, sz);
    return buf;
}

hbm_status hbm_replay_write(const hbm_trace *t, const char *device_spec, const hbm_replay_result *r, size_t n,
                            const hbm_replay_bounds *bounds, FILE *f, int json) {
    if (!t || !r || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_write: NULL argument");
    uint64_t bound = bounds ? bounds->lower_bound : 0, packed = bounds ? bounds->packed : 0;
    if (json) {
        fputs("{\"trace\": ", f);
        hbmi_json_str(f, t->name);
        fputs(", \"device\": ", f);
        hbmi_json_str(f, device_spec);
        fprintf(f, ", \"events\": %zu, \"optimal_bound_bytes\": %" PRIu64 ", \"packed_bytes\": %" PRIu64 ", \"results\": [",
                t->count, bound, packed);
        for (size_t i = 0; i < n; i++) {
            const hbm_replay_result *x = &r[i];
            fputs(i ? ", {\"config\": " : "{\"config\": ", f);
            hbmi_json_str(f, x->config);
            fputs(", \"allocator\": ", f);
            hbmi_json_str(f, x->allocator);
            fprintf(f, ", \"status\": \"%s\"", hbm_status_name(x->status));
            if (x->status) {
                fputs(", \"error\": ", f);
                hbmi_json_str(f, x->error);
                fputs("}", f);
                continue;
            }
            fprintf(f,
                    ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"ooms\": %" PRIu64
                    ", \"peak_bytes_in_use\": %" PRIu64 ", \"peak_bytes_reserved\": %" PRIu64
                    ", \"fragmentation_at_peak\": %.6f, \"device_calls\": %" PRIu64 ", \"events_per_second\": %.0f",
                    x->allocs, x->frees, x->ooms, x->peak_in_use, x->peak_reserved, x->frag_at_peak, x->device_calls,
                    x->seconds > 0 ? (double)x->events / x->seconds : 0.0);
            if (x->first_oom_event >= 0) {
                fprintf(f, ", \"first_oom\": {\"event\": %" PRId64 ", \"before_history\": %s, \"time_ns\": %" PRIu64
                           ", \"bytes\": %" PRIu64 ", \"report\": ",
                        hbmi_event_number(t, x->first_oom_event), hbmi_event_number(t, x->first_oom_event) < 0 ? "true" : "false",
                        t->has_time ? x->first_oom_time_ns : 0, x->first_oom_bytes);
                hbmi_json_str(f, x->first_oom_report);
                fputc('}', f);
            } else {
                fputs(", \"first_oom\": null", f);
            }
            fputc('}', f);
        }
        fputs("]}\n", f);
        return HBM_OK;
    }
    char a[32], b[32], c[32], name[80], cfg[64], w[160];
    hbmi_fit(name, sizeof name, t->name, 48, 1);
    fprintf(f, "replay of %s (%s%s%s%zu events", name, t->device[0] ? "device " : "", t->device,
            t->device[0] ? ", " : "", t->count - t->history_start);
    if (t->history_start) fprintf(f, " after %zu rebuilt from its segments", t->history_start);
    fprintf(f, ")\n  on %s\n\n", device_words(device_spec, w, sizeof w));
    fprintf(f, "%-28s %11s %11s %6s %7s  %s\n", "configuration", "peak held", "reserved", "frag", "calls",
            "first OOM");
    hbm_status rs = recorded_row(t, r, n, f);
    if (rs) return rs;
    for (size_t i = 0; i < n; i++) {
        const hbm_replay_result *x = &r[i];
        hbmi_fit(cfg, sizeof cfg, x->config, 28, 0);
        if (x->status) {
            fprintf(f, "%-28s %s: %s\n", cfg, hbm_status_str(x->status), x->error);
            continue;
        }
        col_size(a, sizeof a, x->peak_in_use);
        col_size(b, sizeof b, x->peak_reserved);
        fprintf(f, "%-28s %11s %11s %5.1f%% %7" PRIu64 "  ", cfg, a, b, 100.0 * x->frag_at_peak, x->device_calls);
        if (x->first_oom_event >= 0)
            fprintf(f, "%s: %s (%" PRIu64 " OOM%s)\n", hbmi_event_when(t, x->first_oom_event, x->first_oom_time_ns, w, sizeof w),
                    hbm_size_xla((int64_t)x->first_oom_bytes, c), x->ooms, x->ooms == 1 ? "" : "s");
        else
            fprintf(f, "none\n");
    }
    if (bound) {
        fprintf(f, "\n%-28s %11s  (max bytes live at once: no allocator can peak lower)\n", "optimal packing bound",
                hbm_size_xla((int64_t)bound, a));
        if (packed)
            fprintf(f, "%-28s %11s  (a static placement of every buffer, knowing the future%s)\n", "best packing found",
                    hbm_size_xla((int64_t)packed, a), packed == bound ? ": optimal" : "");
    }
    for (size_t i = 0; i < n; i++) {
        if (r[i].status || r[i].first_oom_event < 0) continue;
        fprintf(f, "\n--- first OOM with %s: %s ---\n%s\n", r[i].config,
                hbmi_event_when(t, r[i].first_oom_event, r[i].first_oom_time_ns, w, sizeof w),
                r[i].first_oom_report ? r[i].first_oom_report : "");
    }
    return HBM_OK;
}
