/* test_demo.c - hbm_demo_write, the story `hbm demo` tells: the advice of the OOM report
 * checked by running the step, the run with it, why no setting helps, the plan part; the
 * environment given as a function (and the process's own left as it was); bad input found
 * before anything is written; a failed write said. */
#include <unistd.h>

#include "test.h"

/* An environment of a few NAME=VALUE strings. */
typedef struct env {
    const char *const *vars;
    int calls;
} env;

static const char *env_get(void *user, const char *name) {
    env *e = user;
    e->calls++;
    size_t n = strlen(name);
    for (const char *const *v = e->vars; v && *v; v++)
        if (!strncmp(*v, name, n) && (*v)[n] == '=') return *v + n + 1;
    return NULL;
}

/* The demo's text on device with the environment vars (NULL-terminated); *st its status. */
static char *demo_text(const char *device, const char *examples, const char *const *vars, hbm_status *st,
                       int *completed, int *calls) {
    env e = {vars, 0};
    hbm_demo_options o;
    hbm_demo_options_default(&o);
    if (device) o.device = device;
    o.examples = examples;
    o.getenv_fn = env_get;
    o.getenv_user = &e;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    *st = hbm_demo_write(&o, f, completed);
    fclose(f);
    if (calls) *calls = e.calls;
    return text;
}

/* JAX's defaults on an 80 GiB device: the report's .76 checked, run 2 completes, then the
 * plan of the seed bug and of its fix. */
static void test_defaults(void) {
    const char *before = getenv("HBM_MEM_FRACTION");
    hbm_status st;
    int done = -1, calls = 0;
    char *t = demo_text(NULL, HBM_SOURCE_DIR "/examples", NULL, &st, &done, &calls);
    CHECK(t);
    CHECK_OK(st);
    CHECK(done == 1);
    CHECK(calls > 0); /* the allocator was configured from the given environment */
    CHECK_CONTAINS(t, "== Run 1 on sim:80GiB: allocator=bfc preallocate=true fraction=0.75 -> limit 60.00GiB\n");
    CHECK_CONTAINS(t, "Diagnosis: framework limit.\n");
    CHECK_CONTAINS(t, "  Try: XLA_PYTHON_CLIENT_MEM_FRACTION=.76\n\nRunning again with XLA_PYTHON_CLIENT_MEM_FRACTION=.76 ...\n");
    CHECK_CONTAINS(t, "== Run 2 on sim:80GiB: allocator=bfc preallocate=true fraction=0.76 -> limit 60.80GiB\n"
                      "The step completed: ");
    CHECK_CONTAINS(t, "\n== hbm plan " HBM_SOURCE_DIR "/examples/svd_oom.hlo --device V100-16GB\n");
    CHECK_CONTAINS(t, "  DOES NOT FIT: needs 335.70GiB");
    CHECK_CONTAINS(t, "\n== hbm plan " HBM_SOURCE_DIR "/examples/svd_fixed.hlo --device V100-16GB\n");
    CHECK_CONTAINS(t, "  FITS: needs 492.26MiB");
    CHECK(!strstr(t, "second part of the demo"));
    free(t);
    /* the advised fraction went to the allocator, not to the process */
    const char *after = getenv("HBM_MEM_FRACTION");
    CHECK((!before && !after) || (before && after && !strcmp(before, after)));
}

/* A fraction the report suggests that covers only the failed request: the one that covers
 * the whole step replaces it in the report, said so. */
static void test_fraction_checked(void) {
    hbm_status st;
    int done = -1;
    char *t = demo_text("sim:64GiB", NULL, NULL, &st, &done, NULL);
    CHECK(t);
    CHECK_OK(st);
    CHECK(done == 1);
    CHECK_CONTAINS(t, "  Try: XLA_PYTHON_CLIENT_MEM_FRACTION=.95 (checked by running the step; ");
    CHECK_CONTAINS(t, "whole step needs XLA_PYTHON_CLIENT_MEM_FRACTION=.95.\n");
    CHECK_CONTAINS(t, "== Run 2 on sim:64GiB: allocator=bfc preallocate=true fraction=0.95");
    CHECK_CONTAINS(t, "\n(The second part of the demo plans examples/svd_oom.hlo;");
    free(t);
}

/* No fraction fits a 40 GiB device: no advice, a negative verdict, no plan part. */
static void test_nothing_fits(void) {
    hbm_status st;
    int done = -1;
    char *t = demo_text("sim:40GiB", HBM_SOURCE_DIR "/examples", NULL, &st, &done, NULL);
    CHECK(t);
    CHECK_OK(st);
    CHECK(done == 0);
    CHECK_CONTAINS(t, "  No fraction fits: even XLA_PYTHON_CLIENT_MEM_FRACTION=1 fails (the step holds 60.76GiB\n");
    CHECK_CONTAINS(t, "No setting makes this step fit sim:40GiB: at its peak it holds 60.76GiB live");
    CHECK(!strstr(t, "Try: XLA_PYTHON_CLIENT_MEM_FRACTION"));
    CHECK(!strstr(t, "Running again"));
    CHECK(!strstr(t, "== hbm plan"));
    free(t);
}

