/* src/pack/pack_greedy.h - greedy placement in a chosen order (pack_greedy.c). */
#ifndef HBM_PACK_GREEDY_H
#define HBM_PACK_GREEDY_H

#include "pack/pack_base.h"

/* The orders the greedy heuristics can take buffers in. */
typedef enum hbmi_pack_order {
    HBMI_ORDER_SIZE,     /* size desc, then start (TFLite's greedy by size) */
    HBMI_ORDER_AREA,     /* size * lifetime desc */
    HBMI_ORDER_PRESSURE, /* max live bytes over the lifetime desc, then size */
    HBMI_ORDER_LENGTH,   /* lifetime desc, then size */
    HBMI_ORDER_START,    /* start asc, then size desc */
    HBMI_ORDER_COUNT_
} hbmi_pack_order;

/* Place the unpinned buffers of tl one at a time in the given order, each into the
 * smallest gap that holds it among the time-overlapping buffers already placed (best fit,
 * or lowest fit when best_fit is 0), else on top. Writes offsets; *extent gets the result. */
hbm_status hbmi_pack_greedy(hbm_timeline *tl, uint64_t def_align, hbmi_pack_order order,
                            int best_fit, uint64_t *extent);

#endif
