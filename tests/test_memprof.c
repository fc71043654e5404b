/* test_memprof.c - the memory profile of XProf profiles (hbm/memprof.h): XProf's figures on
 * profiles built here (two allocators, steps, ties, a free of a block from before, damaged
 * events, none at all), and on the shared ROCm profile: every figure against the events'
 * own stats, ../shared/data/xprof/memory_truth.csv and truth.csv (the running module's temp
 * and outputs), the attribution, the trace made of it. */
#include <stdlib.h>

#include "hlo/hlo_internal.h"
#include "api/fleet_read.h"
#include "test.h"

/* --- a small XSpace writer ------------------------------------------------------------- */
typedef struct pb {
    unsigned char *p;
    size_t n, cap;
} pb;

static void pb_raw(pb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void pb_varint(pb *b, uint64_t v) {
    unsigned char t[10];
    size_t k = 0;
    while (v >= 0x80) t[k++] = (unsigned char)(v | 0x80), v >>= 7;
    t[k++] = (unsigned char)v;
    pb_raw(b, t, k);
}
static void pb_int(pb *b, unsigned field, uint64_t v) {
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, v);
}
static void pb_bytes(pb *b, unsigned field, const void *d, size_t n) {
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_raw(b, d, n);
}
static void pb_str(pb *b, unsigned field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
static void pb_msg(pb *b, unsigned field, pb *m) {
    pb_bytes(b, field, m->p, m->n);
    free(m->p);
    memset(m, 0, sizeof *m);
}
static void pb_double(pb *b, unsigned field, double d) {
    uint64_t v;
    memcpy(&v, &d, 8);
    pb_varint(b, (uint64_t)field << 3 | 1);
    unsigned char t[8];
    for (int k = 0; k < 8; k++) t[k] = (unsigned char)(v >> (8 * k));
    pb_raw(b, t, 8);
}

/* stat metadata ids of the host plane */
enum { S_ALLOC = 1, S_ALLOCATED, S_RESERVED, S_AVAILABLE, S_PEAK, S_REQ, S_ABYTES, S_ADDR, S_FRAG, S_GROUP, S_SHAPE,
       S_GPU0, S_GPU1, S_PROGRAM, S_NSTATS };
static const char *const snames[] = {"", "allocator_name", "bytes_allocated", "bytes_reserved", "bytes_available",
                                     "peak_bytes_in_use", "requested_bytes", "allocation_bytes", "addr",
                                     "fragmentation", "group_id", "shape", "GPU_0_bfc", "GPU_1_bfc",
                                     "program_id"};

typedef struct mev {
    int dealloc, gpu;
    uint64_t off_ps, allocated, reserved, peak, bytes, addr;
    int64_t group; /* -1 none */
    const char *damage; /* NULL, "string", "negative", "cut" */
    const char *shape;  /* a "shape" stat (TSL's kTensorShapes) */
    int64_t launch;     /* > 0: not a memory event but a kernel launch of this program id */
    double frag;        /* its fragmentation stat (0: 0.25) */
} mev;

static void add_meta(pb *plane, unsigned field, uint64_t id, const char *name) {
    pb v = {0}, e = {0};
    pb_int(&v, 1, id);
    pb_str(&v, 2, name);
    pb_int(&e, 1, id);
    pb_msg(&e, 2, &v);
    pb_msg(plane, field, &e);
}

static void stat_int(pb *ev, unsigned id, uint64_t v) {
    pb s = {0};
    pb_int(&s, 1, id);
    pb_int(&s, 3, v);
    pb_msg(ev, 4, &s);
}

/* An XSpace: a host plane with these memory events (and, with mem == 0, an ordinary event
 * only), and a device plane. */
static int ts_where; /* the line's timestamp: 0 before its events (as TSL writes it), 1 after
                      * them, 2 a wrong one before and the right one after (the last counts) */
static void build(pb *space, const mev *evs, size_t n) {
    pb plane = {0}, line = {0};
    pb_int(&plane, 1, 1);
    pb_str(&plane, 2, "/host:CPU");
    pb_int(&line, 1, 1);
    if (ts_where != 1) pb_int(&line, 3, ts_where ? 7 : 1000); /* timestamp_ns */
    for (size_t i = 0; i < n; i++) {
        const mev *m = &evs[i];
        pb ev = {0};
        if (m->launch > 0) { /* hipLaunchKernel with its program_id */
            pb_int(&ev, 1, 9);
            pb_int(&ev, 2, m->off_ps);
            pb_int(&ev, 3, 5);
            stat_int(&ev, S_PROGRAM, (uint64_t)m->launch);
            pb_msg(&line, 4, &ev);
            continue;
        }
        pb_int(&ev, 1, m->dealloc ? 2 : 1);
        pb_int(&ev, 2, m->off_ps);
        pb s = {0};
        pb_int(&s, 1, S_ALLOC);
        pb_int(&s, 7, m->gpu ? S_GPU1 : S_GPU0); /* a reference, as JAX writes it */
        pb_msg(&ev, 4, &s);
        if (m->damage && !strcmp(m->damage, "string")) {
            pb_int(&s, 1, S_ALLOCATED);
            pb_str(&s, 5, "many");
            pb_msg(&ev, 4, &s);
        } else if (m->damage && !strcmp(m->damage, "negative")) {
            pb_int(&s, 1, S_ALLOCATED);
            pb_int(&s, 4, (uint64_t)-5);
            pb_msg(&ev, 4, &s);
        } else {
            stat_int(&ev, S_ALLOCATED, m->allocated);
        }
        stat_int(&ev, S_RESERVED, m->reserved);
        stat_int(&ev, S_AVAILABLE, 1000000);
        stat_int(&ev, S_PEAK, m->peak);
        stat_int(&ev, S_REQ, m->bytes);
        stat_int(&ev, S_ABYTES, m->bytes);
        stat_int(&ev, S_ADDR, m->addr);
        pb_int(&s, 1, S_FRAG);
        pb_double(&s, 2, m->frag > 0 ? m->frag : 0.25);
        pb_msg(&ev, 4, &s);
        if (m->group >= 0) stat_int(&ev, S_GROUP, (uint64_t)m->group);
        if (m->shape) {
            pb_int(&s, 1, S_SHAPE);
            pb_str(&s, 5, m->shape);
            pb_msg(&ev, 4, &s);
        }
        if (m->damage && !strcmp(m->damage, "cut")) ev.n -= 3; /* a stat cut short */
        pb_msg(&line, 4, &ev);
    }
    pb ord = {0};
    pb_int(&ord, 1, 7); /* an event that is not a memory event */
    pb_int(&ord, 2, 5);
    pb_msg(&line, 4, &ord);
    if (ts_where) pb_int(&line, 3, 1000);
    pb_msg(&plane, 3, &line);
    if (n) {
        add_meta(&plane, 4, 1, "MemoryAllocation");
        add_meta(&plane, 4, 2, "MemoryDeallocation");
    }
    add_meta(&plane, 4, 7, "PyEval");
    add_meta(&plane, 4, 9, "hipLaunchKernel");
    for (unsigned k = 1; k < S_NSTATS; k++) add_meta(&plane, 5, k, snames[k]);
    pb_msg(space, 1, &plane);
    pb dev = {0};
    pb_str(&dev, 2, "/device:GPU:0");
    pb_msg(space, 1, &dev);
}

/* The /host:metadata plane: each module's HloProto (its HloModuleProto) under its program id. */
static void add_modules(pb *space, const char *const *texts, const int64_t *pids, const char *const *names, size_t n) {
    pb plane = {0};
    pb_str(&plane, 2, "/host:metadata");
    add_meta(&plane, 5, 1, "Hlo Proto");
    for (size_t k = 0; k < n; k++) {
        hbm_hlo_module *m;
        if (hbm_hlo_parse(texts[k], strlen(texts[k]), names[k], &m)) continue;
        uint8_t *mb;
        size_t ml;
        if (hbmi_proto_write_module(m, 0, &mb, &ml)) {
            hbm_hlo_module_free(m);
            continue;
        }
        hbm_hlo_module_free(m);
        pb hp = {0}, st = {0}, em = {0}, e = {0};
        pb_bytes(&hp, 1, mb, ml); /* HloProto.hlo_module */
        hbmi_free(mb);
        pb_int(&st, 1, 1);
        pb_msg(&st, 6, &hp);      /* bytes_value */
        pb_int(&em, 1, (uint64_t)pids[k]);
        pb_str(&em, 2, names[k]);
        pb_msg(&em, 5, &st);
        pb_int(&e, 1, (uint64_t)pids[k]);
        pb_msg(&e, 2, &em);
        pb_msg(&plane, 4, &e);
    }
    pb_msg(space, 1, &plane);
}

static hbm_memprof *open_events(const mev *evs, size_t n) {
    pb space = {0};
    build(&space, evs, n);
    hbm_memprof *mp = NULL;
    hbm_status s = hbm_memprof_open_mem(space.p, space.n, "t.xplane.pb", &mp);
    free(space.p);
    return s ? NULL : mp;
}

/* XProf's rules on two allocators: peak ties (the last), steps from group_id and the fix
 * for events without one, the allocations active at the peak, what was held from before. */
static void test_two_allocators(void) {
    const mev evs[] = {
        /* GPU 0: 100 held from before; a, b; b freed; c: the peak (350) is reached twice */
        {.off_ps = 1000, .allocated = 150, .peak = 400, .bytes = 50, .addr = 0xa, .group = -1},
        {.off_ps = 2000, .allocated = 350, .peak = 400, .bytes = 200, .addr = 0xb, .group = -1},
        {.dealloc = 1, .off_ps = 3000, .allocated = 150, .peak = 400, .bytes = 200, .addr = 0xb, .group = -1},
        {.off_ps = 4000, .allocated = 350, .peak = 400, .bytes = 200, .addr = 0xc, .group = -1, .shape = "bf16[8,128]"},
        {.dealloc = 1, .off_ps = 5000, .allocated = 250, .peak = 400, .bytes = 100, .addr = 0x1, .group = -1},
        /* GPU 1: steps 4 and 5; the peak in step 5 with a free of a block from step 4 */
        {.gpu = 1, .off_ps = 1500, .allocated = 10, .reserved = 5, .peak = 10, .bytes = 10, .addr = 0x10, .group = 4},
        {.gpu = 1, .off_ps = 2500, .allocated = 30, .reserved = 5, .peak = 30, .bytes = 20, .addr = 0x20, .group = 5},
        {.gpu = 1, .dealloc = 1, .off_ps = 2600, .allocated = 20, .reserved = 5, .peak = 30, .bytes = 10, .addr = 0x10, .group = 5},
        {.gpu = 1, .off_ps = 2700, .allocated = 60, .reserved = 5, .peak = 60, .bytes = 40, .addr = 0x30, .group = 5},
    };
    hbm_memprof *mp = open_events(evs, sizeof evs / sizeof *evs);
    CHECK(mp);
    CHECK_EQ_U64(hbm_memprof_allocator_count(mp), 2);
    const hbm_memprof_summary *a = hbm_memprof_allocator(mp, 0), *b = hbm_memprof_allocator(mp, 1);
    CHECK_STR(a->allocator, "GPU_0_bfc");
    CHECK_STR(b->allocator, "GPU_1_bfc");
    CHECK_EQ_U64(a->device_index, 0);
    CHECK_EQ_U64(b->device_index, 1);
    CHECK_EQ_U64(a->n_events, 5);
    CHECK_EQ_U64(a->n_allocations, 3);
    CHECK_EQ_U64(a->n_deallocations, 2);
    CHECK_EQ_U64(a->max_bytes_allocated, 350);
    CHECK_EQ_U64(a->max_peak_bytes_in_use, 400);
    CHECK_EQ_U64(a->peak_bytes_in_use, 350);
    CHECK_EQ_U64(a->peak_time_ps, 1000 * 1000 + 4000); /* the second time it reached 350 */
    CHECK_EQ_U64(a->peak_offset_ps, 3000);
    CHECK_EQ_U64(a->peak_event - a->first_event, 3);
    CHECK_EQ_U64(a->memory_capacity, 350 + 1000000);
    CHECK(a->peak_fragmentation == 0.25);
    CHECK_EQ_U64(a->peak_step, 0);
    CHECK_EQ_U64(a->held_before_bytes, 100);
    /* live at the peak: a and c; 100 from before */
    CHECK_EQ_U64(a->n_active, 2);
    size_t n;
    const hbm_memprof_event *ev = hbm_memprof_events(mp, &n);
    CHECK_EQ_U64(n, 9);
    CHECK_EQ_U64(ev[a->active[0].event].addr, 0xc); /* largest first */
    CHECK_STR(ev[a->active[0].event].tensor_shape, "bf16[8,128]");
    CHECK_STR(a->active[0].shape, "bf16[8,128]");
    CHECK_EQ_U64(ev[a->active[1].event].addr, 0xa);
    CHECK_EQ_U64(a->unmapped_bytes, 100);
    /* GPU 1: peak 65 (reserved counts) in step 5; active there: 0x20, 0x30; the free of
     * 0x10 (step 4's) is subtracted as XProf does */
    CHECK_EQ_U64(b->peak_bytes_in_use, 65);
    CHECK_EQ_U64(b->peak_reserved, 5);
    CHECK_EQ_U64(b->peak_step, 5);
    CHECK_EQ_U64(b->n_active, 2);
    CHECK_EQ_U64(b->unmapped_bytes, 0);
    CHECK_EQ_U64(hbm_memprof_find_device(mp, 1), 1);
    CHECK(hbm_memprof_find_device(mp, 2) < 0);
    /* text: one table of both, then each; --device-index of one it lacks names those it has */
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK_OK(hbm_memprof_write(mp, -1, 0, 10, 40, 1, f));
    fclose(f);
    CHECK_CONTAINS(out, "device  allocator");
    CHECK_CONTAINS(out, "Memory profile of GPU_1_bfc (device 1)");
    CHECK_CONTAINS(out, "allocator's peak  400B (its peak_bytes_in_use stat: 50B above the events' largest");
    free(out);
    f = open_memstream(&out, &len);
    CHECK_STATUS(hbm_memprof_write(mp, 3, 0, 10, 40, 1, f), HBM_ERR_INVALID);
    fclose(f);
    free(out);
    CHECK_CONTAINS(hbm_last_error(), "no allocator of device 3 in the memory profile (it has 0, 1)");
    /* the trace of GPU 0: the block from before, then its events */
    hbm_trace *t;
    CHECK_OK(hbm_memprof_trace(mp, 0, &t));
    CHECK_EQ_U64(t->count, 6);
    CHECK_EQ_U64(t->history_start, 1);
    CHECK_EQ_U64(t->events[0].size, 100); /* the block freed at 5000 ps, never allocated in it */
    CHECK_EQ_U64(t->events[0].addr, 0x1);
    CHECK_EQ_U64(t->live_before_bytes, 100);
    CHECK_EQ_U64(t->events[4].time_ns, 3);
    /* replay: both allocators in one table, each with its own peak (GPU 0: 100 held before,
     * then 50 + 200 live at once) */
    hbm_trace *t1;
    CHECK_OK(hbm_memprof_trace(mp, 1, &t1));
    const hbm_trace *both[] = {t, t1};
    out = NULL;
    f = open_memstream(&out, &len);
    int failed = -1;
    CHECK_OK(hbm_replay_devices_write(both, 2, "sim:1GiB", NULL, 0, f, &failed));
    fclose(f);
    CHECK_EQ_U64(failed, 0);
    CHECK_CONTAINS(out, "device  allocator        configuration");
    CHECK_CONTAINS(out, "\n0       GPU_0_bfc        allocator=bfc");
    CHECK_CONTAINS(out, "\n1       GPU_1_bfc        allocator=platform");
    free(out);
    hbm_trace_free(t1);
    hbm_trace_free(t);
    hbm_memprof_close(mp);
}

/* --json's timeline: at most 1000 points, XProf's boxes (2500 events: 500 of 2, 500 of 3),
 * each the largest of its box */
static void test_timeline_sampling(void) {
    enum { N = 2500 };
    mev *evs = calloc(N, sizeof *evs);
    for (size_t i = 0; i < N; i++)
        evs[i] = (mev){.off_ps = i * 10, .allocated = i + 1, .peak = i + 1, .bytes = 1, .addr = i + 1, .group = -1};
    hbm_memprof *mp = open_events(evs, N);
    free(evs);
    CHECK(mp);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK_OK(hbm_memprof_write(mp, -1, 1, 0, 72, 1, f));
    fclose(f);
    hbm_memprof_close(mp);
    const char *tl = strstr(out, "\"timeline\":[[");
    CHECK(tl);
    size_t points = 0;
    for (const char *c = tl + 12; *c && !(c[0] == ']' && c[1] == ']'); c++) points += *c == '[';
    CHECK_EQ_U64(points, 1000);
    CHECK_CONTAINS(tl, "\"timeline\":[[10,2,0],[30,4,0],");
    CHECK_CONTAINS(tl, "[9990,1000,0],[10020,1003,0],");   /* the last box of 2, the first of 3 */
    CHECK_CONTAINS(tl, ",[24990,2500,0]]");
    free(out);
}

/* Two modules run one after the other; the peak is at the second's temp allocation: its temp
 * and output (made for this execution), the first's output taken as its parameter, and an
 * array of no plan's size. The sizes come from hbm's plans of the modules. */
static void test_attribution_two_modules(void) {
    if (!hbm_proto_available()) {
        fprintf(stderr, "skip test_attribution_two_modules: hbm built without protobuf-c\n");
        return;
    }
    const char *ta = "HloModule jit_a, is_scheduled=true\n\nENTRY %main (p: f32[1024]) -> f32[1024] {\n"
                     "  %p = f32[1024]{0} parameter(0)\n  %c = f32[2048]{0} concatenate(%p, %p), dimensions={0}\n"
                     "  %e = f32[2048]{0} exponential(%c)\n  ROOT %r = f32[1024]{0} slice(%e), slice={[0:1024]}\n}\n";
    const char *tb = "HloModule jit_b, is_scheduled=true\n\nENTRY %main (p: f32[1024]) -> f32[2048] {\n"
                     "  %p = f32[1024]{0} parameter(0)\n  %c = f32[3072]{0} concatenate(%p, %p, %p), dimensions={0}\n"
                     "  %e = f32[3072]{0} exponential(%c)\n  ROOT %r = f32[2048]{0} slice(%e), slice={[0:2048]}\n}\n";
    const char *texts[] = {ta, tb}, *names[] = {"jit_a(1)", "jit_b(2)"};
    const int64_t pids[] = {1, 2};
    uint64_t temp[2], outb[2];
    for (int k = 0; k < 2; k++) {
        hbm_hlo_module *m;
        CHECK_OK(hbm_hlo_parse(texts[k], strlen(texts[k]), "t", &m));
        hbm_plan *p;
        CHECK_OK(hbm_plan_run(m, NULL, &p));
        hbm_plan_stats st;
        CHECK_OK(hbm_plan_get_stats(p, &st));
        temp[k] = st.temp_size_in_bytes;
        outb[k] = st.output_size_in_bytes;
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
    }
    /* sizes that tell the buffers apart (a test that can fail) */
    CHECK(temp[0] && temp[1] && temp[0] != temp[1] && temp[1] != outb[1] && temp[1] != outb[0] && outb[0] != 777);
    uint64_t u = 1000; /* in use before */
    const uint64_t odd = 777;
    mev evs[12];
    size_t n = 0;
#define ALLOC(t, b, a) (u += (b), evs[n++] = (mev){.off_ps = (t), .allocated = u, .peak = u, .bytes = (b), .addr = (a), .group = -1})
#define FREE(t, b, a) (u -= (b), evs[n++] = (mev){.dealloc = 1, .off_ps = (t), .allocated = u, .peak = u, .bytes = (b), .addr = (a), .group = -1})
    ALLOC(100, odd, 0x100);
    ALLOC(200, outb[0], 0xa1);
    ALLOC(210, temp[0], 0xa2);
    evs[n++] = (mev){.off_ps = 300, .launch = 1};
    FREE(400, temp[0], 0xa2);
    ALLOC(500, outb[1], 0xb1);
    ALLOC(510, temp[1], 0xb2);
    evs[n++] = (mev){.off_ps = 600, .launch = 2};
    FREE(700, temp[1], 0xb2);
#undef ALLOC
#undef FREE
    pb space = {0};
    build(&space, evs, n);
    add_modules(&space, texts, pids, names, 2);
    hbm_memprof *mp = NULL;
    hbm_status st = hbm_memprof_open_mem(space.p, space.n, "two.xplane.pb", &mp);
    free(space.p);
    CHECK_OK(st);
    CHECK_OK(hbm_memprof_attribute(mp));
    const hbm_memprof_summary *s = hbm_memprof_allocator(mp, 0);
    CHECK(s && s->attributed);
    CHECK_EQ_U64(s->peak_bytes_in_use, 1000 + odd + outb[0] + outb[1] + temp[1]);
    CHECK_EQ_U64(s->running_program_id, 2);
    CHECK_STR(s->running_module, "jit_b(2)");
    CHECK_EQ_U64(s->running_temp_bytes, temp[1]);
    CHECK_EQ_U64(s->n_active, 4);
    const hbm_memprof_event *ev = hbm_memprof_events(mp, NULL);
    int seen = 0;
    for (size_t k = 0; k < s->n_active; k++) {
        const hbm_memprof_active *a = &s->active[k];
        uint64_t addr = ev[a->event].addr;
        if (addr == 0xb2) { /* the running module's temp */
            CHECK_STR(a->kind, "temp");
            CHECK(a->current && a->sure == HBM_MEMPROF_SURE && a->program_id == 2);
            seen |= 1;
        } else if (addr == 0xb1) {
            CHECK_STR(a->kind, "output");
            CHECK(a->current && a->sure == HBM_MEMPROF_SURE);
            CHECK_STR(a->shape, "f32[2048]");
            seen |= 2;
        } else if (addr == 0xa1) { /* jit_a's output, jit_b's parameter */
            CHECK_STR(a->kind, "parameter");
            CHECK_STR(a->module, "jit_a(1)");
            CHECK(!a->current && a->program_id == 1);
            seen |= 4;
        } else if (addr == 0x100) { /* made before jit_a's launch, of no size of its plan */
            CHECK_STR(a->kind, "arrays kept between calls");
            CHECK(a->sure == HBM_MEMPROF_LIKELY && a->program_id == -1 && !a->current);
            CHECK_CONTAINS(a->why, "made before a launch of jit_a(1), but no temp or output of its plan has this size");
            seen |= 8;
        }
    }
    CHECK_EQ_U64(seen, 15);
    CHECK_EQ_U64(s->current_bytes, outb[1] + temp[1]);
    CHECK_EQ_U64(s->running_param_bytes, outb[0]);
    CHECK_EQ_U64(s->earlier_bytes, 0);
    CHECK_EQ_U64(s->kept_bytes, odd);
    CHECK_EQ_U64(s->unmapped_bytes, 1000);
    hbm_memprof_close(mp);
}

static void test_no_memory_events(void) {
    hbm_memprof *mp = open_events(NULL, 0);
    CHECK(mp);
    CHECK_EQ_U64(hbm_memprof_allocator_count(mp), 0);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK_OK(hbm_memprof_write(mp, -1, 0, 10, 40, 1, f));
    fclose(f);
    CHECK_CONTAINS(out, "no memory profile: the host plane ('/host:CPU') records no MemoryAllocation");
    CHECK_CONTAINS(out, "It holds 2 planes, 1 of them devices");
    free(out);
    hbm_memprof_close(mp);
}

static void test_damaged(void) {
    mev evs[] = {
        {.off_ps = 1000, .allocated = 150, .peak = 400, .bytes = 50, .addr = 0xa, .group = -1},
        {.off_ps = 2000, .allocated = 350, .peak = 400, .bytes = 200, .addr = 0xb, .group = -1},
    };
    pb space = {0};
    hbm_memprof *mp = NULL;
    evs[1].damage = "string";
    build(&space, evs, 2);
    CHECK_STATUS(hbm_memprof_open_mem(space.p, space.n, "d.xplane.pb", &mp), HBM_ERR_PARSE);
    free(space.p);
    CHECK_CONTAINS(hbm_last_error(), "d.xplane.pb: damaged memory event: MemoryAllocation #1 of line 0");
    CHECK_CONTAINS(hbm_last_error(), "stat 'bytes_allocated' holds a string, not an integer");
    memset(&space, 0, sizeof space);
    evs[1].damage = "negative";
    build(&space, evs, 2);
    CHECK_STATUS(hbm_memprof_open_mem(space.p, space.n, "d.xplane.pb", &mp), HBM_ERR_PARSE);
    free(space.p);
    CHECK_CONTAINS(hbm_last_error(), "stat 'bytes_allocated' is negative (-5 bytes)");
    memset(&space, 0, sizeof space);
    evs[1].damage = "cut";
    build(&space, evs, 2);
    CHECK_STATUS(hbm_memprof_open_mem(space.p, space.n, "d.xplane.pb", &mp), HBM_ERR_PARSE);
    free(space.p);
    CHECK_CONTAINS(hbm_last_error(), "MemoryAllocation #1 of line 0 of '/host:CPU' (at 0.001 ms): a stat is cut short "
                                     "(the one after 'addr')");
    /* every cut of a whole profile: an error or a profile, never a crash */
    memset(&space, 0, sizeof space);
    evs[1].damage = NULL;
    build(&space, evs, 2);
    for (size_t cut = 0; cut < space.n; cut++) {
        hbm_status s = hbm_memprof_open_mem(space.p, cut, "c.xplane.pb", &mp);
        if (!s) hbm_memprof_close(mp);
        CHECK(s == HBM_OK || s == HBM_ERR_PARSE);
    }
    free(space.p);
}

/* --- the shared profile ----------------------------------------------------------------- */
static void test_shared(void) {
    const char *dir = HBM_SHARED_DATA "/xprof";
    char path[4096], line[512];
    snprintf(path, sizeof path, "%s/memory_truth.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "skip test_shared: %s not found (the shared data set is absent)\n", path);
        return;
    }
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        char file[256], alloc[64];
        unsigned long long events, allocs, max_alloc, max_peak;
        if (sscanf(line, "%255[^,],%63[^,],%llu,%llu,%llu,%llu", file, alloc, &events, &allocs, &max_alloc,
                   &max_peak) != 6)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, file);
        hbm_memprof *mp;
        CHECK_OK(hbm_memprof_open(path, &mp));
        int k = -1;
        for (size_t a = 0; a < hbm_memprof_allocator_count(mp); a++)
            if (!strcmp(hbm_memprof_allocator(mp, a)->allocator, alloc)) k = (int)a;
        CHECK(k >= 0);
        const hbm_memprof_summary *s = hbm_memprof_allocator(mp, (size_t)k);
        /* the truth file's figures */
        CHECK_EQ_U64(s->n_events, events);
        CHECK_EQ_U64(s->n_allocations, allocs);
        CHECK_EQ_U64(s->max_bytes_allocated, max_alloc);
        CHECK_EQ_U64(s->max_peak_bytes_in_use, max_peak);
        /* each figure against the events' own stats */
        size_t n;
        const hbm_memprof_event *ev = hbm_memprof_events(mp, &n) + s->first_event;
        uint64_t top = 0, frees = 0;
        for (size_t i = 0; i < s->n_events; i++) {
            uint64_t use = ev[i].bytes_allocated + ev[i].bytes_reserved;
            if (use > top) top = use;
            frees += (uint64_t)ev[i].dealloc;
            CHECK(i == 0 || ev[i].time_ps >= ev[i - 1].time_ps);
        }
        CHECK_EQ_U64(s->n_deallocations, frees);
        CHECK_EQ_U64(s->peak_bytes_in_use, top);
        const hbm_memprof_event *pk = &hbm_memprof_events(mp, NULL)[s->peak_event];
        CHECK_EQ_U64(pk->bytes_allocated + pk->bytes_reserved, s->peak_bytes_in_use);
        CHECK_EQ_U64(s->memory_capacity, pk->bytes_allocated + pk->bytes_reserved + pk->bytes_available);
        CHECK(s->peak_fragmentation == pk->fragmentation);
        CHECK_EQ_U64(s->peak_bytes_usage_lifetime, ev[s->n_events - 1].peak_bytes_in_use);
        /* XProf's identity: the active allocations and the rest make the peak's figure */
        uint64_t live = 0;
        for (size_t a = 0; a < s->n_active; a++) live += hbm_memprof_events(mp, NULL)[s->active[a].event].allocation_bytes;
        CHECK_EQ_U64(live + s->unmapped_bytes, s->peak_allocated);
        if (!strcmp(file, "rocm_te_fused_attn.xplane.pb")) {
            /* this profile's own figures, read from its events by hand (docs/xprof.md) */
            CHECK_EQ_U64(s->n_active, 10);
            CHECK_EQ_U64(s->unmapped_bytes, 134219008);
            CHECK_EQ_U64(s->held_before_bytes, 234882304);
            CHECK_EQ_U64(s->memory_capacity, 299944250900ull);
        }
        if (hbm_proto_available()) {
            CHECK_OK(hbm_memprof_attribute(mp));
            CHECK(s->attributed);
            /* the running module and what its execution made: XLA's own figures (truth.csv) */
            snprintf(path, sizeof path, "%s/truth.csv", dir);
            FILE *t = fopen(path, "r");
            CHECK(t);
            char l2[512], tf[256], mod[256];
            unsigned long long arg, out, alias, temp, cst, nal;
            int found = 0;
            while (!found && fgets(l2, sizeof l2, t)) {
                size_t ml;
                found = sscanf(l2, "%255[^,],%255[^,],%llu,%llu,%llu,%llu,%llu,%llu", tf, mod, &arg, &out, &alias,
                               &temp, &cst, &nal) == 8 &&
                        !strcmp(tf, file) && !strncmp(s->running_module, mod, ml = strlen(mod)) &&
                        s->running_module[ml] == '(';
            }
            fclose(t);
            CHECK(found);
            CHECK_EQ_U64(s->running_temp_bytes, temp);
            CHECK_EQ_U64(s->running_output_bytes, out);
            CHECK_EQ_U64(s->running_argument_bytes, arg);
            uint64_t req_temp = 0, req_out = 0;
            for (size_t a = 0; a < s->n_active; a++) {
                const hbm_memprof_active *ac = &s->active[a];
                uint64_t r = hbm_memprof_events(mp, NULL)[ac->event].requested_bytes;
                CHECK(ac->program_id == s->running_program_id);
                if (!ac->current) continue;
                if (!strcmp(ac->kind, "temp")) {
                    req_temp += r;
                    CHECK(ac->sure == HBM_MEMPROF_SURE);
                }
                if (!strcmp(ac->kind, "output")) req_out += r;
            }
            CHECK_EQ_U64(req_temp, temp);
            CHECK_EQ_U64(req_out, out);
            /* earlier blocks taken as the running module's parameters: at most its arguments */
            CHECK(s->running_param_bytes <= arg);
            CHECK_EQ_U64(s->current_bytes + s->running_param_bytes + s->earlier_bytes + s->kept_bytes +
                             s->unmapped_bytes,
                         s->peak_allocated);
        }
        hbm_memprof_close(mp);
        rows++;
    }
    fclose(f);
    CHECK(rows > 0);
}


