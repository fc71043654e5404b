/* pack_sky.c - skyline packing for hbm's best heuristic (in the spirit of TelaMalloc's
 * contour placement and of best-fit skyline heuristics for strip packing).
 *
 * Time is cut into sections at every start and end. The skyline is the top of what is
 * placed in each section. Bottom up: take the lowest stretch of the skyline among the
 * sections some unplaced buffer still needs, and place there, at its height, one of the
 * buffers whose lifetime lies inside the stretch (every such buffer's lowest offset is
 * that height). The one chosen scores best on: starting at the stretch's left end (no
 * hole on the left), leaving a right remainder that an unplaced buffer can start (or
 * none), ending level with a neighbouring step (the skyline merges), filling the
 * stretch's width, its size, and a random term that differs between nodes. When no
 * buffer fits inside the stretch, the stretch is raised (wasted) to its lower needed
 * neighbour (a buffer crossing the stretch needs that neighbour too, so nothing lower
 * is lost).
 *
 * Search: a plain construction, then depth-first searches for a packing below a target
 * C (between the lower bound and the best so far), two branches per node, each under a
 * node limit (4n + 64) and the deadline. A node dies when a raise lifts a section's
 * skyline plus the unplaced bytes that need the section above C (they all stack above
 * the skyline). Each node costs O(sections + buffers starting in the stretch). The
 * search recurses once per buffer placed, hence HBMI_SKY_MAX. Timelines with pinned
 * buffers are left to the other heuristics. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "pack/pack_sky.h"

typedef struct sky {
    uint32_t n, S;
    uint32_t *s0, *s1;     /* item sections [s0, s1) */
    uint64_t *size, *align;
    uint64_t *H;           /* skyline per section */
    uint32_t *cnt;         /* unplaced items covering each section */
    uint8_t *pl;           /* placed? */
    uint32_t *st_beg, *st_it; /* CSR: items by start section */
    uint64_t *off;         /* offsets of the construction */
    uint64_t *rem;         /* unplaced bytes covering each section */
    uint64_t maxsize;
    double *szf;           /* size / maxsize */
    uint64_t rng;
    struct htr { uint32_t s; uint64_t h; } *tr; /* undo trail of skyline heights */
    size_t ntr, cap_tr;
    uint32_t *cstk;        /* chosen candidates of the nodes on the path */
    size_t ncs, cap_cs;
    uint64_t nodes, node_limit;
    double w[5];
    uint64_t deadline;
} sky;
typedef struct cand_t {
    double sc;
    uint32_t u;
} cand_t;
#define SKY_WMAX 4 /* most branches per node */

static int i64c(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t sec_of(const int64_t *t, uint32_t n, int64_t v) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t m = lo + (hi - lo) / 2;
        if (t[m] < v) lo = m + 1;
        else hi = m;
    }
    return lo;
}

static double urand(sky *k) { /* xorshift64*, in [0, 1) */
    k->rng ^= k->rng >> 12;
    k->rng ^= k->rng << 25;
    k->rng ^= k->rng >> 27;
    return (double)((k->rng * 0x2545f4914f6cdd1dULL) >> 11) / 9007199254740992.0;
}

/* Depth-first search below capacity C, branching on the best `width` candidates of each
 * stretch by score (noise differs between restarts), under a node limit: a packing found,
 * none below C, the limit reached, or out of host memory (which ends the whole search). */
enum { SKY_FOUND, SKY_NONE, SKY_ABORT, SKY_NOMEM };

static int trail_h(sky *k, uint32_t a, uint32_t b) {
    if (k->ntr + (b - a) > k->cap_tr) {
        size_t want = k->ntr + (b - a);
        if (hbmi_grow((void **)&k->tr, &k->cap_tr, want, sizeof *k->tr)) return 0;
    }
    for (uint32_t s = a; s < b; s++) k->tr[k->ntr++] = (struct htr){s, k->H[s]};
    return 1;
}

static void untrail(sky *k, size_t mark) {
    while (k->ntr > mark) {
        k->ntr--;
        k->H[k->tr[k->ntr].s] = k->tr[k->ntr].h;
    }
}

