/* cmd_view.c - hbm view: where the memory of a trace went, in the terminal or a page. */
#include <string.h>

#include "cli.h"

int cmd_view(int argc, char **argv) {
    const char *html = NULL, *module = NULL;
    int json = 0, device = -1;
    hbm_view_options o;
    hbm_view_options_default(&o);
    const cli_opt opts[] = {
        {.name = "--html", .kind = CLI_STR, .dest = &html, .arg = "OUT",
         .help = "write one self-contained HTML page instead (no network needed): a\n"
                 "zoomable timeline, the buffers at the peak as blocks by size with\n"
                 "hover details, and a table sortable by any column"},
        {.name = "--json", .kind = CLI_FLAG, .dest = &json, .help = "the figures as JSON"},
        {.name = "--top", .kind = CLI_INT, .dest = &o.top, .lo = 0, .hi = 100000, .arg = "N",
         .help = "buffers and totals listed (default 15)"},
        {.name = "--width", .kind = CLI_INT, .dest = &o.width, .lo = 8, .hi = 1000, .arg = "N",
         .help = "sparkline columns (default 72)"},
        {.name = "--ascii", .kind = CLI_FLAG, .dest = &o.ascii, .help = "ASCII sparklines instead of Unicode blocks"},
        {.name = "--title", .kind = CLI_STR, .dest = &o.title, .arg = "T",
         .help = "title of the report / page (default: the file name)"},
        {.name = "--module", .kind = CLI_STR, .dest = &module, .arg = "NAME",
         .help = "the module of a profile or protobuf with several (default: the\n"
                 "largest): its name as listed, 'jit_f(3)', or 'jit_f'"},
        {.name = "--device-index", .kind = CLI_INT, .dest = &device, .lo = 0, .hi = 4096, .arg = "N",
         .help = "only device N (cuda:N) of a snapshot (HTML: the first device\n"
                 "unless given)"},
    };
    const cli_command cmd = {
        .name = "view",
        .args = "FILE",
        .max_args = 1,
        .about = "Show a trace (an hbm trace, an RMM log CSV, a PyTorch memory snapshot, or an HLO\n"
                 "module as the sequence XLA runs, as text or XLA's protobuf: an XProf profile LOGDIR or\n"
                 "*.xplane.pb, *.hlo_proto.pb, *.hlo.pb): the peak, a sparkline of bytes in use and reserved\n"
                 "over time, the top buffers live at the peak with their op, shape and source line,\n"
                 "each OOM with what was live then, and totals by op and by source line.\n"
                 "A snapshot shows each device that has data (the one with an OOM, else the largest\n"
                 "peak, first), and counts what was live before its history began (rebuilt from its\n"
                 "segments, as pytorch.org/memory_viz does). \"In use\" is the bytes the program asked\n"
                 "for (PyTorch's allocated memory); \"reserved\" the allocator's segments.",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = CLI_EXITS_DONE,
        .examples = "Example:\n"
                    "  hbm view snapshot.pickle\n"
                    "  hbm view run.hbmt --html run.html && xdg-open run.html",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    const char *in = args.pos[0];
    hbm_trace *t;
    hbm_hlo_module *xm; /* a protobuf's module with XLA's own assignment, and its plan */
    hbm_plan *xp;
    FILE *notes = html || json ? stderr : stdout;
    if ((rc = cli_load_trace("view", in, module, device, notes, &t, &xm, &xp))) return rc; /* device -1: the first */
    hbm_status s;
    if (html) {
        hbm_output out; /* written whole or not at all */
        if (!(s = hbm_output_open(&out, html))) {
            rc = cli_output_done("view", &out, hbm_view_html(t, &o, out.f));
            if (!rc && strcmp(html, "-")) fprintf(stderr, "hbm view: wrote %s (device %s)\n", html, t->device);
            hbm_plan_free(xp);
            hbm_hlo_module_free(xm);
            hbm_trace_free(t);
            return rc;
        }
    } else {
        s = hbm_view_all(t, json, &o, stdout);
        if (!s && xp && !json) { /* XLA's own figures and hbm's agreement */
            fputc('\n', stdout);
            s = hbm_plan_xla_text(xp, stdout, (size_t)o.top);
        }
    }
    hbm_plan_free(xp);
    hbm_hlo_module_free(xm);
    hbm_trace_free(t);
    return s ? cli_fail("view", s) : 0;
}
