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
            "Exit status: 0 printed, 2 bad usage or a bad value.\n"
            "\n"
            "Precedence: config string > HBM_* variable > JAX/TF variable > default. The JAX and\n"
            "TF variables follow those frameworks' own rules (JAX: preallocation stays on unless\n"
            "XLA_PYTHON_CLIENT_PREALLOCATE is 0, false or False; TF_GPU_ALLOCATOR values other\n"
            "than cuda_malloc_async, cuda_malloc, memory_guard mean BFC); a note says where a\n"
            "value means something other than it seems. HBM_TRACE, HBM_TRACE_BACKTRACE and\n"
            "HBM_REPORT_TOP apply under a program's config string too.\n"
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
    if (s) { /* a bad value is bad input: exit 2 */
        cli_fail("config", s);
        return 2;
    }
    hbm_config_write(&c, stdout, json);
    /* notes on the JAX/TF variables: with the table, or beside the JSON on stderr */
    if (!text) hbm_config_write_notes(json ? stderr : stdout, NULL, NULL);
    return 0;
}
