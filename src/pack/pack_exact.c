/* pack_exact.c - exact packing: a depth-first search over canonical packings.
 *
 * Canonical packings. Take any packing and, among those at least as good, one with the
 * least sum of offsets: no buffer can move down, so each one sits at 0 or right on top of
 * (the aligned top of) a time-overlapping buffer, or of a pinned obstacle. Listing its
 * buffers by offset (ties by a rank), every buffer sits at lo = the lowest aligned offset
 * above all time-overlapping buffers listed before it that clears the obstacles. So the
 * search builds the list: at each node it picks the next buffer b among those whose lo
 * is not below the last offset placed (x), and places it at lo[b]. The state is only the
 * lo values, kept up to date incrementally with an undo trail.
 *
 * Pruning, each argued from the least-sum packing (which no rule can cut):
 *  - order: lo[b] < x, or lo[b] == x with a smaller rank than the last one, is skipped;
 *  - gaps: if some other unplaced c has lo[c] + size[c] <= lo[b], placing b there is
 *    dominated (c could drop to lo[c] below everything placed later); if that holds with
 *    x itself, the node is dead;
 *  - hatless: a buffer with no unplaced buffer overlapping it in time sits at its lo, so
 *    its place in the list is known: nothing after it can come next, and the node is
 *    dead if that place is already behind (MiniMalloc only stops branching after one);
 *  - twins: of buffers with equal size, lifetime and alignment, the lower index goes first;
 *  - sections: in every time section the unplaced buffers live together, so they stack
 *    above max(x, their least lo) and must end below the capacity. Checked lazily: a
 *    section's scan over its unplaced buffers stops at the first one low enough.
 *  - decomposition: after each placement the unplaced buffers split into groups that
 *    share no time section; groups never interact again and are solved one after the
 *    other, smallest first (the first that fails fails the node), turning a product
 *    into a sum. Each group is a problem of its own: its search starts over (floor 0)
 *    with ranks recomputed from what is left of it, as MiniMalloc's sub-partitions do.
 *  - a failure cache: a group in a given state (its items, their lo, the floor, the
 *    items the tie excludes) that failed once fails again; states recur whenever the
 *    search backtracks over a placement elsewhere in time, and across restarts: the
 *    state names no rank, so what one rank proved the others reuse. 128-bit hashes;
 *    the bound proven is kept too. A solution cache does the same for groups solved
 *    from scratch: they are placed again as they were.
 *
 * Every failed subtree returns the least bound that cut it, so a failed search at
 * capacity C proves a bound > C on the optimum (iterative deepening for --minimize).
 * Restarts: the branching order (lo first, then a static rank) cycles through several
 * ranks (MiniMalloc's three, size, and seeded noisy ones) under doubling node limits; the
 * schedules of the last four capacities asked for go on across calls.
 *
 * Cost: most children (70-90 %) fail the section bound right away. So a child is first
 * checked, without being placed, against the sections that failed last; then placed and
 * checked before its list is built; and a check stops at its first violation. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "pack/pack_exact.h"

#define NRANK 8
#define NRING 4 /* failed sections remembered */
#define NSCHED 4 /* capacities whose restart schedules are remembered */
#define INF UINT64_MAX

typedef struct span {
    uint64_t off, top;
} span;

typedef struct trail_ent {
    uint32_t item;
    uint64_t old;
} trail_ent;

struct hbmi_exact {
    uint32_t n, nsec;
    uint32_t *buf;            /* item -> timeline index */
    uint64_t *size, *align;
    uint32_t *s0, *s1;        /* sections [s0, s1) */
    uint32_t *sec_beg, *sec_it; /* CSR: items per section */
    uint32_t *ov_beg, *ov;    /* CSR: time-overlapping items */
    uint32_t *pin_beg;        /* CSR: pinned obstacles per item */
    span *pins;
    uint32_t *psec_beg;       /* CSR: pinned spans per section, merged, by offset (NULL: no pins) */
    span *psec;
    uint64_t *plim_sum, *plim; /* per section: the sum plim was last worked out for (INF: none) */
    int32_t *twin;            /* previous identical item or -1 */
    uint32_t *rank;           /* branching rank of each item (lower first) */
    uint64_t *k_press, *k_len, *k_area; /* what ranks are made of */
    uint64_t *hint;           /* per item: its offset in a packing to follow (NULL: none) */
    void *rk;                 /* scratch for ranking */
    uint32_t *bys0;           /* items sorted by s0 */
    uint64_t *sum0;           /* all sizes per section */
    /* search state */
    uint64_t *lo, *off, *sum;
    uint32_t *uov;            /* per item: how many time-overlapping items are unplaced */
    uint32_t *nact;           /* per section: its first nact entries of sec_it are unplaced */
    uint32_t *wit;            /* per section: the last item seen low enough (a hint) */
    uint32_t fail_ring[NRING]; /* the last sections that failed a bound check, latest first */
    uint64_t zh[2];           /* sums of zkey(c, lo[c]) over the unplaced items (two mixes) */
    uint64_t *zk;             /* per item: zkey(c, lo[c]) */
    uint64_t *zx;             /* per item: its key in the set the tie excludes */
    uint64_t zoff[2];         /* the part of them outside the group being solved */
    int full_bound;           /* bound checks find the largest violation, not the first */
    uint32_t *slot_beg;       /* CSR per item over its sections: where it sits in sec_it */
    uint32_t *slot;
    uint8_t *placed;
    trail_ent *trail;
    size_t ntrail, cap_trail;
    trail_ent *placed_stk;    /* placed items (item, trail mark), to undo whole subtrees */
    size_t npl;
    uint32_t *stk;
    size_t sp, cap_stk;
    uint64_t cap;             /* capacity being tried */
    uint64_t nodes, node_limit, deadline_ns;
    int stop;                 /* 1 deadline, 2 out of memory, 3 node limit */
    uint64_t seed;
    uint64_t first_limit;     /* node limit of the first restart round (0: 8n + 64) */
    struct sched {            /* restart schedules of the last capacities asked for */
        uint64_t cap, k, tick; /* capacity, attempts made, last use (0: free) */
    } sched[NSCHED];
    uint64_t sched_tick;
    unsigned variant;
    uint64_t seed_cur;
    /* failure cache: 128-bit hashes of group states proven to fail, with the bound
     * proven; set-associative, lossy (see fc_slot) */
    struct fent { uint64_t h1, h2, v; uint32_t use, work; } *fc;
    size_t fc_cap, fc_n;
    uint64_t fc_clock;        /* attempts made: the entries' last use */
    uint32_t cache_min;       /* groups of fewer items are not cached (cheaper to search) */
    /* solution cache: the packings found for groups searched from scratch (floor 0), by
     * their state; a group that was solved is placed again without a search (a restart,
     * or a backtrack over another group, brings it back in the same state) */
    struct sent { uint64_t h1, h2, top; uint32_t at, k; } *sol;
    trail_ent *sol_pairs; /* (item, offset) in placement order */
    size_t sol_n, sol_used;
    /* progress */
    void (*progress)(void *, const hbm_pack_progress *);
    void *progress_user;
    uint64_t start_ns, last_ns, best, lb;
};

enum { R_FOUND, R_NONE, R_ABORT };

/* --- construction --------------------------------------------------------------------- */
static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}


typedef struct rkey {
    uint64_t k[3];
    uint32_t item;
} rkey;

