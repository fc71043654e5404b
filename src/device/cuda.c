/* cuda.c - cuda:<n>: an NVIDIA GPU through the CUDA driver API, loaded at run time
 * (cuda_driver.c). Raw allocations are cuMemAlloc/cuMemFree in the device's primary
 * context, the context the CUDA runtime (PyTorch, JAX) uses too; free and total memory
 * come from cuMemGetInfo. Policies that need pools or virtual memory reach the driver
 * through hbmi_cuda_dev_of(). */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "device/cuda_driver.h"
#include "device/device_internal.h"
#include "hbm/size.h"

typedef struct cuda_device {
    hbmi_cuda_dev cd;
    char label[24]; /* "cuda:0" for messages */
} cuda_device;

hbm_status hbmi_cuda_enter(const hbmi_cuda_dev *cd, hbmi_CUcontext *saved) {
    hbmi_CUcontext cur = NULL;
    hbmi_CUresult r = cd->drv->CtxGetCurrent(&cur);
    if (!r && cur != cd->ctx) r = cd->drv->CtxSetCurrent(cd->ctx);
    if (r) return hbmi_cuda_error(cd->drv, r, "cuda:%d: cannot make the primary context current", cd->ordinal);
    *saved = cur;
    return HBM_OK;
}

void hbmi_cuda_leave(const hbmi_cuda_dev *cd, hbmi_CUcontext saved) {
    if (saved != cd->ctx) cd->drv->CtxSetCurrent(saved);
}

static hbm_status cuda_alloc(void *ctx, uint64_t size, uint64_t *addr_out) {
    cuda_device *d = ctx;
    hbmi_CUcontext saved;
    hbm_status s = hbmi_cuda_enter(&d->cd, &saved);
    if (s) return s;
    hbmi_CUdeviceptr p = 0;
    hbmi_CUresult r = d->cd.drv->MemAlloc(&p, (size_t)size);
    hbmi_cuda_leave(&d->cd, saved);
    if (r) {
        char h[32];
        return hbmi_cuda_error(d->cd.drv, r, "%s: cuMemAlloc(%s)", d->label, hbm_size_human(size, h));
    }
    *addr_out = p;
    return HBM_OK;
}

static hbm_status cuda_free(void *ctx, uint64_t addr, uint64_t size) {
    cuda_device *d = ctx;
    hbmi_CUcontext saved;
    hbm_status s = hbmi_cuda_enter(&d->cd, &saved);
    if (s) return s;
    hbmi_CUresult r = d->cd.drv->MemFree(addr);
    hbmi_cuda_leave(&d->cd, saved);
    if (r) return hbmi_cuda_error(d->cd.drv, r, "%s: cuMemFree(0x%llx)", d->label, (unsigned long long)addr);
    return HBM_OK;
}

static hbm_status cuda_mem_info(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes) {
    cuda_device *d = ctx;
    hbmi_CUcontext saved;
    hbm_status s = hbmi_cuda_enter(&d->cd, &saved);
    if (s) return s;
    size_t f = 0, t = 0;
    hbmi_CUresult r = d->cd.drv->MemGetInfo(&f, &t);
    hbmi_cuda_leave(&d->cd, saved);
    if (r) return hbmi_cuda_error(d->cd.drv, r, "%s: cuMemGetInfo", d->label);
    *free_bytes = f;
    *total_bytes = t;
    return HBM_OK;
}

static void cuda_destroy(void *ctx) {
    cuda_device *d = ctx;
    d->cd.drv->DevicePrimaryCtxRelease(d->cd.dev);
    hbmi_free(d);
}

static const hbm_device_ops cuda_ops = {
    .kind = "cuda", .alloc = cuda_alloc, .free = cuda_free, .mem_info = cuda_mem_info, .destroy = cuda_destroy};

hbmi_cuda_dev *hbmi_cuda_dev_of(hbm_device *dev) {
    cuda_device *d = dev ? hbmi_device_ctx(dev, &cuda_ops) : NULL;
    return d ? &d->cd : NULL;
}

hbm_status hbmi_cuda_device_create(const hbmi_device_args *args, const hbm_device_ops **ops, void **ctx,
                                   hbm_device_info *info) {
    if (args->free_bytes) return hbmi_error(HBM_ERR_INVALID, "device '%s': free= is for sim devices only", args->spec);
    hbm_status s;
    const hbmi_cuda_driver *drv = hbmi_cuda_driver_get(&s);
    if (!drv) return hbmi_error_prefix(s, "device '%s': ", args->spec);
    int count = 0;
    hbmi_CUresult r = drv->DeviceGetCount(&count);
    if (r) return hbmi_cuda_error(drv, r, "device '%s': cuDeviceGetCount", args->spec);
    if (args->ordinal >= count)
        return hbmi_error(HBM_ERR_NOT_AVAILABLE, "device '%s': no such GPU, the driver (%s) sees %d", args->spec,
                          drv->path, count);
    cuda_device *d = hbmi_calloc(1, sizeof *d);
    if (!d) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a cuda device");
    d->cd.drv = drv;
    d->cd.ordinal = args->ordinal;
    snprintf(d->label, sizeof d->label, "cuda:%d", args->ordinal);
    char name[64] = "";
    size_t total = 0;
    if ((r = drv->DeviceGet(&d->cd.dev, args->ordinal)) != 0)
        s = hbmi_cuda_error(drv, r, "%s: cuDeviceGet", d->label);
    else if ((r = drv->DeviceGetName(name, (int)sizeof name, d->cd.dev)) != 0)
        s = hbmi_cuda_error(drv, r, "%s: cuDeviceGetName", d->label);
    else if ((r = drv->DeviceTotalMem(&total, d->cd.dev)) != 0)
        s = hbmi_cuda_error(drv, r, "%s: cuDeviceTotalMem", d->label);
    else if ((r = drv->DevicePrimaryCtxRetain(&d->cd.ctx, d->cd.dev)) != 0)
        s = hbmi_cuda_error(drv, r, "%s: cuDevicePrimaryCtxRetain", d->label);
    if (s) {
        hbmi_free(d);
        return s;
    }
    name[sizeof name - 1] = 0;
    snprintf(info->kind, sizeof info->kind, "cuda");
    snprintf(info->name, sizeof info->name, "%s", args->name ? args->name : name);
    info->total_bytes = total;
    info->alignment = 256;
    info->granularity = 512;
    *ops = &cuda_ops;
    *ctx = d;
    return HBM_OK;
}
