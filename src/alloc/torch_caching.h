/* torch_caching.h - hooks into the "torch" policy (PyTorch's CUDACachingAllocator) for trace
 * replay: the twin reports each device-memory decision (segment_alloc / segment_free /
 * segment_map / segment_unmap, as PyTorch's snapshot records them) and says which segment
 * a live block belongs to. */
#ifndef HBM_ALLOC_TORCH_H
#define HBM_ALLOC_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "alloc/alloc_policy.h"

/* kind is an hbm_event_kind: HBM_EV_SEGMENT_ALLOC, _FREE, _MAP or _UNMAP; seg the base of
 * the segment (the virtual range's base for _MAP and _UNMAP). */
typedef void (*hbmi_torch_event_fn)(void *user, int kind, uint64_t addr, uint64_t size, uint64_t stream,
                                    uint64_t seg);

/* Where PyTorch's cudaMalloc put a segment, for a replay that wants the twin's address
 * order (best fit breaks ties by address) to be the recorded one: kind HBM_EV_SEGMENT_ALLOC
 * (a segment of size bytes) or HBM_EV_SEGMENT_MAP (the virtual range of a new expandable
 * segment, span bytes, whose first size bytes are being mapped). Return 1 and *addr to
 * place it there (the device memory is still taken from the device), 0 for the device's
 * own address, which *addr holds on the call for HBM_EV_SEGMENT_ALLOC. */
typedef int (*hbmi_torch_addr_fn)(void *user, int kind, uint64_t size, uint64_t span, uint64_t *addr);
void hbmi_torch_set_addr_fn(void *self, hbmi_torch_addr_fn fn, void *user);

/* The device number its out-of-memory message names ("GPU N"). */
void hbmi_torch_set_ordinal(void *self, int ordinal);
/* 1 if a runs the torch policy (not wrapped by the recorder). */
int hbmi_torch_is(const hbm_allocator *a);
/* The torch policy's state under a (a runs it: hbmi_torch_is), the self the calls below take. */
void *hbmi_torch_policy(const hbm_allocator *a);
void hbmi_torch_set_event_fn(void *self, hbmi_torch_event_fn fn, void *user);
/* The base of the segment holding the live block at addr (an expandable segment's
 * virtual range base); 0 if addr is not a live block. */
uint64_t hbmi_torch_segment_of(void *self, uint64_t addr);
/* A cudaMalloc segment that existed before a history began (a mid-run snapshot), placed
 * at addr: its live blocks (addr, size as held, size requested; in address order, inside
 * the segment) stay live, the gaps between them become cached free blocks. size is the
 * segment's total; small: the small pool (2 MiB segments). No trace event is emitted.
 * HBM_ERR_INVALID for blocks outside the segment or overlapping; HBM_ERR_OOM when the
 * device cannot hold it. */
typedef struct hbmi_torch_seed_block {
    uint64_t addr, size, requested;
} hbmi_torch_seed_block;
hbm_status hbmi_torch_seed_segment(void *self, uint64_t addr, uint64_t size, uint64_t stream, int small,
                                   const hbmi_torch_seed_block *live, size_t nlive);

/* An expandable segment that existed before a history began: one virtual range of the
 * pool (small: 2 MiB pages, else 20 MiB) for stream, from base, whose runs of mapped pages
 * are runs[0..nruns) (in address order, page-aligned from base), each with its live blocks
 * (in address order); the gaps inside a run become cached free blocks, the rest of the
 * range stays unmapped. The range spans what PyTorch reserves (1 1/8 of the device),
 * more when the runs reach further. No trace event is emitted. */
typedef struct hbmi_torch_seed_run {
    uint64_t addr, size;
    const hbmi_torch_seed_block *live;
    size_t nlive;
} hbmi_torch_seed_run;
hbm_status hbmi_torch_seed_expandable(void *self, uint64_t base, uint64_t stream, int small,
                                      const hbmi_torch_seed_run *runs, size_t nruns);

/* get_allocation_size: the bytes a new segment for a request of rounded bytes would take
 * (what PyTorch's OOM message says it "tried to allocate"). */
uint64_t hbmi_torch_allocation_size(uint64_t rounded);

/* torch.cuda.empty_cache(): release every unsplit cached block, unmap free pages. */
hbm_status hbmi_torch_empty_cache(void *self);

#endif