static int rkey_cmp(const void *a, const void *b) {
    const rkey *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x->k[i] != y->k[i]) return x->k[i] > y->k[i] ? -1 : 1;
    return x->item < y->item ? -1 : x->item > y->item;
}

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int twin_cmp(const void *a, const void *b) {
    const rkey *x = a, *y = b; /* k = size, s0, s1 packed; ascending, ties by item */
    for (int i = 0; i < 3; i++)
        if (x->k[i] != y->k[i]) return x->k[i] < y->k[i] ? -1 : 1;
    return x->item < y->item ? -1 : x->item > y->item;
}

static int s0_cmp_items(const void *a, const void *b) {
    const uint64_t *x = a, *y = b; /* (s0 << 32 | item) */
    return *x < *y ? -1 : *x > *y;
}

/* Branching ranks. 0: lifetime, area, pressure; 1: pressure, area, lifetime; 2: pressure,
 * lifetime, area (MiniMalloc's WAT, TAW, TWA); 3: size; 4 and up: one of the first three
 * with its leading key scaled by a random factor in [1, 1.5) (seeded), for restarts. */
static void rank_items(hbmi_exact *e, const uint32_t *list, uint32_t k, unsigned variant, uint64_t seed) {
    rkey *rk = e->rk;
    for (uint32_t q = 0; q < k; q++) {
        uint32_t i = list ? list[q] : q;
        uint64_t len = e->k_len[i], area = e->k_area[i], press = e->k_press[i];
        if (list) { /* a group of its own: pressure from what is left unplaced */
            press = 0;
            for (uint32_t s = e->s0[i]; s < e->s1[i]; s++)
                if (e->sum[s] > press) press = e->sum[s];
        }
        switch (variant) {
        case 0: rk[q] = (rkey){{len, area, press}, i}; break;
        case 1: rk[q] = (rkey){{press, area, len}, i}; break;
        case 2: rk[q] = (rkey){{press, len, area}, i}; break;
        case 3: /* the order of a given packing (the best so far), else size */
            rk[q] = e->hint ? (rkey){{UINT64_MAX - e->hint[i], e->size[i], 0}, i} : (rkey){{e->size[i], len, 0}, i};
            break;
        case 7: { /* the given packing's order, each offset moved up by up to 1/32 of the capacity */
            uint64_t h = hbmi_hash64(seed * 0x9e3779b97f4a7c15ULL + i + 1), c32 = e->cap / 32 + 1;
            rk[q] = (rkey){{UINT64_MAX - e->hint[i] - h % c32, e->size[i], 0}, i};
            break;
        }
        default: {
            uint64_t h = hbmi_hash64(seed * 0x9e3779b97f4a7c15ULL + i + 1);
            uint64_t lead = variant % 3 == 0 ? len : press, next = variant % 3 == 1 ? area : len;
            double f = 1.0 + (double)(h & 0xffff) / 131072.0;
            uint64_t scaled = (double)lead * f >= 1.8e19 ? UINT64_MAX : (uint64_t)((double)lead * f);
            rk[q] = (rkey){{scaled, next, h >> 16}, i};
            break;
        }
        }
    }
    hbmi_qsort(rk, k, sizeof *rk, rkey_cmp);
    for (uint32_t q = 0; q < k; q++) e->rank[rk[q].item] = q;
}

static void set_rank(hbmi_exact *e, unsigned variant, uint64_t seed) {
    e->variant = variant;
    e->seed_cur = seed;
    rank_items(e, NULL, e->n, variant, seed);
}

void hbmi_exact_free(hbmi_exact *e) {
    if (!e) return;
    void *p[] = {e->buf, e->size, e->align, e->s0, e->s1, e->sec_beg, e->sec_it, e->ov_beg, e->ov,
                 e->pin_beg, e->pins, e->twin, e->bys0, e->sum0, e->lo, e->off, e->sum, e->placed,
                 e->trail, e->stk, e->nact, e->wit, e->uov, e->rank, e->fc, e->slot_beg, e->slot, e->placed_stk,
                 e->sol, e->sol_pairs, e->zk, e->zx, e->psec_beg, e->psec, e->plim_sum, e->plim};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) hbmi_free(p[i]);
    hbmi_free(e->k_press);
    hbmi_free(e->k_len);
    hbmi_free(e->k_area);
    hbmi_free(e->hint);
    hbmi_free(e->rk);
    hbmi_free(e);
}

/* What hbmi_exact_new builds with and then drops. */
typedef struct exact_build {
    const hbm_timeline *tl;
    int64_t *t;       /* the distinct time points, sorted */
    size_t nt;
    uint64_t *tmp;    /* scratch, 2(n + 1) */
    uint32_t *pinned; /* the timeline's pinned buffers, in order */
    uint32_t npin;
    rkey *rk;
} exact_build;

/* The per-item arrays (n + 1 each) and the scratch. */
static hbm_status exact_alloc_items(hbmi_exact *e, exact_build *x) {
    const hbm_timeline *tl = x->tl;
    uint32_t n = 0;
    for (size_t i = 0; i < tl->count; i++) {
        if (tl->buffers[i].flags & HBM_TL_PINNED) x->npin++;
        else n++;
    }
    e->n = n;
    size_t N = (size_t)n + 1;
    e->buf = hbmi_malloc(N * sizeof *e->buf);
    e->size = hbmi_malloc(N * sizeof *e->size);
    e->align = hbmi_malloc(N * sizeof *e->align);
    e->s0 = hbmi_malloc(N * sizeof *e->s0);
    e->s1 = hbmi_malloc(N * sizeof *e->s1);
    e->twin = hbmi_malloc(N * sizeof *e->twin);
    e->bys0 = hbmi_malloc(N * sizeof *e->bys0);
    e->lo = hbmi_malloc(N * sizeof *e->lo);
    e->off = hbmi_malloc(N * sizeof *e->off);
    e->zk = hbmi_malloc(N * sizeof *e->zk);
    e->zx = hbmi_malloc(N * sizeof *e->zx);
    e->placed = hbmi_calloc(N, 1);
    e->placed_stk = hbmi_malloc(N * sizeof *e->placed_stk);
    e->uov = hbmi_malloc(N * sizeof *e->uov);
    e->ov_beg = hbmi_calloc(N + 1, sizeof *e->ov_beg);
    e->pin_beg = hbmi_calloc(N + 1, sizeof *e->pin_beg);
    x->t = hbmi_malloc(2 * N * sizeof *x->t);
    x->tmp = hbmi_malloc(2 * N * sizeof *x->tmp);
    x->rk = hbmi_malloc(N * sizeof *x->rk);
    e->rank = hbmi_malloc(N * sizeof *e->rank);
    e->k_press = hbmi_malloc(N * sizeof *e->k_press);
    e->k_len = hbmi_malloc(N * sizeof *e->k_len);
    e->k_area = hbmi_malloc(N * sizeof *e->k_area);
    if (!e->rank || !e->k_press || !e->k_len || !e->k_area || !e->zk || !e->zx) return HBM_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) e->zx[i] = hbmi_hash64(i + 0x7f4a7c15ULL);
    if (!e->buf || !e->size || !e->align || !e->s0 || !e->s1 || !e->twin || !e->bys0 || !e->lo || !e->off ||
        !e->placed || !e->placed_stk || !e->uov || !e->ov_beg || !e->pin_beg || !x->t || !x->tmp || !x->rk)
        return HBM_ERR_NOMEM;
    return HBM_OK;
}

