/* test_replay_torch_empty.c - the twin tells a program's torch.cuda.empty_cache() from the
 * frees of PyTorch's own malloc in a history that starts mid-run, as PyTorch records them
 * (c10/cuda/CUDACachingAllocator.cpp): every segment_free carries the stack its caller
 * gathered; malloc's retry after a failed cudaMalloc (release_cached_blocks(context)) frees
 * with malloc's stack, the one its segment_alloc then carries; emptyCache() frees with its
 * own (context="all"), or, recording context="alloc", each segment with the stack of its
 * own cudaMalloc. A training loop calling empty_cache() once per step frees every cached
 * segment and the next step's first allocation cudaMallocs a new one at once: the run of
 * frees is followed by a segment_alloc, and is still empty_cache(). Hand-written histories,
 * each after a state from before the history (a segment with a live block); needs no
 * shared data. */
#include "hbm/replay.h"
#include "test.h"

static const uint64_t MiB = 1ull << 20, BASE = 0x7f0000000000ull;
static hbm_status err; /* the first failure of a helper below (each test checks it) */

static void keep(hbm_status s) {
    if (!err) err = s;
}

/* A stack of PyTorch frames (innermost first): its backtrace id in t. */
static uint32_t stack(hbm_trace *t, const char *inner, const char *outer, int line) {
    hbm_tag a = {.op_name = inner}, b = {.op_name = outer, .source_file = "train.py", .source_line = line};
    uint32_t ia = 0, ib = 0, bt = 0;
    keep(hbm_trace_intern(t, &a, &ia));
    keep(hbm_trace_intern(t, &b, &ib));
    uint64_t fr[2] = {ia, ib};
    keep(hbm_trace_add_backtrace(t, fr, 2, &bt));
    return bt;
}

static void add(hbm_trace *t, int kind, uint64_t addr, uint64_t size, uint32_t bt) {
    hbm_trace_event e = {.kind = (uint8_t)kind, .addr = addr, .size = size, .backtrace = bt,
                         .time_ns = t->count};
    if (kind == HBM_EV_ALLOC) e.requested = size;
    if (kind == HBM_EV_OOM) e.requested = size, e.addr = 0, e.size = 0;
    keep(hbm_trace_add(t, &e));
}

/* The state before the history: a 20 MiB segment with a 4 MiB block live at its base (the
 * weights), as the loader rebuilds it from a snapshot's segments. */
static hbm_trace *midrun_trace(void) {
    hbm_trace *t;
    err = HBM_OK;
    if ((err = hbm_trace_new(&t))) return NULL;
    snprintf(t->source, sizeof t->source, "torch");
    t->stacks = 1;
    add(t, HBM_EV_SEGMENT_ALLOC, BASE, 20 * MiB, 0);
    add(t, HBM_EV_ALLOC, BASE, 4 * MiB, 0);
    t->history_start = t->count;
    t->reserved_before_bytes = 20 * MiB;
    t->live_before_bytes = 4 * MiB;
    t->live_before_blocks = 1;
    return t;
}

static hbm_torch_match match(const hbm_trace *t, const char *device) {
    hbm_torch_match m = {0};
    keep(hbm_replay_torch_match(t, NULL, device, &m));
    fprintf(stderr, "  ");
    hbm_torch_match_write(&m, stderr, 0);
    fprintf(stderr, "; twin segment events %" PRIu64 ", empty_cache calls %" PRIu64 ", first diffs %" PRId64 " / %" PRId64 "\n",
            m.segments_twin, m.empty_cache_calls, m.first_segment_diff, m.first_alloc_diff);
    return m;
}

/* Four steps, each: a 64 MiB activation in a new segment (PyTorch's cudaMalloc hands out
 * another address each time), freed; then empty_cache() gives the segment back. With
 * context="all" (ctx_all) the frees carry emptyCache's stack; else each its segment's. */
