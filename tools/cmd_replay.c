/* cmd_replay.c - hbm replay: the what-if of a trace against allocator configurations. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void replay_help(FILE *f) {
    fprintf(f,
            "Usage: hbm replay TRACE [--allocators bfc,platform,...] [--config 'key=value,...']...\n"
            "                  [--device sim:SIZE | --device NAME] [--fraction F] [--json]\n"
            "                  [--device-index N]\n"
            "       hbm replay SNAPSHOT --suggest [--device D] [--json]\n"
            "\n"
            "Replay every alloc and free of TRACE against each allocator configuration on a\n"
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
            "\n"
            "Options:\n"
            "  --allocators LIST   policies to compare (default bfc,platform; also cuda_async,\n"
            "                      vmm), each opened as allocator=NAME plus --fraction when given\n"
            "  --config STR        a full configuration to compare (repeatable), e.g.\n"
            "                      'allocator=bfc,preallocate=false'\n"
            "  --device D          sim:SIZE (e.g. sim:80GiB) or a device name from\n"
            "                      'hbm devices' (h100, a100-40gb, ...; default: the traced\n"
            "                      device's capacity, else sim:80GiB)\n"
            "  --fraction F        memory fraction for --allocators (as XLA_PYTHON_CLIENT_MEM_FRACTION)\n"
            "  --json              one JSON object with every result\n"
            "  --device-index N    device N (cuda:N) of a snapshot (default: the one with an\n"
            "                      OOM, else the largest peak; the device replayed is named)\n"
            "                      (allocator=torch on a snapshot: with the settings it was recorded\n"
            "                      with, its allocator_settings)\n"
            "  --suggest           (PyTorch snapshots) the smallest PYTORCH_CUDA_ALLOC_CONF change\n"
            "                      that avoids the OOM on the device (default: the trace's capacity,\n"
            "                      else the history's peak reserved), or by how much it is over;\n"
            "                      allocator=torch replays PyTorch's caching allocator (docs/allocators.md)\n"
            "\n"
            "Example:\n"
            "  hbm run --trace run.hbmt -- python train.py # record (or HBM_TRACE=, or a snapshot)\n"
            "  hbm replay run.hbmt --allocators bfc,platform --device h100 --fraction .9\n");
}

int cmd_replay(int argc, char **argv) {
    const char *path = NULL, *allocators = NULL, *device = NULL, *fraction = NULL;
    const char *configs[32];
    int nconfigs = 0, json = 0, suggest = 0;
    int device_index = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is(a, "-h", "--help")) {
            replay_help(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--device-index") && i + 1 < argc) {
            if (cli_parse_int(argv[++i], 0, 4096, &device_index))
                return cli_usage_error("replay", "--device-index %s: expected 0 to 4096", argv[i]);
        } else if (!strcmp(a, "--suggest")) {
            suggest = 1;
        } else if ((!strcmp(a, "--allocators") || !strcmp(a, "--device") || !strcmp(a, "--fraction") ||
                    !strcmp(a, "--config")) && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(a, "--allocators")) allocators = v;
            else if (!strcmp(a, "--device")) device = v;
            else if (!strcmp(a, "--fraction")) fraction = v;
            else if (nconfigs < 32) configs[nconfigs++] = v;
            else return cli_usage_error("replay", "at most 32 --config options");
        } else if (a[0] == '-') {
            return cli_usage_error("replay", "unknown option '%s'", a);
        } else if (!path) {
            path = a;
        } else {
            return cli_usage_error("replay", "one trace at a time ('%s' and '%s')", path, a);
        }
    }
    if (!path) return cli_usage_error("replay", "missing the TRACE file");
    if (fraction) {
        char *end;
        double f = strtod(fraction, &end);
        if (*end || !(f > 0 && f <= 1)) return cli_usage_error("replay", "--fraction %s: expected a number in (0, 1]", fraction);
    }
    hbm_trace *t;
    hbm_status s = hbm_trace_load_device(path, device_index, &t);
    if (s) return cli_fail("replay", s);
    if (!json && (t->n_others || device_index >= 0))
        fprintf(stderr, "hbm replay: device %s of %s (--device-index picks another)\n", t->device, path);
    char spec[160];
    if (device && (s = hbm_replay_device_spec(device, spec, sizeof spec))) {
        hbm_trace_free(t);
        fprintf(stderr, "hbm replay: --device: %s\n", hbm_last_error());
        return 2;
    }
    if (suggest) { /* exit 1 when no setting avoids the OOM, as a negative verdict */
        hbm_torch_suggestion sg;
        s = hbm_torch_suggest(t, device ? spec : NULL, &sg);
        if (!s) s = hbm_torch_suggest_write(&sg, stdout, json);
        hbm_trace_free(t);
        return s ? cli_fail("replay", s) : sg.best < 0;
    }
    /* the configurations: --config ones, then one per --allocators name */
    char list[32][300];
    int n = 0;
    for (int i = 0; i < nconfigs; i++) snprintf(list[n++], sizeof list[0], "%s", configs[i]);
    if (allocators || !nconfigs) {
        const char *p = allocators ? allocators : "bfc,platform";
        while (*p && n < 32) {
            size_t k = strcspn(p, ",");
            if (k) {
                /* allocator=torch on a snapshot: under the settings it was recorded with */
                int rec = k == 5 && !strncmp(p, "torch", 5) && t->torch_settings[0];
                snprintf(list[n], sizeof list[0], "allocator=%.*s%s%s%s%s", (int)k, p, rec ? "," : "",
                         rec ? t->torch_settings : "", fraction ? ",fraction=" : "", fraction ? fraction : "");
                n++;
            }
            p += k + (p[k] == ',');
        }
    }
    const char *cfgs[32];
    for (int i = 0; i < n; i++) cfgs[i] = list[i];
    int failed = 0, torch = 0;
    for (int i = 0; i < n; i++) torch |= strstr(cfgs[i], "allocator=torch") != NULL;
    torch = torch && !strcmp(t->source, "torch");
    if (!torch) {
        s = hbm_replay_run_write(t, device, cfgs, (size_t)n, stdout, json, &failed);
    } else { /* a PyTorch snapshot replayed with its twin: what PyTorch did, and the match */
        char *buf = NULL;
        size_t len = 0;
        FILE *mf = open_memstream(&buf, &len);
        s = mf ? hbm_replay_run_write(t, device, cfgs, (size_t)n, mf, json, &failed) : HBM_ERR_NOMEM;
        if (mf) fclose(mf);
        if (!s && json && len >= 2) len -= 2; /* the closing "}\n": the torch members go inside */
        if (!s) fwrite(buf, 1, len, stdout);
        if (!s) s = hbm_torch_replay_write(t, stdout, json);
        if (!s && json) fputs("}\n", stdout);
        free(buf);
    }
    hbm_trace_free(t);
    return s ? cli_fail("replay", s) : failed;
}
