/* test_replay_torch_midrun.c - allocator=torch on the shared snapshots whose history starts
 * mid-run (PyTorch keeps a ring buffer of events). The allocator's state at the history's
 * start is rebuilt here from the snapshot's own "segments" (the state at its end) and the
 * history, then the twin replays from it (hbm_replay_torch_match_from):
 *   - segments at the start: the device's segments at the end that no segment_alloc of
 *     the history names, and the segments the history frees without allocating them;
 *   - live blocks at the start: blocks active at the end that no alloc of the history
 *     names (their size as PyTorch held it), and blocks the history frees without
 *     allocating them (size: the freed request rounded up to 512 bytes), each in the
 *     segment that holds it.
 * This rebuild, written here from the pickle and the history's own events independently of
 * the loader (which rebuilds the same state itself: test_replay_torch.c replays from that
 * one), checks the twin from a given state; an expandable segment's mapped runs seed one
 * virtual range per stream and pool. Also constructor_sun's cuda:1 history (its OOM). Skips without
 * ../shared/data. */
#include <stdlib.h>

#include "core/internal.h"
#include "test.h"
#include "trace/import/pyval.h"

#define SNAP_DIR HBM_SHARED_DATA "/snapshots/"

typedef struct state {
    hbm_torch_segment_state *seg;
    size_t nseg, capseg;
    hbm_torch_block_state *blk; /* each segment's live blocks, contiguous, in address order */
    size_t nblk, capblk;
    size_t *first;              /* index of each segment's first block in blk */
} state;

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

static int add_segment(state *st, uint64_t addr, uint64_t size, uint64_t stream, int small, int expandable) {
    if (!grow((void **)&st->seg, &st->capseg, st->nseg + 1, sizeof *st->seg)) return 0;
    size_t capf = st->capseg; /* first[] follows seg[]'s capacity */
    size_t *f = realloc(st->first, capf * sizeof *f);
    if (!f) return 0;
    st->first = f;
    st->first[st->nseg] = st->nblk;
    st->seg[st->nseg++] =
        (hbm_torch_segment_state){.addr = addr, .size = size, .stream = stream, .small = small, .expandable = expandable};
    return 1;
}

static int add_block(state *st, uint64_t addr, uint64_t size, uint64_t requested) {
    if (!grow((void **)&st->blk, &st->capblk, st->nblk + 1, sizeof *st->blk)) return 0;
    st->blk[st->nblk++] = (hbm_torch_block_state){addr, size, requested};
    st->seg[st->nseg - 1].nlive++;
    return 1;
}

