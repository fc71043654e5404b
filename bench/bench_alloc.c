/* bench_alloc.c - the bfc allocator on a random workload, against sebbbi/OffsetAllocator,
 * an exact best-fit reference and (on request) glibc malloc, on the same size sequence in
 * the same process.
 *
 * Workload: keep N live buffers; each step frees a random one and allocates a new one.
 *   case 1: N = 1,000    sizes log-uniform in [256 B, 1 MiB]
 *   case 2: N = 100,000  sizes log-uniform in [256 B, 1 MiB]
 *   case 3: N = 1,000    sizes log-uniform in [256 B, 64 MiB]
 * Printed per case: ns per alloc+free pair of bfc through the public API (hbm_alloc/hbm_free,
 * with the allocator's lock), of bfc's own functions called directly (no lock, no argument
 * checks: the difference is what the API and its lock cost), of OffsetAllocator (built from
 * ../shared/anchors by CMake when it is there and a C++ compiler is; it counts in 256-byte
 * units, bfc's granularity, and its free takes the node index it returned, where hbm_free
 * takes an address), the ratio bfc/OA (of the medians, and the median of the ratios taken
 * inside each rep), and the address high-water marks of bfc (preallocated
 * on sim:4TiB), OA and an exact best-fit allocator with coalescing. Timings are thread CPU
 * time (user + system), medians of REPS interleaved runs.
 *
 *   bench_alloc [steps] [reps] [case] [malloc]   (defaults 1000000, 5, all cases; a 4th
 *                                                 argument "malloc" also times glibc)
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc/alloc_internal.h"
#include "core/internal.h"
#include "hbm/hbm.h"
#if HBM_BENCH_OA
#include "oa_shim.h"
#endif

/* CPU time of this thread: the machine is shared, and time spent descheduled is not the
 * allocator's (it still counts cache misses caused by neighbours). */
static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- workload ------------------------------------------------------------------------ */

typedef struct workload {
    size_t n, steps;
    uint64_t *init;   /* n initial sizes */
    uint64_t *sizes;  /* steps new sizes */
    uint32_t *victim; /* steps indices in [0, n) */
} workload;

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static uint64_t log_uniform(uint64_t *s, double lo, double hi) {
    double u = (double)(rng_next(s) >> 11) / 9007199254740992.0;
    return (uint64_t)exp(log(lo) + u * (log(hi) - log(lo)));
}

static int workload_make(workload *w, size_t n, size_t steps, uint64_t lo, uint64_t hi, uint64_t seed) {
    w->n = n;
    w->steps = steps;
    w->init = malloc(n * sizeof *w->init);
    w->sizes = malloc(steps * sizeof *w->sizes);
    w->victim = malloc(steps * sizeof *w->victim);
    if (!w->init || !w->sizes || !w->victim) return -1;
    for (size_t i = 0; i < n; i++) w->init[i] = log_uniform(&seed, (double)lo, (double)hi);
    for (size_t i = 0; i < steps; i++) {
        w->sizes[i] = log_uniform(&seed, (double)lo, (double)hi);
        w->victim[i] = (uint32_t)(rng_next(&seed) % n);
    }
    return 0;
}

static void workload_free(workload *w) {
    free(w->init);
    free(w->sizes);
    free(w->victim);
}

/* The workload's own array of live pointers (800 KB at N = 100,000) is read at a random
 * place each step; an application holds its pointers where it uses them, so the bench
 * fetches the victim's slot a few steps ahead and times the allocator, not this array.
 * The same for every allocator measured. */
#define BENCH_PREFETCH_AHEAD 8
#define BENCH_PREFETCH(live, w, i)                                                          \
    do {                                                                                    \
        if ((i) + BENCH_PREFETCH_AHEAD < (w)->steps)                                        \
            __builtin_prefetch(&(live)[(w)->victim[(i) + BENCH_PREFETCH_AHEAD]], 1);        \
    } while (0)

/* ---- hbm bfc ---------------------------------------------------------------------------- */

