/* src/pack/pack_sky.h - skyline packing (pack_sky.c). */
#ifndef HBM_PACK_SKY_H
#define HBM_PACK_SKY_H

#include "pack/pack_base.h"

/* A construction, then node-limited searches at targets between lower_bound and the best
 * so far, up to max_attempts, the bound or the deadline (ns, 0 = none). Only packings with
 * an extent below `upper` (UINT64_MAX: any) count; the best is written into tl and *extent
 * gets it, else tl is left alone and *extent = UINT64_MAX (also for timelines with pinned
 * buffers or more than HBMI_SKY_MAX buffers). seed varies the random tie-breaking between
 * calls; reverse runs time backwards (the skyline then grows from the last section; some
 * timelines pack better that way). */
#define HBMI_SKY_MAX 2000
hbm_status hbmi_pack_sky(hbm_timeline *tl, uint64_t def_align, uint64_t lower_bound, uint64_t upper,
                         uint64_t deadline_ns, uint32_t max_attempts, uint64_t seed, int reverse,
                         uint64_t *extent);

#endif
