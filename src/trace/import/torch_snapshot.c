/* torch_snapshot.c - PyTorch memory snapshots (torch.cuda.memory._dump_snapshot()): the
 * pickle or its JSON form, one hbm_trace per device.
 *
 * A snapshot holds, per device, the allocator's history "device_traces[N]" (a ring buffer:
 * it usually starts mid-run) and the state at the end, "segments" (every segment of every
 * device with its blocks). What was live when the history began is rebuilt as memory_viz
 * (torch/utils/viz/MemoryViz.js, process_alloc_data) rebuilds it:
 *   - in use: a free in the history of a block it never allocated was allocated before it
 *     (its size and frames are the free's), and so is every block "active_allocated" in
 *     "segments" that the history does not hold live at its end (its requested_size);
 *   - reserved: the segment curve anchored so that it ends at the total_size of the
 *     device's segments; the segments it started with are those the history frees without
 *     having allocated them and those of "segments" it never allocated (for expandable
 *     segments: the mapped bytes the history does not explain).
 * That state becomes the first events of the trace (t->history_start of them, time 0), so
 * curves, peaks, views, replay and exports all start from it. */
#include <stdlib.h>
#include <string.h>

#include "core/oset.h"
#include "trace/import/pyval.h"
#include "trace/trace_internal.h"

/* torch's own Python files, on every path form: .../torch/..., ...\torch\..., site-packages */
static int torch_file(const char *f) {
    return strstr(f, "/torch/") || strstr(f, "\\torch\\") || !strncmp(f, "torch/", 6) || !strncmp(f, "torch\\", 6);
}

static int python_file(const char *f) {
    size_t n = strlen(f);
    return n > 3 && !strcmp(f + n - 3, ".py");
}

/* "at::_ops::bmm::call(...)" -> "aten::bmm" (the struct's name: op and overload). */
static int aten_name(const char *fn, char *buf, size_t cap) {
    if (!strncmp(fn, "aten::", 6) && fn[6]) { /* already an operator name (hbm's own export) */
        snprintf(buf, cap, "%s", fn);
        return 1;
    }
    const char *p = strstr(fn, "at::_ops::");
    if (!p) return 0;
    p += 10;
    size_t n = 0;
    while (p[n] && p[n] != ':' && p[n] != '(' && p[n] != '<' && p[n] != ' ') n++;
    if (!n) return 0;
    snprintf(buf, cap, "aten::%.*s", (int)n, p);
    return 1;
}

/* "torch::autograd::generated::MmBackward0::apply(...)" -> "MmBackward0" */
static int autograd_node(const char *fn, char *buf, size_t cap) {
    const char *p = strstr(fn, "autograd::generated::");
    if (!p) return 0;
    p += 21;
    size_t n = 0;
    while (p[n] && p[n] != ':' && p[n] != '(') n++;
    if (!n) return 0;
    snprintf(buf, cap, "%.*s", (int)n, p);
    return 1;
}

/* The frame to blame: the first Python frame of the user's code (outside torch); else the
 * first Python frame; else, for a stack of C++ frames only (the backward pass), the ATen
 * operator that allocated (and the autograd node that ran it as label). Never the
 * unwinder's own frames. */
static hbm_status frames_tag(hbm_trace *t, const hbmi_pv *frames, uint32_t *tag) {
    *tag = 0;
    if (!frames || frames->type != PV_LIST || !frames->n) return HBM_OK;
    const hbmi_pv *user = NULL, *py = NULL;
    char op[160] = "", node[160] = "";
    for (size_t i = 0; i < frames->n && !user; i++) {
        const hbmi_pv *fr = frames->items[i];
        const char *f = hbmi_pv_str(fr, "filename"), *name = hbmi_pv_str(fr, "name");
        if (f && python_file(f)) {
            if (!py) py = fr;
            if (!torch_file(f)) user = fr;
        } else if (name) {
            if (!op[0]) aten_name(name, op, sizeof op);
            if (!node[0]) autograd_node(name, node, sizeof node);
        }
    }
    const hbmi_pv *pick = user ? user : py;
    hbm_tag tg = {0};
    if (pick) {
        tg.op_name = hbmi_pv_str(pick, "name");
        tg.source_file = hbmi_pv_str(pick, "filename");
        tg.source_line = (int)hbmi_pv_int(pick, "line", 0);
        tg.label = op[0] ? op : hbmi_pv_str(py, "name"); /* the ATen op, else the innermost Python function */
    } else if (op[0]) {
        tg.op_name = op;
        tg.label = node[0] ? node : NULL;
    } else {
        return HBM_OK; /* nothing but allocator and unwinder frames: no attribution */
    }
    return hbm_trace_intern(t, &tg, tag);
}

/* The whole stack of an event as a backtrace of frame tags (t->stacks). Each frames list
 * object is attributed once (attribute); frames are cached by object (pickles share them),
 * and equal stacks that are not the same object are found by their content's hash. */
typedef struct stack_cache {
    hbmi_map by_frame; /* frame dict object -> tag id */
    hbmi_map by_hash;  /* hash of the tag ids -> backtrace id */
    hbmi_map attributed; /* frames list object -> tag << 32 | backtrace id */
    uint64_t *ids;
    size_t cap;
} stack_cache;

static void stack_cache_free(stack_cache *c) {
    hbmi_map_destroy(&c->by_frame);
    hbmi_map_destroy(&c->by_hash);
    hbmi_map_destroy(&c->attributed);
    hbmi_free(c->ids);
}

