/* view_text.c - hbm view in the terminal (and its JSON twin). */
#include <inttypes.h>
#include <string.h>

#include "hbm/size.h"
#include "report/view_internal.h"
#include "trace/trace_view.h"

void hbm_view_options_default(hbm_view_options *o) {
    memset(o, 0, sizeof *o);
    o->width = 72;
    o->top = 15;
}

static void opts(const hbm_view_options *in, hbm_view_options *o) {
    hbm_view_options_default(o);
    if (!in) return;
    *o = *in;
    if (o->width < 0) o->width = 72;      /* 0: no limit, a column per event */
    if (o->width > 0 && o->width < 8) o->width = 8;
    if (o->width > 1000) o->width = 1000;
    if (o->top < 0) o->top = 0;
}

/* One row of a sparkline: each column is the maximum of its bucket of events, drawn
 * against scale (shared by the rows); the row's own maximum is printed after it. */
static void sparkline(FILE *f, const char *label, const uint64_t *v, size_t n, uint64_t scale, int width, int ascii) {
    static const char *blocks[] = {" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char ascii_levels[] = " .:-=+*#@";
    fprintf(f, "  %-10s", label);
    if (n == 0 || scale == 0) {
        fputs("(nothing)\n", f);
        return;
    }
    size_t cols = width == 0 || n < (size_t)width ? n : (size_t)width; /* 0: a column per event */
    uint64_t top = 0;
    for (size_t c = 0; c < cols; c++) {
        size_t a = c * n / cols, b = (c + 1) * n / cols;
        uint64_t m = 0;
        for (size_t i = a; i < b; i++)
            if (v[i] > m) m = v[i];
        if (m > top) top = m;
        int level = (int)((double)m / (double)scale * 8.0 + 0.999);
        if (level > 8) level = 8;
        if (m && !level) level = 1;
        if (ascii) fputc(ascii_levels[level], f);
        else fputs(blocks[level], f);
    }
    char h[32];
    fprintf(f, "  max %s\n", hbm_size_xla((int64_t)top, h));
}

/* "event N (12.345678s)" when the trace has times, "event N" otherwise, N counted from the
 * history's first event; events before the history (the state rebuilt from a snapshot's
 * segments) are "the start (before the history)". */
static const char *when(const hbm_trace *t, size_t i, char *buf, size_t cap) {
    return hbmi_event_when(t, (int64_t)i, i < t->count ? t->events[i].time_ns : 0, buf, cap);
}

/* Buffers live at event i: how many, and the largest cap of them in out (timeline
 * indices, largest first). */
static size_t live_at(const hbmi_view *v, int64_t i, size_t *out, size_t cap) {
    size_t n = 0, kept = 0;
    for (size_t k = 0; k < v->tl->count; k++) {
        const hbm_tl_buffer *b = &v->tl->buffers[k];
        if (b->start > i || i >= b->end) continue;
        n++;
        size_t j = kept < cap ? kept++ : cap; /* insert into the top cap by size */
        while (j > 0 && v->tl->buffers[out[j - 1]].size < b->size) {
            if (j < cap) out[j] = out[j - 1];
            j--;
        }
        if (j < cap) out[j] = k;
    }
    return n;
}

static void buffer_row(FILE *f, const hbmi_view *v, size_t k, size_t idx, uint64_t total, int with_shape) {
    const hbm_tl_buffer *bf = &v->tl->buffers[idx];
    const hbm_tag *tg = hbm_timeline_tag_at(v->tl, bf->tag);
    char a[32], op[96], shape[64], src[128], raw[300], life[48];
    hbmi_text_fit(op, sizeof op, tg && tg->op_name ? tg->op_name : (tg && tg->label ? tg->label : "-"), with_shape ? 18 : 28, 0);
    hbmi_text_fit(shape, sizeof shape, tg && tg->shape ? tg->shape : "-", 16, 0);
    hbmi_text_fit(src, sizeof src, *hbmi_view_source(tg, raw, sizeof raw) ? raw : "-", with_shape ? 24 : 30, 1);
    int64_t h = (int64_t)v->t->history_start;
    if (bf->start < h) snprintf(life, sizeof life, "[before, %" PRId64 ")", hbmi_event_pos(v->t, bf->end));
    else snprintf(life, sizeof life, "[%" PRId64 ", %" PRId64 ")", hbmi_event_pos(v->t, bf->start), hbmi_event_pos(v->t, bf->end));
    fprintf(f, "  %3zu %10s %5.1f%%  ", k, hbm_size_xla((int64_t)bf->size, a), total ? 100.0 * (double)bf->size / (double)total : 0.0);
    if (with_shape) fprintf(f, "%-18s %-16s %-24s %s\n", op, shape, src, life);
    else fprintf(f, "%-28s %-30s %s\n", op, src, life);
}

static int any_shape(const hbmi_view *v, const size_t *idx, size_t n) {
    for (size_t k = 0; k < n; k++) {
        const hbm_tag *tg = hbm_timeline_tag_at(v->tl, v->tl->buffers[idx[k]].tag);
        if (tg && tg->shape && *tg->shape) return 1;
    }
    return 0;
}

static void buffer_table(FILE *f, const hbmi_view *v, const size_t *idx, size_t n, uint64_t total) {
    int sh = any_shape(v, idx, n);
    if (!n) return;
    if (sh) fprintf(f, "  %3s %10s %6s  %-18s %-16s %-24s %s\n", "#", "size", "share", "op", "shape", "source", "lifetime");
    else fprintf(f, "  %3s %10s %6s  %-28s %-30s %s\n", "#", "size", "share", "op", "source", "lifetime");
    for (size_t k = 0; k < n; k++) buffer_row(f, v, k, idx[k], total, sh);
}

/* The OOMs of the trace: what each asked for, what the device had free, what was live. */
static hbm_status oom_section(FILE *f, const hbm_trace *t, const hbmi_view *v, int top) {
    size_t shown = 0, cap = top > 0 ? (size_t)top : 0;
    size_t *idx = hbmi_malloc((cap ? cap : 1) * sizeof *idx);
    if (!idx) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    char a[32], b[32], c[32], w[64];
    for (size_t i = 0; i < t->count && shown < 3; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind != HBM_EV_OOM) continue;
        shown++;
        fprintf(f, "\nOOM at %s: tried to allocate %s", when(t, i, w, sizeof w), hbm_size_xla((int64_t)e->requested, a));
        if (e->size) fprintf(f, "; the device had %s free", hbm_size_xla((int64_t)e->size, b));
        fprintf(f, "\n  in use %s, reserved %s at that moment", hbm_size_xla((int64_t)v->use[i], b),
                hbm_size_xla((int64_t)v->res[i], c));
        size_t n = live_at(v, (int64_t)i, idx, cap);
        fprintf(f, "; %zu buffer%s live%s\n", n, n == 1 ? "" : "s", n > cap ? ", largest:" : ":");
        buffer_table(f, v, idx, n < cap ? n : cap, v->use[i]);
    }
    if (v->ooms > shown) fprintf(f, "  ... and %" PRIu64 " more OOM%s\n", v->ooms - shown, v->ooms - shown == 1 ? "" : "s");
    hbmi_free(idx);
    return HBM_OK;
}

