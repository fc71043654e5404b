/* mem.c - host allocations of libhbm's metadata, with a fault injector for tests. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"

/* countdown > 0: armed; the call that brings it to 0 fails. */
static _Atomic uint64_t hbmi_fail_countdown;
static _Atomic uint64_t hbmi_alloc_count;

uint64_t hbm_debug_fail_host_alloc(uint64_t nth) {
    uint64_t made = atomic_exchange(&hbmi_alloc_count, 0);
    atomic_store(&hbmi_fail_countdown, nth);
    return made;
}

static int hbmi_should_fail(void) {
    atomic_fetch_add_explicit(&hbmi_alloc_count, 1, memory_order_relaxed);
    uint64_t c = atomic_load_explicit(&hbmi_fail_countdown, memory_order_relaxed);
    if (HBMI_LIKELY(c == 0)) return 0;
    while (c != 0) {
        if (atomic_compare_exchange_weak(&hbmi_fail_countdown, &c, c - 1)) return c == 1;
    }
    return 0;
}

void *hbmi_malloc(size_t n) {
    if (hbmi_should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *hbmi_calloc(size_t count, size_t size) {
    if (hbmi_should_fail()) return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *hbmi_realloc(void *p, size_t n) {
    if (hbmi_should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

void hbmi_free(void *p) { free(p); }

char *hbmi_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = hbmi_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

hbm_status hbmi_grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return HBM_OK;
    size_t nc = *cap ? *cap : 8;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem) return hbmi_error(HBM_ERR_NOMEM, "array of %zu elements is too large", need);
        nc *= 2;
    }
    void *p = hbmi_realloc(*arr, nc * elem);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory growing an array to %zu elements", nc);
    *arr = p;
    *cap = nc;
    return HBM_OK;
}

int hbmi_streq_ci(const char *a, const char *b) {
    for (;; a++, b++) {
        int ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca >= 'A' && ca <= 'Z') ca += 32;
        if (cb >= 'A' && cb <= 'Z') cb += 32;
        if (ca != cb) return 0;
        if (!ca) return 1;
    }
}

uint64_t hbmi_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
