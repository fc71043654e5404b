/* test_api_json_threads.c - what the Python package does from several threads at once:
 * parse, plan and format in parallel, each thread's errors and their locations its own. */
#include <pthread.h>

#include "test.h"

#define THREADS 4
#define ROUNDS 10

static char *text;
static size_t text_len;
static char want[1 << 14];
static int failures[THREADS];

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = 0;
    fclose(f);
    return buf;
}

static int plan_json(char *out, size_t cap) {
    hbm_hlo_module *m;
    hbm_plan *p;
    hbm_plan_target t;
    size_t len;
    if (hbm_hlo_parse(text, text_len, "svd", &m)) return -1;
    int rc = -1;
    if (!hbm_plan_run(m, NULL, &p)) {
        if (!hbm_plan_target_resolve("v100-16gb", NULL, 0, &t) && !hbm_plan_json_format(p, 15, &t, out, cap, &len) &&
            len < cap)
            rc = 0;
        hbm_plan_free(p);
    }
    hbm_hlo_module_free(m);
    return rc;
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    char name[32], bad[64], file[32], got[sizeof want];
    snprintf(name, sizeof name, "thread%d.hlo", id);
    snprintf(bad, sizeof bad, "HloModule m\n%*sENTRY {\n", id, "");
    for (int r = 0; r < ROUNDS; r++) {
        if (plan_json(got, sizeof got) || strcmp(got, want)) failures[id]++;
        hbm_hlo_module *m;
        int line, col;
        if (hbm_hlo_parse(bad, strlen(bad), name, &m) != HBM_ERR_PARSE) failures[id]++;
        else if (!hbm_last_error_location(file, sizeof file, &line, &col) || strcmp(file, name) || line < 2)
            failures[id]++;
    }
    return NULL;
}

static void test_threads(void) {
    text = read_all(HBM_SOURCE_DIR "/examples/svd_oom.hlo", &text_len);
    CHECK(text);
    CHECK(plan_json(want, sizeof want) == 0);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++) CHECK(failures[i] == 0);
}

int main(void) {
    RUN(test_threads);
    return test_done();
}
