/* test_oom.c - the OOM report and its diagnosis, for each cause. */
#include "test.h"
#include "alloc/alloc_internal.h"
#include "core/internal.h"
#include "alloc/oom_report.h"

typedef struct env { hbm_device *dev; hbm_allocator *a; } env;

static hbm_status open_env(env *e, const char *dev, const char *cfg) {
    hbm_status s = hbm_device_open(dev, &e->dev);
    if (s) return s;
    s = hbm_allocator_open(e->dev, cfg, &e->a);
    if (s) hbm_device_close(e->dev);
    return s;
}

static void close_env(env *e) {
    hbm_allocator_close(e->a);
    hbm_device_close(e->dev);
}

static char *report(hbm_allocator *a) {
    static char buf[16384];
    size_t n;
    if (hbm_oom_report_format(a, buf, sizeof buf, &n)) return NULL;
    return buf;
}

static const hbm_tag big_tag = {.op_name = "jit(step)/dot_general", .shape = "f32[300000,300000]",
                                .source_file = "train.py", .source_line = 42, .label = "custom-call",
                                .category = HBM_CAT_TEMP};

static void test_no_oom_yet(void) {
    env e;
    CHECK_OK(open_env(&e, "sim:1GiB", "allocator=platform"));
    char buf[64];
    CHECK_STATUS(hbm_oom_report_format(e.a, buf, sizeof buf, NULL), HBM_ERR_INVALID);
    hbm_oom_diagnosis d;
    CHECK_OK(hbm_oom_diagnose(e.a, &d));
    CHECK(d.cause == HBM_OOM_CAUSE_NONE);
    close_env(&e);
}

static void test_limit(void) {
    env e;
    CHECK_OK(open_env(&e, "sim:80GiB", "allocator=platform,limit=10GiB"));
    uint64_t p, q;
    hbm_tag w = {.op_name = "weights", .shape = "f32[1610612736]", .category = HBM_CAT_WEIGHT};
    CHECK_OK(hbm_alloc(e.a, 6ULL << 30, &w, &p));
    CHECK_STATUS(hbm_alloc(e.a, 5ULL << 30, &big_tag, &q), HBM_ERR_OOM);
    char *r = report(e.a);
    CHECK(r != NULL);
    const char *first = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 5368709120 bytes.\n";
    CHECK(!strncmp(r, first, strlen(first)));
    CHECK_CONTAINS(r, "could not allocate 5.00GiB (rounded to 5368709120) for custom-call op=jit(step)/dot_general "
                      "f32[300000,300000] [temp] train.py:42");
    CHECK_CONTAINS(r, "limit:                     10.00GiB  (limit from config)");
    CHECK_CONTAINS(r, "in use:                     6.00GiB  in 1 live buffers");
    CHECK_CONTAINS(r, "1.    6.00GiB");
    CHECK_CONTAINS(r, "op=weights f32[1610612736] [weight]");
    CHECK_CONTAINS(r, "Diagnosis: framework limit.");
    CHECK_CONTAINS(r, "Try: HBM_LIMIT=11811160064");
    CHECK_CONTAINS(r, "[####");
    hbm_oom_diagnosis d;
    CHECK_OK(hbm_oom_diagnose(e.a, &d));
    CHECK(d.cause == HBM_OOM_CAUSE_LIMIT);
    CHECK_STR(d.config, "limit=11811160064");
    CHECK_EQ_U64(d.requested, 5ULL << 30);
    /* the suggested setting works */
    close_env(&e);
    CHECK_OK(open_env(&e, "sim:80GiB", "allocator=platform,limit=11811160064"));
    CHECK_OK(hbm_alloc(e.a, 6ULL << 30, &w, &p));
    CHECK_OK(hbm_alloc(e.a, 5ULL << 30, &big_tag, &q));
    close_env(&e);
}

