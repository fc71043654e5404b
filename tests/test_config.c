/* test_config.c - configuration from strings and (injected) environments. */
#include "test.h"

typedef struct env { const char *const *kv; } env; /* NULL-terminated name, value pairs */

static const char *fake_getenv(void *user, const char *name) {
    const env *e = user;
    for (const char *const *p = e->kv; *p; p += 2)
        if (!strcmp(p[0], name)) return p[1];
    return NULL;
}

static hbm_status from(hbm_config *c, const char *const *kv) {
    env e = {kv};
    return hbm_config_from_env_fn(c, fake_getenv, &e);
}

static void test_defaults(void) {
    hbm_config c;
    const char *none[] = {NULL};
    CHECK_OK(from(&c, none));
    CHECK(c.allocator == HBM_ALLOCATOR_BFC && c.preallocate == 1 && c.fraction == 0.75);
    CHECK(c.policy == HBM_POLICY_JAX && c.initial_region == 2u << 20 && c.report_top == 10);
    CHECK_STR(c.source[HBM_OPT_fraction], "default");
    CHECK_EQ_U64(hbm_config_bytes_limit(&c, 80ULL << 30, 70ULL << 30), 60ULL << 30);
}

static void test_jax_variables(void) {
    hbm_config c;
    const char *kv[] = {"XLA_PYTHON_CLIENT_PREALLOCATE", "false", "XLA_PYTHON_CLIENT_MEM_FRACTION", ".5",
                        "XLA_PYTHON_CLIENT_ALLOCATOR", "platform", "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC", "-1",
                        NULL};
    CHECK_OK(from(&c, kv));
    CHECK(c.preallocate == 0 && c.fraction == 0.5 && c.allocator == HBM_ALLOCATOR_PLATFORM && c.async_prealloc == -1);
    CHECK_STR(c.source[HBM_OPT_fraction], "XLA_PYTHON_CLIENT_MEM_FRACTION");
    CHECK_STR(c.source[HBM_OPT_preallocate], "XLA_PYTHON_CLIENT_PREALLOCATE");
    const char *kv2[] = {"XLA_CLIENT_MEM_FRACTION", "0.9", NULL};
    CHECK_OK(from(&c, kv2));
    CHECK(c.fraction == 0.9);
    CHECK_STR(c.source[HBM_OPT_fraction], "XLA_CLIENT_MEM_FRACTION");
}

static void test_allocator_selection(void) {
    hbm_config c;
    const char *tf[] = {"TF_GPU_ALLOCATOR", "cuda_malloc_async", NULL};
    CHECK_OK(from(&c, tf));
    CHECK(c.allocator == HBM_ALLOCATOR_CUDA_ASYNC);
    /* "default" leaves TF's choice; an explicit XLA choice wins over TF */
    const char *both[] = {"TF_GPU_ALLOCATOR", "cuda_malloc_async", "XLA_PYTHON_CLIENT_ALLOCATOR", "default", NULL};
    CHECK_OK(from(&c, both));
    CHECK(c.allocator == HBM_ALLOCATOR_CUDA_ASYNC);
    const char *both2[] = {"TF_GPU_ALLOCATOR", "cuda_malloc_async", "XLA_PYTHON_CLIENT_ALLOCATOR", "bfc", NULL};
    CHECK_OK(from(&c, both2));
    CHECK(c.allocator == HBM_ALLOCATOR_BFC);
    /* hbm's own variable wins over the frameworks' */
    const char *own[] = {"XLA_PYTHON_CLIENT_ALLOCATOR", "platform", "HBM_ALLOCATOR", "vmm", NULL};
    CHECK_OK(from(&c, own));
    CHECK(c.allocator == HBM_ALLOCATOR_VMM);
    CHECK_STR(c.source[HBM_OPT_allocator], "HBM_ALLOCATOR");
}

