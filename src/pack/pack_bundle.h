/* src/pack/pack_bundle.h - bundles (pack_bundle.c): unpinned buffers with the same
 * lifetime and alignment a (and sizes that are multiples of a) as one buffer of their
 * summed size. A restriction: use it to find packings, never to prove bounds. */
#ifndef HBM_PACK_BUNDLE_H
#define HBM_PACK_BUNDLE_H

#include "pack/pack_base.h"

typedef struct hbmi_bundles {
    hbm_timeline *tl; /* the bundled timeline (NULL: nothing to bundle) */
    uint32_t *map;    /* buffer -> its bundle in tl */
    uint64_t *rel;    /* buffer -> its offset inside the bundle */
} hbmi_bundles;
hbm_status hbmi_bundle(const hbm_timeline *tl, uint64_t def_align, hbmi_bundles *out);
void hbmi_bundles_free(hbmi_bundles *b);
/* Offsets of tl's unpinned buffers from those of the bundles. */
void hbmi_unbundle(const hbmi_bundles *b, hbm_timeline *tl);

#endif
