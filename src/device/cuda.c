/* cuda.c - NVIDIA GPUs through the CUDA driver API. The backend itself (dlopen of
 * libcuda.so.1, cuMemAlloc/cuMemFree, cuMemGetInfo) is the subject of a later change;
 * until then cuda:<n> is refused with a clear status instead of pretending. */
#include "core/internal.h"
#include "device/device_internal.h"

hbm_status hbmi_cuda_device_create(const hbmi_device_args *args, const hbm_device_ops **ops, void **ctx,
                                   hbm_device_info *info) {
    return hbmi_error(HBM_ERR_NOT_AVAILABLE,
                      "device '%s': the CUDA backend is not available in this build of hbm yet; "
                      "use sim:SIZE (e.g. sim:80GiB) to simulate a GPU or host:SIZE for real host memory",
                      args->spec);
}
