/* src/pack/pack_internal.h - every internal header of the packer, for its tests. The
 * packer itself is built in floors, each file including only the headers it uses:
 *   pack.c (hbm_pack: options, dispatch, verification)
 *   pack_best.c (the portfolio)
 *   pack_greedy.c, pack_bundle.c, pack_sky.c, pack_exact.c (one packer or tool each)
 *   pack_base.c (clock, time points, alignment, lower bound) */
#ifndef HBM_PLAN_PACK_INTERNAL_H
#define HBM_PLAN_PACK_INTERNAL_H

#include "pack/minimalloc_csv.h"
#include "pack/pack_base.h"
#include "pack/pack_best.h"
#include "pack/pack_bundle.h"
#include "pack/pack_exact.h"
#include "pack/pack_greedy.h"
#include "pack/pack_sky.h"

#endif
