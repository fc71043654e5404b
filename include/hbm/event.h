/* hbm/event.h - the kinds of memory event: what an allocator emits (the PyTorch twin's
 * segment events), a trace records and every reader and writer of traces names. A
 * low-level header: it needs nothing but the status codes. */
#ifndef HBM_EVENT_H
#define HBM_EVENT_H

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, text as written by importers/exporters) */
#define HBM_TRACE_KINDS(X)                              \
    X(HBM_EV_ALLOC, 1, "alloc")                         \
    X(HBM_EV_FREE, 2, "free")                           \
    X(HBM_EV_OOM, 3, "oom")                             \
    X(HBM_EV_SEGMENT_ALLOC, 4, "segment_alloc")         \
    X(HBM_EV_SEGMENT_FREE, 5, "segment_free")           \
    X(HBM_EV_FREE_REQUESTED, 6, "free_requested")      \
    X(HBM_EV_SYNC, 7, "sync")                           \
    X(HBM_EV_SEGMENT_MAP, 8, "segment_map")             \
    X(HBM_EV_SEGMENT_UNMAP, 9, "segment_unmap")

typedef enum hbm_event_kind {
#define HBM_EV_ENUM_(name, value, text) name = value,
    HBM_TRACE_KINDS(HBM_EV_ENUM_)
#undef HBM_EV_ENUM_
} hbm_event_kind;

HBM_API const char *hbm_event_kind_str(hbm_event_kind k); /* "alloc", ...; "?" if unknown */

#ifdef __cplusplus
}
#endif
#endif
