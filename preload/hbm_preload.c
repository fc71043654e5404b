/* hbm_preload.c - the LD_PRELOAD library of `hbm run`: watches an unmodified program's
 * device allocations, records them, and enforces an optional limit with hbm's OOM report.
 *
 * Intercepted: the runtime's cudaMalloc / cudaFree / cudaMallocAsync / cudaFreeAsync (by
 * symbol interposition), and the driver's cuMemAlloc_v2 / cuMemFree_v2 / cuMemAllocAsync /
 * cuMemFreeAsync / cuMemAllocFromPoolAsync (and their _ptsz forms) however the program
 * reaches them: linked directly, through dlsym(), or through cuGetProcAddress(), which is
 * how CUDA 12+ runtimes and XLA find driver entry points. A runtime call is recorded once:
 * the driver calls it makes inside are passed through (a per-thread depth counter).
 *
 * Every admitted allocation is mirrored in a model: hbm's platform allocator on a sim
 * device of the --limit's size, so a refused allocation gets hbm's OOM report (with the
 * live buffers, labelled by API) and the summary's numbers come from hbm's stats.
 *
 * Environment (set by hbm run): HBM_RUN_TRACE=FILE (CSV event log, see src/run/eventlog.h),
 * HBM_RUN_LIMIT=bytes (0 or unset: no limit), HBM_RUN_QUIET=1 (no summary).
 * Not intercepted: cuMemAllocManaged, cuMemAllocPitch, cuMemCreate/cuMemMap (virtual memory,
 * e.g. PyTorch's expandable_segments) and cudaMallocManaged/cudaMallocPitch. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/hbm.h"
#include "run/eventlog.h"

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef void *CUmemoryPool;
typedef int cudaError_t;
typedef void *cudaStream_t;
#define OOM_CU 2  /* CUDA_ERROR_OUT_OF_MEMORY */
#define OOM_RT 2  /* cudaErrorMemoryAllocation */

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*aasync_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*fasync_fn)(CUdeviceptr, CUstream);
typedef CUresult (*apool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*gpa1_fn)(const char *, void **, int, unsigned long long);
typedef CUresult (*gpa2_fn)(const char *, void **, int, unsigned long long, int *);
typedef void *(*dlsym_fn)(void *, const char *);

/* ---- state ------------------------------------------------------------------------------ */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread int depth; /* >0: inside an intercepted call; pass through */
static hbm_device *mdev;
static hbm_allocator *model;
static hbmi_map addrs; /* real address -> model address */
static hbmi_map sizes; /* real address -> bytes requested */
static hbmi_eventlog elog;
static uint64_t limit, cur_bytes, peak_bytes, n_allocs, n_frees, n_ooms, n_refused;
static int quiet, ready;
static char trace_path[512];
static dlsym_fn real_dlsym_p;

static dlsym_fn real_dlsym(void) {
    if (!real_dlsym_p) {
        real_dlsym_p = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!real_dlsym_p) real_dlsym_p = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    return real_dlsym_p;
}
static void *next_sym(const char *name) { return real_dlsym() ? real_dlsym()(RTLD_NEXT, name) : NULL; }

static void setup(void) {
    const char *t = getenv("HBM_RUN_TRACE"), *l = getenv("HBM_RUN_LIMIT"), *q = getenv("HBM_RUN_QUIET");
    quiet = q && *q && strcmp(q, "0");
    if (l && *l && hbm_size_parse(l, &limit)) {
        fprintf(stderr, "hbm run: HBM_RUN_LIMIT=%s is not a size; no limit\n", l);
        limit = 0;
    }
    char spec[128], cfg[128];
    snprintf(spec, sizeof spec, "sim:%" PRIu64 ",name=hbm run,granularity=512", limit ? limit : (uint64_t)(1ull << 60));
    snprintf(cfg, sizeof cfg, "allocator=platform,limit=%" PRIu64 ",report_top=10", limit ? limit : (uint64_t)(1ull << 60));
    hbmi_map_init(&addrs);
    hbmi_map_init(&sizes);
    if (hbm_device_open(spec, &mdev) || hbm_allocator_open(mdev, cfg, &model)) {
        fprintf(stderr, "hbm run: cannot set up the model (%s); not recording\n", hbm_last_error());
        return;
    }
    if (t && *t) {
        snprintf(trace_path, sizeof trace_path, "%s", t);
        if (hbmi_eventlog_open(&elog, t)) fprintf(stderr, "hbm run: %s; not writing a trace\n", hbm_last_error());
    }
    ready = 1;
}
static void init(void) { pthread_once(&once, setup); }

