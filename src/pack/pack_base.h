/* src/pack/pack_base.h - the packer's ground floor, shared by every packing file: the
 * clock, the time-point index, alignment and the lower bound. Includes nothing of pack/.
 * Offsets are written straight into the timeline's buffers; buffers flagged HBM_TL_PINNED
 * keep theirs and act as obstacles. */
#ifndef HBM_PACK_BASE_H
#define HBM_PACK_BASE_H

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

/* The effective alignment of every buffer (>= 1), from its own or o->alignment. */
static inline uint64_t hbmi_pack_align(const hbm_tl_buffer *b, uint64_t def) {
    if (b->alignment > 1) return b->alignment;
    return def > 1 ? def : 1;
}

/* The max-live lower bound, counting pinned buffers' tops too. */
hbm_status hbmi_pack_lower_bound(const hbm_timeline *tl, uint64_t *lb);

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

#endif
