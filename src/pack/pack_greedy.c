/* pack_greedy.c - greedy placement in a chosen order (TFLite's greedy by size is the size
 * order with best fit). */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "pack/pack_greedy.h"

/* --- ordering keys ---------------------------------------------------------------------- */
typedef struct gkey {
    uint64_t k1, k2, k3; /* compared descending */
    uint32_t idx;
} gkey;

static int gkey_cmp(const void *a, const void *b) {
    const gkey *x = a, *y = b;
    if (x->k1 != y->k1) return x->k1 > y->k1 ? -1 : 1;
    if (x->k2 != y->k2) return x->k2 > y->k2 ? -1 : 1;
    if (x->k3 != y->k3) return x->k3 > y->k3 ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}


/* Max live bytes over each buffer's lifetime (a range maximum over the time sections). */
static hbm_status pressure(const hbm_timeline *tl, uint64_t *out) {
    size_t n = tl->count, nt = 0;
    int64_t *t = hbmi_malloc((2 * n + 1) * sizeof *t);
    uint64_t *live = hbmi_calloc(2 * n + 1, sizeof *live);
    uint64_t **sp = NULL;
    hbm_status s = HBM_OK;
    if (!t || !live) goto nomem;
    nt = hbmi_time_points(tl, t);
    /* difference array over sections [t[k], t[k+1]) */
    for (size_t i = 0; i < n; i++) { /* unsigned wrap-around keeps the sums exact */
        live[hbmi_time_index(t, nt, tl->buffers[i].start)] += tl->buffers[i].size;
        live[hbmi_time_index(t, nt, tl->buffers[i].end)] -= tl->buffers[i].size;
    }
    for (size_t k = 1; k < nt; k++) live[k] += live[k - 1];
    size_t levels = 1;
    while (((size_t)1 << levels) <= nt) levels++;
    sp = hbmi_calloc(levels, sizeof *sp);
    if (!sp) goto nomem;
    sp[0] = live;
    for (size_t l = 1; l < levels; l++) {
        sp[l] = hbmi_malloc(nt * sizeof **sp);
        if (!sp[l]) goto nomem;
        size_t w = (size_t)1 << (l - 1);
        for (size_t k = 0; k < nt; k++)
            sp[l][k] = k + w < nt && sp[l - 1][k + w] > sp[l - 1][k] ? sp[l - 1][k + w] : sp[l - 1][k];
    }
    for (size_t i = 0; i < n; i++) {
        size_t a = hbmi_time_index(t, nt, tl->buffers[i].start), b = hbmi_time_index(t, nt, tl->buffers[i].end);
        size_t len = b - a, l = 0;
        while (((size_t)2 << l) <= len) l++;
        uint64_t x = sp[l][a], y = sp[l][b - ((size_t)1 << l)];
        out[i] = x > y ? x : y;
    }
    goto done;
nomem:
    s = hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory ordering %zu buffers", n);
done:
    if (sp)
        for (size_t l = 1; l < levels; l++) hbmi_free(sp[l]);
    hbmi_free(sp);
    hbmi_free(t);
    hbmi_free(live);
    return s;
}

/* --- greedy placement ------------------------------------------------------------------- */
typedef struct span {
    uint64_t off, top;
} span;

/* Shell sort by offset (Ciura's gaps): inline, no comparison callback - the lists are
 * short and this runs once per buffer placed. */
static void span_sort(span *v, size_t n) {
    static const size_t gaps[] = {1160000, 515000, 229000, 102000, 45300, 20100, 8900, 3950, 1750, 701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        size_t h = gaps[g];
        if (h >= n) continue;
        for (size_t i = h; i < n; i++) {
            span t = v[i];
            size_t j = i;
            for (; j >= h && v[j - h].off > t.off; j -= h) v[j] = v[j - h];
            v[j] = t;
        }
    }
}

typedef struct tstart {
    int64_t t;
    uint32_t idx;
} tstart;

