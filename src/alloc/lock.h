/* src/alloc/lock.h - the allocator handle's lock (lock.c). */
#ifndef HBM_ALLOC_LOCK_H
#define HBM_ALLOC_LOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/internal.h"

/* The handle's lock: a spin lock, biased toward the first thread that takes it.
 *
 * A held allocator lock guards a few hundred nanoseconds of work, and a locked instruction
 * waits for every load and store before it, cache misses included, to complete, so the
 * misses of one call cannot overlap the next call's: at 100,000 live blocks one atomic
 * exchange per call cost bfc 7-86 ns per alloc+free pair of 77-194 (median 12 ns,
 * bench_alloc), pthread mutexes (two locked instructions per call) ~70 ns. Most programs allocate from one thread, so the lock is
 * biased, as HotSpot's object locks were: the first thread to take it becomes its owner
 * and enters with two plain stores (busy = 1, then 0 on leaving) and a plain load of
 * `biased`, no locked instruction. The first call from any other thread revokes the bias
 * for good, under the spin lock: it clears `biased`, makes every thread of the process
 * execute a full memory barrier (Linux membarrier, private expedited, registered once per
 * process), then waits for busy to be 0. After that barrier either the owner's busy = 1 is
 * visible to the revoker, which waits for the owner to leave, or the owner's load of
 * `biased` that follows its store sees 0, and it takes the spin lock like everyone else
 * (the asymmetric Dekker protocol). Where membarrier is missing the lock is never biased.
 * The spin lock: taken with one atomic exchange, released with a release store; a waiter
 * spins briefly, then yields, then sleeps (an allocation that asks the device for memory
 * may hold it for long). */
typedef struct hbmi_lock {
    atomic_int held;        /* the spin lock */
    atomic_int biased;      /* the owner may enter without it */
    atomic_int busy;        /* the owner is inside without it */
    atomic_uintptr_t owner; /* the owner's thread pointer, 0 before the first call */
} hbmi_lock;

/* How a call entered, for the release. */
typedef enum { HBMI_LOCK_HELD = 0, HBMI_LOCK_BIASED = 1 } hbmi_lock_how;

/* bias: 1 to bias the lock toward its first user (when the process supports it). */
void hbmi_lock_init(hbmi_lock *l, int bias);
hbmi_lock_how hbmi_lock_acquire_slow(hbmi_lock *l);

/* A number unique to the calling thread among live threads: its thread pointer. */
static inline uintptr_t hbmi_thread_self(void) {
#if (defined(__x86_64__) || defined(__aarch64__)) && (defined(__clang__) || __GNUC__ >= 11)
    return (uintptr_t)__builtin_thread_pointer();
#else
    return (uintptr_t)pthread_self();
#endif
}

/* 1 if the calling thread entered as the owner of a biased lock (release with
 * HBMI_LOCK_BIASED), 0 if it did not enter. */
static inline int hbmi_lock_enter_biased(hbmi_lock *l) {
    if (HBMI_LIKELY(atomic_load_explicit(&l->owner, memory_order_relaxed) == hbmi_thread_self())) {
        atomic_store_explicit(&l->busy, 1, memory_order_relaxed);
        /* no fence here: the revoker's membarrier orders this store before the load below */
        atomic_signal_fence(memory_order_seq_cst);
        if (HBMI_LIKELY(atomic_load_explicit(&l->biased, memory_order_acquire))) return 1;
        atomic_store_explicit(&l->busy, 0, memory_order_release);
    }
    return 0;
}

static inline hbmi_lock_how hbmi_lock_acquire(hbmi_lock *l) {
    return hbmi_lock_enter_biased(l) ? HBMI_LOCK_BIASED : hbmi_lock_acquire_slow(l);
}

static inline void hbmi_lock_release(hbmi_lock *l, hbmi_lock_how how) {
    atomic_store_explicit(how == HBMI_LOCK_BIASED ? &l->busy : &l->held, 0, memory_order_release);
}

#endif
