/* torch_twin.c - replay a PyTorch snapshot's history through allocator=torch and count
 * how many of the real allocator's segment decisions and block placements the twin
 * reproduces (hbm/replay_torch.h says how events are paired). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/torch_caching.h"
#include "hbm/size.h"
#include "hbm/replay_torch.h"
#include "trace/replay/replay_internal.h"
#include "trace/replay/twin_internal.h"
#include "trace/trace_internal.h"

typedef struct twin_ev {
    int kind;
    uint64_t addr, size, seg;
} twin_ev;

typedef struct match_ctx {
    const hbm_trace *t;
    hbm_torch_match *m;
    twin_ev *tw; /* the twin's segment events during the current call */
    size_t ntw, captw;
    hbm_status cb_err; /* a failure inside the policy's callbacks, which return no status: read
                        * after each call into the policy (docs/decisions.md) */
    hbmi_map segbase; /* twin segment base -> recorded segment base */
    const size_t *pend; /* the recorded segment events of the current call */
    size_t npend, ocur; /* ocur: the first one place_segment has not used */
    hbmi_twin_segs rec; /* the recorded cudaMalloc segments held now */
    uint64_t *held;     /* (base, size) of the recorded addresses the twin holds */
    size_t nheld, capheld;
    uint64_t va_next;   /* where the twin's next unpaired expandable range goes */
    int grew;           /* a segment allocated or mapped since the reserved bytes were read */
} match_ctx;

/* Ranges as (base, size) pairs: few (one per segment), so a plain array. */
static int range_find(const uint64_t *r, size_t n, uint64_t addr, uint64_t size) {
    for (size_t k = 0; k < n; k++)
        if (addr < r[2 * k] + r[2 * k + 1] && r[2 * k] < addr + size) return 1;
    return 0;
}

static hbm_status range_add(uint64_t **r, size_t *n, size_t *cap, uint64_t addr, uint64_t size) {
    TRY(hbmi_grow((void **)r, cap, 2 * (*n + 1), sizeof **r));
    (*r)[2 * *n] = addr, (*r)[2 * *n + 1] = size, ++*n;
    return HBM_OK;
}

static void range_del(uint64_t *r, size_t *n, uint64_t addr) {
    for (size_t k = 0; k < *n; k++)
        if (r[2 * k] == addr) {
            --*n;
            r[2 * k] = r[2 * *n], r[2 * k + 1] = r[2 * *n + 1];
            return;
        }
}

/* The recorded segments held now (twin_internal.h). */
static hbm_status rec_add(match_ctx *c, uint64_t addr, uint64_t size) { return hbmi_twin_segs_add(&c->rec, addr, size); }

static void rec_del(match_ctx *c, uint64_t addr) { hbmi_twin_segs_del(&c->rec, addr); }

static int rec_has(const match_ctx *c, uint64_t addr) { return hbmi_twin_segs_has(&c->rec, addr); }

static int held_overlaps(const match_ctx *c, uint64_t addr, uint64_t size) { return range_find(c->held, c->nheld, addr, size); }
static hbm_status held_add(match_ctx *c, uint64_t addr, uint64_t size) {
    return range_add(&c->held, &c->nheld, &c->capheld, addr, size);
}
static void held_del(match_ctx *c, uint64_t addr) { range_del(c->held, &c->nheld, addr); }

/* A cudaMalloc segment the twin does not place where PyTorch's went keeps the device's
 * address (*addr on the call), unless a segment the twin holds is there (one placed at a
 * recorded address): then it goes above every range held, 2 MiB-aligned, so that no two
 * of the twin's blocks share an address. */
static int place_clear(const match_ctx *c, uint64_t span, uint64_t *addr) {
    if (!held_overlaps(c, *addr, span)) return 0;
    uint64_t top = 0;
    for (size_t k = 0; k < c->nheld; k++)
        if (c->held[2 * k] + c->held[2 * k + 1] > top) top = c->held[2 * k] + c->held[2 * k + 1];
    *addr = hbmi_align_up(top, 2u << 20);
    return 1;
}

/* The twin's segment goes where PyTorch's went when the recorded event at the same
 * position of this call is the same decision, so best fit meets the same address order. */
