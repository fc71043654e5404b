/* hbm.c - the command-line tool: dispatch only; every subcommand lives in cmd_*.c and
 * all logic in libhbm. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>

#include "cli.h"

int cli_fail(const char *cmd, hbm_status s) {
    const char *e = hbm_last_error();
    fprintf(stderr, "hbm %s: %s%s%s\n", cmd, hbm_status_str(s), *e ? ": " : "", e);
    /* out of device memory and infeasible are answers (1); anything else is trouble with
     * the input or the output (2) */
    return s == HBM_ERR_OOM || s == HBM_ERR_INFEASIBLE ? 1 : 2;
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

int cli_output_done(const char *cmd, hbm_output *o, hbm_status s) {
    if (s) hbm_output_abort(o);
    else s = hbm_output_commit(o);
    if (!s) return 0;
    const char *e = hbm_last_error();
    if (!strcmp(o->path, "-"))
        fprintf(stderr, "hbm %s: error writing standard output: %s\n", cmd, *e ? e : hbm_status_str(s));
    else
        fprintf(stderr, "hbm %s: cannot write %s (an existing file is left as it was): %s\n", cmd, o->path,
                *e ? e : hbm_status_str(s));
    return 2;
}

int cli_width_arg(const char *cmd, int argc, char **argv, int *i, size_t *width) {
    if (*i + 1 >= argc) return cli_usage_error(cmd, "--width needs a value");
    const char *v = argv[++*i];
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (!isdigit((unsigned char)*v) || *end || errno || (n && n < 40) || n > 100000)
        return cli_usage_error(cmd, "--width '%s': expected columns, 40 or more (0: no limit)", v);
    *width = n;
    return 0;
}

/* the column after the first k bytes of a line (tabs to the next multiple of 8) */
static size_t columns(const char *s, size_t k) {
    size_t c = 0;
    for (size_t i = 0; i < k; i++) c = s[i] == '\t' ? (c / 8 + 1) * 8 : c + 1;
    return c;
}

int cli_write_fitted(FILE *f, const char *text, size_t len, size_t width) {
    size_t at = 0;
    while (at < len) {
        const char *line = text + at, *nl = memchr(line, '\n', len - at);
        size_t n = nl ? (size_t)(nl - line) : len - at;
        at += n + (nl ? 1 : 0);
        if (!width || columns(line, n) <= width) {
            fwrite(line, 1, n, f);
        } else {
            /* keep a third of the room at the start, the rest at the end */
            size_t room = width - 3, head = 0, tail = 0;
            while (head < n && columns(line, head + 1) <= room / 3) head++;
            while (tail < n - head && columns(line, head) + 3 + (tail + 1) <= width) tail++;
            fwrite(line, 1, head, f);
            fputs("...", f);
            fwrite(line + n - tail, 1, tail, f);
        }
        if (nl) fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

int cli_parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int cli_is(const char *arg, const char *a, const char *b) { return !strcmp(arg, a) || (b && !strcmp(arg, b)); }

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
            "Exit status (every command): 0 success (it fits, it completed), 1 a negative verdict\n"
            "(it does not fit, an OOM found), 2 bad usage or input, or output that could not\n"
            "be written (stdout is checked; output files are written whole or not at all).\n"
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
    fprintf(stderr, "hbm: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
