/* cmd_replay.c - hbm replay: the what-if of a trace against allocator configurations. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The configurations to compare: the --config ones, then one per --allocators name (with
 * --fraction), each checked before the trace is read. 0, or 2 after the message. */
static int configurations(const cli_list *configs, const char *allocators, const char *fraction, char list[][300],
                          int *n) {
    *n = 0;
    for (int i = 0; i < configs->n; i++) {
        hbm_config c;
        hbm_config_default(&c);
        if (!*configs->v[i]) return cli_bad_value("replay", "--config", "", "an empty configuration");
        if (hbm_config_apply(&c, configs->v[i])) return cli_bad_value("replay", "--config", configs->v[i], hbm_last_error());
        if (strlen(configs->v[i]) >= 300) return cli_bad_value("replay", "--config", configs->v[i], "longer than 299 characters");
        snprintf(list[(*n)++], 300, "%s", configs->v[i]);
    }
    if (!allocators && (configs->n || !fraction)) return 0; /* none named: the defaults for the trace */
    const char *p = allocators ? allocators : "bfc,platform"; /* a JAX fraction: JAX's allocators */
    if (!p[strspn(p, ", ")]) {
        return cli_bad_value("replay", "--allocators", allocators, "no allocator named (e.g. bfc,platform,cuda_async,vmm,torch)");
    }
    while (*p) {
        size_t k = strcspn(p, ",");
        if (k) {
            if (*n >= CLI_LIST_MAX) return cli_usage_error("replay", "at most %d configurations", CLI_LIST_MAX);
            snprintf(list[*n], 300, "allocator=%.*s%s%s", (int)k, p, fraction ? ",fraction=" : "", fraction ? fraction : "");
            hbm_config c;
            hbm_config_default(&c);
            int name = strcspn(p, "=:") >= k; /* one name, not settings */
            if (!name) return cli_bad_value("replay", "--allocators", allocators, "expected allocator names (settings go in --config)");
            if (hbm_config_apply(&c, list[*n])) return cli_bad_value("replay", "--allocators", NULL, hbm_last_error());
            (*n)++;
        }
        p += k + (p[k] == ',');
    }
    return 0;
}

