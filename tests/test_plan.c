/* test_plan.c - buffer assignment rules on small modules written for the purpose, XLA's
 * heap packing, the svd examples (the seed bug), reports, devices. */
#include "core/internal.h"
#include "hbm/json_api.h"
#include "pack/xla_heap.h"
#include "test.h"

/* The modules here are written to XLA:GPU's rules; the file name says so (their unfused
 * elementwise ops would otherwise read as XLA:CPU's, see test_backend_from_content). */
static hbm_plan *plan_named(const char *text, const char *path, hbm_hlo_module **mout) {
    hbm_hlo_module *m = NULL;
    if (hbm_hlo_parse(text, strlen(text), path, &m) != HBM_OK) return NULL;
    hbm_plan *p = NULL;
    if (hbm_plan_run(m, NULL, &p) != HBM_OK) {
        hbm_hlo_module_free(m);
        return NULL;
    }
    *mout = m;
    return p;
}

static hbm_plan *plan_text(const char *text, hbm_hlo_module **mout) { return plan_named(text, "t.gpu.hlo", mout); }

static hbm_plan_stats stats_of(const char *text) {
    hbm_plan_stats st;
    memset(&st, 0xff, sizeof st);
    hbm_hlo_module *m;
    hbm_plan *p = plan_text(text, &m);
    if (p) {
        hbm_plan_get_stats(p, &st);
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
    } else {
        fprintf(stderr, "plan failed: %s\n", hbm_last_error());
    }
    return st;
}

/* An elementwise chain reuses its operands' buffers: everything lands in the output. */
static void test_elementwise_chain_reuses_buffers(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "ENTRY e {\n"
                                 "  p = f32[1024]{0} parameter(0)\n"
                                 "  a = f32[1024]{0} exponential(p)\n"
                                 "  b = f32[1024]{0} negate(a)\n"
                                 "  ROOT c = f32[1024]{0} sqrt(b)\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096);
    CHECK_EQ_U64(st.output_size_in_bytes, 4096);
    CHECK_EQ_U64(st.temp_size_in_bytes, 0);
}

/* The verdict at its edges: the peak against the framework's share, then the device. */
static void test_verdict_edges(void) {
    hbm_hlo_module *m;
    hbm_plan *p = plan_text("HloModule m, is_scheduled=true\n"
                            "ENTRY e {\n"
                            "  p = f32[1024]{0} parameter(0)\n"
                            "  ROOT c = f32[1024]{0} sqrt(p)\n"
                            "}\n",
                            &m);
    CHECK(p != NULL);
    if (!p) return;
    hbm_plan_stats st;
    CHECK_OK(hbm_plan_get_stats(p, &st));
    uint64_t peak = st.peak_bytes, limit = 1;
    CHECK(peak > 0);
    CHECK(hbm_plan_verdict_get(p, 0, 0.75, &limit) == HBM_VERDICT_NONE);
    CHECK(hbm_plan_verdict_get(p, peak, 0, &limit) == HBM_VERDICT_FITS && limit == peak);
    CHECK(hbm_plan_verdict_get(p, peak, 1, &limit) == HBM_VERDICT_FITS && limit == peak);
    CHECK(hbm_plan_verdict_get(p, peak - 1, 0, NULL) == HBM_VERDICT_DOES_NOT_FIT);
    /* under a fraction, the limit is XLA's (total x fraction rounded up to 2 MiB, at most the
     * total): a module of a few KiB fits any device it fits physically */
    CHECK(hbm_plan_verdict_get(p, peak, 0.5, &limit) == HBM_VERDICT_FITS && limit == peak);
    CHECK(hbm_plan_verdict_get(p, 2 * peak, 0.5, &limit) == HBM_VERDICT_FITS && limit == 2 * peak);
    CHECK(hbm_plan_verdict_get(p, peak - 1, 0.5, NULL) == HBM_VERDICT_DOES_NOT_FIT);
    CHECK(!strcmp(hbm_plan_verdict_str(HBM_VERDICT_FITS_PHYSICALLY_ONLY), "fits_physically_only"));
    CHECK(!strcmp(hbm_plan_verdict_str(HBM_VERDICT_DOES_NOT_FIT), "does_not_fit"));
    CHECK(!strcmp(hbm_plan_verdict_str(HBM_VERDICT_NONE), ""));
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

/* A non-elementwise op cannot write over its operand: a temp is needed. */
static void test_non_elementwise_needs_temp(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "ENTRY e {\n"
                                 "  p = f32[32,32]{1,0} parameter(0)\n"
                                 "  a = f32[32,32]{1,0} transpose(p), dimensions={1,0}\n"
                                 "  b = f32[32,32]{1,0} dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                                 "  ROOT c = f32[32,32]{1,0} transpose(b), dimensions={1,0}\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096);
    CHECK_EQ_U64(st.output_size_in_bytes, 4096);
    CHECK_EQ_U64(st.temp_size_in_bytes, 4096);
}

/* Two temps alive together are packed side by side with the 128-byte alignment. */
static void test_heap_alignment_and_tuple_tables(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "ENTRY e {\n"
                                 "  p = f32[10]{0} parameter(0)\n"
                                 "  a = f32[10]{0} sort(p), dimensions={0}\n"
                                 "  b = f32[10]{0} reverse(p), dimensions={0}\n"
                                 "  t = (f32[10]{0}, f32[10]{0}) tuple(a, b)\n"
                                 "  ROOT d = f32[20]{0} concatenate(a, b), dimensions={0}\n"
                                 "}\n");
    /* tuple table 16 B (own allocation) + heap: a at 0 (40 B), b at 128 (40 B) = 168 */
    CHECK_EQ_U64(st.temp_size_in_bytes, 128 + 168);
    CHECK_EQ_U64(st.temp_fragmentation_bytes, 168 - 80);
    CHECK_EQ_U64(st.output_size_in_bytes, 80);
}

/* XLA's 2026 builds print no get-tuple-element lines: an operand "%x#N" is element N of
 * x's tuple. The module means what it means written the old way, and such a text comes from
 * a build that aligns to 256 (kXlaAllocatedBufferAlignBytes); --alignment still decides. */
#define TUPLE_MODULE(A0, A1, B0)                                                                  \
    "HloModule m, is_scheduled=true\n"                                                            \
    "ENTRY e {\n"                                                                                 \
    "  p = f32[10]{0} parameter(0)\n"                                                             \
    "  c = (f32[10]{0}, (f32[30]{0}, s8[4096]{0})) custom-call(p), custom_call_target=\"f\"\n" \
    "  " A0 "  " A1 "  a = f32[10]{0} sort(" B0 "), dimensions={0}\n"                              \
    "  b = f32[30]{0} reverse(c1_0), dimensions={0}\n"                                           \
    "  ROOT d = f32[40]{0} concatenate(a, b), dimensions={0}\n"                                  \
    "}\n"
static void test_tuple_element_operands(void) {
    static const char old_form[] = TUPLE_MODULE("c0 = f32[10]{0} get-tuple-element(c), index=0\n",
                                                "c1 = (f32[30]{0}, s8[4096]{0}) get-tuple-element(c), index=1\n"
                                                "  c1_0 = f32[30]{0} get-tuple-element(c1), index=0\n",
                                                "c0");
    static const char new_form[] = TUPLE_MODULE("", "c1_0 = f32[30]{0} reverse(c#1#0), dimensions={0}\n", "c#0");
    for (int align = 128; align <= 256; align += 128) {
        hbm_plan_options o;
        hbm_plan_options_default(&o);
        o.alignment = (uint64_t)align;
        hbm_plan_stats st[2];
        for (int k = 0; k < 2; k++) {
            const char *t = k ? new_form : old_form;
            hbm_hlo_module *m = NULL;
            hbm_plan *p = NULL;
            CHECK_OK(hbm_hlo_parse(t, strlen(t), "t.gpu.hlo", &m));
            CHECK_OK(hbm_plan_run(m, &o, &p));
            if (p) hbm_plan_get_stats(p, &st[k]);
            hbm_plan_free(p);
            hbm_hlo_module_free(m);
        }
        CHECK_EQ_U64(st[1].temp_size_in_bytes, st[0].temp_size_in_bytes);
        CHECK_EQ_U64(st[1].output_size_in_bytes, st[0].output_size_in_bytes);
        CHECK_EQ_U64(st[1].peak_bytes, st[0].peak_bytes);
    }
    /* default alignment: the old form's 128, the new form's 256 */
    hbm_plan_stats a = stats_of(old_form), b = stats_of(new_form);
    CHECK(b.temp_size_in_bytes > a.temp_size_in_bytes);
    hbm_hlo_module *m = NULL;
    hbm_plan *p = NULL;
    CHECK_OK(hbm_hlo_parse(new_form, strlen(new_form), "t.gpu.hlo", &m));
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    char *txt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&txt, &len);
    CHECK_OK(hbm_plan_explain(p, f, 0, 0, NULL, 0));
    fclose(f);
    CHECK_CONTAINS(txt, "256-byte alignment (XLA 2026 print form: operands %x#N)");
    free(txt);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    /* an element that is not there, of a value that is no tuple, of a name not defined */
    /* ... and indices past int64 (fuzz_hlo: a signed overflow before the check) */
    static const char *const bad[] = {"c#2", "p#0", "q#0", "c#1#2", "c#99999999999999999999", "q#9223372036854775807"};
    static const char *const why[] = {"is not in the tuple shape", "is not in the tuple shape",
                                      "not defined in this computation", "is not in the tuple shape",
                                      "is not in the tuple shape", "not defined in this computation"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char t[1024];
        snprintf(t, sizeof t, TUPLE_MODULE("", "c1_0 = f32[30]{0} reverse(c#1#0), dimensions={0}\n", "%s"), bad[k]);
        hbm_hlo_module *bm = NULL;
        CHECK(hbm_hlo_parse(t, strlen(t), "t.gpu.hlo", &bm) != HBM_OK);
        CHECK_CONTAINS(hbm_last_error(), why[k]);
        CHECK_CONTAINS(hbm_last_error(), "t.gpu.hlo:6:");
        hbm_hlo_module_free(bm);
    }
}

