/* async.c - "cuda_async": CUDA's stream-ordered memory pool, as TF_GPU_ALLOCATOR=
 * cuda_malloc_async and XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async use it. On a cuda: device
 * the real pool does the work (async_cuda.c); on sim: and host: devices this file is its
 * model, so that replay can ask "would cuda_async have avoided this OOM?" without a GPU.
 *
 * The model (the driver's own placement is not documented; this is the part that is):
 *  - sizes round up to 512 bytes; the pool grows from the device in segments of the
 *    request rounded up to 2 MiB, and never holds more than the pool size (bytes_limit);
 *    the release threshold is the pool size, so synchronizations return nothing;
 *  - inside segments: best fit (smallest block, then lowest address), split, coalesce;
 *  - stream order: a block freed on stream S is "pending on S": allocations on S may
 *    reuse it at once, other streams only after hbm_allocator_sync(S) (or a sync of every
 *    stream) made it "ready". A freed block coalesces with ready neighbours and with
 *    blocks pending on the same stream (the result is pending on S); sync merges ready
 *    neighbours;
 *  - when nothing fits: synchronize the allocating stream and retry, as XLA's allocator
 *    does, then return wholly free ready segments to the device and retry growing;
 *  - async_prealloc=N (TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC) takes a first segment of N
 *    bytes (-1: the pool size) at open, free and ready.
 * Metadata: one record per block and per segment, never per byte or per page. Finding a
 * block is a scan of the free blocks (O(free blocks)). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "device/cuda_driver.h"
#include "hbm/size.h"

#define ASYNC_ROUND 512u
#define ASYNC_SEGMENT (2u << 20)

enum { B_UNUSED, B_LIVE, B_READY, B_PENDING };

typedef struct ablk {
    uint64_t addr, size, requested, seq, stream;
    uint32_t tag_id, seg;
    uint32_t prev, next; /* address neighbours in the segment, index+1; 0 = none */
    uint32_t fpos;       /* position in the free array (free blocks) */
    uint8_t state;
} ablk;

typedef struct aseg {
    uint64_t addr, size;
    uint32_t first; /* index+1 of the lowest block; 0 = slot unused */
} aseg;

typedef struct apool {
    hbm_device *dev;
    ablk *b;             /* slots of blocks; unused ones chained through next */
    hbmi_pool blocks;
    aseg *segs;
    size_t nsegs, capsegs;
    uint32_t *freev; /* indices of free blocks */
    size_t nfree, capfree;
    hbmi_map live; /* addr -> block index */
    hbm_stats st;
} apool;

static uint64_t async_rounded(void *self, uint64_t size) {
    (void)self;
    return size > UINT64_MAX - ASYNC_ROUND ? size : hbmi_align_up(size, ASYNC_ROUND);
}

/* Room for one more block, free entry and segment, so that nothing below can fail. */
static hbm_status reserve_meta(apool *p) {
    hbm_status s = HBM_OK;
    s = hbmi_pool_reserve(&p->blocks, (void **)&p->b, sizeof *p->b, 2); /* grow + split: two blocks */
    if (!s) s = hbmi_grow((void **)&p->freev, &p->capfree, p->nfree + 2, sizeof *p->freev);
    if (!s) s = hbmi_grow((void **)&p->segs, &p->capsegs, p->nsegs + 1, sizeof *p->segs);
    if (!s) s = hbmi_map_reserve(&p->live, p->live.count + 1);
    return s;
}

static uint32_t new_block(apool *p) {
    uint32_t i = hbmi_pool_take(&p->blocks, p->b, sizeof *p->b, offsetof(ablk, next));
    memset(&p->b[i], 0, sizeof p->b[i]);
    return i;
}

static void drop_block(apool *p, uint32_t i) {
    p->b[i].state = B_UNUSED;
    hbmi_pool_give(&p->blocks, p->b, sizeof *p->b, offsetof(ablk, next), i);
}

static void free_add(apool *p, uint32_t i) {
    p->b[i].fpos = (uint32_t)p->nfree;
    p->freev[p->nfree++] = i;
}

static void free_del(apool *p, uint32_t i) {
    uint32_t pos = p->b[i].fpos, last = p->freev[--p->nfree];
    p->freev[pos] = last;
    p->b[last].fpos = pos;
}

