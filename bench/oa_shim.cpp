// oa_shim.cpp - a C face for sebbbi/OffsetAllocator (built from ../shared/anchors by the
// bench CMake when a C++ compiler and the sources are there), so that bench_alloc can run
// it beside bfc in the same process. Benchmark only: never part of libhbm.
#include <new>

#include "oa_shim.h"
#include "offsetAllocator.hpp"

extern "C" {

void *oa_shim_new(uint32_t size, uint32_t max_allocs) {
    return new (std::nothrow) OffsetAllocator::Allocator(size, max_allocs);
}

void oa_shim_delete(void *oa) { delete static_cast<OffsetAllocator::Allocator *>(oa); }

uint64_t oa_shim_alloc(void *oa, uint32_t size) {
    OffsetAllocator::Allocation r = static_cast<OffsetAllocator::Allocator *>(oa)->allocate(size);
    return (uint64_t)r.metadata << 32 | r.offset;
}

void oa_shim_free(void *oa, uint64_t handle) {
    OffsetAllocator::Allocation r;
    r.offset = (uint32_t)handle;
    r.metadata = (uint32_t)(handle >> 32);
    static_cast<OffsetAllocator::Allocator *>(oa)->free(r);
}

}