/* input_output_alias: a donated parameter is the output, nothing else to allocate. */
static void test_donated_parameter(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }\n"
                                 "ENTRY e {\n"
                                 "  p = f32[256]{0} parameter(0)\n"
                                 "  u = f32[16]{0} constant({...})\n"
                                 "  i = s32[] constant(0)\n"
                                 "  ROOT d = f32[256]{0} dynamic-update-slice(p, u, i)\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 1024);
    CHECK_EQ_U64(st.alias_size_in_bytes, 1024);
    CHECK_EQ_U64(st.output_size_in_bytes, 1024);
    CHECK_EQ_U64(st.temp_size_in_bytes, 0);
    CHECK_EQ_U64(st.constant_size_in_bytes, 64 + 4);
    CHECK_EQ_U64(st.peak_bytes, 1024 + 68);
}

/* output_to_operand_aliasing: the custom call writes into its operand's buffer, as
 * jaxdecomp's pfft3d does; only the workspace is temp. */
static void test_custom_call_in_place(void) {
    hbm_plan_stats st = stats_of(
        "HloModule m, is_scheduled=true\n"
        "%fb () -> s8[4096] {\n  %z = s8[] constant(0)\n  ROOT %b = s8[4096]{0} broadcast(%z), dimensions={}\n}\n"
        "%fc (x: f32[1024]) -> c64[1024] {\n  %x = f32[1024]{0} parameter(0)\n  ROOT %c = c64[1024]{0} convert(%x)\n}\n"
        "ENTRY e {\n"
        "  p = f32[1024]{0} parameter(0)\n"
        "  w = c64[1024]{0} fusion(p), kind=kLoop, calls=%fc\n"
        "  s = s8[4096]{0} fusion(), kind=kLoop, calls=%fb\n"
        "  ROOT r = c64[1024]{0} custom-call(w, s), custom_call_target=\"pfft3d\", output_to_operand_aliasing={{}: (0, {})}\n"
        "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096);
    CHECK_EQ_U64(st.output_size_in_bytes, 8192);
    CHECK_EQ_U64(st.temp_size_in_bytes, 4096);
}

/* A while loop: init, body parameter, body root and result share one buffer per element;
 * the loop's tuple pointer tables are allocations of their own. */
static void test_while_shares_loop_state(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "%body (s: (s32[], f32[256])) -> (s32[], f32[256]) {\n"
                                 "  %s = (s32[], f32[256]{0}) parameter(0)\n"
                                 "  %i = s32[] get-tuple-element(%s), index=0\n"
                                 "  %one = s32[] constant(1)\n"
                                 "  %j = s32[] add(%i, %one)\n"
                                 "  %v = f32[256]{0} get-tuple-element(%s), index=1\n"
                                 "  %w = f32[256]{0} exponential(%v)\n"
                                 "  ROOT %t = (s32[], f32[256]{0}) tuple(%j, %w)\n"
                                 "}\n"
                                 "%cond (c: (s32[], f32[256])) -> pred[] {\n"
                                 "  %c = (s32[], f32[256]{0}) parameter(0)\n"
                                 "  %k = s32[] get-tuple-element(%c), index=0\n"
                                 "  %n = s32[] constant(8)\n"
                                 "  ROOT %lt = pred[] compare(%k, %n), direction=LT\n"
                                 "}\n"
                                 "ENTRY e {\n"
                                 "  p = f32[256]{0} parameter(0)\n"
                                 "  z = s32[] constant(0)\n"
                                 "  c = f32[256]{0} copy(p)\n"
                                 "  t0 = (s32[], f32[256]{0}) tuple(z, c)\n"
                                 "  w = (s32[], f32[256]{0}) while(t0), condition=%cond, body=%body\n"
                                 "  ROOT r = f32[256]{0} get-tuple-element(w), index=1\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 1024);
    CHECK_EQ_U64(st.output_size_in_bytes, 1024); /* copy, body values and result: one buffer */
    CHECK_EQ_U64(st.constant_size_in_bytes, 12);
    /* temp: the tuple tables (t0/while/body parameter: one buffer; body root) and the
     * loop counter buffer (the constant z is its own allocation; j lives in the heap) */
    CHECK(st.temp_size_in_bytes > 0 && st.temp_size_in_bytes < 1024);
}

/* SSA form (HloAliasAnalysis runs the dataflow with ssa_form=true): the body writes a new
 * loop element, so the while, its body's and its condition's parameters define phi
 * values; the element's buffer is free in the body between the parameter's last use (a)
 * and the new value (w), and b, live only there, takes it. Without phis the loop's input
 * would live through the whole loop and b would need 1 KiB of temp more (2180 B). */
static void test_while_phi_frees_loop_buffer(void) {
    hbm_plan_stats st = stats_of(
        "HloModule m, is_scheduled=true\n"
        "%body (s: (s32[], f32[16,16])) -> (s32[], f32[16,16]) {\n"
        "  %s = (s32[], f32[16,16]{1,0}) parameter(0)\n"
        "  %i = s32[] get-tuple-element(%s), index=0\n"
        "  %one = s32[] constant(1)\n"
        "  %j = s32[] add(%i, %one)\n"
        "  %v = f32[16,16]{1,0} get-tuple-element(%s), index=1\n"
        "  %a = f32[16,16]{1,0} transpose(%v), dimensions={1,0}\n"
        "  %b = f32[16,16]{1,0} transpose(%a), dimensions={1,0}\n"
        "  %c = f32[16,16]{1,0} transpose(%b), dimensions={1,0}\n"
        "  %w = f32[16,16]{1,0} transpose(%c), dimensions={1,0}\n"
        "  ROOT %t = (s32[], f32[16,16]{1,0}) tuple(%j, %w)\n"
        "}\n"
        "%cond (c: (s32[], f32[16,16])) -> pred[] {\n"
        "  %c = (s32[], f32[16,16]{1,0}) parameter(0)\n"
        "  %k = s32[] get-tuple-element(%c), index=0\n"
        "  %n = s32[] constant(8)\n"
        "  ROOT %lt = pred[] compare(%k, %n), direction=LT\n"
        "}\n"
        "ENTRY e {\n"
        "  p = f32[16,16]{1,0} parameter(0)\n"
        "  z = s32[] constant(0)\n"
        "  c = f32[16,16]{1,0} copy(p)\n"
        "  zc = s32[] copy(z)\n"
        "  t0 = (s32[], f32[16,16]{1,0}) tuple(zc, c)\n"
        "  w = (s32[], f32[16,16]{1,0}) while(t0), condition=%cond, body=%body\n"
        "  ROOT r = f32[16,16]{1,0} get-tuple-element(w), index=1\n"
        "}\n");
    CHECK_EQ_U64(st.output_size_in_bytes, 1024); /* c, phis, b and w: one allocation */
    /* heap: the tuple tables at 0 (128), a and c (never live together) at 128, the
     * counter at 1152 */
    CHECK_EQ_U64(st.temp_size_in_bytes, 1156);
}

/* GPU's FusionCanShareBufferHint lets a multi-output loop fusion's elements reuse its
 * operands' buffers: the walk from a parameter may meet the root tuple, and reaching the
 * other (elementwise) output does not forbid it. f{0} takes x's buffer, f{1} y's. */
static void test_multi_output_fusion_shares(void) {
    hbm_plan_stats st = stats_of(
        "HloModule m, is_scheduled=true\n"
        "%f (a: f32[256], b: f32[256]) -> (f32[256], f32[256]) {\n"
        "  %a = f32[256]{0} parameter(0)\n"
        "  %b = f32[256]{0} parameter(1)\n"
        "  %s = f32[256]{0} subtract(%a, %b)\n"
        "  %n = f32[256]{0} negate(%s)\n"
        "  ROOT %t = (f32[256]{0}, f32[256]{0}) tuple(%s, %n)\n"
        "}\n"
        "ENTRY e {\n"
        "  p0 = f32[256]{0} parameter(0)\n"
        "  p1 = f32[256]{0} parameter(1)\n"
        "  x = f32[256]{0} exponential(p0)\n"
        "  y = f32[256]{0} log(p1)\n"
        "  f = (f32[256]{0}, f32[256]{0}) fusion(x, y), kind=kLoop, calls=%f\n"
        "  g0 = f32[256]{0} get-tuple-element(f), index=0\n"
        "  g1 = f32[256]{0} get-tuple-element(f), index=1\n"
        "  ROOT r = f32[256]{0} add(g0, g1)\n"
        "}\n");
    CHECK_EQ_U64(st.output_size_in_bytes, 1024);
    CHECK_EQ_U64(st.temp_size_in_bytes, 128 + 1024); /* f's table; y with f{1} (not 2176) */
}

/* cuSOLVER's Cholesky overwrites its operand with output {0} (CanShareBufferHint): a, the
 * factor and the negated result are one buffer; the workspace and info are temp. */
static void test_cholesky_shares_operand(void) {
    hbm_plan_stats st = stats_of(
        "HloModule m, is_scheduled=true\n"
        "ENTRY e {\n"
        "  p = f32[16,16]{1,0} parameter(0)\n"
        "  a = f32[16,16]{1,0} exponential(p)\n"
        "  cc = (f32[16,16]{1,0}, f32[64]{0}, s32[]) custom-call(a), custom_call_target=\"__cusolver$cholesky\"\n"
        "  g = f32[16,16]{1,0} get-tuple-element(cc), index=0\n"
        "  ROOT r = f32[16,16]{1,0} negate(g)\n"
        "}\n");
    CHECK_EQ_U64(st.output_size_in_bytes, 1024);
    CHECK_EQ_U64(st.temp_size_in_bytes, 388); /* table 24 @0, workspace 256 @128, info 4 @384 */
}

/* The backend read from the module's content when the file name does not say it: an
 * unfused iota is XLA:CPU's (XLA:GPU's FusionWrapper wraps it), a fusion named by
 * XLA:GPU's RenameFusions is XLA:GPU's; a module with neither is GPU by assumption, and the
 * explanation says so. */
static void test_backend_from_content(void) {
    static const char *const text[] = {
        "HloModule m, is_scheduled=true\nENTRY e {\n  ROOT i = s32[8]{0} iota(), iota_dimension=0\n}\n",
        "HloModule m, is_scheduled=true\n%wrapped_iota_computation () -> s32[8] {\n"
        "  ROOT i = s32[8]{0} iota(), iota_dimension=0\n}\n"
        "ENTRY e {\n  ROOT wrapped_iota = s32[8]{0} fusion(), kind=kLoop, calls=%wrapped_iota_computation\n}\n",
        "HloModule m, is_scheduled=true\nENTRY e {\n  p = f32[8]{0} parameter(0)\n  ROOT c = f32[8]{0} copy(p)\n}\n"};
    static const hbm_backend want[] = {HBM_BACKEND_CPU, HBM_BACKEND_GPU, HBM_BACKEND_GPU};
    for (int k = 0; k < 3; k++) {
        hbm_hlo_module *m;
        hbm_plan *p = plan_named(text[k], "t.hlo", &m);
        CHECK(p != NULL);
        if (!p) continue;
        hbm_plan_stats st;
        CHECK_OK(hbm_plan_get_stats(p, &st));
        CHECK_EQ_U64((uint64_t)st.backend, (uint64_t)want[k]);
        char *out = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&out, &n);
        CHECK_OK(hbm_plan_explain(p, f, 0, 0, NULL, 8));
        fclose(f);
        if (k == 0) CHECK_CONTAINS(out, "Rules: XLA:CPU buffer assignment, 64-byte alignment.");
        if (k == 2) CHECK_CONTAINS(out, "(assumed: nothing in the module says which XLA compiler made it");
        else CHECK(!strstr(out, "assumed"));
        free(out);
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
    }
}

