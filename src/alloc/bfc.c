/* bfc.c - XLA's best-fit-with-coalescing allocator (xla/tsl/framework/bfc_allocator.cc),
 * with an O(1) two-level segregated fit (TLSF-style) in place of XLA's std::set bins.
 *
 * Memory comes from the device in regions: one region of the whole limit at open
 * (preallocate=true), or regions that grow 2 MiB, 4 MiB, 8 MiB... on demand. A region is
 * tiled by chunks (256-byte multiples); a chunk is live or free; free neighbours are
 * coalesced at once, so no two adjacent chunks are ever both free.
 *
 * Free chunks sit in size classes: the first level is the power of two of size/256, the
 * second level splits each power of two into 64 linear classes (sizes below 64 x 256 B
 * have one class each, so they fit exactly). Two bitmaps find the first non-empty class
 * with one ctz each. An allocation takes the first chunk of its own class if that is large
 * enough, else the first chunk of the next non-empty class (any chunk there fits); when no
 * larger class has a chunk, the whole own class is searched, so an allocation never fails
 * or grows the pool while a chunk that fits exists. No loop on the usual paths; the fit is
 * not exact (address high-water 1.006x - 1.010x of exact best fit in bench/bench_alloc.c).
 *
 * Metadata is out of band and proportional to the number of chunks: 32-byte chunk records
 * (a live block's state, requested size and sequence number live in its record) in a
 * cache-aligned array whose slots core/pool.c counts and reuses, as for blocktab,
 * cuda_async, vmm and torch (the array itself is grown here: a zone, with the tag array
 * and the address index), a parallel array of tag ids that only walks read, and an
 * open-addressing table live address -> chunk with 4-byte slots, probed a 64-byte line (an
 * overflow count and 15 slots) at a time. At N live blocks the hot metadata is about
 * 32 B x chunks + 4 B x 1.4-2.8 N: a free reads one index line, the block's record and its
 * two neighbours' records.
 * Device memory is never touched.
 */
#include <inttypes.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "alloc/alloc_internal.h"
#include "hbm/size.h"

#define BFC_MIN 256u     /* granularity of chunk sizes (XLA's kMinAllocationSize) */
#define BFC_SHIFT 8
#define BFC_SLI 6        /* log2 of second-level classes per power of two */
#define BFC_SL (1u << BFC_SLI)
#define BFC_FL 52        /* size/256 < 2^56: first levels 0..50 */
#define NONE UINT32_MAX

#define MAX_RECORDS ((1u << 31) - 1) /* so that a slot of the address index keeps a tag bit */

/* The hot helpers are inlined into bfc_alloc and bfc_free whatever the compiler's cost
 * model says: a call per list operation was ~10 instructions of 30. */
#define BFC_HOT static inline __attribute__((always_inline))

/* The low 8 bits of a chunk's size and address (both multiples of 256) carry its state. */
#define F_LIVE 1u   /* size: a live block */
#define F_UNUSED 2u /* size: an unused record */
#define F_TAGGED 4u /* size: a live block with a tag id in tags[] */
#define F_MASK 255u

enum { CH_UNUSED = 0, CH_FREE = 1, CH_LIVE = 2 };

/* 32 bytes, two to a cache line: everything allocation and free touch, so that freeing a
 * block reads one record per chunk involved and writes nothing else. A free chunk holds its
 * exact address and size and its class-list links. A live chunk holds F_LIVE (and maybe
 * F_TAGGED) in the low bits of size, need - requested (0..255) in the low bits of addr, and
 * its allocation sequence number in place of the links. */
typedef struct bfc_chunk {
    uint64_t addr, size;
    uint32_t prev, next; /* physical neighbours inside the region, NONE at the ends */
    union {
        struct {
            uint32_t fprev, fnext; /* free: class-list links; unused: fnext = the pool's link */
        };
        uint64_t seq; /* live: allocation sequence number */
    };
} bfc_chunk;

static inline int ch_state(const bfc_chunk *c) {
    return c->size & F_LIVE ? CH_LIVE : c->size & F_UNUSED ? CH_UNUSED : CH_FREE;
}
static inline int ch_free(const bfc_chunk *c) { return !(c->size & (F_LIVE | F_UNUSED)); }
static inline uint64_t ch_addr(const bfc_chunk *c) { return c->addr & ~(uint64_t)F_MASK; }
static inline uint64_t ch_size(const bfc_chunk *c) { return c->size & ~(uint64_t)F_MASK; }

typedef struct bfc_region {
    uint64_t addr, size;
    uint32_t first; /* chunk at addr */
} bfc_region;

typedef struct bfc {
    hbm_device *dev;
    uint64_t quantum;     /* region sizes are multiples of this (256 and the device granularity) */
    uint64_t curr_region; /* size of the next region (XLA's curr_region_allocation_bytes_) */
    int release_on_oom;

    bfc_chunk *ch;   /* a zone (hbmi_zone_alloc): 64-byte aligned, huge pages when big */
    uint32_t *tags;  /* tag id of live records with F_TAGGED (read only by walks) */
    size_t tagcap;
    hbmi_pool recs;  /* ch's slots (core/pool.c): n handed out, cap allocated, the unused
                        ones listed through fnext; grown here (rec_grow), not by the pool */

    bfc_region *reg;
    size_t nreg, regcap;

    uint32_t *tab; /* live address -> chunk index, a zone as ch */
    size_t tabcap, tabcount;
    unsigned tabshift; /* 64 - log2 of the number of lines */
    unsigned tabib;    /* a slot's low tabib bits are a record index, the rest a tag */
    uint32_t tabhi;    /* the tag bits of a slot */

    uint64_t fl_bits;
    uint64_t sl_bits[BFC_FL];
    uint32_t heads[BFC_FL * BFC_SL];

    hbm_stats st;
    int quiet; /* hbmi_allocator_set_quiet */
} bfc;

/* ---- size classes ---------------------------------------------------------------------- */

