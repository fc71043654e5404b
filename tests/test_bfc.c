/* test_bfc.c - the bfc allocator: preallocation, growth, back-off, release on OOM,
 * splitting, coalescing, stats, bad frees, walk, rounding. */
#include "hbm/plan.h"
#include "test.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

typedef struct blocks {
    hbm_block b[64];
    const char *op[64];
    int n;
} blocks;

static int collect(void *user, const hbm_block *b) {
    blocks *w = user;
    if (w->n < 64) {
        w->op[w->n] = b->tag ? b->tag->op_name : NULL;
        w->b[w->n++] = *b;
    }
    return 0;
}

static int walk(hbm_allocator *a, blocks *w) {
    memset(w, 0, sizeof *w);
    return hbm_allocator_walk(a, collect, w) == HBM_OK;
}

static int count_kind(const blocks *w, hbm_block_kind k) {
    int n = 0;
    for (int i = 0; i < w->n; i++) n += w->b[i].kind == k;
    return n;
}

static hbm_stats stats(hbm_allocator *a) {
    hbm_stats s;
    hbm_stats_get(a, &s);
    return s;
}

/* The region sizes in address order (sim hands out increasing addresses). */
static int regions(hbm_allocator *a, uint64_t *out, int max) {
    blocks w;
    walk(a, &w);
    int n = 0;
    for (int i = 0; i < w.n && n < max; i++)
        if (w.b[i].kind == HBM_BLOCK_REGION) out[n++] = w.b[i].size;
    return n;
}

static void test_preallocate_takes_fraction(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:10GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,fraction=0.5", &a));
    CHECK_STR(hbm_allocator_name(a), "bfc");
    hbm_stats s = stats(a);
    CHECK_EQ_U64(s.bytes_limit, 5 * GiB);
    CHECK_EQ_U64(s.pool_bytes, 5 * GiB);
    CHECK_EQ_U64(s.bytes_reserved, 5 * GiB);
    CHECK_EQ_U64(s.num_regions, 1);
    CHECK_EQ_U64(s.device_allocs, 1);
    CHECK_EQ_U64(s.largest_free_block_bytes, 5 * GiB);
    CHECK_EQ_U64(s.bytes_in_use, 0);
    hbm_device_counters c;
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 5 * GiB);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 0); /* close returns the region */
    hbm_device_close(d);
}

static void test_preallocate_backs_off(void) {
    hbm_device *d;
    hbm_allocator *a;
    /* 1 GiB device of which only 600 MiB is free: 0.9 x 1 GiB is refused, then x0.9 ... */
    CHECK_OK(hbm_device_open("sim:1GiB,free=600MiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,fraction=0.9", &a));
    hbm_stats s = stats(a);
    /* XLA's limit (0.9 GiB rounded up to 2 MiB, gpu_helpers.cc), rounded to the quantum */
    uint64_t want = hbm_xla_gpu_limit(GiB, 0.9) / 512 * 512;
    int tries = 1;
    while (want > 600 * MiB) { /* the same back-off as the allocator: x0.9, up to 512 */
        want = ((uint64_t)((double)want * 0.9) + 511) / 512 * 512;
        tries++;
    }
    CHECK_EQ_U64(s.pool_bytes, want);
    CHECK_EQ_U64(s.num_regions, 1);
    hbm_device_counters c;
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.alloc_failures, (uint64_t)tries - 1);
    CHECK(tries > 1);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);

    /* below the floor (the initial region, 2 MiB) opening fails cleanly */
    CHECK_OK(hbm_device_open("sim:1GiB,free=1MiB", &d));
    CHECK_STATUS(hbm_allocator_open(d, "allocator=bfc,fraction=0.5", &a), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "PREALLOCATE=false");
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 0);
    hbm_device_close(d);
}

