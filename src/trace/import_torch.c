/* import_torch.c - PyTorch memory snapshots (torch.cuda.memory._dump_snapshot()): the
 * pickle or its JSON form. The allocator's history is "device_traces", one list per
 * device of {action, addr, size, stream, time_us, frames}; a snapshot without history
 * falls back to the live blocks of "segments". */
#include <string.h>

#include "trace/pyval.h"
#include "trace/trace_internal.h"

typedef struct act {
    const char *name;
    hbm_event_kind kind;
} act;

static const act actions[] = {
    {"alloc", HBM_EV_ALLOC},
    {"free_completed", HBM_EV_FREE},
    {"free_requested", HBM_EV_FREE_REQUESTED},
    {"free", HBM_EV_FREE},
    {"segment_alloc", HBM_EV_SEGMENT_ALLOC},
    {"segment_map", HBM_EV_SEGMENT_MAP},
    {"segment_free", HBM_EV_SEGMENT_FREE},
    {"segment_unmap", HBM_EV_SEGMENT_UNMAP},
    {"oom", HBM_EV_OOM},
};

/* The frame to blame: the first Python frame outside torch itself, else the first one. */
static hbm_status frames_tag(hbm_trace *t, const hbmi_pv *frames, uint32_t *tag) {
    *tag = 0;
    if (!frames || frames->type != PV_LIST || !frames->n) return HBM_OK;
    const hbmi_pv *pick = NULL;
    for (size_t i = 0; i < frames->n && !pick; i++) {
        const char *f = hbmi_pv_str(frames->items[i], "filename");
        size_t n = f ? strlen(f) : 0;
        if (n > 3 && !strcmp(f + n - 3, ".py") && !strstr(f, "/torch/")) pick = frames->items[i];
    }
    if (!pick) pick = frames->items[0];
    if (pick->type != PV_DICT) return HBM_OK;
    hbm_tag tg = {.op_name = hbmi_pv_str(pick, "name"), .source_file = hbmi_pv_str(pick, "filename"),
                  .source_line = (int)hbmi_pv_int(pick, "line", 0),
                  .label = hbmi_pv_str(frames->items[0], "name")};
    return hbm_trace_intern(t, &tg, tag);
}

static hbm_status from_traces(hbm_trace *t, const hbmi_pv *dev) {
    int64_t t0 = -1;
    for (size_t i = 0; i < dev->n; i++) {
        const hbmi_pv *e = dev->items[i];
        const char *a = hbmi_pv_str(e, "action");
        if (!a) continue;
        const act *found = NULL;
        for (size_t k = 0; k < sizeof actions / sizeof actions[0]; k++)
            if (!strcmp(a, actions[k].name)) found = &actions[k];
        if (!found) continue; /* "snapshot" markers and future actions */
        int64_t us = hbmi_pv_int(e, "time_us", -1);
        if (us >= 0 && t0 < 0) t0 = us;
        hbm_trace_event ev = {.kind = (uint8_t)found->kind,
                              .time_ns = us >= 0 && us >= t0 ? (uint64_t)(us - t0) * 1000u : (uint64_t)i,
                              .addr = (uint64_t)hbmi_pv_int(e, "addr", 0),
                              .size = (uint64_t)hbmi_pv_int(e, "size", 0),
                              .stream = (uint64_t)hbmi_pv_int(e, "stream", 0)};
        if (ev.kind == HBM_EV_ALLOC || ev.kind == HBM_EV_OOM) ev.requested = ev.size;
        if (ev.kind == HBM_EV_OOM) ev.size = 0, ev.addr = 0;
        hbm_status s = frames_tag(t, hbmi_pv_get(e, "frames"), &ev.tag);
        if (!s) s = hbm_trace_add(t, &ev);
        if (s) return s;
    }
    return HBM_OK;
}

