/* test_blocks.c - the building blocks every allocator shares: the hash map (core/map.c)
 * and the pool of records (core/pool.c), each run on random operations beside a plain
 * reference model (arrays, linear scans) and checked by its own walker after every step;
 * then the walkers shown broken maps and pools. */
#include <stddef.h>

#include "core/internal.h"
#include "test.h"

static uint64_t rng_ = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) {
    rng_ ^= rng_ << 13, rng_ ^= rng_ >> 7, rng_ ^= rng_ << 17;
    return rng_;
}

/* --- the map beside an array of (key, value, present) ------------------------------------ */
#define MKEYS 700

static void test_map_random(void) {
    static uint64_t keys[MKEYS], vals[MKEYS];
    static int present[MKEYS];
    for (int i = 0; i < MKEYS; i++) { /* small and large keys, neighbours, the largest allowed */
        keys[i] = i < 100 ? (uint64_t)i : i < 200 ? UINT64_MAX - 1 - (uint64_t)(i - 100) : rnd() >> (rnd() % 64);
        for (int j = 0; j < i; j++)
            if (keys[j] == keys[i]) keys[i] = (uint64_t)i << 20; /* distinct */
        present[i] = 0;
    }
    hbmi_map m;
    hbmi_map_init(&m);
    size_t count = 0;
    for (int step = 0; step < 60000; step++) {
        int i = (int)(rnd() % MKEYS);
        uint64_t r = rnd() % 16, v = 0;
        if (r < 7) { /* put: insert or overwrite */
            uint64_t val = rnd();
            CHECK_OK(hbmi_map_put(&m, keys[i], val));
            count += !present[i];
            present[i] = 1, vals[i] = val;
        } else if (r < 13) { /* delete, present or not */
            int got = hbmi_map_del(&m, keys[i], &v);
            CHECK(got == present[i]);
            if (got) CHECK_EQ_U64(v, vals[i]);
            count -= (size_t)present[i];
            present[i] = 0;
        } else if (r < 15) { /* look up */
            int got = hbmi_map_get(&m, keys[i], &v);
            CHECK(got == present[i]);
            if (got) CHECK_EQ_U64(v, vals[i]);
        } else { /* reserve: then puts up to that many cannot grow it */
            size_t cap = m.cap;
            CHECK_OK(hbmi_map_reserve(&m, count + 8));
            CHECK(m.cap >= cap && (count + 8) * 3 <= m.cap * 2 + 2);
        }
        CHECK_EQ_U64(m.count, count);
        if (step % 97 == 0 || step > 59000) CHECK_OK(hbmi_map_check(&m));
        if (step % 5000 == 4999) /* then the whole table against the model */
            for (int k = 0; k < MKEYS; k++) {
                int got = hbmi_map_get(&m, keys[k], &v);
                CHECK(got == present[k]);
                if (got) CHECK_EQ_U64(v, vals[k]);
            }
        if (step == 30000) { /* empty it: a run of deletions back to nothing */
            for (int k = 0; k < MKEYS; k++)
                if (present[k]) {
                    CHECK(hbmi_map_del(&m, keys[k], NULL));
                    present[k] = 0;
                }
            count = 0;
            CHECK_EQ_U64(m.count, 0);
            CHECK_OK(hbmi_map_check(&m));
        }
    }
    /* UINT64_MAX is the one key refused; it is never found */
    CHECK_STATUS(hbmi_map_put(&m, UINT64_MAX, 1), HBM_ERR_INVALID);
    CHECK(!hbmi_map_get(&m, UINT64_MAX, NULL));
    CHECK(!hbmi_map_del(&m, UINT64_MAX, NULL));
    hbmi_map_destroy(&m);
}

/* A failed growth leaves the map as it was. */
static void test_map_faults(void) {
    for (uint64_t n = 1;; n++) {
        hbmi_map m;
        hbmi_map_init(&m);
        hbm_status s = HBM_OK;
        uint64_t k = 0;
        hbm_debug_fail_host_alloc(n);
        for (; k < 100 && !s; k++) s = hbmi_map_put(&m, k * 7919, k);
        hbm_debug_fail_host_alloc(0);
        if (!s) {
            hbmi_map_destroy(&m);
            CHECK(n > 3); /* 100 keys took several growths */
            break;
        }
        CHECK(s == HBM_ERR_NOMEM);
        CHECK_OK(hbmi_map_check(&m));
        CHECK_EQ_U64(m.count, k - 1); /* the keys before the failed one */
        for (uint64_t j = 0; j + 1 < k; j++) {
            uint64_t v;
            CHECK(hbmi_map_get(&m, j * 7919, &v) && v == j);
        }
        hbmi_map_destroy(&m);
        CHECK(n < 50);
    }
}

/* --- the pool beside a stack of given-back slots ----------------------------------------- */
typedef struct rec {
    uint64_t payload;
    uint32_t next; /* the pool's link while unused */
    uint8_t used;
} rec;

static int rec_unused(const void *r) { return !((const rec *)r)->used; }

#define POOL_CHECK(p, v) hbmi_pool_check((p), (v), sizeof(rec), offsetof(rec, next), rec_unused, "test pool")

