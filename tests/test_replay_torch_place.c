/* test_replay_torch_place.c - the twin's segments never share addresses. It places a
 * segment where PyTorch's went; one it cannot place (PyTorch's was of another size) keeps
 * the simulated device's own address, which comes from the same range (sim: hands out
 * 0x7f0000000000 up) and can fall on a placed one: it must then go elsewhere, not give two
 * live blocks one address (a generated snapshot's twin stopped with "free of
 * 0x7f0000200000, which is not a live allocation"). Needs no shared data. */
#include "test.h"

static void test_unplaced_segment(void) {
    const uint64_t M = 1ull << 20, S = 0x7f0000000000ull;
    hbm_trace *t;
    CHECK_OK(hbm_trace_new(&t));
    snprintf(t->source, sizeof t->source, "torch");
    hbm_trace_event ev[] = {
        /* a small-pool segment the twin makes too (2 MiB): placed at S + 2 MiB */
        {.kind = HBM_EV_SEGMENT_ALLOC, .addr = S + 2 * M, .size = 2 * M},
        {.kind = HBM_EV_ALLOC, .addr = S + 2 * M, .size = 512, .requested = 512},
        /* PyTorch took 6 MiB for 5 MiB; the twin takes 20 MiB, at the device's address */
        {.kind = HBM_EV_SEGMENT_ALLOC, .addr = S + 4 * M, .size = 6 * M},
        {.kind = HBM_EV_ALLOC, .addr = S + 4 * M, .size = 5 * M, .requested = 5 * M},
        {.kind = HBM_EV_FREE, .addr = S + 2 * M, .size = 512},
        {.kind = HBM_EV_FREE, .addr = S + 4 * M, .size = 5 * M},
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) CHECK_OK(hbm_trace_add(t, &ev[i]));
    hbm_torch_match m;
    CHECK_OK(hbm_replay_torch_match(t, NULL, "sim:1GiB", &m));
    CHECK_EQ_U64(m.allocs, 2);
    CHECK_EQ_U64(m.allocs_same, 1); /* the first, at offset 0 of the placed segment */
    CHECK_EQ_U64(m.ooms_twin, 0);
    CHECK_EQ_U64(m.segments_same, 1);
    /* and as hbm replay runs it (the torch row, then the twin) */
    const char *cfg[] = {"allocator=torch"};
    FILE *null = fopen("/dev/null", "w");
    CHECK(null != NULL);
    if (null) {
        CHECK_OK(hbm_replay_run_write(t, "sim:1GiB", cfg, 1, null, 0, NULL));
        fclose(null);
    }
    hbm_trace_free(t);
}

int main(void) {
    RUN(test_unplaced_segment);
    return test_done();
}