/* hbm's own traces (the recorder's, hbm run's): the device assumed for them and why, as
 * hbm replay assumes it (the header's, else hbm's default). Other sources are the
 * frameworks' files, which name their devices their own way. */
static int own_trace(const hbm_trace *t) { return !strcmp(t->source, "hbm") || !strcmp(t->source, "hbm run"); }

static void device_line(const hbm_trace *t, FILE *f) {
    const char *why;
    char h[32];
    uint64_t bytes = hbmi_trace_device_bytes(t, &why);
    fputs("device       ", f);
    if (!t->capacity || !strncmp(t->device, "sim:", 4)) fputs("simulated, ", f); /* (a sim device's name is its size) */
    else if (t->device[0]) {
        hbmi_fputs_visible(t->device, f);
        if (!strcmp(t->source, "hbm run")) fprintf(f, " (cuda:%d)", t->device_index); /* hbm run always writes it */
        fputs(", ", f);
    }
    fprintf(f, "%s (%s)\n", hbm_size_human(bytes, h), why);
}

hbm_status hbm_view_text(const hbm_trace *t, const hbm_view_options *o_in, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_view_text: NULL argument");
    hbm_view_options o;
    opts(o_in, &o);
    hbmi_view v;
    hbm_status s = hbmi_view_build(t, &v);
    if (s) return s;
    char a[32], b[32], c[32], w[64], title[128];
    hbmi_text_fit(title, sizeof title, o.title ? o.title : t->name, 50, 1);
    fprintf(f, "%s: %s trace, %zu events%s%s\n", title, t->source[0] ? t->source : "hbm", t->count - t->history_start,
            t->device[0] ? ", device " : "", t->device);
    if (own_trace(t)) device_line(t, f);
    if (t->history_start)
        fprintf(f, "before the history: %s live in %" PRIu64 " block%s, %s reserved (rebuilt from the segments)\n",
                hbm_size_xla((int64_t)t->live_before_bytes, a), t->live_before_blocks, t->live_before_blocks == 1 ? "" : "s",
                hbm_size_xla((int64_t)t->reserved_before_bytes, b));
    if (v.peak_use) /* (nothing in use: no moment to name) */
        fprintf(f, "peak in use  %s at %s; peak reserved %s\n", hbm_size_xla((int64_t)v.peak_use, a),
                when(t, v.peak_i, w, sizeof w), hbm_size_xla((int64_t)v.peak_res, b));
    else
        fprintf(f, "peak in use  0B (nothing allocated); peak reserved %s\n", hbm_size_xla((int64_t)v.peak_res, b));
    fprintf(f, "allocs %" PRIu64 ", frees %" PRIu64 ", OOMs %" PRIu64, v.allocs, v.frees, v.ooms);
    if (v.first_oom >= 0) {
        const hbm_trace_event *e = &t->events[v.first_oom];
        fprintf(f, " (first at %s %" PRId64 ": %s)", hbmi_event_unit(t), hbmi_event_pos(t, v.first_oom),
                hbm_size_xla((int64_t)e->requested, c));
    }
    if (t->truncated_at) fprintf(f, "\ntruncated at byte %" PRIu64 ": the events up to there are shown", t->truncated_at);
    if (v.inconsistent[0]) /* figures that no real run has: said, not shown as if true */
        fprintf(f, "\nwarning: an impossible history: the figures from its first inconsistent event on are not\n"
                   "  real: %s", v.inconsistent);
    fputs("\n\n", f);
    uint64_t scale = v.peak_res > v.peak_use ? v.peak_res : v.peak_use;
    /* from the state the history starts in (the last rebuilt event) */
    size_t from = t->history_start ? t->history_start - 1 : 0;
    sparkline(f, "in use", v.use + from, t->count - from, scale, o.width, o.ascii);
    sparkline(f, v.has_segments ? "reserved" : "reserved*", v.res + from, t->count - from, scale, o.width, o.ascii);
    if (hbmi_trace_is_plan(t)) /* a plan's trace: the schedule's steps */
        fprintf(f, "  %-10s step %" PRId64 " .. step %" PRId64 "   (allocs and frees in schedule order; reserved = in use)\n\n", "",
                hbmi_event_pos(t, 0), t->count ? hbmi_event_pos(t, (int64_t)t->count - 1) : 0);
    else
        fprintf(f, "  %-10s %s .. event %zu%s\n\n", "", t->history_start ? "before the history" : "event 0",
                t->count > t->history_start ? t->count - t->history_start - 1 : 0,
                v.has_segments ? "" : "   (*no segment events: reserved = in use)");
    size_t top = v.n_at_peak < (size_t)o.top ? v.n_at_peak : (size_t)o.top;
    fprintf(f, "Top %zu of %zu buffers live at the peak (%s requested):\n", top, v.n_at_peak,
            hbm_size_xla((int64_t)v.at_peak_bytes, a));
    buffer_table(f, &v, v.at_peak, top, v.at_peak_bytes);
    if (!s && v.ooms) s = oom_section(f, t, &v, o.top < 10 ? o.top : 10);
    for (int which = 0; which < 2; which++) {
        const hbmi_total *tot = which ? v.by_line : v.by_op;
        size_t n = which ? v.n_line : v.n_op, show = n < (size_t)o.top ? n : (size_t)o.top;
        fprintf(f, "\nTotals by %s (top %zu of %zu):\n", which ? "source line" : "op", show, n);
        if (show) fprintf(f, "  %-56s %12s %12s %8s\n", which ? "source" : "op", "at peak", "allocated", "allocs");
        for (size_t k = 0; k < show; k++) {
            char key[128];
            hbmi_text_fit(key, sizeof key, tot[k].key, 56, which);
            fprintf(f, "  %-56s %12s %12s %8" PRIu64 "\n", key, hbm_size_xla((int64_t)tot[k].at_peak, a),
                    hbm_size_xla((int64_t)tot[k].allocated, b), tot[k].count);
        }
    }
    hbmi_view_free(&v);
    if (s) return s;
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the view failed") : HBM_OK;
}