static void test_pool_random(void) {
    enum { MAX = 3000 };
    static uint32_t live[MAX], given[MAX]; /* the model: live slots, given-back ones (a stack) */
    size_t nlive = 0, ngiven = 0, n = 0;
    hbmi_pool p;
    memset(&p, 0, sizeof p);
    rec *v = NULL;
    CHECK_OK(POOL_CHECK(&p, v));
    for (int step = 0; step < 50000; step++) {
        int take = nlive == 0 || (nlive < MAX - 8 && rnd() % 100 < (step < 25000 ? 55u : 45u));
        if (take) {
            size_t k = 1 + rnd() % 4, before = p.cap;
            CHECK_OK(hbmi_pool_reserve(&p, (void **)&v, sizeof *v, k));
            CHECK(p.cap >= p.used + k && (before >= p.used + k ? p.cap == before : 1));
            rec *was = v;
            for (size_t j = 0; j < k && nlive < MAX; j++) {
                uint32_t i = hbmi_pool_take(&p, v, sizeof *v, offsetof(rec, next));
                /* the model: the last slot given back, else the next new one */
                uint32_t want = ngiven ? given[--ngiven] : (uint32_t)n++;
                CHECK_EQ_U64(i, want);
                CHECK(i < p.cap && v == was); /* reserved: no move while taking */
                v[i] = (rec){.payload = rnd(), .used = 1};
                live[nlive++] = i;
            }
        } else {
            size_t at = rnd() % nlive;
            uint32_t i = live[at];
            live[at] = live[--nlive];
            v[i].used = 0;
            hbmi_pool_give(&p, v, sizeof *v, offsetof(rec, next), i);
            given[ngiven++] = i;
        }
        CHECK_EQ_U64(p.used, nlive);
        CHECK_EQ_U64(p.n, n);
        CHECK_EQ_U64(p.n - p.used, ngiven);
        if (step % 101 == 0) CHECK_OK(POOL_CHECK(&p, v));
    }
    CHECK_OK(POOL_CHECK(&p, v));
    hbmi_pool_destroy(&p, (void **)&v);
    CHECK(v == NULL && p.n == 0 && p.cap == 0);
}

/* The walker on broken pools: each damage is named, and undone it passes again. */
static void test_pool_check_finds(void) {
    hbmi_pool p;
    memset(&p, 0, sizeof p);
    rec *v = NULL;
    CHECK_OK(hbmi_pool_reserve(&p, (void **)&v, sizeof *v, 8));
    for (int j = 0; j < 8; j++) {
        uint32_t i = hbmi_pool_take(&p, v, sizeof *v, offsetof(rec, next));
        v[i] = (rec){.used = 1};
    }
    for (uint32_t i = 1; i < 8; i += 2) { /* give back 1, 3, 5, 7: the list 7 5 3 1 */
        v[i].used = 0;
        hbmi_pool_give(&p, v, sizeof *v, offsetof(rec, next), i);
    }
    CHECK_OK(POOL_CHECK(&p, v));
    /* a cycle: slot 1 (the list's end) points back at 5 */
    v[1].next = 6;
    CHECK_STATUS(POOL_CHECK(&p, v), HBM_ERR_CORRUPT);
    CHECK(strstr(hbm_last_error(), "test pool") != NULL);
    v[1].next = 0;
    /* the list cut short: 3 ends it */
    v[3].next = 0;
    CHECK_STATUS(POOL_CHECK(&p, v), HBM_ERR_CORRUPT);
    v[3].next = 2;
    /* a slot past the handed-out ones */
    v[5].next = 9;
    CHECK_STATUS(POOL_CHECK(&p, v), HBM_ERR_CORRUPT);
    v[5].next = 4;
    /* a listed slot marked in use */
    v[3].used = 1;
    CHECK_STATUS(POOL_CHECK(&p, v), HBM_ERR_CORRUPT);
    v[3].used = 0;
    /* an unlisted slot marked unused */
    v[0].used = 0;
    CHECK_STATUS(POOL_CHECK(&p, v), HBM_ERR_CORRUPT);
    v[0].used = 1;
    /* counts that disagree */
    p.used++;
    CHECK_STATUS(POOL_CHECK(&p, v), HBM_ERR_CORRUPT);
    p.used--;
    p.n = p.cap + 1;
    CHECK_STATUS(POOL_CHECK(&p, v), HBM_ERR_CORRUPT);
    p.n = 8;
    CHECK_OK(POOL_CHECK(&p, v));
    /* without is_free the list alone is walked */
    v[0].used = 0;
    CHECK_OK(hbmi_pool_check(&p, v, sizeof *v, offsetof(rec, next), NULL, "test pool"));
    hbmi_pool_destroy(&p, (void **)&v);
}

/* A failed growth leaves the pool as it was, and usable. */
static void test_pool_faults(void) {
    for (uint64_t n = 1;; n++) {
        hbmi_pool p;
        memset(&p, 0, sizeof p);
        rec *v = NULL;
        hbm_status s = HBM_OK;
        hbm_debug_fail_host_alloc(n);
        for (int k = 0; k < 200 && !s; k++)
            if (!(s = hbmi_pool_reserve(&p, (void **)&v, sizeof *v, 1))) {
                uint32_t i = hbmi_pool_take(&p, v, sizeof *v, offsetof(rec, next));
                v[i] = (rec){.payload = i, .used = 1};
            }
        hbm_debug_fail_host_alloc(0);
        if (s) CHECK(s == HBM_ERR_NOMEM);
        CHECK_OK(POOL_CHECK(&p, v));
        for (size_t i = 0; i < p.n; i++) CHECK_EQ_U64(v[i].payload, i);
        hbmi_pool_destroy(&p, (void **)&v);
        if (!s) {
            CHECK(n > 3);
            break;
        }
        CHECK(n < 50);
    }
}

int main(void) {
    RUN(test_map_random);
    RUN(test_map_faults);
    RUN(test_pool_random);
    RUN(test_pool_check_finds);
    RUN(test_pool_faults);
    return test_done();
}
