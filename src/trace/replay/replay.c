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
                             const char *config, hbm_replay_result *r, int check_advice);

/* The first OOM report's advice, checked: the replay again with the advised setting. When
 * it runs to its end, the advice stands (and says so); else the report says that no such
 * setting fits and by how much the program is over the device. */
static void check_advice(const hbm_trace *t, const size_t *pair, uint64_t *raddr, const char *device_spec,
                         const char *config, const char *item, const char *env, hbm_replay_result *r) {
    char with[400], verdict[512], a[32], b[32];
    if (!r->first_oom_report || snprintf(with, sizeof with, "%s,%s", config, item) >= (int)sizeof with) return;
    hbm_replay_result v;
    if (replay_one(t, pair, raddr, device_spec, with, &v, 0)) {
        hbm_replay_result_release(&v);
        return; /* could not run: the advice is left as it was */
    }
    if (v.first_oom_event < 0) {
        snprintf(verdict, sizeof verdict, "  Try: %s (checked: the replay with %s runs to its end, peak reserved %s)\n",
                 env, item, hbm_size_xla((int64_t)v.peak_reserved, a));
    } else {
        hbm_replay_bounds bd;
        hbm_device *d;
        uint64_t dfree = 0, total = 0;
        if (hbm_replay_bounds_get(t, 0, 0, &bd)) bd.lower_bound = 0;
        if (!hbm_device_open(device_spec, &d)) hbm_device_mem_info(d, &dfree, &total), hbm_device_close(d);
        int n = snprintf(verdict, sizeof verdict, "  No setting of this kind fits: with %s the replay still runs out of memory at %s.\n",
                         item, hbmi_event_when(t, v.first_oom_event, v.first_oom_time_ns, with, sizeof with));
        if (n > 0 && (size_t)n < sizeof verdict && bd.lower_bound > total)
            snprintf(verdict + n, sizeof verdict - (size_t)n, "  The program holds %s at once, %s more than the device: a larger device\n"
                     "  or a smaller step (batch, sequence length, rematerialization).\n",
                     hbm_size_xla((int64_t)bd.lower_bound, a), hbm_size_xla((int64_t)(bd.lower_bound - total), b));
    }
    hbm_replay_result_release(&v);
    size_t len = strlen(r->first_oom_report), cap = len + strlen(verdict) + 1;
    char *rep = hbmi_realloc(r->first_oom_report, cap);
    if (!rep) return;
    r->first_oom_report = rep;
    hbm_oom_report_set_advice(rep, cap, verdict);
}

static hbm_status replay_one(const hbm_trace *t, const size_t *pair, uint64_t *raddr, const char *device_spec,
                             const char *config, hbm_replay_result *r, int check) {
    memset(r, 0, sizeof *r);
    snprintf(r->config, sizeof r->config, "%s", config);
    r->first_oom_event = r->last_oom_event = -1;
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
    hbm_oom_diagnosis diag;
    memset(&diag, 0, sizeof diag);
    int quiet = 0;
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
                    r->first_oom_report = oom_report(a, hbm_last_error());
                    hbm_oom_diagnose(a, &diag);
                    quiet = hbmi_oom_quiet_set(1); /* the later ones: no message */
                }
                r->last_oom_event = (int64_t)i;
                r->last_oom_time_ns = e->time_ns;
                if (size > r->largest_oom_bytes) r->largest_oom_bytes = size;
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
        result_fail(r, s);
    }
    hbmi_free(tagid);
    hbm_allocator_close(a);
    hbm_device_close(dev);
    if (!s && check && diag.config[0]) check_advice(t, pair, raddr, device_spec, config, diag.config, diag.env, r);
    return s;
}

