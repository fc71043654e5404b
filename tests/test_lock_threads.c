/* test_lock_threads.c - the allocator handle's biased lock (src/alloc/lock.c): the first
 * thread enters without a locked instruction; a second thread revokes the bias while the
 * owner is inside, between calls or gone, and from then on both exclude each other.
 * Mutual exclusion is checked by a plain counter and an "inside" marker that two threads
 * in at once would break; under TSan (make test-tsan) a missing happens-before edge
 * between the owner's biased sections and the others' is reported as a race. */
#include <pthread.h>
#include <sched.h>

#include "alloc/alloc_internal.h"
#include "test.h"

#ifdef __SANITIZE_THREAD__
#define ROUNDS 40
#else
#define ROUNDS 300
#endif
#define ITER 4000

typedef struct shared {
    hbmi_lock lock;
    uint64_t counter; /* plain: guarded by the lock */
    volatile int inside; /* not atomic: the id of the thread inside, 0 when none */
    int overlaps;     /* plain: times a thread found another inside */
    atomic_int go;    /* the owner has done its first calls: the other may start */
    int biased_calls; /* calls the owner made biased (written by the owner only) */
} shared;

static void section(shared *s, int id) {
    hbmi_lock_how how = hbmi_lock_acquire(&s->lock);
    if (s->inside) s->overlaps++;
    s->inside = id;
    s->counter++;
    /* long enough that a thread let in by mistake would land inside it */
    for (volatile int k = 0; k < 200; k++)
        if (s->inside != id) s->overlaps++;
    s->inside = 0;
    if (id == 1 && how == HBMI_LOCK_BIASED) s->biased_calls++;
    hbmi_lock_release(&s->lock, how);
}

typedef struct role {
    shared *s;
    int id;
    int start_after; /* owner: signal after this many calls; other: unused */
    int pause;       /* owner: wait for the other to finish before its remaining calls */
    atomic_int *done;
} role;

static void *owner(void *arg) {
    role *r = arg;
    for (int i = 0; i < ITER; i++) {
        if (i == r->start_after) atomic_store(&r->s->go, 1);
        if (i == r->start_after && r->pause)
            while (!atomic_load(r->done)) sched_yield();
        section(r->s, r->id);
    }
    return NULL;
}

static void *other(void *arg) {
    role *r = arg;
    while (!atomic_load(&r->s->go)) sched_yield();
    for (int i = 0; i < ITER; i++) section(r->s, r->id);
    atomic_store(r->done, 1);
    return NULL;
}

/* Two threads, the owner ahead by start_after calls; with pause the owner waits (between
 * calls) until the other has finished. */
