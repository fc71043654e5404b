/* page.c - the HTML pages of src/report/html/ (embedded at build time by cmake/embed.cmake)
 * written with their markers filled: the trace view (view_html.c) and the Memory Viewer of
 * a plan (plan_html.c). */
#include <string.h>

#include "report/view_internal.h"

hbm_status hbmi_page_write(const char *page, size_t len, hbmi_page_fill_fn fill, void *ctx, FILE *f) {
    static const char open[] = "<!--HBM:";
    const char *end = page + len;
    while (page < end) {
        const char *m = strstr(page, open);
        if (!m || m >= end) {
            fwrite(page, 1, (size_t)(end - page), f);
            break;
        }
        fwrite(page, 1, (size_t)(m - page), f);
        const char *close = strstr(m, "-->");
        if (!close) return hbmi_error(HBM_ERR_CORRUPT, "HTML page: a marker without its end (a broken build)");
        const char *name = m + sizeof open - 1;
        hbm_status s = fill(ctx, name, (size_t)(close - name), f);
        if (s) return s;
        page = close + 3;
    }
    return HBM_OK;
}

int hbmi_page_marker_is(const char *name, size_t n, const char *want) {
    return strlen(want) == n && !strncmp(name, want, n);
}