static int place_segment(void *user, int kind, uint64_t size, uint64_t span, uint64_t *addr) {
    match_ctx *c = user;
    size_t q = c->ocur;
    while (q < c->npend && (c->t->events[c->pend[q]].kind != kind || c->t->events[c->pend[q]].size != size)) q++;
    const hbm_trace_event *r = q < c->npend ? &c->t->events[c->pend[q]] : NULL;
    if (!r || held_overlaps(c, r->addr, span)) {
        if (kind != HBM_EV_SEGMENT_MAP) return place_clear(c, span, addr); /* a cudaMalloc segment: where the device puts it */
        /* an expandable range of the twin's own: from the twin's own virtual addresses, as
         * the policy takes them (below any device's), not from the process's counter, so
         * that the twin moves no other replay's ranges (an OOM report prints them) */
        *addr = hbmi_align_up(c->va_next, 20u << 20);
        c->va_next = *addr + span + (40u << 20);
        return 1;
    }
    if (kind == HBM_EV_SEGMENT_MAP && !c->cb_err) /* an expandable range stays reserved */
        c->cb_err = held_add(c, r->addr, span);
    c->ocur = q + 1;
    *addr = r->addr;
    return 1;
}

static int is_segment_event(int k) {
    return k == HBM_EV_SEGMENT_ALLOC || k == HBM_EV_SEGMENT_FREE || k == HBM_EV_SEGMENT_MAP || k == HBM_EV_SEGMENT_UNMAP;
}

static void on_twin_event(void *user, int kind, uint64_t addr, uint64_t size, uint64_t stream, uint64_t seg) {
    match_ctx *c = user;
    (void)stream;
    c->grew |= kind == HBM_EV_SEGMENT_ALLOC || kind == HBM_EV_SEGMENT_MAP; /* the policy's reserved bytes rise only so */
    if (c->cb_err || (c->cb_err = hbmi_grow((void **)&c->tw, &c->captw, c->ntw + 1, sizeof *c->tw))) return;
    c->tw[c->ntw++] = (twin_ev){kind, addr, size, seg};
    if (kind == HBM_EV_SEGMENT_ALLOC) c->cb_err = held_add(c, addr, size);
    else if (kind == HBM_EV_SEGMENT_FREE) held_del(c, addr);
}

/* Pair the recorded segment events rec[0..n) with the twin's, in order: each twin event
 * takes the next recorded one of the same kind and size (an extra event on either side
 * does not shift the pairing of the others). */
static hbm_status compare(match_ctx *c, const size_t *rec, size_t n) {
    size_t k = 0, done = 0;
    for (size_t j = 0; j < c->ntw; j++) {
        const twin_ev *w = &c->tw[j];
        size_t q = k;
        while (q < n && (c->t->events[rec[q]].kind != w->kind || c->t->events[rec[q]].size != w->size)) q++;
        if (q == n) continue; /* the twin's own decision */
        const hbm_trace_event *r = &c->t->events[rec[q]];
        for (; k < q; k++)
            if (c->m->first_segment_diff < 0) c->m->first_segment_diff = (int64_t)rec[k];
        k = q + 1;
        done++;
        uint64_t rbase = r->addr - (w->addr - w->seg); /* the recorded segment's base */
        if ((w->kind == HBM_EV_SEGMENT_ALLOC || w->kind == HBM_EV_SEGMENT_MAP) && !hbmi_map_get(&c->segbase, w->seg, NULL))
            TRY(hbmi_map_put(&c->segbase, w->seg, rbase));
    }
    if (k < n && c->m->first_segment_diff < 0) c->m->first_segment_diff = (int64_t)rec[k];
    c->m->segments_same += done;
    c->m->segments_twin += c->ntw;
    c->ntw = 0;
    c->ocur = 0;
    return HBM_OK;
}

/* (twin_internal.h) PyTorch (c10/cuda/CUDACachingAllocator.cpp) records each free
 * with the stack its caller gathered: malloc's own (the one its segment_alloc / segment_map
 * / oom then carries) on its paths, emptyCache's on an empty_cache() call (or, recording
 * context="alloc", each segment's own from its cudaMalloc). With the snapshot's stacks, a
 * run freed by that malloc carries its stack on every free. Without them: malloc frees
 * its cache only after its cudaMalloc (alloc_block) of the segment failed, which needs
 * the reserved bytes plus the segment above what the device holds, and the device held
 * the history's peak; or by garbage collection (garbage_collection_threshold recorded),
 * which needs no failure. */
