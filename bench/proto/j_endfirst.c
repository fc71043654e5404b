/* j_endfirst.c - a prototype, not built by default and not part of hbm: two end-first
 * constructions tried on MiniMalloc's case J (issue 17, part 3; docs/pack.md, "MiniMalloc's
 * case J: not settled"), whose only zero-slack times are at the very end. The numbers are in
 * docs/pack.md; the program is kept so that they can be reproduced.
 *
 * Mode `dfs`: a backward time-sweep depth-first search. Buffers are taken in order of
 * decreasing end (ties: larger first, then random); every buffer already placed that
 * overlaps the next one in time is then alive in its last section, so the candidates are
 * the bottoms and tops of the free gaps of that one section. VAL: 0 best fit first, 1
 * lowest first, 2 (default) most contact with placed buffers or the edges over the
 * lifetime first, then best fit; ties at random; NOISE=P: P % of the candidates get a
 * random rank. BUCKET=Q: the ends taken in blocks of Q sections from the last one,
 * longest lifetime first within a block (the gaps are then those over the whole
 * lifetime). After each placement every section of the buffer's lifetime is checked: the
 * unplaced bytes alive there must fit in the section's gaps that are at least as large as
 * the smallest unplaced buffer alive there, the largest one in the largest gap, and the
 * BPK (default 12) largest must bin-pack into the gaps (exact, at most 2000 steps, else
 * taken as fitting). Chronological backtracking within a node limit per restart
 * (NODES0 = 20000 at first, growing by half each restart, new random ties each time). Not
 * complete (only gap ends are tried). With MIN=1 every packing found lowers the capacity
 * to its height minus 1 KiB.
 *
 * Mode `win`: end-first windows with the exact search (hbmi_exact_*). The committed part
 * is everything from section c on (c = the number of sections at first). A step packs
 * the buffers alive in [c - L, c) that are not committed, lifetimes cut at c - L, with the
 * committed ones as pinned obstacles, at the capacity, within NODES nodes; it then
 * commits the buffers that start at c - L + OV or later (OV = 0: all of them, those
 * crossing the window's start too; CUT=1: at the time in [c - L + OV, c) that the fewest
 * bytes cross) and moves c there. On failure it packs the same window again from its
 * buffers in another random order (the exact search breaks ties by index); after RETRY
 * failures it goes back one step and packs that window again (one of its tries), and so
 * on (the first window: until the time is up). FIRST=N: the exact search's first round of
 * restarts limited to N nodes. RAISE=B: after RETRY failures, B bytes more capacity for
 * that window and every earlier one (no going back); the packing's height is then above
 * CAPACITY.
 *
 * Build (from the repository root, after `make build`):
 *   gcc -std=c11 -O2 -Iinclude -Isrc bench/proto/j_endfirst.c build/libhbm.a -lm -lpthread -ldl -o j_endfirst
 * Usage:
 *   j_endfirst dfs FILE.csv CAPACITY SECONDS SEED [OUT.csv]      (env MIN=1, NODES0=N)
 *   j_endfirst win FILE.csv CAPACITY SECONDS SEED L OV NODES RETRY [OUT.csv]
 * The runs in docs/pack.md (J = /work/shared/data/minimalloc/J.1048576.csv):
 *   BUCKET=5 VAL=2 MIN=1 ./j_endfirst dfs $J 1200000 600 1 j.csv      (1124352)
 *   CUT=1 ./j_endfirst win $J 989184 600 1 40 10 100000 4             (stops at section 152)
 *   CUT=1 ./j_endfirst win $J 989184 600 1 40 10 2000000 2            (stops at section 147)
 *   RAISE=4096 CUT=1 ./j_endfirst win $J 989184 120 1 40 10 100000 4  (1107968)
 *   RAISE=2048 CUT=1 ./j_endfirst win $J 989184 200 3 40 10 100000 4  (1089536)
 *   VERBOSE=1 prints every search (win) or restart (dfs) on stderr.
 * Wall-clock bound: the searches made are the same on every run, how many fit in the time
 * is not. A packing found is verified (hbm_timeline_verify) and written with offsets. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/pack.h"
#include "pack/pack_internal.h"

static uint64_t rs;
static uint64_t rnd(void) {
    rs += 0x9e3779b97f4a7c15ULL;
    return hbmi_hash64(rs);
}

static size_t n;      /* buffers */
static uint32_t ns;   /* sections */
static uint32_t *s0, *s1;
static uint64_t unit; /* gcd of the sizes */
static uint32_t *sz;  /* size in units */
static uint64_t t0;