static inline unsigned bfc_log2(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

/* Without a branch (sizes are random, so a branch on u < 64 was mispredicted a third of the
 * time): for u < 64, l = 6 and u >> 0 = u; above, the usual TLSF mapping. */
static inline void bfc_class(uint64_t size, unsigned *fl, unsigned *sl) {
    uint64_t u = size >> BFC_SHIFT;
    unsigned big = u >= BFC_SL;
    unsigned l = bfc_log2(u | BFC_SL);
    *fl = l - BFC_SLI + big;
    *sl = (unsigned)(u >> (l - BFC_SLI)) - (big << BFC_SLI);
}

static uint64_t bfc_round(uint64_t size) { return (size + (BFC_MIN - 1)) & ~(uint64_t)(BFC_MIN - 1); }

BFC_HOT void list_push(bfc *b, uint32_t i) {
    unsigned fl, sl;
    bfc_class(b->ch[i].size, &fl, &sl);
    uint32_t *head = &b->heads[fl * BFC_SL + sl];
    bfc_chunk *c = &b->ch[i];
    c->fprev = NONE;
    c->fnext = *head;
    if (*head != NONE) b->ch[*head].fprev = i;
    *head = i;
    b->sl_bits[fl] |= 1ull << sl;
    b->fl_bits |= 1ull << fl;
}

BFC_HOT void list_remove(bfc *b, uint32_t i) {
    bfc_chunk *c = &b->ch[i];
    if (c->fnext != NONE) b->ch[c->fnext].fprev = c->fprev;
    if (c->fprev != NONE) {
        b->ch[c->fprev].fnext = c->fnext;
        return;
    }
    unsigned fl, sl;
    bfc_class(c->size, &fl, &sl);
    b->heads[fl * BFC_SL + sl] = c->fnext;
    if (c->fnext == NONE) {
        b->sl_bits[fl] &= ~(1ull << sl);
        if (!b->sl_bits[fl]) b->fl_bits &= ~(1ull << fl);
    }
}

/* The smallest chunk of list h that holds need bytes, or NONE. */
static uint32_t scan_list(const bfc *b, uint32_t h, uint64_t need) {
    uint32_t best = NONE;
    uint64_t bs = UINT64_MAX;
    for (; h != NONE; h = b->ch[h].fnext) {
        uint64_t s = b->ch[h].size;
        if (s >= need && s < bs) {
            best = h;
            bs = s;
            if (s == need) break;
        }
    }
    return best;
}

/* A chunk of at least need bytes: the first of the request's own class if it is large
 * enough (in classes of one size it always is), else the first of the next non-empty
 * class, any of which fits; only when no larger class has a chunk is the own class
 * searched in full, so that nothing fails or grows the pool while a chunk fits. No loop
 * on the usual paths: a best-of-8 scan of each list cost ~1.2 mispredicted branches per
 * allocation on random sizes (the fit it bought was 1.0045x of exact best fit instead of
 * 1.0099x at 100,000 live blocks). */
#define NO_CLASS UINT32_MAX

/* *cls: the class whose head the chunk found is (for list_pop), or NO_CLASS. */
BFC_HOT uint32_t bfc_find(const bfc *b, uint64_t need, unsigned *cls) {
    unsigned fl, sl;
    bfc_class(need, &fl, &sl);
    *cls = fl * BFC_SL + sl;
    uint32_t h = b->heads[*cls];
    if (h != NONE && b->ch[h].size >= need) return h; /* always so in classes of one size */
    uint64_t slmap = sl + 1 < 64 ? b->sl_bits[fl] & (~0ull << (sl + 1)) : 0;
    if (!slmap) {
        uint64_t flmap = fl + 1 < 64 ? b->fl_bits & (~0ull << (fl + 1)) : 0;
        if (!flmap) { /* nothing larger: the whole own class, before asking the device */
            *cls = NO_CLASS;
            return h != NONE ? scan_list(b, h, need) : NONE;
        }
        fl = (unsigned)__builtin_ctzll(flmap);
        slmap = b->sl_bits[fl];
    }
    sl = (unsigned)__builtin_ctzll(slmap);
    *cls = fl * BFC_SL + sl;
    return b->heads[*cls]; /* every block of a larger class fits: its first */
}

/* Take chunk c, the head of class cls, off its list (list_remove without working out the
 * class again). */
BFC_HOT void list_pop(bfc *b, uint32_t c, unsigned cls) {
    uint32_t n = b->ch[c].fnext;
    b->heads[cls] = n;
    if (n != NONE) {
        b->ch[n].fprev = NONE;
        return;
    }
    unsigned fl = cls / BFC_SL, sl = cls % BFC_SL;
    b->sl_bits[fl] &= ~(1ull << sl);
    if (!b->sl_bits[fl]) b->fl_bits &= ~(1ull << fl);
}

/* ---- live address index ----------------------------------------------------------------- */

/* Open addressing a cache line at a time. A line is 16 4-byte words (the table is 64-byte
 * aligned): word 0 counts the entries that passed this line because it was full (the
 * overflow count, as in Folly's F14 tables), words 1-15 are slots. A slot holds a record
 * index in the low tabib bits and a tag of the address's hash above them (8 bits below
 * 2^24 records, at least 1 below 2^31); all ones is an empty slot, and a tag is never all
 * ones, so an empty slot never matches one. A key's home is a line; an entry sits in its
 * home line or, when that is full, in the first line after it with room, and every full
 * line it passed counts it. SSE2 compares turn a line into a bitmap of slots whose tag
 * matches without a branch; a match is confirmed on the record's address, which a free
 * reads next anyway. A lookup ends at the entry or at a line whose count is 0 (nothing
 * passed it); a deletion empties the slot and takes the entry off the counts of the lines
 * it passed (none, usually). No entry ever moves, and nothing but the entry's own slot and
 * counts is read or written: the index before this one, without counts, had to move
 * entries back into a hole left in a full line, reading records to learn their homes.
 * The table grows past 3/4 of its slots (at 100,000 live blocks: 1 MiB, 41 % full); filled
 * to 7/8 instead (512 KiB there) it missed the last-level cache less but took longer per
 * alloc+free pair, with more entries off their home line (docs/allocators.md, "third
 * pass"). */
#define TAB_LINE 16u /* words per 64-byte line */
#define TAB_SLOTS 0xfffeu /* lane mask of the slots: word 0 is the count */
#define TAB_EMPTY UINT32_MAX
#define TAB_FILL(n, cap) ((n) * 64 > (cap) * 45) /* over 3/4 of the cap * 15/16 slots */
#define TAB_TAG_MIN_BITS 8u

static inline uint64_t tab_hash(uint64_t addr) { return (addr >> BFC_SHIFT) * 0x9E3779B97F4A7C15ull; }

/* First slot of the home line of hash h, for 2^(64 - shift) lines. */
static inline size_t tab_home(unsigned shift, uint64_t h) { return (size_t)(h >> shift) * TAB_LINE; }

/* The tag bits (under hi) of hash h: bits 8 + ib .. 39 of h, which the home line (the top
 * bits) does not use below 2^24 lines; all ones becomes 0. */
static inline uint32_t tab_tag(uint32_t hi, uint64_t h) {
    uint32_t t = (uint32_t)(h >> 8) & hi;
    return t == hi ? 0 : t;
}

/* Index bits for records 0 .. chcap - 1: at least 32 - TAB_TAG_MIN_BITS, and enough that
 * no slot is all ones (chcap < 2^ib; records stay below 2^31, so a tag keeps a bit). */
static unsigned tab_ib(size_t chcap) {
    unsigned ib = 32 - TAB_TAG_MIN_BITS;
    while ((uint64_t)chcap >= (1ull << ib)) ib++; /* < 32: chcap <= MAX_RECORDS */
    return ib;
}

#if defined(__SSE2__)
/* Bit k: (line[k] & hi) == tag (never an empty slot: hi has a bit, and a tag is never hi). */
static inline unsigned tab_match(const uint32_t *line, uint32_t tag, uint32_t hi) {
    const __m128i *v = (const __m128i *)(const void *)line;
    __m128i h = _mm_set1_epi32((int)hi), t = _mm_set1_epi32((int)tag);
    __m128i m01 = _mm_packs_epi32(_mm_cmpeq_epi32(_mm_and_si128(_mm_load_si128(v), h), t),
                                  _mm_cmpeq_epi32(_mm_and_si128(_mm_load_si128(v + 1), h), t));
    __m128i m23 = _mm_packs_epi32(_mm_cmpeq_epi32(_mm_and_si128(_mm_load_si128(v + 2), h), t),
                                  _mm_cmpeq_epi32(_mm_and_si128(_mm_load_si128(v + 3), h), t));
    return (unsigned)_mm_movemask_epi8(_mm_packs_epi16(m01, m23));
}

/* Bit k: slot line[k] is empty. */
static inline unsigned tab_empty(const uint32_t *line) {
    const __m128i *v = (const __m128i *)(const void *)line;
    __m128i ones = _mm_set1_epi32(-1);
    __m128i e01 = _mm_packs_epi32(_mm_cmpeq_epi32(_mm_load_si128(v), ones), _mm_cmpeq_epi32(_mm_load_si128(v + 1), ones));
    __m128i e23 = _mm_packs_epi32(_mm_cmpeq_epi32(_mm_load_si128(v + 2), ones), _mm_cmpeq_epi32(_mm_load_si128(v + 3), ones));
    return (unsigned)_mm_movemask_epi8(_mm_packs_epi16(e01, e23));
}
#else
static inline unsigned tab_match(const uint32_t *line, uint32_t tag, uint32_t hi) {
    unsigned m = 0;
    for (unsigned k = 0; k < TAB_LINE; k++) m |= (unsigned)((line[k] & hi) == tag) << k;
    return m;
}

static inline unsigned tab_empty(const uint32_t *line) {
    unsigned e = 0;
    for (unsigned k = 0; k < TAB_LINE; k++) e |= (unsigned)(line[k] == TAB_EMPTY) << k;
    return e;
}
#endif

/* Into the first line from home with room, counting the full lines passed; the table has one. */
static inline uint32_t *tab_place(uint32_t *t, size_t mask, size_t home) {
    unsigned e;
    while (HBMI_UNLIKELY(!(e = tab_empty(&t[home]) & TAB_SLOTS))) {
        t[home]++;
        home = (home + TAB_LINE) & mask;
    }
    return &t[home + (unsigned)__builtin_ctz(e)];
}

/* A table of ncap words with no entries: every slot empty, every count 0. */
static void tab_clear(uint32_t *t, size_t ncap) {
    memset(t, 0xff, ncap * sizeof *t);
    for (size_t l = 0; l < ncap; l += TAB_LINE) t[l] = 0;
}

/* Rebuild the table with ncap words and ib index bits; on failure nothing changes. */
static hbm_status tab_rebuild(bfc *b, size_t ncap, unsigned ib) {
    uint32_t *nt = hbmi_zone_alloc(ncap * sizeof *nt);
    if (!nt) return hbmi_error(HBM_ERR_NOMEM, "bfc: out of host memory growing the address index to %zu slots", ncap);
    tab_clear(nt, ncap);
    unsigned shift = 64 - bfc_log2(ncap / TAB_LINE);
    uint32_t hi = UINT32_MAX << ib;
    for (size_t i = 0; i < b->tabcap; i++) {
        if (i % TAB_LINE == 0 || b->tab[i] == TAB_EMPTY) continue;
        uint32_t idx = b->tab[i] & ~b->tabhi;
        uint64_t h = tab_hash(ch_addr(&b->ch[idx]));
        *tab_place(nt, ncap - 1, tab_home(shift, h)) = tab_tag(hi, h) | idx;
    }
    hbmi_zone_free(b->tab, b->tabcap * sizeof *b->tab);
    b->tab = nt;
    b->tabcap = ncap;
    b->tabshift = shift;
    b->tabib = ib;
    b->tabhi = hi;
    return HBM_OK;
}

/* Room for n entries. */
static hbm_status tab_reserve(bfc *b, size_t n) {
    if (!TAB_FILL(n, b->tabcap)) return HBM_OK;
    size_t ncap = b->tabcap ? b->tabcap : 64;
    while (TAB_FILL(n, ncap)) ncap *= 2;
    return tab_rebuild(b, ncap, b->tabib);
}

/* The slot of live address addr, or NULL; *home: the first word of its home line. */
static inline uint32_t *tab_lookup(const bfc *b, uint64_t addr, size_t *home) {
    if (!b->tabcap) return NULL;
    uint64_t h = tab_hash(addr);
    uint32_t hi = b->tabhi, tag = tab_tag(hi, h);
    size_t mask = b->tabcap - 1, line = tab_home(b->tabshift, h);
    *home = line;
    for (;;) {
        for (unsigned m = tab_match(&b->tab[line], tag, hi) & TAB_SLOTS; m; m &= m - 1) {
            uint32_t *s = &b->tab[line + (unsigned)__builtin_ctz(m)];
            if (ch_addr(&b->ch[*s & ~hi]) == addr) return s;
        }
        if (!b->tab[line]) return NULL; /* nothing passed this line */
        line = (line + TAB_LINE) & mask;
    }
}

static inline uint32_t *tab_find(const bfc *b, uint64_t addr) {
    size_t home = 0;
    return tab_lookup(b, addr, &home);
}

/* Needs tab_reserve first. */
static inline void tab_put(bfc *b, uint64_t addr, uint32_t idx) {
    uint64_t h = tab_hash(addr);
    *tab_place(b->tab, b->tabcap - 1, tab_home(b->tabshift, h)) = tab_tag(b->tabhi, h) | idx;
    b->tabcount++;
}

/* Empty slot s, found from home line home: the lines before its own stop counting it. */
static inline void tab_del_in(bfc *b, uint32_t *s, size_t home) {
    size_t own = (size_t)(s - b->tab) & ~(size_t)(TAB_LINE - 1), mask = b->tabcap - 1;
    *s = TAB_EMPTY;
    b->tabcount--;
    for (size_t l = home; HBMI_UNLIKELY(l != own); l = (l + TAB_LINE) & mask) b->tab[l]--;
}

/* ---- chunk records ----------------------------------------------------------------------- */

/* The records are core/pool.c's slots, but their array is grown here, not by
 * hbmi_pool_reserve (a realloc): it is a zone, 64-byte aligned so that no 32-byte record
 * straddles two cache lines (and on huge pages when big), the tag array grows with it, and
 * the address index is rebuilt first when the new count needs more index bits. */
static hbm_status rec_grow(bfc *b, size_t k) {
    size_t need = b->recs.n + k;
    if (need > MAX_RECORDS) return hbmi_error(HBM_ERR_NOMEM, "bfc: more than 2^31 - 1 chunks");
    size_t cap = b->recs.cap ? b->recs.cap : 64;
    while (cap < need) cap *= 2;
    if (cap > MAX_RECORDS) cap = MAX_RECORDS;
    /* an index wide enough for the new records first: if it fails, nothing has changed */
    unsigned ib = tab_ib(cap);
    hbm_status s = HBM_OK;
    if (ib != b->tabib) {
        if (b->tabcap) s = tab_rebuild(b, b->tabcap, ib);
        else b->tabib = ib, b->tabhi = UINT32_MAX << ib;
        if (s) return s;
    }
    s = hbmi_grow((void **)&b->tags, &b->tagcap, cap, sizeof *b->tags); /* as many */
    if (s) return s;
    /* 64-byte aligned, so that no record straddles two cache lines */
    bfc_chunk *ch = hbmi_zone_alloc(cap * sizeof *ch);
    if (!ch) return hbmi_error(HBM_ERR_NOMEM, "bfc: out of host memory growing the chunk records to %zu", cap);
    if (b->recs.n) memcpy(ch, b->ch, b->recs.n * sizeof *ch);
    hbmi_zone_free(b->ch, b->recs.cap * sizeof *b->ch);
    b->ch = ch;
    b->recs.cap = cap;
    return HBM_OK;
}

#define REC_LINK offsetof(bfc_chunk, fnext)

/* Room for k more records (the check inline, the growth out of line). */
BFC_HOT hbm_status rec_reserve(bfc *b, size_t k) {
    if (HBMI_LIKELY(b->recs.used + k <= b->recs.cap)) return HBM_OK;
    return rec_grow(b, k);
}

/* Needs rec_reserve first. */
BFC_HOT uint32_t rec_new(bfc *b) { return hbmi_pool_take(&b->recs, b->ch, sizeof *b->ch, REC_LINK); }

BFC_HOT void rec_release(bfc *b, uint32_t i) {
    b->ch[i].size = F_UNUSED;
    hbmi_pool_give(&b->recs, b->ch, sizeof *b->ch, REC_LINK, i);
}

static int rec_unused(const void *rec) { return ch_state(rec) == CH_UNUSED; }

/* ---- regions ---------------------------------------------------------------------------- */

static uint64_t largest_free(const bfc *b) {
    if (!b->fl_bits) return 0;
    unsigned fl = bfc_log2(b->fl_bits), sl = bfc_log2(b->sl_bits[fl]);
    uint64_t m = 0;
    for (uint32_t h = b->heads[fl * BFC_SL + sl]; h != NONE; h = b->ch[h].fnext)
        if (b->ch[h].size > m) m = b->ch[h].size;
    return m;
}

/* Take a region of at least need bytes (a multiple of the quantum) from the device, as
 * XLA's Extend: curr_region doubles until it holds need; the region is min(curr, what the
 * limit leaves); if the device refuses, back off x0.9 down to need. */
static hbm_status bfc_extend(bfc *b, uint64_t need) {
    uint64_t q = b->quantum;
    uint64_t avail = b->st.bytes_limit > b->st.pool_bytes ? b->st.bytes_limit - b->st.pool_bytes : 0;
    avail -= avail % q;
    if (need > avail) {
        char h1[32], h2[32];
        if (b->quiet) return HBM_ERR_OOM;
        return hbmi_error(HBM_ERR_OOM, "bfc: the limit of %s leaves %s to grow by", hbm_size_human(b->st.bytes_limit, h1),
                          hbm_size_human(avail, h2));
    }
    int increased = 0;
    uint64_t curr0 = b->curr_region; /* restored if this fails: a failure changes nothing */
    while (need > b->curr_region) {
        b->curr_region = b->curr_region > UINT64_MAX / 2 ? UINT64_MAX - (UINT64_MAX % q) : b->curr_region * 2;
        increased = 1;
    }
    uint64_t bytes = b->curr_region < avail ? b->curr_region : avail;
    hbm_status s = rec_reserve(b, 2);
    if (!s) s = hbmi_grow((void **)&b->reg, &b->regcap, b->nreg + 1, sizeof *b->reg);
    if (s) {
        b->curr_region = curr0;
        return s;
    }
    uint64_t addr = 0;
    s = hbm_device_alloc(b->dev, bytes, &addr);
    while (s == HBM_ERR_OOM) {
        uint64_t next = hbmi_align_up((uint64_t)((double)bytes * 0.9), q);
        if (next >= bytes) next = bytes - q; /* strict progress (XLA can loop on small sizes) */
        if (next < need) break;
        bytes = next;
        s = hbm_device_alloc(b->dev, bytes, &addr);
    }
    if (s) {
        b->curr_region = curr0;
        return s;
    }
    if (!increased && b->curr_region <= UINT64_MAX / 2) b->curr_region *= 2;
    b->st.device_allocs++;
    uint32_t c = rec_new(b);
    b->ch[c] = (bfc_chunk){.addr = addr, .size = bytes, .prev = NONE, .next = NONE};
    list_push(b, c);
    size_t pos = b->nreg;
    while (pos > 0 && b->reg[pos - 1].addr > addr) pos--;
    memmove(&b->reg[pos + 1], &b->reg[pos], (b->nreg - pos) * sizeof *b->reg);
    b->reg[pos] = (bfc_region){addr, bytes, c};
    b->nreg++;
    b->st.num_regions++;
    b->st.pool_bytes += bytes;
    b->st.bytes_reserved += bytes;
    hbmi_stats_update_peaks(&b->st);
    return HBM_OK;
}

/* Bytes in wholly free regions. */
static uint64_t free_region_bytes(const bfc *b) {
    uint64_t n = 0;
    for (size_t r = 0; r < b->nreg; r++) {
        const bfc_chunk *c = &b->ch[b->reg[r].first];
        if (ch_free(c) && c->size == b->reg[r].size) n += c->size;
    }
    return n;
}

/* Return every wholly free region to the device; *released gets the bytes. */
static hbm_status release_free_regions(bfc *b, uint64_t *released) {
    *released = 0;
    for (size_t r = b->nreg; r-- > 0;) {
        bfc_region *g = &b->reg[r];
        bfc_chunk *c = &b->ch[g->first];
        if (!ch_free(c) || c->size != g->size) continue;
        hbm_status s = hbm_device_free(b->dev, g->addr);
        if (s) return s;
        list_remove(b, g->first);
        rec_release(b, g->first);
        *released += g->size;
        b->st.device_frees++;
        b->st.num_regions--;
        b->st.pool_bytes -= g->size;
        b->st.bytes_reserved -= g->size;
        memmove(&b->reg[r], &b->reg[r + 1], (b->nreg - r - 1) * sizeof *b->reg);
        b->nreg--;
    }
    return HBM_OK;
}

/* ---- the ops ------------------------------------------------------------------------------ */

static uint64_t bfc_rounded(void *self, uint64_t size) {
    return size > UINT64_MAX - (BFC_MIN - 1) ? size : bfc_round(size);
}

static hbm_status bfc_oom(bfc *b, uint64_t size, uint64_t need, const char *why) {
    char h1[32], h2[32], h3[32], h4[32], h5[32];
    b->st.num_ooms++;
    if (b->quiet) return HBM_ERR_OOM;
    uint64_t lf = largest_free(b);
    return hbmi_error(HBM_ERR_OOM,
                      "bfc: out of memory trying to allocate %s (rounded to %" PRIu64 "): %s in use, %s held of a "
                      "limit of %s, largest free block %s (%s)",
                      hbm_size_human(size, h1), need, hbm_size_human(b->st.bytes_in_use, h2),
                      hbm_size_human(b->st.bytes_reserved, h3), hbm_size_human(b->st.bytes_limit, h4),
                      hbm_size_human(lf, h5), why);
}

/* No free chunk holds need bytes: a new region, and the chunk found in it. Out of line, so
 * that the usual allocation keeps a small frame. */
static __attribute__((noinline)) hbm_status bfc_grow(bfc *b, uint64_t size, uint64_t need, uint32_t *c, unsigned *cls) {
    hbm_status s = bfc_extend(b, hbmi_align_up(need, b->quantum));
    /* XLA's garbage collection (DeallocateFreeRegions): give wholly free regions back and
     * retry once, unless even that could not make room under the limit */
    if (s == HBM_ERR_OOM && b->release_on_oom &&
        hbmi_align_up(need, b->quantum) <= b->st.bytes_limit - b->st.pool_bytes + free_region_bytes(b)) {
        uint64_t released = 0;
        hbm_status r = release_free_regions(b, &released);
        if (r) return r;
        if (released) s = bfc_extend(b, hbmi_align_up(need, b->quantum));
    }
    if (s == HBM_ERR_OOM) {
        char why[256] = "";
        if (!b->quiet) snprintf(why, sizeof why, "%s", hbm_last_error());
        return bfc_oom(b, size, need, why);
    }
    if (s) return s;
    *c = bfc_find(b, need, cls);
    if (*c == NONE) return hbmi_error(HBM_ERR_CORRUPT, "bfc: a new region does not hold %" PRIu64 " bytes", need);
    return HBM_OK;
}

/* An allocation without the address index: *rec gets the new live block's record. The
 * caller has room for one more index entry. */
BFC_HOT hbm_status bfc_take(bfc *b, uint64_t size, uint32_t tag_id, uint32_t *rec) {
    if (HBMI_UNLIKELY(size > UINT64_MAX / 2)) return bfc_oom(b, size, size, "larger than any device");
    uint64_t need = bfc_round(size);
    /* metadata first, so that nothing changes when the host is out of memory */
    hbm_status s = rec_reserve(b, 1);
    if (HBMI_UNLIKELY(s)) return s;
    unsigned cls;
    uint32_t c = bfc_find(b, need, &cls);
    if (HBMI_UNLIKELY(c == NONE) && (s = bfc_grow(b, size, need, &c, &cls))) return s;
    if (cls != NO_CLASS) list_pop(b, c, cls);
    else list_remove(b, c);
    bfc_chunk *k = &b->ch[c];
    if (k->size > need) { /* split: the remainder (>= 256 B) stays free after the block */
        uint32_t r = rec_new(b);
        k = &b->ch[c];
        bfc_chunk *t = &b->ch[r];
        *t = (bfc_chunk){.addr = k->addr + need, .size = k->size - need, .prev = c, .next = k->next};
        if (k->next != NONE) b->ch[k->next].prev = r;
        k->next = r;
        k->size = need;
        list_push(b, r);
    }
    b->st.num_allocs++;
    k->addr |= need - size;
    k->size = need | F_LIVE | (tag_id ? F_TAGGED : 0);
    k->seq = b->st.num_allocs;
    if (tag_id) b->tags[c] = tag_id;
    b->st.bytes_in_use += need;
    if (b->st.bytes_in_use > b->st.peak_bytes_in_use) b->st.peak_bytes_in_use = b->st.bytes_in_use;
    if (need > b->st.largest_alloc_size) b->st.largest_alloc_size = need;
    *rec = c;
    return HBM_OK;
}

static hbm_status bfc_alloc(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t *addr_out) {
    bfc *b = self;
    hbm_status s;
    if (HBMI_UNLIKELY(TAB_FILL(b->tabcount + 1, b->tabcap)) && (s = tab_reserve(b, b->tabcount + 1))) return s;
    uint32_t c = 0;
    s = bfc_take(b, size, tag_id, &c);
    if (HBMI_UNLIKELY(s)) return s;
    uint64_t addr = ch_addr(&b->ch[c]);
    tab_put(b, addr, c);
    *addr_out = addr;
    return HBM_OK;
}

static const bfc_region *region_of(const bfc *b, uint64_t addr) {
    size_t lo = 0, hi = b->nreg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->reg[mid].addr + b->reg[mid].size <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo < b->nreg && b->reg[lo].addr <= addr ? &b->reg[lo] : NULL;
}

/* A free without the address index: live block c becomes free and coalesces. */
BFC_HOT void bfc_give(bfc *b, uint32_t c) {
    bfc_chunk *k = &b->ch[c];
    /* both neighbours are read below, behind a branch on the first: start both misses now */
    if (k->next != NONE) __builtin_prefetch(&b->ch[k->next]);
    if (k->prev != NONE) __builtin_prefetch(&b->ch[k->prev]);
    b->st.num_frees++;
    k->addr = ch_addr(k);
    k->size = ch_size(k); /* free from here on; list_push below sets the links */
    b->st.bytes_in_use -= k->size;
    uint32_t n = k->next; /* k itself becomes free in list_push below */
    if (n != NONE && ch_free(&b->ch[n])) { /* absorb the next chunk */
        list_remove(b, n);
        k->size += b->ch[n].size;
        k->next = b->ch[n].next;
        if (k->next != NONE) b->ch[k->next].prev = c;
        rec_release(b, n);
    }
    uint32_t p = k->prev;
    if (p != NONE && ch_free(&b->ch[p])) { /* the previous chunk absorbs this one */
        list_remove(b, p);
        b->ch[p].size += k->size;
        b->ch[p].next = k->next;
        if (k->next != NONE) b->ch[k->next].prev = p;
        rec_release(b, c);
        c = p;
    }
    list_push(b, c);
}

static hbm_status bfc_free(void *self, uint64_t addr) {
    bfc *b = self;
    size_t home = 0;
    uint32_t *slot = tab_lookup(b, addr, &home);
    if (HBMI_UNLIKELY(!slot)) {
        const bfc_region *g = region_of(b, addr);
        if (!g)
            return hbmi_error(HBM_ERR_BAD_FREE, "bfc: free of 0x%" PRIx64 ", which is in no region of this allocator",
                              addr);
        return hbmi_error(HBM_ERR_BAD_FREE,
                          "bfc: free of 0x%" PRIx64 ", which is not the start of a live block (double free, or "
                          "an address inside a block of region 0x%" PRIx64 "+%" PRIu64 ")",
                          addr, g->addr, g->size);
    }
    uint32_t c = *slot & ~b->tabhi;
    tab_del_in(b, slot, home);
    bfc_give(b, c);
    return HBM_OK;
}

static void bfc_stats(void *self, hbm_stats *out) {
    bfc *b = self;
    *out = b->st;
    out->largest_free_block_bytes = largest_free(b);
}

static void bfc_reset_peaks(void *self) { hbmi_stats_reset_peaks(&((bfc *)self)->st); }

static hbm_status bfc_trim(void *self) {
    uint64_t released;
    return release_free_regions(self, &released);
}

static hbm_status bfc_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    bfc *b = self;
    for (size_t r = 0; r < b->nreg; r++) {
        hbm_block g = {HBM_BLOCK_REGION, b->reg[r].addr, b->reg[r].size, 0, NULL, 0};
        if (fn(user, &g, 0)) return HBM_OK;
        for (uint32_t i = b->reg[r].first; i != NONE; i = b->ch[i].next) {
            const bfc_chunk *c = &b->ch[i];
            int live = ch_state(c) == CH_LIVE;
            uint64_t size = ch_size(c);
            hbm_block k = {live ? HBM_BLOCK_LIVE : HBM_BLOCK_FREE, ch_addr(c), size,
                           live ? size - (c->addr & F_MASK) : 0, NULL, live ? c->seq : 0};
            if (fn(user, &k, live && (c->size & F_TAGGED) ? b->tags[i] : 0)) return HBM_OK;
        }
    }
    return HBM_OK;
}