/* Advice that is another variable: set for run 2 through the environment function (the
 * allocator it names is the one run 2 opens), the process's environment untouched. */
static void test_variable_advice(void) {
    static const char *const vars[] = {"XLA_PYTHON_CLIENT_PREALLOCATE=false", NULL};
    const char *before = getenv("TF_GPU_ALLOCATOR");
    hbm_status st;
    int done = -1;
    char *t = demo_text(NULL, NULL, vars, &st, &done, NULL);
    CHECK(t);
    CHECK_OK(st);
    CHECK_CONTAINS(t, "== Run 1 on sim:80GiB: allocator=bfc preallocate=false");
    CHECK_CONTAINS(t, "Running again with TF_GPU_ALLOCATOR=cuda_malloc_async ...\n\n"
                      "== Run 2 on sim:80GiB: allocator=cuda_async ");
    /* run 2 reaches the framework limit (the step's peak, 60.76GiB, is over 0.75 of 80GiB):
     * its fraction is checked the same way and run 3 keeps both settings */
    CHECK_CONTAINS(t, "Running again with TF_GPU_ALLOCATOR=cuda_malloc_async XLA_PYTHON_CLIENT_MEM_FRACTION=.76 ...\n\n"
                      "== Run 3 on sim:80GiB: allocator=cuda_async preallocate=false fraction=0.76");
    CHECK(done == 1);
    CHECK(!strstr(t, "still runs out"));
    free(t);
    const char *after = getenv("TF_GPU_ALLOCATOR");
    CHECK((!before && !after) || (before && after && !strcmp(before, after)));
}

/* An allocator whose OOM no setting helps: said why, with the step's peak. */
static void test_no_setting_helps(void) {
    static const char *const vars[] = {"HBM_ALLOCATOR=platform", NULL};
    hbm_status st;
    int done = -1;
    char *t = demo_text("sim:40GiB", NULL, vars, &st, &done, NULL);
    CHECK(t);
    CHECK_OK(st);
    CHECK(done == 0);
    CHECK_CONTAINS(t, "== Run 1 on sim:40GiB: allocator=platform");
    CHECK_CONTAINS(t, "No allocator setting can help here (");
    CHECK(!strstr(t, "Running again"));
    free(t);
    /* the same allocator on 80 GiB completes at once */
    t = demo_text(NULL, NULL, vars, &st, &done, NULL);
    CHECK(t);
    CHECK_OK(st);
    CHECK(done == 1);
    CHECK(!strstr(t, "Out of memory"));
    free(t);
}

/* A bad device or variable: an error before anything is written. */
static void test_bad_input(void) {
    static const char *const bad[] = {"XLA_PYTHON_CLIENT_MEM_FRACTION=abc", NULL};
    hbm_status st;
    int done = -1;
    char *t = demo_text(NULL, NULL, bad, &st, &done, NULL);
    CHECK(t);
    CHECK_STATUS(st, HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "XLA_PYTHON_CLIENT_MEM_FRACTION='abc'");
    CHECK_STR(t, "");
    free(t);
    t = demo_text("nosuch", NULL, NULL, &st, &done, NULL);
    CHECK(t);
    CHECK(st != HBM_OK);
    CHECK_CONTAINS(hbm_last_error(), "nosuch");
    CHECK_STR(t, "");
    CHECK(done == 0);
    free(t);
    hbm_demo_options o;
    hbm_demo_options_default(&o);
    CHECK_STATUS(hbm_demo_write(NULL, stdout, &done), HBM_ERR_INVALID);
    CHECK_STATUS(hbm_demo_write(&o, NULL, &done), HBM_ERR_INVALID);
    CHECK_STATUS(hbm_demo_write(&o, stdout, NULL), HBM_ERR_INVALID);
}

/* A write that fails is an I/O error, not a story told. */
static void test_write_error(void) {
    if (access("/dev/full", W_OK)) {
        printf("(no writable /dev/full: write error not checked)\n");
        return;
    }
    FILE *f = fopen("/dev/full", "w");
    CHECK(f);
    setvbuf(f, NULL, _IONBF, 0);
    hbm_demo_options o;
    hbm_demo_options_default(&o);
    int done = -1;
    hbm_status st = hbm_demo_write(&o, f, &done);
    fclose(f);
    CHECK_STATUS(st, HBM_ERR_IO);
}

int main(void) {
    RUN(test_defaults);
    RUN(test_fraction_checked);
    RUN(test_nothing_fits);
    RUN(test_variable_advice);
    RUN(test_no_setting_helps);
    RUN(test_bad_input);
    RUN(test_write_error);
    return test_done();
}
