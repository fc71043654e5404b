/* bench_cuda.c - alloc+free latency on a real GPU: hbm's bfc, cuda_async, vmm and platform
 * against the driver's own cuMemAlloc+cuMemFree (what cudaMalloc/cudaFree call) and
 * cuMemAllocFromPoolAsync+cuMemFreeAsync (what cudaMallocAsync/cudaFreeAsync call), sizes
 * 1 KiB to 1 GiB. Prints the median ns per alloc+free pair over 5 runs and the ratio to
 * cuMemAlloc+cuMemFree. Without a GPU it says so and exits 0 (HBM_CUDA_DRIVER may point
 * at the fake driver to exercise the code; its numbers mean nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/cuda_driver.h"
#include "hbm/hbm.h"

#define RUNS 5

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static uint64_t now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

typedef struct method {
    const char *name, *config; /* config NULL: raw driver */
    int pool;
} method;

static const hbmi_cuda_driver *drv;
static hbmi_CUmemoryPool raw_pool;

/* ns per alloc+free pair, median of RUNS; 0 if unavailable */
static uint64_t measure(hbm_device *dev, const method *m, uint64_t size, int iters) {
    uint64_t t[RUNS];
    hbm_allocator *a = NULL;
    if (m->config && hbm_allocator_open(dev, m->config, &a)) return 0;
    for (int r = 0; r < RUNS; r++) {
        uint64_t t0 = now();
        for (int i = 0; i < iters; i++) {
            if (a) {
                uint64_t p;
                if (hbm_alloc(a, size, NULL, &p) || hbm_free(a, p)) { hbm_allocator_close(a); return 0; }
            } else if (m->pool) {
                hbmi_CUdeviceptr p;
                if (drv->MemAllocFromPoolAsync(&p, size, raw_pool, NULL) || drv->MemFreeAsync(p, NULL)) return 0;
            } else {
                hbmi_CUdeviceptr p;
                if (drv->MemAlloc(&p, size) || drv->MemFree(p)) return 0;
            }
        }
        if (m->pool || (a && !strcmp(hbm_allocator_name(a), "cuda_async"))) drv->CtxSynchronize();
        t[r] = (now() - t0) / (uint64_t)iters;
    }
    hbm_allocator_close(a);
    qsort(t, RUNS, sizeof t[0], cmp_u64);
    return t[RUNS / 2];
}

int main(void) {
    hbm_device *dev;
    if (hbm_device_open("cuda:0", &dev)) {
        printf("bench_cuda: no GPU here (%s); nothing to measure\n", hbm_last_error());
        return 0;
    }
    hbm_status s;
    drv = hbmi_cuda_driver_get(&s);
    hbm_device_info info;
    hbm_device_info_get(dev, &info);
    hbmi_CUcontext ctx;
    drv->DevicePrimaryCtxRetain(&ctx, 0);
    drv->CtxSetCurrent(ctx);
    hbmi_CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = HBMI_CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = HBMI_CU_MEM_LOCATION_TYPE_DEVICE;
    if (drv->MemPoolCreate(&raw_pool, &props)) raw_pool = NULL;
    uint64_t big = ~0ull;
    if (raw_pool) drv->MemPoolSetAttribute(raw_pool, HBMI_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &big);
    static const method methods[] = {
        {"cuMemAlloc+Free", NULL, 0}, {"cuMemAllocFromPoolAsync", NULL, 1},
        {"hbm bfc", "allocator=bfc,fraction=0.5", 0}, {"hbm cuda_async", "allocator=cuda_async,fraction=0.5", 0},
        {"hbm vmm", "allocator=vmm,fraction=0.5", 0}, {"hbm platform", "allocator=platform", 0}};
    static const uint64_t sizes[] = {1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30};
    printf("bench_cuda on %s (%.1f GiB), driver %d: median ns per alloc+free (ratio to cuMemAlloc+Free)\n", info.name,
           (double)info.total_bytes / (1 << 30), drv->version);
    printf("%-10s", "size");
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) printf(" %24s", methods[m].name);
    printf("\n");
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        char h[32];
        printf("%-10s", hbm_size_human(sizes[z], h));
        uint64_t base = 0;
        int iters = sizes[z] >= (256 << 20) ? 20 : 200;
        for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
            if (methods[m].pool && !raw_pool) {
                printf(" %24s", "n/a");
                continue;
            }
            uint64_t ns = measure(dev, &methods[m], sizes[z], iters);
            if (m == 0) base = ns;
            if (!ns) printf(" %24s", "n/a");
            else printf(" %14llu (%6.2fx)", (unsigned long long)ns, base ? (double)ns / (double)base : 0.0);
        }
        printf("\n");
    }
    if (raw_pool) drv->MemPoolDestroy(raw_pool);
    hbm_device_close(dev);
    return 0;
}
