/* test_cuda_device.c - cuda:<n> devices and the CUDA paths of platform, cuda_async and vmm:
 * against the fake driver here, against the real one on a GPU machine (cuda_test.h). */
#include <string.h>
#include <unistd.h>

#include "cuda_test.h"

static int fake;

static void test_device(void) {
    hbm_device *d;
    hbm_device_info info;
    CHECK_OK(hbm_device_open("cuda:0", &d));
    CHECK_OK(hbm_device_info_get(d, &info));
    CHECK_STR(info.kind, "cuda");
    CHECK(info.name[0] != 0);
    CHECK(info.total_bytes > 0);
    uint64_t fr, tot, p;
    CHECK_OK(hbm_device_mem_info(d, &fr, &tot));
    CHECK_EQ_U64(tot, info.total_bytes);
    CHECK(fr <= tot);
    CHECK_OK(hbm_device_alloc(d, 1 << 20, &p));
    CHECK(p != 0 && p % 256 == 0);
    uint64_t fr2;
    CHECK_OK(hbm_device_mem_info(d, &fr2, &tot));
    if (fake) {
        CHECK_EQ_U64(fr2, fr - (1 << 20));
        memset((void *)(uintptr_t)p, 0xab, 1 << 20); /* the fake's memory is host memory */
        CHECK_STR(info.name, "hbm fake GPU 0");
    }
    CHECK_OK(hbm_device_free(d, p));
    CHECK_STATUS(hbm_device_free(d, p), HBM_ERR_BAD_FREE);
    hbm_device_close(d);
    CHECK_STATUS(hbm_device_open("cuda:7", &d), HBM_ERR_NOT_AVAILABLE);
    CHECK_CONTAINS(hbm_last_error(), "no such GPU");
    CHECK_STATUS(hbm_device_open("cuda:0,free=1GiB", &d), HBM_ERR_INVALID);
}

