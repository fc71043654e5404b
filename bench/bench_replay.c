/* bench_replay.c - replay speed: events per second per allocator configuration, median of
 * 5 runs, in CPU time (user + sys) of the whole call (the pairing, the replay, the first
 * OOM's report and its checked advice).
 * 1. A synthetic trace (random sizes, random lifetimes in a window) on sim:80GiB; then bfc
 *    and torch on a device a quarter of the peak in use, where most allocations fail (the
 *    first OOM reported, the others counted: they must cost what a fit costs), alone and
 *    as `hbm replay --allocators bfc,torch` runs them (hbm_replay_run_write: the pairing
 *    and the bound once, per configuration).
 * 2. A real-shaped trace: bench_snapshot's training-loop history with stacks of 40-80
 *    frames, written as Python writes such a snapshot and loaded as a user's is
 *    (free_requested and free_completed entries, segment events, sizes of 512 B to
 *    256 MiB, addresses reused), on the device hbm replay picks for it (the snapshot's peak
 *    reserved) and on a quarter of the peak in use: each configuration alone, `hbm replay
 *    --allocators bfc,torch` after the load (the table with the bound and the PyTorch twin,
 *    per configuration) and --suggest (its candidates, per configuration).
 * Usage: bench_replay [synthetic|real] (default both).
 * Baseline: the pairing pass alone (address map put/delete per event), which
 * hbm_replay_many does once per trace for all configurations. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <unistd.h>

#include "core/internal.h"
#include "hbm/hbm.h"
#include "snapshot_gen.h"

#define NEVENTS 2000000
#define WINDOW 4096
#define RUNS 5

/* about 360,000 entries, a 380 MB pickle: 120,000 buffers, past the 100,000 up to which
 * hbm replay packs them for its bound (as in a big snapshot, where it does not) */
#define REAL_EVENTS 240000

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
    uint64_t x = 0x9e3779b97f4a7c15ULL, live[WINDOW] = {0}, next = 0x10000;
    for (uint64_t i = 0; t->count < NEVENTS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t k = x % WINDOW;
        hbm_trace_event e = {.time_ns = i};
        if (live[k]) {
            e.kind = HBM_EV_FREE;
            e.addr = live[k];
            live[k] = 0;
        } else {
            e.kind = HBM_EV_ALLOC;
            e.size = e.requested = 256 + (x >> 20) % (1 << 20);
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

/* The median of RUNS calls of fn, as events per second of CPU time (events: per run, all
 * configurations counted); 0 when a call fails (its message printed). */
typedef hbm_status (*bench_fn)(const hbm_trace *t, const char *dev, const void *arg, size_t *nconfigs);

static double median_rate(bench_fn fn, const hbm_trace *t, const char *dev, const void *arg, const char *what) {
    double v[RUNS];
    for (int r = 0; r < RUNS; r++) {
        size_t n = 1;
        double c0 = cpu_s();
        if (fn(t, dev, arg, &n)) {
            printf("  %-44s failed: %s\n", what, hbm_last_error());
            return 0;
        }
        v[r] = (double)n * (double)t->count / (cpu_s() - c0);
    }
    qsort(v, RUNS, sizeof v[0], cmpd);
    return v[RUNS / 2];
}

static hbm_status one_config(const hbm_trace *t, const char *dev, const void *arg, size_t *n) {
    hbm_replay_result res;
    hbm_status s = hbm_replay(t, dev, arg, &res);
    hbm_replay_result_release(&res);
    *n = 1;
    return s;
}

static hbm_status cli_both(const hbm_trace *t, const char *dev, const void *arg, size_t *n) {
    static const char *both[] = {"allocator=bfc", "allocator=torch"};
    FILE *null = fopen("/dev/null", "w");
    if (!null) return hbmi_error(HBM_ERR_IO, "/dev/null");
    hbm_status s = hbm_replay_run_write(t, dev, both, 2, null, 0, NULL);
    fclose(null);
    (void)arg;
    *n = 2;
    return s;
}

static hbm_status suggest(const hbm_trace *t, const char *dev, const void *arg, size_t *n) {
    hbm_torch_suggestion sg;
    hbm_status s = hbm_torch_suggest(t, dev, &sg);
    (void)arg;
    *n = sg.n;
    return s;
}

/* Part 2: the real-shaped trace. */
static int real_shaped(void) {
    char path[1100];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/hbm-bench-replay-%d.pickle", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    hbm_trace *g = generate(REAL_EVENTS, 1), *t;
    size_t entries = 0;
    if (write_pickle_real(g, path, &entries)) die("writing the pickle");
    hbm_trace_free(g);
    double c0 = cpu_s();
    hbm_status s = hbm_trace_load(path, &t);
    double load = cpu_s() - c0;
    unlink(path);
    if (s) die("loading the pickle");
    char dev[96], quarter[64];
    hbm_replay_default_device(t, dev, sizeof dev, NULL);
    printf("bench_replay: a real-shaped snapshot of %zu entries (bench_snapshot's history, stacks of 40-80 frames), "
           "loaded in %.2f s of CPU, median of %d runs, CPU time\n", entries, load, RUNS);
    static const char *configs[] = {"allocator=platform", "allocator=bfc", "allocator=torch",
                                    "allocator=torch,expandable_segments=true"};
    uint64_t peak = 0;
    for (int q = 0; q < 2; q++) {
        const char *on = q ? quarter : dev;
        if (q) snprintf(quarter, sizeof quarter, "sim:%" PRIu64 "MiB", (peak / 4 >> 20) + 1);
        printf("  on %s (%s):\n", on, q ? "a quarter of the peak in use" : "hbm replay's default for it");
        for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
            hbm_replay_result res;
            uint64_t ooms = 0;
            if (!hbm_replay(t, on, configs[c], &res)) {
                if (!q && res.peak_in_use > peak && c > 0 && c < 3) peak = res.peak_in_use;
                ooms = res.ooms;
            }
            hbm_replay_result_release(&res);
            double v = median_rate(one_config, t, on, configs[c], configs[c]);
            if (!v) continue;
            printf("  %-44s %8.2f M events/s (target >= 10)", configs[c], v / 1e6);
            if (ooms) printf("; %" PRIu64 " OOMs", ooms);
            printf("\n");
        }
        double v = median_rate(cli_both, t, q ? on : NULL, NULL, "hbm replay --allocators bfc,torch");
        if (v) printf("  %-44s %8.2f M events/s per configuration (target >= 10)\n", "hbm replay --allocators bfc,torch", v / 1e6);
        v = median_rate(suggest, t, q ? on : NULL, NULL, "hbm replay --suggest");
        if (v) printf("  %-44s %8.2f M events/s per configuration (target >= 10)\n", "hbm replay --suggest", v / 1e6);
    }
    hbm_trace_free(t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "real")) return real_shaped();
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
    return argc > 1 && !strcmp(argv[1], "synthetic") ? 0 : real_shaped();
}
