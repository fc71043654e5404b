/* test_alloc_threads.c - several threads allocate and free on one allocator over real host
 * memory. Each block is filled with a pattern unique to its thread and sequence number at
 * allocation and verified at free, so two threads handed overlapping blocks are caught.
 * Runs under TSan in the thread pass (make test-tsan). */
#include <pthread.h>

#include "test.h"

#define NTHREADS 6
#define OPS_PER_THREAD 15000
#define MAX_LIVE 200

typedef struct worker {
    hbm_allocator *a;
    int id;
    int failures;
    uint64_t allocs, ooms;
} worker;

static uint8_t pattern(int id, uint64_t seq) { return (uint8_t)(id * 37 + seq * 11 + 1); }

static void *work(void *arg) {
    worker *w = arg;
    test_rng r = {0x1000u + (uint64_t)w->id * 7919u};
    struct {
        uint64_t addr, size, seq;
    } live[MAX_LIVE];
    int n = 0;
    uint64_t seq = 0;
    hbm_tag tag = {.op_name = "worker", .source_line = w->id};
    for (int op = 0; op < OPS_PER_THREAD; op++) {
        if (n == MAX_LIVE || (n && test_below(&r, 2))) {
            int k = (int)test_below(&r, (uint64_t)n);
            const uint8_t *p = (const uint8_t *)(uintptr_t)live[k].addr;
            uint8_t want = pattern(w->id, live[k].seq);
            for (uint64_t i = 0; i < live[k].size; i++)
                if (p[i] != want) {
                    w->failures++;
                    break;
                }
            if (hbm_free(w->a, live[k].addr) != HBM_OK) w->failures++;
            live[k] = live[--n];
        } else {
            uint64_t size = 1 + test_below(&r, 1ull << (4 + test_below(&r, 13))); /* up to 64 KiB */
            uint64_t addr;
            hbm_status s = hbm_alloc(w->a, size, test_below(&r, 4) ? &tag : NULL, &addr);
            if (s == HBM_ERR_OOM) {
                w->ooms++;
                continue;
            }
            if (s != HBM_OK) {
                w->failures++;
                continue;
            }
            seq++;
            memset((void *)(uintptr_t)addr, pattern(w->id, seq), size);
            live[n].addr = addr;
            live[n].size = size;
            live[n].seq = seq;
            n++;
            w->allocs++;
        }
        if (op % 5000 == 0 && hbm_check(w->a) != HBM_OK) w->failures++;
    }
    for (int k = 0; k < n; k++)
        if (hbm_free(w->a, live[k].addr) != HBM_OK) w->failures++;
    return NULL;
}

static void stress(const char *config) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("host:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, config, &a));
    pthread_t t[NTHREADS];
    worker w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){a, i, 0, 0, 0};
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    uint64_t allocs = 0;
    int failures = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        allocs += w[i].allocs;
        failures += w[i].failures;
    }
    CHECK(failures == 0);
    hbm_stats s;
    CHECK_OK(hbm_stats_get(a, &s));
    CHECK_EQ_U64(s.num_allocs, allocs);
    CHECK_EQ_U64(s.num_frees, allocs);
    CHECK_EQ_U64(s.bytes_in_use, 0);
    CHECK_OK(hbm_check(a));
    fprintf(stderr, "     %s: %d threads, %" PRIu64 " allocations, peak %" PRIu64 " KiB in use\n", config, NTHREADS,
            allocs, s.peak_bytes_in_use >> 10);
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_bfc_preallocated_threads(void) { stress("allocator=bfc,limit=256MiB"); }
static void test_bfc_growing_threads(void) { stress("allocator=bfc,preallocate=false,limit=256MiB"); }
static void test_platform_threads(void) { stress("allocator=platform,limit=256MiB"); }

int main(void) {
    RUN(test_bfc_preallocated_threads);
    RUN(test_bfc_growing_threads);
    RUN(test_platform_threads);
    return test_done();
}
