/* test_torch_alloc.c - allocator=torch, rule by rule, on hand-made sequences whose result
 * follows from PyTorch's c10/cuda/CUDACachingAllocator.cpp (round_size, get_pool,
 * get_allocation_size, get_free_block, should_split, alloc_block,
 * release_available_cached_blocks, release_cached_blocks, garbage_collect_cached_blocks,
 * the expandable segments' map_block / unmap_block), its configuration in PyTorch's
 * syntax, and a randomized invariant check. */
#include "alloc/alloc_internal.h"
#include "core/internal.h"
#include "alloc/torch_caching.h"
#include "test.h"

#define MiB (1ull << 20)

typedef struct seg_log {
    int kind[64];
    uint64_t addr[64], size[64];
    int n;
} seg_log;

static void log_event(void *user, int kind, uint64_t addr, uint64_t size, uint64_t stream, uint64_t seg) {
    seg_log *l = user;
    (void)stream, (void)seg;
    if (l->n < 64) l->kind[l->n] = kind, l->addr[l->n] = addr, l->size[l->n] = size, l->n++;
}

static hbm_allocator *open_torch(hbm_device **d, const char *spec, const char *config, seg_log *log) {
    if (hbm_device_open(spec, d)) return NULL;
    hbm_allocator *a = NULL;
    if (hbm_allocator_open(*d, config, &a)) {
        hbm_device_close(*d);
        return NULL;
    }
    if (log) {
        memset(log, 0, sizeof *log);
        hbmi_torch_set_event_fn(a->self, log_event, log);
    }
    return a;
}

static void close_torch(hbm_allocator *a, hbm_device *d) {
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static uint64_t in_use(hbm_allocator *a) {
    hbm_stats st;
    hbm_stats_get(a, &st);
    return st.bytes_in_use;
}

static uint64_t reserved(hbm_allocator *a) {
    hbm_stats st;
    hbm_stats_get(a, &st);
    return st.bytes_reserved;
}

/* round_size: < 512 -> 512, else a multiple of 512 */
static void test_rounding(void) {
    hbm_device *d;
    uint64_t p;
    hbm_allocator *a = open_torch(&d, "sim:1GiB", "allocator=torch", NULL);
    CHECK(a);
    CHECK_STR(hbm_allocator_name(a), "torch");
    CHECK_OK(hbm_alloc(a, 1, NULL, &p));
    CHECK_EQ_U64(in_use(a), 512);
    CHECK_OK(hbm_alloc(a, 513, NULL, &p));
    CHECK_EQ_U64(in_use(a), 512 + 1024);
    CHECK_OK(hbm_alloc(a, 5 * MiB + 1, NULL, &p)); /* large pool: 512 rounding too */
    CHECK_EQ_U64(in_use(a), 1536 + 5 * MiB + 512);
    CHECK_OK(hbm_check(a));
    close_torch(a, d);
}

/* roundup_power2_divisions: with d divisions and size > 512 d, the next of d equal steps
 * between the two powers of two around the size (roundup_power2_next_division) */
static void test_roundup_power2(void) {
    hbm_device *d;
    uint64_t p;
    hbm_allocator *a = open_torch(&d, "sim:4GiB", "allocator=torch,roundup_power2_divisions=4", NULL);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, 5 * MiB + 1, NULL, &p)); /* [4, 8) MiB in steps of 1 MiB -> 6 MiB */
    CHECK_EQ_U64(in_use(a), 6 * MiB);
    CHECK_OK(hbm_alloc(a, 4 * MiB, NULL, &p)); /* a power of two stays */
    CHECK_EQ_U64(in_use(a), 10 * MiB);
    CHECK_OK(hbm_alloc(a, 1200, NULL, &p)); /* 1200 <= 512 x 4: plain 512 rounding */
    CHECK_EQ_U64(in_use(a), 10 * MiB + 1536);
    CHECK_OK(hbm_alloc(a, 3000, NULL, &p)); /* [2048, 4096) in steps of 512 -> 3072 */
    CHECK_EQ_U64(in_use(a), 10 * MiB + 1536 + 3072);
    close_torch(a, d);
    /* per interval; PyTorch's ">" applies from the last interval named, that one included:
     * [256:2,>:8] gives 2 below 256 MiB and 8 from 256 MiB */
    a = open_torch(&d, "sim:4GiB", "allocator=torch,roundup_power2_divisions=[256:2,>:8]", NULL);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, 300 * MiB, NULL, &p)); /* [256, 512) in steps of 32 MiB -> 320 */
    CHECK_EQ_U64(in_use(a), 320 * MiB);
    CHECK_OK(hbm_alloc(a, 5 * MiB, NULL, &p)); /* [4, 8) in 2 steps of 2 MiB -> 6 MiB */
    CHECK_EQ_U64(in_use(a), 326 * MiB);
    close_torch(a, d);
}