static hbm_status frames_stack(hbm_trace *t, stack_cache *c, const hbmi_pv *frames, uint32_t *bt) {
    *bt = 0;
    if (!frames || frames->type != PV_LIST || !frames->n) return HBM_OK;
    uint64_t v;
    hbm_status s = hbmi_grow((void **)&c->ids, &c->cap, frames->n, sizeof *c->ids);
    uint64_t h = 0x9E3779B97F4A7C15ull;
    size_t n = 0;
    for (size_t i = 0; i < frames->n && !s; i++) {
        const hbmi_pv *fr = frames->items[i];
        if (fr->type != PV_DICT) continue;
        if (!hbmi_map_get(&c->by_frame, (uint64_t)(uintptr_t)fr, &v)) {
            hbm_tag tg = {.op_name = hbmi_pv_str(fr, "name"), .source_file = hbmi_pv_str(fr, "filename"),
                          .source_line = (int)hbmi_pv_int(fr, "line", 0)};
            uint32_t id;
            if ((s = hbm_trace_intern(t, &tg, &id)) || (s = hbmi_map_put(&c->by_frame, (uint64_t)(uintptr_t)fr, id)))
                break;
            v = id;
        }
        c->ids[n++] = v;
        h = hbmi_hash64(h ^ v);
    }
    if (s || !n) return s;
    h &= UINT64_MAX >> 1; /* never the map's reserved key */
    if (hbmi_map_get(&c->by_hash, h, &v)) {
        size_t m;
        const uint64_t *old = hbm_trace_backtrace(t, (uint32_t)v, &m);
        if (m == n && !memcmp(old, c->ids, n * sizeof *old)) {
            *bt = (uint32_t)v;
            return HBM_OK;
        }
    }
    if ((s = hbm_trace_add_backtrace(t, c->ids, n, bt))) return s;
    return hbmi_map_put(&c->by_hash, h, *bt);
}

/* The tag (frame to blame) and the whole stack of an event or block; both once per frames
 * list object (a snapshot's history shares one list per distinct stack). */
static hbm_status attribute(hbm_trace *t, stack_cache *c, const hbmi_pv *frames, hbm_trace_event *ev) {
    uint64_t v, key = (uint64_t)(uintptr_t)frames;
    if (frames && hbmi_map_get(&c->attributed, key, &v)) {
        ev->tag = (uint32_t)(v >> 32);
        ev->backtrace = (uint32_t)v;
        return HBM_OK;
    }
    hbm_status s = frames_tag(t, frames, &ev->tag);
    if (!s) s = frames_stack(t, c, frames, &ev->backtrace);
    if (!s && frames) s = hbmi_map_put(&c->attributed, key, (uint64_t)ev->tag << 32 | ev->backtrace);
    return s;
}

/* A size (or address) out of range: the error naming where and the value. */
static hbm_status out_of_range(const char *name, const char *where, size_t idx, const char *key, int is_float,
                               int64_t i, double f) {
    if (is_float) return hbmi_error(HBM_ERR_PARSE, "%s: %s %zu: \"%s\" is %g, outside 0 to 2^63", name, where, idx, key, f);
    return hbmi_error(HBM_ERR_PARSE, "%s: %s %zu: \"%s\" is %lld, expected a size >= 0", name, where, idx, key,
                      (long long)i);
}

/* A size or address from the snapshot: negative values are an error naming where. */
static hbm_status get_u64(const hbmi_pv *d, const char *key, uint64_t *out, const char *name, const char *where,
                          size_t idx) {
    const hbmi_pv *v = hbmi_pv_get(d, key);
    *out = 0;
    if (!v) return HBM_OK;
    if (v->type == PV_INT && v->i < 0 && strcmp(key, "address")) return out_of_range(name, where, idx, key, 0, v->i, 0);
    if (v->type == PV_FLOAT && (v->f < 0 || v->f >= 9.2e18)) return out_of_range(name, where, idx, key, 1, 0, v->f);
    *out = (uint64_t)hbmi_pv_int(d, key, 0);
    return HBM_OK;
}

/* A history entry's address or size out of range (see hbmi_pvevs): an error naming it. */
static hbm_status bad_entry(const hbm_trace_event *r, const char *name, size_t idx) {
    double f;
    memcpy(&f, &r->requested, sizeof f);
    return out_of_range(name, "event", idx, (r->tag & 0xff) == 'a' ? "addr" : "size", (r->tag & HBMI_PVEV_FLOAT) != 0,
                        (int64_t)r->requested, f);
}

typedef struct dev_src {
    int index;          /* N of cuda:N */
    hbmi_pvevs *events; /* device_traces[N]'s entries (may be NULL): taken over as the trace's events */
    const hbmi_pvpool *pool; /* its stacks (backtrace i + 1 = pool->kept[i]) */
    int shared;              /* the list is shared (memo): its entries are copied, not taken */
} dev_src;

/* The device a segment belongs to (old snapshots without "device": fallback). */
static int seg_device(const hbmi_pv *sg, int fallback) { return (int)hbmi_pv_int(sg, "device", fallback); }

static hbm_status add_prelude_alloc(hbm_trace *t, stack_cache *c, uint64_t addr, uint64_t size, uint64_t requested,
                                    uint64_t stream, const hbmi_pv *frames) {
    hbm_trace_event ev = {.kind = HBM_EV_ALLOC, .addr = addr, .size = size, .requested = requested, .stream = stream};
    hbm_status s = attribute(t, c, frames, &ev);
    return s ? s : hbm_trace_add(t, &ev);
}

/* The stack of a block of "segments": its "frames"; in snapshots of older PyTorch (1.13,
 * 2.0: _dump_snapshot before device_traces carried the stacks) the block has none and keeps
 * them in "history", a list of {addr, real_size, frames} whose last entry is the allocation
 * that holds the block now. NULL when neither has a stack. */
static const hbmi_pv *block_frames(const hbmi_pv *bl) {
    const hbmi_pv *fr = hbmi_pv_get(bl, "frames");
    if (fr && fr->type == PV_LIST && fr->n) return fr;
    const hbmi_pv *h = hbmi_pv_get(bl, "history");
    if (!h || h->type != PV_LIST || !h->n) return fr;
    const hbmi_pv *last = h->items[h->n - 1], *hf = last ? hbmi_pv_get(last, "frames") : NULL;
    return hf && hf->type == PV_LIST && hf->n ? hf : fr;
}

/* The stack of a history entry (a frames list of the snapshot), or NULL. */
static const hbmi_pv *stack_of(const dev_src *d, const hbm_trace_event *e) {
    return e->backtrace && e->backtrace <= d->pool->nkept ? d->pool->kept[e->backtrace - 1] : NULL;
}

/* The pages a history maps (expandable segments), live until it unmaps them: disjoint
 * ranges [a, z) in an ordered set, so that an unmap anywhere inside them (PyTorch's
 * unmap_block unmaps the whole pages inside a free block, wherever the map that made them
 * began) finds them in O(log n), and what it unmaps outside them was mapped before the
 * history began. */
