/* torch_snapshot.c - a PyTorch memory snapshot (what torch.cuda.memory._dump_snapshot()
 * writes, and pytorch.org/memory_viz opens): a pickle (protocol 2) of
 *   {"segments": [...], "device_traces": [[{action, addr, size, stream, time_us, frames}]]}
 * "segments" is the end state: each segment still reserved with its blocks (live allocations
 * and the gaps between them); "device_traces" the history after the rebuilt state, with
 * segment_map/unmap kept and time_us only where the trace has times. Loading it again (in
 * memory_viz or hbm) gives the same peaks and segments per device. */
#include <stdlib.h>
#include <string.h>

#include "hbm/config.h"
#include "trace/trace_internal.h"

hbm_status hbmi_pk_str(hbmi_buf *b, const char *s) {
    size_t n = strlen(s ? s : "");
    unsigned char h[5] = {'X'};
    hbmi_put32(h + 1, (uint32_t)n);
    TRY(hbmi_buf_put(b, h, 5));
    return hbmi_buf_put(b, s ? s : "", n);
}

hbm_status hbmi_pk_int(hbmi_buf *b, int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
        unsigned char h[5] = {'J'};
        hbmi_put32(h + 1, (uint32_t)(int32_t)v);
        TRY(hbmi_buf_put(b, h, 5));
        return HBM_OK;
    }
    unsigned char h[11] = {0x8a, 8};
    int n = 8;
    for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)((uint64_t)v >> (8 * i));
    /* shortest two's complement form */
    while (n > 1 && ((h[1 + n] == 0 && !(h[n] & 0x80)) || (h[1 + n] == 0xff && (h[n] & 0x80)))) n--;
    h[1] = (unsigned char)n;
    return hbmi_buf_put(b, h, 2 + (size_t)n);
}

hbm_status hbmi_pk_uint(hbmi_buf *b, uint64_t v) {
    if (v <= INT64_MAX) {
        TRY(hbmi_pk_int(b, (int64_t)v));
        return HBM_OK;
    }
    unsigned char h[11] = {0x8a, 9};
    for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)(v >> (8 * i));
    h[10] = 0;
    return hbmi_buf_put(b, h, 11);
}

static hbm_status kv_str(hbmi_buf *b, const char *k, const char *v) {
    TRY(hbmi_pk_str(b, k));
    return hbmi_pk_str(b, v);
}

static hbm_status frame(hbmi_buf *b, const hbm_tag *tg) {
    /* keys in PyTorch's order: name, filename, line; the name whole (C++ frames' are long) */
    const char *fn = tg->op_name ? tg->op_name : (tg->label ? tg->label : "?");
    size_t nf = strlen(fn), ns = tg->shape ? strlen(tg->shape) : 0;
    unsigned char h[5] = {'X'}; /* BINUNICODE: "op shape" */
    TRY(hbmi_buf_put(b, "}(", 2));
    TRY(hbmi_pk_str(b, "name"));
    hbmi_put32(h + 1, (uint32_t)(nf + (ns ? ns + 1 : 0)));
    TRY(hbmi_buf_put(b, h, 5));
    TRY(hbmi_buf_put(b, fn, nf));
    if (ns) {
        TRY(hbmi_buf_byte(b, ' '));
        TRY(hbmi_buf_put(b, tg->shape, ns));
    }
    TRY(kv_str(b, "filename", tg->source_file ? tg->source_file : "??"));
    TRY(hbmi_pk_str(b, "line"));
    TRY(hbmi_pk_int(b, tg->source_line));
    return hbmi_buf_byte(b, 'u'); /* SETITEMS */
}

/* Stacks written once each, then referred to through the pickle memo (as PyTorch's own
 * snapshots share them): key (device position << 32 | backtrace id) -> memo index. */
typedef struct memo {
    hbmi_map idx;
    uint64_t device; /* position of the trace being written */
    uint32_t next;
    const char *str[32]; /* keys and actions written once each (by the literal's address) */
    uint32_t str_at[32];
    size_t nstr;
} memo;

static hbm_status memo_get(hbmi_buf *b, uint32_t at) {
    unsigned char op[5] = {'j'}; /* LONG_BINGET */
    hbmi_put32(op + 1, at);
    return hbmi_buf_put(b, op, 5);
}

