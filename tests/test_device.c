/* test_device.c - device specs, capacity accounting, fault injection, bad frees. */
#include "test.h"

static void test_specs(void) {
    hbm_device *d;
    hbm_device_info info;
    CHECK_OK(hbm_device_open("sim:80GiB", &d));
    CHECK_OK(hbm_device_info_get(d, &info));
    CHECK_STR(info.kind, "sim");
    CHECK_STR(info.name, "sim:80.00GiB");
    CHECK_EQ_U64(info.total_bytes, 80ULL << 30);
    hbm_device_close(d);
    CHECK_OK(hbm_device_open("sim:1GiB,name=gpu0,granularity=2MiB", &d));
    CHECK_OK(hbm_device_info_get(d, &info));
    CHECK_STR(info.name, "gpu0");
    CHECK_EQ_U64(info.granularity, 2u << 20);
    hbm_device_close(d);
    static const struct { const char *spec, *msg; hbm_status s; } bad[] = {
        {"sim", "expected KIND:ARGS", HBM_ERR_INVALID},
        {"sim:", "missing size", HBM_ERR_INVALID},
        {"sim:lots", "lots", HBM_ERR_INVALID},
        {"sim:0", "capacity must be > 0", HBM_ERR_INVALID},
        {"sim:1GiB,fail_at", "not key=value", HBM_ERR_INVALID},
        {"sim:1GiB,fail_at=x", "fail_at=x", HBM_ERR_INVALID},
        {"sim:1GiB,colour=red", "unknown option 'colour'", HBM_ERR_INVALID},
        {"sim:1GiB,granularity=3", "power of two", HBM_ERR_INVALID},
        {"sim:1GiB,free=2GiB", "exceeds the capacity", HBM_ERR_INVALID},
        {"tpu:0", "unknown kind 'tpu'", HBM_ERR_INVALID},
        {"cuda:-1", "not a GPU ordinal", HBM_ERR_INVALID},
        {"cuda:x", "not a GPU ordinal", HBM_ERR_INVALID},
        {"host:1GiB,free=1MiB", "sim devices only", HBM_ERR_INVALID},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d = (hbm_device *)1;
        CHECK_STATUS(hbm_device_open(bad[i].spec, &d), bad[i].s);
        CHECK(d == NULL);
        CHECK_CONTAINS(hbm_last_error(), bad[i].msg);
    }
}

static void test_sim_accounting(void) {
    hbm_device *d;
    CHECK_OK(hbm_device_open("sim:1MiB", &d));
    uint64_t a, b, c, fr, tot;
    CHECK_OK(hbm_device_alloc(d, 1000, &a)); /* accounted as 1024 (granularity 512) */
    CHECK_OK(hbm_device_alloc(d, 512 * 1024, &b));
    CHECK(a % 512 == 0 && b % 512 == 0 && b >= a + 1024);
    CHECK_OK(hbm_device_mem_info(d, &fr, &tot));
    CHECK_EQ_U64(tot, 1 << 20);
    CHECK_EQ_U64(fr, (1 << 20) - 1024 - 512 * 1024);
    CHECK_STATUS(hbm_device_alloc(d, 512 * 1024, &c), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "cannot allocate");
    CHECK_STATUS(hbm_device_free(d, a + 512), HBM_ERR_BAD_FREE);
    CHECK_OK(hbm_device_free(d, a));
    CHECK_STATUS(hbm_device_free(d, a), HBM_ERR_BAD_FREE); /* double free */
    CHECK_STATUS(hbm_device_alloc(d, 0, &c), HBM_ERR_INVALID);
    hbm_device_counters k;
    CHECK_OK(hbm_device_counters_get(d, &k));
    CHECK_EQ_U64(k.alloc_calls, 3);
    CHECK_EQ_U64(k.alloc_failures, 1);
    CHECK_EQ_U64(k.free_calls, 1);
    CHECK_EQ_U64(k.bytes_in_use, 512 * 1024);
    CHECK_EQ_U64(k.peak_bytes_in_use, 512 * 1024 + 1024);
    hbm_device_close(d); /* b is leaked on purpose: close gives it back */
}

static void test_sim_deterministic(void) {
    uint64_t first[8], second[8];
    for (int run = 0; run < 2; run++) {
        hbm_device *d;
        CHECK_OK(hbm_device_open("sim:1GiB", &d));
        for (int i = 0; i < 8; i++) CHECK_OK(hbm_device_alloc(d, (uint64_t)(i + 1) * 3000, run ? &second[i] : &first[i]));
        hbm_device_close(d);
    }
    for (int i = 0; i < 8; i++) CHECK_EQ_U64(first[i], second[i]);
}

static void test_fault_injection(void) {
    hbm_device *d;
    uint64_t a;
    CHECK_OK(hbm_device_open("sim:1GiB,fail_at=2", &d));
    CHECK_OK(hbm_device_alloc(d, 100, &a));
    CHECK_STATUS(hbm_device_alloc(d, 100, &a), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "injected failure of raw allocation #2");
    CHECK_OK(hbm_device_alloc(d, 100, &a));
    hbm_device_close(d);
    CHECK_OK(hbm_device_open("sim:1GiB,fail_every=3", &d));
    int fails = 0;
    for (int i = 0; i < 9; i++) fails += hbm_device_alloc(d, 100, &a) == HBM_ERR_OOM;
    CHECK(fails == 3);
    hbm_device_close(d);
    CHECK_OK(hbm_device_open("sim:1GiB,fail_after=2", &d));
    fails = 0;
    for (int i = 0; i < 5; i++) fails += hbm_device_alloc(d, 100, &a) == HBM_ERR_OOM;
    CHECK(fails == 3);
    hbm_device_close(d);
    /* free= models memory held by other processes */
    CHECK_OK(hbm_device_open("sim:10GiB,free=4GiB", &d));
    uint64_t fr;
    CHECK_OK(hbm_device_mem_info(d, &fr, NULL));
    CHECK_EQ_U64(fr, 4ULL << 30);
    CHECK_STATUS(hbm_device_alloc(d, 5ULL << 30, &a), HBM_ERR_OOM);
    CHECK_OK(hbm_device_alloc(d, 4ULL << 30, &a));
    hbm_device_close(d);
}

static void test_host(void) {
    hbm_device *d;
    uint64_t a, b;
    CHECK_OK(hbm_device_open("host:64MiB", &d));
    CHECK_OK(hbm_device_alloc(d, 1 << 20, &a));
    CHECK_OK(hbm_device_alloc(d, 3000, &b));
    memset((void *)(uintptr_t)a, 0xab, 1 << 20); /* real memory */
    memset((void *)(uintptr_t)b, 0xcd, 3000);
    CHECK(((unsigned char *)(uintptr_t)a)[(1 << 20) - 1] == 0xab);
    CHECK_STATUS(hbm_device_alloc(d, 64 << 20, &a), HBM_ERR_OOM);
    CHECK_OK(hbm_device_free(d, b));
    hbm_device_close(d);
}

int main(void) {
    RUN(test_specs);
    RUN(test_sim_accounting);
    RUN(test_sim_deterministic);
    RUN(test_fault_injection);
    RUN(test_host);
    return test_done();
}
