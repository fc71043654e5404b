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
 * Metadata: one record per block and per segment, never per byte or per page. The free
 * blocks are in trees by (size, address): the ready ones in one, those pending on each
 * stream in one per stream, so finding, taking and returning a block is O(log free
 * blocks); a synchronization touches only the blocks it makes ready, and giving back
 * segments only the wholly free ones (kept in a list). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/oset.h"
#include "device/cuda_driver.h"
#include "hbm/size.h"

#define ASYNC_ROUND 512u
#define ASYNC_SEGMENT (2u << 20)

enum { B_UNUSED, B_LIVE, B_READY, B_PENDING };

typedef struct ablk {
    uint64_t addr, size, stream;
    union {
        struct {
            uint64_t requested, seq;
        }; /* live */
        hbmi_oset_link tlink; /* free: its place in its tree (core/oset.h) */
    };
    uint32_t tag_id, seg;
    uint32_t prev, next; /* address neighbours in the segment, index+1; 0 = none */
    uint8_t state;
} ablk;

typedef struct aseg {
    uint64_t addr, size;
    uint32_t first; /* index+1 of the lowest block; 0 = slot unused */
    uint32_t wpos;  /* position+1 in the list of wholly free ready segments; 0 = not there */
    uint32_t link;  /* an unused slot: the next unused one (index+1) */
} aseg;

/* The free blocks pending on one stream. */
typedef struct astream {
    uint64_t stream;
    hbmi_oset tree; /* the blocks */
} astream;

typedef struct apool {
    hbm_device *dev;
    ablk *b;             /* slots of blocks; unused ones chained through next */
    hbmi_pool blocks;
    aseg *segs;
    size_t nsegs, capsegs;
    uint32_t segfree;    /* unused segment slots, chained through link (index+1) */
    hbmi_oset ready;     /* tree of the ready free blocks */
    astream *streams;    /* by stream id */
    size_t nstreams, capstreams, last;
    uint32_t *whole;     /* segments that are one free ready block (segment indices) */
    size_t nwhole, capwhole;
    uint32_t *tmp;       /* scratch: a block per free block */
    size_t captmp;
    size_t nfree;
    hbmi_map live; /* addr -> block index */
    hbm_stats st;
    int quiet; /* hbmi_allocator_set_quiet */
} apool;

static uint64_t async_rounded(void *self, uint64_t size) {
    (void)self;
    return size > UINT64_MAX - ASYNC_ROUND ? size : hbmi_align_up(size, ASYNC_ROUND);
}

/* ---- the free blocks: trees in (size, address) order ----------------------------------------
 * Each free block is in one tree: the ready blocks' or its stream's pending blocks'. A tree
 * is the ordered set of core/oset.h over the block records (the links in the record): the
 * fit is the first block of size >= need in the ready tree or the allocating stream's,
 * whichever is smaller, in O(log n). */

static inline int blk_cmp(const ablk *x, const ablk *y) {
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

HBMI_OSET_DEFINE(ftree, ablk, tlink, blk_cmp)

/* The smallest block (by size, then address) of at least need bytes; index+1, 0 if none. */
static inline uint32_t t_fit(const ablk *b, const hbmi_oset *t, uint64_t need) {
    const ablk key = {.size = need, .addr = 0};
    return ftree_lower_bound(b, t, &key);
}

static uint64_t t_largest(const ablk *b, const hbmi_oset *t) {
    uint32_t i1 = ftree_last(b, t);
    return i1 ? b[i1 - 1].size : 0;
}

static astream *stream_get(apool *p, uint64_t stream) {
    if (p->last < p->nstreams && p->streams[p->last].stream == stream) return &p->streams[p->last];
    size_t lo = 0, hi = p->nstreams;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->streams[mid].stream < stream) lo = mid + 1;
        else hi = mid;
    }
    if (lo == p->nstreams || p->streams[lo].stream != stream) return NULL;
    p->last = lo;
    return &p->streams[lo];
}

/* stream's tree of pending blocks exists (before a free on it changes anything). */
static hbm_status stream_add(apool *p, uint64_t stream) {
    if (stream_get(p, stream)) return HBM_OK;
    hbm_status s = hbmi_grow((void **)&p->streams, &p->capstreams, p->nstreams + 1, sizeof *p->streams);
    if (s) return s;
    size_t at = 0;
    while (at < p->nstreams && p->streams[at].stream < stream) at++;
    memmove(p->streams + at + 1, p->streams + at, (p->nstreams - at) * sizeof *p->streams);
    p->streams[at] = (astream){stream, {0, 0}};
    p->nstreams++;
    p->last = at;
    return HBM_OK;
}

