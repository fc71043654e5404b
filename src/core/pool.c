/* pool.c - a pool of records with a list of given-back slots (see core/internal.h). */
#include <string.h>

#include "core/internal.h"

hbm_status hbmi_pool_reserve(hbmi_pool *p, void **v, size_t size, size_t extra) {
    /* takes use the given-back slots (n - used of them) first, then new ones: after
     * `extra` takes, n is at most max(n, used + extra) */
    if (p->used + extra <= p->cap) return HBM_OK;
    return hbmi_grow(v, &p->cap, p->used + extra, size);
}

void hbmi_pool_destroy(hbmi_pool *p, void **v) {
    hbmi_free(*v);
    *v = NULL;
    memset(p, 0, sizeof *p);
}

hbm_status hbmi_pool_check(const hbmi_pool *p, const void *v, size_t size, size_t link, int (*is_free)(const void *rec),
                           const char *who) {
    if (p->n > p->cap || p->used > p->n || p->n > UINT32_MAX)
        return hbmi_error(HBM_ERR_CORRUPT, "%s: pool of %zu slots, %zu handed out, %zu in use", who, p->cap, p->n, p->used);
    size_t given = p->n - p->used, len = 0;
    /* a list longer than the given-back count is cut at that length: a cycle ends there */
    for (uint32_t h = p->free_head; h; h = hbmi_pool_link_(v, size, link, h - 1)) {
        if (h > p->n) return hbmi_error(HBM_ERR_CORRUPT, "%s: the free list names slot %u of %zu", who, h - 1, p->n);
        if (++len > given)
            return hbmi_error(HBM_ERR_CORRUPT, "%s: the free list is longer than the %zu given-back slots (a cycle?)", who, given);
        if (is_free && !is_free((const char *)v + (size_t)(h - 1) * size))
            return hbmi_error(HBM_ERR_CORRUPT, "%s: slot %u is on the free list but in use", who, h - 1);
    }
    if (len != given) return hbmi_error(HBM_ERR_CORRUPT, "%s: %zu slots on the free list, %zu given back", who, len, given);
    if (is_free) { /* len distinct free slots are listed (no cycle): no other may be free */
        size_t nfree = 0;
        for (size_t i = 0; i < p->n; i++) nfree += is_free((const char *)v + i * size) != 0;
        if (nfree != given)
            return hbmi_error(HBM_ERR_CORRUPT, "%s: %zu slots marked unused, %zu on the free list", who, nfree, given);
    }
    return HBM_OK;
}
