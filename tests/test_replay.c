/* test_replay.c - the what-if replay against allocator configurations. */
#include <unistd.h>

#include "trace/replay/replay_internal.h"
#include "trace/trace_internal.h"
#include "test.h"

/* n allocations of 1 MiB live in a sliding window of w, each tagged */
static hbm_trace *window_trace(size_t n, size_t w) {
    hbm_trace *t;
    if (hbm_trace_new(&t)) return NULL;
    hbm_tag tg = {.op_name = "fusion.1", .shape = "f32[262144]", .source_file = "m.py", .source_line = 3};
    uint32_t tag;
    if (hbm_trace_intern(t, &tg, &tag)) return NULL;
    uint64_t time = 0;
    for (size_t i = 0; i < n; i++) {
        hbm_trace_event a = {.kind = HBM_EV_ALLOC, .time_ns = time++, .addr = 0x1000000 * (i + 1), .size = 1 << 20,
                             .requested = 1 << 20, .tag = tag};
        if (hbm_trace_add(t, &a)) return NULL;
        if (i >= w) {
            hbm_trace_event f = {.kind = HBM_EV_FREE, .time_ns = time++, .addr = 0x1000000 * (i + 1 - w)};
            if (hbm_trace_add(t, &f)) return NULL;
        }
    }
    return t;
}

static void test_platform_fits(void) {
    hbm_trace *t = window_trace(100, 10);
    CHECK(t);
    hbm_replay_result r;
    CHECK_OK(hbm_replay(t, "sim:1GiB", "allocator=platform", &r));
    CHECK_OK(r.status);
    CHECK_STR(r.allocator, "platform");
    CHECK_EQ_U64(r.allocs, 100);
    CHECK_EQ_U64(r.frees, 90);
    CHECK_EQ_U64(r.ooms, 0);
    CHECK_EQ_U64(r.peak_in_use, 11u << 20); /* the 11th alloc comes before the first free */
    CHECK_EQ_U64(r.peak_reserved, 11u << 20);
    CHECK_EQ_U64(r.device_calls, 190);
    CHECK(r.first_oom_event == -1);
    CHECK(r.first_oom_report == NULL);
    hbm_replay_result_release(&r);
    hbm_trace_free(t);
}

