/* src/core/oset.h - the one ordered set of libhbm: an intrusive treap over records that
 * live in the caller's array.
 *
 * Records: the caller's array b[] of some type T, a record named by its index + 1 (0 =
 * none), with an hbmi_oset_link (the two children) embedded in it; the set itself is a
 * root and a count (hbmi_oset). A record may be in one set per link it embeds.
 * Order: the caller's three-way compare of two records (an inline function, so that each
 * caller's compare is inlined into the walks), then the index: records with equal keys
 * are allowed and sit in the order of their indices, so the order is total and every
 * operation names one place.
 * Balance: a treap whose priority is a hash of the index (a parent's is never below its
 * children's), deterministic: the shape depends on the keys and indices only, never on
 * addresses or on the run. Insert splits the subtree at the new key under the new record,
 * remove merges the record's two subtrees in its place: no recursion, no parent links,
 * O(log n) expected. next/prev walk down from the root (O(log n)); a caller that wants all
 * records in order drains them (NAME_drain) or walks next.
 * Summaries: HBMI_OSET_DEFINE_AUG takes fix(b, i1), which recomputes record i1's summary
 * from its children's (an interval tree's greatest end below, say; test_oset checks it);
 * insert and remove call it on every record whose subtree changed, deepest first.
 * hbmi_oset_check walks the invariants (in the manner of tlsf_check): indices in range,
 * the in-order walk strictly increasing, priorities never above the parent's, as many
 * records as counted (a cycle or a shared child makes the walk longer and is caught). */
#ifndef HBM_CORE_OSET_H
#define HBM_CORE_OSET_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/status.h"

typedef struct hbmi_oset_link {
    uint32_t l, r; /* children, index + 1; 0 = none */
} hbmi_oset_link;

typedef struct hbmi_oset {
    uint32_t root; /* index + 1; 0 = empty */
    uint32_t n;    /* records held */
} hbmi_oset;

/* A record's priority: a hash of its index + 1 (murmur3's 32-bit finalizer after a
 * multiply by the golden ratio). */
static inline uint32_t hbmi_oset_prio(uint32_t i1) {
    uint32_t x = i1 * 0x9e3779b1u;
    x ^= x >> 15;
    x *= 0x85ebca6bu;
    return x ^ (x >> 13);
}

/* The walker behind NAME_check (not for callers): the set s over nrec records of `size`
 * bytes at b, links at offset `link`, ordered by cmp. HBM_ERR_CORRUPT with a message that
 * starts with who and names the record when an invariant fails; HBM_ERR_NOMEM when the
 * walk's stack cannot be had. */
hbm_status hbmi_oset_check_(const void *b, size_t size, size_t link, size_t nrec, const hbmi_oset *s,
                            int (*cmp)(const void *, const void *), const char *who);

/* How many records a fix pass keeps on its stack; a longer path (a degenerate tree) is
 * fixed by walks from its top, deepest first: slower, never wrong. */
#define HBMI_OSET_FIXSTACK 64

