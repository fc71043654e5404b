/* lns_pack.c - a prototype, not built by default and not part of hbm: large-neighbourhood
 * search (LNS) over a complete packing, tried on MiniMalloc's case J (issue 17, part 3;
 * docs/pack.md, "MiniMalloc's case J: not settled"). It did not help (the numbers are
 * in docs/pack.md); it is kept so that they can be reproduced.
 *
 * From a packing of height H (the file's offsets if every buffer has one, else hbm's
 * default `best`), repeatedly: take one buffer c whose top is at H, free c and a
 * neighbourhood of about K buffers (the others are pinned where they are), and ask the
 * exact search (hbmi_exact_*, pinned buffers as obstacles) for a packing of the free
 * ones below H - 1 under a node limit. Found: c is below H (when no buffer is left at H
 * the height drops). Neighbourhoods (mode, chosen at random): 0-2 the K highest buffers
 * in a time window around c's lifetime (by top; by top plus noise; at random); 3 every
 * buffer meeting a window grown from c's lifetime until K; 4 a band of heights (grown
 * until K) around the place in c's window with the least occupied room, 5 the same
 * around a random height; 6 and 7: 0 and 5 over the whole timeline. ADAPT=1 keeps one K
 * per mode that grows after a proof that the neighbourhood cannot do it and shrinks
 * after a search that ran out of nodes. SHAKE=P: P % of the tries re-pack a random
 * window within H (a sideways move).
 *
 * Build (from the repository root, after `make build`):
 *   gcc -std=c11 -O2 -Iinclude -Isrc bench/proto/lns_pack.c build/libhbm.a -lm -lpthread -ldl -o lns_pack
 * Usage: lns_pack FILE.csv SECONDS SEED [K_MIN K_MAX NODE_LIMIT START_MS MODES]
 *   e.g. ADAPT=1 ./lns_pack J.1048576.csv 600 2 30 300 20000 0 6
 * Wall-clock bound: the tries made are the same on every run, how many fit in the time
 * is not. */
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
static uint32_t rndn(uint32_t n) { return n ? (uint32_t)(rnd() % n) : 0; }

