/* test_async.c - the cuda_async model on sim devices: segments, stream-ordered reuse,
 * preallocation, the pool size, a randomized check against a reference of the stream
 * rules, the model against the same rule written as a scan (addresses and stats, operation
 * by operation), and fault injection. */
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

/* The model's rule written again the plain way, as a reference: blocks in one array in
 * address order, the fit found by scanning every free block. Segments come from a device
 * of their own (sim: addresses are a bump pointer, so both get the same ones). */
enum { R_LIVE = 1, R_READY, R_PENDING };
typedef struct rblk { uint64_t addr, size, stream, seg; int state; } rblk;
typedef struct rpool {
    hbm_device *dev;
    uint64_t limit, in_use, reserved, nseg;
    rblk b[4096];
    size_t n;
} rpool;

static void r_insert(rpool *p, size_t at, rblk x) {
    memmove(&p->b[at + 1], &p->b[at], (p->n - at) * sizeof x);
    p->b[at] = x;
    p->n++;
}

static void r_remove(rpool *p, size_t at) {
    memmove(&p->b[at], &p->b[at + 1], (p->n - at - 1) * sizeof p->b[0]);
    p->n--;
}

static int r_takes(const rblk *x, const rblk *y) { /* may free block x take its neighbour y */
    if (x->seg != y->seg) return 0;
    return x->state == R_READY ? y->state == R_READY
                               : y->state == R_READY || (y->state == R_PENDING && y->stream == x->stream);
}

static size_t r_coalesce(rpool *p, size_t k) {
    while (k && r_takes(&p->b[k], &p->b[k - 1])) {
        if (p->b[k].state == R_PENDING) p->b[k - 1].state = R_PENDING, p->b[k - 1].stream = p->b[k].stream;
        p->b[k - 1].size += p->b[k].size;
        r_remove(p, k--);
    }
    while (k + 1 < p->n && r_takes(&p->b[k], &p->b[k + 1])) {
        p->b[k].size += p->b[k + 1].size;
        r_remove(p, k + 1);
    }
    return k;
}

static void r_sync(rpool *p, uint64_t stream) {
    for (size_t k = 0; k < p->n; k++)
        if (p->b[k].state == R_PENDING && (stream == HBM_STREAM_ALL || p->b[k].stream == stream)) p->b[k].state = R_READY;
    for (size_t k = 0; k < p->n; k++)
        if (p->b[k].state == R_READY) k = r_coalesce(p, k);
}

static int r_whole(const rpool *p, size_t k) {
    return p->b[k].state == R_READY && (!k || p->b[k - 1].seg != p->b[k].seg) &&
           (k + 1 == p->n || p->b[k + 1].seg != p->b[k].seg);
}

static void r_trim(rpool *p) {
    for (size_t k = 0; k < p->n;)
        if (r_whole(p, k) && !hbm_device_free(p->dev, p->b[k].addr)) p->reserved -= p->b[k].size, r_remove(p, k);
        else k++;
}

static int r_fit(const rpool *p, uint64_t need, uint64_t stream, size_t *out) {
    int found = 0;
    for (size_t k = 0; k < p->n; k++) {
        const rblk *x = &p->b[k];
        if ((x->state != R_READY && (x->state != R_PENDING || x->stream != stream)) || x->size < need) continue;
        if (!found || x->size < p->b[*out].size) *out = k, found = 1; /* address order: the first of a size */
    }
    return found;
}

static int r_grow(rpool *p, uint64_t need, size_t *out) {
    uint64_t seg = hbmi_align_up(need, 2u << 20), room = p->limit - p->reserved, addr;
    if (seg > room && need <= room) seg = room / 512 * 512;
    if (seg > room || hbm_device_alloc(p->dev, seg, &addr)) return 0;
    size_t at = 0;
    while (at < p->n && p->b[at].addr < addr) at++;
    r_insert(p, at, (rblk){addr, seg, 0, ++p->nseg, R_READY});
    p->reserved += seg;
    *out = at;
    return 1;
}

