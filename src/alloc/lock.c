/* lock.c - the allocator handle's biased spin lock (lock.h says how it works). */
#include <sched.h>
#include <time.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "alloc/lock.h"

#if defined(__linux__) && defined(SYS_membarrier)
static long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }
#endif

/* 1 once this process is registered for private expedited barriers, -1 if it cannot be
 * (an old kernel, a seccomp filter), 0 before the first try. Registration is idempotent
 * and inherited by fork, so two threads racing here do no harm. */
static atomic_int barrier_state;

static int barriers_available(void) {
    int s = atomic_load_explicit(&barrier_state, memory_order_acquire);
    if (s) return s > 0;
#if defined(__linux__) && defined(SYS_membarrier)
    long q = membarrier(MEMBARRIER_CMD_QUERY);
    s = q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
            ? 1
            : -1;
#else
    s = -1;
#endif
    atomic_store_explicit(&barrier_state, s, memory_order_release);
    return s > 0;
}

/* A full memory barrier on every thread of the process; 0 if done. */
static int barrier_everywhere(void) {
#if defined(__linux__) && defined(SYS_membarrier)
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return 0;
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return 0;
    if (membarrier(MEMBARRIER_CMD_GLOBAL) == 0) return 0; /* slower, needs no registration */
#endif
    return -1;
}

void hbmi_lock_init(hbmi_lock *l, int bias) {
    atomic_init(&l->held, 0);
    atomic_init(&l->busy, 0);
    atomic_init(&l->owner, (uintptr_t)0);
    atomic_init(&l->biased, bias && barriers_available());
}

static void pause_a_little(unsigned n) {
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

static void take_held(hbmi_lock *l) {
    for (unsigned n = 0;; n++) {
        if (!atomic_load_explicit(&l->held, memory_order_relaxed) &&
            !atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
            return;
        pause_a_little(n);
    }
}

hbmi_lock_how hbmi_lock_acquire_slow(hbmi_lock *l) {
    take_held(l);
    if (HBMI_LIKELY(!atomic_load_explicit(&l->biased, memory_order_relaxed))) return HBMI_LOCK_HELD;
    uintptr_t me = hbmi_thread_self(), owner = atomic_load_explicit(&l->owner, memory_order_relaxed);
    if (owner == 0) { /* the first call: this thread becomes the owner (this call holds the lock) */
        atomic_store_explicit(&l->owner, me, memory_order_relaxed);
        return HBMI_LOCK_HELD;
    }
    /* another thread: revoke the bias, then wait for the owner to leave */
    atomic_store_explicit(&l->biased, 0, memory_order_relaxed);
    if (barrier_everywhere()) {
        /* Registered processes do not get here (the kernel refuses only unregistered
         * ones, and registration survives fork). Without a barrier on the owner's CPU the
         * owner may still be inside unseen: give it time to run out, as a last resort. */
        for (unsigned n = 0; n < 512; n++) pause_a_little(n);
    }
    for (unsigned n = 0; atomic_load_explicit(&l->busy, memory_order_acquire); n++) pause_a_little(n);
    return HBMI_LOCK_HELD;
}