__attribute__((destructor)) static void finish(void) {
    if (!ready) return;
    pthread_mutex_lock(&mu);
    if (!quiet) {
        char a[32], b[32];
        fprintf(stderr, "hbm run: %" PRIu64 " allocations, %" PRIu64 " frees, peak %s in use (%" PRIu64 " bytes), %s live at exit",
                n_allocs, n_frees, hbm_size_human(peak_bytes, a), peak_bytes, hbm_size_human(cur_bytes, b));
        if (limit) fprintf(stderr, "; %" PRIu64 " refused by the limit %s", n_refused, hbm_size_human(limit, a));
        if (n_ooms > n_refused) fprintf(stderr, "; %" PRIu64 " failed in the driver", n_ooms - n_refused);
        if (elog.f) fprintf(stderr, "; trace %s (%" PRIu64 " events)", trace_path, elog.events);
        fprintf(stderr, "\n");
    }
    hbmi_eventlog_close(&elog);
    ready = 0;
    pthread_mutex_unlock(&mu);
}

/* Admit an allocation into the model; 0 = refused (the OOM report is printed). */
static int admit(size_t n, const char *api, uint64_t stream, uint64_t *maddr) {
    init();
    if (!ready || !n) return *maddr = 0, 1;
    hbm_tag tag = {.op_name = api, .label = "device allocation"};
    pthread_mutex_lock(&mu);
    hbm_status s = hbm_alloc(model, n, &tag, maddr);
    if (s == HBM_ERR_OOM) {
        n_ooms++, n_refused++;
        hbmi_eventlog_write(&elog, "oom", 0, n, stream, api);
        fprintf(stderr, "hbm run: refused %s(%zu bytes): the limit is %" PRIu64 " bytes\n", api, n, limit);
        hbm_oom_report_write(model, stderr);
    } else if (s) {
        *maddr = 0; /* host trouble in the model: let it through unrecorded */
        s = HBM_OK;
    }
    pthread_mutex_unlock(&mu);
    return s == HBM_OK;
}

static void commit(int ok, uint64_t addr, size_t n, uint64_t maddr, const char *api, uint64_t stream) {
    if (!ready || !maddr) return;
    pthread_mutex_lock(&mu);
    if (!ok) {
        hbm_free(model, maddr);
        n_ooms++;
        hbmi_eventlog_write(&elog, "oom", 0, n, stream, api);
    } else if (hbmi_map_reserve(&sizes, sizes.count + 1) == HBM_OK && hbmi_map_put(&addrs, addr, maddr) == HBM_OK) {
        hbmi_map_put(&sizes, addr, n);
        n_allocs++;
        cur_bytes += n;
        if (cur_bytes > peak_bytes) peak_bytes = cur_bytes;
        hbmi_eventlog_write(&elog, "alloc", addr, n, stream, api);
    } else {
        hbm_free(model, maddr);
    }
    pthread_mutex_unlock(&mu);
}

static void release(uint64_t addr, const char *api, uint64_t stream) {
    if (!ready || !addr) return;
    pthread_mutex_lock(&mu);
    uint64_t maddr;
    if (hbmi_map_del(&addrs, addr, &maddr)) {
        uint64_t n = 0;
        hbmi_map_del(&sizes, addr, &n);
        hbm_free(model, maddr);
        n_frees++;
        cur_bytes -= n;
        hbmi_eventlog_write(&elog, "free", addr, n, stream, api);
    }
    pthread_mutex_unlock(&mu);
}