/* get_pool / get_allocation_size: <= 1 MiB small pool in 2 MiB segments; < 10 MiB a
 * 20 MiB segment; from 10 MiB the size rounded up to 2 MiB */
static void test_pools_and_segments(void) {
    hbm_device *d;
    seg_log l;
    uint64_t p;
    hbm_allocator *a = open_torch(&d, "sim:1GiB", "allocator=torch", &l);
    CHECK(a);
    /* one stream each, so that no request fits in the rest of an earlier segment */
    CHECK_OK(hbm_alloc_stream(a, MiB, NULL, 1, &p));
    CHECK_OK(hbm_alloc_stream(a, MiB + 1, NULL, 2, &p));
    CHECK_OK(hbm_alloc_stream(a, 10 * MiB - 512, NULL, 3, &p));
    CHECK_OK(hbm_alloc_stream(a, 10 * MiB, NULL, 4, &p));
    CHECK_OK(hbm_alloc_stream(a, 11 * MiB + 1, NULL, 5, &p));
    CHECK_EQ_U64(l.n, 5);
    uint64_t want[5] = {2 * MiB, 20 * MiB, 20 * MiB, 10 * MiB, 12 * MiB};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_U64(l.kind[i], HBM_EV_SEGMENT_ALLOC);
        CHECK_EQ_U64(l.size[i], want[i]);
    }
    CHECK_EQ_U64(reserved(a), 64 * MiB);
    /* the 12 MiB segment's 1 MiB rest is not split off (the remainder must exceed 1 MiB) */
    CHECK_EQ_U64(in_use(a), MiB + (MiB + 512) + (10 * MiB - 512) + 10 * MiB + 12 * MiB);
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.num_regions, 5);
    CHECK_EQ_U64(st.device_allocs, 5);
    CHECK_OK(hbm_check(a));
    close_torch(a, d);
}

/* should_split and alloc_found_block: the request takes the front of the block */
static void test_splits(void) {
    hbm_device *d;
    seg_log l;
    uint64_t s1, s2, s3, l1, l2;
    hbm_allocator *a = open_torch(&d, "sim:1GiB", "allocator=torch", &l);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, MiB, NULL, &s1)); /* small: a remainder >= 512 splits */
    CHECK_OK(hbm_alloc(a, MiB - 512, NULL, &s2));
    CHECK_EQ_U64(s2, s1 + MiB);
    CHECK_OK(hbm_alloc(a, 1, NULL, &s3)); /* the last 512 bytes of the 2 MiB segment */
    CHECK_EQ_U64(s3, s1 + 2 * MiB - 512);
    CHECK_EQ_U64(l.n, 1);
    CHECK_OK(hbm_alloc(a, 2 * MiB, NULL, &l1)); /* large: 18 MiB remainder > 1 MiB splits */
    CHECK_OK(hbm_alloc(a, 17 * MiB, NULL, &l2)); /* 1 MiB rest: not split, l2 holds 18 MiB */
    CHECK_EQ_U64(l2, l1 + 2 * MiB);
    CHECK_EQ_U64(l.n, 2);
    CHECK_EQ_U64(in_use(a), 2 * MiB + 2 * MiB + 18 * MiB);
    /* coalescing: free both halves, the 20 MiB block is whole again and serves 20 MiB */
    CHECK_OK(hbm_free(a, l1));
    CHECK_OK(hbm_free(a, l2));
    uint64_t big;
    CHECK_OK(hbm_alloc(a, 20 * MiB, NULL, &big));
    CHECK_EQ_U64(big, l1);
    CHECK_EQ_U64(l.n, 2);
    CHECK_OK(hbm_check(a));
    close_torch(a, d);
}

