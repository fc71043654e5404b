/* blocktab.h - the live blocks of a policy that leaves placement to someone else (the
 * device for platform, the driver's pool for cuda_async): records with a free list of
 * slots and an address index, for frees, stats checks, walks and the OOM report. */
#ifndef HBM_ALLOC_BLOCKTAB_H
#define HBM_ALLOC_BLOCKTAB_H

#include "alloc/alloc_internal.h"

typedef struct hbmi_blk {
    uint64_t addr, size, requested, seq; /* size 0: an unused slot */
    uint32_t tag_id;
    uint32_t next_free; /* unused slots: the next one, index + 1 */
} hbmi_blk;

typedef struct hbmi_blocktab {
    hbmi_map index;   /* addr -> slot */
    hbmi_blk *blocks; /* slots of `slots` */
    hbmi_pool slots;
    uint64_t bytes;     /* sum of the live sizes */
} hbmi_blocktab;

void hbmi_blocktab_init(hbmi_blocktab *t);
void hbmi_blocktab_destroy(hbmi_blocktab *t);
/* Make room for one insert, so that the insert after a device allocation cannot fail. */
hbm_status hbmi_blocktab_reserve(hbmi_blocktab *t);
/* Record a live block (b->size > 0); needs a successful reserve first. */
void hbmi_blocktab_insert(hbmi_blocktab *t, const hbmi_blk *b);
/* The live block at addr, or NULL. */
hbmi_blk *hbmi_blocktab_find(const hbmi_blocktab *t, uint64_t addr);
/* Forget the live block b (from find); returns its size. */
uint64_t hbmi_blocktab_remove(hbmi_blocktab *t, hbmi_blk *b);
/* Pool, index and byte count consistent with the records; who names the policy in messages. */
hbm_status hbmi_blocktab_check(const hbmi_blocktab *t, const char *who);
/* Each live block as a region holding one live block, in address order. */
hbm_status hbmi_blocktab_walk(const hbmi_blocktab *t, int (*fn)(void *, const hbm_block *, uint32_t), void *user);

#define HBMI_BLOCKTAB_FOREACH(t, b) \
    for (hbmi_blk *b = (t)->blocks, *b##_end_ = (t)->slots.n ? (t)->blocks + (t)->slots.n : (t)->blocks; b != b##_end_; b++) \
        if (b->size) /* (no arithmetic on a NULL table: UB even with 0) */

#endif
