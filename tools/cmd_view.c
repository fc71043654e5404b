/* cmd_view.c - hbm view: where the memory of a trace went, in the terminal or a page. */
#include <string.h>

#include "cli.h"

/* An HLO module: XProf's Memory Viewer of its plan (the same figures as hbm plan). */
static int view_plan(const char *in, const char *module, const char *html, int json, const hbm_view_options *vo,
                     long space) {
    hbm_hlo_module *m; /* HLO text, or a protobuf input's module (the list and the choice first) */
    int rc0 = cli_open_module("view", in, module, html || json ? stderr : stdout, &m);
    if (rc0) return rc0;
    hbm_status s;
    hbm_plan *p;
    if ((s = hbm_plan_run(m, NULL, &p))) {
        hbm_hlo_module_free(m);
        return cli_fail("view", s);
    }
    hbm_plan_view_options o;
    hbm_plan_view_options_default(&o);
    o.width = vo->width;
    o.top = vo->top;
    o.ascii = vo->ascii;
    o.title = vo->title;
    o.memory_space = space;
    int rc = 0;
    if (html) {
        hbm_output out; /* written whole or not at all */
        if (!(s = hbm_output_open(&out, html))) {
            rc = cli_output_done("view", &out, hbm_plan_view_html(p, &o, out.f));
            if (!rc && strcmp(html, "-")) fprintf(stderr, "hbm view: wrote %s\n", html);
        } else {
            rc = cli_fail("view", s);
        }
    } else {
        s = hbm_plan_view_write(p, &o, json, stdout);
        if (!s && fflush(stdout)) s = HBM_ERR_IO;
        if (s) rc = cli_fail("view", s);
    }
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    return rc;
}

/* A profile's memory profile (the device allocators' events): 1 when shown (*rc set), 0 when
 * the profile has none (said on notes; its modules are shown instead). */
static int view_memprof(const char *in, const char *html, int json, const hbm_view_options *vo, int device,
                        FILE *notes, int *rc) {
    hbm_memprof *mp;
    hbm_status s = hbm_memprof_open(in, &mp);
    if (s) {
        *rc = cli_fail("view", s);
        return 1;
    }
    if (!hbm_memprof_allocator_count(mp)) {
        hbm_memprof_write(mp, -1, 0, 0, 8, 1, notes);
        fputs("Showing its modules instead.\n\n", notes);
        hbm_memprof_close(mp);
        return 0;
    }
    *rc = 0;
    if (html) { /* the allocators' traces: the largest peak first, a selector for the others */
        hbm_trace *t = NULL;
        s = hbm_trace_load_device(in, device, &t);
        hbm_output out; /* written whole or not at all */
        if (!s && !(s = hbm_output_open(&out, html))) {
            *rc = cli_output_done("view", &out, hbm_view_html(t, vo, out.f));
            if (!*rc && strcmp(html, "-")) fprintf(stderr, "hbm view: wrote %s (%s)\n", html, t->device);
            s = HBM_OK;
        }
        hbm_trace_free(t);
    } else {
        if (!(s = hbm_memprof_attribute(mp)))
            s = hbm_memprof_write(mp, device, json, (size_t)vo->top, vo->width, vo->ascii, stdout);
        if (!s && fflush(stdout)) s = HBM_ERR_IO;
    }
    if (s) *rc = cli_fail("view", s);
    hbm_memprof_close(mp);
    return 1;
}

