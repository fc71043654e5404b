/* cmd_plan.c - hbm plan: predict XLA's device memory for an HLO module. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* hbm plan DUMPDIR: every module of an XLA dump folder with its need, the largest named.
 * Exit 1 when a target is given and a module does not fit it; 2 when a module could not
 * be planned (the others still listed). */
static int plan_dir(const char *dir, int jobs, const hbm_plan_target *t, int json, int top) {
    hbm_plan_dir *d;
    hbm_status s = hbm_plan_dir_run(dir, jobs, t, &d);
    if (s) return cli_fail("plan", s);
    s = hbm_plan_dir_write(d, json, (size_t)top, stdout);
    if (!s && fflush(stdout)) s = HBM_ERR_IO;
    size_t n, failed, not_fitting;
    hbm_plan_dir_counts(d, &n, &failed, &not_fitting);
    hbm_plan_dir_free(d);
    if (s) return cli_fail("plan", s);
    if (failed) fprintf(stderr, "hbm plan: %zu of %zu modules could not be planned (named above)\n", failed, n);
    return failed ? 2 : not_fitting ? 1 : 0;
}

static hbm_status parse_backend(const char *value, void *backend) { return hbm_backend_parse(value, backend); }

int cmd_plan(int argc, char **argv) {
    const char *device = NULL, *cap_text = NULL, *pack_text = NULL, *html = NULL, *module = NULL;
    double timeout = 0, fraction = 0; /* hbm pack's budgets, the device's limit unless told */
    int top = 15, json = 0, jobs = 0;
    size_t width = CLI_WIDTH;
    uint64_t alignment = 0, capacity = 0;
    hbm_backend backend = HBM_BACKEND_AUTO;
    hbm_pack_options po;
    hbm_pack_options_default(&po);
    const cli_opt opts[] = {
        {.name = "--device", .kind = CLI_STR, .dest = &device, .arg = "NAME",
         .help = "judge against a known device ('hbm devices' lists them);\n"
                 "uses its framework default fraction (JAX: 0.75)"},
        {.name = "--capacity", .kind = CLI_SIZE, .dest = &capacity, .raw = &cap_text, .arg = "SIZE",
         .help = "judge against SIZE bytes: 80GiB, 1.5TiB, 16G (binary: 2^30),\n"
                 "40GB (decimal: 40 x 10^9, 37.25 GiB)"},
        {.name = "--framework-limit", .kind = CLI_REAL, .dest = &fraction, .lo = 0, .hi = 1, .arg = "FRAC",
         .help = "share of the device the framework lets XLA use\n"
                 "(default: the device's; for --capacity 0.75 on XLA:GPU,\n"
                 "1 on TPU and CPU; 1 = none)"},
        {.name = "--top", .kind = CLI_INT, .dest = &top, .lo = 0, .hi = 1000000, .arg = "N",
         .help = "peak buffers to show (default 15, as XLA; at most 1000000, which is\n"
                 "no limit in practice: all there are; the explanation shows 8)"},
        {.name = "--json", .kind = CLI_FLAG, .dest = &json, .help = "memory_analysis() keys, peak_bytes, peak_buffers as JSON"},
        {.name = "--module", .kind = CLI_STR, .dest = &module, .arg = "NAME",
         .help = "the module of a profile or protobuf with several (default: the\n"
                 "largest): its name as listed, 'jit_f(3)', or 'jit_f'"},
        {.name = "--html", .kind = CLI_STR, .dest = &html, .arg = "OUT",
         .help = "also write XProf's Memory Viewer of the plan as one self-contained\n"
                 "page ('hbm view FILE --html OUT' writes the same)"},
        {.name = "--width", .kind = CLI_COLUMNS, .dest = &width, .lo = CLI_WIDTH_MIN, .hi = CLI_WIDTH_MAX, .arg = "COLUMNS",
         .help = "cut longer lines in the middle with '...' (default 100;\n"
                 "0: no limit, XLA's report lines whole)"},
        {.name = "--backend", .kind = CLI_PARSE, .dest = &backend, .parse = parse_backend, .arg = "NAME",
         .help = "whose rules: gpu, cpu or tpu (default: read from the module:\n"
                 "file name, custom calls, tiled layouts; else gpu)"},
        {.name = "--alignment", .kind = CLI_POW2, .dest = &alignment, .hi = (long)HBM_PLAN_ALIGNMENT_MAX, .arg = "BYTES",
         .help = "buffer alignment, a power of two up to 1GiB (default: GPU and\n"
                 "TPU 128, CPU 64)"},
        {.name = "--pack", .kind = CLI_PARSE, .dest = &po.algo, .parse = cli_pack_algo, .raw = &pack_text, .arg = "ALGO",
         .help = "what-if: repack the temp heap with greedy, xla, best or exact\n"
                 "and compare with XLA's heap simulator (JSON: {\"plan\", \"pack\"})"},
        {.name = "--jobs", .alias = "-j", .kind = CLI_INT, .dest = &jobs, .lo = 0, .hi = 4096, .arg = "N",
         .help = "a dump folder: plan its modules on N threads (default 0: the cores)"},
        {.name = "--timeout", .kind = CLI_REAL, .dest = &timeout, .lo = 0, .hi = 1000000000, .arg = "S",
         .expect = "expected seconds > 0",
         .help = "wall-clock limit for --pack (time-dependent). Default as\n"
                 "'hbm pack': best a fixed budget of counted work (about\n"
                 "9 ms, the same answer every run), exact until optimal"},
    };
    const cli_command cmd = {
        .name = "plan",
        .args = "FILE|DUMPDIR",
        .max_args = 1,
        .about = "Read an HLO module as XLA prints it (jax.jit(f).lower(x).compile().as_text(),\n"
                 "--xla_dump_to=DIR *after_optimizations.txt, torch_xla dumps) or as XLA's protobuf\n"
                 "(an XProf profile: LOGDIR or *.xplane.pb; *.hlo_proto.pb, *.hlo.pb) and compute what XLA's\n"
                 "buffer assignment will allocate, before anything runs: the numbers of JAX's\n"
                 "compiled.memory_analysis() (host_* for buffers in host memory, S(5)), XLA's\n"
                 "buffer assignment report with its peak buffers (headed \"BufferAssignment OOM\n"
                 "Debugging.\" as XLA's when it does not fit the device), then where the peak is\n"
                 "(which computation: while body, command buffer), who owns it and whether it fits.\n"
                 "A module XLA has not scheduled (no is_scheduled=true) gives an estimate, said so.\n"
                 "A protobuf that carries XLA's own buffer assignment adds XLA's figures, said to be\n"
                 "XLA's, and whether hbm's own plan reaches the same.\n"
                 "A dump folder (XLA's --xla_dump_to=DIR: its *after_optimizations.txt, else every file of\n"
                 "HLO text): every module with its need, largest first, and the largest named, planned\n"
                 "on --jobs threads (exit 2 when one could not be planned, 1 when one does not fit).",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = "Exit status: 0 it fits (or no device given), 1 it does not fit the device or only\n"
                 "beyond the framework's limit, 2 bad usage or input.",
        .examples = "Example:\n"
                    "  hbm plan examples/svd_oom.hlo --device V100-16GB\n"
                    "  hbm plan model.hlo --pack exact        # how much of XLA's temp heap is packing waste?",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    const char *file = args.pos[0];
    hbm_plan_target target;
    if ((rc = cli_plan_target("plan", device, cap_text, fraction, &target))) return rc;
    po.timeout_s = timeout;
    struct stat st;
    if (!stat(file, &st) && S_ISDIR(st.st_mode) && hbm_proto_path_kind(file) == HBM_PROTO_NONE) {
        if (module || html || pack_text || backend != HBM_BACKEND_AUTO || alignment)
            return cli_usage_error("plan", "--module, --html, --pack, --backend and --alignment are for one module, "
                                           "not a dump folder");
        return plan_dir(file, jobs, &target, json, top);
    }
    if ((rc = cli_input("plan", file)) >= 0) return rc;
    hbm_hlo_module *m;
    if ((rc = cli_open_module("plan", file, module, json ? stderr : stdout, &m))) return rc;
    hbm_status s;
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    if (alignment) o.alignment = alignment;
    if (device && (s = hbm_plan_options_for_device(&o, device))) { /* a TPU: its generation's rules */
        hbm_hlo_module_free(m);
        return cli_fail("plan", s);
    }
    if (backend != HBM_BACKEND_AUTO) o.backend = backend;
    hbm_plan *p;
    s = hbm_plan_run(m, &o, &p);
    if (s) {
        hbm_hlo_module_free(m);
        return cli_fail("plan", s);
    }
    if (html) {
        hbm_output out; /* written whole or not at all */
        if ((s = hbm_output_open(&out, html))) {
            hbm_plan_free(p);
            hbm_hlo_module_free(m);
            return cli_fail("plan", s);
        }
        int hrc = cli_output_done("plan", &out, hbm_plan_view_html(p, NULL, out.f));
        if (hrc) {
            hbm_plan_free(p);
            hbm_hlo_module_free(m);
            return hrc;
        }
        if (strcmp(html, "-")) fprintf(stderr, "hbm plan: wrote %s\n", html);
    }
    hbm_pack_result pr;
    uint64_t heap = 0;
    if (pack_text && (s = hbm_plan_pack_temp(p, &po, &pr, &heap))) {
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
        return cli_fail("plan", s);
    }
    hbm_plan_output show = {.plan = p, .top = (size_t)top, .target = &target, .pack = pack_text ? &pr : NULL,
                            .pack_algo = po.algo, .pack_heap_bytes = heap, .json = json, .width = width};
    s = hbm_plan_output_write(&show, stdout);
    /* exit 1 when the verdict is negative: it does not fit the device, or only beyond the
     * share the framework lets XLA use (as configured, the program would run out of memory) */
    int verdict = hbm_plan_target_fails(p, &target);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    if (s) return cli_fail("plan", s);
    return verdict;
}
