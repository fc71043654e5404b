/* test_async.c - the cuda_async model on sim devices: segments, stream-ordered reuse,
 * preallocation, the pool size, a randomized check against a reference of the stream
 * rules, and fault injection. */
#include "core/internal.h"
#include "test.h"

static hbm_allocator *open_async(hbm_device **d, const char *dev, const char *cfg) {
    if (hbm_device_open(dev, d)) return NULL;
    hbm_allocator *a = NULL;
    if (hbm_allocator_open(*d, cfg, &a)) {
        hbm_device_close(*d);
        return NULL;
    }
    return a;
}

static void test_basics(void) {
    hbm_device *d;
    hbm_allocator *a = open_async(&d, "sim:1GiB", "allocator=cuda_async,limit=256MiB");
    CHECK(a);
    CHECK_STR(hbm_allocator_name(a), "cuda_async");
    uint64_t x, y;
    hbm_stats st;
    CHECK_OK(hbm_alloc(a, 1000, NULL, &x));
    CHECK_OK(hbm_alloc(a, 1000, NULL, &y));
    CHECK_EQ_U64(y, x + 1024); /* rounded to 512, same 2 MiB segment */
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_in_use, 2048);
    CHECK_EQ_U64(st.bytes_reserved, 2u << 20);
    CHECK_EQ_U64(st.num_regions, 1);
    CHECK_EQ_U64(st.bytes_limit, 256u << 20);
    CHECK_OK(hbm_free(a, x));
    CHECK_STATUS(hbm_free(a, x), HBM_ERR_BAD_FREE);
    CHECK_OK(hbm_free(a, y));
    CHECK_OK(hbm_check(a));
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.largest_free_block_bytes, 2u << 20); /* coalesced */
    CHECK_OK(hbm_allocator_trim(a));                     /* pending on stream 0: kept */
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 2u << 20);
    CHECK_OK(hbm_allocator_sync(a, 0));
    CHECK_OK(hbm_allocator_trim(a));
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 0);
    hbm_device_counters c;
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 0);
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_streams(void) {
    hbm_device *d;
    hbm_allocator *a = open_async(&d, "sim:1GiB", "allocator=cuda_async,limit=64MiB");
    CHECK(a);
    uint64_t x, y, z;
    CHECK_OK(hbm_alloc_stream(a, 2 << 20, NULL, 1, &x));
    CHECK_OK(hbm_free_stream(a, x, 1));
    CHECK_OK(hbm_alloc_stream(a, 2 << 20, NULL, 2, &y)); /* pending on 1: not for stream 2 */
    CHECK(y != x);
    CHECK_OK(hbm_alloc_stream(a, 2 << 20, NULL, 1, &z)); /* stream 1 reuses it at once */
    CHECK_EQ_U64(z, x);
    CHECK_OK(hbm_free_stream(a, z, 1));
    CHECK_OK(hbm_allocator_sync(a, 1));
    CHECK_OK(hbm_alloc_stream(a, 2 << 20, NULL, 2, &z)); /* after the sync, anyone */
    CHECK_EQ_U64(z, x);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);

    /* the pool is full and the only free memory is pending on another stream: OOM until sync */
    a = open_async(&d, "sim:1GiB", "allocator=cuda_async,limit=4MiB");
    CHECK(a);
    CHECK_OK(hbm_alloc_stream(a, 4 << 20, NULL, 1, &x));
    CHECK_OK(hbm_free_stream(a, x, 1));
    CHECK_STATUS(hbm_alloc_stream(a, 4 << 20, NULL, 2, &y), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "pool");
    char buf[8192];
    size_t len;
    CHECK_OK(hbm_oom_report_format(a, buf, sizeof buf, &len));
    CHECK_CONTAINS(buf, "allocator cuda_async");
    CHECK_OK(hbm_allocator_sync(a, HBM_STREAM_ALL));
    CHECK_OK(hbm_alloc_stream(a, 4 << 20, NULL, 2, &y));
    CHECK_EQ_U64(y, x);
    /* a free on stream 0 merges with pending-0 and ready neighbours */
    CHECK_OK(hbm_free_stream(a, y, 2));
    CHECK_OK(hbm_allocator_sync(a, 2));
    CHECK_OK(hbm_alloc_stream(a, 1 << 20, NULL, 0, &x));
    CHECK_OK(hbm_alloc_stream(a, 1 << 20, NULL, 0, &y));
    CHECK_OK(hbm_free_stream(a, x, 0));
    CHECK_OK(hbm_free_stream(a, y, 0));
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.largest_free_block_bytes, 4u << 20);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_prealloc_and_config(void) {
    hbm_device *d;
    hbm_allocator *a = open_async(&d, "sim:1GiB", "allocator=cuda_async,limit=100MiB,async_prealloc=64MiB");
    CHECK(a);
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 64u << 20);
    CHECK_EQ_U64(st.device_allocs, 1);
    uint64_t x;
    CHECK_OK(hbm_alloc_stream(a, 10 << 20, NULL, 5, &x)); /* ready memory: any stream */
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.device_allocs, 1);
    hbm_allocator_close(a);
    hbm_device_close(d);
    a = open_async(&d, "sim:1GiB", "allocator=cuda_async,limit=100MiB,async_prealloc=-1");
    CHECK(a);
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 100u << 20);
    hbm_allocator_close(a);
    hbm_device_close(d);
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_STATUS(hbm_allocator_open(d, "allocator=cuda_async,limit=100MiB,async_prealloc=200MiB", &a), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "larger than the pool size");
    hbm_device_close(d);
    /* TensorFlow's variables select it, with XLA's fraction */
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    setenv("TF_GPU_ALLOCATOR", "cuda_malloc_async", 1);
    setenv("TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC", "32MiB", 1);
    hbm_status s = hbm_allocator_open(d, NULL, &a);
    unsetenv("TF_GPU_ALLOCATOR");
    unsetenv("TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC");
    CHECK_OK(s);
    CHECK_STR(hbm_allocator_name(a), "cuda_async");
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 32u << 20);
    CHECK_EQ_U64(st.bytes_limit, (uint64_t)((1u << 30) * 0.75));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

