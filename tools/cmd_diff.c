/* cmd_diff.c - hbm diff: two traces, snapshots or plans side by side. */
#include <string.h>

#include "cli.h"

/* --device-index N (both sides) or A:B (each its own; "1:" or ":0" for one side) */
static hbm_status parse_devices(const char *v, void *dest) {
    int *d = dest;
    const char *colon = strchr(v, ':');
    char side[2][16] = {"", ""};
    size_t n = colon ? (size_t)(colon - v) : strlen(v);
    if (n >= sizeof side[0] || (colon && strlen(colon + 1) >= sizeof side[1])) n = sizeof side[0];
    else {
        memcpy(side[0], v, n);
        snprintf(side[1], sizeof side[1], "%s", colon ? colon + 1 : v);
    }
    for (int k = 0; k < 2 && n < sizeof side[0]; k++)
        if (!side[k][0] && colon) d[k] = -1;
        else if (cli_parse_int(side[k], 0, 4096, &d[k])) n = sizeof side[0];
    return n >= sizeof side[0] || (colon && d[0] < 0 && d[1] < 0) ? HBM_ERR_INVALID : HBM_OK;
}

int cmd_diff(int argc, char **argv) {
    int json = 0, top = 15, device[2] = {-1, -1};
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
        {.name = "--device-index", .kind = CLI_PARSE, .dest = device, .parse = parse_devices, .arg = "N|A:B",
         .expect = "expected N or A:B, device numbers from 0 to 4096 (1:0: device 1 of A, 0 of B)",
         .help = "device N (cuda:N) of both snapshots, or A of the first and B of\n"
                 "the second (1:0; 1: or :0 for one side). Default: each file's\n"
                 "first: the one with an OOM, else the largest peak"},
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
    for (int k = 0; k < 2; k++)
        if ((rc = cli_input("diff", in[k])) >= 0) return rc;
    hbm_trace *t[2] = {NULL, NULL};
    hbm_status s = HBM_OK;
    rc = 0;
    for (int k = 0; k < 2 && !rc; k++) rc = cli_load_trace("diff", in[k], module, device[k], stderr, &t[k], NULL, NULL);
    if (rc) {
        hbm_trace_free(t[0]);
        return rc;
    }
    if (!s) s = hbm_diff_write(t[0], t[1], json ? -1 : top, json, stdout);
    hbm_trace_free(t[0]);
    hbm_trace_free(t[1]);
    return s ? cli_fail("diff", s) : 0;
}
