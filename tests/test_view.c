/* test_view.c - the view figures (peak, buffers at the peak, totals) on a hand-made trace,
 * empty traces, plans seen as traces, and host-allocation failures. */
#include "core/internal.h"
#include "test.h"

static hbm_trace *small(void) {
    hbm_trace *t;
    if (hbm_trace_new(&t)) return NULL;
    hbm_tag a = {.op_name = "dot", .shape = "f32[8]", .source_file = "m.py", .source_line = 4};
    hbm_tag b = {.op_name = "add", .source_file = "m.py", .source_line = 9, .category = HBM_CAT_TEMP};
    uint32_t ta, tb;
    if (hbm_trace_intern(t, &a, &ta) || hbm_trace_intern(t, &b, &tb)) return NULL;
    hbm_trace_event ev[] = {
        {.kind = HBM_EV_ALLOC, .addr = 1, .size = 100, .requested = 100, .tag = ta},
        {.kind = HBM_EV_ALLOC, .addr = 2, .size = 300, .requested = 300, .tag = tb},
        {.kind = HBM_EV_ALLOC, .addr = 3, .size = 200, .requested = 200, .tag = ta}, /* peak: 600 */
        {.kind = HBM_EV_FREE, .addr = 2},
        {.kind = HBM_EV_ALLOC, .addr = 4, .size = 50, .requested = 50},
        {.kind = HBM_EV_OOM, .requested = 1 << 30, .tag = tb},
    };
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        if (hbm_trace_add(t, &ev[i])) return NULL;
    snprintf(t->name, sizeof t->name, "small<&>");
    return t;
}

static char *render(const hbm_trace *t, int kind, const hbm_view_options *o) {
    FILE *f = tmpfile();
    if (!f) return NULL;
    hbm_status s = kind == 0 ? hbm_view_text(t, o, f) : kind == 1 ? hbm_view_json(t, o, f) : hbm_view_html(t, o, f);
    if (s) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    fclose(f);
    return buf;
}

static void test_text(void) {
    hbm_trace *t = small();
    CHECK(t);
    char *out = render(t, 0, NULL);
    CHECK(out);
    CHECK_CONTAINS(out, "peak in use  600B at event 2");
    CHECK_CONTAINS(out, "allocs 4, frees 1, OOMs 1 (first at event 5: 1.00GiB)");
    CHECK_CONTAINS(out, "Top 3 of 3 buffers live at the peak (600B requested)");
    CHECK_CONTAINS(out, "300B  50.0%  add");
    CHECK_CONTAINS(out, "m.py:9");
    /* totals at the peak: dot 300 (100 + 200), add 300 */
    CHECK_CONTAINS(out, "Totals by op (top 3 of 3)");
    free(out);
    hbm_view_options o;
    hbm_view_options_default(&o);
    o.top = 1;
    o.ascii = 1;
    o.width = 6;
    out = render(t, 0, &o);
    CHECK(out);
    CHECK_CONTAINS(out, "Top 1 of 3");
    CHECK_CONTAINS(out, "  in use    :*@=++  max 600B");
    free(out);
    hbm_trace_free(t);
}

static void test_json_html(void) {
    hbm_trace *t = small();
    CHECK(t);
    char *out = render(t, 1, NULL);
    CHECK(out);
    CHECK_CONTAINS(out, "\"peak_bytes_in_use\": 600, \"peak_event\": 2");
    CHECK_CONTAINS(out, "\"live_at_peak\": 3, \"live_at_peak_bytes\": 600");
    CHECK_CONTAINS(out, "\"top\": [{\"size\": 300, \"start\": 1, \"end\": 3, \"op\": \"add\"");
    CHECK_CONTAINS(out, "{\"key\": \"m.py:4\", \"at_peak\": 300, \"allocated\": 300, \"allocs\": 2}");
    free(out);
    out = render(t, 2, NULL);
    CHECK(out);
    CHECK_CONTAINS(out, "<title>hbm view: small&lt;&amp;&gt;</title>");
    CHECK_CONTAINS(out, "{\"title\": \"small\\u003c\\u0026\\u003e\"");
    CHECK_CONTAINS(out, "[300,1,3,\"add\",\"\",\"m.py:9\",\"\",\"temp\"]");
    CHECK(!strstr(out, "http://") && !strstr(out, "https://"));
    free(out);
    hbm_trace_free(t);
}

static void test_empty_and_plan(void) {
    hbm_trace *t;
    CHECK_OK(hbm_trace_new(&t));
    for (int k = 0; k < 3; k++) {
        char *out = render(t, k, NULL);
        CHECK(out);
        free(out);
    }
    hbm_trace_free(t);
    /* a plan (a timeline) is viewed as the trace of its buffers */
    hbm_timeline *tl;
    CHECK_OK(hbm_timeline_new(&tl));
    hbm_tag g = {.op_name = "fusion.7", .shape = "f32[1024]"};
    CHECK_OK(hbm_timeline_add(tl, 4096, 0, 4, &g, NULL));
    CHECK_OK(hbm_timeline_add(tl, 1024, 2, 6, NULL, NULL));
    CHECK_OK(hbm_trace_from_timeline(tl, &t));
    char *out = render(t, 1, NULL);
    CHECK(out);
    CHECK_CONTAINS(out, "\"peak_bytes_in_use\": 5120");
    CHECK_CONTAINS(out, "\"op\": \"fusion.7\"");
    free(out);
    hbm_trace_free(t);
    hbm_timeline_free(tl);
}

static void test_fault_injection(void) {
    hbm_trace *t = small();
    CHECK(t);
    for (int kind = 0; kind < 3; kind++) {
        for (uint64_t k = 1;; k++) {
            FILE *f = tmpfile();
            CHECK(f);
            hbm_debug_fail_host_alloc(k);
            hbm_status s = kind == 0 ? hbm_view_text(t, NULL, f) : kind == 1 ? hbm_view_json(t, NULL, f) : hbm_view_html(t, NULL, f);
            hbm_debug_fail_host_alloc(0);
            fclose(f);
            if (s == HBM_OK) break;
            CHECK_STATUS(s, HBM_ERR_NOMEM);
        }
    }
    hbm_trace_free(t);
}

int main(void) {
    RUN(test_text);
    RUN(test_json_html);
    RUN(test_empty_and_plan);
    RUN(test_fault_injection);
    return test_done();
}
