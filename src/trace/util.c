/* util.c - small helpers of the trace area: byte buffers, JSON strings, live-bytes curves. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hbm/size.h"
#include "trace/trace_internal.h"

int64_t hbmi_event_pos(const hbm_trace *t, int64_t i) {
    if (t->priv_->steps && i >= 0) {
        if ((size_t)i >= t->count) return t->count ? (int64_t)(t->events[t->count - 1].time_ns / 1000u) + t->priv_->step0 : 0;
        return (int64_t)(t->events[i].time_ns / 1000u) + t->priv_->step0;
    }
    return hbmi_event_number(t, i);
}

const char *hbmi_event_unit(const hbm_trace *t) { return t->priv_->steps ? "step" : "event"; }

int hbmi_trace_is_plan(const hbm_trace *t) { return t->priv_->steps; }

const char *const *hbmi_trace_step_names(const hbm_trace *t, size_t *n) {
    *n = t->priv_->steps ? t->priv_->n_steps : 0;
    return t->priv_->steps ? (const char *const *)t->priv_->step_names : NULL;
}

hbm_status hbmi_buf_put(hbmi_buf *b, const void *data, size_t n) {
    if (hbmi_grow((void **)&b->p, &b->cap, b->n + n + 1, 1))
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory writing %s", b->what ? b->what : "a buffer");
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    return HBM_OK;
}

hbm_status hbmi_buf_byte(hbmi_buf *b, unsigned char c) { return hbmi_buf_put(b, &c, 1); }

void hbmi_buf_free(hbmi_buf *b) {
    hbmi_free(b->p);
    memset(b, 0, sizeof *b);
}

const char *hbmi_event_when(const hbm_trace *t, int64_t i, uint64_t time_ns, char *buf, size_t cap) {
    int64_t n = hbmi_event_number(t, i);
    const char *name;
    int64_t step = i >= 0 ? hbm_trace_event_step(t, (size_t)i, &name) : -1;
    char nm[48];
    if (step >= 0 && name[0]) snprintf(buf, cap, "step %" PRId64 " (%s)", step, hbmi_text_fit(nm, sizeof nm, name, 40, 1));
    else if (step >= 0) snprintf(buf, cap, "step %" PRId64, step);
    else if (n < 0) snprintf(buf, cap, "the start (before the history)");
    else if (t->has_time) snprintf(buf, cap, "event %" PRId64 " (%.6fs)", n, (double)time_ns / 1e9);
    else snprintf(buf, cap, "event %" PRId64, n);
    return buf;
}

const char *hbmi_event_when_short(const hbm_trace *t, int64_t i, uint64_t time_ns, char *buf, size_t cap) {
    int64_t step = i >= 0 ? hbm_trace_event_step(t, (size_t)i, NULL) : -1;
    if (step < 0) return hbmi_event_when(t, i, time_ns, buf, cap);
    snprintf(buf, cap, "step %" PRId64, step);
    return buf;
}

void hbmi_json_step(FILE *f, const hbm_trace *t, int64_t i, const char *key) {
    const char *name;
    int64_t step = i >= 0 ? hbm_trace_event_step(t, (size_t)i, &name) : -1;
    if (step < 0) return;
    fprintf(f, ", \"%s_step\": %" PRId64 ", \"%s_instruction\": ", key, step, key);
    hbmi_json_str(f, name);
}

void hbmi_json_trace_id(FILE *f, const hbm_trace *t) {
    fputs("\"name\": ", f);
    hbmi_json_str(f, t->name);
    fputs(", \"source\": ", f);
    hbmi_json_str(f, t->source);
    fputs(", \"device\": ", f);
    hbmi_json_str(f, t->device);
}

/* The first event no allocator can have produced, in words, into why (once). */
static void inconsistent(const hbm_trace *t, size_t i, char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void inconsistent(const hbm_trace *t, size_t i, char *why, size_t cap, const char *fmt, ...) {
    if (!why || why[0]) return;
    char when[80];
    int n = snprintf(why, cap, "%s ", hbmi_event_when(t, (int64_t)i, t->events[i].time_ns, when, sizeof when));
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < cap) vsnprintf(why + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Bytes in use and reserved after each event (into the arrays when given) and the peak
 * of in use. A sum past 2^63 - 1 is an error naming the event (a size no device holds);
 * with why, the first inconsistent event is described there ("" when none). */
static hbm_status curves(const hbm_trace *t, uint64_t *in_use, uint64_t *reserved, int *has_segments, uint64_t *peak,
                         size_t *peak_i, char *why, size_t cap) {
    hbmi_map live;
    hbmi_map_init(&live);
    hbm_status s = HBM_OK;
    uint64_t use = 0, res = 0, top = 0;
    int segs = 0;
    if (why) why[0] = 0;
    for (size_t i = 0; i < t->count; i++) segs |= t->events[i].kind == HBM_EV_SEGMENT_ALLOC || t->events[i].kind == HBM_EV_SEGMENT_MAP;
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        uint64_t key = e->addr == UINT64_MAX ? 0 : e->addr, sz, was;
        switch (e->kind) {
        case HBM_EV_ALLOC:
            sz = e->requested ? e->requested : e->size; /* in use = bytes the program asked for */
            if (hbmi_map_get(&live, key, &was)) {
                inconsistent(t, i, why, cap, "allocates 0x%" PRIx64 ", which is live (allocated before, never freed)", key);
                break;
            }
            if ((s = hbmi_map_put(&live, key, sz))) break;
            if (sz > (uint64_t)INT64_MAX - use) {
                char when[80];
                s = hbmi_error(HBM_ERR_PARSE, "%s: %s: the bytes in use pass 2^63 - 1 with an allocation of %" PRIu64
                               " bytes: no device holds that", t->name, hbmi_event_when(t, (int64_t)i, e->time_ns, when, sizeof when), sz);
                break;
            }
            use += sz;
            break;
        case HBM_EV_FREE:
            if (hbmi_map_del(&live, key, &sz)) use -= sz;
            else if (i >= t->history_start && !strcmp(t->source, "torch")) /* (a snapshot's rebuilt start
                                                                               * explains the others) */
                inconsistent(t, i, why, cap, "frees 0x%" PRIx64 ", which is not allocated", key);
            break;
        case HBM_EV_SEGMENT_ALLOC:
        case HBM_EV_SEGMENT_MAP:
            if (e->size > (uint64_t)INT64_MAX - res) {
                char when[80];
                s = hbmi_error(HBM_ERR_PARSE, "%s: %s: the bytes reserved pass 2^63 - 1 with a segment of %" PRIu64
                               " bytes: no device holds that", t->name, hbmi_event_when(t, (int64_t)i, e->time_ns, when, sizeof when), e->size);
                break;
            }
            res += e->size;
            break;
        case HBM_EV_SEGMENT_FREE:
        case HBM_EV_SEGMENT_UNMAP: res -= e->size < res ? e->size : res; break;
        default: break;
        }
        if (segs && use > res && why && !why[0]) {
            char a[32], b[32];
            hbm_size_human(use, a);
            hbm_size_human(res, b);
            if (!strcmp(a, b)) /* "3.95GiB in use, above the 3.95GiB reserved": the bytes say it */
                snprintf(a, sizeof a, "%" PRIu64 " B", use), snprintf(b, sizeof b, "%" PRIu64 " B", res);
            inconsistent(t, i, why, cap, "has %s in use, above the %s reserved", a, b);
        }
        if (use > top) {
            top = use;
            if (peak_i) *peak_i = i;
        }
        if (in_use) in_use[i] = use;
        if (reserved) reserved[i] = segs ? res : use;
    }
    hbmi_map_destroy(&live);
    if (has_segments) *has_segments = segs;
    if (peak) *peak = top;
    return s;
}

hbm_status hbmi_trace_curves_why(const hbm_trace *t, uint64_t **in_use, uint64_t **reserved, int *has_segments,
                                 char *why, size_t cap) {
    *in_use = hbmi_malloc(t->count * sizeof **in_use + 1);
    *reserved = hbmi_malloc(t->count * sizeof **reserved + 1);
    hbm_status s = *in_use && *reserved ? HBM_OK : hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    if (!s) s = curves(t, *in_use, *reserved, has_segments, NULL, NULL, why, cap);
    if (s) {
        hbmi_free(*in_use);
        hbmi_free(*reserved);
        *in_use = *reserved = NULL;
    }
    return s;
}

hbm_status hbmi_trace_curves(const hbm_trace *t, uint64_t **in_use, uint64_t **reserved, int *has_segments) {
    return hbmi_trace_curves_why(t, in_use, reserved, has_segments, NULL, 0);
}

hbm_status hbmi_trace_peak_use(const hbm_trace *t, uint64_t *peak) { return curves(t, NULL, NULL, NULL, peak, NULL, NULL, 0); }

void hbmi_json_plan_peak(FILE *f, const hbm_trace *t) {
    uint64_t peak = 0;
    size_t at = 0;
    if (!t->priv_->steps || curves(t, NULL, NULL, NULL, &peak, &at, NULL, 0) || !peak) return;
    fprintf(f, ", \"peak_live_bytes\": %" PRIu64, peak);
    hbmi_json_step(f, t, (int64_t)at, "peak");
}

void hbmi_text_plan_peak(FILE *f, const hbm_trace *t) {
    uint64_t peak = 0;
    size_t at = 0;
    char a[32], w[80];
    if (!t->priv_->steps || curves(t, NULL, NULL, NULL, &peak, &at, NULL, 0) || !peak) return;
    fprintf(f, "%-28s %11s  (at %s, as hbm plan counts)\n", "peak of live bytes", hbm_size_xla((int64_t)peak, a),
            hbmi_event_when(t, (int64_t)at, 0, w, sizeof w));
}

uint64_t hbmi_trace_device_bytes(const hbm_trace *t, const char **why) {
    if (why) *why = t->capacity ? HBMI_DEVICE_FROM_HEADER : HBMI_DEVICE_DEFAULT;
    return t->capacity ? t->capacity : HBMI_DEVICE_DEFAULT_BYTES;
}
