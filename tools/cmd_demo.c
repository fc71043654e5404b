/* cmd_demo.c - hbm demo: a transformer training step on a simulated 80 GiB GPU that runs
 * out of memory under JAX's defaults; the OOM report names the setting; the step is run
 * again with that setting. The story is the library's (hbm_demo_write, src/api/demo.c);
 * this file parses, checks the input and finds the examples folder. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* examples/ next to the source tree or the installed share/hbm/examples; NULL if none. */
static const char *examples_dir(char *buf, size_t cap) {
    const char *env = getenv("HBM_EXAMPLES");
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    const char *candidates[4][2] = {{env, ""}, {".", "/examples"}, {exe, "/../examples"}, {exe, "/../share/hbm/examples"}};
    for (int i = 0; i < 4; i++) {
        if (!candidates[i][0] || !*candidates[i][0]) continue;
        int len = snprintf(buf, cap, "%s%s", candidates[i][0], candidates[i][1]);
        char probe[PATH_MAX + 32];
        if (len < 0 || (size_t)len >= cap || snprintf(probe, sizeof probe, "%s/svd_oom.hlo", buf) >= (int)sizeof probe)
            continue; /* a path too long to hold */
        if (access(probe, R_OK) == 0) return buf;
    }
    return NULL;
}

int cmd_demo(int argc, char **argv) {
    const char *device = "sim:80GiB";
    const cli_opt opts[] = {
        {.name = "--device", .kind = CLI_STR, .dest = &device, .arg = "D",
         .help = "the simulated device: sim:SIZE or a name from 'hbm devices'\n"
                 "(default sim:80GiB, an H100-sized GPU)"},
    };
    const cli_command cmd = {
        .name = "demo",
        .about = "Runs one training step of a 2.9B-parameter transformer (f32 weights, Adam, bf16\n"
                 "activations) against hbm's BFC allocator on a simulated GPU, first with JAX's\n"
                 "defaults (preallocate 75% of the device), which runs out of memory, then with the\n"
                 "setting the OOM report suggests. Then it plans examples/svd_oom.hlo, the seed bug\n"
                 "(an SVD whose U is declared 300000x300000), and its fix, as `hbm plan` would:\n"
                 "what XLA will allocate and whether it fits a 16 GB V100. Nothing touches a GPU.\n"
                 "\n"
                 "The allocator is configured from the environment like any program using libhbm\n"
                 "(XLA_PYTHON_CLIENT_MEM_FRACTION, HBM_TRACE, ...; see 'hbm config --help').",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = "Exit status: 0 the step completed (at first or with the advice), 1 no setting\n"
                 "makes it fit the device, 2 bad usage or a bad variable (found before any work).",
        .examples = "Example:\n"
                    "  hbm demo --device a100-40gb",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    char spec[128];
    if ((rc = cli_device_arg("demo", device, spec, sizeof spec))) return rc;
    /* the environment configures the allocator, as for any program using libhbm: a bad
     * value is bad input, found before any work */
    hbm_config env_cfg;
    if (hbm_config_from_env(&env_cfg)) {
        fprintf(stderr, "hbm demo: %s\n", hbm_last_error());
        return 2;
    }
    char dir[PATH_MAX];
    hbm_demo_options o;
    hbm_demo_options_default(&o);
    o.device = device;
    o.examples = examples_dir(dir, sizeof dir);
    int completed = 0;
    hbm_status s = hbm_demo_write(&o, stdout, &completed);
    /* a write error on stdout: said by hbm.c's check at the end */
    if (s && !(s == HBM_ERR_IO && ferror(stdout))) return cli_fail("demo", s);
    return completed ? 0 : 1;
}
