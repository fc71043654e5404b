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
#include "trace/trace_view.h"

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
    hstr(f, hbmi_text_fit(buf, sizeof buf, s, MAX_STR, middle));
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
    if (hbmi_trace_is_plan(t)) { /* a plan's trace: each event's schedule step and each step's instruction */
        fputs(",\n\"steps\": [", f);
        for (size_t i = 0; i < t->count; i++) fprintf(f, "%s%" PRId64, i ? "," : "", hbmi_event_pos(t, (int64_t)i));
        fputs("], \"step_names\": [", f);
        size_t n_steps;
        const char *const *names = hbmi_trace_step_names(t, &n_steps);
        for (size_t k = 0; k < n_steps; k++) {
            if (k) fputc(',', f);
            hstr(f, names[k]);
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

/* The page: src/report/html/trace_view.{html,css,js}, embedded at build time; its markers
 * <!--HBM:CSS-->, <!--HBM:TITLE-->, <!--HBM:DATA--> and <!--HBM:JS--> are filled here. The
 * script reads the data and draws the selected device; #selftest drives the page for
 * tests/test_view_html.sh and reports in body's data-selftest. */
extern const char hbmi_asset_trace_view_html[], hbmi_asset_trace_view_css[], hbmi_asset_trace_view_js[];
extern const size_t hbmi_asset_trace_view_html_len, hbmi_asset_trace_view_css_len, hbmi_asset_trace_view_js_len;

typedef struct page {
    const hbm_trace *const *all;
    size_t n;
    const caps *cp;
    const char *title;
} page;

static hbm_status fill(void *ctx, const char *name, size_t n, FILE *f) {
    const page *x = ctx;
    if (hbmi_page_marker_is(name, n, "CSS")) {
        fwrite(hbmi_asset_trace_view_css, 1, hbmi_asset_trace_view_css_len, f);
    } else if (hbmi_page_marker_is(name, n, "TITLE")) {
        htext(f, x->title);
    } else if (hbmi_page_marker_is(name, n, "JS")) {
        fwrite(hbmi_asset_trace_view_js, 1, hbmi_asset_trace_view_js_len, f);
    } else if (hbmi_page_marker_is(name, n, "DATA")) {
        const hbm_trace *t = x->all[0];
        fputs("{\"title\": ", f);
        hstr(f, x->title);
        fputs(", \"source\": ", f);
        hstr(f, t->source[0] ? t->source : "hbm");
        fputs(", \"devices\": [\n", f);
        for (size_t d = 0; d < x->n; d++) {
            if (d) fputs(",\n", f);
            hbm_status s = write_device(f, x->all[d], x->cp);
            if (s) return s;
        }
        fputs("]}", f);
    }
    return HBM_OK;
}

hbm_status hbm_view_html(const hbm_trace *t, const hbm_view_options *o, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_view_html: NULL argument");
    size_t n = 1 + t->n_others;
    const hbm_trace **all = hbmi_malloc(n * sizeof *all);
    if (!all) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    all[0] = t;
    for (size_t i = 1; i < n; i++) all[i] = t->others[i - 1];
    caps cp = {block_cap(all, n), share(2 * MAX_COLS, n, 4096, MAX_COLS), share(2 * MAX_PEAK_ROWS, n, 500, MAX_PEAK_ROWS),
               (uint32_t)share(2 * MAX_TAGS, n, 2000, MAX_TAGS)};
    page x = {all, n, &cp, o && o->title ? o->title : t->name};
    hbm_status s = hbmi_page_write(hbmi_asset_trace_view_html, hbmi_asset_trace_view_html_len, fill, &x, f);
    hbmi_free(all);
    if (s) return s;
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the HTML view failed") : HBM_OK;
}