int hbmi_twin_run_is_empty_cache(const hbm_trace *t, size_t run, size_t end, uint64_t reserved, uint64_t peak) {
    int k = end < t->count ? t->events[end].kind : 0;
    if (k != HBM_EV_SEGMENT_ALLOC && k != HBM_EV_SEGMENT_MAP && k != HBM_EV_OOM) return 1;
    if (t->stacks && t->events[run].backtrace) {
        for (size_t i = run; i < end; i++)
            if (t->events[i].backtrace != t->events[end].backtrace) return 1;
        return 0;
    }
    if (k == HBM_EV_OOM || !peak || strstr(t->torch_settings, "garbage_collection_threshold")) return 0;
    return reserved + t->events[end].size <= peak;
}

/* Two walks over the history for what the twin needs before it starts: the recorded peak
 * of reserved bytes from start (*peak), whether it maps expandable segments (*has_map),
 * and (returned; NULL when out of host memory) for each event, 1 when it starts a run of
 * segment_free / segment_unmap events that was an empty_cache() call
 * (hbmi_twin_run_is_empty_cache, which needs the peak). */
static uint8_t *scan_history(const hbm_trace *t, uint64_t start, uint64_t *peak, int *has_map) {
    uint8_t *mark = hbmi_calloc(t->count + 1, 1);
    uint64_t cur = start, top = start;
    *has_map = 0;
    for (size_t i = 0; i < t->count; i++) {
        int k = t->events[i].kind;
        uint64_t size = t->events[i].size;
        if (k == HBM_EV_SEGMENT_MAP || k == HBM_EV_SEGMENT_UNMAP) *has_map = 1;
        if (k == HBM_EV_SEGMENT_ALLOC || k == HBM_EV_SEGMENT_MAP) cur += size;
        else if ((k == HBM_EV_SEGMENT_FREE || k == HBM_EV_SEGMENT_UNMAP) && cur >= size) cur -= size;
        if (cur > top) top = cur;
    }
    *peak = top;
    size_t run = SIZE_MAX; /* where the current run of segment_free / segment_unmap starts */
    uint64_t before = 0;   /* the bytes reserved then */
    cur = start;
    for (size_t i = 0; mark && i <= t->count; i++) {
        int k = i < t->count ? t->events[i].kind : 0;
        if (k == HBM_EV_SEGMENT_FREE || k == HBM_EV_SEGMENT_UNMAP) {
            if (run == SIZE_MAX) run = i, before = cur;
        } else if (run != SIZE_MAX) {
            if (hbmi_twin_run_is_empty_cache(t, run, i, before, top)) mark[run] = 1;
            run = SIZE_MAX;
        }
        if (i == t->count) break;
        uint64_t size = t->events[i].size;
        if (k == HBM_EV_SEGMENT_ALLOC || k == HBM_EV_SEGMENT_MAP) cur += size;
        else if ((k == HBM_EV_SEGMENT_FREE || k == HBM_EV_SEGMENT_UNMAP) && cur >= size) cur -= size;
    }
    return mark;
}

static void alloc_placed(match_ctx *c, void *self, uint64_t rec_addr, uint64_t twin_addr, size_t i) {
    uint64_t tbase = hbmi_torch_segment_of(self, twin_addr), rbase;
    if (tbase && hbmi_map_get(&c->segbase, tbase, &rbase) && rec_addr >= rbase && rec_addr - rbase == twin_addr - tbase)
        c->m->allocs_same++;
    else if (c->m->first_alloc_diff < 0)
        c->m->first_alloc_diff = (int64_t)i;
}

static hbm_status seed(match_ctx *c, hbm_allocator *a, const hbm_torch_segment_state *segs, size_t nsegs, hbmi_map *live);

