/* cuda_driver.h - the CUDA driver, loaded at run time.
 *
 * hbm never links against libcuda: hbmi_cuda_driver() dlopens it on first use
 * ($HBM_CUDA_DRIVER if set, e.g. the test suite's fake driver, else "libcuda.so.1"),
 * resolves every entry point of HBMI_CUDA_FUNCS and calls cuInit(0). The result (table
 * or failure) is kept for the life of the process. */
#ifndef HBM_CUDA_DRIVER_H
#define HBM_CUDA_DRIVER_H

#include "device/cuda_abi.h"
#include "hbm/device.h"
#include "hbm/status.h"

typedef struct hbmi_cuda_driver {
#define HBMI_CUDA_MEMBER_(member, sym, params) hbmi_CUresult (*member) params;
    HBMI_CUDA_FUNCS(HBMI_CUDA_MEMBER_)
#undef HBMI_CUDA_MEMBER_
    int version; /* cuDriverGetVersion, e.g. 13000 */
    char path[256];
} hbmi_cuda_driver;

/* The loaded driver, or NULL with the status and message in *status / last error:
 * HBM_ERR_NOT_AVAILABLE "no CUDA driver ..." when the library or cuInit is missing. */
const hbmi_cuda_driver *hbmi_cuda_driver_get(hbm_status *status);

/* Map a driver result to an hbm_status and set the message "<what>: <CUDA_ERROR_NAME>
 * (<driver text>)". OUT_OF_MEMORY -> HBM_ERR_OOM; NO_DEVICE, INVALID_DEVICE,
 * NOT_INITIALIZED -> HBM_ERR_NOT_AVAILABLE; INVALID_VALUE -> HBM_ERR_INVALID;
 * NOT_SUPPORTED -> HBM_ERR_UNSUPPORTED; anything else HBM_ERR_DEVICE. */
hbm_status hbmi_cuda_error(const hbmi_cuda_driver *d, hbmi_CUresult r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
hbm_status hbmi_cuda_status_of(hbmi_CUresult r);

/* The CUDA side of an open cuda:<n> device, for the policies that use pools and virtual
 * memory (cuda_async, vmm). NULL when dev is not a CUDA device. */
typedef struct hbmi_cuda_dev {
    const hbmi_cuda_driver *drv;
    hbmi_CUdevice dev;
    hbmi_CUcontext ctx; /* the device's primary context (shared with the CUDA runtime) */
    int ordinal;
} hbmi_cuda_dev;
hbmi_cuda_dev *hbmi_cuda_dev_of(hbm_device *dev);

/* Make the device's primary context current on this thread; *saved gets the previous one
 * for hbmi_cuda_leave. Cheap when it is already current (the usual case). */
hbm_status hbmi_cuda_enter(const hbmi_cuda_dev *cd, hbmi_CUcontext *saved);
void hbmi_cuda_leave(const hbmi_cuda_dev *cd, hbmi_CUcontext saved);

#endif