static int first_region(void *user, const hbm_block *b) {
    if (b->kind == HBM_BLOCK_REGION) {
        *(uint64_t *)user = b->addr;
        return 1;
    }
    return 0;
}

/* ns per pair, and the high-water mark (bytes above the region base) in *hw. direct: call
 * the policy's own alloc and free, without hbm_alloc/hbm_free (their checks and the lock). */
static double run_bfc(const workload *w, uint64_t *hw, int direct) {
    hbm_device *dev;
    hbm_allocator *a;
    if (hbm_device_open("sim:4TiB", &dev) ||
        hbm_allocator_open(dev, "allocator=bfc,preallocate=true,fraction=1", &a)) {
        fprintf(stderr, "bench_alloc: %s\n", hbm_last_error());
        exit(1);
    }
    uint64_t base = 0, top = 0;
    hbm_allocator_walk(a, first_region, &base);
    uint64_t *live = malloc(w->n * sizeof *live);
    for (size_t i = 0; i < w->n; i++) {
        if (hbm_alloc(a, w->init[i], NULL, &live[i])) {
            fprintf(stderr, "bench_alloc: %s\n", hbm_last_error());
            exit(1);
        }
        uint64_t end = live[i] + ((w->init[i] + 255) & ~255ull);
        if (end > top) top = end;
    }
    const hbm_allocator_ops *ops = a->ops;
    void *self = a->self;
    uint64_t t0 = cpu_ns();
    for (size_t i = 0; i < w->steps; i++) {
        uint32_t v = w->victim[i];
        BENCH_PREFETCH(live, w, i);
        hbm_status s;
        if (direct) {
            ops->free(self, live[v]);
            s = ops->alloc(self, w->sizes[i], NULL, 0, &live[v]);
        } else {
            hbm_free(a, live[v]);
            s = hbm_alloc(a, w->sizes[i], NULL, &live[v]);
        }
        if (HBMI_UNLIKELY(s)) {
            fprintf(stderr, "bench_alloc: %s\n", hbm_last_error());
            exit(1);
        }
        uint64_t end = live[v] + ((w->sizes[i] + 255) & ~255ull);
        if (end > top) top = end;
    }
    uint64_t t1 = cpu_ns();
    if (hbm_check(a)) {
        fprintf(stderr, "bench_alloc: %s\n", hbm_last_error());
        exit(1);
    }
    free(live);
    hbm_allocator_close(a);
    hbm_device_close(dev);
    *hw = top - base;
    return (double)(t1 - t0) / (double)w->steps;
}

#if HBM_BENCH_OA
/* OffsetAllocator in 256-byte units (its offsets and sizes are 32-bit: 1 TiB of them). */
static uint32_t oa_units(uint64_t bytes) { return (uint32_t)((bytes + 255) >> 8); }

static uint64_t oa_take(void *oa, uint64_t bytes, uint64_t *top) {
    uint64_t h = oa_shim_alloc(oa, oa_units(bytes));
    if (HBMI_UNLIKELY((uint32_t)h == OA_SHIM_NO_SPACE)) {
        fprintf(stderr, "bench_alloc: OffsetAllocator is full\n");
        exit(1);
    }
    uint64_t end = ((uint64_t)(uint32_t)h + oa_units(bytes)) << 8;
    if (end > *top) *top = end;
    return h;
}