static void test_bad_values(void) {
    static const struct { const char *name, *value, *expect; } bad[] = {
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", "0", "XLA_PYTHON_CLIENT_MEM_FRACTION='0' is not valid"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", "-.5", "'-.5'"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", "half", "'half'"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", "nan", "'nan'"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", "inf", "'inf'"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", "0x1p-1", "'0x1p-1'"}, /* C's strtod, not Python's */
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", "._5", "'._5'"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", "5_", "'5_'"},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", "1e", "'1e'"},
        {"XLA_CLIENT_MEM_FRACTION", "0.5.", "XLA_CLIENT_MEM_FRACTION='0.5.'"},
        {"XLA_PYTHON_CLIENT_ALLOCATOR", "tlsf", "default, bfc, platform or cuda_async"},
        {"HBM_PREALLOCATE", "maybe", "HBM_PREALLOCATE='maybe'"},
        {"HBM_LIMIT", "lots", "HBM_LIMIT='lots'"},
        {"HBM_REPORT_TOP", "-3", "[0, 1000]"},
        {"TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC", "-2", "-1"},
        {"HBM_POLICY", "tf", "jax|jax_legacy"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hbm_config c;
        const char *kv[] = {bad[i].name, bad[i].value, NULL};
        CHECK_STATUS(from(&c, kv), HBM_ERR_CONFIG);
        CHECK_CONTAINS(hbm_last_error(), bad[i].expect);
    }
    hbm_config c;
    const char *both[] = {"XLA_PYTHON_CLIENT_MEM_FRACTION", ".5", "XLA_CLIENT_MEM_FRACTION", ".6", NULL};
    CHECK_STATUS(from(&c, both), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "both set");
    const char *empty[] = {"XLA_PYTHON_CLIENT_PREALLOCATE", "", NULL}; /* empty = unset */
    CHECK_OK(from(&c, empty));
    CHECK(c.preallocate == 1);
}