int cmd_view(int argc, char **argv) {
    const char *html = NULL, *module = NULL;
    int json = 0, device = -1, space = -1, modules = 0;
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
        {.name = "--ascii", .kind = CLI_FLAG, .dest = &o.ascii,
         .help = "ASCII sparklines instead of Unicode blocks (the default under a\n"
                 "locale that is not UTF-8, such as LC_ALL=C)"},
        {.name = "--title", .kind = CLI_STR, .dest = &o.title, .arg = "T",
         .help = "title of the report / page (default: the file name)"},
        {.name = "--module", .kind = CLI_STR, .dest = &module, .arg = "NAME",
         .help = "the module of a profile or protobuf with several (default: the\n"
                 "largest): its name as listed, 'jit_f(3)', or 'jit_f'"},
        {.name = "--modules", .kind = CLI_FLAG, .dest = &modules,
         .help = "a profile with a memory profile: XProf's Memory Viewer of its\n"
                 "modules (the largest, or --module's) instead"},
        {.name = "--device-index", .kind = CLI_INT, .dest = &device, .lo = 0, .hi = 4096, .arg = "N",
         .help = "only device N (cuda:N) of a snapshot, or of a profile's memory\n"
                 "profile (default: every device; HTML: one page, a\n"
                 "selector switches between them)"},
        {.name = "--memory-space", .kind = CLI_INT, .dest = &space, .lo = 0, .hi = 1 << 20, .arg = "N",
         .help = "HLO module: only memory space S(N) (0 device memory, 5 host);\n"
                 "default every space that holds an allocation"},
    };
    const cli_command cmd = {
        .name = "view",
        .args = "FILE",
        .max_args = 1,
        .about = "An HLO module (text, or XLA's protobuf: an XProf profile LOGDIR or *.xplane.pb,\n"
                 "*.hlo_proto.pb, *.hlo.pb, with XLA's own figures beside): XProf's Memory Viewer of\n"
                 "hbm plan's buffer assignment, offline: the\n"
                 "overview (peak heap with and without fragmentation, padding, arguments, HLO\n"
                 "temporaries, fragmentation), heap size against program order (schedule steps, not\n"
                 "time) with the peak marked, and the buffers at the peak by program order, size and\n"
                 "padding, for each memory space; the same figures as hbm plan.\n"
                 "A trace (an hbm trace, an RMM log CSV, a PyTorch memory snapshot): the peak, a\n"
                 "sparkline of bytes in use and reserved over time, the top buffers live at the peak\n"
                 "with their op, shape and source line, each OOM with what was live then, and totals\n"
                 "by op and by source line.\n"
                 "A snapshot shows each device that has data (the one with an OOM, else the largest\n"
                 "peak, first), and counts what was live before its history began (rebuilt from its\n"
                 "segments, as pytorch.org/memory_viz does). \"In use\" is the bytes the program asked\n"
                 "for (PyTorch's allocated memory); \"reserved\" the allocator's segments.\n"
                 "A profile whose host plane records the device allocators' events (JAX's\n"
                 "jax.profiler.trace): its memory profile, as XProf's Memory Profile tool computes it\n"
                 "(peak, its step, capacity, fragmentation, the allocations live at the peak), each\n"
                 "allocation there attributed to the module execution that made it (temp, output,\n"
                 "parameter) or to the arrays kept between calls; all devices in one table first.\n"
                 "--modules or --module shows the Memory Viewer of a module instead.",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = CLI_EXITS_DONE,
        .examples = "Example:\n"
                    "  hbm view snapshot.pickle\n"
                    "  hbm view module.hlo --html m.html     # XProf's Memory Viewer of the plan\n"
                    "  hbm view LOGDIR                       # a JAX profile's memory profile\n"
                    "  hbm view LOGDIR --modules             # its largest module's Memory Viewer\n"
                    "  hbm view run.hbmt --html run.html && xdg-open run.html",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    const char *in = args.pos[0];
    if ((rc = cli_input("view", in)) >= 0) return rc;
    if (!cli_utf8()) o.ascii = 1; /* a terminal that cannot show the blocks */
    hbm_proto_kind pk = hbm_proto_path_kind(in);
    if ((pk == HBM_PROTO_XSPACE || pk == HBM_PROTO_PROFILE_DIR) && !module && !modules && space < 0 &&
        view_memprof(in, html, json, &o, device, html || json ? stderr : stdout, &rc))
        return rc;
    if (hbm_hlo_file_is_text(in) || pk != HBM_PROTO_NONE)
        return view_plan(in, module, html, json, &o, space);
    if (module) return cli_usage_error("view", "--module: %s holds no modules to choose from", in);
    hbm_trace *t;
    hbm_status s = hbm_trace_load_device(in, device, &t); /* -1: the first, the others attached */
    if (s) return cli_fail("view", s);
    if (html) {
        hbm_output out; /* written whole or not at all */
        if (!(s = hbm_output_open(&out, html))) {
            rc = cli_output_done("view", &out, hbm_view_html(t, &o, out.f));
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
