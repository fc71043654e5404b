/* hbm.c - the command-line tool: dispatch only; every subcommand lives in cmd_*.c and
 * all logic in libhbm. */
#include <stdarg.h>
#include <string.h>

#include "cli.h"

int cli_fail(const char *cmd, hbm_status s) {
    const char *e = hbm_last_error();
    fprintf(stderr, "hbm %s: %s%s%s\n", cmd, hbm_status_str(s), *e ? ": " : "", e);
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "hbm %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'hbm %s --help'.\n", cmd);
    return 2;
}

int cli_is(const char *arg, const char *a, const char *b) { return !strcmp(arg, a) || (b && !strcmp(arg, b)); }

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
#define HBM_CMD_ENTRY_(name, help) {#name, cmd_##name, help},
    HBM_COMMANDS(HBM_CMD_ENTRY_)
#undef HBM_CMD_ENTRY_
};

static void usage(FILE *f) {
    fprintf(f,
            "hbm %s - accelerator memory: allocators, plans, traces\n"
            "\n"
            "Usage: hbm COMMAND [ARGS...]     (hbm COMMAND --help for each)\n"
            "\n"
            "Commands:\n",
            hbm_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f,
            "\n"
            "Options:\n"
            "  -h, --help     this text\n"
            "  --version      the version of hbm\n"
            "\n"
            "Allocator settings come from the variables JAX and TensorFlow read\n"
            "(XLA_PYTHON_CLIENT_PREALLOCATE, XLA_PYTHON_CLIENT_MEM_FRACTION, ...) and hbm's own HBM_*;\n"
            "'hbm config --help' lists them all.\n"
            "\n"
            "Example:\n"
            "  hbm demo                                    # see an OOM report and its fix\n"
            "  XLA_PYTHON_CLIENT_MEM_FRACTION=.9 hbm config\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (cli_is(argv[1], "-h", "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (cli_is(argv[1], "--version", "-V")) {
        printf("hbm %s\n", hbm_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "hbm: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
