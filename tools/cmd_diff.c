/* cmd_diff.c - hbm diff: two traces, snapshots or plans side by side. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void diff_help(FILE *f) {
    fprintf(f,
            "Usage: hbm diff A B [--json] [--top N] [--device-index N]\n"
            "\n"
            "Compare two runs: PyTorch snapshots, hbm traces, RMM logs or HLO modules (as the\n"
            "sequence XLA runs), of the same program or not. Prints the peak of each (in use:\n"
            "the bytes the program asked for; reserved: the allocator's segments), the change,\n"
            "and what makes it: the buffers live at each peak grouped by op, source line and\n"
            "category, matched between A and B, with their bytes in each, largest change first.\n"
            "\n"
            "Options:\n"
            "  --json            one JSON object: a, b, delta_bytes_in_use, delta_bytes_reserved,\n"
            "                    contributors (every group)\n"
            "  --top N           groups listed (default 15)\n"
            "  --device-index N  device N (cuda:N) of both snapshots (default: each file's first:\n"
            "                    the one with an OOM, else the largest peak)\n"
            "\n"
            "Example:\n"
            "  hbm diff before.pickle after.pickle\n"
            "  hbm diff examples/svd_oom.hlo examples/svd_fixed.hlo\n");
}

int cmd_diff(int argc, char **argv) {
    const char *in[2] = {NULL, NULL};
    int json = 0, top = 15, device = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) {
            diff_help(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if ((!strcmp(a, "--top") || !strcmp(a, "--device-index")) && i + 1 < argc) {
            if (cli_parse_int(argv[++i], 0, 1000000, !strcmp(a, "--top") ? &top : &device))
                return cli_usage_error("diff", "%s %s: expected a number from 0", a, argv[i]);
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("diff", "unknown option '%s'", a);
        } else if (!in[0]) {
            in[0] = a;
        } else if (!in[1]) {
            in[1] = a;
        } else {
            return cli_usage_error("diff", "two files, A and B ('%s' is a third)", a);
        }
    }
    if (!in[1]) return cli_usage_error("diff", "expected two files, A and B");
    hbm_trace *t[2] = {NULL, NULL};
    hbm_status s = HBM_OK;
    for (int k = 0; k < 2 && !s; k++) s = hbm_trace_load_device(in[k], device, &t[k]);
    if (!s) s = hbm_diff_write(t[0], t[1], json ? -1 : top, json, stdout);
    hbm_trace_free(t[0]);
    hbm_trace_free(t[1]);
    return s ? cli_fail("diff", s) : 0;
}
