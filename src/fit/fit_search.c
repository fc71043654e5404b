/* fit_search.c - hbm's choice of changes: the cheapest set of candidates (fit_model.c) that
 * brings the live temp bytes under a target at every time of the schedule.
 *
 * A covering problem over the whole schedule: a depth-first branch and bound that takes the
 * time where the most bytes are over the target and branches on each candidate that frees
 * bytes there, cheapest per byte first (the later branches exclude the earlier candidates, so
 * no set is visited twice). A branch is cut when its cost plus the cheapest way to cover that
 * time's excess by fractions of the remaining candidates (each counted for the bytes it frees
 * at that time, less the operands it keeps live there) cannot beat the best set found. The
 * first dive is the greedy answer; the search stops at the time budget (best so far, not
 * proven) or when every branch is closed (proven the least cost among the candidates). The
 * live bytes are kept in a segment tree (range add, maximum with its time). */
#include <math.h>
#include <string.h>

#include "fit/fit_internal.h"

typedef struct segtree {
    uint32_t n, size;
    int64_t *mx, *lz;
} segtree;

static void st_build(segtree *t, const int64_t *v, uint32_t node, uint32_t lo, uint32_t hi) {
    if (lo == hi) {
        t->mx[node] = v[lo];
        return;
    }
    uint32_t mid = lo + (hi - lo) / 2;
    st_build(t, v, 2 * node, lo, mid);
    st_build(t, v, 2 * node + 1, mid + 1, hi);
    t->mx[node] = t->mx[2 * node] > t->mx[2 * node + 1] ? t->mx[2 * node] : t->mx[2 * node + 1];
}

static void st_add(segtree *t, uint32_t node, uint32_t lo, uint32_t hi, uint32_t a, uint32_t b, int64_t d) {
    if (b < lo || hi < a) return;
    if (a <= lo && hi <= b) {
        t->mx[node] += d;
        t->lz[node] += d;
        return;
    }
    uint32_t mid = lo + (hi - lo) / 2;
    st_add(t, 2 * node, lo, mid, a, b, d);
    st_add(t, 2 * node + 1, mid + 1, hi, a, b, d);
    int64_t m = t->mx[2 * node] > t->mx[2 * node + 1] ? t->mx[2 * node] : t->mx[2 * node + 1];
    t->mx[node] = m + t->lz[node];
}

/* the time of the maximum (the first one) */
static uint32_t st_argmax(const segtree *t) {
    uint32_t node = 1, lo = 0, hi = t->n - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int64_t target = t->mx[node] - t->lz[node];
        if (t->mx[2 * node] == target) {
            node = 2 * node;
            hi = mid;
        } else {
            node = 2 * node + 1;
            lo = mid + 1;
        }
    }
    return lo;
}

typedef struct search {
    hbmi_fit_model *mo;
    segtree st;
    uint32_t *order; /* candidates by cost per byte */
    uint32_t n_order;
    uint32_t *group_of; /* candidate -> dense group id */
    uint8_t *group_used;
    uint16_t *excluded;
    uint8_t *in_set, *best_set;
    double best_cost;
    int found;
    uint64_t nodes, deadline_ns;
    int timed_out;
} search;

static void apply(search *s, const hbmi_fit_cand *c, int sign) {
    uint32_t n = s->st.n;
    if (c->lo <= c->hi && c->lo < n) st_add(&s->st, 1, 0, n - 1, c->lo, c->hi < n ? c->hi : n - 1, -sign * (int64_t)c->bytes);
    for (uint32_t k = 0; k < c->n_pen; k++)
        if (c->pen[k].lo <= c->pen[k].hi && c->pen[k].lo < n)
            st_add(&s->st, 1, 0, n - 1, c->pen[k].lo, c->pen[k].hi < n ? c->pen[k].hi : n - 1,
                   sign * (int64_t)c->pen[k].bytes);
}

/* bytes candidate c takes off at time t: its size less the operands it keeps live there */
static int64_t net_at(const hbmi_fit_cand *c, uint32_t t) {
    if (c->lo > t || c->hi < t) return 0;
    int64_t b = (int64_t)c->bytes;
    for (uint32_t k = 0; k < c->n_pen; k++)
        if (c->pen[k].lo <= t && t <= c->pen[k].hi) b -= (int64_t)c->pen[k].bytes;
    return b;
}

static int available(const search *s, uint32_t k) {
    return !s->excluded[k] && !s->in_set[k] && !s->group_used[s->group_of[k]];
}

