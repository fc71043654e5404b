/* test_fit_xla.c - the baseline `hbm fit --remat xla` against XLA's HloRematerialization
 * (xla/hlo/transforms/simplifiers/hlo_rematerialization.cc) on small hand-written modules:
 * the names the writer gives to clones of clones, where XLA places a clone (before the
 * earliest unplaced use of the value or of one of its operands), a clone cloned again, and
 * a while body rematerialized with its own limit. Every expected set is derived by hand from
 * XLA's rule in the comment above its case. */
#include <stdlib.h>

#include "core/internal.h"
#include "fit/fit_internal.h"
#include "fit/fit_result.h"
#include "test.h"

/* HloInstruction::Clone(suffix "remat"): "x" -> "x.remat" -> "x.remat2" -> "x.remat3"; a name
 * already taken gets ".1" (the writer's own rule for uniqueness) */
static void test_clone_names(void) {
    static const char text[] =
        "HloModule names, is_scheduled=true\n"
        "\n"
        "ENTRY %main (p: f32[4]) -> f32[4] {\n"
        "  %p = f32[4]{0} parameter(0)\n"
        "  %a.remat2 = f32[4]{0} negate(%p)\n"
        "  ROOT %b = f32[4]{0} negate(%a.remat2)\n"
        "}\n";
    hbm_hlo_module *m;
    CHECK_OK(hbm_hlo_parse(text, strlen(text), "t", &m));
    static const struct {
        const char *base, *want;
    } cases[] = {{"x", "x.remat"}, {"x.remat", "x.remat2"}, {"x.remat2", "x.remat3"},
                 {"x.remat9", "x.remat10"}, {"a.remat", "a.remat2.1"}, {"b.rematx", "b.rematx.remat"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        hbmi_str b = {.p = cases[k].base, .n = (uint32_t)strlen(cases[k].base)};
        char *nm = hbmi_fit_fresh_name(m, b, ".remat");
        CHECK(nm != NULL);
        if (nm) CHECK_STR(nm, cases[k].want);
        hbmi_free(nm);
    }
    hbm_hlo_module_free(m);
}

#define M16 "f32[2048,2048]{1,0}"
#define M8 "f32[2048,1024]{1,0}"
static const int64_t MiB = 1 << 20;

/* hbm fit --remat xla on a TPU module at capacity cap: the result, the module, the emitted text */
static void tpu_xla(const char *text, uint64_t cap, hbm_fit_result **r, hbm_hlo_module **m, char **out) {
    CHECK_OK(hbm_hlo_parse(text, strlen(text), "t", m));
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.target_bytes = cap;
    o.no_offload = 1;
    o.no_donate = 1;
    o.remat = HBM_FIT_REMAT_XLA;
    o.plan.backend = HBM_BACKEND_TPU;
    CHECK_OK(hbm_fit_run(*m, &o, r));
    size_t len = 0;
    *out = NULL;
    FILE *f = open_memstream(out, &len);
    CHECK(f != NULL);
    if (f) {
        CHECK_OK(hbm_fit_emit(*r, f));
        fclose(f);
    }
}

/* where a line "  %NAME = " starts in text, or -1 */
static long line_of(const char *text, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "  %%%s = ", name);
    const char *p = text ? strstr(text, key) : NULL;
    return p ? (long)(p - text) : -1;
}

static int chosen(const hbm_fit_result *r, const char *name) {
    int n = 0;
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        if (c->xla_chosen) n += strcmp(c->instruction, name) ? 1000 : 1;
    }
    return n;
}

/* A clone placed at an operand's reader, then cloned again (XLA:TPU's rule: the tracker counts
 * temps; the limit is 95 % of the capacity less the 8 MiB argument less the 8 MiB output:
 * 40 MiB; arrays under 10 MiB are no candidates, so `a` (8 MiB) never is). Live MiB per
 * step: a 8, v 24, d1 40, d2 56 (over). At d2 the candidates are v (reduced 16, its reader d1
 * placed: cost 40/16 = 2) and d1 (in use by d2): v. Its clone goes before the earliest
 * unplaced reader of v (w) or of its operand a (u, d3, r): before u. At u (48 with the clone):
 * v.remat is live and none of its readers is placed: a move, cost 0; its clone goes before
 * the earliest unplaced reader of v.remat (w) or of a (d3, r): before d3; v.remat is left
 * without readers (a move). At d3 (48) the same again: v.remat3 before w (a's readers left: r),
 * denylisted (a move of a move). At w (56: a, v.remat3, d4, w) nothing is left (v.remat3 and
 * d4 are in use, a too small): the walk stops at 56 + 8 (the output) = 64 MiB. So XLA writes v,
 * v.remat3 before w, and neither v.remat nor v.remat2 (each moved on). The old baseline (one
 * clone before the next reader) wrote v.remat before w. */
static const char operand_hlo[] =
    "HloModule xla_operand, is_scheduled=true, entry_computation_layout={(" M8 ")->" M8 "}\n"
    "\n"
    "ENTRY %main (x: f32[2048,1024]) -> f32[2048,1024] {\n"
    "  %x = " M8 " parameter(0)\n"
    "  %a = " M8 " exponential(%x)\n"
    "  %v = " M16 " dot(%a, %a), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
    "  %d1 = " M16 " dot(%v, %v), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d2 = " M16 " dot(%d1, %d1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %u = " M8 " dot(%d2, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d3 = " M16 " dot(%u, %a), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
    "  %d4 = " M16 " dot(%d3, %d3), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %w = " M16 " add(%v, %d4)\n"
    "  ROOT %r = " M8 " dot(%w, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "}\n";

