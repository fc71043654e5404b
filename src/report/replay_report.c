/* replay_report.c - the replay composed and written: a request's configurations replayed
 * by the engine (trace/replay/replay.c), each once, with the OOM report and its checked
 * advice at the first OOM; what PyTorch recorded and the twin's match (torch_twin.c) for a
 * PyTorch snapshot; then the table or the JSON object, written from the result alone.
 * --suggest (PyTorch settings that avoid the OOM) is a request of its own kind here. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/replay.h"
#include "hbm/size.h"
#include "alloc/oom_report.h"
#include "trace/replay/replay_internal.h"
#include "trace/replay/twin_internal.h"

#define REPLAY_MAX_CONFIGS 64

/* ---- configurations as values ------------------------------------------------------------- */

static hbm_status config_value(const char *text, int recorded, hbm_replay_config *out) {
    memset(out, 0, sizeof *out);
    if (snprintf(out->text, sizeof out->text, "%s", text) >= (int)sizeof out->text)
        return hbmi_error(HBM_ERR_INVALID, "configuration '%.40s...' longer than %zu characters", text, sizeof out->text - 1);
    out->recorded = recorded;
    if ((out->status = hbm_config_resolve(text, &out->cfg)))
        snprintf(out->error, sizeof out->error, "%s", hbm_last_error());
    return HBM_OK;
}

