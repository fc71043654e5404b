/* test_trace.c - the in-memory trace, the file format, the recorder and the conversion
 * to timelines. */
#include <unistd.h>

#include "trace/trace_internal.h"
#include "test.h"

static char tmpdir[256];

static const char *tmp(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

static hbm_trace *sample_trace(void) {
    hbm_trace *t;
    if (hbm_trace_new(&t)) return NULL;
    hbm_tag a = {.op_name = "matmul", .shape = "f32[1024,1024]", .source_file = "model.py", .source_line = 12,
                 .category = HBM_CAT_ACTIVATION};
    hbm_tag b = {.op_name = "adam", .label = NULL, .category = HBM_CAT_OPTIMIZER};
    uint32_t ta, tb, bt;
    uint64_t fr[3] = {0x401000, 0x402000, 0x403000};
    if (hbm_trace_intern(t, &a, &ta) || hbm_trace_intern(t, &b, &tb) || hbm_trace_add_backtrace(t, fr, 3, &bt)) return NULL;
    hbm_trace_event ev[] = {
        {.kind = HBM_EV_SEGMENT_ALLOC, .time_ns = 5, .addr = 0x1000, .size = 1 << 20},
        {.kind = HBM_EV_ALLOC, .time_ns = 10, .addr = 0x1000, .size = 4096, .requested = 4000, .tag = ta, .backtrace = bt},
        {.kind = HBM_EV_ALLOC, .time_ns = 20, .addr = 0x2000, .size = 8192, .requested = 8192, .stream = 7, .tag = tb},
        {.kind = HBM_EV_FREE, .time_ns = 30, .addr = 0x1000},
        {.kind = HBM_EV_OOM, .time_ns = 40, .requested = 1ull << 40},
        {.kind = HBM_EV_ALLOC, .time_ns = 50, .addr = 0x1000, .size = 512, .requested = 100},
        {.kind = HBM_EV_FREE, .time_ns = 60, .addr = 0x9999}, /* never allocated in the trace */
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        if (hbm_trace_add(t, &ev[i])) return NULL;
    snprintf(t->device, sizeof t->device, "sim:1GiB");
    t->capacity = 1ull << 30;
    return t;
}

static void test_timeline(void) {
    hbm_trace *t = sample_trace();
    CHECK(t);
    hbm_timeline *tl;
    CHECK_OK(hbm_trace_to_timeline(t, &tl));
    CHECK_EQ_U64(tl->count, 3);
    /* freed first: the 4000-byte block [1, 3) */
    CHECK_EQ_U64(tl->buffers[0].size, 4000);
    CHECK_EQ_U64(tl->buffers[0].start, 1);
    CHECK_EQ_U64(tl->buffers[0].end, 3);
    CHECK_STR(hbm_timeline_tag(tl, 0)->op_name, "matmul");
    /* never freed: to the end (7), in allocation order */
    CHECK_EQ_U64(tl->buffers[1].start, 2);
    CHECK_EQ_U64(tl->buffers[1].end, 7);
    CHECK_EQ_U64(tl->buffers[2].size, 100);
    uint64_t peak;
    int64_t at;
    CHECK_OK(hbm_timeline_peak(tl, &peak, &at));
    CHECK_EQ_U64(peak, 12192);
    CHECK_EQ_U64(at, 2);
    /* and back: a plan as a trace */
    hbm_trace *back;
    CHECK_OK(hbm_trace_from_timeline(tl, &back));
    CHECK_EQ_U64(back->count, 6);
    hbm_timeline *tl2;
    CHECK_OK(hbm_trace_to_timeline(back, &tl2));
    uint64_t peak2;
    CHECK_OK(hbm_timeline_peak(tl2, &peak2, NULL));
    CHECK_EQ_U64(peak2, peak);
    hbm_timeline_free(tl2);
    hbm_trace_free(back);
    hbm_timeline_free(tl);
    hbm_trace_free(t);
}

static void test_roundtrip(void) {
    hbm_trace *t = sample_trace(), *r;
    CHECK(t);
    const char *path = tmp("rt.hbmt");
    CHECK_OK(hbm_trace_write(t, path));
    CHECK_OK(hbm_trace_read(path, &r));
    CHECK_EQ_U64(r->count, t->count);
    CHECK_EQ_U64(r->truncated_at, 0);
    for (size_t i = 0; i < t->count; i++) CHECK(!memcmp(&r->events[i], &t->events[i], sizeof r->events[i]));
    CHECK_STR(r->device, "sim:1GiB");
    CHECK_EQ_U64(r->capacity, 1ull << 30);
    CHECK_STR(hbm_trace_tag(r, 1)->shape, "f32[1024,1024]");
    CHECK_EQ_U64(hbm_trace_tag(r, 1)->source_line, 12);
    CHECK(hbm_trace_tag(r, 2)->shape == NULL);
    CHECK_EQ_U64(hbm_trace_tag(r, 2)->category, HBM_CAT_OPTIMIZER);
    size_t n;
    const uint64_t *fr = hbm_trace_backtrace(r, 1, &n);
    CHECK_EQ_U64(n, 3);
    CHECK_EQ_U64(fr[2], 0x403000);
    hbm_trace_free(r);
    /* hbm_trace_load recognizes it too */
    CHECK_OK(hbm_trace_load(path, &r));
    CHECK_EQ_U64(r->count, t->count);
    hbm_trace_free(r);
    hbm_trace_free(t);
}

static void test_torn_and_bad(void) {
    hbm_trace *t = sample_trace(), *r;
    CHECK(t);
    const char *path = tmp("torn.hbmt");
    CHECK_OK(hbm_trace_write(t, path));
    char *data;
    size_t len;
    CHECK_OK(hbmi_read_file(path, &data, &len));
    /* where the last event starts: the length of the file without it */
    t->count--;
    CHECK_OK(hbm_trace_write(t, tmp("short.hbmt")));
    t->count++;
    char *d2;
    size_t last;
    CHECK_OK(hbmi_read_file(tmp("short.hbmt"), &d2, &last));
    hbmi_free(d2);
    CHECK(last < len && last + 8 < len);
    /* a crash in the middle of the last event: the rest loads */
    CHECK_OK(hbm_trace_parse(data, len - 2, "torn", &r));
    CHECK_EQ_U64(r->count, t->count - 1);
    CHECK_EQ_U64(r->truncated_at, last);
    hbm_trace_free(r);
    /* bad magic, bad version, bad record type: errors with offsets */
    char *bad = hbmi_malloc(len);
    memcpy(bad, data, len);
    bad[0] = 'X';
    CHECK_STATUS(hbm_trace_parse(bad, len, "b", &r), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "byte offset 0");
    memcpy(bad, data, len);
    bad[8] = 9;
    CHECK_STATUS(hbm_trace_parse(bad, len, "b", &r), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "version 9");
    memcpy(bad, data, len);
    bad[last] = 10;
    CHECK_STATUS(hbm_trace_parse(bad, len, "b", &r), HBM_ERR_PARSE);
    char want[64];
    snprintf(want, sizeof want, "byte offset %zu: unknown record type 0x0a", last);
    CHECK_CONTAINS(hbm_last_error(), want);
    /* an event whose tag was never declared (the 7th varint of the last event is its tag) */
    memcpy(bad, data, len);
    bad[len - 2] = 42;
    CHECK_STATUS(hbm_trace_parse(bad, len, "b", &r), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "tag id");
    CHECK_STATUS(hbm_trace_read(tmp("does-not-exist"), &r), HBM_ERR_IO);
    /* host allocation failures at every point leave nothing behind (ASan checks leaks) */
    for (uint64_t k = 1;; k++) {
        hbm_debug_fail_host_alloc(k);
        hbm_status s = hbm_trace_parse(data, len, "f", &r);
        hbm_debug_fail_host_alloc(0);
        if (s == HBM_OK) {
            CHECK_EQ_U64(r->count, t->count);
            hbm_trace_free(r);
            break;
        }
        CHECK_STATUS(s, HBM_ERR_NOMEM);
    }
    hbmi_free(bad);
    hbmi_free(data);
    hbm_trace_free(t);
}

static void run_workload(hbm_allocator *a, uint64_t *addrs) {
    hbm_tag tg = {.op_name = "conv", .shape = "bf16[8,512]", .source_file = "net.py", .source_line = 7};
    for (int i = 0; i < 10; i++) hbm_alloc(a, 1000 + (uint64_t)i, i % 2 ? &tg : NULL, &addrs[i]);
    for (int i = 0; i < 10; i += 2) hbm_free(a, addrs[i]);
    uint64_t big;
    hbm_alloc(a, 1ull << 40, &tg, &big); /* fails */
}

static void check_recorded(const char *path, const char *dev_name) {
    hbm_trace *r;
    CHECK_OK(hbm_trace_read(path, &r));
    size_t allocs = 0, frees = 0, ooms = 0, segs = 0;
    uint64_t last = 0;
    for (size_t i = 0; i < r->count; i++) {
        const hbm_trace_event *e = &r->events[i];
        CHECK(e->time_ns >= last);
        last = e->time_ns;
        CHECK(e->thread >= 1);
        allocs += e->kind == HBM_EV_ALLOC;
        frees += e->kind == HBM_EV_FREE;
        ooms += e->kind == HBM_EV_OOM;
        segs += e->kind == HBM_EV_SEGMENT_ALLOC;
        if (e->kind == HBM_EV_ALLOC) {
            CHECK(e->requested >= 1000 && e->requested < 1010);
            CHECK_EQ_U64(e->size, (e->requested + 511) / 512 * 512);
            if (e->requested % 2) {
                CHECK_STR(hbm_trace_tag(r, e->tag)->op_name, "conv");
                CHECK_EQ_U64(hbm_trace_tag(r, e->tag)->source_line, 7);
            } else {
                CHECK_EQ_U64(e->tag, 0);
            }
        }
        if (e->kind == HBM_EV_OOM) CHECK_EQ_U64(e->requested, 1ull << 40);
    }
    CHECK_EQ_U64(allocs, 10);
    CHECK_EQ_U64(frees, 5);
    CHECK_EQ_U64(ooms, 1);
    CHECK_EQ_U64(segs, 10); /* platform: every alloc reserves */
    CHECK_STR(r->device, dev_name);
    hbm_timeline *tl;
    CHECK_OK(hbm_trace_to_timeline(r, &tl));
    CHECK_EQ_U64(tl->count, 10);
    hbm_timeline_free(tl);
    hbm_trace_free(r);
}

static void test_recorder_config(void) {
    hbm_device *d;
    hbm_allocator *a;
    uint64_t addrs[10];
    CHECK_OK(hbm_device_open("sim:1GiB,name=testdev", &d));
    char cfg[600];
    snprintf(cfg, sizeof cfg, "allocator=platform,trace=%s", tmp("rec.hbmt"));
    CHECK_OK(hbm_allocator_open(d, cfg, &a));
    CHECK_STR(hbm_allocator_name(a), "platform");
    run_workload(a, addrs);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    check_recorded(tmp("rec.hbmt"), "testdev");
    /* %p and %n give each allocator of each process its own file */
    snprintf(cfg, sizeof cfg, "allocator=platform,trace=%s/pat-%%p-%%n-%%%%.hbmt", tmpdir);
    hbm_allocator *b;
    CHECK_OK(hbm_allocator_open(d, cfg, &a));
    CHECK_OK(hbm_allocator_open(d, cfg, &b));
    hbm_allocator_close(a);
    hbm_allocator_close(b);
    char want[600];
    int found = 0;
    for (int n = 1; n < 100; n++) {
        snprintf(want, sizeof want, "%s/pat-%d-%d-%%.hbmt", tmpdir, (int)getpid(), n);
        found += access(want, F_OK) == 0;
    }
    CHECK_EQ_U64(found, 2);
    /* a bad path fails the open with the path in the message */
    CHECK_STATUS(hbm_allocator_open(d, "allocator=platform,trace=/nonexistent-dir/x.hbmt", &a), HBM_ERR_IO);
    CHECK_CONTAINS(hbm_last_error(), "/nonexistent-dir/x.hbmt");
    hbm_device_close(d);
}

static void test_recorder_env(void) {
    hbm_device *d;
    hbm_allocator *a;
    uint64_t addrs[10];
    CHECK_OK(hbm_device_open("sim:1GiB,name=envdev", &d));
    setenv("HBM_TRACE", tmp("env.hbmt"), 1);
    setenv("HBM_ALLOCATOR", "platform", 1);
    setenv("HBM_TRACE_BACKTRACE", "1", 1);
    hbm_status s = hbm_allocator_open(d, NULL, &a);
    unsetenv("HBM_TRACE");
    unsetenv("HBM_ALLOCATOR");
    unsetenv("HBM_TRACE_BACKTRACE");
    CHECK_OK(s);
    run_workload(a, addrs);
    hbm_allocator_close(a);
    check_recorded(tmp("env.hbmt"), "envdev");
    hbm_trace *r;
    CHECK_OK(hbm_trace_read(tmp("env.hbmt"), &r));
#if defined(__GLIBC__)
    size_t n = 0;
    for (size_t i = 0; i < r->count; i++)
        if (r->events[i].kind == HBM_EV_ALLOC) CHECK(hbm_trace_backtrace(r, r->events[i].backtrace, &n) && n > 0);
#endif
    hbm_trace_free(r);
    hbm_device_close(d);
}

static void test_wrap_handle(void) {
    hbm_device *d;
    hbm_allocator *inner, *a;
    uint64_t addrs[10];
    CHECK_OK(hbm_device_open("sim:1GiB,name=wrapdev", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=platform", &inner));
    CHECK_OK(hbm_trace_wrap(inner, tmp("wrap.hbmt"), 0, &a));
    run_workload(a, addrs);
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.num_allocs, 10);
    CHECK_EQ_U64(st.num_frees, 5);
    hbm_allocator_close(a);
    check_recorded(tmp("wrap.hbmt"), "wrapdev");
    CHECK_OK(hbm_allocator_open(d, "allocator=platform", &inner));
    CHECK_STATUS(hbm_trace_wrap(inner, "/nonexistent-dir/y", 0, &a), HBM_ERR_IO); /* closes inner */
    hbm_device_close(d);
}

static void test_streaming(void) {
    /* the writer flushes every HBM_TRACE_FLUSH_EVENTS events: a reader sees them before close */
    hbm_trace_writer *w;
    CHECK_OK(hbm_trace_writer_open(tmp("stream.hbmt"), "dev", 0, &w));
    hbm_trace_event e = {.kind = HBM_EV_ALLOC, .size = 1, .requested = 1};
    for (uint64_t i = 0; i < HBM_TRACE_FLUSH_EVENTS + 10; i++) {
        e.addr = i + 1;
        CHECK_OK(hbm_trace_writer_event(w, &e));
    }
    hbm_trace *r;
    CHECK_OK(hbm_trace_read(tmp("stream.hbmt"), &r));
    CHECK(r->count >= HBM_TRACE_FLUSH_EVENTS - 10);
    hbm_trace_free(r);
    CHECK_OK(hbm_trace_writer_close(w));
    CHECK_OK(hbm_trace_read(tmp("stream.hbmt"), &r));
    CHECK_EQ_U64(r->count, HBM_TRACE_FLUSH_EVENTS + 10);
    hbm_trace_free(r);
}

/* Stream-ordered reuse through a recorder on cuda_async: a 2 MiB block freed on stream 5
 * is not reused by stream 9 until stream 5 is synchronized; every call is recorded with
 * its stream, the syncs as sync events. */
static void stream_workload(hbm_allocator *a) {
    uint64_t p, q, r, z;
    CHECK_OK(hbm_alloc_stream(a, 2u << 20, NULL, 5, &p));
    CHECK_OK(hbm_free_stream(a, p, 5));
    CHECK_OK(hbm_alloc_stream(a, 2u << 20, NULL, 9, &q));
    CHECK(q != p); /* pending on stream 5: the policy saw the stream */
    CHECK_OK(hbm_allocator_sync(a, 5));
    CHECK_OK(hbm_alloc_stream(a, 2u << 20, NULL, 9, &r));
    CHECK_EQ_U64(r, p); /* the sync reached the policy */
    CHECK_OK(hbm_allocator_sync(a, HBM_STREAM_ALL));
    CHECK_OK(hbm_alloc(a, 100, NULL, &z));
}

static void check_streams(const char *path) {
    hbm_trace *r;
    CHECK_OK(hbm_trace_read(path, &r));
    static const struct {
        uint8_t kind;
        uint64_t stream;
    } want[] = {{HBM_EV_ALLOC, 5}, {HBM_EV_FREE, 5}, {HBM_EV_ALLOC, 9}, {HBM_EV_SYNC, 5},
                {HBM_EV_ALLOC, 9}, {HBM_EV_SYNC, HBM_STREAM_ALL}, {HBM_EV_ALLOC, 0}};
    size_t k = 0;
    for (size_t i = 0; i < r->count; i++) {
        const hbm_trace_event *e = &r->events[i];
        if (e->kind == HBM_EV_SEGMENT_ALLOC || e->kind == HBM_EV_SEGMENT_FREE) continue;
        CHECK(k < sizeof want / sizeof want[0]);
        if (k >= sizeof want / sizeof want[0]) break;
        CHECK_EQ_U64(e->kind, want[k].kind);
        CHECK_EQ_U64(e->stream, want[k].stream);
        k++;
    }
    CHECK_EQ_U64(k, sizeof want / sizeof want[0]);
    CHECK_STR(hbm_event_kind_str(HBM_EV_SYNC), "sync");
    hbm_trace_free(r);
}

static void test_recorder_streams(void) {
    hbm_device *d;
    hbm_allocator *a, *inner;
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    char cfg[600];
    snprintf(cfg, sizeof cfg, "allocator=cuda_async,trace=%s", tmp("streams.hbmt"));
    CHECK_OK(hbm_allocator_open(d, cfg, &a));
    stream_workload(a);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    check_streams(tmp("streams.hbmt"));
    /* the same through a wrapped handle */
    CHECK_OK(hbm_allocator_open(d, "allocator=cuda_async", &inner));
    CHECK_OK(hbm_trace_wrap(inner, tmp("streams2.hbmt"), 0, &a));
    stream_workload(a);
    hbm_allocator_close(a);
    check_streams(tmp("streams2.hbmt"));
    hbm_device_close(d);
}

/* Version 2 added the sync event, version 3 segment_map/unmap; older files still read, and a
 * newer record in one is an error (its readers never knew it). */
static void test_versions(void) {
    hbm_trace *t, *r;
    CHECK_OK(hbm_trace_new(&t));
    hbm_trace_event ev[] = {{.kind = HBM_EV_ALLOC, .time_ns = 1, .addr = 0x1000, .size = 64, .requested = 64, .stream = 3},
                            {.kind = HBM_EV_SYNC, .time_ns = 2, .stream = HBM_STREAM_ALL},
                            {.kind = HBM_EV_FREE, .time_ns = 3, .addr = 0x1000, .stream = 3},
                            {.kind = HBM_EV_SEGMENT_MAP, .time_ns = 4, .addr = 0x200000, .size = 2 << 20},
                            {.kind = HBM_EV_SEGMENT_UNMAP, .time_ns = 5, .addr = 0x200000, .size = 2 << 20}};
    for (int i = 0; i < 5; i++) CHECK_OK(hbm_trace_add(t, &ev[i]));
    const char *path = tmp("v2.hbmt");
    CHECK_OK(hbm_trace_write(t, path));
    char *data;
    size_t len;
    CHECK_OK(hbmi_read_file(path, &data, &len));
    CHECK_EQ_U64(hbmi_get32((unsigned char *)data + 8), 3);
    CHECK_OK(hbm_trace_parse(data, len, "v3", &r));
    CHECK_EQ_U64(r->count, 5);
    CHECK_EQ_U64(r->events[3].kind, HBM_EV_SEGMENT_MAP);
    CHECK_EQ_U64(r->events[4].kind, HBM_EV_SEGMENT_UNMAP);
    CHECK_EQ_U64(r->events[4].size, 2 << 20);
    CHECK_EQ_U64(r->events[1].kind, HBM_EV_SYNC);
    CHECK_EQ_U64(r->events[1].stream, HBM_STREAM_ALL);
    CHECK_EQ_U64(r->events[2].stream, 3);
    hbm_trace_free(r);
    data[8] = 2; /* as version 2: segment_map (type 8) is unknown */
    CHECK_STATUS(hbm_trace_parse(data, len, "v2", &r), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "unknown record type 0x08");
    data[8] = 1; /* as version 1: the sync event (type 7) is unknown */
    CHECK_STATUS(hbm_trace_parse(data, len, "v1", &r), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "unknown record type 0x07");
    hbmi_free(data);
    hbm_trace_free(t);
    /* a version 1 file without sync events reads as before */
    t = sample_trace();
    CHECK(t);
    CHECK_OK(hbm_trace_write(t, path));
    CHECK_OK(hbmi_read_file(path, &data, &len));
    data[8] = 1;
    CHECK_OK(hbm_trace_parse(data, len, "v1", &r));
    CHECK_EQ_U64(r->count, t->count);
    for (size_t i = 0; i < t->count; i++) CHECK(!memcmp(&r->events[i], &t->events[i], sizeof r->events[i]));
    hbm_trace_free(r);
    hbmi_free(data);
    hbm_trace_free(t);
}

/* data + a meta record key=value, in a new buffer of *len bytes (hbmi_free). */
static char *with_meta(const char *data, size_t *len, const char *key, const char *value) {
    size_t kl = strlen(key), vl = strlen(value), n = *len + 16 + kl + vl;
    unsigned char *p = hbmi_malloc(n);
    if (!p) return NULL;
    memcpy(p, data, *len);
    unsigned char *q = p + *len;
    q[0] = 0x12, q[1] = q[2] = q[3] = 0;
    hbmi_put32(q + 4, (uint32_t)(8 + kl + vl));
    hbmi_put32(q + 8, (uint32_t)kl);
    memcpy(q + 12, key, kl);
    hbmi_put32(q + 12 + kl, (uint32_t)vl);
    memcpy(q + 16 + kl, value, vl);
    *len = n;
    return (char *)p;
}

/* The device fields: device_bytes replaces the header's capacity and makes the device
 * the one assumed; without any, hbm's default 80 GiB; a bad field is named. */
static void test_device_fields(void) {
    hbm_trace *t = sample_trace(), *r;
    CHECK(t);
    t->capacity = 0;
    const char *path = tmp("dev.hbmt");
    CHECK_OK(hbm_trace_write(t, path));
    hbm_trace_free(t);
    char *data, *d2;
    size_t len, n;
    const char *why;
    CHECK_OK(hbmi_read_file(path, &data, &len));
    CHECK_OK(hbm_trace_parse(data, len, "old", &r)); /* as before: no device named */
    CHECK_EQ_U64(hbmi_trace_device_bytes(r, &why), 80ull << 30);
    CHECK(!strcmp(why, "default, the trace names no device"));
    hbm_trace_free(r);
    /* the fields as hbm run writes them, after the events (a reader takes them anywhere) */
    static const char *const good[][2] = {{"device", "hbm fake GPU 1"}, {"device_index", "1"}, {"device_bytes", "3221225472"}};
    n = len;
    char *cur = data;
    for (int i = 0; i < 3; i++) {
        char *next = with_meta(cur, &n, good[i][0], good[i][1]);
        if (cur != data) hbmi_free(cur);
        cur = next;
        CHECK(cur);
    }
    CHECK_OK(hbm_trace_parse(cur, n, "new", &r));
    CHECK(!strcmp(r->device, "hbm fake GPU 1"));
    CHECK_EQ_U64(r->device_index, 1);
    CHECK_EQ_U64(hbmi_trace_device_bytes(r, &why), 3ull << 30);
    CHECK(!strcmp(why, "from the trace header"));
    hbm_trace_free(r);
    hbmi_free(cur);
    /* a bad field: the offending value and its byte offset (the record starts at len) */
    static const char *const badf[][3] = {{"device_bytes", "12x", "meta device_bytes '12x' is not"},
                                          {"device_bytes", "0", "meta device_bytes '0' is not"},
                                          {"device_bytes", "99999999999999999999", "is not the device's total bytes"},
                                          {"device_index", "-1", "meta device_index '-1' is not a device number"},
                                          {"device_index", "4097", "meta device_index '4097'"},
                                          {"device", "", "meta device '' is not a device name"},
                                          {"device", "a\x1b[2Jb", "meta device 'a?[2Jb' is not a device name"}};
    char off[64];
    snprintf(off, sizeof off, "byte offset %zu: ", len);
    for (size_t i = 0; i < sizeof badf / sizeof badf[0]; i++) {
        n = len;
        CHECK((d2 = with_meta(data, &n, badf[i][0], badf[i][1])));
        r = NULL;
        CHECK_STATUS(hbm_trace_parse(d2, n, "bad", &r), HBM_ERR_PARSE);
        CHECK(!r);
        CHECK_CONTAINS(hbm_last_error(), badf[i][2]);
        CHECK_CONTAINS(hbm_last_error(), off);
        hbmi_free(d2);
    }
    hbmi_free(data);
    /* a name with control bytes (an imported file's) is written as one a reader takes */
    CHECK((t = sample_trace()));
    snprintf(t->device, sizeof t->device, "gpu\x1b]0;x\x07 0");
    CHECK_OK(hbm_trace_write(t, path));
    hbm_trace_free(t);
    CHECK_OK(hbm_trace_read(path, &r));
    CHECK(!strcmp(r->device, "gpu?]0;x? 0"));
    hbm_trace_free(r);
}

/* The exporters under every injected host-allocation failure: each run either fails with
 * HBM_ERR_NOMEM and says what it was writing, or writes exactly the bytes of a run without
 * one (a buffer that could not grow once wrote a shorter pprof profile and said nothing). */
typedef hbm_status (*export_fn)(const hbm_trace *, FILE *);

static hbm_status export_mem(export_fn fn, const hbm_trace *t, char **buf, size_t *len) {
    FILE *f = open_memstream(buf, len);
    if (!f) return HBM_ERR_IO;
    hbm_status s = fn(t, f);
    fclose(f);
    return s;
}

static void export_faults(export_fn fn, const hbm_trace *t, const char *what) {
    char *good = NULL, *buf = NULL;
    size_t ngood = 0, n = 0;
    int failures = test_failures_;
    CHECK_OK(export_mem(fn, t, &good, &ngood));
    size_t points = 0;
    for (uint64_t k = 1; k < 100000; k++) {
        hbm_debug_fail_host_alloc(k);
        hbm_status s = export_mem(fn, t, &buf, &n);
        uint64_t made = hbm_debug_fail_host_alloc(0);
        if (s == HBM_OK) {
            CHECK(n == ngood && !memcmp(buf, good, n));
        } else {
            CHECK_STATUS(s, HBM_ERR_NOMEM);
            CHECK_CONTAINS(hbm_last_error(), "out of host memory");
        }
        free(buf);
        buf = NULL;
        if (made < k) break; /* no failure was injected: every point is done */
        points++;
    }
    CHECK(points > 10);
    if (test_failures_ > failures) fprintf(stderr, "  (%s, %zu failure points)\n", what, points);
    free(good);
}

static void test_export_faults(void) {
    hbm_trace *t = sample_trace();
    CHECK(t != NULL);
    if (!t) return;
    export_faults(hbm_export_pprof, t, "pprof");
    export_faults(hbm_export_torch, t, "torch");
    hbm_trace_free(t);
    hbm_trace *r = NULL;
    CHECK_OK(hbm_trace_load(HBM_SOURCE_DIR "/fuzz/corpus/fuzz_trace/recorded.hbmt", &r));
    if (r) {
        export_faults(hbm_export_pprof, r, "pprof, recorded");
        export_faults(hbm_export_torch, r, "torch, recorded");
        hbm_trace_free(r);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hbm-test-trace-XXXXXX");
    if (!mkdtemp(tmpdir)) TEST_SKIP("cannot create a temporary directory");
    RUN(test_timeline);
    RUN(test_roundtrip);
    RUN(test_torn_and_bad);
    RUN(test_recorder_config);
    RUN(test_recorder_env);
    RUN(test_wrap_handle);
    RUN(test_streaming);
    RUN(test_recorder_streams);
    RUN(test_versions);
    RUN(test_device_fields);
    RUN(test_export_faults);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_done();
}
