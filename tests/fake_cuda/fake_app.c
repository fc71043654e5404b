/* fake_app.c - a program that reaches the CUDA driver the way runtimes do, for testing
 * `hbm run`: it dlopens the driver ($HBM_CUDA_DRIVER, else libcuda.so.1), finds
 * cuGetProcAddress_v2 with dlsym and most entry points through it, and some with dlsym.
 *   fake_app BIG_BYTES   allocates 1 MiB, 2 MiB, a 3 MiB pool block on stream 0x51, then
 * BIG_BYTES (printing its result code), frees everything (the pool block on its stream,
 * then synchronizes that stream, then the context, also through CUDA 13's form that takes
 * it), then creates, maps, unmaps and releases 2 MiB and 4 MiB of physical memory (virtual
 * memory management) and exits 0 if the calls behaved.
 *   fake_app BIG_BYTES threads   then 4 threads each allocate and free 4 KiB 1000 times,
 * from the pool on streams 0x100 + thread index (cuMemAllocFromPoolAsync / cuMemFreeAsync).
 * FAKE_APP_DEVICE=N uses device N (default 0). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda_abi.h"

typedef hbmi_CUresult (*gpa_fn)(const char *, void **, int, unsigned long long, int *);

static void *get(gpa_fn gpa, const char *name) {
    void *p = NULL;
    int st = 0;
    if (gpa(name, &p, 13000, 0, &st) || !p) {
        fprintf(stderr, "fake_app: cuGetProcAddress(%s) failed\n", name);
        exit(3);
    }
    return p;
}

#define NTHREADS 4
#define ROUNDS 1000
static hbmi_CUcontext ctx;
static hbmi_CUresult (*setcur)(hbmi_CUcontext);
static hbmi_CUmemoryPool pool;
static hbmi_CUresult (*palloc)(hbmi_CUdeviceptr *, size_t, hbmi_CUmemoryPool, hbmi_CUstream);
static hbmi_CUresult (*pfree)(hbmi_CUdeviceptr, hbmi_CUstream);

static void *worker(void *arg) {
    hbmi_CUstream s = (hbmi_CUstream)(uintptr_t)(0x100 + (uintptr_t)arg);
    if (setcur(ctx)) return (void *)1;
    for (int i = 0; i < ROUNDS; i++) {
        hbmi_CUdeviceptr p;
        if (palloc(&p, 4096, pool, s) || pfree(p, s)) return (void *)1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    unsigned long long big = argc > 1 ? strtoull(argv[1], NULL, 10) : (64ull << 20);
    const char *path = getenv("HBM_CUDA_DRIVER");
    void *h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "fake_app: %s\n", dlerror());
        return 77;
    }
    gpa_fn gpa = (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) return fprintf(stderr, "fake_app: no cuGetProcAddress_v2\n"), 3;
    hbmi_CUresult (*init)(unsigned) = get(gpa, "cuInit");
    hbmi_CUresult (*retain)(hbmi_CUcontext *, hbmi_CUdevice) = get(gpa, "cuDevicePrimaryCtxRetain");
    setcur = get(gpa, "cuCtxSetCurrent");
    hbmi_CUresult (*alloc)(hbmi_CUdeviceptr *, size_t) = get(gpa, "cuMemAlloc");
    hbmi_CUresult (*mfree)(hbmi_CUdeviceptr) = get(gpa, "cuMemFree");
    hbmi_CUresult (*alloc_v2)(hbmi_CUdeviceptr *, size_t) = (hbmi_CUresult(*)(hbmi_CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2");
    hbmi_CUresult (*free_v2)(hbmi_CUdeviceptr) = (hbmi_CUresult(*)(hbmi_CUdeviceptr))dlsym(h, "cuMemFree_v2");
    hbmi_CUresult (*pcreate)(hbmi_CUmemoryPool *, const hbmi_CUmemPoolProps *) = get(gpa, "cuMemPoolCreate");
    palloc = get(gpa, "cuMemAllocFromPoolAsync");
    pfree = (hbmi_CUresult(*)(hbmi_CUdeviceptr, hbmi_CUstream))dlsym(h, "cuMemFreeAsync");
    hbmi_CUresult (*ssync)(hbmi_CUstream) = get(gpa, "cuStreamSynchronize");
    hbmi_CUresult (*csync)(void) = (hbmi_CUresult(*)(void))dlsym(h, "cuCtxSynchronize");
    /* at version 13000 the driver hands out cuCtxSynchronize's CUDA 13 form, which takes the context */
    hbmi_CUresult (*csync13)(hbmi_CUcontext) = get(gpa, "cuCtxSynchronize");
    const char *ord = getenv("FAKE_APP_DEVICE"); /* the device to use (default 0) */
    if (init(0) || retain(&ctx, ord ? atoi(ord) : 0) || setcur(ctx)) return fprintf(stderr, "fake_app: no device\n"), 77;
    hbmi_CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = HBMI_CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = HBMI_CU_MEM_LOCATION_TYPE_DEVICE;
    hbmi_CUdeviceptr a = 0, b = 0, c = 0, d = 0;
    hbmi_CUstream s1 = (hbmi_CUstream)(uintptr_t)0x51;
    int bad = 0;
    bad |= alloc(&a, 1 << 20) != 0;
    bad |= alloc_v2(&b, 2 << 20) != 0;
    bad |= pcreate(&pool, &props) != 0 || palloc(&c, 3 << 20, pool, s1) != 0;
    hbmi_CUresult rbig = alloc(&d, (size_t)big);
    printf("fake_app: big alloc rc=%d\n", rbig);
    ((char *)(uintptr_t)a)[0] = 1; /* the memory is real */
    bad |= pfree(c, s1) != 0;
    bad |= ssync(s1) != 0;
    bad |= free_v2(b) != 0;
    bad |= mfree(a) != 0;
    if (!rbig) bad |= mfree(d) != 0;
    bad |= mfree(0x1234) == 0; /* unknown pointer: the driver refuses */
    bad |= !csync || csync() != 0;
    bad |= csync13(ctx) != 0 || csync13(NULL) != 0;
    /* virtual memory, as PyTorch's expandable segments and XLA's 2026 allocators use it: h1 is
     * released while mapped (its memory goes at the unmap), h2 is released unmapped */
    hbmi_CUresult (*vcreate)(hbmi_CUmemGenericAllocationHandle *, size_t, const hbmi_CUmemAllocationProp *,
                             unsigned long long) = get(gpa, "cuMemCreate");
    hbmi_CUresult (*vrelease)(hbmi_CUmemGenericAllocationHandle) = get(gpa, "cuMemRelease");
    hbmi_CUresult (*vreserve)(hbmi_CUdeviceptr *, size_t, size_t, hbmi_CUdeviceptr, unsigned long long) =
        get(gpa, "cuMemAddressReserve");
    hbmi_CUresult (*vfree)(hbmi_CUdeviceptr, size_t) = get(gpa, "cuMemAddressFree");
    hbmi_CUresult (*vmap)(hbmi_CUdeviceptr, size_t, size_t, hbmi_CUmemGenericAllocationHandle, unsigned long long) =
        (hbmi_CUresult(*)(hbmi_CUdeviceptr, size_t, size_t, hbmi_CUmemGenericAllocationHandle, unsigned long long))dlsym(
            h, "cuMemMap");
    hbmi_CUresult (*vunmap)(hbmi_CUdeviceptr, size_t) = get(gpa, "cuMemUnmap");
    hbmi_CUmemAllocationProp vp;
    memset(&vp, 0, sizeof vp);
    vp.type = HBMI_CU_MEM_ALLOCATION_TYPE_PINNED;
    vp.location.type = HBMI_CU_MEM_LOCATION_TYPE_DEVICE;
    hbmi_CUmemGenericAllocationHandle h1 = 0, h2 = 0;
    hbmi_CUdeviceptr va = 0;
    bad |= !vmap || vcreate(&h1, 2 << 20, &vp, 0) != 0 || vreserve(&va, 4 << 20, 0, 0, 0) != 0;
    bad |= vmap(va, 2 << 20, 0, h1, 0) != 0 || vrelease(h1) != 0 || vunmap(va, 2 << 20) != 0 || vfree(va, 4 << 20) != 0;
    bad |= vcreate(&h2, 4 << 20, &vp, 0) != 0 || vrelease(h2) != 0;
    if (argc > 2 && !strcmp(argv[2], "threads")) {
        pthread_t th[NTHREADS];
        for (uintptr_t i = 0; i < NTHREADS; i++) bad |= pthread_create(&th[i], NULL, worker, (void *)i) != 0;
        for (int i = 0; i < NTHREADS; i++) {
            void *r;
            pthread_join(th[i], &r);
            bad |= r != NULL;
        }
    }
    printf("fake_app: %s\n", bad ? "FAILED" : "done");
    return bad ? 1 : 0;
}
