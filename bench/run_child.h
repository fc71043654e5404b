/* bench/run_child.h - run a program as a child process, as the benchmarks that time the hbm
 * tool do (bench_snapshot, bench_fleet): wall time, CPU time and peak resident memory. */
#ifndef HBM_BENCH_RUN_CHILD_H
#define HBM_BENCH_RUN_CHILD_H

#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"

typedef struct run_result {
    double seconds, cpu; /* wall; user + system of the child */
    long maxrss_kb;
    int status; /* its exit status, 128 + the signal that ended it, -1 when it did not run */
} run_result;

/* Run argv with stdout to out (NULL: /dev/null) and stderr to log (NULL: this process's). */
static inline run_result run_child(char *const *argv, const char *out, const char *log) {
    run_result r = {0};
    fflush(stdout);
    uint64_t t0 = hbmi_now_ns();
    pid_t pid = fork();
    if (pid == 0) { /* its output is not the point */
        if (!freopen(out ? out : "/dev/null", "w", stdout) || (log && !freopen(log, "w", stderr))) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) < 0) {
        r.status = -1;
        return r;
    }
    r.seconds = (double)(hbmi_now_ns() - t0) / 1e9;
    r.maxrss_kb = ru.ru_maxrss;
    r.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
            (double)ru.ru_stime.tv_usec / 1e6;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

#endif