static void steps_with_empty_cache(int ctx_all) {
    hbm_trace *t = midrun_trace();
    CHECK_OK(err);
    uint32_t empty = stack(t, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache()",
                           "empty_cache", 40);
    uint32_t mal = stack(t, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "forward", 12);
    for (int k = 0; k < 4; k++) {
        uint64_t seg = BASE + (uint64_t)(k + 1) * 128 * MiB;
        add(t, HBM_EV_SEGMENT_ALLOC, seg, 64 * MiB, mal);
        add(t, HBM_EV_ALLOC, seg, 64 * MiB, mal);
        add(t, HBM_EV_FREE, seg, 64 * MiB, 0);
        add(t, HBM_EV_SEGMENT_FREE, seg, 64 * MiB, ctx_all ? empty : mal);
        /* context="alloc": the segment's own stack is malloc's of an earlier step, not the
         * next step's (another line of the program) */
        if (!ctx_all) mal = stack(t, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
                                  "forward", 13 + k);
    }
    hbm_torch_match m = match(t, "sim:1GiB");
    hbm_trace_free(t);
    CHECK_OK(err);
    /* four calls; the first three end in the next step's segment_alloc */
    CHECK_EQ_U64(m.empty_cache_calls, 4);
    CHECK_EQ_U64(m.segments_recorded, 8);
    CHECK_EQ_U64(m.segments_same, 8);
    CHECK_EQ_U64(m.segments_twin, 8);
    CHECK_EQ_U64(m.allocs, 4);
    CHECK_EQ_U64(m.allocs_same, 4);
    CHECK_EQ_U64(m.first_segment_diff, (uint64_t)-1);
    CHECK_EQ_U64(m.first_alloc_diff, (uint64_t)-1);
}

static void test_empty_cache_context_all(void) { steps_with_empty_cache(1); }
static void test_empty_cache_context_alloc(void) { steps_with_empty_cache(0); }

/* malloc's own frees: on a 100 MiB device (20 MiB reserved before the history), a 40 MiB
 * block is freed and cached; a 50 MiB request finds no block, its cudaMalloc fails (60 + 50
 * > 100), release_cached_blocks gives the cached segment back and the retry succeeds: the
 * frees carry malloc's stack, as its segment_alloc does. Not empty_cache(): the twin fails
 * and frees the same itself. A real empty_cache() follows (emptyCache's stack). */
static void test_retry_is_not_empty_cache(void) {
    hbm_trace *t = midrun_trace();
    CHECK_OK(err);
    uint32_t m1 = stack(t, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "forward", 20);
    uint32_t m2 = stack(t, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "forward", 21);
    uint32_t empty = stack(t, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache()",
                           "empty_cache", 30);
    add(t, HBM_EV_SEGMENT_ALLOC, BASE + 20 * MiB, 40 * MiB, m1);
    add(t, HBM_EV_ALLOC, BASE + 20 * MiB, 40 * MiB, m1);
    add(t, HBM_EV_FREE, BASE + 20 * MiB, 40 * MiB, 0);
    add(t, HBM_EV_SEGMENT_FREE, BASE + 20 * MiB, 40 * MiB, m2); /* malloc's retry */
    add(t, HBM_EV_SEGMENT_ALLOC, BASE + 20 * MiB, 50 * MiB, m2);
    add(t, HBM_EV_ALLOC, BASE + 20 * MiB, 50 * MiB, m2);
    add(t, HBM_EV_FREE, BASE + 20 * MiB, 50 * MiB, 0);
    add(t, HBM_EV_SEGMENT_FREE, BASE + 20 * MiB, 50 * MiB, empty); /* empty_cache() */
    add(t, HBM_EV_SEGMENT_ALLOC, BASE + 20 * MiB, 60 * MiB, m1);
    add(t, HBM_EV_ALLOC, BASE + 20 * MiB, 60 * MiB, m1);
    hbm_torch_match m = match(t, "sim:100MiB");
    hbm_trace_free(t);
    CHECK_OK(err);
    CHECK_EQ_U64(m.empty_cache_calls, 1);
    CHECK_EQ_U64(m.segments_recorded, 5);
    CHECK_EQ_U64(m.segments_same, 5);
    CHECK_EQ_U64(m.segments_twin, 5);
    CHECK_EQ_U64(m.allocs_same, 3);
    CHECK_EQ_U64(m.ooms_twin, 0);
}

