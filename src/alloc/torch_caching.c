/* torch_caching.c - "torch": PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp),
 * rule for rule, so a replay of a PyTorch memory snapshot can ask what another
 * PYTORCH_CUDA_ALLOC_CONF would have done. docs/allocators.md lists each rule and the
 * PyTorch source it comes from.
 *
 * Sizes round to 512 bytes (or to roundup_power2_divisions steps). Requests of 1 MiB or
 * less use the small pool (2 MiB segments), larger ones the large pool (20 MiB segments
 * under 10 MiB, else the request rounded to 2 MiB). Free blocks are kept per pool in
 * order (stream, size, address): best fit on the same stream. A block found is split
 * when the remainder is >= 512 bytes (small pool, or expandable segments) or > 1 MiB and
 * the request < max_split_size (large pool); blocks >= max_split_size are never split
 * and serve only requests less than max_non_split_rounding smaller. Freed blocks
 * coalesce with free neighbours of their segment. When no cached block fits: garbage
 * collection (with a memory fraction and garbage_collection_threshold), a new segment,
 * then free oversize cached blocks (max_split_size set) and retry, then free every
 * unsplit cached block and retry, then out of memory.
 * expandable_segments: one virtual range per (stream, pool) whose pages (2 MiB small,
 * 20 MiB large) are mapped at the lowest address with room and unmapped when the cache
 * is emptied (on the retry path and by trim / empty_cache).
 *
 * Metadata: one record per block, four sorted index arrays (free blocks by size and
 * unmapped ranges by address, per pool), a map of live blocks, one record per mapped page
 * of expandable segments. On sim: devices a segment is one raw device allocation and an
 * expandable page is one too (so capacity and fault injection apply); expandable
 * segments need a sim: device in this build. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "alloc/torch_caching.h"
#include "device/cuda_driver.h"
#include "hbm/size.h"
#include "hbm/event.h"

#define K_MIN_BLOCK 512u                    /* kMinBlockSize */
#define K_SMALL_SIZE (1ull << 20)           /* kSmallSize */
#define K_SMALL_BUFFER (2ull << 20)         /* kSmallBuffer */
#define K_LARGE_BUFFER (20ull << 20)        /* kLargeBuffer */
#define K_MIN_LARGE_ALLOC (10ull << 20)     /* kMinLargeAlloc */
#define K_ROUND_LARGE (2ull << 20)          /* kRoundLarge */
#define K_MAX_REQUEST (1ull << 56)

enum { T_UNUSED, T_LIVE, T_FREE, T_UNMAPPED };

typedef struct tblk { /* what a free list walk reads comes first */
    uint64_t addr, size, stream;
    uint32_t prev, next; /* address neighbours in the segment, index+1 */
    uint32_t bprev, sprev; /* the previous free block of the same stream and size, by address,
                              and on its express lane, index+1 (the next ones: tnode) */
    uint32_t es;       /* expandable segment index+1, 0 = a cudaMalloc segment */
    uint8_t state, small;
    uint32_t tag_id;
    uint64_t requested, seq;
    uint64_t seg;      /* base of its segment (an expandable segment's virtual base) */
    int64_t gc_base;   /* the pool's get_free_block count when it became free */
} tblk;

/* What a walk along a free list reads of a listed block, 16 bytes in an array parallel to
 * the blocks (a fraction of their size, so walks stay in cache): its address and the next
 * free block of the same stream and size, on the list and on its express lane. */
typedef struct tnode {
    uint64_t addr;
    uint32_t bnext, snext;
} tnode;

typedef struct tset { /* block indexes in key order */
    uint32_t *v;
    size_t n, cap;
} tset;

/* The free blocks of one stream in a pool, in PyTorch's order (size, address): one list per
 * size up to 2 MiB (sizes are multiples of 512: 4096 of them) found with two bitmap
 * levels, and a sorted array for larger blocks (few in practice). The list of a size can
 * grow to hundreds of blocks (the slivers that splits leave at small sizes), so each has
 * an express lane, a skip list of one level: about one block in F_EXPRESS (chosen by a
 * hash of its record's index, whatever its address) is also linked in address order
 * with the others like it, and a new block finds its place walking the lane, then the
 * list from the last express block below it: about n / F_EXPRESS + F_EXPRESS steps, not
 * n / 2. The order, and so every choice, is the list's; the lane only finds places. */
#define F_CLASSES 4096
#define F_BIN_MAX (2ull << 20)
#define F_EXPRESS_BITS 3
#define F_EXPRESS (1u << F_EXPRESS_BITS)
typedef struct fstream {
    uint64_t stream;
    uint64_t top;                /* bit w: bits[w] != 0 */
    uint64_t bits[F_CLASSES / 64];
    struct {                     /* each size's list, 16 bytes */
        uint32_t head, tail;     /* index+1 of the lowest-address block and of the highest */
        uint32_t shead, stail;   /* ... and of its express lane */
    } cls[F_CLASSES];
    tset big;                    /* blocks over 2 MiB by (size, addr) */
    size_t n;
} fstream;

typedef struct fset { /* the streams in increasing order */
    fstream **s;
    size_t n, cap;
} fset;

typedef struct tpool {
    fset blocks;   /* free mapped blocks by (stream, size, addr) */
    tset unmapped; /* unmapped ranges of expandable segments by (stream, addr) */
    int64_t gc_calls;
    int small;
    int dirty; /* a block was cached since release_pool last ran that it may release (unsplit, or of an
                  expandable segment): else it would find nothing to do, and an OOM need not list the pool */
} tpool;

typedef struct tes {
    uint64_t base, page, npages, stream;
    hbmi_map pages; /* page index -> device address of its physical page */
    int live, small;
} tes;

typedef struct torch {
    hbm_device *dev;
    int ordinal; /* "GPU N" in the OOM message */
    int expandable;
    uint64_t max_split, max_nsr;
    uint32_t rp2[HBM_TORCH_ROUNDUP_INTERVALS];
    double gc_threshold;
    int set_fraction;
    uint64_t allowed, dev_total;
    uint64_t total_allocated; /* reserved: segments + mapped pages */
    tblk *b;
    tnode *fl;    /* parallel to b, capfl >= blocks.cap */
    hbmi_pool blocks; /* the slots of b; unused ones chained through next */
    size_t capfl, setcap;
    uint64_t last_stream; /* in both pools' sets when nstreams */
    int nstreams;
    tpool pool[2]; /* [0] large, [1] small */
    hbmi_map live; /* address -> block: torch_free finds its block here on every free */
    tes *es;
    size_t nes, capes;
    uint64_t nsegments;
    uint64_t num_alloc_retries;
    hbm_stats st;
    hbmi_torch_event_fn ev_fn;
    void *ev_user;
    hbmi_torch_addr_fn addr_fn;
    void *addr_user;
    hbmi_map segdev; /* segment address -> device address, where addr_fn placed it */
    uint64_t va_next; /* where the next expandable segment's virtual range goes */
    int quiet;        /* hbmi_allocator_set_quiet */
} torch;

static const hbm_allocator_ops torch_ops;

/* ---- sizes (round_size, get_allocation_size) --------------------------------------------- */

