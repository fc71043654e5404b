/* test_timeline.c - the shared timeline: peaks, verification, the transformer workload
 * and running a timeline against an allocator. */
#include "core/internal.h"
#include "test.h"

static void test_add_and_peak(void) {
    hbm_timeline *tl;
    CHECK_OK(hbm_timeline_new(&tl));
    uint64_t peak = 1;
    int64_t at = 1;
    CHECK_OK(hbm_timeline_peak(tl, &peak, &at));
    CHECK_EQ_U64(peak, 0);
    hbm_tag t = {.op_name = "fusion.3", .shape = "f32[1024]", .category = HBM_CAT_TEMP};
    size_t i;
    CHECK_OK(hbm_timeline_add(tl, 100, 0, 5, &t, &i));
    CHECK_EQ_U64(i, 0);
    CHECK_OK(hbm_timeline_add(tl, 50, 5, 9, NULL, &i)); /* starts as the first ends: no overlap */
    CHECK_OK(hbm_timeline_add(tl, 30, 3, 6, &t, &i));
    CHECK_OK(hbm_timeline_peak(tl, &peak, &at));
    CHECK_EQ_U64(peak, 130);
    CHECK_EQ_U64(at, 3);
    CHECK_STR(hbm_timeline_tag(tl, 0)->op_name, "fusion.3");
    CHECK(hbm_timeline_tag(tl, 1) == NULL);
    CHECK_EQ_U64(tl->buffers[0].tag, tl->buffers[2].tag); /* interned once */
    CHECK_STATUS(hbm_timeline_add(tl, 0, 0, 1, NULL, NULL), HBM_ERR_INVALID);
    CHECK_STATUS(hbm_timeline_add(tl, 1, 4, 4, NULL, NULL), HBM_ERR_INVALID);
    hbm_timeline_free(tl);
}

static void test_verify(void) {
    hbm_timeline *tl;
    CHECK_OK(hbm_timeline_new(&tl));
    CHECK_OK(hbm_timeline_add(tl, 100, 0, 5, NULL, NULL));
    CHECK_OK(hbm_timeline_add(tl, 100, 2, 8, NULL, NULL));
    CHECK_OK(hbm_timeline_add(tl, 100, 5, 9, NULL, NULL));
    CHECK_STATUS(hbm_timeline_verify(tl, 0), HBM_ERR_CORRUPT); /* no offsets yet */
    tl->buffers[0].offset = 0;
    tl->buffers[1].offset = 100;
    tl->buffers[2].offset = 0; /* reuses buffer 0's space after it ends */
    CHECK_OK(hbm_timeline_verify(tl, 200));
    CHECK_EQ_U64(hbm_timeline_extent(tl), 200);
    CHECK_STATUS(hbm_timeline_verify(tl, 199), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "exceeds capacity");
    tl->buffers[2].offset = 150; /* overlaps buffer 1 in time and space */
    CHECK_STATUS(hbm_timeline_verify(tl, 0), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "overlap");
    tl->buffers[2].offset = 200;
    tl->buffers[2].alignment = 256;
    CHECK_STATUS(hbm_timeline_verify(tl, 0), HBM_ERR_CORRUPT);
    CHECK_CONTAINS(hbm_last_error(), "alignment");
    hbm_timeline_free(tl);
}

/* Verification against brute force on random small instances. */
static void test_verify_random(void) {
    test_rng r = {7};
    for (int round = 0; round < 300; round++) {
        hbm_timeline *tl;
        CHECK_OK(hbm_timeline_new(&tl));
        int n = 1 + (int)test_below(&r, 12);
        for (int i = 0; i < n; i++) {
            int64_t s = (int64_t)test_below(&r, 10);
            CHECK_OK(hbm_timeline_add(tl, 1 + test_below(&r, 50), s, s + 1 + (int64_t)test_below(&r, 5), NULL, NULL));
            tl->buffers[i].offset = test_below(&r, 120);
        }
        int overlap = 0;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                hbm_tl_buffer *a = &tl->buffers[i], *b = &tl->buffers[j];
                if (a->start < b->end && b->start < a->end && a->offset < b->offset + b->size &&
                    b->offset < a->offset + a->size)
                    overlap = 1;
            }
        CHECK_STATUS(hbm_timeline_verify(tl, 0), overlap ? HBM_ERR_CORRUPT : HBM_OK);
        hbm_timeline_free(tl);
    }
}

static void test_transformer(void) {
    hbm_transformer_spec s;
    hbm_transformer_spec_default(&s);
    hbm_timeline *tl;
    CHECK_OK(hbm_workload_transformer(&s, &tl));
    /* 24 layers x 4 matrices + embedding, each with m and v and a gradient; 4 saved
     * activations per layer, logits and 24 + 1 grad_input buffers */
    CHECK_EQ_U64(tl->count, 97 * 4 + 24 * 4 + 1 + 25);
    uint64_t peak;
    CHECK_OK(hbm_timeline_peak(tl, &peak, NULL));
    CHECK(peak > (60ULL << 30) && peak < (62ULL << 30)); /* the demo relies on this */
    s.layers = 0;
    CHECK_STATUS(hbm_workload_transformer(&s, &tl), HBM_ERR_INVALID);
    hbm_timeline_free(tl);
}

static void test_run(void) {
    hbm_transformer_spec s;
    hbm_transformer_spec_default(&s);
    s.layers = 2;
    s.d_model = 64;
    s.seq_len = 16;
    s.vocab = 100;
    hbm_timeline *tl;
    CHECK_OK(hbm_workload_transformer(&s, &tl));
    uint64_t peak;
    CHECK_OK(hbm_timeline_peak(tl, &peak, NULL));
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:1GiB,granularity=1", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=platform", &a));
    hbm_run_result r;
    CHECK_OK(hbm_timeline_run(tl, a, &r));
    CHECK_EQ_U64(r.events, 2 * tl->count);
    CHECK_EQ_U64(r.peak_in_use, peak); /* platform holds exactly what is live */
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_in_use, 0);
    hbm_allocator_close(a);
    /* a limit below the peak: the run stops at the buffer that crosses it */
    CHECK_OK(hbm_allocator_open(d, "allocator=platform,limit=100000", &a));
    CHECK_STATUS(hbm_timeline_run(tl, a, &r), HBM_ERR_OOM);
    CHECK(r.failed_buffer < tl->count);
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_in_use, 0); /* everything given back */
    hbm_allocator_close(a);
    hbm_device_close(d);
    hbm_timeline_free(tl);
}

static void test_faults(void) {
    for (uint64_t n = 1;; n++) {
        hbm_transformer_spec s;
        hbm_transformer_spec_default(&s);
        s.layers = 1;
        hbm_timeline *tl = NULL;
        hbm_debug_fail_host_alloc(n);
        hbm_status st = hbm_workload_transformer(&s, &tl);
        hbm_debug_fail_host_alloc(0);
        if (!st) {
            hbm_timeline_free(tl);
            break;
        }
        CHECK(st == HBM_ERR_NOMEM && tl == NULL);
        CHECK(n < 1000);
    }
}

int main(void) {
    RUN(test_add_and_peak);
    RUN(test_verify);
    RUN(test_verify_random);
    RUN(test_transformer);
    RUN(test_run);
    RUN(test_faults);
    return test_done();
}
