/* parallel.c - a loop over n items on threads: each thread takes the next item until none
 * is left (the fleet's inputs, a dump folder's modules). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core/internal.h"

typedef struct loop {
    void (*fn)(void *ctx, size_t i);
    void *ctx;
    size_t n;
    atomic_size_t next;
} loop;

static void *worker(void *arg) {
    loop *l = arg;
    for (size_t i; (i = atomic_fetch_add(&l->next, 1)) < l->n;) l->fn(l->ctx, i);
    return NULL;
}

int hbmi_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

int hbmi_parallel_for(size_t n, int jobs, void (*fn)(void *ctx, size_t i), void *ctx) {
    if (jobs <= 0) jobs = hbmi_cores();
    if ((size_t)jobs > n) jobs = n ? (int)n : 1;
    loop l = {.fn = fn, .ctx = ctx, .n = n};
    atomic_init(&l.next, 0);
    pthread_t *th = jobs > 1 ? hbmi_calloc((size_t)jobs, sizeof *th) : NULL;
    int started = 0;
    for (int k = 1; th && k < jobs; k++) /* the caller is the first worker */
        if (!pthread_create(&th[k], NULL, worker, &l)) started = k;
        else break;
    worker(&l);
    for (int k = 1; k <= started; k++) pthread_join(th[k], NULL);
    hbmi_free(th);
    return started + 1;
}
