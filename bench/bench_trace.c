/* bench_trace.c - cost of recording: the same alloc/free workload on the platform
 * allocator over a sim device, without and with the tracking adaptor (trace=PATH), and
 * with backtraces. Prints ns per call (median of 7 runs) and the overhead per event. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <inttypes.h>

#include "core/internal.h"
#include "hbm/hbm.h"

#define LIVE 1024
#define ROUNDS 200

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ns per call (alloc or free) for one configuration */
static double run(const char *config) {
    hbm_device *d;
    hbm_allocator *a;
    if (hbm_device_open("sim:80GiB", &d) || hbm_allocator_open(d, config, &a)) {
        fprintf(stderr, "bench_trace: %s: %s\n", config, hbm_last_error());
        exit(1);
    }
    static uint64_t addr[LIVE];
    hbm_tag tg = {.op_name = "matmul", .shape = "f32[1024,1024]"};
    uint64_t calls = 0, t0 = hbmi_now_ns();
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < LIVE; i++) hbm_alloc(a, 4096 + (uint64_t)i * 64, (i & 7) ? NULL : &tg, &addr[i]);
        for (int i = 0; i < LIVE; i++) hbm_free(a, addr[i]);
        calls += 2 * LIVE;
    }
    double ns = (double)(hbmi_now_ns() - t0) / (double)calls;
    hbm_allocator_close(a);
    hbm_device_close(d);
    return ns;
}

#define NCFG 4
#define RUNS 7

static uint64_t events_per_run(const char *path) {
    hbm_trace *t;
    if (hbm_trace_read(path, &t)) return 0;
    uint64_t n = t->count;
    hbm_trace_free(t);
    return n;
}

int main(void) {
    char path[64], cfg[NCFG][200];
    snprintf(path, sizeof path, "/tmp/bench_trace_%d.hbmt", (int)getpid());
    snprintf(cfg[0], sizeof cfg[0], "allocator=platform");
    snprintf(cfg[1], sizeof cfg[1], "allocator=platform,trace=/dev/null");
    snprintf(cfg[2], sizeof cfg[2], "allocator=platform,trace=%s", path);
    snprintf(cfg[3], sizeof cfg[3], "allocator=platform,trace=%s,trace_backtrace=true", path);
    static const char *label[NCFG] = {"platform (no trace)", "+ trace to /dev/null (no I/O)", "+ trace to a file",
                                      "+ trace to a file + backtraces"};
    /* interleaved runs, so a noisy neighbour hits every configuration alike */
    double v[NCFG][RUNS];
    for (int r = 0; r < RUNS; r++)
        for (int c = 0; c < NCFG; c++) v[c][r] = run(cfg[c]);
    run(cfg[2]);
    uint64_t events = events_per_run(path);
    unlink(path);
    uint64_t calls = 2ull * LIVE * ROUNDS;
    double per_call_events = (double)events / (double)calls; /* alloc/free + segment events */
    printf("bench_trace: %" PRIu64 " alloc+free calls per run recording %" PRIu64
           " events (%.2f per call, segment events included); median of %d interleaved runs\n",
           calls, events, per_call_events, RUNS);
    double med[NCFG];
    for (int c = 0; c < NCFG; c++) {
        qsort(v[c], RUNS, sizeof v[c][0], cmpd);
        med[c] = v[c][RUNS / 2];
    }
    printf("  %-34s %8.1f ns/call\n", label[0], med[0]);
    for (int c = 1; c < NCFG; c++)
        printf("  %-34s %8.1f ns/call  overhead %6.1f ns/call = %6.1f ns/event%s  ratio %.2fx\n", label[c], med[c],
               med[c] - med[0], (med[c] - med[0]) / per_call_events, c < 3 ? " (target <= 30)" : "               ",
               med[c] / med[0]);
    return 0;
}
