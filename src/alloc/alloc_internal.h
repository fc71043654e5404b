/* alloc_internal.h - the allocator handle and the policy constructors, read only inside
 * src/alloc; a neighbour reads alloc_policy.h. */
#ifndef HBM_ALLOC_INTERNAL_H
#define HBM_ALLOC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "alloc/alloc_policy.h"
#include "alloc/lock.h"
#include "core/internal.h"
#include "hbm/alloc.h"

#define HBMI_OOM_MAP_WIDTH 100

/* A live block at the moment of a failure (tag strings belong to the tag table). */
typedef struct hbmi_oom_live {
    uint64_t addr, size, requested, seq;
    hbm_tag tag;
    int has_tag;
} hbmi_oom_live;

/* What the allocator looked like when an allocation failed for lack of memory. */
typedef struct hbmi_oom_record {
    int valid;
    uint64_t requested;
    uint64_t rounded;
    uint32_t tag_id;
    hbm_stats stats;
    uint64_t dev_free;   /* device free memory at the failure */
    uint64_t dev_total;
    uint64_t count;      /* how many OOMs so far */
    /* taken at the failure, so the report shows that moment even if blocks are freed
     * before it is written: the largest live blocks and the occupancy map */
    hbmi_oom_live *top;  /* ntop largest live blocks, largest first (NULL if no memory) */
    size_t ntop, nlive;
    uint64_t span;       /* reserved bytes, regions laid end to end */
    char map[HBMI_OOM_MAP_WIDTH + 1];
} hbmi_oom_record;

/* Fill a->oom's snapshot fields (top blocks, map); called with a->lock held (oom_state.c;
 * the report that reads it is src/alloc/oom_report.c). */
void hbmi_oom_snapshot(hbm_allocator *a);
void hbmi_oom_record_clear(hbmi_oom_record *r);

struct hbm_allocator {
    const hbm_allocator_ops *ops;
    void *self;
    hbm_device *dev;
    hbm_config cfg;
    hbmi_lock lock;
    /* ops->alloc and ops->free when the policy has no stream forms, else NULL: what
     * hbm_alloc and hbm_free call on their usual path */
    hbm_status (*plain_alloc)(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t *addr_out);
    hbm_status (*plain_free)(void *self, uint64_t addr);
    hbmi_tagtab *tags;
    hbmi_oom_record oom;
    hbm_oom_fn oom_fn;
    void *oom_user;
    int ordinal; /* the CUDA device number PyTorch's words name ("GPU 1"): 0 unless told */
    int quiet;   /* OOMs without their message (hbmi_allocator_set_quiet) */
};
/* Each policy's part of it: sets its own flag and returns 1 when a runs that policy, else 0. */
int hbmi_bfc_set_quiet(hbm_allocator *a, int on);
int hbmi_platform_set_quiet(hbm_allocator *a, int on);
int hbmi_torch_set_quiet(hbm_allocator *a, int on);
int hbmi_async_set_quiet(hbm_allocator *a, int on);
int hbmi_async_cuda_set_quiet(hbm_allocator *a, int on);
int hbmi_vmm_set_quiet(hbm_allocator *a, int on);
/* Policy constructors: bytes_limit already resolved from cfg and the device. */
typedef hbm_status (*hbmi_policy_create_fn)(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                                            const hbm_allocator_ops **ops, void **self);
hbm_status hbmi_bfc_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                           const hbm_allocator_ops **ops, void **self);
hbm_status hbmi_platform_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                                const hbm_allocator_ops **ops, void **self);

hbm_status hbmi_async_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                             const hbm_allocator_ops **ops, void **self);
hbm_status hbmi_async_cuda_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                                  const hbm_allocator_ops **ops, void **self);
hbm_status hbmi_torch_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                             const hbm_allocator_ops **ops, void **self);
hbm_status hbmi_vmm_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                           const hbm_allocator_ops **ops, void **self);
/* The policy's bytes_in_use counter as it keeps it (what its stats would say), for a
 * replay that checks its peak after every allocation without a stats call; NULL for a
 * policy that computes it only in its stats. One per policy (bfc, platform, torch,
 * cuda_async's model) and hbmi_policy_in_use, which asks each. */
const uint64_t *hbmi_bfc_in_use(const hbm_allocator *a);
const uint64_t *hbmi_platform_in_use(const hbm_allocator *a);
const uint64_t *hbmi_torch_in_use(const hbm_allocator *a);
const uint64_t *hbmi_async_in_use(const hbm_allocator *a);
/* Update peak fields after a change of the current ones. */
static inline void hbmi_stats_update_peaks(hbm_stats *s) {
    if (s->bytes_in_use > s->peak_bytes_in_use) s->peak_bytes_in_use = s->bytes_in_use;
    if (s->bytes_reserved > s->peak_bytes_reserved) s->peak_bytes_reserved = s->bytes_reserved;
    if (s->pool_bytes > s->peak_pool_bytes) s->peak_pool_bytes = s->pool_bytes;
}
static inline void hbmi_stats_reset_peaks(hbm_stats *s) {
    s->peak_bytes_in_use = s->bytes_in_use;
    s->peak_bytes_reserved = s->bytes_reserved;
    s->peak_pool_bytes = s->pool_bytes;
}

#endif