static double secs_since(void) { return (hbmi_now_ns() - t0) / 1e9; }

static uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

static int write_out(hbm_timeline *tl, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    hbm_status s = hbm_minimalloc_write(tl, f);
    fclose(f);
    return s != HBM_OK;
}

/* ---------------------------------------------------------------- dfs */

#define WW_MAX 32 /* words per section: capacities up to 2048 units */
static uint32_t W, WW;
static uint64_t (*occ)[WW_MAX];
static uint32_t *order, *offu;
static uint8_t *placed;
static int64_t *unpl;    /* unplaced units alive per section */
static uint32_t **live;  /* per section: the buffers alive, by size ascending */
static uint32_t *nlive;

static int size_asc(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return sz[x] != sz[y] ? (sz[x] > sz[y]) - (sz[x] < sz[y]) : (x > y) - (x < y);
}

static inline int bit(const uint64_t *w, uint32_t i) { return (int)(w[i >> 6] >> (i & 63)) & 1; }
static void set_range(uint64_t *w, uint32_t a, uint32_t b, int on) {
    for (uint32_t i = a; i < b;) {
        uint32_t k = i >> 6, lo = i & 63, hi = (b - (i & ~63u)) < 64 ? b - (i & ~63u) : 64;
        uint64_t m = (hi == 64 ? ~0ULL : ((1ULL << hi) - 1)) & ~((1ULL << lo) - 1);
        if (on) w[k] |= m;
        else w[k] &= ~m;
        i = (i & ~63u) + 64;
    }
}
/* The free runs of a section below W: calls back with [a, b). Returns the count. */
static uint32_t gaps(const uint64_t *w, uint32_t *ga, uint32_t *gb) {
    uint32_t c = 0, i = 0;
    while (i < W) {
        /* skip set bits */
        while (i < W) {
            uint64_t x = ~w[i >> 6] >> (i & 63);
            if (x) {
                i += (uint32_t)__builtin_ctzll(x);
                break;
            }
            i = (i & ~63u) + 64;
        }
        if (i >= W) break;
        uint32_t a = i;
        while (i < W) {
            uint64_t x = w[i >> 6] >> (i & 63);
            if (x) {
                i += (uint32_t)__builtin_ctzll(x);
                break;
            }
            i = (i & ~63u) + 64;
        }
        if (i > W) i = W;
        ga[c] = a;
        gb[c] = i;
        c++;
    }
    return c;
}

static uint32_t bpk = 12; /* BPK */
static uint64_t bp_steps, bp_limit = 2000;
/* Items it[i..ni) (sizes, descending) into bins room[0..nr): 1 fits (or out of steps), 0 not. */
static int bp_fit(const uint32_t *it, uint32_t ni, uint32_t i, uint32_t *room, uint32_t nr) {
    if (i == ni) return 1;
    if (++bp_steps > bp_limit) return 1;
    for (uint32_t k = 0; k < nr; k++) {
        if (room[k] < it[i]) continue;
        int seen = 0; /* bins with the same room left are the same */
        for (uint32_t q = 0; q < k && !seen; q++) seen = room[q] == room[k];
        if (seen) continue;
        room[k] -= it[i];
        int r = bp_fit(it, ni, i + 1, room, nr);
        room[k] += it[i];
        if (r) return 1;
    }
    return 0;
}

