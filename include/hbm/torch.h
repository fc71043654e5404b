/* hbm/torch.h - hbm as PyTorch's CUDA allocator (torch.cuda.memory.CUDAPluggableAllocator).
 *
 *   import torch
 *   a = torch.cuda.memory.CUDAPluggableAllocator("libhbm.so", "hbm_torch_malloc", "hbm_torch_free")
 *   torch.cuda.memory.change_current_allocator(a)
 *
 * One hbm allocator per device ("cuda:<device>"), opened on first use with the
 * configuration from the environment (HBM_ALLOCATOR=torch|vmm|cuda_async|platform|bfc;
 * torch: PyTorch's own caching allocator's rules, with PYTORCH_CUDA_ALLOC_CONF's settings,
 * HBM_LIMIT, XLA_PYTHON_CLIENT_MEM_FRACTION, ...; see `hbm config --help`). When an
 * allocation fails, hbm's OOM report goes to stderr and NULL goes back to PyTorch, which
 * raises its OutOfMemoryError. Streams are passed through: cuda_async orders its frees by
 * them, torch keeps each stream's cached blocks apart as PyTorch does; the others ignore
 * them. */
#ifndef HBM_TORCH_H
#define HBM_TORCH_H

#include <sys/types.h>

#include "hbm/alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st; /* cudaStream_t is struct CUstream_st * */

HBM_API void *hbm_torch_malloc(ssize_t size, int device, struct CUstream_st *stream);
HBM_API void hbm_torch_free(void *ptr, ssize_t size, int device, struct CUstream_st *stream);

/* The allocator serving device (opened if needed), for stats and reports; NULL with the
 * reason in hbm_last_error() if it cannot be opened. */
HBM_API hbm_allocator *hbm_torch_allocator(int device);
/* Open the allocators with this configuration string (as hbm_allocator_open takes it:
 * "allocator=vmm,limit=20GiB"; defaults plus the string, no environment) instead of the
 * environment; NULL goes back to the environment. Validated now (HBM_ERR_CONFIG naming
 * the key); HBM_ERR_INVALID once an allocator is open (call hbm_torch_shutdown first). */
HBM_API hbm_status hbm_torch_configure(const char *config);
/* On every OOM, also write hbm's OOM report to path, whole (NULL: stderr only). */
HBM_API hbm_status hbm_torch_oom_report_file(const char *path);
/* Close every allocator and device opened here (frees what is still live). */
HBM_API void hbm_torch_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
