/* cmd_export.c - hbm export: a trace into the viewers people already use. */
#include <string.h>

#include "cli.h"

int cmd_export(int argc, char **argv) {
    const char *fmt = NULL, *out = NULL;
    int device = -1;
    const cli_opt opts[] = {
        {.name = "--format", .kind = CLI_STR, .dest = &fmt, .arg = "F", .required = 1,
         .help = "one of the formats above"},
        {.name = "--output", .alias = "-o", .kind = CLI_STR, .dest = &out, .arg = "OUT", .required = 1,
         .help = "output file ('-' for standard output)"},
        {.name = "--device-index", .kind = CLI_INT, .dest = &device, .lo = 0, .hi = 4096, .arg = "N",
         .help = "device N (cuda:N) of a snapshot (default: the one with an OOM,\n"
                 "else the largest peak; torch: every device unless given)"},
    };
    const cli_command cmd = {
        .name = "export",
        .args = "FILE",
        .max_args = 1,
        .about = "Write FILE (an hbm trace, an RMM log CSV, a PyTorch memory snapshot or an HLO module\n"
                 "as the sequence XLA runs) in another tool's format. A snapshot's state before its\n"
                 "history (rebuilt from its segments) is included. Formats:\n"
                 "  perfetto     Chrome/Perfetto trace JSON: counters \"in use\" and \"reserved\" (bytes),\n"
                 "               an instant per OOM; a process per device. Open in https://ui.perfetto.dev\n"
                 "  pprof        gzipped profile.proto heap profile: alloc_space/alloc_objects (total)\n"
                 "               and inuse_space/inuse_objects (at the peak) by tag and backtrace.\n"
                 "               Open with `go tool pprof -http=: OUT` or pprof.me\n"
                 "  torch        a PyTorch memory snapshot pickle (every device; its real segments and\n"
                 "               blocks). Open in https://pytorch.org/memory_viz\n"
                 "  minimalloc   MiniMalloc CSV (id,lower,upper,size) of the buffers' lifetimes",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = CLI_EXITS_DONE " An existing OUT is left as it was on any failure.",
        .examples = "Example:\n"
                    "  hbm export run.hbmt --format perfetto -o run.json",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    const char *in = args.pos[0];
    if (hbm_export_format_check(fmt)) return cli_usage_error("export", "--format '%s': expected %s", fmt, hbm_export_formats());
    if ((rc = cli_input("export", in)) >= 0) return rc;
    hbm_trace **all = NULL, *one = NULL;
    size_t n = 0;
    hbm_status s = device >= 0 || strcmp(fmt, "torch") ? hbm_trace_load_device(in, device, &one)
                                                        : hbm_trace_load_all(in, &all, &n);
    if (s) return cli_fail("export", s);
    if (one) all = &one, n = 1;
    hbm_output o; /* written whole or not at all */
    if (!(s = hbm_output_open(&o, out))) {
        s = !strcmp(fmt, "torch") ? hbm_export_torch_all(all, n, o.f) : hbm_export_write(all[0], fmt, o.f);
        rc = cli_output_done("export", &o, s);
        if (!rc && strcmp(out, "-")) { /* what the file holds: one device, or each */
            fprintf(stderr, "hbm export: wrote %s", out);
            hbm_export_devices_write((const hbm_trace *const *)all, n, fmt, stderr);
        }
        if (one) hbm_trace_free(one);
        else hbm_trace_free_all(all, n);
        return rc;
    }
    if (one) hbm_trace_free(one);
    else hbm_trace_free_all(all, n);
    return cli_fail("export", s);
}
