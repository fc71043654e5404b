/* src/report/view_model.h - the figures every view shows, computed once from a trace
 * (view_model.c), and hbm diff's contributors: what the fleet (src/api/fleet.c,
 * fleet_summary.c) reads of the view. view_internal.h includes this and stays in src/report. */
#ifndef HBM_REPORT_VIEW_MODEL_H
#define HBM_REPORT_VIEW_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/timeline.h"
#include "hbm/trace.h"

typedef struct hbmi_total {
    const char *key;       /* op name or "file:line" (owned when by line) */
    uint64_t at_peak;      /* bytes live at the peak */
    uint64_t allocated;    /* bytes allocated over the trace */
    uint64_t count;        /* allocations */
} hbmi_total;

typedef struct hbmi_view {
    const hbm_trace *t;
    hbm_timeline *tl;        /* buffers (event clock) */
    uint64_t *use, *res;     /* per event */
    int has_segments;
    char inconsistent[200];  /* the first event no allocator can have produced, or "" */
    size_t peak_i;           /* event of the peak of bytes in use */
    uint64_t peak_use, peak_res;
    uint64_t allocs, frees, ooms;
    int64_t first_oom;       /* event index, -1 if none */
    size_t *at_peak;         /* timeline buffer indices live at the peak, largest first */
    size_t n_at_peak;
    uint64_t at_peak_bytes;  /* their requested bytes */
    hbmi_total *by_op, *by_line;
    size_t n_op, n_line;
} hbmi_view;

hbm_status hbmi_view_build(const hbm_trace *t, hbmi_view *v);
void hbmi_view_free(hbmi_view *v);
/* "file:line" or "" for a tag. buf holds 300 bytes. */
const char *hbmi_view_source(const hbm_tag *tg, char *buf, size_t cap);

/* hbm diff's contributors: the buffers live at a peak grouped by key (op \x1f source \x1f
 * category), bytes and buffers on each side (0: A, 1: B). */
typedef struct hbmi_contrib {
    const hbm_tag *tag; /* a representative tag (from A or B), or NULL (keys from summaries) */
    char *key;          /* op \x1f source \x1f category, owned */
    char *site;         /* hbm diff: "file:line", the file as the program knows it, owned;
                         * NULL elsewhere */
    uint64_t bytes[2];
    uint64_t count[2];
} hbmi_contrib;
/* Entries of equal key merged (keys freed) and the rest sorted by change, largest first
 * (then by bytes on both sides, then key); returns their count. */
size_t hbmi_contrib_merge(hbmi_contrib *c, size_t m);
/* The op a contributor is named by: op name, else label, else "(untagged)". */
const char *hbmi_contrib_op(const hbm_tag *tg);

#endif
