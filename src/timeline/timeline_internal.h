/* timeline_internal.h - the timeline module's own header (src/timeline only); neighbours read
 * timeline_events.h. */
#ifndef HBM_TIMELINE_INTERNAL_H
#define HBM_TIMELINE_INTERNAL_H

#include "core/internal.h"
#include "hbm/timeline.h"
#include "timeline/timeline_events.h"

#endif
