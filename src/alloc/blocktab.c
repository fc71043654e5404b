/* blocktab.c - live blocks with an address index (see blocktab.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/blocktab.h"
#include "core/internal.h"

void hbmi_blocktab_init(hbmi_blocktab *t) {
    memset(t, 0, sizeof *t);
    hbmi_map_init(&t->index);
}

void hbmi_blocktab_destroy(hbmi_blocktab *t) {
    hbmi_map_destroy(&t->index);
    hbmi_pool_destroy(&t->slots, (void **)&t->blocks);
    hbmi_blocktab_init(t);
}

hbm_status hbmi_blocktab_reserve(hbmi_blocktab *t) {
    hbm_status s = hbmi_map_reserve(&t->index, t->index.count + 1);
    if (!s) s = hbmi_pool_reserve(&t->slots, (void **)&t->blocks, sizeof *t->blocks, 1);
    return s;
}

void hbmi_blocktab_insert(hbmi_blocktab *t, const hbmi_blk *b) {
    uint32_t i = hbmi_pool_take(&t->slots, t->blocks, sizeof *t->blocks, offsetof(hbmi_blk, next_free));
    t->blocks[i] = *b;
    t->blocks[i].next_free = 0;
    hbmi_map_put(&t->index, b->addr, i); /* cannot fail after hbmi_blocktab_reserve */
    t->bytes += b->size;
}

hbmi_blk *hbmi_blocktab_find(const hbmi_blocktab *t, uint64_t addr) {
    uint64_t i;
    return hbmi_map_get(&t->index, addr, &i) ? &t->blocks[i] : NULL;
}

uint64_t hbmi_blocktab_remove(hbmi_blocktab *t, hbmi_blk *b) {
    uint64_t size = b->size;
    hbmi_map_del(&t->index, b->addr, NULL);
    t->bytes -= size;
    b->size = 0;
    hbmi_pool_give(&t->slots, t->blocks, sizeof *t->blocks, offsetof(hbmi_blk, next_free), (uint32_t)(b - t->blocks));
    return size;
}

static int blk_unused(const void *rec) { return ((const hbmi_blk *)rec)->size == 0; }

hbm_status hbmi_blocktab_check(const hbmi_blocktab *t, const char *who) {
    uint64_t sum = 0, n = 0;
    if (hbmi_pool_check(&t->slots, t->blocks, sizeof *t->blocks, offsetof(hbmi_blk, next_free), blk_unused, who)) return HBM_ERR_CORRUPT;
    if (hbmi_map_check(&t->index)) return hbmi_error(HBM_ERR_CORRUPT, "%s: the address index: %s", who, hbm_last_error());
    for (size_t i = 0; i < t->slots.n; i++) {
        if (!t->blocks[i].size) continue;
        uint64_t j;
        if (!hbmi_map_get(&t->index, t->blocks[i].addr, &j) || j != i)
            return hbmi_error(HBM_ERR_CORRUPT, "%s: block %zu at 0x%" PRIx64 " is not indexed", who, i, t->blocks[i].addr);
        sum += t->blocks[i].size;
        n++;
    }
    if (n != t->index.count || sum != t->bytes)
        return hbmi_error(HBM_ERR_CORRUPT, "%s: %" PRIu64 " blocks of %" PRIu64 " bytes, the index says %zu, the total %" PRIu64,
                          who, n, sum, t->index.count, t->bytes);
    return HBM_OK;
}

typedef struct blk_ref {
    uint64_t addr;
    uint32_t idx;
} blk_ref;

static int blk_ref_cmp(const void *x, const void *y) {
    uint64_t a = ((const blk_ref *)x)->addr, b = ((const blk_ref *)y)->addr;
    return a < b ? -1 : a > b;
}

hbm_status hbmi_blocktab_walk(const hbmi_blocktab *t, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    size_t live = t->index.count;
    blk_ref *order = hbmi_malloc((live ? live : 1) * sizeof *order);
    if (!order) return hbmi_error(HBM_ERR_NOMEM, "out of host memory listing %zu blocks", live);
    size_t n = 0;
    for (size_t i = 0; i < t->slots.n && n < live; i++)
        if (t->blocks[i].size) order[n++] = (blk_ref){t->blocks[i].addr, (uint32_t)i};
    hbmi_qsort(order, n, sizeof *order, blk_ref_cmp); /* slots are in reuse order */
    for (size_t k = 0; k < n; k++) {
        const hbmi_blk *b = &t->blocks[order[k].idx];
        hbm_block r = {HBM_BLOCK_REGION, b->addr, b->size, 0, NULL, 0};
        hbm_block l = {HBM_BLOCK_LIVE, b->addr, b->size, b->requested, NULL, b->seq};
        if (fn(user, &r, 0) || fn(user, &l, b->tag_id)) break;
    }
    hbmi_free(order);
    return HBM_OK;
}