/* JAX's rule (xla_client.py): preallocation is off only for "0", "false", "False" */
static void test_jax_preallocate_rule(void) {
    static const struct { const char *v; int want; } cases[] = {
        {"0", 0}, {"false", 0}, {"False", 0}, {"FALSE", 1}, {"no", 1}, {"off", 1},
        {"2", 1}, {"maybe", 1}, {"true", 1}, {"1", 1}, {" false", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hbm_config c;
        const char *kv[] = {"XLA_PYTHON_CLIENT_PREALLOCATE", cases[i].v, NULL};
        CHECK_OK(from(&c, kv));
        CHECK(c.preallocate == cases[i].want);
    }
}

/* Python's float(): spaces around, '_' between digits, exponents; XLA allows > 1 */
static void test_jax_fraction_rule(void) {
    static const struct { const char *v; double want; } cases[] = {
        {"0.5 ", 0.5}, {"\t.25\n", 0.25}, {"1_0e-1", 1.0}, {"+.5", 0.5}, {"5e-1", 0.5},
        {"7", 7.0}, {"1.", 1.0}, {"0_0.1", 0.1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hbm_config c;
        const char *kv[] = {"XLA_CLIENT_MEM_FRACTION", cases[i].v, NULL};
        CHECK_OK(from(&c, kv));
        CHECK(c.fraction == cases[i].want);
    }
    hbm_config c;
    const char *big[] = {"XLA_PYTHON_CLIENT_MEM_FRACTION", "1e300", NULL};
    CHECK_OK(from(&c, big));
    CHECK_EQ_U64(hbm_config_bytes_limit(&c, 80ULL << 30, 0), UINT64_MAX);
}

/* TF's rule (gpu_process_state.cc): exact values, anything else is its BFC default */
static void test_tf_allocator_rule(void) {
    static const struct { const char *v; hbm_allocator_kind want; const char *note; } cases[] = {
        {"cuda_malloc_async", HBM_ALLOCATOR_CUDA_ASYNC, NULL},
        {"cuda_malloc", HBM_ALLOCATOR_PLATFORM, "cudaMalloc"},
        {"memory_guard", HBM_ALLOCATOR_BFC, "debug allocator over BFC"},
        {"CUDA_MALLOC_ASYNC", HBM_ALLOCATOR_BFC, "not a value TensorFlow acts on"},
        {"bfc", HBM_ALLOCATOR_BFC, "'bfc'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hbm_config c;
        const char *kv[] = {"TF_GPU_ALLOCATOR", cases[i].v, NULL};
        env e = {kv};
        CHECK_OK(from(&c, kv));
        CHECK(c.allocator == cases[i].want);
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        int notes = hbm_config_write_notes(f, fake_getenv, &e);
        fclose(f);
        CHECK(notes == (cases[i].note != NULL));
        if (cases[i].note) CHECK_CONTAINS(buf, cases[i].note);
        free(buf);
    }
}

static void test_notes(void) {
    const char *kv[] = {"XLA_PYTHON_CLIENT_PREALLOCATE", "no", "XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5 ", NULL};
    env e = {kv};
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    CHECK(hbm_config_write_notes(f, fake_getenv, &e) == 2);
    fclose(f);
    CHECK_CONTAINS(buf, "XLA_PYTHON_CLIENT_PREALLOCATE='no' means preallocate=true");
    CHECK_CONTAINS(buf, "XLA_PYTHON_CLIENT_MEM_FRACTION='0.5 ' is read as 0.5");
    free(buf);
    const char *plain[] = {"XLA_PYTHON_CLIENT_PREALLOCATE", "false", "XLA_CLIENT_MEM_FRACTION", ".5", NULL};
    e.kv = plain;
    f = open_memstream(&buf, &n);
    CHECK(hbm_config_write_notes(f, fake_getenv, &e) == 0);
    fclose(f);
    free(buf);
}

/* HBM_TRACE, HBM_TRACE_BACKTRACE, HBM_REPORT_TOP apply under a config string; its keys win */
static void test_observability_under_config_string(void) {
    hbm_config c;
    setenv("HBM_TRACE", "/tmp/x.hbmt", 1);
    setenv("HBM_REPORT_TOP", "3", 1);
    setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".5", 1);
    CHECK_OK(hbm_config_resolve("allocator=bfc", &c));
    CHECK_STR(c.trace, "/tmp/x.hbmt");
    CHECK(c.report_top == 3 && c.fraction == 0.75); /* how memory is allocated: the string alone */
    CHECK_STR(c.source[HBM_OPT_trace], "HBM_TRACE");
    CHECK_OK(hbm_config_resolve("report_top=5", &c));
    CHECK(c.report_top == 5);
    setenv("HBM_REPORT_TOP", "many", 1);
    CHECK_STATUS(hbm_config_resolve("allocator=bfc", &c), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "HBM_REPORT_TOP='many'");
    unsetenv("HBM_TRACE");
    unsetenv("HBM_REPORT_TOP");
    unsetenv("XLA_PYTHON_CLIENT_MEM_FRACTION");
}

static void test_strings(void) {
    hbm_config c;
    CHECK_OK(hbm_config_resolve("allocator=platform, fraction=0.6 ,preallocate=no,limit=40GiB", &c));
    CHECK(c.allocator == HBM_ALLOCATOR_PLATFORM && c.fraction == 0.6 && !c.preallocate && c.limit == 40ULL << 30);
    CHECK_STR(c.source[HBM_OPT_limit], "config");
    CHECK_EQ_U64(hbm_config_bytes_limit(&c, 80ULL << 30, 0), 40ULL << 30);
    CHECK_OK(hbm_config_resolve("", &c));
    CHECK(c.allocator == HBM_ALLOCATOR_BFC);
    CHECK_STATUS(hbm_config_resolve("fraction=1.7", &c), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "fraction='1.7'");
    CHECK_STATUS(hbm_config_resolve("colour=blue", &c), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "unknown config key 'colour'");
    CHECK_CONTAINS(hbm_last_error(), "fraction");
    CHECK_STATUS(hbm_config_resolve("fraction", &c), HBM_ERR_CONFIG);
    CHECK_STATUS(hbm_config_resolve("initial_region=100", &c), HBM_ERR_CONFIG);
}

static void test_legacy_policy(void) {
    hbm_config c;
    CHECK_OK(hbm_config_resolve("policy=jax_legacy", &c));
    CHECK(c.fraction == 0.90);
    CHECK_STR(c.source[HBM_OPT_fraction], "policy jax_legacy");
    /* 90% of what is free at open, not of the total */
    CHECK_EQ_U64(hbm_config_bytes_limit(&c, 80ULL << 30, 40ULL << 30), 36ULL << 30);
    CHECK_OK(hbm_config_resolve("policy=jax_legacy,fraction=0.5", &c));
    CHECK(c.fraction == 0.5);
}

static void test_write(void) {
    hbm_config c;
    const char *kv[] = {"XLA_PYTHON_CLIENT_MEM_FRACTION", ".9", NULL};
    CHECK_OK(from(&c, kv));
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    CHECK_OK(hbm_config_write(&c, f, 0));
    CHECK_OK(hbm_config_write(&c, f, 1));
    CHECK_OK(hbm_config_write_doc(f));
    fclose(f);
    /* the columns fit the longest key (garbage_collection_threshold) and value */
    CHECK_CONTAINS(buf, "\nfraction                     0.9     XLA_PYTHON_CLIENT_MEM_FRACTION\n");
    CHECK_CONTAINS(buf, "\ngarbage_collection_threshold 0       default\n");
    CHECK_CONTAINS(buf, "\"fraction\": {\"value\": \"0.9\", \"source\": \"XLA_PYTHON_CLIENT_MEM_FRACTION\"}");
    CHECK_CONTAINS(buf, "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC");
    free(buf);
}

int main(void) {
    RUN(test_defaults);
    RUN(test_jax_variables);
    RUN(test_allocator_selection);
    RUN(test_bad_values);
    RUN(test_jax_preallocate_rule);
    RUN(test_jax_fraction_rule);
    RUN(test_tf_allocator_rule);
    RUN(test_notes);
    RUN(test_observability_under_config_string);
    RUN(test_strings);
    RUN(test_legacy_policy);
    RUN(test_write);
    return test_done();
}
