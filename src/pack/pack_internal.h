/* src/pack/pack_internal.h - what the packing files share (pack.c dispatches, pack_greedy.c
 * holds the heuristics, pack_exact.c the search). Offsets are written straight into the
 * timeline's buffers; buffers flagged HBM_TL_PINNED keep theirs and act as obstacles. */
#ifndef HBM_PLAN_PACK_INTERNAL_H
#define HBM_PLAN_PACK_INTERNAL_H

#include <stdint.h>

#include "core/internal.h"
#include "hbm/pack.h"

/* The packers' clock (ns). Wall time, unless the run counts its work instead (hbm_pack
 * without a timeout): then the clock is the work done so far, every step costed at what
 * it takes on the machine the budgets were tuned on (HBMI_WORK_*), so that the same input
 * and options give the same packing whatever the machine's speed or load. Per thread:
 * hbm_pack sets it up and restores it. */
typedef struct hbmi_pack_clock {
    int counting;       /* 1: the clock is the work counted below */
    uint64_t base;      /* the clock's value at the start of the run */
    uint64_t exact;     /* exact-search nodes */
    uint64_t sky;       /* skyline-search nodes */
    uint64_t placed;    /* buffers placed by greedy passes */
    uint64_t setup;     /* buffers set up for a search (per search built) */
} hbmi_pack_clock;
extern _Thread_local hbmi_pack_clock hbmi_pack_clk;
/* Estimated ns per unit of work (2-core AMD EPYC VM, gcc 12 -O2, MiniMalloc's cases). */
#define HBMI_WORK_EXACT_NS 8 /* per item looked at in a node, 8 per candidate */
#define HBMI_WORK_SKY_NS 8 /* per node and candidate looked at */
#define HBMI_WORK_PLACED_NS 65 /* per buffer placed and span looked at */
#define HBMI_WORK_SETUP_NS 35 /* per buffer and overlapping pair */
static inline uint64_t hbmi_pack_now(void) {
    const hbmi_pack_clock *c = &hbmi_pack_clk;
    if (!c->counting) return hbmi_now_ns();
    return c->base + c->exact * HBMI_WORK_EXACT_NS + c->sky * HBMI_WORK_SKY_NS + c->placed * HBMI_WORK_PLACED_NS +
           c->setup * HBMI_WORK_SETUP_NS;
}

/* The orders the greedy heuristics can take buffers in. */
typedef enum hbmi_pack_order {
    HBMI_ORDER_SIZE,     /* size desc, then start (TFLite's greedy by size) */
    HBMI_ORDER_AREA,     /* size * lifetime desc */
    HBMI_ORDER_PRESSURE, /* max live bytes over the lifetime desc, then size */
    HBMI_ORDER_LENGTH,   /* lifetime desc, then size */
    HBMI_ORDER_START,    /* start asc, then size desc */
    HBMI_ORDER_COUNT_
} hbmi_pack_order;

/* The effective alignment of every buffer (>= 1), from its own or o->alignment. */
uint64_t hbmi_pack_align(const hbm_tl_buffer *b, uint64_t def);

/* Place the unpinned buffers of tl one at a time in the given order, each into the
 * smallest gap that holds it among the time-overlapping buffers already placed (best fit,
 * or lowest fit when best_fit is 0), else on top. Writes offsets; *extent gets the result. */
hbm_status hbmi_pack_greedy(hbm_timeline *tl, uint64_t def_align, hbmi_pack_order order,
                            int best_fit, uint64_t *extent);

/* hbm's best heuristic: greedy orders, a search on the bundles for +5 %, the skyline search
 * and short exact probes; keeps the smallest packing. It stops early once a packing within
 * `enough` is found (below lower_bound: the bound itself). Honours the deadline (ns,
 * hbmi_now_ns clock; 0 = none). */
hbm_status hbmi_pack_best(hbm_timeline *tl, uint64_t def_align, uint64_t lower_bound, uint64_t enough,
                          uint64_t deadline_ns, uint64_t *extent);

/* Skyline packing (pack_sky.c): a construction, then node-limited searches at targets
 * between lower_bound and the best so far, up to max_attempts, the bound or the deadline
 * (ns, 0 = none). Only packings with an extent below `upper` (UINT64_MAX: any) count;
 * the best is written into tl and *extent gets it, else tl is left alone and *extent =
 * UINT64_MAX (also for timelines with pinned buffers or more than HBMI_SKY_MAX buffers).
 * seed varies the random tie-breaking between calls; reverse runs time backwards (the
 * skyline then grows from the last section; some timelines pack better that way). */
#define HBMI_SKY_MAX 2000
hbm_status hbmi_pack_sky(hbm_timeline *tl, uint64_t def_align, uint64_t lower_bound, uint64_t upper,
                         uint64_t deadline_ns, uint32_t max_attempts, uint64_t seed, int reverse,
                         uint64_t *extent);

