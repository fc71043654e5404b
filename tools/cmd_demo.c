/* cmd_demo.c - hbm demo: a transformer training step on a simulated 80 GiB GPU that runs
 * out of memory under JAX's defaults; the OOM report names the setting; the step is run
 * again with that setting. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* examples/ next to the source tree or the installed share/hbm/examples; NULL if none. */
static const char *examples_dir(char *buf, size_t cap) {
    const char *env = getenv("HBM_EXAMPLES");
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    const char *candidates[4][2] = {{env, ""}, {".", "/examples"}, {exe, "/../examples"}, {exe, "/../share/hbm/examples"}};
    for (int i = 0; i < 4; i++) {
        if (!candidates[i][0] || !*candidates[i][0]) continue;
        int len = snprintf(buf, cap, "%s%s", candidates[i][0], candidates[i][1]);
        char probe[PATH_MAX + 32];
        if (len < 0 || (size_t)len >= cap || snprintf(probe, sizeof probe, "%s/svd_oom.hlo", buf) >= (int)sizeof probe)
            continue; /* a path too long to hold */
        if (access(probe, R_OK) == 0) return buf;
    }
    return NULL;
}

/* Part two: the seed bug, predicted from the program text before anything runs. */
static int demo_plan(const char *dir) {
    static const char *const files[2] = {"svd_oom.hlo", "svd_fixed.hlo"};
    const hbm_device_model *dev = hbm_device_model_find("V100-16GB");
    if (!dev) return cli_fail("demo", HBM_ERR_INVALID);
    for (int i = 0; i < 2; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        hbm_hlo_module *m;
        hbm_plan *p;
        hbm_status s = hbm_hlo_parse_file(path, &m);
        if (s) return cli_fail("demo", s);
        if ((s = hbm_plan_run(m, NULL, &p))) {
            hbm_hlo_module_free(m);
            return cli_fail("demo", s);
        }
        printf("\n== hbm plan %s --device %s\n", path, dev->name);
        if (i == 0) {
            printf("jnp.linalg.svd(A, full_matrices=False) on a 300000x50 f32 matrix.\n"
                   "Before anything runs, hbm predicts XLA's buffer assignment (the allocations of XLA's OOM\n"
                   "report in jax-ml/jax#9755, from a module rebuilt by hand, not the one XLA compiled):\n\n");
            hbm_plan_report(p, stdout, 5);
        } else {
            printf("The same program with U declared as f32[300000,50] (what full_matrices=False needs):\n");
        }
        hbm_plan_explain(p, stdout, dev->capacity_bytes, dev->default_fraction, dev->name, 3);
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
    }
    return 0;
}

/* One run of the step on a fresh device and allocator configured from the environment, as
 * any program using libhbm is. verbose: the run's header, its result and any OOM report.
 * *done: the step completed. On an OOM, *d holds the diagnosis. */