typedef struct mrange {
    uint64_t a, z;
    hbmi_oset_link link;
} mrange;

static inline int mrange_cmp(const mrange *x, const mrange *y) { return (x->a > y->a) - (x->a < y->a); }
HBMI_OSET_DEFINE(mr, mrange, link, mrange_cmp)

typedef struct mranges {
    mrange *b; /* records; a range cut in two takes one more */
    uint32_t used, cap;
    hbmi_oset set;
} mranges;

static hbm_status mr_add(mranges *m, uint64_t a, uint64_t z) {
    if (z <= a) return HBM_OK;
    if (m->used == m->cap) {
        size_t cap = m->cap;
        if (cap >= UINT32_MAX / 2) return hbmi_error(HBM_ERR_NOMEM, "too many mapped ranges in a history");
        hbm_status s = hbmi_grow((void **)&m->b, &cap, (size_t)m->used + 1, sizeof *m->b);
        if (s) return s;
        m->cap = (uint32_t)cap;
    }
    m->b[m->used] = (mrange){.a = a, .z = z};
    mr_insert(m->b, &m->set, m->used++);
    return HBM_OK;
}

/* Unmap [a, z): the history's own pages leave m; each piece outside them goes to the
 * prelude as pages mapped before the history. */
static hbm_status mr_unmap(hbm_trace *t, mranges *m, uint64_t a, uint64_t z, uint64_t stream) {
    hbm_status s = HBM_OK;
    mrange key = {.a = a};
    uint32_t i1 = m->set.n ? mr_floor(m->b, &m->set, &key) : 0;
    if (!i1) i1 = mr_first(m->b, &m->set);
    else if (m->b[i1 - 1].z <= a) i1 = mr_next(m->b, &m->set, i1);
    uint64_t cur = a;
    while (!s && cur < z) {
        mrange *r = i1 ? &m->b[i1 - 1] : NULL;
        uint64_t stop = r && r->a < z ? (r->a > cur ? r->a : cur) : z;
        if (stop > cur) { /* not the history's: mapped before it */
            hbm_trace_event se = {.kind = HBM_EV_SEGMENT_MAP, .addr = cur, .size = stop - cur, .stream = stream};
            t->reserved_before_bytes += stop - cur;
            s = hbm_trace_add(t, &se);
            cur = stop;
        }
        if (s || !r || r->a >= z) break;
        uint32_t next = mr_next(m->b, &m->set, i1);
        uint64_t ra = r->a, rz = r->z;
        cur = rz < z ? rz : z;
        if (ra < a) r->z = a; /* the left part stays (same key) */
        else mr_remove(m->b, &m->set, i1 - 1);
        if (rz > z) s = mr_add(m, z, rz); /* the right part (m->b may move: r is not used after) */
        i1 = next;
    }
    return s;
}