/* ---- the common paths ---------------------------------------------------------------------- */
static CUresult do_alloc(alloc_fn real, CUdeviceptr *p, size_t n, const char *api) {
    if (!real) return 999;
    if (depth) return real(p, n);
    uint64_t m;
    if (!admit(n, api, 0, &m)) return OOM_CU;
    depth++;
    CUresult r = real(p, n);
    depth--;
    commit(r == 0, r == 0 ? *p : 0, n, m, api, 0);
    return r;
}
static CUresult do_free(free_fn real, CUdeviceptr p, const char *api) {
    if (!real) return 999;
    if (depth) return real(p);
    depth++;
    CUresult r = real(p);
    depth--;
    if (!r) release(p, api, 0);
    return r;
}
static CUresult do_aasync(aasync_fn real, CUdeviceptr *p, size_t n, CUstream s, const char *api) {
    if (!real) return 999;
    if (depth) return real(p, n, s);
    uint64_t m;
    if (!admit(n, api, (uint64_t)(uintptr_t)s, &m)) return OOM_CU;
    depth++;
    CUresult r = real(p, n, s);
    depth--;
    commit(r == 0, r == 0 ? *p : 0, n, m, api, (uint64_t)(uintptr_t)s);
    return r;
}
static CUresult do_fasync(fasync_fn real, CUdeviceptr p, CUstream s, const char *api) {
    if (!real) return 999;
    if (depth) return real(p, s);
    depth++;
    CUresult r = real(p, s);
    depth--;
    if (!r) release(p, api, (uint64_t)(uintptr_t)s);
    return r;
}
static CUresult do_apool(apool_fn real, CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s, const char *api) {
    if (!real) return 999;
    if (depth) return real(p, n, pool, s);
    uint64_t m;
    if (!admit(n, api, (uint64_t)(uintptr_t)s, &m)) return OOM_CU;
    depth++;
    CUresult r = real(p, n, pool, s);
    depth--;
    commit(r == 0, r == 0 ? *p : 0, n, m, api, (uint64_t)(uintptr_t)s);
    return r;
}

/* ---- wrappers for pointers handed out by dlsym / cuGetProcAddress --------------------------
 * Each kind has a few slots; a slot remembers one real entry point (e.g. cuMemAllocAsync
 * and cuMemAllocAsync_ptsz take two) and its wrapper calls that one. */
#define NSLOT 4
enum { K_ALLOC, K_FREE, K_AASYNC, K_FASYNC, K_APOOL, K_COUNT };
static void *slot_real[K_COUNT][NSLOT];
static void *slot_wrap[K_COUNT][NSLOT];
static const char *const kind_api[K_COUNT] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemFreeAsync",
                                              "cuMemAllocFromPoolAsync"};

#define SLOTS(X) X(0) X(1) X(2) X(3)
#define DEF_WRAPS(i)                                                                                      \
    static CUresult w_alloc_##i(CUdeviceptr *p, size_t n) { return do_alloc((alloc_fn)slot_real[K_ALLOC][i], p, n, kind_api[K_ALLOC]); } \
    static CUresult w_free_##i(CUdeviceptr p) { return do_free((free_fn)slot_real[K_FREE][i], p, kind_api[K_FREE]); } \
    static CUresult w_aasync_##i(CUdeviceptr *p, size_t n, CUstream s) {                                  \
        return do_aasync((aasync_fn)slot_real[K_AASYNC][i], p, n, s, kind_api[K_AASYNC]);                 \
    }                                                                                                     \
    static CUresult w_fasync_##i(CUdeviceptr p, CUstream s) {                                             \
        return do_fasync((fasync_fn)slot_real[K_FASYNC][i], p, s, kind_api[K_FASYNC]);                    \
    }                                                                                                     \
    static CUresult w_apool_##i(CUdeviceptr *p, size_t n, CUmemoryPool pl, CUstream s) {                  \
        return do_apool((apool_fn)slot_real[K_APOOL][i], p, n, pl, s, kind_api[K_APOOL]);                 \
    }