static hbm_status from_segments(hbm_trace *t, const hbmi_pv *segs) {
    for (size_t i = 0; i < segs->n; i++) {
        const hbmi_pv *sg = segs->items[i];
        uint64_t base = (uint64_t)hbmi_pv_int(sg, "address", 0), cursor = base;
        hbm_trace_event se = {.kind = HBM_EV_SEGMENT_ALLOC, .addr = base,
                              .size = (uint64_t)hbmi_pv_int(sg, "total_size", 0),
                              .stream = (uint64_t)hbmi_pv_int(sg, "stream", 0), .time_ns = t->count};
        hbm_status s = hbm_trace_add(t, &se);
        if (s) return s;
        const hbmi_pv *blocks = hbmi_pv_get(sg, "blocks");
        for (size_t b = 0; blocks && blocks->type == PV_LIST && b < blocks->n; b++) {
            const hbmi_pv *bl = blocks->items[b];
            uint64_t size = (uint64_t)hbmi_pv_int(bl, "size", 0);
            uint64_t addr = (uint64_t)hbmi_pv_int(bl, "address", (int64_t)cursor);
            cursor = addr + size;
            const char *state = hbmi_pv_str(bl, "state");
            if (!state || strcmp(state, "active_allocated")) continue;
            hbm_trace_event ev = {.kind = HBM_EV_ALLOC, .addr = addr, .size = size,
                                  .requested = (uint64_t)hbmi_pv_int(bl, "requested_size", (int64_t)size),
                                  .stream = se.stream, .time_ns = t->count};
            if ((s = frames_tag(t, hbmi_pv_get(bl, "frames"), &ev.tag)) || (s = hbm_trace_add(t, &ev))) return s;
        }
    }
    return HBM_OK;
}

static hbm_status from_tree(const hbmi_pv *root, const char *name, hbm_trace **out) {
    if (!root || root->type != PV_DICT)
        return hbmi_error(HBM_ERR_PARSE, "%s: expected a dict with \"segments\" and \"device_traces\" (a PyTorch memory snapshot)", name);
    const hbmi_pv *traces = hbmi_pv_get(root, "device_traces"), *segs = hbmi_pv_get(root, "segments");
    if ((!traces || traces->type != PV_LIST) && (!segs || segs->type != PV_LIST))
        return hbmi_error(HBM_ERR_PARSE, "%s: the snapshot has neither a \"device_traces\" nor a \"segments\" list", name);
    hbm_trace *t;
    hbm_status s = hbm_trace_new(&t);
    if (s) return s;
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->source, sizeof t->source, "torch");
    /* the first device with history; hbm traces are per device */
    const hbmi_pv *dev = NULL;
    for (size_t i = 0; traces && traces->type == PV_LIST && i < traces->n && !dev; i++)
        if (traces->items[i]->type == PV_LIST && traces->items[i]->n) {
            dev = traces->items[i];
            snprintf(t->device, sizeof t->device, "cuda:%zu", i);
        }
    if (dev)
        s = from_traces(t, dev);
    else if (segs && segs->type == PV_LIST)
        s = from_segments(t, segs);
    if (s) {
        hbm_trace_free(t);
        return s;
    }
    *out = t;
    return HBM_OK;
}

hbm_status hbm_trace_parse_torch_pickle(const void *data, size_t len, const char *name, hbm_trace **out) {
    if (!data || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_parse_torch_pickle: NULL argument");
    *out = NULL;
    if (!name) name = "snapshot";
    hbmi_pvpool pool = {0};
    hbmi_pv *root;
    hbm_status s = hbmi_pickle_parse(data, len, name, &pool, &root);
    if (!s) s = from_tree(root, name, out);
    hbmi_pvpool_free(&pool);
    return s;
}

hbm_status hbm_trace_parse_torch_json(const char *text, size_t len, const char *name, hbm_trace **out) {
    if (!text || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_parse_torch_json: NULL argument");
    *out = NULL;
    if (!name) name = "snapshot";
    hbmi_pvpool pool = {0};
    hbmi_pv *root;
    hbm_status s = hbmi_json_parse(text, len, name, &pool, &root);
    if (!s) s = from_tree(root, name, out);
    hbmi_pvpool_free(&pool);
    return s;
}
