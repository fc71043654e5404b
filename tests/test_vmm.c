/* test_vmm.c - the vmm (expandable segments) model on sim devices: page accounting,
 * growth and shrink, page-granularity fragmentation, a randomized check against a page
 * model, and fault injection. */
#include "core/internal.h"
#include "test.h"

#define PG (2ull << 20)

static void test_pages(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=vmm,limit=64MiB", &a));
    CHECK_STR(hbm_allocator_name(a), "vmm");
    uint64_t x, y, z;
    hbm_stats st;
    CHECK_OK(hbm_alloc(a, 1000, NULL, &x));
    CHECK_OK(hbm_alloc(a, 3 << 20, NULL, &y)); /* over half a page: 4 MiB, page-aligned */
    CHECK(y % PG == 0);
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_in_use, 1024 + (4u << 20));
    CHECK_EQ_U64(st.bytes_reserved, 3 * PG);
    CHECK_EQ_U64(st.num_regions, 3);
    CHECK_EQ_U64(st.bytes_limit, 64u << 20);
    hbm_device_counters c;
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 3 * PG); /* each page is a raw allocation of the sim device */
    CHECK_OK(hbm_alloc(a, 4096, NULL, &z)); /* shares x's page */
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 3 * PG);
    CHECK_OK(hbm_free(a, y));
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 3 * PG); /* cached until trim or pressure */
    CHECK_EQ_U64(st.largest_free_block_bytes, 2 * PG);
    CHECK_OK(hbm_allocator_trim(a));
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, PG);
    CHECK_STATUS(hbm_free(a, y), HBM_ERR_BAD_FREE);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 0);
    hbm_device_close(d);
    /* host: devices have no virtual memory model */
    CHECK_OK(hbm_device_open("host:64MiB", &d));
    CHECK_STATUS(hbm_allocator_open(d, "allocator=vmm", &a), HBM_ERR_UNSUPPORTED);
    hbm_device_close(d);
}

/* Fragmentation a one-range allocator cannot escape: free every other 2 MiB block of a
 * full pool, then ask for 4 MiB. vmm unmaps the idle pages and maps them elsewhere. */
static void test_no_fragmentation(void) {
    hbm_device *d;
    hbm_allocator *a;
    CHECK_OK(hbm_device_open("sim:1GiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=vmm,limit=16MiB", &a));
    uint64_t p[8], big;
    for (int i = 0; i < 8; i++) CHECK_OK(hbm_alloc(a, PG, NULL, &p[i]));
    for (int i = 0; i < 8; i += 2) CHECK_OK(hbm_free(a, p[i]));
    CHECK_OK(hbm_alloc(a, 2 * PG, NULL, &big));
    CHECK_OK(hbm_alloc(a, 2 * PG, NULL, &big));
    CHECK_STATUS(hbm_alloc(a, PG, NULL, &big), HBM_ERR_OOM); /* now really full */
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 16u << 20);
    char buf[8192];
    size_t len;
    CHECK_OK(hbm_oom_report_format(a, buf, sizeof buf, &len));
    CHECK_CONTAINS(buf, "allocator vmm");
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
}

/* Random traffic against a page model: live blocks never overlap, every page under a
 * live block is mapped, and an allocation must succeed whenever the pages it could need
 * fit beside the pages live blocks touch (fragmentation only at page granularity). */
typedef struct rb { uint64_t addr, size; } rb;

static uint64_t pages_touched(const rb *l, size_t n) {
    /* distinct pages under live blocks (addresses relative to any page-aligned base) */
    uint64_t *pg = malloc(sizeof *pg * 4096), np = 0;
    for (size_t i = 0; i < n; i++)
        for (uint64_t q = l[i].addr / PG; q <= (l[i].addr + l[i].size - 1) / PG; q++) {
            int seen = 0;
            for (uint64_t k = 0; k < np && !seen; k++) seen = pg[k] == q;
            if (!seen && np < 4096) pg[np++] = q;
        }
    free(pg);
    return np;
}

