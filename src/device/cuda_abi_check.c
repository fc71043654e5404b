/* cuda_abi_check.c - when the CUDA toolkit's cuda.h is available (HBM_HAVE_CUDA_H), check
 * at compile time that hbm's own declarations (cuda_abi.h) match it: struct sizes and
 * member offsets, constants, and the signature of every entry point hbm loads. */
#include "device/cuda_abi.h"

#ifdef HBM_HAVE_CUDA_H
#include <cuda.h>

#define SAME_SIZE(a, b) _Static_assert(sizeof(a) == sizeof(b), "cuda_abi.h: size of " #a " differs from cuda.h")
#define SAME_OFF(a, b, m) _Static_assert(offsetof(a, m) == offsetof(b, m), "cuda_abi.h: offset of " #a "." #m)
#define SAME_VAL(a, b) _Static_assert((int)(a) == (int)(b), "cuda_abi.h: value of " #a " differs from cuda.h")

SAME_SIZE(hbmi_CUresult, CUresult);
SAME_SIZE(hbmi_CUdevice, CUdevice);
SAME_SIZE(hbmi_CUdeviceptr, CUdeviceptr);
SAME_SIZE(hbmi_CUmemGenericAllocationHandle, CUmemGenericAllocationHandle);
SAME_SIZE(hbmi_CUmemLocation, CUmemLocation);
SAME_OFF(hbmi_CUmemLocation, CUmemLocation, id);
SAME_SIZE(hbmi_CUmemAllocationProp, CUmemAllocationProp);
SAME_OFF(hbmi_CUmemAllocationProp, CUmemAllocationProp, location);
SAME_OFF(hbmi_CUmemAllocationProp, CUmemAllocationProp, win32HandleMetaData);
SAME_OFF(hbmi_CUmemAllocationProp, CUmemAllocationProp, allocFlags);
SAME_SIZE(hbmi_CUmemAccessDesc, CUmemAccessDesc);
SAME_OFF(hbmi_CUmemAccessDesc, CUmemAccessDesc, flags);
SAME_SIZE(hbmi_CUmemPoolProps, CUmemPoolProps);
SAME_OFF(hbmi_CUmemPoolProps, CUmemPoolProps, location);
SAME_OFF(hbmi_CUmemPoolProps, CUmemPoolProps, maxSize);
SAME_OFF(hbmi_CUmemPoolProps, CUmemPoolProps, usage);
SAME_SIZE(int, CUmemAllocationType);
SAME_SIZE(int, CUmemPool_attribute);
SAME_VAL(HBMI_CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME_VAL(HBMI_CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME_VAL(HBMI_CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME_VAL(HBMI_CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME_VAL(HBMI_CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
SAME_VAL(HBMI_CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT);
SAME_VAL(HBMI_CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND);
SAME_VAL(HBMI_CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED);
SAME_VAL(HBMI_CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
SAME_VAL(HBMI_CU_MEM_HANDLE_TYPE_NONE, CU_MEM_HANDLE_TYPE_NONE);
SAME_VAL(HBMI_CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
SAME_VAL(HBMI_CU_MEM_ACCESS_FLAGS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
SAME_VAL(HBMI_CU_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
SAME_VAL(HBMI_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
SAME_VAL(HBMI_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
SAME_VAL(HBMI_CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
SAME_VAL(HBMI_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);

#endif

typedef int hbmi_cuda_abi_check_nonempty_;