static void test_too_big(void) {
    env e;
    CHECK_OK(open_env(&e, "sim:10GiB", "allocator=platform"));
    uint64_t p[3];
    CHECK_OK(hbm_alloc(e.a, 3ULL << 30, NULL, &p[0]));
    CHECK_OK(hbm_alloc(e.a, 4ULL << 30, NULL, &p[1]));
    CHECK_STATUS(hbm_alloc(e.a, 5ULL << 30, NULL, &p[2]), HBM_ERR_OOM);
    hbm_oom_diagnosis d;
    CHECK_OK(hbm_oom_diagnose(e.a, &d));
    CHECK(d.cause == HBM_OOM_CAUSE_TOO_BIG);
    CHECK_EQ_U64(d.must_free, 2ULL << 30);
    CHECK_STR(d.env, "");
    char *r = report(e.a);
    CHECK_CONTAINS(r, "Diagnosis: too big for the device.");
    CHECK_CONTAINS(r, "At least 2.00GiB must go");
    CHECK_CONTAINS(r, "Freeing the 1 largest live buffer listed above (4.00GiB) would be enough");
    CHECK_CONTAINS(r, "(untagged)");
    close_env(&e);
}

static void test_shared_device(void) {
    env e;
    CHECK_OK(open_env(&e, "sim:10GiB,free=3GiB", "allocator=platform"));
    uint64_t p;
    CHECK_STATUS(hbm_alloc(e.a, 4ULL << 30, NULL, &p), HBM_ERR_OOM);
    char *r = report(e.a);
    CHECK_CONTAINS(r, "Diagnosis: too big for the device.");
    CHECK_CONTAINS(r, "7.00GiB of the device is held outside this allocator");
    close_env(&e);
}

static void test_exceeds_device(void) {
    env e;
    CHECK_OK(open_env(&e, "sim:16GiB", "allocator=platform"));
    uint64_t p;
    CHECK_STATUS(hbm_alloc(e.a, 360000000000ULL, &big_tag, &p), HBM_ERR_OOM);
    hbm_oom_diagnosis d;
    CHECK_OK(hbm_oom_diagnose(e.a, &d));
    CHECK(d.cause == HBM_OOM_CAUSE_EXCEEDS_DEVICE);
    char *r = report(e.a);
    CHECK_CONTAINS(r, "The request alone (335.28GiB) is larger than the whole device (16.00GiB)");
    close_env(&e);
}

static int handler_calls;
static uint64_t handler_size;
static void on_oom(void *user, hbm_allocator *a, uint64_t size) {
    handler_calls++;
    handler_size = size;
    /* the handler may write the report: no lock is held */
    FILE *f = user;
    hbm_oom_report_write(a, f);
}

static void test_handler_and_truncation(void) {
    env e;
    CHECK_OK(open_env(&e, "sim:1GiB", "allocator=platform,report_top=0"));
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    hbm_allocator_set_oom_handler(e.a, on_oom, f);
    uint64_t p;
    CHECK_STATUS(hbm_alloc(e.a, 2ULL << 30, NULL, &p), HBM_ERR_OOM);
    fclose(f);
    CHECK(handler_calls == 1 && handler_size == 2ULL << 30);
    CHECK_CONTAINS(buf, "RESOURCE_EXHAUSTED");
    CHECK(!strstr(buf, "Largest live buffers")); /* report_top=0 */
    free(buf);
    char small[20];
    size_t len;
    CHECK_OK(hbm_oom_report_format(e.a, small, sizeof small, &len));
    CHECK(len > 100 && strlen(small) == sizeof small - 1);
    CHECK(!strncmp(small, "RESOURCE_EXHAUSTED:", 19));
    hbm_allocator_set_oom_handler(e.a, NULL, NULL);
    CHECK_STATUS(hbm_alloc(e.a, 2ULL << 30, NULL, &p), HBM_ERR_OOM);
    CHECK(handler_calls == 1);
    close_env(&e);
}

/* JAX's default BFC pool (75 % preallocated): the report names the fraction that fits,
 * and the record survives the blocks being freed before the report is written. */