/* Without stacks (a snapshot recorded with context="state", or a history made without
 * them) a run ended by a segment_alloc is malloc's when its cudaMalloc could have failed:
 * here 60 MiB reserved + 50 MiB is above the history's peak (70 MiB). */
static void test_no_stacks(void) {
    hbm_trace *t = midrun_trace();
    CHECK_OK(err);
    t->stacks = 0;
    add(t, HBM_EV_SEGMENT_ALLOC, BASE + 20 * MiB, 40 * MiB, 0);
    add(t, HBM_EV_ALLOC, BASE + 20 * MiB, 40 * MiB, 0);
    add(t, HBM_EV_FREE, BASE + 20 * MiB, 40 * MiB, 0);
    add(t, HBM_EV_SEGMENT_FREE, BASE + 20 * MiB, 40 * MiB, 0);
    add(t, HBM_EV_SEGMENT_ALLOC, BASE + 20 * MiB, 50 * MiB, 0);
    add(t, HBM_EV_ALLOC, BASE + 20 * MiB, 50 * MiB, 0);
    hbm_torch_match m = match(t, "sim:100MiB");
    hbm_trace_free(t);
    CHECK_OK(err);
    CHECK_EQ_U64(m.empty_cache_calls, 0);
    CHECK_EQ_U64(m.segments_same, 3);
    CHECK_EQ_U64(m.allocs_same, 2);
}

/* The table's rows and --suggest's candidates replay the program's empty_cache() too.
 * On 100 MiB: A = 60 MiB freed, empty_cache(), B = 30 MiB, C = 70 MiB. Kept in the cache,
 * A's segment would take B (split: PyTorch cannot give it back) and C would not fit
 * (60 + 70 MiB); emptied, B and C take 30 + 70 MiB, as PyTorch did. */
static void test_rows_replay_empty_cache(void) {
    hbm_trace *t;
    err = HBM_OK;
    CHECK_OK(hbm_trace_new(&t));
    snprintf(t->source, sizeof t->source, "torch");
    t->stacks = 1;
    uint32_t m1 = stack(t, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "forward", 50);
    uint32_t m2 = stack(t, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "forward", 51);
    uint32_t empty = stack(t, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache()",
                           "empty_cache", 52);
    add(t, HBM_EV_SEGMENT_ALLOC, BASE, 60 * MiB, m1);
    add(t, HBM_EV_ALLOC, BASE, 60 * MiB, m1);
    add(t, HBM_EV_FREE, BASE, 60 * MiB, 0);
    add(t, HBM_EV_SEGMENT_FREE, BASE, 60 * MiB, empty);
    add(t, HBM_EV_SEGMENT_ALLOC, BASE, 30 * MiB, m2);
    add(t, HBM_EV_ALLOC, BASE, 30 * MiB, m2);
    add(t, HBM_EV_SEGMENT_ALLOC, BASE + 30 * MiB, 70 * MiB, m1);
    add(t, HBM_EV_ALLOC, BASE + 30 * MiB, 70 * MiB, m1);
    hbm_replay_config c;
    hbm_replay_report rep;
    hbm_status s = err;
    if (!s) s = hbm_replay_config_make(t, "allocator=torch", &c);
    hbm_replay_request q = {.trace = t, .device = "sim:100MiB", .configs = &c, .n = 1, .twin = 1};
    if (!s) s = hbm_replay_run(&q, &rep);
    if (s) hbm_trace_free(t);
    CHECK_OK(s);
    fprintf(stderr, "  row: %" PRIu64 " OOMs, peak reserved %" PRIu64 "; twin: ", rep.rows[0].ooms, rep.rows[0].peak_reserved);
    hbm_torch_match_write(&rep.twin, stderr, 0);
    fputc('\n', stderr);
    hbm_replay_result row = rep.rows[0];
    hbm_torch_match tw = rep.twin;
    hbm_status ts = rep.twin_status;
    hbm_replay_report_release(&rep);
    hbm_torch_suggestion sg; /* --suggest: the recorded settings run (nothing to avoid) */
    hbm_status gs = hbm_torch_suggest(t, "sim:100MiB", &sg);
    hbm_trace_free(t);
    CHECK_OK(gs);
    CHECK_EQ_U64(sg.c[0].ooms, 0);
    CHECK_EQ_U64(sg.best, 0);
    CHECK_OK(row.status);
    CHECK_EQ_U64(row.ooms, 0);
    CHECK_EQ_U64(row.peak_reserved, 100 * MiB);
    CHECK_OK(ts);
    CHECK_EQ_U64(tw.empty_cache_calls, 1);
    CHECK_EQ_U64(tw.segments_same, 4);
    CHECK_EQ_U64(tw.allocs_same, 3);
}

