/* bfc_floor.c - a prototype, not built by default: what bfc would cost per alloc+free pair
 * without its address index, against bfc as it is and OffsetAllocator, in one process
 * (issue 17, part 1; the figures are in docs/allocators.md, "What the address costs").
 *
 * bench_alloc times bfc through the public API (hbm_free takes an address, so bfc keeps an
 * address -> record index) and OffsetAllocator (its free takes the node index its
 * allocation returned). This program compiles bfc.c into itself and times, on bench_alloc's
 * workload (N live buffers, each step frees a random one and allocates one, sizes
 * log-uniform 256 B - 1 MiB, the victim's slot prefetched 8 steps ahead):
 *   bfc       bfc's own alloc and free (as bench_alloc's "own functions": no API, no lock);
 *   by-record the same allocator with the index taken out: the allocation hands back its
 *             record number and the free takes it, as OffsetAllocator's do (bfc_take and
 *             bfc_give, everything else identical: best fit, coalescing, statistics);
 *   OA        OffsetAllocator through bench/oa_shim.cpp.
 * Thread CPU time, medians of REPS reps; each rep runs the three in a rotated order.
 *
 * Build (from the repository root, after `make build`; needs ../shared/anchors):
 *   g++ -O2 -falign-functions=64 -c bench/oa_shim.cpp -I../shared/anchors/OffsetAllocator -o /tmp/oa_shim.o
 *   g++ -O2 -falign-functions=64 -c ../shared/anchors/OffsetAllocator/offsetAllocator.cpp -o /tmp/oa.o
 *   gcc -std=c11 -O2 -Iinclude -Isrc -Ibench bench/proto/bfc_floor.c /tmp/oa_shim.o /tmp/oa.o \
 *       build/libhbm.a -lstdc++ -lm -lpthread -ldl -o /tmp/bfc_floor
 * Usage: bfc_floor [steps] [reps] (defaults 1000000 and 5). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "alloc/bfc.c"
#include "oa_shim.h"

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static uint64_t log_size(uint64_t *s) {
    double u = (double)(rng(s) >> 11) / 9007199254740992.0;
    return (uint64_t)exp(log(256.0) + u * (log(1048576.0) - log(256.0)));
}

typedef struct work {
    size_t n, steps;
    uint64_t *init, *sizes;
    uint32_t *victim;
} work;

static void make_work(work *w, size_t n, size_t steps) {
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ n;
    w->n = n;
    w->steps = steps;
    w->init = malloc(n * sizeof *w->init);
    w->sizes = malloc(steps * sizeof *w->sizes);
    w->victim = malloc(steps * sizeof *w->victim);
    if (!w->init || !w->sizes || !w->victim) exit(1);
    for (size_t i = 0; i < n; i++) w->init[i] = log_size(&seed);
    for (size_t i = 0; i < steps; i++) {
        w->sizes[i] = log_size(&seed);
        w->victim[i] = (uint32_t)(rng(&seed) % n);
    }
}

#define AHEAD(live, w, i)                                                                     \
    do {                                                                                      \
        if ((i) + 8 < (w)->steps) __builtin_prefetch(&(live)[(w)->victim[(i) + 8]], 1);       \
    } while (0)

static void die(const char *what) {
    fprintf(stderr, "bfc_floor: %s: %s\n", what, hbm_last_error());
    exit(1);
}

static bfc *open_bfc(hbm_device **dev) {
    hbm_config cfg;
    const hbm_allocator_ops *ops;
    void *self;
    if (hbm_device_open("sim:4TiB", dev) || hbm_config_resolve("allocator=bfc,preallocate=true,fraction=1", &cfg) ||
        hbmi_bfc_create(*dev, &cfg, 4ull << 40, &ops, &self))
        die("open");
    return self;
}

static void close_bfc(bfc *b, hbm_device *dev) {
    if (bfc_check(b)) die("check");
    bfc_destroy(b);
    hbm_device_close(dev);
}

/* Out of line, as the policy's functions are called through the ops table. */
static __attribute__((noinline)) hbm_status core_alloc(bfc *b, uint64_t size, uint32_t *rec) {
    return bfc_take(b, size, 0, rec);
}
static __attribute__((noinline)) void core_free(bfc *b, uint32_t rec) { bfc_give(b, rec); }