/* 0 and *addr, or 1 for an OOM */
static int r_alloc(rpool *p, uint64_t size, uint64_t stream, uint64_t *addr) {
    uint64_t need = hbmi_align_up(size, 512);
    size_t k;
    if (need > p->limit || p->in_use > p->limit - need) return 1;
    if (!r_fit(p, need, stream, &k) && !r_grow(p, need, &k)) {
        r_sync(p, stream);
        if (!r_fit(p, need, stream, &k)) {
            r_trim(p);
            if (!r_grow(p, need, &k)) return 1;
        }
    }
    rblk *x = &p->b[k];
    if (x->size - need >= 512) r_insert(p, k + 1, (rblk){x->addr + need, x->size - need, x->stream, x->seg, x->state});
    x = &p->b[k];
    x->size = need;
    x->state = R_LIVE;
    p->in_use += need;
    *addr = x->addr;
    return 0;
}

static void r_free(rpool *p, uint64_t addr, uint64_t stream) {
    size_t k = 0;
    while (p->b[k].addr != addr) k++;
    p->in_use -= p->b[k].size;
    p->b[k].state = R_PENDING;
    p->b[k].stream = stream;
    r_coalesce(p, k);
}

static uint64_t r_largest(const rpool *p) {
    uint64_t m = 0;
    for (size_t k = 0; k < p->n; k++)
        if (p->b[k].state != R_LIVE && p->b[k].size > m) m = p->b[k].size;
    return m;
}

/* The model against the reference, operation by operation: the same addresses, the same
 * OOMs, the same bytes reserved and largest free block, under random traffic on 3 streams
 * with syncs and trims, in a pool that runs out of memory and in one that does not. */
static void test_against_reference(void) {
    for (uint64_t seed = 1; seed <= 8; seed++) {
        hbm_device *d;
        static rpool ref;
        memset(&ref, 0, sizeof ref);
        ref.limit = seed % 2 ? 96u << 20 : 2ull << 30;
        char cfg[96];
        snprintf(cfg, sizeof cfg, "allocator=cuda_async,limit=%" PRIu64, ref.limit);
        hbm_allocator *a = open_async(&d, "sim:4GiB", cfg);
        CHECK(a);
        CHECK_OK(hbm_device_open("sim:4GiB", &ref.dev));
        test_rng r = {seed * 104729};
        uint64_t live[512], lstream[512], ooms = 0;
        size_t nlive = 0;
        for (int step = 0; step < 6000; step++) {
            uint64_t op = test_below(&r, 20), stream = test_below(&r, 3);
            if (op < 11 && nlive < 512) {
                uint64_t c = test_below(&r, 8);
                uint64_t size = c < 5 ? 1 + test_below(&r, 64 << 10) : c < 7 ? 1 + test_below(&r, 4 << 20)
                                                                               : 1 + test_below(&r, 24 << 20);
                uint64_t x = 0, y = 0;
                hbm_status s = hbm_alloc_stream(a, size, NULL, stream, &x);
                int rs = r_alloc(&ref, size, stream, &y);
                CHECK(s == HBM_OK || s == HBM_ERR_OOM);
                CHECK((s == HBM_ERR_OOM) == rs);
                if (s) {
                    ooms++;
                    continue;
                }
                CHECK_EQ_U64(x, y);
                live[nlive] = x, lstream[nlive++] = stream;
            } else if (op < 18 && nlive) {
                size_t i = test_below(&r, nlive);
                if (test_below(&r, 4)) stream = lstream[i]; /* mostly on the stream that allocated it */
                CHECK_OK(hbm_free_stream(a, live[i], stream));
                r_free(&ref, live[i], stream);
                live[i] = live[nlive - 1], lstream[i] = lstream[--nlive];
            } else if (op < 19) {
                uint64_t which = test_below(&r, 3) == 0 ? HBM_STREAM_ALL : stream;
                CHECK_OK(hbm_allocator_sync(a, which));
                r_sync(&ref, which);
            } else {
                CHECK_OK(hbm_allocator_trim(a));
                r_trim(&ref);
            }
            hbm_stats st;
            CHECK_OK(hbm_stats_get(a, &st));
            CHECK_EQ_U64(st.bytes_in_use, ref.in_use);
            CHECK_EQ_U64(st.bytes_reserved, ref.reserved);
            CHECK_EQ_U64(st.largest_free_block_bytes, r_largest(&ref));
            if (step % 128 == 0) CHECK_OK(hbm_check(a));
        }
        CHECK_OK(hbm_check(a));
        if (seed % 2) CHECK(ooms > 0); /* the tight pool did run out */
        else CHECK_EQ_U64(ooms, 0);
        hbm_allocator_close(a);
        hbm_device_close(d);
        hbm_device_close(ref.dev);
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
    RUN(test_against_reference);
    RUN(test_faults);
    return test_done();
}