static int cmp_addr(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The state at the start of t's history, from the snapshot's segments (device dev). */
static int rebuild(const hbm_trace *t, const hbmi_pv *segs, int64_t dev, state *st) {
    hbmi_map allocated, seg_allocated, freed_before; /* freed_before: addr -> size */
    hbmi_map_init(&allocated);
    hbmi_map_init(&seg_allocated);
    hbmi_map_init(&freed_before);
    int ok = 1;
    /* the history's own events: not the state the loader rebuilt before it (independent) */
    for (size_t i = t->history_start; i < t->count && ok; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind == HBM_EV_ALLOC) ok = !hbmi_map_put(&allocated, e->addr, 1);
        else if (e->kind == HBM_EV_SEGMENT_ALLOC) ok = !hbmi_map_put(&seg_allocated, e->addr, 1);
        else if (e->kind == HBM_EV_FREE && !hbmi_map_get(&allocated, e->addr, NULL))
            ok = !hbmi_map_put(&freed_before, e->addr, e->size < 512 ? 512 : (e->size + 511) / 512 * 512);
    }
    /* segments alive at the end and not allocated by the history */
    for (size_t k = 0; ok && segs && segs->type == PV_LIST && k < segs->n; k++) {
        const hbmi_pv *g = segs->items[k];
        uint64_t base = (uint64_t)hbmi_pv_int(g, "address", 0), at = base;
        if (hbmi_pv_int(g, "device", 0) != dev || hbmi_map_get(&seg_allocated, base, NULL)) continue;
        const char *type = hbmi_pv_str(g, "segment_type");
        ok = add_segment(st, base, (uint64_t)hbmi_pv_int(g, "total_size", 0), (uint64_t)hbmi_pv_int(g, "stream", 0),
                         type && !strcmp(type, "small"), hbmi_pv_int(g, "is_expandable", 0) != 0);
        const hbmi_pv *bl = hbmi_pv_get(g, "blocks");
        for (size_t j = 0; ok && bl && bl->type == PV_LIST && j < bl->n; j++) {
            const hbmi_pv *b = bl->items[j];
            uint64_t size = (uint64_t)hbmi_pv_int(b, "size", 0), addr = (uint64_t)hbmi_pv_int(b, "address", (int64_t)at), v;
            const char *state_s = hbmi_pv_str(b, "state");
            at = addr + size;
            if (state_s && !strncmp(state_s, "active", 6) && !hbmi_map_get(&allocated, addr, NULL))
                ok = add_block(st, addr, size, (uint64_t)hbmi_pv_int(b, "requested_size", (int64_t)size));
            else if (hbmi_map_del(&freed_before, addr, &v))
                ok = add_block(st, addr, v, v);
        }
    }
    /* segments the history frees without allocating them */
    hbmi_map seen;
    hbmi_map_init(&seen);
    for (size_t i = t->history_start; i < t->count && ok; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind == HBM_EV_SEGMENT_ALLOC) ok = !hbmi_map_put(&seen, e->addr, 1);
        if (!ok || e->kind != HBM_EV_SEGMENT_FREE || hbmi_map_get(&seen, e->addr, NULL)) continue;
        ok = !hbmi_map_put(&seen, e->addr, 1) && add_segment(st, e->addr, e->size, e->stream, e->size == (2u << 20), 0);
        /* the blocks freed inside it before, in address order */
        uint64_t *in = NULL;
        size_t nin = 0, capin = 0;
        for (size_t k = 0; ok && k < freed_before.cap; k++) {
            uint64_t a = freed_before.s[k].key - 1;
            if (!freed_before.s[k].key || a < e->addr || a >= e->addr + e->size) continue;
            ok = grow((void **)&in, &capin, 2 * (nin + 1), sizeof *in);
            if (ok) in[2 * nin] = a, in[2 * nin + 1] = freed_before.s[k].val, nin++;
        }
        if (ok) hbmi_qsort(in, nin, 2 * sizeof *in, cmp_addr);
        for (size_t k = 0; ok && k < nin; k++) {
            ok = add_block(st, in[2 * k], in[2 * k + 1], in[2 * k + 1]);
            hbmi_map_del(&freed_before, in[2 * k], NULL);
        }
        free(in);
    }
    for (size_t k = 0; k < st->nseg; k++) st->seg[k].live = st->blk + st->first[k];
    hbmi_map_destroy(&seen);
    hbmi_map_destroy(&allocated);
    hbmi_map_destroy(&seg_allocated);
    hbmi_map_destroy(&freed_before);
    return ok;
}

static int ran;

/* The bytes of a shared snapshot (counted in ran), or NULL when it is absent. */
static char *read_snapshot(const char *path, size_t *len) {
    char *data;
    if (hbmi_read_file(path, &data, len)) {
        fprintf(stderr, "  (%s absent)\n", path);
        return NULL;
    }
    ran++;
    return data;
}

/* empty_cache: the empty_cache() calls the twin must infer (a run of segment_frees whose
 * stacks are not the malloc's that follows it: test_replay_torch_empty.c) */
