/* demo.c - what `hbm demo` tells (hbm_demo_write, hbm/json_api.h): a transformer training
 * step on a simulated device runs out of memory under the allocator configuration the
 * environment gives; the OOM report's advice is checked by running the step again (for a
 * fraction: the smallest, in steps of .01, that covers the whole step, not only the request
 * that failed), and the step is run with it (advice to change the allocator that still ends
 * at the framework's limit gets one more run, with that fraction checked); then the seed bug, an SVD whose U is declared
 * 300000x300000, and its fix are planned as `hbm plan --device V100-16GB` would.
 *
 * The advised setting goes to the allocator as the environment would give it: the step is
 * configured by hbm_config_from_env_fn over the caller's environment with one variable
 * set on top (HBM_MEM_FRACTION for a fraction, which wins over any fraction set; else the
 * variable the report names), so that nothing here changes the process's environment. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/hbm.h"
#include "alloc/oom_report.h"

/* The caller's environment with at most two variables set on top: an advised setting and,
 * when the step still runs out of memory with it, the fraction that run's report advises. */
typedef struct demo_env {
    hbm_getenv_fn fn; /* NULL: getenv */
    void *user;
    char name[2][128], value[2][128]; /* name "": none */
} demo_env;

static const char *demo_getenv(void *u, const char *name) {
    const demo_env *e = u;
    for (int i = 0; i < 2; i++)
        if (e->name[i][0] && !strcmp(e->name[i], name)) return e->value[i];
    return e->fn ? e->fn(e->user, name) : getenv(name);
}

static void env_set(demo_env *e, int slot, const char *name, size_t name_len, const char *value) {
    snprintf(e->name[slot], sizeof e->name[slot], "%.*s", (int)name_len, name);
    snprintf(e->value[slot], sizeof e->value[slot], "%s", value);
}

typedef struct demo {
    const char *spec;  /* the device as hbm_device_open takes it */
    const char *shown; /* as the caller named it */
    const hbm_timeline *tl;
    demo_env env;
    FILE *f;
} demo;

/* One run of the step on a fresh device and an allocator configured from d's environment,
 * as any program using libhbm is. verbose: the run's header, its result and any OOM report
 * (into *report when it is given, to be written once its advice is checked). *done: the step
 * completed. On an OOM, *diag holds the diagnosis. */
static hbm_status run_step(demo *d, int verbose, int attempt, int *done, hbm_oom_diagnosis *diag, uint64_t *capacity,
                           hbmi_oom_text *report) {
    hbm_device *dev;
    hbm_allocator *a;
    hbm_config cfg;
    *done = 0;
    hbm_status s = hbm_config_from_env_fn(&cfg, demo_getenv, &d->env);
    if (s) return s;
    if ((s = hbm_device_open(d->spec, &dev))) return s;
    hbm_device_info info;
    if (capacity && hbm_device_info_get(dev, &info) == HBM_OK) *capacity = info.total_bytes;
    if ((s = hbm_allocator_open_config(dev, &cfg, &a))) {
        hbm_device_close(dev);
        return s;
    }
    if (verbose) {
        const hbm_config *c = hbm_allocator_config(a);
        hbm_stats st;
        hbm_stats_get(a, &st);
        char l[32];
        fprintf(d->f, "== Run %d on %s: allocator=%s preallocate=%s fraction=%.2f -> limit %s\n", attempt, d->shown,
                hbm_allocator_kind_str(c->allocator), c->preallocate ? "true" : "false", c->fraction,
                hbm_size_human(st.bytes_limit, l));
    }
    hbm_run_result r;
    s = hbm_timeline_run(d->tl, a, &r);
    if (s == HBM_OK) {
        *done = 1;
        if (verbose) {
            char p1[32], p2[32];
            fprintf(d->f, "The step completed: %zu allocations and frees, peak in use %s, peak reserved %s.\n", r.events,
                    hbm_size_human(r.peak_in_use, p1), hbm_size_human(r.peak_reserved, p2));
        }
    } else if (s == HBM_ERR_OOM) {
        s = HBM_OK;
        if (verbose) fprintf(d->f, "Out of memory at event %zu. hbm's report:\n\n", r.events + 1);
        if (verbose && (!report || hbmi_oom_text_get(a, report))) { /* else written once its advice is checked */
            hbm_oom_report_write(a, d->f);
            fputc('\n', d->f);
        }
        hbm_oom_diagnose(a, diag);
    }
    hbm_allocator_close(a);
    hbm_device_close(dev);
    return s;
}