/* get_free_block: the smallest free block of the stream that fits, lowest address first */
static void test_best_fit(void) {
    hbm_device *d;
    seg_log l;
    uint64_t x[4], p;
    hbm_allocator *a = open_torch(&d, "sim:1GiB", "allocator=torch", &l);
    CHECK(a);
    uint64_t sizes[4] = {16 * MiB, 12 * MiB, 14 * MiB, 12 * MiB};
    for (int i = 0; i < 4; i++) CHECK_OK(hbm_alloc(a, sizes[i], NULL, &x[i]));
    for (int i = 0; i < 4; i++) CHECK_OK(hbm_free(a, x[i]));
    CHECK(x[1] < x[3]); /* the sim device hands out rising addresses */
    CHECK_OK(hbm_alloc(a, 13 * MiB, NULL, &p)); /* 14 MiB block; 1 MiB rest: not split */
    CHECK_EQ_U64(p, x[2]);
    CHECK_EQ_U64(in_use(a), 14 * MiB);
    CHECK_OK(hbm_alloc(a, 11 * MiB, NULL, &p)); /* two 12 MiB blocks: the lower address */
    CHECK_EQ_U64(p, x[1]);
    /* another stream does not see these blocks */
    CHECK_OK(hbm_alloc_stream(a, 11 * MiB, NULL, 7, &p));
    CHECK_EQ_U64(l.n, 5);
    CHECK_EQ_U64(l.size[4], 12 * MiB);
    CHECK_OK(hbm_check(a));
    close_torch(a, d);
}

/* max_split_size: oversize blocks never split; a request under it never takes one; a
 * request at or above it takes one only if less than max_non_split_rounding (20 MiB)
 * smaller */
static void test_oversize(void) {
    hbm_device *d;
    seg_log l;
    uint64_t big, p, q;
    hbm_allocator *a = open_torch(&d, "sim:1GiB", "allocator=torch,max_split_size_mb=20", &l);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, 40 * MiB, NULL, &big));
    CHECK_OK(hbm_free(a, big));
    CHECK_OK(hbm_alloc(a, 30 * MiB, NULL, &p)); /* 40 < 30 + 20: used whole, not split */
    CHECK_EQ_U64(p, big);
    CHECK_EQ_U64(in_use(a), 40 * MiB);
    CHECK_OK(hbm_free(a, p));
    CHECK_OK(hbm_alloc(a, 19 * MiB, NULL, &q)); /* under max_split: a new 20 MiB segment */
    CHECK(q != big);
    CHECK_EQ_U64(l.n, 2);
    CHECK_EQ_U64(l.size[1], 20 * MiB);
    CHECK_OK(hbm_alloc(a, 20 * MiB, NULL, &p)); /* 40 >= 20 + 20: too big; a new segment */
    CHECK(p != big);
    CHECK_EQ_U64(l.n, 3);
    CHECK_OK(hbm_check(a));
    close_torch(a, d);
}

/* malloc's retry path without max_split_size: cudaMalloc fails, every unsplit cached block
 * is freed (release_cached_blocks), the retry succeeds */
static void test_retry_release_all(void) {
    hbm_device *d;
    seg_log l;
    uint64_t x, y, z;
    hbm_allocator *a = open_torch(&d, "sim:64MiB", "allocator=torch", &l);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, 40 * MiB, NULL, &x));
    CHECK_OK(hbm_alloc(a, 20 * MiB, NULL, &y));
    CHECK_OK(hbm_free(a, x));
    CHECK_OK(hbm_alloc(a, 44 * MiB, NULL, &z));
    CHECK_EQ_U64(l.n, 4);
    CHECK(l.kind[2] == HBM_EV_SEGMENT_FREE && l.addr[2] == x && l.size[2] == 40 * MiB);
    CHECK(l.kind[3] == HBM_EV_SEGMENT_ALLOC && l.size[3] == 44 * MiB);
    /* nothing left to free: out of memory, in PyTorch's words */
    uint64_t w;
    CHECK_STATUS(hbm_alloc(a, 10 * MiB, NULL, &w), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "CUDA out of memory. Tried to allocate 10.00 MiB. GPU 0 has a total capacity of "
                                     "64.00 MiB of which 0 bytes is free.");
    CHECK_CONTAINS(hbm_last_error(), "Of the allocated memory 64.00 MiB is allocated by PyTorch, and 0 bytes is reserved");
    CHECK_OK(hbm_check(a));
    close_torch(a, d);
}

/* with max_split_size: release_available_cached_blocks frees oversize cached blocks from
 * the largest (same size: the highest address) down until the request is covered */
