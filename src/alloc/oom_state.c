/* oom_state.c - what the allocator keeps of an out-of-memory failure, taken at the moment
 * it happens (under the handle's lock): the largest live blocks with their tags and a
 * 100-cell occupancy map of the reserved regions laid end to end, like BFC's. The report
 * (src/alloc/oom_report.c) reads it; nothing here formats text. */
#include <math.h>
#include <string.h>

#include "alloc/alloc_internal.h"

#define MAP_WIDTH HBMI_OOM_MAP_WIDTH

typedef hbmi_oom_live live_buf;

typedef struct region {
    uint64_t addr, size;
    uint64_t base; /* where the region starts when regions are laid end to end */
} region;

typedef struct collect {
    hbm_allocator *a;
    live_buf *live;
    size_t nlive, cap;
    region *regs;
    size_t nregs, rcap;
    int failed;
} collect;

static int collect_fn(void *user, const hbm_block *b, uint32_t tag_id) {
    collect *c = user;
    if (b->kind == HBM_BLOCK_REGION) {
        if (hbmi_grow((void **)&c->regs, &c->rcap, c->nregs + 1, sizeof *c->regs)) return c->failed = 1;
        c->regs[c->nregs++] = (region){b->addr, b->size, 0};
        return 0;
    }
    if (b->kind != HBM_BLOCK_LIVE) return 0;
    if (hbmi_grow((void **)&c->live, &c->cap, c->nlive + 1, sizeof *c->live)) return c->failed = 1;
    live_buf *l = &c->live[c->nlive++];
    const hbm_tag *t = hbmi_tagtab_get(c->a->tags, tag_id);
    *l = (live_buf){.addr = b->addr, .size = b->size, .requested = b->requested, .seq = b->seq, .has_tag = t != NULL};
    if (t) l->tag = *t;
    return 0;
}

static int region_cmp(const void *a, const void *b) {
    const region *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Distribute a live span [lo, hi) of the concatenated reserved space over the cells. */
static void map_add(uint64_t *cells, uint64_t total, uint64_t lo, uint64_t hi) {
    if (!total) return;
    for (uint64_t pos = lo; pos < hi;) {
        uint64_t cell = (uint64_t)((long double)pos * MAP_WIDTH / total);
        if (cell >= MAP_WIDTH) cell = MAP_WIDTH - 1;
        uint64_t cell_end = (uint64_t)ceill((long double)(cell + 1) * total / MAP_WIDTH);
        if (cell_end <= pos) cell_end = pos + 1;
        uint64_t end = hi < cell_end ? hi : cell_end;
        cells[cell] += end - pos;
        pos = end;
    }
}

static int by_size_desc(const void *a, const void *b) {
    const live_buf *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

void hbmi_oom_record_clear(hbmi_oom_record *r) {
    hbmi_free(r->top);
    r->top = NULL;
    r->ntop = r->nlive = 0;
    r->span = 0;
    r->map[0] = 0;
}

void hbmi_oom_snapshot(hbm_allocator *a) {
    hbmi_oom_record *r = &a->oom;
    hbmi_oom_record_clear(r);
    collect c;
    memset(&c, 0, sizeof c);
    c.a = a;
    if (!a->ops->walk || a->ops->walk(a->self, collect_fn, &c) || c.failed) {
        hbmi_free(c.live);
        hbmi_free(c.regs);
        return; /* the report then has the numbers only */
    }
    /* The occupancy map lays the regions end to end in address order, like BFC's. */
    hbmi_qsort(c.regs, c.nregs, sizeof *c.regs, region_cmp);
    uint64_t span = 0, cells[MAP_WIDTH] = {0};
    for (size_t i = 0; i < c.nregs; i++) {
        c.regs[i].base = span;
        span += c.regs[i].size;
    }
    for (size_t i = 0; i < c.nlive; i++) {
        size_t lo = 0, hi = c.nregs; /* the region holding the block */
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (c.regs[mid].addr <= c.live[i].addr) lo = mid;
            else hi = mid;
        }
        if (!c.nregs || c.live[i].addr < c.regs[lo].addr) continue;
        uint64_t off = c.regs[lo].base + (c.live[i].addr - c.regs[lo].addr);
        map_add(cells, span, off, off + c.live[i].size);
    }
    for (int i = 0; i < MAP_WIDTH; i++) {
        uint64_t lo = (uint64_t)ceill((long double)i * span / MAP_WIDTH);
        uint64_t hi = (uint64_t)ceill((long double)(i + 1) * span / MAP_WIDTH);
        uint64_t w = hi > lo ? hi - lo : 1;
        r->map[i] = cells[i] == 0 ? '.' : cells[i] >= w ? '#' : '+';
    }
    r->map[MAP_WIDTH] = 0;
    r->span = span;
    hbmi_qsort(c.live, c.nlive, sizeof *c.live, by_size_desc);
    /* keep the largest: the report lists report_top and the diagnosis sums the largest
     * until they cover what must go, so keep enough for both */
    r->nlive = c.nlive;
    r->ntop = c.nlive < 1000 ? c.nlive : 1000;
    r->top = c.live;
    if (r->ntop < c.nlive) {
        live_buf *shrunk = hbmi_realloc(c.live, r->ntop * sizeof *shrunk + 1);
        if (shrunk) r->top = shrunk;
    }
    hbmi_free(c.regs);
}
