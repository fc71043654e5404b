/* pack.c - hbm_pack: options, dispatch to the heuristics and the exact search, and the
 * final verification every packing goes through. */
#include <inttypes.h>
#include <string.h>

#include "core/internal.h"
#include "pack/pack_base.h"
#include "pack/pack_best.h"
#include "pack/pack_bundle.h"
#include "pack/pack_exact.h"
#include "pack/pack_greedy.h"
#include "pack/xla_heap.h"

/* Input limits that keep every offset computation far from overflow. */
#define PACK_MAX_TOTAL (UINT64_C(1) << 56)
#define PACK_MAX_ALIGN (UINT64_C(1) << 40)

static const char *const algo_names[] = {"greedy", "xla-spatial", "xla-temporal", "xla", "best", "exact"};

void hbm_pack_options_default(hbm_pack_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->algo = HBM_PACK_BEST;
}

const char *hbm_pack_algo_str(hbm_pack_algo a) {
    return (unsigned)a < sizeof algo_names / sizeof algo_names[0] ? algo_names[a] : "?";
}

hbm_status hbm_pack_algo_parse(const char *text, hbm_pack_algo *out) {
    if (!text || !out) return hbmi_error(HBM_ERR_INVALID, "pack: NULL argument");
    for (unsigned i = 0; i < sizeof algo_names / sizeof algo_names[0]; i++)
        if (hbmi_streq_ci(text, algo_names[i])) {
            *out = (hbm_pack_algo)i;
            return HBM_OK;
        }
    if (hbmi_streq_ci(text, "tflite") || hbmi_streq_ci(text, "greedy-size")) {
        *out = HBM_PACK_GREEDY_SIZE;
        return HBM_OK;
    }
    return hbmi_error(HBM_ERR_INVALID,
                      "unknown packing algorithm '%s' (greedy, best, exact, xla, xla-spatial, xla-temporal)", text);
}

static hbm_status check_input(const hbm_timeline *tl, const hbm_pack_options *o) {
    uint64_t total = 0;
    if (o->alignment > PACK_MAX_ALIGN)
        return hbmi_error(HBM_ERR_INVALID, "pack: alignment %" PRIu64 " is too large", o->alignment);
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        if (b->size == 0 || b->start >= b->end)
            return hbmi_error(HBM_ERR_INVALID, "pack: buffer %" PRIu64 " has size 0 or an empty lifetime", b->id);
        if (b->alignment > PACK_MAX_ALIGN)
            return hbmi_error(HBM_ERR_INVALID, "pack: buffer %" PRIu64 " has alignment %" PRIu64 ", too large", b->id,
                              b->alignment);
        if (b->size > PACK_MAX_TOTAL || (total += b->size) > PACK_MAX_TOTAL)
            return hbmi_error(HBM_ERR_INVALID, "pack: buffer sizes add up to more than 2^56 bytes");
        if (b->flags & HBM_TL_PINNED) {
            if (b->offset == HBM_NO_OFFSET || b->offset > PACK_MAX_TOTAL)
                return hbmi_error(HBM_ERR_INVALID, "pack: pinned buffer %" PRIu64 " has no usable offset", b->id);
        }
    }
    return HBM_OK;
}

typedef struct pack_run {
    hbm_timeline *tl;
    const hbm_pack_options *o;
    hbm_pack_result *r;
    uint64_t t0, deadline;
    uint64_t *best_off; /* offsets of the best packing so far */
    uint64_t best;      /* its extent (UINT64_MAX = none) */
} pack_run;

static void keep(pack_run *p, uint64_t extent) {
    if (extent >= p->best) return;
    p->best = extent;
    for (size_t i = 0; i < p->tl->count; i++) p->best_off[i] = p->tl->buffers[i].offset;
}

static void restore(pack_run *p) {
    for (size_t i = 0; i < p->tl->count; i++) p->tl->buffers[i].offset = p->best_off[i];
}

/* XLA's decreasing-size best fit (the planner's reproduction of its heap simulator),
 * one order or both, keeping the smaller. The timeline's ids are made unique and the
 * default alignment applied for the call: XLA's routine reads equal ids as colocated. */
