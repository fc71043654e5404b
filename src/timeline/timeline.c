/* timeline.c - buffers with sizes and lifetimes, shared by every front and back end. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "timeline/timeline_internal.h"

/* hbm's own state of a timeline (hbm_timeline.priv_), in the same allocation. */
struct hbmi_timeline_priv {
    size_t cap; /* of hbm_timeline.buffers */
    struct hbmi_tagtab *tags;
};
typedef struct timeline_alloc {
    hbm_timeline pub;
    struct hbmi_timeline_priv priv;
} timeline_alloc;

hbm_status hbm_timeline_new(hbm_timeline **out) {
    if (!out) return hbmi_error(HBM_ERR_INVALID, "timeline: NULL out");
    timeline_alloc *both = hbmi_calloc(1, sizeof *both);
    if (!both) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a timeline");
    hbm_timeline *tl = &both->pub;
    tl->priv_ = &both->priv;
    hbm_status s = hbmi_tagtab_new(&tl->priv_->tags);
    if (s) {
        hbmi_free(both);
        return s;
    }
    *out = tl;
    return HBM_OK;
}

void hbm_timeline_free(hbm_timeline *tl) {
    if (!tl) return;
    hbmi_tagtab_free(tl->priv_->tags);
    hbmi_big_free(tl->buffers, tl->priv_->cap, sizeof *tl->buffers);
    hbmi_free(tl); /* and its priv_, in the same allocation */
}

hbm_status hbm_timeline_reserve(hbm_timeline *tl, size_t n) {
    return hbmi_big_grow((void **)&tl->buffers, &tl->priv_->cap, tl->count + n, sizeof *tl->buffers);
}

hbm_status hbm_timeline_intern(hbm_timeline *tl, const hbm_tag *tag, uint32_t *tag_out) {
    return hbmi_tagtab_intern(tl->priv_->tags, tag, tag_out);
}

hbm_status hbm_timeline_add(hbm_timeline *tl, uint64_t size, int64_t start, int64_t end,
                            const hbm_tag *tag, size_t *index_out) {
    if (!tl) return hbmi_error(HBM_ERR_INVALID, "timeline: NULL timeline");
    if (size == 0) return hbmi_error(HBM_ERR_INVALID, "timeline: buffer of size 0");
    if (start >= end)
        return hbmi_error(HBM_ERR_INVALID, "timeline: empty lifetime [%" PRId64 ", %" PRId64 ")", start, end);
    hbm_status s = hbm_timeline_reserve(tl, 1);
    if (s) return s;
    uint32_t t = 0;
    s = hbmi_tagtab_intern(tl->priv_->tags, tag, &t);
    if (s) return s;
    size_t i = tl->count++;
    tl->buffers[i] = (hbm_tl_buffer){.id = i, .size = size, .start = start, .end = end,
                                     .offset = HBM_NO_OFFSET, .alignment = 0, .tag = t, .flags = 0};
    if (index_out) *index_out = i;
    return HBM_OK;
}

const hbm_tag *hbm_timeline_tag_at(const hbm_timeline *tl, uint32_t tag) {
    return tl ? hbmi_tagtab_get(tl->priv_->tags, tag) : NULL;
}

const hbm_tag *hbm_timeline_tag(const hbm_timeline *tl, size_t i) {
    if (!tl || i >= tl->count) return NULL;
    return hbmi_tagtab_get(tl->priv_->tags, tl->buffers[i].tag);
}

static int event_cmp(const void *a, const void *b) {
    const hbmi_tl_event *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->is_start != y->is_start) return x->is_start - y->is_start;
    return (x->buf > y->buf) - (x->buf < y->buf);
}

hbm_status hbmi_timeline_events(const hbm_timeline *tl, hbmi_tl_event **out) {
    hbmi_tl_event *ev = hbmi_malloc(2 * tl->count * sizeof *ev + 1);
    if (!ev) return hbmi_error(HBM_ERR_NOMEM, "out of host memory sweeping %zu buffers", tl->count);
    for (size_t i = 0; i < tl->count; i++) {
        ev[2 * i] = (hbmi_tl_event){tl->buffers[i].start, 1, i};
        ev[2 * i + 1] = (hbmi_tl_event){tl->buffers[i].end, 0, i};
    }
    hbmi_qsort(ev, 2 * tl->count, sizeof *ev, event_cmp);
    *out = ev;
    return HBM_OK;
}

