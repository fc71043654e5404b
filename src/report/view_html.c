/* view_html.c - hbm view --html: one self-contained page (inline CSS, script and data; no
 * network), like pytorch.org/memory_viz and beyond it, for every device of the file:
 *   - the active-memory timeline: each large buffer its own band stacked in allocation
 *     order (height = its size), the smaller ones folded into one grey band per column so
 *     the top of the stack is the true in-use curve, reserved drawn over it; what was live
 *     before the history hatched; drawn at screen resolution from per-column maxima
 *     (wheel to zoom, drag to pan, double-click to reset; hover or click a band);
 *   - the segments and their blocks at any event (click the timeline; the peak at first);
 *   - the peak summary, the buffers live at the peak by size and a sortable table of them.
 * What is embedded stays bounded whatever the trace's length: at most MAX_COLS columns per
 * device, BLOCK_BUDGET buffers over all devices (the largest), MAX_BANDS bands, MAX_TAGS
 * tags and MAX_PEAK_ROWS table rows per device (less of each with more than two devices). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/size.h"
#include "report/view_internal.h"
#include "trace/trace_internal.h"

#define MAX_COLS 16384       /* curve columns per device (each keeps its highest event) */
#define MAX_PEAK_ROWS 5000   /* rows of the table of buffers live at the peak, per device */
#define BLOCK_BUDGET 200000  /* buffers (with address and lifetime) over all devices */
#define MAX_BANDS 3000       /* the largest of them drawn as their own band */
#define MAX_SEG_EVENTS 200000
#define MAX_OOMS 1000
#define MAX_TAGS 20000       /* distinct tags (op, shape, source, label) per device */
#define MAX_STACK_FRAMES 48  /* frames of a band's stack shown on hover */

/* What one device may embed: with more than two devices, twice the per-device maxima of
 * columns, rows and tags are shared over them (down to a floor each). */
typedef struct caps {
    uint64_t blocks;
    size_t cols, rows;
    uint32_t tags;
} caps;

static size_t share(size_t whole, size_t n, size_t floor, size_t top) {
    size_t v = whole / (n ? n : 1);
    return v < floor ? floor : v > top ? top : v;
}
#define MAX_STR 300          /* characters of a string (paths cut in the middle) */

/* A JSON string that is also safe inside <script>: '<', '>' and '&' as \u escapes. */
static void hstr(FILE *f, const char *s) { hbmi_json_write_str(f, s, HBMI_JSON_SCRIPT); }

/* A bounded string: cut in the middle (paths keep their file name and line). */
static void hstr_fit(FILE *f, const char *s, int middle) {
    char buf[4 * MAX_STR];
    hstr(f, hbmi_fit(buf, sizeof buf, s, MAX_STR, middle));
}

/* HTML text (title) */
static void htext(FILE *f, const char *s) {
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '<') fputs("&lt;", f);
        else if (*p == '>') fputs("&gt;", f);
        else if (*p == '&') fputs("&amp;", f);
        else if (*p == '"') fputs("&quot;", f);
        else fputc(*p, f);
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Blocks each device may embed: the largest cap with sum(min(n_i, cap)) <= BLOCK_BUDGET. */
static uint64_t block_cap(const hbm_trace *const *all, size_t n) {
    uint64_t *c = hbmi_malloc(n * sizeof *c + 1);
    if (!c) return BLOCK_BUDGET / (n ? n : 1);
    for (size_t d = 0; d < n; d++) {
        c[d] = 0;
        for (size_t i = 0; i < all[d]->count; i++) c[d] += all[d]->events[i].kind == HBM_EV_ALLOC;
    }
    hbmi_qsort(c, n, sizeof *c, cmp_u64);
    uint64_t left = BLOCK_BUDGET, cap = 0;
    for (size_t d = 0; d < n; d++) {
        uint64_t share = left / (n - d);
        if (c[d] <= share) {
            left -= c[d];
            cap = c[d];
        } else {
            cap = share;
            break;
        }
    }
    if (n && c[n - 1] <= cap) cap = c[n - 1];
    hbmi_free(c);
    return cap ? cap : 1;
}

typedef struct blk {
    uint64_t size;
    int64_t start;
    size_t idx;
    double area; /* size x lifetime: how much of the picture it is */
} blk;

