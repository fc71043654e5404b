/* plan_pack.c - what-if for plans: repack XLA's temp heap with hbm's packers. */
#include <inttypes.h>
#include <string.h>

#include "hbm/pack.h"
#include "hbm/size.h"
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

hbm_status hbm_plan_pack_text(const hbm_pack_result *r, hbm_pack_algo algo, uint64_t heap_bytes, FILE *f) {
    if (!r || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_pack_text: NULL argument");
    char a[32], b[32], c[32];
    fprintf(f, "\nRepacking the temp heap with '%s': %s, %.3f s\n  (XLA's heap simulator: %s; lower bound %s%s)\n",
            hbm_pack_algo_str(algo), hbm_size_human(r->extent, a), r->seconds, hbm_size_human(heap_bytes, b),
            hbm_size_human(r->lower_bound, c), r->proven ? ", optimal" : "");
    if (heap_bytes > r->extent)
        fprintf(f, "  %s of XLA's temp heap is packing waste that a better placement would save.\n",
                hbm_size_human(heap_bytes - r->extent, a));
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan pack: write error") : HBM_OK;
}

hbm_status hbm_plan_pack_json(const hbm_pack_result *r, hbm_pack_algo algo, uint64_t heap_bytes, FILE *f) {
    if (!r || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_pack_json: NULL argument");
    fprintf(f,
            "{\"algorithm\": \"%s\", \"xla_heap_bytes\": %" PRIu64 ", \"heap_bytes\": %" PRIu64
            ", \"lower_bound_bytes\": %" PRIu64 ", \"proven\": %s, \"seconds\": %.3f}",
            hbm_pack_algo_str(algo), heap_bytes, r->extent, r->lower_bound, r->proven ? "true" : "false", r->seconds);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan pack: write error") : HBM_OK;
}