static int dfs(sky *k, uint32_t nu, uint64_t C, double noise, uint32_t width, uint32_t hint) {
    if (!nu) return SKY_FOUND;
    if (++k->nodes > k->node_limit) return SKY_ABORT;
    if ((k->nodes & 127) == 0 && k->deadline && k->node_limit != UINT64_MAX && hbmi_pack_now() >= k->deadline)
        k->node_limit = 0; /* the plain construction (no limit) always completes */
    size_t mark = k->ntr;
    uint64_t h;
    uint32_t a, b, nc, nt;
    cand_t best[SKY_WMAX];
    if (width > SKY_WMAX) width = SKY_WMAX;
    for (;;) {
        /* the lowest stretch [a, b) among the sections still needed. The hint: what is
         * left of the parent's stretch right of the buffer just placed is still at the
         * lowest height (placements only raise), so no scan is needed */
        if (hint != UINT32_MAX) {
            a = hint;
            h = k->H[a];
            hint = UINT32_MAX;
        } else {
            const uint64_t *H = k->H;
            const uint32_t *cnt = k->cnt;
            h = UINT64_MAX;
            a = 0;
            hbmi_pack_clk.sky += k->S / 8; /* (the clock's work) */
            for (uint32_t r = 0; r < k->S; r++)
                if (cnt[r] && H[r] < h) {
                    h = H[r];
                    a = r;
                }
        }
        for (b = a + 1; b < k->S && k->cnt[b] && k->H[b] == h; b++) {}
        nc = nt = 0;
        double wid = k->w[3] / (double)(b - a);
        hbmi_pack_clk.sky += 1 + k->st_beg[b] - k->st_beg[a]; /* (the clock's work: candidates looked at) */
        for (uint32_t q = k->st_beg[a]; q < k->st_beg[b]; q++) {
            uint32_t c = k->st_it[q];
            if (k->pl[c] || k->s1[c] > b) continue;
            uint64_t y = hbmi_align_up(h, k->align[c]), top = y + k->size[c];
            if (top > C) continue;
            double sc = 0;
            if (k->s0[c] == a) sc += k->w[0];
            if (k->s1[c] == b) sc += k->w[1];
            else {
                for (uint32_t v = k->st_beg[k->s1[c]]; v < k->st_beg[k->s1[c] + 1]; v++) {
                    uint32_t d = k->st_it[v];
                    if (!k->pl[d] && k->s1[d] <= b) {
                        sc += k->w[1];
                        break;
                    }
                }
            }
            if ((k->s0[c] == a && a > 0 && k->H[a - 1] == top) || (k->s1[c] == b && b < k->S && k->H[b] == top)) sc += k->w[2];
            sc += wid * (double)(k->s1[c] - k->s0[c]) + k->w[4] * k->szf[c];
            if (noise > 0) sc += noise * urand(k);
            /* keep the best `width` so far, first found first on ties */
            nc++;
            if (nt < width || sc > best[nt - 1].sc) {
                uint32_t j = nt < width ? nt++ : nt - 1;
                for (; j > 0 && sc > best[j - 1].sc; j--) best[j] = best[j - 1];
                best[j] = (cand_t){sc, c};
            }
        }
        if (nc) break;
        /* nothing fits inside: raise the stretch to its lower needed neighbour (wasted
         * space); a buffer crossing the stretch needs that neighbour too */
        uint64_t to = UINT64_MAX;
        if (a > 0 && k->cnt[a - 1] && k->H[a - 1] < to) to = k->H[a - 1];
        if (b < k->S && k->cnt[b] && k->H[b] < to) to = k->H[b];
        int dead = to == UINT64_MAX;
        for (uint32_t s = a; s < b && !dead; s++)
            if (to + k->rem[s] > C) dead = 1;
        if (dead || !trail_h(k, a, b)) {
            untrail(k, mark);
            return dead ? SKY_NONE : SKY_NOMEM;
        }
        for (uint32_t s = a; s < b; s++) k->H[s] = to;
    }
    /* the best candidates by score, best first */
    size_t cbase = k->ncs;
    if (k->ncs + nt > k->cap_cs) {
        size_t want = k->ncs + nt;
        if (hbmi_grow((void **)&k->cstk, &k->cap_cs, want, sizeof *k->cstk)) {
            untrail(k, mark);
            return SKY_NOMEM;
        }
    }
    uint32_t take = nt;
    for (uint32_t j = 0; j < take; j++) k->cstk[cbase + j] = best[j].u;
    k->ncs += take;
    int r = SKY_NONE;
    for (uint32_t j = 0; j < take && r == SKY_NONE; j++) {
        uint32_t c = k->cstk[cbase + j];
        uint64_t y = hbmi_align_up(h, k->align[c]), top = y + k->size[c];
        size_t m2 = k->ntr;
        if (!trail_h(k, k->s0[c], k->s1[c])) {
            r = SKY_NOMEM;
            break;
        }
        k->off[c] = y;
        for (uint32_t s = k->s0[c]; s < k->s1[c]; s++) {
            k->H[s] = top;
            k->cnt[s]--;
            k->rem[s] -= k->size[c];
        }
        k->pl[c] = 1;
        /* the next lowest stretch is known when some of this one is left: left of c (its
         * sections untouched) or right of it */
        uint32_t next = k->s0[c] > a ? a : k->s1[c] < b && k->cnt[k->s1[c]] ? k->s1[c] : UINT32_MAX;
        r = dfs(k, nu - 1, C, noise, width, next);
        k->pl[c] = 0;
        for (uint32_t s = k->s0[c]; s < k->s1[c]; s++) {
            k->cnt[s]++;
            k->rem[s] += k->size[c];
        }
        if (r == SKY_FOUND) break;
        untrail(k, m2);
    }
    k->ncs = cbase;
    if (r != SKY_FOUND) untrail(k, mark);
    return r;
}

