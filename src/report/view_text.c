/* view_text.c - hbm view in the terminal (and its JSON twin). */
#include <inttypes.h>
#include <string.h>

#include "hbm/size.h"
#include "report/view_internal.h"
#include "trace/trace_internal.h"

void hbm_view_options_default(hbm_view_options *o) {
    memset(o, 0, sizeof *o);
    o->width = 72;
    o->top = 15;
}

static void opts(const hbm_view_options *in, hbm_view_options *o) {
    hbm_view_options_default(o);
    if (!in) return;
    *o = *in;
    if (o->width < 8) o->width = 8;
    if (o->width > 1000) o->width = 1000;
    if (o->top < 0) o->top = 0;
}

/* One row of a sparkline: each column is the maximum of its bucket of events. */
static void sparkline(FILE *f, const char *label, const uint64_t *v, size_t n, uint64_t scale, int width, int ascii) {
    static const char *blocks[] = {" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char ascii_levels[] = " .:-=+*#@";
    fprintf(f, "  %-10s", label);
    if (n == 0 || scale == 0) {
        fputs("(nothing)\n", f);
        return;
    }
    size_t cols = n < (size_t)width ? n : (size_t)width;
    for (size_t c = 0; c < cols; c++) {
        size_t a = c * n / cols, b = (c + 1) * n / cols;
        uint64_t m = 0;
        for (size_t i = a; i < b; i++)
            if (v[i] > m) m = v[i];
        int level = (int)((double)m / (double)scale * 8.0 + 0.999);
        if (level > 8) level = 8;
        if (m && !level) level = 1;
        if (ascii) fputc(ascii_levels[level], f);
        else fputs(blocks[level], f);
    }
    char h[32];
    fprintf(f, "  max %s\n", hbm_size_xla((int64_t)scale, h));
}

static double seconds(const hbm_trace *t, size_t i) { return i < t->count ? (double)t->events[i].time_ns / 1e9 : 0.0; }

hbm_status hbm_view_text(const hbm_trace *t, const hbm_view_options *o_in, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_view_text: NULL argument");
    hbm_view_options o;
    opts(o_in, &o);
    hbmi_view v;
    hbm_status s = hbmi_view_build(t, &v);
    if (s) return s;
    char a[32], b[32], c[32];
    fprintf(f, "%s: %s trace, %zu events%s%s\n", o.title ? o.title : t->name, t->source[0] ? t->source : "hbm", t->count,
            t->device[0] ? ", device " : "", t->device);
    fprintf(f, "peak in use  %s at event %zu (%.6fs); peak reserved %s\n", hbm_size_xla((int64_t)v.peak_use, a), v.peak_i,
            seconds(t, v.peak_i), hbm_size_xla((int64_t)v.peak_res, b));
    fprintf(f, "allocs %" PRIu64 ", frees %" PRIu64 ", OOMs %" PRIu64, v.allocs, v.frees, v.ooms);
    if (v.first_oom >= 0) {
        const hbm_trace_event *e = &t->events[v.first_oom];
        fprintf(f, " (first at event %" PRId64 ": %s)", v.first_oom, hbm_size_xla((int64_t)e->requested, c));
    }
    fputs("\n\n", f);
    uint64_t scale = v.peak_res > v.peak_use ? v.peak_res : v.peak_use;
    sparkline(f, "in use", v.use, t->count, scale, o.width, o.ascii);
    sparkline(f, v.has_segments ? "reserved" : "reserved*", v.res, t->count, scale, o.width, o.ascii);
    fprintf(f, "  %-10s event 0 .. %zu%s\n\n", "", t->count ? t->count - 1 : 0,
            v.has_segments ? "" : "   (*no segment events: reserved = in use)");
    size_t top = v.n_at_peak < (size_t)o.top ? v.n_at_peak : (size_t)o.top;
    fprintf(f, "Top %zu of %zu buffers live at the peak (%s requested):\n", top, v.n_at_peak,
            hbm_size_xla((int64_t)v.at_peak_bytes, a));
    if (top) fprintf(f, "  %4s %10s %6s  %-28s %-18s %-22s %s\n", "#", "size", "share", "op", "shape", "source", "lifetime");
    for (size_t k = 0; k < top; k++) {
        const hbm_tl_buffer *bf = &v.tl->buffers[v.at_peak[k]];
        const hbm_tag *tg = hbm_timeline_tag_at(v.tl, bf->tag);
        char src[300];
        fprintf(f, "  %4zu %10s %5.1f%%  %-28.28s %-18.18s %-22.22s [%" PRId64 ", %" PRId64 ")\n", k, hbm_size_xla((int64_t)bf->size, a),
                v.at_peak_bytes ? 100.0 * (double)bf->size / (double)v.at_peak_bytes : 0.0,
                tg && tg->op_name ? tg->op_name : (tg && tg->label ? tg->label : "-"), tg && tg->shape ? tg->shape : "-",
                *hbmi_view_source(tg, src, sizeof src) ? src : "-", bf->start, bf->end);
    }
    for (int which = 0; which < 2; which++) {
        const hbmi_total *tot = which ? v.by_line : v.by_op;
        size_t n = which ? v.n_line : v.n_op, show = n < (size_t)o.top ? n : (size_t)o.top;
        fprintf(f, "\nTotals by %s (top %zu of %zu):\n", which ? "source line" : "op", show, n);
        if (show) fprintf(f, "  %-40s %12s %12s %8s\n", which ? "source" : "op", "at peak", "allocated", "allocs");
        for (size_t k = 0; k < show; k++)
            fprintf(f, "  %-40.40s %12s %12s %8" PRIu64 "\n", tot[k].key, hbm_size_xla((int64_t)tot[k].at_peak, a),
                    hbm_size_xla((int64_t)tot[k].allocated, b), tot[k].count);
    }
    hbmi_view_free(&v);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the view failed") : HBM_OK;
}

static void json_buf(FILE *f, const hbmi_view *v, size_t k) {
    const hbm_tl_buffer *bf = &v->tl->buffers[k];
    const hbm_tag *tg = hbm_timeline_tag_at(v->tl, bf->tag);
    char src[300];
    fprintf(f, "{\"size\": %" PRIu64 ", \"start\": %" PRId64 ", \"end\": %" PRId64 ", \"op\": ", bf->size, bf->start, bf->end);
    hbmi_json_str(f, tg && tg->op_name ? tg->op_name : "");
    fputs(", \"shape\": ", f);
    hbmi_json_str(f, tg && tg->shape ? tg->shape : "");
    fputs(", \"source\": ", f);
    hbmi_json_str(f, hbmi_view_source(tg, src, sizeof src));
    fputs(", \"label\": ", f);
    hbmi_json_str(f, tg && tg->label ? tg->label : "");
    fputs(", \"category\": ", f);
    hbmi_json_str(f, tg ? hbm_category_str(tg->category) : "");
    fputc('}', f);
}

hbm_status hbm_view_json(const hbm_trace *t, const hbm_view_options *o_in, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_view_json: NULL argument");
    hbm_view_options o;
    opts(o_in, &o);
    hbmi_view v;
    hbm_status s = hbmi_view_build(t, &v);
    if (s) return s;
    fputs("{\"name\": ", f);
    hbmi_json_str(f, t->name);
    fputs(", \"source\": ", f);
    hbmi_json_str(f, t->source);
    fprintf(f,
            ", \"events\": %zu, \"peak_bytes_in_use\": %" PRIu64 ", \"peak_event\": %zu, \"peak_bytes_reserved\": %" PRIu64
            ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"ooms\": %" PRIu64 ", \"first_oom_event\": %" PRId64
            ", \"live_at_peak\": %zu, \"live_at_peak_bytes\": %" PRIu64 ", \"top\": [",
            t->count, v.peak_use, v.peak_i, v.peak_res, v.allocs, v.frees, v.ooms, v.first_oom, v.n_at_peak, v.at_peak_bytes);
    for (size_t k = 0; k < v.n_at_peak && k < (size_t)o.top; k++) {
        if (k) fputs(", ", f);
        json_buf(f, &v, v.at_peak[k]);
    }
    fputs("]", f);
    for (int which = 0; which < 2; which++) {
        const hbmi_total *tot = which ? v.by_line : v.by_op;
        size_t n = which ? v.n_line : v.n_op;
        fprintf(f, ", \"%s\": [", which ? "by_source" : "by_op");
        for (size_t k = 0; k < n; k++) {
            fputs(k ? ", {\"key\": " : "{\"key\": ", f);
            hbmi_json_str(f, tot[k].key);
            fprintf(f, ", \"at_peak\": %" PRIu64 ", \"allocated\": %" PRIu64 ", \"allocs\": %" PRIu64 "}", tot[k].at_peak,
                    tot[k].allocated, tot[k].count);
        }
        fputc(']', f);
    }
    fputs("}\n", f);
    hbmi_view_free(&v);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the view failed") : HBM_OK;
}