/* HBMI_OSET_DEFINE(NAME, T, LINK, CMP): static inline functions NAME_... over records of
 * type T whose hbmi_oset_link member is LINK, ordered by int CMP(const T *, const T *)
 * (< 0, 0, > 0; then by index):
 *   void     NAME_insert(T *b, hbmi_oset *s, uint32_t i)   record b[i] (not in s) joins s
 *   void     NAME_remove(T *b, hbmi_oset *s, uint32_t i)   record b[i] (in s) leaves s
 *   uint32_t NAME_first(const T *b, const hbmi_oset *s)    index + 1 of the least; 0: empty
 *   uint32_t NAME_last(const T *b, const hbmi_oset *s)     index + 1 of the greatest
 *   uint32_t NAME_next(const T *b, const hbmi_oset *s, uint32_t i1)  the record after i1 (in s)
 *   uint32_t NAME_prev(const T *b, const hbmi_oset *s, uint32_t i1)  the record before it
 *   uint32_t NAME_lower_bound(const T *b, const hbmi_oset *s, const T *key)
 *            the first record not less than *key (CMP(rec, key) >= 0), a key being any T
 *            whose compared fields are set; 0: none
 *   uint32_t NAME_upper_bound(..., const T *key)   the first record greater (CMP > 0)
 *   uint32_t NAME_floor(..., const T *key)         the last record not greater (CMP <= 0)
 *   int      NAME_has(const T *b, const hbmi_oset *s, uint32_t i) whether record b[i] is in s
 *   size_t   NAME_drain(T *b, hbmi_oset *s, uint32_t *out)  the indices in order into out
 *            (s->n of them), and s is empty (the links are left as the drain made them)
 *   hbm_status NAME_check(const T *b, size_t nrec, const hbmi_oset *s, const char *who)
 * HBMI_OSET_DEFINE_AUG(NAME, T, LINK, CMP, FIX) adds void FIX(T *b, uint32_t i1). */
/* generated functions a caller does not use are no warning (clang warns of unused static
 * inline functions defined in a .c file, as the macro's are) */
#if defined(__GNUC__)
#define HBMI_OSET_FN_ static inline __attribute__((unused))
#else
#define HBMI_OSET_FN_ static inline
#endif

#define HBMI_OSET_DEFINE(NAME, T, LINK, CMP) HBMI_OSET_DEFINE_(NAME, T, LINK, CMP, NAME##_nofix_, 0)
#define HBMI_OSET_DEFINE_AUG(NAME, T, LINK, CMP, FIX) HBMI_OSET_DEFINE_(NAME, T, LINK, CMP, FIX, 1)