/* One search at capacity C (UINT64_MAX: a plain construction). */
static int attempt(sky *k, uint64_t C, double noise, uint32_t width, uint64_t nodes) {
    memset(k->H, 0, (size_t)k->S * sizeof *k->H);
    memset(k->cnt, 0, (size_t)k->S * sizeof *k->cnt);
    memset(k->rem, 0, (size_t)k->S * sizeof *k->rem);
    memset(k->pl, 0, k->n);
    for (uint32_t i = 0; i < k->n; i++) {
        for (uint32_t s = k->s0[i]; s < k->s1[i]; s++) {
            k->cnt[s]++;
            k->rem[s] += k->size[i];
        }
    }
    k->ntr = 0;
    k->ncs = 0;
    k->nodes = 0;
    k->node_limit = nodes;
    return dfs(k, k->n, C, noise, width, UINT32_MAX);
}

static uint64_t extent_of(const sky *k) {
    uint64_t e = 0;
    for (uint32_t i = 0; i < k->n; i++)
        if (k->off[i] + k->size[i] > e) e = k->off[i] + k->size[i];
    return e;
}

/* Score weights: starts at the left end, right remainder startable, ends level with a
 * neighbour, share of the width, share of the largest size. */
#define SKY_NW 4
static const double sky_weights[SKY_NW][5] = {{8, 4, 2, 1, 4}, {8, 4, 2, 1, 1}, {8, 4, 4, 1, 4}, {8, 6, 2, 2, 6}};

