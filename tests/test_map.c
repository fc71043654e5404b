/* test_map.c - the one hash map (core/map.h): swap's report of what it replaced, reserve
 * (no growth, hence no failure, up to the count reserved), the hash on the keys callers
 * use (aligned addresses, consecutive page numbers: short probes), deletion by slot, key
 * UINT64_MAX, insert after a reserve, and the invariant walker hbmi_map_check shown each
 * kind of broken map (a key held twice included). */
#include "core/internal.h"
#include "test.h"

/* The mean distance from a key's home to its slot (0: in its home). */
static double mean_displacement(const hbmi_map *m) {
    size_t n = 0, d = 0;
    for (size_t i = 0; i < m->cap; i++)
        if (m->s[i].key) n++, d += (i - hbmi_map_home(m, m->s[i].key)) & (m->cap - 1);
    return n ? (double)d / (double)n : 0;
}

static void test_swap(void) {
    hbmi_map m;
    hbmi_map_init(&m);
    int had = -1;
    uint64_t old = 7;
    CHECK_OK(hbmi_map_swap(&m, 42, 1, &had, &old));
    CHECK(had == 0 && old == 7); /* old untouched when nothing was there */
    CHECK_OK(hbmi_map_swap(&m, 42, 2, &had, &old));
    CHECK(had == 1 && old == 1);
    uint64_t v = 0;
    CHECK(hbmi_map_get(&m, 42, &v) && v == 2);
    CHECK_EQ_U64(m.count, 1);
    hbmi_map_slot *sl = hbmi_map_find(&m, 42);
    CHECK(sl && sl->key == 43 && sl->val == 2);
    hbmi_map_del_slot(&m, sl);
    CHECK(!hbmi_map_find(&m, 42) && m.count == 0);
    CHECK_OK(hbmi_map_check(&m));
    hbmi_map_destroy(&m);
    CHECK(m.cap == 0 && m.s == NULL);
    CHECK_OK(hbmi_map_check(&m));
}

/* After reserve(n), puts up to n keys make no host allocation (so none can fail). */
static void test_reserve(void) {
    hbmi_map m;
    hbmi_map_init(&m);
    CHECK_OK(hbmi_map_reserve(&m, 1000));
    CHECK(m.cap >= 2000 && m.cap < 4000);
    const hbmi_map_slot *s0 = m.s;
    hbm_debug_fail_host_alloc(1); /* the next host allocation fails */
    for (uint64_t k = 0; k < 1000; k++) CHECK_OK(hbmi_map_put(&m, k * 4096, k));
    CHECK(m.s == s0);
    CHECK(hbmi_map_room(&m, 0) && !hbmi_map_room(&m, m.cap / 2 - 1000 + 1));
    /* one more than reserved must grow: the armed failure, and the map as it was */
    for (uint64_t k = 1000; hbmi_map_room(&m, 1); k++) CHECK_OK(hbmi_map_put(&m, k * 4096, k));
    size_t n = m.count;
    CHECK_STATUS(hbmi_map_put(&m, 1, 1), HBM_ERR_NOMEM);
    hbm_debug_fail_host_alloc(0);
    CHECK(m.count == n && m.s == s0 && !hbmi_map_get(&m, 1, NULL));
    CHECK_OK(hbmi_map_check(&m));
    CHECK_OK(hbmi_map_put(&m, 1, 1));
    CHECK(m.cap > 2 * n && hbmi_map_get(&m, 1, NULL));
    CHECK_OK(hbmi_map_check(&m));
    hbmi_map_destroy(&m);
}

/* Keys as the callers have them: device addresses aligned to 2 MiB (low bits all zero),
 * consecutive page numbers, event indices. A hash of the low bits alone would put the
 * aligned ones in one cluster. */
static void test_hash_spread(void) {
    static const uint64_t stride[] = {1, 512, 2u << 20, 1ull << 32};
    for (size_t q = 0; q < sizeof stride / sizeof stride[0]; q++) {
        hbmi_map m;
        hbmi_map_init(&m);
        for (uint64_t k = 0; k < 50000; k++) CHECK_OK(hbmi_map_put(&m, 0x7f0000000000ull + k * stride[q], k));
        CHECK_OK(hbmi_map_check(&m));
        double d = mean_displacement(&m);
        if (d > 2.0) fprintf(stderr, "stride %" PRIu64 ": mean displacement %.2f\n", stride[q], d);
        CHECK(d <= 2.0); /* linear probing at most half full expects 0.5 for random keys */
        for (uint64_t k = 0; k < 50000; k += 2) CHECK(hbmi_map_del(&m, 0x7f0000000000ull + k * stride[q], NULL));
        for (uint64_t k = 0; k < 50000; k++) CHECK(hbmi_map_get(&m, 0x7f0000000000ull + k * stride[q], NULL) == (int)(k & 1));
        CHECK_OK(hbmi_map_check(&m));
        hbmi_map_destroy(&m);
    }
}