/* A key or action name: written the first time, then read back from the memo, as Python's
 * pickler does with the interned strings of a snapshot. */
static hbm_status m_str(hbmi_buf *b, memo *m, const char *s) {
    for (size_t i = 0; i < m->nstr; i++)
        if (m->str[i] == s) {
            if (m->str_at[i] < 256) {
                unsigned char op[2] = {'h', (unsigned char)m->str_at[i]}; /* BINGET */
                TRY(hbmi_buf_put(b, op, 2));
            } else {
                TRY(memo_get(b, m->str_at[i]));
            }
            return HBM_OK;
        }
    TRY(hbmi_pk_str(b, s));
    if (m->nstr == sizeof m->str / sizeof m->str[0]) return HBM_OK;
    unsigned char op[5] = {'r'}; /* LONG_BINPUT */
    hbmi_put32(op + 1, m->next);
    TRY(hbmi_buf_put(b, op, 5));
    m->str[m->nstr] = s;
    m->str_at[m->nstr++] = m->next++;
    return HBM_OK;
}

static hbm_status m_uint(hbmi_buf *b, memo *m, const char *k, uint64_t v) {
    TRY(m_str(b, m, k));
    return hbmi_pk_uint(b, v);
}

/* "frames": the whole stack when the trace keeps one (a snapshot's), else the tag's frame. */
static hbm_status frames(hbmi_buf *b, memo *m, const hbm_trace *t, uint32_t tag, uint32_t bt) {
    TRY(m_str(b, m, "frames"));
    size_t n = 0;
    const uint64_t *fr = t->stacks ? hbm_trace_backtrace(t, bt, &n) : NULL;
    uint64_t key = m->device << 32 | bt, at;
    unsigned char op[5];
    if (n && hbmi_map_get(&m->idx, key, &at)) {
        TRY(memo_get(b, (uint32_t)at));
        return HBM_OK;
    }
    TRY(hbmi_buf_byte(b, ']'));
    if (n) {
        op[0] = 'r'; /* LONG_BINPUT: the list, filled below */
        hbmi_put32(op + 1, m->next);
        TRY(hbmi_buf_put(b, op, 5));
        if (hbmi_map_put(&m->idx, key, m->next++)) return hbmi_error(HBM_ERR_NOMEM, "out of host memory writing a snapshot");
        TRY(hbmi_buf_byte(b, '('));
        for (size_t i = 0; i < n; i++) {
            const hbm_tag *tg = hbm_trace_tag(t, (uint32_t)fr[i]);
            if (tg) TRY(frame(b, tg));
        }
        TRY(hbmi_buf_byte(b, 'e')); /* APPENDS */
        return HBM_OK;
    }
    const hbm_tag *tg = hbm_trace_tag(t, tag);
    if (!tg) return HBM_OK;
    TRY(hbmi_buf_byte(b, '('));
    TRY(frame(b, tg));
    return hbmi_buf_byte(b, 'e');
}


typedef struct seg {
    uint64_t addr, size, stream;
    int map; /* from segment_map (expandable) */
} seg;

typedef struct blk {
    uint64_t addr;
    size_t ev; /* index of its alloc event */
} blk;

static int seg_cmp(const void *a, const void *b) {
    const seg *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}