/* Time sections from the items' own start and end points. */
static void exact_sections(hbmi_exact *e, exact_build *x, uint64_t def_align) {
    const hbm_timeline *tl = x->tl;
    int64_t *t = x->t;
    uint64_t *tmp = x->tmp;
    size_t nt = 0;
    uint32_t k = 0, n = e->n;
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        if (b->flags & HBM_TL_PINNED) continue;
        e->buf[k] = (uint32_t)i;
        e->size[k] = b->size;
        e->align[k] = hbmi_pack_align(b, def_align);
        t[nt++] = b->start;
        t[nt++] = b->end;
        k++;
    }
    for (size_t i = 0; i < nt; i++) tmp[i] = (uint64_t)t[i] ^ (UINT64_C(1) << 63);
    hbmi_qsort(tmp, nt, sizeof *tmp, u64_cmp);
    size_t u = 0;
    for (size_t i = 0; i < nt; i++)
        if (!u || tmp[u - 1] != tmp[i]) tmp[u++] = tmp[i];
    for (size_t i = 0; i < u; i++) t[i] = (int64_t)(tmp[i] ^ (UINT64_C(1) << 63));
    nt = u;
    x->nt = nt;
    e->nsec = nt ? (uint32_t)(nt - 1) : 0;
    for (uint32_t i = 0; i < n; i++) {
        const hbm_tl_buffer *b = &tl->buffers[e->buf[i]];
        e->s0[i] = (uint32_t)hbmi_time_index(t, nt, b->start);
        e->s1[i] = (uint32_t)hbmi_time_index(t, nt, b->end);
    }
}

/* Items per section, and the full live sum per section. */
static hbm_status exact_section_items(hbmi_exact *e) {
    uint32_t n = e->n;
    size_t N = (size_t)n + 1, S = (size_t)e->nsec + 1, memb = 0;
    e->sec_beg = hbmi_calloc(S + 1, sizeof *e->sec_beg);
    e->sum0 = hbmi_calloc(S, sizeof *e->sum0);
    e->sum = hbmi_calloc(S, sizeof *e->sum);
    e->nact = hbmi_calloc(S, sizeof *e->nact);
    e->wit = hbmi_calloc(S, sizeof *e->wit);
    if (!e->wit) return HBM_ERR_NOMEM;
    e->slot_beg = hbmi_calloc(N + 1, sizeof *e->slot_beg);
    if (!e->sec_beg || !e->sum0 || !e->sum || !e->nact || !e->slot_beg) return HBM_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        memb += e->s1[i] - e->s0[i];
        if (memb > UINT32_MAX)
            return hbmi_error(HBM_ERR_UNSUPPORTED, "pack: exact search: %u buffers over %u time sections is too large", n, e->nsec);
        for (uint32_t s = e->s0[i]; s < e->s1[i]; s++) {
            e->sec_beg[s + 1]++;
            e->sum0[s] += e->size[i];
        }
    }
    for (size_t s = 0; s < S; s++) e->sec_beg[s + 1] += e->sec_beg[s];
    e->sec_it = hbmi_malloc((memb + 1) * sizeof *e->sec_it);
    e->slot = hbmi_malloc((memb + 1) * sizeof *e->slot);
    if (!e->slot) return HBM_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) e->slot_beg[i + 1] = e->slot_beg[i] + (e->s1[i] - e->s0[i]);
    if (!e->sec_it) return HBM_ERR_NOMEM;
    uint32_t *fill = hbmi_malloc(S * sizeof *fill);
    if (!fill) return HBM_ERR_NOMEM;
    memcpy(fill, e->sec_beg, S * sizeof *fill);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t s = e->s0[i]; s < e->s1[i]; s++) e->sec_it[fill[s]++] = i;
    hbmi_free(fill);
    /* the witness of a section is always one of its items (sections never change) */
    for (size_t s = 0; s + 1 < S; s++)
        if (e->sec_beg[s + 1] > e->sec_beg[s]) e->wit[s] = e->sec_it[e->sec_beg[s]];
    return HBM_OK;
}

/* Items by s0, and the overlap lists (a sweep over that order). */
static hbm_status exact_overlaps(hbmi_exact *e, exact_build *x) {
    uint32_t n = e->n;
    uint64_t *tmp = x->tmp;
    for (uint32_t i = 0; i < n; i++) tmp[i] = (uint64_t)e->s0[i] << 32 | i;
    hbmi_qsort(tmp, n, sizeof *tmp, s0_cmp_items);
    for (uint32_t i = 0; i < n; i++) e->bys0[i] = (uint32_t)tmp[i];
    size_t nov = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t a = 0; a < n; a++) {
            uint32_t i = e->bys0[a];
            for (uint32_t c = a + 1; c < n && e->s0[e->bys0[c]] < e->s1[i]; c++) {
                uint32_t j = e->bys0[c];
                if (!pass) {
                    e->ov_beg[i + 1]++;
                    e->ov_beg[j + 1]++;
                    if (++nov > ((size_t)1 << 27))
                        return hbmi_error(HBM_ERR_UNSUPPORTED, "pack: exact search: too many overlapping pairs (over 2^27)");
                } else {
                    e->ov[tmp[i]++] = j;
                    e->ov[tmp[j]++] = i;
                }
            }
        }
        if (!pass) {
            for (uint32_t i = 0; i < n; i++) e->ov_beg[i + 1] += e->ov_beg[i];
            nov = e->ov_beg[n];
            hbmi_pack_clk.setup += nov; /* (the clock's work: pairs that overlap) */
            e->ov = hbmi_malloc((nov + 1) * sizeof *e->ov);
            if (!e->ov) return HBM_ERR_NOMEM;
            for (uint32_t i = 0; i < n; i++) tmp[i] = e->ov_beg[i];
        }
    }
    return HBM_OK;
}

/* Pinned obstacles per item. */
static hbm_status exact_item_pins(hbmi_exact *e, exact_build *x) {
    const hbm_timeline *tl = x->tl;
    uint32_t n = e->n, npin = x->npin;
    uint64_t *tmp = x->tmp;
    if (!npin) return HBM_OK;
    if (!(x->pinned = hbmi_malloc(npin * sizeof *x->pinned))) return HBM_ERR_NOMEM;
    uint32_t *pinned = x->pinned, q = 0;
    for (size_t j = 0; j < tl->count; j++)
        if (tl->buffers[j].flags & HBM_TL_PINNED) pinned[q++] = (uint32_t)j;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < n; i++) {
            const hbm_tl_buffer *b = &tl->buffers[e->buf[i]];
            for (q = 0; q < npin; q++) {
                const hbm_tl_buffer *p = &tl->buffers[pinned[q]];
                if (p->start >= b->end || b->start >= p->end) continue;
                if (!pass) e->pin_beg[i + 1]++;
                else e->pins[tmp[i]++] = (span){p->offset, p->offset + p->size};
            }
        }
        if (!pass) {
            for (uint32_t i = 0; i < n; i++) e->pin_beg[i + 1] += e->pin_beg[i];
            size_t np = e->pin_beg[n];
            e->pins = hbmi_malloc((np + 1) * sizeof *e->pins);
            if (!e->pins) return HBM_ERR_NOMEM;
            for (uint32_t i = 0; i < n; i++) tmp[i] = e->pin_beg[i];
        }
    }
    return HBM_OK;
}

/* Pinned spans per section (every item alive in a section is alive over all of it, so it
 * must clear every pin meeting the section), merged and sorted by offset. */