static hbm_status run_xla(pack_run *p) {
    hbm_timeline *tl = p->tl;
    uint64_t *ids = hbmi_malloc((tl->count + 1) * sizeof *ids), *aligns = hbmi_malloc((tl->count + 1) * sizeof *aligns);
    if (!ids || !aligns) {
        hbmi_free(ids);
        hbmi_free(aligns);
        return hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory for %zu buffers", tl->count);
    }
    for (size_t i = 0; i < tl->count; i++) {
        ids[i] = tl->buffers[i].id;
        aligns[i] = tl->buffers[i].alignment;
        tl->buffers[i].id = i;
        if (aligns[i] <= 1 && p->o->alignment > 1) tl->buffers[i].alignment = p->o->alignment;
    }
    hbm_status s = HBM_OK;
    for (int temporal = 0; temporal < 2 && !s; temporal++) {
        if ((p->o->algo == HBM_PACK_XLA_SPATIAL && temporal) || (p->o->algo == HBM_PACK_XLA_TEMPORAL && !temporal)) continue;
        uint64_t ext = 0;
        if (!(s = hbmi_xla_best_fit(tl, temporal, &ext))) keep(p, ext);
    }
    for (size_t i = 0; i < tl->count; i++) {
        tl->buffers[i].id = ids[i];
        tl->buffers[i].alignment = aligns[i];
    }
    hbmi_free(ids);
    hbmi_free(aligns);
    return s;
}

/* The exact searches of one run: over the timeline itself, and over its bundles
 * (buffers sharing a lifetime stacked as one: fewer items, fewer symmetric orders, often
 * found much faster; a restriction, so it can only find packings). */
typedef struct searches {
    hbmi_exact *e;        /* the timeline's */
    hbmi_exact *eb;       /* the bundles' (NULL: none) */
    hbmi_bundles b;
    uint64_t b_bound;     /* no bundled packing below this (proven) */
    uint64_t budget;      /* node budget of the next turn */
    uint64_t hinted;      /* the extent of the packing the searches' hint follows */
} searches;

static void searches_free(searches *x) {
    hbmi_exact_free(x->e);
    hbmi_exact_free(x->eb);
    hbmi_bundles_free(&x->b);
}

static uint64_t searches_nodes(const searches *x) {
    return hbmi_exact_nodes(x->e) + (x->eb ? hbmi_exact_nodes(x->eb) : 0);
}

/* Progress lines from both searches (each counts its own nodes). */
static void searches_progress(pack_run *p, searches *x, uint64_t bound) {
    hbmi_exact_set_progress(x->e, p->o->progress, p->o->progress_user, p->t0, p->best, bound);
    if (x->eb) hbmi_exact_set_progress(x->eb, p->o->progress, p->o->progress_user, p->t0, p->best, bound);
}

/* Both searches' restarts follow the best packing so far in two of their ranks (its
 * order, and its order with noise: they search next to it), set once per new best. A
 * bundle's offset there is that of its lowest member. */
static void hint_best(pack_run *p, searches *x) {
    if (p->best == UINT64_MAX || x->hinted == p->best) return;
    x->hinted = p->best;
    restore(p);
    hbmi_exact_set_hint(x->e, p->tl);
    if (!x->eb) return;
    hbm_timeline *bt = x->b.tl;
    for (size_t j = 0; j < bt->count; j++)
        if (!(bt->buffers[j].flags & HBM_TL_PINNED)) bt->buffers[j].offset = UINT64_MAX - 1;
    for (size_t i = 0; i < p->tl->count; i++) {
        const hbm_tl_buffer *b = &p->tl->buffers[i];
        hbm_tl_buffer *d = &bt->buffers[x->b.map[i]];
        if (!(b->flags & HBM_TL_PINNED) && b->offset - x->b.rel[i] < d->offset) d->offset = b->offset - x->b.rel[i];
    }
    hbmi_exact_set_hint(x->eb, bt);
}

/* Look for a packing within c: the bundles and the timeline take turns under doubling
 * node budgets until a packing is found (kept in p; FOUND), the timeline's search proves
 * none exists (NONE, *nb the bound proven), or the deadline or max_nodes (0 = none)
 * runs out (ABORTED). Only the timeline's own search proves anything. */