/* The history's events through the twin (run sets it up and takes it down). */
static hbm_status walk(match_ctx *c, hbm_allocator *a, const uint8_t *empty_run, size_t *pending, int has_map,
                       hbmi_map *live) {
    const hbm_trace *t = c->t;
    hbm_torch_match *m = c->m;
    void *self;
    const hbm_allocator_ops *ops = hbmi_allocator_policy(a, &self);
    size_t npend = 0;
    hbm_stats st;
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind == HBM_EV_SEGMENT_ALLOC) TRY(rec_add(c, e->addr, e->size));
        else if (e->kind == HBM_EV_SEGMENT_FREE) rec_del(c, e->addr);
        if (is_segment_event(e->kind)) {
            m->segments_recorded++;
            if (!empty_run[i]) {
                pending[npend++] = i;
                continue;
            }
            TRY(compare(c, pending, npend)); /* decisions not followed by an alloc */
            npend = 0;
            size_t j = i;
            while (j < t->count && (t->events[j].kind == HBM_EV_SEGMENT_FREE || t->events[j].kind == HBM_EV_SEGMENT_UNMAP))
                pending[npend++] = j++;
            m->segments_recorded += j - i - 1;
            m->empty_cache_calls++;
            c->npend = npend;
            c->ocur = 0;
            TRY(hbmi_torch_empty_cache(self));
            TRY(c->cb_err);
            TRY(compare(c, pending, npend));
            npend = 0;
            i = j - 1;
        } else if (e->kind == HBM_EV_ALLOC || e->kind == HBM_EV_OOM) {
            uint64_t size = e->requested ? e->requested : e->size, addr = 0;
            if (!size) continue;
            if (e->kind == HBM_EV_ALLOC) m->allocs++;
            else m->ooms_recorded++;
            c->ntw = c->ocur = 0;
            c->npend = npend;
            hbm_status as = ops->alloc_stream(self, size, NULL, 0, e->stream, &addr);
            TRY(c->cb_err);
            TRY(compare(c, pending, npend));
            npend = 0;
            if (as == HBM_ERR_OOM) {
                m->ooms_twin++;
                if (e->kind == HBM_EV_ALLOC && m->first_alloc_diff < 0) m->first_alloc_diff = (int64_t)i;
                continue;
            }
            TRY(as);
            if (e->kind == HBM_EV_OOM) { /* the program died here; the twin did not: give it back */
                TRY(ops->free_stream(self, addr, e->stream));
                TRY(c->cb_err);
                continue;
            }
            if (!has_map && !rec_has(c, e->addr)) m->allocs_before_history++;
            alloc_placed(c, self, e->addr, addr, i);
            TRY(hbmi_map_put(live, e->addr, addr + 1));
            if (c->grew) { /* else no more reserved than at the last look */
                ops->stats(self, &st);
                if (st.bytes_reserved > m->peak_reserved_twin) m->peak_reserved_twin = st.bytes_reserved;
                c->grew = 0;
            }
        } else if (e->kind == HBM_EV_FREE) {
            uint64_t addr;
            if (hbmi_map_del(live, e->addr, &addr)) {
                TRY(ops->free_stream(self, addr - 1, e->stream));
                TRY(c->cb_err);
            }
        }
    }
    return compare(c, pending, npend); /* decisions after the last alloc */
}

static hbm_status run(match_ctx *c, hbm_allocator *a, const uint8_t *empty_run, size_t *pending, int has_map,
                      const hbm_torch_segment_state *segs, size_t nsegs) {
    c->pend = pending;
    void *self = hbmi_torch_policy(a);
    hbmi_map live; /* recorded address -> twin address + 1 */
    hbmi_map_init(&live);
    hbm_status s = seed(c, a, segs, nsegs, &live);
    hbmi_torch_set_event_fn(self, on_twin_event, c);
    hbmi_torch_set_addr_fn(self, place_segment, c);
    int quiet = hbmi_allocator_set_quiet(a, 1); /* the history's OOMs are counted: no message is read */
    c->grew = 1; /* the seeded segments */
    if (!s) s = walk(c, a, empty_run, pending, has_map, &live);
    hbmi_allocator_set_quiet(a, quiet);
    hbmi_torch_set_event_fn(self, NULL, NULL);
    hbmi_torch_set_addr_fn(self, NULL, NULL);
    hbmi_map_destroy(&live);
    return s;
}

hbm_status hbm_replay_torch_match(const hbm_trace *t, const char *config, const char *device_spec, hbm_torch_match *out) {
    return hbm_replay_torch_match_from(t, NULL, 0, config, device_spec, out);
}

/* The segments from before the history: in the twin at their recorded addresses, paired
 * with themselves, their live blocks known to the replay. Expandable runs go into one
 * virtual range per stream and pool (from the lowest run) when the twin has expandable
 * segments, else each becomes a cudaMalloc segment. */