static double run_oa(const workload *w, uint64_t *hw) {
    /* nodes: one per live buffer, at most one free one beside each, and the tail */
    void *oa = oa_shim_new(UINT32_MAX, (uint32_t)(2 * w->n + 64));
    uint64_t *live = malloc(w->n * sizeof *live), top = 0;
    if (!oa || !live) {
        fprintf(stderr, "bench_alloc: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < w->n; i++) live[i] = oa_take(oa, w->init[i], &top);
    uint64_t t0 = cpu_ns();
    for (size_t i = 0; i < w->steps; i++) {
        uint32_t v = w->victim[i];
        BENCH_PREFETCH(live, w, i);
        oa_shim_free(oa, live[v]);
        live[v] = oa_take(oa, w->sizes[i], &top);
    }
    uint64_t t1 = cpu_ns();
    free(live);
    oa_shim_delete(oa);
    *hw = top;
    return (double)(t1 - t0) / (double)w->steps;
}
#endif

static double run_malloc(const workload *w) {
    void **live = malloc(w->n * sizeof *live);
    for (size_t i = 0; i < w->n; i++) live[i] = malloc(w->init[i]);
    uint64_t t0 = cpu_ns();
    for (size_t i = 0; i < w->steps; i++) {
        uint32_t v = w->victim[i];
        BENCH_PREFETCH(live, w, i);
        free(live[v]);
        live[v] = malloc(w->sizes[i]);
        if (!live[v]) {
            fprintf(stderr, "bench_alloc: malloc failed\n");
            exit(1);
        }
    }
    uint64_t t1 = cpu_ns();
    for (size_t i = 0; i < w->n; i++) free(live[i]);
    free(live);
    return (double)(t1 - t0) / (double)w->steps;
}

/* ---- exact best fit: free blocks in a treap ordered by (size, addr) ----------------------- */

typedef struct tnode {
    uint64_t size, addr, prio;
    uint32_t l, r;
} tnode;

typedef struct bestfit {
    tnode *t;
    size_t nt, cap;
    uint32_t root, unused;
    hbmi_map by_start, by_end, live; /* free start -> node, free end -> node, live addr -> size */
    uint64_t top, hw, seed;
} bestfit;

#define TNIL 0u /* node 0 is the sentinel */

static int tless(const tnode *a, uint64_t size, uint64_t addr) {
    return a->size < size || (a->size == size && a->addr < addr);
}

/* Split tree n into keys < (size, addr) and >= . */
static void tsplit(bestfit *b, uint32_t n, uint64_t size, uint64_t addr, uint32_t *lo, uint32_t *hi) {
    if (n == TNIL) {
        *lo = *hi = TNIL;
    } else if (tless(&b->t[n], size, addr)) {
        tsplit(b, b->t[n].r, size, addr, &b->t[n].r, hi);
        *lo = n;
    } else {
        tsplit(b, b->t[n].l, size, addr, lo, &b->t[n].l);
        *hi = n;
    }
}

static uint32_t tmerge(bestfit *b, uint32_t x, uint32_t y) {
    if (x == TNIL) return y;
    if (y == TNIL) return x;
    if (b->t[x].prio > b->t[y].prio) {
        b->t[x].r = tmerge(b, b->t[x].r, y);
        return x;
    }
    b->t[y].l = tmerge(b, x, b->t[y].l);
    return y;
}

static void bf_insert(bestfit *b, uint64_t addr, uint64_t size) {
    uint32_t n;
    if (b->unused) {
        n = b->unused;
        b->unused = b->t[n].l;
    } else {
        if (b->nt == b->cap) {
            b->cap = b->cap ? b->cap * 2 : 1024;
            b->t = realloc(b->t, b->cap * sizeof *b->t);
        }
        n = (uint32_t)b->nt++;
    }
    b->t[n] = (tnode){size, addr, rng_next(&b->seed), TNIL, TNIL};
    uint32_t lo, hi;
    tsplit(b, b->root, size, addr, &lo, &hi);
    b->root = tmerge(b, tmerge(b, lo, n), hi);
    hbmi_map_put(&b->by_start, addr, n);
    hbmi_map_put(&b->by_end, addr + size, n);
}

static void bf_remove(bestfit *b, uint32_t n) {
    uint64_t size = b->t[n].size, addr = b->t[n].addr;
    uint32_t lo, mid, hi;
    tsplit(b, b->root, size, addr, &lo, &mid);
    tsplit(b, mid, size, addr + 1, &mid, &hi); /* mid = exactly n */
    b->root = tmerge(b, lo, hi);
    hbmi_map_del(&b->by_start, addr, NULL);
    hbmi_map_del(&b->by_end, addr + size, NULL);
    b->t[n].l = b->unused;
    b->unused = n;
}

static uint64_t bf_alloc(bestfit *b, uint64_t req) {
    uint64_t r = (req + 255) & ~255ull;
    uint32_t best = TNIL;
    for (uint32_t n = b->root; n != TNIL;) { /* smallest (size, addr) with size >= r */
        if (b->t[n].size >= r) {
            best = n;
            n = b->t[n].l;
        } else {
            n = b->t[n].r;
        }
    }
    uint64_t addr;
    if (best != TNIL) {
        addr = b->t[best].addr;
        uint64_t size = b->t[best].size;
        bf_remove(b, best);
        if (size > r) bf_insert(b, addr + r, size - r);
    } else {
        addr = b->top;
        b->top += r;
        if (b->top > b->hw) b->hw = b->top;
    }
    hbmi_map_put(&b->live, addr, r);
    return addr;
}

static void bf_free(bestfit *b, uint64_t addr) {
    uint64_t size = 0, n;
    hbmi_map_del(&b->live, addr, &size);
    if (hbmi_map_get(&b->by_end, addr, &n)) {
        uint64_t pa = b->t[n].addr;
        size += b->t[n].size;
        bf_remove(b, (uint32_t)n);
        addr = pa;
    }
    if (hbmi_map_get(&b->by_start, addr + size, &n)) {
        size += b->t[n].size;
        bf_remove(b, (uint32_t)n);
    }
    if (addr + size == b->top)
        b->top = addr;
    else
        bf_insert(b, addr, size);
}

static uint64_t run_bestfit(const workload *w) {
    bestfit b;
    memset(&b, 0, sizeof b);
    b.nt = 1; /* sentinel */
    b.cap = 1024;
    b.t = calloc(b.cap, sizeof *b.t);
    b.seed = 0x2545F4914F6CDD1Dull;
    uint64_t *live = malloc(w->n * sizeof *live);
    for (size_t i = 0; i < w->n; i++) live[i] = bf_alloc(&b, w->init[i]);
    for (size_t i = 0; i < w->steps; i++) {
        uint32_t v = w->victim[i];
        bf_free(&b, live[v]);
        live[v] = bf_alloc(&b, w->sizes[i]);
    }
    free(live);
    free(b.t);
    hbmi_map_destroy(&b.by_start);
    hbmi_map_destroy(&b.by_end);
    hbmi_map_destroy(&b.live);
    return b.hw;
}

/* ---- driver --------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void bench(const char *label, size_t n, uint64_t lo, uint64_t hi, size_t steps, int reps, int with_malloc) {
    workload w;
    if (workload_make(&w, n, steps, lo, hi, 0x9E3779B97F4A7C15ull ^ n)) {
        fprintf(stderr, "bench_alloc: out of memory\n");
        exit(1);
    }
    double tb[32], td[32], to[32], tm[32];
    uint64_t hw_bfc = 0, hw_oa = 0;
    /* BENCH_ONLY=bfc, direct or oa runs that one alone (for perf stat), the others read 0 */
    const char *only = getenv("BENCH_ONLY");
    int all = !only || !*only;
    for (int r = 0; r < reps; r++) {
        tb[r] = td[r] = to[r] = 0;
        /* each rep starts with the next one: the first run after another's frees finds the
         * heap and the caches in a different state, which once cost bfc through the API up
         * to 50 ns per pair at N = 100,000 when it always ran first */
        for (int k = 0; k < 3; k++) {
            int which = (r + k) % 3;
            if (which == 0 && (all || !strcmp(only, "bfc"))) tb[r] = run_bfc(&w, &hw_bfc, 0);
            if (which == 1 && (all || !strcmp(only, "direct"))) td[r] = run_bfc(&w, &hw_bfc, 1);
#if HBM_BENCH_OA
            if (which == 2 && (all || !strcmp(only, "oa"))) to[r] = run_oa(&w, &hw_oa);
#endif
        }
        if (with_malloc) tm[r] = run_malloc(&w);
    }
    uint64_t hw_ref = run_bestfit(&w);
#if HBM_BENCH_OA
    /* the ratio inside each rep too (its runs are seconds apart, so a drift in the
     * machine's speed between reps cancels), before median() sorts the times */
    double ratio[32];
    for (int r = 0; r < reps; r++) ratio[r] = to[r] > 0 ? tb[r] / to[r] : 0;
    double mr = median(ratio, reps);
#endif
    double mb = median(tb, reps), md = median(td, reps);
    char h1[32], h2[32], h3[32];
    printf("%s\n  bfc %7.1f ns/pair (its own functions without the API and lock: %.1f ns)\n", label, mb, md);
#if HBM_BENCH_OA
    double mo = median(to, reps);
    printf("  OffsetAllocator %7.1f ns/pair   bfc/OA %.2fx (without the API and lock %.2fx)\n", mo, mb / mo, md / mo);
    printf("  bfc/OA taken inside each rep: median %.2fx\n", mr);
    printf("  high-water bfc %s / OA %s = %.4fx; bfc / exact best fit %s = %.4fx\n", hbm_size_human(hw_bfc, h1),
           hbm_size_human(hw_oa, h2), (double)hw_bfc / (double)hw_oa, hbm_size_human(hw_ref, h3),
           (double)hw_bfc / (double)hw_ref);
#else
    (void)to;
    (void)hw_oa;
    (void)h2;
    printf("  (OffsetAllocator not built: no C++ compiler or no ../shared/anchors/OffsetAllocator)\n");
    printf("  high-water bfc %s / exact best fit %s = %.4fx\n", hbm_size_human(hw_bfc, h1),
           hbm_size_human(hw_ref, h3), (double)hw_bfc / (double)hw_ref);
#endif
    if (with_malloc) {
        double mm = median(tm, reps);
        printf("  glibc malloc %7.1f ns/pair (bfc/malloc %.3fx)\n", mm, mb / mm);
    }
    workload_free(&w);
}

/* Latency of one dependent load at a random place in a 16 MiB buffer: what a cache miss
 * costs on this machine (allocator metadata at N = 100,000 is of that order). */
static double miss_ns(void) {
    size_t n = (16u << 20) / 64;
    uint64_t *a = malloc(n * 64), *perm = malloc(n * sizeof *perm), s = 0x853c49e6748fea9bull;
    if (!a || !perm) return 0;
    for (size_t i = 0; i < n; i++) perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rng_next(&s) % (i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++) a[perm[i] * 8] = perm[(i + 1) % n] * 8;
    size_t p = 0, loads = 4000000;
    uint64_t t0 = cpu_ns();
    for (size_t i = 0; i < loads; i++) p = a[p];
    uint64_t t1 = cpu_ns();
    volatile size_t sink = p;
    (void)sink;
    free(a);
    free(perm);
    return (double)(t1 - t0) / (double)loads;
}

int main(int argc, char **argv) {
    size_t steps = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1) reps = 1;
    if (reps > 31) reps = 31;
    printf("bench_alloc: %zu steps (free a random live buffer + allocate one), median of %d runs\n", steps, reps);
    printf("machine: one dependent load at a random place in 16 MiB takes %.1f ns\n", miss_ns());
    int only = argc > 3 ? atoi(argv[3]) : 0; /* 1, 2 or 3: run one case */
    int with_malloc = argc > 4 && !strcmp(argv[4], "malloc");
    if (!only || only == 1) bench("N=1000, 256B..1MiB:", 1000, 256, 1ull << 20, steps, reps, with_malloc);
    if (!only || only == 2) bench("N=100000, 256B..1MiB:", 100000, 256, 1ull << 20, steps, reps, with_malloc);
    if (!only || only == 3) bench("N=1000, 256B..64MiB:", 1000, 256, 64ull << 20, steps, reps, with_malloc);
    return 0;
}
