/* hbm/timeline.h - the one currency of hbm: buffers with sizes and lifetimes.
 *
 * A static plan (hbm plan) and a runtime trace are the same thing seen twice: buffers,
 * each with a size, a lifetime [start, end) on some clock (schedule step, event index,
 * microseconds), an optional offset/address and a tag. Every front end (HLO planner,
 * trace recorder, importers) produces an hbm_timeline; every back end (packer, replay,
 * reports, viewer, exporters) consumes one.
 *
 *   hbm_timeline *tl;  size_t i;
 *   hbm_timeline_new(&tl);
 *   hbm_tag t = {.op_name = "fusion.3", .shape = "f32[1024]", .category = HBM_CAT_TEMP};
 *   hbm_timeline_add(tl, 4096, 0, 5, &t, &i);      // 4 KiB live over steps [0, 5)
 *   uint64_t peak; int64_t at;  hbm_timeline_peak(tl, &peak, &at);
 *   hbm_timeline_free(tl);
 */
#ifndef HBM_TIMELINE_H
#define HBM_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/status.h"
#include "hbm/tag.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HBM_NO_OFFSET UINT64_MAX

typedef struct hbm_tl_buffer {
    uint64_t id;        /* caller's id; hbm_timeline_add sets it to the index */
    uint64_t size;      /* bytes */
    int64_t start;      /* lifetime [start, end), start < end */
    int64_t end;
    uint64_t offset;    /* assigned offset/address, HBM_NO_OFFSET if none */
    uint64_t alignment; /* required alignment of offset, 0 or 1 = none */
    uint32_t tag;       /* tag index (hbm_timeline_tag), 0 = none */
    uint32_t flags;     /* free for producers (e.g. HBM_TL_PINNED) */
} hbm_tl_buffer;

#define HBM_TL_PINNED 1u /* offset is fixed by the producer; packers keep it */

typedef struct hbm_timeline {
    hbm_tl_buffer *buffers; /* count entries, in insertion order */
    size_t count;
    char clock[16];          /* unit of start/end: "step", "event", "us", "" */
    char name[64];           /* what it came from (module name, trace file) */
    struct hbmi_timeline_priv *priv_; /* hbm's own: the buffers' capacity, the tag table */
} hbm_timeline;

HBM_API hbm_status hbm_timeline_new(hbm_timeline **out);
HBM_API void hbm_timeline_free(hbm_timeline *tl);

/* Append a buffer (size > 0, start < end). tag may be NULL; it is copied. */
HBM_API hbm_status hbm_timeline_add(hbm_timeline *tl, uint64_t size, int64_t start, int64_t end,
                                    const hbm_tag *tag, size_t *index_out);
/* Reserve room for n more buffers. */
HBM_API hbm_status hbm_timeline_reserve(hbm_timeline *tl, size_t n);
/* Intern a tag into tl's table and return its index (0 for NULL). */
HBM_API hbm_status hbm_timeline_intern(hbm_timeline *tl, const hbm_tag *tag, uint32_t *tag_out);
/* The tag of buffer i, or NULL. */
HBM_API const hbm_tag *hbm_timeline_tag(const hbm_timeline *tl, size_t i);
/* The tag with index tag (as in hbm_tl_buffer.tag), or NULL. */
HBM_API const hbm_tag *hbm_timeline_tag_at(const hbm_timeline *tl, uint32_t tag);

/* Max over time of the bytes live (the lower bound of any packing) and the first time it
 * is reached. An empty timeline gives 0 and 0. */
HBM_API hbm_status hbm_timeline_peak(const hbm_timeline *tl, uint64_t *peak_bytes, int64_t *peak_time);

/* Check that every buffer has an offset, honours its alignment, fits below capacity
 * (0 = no limit), and that no two buffers overlap in both time and space. On failure
 * HBM_ERR_CORRUPT names the two buffers. */
HBM_API hbm_status hbm_timeline_verify(const hbm_timeline *tl, uint64_t capacity);

/* Highest offset + size over all placed buffers. */
HBM_API uint64_t hbm_timeline_extent(const hbm_timeline *tl);

#ifdef __cplusplus
}
#endif
#endif