static hbm_status exact_section_pins(hbmi_exact *e, exact_build *x) {
    const hbm_timeline *tl = x->tl;
    const int64_t *t = x->t;
    uint32_t npin = x->npin;
    const uint32_t *pinned = x->pinned;
    if (!npin) return HBM_OK;
    size_t S1 = (size_t)e->nsec + 1, np = 0;
    e->psec_beg = hbmi_calloc(S1 + 1, sizeof *e->psec_beg);
    e->plim_sum = hbmi_malloc(S1 * sizeof *e->plim_sum);
    e->plim = hbmi_malloc(S1 * sizeof *e->plim);
    if (!e->psec_beg || !e->plim_sum || !e->plim) return HBM_ERR_NOMEM;
    for (size_t q = 0; q < S1; q++) e->plim_sum[q] = INF;
    for (int pass = 0; pass < 2; pass++) {
        np = 0;
        for (uint32_t s = 0; s < e->nsec; s++) {
            size_t first = np;
            for (uint32_t q = 0; q < npin; q++) {
                const hbm_tl_buffer *p = &tl->buffers[pinned[q]];
                if (p->start >= t[s + 1] || t[s] >= p->end) continue;
                if (pass) e->psec[np] = (span){p->offset, p->offset + p->size};
                np++;
            }
            if (!pass) {
                e->psec_beg[s + 1] = (uint32_t)np;
                continue;
            }
            hbmi_qsort(e->psec + first, np - first, sizeof *e->psec, span_cmp);
            size_t m = first; /* merge overlapping or touching spans */
            for (size_t q = first; q < np; q++) {
                if (m > first && e->psec[q].off <= e->psec[m - 1].top) {
                    if (e->psec[q].top > e->psec[m - 1].top) e->psec[m - 1].top = e->psec[q].top;
                } else {
                    e->psec[m++] = e->psec[q];
                }
            }
            e->psec_beg[s + 1] = (uint32_t)m;
            np = m;
        }
        e->psec_beg[e->nsec + 1] = (uint32_t)np;
        if (!pass && !(e->psec = hbmi_malloc((np + 1) * sizeof *e->psec))) return HBM_ERR_NOMEM;
    }
    return HBM_OK;
}

/* Twins (equal size, sections and alignment, so equal obstacles too) and the keys the
 * branching ranks are made of; then the first rank. */
static void exact_ranks(hbmi_exact *e, exact_build *x) {
    const hbm_timeline *tl = x->tl;
    uint32_t n = e->n;
    rkey *rk = x->rk;
    for (uint32_t i = 0; i < n; i++) {
        rk[i] = (rkey){{e->size[i], (uint64_t)e->s0[i] << 32 | e->s1[i], e->align[i]}, i};
        e->twin[i] = -1;
    }
    hbmi_qsort(rk, n, sizeof *rk, twin_cmp);
    for (uint32_t i = 1; i < n; i++)
        if (!memcmp(rk[i].k, rk[i - 1].k, sizeof rk[i].k)) e->twin[rk[i].item] = (int32_t)rk[i - 1].item;
    for (uint32_t i = 0; i < n; i++) {
        const hbm_tl_buffer *tb = &tl->buffers[e->buf[i]];
        uint64_t press = 0, len = (uint64_t)tb->end - (uint64_t)tb->start;
        for (uint32_t s = e->s0[i]; s < e->s1[i]; s++)
            if (e->sum0[s] > press) press = e->sum0[s];
        e->k_press[i] = press;
        e->k_len[i] = len;
        e->k_area[i] = len && e->size[i] > UINT64_MAX / len ? UINT64_MAX : e->size[i] * len;
    }
    e->rk = rk; /* (the ranking's scratch from now on) */
    x->rk = NULL;
    set_rank(e, 0, 0);
    e->cache_min = 4;
}

hbm_status hbmi_exact_new(const hbm_timeline *tl, uint64_t def_align, hbmi_exact **out) {
    hbmi_pack_clk.setup += tl->count;
    exact_build x = {.tl = tl};
    hbmi_exact *e = hbmi_calloc(1, sizeof *e);
    hbm_status s = e ? exact_alloc_items(e, &x) : HBM_ERR_NOMEM;
    if (!s) {
        exact_sections(e, &x, def_align);
        s = exact_section_items(e);
    }
    if (!s) s = exact_overlaps(e, &x);
    if (!s) s = exact_item_pins(e, &x);
    if (!s) s = exact_section_pins(e, &x);
    if (!s) exact_ranks(e, &x);
    hbmi_free(x.t);
    hbmi_free(x.tmp);
    hbmi_free(x.pinned);
    hbmi_free(x.rk);
    if (!s) {
        *out = e;
        return HBM_OK;
    }
    hbmi_exact_free(e);
    if (s == HBM_ERR_NOMEM) return hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory for the exact search");
    return s; /* (its message is set) */
}

/* --- state ---------------------------------------------------------------------------- */
/* The lowest aligned offset >= z for item c that clears its pinned obstacles. */
static uint64_t fit(const hbmi_exact *e, uint32_t c, uint64_t z) {
    if (e->pin_beg[c] == e->pin_beg[c + 1]) return hbmi_align_up(z, e->align[c]); /* no obstacles */
    for (;;) {
        z = hbmi_align_up(z, e->align[c]);
        int moved = 0;
        for (uint32_t p = e->pin_beg[c]; p < e->pin_beg[c + 1]; p++)
            if (z < e->pins[p].top && e->pins[p].off < z + e->size[c]) {
                z = e->pins[p].top;
                moved = 1;
            }
        if (!moved) return z;
    }
}

/* The failure cache names a group's state by sums over its items of a key of (item, lo):
 * kept up to date as lo values change, so a node pays for the items that moved, not for
 * all of them. A placed item (lo INF) adds nothing. */
static inline uint64_t zkey(uint32_t c, uint64_t lo) {
    return lo == INF ? 0 : hbmi_hash64(((uint64_t)c << 40) ^ lo ^ 0x2545f4914f6cdd1dULL);
}

static inline uint64_t zmix(uint64_t m) { return (m ^ (m >> 31)) * 0xbf58476d1ce4e5b9ULL; }

static inline void set_lo(hbmi_exact *e, uint32_t c, uint64_t lo) {
    uint64_t z0 = e->zk[c], z1 = zkey(c, lo);
    e->zh[0] += z1 - z0;
    e->zh[1] += zmix(z1) - zmix(z0);
    e->zk[c] = z1;
    e->lo[c] = lo;
}

static void reset(hbmi_exact *e) {
    e->zh[0] = e->zh[1] = e->zoff[0] = e->zoff[1] = 0;
    for (uint32_t i = 0; i < e->n; i++) {
        e->placed[i] = 0;
        e->lo[i] = fit(e, i, 0);
        e->zk[i] = zkey(i, e->lo[i]);
        e->zh[0] += e->zk[i];
        e->zh[1] += zmix(e->zk[i]);
        e->off[i] = HBM_NO_OFFSET;
        e->uov[i] = e->ov_beg[i + 1] - e->ov_beg[i];
    }
    memcpy(e->sum, e->sum0, ((size_t)e->nsec + 1) * sizeof *e->sum);
    for (uint32_t s = 0; s <= e->nsec; s++) {
        e->nact[s] = e->sec_beg[s + 1] - e->sec_beg[s];
        for (uint32_t q = e->sec_beg[s]; q < e->sec_beg[s + 1]; q++) {
            uint32_t c = e->sec_it[q];
            e->slot[e->slot_beg[c] + (s - e->s0[c])] = q;
        }
    }
    e->ntrail = 0;
    e->npl = 0;
    e->sp = 0;
    e->stop = 0;
}

static int need_stack(hbmi_exact *e, size_t more) {
    if (e->sp + more <= e->cap_stk) return 1;
    if (hbmi_grow((void **)&e->stk, &e->cap_stk, e->sp + more, sizeof *e->stk)) {
        e->stop = 2;
        return 0;
    }
    return 1;
}


static int push_trail(hbmi_exact *e, uint32_t what, uint64_t old) {
    if (e->ntrail == e->cap_trail &&
        hbmi_grow((void **)&e->trail, &e->cap_trail, e->ntrail + 1, sizeof *e->trail)) {
        e->stop = 2;
        return 0;
    }
    e->trail[e->ntrail++] = (trail_ent){what, old};
    return 1;
}