static void test_growth_doubles(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,fraction=1", &a));
    hbm_stats s = stats(a);
    CHECK_EQ_U64(s.num_regions, 0);
    CHECK_EQ_U64(s.pool_bytes, 0);
    uint64_t p;
    /* 1 MiB blocks: regions of 2, 4, 8, 16 MiB hold 2, 4, 8, 16 of them */
    for (int i = 0; i < 30; i++) CHECK_OK(hbm_alloc(a, MiB, NULL, &p));
    uint64_t r[8];
    CHECK(regions(a, r, 8) == 4);
    CHECK_EQ_U64(r[0], 2 * MiB);
    CHECK_EQ_U64(r[1], 4 * MiB);
    CHECK_EQ_U64(r[2], 8 * MiB);
    CHECK_EQ_U64(r[3], 16 * MiB);
    s = stats(a);
    CHECK_EQ_U64(s.pool_bytes, 30 * MiB);
    CHECK_EQ_U64(s.bytes_in_use, 30 * MiB);
    CHECK_EQ_U64(s.device_allocs, 4);
    /* next would be 32 MiB; a 100 MiB request doubles it to 128 MiB and the one after
     * stays 128 MiB (XLA doubles after a region only when the request did not grow it) */
    CHECK_OK(hbm_alloc(a, 100 * MiB, NULL, &p));
    CHECK_OK(hbm_alloc(a, 100 * MiB, NULL, &p));
    CHECK(regions(a, r, 8) == 6);
    CHECK_EQ_U64(r[4], 128 * MiB);
    CHECK_EQ_U64(r[5], 128 * MiB);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_growth_backs_off_and_respects_limit(void) {
    hbm_device *d;
    hbm_allocator *a;
    uint64_t p, r[8];
    /* the 2nd raw allocation (a 4 MiB region) fails: back off to 0.9 x 4 MiB */
    CHECK_OK(hbm_device_open("sim:1GiB,fail_at=2", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,fraction=1", &a));
    CHECK_OK(hbm_alloc(a, 2 * MiB, NULL, &p));
    CHECK_OK(hbm_alloc(a, MiB, NULL, &p));
    CHECK(regions(a, r, 8) == 2);
    CHECK_EQ_U64(r[1], ((uint64_t)(4.0 * MiB * 0.9) + 511) / 512 * 512);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);

    /* the limit caps the last region: 2 + 4 + 8 MiB, then only 6 MiB remain of 20 */
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,limit=20MiB", &a));
    for (int i = 0; i < 20; i++) CHECK_OK(hbm_alloc(a, MiB, NULL, &p));
    CHECK(regions(a, r, 8) == 4);
    CHECK_EQ_U64(r[3], 6 * MiB);
    CHECK_STATUS(hbm_alloc(a, 256, NULL, &p), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "out of memory");
    hbm_stats s = stats(a);
    CHECK_EQ_U64(s.pool_bytes, 20 * MiB);
    CHECK_EQ_U64(s.num_ooms, 1);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);

    /* a request the device cannot hold fails without changing the region schedule */
    CHECK_OK(hbm_device_open("sim:1GiB,free=100MiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,fraction=1", &a));
    CHECK_OK(hbm_alloc(a, MiB, NULL, &p));
    CHECK_STATUS(hbm_alloc(a, 500 * MiB, NULL, &p), HBM_ERR_OOM);
    CHECK_OK(hbm_alloc(a, MiB, NULL, &p));
    CHECK_OK(hbm_alloc(a, MiB, NULL, &p));
    CHECK(regions(a, r, 8) == 2);
    CHECK_EQ_U64(r[1], 4 * MiB);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);

    /* the device refuses everything past the first region: OOM after backing off to the request */
    CHECK_OK(hbm_device_open("sim:1GiB,fail_after=1", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,fraction=1", &a));
    CHECK_OK(hbm_alloc(a, MiB, NULL, &p));
    CHECK_STATUS(hbm_alloc(a, 3 * MiB, NULL, &p), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "injected failure");
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_release_on_oom_and_trim(void) {
    hbm_device *d;
    hbm_allocator *a;
    uint64_t p, q, r[8];
    CHECK_OK(hbm_device_open("sim:16MiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,fraction=1,release_on_oom=false", &a));
    CHECK_OK(hbm_alloc(a, 6 * MiB, NULL, &p)); /* region of 8 MiB */
    CHECK_OK(hbm_free(a, p));
    CHECK_STATUS(hbm_alloc(a, 12 * MiB, NULL, &q), HBM_ERR_OOM); /* 8 MiB held, 8 left */
    hbm_allocator_close(a);

    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,fraction=1,release_on_oom=true", &a));
    CHECK_OK(hbm_alloc(a, 6 * MiB, NULL, &p));
    CHECK_OK(hbm_free(a, p));
    CHECK_OK(hbm_alloc(a, 12 * MiB, NULL, &q)); /* the free 8 MiB region goes back first */
    hbm_stats s = stats(a);
    CHECK_EQ_U64(s.device_frees, 1);
    CHECK_EQ_U64(s.num_regions, 1);
    CHECK_EQ_U64(s.num_ooms, 0);
    CHECK(regions(a, r, 8) == 1);
    CHECK_EQ_U64(r[0], 16 * MiB);
    CHECK_EQ_U64(s.peak_pool_bytes, 16 * MiB);
    CHECK_OK(hbm_check(a));
    /* trim keeps regions with live blocks and returns wholly free ones */
    CHECK_OK(hbm_allocator_trim(a));
    CHECK_EQ_U64(stats(a).num_regions, 1);
    CHECK_OK(hbm_free(a, q));
    CHECK_OK(hbm_allocator_trim(a));
    s = stats(a);
    CHECK_EQ_U64(s.num_regions, 0);
    CHECK_EQ_U64(s.bytes_reserved, 0);
    CHECK_EQ_U64(s.largest_free_block_bytes, 0);
    hbm_device_counters c;
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 0);
    CHECK_OK(hbm_check(a));
    /* nothing is released when even that would not make room under the limit */
    CHECK_OK(hbm_alloc(a, 6 * MiB, NULL, &p));
    CHECK_OK(hbm_free(a, p));
    CHECK_STATUS(hbm_alloc(a, 20 * MiB, NULL, &q), HBM_ERR_OOM);
    s = stats(a);
    CHECK_EQ_U64(s.num_regions, 1);
    CHECK_EQ_U64(s.device_frees, 2);
    hbm_allocator_close(a);
    hbm_device_close(d);

    /* the device, not the limit, refuses (10 MiB free): releasing the free region helps */
    CHECK_OK(hbm_device_open("sim:32MiB,free=10MiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,limit=32MiB", &a));
    CHECK_OK(hbm_alloc(a, 6 * MiB, NULL, &p));
    CHECK_OK(hbm_free(a, p));
    CHECK_OK(hbm_alloc(a, 9 * MiB, NULL, &q));
    s = stats(a);
    CHECK_EQ_U64(s.num_regions, 1);
    CHECK_EQ_U64(s.device_frees, 1);
    CHECK(s.pool_bytes >= 9 * MiB && s.pool_bytes <= 10 * MiB);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_split_and_coalesce(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,limit=1MiB", &a));
    uint64_t x[4];
    for (int i = 0; i < 4; i++) CHECK_OK(hbm_alloc(a, 256 << 10, NULL, &x[i]));
    for (int i = 1; i < 4; i++) CHECK_EQ_U64(x[i], x[i - 1] + (256 << 10));
    blocks w;
    CHECK(walk(a, &w));
    CHECK(w.n == 5 && count_kind(&w, HBM_BLOCK_LIVE) == 4);
    CHECK_EQ_U64(stats(a).largest_free_block_bytes, 0);
    CHECK_OK(hbm_free(a, x[1]));
    CHECK_OK(hbm_free(a, x[0])); /* coalesces with the next */
    CHECK(walk(a, &w));
    CHECK(w.n == 4 && w.b[1].kind == HBM_BLOCK_FREE && w.b[1].addr == x[0] && w.b[1].size == 512 << 10);
    CHECK_OK(hbm_free(a, x[2])); /* with the previous */
    CHECK(walk(a, &w));
    CHECK(w.n == 3 && w.b[1].kind == HBM_BLOCK_FREE && w.b[1].size == 768 << 10);
    CHECK_EQ_U64(stats(a).largest_free_block_bytes, 768 << 10);
    CHECK_OK(hbm_check(a));
    /* best fit splits the free block: 1000 B is held as 1024 B, the rest stays free */
    uint64_t y;
    CHECK_OK(hbm_alloc(a, 1000, NULL, &y));
    CHECK_EQ_U64(y, x[0]);
    CHECK(walk(a, &w));
    CHECK(w.n == 4 && w.b[1].kind == HBM_BLOCK_LIVE && w.b[1].size == 1024 && w.b[1].requested == 1000);
    CHECK(w.b[2].kind == HBM_BLOCK_FREE && w.b[2].addr == x[0] + 1024 && w.b[2].size == (768 << 10) - 1024);
    CHECK_OK(hbm_free(a, x[3])); /* free on both sides: all coalesce except y */
    CHECK_OK(hbm_free(a, y));
    CHECK(walk(a, &w));
    CHECK(w.n == 2 && w.b[1].kind == HBM_BLOCK_FREE && w.b[1].size == MiB);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_best_fit(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,limit=64MiB", &a));
    /* holes of 3, 1 and 2 MiB separated by live blocks; 1 MiB then 2 MiB go to the
     * exactly fitting holes, 1.5 MiB to the 2 MiB hole left... */
    uint64_t h3, s1, h1, s2, h2, s3, p;
    CHECK_OK(hbm_alloc(a, 3 * MiB, NULL, &h3));
    CHECK_OK(hbm_alloc(a, 256, NULL, &s1));
    CHECK_OK(hbm_alloc(a, MiB, NULL, &h1));
    CHECK_OK(hbm_alloc(a, 256, NULL, &s2));
    CHECK_OK(hbm_alloc(a, 2 * MiB, NULL, &h2));
    CHECK_OK(hbm_alloc(a, 256, NULL, &s3));
    CHECK_OK(hbm_free(a, h3));
    CHECK_OK(hbm_free(a, h1));
    CHECK_OK(hbm_free(a, h2));
    CHECK_OK(hbm_alloc(a, MiB, NULL, &p));
    CHECK_EQ_U64(p, h1);
    CHECK_OK(hbm_alloc(a, 2 * MiB - 4096, NULL, &p));
    CHECK_EQ_U64(p, h2);
    CHECK_OK(hbm_alloc(a, 2 * MiB, NULL, &p));
    CHECK_EQ_U64(p, h3);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_stats_and_peaks(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,limit=64MiB", &a));
    uint64_t p1, p2, p3;
    CHECK_OK(hbm_alloc(a, 1, NULL, &p1));
    CHECK_OK(hbm_alloc(a, 257, NULL, &p2));
    CHECK_OK(hbm_alloc(a, 10 * MiB, NULL, &p3));
    hbm_stats s = stats(a);
    CHECK_EQ_U64(s.version, HBM_STATS_VERSION);
    CHECK_EQ_U64(s.num_allocs, 3);
    CHECK_EQ_U64(s.bytes_in_use, 256 + 512 + 10 * MiB);
    CHECK_EQ_U64(s.peak_bytes_in_use, s.bytes_in_use);
    CHECK_EQ_U64(s.largest_alloc_size, 10 * MiB);
    CHECK_EQ_U64(s.largest_free_block_bytes, 64 * MiB - s.bytes_in_use);
    CHECK_OK(hbm_free(a, p3));
    s = stats(a);
    CHECK_EQ_U64(s.num_frees, 1);
    CHECK_EQ_U64(s.bytes_in_use, 768);
    CHECK_EQ_U64(s.peak_bytes_in_use, 768 + 10 * MiB);
    CHECK_OK(hbm_stats_reset_peaks(a));
    s = stats(a);
    CHECK_EQ_U64(s.peak_bytes_in_use, 768);
    CHECK_EQ_U64(s.peak_pool_bytes, 64 * MiB);
    CHECK(hbm_stats_fragmentation(&s) == 0.0); /* one free block */
    CHECK_OK(hbm_free(a, p1)); /* a 256 B hole before p2: fragmentation > 0 */
    s = stats(a);
    CHECK(hbm_stats_fragmentation(&s) > 0.0);
    /* an impossible request: OOM, counted, nothing changes */
    uint64_t p;
    CHECK_STATUS(hbm_alloc(a, 65 * MiB, NULL, &p), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "rounded to 68157440");
    CHECK_STATUS(hbm_alloc(a, UINT64_MAX, NULL, &p), HBM_ERR_OOM);
    hbm_stats t = stats(a);
    CHECK_EQ_U64(t.num_ooms, 2);
    CHECK_EQ_U64(t.bytes_in_use, s.bytes_in_use);
    CHECK_EQ_U64(t.num_allocs, s.num_allocs);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_bad_frees_change_nothing(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,limit=16MiB", &a));
    uint64_t p, q;
    CHECK_OK(hbm_alloc(a, 4096, NULL, &p));
    CHECK_OK(hbm_alloc(a, 4096, NULL, &q));
    CHECK_OK(hbm_free(a, q));
    hbm_stats before = stats(a);
    blocks w0, w1;
    CHECK(walk(a, &w0));
    CHECK_STATUS(hbm_free(a, 12345), HBM_ERR_BAD_FREE); /* unknown */
    CHECK_CONTAINS(hbm_last_error(), "in no region");
    CHECK_STATUS(hbm_free(a, q), HBM_ERR_BAD_FREE); /* double free */
    CHECK_CONTAINS(hbm_last_error(), "not the start of a live block");
    CHECK_STATUS(hbm_free(a, p + 256), HBM_ERR_BAD_FREE); /* inside a block */
    CHECK_STATUS(hbm_free(a, p + 1), HBM_ERR_BAD_FREE);
    CHECK_STATUS(hbm_free(a, UINT64_MAX), HBM_ERR_BAD_FREE);
    hbm_stats after = stats(a);
    CHECK(memcmp(&before, &after, sizeof before) == 0);
    CHECK(walk(a, &w1));
    CHECK(w0.n == w1.n);
    for (int i = 0; i < w0.n; i++)
        CHECK(w0.b[i].kind == w1.b[i].kind && w0.b[i].addr == w1.b[i].addr && w0.b[i].size == w1.b[i].size &&
              w0.b[i].requested == w1.b[i].requested && w0.b[i].seq == w1.b[i].seq);
    CHECK_OK(hbm_check(a));
    CHECK_OK(hbm_free(a, p));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static int stop_after_two(void *user, const hbm_block *b) { return ++*(int *)user == 2; }

static void test_walk_reports_tags_and_seq(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,fraction=1", &a));
    hbm_tag t1 = {.op_name = "matmul", .shape = "f32[1024,1024]"};
    hbm_tag t2 = {.op_name = "softmax"};
    uint64_t p1, p2, p3;
    CHECK_OK(hbm_alloc(a, 4 * MiB, &t1, &p1)); /* its own 4 MiB region */
    CHECK_OK(hbm_alloc(a, 100, &t2, &p2));     /* 4 MiB again: the request grew the last one */
    CHECK_OK(hbm_alloc(a, 300, NULL, &p3));
    blocks w;
    CHECK(walk(a, &w));
    CHECK(w.n == 6);
    CHECK(w.b[0].kind == HBM_BLOCK_REGION && w.b[0].size == 4 * MiB);
    CHECK(w.b[1].kind == HBM_BLOCK_LIVE && w.b[1].addr == p1 && w.b[1].seq == 1);
    CHECK_STR(w.op[1], "matmul");
    CHECK_STR(w.b[1].tag->shape, "f32[1024,1024]");
    CHECK(w.b[2].kind == HBM_BLOCK_REGION && w.b[2].size == 4 * MiB);
    CHECK(w.b[3].kind == HBM_BLOCK_LIVE && w.b[3].requested == 100 && w.b[3].size == 256 && w.b[3].seq == 2);
    CHECK_STR(w.op[3], "softmax");
    CHECK(w.b[4].kind == HBM_BLOCK_LIVE && w.b[4].requested == 300 && w.b[4].size == 512 && w.b[4].seq == 3);
    CHECK(w.b[4].tag == NULL);
    CHECK(w.b[5].kind == HBM_BLOCK_FREE && w.b[5].size == 4 * MiB - 768 && w.b[5].requested == 0);
    int seen = 0;
    CHECK_OK(hbm_allocator_walk(a, stop_after_two, &seen));
    CHECK(seen == 2);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_host_device_quantum(void) {
    /* host memory is accounted in 4 KiB pages: regions are 4 KiB multiples, blocks 256 B */
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("host:64MiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,preallocate=false,fraction=1,initial_region=5000", &a));
    uint64_t p, r[4];
    CHECK_OK(hbm_alloc(a, 300, NULL, &p));
    CHECK(regions(a, r, 4) == 1);
    CHECK_EQ_U64(r[0], 8192);
    memset((void *)(uintptr_t)p, 0xab, 300);
    CHECK_OK(hbm_free(a, p));
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

int main(void) {
    RUN(test_preallocate_takes_fraction);
    RUN(test_preallocate_backs_off);
    RUN(test_growth_doubles);
    RUN(test_growth_backs_off_and_respects_limit);
    RUN(test_release_on_oom_and_trim);
    RUN(test_split_and_coalesce);
    RUN(test_best_fit);
    RUN(test_stats_and_peaks);
    RUN(test_bad_frees_change_nothing);
    RUN(test_walk_reports_tags_and_seq);
    RUN(test_host_device_quantum);
    return test_done();
}
