/* cmd_fit.c - hbm fit: what change makes an XLA module fit, each verified by planning. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static hbm_status parse_backend(const char *value, void *backend) { return hbm_backend_parse(value, backend); }
static hbm_status parse_remat(const char *value, void *remat) { return hbm_fit_remat_parse(value, remat); }

int cmd_fit(int argc, char **argv) {
    const char *device = NULL, *cap_text = NULL, *emit = NULL, *module = NULL;
    double fraction = 0, timeout = 0;
    int json = 0, top = 12, no_offload = 0, no_donate = 0;
    size_t width = CLI_WIDTH;
    uint64_t capacity = 0;
    hbm_backend backend = HBM_BACKEND_AUTO;
    hbm_fit_remat remat = HBM_FIT_REMAT_HBM;
    const cli_opt opts[] = {
        {.name = "--device", .kind = CLI_STR, .dest = &device, .arg = "NAME",
         .help = "fit a known device ('hbm devices' lists them) under its\n"
                 "framework default fraction (JAX: 0.75)"},
        {.name = "--capacity", .kind = CLI_SIZE, .dest = &capacity, .raw = &cap_text, .arg = "SIZE",
         .help = "fit SIZE bytes: 80GiB, 16G (binary), 40GB (decimal)"},
        {.name = "--framework-limit", .kind = CLI_REAL, .dest = &fraction, .lo = 0, .hi = 1, .arg = "FRAC",
         .help = "share of the device the framework lets XLA use\n"
                 "(default: the device's; for --capacity 0.75 on XLA:GPU,\n"
                 "1 on TPU and CPU; 1 = none)"},
        {.name = "--backend", .kind = CLI_PARSE, .dest = &backend, .parse = parse_backend, .arg = "NAME",
         .help = "whose rules: gpu, cpu or tpu (default: read from the module)"},
        {.name = "--remat", .kind = CLI_PARSE, .dest = &remat, .parse = parse_remat, .arg = "WHO",
         .help = "whose set is chosen and written by --emit: hbm (default: the\n"
                 "least-cost search), xla (XLA's HloRematerialization, the\n"
                 "baseline) or none (settings and donations only)"},
        {.name = "--no-offload", .kind = CLI_FLAG, .dest = &no_offload, .help = "no host offload (S(5)) in hbm's set"},
        {.name = "--no-donate", .kind = CLI_FLAG, .dest = &no_donate, .help = "no donation (input_output_alias)"},
        {.name = "--timeout", .kind = CLI_REAL, .dest = &timeout, .lo = 0, .hi = 1000000, .arg = "S",
         .expect = "expected seconds > 0",
         .help = "time budget of the search and the checks (default 2 s);\n"
                 "the best set found so far, said whether proven optimal"},
        {.name = "--emit", .kind = CLI_STR, .dest = &emit, .arg = "OUT",
         .help = "write the changed module (HLO text, scheduled) to OUT ('-':\n"
                 "standard output): what was planned to the figures shown"},
        {.name = "--top", .kind = CLI_INT, .dest = &top, .lo = 0, .hi = 1000000, .arg = "N",
         .help = "changes to list (default 12)"},
        {.name = "--json", .kind = CLI_FLAG, .dest = &json,
         .help = "every candidate, both sets, bytes before and after as JSON"},
        {.name = "--module", .kind = CLI_STR, .dest = &module, .arg = "NAME",
         .help = "the module of a profile or protobuf with several (default: the\n"
                 "largest): its name as listed, 'jit_f(3)', or 'jit_f'"},
        CLI_OPT_WIDTH(&width),
    };
    const cli_command cmd = {
        .name = "fit",
        .args = "FILE",
        .max_args = 1,
        .about = "What change makes an XLA module fit the device: the framework setting, donating an\n"
                 "argument (input_output_alias), recomputing values live across the peak (clones\n"
                 "NAME.remat) and moving idle values to host memory (S(5) copies). The set is the\n"
                 "cheapest that reaches the target (a search over the whole schedule); every figure\n"
                 "is that of the changed module planned again with hbm's rules. XLA's own\n"
                 "rematerialization pass (\"always remat\", the limit GetSchedulerMemoryLimit gives)\n"
                 "runs on the same module as the baseline.",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = "Exit status: 0 a verified set fits, or a scan residual in host memory does (or it\n"
                 "fits already), 1 none does, 2 bad usage or input.",
        .examples = "Example:\n"
                    "  hbm fit model.hlo --capacity 40GiB --framework-limit 1 --emit fitted.hlo\n"
                    "  hbm fit model.hlo --device A100-40GB --remat xla     # what XLA's pass reaches",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    if (!device && !cap_text) return cli_usage_error("fit", "give --device NAME or --capacity SIZE");
    hbm_plan_target target;
    if ((rc = cli_plan_target("fit", device, cap_text, fraction, &target))) return rc;
    hbm_hlo_module *m;
    if ((rc = cli_open_module("fit", args.pos[0], module, json || (emit && !strcmp(emit, "-")) ? stderr : stdout, &m))) return rc;
    hbm_status s;
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.plan.backend = backend;
    o.capacity = target.capacity;
    o.fraction = target.fraction;
    o.device = device;
    o.remat = remat;
    o.no_offload = no_offload;
    o.no_donate = no_donate;
    if (timeout > 0) o.timeout_s = timeout;
    hbm_fit_result *r;
    s = hbm_fit_run(m, &o, &r);
    if (s) {
        hbm_hlo_module_free(m);
        return cli_fail("fit", s);
    }
    if (emit) {
        hbm_output out;
        if ((s = hbm_output_open(&out, emit))) {
            hbm_fit_free(r);
            hbm_hlo_module_free(m);
            return cli_fail("fit", s);
        }
        s = hbm_fit_emit(r, out.f);
        if ((rc = cli_output_done("fit", &out, s))) {
            hbm_fit_free(r);
            hbm_hlo_module_free(m);
            return rc;
        }
    }
    if (!(emit && !strcmp(emit, "-"))) s = hbm_fit_write(r, stdout, json, (size_t)top, width);
    hbm_fit_summary sum;
    hbm_fit_get_summary(r, &sum);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    if (s) return cli_fail("fit", s);
    return sum.fits || sum.residual_fits || sum.recompute_fits ? 0 : 1;
}