/* Can the unplaced buffers alive in section s still fit in its gaps? */
static int section_ok(uint32_t s) {
    if (unpl[s] <= 0) return 1;
    uint32_t mn = 0, mx = 0;
    for (uint32_t j = 0; j < nlive[s]; j++)
        if (!placed[live[s][j]]) {
            mn = sz[live[s][j]];
            break;
        }
    for (uint32_t j = nlive[s]; j-- > 0;)
        if (!placed[live[s][j]]) {
            mx = sz[live[s][j]];
            break;
        }
    uint32_t ga[WW_MAX * 64 / 2 + 2], gb[WW_MAX * 64 / 2 + 2];
    uint32_t c = gaps(occ[s], ga, gb);
    int64_t use = 0;
    uint32_t big = 0;
    for (uint32_t k = 0; k < c; k++) {
        uint32_t g = gb[k] - ga[k];
        if (g >= mn) use += g;
        if (g > big) big = g;
    }
    if (use < unpl[s] || big < mx) return 0;
    /* the BPK largest unplaced buffers alive here, as items, into the gaps as bins (exact,
     * within bp_limit steps; a subset of what must fit there, so a valid test) */
    uint32_t it[64], ni = 0;
    for (uint32_t j = nlive[s]; j-- > 0 && ni < bpk;)
        if (!placed[live[s][j]]) it[ni++] = sz[live[s][j]];
    if (ni < 2) return 1;
    uint32_t room[WW_MAX * 64 / 2 + 2], nr = 0;
    for (uint32_t k = 0; k < c; k++)
        if (gb[k] - ga[k] >= it[ni - 1]) room[nr++] = gb[k] - ga[k];
    bp_steps = 0;
    return bp_fit(it, ni, 0, room, nr) != 0;
}

typedef struct cand {
    uint32_t y;
    uint64_t key;
} cand;
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

static uint32_t bucket; /* BUCKET=Q: ends in blocks of Q sections from the last, longest first within one */
static int ord_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (bucket) {
        uint32_t bx = (ns - s1[x]) / bucket, by = (ns - s1[y]) / bucket;
        if (bx != by) return bx > by ? 1 : -1;
        if (s1[x] - s0[x] != s1[y] - s0[y]) return s1[x] - s0[x] < s1[y] - s0[y] ? 1 : -1;
    }
    if (s1[x] != s1[y]) return s1[x] < s1[y] ? 1 : -1;
    if (sz[x] != sz[y]) return sz[x] < sz[y] ? 1 : -1;
    if (s0[x] != s0[y]) return s0[x] > s0[y] ? 1 : -1; /* longer first */
    return 0;
}

