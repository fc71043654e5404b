/* cmd_config.c - hbm config: the resolved allocator configuration and its sources. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static void settings_help(FILE *f) {
    fprintf(f, "Settings (config string keys; the variables that set them):\n");
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) {
        hbm_config_write_doc(f);
        return;
    }
    hbm_config_write_doc(m);
    fclose(m);
    cli_write_wrapped(f, text, len, CLI_WIDTH); /* the library's lines are as long as they need */
    free(text);
}

int cmd_config(int argc, char **argv) {
    int json = 0;
    const char *text = NULL;
    const cli_opt opts[] = {
        {.name = "--json", .kind = CLI_FLAG, .dest = &json, .help = "the configuration as JSON (notes go to stderr)"},
        {.name = "--config", .kind = CLI_STR, .dest = &text, .arg = "'key=value,...'",
         .help = "resolve this config string (on the defaults) instead of the environment"},
    };
    const cli_command cmd = {
        .name = "config",
        .about = "Print the allocator configuration hbm resolves from the environment (or from the\n"
                 "given config string) and where each value came from. A bad value is an error\n"
                 "naming the variable, the value and what is accepted.\n"
                 "\n"
                 "Precedence: config string > HBM_* variable > JAX/TF variable > default. The JAX and\n"
                 "TF variables follow those frameworks' own rules (JAX: preallocation stays on unless\n"
                 "XLA_PYTHON_CLIENT_PREALLOCATE is 0, false or False; TF_GPU_ALLOCATOR values other\n"
                 "than cuda_malloc_async, cuda_malloc, memory_guard mean BFC); a note says where a\n"
                 "value means something other than it seems. HBM_TRACE, HBM_TRACE_BACKTRACE and\n"
                 "HBM_REPORT_TOP apply under a program's config string too.",
        .opts = opts,
        .nopts = CLI_N(opts),
        .more_help = settings_help,
        .exits = "Exit status: 0 printed, 2 bad usage or a bad value.",
        .examples = "Example:\n"
                    "  XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=.5 hbm config",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    hbm_config c;
    hbm_status s = hbm_config_resolve(text, &c);
    /* PYTORCH_CUDA_ALLOC_CONF as PyTorch reads it: a bad one is an error here whatever the
     * allocator (the library lets a JAX program run beside it) */
    const char *pt = text ? NULL : getenv("PYTORCH_CUDA_ALLOC_CONF");
    hbm_config scratch;
    hbm_config_default(&scratch);
    if (!s && pt && *pt) s = hbm_config_apply_torch(&scratch, pt, "PYTORCH_CUDA_ALLOC_CONF");
    if (s) { /* a bad value is bad input: exit 2 */
        cli_fail("config", s);
        return 2;
    }
    hbm_config_write(&c, stdout, json);
    /* notes on the JAX/TF variables: with the table, or beside the JSON on stderr */
    if (!text) hbm_config_write_notes(json ? stderr : stdout, NULL, NULL);
    return 0;
}