/* (base, ...) records by base */
static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The segment sg (place order in the snapshot's list) of t's device with its blocks, as
 * read, into t->priv_->torch_segs (for the torch export). */
static hbm_status keep_segment(hbm_trace *t, stack_cache *c, const hbmi_pv *sg, size_t order) {
    hbmi_torch_segs *x = t->priv_->torch_segs;
    if (hbmi_grow((void **)&x->s, &x->cap, x->n + 1, sizeof *x->s)) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbmi_tseg g = {.addr = (uint64_t)hbmi_pv_int(sg, "address", 0), .total = (uint64_t)hbmi_pv_int(sg, "total_size", 0),
                   .allocated = (uint64_t)hbmi_pv_int(sg, "allocated_size", 0),
                   .active = (uint64_t)hbmi_pv_int(sg, "active_size", 0),
                   .requested = (uint64_t)hbmi_pv_int(sg, "requested_size", 0),
                   .stream = (uint64_t)hbmi_pv_int(sg, "stream", 0), .order = order, .first = x->nb,
                   .device = (int)hbmi_pv_int(sg, "device", 0),
                   .expandable = hbmi_pv_int(sg, "is_expandable", 0) != 0};
    const char *type = hbmi_pv_str(sg, "segment_type");
    const hbmi_pv *pool = hbmi_pv_get(sg, "segment_pool_id"), *fr = hbmi_pv_get(sg, "frames");
    g.small = type && !strcmp(type, "small");
    g.keys = (uint8_t)((hbmi_pv_get(sg, "device") ? HBMI_TSEG_DEVICE : 0) |
                       (hbmi_pv_get(sg, "allocated_size") ? HBMI_TSEG_SIZES : 0) | (type ? HBMI_TSEG_TYPE : 0) |
                       (hbmi_pv_get(sg, "is_expandable") ? HBMI_TSEG_EXPANDABLE : 0) | (fr ? HBMI_TSEG_FRAMES : 0));
    if (pool && (pool->type == PV_TUPLE || pool->type == PV_LIST) && pool->n == 2 && pool->items[0]->type == PV_INT &&
        pool->items[1]->type == PV_INT) {
        g.keys |= HBMI_TSEG_POOL;
        g.pool[0] = pool->items[0]->i;
        g.pool[1] = pool->items[1]->i;
    }
    hbm_status s = fr ? frames_stack(t, c, fr, &g.backtrace) : HBM_OK;
    const hbmi_pv *blocks = hbmi_pv_get(sg, "blocks");
    uint64_t cursor = g.addr;
    for (size_t b = 0; !s && blocks && blocks->type == PV_LIST && b < blocks->n; b++) {
        const hbmi_pv *bl = blocks->items[b];
        if (hbmi_grow((void **)&x->b, &x->capb, x->nb + 1, sizeof *x->b)) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        hbmi_tblock k = {.addr = (uint64_t)hbmi_pv_int(bl, "address", (int64_t)cursor),
                         .size = (uint64_t)hbmi_pv_int(bl, "size", 0)};
        const char *state = hbmi_pv_str(bl, "state");
        k.state = !state ? HBMI_TBLK_INACTIVE
                  : !strcmp(state, "active_allocated") ? HBMI_TBLK_ALLOCATED
                  : !strcmp(state, "active_pending_free") ? HBMI_TBLK_PENDING_FREE
                                                         : HBMI_TBLK_INACTIVE;
        k.requested = (uint64_t)hbmi_pv_int(bl, "requested_size", 0);
        if (!hbmi_pv_get(bl, "requested_size")) { /* older PyTorch: the last history entry's real_size */
            const hbmi_pv *h = hbmi_pv_get(bl, "history");
            const hbmi_pv *last = h && h->type == PV_LIST && h->n ? h->items[h->n - 1] : NULL;
            int64_t rs = last ? hbmi_pv_int(last, "real_size", -1) : -1;
            k.requested = rs > 0 && (uint64_t)rs <= k.size ? (uint64_t)rs : k.size;
        }
        cursor = k.addr + k.size;
        s = frames_stack(t, c, block_frames(bl), &k.backtrace);
        x->b[x->nb++] = k;
        g.n++;
    }
    x->s[x->n++] = g;
    return s;
}

static hbm_status one_device(hbm_trace *t, const dev_src *d, const hbmi_pv *segs, int only_device) {
    const hbm_trace_event *evs = d->events ? d->events->r : NULL;
    size_t n = evs ? d->events->n : 0;
    hbm_status s = HBM_OK;
    /* history: addr -> 1 for blocks / segments it allocated and holds (blocks: 2 for those
     * it freed since, so that a second free is not taken for a block from before it) */
    hbmi_map live, seglive;
    hbmi_map_init(&live);
    hbmi_map_init(&seglive);
    mranges mapped = {0};
    stack_cache sc;
    memset(&sc, 0, sizeof sc);
    t->stacks = 1;
    if (!t->priv_->torch_segs && !(t->priv_->torch_segs = hbmi_calloc(1, sizeof *t->priv_->torch_segs)))
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    /* pass 1: what the history holds at its end, what it frees without having allocated,
     * and whether it has times */
    int64_t t0 = -1;
    uint64_t seg_net_up = 0, seg_net_down = 0;
    for (size_t i = 0; i < n && !s; i++) {
        const hbm_trace_event *e = &evs[i];
        if (!e->kind) continue;
        if (e->tag) {
            s = bad_entry(e, t->name, i);
            break;
        }
        uint64_t addr = e->addr, size = e->size;
        int64_t us = (int64_t)e->time_ns;
        if (us >= 0 && (t0 < 0 || us < t0)) t0 = us;
        uint64_t key = addr == UINT64_MAX ? 0 : addr;
        switch (e->kind) {
        case HBM_EV_ALLOC: s = hbmi_map_put(&live, key, 1); break;
        case HBM_EV_FREE: {
            uint64_t was = 0;
            if (hbmi_map_get(&live, key, &was)) {
                if (was == 1) s = hbmi_map_put(&live, key, 2);
                /* (2: a second free, left as it is: an impossible history, which views name) */
            } else {
                /* allocated before the history: it was live from the start */
                t->live_before_bytes += size;
                t->live_before_blocks++;
                s = add_prelude_alloc(t, &sc, addr, size, size, e->stream, stack_of(d, e));
            }
            break;
        }
        case HBM_EV_SEGMENT_ALLOC:
            seg_net_up += size;
            s = hbmi_map_put(&seglive, key, size);
            break;
        case HBM_EV_SEGMENT_MAP:
            seg_net_up += size;
            s = mr_add(&mapped, addr, addr + size < addr ? UINT64_MAX : addr + size);
            break;
        case HBM_EV_SEGMENT_FREE:
            seg_net_down += size;
            if (!hbmi_map_del(&seglive, key, NULL)) {
                hbm_trace_event se = {.kind = HBM_EV_SEGMENT_ALLOC, .addr = addr, .size = size, .stream = e->stream};
                t->reserved_before_bytes += size;
                s = hbm_trace_add(t, &se);
            }
            break;
        case HBM_EV_SEGMENT_UNMAP:
            seg_net_down += size;
            s = mr_unmap(t, &mapped, addr, addr + size < addr ? UINT64_MAX : addr + size, e->stream);
            break;
        default: break;
        }
    }
    hbmi_free(mapped.b);
    t->has_time = t0 >= 0;
    t->priv_->torch_segs->t0_us = t0 >= 0 ? t0 : 0;
    /* the end state: blocks active that the history does not hold, segments it never
     * allocated; reserved anchored at the segments' total */
    uint64_t seg_total = 0;
    for (size_t i = 0; !s && segs && segs->type == PV_LIST && i < segs->n; i++) {
        const hbmi_pv *sg = segs->items[i];
        if (seg_device(sg, only_device) != d->index) continue;
        uint64_t base, total;
        if ((s = get_u64(sg, "address", &base, t->name, "segment", i)) ||
            (s = get_u64(sg, "total_size", &total, t->name, "segment", i)))
            break;
        seg_total += total;
        if ((s = keep_segment(t, &sc, sg, i))) break;
        uint64_t stream = (uint64_t)hbmi_pv_int(sg, "stream", 0), cursor = base, key = base == UINT64_MAX ? 0 : base;
        int expandable = hbmi_pv_int(sg, "is_expandable", 0) != 0;
        if (!expandable && !hbmi_map_get(&seglive, key, NULL) && total) {
            hbm_trace_event se = {.kind = HBM_EV_SEGMENT_ALLOC, .addr = base, .size = total, .stream = stream};
            t->reserved_before_bytes += total;
            s = hbm_trace_add(t, &se);
        }
        const hbmi_pv *blocks = hbmi_pv_get(sg, "blocks");
        for (size_t b = 0; !s && blocks && blocks->type == PV_LIST && b < blocks->n; b++) {
            const hbmi_pv *bl = blocks->items[b];
            uint64_t size, req;
            if ((s = get_u64(bl, "size", &size, t->name, "block", b)) ||
                (s = get_u64(bl, "requested_size", &req, t->name, "block", b)))
                break;
            if (!hbmi_pv_get(bl, "requested_size")) { /* older PyTorch: the last history entry's real_size */
                const hbmi_pv *h = hbmi_pv_get(bl, "history");
                const hbmi_pv *last = h && h->type == PV_LIST && h->n ? h->items[h->n - 1] : NULL;
                int64_t rs = last ? hbmi_pv_int(last, "real_size", -1) : -1;
                req = rs > 0 && (uint64_t)rs <= size ? (uint64_t)rs : size;
            }
            uint64_t addr = (uint64_t)hbmi_pv_int(bl, "address", (int64_t)cursor);
            cursor = addr + size;
            const char *state = hbmi_pv_str(bl, "state");
            if (!state || strcmp(state, "active_allocated")) continue;
            uint64_t held = 0;
            if (hbmi_map_get(&live, addr == UINT64_MAX ? 0 : addr, &held) && held == 1) continue;
            t->live_before_bytes += req;
            t->live_before_blocks++;
            s = add_prelude_alloc(t, &sc, addr, size, req, stream, block_frames(bl));
        }
    }
    /* The anchor: reserved when the history began = the segments' total at the end minus
     * what the history added. Segments found above beyond it (a history whose unmaps do
     * not match its maps, as expandable segments' may) are dropped; expandable segments map
     * pages inside one virtual range, so the history's map events do not name the segment's
     * address: what the anchor needs beyond the segments found above was mapped before the
     * history began (one map event per expandable segment's base). */
    uint64_t start = seg_total + seg_net_down >= seg_net_up ? seg_total + seg_net_down - seg_net_up : 0;
    if (!s) {
        uint64_t sum = 0;
        size_t k = 0;
        for (size_t i = 0; i < t->count; i++) {
            const hbm_trace_event *e = &t->events[i];
            if (e->kind != HBM_EV_ALLOC && sum + e->size > start) continue;
            if (e->kind != HBM_EV_ALLOC) sum += e->size;
            t->events[k++] = *e;
        }
        t->count = k;
        t->reserved_before_bytes = sum;
    }
    /* each expandable segment's share: its mapped bytes at the end less what the history
     * mapped inside it (plus what it unmapped there), each event counted for the part of it
     * inside the segment (a range with holes is several segments at the end), so that the
     * small pool's 2 MiB pages do not go to a large segment of 20 MiB pages */
    uint64_t *xr = NULL; /* (base, end, own) of each expandable segment, by base */
    size_t nx = 0;
    if (!s && segs && segs->type == PV_LIST && segs->n && !(xr = hbmi_malloc(3 * segs->n * sizeof *xr)))
        s = hbmi_error(HBM_ERR_NOMEM, "out of host memory reading %s", t->name);
    for (size_t i = 0; xr && i < segs->n; i++) {
        const hbmi_pv *sg = segs->items[i];
        if (seg_device(sg, only_device) != d->index || !hbmi_pv_int(sg, "is_expandable", 0)) continue;
        uint64_t base = (uint64_t)hbmi_pv_int(sg, "address", 0), total = (uint64_t)hbmi_pv_int(sg, "total_size", 0);
        xr[3 * nx] = base, xr[3 * nx + 1] = base + total, xr[3 * nx + 2] = total, nx++;
    }
    if (nx > 1) hbmi_qsort(xr, nx, 3 * sizeof *xr, u64_cmp);
    for (size_t i = 0; !s && nx && i < n; i++) {
        const hbm_trace_event *e = &evs[i];
        if (e->kind != HBM_EV_SEGMENT_MAP && e->kind != HBM_EV_SEGMENT_UNMAP) continue;
        uint64_t a = e->addr, z = e->addr + e->size < e->addr ? UINT64_MAX : e->addr + e->size;
        size_t lo = 0, hi = nx; /* from the last segment with base <= a: each it overlaps */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (xr[3 * mid] <= a) lo = mid + 1;
            else hi = mid;
        }
        for (size_t k = lo ? lo - 1 : 0; k < nx && xr[3 * k] < z; k++) {
            uint64_t from = xr[3 * k] > a ? xr[3 * k] : a, to = xr[3 * k + 1] < z ? xr[3 * k + 1] : z;
            if (from >= to) continue;
            uint64_t *own = &xr[3 * k + 2], by = to - from;
            if (e->kind == HBM_EV_SEGMENT_MAP) *own -= *own >= by ? by : *own;
            else *own += by;
        }
    }
    if (!s) {
        for (size_t i = 0; !s && start > t->reserved_before_bytes && segs && segs->type == PV_LIST && i < segs->n; i++) {
            const hbmi_pv *sg = segs->items[i];
            if (seg_device(sg, only_device) != d->index || !hbmi_pv_int(sg, "is_expandable", 0)) continue;
            uint64_t total = (uint64_t)hbmi_pv_int(sg, "total_size", 0), need = start - t->reserved_before_bytes;
            uint64_t base = (uint64_t)hbmi_pv_int(sg, "address", 0);
            for (size_t k = 0; k < nx; k++)
                if (xr[3 * k] == base && xr[3 * k + 1] == base + total) total = xr[3 * k + 2] < total ? xr[3 * k + 2] : total;
            uint64_t add = total < need ? total : need;
            if (!add) continue;
            hbm_trace_event se = {.kind = HBM_EV_SEGMENT_MAP, .addr = (uint64_t)hbmi_pv_int(sg, "address", 0),
                                  .size = add, .stream = (uint64_t)hbmi_pv_int(sg, "stream", 0)};
            t->reserved_before_bytes += add;
            s = hbm_trace_add(t, &se);
        }
        if (!s && start > t->reserved_before_bytes) { /* not explained by any segment: keep the anchor */
            hbm_trace_event se = {.kind = HBM_EV_SEGMENT_ALLOC, .size = start - t->reserved_before_bytes};
            t->reserved_before_bytes = start;
            s = hbm_trace_add(t, &se);
        }
    }
    hbmi_free(xr);
    /* segments before blocks: order the prelude so reserved never trails in use */
    if (!s && t->count > 1) {
        size_t k = 0;
        for (size_t i = 0; i < t->count; i++)
            if (t->events[i].kind != HBM_EV_ALLOC) {
                hbm_trace_event x = t->events[i];
                memmove(t->events + k + 1, t->events + k, (i - k) * sizeof x);
                t->events[k++] = x;
            }
    }
    t->history_start = t->count;
    /* pass 2: the history itself, converted in place in its array, after the prelude */
    size_t pre = t->count;
    if (!s && n && d->shared) { /* one list for several devices (pickle memo): a copy each */
        if ((s = hbmi_big_grow((void **)&t->events, &t->priv_->cap, pre + n, sizeof *t->events))) goto done;
        memcpy(t->events + pre, evs, n * sizeof *t->events);
    } else if (!s && n) {
        hbmi_pvevs *h = d->events;
        size_t cap = h->cap;
        if ((s = hbmi_big_grow((void **)&h->r, &cap, pre + n, sizeof *h->r))) goto done;
        h->cap = cap;
        memmove(h->r + pre, h->r, n * sizeof *h->r);
        if (pre) memcpy(h->r, t->events, pre * sizeof *h->r);
        hbmi_big_free(t->events, t->priv_->cap, sizeof *t->events);
        t->events = h->r;
        t->priv_->cap = h->cap;
        h->r = NULL;
        h->n = h->cap = 0;
    }
    hbmi_torch_segs *x = t->priv_->torch_segs;
    uint64_t run_id = 0;
    for (size_t i = 0; i < n && !s; i++) {
        hbm_trace_event e = t->events[pre + i];
        if (!e.kind && (e.requested & 0xffffffffu) && !e.tag) { /* another action: kept beside the events */
            unsigned a = (unsigned)(e.requested & 0xffffffffu) - 1;
            if (hbmi_grow((void **)&x->marks, &x->marks_cap, x->nmarks + 1, sizeof *x->marks)) {
                s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
                break;
            }
            struct hbmi_tmark *mk = &x->marks[x->nmarks++];
            hbm_trace_event b = {0};
            *mk = (struct hbmi_tmark){.pos = t->count, .device = -1, .has_frames = (e.requested & HBMI_PVEV_FRAMES) != 0,
                                      .time_us = (int64_t)e.time_ns, .addr = e.addr, .size = e.size,
                                      .stream = e.stream, .xid = e.thread};
            snprintf(mk->action, sizeof mk->action, "%s", a < d->pool->nact ? d->pool->act[a] : "?");
            s = attribute(t, &sc, stack_of(d, &e), &b);
            mk->backtrace = b.backtrace;
            continue;
        }
        if (!e.kind) continue;
        if (e.thread != run_id) { /* a run of entries with other keys starts */
            if (hbmi_grow((void **)&x->runs, &x->runs_cap, 2 * x->nruns + 2, sizeof *x->runs)) {
                s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
                break;
            }
            x->runs[2 * x->nruns] = t->count;
            x->runs[2 * x->nruns + 1] = run_id = e.thread;
            x->nruns++;
        }
        int64_t us = (int64_t)e.time_ns;
        hbm_trace_event ev = {.kind = e.kind,
                              .time_ns = t->has_time ? (us >= t0 ? (uint64_t)(us - t0) * 1000u : 0) : (uint64_t)i,
                              .addr = e.addr, .size = e.size, .stream = e.stream};
        if (ev.kind == HBM_EV_ALLOC) ev.requested = e.size;
        if (ev.kind == HBM_EV_OOM) { /* the request, and the device's free bytes at that moment */
            ev.requested = e.size;
            ev.size = e.requested;
            ev.addr = 0;
        }
        /* segment events too: whose stack a segment_free carries says who freed it (the
         * malloc that follows, or empty_cache(): torch_twin.c's scan_history) */
        s = attribute(t, &sc, stack_of(d, &e), &ev);
        t->events[t->count++] = ev; /* t->count <= pre + i: never ahead of what is read */
    }
done:
    hbmi_map_destroy(&live);
    hbmi_map_destroy(&seglive);
    stack_cache_free(&sc);
    return s;
}

