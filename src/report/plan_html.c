/* plan_html.c - hbm_plan_view_html: XProf's Memory Viewer of a plan as one self-contained
 * page. The page is src/report/html/memory_viewer.{html,css,js}, embedded at build time
 * (cmake/embed.cmake); the markers <!--HBM:TITLE-->, <!--HBM:CSS-->, <!--HBM:DATA--> and
 * <!--HBM:JS--> are replaced by the title, the style sheet, the viewer's JSON and the script. */
#include <string.h>

#include "plan/memview.h"

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

hbm_status hbm_plan_view_html(const hbm_plan *p, const hbm_plan_view_options *o, FILE *f) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "plan view: NULL argument");
    hbm_plan_view_options opt;
    if (o) opt = *o;
    else hbm_plan_view_options_default(&opt);
    opt.memory_space = -1; /* the page's selector offers every space */
    const char *page = hbmi_asset_memory_viewer_html, *end = page + hbmi_asset_memory_viewer_html_len;
    while (page < end) {
        const char *m = strstr(page, "<!--HBM:");
        if (!m || m >= end) {
            fwrite(page, 1, (size_t)(end - page), f);
            break;
        }
        fwrite(page, 1, (size_t)(m - page), f);
        const char *close = strstr(m, "-->");
        if (!close) return hbmi_error(HBM_ERR_CORRUPT, "plan view: broken page template");
        size_t n = (size_t)(close - m);
        if (!strncmp(m, "<!--HBM:TITLE", n)) {
            html_text(f, o && o->title ? o->title : hbm_hlo_module_name(p->m));
        } else if (!strncmp(m, "<!--HBM:CSS", n)) {
            fwrite(hbmi_asset_memory_viewer_css, 1, hbmi_asset_memory_viewer_css_len, f);
        } else if (!strncmp(m, "<!--HBM:JS", n)) {
            fwrite(hbmi_asset_memory_viewer_js, 1, hbmi_asset_memory_viewer_js_len, f);
        } else if (!strncmp(m, "<!--HBM:DATA", n)) {
            hbm_status s = hbmi_memview_json(p, &opt, 1, f);
            if (s) return s;
        }
        page = close + 3;
    }
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan view: write error") : HBM_OK;
}
