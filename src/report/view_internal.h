/* view_internal.h - what the renderers in src/report share: the view's figures
 * (view_model.h, which neighbours read) and the HTML pages. */
#ifndef HBM_REPORT_VIEW_INTERNAL_H
#define HBM_REPORT_VIEW_INTERNAL_H

#include "core/internal.h"
#include "hbm/timeline.h"
#include "hbm/trace.h"
#include "hbm/view.h"
#include "report/view_model.h"

/* A page of src/report/html/ (embedded at build time: hbmi_asset_NAME_ext[], _len) to f,
 * each marker <!--HBM:NAME--> replaced by what fill writes for NAME (n bytes, not
 * NUL-terminated); fill's error ends the page there. */
typedef hbm_status (*hbmi_page_fill_fn)(void *ctx, const char *name, size_t n, FILE *f);
hbm_status hbmi_page_write(const char *page, size_t len, hbmi_page_fill_fn fill, void *ctx, FILE *f);
/* A marker's name (n bytes) is want. */
int hbmi_page_marker_is(const char *name, size_t n, const char *want);

#endif
