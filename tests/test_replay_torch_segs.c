/* test_replay_torch_segs.c - the twin's recorded segments (twin_internal.h) against a
 * reference model: the plain list with swap-removal and the walk over all of it that the
 * twin used before. Random adds and removes at few bases (so that two or more segments
 * share one, as in a repeated history), at many (so that chunks split and merge), ends
 * that pass 2^64, lookups at every held base and end and at random addresses; the
 * invariant walker after every step; host allocation failures during adds. Needs no
 * shared data. */
#include "test.h"

#include "core/internal.h"
#include "trace/replay/twin_internal.h"

typedef struct model {
    uint64_t *r; /* (base, size), swap-removal order */
    size_t n, cap;
} model;

static int model_add(model *m, uint64_t base, uint64_t size) {
    if (m->n == m->cap) {
        size_t nc = m->cap ? 2 * m->cap : 64;
        uint64_t *p = realloc(m->r, 2 * nc * sizeof *p);
        if (!p) return 0;
        m->r = p, m->cap = nc;
    }
    m->r[2 * m->n] = base, m->r[2 * m->n + 1] = size, m->n++;
    return 1;
}

static void model_del(model *m, uint64_t base) {
    for (size_t k = 0; k < m->n; k++)
        if (m->r[2 * k] == base) {
            --m->n;
            m->r[2 * k] = m->r[2 * m->n], m->r[2 * k + 1] = m->r[2 * m->n + 1];
            return;
        }
}

static int model_has(const model *m, uint64_t addr) {
    if (addr == UINT64_MAX) return 0;
    for (size_t k = 0; k < m->n; k++)
        if (m->r[2 * k] <= addr && addr < m->r[2 * k] + m->r[2 * k + 1]) return 1;
    return 0;
}

/* Every list entry the model's, in its order; has() the model's at nprobe random addresses
 * and around the segments k = 0, step, 2 step, ... (base, last byte, end, the byte before
 * the base, the middle). */
static int agree_at(const hbmi_twin_segs *s, const model *m, test_rng *rng, int nprobe, uint64_t span, size_t step) {
    if (s->n != m->n || (m->n && memcmp(s->list, m->r, 2 * m->n * sizeof *m->r))) return 0;
    for (size_t k = step > 1 ? test_below(rng, step) : 0; k < m->n; k += step) {
        uint64_t b = m->r[2 * k], z = m->r[2 * k + 1];
        uint64_t at[] = {b, b + z - 1, b + z, b - 1, b + z / 2};
        for (size_t j = 0; j < sizeof at / sizeof at[0]; j++)
            if (hbmi_twin_segs_has(s, at[j]) != model_has(m, at[j])) return 0;
    }
    for (int j = 0; j < nprobe; j++) {
        uint64_t a = test_below(rng, span);
        if (hbmi_twin_segs_has(s, a) != model_has(m, a)) return 0;
    }
    return hbmi_twin_segs_has(s, UINT64_MAX) == 0 && hbmi_twin_segs_has(s, 0) == model_has(m, 0);
}

static int agree(const hbmi_twin_segs *s, const model *m, test_rng *rng, int nprobe, uint64_t span) {
    return agree_at(s, m, rng, nprobe, span, 1);
}

/* steps random operations over nbases bases spaced by gap, sizes up to maxsize. */
static void run_random(uint64_t seed, int steps, uint64_t nbases, uint64_t gap, uint64_t maxsize, int wrap) {
    test_rng rng = {seed};
    hbmi_twin_segs s;
    hbmi_twin_segs_init(&s);
    model m = {0};
    for (int i = 0; i < steps; i++) {
        uint64_t base = 0x7f0000000000ull + test_below(&rng, nbases) * gap;
        if (wrap && !test_below(&rng, 50)) base = UINT64_MAX - test_below(&rng, 3 * gap); /* an end past 2^64 */
        if (!test_below(&rng, 200)) base = 0;
        int add = m.n < 8 || test_below(&rng, 100) < 55;
        if (add) {
            uint64_t size = 512 * (1 + test_below(&rng, maxsize / 512));
            CHECK(model_add(&m, base, size));
            CHECK_OK(hbmi_twin_segs_add(&s, base, size));
        } else {
            /* mostly a base held (by list position, so any of the duplicates), else any */
            if (m.n && test_below(&rng, 10)) base = m.r[2 * test_below(&rng, m.n)];
            model_del(&m, base);
            hbmi_twin_segs_del(&s, base);
        }
        CHECK_OK(hbmi_twin_segs_check(&s));
        /* all of it now and then, else a sample (the model's lookups walk every segment) */
        uint64_t span = nbases * gap + 0x7f0000000000ull + maxsize;
        if (i % 500 == 0 || m.n < 64) CHECK(agree(&s, &m, &rng, 64, span));
        else CHECK(agree_at(&s, &m, &rng, 4, span, m.n / 4 + 1));
    }
    while (m.n) { /* empty it, from a random position each time */
        uint64_t base = m.r[2 * test_below(&rng, m.n)];
        model_del(&m, base);
        hbmi_twin_segs_del(&s, base);
        CHECK_OK(hbmi_twin_segs_check(&s));
        if (m.n % 97 == 0) CHECK(agree_at(&s, &m, &rng, 4, nbases * gap + 0x7f0000000000ull + maxsize, m.n / 8 + 1));
    }
    CHECK_EQ_U64(s.nch, 0);
    hbmi_twin_segs_destroy(&s);
    free(m.r);
}