/* Merge free block j (the right neighbour of i) into i. */
static void absorb_right(apool *p, uint32_t i, uint32_t j) {
    ablk *a = &p->b[i], *c = &p->b[j];
    a->size += c->size;
    a->next = c->next;
    if (c->next) p->b[c->next - 1].prev = i + 1;
    free_del(p, j);
    drop_block(p, j);
}

/* Coalesce free block i with its neighbours where the rules allow; returns the result. */
static uint32_t coalesce(apool *p, uint32_t i) {
    ablk *x = &p->b[i];
    for (;;) { /* left */
        if (!x->prev) break;
        uint32_t l = x->prev - 1;
        ablk *y = &p->b[l];
        int ok = x->state == B_READY ? y->state == B_READY
                                     : (y->state == B_READY || (y->state == B_PENDING && y->stream == x->stream));
        if (!ok) break;
        if (x->state == B_PENDING) y->state = B_PENDING, y->stream = x->stream;
        absorb_right(p, l, i);
        i = l;
        x = &p->b[i];
    }
    for (;;) { /* right */
        if (!x->next) break;
        uint32_t r = x->next - 1;
        ablk *y = &p->b[r];
        int ok = x->state == B_READY ? y->state == B_READY
                                     : (y->state == B_READY || (y->state == B_PENDING && y->stream == x->stream));
        if (!ok) break;
        absorb_right(p, i, r);
        x = &p->b[i];
    }
    return i;
}

static void update_largest_free(apool *p) {
    uint64_t m = 0;
    for (size_t k = 0; k < p->nfree; k++)
        if (p->b[p->freev[k]].size > m) m = p->b[p->freev[k]].size;
    p->st.largest_free_block_bytes = m;
}

static int find_fit(apool *p, uint64_t need, uint64_t stream, uint32_t *out) {
    int found = 0;
    uint32_t best = 0;
    for (size_t k = 0; k < p->nfree; k++) {
        uint32_t i = p->freev[k];
        ablk *b = &p->b[i];
        if (b->size < need || (b->state == B_PENDING && b->stream != stream)) continue;
        if (!found || b->size < p->b[best].size || (b->size == p->b[best].size && b->addr < p->b[best].addr))
            best = i, found = 1;
    }
    *out = best;
    return found;
}

/* A new segment of at least need bytes as one free ready block. */
static hbm_status grow(apool *p, uint64_t need, uint32_t *out) {
    uint64_t seg = need > UINT64_MAX - ASYNC_SEGMENT ? need : hbmi_align_up(need, ASYNC_SEGMENT);
    uint64_t room = p->st.bytes_limit - p->st.bytes_reserved; /* reserved <= limit always */
    if (seg > room && need <= room) seg = room / ASYNC_ROUND * ASYNC_ROUND; /* the last, partial segment */
    if (seg > room) {
        char a[32], b[32], c[32];
        if (hbmi_oom_quiet()) return HBM_ERR_OOM; /* a replay's later OOMs: no message is read */
        return hbmi_error(HBM_ERR_OOM, "cuda_async: a %s segment would take the pool past its size %s (%s held)",
                          hbm_size_human(seg, a), hbm_size_human(p->st.bytes_limit, b),
                          hbm_size_human(p->st.bytes_reserved, c));
    }
    uint64_t addr;
    hbm_status s = hbm_device_alloc(p->dev, seg, &addr);
    if (s) return s;
    size_t si = 0;
    while (si < p->nsegs && p->segs[si].first) si++;
    if (si == p->nsegs) p->nsegs++;
    uint32_t i = new_block(p);
    p->b[i] = (ablk){.addr = addr, .size = seg, .seg = (uint32_t)si, .state = B_READY};
    free_add(p, i);
    p->segs[si] = (aseg){addr, seg, i + 1};
    p->st.device_allocs++;
    p->st.bytes_reserved += seg;
    p->st.pool_bytes += seg;
    p->st.num_regions++;
    hbmi_stats_update_peaks(&p->st);
    *out = i;
    return HBM_OK;
}