static hbm_status seed(match_ctx *c, hbm_allocator *a, const hbm_torch_segment_state *segs, size_t nsegs, hbmi_map *live) {
    hbm_status s = HBM_OK;
    int es = hbm_allocator_config(a)->expandable_segments;
    uint8_t *done = hbmi_calloc(nsegs + 1, 1);
    hbmi_torch_seed_run *runs = hbmi_calloc(nsegs + 1, sizeof *runs);
    size_t nb = 1;
    for (size_t k = 0; k < nsegs; k++) nb += segs[k].nlive;
    hbmi_torch_seed_block *bl = hbmi_malloc(nb * sizeof *bl);
    if (!done || !runs || !bl) {
        hbmi_free(done), hbmi_free(runs), hbmi_free(bl);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a replay's initial state");
    }
    size_t used = 0;
    for (size_t k = 0; k < nsegs; k++)
        for (size_t j = 0; j < segs[k].nlive; j++)
            bl[used++] = (hbmi_torch_seed_block){segs[k].live[j].addr, segs[k].live[j].size, segs[k].live[j].requested};
    for (size_t k = 0, off = 0; k < nsegs && !s; off += segs[k].nlive, k++) {
        const hbm_torch_segment_state *g = &segs[k];
        if (done[k]) continue;
        if (g->expandable && es) { /* every run of this stream and pool, in address order */
            size_t nr = 0;
            uint64_t base = UINT64_MAX, end = 0;
            for (size_t q = k, o = off; q < nsegs; o += segs[q].nlive, q++) {
                const hbm_torch_segment_state *h = &segs[q];
                if (done[q] || !h->expandable || h->stream != g->stream || h->small != g->small) continue;
                done[q] = 1;
                runs[nr++] = (hbmi_torch_seed_run){h->addr, h->size, bl + o, h->nlive};
                if (h->addr < base) base = h->addr;
                if (h->addr + h->size > end) end = h->addr + h->size;
            }
            for (size_t i = 1; i < nr; i++) /* insertion sort by address: few runs */
                for (size_t j = i; j > 0 && runs[j - 1].addr > runs[j].addr; j--) {
                    hbmi_torch_seed_run x = runs[j];
                    runs[j] = runs[j - 1], runs[j - 1] = x;
                }
            s = hbmi_torch_seed_expandable(hbmi_torch_policy(a), base, g->stream, g->small, runs, nr);
            if (!s) s = hbmi_map_put(&c->segbase, base, base);
            if (!s) s = held_add(c, base, end - base);
        } else {
            done[k] = 1;
            s = hbmi_torch_seed_segment(hbmi_torch_policy(a), g->addr, g->size, g->stream, g->small, bl + off, g->nlive);
            if (!s) s = hbmi_map_put(&c->segbase, g->addr, g->addr);
            if (!s) s = held_add(c, g->addr, g->size);
        }
        if (!s) s = rec_add(c, g->addr, g->size);
    }
    if (s == HBM_ERR_OOM) { /* a device smaller than what PyTorch held when the history starts */
        uint64_t held = 0;
        char h[32];
        for (size_t k = 0; k < nsegs; k++) held += segs[k].size;
        s = hbmi_error(HBM_ERR_OOM, "the %zu segments (%s) PyTorch held when the history starts do not fit on %s", nsegs,
                       hbm_size_xla((int64_t)held, h), c->m->device);
    }
    for (size_t k = 0; k < nsegs && !s; k++)
        for (size_t j = 0; j < segs[k].nlive && !s; j++) s = hbmi_map_put(live, segs[k].live[j].addr, segs[k].live[j].addr + 1);
    hbmi_free(done);
    hbmi_free(runs);
    hbmi_free(bl);
    return s;
}

static hbm_status match_history(const hbm_trace *t, const hbm_torch_segment_state *segs, size_t nsegs,
                                const char *config, const char *device_spec, hbm_torch_match *out);