static unsigned log2_floor(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

static uint64_t roundup_divisions(const torch *t, uint64_t size) {
    int idx = (int)log2_floor(size) - 20; /* intervals from 1 MiB */
    if (idx < 0) idx = 0;
    if (idx > HBM_TORCH_ROUNDUP_INTERVALS - 1) idx = HBM_TORCH_ROUNDUP_INTERVALS - 1;
    return t->rp2[idx];
}

static uint64_t next_division(uint64_t size, uint64_t divisions) {
    if (!(size & (size - 1))) return size;
    uint64_t floor2 = 1ull << log2_floor(size);
    uint64_t step = floor2 >> log2_floor(divisions);
    if (!step) return floor2 << 1;
    uint64_t lo = size & ~(step - 1);
    return lo == size ? size : lo + step;
}

static uint64_t round_size(const torch *t, uint64_t size) {
    if (size < K_MIN_BLOCK) return K_MIN_BLOCK;
    uint64_t d = roundup_divisions(t, size);
    if (d > 1 && size > K_MIN_BLOCK * d) return next_division(size, d);
    return hbmi_align_up(size, K_MIN_BLOCK);
}

static uint64_t allocation_size(uint64_t size) {
    if (size <= K_SMALL_SIZE) return K_SMALL_BUFFER;
    if (size < K_MIN_LARGE_ALLOC) return K_LARGE_BUFFER;
    return hbmi_align_up(size, K_ROUND_LARGE);
}

static uint64_t torch_rounded(void *self, uint64_t size) {
    return size > K_MAX_REQUEST ? size : round_size(self, size);
}

/* ---- blocks and ordered sets ------------------------------------------------------------- */

/* Room in the live map for extra more blocks with the map at most half full (a lookup on
 * the free path then probes one or two slots). */
static hbm_status live_reserve(torch *t, size_t extra) { return hbmi_map_reserve(&t->live, t->live.count + extra); }

/* Room for extra more blocks everywhere a block can be listed, so no later step fails.
 * setcap: every set holds at least that many (0 after a stream is added). */
static hbm_status reserve_grow(torch *t, size_t extra);

static inline hbm_status reserve(torch *t, size_t extra) {
    size_t need = t->blocks.n + extra;
    if (t->blocks.used + extra <= t->blocks.cap && need <= t->setcap && hbmi_map_room(&t->live, extra))
        return HBM_OK;
    return reserve_grow(t, extra);
}

static hbm_status reserve_grow(torch *t, size_t extra) {
    size_t need = t->blocks.n + extra;
    hbm_status s = hbmi_pool_reserve(&t->blocks, (void **)&t->b, sizeof *t->b, extra);
    if (!s) s = hbmi_grow((void **)&t->fl, &t->capfl, t->blocks.cap, sizeof *t->fl);
    for (int p = 0; p < 2 && !s; p++) {
        const fset *f = &t->pool[p].blocks;
        for (size_t k = 0; k < f->n && !s; k++)
            s = hbmi_grow((void **)&f->s[k]->big.v, &f->s[k]->big.cap, need, sizeof(uint32_t));
        if (!s) s = hbmi_grow((void **)&t->pool[p].unmapped.v, &t->pool[p].unmapped.cap, need, sizeof(uint32_t));
    }
    if (!s) s = live_reserve(t, extra);
    if (!s) t->setcap = need;
    return s;
}

static uint32_t new_block(torch *t) { /* capacity reserved by the caller, which sets every field */
    return hbmi_pool_take(&t->blocks, t->b, sizeof *t->b, offsetof(tblk, next));
}

static void drop_block(torch *t, uint32_t i) {
    t->b[i].state = T_UNUSED;
    hbmi_pool_give(&t->blocks, t->b, sizeof *t->b, offsetof(tblk, next), i);
}

/* block i against the key: <0, 0, >0 (by size: stream, size, addr; else stream, addr) */
static int key_cmp(const tblk *x, int by_size, uint64_t stream, uint64_t size, uint64_t addr) {
    if (x->stream != stream) return x->stream < stream ? -1 : 1;
    if (by_size && x->size != size) return x->size < size ? -1 : 1;
    return x->addr < addr ? -1 : x->addr > addr;
}

static size_t lower_bound(const torch *t, const tset *s, int by_size, uint64_t stream, uint64_t size, uint64_t addr) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_cmp(&t->b[s->v[mid]], by_size, stream, size, addr) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void set_insert(torch *t, tset *s, int by_size, uint32_t i) {
    const tblk *x = &t->b[i];
    size_t at = lower_bound(t, s, by_size, x->stream, x->size, x->addr);
    memmove(s->v + at + 1, s->v + at, (s->n - at) * sizeof *s->v);
    s->v[at] = i;
    s->n++;
}

static void set_erase_at(tset *s, size_t at) {
    memmove(s->v + at, s->v + at + 1, (s->n - at - 1) * sizeof *s->v);
    s->n--;
}

static int set_find(const torch *t, const tset *s, int by_size, uint32_t i, size_t *at) {
    const tblk *x = &t->b[i];
    size_t k = lower_bound(t, s, by_size, x->stream, x->size, x->addr);
    if (k < s->n && s->v[k] == i) return *at = k, 1;
    return 0;
}

static void set_erase(torch *t, tset *s, int by_size, uint32_t i) {
    size_t at;
    if (set_find(t, s, by_size, i, &at)) set_erase_at(s, at);
}

static tpool *pool_of(torch *t, uint32_t i) { return &t->pool[t->b[i].small]; }

/* ---- the free blocks of a pool (fset) ------------------------------------------------------ */

static unsigned f_class(uint64_t size) { return (unsigned)(size / K_MIN_BLOCK) - 1; }

static fstream *fs_find_sorted(const fset *f, uint64_t stream) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->s[mid]->stream < stream) lo = mid + 1;
        else hi = mid;
    }
    return lo < f->n && f->s[lo]->stream == stream ? f->s[lo] : NULL;
}

static inline fstream *fs_find(const fset *f, uint64_t stream) {
    if (f->n && f->s[0]->stream == stream) return f->s[0]; /* most programs use one stream */
    return fs_find_sorted(f, stream);
}

/* Make room for the blocks of stream (before any of them is inserted); *added = 1 when new. */
static hbm_status fs_add_stream(fset *f, uint64_t stream, int *added) {
    if (fs_find(f, stream)) return HBM_OK;
    *added = 1;
    hbm_status s = hbmi_grow((void **)&f->s, &f->cap, f->n + 1, sizeof *f->s);
    fstream *x = s ? NULL : hbmi_calloc(1, sizeof *x);
    if (!x) return s ? s : hbmi_error(HBM_ERR_NOMEM, "out of host memory for a torch stream");
    x->stream = stream;
    size_t at = 0;
    while (at < f->n && f->s[at]->stream < stream) at++;
    memmove(f->s + at + 1, f->s + at, (f->n - at) * sizeof *f->s);
    f->s[at] = x;
    f->n++;
    return HBM_OK;
}

/* Both pools have stream's free sets (a new one: reserve() grows their room). */
static hbm_status add_stream(torch *t, uint64_t stream) {
    if (t->nstreams && stream == t->last_stream) return HBM_OK;
    int added = 0;
    hbm_status s = fs_add_stream(&t->pool[0].blocks, stream, &added);
    if (!s) s = fs_add_stream(&t->pool[1].blocks, stream, &added);
    if (added) t->setcap = 0;
    if (!s) t->last_stream = stream, t->nstreams = 1;
    return s;
}

static inline int fs_first_class(const fstream *x, unsigned c) { /* first non-empty size class >= c, -1 */
    if (c >= F_CLASSES) return -1;
    unsigned w = c >> 6;
    uint64_t m = x->bits[w] & (~0ull << (c & 63));
    if (m) return (int)((w << 6) + (unsigned)__builtin_ctzll(m));
    uint64_t up = w + 1 < 64 ? x->top & (~0ull << (w + 1)) : 0;
    if (!up) return -1;
    w = (unsigned)__builtin_ctzll(up);
    return (int)((w << 6) + (unsigned)__builtin_ctzll(x->bits[w]));
}

static int is_express(uint32_t i1) { /* about one record in F_EXPRESS, fixed per record */
    uint32_t x = i1 * 0x9e3779b1u;
    return ((x ^ (x >> 15)) * 0x85ebca6bu) >> (32 - F_EXPRESS_BITS) == 0;
}

static void fs_insert(torch *t, fset *f, uint32_t i) {
    tblk *b = t->b, *x = &b[i];
    tnode *fl = t->fl;
    fstream *s = fs_find(f, x->stream); /* made by fs_add_stream */
    s->n++;
    if (x->size > F_BIN_MAX) {
        set_insert(t, &s->big, 1, i);
        return;
    }
    unsigned c = f_class(x->size);
    uint32_t prev = 0, cur = s->cls[c].head, sprev = 0, i1 = i + 1;
    fl[i].addr = x->addr;
    uint32_t st = s->cls[c].stail;
    if (st && fl[st - 1].addr < x->addr) sprev = st; /* above the whole lane (new segments often are) */
    else
        for (uint32_t e = s->cls[c].shead; e && fl[e - 1].addr < x->addr; e = fl[e - 1].snext) sprev = e;
    if (sprev) prev = sprev, cur = fl[sprev - 1].bnext;
    while (cur && fl[cur - 1].addr < x->addr) prev = cur, cur = fl[cur - 1].bnext;
    if (is_express(i1)) {
        uint32_t snext = sprev ? fl[sprev - 1].snext : s->cls[c].shead;
        x->sprev = sprev;
        fl[i].snext = snext;
        if (snext) b[snext - 1].sprev = i1;
        else s->cls[c].stail = i1;
        if (sprev) fl[sprev - 1].snext = i1;
        else s->cls[c].shead = i1;
    }
    x->bprev = prev;
    fl[i].bnext = cur;
    if (cur) b[cur - 1].bprev = i + 1;
    else s->cls[c].tail = i + 1;
    if (prev) fl[prev - 1].bnext = i + 1;
    else s->cls[c].head = i + 1;
    s->bits[c >> 6] |= 1ull << (c & 63);
    s->top |= 1ull << (c >> 6);
}