/* Without stacks, a run ended by a segment_alloc that the device had room for: 200 MiB
 * held then given back by empty_cache() (the peak: 220 MiB with the 20 MiB from before the
 * history), 8 MiB cut from the segment from before the history, then 40 MiB freed and
 * empty_cache() again, then 50 MiB: 60 + 50 MiB reserved fits where 220 MiB did, so
 * malloc's cudaMalloc cannot have failed and the frees were empty_cache(). */
static void test_no_stacks_room(void) {
    hbm_trace *t = midrun_trace();
    CHECK_OK(err);
    t->stacks = 0;
    add(t, HBM_EV_SEGMENT_ALLOC, BASE + 128 * MiB, 200 * MiB, 0);
    add(t, HBM_EV_ALLOC, BASE + 128 * MiB, 200 * MiB, 0);
    add(t, HBM_EV_FREE, BASE + 128 * MiB, 200 * MiB, 0);
    add(t, HBM_EV_SEGMENT_FREE, BASE + 128 * MiB, 200 * MiB, 0);
    add(t, HBM_EV_ALLOC, BASE + 4 * MiB, 8 * MiB, 0);
    add(t, HBM_EV_SEGMENT_ALLOC, BASE + 512 * MiB, 40 * MiB, 0);
    add(t, HBM_EV_ALLOC, BASE + 512 * MiB, 40 * MiB, 0);
    add(t, HBM_EV_FREE, BASE + 512 * MiB, 40 * MiB, 0);
    add(t, HBM_EV_SEGMENT_FREE, BASE + 512 * MiB, 40 * MiB, 0);
    add(t, HBM_EV_SEGMENT_ALLOC, BASE + 1024 * MiB, 50 * MiB, 0);
    add(t, HBM_EV_ALLOC, BASE + 1024 * MiB, 50 * MiB, 0);
    hbm_torch_match m = match(t, "sim:220MiB");
    hbm_trace_free(t);
    CHECK_OK(err);
    CHECK_EQ_U64(m.empty_cache_calls, 2);
    CHECK_EQ_U64(m.segments_recorded, 5);
    CHECK_EQ_U64(m.segments_same, 5);
    CHECK_EQ_U64(m.segments_twin, 5);
    CHECK_EQ_U64(m.allocs_same, 4);
}

int main(void) {
    RUN(test_empty_cache_context_all);
    RUN(test_empty_cache_context_alloc);
    RUN(test_retry_is_not_empty_cache);
    RUN(test_no_stacks);
    RUN(test_no_stacks_room);
    RUN(test_rows_replay_empty_cache);
    return test_done();
}