hbm_status hbm_replay_config_make(const hbm_trace *t, const char *config, hbm_replay_config *out) {
    if (!t || !config || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_config_make: NULL argument");
    char rec[200], full[320];
    /* allocator=torch on a PyTorch snapshot: under the settings it was recorded with, the
     * configuration's own items after them (later items win); the settings found only for
     * such a configuration (where the snapshot does not say them, a walk of its events) */
    if (!strcmp(t->source, "torch") && !strncmp(config, "allocator=torch", 15) && (!config[15] || config[15] == ',') &&
        !hbm_torch_recorded_settings(t, rec, sizeof rec) && rec[0] && !hbmi_torch_config_with(rec, config, full, sizeof full))
        return config_value(full, 1, out);
    return config_value(config, 0, out);
}

/* ---- the rows: each configuration once, its first OOM reported ---------------------------- */

typedef struct rows_ctx {
    const hbmi_replay_plan *plan;
    const char *device;
    int report;             /* the first OOM's report and its checked advice */
    hbm_oom_diagnosis diag; /* of the current row's first OOM */
    size_t advice;          /* where its report's advice begins (hbmi_oom_text) */
} rows_ctx;

/* The OOM report of the allocator's last failure, with where its advice begins; the last
 * message if the report cannot be written (no memory). */
static void on_first_oom(void *user, hbm_allocator *a, hbm_replay_result *r) {
    rows_ctx *c = user;
    hbmi_oom_text x;
    if (hbmi_oom_text_get(a, &x) && hbmi_oom_text_of(hbm_last_error(), &x)) x.text = NULL;
    r->first_oom_report = x.text; /* the result's, its advice's place kept beside it here */
    c->advice = x.advice;
    hbm_oom_diagnose(a, &c->diag);
}

/* The first OOM report's advice, checked: the replay again with the advised setting, up
 * to its first OOM. When it runs to its end, the advice stands (and says so); else the
 * report says that no such setting fits and by how much the program is over the device. */
static void check_advice(rows_ctx *c, const hbm_replay_config *cfg, hbm_replay_result *r) {
    const hbm_trace *t = c->plan->t;
    const char *item = c->diag.config, *env = c->diag.env;
    char verdict[512], a[32], b[32];
    hbm_replay_config *with = hbmi_malloc(sizeof *with);
    if (!with) return;
    *with = *cfg; /* and the advised item after its own (its text is not shown) */
    int n = 0;
    if (!r->first_oom_report) {
        hbmi_free(with);
        return;
    }
    hbm_replay_result v;
    memset(&v, 0, sizeof v);
    hbmi_replay_hooks stop = {.stop_at_first_oom = 1}; /* where it fails first is all the verdict needs */
    if (strlen(cfg->text) + 1 + strlen(item) >= 400 || hbm_config_apply(&with->cfg, item) ||
        hbmi_replay_one(c->plan, c->device, with, &stop, &v)) {
        /* only advice that completes its replay is printed: this one could not be tried */
        snprintf(verdict, sizeof verdict, "  No setting advised: %s could not be tried on this replay (%s).\n", env,
                 hbm_last_error());
    } else if (v.first_oom_event < 0) {
        snprintf(verdict, sizeof verdict, "  Try: %s (checked: the replay with %s runs to its end, peak reserved %s)\n",
                 env, item, hbm_size_xla((int64_t)v.peak_reserved, a));
    } else {
        hbm_device *d;
        uint64_t dfree = 0, total = 0, bound = c->plan->lower_bound;
        char when[400];
        if (!hbm_device_open(c->device, &d)) hbm_device_mem_info(d, &dfree, &total), hbm_device_close(d);
        n = snprintf(verdict, sizeof verdict, "  No setting of this kind fits: with %s the replay still runs out of memory at %s.\n",
                     item, hbmi_event_when(t, v.first_oom_event, v.first_oom_time_ns, when, sizeof when));
        if (n > 0 && (size_t)n < sizeof verdict && bound > total)
            snprintf(verdict + n, sizeof verdict - (size_t)n, "  The program holds %s at once, %s more than the device: a larger device\n"
                     "  or a smaller step (batch, sequence length, rematerialization).\n",
                     hbm_size_xla((int64_t)bound, a), hbm_size_xla((int64_t)(bound - total), b));
    }
    hbm_replay_result_release(&v);
    hbmi_free(with);
    hbmi_oom_text x = {r->first_oom_report, c->advice};
    if (!hbmi_oom_text_advise(&x, verdict)) r->first_oom_report = x.text; /* else left as it was */
}

/* Every configuration once, on the plan's trace. Returns the first failure. */
static hbm_status run_rows(rows_ctx *c, const hbm_replay_config *cfgs, size_t n, hbm_replay_result *res) {
    hbm_status first = HBM_OK;
    for (size_t i = 0; i < n; i++) {
        memset(&c->diag, 0, sizeof c->diag);
        hbmi_replay_hooks h = {.on_first_oom = c->report ? on_first_oom : NULL, .user = c};
        hbm_status rs = hbmi_replay_one(c->plan, c->device, &cfgs[i], &h, &res[i]);
        if (!rs && c->report && c->diag.config[0]) check_advice(c, &cfgs[i], &res[i]);
        if (rs && !first) first = rs;
    }
    return first;
}

/* A result before its replay: nothing counted, no OOM, its configuration's text. */
static void result_init(hbm_replay_result *r, const char *config) {
    memset(r, 0, sizeof *r);
    r->first_oom_event = r->last_oom_event = -1;
    hbmi_strlcpy_cut(r->config, sizeof r->config, config);
}

/* configs[0..n) replayed on t (the pairing once for all); reports: the first OOM's. With
 * bounds, also hbm_replay_bounds_get's (packing up to max_buffers). */
static hbm_status replay_values(const hbm_trace *t, const char *device_spec, const hbm_replay_config *cfgs, size_t n,
                                hbm_replay_result *results, int reports, hbm_replay_bounds *bounds, size_t max_buffers) {
    for (size_t c = 0; c < n; c++) result_init(&results[c], cfgs[c].text);
    hbmi_replay_plan plan;
    hbm_status s = hbmi_replay_prepare(t, &plan);
    if (s) {
        for (size_t c = 0; c < n; c++) hbmi_replay_result_fail(&results[c], s);
        if (bounds) memset(bounds, 0, sizeof *bounds);
        return s;
    }
    /* hbm pack's default budget of counted work for the packing: the same figure on every run */
    if (bounds && hbmi_replay_bounds(&plan, 0, max_buffers, bounds)) memset(bounds, 0, sizeof *bounds);
    rows_ctx ctx = {.plan = &plan, .device = device_spec, .report = reports};
    s = run_rows(&ctx, cfgs, n, results);
    hbmi_replay_plan_free(&plan);
    return s;
}

hbm_status hbm_replay_many(const hbm_trace *t, const char *device_spec, const char *const *configs, size_t n,
                           hbm_replay_result *results) {
    if (!t || !device_spec || (n && (!configs || !results)))
        return hbmi_error(HBM_ERR_INVALID, "hbm_replay: NULL argument");
    for (size_t c = 0; c < n; c++) {
        result_init(&results[c], configs[c] ? configs[c] : "");
        if (!configs[c]) return hbmi_error(HBM_ERR_INVALID, "hbm_replay: NULL configuration");
    }
    hbm_replay_config *v = hbmi_calloc(n + 1, sizeof *v);
    hbm_status s = v ? HBM_OK : hbmi_error(HBM_ERR_NOMEM, "out of host memory for a replay");
    for (size_t c = 0; c < n && !s; c++) s = config_value(configs[c], 0, &v[c]);
    if (s) {
        for (size_t c = 0; c < n; c++) hbmi_replay_result_fail(&results[c], s);
    } else {
        s = replay_values(t, device_spec, v, n, results, 1, NULL, 0);
    }
    hbmi_free(v);
    return s;
}

hbm_status hbm_replay(const hbm_trace *t, const char *device_spec, const char *config, hbm_replay_result *r) {
    if (!r) return hbmi_error(HBM_ERR_INVALID, "hbm_replay: NULL result");
    return hbm_replay_many(t, device_spec, &config, 1, r);
}

/* ---- a request -------------------------------------------------------------------------------- */

/* The row the twin follows: the first torch row, on a PyTorch snapshot. */
static int twin_row(const hbm_trace *t, const hbm_replay_result *r, size_t n) {
    if (strcmp(t->source, "torch")) return -1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(r[i].allocator, "torch")) return (int)i;
    return -1;
}