#define CORRUPT(...) hbmi_error(HBM_ERR_CORRUPT, "bfc check: " __VA_ARGS__)

static hbm_status check_lists(const bfc *b, uint64_t *nfree_out) {
    uint64_t nfree = 0;
    if ((b->fl_bits >> (BFC_FL - 1)) != 0) return CORRUPT("first-level bitmap has bits past class %d", BFC_FL - 1);
    for (unsigned fl = 0; fl < BFC_FL; fl++) {
        if (((b->fl_bits >> fl) & 1) != (b->sl_bits[fl] != 0))
            return CORRUPT("first-level bit %u disagrees with its second-level bitmap", fl);
        for (unsigned sl = 0; sl < BFC_SL; sl++) {
            uint32_t h = b->heads[fl * BFC_SL + sl];
            if (((b->sl_bits[fl] >> sl) & 1) != (h != NONE))
                return CORRUPT("bitmap bit of class (%u,%u) disagrees with its list", fl, sl);
            uint32_t prev = NONE;
            for (; h != NONE; prev = h, h = b->ch[h].fnext) {
                if (h >= b->recs.n) return CORRUPT("class (%u,%u) lists chunk record %u of %zu", fl, sl, h, b->recs.n);
                const bfc_chunk *c = &b->ch[h];
                unsigned f2, s2;
                bfc_class(c->size, &f2, &s2);
                if (!ch_free(c)) return CORRUPT("chunk 0x%" PRIx64 " in a free list is not free", c->addr);
                if (f2 != fl || s2 != sl)
                    return CORRUPT("chunk 0x%" PRIx64 " of %" PRIu64 " bytes is in class (%u,%u), belongs in (%u,%u)",
                                   c->addr, c->size, fl, sl, f2, s2);
                if (c->fprev != prev) return CORRUPT("chunk 0x%" PRIx64 ": free-list back link broken", c->addr);
                if (++nfree > b->recs.n) return CORRUPT("free lists are cyclic");
            }
        }
    }
    *nfree_out = nfree;
    return HBM_OK;
}