/* A profile of two devices as fleet ranks (issue 39): each allocator is a rank whose figures
 * are hbm view PROFILE's (XProf's, the memory profile's summary), read on two threads, and
 * the same again from its summary document. */
static void test_fleet_ranks(void) {
    const mev evs[] = {
        /* GPU 0: 100 held from before; the peak 350 at 4000 (fragmentation 0.4 there) */
        {.off_ps = 1000, .allocated = 150, .peak = 400, .bytes = 50, .addr = 0xa, .group = -1, .frag = 0.1},
        {.off_ps = 2000, .allocated = 300, .reserved = 20, .peak = 400, .bytes = 150, .addr = 0xb, .group = -1},
        {.dealloc = 1, .off_ps = 3000, .allocated = 150, .peak = 400, .bytes = 150, .addr = 0xb, .group = -1},
        {.off_ps = 4000, .allocated = 350, .peak = 400, .bytes = 200, .addr = 0xc, .group = -1, .frag = 0.4},
        {.dealloc = 1, .off_ps = 5000, .allocated = 250, .peak = 400, .bytes = 100, .addr = 0x1, .group = -1},
        /* GPU 1: reserved counts in XProf's peak (60 + 5 at 2700) */
        {.gpu = 1, .off_ps = 1500, .allocated = 10, .reserved = 5, .peak = 10, .bytes = 10, .addr = 0x10, .group = 4},
        {.gpu = 1, .off_ps = 2500, .allocated = 30, .reserved = 8, .peak = 30, .bytes = 20, .addr = 0x20, .group = 5},
        {.gpu = 1, .dealloc = 1, .off_ps = 2600, .allocated = 20, .reserved = 5, .peak = 30, .bytes = 10, .addr = 0x10, .group = 5},
        {.gpu = 1, .off_ps = 2700, .allocated = 60, .reserved = 5, .peak = 60, .bytes = 40, .addr = 0x30, .group = 5, .frag = 0.125},
    };
    pb space = {0};
    build(&space, evs, sizeof evs / sizeof *evs);
    char path[] = "/tmp/hbm_memprof_fleet_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        free(space.p);
        TEST_SKIP("no temporary file");
    }
    FILE *w = fdopen(fd, "wb");
    CHECK(w && fwrite(space.p, 1, space.n, w) == space.n);
    fclose(w);
    hbm_memprof *mp = NULL;
    CHECK_OK(hbm_memprof_open(path, &mp));
    CHECK_OK(hbm_memprof_attribute(mp));
    CHECK_EQ_U64(hbm_memprof_allocator_count(mp), 2);
    const hbm_memprof_event *ev = hbm_memprof_events(mp, NULL);
    const char *inputs[] = {path, path};
    hbm_fleet_options o;
    hbm_fleet_options_default(&o);
    o.jobs = 2;
    hbm_fleet *f = NULL;
    CHECK_OK(hbm_fleet_run(inputs, 2, &o, &f));
    /* and from the summary document: the same figures */
    char *doc = NULL;
    size_t len = 0;
    CHECK_OK(hbm_fleet_summary_string(path, &doc, &len)); /* the profile read once */
    CHECK(doc && len == strlen(doc));
    CHECK_CONTAINS(doc, "\"figures\": \"xprof\"");
    const char *docs[] = {doc};
    const char *names[] = {path};
    hbm_fleet *fs = NULL;
    CHECK_OK(hbm_fleet_from_summaries(docs, &len, names, 1, &o, &fs));
    CHECK_EQ_U64(hbm_fleet_ranks(f), 4);
    CHECK_EQ_U64(hbm_fleet_failed(f), 0);
    CHECK_EQ_U64(hbm_fleet_ranks(fs), 2);
    for (size_t k = 0; k < 4 && f && fs; k++) {
        const hbm_memprof_summary *a = hbm_memprof_allocator(mp, k % 2);
        const hbmi_rank *rs[] = {&f->ranks[k], &fs->ranks[k % 2]};
        for (int j = 0; j < 2; j++) {
            const hbmi_rank *r = rs[j];
            char nm[200];
            snprintf(nm, sizeof nm, "%s#%s", path, a->allocator);
            CHECK_STR(r->name, nm);
            CHECK_STR(r->device, a->allocator);
            CHECK_EQ_U64(r->device_index, a->device_index);
            CHECK_EQ_U64(r->events, a->n_events);
            CHECK_EQ_U64(r->allocs, a->n_allocations);
            CHECK_EQ_U64(r->frees, a->n_deallocations);
            CHECK_EQ_U64(r->peak_use, a->peak_bytes_in_use);
            CHECK_EQ_U64(r->peak_res, a->max_bytes_reserved);
            CHECK_EQ_U64(r->res_at_peak, a->peak_reserved);
            CHECK(hbmi_rank_frag(r) == a->peak_fragmentation);
            CHECK_EQ_U64(r->peak_event, a->peak_event - a->first_event);
            /* XProf's active allocations with its special rows (held from before, stack) */
            CHECK_EQ_U64(r->live_at_peak, a->n_active + (a->unmapped_bytes > 0) + (a->peak_reserved > 0));
            CHECK_EQ_U64(r->live_at_peak_bytes, a->peak_bytes_in_use);
            uint64_t sum = 0;
            for (size_t i = 0; i < r->nsites; i++) sum += r->sites[i].bytes;
            CHECK_EQ_U64(sum, a->peak_bytes_in_use);
            (void)ev;
        }
    }
    /* the figures themselves, from the events above */
    if (f && hbm_fleet_ranks(f) == 4) {
        CHECK_EQ_U64(f->ranks[0].peak_use, 350);   /* GPU 0: 350 + 0 at 4000 (320 at 2000) */
        CHECK_EQ_U64(f->ranks[0].peak_res, 20);    /* the largest bytes_reserved */
        CHECK_EQ_U64(f->ranks[0].res_at_peak, 0);
        CHECK(hbmi_rank_frag(&f->ranks[0]) == 0.4);
        CHECK_EQ_U64(f->ranks[1].peak_use, 65);    /* GPU 1: 60 + 5 */
        CHECK_EQ_U64(f->ranks[1].peak_res, 8);
        CHECK_EQ_U64(f->ranks[1].res_at_peak, 5);
        CHECK(hbmi_rank_frag(&f->ranks[1]) == 0.125);
        CHECK_STR(f->ranks[1].sites[f->ranks[1].nsites - 1].op, "stack (bytes_reserved at the peak)");
        CHECK_EQ_U64(f->ranks[1].sites[f->ranks[1].nsites - 1].bytes, 5);
        /* no module ran: the two allocations live at the peak are arrays kept between calls */
        CHECK_STR(f->ranks[0].sites[0].op, "arrays kept between calls");
        CHECK_EQ_U64(f->ranks[0].sites[0].bytes, 250);
        CHECK_EQ_U64(f->ranks[0].sites[0].buffers, 2);
        CHECK_STR(f->ranks[0].sites[1].op, "held from before the peak's step");
        CHECK_EQ_U64(f->ranks[0].sites[1].bytes, 100);
        CHECK_STR(f->ranks[f->worst].device, "GPU_0_bfc");
    }
    /* the memory profile's page: both devices' data, one of them, or one it lacks */
    char *page = NULL;
    size_t plen = 0;
    FILE *pf = open_memstream(&page, &plen);
    CHECK_OK(hbm_memprof_html(mp, -1, pf));
    fclose(pf);
    CHECK_CONTAINS(page, "<title>hbm memory profile: /tmp/hbm_memprof_fleet_");
    CHECK_CONTAINS(page, "{\"allocator\":\"GPU_0_bfc\"");
    CHECK_CONTAINS(page, "{\"allocator\":\"GPU_1_bfc\"");
    free(page);
    pf = open_memstream(&page, &plen);
    CHECK_OK(hbm_memprof_html(mp, 1, pf));
    fclose(pf);
    CHECK(page && !strstr(page, "GPU_0_bfc") && strstr(page, "GPU_1_bfc"));
    free(page);
    pf = open_memstream(&page, &plen);
    CHECK_STATUS(hbm_memprof_html(mp, 3, pf), HBM_ERR_INVALID);
    fclose(pf);
    free(page);
    char *js = NULL;
    CHECK_OK(hbm_fleet_format(f, HBM_FLEET_JSON, NULL, 0, &len));
    js = malloc(len + 1);
    CHECK_OK(hbm_fleet_format(f, HBM_FLEET_JSON, js, len + 1, &len));
    CHECK_CONTAINS(js, "\"peak_bytes_in_use\": 65, \"peak_event\": 3, \"peak_bytes_reserved\": 8");
    CHECK_CONTAINS(js, "\"fragmentation_at_peak\": 0.125000");
    free(js);
    hbm_string_free(doc);
    hbm_fleet_free(fs);
    hbm_fleet_free(f);
    hbm_memprof_close(mp);
    free(space.p);
    remove(path);
}