/* Peak bytes in use of a trace (for ordering devices). */
static uint64_t peak_in_use(const hbm_trace *t, int *oom) {
    uint64_t peak = 0;
    *oom = 0;
    for (size_t i = 0; i < t->count; i++) *oom |= t->events[i].kind == HBM_EV_OOM;
    return hbmi_trace_peak_use(t, &peak) ? 0 : peak;
}

typedef struct ranked {
    hbm_trace *t;
    int oom;
    uint64_t peak;
} ranked;

static int rank_cmp(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->oom != y->oom) return y->oom - x->oom;
    if (x->peak != y->peak) return x->peak > y->peak ? -1 : 1;
    return x->t->device_index - y->t->device_index;
}

/* A value of the snapshot as pickle opcodes (protocol 2, and BINBYTES for bytes), written
 * back by the torch export as it was read; *ok 0 for a value it cannot write (nested past
 * 64 levels, a string of 4 GiB or more). */
static hbm_status pk_value(hbmi_buf *b, const hbmi_pv *v, int depth, int *ok) {
    if (depth > 64) return *ok = 0, HBM_OK;
    switch (v ? v->type : PV_NONE) {
    case PV_BOOL: return hbmi_buf_byte(b, v->i ? 0x88 : 0x89); /* NEWTRUE / NEWFALSE */
    case PV_INT: return hbmi_pk_int(b, v->i);
    case PV_FLOAT: {
        unsigned char g[9] = {'G'}; /* BINFLOAT: big-endian IEEE 754 double */
        uint64_t bits;
        memcpy(&bits, &v->f, sizeof bits);
        for (int i = 0; i < 8; i++) g[1 + i] = (unsigned char)(bits >> (56 - 8 * i));
        return hbmi_buf_put(b, g, 9);
    }
    case PV_STR:
    case PV_BYTES: {
        unsigned char h[5] = {v->type == PV_STR ? 'X' : 'B'}; /* BINUNICODE / BINBYTES */
        if (v->len > UINT32_MAX) return *ok = 0, HBM_OK;
        hbmi_put32(h + 1, (uint32_t)v->len);
        TRY(hbmi_buf_put(b, h, 5));
        return hbmi_buf_put(b, v->s, v->len);
    }
    case PV_LIST:
    case PV_TUPLE:
    case PV_DICT: {
        int list = v->type == PV_LIST, dict = v->type == PV_DICT;
        TRY(hbmi_buf_put(b, list ? "](" : dict ? "}(" : "(", list || dict ? 2 : 1));
        for (size_t i = 0; i < v->n && *ok; i++) TRY(pk_value(b, v->items[i], depth + 1, ok));
        return *ok ? hbmi_buf_byte(b, list ? 'e' : dict ? 'u' : 't') : HBM_OK; /* APPENDS / SETITEMS / TUPLE */
    }
    default: return hbmi_buf_byte(b, 'N');
    }
}

