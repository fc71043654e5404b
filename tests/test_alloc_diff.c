/* test_alloc_diff.c - randomized differential test of the allocators against a reference
 * model: the set of live blocks and a bitmap of occupied 256-byte units of the device's
 * address space. Every allocation must land on units no live block holds, every free must
 * release exactly what was handed out, the stats must equal the model's sums, an OOM must
 * be justified (no free block that fits, no room under the limit), bad frees must change
 * nothing, and every few thousand operations hbm_check must pass and the allocator's walk
 * must list exactly the model's live blocks. On host: devices every byte of every block
 * holds a pattern written at allocation and verified at free, so overlaps are caught.
 * Seeds are fixed: a failure reproduces. HBM_DIFF_OPS overrides the operation count. */
#include "test.h"

#define UNIT 256u

typedef struct mblock {
    uint64_t addr, size, requested, seq;
} mblock;

typedef struct model {
    mblock *live;
    size_t n, cap;
    uint64_t base;   /* bitmap origin (sim: the first address seen, rounded down) */
    uint64_t *bits;  /* occupied 256-byte units */
    size_t nwords;
    uint64_t in_use, allocs, frees, ooms;
    uint64_t recent_freed[16]; /* addresses freed lately, for double frees */
} model;

typedef struct run_cfg {
    const char *name;
    const char *device;
    const char *config;
    int host;          /* write and verify patterns */
    int growing;       /* bfc without preallocation */
    uint64_t round;    /* size rounding of the allocator */
    uint64_t quantum;  /* region rounding (bfc growth) */
    size_t ops;
    uint64_t max_small, max_large;
    size_t max_live;
    uint64_t seed;
} run_cfg;

static test_rng rng;

static uint64_t log_uniform(uint64_t lo, uint64_t hi) {
    /* integer log-uniform: pick an octave, then a value inside it */
    unsigned l0 = 63u - (unsigned)__builtin_clzll(lo), l1 = 63u - (unsigned)__builtin_clzll(hi);
    unsigned l = l0 + (unsigned)test_below(&rng, l1 - l0 + 1);
    uint64_t v = (1ull << l) + test_below(&rng, 1ull << l);
    return v < lo ? lo : v > hi ? hi : v;
}

static int bits_span(model *m, uint64_t addr, uint64_t size, size_t *u0, size_t *u1) {
    if (addr < m->base) return 0;
    uint64_t a = (addr - m->base) / UNIT, e = (addr - m->base + size + UNIT - 1) / UNIT;
    size_t need = (size_t)(e / 64 + 1);
    if (need > ((size_t)1 << 26)) return 0; /* 4 GiB of bitmap: the test is broken */
    if (need > m->nwords) {
        size_t nw = m->nwords ? m->nwords : 1024;
        while (nw < need) nw *= 2;
        uint64_t *nb = realloc(m->bits, nw * sizeof *nb);
        if (!nb) return 0;
        memset(nb + m->nwords, 0, (nw - m->nwords) * sizeof *nb);
        m->bits = nb;
        m->nwords = nw;
    }
    *u0 = (size_t)a;
    *u1 = (size_t)e;
    return 1;
}

/* Set (on=1) units that must all be clear, or clear units that must all be set. */
static int bits_flip(model *m, uint64_t addr, uint64_t size, int on) {
    size_t u0, u1;
    if (!bits_span(m, addr, size, &u0, &u1)) return 0;
    for (size_t u = u0; u < u1; u++) {
        uint64_t bit = 1ull << (u % 64);
        if (!!(m->bits[u / 64] & bit) == on) return 0;
        m->bits[u / 64] ^= bit;
    }
    return 1;
}

static uint8_t pattern(uint64_t seq) { return (uint8_t)(seq * 131 + 7); }

static int verify_pattern(const mblock *b) {
    const uint8_t *p = (const uint8_t *)(uintptr_t)b->addr;
    uint8_t want = pattern(b->seq);
    for (uint64_t i = 0; i < b->requested; i++)
        if (p[i] != want) return 0;
    return 1;
}