static void race(int start_after, int pause, int *biased_seen) {
    shared s;
    memset(&s, 0, sizeof s);
    hbmi_lock_init(&s.lock, 1);
    int bias_possible = atomic_load(&s.lock.biased);
    atomic_init(&s.go, 0);
    atomic_int done;
    atomic_init(&done, 0);
    role a = {&s, 1, start_after, pause, &done}, b = {&s, 2, 0, 0, &done};
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, owner, &a) == 0);
    CHECK(pthread_create(&tb, NULL, other, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ_U64(s.counter, 2 * ITER);
    CHECK_EQ_U64(s.overlaps, 0);
    CHECK_EQ_U64(atomic_load(&s.lock.biased), 0); /* revoked for good, or never biased */
    CHECK_EQ_U64(atomic_load(&s.lock.busy), 0);
    CHECK_EQ_U64(atomic_load(&s.lock.held), 0);
    if (!bias_possible) CHECK_EQ_U64(s.biased_calls, 0);
    *biased_seen += s.biased_calls > 0;
}

static void test_owner_enters_biased(void) {
    hbmi_lock l;
    hbmi_lock_init(&l, 1);
    int bias = atomic_load(&l.biased);
    fprintf(stderr, "     membarrier: %s\n", bias ? "available, the lock is biased" : "missing, never biased");
    CHECK(hbmi_lock_acquire(&l) == HBMI_LOCK_HELD); /* the first call makes the owner */
    hbmi_lock_release(&l, HBMI_LOCK_HELD);
    for (int i = 0; i < 100; i++) {
        hbmi_lock_how how = hbmi_lock_acquire(&l);
        CHECK(how == (bias ? HBMI_LOCK_BIASED : HBMI_LOCK_HELD));
        CHECK_EQ_U64(atomic_load(&l.held), how == HBMI_LOCK_HELD);
        CHECK_EQ_U64(atomic_load(&l.busy), how == HBMI_LOCK_BIASED);
        hbmi_lock_release(&l, how);
    }
    CHECK_EQ_U64(atomic_load(&l.busy) + atomic_load(&l.held), 0);
}

static void test_unbiased_lock(void) {
    hbmi_lock l;
    hbmi_lock_init(&l, 0);
    for (int i = 0; i < 10; i++) {
        hbmi_lock_how how = hbmi_lock_acquire(&l);
        CHECK(how == HBMI_LOCK_HELD);
        hbmi_lock_release(&l, how);
    }
}

static void test_revoke_while_owner_runs_threads(void) {
    int biased = 0;
    for (int r = 0; r < ROUNDS; r++) {
        race((r * 37) % 200, 0, &biased);
        if (test_failures_) return;
    }
    fprintf(stderr, "     %d rounds, owner entered biased in %d\n", ROUNDS, biased);
}

static void test_revoke_between_calls_threads(void) {
    int biased = 0;
    for (int r = 0; r < ROUNDS / 4; r++) {
        race(1 + r % 50, 1, &biased);
        if (test_failures_) return;
    }
}

/* Through the allocator: one thread allocates alone (biased), then a second frees its
 * blocks while it goes on allocating and freeing. */
typedef struct api_ctx {
    hbm_allocator *a;
    uint64_t addr[2000];
    atomic_int ready;
    int failures;
} api_ctx;

static void *api_freer(void *arg) {
    api_ctx *c = arg;
    while (!atomic_load(&c->ready)) sched_yield();
    for (int i = 0; i < 1000; i++)
        if (hbm_free(c->a, c->addr[i]) != HBM_OK) c->failures++;
    return NULL;
}

static void test_allocator_changes_hands_threads(void) {
    hbm_device *d;
    api_ctx c;
    memset(&c, 0, sizeof c);
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc,limit=512MiB", &c.a));
    for (int i = 0; i < 1000; i++) CHECK_OK(hbm_alloc(c.a, 256u + (uint64_t)i * 64u, NULL, &c.addr[i]));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, api_freer, &c) == 0);
    atomic_store(&c.ready, 1);
    uint64_t frees = 1000;
    for (int i = 1000; i < 2000; i++) {
        hbm_status s = hbm_alloc(c.a, 512u + (uint64_t)(i % 97) * 256u, NULL, &c.addr[i]);
        if (s != HBM_OK) c.failures++;
        if (i % 3 == 0) {
            if (hbm_free(c.a, c.addr[i]) != HBM_OK) c.failures++;
            frees++;
        }
    }
    pthread_join(t, NULL);
    CHECK_EQ_U64(c.failures, 0);
    CHECK_OK(hbm_check(c.a));
    hbm_stats st;
    CHECK_OK(hbm_stats_get(c.a, &st));
    CHECK_EQ_U64(st.num_allocs, 2000);
    CHECK_EQ_U64(st.num_frees, frees);
    hbm_allocator_close(c.a);
    hbm_device_close(d);
}

int main(void) {
    RUN(test_owner_enters_biased);
    RUN(test_unbiased_lock);
    RUN(test_revoke_while_owner_runs_threads);
    RUN(test_revoke_between_calls_threads);
    RUN(test_allocator_changes_hands_threads);
    return test_done();
}