/* The entries of the lines after line l (first words, cyclic) whose probes passed l: each
 * such probe passed every line between too, so the scan stops after a line that counts
 * nothing (if that count is wrong, the line before it disagrees with this sum). */
static uint64_t index_passed(const bfc *b, size_t l) {
    size_t mask = b->tabcap - 1, nlines = b->tabcap / TAB_LINE;
    uint64_t n = 0;
    size_t m = l;
    for (size_t k = 1; k < nlines && b->tab[m]; k++) {
        m = (m + TAB_LINE) & mask;
        for (size_t q = m + 1; q < m + TAB_LINE; q++) {
            if (b->tab[q] == TAB_EMPTY) continue;
            size_t home = tab_home(b->tabshift, tab_hash(ch_addr(&b->ch[b->tab[q] & ~b->tabhi])));
            n += ((l - home) & mask) < ((m - home) & mask); /* l lies in [home, m) */
        }
    }
    return n;
}

/* The address index: its width, every slot naming a live record under its tag, the count
 * of entries, and each line's overflow count equal to the entries that passed it. */
static hbm_status check_index(const bfc *b) {
    if (b->tabib >= 32 || b->tabhi != UINT32_MAX << b->tabib || b->tabib < tab_ib(b->recs.cap))
        return CORRUPT("address index of %u index bits for %zu records", b->tabib, b->recs.cap);
    if (!b->tabcap) return b->tabcount ? CORRUPT("address index without slots holds %zu", b->tabcount) : HBM_OK;
    size_t n = 0;
    for (size_t i = 0; i < b->tabcap; i++) {
        if (i % TAB_LINE == 0 || b->tab[i] == TAB_EMPTY) continue;
        uint32_t k = b->tab[i] & ~b->tabhi;
        n++;
        if (k >= b->recs.n || ch_state(&b->ch[k]) != CH_LIVE ||
            tab_tag(b->tabhi, tab_hash(ch_addr(&b->ch[k]))) != (b->tab[i] & b->tabhi))
            return CORRUPT("address index slot %zu (0x%08" PRIx32 ") names record %u, which is not a live chunk "
                           "with that tag", i, b->tab[i], k);
    }
    if (n != b->tabcount) return CORRUPT("address index count %zu, %zu entries", b->tabcount, n);
    for (size_t l = 0; l < b->tabcap; l += TAB_LINE) {
        uint64_t p = index_passed(b, l);
        if (b->tab[l] != p)
            return CORRUPT("address index line %zu counts %" PRIu32 " entries past it, %" PRIu64 " passed it",
                           l / TAB_LINE, b->tab[l], p);
    }
    return HBM_OK;
}

