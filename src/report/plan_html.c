/* plan_html.c - hbm_plan_view_html: XProf's Memory Viewer of a plan as one self-contained
 * page. The page is src/report/html/memory_viewer.{html,css,js}, embedded at build time
 * (cmake/embed.cmake); the markers <!--HBM:TITLE-->, <!--HBM:CSS-->, <!--HBM:DATA--> and
 * <!--HBM:JS--> are replaced by the title, the style sheet, the viewer's JSON and the script
 * (report/page.c). */
#include <string.h>

#include "plan/plan_view.h"
#include "report/view_internal.h"

extern const char hbmi_asset_memory_viewer_html[], hbmi_asset_memory_viewer_css[], hbmi_asset_memory_viewer_js[];
extern const size_t hbmi_asset_memory_viewer_html_len, hbmi_asset_memory_viewer_css_len,
    hbmi_asset_memory_viewer_js_len;

static void html_text(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '<') fputs("&lt;", f);
        else if (ch == '>') fputs("&gt;", f);
        else if (ch == '&') fputs("&amp;", f);
        else if (ch == '"') fputs("&quot;", f);
        else if (ch < 0x20 || ch == 0x7f) fputc('?', f);
        else fputc(ch, f);
    }
}

typedef struct plan_page {
    const hbm_plan *p;
    const hbm_plan_view_options *o; /* as given (NULL: the defaults) */
    const hbm_plan_view_options *opt;
} plan_page;

static hbm_status fill(void *ctx, const char *name, size_t n, FILE *f) {
    const plan_page *x = ctx;
    if (hbmi_page_marker_is(name, n, "TITLE"))
        html_text(f, x->o && x->o->title ? x->o->title : hbmi_plan_module_name(x->p));
    else if (hbmi_page_marker_is(name, n, "CSS"))
        fwrite(hbmi_asset_memory_viewer_css, 1, hbmi_asset_memory_viewer_css_len, f);
    else if (hbmi_page_marker_is(name, n, "JS"))
        fwrite(hbmi_asset_memory_viewer_js, 1, hbmi_asset_memory_viewer_js_len, f);
    else if (hbmi_page_marker_is(name, n, "DATA"))
        return hbmi_memview_json(x->p, x->opt, 1, f);
    return HBM_OK;
}

hbm_status hbm_plan_view_html(const hbm_plan *p, const hbm_plan_view_options *o, FILE *f) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "plan view: NULL argument");
    hbm_plan_view_options opt;
    if (o) opt = *o;
    else hbm_plan_view_options_default(&opt);
    opt.memory_space = -1; /* the page's selector offers every space */
    plan_page x = {p, o, &opt};
    hbm_status s = hbmi_page_write(hbmi_asset_memory_viewer_html, hbmi_asset_memory_viewer_html_len, fill, &x, f);
    if (s) return s;
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan view: write error") : HBM_OK;
}
