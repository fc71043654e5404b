/* test_fleet_threads.c - the fleet path on threads (the TSan tier runs it): ranks written as
 * hbm traces, two pipeline stages and one rank with a planted extra buffer, one input that
 * cannot be read; read on 4 threads and on 1 the fleet is the same, the planted rank the one
 * outlier and the stages two groups; the summaries of the files, reduced on 3 threads from
 * memory (as python's hbm.fleet(engine="dask") does), give the same fleet again. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#define RANKS 10
#define MIB (1ull << 20)

static char dir[64], paths[RANKS + 1][128];

static int write_rank(int r) {
    hbm_trace *t;
    if (hbm_trace_new(&t)) return -1;
    hbm_tag layer = {.op_name = "layer", .source_file = "model.py", .source_line = 20 + r / 5};
    hbm_tag leak = {.op_name = "leak", .source_file = "planted.py", .source_line = 42};
    uint32_t tl, tk;
    int rc = hbm_trace_intern(t, &layer, &tl) || hbm_trace_intern(t, &leak, &tk);
    uint64_t addr = 1 << 20, n = r < 5 ? 20 : 21; /* stage 2: 5 % more */
    for (uint64_t i = 0; i < n && !rc; i++) {
        hbm_trace_event e = {.kind = HBM_EV_ALLOC, .time_ns = i, .addr = addr, .size = 8 * MIB + (uint64_t)r * 4096,
                             .requested = 8 * MIB + (uint64_t)r * 4096, .tag = tl};
        addr += e.size;
        rc = hbm_trace_add(t, &e);
    }
    if (r == 3 && !rc) {
        hbm_trace_event e = {.kind = HBM_EV_ALLOC, .time_ns = 99, .addr = addr, .size = 48 * MIB, .requested = 48 * MIB, .tag = tk};
        rc = hbm_trace_add(t, &e);
    }
    if (!rc) rc = hbm_trace_write(t, paths[r]) ? -1 : 0;
    hbm_trace_free(t);
    return rc;
}

static char *fleet_json(const char *const *in, size_t n, int jobs) {
    hbm_fleet_options o;
    hbm_fleet_options_default(&o);
    o.jobs = jobs;
    hbm_fleet *f;
    if (hbm_fleet_run(in, n, &o, &f)) return NULL;
    size_t len;
    char *buf = NULL;
    if (!hbm_fleet_format(f, HBM_FLEET_JSON, NULL, 0, &len) && (buf = malloc(len + 1)) &&
        hbm_fleet_format(f, HBM_FLEET_JSON, buf, len + 1, &len)) {
        free(buf);
        buf = NULL;
    }
    hbm_fleet_free(f);
    return buf;
}

static void test_threads_equal_one(void) {
    const char *in[RANKS + 1];
    for (int i = 0; i <= RANKS; i++) in[i] = paths[i];
    char *four = fleet_json(in, RANKS + 1, 4), *one = fleet_json(in, RANKS + 1, 1);
    CHECK(four && one);
    if (!four || !one) return;
    CHECK_STR(four, one);
    char want[256];
    snprintf(want, sizeof want, "\"outliers\": [\"%s\"]", paths[3]);
    CHECK_CONTAINS(four, want);
    snprintf(want, sizeof want, "\"worst\": \"%s\"", paths[3]);
    CHECK_CONTAINS(four, want);
    CHECK_CONTAINS(four, "\"failed\": 1");
    CHECK_CONTAINS(four, "{\"group\": 1, \"count\": 4,"); /* stage 1 without the planted rank */
    CHECK_CONTAINS(four, "{\"group\": 2, \"count\": 5,");
    CHECK_CONTAINS(four, "{\"group\": 3, \"count\": 1,");
    CHECK_CONTAINS(four, "\"source\": \"planted.py:42\", \"category\": \"\", \"a_bytes\": 0, \"b_bytes\": 50331648");
    free(four);
    free(one);
}

/* each rank's own page written by the thread that holds its file */
static void test_pages(void) {
    const char *in[RANKS];
    for (int i = 0; i < RANKS; i++) in[i] = paths[i];
    char pages[128], page[200];
    snprintf(pages, sizeof pages, "%s/pages", dir);
    hbm_fleet_options o;
    hbm_fleet_options_default(&o);
    o.jobs = 4;
    o.pages = pages;
    hbm_fleet *f;
    CHECK_OK(hbm_fleet_run(in, RANKS, &o, &f));
    CHECK_EQ_U64(hbm_fleet_failed(f), 0);
    for (int i = 0; i < RANKS; i++) {
        snprintf(page, sizeof page, "%s/rank-%d-0.html", pages, i);
        CHECK(access(page, R_OK) == 0);
        unlink(page);
    }
    rmdir(pages);
    hbm_fleet_free(f);
}

static void test_summaries_in_memory(void) {
    const char *in[RANKS];
    char *docs[RANKS];
    size_t lens[RANKS];
    for (int i = 0; i < RANKS; i++) {
        in[i] = paths[i];
        CHECK_OK(hbm_fleet_summary_string(paths[i], &docs[i], &lens[i]));
        CHECK(docs[i] != NULL);
        CHECK(hbm_fleet_is_summary(docs[i], lens[i]));
    }
    char *files = fleet_json(in, RANKS, 2);
    hbm_fleet_options o;
    hbm_fleet_options_default(&o);
    o.jobs = 3;
    hbm_fleet *f;
    CHECK_OK(hbm_fleet_from_summaries((const char *const *)docs, lens, in, RANKS, &o, &f));
    size_t len;
    CHECK_OK(hbm_fleet_format(f, HBM_FLEET_JSON, NULL, 0, &len));
    char *mem = malloc(len + 1);
    CHECK_OK(hbm_fleet_format(f, HBM_FLEET_JSON, mem, len + 1, &len));
    CHECK(files != NULL);
    if (files) CHECK_STR(mem, files);
    hbm_fleet_free(f);
    free(mem);
    free(files);
    for (int i = 0; i < RANKS; i++) hbm_string_free(docs[i]);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/hbm_fleet_XXXXXX");
    if (!mkdtemp(dir)) TEST_SKIP("no temporary folder");
    for (int r = 0; r < RANKS; r++) {
        snprintf(paths[r], sizeof paths[r], "%s/rank%02d.hbmt", dir, r);
        if (write_rank(r)) {
            fprintf(stderr, "cannot write %s: %s\n", paths[r], hbm_last_error());
            return 1;
        }
    }
    snprintf(paths[RANKS], sizeof paths[RANKS], "%s/unreadable.hbmt", dir);
    FILE *f = fopen(paths[RANKS], "w");
    if (f) fputs("HBMTRACE but torn", f), fclose(f);
    RUN(test_threads_equal_one);
    RUN(test_summaries_in_memory);
    RUN(test_pages);
    for (int r = 0; r <= RANKS; r++) unlink(paths[r]);
    rmdir(dir);
    return test_done();
}