static void fs_erase(torch *t, fset *f, uint32_t i) {
    tblk *b = t->b, *x = &b[i];
    tnode *fl = t->fl;
    fstream *s = fs_find(f, x->stream);
    if (!s) return;
    if (x->size > F_BIN_MAX) {
        size_t at;
        if (set_find(t, &s->big, 1, i, &at)) set_erase_at(&s->big, at), s->n--;
        return;
    }
    unsigned c = f_class(x->size);
    if (x->bprev) fl[x->bprev - 1].bnext = fl[i].bnext;
    else if (s->cls[c].head == i + 1) s->cls[c].head = fl[i].bnext;
    else return; /* not listed */
    if (fl[i].bnext) b[fl[i].bnext - 1].bprev = x->bprev;
    else s->cls[c].tail = x->bprev;
    x->bprev = 0;
    fl[i].bnext = 0;
    if (is_express(i + 1)) {
        if (x->sprev) fl[x->sprev - 1].snext = fl[i].snext;
        else s->cls[c].shead = fl[i].snext;
        if (fl[i].snext) b[fl[i].snext - 1].sprev = x->sprev;
        else s->cls[c].stail = x->sprev;
        x->sprev = 0;
        fl[i].snext = 0;
    }
    s->n--;
    if (!s->cls[c].head) {
        s->bits[c >> 6] &= ~(1ull << (c & 63));
        if (!s->bits[c >> 6]) s->top &= ~(1ull << (c >> 6));
    }
}

/* The first free block of stream with size >= size (index+1), 0 if none. */
static uint32_t fs_lower_bound(const torch *t, const fset *f, uint64_t stream, uint64_t size) {
    const fstream *s = fs_find(f, stream);
    if (!s) return 0;
    if (size <= F_BIN_MAX) {
        int c = fs_first_class(s, f_class(size < K_MIN_BLOCK ? K_MIN_BLOCK : hbmi_align_up(size, K_MIN_BLOCK)));
        if (c >= 0) return s->cls[c].head;
        return s->big.n ? s->big.v[0] + 1 : 0;
    }
    size_t k = lower_bound(t, &s->big, 1, stream, size, 0);
    return k < s->big.n ? s->big.v[k] + 1 : 0;
}

/* The next free block of the same stream in (size, address) order, 0 at the end. */
static uint32_t fs_next(const torch *t, const fset *f, uint32_t i) {
    const tblk *x = &t->b[i];
    const fstream *s = fs_find(f, x->stream);
    if (!s) return 0;
    if (x->size <= F_BIN_MAX) {
        if (t->fl[i].bnext) return t->fl[i].bnext;
        int c = fs_first_class(s, f_class(x->size) + 1);
        if (c >= 0) return s->cls[c].head;
        return s->big.n ? s->big.v[0] + 1 : 0;
    }
    size_t at;
    if (!set_find(t, &s->big, 1, i, &at) || at + 1 >= s->big.n) return 0;
    return s->big.v[at + 1] + 1;
}

static size_t fs_count(const fset *f) {
    size_t n = 0;
    for (size_t k = 0; k < f->n; k++) n += f->s[k]->n;
    return n;
}

/* Every free block in PyTorch's order into out (fs_count entries). */
static size_t fs_list(const torch *t, const fset *f, uint32_t *out) {
    size_t n = 0;
    for (size_t k = 0; k < f->n; k++) {
        const fstream *s = f->s[k];
        for (int c = fs_first_class(s, 0); c >= 0; c = fs_first_class(s, (unsigned)c + 1))
            for (uint32_t j = s->cls[c].head; j; j = t->fl[j - 1].bnext) out[n++] = j - 1;
        for (size_t q = 0; q < s->big.n; q++) out[n++] = s->big.v[q];
    }
    return n;
}

static inline uint64_t fs_largest(const torch *t, const fset *f) {
    uint64_t best = 0;
    for (size_t k = 0; k < f->n; k++) {
        const fstream *s = f->s[k];
        uint64_t v = 0;
        if (s->big.n) {
            v = t->b[s->big.v[s->big.n - 1]].size;
        } else if (s->top) {
            unsigned w = 63u - (unsigned)__builtin_clzll(s->top);
            v = ((uint64_t)((w << 6) + 63u - (unsigned)__builtin_clzll(s->bits[w])) + 1) * K_MIN_BLOCK;
        }
        if (v > best) best = v;
    }
    return best;
}

static void fs_destroy(fset *f) {
    for (size_t k = 0; k < f->n; k++) {
        hbmi_free(f->s[k]->big.v);
        hbmi_free(f->s[k]);
    }
    hbmi_free(f->s);
}

static int is_split(const tblk *x) { return x->prev || x->next; }

/* a block becomes a cached free block (BlockPool::insert_into_blocks) */
static void insert_free(torch *t, uint32_t i) {
    tpool *p = pool_of(t, i);
    t->b[i].state = T_FREE;
    t->b[i].gc_base = p->gc_calls;
    fs_insert(t, &p->blocks, i);
    if (!is_split(&t->b[i]) || t->b[i].es) p->dirty = 1;
}

static void emit(torch *t, int kind, uint64_t addr, uint64_t size, uint64_t stream, uint64_t seg) {
    if (t->ev_fn) t->ev_fn(t->ev_user, kind, addr, size, stream, seg);
}

static void reserved_add(torch *t, uint64_t n) {
    t->total_allocated += n;
    t->st.bytes_reserved = t->st.pool_bytes = t->total_allocated;
    t->st.device_allocs++;
    hbmi_stats_update_peaks(&t->st);
}

static void reserved_sub(torch *t, uint64_t n) {
    t->total_allocated -= n;
    t->st.bytes_reserved = t->st.pool_bytes = t->total_allocated;
    t->st.device_frees++;
}

/* Merge free neighbour src into dst (try_merge_blocks): both free and both mapped, or
 * both unmapped. dst is in no set; src leaves its set. Returns the bytes taken. */
static uint64_t try_merge(torch *t, uint32_t dst, uint32_t src1) {
    if (!src1) return 0;
    uint32_t src = src1 - 1;
    tblk *d = &t->b[dst], *s = &t->b[src];
    if (s->state == T_LIVE || (d->state == T_UNMAPPED) != (s->state == T_UNMAPPED)) return 0;
    tpool *p = pool_of(t, src);
    if (s->state == T_UNMAPPED) set_erase(t, &p->unmapped, 0, src);
    else fs_erase(t, &p->blocks, src);
    if (d->prev == src1) {
        d->addr = s->addr;
        d->prev = s->prev;
        if (d->prev) t->b[d->prev - 1].next = dst + 1;
    } else {
        d->next = s->next;
        if (d->next) t->b[d->next - 1].prev = dst + 1;
    }
    uint64_t n = s->size;
    d->size += n;
    drop_block(t, src);
    return n;
}

/* ---- expandable segments ------------------------------------------------------------------ */

/* Expandable segments' virtual ranges come from the allocator's own counter, from this base
 * up (below any simulated device's addresses): each allocator starts here, so two replays of
 * one request in one process print the same addresses (a process-wide counter moved them). */
#define TORCH_VA_BASE 0x300000000000ULL

static tes *es_of(torch *t, uint32_t i) { return &t->es[t->b[i].es - 1]; }

/* A new expandable segment of npages pages for stream and pool (small), its base not set
 * yet: the last slot given back, else a new one (t->es has room for it). */
static uint32_t es_new(torch *t, uint64_t page, uint64_t npages, uint64_t stream, int small) {
    uint32_t e = UINT32_MAX;
    for (size_t k = 0; k < t->nes; k++)
        if (!t->es[k].live) e = (uint32_t)k;
    if (e == UINT32_MAX) e = (uint32_t)t->nes++;
    tes *x = &t->es[e];
    *x = (tes){.page = page, .npages = npages, .stream = stream, .small = small, .live = 1};
    hbmi_map_init(&x->pages);
    return e;
}

/* A new neighbour of block i (its stream, segment and pool), linked in: carve_front's holds
 * the first size bytes from i's address, before i; carve_back's the size bytes at addr,
 * after i, in the given state. Block i's own address and size are the caller's to change;
 * t->b has room for the new block (reserve). Inlined whatever the compiler's cost model says,
 * as the copies were: a call here showed as 2-3 % of bench_replay's torch rate. */
#define TORCH_HOT static inline __attribute__((always_inline))
TORCH_HOT uint32_t carve_front(torch *t, uint32_t i, uint64_t size) {
    uint32_t f = new_block(t);
    tblk *y = &t->b[i];
    t->b[f] = (tblk){.addr = y->addr, .size = size, .stream = y->stream, .seg = y->seg, .es = y->es,
                     .small = y->small, .prev = y->prev, .next = i + 1};
    if (y->prev) t->b[y->prev - 1].next = f + 1;
    y->prev = f + 1;
    return f;
}

TORCH_HOT uint32_t carve_back(torch *t, uint32_t i, uint64_t addr, uint64_t size, uint8_t state) {
    uint32_t f = new_block(t);
    tblk *y = &t->b[i];
    t->b[f] = (tblk){.addr = addr, .size = size, .stream = y->stream, .seg = y->seg, .es = y->es, .state = state,
                     .small = y->small, .prev = i + 1, .next = y->next};
    if (y->next) t->b[y->next - 1].prev = f + 1;
    y->next = f + 1;
    return f;
}

