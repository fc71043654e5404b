/* cmd_config.c - hbm config: the resolved allocator configuration and its sources. */
#include <string.h>

#include "cli.h"

static void config_help(FILE *f) {
    fprintf(f,
            "Usage: hbm config [--json] [--config 'key=value,...']\n"
            "\n"
            "Print the allocator configuration hbm resolves from the environment (or from the\n"
            "given config string) and where each value came from. A bad value is an error\n"
            "naming the variable, the value and what is accepted.\n"
            "\n"
            "Precedence: config string > HBM_* variable > JAX/TF variable > default.\n"
            "\n"
            "Options:\n");
    hbm_config_write_doc(f);
    fprintf(f,
            "\n"
            "Example:\n"
            "  XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=.5 hbm config\n");
}

int cmd_config(int argc, char **argv) {
    int json = 0;
    const char *text = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "-h", "--help")) {
            config_help(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            text = argv[++i];
        } else {
            return cli_usage_error("config", "unknown argument '%s'", argv[i]);
        }
    }
    hbm_config c;
    hbm_status s = hbm_config_resolve(text, &c);
    if (s) return cli_fail("config", s);
    hbm_config_write(&c, stdout, json);
    return 0;
}
