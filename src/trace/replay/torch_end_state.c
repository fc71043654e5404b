/* torch_end_state.c - the blocks PyTorch's caching allocator would hold at the end of a
 * trace that does not carry them (hbm's own traces, RMM logs, XProf memory profiles): the
 * torch policy (src/alloc/torch_caching.c, the allocator the twin replays with) under the
 * settings the trace was recorded with, on the device hbm_replay_default_device names, is
 * given the trace's allocations and frees in order; its segments and blocks at the end are
 * the state the torch export writes as "segments". */
#include <string.h>

#include "alloc/torch_caching.h"
#include "core/internal.h"
#include "core/map.h"
#include "hbm/alloc.h"
#include "hbm/device.h"
#include "hbm/replay_torch.h"
#include "trace/replay/twin_internal.h"
#include "trace/trace_internal.h"

typedef struct walk_ctx {
    const hbm_trace *t;
    hbmi_torch_segs *x;
    hbmi_map *at;      /* twin address -> index of the alloc event that holds it */
    hbmi_map *pending; /* twin address -> 1: its free was requested, not completed */
    hbm_status err;
} walk_ctx;

static int on_block(void *user, const hbm_block *b) {
    walk_ctx *c = user;
    hbmi_torch_segs *x = c->x;
    if (b->kind == HBM_BLOCK_REGION) {
        if (hbmi_grow((void **)&x->s, &x->cap, x->n + 1, sizeof *x->s)) goto oom;
        /* PyTorch's small pool takes 2 MiB segments; a large pool segment is larger */
        x->s[x->n++] = (hbmi_tseg){.addr = b->addr, .total = b->size, .order = x->n, .first = x->nb,
                                   .small = b->size <= (2u << 20),
                                   .keys = HBMI_TSEG_DEVICE | HBMI_TSEG_SIZES | HBMI_TSEG_TYPE | HBMI_TSEG_EXPANDABLE,
                                   .device = c->t->device_index > 0 ? c->t->device_index : 0};
        return 0;
    }
    if (!x->n) return 0; /* a block outside every region: not the walk's order */
    if (hbmi_grow((void **)&x->b, &x->capb, x->nb + 1, sizeof *x->b)) goto oom;
    hbmi_tseg *g = &x->s[x->n - 1];
    hbmi_tblock k = {.addr = b->addr, .size = b->size, .state = HBMI_TBLK_INACTIVE};
    uint64_t ev;
    if (b->kind == HBM_BLOCK_LIVE) {
        k.state = hbmi_map_get(c->pending, b->addr, NULL) ? HBMI_TBLK_PENDING_FREE : HBMI_TBLK_ALLOCATED;
        k.requested = b->requested;
        if (hbmi_map_get(c->at, b->addr, &ev)) {
            const hbm_trace_event *e = &c->t->events[ev];
            k.backtrace = c->t->stacks ? e->backtrace : 0;
            k.tag = e->tag;
            if (!g->n) g->stream = e->stream; /* the segment's stream: its first block's */
        }
        /* PyTorch's sums (CUDACachingAllocator snapshot()): allocated_size counts allocated
         * blocks, active_size and requested_size the active ones (allocated or pending) */
        if (k.state == HBMI_TBLK_ALLOCATED) g->allocated += k.size;
        g->active += k.size;
        g->requested += k.requested;
    }
    x->b[x->nb++] = k;
    g->n++;
    return 0;
oom:
    c->err = hbmi_error(HBM_ERR_NOMEM, "out of host memory for the allocator's end state");
    return 1;
}

typedef struct seg_ctx {
    hbmi_torch_segs *x;
    size_t pos; /* the event being replayed */
    int oom;
} seg_ctx;

static void on_segment(void *user, int kind, uint64_t addr, uint64_t size, uint64_t stream, uint64_t seg) {
    seg_ctx *c = user;
    hbmi_torch_segs *x = c->x;
    (void)seg;
    if (c->oom || hbmi_grow((void **)&x->twin_seg, &x->twin_seg_cap, x->ntwin_seg + 1, sizeof *x->twin_seg)) {
        c->oom = 1;
        return;
    }
    x->twin_seg[x->ntwin_seg++] = (struct hbmi_tsegev){c->pos, (uint8_t)kind, addr, size, stream};
}