static void test_platform_oom(void) {
    hbm_trace *t = window_trace(100, 10);
    CHECK(t);
    hbm_replay_result r;
    /* 10.5 MiB: the 11th live MiB (event index 10) fails. Its free is then skipped, so
     * every 11th allocation after it fails too: 10, 21, ..., 98 */
    CHECK_OK(hbm_replay(t, "sim:1GiB", "allocator=platform,limit=10752KiB", &r));
    CHECK_EQ_U64(r.first_oom_event, 10);
    CHECK_EQ_U64(r.first_oom_time_ns, 10);
    CHECK_EQ_U64(r.first_oom_bytes, 1 << 20);
    CHECK_EQ_U64(r.ooms, 9);
    CHECK_EQ_U64(r.allocs, 91);
    CHECK_EQ_U64(r.peak_in_use, 10u << 20);
    CHECK(r.first_oom_report && strlen(r.first_oom_report) > 0);
    /* the first reported, the others summarised: alloc i is event 2i - 10 from i = 10 on */
    CHECK_CONTAINS(r.first_oom_report, "Out of memory while trying to allocate 1048576 bytes");
    CHECK_CONTAINS(r.first_oom_report, "in use:                    10.00MiB  in 10 live buffers");
    CHECK_EQ_U64(r.last_oom_event, 186);
    CHECK_EQ_U64(r.last_oom_time_ns, 186);
    CHECK_EQ_U64(r.largest_oom_bytes, 1 << 20);
    /* the later OOMs were quiet; OOMs after the replay say why again */
    hbm_device *d;
    uint64_t addr;
    CHECK_OK(hbm_device_open("sim:1MiB", &d));
    CHECK_STATUS(hbm_device_alloc(d, 4 << 20, &addr), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "cannot allocate 4.00MiB");
    hbm_device_close(d);
    FILE *f = tmpfile();
    CHECK(f);
    hbm_replay_bounds b;
    CHECK_OK(hbm_replay_bounds_get(t, 1.0, 1000, &b));
    CHECK(b.lower_bound > 0 && b.packed >= b.lower_bound);
    CHECK_OK(hbm_replay_write(t, "sim:1GiB", &r, 1, &b, f, 0));
    rewind(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    CHECK_CONTAINS(buf, "allocator=platform,limit=10752KiB");
    CHECK_CONTAINS(buf, "event 10");
    CHECK_CONTAINS(buf, "11.00MiB");
    CHECK_CONTAINS(buf, "--- first OOM with");
    CHECK_CONTAINS(buf, "(then 8 more OOMs, the last at event 186");
    CHECK_CONTAINS(buf, "the largest request 1.00MiB)");
    hbm_replay_result_release(&r);
    hbm_trace_free(t);
}

static void test_bfc(void) {
    hbm_trace *t = window_trace(200, 20);
    CHECK(t);
    hbm_replay_result r;
    hbm_status s = hbm_replay(t, "sim:1GiB", "allocator=bfc,fraction=0.5", &r);
    if (s == HBM_ERR_NOT_AVAILABLE) {
        fprintf(stderr, "note: bfc is not in this build yet (%s); its replay checks skipped\n", r.error);
        CHECK_EQ_U64(r.status, HBM_ERR_NOT_AVAILABLE);
        hbm_trace_free(t);
        return;
    }
    CHECK_OK(s);
    CHECK_EQ_U64(r.allocs, 200);
    CHECK_EQ_U64(r.ooms, 0);
    CHECK_EQ_U64(r.peak_in_use, 21u << 20);
    CHECK(r.peak_reserved >= r.peak_in_use);
    hbm_replay_result_release(&r);
    /* a device too small for the preallocated pool's share */
    CHECK_OK(hbm_replay(t, "sim:40MiB", "allocator=bfc,fraction=0.5", &r));
    CHECK(r.first_oom_event >= 0);
    CHECK(r.first_oom_report && strlen(r.first_oom_report) > 0);
    hbm_replay_result_release(&r);
    hbm_trace_free(t);
}

static void test_recorded_matches(void) {
    /* record a workload with platform, replay it with platform: same peak */
    char path[64];
    snprintf(path, sizeof path, "/tmp/hbm-test-replay-%d.hbmt", (int)getpid());
    char cfg[128];
    snprintf(cfg, sizeof cfg, "allocator=platform,trace=%s", path);
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:8GiB", &d));
    CHECK_OK(hbm_allocator_open(d, cfg, &a));
    test_rng rng = {42};
    uint64_t live[64] = {0};
    for (int i = 0; i < 5000; i++) {
        int k = (int)test_below(&rng, 64);
        if (live[k]) {
            CHECK_OK(hbm_free(a, live[k]));
            live[k] = 0;
        } else {
            CHECK_OK(hbm_alloc(a, 1 + test_below(&rng, 1 << 20), NULL, &live[k]));
        }
    }
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    hbm_allocator_close(a);
    hbm_device_close(d);
    hbm_trace *t;
    CHECK_OK(hbm_trace_load(path, &t));
    unlink(path);
    hbm_replay_result r;
    CHECK_OK(hbm_replay(t, "sim:8GiB", "allocator=platform", &r));
    CHECK_EQ_U64(r.peak_in_use, st.peak_bytes_in_use);
    CHECK_EQ_U64(r.peak_reserved, st.peak_bytes_reserved);
    CHECK_EQ_U64(r.allocs, st.num_allocs);
    CHECK_EQ_U64(r.frees, st.num_frees);
    hbm_replay_result_release(&r);
    hbm_trace_free(t);
}

static void test_bad_inputs(void) {
    hbm_trace *t = window_trace(10, 2);
    CHECK(t);
    hbm_replay_result r;
    CHECK_STATUS(hbm_replay(t, "sim:1GiB", "allocator=nonsense", &r), HBM_ERR_CONFIG);
    CHECK_EQ_U64(r.status, HBM_ERR_CONFIG);
    CHECK_CONTAINS(r.error, "nonsense");
    CHECK_STATUS(hbm_replay(t, "nodevice:1", "allocator=platform", &r), hbm_device_open("nodevice:1", &(hbm_device *){0}));
    char spec[128];
    CHECK_OK(hbm_replay_device_spec("H100", spec, sizeof spec));
    CHECK_STR(spec, "sim:85520809984,name=H100-80GB"); /* the planner's device table */
    CHECK_OK(hbm_replay_device_spec("sim:3GiB", spec, sizeof spec));
    CHECK_STR(spec, "sim:3GiB");
    CHECK_STATUS(hbm_replay_device_spec("tpu9", spec, sizeof spec), HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "tpu9");
    /* fault injection: every host allocation of a replay may fail, and nothing leaks */
    for (uint64_t k = 1;; k++) {
        hbm_debug_fail_host_alloc(k);
        hbm_status s = hbm_replay(t, "sim:1GiB", "allocator=platform", &r);
        hbm_debug_fail_host_alloc(0);
        hbm_replay_result_release(&r);
        if (s == HBM_OK) break;
        CHECK_STATUS(s, HBM_ERR_NOMEM);
    }
    hbm_trace_free(t);
}

/* Stream 1 allocates and frees the whole 2 MiB pool, then stream 2 allocates it: on
 * cuda_async that fails unless stream 1 was synchronized in between (a sync event);
 * stream-agnostic platform never fails. Streams and syncs reach the replayed policy. */
static hbm_trace *stream_trace(int with_sync) {
    hbm_trace *t;
    if (hbm_trace_new(&t)) return NULL;
    hbm_trace_event ev[] = {
        {.kind = HBM_EV_ALLOC, .time_ns = 1, .addr = 0x10000, .size = 2u << 20, .requested = 2u << 20, .stream = 1},
        {.kind = HBM_EV_FREE, .time_ns = 2, .addr = 0x10000, .stream = 1},
        {.kind = HBM_EV_SYNC, .time_ns = 3, .stream = 1},
        {.kind = HBM_EV_ALLOC, .time_ns = 4, .addr = 0x10000, .size = 2u << 20, .requested = 2u << 20, .stream = 2},
        {.kind = HBM_EV_FREE, .time_ns = 5, .addr = 0x10000, .stream = 2},
        {.kind = HBM_EV_ALLOC, .time_ns = 6, .addr = 0x10000, .size = 2u << 20, .requested = 2u << 20, .stream = 2},
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        if ((with_sync || ev[i].kind != HBM_EV_SYNC) && hbm_trace_add(t, &ev[i])) return NULL;
    return t;
}

static void test_streams(void) {
    hbm_trace *nosync = stream_trace(0), *sync = stream_trace(1);
    CHECK(nosync && sync);
    hbm_replay_result r;
    CHECK_OK(hbm_replay(nosync, "sim:1GiB", "allocator=cuda_async,limit=2MiB", &r));
    CHECK_OK(r.status);
    CHECK_STR(r.allocator, "cuda_async");
    CHECK_EQ_U64(r.ooms, 2); /* neither alloc on stream 2 can use the block pending on stream 1 */
    CHECK_EQ_U64(r.first_oom_event, 2);
    CHECK_EQ_U64(r.allocs, 1);
    hbm_replay_result_release(&r);
    CHECK_OK(hbm_replay(sync, "sim:1GiB", "allocator=cuda_async,limit=2MiB", &r));
    CHECK_EQ_U64(r.ooms, 0);
    CHECK_EQ_U64(r.allocs, 3);
    CHECK_EQ_U64(r.frees, 2);
    CHECK_EQ_U64(r.peak_reserved, 2u << 20);
    hbm_replay_result_release(&r);
    CHECK_OK(hbm_replay(nosync, "sim:1GiB", "allocator=platform,limit=2MiB", &r));
    CHECK_EQ_U64(r.ooms, 0);
    hbm_replay_result_release(&r);
    hbm_trace_free(nosync);
    hbm_trace_free(sync);
}

/* Every policy with a sim twin replays: bfc, platform, cuda_async, vmm. */
static void test_all_policies(void) {
    hbm_trace *t = window_trace(300, 30);
    CHECK(t);
    static const char *const cfgs[] = {"allocator=bfc", "allocator=platform", "allocator=cuda_async", "allocator=vmm"};
    hbm_replay_result r[4];
    CHECK_OK(hbm_replay_many(t, "sim:1GiB", cfgs, 4, r));
    for (int i = 0; i < 4; i++) {
        CHECK_OK(r[i].status);
        CHECK_EQ_U64(r[i].allocs, 300);
        CHECK_EQ_U64(r[i].frees, 270);
        CHECK_EQ_U64(r[i].ooms, 0);
        CHECK(r[i].peak_in_use >= 31u << 20);
        CHECK(r[i].peak_reserved >= r[i].peak_in_use);
        hbm_replay_result_release(&r[i]);
    }
    CHECK_STR(r[2].allocator, "cuda_async");
    CHECK_STR(r[3].allocator, "vmm");
    hbm_trace_free(t);
}

/* The replay's lower bound (from its alloc/free pairing) is the timeline's peak, on a trace
 * with every case the pairing meets: an address allocated again without a free, a free
 * of a block from before the trace, a free never matched, zero-byte allocations, an
 * OOM event, blocks never freed. */
static uint64_t timeline_peak(const hbm_trace *t) {
    hbm_timeline *tl;
    uint64_t peak = 0;
    if (hbm_trace_to_timeline(t, &tl)) return UINT64_MAX; /* never a bound: the check fails */
    if (hbm_timeline_peak(tl, &peak, NULL)) peak = UINT64_MAX;
    hbm_timeline_free(tl);
    return peak;
}

static void test_bound_is_timeline_peak(void) {
    for (uint64_t seed = 1; seed <= 40; seed++) {
        hbm_trace *t;
        CHECK_OK(hbm_trace_new(&t));
        uint64_t rng = seed * 0x9e3779b97f4a7c15ULL, live[16] = {0};
        for (int i = 0; i < 400; i++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t k = rng % 16;
            hbm_trace_event e = {.time_ns = (uint64_t)i};
            int what = (int)((rng >> 8) % 10);
            if (what == 0) { /* an address allocated again without a free, or freed from before */
                e.kind = (rng >> 12) & 1 ? HBM_EV_ALLOC : HBM_EV_FREE;
                e.addr = 0x1000 * (1 + (rng >> 16) % 64);
                e.size = e.requested = (rng >> 24) % 3 ? 512 * (1 + (rng >> 30) % 8) : 0;
            } else if (what == 1) {
                e.kind = HBM_EV_OOM;
                e.size = e.requested = 1 << 20;
            } else if (live[k]) {
                e.kind = HBM_EV_FREE;
                e.addr = live[k];
                live[k] = 0;
            } else {
                e.kind = HBM_EV_ALLOC;
                e.addr = live[k] = 0x1000 * (1 + (rng >> 16) % 64);
                e.size = 512 * (1 + (rng >> 30) % 8);
                e.requested = (rng >> 40) % 4 ? e.size - (rng >> 44) % 100 : 0;
            }
            CHECK_OK(hbm_trace_add(t, &e));
        }
        hbm_replay_bounds b;
        CHECK_OK(hbm_replay_bounds_get(t, 0, 0, &b));
        uint64_t want = timeline_peak(t);
        CHECK(want > 0);
        CHECK(b.lower_bound == want);
        hbm_trace_free(t);
    }
    hbm_trace *w = window_trace(50, 7); /* a plain one: 8 blocks of 1 MiB at once (before each free) */
    CHECK(w);
    hbm_replay_bounds b;
    CHECK_OK(hbm_replay_bounds_get(w, 0, 0, &b));
    CHECK(b.lower_bound == 8u << 20 && b.lower_bound == timeline_peak(w));
    hbm_trace_free(w);
}

/* One prepared plan serves a replay nested in another's hook: the inner replay, on a device
 * too small for the first buffer, must not change what the outer one frees. */
typedef struct nested_ctx {
    const hbmi_replay_plan *plan;
    const hbm_replay_config *cfg;
    hbm_replay_result inner;
    hbm_status inner_status;
} nested_ctx;

static void replay_again(void *user, hbm_allocator *a, hbm_replay_result *r) {
    (void)a, (void)r;
    nested_ctx *c = user;
    c->inner_status = hbmi_replay_one(c->plan, NULL, "sim:1MiB", c->cfg, NULL, &c->inner);
}

static void test_plan_shared_by_nested_replay(void) {
    hbm_trace *t;
    CHECK_OK(hbm_trace_new(&t));
    const uint64_t mib600 = 600ULL << 20;
    const hbm_trace_event ev[] = {
        {.kind = HBM_EV_ALLOC, .time_ns = 1, .addr = 0x1000, .size = mib600, .requested = mib600}, /* A */
        {.kind = HBM_EV_ALLOC, .time_ns = 2, .addr = 0x2000, .size = mib600, .requested = mib600}, /* B: OOM */
        {.kind = HBM_EV_FREE, .time_ns = 3, .addr = 0x1000},                                       /* A */
        {.kind = HBM_EV_ALLOC, .time_ns = 4, .addr = 0x3000, .size = mib600, .requested = mib600}, /* C: fits */
        {.kind = HBM_EV_FREE, .time_ns = 5, .addr = 0x3000},
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) CHECK_OK(hbm_trace_add(t, &ev[i]));
    hbm_replay_config cfg;
    CHECK_OK(hbm_replay_config_make(t, "allocator=platform", &cfg));
    hbmi_replay_plan plan;
    CHECK_OK(hbmi_replay_prepare(t, &plan));
    nested_ctx c = {.plan = &plan, .cfg = &cfg, .inner_status = HBM_ERR_INVALID};
    hbmi_replay_hooks h = {.on_first_oom = replay_again, .user = &c};
    hbm_replay_result r;
    CHECK_OK(hbmi_replay_one(&plan, NULL, "sim:1GiB", &cfg, &h, &r));
    CHECK_OK(c.inner_status);
    CHECK_EQ_U64(c.inner.ooms, 3); /* A, B and C: none fits in 1 MiB */
    CHECK_EQ_U64(r.ooms, 1);       /* B only: A was freed, so C fits */
    CHECK_EQ_U64(r.frees, 2);
    hbm_replay_result_release(&c.inner);
    hbm_replay_result_release(&r);
    hbmi_replay_plan_free(&plan);
    hbm_trace_free(t);
}

int main(void) {
    RUN(test_platform_fits);
    RUN(test_platform_oom);
    RUN(test_bfc);
    RUN(test_recorded_matches);
    RUN(test_bad_inputs);
    RUN(test_streams);
    RUN(test_all_policies);
    RUN(test_bound_is_timeline_peak);
    RUN(test_plan_shared_by_nested_replay);
    return test_done();
}
