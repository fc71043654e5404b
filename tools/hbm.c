/* hbm.c - the command-line tool: dispatch only; every subcommand lives in cmd_*.c and
 * all logic in libhbm. */
#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>

#include "cli.h"

/* Every command's writes to stdout are checked here, once, at the end: a full disk,
 * a closed pipe or /dev/full is an error with a message, never a silent exit 0. */
static int check_stdout(const char *cmd, int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!bad || rc == 2) return rc; /* a command that exits 2 has said why */
    fprintf(stderr, "hbm %s: error writing standard output: %s\n", cmd, e ? strerror(e) : "write failed");
    return 2;
}

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
            "An option's value follows it (--top 5) or an '=' (--top=5); '--' ends the options.\n"
            "\n"
            "Exit status (every command): 0 success (it fits, it completed), 1 a negative verdict\n"
            "(it does not fit, an OOM found), 2 bad usage or input (found before any work), or output\n"
            "that could not be written (stdout is checked; output files are written whole or not at all).\n"
            "\n"
            "Sizes (--capacity, --limit, sim:SIZE, HBM_LIMIT): a byte count, or IEC units, powers\n"
            "of 1024 (KiB, MiB, GiB, TiB; a bare K, M, G, T too), or SI units, powers of 1000 (KB,\n"
            "MB, GB, TB: 40GB is 40000000000 bytes, 37.25 GiB). Sizes are printed in IEC units.\n"
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
#ifdef M_MMAP_THRESHOLD
    /* Arrays of a megabyte or more in their own mappings: growing one (a gigabyte snapshot's
     * events) moves no bytes (mremap), where glibc's adaptive threshold would copy them. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (cli_is(argv[1], "-h", "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return check_stdout("help", 0);
    }
    if (cli_is(argv[1], "--version", "-V")) {
        printf("hbm %s\n", hbm_version());
        return check_stdout("--version", 0);
    }
    /* past `ulimit -f` a write fails with EFBIG instead of killing the process, so that a
     * partial output file is removed and an existing one kept */
    signal(SIGXFSZ, SIG_IGN);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return check_stdout(commands[i].name, commands[i].fn(argc - 1, argv + 1));
    /* one line and where to look, not the whole help (its copy on stderr hid the typo) */
    fprintf(stderr, "hbm: unknown command '%s' (the commands: 'hbm --help')\n", argv[1]);
    return 2;
}