static int blk_cmp(const void *a, const void *b) {
    const blk *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* A segment of the end state with its blocks: live allocations inside it, the gaps as
 * "inactive" blocks. */
static hbm_status put_segment(hbmi_buf *b, memo *m, const hbm_trace *t, const seg *sg, const blk *bl, size_t nb) {
    uint64_t alloc = 0, req = 0;
    for (size_t k = 0; k < nb; k++) {
        const hbm_trace_event *a = &t->events[bl[k].ev];
        alloc += a->size > a->requested ? a->size : a->requested;
        req += a->requested ? a->requested : a->size;
    }
    TRY(hbmi_buf_put(b, "}(", 2));
    TRY(m_uint(b, m, "device", (uint64_t)t->device_index));
    TRY(m_uint(b, m, "address", sg->addr));
    TRY(m_uint(b, m, "total_size", sg->size));
    TRY(m_uint(b, m, "stream", sg->stream));
    TRY(m_str(b, m, "segment_type"));
    TRY(m_str(b, m, sg->size <= (2u << 20) ? "small" : "large"));
    TRY(m_uint(b, m, "allocated_size", alloc));
    TRY(m_uint(b, m, "active_size", alloc));
    TRY(m_uint(b, m, "requested_size", req));
    TRY(m_str(b, m, "is_expandable"));
    TRY(hbmi_buf_byte(b, sg->map ? 0x88 : 0x89)); /* NEWTRUE / NEWFALSE */
    TRY(m_str(b, m, "blocks"));
    TRY(hbmi_buf_put(b, "](", 2));
    uint64_t cursor = sg->addr, end = sg->addr + sg->size;
    for (size_t k = 0; k <= nb; k++) {
        uint64_t next = k < nb ? bl[k].addr : end;
        if (next > cursor) { /* a gap: cached, not in use */
            TRY(hbmi_buf_put(b, "}(", 2));
            TRY(m_uint(b, m, "address", cursor));
            TRY(m_uint(b, m, "size", next - cursor));
            TRY(m_uint(b, m, "requested_size", 0));
            TRY(m_str(b, m, "state"));
            TRY(m_str(b, m, "inactive"));
            TRY(hbmi_buf_byte(b, 'u'));
        }
        if (k == nb) break;
        const hbm_trace_event *a = &t->events[bl[k].ev];
        uint64_t size = a->size > a->requested ? a->size : a->requested;
        if (size > end - bl[k].addr) size = end - bl[k].addr;
        TRY(hbmi_buf_put(b, "}(", 2));
        TRY(m_uint(b, m, "address", bl[k].addr));
        TRY(m_uint(b, m, "size", size));
        TRY(m_uint(b, m, "requested_size", a->requested ? a->requested : size));
        TRY(m_str(b, m, "state"));
        TRY(m_str(b, m, "active_allocated"));
        TRY(frames(b, m, t, a->tag, a->backtrace));
        TRY(hbmi_buf_byte(b, 'u'));
        cursor = bl[k].addr + size;
    }
    return hbmi_buf_put(b, "eu", 2); /* blocks APPENDS, segment SETITEMS */
}

/* A segment of an allocator's end state (hbmi_torch_segs) with its blocks, each as the
 * allocator held it: size, state, requested_size, frames; the segment's keys as it had them. */
static hbm_status put_kept_segment(hbmi_buf *b, memo *m, const hbm_trace *t, const hbmi_torch_segs *x, const hbmi_tseg *g) {
    static const char *state[] = {"inactive", "active_allocated", "active_pending_free"};
    TRY(hbmi_buf_put(b, "}(", 2));
    if (g->keys & HBMI_TSEG_DEVICE) TRY(m_uint(b, m, "device", (uint64_t)g->device));
    TRY(m_uint(b, m, "address", g->addr));
    TRY(m_uint(b, m, "total_size", g->total));
    if (g->keys & HBMI_TSEG_SIZES) {
        TRY(m_uint(b, m, "allocated_size", g->allocated));
        TRY(m_uint(b, m, "active_size", g->active));
        TRY(m_uint(b, m, "requested_size", g->requested));
    }
    TRY(m_uint(b, m, "stream", g->stream));
    if (g->keys & HBMI_TSEG_TYPE) {
        TRY(m_str(b, m, "segment_type"));
        TRY(m_str(b, m, g->small ? "small" : "large"));
    }
    if (g->keys & HBMI_TSEG_POOL) {
        TRY(m_str(b, m, "segment_pool_id"));
        TRY(hbmi_buf_byte(b, '('));
        TRY(hbmi_pk_int(b, g->pool[0]));
        TRY(hbmi_pk_int(b, g->pool[1]));
        TRY(hbmi_buf_byte(b, 't')); /* TUPLE */
    }
    if (g->keys & HBMI_TSEG_EXPANDABLE) {
        TRY(m_str(b, m, "is_expandable"));
        TRY(hbmi_buf_byte(b, g->expandable ? 0x88 : 0x89)); /* NEWTRUE / NEWFALSE */
    }
    if (g->keys & HBMI_TSEG_FRAMES) TRY(frames(b, m, t, 0, g->backtrace));
    TRY(m_str(b, m, "blocks"));
    TRY(hbmi_buf_put(b, "](", 2));
    for (size_t k = g->first; k < g->first + g->n; k++) {
        const hbmi_tblock *bl = &x->b[k];
        TRY(hbmi_buf_put(b, "}(", 2));
        TRY(m_uint(b, m, "address", bl->addr));
        TRY(m_uint(b, m, "size", bl->size));
        TRY(m_uint(b, m, "requested_size", bl->requested));
        TRY(m_str(b, m, "state"));
        TRY(m_str(b, m, state[bl->state <= HBMI_TBLK_PENDING_FREE ? bl->state : 0]));
        TRY(frames(b, m, t, bl->tag, bl->backtrace));
        TRY(hbmi_buf_byte(b, 'u'));
    }
    return hbmi_buf_put(b, "eu", 2); /* blocks APPENDS, segment SETITEMS */
}

/* An entry's other keys as read (set id of hbmi_torch_segs), written before "frames". */
static hbm_status put_extras(hbmi_buf *b, const hbmi_torch_segs *x, uint32_t id) {
    if (x && id && id <= x->nx) TRY(hbmi_buf_put(b, x->xb + x->xoff[id - 1], x->xoff[id] - x->xoff[id - 1]));
    return HBM_OK;
}

/* An entry of another action ("snapshot", ...) as read. */
static hbm_status put_mark(hbmi_buf *b, memo *m, const hbm_trace *t, const hbmi_torch_segs *x, const struct hbmi_tmark *mk) {
    TRY(hbmi_buf_put(b, "}(", 2));
    TRY(m_str(b, m, "action"));
    TRY(hbmi_pk_str(b, mk->action));
    TRY(m_uint(b, m, "addr", mk->addr));
    TRY(m_uint(b, m, "size", mk->size));
    TRY(m_uint(b, m, "stream", mk->stream));
    if (mk->time_us >= 0) TRY(m_uint(b, m, "time_us", (uint64_t)mk->time_us));
    TRY(put_extras(b, x, mk->xid));
    if (mk->has_frames) TRY(frames(b, m, t, 0, mk->backtrace));
    return hbmi_buf_byte(b, 'u');
}

/* The history of one device: its events from history_start on, as PyTorch names them. */
/* A segment event of the twin (tw), at the time of event pos. */
static hbm_status put_twin_segment(hbmi_buf *b, memo *m, const hbm_trace *t, const struct hbmi_tsegev *g) {
    static const char *action[] = {"", "", "", "", "segment_alloc", "segment_free", "", "", "segment_map", "segment_unmap"};
    TRY(hbmi_buf_put(b, "}(", 2));
    TRY(m_str(b, m, "action"));
    TRY(m_str(b, m, action[g->kind < 10 ? g->kind : 0]));
    TRY(m_uint(b, m, "addr", g->addr));
    TRY(m_uint(b, m, "size", g->size));
    TRY(m_uint(b, m, "stream", g->stream));
    if (t->has_time) TRY(m_uint(b, m, "time_us", (g->pos < t->count ? t->events[g->pos].time_ns : 0) / 1000));
    TRY(frames(b, m, t, 0, 0));
    return hbmi_buf_byte(b, 'u');
}

/* The entries of put_history; live: address -> event index of the live alloc (for the sizes
 * and frames of frees). */
static hbm_status history_entries(hbmi_buf *b, memo *m, const hbm_trace *t, int addressed, const hbmi_torch_segs *tw,
                                  hbmi_map *live) {
    static const char *action[] = {"", "alloc", "free_completed", "oom", "segment_alloc", "segment_free",
                                   "free_requested", "", "segment_map", "segment_unmap"};
    size_t written = 0;
    const hbmi_torch_segs *x = t->priv_->torch_segs;
    size_t mk = 0, run = 0, tseg = 0;
    uint32_t xid = 0;
    TRY(hbmi_buf_put(b, "](", 2));
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        for (; x && mk < x->nmarks && x->marks[mk].pos <= i; mk++) /* other actions before it */
            if (x->marks[mk].device < 0) TRY(put_mark(b, m, t, x, &x->marks[mk]));
        for (; x && run < x->nruns && x->runs[2 * run] <= i; run++) xid = (uint32_t)x->runs[2 * run + 1];
        /* the twin's segment events made for this event, before it (the trace's own are
         * another allocator's: left out) */
        for (; tw && tseg < tw->ntwin_seg && tw->twin_seg[tseg].pos <= i; tseg++)
            if (i >= t->history_start) TRY(put_twin_segment(b, m, t, &tw->twin_seg[tseg]));
        if (e->kind < HBM_EV_ALLOC || e->kind > HBM_EV_SEGMENT_UNMAP || e->kind == HBM_EV_SYNC) continue;
        if (tw && (e->kind == HBM_EV_SEGMENT_ALLOC || e->kind == HBM_EV_SEGMENT_FREE || e->kind == HBM_EV_SEGMENT_MAP ||
                   e->kind == HBM_EV_SEGMENT_UNMAP))
            continue;
        uint64_t size = e->size, key = e->addr == UINT64_MAX ? 0 : e->addr, j, addr = e->addr;
        uint32_t tag = e->tag, bt = e->backtrace;
        if (e->kind == HBM_EV_ALLOC) {
            size = e->requested ? e->requested : e->size;
            TRY(hbmi_map_put(live, key, i));
            if (tw && tw->twin_addr[i]) addr = tw->twin_addr[i]; /* where PyTorch put it */
        } else if (e->kind == HBM_EV_FREE || e->kind == HBM_EV_FREE_REQUESTED) {
            /* memory_viz matches frees to allocs by address and wants the size and frames */
            int found = e->kind == HBM_EV_FREE ? hbmi_map_del(live, key, &j) : hbmi_map_get(live, key, &j);
            if (found) {
                const hbm_trace_event *a = &t->events[j];
                if (tw && tw->twin_addr[j]) addr = tw->twin_addr[j];
                size = a->requested ? a->requested : a->size;
                if (!tag) tag = a->tag;
                if (!bt) bt = a->backtrace;
            } else if (!size) {
                continue; /* a free of nothing known, without a size: memory_viz could not use it */
            }
        } else if (e->kind == HBM_EV_OOM) {
            size = e->requested;
        } else if (!addressed) {
            continue; /* a segment change without an address (the recorder's): memory_viz pairs by address */
        }
        if (i < t->history_start) continue; /* the rebuilt state goes to "segments" */
        TRY(hbmi_buf_put(b, "}(", 2));
        TRY(m_str(b, m, "action"));
        TRY(m_str(b, m, action[e->kind]));
        TRY(m_uint(b, m, "addr", e->kind == HBM_EV_OOM ? 0 : addr));
        TRY(m_uint(b, m, "size", size));
        TRY(m_uint(b, m, "stream", e->stream));
        if (t->has_time) TRY(m_uint(b, m, "time_us", e->time_ns / 1000 + (t->priv_->torch_segs ? (uint64_t)t->priv_->torch_segs->t0_us : 0)));
        if (e->kind == HBM_EV_OOM) TRY(m_uint(b, m, "device_free", e->size));
        TRY(put_extras(b, x, xid));
        TRY(frames(b, m, t, tag, bt));
        TRY(hbmi_buf_byte(b, 'u'));
        if (++written % 1000 == 0) TRY(hbmi_buf_put(b, "e(", 2)); /* APPENDS in batches, as Python's pickler */
    }
    for (; x && mk < x->nmarks; mk++)
        if (x->marks[mk].device < 0) TRY(put_mark(b, m, t, x, &x->marks[mk]));
    for (; tw && tseg < tw->ntwin_seg; tseg++) TRY(put_twin_segment(b, m, t, &tw->twin_seg[tseg]));
    return hbmi_buf_byte(b, 'e');
}