/* One restart: DFS within node_limit. 1 found, 0 none (exhausted), -1 out of nodes/time. */
static int val, noisy; /* value order (VAL) and % of candidates given a random key (NOISE) */
static int dfs_run(uint64_t node_limit, uint64_t deadline, uint64_t *nodes, uint32_t *deepest,
                   cand **cands, uint32_t *ncand, uint32_t *pos) {
    for (uint32_t i = 0; i < ns; i++) memset(occ[i], 0, sizeof occ[i]);
    memset(placed, 0, n);
    for (uint32_t s = 0; s < ns; s++) unpl[s] = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t s = s0[i]; s < s1[i]; s++) unpl[s] += sz[i];
    for (uint32_t s = 0; s < ns; s++)
        if (unpl[s] > W) return 0;
    /* random ties in the order: shuffle then stable-ish sort by key with random last key */
    uint64_t *rk = malloc(n * sizeof *rk);
    for (size_t i = 0; i < n; i++) rk[i] = rnd();
    for (size_t i = 1; i < n; i++) { /* insertion sort: order by ord_cmp then random */
        uint32_t x = order[i];
        size_t j = i;
        while (j > 0) {
            int c = ord_cmp(&order[j - 1], &x);
            if (c < 0 || (c == 0 && rk[order[j - 1]] <= rk[x])) break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
    free(rk);
    uint64_t nd = 0;
    size_t d = 0;
    int entering = 1;
    for (;;) {
        if (d == n) {
            *nodes += nd;
            return 1;
        }
        uint32_t b = order[d];
        if (entering) {
            entering = 0;
            if (d > *deepest) *deepest = (uint32_t)d;
            uint32_t ga[WW_MAX * 64 / 2 + 2], gb[WW_MAX * 64 / 2 + 2];
            uint64_t all[WW_MAX] = {0}; /* what is taken anywhere in b's lifetime */
            if (bucket == 0) {
                memcpy(all, occ[s1[b] - 1], sizeof all);
            } else {
                for (uint32_t s = s0[b]; s < s1[b]; s++)
                    for (uint32_t k = 0; k < WW; k++) all[k] |= occ[s][k];
            }
            uint32_t c = gaps(all, ga, gb), m = 0;
            uint32_t lo = 0; /* identical buffer before: offsets increase */
            if (d > 0) {
                uint32_t p = order[d - 1];
                if (s0[p] == s0[b] && s1[p] == s1[b] && sz[p] == sz[b]) lo = offu[p] + 1;
            }
            for (uint32_t k = 0; k < c; k++) {
                uint32_t g = gb[k] - ga[k];
                if (g < sz[b]) continue;
                for (int side = 0; side < 2; side++) {
                    uint32_t y = side ? gb[k] - sz[b] : ga[k];
                    if (y < lo || (side && g == sz[b])) continue;
                    uint64_t key = (uint64_t)(g - sz[b]) << 24; /* VAL=0: best fit */
                    if (val == 1) key = (uint64_t)y << 24;    /* lowest first */
                    if (val == 2) {                            /* most contact over the lifetime, then best fit */
                        uint32_t ct = 0;
                        for (uint32_t s = s0[b]; s < s1[b]; s++)
                            ct += (y == 0 || bit(occ[s], y - 1)) + (y + sz[b] == W || bit(occ[s], y + sz[b]));
                        key = ((uint64_t)(2 * (s1[b] - s0[b]) - ct) << 36) | ((uint64_t)(g - sz[b]) << 24);
                    }
                    if (noisy && (int)(rnd() % 100) < noisy) key = rnd() & ~0xffffffULL;
                    cands[d][m++] = (cand){y, key | (rnd() & 0x7fffff)};
                }
            }
            qsort(cands[d], m, sizeof(cand), cand_cmp);
            ncand[d] = m;
            pos[d] = 0;
        } else { /* undo the last placement of b */
            uint32_t y = offu[b];
            for (uint32_t s = s0[b]; s < s1[b]; s++) {
                set_range(occ[s], y, y + sz[b], 0);
                unpl[s] += sz[b];
            }
            placed[b] = 0;
        }
        int ok = 0;
        while (pos[d] < ncand[d]) {
            uint32_t y = cands[d][pos[d]++].y;
            if (++nd >= node_limit || ((nd & 1023) == 0 && hbmi_now_ns() > deadline)) {
                *nodes += nd;
                return -1;
            }
            offu[b] = y;
            placed[b] = 1;
            for (uint32_t s = s0[b]; s < s1[b]; s++) {
                set_range(occ[s], y, y + sz[b], 1);
                unpl[s] -= sz[b];
            }
            ok = 1;
            uint32_t fs = 0;
            for (uint32_t s = s0[b]; s < s1[b] && ok; s++) {
                ok = section_ok(s);
                fs = s;
            }
            if (getenv("DEBUG") && d + 1 >= *deepest)
                fprintf(stderr, "d %zu b %u [%u,%u) sz %u y %u: %s at %u\n", d, b, s0[b], s1[b], sz[b], y,
                        ok ? "ok" : "fails", fs);
            if (ok) break;
            for (uint32_t s = s0[b]; s < s1[b]; s++) {
                set_range(occ[s], y, y + sz[b], 0);
                unpl[s] += sz[b];
            }
            placed[b] = 0;
        }
        if (ok) {
            d++;
            entering = 1;
        } else {
            if (d == 0) {
                *nodes += nd;
                return 0;
            }
            d--;
        }
    }
}

static int run_dfs(hbm_timeline *tl, uint64_t cap, double secs, const char *out) {
    int minimize = getenv("MIN") && atoi(getenv("MIN"));
    uint64_t lim0 = getenv("NODES0") ? strtoull(getenv("NODES0"), NULL, 10) : 20000;
    val = getenv("VAL") ? atoi(getenv("VAL")) : 2;
    noisy = getenv("NOISE") ? atoi(getenv("NOISE")) : 0;
    bucket = getenv("BUCKET") ? (uint32_t)atoi(getenv("BUCKET")) : 0;
    if (getenv("BPK")) bpk = (uint32_t)atoi(getenv("BPK"));
    if (bpk > 64) bpk = 64;
    occ = calloc(ns, sizeof *occ);
    order = malloc(n * sizeof *order);
    offu = malloc(n * sizeof *offu);
    placed = malloc(n);
    unpl = malloc(ns * sizeof *unpl);
    live = malloc(ns * sizeof *live);
    nlive = calloc(ns, sizeof *nlive);
    for (uint32_t s = 0; s < ns; s++) live[s] = malloc(n * sizeof **live);
    for (size_t i = 0; i < n; i++)
        for (uint32_t s = s0[i]; s < s1[i]; s++) live[s][nlive[s]++] = (uint32_t)i;
    for (uint32_t s = 0; s < ns; s++) qsort(live[s], nlive[s], sizeof **live, size_asc);
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
    cand **cands = malloc(n * sizeof *cands);
    for (size_t i = 0; i < n; i++) cands[i] = malloc((WW_MAX * 64 + 4) * sizeof **cands);
    uint32_t *ncand = malloc(n * sizeof *ncand), *pos = malloc(n * sizeof *pos);
    uint64_t deadline = t0 + (uint64_t)(secs * 1e9), nodes = 0, restarts = 0, best = UINT64_MAX;
    double lim = (double)lim0;
    W = (uint32_t)(cap / unit);
    int rc = 1;
    while (hbmi_now_ns() < deadline) {
        if ((W + 63) / 64 > WW_MAX) {
            fprintf(stderr, "capacity too large\n");
            return 2;
        }
        WW = (W + 63) / 64;
        uint32_t deepest = 0;
        int r = dfs_run((uint64_t)lim, deadline, &nodes, &deepest, cands, ncand, pos);
        restarts++;
        if (r == 1) {
            uint32_t h = 0;
            for (size_t i = 0; i < n; i++) {
                tl->buffers[i].offset = (uint64_t)offu[i] * unit;
                if (offu[i] + sz[i] > h) h = offu[i] + sz[i];
            }
            if (hbm_timeline_verify(tl, (uint64_t)W * unit)) {
                fprintf(stderr, "BUG: invalid packing: %s\n", hbm_last_error());
                return 4;
            }
            best = (uint64_t)h * unit;
            printf("found %" PRIu64 " at %.3f s (capacity %" PRIu64 ", restart %" PRIu64 ", nodes %" PRIu64 ")\n", best,
                   secs_since(), (uint64_t)W * unit, restarts, nodes);
            fflush(stdout);
            if (out && write_out(tl, out)) return 2;
            rc = 0;
            if (!minimize) break;
            W = h - 1;
            lim = (double)lim0;
        } else if (r == 0) {
            printf("capacity %" PRIu64 ": no packing of this search's form (exhausted) at %.3f s, nodes %" PRIu64 "\n",
                   (uint64_t)W * unit, secs_since(), nodes);
            break;
        } else {
            if (getenv("VERBOSE"))
                fprintf(stderr, "  restart %" PRIu64 " limit %.0f deepest %u at %.1f s\n", restarts, lim, deepest,
                        secs_since());
            lim *= 1.5;
            if (lim > 5e7) lim = (double)lim0;
        }
    }
    printf("dfs end: best %" PRIu64 " in %.3f s, restarts %" PRIu64 ", nodes %" PRIu64 "\n", best, secs_since(),
           restarts, nodes);
    return rc;
}

/* ---------------------------------------------------------------- win */

static int run_win(hbm_timeline *tl, uint64_t cap, double secs, uint32_t L, uint32_t ov, uint64_t nlim, uint32_t retry,
                   const char *out) {
    uint64_t deadline = t0 + (uint64_t)(secs * 1e9), nodes = 0, searches = 0, found = 0, none = 0, aborted = 0;
    int cut = getenv("CUT") && atoi(getenv("CUT"));
    uint64_t raise = getenv("RAISE") ? strtoull(getenv("RAISE"), NULL, 10) : 0;
    uint64_t first = getenv("FIRST") ? strtoull(getenv("FIRST"), NULL, 10) : 0;
    /* step k: commit point before it cpt[k]; commit[i] = step that committed buffer i (or -1) */
    uint32_t *cpt = malloc((ns + 2) * sizeof *cpt), *tries = calloc(ns + 2, sizeof *tries);
    int32_t *commit = malloc(n * sizeof *commit);
    uint64_t *off = malloc(n * sizeof *off);
    uint32_t *idx = malloc(n * sizeof *idx);
    for (size_t i = 0; i < n; i++) commit[i] = -1;
    int k = 0;
    cpt[0] = ns;
    uint32_t lowest = ns;
    while (hbmi_now_ns() < deadline) {
        uint32_t c = cpt[k], a = c > L ? c - L : 0;
        /* the window's timeline: committed buffers alive in [a, ...) meeting a free one as pinned */
        hbm_timeline *w = NULL;
        if (hbm_timeline_new(&w)) return 3;
        uint32_t m = 0, nfree = 0;
        for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
        for (size_t i = n; i > 1; i--) { /* a random order per try */
            size_t j = rnd() % i;
            uint32_t x = idx[i - 1];
            idx[i - 1] = idx[j];
            idx[j] = x;
        }
        uint32_t maxend = a;
        for (size_t q = 0; q < n; q++) {
            uint32_t i = idx[q];
            if (commit[i] < 0 && s1[i] > a && s0[i] < c && s1[i] > maxend) maxend = s1[i];
        }
        uint32_t *map = malloc(n * sizeof *map);
        for (size_t q = 0; q < n; q++) {
            uint32_t i = idx[q];
            int fr = commit[i] < 0 && s1[i] > a && s0[i] < c;
            int pin = commit[i] >= 0 && s1[i] > a && s0[i] < maxend;
            if (!fr && !pin) continue;
            uint32_t x0 = s0[i] > a ? s0[i] : a;
            size_t at;
            if (hbm_timeline_add(w, tl->buffers[i].size, x0, s1[i], NULL, &at)) return 3;
            if (pin) {
                w->buffers[at].offset = off[i];
                w->buffers[at].flags |= HBM_TL_PINNED;
            } else {
                nfree++;
            }
            map[m++] = i;
        }
        hbmi_exact *e = NULL;
        if (hbmi_exact_new(w, 0, &e)) return 3;
        if (first) hbmi_exact_set_first_limit(e, first);
        hbmi_exact_rc rc;
        uint64_t nb = 0;
        if (hbmi_exact_solve(e, w, cap, deadline, nlim, &rc, &nb)) return 3;
        uint64_t nd = hbmi_exact_nodes(e);
        nodes += nd;
        searches++;
        hbmi_exact_free(e);
        if (getenv("VERBOSE")) {
            uint64_t h = 0; /* which packing (a hash of the free buffers' offsets) */
            for (uint32_t q = 0; q < m && rc == HBMI_EXACT_FOUND; q++)
                h += hbmi_hash64((map[q] * 0x100000001ULL) ^ w->buffers[q].offset);
            fprintf(stderr, "  %.2f s step %d window %u-%u free %u pinned %u: %s (%" PRIu64 " nodes) %04x\n",
                    secs_since(), k, a, c, nfree, m - nfree,
                    rc == HBMI_EXACT_FOUND ? "found" : rc == HBMI_EXACT_NONE ? "none" : "aborted", nd,
                    (unsigned)(h & 0xffff));
        }
        if (rc == HBMI_EXACT_FOUND) {
            found++;
            uint32_t nc = a == 0 ? 0 : a + ov < c ? a + ov : c - 1;
            if (ov == 0) nc = a;
            if (cut && a > 0) { /* CUT=1: the least crossed time in [a + OV, c - 1] */
                uint64_t bestx = UINT64_MAX;
                for (uint32_t x = a + ov; x < c && x + 1 <= c; x++) {
                    if (x == 0 || x + 1 > c - 1 + 1) continue;
                    uint64_t cx = 0;
                    for (size_t i = 0; i < n; i++)
                        if (s0[i] < x && s1[i] > x) cx += sz[i];
                    if (cx <= bestx && x < c) {
                        bestx = cx;
                        nc = x;
                    }
                }
            }
            for (uint32_t q = 0; q < m; q++) {
                uint32_t i = map[q];
                if (commit[i] >= 0) continue;
                if (a == 0 || s0[i] >= nc || ov == 0) {
                    commit[i] = k;
                    off[i] = w->buffers[q].offset;
                }
            }
            free(map);
            hbm_timeline_free(w);
            k++;
            cpt[k] = nc;
            tries[k] = 0;
            if (nc < lowest) {
                lowest = nc;
                printf("  reached section %u at %.2f s (step %d, %" PRIu64 " searches)\n", nc, secs_since(), k, searches);
                fflush(stdout);
            }
            if (a == 0) {
                for (size_t i = 0; i < n; i++) tl->buffers[i].offset = off[i];
                if (hbm_timeline_verify(tl, cap) || hbm_timeline_extent(tl) > cap) {
                    fprintf(stderr, "BUG: invalid packing: %s\n", hbm_last_error());
                    return 4;
                }
                printf("found %" PRIu64 " at %.3f s: %" PRIu64 " searches (%" PRIu64 " found, %" PRIu64
                       " proven none, %" PRIu64 " out of nodes), %" PRIu64 " nodes\n",
                       hbm_timeline_extent(tl), secs_since(), searches, found, none, aborted, nodes);
                if (out && write_out(tl, out)) return 2;
                return 0;
            }
            continue;
        }
        free(map);
        hbm_timeline_free(w);
        if (rc == HBMI_EXACT_NONE) none++;
        else aborted++;
        /* the same window again in another order, RETRY times; then go back one step (undo
         * its commits: another packing of it, which counts as one of its tries), and so on.
         * The first window is tried until the time is up. */
        tries[k]++;
        if (raise && tries[k] >= retry) { /* RAISE=B: more room from this window on instead */
            tries[k] = 0;
            cap += raise;
            printf("  capacity raised to %" PRIu64 " at step %d (section %u) at %.2f s\n", cap, k, c, secs_since());
            continue;
        }
        while (k > 0 && tries[k] >= retry) {
            tries[k] = 0;
            k--;
            for (size_t i = 0; i < n; i++)
                if (commit[i] >= k) commit[i] = -1;
            tries[k]++;
        }
    }
    printf("win end: no packing at %" PRIu64 " in %.3f s; lowest section reached %u; %" PRIu64 " searches (%" PRIu64
           " found, %" PRIu64 " proven none, %" PRIu64 " out of nodes), %" PRIu64 " nodes\n",
           cap, secs_since(), lowest, searches, found, none, aborted, nodes);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: see the header of j_endfirst.c\n");
        return 2;
    }
    hbm_timeline *tl;
    if (hbm_minimalloc_read(argv[2], &tl)) {
        fprintf(stderr, "%s\n", hbm_last_error());
        return 2;
    }
    uint64_t cap = strtoull(argv[3], NULL, 10);
    double secs = atof(argv[4]);
    rs = strtoull(argv[5], NULL, 10);
    n = tl->count;
    int64_t *t = malloc(2 * n * sizeof *t);
    size_t nt = hbmi_time_points(tl, t);
    ns = (uint32_t)nt - 1;
    s0 = malloc(n * sizeof *s0);
    s1 = malloc(n * sizeof *s1);
    sz = malloc(n * sizeof *sz);
    unit = 0;
    for (size_t i = 0; i < n; i++) {
        s0[i] = (uint32_t)hbmi_time_index(t, nt, tl->buffers[i].start);
        s1[i] = (uint32_t)hbmi_time_index(t, nt, tl->buffers[i].end);
        unit = gcd(unit, tl->buffers[i].size);
        tl->buffers[i].offset = HBM_NO_OFFSET;
        tl->buffers[i].flags = 0;
    }
    for (size_t i = 0; i < n; i++) sz[i] = (uint32_t)(tl->buffers[i].size / unit);
    uint64_t lb = 0;
    hbmi_pack_lower_bound(tl, &lb);
    printf("%s: %zu buffers, %u sections, unit %" PRIu64 ", bound %" PRIu64 ", capacity %" PRIu64 ", seed %s\n", argv[2],
           n, ns, unit, lb, cap, argv[5]);
    t0 = hbmi_now_ns();
    if (!strcmp(argv[1], "dfs")) return run_dfs(tl, cap, secs, argc > 6 ? argv[6] : NULL);
    if (!strcmp(argv[1], "win") && argc >= 10)
        return run_win(tl, cap, secs, (uint32_t)atoi(argv[6]), (uint32_t)atoi(argv[7]), strtoull(argv[8], NULL, 10),
                       (uint32_t)atoi(argv[9]), argc > 10 ? argv[10] : NULL);
    fprintf(stderr, "usage: see the header of j_endfirst.c\n");
    return 2;
}