static hbm_status bfc_check(void *self) {
    bfc *b = self;
    uint64_t nfree_lists = 0, nfree = 0, nlive = 0, inuse = 0, pool = 0, maxfree = 0, nchunks = 0;
    if (b->tagcap < b->recs.n || b->recs.cap < b->recs.n) return CORRUPT("%zu records, arrays of %zu and %zu", b->recs.n, b->recs.cap, b->tagcap);
    hbm_status s = check_lists(b, &nfree_lists);
    if (s) return s;
    for (size_t r = 0; r < b->nreg; r++) {
        const bfc_region *g = &b->reg[r];
        if (r && b->reg[r - 1].addr + b->reg[r - 1].size > g->addr)
            return CORRUPT("regions 0x%" PRIx64 " and 0x%" PRIx64 " overlap or are out of order", b->reg[r - 1].addr,
                           g->addr);
        if (!g->size || g->size % b->quantum) return CORRUPT("region 0x%" PRIx64 " has size %" PRIu64, g->addr, g->size);
        pool += g->size;
        uint64_t at = g->addr;
        uint32_t prev = NONE;
        int prev_free = 0;
        for (uint32_t i = g->first; i != NONE; prev = i, i = b->ch[i].next) {
            if (i >= b->recs.n) return CORRUPT("region 0x%" PRIx64 " links chunk record %u of %zu", g->addr, i, b->recs.n);
            const bfc_chunk *c = &b->ch[i];
            uint64_t ca = ch_addr(c), cs = ch_size(c);
            if (++nchunks > b->recs.n) return CORRUPT("chunk chain of region 0x%" PRIx64 " is cyclic", g->addr);
            if (ca != at) return CORRUPT("chunk at 0x%" PRIx64 ", expected 0x%" PRIx64 " (gap or overlap)", ca, at);
            if (c->prev != prev) return CORRUPT("chunk 0x%" PRIx64 ": back link broken", ca);
            if (!cs) return CORRUPT("chunk 0x%" PRIx64 " has size 0", ca);
            if (cs > g->addr + g->size - at)
                return CORRUPT("chunk 0x%" PRIx64 " runs past the end of region 0x%" PRIx64, ca, g->addr);
            at += cs;
            if (ch_state(c) == CH_FREE) {
                if (c->addr != ca || c->size != cs)
                    return CORRUPT("free chunk 0x%" PRIx64 " has state flag bits 0x%" PRIx64 "/0x%" PRIx64, ca,
                                   c->addr & F_MASK, c->size & F_MASK);
                if (prev_free) return CORRUPT("free chunks at 0x%" PRIx64 " and before it are not coalesced", ca);
                if (c->fprev == NONE) {
                    unsigned fl, sl;
                    bfc_class(cs, &fl, &sl);
                    if (b->heads[fl * BFC_SL + sl] != i)
                        return CORRUPT("free chunk 0x%" PRIx64 " is in no class list", ca);
                } else if (c->fprev >= b->recs.n || b->ch[c->fprev].fnext != i) {
                    return CORRUPT("free chunk 0x%" PRIx64 " is in no class list", ca);
                }
                nfree++;
                if (cs > maxfree) maxfree = cs;
            } else if (ch_state(c) == CH_LIVE) {
                uint32_t *sl = tab_find(b, ca);
                if (!sl || (*sl & ~b->tabhi) != i) return CORRUPT("live chunk 0x%" PRIx64 " is not in the address index", ca);
                if ((c->size & F_MASK) & ~(uint64_t)(F_LIVE | F_TAGGED))
                    return CORRUPT("live chunk 0x%" PRIx64 " has unknown flag bits 0x%" PRIx64, ca, c->size & F_MASK);
                if ((c->size & F_TAGGED) && !b->tags[i]) return CORRUPT("live chunk 0x%" PRIx64 ": tagged with tag 0", ca);
                if (!c->seq || c->seq > b->st.num_allocs) return CORRUPT("live chunk 0x%" PRIx64 ": bad sequence number", ca);
                nlive++;
                inuse += cs;
            } else {
                return CORRUPT("chunk 0x%" PRIx64 " in region 0x%" PRIx64 " is an unused record", ca, g->addr);
            }
            prev_free = ch_free(c);
        }
        if (at != g->addr + g->size) return CORRUPT("chunks of region 0x%" PRIx64 " do not cover it", g->addr);
    }
    if (nfree != nfree_lists)
        return CORRUPT("%" PRIu64 " free chunks in regions, %" PRIu64 " in class lists", nfree, nfree_lists);
    hbm_status ps = hbmi_pool_check(&b->recs, b->ch, sizeof *b->ch, REC_LINK, rec_unused, "bfc check: the list of unused records");
    if (ps) return ps;
    if (nchunks != b->recs.used)
        return CORRUPT("%" PRIu64 " chunks in regions, %zu records in use", nchunks, b->recs.used);
    if (nlive != b->tabcount) return CORRUPT("%" PRIu64 " live chunks, address index holds %zu", nlive, b->tabcount);
    if ((s = check_index(b))) return s;
    const hbm_stats *t = &b->st;
    if (inuse != t->bytes_in_use) return CORRUPT("bytes_in_use %" PRIu64 ", live chunks hold %" PRIu64, t->bytes_in_use, inuse);
    if (pool != t->pool_bytes || pool != t->bytes_reserved || b->nreg != t->num_regions)
        return CORRUPT("%zu regions of %" PRIu64 " bytes, stats say %" PRIu64 " of %" PRIu64 " (reserved %" PRIu64 ")",
                       b->nreg, pool, t->num_regions, t->pool_bytes, t->bytes_reserved);
    if (t->num_allocs - t->num_frees != nlive)
        return CORRUPT("%" PRIu64 " allocs - %" PRIu64 " frees != %" PRIu64 " live", t->num_allocs, t->num_frees, nlive);
    if (t->device_allocs - t->device_frees != b->nreg) return CORRUPT("device allocs - frees != regions");
    if (largest_free(b) != maxfree)
        return CORRUPT("largest free block %" PRIu64 " by classes, %" PRIu64 " by walk", largest_free(b), maxfree);
    if (pool > t->bytes_limit) return CORRUPT("%" PRIu64 " bytes held past the limit %" PRIu64, pool, t->bytes_limit);
    if (t->peak_bytes_in_use < inuse || t->peak_pool_bytes < pool || t->peak_bytes_reserved < pool)
        return CORRUPT("peaks below current values");
    return HBM_OK;
}