static hbm_status put_history(hbmi_buf *b, memo *m, const hbm_trace *t, int addressed, const hbmi_torch_segs *tw) {
    hbmi_map live;
    hbmi_map_init(&live);
    hbm_status s = history_entries(b, m, t, addressed, tw, &live);
    hbmi_map_destroy(&live);
    return s;
}

/* The end state of one device: its live segments with their blocks. Without addressed
 * segment events (hbm's recorder, RMM logs, plans), every live block is a segment of its own. */
/* Reserved ranges: segment_alloc/map add one, segment_free/unmap remove the bytes they
 * name (an unmap may cover part of a range, or pages mapped by several events). */
typedef struct ranges {
    seg *r;
    size_t n, cap;
} ranges;

static hbm_status ranges_add(ranges *x, seg v) {
    if (hbmi_grow((void **)&x->r, &x->cap, x->n + 1, sizeof *x->r)) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    x->r[x->n++] = v;
    return HBM_OK;
}

static hbm_status ranges_cut(ranges *x, uint64_t lo, uint64_t hi) {
    hbm_status s = HBM_OK;
    for (size_t i = 0; i < x->n && !s; i++) {
        seg *r = &x->r[i];
        uint64_t a = r->addr, b = r->addr + r->size;
        if (b <= lo || a >= hi) continue;
        seg right = {hi, b > hi ? b - hi : 0, r->stream, r->map};
        if (a < lo) {
            r->size = lo - a;
        } else {
            x->r[i] = x->r[--x->n]; /* remove; look at the moved one again */
            i--;
        }
        if (right.size) s = ranges_add(x, right);
    }
    return s;
}