/* Random traffic on 3 streams. Reference: live blocks must never overlap, and a block
 * may not land on memory freed by another stream since that stream's last sync. */
typedef struct ref_blk { uint64_t addr, size, stream; } ref_blk;

static int overlaps(uint64_t a, uint64_t n, uint64_t b, uint64_t m) { return a < b + m && b < a + n; }

static void test_random(void) {
    for (uint64_t seed = 1; seed <= 6; seed++) {
        hbm_device *d;
        /* Odd seeds: a tight pool, where OOMs make the pool synchronize on its own (so only
         * overlaps are checked). Even seeds: a roomy pool that never fails, so every reuse
         * must follow the stream rule. */
        int strict = seed % 2 == 0;
        hbm_allocator *a = open_async(&d, strict ? "sim:64GiB" : "sim:1GiB",
                                      strict ? "allocator=cuda_async,limit=32GiB,async_prealloc=16MiB"
                                             : "allocator=cuda_async,limit=64MiB");
        CHECK(a);
        test_rng r = {seed * 7919};
        ref_blk live[256], pend[4096];
        size_t nlive = 0, npend = 0;
        for (int step = 0; step < 4000; step++) {
            uint64_t op = test_below(&r, 10), stream = test_below(&r, 3);
            if (op < 5 && nlive < 256) {
                uint64_t size = test_below(&r, 4) ? 1 + test_below(&r, 64 << 10) : 1 + test_below(&r, 6 << 20);
                uint64_t x;
                hbm_status s = hbm_alloc_stream(a, size, NULL, stream, &x);
                if (s == HBM_ERR_OOM) { /* the pool synchronized the stream before giving up (XLA's retry) */
                    for (size_t i = 0; i < npend;)
                        if (pend[i].stream == stream) pend[i] = pend[--npend];
                        else i++;
                    continue;
                }
                CHECK_OK(s);
                uint64_t held = hbmi_align_up(size, 512);
                for (size_t i = 0; i < nlive; i++) CHECK(!overlaps(x, held, live[i].addr, live[i].size));
                for (size_t i = 0; i < npend; i++)
                    if (strict && pend[i].stream != stream) CHECK(!overlaps(x, held, pend[i].addr, pend[i].size));
                for (size_t i = 0; i < npend;) /* the stream's own pending memory, now reused */
                    if (overlaps(x, held, pend[i].addr, pend[i].size)) pend[i] = pend[--npend];
                    else i++;
                live[nlive++] = (ref_blk){x, held, stream};
            } else if (op < 9 && nlive) {
                size_t i = test_below(&r, nlive);
                CHECK_OK(hbm_free_stream(a, live[i].addr, stream));
                if (getenv("DBG") && seed == 4) fprintf(stderr, "OP %d free %llx+%llu s%llu\n", step, (unsigned long long)live[i].addr, (unsigned long long)live[i].size, (unsigned long long)stream);
                if (npend < 4096) pend[npend++] = (ref_blk){live[i].addr, live[i].size, stream};
                live[i] = live[--nlive];
            } else {
                uint64_t which = test_below(&r, 4) == 0 ? HBM_STREAM_ALL : stream;
                CHECK_OK(hbm_allocator_sync(a, which));
                if (getenv("DBG") && seed == 4) fprintf(stderr, "OP %d sync %llx\n", step, (unsigned long long)which);
                for (size_t i = 0; i < npend;)
                    if (which == HBM_STREAM_ALL || pend[i].stream == which) pend[i] = pend[--npend];
                    else i++;
            }
            if (npend == 4096) { /* keep the reference bounded */
                CHECK_OK(hbm_allocator_sync(a, HBM_STREAM_ALL));
                npend = 0;
            }
            if (step % 64 == 0) CHECK_OK(hbm_check(a));
            if (step % 500 == 0) CHECK_OK(hbm_allocator_trim(a));
        }
        hbm_stats st;
        CHECK_OK(hbm_stats_get(a, &st));
        uint64_t sum = 0;
        for (size_t i = 0; i < nlive; i++) sum += live[i].size;
        CHECK_EQ_U64(st.bytes_in_use, sum);
        CHECK(st.bytes_reserved <= st.bytes_limit);
        if (strict) CHECK_EQ_U64(st.num_ooms, 0);
        else CHECK(st.num_ooms > 0);
        CHECK_OK(hbm_check(a));
        hbm_allocator_close(a);
        hbm_device_counters c;
        CHECK_OK(hbm_device_counters_get(d, &c));
        CHECK_EQ_U64(c.bytes_in_use, 0);
        hbm_device_close(d);
    }
}