static int blk_by_area(const void *a, const void *b) {
    const blk *x = a, *y = b;
    if (x->area != y->area) return x->area > y->area ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int blk_by_size(const void *a, const void *b) {
    const blk *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int blk_by_start(const void *a, const void *b) {
    const blk *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void sec(FILE *f, const hbm_trace *t, int64_t i) {
    if (t->has_time && i >= 0 && (size_t)i < t->count) fprintf(f, "%.6f", (double)t->events[i].time_ns / 1e9);
    else fputs("null", f);
}

/* Columns of the curve: events [from, count) in at most MAX_COLS buckets, each with its
 * event of highest in use (the peak's when it holds the peak), that value, the highest
 * reserved, the number of buffers live then and its time (when the trace has times). */
static hbm_status write_cols(FILE *f, const hbm_trace *t, const hbmi_view *v, size_t max_cols) {
    size_t from = t->history_start ? t->history_start - 1 : 0, n = t->count > from ? t->count - from : 0;
    size_t nb = n < max_cols ? n : max_cols;
    uint32_t *live = hbmi_calloc(t->count + 1, sizeof *live);
    size_t *rep = hbmi_malloc(nb * sizeof *rep + 1);
    uint64_t *rmax = hbmi_malloc(nb * sizeof *rmax + 1);
    if (!live || !rep || !rmax) {
        hbmi_free(live), hbmi_free(rep), hbmi_free(rmax);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory for the HTML view");
    }
    /* buffers live after each event: +1 at start, -1 at end, summed */
    int64_t *d = (int64_t *)hbmi_calloc(t->count + 1, sizeof *d);
    if (!d) {
        hbmi_free(live), hbmi_free(rep), hbmi_free(rmax);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory for the HTML view");
    }
    for (size_t k = 0; k < v->tl->count; k++) {
        const hbm_tl_buffer *b = &v->tl->buffers[k];
        if (b->start >= 0 && (size_t)b->start <= t->count) d[b->start]++;
        if (b->end >= 0 && (size_t)b->end <= t->count) d[b->end]--;
    }
    int64_t run = 0;
    for (size_t i = 0; i < t->count; i++) run += d[i], live[i] = (uint32_t)(run > 0 ? run : 0);
    hbmi_free(d);
    for (size_t c = 0; c < nb; c++) {
        size_t a = from + c * n / nb, b = from + (c + 1) * n / nb, best = a;
        uint64_t r = 0;
        for (size_t i = a; i < b; i++) {
            if (v->res[i] > r) r = v->res[i];
            if (best != v->peak_i && (v->use[i] > v->use[best] || i == v->peak_i)) best = i;
        }
        rep[c] = best;
        rmax[c] = r;
    }
    fprintf(f, ",\n\"cols\": {\"from\": %zu, \"n\": %zu, \"e\": [", from, n);
    for (size_t c = 0; c < nb; c++) fprintf(f, "%s%zu", c ? "," : "", rep[c]);
    fputs("],\n\"u\": [", f);
    for (size_t c = 0; c < nb; c++) fprintf(f, "%s%" PRIu64, c ? "," : "", v->use[rep[c]]);
    fputs("],\n\"r\": [", f);
    for (size_t c = 0; c < nb; c++) fprintf(f, "%s%" PRIu64, c ? "," : "", rmax[c]);
    fputs("],\n\"l\": [", f);
    for (size_t c = 0; c < nb; c++) fprintf(f, "%s%u", c ? "," : "", live[rep[c]]);
    fputs("]", f);
    if (t->has_time) {
        fputs(",\n\"t\": [", f);
        for (size_t c = 0; c < nb; c++) {
            if (c) fputc(',', f);
            sec(f, t, (int64_t)rep[c]);
        }
        fputs("]", f);
    }
    fputs("}", f);
    hbmi_free(live), hbmi_free(rep), hbmi_free(rmax);
    return HBM_OK;
}

/* op, shape, source, label, category as JSON array items */
static void write_tag_fields(FILE *f, const hbm_tag *tg) {
    char src[300];
    hstr_fit(f, tg && tg->op_name ? tg->op_name : "", 0);
    fputc(',', f);
    hstr_fit(f, tg && tg->shape ? tg->shape : "", 0);
    fputc(',', f);
    hstr_fit(f, hbmi_view_source(tg, src, sizeof src), 1);
    fputc(',', f);
    hstr_fit(f, tg && tg->label ? tg->label : "", 0);
    fputc(',', f);
    hstr(f, tg ? hbm_category_str(tg->category) : "");
}

static void write_tag(FILE *f, const hbm_tag *tg) {
    fputc('[', f);
    write_tag_fields(f, tg);
    fputc(']', f);
}

/* The recorder's own frames at the top of a PyTorch stack: the unwinder and the caching
 * allocator (the user wants the frames that asked for memory). */
static int allocator_frame(const char *fn) {
    static const char *own[] = {"torch::unwind::", "torch::CapturedTraceback::", "torch::cuda::(anonymous namespace)::gather",
                                "c10::cuda::CUDACachingAllocator::"};
    for (size_t i = 0; fn && i < sizeof own / sizeof own[0]; i++)
        if (!strncmp(fn, own[i], strlen(own[i]))) return 1;
    return 0;
}

/* The largest cap buffers, by start: start (delta from the previous), lifetime, size,
 * address (-1: none) and tag (into "tags", only the tags they use); "k": the bands
 * (indices), MAX_BANDS of them: half the largest, half the largest by size x lifetime (the
 * most of the picture), with their start and end times when the trace has them. */
static hbm_status write_blocks(FILE *f, const hbm_trace *t, const hbmi_view *v, uint64_t cap, uint32_t max_tags) {
    const hbm_timeline *tl = v->tl;
    size_t n = tl->count, m = n < cap ? n : (size_t)cap, nband = m < MAX_BANDS ? m : MAX_BANDS;
    uint32_t ntags = 0;
    for (size_t i = 0; i < n; i++)
        if (tl->buffers[i].tag > ntags) ntags = tl->buffers[i].tag;
    blk *b = hbmi_malloc(n * sizeof *b + 1);
    uint32_t *tagmap = hbmi_malloc(((size_t)ntags + 1) * sizeof *tagmap);
    uint32_t *order = hbmi_malloc(((size_t)ntags + 1) * sizeof *order);
    size_t *band = hbmi_malloc(nband * sizeof *band + 1);
    if (!b || !tagmap || !order || !band) {
        hbmi_free(b), hbmi_free(tagmap), hbmi_free(order), hbmi_free(band);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory for the HTML view");
    }
    for (size_t i = 0; i < n; i++) {
        const hbm_tl_buffer *x = &tl->buffers[i];
        b[i] = (blk){x->size, x->start, i, (double)x->size * (double)(x->end - x->start)};
    }
    /* the bands: half the largest, then the largest by size x lifetime among the rest */
    hbmi_qsort(b, n, sizeof *b, blk_by_size);
    hbmi_qsort(b + nband / 2, m - nband / 2, sizeof *b, blk_by_area);
    for (size_t i = 0; i < nband; i++) b[i].size = 1; /* mark the bands (size re-read below) */
    for (size_t i = nband; i < m; i++) b[i].size = 0;
    hbmi_qsort(b, m, sizeof *b, blk_by_start);
    for (uint32_t i = 0; i <= ntags; i++) tagmap[i] = UINT32_MAX;
    uint32_t ntag_out = 1;
    tagmap[0] = 0;
    order[0] = 0;
    int over = 0; /* tags beyond max_tags share one row that says so */
    for (size_t i = 0; i < m; i++) {
        uint32_t g = tl->buffers[b[i].idx].tag;
        if (tagmap[g] != UINT32_MAX) continue;
        if (ntag_out < max_tags) order[ntag_out] = g, tagmap[g] = ntag_out++;
        else tagmap[g] = max_tags, over = 1;
    }
    fputs(",\n\"tags\": [", f);
    for (uint32_t i = 0; i < ntag_out; i++) {
        if (i) fputs(",\n", f);
        write_tag(f, order[i] ? hbm_timeline_tag_at(tl, order[i]) : NULL);
    }
    if (over) fputs(",\n[\"(one of more tags than the page holds)\",\"\",\"\",\"\",\"\"]", f);
    fprintf(f, "],\n\"blocks\": {\"total\": %zu, \"s\": [", n);
    int64_t prev = 0;
    for (size_t i = 0; i < m; i++) {
        fprintf(f, "%s%" PRId64, i ? "," : "", b[i].start - prev);
        prev = b[i].start;
    }
    fputs("],\n\"d\": [", f);
    for (size_t i = 0; i < m; i++) {
        const hbm_tl_buffer *x = &tl->buffers[b[i].idx];
        fprintf(f, "%s%" PRId64, i ? "," : "", x->end - x->start);
    }
    fputs("],\n\"z\": [", f);
    for (size_t i = 0; i < m; i++) fprintf(f, "%s%" PRIu64, i ? "," : "", tl->buffers[b[i].idx].size);
    fputs("],\n\"a\": [", f);
    for (size_t i = 0; i < m; i++) {
        uint64_t a = tl->buffers[b[i].idx].offset;
        if (a == HBM_NO_OFFSET || a > (UINT64_C(1) << 53)) fprintf(f, "%s-1", i ? "," : "");
        else fprintf(f, "%s%" PRIu64, i ? "," : "", a);
    }
    fputs("],\n\"g\": [", f);
    for (size_t i = 0; i < m; i++) fprintf(f, "%s%u", i ? "," : "", tagmap[tl->buffers[b[i].idx].tag]);
    fputs("],\n\"k\": [", f);
    size_t nb = 0;
    for (size_t i = 0; i < m; i++)
        if (b[i].size) band[nb++] = i;
    for (size_t i = 0; i < nb; i++) fprintf(f, "%s%zu", i ? "," : "", band[i]);
    fputs("]", f);
    if (t->stacks) { /* the whole stack of each band (its alloc event's), each stack once */
        hbmi_map seen; /* backtrace id -> index in "stacks" */
        hbmi_map_init(&seen);
        uint32_t *ids = hbmi_malloc((nb + 1) * sizeof *ids);
        size_t nst = 0;
        hbm_status s = ids ? HBM_OK : hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        fputs(",\n\"st\": [", f);
        for (size_t i = 0; i < nb && !s; i++) {
            const hbm_tl_buffer *x = &tl->buffers[b[band[i]].idx];
            uint32_t bt = x->id < t->count ? t->events[x->id].backtrace : 0;
            uint64_t at = UINT64_MAX;
            if (bt && !hbmi_map_get(&seen, bt, &at)) {
                at = nst;
                ids[nst++] = bt;
                s = hbmi_map_put(&seen, bt, at);
            }
            if (at == UINT64_MAX) fprintf(f, "%s-1", i ? "," : "");
            else fprintf(f, "%s%" PRIu64, i ? "," : "", at);
        }
        fputs("],\n\"stacks\": [", f);
        for (size_t k = 0; k < nst && !s; k++) {
            size_t nf;
            const uint64_t *fr = hbm_trace_backtrace(t, ids[k], &nf);
            fputs(k ? ",[" : "[", f);
            for (size_t q = 0, w = 0; q < nf && w < MAX_STACK_FRAMES; q++) {
                const hbm_tag *tg = hbm_trace_tag(t, (uint32_t)fr[q]);
                char line[700], src[300];
                if (!tg || allocator_frame(tg->op_name)) continue;
                snprintf(line, sizeof line, "%s  %s", tg->op_name ? tg->op_name : "?", hbmi_view_source(tg, src, sizeof src));
                if (w++) fputc(',', f);
                hstr_fit(f, line, 0);
            }
            fputc(']', f);
        }
        fputs("]", f);
        hbmi_free(ids);
        hbmi_map_destroy(&seen);
        if (s) {
            hbmi_free(b), hbmi_free(tagmap), hbmi_free(order), hbmi_free(band);
            return s;
        }
    }
    if (t->has_time) {
        for (int end = 0; end < 2; end++) {
            fputs(end ? ",\n\"te\": [" : ",\n\"ts\": [", f);
            for (size_t i = 0; i < nb; i++) {
                const hbm_tl_buffer *x = &tl->buffers[b[band[i]].idx];
                int64_t e = end ? x->end : x->start;
                if (i) fputc(',', f);
                sec(f, t, e < (int64_t)t->history_start ? -1 : e);
            }
            fputs("]", f);
        }
    }
    fputs("}", f);
    hbmi_free(b), hbmi_free(tagmap), hbmi_free(order), hbmi_free(band);
    return HBM_OK;
}

/* Segment events (event, kind 0 alloc 1 free 2 map 3 unmap, address, size) and OOMs
 * (event, bytes asked, the device's free bytes or 0). */
static void write_segments(FILE *f, const hbm_trace *t) {
    static const char *const key[] = {"e", "k", "a", "z"};
    size_t total = 0;
    for (size_t i = 0; i < t->count; i++) {
        uint8_t k = t->events[i].kind;
        total += k == HBM_EV_SEGMENT_ALLOC || k == HBM_EV_SEGMENT_FREE || k == HBM_EV_SEGMENT_MAP || k == HBM_EV_SEGMENT_UNMAP;
    }
    fprintf(f, ",\n\"segs\": {\"total\": %zu", total);
    for (int col = 0; col < 4; col++) {
        fprintf(f, ", \"%s\": [", key[col]);
        size_t w = 0;
        for (size_t i = 0; i < t->count && w < MAX_SEG_EVENTS; i++) {
            const hbm_trace_event *e = &t->events[i];
            int k = e->kind == HBM_EV_SEGMENT_ALLOC ? 0 : e->kind == HBM_EV_SEGMENT_FREE ? 1 : e->kind == HBM_EV_SEGMENT_MAP ? 2
                    : e->kind == HBM_EV_SEGMENT_UNMAP ? 3 : -1;
            if (k < 0) continue;
            if (w++) fputc(',', f);
            if (col == 0) fprintf(f, "%zu", i);
            else if (col == 1) fprintf(f, "%d", k);
            else if (col == 2) fprintf(f, "%" PRIu64, e->addr > (UINT64_C(1) << 53) ? 0 : e->addr);
            else fprintf(f, "%" PRIu64, e->size);
        }
        fputc(']', f);
    }
    fputs("},\n\"oom_events\": [", f);
    size_t w = 0;
    for (size_t i = 0; i < t->count && w < MAX_OOMS; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind != HBM_EV_OOM) continue;
        fprintf(f, "%s[%zu,%" PRIu64 ",%" PRIu64 "]", w++ ? "," : "", i, e->requested, e->size);
    }
    fputc(']', f);
}

/* The buffers live at the peak, largest first: [size, start, end, op, shape, source,
 * label, category] (events as in the trace); the rest summed in "others". */
static void write_peak_rows(FILE *f, const hbmi_view *v, size_t max_rows) {
    fputs(",\n\"buffers\": [", f);
    size_t shown = v->n_at_peak < max_rows ? v->n_at_peak : max_rows;
    uint64_t other_bytes = 0;
    for (size_t k = 0; k < v->n_at_peak; k++) {
        const hbm_tl_buffer *bf = &v->tl->buffers[v->at_peak[k]];
        if (k >= shown) {
            other_bytes += bf->size;
            continue;
        }
        fprintf(f, "%s\n[%" PRIu64 ",%" PRId64 ",%" PRId64 ",", k ? "," : "", bf->size, bf->start, bf->end);
        write_tag_fields(f, hbm_timeline_tag_at(v->tl, bf->tag));
        fputc(']', f);
    }
    fputs("]", f);
    if (shown < v->n_at_peak)
        fprintf(f, ", \"others\": {\"count\": %zu, \"bytes\": %" PRIu64 "}", v->n_at_peak - shown, other_bytes);
}

/* One device: the figures of hbm view --json (events counted as in the trace; the page
 * shows them from the history's start) and what the page draws. */
static hbm_status write_device(FILE *f, const hbm_trace *t, const caps *cp) {
    hbmi_view v;
    hbm_status s = hbmi_view_build(t, &v);
    if (s) return s;
    fputs("{\"device\": ", f);
    hstr(f, t->device);
    fprintf(f,
            ", \"device_index\": %d, \"events\": %zu, \"history_start\": %zu, \"has_time\": %s, \"has_segments\": %s"
            ", \"live_before_bytes\": %" PRIu64 ", \"live_before_blocks\": %" PRIu64 ", \"reserved_before_bytes\": %" PRIu64
            ", \"truncated_at\": %" PRIu64 ",\n\"peak\": {\"bytes\": %" PRIu64 ", \"event\": %zu, \"time\": ",
            t->device_index, t->count, t->history_start, t->has_time ? "true" : "false", v.has_segments ? "true" : "false",
            t->live_before_bytes, t->live_before_blocks, t->reserved_before_bytes, t->truncated_at, v.peak_use, v.peak_i);
    sec(f, t, t->count && v.peak_i >= t->history_start ? (int64_t)v.peak_i : -1);
    fprintf(f,
            ", \"reserved\": %" PRIu64 "}, \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"ooms\": %" PRIu64
            ", \"first_oom\": %" PRId64 ", \"live_at_peak\": %zu, \"live_at_peak_bytes\": %" PRIu64,
            v.peak_res, v.allocs, v.frees, v.ooms, v.first_oom, v.n_at_peak, v.at_peak_bytes);
    if (t->steps_) { /* a plan's trace: each event's schedule step and each step's instruction */
        fputs(",\n\"steps\": [", f);
        for (size_t i = 0; i < t->count; i++) fprintf(f, "%s%" PRId64, i ? "," : "", hbmi_event_pos(t, (int64_t)i));
        fputs("], \"step_names\": [", f);
        for (size_t k = 0; k < t->n_steps_; k++) {
            if (k) fputc(',', f);
            hstr(f, t->step_names_[k]);
        }
        fputc(']', f);
    }
    s = write_cols(f, t, &v, cp->cols);
    if (!s) s = write_blocks(f, t, &v, cp->blocks, cp->tags);
    if (!s) {
        write_segments(f, t);
        write_peak_rows(f, &v, cp->rows);
    }
    fputs("}", f);
    hbmi_view_free(&v);
    return s;
}

/* The page: style, then the data (written by hbm_view_html), markup and script. */
static const char page_head[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<style>\n"
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;background:#fafafa;color:#1d2330}\n"
    "header{background:#1d2330;color:#fff;padding:14px 22px;display:flex;align-items:center;gap:18px;flex-wrap:wrap}\n"
    "header h1{font-size:18px;margin:0 0 4px}header .sub{color:#b8c0d0;font-size:13px}\n"
    "header label{margin-left:auto;font-size:13px;color:#b8c0d0}header select{font:inherit;font-size:13px;margin-left:6px}\n"
    "main{padding:14px 22px;max-width:1400px}\n"
    ".cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:14px}\n"
    ".card{background:#fff;border:1px solid #dde2ea;border-radius:6px;padding:8px 14px;min-width:140px}\n"
    ".card b{display:block;font-size:18px}.card span{color:#5b6475;font-size:12px}\n"
    "h2{font-size:15px;margin:18px 0 6px}\n"
    "#chartbox{position:relative;background:#fff;border:1px solid #dde2ea;border-radius:6px}\n"
    "#timeline{display:block;width:100%;height:340px;cursor:crosshair}\n"
    "#overlay{position:absolute;left:0;top:0;width:100%;height:340px;pointer-events:none}\n"
    ".hint{color:#5b6475;font-size:12px;margin:4px 0}\n"
    "#blocks{display:flex;height:64px;border:1px solid #dde2ea;border-radius:6px;overflow:hidden;background:#fff}\n"
    "#blocks div{height:100%;border-right:1px solid rgba(255,255,255,.7);box-sizing:border-box;min-width:1px}\n"
    "#blocks div:hover,#blocks div.sel{outline:2px solid #1d2330;outline-offset:-2px}\n"
    "#tip{position:fixed;pointer-events:none;background:#1d2330;color:#fff;padding:6px 9px;border-radius:5px;font-size:12px;white-space:pre;display:none;z-index:9;max-width:70vw;overflow:hidden}\n"
    "table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}\n"
    "th,td{border-bottom:1px solid #e6e9ef;padding:4px 8px;text-align:left;white-space:nowrap}\n"
    "th{cursor:pointer;background:#eef1f6;position:sticky;top:0;user-select:none}th.sorted{background:#dfe5ef}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}tr.sel td{background:#fff3c4}\n"
    "#tablebox{max-height:520px;overflow:auto;border:1px solid #dde2ea;border-radius:6px}\n"
    ".sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:middle}\n"
    ".hatch{background:repeating-linear-gradient(45deg,#9aa1ad 0 2px,#d9dce2 2px 5px)}\n"
    "button{font:inherit;font-size:12px;padding:2px 10px;margin-left:8px}\n"
    "#segbox{max-height:460px;overflow:auto;border:1px solid #dde2ea;border-radius:6px;background:#fff;padding:6px 10px}\n"
    ".seg{margin:3px 0}.seglab{font-size:11px;color:#5b6475;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}\n"
    ".segbar{position:relative;height:16px;background:#eef1f6;border:1px solid #c9ced8;box-sizing:border-box;min-width:6px}\n"
    ".blk{position:absolute;top:0;bottom:0;min-width:1px;box-sizing:border-box;border-right:1px solid rgba(255,255,255,.6)}\n"
    ".blk:hover,.blk.sel{outline:2px solid #1d2330;outline-offset:-1px;z-index:2}\n"
    ".blk.before{background:repeating-linear-gradient(45deg,#9aa1ad 0 2px,#d9dce2 2px 5px)!important}\n"
    "</style>\n";

/* Markup: the header with the device selector, cards, timeline, segments, blocks, table. */
static const char page_body[] =
    "</head><body>\n"
    "<header><div><h1 id=\"title\"></h1><div class=\"sub\" id=\"subtitle\"></div></div>\n"
    "<label>device <select id=\"device\"></select></label></header>\n"
    "<main>\n"
    "<div class=\"cards\" id=\"cards\"></div>\n"
    "<h2>Active memory timeline <button id=\"reset\">reset zoom</button><button id=\"topeak\">select the peak</button><button id=\"tooom\">select the first OOM</button></h2>\n"
    "<div id=\"chartbox\"><canvas id=\"timeline\"></canvas><canvas id=\"overlay\"></canvas></div>\n"
    "<div class=\"hint\" id=\"legend\"></div>\n"
    "<h2 id=\"segtitle\">Segments</h2>\n"
    "<div class=\"hint\">each reserved segment by address, its blocks live at the selected event (free space is the light background); click the timeline to pick an event</div>\n"
    "<div id=\"segbox\"></div>\n"
    "<h2 id=\"blockstitle\">Buffers live at the peak, by size</h2>\n"
    "<div id=\"blocks\"></div>\n"
    "<h2>Buffers live at the peak <span class=\"hint\">(click a column to sort)</span></h2>\n"
    "<div id=\"tablebox\"><table id=\"buffers\"><thead><tr><th data-k=\"0\" data-t=\"n\">#</th><th data-k=\"1\" data-t=\"n\">size</th><th data-k=\"9\" data-t=\"n\">share</th><th data-k=\"3\">op</th><th data-k=\"4\">shape</th><th data-k=\"5\">source</th><th data-k=\"7\">category</th><th data-k=\"2\" data-t=\"n\">start</th><th data-k=\"8\" data-t=\"n\">end</th><th data-k=\"10\" data-t=\"n\">lifetime</th></tr></thead><tbody></tbody></table><button id=\"more\" style=\"margin:6px\"></button></div>\n"
    "</main>\n"
    "<div id=\"tip\"></div>\n";

/* The script: reads the data, draws the selected device; #selftest drives the page for
 * tests/test_view_html.sh and reports in body's data-selftest. */
static const char page_script[] =
    "<script>\n"
    "(function(){\n"
    "'use strict';\n"
    "const T0=performance.now(),D=JSON.parse(document.getElementById('hbm-data').textContent),T1=performance.now();\n"
    "const $=id=>document.getElementById(id);\n"
    "const U=['B','KiB','MiB','GiB','TiB'];\n"
    "function sz(b){let i=0,v=b;while(v>=1024&&i<U.length-1){v/=1024;i++;}return (i?v.toFixed(2):v)+U[i];}\n"
    "function esc(s){return String(s).replace(/[&<>\"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','\"':'&quot;'}[c]));}\n"
    "function hex(a){return a<0?'?':'0x'+a.toString(16);}\n"
    "const PAL=['#4e79a7','#59a14f','#e15759','#76b7b2','#edc949','#af7aa1','#ff9da7','#9c755f','#f28e2c','#bab0ab'];\n"
    "const OTHER='#c9ced8',SEL='#d62728';\n"
    "function rgb(h){const n=parseInt(h.slice(1),16);return [n>>16&255,n>>8&255,n&255];}\n"
    "function u32(h){const c=rgb(h);return (255<<24|c[2]<<16|c[1]<<8|c[0])>>>0;}\n"
    "const PAL32=PAL.map(u32),OTHER32=u32(OTHER),SEL32=u32(SEL),WHITE32=u32('#ffffff'),HA32=u32('#9aa1ad'),HB32=u32('#d9dce2');\n"
    "/* colours by op for the blocks at the peak, in order of first appearance */\n"
    "const COL={};function color(s){if(!(s in COL))COL[s]=PAL[Object.keys(COL).length%PAL.length];return COL[s];}\n"
    "const tip=$('tip');\n"
    "function showTip(e,text){tip.textContent=text;tip.style.display='block';\n"
    "tip.style.left=Math.max(4,Math.min(e.clientX+14,innerWidth-tip.offsetWidth-8))+'px';\n"
    "tip.style.top=Math.min(e.clientY+14,innerHeight-tip.offsetHeight-4)+'px';}\n"
    "function hideTip(){tip.style.display='none';}\n"
    "document.title='hbm view: '+D.title;\n"
    "$('title').textContent=D.title;\n"
    "\n"
    "/* ---- one device's data, prepared once ---- */\n"
    "let V=null;\n"
    "function prep(d){\n"
    "if(d._p)return d._p;\n"
    "const C=d.cols,nb=C.e.length,B=d.blocks,m=B.s.length;\n"
    "const S=new Float64Array(m),E=new Float64Array(m);let acc=0;\n"
    "for(let i=0;i<m;i++){acc+=B.s[i];S[i]=acc;E[i]=acc+B.d[i];}\n"
    "const band=new Int32Array(m).fill(-1);B.k.forEach((j,q)=>{band[j]=q;});\n"
    "let ymax=1;for(let c=0;c<nb;c++){if(C.u[c]>ymax)ymax=C.u[c];if(C.r[c]>ymax)ymax=C.r[c];}\n"
    "return d._p={d,C,nb,from:C.from,n:C.n,N0:C.from,N1:C.from+C.n,hs:d.history_start,B,m,S,E,Z:B.z,A:B.a,G:B.g,K:B.k,ST:B.st,STK:B.stacks,band,ymax};\n"
    "}\n"
    "/* what an event is called: numbers count from the history's first event */\n"
    "function evl(i){if(V.d.steps){const s=V.d.steps[Math.max(0,Math.min(i,V.d.steps.length-1))],nm=V.d.step_names[s];return 'step '+s+(nm?' ('+nm+')':'');}\n"
    "return i<V.hs?'before the history':'event '+(i-V.hs);}\n"
    "function bucketOf(e){const n=V.n,nb=V.nb;if(!nb)return -1;let c=Math.ceil((e-V.from+1)*nb/n)-1;return Math.max(0,Math.min(nb-1,c));}\n"
    "/* the time of event i, only when the trace has times and i is a column's event */\n"
    "function timeOf(i){if(!V.d.has_time||!V.C.t||i<V.hs)return null;const c=bucketOf(i);return c>=0&&V.C.e[c]===i?V.C.t[c]:null;}\n"
    "function evt(i){const t=timeOf(i);return evl(i)+(t!==null&&t!==undefined?' ('+t.toFixed(6)+'s)':'');}\n"
    "function tagOf(j){return V.d.tags[V.G[j]]||['','','','',''];}\n"
    "function life(j){const a=V.S[j],b=V.E[j],q=V.band[j];let s=evl(a)+' .. '+(b>=V.N1?'the end (never freed)':evl(b));\n"
    "if(V.d.has_time&&q>=0&&V.B.ts){const ta=V.B.ts[q],tb=V.B.te[q];if(ta!==null||tb!==null)s+='\\n          ('+(ta!==null?ta.toFixed(6)+'s':'start')+' .. '+(tb!==null?tb.toFixed(6)+'s':'end')+')';}\n"
    "return s;}\n"
    "function oomText(ev){const o=V.d.oom_events.find(o=>o[0]===ev);return o?'\\nOOM: tried to allocate '+sz(o[1])+(o[2]?'; the device had '+sz(o[2])+' free':''):'';}\n"
    "function stackOf(j){if(!V.ST)return '';if(!V.kpos){V.kpos=new Map();V.K.forEach((b,i)=>V.kpos.set(b,i));}const q=V.kpos.get(j);\n"
    "const s=q===undefined?null:V.STK[V.ST[q]];return s&&s.length?'\\nstack:\\n  '+s.join('\\n  '):'';}\n"
    "function blockText(j){const g=tagOf(j);return sz(V.Z[j])+(V.S[j]<V.hs?'   (live before the history)':'')+'\\nlifetime: '+life(j)+'\\nop:       '+(g[0]||g[3]||'(untagged)')+\n"
    "(g[3]&&g[3]!==g[0]?'\\nlabel:    '+g[3]:'')+(g[1]?'\\nshape:    '+g[1]:'')+'\\nsource:   '+(g[2]||'-')+(g[4]?'\\ncategory: '+g[4]:'')+'\\naddress:  '+hex(V.A[j])+stackOf(j);}\n"
    "\n"
    "/* ---- device selector ---- */\n"
    "const dsel=$('device');\n"
    "dsel.innerHTML=D.devices.map((d,i)=>'<option value=\"'+i+'\">'+esc((d.device||'device '+i)+' \\u00b7 peak '+sz(d.peak.bytes)+(d.ooms?' \\u00b7 '+d.ooms+' OOM':''))+'</option>').join('');\n"
    "dsel.addEventListener('change',()=>setDevice(+dsel.value));\n"
    "\n"
    "/* ---- timeline ---- */\n"
    "const cv=$('timeline'),cx=cv.getContext('2d'),ov=$('overlay'),ox=ov.getContext('2d');\n"
    "const PAD={l:74,r:14,t:12,b:34};\n"
    "let x0=0,x1=1,hi=null,selBand=-1,hovBand=-1,selEvent=-1,G={};\n"
    "function X(v){return PAD.l+(v-x0)/(x1-x0)*(G.w-PAD.l-PAD.r);}\n"
    "function Y(v){return G.h-PAD.b-v/V.ymax*(G.h-PAD.t-PAD.b);}\n"
    "function render(){\n"
    "const r=cv.getBoundingClientRect(),dpr=devicePixelRatio||1;\n"
    "cv.width=Math.max(1,Math.round(r.width*dpr));cv.height=Math.max(1,Math.round(r.height*dpr));ov.width=cv.width;ov.height=cv.height;\n"
    "G={w:r.width,h:r.height,dpr};cx.setTransform(1,0,0,1,0,0);cx.clearRect(0,0,cv.width,cv.height);\n"
    "const pl=Math.round(PAD.l*dpr),pt=Math.round(PAD.t*dpr),pw=Math.max(1,cv.width-pl-Math.round(PAD.r*dpr)),ph=Math.max(1,cv.height-pt-Math.round(PAD.b*dpr));\n"
    "G.pl=pl;G.pt=pt;G.pw=pw;G.ph=ph;\n"
    "const rep=new Float64Array(pw).fill(-1),cb=new Int32Array(pw).fill(-1),res=new Float64Array(pw);\n"
    "G.rep=rep;G.cb=cb;G.res=res;\n"
    "const img=cx.createImageData(pw,ph),px=new Uint32Array(img.data.buffer);px.fill(WHITE32);\n"
    "const sc=ph/V.ymax,C=V.C,K=V.K,S=V.S,E=V.E,Z=V.Z;\n"
    "const drawn=new Set(),hatched=new Set();let kp=0,act=[];\n"
    "for(let x=0;x<pw&&V.nb;x++){\n"
    "const ea=x0+x*(x1-x0)/pw,eb=x0+(x+1)*(x1-x0)/pw;\n"
    "if(eb<=V.N0||ea>=V.N1)continue;\n"
    "const fa=Math.max(V.N0,Math.floor(ea)),cA=bucketOf(fa),cB=bucketOf(Math.min(V.N1-1,Math.max(fa,Math.ceil(eb)-1)));\n"
    "let best=cA,rm=0;for(let c=cA;c<=cB;c++){if(C.u[c]>C.u[best])best=c;if(C.r[c]>rm)rm=C.r[c];}\n"
    "const e=C.e[best];rep[x]=e;cb[x]=best;res[x]=rm;\n"
    "while(kp<K.length&&S[K[kp]]<=e)act.push(K[kp++]);\n"
    "let stale=false;for(let q=0;q<act.length;q++)if(E[act[q]]<=e){stale=true;break;}\n"
    "if(stale)act=act.filter(j=>E[j]>e);\n"
    "let off=0,y0=ph;\n"
    "for(let q=0;q<act.length;q++){const j=act[q];off+=Z[j];const y1=Math.max(0,Math.round(ph-off*sc));\n"
    "if(y1<y0){const before=S[j]<V.hs,hl=j===selBand||j===hovBand,c32=hl?SEL32:PAL32[V.band[j]%PAL32.length];\n"
    "for(let y=y1;y<y0;y++)px[y*pw+x]=hl?c32:before?(((x+y)&7)<3?HA32:HB32):c32;\n"
    "if(!hl&&!before&&y0-y1>=4)px[y1*pw+x]=PAL32[(V.band[j]+5)%PAL32.length];\n"
    "drawn.add(j);if(before)hatched.add(j);y0=y1;}}\n"
    "const top=Math.max(0,Math.round(ph-C.u[best]*sc));for(let y=top;y<y0;y++)px[y*pw+x]=OTHER32;}\n"
    "cx.putImageData(img,pl,pt);\n"
    "G.drawn=drawn.size;G.hatched=hatched.size;\n"
    "cx.setTransform(dpr,0,0,dpr,0,0);const w=G.w,h=G.h;\n"
    "cx.font='11px sans-serif';cx.fillStyle='#5b6475';cx.strokeStyle='rgba(0,0,0,.08)';cx.lineWidth=1;\n"
    "for(let i=0;i<=4;i++){const v=V.ymax*i/4,y=Y(v);cx.beginPath();cx.moveTo(PAD.l,y);cx.lineTo(w-PAD.r,y);cx.stroke();cx.fillText(sz(Math.round(v)),4,y+4);}\n"
    "/* x axis: ticks at column events, so a time shown is that event's own */\n"
    "const labels=[];let last=-1;\n"
    "if(V.nb)for(let i=0;i<=6;i++){const v=x0+(x1-x0)*i/6,e=Math.min(V.N1-1,Math.max(V.N0,Math.floor(v))),c=bucketOf(e),te=V.C.e[c];if(te===last)continue;last=te;\n"
    "const xx=Math.min(w-PAD.r,Math.max(PAD.l,X(te+0.5)));cx.textAlign=i?(i<6?'center':'right'):'left';\n"
    "const l1=V.d.steps?'step '+V.d.steps[te]:te<V.hs?'before the history':'event '+(te-V.hs),tt=timeOf(te),l2=tt!==null&&tt!==undefined?tt.toFixed(4)+'s':'';\n"
    "if(V.d.steps&&labels.indexOf(l1)>=0)continue; /* several events of one step: one label */\n"
    "cx.fillText(l1,xx,h-20);if(l2)cx.fillText(l2,xx,h-7);labels.push(l1+(l2?' '+l2:''));}\n"
    "cx.textAlign='left';document.body.dataset.axis=labels.join('|');\n"
    "cx.save();cx.beginPath();cx.rect(PAD.l,0,w-PAD.l-PAD.r,h);cx.clip();\n"
    "/* reserved: the highest of each column */\n"
    "cx.beginPath();let started=false;for(let x=0;x<pw;x++){if(rep[x]<0)continue;const xx=PAD.l+x/dpr,yy=Y(res[x]);if(!started){cx.moveTo(xx,yy);started=true;}else cx.lineTo(xx,yy);}\n"
    "cx.strokeStyle='#f28e2c';cx.lineWidth=1.5;cx.stroke();\n"
    "if(V.hs>0&&V.hs>=x0&&V.hs<=x1){const hx=X(V.hs);cx.strokeStyle='#5b6475';cx.setLineDash([2,3]);cx.beginPath();cx.moveTo(hx,PAD.t);cx.lineTo(hx,h-PAD.b);cx.stroke();cx.setLineDash([]);\n"
    "cx.fillStyle='#5b6475';cx.fillText('history starts',hx+3,PAD.t+22);}\n"
    "const pe=V.d.peak.event;if(V.nb&&pe>=x0&&pe<=x1){const p=X(pe+0.5);cx.strokeStyle='#e15759';cx.setLineDash([4,3]);cx.beginPath();cx.moveTo(p,PAD.t);cx.lineTo(p,h-PAD.b);cx.stroke();cx.setLineDash([]);cx.fillStyle='#e15759';cx.fillText('peak',p+3,PAD.t+10);}\n"
    "cx.fillStyle='#b00020';V.d.oom_events.forEach(o=>{if(o[0]<x0||o[0]>x1)return;const p=X(o[0]+0.5);cx.beginPath();cx.moveTo(p-5,PAD.t);cx.lineTo(p+5,PAD.t);cx.lineTo(p,PAD.t+8);cx.fill();});\n"
    "if(selEvent>=0&&selEvent>=x0&&selEvent<=x1){const p=X(selEvent+0.5);cx.strokeStyle='#1f5fbf';cx.lineWidth=2;cx.beginPath();cx.moveTo(p,PAD.t);cx.lineTo(p,h-PAD.b);cx.stroke();}\n"
    "cx.restore();\n"
    "document.body.dataset.bands=G.drawn;document.body.dataset.hatched=G.hatched;document.body.dataset.plot=[r.left+scrollX+PAD.l,r.top+scrollY+PAD.t,r.width-PAD.l-PAD.r,r.height-PAD.t-PAD.b].map(Math.round).join(',');\n"
    "overlay(null);}\n"
    "let mouse=null;\n"
    "function overlay(){ox.setTransform(G.dpr,0,0,G.dpr,0,0);ox.clearRect(0,0,G.w,G.h);\n"
    "if(hi){ox.fillStyle='rgba(237,201,73,.30)';const a=X(hi[0]),b=X(hi[1]);ox.fillRect(Math.max(PAD.l,a),PAD.t,Math.max(2,Math.min(G.w-PAD.r,b)-Math.max(PAD.l,a)),G.h-PAD.t-PAD.b);}\n"
    "if(mouse!==null&&mouse>=PAD.l){ox.strokeStyle='#1d2330';ox.lineWidth=1;ox.beginPath();ox.moveTo(mouse,PAD.t);ox.lineTo(mouse,G.h-PAD.b);ox.stroke();}}\n"
    "/* what is under the mouse: the column's event and the band (or the folded rest) */\n"
    "function hit(e){const r=cv.getBoundingClientRect(),x=Math.floor((e.clientX-r.left)*G.dpr)-G.pl;\n"
    "if(x<0||x>=G.pw||G.rep[x]<0)return null;const ev=G.rep[x],c=G.cb[x],v=(G.ph-((e.clientY-r.top)*G.dpr-G.pt))/(G.ph/V.ymax);\n"
    "let off=0,band=-1,live=0,lb=0;for(const j of V.K){if(V.S[j]<=ev&&ev<V.E[j]){live++;lb+=V.Z[j];if(band<0&&v>=off&&v<off+V.Z[j])band=j;off+=V.Z[j];}}\n"
    "return {ev,c,band,other:band<0&&v>=off&&v<=V.C.u[c],live,lb,x};}\n"
    "function evAt(clientX){const r=cv.getBoundingClientRect();return x0+(clientX-r.left-PAD.l)/(r.width-PAD.l-PAD.r)*(x1-x0);}\n"
    "function clampView(a,b){const N0=V.N0,N1=Math.max(V.N1,V.N0+1);if(b-a>N1-N0){a=N0;b=N1;}if(a<N0){b+=N0-a;a=N0;}if(b>N1){a-=b-N1;b=N1;}x0=Math.max(N0,a);x1=b;}\n"
    "function resetView(){x0=V.N0;x1=Math.max(V.N1,V.N0+1);}\n"
    "let drag=null;\n"
    "cv.addEventListener('wheel',e=>{e.preventDefault();const c=evAt(e.clientX),k=e.deltaY<0?0.8:1.25;\n"
    "const a=c-(c-x0)*k,b=c+(x1-c)*k;if(b-a<Math.min(4,(V.N1-V.N0)/8))return;clampView(a,b);render();},{passive:false});\n"
    "cv.addEventListener('mousedown',e=>{drag={x:e.clientX,a:x0,b:x1,moved:false};});\n"
    "addEventListener('mouseup',e=>{if(drag&&!drag.moved&&e.target===cv)pick(e);drag=null;});\n"
    "cv.addEventListener('mousemove',e=>{const r=cv.getBoundingClientRect();\n"
    "if(drag&&Math.abs(e.clientX-drag.x)>3){drag.moved=true;const d=(e.clientX-drag.x)/(r.width-PAD.l-PAD.r)*(drag.b-drag.a);clampView(drag.a-d,drag.b-d);render();}\n"
    "mouse=e.clientX-r.left;const h=hit(e);\n"
    "if(!h){hideTip();if(hovBand>=0){hovBand=-1;render();}else overlay();return;}\n"
    "const c=h.c,head=evt(h.ev)+'\\nin use   '+sz(V.C.u[c])+'\\nreserved '+sz(V.C.r[c])+'\\nbuffers live '+V.C.l[c]+oomText(h.ev);\n"
    "if(h.band>=0)showTip(e,blockText(h.band)+'\\n\\nat '+head);\n"
    "else if(h.other)showTip(e,(V.C.l[c]-h.live)+' smaller buffers folded: '+sz(Math.max(0,V.C.u[c]-h.lb))+'\\n\\nat '+head);\n"
    "else showTip(e,head);\n"
    "if(h.band!==hovBand){hovBand=h.band;render();}else overlay();});\n"
    "cv.addEventListener('mouseleave',()=>{mouse=null;hideTip();if(hovBand>=0){hovBand=-1;render();}else overlay();});\n"
    "cv.addEventListener('dblclick',()=>{resetView();render();});\n"
    "$('reset').onclick=()=>{resetView();render();};\n"
    "$('topeak').onclick=()=>{selectEvent(V.d.peak.event);};\n"
    "$('tooom').onclick=()=>{if(V.d.first_oom>=0)selectEvent(V.d.first_oom);};\n"
    "addEventListener('resize',()=>render());\n"
    "addEventListener('keydown',e=>{if(selEvent<0||(e.key!=='ArrowLeft'&&e.key!=='ArrowRight')||e.target.tagName==='SELECT')return;\n"
    "const c=bucketOf(selEvent)+(e.key==='ArrowRight'?1:-1);if(c>=0&&c<V.nb){e.preventDefault();selectEvent(V.C.e[c]);}});\n"
    "function pick(e){const h=hit(e);if(!h)return;selBand=h.band;selectEvent(h.ev);}\n"
    "\n"
    "/* ---- segments and their blocks at an event ---- */\n"
    "function segmentsAt(ev){const g=V.d.segs;let list=[];\n"
    "for(let i=0;i<g.e.length&&g.e[i]<=ev;i++){const k=g.k[i],a=g.a[i],z=g.z[i];\n"
    "if(k===0)list.push([a,z]);\n"
    "else if(k===2){/* a mapping joins the ranges it touches (one expandable segment) */\n"
    "let s=list.find(s=>s[0]+s[1]===a);if(s)s[1]+=z;else list.push(s=[a,z]);const nx=list.findIndex(q=>q[0]===s[0]+s[1]);if(nx>=0){s[1]+=list[nx][1];list.splice(nx,1);}}\n"
    "else{const out=[];for(const s of list){const b0=s[0],b1=s[0]+s[1];if(b1<=a||b0>=a+z){out.push(s);continue;}\n"
    "if(b0<a)out.push([b0,a-b0]);if(b1>a+z)out.push([a+z,b1-a-z]);}list=out;}}\n"
    "return list.sort((p,q)=>p[0]-q[0]);}\n"
    "function selectEvent(ev){if(ev<0||!V.nb)return;selEvent=ev;render();showSegments(ev);}\n"
    "function showSegments(ev){\n"
    "const segs=segmentsAt(ev),rows=segs.map(s=>({a:s[0],z:s[1],b:[],used:0})),out={a:-1,z:0,b:[],used:0};\n"
    "let n=0,bytes=0;\n"
    "for(let j=0;j<V.m;j++){if(!(V.S[j]<=ev&&ev<V.E[j]))continue;n++;bytes+=V.Z[j];const a=V.A[j];\n"
    "let lo=0,hi2=rows.length-1,row=out;while(lo<=hi2){const mid=(lo+hi2)>>1;if(rows[mid].a<=a){if(a<rows[mid].a+rows[mid].z){row=rows[mid];break;}lo=mid+1;}else hi2=mid-1;}\n"
    "row.b.push(j);row.used+=V.Z[j];}\n"
    "const c=bucketOf(ev),exact=c>=0&&V.C.e[c]===ev,reserved=segs.reduce((s,x)=>s+x[1],0);\n"
    "let title='Segments '+(ev<V.hs?'':'at ')+evt(ev)+': '+segs.length+' segment'+(segs.length===1?'':'s')+', '+sz(reserved)+' reserved; '+n+' blocks, '+sz(bytes)+' in use';\n"
    "let note='';\n"
    "if(V.B.total>V.m&&exact){const rest=V.C.u[c]-bytes,cnt=V.C.l[c]-n;if(cnt>0)note=cnt+' smaller buffers ('+sz(Math.max(0,rest))+') are not in the page: the '+V.m+' largest of '+V.B.total+' are';}\n"
    "if(V.d.segs.total>V.d.segs.e.length)note+=(note?'; ':'')+'only the first '+V.d.segs.e.length+' of '+V.d.segs.total+' segment events are in the page';\n"
    "$('segtitle').textContent=title+oomText(ev).replace('\\n','; ');\n"
    "const maxz=rows.reduce((m,r)=>Math.max(m,r.z),1);let html='',drawnB=0;const LIM=20000;\n"
    "if(note)html+='<div class=\"hint\">'+esc(note)+'</div>';\n"
    "const show=rows.slice(0,2000);\n"
    "function bar(r,width){let s='';r.b.sort((p,q)=>V.A[p]-V.A[q]);for(const j of r.b){if(drawnB>=LIM)break;drawnB++;\n"
    "const l=r.z?(V.A[j]-r.a)/r.z*100:0,wd=r.z?V.Z[j]/r.z*100:0;\n"
    "s+='<div class=\"blk'+(V.S[j]<V.hs?' before':'')+(j===selBand?' sel':'')+'\" data-b=\"'+j+'\" style=\"left:'+l.toFixed(4)+'%;width:'+wd.toFixed(4)+'%;background:'+(V.band[j]>=0?PAL[V.band[j]%PAL.length]:'#8a94a6')+'\"></div>';}\n"
    "return '<div class=\"segbar\" style=\"width:'+width+'%\">'+s+'</div>';}\n"
    "for(const r of show){const w=Math.max(4,r.z/maxz*100);\n"
    "html+='<div class=\"seg\" data-a=\"'+r.a+'\"><div class=\"seglab\">'+hex(r.a)+' \\u00b7 '+sz(r.z)+' \\u00b7 '+r.b.length+' block'+(r.b.length===1?'':'s')+', '+sz(r.used)+' used ('+(r.z?(r.used/r.z*100).toFixed(1):'0')+'%), '+sz(Math.max(0,r.z-r.used))+' free</div>'+bar(r,w)+'</div>';}\n"
    "if(rows.length>show.length)html+='<div class=\"hint\">... and '+(rows.length-show.length)+' more segments</div>';\n"
    "if(out.b.length){let lo=Infinity,hi3=0;for(const j of out.b){if(V.A[j]>=0){lo=Math.min(lo,V.A[j]);hi3=Math.max(hi3,V.A[j]+V.Z[j]);}}\n"
    "const label=segs.length?out.b.length+' blocks outside the segments above':'no segment events in this trace: the '+out.b.length+' live blocks by address';\n"
    "if(lo<hi3){out.a=lo;out.z=hi3-lo;}\n"
    "html+='<div class=\"seg outside\"><div class=\"seglab\">'+esc(label)+'</div>'+(lo<hi3?bar(out,100):'')+'</div>';}\n"
    "if(!rows.length&&!out.b.length)html+='<div class=\"hint\">nothing reserved and nothing live at this event</div>';\n"
    "$('segbox').innerHTML=html;document.body.dataset.segs=show.length;document.body.dataset.segblocks=drawnB;document.body.dataset.selected=ev;}\n"
    "$('segbox').addEventListener('mousemove',e=>{const b=e.target.closest('.blk');if(!b){hideTip();return;}showTip(e,blockText(+b.dataset.b));});\n"
    "$('segbox').addEventListener('mouseleave',hideTip);\n"
    "$('segbox').addEventListener('click',e=>{const b=e.target.closest('.blk');if(!b)return;const j=+b.dataset.b;selBand=j;hi=[V.S[j],V.E[j]];render();\n"
    "document.querySelectorAll('.blk.sel').forEach(x=>x.classList.remove('sel'));b.classList.add('sel');});\n"
    "\n"
    "/* ---- the buffers live at the peak: blocks by size and a sortable table; rows:\n"
    " * [i,size,start,op,shape,source,label,category,end,share,lifetime] ---- */\n"
    "const bl=$('blocks'),tb=document.querySelector('#buffers tbody'),PAGE=500,STRIP=400;let B=[];\n"
    "$('more').onclick=()=>{shownRows+=PAGE;rows(sorted);};\n"
    "function ev2(i){if(V.d.steps)return String(V.d.steps[Math.max(0,Math.min(i,V.d.steps.length-1))]);return i<V.hs?'before':String(i-V.hs);}\n"
    "function detail(r){return sz(r[1])+'  ('+r[9].toFixed(1)+'% of live at peak)\\nop:       '+r[3]+(r[6]&&r[6]!==r[3]?'\\nlabel:    '+r[6]:'')+\n"
    "'\\nshape:    '+(r[4]||'-')+'\\nsource:   '+(r[5]||'-')+'\\ncategory: '+(r[7]||'-')+'\\nlifetime: '+evl(r[2])+' .. '+(r[8]>=V.N1?'the end':evl(r[8]))+' ('+(V.d.steps?(r[8]>=V.N1?V.d.step_names.length:V.d.steps[r[8]])-V.d.steps[r[2]]+' steps':r[10]+' events')+')';}\n"
    "function bandOf(r){for(let j=0;j<V.m;j++)if(V.S[j]===r[2]&&V.E[j]===r[8]&&V.Z[j]===r[1])return j;return -1;}\n"
    "function select(i){document.querySelectorAll('.sel').forEach(e=>e.classList.remove('sel'));if(i===null){hi=null;render();return;}\n"
    "const r=B[i];hi=[r[2],r[8]];selBand=bandOf(r);const d=bl.querySelector('[data-i=\"'+i+'\"]');if(d)d.classList.add('sel');\n"
    "const row=tb.querySelector('tr[data-i=\"'+i+'\"]');if(row)row.classList.add('sel');render();}\n"
    "bl.addEventListener('mousemove',e=>{const d=e.target.closest('div[data-i],div[data-o]');if(!d)return;\n"
    "if(d.dataset.o){showTip(e,V.fold.count+' smaller buffers, '+sz(V.fold.bytes));return;}const r=B[+d.dataset.i];showTip(e,detail(r));\n"
    "if(!hi||hi[0]!==r[2]||hi[1]!==r[8]){hi=[r[2],r[8]];overlay();}});\n"
    "bl.addEventListener('mouseleave',()=>{hideTip();hi=null;overlay();});\n"
    "bl.addEventListener('click',e=>{const d=e.target.closest('div[data-i]');if(d){select(+d.dataset.i);\n"
    "const row=tb.querySelector('tr[data-i=\"'+d.dataset.i+'\"]');if(row)row.scrollIntoView({block:'nearest'});}});\n"
    "let shownRows=PAGE,sorted=[];\n"
    "function rows(list){sorted=list;const more=$('more'),left=list.length-shownRows;more.style.display=left>0?'':'none';more.textContent='show '+Math.min(PAGE,left)+' more rows ('+left+' not shown)';\n"
    "tb.innerHTML=list.slice(0,shownRows).map(r=>'<tr class=\"buf-row\" data-i=\"'+r[0]+'\"><td class=\"num\">'+r[0]+'</td><td class=\"num\">'+sz(r[1])+\n"
    "'</td><td class=\"num\">'+r[9].toFixed(1)+'%</td><td>'+esc(r[3])+'</td><td>'+esc(r[4]||'')+'</td><td>'+esc(r[5]||'')+\n"
    "'</td><td>'+esc(r[7]||'')+'</td><td class=\"num\">'+ev2(r[2])+'</td><td class=\"num\">'+(r[8]>=V.N1?'end':ev2(r[8]))+'</td><td class=\"num\">'+(V.d.steps?(r[8]>=V.N1?V.d.step_names.length:V.d.steps[r[8]])-V.d.steps[r[2]]:r[10])+'</td></tr>').join('');}\n"
    "let sortK=1,sortDir=-1;\n"
    "function sortBy(k,num){if(sortK===k)sortDir=-sortDir;else{sortK=k;sortDir=num?-1:1;}\n"
    "const s=B.slice().sort((a,b)=>{const x=a[k],y=b[k];return (x<y?-1:x>y?1:a[0]-b[0])*sortDir;});rows(s);\n"
    "document.querySelectorAll('th').forEach(t=>t.classList.toggle('sorted',+t.dataset.k===k));}\n"
    "document.querySelectorAll('#buffers th').forEach(th=>th.addEventListener('click',()=>sortBy(+th.dataset.k,th.dataset.t==='n')));\n"
    "tb.addEventListener('click',e=>{const tr=e.target.closest('tr');if(tr)select(+tr.dataset.i);});\n"
    "tb.addEventListener('mousemove',e=>{const tr=e.target.closest('tr');if(tr)showTip(e,detail(B[+tr.dataset.i]));});\n"
    "tb.addEventListener('mouseleave',hideTip);\n"
    "\n"
    "/* ---- a device on the page ---- */\n"
    "function setDevice(i){const d=D.devices[i];V=prep(d);dsel.value=String(i);hi=null;selBand=-1;hovBand=-1;\n"
    "const live=d.events-d.history_start;\n"
    "$('subtitle').textContent=D.source+' trace \\u00b7 '+live+' events'+(d.device?' \\u00b7 device '+d.device:'')+(D.devices.length>1?' \\u00b7 device '+(i+1)+' of '+D.devices.length:'')+(d.steps?' \\u00b7 an HLO module\\u2019s plan: positions are schedule steps':d.has_time?'':' \\u00b7 no times in the trace: events are numbered');\n"
    "const cards=[['peak in use',sz(d.peak.bytes)],['at',d.events?evt(d.peak.event):'-'],\n"
    "['peak reserved',sz(d.peak.reserved)],['live at peak',d.live_at_peak+' buffers'],['allocs / frees',d.allocs+' / '+d.frees],\n"
    "['OOMs',d.ooms+(d.first_oom>=0?' (first at '+evl(d.first_oom)+')':'')]];\n"
    "if(d.history_start)cards.push(['live before the history',sz(d.live_before_bytes)+' in '+d.live_before_blocks+' blocks, '+sz(d.reserved_before_bytes)+' reserved']);\n"
    "if(d.truncated_at)cards.push(['truncated at byte',String(d.truncated_at)]);\n"
    "$('cards').innerHTML=cards.map(c=>'<div class=\"card\"><span>'+esc(c[0])+'</span><b>'+esc(c[1])+'</b></div>').join('');\n"
    "$('legend').innerHTML='<span class=\"sw\" style=\"background:#4e79a7\"></span><span class=\"sw\" style=\"background:#59a14f;margin-left:-4px\"></span>'+(V.K.length<V.B.total?V.K.length+' buffers (the largest, and the largest by size \\u00d7 lifetime)':'every buffer')+' each its own band, stacked in allocation order '+\n"
    "(V.K.length<V.B.total?'<span class=\"sw\" style=\"background:'+OTHER+';margin-left:12px\"></span>the '+(V.B.total-V.K.length)+' others, folded ':'')+\n"
    "(d.history_start?'<span class=\"sw hatch\" style=\"margin-left:12px\"></span>live before the history ('+sz(d.live_before_bytes)+' in '+d.live_before_blocks+' blocks) ':'')+\n"
    "'<span class=\"sw\" style=\"background:#f28e2c;margin-left:12px\"></span>reserved'+(d.has_segments?'':' (no segment events: = in use)')+' &nbsp; wheel: zoom \\u00b7 drag: pan \\u00b7 double-click: reset \\u00b7 hover: a band \\u00b7 click: segments at that event \\u00b7 \\u2190 \\u2192: the event before / after';\n"
    "$('tooom').style.display=d.first_oom>=0?'':'none';\n"
    "const total=d.buffers.reduce((s,b)=>s+b[0],0)+(d.others?d.others.bytes:0)||1;\n"
    "B=d.buffers.map((b,k)=>[k,b[0],b[1],b[3]||b[6]||'(untagged)',b[4],b[5],b[6],b[7],b[2],b[0]/total*100,b[2]-b[1]]);\n"
    "const rest=B.slice(STRIP);V.fold={count:rest.length+(d.others?d.others.count:0),bytes:rest.reduce((s,r)=>s+r[1],0)+(d.others?d.others.bytes:0)};\n"
    "bl.innerHTML=B.slice(0,STRIP).map(r=>'<div data-i=\"'+r[0]+'\" style=\"flex:0 0 '+r[9]+'%;background:'+color(r[3])+'\"></div>').join('')+(V.fold.count?'<div style=\"flex:1 1 auto;background:#d5d9e0\" data-o=\"1\"></div>':'');\n"
    "shownRows=PAGE;sortK=1;sortDir=1;sortBy(1,true);\n"
    "$('blockstitle').textContent='Buffers live at the peak ('+(d.events?evt(d.peak.event):'no events')+'), by size: '+d.live_at_peak+' buffers, '+sz(d.live_at_peak_bytes);\n"
    "resetView();selEvent=-1;if(!d.events)render();document.body.dataset.device=d.device;\n"
    "if(d.events)selectEvent(d.peak.event);else $('segbox').innerHTML='<div class=\"hint\">no events</div>';}\n"
    "setDevice(0);\n"
    "document.body.dataset.ready='1';document.body.dataset.loadms=Math.round(performance.now());document.body.dataset.parsems=Math.round(T1-T0);document.body.dataset.scriptms=Math.round(performance.now()-T0);\n"
    "/* #selftest (tests/test_view_html.sh): drive the page through real DOM events and report\n"
    " * what it did in data-selftest */\n"
    "if(location.hash==='#selftest'){const res=[];const ths=document.querySelectorAll('#buffers th');\n"
    "ths[3].click();const ops=[...tb.querySelectorAll('tr')].map(r=>r.children[3].textContent);\n"
    "res.push('sort-op:'+(ops.every((o,i)=>!i||ops[i-1]<=o)?'ok':'bad'));\n"
    "ths[1].click();const s2=[...tb.querySelectorAll('tr')].map(r=>B[+r.dataset.i][1]);\n"
    "res.push('sort-size:'+(s2.every((v,i)=>!i||s2[i-1]>=v)?'ok':'bad'));\n"
    "const r=cv.getBoundingClientRect();cv.dispatchEvent(new WheelEvent('wheel',{deltaY:-100,clientX:r.left+r.width/2,clientY:r.top+50,bubbles:true,cancelable:true}));\n"
    "res.push('zoom:'+(x1-x0<V.N1-V.N0?'ok':'bad'));{const a=performance.now();render();document.body.dataset.renderms=Math.round(performance.now()-a);}cv.dispatchEvent(new MouseEvent('dblclick',{bubbles:true}));res.push('reset:'+(x0===V.N0&&x1===Math.max(V.N1,V.N0+1)?'ok':'bad'));\n"
    "const b0=bl.querySelector('div[data-i]');if(b0){b0.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:5,clientY:5}));\n"
    "res.push('hover:'+(tip.style.display==='block'&&tip.textContent.includes('lifetime')&&hi?'ok':'bad'));}\n"
    "res.push('bands:'+(G.drawn>0?'ok':'bad'));\n"
    "if($('more').style.display!=='none'){const n0=tb.children.length;$('more').click();res.push('more:'+(tb.children.length===Math.min(B.length,n0+PAGE)?'ok':'bad'));}\n"
    "/* hover the middle of the peak column: a band (or the folded rest) with its size */\n"
    "let px=-1;for(let x=0;x<G.pw;x++)if(G.rep[x]===V.d.peak.event){px=x;break;}\n"
    "if(px>=0){const cxp=r.left+(G.pl+px+0.5)/G.dpr,cyp=r.top+(G.pt+G.ph-1)/G.dpr-1;\n"
    "cv.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:cxp,clientY:cyp}));\n"
    "res.push('band-hover:'+(tip.style.display==='block'&&/lifetime|folded/.test(tip.textContent)?'ok':'bad'));\n"
    "cv.dispatchEvent(new MouseEvent('mousedown',{bubbles:true,clientX:cxp,clientY:cyp}));cv.dispatchEvent(new MouseEvent('mouseup',{bubbles:true,clientX:cxp,clientY:cyp}));\n"
    "res.push('pick:'+(selEvent===V.d.peak.event&&$('segtitle').textContent.startsWith('Segments '+(V.d.peak.event<V.hs?'':'at ')+evl(V.d.peak.event))?'ok':'bad'));}\n"
    "{const before=selEvent;dispatchEvent(new KeyboardEvent('keydown',{key:'ArrowLeft'}));res.push('arrow:'+(selEvent<before||before===V.N0?'ok':'bad'));}\n"
    "if(V.d.first_oom>=0){$('tooom').click();res.push('oom:'+(selEvent===V.d.first_oom&&$('segtitle').textContent.includes('OOM: tried to allocate')?'ok':'bad'));}\n"
    "if(!V.d.has_time)res.push('no-seconds:'+(/\\d\\.\\d+s\\b/.test(document.body.innerText+document.body.dataset.axis)?'bad':'ok'));\n"
    "if(D.devices.length>1){dsel.value='1';dsel.dispatchEvent(new Event('change'));\n"
    "res.push('device:'+(document.body.dataset.device===D.devices[1].device&&$('subtitle').textContent.includes('device 2 of')?'ok':'bad'));\n"
    "dsel.value='0';dsel.dispatchEvent(new Event('change'));}\n"
    "document.body.dataset.selftest=res.join(' ');}\n"
    "})();\n"
    "</script>\n"
    "</body></html>\n";

hbm_status hbm_view_html(const hbm_trace *t, const hbm_view_options *o, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_view_html: NULL argument");
    size_t n = 1 + t->n_others;
    const hbm_trace **all = hbmi_malloc(n * sizeof *all);
    if (!all) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    all[0] = t;
    for (size_t i = 1; i < n; i++) all[i] = t->others[i - 1];
    caps cp = {block_cap(all, n), share(2 * MAX_COLS, n, 4096, MAX_COLS), share(2 * MAX_PEAK_ROWS, n, 500, MAX_PEAK_ROWS),
               (uint32_t)share(2 * MAX_TAGS, n, 2000, MAX_TAGS)};
    const char *title = o && o->title ? o->title : t->name;
    fputs(page_head, f);
    fputs("<title>hbm view: ", f);
    htext(f, title);
    fputs("</title>\n<script type=\"application/json\" id=\"hbm-data\">{\"title\": ", f);
    hstr(f, title);
    fputs(", \"source\": ", f);
    hstr(f, t->source[0] ? t->source : "hbm");
    fputs(", \"devices\": [\n", f);
    hbm_status s = HBM_OK;
    for (size_t d = 0; d < n && !s; d++) {
        if (d) fputs(",\n", f);
        s = write_device(f, all[d], &cp);
    }
    hbmi_free(all);
    if (s) return s;
    fputs("]}</script>\n", f);
    fputs(page_body, f);
    fputs(page_script, f);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the HTML view failed") : HBM_OK;
}