static void bfc_destroy(void *self) {
    bfc *b = self;
    for (size_t r = 0; r < b->nreg; r++) hbm_device_free(b->dev, b->reg[r].addr);
    hbmi_zone_free(b->ch, b->recs.cap * sizeof *b->ch);
    hbmi_free(b->tags);
    hbmi_free(b->reg);
    hbmi_zone_free(b->tab, b->tabcap * sizeof *b->tab);
    hbmi_free(b);
}

static const hbm_allocator_ops bfc_ops = {
    .name = "bfc", .alloc = bfc_alloc, .free = bfc_free, .stats = bfc_stats, .reset_peaks = bfc_reset_peaks,
    .check = bfc_check, .walk = bfc_walk, .trim = bfc_trim, .rounded_size = bfc_rounded, .destroy = bfc_destroy};

int hbmi_bfc_set_quiet(hbm_allocator *a, int on) {
    if (a->ops != &bfc_ops) return 0;
    ((bfc *)a->self)->quiet = on;
    return 1;
}

const uint64_t *hbmi_bfc_in_use(const hbm_allocator *a) {
    return a->ops == &bfc_ops ? &((const bfc *)a->self)->st.bytes_in_use : NULL;
}

hbm_status hbmi_bfc_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit, const hbm_allocator_ops **ops,
                           void **self) {
    hbm_device_info info;
    hbm_status s = hbm_device_info_get(dev, &info);
    if (s) return s;
    uint64_t q = BFC_MIN, g = info.granularity;
    if (g > 1 && q % g) q = g % BFC_MIN == 0 ? g : q * g;
    uint64_t limit = bytes_limit - bytes_limit % q;
    if (cfg->preallocate && limit == 0)
        return hbmi_error(HBM_ERR_CONFIG, "bfc: the byte limit %" PRIu64 " is below one region of %" PRIu64 " bytes",
                          bytes_limit, q);
    bfc *b = hbmi_calloc(1, sizeof *b);
    if (!b) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a bfc allocator");
    b->dev = dev;
    b->quantum = q;
    b->release_on_oom = cfg->release_on_oom;
    b->tabib = tab_ib(0);
    b->tabhi = UINT32_MAX << b->tabib;
    memset(b->heads, 0xff, sizeof b->heads);
    b->st.bytes_limit = bytes_limit;
    uint64_t initial = hbmi_align_up(cfg->initial_region ? cfg->initial_region : (2u << 20), q);
    if (cfg->preallocate) {
        /* One region of the whole limit; if the device refuses, back off x0.9 down to the
         * initial region size (2 MiB by default), below which opening fails. */
        b->curr_region = limit;
        s = bfc_extend(b, initial < limit ? initial : limit);
        if (s) {
            char why[512];
            snprintf(why, sizeof why, "%s", hbm_last_error());
            bfc_destroy(b);
            if (s != HBM_ERR_OOM) return s;
            char h[32];
            return hbmi_error(HBM_ERR_OOM,
                              "bfc: cannot preallocate %s on device %s (%s); lower the fraction "
                              "(XLA_PYTHON_CLIENT_MEM_FRACTION) or set XLA_PYTHON_CLIENT_PREALLOCATE=false",
                              hbm_size_human(limit, h), info.name, why);
        }
    } else {
        b->curr_region = initial;
    }
    *ops = &bfc_ops;
    *self = b;
    return HBM_OK;
}