static void whole_add(apool *p, uint32_t si) {
    p->whole[p->nwhole++] = si;
    p->segs[si].wpos = (uint32_t)p->nwhole;
}

static void whole_del(apool *p, uint32_t si) {
    uint32_t pos = p->segs[si].wpos - 1, last = p->whole[--p->nwhole];
    p->whole[pos] = last;
    p->segs[last].wpos = pos + 1;
    p->segs[si].wpos = 0;
}

/* Free block i (its state, size and stream set) goes into its tree. */
static void free_add(apool *p, uint32_t i) {
    ablk *x = &p->b[i];
    if (x->state == B_READY) {
        ftree_insert(p->b, &p->ready, i);
        if (x->size == p->segs[x->seg].size) whole_add(p, x->seg);
    } else {
        ftree_insert(p->b, &stream_get(p, x->stream)->tree, i); /* made by stream_add */
    }
    p->nfree++;
}

/* Free block i leaves its tree (before its state, size or stream changes). */
static void free_del(apool *p, uint32_t i) {
    ablk *x = &p->b[i];
    if (x->state == B_READY) {
        ftree_remove(p->b, &p->ready, i);
        if (p->segs[x->seg].wpos) whole_del(p, x->seg);
    } else {
        ftree_remove(p->b, &stream_get(p, x->stream)->tree, i);
    }
    p->nfree--;
}