/* What PyTorch did and how closely the twin of row tw follows it. */
static hbm_status twin_part(hbm_replay_report *rep, int tw) {
    const hbm_trace *t = rep->trace;
    rep->twin_row = tw;
    if (tw < 0) return HBM_OK;
    hbm_torch_recorded_settings(t, rep->recorded_settings, sizeof rep->recorded_settings);
    hbm_status s = hbmi_torch_recorded_scan(t, &rep->recorded, &rep->recorded_calls); /* one walk for both */
    if (s) return s;
    rep->twin_status = hbmi_twin_match(t, rep->recorded_settings, rep->rows[tw].config, rep->device, &rep->twin);
    if (rep->twin_status == HBM_ERR_OOM) snprintf(rep->twin_why, sizeof rep->twin_why, "%s", hbm_last_error());
    return HBM_OK;
}

void hbm_replay_report_release(hbm_replay_report *r) {
    if (!r) return;
    for (size_t i = 0; r->rows && i < r->n; i++) hbm_replay_result_release(&r->rows[i]);
    hbmi_free(r->rows);
    r->rows = NULL;
    r->n = 0;
}

hbm_status hbm_replay_run(const hbm_replay_request *q, hbm_replay_report *out) {
    if (!q || !out || !q->trace || (q->n && !q->configs)) return hbmi_error(HBM_ERR_INVALID, "replay: NULL argument");
    memset(out, 0, sizeof *out);
    out->twin_row = -1;
    out->trace = q->trace;
    if (q->n > REPLAY_MAX_CONFIGS)
        return hbmi_error(HBM_ERR_INVALID, "replay: %zu configurations, at most %d", q->n, REPLAY_MAX_CONFIGS);
    const hbm_trace *t = q->trace;
    char dflt[sizeof out->device];
    hbm_status s = hbm_replay_default_device(t, dflt, sizeof dflt, &out->device_why);
    if (!s && q->device) s = hbm_replay_device_spec(q->device, out->device, sizeof out->device);
    else if (!s) snprintf(out->device, sizeof out->device, "%s", dflt);
    if (s) return s;
    out->device_is_default = !strcmp(dflt, out->device);
    if (!(out->rows = hbmi_calloc(q->n + 1, sizeof *out->rows))) return hbmi_error(HBM_ERR_NOMEM, "replay: out of host memory");
    out->n = q->n;
    replay_values(t, out->device, q->configs, q->n, out->rows, 1, &out->bounds, q->bound_buffers); /* failures are in rows */
    if (q->twin && (s = twin_part(out, twin_row(t, out->rows, out->n)))) hbm_replay_report_release(out);
    return s;
}

/* ---- writing ----------------------------------------------------------------------------------- */

static void col_size(char *buf, size_t cap, uint64_t v) {
    char h[32];
    snprintf(buf, cap, "%s", hbm_size_xla((int64_t)v, h));
}

/* The table's first row: what PyTorch did, from the snapshot's own events. "peak held" is
 * the most bytes its live blocks held at once (as the other rows'), "reserved" its peak
 * reserved, "calls" the segment events (cudaMalloc / cudaFree, map / unmap), "frag"
 * unknown (the snapshot does not say which free block was largest). */