static void test_few_bases(void) { run_random(1, 6000, 24, 2u << 20, 8u << 20, 0); }        /* duplicates, overlaps */
static void test_many_bases(void) { run_random(2, 20000, 1u << 20, 2u << 20, 2u << 20, 0); } /* splits, merges */
static void test_huge_and_wrapping(void) { run_random(3, 8000, 200, 1ull << 40, 1ull << 44, 1); }

/* A repeated history: every round adds the same bases again and frees only some, so
 * thousands are held, many at one base; then they go in another order than they came. */
static void test_repeated_history(void) {
    hbmi_twin_segs s;
    hbmi_twin_segs_init(&s);
    model m = {0};
    test_rng rng = {4};
    for (int round = 0; round < 68; round++)
        for (uint64_t k = 0; k < 300; k++) {
            uint64_t base = 0x7f0000000000ull + k * (20u << 20), size = (2 + k % 9) << 20;
            CHECK(model_add(&m, base, size));
            CHECK_OK(hbmi_twin_segs_add(&s, base, size));
            if (k % 3) {
                model_del(&m, base);
                hbmi_twin_segs_del(&s, base);
            }
        }
    CHECK_OK(hbmi_twin_segs_check(&s));
    CHECK_EQ_U64(s.n, 68 * 100);
    CHECK(agree(&s, &m, &rng, 1000, 300 * (20u << 20)));
    for (uint64_t k = 0; k < 300; k += 3)
        for (int j = 0; j < 40; j++) {
            model_del(&m, 0x7f0000000000ull + k * (20u << 20));
            hbmi_twin_segs_del(&s, 0x7f0000000000ull + k * (20u << 20));
        }
    CHECK_OK(hbmi_twin_segs_check(&s));
    CHECK_EQ_U64(s.n, 28 * 100);
    CHECK(agree(&s, &m, &rng, 1000, 300 * (20u << 20)));
    hbmi_twin_segs_destroy(&s);
    free(m.r);
}

/* Host allocation failures SQLite style: the Nth allocation made by the adds from the
 * 200th on fails; the set is as before that add (the check passes, the model agrees) and
 * the adds after it go on. Until an N whose failure no add reaches. */
static void test_faults(void) {
    test_rng rng = {5};
    for (uint64_t nth = 1;; nth++) {
        hbmi_twin_segs s;
        hbmi_twin_segs_init(&s);
        model m = {0};
        uint64_t left = nth; /* the adds' allocations until the one that fails */
        int failed = 0;
        for (int i = 0; i < 400; i++) {
            uint64_t base = 0x7f0000000000ull + test_below(&rng, 1000) * 4096, size = 4096 * (1 + test_below(&rng, 4));
            int armed = i >= 200 && left;
            if (armed) hbm_debug_fail_host_alloc(left);
            hbm_status st = hbmi_twin_segs_add(&s, base, size);
            if (armed) {
                uint64_t made = hbm_debug_fail_host_alloc(0);
                left = st ? 0 : left - made;
            }
            if (st) {
                CHECK_STATUS(st, HBM_ERR_NOMEM);
                failed = 1;
            } else {
                CHECK(model_add(&m, base, size));
            }
            CHECK_OK(hbmi_twin_segs_check(&s));
            if (i % 4 == 3) {
                uint64_t b = m.r[2 * test_below(&rng, m.n)];
                model_del(&m, b);
                hbmi_twin_segs_del(&s, b);
            }
        }
        CHECK(agree(&s, &m, &rng, 100, 1000 * 4096));
        hbmi_twin_segs_destroy(&s);
        free(m.r);
        if (!failed) {
            CHECK(nth > 3); /* the adds allocated: growing the list, the chunks and new chunks */
            break;
        }
    }
}

int main(void) {
    RUN(test_few_bases);
    RUN(test_many_bases);
    RUN(test_huge_and_wrapping);
    RUN(test_repeated_history);
    RUN(test_faults);
    return test_done();
}
