/* fake_libcuda.c - a stand-in for libcuda.so.1 over host memory, so hbm's CUDA paths
 * (cuda:<n> device, cuda_async, vmm, hbm_torch_*, hbm run) are exercised on machines
 * without a GPU. Load it with HBM_CUDA_DRIVER=/path/to/libhbm_fake_cuda.so.
 *
 * It implements the subset of the driver API hbm uses, with the driver's checks where
 * hbm could get them wrong: frees of unknown pointers, maps outside a reservation or over
 * a mapped range, unmaps that split a mapping, access before cuMemSetAccess (pages stay
 * PROT_NONE until then, so a missing call crashes the test), capacity.
 *
 * Environment: FAKE_CUDA_MEM (bytes per device, K/M/G suffix; default 1G),
 * FAKE_CUDA_DEVICES (default 1; 0 makes cuInit fail with CUDA_ERROR_NO_DEVICE).
 * Test control, found with dlsym: fake_cuda_inject(fn, nth, err) makes the nth call of
 * fn from now return err; fake_cuda_query(what) returns a counter. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "device/cuda_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define PAGE (2ull << 20)

typedef enum { K_PLAIN, K_POOL, K_RESERVE, K_HANDLE, K_MAP } kind;
typedef struct item {
    kind k;
    uint64_t addr, size;
    uint64_t handle;        /* K_MAP: handle id; K_HANDLE: id */
    int mapcount, released; /* K_HANDLE */
    void *pool;             /* K_POOL */
    int access;             /* K_MAP */
} item;

typedef struct pool {
    uint64_t used, reserved, threshold;
    int live;
} pool;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static item *items;
static size_t nitems, capitems;
static uint64_t total_mem, device_used, next_handle = 1;
static int ndevices = -1, inited;
static pool pools[64];
static char inject_fn[64];
static long inject_nth;
static int inject_err;
static int current_ctx_set;

static uint64_t parse_size(const char *s, uint64_t dflt) {
    if (!s || !*s) return dflt;
    char *e;
    unsigned long long v = strtoull(s, &e, 10);
    if (*e == 'K' || *e == 'k') v <<= 10;
    else if (*e == 'M' || *e == 'm') v <<= 20;
    else if (*e == 'G' || *e == 'g') v <<= 30;
    return v;
}

static void setup(void) {
    if (ndevices >= 0) return;
    const char *n = getenv("FAKE_CUDA_DEVICES");
    ndevices = n && *n ? atoi(n) : 1;
    total_mem = parse_size(getenv("FAKE_CUDA_MEM"), 1ull << 30);
}

/* 1 if this call of fn is the injected failure */
static int injected(const char *fn, hbmi_CUresult *err) {
    if (!inject_nth || strcmp(fn, inject_fn)) return 0;
    if (--inject_nth) return 0;
    *err = inject_err;
    return 1;
}

#define ENTER(fn)                                                       \
    hbmi_CUresult err_ = 0;                                             \
    pthread_mutex_lock(&mu);                                            \
    setup();                                                            \
    if (injected(fn, &err_)) { pthread_mutex_unlock(&mu); return err_; } \
    if (!inited && strcmp(fn, "cuInit")) { pthread_mutex_unlock(&mu); return HBMI_CUDA_ERROR_NOT_INITIALIZED; }
#define LEAVE(r) do { pthread_mutex_unlock(&mu); return (r); } while (0)