static void sync_streams(apool *p, uint64_t stream) {
    for (size_t k = 0; k < p->nfree; k++) {
        ablk *b = &p->b[p->freev[k]];
        if (b->state == B_PENDING && (stream == HBM_STREAM_ALL || b->stream == stream)) b->state = B_READY;
    }
    for (size_t k = 0; k < p->nfree; k++) { /* merge ready neighbours; coalesce may shrink the array */
        uint32_t i = p->freev[k];
        if (p->b[i].state != B_READY) continue;
        size_t before = p->nfree;
        coalesce(p, i);
        if (p->nfree != before) k = (size_t)-1; /* positions moved: rescan (rare, bounded) */
    }
}

/* Return wholly free ready segments to the device. */
static void release_free_segments(apool *p) {
    for (size_t si = 0; si < p->nsegs; si++) {
        aseg *g = &p->segs[si];
        if (!g->first) continue;
        uint32_t i = g->first - 1;
        ablk *b = &p->b[i];
        if (b->state != B_READY || b->size != g->size) continue;
        if (hbm_device_free(p->dev, g->addr)) continue;
        free_del(p, i);
        drop_block(p, i);
        p->st.device_frees++;
        p->st.bytes_reserved -= g->size;
        p->st.pool_bytes -= g->size;
        p->st.num_regions--;
        g->first = 0;
    }
}

static hbm_status async_alloc_stream(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t stream,
                                     uint64_t *addr_out) {
    apool *p = self;
    uint64_t need = async_rounded(p, size);
    if (need > p->st.bytes_limit || p->st.bytes_in_use > p->st.bytes_limit - need) {
        p->st.num_ooms++;
        char a[32], b[32], c[32];
        if (hbmi_oom_quiet()) return HBM_ERR_OOM;
        return hbmi_error(HBM_ERR_OOM, "cuda_async: %s more would pass the pool size %s (%s in use)",
                          hbm_size_human(need, a), hbm_size_human(p->st.bytes_limit, b),
                          hbm_size_human(p->st.bytes_in_use, c));
    }
    hbm_status s = reserve_meta(p);
    if (s) return s;
    uint32_t i;
    if (!find_fit(p, need, stream, &i)) {
        s = grow(p, need, &i);
        if (s == HBM_ERR_OOM) {
            sync_streams(p, stream); /* XLA: synchronize the stream and retry */
            if (find_fit(p, need, stream, &i)) s = HBM_OK;
        }
        if (s == HBM_ERR_OOM) {
            release_free_segments(p);
            s = grow(p, need, &i);
        }
        if (s) {
            if (s == HBM_ERR_OOM) p->st.num_ooms++;
            update_largest_free(p);
            return s;
        }
    }
    ablk *b = &p->b[i];
    free_del(p, i);
    if (b->size - need >= ASYNC_ROUND) { /* split: the rest keeps the block's state */
        uint32_t r = new_block(p);
        b = &p->b[i];
        p->b[r] = (ablk){.addr = b->addr + need, .size = b->size - need, .stream = b->stream, .seg = b->seg,
                         .prev = i + 1, .next = b->next, .state = b->state};
        if (b->next) p->b[b->next - 1].prev = r + 1;
        b->next = r + 1;
        b->size = need;
        free_add(p, r);
    }
    p->st.num_allocs++;
    b->state = B_LIVE;
    b->requested = size;
    b->seq = p->st.num_allocs;
    b->tag_id = tag_id;
    b->stream = stream;
    hbmi_map_put(&p->live, b->addr, i);
    p->st.bytes_in_use += b->size;
    if (b->size > p->st.largest_alloc_size) p->st.largest_alloc_size = b->size;
    hbmi_stats_update_peaks(&p->st);
    update_largest_free(p);
    *addr_out = b->addr;
    (void)tag;
    return HBM_OK;
}

static hbm_status async_alloc(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t *addr_out) {
    return async_alloc_stream(self, size, tag, tag_id, HBM_STREAM_DEFAULT, addr_out);
}