static int u64pair_cmp(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The state a mid-run history starts from, as the loader rebuilt it (events before
 * t->history_start): its cudaMalloc segments with the blocks live in them. Expandable
 * segments' mappings cannot be seeded and are left out. */
static hbm_status prelude_state(const hbm_trace *t, hbm_torch_segment_state **segs_out, size_t *nsegs,
                                hbm_torch_block_state **blk_out) {
    size_t hs = t->history_start, ns = 0, nb = 0;
    uint64_t *sg = hbmi_malloc((2 * hs + 2) * sizeof *sg), *bl = hbmi_malloc((2 * hs + 2) * sizeof *bl);
    hbm_torch_segment_state *segs = hbmi_calloc(hs + 1, sizeof *segs);
    hbm_torch_block_state *blk = hbmi_calloc(hs + 1, sizeof *blk);
    if (!sg || !bl || !segs || !blk) {
        hbmi_free(sg), hbmi_free(bl), hbmi_free(segs), hbmi_free(blk);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    for (size_t i = 0; i < hs; i++) { /* (addr, event) pairs */
        const hbm_trace_event *e = &t->events[i];
        if ((e->kind == HBM_EV_SEGMENT_ALLOC || e->kind == HBM_EV_SEGMENT_MAP) && e->addr && e->size)
            sg[2 * ns] = e->addr, sg[2 * ns++ + 1] = i;
        else if (e->kind == HBM_EV_ALLOC) bl[2 * nb] = e->addr, bl[2 * nb++ + 1] = i;
    }
    hbmi_qsort(sg, ns, 2 * sizeof *sg, u64pair_cmp);
    hbmi_qsort(bl, nb, 2 * sizeof *bl, u64pair_cmp);
    size_t k = 0, nblk = 0;
    for (size_t j = 0; j < ns; j++) {
        const hbm_trace_event *e = &t->events[sg[2 * j + 1]];
        hbm_torch_segment_state *x = &segs[j];
        *x = (hbm_torch_segment_state){.addr = e->addr, .size = e->size, .stream = e->stream,
                                       .small = e->size <= (2u << 20), .live = blk + nblk,
                                       .expandable = e->kind == HBM_EV_SEGMENT_MAP};
        while (k < nb && bl[2 * k] < e->addr) k++;
        int small_block = 0, large_block = 0;
        for (; k < nb && bl[2 * k] < e->addr + e->size; k++) {
            const hbm_trace_event *a = &t->events[bl[2 * k + 1]];
            uint64_t held = a->size > a->requested ? a->size : a->requested;
            held = (held + 511) & ~(uint64_t)511; /* PyTorch's 512-byte rounding */
            blk[nblk++] = (hbm_torch_block_state){a->addr, held, a->requested ? a->requested : a->size};
            x->nlive++;
            small_block |= held <= (1u << 20), large_block |= held > (1u << 20);
        }
        /* an expandable run's pool: its live blocks' (requests of 1 MiB or less go to the
         * small pool), else its size (20 MiB pages for the large pool) */
        if (x->expandable) x->small = small_block || (!large_block && x->size % (20u << 20));
    }
    hbmi_free(sg);
    hbmi_free(bl);
    *segs_out = segs;
    *nsegs = ns;
    *blk_out = blk;
    return HBM_OK;
}

hbm_status hbm_torch_recorded_settings(const hbm_trace *t, char *buf, size_t cap) {
    if (!t || !buf || !cap) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_recorded_settings: NULL argument");
    if (t->torch_settings[0]) { /* what the snapshot says; else what its events show */
        snprintf(buf, cap, "%s", t->torch_settings);
        return HBM_OK;
    }
    int has_map = 0;
    for (size_t i = 0; i < t->count && !has_map; i++)
        has_map = t->events[i].kind == HBM_EV_SEGMENT_MAP || t->events[i].kind == HBM_EV_SEGMENT_UNMAP;
    snprintf(buf, cap, "%s", has_map ? "expandable_segments=true" : "");
    return HBM_OK;
}

/* The length of the key of the item at p (up to '=' or the item's end). */
static size_t key_len(const char *p) { return strcspn(p, "=,"); }

/* 1 when the items of config set key (k bytes at key). */
static int sets_key(const char *config, const char *key, size_t k) {
    for (const char *p = config; p && *p;) {
        if (key_len(p) == k && !strncmp(p, key, k)) return 1;
        int depth = 0;
        while (*p && (*p != ',' || depth)) depth += *p == '[' ? 1 : *p == ']' && depth ? -1 : 0, p++;
        p += *p == ',';
    }
    return 0;
}

hbm_status hbm_torch_config_with_recorded(const hbm_trace *t, const char *config, char *buf, size_t cap) {
    if (!t || !config || !buf || !cap) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_config_with_recorded: NULL argument");
    if (strncmp(config, "allocator=torch", 15) || (config[15] && config[15] != ','))
        return hbmi_error(HBM_ERR_INVALID, "'%s' is not allocator=torch", config);
    char rec[sizeof t->torch_settings + 32];
    hbm_torch_recorded_settings(t, rec, sizeof rec);
    return hbmi_torch_config_with(rec, config, buf, cap);
}

hbm_status hbmi_torch_config_with(const char *rec, const char *config, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "allocator=torch");
    for (const char *p = rec; *p && n < cap;) {
        const char *q = p;
        int depth = 0;
        while (*q && (*q != ',' || depth)) depth += *q == '[' ? 1 : *q == ']' && depth ? -1 : 0, q++;
        if (!sets_key(config + 15 + (config[15] == ','), p, key_len(p)))
            n += (size_t)snprintf(buf + n, cap - n, ",%.*s", (int)(q - p), p);
        p = q + (*q == ',');
    }
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "%s", config + 15);
    if (n >= cap) return hbmi_error(HBM_ERR_INVALID, "'%s' with the recorded settings is too long", config);
    return HBM_OK;
}

