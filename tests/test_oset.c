/* test_oset.c - the one ordered set (core/oset.h): random inserts and removes against a
 * reference model (a sorted array of (key, index)), with every query checked after each
 * step (first/last, the walk by next and by prev, lower_bound, upper_bound, floor, has,
 * count, drain) and a summary kept by fix (the greatest value below each record) recomputed
 * there; duplicates (equal keys, ordered by index); the empty and one-record sets; a
 * degenerate tree deeper than the fix stack; and the walker hbmi_oset_check shown each
 * kind of broken tree (out of order, a priority above its parent's, a cycle, a link out of
 * range, a wrong count), which it must refuse. */
#include "core/internal.h"
#include "core/oset.h"
#include "test.h"

typedef struct rec {
    uint32_t key, val, mx; /* mx: the greatest val in the record's subtree (the summary) */
    hbmi_oset_link link;
    int in;
} rec;

static inline int rec_cmp(const rec *x, const rec *y) { return x->key < y->key ? -1 : x->key > y->key; }

static inline void rec_fix(rec *b, uint32_t i1) {
    rec *x = &b[i1 - 1];
    uint32_t m = x->val;
    if (x->link.l && b[x->link.l - 1].mx > m) m = b[x->link.l - 1].mx;
    if (x->link.r && b[x->link.r - 1].mx > m) m = b[x->link.r - 1].mx;
    x->mx = m;
}

HBMI_OSET_DEFINE(rs, rec, link, rec_cmp)
HBMI_OSET_DEFINE_AUG(ra, rec, link, rec_cmp, rec_fix)

#define N 300

static uint64_t rng = 0x1234567887654321ULL;
static uint32_t rnd(uint32_t n) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33) % n;
}

/* the model: indices in (key, index) order */
static uint32_t model[N];
static size_t nmodel;

static int model_before(const rec *b, uint32_t i, uint32_t j) {
    return b[i].key < b[j].key || (b[i].key == b[j].key && i < j);
}

static void model_add(const rec *b, uint32_t i) {
    size_t k = nmodel;
    while (k > 0 && model_before(b, i, model[k - 1])) model[k] = model[k - 1], k--;
    model[k] = i;
    nmodel++;
}

static void model_del(uint32_t i) {
    size_t k = 0;
    while (model[k] != i) k++;
    memmove(model + k, model + k + 1, (nmodel - k - 1) * sizeof *model);
    nmodel--;
}

/* the greatest val below t, recomputed (recursion: the test's, not the set's) */
static uint32_t true_max(const rec *b, uint32_t t) {
    if (!t) return 0;
    uint32_t m = b[t - 1].val, l = true_max(b, b[t - 1].link.l), r = true_max(b, b[t - 1].link.r);
    return m > l ? (m > r ? m : r) : (l > r ? l : r);
}

static int summaries_ok(const rec *b, uint32_t t) {
    if (!t) return 1;
    return b[t - 1].mx == true_max(b, t) && summaries_ok(b, b[t - 1].link.l) && summaries_ok(b, b[t - 1].link.r);
}

/* everything the set answers, against the model */
static void agree(rec *b, const hbmi_oset *s, int aug) {
    CHECK_OK(rs_check(b, N, s, "test"));
    CHECK_EQ_U64(s->n, nmodel);
    CHECK(rs_first(b, s) == (nmodel ? model[0] + 1 : 0));
    CHECK(rs_last(b, s) == (nmodel ? model[nmodel - 1] + 1 : 0));
    size_t k = 0;
    for (uint32_t t = rs_first(b, s); t; t = rs_next(b, s, t), k++) CHECK(k < nmodel && t == model[k] + 1);
    CHECK_EQ_U64(k, nmodel);
    for (uint32_t t = rs_last(b, s); t; t = rs_prev(b, s, t)) CHECK(k > 0 && t == model[--k] + 1);
    CHECK_EQ_U64(k, 0);
    for (uint32_t i = 0; i < N; i++) CHECK(rs_has(b, s, i) == b[i].in);
    for (int q = 0; q < 8; q++) {
        rec key = {.key = rnd(40)};
        uint32_t lb = 0, ub = 0, fl = 0;
        for (size_t j = 0; j < nmodel; j++) {
            if (!lb && b[model[j]].key >= key.key) lb = model[j] + 1;
            if (!ub && b[model[j]].key > key.key) ub = model[j] + 1;
            if (b[model[j]].key <= key.key) fl = model[j] + 1;
        }
        CHECK(rs_lower_bound(b, s, &key) == lb);
        CHECK(rs_upper_bound(b, s, &key) == ub);
        CHECK(rs_floor(b, s, &key) == fl);
    }
    if (aug) CHECK(summaries_ok(b, s->root));
}