static void test_bfc_fraction(void) {
    env e;
    CHECK_OK(open_env(&e, "sim:80GiB", "allocator=bfc"));
    uint64_t p[3];
    hbm_tag w = {.op_name = "params", .category = HBM_CAT_WEIGHT};
    CHECK_OK(hbm_alloc(e.a, 40ULL << 30, &w, &p[0]));
    CHECK_OK(hbm_alloc(e.a, 15ULL << 30, NULL, &p[1]));
    CHECK_STATUS(hbm_alloc(e.a, 8ULL << 30, &big_tag, &p[2]), HBM_ERR_OOM);
    CHECK_OK(hbm_free(e.a, p[0]));
    CHECK_OK(hbm_free(e.a, p[1]));
    char *r = report(e.a);
    CHECK_CONTAINS(r, "limit:                     60.00GiB  (fraction 0.75 of 80.00GiB total; fraction from default)");
    CHECK_CONTAINS(r, "in use:                    55.00GiB  in 2 live buffers");
    CHECK_CONTAINS(r, "1.   40.00GiB");
    CHECK_CONTAINS(r, "op=params [weight]");
    CHECK_CONTAINS(r, "Diagnosis: framework limit.");
    /* 63 GiB of 80 = .7875: .79 holds it under XLA's rule, not 0.43 % lower (JAX 0.11 on an H200) */
    CHECK_CONTAINS(r, "Try: XLA_PYTHON_CLIENT_MEM_FRACTION=.80");
    hbm_oom_diagnosis d;
    CHECK_OK(hbm_oom_diagnose(e.a, &d));
    CHECK_STR(d.config, "fraction=.80");
    close_env(&e);
    CHECK_OK(open_env(&e, "sim:80GiB", "allocator=bfc,fraction=.79"));
    CHECK_OK(hbm_alloc(e.a, 40ULL << 30, &w, &p[0]));
    CHECK_OK(hbm_alloc(e.a, 15ULL << 30, NULL, &p[1]));
    CHECK_OK(hbm_alloc(e.a, 8ULL << 30, &big_tag, &p[2]));
    close_env(&e);
}

/* Enough free memory in total, but in two holes smaller than the request. */
static void test_bfc_fragmentation(void) {
    env e;
    CHECK_OK(open_env(&e, "sim:1GiB", "allocator=bfc,fraction=1"));
    uint64_t p[4], q;
    for (int i = 0; i < 4; i++) CHECK_OK(hbm_alloc(e.a, 256u << 20, NULL, &p[i]));
    CHECK_OK(hbm_free(e.a, p[0]));
    CHECK_OK(hbm_free(e.a, p[2]));
    CHECK_STATUS(hbm_alloc(e.a, 300u << 20, NULL, &q), HBM_ERR_OOM);
    hbm_oom_diagnosis d;
    CHECK_OK(hbm_oom_diagnose(e.a, &d));
    CHECK(d.cause == HBM_OOM_CAUSE_FRAGMENTATION);
    CHECK_STR(d.env, "TF_GPU_ALLOCATOR=cuda_malloc_async");
    char *r = report(e.a);
    CHECK_CONTAINS(r, "Diagnosis: fragmentation.");
    CHECK_CONTAINS(r, "largest free block:       256.00MiB");
    CHECK_CONTAINS(r, "fragmentation:                50.0%");
    CHECK_CONTAINS(r, "[.........................#########################.........................#########################]");
    close_env(&e);
}

/* The report as the library's callers keep it: the text of hbm_oom_report_format, with
 * where its advice begins as the formatter wrote it, found without reading the text (a
 * tag that spells "\n  Try: " earlier in the report is not taken for it); a checked
 * verdict replaces the advice, a report with none stays as it was. */
