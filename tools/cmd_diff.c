/* cmd_diff.c - hbm diff: two traces, snapshots or plans side by side. */
#include "cli.h"

int cmd_diff(int argc, char **argv) {
    int json = 0, top = 15, device = -1;
    const char *module = NULL;
    const cli_opt opts[] = {
        {.name = "--json", .kind = CLI_FLAG, .dest = &json,
         .help = "one JSON object: a, b, delta_bytes_in_use, delta_bytes_reserved,\n"
                 "contributors (every group)"},
        {.name = "--top", .kind = CLI_INT, .dest = &top, .lo = 0, .hi = 1000000, .arg = "N",
         .help = "groups listed (default 15)"},
        {.name = "--module", .kind = CLI_STR, .dest = &module, .arg = "NAME",
         .help = "the module of each profile or protobuf input with several\n"
                 "(default: each one's largest)"},
        {.name = "--device-index", .kind = CLI_INT, .dest = &device, .lo = 0, .hi = 4096, .arg = "N",
         .help = "device N (cuda:N) of both snapshots (default: each file's first:\n"
                 "the one with an OOM, else the largest peak)"},
    };
    const cli_command cmd = {
        .name = "diff",
        .args = "A B",
        .max_args = 2,
        .about = "Compare two runs: PyTorch snapshots, hbm traces, RMM logs or HLO modules (text or\n"
                 "XLA's protobuf: XProf profiles, *.hlo_proto.pb, *.hlo.pb; as the\n"
                 "sequence XLA runs), of the same program or not. Prints the peak of each (in use:\n"
                 "the bytes the program asked for; reserved: the allocator's segments), the change,\n"
                 "and what makes it: the buffers live at each peak grouped by op, source line and\n"
                 "category, matched between A and B, with their bytes in each, largest change first.",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = CLI_EXITS_DONE,
        .examples = "Example:\n"
                    "  hbm diff before.pickle after.pickle\n"
                    "  hbm diff examples/svd_oom.hlo examples/svd_fixed.hlo",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    const char *const *in = args.pos;
    hbm_trace *t[2] = {NULL, NULL};
    hbm_status s = HBM_OK;
    rc = 0;
    for (int k = 0; k < 2 && !rc; k++) rc = cli_load_trace("diff", in[k], module, device, stderr, &t[k], NULL, NULL);
    if (rc) {
        hbm_trace_free(t[0]);
        return rc;
    }
    if (!s) s = hbm_diff_write(t[0], t[1], json ? -1 : top, json, stdout);
    hbm_trace_free(t[0]);
    hbm_trace_free(t[1]);
    return s ? cli_fail("diff", s) : 0;
}
