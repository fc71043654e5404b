/* export_torch.c - a PyTorch memory snapshot (what torch.cuda.memory._dump_snapshot()
 * writes, and pytorch.org/memory_viz opens): a pickle (protocol 2) of
 *   {"segments": [...], "device_traces": [[{action, addr, size, stream, time_us, frames}]]}
 * Blocks still live at the end of the trace are listed in "segments", one segment each. */
#include <string.h>

#include "trace/trace_internal.h"

static void p_str(hbmi_buf *b, const char *s) {
    size_t n = strlen(s ? s : "");
    unsigned char h[5] = {'X'};
    hbmi_put32(h + 1, (uint32_t)n);
    hbmi_buf_put(b, h, 5);
    hbmi_buf_put(b, s ? s : "", n);
}

static void p_int(hbmi_buf *b, int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
        unsigned char h[5] = {'J'};
        hbmi_put32(h + 1, (uint32_t)(int32_t)v);
        hbmi_buf_put(b, h, 5);
        return;
    }
    unsigned char h[11] = {0x8a, 8};
    int n = 8;
    for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)((uint64_t)v >> (8 * i));
    /* shortest two's complement form */
    while (n > 1 && ((h[1 + n] == 0 && !(h[n] & 0x80)) || (h[1 + n] == 0xff && (h[n] & 0x80)))) n--;
    h[1] = (unsigned char)n;
    hbmi_buf_put(b, h, 2 + (size_t)n);
}

static void p_uint(hbmi_buf *b, uint64_t v) {
    if (v <= INT64_MAX) {
        p_int(b, (int64_t)v);
        return;
    }
    unsigned char h[11] = {0x8a, 9};
    for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)(v >> (8 * i));
    h[10] = 0;
    hbmi_buf_put(b, h, 11);
}

static void kv_str(hbmi_buf *b, const char *k, const char *v) {
    p_str(b, k);
    p_str(b, v);
}
static void kv_uint(hbmi_buf *b, const char *k, uint64_t v) {
    p_str(b, k);
    p_uint(b, v);
}

static void frames(hbmi_buf *b, const hbm_trace *t, uint32_t tag) {
    const hbm_tag *tg = hbm_trace_tag(t, tag);
    p_str(b, "frames");
    hbmi_buf_byte(b, ']');
    if (!tg) return;
    hbmi_buf_put(b, "(}(", 3);
    kv_str(b, "filename", tg->source_file ? tg->source_file : "??");
    p_str(b, "line");
    p_int(b, tg->source_line);
    char name[512];
    snprintf(name, sizeof name, "%s%s%s", tg->op_name ? tg->op_name : (tg->label ? tg->label : "?"),
             tg->shape ? " " : "", tg->shape ? tg->shape : "");
    kv_str(b, "name", name);
    hbmi_buf_put(b, "ue", 2); /* SETITEMS, APPENDS */
}

hbm_status hbm_export_torch(const hbm_trace *t, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_export_torch: NULL argument");
    hbmi_buf b = {0};
    hbmi_map live; /* addr -> event index of the live alloc */
    hbmi_map_init(&live);
    hbm_status s = HBM_OK;
    static const char *action[] = {"", "alloc", "free_completed", "oom", "segment_alloc", "segment_free",
                                   "free_requested"};
    hbmi_buf_put(&b, "\x80\x02}(", 4); /* PROTO 2, EMPTY_DICT, MARK */
    p_str(&b, "device_traces");
    hbmi_buf_put(&b, "]](", 3); /* outer list, inner list, MARK: [[ ... */
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind < HBM_EV_ALLOC || e->kind > HBM_EV_FREE_REQUESTED) continue;
        uint64_t size = e->size, key = e->addr == UINT64_MAX ? 0 : e->addr, j;
        uint32_t tag = e->tag;
        if (e->kind == HBM_EV_ALLOC) {
            if (!size) size = e->requested;
            s = hbmi_map_put(&live, key, i);
        } else if (e->kind == HBM_EV_FREE || e->kind == HBM_EV_FREE_REQUESTED) {
            /* memory_viz matches frees to allocs by address and wants the size and frames */
            int found = e->kind == HBM_EV_FREE ? hbmi_map_del(&live, key, &j) : hbmi_map_get(&live, key, &j);
            if (!found) continue;
            const hbm_trace_event *a = &t->events[j];
            size = a->size ? a->size : a->requested;
            tag = a->tag;
        } else if (e->kind == HBM_EV_OOM) {
            size = e->requested;
        } else if (!e->addr) {
            continue; /* a segment change without an address (the recorder's): memory_viz pairs by address */
        }
        hbmi_buf_put(&b, "}(", 2);
        kv_str(&b, "action", action[e->kind]);
        kv_uint(&b, "addr", e->addr);
        kv_uint(&b, "size", size);
        kv_uint(&b, "stream", e->stream);
        kv_uint(&b, "time_us", e->time_ns / 1000);
        if (e->kind == HBM_EV_OOM) kv_uint(&b, "device_free", 0);
        frames(&b, t, tag);
        hbmi_buf_byte(&b, 'u');
    }
    hbmi_buf_put(&b, "ea", 2); /* APPENDS (events) then APPEND the device list to device_traces */
    p_str(&b, "segments");
    hbmi_buf_put(&b, "](", 2);
    for (size_t k = 0; k < live.cap && !s; k++) {
        if (!live.keys[k]) continue;
        const hbm_trace_event *a = &t->events[live.vals[k]];
        uint64_t size = a->size ? a->size : a->requested;
        hbmi_buf_put(&b, "}(", 2);
        kv_uint(&b, "device", 0);
        kv_uint(&b, "address", a->addr);
        kv_uint(&b, "total_size", size);
        kv_uint(&b, "stream", a->stream);
        kv_str(&b, "segment_type", size <= (1u << 20) ? "small" : "large");
        kv_uint(&b, "allocated_size", size);
        kv_uint(&b, "active_size", size);
        kv_uint(&b, "requested_size", a->requested ? a->requested : size);
        p_str(&b, "blocks");
        hbmi_buf_put(&b, "](}(", 4);
        kv_uint(&b, "address", a->addr);
        kv_uint(&b, "size", size);
        kv_uint(&b, "requested_size", a->requested ? a->requested : size);
        kv_str(&b, "state", "active_allocated");
        frames(&b, t, a->tag);
        hbmi_buf_put(&b, "ueu", 3); /* block SETITEMS, blocks APPENDS, segment SETITEMS */
    }
    hbmi_buf_put(&b, "eu.", 3); /* segments APPENDS, root SETITEMS, STOP */
    hbmi_map_destroy(&live);
    if (!s && b.oom) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory writing a snapshot");
    if (!s && fwrite(b.p, 1, b.n, f) != b.n) s = hbmi_error(HBM_ERR_IO, "writing the snapshot failed");
    hbmi_buf_free(&b);
    return s;
}