/* The max-live lower bound, counting pinned buffers' tops too. */
hbm_status hbmi_pack_lower_bound(const hbm_timeline *tl, uint64_t *lb);

/* Exact search outcome. */
typedef enum hbmi_exact_rc { HBMI_EXACT_FOUND, HBMI_EXACT_NONE, HBMI_EXACT_ABORTED } hbmi_exact_rc;

typedef struct hbmi_exact hbmi_exact;

/* Build the search structure for tl's unpinned buffers. */
hbm_status hbmi_exact_new(const hbm_timeline *tl, uint64_t def_align, hbmi_exact **out);
void hbmi_exact_free(hbmi_exact *e);
/* Look for a packing within capacity. FOUND: offsets written into tl. NONE: proven that
 * none exists; *next_bound gets a proven lower bound (> capacity) on any packing's extent.
 * ABORTED: the deadline (ns, 0 = none) or node_limit (0 = none) ran out. */
hbm_status hbmi_exact_solve(hbmi_exact *e, hbm_timeline *tl, uint64_t capacity,
                            uint64_t deadline_ns, uint64_t node_limit, hbmi_exact_rc *rc,
                            uint64_t *next_bound);
uint64_t hbmi_exact_nodes(const hbmi_exact *e);
/* Failed searches return the largest bound their cuts prove (slower) rather than the
 * first one found; for the bottom-up bounds of --minimize. */
void hbmi_exact_set_full_bounds(hbmi_exact *e, int on);
/* Node limit of the first round of restarts (0 = the default 8n + 64); small values
 * make a limited search a series of short dives with different ranks. */
void hbmi_exact_set_first_limit(hbmi_exact *e, uint64_t nodes);
/* The least group size the failure and solution caches take (default 4: smaller groups
 * are cheaper to search again); tests set 1 to run the caches on every node. */
void hbmi_exact_set_cache_min(hbmi_exact *e, uint32_t items);
/* Rank 3 of the restarts follows the order of tl's offsets (a packing found earlier,
 * too high: the search then starts next to it) instead of size. */
void hbmi_exact_set_hint(hbmi_exact *e, const hbm_timeline *tl);
/* Progress reporting from inside long searches (may be NULL). */
void hbmi_exact_set_progress(hbmi_exact *e, void (*fn)(void *, const hbm_pack_progress *),
                             void *user, uint64_t start_ns, uint64_t best, uint64_t lower_bound);

/* Bundles (pack_bundle.c): unpinned buffers with the same lifetime and alignment a (and
 * sizes that are multiples of a) as one buffer of their summed size. A restriction: use
 * it to find packings, never to prove bounds. */
typedef struct hbmi_bundles {
    hbm_timeline *tl; /* the bundled timeline (NULL: nothing to bundle) */
    uint32_t *map;    /* buffer -> its bundle in tl */
    uint64_t *rel;    /* buffer -> its offset inside the bundle */
} hbmi_bundles;
hbm_status hbmi_bundle(const hbm_timeline *tl, uint64_t def_align, hbmi_bundles *out);
void hbmi_bundles_free(hbmi_bundles *b);
/* Offsets of tl's unpinned buffers from those of the bundles. */
void hbmi_unbundle(const hbmi_bundles *b, hbm_timeline *tl);

/* qsort comparison of int64_t (time points). */
static inline int hbmi_i64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The distinct time points of tl's buffers (starts and ends), sorted, into t (room for
 * 2 * tl->count); returns how many. */
static inline size_t hbmi_time_points(const hbm_timeline *tl, int64_t *t) {
    size_t nt = 0, u = 0;
    for (size_t i = 0; i < tl->count; i++) {
        t[nt++] = tl->buffers[i].start;
        t[nt++] = tl->buffers[i].end;
    }
    hbmi_qsort(t, nt, sizeof *t, hbmi_i64_cmp);
    for (size_t i = 0; i < nt; i++)
        if (!u || t[u - 1] != t[i]) t[u++] = t[i];
    return u;
}

/* Index of the first of the n sorted time points t that is >= v. */
static inline size_t hbmi_time_index(const int64_t *t, size_t n, int64_t v) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (t[m] < v) lo = m + 1;
        else hi = m;
    }
    return lo;
}

/* MiniMalloc CSV of tl. csv_ids: ids as read from a CSV (non-numeric ones are kept in the
 * tag label), alignment and offset columns when present (hbm_minimalloc_write); otherwise
 * the buffer's index as id and the lifetimes only (exports of traces and plans). */
hbm_status hbmi_minimalloc_write(const hbm_timeline *tl, FILE *f, int csv_ids);

#endif