typedef struct cand {
    uint32_t i;
    uint64_t key;
} cand;
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    return x->key < y->key ? 1 : x->key > y->key ? -1 : (x->i > y->i) - (x->i < y->i);
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    hbm_timeline *tl;
    if (hbm_minimalloc_read(argv[1], &tl)) {
        fprintf(stderr, "%s\n", hbm_last_error());
        return 2;
    }
    double secs = atof(argv[2]);
    rs = strtoull(argv[3], NULL, 10);
    uint32_t kmin = argc > 4 ? (uint32_t)atoi(argv[4]) : 30, kmax = argc > 5 ? (uint32_t)atoi(argv[5]) : 80;
    uint64_t nlim = argc > 6 ? strtoull(argv[6], NULL, 10) : 5000;
    double start_ms = argc > 7 ? atof(argv[7]) : 0;
    uint32_t nmodes = argc > 8 ? (uint32_t)atoi(argv[8]) : 4;
    uint32_t wext = getenv("WEXT") ? (uint32_t)atoi(getenv("WEXT")) : 30;
    uint32_t noise = getenv("NOISE") ? (uint32_t)atoi(getenv("NOISE")) : 65536;
    int verbose = getenv("VERBOSE") != NULL;
    uint32_t shake = getenv("SHAKE") ? (uint32_t)atoi(getenv("SHAKE")) : 0;
    uint64_t shakes = 0;
    int adapt = getenv("ADAPT") != NULL;
    uint32_t kad[8];
    for (int m = 0; m < 8; m++) kad[m] = (kmin + kmax) / 2;
    size_t n = tl->count;
    uint64_t lb = 0;
    hbmi_pack_lower_bound(tl, &lb);
    hbm_pack_options o;
    hbm_pack_result r;
    hbm_pack_options_default(&o);
    if (start_ms > 0) o.timeout_s = start_ms / 1000;
    uint64_t t0 = hbmi_now_ns();
    int have = 1;
    for (size_t i = 0; i < n; i++) if (tl->buffers[i].offset == HBM_NO_OFFSET) have = 0;
    if (have) { if (hbm_timeline_verify(tl, 0)) return 5; r.extent = hbm_timeline_extent(tl); }
    else if (hbm_pack(tl, &o, &r)) {
        fprintf(stderr, "%s\n", hbm_last_error());
        return 2;
    }
    uint64_t cur = r.extent;
    fprintf(stderr, "start %" PRIu64 " (+%.2f%%) lb %" PRIu64 " in %.3f s\n", cur, 100.0 * (cur - lb) / lb, lb,
            (hbmi_now_ns() - t0) / 1e9);
    /* sections */
    int64_t *t = malloc(2 * n * sizeof *t);
    size_t nt = hbmi_time_points(tl, t);
    uint32_t *s0 = malloc(n * sizeof *s0), *s1 = malloc(n * sizeof *s1);
    for (size_t i = 0; i < n; i++) {
        s0[i] = (uint32_t)hbmi_time_index(t, nt, tl->buffers[i].start);
        s1[i] = (uint32_t)hbmi_time_index(t, nt, tl->buffers[i].end);
    }
    uint64_t *best = malloc(n * sizeof *best);
    for (size_t i = 0; i < n; i++) best[i] = tl->buffers[i].offset;
    cand *cd = malloc(n * sizeof *cd);
    uint8_t *fr = malloc(n);
    uint64_t deadline = t0 + (uint64_t)(secs * 1e9), tries = 0, nodes = 0, found = 0, none = 0;
    uint64_t lastprint = 0;
    uint64_t mstat[9][3] = {{0}};
    int gl = 0;
    while (hbmi_now_ns() < deadline && cur > lb) {
        tries++;
        uint64_t target = cur - 1;
        if (rndn(100) < shake) { /* a sideways move: a random slab re-packed within cur */
            uint32_t K = kmin + rndn(kmax - kmin + 1), a = rndn((uint32_t)nt), b = a + 1;
            for (;;) {
                uint32_t cnt = 0;
                for (size_t i = 0; i < n; i++) if (!(s1[i] <= a || s0[i] >= b)) cnt++;
                if (cnt >= K || (a == 0 && b >= nt)) break;
                if ((rndn(2) && a > 0) || b >= nt) a--;
                else b++;
            }
            for (size_t i = 0; i < n; i++) {
                hbm_tl_buffer *bb = &tl->buffers[i];
                bb->offset = best[i];
                if (!(s1[i] <= a || s0[i] >= b)) bb->flags &= ~HBM_TL_PINNED;
                else bb->flags |= HBM_TL_PINNED;
            }
            hbmi_exact *e = NULL;
            if (hbmi_exact_new(tl, 0, &e)) return 3;
            hbmi_exact_rc rc;
            uint64_t nb = 0;
            if (hbmi_exact_solve(e, tl, cur, 0, nlim, &rc, &nb)) return 3;
            nodes += hbmi_exact_nodes(e);
            hbmi_exact_free(e);
            if (rc == HBMI_EXACT_FOUND) {
                for (size_t i = 0; i < n; i++) tl->buffers[i].flags &= ~HBM_TL_PINNED;
                if (hbm_timeline_verify(tl, cur)) { fprintf(stderr, "BUG shake\n"); return 4; }
                for (size_t i = 0; i < n; i++) best[i] = tl->buffers[i].offset;
                cur = hbm_timeline_extent(tl);
                shakes++;
            }
            continue;
        }
        /* the buffers at the top; one of them (c) is to move below it */
        uint32_t nT = 0, c = UINT32_MAX;
        memset(fr, 0, n);
        for (size_t i = 0; i < n; i++)
            if (best[i] + tl->buffers[i].size > target && rndn(++nT) == 0) c = (uint32_t)i;
        fr[c] = 1;
        int mode = (int)rndn(nmodes);
        uint32_t K = adapt ? kad[mode] - kad[mode] / 8 + rndn(kad[mode] / 4 + 1) : kmin + rndn(kmax - kmin + 1);
        uint32_t a, b;
        uint32_t e1 = rndn(wext + 1), e2 = rndn(wext + 1);
        a = s0[c] > e1 ? s0[c] - e1 : 0;
        b = s1[c] + e2;
        uint32_t nc = 0;
        if (mode == 6) { a = 0; b = (uint32_t)nt; mode = 0; gl = 1; }
        else if (mode == 7) { a = 0; b = (uint32_t)nt; mode = 5; gl = 1; }
        else gl = 0;
        if (mode == 0 || mode == 1 || mode == 2) { /* band: the highest in a window; noisy; random */
            for (size_t i = 0; i < n; i++) {
                if (fr[i] || s1[i] <= a || s0[i] >= b) continue;
                uint64_t top = best[i] + tl->buffers[i].size;
                if (top > target) continue;
                uint64_t key = mode == 0 ? top : mode == 1 ? top + rndn(noise) : rnd();
                cd[nc++] = (cand){(uint32_t)i, key};
            }
            qsort(cd, nc, sizeof *cd, cand_cmp);
            for (uint32_t j = 0; j < K - 1 && j < nc; j++) fr[cd[j].i] = 1;
        } else if (mode >= 4) { /* rect: c's window x a band around a place for c, grown until K */
            uint64_t sz = tl->buffers[c].size, y = 0;
            if (mode == 4) { /* the place below target whose band c would need is least occupied */
                uint64_t bestv = UINT64_MAX;
                for (uint64_t yy = 0; yy + sz <= target; yy += 1024) {
                    uint64_t v = 0;
                    for (size_t i = 0; i < n; i++) {
                        if (i == c || s1[i] <= a || s0[i] >= b) continue;
                        uint64_t o0 = best[i], o1 = best[i] + tl->buffers[i].size;
                        if (o1 <= yy || o0 >= yy + sz) continue;
                        uint64_t lo = o0 > yy ? o0 : yy, hi = o1 < yy + sz ? o1 : yy + sz;
                        uint32_t x0 = s0[i] > a ? s0[i] : a, x1 = s1[i] < b ? s1[i] : b;
                        v += (hi - lo) / 1024 * (x1 - x0);
                    }
                    v = v * 64 + rndn(64);
                    if (v < bestv) { bestv = v; y = yy; }
                }
            } else {
                y = rndn((uint32_t)((target - sz) / 1024 + 1)) * (uint64_t)1024;
            }
            uint64_t D = 0;
            for (;;) {
                uint64_t y0 = y > D ? y - D : 0, y1 = y + sz + D;
                uint32_t cnt = 0;
                for (size_t i = 0; i < n; i++)
                    if (i != c && !(s1[i] <= a || s0[i] >= b) && best[i] + tl->buffers[i].size <= target &&
                        best[i] < y1 && best[i] + tl->buffers[i].size > y0) cnt++;
                if (cnt + 1 >= K || (y0 == 0 && y1 >= target)) {
                    for (size_t i = 0; i < n; i++)
                        if (i != c && !(s1[i] <= a || s0[i] >= b) && best[i] + tl->buffers[i].size <= target &&
                            best[i] < y1 && best[i] + tl->buffers[i].size > y0) fr[i] = 1;
                    break;
                }
                D += 1024;
            }
        } else { /* slab: everything meeting a window grown from c's lifetime until K */
            a = s0[c];
            b = s1[c];
            for (;;) {
                uint32_t cnt = 0;
                for (size_t i = 0; i < n; i++)
                    if (!(s1[i] <= a || s0[i] >= b) && best[i] + tl->buffers[i].size <= target) cnt++;
                if (cnt + 1 >= K || (a == 0 && b >= nt)) break;
                if ((rndn(2) && a > 0) || b >= nt) a--;
                else b++;
            }
            for (size_t i = 0; i < n; i++)
                if (!(s1[i] <= a || s0[i] >= b) && best[i] + tl->buffers[i].size <= target) fr[i] = 1;
        }
        uint32_t nfree = 0;
        for (size_t i = 0; i < n; i++) {
            hbm_tl_buffer *bb = &tl->buffers[i];
            bb->offset = best[i];
            if (fr[i]) {
                bb->flags &= ~HBM_TL_PINNED;
                nfree++;
            } else {
                bb->flags |= HBM_TL_PINNED;
            }
        }
        hbmi_exact *e = NULL;
        if (hbmi_exact_new(tl, 0, &e)) return 3;
        hbmi_exact_set_hint(e, tl);
        hbmi_exact_rc rc;
        uint64_t nb = 0;
        if (hbmi_exact_solve(e, tl, target, 0, nlim, &rc, &nb)) return 3;
        nodes += hbmi_exact_nodes(e);
        hbmi_exact_free(e);
        if (rc == HBMI_EXACT_FOUND) {
            for (size_t i = 0; i < n; i++) tl->buffers[i].flags &= ~HBM_TL_PINNED;
            uint64_t x = hbm_timeline_extent(tl);
            if (hbm_timeline_verify(tl, cur)) {
                fprintf(stderr, "BUG: invalid\n");
                return 4;
            }
            for (size_t i = 0; i < n; i++) best[i] = tl->buffers[i].offset;
            cur = x;
            found++;
            mstat[mode == 5 && gl ? 7 : mode + 6 * gl][0]++;
            if (verbose || cur < target) fprintf(stderr, "%8.3f s  %" PRIu64 " (+%.2f%%)  try %" PRIu64 " free %u (top %u) win %u-%u mode %d nodes %" PRIu64 "\n",
                    (hbmi_now_ns() - t0) / 1e9, cur, 100.0 * (cur - lb) / lb, tries, nfree, nT, a, b, mode, nodes);
        } else if (rc == HBMI_EXACT_NONE) {
            none++;
            mstat[mode == 5 && gl ? 7 : mode + 6 * gl][1]++;
            if (kad[mode == 5 && gl ? 7 : mode + 6 * gl] < kmax) kad[mode == 5 && gl ? 7 : mode + 6 * gl]++;
        } else {
            mstat[mode == 5 && gl ? 7 : mode + 6 * gl][2]++;
            if (kad[mode == 5 && gl ? 7 : mode + 6 * gl] > kmin) kad[mode == 5 && gl ? 7 : mode + 6 * gl]--;
        }
        uint64_t now = hbmi_now_ns();
        if (now - lastprint > 10000000000ULL) {
            lastprint = now;
            fprintf(stderr, "   [%.1f s: tries %" PRIu64 " found %" PRIu64 " none %" PRIu64 " nodes %" PRIu64 " shakes %" PRIu64 " cur %" PRIu64 "]\n", (now - t0) / 1e9,
                    tries, found, none, nodes, shakes, cur);
        }
    }
    for (int m = 0; m < 8; m++) fprintf(stderr, "mode %d: K %u found %" PRIu64 " none %" PRIu64 " aborted %" PRIu64 "\n", m, kad[m], mstat[m][0], mstat[m][1], mstat[m][2]);
    printf("%s final %" PRIu64 " (+%.2f%%) in %.3f s, tries %" PRIu64 " found %" PRIu64 " proven-none %" PRIu64 " nodes %" PRIu64 "\n",
           argv[1], cur, 100.0 * (cur - lb) / lb, (hbmi_now_ns() - t0) / 1e9, tries, found, none, nodes);
    return 0;
}
