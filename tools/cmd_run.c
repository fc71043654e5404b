/* cmd_run.c - hbm run: start a program with libhbm_preload.so in LD_PRELOAD. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static int find_preload(char *out, size_t n) {
    const char *env = getenv("HBM_PRELOAD_LIB");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, R_OK) == 0;
    }
    char exe[PATH_MAX - 64];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return 0;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return 0;
    *slash = 0;
    static const char *const rel[] = {"", "/../lib", "/../lib64"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(out, n, "%s%s/libhbm_preload.so", exe, rel[i]);
        if (access(out, R_OK) == 0) return 1;
    }
    return 0;
}

/* After the program: the trace written under tmp becomes FILE; when no process used CUDA
 * (nothing recorded, and no summary printed by the interposer) say so. */
static void finish_trace(const char *trace, const char *tmp, int used, int quiet) {
    int have = trace && access(tmp, F_OK) == 0;
    if (have && rename(tmp, trace)) {
        fprintf(stderr, "hbm run: cannot rename the trace %s to %s: %s\n", tmp, trace, strerror(errno));
        unlink(tmp);
    }
    if (used || quiet) return;
    fprintf(stderr, "hbm run: no CUDA allocations seen: is the program using the GPU?%s%s%s\n",
            trace ? " No trace written (" : "", trace ? trace : "",
            trace ? (access(trace, F_OK) == 0 ? " is left as it was)" : " not created)") : "");
}