/* The end state of one device: its reserved ranges with their blocks (adjacent mapped
 * pages of an expandable segment as one segment). Without addressed segment events (hbm's
 * recorder, RMM logs, plans), every live block is a segment of its own. */
static hbm_status put_segments(hbmi_buf *b, memo *m, const hbm_trace *t, int addressed) {
    hbmi_map live;
    hbmi_map_init(&live);
    ranges rs = {0};
    hbm_status s = HBM_OK;
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        uint64_t key = e->addr == UINT64_MAX ? 0 : e->addr;
        switch (e->kind) {
        case HBM_EV_ALLOC: s = hbmi_map_put(&live, key, i); break;
        case HBM_EV_FREE: hbmi_map_del(&live, key, NULL); break;
        case HBM_EV_SEGMENT_ALLOC:
        case HBM_EV_SEGMENT_MAP:
            if (addressed && e->size) s = ranges_add(&rs, (seg){e->addr, e->size, e->stream, e->kind == HBM_EV_SEGMENT_MAP});
            break;
        case HBM_EV_SEGMENT_FREE:
        case HBM_EV_SEGMENT_UNMAP:
            if (addressed) s = ranges_cut(&rs, e->addr, e->addr + e->size);
            break;
        default: break;
        }
    }
    blk *bl = hbmi_malloc((live.count + 1) * sizeof *bl);
    size_t nb = 0;
    if (!s && !bl) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory writing a snapshot");
    for (size_t k = 0; !s && k < live.cap; k++)
        if (live.s[k].key) bl[nb++] = (blk){t->events[live.s[k].val].addr, (size_t)live.s[k].val};
    if (!s) {
        hbmi_qsort(bl, nb, sizeof *bl, blk_cmp);
        hbmi_qsort(rs.r, rs.n, sizeof *rs.r, seg_cmp);
        size_t nm = 0; /* merge adjacent mapped pages */
        for (size_t k = 0; k < rs.n; k++) {
            if (nm && rs.r[k].map && rs.r[nm - 1].map && rs.r[nm - 1].addr + rs.r[nm - 1].size == rs.r[k].addr &&
                rs.r[nm - 1].stream == rs.r[k].stream)
                rs.r[nm - 1].size += rs.r[k].size;
            else
                rs.r[nm++] = rs.r[k];
        }
        rs.n = nm;
        /* blocks outside every range get a segment of their own */
        size_t k = 0, base = rs.n;
        for (size_t i = 0; i < nb && !s; i++) {
            while (k < base && rs.r[k].addr + rs.r[k].size <= bl[i].addr) k++;
            if (k < base && rs.r[k].addr <= bl[i].addr) continue;
            const hbm_trace_event *a = &t->events[bl[i].ev];
            uint64_t size = a->size > a->requested ? a->size : a->requested;
            s = ranges_add(&rs, (seg){a->addr, size ? size : 1, a->stream, 0});
        }
        if (!s) hbmi_qsort(rs.r, rs.n, sizeof *rs.r, seg_cmp);
        size_t i = 0;
        for (k = 0; k < rs.n && !s; k++) {
            while (i < nb && bl[i].addr < rs.r[k].addr) i++;
            size_t j = i;
            while (j < nb && bl[j].addr < rs.r[k].addr + rs.r[k].size) j++;
            s = put_segment(b, m, t, &rs.r[k], bl + i, j - i);
            i = j;
        }
    }
    hbmi_free(bl);
    hbmi_free(rs.r);
    hbmi_map_destroy(&live);
    return s;
}

