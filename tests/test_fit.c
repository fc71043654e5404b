/* test_fit.c - hbm fit on small hand-written modules, one rule each: a value recomputed
 * (clone NAME.remat before its new user, verified by planning), a value that must not be
 * cloned (a custom call: no recompute, only an offload pair to S(5)), a donation
 * (input_output_alias), the baseline (XLA's algorithm and its warning), and the speed on a
 * generated 2 MB module. Every emitted module is parsed and planned again here. */
#include <stdlib.h>
#include <time.h>

#include "core/internal.h"
#include "fit/fit_internal.h"
#include "fit/fit_result.h"
#include "test.h"

#define MB4 "f32[1024,1024]{1,0}"

/* a (exp of the parameter) is read at the start and at the end; in the middle, dots (whose
 * outputs cannot share an operand's buffer) keep three more 4 MiB values live: recomputing a
 * before its last use takes 4 MiB off the peak (20 MiB -> 16 MiB) */
static const char remat_hlo[] =
    "HloModule fit_remat, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = " MB4 " parameter(0)\n"
    "  %a = " MB4 " exponential(%p0), metadata={op_name=\"jit(f)/exp\" source_file=\"model.py\" source_line=12}\n"
    "  %b = " MB4 " negate(%a)\n"
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %g = " MB4 " add(%f, %a)\n"
    "  ROOT %h = " MB4 " negate(%g)\n"
    "}\n";

/* a custom call's result read at the start and the end (the parameter is read at both ends
 * too: keeping it in host memory frees nothing) */
static const char noclone_hlo[] =
    "HloModule fit_noclone, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = " MB4 " parameter(0)\n"
    "  %a = " MB4 " custom-call(%p0), custom_call_target=\"my_kernel\"\n"
    "  %b = " MB4 " negate(%a)\n"
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %g = " MB4 " add(%f, %a)\n"
    "  ROOT %h = " MB4 " add(%g, %p0)\n"
    "}\n";

/* the parameter is read once, by the instruction that writes the output of its shape */
static const char donate_hlo[] =
    "HloModule fit_donate, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = " MB4 " parameter(0), metadata={op_name=\"weights\"}\n"
    "  ROOT %r = " MB4 " negate(%p0)\n"
    "}\n";

static uint64_t peak_of(const char *text, size_t len) {
    hbm_hlo_module *m;
    hbm_plan *p;
    hbm_plan_stats st;
    if (hbm_hlo_parse(text, len, "t", &m)) return 0;
    if (hbm_plan_run(m, NULL, &p)) {
        hbm_hlo_module_free(m);
        return 0;
    }
    hbm_plan_get_stats(p, &st);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    return st.peak_bytes;
}

/* run fit on text to target; the emitted module in *out (malloc'ed) */
static hbm_status fit(const char *text, uint64_t target, int no_offload, hbm_fit_remat who, hbm_fit_result **r,
                      hbm_hlo_module **m, char **out, size_t *out_len) {
    hbm_status s = hbm_hlo_parse(text, strlen(text), "t", m);
    if (s) return s;
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.target_bytes = target;
    o.no_offload = no_offload & 1;
    o.no_donate = !(no_offload & 2); /* 2: donations allowed */
    o.remat = who;
    s = hbm_fit_run(*m, &o, r);
    if (s) return s;
    FILE *f = open_memstream(out, out_len);
    s = hbm_fit_emit(*r, f);
    fclose(f);
    return s;
}

#define V1M "f32[1048576]{0}"
/* remat_hlo with a read through a bitcast: a's last reader takes it as a bitcast made right
 * after a; XLA's GetUsers looks through bitcasts (IsSupportedIndirectUser): the clone a.remat
 * gets its own bitcast ab.remat, g reads that, the original bitcast (no reader left) goes */
static const char bitcast_hlo[] =
    "HloModule fit_bitcast, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0})->f32[1048576]{0}}\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1048576] {\n"
    "  %p0 = " MB4 " parameter(0)\n"
    "  %a = " MB4 " exponential(%p0)\n"
    "  %ab = " V1M " bitcast(%a)\n"
    "  %b = " MB4 " negate(%a)\n"
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %fb = " V1M " bitcast(%f)\n"
    "  %g = " V1M " add(%fb, %ab)\n"
    "  ROOT %h = " V1M " negate(%g)\n"
    "}\n";

/* a multi-output fusion: element 0 is read at the start and at the end, element 1 only at the
 * start; the fusion is cloned whole (XLA clones the instruction and reads the element with a
 * get-tuple-element of the clone) */
/* the module's header and its fusion, for mof_hlo and mof_new_hlo */
#define MOF_HEAD                                                                                               \
    "HloModule fit_mof, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}\n" \
    "\n"                                                                                                       \
    "%fused (fp: f32[1024,1024]) -> (f32[1024,1024], f32[1024,1024]) {\n"                                    \
    "  %fp = " MB4 " parameter(0)\n"                                                                          \
    "  %fe = " MB4 " exponential(%fp)\n"                                                                      \
    "  %fn = " MB4 " negate(%fp)\n"                                                                           \
    "  ROOT %ft = (" MB4 ", " MB4 ") tuple(%fe, %fn)\n"                                                      \
    "}\n"
static const char mof_hlo[] =
    MOF_HEAD
    "\n"
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = " MB4 " parameter(0)\n"
    "  %t = (" MB4 ", " MB4 ") fusion(%p0), kind=kLoop, calls=%fused\n"
    "  %a = " MB4 " get-tuple-element(%t), index=0\n"
    "  %a2 = " MB4 " get-tuple-element(%t), index=1\n"
    "  %b = " MB4 " add(%a, %a2)\n"
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %g = " MB4 " add(%f, %a)\n"
    "  ROOT %h = " MB4 " negate(%g)\n"
    "}\n";

/* a while loop: k rides in the loop's tuple untouched (loop-carried: read through a tuple and
 * a while, XLA's has_indirect_uses, never a candidate); inside the body a is read at the start
 * and at the end (x too, so a cannot take x's buffer): a recompute in the body, under the
 * limit of the caller's context */
#define T3 "(s32[], " MB4 ", " MB4 ")"
static const char while_hlo[] =
    "HloModule fit_while, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0}, s32[])->"
    "f32[1024,1024]{1,0}}\n"
    "\n"
    "%cond (cp: (s32[], f32[1024,1024], f32[1024,1024])) -> pred[] {\n"
    "  %cp = " T3 " parameter(0)\n"
    "  %ci = s32[] get-tuple-element(%cp), index=0\n"
    "  %lim = s32[] constant(4)\n"
    "  ROOT %lt = pred[] compare(%ci, %lim), direction=LT\n"
    "}\n"
    "\n"
    "%body (bp: (s32[], f32[1024,1024], f32[1024,1024])) -> (s32[], f32[1024,1024], f32[1024,1024]) {\n"
    "  %bp = " T3 " parameter(0)\n"
    "  %i = s32[] get-tuple-element(%bp), index=0\n"
    "  %x = " MB4 " get-tuple-element(%bp), index=1\n"
    "  %keep = " MB4 " get-tuple-element(%bp), index=2\n"
    "  %a = " MB4 " exponential(%x)\n"
    "  %b = " MB4 " negate(%a)\n"
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %g0 = " MB4 " add(%f, %a)\n"
    "  %g = " MB4 " add(%g0, %x)\n"
    "  %one = s32[] constant(1)\n"
    "  %i1 = s32[] add(%i, %one)\n"
    "  ROOT %bt = " T3 " tuple(%i1, %g, %keep)\n"
    "}\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024], p1: s32[]) -> f32[1024,1024] {\n"
    "  %p0 = " MB4 " parameter(0)\n"
    "  %p1 = s32[] parameter(1)\n"
    "  %k = " MB4 " exponential(%p0)\n"
    "  %x0 = " MB4 " negate(%p0)\n"
    "  %init = " T3 " tuple(%p1, %x0, %k)\n"
    "  %w = " T3 " while(%init), condition=%cond, body=%body\n"
    "  %wx = " MB4 " get-tuple-element(%w), index=1\n"
    "  %wk = " MB4 " get-tuple-element(%w), index=2\n"
    "  ROOT %r = " MB4 " add(%wx, %wk)\n"
    "}\n";

/* fit text to the peak less 4 MiB with recompute only; checks the clone named `clone` is
 * chosen, the emitted module contains each of want[] and plans to the figure reported */
