/* pack_relax.c - relaxations of a packing problem: a time window of a timeline, and its
 * projection onto the times where many bytes are live. Each keeps every buffer's size
 * and drops only conflicts (pairs alive together), so a packing of the timeline is a
 * packing of each relaxation: a bound proven on a relaxation (its optimum) is a bound on
 * the timeline's. They are small enough to prove things about when the whole is not
 * (docs/pack.md: MiniMalloc's case J). */
#include <string.h>

#include "core/internal.h"
#include "pack/pack_base.h"

/* Append buffer i of tl to out with the lifetime [start, end), keeping its id, tag,
 * alignment and pin. */
static hbm_status add_like(hbm_timeline *out, const hbm_timeline *tl, size_t i, int64_t start, int64_t end) {
    const hbm_tl_buffer *b = &tl->buffers[i];
    size_t k;
    hbm_status s = hbm_timeline_add(out, b->size, start, end, hbm_timeline_tag(tl, i), &k);
    if (s) return s;
    hbm_tl_buffer *d = &out->buffers[k];
    d->id = b->id;
    d->alignment = b->alignment;
    d->flags = b->flags;
    d->offset = b->offset;
    return HBM_OK;
}

static hbm_status new_like(const hbm_timeline *tl, hbm_timeline **out) {
    hbm_status s = hbm_timeline_new(out);
    if (s) return s;
    memcpy((*out)->clock, tl->clock, sizeof tl->clock);
    memcpy((*out)->name, tl->name, sizeof tl->name);
    return HBM_OK;
}

hbm_status hbm_pack_relax_window(const hbm_timeline *tl, int64_t from, int64_t to, hbm_timeline **out) {
    if (!tl || !out) return hbmi_error(HBM_ERR_INVALID, "pack: NULL argument");
    if (from >= to) return hbmi_error(HBM_ERR_INVALID, "pack: empty window [%lld, %lld)", (long long)from, (long long)to);
    hbm_timeline *w = NULL;
    hbm_status s = new_like(tl, &w);
    for (size_t i = 0; i < tl->count && !s; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        if (b->start >= to || b->end <= from) continue;
        s = add_like(w, tl, i, b->start > from ? b->start : from, b->end < to ? b->end : to);
    }
    if (s) {
        hbm_timeline_free(w);
        return s;
    }
    *out = w;
    return HBM_OK;
}

hbm_status hbm_pack_relax_above(const hbm_timeline *tl, uint64_t min_live, hbm_timeline **out) {
    if (!tl || !out) return hbmi_error(HBM_ERR_INVALID, "pack: NULL argument");
    size_t n = tl->count, nt = 0;
    int64_t *t = hbmi_malloc((2 * n + 1) * sizeof *t);
    uint64_t *live = hbmi_calloc(2 * n + 1, sizeof *live); /* bytes that start at each time point */
    uint64_t *drop = hbmi_calloc(2 * n + 1, sizeof *drop); /* and that end there */
    size_t *before = hbmi_malloc((2 * n + 2) * sizeof *before); /* kept sections before each */
    hbm_timeline *p = NULL;
    hbm_status s = HBM_OK;
    if (!t || !live || !drop || !before) {
        s = hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory for a projection of %zu buffers", n);
        goto out;
    }
    /* the time points, and the bytes live in each section [t[k], t[k+1]) */
    nt = hbmi_time_points(tl, t);
    for (size_t i = 0; i < n; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        live[hbmi_time_index(t, nt, b->start)] += b->size;
        drop[hbmi_time_index(t, nt, b->end)] += b->size;
    }
    size_t m = 0;
    uint64_t cur = 0;
    for (size_t k = 0; k + 1 < nt; k++) {
        cur = cur + live[k] - drop[k];
        before[k] = m;
        if (cur >= min_live) m++;
    }
    before[nt ? nt - 1 : 0] = m;
    if ((s = new_like(tl, &p))) goto out;
    /* a buffer over sections [s0, s1) keeps the kept ones among them: on the new clock,
     * time j is the j-th kept section */
    for (size_t i = 0; i < n && !s; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        size_t a = before[hbmi_time_index(t, nt, b->start)], z = before[hbmi_time_index(t, nt, b->end)];
        if (a >= z) continue; /* alive in no kept section */
        int64_t start = (int64_t)a, end = (int64_t)z;
        s = add_like(p, tl, i, start, end);
    }
out:
    hbmi_free(t);
    hbmi_free(live);
    hbmi_free(drop);
    hbmi_free(before);
    if (s) {
        hbm_timeline_free(p);
        return s;
    }
    *out = p;
    return HBM_OK;
}