static hbm_status race(pack_run *p, searches *x, uint64_t c, uint64_t deadline, uint64_t max_nodes,
                       hbmi_exact_rc *rc, uint64_t *nb) {
    uint64_t start = searches_nodes(x);
    hbm_status s = HBM_OK;
    *rc = HBMI_EXACT_ABORTED;
    hint_best(p, x);
    for (;;) {
        for (int turn = x->eb ? 0 : 1; turn < 2; turn++) {
            uint64_t used = searches_nodes(x) - start, lim = x->budget;
            if (max_nodes && used >= max_nodes) return HBM_OK;
            if (max_nodes && lim > max_nodes - used) lim = max_nodes - used;
            if (!turn && c < x->b_bound) continue; /* the bundles cannot fit c */
            hbm_timeline *tl = turn ? p->tl : x->b.tl;
            if ((s = hbmi_exact_solve(turn ? x->e : x->eb, tl, c, deadline, lim, rc, nb))) return s;
            if (*rc == HBMI_EXACT_FOUND) {
                if (!turn) hbmi_unbundle(&x->b, p->tl);
                keep(p, hbm_timeline_extent(p->tl));
                return HBM_OK;
            }
            if (*rc == HBMI_EXACT_NONE) {
                if (turn) return HBM_OK;
                x->b_bound = *nb;
            }
            *rc = HBMI_EXACT_ABORTED;
            if (deadline && hbmi_pack_now() >= deadline) return HBM_OK;
        }
        if (x->budget < UINT64_MAX / 4) x->budget *= 2;
    }
}

/* hbm's best heuristic for up to ms milliseconds (and the run's deadline), stopping at a
 * packing within `enough`; the packing is kept if it is the best so far. */
static hbm_status run_best(pack_run *p, uint64_t ms, uint64_t enough) {
    uint64_t dead = hbmi_pack_now() + ms * 1000000ULL, ext = 0;
    if (p->deadline && p->deadline < dead) dead = p->deadline;
    hbm_status s = hbmi_pack_best(p->tl, p->o->alignment, p->r->lower_bound, enough, dead, &ext);
    if (!s) keep(p, ext);
    return s;
}