hbm_status hbm_replay_many(const hbm_trace *t, const char *device_spec, const char *const *configs, size_t n,
                           hbm_replay_result *results) {
    if (!t || !device_spec || (n && (!configs || !results)))
        return hbmi_error(HBM_ERR_INVALID, "hbm_replay: NULL argument");
    for (size_t c = 0; c < n; c++) {
        memset(&results[c], 0, sizeof results[c]);
        results[c].first_oom_event = results[c].last_oom_event = -1;
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
        hbm_status rs = replay_one(t, pair, raddr, device_spec, configs[c], &results[c], 1);
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

/* A PyTorch snapshot replayed with a torch row: the table gets what PyTorch itself did
 * as its first row and the twin's match after it. */
static int torch_rows(const hbm_trace *t, const hbm_replay_result *r, size_t n) {
    if (strcmp(t->source, "torch")) return -1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(r[i].allocator, "torch")) return (int)i;
    return -1;
}

/* The table's first row: what PyTorch did, from the snapshot's own events. "peak held" is
 * the most bytes its live blocks held at once (as the other rows'), "reserved" its peak
 * reserved, "calls" the segment events (cudaMalloc / cudaFree, map / unmap), "frag"
 * unknown (the snapshot does not say which free block was largest). */
static hbm_status recorded_row(const hbm_trace *t, FILE *f) {
    hbm_torch_recorded rec;
    hbm_status s = hbm_torch_recorded_get(t, &rec);
    if (s) return s;
    uint64_t calls = 0;
    for (size_t i = 0; i < t->count; i++) {
        int k = t->events[i].kind;
        calls += k == HBM_EV_SEGMENT_ALLOC || k == HBM_EV_SEGMENT_FREE || k == HBM_EV_SEGMENT_MAP || k == HBM_EV_SEGMENT_UNMAP;
    }
    char a[32], b[32], c[32], w[64];
    col_size(a, sizeof a, rec.peak_in_use);
    col_size(b, sizeof b, rec.peak_reserved);
    fprintf(f, "%-28s %11s %11s %6s %7" PRIu64 "  ", "recorded (PyTorch)", a, b, "-", calls);
    if (rec.oom_event >= 0)
        fprintf(f, "%s: %s\n", hbmi_event_when(t, rec.oom_event, t->events[rec.oom_event].time_ns, w, sizeof w),
                hbm_size_xla((int64_t)rec.oom_bytes, c));
    else
        fputs("none\n", f);
    if (rec.peak_event >= 0) {
        int64_t ev = hbmi_event_number(t, rec.peak_event);
        if (ev < 0) snprintf(w, sizeof w, "before the history");
        else snprintf(w, sizeof w, "event %" PRId64, ev);
        fprintf(f, "  PyTorch's peak reserved (%s): %s of it unallocated, %" PRIu64 " segment%s\n", w,
                hbm_size_xla((int64_t)rec.unallocated_at_peak, c), rec.segments_at_peak,
                rec.segments_at_peak == 1 ? "" : "s");
    }
    return HBM_OK;
}

/* Split a configuration into its items (a roundup list's brackets keep their commas). */
static size_t config_items(const char *cfg, char items[][96], size_t max) {
    size_t n = 0;
    for (const char *p = cfg; *p && n < max;) {
        const char *q = p;
        int depth = 0;
        while (*q && (*q != ',' || depth)) depth += *q == '[' ? 1 : *q == ']' && depth ? -1 : 0, q++;
        if (q > p) snprintf(items[n++], sizeof items[0], "%.*s", (int)(q - p), p);
        p = *q ? q + 1 : q;
    }
    return n;
}

/* A row's label in 28 columns. A configuration that does not fit loses what every torch
 * row shares (the recorded settings, said above the table) and "allocator=", then its
 * middle, so what tells the rows apart stays visible. */
static void row_label(const char *cfg, const char *recorded, char *out, size_t cap) {
    if (strlen(cfg) <= 28) {
        hbmi_fit(out, cap, cfg, 28, 0);
        return;
    }
    char it[24][96], rec[24][96], short_[300] = "";
    size_t n = config_items(cfg, it, 24), nr = recorded ? config_items(recorded, rec, 24) : 0, len = 0;
    int torch = n && !strcmp(it[0], "allocator=torch");
    for (size_t i = 0; i < n && len < sizeof short_; i++) {
        int skip = 0;
        for (size_t k = 0; torch && i && k < nr && !skip; k++) skip = !strcmp(it[i], rec[k]);
        if (skip) continue;
        const char *x = strncmp(it[i], "allocator=", 10) ? it[i] : it[i] + 10;
        len += (size_t)snprintf(short_ + len, sizeof short_ - len, "%s%s", len ? "," : "", x);
    }
    hbmi_fit(out, cap, short_, 28, 1);
}

/* The device of a spec in words, as the device itself reads the spec:
 * "sim:85520809984,name=H100-80GB" as "H100-80GB (79.65GiB)", "sim:80GiB" as "a simulated
 * device of 80.00GiB"; a spec that does not open as it is. */
const char *hbmi_device_words(const char *spec, char *buf, size_t cap) {
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

/* The twin of the torch row against what PyTorch did: every segment decision and every
 * address (hbm/replay_torch.h), and where they first part, why. */
static hbm_status twin_text(const hbm_trace *t, const char *device_spec, const hbm_replay_result *row, FILE *f) {
    if (row->status) return HBM_OK;
    hbm_torch_match m;
    hbm_status s = hbm_replay_torch_match(t, row->config, device_spec, &m);
    if (s) return s;
    fprintf(f, "\ntwin (the torch row) against PyTorch: ");
    hbm_torch_match_write(&m, f, 0);
    fputc('\n', f);
    hbm_torch_match_explain(t, &m, f);
    return HBM_OK;
}

static hbm_status twin_json(const hbm_trace *t, const char *device_spec, const char *config, FILE *f) {
    hbm_torch_recorded r;
    hbm_torch_match m;
    hbm_status s = hbm_torch_recorded_get(t, &r);
    if (!s) s = hbm_replay_torch_match(t, config, device_spec, &m);
    if (s) return s;
    fprintf(f, ", \"recorded\": {\"peak_bytes_in_use\": %" PRIu64 ", \"peak_bytes_reserved\": %" PRIu64
               ", \"peak_event\": %" PRId64 ", \"requested_bytes_at_peak\": %" PRIu64
               ", \"reserved_unallocated_at_peak\": %" PRIu64 ", \"segments_at_peak\": %" PRIu64 ", \"oom\": ",
            r.peak_in_use, r.peak_reserved, hbmi_event_number(t, r.peak_event), r.requested_at_peak, r.unallocated_at_peak,
            r.segments_at_peak);
    if (r.oom_event >= 0) fprintf(f, "{\"event\": %" PRId64 ", \"bytes\": %" PRIu64 "}}", hbmi_event_number(t, r.oom_event), r.oom_bytes);
    else fputs("null}", f);
    fputs(", \"match\": {\"config\": ", f);
    hbmi_json_str(f, m.config);
    fputs(", \"device\": ", f);
    hbmi_json_str(f, m.device);
    fputs(", \"result\": ", f);
    hbm_torch_match_write(&m, f, 1);
    fputc('}', f);
    return HBM_OK;
}

hbm_status hbm_replay_write(const hbm_trace *t, const char *device_spec, const hbm_replay_result *r, size_t n,
                            const hbm_replay_bounds *bounds, FILE *f, int json) {
    if (!t || !r || !f || !device_spec) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_write: NULL argument");
    uint64_t bound = bounds ? bounds->lower_bound : 0, packed = bounds ? bounds->packed : 0;
    int tw = torch_rows(t, r, n); /* the first torch row, on a PyTorch snapshot */
    if (json) {
        fputs("{\"trace\": ", f);
        hbmi_json_str(f, t->name);
        fputs(", \"device\": ", f);
        hbmi_json_str(f, device_spec);
        fprintf(f, ", \"events\": %zu, \"optimal_bound_bytes\": %" PRIu64 ", \"packed_bytes\": %" PRIu64, t->count, bound,
                packed);
        hbmi_json_plan_peak(f, t);
        fputs(", \"results\": [", f);
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
                           ", \"bytes\": %" PRIu64,
                        hbmi_event_number(t, x->first_oom_event), hbmi_event_number(t, x->first_oom_event) < 0 ? "true" : "false",
                        t->has_time ? x->first_oom_time_ns : 0, x->first_oom_bytes);
                hbmi_json_step(f, t, x->first_oom_event, "oom");
                fputs(", \"report\": ", f);
                hbmi_json_str(f, x->first_oom_report);
                fprintf(f, "}, \"last_oom\": {\"event\": %" PRId64 ", \"time_ns\": %" PRIu64 "}, \"largest_oom_bytes\": %" PRIu64,
                        hbmi_event_number(t, x->last_oom_event), t->has_time ? x->last_oom_time_ns : 0,
                        x->largest_oom_bytes);
            } else {
                fputs(", \"first_oom\": null", f);
            }
            fputc('}', f);
        }
        fputc(']', f);
        hbm_status ts = tw >= 0 ? twin_json(t, device_spec, r[tw].config, f) : HBM_OK;
        fputs("}\n", f);
        return ts;
    }
    char a[32], b[32], c[32], name[80], cfg[64], w[160], rec[200] = "";
    if (tw >= 0) hbm_torch_recorded_settings(t, rec, sizeof rec);
    hbmi_fit(name, sizeof name, t->name, 48, 1);
    fprintf(f, "replay of %s (%s%s%s%zu events", name, t->device[0] ? "device " : "", t->device,
            t->device[0] ? ", " : "", t->count - t->history_start);
    if (t->history_start) fprintf(f, " after %zu rebuilt from its segments", t->history_start);
    char dflt[96];
    const char *why = NULL;
    hbm_replay_default_device(t, dflt, sizeof dflt, &why);
    fprintf(f, ")\n  on %s", hbmi_device_words(device_spec, w, sizeof w));
    if (!strcmp(dflt, device_spec)) fprintf(f, " (%s; --device sets another)", why);
    fputc('\n', f);
    if (tw >= 0) {
        hbmi_fit(w, sizeof w, rec[0] ? rec : "PyTorch's defaults", 60, 0);
        fprintf(f, "  torch rows: the recorded settings (%s) unless a row sets others\n", w);
    }
    fprintf(f, "\n%-28s %11s %11s %6s %7s  %s\n", "configuration", "peak held", "reserved", "frag", "calls",
            "first OOM");
    if (tw >= 0) {
        hbm_status rs = recorded_row(t, f);
        if (rs) return rs;
    }
    for (size_t i = 0; i < n; i++) {
        const hbm_replay_result *x = &r[i];
        row_label(x->config, tw >= 0 ? rec : NULL, cfg, sizeof cfg);
        if (x->status) {
            fprintf(f, "%-28s %s: %s\n", cfg, hbm_status_str(x->status), x->error);
            continue;
        }
        col_size(a, sizeof a, x->peak_in_use);
        col_size(b, sizeof b, x->peak_reserved);
        fprintf(f, "%-28s %11s %11s %5.1f%% %7" PRIu64 "  ", cfg, a, b, 100.0 * x->frag_at_peak, x->device_calls);
        if (x->first_oom_event >= 0)
            fprintf(f, "%s: %s (%" PRIu64 " OOM%s)\n", hbmi_event_when_short(t, x->first_oom_event, x->first_oom_time_ns, w, sizeof w),
                    hbm_size_xla((int64_t)x->first_oom_bytes, c), x->ooms, x->ooms == 1 ? "" : "s");
        else
            fprintf(f, "none\n");
    }
    for (size_t i = 0; i < n; i++) { /* the rows whose label had to be cut, whole */
        row_label(r[i].config, tw >= 0 ? rec : NULL, cfg, sizeof cfg);
        if (strstr(cfg, "...")) fprintf(f, "  %s = %s\n", cfg, r[i].config);
    }
    if (bound) {
        fprintf(f, "\n%-28s %11s  (max bytes live at once: no allocator can peak lower)\n", "optimal packing bound",
                hbm_size_xla((int64_t)bound, a));
        if (packed)
            fprintf(f, "%-28s %11s  (a static placement of every buffer, knowing the future%s)\n", "best packing found",
                    hbm_size_xla((int64_t)packed, a), packed == bound ? ": optimal" : "");
        hbmi_text_plan_peak(f, t);
    }
    if (tw >= 0) {
        hbm_status ts = twin_text(t, device_spec, &r[tw], f);
        if (ts) return ts;
    }
    for (size_t i = 0; i < n; i++) {
        if (r[i].status || r[i].first_oom_event < 0) continue;
        fprintf(f, "\n--- first OOM with %s: %s ---\n%s\n", r[i].config,
                hbmi_event_when(t, r[i].first_oom_event, r[i].first_oom_time_ns, w, sizeof w),
                r[i].first_oom_report ? r[i].first_oom_report : "");
        if (r[i].ooms > 1) /* the later ones, summarised */
            fprintf(f, "(then %" PRIu64 " more OOMs, the last at %s; the largest request %s)\n", r[i].ooms - 1,
                    hbmi_event_when(t, r[i].last_oom_event, r[i].last_oom_time_ns, w, sizeof w),
                    hbm_size_xla((int64_t)r[i].largest_oom_bytes, c));
    }
    return HBM_OK;
}