/* ".76" for 0.76, "1" for 1 */
static const char *fraction_text(double f, char buf[16]) {
    if (f >= 0.9999) return strcpy(buf, "1");
    snprintf(buf, 16, "%.2f", f);
    return buf[0] == '0' ? buf + 1 : buf;
}

/* After run `attempt` ran out of memory (diagnosis *dg, its report in report, owned): the
 * report with its advice checked, what follows from it, and the next run with the advice
 * (with prior, the advice an earlier run took, still set). A run with an allocator's advice
 * that still runs out of memory on a framework limit goes on once more, with the fraction
 * its report advises checked the same way. */
static hbm_status after_oom(demo *d, const hbm_oom_diagnosis *dg, hbmi_oom_text *rp, uint64_t peak, uint64_t capacity,
                            int *done, int attempt, const char *prior) {
    FILE *f = d->f;
    const char *report = rp->text; /* NULL: written already */
    char advice[320] = "", fa[64], f1[16], p[32], c[32];
    double f0;
    int from_env = 0; /* the advice is the report's variable, not a checked fraction */
    hbm_status s = HBM_OK;
    if (!strncmp(dg->config, "fraction=", 9) && (f0 = strtod(dg->config + 9, NULL)) > 0) {
        /* the report's suggestion covers the request that failed; find, by running the
         * step, the smallest fraction (in steps of .01) that covers the whole step */
        double found = 0;
        for (int k = (int)(f0 * 100 + 0.5); k <= 100 && !s && !found; k++) {
            hbm_oom_diagnosis d2;
            env_set(&d->env, 1, "HBM_MEM_FRACTION", 16, fraction_text(k / 100.0, f1));
            s = run_step(d, 0, 0, done, &d2, NULL, NULL);
            if (*done) found = k / 100.0;
        }
        d->env.name[1][0] = 0;
        char verdict[400] = "";
        if (found > 0 && found - f0 > 0.005)
            snprintf(verdict, sizeof verdict,
                     "  Try: XLA_PYTHON_CLIENT_MEM_FRACTION=%s (checked by running the step; %s\n"
                     "  covers only the request that failed)\n", fraction_text(found, f1), dg->env);
        else if (found <= 0 && !s)
            snprintf(verdict, sizeof verdict,
                     "  No fraction fits: even XLA_PYTHON_CLIENT_MEM_FRACTION=1 fails (the step holds %s\n"
                     "  at its peak, %s more than the device).\n", hbm_size_human(peak, p),
                     hbm_size_human(peak > capacity ? peak - capacity : 0, c));
        if (report && verdict[0] && !hbmi_oom_text_advise(rp, verdict)) report = rp->text;
        if (report) fprintf(f, "%s\n", report);
        if (found > 0) {
            snprintf(fa, sizeof fa, "XLA_PYTHON_CLIENT_MEM_FRACTION=%s", fraction_text(found, f1));
            snprintf(advice, sizeof advice, "%s%s%s", prior, prior[0] ? " " : "", fa);
            if (found - f0 > 0.005)
                fprintf(f, "The report's %s covers the request that failed; running the step shows that the\n"
                           "whole step needs %s.\n", dg->env, fa);
            env_set(&d->env, 1, "HBM_MEM_FRACTION", 16, fraction_text(found, f1)); /* wins over any fraction set */
        } else if (!s) {
            fprintf(f, "No setting makes this step fit %s: at its peak it holds %s live, and even\n"
                       "XLA_PYTHON_CLIENT_MEM_FRACTION=1 (the whole %s) fails. It needs a device with more\n"
                       "memory, or a smaller step (batch, sequence length, rematerialization).\n",
                    d->shown, hbm_size_human(peak, p), hbm_size_human(capacity, c));
        }
    } else if (dg->env[0] && !prior[0]) {
        if (report) fprintf(f, "%s\n", report); /* the run with this advice follows */
        snprintf(advice, sizeof advice, "%s", dg->env);
        const char *eq = strchr(dg->env, '=');
        if (eq) env_set(&d->env, 0, dg->env, (size_t)(eq - dg->env), eq + 1);
        from_env = 1;
    } else {
        if (report) fprintf(f, "%s\n", report);
        fprintf(f, "No allocator setting can help here (%s): the step holds %s at its peak on a %s\n"
                   "device. It needs a device with more memory, or a smaller step.\n",
                hbm_oom_cause_str(dg->cause), hbm_size_human(peak, p), hbm_size_human(capacity, c));
    }
    hbmi_oom_text_free(rp);
    if (!s && advice[0]) {
        hbm_oom_diagnosis d2;
        hbmi_oom_text report2 = {0};
        memset(&d2, 0, sizeof d2);
        fprintf(f, "Running again with %s ...\n\n", advice);
        s = run_step(d, 1, attempt + 1, done, &d2, NULL, &report2);
        if (!s && !*done && from_env && !strncmp(d2.config, "fraction=", 9))
            return after_oom(d, &d2, &report2, peak, capacity, done, attempt + 1, advice);
        if (report2.text) fprintf(f, "%s\n", report2.text);
        hbmi_oom_text_free(&report2);
        if (!s && !*done) fprintf(f, "The step still runs out of memory with %s.\n", advice);
    }
    return s;
}