static void test_operand_place(void) {
    const uint64_t cap = (uint64_t)(56 * MiB * 100 + 94) / 95;
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out;
    tpu_xla(operand_hlo, cap, &r, &m, &out);
    CHECK(r->xla_limit == 40 * MiB);
    CHECK(chosen(r, "v") == 1);
    CHECK(r->xla_before == 64 * MiB && r->xla_after == 64 * MiB);
    CHECK(line_of(out, "v") >= 0);
    CHECK(line_of(out, "v.remat") < 0 && line_of(out, "v.remat2") < 0);
    long c = line_of(out, "v.remat3"), d4 = line_of(out, "d4"), w = line_of(out, "w");
    CHECK(c > d4 && d4 > 0 && w > c);
    CHECK(out && strstr(out, "%w = " M16 " add(%v.remat3, %d4)"));
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

/* A while body rematerialized with its own limit (RematerializeComputation recursing at the
 * call site). The body reads x (the loop's array), b1 = exp(x), b2, b3 dots, b4 = b3 + b1:
 * its tracker peaks at b3 with b1, b2, b3: 48 MiB (its parameter and its outputs count 0).
 * The entry holds e (read after the loop) and the loop's array x0: 32 MiB at the while, plus
 * the body's 48 (the condition's few bytes aside): 80 over a limit of 95 % of the capacity
 * less the 16 MiB argument and the 16 MiB output, 56. In the entry first: e has no reader
 * placed, a move (cost 0): e.remat before r; x0 is held by a tuple and the while (indirect
 * uses): no candidate. 16 + 48 is still over 56: the body is walked with 56 - 16 = 40: at b3
 * (48) b1 is cloned (reduced 16, its reader b2 placed: cost 40/16) before b4, its one reader
 * left; the body's peak is 32, the entry's 16 + 32 = 48, with the output 64 MiB (80 + 16 = 96
 * before). */
static const char while_hlo[] =
    "HloModule xla_while, is_scheduled=true, entry_computation_layout={(" M16 ")->" M16 "}\n"
    "\n"
    "%body (bp: (s32[], f32[2048,2048])) -> (s32[], f32[2048,2048]) {\n"
    "  %bp = (s32[], " M16 ") parameter(0)\n"
    "  %i = s32[] get-tuple-element(%bp), index=0\n"
    "  %x = " M16 " get-tuple-element(%bp), index=1\n"
    "  %one = s32[] constant(1)\n"
    "  %i1 = s32[] add(%i, %one)\n"
    "  %b1 = " M16 " exponential(%x)\n"
    "  %b2 = " M16 " dot(%b1, %b1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %b3 = " M16 " dot(%b2, %b2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %b4 = " M16 " add(%b3, %b1)\n"
    "  ROOT %bt = (s32[], " M16 ") tuple(%i1, %b4)\n"
    "}\n"
    "\n"
    "%cond (cp: (s32[], f32[2048,2048])) -> pred[] {\n"
    "  %cp = (s32[], " M16 ") parameter(0)\n"
    "  %ci = s32[] get-tuple-element(%cp), index=0\n"
    "  %c3 = s32[] constant(3)\n"
    "  ROOT %lt = pred[] compare(%ci, %c3), direction=LT\n"
    "}\n"
    "\n"
    "ENTRY %main (p: f32[2048,2048]) -> f32[2048,2048] {\n"
    "  %p = " M16 " parameter(0)\n"
    "  %e = " M16 " exponential(%p)\n"
    "  %x0 = " M16 " negate(%p)\n"
    "  %c0 = s32[] constant(0)\n"
    "  %t = (s32[], " M16 ") tuple(%c0, %x0)\n"
    "  %wh = (s32[], " M16 ") while(%t), condition=%cond, body=%body\n"
    "  %g = " M16 " get-tuple-element(%wh), index=1\n"
    "  ROOT %r = " M16 " add(%g, %e)\n"
    "}\n";

static void test_while_limit(void) {
    const uint64_t cap = (uint64_t)(88 * MiB * 100 + 94) / 95;
    hbm_fit_result *r;
    hbm_hlo_module *m;
    char *out;
    tpu_xla(while_hlo, cap, &r, &m, &out);
    CHECK(r->xla_limit == 56 * MiB);
    int e = 0, b1 = 0, other = 0;
    for (size_t i = 0; hbm_fit_change_at(r, i); i++) {
        const hbm_fit_change *c = hbm_fit_change_at(r, i);
        if (c->xla_chosen) *(!strcmp(c->instruction, "e") ? &e : !strcmp(c->instruction, "b1") ? &b1 : &other) += 1;
    }
    CHECK(e == 1 && b1 == 1 && other == 0);
    /* + the scalars and the tuples' index tables (512 B as XLA:TPU lays them out) */
    CHECK(r->xla_before >= 96 * MiB && r->xla_before < 96 * MiB + 4096);
    CHECK(r->xla_after >= 64 * MiB && r->xla_after < 64 * MiB + 4096);
    long c1 = line_of(out, "b1.remat"), b3 = line_of(out, "b3"), b4 = line_of(out, "b4");
    CHECK(c1 > b3 && b3 > 0 && b4 > c1);
    CHECK(line_of(out, "e") < 0 && line_of(out, "e.remat") > line_of(out, "g"));
    free(out);
    hbm_fit_free(r);
    hbm_hlo_module_free(m);
}

int main(void) {
    RUN(test_clone_names);
    RUN(test_operand_place);
    RUN(test_while_limit);
    return test_done();
}