/* find_expandable_block: the lowest address of a segment of this stream and pool where
 * free and unmapped blocks together have size bytes; else a new segment. */
static hbm_status find_expandable(torch *t, tpool *p, uint64_t stream, uint64_t size, uint32_t *out) {
    for (size_t k = lower_bound(t, &p->unmapped, 0, stream, 0, 0); k < p->unmapped.n; k++) {
        uint32_t c = p->unmapped.v[k];
        if (t->b[c].stream != stream) break;
        if (t->b[c].prev && t->b[t->b[c].prev - 1].state == T_FREE) c = t->b[c].prev - 1;
        uint64_t bytes = 0;
        for (uint32_t j = c + 1; j && bytes < size && t->b[j - 1].state != T_LIVE; j = t->b[j - 1].next)
            bytes += t->b[j - 1].size;
        if (bytes >= size) return *out = c, HBM_OK;
    }
    hbm_status s = hbmi_grow((void **)&t->es, &t->capes, t->nes + 1, sizeof *t->es);
    if (s) return s;
    uint64_t page = p->small ? K_SMALL_BUFFER : K_LARGE_BUFFER;
    uint64_t space = t->dev_total + t->dev_total / 8; /* PyTorch reserves 1 1/8 of the device */
    uint64_t npages = (space + page - 1) / page;
    if (!npages) npages = 1;
    uint32_t e = es_new(t, page, npages, stream, p->small);
    tes *x = &t->es[e];
    uint64_t span = npages * page, at;
    if (t->addr_fn && t->addr_fn(t->addr_user, HBM_EV_SEGMENT_MAP, size < span ? hbmi_align_up(size, page) : span, span, &at))
        x->base = at;
    else {
        x->base = hbmi_align_up(t->va_next, page);
        t->va_next += span + 2 * page;
    }
    uint32_t c = new_block(t);
    t->b[c] = (tblk){.addr = x->base, .size = span, .stream = stream, .seg = x->base, .es = e + 1,
                     .state = T_UNMAPPED, .small = (uint8_t)p->small};
    set_insert(t, &p->unmapped, 0, c);
    *out = c;
    return HBM_OK;
}

static void release_pages(torch *t, tes *x, uint64_t lo, uint64_t hi) {
    for (uint64_t k = lo; k < hi; k++) {
        uint64_t h;
        if (hbmi_map_del(&x->pages, k, &h)) hbm_device_free(t->dev, h);
    }
}

/* map_block: back [addr, addr + size) of unmapped block i with pages; the rest of i stays
 * unmapped; i merges with free neighbours. HBM_ERR_OOM when a page cannot be had. */
static hbm_status map_block(torch *t, uint32_t i, uint64_t size) {
    tes *x = es_of(t, i);
    uint64_t lo = (t->b[i].addr - x->base) / x->page;
    uint64_t hi = (t->b[i].addr + size - x->base + x->page - 1) / x->page;
    hbm_status s = hbmi_map_reserve(&x->pages, x->pages.count + (hi - lo));
    for (uint64_t k = lo; !s && k < hi; k++) {
        uint64_t h;
        s = hbm_device_alloc(t->dev, x->page, &h);
        if (s) {
            release_pages(t, x, lo, k);
            return s;
        }
        hbmi_map_put(&x->pages, k, h);
    }
    if (s) return s;
    uint64_t at = t->b[i].addr, mapped = (hi - lo) * x->page;
    tpool *p = pool_of(t, i);
    set_erase(t, &p->unmapped, 0, i);
    t->b[i].state = T_FREE;
    if (mapped < t->b[i].size) {
        uint32_t r = carve_back(t, i, t->b[i].addr + mapped, t->b[i].size - mapped, T_UNMAPPED);
        t->b[i].size = mapped;
        set_insert(t, &p->unmapped, 0, r);
    }
    try_merge(t, i, t->b[i].prev);
    try_merge(t, i, t->b[i].next);
    insert_free(t, i);
    reserved_add(t, mapped);
    emit(t, HBM_EV_SEGMENT_MAP, at, mapped, t->b[i].stream, t->b[i].seg);
    return HBM_OK;
}

/* try_allocate_expandable_block: map pages until a free block of size bytes exists */
static hbm_status alloc_expandable(torch *t, tpool *p, uint64_t stream, uint64_t size, uint32_t *out) {
    hbm_status s = reserve(t, 4);
    uint32_t c;
    if (!s) s = find_expandable(t, p, stream, size, &c);
    if (s) return s;
    if (t->b[c].state == T_UNMAPPED) {
        uint64_t n = t->b[c].size < size ? t->b[c].size : size;
        if ((s = map_block(t, c, n))) return s;
    }
    while (t->b[c].size < size) {
        uint32_t nc = t->b[c].next - 1;
        uint64_t rem = size - t->b[c].size, n = rem < t->b[nc].size ? rem : t->b[nc].size;
        if ((s = reserve(t, 2)) || (s = map_block(t, nc, n))) return s;
        c = nc;
    }
    fs_erase(t, &p->blocks, c);
    *out = c;
    return HBM_OK;
}

/* unmap_block: give back the whole pages inside free block i */
static hbm_status unmap_block(torch *t, uint32_t i) {
    tes *x = es_of(t, i);
    uint64_t lo = (t->b[i].addr - x->base + x->page - 1) / x->page;
    uint64_t hi = (t->b[i].addr + t->b[i].size - x->base) / x->page;
    if (lo >= hi) return HBM_OK;
    hbm_status s = reserve(t, 2);
    if (s) return s;
    tpool *p = pool_of(t, i);
    fs_erase(t, &p->blocks, i);
    uint64_t at = x->base + lo * x->page, n = (hi - lo) * x->page;
    uint64_t before = at - t->b[i].addr, after = t->b[i].size - before - n;
    if (before) insert_free(t, carve_front(t, i, before));
    if (after) insert_free(t, carve_back(t, i, at + n, after, T_UNUSED));
    t->b[i].addr = at;
    t->b[i].size = n;
    t->b[i].state = T_UNMAPPED;
    try_merge(t, i, t->b[i].prev);
    try_merge(t, i, t->b[i].next);
    set_insert(t, &p->unmapped, 0, i);
    release_pages(t, x, lo, hi);
    reserved_sub(t, n);
    emit(t, HBM_EV_SEGMENT_UNMAP, at, n, t->b[i].stream, t->b[i].seg);
    return HBM_OK;
}

/* release_expandable_segment: a wholly unmapped segment goes away (no trace event) */
static void release_expandable(torch *t, uint32_t i) {
    tes *x = es_of(t, i);
    set_erase(t, &pool_of(t, i)->unmapped, 0, i);
    hbmi_map_destroy(&x->pages);
    x->live = 0;
    drop_block(t, i);
}

/* ---- segments ----------------------------------------------------------------------------- */

/* release_block: cudaFree of an unsplit cached block */
static void release_block(torch *t, uint32_t i) {
    tblk *x = &t->b[i];
    emit(t, HBM_EV_SEGMENT_FREE, x->addr, x->size, x->stream, x->seg);
    uint64_t dev_addr = x->addr;
    hbmi_map_del(&t->segdev, x->addr, &dev_addr);
    hbm_device_free(t->dev, dev_addr);
    fs_erase(t, &pool_of(t, i)->blocks, i);
    reserved_sub(t, t->b[i].size);
    t->nsegments--;
    drop_block(t, i);
}

/* alloc_block: a new segment (or mapped pages). HBM_ERR_OOM when the device (or the
 * memory fraction) says no; *out is in no set. */
static hbm_status alloc_block(torch *t, tpool *p, uint64_t stream, uint64_t size, uint64_t alloc_size, uint32_t *out) {
    if (t->set_fraction && t->total_allocated + alloc_size > t->allowed)
        return t->quiet ? HBM_ERR_OOM : hbmi_error(HBM_ERR_OOM, "torch: the memory fraction allows %" PRIu64 " bytes", t->allowed);
    if (t->expandable) return alloc_expandable(t, p, stream, size, out);
    hbm_status s = reserve(t, 1);
    uint64_t addr, at;
    if (!s) s = hbmi_map_reserve(&t->segdev, t->segdev.count + 1);
    if (!s) s = hbm_device_alloc(t->dev, alloc_size, &addr);
    if (s) return s;
    at = addr; /* the device's own, which the hook may keep */
    if (t->addr_fn && t->addr_fn(t->addr_user, HBM_EV_SEGMENT_ALLOC, alloc_size, alloc_size, &at)) {
        hbmi_map_put(&t->segdev, at, addr);
        addr = at;
    }
    uint32_t i = new_block(t);
    t->b[i] = (tblk){.addr = addr, .size = alloc_size, .stream = stream, .seg = addr, .small = (uint8_t)p->small,
                     .state = T_FREE};
    t->nsegments++;
    reserved_add(t, alloc_size);
    emit(t, HBM_EV_SEGMENT_ALLOC, addr, alloc_size, stream, addr);
    *out = i;
    return HBM_OK;
}

