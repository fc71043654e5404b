/* alloc_internal.h - the allocator handle and the policy constructors. */
#ifndef HBM_ALLOC_INTERNAL_H
#define HBM_ALLOC_INTERNAL_H

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "core/internal.h"
#include "hbm/alloc.h"

/* The handle's lock. A held allocator lock guards a few hundred nanoseconds of work, and
 * pthread mutexes cost two locked instructions per call (lock and unlock), each of which
 * waits for every store before it, cache misses included, to complete: at 100,000 live
 * blocks that measured ~70 ns per alloc+free pair. This one takes the lock with one atomic
 * exchange and releases it with a plain release store; a waiter spins briefly, then yields,
 * then sleeps (an allocation that asks the device for memory may hold it for long). */
typedef struct hbmi_lock {
    atomic_int held;
} hbmi_lock;

static inline void hbmi_lock_init(hbmi_lock *l) { atomic_init(&l->held, 0); }

static inline int hbmi_lock_try(hbmi_lock *l) {
    return !atomic_exchange_explicit(&l->held, 1, memory_order_acquire);
}

static inline void hbmi_lock_wait(hbmi_lock *l) {
    for (unsigned n = 0;; n++) {
        if (!atomic_load_explicit(&l->held, memory_order_relaxed) && hbmi_lock_try(l)) return;
        if (n < 64) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else if (n < 256) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000}; /* 20 us */
            nanosleep(&ts, NULL);
        }
    }
}

static inline void hbmi_lock_acquire(hbmi_lock *l) {
    if (HBMI_LIKELY(hbmi_lock_try(l))) return;
    hbmi_lock_wait(l);
}

static inline void hbmi_lock_release(hbmi_lock *l) { atomic_store_explicit(&l->held, 0, memory_order_release); }

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

/* Fill a->oom's snapshot fields (top blocks, map); called with a->lock held. */
void hbmi_oom_snapshot(hbm_allocator *a);
void hbmi_oom_record_clear(hbmi_oom_record *r);

struct hbm_allocator {
    const hbm_allocator_ops *ops;
    void *self;
    hbm_device *dev;
    hbm_config cfg;
    hbmi_lock lock;
    hbmi_tagtab *tags;
    hbmi_oom_record oom;
    hbm_oom_fn oom_fn;
    void *oom_user;
};

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
/* The tracking adaptor (src/trace/recorder.c): a policy that records every call of the
 * inner one into path. On failure the inner policy is untouched (the caller destroys it). */
hbm_status hbmi_recorder_create(const hbm_allocator_ops *iops, void *iself, hbm_device *dev, const char *path,
                                unsigned flags, const hbm_allocator_ops **ops_out, void **self_out);

/* Record a failed allocation for the OOM report, as hbm_alloc does; for callers that
 * drive a->ops directly while owning the handle alone (trace replay). */
void hbmi_allocator_note_oom(hbm_allocator *a, uint64_t size, uint32_t tag_id);

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