/* The line's timestamp after its events, or written twice (the last counts, as protobuf
 * reads a field given twice): the events' times and figures are those of the usual order
 * (the one-pass reader hands such lines to the whole-line reader). */
static void test_line_orders(void) {
    const mev evs[] = {
        {.off_ps = 1000, .allocated = 150, .peak = 150, .bytes = 50, .addr = 0xa, .group = -1},
        {.off_ps = 2000, .allocated = 350, .peak = 350, .bytes = 200, .addr = 0xb, .group = -1, .launch = 0},
        {.gpu = 1, .off_ps = 2500, .allocated = 30, .reserved = 8, .peak = 30, .bytes = 20, .addr = 0x20, .group = 5},
        {.dealloc = 1, .off_ps = 3000, .allocated = 150, .peak = 350, .bytes = 200, .addr = 0xb, .group = -1},
    };
    const size_t n = sizeof evs / sizeof *evs;
    hbm_memprof *want = open_events(evs, n);
    CHECK(want);
    for (ts_where = 1; ts_where <= 2 && want; ts_where++) {
        hbm_memprof *mp = open_events(evs, n);
        CHECK(mp);
        if (!mp) continue;
        size_t a, b;
        const hbm_memprof_event *x = hbm_memprof_events(want, &a), *y = hbm_memprof_events(mp, &b);
        CHECK_EQ_U64(b, a);
        for (size_t k = 0; k < a && k < b; k++) {
            CHECK_EQ_U64(y[k].time_ps, x[k].time_ps);
            CHECK_EQ_U64(y[k].bytes_allocated, x[k].bytes_allocated);
            CHECK_EQ_U64(y[k].allocator, x[k].allocator);
        }
        CHECK_EQ_U64(x[0].time_ps, 1000 * 1000 + 1000);
        CHECK_EQ_U64(hbm_memprof_allocator(mp, 0)->peak_bytes_in_use, 350);
        CHECK_EQ_U64(hbm_memprof_allocator(mp, 1)->peak_bytes_in_use, 38);
        hbm_memprof_close(mp);
    }
    ts_where = 0;
    hbm_memprof_close(want);
}

int main(void) {
    RUN(test_two_allocators);
    RUN(test_timeline_sampling);
    RUN(test_attribution_two_modules);
    RUN(test_no_memory_events);
    RUN(test_damaged);
    RUN(test_shared);
    RUN(test_fleet_ranks);
    RUN(test_line_orders);
    return test_done();
}
