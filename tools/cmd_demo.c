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
            printf("jnp.linalg.svd(A, full_matrices=False) on a 300000x50 f32 matrix, as XLA compiled it.\n"
                   "Before anything runs, hbm predicts XLA's buffer assignment (its OOM text, byte for byte):\n\n");
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

static void demo_help(FILE *f) {
    fprintf(f,
            "Usage: hbm demo [--device SPEC]\n"
            "\n"
            "Runs one training step of a 2.9B-parameter transformer (f32 weights, Adam, bf16\n"
            "activations) against hbm's BFC allocator on a simulated GPU, first with JAX's\n"
            "defaults (preallocate 75%% of the device), which runs out of memory, then with the\n"
            "setting the OOM report suggests. Then it plans examples/svd_oom.hlo, the seed bug\n"
            "(an SVD whose U is declared 300000x300000), and its fix, as `hbm plan` would:\n"
            "what XLA will allocate and whether it fits a 16 GB V100. Nothing touches a GPU.\n"
            "\n"
            "Options:\n"
            "  --device SPEC   the simulated device (default sim:80GiB, an H100-sized GPU)\n");
}

static void describe(const hbm_timeline *tl, const hbm_transformer_spec *s) {
    uint64_t by_cat[HBM_CAT_COUNT_] = {0}, peak = 0;
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tag *t = hbm_timeline_tag(tl, i);
        if (t && (unsigned)t->category < HBM_CAT_COUNT_) by_cat[t->category] += tl->buffers[i].size;
    }
    hbm_timeline_peak(tl, &peak, NULL);
    char a[32], b[32], c[32], d[32];
    uint64_t params = (uint64_t)s->layers * 12 * (uint64_t)s->d_model * (uint64_t)s->d_model +
                      (uint64_t)s->vocab * (uint64_t)s->d_model;
    printf("One training step of a %.1fB-parameter transformer (%d layers, d_model %d, batch %d x %d tokens):\n"
           "  %zu buffers: weights and their gradients %s, Adam state %s, activations %s;\n"
           "  %s live at the step's peak.\n\n",
           (double)params / 1e9, s->layers, s->d_model, s->batch, s->seq_len, tl->count,
           hbm_size_xla((int64_t)by_cat[HBM_CAT_WEIGHT], a), hbm_size_xla((int64_t)by_cat[HBM_CAT_OPTIMIZER], b),
           hbm_size_xla((int64_t)by_cat[HBM_CAT_ACTIVATION], c), hbm_size_xla((int64_t)peak, d));
}

int cmd_demo(int argc, char **argv) {
    const char *spec = "sim:80GiB";
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "-h", "--help")) {
            demo_help(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            spec = argv[++i];
        } else {
            return cli_usage_error("demo", "unknown argument '%s'", argv[i]);
        }
    }
    hbm_transformer_spec ts;
    hbm_transformer_spec_default(&ts);
    hbm_timeline *tl;
    hbm_status s = hbm_workload_transformer(&ts, &tl);
    if (s) return cli_fail("demo", s);
    describe(tl, &ts);

    char config[256] = "allocator=bfc";
    int rc = 1;
    for (int attempt = 1; attempt <= 3; attempt++) {
        hbm_device *dev;
        hbm_allocator *a;
        if ((s = hbm_device_open(spec, &dev))) break;
        if ((s = hbm_allocator_open(dev, config, &a))) {
            hbm_device_close(dev);
            break;
        }
        const hbm_config *c = hbm_allocator_config(a);
        hbm_stats st;
        hbm_stats_get(a, &st);
        char l[32];
        printf("== Run %d on %s: allocator=%s preallocate=%s fraction=%.2f -> limit %s\n", attempt, spec,
               hbm_allocator_kind_str(c->allocator), c->preallocate ? "true" : "false", c->fraction,
               hbm_size_xla((int64_t)st.bytes_limit, l));
        hbm_run_result r;
        s = hbm_timeline_run(tl, a, &r);
        if (s == HBM_OK) {
            char p1[32], p2[32];
            printf("The step completed: %zu allocations and frees, peak in use %s, peak reserved %s.\n", r.events,
                   hbm_size_xla((int64_t)r.peak_in_use, p1), hbm_size_xla((int64_t)r.peak_reserved, p2));
            rc = 0;
        } else if (s == HBM_ERR_OOM) {
            printf("Out of memory at event %zu. hbm's report:\n\n", r.events + 1);
            hbm_oom_report_write(a, stdout);
            hbm_oom_diagnosis d;
            hbm_oom_diagnose(a, &d);
            printf("\n");
            if (d.config[0] && strlen(config) + strlen(d.config) + 2 < sizeof config) {
                printf("Running again with the suggested %s ...\n\n", d.env);
                strcat(config, ",");
                strcat(config, d.config);
                s = HBM_OK;
            }
        }
        hbm_allocator_close(a);
        hbm_device_close(dev);
        if (rc == 0 || s) break;
    }
    hbm_timeline_free(tl);
    if (s && s != HBM_ERR_OOM) return cli_fail("demo", s);
    char dir[PATH_MAX];
    if (!examples_dir(dir, sizeof dir)) {
        printf("\n(The second part of the demo plans examples/svd_oom.hlo; run it from the source tree\n"
               "or set HBM_EXAMPLES to the examples folder.)\n");
        return rc;
    }
    return rc ? rc : demo_plan(dir);
}
