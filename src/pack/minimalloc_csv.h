/* src/pack/minimalloc_csv.h - MiniMalloc's CSV writer, for the exporters (minimalloc_csv.c). */
#ifndef HBM_PACK_MINIMALLOC_CSV_H
#define HBM_PACK_MINIMALLOC_CSV_H

#include <stdio.h>

#include "hbm/pack.h"

/* MiniMalloc CSV of tl. csv_ids: ids as read from a CSV (non-numeric ones are kept in the
 * tag label), alignment and offset columns when present (hbm_minimalloc_write); otherwise
 * the buffer's index as id and the lifetimes only (exports of traces and plans). */
hbm_status hbmi_minimalloc_write(const hbm_timeline *tl, FILE *f, int csv_ids);

#endif
