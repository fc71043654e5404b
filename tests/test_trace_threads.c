/* test_trace_threads.c - several threads allocating through one recorded allocator: every
 * event lands in the file once, in a consistent order, with a thread number per thread. */
#include <pthread.h>
#include <unistd.h>

#include "test.h"

#define THREADS 4
#define ROUNDS 2000

static hbm_allocator *shared;

static void *worker(void *arg) {
    uint64_t seed = (uint64_t)(uintptr_t)arg, live[8] = {0};
    hbm_tag tg = {.op_name = "worker", .source_line = (int)seed};
    for (int i = 0; i < ROUNDS; i++) {
        int k = i % 8;
        if (live[k]) {
            if (hbm_free(shared, live[k])) return (void *)1;
            live[k] = 0;
        }
        if (hbm_alloc(shared, 512 + (seed * 131 + (uint64_t)i) % 4096, &tg, &live[k])) return (void *)1;
    }
    for (int k = 0; k < 8; k++)
        if (live[k] && hbm_free(shared, live[k])) return (void *)1;
    return NULL;
}

static void test_threads(void) {
    char path[64], cfg[128];
    snprintf(path, sizeof path, "/tmp/hbm-test-trace-threads-%d.hbmt", (int)getpid());
    snprintf(cfg, sizeof cfg, "allocator=platform,trace=%s", path);
    hbm_device *d;
    CHECK_OK(hbm_device_open("sim:64GiB", &d));
    CHECK_OK(hbm_allocator_open(d, cfg, &shared));
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(!pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1)));
    int bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad += r != NULL;
    }
    CHECK(!bad);
    hbm_allocator_close(shared);
    hbm_device_close(d);
    hbm_trace *t;
    CHECK_OK(hbm_trace_read(path, &t));
    unlink(path);
    uint64_t allocs = 0, frees = 0, last = 0;
    uint32_t seen[64] = {0};
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        CHECK(e->time_ns >= last);
        last = e->time_ns;
        allocs += e->kind == HBM_EV_ALLOC;
        frees += e->kind == HBM_EV_FREE;
        if (e->kind == HBM_EV_ALLOC && e->thread < 64) seen[e->thread]++;
    }
    CHECK_EQ_U64(allocs, THREADS * ROUNDS);
    CHECK_EQ_U64(frees, THREADS * ROUNDS);
    int nthreads = 0;
    for (int i = 0; i < 64; i++)
        if (seen[i]) {
            CHECK_EQ_U64(seen[i], ROUNDS);
            nthreads++;
        }
    CHECK_EQ_U64(nthreads, THREADS);
    hbm_timeline *tl;
    CHECK_OK(hbm_trace_to_timeline(t, &tl));
    CHECK_EQ_U64(tl->count, THREADS * ROUNDS);
    hbm_timeline_free(tl);
    hbm_trace_free(t);
}

int main(void) {
    RUN(test_threads);
    return test_done();
}