static void test_retry_oversize(void) {
    hbm_device *d;
    seg_log l;
    uint64_t x, y, z, w;
    hbm_allocator *a = open_torch(&d, "sim:100MiB", "allocator=torch,max_split_size_mb=20", &l);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, 30 * MiB, NULL, &x));
    CHECK_OK(hbm_alloc(a, 30 * MiB, NULL, &y));
    CHECK_OK(hbm_alloc(a, 24 * MiB, NULL, &z));
    CHECK_OK(hbm_free(a, x));
    CHECK_OK(hbm_free(a, y));
    CHECK_OK(hbm_alloc(a, 40 * MiB, NULL, &w));
    CHECK_EQ_U64(l.n, 6);
    CHECK(l.kind[3] == HBM_EV_SEGMENT_FREE && l.addr[3] == y);
    CHECK(l.kind[4] == HBM_EV_SEGMENT_FREE && l.addr[4] == x);
    CHECK(l.kind[5] == HBM_EV_SEGMENT_ALLOC && l.size[5] == 40 * MiB);
    CHECK_OK(hbm_check(a));
    close_torch(a, d);
    /* one oversize block large enough: only that one goes */
    a = open_torch(&d, "sim:100MiB", "allocator=torch,max_split_size_mb=20", &l);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, 46 * MiB, NULL, &x));
    CHECK_OK(hbm_alloc(a, 50 * MiB, NULL, &y));
    CHECK_OK(hbm_free(a, x));
    CHECK_OK(hbm_free(a, y));
    CHECK_OK(hbm_alloc(a, 22 * MiB, NULL, &z)); /* 46 >= 22 + 20: not used; 96 + 22 > 100 */
    CHECK_EQ_U64(l.n, 4);
    CHECK(l.kind[2] == HBM_EV_SEGMENT_FREE && l.addr[2] == x); /* the smallest >= max_split */
    CHECK(l.kind[3] == HBM_EV_SEGMENT_ALLOC && l.size[3] == 22 * MiB);
    close_torch(a, d);
}

/* garbage_collection_threshold with a memory fraction: above threshold x allowed, unsplit
 * large cached blocks at least as old as the average are freed before cudaMalloc */
static void test_garbage_collection(void) {
    hbm_device *d;
    seg_log l;
    uint64_t x, y, z, w;
    hbm_allocator *a = open_torch(&d, "sim:200MiB", "allocator=torch,fraction=0.5,garbage_collection_threshold=0.5", &l);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, 30 * MiB, NULL, &x));
    CHECK_OK(hbm_alloc(a, 30 * MiB, NULL, &y));
    CHECK_OK(hbm_free(a, x));
    CHECK_OK(hbm_alloc(a, 32 * MiB, NULL, &z)); /* 60 MiB reserved > 50: x's segment goes */
    CHECK_EQ_U64(l.n, 4);
    CHECK(l.kind[2] == HBM_EV_SEGMENT_FREE && l.addr[2] == x);
    CHECK_EQ_U64(reserved(a), 62 * MiB);
    /* the fraction is a hard limit: 62 + 40 > 100 */
    CHECK_STATUS(hbm_alloc(a, 40 * MiB, NULL, &w), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "100.00 MiB allowed; ");
    close_torch(a, d);
    /* no threshold: the cached block stays */
    a = open_torch(&d, "sim:200MiB", "allocator=torch,fraction=0.5", &l);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, 30 * MiB, NULL, &x));
    CHECK_OK(hbm_alloc(a, 30 * MiB, NULL, &y));
    CHECK_OK(hbm_free(a, x));
    CHECK_OK(hbm_alloc(a, 32 * MiB, NULL, &z));
    CHECK_EQ_U64(l.n, 3);
    CHECK_EQ_U64(reserved(a), 92 * MiB);
    close_torch(a, d);
}

/* expandable_segments: one virtual range per (stream, pool); pages of 2 MiB (small) and
 * 20 MiB (large) mapped at the lowest address with room; emptying the cache unmaps free
 * pages, the large pool first */