static void recorded_row(const hbm_trace *t, const hbm_torch_recorded *rec, uint64_t calls, FILE *f) {
    char a[32], b[32], c[32], w[64];
    col_size(a, sizeof a, rec->peak_in_use);
    col_size(b, sizeof b, rec->peak_reserved);
    fprintf(f, "%-28s %11s %11s %6s %7" PRIu64 "  ", "recorded (PyTorch)", a, b, "-", calls);
    if (rec->oom_event >= 0)
        fprintf(f, "%s: %s\n", hbmi_event_when(t, rec->oom_event, t->events[rec->oom_event].time_ns, w, sizeof w),
                hbm_size_xla((int64_t)rec->oom_bytes, c));
    else
        fputs("none\n", f);
    if (rec->peak_event >= 0) {
        int64_t ev = hbmi_event_number(t, rec->peak_event);
        if (ev < 0) snprintf(w, sizeof w, "before the history");
        else snprintf(w, sizeof w, "event %" PRId64, ev);
        /* reserved minus the bytes requested (memory_viz's in-use curve), not PyTorch's
         * "reserved but unallocated", which counts blocks as held (rounded to 512 B) */
        fprintf(f, "  PyTorch's peak reserved (%s): %s of it not requested, %" PRIu64 " segment%s\n", w,
                hbm_size_xla((int64_t)rec->unallocated_at_peak, c), rec->segments_at_peak,
                rec->segments_at_peak == 1 ? "" : "s");
    }
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

/* The columns s takes as hbmi_text_fit shows it (a control character as \xNN). */
static size_t columns(const char *s) {
    size_t cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        cols += *p < 0x20 || *p == 0x7f ? 4 : (*p & 0xC0) != 0x80;
    return cols;
}

/* A row's label in 28 columns, and whether it had to be cut. A configuration that does not
 * fit loses what every torch row shares (the recorded settings, said above the table) and
 * "allocator=", then its middle, so what tells the rows apart stays visible. */
static int row_label(const char *cfg, const char *recorded, char *out, size_t cap) {
    if (strlen(cfg) <= 28) {
        hbmi_text_fit(out, cap, cfg, 28, 0);
        return columns(cfg) > 28;
    }
    char it[24][96], rec[24][96], short_[300] = "";
    size_t n = config_items(cfg, it, 24), nr = recorded ? config_items(recorded, rec, 24) : 0, len = 0;
    int torch = n && !strcmp(it[0], "allocator=torch");
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) { /* the items not among the recorded settings */
        int skip = 0;
        for (size_t k = 0; torch && i && k < nr && !skip; k++) skip = !strcmp(it[i], rec[k]);
        if (skip) it[i][0] = 0;
        else kept++;
    }
    for (size_t i = 0; i < n && len < sizeof short_; i++) {
        if (!it[i][0]) continue;
        /* "allocator=" goes where other items follow: a row of the recorded settings alone
         * reads "allocator=torch", as it does when the settings are PyTorch's defaults */
        const char *x = strncmp(it[i], "allocator=", 10) || kept == 1 ? it[i] : it[i] + 10;
        len += (size_t)snprintf(short_ + len, sizeof short_ - len, "%s%s", len ? "," : "", x);
    }
    hbmi_text_fit(out, cap, short_, 28, 1);
    return columns(short_) > 28;
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

/* The JSON members "recorded": {...}, "match": {...} (a leading ", "): the one writer of
 * what PyTorch did and the twin's match, for hbm replay --json and hbm_torch_replay_write. */
static void twin_json(const hbm_trace *t, const hbm_torch_recorded *r, const hbm_torch_match *m, FILE *f) {
    fprintf(f, ", \"recorded\": {\"peak_bytes_in_use\": %" PRIu64 ", \"peak_bytes_reserved\": %" PRIu64
               ", \"peak_event\": %" PRId64 ", \"requested_bytes_at_peak\": %" PRIu64
               ", \"reserved_unallocated_at_peak\": %" PRIu64 ", \"segments_at_peak\": %" PRIu64 ", \"oom\": ",
            r->peak_in_use, r->peak_reserved, hbmi_event_number(t, r->peak_event), r->requested_at_peak, r->unallocated_at_peak,
            r->segments_at_peak);
    if (r->oom_event >= 0) fprintf(f, "{\"event\": %" PRId64 ", \"bytes\": %" PRIu64 "}}", hbmi_event_number(t, r->oom_event), r->oom_bytes);
    else fputs("null}", f);
    fputs(", \"match\": {\"config\": ", f);
    hbmi_json_str(f, m->config);
    fputs(", \"device\": ", f);
    hbmi_json_str(f, m->device);
    fputs(", \"result\": ", f);
    hbm_torch_match_write(m, f, 1);
    fputc('}', f);
}

static hbm_status write_json(const hbm_replay_report *rep, FILE *f) {
    const hbm_trace *t = rep->trace;
    fputs("{\"trace\": ", f);
    hbmi_json_str(f, t->name);
    fputs(", \"device\": ", f);
    hbmi_json_str(f, rep->device);
    fprintf(f, ", \"events\": %zu, \"optimal_bound_bytes\": %" PRIu64 ", \"packed_bytes\": %" PRIu64, t->count,
            rep->bounds.lower_bound, rep->bounds.packed);
    hbmi_json_plan_peak(f, t);
    fputs(", \"results\": [", f);
    for (size_t i = 0; i < rep->n; i++) {
        const hbm_replay_result *x = &rep->rows[i];
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
                    hbmi_event_number(t, x->last_oom_event), t->has_time ? x->last_oom_time_ns : 0, x->largest_oom_bytes);
        } else {
            fputs(", \"first_oom\": null", f);
        }
        fputc('}', f);
    }
    fputc(']', f);
    if (rep->twin_row >= 0 && !rep->twin_status) twin_json(t, &rep->recorded, &rep->twin, f);
    if (rep->twin_row >= 0 && rep->twin_status == HBM_ERR_OOM) { /* the rows stand; the twin could not start */
        fputs(", \"match\": null, \"match_not_run\": ", f);
        hbmi_json_str(f, rep->twin_why);
    }
    fputs("}\n", f);
    return rep->twin_row >= 0 && rep->twin_status != HBM_ERR_OOM ? rep->twin_status : HBM_OK;
}