static void random_ops(int aug) {
    static rec b[N];
    memset(b, 0, sizeof b);
    nmodel = 0;
    hbmi_oset s = {0, 0};
    agree(b, &s, aug); /* empty */
    for (int step = 0; step < 6000; step++) {
        uint32_t i = rnd(N);
        if (!b[i].in && rnd(3)) {
            b[i].key = rnd(40); /* 40 keys over 300 records: many duplicates */
            b[i].val = rnd(1000);
            if (aug) ra_insert(b, &s, i);
            else rs_insert(b, &s, i);
            b[i].in = 1;
            model_add(b, i);
        } else if (b[i].in) {
            if (aug) ra_remove(b, &s, i);
            else rs_remove(b, &s, i);
            b[i].in = 0;
            model_del(i);
        }
        if (step % 7 == 0 || nmodel <= 1) agree(b, &s, aug);
    }
    agree(b, &s, aug);
    uint32_t out[N];
    size_t n = rs_drain(b, &s, out);
    CHECK_EQ_U64(n, nmodel);
    for (size_t k = 0; k < n; k++) CHECK(out[k] == model[k]);
    CHECK(s.root == 0 && s.n == 0);
    CHECK_OK(rs_check(b, N, &s, "test"));
}

static void test_random(void) { random_ops(0); }
static void test_random_aug(void) { random_ops(1); }

/* One record: first = last = lower_bound of its key; nothing before or after it. */
static void test_one(void) {
    rec b[3] = {{.key = 5, .val = 9}};
    hbmi_oset s = {0, 0};
    CHECK(rs_first(b, &s) == 0 && rs_last(b, &s) == 0);
    rec key = {.key = 5};
    CHECK(rs_lower_bound(b, &s, &key) == 0 && rs_floor(b, &s, &key) == 0);
    ra_insert(b, &s, 0);
    CHECK(s.root == 1 && s.n == 1 && b[0].mx == 9);
    CHECK(rs_first(b, &s) == 1 && rs_last(b, &s) == 1);
    CHECK(rs_next(b, &s, 1) == 0 && rs_prev(b, &s, 1) == 0);
    CHECK(rs_lower_bound(b, &s, &key) == 1 && rs_upper_bound(b, &s, &key) == 0 && rs_floor(b, &s, &key) == 1);
    key.key = 4;
    CHECK(rs_floor(b, &s, &key) == 0 && rs_upper_bound(b, &s, &key) == 1);
    CHECK_OK(rs_check(b, 3, &s, "test"));
    ra_remove(b, &s, 0);
    CHECK(s.root == 0 && s.n == 0);
    CHECK_OK(rs_check(b, 3, &s, "test"));
}

/* Equal keys sit in index order whatever the order they came in; lower_bound names the
 * lowest index among them, floor the highest. */
static void test_duplicates(void) {
    rec b[8] = {{0}};
    hbmi_oset s = {0, 0};
    static const uint32_t order[8] = {5, 2, 7, 0, 3, 6, 1, 4};
    for (int k = 0; k < 8; k++) b[order[k]].key = order[k] % 2 ? 1 : 2, rs_insert(b, &s, order[k]);
    CHECK_OK(rs_check(b, 8, &s, "test"));
    static const uint32_t want[8] = {1, 3, 5, 7, 0, 2, 4, 6}; /* key 1 (odd indices), then key 2 */
    uint32_t t = rs_first(b, &s);
    for (int k = 0; k < 8; k++, t = rs_next(b, &s, t)) CHECK(t == want[k] + 1);
    CHECK(t == 0);
    rec key = {.key = 1};
    CHECK(rs_lower_bound(b, &s, &key) == 2 && rs_floor(b, &s, &key) == 8 && rs_upper_bound(b, &s, &key) == 1);
}

/* Keys rising as priorities fall: every record is its predecessor's right child, a path of
 * N records, deeper than the fix stack (HBMI_OSET_FIXSTACK): the summaries are still right. */