static int place(hbmi_exact *e, uint32_t b, uint64_t y) {
    /* a placed item's lo reads INF (restored from the trail on undo), so the hot checks
     * below and in bounds_ok need not look at placed[] */
    size_t mark = e->ntrail;
    if (!push_trail(e, b, e->lo[b])) return 0;
    e->placed_stk[e->npl++] = (trail_ent){b, mark};
    set_lo(e, b, INF);
    e->placed[b] = 1;
    e->off[b] = y;
    uint64_t top = y + e->size[b];
    for (uint32_t s = e->s0[b]; s < e->s1[b]; s++) {
        /* swap b behind the active entries of s */
        e->sum[s] -= e->size[b];
        uint32_t *sb = &e->slot[e->slot_beg[b] + (s - e->s0[b])];
        uint32_t last = e->sec_beg[s] + --e->nact[s], d = e->sec_it[last];
        e->sec_it[last] = b;
        e->sec_it[*sb] = d;
        e->slot[e->slot_beg[d] + (s - e->s0[d])] = *sb;
        *sb = last;
    }
    for (uint32_t k = e->ov_beg[b]; k < e->ov_beg[b + 1]; k++) {
        uint32_t c = e->ov[k];
        e->uov[c]--;
        if (e->lo[c] >= top) continue; /* placed ones included */
        uint64_t old = e->lo[c];
        if (!push_trail(e, c, old)) return 0;
        set_lo(e, c, fit(e, c, top));
    }
    return 1;
}

/* Take back every placement made since the placement stack held npl items. */
static void undo_to(hbmi_exact *e, size_t npl) {
    while (e->npl > npl) {
        trail_ent t = e->placed_stk[--e->npl];
        uint32_t b = t.item;
        while (e->ntrail > t.old) {
            trail_ent *u = &e->trail[--e->ntrail];
            set_lo(e, u->item, u->old);
        }
        for (uint32_t s = e->s0[b]; s < e->s1[b]; s++) {
            e->sum[s] += e->size[b]; /* b sits right behind the active entries */
            e->nact[s]++;
        }
        e->placed[b] = 0;
        e->off[b] = HBM_NO_OFFSET;
        for (uint32_t k = e->ov_beg[b]; k < e->ov_beg[b + 1]; k++) e->uov[e->ov[k]]++;
    }
}

static void progress(hbmi_exact *e) {
    if (e->deadline_ns && hbmi_pack_now() >= e->deadline_ns) e->stop = 1;
    uint64_t now = e->progress ? hbmi_now_ns() : 0;
    if (e->progress && now - e->last_ns >= 500000000ULL) {
        e->last_ns = now;
        hbm_pack_progress p = {(double)(now - e->start_ns) / 1e9, e->nodes, e->best, e->lb};
        e->progress(e->progress_user, &p);
    }
}

/* --- the search ----------------------------------------------------------------------- */
/* With pins, the room of section s above a floor m is [m, cap) less the pinned spans
 * there. The unplaced items of s (sum bytes) fit above m only if m < pin_lim(s, sum):
 * the least floor that leaves too little room (0: none leaves enough). Walks the
 * section's spans down from the capacity; the last answer per section is kept (sums
 * repeat as the search goes back and forth). */
static uint64_t pin_lim(hbmi_exact *e, uint32_t s, uint64_t sum) {
    if (e->plim_sum[s] == sum) return e->plim[s];
    uint64_t h = e->cap, acc = 0, lim = 0;
    for (uint32_t q = e->psec_beg[s + 1]; q-- > e->psec_beg[s];) {
        const span *p = &e->psec[q];
        if (p->off >= h) continue; /* above the capacity */
        uint64_t top = p->top < h ? p->top : h;
        if (acc + (h - top) >= sum) break;
        acc += h - top;
        h = p->off;
    }
    if (acc + h >= sum) lim = h - (sum - acc) + 1;
    e->plim_sum[s] = sum;
    e->plim[s] = lim;
    return lim;
}

/* The bound a section proves when its sum unplaced bytes cannot all sit above floor m:
 * m + sum, and with pins at least a bound above the capacity (m + sum still holds, the
 * pins only add to it). */
static inline uint64_t sec_bound(const hbmi_exact *e, uint64_t m, uint64_t sum) {
    return e->psec_beg && m + sum <= e->cap ? e->cap + 1 : m + sum;
}

/* The highest floor (*slack) above which section s's sum unplaced bytes still fit under
 * the capacity (less the pins there), and 1; or 0 with *v the bound proven when even
 * floor x is too high. */
static inline int sec_slack(hbmi_exact *e, uint32_t s, uint64_t sum, uint64_t x, uint64_t *slack, uint64_t *v) {
    if (e->psec_beg) {
        uint64_t lim = pin_lim(e, s, sum);
        *slack = lim - 1;
        if (x < lim) return 1;
    } else {
        *slack = e->cap - sum;
        if (sum <= e->cap && x <= e->cap - sum) return 1;
    }
    *v = sec_bound(e, x, sum);
    return 0;
}

/* The section bound: in section s the unplaced items stack above max(x, their least lo)
 * and must end below the capacity. Returns the bound it proves when violated, else 0.
 * Only a section whose slack is in doubt is scanned, and the scan stops at the first
 * item low enough (kept as the section's witness). */
static uint64_t sec_violation(hbmi_exact *e, uint32_t s, uint64_t x) {
    uint64_t sum = e->sum[s];
    if (!sum) return 0;
    uint64_t slack, minlo = INF, v;
    if (!sec_slack(e, s, sum, x, &slack, &v)) return v;
    uint32_t w = e->wit[s];
    if (e->lo[w] <= slack) return 0; /* (INF once placed) */
    for (uint32_t q = e->sec_beg[s], qe = q + e->nact[s]; q < qe; q++) {
        uint32_t c = e->sec_it[q];
        if (e->lo[c] <= slack) {
            e->wit[s] = c;
            return 0;
        }
        if (e->lo[c] < minlo) minlo = e->lo[c];
    }
    return sec_bound(e, minlo, sum);
}

/* sec_violation of section s as it would be after placing b at y (floor y), without
 * placing it: b leaves the section, items overlapping b rise to at least its top (the
 * real lo can only be higher: alignment, obstacles), so a violation found here is one
 * the placement would have too. */
static uint64_t sec_violation_if(hbmi_exact *e, uint32_t s, uint32_t b, uint64_t y) {
    uint64_t top = y + e->size[b], sum = e->sum[s];
    if (e->s0[b] <= s && s < e->s1[b]) sum -= e->size[b];
    if (!sum) return 0;
    uint64_t slack, minlo = INF, v;
    if (!sec_slack(e, s, sum, y, &slack, &v)) return v;
    for (uint32_t q = e->sec_beg[s], qe = q + e->nact[s]; q < qe; q++) {
        uint32_t c = e->sec_it[q];
        if (c == b) continue;
        uint64_t l = e->lo[c];
        if (l < top && e->s0[c] < e->s1[b] && e->s0[b] < e->s1[c]) l = top;
        if (l <= slack) return 0;
        if (l < minlo) minlo = l;
    }
    return sec_bound(e, minlo, sum);
}

/* The section bound over sections [a, z) above floor x. Returns 1 if it holds, else 0
 * with *v a bound the violation proves. Nine in ten checks fail (most children die
 * here), so unless the largest violation is wanted (full_bound: the bounds proven bottom
 * up) the section that failed last goes first and the first violation ends the check;
 * any violation is a valid bound. */
