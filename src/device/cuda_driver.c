/* cuda_driver.c - dlopen the CUDA driver and map its errors. See cuda_driver.h. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "device/cuda_driver.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static hbmi_cuda_driver drv;
static hbm_status load_status;
static char load_msg[512];

static void load(void) {
    const char *path = getenv("HBM_CUDA_DRIVER");
    if (!path || !*path) path = "libcuda.so.1";
    snprintf(drv.path, sizeof drv.path, "%s", path);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        load_status = HBM_ERR_NOT_AVAILABLE;
        snprintf(load_msg, sizeof load_msg, "no CUDA driver: cannot load %s (%s); is an NVIDIA driver installed?",
                 path, e ? e : "?");
        return;
    }
    const char *missing = NULL;
#define HBMI_CUDA_LOAD_(member, sym, params)                                   \
    *(void **)&drv.member = dlsym(h, sym);                                     \
    if (!drv.member && !missing) missing = sym;
    HBMI_CUDA_FUNCS(HBMI_CUDA_LOAD_)
#undef HBMI_CUDA_LOAD_
    if (missing) {
        load_status = HBM_ERR_NOT_AVAILABLE;
        snprintf(load_msg, sizeof load_msg, "no CUDA driver: %s lacks %s (driver too old for hbm?)", path, missing);
        return; /* the handle stays open: harmless, and other threads may race on drv */
    }
    hbmi_CUresult r = drv.Init(0);
    if (r) {
        const char *name = NULL;
        if (drv.GetErrorName(r, &name)) name = NULL;
        load_status = r == HBMI_CUDA_ERROR_NO_DEVICE ? HBM_ERR_NOT_AVAILABLE : hbmi_cuda_status_of(r);
        if (load_status == HBM_ERR_DEVICE) load_status = HBM_ERR_NOT_AVAILABLE;
        snprintf(load_msg, sizeof load_msg, "no CUDA driver usable: cuInit failed in %s: %s (%d)", path,
                 name ? name : "CUDA_ERROR_?", r);
        return;
    }
    if (drv.DriverGetVersion(&drv.version)) drv.version = 0;
    load_status = HBM_OK;
}

const hbmi_cuda_driver *hbmi_cuda_driver_get(hbm_status *status) {
    pthread_once(&once, load);
    if (load_status) {
        hbmi_error(load_status, "%s", load_msg);
        if (status) *status = load_status;
        return NULL;
    }
    if (status) *status = HBM_OK;
    return &drv;
}

hbm_status hbmi_cuda_status_of(hbmi_CUresult r) {
    switch (r) {
    case HBMI_CUDA_SUCCESS: return HBM_OK;
    case HBMI_CUDA_ERROR_OUT_OF_MEMORY: return HBM_ERR_OOM;
    case HBMI_CUDA_ERROR_NOT_INITIALIZED:
    case HBMI_CUDA_ERROR_NO_DEVICE:
    case HBMI_CUDA_ERROR_INVALID_DEVICE: return HBM_ERR_NOT_AVAILABLE;
    case HBMI_CUDA_ERROR_INVALID_VALUE: return HBM_ERR_INVALID;
    case HBMI_CUDA_ERROR_NOT_SUPPORTED: return HBM_ERR_UNSUPPORTED;
    default: return HBM_ERR_DEVICE;
    }
}

hbm_status hbmi_cuda_error(const hbmi_cuda_driver *d, hbmi_CUresult r, const char *fmt, ...) {
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *name = NULL, *text = NULL;
    if (d && d->GetErrorName(r, &name)) name = NULL;
    if (d && d->GetErrorString(r, &text)) text = NULL;
    char num[32];
    snprintf(num, sizeof num, "CUDA error %d", r);
    return hbmi_error(hbmi_cuda_status_of(r), "%s: %s (%s)", what, name ? name : num, text ? text : "no description");
}