static void test_advice_kept_beside(void) {
    env e;
    hbmi_oom_text x;
    uint64_t p, q;
    /* a framework limit: "  Try: HBM_LIMIT=..." and the line after it, to the end */
    CHECK_OK(open_env(&e, "sim:80GiB", "allocator=platform,limit=10GiB"));
    hbm_tag w = {.label = "weights\n  Try: not-the-advice"};
    CHECK_OK(hbm_alloc(e.a, 6ULL << 30, &w, &p));
    CHECK_STATUS(hbm_alloc(e.a, 5ULL << 30, NULL, &q), HBM_ERR_OOM);
    CHECK_OK(hbmi_oom_text_get(e.a, &x));
    CHECK_STR(x.text, report(e.a));
    CHECK(strstr(x.text, "\n  Try: not-the-advice") < x.text + x.advice);
    CHECK_STR(x.text + x.advice, "  Try: HBM_LIMIT=11811160064\n");
    size_t keep = x.advice;
    char *before = hbmi_strdup(x.text);
    CHECK_OK(hbmi_oom_text_advise(&x, "  Checked: runs to its end\n  (two lines)\n"));
    CHECK(!strncmp(x.text, before, keep));
    CHECK_STR(x.text + keep, "  Checked: runs to its end\n  (two lines)\n");
    hbmi_free(before);
    hbmi_oom_text_free(&x);
    close_env(&e);
    /* fragmentation (bfc): the advice is the three lines from "  Try:" */
    CHECK_OK(open_env(&e, "sim:1GiB", "allocator=bfc,fraction=1"));
    uint64_t b[4];
    for (int i = 0; i < 4; i++) CHECK_OK(hbm_alloc(e.a, 256u << 20, NULL, &b[i]));
    CHECK_OK(hbm_free(e.a, b[0]));
    CHECK_OK(hbm_free(e.a, b[2]));
    CHECK_STATUS(hbm_alloc(e.a, 300u << 20, NULL, &q), HBM_ERR_OOM);
    CHECK_OK(hbmi_oom_text_get(e.a, &x));
    CHECK(!strncmp(x.text + x.advice, "  Try: TF_GPU_ALLOCATOR=cuda_malloc_async (a stream-ordered pool", 64));
    CHECK(x.advice > 0 && x.text[x.advice - 1] == '\n');
    CHECK_OK(hbmi_oom_text_advise(&x, "  V\n"));
    CHECK(strlen(x.text) == x.advice + 4 && !strcmp(x.text + x.advice, "  V\n"));
    hbmi_oom_text_free(&x);
    close_env(&e);
    /* too big for the device: no setting advised, so nothing to replace */
    CHECK_OK(open_env(&e, "sim:10GiB", "allocator=platform"));
    CHECK_OK(hbm_alloc(e.a, 7ULL << 30, NULL, &p));
    CHECK_STATUS(hbm_alloc(e.a, 5ULL << 30, NULL, &q), HBM_ERR_OOM);
    CHECK_OK(hbmi_oom_text_get(e.a, &x));
    CHECK(x.advice == strlen(x.text));
    before = hbmi_strdup(x.text);
    CHECK_OK(hbmi_oom_text_advise(&x, "  V\n"));
    CHECK_STR(x.text, before);
    hbmi_free(before);
    hbmi_oom_text_free(&x);
    close_env(&e);
    /* no failure yet: no report; a message in a report's place has no advice */
    CHECK_OK(open_env(&e, "sim:1GiB", "allocator=platform"));
    CHECK_STATUS(hbmi_oom_text_get(e.a, &x), HBM_ERR_INVALID);
    CHECK(x.text == NULL);
    close_env(&e);
    CHECK_OK(hbmi_oom_text_of("out of memory", &x));
    CHECK(x.advice == strlen("out of memory"));
    CHECK_OK(hbmi_oom_text_advise(&x, "  V\n"));
    CHECK_STR(x.text, "out of memory");
    hbmi_oom_text_free(&x);
}

/* Quiet belongs to one allocator handle (its policy and its device): a quiet allocator's OOM
 * leaves the last error as it was, while another allocator on the same thread still says
 * why it failed, for each policy. */
