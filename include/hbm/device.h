/* hbm/device.h - where device memory comes from.
 *
 * A device hands out raw memory ranges. Allocators (hbm/alloc.h) sit on top of one.
 * Addresses are uint64_t device addresses: hbm never dereferences them.
 *
 *   spec                      what it is
 *   sim:80GiB                 simulated device: address space only, deterministic addresses
 *   sim:16GiB,fail_at=3       ... whose 3rd raw allocation fails (fault injection)
 *   host:1GiB                 real host memory (mmap), so tests can touch every byte
 *   cuda:0                    an NVIDIA GPU through the CUDA driver (not available yet)
 *
 * sim options (comma-separated after the size):
 *   fail_at=N      the Nth raw allocation (1-based) fails with HBM_ERR_OOM
 *   fail_after=N   every raw allocation after the Nth fails
 *   fail_every=N   every Nth raw allocation fails
 *   free=SIZE      report this much free memory (as if other processes used the rest)
 *   granularity=S  raw allocations are rounded up to S for accounting (default 512)
 *   name=TEXT      device name shown in reports
 * host accepts the same options except free/name.
 */
#ifndef HBM_DEVICE_H
#define HBM_DEVICE_H

#include <stdint.h>

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbm_device hbm_device;

typedef struct hbm_device_info {
    char kind[16];          /* "sim", "host", "cuda" */
    char name[64];          /* "sim:80.00 GiB", "NVIDIA H200" */
    uint64_t total_bytes;   /* physical capacity */
    uint64_t alignment;     /* alignment of raw allocations */
    uint64_t granularity;   /* raw allocations are accounted in multiples of this */
} hbm_device_info;

/* Counters of raw traffic, for replay comparisons and tests. */
typedef struct hbm_device_counters {
    uint64_t alloc_calls;   /* raw allocations attempted */
    uint64_t alloc_failures;
    uint64_t free_calls;
    uint64_t bytes_in_use;  /* raw bytes currently held by callers (after granularity) */
    uint64_t peak_bytes_in_use;
} hbm_device_counters;

HBM_API hbm_status hbm_device_open(const char *spec, hbm_device **out);
HBM_API void hbm_device_close(hbm_device *dev);

HBM_API hbm_status hbm_device_info_get(const hbm_device *dev, hbm_device_info *out);
/* Free and total memory as the device reports it now (cuMemGetInfo semantics). */
HBM_API hbm_status hbm_device_mem_info(hbm_device *dev, uint64_t *free_bytes, uint64_t *total_bytes);
HBM_API hbm_status hbm_device_counters_get(const hbm_device *dev, hbm_device_counters *out);

/* Raw allocation, as cudaMalloc/cudaFree. Thread-safe. Used by allocators; call directly
 * only for what-if tools. size must be > 0. hbm_device_free needs the exact address. */
HBM_API hbm_status hbm_device_alloc(hbm_device *dev, uint64_t size, uint64_t *addr_out);
HBM_API hbm_status hbm_device_free(hbm_device *dev, uint64_t addr);

/* A device backend, for callers that bring their own memory source. ctx is owned by
 * the device once hbm_device_open_ops succeeds (destroy is called on close). */
typedef struct hbm_device_ops {
    const char *kind;
    hbm_status (*alloc)(void *ctx, uint64_t size, uint64_t *addr_out);
    hbm_status (*free)(void *ctx, uint64_t addr, uint64_t size);
    hbm_status (*mem_info)(void *ctx, uint64_t *free_bytes, uint64_t *total_bytes);
    void (*destroy)(void *ctx);
} hbm_device_ops;

HBM_API hbm_status hbm_device_open_ops(const hbm_device_ops *ops, void *ctx, const hbm_device_info *info,
                                       hbm_device **out);

#ifdef __cplusplus
}
#endif
#endif
