/* cmd_export.c - hbm export: a trace into the viewers people already use. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void export_help(FILE *f) {
    fprintf(f,
            "Usage: hbm export FILE --format perfetto|pprof|torch|minimalloc -o OUT [--device-index N]\n"
            "\n"
            "Write FILE (an hbm trace, an RMM log CSV, a PyTorch memory snapshot or an HLO module\n"
            "as the sequence XLA runs) in another tool's format. A snapshot's state before its\n"
            "history (rebuilt from its segments) is included. Formats:\n"
            "  perfetto     Chrome/Perfetto trace JSON: counters \"in use\" and \"reserved\" (bytes),\n"
            "               an instant per OOM. Open in https://ui.perfetto.dev\n"
            "  pprof        gzipped profile.proto heap profile: alloc_space/alloc_objects (total)\n"
            "               and inuse_space/inuse_objects (at the peak) by tag and backtrace.\n"
            "               Open with `go tool pprof -http=: OUT` or pprof.me\n"
            "  torch        a PyTorch memory snapshot pickle (every device; its real segments and\n"
            "               blocks). Open in https://pytorch.org/memory_viz\n"
            "  minimalloc   MiniMalloc CSV (id,lower,upper,size) of the buffers' lifetimes\n"
            "\n"
            "Options:\n"
            "  --format F   one of the above (required)\n"
            "  -o OUT       output file ('-' for standard output)\n"
            "  --device-index N  device N (cuda:N) of a snapshot (default: the one with an OOM,\n"
            "               else the largest peak; torch: every device unless given)\n"
            "\n"
            "Example:\n"
            "  hbm export run.hbmt --format perfetto -o run.json\n");
}

int cmd_export(int argc, char **argv) {
    const char *in = NULL, *fmt = NULL, *out = NULL;
    int device = -1;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "-h", "--help")) {
            export_help(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            fmt = argv[++i];
        } else if (!strcmp(argv[i], "--device-index") && i + 1 < argc) {
            if (cli_parse_int(argv[++i], 0, 4096, &device))
                return cli_usage_error("export", "--device-index %s: expected 0 to 4096", argv[i]);
        } else if (cli_is(argv[i], "-o", "--output") && i + 1 < argc) {
            out = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("export", "unknown option '%s'", argv[i]);
        } else if (!in) {
            in = argv[i];
        } else {
            return cli_usage_error("export", "one input at a time ('%s' and '%s')", in, argv[i]);
        }
    }
    if (!in) return cli_usage_error("export", "missing the input FILE");
    if (!fmt) return cli_usage_error("export", "missing --format (perfetto, pprof, torch or minimalloc)");
    if (!out) return cli_usage_error("export", "missing -o OUT");
    if (strcmp(fmt, "perfetto") && strcmp(fmt, "pprof") && strcmp(fmt, "torch") && strcmp(fmt, "minimalloc"))
        return cli_usage_error("export", "--format %s: expected perfetto, pprof, torch or minimalloc", fmt);
    hbm_trace **all = NULL, *one = NULL;
    size_t n = 0;
    hbm_status s = device >= 0 || strcmp(fmt, "torch") ? hbm_trace_load_device(in, device, &one)
                                                        : hbm_trace_load_all(in, &all, &n);
    if (s) return cli_fail("export", s);
    if (one) all = &one, n = 1;
    hbm_output o; /* written whole or not at all */
    if (!(s = hbm_output_open(&o, out))) {
        s = !strcmp(fmt, "torch") ? hbm_export_torch_all(all, n, o.f) : hbm_export_write(all[0], fmt, o.f);
        int rc = cli_output_done("export", &o, s);
        if (!rc && strcmp(fmt, "torch") && strcmp(out, "-") && all[0]->device[0])
            fprintf(stderr, "hbm export: wrote %s (device %s)\n", out, all[0]->device);
        if (one) hbm_trace_free(one);
        else hbm_trace_free_all(all, n);
        return rc;
    }
    if (one) hbm_trace_free(one);
    else hbm_trace_free_all(all, n);
    return cli_fail("export", s);
}