static hbm_status async_free_stream(void *self, uint64_t addr, uint64_t stream) {
    apool *p = self;
    uint64_t i;
    if (!hbmi_map_get(&p->live, addr, &i))
        return hbmi_error(HBM_ERR_BAD_FREE, "cuda_async: free of 0x%" PRIx64 ", which is not a live allocation", addr);
    if (p->nfree + 1 > p->capfree) { /* room in the free array (cannot be short: one entry per block) */
        hbm_status s = hbmi_grow((void **)&p->freev, &p->capfree, p->nfree + 1, sizeof *p->freev);
        if (s) return s;
    }
    hbmi_map_del(&p->live, addr, NULL);
    ablk *b = &p->b[i];
    p->st.num_frees++;
    p->st.bytes_in_use -= b->size;
    b->state = B_PENDING;
    b->stream = stream;
    b->tag_id = 0;
    free_add(p, (uint32_t)i);
    coalesce(p, (uint32_t)i);
    update_largest_free(p);
    return HBM_OK;
}

static hbm_status async_free(void *self, uint64_t addr) { return async_free_stream(self, addr, HBM_STREAM_DEFAULT); }

static hbm_status async_sync(void *self, uint64_t stream) {
    apool *p = self;
    sync_streams(p, stream);
    update_largest_free(p);
    return HBM_OK;
}

static hbm_status async_trim(void *self) {
    apool *p = self;
    release_free_segments(p);
    update_largest_free(p);
    return HBM_OK;
}

static void async_stats(void *self, hbm_stats *out) { *out = ((apool *)self)->st; }
static void async_reset_peaks(void *self) { hbmi_stats_reset_peaks(&((apool *)self)->st); }

static int ablk_unused(const void *rec) { return ((const ablk *)rec)->state == B_UNUSED; }

static hbm_status async_check(void *self) {
    apool *p = self;
    uint64_t live = 0, reserved = 0, nlive = 0, nfree = 0, largest = 0;
    hbm_status s = hbmi_pool_check(&p->blocks, p->b, sizeof *p->b, offsetof(ablk, next), ablk_unused, "cuda_async");
    if (s) return s;
    for (size_t si = 0; si < p->nsegs; si++) {
        aseg *g = &p->segs[si];
        if (!g->first) continue;
        reserved += g->size;
        uint64_t at = g->addr;
        uint32_t prev = 0;
        for (uint32_t j = g->first; j; j = p->b[j - 1].next) {
            ablk *b = &p->b[j - 1];
            if (b->addr != at || b->prev != prev || b->seg != si || b->state == B_UNUSED || !b->size)
                return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: segment 0x%" PRIx64 ": block at 0x%" PRIx64
                                  " breaks the tiling (expected 0x%" PRIx64 ")", g->addr, b->addr, at);
            if (b->state == B_LIVE) {
                uint64_t k;
                if (!hbmi_map_get(&p->live, b->addr, &k) || k != j - 1)
                    return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: live block 0x%" PRIx64 " is not indexed", b->addr);
                live += b->size, nlive++;
            } else {
                if (b->fpos >= p->nfree || p->freev[b->fpos] != j - 1)
                    return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: free block 0x%" PRIx64 " is not listed", b->addr);
                nfree++;
                if (b->size > largest) largest = b->size;
                if (prev) {
                    ablk *l = &p->b[prev - 1];
                    if ((l->state == B_READY && b->state == B_READY) ||
                        (l->state == B_PENDING && b->state == B_PENDING && l->stream == b->stream))
                        return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: free neighbours 0x%" PRIx64 " and 0x%" PRIx64
                                          " were not coalesced", l->addr, b->addr);
                }
            }
            at += b->size;
            prev = j;
        }
        if (at != g->addr + g->size)
            return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: segment 0x%" PRIx64 " blocks end at 0x%" PRIx64, g->addr, at);
    }
    if (live != p->st.bytes_in_use || nlive != p->live.count || nfree != p->nfree || reserved != p->st.bytes_reserved ||
        reserved != p->st.pool_bytes || reserved > p->st.bytes_limit || largest != p->st.largest_free_block_bytes)
        return hbmi_error(HBM_ERR_CORRUPT,
                          "cuda_async: counted %" PRIu64 " live bytes in %" PRIu64 " blocks, %" PRIu64 " free, %" PRIu64
                          " reserved; stats say %" PRIu64 ", %zu, %zu, %" PRIu64,
                          live, nlive, nfree, reserved, p->st.bytes_in_use, p->live.count, p->nfree, p->st.bytes_reserved);
    return HBM_OK;
}