/* release_available_cached_blocks: with max_split_size set, free the smallest oversize
 * cached block that covers the request (or max_split_size), else oversize blocks from the
 * largest down until that much is freed. 1 if it freed enough. */
static int release_available(torch *t, tpool *p, uint64_t stream, uint64_t size) {
    if (t->max_split == UINT64_MAX) return 0;
    uint64_t key = size < t->max_split ? t->max_split : size;
    uint32_t k = fs_lower_bound(t, &p->blocks, stream, key);
    if (!k) { /* oversize blocks are over 2 MiB: the stream's sorted array, from its end */
        fstream *s = fs_find(&p->blocks, stream);
        uint64_t released = 0;
        while (s && s->big.n && released < key) {
            uint32_t cur = s->big.v[s->big.n - 1];
            if (t->b[cur].size < t->max_split || t->b[cur].es) break;
            released += t->b[cur].size;
            release_block(t, cur);
        }
        return released >= key;
    }
    if (t->b[k - 1].es) return 0; /* PyTorch asserts here; an expandable block is never cudaFree'd */
    release_block(t, k - 1);
    return 1;
}

/* release_blocks: every unsplit cached block of the pool; free pages of expandable ones */
static hbm_status release_pool(torch *t, tpool *p) {
    size_t nun = 0, n = p->dirty ? fs_count(&p->blocks) : 0;
    if (!n) return HBM_OK;
    uint32_t *order = hbmi_malloc(n * sizeof *order), *to_unmap = order;
    if (!order) return hbmi_error(HBM_ERR_NOMEM, "out of host memory emptying a torch pool");
    fs_list(t, &p->blocks, order); /* releasing a block changes no other's place */
    for (size_t k = 0; k < n; k++) {
        uint32_t i = order[k];
        if (t->b[i].es) to_unmap[nun++] = i;
        else if (!is_split(&t->b[i])) release_block(t, i);
    }
    hbm_status s = HBM_OK;
    for (size_t k = 0; k < nun && !s; k++) {
        uint32_t i = to_unmap[k];
        s = unmap_block(t, i);
        if (!s && t->b[i].state == T_UNMAPPED && !is_split(&t->b[i])) release_expandable(t, i);
    }
    hbmi_free(order);
    if (!s) p->dirty = 0;
    return s;
}

/* release_cached_blocks (emptyCache): the large pool, then the small one */
static hbm_status release_cached(torch *t) {
    hbm_status s = release_pool(t, &t->pool[0]);
    return s ? s : release_pool(t, &t->pool[1]);
}

/* garbage_collect_cached_blocks: above threshold x the allowed memory, free unsplit large
 * cached blocks at least as old (in get_free_block calls) as the average, repeatedly,
 * until the excess is freed. */
static void garbage_collect(torch *t) {
    tpool *p = &t->pool[0];
    uint64_t threshold = (uint64_t)(t->gc_threshold * (double)t->allowed);
    if (t->total_allocated <= threshold) return;
    size_t n = fs_count(&p->blocks);
    uint32_t *order = n ? hbmi_malloc(n * sizeof *order) : NULL;
    if (!order) return; /* nothing cached, or no host memory: no collection this time */
    uint64_t target = t->total_allocated - threshold, reclaimed = 0, total_age = 0;
    int64_t count = 0;
    n = fs_list(t, &p->blocks, order);
    for (size_t k = 0; k < n; k++) {
        const tblk *x = &t->b[order[k]];
        if (!is_split(x) && !x->es) total_age += (uint64_t)(p->gc_calls - x->gc_base), count++;
    }
    int freed = 1;
    while (reclaimed < target && freed && count > 0) {
        double age_threshold = (double)total_age / (double)count;
        freed = 0;
        n = fs_list(t, &p->blocks, order);
        for (size_t k = 0; k < n; k++) {
            uint32_t i = order[k];
            const tblk *x = &t->b[i];
            uint64_t age = (uint64_t)(p->gc_calls - x->gc_base);
            if (!is_split(x) && !x->es && (double)age >= age_threshold) {
                freed = 1;
                reclaimed += x->size;
                total_age -= age;
                count--;
                release_block(t, i);
            }
        }
    }
    hbmi_free(order);
}

/* ---- malloc / free ------------------------------------------------------------------------- */

static uint64_t expandable_size(const torch *t, uint32_t i) {
    const tblk *x = &t->b[i];
    return x->size + (x->next && t->b[x->next - 1].state == T_UNMAPPED ? t->b[x->next - 1].size : 0);
}

/* get_free_block: best fit on the stream, with the oversize rules */
static int get_free_block(torch *t, tpool *p, uint64_t stream, uint64_t size, uint32_t *out) {
    if (t->set_fraction && t->gc_threshold > 0.0) p->gc_calls++;
    uint32_t k = fs_lower_bound(t, &p->blocks, stream, size);
    if (!k) return 0;
    if (t->b[k - 1].es) {
        if (t->expandable) { /* an expandable block counts with the unmapped space after it */
            uint32_t nx;
            while (t->b[k - 1].es && (nx = fs_next(t, &p->blocks, k - 1)) &&
                   expandable_size(t, nx - 1) < expandable_size(t, k - 1))
                k = nx;
        } else {
            do k = fs_next(t, &p->blocks, k - 1);
            while (k && t->b[k - 1].es);
            if (!k) return 0;
        }
    }
    uint64_t bs = t->b[k - 1].size;
    if (size < t->max_split && bs >= t->max_split) return 0;
    if (size >= t->max_split && bs >= size + t->max_nsr) return 0;
    *out = k - 1;
    fs_erase(t, &p->blocks, k - 1);
    return 1;
}

static int should_split(const torch *t, uint32_t i, uint64_t size) {
    uint64_t rem = t->b[i].size - size;
    if (t->b[i].small || t->expandable) return rem >= K_MIN_BLOCK;
    return size < t->max_split && rem > K_SMALL_SIZE;
}

void hbmi_torch_set_ordinal(void *self, int ordinal) { ((torch *)self)->ordinal = ordinal; }

static hbm_status oom(torch *t, uint64_t alloc_size) {
    uint64_t dfree = 0, dtotal = 0;
    if (t->quiet) return t->st.num_ooms++, HBM_ERR_OOM;
    hbm_device_mem_info(t->dev, &dfree, &dtotal);
    char a[32], b[32], c[32], d[32], e[32], allowed[64] = "";
    if (t->set_fraction) snprintf(allowed, sizeof allowed, "%s allowed; ", hbmi_size_torch(t->allowed, e));
    t->st.num_ooms++;
    return hbmi_error(HBM_ERR_OOM,
                      "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is "
                      "free. %sOf the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but "
                      "unallocated. If reserved but unallocated memory is large try setting "
                      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
                      hbmi_size_torch(alloc_size, a), t->ordinal, hbmi_size_torch(dtotal, b), hbmi_size_torch(dfree, c), allowed,
                      hbmi_size_torch(t->st.bytes_in_use, d), hbmi_size_torch(t->total_allocated - t->st.bytes_in_use, e));
}

static hbm_status torch_alloc_stream(void *self, uint64_t orig, const hbm_tag *tag, uint32_t tag_id, uint64_t stream,
                                     uint64_t *addr_out) {
    torch *t = self;
    (void)tag;
    if (orig > K_MAX_REQUEST) return oom(t, orig);
    uint64_t size = round_size(t, orig), alloc_size = allocation_size(size);
    tpool *p = &t->pool[size <= K_SMALL_SIZE];
    hbm_status s = add_stream(t, stream);
    if (!s) s = reserve(t, 2);
    if (s) return s;
    uint32_t i;
    if (!get_free_block(t, p, stream, size, &i)) {
        if (t->set_fraction && t->gc_threshold > 0.0) garbage_collect(t);
        s = alloc_block(t, p, stream, size, alloc_size, &i);
        if (s == HBM_ERR_OOM && release_available(t, p, stream, size)) s = alloc_block(t, p, stream, size, alloc_size, &i);
        if (s == HBM_ERR_OOM && !(s = release_cached(t))) {
            t->num_alloc_retries++;
            s = alloc_block(t, p, stream, size, alloc_size, &i);
        }
        if (s == HBM_ERR_OOM) return oom(t, alloc_size);
        if (s) return s;
    }
    if ((s = reserve(t, 1))) { /* give the block back as it was */
        insert_free(t, i);
        return s;
    }
    if (should_split(t, i, size)) { /* the request takes the front; the rest stays cached */
        uint32_t n = carve_front(t, i, size);
        tblk *x = &t->b[i];
        x->addr += size;
        x->size -= size;
        insert_free(t, i);
        i = n;
    }
    tblk *x = &t->b[i];
    x->state = T_LIVE;
    x->requested = orig;
    x->tag_id = tag_id;
    x->seq = ++t->st.num_allocs;
    hbmi_map_insert(&t->live, x->addr, i); /* reserved, and a new block's address is not live */
    t->st.bytes_in_use += x->size;
    if (x->size > t->st.largest_alloc_size) t->st.largest_alloc_size = x->size;
    hbmi_stats_update_peaks(&t->st);
    *addr_out = x->addr;
    return HBM_OK;
}

