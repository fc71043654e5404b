/* oset.c - the ordered set's invariant walker (see core/oset.h). */
#include <inttypes.h>

#include "core/internal.h"
#include "core/oset.h"

static const hbmi_oset_link *link_of(const void *b, size_t size, size_t link, uint32_t i1) {
    return (const hbmi_oset_link *)((const char *)b + (size_t)(i1 - 1) * size + link);
}

hbm_status hbmi_oset_check_(const void *b, size_t size, size_t link, size_t nrec, const hbmi_oset *s,
                            int (*cmp)(const void *, const void *), const char *who) {
    if (s->n > nrec)
        return hbmi_error(HBM_ERR_CORRUPT, "%s: the set counts %" PRIu32 " records of %zu", who, s->n, nrec);
    if (!s->root) {
        if (s->n) return hbmi_error(HBM_ERR_CORRUPT, "%s: an empty set that counts %" PRIu32 " records", who, s->n);
        return HBM_OK;
    }
    /* in order with an explicit stack; every record pushed counts, so a walk that meets more
     * records than the count (a cycle, a record reached twice) stops there */
    uint32_t *st = hbmi_malloc(((size_t)s->n + 1) * sizeof *st);
    if (!st) return hbmi_error(HBM_ERR_NOMEM, "%s: out of host memory checking a set", who);
    hbm_status rc = HBM_OK;
    size_t sp = 0, seen = 0;
    uint32_t prev = 0, t = s->root, parent = 0;
    for (;;) {
        while (t) { /* down the left spine; parent is t's parent */
            if (t > nrec) {
                rc = hbmi_error(HBM_ERR_CORRUPT, "%s: a link names record %" PRIu32 " of %zu", who, t - 1, nrec);
                goto out;
            }
            if (++seen > s->n) {
                rc = hbmi_error(HBM_ERR_CORRUPT, "%s: more than the %" PRIu32 " records counted are linked (a cycle?)",
                                who, s->n);
                goto out;
            }
            if (parent && hbmi_oset_prio(t) > hbmi_oset_prio(parent)) {
                rc = hbmi_error(HBM_ERR_CORRUPT, "%s: record %" PRIu32 " has a priority above its parent %" PRIu32 "'s",
                                who, t - 1, parent - 1);
                goto out;
            }
            st[sp++] = t;
            parent = t;
            t = link_of(b, size, link, t)->l;
        }
        if (!sp) break;
        t = st[--sp];
        if (prev) {
            int c = cmp((const char *)b + (size_t)(prev - 1) * size, (const char *)b + (size_t)(t - 1) * size);
            if (c > 0 || (c == 0 && prev >= t)) {
                rc = hbmi_error(HBM_ERR_CORRUPT, "%s: record %" PRIu32 " is out of order after record %" PRIu32, who,
                                t - 1, prev - 1);
                goto out;
            }
        }
        prev = t;
        parent = t;
        t = link_of(b, size, link, t)->r;
    }
    if (seen != s->n)
        rc = hbmi_error(HBM_ERR_CORRUPT, "%s: %zu records linked, %" PRIu32 " counted", who, seen, s->n);
out:
    hbmi_free(st);
    return rc;
}