/* A tuple shape prints as ShapeUtil::HumanString prints it: an "index=N" comment before
 * every fifth element, as in XLA's "Shape:" lines. */
static void test_tuple_shape_index_comments(void) {
    hbm_hlo_module *m;
    hbm_plan *p = plan_text("HloModule m, is_scheduled=true\n"
                            "ENTRY e {\n"
                            "  p = f32[1000]{0} parameter(0)\n"
                            "  ROOT t = (f32[1000]{0}, f32[1000]{0}, f32[1000]{0}, f32[1000]{0}, f32[1000]{0}, "
                            "/*index=5*/f32[1000]{0}, f32[1000]{0}) tuple(p, p, p, p, p, p, p)\n"
                            "}\n",
                            &m);
    CHECK(p != NULL);
    if (!p) return;
    hbm_plan_buffer b[16];
    size_t n = hbm_plan_peak_buffers(p, b, 16);
    int found = 0;
    for (size_t i = 0; i < n; i++)
        if (b[i].shape && b[i].shape[0] == '(') {
            CHECK_STR(b[i].shape, "(f32[1000], f32[1000], f32[1000], f32[1000], f32[1000], /*index=5*/f32[1000], f32[1000])");
            found = 1;
        }
    CHECK(found);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

/* A TPU module that does not fit gets XLA:TPU's compile-time OOM text: HBM is memory space
 * 0 only (s, in S(1), is not counted), sizes as tsl's HumanReadableNumBytes, padded and
 * unpadded bytes from the T(8,128) tiles (f32[100,100] holds 104x128 floats: 52.0K, 39.1K
 * of data), the temp heap (a and b, 104.0K: b may not take the output's allocation) rounded
 * up to 16 KiB (128.0K, 24.0K of it fragmentation), what the module cannot say (reserved,
 * scoped, overlays) printed as unknown; the outputs are in Used, not in the program. */
static void test_tpu_oom_text(void) {
    hbm_hlo_module *m;
    hbm_plan *p = plan_named(
        "HloModule m, is_scheduled=true\n"
        "ENTRY e {\n"
        "  p = f32[100,100]{1,0:T(8,128)} parameter(0)\n"
        "  a = f32[100,100]{1,0:T(8,128)} exponential(p), metadata={op_name=\"jit(f)/exp\"}\n"
        "  b = f32[100,100]{1,0:T(8,128)} transpose(a), dimensions={1,0}, metadata={op_name=\"jit(f)/transpose\"}\n"
        "  s = f32[100,100]{1,0:T(8,128)S(1)} negate(b)\n"
        "  ROOT c = f32[100,100]{1,0:T(8,128)} add(a, s)\n"
        "}\n",
        "t.hlo", &m);
    CHECK(p != NULL);
    if (!p) return;
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    hbm_plan_target t = {100 << 10, 1.0, "a 100KiB device"};
    CHECK_OK(hbm_plan_write_text(p, f, 15, &t));
    fclose(f);
    CHECK_CONTAINS(out, "XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 232.0K of "
                        "100.0K hbm. Exceeded hbm capacity by 132.0K. HLO module: m.\n");
    CHECK_CONTAINS(out, "Total hbm usage >= 180.0K:\n");
    CHECK_CONTAINS(out, "    program          128.0K \n    arguments         52.0K \n");
    CHECK_CONTAINS(out, "Output size 52.0K; shares 0B with arguments.");
    CHECK_CONTAINS(out, "    reserved        unknown");
    CHECK_CONTAINS(out, "    scoped          unknown");
    CHECK_CONTAINS(out, "    HLO temp         128.0K (75.1% utilization: Unpadded (78.1K) Padded (104.0K), 18.8% "
                        "fragmentation (24.0K))");
    CHECK_CONTAINS(out, "  2. Size: 52.0K\n     Operator: op_name=\"jit(f)/exp\"\n     Shape: f32[100,100]\n"
                        "     Unpadded size: 39.1K\n     Extra memory due to padding: 12.9K (1.3x expansion)\n"
                        "     XLA label: %a = f32[100,100]{1,0:T(8,128)} exponential(p)");
    CHECK(!strstr(out, "XLA label: %s =")); /* S(1) is not HBM */
    CHECK(!strstr(out, "BufferAssignment OOM Debugging"));
    free(out);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

/* XLA:TPU's figures (docs/tpu.md, Rules; measured on generated modules, its compiler's
 * code is not public). A tuple's table: 4 bytes an element, rounded up to 512 bytes on v5e,
 * 32 on v6e. memory_analysis() temp: the HBM temp allocation rounded up to 16 KiB, 0 when it
 * holds only tuple tables and scalar work. A temp buffer never takes an output's allocation,
 * a donated parameter's included. */
static hbm_plan_stats tpu_stats(const char *text, const char *device) {
    hbm_plan_stats st;
    memset(&st, 0xff, sizeof st);
    hbm_hlo_module *m = NULL;
    hbm_plan *p = NULL;
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    if (hbm_plan_options_for_device(&o, device) == HBM_OK && o.backend == HBM_BACKEND_TPU &&
        hbm_hlo_parse(text, strlen(text), "t.hlo", &m) == HBM_OK && hbm_plan_run(m, &o, &p) == HBM_OK)
        hbm_plan_get_stats(p, &st);
    else
        fprintf(stderr, "plan failed: %s\n", hbm_last_error());
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    return st;
}

/* XLA:TPU packs its HBM temp heap in allocation order (docs/tpu.md, Rules): a freed 512-byte
 * block does not take an 8 KiB buffer, however much alignment gap follows it: the buffer goes
 * on top; blocks freed later merge across the gap. Events: A a, A b, A r, F a, A c, F b, A d,
 * F r. Sequential: a at 0, b 16K, r 32K, c 48K (the chunk a left is 512 bytes), d 0 (the
 * chunks of a and b merged): 57,344 bytes, 65,536 counted. Best of spatial and temporal: c 0,
 * d 16K, r 32K: 33,280 bytes, 49,152 counted. */
static uint64_t tpu_heap_temp(const char *text, const char *device, unsigned heap) {
    uint64_t temp = UINT64_MAX;
    hbm_hlo_module *m = NULL;
    hbm_plan *p = NULL;
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    o.heap = heap;
    hbm_plan_stats st;
    if (hbm_plan_options_for_device(&o, device) == HBM_OK && hbm_hlo_parse(text, strlen(text), "t.hlo", &m) == HBM_OK &&
        hbm_plan_run(m, &o, &p) == HBM_OK && hbm_plan_get_stats(p, &st) == HBM_OK)
        temp = st.temp_size_in_bytes;
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    return temp;
}

static void test_tpu_sequential_heap(void) {
    const char *text = "HloModule m, is_scheduled=true\n"
                       "%add (x: f32[], y: f32[]) -> f32[] {\n"
                       "  %x = f32[]{:T(128)} parameter(0)\n"
                       "  %y = f32[]{:T(128)} parameter(1)\n"
                       "  ROOT %s = f32[]{:T(128)} add(%x, %y)\n"
                       "}\n"
                       "ENTRY e {\n"
                       "  q = f32[128]{0:T(128)} parameter(0)\n"
                       "  z = f32[]{:T(128)} constant(0)\n"
                       "  a = f32[128]{0:T(128)} negate(q)\n"
                       "  b = f32[128]{0:T(128)} exponential(q)\n"
                       "  r = f32[]{:T(128)} reduce(a, z), dimensions={0}, to_apply=%add\n"
                       "  c = f32[16,128]{1,0:T(8,128)} broadcast(b), dimensions={1}\n"
                       "  d = f32[16,128]{1,0:T(8,128)} broadcast(r), dimensions={}\n"
                       "  ROOT o = f32[16,128]{1,0:T(8,128)} multiply(c, d)\n"
                       "}\n";
    hbm_plan_stats st = tpu_stats(text, "TPU-v5p");
    CHECK_EQ_U64(st.argument_size_in_bytes, 512);
    CHECK_EQ_U64(st.output_size_in_bytes, 8192);
    const char *tpus[] = {"TPU-v4", "TPU-v5e", "TPU-v5p", "TPU-v6e"};
    for (size_t i = 0; i < sizeof tpus / sizeof *tpus; i++) {
        CHECK_EQ_U64(tpu_heap_temp(text, tpus[i], HBM_PLAN_HEAP_DEFAULT), 65536);
        CHECK_EQ_U64(tpu_heap_temp(text, tpus[i], HBM_PLAN_HEAP_SEQUENTIAL), 65536);
        CHECK_EQ_U64(tpu_heap_temp(text, tpus[i], HBM_PLAN_HEAP_BEST_OF), 49152);
    }
    /* without a device: the TPU backend read from the layouts, its heap */
    hbm_hlo_module *m = NULL;
    hbm_plan *p = NULL;
    CHECK_OK(hbm_hlo_parse(text, strlen(text), "t.hlo", &m));
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    CHECK_OK(hbm_plan_get_stats(p, &st));
    CHECK_EQ_U64(st.temp_size_in_bytes, 65536);
    hbm_plan_free(p);
    p = NULL;
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    o.heap = 3;
    CHECK_STATUS(hbm_plan_run(m, &o, &p), HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "heap 3");
    CHECK(p == NULL);
    hbm_hlo_module_free(m);
}

static void test_tpu_tuple_tables_and_temp(void) {
    /* the table of t is the only temp: not counted; the output tuple's table is */
    const char *tables = "HloModule m, is_scheduled=true\n"
                         "ENTRY e {\n"
                         "  p = f32[8,128]{1,0:T(8,128)} parameter(0)\n"
                         "  t = (f32[8,128]{1,0:T(8,128)}, f32[8,128]{1,0:T(8,128)}) tuple(p, p)\n"
                         "  g = f32[8,128]{1,0:T(8,128)} get-tuple-element(t), index=1\n"
                         "  a = f32[8,128]{1,0:T(8,128)} negate(g)\n"
                         "  b = f32[8,128]{1,0:T(8,128)} exponential(g)\n"
                         "  ROOT r = (f32[8,128]{1,0:T(8,128)}, f32[8,128]{1,0:T(8,128)}) tuple(a, b)\n"
                         "}\n";
    hbm_plan_stats st = tpu_stats(tables, "TPU-v5e");
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096);
    CHECK_EQ_U64(st.output_size_in_bytes, 4096 + 4096 + 512);
    CHECK_EQ_U64(st.temp_size_in_bytes, 0);
    st = tpu_stats(tables, "v6e");
    CHECK_EQ_U64(st.output_size_in_bytes, 4096 + 4096 + 32);
    CHECK_EQ_U64(st.temp_size_in_bytes, 0);
    /* a scalar loss: the reduce fusion keeps its buffer (not the output multiply's
     * allocation), a 512-byte temp that counts as 16 KiB */
    const char *loss = "HloModule m, is_scheduled=true\n"
                       "%add (x: f32[], y: f32[]) -> f32[] {\n"
                       "  %x = f32[]{:T(128)} parameter(0)\n"
                       "  %y = f32[]{:T(128)} parameter(1)\n"
                       "  ROOT %s = f32[]{:T(128)} add(%x, %y)\n"
                       "}\n"
                       "%fc (q: f32[8,128]) -> f32[] {\n"
                       "  %q = f32[8,128]{1,0:T(8,128)} parameter(0)\n"
                       "  %z = f32[]{:T(128)} constant(0)\n"
                       "  ROOT %r = f32[]{:T(128)} reduce(%q, %z), dimensions={0,1}, to_apply=%add\n"
                       "}\n"
                       "ENTRY e {\n"
                       "  p = f32[8,128]{1,0:T(8,128)} parameter(0)\n"
                       "  f = f32[]{:T(128)} fusion(p), kind=kLoop, calls=%fc\n"
                       "  k = f32[]{:T(128)} constant(2)\n"
                       "  ROOT m = f32[]{:T(128)} multiply(f, k)\n"
                       "}\n";
    st = tpu_stats(loss, "TPU-v5e");
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096);
    CHECK_EQ_U64(st.output_size_in_bytes, 512);
    CHECK_EQ_U64(st.temp_size_in_bytes, 16384);
    /* the loss all-reduced first: the all-reduce takes the fusion's heap slot, one 16 KiB
     * slot, not two (32 KiB) */
    const char *allreduce = "HloModule m, is_scheduled=true\n"
                            "%add (x: f32[], y: f32[]) -> f32[] {\n"
                            "  %x = f32[]{:T(128)} parameter(0)\n"
                            "  %y = f32[]{:T(128)} parameter(1)\n"
                            "  ROOT %s = f32[]{:T(128)} add(%x, %y)\n"
                            "}\n"
                            "%fc (q: f32[8,128]) -> f32[] {\n"
                            "  %q = f32[8,128]{1,0:T(8,128)} parameter(0)\n"
                            "  %z = f32[]{:T(128)} constant(0)\n"
                            "  ROOT %r = f32[]{:T(128)} reduce(%q, %z), dimensions={0,1}, to_apply=%add\n"
                            "}\n"
                            "ENTRY e {\n"
                            "  p = f32[8,128]{1,0:T(8,128)} parameter(0)\n"
                            "  f = f32[]{:T(128)} fusion(p), kind=kLoop, calls=%fc\n"
                            "  r = f32[]{:T(128)} all-reduce(f), replica_groups={}, to_apply=%add\n"
                            "  k = f32[]{:T(128)} constant(2)\n"
                            "  ROOT m = f32[]{:T(128)} multiply(r, k)\n"
                            "}\n";
    st = tpu_stats(allreduce, "TPU-v4");
    CHECK_EQ_U64(st.output_size_in_bytes, 512);
    CHECK_EQ_U64(st.temp_size_in_bytes, 16384);
    /* the loss written over a donated scalar s (its output {0}): the fusion does not take
     * s's allocation, though s is dead by then and the multiply could write over the
     * fusion; it stays a temp, 16 KiB counted (the zoo's Flax optimizer steps and donated
     * MLPs: their scalars sit in XLA:TPU's temp, not in the donated parameters) */
    const char *donated = "HloModule m, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias) }\n"
                          "%add (x: f32[], y: f32[]) -> f32[] {\n"
                          "  %x = f32[]{:T(128)} parameter(0)\n"
                          "  %y = f32[]{:T(128)} parameter(1)\n"
                          "  ROOT %s = f32[]{:T(128)} add(%x, %y)\n"
                          "}\n"
                          "%fc (q: f32[8,128]) -> f32[] {\n"
                          "  %q = f32[8,128]{1,0:T(8,128)} parameter(0)\n"
                          "  %z = f32[]{:T(128)} constant(0)\n"
                          "  ROOT %r = f32[]{:T(128)} reduce(%q, %z), dimensions={0,1}, to_apply=%add\n"
                          "}\n"
                          "ENTRY e {\n"
                          "  s = f32[]{:T(128)} parameter(0)\n"
                          "  p = f32[8,128]{1,0:T(8,128)} parameter(1)\n"
                          "  f = f32[]{:T(128)} fusion(p), kind=kLoop, calls=%fc\n"
                          "  k = f32[]{:T(128)} constant(2)\n"
                          "  u = f32[]{:T(128)} multiply(f, k)\n"
                          "  q = f32[8,128]{1,0:T(8,128)} negate(p)\n"
                          "  ROOT t = (f32[]{:T(128)}, f32[8,128]{1,0:T(8,128)}) tuple(u, q)\n"
                          "}\n";
    st = tpu_stats(donated, "TPU-v4");
    CHECK_EQ_U64(st.argument_size_in_bytes, 512 + 4096);
    CHECK_EQ_U64(st.alias_size_in_bytes, 512);
    CHECK_EQ_U64(st.temp_size_in_bytes, 16384);
    CHECK_STATUS(hbm_plan_options_for_device(&(hbm_plan_options){0}, "TPU-v9z"), HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "TPU-v9z");
}

