/* replay_run.c - the replay engine over a request: a request's configurations replayed
 * (replay.c), each once, with the OOM report and its checked advice at the first OOM; what
 * PyTorch recorded and the twin's match (torch_twin.c) for a PyTorch snapshot, all into an
 * owned hbm_replay_report that report/replay_report.c writes without computing anything.
 * --suggest (PyTorch settings that avoid the OOM) is a request of its own kind here. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/oom_report.h"
#include "hbm/replay.h"
#include "hbm/size.h"
#include "trace/replay/replay_internal.h"
#include "trace/replay/replay_run.h"
#include "trace/replay/twin_internal.h"

#define REPLAY_MAX_CONFIGS HBMI_REPLAY_MAX_CONFIGS

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
    uint64_t *scratch; /* the plan's alloc slots, lent to its replays, which run in turn */
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
        hbmi_replay_one(c->plan, c->scratch, c->device, with, &stop, &v)) {
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
        hbm_status rs = hbmi_replay_one(c->plan, c->scratch, c->device, &cfgs[i], &h, &res[i]);
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
    rows_ctx ctx = {.plan = &plan, .scratch = plan.slot, .device = device_spec, .report = reports};
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

static atomic_size_t requests_run; /* hbmi_replay_requests */

size_t hbmi_replay_requests(void) { return atomic_load_explicit(&requests_run, memory_order_relaxed); }

hbm_status hbm_replay_run(const hbm_replay_request *q, hbm_replay_report *out) {
    if (!q || !out || !q->trace || (q->n && !q->configs)) return hbmi_error(HBM_ERR_INVALID, "replay: NULL argument");
    atomic_fetch_add_explicit(&requests_run, 1, memory_order_relaxed);
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
    hbmi_replay_device_words(out->device, out->device_words, sizeof out->device_words);
    if (!(out->rows = hbmi_calloc(q->n + 1, sizeof *out->rows))) return hbmi_error(HBM_ERR_NOMEM, "replay: out of host memory");
    out->n = q->n;
    replay_values(t, out->device, q->configs, q->n, out->rows, 1, &out->bounds, q->bound_buffers); /* failures are in rows */
    if (q->twin && (s = twin_part(out, twin_row(t, out->rows, out->n)))) hbm_replay_report_release(out);
    return s;
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
    atomic_fetch_add_explicit(&requests_run, 1, memory_order_relaxed);
    if (device_spec) snprintf(out->device, sizeof out->device, "%s", device_spec);
    else hbm_replay_default_device(t, out->device, sizeof out->device, NULL);
    hbmi_replay_device_words(out->device, out->device_words, sizeof out->device_words);
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

hbm_status hbmi_replay_twin(hbm_replay_report *rep) {
    return twin_part(rep, twin_row(rep->trace, rep->rows, rep->n));
}
