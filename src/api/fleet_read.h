/* src/api/fleet_read.h - how the fleet's engine (fleet.c) reads a rank: from a trace, a memory
 * profile or a summary document (fleet_summary.c). The renderers see only the result
 * (report/fleet_model.h). */
#ifndef HBM_API_FLEET_READ_H
#define HBM_API_FLEET_READ_H

#include "report/fleet_model.h"

/* The summary of a trace's figures into r (name etc. left to the caller). */
hbm_status hbmi_rank_from_trace(const hbm_trace *t, hbmi_rank *r);
/* The summary of allocator i of a profile's memory profile, XProf's figures as hbm view
 * PROFILE shows them (hbm_memprof_summary: in use, reserved, fragmentation at the peak, the
 * allocations live there by module and kind); mp attributed first (hbm_memprof_attribute). */
hbm_status hbmi_rank_from_memprof(const hbm_memprof *mp, size_t i, hbmi_rank *r);
void hbmi_rank_free(hbmi_rank *r);
/* Its ranks back from a summary document (text, len bytes); name: for errors. */
hbm_status hbmi_summary_read(const char *text, size_t len, const char *name, hbmi_rank **out, size_t *n);

#endif