static int bounds_ok(hbmi_exact *e, uint32_t a, uint32_t z, uint64_t x, uint64_t *v) {
    uint64_t worst = 0, w;
    uint32_t last = e->fail_ring[0];
    if (!e->full_bound && last >= a && last < z && (w = sec_violation(e, last, x))) {
        *v = w;
        return 0;
    }
    for (uint32_t s = a; s < z; s++) {
        if (!(w = sec_violation(e, s, x))) continue;
        if (!e->full_bound) {
            if (last != s) {
                memmove(e->fail_ring + 1, e->fail_ring, (NRING - 1) * sizeof e->fail_ring[0]);
                e->fail_ring[0] = s;
            }
            *v = w;
            return 0;
        }
        if (w > worst) worst = w;
    }
    if (worst) {
        *v = worst;
        return 0;
    }
    return 1;
}

static int dfs(hbmi_exact *e, size_t off, uint32_t k, uint64_t x, uint32_t tie, uint64_t *v);

/* --- the failure and solution caches --------------------------------------------------- */
/* A group's state: its items and their lo (the key sums), the floor x and the items
 * excluded by the tie (lo == x, rank below it; xh is the sum of their keys). Which
 * packings can complete a state does not depend on the rank (items at one offset never
 * overlap, so their order is free), so what a search proves holds under every rank:
 * restarts with other ranks find it in the cache too. */
static void group_hash(const hbmi_exact *e, uint32_t k, uint64_t x, uint64_t xh, uint64_t *h1, uint64_t *h2) {
    *h1 = hbmi_hash64((e->zh[0] - e->zoff[0]) ^ hbmi_hash64(x)); /* (not xh: the parent can prefetch) */
    *h2 = hbmi_hash64((e->zh[1] - e->zoff[1]) + ((xh ^ k) + 0x51ed27));
    *h1 += !*h1; /* (0, 0) marks a free slot */
}

/* The failure cache is lossy and set-associative: a key lives in one bucket of FC_WAYS
 * slots. The table doubles when half full, up to FC_MAX slots; a new entry that finds
 * its bucket full replaces the least valuable one there: the least work (the nodes its
 * proof took), halved for every restart since it was last used. */
#define FC_WAYS 4
#define FC_MAX ((size_t)1 << 20)

static struct fent *fc_find(hbmi_exact *e, uint64_t h1, uint64_t h2) {
    if (!e->fc_cap) return NULL;
    struct fent *f = &e->fc[h1 & (e->fc_cap - FC_WAYS)];
    for (int w = 0; w < FC_WAYS; w++)
        if (f[w].h1 == h1 && f[w].h2 == h2) {
            f[w].use = (uint32_t)e->fc_clock;
            return &f[w];
        }
    return NULL;
}

/* The slot for a new key: a free one in its bucket, else (evict) the least valuable. */
static struct fent *fc_slot(struct fent *fc, size_t cap, uint64_t h1, uint32_t clock, int evict) {
    struct fent *f = &fc[h1 & (cap - FC_WAYS)], *old = NULL;
    uint32_t least = UINT32_MAX;
    for (int w = 0; w < FC_WAYS; w++) {
        if (!f[w].h1 && !f[w].h2) return &f[w];
        uint32_t age = clock - f[w].use, val = age >= 32 ? 0 : f[w].work >> age;
        if (!old || val < least) {
            old = &f[w];
            least = val;
        }
    }
    return evict ? old : NULL;
}

static void fc_put(hbmi_exact *e, uint64_t h1, uint64_t h2, uint64_t v, uint64_t work) {
    uint32_t clock = (uint32_t)e->fc_clock, w32 = work > UINT32_MAX ? UINT32_MAX : (uint32_t)work;
    struct fent *f = fc_find(e, h1, h2);
    if (f) {
        if (v > f->v) f->v = v;
        return;
    }
    if (e->fc_cap < FC_MAX && 2 * e->fc_n >= e->fc_cap) {
        /* grow (the cache is optional: no error when out of memory) */
        size_t nc = e->fc_cap ? 2 * e->fc_cap : 4096;
        struct fent *nf = hbmi_calloc(nc, sizeof *nf);
        if (nf) {
            size_t n = 0;
            for (size_t i = 0; i < e->fc_cap; i++) {
                struct fent *o = &e->fc[i], *d;
                if ((o->h1 || o->h2) && (d = fc_slot(nf, nc, o->h1, clock, 0))) {
                    *d = *o;
                    n++;
                }
            }
            hbmi_free(e->fc);
            e->fc = nf;
            e->fc_cap = nc;
            e->fc_n = n;
        }
    }
    if (!e->fc_cap) return;
    f = fc_slot(e->fc, e->fc_cap, h1, clock, 1);
    if (!f->h1 && !f->h2) e->fc_n++;
    *f = (struct fent){h1, h2, v, clock, w32};
}

/* A state proven to fail below a bound above the capacity: 1 with *v that bound. */
static int fc_failed(hbmi_exact *e, uint64_t h1, uint64_t h2, uint64_t *v) {
    struct fent *f = fc_find(e, h1, h2);
    if (!f || f->v <= e->cap) return 0;
    *v = f->v;
    return 1;
}

#define SOL_SLOTS ((size_t)1 << 15)
#define SOL_PAIRS ((size_t)1 << 19)

static struct sent *sol_find(hbmi_exact *e, uint64_t h1, uint64_t h2) {
    if (!e->sol) return NULL;
    for (size_t i = h1 & (SOL_SLOTS - 1);; i = (i + 1) & (SOL_SLOTS - 1)) {
        struct sent *t = &e->sol[i];
        if (!t->k) return t; /* a free slot */
        if (t->h1 == h1 && t->h2 == h2) return t;
    }
}

/* Keep the packing of the group just solved: the items placed since npl0, in order. */
static void sol_put(hbmi_exact *e, uint64_t h1, uint64_t h2, size_t npl0) {
    size_t k = e->npl - npl0;
    if (!k || k > SOL_PAIRS) return;
    if (!e->sol) { /* optional, so no error */
        e->sol = hbmi_calloc(SOL_SLOTS, sizeof *e->sol);
        e->sol_pairs = hbmi_malloc(SOL_PAIRS * sizeof *e->sol_pairs);
        if (!e->sol || !e->sol_pairs) {
            hbmi_free(e->sol);
            hbmi_free(e->sol_pairs);
            e->sol = NULL;
            e->sol_pairs = NULL;
            return;
        }
    }
    if (2 * (e->sol_n + 1) > SOL_SLOTS || e->sol_used + k > SOL_PAIRS) { /* full: start over */
        memset(e->sol, 0, SOL_SLOTS * sizeof *e->sol);
        e->sol_n = e->sol_used = 0;
    }
    uint64_t top = 0;
    for (size_t i = 0; i < k; i++) {
        uint32_t b = e->placed_stk[npl0 + i].item;
        e->sol_pairs[e->sol_used + i] = (trail_ent){b, e->off[b]};
        if (e->off[b] + e->size[b] > top) top = e->off[b] + e->size[b];
    }
    struct sent *t = sol_find(e, h1, h2);
    if (t->k && t->top <= top) return; /* (one that is too high for a smaller capacity goes) */
    e->sol_n += !t->k;
    *t = (struct sent){h1, h2, top, (uint32_t)e->sol_used, (uint32_t)k};
    e->sol_used += k;
}

static int place(hbmi_exact *e, uint32_t b, uint64_t y);

/* dfs on a group searched from scratch (floor 0, no tie), through the solution cache:
 * the same group comes back in the same state whenever a search backtracks over a
 * placement elsewhere in time, and at every restart. */
