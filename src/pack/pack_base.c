/* pack_base.c - the packer's ground floor: the clock and the lower bound
 * (pack_base.h). */
#include "pack/pack_base.h"

_Thread_local hbmi_pack_clock hbmi_pack_clk;

hbm_status hbmi_pack_lower_bound(const hbm_timeline *tl, uint64_t *lb) {
    uint64_t peak = 0;
    int64_t at;
    hbm_status s = hbm_timeline_peak(tl, &peak, &at);
    if (s) return s;
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        if ((b->flags & HBM_TL_PINNED) && b->offset + b->size > peak) peak = b->offset + b->size;
    }
    *lb = peak;
    return HBM_OK;
}