SLOTS(DEF_WRAPS)
#define INIT_WRAPS(i)                                                                                     \
    slot_wrap[K_ALLOC][i] = (void *)w_alloc_##i, slot_wrap[K_FREE][i] = (void *)w_free_##i,               \
    slot_wrap[K_AASYNC][i] = (void *)w_aasync_##i, slot_wrap[K_FASYNC][i] = (void *)w_fasync_##i,         \
    slot_wrap[K_APOOL][i] = (void *)w_apool_##i;

static int is_ours(void *p) {
    Dl_info a, b;
    return dladdr(p, &a) && dladdr((void *)&is_ours, &b) && a.dli_fbase == b.dli_fbase;
}

/* The wrapper for real entry point p of kind k (p itself when the slots are full). */
static void *wrap(int k, void *p) {
    if (!p || is_ours(p)) return p;
    pthread_mutex_lock(&mu);
    if (!slot_wrap[0][0]) { SLOTS(INIT_WRAPS) }
    void *w = p;
    for (int i = 0; i < NSLOT; i++) {
        if (slot_real[k][i] == p || !slot_real[k][i]) {
            slot_real[k][i] = p;
            w = slot_wrap[k][i];
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return w;
}

/* ---- cuGetProcAddress ----------------------------------------------------------------------------- */
static gpa1_fn real_gpa1;
static gpa2_fn real_gpa2;
static CUresult hook_gpa1(const char *sym, void **pfn, int ver, unsigned long long flags);
static CUresult hook_gpa2(const char *sym, void **pfn, int ver, unsigned long long flags, int *st);

/* Replace *pfn for the base names the driver resolves (cuGetProcAddress takes base names). */
static void rewrite_proc(const char *sym, void **pfn, int ver) {
    if (!sym || !pfn || !*pfn) return;
    if (!strcmp(sym, "cuMemAlloc") && ver >= 3020) *pfn = wrap(K_ALLOC, *pfn);
    else if (!strcmp(sym, "cuMemFree") && ver >= 3020) *pfn = wrap(K_FREE, *pfn);
    else if (!strcmp(sym, "cuMemAllocAsync")) *pfn = wrap(K_AASYNC, *pfn);
    else if (!strcmp(sym, "cuMemFreeAsync")) *pfn = wrap(K_FASYNC, *pfn);
    else if (!strcmp(sym, "cuMemAllocFromPoolAsync")) *pfn = wrap(K_APOOL, *pfn);
    else if (!strcmp(sym, "cuGetProcAddress") && !is_ours(*pfn)) {
        if (ver >= 12000) real_gpa2 = (gpa2_fn)*pfn, *pfn = (void *)hook_gpa2;
        else real_gpa1 = (gpa1_fn)*pfn, *pfn = (void *)hook_gpa1;
    }
}
static CUresult hook_gpa1(const char *sym, void **pfn, int ver, unsigned long long flags) {
    if (!real_gpa1) real_gpa1 = (gpa1_fn)next_sym("cuGetProcAddress");
    if (!real_gpa1) return 500;
    CUresult r = real_gpa1(sym, pfn, ver, flags);
    if (!r) rewrite_proc(sym, pfn, ver);
    return r;
}
static CUresult hook_gpa2(const char *sym, void **pfn, int ver, unsigned long long flags, int *st) {
    if (!real_gpa2) real_gpa2 = (gpa2_fn)next_sym("cuGetProcAddress_v2");
    if (!real_gpa2) return 500;
    CUresult r = real_gpa2(sym, pfn, ver, flags, st);
    if (!r) rewrite_proc(sym, pfn, ver);
    return r;
}
EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
    return hook_gpa1(sym, pfn, ver, flags);
}
EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *st) {
    return hook_gpa2(sym, pfn, ver, flags, st);
}