hbm_status hbmi_pack_sky(hbm_timeline *tl, uint64_t def_align, uint64_t lower_bound, uint64_t upper,
                         uint64_t deadline_ns, uint32_t max_attempts, uint64_t seed, int reverse, uint64_t *extent) {
    size_t N = tl->count;
    *extent = UINT64_MAX;
    for (size_t i = 0; i < N; i++)
        if (tl->buffers[i].flags & HBM_TL_PINNED) return HBM_OK; /* not handled here */
    if (N == 0 || N > HBMI_SKY_MAX) return HBM_OK; /* (the search recurses once per buffer) */
    hbmi_pack_clk.setup += N;
    sky k;
    memset(&k, 0, sizeof k);
    k.n = (uint32_t)N;
    k.rng = 0x243f6a8885a308d3ULL ^ (seed * 0x9e3779b97f4a7c15ULL);
    if (!k.rng) k.rng = 1;
    int64_t *t = hbmi_malloc((2 * N + 1) * sizeof *t);
    k.s0 = hbmi_malloc((N + 1) * sizeof *k.s0);
    k.s1 = hbmi_malloc((N + 1) * sizeof *k.s1);
    k.size = hbmi_malloc((N + 1) * sizeof *k.size);
    k.align = hbmi_malloc((N + 1) * sizeof *k.align);
    k.H = hbmi_malloc((2 * N + 1) * sizeof *k.H);
    k.cnt = hbmi_malloc((2 * N + 1) * sizeof *k.cnt);
    k.pl = hbmi_malloc(N + 1);
    k.st_beg = hbmi_calloc(2 * N + 2, sizeof *k.st_beg);
    k.st_it = hbmi_malloc((N + 1) * sizeof *k.st_it);
    k.off = hbmi_malloc((N + 1) * sizeof *k.off);
    k.rem = hbmi_malloc((2 * N + 1) * sizeof *k.rem);
    k.szf = hbmi_malloc((N + 1) * sizeof *k.szf);
    k.deadline = deadline_ns;
    memcpy(k.w, sky_weights[0], sizeof k.w);

    uint64_t *best_off = hbmi_malloc((N + 1) * sizeof *best_off);
    hbm_status s = HBM_OK;
    if (!t || !k.s0 || !k.s1 || !k.size || !k.align || !k.H || !k.cnt || !k.pl || !k.st_beg || !k.st_it || !k.off || !k.rem || !k.szf || !best_off) {
        s = hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory for the skyline of %zu buffers", N);
        goto done;
    }
    for (size_t i = 0; i < N; i++) {
        t[2 * i] = tl->buffers[i].start;
        t[2 * i + 1] = tl->buffers[i].end;
    }
    hbmi_qsort(t, 2 * N, sizeof *t, i64c);
    uint32_t nt = 0;
    for (size_t i = 0; i < 2 * N; i++)
        if (!nt || t[nt - 1] != t[i]) t[nt++] = t[i];
    k.S = nt - 1;
    for (size_t i = 0; i < N; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        k.s0[i] = sec_of(t, nt, b->start);
        k.s1[i] = sec_of(t, nt, b->end);
        k.size[i] = b->size;
        k.align[i] = hbmi_pack_align(b, def_align);
        if (b->size > k.maxsize) k.maxsize = b->size;
        if (reverse) { /* run time backwards: a packing is one either way */
            uint32_t r0 = k.S - k.s1[i];
            k.s1[i] = k.S - k.s0[i];
            k.s0[i] = r0;
        }
    }
    for (size_t i = 0; i < N; i++) k.szf[i] = (double)k.size[i] / (double)k.maxsize;
    for (size_t i = 0; i < N; i++) k.st_beg[k.s0[i] + 1]++;
    for (uint32_t q = 0; q < nt; q++) k.st_beg[q + 1] += k.st_beg[q];
    memset(k.cnt, 0, (2 * N + 1) * sizeof *k.cnt);
    for (size_t i = 0; i < N; i++) k.st_it[k.st_beg[k.s0[i]] + k.cnt[k.s0[i]]++] = (uint32_t)i;
    uint64_t best = upper;
    /* a plain construction, then searches below the best at targets between the bound
     * and it, in thousandths of the gap (a failed target costs little: the section check
     * cuts it early; 1000 asks for any improvement) */
    static const uint32_t frac[8] = {1000, 0, 500, 900, 250, 1000, 750, 125};
    int got = attempt(&k, UINT64_MAX, 0, 1, UINT64_MAX);
    if (got == SKY_FOUND && extent_of(&k) < best) {
        best = extent_of(&k);
        memcpy(best_off, k.off, N * sizeof *best_off);
    }
    for (uint32_t r = 1; r < max_attempts && best > lower_bound && best != UINT64_MAX && got != SKY_NOMEM; r++) {
        if (deadline_ns && hbmi_pack_now() >= deadline_ns) break;
        uint64_t C = lower_bound + (best - lower_bound) / 1000 * frac[r % 8];
        if (C >= best) C = best - 1;
        /* a portfolio: the weights change from attempt to attempt */
        memcpy(k.w, sky_weights[(r / 8) % SKY_NW], sizeof k.w);
        if ((got = attempt(&k, C, 0.5 + 3 * urand(&k), 2, 4 * (uint64_t)N + 64)) == SKY_FOUND) {
            uint64_t e = extent_of(&k);
            if (e < best) {
                best = e;
                memcpy(best_off, k.off, N * sizeof *best_off);
            }
        }
    }
    if (got == SKY_NOMEM) {
        s = hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory in the skyline search");
        goto done;
    }
    if (best >= upper) goto done; /* nothing better than the caller's */
    for (size_t i = 0; i < N; i++) tl->buffers[i].offset = best_off[i];
    *extent = best;
done:
    hbmi_free(t);
    hbmi_free(k.s0);
    hbmi_free(k.s1);
    hbmi_free(k.size);
    hbmi_free(k.align);
    hbmi_free(k.H);
    hbmi_free(k.cnt);
    hbmi_free(k.pl);
    hbmi_free(k.st_beg);
    hbmi_free(k.st_it);
    hbmi_free(k.off);
    hbmi_free(k.rem);
    hbmi_free(k.szf);
    hbmi_free(k.tr);
    hbmi_free(k.cstk);
    hbmi_free(best_off);
    return s;
}