/* Part two: the seed bug, predicted from the program text before anything runs. */
static hbm_status demo_plan(const char *dir, FILE *f) {
    static const char *const files[2] = {"svd_oom.hlo", "svd_fixed.hlo"};
    const hbm_device_model *dev = hbm_device_model_find("V100-16GB");
    if (!dev) return HBM_ERR_INVALID;
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(dir) + strlen(files[i]) + 2;
        char *path = hbmi_malloc(n);
        if (!path) return hbmi_error(HBM_ERR_NOMEM, "demo: out of memory");
        snprintf(path, n, "%s/%s", dir, files[i]);
        hbm_hlo_module *m;
        hbm_plan *p;
        hbm_status s = hbm_hlo_parse_file(path, &m);
        if (!s && (s = hbm_plan_run(m, NULL, &p))) hbm_hlo_module_free(m);
        if (s) {
            hbmi_free(path);
            return s;
        }
        fprintf(f, "\n== hbm plan %s --device %s\n", path, dev->name);
        hbmi_free(path);
        if (i == 0) {
            fprintf(f, "jnp.linalg.svd(A, full_matrices=False) on a 300000x50 f32 matrix.\n"
                       "Before anything runs, hbm predicts XLA's buffer assignment (the allocations of XLA's OOM\n"
                       "report in jax-ml/jax#9755, from a module rebuilt by hand, not the one XLA compiled):\n\n");
            hbm_plan_report_target(p, f, 5, dev->capacity_bytes, dev->default_fraction);
        } else {
            fprintf(f, "The same program with U declared as f32[300000,50] (what full_matrices=False needs):\n");
        }
        hbm_plan_explain(p, f, dev->capacity_bytes, dev->default_fraction, dev->name, 3);
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
    }
    return HBM_OK;
}

void hbm_demo_options_default(hbm_demo_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->device = "sim:80GiB";
}

hbm_status hbm_demo_write(const hbm_demo_options *o, FILE *f, int *completed) {
    if (!o || !f || !completed) return hbmi_error(HBM_ERR_INVALID, "hbm_demo_write: NULL argument");
    *completed = 0;
    demo d = {.shown = o->device ? o->device : "sim:80GiB", .env = {.fn = o->getenv_fn, .user = o->getenv_user}, .f = f};
    char spec[160];
    hbm_status s = hbm_replay_device_spec(d.shown, spec, sizeof spec);
    if (s) return s;
    d.spec = spec;
    hbm_config check; /* a bad variable is bad input, found before any work */
    if ((s = hbm_config_from_env_fn(&check, demo_getenv, &d.env))) return s;
    hbm_transformer_spec ts;
    hbm_transformer_spec_default(&ts);
    hbm_timeline *tl;
    if ((s = hbm_workload_transformer(&ts, &tl))) return s;
    d.tl = tl;
    hbm_transformer_describe(&ts, tl, f);
    uint64_t peak = 0, capacity = 0;
    hbm_timeline_peak(tl, &peak, NULL);
    int done = 0;
    hbm_oom_diagnosis dg;
    memset(&dg, 0, sizeof dg);
    hbmi_oom_text report = {0}; /* run 1's OOM report: its advice is checked before it is written */
    s = run_step(&d, 1, 1, &done, &dg, &capacity, &report);
    if (!s && !done) s = after_oom(&d, &dg, &report, peak, capacity, &done, 1, "");
    else hbmi_oom_text_free(&report);
    hbm_timeline_free(tl);
    if (s) return s;
    *completed = done;
    if (!o->examples)
        fprintf(f, "\n(The second part of the demo plans examples/svd_oom.hlo; run it from the source tree\n"
                   "or set HBM_EXAMPLES to the examples folder.)\n");
    else if (done && (s = demo_plan(o->examples, f)))
        return s;
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "demo: cannot write the output") : HBM_OK;
}