/* ---- dlsym ----------------------------------------------------------------------------------------- */
EXPORT void *dlsym(void *handle, const char *name) {
    dlsym_fn real = real_dlsym();
    if (!real) return NULL;
    void *p = real(handle, name);
    if (!p || name[0] != 'c' || name[1] != 'u') return p;
    if (!strcmp(name, "cuMemAlloc_v2")) return wrap(K_ALLOC, p);
    if (!strcmp(name, "cuMemFree_v2")) return wrap(K_FREE, p);
    if (!strcmp(name, "cuMemAllocAsync") || !strcmp(name, "cuMemAllocAsync_ptsz")) return wrap(K_AASYNC, p);
    if (!strcmp(name, "cuMemFreeAsync") || !strcmp(name, "cuMemFreeAsync_ptsz")) return wrap(K_FASYNC, p);
    if (!strcmp(name, "cuMemAllocFromPoolAsync") || !strcmp(name, "cuMemAllocFromPoolAsync_ptsz")) return wrap(K_APOOL, p);
    if (!strcmp(name, "cuGetProcAddress") && !is_ours(p)) return real_gpa1 = (gpa1_fn)p, (void *)hook_gpa1;
    if (!strcmp(name, "cuGetProcAddress_v2") && !is_ours(p)) return real_gpa2 = (gpa2_fn)p, (void *)hook_gpa2;
    return p;
}

/* ---- programs linked against libcuda / libcudart --------------------------------------------------- */
#define NEXT(type, name)                      \
    static type real_;                        \
    if (!real_) real_ = (type)next_sym(name);
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { NEXT(alloc_fn, "cuMemAlloc_v2") return do_alloc(real_, p, n, "cuMemAlloc_v2"); }
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { NEXT(free_fn, "cuMemFree_v2") return do_free(real_, p, "cuMemFree_v2"); }
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
    NEXT(aasync_fn, "cuMemAllocAsync") return do_aasync(real_, p, n, s, "cuMemAllocAsync");
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { NEXT(fasync_fn, "cuMemFreeAsync") return do_fasync(real_, p, s, "cuMemFreeAsync"); }
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pl, CUstream s) {
    NEXT(apool_fn, "cuMemAllocFromPoolAsync") return do_apool(real_, p, n, pl, s, "cuMemAllocFromPoolAsync");
}

typedef cudaError_t (*rt_malloc_fn)(void **, size_t);
typedef cudaError_t (*rt_free_fn)(void *);
typedef cudaError_t (*rt_malloc_async_fn)(void **, size_t, cudaStream_t);
typedef cudaError_t (*rt_free_async_fn)(void *, cudaStream_t);

static cudaError_t rt_alloc(void **p, size_t n, cudaStream_t s, const char *api, rt_malloc_fn m, rt_malloc_async_fn ma) {
    if (!m && !ma) return 999;
    if (depth) return m ? m(p, n) : ma(p, n, s);
    uint64_t mm;
    if (!admit(n, api, (uint64_t)(uintptr_t)s, &mm)) return OOM_RT;
    depth++;
    cudaError_t r = m ? m(p, n) : ma(p, n, s);
    depth--;
    commit(r == 0, r == 0 ? (uint64_t)(uintptr_t)*p : 0, n, mm, api, (uint64_t)(uintptr_t)s);
    return r;
}
static cudaError_t rt_release(void *p, cudaStream_t s, const char *api, rt_free_fn f, rt_free_async_fn fa) {
    if (!f && !fa) return 999;
    if (depth) return f ? f(p) : fa(p, s);
    depth++;
    cudaError_t r = f ? f(p) : fa(p, s);
    depth--;
    if (!r) release((uint64_t)(uintptr_t)p, api, (uint64_t)(uintptr_t)s);
    return r;
}
EXPORT cudaError_t cudaMalloc(void **p, size_t n) { NEXT(rt_malloc_fn, "cudaMalloc") return rt_alloc(p, n, NULL, "cudaMalloc", real_, NULL); }
EXPORT cudaError_t cudaFree(void *p) { NEXT(rt_free_fn, "cudaFree") return rt_release(p, NULL, "cudaFree", real_, NULL); }
EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
    NEXT(rt_malloc_async_fn, "cudaMallocAsync") return rt_alloc(p, n, s, "cudaMallocAsync", NULL, real_);
}
EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    NEXT(rt_free_async_fn, "cudaFreeAsync") return rt_release(p, s, "cudaFreeAsync", NULL, real_);
}