static void test_expandable(void) {
    hbm_device *d;
    seg_log l;
    uint64_t s1, s2, b1, b2, o;
    hbm_allocator *a = open_torch(&d, "sim:1GiB", "allocator=torch,expandable_segments=true", &l);
    CHECK(a);
    CHECK_OK(hbm_alloc(a, MiB, NULL, &s1));
    CHECK_OK(hbm_alloc(a, MiB, NULL, &s2));
    CHECK_EQ_U64(s2, s1 + MiB);
    CHECK_EQ_U64(l.n, 1);
    CHECK(l.kind[0] == HBM_EV_SEGMENT_MAP && l.addr[0] == s1 && l.size[0] == 2 * MiB);
    CHECK_OK(hbm_alloc(a, 3 * MiB, NULL, &b1));
    CHECK_EQ_U64(l.n, 2);
    CHECK(l.kind[1] == HBM_EV_SEGMENT_MAP && l.addr[1] == b1 && l.size[1] == 20 * MiB);
    CHECK_OK(hbm_alloc(a, 30 * MiB, NULL, &b2)); /* 17 MiB free + one more page, contiguous */
    CHECK_EQ_U64(b2, b1 + 3 * MiB);
    CHECK_EQ_U64(l.n, 3);
    CHECK(l.kind[2] == HBM_EV_SEGMENT_MAP && l.addr[2] == b1 + 20 * MiB && l.size[2] == 20 * MiB);
    CHECK_EQ_U64(reserved(a), 42 * MiB);
    CHECK_EQ_U64(in_use(a), 2 * MiB + 33 * MiB); /* expandable: any remainder >= 512 splits */
    CHECK_OK(hbm_check(a));
    /* a free hole is used before new pages */
    CHECK_OK(hbm_free(a, b1));
    CHECK_OK(hbm_alloc(a, 2 * MiB, NULL, &o));
    CHECK_EQ_U64(o, b1);
    CHECK_OK(hbm_free(a, o));
    CHECK_OK(hbm_free(a, b2));
    CHECK_OK(hbm_free(a, s1));
    CHECK_OK(hbm_allocator_trim(a)); /* empty_cache: s2's page is partly in use */
    CHECK_EQ_U64(l.n, 4);
    CHECK(l.kind[3] == HBM_EV_SEGMENT_UNMAP && l.addr[3] == b1 && l.size[3] == 40 * MiB);
    CHECK_EQ_U64(reserved(a), 2 * MiB);
    CHECK_OK(hbm_free(a, s2));
    CHECK_OK(hbm_allocator_trim(a));
    CHECK_EQ_U64(l.n, 5);
    CHECK(l.kind[4] == HBM_EV_SEGMENT_UNMAP && l.addr[4] == s1 && l.size[4] == 2 * MiB);
    CHECK_EQ_U64(reserved(a), 0);
    CHECK_OK(hbm_check(a));
    hbm_device_counters c;
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 0);
    close_torch(a, d);
}

/* expandable segments on OOM: free pages elsewhere are unmapped and mapped where needed */
static void test_expandable_oom(void) {
    hbm_device *d;
    seg_log l;
    uint64_t x[3], y;
    hbm_allocator *a = open_torch(&d, "sim:60MiB", "allocator=torch,expandable_segments=true", &l);
    CHECK(a);
    for (int i = 0; i < 3; i++) CHECK_OK(hbm_alloc(a, 20 * MiB, NULL, &x[i]));
    CHECK_OK(hbm_free(a, x[0]));
    CHECK_OK(hbm_free(a, x[2]));
    /* 40 MiB free but not contiguous: 2 pages of 20 MiB unmapped, 2 mapped after x[1] */
    CHECK_OK(hbm_alloc(a, 40 * MiB, NULL, &y));
    CHECK_EQ_U64(reserved(a), 60 * MiB);
    int unmaps = 0;
    for (int i = 0; i < l.n; i++) unmaps += l.kind[i] == HBM_EV_SEGMENT_UNMAP;
    CHECK_EQ_U64(unmaps, 2);
    CHECK_EQ_U64(y, x[2]); /* the lowest address with room: after x[1] */
    CHECK_OK(hbm_check(a));
    close_torch(a, d);
}