static int seg_cmp(const void *a, const void *b) {
    const aseg *x = *(aseg *const *)a, *y = *(aseg *const *)b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static hbm_status async_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    apool *p = self;
    aseg **order = hbmi_malloc((p->nsegs ? p->nsegs : 1) * sizeof *order);
    if (!order) return hbmi_error(HBM_ERR_NOMEM, "out of host memory walking a cuda_async pool");
    size_t n = 0;
    for (size_t si = 0; si < p->nsegs; si++)
        if (p->segs[si].first) order[n++] = &p->segs[si];
    hbmi_qsort(order, n, sizeof *order, seg_cmp);
    int stop = 0;
    for (size_t k = 0; k < n && !stop; k++) {
        hbm_block r = {HBM_BLOCK_REGION, order[k]->addr, order[k]->size, 0, NULL, 0};
        stop = fn(user, &r, 0);
        for (uint32_t j = order[k]->first; j && !stop; j = p->b[j - 1].next) {
            ablk *b = &p->b[j - 1];
            hbm_block x = {b->state == B_LIVE ? HBM_BLOCK_LIVE : HBM_BLOCK_FREE, b->addr, b->size,
                           b->state == B_LIVE ? b->requested : 0, NULL, b->state == B_LIVE ? b->seq : 0};
            stop = fn(user, &x, b->state == B_LIVE ? b->tag_id : 0);
        }
    }
    hbmi_free(order);
    return HBM_OK;
}

static void async_destroy(void *self) {
    apool *p = self;
    for (size_t si = 0; si < p->nsegs; si++)
        if (p->segs[si].first) hbm_device_free(p->dev, p->segs[si].addr);
    hbmi_map_destroy(&p->live);
    hbmi_pool_destroy(&p->blocks, (void **)&p->b);
    hbmi_free(p->segs);
    hbmi_free(p->freev);
    hbmi_free(p);
}

static const hbm_allocator_ops async_ops = {
    .name = "cuda_async", .alloc = async_alloc, .free = async_free, .stats = async_stats,
    .reset_peaks = async_reset_peaks, .check = async_check, .walk = async_walk, .trim = async_trim,
    .rounded_size = async_rounded, .destroy = async_destroy, .alloc_stream = async_alloc_stream,
    .free_stream = async_free_stream, .sync = async_sync};

/* The preallocation TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC asks for, in bytes. */
static hbm_status prealloc_bytes(const hbm_config *cfg, uint64_t bytes_limit, uint64_t *out) {
    uint64_t n = cfg->async_prealloc < 0 ? bytes_limit : (uint64_t)cfg->async_prealloc;
    if (n > bytes_limit) {
        char a[32], b[32];
        return hbmi_error(HBM_ERR_CONFIG, "cuda_async: async_prealloc=%s (from %s) is larger than the pool size %s",
                          hbm_size_human(n, a), cfg->source[HBM_OPT_async_prealloc], hbm_size_human(bytes_limit, b));
    }
    *out = n;
    return HBM_OK;
}

hbm_status hbmi_async_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                             const hbm_allocator_ops **ops, void **self) {
    uint64_t pre = 0;
    hbm_status s = prealloc_bytes(cfg, bytes_limit, &pre);
    if (s) return s;
    if (hbmi_cuda_dev_of(dev)) return hbmi_async_cuda_create(dev, cfg, bytes_limit, ops, self);
    apool *p = hbmi_calloc(1, sizeof *p);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a cuda_async pool");
    p->dev = dev;
    hbmi_map_init(&p->live);
    p->st.bytes_limit = bytes_limit;
    if (pre) {
        uint32_t i;
        s = reserve_meta(p);
        if (!s) s = grow(p, pre, &i);
        if (s) {
            async_destroy(p);
            return hbmi_error_prefix(s, "cuda_async: preallocating (async_prealloc from %s): ",
                                     cfg->source[HBM_OPT_async_prealloc]);
        }
        update_largest_free(p);
    }
    *ops = &async_ops;
    *self = p;
    return HBM_OK;
}