static void check_midrun(const char *name, uint64_t empty_cache) {
    char path[512];
    snprintf(path, sizeof path, SNAP_DIR "%s", name);
    size_t len;
    char *data = read_snapshot(path, &len);
    if (!data) return;
    hbm_trace *t = NULL;
    hbmi_pvpool pool = {0};
    hbmi_pv *root = NULL;
    state st = {0};
    hbm_status s = hbm_trace_load(path, &t);
    if (!s) s = hbmi_pickle_parse((const unsigned char *)data, len, path, &pool, &root);
    hbmi_free(data);
    CHECK_OK(s);
    int64_t dev = strncmp(t->device, "cuda:", 5) ? 0 : atoll(t->device + 5);
    int ok = rebuild(t, hbmi_pv_get(root, "segments"), dev, &st);
    hbm_torch_match m;
    s = ok ? hbm_replay_torch_match_from(t, st.seg, st.nseg, NULL, NULL, &m) : HBM_ERR_NOMEM;
    hbmi_pvpool_free(&pool);
    hbm_trace_free(t);
    free(st.seg);
    free(st.blk);
    free(st.first);
    CHECK_OK(s);
    fprintf(stderr, "  %s (%zu segments, %zu live blocks from before the history): ", name, st.nseg, st.nblk);
    hbm_torch_match_write(&m, stderr, 0);
    fprintf(stderr, "; twin segment events %" PRIu64 ", empty_cache calls %" PRIu64 "\n", m.segments_twin,
            m.empty_cache_calls);
    CHECK(m.allocs > 0);
    CHECK_EQ_U64(m.segments_same, m.segments_recorded);
    CHECK_EQ_U64(m.segments_twin, m.segments_recorded);
    CHECK_EQ_U64(m.allocs_same, m.allocs);
    CHECK_EQ_U64(m.allocs_before_history, 0);
    CHECK_EQ_U64(m.empty_cache_calls, empty_cache);
}

/* a small segment from before the history (see test_replay_torch.c); its run of 17
 * segment_frees is malloc's retry (each carries the stack of the 6.85 GiB segment_alloc
 * after it), not empty_cache() */
static void test_hugepanda_peso(void) { check_midrun("hugepanda_peso.pickle", 0); }
static void test_ftcourse(void) { check_midrun("ftcourse.pickle", 0); }
static void test_magma27(void) { check_midrun("magma27.pickle", 0); }
/* begins with an empty_cache() call: a run of segment_frees of segments from before the
 * history (emptyCache's stack) */
static void test_kkaitlyn_ctx256_fullstep(void) { check_midrun("kkaitlyn_ctx256_fullstep.pickle", 1); }
/* recorded inside two expandable segments mapped before the history (its allocator_settings
 * say expandable_segments): their mapped runs, with their live blocks, seed the twin */
static void test_bolongcheng_xl_fwd_fp32(void) { check_midrun("bolongcheng_xl_fwd_fp32.pickle", 0); }

/* The history of device dev as hbm's importer reads cuda:0's (actions to events; an oom's
 * addr is the device's free memory: returned in *dev_free with the reserved bytes then). */