static hbm_status torch_alloc(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t *addr_out) {
    return torch_alloc_stream(self, size, tag, tag_id, HBM_STREAM_DEFAULT, addr_out);
}

static hbm_status torch_free(void *self, uint64_t addr) {
    torch *t = self;
    uint64_t k;
    if (!hbmi_map_del(&t->live, addr, &k))
        return hbmi_error(HBM_ERR_BAD_FREE, "torch: free of 0x%" PRIx64 ", which is not a live allocation", addr);
    uint32_t i = (uint32_t)k;
    t->st.num_frees++;
    t->st.bytes_in_use -= t->b[i].size;
    t->b[i].state = T_FREE;
    t->b[i].tag_id = 0;
    try_merge(t, i, t->b[i].prev);
    try_merge(t, i, t->b[i].next);
    insert_free(t, i);
    return HBM_OK;
}

static hbm_status torch_free_stream(void *self, uint64_t addr, uint64_t stream) {
    (void)stream; /* a block returns to the stream it was allocated on */
    return torch_free(self, addr);
}

static hbm_status torch_trim(void *self) { return release_cached(self); }

/* ---- stats, check, walk ------------------------------------------------------------------- */

static uint64_t largest_free(const torch *t) {
    uint64_t a = fs_largest(t, &t->pool[0].blocks), b = fs_largest(t, &t->pool[1].blocks);
    return a > b ? a : b;
}

static void torch_stats(void *self, hbm_stats *out) {
    torch *t = self;
    t->st.largest_free_block_bytes = largest_free(t);
    uint64_t regions = t->nsegments;
    for (size_t k = 0; k < t->nes; k++) regions += t->es[k].live && t->es[k].pages.count;
    t->st.num_regions = regions;
    *out = t->st;
}

static void torch_reset_peaks(void *self) { hbmi_stats_reset_peaks(&((torch *)self)->st); }

/* Size c's express lane: its blocks are the list's express blocks, in the list's order. */
static hbm_status check_express(const torch *t, const fstream *s, unsigned c) {
    const tblk *b = t->b;
    uint32_t e = s->cls[c].shead, back = 0;
    for (uint32_t j = s->cls[c].head; j; j = t->fl[j - 1].bnext) {
        if (!is_express(j)) continue;
        if (e != j || b[j - 1].sprev != back)
            return hbmi_error(HBM_ERR_CORRUPT, "torch: free block 0x%" PRIx64 " misplaced in its express lane", b[j - 1].addr);
        back = j;
        e = t->fl[j - 1].snext;
    }
    if (e || s->cls[c].stail != back)
        return hbmi_error(HBM_ERR_CORRUPT, "torch: the express lane of size %u ends elsewhere", (c + 1) * K_MIN_BLOCK);
    return HBM_OK;
}

/* The free lists: each block in its stream's place, sizes and addresses in order, the
 * bitmaps saying which lists are non-empty; mark[i] = pool + 1 for each block listed. */
static hbm_status check_free_lists(const torch *t, int q, uint8_t *mark, uint64_t *listed) {
    const fset *f = &t->pool[q].blocks;
    for (size_t k = 0; k < f->n; k++) {
        const fstream *s = f->s[k];
        if (k && f->s[k - 1]->stream >= s->stream)
            return hbmi_error(HBM_ERR_CORRUPT, "torch: the streams of a pool are out of order");
        size_t n = 0;
        const tblk *prev = NULL;
        for (unsigned c = 0; c < F_CLASSES; c++) {
            int on = (s->bits[c >> 6] >> (c & 63)) & 1;
            if (on != !!s->cls[c].head || !s->cls[c].head != !s->cls[c].tail || (s->bits[c >> 6] && !((s->top >> (c >> 6)) & 1)))
                return hbmi_error(HBM_ERR_CORRUPT, "torch: the bitmap of size %u disagrees with its list", (c + 1) * K_MIN_BLOCK);
            uint32_t back = 0;
            for (uint32_t j = s->cls[c].head; j; back = j, j = t->fl[j - 1].bnext) {
                if (!t->fl[j - 1].bnext && s->cls[c].tail != j)
                    return hbmi_error(HBM_ERR_CORRUPT, "torch: the list of size %u ends elsewhere", (c + 1) * K_MIN_BLOCK);
                const tblk *x = &t->b[j - 1];
                if (x->state != T_FREE || x->stream != s->stream || x->small != q || f_class(x->size) != c || t->fl[j - 1].addr != x->addr ||
                    x->size > F_BIN_MAX || x->bprev != back || mark[j - 1] || (prev && prev->size == x->size && prev->addr >= x->addr))
                    return hbmi_error(HBM_ERR_CORRUPT, "torch: free block 0x%" PRIx64 " misplaced in its list", x->addr);
                mark[j - 1] = (uint8_t)(q + 1);
                prev = x;
                n++;
            }
            hbm_status st = check_express(t, s, c);
            if (st) return st;
        }
        for (size_t v = 0; v < s->big.n; v++) {
            const tblk *x = &t->b[s->big.v[v]];
            if (x->state != T_FREE || x->stream != s->stream || x->small != q || x->size <= F_BIN_MAX ||
                mark[s->big.v[v]] || (v && key_cmp(&t->b[s->big.v[v - 1]], 1, x->stream, x->size, x->addr) >= 0))
                return hbmi_error(HBM_ERR_CORRUPT, "torch: free block 0x%" PRIx64 " misplaced in the large ones", x->addr);
            mark[s->big.v[v]] = (uint8_t)(q + 1);
            n++;
        }
        if (n != s->n) return hbmi_error(HBM_ERR_CORRUPT, "torch: a stream counts %zu free blocks, lists %zu", s->n, n);
        *listed += n;
    }
    return HBM_OK;
}

/* Every block: tiling, links, coalescing, and where it must be listed; sums for the stats. */
static hbm_status check_blocks(const torch *t, const uint8_t *mark, uint64_t *live, uint64_t *mapped, uint64_t *nlive,
                               uint64_t *nfree, uint64_t *nun, uint64_t *es_mapped) {
    for (uint32_t i = 0; i < t->blocks.n; i++) {
        const tblk *x = &t->b[i];
        if (x->state == T_UNUSED) continue;
        size_t at;
        if (x->next) {
            const tblk *y = &t->b[x->next - 1];
            if (y->state == T_UNUSED || y->prev != i + 1 || y->addr != x->addr + x->size || y->seg != x->seg)
                return hbmi_error(HBM_ERR_CORRUPT, "torch: block 0x%" PRIx64 " and the next do not tile", x->addr);
            if (x->state != T_LIVE && x->state == y->state)
                return hbmi_error(HBM_ERR_CORRUPT, "torch: free neighbours at 0x%" PRIx64 " not coalesced", x->addr);
        }
        if (x->prev && t->b[x->prev - 1].next != i + 1)
            return hbmi_error(HBM_ERR_CORRUPT, "torch: block 0x%" PRIx64 " has a broken prev link", x->addr);
        if (!x->prev && !x->es && x->seg != x->addr)
            return hbmi_error(HBM_ERR_CORRUPT, "torch: segment head 0x%" PRIx64 " is not its segment's base", x->addr);
        if (x->es && (!t->es[x->es - 1].live || x->small != t->es[x->es - 1].small))
            return hbmi_error(HBM_ERR_CORRUPT, "torch: block 0x%" PRIx64 " in a dead segment or the wrong pool", x->addr);
        if (x->es && x->state != T_UNMAPPED) *es_mapped += x->size;
        if (x->state == T_LIVE) {
            uint64_t k;
            if (!hbmi_map_get(&t->live, x->addr, &k) || k != i)
                return hbmi_error(HBM_ERR_CORRUPT, "torch: live block 0x%" PRIx64 " is not indexed", x->addr);
            *live += x->size, *mapped += x->size, ++*nlive;
        } else if (x->state == T_FREE) {
            if (mark[i] != x->small + 1)
                return hbmi_error(HBM_ERR_CORRUPT, "torch: free block 0x%" PRIx64 " is not cached", x->addr);
            *mapped += x->size, ++*nfree;
        } else {
            if (!x->es || !set_find(t, &t->pool[x->small].unmapped, 0, i, &at))
                return hbmi_error(HBM_ERR_CORRUPT, "torch: unmapped block 0x%" PRIx64 " is not listed", x->addr);
            ++*nun;
        }
    }
    return HBM_OK;
}

static int tblk_unused(const void *rec) { return ((const tblk *)rec)->state == T_UNUSED; }