#define HBMI_OSET_DEFINE_(NAME, T, LINK, CMP, FIX, AUG)                                                   \
    HBMI_OSET_FN_ void NAME##_nofix_(T *b, uint32_t i1) {                                                \
        (void)b, (void)i1;                                                                                \
    }                                                                                                     \
    /* record x (index + 1) before record y in the set's order */                                        \
    HBMI_OSET_FN_ int NAME##_before_(const T *b, uint32_t x, uint32_t y) {                               \
        int c = CMP(&b[x - 1], &b[y - 1]);                                                                \
        return c < 0 || (c == 0 && x < y);                                                                \
    }                                                                                                     \
    /* the next record on a path from t: 0 toward x (x itself ends it), 1 right, 2 left, 3 the    \
     * zip of a merge around the removed x (a record before x came from the left: go right) */       \
    HBMI_OSET_FN_ uint32_t NAME##_step_(const T *b, uint32_t t, uint32_t x, int mode) {                  \
        const hbmi_oset_link *k = &b[t - 1].LINK;                                                         \
        if (mode == 1) return k->r;                                                                       \
        if (mode == 2) return k->l;                                                                       \
        if (mode == 0 && t == x) return 0;                                                                \
        return NAME##_before_(b, x, t) ? k->l : k->r;                                                     \
    }                                                                                                     \
    /* FIX every record on the path from top until stop (exclusive), deepest first */                   \
    HBMI_OSET_FN_ void NAME##_fixpath_(T *b, uint32_t top, uint32_t stop, uint32_t x, int mode) {        \
        uint32_t st[HBMI_OSET_FIXSTACK], n = 0, t = top;                                                  \
        while (t && t != stop && n < HBMI_OSET_FIXSTACK) st[n++] = t, t = NAME##_step_(b, t, x, mode);    \
        for (uint32_t end = stop, below = t; below && below != stop;) { /* past the stack */             \
            uint32_t u = below, v;                                                                        \
            while ((v = NAME##_step_(b, u, x, mode)) && v != end) u = v;                                  \
            FIX(b, u);                                                                                    \
            if (u == below) break;                                                                        \
            end = u;                                                                                      \
        }                                                                                                 \
        while (n) FIX(b, st[--n]);                                                                        \
    }                                                                                                     \
    HBMI_OSET_FN_ void NAME##_insert(T *b, hbmi_oset *s, uint32_t i) {                                    \
        T *x = &b[i];                                                                                     \
        uint32_t i1 = i + 1, pr = hbmi_oset_prio(i1), *link = &s->root;                                  \
        while (*link && hbmi_oset_prio(*link) > pr)                                                       \
            link = NAME##_before_(b, i1, *link) ? &b[*link - 1].LINK.l : &b[*link - 1].LINK.r;            \
        uint32_t t = *link, *l = &x->LINK.l, *r = &x->LINK.r; /* split t at x's key under x */           \
        while (t) {                                                                                       \
            hbmi_oset_link *y = &b[t - 1].LINK;                                                           \
            if (NAME##_before_(b, t, i1)) *l = t, l = &y->r, t = y->r;                                    \
            else *r = t, r = &y->l, t = y->l;                                                             \
        }                                                                                                 \
        *l = *r = 0;                                                                                      \
        *link = i1;                                                                                       \
        s->n++;                                                                                           \
        if (AUG) {                                                                                        \
            NAME##_fixpath_(b, x->LINK.l, 0, 0, 1);                                                       \
            NAME##_fixpath_(b, x->LINK.r, 0, 0, 2);                                                       \
            NAME##_fixpath_(b, s->root, 0, i1, 0);                                                        \
        }                                                                                                 \
    }                                                                                                     \
    HBMI_OSET_FN_ void NAME##_remove(T *b, hbmi_oset *s, uint32_t i) {                                    \
        uint32_t i1 = i + 1, *link = &s->root;                                                            \
        while (*link != i1) link = NAME##_before_(b, i1, *link) ? &b[*link - 1].LINK.l : &b[*link - 1].LINK.r; \
        uint32_t *at = link, l = b[i].LINK.l, r = b[i].LINK.r; /* merge x's subtrees in its place */       \
        while (l && r) {                                                                                  \
            if (hbmi_oset_prio(l) > hbmi_oset_prio(r)) *link = l, link = &b[l - 1].LINK.r, l = *link;     \
            else *link = r, link = &b[r - 1].LINK.l, r = *link;                                           \
        }                                                                                                 \
        *link = l ? l : r;                                                                                \
        s->n--;                                                                                           \
        if (AUG) {                                                                                        \
            NAME##_fixpath_(b, *at, 0, i1, 3);                                                            \
            if (at != &s->root) NAME##_fixpath_(b, s->root, *at, i1, 0);                          \
        }                                                                                                 \
    }                                                                                                     \
    HBMI_OSET_FN_ int NAME##_has(const T *b, const hbmi_oset *s, uint32_t i) {                           \
        uint32_t i1 = i + 1, t = s->root;                                                                 \
        while (t && t != i1) t = NAME##_before_(b, i1, t) ? b[t - 1].LINK.l : b[t - 1].LINK.r;            \
        return t != 0;                                                                                    \
    }                                                                                                     \
    HBMI_OSET_FN_ uint32_t NAME##_first(const T *b, const hbmi_oset *s) {                                \
        uint32_t t = s->root;                                                                             \
        if (t)                                                                                            \
            while (b[t - 1].LINK.l) t = b[t - 1].LINK.l;                                                  \
        return t;                                                                                         \
    }                                                                                                     \
    HBMI_OSET_FN_ uint32_t NAME##_last(const T *b, const hbmi_oset *s) {                                 \
        uint32_t t = s->root;                                                                             \
        if (t)                                                                                            \
            while (b[t - 1].LINK.r) t = b[t - 1].LINK.r;                                                  \
        return t;                                                                                         \
    }                                                                                                     \
    HBMI_OSET_FN_ uint32_t NAME##_next(const T *b, const hbmi_oset *s, uint32_t i1) {                    \
        uint32_t t = b[i1 - 1].LINK.r, best = 0;                                                          \
        if (t) {                                                                                          \
            while (b[t - 1].LINK.l) t = b[t - 1].LINK.l;                                                  \
            return t;                                                                                     \
        }                                                                                                 \
        for (t = s->root; t != i1;)                                                                       \
            if (NAME##_before_(b, i1, t)) best = t, t = b[t - 1].LINK.l;                                  \
            else t = b[t - 1].LINK.r;                                                                     \
        return best;                                                                                      \
    }                                                                                                     \
    HBMI_OSET_FN_ uint32_t NAME##_prev(const T *b, const hbmi_oset *s, uint32_t i1) {                    \
        uint32_t t = b[i1 - 1].LINK.l, best = 0;                                                          \
        if (t) {                                                                                          \
            while (b[t - 1].LINK.r) t = b[t - 1].LINK.r;                                                  \
            return t;                                                                                     \
        }                                                                                                 \
        for (t = s->root; t != i1;)                                                                       \
            if (NAME##_before_(b, t, i1)) best = t, t = b[t - 1].LINK.r;                                  \
            else t = b[t - 1].LINK.l;                                                                     \
        return best;                                                                                      \
    }                                                                                                     \
    HBMI_OSET_FN_ uint32_t NAME##_lower_bound(const T *b, const hbmi_oset *s, const T *key) {             \
        uint32_t t = s->root, best = 0;                                                                   \
        while (t)                                                                                         \
            if (CMP(&b[t - 1], key) >= 0) best = t, t = b[t - 1].LINK.l;                                  \
            else t = b[t - 1].LINK.r;                                                                     \
        return best;                                                                                      \
    }                                                                                                     \
    HBMI_OSET_FN_ uint32_t NAME##_upper_bound(const T *b, const hbmi_oset *s, const T *key) {             \
        uint32_t t = s->root, best = 0;                                                                   \
        while (t)                                                                                         \
            if (CMP(&b[t - 1], key) > 0) best = t, t = b[t - 1].LINK.l;                                   \
            else t = b[t - 1].LINK.r;                                                                     \
        return best;                                                                                      \
    }                                                                                                     \
    HBMI_OSET_FN_ uint32_t NAME##_floor(const T *b, const hbmi_oset *s, const T *key) {                  \
        uint32_t t = s->root, best = 0;                                                                   \
        while (t)                                                                                         \
            if (CMP(&b[t - 1], key) <= 0) best = t, t = b[t - 1].LINK.r;                                  \
            else t = b[t - 1].LINK.l;                                                                     \
        return best;                                                                                      \
    }                                                                                                     \
    /* the tree becomes a list through r by right rotations, then is read off */                         \
    HBMI_OSET_FN_ size_t NAME##_drain(T *b, hbmi_oset *s, uint32_t *out) {                                \
        uint32_t *link = &s->root;                                                                        \
        while (*link) {                                                                                   \
            hbmi_oset_link *y = &b[*link - 1].LINK;                                                       \
            if (y->l) {                                                                                   \
                uint32_t l = y->l;                                                                        \
                y->l = b[l - 1].LINK.r;                                                                   \
                b[l - 1].LINK.r = *link;                                                                  \
                *link = l;                                                                                \
            } else {                                                                                      \
                link = &y->r;                                                                             \
            }                                                                                             \
        }                                                                                                 \
        size_t n = 0;                                                                                     \
        for (uint32_t t = s->root; t; t = b[t - 1].LINK.r) out[n++] = t - 1;                              \
        s->root = 0, s->n = 0;                                                                            \
        return n;                                                                                         \
    }                                                                                                     \
    HBMI_OSET_FN_ int NAME##_cmpv_(const void *x, const void *y) { return CMP((const T *)x, (const T *)y); } \
    HBMI_OSET_FN_ hbm_status NAME##_check(const T *b, size_t nrec, const hbmi_oset *s, const char *who) { \
        return hbmi_oset_check_(b, sizeof *b, offsetof(T, LINK), nrec, s, NAME##_cmpv_, who);             \
    }

#endif