static int tstart_cmp(const void *a, const void *b) {
    const tstart *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* A key that sorts descending as v sorts ascending. */
static uint64_t asc_key(int64_t v) { return UINT64_MAX - ((uint64_t)v ^ (UINT64_C(1) << 63)); }

hbm_status hbmi_pack_greedy(hbm_timeline *tl, uint64_t def_align, hbmi_pack_order order,
                            int best_fit, uint64_t *extent) {
    size_t n = tl->count;
    gkey *keys = hbmi_malloc((n + 1) * sizeof *keys);
    tstart *bystart = hbmi_malloc((n + 1) * sizeof *bystart);
    int64_t *starts = hbmi_malloc((n + 1) * sizeof *starts);
    uint8_t *placed = hbmi_calloc(n + 1, 1);
    span *sp = hbmi_malloc((n + 1) * sizeof *sp);
    uint64_t *pr = order == HBMI_ORDER_PRESSURE ? hbmi_malloc((n + 1) * sizeof *pr) : NULL;
    hbm_status s = HBM_OK;
    if (!keys || !bystart || !starts || !placed || !sp || (order == HBMI_ORDER_PRESSURE && !pr)) {
        s = hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory for %zu buffers", n);
        goto done;
    }
    if (pr && (s = pressure(tl, pr))) goto done;
    size_t nk = 0;
    uint64_t maxlen = 0;
    for (size_t i = 0; i < n; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        bystart[i] = (tstart){b->start, (uint32_t)i};
        if ((uint64_t)b->end - (uint64_t)b->start > maxlen) maxlen = (uint64_t)b->end - (uint64_t)b->start;
        if (b->flags & HBM_TL_PINNED) {
            placed[i] = 1;
            continue;
        }
        uint64_t len = (uint64_t)b->end - (uint64_t)b->start;
        gkey k = {0, 0, 0, (uint32_t)i};
        switch (order) {
        case HBMI_ORDER_SIZE: k.k1 = b->size; k.k2 = asc_key(b->start); break;
        case HBMI_ORDER_AREA: k.k1 = len && b->size > UINT64_MAX / len ? UINT64_MAX : b->size * len; k.k2 = b->size; break;
        case HBMI_ORDER_PRESSURE: k.k1 = pr[i]; k.k2 = b->size; k.k3 = len; break;
        case HBMI_ORDER_LENGTH: k.k1 = len; k.k2 = b->size; break;
        default: k.k1 = asc_key(b->start); k.k2 = b->size; break;
        }
        keys[nk++] = k;
    }
    hbmi_qsort(keys, nk, sizeof *keys, gkey_cmp);
    hbmi_qsort(bystart, n, sizeof *bystart, tstart_cmp);
    for (size_t i = 0; i < n; i++) starts[i] = bystart[i].t;
    uint64_t ext = 0;
    for (size_t i = 0; i < n; i++)
        if (placed[i] && tl->buffers[i].offset + tl->buffers[i].size > ext)
            ext = tl->buffers[i].offset + tl->buffers[i].size;
    for (size_t q = 0; q < nk; q++) {
        hbm_tl_buffer *b = &tl->buffers[keys[q].idx];
        uint64_t a = hbmi_pack_align(b, def_align);
        /* placed buffers overlapping b in time: their start is in (b->start - maxlen, b->end) */
        int64_t from = (uint64_t)b->start - (uint64_t)INT64_MIN <= maxlen ? INT64_MIN : (int64_t)((uint64_t)b->start - maxlen);
        size_t lo = hbmi_time_index(starts, n, from), ns = 0;
        for (size_t j = lo; j < n && starts[j] < b->end; j++) {
            const hbm_tl_buffer *o = &tl->buffers[bystart[j].idx];
            if (!placed[bystart[j].idx] || o->end <= b->start) continue;
            sp[ns++] = (span){o->offset, o->offset + o->size};
        }
        hbmi_pack_clk.placed += ns + 1; /* (the clock's work: spans looked at) */
        span_sort(sp, ns);
        uint64_t cur = 0, best = UINT64_MAX, bestgap = UINT64_MAX;
        for (size_t j = 0; j < ns; j++) {
            uint64_t at = hbmi_align_up(cur, a);
            if (sp[j].off > at && sp[j].off - at >= b->size) {
                uint64_t gap = sp[j].off - cur;
                if (gap < bestgap) {
                    bestgap = gap;
                    best = at;
                    if (!best_fit) break;
                }
            }
            if (sp[j].top > cur) cur = sp[j].top;
        }
        if (best == UINT64_MAX) best = hbmi_align_up(cur, a);
        b->offset = best;
        placed[keys[q].idx] = 1;
        if (best + b->size > ext) ext = best + b->size;
    }
    *extent = ext;
done:
    hbmi_free(keys);
    hbmi_free(bystart);
    hbmi_free(starts);
    hbmi_free(placed);
    hbmi_free(sp);
    hbmi_free(pr);
    return s;
}