static item *add_item(item it) {
    if (nitems == capitems) {
        size_t c = capitems ? capitems * 2 : 64;
        item *n = realloc(items, c * sizeof *n);
        if (!n) return NULL;
        items = n, capitems = c;
    }
    items[nitems] = it;
    return &items[nitems++];
}
static void del_item(item *it) { *it = items[--nitems]; }
static item *find(kind k, uint64_t addr) {
    for (size_t i = 0; i < nitems; i++)
        if (items[i].k == k && items[i].addr == addr) return &items[i];
    return NULL;
}
static item *find_handle(uint64_t h) {
    for (size_t i = 0; i < nitems; i++)
        if (items[i].k == K_HANDLE && items[i].handle == h) return &items[i];
    return NULL;
}
static uint64_t host_map(uint64_t size, int prot) {
    void *p = mmap(NULL, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? 0 : (uint64_t)(uintptr_t)p;
}

/* ---- init, devices, contexts, errors ---------------------------------------------- */
EXPORT hbmi_CUresult cuInit(unsigned flags) {
    ENTER("cuInit");
    if (flags) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    if (ndevices <= 0) LEAVE(HBMI_CUDA_ERROR_NO_DEVICE);
    inited = 1;
    LEAVE(0);
}
EXPORT hbmi_CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
static const struct { int code; const char *name, *text; } errs[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};
EXPORT hbmi_CUresult cuGetErrorName(hbmi_CUresult e, const char **s) {
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (errs[i].code == e) return *s = errs[i].name, 0;
    *s = NULL;
    return HBMI_CUDA_ERROR_INVALID_VALUE;
}
EXPORT hbmi_CUresult cuGetErrorString(hbmi_CUresult e, const char **s) {
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (errs[i].code == e) return *s = errs[i].text, 0;
    *s = NULL;
    return HBMI_CUDA_ERROR_INVALID_VALUE;
}
EXPORT hbmi_CUresult cuDeviceGetCount(int *n) { ENTER("cuDeviceGetCount"); *n = ndevices; LEAVE(0); }
EXPORT hbmi_CUresult cuDeviceGet(hbmi_CUdevice *d, int ord) {
    ENTER("cuDeviceGet");
    if (ord < 0 || ord >= ndevices) LEAVE(HBMI_CUDA_ERROR_INVALID_DEVICE);
    *d = ord;
    LEAVE(0);
}
EXPORT hbmi_CUresult cuDeviceGetName(char *name, int len, hbmi_CUdevice d) {
    ENTER("cuDeviceGetName");
    snprintf(name, (size_t)len, "hbm fake GPU %d", d);
    LEAVE(0);
}
EXPORT hbmi_CUresult cuDeviceTotalMem_v2(size_t *b, hbmi_CUdevice d) { ENTER("cuDeviceTotalMem"); *b = total_mem; LEAVE(0); }
static struct hbmi_CUctx_st { int dummy; } the_ctx;
static __thread hbmi_CUcontext tls_ctx;
static hbmi_CUdevice ctx_device; /* the device the_ctx was last retained for */
EXPORT hbmi_CUresult cuDevicePrimaryCtxRetain(hbmi_CUcontext *c, hbmi_CUdevice d) {
    ENTER("cuDevicePrimaryCtxRetain");
    if (d < 0 || d >= ndevices) LEAVE(HBMI_CUDA_ERROR_INVALID_DEVICE);
    ctx_device = d;
    *c = &the_ctx;
    LEAVE(0);
}
EXPORT hbmi_CUresult cuDevicePrimaryCtxRelease_v2(hbmi_CUdevice d) { ENTER("cuDevicePrimaryCtxRelease"); LEAVE(0); }
EXPORT hbmi_CUresult cuCtxGetCurrent(hbmi_CUcontext *c) { *c = tls_ctx; return 0; }
EXPORT hbmi_CUresult cuCtxSetCurrent(hbmi_CUcontext c) {
    tls_ctx = c;
    current_ctx_set = 1;
    return 0;
}
#define NEED_CTX() if (!tls_ctx) LEAVE(HBMI_CUDA_ERROR_INVALID_CONTEXT)
EXPORT hbmi_CUresult cuCtxGetDevice(hbmi_CUdevice *d) {
    ENTER("cuCtxGetDevice");
    NEED_CTX();
    *d = ctx_device;
    LEAVE(0);
}

static uint64_t pools_reserved(void) {
    uint64_t r = 0;
    for (int i = 0; i < 64; i++)
        if (pools[i].live) r += pools[i].reserved;
    return r;
}
EXPORT hbmi_CUresult cuMemGetInfo_v2(size_t *f, size_t *t) {
    ENTER("cuMemGetInfo");
    NEED_CTX();
    uint64_t used = device_used + pools_reserved();
    *f = used < total_mem ? total_mem - used : 0;
    *t = total_mem;
    LEAVE(0);
}
static int fits(uint64_t more) { return device_used + pools_reserved() + more <= total_mem; }

/* ---- plain allocations ------------------------------------------------------------- */
EXPORT hbmi_CUresult cuMemAlloc_v2(hbmi_CUdeviceptr *p, size_t n) {
    ENTER("cuMemAlloc");
    NEED_CTX();
    if (!n) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    uint64_t acct = (n + 511) & ~511ull;
    if (!fits(acct)) LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
    uint64_t a = host_map(acct, PROT_READ | PROT_WRITE);
    if (!a || !add_item((item){.k = K_PLAIN, .addr = a, .size = acct})) LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
    device_used += acct;
    *p = a;
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemFree_v2(hbmi_CUdeviceptr p) {
    ENTER("cuMemFree");
    NEED_CTX();
    item *it = find(K_PLAIN, p);
    if (!it) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    munmap((void *)(uintptr_t)p, it->size);
    device_used -= it->size;
    del_item(it);
    LEAVE(0);
}

/* ---- stream-ordered pools ----------------------------------------------------------- */
static void pool_release_to(pool *pl, uint64_t keep) {
    uint64_t target = pl->used > keep ? pl->used : keep;
    if (pl->reserved > target) pl->reserved = target;
}
EXPORT hbmi_CUresult cuStreamSynchronize(hbmi_CUstream s) {
    ENTER("cuStreamSynchronize");
    NEED_CTX();
    for (int i = 0; i < 64; i++)
        if (pools[i].live) pool_release_to(&pools[i], pools[i].threshold);
    LEAVE(0);
}
EXPORT hbmi_CUresult cuCtxSynchronize(void) {
    ENTER("cuCtxSynchronize");
    NEED_CTX();
    for (int i = 0; i < 64; i++)
        if (pools[i].live) pool_release_to(&pools[i], pools[i].threshold);
    LEAVE(0);
}
/* CUDA 13's form (cuGetProcAddress version >= 13000): the context to synchronize, NULL for
 * the current one; any other value is refused, as the driver refuses a destroyed one */
EXPORT hbmi_CUresult cuCtxSynchronize_v2(hbmi_CUcontext c) {
    ENTER("cuCtxSynchronize");
    if (c && c != &the_ctx) LEAVE(HBMI_CUDA_ERROR_INVALID_CONTEXT);
    if (!c) NEED_CTX();
    for (int i = 0; i < 64; i++)
        if (pools[i].live) pool_release_to(&pools[i], pools[i].threshold);
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemPoolCreate(hbmi_CUmemoryPool *p, const hbmi_CUmemPoolProps *props) {
    ENTER("cuMemPoolCreate");
    if (props->allocType != HBMI_CU_MEM_ALLOCATION_TYPE_PINNED || props->location.type != HBMI_CU_MEM_LOCATION_TYPE_DEVICE ||
        props->location.id < 0 || props->location.id >= ndevices)
        LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    for (int i = 0; i < 64; i++)
        if (!pools[i].live) {
            pools[i] = (pool){.live = 1};
            *p = (hbmi_CUmemoryPool)&pools[i];
            LEAVE(0);
        }
    LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
}
static pool *as_pool(hbmi_CUmemoryPool p) {
    pool *pl = (pool *)p;
    return pl >= pools && pl < pools + 64 && pl->live ? pl : NULL;
}
EXPORT hbmi_CUresult cuMemPoolDestroy(hbmi_CUmemoryPool p) {
    ENTER("cuMemPoolDestroy");
    pool *pl = as_pool(p);
    if (!pl) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < nitems;) /* the driver frees what is left at destroy */
        if (items[i].k == K_POOL && items[i].pool == pl) {
            munmap((void *)(uintptr_t)items[i].addr, items[i].size);
            del_item(&items[i]);
        } else
            i++;
    pl->live = 0;
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemPoolSetAttribute(hbmi_CUmemoryPool p, int attr, void *v) {
    ENTER("cuMemPoolSetAttribute");
    pool *pl = as_pool(p);
    if (!pl || attr != HBMI_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    pl->threshold = *(uint64_t *)v;
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemPoolGetAttribute(hbmi_CUmemoryPool p, int attr, void *v) {
    ENTER("cuMemPoolGetAttribute");
    pool *pl = as_pool(p);
    if (!pl) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    if (attr == HBMI_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) *(uint64_t *)v = pl->threshold;
    else if (attr == HBMI_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) *(uint64_t *)v = pl->reserved;
    else if (attr == HBMI_CU_MEMPOOL_ATTR_USED_MEM_CURRENT) *(uint64_t *)v = pl->used;
    else LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemPoolTrimTo(hbmi_CUmemoryPool p, size_t keep) {
    ENTER("cuMemPoolTrimTo");
    pool *pl = as_pool(p);
    if (!pl) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    pool_release_to(pl, keep);
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemAllocFromPoolAsync(hbmi_CUdeviceptr *d, size_t n, hbmi_CUmemoryPool p, hbmi_CUstream s) {
    ENTER("cuMemAllocFromPoolAsync");
    NEED_CTX();
    pool *pl = as_pool(p);
    if (!pl || !n) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    uint64_t acct = (n + 511) & ~511ull;
    uint64_t grow = pl->used + acct > pl->reserved ? pl->used + acct - pl->reserved : 0;
    if (!fits(grow)) LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
    uint64_t a = host_map(acct, PROT_READ | PROT_WRITE);
    if (!a || !add_item((item){.k = K_POOL, .addr = a, .size = acct, .pool = pl})) LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
    pl->used += acct;
    pl->reserved += grow;
    *d = a;
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemAllocAsync(hbmi_CUdeviceptr *d, size_t n, hbmi_CUstream s) {
    (void)d, (void)n, (void)s;
    return HBMI_CUDA_ERROR_NOT_SUPPORTED; /* the default pool is not modelled */
}
EXPORT hbmi_CUresult cuMemFreeAsync(hbmi_CUdeviceptr d, hbmi_CUstream s) {
    ENTER("cuMemFreeAsync");
    NEED_CTX();
    item *it = find(K_POOL, d);
    if (!it) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    pool *pl = it->pool;
    pl->used -= it->size;
    munmap((void *)(uintptr_t)d, it->size);
    del_item(it);
    LEAVE(0);
}

/* ---- virtual memory management -------------------------------------------------------- */
EXPORT hbmi_CUresult cuMemGetAllocationGranularity(size_t *g, const hbmi_CUmemAllocationProp *prop, int opt) {
    ENTER("cuMemGetAllocationGranularity");
    if (prop->type != HBMI_CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != HBMI_CU_MEM_LOCATION_TYPE_DEVICE)
        LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    *g = PAGE;
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemAddressReserve(hbmi_CUdeviceptr *p, size_t size, size_t align, hbmi_CUdeviceptr addr,
                                         unsigned long long flags) {
    ENTER("cuMemAddressReserve");
    if (!size || size % PAGE || (align && align % PAGE)) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    uint64_t a = host_map(size + PAGE, PROT_NONE);
    if (!a) LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
    uint64_t aligned = (a + PAGE - 1) & ~(PAGE - 1);
    if (aligned > a) munmap((void *)(uintptr_t)a, aligned - a);
    if (aligned + size < a + size + PAGE) munmap((void *)(uintptr_t)(aligned + size), a + size + PAGE - aligned - size);
    add_item((item){.k = K_RESERVE, .addr = aligned, .size = size});
    *p = aligned;
    LEAVE(0);
}
static int overlaps_map(uint64_t a, uint64_t n) {
    for (size_t i = 0; i < nitems; i++)
        if (items[i].k == K_MAP && items[i].addr < a + n && a < items[i].addr + items[i].size) return 1;
    return 0;
}
EXPORT hbmi_CUresult cuMemAddressFree(hbmi_CUdeviceptr p, size_t size) {
    ENTER("cuMemAddressFree");
    item *it = find(K_RESERVE, p);
    if (!it || it->size != size || overlaps_map(p, size)) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    munmap((void *)(uintptr_t)p, size);
    del_item(it);
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemCreate(hbmi_CUmemGenericAllocationHandle *h, size_t size, const hbmi_CUmemAllocationProp *prop,
                                 unsigned long long flags) {
    ENTER("cuMemCreate");
    if (!size || size % PAGE || flags || prop->type != HBMI_CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != HBMI_CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id >= ndevices)
        LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    if (!fits(size)) LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
    if (!add_item((item){.k = K_HANDLE, .size = size, .handle = next_handle})) LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
    device_used += size;
    *h = next_handle++;
    LEAVE(0);
}
static void maybe_drop_handle(item *hd) {
    if (hd->released && !hd->mapcount) {
        device_used -= hd->size;
        del_item(hd);
    }
}
EXPORT hbmi_CUresult cuMemRelease(hbmi_CUmemGenericAllocationHandle h) {
    ENTER("cuMemRelease");
    item *hd = find_handle(h);
    if (!hd || hd->released) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    hd->released = 1; /* the memory goes when the last mapping does */
    maybe_drop_handle(hd);
    LEAVE(0);
}
static int inside_reserve(uint64_t a, uint64_t n) {
    for (size_t i = 0; i < nitems; i++)
        if (items[i].k == K_RESERVE && a >= items[i].addr && a + n <= items[i].addr + items[i].size) return 1;
    return 0;
}
EXPORT hbmi_CUresult cuMemMap(hbmi_CUdeviceptr p, size_t size, size_t off, hbmi_CUmemGenericAllocationHandle h,
                              unsigned long long flags) {
    ENTER("cuMemMap");
    item *hd = find_handle(h);
    if (!hd || hd->released || off || size != hd->size || p % PAGE || !inside_reserve(p, size) || overlaps_map(p, size))
        LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    void *m = mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
    hd->mapcount++;
    if (!add_item((item){.k = K_MAP, .addr = p, .size = size, .handle = h})) LEAVE(HBMI_CUDA_ERROR_OUT_OF_MEMORY);
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemUnmap(hbmi_CUdeviceptr p, size_t size) {
    ENTER("cuMemUnmap");
    /* the range must consist of whole mappings */
    uint64_t covered = 0;
    for (size_t i = 0; i < nitems; i++)
        if (items[i].k == K_MAP && items[i].addr < p + size && p < items[i].addr + items[i].size) {
            if (items[i].addr < p || items[i].addr + items[i].size > p + size) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
            covered += items[i].size;
        }
    if (covered != size) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < nitems;)
        if (items[i].k == K_MAP && items[i].addr >= p && items[i].addr < p + size) {
            item *hd = find_handle(items[i].handle);
            mmap((void *)(uintptr_t)items[i].addr, items[i].size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
            del_item(&items[i]);
            if (hd) {
                hd->mapcount--;
                maybe_drop_handle(hd);
            }
        } else
            i++;
    LEAVE(0);
}
EXPORT hbmi_CUresult cuMemSetAccess(hbmi_CUdeviceptr p, size_t size, const hbmi_CUmemAccessDesc *d, size_t count) {
    ENTER("cuMemSetAccess");
    if (count != 1 || d->location.type != HBMI_CU_MEM_LOCATION_TYPE_DEVICE || d->flags != HBMI_CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    uint64_t covered = 0;
    for (size_t i = 0; i < nitems; i++)
        if (items[i].k == K_MAP && items[i].addr >= p && items[i].addr + items[i].size <= p + size) covered += items[i].size;
    if (covered != size) LEAVE(HBMI_CUDA_ERROR_INVALID_VALUE);
    mprotect((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE);
    LEAVE(0);
}

/* ---- entry points by name ----------------------------------------------------------- */
static hbmi_CUresult proc(const char *sym, void **pfn, int ver) {
    static const char *const v2[] = {"cuMemAlloc", "cuMemFree", "cuMemGetInfo", "cuDeviceTotalMem",
                                     "cuDevicePrimaryCtxRelease", "cuGetProcAddress"};
    char name[128];
    snprintf(name, sizeof name, "%s", sym);
    for (size_t i = 0; i < sizeof v2 / sizeof v2[0]; i++)
        if (!strcmp(sym, v2[i]) && ver >= 3020) snprintf(name, sizeof name, "%s_v2", sym);
    if (!strcmp(sym, "cuCtxSynchronize") && ver >= 13000) snprintf(name, sizeof name, "cuCtxSynchronize_v2");
    Dl_info info;
    void *self = NULL;
    if (dladdr((void *)&proc, &info)) self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    *pfn = self ? dlsym(self, name) : NULL;
    if (self) dlclose(self);
    return *pfn ? 0 : HBMI_CUDA_ERROR_NOT_FOUND;
}
EXPORT hbmi_CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
    return proc(sym, pfn, ver);
}
EXPORT hbmi_CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
    hbmi_CUresult r = proc(sym, pfn, ver);
    if (status) *status = r ? 1 : 0;
    return r;
}

/* ---- test control ------------------------------------------------------------------------ */
EXPORT void fake_cuda_inject(const char *fn, long nth, int err) {
    pthread_mutex_lock(&mu);
    snprintf(inject_fn, sizeof inject_fn, "%s", fn);
    inject_nth = nth;
    inject_err = err;
    pthread_mutex_unlock(&mu);
}
EXPORT unsigned long long fake_cuda_query(const char *what) {
    pthread_mutex_lock(&mu);
    unsigned long long r = 0;
    if (!strcmp(what, "used")) r = device_used + pools_reserved();
    else if (!strcmp(what, "pool_reserved")) r = pools_reserved();
    else if (!strcmp(what, "pool_used")) {
        for (int i = 0; i < 64; i++)
            if (pools[i].live) r += pools[i].used;
    } else if (!strcmp(what, "pools")) {
        for (int i = 0; i < 64; i++) r += pools[i].live;
    } else {
        kind k = !strcmp(what, "plain") ? K_PLAIN : !strcmp(what, "maps") ? K_MAP : !strcmp(what, "handles") ? K_HANDLE
                 : !strcmp(what, "reserves") ? K_RESERVE : K_POOL;
        for (size_t i = 0; i < nitems; i++) r += items[i].k == k;
    }
    pthread_mutex_unlock(&mu);
    return r;
}