/* PYTORCH_CUDA_ALLOC_CONF in PyTorch's syntax and validation */
static void test_config(void) {
    hbm_config c;
    hbm_config_default(&c);
    CHECK_OK(hbm_config_apply_torch(&c, "expandable_segments:True,max_split_size_mb:128,"
                                        "roundup_power2_divisions:[256:1,512:2,>:8],garbage_collection_threshold:0.6",
                                    NULL));
    CHECK(c.expandable_segments);
    CHECK_EQ_U64(c.max_split_size, 128 * MiB);
    CHECK_EQ_U64(c.roundup_power2_divisions[0], 1);
    CHECK_EQ_U64(c.roundup_power2_divisions[8], 1);
    CHECK_EQ_U64(c.roundup_power2_divisions[9], 8); /* ">" from the last named, included */
    CHECK_EQ_U64(c.roundup_power2_divisions[15], 8);
    CHECK(c.garbage_collection_threshold == 0.6);
    CHECK_STR(c.source[HBM_OPT_max_split_size_mb], "PYTORCH_CUDA_ALLOC_CONF");
    CHECK(c.allocator == HBM_ALLOCATOR_BFC); /* no backend: the settings only */
    CHECK_OK(hbm_config_apply_torch(&c, " backend : cudaMallocAsync ", NULL));
    CHECK(c.allocator == HBM_ALLOCATOR_CUDA_ASYNC);
    /* one entry per interval: 16 entries, 65 tokens */
    CHECK_OK(hbm_config_apply_torch(&c, "roundup_power2_divisions:[1:1,2:2,4:4,8:8,16:16,32:1,64:2,128:4,256:8,512:16,"
                                        "1024:1,2048:2,4096:4,8192:8,16384:16,32768:0]", NULL));
    CHECK_EQ_U64(c.roundup_power2_divisions[4], 16);
    CHECK_EQ_U64(c.roundup_power2_divisions[14], 16);
    CHECK_EQ_U64(c.roundup_power2_divisions[15], 0);
    CHECK_OK(hbm_config_apply_torch(&c, "backend:native,roundup_power2_divisions:4", NULL));
    CHECK(c.allocator == HBM_ALLOCATOR_TORCH);
    CHECK_EQ_U64(c.roundup_power2_divisions[3], 4);
    hbm_config before = c;
    CHECK_STATUS(hbm_config_apply_torch(&c, "max_split_size_mb:19", NULL), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "max_split_size_mb:19 is not valid: PyTorch accepts an integer >= 20");
    CHECK_STATUS(hbm_config_apply_torch(&c, "expandable_segments:true", NULL), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "PyTorch accepts True or False");
    CHECK_STATUS(hbm_config_apply_torch(&c, "garbage_collection_threshold:1.0", NULL), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "(0.0, 1.0)");
    CHECK_STATUS(hbm_config_apply_torch(&c, "roundup_power2_divisions:3", NULL), HBM_ERR_CONFIG);
    CHECK_STATUS(hbm_config_apply_torch(&c, "roundup_power2_divisions:[100:2]", NULL), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "power of 2");
    CHECK_STATUS(hbm_config_apply_torch(&c, "backend:magic", NULL), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "native or cudaMallocAsync");
    CHECK_STATUS(hbm_config_apply_torch(&c, "max_split:100", NULL), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "unrecognized option 'max_split'");
    CHECK_STATUS(hbm_config_apply_torch(&c, "expandable_segments:False,max_split_size_mb:5", NULL), HBM_ERR_CONFIG);
    CHECK(c.expandable_segments == before.expandable_segments); /* all or nothing */
    /* the same keys in hbm config strings, and their printing */
    hbm_config h;
    CHECK_OK(hbm_config_resolve("allocator=torch,expandable_segments=true,max_split_size_mb=64,"
                                "roundup_power2_divisions=[1:2,>:8],garbage_collection_threshold=0.7", &h));
    CHECK(h.allocator == HBM_ALLOCATOR_TORCH && h.expandable_segments && h.max_split_size == 64 * MiB);
    CHECK_EQ_U64(h.roundup_power2_divisions[0], 8); /* ">" overwrote the only named interval */
    char buf[4096] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    CHECK(f);
    hbm_config_write(&h, f, 0);
    fclose(f);
    /* the columns line up for every key (issue 29 item 7): each line's value and source
     * start where the header's do */
    {
        const char *hv = strstr(buf, "value"), *hs = strstr(buf, "source");
        CHECK(hv && hs);
        size_t cv = (size_t)(hv - buf), cs = (size_t)(hs - buf), lines = 0;
        for (const char *l = strchr(buf, '\n'); l && l[1]; l = strchr(l + 1, '\n'), lines++) {
            const char *e = strchr(l + 1, '\n');
            size_t len = e ? (size_t)(e - l - 1) : strlen(l + 1);
            CHECK(len > cs && l[cv] == ' ' && l[cs] == ' ' && l[cs + 1] != ' ');
        }
        CHECK(lines >= 16);
    }
    CHECK(strstr(buf, "\nmax_split_size_mb ") && strstr(strstr(buf, "\nmax_split_size_mb "), " 64 "));
    CHECK(strstr(buf, "\nroundup_power2_divisions ") && strstr(strstr(buf, "\nroundup_power2_divisions "), " 8 "));
    CHECK_STATUS(hbm_config_resolve("allocator=torch,max_split_size_mb=10", &h), HBM_ERR_CONFIG);
    /* the first interval named also sets those below it */
    CHECK_OK(hbm_config_resolve("roundup_power2_divisions=[2:4,>:1]", &h));
    CHECK_EQ_U64(h.roundup_power2_divisions[0], 4);
    CHECK_EQ_U64(h.roundup_power2_divisions[1], 1);
}

static const char *torch_policy;

static const char *fake_env(void *user, const char *name) {
    if (!strcmp(name, "HBM_ALLOCATOR")) return torch_policy;
    return !strcmp(name, "PYTORCH_CUDA_ALLOC_CONF") ? (const char *)user : NULL;
}

