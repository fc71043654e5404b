/* cmd_view.c - hbm view: where the memory of a trace went, in the terminal or a page. */
#include <string.h>
#include <sys/stat.h>

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

/* Several inputs, a folder or a summary: the fleet view (docs/fleet.md). Exit 2 when an
 * input could not be read (the table of the others still printed). */
static int view_fleet(char **in, int n, const char *html, int json, const hbm_view_options *vo, int jobs, double margin,
                      double tolerance) {
    hbm_fleet_options o;
    hbm_fleet_options_default(&o);
    o.jobs = jobs;
    o.margin = margin / 100;
    o.group_tolerance = tolerance / 100;
    if (vo->top) o.top = vo->top;
    o.title = vo->title;
    char pages[4200];
    if (html && strcmp(html, "-")) { /* each rank's own page beside the fleet's */
        snprintf(pages, sizeof pages, "%s.ranks", html);
        o.pages = pages;
    }
    hbm_fleet *fl;
    hbm_status s = hbm_fleet_run((const char *const *)in, (size_t)n, &o, &fl);
    if (s) return cli_fail("view", s);
    if (hbm_fleet_failed(fl) == hbm_fleet_ranks(fl)) { /* nothing read: the errors, no table */
        hbm_fleet_write(fl, HBM_FLEET_TEXT, stderr);
        hbm_fleet_free(fl);
        fprintf(stderr, "hbm view: none of the inputs could be read\n");
        return 2;
    }
    int rc = 0;
    if (html) {
        hbm_output out;
        if (!(s = hbm_output_open(&out, html))) {
            rc = cli_output_done("view", &out, hbm_fleet_write(fl, HBM_FLEET_HTML, out.f));
            if (!rc && strcmp(html, "-")) fprintf(stderr, "hbm view: wrote %s (and each rank's page in %s/)\n", html, pages);
        } else {
            rc = cli_fail("view", s);
        }
    } else {
        s = hbm_fleet_write(fl, json ? HBM_FLEET_JSON : HBM_FLEET_TEXT, stdout);
        if (!s && fflush(stdout)) s = HBM_ERR_IO;
        if (s) rc = cli_fail("view", s);
    }
    if (!rc && hbm_fleet_failed(fl)) {
        fprintf(stderr, "hbm view: %zu of %zu inputs could not be read (named %s)\n", hbm_fleet_failed(fl),
                hbm_fleet_ranks(fl), html ? "in the page" : json ? "in the JSON" : "above");
        rc = 2;
    }
    hbm_fleet_free(fl);
    return rc;
}

static int is_dir(const char *p) {
    struct stat st;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
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
    if (html) { /* the memory profile's page: every allocator (or --device-index's) */
        hbm_output out; /* written whole or not at all */
        if (!(s = hbm_memprof_attribute(mp)) && !(s = hbm_output_open(&out, html))) {
            *rc = cli_output_done("view", &out, hbm_memprof_html(mp, device, out.f));
            if (!*rc && strcmp(html, "-")) fprintf(stderr, "hbm view: wrote %s (the memory profile)\n", html);
        }
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
    const char *html = NULL, *module = NULL, *summary = NULL;
    int json = 0, device = -1, space = -1, jobs = 0, modules = 0;
    double margin = 10, tolerance = 2;
    hbm_view_options o;
    hbm_view_options_default(&o);
    size_t width = (size_t)o.width;
    const cli_opt opts[] = {
        {.name = "--html", .kind = CLI_STR, .dest = &html, .arg = "OUT",
         .help = "write one self-contained HTML page instead (no network needed): a\n"
                 "zoomable timeline, the buffers at the peak as blocks by size with\n"
                 "hover details, and a table sortable by any column"},
        {.name = "--json", .kind = CLI_FLAG, .dest = &json, .help = "the figures as JSON"},
        {.name = "--top", .kind = CLI_INT, .dest = &o.top, .lo = 0, .hi = 100000, .arg = "N",
         .help = "buffers and totals listed (default 15)"},
        {.name = "--width", .kind = CLI_COLUMNS, .dest = &width, .lo = 8, .hi = 1000, .arg = "COLUMNS",
         .help = "sparkline columns (default 72; 0: no limit, a column per event)"},
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
        {.name = "--jobs", .alias = "-j", .kind = CLI_INT, .dest = &jobs, .lo = 0, .hi = 4096, .arg = "N",
         .help = "several inputs: read on N threads (default 0: the cores)"},
        {.name = "--margin", .kind = CLI_REAL, .dest = &margin, .lo = -1, .hi = 100000, .arg = "PCT",
         .help = "several inputs: an outlier is more than PCT % over the median peak\n"
                 "in use or reserved (default 10)"},
        {.name = "--group-tolerance", .kind = CLI_REAL, .dest = &tolerance, .lo = -1, .hi = 100000, .arg = "PCT",
         .help = "several inputs: ranks whose peaks in use lie within PCT % of their\n"
                 "group's smallest are one group (default 2)"},
        {.name = "--summary", .kind = CLI_STR, .dest = &summary, .arg = "OUT",
         .help = "write FILE's summary (the fleet view's input, docs/fleet.md) to OUT\n"
                 "('-': standard output) instead of a view"},
        {.name = "--memory-space", .kind = CLI_INT, .dest = &space, .lo = 0, .hi = 1 << 20, .arg = "N",
         .help = "HLO module: only memory space S(N) (0 device memory, 5 host);\n"
                 "default every space that holds an allocation"},
    };
    const cli_command cmd = {
        .name = "view",
        .args = "FILE...",
        .max_args = 1 << 20,
        .many = 1,
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
                 "Several inputs (files, folders, summaries; each device of a file a rank): the fleet\n"
                 "view (docs/fleet.md): per rank its peaks, fragmentation at the peak, OOMs and what\n"
                 "was largest at its peak; across ranks the median and spread, outliers, groups of\n"
                 "ranks alike, and the worst rank against the median one (hbm diff).\n"
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
                    "  hbm view run.hbmt --html run.html && xdg-open run.html\n"
                    "  hbm view snapshots/rank*.pickle --jobs 8     # the fleet: one row per rank\n"
                    "  hbm view snapshots/ --html fleet.html        # a bar per rank, each its own page",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    o.width = (int)width;
    if (rc >= 0) return rc;
    const char *in = args.pos[0];
    if (summary) {
        if (args.nall != 1) return cli_usage_error("view", "--summary: one input at a time (got %d)", args.nall);
        hbm_status s = hbm_fleet_summary_file(in, summary);
        if (!s && strcmp(summary, "-")) fprintf(stderr, "hbm view: wrote %s\n", summary);
        return s ? cli_fail("view", s) : 0;
    }
    /* a folder is a fleet of ranks, unless it is a profile's logdir (plugins/profile/RUN) */
    if (args.nall > 1 || (is_dir(in) && hbm_proto_path_kind(in) == HBM_PROTO_NONE) ||
        hbm_fleet_is_summary_file(in)) {
        if (module || device >= 0 || space >= 0)
            return cli_usage_error("view", "--module, --device-index and --memory-space are for one input");
        return view_fleet(args.all, args.nall, html, json, &o, jobs, margin, tolerance);
    }
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
    if (s == HBM_ERR_IO && ferror(stdout)) { /* a view past stdio's buffer: said as every command says it */
        fprintf(stderr, "hbm view: error writing standard output: %s\n", hbm_last_error());
        return 2;
    }
    return s ? cli_fail("view", s) : 0;
}
