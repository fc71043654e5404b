/* pack_best.c - the portfolio, hbm's best heuristic: TFLite's greedy by size, a search on
 * the bundles, the other greedy orders, the skyline search and short exact probes below the
 * best so far, each under a share of the deadline; keeps the smallest packing. The packers
 * it calls know nothing of each other. */
#include "core/internal.h"
#include "pack/pack_best.h"
#include "pack/pack_bundle.h"
#include "pack/pack_exact.h"
#include "pack/pack_greedy.h"
#include "pack/pack_sky.h"

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
