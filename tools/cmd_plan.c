/* cmd_plan.c - hbm plan: predict XLA's device memory for an HLO module. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void plan_help(FILE *f) {
    fprintf(f,
            "Usage: hbm plan FILE [--device NAME | --capacity SIZE] [--framework-limit FRACTION]\n"
            "                     [--top N] [--json] [--backend gpu|cpu|tpu] [--alignment BYTES]\n"
            "                     [--pack ALGO [--timeout S]] [--width COLUMNS]\n"
            "\n"
            "Read an HLO module as XLA prints it (jax.jit(f).lower(x).compile().as_text(),\n"
            "--xla_dump_to=DIR *after_optimizations.txt, torch_xla dumps) and compute what XLA's\n"
            "buffer assignment will allocate, before anything runs: the numbers of JAX's\n"
            "compiled.memory_analysis() (host_* for buffers in host memory, S(5)), XLA's\n"
            "\"BufferAssignment OOM Debugging\" report with its peak buffers, then where the peak is\n"
            "(which computation: while body, command buffer), who owns it and whether it fits.\n"
            "A module XLA has not scheduled (no is_scheduled=true) gives an estimate, said so.\n"
            "\n"
            "Options:\n"
            "  --device NAME             judge against a known device ('hbm devices' lists them);\n"
            "                            uses its framework default fraction (JAX: 0.75)\n"
            "  --capacity SIZE           judge against SIZE bytes: 80GiB, 1.5TiB, 16G (binary: 2^30),\n"
            "                            40GB (decimal: 40 x 10^9, 37.25 GiB)\n"
            "  --framework-limit FRAC    share of the device the framework lets XLA use\n"
            "                            (default: the device's, 0.75 for --capacity; 1 = none)\n"
            "  --top N                   peak buffers to show (default 15, as XLA; no limit: all\n"
            "                            there are; the explanation shows at most 8 of them)\n"
            "  --json                    memory_analysis() keys, peak_bytes, peak_buffers as JSON\n"
            "  --width COLUMNS           cut longer lines in the middle with '...' (default 100;\n"
            "                            0: no limit, XLA's report lines whole)\n"
            "  --backend NAME            whose rules: gpu, cpu or tpu (default: read from the module:\n"
            "                            file name, custom calls, tiled layouts; else gpu)\n"
            "  --alignment BYTES         buffer alignment, a power of two (default: GPU and TPU 128,\n"
            "                            CPU 64)\n"
            "  --pack ALGO               what-if: repack the temp heap with greedy, xla, best or exact\n"
            "                            and compare with XLA's heap simulator (JSON: {\"plan\", \"pack\"})\n"
            "  --timeout S               wall-clock limit for --pack (time-dependent). Default as\n"
            "                            'hbm pack': best a fixed budget of counted work (about\n"
            "                            9 ms, the same answer every run), exact until optimal\n"
            "\n"
            "Exit status: 0 it fits (or no device given), 1 it does not fit the device or only\n"
            "beyond the framework's limit, 2 bad usage or input.\n"
            "\n"
            "Example:\n"
            "  hbm plan examples/svd_oom.hlo --device V100-16GB\n"
            "  hbm plan model.hlo --pack exact        # how much of XLA's temp heap is packing waste?\n");
}

int cmd_plan(int argc, char **argv) {
    const char *file = NULL, *device = NULL, *cap_text = NULL, *frac_text = NULL, *pack_text = NULL;
    double timeout = 0; /* hbm pack's budgets unless told */
    size_t top = 15;
    int json = 0;
    size_t width = CLI_WIDTH;
    uint64_t alignment = 0;
    hbm_backend backend = HBM_BACKEND_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) {
            plan_help(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--width")) {
            int rc = cli_width_arg("plan", argc, argv, &i, &width);
            if (rc) return rc;
        } else if (!strcmp(a, "--pack") || !strcmp(a, "--timeout")) {
            if (i + 1 >= argc) return cli_usage_error("plan", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--pack")) {
                pack_text = v;
            } else {
                char *end;
                timeout = strtod(v, &end);
                if (*end || end == v || !(timeout > 0))
                    return cli_usage_error("plan", "--timeout '%s': expected seconds > 0", v);
            }
        } else if (!strcmp(a, "--backend")) {
            if (i + 1 >= argc) return cli_usage_error("plan", "%s needs a value", a);
            if (hbm_backend_parse(argv[++i], &backend) != HBM_OK) return cli_usage_error("plan", "%s", hbm_last_error());
        } else if (!strcmp(a, "--device") || !strcmp(a, "--capacity") || !strcmp(a, "--framework-limit") ||
                   !strcmp(a, "--top") || !strcmp(a, "--alignment")) {
            if (i + 1 >= argc) return cli_usage_error("plan", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--device")) device = v;
            else if (!strcmp(a, "--capacity")) cap_text = v;
            else if (!strcmp(a, "--framework-limit")) frac_text = v;
            else {
                char *end;
                errno = 0;
                unsigned long long n = strtoull(v, &end, 10);
                if (*end || !isdigit((unsigned char)*v) || errno || (strcmp(a, "--top") && (n == 0 || (n & (n - 1)))))
                    return cli_usage_error("plan", "%s '%s': expected %s", a, v,
                                           !strcmp(a, "--top") ? "a number of buffers (0 or more)" : "a power of two");
                if (!strcmp(a, "--top")) top = (size_t)n;
                else alignment = n;
            }
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("plan", "unknown option '%s'", a);
        } else if (!file) {
            file = a;
        } else {
            return cli_usage_error("plan", "more than one FILE ('%s' and '%s')", file, a);
        }
    }
    if (!file) return cli_usage_error("plan", "missing FILE (an HLO text dump)");
    double fraction = 0;
    if (frac_text) {
        char *end;
        fraction = strtod(frac_text, &end);
        if (*end || end == frac_text || !(fraction > 0 && fraction <= 1))
            return cli_usage_error("plan", "--framework-limit '%s': expected a fraction in (0, 1]", frac_text);
    }
    hbm_plan_target target;
    if (hbm_plan_target_resolve(device, cap_text, fraction, &target)) return cli_usage_error("plan", "%s", hbm_last_error());
    hbm_pack_options po;
    hbm_pack_options_default(&po);
    po.timeout_s = timeout;
    if (pack_text && hbm_pack_algo_parse(pack_text, &po.algo) != HBM_OK)
        return cli_usage_error("plan", "--pack: %s", hbm_last_error());
    hbm_hlo_module *m;
    hbm_status s = hbm_hlo_parse_file(file, &m);
    if (s) return cli_fail("plan", s);
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    if (alignment) o.alignment = alignment;
    o.backend = backend;
    hbm_plan *p;
    s = hbm_plan_run(m, &o, &p);
    if (s) {
        hbm_hlo_module_free(m);
        return cli_fail("plan", s);
    }
    hbm_pack_result pr;
    uint64_t heap = 0;
    if (pack_text && (s = hbm_plan_pack_temp(p, &po, &pr, &heap))) {
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
        return cli_fail("plan", s);
    }
    if (json) {
        if (pack_text) printf("{\"plan\": ");
        s = hbm_plan_json(p, stdout, top, target.capacity, target.fraction);
        if (pack_text)
            printf(", \"pack\": {\"algorithm\": \"%s\", \"xla_heap_bytes\": %llu, \"heap_bytes\": %llu, "
                   "\"lower_bound_bytes\": %llu, \"proven\": %s, \"seconds\": %.3f}}\n",
                   hbm_pack_algo_str(po.algo), (unsigned long long)heap, (unsigned long long)pr.extent,
                   (unsigned long long)pr.lower_bound, pr.proven ? "true" : "false", pr.seconds);
    } else { /* text: lines fitted to --width */
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) s = HBM_ERR_NOMEM;
        else s = hbm_plan_write_text(p, f, top, &target);
        if (!s && pack_text) {
            char a[32], b[32], c[32];
            fprintf(f, "\nRepacking the temp heap with '%s': %s, %.3f s\n  (XLA's heap simulator: %s; lower bound %s%s)\n",
                    hbm_pack_algo_str(po.algo), hbm_size_human(pr.extent, a), pr.seconds, hbm_size_human(heap, b),
                    hbm_size_human(pr.lower_bound, c), pr.proven ? ", optimal" : "");
            if (heap > pr.extent)
                fprintf(f, "  %s of XLA's temp heap is packing waste that a better placement would save.\n",
                        hbm_size_human(heap - pr.extent, a));
        }
        if (f && fclose(f) && !s) s = HBM_ERR_NOMEM;
        if (!s) cli_write_fitted(stdout, text, len, width);
        free(text);
    }
    /* exit 1 when the verdict is negative: it does not fit the device, or only beyond the
     * share the framework lets XLA use (as configured, the program would run out of memory) */
    int verdict = 0;
    hbm_plan_stats st;
    if (!s && target.capacity && hbm_plan_get_stats(p, &st) == HBM_OK) {
        double f = target.fraction;
        uint64_t limit = f > 0 && f < 1 ? (uint64_t)((double)target.capacity * f) : target.capacity;
        verdict = st.peak_bytes > limit;
    }
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    if (s) return cli_fail("plan", s);
    return verdict;
}
