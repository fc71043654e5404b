/* cmd_view.c - hbm view: where the memory of a trace went, in the terminal or a page. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void view_help(FILE *f) {
    fprintf(f,
            "Usage: hbm view FILE [--html OUT.html] [--json] [--top N] [--width COLS] [--ascii] [--title T]\n"
            "                     [--device-index N]\n"
            "\n"
            "Show a trace (an hbm trace, an RMM log CSV, a PyTorch memory snapshot, or an HLO\n"
            "module as the sequence XLA runs): the peak, a sparkline of bytes in use and reserved\n"
            "over time, the top buffers live at the peak with their op, shape and source line,\n"
            "each OOM with what was live then, and totals by op and by source line.\n"
            "A snapshot shows each device that has data (the one with an OOM, else the largest\n"
            "peak, first), and counts what was live before its history began (rebuilt from its\n"
            "segments, as pytorch.org/memory_viz does). \"In use\" is the bytes the program asked\n"
            "for (PyTorch's allocated memory); \"reserved\" the allocator's segments.\n"
            "\n"
            "Options:\n"
            "  --html OUT   write one self-contained HTML page instead (no network needed): a\n"
            "               zoomable timeline, the buffers at the peak as blocks by size with\n"
            "               hover details, and a table sortable by any column\n"
            "  --json       the figures as JSON\n"
            "  --top N      buffers and totals listed (default 15)\n"
            "  --width N    sparkline columns (default 72)\n"
            "  --ascii      ASCII sparklines instead of Unicode blocks\n"
            "  --title T    title of the report / page (default: the file name)\n"
            "  --device-index N  only device N (cuda:N) of a snapshot (HTML: the first device\n"
            "               unless given)\n"
            "\n"
            "Example:\n"
            "  hbm view snapshot.pickle\n"
            "  hbm view run.hbmt --html run.html && xdg-open run.html\n");
}

int cmd_view(int argc, char **argv) {
    const char *in = NULL, *html = NULL;
    int json = 0, device = -1;
    hbm_view_options o;
    hbm_view_options_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) {
            view_help(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--ascii")) {
            o.ascii = 1;
        } else if (!strcmp(a, "--title") && i + 1 < argc) {
            o.title = argv[++i];
        } else if (!strcmp(a, "--html") && i + 1 < argc) {
            html = argv[++i];
        } else if (!strcmp(a, "--top") && i + 1 < argc) {
            if (cli_parse_int(argv[++i], 0, 100000, &o.top)) return cli_usage_error("view", "--top %s: expected 0 to 100000", argv[i]);
        } else if (!strcmp(a, "--device-index") && i + 1 < argc) {
            if (cli_parse_int(argv[++i], 0, 4096, &device)) return cli_usage_error("view", "--device-index %s: expected 0 to 4096", argv[i]);
        } else if (!strcmp(a, "--width") && i + 1 < argc) {
            if (cli_parse_int(argv[++i], 8, 1000, &o.width)) return cli_usage_error("view", "--width %s: expected 8 to 1000", argv[i]);
        } else if (a[0] == '-') {
            return cli_usage_error("view", "unknown option '%s'", a);
        } else if (!in) {
            in = a;
        } else {
            return cli_usage_error("view", "one file at a time ('%s' and '%s')", in, a);
        }
    }
    if (!in) return cli_usage_error("view", "missing the FILE to view");
    hbm_trace *t;
    hbm_status s = hbm_trace_load_device(in, device, &t); /* -1: the first, the others attached */
    if (s) return cli_fail("view", s);
    if (html) {
        hbm_output out; /* written whole or not at all */
        if (!(s = hbm_output_open(&out, html))) {
            int rc = cli_output_done("view", &out, hbm_view_html(t, &o, out.f));
            if (!rc && strcmp(html, "-")) fprintf(stderr, "hbm view: wrote %s (device %s)\n", html, t->device);
            hbm_trace_free(t);
            return rc;
        }
    } else {
        s = hbm_view_all(t, json, &o, stdout);
    }
    hbm_trace_free(t);
    return s ? cli_fail("view", s) : 0;
}