static void test_config_env(void) {
    hbm_config c;
    torch_policy = NULL;
    CHECK_OK(hbm_config_from_env_fn(&c, fake_env, "backend:native,expandable_segments:True"));
    CHECK(c.allocator == HBM_ALLOCATOR_TORCH && c.expandable_segments);
    CHECK_STR(c.source[HBM_OPT_allocator], "PYTORCH_CUDA_ALLOC_CONF");
    /* a bad value is an error for the torch policy ... */
    torch_policy = "torch";
    CHECK_STATUS(hbm_config_from_env_fn(&c, fake_env, "expandable_segments:Yes"), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "PYTORCH_CUDA_ALLOC_CONF: expandable_segments:Yes is not valid");
    /* ... and none of a JAX program's business */
    torch_policy = NULL;
    CHECK_OK(hbm_config_from_env_fn(&c, fake_env, "expandable_segments:Yes"));
    CHECK(c.allocator == HBM_ALLOCATOR_BFC && !c.expandable_segments);
}

/* Random allocs and frees on two streams under several settings: the state checks out
 * after every call, live blocks never overlap, and the stats add up. */
typedef struct walk_sum {
    uint64_t live, regions, last_end;
    int overlap;
} walk_sum;

static int sum_blocks(void *user, const hbm_block *b) {
    walk_sum *w = user;
    if (b->kind == HBM_BLOCK_REGION) {
        w->regions += b->size;
        if (b->addr < w->last_end) w->overlap = 1;
        w->last_end = b->addr + b->size;
    } else if (b->kind == HBM_BLOCK_LIVE) {
        w->live += b->size;
    }
    return 0;
}

static void test_random(void) {
    static const char *const configs[] = {
        "allocator=torch",
        "allocator=torch,max_split_size_mb=40",
        "allocator=torch,expandable_segments=true",
        "allocator=torch,roundup_power2_divisions=[1:2,64:4,>:8],max_split_size_mb=24",
        "allocator=torch,fraction=0.9,garbage_collection_threshold=0.5",
    };
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        hbm_device *d;
        hbm_allocator *a = open_torch(&d, "sim:1GiB", configs[c], NULL);
        CHECK(a);
        test_rng r = {0x1234567ull + c};
        uint64_t live[256], stream[256];
        size_t n = 0;
        for (int step = 0; step < 4000; step++) {
            if (n && (n == 256 || test_below(&r, 100) < 45)) {
                size_t k = (size_t)test_below(&r, n);
                CHECK_OK(hbm_free_stream(a, live[k], stream[k]));
                live[k] = live[--n], stream[k] = stream[n];
            } else {
                uint64_t size;
                switch (test_below(&r, 4)) {
                case 0: size = 1 + test_below(&r, 4096); break;
                case 1: size = 1 + test_below(&r, MiB); break;
                case 2: size = MiB + test_below(&r, 12 * MiB); break;
                default: size = 1 + test_below(&r, 64 * MiB); break;
                }
                uint64_t st = test_below(&r, 2), p;
                hbm_status s = hbm_alloc_stream(a, size, NULL, st, &p);
                CHECK(s == HBM_OK || s == HBM_ERR_OOM);
                if (!s) live[n] = p, stream[n++] = st;
            }
            if (step % 97 == 0 && test_below(&r, 4) == 0) CHECK_OK(hbm_allocator_trim(a));
            CHECK_OK(hbm_check(a));
            if (step % 50 == 0) {
                walk_sum w = {0};
                hbm_stats sts;
                CHECK_OK(hbm_allocator_walk(a, sum_blocks, &w));
                CHECK_OK(hbm_stats_get(a, &sts));
                CHECK(!w.overlap);
                CHECK_EQ_U64(w.live, sts.bytes_in_use);
                CHECK_EQ_U64(w.regions, sts.bytes_reserved);
                CHECK(sts.bytes_reserved <= (1ull << 30));
            }
        }
        for (; n; n--) CHECK_OK(hbm_free_stream(a, live[n - 1], stream[n - 1]));
        CHECK_OK(hbm_allocator_trim(a));
        CHECK_EQ_U64(reserved(a), 0);
        CHECK_OK(hbm_check(a));
        close_torch(a, d);
    }
}

/* Host metadata faults, SQLite style: the Nth host allocation fails, for N = 1, 2, ...
 * until a run completes. Every failure is HBM_ERR_NOMEM, the state checks out after it,
 * and closing gives all device memory back. */