int cmd_replay(int argc, char **argv) {
    const char *allocators = NULL, *device = NULL, *fraction = NULL;
    cli_list configs = {.n = 0};
    int json = 0, suggest = 0, device_index = -1;
    double fraction_value = 0;
    const cli_opt opts[] = {
        {.name = "--allocators", .kind = CLI_STR, .dest = &allocators, .arg = "LIST",
         .help = "policies to compare (default: torch for a PyTorch snapshot, else\n"
                 "bfc,platform; also cuda_async, vmm), each opened as allocator=NAME\n"
                 "plus --fraction when given"},
        {.name = "--config", .kind = CLI_LIST, .dest = &configs, .arg = "STR",
         .help = "a full configuration to compare (repeatable), e.g.\n"
                 "'allocator=bfc,preallocate=false' ('hbm config --help' lists the keys)"},
        {.name = "--device", .kind = CLI_STR, .dest = &device, .arg = "D",
         .help = "sim:SIZE (e.g. sim:80GiB) or a device name from 'hbm devices'\n"
                 "(h100, a100-40gb, ...; default: the traced device's capacity; for\n"
                 "a snapshot, reserved + free at its OOM, else its peak reserved;\n"
                 "else sim:80GiB), the same for the table, the twin and --suggest"},
        {.name = "--fraction", .kind = CLI_REAL, .dest = &fraction_value, .raw = &fraction, .lo = 0, .hi = 1,
         .arg = "F", .help = "memory fraction for --allocators (as XLA_PYTHON_CLIENT_MEM_FRACTION)"},
        {.name = "--json", .kind = CLI_FLAG, .dest = &json, .help = "one JSON object with every result"},
        {.name = "--device-index", .kind = CLI_INT, .dest = &device_index, .lo = 0, .hi = 4096, .arg = "N",
         .help = "device N (cuda:N) of a snapshot (default: the one with an OOM, else\n"
                 "the largest peak; the device replayed is named)"},
        {.name = "--suggest", .kind = CLI_FLAG, .dest = &suggest,
         .help = "(PyTorch snapshots) the smallest PYTORCH_CUDA_ALLOC_CONF change\n"
                 "that avoids the OOM on the device, or by how much it is over"},
    };
    const cli_command cmd = {
        .name = "replay",
        .args = "TRACE",
        .max_args = 1,
        .usage = "       hbm replay SNAPSHOT --suggest [--device D] [--json]",
        .about = "Replay every alloc and free of TRACE against each allocator configuration on a\n"
                 "simulated device and compare: peak in use, peak reserved, fragmentation at the peak,\n"
                 "raw device calls, and the first allocation that would fail (event index, time and\n"
                 "the allocator's OOM report). The optimal packing bound (most bytes ever live at\n"
                 "once) shows how far each allocator is from the best possible.\n"
                 "\n"
                 "TRACE is an hbm trace (trace=PATH / HBM_TRACE), an RMM log CSV, a PyTorch memory\n"
                 "snapshot (pickle or JSON) or an HLO module; the format is recognized from the\n"
                 "content. A snapshot's replay starts from the blocks and segments that were live\n"
                 "when its history began (rebuilt from its segments).\n"
                 "Each allocation and free goes to the stream the trace recorded, and recorded stream\n"
                 "synchronizations are replayed, so cuda_async reuses memory across streams as it did.\n"
                 "allocator=torch replays PyTorch's caching allocator (docs/allocators.md); on a\n"
                 "snapshot, with the settings it was recorded with (its allocator_settings).",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = "Exit status: 0 the trace ran to its end under every configuration, 1 one of them\n"
                 "ran out of memory (the table says which; --suggest: no setting avoids the OOM),\n"
                 "2 bad usage or input: a bad --device, --config or --allocators is found before\n"
                 "the trace is read.",
        .examples = "Example:\n"
                    "  hbm run --trace run.hbmt -- python train.py # record (or HBM_TRACE=, or a snapshot)\n"
                    "  hbm replay run.hbmt --allocators bfc,platform --device h100 --fraction .9",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    const char *path = args.pos[0];
    /* everything that can be checked before the trace is read, is */
    char spec[160];
    if (device && (rc = cli_device_arg("replay", device, spec, sizeof spec))) return rc;
    char list[CLI_LIST_MAX][300];
    int n = 0;
    if (!suggest && (rc = configurations(&configs, allocators, fraction, list, &n))) return rc;
    if ((rc = cli_input("replay", path)) >= 0) return rc;
    hbm_trace *t;
    hbm_status s = hbm_trace_load_device(path, device_index, &t);
    if (s) return cli_fail("replay", s);
    if (!json && (t->n_others || device_index >= 0))
        fprintf(stderr, "hbm replay: device %s of %s (--device-index picks another)\n", t->device, path);
    if (suggest) { /* exit 1 when no setting avoids the OOM, as a negative verdict */
        int none = 0;
        s = hbm_replay_suggest_write(t, device, stdout, json, &none);
        hbm_trace_free(t);
        return s ? cli_fail("replay", s) : none;
    }
    const char *cfgs[CLI_LIST_MAX];
    for (int i = 0; i < n; i++) cfgs[i] = list[i];
    int failed = 0, failed_all = 0;
    if (!json && t->n_others && device_index < 0 && !strcmp(t->source, "xprof")) {
        /* a profile's allocators: all devices in one table, then the first in full */
        const hbm_trace *all[64];
        size_t na = 0;
        all[na++] = t;
        for (size_t k = 0; k < t->n_others && na < 64; k++) all[na++] = t->others[k];
        s = hbm_replay_devices_write(all, na, device, cfgs, (size_t)n, stdout, &failed_all);
        if (s) {
            hbm_trace_free(t);
            return cli_fail("replay", s);
        }
        fputc('\n', stdout);
    }
    s = hbm_replay_run_write(t, device, cfgs, (size_t)n, stdout, json, &failed);
    hbm_trace_free(t);
    return s ? cli_fail("replay", s) : failed || failed_all;
}