static void test_faults(void) {
    /* device failures: the 2nd raw allocation fails */
    hbm_device *d;
    hbm_allocator *a = open_async(&d, "sim:1GiB,fail_after=1", "allocator=cuda_async,limit=64MiB");
    CHECK(a);
    uint64_t x, y;
    CHECK_OK(hbm_alloc(a, 2 << 20, NULL, &x));
    CHECK_STATUS(hbm_alloc(a, 2 << 20, NULL, &y), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "injected");
    CHECK_OK(hbm_check(a));
    CHECK_OK(hbm_free(a, x));
    CHECK_OK(hbm_alloc(a, 2 << 20, NULL, &y)); /* from the pool: no device call */
    CHECK_EQ_U64(y, x);
    hbm_allocator_close(a);
    hbm_device_close(d);
    /* host allocation failures: fail the nth, for n = 1.. until the sequence passes */
    for (uint64_t n = 1; n < 200; n++) {
        CHECK_OK(hbm_device_open("sim:1GiB", &d));
        hbm_debug_fail_host_alloc(n);
        hbm_status s = hbm_allocator_open(d, "allocator=cuda_async,limit=64MiB", &a);
        int done = 0;
        if (!s) {
            uint64_t p[40];
            int k = 0;
            for (; k < 40; k++) {
                s = hbm_alloc_stream(a, (uint64_t)(k + 1) * 4096, NULL, (uint64_t)(k % 3), &p[k]);
                if (s) break;
            }
            CHECK(s == HBM_OK || s == HBM_ERR_NOMEM);
            hbm_debug_fail_host_alloc(0);
            CHECK_OK(hbm_check(a));
            for (int j = 0; j < k; j++) CHECK_OK(hbm_free_stream(a, p[j], (uint64_t)(j % 3)));
            CHECK_OK(hbm_check(a));
            done = s == HBM_OK;
            hbm_allocator_close(a);
        } else {
            CHECK_STATUS(s, HBM_ERR_NOMEM);
        }
        hbm_debug_fail_host_alloc(0);
        hbm_device_close(d);
        if (done) break;
    }
}

int main(void) {
    RUN(test_basics);
    RUN(test_streams);
    RUN(test_prealloc_and_config);
    RUN(test_random);
    RUN(test_faults);
    return test_done();
}
