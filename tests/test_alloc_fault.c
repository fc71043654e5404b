/* test_alloc_fault.c - allocators under injected failures.
 *
 * Device faults: the sim device refuses its Nth raw allocation (fail_at=N) or every one
 * after the Nth (fail_after=N), for N = 1.. past the last raw allocation of a clean run.
 * Host metadata faults, SQLite-style: hbm_debug_fail_host_alloc(N) fails the Nth host
 * allocation from now, for N = 1, 2, ... until a whole run makes fewer than N.
 * Each run opens a device and an allocator and runs a fixed sequence of tagged allocations
 * and frees. Every failure must be a clean status (HBM_ERR_OOM / HBM_ERR_NOMEM), leave the
 * stats and blocks as they were and hbm_check passing; nothing may leak (ASan's leak
 * checker watches the host side, the device's counters the device side). */
#include "test.h"

#include "core/internal.h"

#define NOPS 240

static const char *const configs[] = {
    "allocator=bfc,preallocate=false,limit=200MiB,release_on_oom=true",
    "allocator=bfc,preallocate=false,limit=200MiB,release_on_oom=false,initial_region=1MiB",
    "allocator=bfc,limit=200MiB",
    "allocator=platform,limit=200MiB",
};

static const char *const ops[] = {"matmul", "conv", "softmax", "add", "reduce", "gather", "scatter", "dot"};

static int count_blocks(void *user, const hbm_block *b) {
    ++*(uint64_t *)user;
    return 0;
}

/* One run of the sequence; counts failures by status. Returns 0 if a check failed. */
typedef struct outcome {
    int open_failed;
    uint64_t nomem, oom;
} outcome;

static int same_stats(const hbm_stats *a, const hbm_stats *b) {
    return a->num_allocs == b->num_allocs && a->num_frees == b->num_frees && a->bytes_in_use == b->bytes_in_use &&
           a->bytes_reserved == b->bytes_reserved && a->num_regions == b->num_regions &&
           a->largest_free_block_bytes == b->largest_free_block_bytes;
}

static void run_sequence(const char *dev_spec, const char *config, outcome *out) {
    memset(out, 0, sizeof *out);
    hbm_device *d = NULL;
    hbm_allocator *a = NULL;
    hbm_status s = hbm_device_open(dev_spec, &d);
    if (s) {
        CHECK(s == HBM_ERR_NOMEM && d == NULL);
        out->open_failed = 1;
        out->nomem++;
        return;
    }
    s = hbm_allocator_open(d, config, &a);
    if (s) {
        CHECK((s == HBM_ERR_NOMEM || s == HBM_ERR_OOM) && a == NULL);
        hbm_device_counters c;
        CHECK_OK(hbm_device_counters_get(d, &c));
        CHECK_EQ_U64(c.bytes_in_use, 0);
        hbm_device_close(d);
        out->open_failed = 1;
        if (s == HBM_ERR_NOMEM) out->nomem++;
        else out->oom++;
        return;
    }
    test_rng r = {0x5151};
    uint64_t live[NOPS];
    int nlive = 0;
    for (int i = 0; i < NOPS; i++) {
        if (nlive && test_below(&r, 3) == 0) {
            int k = (int)test_below(&r, (uint64_t)nlive);
            CHECK_OK(hbm_free(a, live[k]));
            live[k] = live[--nlive];
            continue;
        }
        uint64_t size = 1 + test_below(&r, 1ull << (10 + test_below(&r, 14))); /* up to 8 MiB */
        hbm_tag tag = {.op_name = ops[i % 8], .shape = "f32[8]", .source_line = i % 5};
        hbm_stats before, after;
        uint64_t nb0 = 0, nb1 = 0;
        CHECK_OK(hbm_stats_get(a, &before));
        hbm_status st = hbm_allocator_walk(a, count_blocks, &nb0);
        if (st == HBM_ERR_NOMEM) { /* platform's walk sorts in a host buffer */
            out->nomem++;
            nb0 = UINT64_MAX;
        } else {
            CHECK_OK(st);
        }
        uint64_t addr;
        s = hbm_alloc(a, size, &tag, &addr);
        if (s == HBM_OK) {
            live[nlive++] = addr;
            continue;
        }
        CHECK(s == HBM_ERR_NOMEM || s == HBM_ERR_OOM);
        CHECK(hbm_last_error()[0] != 0);
        if (s == HBM_ERR_NOMEM) out->nomem++;
        else out->oom++;
        CHECK_OK(hbm_check(a));
        CHECK_OK(hbm_stats_get(a, &after));
        CHECK(same_stats(&before, &after));
        CHECK_EQ_U64(after.num_ooms, before.num_ooms + (s == HBM_ERR_OOM));
        if (nb0 != UINT64_MAX && hbm_allocator_walk(a, count_blocks, &nb1) == HBM_OK) CHECK_EQ_U64(nb0, nb1);
    }
    CHECK_OK(hbm_check(a));
    s = hbm_allocator_trim(a);
    CHECK(s == HBM_OK);
    for (int k = 0; k < nlive; k++) CHECK_OK(hbm_free(a, live[k]));
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_in_use, 0);
    CHECK_OK(hbm_check(a));
    hbm_allocator_close(a);
    hbm_device_counters c;
    CHECK_OK(hbm_device_counters_get(d, &c));
    CHECK_EQ_U64(c.bytes_in_use, 0);
    hbm_device_close(d);
}