static void fit_rule(const char *text, const char *clone, const char *const *want, uint64_t less) {
    uint64_t before = peak_of(text, strlen(text));
    CHECK(before > 0);
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    uint64_t target = before - less;
    CHECK_OK(fit(text, target, 1, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    printf("  %s: %" PRIu64 " -> hbm %" PRIu64 " (%s), XLA %" PRIu64 " (%s), target %" PRIu64 "\n", clone, before,
           s.hbm.peak_bytes, s.hbm.fits ? "fits" : "misses", s.xla.peak_bytes, s.xla.fits ? "fits" : "misses",
           target);
    CHECK(s.hbm.fits && s.hbm.peak_bytes <= target);
    int seen = 0;
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        if (c->kind == HBM_FIT_REMATERIALIZE && c->chosen && !strcmp(c->instruction, clone)) seen++;
    }
    CHECK(seen == 1);
    for (size_t k = 0; want[k]; k++) CHECK_CONTAINS(out, want[k]);
    CHECK_EQ_U64(peak_of(out, len), s.hbm.peak_bytes);
    /* XLA's algorithm has the same rule: where it fits, at no less recompute */
    if (s.xla.fits) CHECK(s.hbm.recompute_flops <= s.xla.recompute_flops);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

/* remat_hlo with a an all-reduce: a synchronous collective may be cloned (XLA's rule for an
 * HloCollectiveInstruction: unless its layout is constrained) */
#define AR_HLO(ATTR)                                                                                        \
    "HloModule fit_ar, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}\n" \
    "\n"                                                                                                    \
    "%sum (x: f32[], y: f32[]) -> f32[] {\n"                                                                \
    "  %x = f32[] parameter(0)\n"                                                                           \
    "  %y = f32[] parameter(1)\n"                                                                           \
    "  ROOT %s = f32[] add(%x, %y)\n"                                                                       \
    "}\n"                                                                                                   \
    "\n"                                                                                                    \
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"                                                \
    "  %p0 = " MB4 " parameter(0)\n"                                                                        \
    "  %a = " MB4 " all-reduce(%p0), replica_groups={}" ATTR ", to_apply=%sum\n"                             \
    "  %b = " MB4 " negate(%a)\n"                                                                           \
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"                      \
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"                      \
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"                      \
    "  %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"                      \
    "  %g = " MB4 " add(%f, %a)\n"                                                                          \
    "  ROOT %h = " MB4 " negate(%g)\n"                                                                      \
    "}\n"
static const char ar_hlo[] = AR_HLO("");
static const char ar_constrained_hlo[] = AR_HLO(", constrain_layout=true");

static void test_collective(void) {
    static const char *const want[] = {"%a.remat = " MB4 " all-reduce(%p0), replica_groups={}, to_apply=%sum",
                                       "%g = " MB4 " add(%f, %a.remat)", NULL};
    fit_rule(ar_hlo, "a", want, 4u << 20);
    /* constrain_layout=true: not cloned */
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    uint64_t before = peak_of(ar_constrained_hlo, strlen(ar_constrained_hlo));
    CHECK(before > 0);
    CHECK_OK(fit(ar_constrained_hlo, before - (4u << 20), 1, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        CHECK(!(c->kind == HBM_FIT_REMATERIALIZE && !strcmp(c->instruction, "a")));
    }
    CHECK(strstr(out, "a.remat") == NULL);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

static void test_bitcast_alias(void) {
    static const char *const want[] = {"%a.remat = " MB4 " exponential(%p0)", "%ab.remat = " V1M " bitcast(%a.remat)",
                                       "%g = " V1M " add(%fb, %ab.remat)", NULL};
    fit_rule(bitcast_hlo, "a", want, 4u << 20);
    /* the original bitcast, read by nothing now, is gone */
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    uint64_t before = peak_of(bitcast_hlo, strlen(bitcast_hlo));
    CHECK_OK(fit(bitcast_hlo, before - (4u << 20), 1, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    CHECK(strstr(out, "%ab = ") == NULL);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

static void test_multi_output(void) {
    static const char *const want[] = {"%t.remat = (" MB4 ", " MB4 ") fusion(%p0), kind=kLoop, calls=%fused",
                                       "%a.remat = " MB4 " get-tuple-element(%t.remat), index=0",
                                       "%g = " MB4 " add(%f, %a.remat)", NULL};
    fit_rule(mof_hlo, "t", want, (4u << 20) - 1024); /* the clone has its own tuple index table */
}

/* mof_hlo as XLA's 2026 builds print it: no get-tuple-element lines, the elements read as
 * "%t#0" and "%t#1". The clone's element is read as "%t.remat#0", with no line of its own;
 * the emitted module parses back in that form and plans to the figure reported */
static const char mof_new_hlo[] =
    MOF_HEAD
    "\n"
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = " MB4 " parameter(0)\n"
    "  %t = (" MB4 ", " MB4 ") fusion(%p0), kind=kLoop, calls=%fused\n"
    "  %b = " MB4 " add(%t#0, %t#1)\n"
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %g = " MB4 " add(%f, %t#0)\n"
    "  ROOT %h = " MB4 " negate(%g)\n"
    "}\n";

static void test_multi_output_new_form(void) {
    static const char *const want[] = {"%t.remat = (" MB4 ", " MB4 ") fusion(%p0), kind=kLoop, calls=%fused",
                                       "%g = " MB4 " add(%f, %t.remat#0)", "%b = " MB4 " add(%t#0, %t#1)", NULL};
    fit_rule(mof_new_hlo, "t", want, (4u << 20) - 1024);
    char *out = NULL;
    size_t len = 0;
    hbm_fit_result *r;
    hbm_hlo_module *m;
    CHECK_OK(fit(mof_new_hlo, peak_of(mof_new_hlo, strlen(mof_new_hlo)) - (4u << 20) + 1024, 1, HBM_FIT_REMAT_HBM, &r,
                 &m, &out, &len));
    CHECK(strstr(out, "get-tuple-element") == NULL); /* the form it was read in */
    CHECK(strstr(out, "#0 =") == NULL);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

static void test_while_body(void) {
    static const char *const want[] = {"%a.remat = " MB4 " exponential(%x)", "%g0 = " MB4 " add(%f, %a.remat)",
                                       "%k = " MB4 " exponential(%p0)", NULL};
    fit_rule(while_hlo, "a", want, 4u << 20);
    /* the loop-carried k is no candidate */
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    uint64_t before = peak_of(while_hlo, strlen(while_hlo));
    CHECK_OK(fit(while_hlo, before - (4u << 20), 0, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        CHECK(!(c->kind != HBM_FIT_SETTING && (!strcmp(c->instruction, "k") || !strcmp(c->instruction, "keep"))));
    }
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

/* two parameters read once, at the start, by a dot; then a chain of dots: an argument held in
 * host memory (S(5), memory_kind="pinned_host") and copied in before its reader frees its
 * 4 MiB over the rest of the run; recompute cannot touch a parameter */
static const char param_hlo[] =
    "HloModule fit_param, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0}, f32[1024,1024]{1,0})->"
    "f32[1024,1024]{1,0}}\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024], p1: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = " MB4 " parameter(0)\n"
    "  %p1 = " MB4 " parameter(1), metadata={op_name=\"weights\"}\n"
    "  %a = " MB4 " dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %b = " MB4 " negate(%a)\n"
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "}\n";

static void test_param_host(void) {
    uint64_t before = peak_of(param_hlo, strlen(param_hlo));
    uint64_t target = before - (4u << 20) + 1024; /* the copy's u32[] context */
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    /* recompute only: the peak is parameters and values read there: nothing to do */
    CHECK_OK(fit(param_hlo, target, 1, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK(!s.hbm.fits);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    CHECK_OK(fit(param_hlo, target, 0, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    CHECK_OK(hbm_fit_get_summary(r, &s));
    printf("  param in host memory: %" PRIu64 " -> %" PRIu64 " (target %" PRIu64 ")\n", before, s.hbm.peak_bytes,
           target);
    CHECK(s.fits && s.hbm.fits && s.hbm.recompute_flops == 0);
    CHECK_EQ_U64(s.hbm.offload_bytes, 4u << 20);
    int seen = 0;
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        if (c->kind != HBM_FIT_OFFLOAD || !c->chosen) continue;
        seen++;
        CHECK(c->param_number == 0 || c->param_number == 1);
        CHECK_CONTAINS(c->jax, "pinned_host");
    }
    CHECK(seen == 1);
    /* the parameter's line and the header say S(5); a copy to the device before the dot */
    CHECK(strstr(out, "{1,0:S(5)} parameter(") != NULL);
    CHECK(strstr(out, "f32[1024,1024]{1,0:S(5)}") < strstr(out, "ENTRY"));
    CHECK(strstr(out, ".reload-start = (" MB4 ", f32[1024,1024]{1,0:S(5)}, u32[]) copy-start(%p") != NULL);
    CHECK(strstr(out, ".reload = " MB4 " copy-done(") < strstr(out, "%a = "));
    CHECK_EQ_U64(peak_of(out, len), s.hbm.peak_bytes);
    CHECK(s.hbm.peak_bytes <= target);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

/* a custom call's tuple result whose element 0 is read (through its get-tuple-element, scheduled
 * late) only after four dots: the element goes to host memory right after the call (the
 * get-tuple-element moves next to it) and comes back before its reader */
static const char gte_hlo[] =
    "HloModule fit_gte, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = " MB4 " parameter(0)\n"
    "  %cc = (" MB4 ", s8[1024]{0}) custom-call(%p0), custom_call_target=\"my_gemm\"\n"
    "  %b = " MB4 " negate(%p0)\n"
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %a = " MB4 " get-tuple-element(%cc), index=0\n"
    "  %g = " MB4 " add(%f, %a)\n"
    "  ROOT %h = " MB4 " add(%g, %p0)\n"
    "}\n";

static void test_gte_offload(void) {
    uint64_t before = peak_of(gte_hlo, strlen(gte_hlo));
    uint64_t target = before - (4u << 20) + 1024;
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    CHECK_OK(fit(gte_hlo, target, 0, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    printf("  element through get-tuple-element: %" PRIu64 " -> %" PRIu64 " (target %" PRIu64 ")\n", before,
           s.hbm.peak_bytes, target);
    CHECK(s.fits && s.hbm.fits);
    CHECK_EQ_U64(s.hbm.offload_bytes, 4u << 20);
    CHECK_CONTAINS(out, "%a.offload-start = (f32[1024,1024]{1,0:S(5)}, " MB4 ", u32[]) copy-start(%a)");
    CHECK_CONTAINS(out, "%g = " MB4 " add(%f, %a.reload)");
    CHECK(strstr(out, "%cc = ") < strstr(out, "%a = "));
    CHECK(strstr(out, "%a = ") < strstr(out, "%b = ")); /* moved next to the call */
    CHECK(strstr(out, "%a.reload =") < strstr(out, "%g = "));
    CHECK_EQ_U64(peak_of(out, len), s.hbm.peak_bytes);
    CHECK(s.hbm.peak_bytes <= target);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

/* the same with the argument read through a bitcast (and p0 read at both ends): the copy to
 * the device goes before the bitcast, which reads it */
static const char param_bitcast_hlo[] =
    "HloModule fit_param_bitcast, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0}, "
    "f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024], p1: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = " MB4 " parameter(0)\n"
    "  %p1 = " MB4 " parameter(1)\n"
    "  %p1b = f32[1024,1024]{0,1} bitcast(%p1)\n"
    "  %a = " MB4 " dot(%p0, %p1b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %b = " MB4 " negate(%a)\n"
    "  %c = " MB4 " dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = " MB4 " dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = " MB4 " dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %f = " MB4 " dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT %r = " MB4 " add(%f, %p0)\n"
    "}\n";

static void test_param_bitcast(void) {
    uint64_t before = peak_of(param_bitcast_hlo, strlen(param_bitcast_hlo));
    uint64_t target = before - (4u << 20) + 1024;
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    CHECK_OK(fit(param_bitcast_hlo, target, 0, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    printf("  argument read through a bitcast: %" PRIu64 " -> %" PRIu64 " (target %" PRIu64 ")\n", before,
           s.hbm.peak_bytes, target);
    CHECK(s.fits && s.hbm.fits);
    CHECK_CONTAINS(out, "%p1 = f32[1024,1024]{1,0:S(5)} parameter(1)");
    CHECK_CONTAINS(out, "%p1b = f32[1024,1024]{0,1} bitcast(%p1.reload)");
    CHECK(strstr(out, "%p1.reload =") < strstr(out, "%p1b = "));
    CHECK_EQ_U64(peak_of(out, len), s.hbm.peak_bytes);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

static void test_remat(void) {
    uint64_t before = peak_of(remat_hlo, strlen(remat_hlo));
    CHECK(before > 0);
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    uint64_t target = before - (4u << 20); /* one value less */
    CHECK_OK(fit(remat_hlo, target, 1, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK_EQ_U64(s.peak_before, before);
    CHECK(s.fits && s.hbm.fits);
    CHECK(s.hbm.peak_bytes <= target);
    CHECK(s.hbm.recompute_flops == 1024 * 1024); /* one exponential over 1M elements */
    /* the emitted module: a clone named a.remat before g, g reads it, the parameter and the
     * root unchanged, and it plans to the figure reported */
    CHECK_CONTAINS(out, "%a.remat = " MB4 " exponential(%p0)");
    CHECK_CONTAINS(out, "%g = " MB4 " add(%f, %a.remat)");
    CHECK_CONTAINS(out, "%p0 = " MB4 " parameter(0)");
    CHECK(strstr(out, "%a.remat =") < strstr(out, "%g = "));
    CHECK(strstr(out, "%f = ") < strstr(out, "%a.remat ="));
    CHECK_EQ_U64(before, 20u << 20);
    CHECK_EQ_U64(peak_of(out, len), s.hbm.peak_bytes);
    /* the change named: source line and the JAX side */
    int seen = 0;
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        if (c->kind != HBM_FIT_REMATERIALIZE || !c->chosen) continue;
        seen++;
        CHECK_STR(c->instruction, "a");
        CHECK_STR(c->source_file, "model.py");
        CHECK(c->source_line == 12);
        /* jit(f)/exp: no backward pass, so no checkpoint policy */
        CHECK_STR(c->jax, "no JAX-side change: this module has no backward pass, and jax.checkpoint policies act "
                          "only on what autodiff saves; the change is XLA's (hbm fit --emit writes it)");
        CHECK(c->verified_peak >= 0 && (uint64_t)c->verified_peak <= target);
    }
    CHECK(seen == 1);
    /* text (lines of at most 100 columns) and JSON */
    char *txt = NULL, *js = NULL;
    size_t tl = 0, jl = 0;
    FILE *f = open_memstream(&txt, &tl);
    CHECK_OK(hbm_fit_text(r, f, 10));
    fclose(f);
    f = open_memstream(&js, &jl);
    CHECK_OK(hbm_fit_json(r, f));
    fclose(f);
    CHECK_CONTAINS(txt, "hbm  FITS");
    CHECK_CONTAINS(js, "\"recompute_flops\": 1048576");
    CHECK_CONTAINS(js, "\"chosen\": true");
    for (char *line = txt; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n > 100) fprintf(stderr, "long line: %.*s\n", (int)n, line);
        CHECK(n <= 100);
        line = nl ? nl + 1 : NULL;
    }
    free(js);
    free(txt);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

static void test_noclone_offload(void) {
    uint64_t before = peak_of(noclone_hlo, strlen(noclone_hlo));
    uint64_t target = before - (4u << 20) + 1024; /* the copies' two u32[] contexts: 256 B */
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    /* without offload: a custom call is never cloned */
    CHECK_OK(fit(noclone_hlo, target, 1, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        CHECK(!(c->kind == HBM_FIT_REMATERIALIZE && !strcmp(c->instruction, "a")));
    }
    CHECK(strstr(out, "a.remat") == NULL);
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK(!s.hbm.fits);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    /* with offload: a to the host after b reads it, back before g */
    CHECK_OK(fit(noclone_hlo, target, 0, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK(s.fits && s.hbm.fits);
    CHECK(s.hbm.offload_bytes == 4u << 20);
    CHECK_CONTAINS(out, "%a.offload-start = (f32[1024,1024]{1,0:S(5)}, " MB4 ", u32[]) copy-start(%a)");
    CHECK_CONTAINS(out, "%a.offload = f32[1024,1024]{1,0:S(5)} copy-done(%a.offload-start)");
    CHECK_CONTAINS(out, "%a.reload-start = (" MB4 ", f32[1024,1024]{1,0:S(5)}, u32[]) copy-start(%a.offload)");
    CHECK_CONTAINS(out, "%g = " MB4 " add(%f, %a.reload)");
    CHECK(strstr(out, "%b = ") < strstr(out, "%a.offload-start"));
    CHECK(strstr(out, "%a.reload =") < strstr(out, "%g = "));
    uint64_t replanned = peak_of(out, len);
    CHECK_EQ_U64(replanned, s.hbm.peak_bytes);
    CHECK(replanned <= target);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

/* The donation's JAX text for a parameter JAX named NAME (metadata op_name; "" none). */
static void donate_text_of(const char *name, const char *want) {
    char text[1024];
    snprintf(text, sizeof text,
             "HloModule fit_donate, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}\n"
             "\n"
             "ENTRY %%main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"
             "  %%p0 = " MB4 " parameter(0)%s%s%s\n"
             "  ROOT %%r = " MB4 " negate(%%p0)\n"
             "}\n",
             name[0] ? ", metadata={op_name=\"" : "", name, name[0] ? "\"}" : "");
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    CHECK_OK(fit(text, 6u << 20, 2, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    const hbm_fit_change *c = hbm_fit_change_at(r, 0);
    CHECK(c && c->kind == HBM_FIT_DONATE);
    if (c) CHECK_STR(c->jax, want);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

static void test_donate_names(void) {
    /* a pytree leaf: its top-level argument, by name */
    donate_text_of("state[\\'opt\\'][0]", "jax.jit(f, donate_argnames=(\"state\",)): donates argument state "
                                        "(state['opt'][0] is HLO parameter 0)");
    /* *args: by position */
    donate_text_of("args[2]", "jax.jit(f, donate_argnums=(2,)): donates positional argument 2 (args[2] is HLO parameter 0)");
    /* no name: the HLO parameter's index, and when that is the argument's */
    donate_text_of("", "jax.jit(f, donate_argnums=(0,)): HLO parameter 0, when each argument of f is one array (no "
                       "op_name names it; JAX numbers f's arrays from 0 and leaves unused ones out)");
}

/* JAX's name stack, a Flax module path, MaxText's policies (fit_jax.c) */
static void test_jax_terms(void) {
    const char *fwd = "jit(step)/jvp(Model)/while/body/closed_call/layers/wi/dot_general";
    CHECK(hbmi_jax_pass(fwd, strlen(fwd)) == HBMI_JAX_FWD);
    const char *bwd = "jit(step)/transpose(jvp(Model))/while/body/closed_call/checkpoint/layers/wi/dot_general";
    CHECK(hbmi_jax_pass(bwd, strlen(bwd)) == HBMI_JAX_BWD);
    const char *rem = "jit(step)/transpose(jvp())/while/body/closed_call/checkpoint/rematted_computation/tanh";
    CHECK(hbmi_jax_pass(rem, strlen(rem)) == HBMI_JAX_REMAT);
    const char *fo = "jit(f)/exp", *tr = "jit(f)/transpose";
    CHECK(hbmi_jax_pass(fo, strlen(fo)) == HBMI_JAX_OTHER);
    CHECK(hbmi_jax_pass(tr, strlen(tr)) == HBMI_JAX_OTHER); /* the primitive, not the transform */
    char mod[128];
    CHECK(hbmi_jax_module_path(fwd, mod, sizeof mod));
    CHECK_STR(mod, "Model/layers/wi");
    CHECK(!hbmi_jax_module_path("jit(train_step)/jvp()/while/body/closed_call/dot_general", mod, sizeof mod));
    CHECK_STR(hbmi_jax_maxtext_name("jit(train_step)/jvp(Transformer)/decoder/layers/mlp/wi_1/dot_general"), "mlpwi_1");
    CHECK_STR(hbmi_jax_maxtext_name("jvp(Transformer)/decoder/layers_0/self_attention/query/dot_general"), "query_proj");
    CHECK(hbmi_jax_maxtext_name("jit(step)/jvp(Model)/layers/mlp/wi_0/dot_general") == NULL);
    const char *rec, *off;
    hbmi_jax_maxtext_policies("mlpwo", &rec, &off);
    CHECK_STR(rec, "save_dot_except_mlp");
    CHECK_STR(off, "minimal_offloaded");
    hbmi_jax_maxtext_policies("key_proj", &rec, &off);
    CHECK_STR(rec, "save_out_proj");
    CHECK_STR(off, "qkv_proj_offloaded");
    hbmi_jax_maxtext_policies("out_proj", &rec, &off);
    CHECK_STR(rec, "save_qkv_proj");
    CHECK_STR(off, "minimal_offloaded");
}

static void test_donate(void) {
    uint64_t before = peak_of(donate_hlo, strlen(donate_hlo));
    CHECK_EQ_U64(before, 8u << 20);
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    CHECK_OK(fit(donate_hlo, 6u << 20, 2, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK(s.fits);
    CHECK_CONTAINS(out, "input_output_alias={ {}: (0, {}, may-alias) }");
    CHECK_EQ_U64(peak_of(out, len), 4u << 20);
    const hbm_fit_change *c = hbm_fit_change_at(r, 0);
    CHECK(c && c->kind == HBM_FIT_DONATE && c->param_number == 0 && c->chosen);
    /* the argument by the name JAX gave its parameter */
    CHECK_STR(c->jax, "jax.jit(f, donate_argnames=(\"weights\",)): donates argument weights (weights is HLO parameter 0)");
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    /* --no-donate: nothing else can help, exit 1's verdict */
    CHECK_OK(hbm_hlo_parse(donate_hlo, strlen(donate_hlo), "t", &m));
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.target_bytes = 6u << 20;
    o.no_donate = 1;
    CHECK_OK(hbm_fit_run(m, &o, &r));
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK(!s.fits);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

static void test_baseline(void) {
    uint64_t before = peak_of(remat_hlo, strlen(remat_hlo));
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    /* an impossible target: XLA's algorithm gives up with its sentence */
    CHECK_OK(fit(remat_hlo, before / 4, 1, HBM_FIT_REMAT_XLA, &r, &m, &out, &len));
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK(!s.fits && !s.xla.fits);
    CHECK_CONTAINS(s.xla.xla_message, "Can't reduce memory use below ");
    CHECK_CONTAINS(s.xla.xla_message, "by rematerialization; only reduced to ");
    CHECK_EQ_U64(peak_of(out, len), s.xla.peak_bytes); /* --remat xla emits XLA's set */
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    /* a target XLA's limit reaches: both fit, hbm at no more recompute */
    CHECK_OK(fit(remat_hlo, before - (4u << 20), 1, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    CHECK_OK(hbm_fit_get_summary(r, &s));
    if (s.xla.fits) CHECK(s.hbm.fits && s.hbm.recompute_flops <= s.xla.recompute_flops);
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

/* XLA:TPU's rule for the baseline (docs/fit.md, measured against libtpu on v5e:1x1): a
 * forward chain t1 -> t2 -> t3 of exponentials, read back in reverse by dots. XLA's tracker
 * counts the temps (the parameter x is not counted), the limit is 95 % of the capacity less
 * the arguments not aliased, less the outputs; at t3 it recomputes t1 (its clone reads x, always
 * live); at b3 t2 is the only candidate, and its clone would need t1, which is no longer live
 * there: it frees nothing, and XLA stops with its warning, the peaks shown with the outputs.
 * With arrays under 10 MiB (xla_tpu_rematerialization_min_size_in_bytes) nothing is a
 * candidate. A control edge t1 -> t2 keeps t1 from being recomputed once t2 is placed. */
#define TPU_CHAIN(S) TPU_CHAIN_CTL(S, "")
#define TPU_CHAIN_CTL(S, T2)                                                                                       \
    "HloModule fit_tpu_chain, is_scheduled=true, entry_computation_layout={(" S ")->" S "}\n"                   \
    "\n"                                                                                                          \
    "ENTRY %main (x: f32[2048,2048]) -> f32[2048,2048] {\n"                                                       \
    "  %x = " S " parameter(0)\n"                                                                                 \
    "  %t1 = " S " exponential(%x)\n"                                                                             \
    "  %t2 = " S " exponential(%t1)" T2 "\n"                                                                      \
    "  %t3 = " S " exponential(%t2)\n"                                                                            \
    "  %b3 = " S " dot(%t3, %t3), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"                           \
    "  %b2 = " S " dot(%b3, %t2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"                           \
    "  %b1 = " S " dot(%b2, %t1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"                           \
    "  ROOT %r = " S " negate(%b1)\n"                                                                              \
    "}\n"

static void tpu_baseline(const char *text, uint64_t cap, hbm_fit_result **r, hbm_hlo_module **m) {
    CHECK_OK(hbm_hlo_parse(text, strlen(text), "t", m));
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.target_bytes = cap;
    o.no_offload = 1;
    o.no_donate = 1;
    o.remat = HBM_FIT_REMAT_XLA;
    o.plan.backend = HBM_BACKEND_TPU;
    CHECK_OK(hbm_fit_run(*m, &o, r));
}

static void test_baseline_tpu(void) {
    const uint64_t M = 1u << 20;
    /* 95 % of the capacity - 16 MiB of arguments - 16 MiB of outputs = 40 MiB for the temps */
    const uint64_t cap = (72 * M * 100 + 94) / 95;
    hbm_fit_result *r;
    hbm_hlo_module *m;
    tpu_baseline(TPU_CHAIN("f32[2048,2048]{1,0}"), cap, &r, &m);
    int t1 = 0, other = 0;
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        if (!c->xla_chosen) continue;
        if (!strcmp(c->instruction, "t1")) t1++;
        else other++;
    }
    CHECK(t1 == 1 && other == 0);
    CHECK(r->xla_limit == (int64_t)(cap * 95 / 100) - (int64_t)(32 * M));
    CHECK(r->xla_before == (int64_t)(80 * M)); /* t1, t2, t3, b3 and the 16 MiB output r */
    CHECK(r->xla_after == (int64_t)(64 * M));
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK_CONTAINS(s.xla.xla_message, "only reduced to 64.00MiB (67108864 bytes), down from 80.00MiB (83886080 bytes)");
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    /* t2 runs after t1 by a control edge as well: once t2 is placed, XLA never recomputes t1
     * (a clone would have a control successor already placed); at b3 it recomputes t2, whose
     * clone reads t1, still live */
    tpu_baseline(TPU_CHAIN_CTL("f32[2048,2048]{1,0}", ", control-predecessors={%t1}"), cap, &r, &m);
    int t2 = 0;
    other = 0;
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        if (c->xla_chosen) *(strcmp(c->instruction, "t2") ? &other : &t2) += 1;
    }
    CHECK(t2 == 1 && other == 0);
    CHECK(r->xla_after == (int64_t)(80 * M)); /* at b2, t2 is read again: nothing left to take */
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    /* 8 MiB arrays: under XLA:TPU's 10 MiB minimum, no candidate */
    tpu_baseline(TPU_CHAIN("f32[1024,2048]{1,0}"), cap / 2, &r, &m);
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) CHECK(!hbm_fit_change_at(r, i)->xla_chosen);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

/* nothing to do: a target above the peak */
static void test_fits_already(void) {
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out = NULL;
    size_t len = 0;
    CHECK_OK(fit(remat_hlo, 1u << 30, 0, HBM_FIT_REMAT_HBM, &r, &m, &out, &len));
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK(s.fits && s.n_changes == 0);
    CHECK_STR(out, remat_hlo); /* the module unchanged */
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

/* A scan over 4 layers by hand: the forward loop saves the dot (element 2) and the layer's
 * input (element 3, the carry) for the backward loop, which reads them at layer 3-i. The dot
 * is recomputed by the backward loop from the saved input and the weights: the edited module
 * drops element 2 from both loops and clones the dot before its reader. */
#define SCAN_FWD_OPS(SAVE_X)                                                                              \
    "  %i = s32[] get-tuple-element(%p), index=0\n"                                                     \
    "  %x = f32[8,16]{1,0} get-tuple-element(%p), index=1\n"                                            \
    "  %rv = f32[4,8,16]{2,1,0} get-tuple-element(%p), index=2\n"                                       \
    SAVE_X                                                                                              \
    "  %zero = s32[] constant(0)\n"                                                                      \
    "  %ws = f32[1,16,16]{2,1,0} dynamic-slice(%w, %i, %zero, %zero), dynamic_slice_sizes={1,16,16}\n"  \
    "  %wb = f32[16,16]{1,0} bitcast(%ws)\n"                                                            \
    "  %v = f32[8,16]{1,0} dot(%x, %wb), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "           \
    "metadata={op_name=\"jit(f)/jvp()/while/body/dot_general\"}\n"                                      \
    "  %vb = f32[1,8,16]{2,1,0} bitcast(%v)\n"                                                          \
    "  %rv2 = f32[4,8,16]{2,1,0} dynamic-update-slice(%rv, %vb, %i, %zero, %zero), "                     \
    "metadata={op_name=\"jit(f)/jvp()/while/body/dynamic_update_slice\"}\n"

static const char scan_hlo[] =
    "HloModule scan_by_hand, is_scheduled=true, entry_computation_layout={(f32[4,16,16]{2,1,0}, f32[8,16]{1,0})->f32[4,16,16]{2,1,0}}\n"
    "\n"
    "%fb (p: (s32[], f32[8,16], f32[4,8,16], f32[4,8,16], f32[4,16,16])) -> (s32[], f32[8,16], f32[4,8,16], f32[4,8,16], f32[4,16,16]) {\n"
    "  %p = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) parameter(0)\n"
    SCAN_FWD_OPS("  %rx = f32[4,8,16]{2,1,0} get-tuple-element(%p), index=3\n"
                 "  %w = f32[4,16,16]{2,1,0} get-tuple-element(%p), index=4\n")
    "  %xb = f32[1,8,16]{2,1,0} bitcast(%x)\n"
    "  %rx2 = f32[4,8,16]{2,1,0} dynamic-update-slice(%rx, %xb, %i, %zero, %zero), "
    "metadata={op_name=\"jit(f)/jvp()/while/body/dynamic_update_slice\"}\n"
    "  %y = f32[8,16]{1,0} tanh(%v), metadata={op_name=\"jit(f)/jvp()/while/body/tanh\"}\n"
    "  %one = s32[] constant(1)\n"
    "  %i2 = s32[] add(%i, %one)\n"
    "  ROOT %t = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) tuple(%i2, %y, %rv2, %rx2, %w)\n"
    "}\n"
    "\n"
    "%fc (p.1: (s32[], f32[8,16], f32[4,8,16], f32[4,8,16], f32[4,16,16])) -> pred[] {\n"
    "  %p.1 = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) parameter(0)\n"
    "  %i.1 = s32[] get-tuple-element(%p.1), index=0\n"
    "  %n.1 = s32[] constant(4)\n"
    "  ROOT %lt.1 = pred[] compare(%i.1, %n.1), direction=LT\n"
    "}\n"
    "\n"
    "%bb (q: (s32[], f32[8,16], f32[4,16,16], f32[4,8,16], f32[4,8,16], f32[4,16,16])) -> (s32[], f32[8,16], f32[4,16,16], f32[4,8,16], f32[4,8,16], f32[4,16,16]) {\n"
    "  %q = (s32[], f32[8,16]{1,0}, f32[4,16,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) parameter(0)\n"
    "  %bi = s32[] get-tuple-element(%q), index=0\n"
    "  %g = f32[8,16]{1,0} get-tuple-element(%q), index=1\n"
    "  %dw = f32[4,16,16]{2,1,0} get-tuple-element(%q), index=2\n"
    "  %brv = f32[4,8,16]{2,1,0} get-tuple-element(%q), index=3\n"
    "  %brx = f32[4,8,16]{2,1,0} get-tuple-element(%q), index=4\n"
    "  %bw = f32[4,16,16]{2,1,0} get-tuple-element(%q), index=5\n"
    "  %last = s32[] constant(3)\n"
    "  %l = s32[] subtract(%last, %bi), metadata={op_name=\"jit(f)/transpose(jvp())/while/body/sub\"}\n"
    "  %bzero = s32[] constant(0)\n"
    "  %bws = f32[1,16,16]{2,1,0} dynamic-slice(%bw, %l, %bzero, %bzero), dynamic_slice_sizes={1,16,16}\n"
    "  %bwb = f32[16,16]{1,0} bitcast(%bws)\n"
    "  %vs = f32[1,8,16]{2,1,0} dynamic-slice(%brv, %l, %bzero, %bzero), dynamic_slice_sizes={1,8,16}\n"
    "  %bv = f32[8,16]{1,0} bitcast(%vs)\n"
    "  %bt = f32[8,16]{1,0} tanh(%bv), metadata={op_name=\"jit(f)/transpose(jvp())/while/body/tanh\"}\n"
    "  %dv = f32[8,16]{1,0} multiply(%g, %bt), metadata={op_name=\"jit(f)/transpose(jvp())/while/body/mul\"}\n"
    "  %xs = f32[1,8,16]{2,1,0} dynamic-slice(%brx, %l, %bzero, %bzero), dynamic_slice_sizes={1,8,16}\n"
    "  %bx = f32[8,16]{1,0} bitcast(%xs)\n"
    "  %gw = f32[16,16]{1,0} dot(%bx, %dv), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
    "  %gwb = f32[1,16,16]{2,1,0} bitcast(%gw)\n"
    "  %dw2 = f32[4,16,16]{2,1,0} dynamic-update-slice(%dw, %gwb, %l, %bzero, %bzero)\n"
    "  %dx = f32[8,16]{1,0} dot(%dv, %bwb), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
    "  %bone = s32[] constant(1)\n"
    "  %bi2 = s32[] add(%bi, %bone)\n"
    "  ROOT %bt2 = (s32[], f32[8,16]{1,0}, f32[4,16,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) tuple(%bi2, %dx, %dw2, %brv, %brx, %bw)\n"
    "}\n"
    "\n"
    "%bc (q.1: (s32[], f32[8,16], f32[4,16,16], f32[4,8,16], f32[4,8,16], f32[4,16,16])) -> pred[] {\n"
    "  %q.1 = (s32[], f32[8,16]{1,0}, f32[4,16,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) parameter(0)\n"
    "  %bi.1 = s32[] get-tuple-element(%q.1), index=0\n"
    "  %n.2 = s32[] constant(4)\n"
    "  ROOT %lt.2 = pred[] compare(%bi.1, %n.2), direction=LT\n"
    "}\n"
    "\n"
    "ENTRY %main (w0: f32[4,16,16], x0: f32[8,16]) -> f32[4,16,16] {\n"
    "  %w0 = f32[4,16,16]{2,1,0} parameter(0)\n"
    "  %x0 = f32[8,16]{1,0} parameter(1)\n"
    "  %z = f32[] constant(0)\n"
    "  %buf = f32[4,8,16]{2,1,0} broadcast(%z), dimensions={}\n"
    "  %buf2 = f32[4,8,16]{2,1,0} broadcast(%z), dimensions={}\n"
    "  %c0 = s32[] constant(0)\n"
    "  %t0 = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) tuple(%c0, %x0, %buf, %buf2, %w0)\n"
    "  %fw = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) while(%t0), condition=%fc, body=%fb, "
    "metadata={op_name=\"jit(f)/jvp()/while\"}, backend_config={\"known_induction_variable\":{\"tuple_index\":\"0\"}}\n"
    "  %y0 = f32[8,16]{1,0} get-tuple-element(%fw), index=1\n"
    "  %rv0 = f32[4,8,16]{2,1,0} get-tuple-element(%fw), index=2\n"
    "  %rx0 = f32[4,8,16]{2,1,0} get-tuple-element(%fw), index=3\n"
    "  %dwz = f32[4,16,16]{2,1,0} broadcast(%z), dimensions={}\n"
    "  %t1 = (s32[], f32[8,16]{1,0}, f32[4,16,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) tuple(%c0, %y0, %dwz, %rv0, %rx0, %w0)\n"
    "  %bwl = (s32[], f32[8,16]{1,0}, f32[4,16,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) while(%t1), condition=%bc, body=%bb, "
    "metadata={op_name=\"jit(f)/transpose(jvp())/while\"}, backend_config={\"known_induction_variable\":{\"tuple_index\":\"0\"}}\n"
    "  ROOT %out = f32[4,16,16]{2,1,0} get-tuple-element(%bwl), index=2\n"
    "}\n";

static void test_scan_recompute(void) {
    hbm_hlo_module *m;
    CHECK_OK(hbm_hlo_parse(scan_hlo, strlen(scan_hlo), "t", &m));
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.target_bytes = 1024; /* far under the need: the residuals are looked for */
    hbm_fit_result *r;
    CHECK_OK(hbm_fit_run(m, &o, &r));
    CHECK(r->n_res == 2);
    hbmi_jax_residual *x = NULL;
    for (size_t k = 0; k < r->n_res; k++)
        if (!r->res[k].carry) x = &r->res[k];
    CHECK(x != NULL);
    if (!x) return;
    CHECK(x->index == 2 && x->bwd_index == 3 && x->layers == 4);
    CHECK_STR(x->why_estimate, "");
    /* the edited module: element 2 gone from the forward loop, the dot cloned in the backward
     * body from the layer's input (one layer of element 4 there, element 3 once element 3 is
     * dropped) and the backward body's own slice of the weights, the reader fed the clone */
    char *text = NULL;
    size_t len = 0;
    char why[200];
    hbm_plan *pl = NULL; /* the module's users live with a plan of it */
    CHECK_OK(hbm_plan_run(m, NULL, &pl));
    uint64_t flops = 0;
    CHECK_OK(hbmi_jax_recompute_write(m, x, r->res, r->n_res, &text, &len, &flops, why, sizeof why));
    hbm_plan_free(pl);
    CHECK(flops == 4 * 2 * 8 * 16 * 16); /* the dot again in each of the 4 layers; the bitcast is free */
    CHECK(x->recompute_flops == flops);
    CHECK(text && strstr(text, "%fw = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,16,16]{2,1,0}) while(%t0)"));
    CHECK(text && strstr(text, "tuple(%c0, %x0, %buf2, %w0)"));
    CHECK(text && strstr(text, "  %rx = f32[4,8,16]{2,1,0} get-tuple-element(%p), index=2\n"));
    CHECK(text && !strstr(text, "%rv2"));
    CHECK(text && strstr(text, "  %v.recompute = f32[8,16]{1,0} dot(%v.recompute.in1, %wb.recompute)"));
    CHECK(text && strstr(text, "  %wb.recompute = f32[16,16]{1,0} bitcast(%bws)"));
    CHECK(text && strstr(text, "get-tuple-element(%q), index=3\n  %v.recompute.in1.one = f32[1,8,16]{2,1,0} dynamic-slice("));
    CHECK(text && strstr(text, "dynamic-slice(%v.recompute.one, %l, %bzero, %bzero)"));
    CHECK(text && strstr(text, "  %bw = f32[4,16,16]{2,1,0} get-tuple-element(%q), index=4\n"));
    /* it plans (hbm's rules), to the peak fit reports, under the peak as it was by the buffer
     * less what the clones hold */
    uint64_t pk = text ? peak_of(text, len) : 0;
    CHECK(pk && pk == x->recompute_peak);
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    CHECK(pk < s.peak_before);
    printf("  scan by hand: %llu -> %llu bytes, the buffer %llu\n", (unsigned long long)s.peak_before,
           (unsigned long long)pk, (unsigned long long)x->bytes);
    free(text);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);

    /* without the layer's input saved, the dot's input is not in the backward loop: said */
    static const char *const cut[][2] = {
        {"  %rx2 = f32[4,8,16]{2,1,0} dynamic-update-slice(%rx, %xb, %i, %zero, %zero), "
         "metadata={op_name=\"jit(f)/jvp()/while/body/dynamic_update_slice\"}\n",
         ""},
        {"tuple(%i2, %y, %rv2, %rx2, %w)", "tuple(%i2, %y, %rv2, %rx, %w)"},
    };
    char *b = hbmi_malloc(sizeof scan_hlo);
    if (!b) return;
    memcpy(b, scan_hlo, sizeof scan_hlo);
    for (size_t k = 0; k < 2; k++) {
        char *at = strstr(b, cut[k][0]);
        CHECK(at != NULL);
        if (!at) break;
        size_t n = strlen(cut[k][0]), n2 = strlen(cut[k][1]);
        memmove(at + n2, at + n, strlen(at + n) + 1);
        memcpy(at, cut[k][1], n2);
    }
    CHECK_OK(hbm_hlo_parse(b, strlen(b), "t", &m));
    CHECK_OK(hbm_fit_run(m, &o, &r));
    x = NULL;
    for (size_t k = 0; k < r->n_res; k++)
        if (!r->res[k].carry) x = &r->res[k];
    CHECK(x && x->recompute_peak == 0);
    CHECK(x && strstr(x->why_estimate, "it needs element 1 of the forward loop (f32[8,16]{1,0}), which the backward "
                                       "loop does not hold"));
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    hbmi_free(b);

    /* the value computed inside the fusion that stacks it (v * 2 there): cloned as a fusion of
     * the instructions that compute it, the update in place left out */
    static const char stack[] =
        "%stack (s0: f32[4,8,16], s1: f32[8,16], s2: s32[]) -> f32[4,8,16] {\n"
        "  %s0 = f32[4,8,16]{2,1,0} parameter(0)\n"
        "  %s1 = f32[8,16]{1,0} parameter(1)\n"
        "  %s2 = s32[] parameter(2)\n"
        "  %sc = f32[] constant(2)\n"
        "  %sb = f32[8,16]{1,0} broadcast(%sc), dimensions={}\n"
        "  %sm = f32[8,16]{1,0} multiply(%s1, %sb)\n"
        "  %smb = f32[1,8,16]{2,1,0} bitcast(%sm)\n"
        "  %sz = s32[] constant(0)\n"
        "  ROOT %sd = f32[4,8,16]{2,1,0} dynamic-update-slice(%s0, %smb, %s2, %sz, %sz), "
        "metadata={op_name=\"jit(f)/jvp()/while/body/dynamic_update_slice\"}\n"
        "}\n\n";
    static const char dus[] = "  %rv2 = f32[4,8,16]{2,1,0} dynamic-update-slice(%rv, %vb, %i, %zero, %zero), "
                              "metadata={op_name=\"jit(f)/jvp()/while/body/dynamic_update_slice\"}\n";
    static const char fus[] = "  %rv2 = f32[4,8,16]{2,1,0} fusion(%rv, %v, %i), kind=kLoop, calls=%stack, "
                              "metadata={op_name=\"jit(f)/jvp()/while/body/dynamic_update_slice\"}\n";
    const char *fb_at = strstr(scan_hlo, "%fb ("), *dus_at = strstr(scan_hlo, dus);
    CHECK(fb_at && dus_at);
    if (!fb_at || !dus_at) return;
    size_t cap = sizeof scan_hlo + sizeof stack + sizeof fus;
    b = hbmi_malloc(cap);
    if (!b) return;
    snprintf(b, cap, "%.*s%s%.*s%s%s", (int)(fb_at - scan_hlo), scan_hlo, stack, (int)(dus_at - fb_at), fb_at, fus,
             dus_at + strlen(dus));
    CHECK_OK(hbm_hlo_parse(b, strlen(b), "t", &m));
    CHECK_OK(hbm_fit_run(m, &o, &r));
    x = NULL;
    for (size_t k = 0; k < r->n_res; k++)
        if (!r->res[k].carry) x = &r->res[k];
    CHECK(x && x->recompute_peak > 0);
    CHECK(x && !x->why_estimate[0]);
    if (x) {
        CHECK_OK(hbm_plan_run(m, NULL, &pl));
        CHECK_OK(hbmi_jax_recompute_write(m, x, r->res, r->n_res, &text, &len, NULL, why, sizeof why));
        hbm_plan_free(pl);
        CHECK(text && strstr(text, "%stack.recompute (s1.recompute: f32[8,16]{1,0}) -> f32[8,16]{1,0} {\n"
                                   "  %s1.recompute = f32[8,16]{1,0} parameter(0)\n"));
        CHECK(text && strstr(text, "  ROOT %sm.recompute = f32[8,16]{1,0} multiply(%s1.recompute, %sb.recompute)\n"));
        CHECK(text && strstr(text, "  %rv2.recompute = f32[8,16]{1,0} fusion(%v.recompute), kind=kLoop, calls=%stack.recompute\n"));
        CHECK(text && !strstr(text, "calls=%stack,"));
        uint64_t pk2 = text ? peak_of(text, len) : 0;
        CHECK(pk2 && pk2 == x->recompute_peak);
        free(text);
    }
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    hbmi_free(b);
}

/* scan_hlo with the forward body's update in place done by a multi-output fusion (XLA:TPU's):
 * `stack` (a computation) before %fb, the DUS line replaced by `fus`, the tanh reading `y_in` */
static char *scan_with(const char *stack, const char *fus, const char *y_in) {
    static const char dus[] = "  %rv2 = f32[4,8,16]{2,1,0} dynamic-update-slice(%rv, %vb, %i, %zero, %zero), "
                              "metadata={op_name=\"jit(f)/jvp()/while/body/dynamic_update_slice\"}\n";
    static const char tanh_v[] = "tanh(%v)";
    const char *fb_at = strstr(scan_hlo, "%fb ("), *dus_at = strstr(scan_hlo, dus), *y_at = strstr(scan_hlo, tanh_v);
    if (!fb_at || !dus_at || !y_at || y_at < dus_at) return NULL;
    size_t cap = sizeof scan_hlo + strlen(stack) + strlen(fus) + strlen(y_in) + 16;
    char *b = hbmi_malloc(cap);
    if (!b) return NULL;
    snprintf(b, cap, "%.*s%s%.*s%s%.*s%s%s", (int)(fb_at - scan_hlo), scan_hlo, stack, (int)(dus_at - fb_at), fb_at, fus,
             (int)(y_at - dus_at - strlen(dus)), dus_at + strlen(dus), y_in, y_at + strlen(tanh_v));
    return b;
}

/* the residual stacked by one output of a multi-output fusion whose other outputs the forward
 * body reads on: that fusion narrowed to them in the forward body (its computation, its
 * parameters renumbered, its shape, its get-tuple-elements), the value cloned in the backward
 * body as a fusion of its own; the module plans to the peak fit reports */
static void test_scan_recompute_multi(void) {
    static const char stack2[] =
        "%stack2 (s0: f32[4,8,16], s1: f32[8,16], s2: s32[]) -> (f32[4,8,16], f32[8,16]) {\n"
        "  %s0 = f32[4,8,16]{2,1,0} parameter(0)\n"
        "  %s1 = f32[8,16]{1,0} parameter(1)\n"
        "  %s2 = s32[] parameter(2)\n"
        "  %sc = f32[] constant(2)\n"
        "  %sb = f32[8,16]{1,0} broadcast(%sc), dimensions={}\n"
        "  %sm = f32[8,16]{1,0} multiply(%s1, %sb)\n"
        "  %smb = f32[1,8,16]{2,1,0} bitcast(%sm)\n"
        "  %sz = s32[] constant(0)\n"
        "  %sd = f32[4,8,16]{2,1,0} dynamic-update-slice(%s0, %smb, %s2, %sz, %sz), "
        "metadata={op_name=\"jit(f)/jvp()/while/body/dynamic_update_slice\"}\n"
        "  %sn = f32[8,16]{1,0} negate(%s1)\n"
        "  ROOT %st = (f32[4,8,16]{2,1,0}, f32[8,16]{1,0}) tuple(%sd, %sn)\n"
        "}\n\n";
    static const char fus2[] =
        "  %rvf = (f32[4,8,16]{2,1,0}, f32[8,16]{1,0}) fusion(%rv, %v, %i), kind=kOutput, calls=%stack2, "
        "metadata={op_name=\"jit(f)/jvp()/while/body/dot_general\"}\n"
        "  %rv2 = f32[4,8,16]{2,1,0} get-tuple-element(%rvf), index=0\n"
        "  %vm = f32[8,16]{1,0} get-tuple-element(%rvf), index=1\n";
    char *b = scan_with(stack2, fus2, "tanh(%vm)");
    CHECK(b != NULL);
    if (!b) return;
    hbm_hlo_module *m;
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.target_bytes = 1024;
    hbm_fit_result *r;
    CHECK_OK(hbm_hlo_parse(b, strlen(b), "t", &m));
    CHECK_OK(hbm_fit_run(m, &o, &r));
    hbmi_jax_residual *x = NULL;
    for (size_t k = 0; k < r->n_res; k++)
        if (!r->res[k].carry) x = &r->res[k];
    CHECK(x && x->recompute_peak > 0);
    CHECK_STR(x ? x->why_estimate : "?", "");
    char *text = NULL, why[200];
    size_t len = 0;
    if (x) {
        hbm_plan *pl = NULL;
        CHECK_OK(hbm_plan_run(m, NULL, &pl));
        CHECK_OK(hbmi_jax_recompute_write(m, x, r->res, r->n_res, &text, &len, NULL, why, sizeof why));
        hbm_plan_free(pl);
    }
    /* the forward body: the fusion narrowed to the output read on */
    CHECK(text && strstr(text, "%stack2 (s1: f32[8,16]) -> f32[8,16] {\n"
                               "  %s1 = f32[8,16]{1,0} parameter(0)\n"
                               "  ROOT %sn = f32[8,16]{1,0} negate(%s1)\n}\n"));
    CHECK(text && strstr(text, "  %rvf = f32[8,16]{1,0} fusion(%v), kind=kOutput, calls=%stack2, "));
    CHECK(text && strstr(text, "  %vm = f32[8,16]{1,0} bitcast(%rvf)\n"));
    CHECK(text && !strstr(text, "%rv2 ") && !strstr(text, "%sd ="));
    /* the backward body: the value again, as a fusion of its own of the same kind */
    CHECK(text && strstr(text, "%stack2.recompute (s1.recompute: f32[8,16]{1,0}) -> f32[8,16]{1,0} {\n"));
    CHECK(text && strstr(text, "  ROOT %sm.recompute = f32[8,16]{1,0} multiply(%s1.recompute, %sb.recompute)\n"));
    CHECK(text && strstr(text, "  %rvf.recompute = f32[8,16]{1,0} fusion(%v.recompute), kind=kOutput, calls=%stack2.recompute\n"));
    uint64_t pk = text ? peak_of(text, len) : 0;
    CHECK(pk && x && pk == x->recompute_peak);
    hbm_fit_summary su;
    CHECK_OK(hbm_fit_get_summary(r, &su));
    CHECK(pk < su.peak_before);
    printf("  multi-output fusion, 2 outputs: %llu -> %llu bytes\n", (unsigned long long)su.peak_before,
           (unsigned long long)pk);
    CHECK(!su.recompute_fits && su.recompute_peak == pk); /* 1 KiB: not reached */
    hbm_fit_free(r);
    /* a target the recompute module reaches and no residual in host memory does: that route
     * is what fits, and the module emitted is the one planned */
    o.target_bytes = pk;
    CHECK_OK(hbm_fit_run(m, &o, &r));
    CHECK_OK(hbm_fit_get_summary(r, &su));
    CHECK(!su.fits && su.recompute_fits && su.recompute_peak == pk);
    char *emitted = NULL, *shown = NULL;
    size_t ne = 0, ns = 0;
    FILE *f = open_memstream(&emitted, &ne);
    CHECK(f != NULL);
    if (f) {
        CHECK_OK(hbm_fit_emit(r, f));
        fclose(f);
    }
    CHECK(emitted && ne == len && !memcmp(emitted, text, len));
    f = open_memstream(&shown, &ns);
    if (f) {
        CHECK_OK(hbm_fit_write(r, f, 0, 12, 0));
        fclose(f);
    }
    /* here the residual in host memory fits too (a lower peak): that is what fits */
    CHECK(su.residual_fits && su.residual_peak < pk);
    CHECK(shown && strstr(shown, "\nWhat fits: the scan residual f32[4,8,16] (computed, above) in host memory"));
    CHECK(shown && strstr(shown, "\nhbm fit --emit writes the module with the backward loop recomputing the scan "
                                 "residual f32[4,8,16], planned to "));
    free(shown);
    shown = NULL;
    /* the renderer, where only the recompute reaches the target */
    r->sum.residual_fits = 0;
    f = open_memstream(&shown, &ns);
    if (f) {
        CHECK_OK(hbm_fit_write(r, f, 0, 12, 0));
        fclose(f);
    }
    CHECK(shown && strstr(shown, "\nWhat fits: the scan residual f32[4,8,16] (f32[8,16] per layer, above) recomputed by "
                                 "the backward loop, by its checkpoint policy in the JAX code: the module plans to "));
    CHECK(shown && strstr(shown, "\nhbm fit --emit writes the module with the backward loop recomputing the scan "
                                 "residual f32[4,8,16], planned to "));
    CHECK(shown && !strstr(shown, "Nothing within the limits fits"));
    free(emitted);
    free(shown);
    free(text);
    text = NULL;
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    hbmi_free(b);

    /* three outputs, the stacking one in the middle: a tuple of the two left, the last
     * get-tuple-element renumbered */
    static const char stack3[] =
        "%stack3 (s0: f32[4,8,16], s1: f32[8,16], s2: s32[]) -> (f32[8,16], f32[4,8,16], f32[8,16]) {\n"
        "  %s0 = f32[4,8,16]{2,1,0} parameter(0)\n"
        "  %s1 = f32[8,16]{1,0} parameter(1)\n"
        "  %s2 = s32[] parameter(2)\n"
        "  %sn = f32[8,16]{1,0} negate(%s1)\n"
        "  %s1b = f32[1,8,16]{2,1,0} bitcast(%s1)\n"
        "  %sz = s32[] constant(0)\n"
        "  %sd = f32[4,8,16]{2,1,0} dynamic-update-slice(%s0, %s1b, %s2, %sz, %sz), "
        "metadata={op_name=\"jit(f)/jvp()/while/body/dynamic_update_slice\"}\n"
        "  %se = f32[8,16]{1,0} exponential(%s1)\n"
        "  ROOT %st = (f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[8,16]{1,0}) tuple(%sn, %sd, %se)\n"
        "}\n\n";
    static const char fus3[] =
        "  %rvf = (f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[8,16]{1,0}) fusion(%rv, %v, %i), kind=kLoop, calls=%stack3\n"
        "  %rv2 = f32[4,8,16]{2,1,0} get-tuple-element(%rvf), index=1\n"
        "  %vm = f32[8,16]{1,0} get-tuple-element(%rvf), index=0\n"
        "  %ve = f32[8,16]{1,0} get-tuple-element(%rvf), index=2\n"
        "  %vme = f32[8,16]{1,0} add(%vm, %ve)\n";
    b = scan_with(stack3, fus3, "tanh(%vme)");
    CHECK(b != NULL);
    if (!b) return;
    CHECK_OK(hbm_hlo_parse(b, strlen(b), "t", &m));
    CHECK_OK(hbm_fit_run(m, &o, &r));
    x = NULL;
    for (size_t k = 0; k < r->n_res; k++)
        if (!r->res[k].carry) x = &r->res[k];
    CHECK(x && x->recompute_peak > 0);
    if (x) {
        hbm_plan *pl = NULL;
        CHECK_OK(hbm_plan_run(m, NULL, &pl));
        CHECK_OK(hbmi_jax_recompute_write(m, x, r->res, r->n_res, &text, &len, NULL, why, sizeof why));
        hbm_plan_free(pl);
    }
    CHECK(text && strstr(text, "%stack3 (s1: f32[8,16]) -> (f32[8,16], f32[8,16]) {\n"));
    CHECK(text && strstr(text, "  ROOT %st = (f32[8,16]{1,0}, f32[8,16]{1,0}) tuple(%sn, %se)\n"));
    CHECK(text && strstr(text, "  %rvf = (f32[8,16]{1,0}, f32[8,16]{1,0}) fusion(%v), kind=kLoop, calls=%stack3\n"));
    CHECK(text && strstr(text, "  %ve = f32[8,16]{1,0} get-tuple-element(%rvf), index=1\n"));
    CHECK(text && strstr(text, "  %vm = f32[8,16]{1,0} get-tuple-element(%rvf), index=0\n"));
    uint64_t pk3 = text ? peak_of(text, len) : 0;
    CHECK(pk3 && x && pk3 == x->recompute_peak);
    free(text);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    hbmi_free(b);
}

/* a generated module of about 2 MB: one advice within 5 s */
static void test_speed_2mb(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    fprintf(f, "HloModule big, is_scheduled=true\n\nENTRY %%main (p0: f32[256,1024]) -> f32[256,1024] {\n");
    fprintf(f, "  %%p0 = f32[256,1024]{1,0} parameter(0)\n");
    int n = 0;
    for (int i = 0; len < (2u << 20) - 4096; i++, n++) {
        /* a chain where every 50th value is read again 400 instructions later */
        if (i == 0) fprintf(f, "  %%v0 = f32[256,1024]{1,0} exponential(%%p0)");
        else if (i >= 400 && i % 50 == 0)
            fprintf(f, "  %%v%d = f32[256,1024]{1,0} add(%%v%d, %%v%d)", i, i - 1, i - 400);
        else fprintf(f, "  %%v%d = f32[256,1024]{1,0} %s(%%v%d)", i, i % 2 ? "negate" : "sine", i - 1);
        fprintf(f, ", metadata={op_name=\"jit(step)/layer%d/op\" source_file=\"model.py\" source_line=%d}\n", i, i);
        fflush(f);
    }
    fprintf(f, "  ROOT %%r = f32[256,1024]{1,0} negate(%%v%d)\n}\n", n - 1);
    fclose(f);
    CHECK(len >= (2u << 20) - 4096);
    hbm_hlo_module *m;
    CHECK_OK(hbm_hlo_parse(text, len, "big", &m));
    uint64_t before = peak_of(text, len);
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.target_bytes = before - before / 5;
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    uint64_t t0 = hbmi_now_ns();
    hbm_fit_result *r;
    CHECK_OK(hbm_fit_run(m, &o, &r));
    double wall = (double)(hbmi_now_ns() - t0) / 1e9;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    /* the machine the tests run on may be shared: the CPU time is the advice's own */
    double sec = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
    hbm_fit_summary s;
    CHECK_OK(hbm_fit_get_summary(r, &s));
    printf("2 MB module (%zu bytes, %d instructions): %.2f s CPU, %.2f s wall, peak %" PRIu64 " -> %" PRIu64
           " (target %" PRIu64 "), %s\n",
           len, n, sec, wall, before, s.hbm.peak_bytes, o.target_bytes, s.fits ? "fits" : "does not fit");
    /* the 5 s is for an optimized build; a sanitizer's or an unoptimized one runs several
     * times slower and only checks the answer */
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    CHECK(sec < 5.0);
#endif
    CHECK(s.hbm.found && s.hbm.peak_bytes <= before); /* never worse than the module as given */
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
    free(text);
}

static void test_bad_input(void) {
    hbm_hlo_module *m;
    static const char unscheduled[] = "HloModule u\n\nENTRY %main (p0: f32[4]) -> f32[4] {\n"
                                      "  %p0 = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%p0)\n}\n";
    CHECK_OK(hbm_hlo_parse(unscheduled, strlen(unscheduled), "u", &m));
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.target_bytes = 8;
    hbm_fit_result *r = NULL;
    CHECK_STATUS(hbm_fit_run(m, &o, &r), HBM_ERR_UNSUPPORTED);
    CHECK(r == NULL);
    hbm_hlo_module_free(m);
    CHECK_STATUS(hbm_fit_run(NULL, &o, &r), HBM_ERR_INVALID);
    hbm_fit_remat w;
    CHECK_OK(hbm_fit_remat_parse("xla", &w));
    CHECK(w == HBM_FIT_REMAT_XLA);
    CHECK_STATUS(hbm_fit_remat_parse("greedy", &w), HBM_ERR_INVALID);
}

int main(void) {
    RUN(test_remat);
    RUN(test_noclone_offload);
    RUN(test_donate);
    RUN(test_donate_names);
    RUN(test_jax_terms);
    RUN(test_bitcast_alias);
    RUN(test_multi_output);
    RUN(test_multi_output_new_form);
    RUN(test_while_body);
    RUN(test_param_host);
    RUN(test_gte_offload);
    RUN(test_param_bitcast);
    RUN(test_collective);
    RUN(test_baseline);
    RUN(test_baseline_tpu);
    RUN(test_fits_already);
    RUN(test_scan_recompute);
    RUN(test_scan_recompute_multi);
    RUN(test_speed_2mb);
    RUN(test_bad_input);
    return test_done();
}