static void test_degenerate(void) {
    static rec b[N];
    memset(b, 0, sizeof b);
    uint32_t idx[N];
    for (uint32_t i = 0; i < N; i++) idx[i] = i;
    for (uint32_t i = 1; i < N; i++) /* by priority, highest first */
        for (uint32_t j = i; j > 0 && hbmi_oset_prio(idx[j] + 1) > hbmi_oset_prio(idx[j - 1] + 1); j--) {
            uint32_t x = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = x;
        }
    for (uint32_t k = 0; k < N; k++) b[idx[k]].key = k, b[idx[k]].val = (k * 37) % 101;
    hbmi_oset s = {0, 0};
    for (uint32_t k = 0; k < N; k++) ra_insert(b, &s, idx[(k * 7) % N]); /* 7 and 300 coprime */
    CHECK_OK(rs_check(b, N, &s, "test"));
    uint32_t depth = 0;
    for (uint32_t t = s.root; t; t = b[t - 1].link.r) {
        depth++;
        CHECK(!b[t - 1].link.l);
    }
    CHECK_EQ_U64(depth, N);
    CHECK(summaries_ok(b, s.root));
    for (uint32_t k = 0; k < N; k += 3) ra_remove(b, &s, idx[N - 1 - k]);
    CHECK_OK(rs_check(b, N, &s, "test"));
    CHECK(summaries_ok(b, s.root));
    b[idx[0]].val = 500; /* the deepest change reaches the root */
    ra_remove(b, &s, idx[1]);
    CHECK(b[s.root - 1].mx == true_max(b, s.root));
}

/* A set of four, broken each way: the walker must refuse every one. */
static void test_check_broken(void) {
    rec b[4] = {{0}};
    hbmi_oset s = {0, 0};
    for (uint32_t i = 0; i < 4; i++) b[i].key = 10 * i, rs_insert(b, &s, i);
    CHECK_OK(rs_check(b, 4, &s, "test"));
    rec save[4];
    memcpy(save, b, sizeof b);
    hbmi_oset ok = s;

    b[0].key = 25, b[2].key = 5; /* out of order (the shape is that of the old keys) */
    CHECK_STATUS(rs_check(b, 4, &s, "test"), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "out of order");
    memcpy(b, save, sizeof b);

    s.n = 3; /* a wrong count */
    CHECK_STATUS(rs_check(b, 4, &s, "test"), HBM_ERR_CORRUPT);
    s.n = 5;
    CHECK_STATUS(rs_check(b, 4, &s, "test"), HBM_ERR_CORRUPT);
    s = ok;

    uint32_t leaf = rs_first(b, &s); /* a cycle: the least record's left child is the root */
    CHECK(!b[leaf - 1].link.l);
    b[leaf - 1].link.l = s.root;
    CHECK_STATUS(rs_check(b, 4, &s, "test"), HBM_ERR_CORRUPT); /* (the root's priority shows it first) */
    memcpy(b, save, sizeof b);
    /* more records linked than counted, the priorities right: a record reached twice */
    uint32_t r = s.root, two = b[r - 1].link.l ? b[r - 1].link.l : b[r - 1].link.r;
    b[leaf - 1].link.l = leaf == two ? 0 : two;
    if (leaf == two) b[r - 1].link.l = b[r - 1].link.r = two; /* both children the same */
    CHECK_STATUS(rs_check(b, 4, &s, "test"), HBM_ERR_CORRUPT);
    memcpy(b, save, sizeof b);

    b[leaf - 1].link.l = 9; /* a link out of range */
    CHECK_STATUS(rs_check(b, 4, &s, "test"), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "names record");
    memcpy(b, save, sizeof b);
    CHECK_OK(rs_check(b, 4, &s, "test"));

    /* a priority above the parent's: two records in order, the lower priority on top */
    rec c[2] = {{.key = 1}, {.key = 2}};
    uint32_t lo = hbmi_oset_prio(1) < hbmi_oset_prio(2) ? 1 : 2, hi = 3 - lo;
    hbmi_oset t = {lo, 2};
    if (lo == 1) c[0].link.r = 2;
    else c[1].link.l = 1;
    CHECK_STATUS(rs_check(c, 2, &t, "test"), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "priority");
    t.root = hi, c[0].link = c[1].link = (hbmi_oset_link){0, 0};
    if (hi == 1) c[0].link.r = 2;
    else c[1].link.l = 1;
    CHECK_OK(rs_check(c, 2, &t, "test"));
}

int main(void) {
    RUN(test_one);
    RUN(test_duplicates);
    RUN(test_random);
    RUN(test_random_aug);
    RUN(test_degenerate);
    RUN(test_check_broken);
    return test_done();
}
