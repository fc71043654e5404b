/* minimalloc.c - MiniMalloc's CSV (id,lower,upper,size): one row per buffer of a
 * timeline, lifetimes [lower, upper) on the timeline's clock, ids 0..n-1. */
#include "pack/minimalloc_csv.h"
#include "trace/trace_internal.h"

hbm_status hbm_export_minimalloc(const hbm_timeline *tl, FILE *f) {
    if (!tl || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_export_minimalloc: NULL argument");
    return hbmi_minimalloc_write(tl, f, 0);
}