static void test_driver_errors(void) {
    if (!fake) return;
    hbm_device *d;
    uint64_t p;
    CHECK_OK(hbm_device_open("cuda:0", &d));
    fake_inject("cuMemAlloc", 1, 2);
    CHECK_STATUS(hbm_device_alloc(d, 4096, &p), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "cuda:0: cuMemAlloc(4.0KiB): CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
    fake_inject("cuMemAlloc", 1, 999);
    CHECK_STATUS(hbm_device_alloc(d, 4096, &p), HBM_ERR_DEVICE);
    CHECK_CONTAINS(hbm_last_error(), "CUDA_ERROR_UNKNOWN");
    fake_inject("cuMemAlloc", 1, 12345);
    CHECK_STATUS(hbm_device_alloc(d, 4096, &p), HBM_ERR_DEVICE);
    CHECK_CONTAINS(hbm_last_error(), "CUDA error 12345");
    fake_inject("cuMemGetInfo", 1, 201);
    CHECK_STATUS(hbm_device_mem_info(d, NULL, NULL), HBM_ERR_DEVICE);
    CHECK_CONTAINS(hbm_last_error(), "CUDA_ERROR_INVALID_CONTEXT");
    CHECK_OK(hbm_device_alloc(d, 4096, &p));
    fake_inject("cuMemFree", 1, 1);
    CHECK_STATUS(hbm_device_free(d, p), HBM_ERR_INVALID);
    CHECK_OK(hbm_device_free(d, p)); /* the failed free changed nothing */
    /* a device larger than the process has: the fake reports 1 GiB */
    CHECK_STATUS(hbm_device_alloc(d, 2ull << 30, &p), HBM_ERR_OOM);
    hbm_device_close(d);
}

static void test_platform_on_cuda(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("cuda:0", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=platform,limit=8MiB", &a));
    uint64_t x, y;
    CHECK_OK(hbm_alloc(a, 3 << 20, NULL, &x));
    CHECK_STATUS(hbm_alloc(a, 6 << 20, NULL, &y), HBM_ERR_OOM);
    CHECK_OK(hbm_free(a, x));
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_cuda_async(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("cuda:0", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=cuda_async,limit=64MiB,async_prealloc=8MiB", &a));
    CHECK_STR(hbm_allocator_name(a), "cuda_async");
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK(st.bytes_reserved >= (8u << 20)); /* the prealloc stays in the pool */
    if (fake) CHECK_EQ_U64(fake_query("pools"), 1);
    uint64_t x, y, z;
    CHECK_OK(hbm_alloc_stream(a, 1 << 20, NULL, 0, &x));
    CHECK_OK(hbm_alloc_stream(a, 2 << 20, NULL, 0, &y));
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_in_use, 3 << 20);
    CHECK_STATUS(hbm_alloc(a, 62 << 20, NULL, &z), HBM_ERR_OOM); /* the pool size binds */
    CHECK_CONTAINS(hbm_last_error(), "pool size");
    char buf[4096];
    size_t len;
    CHECK_OK(hbm_oom_report_format(a, buf, sizeof buf, &len));
    CHECK_CONTAINS(buf, "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 65011712 bytes.");
    CHECK_STATUS(hbm_free(a, x + 256), HBM_ERR_BAD_FREE);
    CHECK_OK(hbm_free_stream(a, x, 0));
    CHECK_OK(hbm_free_stream(a, y, 0));
    CHECK_OK(hbm_allocator_sync(a, 0));
    CHECK_OK(hbm_allocator_sync(a, HBM_STREAM_ALL));
    CHECK_OK(hbm_check(a));
    if (fake) {
        CHECK(fake_query("pool_reserved") >= (3u << 20)); /* threshold = pool size: kept */
        fake_inject("cuMemAllocFromPoolAsync", 1, 2);    /* one OOM: synchronize and retry */
        CHECK_OK(hbm_alloc(a, 1 << 20, NULL, &x));
        fake_inject("cuMemAllocFromPoolAsync", 1, 999);
        CHECK_STATUS(hbm_alloc(a, 1 << 20, NULL, &y), HBM_ERR_DEVICE);
        CHECK_CONTAINS(hbm_last_error(), "cuMemAllocFromPoolAsync");
        CHECK_OK(hbm_free(a, x));
    }
    CHECK_OK(hbm_allocator_trim(a));
    if (fake) CHECK_EQ_U64(fake_query("pool_reserved"), 0);
    hbm_allocator_close(a);
    if (fake) CHECK_EQ_U64(fake_query("pools"), 0);
    hbm_device_close(d);
}

static void test_vmm(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("cuda:0", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=vmm,limit=16MiB", &a));
    uint64_t x, y, z;
    CHECK_OK(hbm_alloc(a, 3 << 20, NULL, &x)); /* 4 MiB: two pages */
    CHECK(x % (2u << 20) == 0);
    if (fake) {
        CHECK_EQ_U64(fake_query("maps"), 2);
        memset((void *)(uintptr_t)x, 1, 3 << 20); /* mapped with access set, or this crashes */
    }
    CHECK_OK(hbm_alloc(a, 1000, NULL, &y));
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 6u << 20);
    CHECK_OK(hbm_free(a, x));
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 6u << 20); /* cached */
    CHECK_EQ_U64(st.largest_free_block_bytes, 4u << 20);
    CHECK_OK(hbm_allocator_trim(a));
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 2u << 20);
    if (fake) {
        CHECK_EQ_U64(fake_query("maps"), 1);
        CHECK_EQ_U64(fake_query("handles"), 1);
        fake_inject("cuMemMap", 2, 2); /* the second page of three fails: roll back */
        CHECK_STATUS(hbm_alloc(a, 5 << 20, NULL, &z), HBM_ERR_OOM);
        CHECK_CONTAINS(hbm_last_error(), "cuMemMap");
        CHECK_EQ_U64(fake_query("maps"), 1);
        CHECK_EQ_U64(fake_query("handles"), 1);
        fake_inject("cuMemSetAccess", 1, 1);
        CHECK_STATUS(hbm_alloc(a, 5 << 20, NULL, &z), HBM_ERR_INVALID);
        CHECK_EQ_U64(fake_query("handles"), 1);
        CHECK_OK(hbm_check(a));
    }
    CHECK_OK(hbm_alloc(a, 14 << 20, NULL, &z)); /* 7 pages + y's page = the limit */
    CHECK_OK(hbm_alloc(a, 1 << 20, NULL, &x)); /* small: fits in the rest of y's page */
    CHECK_OK(hbm_free(a, x));
    CHECK_STATUS(hbm_alloc(a, 3 << 19, NULL, &x), HBM_ERR_OOM); /* 1.5 MiB: a page of its own */
    CHECK_OK(hbm_check(a));
    CHECK_OK(hbm_free(a, z));
    CHECK_OK(hbm_free(a, y));
    hbm_allocator_close(a);
    if (fake) {
        CHECK_EQ_U64(fake_query("maps"), 0);
        CHECK_EQ_U64(fake_query("reserves"), 0);
    }
    hbm_device_close(d);
}

/* The recorder (trace=PATH) on a GPU names it in the trace: name and total (header),
 * number (device_index), as hbm run does. On the fake: device 1 of 2. */
static void test_recorder_device(void) {
    int ord = fake ? 1 : 0;
    char spec[16], path[64], cfg[128];
    snprintf(spec, sizeof spec, "cuda:%d", ord);
    snprintf(path, sizeof path, "/tmp/hbm-cuda-trace-%d.hbmt", (int)getpid());
    snprintf(cfg, sizeof cfg, "allocator=platform,trace=%s", path);
    hbm_device *d;
    hbm_device_info info;
    hbm_allocator *a;
    hbm_trace *t;
    uint64_t x;
    CHECK_OK(hbm_device_open(spec, &d));
    CHECK_OK(hbm_device_info_get(d, &info));
    CHECK_OK(hbm_allocator_open(d, cfg, &a));
    CHECK_OK(hbm_alloc(a, 4096, NULL, &x));
    CHECK_OK(hbm_free(a, x));
    hbm_allocator_close(a);
    hbm_status s = hbm_trace_read(path, &t);
    unlink(path);
    CHECK_OK(s);
    CHECK_STR(t->device, info.name);
    CHECK_EQ_U64(t->device_index, ord);
    CHECK_EQ_U64(t->capacity, info.total_bytes);
    if (fake) CHECK_STR(t->device, "hbm fake GPU 1");
    hbm_trace_free(t);
    hbm_device_close(d);
}

int main(void) {
    setenv("FAKE_CUDA_DEVICES", "2", 0); /* the fake driver's: test_recorder_device uses cuda:1 */
    fake = cuda_test_setup();
    RUN(test_device);
    RUN(test_driver_errors);
    RUN(test_platform_on_cuda);
    RUN(test_cuda_async);
    RUN(test_vmm);
    RUN(test_recorder_device);
    return test_done();
}