/* "allocator_settings": the settings the snapshot was recorded with (hbm config items in
 * t->torch_settings), in PyTorch's own form, so the file replays under them again. */
static hbm_status put_settings(hbmi_buf *b, const hbm_trace *t) {
    hbm_config c;
    char text[sizeof t->torch_settings + 32];
    hbm_config_default(&c);
    snprintf(text, sizeof text, "allocator=torch,%s", t->torch_settings);
    hbm_status s = hbm_config_apply(&c, text);
    if (s) return s;
    TRY(hbmi_pk_str(b, "allocator_settings"));
    TRY(hbmi_buf_put(b, "}(", 2));
    TRY(hbmi_pk_str(b, "expandable_segments"));
    TRY(hbmi_buf_byte(b, c.expandable_segments ? 0x88 : 0x89)); /* NEWTRUE / NEWFALSE */
    TRY(hbmi_pk_str(b, "max_split_size"));
    TRY(hbmi_pk_int(b, c.max_split_size == UINT64_MAX ? -1 : (int64_t)c.max_split_size));
    TRY(hbmi_pk_str(b, "garbage_collection_threshold"));
    unsigned char g[9] = {'G'}; /* BINFLOAT: big-endian IEEE 754 double */
    uint64_t bits;
    memcpy(&bits, &c.garbage_collection_threshold, sizeof bits);
    for (int i = 0; i < 8; i++) g[1 + i] = (unsigned char)(bits >> (56 - 8 * i));
    TRY(hbmi_buf_put(b, g, 9));
    TRY(hbmi_pk_str(b, "roundup_power2_divisions"));
    TRY(hbmi_buf_put(b, "}(", 2));
    for (int i = 0; i < HBM_TORCH_ROUNDUP_INTERVALS; i++) {
        char k[16];
        snprintf(k, sizeof k, "%u", 1u << i);
        TRY(hbmi_pk_str(b, k));
        TRY(hbmi_pk_int(b, c.roundup_power2_divisions[i]));
    }
    TRY(hbmi_buf_put(b, "uu", 2)); /* SETITEMS of both dicts */
    return HBM_OK;
}

