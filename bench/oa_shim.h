/* oa_shim.h - C declarations of bench/oa_shim.cpp (OffsetAllocator for bench_alloc). */
#ifndef HBM_BENCH_OA_SHIM_H
#define HBM_BENCH_OA_SHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OA_SHIM_NO_SPACE 0xffffffffu

/* An allocator of size units with room for max_allocs nodes (live and free), or NULL. */
void *oa_shim_new(uint32_t size, uint32_t max_allocs);
void oa_shim_delete(void *oa);
/* A handle: node index << 32 | offset; offset OA_SHIM_NO_SPACE when full. */
uint64_t oa_shim_alloc(void *oa, uint32_t size);
void oa_shim_free(void *oa, uint64_t handle);

#ifdef __cplusplus
}
#endif

#endif