static hbm_status run_step(const char *spec, const char *shown, const hbm_timeline *tl, int verbose, int attempt,
                           int *done, hbm_oom_diagnosis *d, uint64_t *capacity, char **report) {
    hbm_device *dev;
    hbm_allocator *a;
    *done = 0;
    hbm_status s = hbm_device_open(spec, &dev);
    if (s) return s;
    hbm_device_info info;
    if (capacity && hbm_device_info_get(dev, &info) == HBM_OK) *capacity = info.total_bytes;
    if ((s = hbm_allocator_open(dev, NULL, &a))) {
        hbm_device_close(dev);
        return s;
    }
    if (verbose) {
        const hbm_config *c = hbm_allocator_config(a);
        hbm_stats st;
        hbm_stats_get(a, &st);
        char l[32];
        printf("== Run %d on %s: allocator=%s preallocate=%s fraction=%.2f -> limit %s\n", attempt, shown,
               hbm_allocator_kind_str(c->allocator), c->preallocate ? "true" : "false", c->fraction,
               hbm_size_human(st.bytes_limit, l));
    }
    hbm_run_result r;
    s = hbm_timeline_run(tl, a, &r);
    if (s == HBM_OK) {
        *done = 1;
        if (verbose) {
            char p1[32], p2[32];
            printf("The step completed: %zu allocations and frees, peak in use %s, peak reserved %s.\n", r.events,
                   hbm_size_human(r.peak_in_use, p1), hbm_size_human(r.peak_reserved, p2));
        }
    } else if (s == HBM_ERR_OOM) {
        s = HBM_OK;
        if (verbose) printf("Out of memory at event %zu. hbm's report:\n\n", r.events + 1);
        size_t len = 0;
        if (verbose && report && !hbm_oom_report_format(a, NULL, 0, &len) && (*report = malloc(len + 512)))
            hbm_oom_report_format(a, *report, len + 1, NULL); /* printed once its advice is checked */
        else if (verbose) {
            hbm_oom_report_write(a, stdout);
            printf("\n");
        }
        hbm_oom_diagnose(a, d);
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

int cmd_demo(int argc, char **argv) {
    const char *device = "sim:80GiB";
    const cli_opt opts[] = {
        {.name = "--device", .kind = CLI_STR, .dest = &device, .arg = "D",
         .help = "the simulated device: sim:SIZE or a name from 'hbm devices'\n"
                 "(default sim:80GiB, an H100-sized GPU)"},
    };
    const cli_command cmd = {
        .name = "demo",
        .about = "Runs one training step of a 2.9B-parameter transformer (f32 weights, Adam, bf16\n"
                 "activations) against hbm's BFC allocator on a simulated GPU, first with JAX's\n"
                 "defaults (preallocate 75% of the device), which runs out of memory, then with the\n"
                 "setting the OOM report suggests. Then it plans examples/svd_oom.hlo, the seed bug\n"
                 "(an SVD whose U is declared 300000x300000), and its fix, as `hbm plan` would:\n"
                 "what XLA will allocate and whether it fits a 16 GB V100. Nothing touches a GPU.\n"
                 "\n"
                 "The allocator is configured from the environment like any program using libhbm\n"
                 "(XLA_PYTHON_CLIENT_MEM_FRACTION, HBM_TRACE, ...; see 'hbm config --help').",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = "Exit status: 0 the step completed (at first or with the advice), 1 no setting\n"
                 "makes it fit the device, 2 bad usage or a bad variable (found before any work).",
        .examples = "Example:\n"
                    "  hbm demo --device a100-40gb",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    char spec[128];
    if ((rc = cli_device_arg("demo", device, spec, sizeof spec))) return rc;
    /* the environment configures the allocator, as for any program using libhbm: a bad
     * value is bad input, found before any work */
    hbm_config env_cfg;
    if (hbm_config_from_env(&env_cfg)) {
        fprintf(stderr, "hbm demo: %s\n", hbm_last_error());
        return 2;
    }
    hbm_transformer_spec ts;
    hbm_transformer_spec_default(&ts);
    hbm_timeline *tl;
    hbm_status s = hbm_workload_transformer(&ts, &tl);
    if (s) return cli_fail("demo", s);
    hbm_transformer_describe(&ts, tl, stdout);
    uint64_t peak = 0, capacity = 0;
    hbm_timeline_peak(tl, &peak, NULL);

    int done = 0;
    rc = 1;
    hbm_oom_diagnosis d;
    memset(&d, 0, sizeof d);
    char *report = NULL; /* run 1's OOM report: its advice is checked before it is shown */
    s = run_step(spec, device, tl, 1, 1, &done, &d, &capacity, &report);
    if (!s && !done) {
        char advice[160] = "", f1[16], f2[16], p[32], c[32];
        double f0;
        if (!strncmp(d.config, "fraction=", 9) && (f0 = strtod(d.config + 9, NULL)) > 0) {
            /* the report's suggestion covers the request that failed; find, by running the
             * step, the smallest fraction (in steps of .01) that covers the whole step */
            char *old = getenv("HBM_MEM_FRACTION") ? strdup(getenv("HBM_MEM_FRACTION")) : NULL;
            double found = 0;
            for (int k = (int)(f0 * 100 + 0.5); k <= 100 && !s && !found; k++) {
                hbm_oom_diagnosis d2;
                setenv("HBM_MEM_FRACTION", fraction_text(k / 100.0, f1), 1);
                s = run_step(spec, device, tl, 0, 0, &done, &d2, NULL, NULL);
                if (done) found = k / 100.0;
            }
            if (old) setenv("HBM_MEM_FRACTION", old, 1);
            else unsetenv("HBM_MEM_FRACTION");
            free(old);
            char verdict[400] = "";
            if (found > 0 && found - f0 > 0.005)
                snprintf(verdict, sizeof verdict, "  Try: XLA_PYTHON_CLIENT_MEM_FRACTION=%s (checked by running the step; %s\n"
                         "  covers only the request that failed)\n", fraction_text(found, f1), d.env);
            else if (found <= 0 && !s)
                snprintf(verdict, sizeof verdict, "  No fraction fits: even XLA_PYTHON_CLIENT_MEM_FRACTION=1 fails (the step holds %s\n"
                         "  at its peak, %s more than the device).\n", hbm_size_human(peak, p),
                         hbm_size_human(peak > capacity ? peak - capacity : 0, c));
            if (report && verdict[0]) hbm_oom_report_set_advice(report, strlen(report) + 512, verdict);
            if (report) printf("%s\n", report);
            free(report);
            report = NULL;
            if (found > 0) {
                snprintf(advice, sizeof advice, "XLA_PYTHON_CLIENT_MEM_FRACTION=%s", fraction_text(found, f1));
                if (found - f0 > 0.005)
                    printf("The report's %s covers the request that failed; running the step shows that the\n"
                           "whole step needs %s.\n", d.env, advice);
                setenv("HBM_MEM_FRACTION", fraction_text(found, f2), 1); /* wins over any fraction set */
            } else if (!s) {
                printf("No setting makes this step fit %s: at its peak it holds %s live, and even\n"
                       "XLA_PYTHON_CLIENT_MEM_FRACTION=1 (the whole %s) fails. It needs a device with more\n"
                       "memory, or a smaller step (batch, sequence length, rematerialization).\n",
                       device, hbm_size_human(peak, p), hbm_size_human(capacity, c));
            }
        } else if (d.env[0]) {
            if (report) printf("%s\n", report); /* the run with this advice follows */
            char *eq = strchr(d.env, '=');
            snprintf(advice, sizeof advice, "%s", d.env);
            if (eq) {
                *eq = 0;
                setenv(d.env, eq + 1, 1);
                *eq = '=';
            }
        } else {
            if (report) printf("%s\n", report);
            printf("No allocator setting can help here (%s): the step holds %s at its peak on a %s\n"
                   "device. It needs a device with more memory, or a smaller step.\n",
                   hbm_oom_cause_str(d.cause), hbm_size_human(peak, p), hbm_size_human(capacity, c));
        }
        free(report);
        report = NULL;
        if (!s && advice[0]) {
            printf("Running again with %s ...\n\n", advice);
            s = run_step(spec, device, tl, 1, 2, &done, &d, NULL, NULL);
            if (!s && !done) printf("The step still runs out of memory with %s.\n", advice);
        }
    }
    if (!s && done) rc = 0;
    hbm_timeline_free(tl);
    if (s) return cli_fail("demo", s);
    char dir[PATH_MAX];
    if (!examples_dir(dir, sizeof dir)) {
        printf("\n(The second part of the demo plans examples/svd_oom.hlo; run it from the source tree\n"
               "or set HBM_EXAMPLES to the examples folder.)\n");
        return rc;
    }
    return rc ? rc : demo_plan(dir);
}
