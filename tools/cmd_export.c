/* cmd_export.c - hbm export: a trace into the viewers people already use. */
#include <string.h>

#include "cli.h"

static void export_help(FILE *f) {
    fprintf(f,
            "Usage: hbm export FILE --format perfetto|pprof|torch|minimalloc -o OUT\n"
            "\n"
            "Write FILE (an hbm trace, an RMM log CSV or a PyTorch memory snapshot) in another\n"
            "tool's format:\n"
            "  perfetto     Chrome/Perfetto trace JSON: counters \"in use\" and \"reserved\" (bytes),\n"
            "               an instant per OOM. Open in https://ui.perfetto.dev\n"
            "  pprof        gzipped profile.proto heap profile: alloc_space/alloc_objects (total)\n"
            "               and inuse_space/inuse_objects (at the peak) by tag and backtrace.\n"
            "               Open with `go tool pprof -http=: OUT` or pprof.me\n"
            "  torch        a PyTorch memory snapshot pickle. Open in https://pytorch.org/memory_viz\n"
            "  minimalloc   MiniMalloc CSV (id,lower,upper,size) of the buffers' lifetimes\n"
            "\n"
            "Options:\n"
            "  --format F   one of the above (required)\n"
            "  -o OUT       output file ('-' for standard output)\n"
            "\n"
            "Example:\n"
            "  hbm export run.hbmt --format perfetto -o run.json\n");
}

int cmd_export(int argc, char **argv) {
    const char *in = NULL, *fmt = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "-h", "--help")) {
            export_help(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            fmt = argv[++i];
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
    hbm_trace *t;
    hbm_status s = hbm_trace_load(in, &t);
    if (s) return cli_fail("export", s);
    hbm_output o; /* written whole or not at all */
    if ((s = hbm_output_open(&o, out))) {
        hbm_trace_free(t);
        return cli_fail("export", s);
    }
    s = hbm_export_write(t, fmt, o.f);
    int rc = cli_output_done("export", &o, s);
    hbm_trace_free(t);
    return rc;
}
