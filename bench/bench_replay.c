/* bench_replay.c - replay speed: events per second per allocator configuration on a
 * synthetic trace (random sizes, random lifetimes in a window), median of 5 runs, in CPU
 * time (user + sys) of the whole hbm_replay call (the pairing, the replay, the first OOM's
 * report and its checked advice); then bfc and torch on a device a quarter of the peak in
 * use, where most allocations fail (the first OOM reported, the others counted: they must
 * cost what a fit costs), alone and as `hbm replay --allocators bfc,torch` runs them
 * (hbm_replay_run_write: the pairing and the bound once, per configuration).
 * Baseline: the pairing pass alone (address map put/delete per event), which
 * hbm_replay_many does once per trace for all configurations. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/internal.h"
#include "hbm/hbm.h"

#define NEVENTS 2000000
#define WINDOW 4096
#define RUNS 5

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_s(void) { /* user + sys of this process */
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static hbm_trace *make_trace(void) {
    hbm_trace *t;
    if (hbm_trace_new(&t)) return NULL;
    uint64_t rng = 0x9e3779b97f4a7c15ULL, live[WINDOW] = {0}, next = 0x10000;
    for (uint64_t i = 0; t->count < NEVENTS; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        size_t k = rng % WINDOW;
        hbm_trace_event e = {.time_ns = i};
        if (live[k]) {
            e.kind = HBM_EV_FREE;
            e.addr = live[k];
            live[k] = 0;
        } else {
            e.kind = HBM_EV_ALLOC;
            e.size = e.requested = 256 + (rng >> 20) % (1 << 20);
            e.addr = live[k] = next;
            next += e.size;
        }
        if (hbm_trace_add(t, &e)) return NULL;
    }
    return t;
}

static double baseline(const hbm_trace *t) {
    double t0 = cpu_s();
    hbmi_map m;
    hbmi_map_init(&m);
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind == HBM_EV_ALLOC) hbmi_map_put(&m, e->addr, i);
        else hbmi_map_del(&m, e->addr, NULL);
    }
    hbmi_map_destroy(&m);
    return (double)t->count / (cpu_s() - t0);
}

int main(void) {
    hbm_trace *t = make_trace();
    if (!t) return 1;
    static const char *configs[] = {"allocator=platform", "allocator=bfc", "allocator=bfc,preallocate=false",
                                    "allocator=torch", "allocator=torch,expandable_segments=true",
                                    "allocator=bfc", "allocator=torch"};
    const size_t nfit = 5; /* the last two on a quarter of the peak */
    char quarter[64] = "sim:80GiB";
    uint64_t peak = 0;
    double base[RUNS];
    for (int r = 0; r < RUNS; r++) base[r] = baseline(t);
    qsort(base, RUNS, sizeof base[0], cmpd);
    printf("bench_replay: %zu events (window %d live, sizes 256 B-1 MiB) on sim:80GiB, median of %d runs, CPU time\n",
           t->count, WINDOW, RUNS);
    printf("  %-36s %8.2f M events/s\n", "baseline (alloc/free pairing only)", base[RUNS / 2] / 1e6);
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        double v[RUNS];
        hbm_replay_result res;
        int ok = 1;
        uint64_t ooms = 0;
        if (c == nfit) {
            snprintf(quarter, sizeof quarter, "sim:%" PRIu64 "MiB", (peak / 4 >> 20) + 1);
            printf("  on %s, a quarter of the peak in use:\n", quarter);
        }
        for (int r = 0; r < RUNS && ok; r++) {
            double c0 = cpu_s();
            hbm_status s = hbm_replay(t, c < nfit ? "sim:80GiB" : quarter, configs[c], &res);
            double c1 = cpu_s();
            if (s) {
                printf("  %-36s skipped: %s\n", configs[c], res.error);
                ok = 0;
            } else {
                v[r] = (double)res.events / (c1 - c0);
                if (res.peak_in_use > peak) peak = res.peak_in_use;
                ooms = res.ooms;
            }
            hbm_replay_result_release(&res);
        }
        if (!ok) continue;
        qsort(v, RUNS, sizeof v[0], cmpd);
        printf("  %-36s %8.2f M events/s (target >= 10)  %.2fx the baseline's time", configs[c], v[RUNS / 2] / 1e6,
               base[RUNS / 2] / v[RUNS / 2]);
        if (ooms) printf("; %" PRIu64 " OOMs", ooms);
        printf("\n");
    }
    /* as the CLI runs them: both on the quarter, the pairing and the bound shared */
    FILE *null = fopen("/dev/null", "w");
    static const char *both[] = {"allocator=bfc", "allocator=torch"};
    double v[RUNS];
    for (int r = 0; null && r < RUNS; r++) {
        double c0 = cpu_s();
        if (hbm_replay_run_write(t, quarter, both, 2, null, 0, NULL)) {
            printf("  hbm replay --allocators bfc,torch: %s\n", hbm_last_error());
            fclose(null);
            null = NULL;
            break;
        }
        v[r] = 2.0 * (double)t->count / (cpu_s() - c0);
    }
    if (null) {
        fclose(null);
        qsort(v, RUNS, sizeof v[0], cmpd);
        printf("  %-36s %8.2f M events/s per configuration (target >= 10)  %.2fx the baseline's time\n",
               "hbm replay --allocators bfc,torch", v[RUNS / 2] / 1e6, base[RUNS / 2] / v[RUNS / 2]);
    }
    hbm_trace_free(t);
    return 0;
}
