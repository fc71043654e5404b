/* src/pack/pack_exact.h - the exact search over canonical packings (pack_exact.c). */
#ifndef HBM_PACK_EXACT_H
#define HBM_PACK_EXACT_H

#include "pack/pack_base.h"

/* Exact search outcome. */
typedef enum hbmi_exact_rc { HBMI_EXACT_FOUND, HBMI_EXACT_NONE, HBMI_EXACT_ABORTED } hbmi_exact_rc;

typedef struct hbmi_exact hbmi_exact;

/* Build the search structure for tl's unpinned buffers. */
hbm_status hbmi_exact_new(const hbm_timeline *tl, uint64_t def_align, hbmi_exact **out);
void hbmi_exact_free(hbmi_exact *e);
/* Look for a packing within capacity. FOUND: offsets written into tl. NONE: proven that
 * none exists; *next_bound gets a proven lower bound (> capacity) on any packing's extent.
 * ABORTED: the deadline (ns, 0 = none) or node_limit (0 = none) ran out. */
hbm_status hbmi_exact_solve(hbmi_exact *e, hbm_timeline *tl, uint64_t capacity,
                            uint64_t deadline_ns, uint64_t node_limit, hbmi_exact_rc *rc,
                            uint64_t *next_bound);
uint64_t hbmi_exact_nodes(const hbmi_exact *e);
/* Failed searches return the largest bound their cuts prove (slower) rather than the
 * first one found; for the bottom-up bounds of --minimize. */
void hbmi_exact_set_full_bounds(hbmi_exact *e, int on);
/* Node limit of the first round of restarts (0 = the default 8n + 64); small values
 * make a limited search a series of short dives with different ranks. */
void hbmi_exact_set_first_limit(hbmi_exact *e, uint64_t nodes);
/* The least group size the failure and solution caches take (default 4: smaller groups
 * are cheaper to search again); tests set 1 to run the caches on every node. */
void hbmi_exact_set_cache_min(hbmi_exact *e, uint32_t items);
/* Rank 3 of the restarts follows the order of tl's offsets (a packing found earlier,
 * too high: the search then starts next to it) instead of size. */
void hbmi_exact_set_hint(hbmi_exact *e, const hbm_timeline *tl);
/* Progress reporting from inside long searches (may be NULL). */
void hbmi_exact_set_progress(hbmi_exact *e, void (*fn)(void *, const hbm_pack_progress *),
                             void *user, uint64_t start_ns, uint64_t best, uint64_t lower_bound);

#endif
