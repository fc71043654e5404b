/* pack_bundle.c - bundles: buffers that share a lifetime packed side by side as one.
 *
 * Real and generated timelines are full of buffers with the same start and end (the
 * outputs of one op, a layer's parameters, a model's weights live for the whole run).
 * Stacked one on top of the other they behave as a single buffer of their summed size,
 * and a search over the bundled timeline has fewer items and none of the symmetric
 * orders among equal lifetimes. It is a restriction - a packing of the bundles is a
 * packing of the buffers, not the other way round - so bundles serve to find packings
 * and never to prove bounds, except that a bundled packing whose extent equals the
 * lower bound (the most bytes live at once, the same for both) is optimal.
 *
 * Members must keep their alignment inside the bundle: buffers are bundled only with
 * others of the same alignment a whose sizes are multiples of a (any size when a <= 1);
 * the bundle then has alignment a too. Pinned buffers stay as they are. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "pack/pack_bundle.h"

typedef struct bkey {
    int64_t start, end;
    uint64_t align;
    uint32_t idx;
} bkey;

static int bkey_cmp(const void *a, const void *b) {
    const bkey *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    if (x->align != y->align) return x->align < y->align ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int same_group(const bkey *x, const bkey *y) {
    return x->start == y->start && x->end == y->end && x->align == y->align;
}

/* Can b share a bundle (alignment a) with others? */
static int bundleable(const hbm_tl_buffer *b, uint64_t a) {
    return !(b->flags & HBM_TL_PINNED) && (a <= 1 || b->size % a == 0);
}

hbm_status hbmi_bundle(const hbm_timeline *tl, uint64_t def_align, hbmi_bundles *out) {
    memset(out, 0, sizeof *out);
    size_t n = tl->count;
    hbmi_pack_clk.setup += n;
    if (n > UINT32_MAX) return HBM_OK;
    bkey *k = hbmi_malloc((n + 1) * sizeof *k);
    uint32_t *map = hbmi_malloc((n + 1) * sizeof *map);
    uint64_t *rel = hbmi_malloc((n + 1) * sizeof *rel);
    hbm_timeline *bt = NULL;
    hbm_status s = HBM_OK;
    if (!k || !map || !rel) {
        s = hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory bundling %zu buffers", n);
        goto done;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        uint64_t a = hbmi_pack_align(b, def_align);
        if (bundleable(b, a)) k[m++] = (bkey){b->start, b->end, a, (uint32_t)i};
    }
    hbmi_qsort(k, m, sizeof *k, bkey_cmp);
    size_t groups = 0;
    for (size_t i = 0; i < m; i++)
        if (!i || !same_group(&k[i], &k[i - 1])) groups++;
    if (groups == m) goto done; /* nothing to bundle */
    if ((s = hbm_timeline_new(&bt)) || (s = hbm_timeline_reserve(bt, n - m + groups))) goto done;
    for (size_t i = 0; i < n; i++) map[i] = UINT32_MAX;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        uint64_t total = 0; /* at most 2^56 in all (hbm_pack's input check) */
        for (; j < m && same_group(&k[j], &k[i]); j++) {
            rel[k[j].idx] = total;
            total += tl->buffers[k[j].idx].size;
        }
        size_t at;
        if ((s = hbm_timeline_add(bt, total, k[i].start, k[i].end, NULL, &at))) goto done;
        bt->buffers[at].alignment = k[i].align;
        for (; i < j; i++) map[k[i].idx] = (uint32_t)at;
    }
    for (size_t i = 0; i < n; i++) { /* the rest as they are */
        if (map[i] != UINT32_MAX) continue;
        const hbm_tl_buffer *b = &tl->buffers[i];
        size_t at;
        if ((s = hbm_timeline_add(bt, b->size, b->start, b->end, NULL, &at))) goto done;
        bt->buffers[at].alignment = hbmi_pack_align(b, def_align);
        bt->buffers[at].flags = b->flags & HBM_TL_PINNED;
        bt->buffers[at].offset = b->offset;
        map[i] = (uint32_t)at;
        rel[i] = 0;
    }
    out->tl = bt;
    out->map = map;
    out->rel = rel;
    bt = NULL;
    map = NULL;
    rel = NULL;
done:
    hbm_timeline_free(bt);
    hbmi_free(map);
    hbmi_free(rel);
    hbmi_free(k);
    return s;
}

void hbmi_bundles_free(hbmi_bundles *b) {
    hbm_timeline_free(b->tl);
    hbmi_free(b->map);
    hbmi_free(b->rel);
    memset(b, 0, sizeof *b);
}

void hbmi_unbundle(const hbmi_bundles *b, hbm_timeline *tl) {
    for (size_t i = 0; i < tl->count; i++)
        if (!(tl->buffers[i].flags & HBM_TL_PINNED)) tl->buffers[i].offset = b->tl->buffers[b->map[i]].offset + b->rel[i];
}
