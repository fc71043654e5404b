/* export_minimalloc.c - MiniMalloc's CSV (id,lower,upper,size): one row per buffer of a
 * timeline, lifetimes [lower, upper) on the timeline's clock.
 * TODO(merge): the packer branch has hbm_minimalloc_write (hbm/pack.h) with the same
 * columns; keep one of the two after the merge. */
#include <inttypes.h>

#include "trace/trace_internal.h"

hbm_status hbm_export_minimalloc(const hbm_timeline *tl, FILE *f) {
    if (!tl || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_export_minimalloc: NULL argument");
    fputs("id,lower,upper,size\n", f);
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        fprintf(f, "%zu,%" PRId64 ",%" PRId64 ",%" PRIu64 "\n", i, b->start, b->end, b->size);
    }
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the MiniMalloc CSV failed") : HBM_OK;
}