static void test_quiet_per_allocator(void) {
    static const char *const cfgs[] = {"allocator=bfc", "allocator=bfc,limit=8GiB", "allocator=platform",
                                       "allocator=torch", "allocator=cuda_async", "allocator=vmm"};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        env q, l;
        CHECK_OK(open_env(&q, "sim:1GiB", cfgs[i]));
        CHECK_OK(open_env(&l, "sim:1GiB", cfgs[i]));
        uint64_t addr;
        CHECK(hbmi_allocator_set_quiet(q.a, 1) == 0);
        hbmi_error(HBM_ERR_INVALID, "before the quiet OOM");
        CHECK_STATUS(hbm_alloc(q.a, 4ULL << 30, NULL, &addr), HBM_ERR_OOM);
        CHECK_STR(hbm_last_error(), "before the quiet OOM");
        /* the other allocator is not quiet */
        CHECK_STATUS(hbm_alloc(l.a, 4ULL << 30, NULL, &addr), HBM_ERR_OOM);
        CHECK(strcmp(hbm_last_error(), "before the quiet OOM") != 0);
        CHECK(hbm_last_error()[0] != 0);
        /* and the quiet one speaks again once set back */
        CHECK(hbmi_allocator_set_quiet(q.a, 0) == 1);
        hbmi_error(HBM_ERR_INVALID, "before the loud OOM");
        CHECK_STATUS(hbm_alloc(q.a, 4ULL << 30, NULL, &addr), HBM_ERR_OOM);
        CHECK(strcmp(hbm_last_error(), "before the loud OOM") != 0);
        close_env(&l);
        close_env(&q);
    }
}

/* A device that has the room but cannot map it (sim's address space running out, host's mmap
 * failing) says so in its own message; under a quiet allocator that message is not left
 * behind either: a quiet replay changes nothing of its caller's last error. */
static hbm_status refusing_alloc(void *ctx, uint64_t size, uint64_t *addr_out) {
    (void)ctx, (void)addr_out;
    return hbmi_error(HBM_ERR_OOM, "refusing device: no mapping for %llu bytes", (unsigned long long)size);
}
static hbm_status refusing_free(void *ctx, uint64_t addr, uint64_t size) {
    (void)ctx, (void)addr, (void)size;
    return HBM_OK;
}
static void nothing(void *ctx) { (void)ctx; }

static void test_quiet_device_failure(void) {
    static const hbm_device_ops ops = {.kind = "sim", .alloc = refusing_alloc, .free = refusing_free, .destroy = nothing};
    static const char *const cfgs[] = {"allocator=bfc,preallocate=false", "allocator=platform", "allocator=torch",
                                       "allocator=cuda_async", "allocator=vmm"};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        hbm_device_info info = {.kind = "sim", .name = "refusing", .total_bytes = 1ULL << 30, .alignment = 512,
                                .granularity = 512};
        env e;
        CHECK_OK(hbm_device_open_ops(&ops, NULL, &info, &e.dev));
        CHECK_OK(hbm_allocator_open(e.dev, cfgs[i], &e.a));
        uint64_t addr;
        CHECK(hbmi_allocator_set_quiet(e.a, 1) == 0);
        hbmi_error(HBM_ERR_INVALID, "before the quiet failure");
        CHECK_STATUS(hbm_alloc(e.a, 1 << 20, NULL, &addr), HBM_ERR_OOM);
        CHECK_STR(hbm_last_error(), "before the quiet failure");
        CHECK(hbmi_allocator_set_quiet(e.a, 0) == 1);
        CHECK_STATUS(hbm_alloc(e.a, 1 << 20, NULL, &addr), HBM_ERR_OOM);
        CHECK(strcmp(hbm_last_error(), "before the quiet failure") != 0);
        close_env(&e);
    }
}

int main(void) {
    RUN(test_no_oom_yet);
    RUN(test_limit);
    RUN(test_too_big);
    RUN(test_shared_device);
    RUN(test_exceeds_device);
    RUN(test_handler_and_truncation);
    RUN(test_bfc_fraction);
    RUN(test_bfc_fragmentation);
    RUN(test_advice_kept_beside);
    RUN(test_quiet_per_allocator);
    RUN(test_quiet_device_failure);
    return test_done();
}
