/* hbm/view.h - see a trace (or a plan, as a trace: hbm_trace_from_timeline): where the
 * memory went, when, and which buffers made the peak.
 *
 *   hbm_view_text(t, NULL, stdout);          // terminal: summary, sparklines, top buffers, totals
 *   FILE *f = fopen("out.html", "w");
 *   hbm_view_html(t, NULL, f);               // one self-contained page (no network)
 */
#ifndef HBM_VIEW_H
#define HBM_VIEW_H

#include <stdio.h>

#include "hbm/status.h"
#include "hbm/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbm_view_options {
    int width;      /* terminal columns for sparklines (default 72; 0: a column per event) */
    int top;        /* buffers listed at the peak (default 15, as XLA's OOM report) */
    int ascii;      /* sparklines in ASCII instead of Unicode blocks */
    const char *title; /* page / report title (default: the trace's name) */
} hbm_view_options;

HBM_API void hbm_view_options_default(hbm_view_options *o);

/* Terminal report: peak summary, sparklines of in-use and reserved bytes over the trace,
 * the top buffers live at the peak with their tags, totals by op and by source line. */
HBM_API hbm_status hbm_view_text(const hbm_trace *t, const hbm_view_options *o, FILE *f);
/* The same figures as one JSON object. */
HBM_API hbm_status hbm_view_json(const hbm_trace *t, const hbm_view_options *o, FILE *f);
/* t and the other devices of its file (t->others): text, one section per device, or JSON
 * (json != 0): t's figures with, in "devices", each device's (hbm view's output). */
HBM_API hbm_status hbm_view_all(const hbm_trace *t, int json, const hbm_view_options *o, FILE *f);
/* hbm diff A B: the peak of each (in use: bytes asked for; reserved), the change, and the
 * buffers live at each peak grouped by op, source line and category, matched between A and
 * B with their bytes in each, largest change first (top of them; -1 all). json: one object
 * {"a", "b", "delta_bytes_in_use", "delta_bytes_reserved", "contributors"}. */
HBM_API hbm_status hbm_diff_write(const hbm_trace *a, const hbm_trace *b, int top, int json, FILE *f);
/* A self-contained HTML page: zoomable timeline of in-use and reserved memory, the
 * buffers live at the peak as stacked blocks by size with hover details, and a table
 * sortable by any column. No network access, no external script or style. */
HBM_API hbm_status hbm_view_html(const hbm_trace *t, const hbm_view_options *o, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