static double run_full(const work *w) {
    hbm_device *dev;
    bfc *b = open_bfc(&dev);
    hbm_status (*volatile alloc)(void *, uint64_t, const hbm_tag *, uint32_t, uint64_t *) = bfc_alloc;
    hbm_status (*volatile release)(void *, uint64_t) = bfc_free;
    uint64_t *live = malloc(w->n * sizeof *live);
    for (size_t i = 0; i < w->n; i++)
        if (alloc(b, w->init[i], NULL, 0, &live[i])) die("alloc");
    uint64_t t0 = cpu_ns();
    for (size_t i = 0; i < w->steps; i++) {
        uint32_t v = w->victim[i];
        AHEAD(live, w, i);
        release(b, live[v]);
        if (HBMI_UNLIKELY(alloc(b, w->sizes[i], NULL, 0, &live[v]))) die("alloc");
    }
    uint64_t t1 = cpu_ns();
    free(live);
    close_bfc(b, dev);
    return (double)(t1 - t0) / (double)w->steps;
}

/* The index is bypassed, so hbm_check's view of it is restored before the check. */
static double run_core(const work *w) {
    hbm_device *dev;
    bfc *b = open_bfc(&dev);
    uint32_t *live = malloc(w->n * sizeof *live);
    for (size_t i = 0; i < w->n; i++)
        if (core_alloc(b, w->init[i], &live[i])) die("alloc");
    uint64_t t0 = cpu_ns();
    for (size_t i = 0; i < w->steps; i++) {
        uint32_t v = w->victim[i];
        AHEAD(live, w, i);
        core_free(b, live[v]);
        if (HBMI_UNLIKELY(core_alloc(b, w->sizes[i], &live[v]))) die("alloc");
    }
    uint64_t t1 = cpu_ns();
    if (tab_reserve(b, w->n)) die("index");
    for (size_t i = 0; i < w->n; i++) tab_put(b, ch_addr(&b->ch[live[i]]), live[i]);
    free(live);
    close_bfc(b, dev);
    return (double)(t1 - t0) / (double)w->steps;
}

static double run_oa(const work *w) {
    void *oa = oa_shim_new(UINT32_MAX, (uint32_t)(2 * w->n + 64));
    uint64_t *live = malloc(w->n * sizeof *live);
    if (!oa || !live) exit(1);
    for (size_t i = 0; i < w->n; i++) live[i] = oa_shim_alloc(oa, (uint32_t)((w->init[i] + 255) >> 8));
    uint64_t t0 = cpu_ns();
    for (size_t i = 0; i < w->steps; i++) {
        uint32_t v = w->victim[i];
        AHEAD(live, w, i);
        oa_shim_free(oa, live[v]);
        live[v] = oa_shim_alloc(oa, (uint32_t)((w->sizes[i] + 255) >> 8));
        if (HBMI_UNLIKELY((uint32_t)live[v] == OA_SHIM_NO_SPACE)) exit(1);
    }
    uint64_t t1 = cpu_ns();
    free(live);
    oa_shim_delete(oa);
    return (double)(t1 - t0) / (double)w->steps;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double med(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    size_t steps = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1 || reps > 32) reps = 5;
    static const size_t ns[] = {1000, 100000};
    for (int c = 0; c < 2; c++) {
        work w;
        make_work(&w, ns[c], steps);
        double t[3][32], rf[32], rc[32];
        for (int r = 0; r < reps; r++) {
            for (int k = 0; k < 3; k++) {
                int which = (r + k) % 3;
                t[which][r] = which == 0 ? run_full(&w) : which == 1 ? run_core(&w) : run_oa(&w);
            }
            rf[r] = t[0][r] / t[2][r];
            rc[r] = t[1][r] / t[2][r];
        }
        double f = med(t[0], reps), k = med(t[1], reps), o = med(t[2], reps);
        printf("N=%zu: bfc %.1f ns/pair, by record %.1f, OA %.1f; bfc/OA %.2fx, by record/OA %.2fx "
               "(medians of the per-rep ratios %.2fx, %.2fx)\n",
               ns[c], f, k, o, f / o, k / o, med(rf, reps), med(rc, reps));
        free(w.init);
        free(w.sizes);
        free(w.victim);
    }
    return 0;
}