static int cmp_block(const void *x, const void *y) {
    const mblock *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

typedef struct walk_acc {
    mblock *v;
    size_t n, cap;
    int bad;
} walk_acc;

static int walk_live(void *user, const hbm_block *b) {
    walk_acc *w = user;
    if (b->kind != HBM_BLOCK_LIVE) return 0;
    if (w->n == w->cap || (w->n && w->v[w->n - 1].addr >= b->addr)) { /* too many, or not in address order */
        w->bad = 1;
        return 1;
    }
    w->v[w->n++] = (mblock){b->addr, b->size, b->requested, b->seq};
    return 0;
}

/* The walk lists exactly the model's live blocks. */
static void check_walk(hbm_allocator *a, model *m) {
    walk_acc w = {calloc(m->n + 1, sizeof(mblock)), 0, m->n + 1, 0};
    CHECK(w.v);
    CHECK_OK(hbm_allocator_walk(a, walk_live, &w));
    int ok = !w.bad && w.n == m->n;
    if (!ok) fprintf(stderr, "walk lists %zu live blocks (%s), the model %zu\n", w.n, w.bad ? "out of order" : "in order", m->n);
    if (ok) {
        qsort(m->live, m->n, sizeof *m->live, cmp_block); /* order does not matter to the model */
        for (size_t i = 0; i < m->n && ok; i++) {
            const mblock *x = &w.v[i], *y = &m->live[i];
            ok = x->addr == y->addr && x->size == y->size && x->requested == y->requested && x->seq == y->seq;
            if (!ok)
                fprintf(stderr, "walk: 0x%" PRIx64 " size %" PRIu64 " asked %" PRIu64 " seq %" PRIu64
                                "; model: 0x%" PRIx64 " size %" PRIu64 " asked %" PRIu64 " seq %" PRIu64 "\n",
                        x->addr, x->size, x->requested, x->seq, y->addr, y->size, y->requested, y->seq);
        }
    }
    free(w.v);
    CHECK(ok);
}

static void check_stats(hbm_allocator *a, const model *m, const hbm_stats *s) {
    CHECK_EQ_U64(s->bytes_in_use, m->in_use);
    CHECK_EQ_U64(s->num_allocs, m->allocs);
    CHECK_EQ_U64(s->num_frees, m->frees);
    CHECK_EQ_U64(s->num_ooms, m->ooms);
    CHECK(s->peak_bytes_in_use >= s->bytes_in_use);
    CHECK(s->bytes_reserved >= s->bytes_in_use);
    CHECK(s->bytes_reserved <= s->bytes_limit);
}

static void run(const run_cfg *rc) {
    hbm_device *d;
    hbm_allocator *a;
    model m;
    memset(&m, 0, sizeof m);
    rng.s = rc->seed;
    CHECK_OK(hbm_device_open(rc->device, &d));
    CHECK_OK(hbm_allocator_open(d, rc->config, &a));
    const char *env = getenv("HBM_DIFF_OPS");
    size_t ops = env ? (size_t)strtoull(env, NULL, 10) : rc->ops;
    m.cap = rc->max_live;
    m.live = malloc(m.cap * sizeof *m.live);
    CHECK(m.live);
    hbm_stats s;
    uint64_t seq = 0, nbad = 0;
    for (size_t op = 0; op < ops; op++) {
        /* phases of 5000 operations leaning to allocation, then to freeing */
        int grow_phase = (op / 5000) % 2 == 0;
        uint64_t r = test_below(&rng, 1000);
        if (r < 4) { /* a bad free: inside a live block, or an address freed lately */
            uint64_t addr;
            if (m.n && r < 2) {
                const mblock *b = &m.live[test_below(&rng, m.n)];
                addr = b->addr + 1 + test_below(&rng, b->size - 1);
            } else {
                addr = m.recent_freed[test_below(&rng, 16)];
                int live = 0;
                for (size_t i = 0; i < m.n && !live; i++) live = m.live[i].addr == addr;
                if (live || !addr) continue;
            }
            CHECK_STATUS(hbm_free(a, addr), HBM_ERR_BAD_FREE);
            nbad++;
        } else if (r < 6 && rc->growing) {
            CHECK_OK(hbm_allocator_trim(a));
        } else if (r < 7) {
            CHECK_OK(hbm_stats_reset_peaks(a));
        } else if (m.n && (m.n == m.cap || r < (grow_phase ? 400u : 600u))) { /* free */
            size_t i = test_below(&rng, m.n);
            mblock b = m.live[i];
            if (rc->host) CHECK(verify_pattern(&b));
            CHECK_OK(hbm_free(a, b.addr));
            if (!rc->host) CHECK(bits_flip(&m, b.addr, b.size, 0));
            m.live[i] = m.live[--m.n];
            m.in_use -= b.size;
            m.frees++;
            m.recent_freed[test_below(&rng, 16)] = b.addr;
        } else { /* allocate */
            uint64_t size = test_below(&rng, 20) ? log_uniform(1, rc->max_small) : log_uniform(rc->max_small, rc->max_large);
            uint64_t held = (size + rc->round - 1) / rc->round * rc->round;
            uint64_t addr;
            hbm_status st = hbm_alloc(a, size, NULL, &addr);
            if (st == HBM_ERR_OOM) {
                m.ooms++;
                CHECK_OK(hbm_stats_get(a, &s));
                if (rc->growing) { /* no free block fits and the limit leaves no region for it */
                    uint64_t need = (held + rc->quantum - 1) / rc->quantum * rc->quantum;
                    uint64_t avail = (s.bytes_limit - s.pool_bytes) / rc->quantum * rc->quantum;
                    CHECK(s.largest_free_block_bytes < held && avail < need);
                } else if (!strstr(rc->config, "platform")) {
                    CHECK(s.largest_free_block_bytes < held);
                } else {
                    CHECK(s.bytes_in_use + held > s.bytes_limit);
                }
                continue;
            }
            CHECK_OK(st);
            seq++;
            if (!m.base) m.base = addr & ~(uint64_t)0xfffff;
            if (!rc->host) CHECK(bits_flip(&m, addr, held, 1)); /* overlaps nothing live */
            mblock b = {addr, held, size, seq};
            if (rc->host) memset((void *)(uintptr_t)addr, pattern(seq), size);
            m.live[m.n++] = b;
            m.in_use += held;
            m.allocs++;
        }
        if (op % 64 == 0) {
            CHECK_OK(hbm_stats_get(a, &s));
            check_stats(a, &m, &s);
        }
        if (op % 4096 == 4095) {
            CHECK_OK(hbm_check(a));
            check_walk(a, &m);
        }
    }
    CHECK_OK(hbm_check(a));
    check_walk(a, &m);
    CHECK_OK(hbm_stats_get(a, &s));
    check_stats(a, &m, &s);
    CHECK(m.ooms > 0 || rc->host); /* the workload reaches the limit */
    fprintf(stderr, "     %-22s %zu ops, %" PRIu64 " allocs, %" PRIu64 " OOMs, %" PRIu64 " bad frees, peak %" PRIu64
                    " MiB in use, %" PRIu64 " regions\n",
            rc->name, ops, m.allocs, m.ooms, nbad, s.peak_bytes_in_use >> 20, s.num_regions);
    for (size_t i = 0; i < m.n; i++) {
        if (rc->host) CHECK(verify_pattern(&m.live[i]));
        CHECK_OK(hbm_free(a, m.live[i].addr));
    }
    CHECK_OK(hbm_stats_get(a, &s));
    CHECK_EQ_U64(s.bytes_in_use, 0);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_counters c;
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 0);
    hbm_device_close(d);
    free(m.live);
    free(m.bits);
}