typedef struct branch {
    double r;
    uint32_t hi, k;
} branch;

static int cmp_branch(const void *a, const void *b) {
    const branch *x = a, *y = b;
    if (x->r != y->r) return x->r < y->r ? -1 : 1;
    if (x->hi != y->hi) return x->hi > y->hi ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

static void dfs(search *s, double cost, int depth) {
    if (s->timed_out) return;
    if ((++s->nodes & 255) == 0 && hbmi_now_ns() > s->deadline_ns) {
        s->timed_out = 1;
        return;
    }
    int64_t over = s->st.mx[1];
    if (over <= 0) {
        if (!s->found || cost < s->best_cost) {
            s->found = 1;
            s->best_cost = cost;
            memcpy(s->best_set, s->in_set, s->mo->n_cand);
        }
        return;
    }
    if (depth > 512) return;
    uint32_t t = st_argmax(&s->st);
    const hbmi_fit_cand *cand = s->mo->cand;
    /* the bound: the excess at t covered by fractions of what is left, cheapest per byte first */
    double lb = 0;
    int64_t need = over;
    for (uint32_t j = 0; j < s->n_order && need > 0; j++) {
        uint32_t k = s->order[j];
        int64_t net;
        if (!available(s, k) || (net = net_at(&cand[k], t)) <= 0) continue;
        int64_t take = net < need ? net : need;
        lb += cand[k].cost_s * (double)take / (double)net;
        need -= take;
    }
    if (need > 0) return; /* nothing left can cover t */
    if (s->found && cost + lb >= s->best_cost * (1 - 1e-12)) return;
    /* the candidates freeing bytes at t: cheapest per byte first, then those whose span
     * reaches furthest past t (an interval cover's rule: fewer changes for the same cost) */
    branch br[512];
    uint32_t nb = 0;
    for (uint32_t j = 0; j < s->n_order && nb < 512; j++) {
        uint32_t k = s->order[j];
        if (!available(s, k) || net_at(&cand[k], t) <= 0) continue;
        br[nb++] = (branch){cand[k].cost_s / (double)cand[k].bytes, cand[k].hi, k};
    }
    hbmi_qsort(br, nb, sizeof *br, cmp_branch);
    uint32_t tried[512];
    uint32_t nt = 0;
    for (uint32_t j = 0; j < nb && !s->timed_out; j++) {
        uint32_t k = br[j].k;
        double c2 = cost + cand[k].cost_s + 1e-12; /* the tiny term: fewer changes break ties */
        if (s->found && c2 >= s->best_cost) continue;
        s->in_set[k] = 1;
        s->group_used[s->group_of[k]] = 1;
        apply(s, &cand[k], 1);
        dfs(s, c2, depth + 1);
        apply(s, &cand[k], -1);
        s->group_used[s->group_of[k]] = 0;
        s->in_set[k] = 0;
        s->excluded[k]++;
        tried[nt++] = k;
    }
    for (uint32_t j = 0; j < nt; j++) s->excluded[tried[j]]--;
}

typedef struct ratio_key {
    double r;
    uint64_t bytes;
    uint32_t len, k;
} ratio_key;

static int cmp_ratio(const void *a, const void *b) {
    const ratio_key *x = a, *y = b;
    if (x->r != y->r) return x->r < y->r ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longer spans cover more */
    return x->k < y->k ? -1 : x->k > y->k;
}

static int cmp_gid(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The greedy deepest cut when no set reaches the target: at the worst time, the candidate
 * that lowers the maximum most, until none does. */
static void deepest(search *s) {
    const hbmi_fit_cand *cand = s->mo->cand;
    for (int guard = 0; guard < 4096; guard++) {
        int64_t before = s->st.mx[1];
        uint32_t t = st_argmax(&s->st);
        int64_t best = 0;
        uint32_t pick = UINT32_MAX;
        for (uint32_t j = 0; j < s->n_order; j++) {
            uint32_t k = s->order[j];
            int64_t net;
            if (!available(s, k) || (net = net_at(&cand[k], t)) <= best) continue;
            best = net;
            pick = k;
        }
        if (pick == UINT32_MAX) break;
        apply(s, &cand[pick], 1);
        if (s->st.mx[1] > before) { /* it would raise the peak elsewhere: leave it */
            apply(s, &cand[pick], -1);
            s->excluded[pick] = 1;
            continue;
        }
        s->in_set[pick] = 1;
        s->group_used[s->group_of[pick]] = 1;
    }
    memcpy(s->best_set, s->in_set, s->mo->n_cand);
}

int hbmi_fit_search(hbmi_fit_model *mo, int64_t target, double timeout_s, int *proven) {
    *proven = 0;
    for (uint32_t k = 0; k < mo->n_cand; k++) mo->cand[k].chosen = 0;
    if (!mo->n) return 1;
    search s;
    memset(&s, 0, sizeof s);
    s.mo = mo;
    uint32_t n = mo->n, size = 1;
    while (size < n) size <<= 1;
    s.st.n = n;
    s.st.mx = hbmi_calloc(2 * (size_t)size + 2, sizeof *s.st.mx);
    s.st.lz = hbmi_calloc(2 * (size_t)size + 2, sizeof *s.st.lz);
    int64_t *d = hbmi_malloc(sizeof *d * n);
    s.order = hbmi_malloc(sizeof *s.order * (mo->n_cand + 1));
    s.group_of = hbmi_malloc(sizeof *s.group_of * (mo->n_cand + 1));
    s.group_used = hbmi_calloc(mo->n_cand + 1, 1);
    s.excluded = hbmi_calloc(mo->n_cand + 1, sizeof *s.excluded);
    s.in_set = hbmi_calloc(mo->n_cand + 1, 1);
    s.best_set = hbmi_calloc(mo->n_cand + 1, 1);
    uint64_t *gk = hbmi_malloc(sizeof *gk * (mo->n_cand + 1));
    int ok = 0;
    if (!s.st.mx || !s.st.lz || !d || !s.order || !s.group_of || !s.group_used || !s.excluded || !s.in_set ||
        !s.best_set || !gk)
        goto out;
    for (uint32_t t = 0; t < n; t++) d[t] = mo->live[t] - target;
    st_build(&s.st, d, 1, 0, n - 1);
    /* dense group ids */
    for (uint32_t k = 0; k < mo->n_cand; k++) gk[k] = (uint64_t)mo->cand[k].group << 32 | k;
    hbmi_qsort(gk, mo->n_cand, sizeof *gk, cmp_gid);
    for (uint32_t k = 0, g = 0; k < mo->n_cand; k++) {
        if (k && gk[k] >> 32 != gk[k - 1] >> 32) g++;
        s.group_of[(uint32_t)gk[k]] = g;
    }
    /* candidates that free bytes somewhere over the target */
    for (uint32_t k = 0; k < mo->n_cand; k++) {
        const hbmi_fit_cand *c = &mo->cand[k];
        int useful = 0;
        for (uint32_t t = c->lo; t <= c->hi && t < n && !useful; t++) useful = d[t] > 0;
        if (useful && c->bytes) s.order[s.n_order++] = k;
    }
    ratio_key *rk = hbmi_malloc(sizeof *rk * (s.n_order + 1));
    if (!rk) goto out;
    for (uint32_t j = 0; j < s.n_order; j++) {
        const hbmi_fit_cand *c = &mo->cand[s.order[j]];
        rk[j] = (ratio_key){c->cost_s / (double)c->bytes, c->bytes, c->hi - c->lo, s.order[j]};
    }
    hbmi_qsort(rk, s.n_order, sizeof *rk, cmp_ratio);
    for (uint32_t j = 0; j < s.n_order; j++) s.order[j] = rk[j].k;
    hbmi_free(rk);
    s.deadline_ns = hbmi_now_ns() + (uint64_t)(timeout_s * 1e9);
    dfs(&s, 0, 0);
    if (s.found) {
        ok = 1;
        *proven = !s.timed_out;
    } else {
        memset(s.in_set, 0, mo->n_cand);
        memset(s.group_used, 0, mo->n_cand);
        memset(s.excluded, 0, sizeof *s.excluded * mo->n_cand);
        deepest(&s);
    }
    for (uint32_t k = 0; k < mo->n_cand; k++) mo->cand[k].chosen = s.best_set[k];
out:
    hbmi_free(s.st.mx);
    hbmi_free(s.st.lz);
    hbmi_free(d);
    hbmi_free(s.order);
    hbmi_free(s.group_of);
    hbmi_free(s.group_used);
    hbmi_free(s.excluded);
    hbmi_free(s.in_set);
    hbmi_free(s.best_set);
    hbmi_free(gk);
    return ok;
}