static hbm_status torch_check(void *self) {
    torch *t = self;
    uint64_t live = 0, mapped = 0, nlive = 0, nfree = 0, nun = 0, es_mapped = 0, listed = 0;
    if (hbmi_pool_check(&t->blocks, t->b, sizeof *t->b, offsetof(tblk, next), tblk_unused, "torch")) return HBM_ERR_CORRUPT;
    if (hbmi_map_check(&t->live)) return hbmi_error_prefix(HBM_ERR_CORRUPT, "torch: the live index: ");
    uint8_t *mark = hbmi_calloc(t->blocks.n + 1, 1);
    if (!mark) return hbmi_error(HBM_ERR_NOMEM, "out of host memory checking a torch pool");
    hbm_status st = check_free_lists(t, 0, mark, &listed);
    if (!st) st = check_free_lists(t, 1, mark, &listed);
    if (!st) st = check_blocks(t, mark, &live, &mapped, &nlive, &nfree, &nun, &es_mapped);
    hbmi_free(mark);
    if (st) return st;
    nfree -= listed; /* 0 when every free block is listed once */

    uint64_t pages = 0;
    for (size_t k = 0; k < t->nes; k++)
        if (t->es[k].live) pages += t->es[k].pages.count * t->es[k].page;
    if (live != t->st.bytes_in_use || nlive != t->live.count || mapped != t->total_allocated ||
        nfree || nun != t->pool[0].unmapped.n + t->pool[1].unmapped.n ||
        pages != es_mapped || t->st.bytes_reserved != t->total_allocated)
        return hbmi_error(HBM_ERR_CORRUPT,
                          "torch: counted %" PRIu64 " live bytes in %" PRIu64 " blocks and %" PRIu64
                          " mapped bytes; stats say %" PRIu64 " in use, %" PRIu64 " reserved",
                          live, nlive, mapped, t->st.bytes_in_use, t->total_allocated);
    return HBM_OK;
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Regions: runs of mapped blocks (a cudaMalloc segment, or mapped pages of an expandable one) */
static hbm_status torch_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    torch *t = self;
    /* (address, index) of each region's first block, sorted by address */
    uint64_t *keys = hbmi_malloc((t->blocks.n ? t->blocks.n : 1) * 2 * sizeof *keys);
    if (!keys) return hbmi_error(HBM_ERR_NOMEM, "out of host memory walking a torch pool");
    size_t n = 0;
    for (uint32_t i = 0; i < t->blocks.n; i++) {
        const tblk *x = &t->b[i];
        if ((x->state == T_LIVE || x->state == T_FREE) && (!x->prev || t->b[x->prev - 1].state == T_UNMAPPED))
            keys[2 * n] = x->addr, keys[2 * n + 1] = i, n++;
    }
    hbmi_qsort(keys, n, 2 * sizeof *keys, u64_cmp);
    int stop = 0;
    for (size_t k = 0; k < n && !stop; k++) {
        uint32_t h = (uint32_t)keys[2 * k + 1], j;
        uint64_t size = 0;
        for (j = h + 1; j && t->b[j - 1].state != T_UNMAPPED; j = t->b[j - 1].next) size += t->b[j - 1].size;
        hbm_block r = {HBM_BLOCK_REGION, t->b[h].addr, size, 0, NULL, 0};
        stop = fn(user, &r, 0);
        for (j = h + 1; j && !stop && t->b[j - 1].state != T_UNMAPPED; j = t->b[j - 1].next) {
            const tblk *x = &t->b[j - 1];
            int is_live = x->state == T_LIVE;
            hbm_block blk = {is_live ? HBM_BLOCK_LIVE : HBM_BLOCK_FREE, x->addr, x->size, is_live ? x->requested : 0,
                             NULL, is_live ? x->seq : 0};
            stop = fn(user, &blk, is_live ? x->tag_id : 0);
        }
    }
    hbmi_free(keys);
    return HBM_OK;
}

static void torch_destroy(void *self) {
    torch *t = self;
    for (uint32_t i = 0; i < t->blocks.n; i++) { /* cudaMalloc segments: their first block */
        uint64_t a = t->b[i].addr;
        if (t->b[i].state == T_UNUSED || t->b[i].es || t->b[i].prev) continue;
        hbmi_map_get(&t->segdev, a, &a);
        hbm_device_free(t->dev, a);
    }
    hbmi_map_destroy(&t->segdev);
    for (size_t k = 0; k < t->nes; k++) {
        if (!t->es[k].live) continue;
        for (size_t j = 0; j < t->es[k].pages.cap; j++)
            if (t->es[k].pages.s[j].key) hbm_device_free(t->dev, t->es[k].pages.s[j].val);
        hbmi_map_destroy(&t->es[k].pages);
    }
    for (int q = 0; q < 2; q++) {
        fs_destroy(&t->pool[q].blocks);
        hbmi_free(t->pool[q].unmapped.v);
    }
    hbmi_map_destroy(&t->live);
    hbmi_free(t->es);
    hbmi_free(t->fl);
    hbmi_pool_destroy(&t->blocks, (void **)&t->b);
    hbmi_free(t);
}

static const hbm_allocator_ops torch_ops = {
    .name = "torch", .alloc = torch_alloc, .free = torch_free, .stats = torch_stats,
    .reset_peaks = torch_reset_peaks, .check = torch_check, .walk = torch_walk, .trim = torch_trim,
    .rounded_size = torch_rounded, .destroy = torch_destroy, .alloc_stream = torch_alloc_stream,
    .free_stream = torch_free_stream};

hbm_status hbmi_torch_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                             const hbm_allocator_ops **ops, void **self) {
    if (cfg->expandable_segments) {
        hbm_device_info info;
        hbm_device_info_get(dev, &info);
        if (strcmp(info.kind, "sim"))
            return hbmi_error(HBM_ERR_NOT_AVAILABLE,
                              "torch: expandable_segments needs a sim: device (replay) in this build, not %s", info.kind);
    }
    uint64_t dfree = 0, dtotal = 0;
    hbm_status s = hbm_device_mem_info(dev, &dfree, &dtotal);
    if (s) return s;
    torch *t = hbmi_calloc(1, sizeof *t);
    if (!t) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a torch pool");
    t->dev = dev;
    t->expandable = cfg->expandable_segments;
    t->max_split = cfg->max_split_size;
    t->max_nsr = cfg->max_non_split_rounding;
    memcpy(t->rp2, cfg->roundup_power2_divisions, sizeof t->rp2);
    t->gc_threshold = cfg->garbage_collection_threshold;
    /* PyTorch has no limit but the device unless the program set a memory fraction
     * (torch.cuda.set_per_process_memory_fraction): here fraction= or limit= */
    t->set_fraction = strcmp(cfg->source[HBM_OPT_fraction], "default") || cfg->limit;
    t->allowed = bytes_limit;
    t->dev_total = dtotal;
    t->va_next = TORCH_VA_BASE;
    t->st.bytes_limit = t->set_fraction ? bytes_limit : dtotal;
    t->pool[1].small = 1;
    hbmi_map_init(&t->segdev);
    if ((s = reserve(t, 8))) {
        torch_destroy(t);
        return s;
    }
    *ops = &torch_ops;
    *self = t;
    return HBM_OK;
}

/* ---- replay hooks (alloc/torch_caching.h) ------------------------------------------------------------ */

int hbmi_torch_is(const hbm_allocator *a) { return a && a->ops == &torch_ops; }
void *hbmi_torch_policy(const hbm_allocator *a) { return a->self; }

void hbmi_allocator_set_ordinal(hbm_allocator *a, int ordinal) {
    if (!a) return;
    a->ordinal = ordinal < 0 ? 0 : ordinal;
    if (hbmi_torch_is(a)) hbmi_torch_set_ordinal(a->self, a->ordinal);
}

int hbmi_torch_set_quiet(hbm_allocator *a, int on) {
    if (a->ops != &torch_ops) return 0;
    ((torch *)a->self)->quiet = on;
    return 1;
}

const uint64_t *hbmi_torch_in_use(const hbm_allocator *a) {
    return a->ops == &torch_ops ? &((const torch *)a->self)->st.bytes_in_use : NULL;
}

void hbmi_torch_set_event_fn(void *self, hbmi_torch_event_fn fn, void *user) {
    torch *t = self;
    t->ev_fn = fn;
    t->ev_user = user;
}

void hbmi_torch_set_addr_fn(void *self, hbmi_torch_addr_fn fn, void *user) {
    torch *t = self;
    t->addr_fn = fn;
    t->addr_user = user;
}

uint64_t hbmi_torch_segment_of(void *self, uint64_t addr) {
    torch *t = self;
    uint64_t k;
    return hbmi_map_get(&t->live, addr, &k) ? t->b[k].seg : 0;
}

hbm_status hbmi_torch_empty_cache(void *self) { return release_cached(self); }

uint64_t hbmi_torch_allocation_size(uint64_t rounded) { return allocation_size(rounded); }