hbm_status hbmi_torch_twin_end_state(const hbm_trace *t, hbmi_torch_segs **out) {
    if (!t || !out) return hbmi_error(HBM_ERR_INVALID, "hbmi_torch_twin_end_state: NULL argument");
    *out = NULL;
    char rec[sizeof t->torch_settings + 32], config[300], spec[96];
    hbm_torch_recorded_settings(t, rec, sizeof rec);
    if (hbmi_torch_config_with(rec, "allocator=torch", config, sizeof config)) snprintf(config, sizeof config, "allocator=torch");
    hbm_status s = hbm_replay_default_device(t, spec, sizeof spec, NULL);
    hbm_device *dev = NULL;
    hbm_allocator *a = NULL;
    hbmi_map live, at, pending; /* recorded address -> twin address; twin address -> event; pending frees */
    hbmi_map_init(&live);
    hbmi_map_init(&at);
    hbmi_map_init(&pending);
    hbmi_torch_segs *x = hbmi_calloc(1, sizeof *x);
    if (!s && !x) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory for the allocator's end state");
    if (!s) s = hbm_device_open(spec, &dev);
    if (!s) s = hbm_allocator_open(dev, config, &a);
    if (!s && !hbmi_torch_is(a)) s = hbmi_error(HBM_ERR_INVALID, "'%s' does not run the torch policy", config);
    if (!s && !(x->twin_addr = hbmi_calloc(t->count + 1, sizeof *x->twin_addr)))
        s = hbmi_error(HBM_ERR_NOMEM, "out of host memory for the allocator's end state");
    seg_ctx sc = {.x = x};
    if (!s) hbmi_torch_set_event_fn(hbmi_torch_policy(a), on_segment, &sc);
    /* an allocation the device cannot hold is left out, silently */
    int quiet = a ? hbmi_allocator_set_quiet(a, 1) : 0;
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        sc.pos = i;
        uint64_t key = e->addr == UINT64_MAX ? 0 : e->addr, addr;
        if (e->kind == HBM_EV_ALLOC) {
            uint64_t size = e->requested ? e->requested : e->size;
            if (!size) continue;
            if (hbmi_map_get(&live, key, NULL)) continue; /* live already (an impossible history): the first */
            hbm_status as = hbm_alloc_stream(a, size, NULL, e->stream, &addr);
            if (as == HBM_ERR_OOM) continue;
            s = as;
            if (!s && !(s = hbmi_map_put(&live, key, addr + 1))) s = hbmi_map_put(&at, addr, i);
            x->twin_addr[i] = addr;
        } else if (e->kind == HBM_EV_FREE || e->kind == HBM_EV_FREE_REQUESTED) {
            if (!hbmi_map_get(&live, key, &addr)) continue;
            if (e->kind == HBM_EV_FREE_REQUESTED) {
                s = hbmi_map_put(&pending, addr - 1, 1);
                continue;
            }
            hbmi_map_del(&live, key, NULL);
            hbmi_map_del(&at, addr - 1, NULL);
            hbmi_map_del(&pending, addr - 1, NULL);
            s = hbm_free_stream(a, addr - 1, e->stream);
        }
    }
    if (a) hbmi_allocator_set_quiet(a, quiet);
    if (a && hbmi_torch_is(a)) hbmi_torch_set_event_fn(hbmi_torch_policy(a), NULL, NULL);
    if (!s && sc.oom) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory for the allocator's end state");
    walk_ctx c = {.t = t, .x = x, .at = &at, .pending = &pending};
    if (!s) s = hbm_allocator_walk(a, on_block, &c);
    if (!s) s = c.err;
    char why[256] = "";
    if (s) snprintf(why, sizeof why, "%s", hbm_last_error());
    hbm_allocator_close(a);
    hbm_device_close(dev);
    hbmi_map_destroy(&live);
    hbmi_map_destroy(&at);
    hbmi_map_destroy(&pending);
    if (s) {
        hbmi_torch_segs_free(x);
        return hbmi_error(s, "%s", why);
    }
    *out = x;
    return HBM_OK;
}