/* The twin's configuration: config whole when it names an allocator (allocator=torch under
 * the recorded settings), else allocator=torch under the recorded settings with config's
 * items. */
static void twin_config(const char *rec, const char *config, char *buf, size_t cap) {
    char c[300];
    if (!config || strncmp(config, "allocator=", 10)) {
        if (snprintf(c, sizeof c, "allocator=torch%s%s", config && *config ? "," : "", config ? config : "") >= (int)sizeof c)
            c[sizeof c - 1] = 0;
        config = c;
    }
    int torch = !strncmp(config, "allocator=torch", 15) && (!config[15] || config[15] == ',');
    if ((!torch || hbmi_torch_config_with(rec, config, buf, cap)) && snprintf(buf, cap, "%s", config) >= (int)cap)
        buf[cap - 1] = 0;
}

static hbm_status twin_match(const hbm_trace *t, const char *recorded, const hbm_torch_segment_state *segs, size_t nsegs,
                             const char *config, const char *device_spec, hbm_torch_match *out);

hbm_status hbm_replay_torch_match_from(const hbm_trace *t, const hbm_torch_segment_state *segs, size_t nsegs,
                                       const char *config, const char *device_spec, hbm_torch_match *out) {
    return twin_match(t, NULL, segs, nsegs, config, device_spec, out);
}

hbm_status hbmi_twin_match(const hbm_trace *t, const char *recorded, const char *config, const char *device_spec,
                           hbm_torch_match *out) {
    return twin_match(t, recorded, NULL, 0, config, device_spec, out);
}

/* recorded: hbm_torch_recorded_settings of t (NULL: found here, a walk of the events when
 * the snapshot does not say them) */
static hbm_status twin_match(const hbm_trace *t, const char *recorded, const hbm_torch_segment_state *segs, size_t nsegs,
                             const char *config, const char *device_spec, hbm_torch_match *out) {
    if (!t || !out || (nsegs && !segs)) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_torch_match: NULL argument");
    char full[256], dev[96], rec[sizeof t->torch_settings + 32];
    if (!recorded) hbm_torch_recorded_settings(t, rec, sizeof rec), recorded = rec;
    twin_config(recorded, config, full, sizeof full);
    if (device_spec) snprintf(dev, sizeof dev, "%s", device_spec);
    else hbm_replay_default_device(t, dev, sizeof dev, NULL);
    config = full;
    device_spec = dev;
    if (!t->history_start) return match_history(t, segs, nsegs, config, device_spec, out);
    /* a history that starts mid-run: the twin starts from the state the loader rebuilt (or
     * the one given) and is compared on the history's own events */
    hbm_trace view = *t;
    view.events += t->history_start;
    view.count -= t->history_start;
    view.history_start = 0;
    view.others = NULL;
    view.n_others = 0;
    if (segs || nsegs) return match_history(&view, segs, nsegs, config, device_spec, out);
    hbm_torch_segment_state *built = NULL;
    hbm_torch_block_state *blk = NULL;
    size_t nb = 0;
    hbm_status s = prelude_state(t, &built, &nb, &blk);
    if (!s) s = match_history(&view, built, nb, config, device_spec, out);
    hbmi_free(built);
    hbmi_free(blk);
    return s;
}