static void test_bfc_preallocated_sim(void) {
    run_cfg rc = {"bfc prealloc sim", "sim:64GiB", "allocator=bfc,limit=512MiB", 0, 0, 256, 512,
                  1000000, 64 << 10, 32 << 20, 3000, 0x1234567};
    run(&rc);
}

static void test_bfc_growing_sim(void) {
    run_cfg rc = {"bfc growing sim", "sim:64GiB", "allocator=bfc,preallocate=false,limit=512MiB,release_on_oom=true",
                  0, 1, 256, 512, 1000000, 64 << 10, 32 << 20, 3000, 0xabcdef1};
    run(&rc);
}

static void test_bfc_growing_no_release_sim(void) {
    run_cfg rc = {"bfc growing, no release", "sim:64GiB",
                  "allocator=bfc,preallocate=false,limit=300MiB,release_on_oom=false,initial_region=1MiB", 0, 1, 256,
                  512, 300000, 64 << 10, 8 << 20, 2000, 0x5eed};
    run(&rc);
}

static void test_platform_sim(void) {
    run_cfg rc = {"platform sim", "sim:1GiB", "allocator=platform,limit=512MiB", 0, 0, 512, 512, 1000000,
                  64 << 10, 32 << 20, 3000, 0x77777};
    /* sim addresses are never reused: keep the address span (and the bitmap) bounded */
    rc.max_large = 16 << 20;
    rc.max_small = 16 << 10;
    rc.ops = 300000;
    rc.config = "allocator=platform,limit=128MiB";
    run(&rc);
}

static void test_bfc_host(void) {
    run_cfg rc = {"bfc prealloc host", "host:1GiB", "allocator=bfc,limit=128MiB", 1, 0, 256, 4096, 30000,
                  16 << 10, 2 << 20, 1500, 0x4242};
    run(&rc);
    run_cfg rg = {"bfc growing host", "host:1GiB", "allocator=bfc,preallocate=false,limit=128MiB", 1, 1, 256, 4096,
                  30000, 16 << 10, 2 << 20, 1500, 0x4343};
    run(&rg);
}

static void test_platform_host(void) {
    run_cfg rc = {"platform host", "host:1GiB", "allocator=platform,limit=128MiB", 1, 0, 4096, 4096, 20000,
                  16 << 10, 1 << 20, 1000, 0x4444};
    run(&rc);
}

int main(void) {
    RUN(test_bfc_preallocated_sim);
    RUN(test_bfc_growing_sim);
    RUN(test_bfc_growing_no_release_sim);
    RUN(test_platform_sim);
    RUN(test_bfc_host);
    RUN(test_platform_host);
    return test_done();
}