static hbm_trace *device_history(const hbmi_pv *root, size_t dev, uint64_t *reserved_at_oom, uint64_t *dev_free) {
    static const struct {
        const char *name;
        int kind;
    } acts[] = {{"alloc", HBM_EV_ALLOC},           {"free_completed", HBM_EV_FREE}, {"free_requested", HBM_EV_FREE_REQUESTED},
                {"segment_alloc", HBM_EV_SEGMENT_ALLOC}, {"segment_free", HBM_EV_SEGMENT_FREE},
                {"segment_map", HBM_EV_SEGMENT_MAP},     {"segment_unmap", HBM_EV_SEGMENT_UNMAP}, {"oom", HBM_EV_OOM}};
    const hbmi_pv *traces = hbmi_pv_get(root, "device_traces");
    if (!traces || traces->type != PV_LIST || dev >= traces->n) return NULL;
    const hbmi_pv *l = traces->items[dev];
    hbm_trace *t;
    if (hbm_trace_new(&t)) return NULL;
    snprintf(t->source, sizeof t->source, "torch");
    uint64_t reserved = 0;
    for (size_t i = 0; i < l->n; i++) {
        const char *a = hbmi_pv_str(l->items[i], "action");
        int kind = 0;
        for (size_t j = 0; a && j < sizeof acts / sizeof acts[0]; j++)
            if (!strcmp(a, acts[j].name)) kind = acts[j].kind;
        if (!kind) continue;
        hbm_trace_event e = {.kind = (uint8_t)kind, .addr = (uint64_t)hbmi_pv_int(l->items[i], "addr", 0),
                             .size = (uint64_t)hbmi_pv_int(l->items[i], "size", 0),
                             .stream = (uint64_t)hbmi_pv_int(l->items[i], "stream", 0), .time_ns = i};
        if (kind == HBM_EV_ALLOC || kind == HBM_EV_OOM) e.requested = e.size;
        if (kind == HBM_EV_SEGMENT_ALLOC || kind == HBM_EV_SEGMENT_MAP) reserved += e.size;
        if (kind == HBM_EV_SEGMENT_FREE || kind == HBM_EV_SEGMENT_UNMAP) reserved -= e.size;
        if (kind == HBM_EV_OOM) *reserved_at_oom = reserved, *dev_free = e.addr, e.addr = 0, e.size = 0;
        if (hbm_trace_add(t, &e)) {
            hbm_trace_free(t);
            return NULL;
        }
    }
    return t;
}

/* constructor_sun's cuda:1 (expandable segments, from its start): an OOM asking 4.94 GiB
 * with 78 GiB in use. On a device of the bytes PyTorch had reserved then plus the free
 * memory CUDA reported, the twin makes every recorded decision and fails where PyTorch
 * did; no setting avoids it, the program needing more than the device at that moment. */
static void test_constructor_sun_cuda1(void) {
    const char *path = SNAP_DIR "constructor_sun.pickle";
    size_t len;
    char *data = read_snapshot(path, &len);
    if (!data) return;
    hbmi_pvpool pool = {0};
    hbmi_pv *root = NULL;
    hbm_status s = hbmi_pickle_parse((const unsigned char *)data, len, path, &pool, &root);
    hbmi_free(data);
    CHECK_OK(s);
    uint64_t reserved = 0, dev_free = 0;
    hbm_trace *t = device_history(root, 1, &reserved, &dev_free);
    hbmi_pvpool_free(&pool);
    CHECK(t);
    char spec[64];
    snprintf(spec, sizeof spec, "sim:%" PRIu64, reserved + dev_free);
    hbm_torch_match m;
    hbm_torch_suggestion sg;
    s = hbm_replay_torch_match(t, NULL, spec, &m);
    if (!s) s = hbm_torch_suggest(t, spec, &sg);
    hbm_trace_free(t);
    CHECK_OK(s);
    fprintf(stderr, "  constructor_sun cuda:1 on %s (%s): ", spec, m.config);
    hbm_torch_match_write(&m, stderr, 0);
    fprintf(stderr, "; OOMs %" PRIu64 " recorded, %" PRIu64 " by the twin; suggest: over by %" PRIu64 " bytes\n",
            m.ooms_recorded, m.ooms_twin, sg.over_by);
    CHECK_EQ_U64(m.ooms_recorded, 1);
    CHECK_EQ_U64(m.ooms_twin, 1);
    CHECK(m.segments_recorded > 0 && m.allocs > 0);
    CHECK_EQ_U64(m.segments_same, m.segments_recorded);
    CHECK_EQ_U64(m.segments_twin, m.segments_recorded);
    CHECK_EQ_U64(m.allocs_same, m.allocs);
    CHECK(sg.best < 0 && sg.over_by > 0);
}

int main(void) {
    RUN(test_constructor_sun_cuda1);
    RUN(test_hugepanda_peso);
    RUN(test_ftcourse);
    RUN(test_magma27);
    RUN(test_kkaitlyn_ctx256_fullstep);
    RUN(test_bolongcheng_xl_fwd_fp32);
    if (!ran) TEST_SKIP("the shared snapshots are absent (%s)", SNAP_DIR);
    return test_done();
}