static hbm_status match_history(const hbm_trace *t, const hbm_torch_segment_state *segs, size_t nsegs,
                                const char *config, const char *device_spec, hbm_torch_match *out) {
    memset(out, 0, sizeof *out);
    out->first_segment_diff = out->first_alloc_diff = -1;
    int has_map;
    uint64_t start = 0;
    for (size_t k = 0; k < nsegs; k++) start += segs[k].size;
    uint8_t *empty_run = scan_history(t, start, &out->peak_reserved_recorded, &has_map);
    snprintf(out->device, sizeof out->device, "%s", device_spec);
    snprintf(out->config, sizeof out->config, "%s", config);
    hbm_device *dev = NULL;
    hbm_allocator *a = NULL;
    size_t *pending = NULL;
    match_ctx c = {.t = t, .m = out, .va_next = 0x300000000000ull};
    hbmi_map_init(&c.segbase);
    hbmi_twin_segs_init(&c.rec);
    hbm_config cfg;
    hbm_status s = hbm_device_open(out->device, &dev);
    if (!s) s = hbm_config_resolve(out->config, &cfg);
    if (!s) s = hbmi_replay_allocator_open(dev, &cfg, &a);
    if (!s && !hbmi_torch_is(a))
        s = hbmi_error(HBM_ERR_INVALID, "'%s' does not run the torch policy (trace= wraps it?)", out->config);
    if (!s && !empty_run) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory for a replay of %zu events", t->count);
    if (!s && !(pending = hbmi_malloc((t->count + 1) * sizeof *pending)))
        s = hbmi_error(HBM_ERR_NOMEM, "out of host memory for a replay of %zu events", t->count);
    if (!s) s = run(&c, a, empty_run, pending, has_map, segs, nsegs);
    char why[256] = "";
    if (s) snprintf(why, sizeof why, "%s", hbm_last_error()); /* the cleanup below may set another */
    hbmi_free(pending);
    hbmi_free(empty_run);
    hbmi_free(c.tw);
    hbmi_free(c.held);
    hbmi_twin_segs_destroy(&c.rec);
    hbmi_map_destroy(&c.segbase);
    hbm_allocator_close(a);
    hbm_device_close(dev);
    return s ? hbmi_error(s, "%s", why) : s;
}

hbm_status hbm_torch_recorded_get(const hbm_trace *t, hbm_torch_recorded *out) {
    uint64_t calls;
    return hbmi_torch_recorded_scan(t, out, &calls);
}

hbm_status hbmi_torch_recorded_scan(const hbm_trace *t, hbm_torch_recorded *out, uint64_t *calls) {
    if (!t || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_recorded_get: NULL argument");
    memset(out, 0, sizeof *out);
    *calls = 0;
    out->peak_event = out->oom_event = out->peak_in_use_event = -1;
    hbmi_map live; /* address -> requested bytes (what a block holds, as memory_viz counts it) */
    hbmi_map_init(&live);
    uint64_t reserved = 0, requested = 0, in_use = 0, segments = 0, v;
    hbm_status s = HBM_OK;
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        switch (e->kind) {
        case HBM_EV_ALLOC: {
            uint64_t req = e->requested ? e->requested : e->size; /* as memory_viz counts them */
            if (!(s = hbmi_map_put(&live, e->addr, req))) {
                requested += req;
                in_use += req;
                if (in_use > out->peak_in_use) out->peak_in_use = in_use, out->peak_in_use_event = (int64_t)i;
            }
            break;
        }
        case HBM_EV_FREE:
            if (hbmi_map_del(&live, e->addr, &v)) requested -= v, in_use -= v;
            break;
        case HBM_EV_SEGMENT_ALLOC: segments++; /* fall through */
        case HBM_EV_SEGMENT_MAP:
            reserved += e->size;
            ++*calls;
            break;
        case HBM_EV_SEGMENT_FREE: segments -= segments > 0; /* fall through */
        case HBM_EV_SEGMENT_UNMAP:
            reserved -= reserved >= e->size ? e->size : reserved;
            ++*calls;
            break;
        case HBM_EV_OOM:
            if (out->oom_event < 0) out->oom_event = (int64_t)i, out->oom_bytes = e->requested;
            break;
        default: break;
        }
        if (reserved > out->peak_reserved) {
            out->peak_reserved = reserved;
            out->peak_event = (int64_t)i;
            out->requested_at_peak = requested;
            out->segments_at_peak = segments;
        } else if (e->kind == HBM_EV_ALLOC && (int64_t)i == out->peak_event + 1) {
            out->peak_event = (int64_t)i; /* PyTorch records a new segment just before its first alloc */
            out->requested_at_peak = requested;
        }
    }
    hbmi_map_destroy(&live);
    out->unallocated_at_peak = out->peak_reserved > out->requested_at_peak ? out->peak_reserved - out->requested_at_peak : 0;
    return s;
}
