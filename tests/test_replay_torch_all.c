/* test_replay_torch_all.c - the twin (allocator=torch under the recorded settings, on the
 * default device) on every device of every shared PyTorch snapshot: the table of
 * docs/allocators.md (snapshot, device, segment events, addresses, first difference) is
 * printed, and every history whose blocks it frees are all known (from the history or
 * the snapshot's end state: no allocation lands in a segment the rebuilt state lacks)
 * must reproduce at least 99 % of its recorded segment events and addresses; where it
 * falls short the first difference is named. Skips without ../shared/data. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define SNAP_DIR HBM_SHARED_DATA "/snapshots/"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 100.0; }

static void one(const char *name, const hbm_trace *t, int *rows) {
    hbm_torch_match m;
    CHECK_OK(hbm_replay_torch_match(t, NULL, NULL, &m));
    char first[64] = "-";
    if (m.first_segment_diff >= 0) snprintf(first, sizeof first, "segment event %lld", (long long)m.first_segment_diff);
    else if (m.first_alloc_diff >= 0) snprintf(first, sizeof first, "alloc event %lld", (long long)m.first_alloc_diff);
    fprintf(stderr, "  | %-36s | %-6s | %5llu/%-5llu %6.1f%% | %5llu/%-5llu %6.1f%% | %s |\n", name, t->device,
            (unsigned long long)m.segments_same, (unsigned long long)m.segments_recorded,
            pct(m.segments_same, m.segments_recorded), (unsigned long long)m.allocs_same, (unsigned long long)m.allocs,
            pct(m.allocs_same, m.allocs), first);
    if (m.first_segment_diff >= 0 || m.first_alloc_diff >= 0) hbm_torch_match_explain(t, &m, stderr);
    ++*rows;
    if (m.allocs_before_history) return; /* its state before the history is not in the file */
    CHECK(pct(m.segments_same, m.segments_recorded) >= 99.0);
    CHECK(pct(m.allocs_same, m.allocs) >= 99.0);
    CHECK_EQ_U64(m.ooms_twin, m.ooms_recorded);
}

static char *names[256];
static size_t n;

static void test_every_snapshot(void) {
    int rows = 0;
    fprintf(stderr, "  | snapshot | device | segment events | addresses | first difference |\n");
    for (size_t i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, SNAP_DIR "%s", names[i]);
        hbm_trace *t;
        CHECK_OK(hbm_trace_load(path, &t));
        one(names[i], t, &rows);
        for (size_t k = 0; k < t->n_others; k++) one(names[i], t->others[k], &rows);
        hbm_trace_free(t);
        free(names[i]);
    }
    CHECK(rows >= (int)n);
}

int main(void) {
    DIR *d = opendir(SNAP_DIR);
    if (!d) TEST_SKIP("the shared snapshots are absent (%s)", SNAP_DIR);
    for (struct dirent *e; (e = readdir(d)) && n < 256;) {
        size_t l = strlen(e->d_name);
        if (l > 7 && !strcmp(e->d_name + l - 7, ".pickle")) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (!n) TEST_SKIP("no snapshot in %s", SNAP_DIR);
    qsort(names, n, sizeof *names, cmp_str);
    RUN(test_every_snapshot);
    return test_done();
}
