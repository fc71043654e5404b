/* plan_pack.c - what-if for plans: repack XLA's temp heap with hbm's packers. */
#include <string.h>

#include "hbm/pack.h"
#include "plan/plan_internal.h"

hbm_status hbm_plan_pack_temp(const hbm_plan *p, const hbm_pack_options *o, hbm_pack_result *r, uint64_t *heap_bytes) {
    if (!p || !r) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_pack_temp: NULL argument");
    memset(r, 0, sizeof *r);
    if (heap_bytes) *heap_bytes = p->heap_tl_size;
    const hbm_timeline *h = p->heap_tl;
    if (!h || !h->count) return HBM_OK;
    /* colocated values (equal ids) are one buffer: merge their lifetimes */
    hbm_timeline *tl;
    hbm_status s = hbm_timeline_new(&tl);
    if (s) return s;
    hbmi_map first;
    hbmi_map_init(&first);
    for (size_t i = 0; i < h->count && !s; i++) {
        const hbm_tl_buffer *b = &h->buffers[i];
        uint64_t at;
        if (hbmi_map_get(&first, b->id, &at)) {
            hbm_tl_buffer *m = &tl->buffers[at];
            if (b->start < m->start) m->start = b->start;
            if (b->end > m->end) m->end = b->end;
            if (b->size > m->size) m->size = b->size;
            continue;
        }
        size_t k;
        if (!(s = hbm_timeline_add(tl, b->size, b->start, b->end, NULL, &k))) {
            tl->buffers[k].alignment = b->alignment;
            s = hbmi_map_put(&first, b->id, k);
        }
    }
    hbmi_map_destroy(&first);
    if (!s) s = hbm_pack(tl, o, r);
    hbm_timeline_free(tl);
    return s;
}
