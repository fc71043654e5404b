/* cuda_test.h - pick the CUDA driver for a test: $HBM_CUDA_DRIVER if set; else the real
 * libcuda.so.1 when this machine has a working GPU; else the fake driver built from
 * tests/fake_cuda ($HBM_FAKE_CUDA, set by CTest); else skip (exit 77) with the reason.
 * Returns 1 when the driver in use is the fake (tests that inspect or inject into it). */
#ifndef HBM_CUDA_TEST_H
#define HBM_CUDA_TEST_H

#include <dlfcn.h>
#include <stdlib.h>

#include "test.h"

static void *cuda_test_handle_;

static int cuda_real_gpu_works_(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    int n = 0, ok = init && count && !init(0) && !count(&n) && n > 0;
    dlclose(h);
    return ok;
}

static inline int cuda_test_setup(void) {
    const char *drv = getenv("HBM_CUDA_DRIVER");
    if (!drv || !*drv) {
        if (cuda_real_gpu_works_()) {
            fprintf(stderr, "cuda tests: using the real driver libcuda.so.1\n");
            return 0;
        }
        drv = getenv("HBM_FAKE_CUDA");
        if (!drv || !*drv) TEST_SKIP("no GPU (libcuda.so.1 missing or no device) and no fake driver ($HBM_FAKE_CUDA)");
        setenv("HBM_CUDA_DRIVER", drv, 1);
    }
    cuda_test_handle_ = dlopen(drv, RTLD_NOW | RTLD_LOCAL);
    if (!cuda_test_handle_) TEST_SKIP("cannot load the CUDA driver %s: %s", drv, dlerror());
    int fake = dlsym(cuda_test_handle_, "fake_cuda_inject") != NULL;
    fprintf(stderr, "cuda tests: using %s%s\n", drv, fake ? " (fake driver)" : "");
    return fake;
}

/* Fake driver only: the nth call of fn from now returns err. */
static inline void fake_inject(const char *fn, long nth, int err) {
    void (*f)(const char *, long, int) = (void (*)(const char *, long, int))dlsym(cuda_test_handle_, "fake_cuda_inject");
    if (f) f(fn, nth, err);
}
static inline unsigned long long fake_query(const char *what) {
    unsigned long long (*f)(const char *) = (unsigned long long (*)(const char *))dlsym(cuda_test_handle_, "fake_cuda_query");
    return f ? f(what) : 0;
}

#endif
