/* cmd_view.c - hbm view: where the memory of a trace went, in the terminal or a page. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void view_help(FILE *f) {
    fprintf(f,
            "Usage: hbm view FILE [--html OUT.html] [--json] [--top N] [--width COLS] [--ascii] [--title T]\n"
            "\n"
            "Show a trace (an hbm trace, an RMM log CSV or a PyTorch memory snapshot): the peak,\n"
            "a sparkline of bytes in use and reserved over time, the top buffers live at the\n"
            "peak with their op, shape and source line, and totals by op and by source line.\n"
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
            "\n"
            "Example:\n"
            "  hbm view snapshot.pickle\n"
            "  hbm view run.hbmt --html run.html && xdg-open run.html\n");
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int cmd_view(int argc, char **argv) {
    const char *in = NULL, *html = NULL;
    int json = 0;
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
            if (parse_int(argv[++i], 0, 100000, &o.top)) return cli_usage_error("view", "--top %s: expected 0 to 100000", argv[i]);
        } else if (!strcmp(a, "--width") && i + 1 < argc) {
            if (parse_int(argv[++i], 8, 1000, &o.width)) return cli_usage_error("view", "--width %s: expected 8 to 1000", argv[i]);
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
    hbm_status s = hbm_trace_load(in, &t);
    if (s) return cli_fail("view", s);
    if (html) {
        hbm_output out; /* written whole or not at all */
        if (!(s = hbm_output_open(&out, html))) {
            int rc = cli_output_done("view", &out, hbm_view_html(t, &o, out.f));
            if (!rc && strcmp(html, "-")) fprintf(stderr, "hbm view: wrote %s\n", html);
            hbm_trace_free(t);
            return rc;
        }
    } else {
        s = json ? hbm_view_json(t, &o, stdout) : hbm_view_text(t, &o, stdout);
    }
    hbm_trace_free(t);
    return s ? cli_fail("view", s) : 0;
}