static int dfs_root(hbmi_exact *e, size_t off, uint32_t k, uint64_t *v) {
    if (k < e->cache_min) return dfs(e, off, k, 0, 0, v);
    uint64_t h1, h2;
    group_hash(e, k, 0, 0, &h1, &h2);
    struct sent *t = sol_find(e, h1, h2);
    if (t && t->k && t->top <= e->cap) { /* solved before: place it again */
        for (uint32_t i = 0; i < t->k; i++)
            if (!place(e, e->sol_pairs[t->at + i].item, e->sol_pairs[t->at + i].old)) return R_ABORT;
        return R_FOUND;
    }
    size_t npl0 = e->npl;
    int r = dfs(e, off, k, 0, 0, v);
    if (r == R_FOUND) sol_put(e, h1, h2, npl0);
    return r;
}

/* zoff = the keys of the unplaced items outside the group stk[go..go+gk) */
static void group_off(hbmi_exact *e, size_t go, uint32_t gk) {
    e->zoff[0] = e->zh[0];
    e->zoff[1] = e->zh[1];
    for (uint32_t q = 0; q < gk; q++) {
        uint64_t z = e->zk[e->stk[go + q]];
        e->zoff[0] -= z;
        e->zoff[1] -= zmix(z);
    }
}

/* Items stk[off..off+k), unplaced and sorted by s0: check the bound, split into
 * independent groups and solve each. */
static int solve_list(hbmi_exact *e, size_t off, uint32_t k, uint64_t x, uint32_t tie, int checked, uint64_t *v) {
    if (!k) return R_FOUND;
    /* the groups: runs of the s0-sorted list that no item bridges; their sections */
    uint32_t ng = 0, z = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t c = e->stk[off + i];
        if (e->s0[c] >= z) ng++;
        if (e->s1[c] > z) z = e->s1[c];
    }
    if (!checked && !bounds_ok(e, e->s0[e->stk[off]], z, x, v)) return R_NONE;
    if (ng == 1) return x || tie ? dfs(e, off, k, x, tie, v) : dfs_root(e, off, k, v);
    /* several: smallest first, so that a group that fails fails cheaply */
    if (!need_stack(e, 2 * (size_t)ng)) return R_ABORT;
    size_t gb = e->sp;
    e->sp += 2 * (size_t)ng;
    uint32_t g = 0;
    for (uint32_t i = 0; i < k;) {
        uint32_t j = i + 1, reach = e->s1[e->stk[off + i]];
        while (j < k && e->s0[e->stk[off + j]] < reach) {
            if (e->s1[e->stk[off + j]] > reach) reach = e->s1[e->stk[off + j]];
            j++;
        }
        uint32_t at = g++;
        while (at && e->stk[gb + 2 * (at - 1) + 1] > j - i) {
            e->stk[gb + 2 * at] = e->stk[gb + 2 * (at - 1)];
            e->stk[gb + 2 * at + 1] = e->stk[gb + 2 * (at - 1) + 1];
            at--;
        }
        e->stk[gb + 2 * at] = i;
        e->stk[gb + 2 * at + 1] = j - i;
        i = j;
    }
    int r = R_FOUND;
    uint64_t zo[2] = {e->zoff[0], e->zoff[1]};
    /* a group known to fail fails the node before any other group is solved: the groups
     * that succeed would otherwise be solved again each time the search comes back here
     * with the failing group in a state it has seen */
    for (g = 0; g < ng && e->fc_n; g++) {
        size_t go = off + e->stk[gb + 2 * g];
        uint32_t gk = e->stk[gb + 2 * g + 1];
        if (gk < e->cache_min) continue;
        group_off(e, go, gk);
        uint64_t h1, h2;
        group_hash(e, gk, 0, 0, &h1, &h2);
        if (fc_failed(e, h1, h2, v)) {
            r = R_NONE;
            break;
        }
    }
    for (g = 0; g < ng && r == R_FOUND; g++) {
        size_t go = off + e->stk[gb + 2 * g];
        uint32_t gk = e->stk[gb + 2 * g + 1];
        if (gk >= e->cache_min) group_off(e, go, gk); /* the group's hash (small ones: none) */
        /* as MiniMalloc does: each group searched from scratch (floor 0) and ranked by
         * what is left of it; the ranks of its items come back afterwards */
        if (!need_stack(e, gk)) {
            r = R_ABORT;
            break;
        }
        size_t sv = e->sp;
        for (uint32_t q = 0; q < gk; q++) e->stk[sv + q] = e->rank[e->stk[go + q]];
        e->sp += gk;
        rank_items(e, e->stk + go, gk, e->variant, e->seed_cur);
        r = dfs_root(e, go, gk, v);
        for (uint32_t q = 0; q < gk; q++) e->rank[e->stk[go + q]] = e->stk[sv + q];
        e->sp = sv;
    }
    e->zoff[0] = zo[0];
    e->zoff[1] = zo[1];
    e->sp = gb;
    return r;
}