/* UINT64_MAX is stored as 0 (empty): it must be found nowhere, even in a full cluster. */
static void test_max_key(void) {
    hbmi_map m;
    hbmi_map_init(&m);
    for (uint64_t k = 0; k < 8; k++) CHECK_OK(hbmi_map_put(&m, k, k));
    CHECK(!hbmi_map_find(&m, UINT64_MAX) && !hbmi_map_del(&m, UINT64_MAX, NULL));
    CHECK_STATUS(hbmi_map_put(&m, UINT64_MAX, 1), HBM_ERR_INVALID);
    CHECK_EQ_U64(m.count, 8);
    CHECK_OK(hbmi_map_put(&m, UINT64_MAX - 1, 5)); /* the largest key allowed */
    uint64_t v;
    CHECK(hbmi_map_get(&m, UINT64_MAX - 1, &v) && v == 5);
    hbmi_map_destroy(&m);
}

/* The walker on each kind of damage, and on the map repaired. */
static void test_check_broken(void) {
    hbmi_map m;
    hbmi_map_init(&m);
    for (uint64_t k = 0; k < 300; k++) CHECK_OK(hbmi_map_put(&m, k * 7919, k));
    CHECK_OK(hbmi_map_check(&m));
    m.count++; /* the count off by one */
    CHECK_STATUS(hbmi_map_check(&m), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "count");
    m.count--;
    m.shift++; /* a shift that does not go with the capacity */
    CHECK_STATUS(hbmi_map_check(&m), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "shift");
    m.shift--;
    size_t cap = m.cap;
    m.cap = cap - 1; /* not a power of two */
    CHECK_STATUS(hbmi_map_check(&m), HBM_ERR_CORRUPT);
    m.cap = cap;
    size_t mask = m.cap - 1, at = 0, far = 0;
    for (; at < m.cap; at++) { /* a key, and an empty slot just before its home */
        far = (hbmi_map_home(&m, m.s[at].key) + m.cap - 1) & mask;
        if (m.s[at].key && !m.s[far].key) break;
    }
    CHECK(at < m.cap);
    m.s[far] = m.s[at]; /* moved there the key is out of reach: lookups start at its home */
    m.s[at].key = 0;
    CHECK_STATUS(hbmi_map_check(&m), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "cut off");
    CHECK(!hbmi_map_get(&m, m.s[far].key - 1, NULL));
    m.s[at] = m.s[far];
    m.s[far].key = 0;
    CHECK_OK(hbmi_map_check(&m));
    /* over half full: keys written in without the put's growth */
    size_t n = m.count;
    for (uint64_t k = 1; m.count <= m.cap / 2; k++) {
        uint64_t key = k * 7919 + 1;
        if (hbmi_map_get(&m, key, NULL)) continue;
        size_t i = hbmi_map_home(&m, key + 1);
        while (m.s[i].key) i = (i + 1) & mask;
        m.s[i] = (hbmi_map_slot){key + 1, 0};
        m.count++;
    }
    CHECK(m.count > n);
    CHECK_STATUS(hbmi_map_check(&m), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "over half");
    hbmi_map_destroy(&m);
}

/* insert: the hot path's put after a reserve; a key inserted twice is reported. */
static void test_insert(void) {
    hbmi_map m;
    hbmi_map_init(&m);
    CHECK_OK(hbmi_map_reserve(&m, 100));
    for (uint64_t k = 0; k < 100; k++) hbmi_map_insert(&m, k << 21, k);
    CHECK_OK(hbmi_map_check(&m));
    for (uint64_t k = 0; k < 100; k++) {
        uint64_t v;
        CHECK(hbmi_map_get(&m, k << 21, &v) && v == k);
    }
    hbmi_map_insert(&m, 5ull << 21, 99); /* twice: what a caller's broken promise leaves */
    CHECK_STATUS(hbmi_map_check(&m), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "held twice");
    hbmi_map_destroy(&m);
}

int main(void) {
    RUN(test_swap);
    RUN(test_reserve);
    RUN(test_hash_spread);
    RUN(test_max_key);
    RUN(test_check_broken);
    RUN(test_insert);
    return test_done();
}