/* one block of a seeded segment, appended after *last (index+1, 0 = none) */
static uint32_t seed_block(torch *t, uint64_t seg, uint64_t addr, uint64_t size, uint64_t stream, int small,
                           uint32_t *last) {
    uint32_t i = new_block(t);
    t->b[i] = (tblk){.addr = addr, .size = size, .stream = stream, .seg = seg, .small = (uint8_t)small,
                     .state = T_FREE, .prev = *last};
    if (*last) t->b[*last - 1].next = i + 1;
    *last = i + 1;
    return i;
}

hbm_status hbmi_torch_seed_segment(void *self, uint64_t addr, uint64_t size, uint64_t stream, int small,
                                   const hbmi_torch_seed_block *live, size_t nlive) {
    torch *t = self;
    uint64_t at = addr;
    for (size_t k = 0; k < nlive; k++) {
        if (live[k].addr < at || !live[k].size || live[k].size % K_MIN_BLOCK || live[k].addr + live[k].size > addr + size ||
            hbmi_map_get(&t->live, live[k].addr, NULL))
            return hbmi_error(HBM_ERR_INVALID, "torch: seeded block 0x%" PRIx64 " (%" PRIu64 " bytes) is not inside segment "
                              "0x%" PRIx64 " after the previous one", live[k].addr, live[k].size, addr);
        at = live[k].addr + live[k].size;
    }
    if (!size || size % K_MIN_BLOCK) return hbmi_error(HBM_ERR_INVALID, "torch: a seeded segment of %" PRIu64 " bytes", size);
    hbm_status s = add_stream(t, stream);
    if (!s) s = reserve(t, 2 * nlive + 2);
    if (!s) s = hbmi_map_reserve(&t->segdev, t->segdev.count + 1);
    if (!s) s = live_reserve(t, nlive);
    uint64_t dev_addr;
    if (!s) s = hbm_device_alloc(t->dev, size, &dev_addr);
    if (s) return s;
    hbmi_map_put(&t->segdev, addr, dev_addr);
    uint32_t last = 0;
    at = addr;
    for (size_t k = 0; k <= nlive; k++) {
        uint64_t end = k < nlive ? live[k].addr : addr + size;
        if (end > at) insert_free(t, seed_block(t, addr, at, end - at, stream, small, &last));
        if (k == nlive) break;
        uint32_t i = seed_block(t, addr, live[k].addr, live[k].size, stream, small, &last);
        tblk *x = &t->b[i];
        x->state = T_LIVE;
        x->requested = live[k].requested;
        x->seq = ++t->st.num_allocs;
        hbmi_map_put(&t->live, x->addr, i); /* reserved */
        t->st.bytes_in_use += x->size;
        at = live[k].addr + live[k].size;
    }
    t->nsegments++;
    reserved_add(t, size);
    hbmi_stats_update_peaks(&t->st);
    return HBM_OK;
}

/* the blocks of [at, end) of expandable segment e: free gaps and live blocks, or one
 * unmapped block (unmapped: 1); appended after *last */
static void seed_es_span(torch *t, uint32_t e, uint64_t base, uint64_t at, uint64_t end, uint64_t stream, int small,
                         const hbmi_torch_seed_block *live, size_t nlive, int unmapped, uint32_t *last) {
    if (unmapped) {
        if (end <= at) return;
        uint32_t i = seed_block(t, base, at, end - at, stream, small, last);
        t->b[i].es = e + 1;
        t->b[i].state = T_UNMAPPED;
        set_insert(t, &t->pool[small].unmapped, 0, i);
        return;
    }
    for (size_t k = 0; k <= nlive; k++) {
        uint64_t stop = k < nlive ? live[k].addr : end;
        if (stop > at) {
            uint32_t i = seed_block(t, base, at, stop - at, stream, small, last);
            t->b[i].es = e + 1;
            insert_free(t, i);
        }
        if (k == nlive) break;
        uint32_t i = seed_block(t, base, live[k].addr, live[k].size, stream, small, last);
        tblk *x = &t->b[i];
        x->es = e + 1;
        x->state = T_LIVE;
        x->requested = live[k].requested;
        x->seq = ++t->st.num_allocs;
        hbmi_map_put(&t->live, x->addr, i); /* reserved */
        t->st.bytes_in_use += x->size;
        at = live[k].addr + live[k].size;
    }
}

hbm_status hbmi_torch_seed_expandable(void *self, uint64_t base, uint64_t stream, int small,
                                      const hbmi_torch_seed_run *runs, size_t nruns) {
    torch *t = self;
    uint64_t page = small ? K_SMALL_BUFFER : K_LARGE_BUFFER, at = base, nlive = 0, pages = 0, at_live = base;
    if (!t->expandable) return hbmi_error(HBM_ERR_INVALID, "torch: an expandable segment seeded without expandable_segments");
    for (size_t r = 0; r < nruns; r++) {
        const hbmi_torch_seed_run *g = &runs[r];
        if (g->addr < at || !g->size || (g->addr - base) % page || g->size % page)
            return hbmi_error(HBM_ERR_INVALID, "torch: seeded run 0x%" PRIx64 " (%" PRIu64 " bytes) is not whole %" PRIu64
                              "-byte pages after 0x%" PRIx64, g->addr, g->size, page, at);
        uint64_t b = g->addr > at_live ? g->addr : at_live, span = g->addr + g->size; /* a block may go on into */
        for (size_t q = r + 1; q < nruns && runs[q].addr == span; q++) span += runs[q].size; /* the run after */
        for (size_t k = 0; k < g->nlive; k++) {
            const hbmi_torch_seed_block *x = &g->live[k];
            if (x->addr < b || !x->size || x->size % K_MIN_BLOCK || x->addr + x->size > span ||
                hbmi_map_get(&t->live, x->addr, NULL))
                return hbmi_error(HBM_ERR_INVALID, "torch: seeded block 0x%" PRIx64 " (%" PRIu64 " bytes) is not inside run "
                                  "0x%" PRIx64 " after the previous one", x->addr, x->size, g->addr);
            b = x->addr + x->size;
        }
        at = g->addr + g->size;
        at_live = b;
        nlive += g->nlive;
        pages += g->size / page;
    }
    uint64_t space = t->dev_total + t->dev_total / 8, npages = (space + page - 1) / page;
    if (npages < (at - base) / page) npages = (at - base) / page;
    if (!npages) npages = 1;
    hbmi_torch_seed_block *all = nlive ? hbmi_malloc(nlive * sizeof *all) : NULL; /* a span's blocks */
    if (nlive && !all) return hbmi_error(HBM_ERR_NOMEM, "torch: out of host memory seeding a segment");
    hbm_status s = add_stream(t, stream);
    if (!s) s = hbmi_grow((void **)&t->es, &t->capes, t->nes + 1, sizeof *t->es);
    if (!s) s = reserve(t, 2 * (size_t)nlive + 2 * nruns + 2);
    if (!s) s = live_reserve(t, nlive);
    if (s) {
        hbmi_free(all);
        return s;
    }
    uint32_t e = es_new(t, page, npages, stream, small);
    tes *x = &t->es[e];
    x->base = base;
    if ((s = hbmi_map_reserve(&x->pages, pages))) return s;
    for (size_t r = 0; r < nruns && !s; r++) /* the physical pages, as map_block takes them */
        for (uint64_t k = (runs[r].addr - base) / page; k < (runs[r].addr + runs[r].size - base) / page && !s; k++) {
            uint64_t h;
            if (!(s = hbm_device_alloc(t->dev, page, &h))) hbmi_map_put(&x->pages, k, h);
        }
    if (s) {
        release_pages(t, x, 0, npages);
        hbmi_map_destroy(&x->pages);
        x->live = 0;
        hbmi_free(all);
        return s;
    }
    /* runs that touch are one mapped span, as PyTorch holds them: a free gap across their
     * boundary is one block (try_merge_blocks merges mapped neighbours), and a live block
     * may cross it */
    uint32_t last = 0;
    at = base;
    for (size_t r = 0; r < nruns;) {
        size_t q = r + 1, nl = runs[r].nlive;
        uint64_t end = runs[r].addr + runs[r].size;
        for (; q < nruns && runs[q].addr == end; q++) end += runs[q].size, nl += runs[q].nlive;
        seed_es_span(t, e, base, at, runs[r].addr, stream, small, NULL, 0, 1, &last);
        for (size_t j = r, o = 0; q > r + 1 && j < q; o += runs[j].nlive, j++)
            if (runs[j].nlive) memcpy(all + o, runs[j].live, runs[j].nlive * sizeof *all);
        seed_es_span(t, e, base, runs[r].addr, end, stream, small, q > r + 1 ? all : runs[r].live, nl, 0, &last);
        reserved_add(t, end - runs[r].addr);
        at = end;
        r = q;
    }
    seed_es_span(t, e, base, at, base + npages * page, stream, small, NULL, 0, 1, &last);
    hbmi_free(all);
    hbmi_stats_update_peaks(&t->st);
    return HBM_OK;
}