static int fault_run(const char *config, uint64_t *nomem, uint64_t *ooms) {
    hbm_device *d;
    hbm_allocator *a;
    hbm_status s = hbm_device_open("sim:160MiB", &d);
    if (s) return s == HBM_ERR_NOMEM ? (++*nomem, 1) : 0;
    if ((s = hbm_allocator_open(d, config, &a))) {
        hbm_device_close(d);
        return s == HBM_ERR_NOMEM ? (++*nomem, 1) : 0;
    }
    test_rng r = {99};
    uint64_t live[64], stream[64];
    size_t n = 0;
    int ok = 1;
    for (int step = 0; step < 120 && ok; step++) {
        if (n && (n == 64 || test_below(&r, 100) < 45)) {
            size_t k = (size_t)test_below(&r, n);
            ok = hbm_free_stream(a, live[k], stream[k]) == HBM_OK;
            live[k] = live[--n], stream[k] = stream[n];
        } else {
            uint64_t size = test_below(&r, 2) ? 1 + test_below(&r, 2 * MiB) : 1 + test_below(&r, 40 * MiB), p;
            uint64_t st = test_below(&r, 3) == 0;
            s = hbm_alloc_stream(a, size, NULL, st, &p);
            if (s == HBM_ERR_NOMEM) ++*nomem;
            else if (!s) live[n] = p, stream[n++] = st;
            else if (s == HBM_ERR_OOM) ++*ooms; /* the OOM record may have taken the failure */
            else ok = 0;
        }
        if (step % 40 == 39 && (s = hbm_allocator_trim(a))) {
            if (s == HBM_ERR_NOMEM) ++*nomem;
            else ok = 0;
        }
        s = hbm_check(a);
        if (s == HBM_ERR_NOMEM) ++*nomem;
        else if (s) fprintf(stderr, "check: %s\n", hbm_last_error()), ok = 0;
    }
    hbm_allocator_close(a);
    hbm_device_counters c;
    if (hbm_device_counters_get(d, &c) || c.bytes_in_use) ok = 0;
    hbm_device_close(d);
    return ok;
}

static void test_host_faults(void) {
    static const char *const configs[] = {"allocator=torch,max_split_size_mb=24",
                                          "allocator=torch,expandable_segments=true"};
    for (size_t ci = 0; ci < 2; ci++) {
        uint64_t fired = 0, n;
        for (n = 1; n < 20000; n++) {
            uint64_t nomem = 0, ooms = 0;
            hbm_debug_fail_host_alloc(n);
            int ok = fault_run(configs[ci], &nomem, &ooms);
            uint64_t made = hbm_debug_fail_host_alloc(0);
            CHECK(ok);
            CHECK(made < n || nomem || ooms); /* an injected failure never vanishes (an OOM record may take it) */
            fired += nomem > 0;
            if (made < n) break;
        }
        CHECK(fired > 5);
    }
}

/* a segment from before a history: live blocks where they were, the gaps cached */
static void test_seed(void) {
    hbm_device *d;
    seg_log l;
    hbm_allocator *a = open_torch(&d, "sim:1GiB", "allocator=torch", &l);
    CHECK(a);
    const uint64_t S = 0x7e0000000000ull;
    hbmi_torch_seed_block live[2] = {{S + 2 * MiB, 4 * MiB, 4 * MiB - 100}, {S + 12 * MiB, 2 * MiB, 2 * MiB}};
    CHECK_OK(hbmi_torch_seed_segment(a->self, S, 20 * MiB, 0, 0, live, 2));
    CHECK_OK(hbm_check(a));
    CHECK_EQ_U64(in_use(a), 6 * MiB);
    CHECK_EQ_U64(reserved(a), 20 * MiB);
    CHECK_EQ_U64(l.n, 0);
    uint64_t p;
    CHECK_OK(hbm_alloc(a, 6 * MiB, NULL, &p)); /* free: 2 MiB at S, 6 at S+6, 6 at S+14: the lower 6 */
    CHECK_EQ_U64(p, S + 6 * MiB);
    CHECK_OK(hbm_free(a, S + 2 * MiB));
    CHECK_OK(hbm_check(a));
    CHECK_OK(hbm_alloc(a, 6 * MiB, NULL, &p)); /* S .. S+6 is free again and the lowest */
    CHECK_EQ_U64(p, S);
    CHECK_STATUS(hbmi_torch_seed_segment(a->self, S + 40 * MiB, 2 * MiB, 0, 1, live, 1), HBM_ERR_INVALID);
    CHECK_EQ_U64(l.n, 0);
    CHECK_OK(hbm_check(a));
    close_torch(a, d);
}

int main(void) {
    RUN(test_seed);
    RUN(test_host_faults);
    RUN(test_rounding);
    RUN(test_roundup_power2);
    RUN(test_pools_and_segments);
    RUN(test_splits);
    RUN(test_best_fit);
    RUN(test_oversize);
    RUN(test_retry_release_all);
    RUN(test_retry_oversize);
    RUN(test_garbage_collection);
    RUN(test_expandable);
    RUN(test_expandable_oom);
    RUN(test_config);
    RUN(test_config_env);
    RUN(test_random);
    return test_done();
}