typedef struct cand {
    uint64_t lo;
    uint32_t rank, item;
} cand;

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int dfs(hbmi_exact *e, size_t off, uint32_t k, uint64_t x, uint32_t tie, uint64_t *v) {
    uint64_t nodes0 = e->nodes++;
    hbmi_pack_clk.exact += k; /* (the clock's work: the items looked at, below the candidates) */
    if ((e->nodes & 63) == 0) progress(e); /* (a clock read: deadlines kept within ~0.2 ms) */
    if (e->node_limit && e->nodes > e->node_limit && !e->stop) e->stop = 3;
    if (e->stop) return R_ABORT;
    /* the two smallest lo + size, dead nodes, and the first hatless item: one with no
     * unplaced item overlapping it sits at its lo in the least-sum packing, so it comes
     * no later than (lo, rank) in the order and nothing after it can be next */
    uint64_t h1 = INF, h2 = INF, hat_lo = INF, xh = 0;
    uint32_t arg = UINT32_MAX, hat_rank = UINT32_MAX;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t c = e->stk[off + i];
        uint64_t h = e->lo[c] + e->size[c];
        if (h <= x) {
            *v = INF;
            return R_NONE;
        }
        if (e->lo[c] == x && e->rank[c] < tie) xh += e->zx[c]; /* excluded by the tie */
        if (!e->uov[c]) {
            if (e->lo[c] < x || (e->lo[c] == x && e->rank[c] < tie)) {
                *v = INF; /* it can never be placed */
                return R_NONE;
            }
            if (e->lo[c] < hat_lo || (e->lo[c] == hat_lo && e->rank[c] < hat_rank)) {
                hat_lo = e->lo[c];
                hat_rank = e->rank[c];
            }
        }
        if (h < h1) {
            h2 = h1;
            h1 = h;
            arg = c;
        } else if (h < h2) {
            h2 = h;
        }
    }
    /* a state that failed before fails again */
    uint64_t f1 = 0, f2 = 0;
    if (k >= e->cache_min) {
        group_hash(e, k, x, xh, &f1, &f2);
        if (fc_failed(e, f1, f2, v)) {
            e->nodes--; /* a hit is not a node (node limits count search) */
            return R_NONE;
        }
    }
    /* candidates, as (lo, rank, item) triples packed in the stack (4 slots each) */
    if (!need_stack(e, (size_t)k * 4 + k + 1)) return R_ABORT;
    size_t cb = (e->sp + 1) & ~(size_t)1; /* cand needs 8-byte alignment */
    size_t sp0 = e->sp;
    uint32_t nc = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t c = e->stk[off + i];
        uint64_t y = e->lo[c];
        if (y < x || (y == x && e->rank[c] < tie)) continue;
        if (y > hat_lo || (y == hat_lo && e->rank[c] > hat_rank)) continue;
        if (y >= (c == arg ? h2 : h1)) continue;
        if (e->twin[c] >= 0 && !e->placed[e->twin[c]]) continue;
        cand cd = {y, e->rank[c], c};
        memcpy(e->stk + cb + 4 * (size_t)nc, &cd, sizeof cd);
        nc++;
    }
    _Static_assert(sizeof(cand) == 16, "cand packs in 4 slots");
    e->sp = cb + 4 * (size_t)nc;
    hbmi_qsort(e->stk + cb, nc, sizeof(cand), cand_cmp);
    hbmi_pack_clk.exact += 8 * (uint64_t)nc;
    uint64_t best = INF;
    uint32_t sa = e->s0[e->stk[off]], sz = 0; /* the node's sections (the list is sorted by s0) */
    for (uint32_t i = 0; i < k; i++)
        if (e->s1[e->stk[off + i]] > sz) sz = e->s1[e->stk[off + i]];
    for (uint32_t j = 0; j < nc; j++) {
        cand cd;
        memcpy(&cd, e->stk + cb + 4 * (size_t)j, sizeof cd);
        uint32_t b = cd.item;
        /* the sections that failed last, first and without placing b: most children
         * die there (no place and undo for them) */
        uint64_t w = 0;
        for (int q = 0; q < NRING && !e->full_bound && !w; q++) {
            uint32_t lf = e->fail_ring[q];
            if (lf >= sa && lf < sz) w = sec_violation_if(e, lf, b, cd.lo);
        }
        if (w) {
            if (w < best) best = w;
            continue;
        }
        size_t mark = e->npl;
        if (!place(e, b, cd.lo) || !need_stack(e, k)) {
            undo_to(e, mark);
            e->sp = sp0;
            return R_ABORT;
        }
        /* most children die on the bound: check it before building their list (the
         * node's sections cover the child's; the rest of them hold nothing unplaced) */
        uint64_t cv = INF;
        if (!bounds_ok(e, sa, sz, cd.lo, &cv)) {
            undo_to(e, mark);
            if (cv < best) best = cv;
            continue;
        }
        if (e->fc_cap && k > e->cache_min) { /* the child's cache bucket, fetched while its list is built */
            uint64_t p1, p2;
            group_hash(e, k - 1, cd.lo, 0, &p1, &p2);
            __builtin_prefetch(&e->fc[p1 & (e->fc_cap - FC_WAYS)]);
        }
        size_t ro = e->sp;
        uint32_t m = 0;
        for (uint32_t i = 0; i < k; i++)
            if (e->stk[off + i] != b) e->stk[ro + m++] = e->stk[off + i];
        e->sp = ro + m;
        int r = solve_list(e, ro, m, cd.lo, cd.rank, 1, &cv);
        e->sp = ro;
        if (r == R_FOUND) {
            e->sp = sp0;
            return R_FOUND;
        }
        undo_to(e, mark);
        if (r == R_ABORT) {
            e->sp = sp0;
            return R_ABORT;
        }
        if (cv < best) best = cv;
    }
    e->sp = sp0;
    *v = best;
    if (k >= e->cache_min) fc_put(e, f1, f2, best, e->nodes - nodes0);
    return R_NONE;
}

/* One complete or node-limited search with the current rank. */
static int attempt(hbmi_exact *e, uint64_t *v) {
    reset(e);
    e->fc_clock++;
    if (!e->n) return R_FOUND;
    if (!need_stack(e, e->n)) return R_ABORT;
    for (uint32_t i = 0; i < e->n; i++) e->stk[i] = e->bys0[i];
    e->sp = e->n;
    return solve_list(e, 0, e->n, 0, 0, 0, v);
}

hbm_status hbmi_exact_solve(hbmi_exact *e, hbm_timeline *tl, uint64_t capacity,
                            uint64_t deadline_ns, uint64_t node_limit, hbmi_exact_rc *rc,
                            uint64_t *next_bound) {
    if (e->psec_beg && e->cap != capacity)
        for (uint32_t s = 0; s <= e->nsec; s++) e->plim_sum[s] = INF; /* worked out for another capacity */
    e->cap = capacity;
    e->deadline_ns = deadline_ns;
    /* restarts: attempt k of the schedule tries rank k % NRANK with a node limit that
     * doubles every NRANK attempts. A call at a capacity asked for lately goes on where
     * the last one there stopped, so a search handed out in slices (node_limit), even
     * interleaved with a few other capacities, runs the same schedule as one made in a
     * single call. */
    struct sched *sc = &e->sched[0];
    for (int i = 0; i < NSCHED; i++) {
        if (e->sched[i].tick && e->sched[i].cap == capacity) {
            sc = &e->sched[i];
            break;
        }
        if (e->sched[i].tick < sc->tick) sc = &e->sched[i]; /* else the least recent */
    }
    if (!sc->tick || sc->cap != capacity) *sc = (struct sched){capacity, 0, 0};
    sc->tick = ++e->sched_tick;
    uint64_t total0 = e->nodes, first = e->first_limit ? e->first_limit : (uint64_t)e->n * 8 + 64;
    int r = R_ABORT;
    uint64_t v = INF;
    while (r == R_ABORT) {
        uint64_t used = e->nodes - total0, k = sc->k, lim = first;
        for (uint64_t d = k / NRANK; d && lim < UINT64_MAX / 4; d--) lim *= 2;
        if (node_limit && used >= node_limit) goto aborted;
        if (node_limit && lim > node_limit - used) lim = node_limit - used;
        /* the four fixed ranks, then noisy ones with fresh seeds every round */
        unsigned q = (unsigned)(k % NRANK);
        set_rank(e, q < 4 ? q : q == 7 && e->hint ? 7 : 4 + q % 3, ++e->seed);
        e->node_limit = e->nodes + lim;
        v = INF;
        r = attempt(e, &v);
        sc->k++;
        if (e->stop == 2) return hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory in the exact search");
        if (r == R_ABORT && e->stop == 1) goto aborted;
    }
    if (r == R_FOUND) {
        for (uint32_t i = 0; i < e->n; i++) tl->buffers[e->buf[i]].offset = e->off[i];
        *rc = HBMI_EXACT_FOUND;
    } else {
        *rc = HBMI_EXACT_NONE;
        *next_bound = v;
    }
    return HBM_OK;
aborted:
    *rc = HBMI_EXACT_ABORTED;
    return HBM_OK;
}

uint64_t hbmi_exact_nodes(const hbmi_exact *e) { return e->nodes; }

void hbmi_exact_set_full_bounds(hbmi_exact *e, int on) { e->full_bound = on; }

void hbmi_exact_set_first_limit(hbmi_exact *e, uint64_t nodes) { e->first_limit = nodes; }

void hbmi_exact_set_cache_min(hbmi_exact *e, uint32_t items) { e->cache_min = items ? items : 1; }

void hbmi_exact_set_hint(hbmi_exact *e, const hbm_timeline *tl) {
    if (!e->hint && !(e->hint = hbmi_malloc(((size_t)e->n + 1) * sizeof *e->hint))) return; /* optional */
    for (uint32_t i = 0; i < e->n; i++) {
        uint64_t o = tl->buffers[e->buf[i]].offset;
        e->hint[i] = o == HBM_NO_OFFSET ? UINT64_MAX - 1 : o;
    }
}

void hbmi_exact_set_progress(hbmi_exact *e, void (*fn)(void *, const hbm_pack_progress *),
                             void *user, uint64_t start_ns, uint64_t best, uint64_t lower_bound) {
    e->progress = fn;
    e->progress_user = user;
    e->start_ns = start_ns;
    e->last_ns = hbmi_now_ns();
    e->best = best;
    e->lb = lower_bound;
}