static void test_random(void) {
    for (uint64_t seed = 1; seed <= 4; seed++) {
        hbm_device *d;
        hbm_allocator *a;
        CHECK_OK(hbm_device_open("sim:1GiB", &d));
        CHECK_OK(hbm_allocator_open(d, "allocator=vmm,limit=64MiB", &a));
        test_rng r = {seed * 104729};
        rb live[128];
        size_t n = 0;
        uint64_t limit_pages = 32;
        for (int step = 0; step < 3000; step++) {
            if (test_below(&r, 2) == 0 && n < 128) {
                uint64_t size = test_below(&r, 3) ? 1 + test_below(&r, 256 << 10) : 1 + test_below(&r, 5 << 20);
                uint64_t held = size > PG / 2 ? hbmi_align_up(size, PG) : hbmi_align_up(size, 512);
                uint64_t used = pages_touched(live, n), worst = held / PG + 1;
                uint64_t x;
                hbm_status s = hbm_alloc(a, size, NULL, &x);
                if (used + worst <= limit_pages) CHECK_OK(s);
                if (s == HBM_ERR_OOM) continue;
                CHECK_OK(s);
                for (size_t i = 0; i < n; i++) CHECK(x + held <= live[i].addr || live[i].addr + live[i].size <= x);
                live[n++] = (rb){x, held};
            } else if (n) {
                size_t i = test_below(&r, n);
                CHECK_OK(hbm_free(a, live[i].addr));
                live[i] = live[--n];
            }
            if (step % 50 == 0) CHECK_OK(hbm_check(a));
            if (step % 700 == 0) CHECK_OK(hbm_allocator_trim(a));
            hbm_stats st;
            CHECK_OK(hbm_stats_get(a, &st));
            CHECK(st.bytes_reserved <= st.bytes_limit);
            CHECK(st.bytes_reserved >= pages_touched(live, n) * PG);
        }
        CHECK_OK(hbm_check(a));
        hbm_allocator_close(a);
        hbm_device_close(d);
    }
}

static void test_faults(void) {
    hbm_device *d;
    hbm_allocator *a;
    /* the device fails the 3rd page: a 3-page block is refused, nothing leaks */
    CHECK_OK(hbm_device_open("sim:1GiB,fail_at=3", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=vmm,limit=64MiB", &a));
    uint64_t x;
    CHECK_STATUS(hbm_alloc(a, 5 << 20, NULL, &x), HBM_ERR_OOM);
    CHECK_CONTAINS(hbm_last_error(), "injected");
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_reserved, 0);
    CHECK_OK(hbm_check(a));
    CHECK_OK(hbm_alloc(a, 5 << 20, NULL, &x));
    hbm_allocator_close(a);
    hbm_device_close(d);
    /* the device has less free memory than the limit (others hold it): idle pages go back */
    CHECK_OK(hbm_device_open("sim:8MiB", &d));
    CHECK_OK(hbm_allocator_open(d, "allocator=vmm,limit=8MiB", &a));
    uint64_t p[4];
    for (int i = 0; i < 4; i++) CHECK_OK(hbm_alloc(a, PG, NULL, &p[i]));
    CHECK_OK(hbm_free(a, p[1]));
    CHECK_OK(hbm_free(a, p[3]));
    CHECK_OK(hbm_alloc(a, 2 * PG, NULL, &x));
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_close(d);
    /* host metadata failures */
    for (uint64_t n = 1; n < 100; n++) {
        CHECK_OK(hbm_device_open("sim:1GiB", &d));
        hbm_debug_fail_host_alloc(n);
        hbm_status s = hbm_allocator_open(d, "allocator=vmm,limit=64MiB", &a);
        int done = 0;
        if (!s) {
            uint64_t q[30];
            int k = 0;
            for (; k < 30; k++)
                if ((s = hbm_alloc(a, (uint64_t)(k % 5 + 1) * 300000, NULL, &q[k]))) break;
            CHECK(s == HBM_OK || s == HBM_ERR_NOMEM);
            hbm_debug_fail_host_alloc(0);
            CHECK_OK(hbm_check(a));
            for (int j = 0; j < k; j++) CHECK_OK(hbm_free(a, q[j]));
            CHECK_OK(hbm_allocator_trim(a));
            CHECK_OK(hbm_check(a));
            done = s == HBM_OK;
            hbm_allocator_close(a);
        } else {
            CHECK_STATUS(s, HBM_ERR_NOMEM);
        }
        hbm_debug_fail_host_alloc(0);
        hbm_device_counters c;
        CHECK_OK(hbm_device_counters_get(d, &c));
        CHECK_EQ_U64(c.bytes_in_use, 0);
        hbm_device_close(d);
        if (done) break;
    }
}

int main(void) {
    RUN(test_pages);
    RUN(test_no_fragmentation);
    RUN(test_random);
    RUN(test_faults);
    return test_done();
}