static void test_device_faults(void) {
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++) {
        /* raw allocations of a clean run */
        outcome o;
        hbm_device *d;
        run_sequence("sim:1GiB", configs[ci], &o);
        CHECK(!o.open_failed && o.nomem == 0);
        uint64_t clean_ooms = o.oom;
        CHECK_OK(hbm_device_open("sim:1GiB", &d));
        hbm_device_close(d);
        uint64_t raw = 0, any_oom = 0;
        {
            hbm_allocator *a;
            CHECK_OK(hbm_device_open("sim:1GiB", &d));
            CHECK_OK(hbm_allocator_open(d, configs[ci], &a));
            hbm_allocator_close(a);
            hbm_device_counters c;
            CHECK_OK(hbm_device_counters_get(d, &c));
            raw = c.alloc_calls;
            hbm_device_close(d);
        }
        for (uint64_t n = 1; n <= raw + 40; n++) {
            char spec[64];
            snprintf(spec, sizeof spec, "sim:1GiB,fail_at=%" PRIu64, n);
            run_sequence(spec, configs[ci], &o);
            CHECK(o.nomem == 0);
            any_oom += o.oom > clean_ooms;
            snprintf(spec, sizeof spec, "sim:1GiB,fail_after=%" PRIu64, n);
            run_sequence(spec, configs[ci], &o);
            CHECK(o.nomem == 0);
            any_oom += o.oom > clean_ooms;
        }
        /* a device that refuses everything: opening (preallocation) or every allocation fails */
        run_sequence("sim:1GiB,fail_every=1", configs[ci], &o);
        CHECK(o.nomem == 0);
        CHECK(o.open_failed || o.oom > clean_ooms);
        if (!strstr(configs[ci], "preallocate=false") && strstr(configs[ci], "bfc")) continue;
        if (!any_oom) fprintf(stderr, "%s: no injected device failure surfaced\n", configs[ci]);
    }
}

static void test_host_metadata_faults(void) {
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++) {
        uint64_t fired = 0, n;
        for (n = 1; n < 10000; n++) {
            outcome o;
            hbm_debug_fail_host_alloc(n);
            run_sequence("sim:1GiB", configs[ci], &o);
            uint64_t made = hbm_debug_fail_host_alloc(0);
            if (o.nomem) fired++;
            /* the injected failure must surface as HBM_ERR_NOMEM, never vanish */
            if (made >= n && !o.nomem)
                fprintf(stderr, "%s: host allocation %" PRIu64 " of %" PRIu64 " failed silently\n", configs[ci], n, made);
            CHECK(made < n || o.nomem);
            if (made < n) break; /* the run succeeded without reaching the Nth allocation */
        }
        fprintf(stderr, "     %s: %" PRIu64 " injected host failures, all clean\n", configs[ci], fired);
        CHECK(fired > 5);
    }
}

int main(void) {
    RUN(test_device_faults);
    RUN(test_host_metadata_faults);
    return test_done();
}
