/* src/plan/plan_view.h - what the Memory Viewer's page (src/report/plan_html.c) reads of a
 * computed plan: the viewer's JSON and the module's name. The viewer's model stays in
 * memview.h, over plan_internal.h, inside src/plan. */
#ifndef HBM_PLAN_VIEW_H
#define HBM_PLAN_VIEW_H

#include <stdio.h>

#include "hbm/plan.h"

/* The viewer's JSON; with_series adds the heap curves, every temp buffer and the
 * instruction names (what the HTML page draws). */
hbm_status hbmi_memview_json(const hbm_plan *p, const hbm_plan_view_options *o, int with_series, FILE *f);
/* The name of the module p was computed over (hbm_hlo_module_name). */
const char *hbmi_plan_module_name(const hbm_plan *p);

#endif