hbm_status hbm_replay_report_write(const hbm_replay_report *rep, FILE *f, int json) {
    if (!rep || !rep->trace || (rep->n && !rep->rows) || !f)
        return hbmi_error(HBM_ERR_INVALID, "hbm_replay_report_write: NULL argument");
    if (json) return write_json(rep, f);
    const hbm_trace *t = rep->trace;
    const hbm_replay_result *r = rep->rows;
    size_t n = rep->n;
    int tw = rep->twin_row;
    uint64_t bound = rep->bounds.lower_bound, packed = rep->bounds.packed;
    const char *rec = tw >= 0 ? rep->recorded_settings : NULL;
    char a[32], b[32], c[32], name[80], cfg[64], w[160];
    hbmi_text_fit(name, sizeof name, t->name, 48, 1);
    fprintf(f, "replay of %s (%s%s%s%zu events", name, t->device[0] ? "device " : "", t->device,
            t->device[0] ? ", " : "", t->count - t->history_start);
    if (t->history_start)
        fprintf(f, " after %zu rebuilt from %s", t->history_start,
                strcmp(t->source, "xprof") ? "its segments" : "what was in use before its first event");
    fprintf(f, ")\n  on %s", device_words(rep->device, w, sizeof w));
    if (rep->device_is_default) fprintf(f, " (%s; --device sets another)", rep->device_why);
    fputc('\n', f);
    if (tw >= 0) {
        hbmi_text_fit(w, sizeof w, rec[0] ? rec : "PyTorch's defaults", 60, 0);
        fprintf(f, "  torch rows: the recorded settings (%s) unless a row sets others\n", w);
    }
    fprintf(f, "\n%-28s %11s %11s %6s %7s  %s\n", "configuration", "peak held", "reserved", "frag", "calls",
            "first OOM");
    if (tw >= 0) recorded_row(t, &rep->recorded, rep->recorded_calls, f);
    for (size_t i = 0; i < n; i++) {
        const hbm_replay_result *x = &r[i];
        row_label(x->config, rec, cfg, sizeof cfg);
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
    for (size_t i = 0; i < n; i++) /* the rows whose label had to be cut, whole */
        if (row_label(r[i].config, rec, cfg, sizeof cfg)) fprintf(f, "  %s = %s\n", cfg, r[i].config);
    if (bound) {
        fprintf(f, "\n%-28s %11s  (max bytes live at once: no allocator can peak lower)\n", "optimal packing bound",
                hbm_size_xla((int64_t)bound, a));
        if (packed)
            fprintf(f, "%-28s %11s  (a static placement of every buffer, knowing the future%s)\n", "best packing found",
                    hbm_size_xla((int64_t)packed, a), packed == bound ? ": optimal" : "");
        hbmi_text_plan_peak(f, t);
    }
    if (tw >= 0 && !r[tw].status) { /* the twin against what PyTorch did, and where they first part, why */
        if (rep->twin_status == HBM_ERR_OOM) {
            fputs("\ntwin (the torch row) against PyTorch: not run: ", f);
            hbmi_fputs_visible(rep->twin_why, f);
            fputc('\n', f);
        } else if (rep->twin_status) {
            return rep->twin_status;
        } else {
            fprintf(f, "\ntwin (the torch row) against PyTorch: ");
            hbm_torch_match_write(&rep->twin, f, 0);
            fputc('\n', f);
            hbm_torch_match_explain(t, &rep->twin, f);
        }
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

/* Results made elsewhere (hbm_replay_many), written as a request's report would be. */
hbm_status hbm_replay_write(const hbm_trace *t, const char *device_spec, const hbm_replay_result *r, size_t n,
                            const hbm_replay_bounds *bounds, FILE *f, int json) {
    if (!t || !r || !f || !device_spec) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_write: NULL argument");
    hbm_replay_report rep;
    memset(&rep, 0, sizeof rep);
    rep.trace = t;
    snprintf(rep.device, sizeof rep.device, "%s", device_spec);
    rep.rows = (hbm_replay_result *)r; /* read only */
    char dflt[sizeof rep.device];
    if (!hbm_replay_default_device(t, dflt, sizeof dflt, &rep.device_why)) rep.device_is_default = !strcmp(dflt, device_spec);
    rep.n = n;
    if (bounds) rep.bounds = *bounds;
    hbm_status s = twin_part(&rep, twin_row(t, r, n));
    return s ? s : hbm_replay_report_write(&rep, f, json);
}

hbm_status hbm_torch_replay_write(const hbm_trace *t, FILE *f, int json) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_replay_write: NULL argument");
    hbm_torch_recorded r;
    hbm_torch_match m;
    hbm_status s = hbm_torch_recorded_get(t, &r);
    if (!s) s = hbm_replay_torch_match(t, NULL, NULL, &m);
    if (s) return s;
    if (json) {
        twin_json(t, &r, &m, f);
        return HBM_OK;
    }
    /* the recorded row is the table's first (hbm_replay_report_write) */
    fputc('\n', f);
    fprintf(f, "twin %s on %s: ", m.config, m.device);
    hbm_torch_match_write(&m, f, 0);
    if (m.allocs_before_history) fprintf(f, " (%" PRIu64 " in segments from before the history)", m.allocs_before_history);
    fputc('\n', f);
    return HBM_OK;
}

/* ---- --suggest ------------------------------------------------------------------------------ */

static void add_candidate(hbm_torch_suggestion *s, const char *base, const char *item, const char *env) {
    if (s->n >= HBM_TORCH_SUGGEST_MAX) return;
    hbm_torch_candidate *c = &s->c[s->n++];
    if (snprintf(c->config, sizeof c->config, "%s%s%s", base, *item ? "," : "", item) >= (int)sizeof c->config ||
        snprintf(c->env, sizeof c->env, "%s", env) >= (int)sizeof c->env)
        s->n--; /* too long to say whole: not a candidate */
}

hbm_status hbm_torch_suggest(const hbm_trace *t, const char *device_spec, hbm_torch_suggestion *out) {
    if (!t || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_suggest: NULL argument");
    memset(out, 0, sizeof *out);
    out->best = -1;
    if (strcmp(t->source, "torch"))
        return hbmi_error(HBM_ERR_INVALID, "%s is not a PyTorch snapshot: --suggest changes PYTORCH_CUDA_ALLOC_CONF "
                          "(for an HLO module, 'hbm fit' finds the settings that fit; for a JAX trace, compare "
                          "settings with --config)", t->name);
    /* what is rebuilt from the segments is the state when the snapshot was taken, in no
     * order a program made it: a setting tried on it says nothing of the program */
    if (t->count <= t->history_start)
        return hbmi_error(HBM_ERR_INVALID, "%s%s%s has no allocation history (0 events): nothing to replay, so no "
                          "setting to suggest; its %zu blocks are only the state when the snapshot was taken (record "
                          "the history with torch.cuda.memory._record_memory_history() before the run)",
                          t->name, t->device[0] ? ", device " : "", t->device, t->history_start);
    if (device_spec) snprintf(out->device, sizeof out->device, "%s", device_spec);
    else hbm_replay_default_device(t, out->device, sizeof out->device, NULL);
    /* the base: allocator=torch under the recorded settings; whether they have
     * expandable segments, as the configuration reads them */
    char base[sizeof out->c[0].config];
    if (hbm_torch_config_with_recorded(t, "allocator=torch", base, sizeof base)) snprintf(base, sizeof base, "allocator=torch");
    hbm_config bc;
    int has_map = !hbm_config_resolve(base, &bc) && bc.expandable_segments;
    char env0[sizeof out->c[0].env];
    if (t->torch_settings[0]) {
        if (snprintf(env0, sizeof env0, "(recorded: %s)", t->torch_settings) >= (int)sizeof env0) env0[sizeof env0 - 1] = 0;
    } else snprintf(env0, sizeof env0, "%s", has_map ? "expandable_segments:True (recorded)" : "(recorded: PyTorch's defaults)");
    add_candidate(out, base, "", env0);
    if (has_map) add_candidate(out, base, "expandable_segments=false", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False");
    else add_candidate(out, base, "expandable_segments=true", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    static const unsigned splits[] = {20, 32, 64, 128, 256, 512, 1024};
    for (size_t k = 0; k < sizeof splits / sizeof splits[0]; k++) {
        char item[64], env[96];
        snprintf(item, sizeof item, "max_split_size_mb=%u", splits[k]);
        snprintf(env, sizeof env, "PYTORCH_CUDA_ALLOC_CONF=%smax_split_size_mb:%u", has_map ? "expandable_segments:True," : "",
                 splits[k]);
        add_candidate(out, base, item, env);
    }
    /* PyTorch puts no limit on its cudaMallocAsync pool: the whole device */
    add_candidate(out, "allocator=cuda_async,fraction=1", "", "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync");
    hbm_device *dev;
    hbm_status s = hbm_device_open(out->device, &dev);
    if (s) return s;
    uint64_t dfree = 0;
    s = hbm_device_mem_info(dev, &dfree, &out->capacity);
    hbm_device_close(dev);
    if (s) return s;
    hbm_replay_config *cfg = hbmi_calloc(HBM_TORCH_SUGGEST_MAX, sizeof *cfg);
    hbm_replay_result res[HBM_TORCH_SUGGEST_MAX];
    if (!cfg) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for --suggest");
    for (size_t k = 0; k < out->n && !s; k++) s = config_value(out->c[k].config, 0, &cfg[k]);
    hbm_replay_bounds b = {0};
    /* each candidate once, without OOM reports (only whether it runs out of memory counts);
     * each result says whether it ran */
    if (!s) replay_values(t, out->device, cfg, out->n, res, 0, &b, 0);
    out->lower_bound = b.lower_bound;
    hbmi_free(cfg);
    if (s) return s;
    for (size_t k = 0; k < out->n; k++) {
        hbm_torch_candidate *c = &out->c[k];
        c->status = res[k].status;
        c->ooms = res[k].ooms;
        c->peak_reserved = res[k].peak_reserved;
        c->peak_in_use = res[k].peak_in_use;
        c->frag_at_peak = res[k].frag_at_peak;
        hbm_replay_result_release(&res[k]);
        if (k && !c->status && !c->ooms &&
            (out->best < 0 || c->peak_reserved < out->c[out->best].peak_reserved))
            out->best = (int)k;
    }
    if (!out->c[0].status && !out->c[0].ooms) out->best = 0; /* nothing to avoid */
    /* a request that failed needed its bytes on top of what was live then */
    hbmi_map live;
    hbmi_map_init(&live);
    uint64_t now = 0, v;
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        uint64_t size = e->requested ? e->requested : e->size;
        if (e->kind == HBM_EV_ALLOC) {
            if (!(s = hbmi_map_put(&live, e->addr, size))) now += size;
        } else if (e->kind == HBM_EV_FREE && hbmi_map_del(&live, e->addr, &v)) {
            now -= v;
        } else if (e->kind == HBM_EV_OOM && now + size > out->lower_bound) {
            out->lower_bound = now + size;
        }
    }
    hbmi_map_destroy(&live);
    if (s) return s;
    if (out->best < 0 && out->lower_bound > out->capacity) out->over_by = out->lower_bound - out->capacity;
    return HBM_OK;
}

hbm_status hbm_torch_suggest_write(const hbm_torch_suggestion *s, FILE *f, int json) {
    if (!s || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_suggest_write: NULL argument");
    char a[32], b[32];
    if (json) {
        fputs("{\"device\": ", f);
        hbmi_json_str(f, s->device);
        fprintf(f, ", \"capacity\": %" PRIu64 ", \"max_live_bytes\": %" PRIu64 ", \"suggestion\": ", s->capacity, s->lower_bound);
        if (s->best >= 0) {
            fputs("{\"env\": ", f);
            hbmi_json_str(f, s->c[s->best].env);
            fputs(", \"config\": ", f);
            hbmi_json_str(f, s->c[s->best].config);
            fprintf(f, ", \"peak_bytes_reserved\": %" PRIu64 ", \"fragmentation_at_peak\": %.6f}", s->c[s->best].peak_reserved,
                    s->c[s->best].frag_at_peak);
        } else {
            fputs("null", f);
        }
        fprintf(f, ", \"over_by_bytes\": %" PRIu64 ", \"candidates\": [", s->over_by);
        for (size_t k = 0; k < s->n; k++) {
            const hbm_torch_candidate *c = &s->c[k];
            fputs(k ? ", {\"config\": " : "{\"config\": ", f);
            hbmi_json_str(f, c->config);
            fputs(", \"env\": ", f);
            hbmi_json_str(f, c->env);
            fprintf(f, ", \"status\": \"%s\", \"ooms\": %" PRIu64 ", \"peak_bytes_reserved\": %" PRIu64
                       ", \"peak_bytes_in_use\": %" PRIu64 ", \"fragmentation_at_peak\": %.6f}",
                    hbm_status_name(c->status), c->ooms, c->peak_reserved, c->peak_in_use, c->frag_at_peak);
        }
        fputs("]}\n", f);
        return HBM_OK;
    }
    char w[160];
    fprintf(f, "on %s:\n", device_words(s->device, w, sizeof w));
    if (s->best == 0) {
        fprintf(f, "the recorded settings do not run out of memory here: nothing to change\n");
    } else if (s->best > 0) {
        const hbm_torch_candidate *c = &s->c[s->best];
        fprintf(f, "%s\n  avoids the OOM: peak reserved %s, fragmentation at the peak %.1f%%\n", c->env,
                hbm_size_xla((int64_t)c->peak_reserved, a), 100.0 * c->frag_at_peak);
    } else if (s->over_by) {
        fprintf(f, "no setting avoids the OOM: the program needs %s at once, %s more than the device holds\n",
                hbm_size_xla((int64_t)s->lower_bound, a), hbm_size_xla((int64_t)s->over_by, b));
    } else {
        fprintf(f, "no PyTorch setting avoids the OOM, though the most bytes needed at once (%s) fit: fragmentation\n",
                hbm_size_xla((int64_t)s->lower_bound, a));
    }
    /* the settings' column fits the longest within 100 columns; past that the rows drop the
     * variable's name, which the column's title then says once, and one still too long is
     * cut in the middle there and given whole under the table */
    static const char var[] = "PYTORCH_CUDA_ALLOC_CONF=";
    int ew = 56, strip = 0;
    for (size_t k = 0; k < s->n; k++) strip |= strlen(s->c[k].env) > 66;
    for (size_t k = 0; k < s->n; k++) {
        const char *e = s->c[k].env;
        size_t len = strlen(e) - (strip && !strncmp(e, var, sizeof var - 1) ? sizeof var - 1 : 0);
        if ((int)len > ew) ew = (int)len;
    }
    if (ew > 66) ew = 66;
    fprintf(f, "\n%-*s %6s %14s %10s\n", ew, strip ? var : "setting", "OOMs", "peak reserved", "frag@peak");
    int cut = 0;
    for (size_t k = 0; k < s->n; k++) {
        const hbm_torch_candidate *c = &s->c[k];
        char env[sizeof c->env + 8];
        hbmi_text_fit(env, sizeof env, c->env + (strip && !strncmp(c->env, var, sizeof var - 1) ? sizeof var - 1 : 0), ew, 1);
        cut |= strstr(c->env, env) == NULL;
        if (c->status) {
            fprintf(f, "%-*s %s\n", ew, env, hbm_status_str(c->status));
            continue;
        }
        fprintf(f, "%-*s %6" PRIu64 " %14s %9.1f%%\n", ew, env, c->ooms, hbm_size_xla((int64_t)c->peak_reserved, a),
                100.0 * c->frag_at_peak);
    }
    if (cut) {
        fprintf(f, "\nsettings cut above, in full:\n");
        for (size_t k = 0; k < s->n; k++)
            if ((int)strlen(s->c[k].env) - (strip && !strncmp(s->c[k].env, var, sizeof var - 1) ? (int)sizeof var - 1 : 0) > ew)
                fprintf(f, "  %s\n", s->c[k].env);
    }
    return HBM_OK;
}
