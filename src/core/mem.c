/* mem.c - host allocations of libhbm's metadata, with a fault injector for tests. */
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
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

/* A block of 4 MiB or more is asked to be backed by huge pages (where the kernel's
 * transparent huge pages are in "madvise" mode, as on Debian): the plan of a 20 MB module
 * first-touches about 50 MB of fresh mappings, and on a virtual machine each 4 KiB page
 * fault cost more than the parsing (bench_plan, docs/benchmarks.md). Advice only: where it
 * is refused nothing changes. Its whole 2 MiB pages inside the block, not the head. */
static void *advise(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (p && n >= 2 * huge) {
        uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + n) & ~(huge - 1);
        if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
#else
    (void)n;
#endif
    return p;
}

void *hbmi_malloc(size_t n) {
    if (hbmi_should_fail()) return NULL;
    return advise(malloc(n ? n : 1), n);
}

void *hbmi_calloc(size_t count, size_t size) {
    if (hbmi_should_fail()) return NULL;
    void *p = calloc(count ? count : 1, size ? size : 1);
    return count && size <= SIZE_MAX / count ? advise(p, count * size) : p;
}

void *hbmi_realloc(void *p, size_t n) {
    if (hbmi_should_fail()) return NULL;
    return advise(realloc(p, n ? n : 1), n);
}

void hbmi_free(void *p) { free(p); }

char *hbmi_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = hbmi_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The capacity an array of cap elements grows to for need: doubled from first. */
static hbm_status grown_cap_from(size_t cap, size_t need, size_t elem, size_t first, size_t *nc) {
    for (*nc = cap ? cap : first ? first : 1; *nc < need; *nc *= 2)
        if (*nc > SIZE_MAX / 2 / elem) return hbmi_error(HBM_ERR_NOMEM, "array of %zu elements is too large", need);
    return HBM_OK;
}

static hbm_status grown_cap(size_t cap, size_t need, size_t elem, size_t *nc) {
    return grown_cap_from(cap, need, elem, 8, nc);
}

hbm_status hbmi_grow(void **arr, size_t *cap, size_t need, size_t elem) { return hbmi_grow_from(arr, cap, need, elem, 8); }

hbm_status hbmi_grow_from(void **arr, size_t *cap, size_t need, size_t elem, size_t first) {
    size_t nc;
    if (need <= *cap) return HBM_OK;
    if (grown_cap_from(*cap, need, elem, first, &nc)) return HBM_ERR_NOMEM;
    void *p = hbmi_realloc(*arr, nc * elem);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory growing an array to %zu elements", nc);
    *arr = p;
    *cap = nc;
    return HBM_OK;
}

/* Big arrays: below HBMI_BIG bytes on the heap, above in a mapping of their own with
 * transparent huge pages, grown by mremap. Which one is decided by cap * elem alone, so
 * grow and free agree without a header. */
#define HBMI_BIG ((size_t)4 << 20)

static size_t big_bytes(size_t cap, size_t elem) { return (cap * elem + 4095) & ~(size_t)4095; }

/* A private anonymous mapping of bytes (a multiple of the page size) with transparent huge
 * pages asked for on all of it (mremap keeps it one mapping), or NULL. */
static void *map_huge(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

hbm_status hbmi_big_grow(void **arr, size_t *cap, size_t need, size_t elem) {
    size_t nc;
    if (need <= *cap) return HBM_OK;
    if (grown_cap(*cap, need, elem, &nc)) return HBM_ERR_NOMEM;
    if (nc * elem < HBMI_BIG) return hbmi_grow(arr, cap, need, elem);
    if (hbmi_should_fail()) return hbmi_error(HBM_ERR_NOMEM, "out of host memory growing an array to %zu elements", nc);
    size_t old = *cap * elem, bytes = big_bytes(nc, elem);
    void *p = MAP_FAILED;
#ifdef MREMAP_MAYMOVE
    if (old >= HBMI_BIG) p = mremap(*arr, big_bytes(*cap, elem), bytes, MREMAP_MAYMOVE);
#endif
    if (p == MAP_FAILED) {
        if (!(p = map_huge(bytes)))
            return hbmi_error(HBM_ERR_NOMEM, "out of host memory growing an array to %zu elements", nc);
        if (old) memcpy(p, *arr, old);
        hbmi_big_free(*arr, *cap, elem);
    }
    *arr = p;
    *cap = nc;
    return HBM_OK;
}

void hbmi_big_free(void *arr, size_t cap, size_t elem) {
    if (arr && cap * elem >= HBMI_BIG) munmap(arr, big_bytes(cap, elem));
    else hbmi_free(arr);
}

void *hbmi_zone_alloc(size_t n) {
    if (hbmi_should_fail()) return NULL;
    if (n >= HBMI_BIG) return map_huge(big_bytes(n, 1));
    return aligned_alloc(64, (n + 63) & ~(size_t)63);
}

void hbmi_zone_free(void *p, size_t n) { hbmi_big_free(p, n, 1); /* the same rule: mapped from HBMI_BIG */ }

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