static void json_buf(FILE *f, const hbmi_view *v, size_t k) {
    const hbm_tl_buffer *bf = &v->tl->buffers[k];
    const hbm_tag *tg = hbm_timeline_tag_at(v->tl, bf->tag);
    char src[300];
    fprintf(f, "{\"size\": %" PRIu64 ", \"start\": %" PRId64 ", \"end\": %" PRId64 ", \"op\": ", bf->size,
            hbmi_trace_is_plan(v->t) ? hbmi_event_pos(v->t, bf->start) : hbmi_event_number(v->t, bf->start),
            hbmi_trace_is_plan(v->t) ? hbmi_event_pos(v->t, bf->end) : bf->end - (int64_t)v->t->history_start);
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

/* The per-device figures (the devices list of hbm view --json). */
static void json_device(FILE *f, const hbm_trace *t, const hbmi_view *v) {
    fputs("{\"device\": ", f);
    hbmi_json_str(f, t->device);
    fprintf(f,
            ", \"device_index\": %d, \"events\": %zu, \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"ooms\": %" PRIu64
            ", \"peak_bytes_in_use\": %" PRIu64 ", \"peak_event\": %" PRId64 ", \"peak_bytes_reserved\": %" PRIu64
            ", \"first_oom_event\": %" PRId64 ", \"history_start\": %zu, \"live_before_history_bytes\": %" PRIu64
            ", \"live_before_history_blocks\": %" PRIu64 ", \"reserved_before_history_bytes\": %" PRIu64
            ", \"has_time\": %s",
            t->device_index, t->count - t->history_start, v->allocs, v->frees, v->ooms, v->peak_use,
            hbmi_event_number(t, (int64_t)v->peak_i), v->peak_res, hbmi_event_number(t, v->first_oom), t->history_start, t->live_before_bytes, t->live_before_blocks,
            t->reserved_before_bytes, t->has_time ? "true" : "false");
    /* reserved at the peak of bytes in use, and the share of it not in use (the fleet view's
     * fragmentation at the peak: docs/fleet.md) */
    uint64_t rp = t->count ? v->res[v->peak_i] : 0;
    fprintf(f, ", \"reserved_at_peak_bytes\": %" PRIu64 ", \"fragmentation_at_peak\": %.6f", rp,
            rp > v->peak_use ? (double)(rp - v->peak_use) / (double)rp : 0.0);
    if (v->peak_use) hbmi_json_step(f, t, (int64_t)v->peak_i, "peak");
    hbmi_json_step(f, t, v->first_oom, "first_oom");
    fputc('}', f);
}

static hbm_status view_json(const hbm_trace *const *all, size_t nall, const hbm_view_options *o_in, FILE *f) {
    const hbm_trace *t = all[0];
    hbm_view_options o;
    opts(o_in, &o);
    hbmi_view v;
    hbm_status s = hbmi_view_build(t, &v);
    if (s) return s;
    fputc('{', f);
    hbmi_json_trace_id(f, t);
    fprintf(f,
            ", \"events\": %zu, \"peak_bytes_in_use\": %" PRIu64 ", \"peak_event\": %" PRId64 ", \"peak_bytes_reserved\": %" PRIu64
            ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"ooms\": %" PRIu64 ", \"first_oom_event\": %" PRId64
            ", \"live_at_peak\": %zu, \"live_at_peak_bytes\": %" PRIu64 ", \"truncated_at\": %" PRIu64,
            t->count - t->history_start, v.peak_use, hbmi_event_number(t, (int64_t)v.peak_i), v.peak_res, v.allocs, v.frees, v.ooms,
            hbmi_event_number(t, v.first_oom), v.n_at_peak, v.at_peak_bytes,
            t->truncated_at);
    if (v.peak_use) hbmi_json_step(f, t, (int64_t)v.peak_i, "peak");
    hbmi_json_step(f, t, v.first_oom, "first_oom");
    if (v.inconsistent[0]) {
        fputs(", \"warning\": ", f);
        hbmi_json_str(f, v.inconsistent);
    }
    fputs(", \"top\": [", f);
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
    if (own_trace(t)) { /* the device assumed, as the text's device line */
        const char *why;
        fprintf(f, ", \"device_bytes\": %" PRIu64 ", \"device_assumed\": ", hbmi_trace_device_bytes(t, &why));
        hbmi_json_str(f, why);
    }
    fputs(", \"devices\": [", f);
    json_device(f, t, &v);
    hbmi_view_free(&v);
    for (size_t d = 1; d < nall && !s; d++) {
        if (!(s = hbmi_view_build(all[d], &v))) {
            fputs(", ", f);
            json_device(f, all[d], &v);
            hbmi_view_free(&v);
        }
    }
    fputs("]}\n", f);
    if (s) return s;
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the view failed") : HBM_OK;
}

hbm_status hbm_view_json(const hbm_trace *t, const hbm_view_options *o, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_view_json: NULL argument");
    return view_json(&t, 1, o, f);
}


hbm_status hbm_view_all(const hbm_trace *t, int json, const hbm_view_options *o, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_view_all: NULL argument");
    size_t n = 1 + t->n_others;
    const hbm_trace **all = hbmi_malloc(n * sizeof *all);
    if (!all) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    all[0] = t;
    for (size_t i = 1; i < n; i++) all[i] = t->others[i - 1];
    hbm_status s = HBM_OK;
    if (json) {
        s = view_json(all, n, o, f);
    } else {
        for (size_t d = 0; d < n && !s; d++) {
            if (n > 1) fprintf(f, "%s== device %s (%zu of %zu) ==\n", d ? "\n" : "", all[d]->device, d + 1, n);
            s = hbm_view_text(all[d], o, f);
        }
    }
    hbmi_free(all);
    return s;
}