/* Whether t's segment events name addresses (a snapshot's do; hbm's recorder's do not). */
static int addressed_segments(const hbm_trace *t) {
    for (size_t i = 0; i < t->count; i++)
        if ((t->events[i].kind == HBM_EV_SEGMENT_ALLOC || t->events[i].kind == HBM_EV_SEGMENT_MAP) && t->events[i].addr)
            return 1;
    return 0;
}

typedef struct seg_ref {
    size_t order, d, k; /* place in the file, trace, segment of its hbmi_torch_segs */
} seg_ref;

static int ref_cmp(const void *a, const void *b) {
    const seg_ref *x = a, *y = b;
    if (x->order != y->order) return (x->order > y->order) - (x->order < y->order);
    return (x->d > y->d) - (x->d < y->d);
}

/* "segments": each trace's allocator end state (a snapshot's as read, in the file's order;
 * else the PyTorch allocator twin's, hbmi_torch_twin_end_state); a trace the twin cannot
 * run on (its device does not open) keeps the blocks its events leave live (put_segments). */
static hbm_status put_all_segments(hbmi_buf *b, memo *m, hbm_trace *const *traces, size_t n,
                                   hbmi_torch_segs *const *own) {
    hbm_status s = HBM_OK;
    size_t total = 0, base = 0;
    for (size_t d = 0; d < n; d++) {
        const hbmi_torch_segs *x = traces[d]->priv_->torch_segs ? traces[d]->priv_->torch_segs : own[d];
        total += x ? x->n : 0;
    }
    seg_ref *r = s ? NULL : hbmi_malloc((total + 1) * sizeof *r);
    if (!s && !r) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory writing a snapshot");
    size_t nr = 0;
    for (size_t d = 0; d < n && !s; d++) {
        const hbmi_torch_segs *x = traces[d]->priv_->torch_segs ? traces[d]->priv_->torch_segs : own[d];
        for (size_t k = 0; x && k < x->n; k++)
            r[nr++] = (seg_ref){traces[d]->priv_->torch_segs ? x->s[k].order : base + k, d, k};
        if (!traces[d]->priv_->torch_segs && x) base += x->n;
    }
    if (!s) hbmi_qsort(r, nr, sizeof *r, ref_cmp);
    for (size_t i = 0; i < nr && !s; i++) {
        const hbmi_torch_segs *x = traces[r[i].d]->priv_->torch_segs ? traces[r[i].d]->priv_->torch_segs : own[r[i].d];
        m->device = r[i].d;
        s = put_kept_segment(b, m, traces[r[i].d], x, &x->s[r[i].k]);
    }
    for (size_t d = 0; d < n && !s; d++) { /* traces without an end state: their live blocks */
        if (traces[d]->priv_->torch_segs || own[d]) continue;
        m->device = d;
        s = put_segments(b, m, traces[d], addressed_segments(traces[d]));
    }
    hbmi_free(r);
    return s;
}

