/* src/pack/pack_best.h - the portfolio (pack_best.c): hbm's best heuristic, on top of
 * the greedy orders, the bundles, the skyline and the exact search. */
#ifndef HBM_PACK_BEST_H
#define HBM_PACK_BEST_H

#include "pack/pack_base.h"

/* Greedy orders, a search on the bundles for +5 %, the skyline search and short exact
 * probes; keeps the smallest packing. It stops early once a packing within `enough` is
 * found (below lower_bound: the bound itself). Honours the deadline (ns, hbmi_pack_now's
 * clock; 0 = none). */
hbm_status hbmi_pack_best(hbm_timeline *tl, uint64_t def_align, uint64_t lower_bound, uint64_t enough,
                          uint64_t deadline_ns, uint64_t *extent);

#endif