/* Room for one more block, free entry and segment, so that nothing below can fail. */
static hbm_status reserve_meta(apool *p) {
    hbm_status s = HBM_OK;
    s = hbmi_pool_reserve(&p->blocks, (void **)&p->b, sizeof *p->b, 2); /* grow + split: two blocks */
    if (!s) s = hbmi_grow((void **)&p->tmp, &p->captmp, p->blocks.used + 2, sizeof *p->tmp);
    if (!s && !p->segfree) s = hbmi_grow((void **)&p->segs, &p->capsegs, p->nsegs + 1, sizeof *p->segs);
    if (!s) s = hbmi_grow((void **)&p->whole, &p->capwhole, p->nsegs + 1, sizeof *p->whole);
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

/* Merge block j (the right neighbour of i) into i; neither is in a tree. */
static void absorb_right(apool *p, uint32_t i, uint32_t j) {
    ablk *a = &p->b[i], *c = &p->b[j];
    a->size += c->size;
    a->next = c->next;
    if (c->next) p->b[c->next - 1].prev = i + 1;
    drop_block(p, j);
}

/* Whether free block x may take its neighbour y: a ready block takes ready neighbours, a
 * block pending on S ready ones and those pending on S. */
static inline int mergeable(const ablk *x, const ablk *y) {
    return x->state == B_READY ? y->state == B_READY
                               : y->state == B_READY || (y->state == B_PENDING && y->stream == x->stream);
}

/* Coalesce free block i (in no tree) with its neighbours where the rules allow; returns
 * the result, in no tree. */
static uint32_t coalesce(apool *p, uint32_t i) {
    for (;;) { /* left */
        ablk *x = &p->b[i];
        if (!x->prev || !mergeable(x, &p->b[x->prev - 1])) break;
        uint32_t l = x->prev - 1;
        ablk *y = &p->b[l];
        free_del(p, l);
        if (x->state == B_PENDING) y->state = B_PENDING, y->stream = x->stream;
        absorb_right(p, l, i);
        i = l;
    }
    for (;;) { /* right */
        ablk *x = &p->b[i];
        if (!x->next || !mergeable(x, &p->b[x->next - 1])) break;
        uint32_t r = x->next - 1;
        free_del(p, r);
        absorb_right(p, i, r);
    }
    return i;
}

static uint64_t largest_free(const apool *p) {
    uint64_t m = t_largest(p->b, &p->ready);
    for (size_t k = 0; k < p->nstreams; k++) {
        uint64_t v = t_largest(p->b, &p->streams[k].tree);
        if (v > m) m = v;
    }
    return m;
}

/* Best fit for stream: the smallest free block (then the lowest address) of at least need
 * bytes among the ready ones and those pending on stream. */
static int find_fit(apool *p, uint64_t need, uint64_t stream, uint32_t *out) {
    uint32_t best = t_fit(p->b, &p->ready, need);
    const astream *s = stream_get(p, stream);
    if (s) {
        uint32_t c = t_fit(p->b, &s->tree, need);
        if (c && (!best || blk_cmp(&p->b[c - 1], &p->b[best - 1]) < 0)) best = c;
    }
    if (!best) return 0;
    *out = best - 1;
    return 1;
}

/* A new segment of at least need bytes as one free ready block. */
static hbm_status grow(apool *p, uint64_t need, uint32_t *out) {
    uint64_t seg = need > UINT64_MAX - ASYNC_SEGMENT ? need : hbmi_align_up(need, ASYNC_SEGMENT);
    uint64_t room = p->st.bytes_limit - p->st.bytes_reserved; /* reserved <= limit always */
    if (seg > room && need <= room) seg = room / ASYNC_ROUND * ASYNC_ROUND; /* the last, partial segment */
    if (seg > room) {
        char a[32], b[32], c[32];
        if (p->quiet) return HBM_ERR_OOM; /* a replay's later OOMs: no message is read */
        return hbmi_error(HBM_ERR_OOM, "cuda_async: a %s segment would take the pool past its size %s (%s held)",
                          hbm_size_human(seg, a), hbm_size_human(p->st.bytes_limit, b),
                          hbm_size_human(p->st.bytes_reserved, c));
    }
    uint64_t addr;
    hbm_status s = hbm_device_alloc(p->dev, seg, &addr);
    if (s) return s;
    size_t si;
    if (p->segfree) si = p->segfree - 1, p->segfree = p->segs[si].link;
    else si = p->nsegs++;
    uint32_t i = new_block(p);
    p->segs[si] = (aseg){addr, seg, i + 1, 0, 0};
    p->b[i] = (ablk){.addr = addr, .size = seg, .seg = (uint32_t)si, .state = B_READY};
    free_add(p, i);
    p->st.device_allocs++;
    p->st.bytes_reserved += seg;
    p->st.pool_bytes += seg;
    p->st.num_regions++;
    hbmi_stats_update_peaks(&p->st);
    *out = i;
    return HBM_OK;
}

/* Blocks pending on stream (HBM_STREAM_ALL: on any) become ready and merge with ready
 * neighbours. p->tmp holds a block per free block (reserve_meta, async_sync). */
static void sync_streams(apool *p, uint64_t stream) {
    size_t n = 0;
    for (size_t k = 0; k < p->nstreams; k++) {
        astream *s = &p->streams[k];
        if (stream != HBM_STREAM_ALL && s->stream != stream) continue;
        n += ftree_drain(p->b, &s->tree, p->tmp + n); /* in order */
    }
    p->nfree -= n;
    for (size_t k = 0; k < n; k++) {
        p->b[p->tmp[k]].state = B_READY;
        free_add(p, p->tmp[k]);
    }
    for (size_t k = 0; k < n; k++) { /* merge; a block merged into its left neighbour is unused now */
        uint32_t i = p->tmp[k];
        const ablk *x = &p->b[i];
        if (x->state != B_READY || !((x->prev && p->b[x->prev - 1].state == B_READY) ||
                                     (x->next && p->b[x->next - 1].state == B_READY)))
            continue;
        free_del(p, i);
        free_add(p, coalesce(p, i));
    }
}

static int u32_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Return wholly free ready segments to the device (in slot order). */
static void release_free_segments(apool *p) {
    if (!p->nwhole) return;
    size_t n = p->nwhole;
    memcpy(p->tmp, p->whole, n * sizeof *p->tmp); /* fewer segments than blocks */
    hbmi_qsort(p->tmp, n, sizeof *p->tmp, u32_cmp);
    for (size_t k = 0; k < n; k++) {
        uint32_t si = p->tmp[k];
        aseg *g = &p->segs[si];
        uint32_t i = g->first - 1;
        if (hbm_device_free(p->dev, g->addr)) continue;
        free_del(p, i);
        drop_block(p, i);
        p->st.device_frees++;
        p->st.bytes_reserved -= g->size;
        p->st.pool_bytes -= g->size;
        p->st.num_regions--;
        g->first = 0;
        g->link = p->segfree;
        p->segfree = si + 1;
    }
}

static hbm_status async_alloc_stream(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t stream,
                                     uint64_t *addr_out) {
    apool *p = self;
    uint64_t need = async_rounded(p, size);
    if (need > p->st.bytes_limit || p->st.bytes_in_use > p->st.bytes_limit - need) {
        p->st.num_ooms++;
        char a[32], b[32], c[32];
        if (p->quiet) return HBM_ERR_OOM;
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
    hbm_status s = stream_add(p, stream);
    if (s) return s;
    hbmi_map_del(&p->live, addr, NULL);
    ablk *b = &p->b[i];
    p->st.num_frees++;
    p->st.bytes_in_use -= b->size;
    b->state = B_PENDING;
    b->stream = stream;
    b->tag_id = 0;
    free_add(p, coalesce(p, (uint32_t)i));
    return HBM_OK;
}

static hbm_status async_free(void *self, uint64_t addr) { return async_free_stream(self, addr, HBM_STREAM_DEFAULT); }

static hbm_status async_sync(void *self, uint64_t stream) {
    apool *p = self;
    hbm_status s = hbmi_grow((void **)&p->tmp, &p->captmp, p->blocks.used, sizeof *p->tmp);
    if (!s) sync_streams(p, stream);
    return s;
}

static hbm_status async_trim(void *self) {
    apool *p = self;
    hbm_status s = hbmi_grow((void **)&p->tmp, &p->captmp, p->blocks.used, sizeof *p->tmp);
    if (!s) release_free_segments(p);
    return s;
}

static void async_stats(void *self, hbm_stats *out) {
    apool *p = self;
    *out = p->st;
    out->largest_free_block_bytes = largest_free(p);
}
static void async_reset_peaks(void *self) { hbmi_stats_reset_peaks(&((apool *)self)->st); }

/* The bytes-in-use counter, for a replay's peak check (alloc_internal.h). */
static const hbm_allocator_ops async_ops;
int hbmi_async_set_quiet(hbm_allocator *a, int on) {
    if (a->ops != &async_ops) return 0;
    ((apool *)a->self)->quiet = on;
    return 1;
}

const uint64_t *hbmi_async_in_use(const hbm_allocator *a) {
    return a->ops == &async_ops ? &((const apool *)a->self)->st.bytes_in_use : NULL;
}

static int ablk_unused(const void *rec) { return ((const ablk *)rec)->state == B_UNUSED; }

/* Tree t: the set's invariants (core/oset.h), and every block in it free in the state (and
 * of the stream) given; counts them into *n. */
static hbm_status t_check(const apool *p, const hbmi_oset *t, int state, uint64_t stream, size_t *n) {
    hbm_status s = ftree_check(p->b, p->blocks.n, t, "cuda_async: free tree");
    if (s) return s;
    for (uint32_t i1 = ftree_first(p->b, t); i1; i1 = ftree_next(p->b, t, i1)) {
        const ablk *x = &p->b[i1 - 1];
        if (x->state != state || (state == B_PENDING && x->stream != stream))
            return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: free block 0x%" PRIx64 " of %" PRIu64
                              " bytes is in the wrong tree", x->addr, x->size);
    }
    *n += t->n;
    return HBM_OK;
}

static hbm_status async_check(void *self) {
    apool *p = self;
    uint64_t live = 0, reserved = 0, nlive = 0, nfree = 0, largest = 0, nwhole = 0;
    hbm_status s = hbmi_pool_check(&p->blocks, p->b, sizeof *p->b, offsetof(ablk, next), ablk_unused, "cuda_async");
    if (s) return s;
    size_t intrees = 0;
    s = t_check(p, &p->ready, B_READY, 0, &intrees);
    for (size_t k = 0; k < p->nstreams && !s; k++) {
        if (k && p->streams[k - 1].stream >= p->streams[k].stream)
            return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: streams out of order");
        s = t_check(p, &p->streams[k].tree, B_PENDING, p->streams[k].stream, &intrees);
    }
    if (s) return s;
    size_t nunused = 0;
    for (uint32_t j = p->segfree; j; j = p->segs[j - 1].link)
        if (j > p->nsegs || p->segs[j - 1].first || ++nunused > p->nsegs)
            return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: the list of unused segment slots is broken");
    for (size_t si = 0; si < p->nsegs; si++) {
        aseg *g = &p->segs[si];
        if (!g->first) {
            nunused--;
            continue;
        }
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
                nfree++;
                if (b->size > largest) largest = b->size;
                int whole = b->state == B_READY && b->size == g->size;
                nwhole += (uint64_t)whole;
                if (whole != (g->wpos && g->wpos <= p->nwhole && p->whole[g->wpos - 1] == si))
                    return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: segment 0x%" PRIx64 " is %s the wholly free list",
                                      g->addr, whole ? "missing from" : "wrongly on");
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
    if (live != p->st.bytes_in_use || nlive != p->live.count || nfree != p->nfree || intrees != p->nfree ||
        nunused || nwhole != p->nwhole || reserved != p->st.bytes_reserved || reserved != p->st.pool_bytes ||
        reserved > p->st.bytes_limit || largest != largest_free(p))
        return hbmi_error(HBM_ERR_CORRUPT,
                          "cuda_async: counted %" PRIu64 " live bytes in %" PRIu64 " blocks, %" PRIu64 " free (%zu in the"
                          " trees), %" PRIu64 " reserved; stats say %" PRIu64 ", %zu, %zu, %" PRIu64,
                          live, nlive, nfree, intrees, reserved, p->st.bytes_in_use, p->live.count, p->nfree,
                          p->st.bytes_reserved);
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
    hbmi_free(p->streams);
    hbmi_free(p->whole);
    hbmi_free(p->tmp);
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
    }
    *ops = &async_ops;
    *self = p;
    return HBM_OK;
}