/* The whole pickle into b: device_traces, segments, the settings; own[d]: the end state the
 * twin gave trace d (NULL: none). */
static hbm_status write_all(hbmi_buf *b, memo *m, hbm_trace *const *traces, size_t n, hbmi_torch_segs *const *own) {
    int maxdev = 0;
    for (size_t d = 0; d < n; d++) {
        const hbmi_torch_segs *x = traces[d]->priv_->torch_segs;
        if (traces[d]->device_index > maxdev) maxdev = traces[d]->device_index;
        for (size_t k = 0; x && k < x->nmarks; k++)
            if (x->marks[k].device > maxdev) maxdev = x->marks[k].device;
    }
    TRY(hbmi_buf_put(b, "\x80\x02}(", 4)); /* PROTO 2, EMPTY_DICT, MARK */
    TRY(hbmi_pk_str(b, "device_traces"));
    TRY(hbmi_buf_put(b, "](", 2)); /* one list per device index, in order */
    for (int dv = 0; dv <= maxdev; dv++) {
        const hbm_trace *t = NULL;
        const hbmi_torch_segs *tw = NULL;
        for (size_t d = 0; d < n; d++)
            if (traces[d]->device_index == dv || (n == 1 && traces[d]->device_index < 0))
                t = traces[d], m->device = d, tw = own[d];
        if (!t) { /* a device without a trace: the other entries kept of it, if any */
            TRY(hbmi_buf_put(b, "](", 2));
            for (size_t d = 0; d < n; d++) {
                const hbmi_torch_segs *x = traces[d]->priv_->torch_segs;
                m->device = d;
                for (size_t k = 0; x && k < x->nmarks; k++)
                    if (x->marks[k].device == dv) TRY(put_mark(b, m, traces[d], x, &x->marks[k]));
            }
            TRY(hbmi_buf_byte(b, 'e'));
            continue;
        }
        TRY(put_history(b, m, t, addressed_segments(t), tw));
    }
    TRY(hbmi_buf_byte(b, 'e'));
    TRY(hbmi_pk_str(b, "segments"));
    TRY(hbmi_buf_put(b, "](", 2));
    TRY(put_all_segments(b, m, traces, n, own));
    TRY(hbmi_buf_byte(b, 'e')); /* segments APPENDS */
    /* the keys the snapshot had, as it had them; else the settings hbm knows */
    if (traces[0]->priv_->torch_keys) TRY(hbmi_buf_put(b, traces[0]->priv_->torch_keys, traces[0]->priv_->torch_keys_n));
    if (traces[0]->torch_settings[0] && !traces[0]->priv_->torch_settings_kept) TRY(put_settings(b, traces[0]));
    return hbmi_buf_put(b, "u.", 2); /* root SETITEMS, STOP */
}

int hbmi_trace_has_torch_segs(const hbm_trace *t) { return t && t->priv_->torch_segs != NULL; }

hbm_status hbmi_export_torch_write(hbm_trace *const *traces, size_t n, hbmi_torch_segs *const *own, FILE *f) {
    if (!traces || !n || !own || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_export_torch: NULL argument");
    hbmi_buf b = {.what = "a snapshot"};
    memo m = {0};
    hbmi_map_init(&m.idx);
    hbm_status s = write_all(&b, &m, traces, n, own);
    if (!s && fwrite(b.p, 1, b.n, f) != b.n) s = hbmi_error(HBM_ERR_IO, "writing the snapshot failed");
    hbmi_buf_free(&b);
    hbmi_map_destroy(&m.idx);
    return s;
}
