/* pack_greedy.c - packing heuristics: greedy placement in a chosen order (TFLite's greedy
 * by size is the size order with best fit) and hbm's best heuristic, which tries several
 * orders and then a short bounded canonical search below the best greedy result. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "pack/pack_internal.h"

uint64_t hbmi_pack_align(const hbm_tl_buffer *b, uint64_t def) {
    if (b->alignment > 1) return b->alignment;
    return def > 1 ? def : 1;
}

hbm_status hbmi_pack_lower_bound(const hbm_timeline *tl, uint64_t *lb) {
    uint64_t peak = 0;
    int64_t at;
    hbm_status s = hbm_timeline_peak(tl, &peak, &at);
    if (s) return s;
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        if ((b->flags & HBM_TL_PINNED) && b->offset + b->size > peak) peak = b->offset + b->size;
    }
    *lb = peak;
    return HBM_OK;
}

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

/* --- hbm's best heuristic ----------------------------------------------------------------- */
static void save_offsets(const hbm_timeline *tl, uint64_t *to) {
    for (size_t i = 0; i < tl->count; i++) to[i] = tl->buffers[i].offset;
}

/* Greedy placement in the orders other than TFLite's, best fit and lowest fit, while
 * time is left. */
static hbm_status greedy_orders(hbm_timeline *tl, uint64_t def_align, uint64_t lower_bound, uint64_t deadline_ns,
                                uint64_t *best, uint64_t *best_off) {
    for (int ord = 0; ord < HBMI_ORDER_COUNT_ && *best > lower_bound; ord++)
        for (int bf = 1; bf >= 0 && *best > lower_bound; bf--) {
            if (ord == HBMI_ORDER_SIZE && bf) continue;
            if (deadline_ns && hbmi_pack_now() >= deadline_ns) return HBM_OK;
            uint64_t ext;
            hbm_status s = hbmi_pack_greedy(tl, def_align, (hbmi_pack_order)ord, bf, &ext);
            if (s) return s;
            if (ext < *best) {
                *best = ext;
                save_offsets(tl, best_off);
            }
        }
    return HBM_OK;
}

/* One canonical search on the bundles (buffers that share a lifetime, stacked as one)
 * for a packing within +5 % of the bound, then within `enough` if that is larger:
 * rank WAT, node-limited attempts. Bundles have fewer items and no symmetric orders among equal
 * lifetimes, and on timelines the skyline finds hard (MiniMalloc's D) this finds +5 % in
 * a few milliseconds. */
static hbm_status bundle_probe(hbm_timeline *tl, uint64_t def_align, uint64_t lower_bound, uint64_t enough,
                               uint64_t deadline_ns, uint64_t *best, uint64_t *best_off) {
    uint64_t c = lower_bound + lower_bound / 20;
    if (c >= *best || tl->count > 5000) return HBM_OK; /* (the search's setup grows with overlaps) */
    hbmi_bundles bu;
    hbm_status s = hbmi_bundle(tl, def_align, &bu);
    if (s || !bu.tl) return s;
    hbmi_exact *e;
    if ((s = hbmi_exact_new(bu.tl, 0, &e))) {
        hbmi_bundles_free(&bu);
        return s == HBM_ERR_UNSUPPORTED ? HBM_OK : s;
    }
    uint64_t nodes = 16 * (uint64_t)bu.tl->count + 64, ext;
    hbmi_exact_set_first_limit(e, nodes);
    hbmi_exact_rc rc;
    uint64_t nb;
    s = hbmi_exact_solve(e, bu.tl, c, deadline_ns, nodes, &rc, &nb);
    if (!s && rc != HBMI_EXACT_FOUND && enough > c && enough < *best) /* then what is enough */
        s = hbmi_exact_solve(e, bu.tl, enough, deadline_ns, nodes, &rc, &nb);
    if (!s && rc == HBMI_EXACT_FOUND) {
        hbmi_unbundle(&bu, tl);
        if ((ext = hbm_timeline_extent(tl)) < *best) {
            *best = ext;
            save_offsets(tl, best_off);
        }
    }
    hbmi_exact_free(e);
    hbmi_bundles_free(&bu);
    return s;
}