/* Exact: fit within capacity, or (minimize) find and prove the least extent. */
static hbm_status run_exact(pack_run *p) {
    const hbm_pack_options *o = p->o;
    hbm_pack_result *r = p->r;
    uint64_t cap = o->capacity, lb = r->lower_bound;
    int minimize = o->minimize || !cap;
    hbm_status s;
    /* the best heuristic first: an upper bound, and often the answer (a fit gives it
     * 10 ms, then the searches 15 ms, then the heuristic 20 ms, then the searches) */
    if ((s = run_best(p, minimize ? 20 : 10, minimize ? lb : cap))) return s;
    if (cap && lb > cap) return HBM_OK; /* proven infeasible by the bound */
    if (!minimize && p->best <= cap) return HBM_OK;
    if (minimize && p->best <= lb) return HBM_OK;
    searches x = {NULL, NULL, {NULL, NULL, NULL}, 0, 2000 + 50 * (uint64_t)p->tl->count, 0};
    if ((s = hbmi_exact_new(p->tl, o->alignment, &x.e)) || (s = hbmi_bundle(p->tl, o->alignment, &x.b)) ||
        (x.b.tl && (s = hbmi_exact_new(x.b.tl, 0, &x.eb)))) {
        searches_free(&x);
        return s;
    }
    searches_progress(p, &x, lb);
    hbmi_exact_rc rc;
    uint64_t nb = 0;
    if (!minimize) {
        uint64_t mid = hbmi_pack_now() + 15000000ULL;
        s = race(p, &x, cap, p->deadline && p->deadline < mid ? p->deadline : mid, 0, &rc, &nb);
        if (!s && rc == HBMI_EXACT_ABORTED && (!p->deadline || hbmi_pack_now() < p->deadline)) {
            if (!(s = run_best(p, 20, cap)) && p->best <= cap) rc = HBMI_EXACT_FOUND;
            else if (!s) s = race(p, &x, cap, p->deadline, 0, &rc, &nb);
        }
        if (!s && rc == HBMI_EXACT_NONE && nb > r->lower_bound) r->lower_bound = nb;
        else if (!s && rc == HBMI_EXACT_ABORTED) r->timed_out = 1;
    } else {
        /* 1. a first look at the bound itself (often the optimum);
         * 2. top down: rounds of targets between the bound and one byte below the best,
         *    until that is proven impossible (then the best is optimal) - most of the time;
         * 3. bottom up (iterative deepening): each failed search proves a larger bound,
         *    so a timeout still reports a good bound - the rest of the time. */
        uint64_t c = lb, now = hbmi_pack_now(), span = p->deadline > now ? p->deadline - now : 0;
        uint64_t td_end = p->deadline ? now + span * 7 / 10 : 0;
        int done = 0;
        searches_progress(p, &x, c);
        uint64_t look = (200000 + 1000 * (uint64_t)p->tl->count) * (x.eb ? 2 : 1); /* nodes */
        s = race(p, &x, c, p->deadline ? now + span / 4 : 0, look, &rc, &nb);
        if (!s && rc == HBMI_EXACT_FOUND) done = 1;
        else if (!s && rc == HBMI_EXACT_NONE) c = nb;
        /* each round asks, under a node budget each, for a packing at the bound itself
         * (twice the budget: on the given cases the optimum is the bound), at half and at
         * three quarters of the gap between the bound and the best, then one byte below
         * the best; a round that finds nothing doubles the budget. (Node counts to success
         * are heavy-tailed and a bolder target is often no harder: a packing found there
         * saves many steps.) */
        uint64_t per = 2000 + 50 * (uint64_t)p->tl->count;
        while (!s && !done && c < p->best && (!td_end || hbmi_pack_now() < td_end)) {
            uint64_t gap = p->best - c, tg[4] = {c, c + gap / 2, c + gap / 4 * 3, p->best - 1};
            int found = 0;
            for (int i = 0; i < 4 && !s && !done && !found; i++) {
                if (tg[i] >= p->best || (i && tg[i] <= tg[i - 1])) continue;
                searches_progress(p, &x, c);
                uint64_t nodes = i ? per : 2 * per; /* the bound itself gets twice as much */
                x.budget = nodes / 2 + 1;           /* both searches get a turn within it */
                if ((s = race(p, &x, tg[i], td_end, nodes, &rc, &nb))) break;
                if (rc == HBMI_EXACT_FOUND) {
                    found = 1;
                } else if (rc == HBMI_EXACT_NONE) { /* the timeline's search: a proof */
                    if (nb > c) c = nb;
                    if (c >= p->best) done = 1; /* nothing below the best */
                } else if (td_end && hbmi_pack_now() >= td_end) {
                    break;
                }
            }
            if (!found && per < UINT64_MAX / 4) per *= 2;
        }
        hbmi_exact_set_full_bounds(x.e, 1); /* bottom up: each failure should prove much */
        while (!s && !done && c < p->best && (!p->deadline || hbmi_pack_now() < p->deadline)) {
            hbmi_exact_set_progress(x.e, o->progress, o->progress_user, p->t0, p->best, c);
            if ((s = hbmi_exact_solve(x.e, p->tl, c, p->deadline, 0, &rc, &nb))) break;
            if (rc == HBMI_EXACT_FOUND) {
                keep(p, hbm_timeline_extent(p->tl));
                break;
            }
            if (rc == HBMI_EXACT_ABORTED) break;
            c = nb;
        }
        if (!s && c < p->best && rc == HBMI_EXACT_ABORTED) r->timed_out = 1;
        if (!s) r->lower_bound = c < p->best ? c : p->best;
    }
    r->nodes = searches_nodes(&x);
    searches_free(&x);
    return s;
}

