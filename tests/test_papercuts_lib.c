/* test_papercuts_lib.c - the library side of issue 41's items (third round): what the CLI
 * refuses, the library refuses too. */
#include "hbm/hbm.h"
#include "test.h"

/* 1: an alignment that is not a power of two up to HBM_PLAN_ALIGNMENT_MAX is refused */
static void test_plan_alignment_bound(void) {
    hbm_hlo_module *m;
    CHECK_OK(hbm_hlo_open(HBM_SOURCE_DIR "/examples/svd_fixed.hlo", NULL, &m));
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    hbm_plan *p = NULL;
    const uint64_t bad[] = {3, 384, HBM_PLAN_ALIGNMENT_MAX << 1, (uint64_t)1 << 40, (uint64_t)1 << 63};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.alignment = bad[i];
        CHECK_STATUS(hbm_plan_run(m, &o, &p), HBM_ERR_INVALID);
        CHECK(p == NULL);
        CHECK(strstr(hbm_last_error(), "not a power of two up to 1073741824") != NULL);
    }
    o.alignment = HBM_PLAN_ALIGNMENT_MAX; /* the bound itself plans */
    CHECK_OK(hbm_plan_run(m, &o, &p));
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

/* 9: XLA's "BufferAssignment OOM Debugging." heading only for a module that does not fit */
static void test_report_heading(void) {
    hbm_hlo_module *m;
    CHECK_OK(hbm_hlo_open(HBM_SOURCE_DIR "/examples/svd_fixed.hlo", NULL, &m)); /* needs 492.26MiB */
    hbm_plan *p = NULL;
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    const struct {
        uint64_t capacity;
        double fraction;
        int oom;
    } cases[] = {{0, 0, 0}, {80ull << 30, 0.75, 0}, {1ull << 30, 0.75, 0}, {600ull << 20, 0.75, 1}, {1 << 20, 1.0, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        CHECK_OK(hbm_plan_report_target(p, f, 3, cases[i].capacity, cases[i].fraction));
        fclose(f);
        const char *want = cases[i].oom ? "BufferAssignment OOM Debugging.\nBufferAssignment stats:\n"
                                        : "Buffer assignment (XLA's stats and peak buffers, as hbm computes them):\n"
                                          "BufferAssignment stats:\n";
        CHECK(!strncmp(buf, want, strlen(want)));
        free(buf);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_OK(hbm_plan_report(p, f, 3)); /* no device: the neutral heading */
    fclose(f);
    CHECK(!strstr(buf, "OOM Debugging"));
    free(buf);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

int main(void) {
    RUN(test_report_heading);
    RUN(test_plan_alignment_bound);
    return test_done();
}
