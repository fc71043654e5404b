/* oom_report.h - the OOM report as the library's own callers keep it once its allocator
 * is gone (oom_report.c): the text hbm_oom_report_write writes, and where in it the diagnosis's
 * advice begins, as the formatter wrote it. A caller that checks the advice (the replay's
 * report runs the trace again with it, hbm demo runs the step again) gives its verdict as a
 * value and the formatter puts it in the advice's place: no caller searches the text. */
#ifndef HBM_ALLOC_OOM_REPORT_H
#define HBM_ALLOC_OOM_REPORT_H

#include <stddef.h>

#include "hbm/alloc.h"

typedef struct hbmi_oom_text {
    char *text;    /* the report, NUL-terminated (hbmi_oom_text_free) */
    size_t advice; /* text + advice: the advice, the "  Try: ..." lines to the end (the setting to
                      try and what goes with it); strlen(text) when the report advises none */
} hbmi_oom_text;

/* The report of a's most recent failed allocation (hbm_oom_report_format's text).
 * HBM_ERR_INVALID when none failed, HBM_ERR_NOMEM. */
hbm_status hbmi_oom_text_get(hbm_allocator *a, hbmi_oom_text *out);
/* A text that is no report (a message in its place): a copy, with no advice. */
hbm_status hbmi_oom_text_of(const char *text, hbmi_oom_text *out);
/* The advice checked: verdict (a line or several, each ending in '\n') in its place. A
 * report that advises nothing stays as it is; HBM_ERR_NOMEM leaves r as it was. */
hbm_status hbmi_oom_text_advise(hbmi_oom_text *r, const char *verdict);
void hbmi_oom_text_free(hbmi_oom_text *r);

#endif
