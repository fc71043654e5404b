/* test_replay_repeat.c - a replay depends on its request alone: the same request replayed
 * twice in one process writes the same bytes. The torch allocator's expandable segments
 * take their virtual ranges from a counter of the allocator's own (a process-wide one
 * moved the second replay's ranges, and its OOM report printed other addresses), and vmm's
 * range likewise. Needs no shared data. */
#include "test.h"

/* The replay's text (json 0) or JSON, written by hbm_replay_run_write, in a string. */
static char *replay_text(const hbm_trace *t, const char *const *cfg, size_t n, int json) {
    FILE *f = tmpfile();
    if (!f) return NULL;
    int failed = 0;
    hbm_status s = hbm_replay_run_write(t, "sim:1GiB", cfg, n, f, json, &failed);
    long len = ftell(f);
    char *buf = s || len < 0 ? NULL : malloc((size_t)len + 1);
    if (buf) {
        rewind(f);
        buf[fread(buf, 1, (size_t)len, f)] = 0;
    }
    fclose(f);
    return buf;
}

/* The JSON's measured speeds ("events_per_second": N) taken out: they are timings. */
static void blank_speeds(char *s) {
    const char *key = "\"events_per_second\": ";
    for (char *p = s; (p = strstr(p, key)) != NULL;) {
        p += strlen(key);
        size_t n = strspn(p, "0123456789.e+-");
        memmove(p, p + n, strlen(p + n) + 1);
    }
}

static void test_twice_same(void) {
    const uint64_t M = 1ull << 20;
    hbm_trace *t;
    CHECK_OK(hbm_trace_new(&t));
    /* 96 MiB blocks, every third freed: the device of 1 GiB runs out part way */
    for (uint64_t i = 0; i < 24; i++) {
        hbm_trace_event a = {.kind = HBM_EV_ALLOC, .time_ns = 2 * i, .addr = 0x1000000000ull + i * 128 * M, .size = 96 * M,
                             .requested = 96 * M};
        CHECK_OK(hbm_trace_add(t, &a));
        if (i % 3 == 2) {
            hbm_trace_event f = {.kind = HBM_EV_FREE, .time_ns = 2 * i + 1, .addr = a.addr - 128 * M, .size = 96 * M};
            CHECK_OK(hbm_trace_add(t, &f));
        }
    }
    const char *cfg[] = {"allocator=torch,expandable_segments=true", "allocator=vmm"};
    for (int json = 0; json <= 1; json++) {
        char *one = replay_text(t, cfg, 2, json), *two = replay_text(t, cfg, 2, json);
        CHECK(one && two);
        blank_speeds(one);
        blank_speeds(two);
        if (!json) {
            CHECK_CONTAINS(one, "out of memory"); /* the OOM report, whose addresses moved */
            CHECK_CONTAINS(one, "0x3000");        /* an expandable segment's range, from its base */
        }
        CHECK_STR(one, two);
        free(one);
        free(two);
    }
    hbm_trace_free(t);
}

int main(void) {
    RUN(test_twice_same);
    return test_done();
}