/* XLA:CPU: a fusion takes an operand's buffer only when their shapes are equal (no backend
 * hint, HloDataflowAnalysis::CanShareOperandBufferWithUser): the dot's f32[1,5], read
 * through a bitcast by the f32[5] fusion at the root, keeps 20 bytes of temp, as XLA:CPU's
 * dump of the same pattern shows (JAX 0.10.2). */
static void test_cpu_fusion_shares_equal_shapes_only(void) {
    const char *text = "HloModule m, is_scheduled=true\n"
                       "%fa (a: f32[5], b: f32[1,5]) -> f32[5] {\n"
                       "  %a = f32[5]{0} parameter(0)\n"
                       "  %b = f32[1,5]{1,0} parameter(1)\n"
                       "  %bc = f32[5]{0} bitcast(%b)\n"
                       "  ROOT %s = f32[5]{0} add(%bc, %a)\n"
                       "}\n"
                       "ENTRY e {\n"
                       "  p = f32[1,61]{1,0} parameter(0)\n"
                       "  w = f32[61,5]{1,0} parameter(1)\n"
                       "  q = f32[5]{0} parameter(2)\n"
                       "  d = f32[1,5]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                       "  ROOT f = f32[5]{0} fusion(q, d), kind=kLoop, calls=%fa\n"
                       "}\n";
    hbm_hlo_module *m;
    hbm_plan *p = plan_named(text, "t.cpu.hlo", &m);
    CHECK(p != NULL);
    if (!p) return;
    hbm_plan_stats st;
    hbm_plan_get_stats(p, &st);
    CHECK(st.backend == HBM_BACKEND_CPU);
    CHECK_EQ_U64(st.output_size_in_bytes, 20);
    CHECK_EQ_U64(st.temp_size_in_bytes, 20);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

/* An async dynamic-update-slice (the "dynamic-update-slice-start" sugar XLA:TPU writes when
 * it offloads scan residuals to host memory) updates its operand in place: the host buffer
 * h and the done's result are one 16 KiB buffer, as XLA:TPU's dumps put them at one offset. */
static void test_async_dus_in_place(void) {
    const char *text =
        "HloModule m, is_scheduled=true\n"
        "ENTRY e {\n"
        "  p = f32[8,128]{1,0:T(8,128)} parameter(0)\n"
        "  h = f32[4,8,128]{2,1,0:T(8,128)S(5)} custom-call(), custom_call_target=\"AllocateBuffer\"\n"
        "  u = f32[1,8,128]{2,1,0:T(8,128)} reshape(p)\n"
        "  z = s32[]{:T(128)} constant(0)\n"
        "  s = ((f32[4,8,128]{2,1,0:T(8,128)S(5)}, f32[1,8,128]{2,1,0:T(8,128)}, s32[]{:T(128)}, s32[]{:T(128)}, "
        "s32[]{:T(128)}), f32[4,8,128]{2,1,0:T(8,128)S(5)}, u32[]{:S(2)}) dynamic-update-slice-start(h, u, z, z, z)\n"
        "  d = f32[4,8,128]{2,1,0:T(8,128)S(5)} dynamic-update-slice-done(s)\n"
        "  ROOT t = (f32[8,128]{1,0:T(8,128)}, f32[4,8,128]{2,1,0:T(8,128)S(5)}) tuple(p, d)\n"
        "}\n";
    hbm_plan_stats st = tpu_stats(text, "TPU-v5e");
    CHECK_EQ_U64(st.host_output_size_in_bytes, 16384);
    CHECK_EQ_U64(st.host_temp_size_in_bytes, 0);
}

/* XLA:TPU's own OOM text, captured: libtpu 0.0.52 (JAX 0.10.2) compiling, deviceless for
 * v5e:1x1 (15.75G of HBM), f(x, w) = (exp(tanh(x @ w)) @ w.T + x, column sums of tanh(x @ w))
 * with x bf16[R,16384] and w bf16[16384,16384]; the module below is its after_optimizations
 * dump (metadata, backend configs and sharding attributes dropped), R for the row count.
 * At R = 180224 the compile failed with "XLA:TPU compile permanent error. Ran out of memory
 * in memory space hbm. Used 17.00G of 15.75G hbm. Exceeded hbm capacity by 1.25G. HLO
 * module: jit_f." (its ERROR log; the exception says E1000 CompileTimeHbmOom). At R = 65536
 * it fitted, and its INFO log printed "Total hbm usage >= 4.75G: reserved 258.00M, program
 * 2.00G, arguments 2.50G", "Output size 2.00G; shares 0B with arguments.", "Program hbm
 * requirement 2.00G: global 1.00M, HLO temp 2.00G (100.0% utilization: Unpadded (2.00G)
 * Padded (2.00G), 0.0% fragmentation (15.5K)), overlays 981.0K"; memory_analysis() gave
 * temp 2,147,500,032 bytes. */
static const char *kTpuOomModule =
    "HloModule jit_f, is_scheduled=true, entry_computation_layout={(bf16[R,16384]{1,0:T(8,128)(2,1)}, bf16[16384,16384]{1,0:T(8,128)(2,1)})->(bf16[R,16384]{1,0:T(8,128)(2,1)}, bf16[16384]{0:T(1024)(128)(2,1)})}\n"
    "%bitcast_fusion (bitcast_input: bf16[R,16384]) -> bf16[R,16384] {\n"
    "  %bitcast_input = bf16[R,16384]{1,0:T(8,128)(2,1)} parameter(0)\n"
    "  ROOT %bitcast = bf16[R,16384]{1,0:T(8,128)(2,1)} bitcast(%bitcast_input)\n"
    "}\n"
    "%bitcast_fusion.2 (bitcast_input.2: bf16[16384,16384]) -> bf16[16384,16384] {\n"
    "  %bitcast_input.2 = bf16[16384,16384]{1,0:T(8,128)(2,1)} parameter(0)\n"
    "  ROOT %bitcast.2 = bf16[16384,16384]{1,0:T(8,128)(2,1)} bitcast(%bitcast_input.2)\n"
    "}\n"
    "%region_0.1.clone (reduce_sum.0: bf16[], reduce_sum.1: bf16[]) -> bf16[] {\n"
    "  %reduce_sum.1 = bf16[]{:T(256)} parameter(1)\n"
    "  %reduce_sum.0 = bf16[]{:T(256)} parameter(0)\n"
    "  ROOT %reduce_sum.2 = bf16[]{:T(256)} add(%reduce_sum.0, %reduce_sum.1)\n"
    "}\n"
    "%fused_computation.3 (param_0.7: bf16[R,16384], param_1.7: bf16[16384,16384]) -> (bf16[16384], bf16[R,16384]) {\n"
    "  %param_0.7 = bf16[R,16384]{1,0:T(8,128)(2,1)} parameter(0)\n"
    "  %fusion.2 = bf16[R,16384]{1,0:T(8,128)(2,1)} fusion(%param_0.7), kind=kLoop, calls=%bitcast_fusion\n"
    "  %param_1.7 = bf16[16384,16384]{1,0:T(8,128)(2,1)} parameter(1)\n"
    "  %fusion.4 = bf16[16384,16384]{1,0:T(8,128)(2,1)} fusion(%param_1.7), kind=kLoop, calls=%bitcast_fusion.2\n"
    "  %convolution.3.clone.1 = bf16[R,16384]{1,0:T(8,128)(2,1)} convolution(%fusion.2, %fusion.4), dim_labels=bf_io->bf\n"
    "  %convert.4 = f32[R,16384]{1,0:T(8,128)} convert(%convolution.3.clone.1)\n"
    "  %tanh.0.clone.1 = f32[R,16384]{1,0:T(8,128)} tanh(%convert.4)\n"
    "  %convert.5 = bf16[R,16384]{1,0:T(8,128)(2,1)} convert(%tanh.0.clone.1)\n"
    "  %constant.2 = bf16[]{:T(256)} constant(0)\n"
    "  %reduce.1 = bf16[16384]{0:T(1024)(128)(2,1)} reduce(%convert.5, %constant.2), dimensions={0}, to_apply=%region_0.1.clone\n"
    "  ROOT %tuple = (bf16[16384]{0:T(1024)(128)(2,1)}, bf16[R,16384]{1,0:T(8,128)(2,1)}) tuple(%reduce.1, %convert.5)\n"
    "}\n"
    "%fused_computation.2 (param_0.4: bf16[R,16384]) -> bf16[R,16384] {\n"
    "  %param_0.4 = bf16[R,16384]{1,0:T(8,128)(2,1)} parameter(0)\n"
    "  %convert.6 = f32[R,16384]{1,0:T(8,128)} convert(%param_0.4)\n"
    "  %exp.2 = f32[R,16384]{1,0:T(8,128)} exponential(%convert.6)\n"
    "  ROOT %convert.7 = bf16[R,16384]{1,0:T(8,128)(2,1)} convert(%exp.2)\n"
    "}\n"
    "%bitcast_fusion.1 (bitcast_input.1: bf16[16384,16384]) -> bf16[16384,16384] {\n"
    "  %bitcast_input.1 = bf16[16384,16384]{1,0:T(8,128)(2,1)} parameter(0)\n"
    "  ROOT %bitcast.1 = bf16[16384,16384]{1,0:T(8,128)(2,1)} bitcast(%bitcast_input.1)\n"
    "}\n"
    "%fused_computation (param_0.1: bf16[R,16384], param_1.3: bf16[16384,16384], param_2.1: bf16[R,16384]) -> bf16[R,16384] {\n"
    "  %param_2.1 = bf16[R,16384]{1,0:T(8,128)(2,1)} parameter(2)\n"
    "  %fusion = bf16[R,16384]{1,0:T(8,128)(2,1)} fusion(%param_2.1), kind=kLoop, calls=%fused_computation.2\n"
    "  %param_1.3 = bf16[16384,16384]{1,0:T(8,128)(2,1)} parameter(1)\n"
    "  %fusion.3 = bf16[16384,16384]{1,0:T(8,128)(2,1)} fusion(%param_1.3), kind=kLoop, calls=%bitcast_fusion.1\n"
    "  %convolution.2 = bf16[R,16384]{1,0:T(8,128)(2,1)} convolution(%fusion, %fusion.3), dim_labels=bf_oi->bf\n"
    "  %convert.1 = f32[R,16384]{1,0:T(8,128)} convert(%convolution.2)\n"
    "  %param_0.1 = bf16[R,16384]{1,0:T(8,128)(2,1)} parameter(0)\n"
    "  %convert.2 = f32[R,16384]{1,0:T(8,128)} convert(%param_0.1)\n"
    "  %add.0 = f32[R,16384]{1,0:T(8,128)} add(%convert.1, %convert.2)\n"
    "  ROOT %convert.3 = bf16[R,16384]{1,0:T(8,128)(2,1)} convert(%add.0)\n"
    "}\n"
    "ENTRY %main.2 (x.1: bf16[R,16384], w.1: bf16[16384,16384]) -> (bf16[R,16384], bf16[16384]) {\n"
    "  %w.1 = bf16[16384,16384]{1,0:T(8,128)(2,1)} parameter(1)\n"
    "  %x.1 = bf16[R,16384]{1,0:T(8,128)(2,1)} parameter(0)\n"
    "  %fusion.1 = (bf16[16384]{0:T(1024)(128)(2,1)}, bf16[R,16384]{1,0:T(8,128)(2,1)}) fusion(%x.1, %w.1), kind=kOutput, calls=%fused_computation.3\n"
    "  %get-tuple-element.1 = bf16[R,16384]{1,0:T(8,128)(2,1)} get-tuple-element(%fusion.1), index=1\n"
    "  %get-tuple-element = bf16[16384]{0:T(1024)(128)(2,1)} get-tuple-element(%fusion.1), index=0\n"
    "  %convolution_add_fusion = bf16[R,16384]{1,0:T(8,128)(2,1)} fusion(%x.1, %w.1, %get-tuple-element.1), kind=kOutput, calls=%fused_computation\n"
    "  ROOT %tuple.1 = (bf16[R,16384]{1,0:T(8,128)(2,1)}, bf16[16384]{0:T(1024)(128)(2,1)}) tuple(%convolution_add_fusion, %get-tuple-element)\n"
    "}\n";

static void tpu_oom_text(const char *rows, uint64_t capacity, char **res) {
    *res = NULL;
    char text[8192];
    size_t k = 0;
    for (const char *s = kTpuOomModule; *s && k + 16 < sizeof text; s++) {
        if (*s == 'R' && (s[1] == ',' || s[1] == ']')) k += (size_t)snprintf(text + k, sizeof text - k, "%s", rows);
        else text[k++] = *s;
    }
    text[k] = 0;
    hbm_hlo_module *m;
    hbm_plan *p = plan_named(text, "jit_f.tpu.hlo", &m);
    CHECK(p != NULL);
    if (!p) return;
    hbm_plan_stats st;
    hbm_plan_get_stats(p, &st);
    if (!strcmp(rows, "65536")) CHECK_EQ_U64(st.temp_size_in_bytes, 2147500032);
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    hbm_plan_target t = {capacity, 1.0, "TPU-v5e"};
    CHECK_OK(hbm_plan_write_text(p, f, 3, &t));
    fclose(f);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    *res = out;
}

static void test_tpu_oom_text_captured(void) {
    char *out;
    tpu_oom_text("180224", 16128ull << 20, &out);
    if (out) /* what JAX raised, then libtpu's log, on the captured case */
        CHECK_CONTAINS(out, "RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total memory "
                            "required for HLO temporaries (17.00G) exceeds available HBM (15.75G). HLO module: jit_f.\n");
    if (out)
        CHECK_CONTAINS(out, "XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 17.00G of "
                            "15.75G hbm. Exceeded hbm capacity by 1.25G. HLO module: jit_f.\n");
    free(out);
    tpu_oom_text("65536", 1ull << 30, &out); /* made not to fit: the lines of the log */
    if (out) {
        CHECK_CONTAINS(out, "    program           2.00G \n    arguments         2.50G \n");
        CHECK_CONTAINS(out, "Output size 2.00G; shares 0B with arguments.\n");
        CHECK_CONTAINS(out, "Program hbm requirement 2.00G:\n");
        CHECK_CONTAINS(out, "    HLO temp          2.00G (100.0% utilization: Unpadded (2.00G) Padded (2.00G), 0.0% "
                            "fragmentation (15.5K))\n");
        CHECK_CONTAINS(out, "    reserved        unknown");
        CHECK_CONTAINS(out, "    overlays        unknown");
    }
    free(out);
}

/* call(...), to_apply=%comp (CPU's %parallel_* computations, GPU's command buffers) runs a
 * computation whose values get buffers like the caller's: the concatenate inside is temp,
 * the slice that the call returns is the output. */
static void test_call_to_apply_is_called(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "%cmd (x: f32[1024]) -> f32[1024] {\n"
                                 "  %x = f32[1024]{0} parameter(0)\n"
                                 "  %t = f32[2048]{0} concatenate(%x, %x), dimensions={0}\n"
                                 "  ROOT %s = f32[1024]{0} slice(%t), slice={[0:1024]}\n"
                                 "}\n"
                                 "ENTRY e {\n"
                                 "  p = f32[1024]{0} parameter(0)\n"
                                 "  ROOT c = f32[1024]{0} call(p), to_apply=%cmd\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096);
    CHECK_EQ_U64(st.output_size_in_bytes, 4096);
    CHECK_EQ_U64(st.temp_size_in_bytes, 8192);
}

/* all-reduce-start is one of AliasInfo's default in-place ops: its result takes the
 * operand's buffer (here the live-out copy), so no temp; the reducer's three scalars are
 * thread-local allocations, in XLA's total but not in memory_analysis(). On NVSHMEM the
 * result needs a buffer of its own. */
static const char ar_head[] = "HloModule m, is_scheduled=true\n"
                                "%add (a: f32[], b: f32[]) -> f32[] {\n"
                                "  %a = f32[] parameter(0)\n"
                                "  %b = f32[] parameter(1)\n"
                                "  ROOT %s = f32[] add(%a, %b)\n"
                                "}\n"
                                "ENTRY e {\n"
                                "  p = f32[256]{0} parameter(0)\n"
                                "  c = f32[256]{0} copy(p)\n"
                                "  ars = f32[256]{0} all-reduce-start(c), replica_groups={}, to_apply=%add";
static const char ar_tail[] = "\n"
                                "  ROOT d = f32[256]{0} all-reduce-done(ars)\n"
                                "}\n";

static void test_all_reduce_in_place(void) {
    char text[1024];
    snprintf(text, sizeof text, "%s%s", ar_head, ar_tail);
    hbm_plan_stats st = stats_of(text);
    CHECK_EQ_U64(st.argument_size_in_bytes, 1024);
    CHECK_EQ_U64(st.output_size_in_bytes, 1024);
    CHECK_EQ_U64(st.temp_size_in_bytes, 0);
    CHECK_EQ_U64(st.thread_local_size_in_bytes, 12);
    CHECK_EQ_U64(st.total_allocation_bytes, 1024 + 1024 + 12);
    snprintf(text, sizeof text, "%s%s%s", ar_head, ", backend_config={\"collective_backend_config\":{\"backend\":\"NVSHMEM\"}}", ar_tail);
    st = stats_of(text);
    CHECK_EQ_U64(st.output_size_in_bytes, 1024);
    CHECK_EQ_U64(st.temp_size_in_bytes, 1024);
}

/* CombineTempAllocations partitions the allocation list (std::partition, not stable): with
 * the reducer's thread-local allocations after the heap, the heap (cuBLAS's workspace at 0,
 * the result at 1024) comes first and the tuple's 16-byte table follows at 1280. Without
 * them the table would come first and push the heap to 128. */
static void test_thread_locals_order_temps(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "%add (a: f32[], b: f32[]) -> f32[] {\n"
                                 "  %a = f32[] parameter(0)\n"
                                 "  %b = f32[] parameter(1)\n"
                                 "  ROOT %s = f32[] add(%a, %b)\n"
                                 "}\n"
                                 "%fr (q: f32[8,8]) -> f32[8] {\n"
                                 "  %q = f32[8,8]{1,0} parameter(0)\n"
                                 "  %z = f32[] constant(0)\n"
                                 "  ROOT %r = f32[8]{0} reduce(%q, %z), dimensions={1}, to_apply=%add\n"
                                 "}\n"
                                 "ENTRY e {\n"
                                 "  x = f32[8,16]{1,0} parameter(0)\n"
                                 "  y = f32[8,16]{1,0} parameter(1)\n"
                                 "  cc = (f32[8,8]{1,0}, s8[1024]{0}) custom-call(x, y), custom_call_target=\"__cublas$gemm\"\n"
                                 "  g = f32[8,8]{1,0} get-tuple-element(cc), index=0\n"
                                 "  ROOT f = f32[8]{0} fusion(g), kind=kInput, calls=%fr\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 1024);
    CHECK_EQ_U64(st.output_size_in_bytes, 32);
    CHECK_EQ_U64(st.temp_size_in_bytes, 1296);
    CHECK_EQ_U64(st.total_allocation_bytes, 1024 + 32 + 1296 + 12);
}

/* sort may take the buffer of an operand it is the only user of, element i for operand i:
 * the iota's buffer becomes the sorted indices, so the heap holds one 240-byte buffer. */
static void test_sort_reuses_operand(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "%lt (a: f64[], b: f64[], c: s32[], d: s32[]) -> pred[] {\n"
                                 "  %a = f64[] parameter(0)\n"
                                 "  %b = f64[] parameter(1)\n"
                                 "  %c = s32[] parameter(2)\n"
                                 "  %d = s32[] parameter(3)\n"
                                 "  ROOT %r = pred[] compare(%a, %b), direction=LT\n"
                                 "}\n"
                                 "%fi () -> s32[60] {\n"
                                 "  ROOT %i = s32[60]{0} iota(), iota_dimension=0\n"
                                 "}\n"
                                 "ENTRY e {\n"
                                 "  p = f64[60]{0} parameter(0)\n"
                                 "  i = s32[60]{0} fusion(), kind=kLoop, calls=%fi\n"
                                 "  s = (f64[60]{0}, s32[60]{0}) sort(p, i), dimensions={0}, to_apply=%lt\n"
                                 "  ROOT g = f64[60]{0} get-tuple-element(s), index=0\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 480);
    CHECK_EQ_U64(st.output_size_in_bytes, 480);
    CHECK_EQ_U64(st.temp_size_in_bytes, 256 + 16);
    CHECK_EQ_U64(st.thread_local_size_in_bytes, 8 + 8 + 4 + 4 + 1);
}


/* The seed bug: four allocation lines and the first five peak buffers as XLA printed them. */
static char *report_of(const char *path, size_t top, uint64_t cap, double frac, hbm_plan_stats *st) {
    hbm_hlo_module *m;
    if (hbm_hlo_parse_file(path, &m) != HBM_OK) return NULL;
    hbm_plan *p;
    hbm_plan_options o; /* XLA:GPU's rules: the hand-written modules say no backend; the fraction is GPU's */
    hbm_plan_options_default(&o);
    o.backend = HBM_BACKEND_GPU;
    if (hbm_plan_run(m, &o, &p) != HBM_OK) {
        hbm_hlo_module_free(m);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    hbm_plan_report_target(p, f, top, cap, frac);
    hbm_plan_explain(p, f, cap, frac, "dev", 8);
    fclose(f);
    if (st) hbm_plan_get_stats(p, st);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    return buf;
}

static void test_svd_oom_reproduces_xla(void) {
    hbm_plan_stats st;
    char *r = report_of(HBM_SOURCE_DIR "/examples/svd_oom.hlo", 15, 16ull << 30, 0.75, &st);
    CHECK(r);
    CHECK_CONTAINS(r, "BufferAssignment OOM Debugging.\nBufferAssignment stats:\n"
                      "             parameter allocation:   57.22MiB\n"
                      "              constant allocation:         0B\n"
                      "        maybe_live_out allocation:   57.23MiB\n"
                      "     preallocated temp allocation:  335.59GiB\n"
                      "  preallocated temp fragmentation:       112B (0.00%)\n"
                      "                 total allocation:  335.70GiB\n");
    CHECK_CONTAINS(r, "Peak buffers:\n"
                      "\tBuffer 1:\n\t\tSize: 335.28GiB\n\t\tXLA Label: custom-call\n\t\tShape: f32[300000,300000]\n"
                      "\t\t==========================\n"
                      "\tBuffer 2:\n\t\tSize: 263.36MiB\n\t\tXLA Label: custom-call\n\t\tShape: f32[69038144]\n"
                      "\t\t==========================\n"
                      "\tBuffer 3:\n\t\tSize: 57.22MiB\n\t\tXLA Label: custom-call\n\t\tShape: f32[300000,50]\n"
                      "\t\t==========================\n"
                      "\tBuffer 4:\n\t\tSize: 57.22MiB\n\t\tEntry Parameter Subshape: f32[300000,50]\n"
                      "\t\t==========================\n"
                      "\tBuffer 5:\n\t\tSize: 57.22MiB\n"
                      "\t\tOperator: op_name=\"jit(svd)/jit(main)/svd[full_matrices=False compute_uv=True]\" "
                      "source_file=\"/tmp/ipykernel_57631/2574565684.py\" source_line=5\n"
                      "\t\tXLA Label: fusion\n\t\tShape: f32[300000,50]\n\t\t==========================\n");
    /* the exact byte count XLA tried to allocate */
    CHECK_EQ_U64(st.temp_size_in_bytes, 360336162820ull);
    CHECK_EQ_U64(st.temp_fragmentation_bytes, 112);
    CHECK_CONTAINS(r, "DOES NOT FIT");
    free(r);
}

static void test_svd_fixed_fits(void) {
    hbm_plan_stats st;
    char *r = report_of(HBM_SOURCE_DIR "/examples/svd_fixed.hlo", 15, 16ull << 30, 0.75, &st);
    CHECK(r);
    CHECK(st.peak_bytes < (uint64_t)(0.75 * (16ull << 30)));
    CHECK_CONTAINS(r, "FITS: needs");
    free(r);
}

static void test_verdicts(void) {
    hbm_plan_stats st;
    /* 1 GiB param + 1 GiB output: physically fits 2.5 GiB but not 75 % of it */
    const char *t = "HloModule m, is_scheduled=true\nENTRY e {\n  p = f32[268435456]{0} parameter(0)\n"
                    "  ROOT n = f32[268435456]{0} negate(p)\n}\n";
    char path[] = "/tmp/hbm_test_plan_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(t, f);
    fclose(f);
    char *r = report_of(path, 15, (uint64_t)5 << 29, 0.75, &st);
    CHECK(r);
    CHECK_CONTAINS(r, "FITS PHYSICALLY BUT NOT UNDER THE FRAMEWORK'S DEFAULT LIMIT");
    /* .80 x 2.5 GiB is exactly the 2 GiB needed, with nothing left for the 0.43 % JAX 0.11 gave
     * under XLA's rule on an H200: .81 */
    CHECK_CONTAINS(r, "XLA_PYTHON_CLIENT_MEM_FRACTION=.81");
    free(r);
    r = report_of(path, 15, (uint64_t)5 << 29, 0, &st);
    CHECK_CONTAINS(r, "FITS: needs");
    free(r);
    r = report_of(path, 15, (uint64_t)1 << 30, 0.75, &st);
    CHECK_CONTAINS(r, "DOES NOT FIT");
    free(r);
    /* XLA:CPU and XLA:TPU read no fraction: none advised, even under a limit given */
    hbm_hlo_module *m;
    hbm_plan *p;
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    o.backend = HBM_BACKEND_CPU;
    CHECK_OK(hbm_hlo_parse_file(path, &m));
    CHECK_OK(hbm_plan_run(m, &o, &p));
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    CHECK_OK(hbm_plan_explain(p, mf, (uint64_t)5 << 29, 0.75, "dev", 8));
    fclose(mf);
    CHECK_CONTAINS(buf, "  XLA:CPU's runtime reads no memory fraction (XLA_PYTHON_CLIENT_MEM_FRACTION is XLA:GPU's):\n"
                        "    with no limit of its own there, the module fits the device's 2.50GiB.\n");
    CHECK(!strstr(buf, "Set XLA_PYTHON_CLIENT_MEM_FRACTION"));
    free(buf);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    remove(path);
}

/* Numbers that agree: a buffer updated in place (dynamic-update-slice) is one buffer for two
 * values; the peak of live bytes counts it once, so it never exceeds what the executable
 * needs. XLA's minimum for "total fragmentation" counts it twice and comes out below the
 * allocations: XLA then prints no total fragmentation, and neither does hbm (JSON: null). */
static void test_figures_agree(void) {
    const char *text = "HloModule m, is_scheduled=true\n"
                       "ENTRY e {\n"
                       "  p = f32[1024]{0} parameter(0)\n"
                       "  u = f32[16]{0} parameter(1)\n"
                       "  i = s32[] parameter(2)\n"
                       "  c = f32[1024]{0} copy(p)\n"
                       "  d = f32[1024]{0} dynamic-update-slice(c, u, i)\n"
                       "  ROOT n = f32[1024]{0} negate(d)\n"
                       "}\n";
    hbm_hlo_module *m;
    hbm_plan *p = plan_text(text, &m);
    CHECK(p);
    hbm_plan_stats st;
    CHECK_OK(hbm_plan_get_stats(p, &st));
    CHECK_EQ_U64(st.output_size_in_bytes, 4096); /* c, d and n: one buffer */
    CHECK_EQ_U64(st.temp_size_in_bytes, 0);
    CHECK(st.peak_live_bytes <= st.peak_bytes);
    CHECK(st.total_fragmentation_bytes < 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_OK(hbm_plan_report(p, f, 15));
    CHECK_OK(hbm_plan_explain(p, f, 0, 0, NULL, 10));
    CHECK_OK(hbm_plan_json(p, f, 3, 0, 0));
    fclose(f);
    CHECK(!strstr(buf, "total fragmentation"));
    CHECK(!strstr(buf, ": -") && !strstr(buf, "(-") && !strstr(buf, " -"));
    CHECK_CONTAINS(buf, "\"total_fragmentation_bytes\": null");
    free(buf);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

/* A module XLA did not schedule is an estimate, said on the first line and in JSON; XLA's
 * header is not printed as if XLA had said it. */
static void test_unscheduled_is_estimate(void) {
    const char *text = "HloModule m\n"
                       "ENTRY e {\n"
                       "  p = f32[1024]{0} parameter(0)\n"
                       "  ROOT n = f32[1024]{0} negate(p)\n"
                       "}\n";
    hbm_hlo_module *m;
    hbm_plan *p = plan_text(text, &m);
    CHECK(p);
    hbm_plan_stats st;
    CHECK_OK(hbm_plan_get_stats(p, &st));
    CHECK(st.estimate);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_OK(hbm_plan_report(p, f, 15));
    CHECK_OK(hbm_plan_json(p, f, 3, 0, 0));
    fclose(f);
    CHECK(!strncmp(buf, "ESTIMATE: ", 10));
    CHECK(!strstr(buf, "BufferAssignment OOM Debugging"));
    CHECK_CONTAINS(buf, "\"estimate\": true");
    free(buf);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

/* Buffers in host memory (layout S(5)) are not device memory: they go to memory_analysis()'s
 * host_* figures, get allocations and a temp heap of their own (XLA colors), and never share
 * a device allocation. The device copy b reuses the output c's allocation (add on b); the
 * host temp a gets the host heap. */
static void test_host_memory_space(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "ENTRY e {\n"
                                 "  p = f32[1024]{0} parameter(0)\n"
                                 "  h = f32[1024]{0:S(5)} parameter(1)\n"
                                 "  a = f32[1024]{0:S(5)} copy(h)\n"
                                 "  b = f32[1024]{0} copy(a)\n"
                                 "  c = f32[1024]{0} add(p, b)\n"
                                 "  d = f32[2048]{0:S(5)} concatenate(a, a), dimensions={0}\n"
                                 "  ROOT t = (f32[1024]{0}, f32[2048]{0:S(5)}) tuple(c, d)\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096);
    CHECK_EQ_U64(st.output_size_in_bytes, 4096 + 16);
    CHECK_EQ_U64(st.temp_size_in_bytes, 0);
    CHECK_EQ_U64(st.host_argument_size_in_bytes, 4096);
    CHECK_EQ_U64(st.host_output_size_in_bytes, 8192);
    CHECK_EQ_U64(st.host_temp_size_in_bytes, 4096);
    CHECK_EQ_U64(st.peak_bytes, 4096 + 4112);
    CHECK_EQ_U64(st.total_allocation_bytes, 4096 + 4112 + 4096 + 8192 + 4096);
}

/* TPU tiled layouts: every buffer is padded to its tiles, and the report says how much of
 * what is needed is padding. The (2,1) sub-tile adds none: XLA:TPU sizes a
 * bf16[1000,3000]{1,0:T(8,128)(2,1)} parameter at 6,144,000 bytes (1000 x 3072 x 2). */
static void test_tiled_layout_padding(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "ENTRY e {\n"
                                 "  p = f32[3,5]{1,0:T(8,128)} parameter(0)\n"
                                 "  q = bf16[1000,1000]{1,0:T(8,128)(2,1)} parameter(1)\n"
                                 "  ROOT n = bf16[1000,1000]{1,0:T(8,128)(2,1)} negate(q)\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096 + 2048000);
    CHECK_EQ_U64(st.output_size_in_bytes, 2048000);
    CHECK_EQ_U64(st.padding_bytes, (4096 - 60) + 2 * (2048000 - 2000000));
}

/* An element of a multi-output custom call that nothing reads (cuSOLVER's U, a workspace) is
 * still a value with a buffer: its live range starts and ends at the call, so it takes temp
 * heap space at that one step (4096 + 512 here, after the 24-byte tuple table that
 * CombineTempAllocations puts first), and the peak is at the call. */
static void test_unused_custom_call_outputs(void) {
    const char *text = "HloModule m, is_scheduled=true\n"
                       "ENTRY e {\n"
                       "  p = f32[16]{0} parameter(0)\n"
                       "  cc = (f32[16]{0}, f32[1024]{0}, s8[512]{0}) custom-call(p), custom_call_target=\"cusolver_gesvdj\"\n"
                       "  g = f32[16]{0} get-tuple-element(cc), index=0\n"
                       "  ROOT n = f32[16]{0} negate(g)\n"
                       "}\n";
    hbm_plan_stats st = stats_of(text);
    CHECK_EQ_U64(st.output_size_in_bytes, 64);
    CHECK_EQ_U64(st.temp_size_in_bytes, 128 + 4096 + 512);
    CHECK_EQ_U64(st.peak_step, 1);
    CHECK_EQ_U64(st.peak_live_bytes, 64 + 64 + 24 + 4096 + 512);
}

/* A tuple-shaped all-gather-done (async-done, collective-permute-done) defines its own tuple
 * table; the arrays alias the start's results. Four 16-byte tables end to end at 128-byte
 * alignment, then the heap (the second gathered array; the first becomes the output). */
static void test_tuple_done_defines_its_table(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "ENTRY e {\n"
                                 "  p0 = f32[4]{0} parameter(0)\n"
                                 "  p1 = f32[4]{0} parameter(1)\n"
                                 "  ags = ((f32[4]{0}, f32[4]{0}), (f32[8]{0}, f32[8]{0})) all-gather-start(p0, p1), dimensions={0}, replica_groups={}\n"
                                 "  agd = (f32[8]{0}, f32[8]{0}) all-gather-done(ags)\n"
                                 "  g0 = f32[8]{0} get-tuple-element(agd), index=0\n"
                                 "  g1 = f32[8]{0} get-tuple-element(agd), index=1\n"
                                 "  ROOT a = f32[8]{0} add(g0, g1)\n"
                                 "}\n");
    CHECK_EQ_U64(st.argument_size_in_bytes, 32);
    CHECK_EQ_U64(st.output_size_in_bytes, 32);
    CHECK_EQ_U64(st.temp_size_in_bytes, 3 * 128 + 128 + 32);
}

/* An async-start defines all of its tuple-shaped values, the op it wraps defines its own
 * (XLA numbers reduce-scatter.5{} apart from the start's {1}), and the done its table: five
 * 16-byte tables, each its own allocation at a 128-byte step, plus the second scattered
 * array in the heap (the first becomes the output r through the elementwise add). */
static void test_async_tuple_tables(void) {
    hbm_plan_stats st = stats_of("HloModule m, is_scheduled=true\n"
                                 "%add (x: f32[], y: f32[]) -> f32[] {\n"
                                 "  %x = f32[] parameter(0)\n"
                                 "  %y = f32[] parameter(1)\n"
                                 "  ROOT %s = f32[] add(%x, %y)\n"
                                 "}\n"
                                 "%async_computation (p0: f32[8], p1: f32[8]) -> (f32[4], f32[4]) {\n"
                                 "  %p0 = f32[8]{0} parameter(0)\n"
                                 "  %p1 = f32[8]{0} parameter(1)\n"
                                 "  ROOT %rs = (f32[4]{0}, f32[4]{0}) reduce-scatter(%p0, %p1), replica_groups={}, "
                                 "dimensions={0}, to_apply=%add\n"
                                 "}\n"
                                 "ENTRY e {\n"
                                 "  a = f32[8]{0} parameter(0)\n"
                                 "  b = f32[8]{0} parameter(1)\n"
                                 "  s = ((f32[8]{0}, f32[8]{0}), (f32[4]{0}, f32[4]{0})) async-start(a, b), "
                                 "calls=%async_computation\n"
                                 "  d = (f32[4]{0}, f32[4]{0}) async-done(s)\n"
                                 "  g0 = f32[4]{0} get-tuple-element(d), index=0\n"
                                 "  g1 = f32[4]{0} get-tuple-element(d), index=1\n"
                                 "  ROOT r = f32[4]{0} add(g0, g1)\n"
                                 "}\n");
    CHECK_EQ_U64(st.output_size_in_bytes, 16);
    CHECK_EQ_U64(st.temp_size_in_bytes, 5 * 128 + 16);
    CHECK_EQ_U64(st.thread_local_size_in_bytes, 12);
}

static void test_json(void) {
    hbm_hlo_module *m;
    CHECK_OK(hbm_hlo_parse_file(HBM_SOURCE_DIR "/examples/svd_oom.hlo", &m));
    hbm_plan *p;
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_OK(hbm_plan_json(p, f, 3, 16ull << 30, 0.75));
    fclose(f);
    CHECK_CONTAINS(buf, "\"argument_size_in_bytes\": 60000000");
    CHECK_CONTAINS(buf, "\"output_size_in_bytes\": 60010224");
    CHECK_CONTAINS(buf, "\"alias_size_in_bytes\": 0");
    CHECK_CONTAINS(buf, "\"temp_size_in_bytes\": 360336162820");
    CHECK_CONTAINS(buf, "\"temp_fragmentation_bytes\": 112");
    CHECK_CONTAINS(buf, "\"peak_bytes\": 360456173044");
    CHECK_CONTAINS(buf, "{\"size\": 360000000000, \"label\": \"custom-call\", \"shape\": \"f32[300000,300000]\"");
    CHECK_CONTAINS(buf, "\"verdict\": \"does_not_fit\"");
    free(buf);
    /* the timeline: temp buffers carry offsets that never overlap */
    const hbm_timeline *tl = hbm_plan_timeline(p);
    CHECK(tl && tl->count > 5);
    hbm_plan_buffer pb[4];
    CHECK_EQ_U64(hbm_plan_peak_buffers(p, pb, 4), 4);
    CHECK_EQ_U64(pb[3].param_number, 0);
    CHECK(pb[3].category == HBM_CAT_PARAMETER);
    CHECK(pb[0].category == HBM_CAT_TEMP);
    CHECK_STR(hbm_plan_step_name(p, 1), "custom-call.1");
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

/* XLA's best fit on a hand-made timeline: largest first, smallest gap, alignment. */
static void test_xla_best_fit(void) {
    hbm_timeline *tl;
    CHECK_OK(hbm_timeline_new(&tl));
    size_t i;
    CHECK_OK(hbm_timeline_add(tl, 100, 0, 4, NULL, &i)); /* A */
    CHECK_OK(hbm_timeline_add(tl, 60, 0, 2, NULL, &i));  /* B */
    CHECK_OK(hbm_timeline_add(tl, 30, 2, 4, NULL, &i));  /* C: fits in B's place */
    CHECK_OK(hbm_timeline_add(tl, 10, 1, 3, NULL, &i));  /* D: overlaps everything */
    for (size_t k = 0; k < tl->count; k++) tl->buffers[k].alignment = 16;
    uint64_t hs;
    CHECK_OK(hbmi_xla_best_fit(tl, 0, &hs));
    CHECK_EQ_U64(tl->buffers[0].offset, 0);
    CHECK_EQ_U64(tl->buffers[1].offset, 112);
    CHECK_EQ_U64(tl->buffers[2].offset, 112);
    CHECK_EQ_U64(tl->buffers[3].offset, 176);
    CHECK_EQ_U64(hs, 186);
    CHECK_OK(hbm_timeline_verify(tl, 0));
    /* temporal order: longest lifetimes first (A, then B/C/D by size) */
    CHECK_OK(hbmi_xla_best_fit(tl, 1, &hs));
    CHECK_OK(hbm_timeline_verify(tl, 0));
    /* colocated buffers (same id) get one offset */
    tl->buffers[2].id = tl->buffers[1].id;
    CHECK_OK(hbmi_xla_best_fit(tl, 0, &hs));
    CHECK_EQ_U64(tl->buffers[1].offset, tl->buffers[2].offset);
    hbm_timeline_free(tl);
}

/* The space above the highest chunk overlapping a buffer's lifetime is one infinite free
 * chunk (MakeFreeChunks starts from {0, INT64_MAX}): a 200-byte gap below wins over the
 * 160 bytes left under the heap's current top. */
static void test_xla_best_fit_top_is_infinite(void) {
    hbm_timeline *tl;
    CHECK_OK(hbm_timeline_new(&tl));
    size_t i;
    static const struct { uint64_t size, offset; int64_t s, e; } pin[] = {
        {100, 0, 0, 10}, {100, 300, 0, 10}, {160, 400, 0, 2}};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(hbm_timeline_add(tl, pin[k].size, pin[k].s, pin[k].e, NULL, &i));
        tl->buffers[i].offset = pin[k].offset;
        tl->buffers[i].flags |= HBM_TL_PINNED;
    }
    CHECK_OK(hbm_timeline_add(tl, 150, 4, 10, NULL, &i));
    for (size_t k = 0; k < tl->count; k++) tl->buffers[k].alignment = 1;
    uint64_t hs;
    CHECK_OK(hbmi_xla_best_fit(tl, 0, &hs));
    CHECK_EQ_U64(tl->buffers[3].offset, 100);
    CHECK_EQ_U64(hs, 560);
    CHECK_OK(hbm_timeline_verify(tl, 0));
    hbm_timeline_free(tl);
}

static void test_devices(void) {
    CHECK(hbm_device_model_count() >= 12);
    const hbm_device_model *d = hbm_device_model_find("h100");
    CHECK(d && !strcmp(d->name, "H100-80GB"));
    CHECK(d->default_fraction == 0.75);
    CHECK(hbm_device_model_find("A100-40GB")->capacity_bytes == 42298834944ull); /* the driver's, not 40 GiB */
    CHECK(hbm_device_model_find("tpu-v5e") != NULL);
    CHECK(hbm_device_model_find("MI300X") != NULL);
    CHECK(hbm_device_model_find("rtx-4090") != NULL || hbm_device_model_find("4090") != NULL);
    CHECK(hbm_device_model_find("no-such-gpu") == NULL);
    CHECK_CONTAINS(hbm_last_error(), "no-such-gpu");
}

static void test_plan_fault_injection(void) {
    hbm_hlo_module *m;
    CHECK_OK(hbm_hlo_parse_file(HBM_SOURCE_DIR "/examples/svd_oom.hlo", &m));
    for (uint64_t n = 1; n < 5000; n++) {
        hbm_debug_fail_host_alloc(n);
        hbm_plan *p = NULL;
        hbm_status s = hbm_plan_run(m, NULL, &p);
        hbm_debug_fail_host_alloc(0);
        if (s == HBM_OK) {
            hbm_plan_stats st;
            hbm_plan_get_stats(p, &st);
            CHECK_EQ_U64(st.temp_size_in_bytes, 360336162820ull);
            hbm_plan_free(p);
            hbm_hlo_module_free(m);
            return;
        }
        CHECK(s == HBM_ERR_NOMEM && p == NULL);
    }
    hbm_hlo_module_free(m);
    CHECK(!"allocation failures never stopped");
}

int main(void) {
    RUN(test_elementwise_chain_reuses_buffers);
    RUN(test_verdict_edges);
    RUN(test_non_elementwise_needs_temp);
    RUN(test_heap_alignment_and_tuple_tables);
    RUN(test_tuple_element_operands);
    RUN(test_donated_parameter);
    RUN(test_custom_call_in_place);
    RUN(test_while_shares_loop_state);
    RUN(test_while_phi_frees_loop_buffer);
    RUN(test_multi_output_fusion_shares);
    RUN(test_cholesky_shares_operand);
    RUN(test_backend_from_content);
    RUN(test_tuple_shape_index_comments);
    RUN(test_tpu_oom_text);
    RUN(test_tpu_oom_text_captured);
    RUN(test_tpu_tuple_tables_and_temp);
    RUN(test_tpu_sequential_heap);
    RUN(test_cpu_fusion_shares_equal_shapes_only);
    RUN(test_async_dus_in_place);
    RUN(test_call_to_apply_is_called);
    RUN(test_all_reduce_in_place);
    RUN(test_thread_locals_order_temps);
    RUN(test_sort_reuses_operand);
    RUN(test_svd_oom_reproduces_xla);
    RUN(test_svd_fixed_fits);
    RUN(test_verdicts);
    RUN(test_json);
    RUN(test_figures_agree);
    RUN(test_unscheduled_is_estimate);
    RUN(test_host_memory_space);
    RUN(test_tiled_layout_padding);
    RUN(test_unused_custom_call_outputs);
    RUN(test_tuple_done_defines_its_table);
    RUN(test_async_tuple_tables);
    RUN(test_xla_best_fit);
    RUN(test_xla_best_fit_top_is_infinite);
    RUN(test_devices);
    RUN(test_plan_fault_injection);
    return test_done();
}
