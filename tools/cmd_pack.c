/* cmd_pack.c - hbm pack: place buffers with known lifetimes at offsets (MiniMalloc CSV). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* isatty */

#include "cli.h"

int cmd_pack(int argc, char **argv) {
    const char *output = NULL, *cap_text = NULL, *algo_text = NULL, *window = NULL;
    uint64_t above = 0;
    long long w_from = 0, w_to = 0;
    int json = 0;
    size_t width = CLI_WIDTH;
    hbm_pack_options o;
    hbm_pack_options_default(&o);
    const cli_opt opts[] = {
        {.name = "--capacity", .kind = CLI_SIZE, .dest = &o.capacity, .raw = &cap_text, .arg = "SIZE",
         .help = "find a packing within SIZE bytes (\"1048576\", \"1MiB\"; KB, MB, GB\n"
                 "are powers of 1000, KiB, MiB, GiB and a bare K, M, G of 1024),\n"
                 "or prove that none exists (exit 1)"},
        {.name = "--minimize", .kind = CLI_FLAG, .dest = &o.minimize, .help = "find the smallest packing and prove it optimal"},
        {.name = "--algorithm", .kind = CLI_PARSE, .dest = &o.algo, .parse = cli_pack_algo, .raw = &algo_text,
         .arg = "NAME",
         .help = "greedy  TFLite's greedy by size (largest first, best fit)\n"
                 "best    hbm's heuristic: skyline search, greedy orders, short\n"
                 "        exact probes, within a fixed budget of counted work\n"
                 "        (about 9 ms; the default without --capacity/--minimize)\n"
                 "exact   branch-and-bound over canonical packings, racing the\n"
                 "        same search over bundles of buffers that share a\n"
                 "        lifetime (default with --capacity or --minimize)\n"
                 "xla, xla-spatial, xla-temporal: XLA's heap simulator"},
        {.name = "--timeout", .kind = CLI_REAL, .dest = &o.timeout_s, .lo = 0, .hi = 1000000000, .arg = "SECONDS",
         .expect = "expected seconds > 0",
         .help = "wall-clock limit: stop the search, report the best packing and\n"
                 "the best bound proven so far (best: its budget). Time-dependent:\n"
                 "the answer may change with the machine's speed and load.\n"
                 "Without it the same input gives the same answer on every run."},
        {.name = "--alignment", .kind = CLI_SIZE, .dest = &o.alignment, .arg = "BYTES",
         .help = "alignment for buffers without their own"},
        {.name = "--output", .kind = CLI_STR, .dest = &output, .arg = "OUT.csv",
         .help = "write the packed buffers ('-' = stdout)"},
        {.name = "--json", .kind = CLI_FLAG, .dest = &json, .help = "print the result as JSON"},
        CLI_OPT_WIDTH(&width),
        {.name = "--window", .kind = CLI_STR, .dest = &window, .arg = "FROM:TO",
         .help = "pack a relaxation instead: the buffers alive in [FROM, TO),\n"
                 "lifetimes cut to it (a relaxation keeps every size and drops\n"
                 "pairs alive together: a bound proven on it holds for FILE;\n"
                 "its packings are not FILE's)"},
        {.name = "--above", .kind = CLI_SIZE, .dest = &above, .arg = "SIZE",
         .help = "pack a relaxation instead: only the times where at least SIZE\n"
                 "bytes are live (time k: the k-th such stretch)"},
    };
    const cli_command cmd = {
        .name = "pack",
        .args = "FILE.csv",
        .max_args = 1,
        .about = "Give every buffer an offset so that no two buffers alive at the same time overlap\n"
                 "(static memory packing, the problem XLA's and TFLite's planners solve greedily and\n"
                 "MiniMalloc solves exactly). Input is MiniMalloc's CSV: a header 'id,lower,upper,size'\n"
                 "(or begin/end for lower/upper; an optional alignment column), one buffer per line,\n"
                 "living over [lower, upper). The output CSV adds an 'offset' column.\n"
                 "\n"
                 "The lower bound is the most bytes live at any one time: no packing can be smaller.\n"
                 "Every packing printed has been verified (no overlap in time and space, alignment).",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = "Exit status: 0 a packing was found (within the capacity), 1 none (proven, or not\n"
                 "found within the budget), 2 bad usage or input. A progress line goes to stderr when\n"
                 "a search runs long on a terminal.",
        .examples = "Examples:\n"
                    "  hbm pack problem.csv                          # heuristic, vs the lower bound\n"
                    "  hbm pack problem.csv --capacity 1048576 --output solved.csv\n"
                    "  hbm pack problem.csv --minimize --timeout 60",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    const char *file = args.pos[0];
    int algo_set = algo_text != NULL;
    if (window) {
        char *mid, *end = NULL;
        w_from = strtoll(window, &mid, 10);
        if (mid != window && *mid == ':') w_to = strtoll(mid + 1, &end, 10);
        if (mid == window || *mid != ':' || !end || end == mid + 1 || *end || w_from >= w_to)
            return cli_usage_error("pack", "--window '%s': expected FROM:TO with FROM < TO", window);
    }
    if (window && above) return cli_usage_error("pack", "--window and --above exclude each other");
    if (o.minimize && o.capacity) return cli_usage_error("pack", "--capacity and --minimize exclude each other");
    if (!algo_set) o.algo = (o.capacity || o.minimize) ? HBM_PACK_EXACT : HBM_PACK_BEST;
    if (o.minimize && o.algo != HBM_PACK_EXACT)
        return cli_usage_error("pack", "--minimize needs --algorithm exact");
    if (!json && isatty(2) && o.algo == HBM_PACK_EXACT) o.progress = hbm_pack_progress_line, o.progress_user = stderr;

    if ((rc = cli_input("pack", file)) >= 0) return rc;
    hbm_timeline *tl;
    hbm_status s = hbm_minimalloc_read(file, &tl);
    if (s) return cli_fail("pack", s);
    size_t whole = tl->count;
    if (window || above) { /* a relaxation of the file's problem takes its place */
        hbm_timeline *rx = NULL;
        s = window ? hbm_pack_relax_window(tl, w_from, w_to, &rx) : hbm_pack_relax_above(tl, above, &rx);
        hbm_timeline_free(tl);
        if (s) return cli_fail("pack", s);
        tl = rx;
    }
    hbm_pack_result r;
    s = hbm_pack(tl, &o, &r);
    if (o.progress) hbm_pack_progress_end(stderr, &r);
    if (s && s != HBM_ERR_INFEASIBLE) {
        hbm_timeline_free(tl);
        return cli_fail("pack", s);
    }
    /* with --output -, stdout carries the CSV alone: the summary goes to stderr */
    hbm_pack_report rep = {.file = file, .tl = tl, .whole = whole, .window = window, .window_from = w_from,
                           .window_to = w_to, .above = above, .capacity_text = cap_text, .o = &o, .r = &r,
                           .width = width};
    s = hbm_pack_report_write(&rep, output && !strcmp(output, "-") ? stderr : stdout, json);
    if (s && s != HBM_ERR_IO) { /* a write error on stdout: said by hbm.c's check at the end */
        hbm_timeline_free(tl);
        return cli_fail("pack", s);
    }
    rc = r.feasible ? 0 : 1;
    if (r.feasible && output) {
        hbm_output out; /* written whole or not at all */
        if ((s = hbm_output_open(&out, output))) rc = cli_fail("pack", s);
        else rc = cli_output_done("pack", &out, hbm_minimalloc_write(tl, out.f));
    }
    hbm_timeline_free(tl);
    return rc;
}
