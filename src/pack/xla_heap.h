/* src/pack/xla_heap.h - XLA's heap simulator packing (GlobalDecreasingSizeBestFitHeap). */
#ifndef HBM_PACK_XLA_HEAP_H
#define HBM_PACK_XLA_HEAP_H

#include <stdint.h>

#include "hbm/status.h"
#include "hbm/timeline.h"

/* Give every buffer of tl an offset the way XLA's buffer assignment packs its temp
 * allocation: buffers sorted by decreasing size then decreasing lifetime ("spatial",
 * temporal = 0) or by decreasing lifetime then size (temporal = 1), ties by index; each
 * placed at the smallest free gap among the buffers already placed that overlap it in
 * time, else at the end; offsets rounded up to the buffer's alignment. Lifetimes are
 * half-open [start, end). Buffers with the same id are one colocated buffer (XLA's
 * ShareWith): they get one offset, placed with the first of them in index order.
 * Buffers flagged HBM_TL_PINNED keep their offsets and are placed first.
 * *heap_size receives the extent (max offset + size). */
hbm_status hbmi_xla_best_fit(hbm_timeline *tl, int temporal, uint64_t *heap_size);

#endif