hbm_status hbm_pack(hbm_timeline *tl, const hbm_pack_options *opts, hbm_pack_result *r) {
    if (!tl || !r) return hbmi_error(HBM_ERR_INVALID, "pack: NULL argument");
    hbm_pack_options def;
    if (!opts) {
        hbm_pack_options_default(&def);
        opts = &def;
    }
    memset(r, 0, sizeof *r);
    if ((unsigned)opts->algo > HBM_PACK_EXACT) return hbmi_error(HBM_ERR_INVALID, "pack: unknown algorithm %d", (int)opts->algo);
    if (opts->timeout_s < 0) return hbmi_error(HBM_ERR_INVALID, "pack: negative timeout");
    hbm_status s = check_input(tl, opts);
    if (s) return s;
    pack_run p = {tl, opts, r, hbmi_now_ns(), 0, NULL, UINT64_MAX};
    if (opts->timeout_s > 0) p.deadline = p.t0 + (uint64_t)(opts->timeout_s * 1e9);
    /* without a timeout the budgets inside the run (best's 9 ms, the phases of a fit) are
     * work counted, not time: the same input gives the same packing on every run */
    hbmi_pack_clock saved_clk = hbmi_pack_clk;
    hbmi_pack_clk = (hbmi_pack_clock){opts->timeout_s > 0 ? 0 : 1, UINT64_C(1) << 40, 0, 0, 0, 0};
    uint64_t *saved = hbmi_malloc((tl->count + 1) * sizeof *saved);
    p.best_off = hbmi_malloc((tl->count + 1) * sizeof *p.best_off);
    if (!saved || !p.best_off) {
        hbmi_free(saved);
        hbmi_free(p.best_off);
        return hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory for %zu buffers", tl->count);
    }
    for (size_t i = 0; i < tl->count; i++) saved[i] = tl->buffers[i].offset;
    if ((s = hbmi_pack_lower_bound(tl, &r->lower_bound))) goto out;
    uint64_t ext = 0;
    switch (opts->algo) {
    case HBM_PACK_GREEDY_SIZE:
        if (!(s = hbmi_pack_greedy(tl, opts->alignment, HBMI_ORDER_SIZE, 1, &ext))) keep(&p, ext);
        break;
    case HBM_PACK_BEST: /* a fast heuristic: HBM_PACK_BEST_DEFAULT_S unless told otherwise */
        if (!(s = hbmi_pack_best(tl, opts->alignment, r->lower_bound, r->lower_bound,
                                 p.deadline ? p.deadline : hbmi_pack_now() + (uint64_t)(HBM_PACK_BEST_DEFAULT_S * 1e9), &ext)))
            keep(&p, ext);
        break;
    case HBM_PACK_XLA_SPATIAL:
    case HBM_PACK_XLA_TEMPORAL:
    case HBM_PACK_XLA:
        s = run_xla(&p);
        break;
    default:
        s = run_exact(&p);
        break;
    }
    if (s) goto out;
    r->seconds = (double)(hbmi_now_ns() - p.t0) / 1e9;
    if (p.best == UINT64_MAX || (opts->capacity && p.best > opts->capacity)) {
        r->feasible = 0;
        r->proven = opts->capacity && r->lower_bound > opts->capacity;
        s = hbmi_error(HBM_ERR_INFEASIBLE,
                       r->proven ? "pack: no packing of %zu buffers fits in %" PRIu64 " bytes (proven: at least %" PRIu64 " needed)"
                                 : "pack: found no packing of %zu buffers within %" PRIu64 " bytes (best %" PRIu64 ")",
                       tl->count, opts->capacity, r->proven ? r->lower_bound : p.best);
        goto out;
    }
    restore(&p);
    if ((s = hbm_timeline_verify(tl, opts->capacity))) {
        if (s == HBM_ERR_CORRUPT) s = hbmi_error_prefix(HBM_ERR_CORRUPT, "pack: internal error, the %s packing is invalid: ", hbm_pack_algo_str(opts->algo));
        goto out;
    }
    r->extent = p.best;
    r->feasible = 1;
    if (r->lower_bound > r->extent) r->lower_bound = r->extent; /* cannot happen; keeps the pair sane */
    r->proven = r->extent == r->lower_bound;
out:
    hbmi_pack_clk = saved_clk;
    if (s)
        for (size_t i = 0; i < tl->count; i++) tl->buffers[i].offset = saved[i];
    hbmi_free(saved);
    hbmi_free(p.best_off);
    return s;
}