hbm_status hbm_timeline_peak(const hbm_timeline *tl, uint64_t *peak_bytes, int64_t *peak_time) {
    if (!tl) return hbmi_error(HBM_ERR_INVALID, "timeline: NULL timeline");
    uint64_t live = 0, peak = 0;
    int64_t at = 0;
    hbmi_tl_event *ev;
    hbm_status s = hbmi_timeline_events(tl, &ev);
    if (s) return s;
    for (size_t i = 0; i < 2 * tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[ev[i].buf];
        if (ev[i].is_start) {
            live += b->size;
            if (live > peak) {
                peak = live;
                at = ev[i].t;
            }
        } else {
            live -= b->size;
        }
    }
    hbmi_free(ev);
    if (peak_bytes) *peak_bytes = peak;
    if (peak_time) *peak_time = at;
    return HBM_OK;
}

uint64_t hbm_timeline_extent(const hbm_timeline *tl) {
    uint64_t m = 0;
    for (size_t i = 0; tl && i < tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        if (b->offset != HBM_NO_OFFSET && b->offset + b->size > m) m = b->offset + b->size;
    }
    return m;
}

hbm_status hbm_timeline_verify(const hbm_timeline *tl, uint64_t capacity) {
    if (!tl) return hbmi_error(HBM_ERR_INVALID, "timeline: NULL timeline");
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        if (b->offset == HBM_NO_OFFSET)
            return hbmi_error(HBM_ERR_CORRUPT, "buffer %" PRIu64 " has no offset", b->id);
        if (b->alignment > 1 && b->offset % b->alignment)
            return hbmi_error(HBM_ERR_CORRUPT, "buffer %" PRIu64 " at offset %" PRIu64 " breaks its alignment %" PRIu64,
                              b->id, b->offset, b->alignment);
        if (b->offset + b->size < b->offset || (capacity && b->offset + b->size > capacity))
            return hbmi_error(HBM_ERR_CORRUPT, "buffer %" PRIu64 " [%" PRIu64 ", %" PRIu64 ") exceeds capacity %" PRIu64,
                              b->id, b->offset, b->offset + b->size, capacity);
    }
    /* Sweep over time keeping the live set; each new buffer is checked against every live
     * one. O(n log n + n * live), fine for the sizes we verify. */
    hbmi_tl_event *ev;
    hbm_status s = hbmi_timeline_events(tl, &ev);
    if (s) return s;
    size_t *live = hbmi_malloc((tl->count + 1) * sizeof *live), nlive = 0;
    size_t *pos = hbmi_malloc((tl->count + 1) * sizeof *pos);
    if (!live || !pos) {
        hbmi_free(ev);
        hbmi_free(live);
        hbmi_free(pos);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory verifying %zu buffers", tl->count);
    }
    s = HBM_OK;
    for (size_t i = 0; i < 2 * tl->count && !s; i++) {
        size_t k = ev[i].buf;
        if (!ev[i].is_start) { /* remove: swap with last */
            size_t p = pos[k];
            live[p] = live[--nlive];
            pos[live[p]] = p;
            continue;
        }
        const hbm_tl_buffer *b = &tl->buffers[k];
        for (size_t j = 0; j < nlive; j++) {
            const hbm_tl_buffer *o = &tl->buffers[live[j]];
            if (b->offset < o->offset + o->size && o->offset < b->offset + b->size) {
                s = hbmi_error(HBM_ERR_CORRUPT,
                               "buffers %" PRIu64 " [%" PRIu64 ", %" PRIu64 ") and %" PRIu64 " [%" PRIu64 ", %" PRIu64
                               ") overlap in memory while both live at time %" PRId64,
                               b->id, b->offset, b->offset + b->size, o->id, o->offset, o->offset + o->size, ev[i].t);
                break;
            }
        }
        pos[k] = nlive;
        live[nlive++] = k;
    }
    hbmi_free(ev);
    hbmi_free(live);
    hbmi_free(pos);
    return s;
}
