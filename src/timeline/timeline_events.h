/* src/timeline/timeline_events.h - a timeline as its sequence of allocs and frees: what a
 * neighbour (the trace's event order, src/trace/trace.c) reads of the timeline module.
 * timeline_internal.h includes this and stays inside src/timeline. */
#ifndef HBM_TIMELINE_EVENTS_H
#define HBM_TIMELINE_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/timeline.h"

/* Buffer buf starts (is_start = 1) or ends at time t. */
typedef struct hbmi_tl_event {
    int64_t t;
    int is_start;
    size_t buf;
} hbmi_tl_event;

/* The 2 x count events of tl in time order; at equal times ends come before starts
 * (lifetimes are half-open) and ties go by buffer index. Free *out with hbmi_free. */
hbm_status hbmi_timeline_events(const hbm_timeline *tl, hbmi_tl_event **out);

#endif