int cmd_run(int argc, char **argv) {
    const char *trace = NULL;
    uint64_t lim = 0;
    int quiet = 0;
    const cli_opt opts[] = {
        {.name = "--trace", .kind = CLI_STR, .dest = &trace, .arg = "FILE",
         .help = "record every alloc, free, failed alloc and synchronization as an hbm\n"
                 "trace (time, address, size, stream, thread, the API as the tag's\n"
                 "label; the device allocated on, its name, number and total memory,\n"
                 "which hbm replay and view assume), readable by hbm view / replay /\n"
                 "export; written as the program runs (under a temporary name, renamed\n"
                 "to FILE when the program ends: an existing FILE is kept until then,\n"
                 "and when nothing is recorded), so a crash loses at most the last 4096\n"
                 "events. A second process of the run that allocates writes FILE.<pid>"},
        {.name = "--limit", .kind = CLI_SIZE, .dest = &lim, .arg = "SIZE",
         .help = "refuse allocations that would take the program past SIZE bytes in use\n"
                 "(e.g. 20GiB, 24GB = 24 x 10^9); a refused one returns the out-of-memory\n"
                 "error and prints the limit, the --limit that would let it through and\n"
                 "hbm's OOM report with the live allocations"},
        {.name = "--quiet", .kind = CLI_FLAG, .dest = &quiet, .help = "no summary at exit"},
    };
    const cli_command cmd = {
        .name = "run",
        .args = "-- COMMAND [ARGS...]",
        .rest = 1,
        .about = "Runs COMMAND unmodified with hbm's interposer (libhbm_preload.so in LD_PRELOAD), which\n"
                 "sees every device allocation the program makes through the CUDA runtime (cudaMalloc,\n"
                 "cudaFree, cudaMallocAsync, cudaFreeAsync) or driver (cuMemAlloc, cuMemFree,\n"
                 "cuMemAllocAsync, cuMemFreeAsync, cuMemAllocFromPoolAsync, also when found through\n"
                 "dlsym or cuGetProcAddress, as PyTorch and JAX do), and the stream and device\n"
                 "synchronizations that make stream-ordered frees reusable. At exit it prints a\n"
                 "summary: allocations, frees, peak bytes in use (or that no CUDA allocation was seen).\n"
                 "The library is found next to the hbm binary, in ../lib, or at $HBM_PRELOAD_LIB.",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = "Exit status: COMMAND's (128+N if it died of signal N; 127 if it cannot start;\n"
                 "2 for bad usage, or no libhbm_preload.so, before it starts).",
        .examples = "Examples:\n"
                    "  hbm run --trace jax.hbmt -- env XLA_PYTHON_CLIENT_ALLOCATOR=platform python train.py\n"
                    "  hbm view jax.hbmt;  hbm replay jax.hbmt --allocators bfc,cuda_async,vmm\n"
                    "  hbm run --limit 20GiB -- python train.py     # would it fit on a 24 GB card?",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    int i = args.first;
    char abs[PATH_MAX];
    if (trace && trace[0] != '/') { /* the program may change directory before it allocates */
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd) || snprintf(abs, sizeof abs, "%s/%s", cwd, trace) >= (int)sizeof abs) {
            fprintf(stderr, "hbm run: --trace %s: cannot make the path absolute\n", trace);
            return 2;
        }
        trace = abs;
    }
    /* the first process of the run writes the trace under a temporary name, renamed to
     * FILE when the program ends: an existing FILE is kept until then (and when nothing
     * is recorded). Fail now if the temporary cannot be created at all. */
    char tmp[PATH_MAX + 32] = "";
    if (trace) {
        struct stat st;
        if (stat(trace, &st) == 0 && S_ISDIR(st.st_mode))
            return cli_usage_error("run", "--trace %s is a directory", trace);
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", trace, (long)getpid());
        unlink(tmp);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) {
            fprintf(stderr, "hbm run: --trace %s: cannot create it (as %s): %s\n", trace, tmp, strerror(errno));
            return 2;
        }
        close(fd);
        unlink(tmp);
    }
    char lib[PATH_MAX];
    if (!find_preload(lib, sizeof lib)) {
        fprintf(stderr, "hbm run: cannot find libhbm_preload.so next to hbm, in ../lib, or at $HBM_PRELOAD_LIB\n");
        return 2; /* before COMMAND starts */
    }
    const char *old = getenv("LD_PRELOAD");
    size_t need = strlen(lib) + (old ? strlen(old) + 2 : 1);
    char *pre = malloc(need);
    if (!pre) return 1;
    snprintf(pre, need, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "");
    char lims[32];
    snprintf(lims, sizeof lims, "%llu", (unsigned long long)lim);
    /* each process of the run that uses CUDA appends a byte to this file (a path, not an
     * inherited descriptor: Python's subprocess and others close those) */
    const char *td = getenv("TMPDIR");
    char seen[PATH_MAX];
    snprintf(seen, sizeof seen, "%s/hbm-run-XXXXXX", td && *td ? td : "/tmp");
    int sfd = mkstemp(seen);
    if (sfd < 0) {
        fprintf(stderr, "hbm run: cannot create %s: %s\n", seen, strerror(errno));
        free(pre);
        return 2;
    }
    close(sfd);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "hbm run: fork: %s\n", strerror(errno));
        free(pre);
        unlink(seen);
        return 1;
    }
    if (pid == 0) {
        setenv("LD_PRELOAD", pre, 1);
        if (trace) setenv("HBM_RUN_TRACE", trace, 1), setenv("HBM_RUN_TRACE_TMP", tmp, 1);
        else unsetenv("HBM_RUN_TRACE"), unsetenv("HBM_RUN_TRACE_TMP");
        setenv("HBM_RUN_SEEN", seen, 1);
        setenv("HBM_RUN_LIMIT", lims, 1);
        setenv("HBM_RUN_QUIET", quiet ? "1" : "0", 1);
        execvp(argv[i], argv + i);
        fprintf(stderr, "hbm run: cannot run '%s': %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    free(pre);
    /* Ctrl-C goes to the program (same process group); hbm run waits for it to end, then
     * renames the trace, as system(3) does */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            unlink(seen);
            return 1;
        }
    struct stat sst;
    int used = stat(seen, &sst) == 0 && sst.st_size > 0;
    unlink(seen);
    finish_trace(trace, tmp, used, quiet);
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 1;
}
