/* util.c - small helpers of the trace area: byte buffers, JSON strings, live-bytes curves. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "trace/trace_internal.h"

void hbmi_buf_put(hbmi_buf *b, const void *data, size_t n) {
    if (b->oom) return;
    if (hbmi_grow((void **)&b->p, &b->cap, b->n + n + 1, 1)) {
        b->oom = 1;
        return;
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
}

void hbmi_buf_byte(hbmi_buf *b, unsigned char c) { hbmi_buf_put(b, &c, 1); }

void hbmi_buf_free(hbmi_buf *b) {
    hbmi_free(b->p);
    memset(b, 0, sizeof *b);
}

const char *hbmi_event_when(const hbm_trace *t, int64_t i, uint64_t time_ns, char *buf, size_t cap) {
    int64_t n = hbmi_event_number(t, i);
    if (n < 0) snprintf(buf, cap, "the start (before the history)");
    else if (t->has_time) snprintf(buf, cap, "event %" PRId64 " (%.6fs)", n, (double)time_ns / 1e9);
    else snprintf(buf, cap, "event %" PRId64, n);
    return buf;
}

void hbmi_json_trace_id(FILE *f, const hbm_trace *t) {
    fputs("\"name\": ", f);
    hbmi_json_str(f, t->name);
    fputs(", \"source\": ", f);
    hbmi_json_str(f, t->source);
    fputs(", \"device\": ", f);
    hbmi_json_str(f, t->device);
}

/* Bytes in use and reserved after each event (into the arrays when given) and the peak
 * of in use. */
static hbm_status curves(const hbm_trace *t, uint64_t *in_use, uint64_t *reserved, int *has_segments, uint64_t *peak) {
    hbmi_map live;
    hbmi_map_init(&live);
    hbm_status s = HBM_OK;
    uint64_t use = 0, res = 0, top = 0;
    int segs = 0;
    for (size_t i = 0; i < t->count; i++) segs |= t->events[i].kind == HBM_EV_SEGMENT_ALLOC || t->events[i].kind == HBM_EV_SEGMENT_MAP;
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        uint64_t key = e->addr == UINT64_MAX ? 0 : e->addr, sz;
        switch (e->kind) {
        case HBM_EV_ALLOC:
            sz = e->requested ? e->requested : e->size; /* in use = bytes the program asked for */
            if (hbmi_map_get(&live, key, &sz) || (s = hbmi_map_put(&live, key, sz))) break;
            use += sz;
            break;
        case HBM_EV_FREE:
            if (hbmi_map_del(&live, key, &sz)) use -= sz;
            break;
        case HBM_EV_SEGMENT_ALLOC:
        case HBM_EV_SEGMENT_MAP: res += e->size; break;
        case HBM_EV_SEGMENT_FREE:
        case HBM_EV_SEGMENT_UNMAP: res -= e->size < res ? e->size : res; break;
        default: break;
        }
        if (use > top) top = use;
        if (in_use) in_use[i] = use;
        if (reserved) reserved[i] = segs ? res : use;
    }
    hbmi_map_destroy(&live);
    if (has_segments) *has_segments = segs;
    if (peak) *peak = top;
    return s;
}

hbm_status hbmi_trace_curves(const hbm_trace *t, uint64_t **in_use, uint64_t **reserved, int *has_segments) {
    *in_use = hbmi_malloc(t->count * sizeof **in_use + 1);
    *reserved = hbmi_malloc(t->count * sizeof **reserved + 1);
    hbm_status s = *in_use && *reserved ? HBM_OK : hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    if (!s) s = curves(t, *in_use, *reserved, has_segments, NULL);
    if (s) {
        hbmi_free(*in_use);
        hbmi_free(*reserved);
        *in_use = *reserved = NULL;
    }
    return s;
}

hbm_status hbmi_trace_peak_use(const hbm_trace *t, uint64_t *peak) { return curves(t, NULL, NULL, NULL, peak); }