/* The root keys kept as read into b; a value hbm cannot write back is left out (the export
 * then writes what it knows of it). */
static hbm_status root_keys(const hbmi_pv *root, hbm_trace *t, hbmi_buf *b) {
    static const char *keys[] = {"allocator_settings", "external_annotations"};
    for (size_t k = 0; k < 2; k++) {
        const hbmi_pv *v = hbmi_pv_get(root, keys[k]);
        if (!v) continue;
        size_t at = b->n;
        int ok = 1;
        TRY(hbmi_pk_str(b, keys[k]));
        TRY(pk_value(b, v, 0, &ok));
        if (!ok) {
            b->n = at;
            continue;
        }
        if (!k) t->priv_->torch_settings_kept = 1;
    }
    return HBM_OK;
}

/* The root keys kept as read (hbm_trace.priv_->torch_keys) into t. */
static hbm_status keep_root_keys(const hbmi_pv *root, hbm_trace *t) {
    hbmi_buf b = {.what = "a snapshot's keys"};
    if (root_keys(root, t, &b)) {
        hbmi_buf_free(&b);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    if (!b.n) hbmi_buf_free(&b);
    t->priv_->torch_keys = b.n ? b.p : NULL;
    t->priv_->torch_keys_n = b.n;
    return HBM_OK;
}

/* A snapshot's "allocator_settings" as config items of the torch policy. */
static void torch_settings(const hbmi_pv *root, char *buf, size_t cap) {
    const hbmi_pv *st = hbmi_pv_get(root, "allocator_settings");
    size_t n = 0;
    buf[0] = 0;
    if (!st || st->type != PV_DICT) return;
    if (hbmi_pv_int(st, "expandable_segments", 0))
        n += (size_t)snprintf(buf + n, cap - n, "%sexpandable_segments=true", n ? "," : "");
    int64_t ms = hbmi_pv_int(st, "max_split_size", -1);
    if (ms > 0 && n < cap && ms < INT64_MAX)
        n += (size_t)snprintf(buf + n, cap - n, "%smax_split_size_mb=%lld", n ? "," : "", (long long)(ms >> 20));
    const hbmi_pv *gc = hbmi_pv_get(st, "garbage_collection_threshold");
    if (gc && gc->type == PV_FLOAT && gc->f > 0 && gc->f < 1 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%sgarbage_collection_threshold=%g", n ? "," : "", gc->f);
    /* {"1": divisions, "2": ..., "32768": ...}: the 1 MiB .. 32 GiB intervals; all 0 = none */
    const hbmi_pv *rp = hbmi_pv_get(st, "roundup_power2_divisions");
    char list[256];
    size_t l = 0;
    int any = 0, same = 1;
    int64_t d[16] = {0};
    for (unsigned i = 0; rp && rp->type == PV_DICT && i < 16; i++) {
        char k[16];
        snprintf(k, sizeof k, "%u", 1u << i);
        d[i] = hbmi_pv_int(rp, k, 0);
        if (d[i] < 0 || d[i] > 1 << 20) return; /* not PyTorch's: settings left unread */
        any |= d[i] != 0, same &= d[i] == d[0];
    }
    if (!any) return;
    if (same) l = (size_t)snprintf(list, sizeof list, "%lld", (long long)d[0]);
    else
        for (unsigned i = 0; i < 16; i++)
            l += (size_t)snprintf(list + l, sizeof list - l, "%s%u:%lld%s", i ? "," : "[", 1u << i, (long long)d[i],
                                  i == 15 ? "]" : "");
    if (n + l + 32 < cap) snprintf(buf + n, cap - n, "%sroundup_power2_divisions=%.*s", n ? "," : "", (int)l, list);
}

/* The pool's sets of other keys into t (the torch export writes them back). */
static hbm_status keep_extras(hbm_trace *t, const hbmi_pvpool *pool) {
    hbmi_torch_segs *x = t->priv_->torch_segs;
    if (!x || !pool->nx || !(x->nruns || x->nmarks)) return HBM_OK;
    size_t nb = pool->xoff[pool->nx];
    x->xb = hbmi_malloc(nb ? nb : 1);
    x->xoff = hbmi_malloc((pool->nx + 1) * sizeof *x->xoff);
    if (!x->xb || !x->xoff) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    memcpy(x->xb, pool->xb, nb);
    memcpy(x->xoff, pool->xoff, (pool->nx + 1) * sizeof *x->xoff);
    x->nx = pool->nx;
    return HBM_OK;
}

/* The other entries of device dv, whose trace is dropped (nothing else in it), into *o. */
static hbm_status keep_orphans(hbmi_torch_segs **o, const hbm_trace *t, int dv) {
    const hbmi_torch_segs *x = t->priv_->torch_segs;
    if (!x || !x->nmarks) return HBM_OK;
    if (!*o && !(*o = hbmi_calloc(1, sizeof **o))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbmi_torch_segs *y = *o;
    if (hbmi_grow((void **)&y->marks, &y->marks_cap, y->nmarks + x->nmarks, sizeof *y->marks))
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t i = 0; i < x->nmarks; i++) {
        y->marks[y->nmarks] = x->marks[i];
        y->marks[y->nmarks].device = dv;
        y->marks[y->nmarks++].backtrace = 0; /* (its stack was the dropped trace's) */
    }
    if (!y->xb && x->xb) { /* the same pool's sets in every trace */
        y->xb = hbmi_malloc(x->xoff[x->nx] ? x->xoff[x->nx] : 1);
        y->xoff = hbmi_malloc((x->nx + 1) * sizeof *y->xoff);
        if (!y->xb || !y->xoff) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        memcpy(y->xb, x->xb, x->xoff[x->nx]);
        memcpy(y->xoff, x->xoff, (x->nx + 1) * sizeof *y->xoff);
        y->nx = x->nx;
    }
    return HBM_OK;
}

/* Orphan entries onto t's, after its own (device set), with t's sets of other keys. */
static hbm_status add_orphans(hbm_trace *t, hbmi_torch_segs *o) {
    hbmi_torch_segs *x = t->priv_->torch_segs;
    if (!x || !o->nmarks) return HBM_OK;
    if (hbmi_grow((void **)&x->marks, &x->marks_cap, x->nmarks + o->nmarks, sizeof *x->marks))
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    memcpy(x->marks + x->nmarks, o->marks, o->nmarks * sizeof *o->marks);
    x->nmarks += o->nmarks;
    if (!x->xb && o->xb) {
        x->xb = o->xb, x->xoff = o->xoff, x->nx = o->nx;
        o->xb = NULL, o->xoff = NULL, o->nx = 0;
    }
    return HBM_OK;
}

static hbm_status from_tree(const hbmi_pvpool *pool, const hbmi_pv *root, const char *name, hbm_trace ***out,
                            size_t *nout) {
    if (!root || root->type != PV_DICT)
        return hbmi_error(HBM_ERR_PARSE, "%s: expected a dict with \"segments\" and \"device_traces\" (a PyTorch memory snapshot)", name);
    const hbmi_pv *traces = hbmi_pv_get(root, "device_traces"), *segs = hbmi_pv_get(root, "segments");
    if (traces && traces->type != PV_LIST) traces = NULL;
    if (segs && segs->type != PV_LIST) segs = NULL;
    if (!traces && !segs)
        return hbmi_error(HBM_ERR_PARSE, "%s: the snapshot has neither a \"device_traces\" nor a \"segments\" list", name);
    /* the devices: every index with history or segments (segments without "device" belong
     * to device 0, as in old snapshots) */
    int maxdev = traces && traces->n ? (int)traces->n - 1 : 0;
    for (size_t i = 0; segs && i < segs->n; i++) {
        int dv = seg_device(segs->items[i], 0);
        if (dv < 0 || dv > 4096)
            return hbmi_error(HBM_ERR_PARSE, "%s: segment %zu: device %d, expected 0 to 4096", name, i, dv);
        if (dv > maxdev) maxdev = dv;
    }
    hbmi_torch_segs *orphans = NULL; /* other entries of devices without a trace */
    ranked *rk = hbmi_calloc((size_t)maxdev + 1, sizeof *rk);
    if (!rk) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    size_t nr = 0;
    hbm_status s = HBM_OK;
    for (int dv = 0; dv <= maxdev && !s; dv++) {
        const hbmi_pv *list = traces && (size_t)dv < traces->n ? traces->items[dv] : NULL;
        dev_src d = {.index = dv, .events = list && list->type == PV_LIST ? list->ev : NULL, .pool = pool,
                     .shared = list && list->keep};
        int has = d.events && d.events->n;
        for (size_t i = 0; !has && segs && i < segs->n; i++) has = seg_device(segs->items[i], 0) == dv;
        if (!has) continue;
        hbm_trace *t;
        if ((s = hbm_trace_new(&t))) break;
        snprintf(t->name, sizeof t->name, "%s", name);
        snprintf(t->source, sizeof t->source, "torch");
        snprintf(t->device, sizeof t->device, "cuda:%d", dv);
        t->device_index = dv;
        torch_settings(root, t->torch_settings, sizeof t->torch_settings);
        if ((s = keep_root_keys(root, t)) || (s = one_device(t, &d, segs, 0)) || (s = keep_extras(t, pool))) {
            hbm_trace_free(t);
            break;
        }
        rk[nr].t = t;
        rk[nr].peak = peak_in_use(t, &rk[nr].oom);
        if (!t->count) { /* an empty history and no segments: nothing to show (its other entries are kept) */
            s = keep_orphans(&orphans, t, dv);
            hbm_trace_free(t);
            continue;
        }
        nr++;
    }
    if (!s && !nr) { /* an empty snapshot: one empty trace for device 0 */
        if (!(s = hbm_trace_new(&rk[0].t))) {
            snprintf(rk[0].t->name, sizeof rk[0].t->name, "%s", name);
            snprintf(rk[0].t->source, sizeof rk[0].t->source, "torch");
            snprintf(rk[0].t->device, sizeof rk[0].t->device, "cuda:0");
            rk[0].t->device_index = 0;
            nr = 1;
        }
    }
    hbm_trace **arr = s ? NULL : hbmi_calloc(nr, sizeof *arr);
    if (!s && !arr) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    if (s) {
        hbmi_torch_segs_free(orphans);
        for (size_t i = 0; i < nr; i++) hbm_trace_free(rk[i].t);
        hbmi_free(rk);
        return s;
    }
    hbmi_qsort(rk, nr, sizeof *rk, rank_cmp);
    for (size_t i = 0; i < nr; i++) arr[i] = rk[i].t;
    hbmi_free(rk);
    s = orphans ? add_orphans(arr[0], orphans) : HBM_OK;
    hbmi_torch_segs_free(orphans);
    if (s) {
        hbm_trace_free_all(arr, nr);
        return s;
    }
    *out = arr;
    *nout = nr;
    return HBM_OK;
}

hbm_status hbmi_torch_parse_all(const void *data, size_t len, int json, const char *name, hbmi_input *in,
                                hbm_trace ***out, size_t *n) {
    hbmi_pvpool pool = {.events = 1, .in = in}; /* the history as records, as it is read */
    hbmi_pv *root;
    hbm_status s = json ? hbmi_json_parse(data, len, name, &pool, &root)
                        : hbmi_pickle_parse(data, len, name, &pool, &root);
    if (!s) s = from_tree(&pool, root, name, out, n);
    hbmi_pvpool_free(&pool);
    return s;
}

/* The first device (the one with an OOM, else the largest peak). */
static hbm_status first_device(const void *data, size_t len, int json, const char *name, hbm_trace **out) {
    hbm_trace **all;
    size_t n;
    hbm_status s = hbmi_torch_parse_all(data, len, json, name, NULL, &all, &n);
    if (s) return s;
    *out = hbmi_trace_keep_others(all, n, 0);
    return HBM_OK;
}

hbm_status hbm_trace_parse_torch_pickle(const void *data, size_t len, const char *name, hbm_trace **out) {
    if (!data || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_parse_torch_pickle: NULL argument");
    *out = NULL;
    return first_device(data, len, 0, name ? name : "snapshot", out);
}

hbm_status hbm_trace_parse_torch_json(const char *text, size_t len, const char *name, hbm_trace **out) {
    if (!text || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_parse_torch_json: NULL argument");
    *out = NULL;
    return first_device(text, len, 1, name ? name : "snapshot", out);
}