hbm_status hbmi_pack_best(hbm_timeline *tl, uint64_t def_align, uint64_t lower_bound, uint64_t enough,
                          uint64_t deadline_ns, uint64_t *extent) {
    if (enough < lower_bound) enough = lower_bound;
    uint64_t *best_off = hbmi_malloc((tl->count + 1) * sizeof *best_off);
    if (!best_off) return hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory for %zu buffers", tl->count);
    uint64_t best = UINT64_MAX, ext;
    hbm_status s = HBM_OK;
    /* 1. TFLite's greedy by size, a first packing; the other orders after step 2 only
     * when they are cheap next to the budget (else at the end, if time is left) */
    uint64_t t0 = hbmi_pack_now();
    if ((s = hbmi_pack_greedy(tl, def_align, HBMI_ORDER_SIZE, 1, &best))) goto out;
    save_offsets(tl, best_off);
    uint64_t tg = hbmi_pack_now() - t0;
    int early = !deadline_ns || (deadline_ns > t0 && tg * (2 * HBMI_ORDER_COUNT_) <= (deadline_ns - t0) / 5);
    /* 2. the bundles' canonical search for +5 %, for at most 75 % of the time left */
    if (best > enough) {
        uint64_t now = hbmi_pack_now(), until = deadline_ns > now ? now + (deadline_ns - now) / 4 * 3 : deadline_ns;
        if ((s = bundle_probe(tl, def_align, lower_bound, enough, until, &best, best_off))) goto out;
    }
    if (early && (s = greedy_orders(tl, def_align, enough, deadline_ns, &best, best_off))) goto out;
    /* 3. the skyline: a construction, then searches below the best, for most of what is
     * left of the time (64 attempts each way without a deadline), half of it with time
     * running forwards, half backwards */
    int dir = 0;
    if (best > enough) {
        uint64_t now = hbmi_pack_now(), left = deadline_ns > now ? deadline_ns - now : 0;
        for (int d = 0; d < 2 && best > enough; d++) {
            uint64_t until = deadline_ns ? now + left / 20 * 7 * (uint64_t)(d + 1) : 0;
            if (deadline_ns && until < hbmi_pack_now()) until = hbmi_pack_now();
            if ((s = hbmi_pack_sky(tl, def_align, lower_bound, best, until, deadline_ns ? UINT32_MAX : 64, 1, d, &ext)))
                goto out;
            if (ext < best) {
                best = ext;
                dir = d;
                save_offsets(tl, best_off);
            }
        }
    }
    /* 4. a short canonical search below the best so far: bisect between the bound and the
     * best extent, each probe limited in nodes (deterministic) and by the deadline */
    if (best > enough && tl->count > 1 && tl->count <= 50000 && (!deadline_ns || hbmi_pack_now() < deadline_ns)) {
        hbmi_exact *e;
        if ((s = hbmi_exact_new(tl, def_align, &e))) {
            if (s != HBM_ERR_UNSUPPORTED) goto out;
            s = HBM_OK; /* too large for the exact search */
            goto sky2;
        }
        /* canonical dives without a capacity: bottom-up, lowest lo first */
        for (int d = 0; d < 4 && best > enough; d++) {
            hbmi_exact_rc rc;
            uint64_t nb;
            if (d && deadline_ns && hbmi_pack_now() >= deadline_ns) break;
            if ((s = hbmi_exact_solve(e, tl, UINT64_C(1) << 60, deadline_ns, 4 * (uint64_t)tl->count + 16, &rc, &nb))) break;
            if (rc == HBMI_EXACT_FOUND && (ext = hbm_timeline_extent(tl)) < best) {
                best = ext;
                save_offsets(tl, best_off);
            }
        }
        /* then probes at +5 %, at the bound itself, and from +10 % down, each a search
         * limited in nodes (short dives with varied ranks); two misses or a proof of
         * infeasibility end it */
        static const uint32_t permille[] = {50, 0, 100, 70, 35, 25};
        uint64_t budget = 600 + 12 * (uint64_t)tl->count, stop = deadline_ns;
        hbmi_exact_set_first_limit(e, 2 * (uint64_t)tl->count + 32);
        int misses = 0;
        for (size_t p = 0; p < sizeof permille / sizeof permille[0] && misses < 2 && (!stop || hbmi_pack_now() < stop); p++) {
            uint64_t c = lower_bound + lower_bound / 1000 * permille[p];
            if (c >= best) continue;
            hbmi_exact_rc rc;
            uint64_t nb;
            if ((s = hbmi_exact_solve(e, tl, c, stop, budget, &rc, &nb))) break;
            if (rc == HBMI_EXACT_FOUND) {
                ext = hbm_timeline_extent(tl);
                if (ext < best) {
                    best = ext;
                    save_offsets(tl, best_off);
                }
                misses = 0;
            } else if (rc == HBMI_EXACT_NONE) {
                break;
            } else if (c != lower_bound) {
                misses++;
            }
        }
        hbmi_exact_free(e);
        if (s) goto out;
    }
sky2:
    /* 5. the other greedy orders if they were left for later, and 6. the skyline again
     * with whatever time is left, in the direction that did better */
    if (!early && (s = greedy_orders(tl, def_align, enough, deadline_ns, &best, best_off))) goto out;
    if (best > enough && deadline_ns && hbmi_pack_now() < deadline_ns) {
        if ((s = hbmi_pack_sky(tl, def_align, lower_bound, best, deadline_ns, UINT32_MAX, 2, dir, &ext))) goto out;
        if (ext < best) {
            best = ext;
            save_offsets(tl, best_off);
        }
    }
    for (size_t i = 0; i < tl->count; i++) tl->buffers[i].offset = best_off[i];
    *extent = best;
out:
    hbmi_free(best_off);
    return s;
}
