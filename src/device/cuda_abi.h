/* cuda_abi.h - the few CUDA driver API types, constants and signatures hbm uses, written
 * out by hbm so that a machine without the CUDA toolkit still builds. Names carry an
 * hbmi_ prefix so they never clash with <cuda.h>; when the toolkit is present,
 * cuda_abi_check.c compiles these against <cuda.h> and fails the build on any mismatch
 * of size, layout or value. The driver is loaded at run time (cuda_driver.c). */
#ifndef HBM_CUDA_ABI_H
#define HBM_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int hbmi_CUresult;           /* enum cudaError_enum */
typedef int hbmi_CUdevice;
typedef unsigned long long hbmi_CUdeviceptr;
typedef unsigned long long hbmi_CUmemGenericAllocationHandle;
typedef struct hbmi_CUctx_st *hbmi_CUcontext;
typedef struct hbmi_CUstream_st *hbmi_CUstream;
typedef struct hbmi_CUmemPool_st *hbmi_CUmemoryPool;

enum {
    HBMI_CUDA_SUCCESS = 0,
    HBMI_CUDA_ERROR_INVALID_VALUE = 1,
    HBMI_CUDA_ERROR_OUT_OF_MEMORY = 2,
    HBMI_CUDA_ERROR_NOT_INITIALIZED = 3,
    HBMI_CUDA_ERROR_NO_DEVICE = 100,
    HBMI_CUDA_ERROR_INVALID_DEVICE = 101,
    HBMI_CUDA_ERROR_INVALID_CONTEXT = 201,
    HBMI_CUDA_ERROR_NOT_FOUND = 500,
    HBMI_CUDA_ERROR_NOT_SUPPORTED = 801,
    HBMI_CUDA_ERROR_UNKNOWN = 999
};

/* CUmemAllocationType, CUmemAllocationHandleType, CUmemLocationType, CUmemAccess_flags,
 * CUmemAllocationGranularity_flags, CUmemPool_attribute, CUdriverProcAddress_flags */
enum {
    HBMI_CU_MEM_ALLOCATION_TYPE_PINNED = 1,
    HBMI_CU_MEM_HANDLE_TYPE_NONE = 0,
    HBMI_CU_MEM_LOCATION_TYPE_DEVICE = 1,
    HBMI_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
    HBMI_CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
    HBMI_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
    HBMI_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
    HBMI_CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
    HBMI_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2
};

typedef struct hbmi_CUmemLocation {
    int type; /* CUmemLocationType */
    int id;
} hbmi_CUmemLocation;

typedef struct hbmi_CUmemAllocationProp {
    int type;                 /* CUmemAllocationType */
    int requestedHandleTypes; /* CUmemAllocationHandleType */
    hbmi_CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} hbmi_CUmemAllocationProp;

typedef struct hbmi_CUmemAccessDesc {
    hbmi_CUmemLocation location;
    int flags; /* CUmemAccess_flags */
} hbmi_CUmemAccessDesc;

typedef struct hbmi_CUmemPoolProps {
    int allocType;   /* CUmemAllocationType */
    int handleTypes; /* CUmemAllocationHandleType */
    hbmi_CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} hbmi_CUmemPoolProps;

/* X(member, exported symbol, return, parameters). The member names drop the "cu" so
 * cuda.h's macros (cuMemAlloc -> cuMemAlloc_v2) never rewrite them. */
#define HBMI_CUDA_FUNCS(X)                                                                        \
    X(Init, "cuInit", (unsigned flags))                                                           \
    X(DriverGetVersion, "cuDriverGetVersion", (int *version))                                     \
    X(GetErrorName, "cuGetErrorName", (hbmi_CUresult e, const char **name))                       \
    X(GetErrorString, "cuGetErrorString", (hbmi_CUresult e, const char **text))                   \
    X(DeviceGetCount, "cuDeviceGetCount", (int *count))                                           \
    X(DeviceGet, "cuDeviceGet", (hbmi_CUdevice * dev, int ordinal))                               \
    X(DeviceGetName, "cuDeviceGetName", (char *name, int len, hbmi_CUdevice dev))                 \
    X(DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, hbmi_CUdevice dev))                 \
    X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (hbmi_CUcontext * ctx, hbmi_CUdevice dev)) \
    X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (hbmi_CUdevice dev))               \
    X(CtxGetCurrent, "cuCtxGetCurrent", (hbmi_CUcontext * ctx))                                   \
    X(CtxSetCurrent, "cuCtxSetCurrent", (hbmi_CUcontext ctx))                                     \
    X(CtxSynchronize, "cuCtxSynchronize", (void))                                                 \
    X(MemGetInfo, "cuMemGetInfo_v2", (size_t * free_bytes, size_t * total_bytes))                 \
    X(MemAlloc, "cuMemAlloc_v2", (hbmi_CUdeviceptr * dptr, size_t bytes))                         \
    X(MemFree, "cuMemFree_v2", (hbmi_CUdeviceptr dptr))                                           \
    X(StreamSynchronize, "cuStreamSynchronize", (hbmi_CUstream stream))                           \
    X(MemPoolCreate, "cuMemPoolCreate", (hbmi_CUmemoryPool * pool, const hbmi_CUmemPoolProps *props)) \
    X(MemPoolDestroy, "cuMemPoolDestroy", (hbmi_CUmemoryPool pool))                               \
    X(MemPoolSetAttribute, "cuMemPoolSetAttribute", (hbmi_CUmemoryPool pool, int attr, void *value)) \
    X(MemPoolGetAttribute, "cuMemPoolGetAttribute", (hbmi_CUmemoryPool pool, int attr, void *value)) \
    X(MemPoolTrimTo, "cuMemPoolTrimTo", (hbmi_CUmemoryPool pool, size_t keep))                    \
    X(MemAllocFromPoolAsync, "cuMemAllocFromPoolAsync",                                           \
      (hbmi_CUdeviceptr * dptr, size_t bytes, hbmi_CUmemoryPool pool, hbmi_CUstream stream))      \
    X(MemFreeAsync, "cuMemFreeAsync", (hbmi_CUdeviceptr dptr, hbmi_CUstream stream))              \
    X(MemAddressReserve, "cuMemAddressReserve",                                                   \
      (hbmi_CUdeviceptr * ptr, size_t size, size_t align, hbmi_CUdeviceptr addr, unsigned long long flags)) \
    X(MemAddressFree, "cuMemAddressFree", (hbmi_CUdeviceptr ptr, size_t size))                    \
    X(MemCreate, "cuMemCreate",                                                                   \
      (hbmi_CUmemGenericAllocationHandle * h, size_t size, const hbmi_CUmemAllocationProp *prop,  \
       unsigned long long flags))                                                                 \
    X(MemRelease, "cuMemRelease", (hbmi_CUmemGenericAllocationHandle h))                          \
    X(MemMap, "cuMemMap",                                                                         \
      (hbmi_CUdeviceptr ptr, size_t size, size_t offset, hbmi_CUmemGenericAllocationHandle h,     \
       unsigned long long flags))                                                                 \
    X(MemUnmap, "cuMemUnmap", (hbmi_CUdeviceptr ptr, size_t size))                                \
    X(MemSetAccess, "cuMemSetAccess",                                                             \
      (hbmi_CUdeviceptr ptr, size_t size, const hbmi_CUmemAccessDesc *desc, size_t count))        \
    X(MemGetAllocationGranularity, "cuMemGetAllocationGranularity",                               \
      (size_t * gran, const hbmi_CUmemAllocationProp *prop, int option))

#endif
