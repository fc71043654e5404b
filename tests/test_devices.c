/* test_devices.c - GPUs as the driver reports them, and the memory XLA's GPU client lets its
 * BFC allocator use under a fraction (xla/pjrt/gpu/gpu_helpers.cc: total x fraction as a
 * size_t, rounded up to 2 MiB), with the fraction advice checked against that rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/hbm.h"
#include "hbm/plan.h"
#include "test.h"

#define MIB (1ull << 20)
#define H200 150754820096ull /* cuMemGetInfo's total on the H200 measured (docs/gpu.md) */

static void test_driver_totals(void) {
    const hbm_device_model *d = hbm_device_model_find("A100-40GB");
    CHECK(d && d->capacity_bytes == 42298834944ull); /* deviceQuery's 40339 MBytes, not 40 GiB */
    CHECK(d && strstr(d->note, "driver's 39.39 GiB"));
    d = hbm_device_model_find("a100-80g");
    CHECK(d && d->capacity_bytes == 81152 * MIB); /* PyTorch's "79.25 GiB total capacity" */
    d = hbm_device_model_find("h200");
    CHECK(d && d->capacity_bytes == H200 && !strcmp(d->name, "H200-141GB"));
    d = hbm_device_model_find("t4");
    CHECK(d && d->capacity_bytes == 15104 * MIB); /* 14.75 GiB, not nvidia-smi's 15360 MiB */
}

static void test_xla_rule_h200(void) {
    /* JAX's default .75: 113,066,115,072 B, rounded up to 2 MiB: 113,067,950,080 (107,830 MiB).
     * JAX 0.11 preallocated 112,583,507,968 there: the rule leaves 462.00 MiB unexplained */
    CHECK_EQ_U64(hbm_xla_gpu_limit(H200, 0.75), 113067950080ull);
    CHECK_EQ_U64(hbm_xla_gpu_limit(H200, 0.75) - 112583507968ull, 484442112ull);
    CHECK_EQ_U64(hbm_xla_gpu_limit(H200, 0.028), 4221566976ull); /* 4,026 MiB */
    CHECK_EQ_U64(hbm_xla_gpu_limit(H200, 1.0), H200);
    CHECK_EQ_U64(hbm_xla_gpu_limit(H200, 0), H200);
    CHECK_EQ_U64(hbm_xla_gpu_limit(1, 0.75), 0); /* 0.75 B as a size_t: nothing */
    CHECK_EQ_U64(hbm_xla_gpu_limit(3 * MIB, 0.5), 2 * MIB);
    CHECK_EQ_U64(hbm_xla_gpu_limit(3 * MIB, 0.9), 3 * MIB); /* the rounding never passes the total */
}

static void test_fraction_checked(void) {
    uint64_t total = 39ull << 30, need = 41472000000ull;
    CHECK(hbm_xla_gpu_fraction_for(need, total) == 0.0); /* .99 gives 41,458,597,888 B */
    char buf[256];
    CHECK(hbmi_fraction_setting(buf, sizeof buf, need, total) == 0);
    CHECK_STR(buf, "XLA_PYTHON_CLIENT_ALLOCATOR=platform (no fraction fits: the module needs 38.62GiB, "
                     "XLA_PYTHON_CLIENT_MEM_FRACTION=.99 gives 38.61GiB under XLA's rule and 38.44GiB as JAX "
                     "0.11 gave on an H200, short by 182.79MiB)");
    total = 40ull << 30;
    double fr = hbm_xla_gpu_fraction_for(need, total);
    CHECK(fr == 0.97 && hbm_xla_gpu_limit(total, fr) >= need && hbm_xla_gpu_limit(total, 0.96) < need);
    CHECK(hbmi_xla_gpu_limit_seen(total, fr) >= need);
    /* a need XLA's rule holds at .97 but not 0.43 % lower, as JAX 0.11 gave on the H200: .98 */
    uint64_t tight = hbm_xla_gpu_limit(total, 0.97) - (50ull << 20);
    CHECK(hbmi_xla_gpu_limit_seen(total, 0.97) < tight && hbm_xla_gpu_fraction_for(tight, total) == 0.98);
    CHECK(hbmi_fraction_setting(buf, sizeof buf, need, total) == 1);
    CHECK_STR(buf, "XLA_PYTHON_CLIENT_MEM_FRACTION=.97 (or XLA_PYTHON_CLIENT_ALLOCATOR=platform)");
    char fs[16];
    CHECK_STR(hbm_fraction_text(0.05, fs, sizeof fs), ".05");
    CHECK_STR(hbm_fraction_text(1.0, fs, sizeof fs), "1");
}

/* The OOM report of hbm's BFC under JAX's default: the fraction it names holds the need under
 * XLA's rule; past .99 it names the platform allocator instead of a fraction that fails. */
static void test_oom_fraction_checked(void) {
    hbm_device *d;
    hbm_allocator *a;
    uint64_t p[3];
    hbm_oom_diagnosis g;
    CHECK_OK(hbm_device_open("sim:80GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=bfc", &a));
    CHECK_OK(hbm_alloc(a, 40ULL << 30, NULL, &p[0]));
    CHECK_OK(hbm_alloc(a, 15ULL << 30, NULL, &p[1]));
    CHECK_STATUS(hbm_alloc(a, 8ULL << 30, NULL, &p[2]), HBM_ERR_OOM);
    CHECK_OK(hbm_oom_diagnose(a, &g));
    /* 63 GiB: .79 x 80 GiB = 63.2 GiB holds it under XLA's rule, but not 0.43 % lower (62.93
     * GiB), as JAX 0.11 gave on the H200; .80 holds it under both */
    CHECK_STR(g.env, "XLA_PYTHON_CLIENT_MEM_FRACTION=.80");
    CHECK(hbm_xla_gpu_limit(80ULL << 30, 0.79) >= 63ULL << 30 && hbmi_xla_gpu_limit_seen(80ULL << 30, 0.79) < 63ULL << 30);
    CHECK(hbmi_xla_gpu_limit_seen(80ULL << 30, 0.80) >= 63ULL << 30);
    /* 79.5 GiB of 80: .99 gives 79.2 GiB, the device has the room */
    CHECK_STATUS(hbm_alloc(a, (49ULL << 29), NULL, &p[2]), HBM_ERR_OOM);
    CHECK_OK(hbm_oom_diagnose(a, &g));
    CHECK_STR(g.env, "XLA_PYTHON_CLIENT_ALLOCATOR=platform");
    CHECK_STR(g.config, "allocator=platform");
    char *r = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&r, &n);
    CHECK(m && hbm_oom_report_write(a, m) == HBM_OK);
    if (m) fclose(m);
    CHECK_CONTAINS(r, "  Try: XLA_PYTHON_CLIENT_ALLOCATOR=platform\n"
                      "  (no fraction fits: XLA_PYTHON_CLIENT_MEM_FRACTION=.99 gives 79.20GiB under XLA's rule and 78.86GiB as\n"
                      "  JAX 0.11 gave on an H200, short by 654.74MiB)\n"); /* 81,408 MiB less 78.86 GiB */
    free(r);
    hbm_allocator_close(a);
    hbm_device_close(d);
}

int main(void) {
    RUN(test_driver_totals);
    RUN(test_xla_rule_h200);
    RUN(test_fraction_checked);
    RUN(test_oom_fraction_checked);
    return test_done();
}
