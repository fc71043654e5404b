/* test_plan_cpu_share.c - XLA:CPU's operand-buffer sharing, on modules written for the
 * purpose: XLA:CPU gives HloDataflowAnalysis no hint, so CanShareOperandBufferWithUser
 * decides alone (xla/hlo/analysis/hlo_dataflow_analysis.cc): the operand's and the
 * user's shapes must be equal with their layouts, and a fusion shares only when every
 * transitive use of its parameter is elementwise (a copy is, a bitcast is not) or a tuple.
 * The zoo's XLA:CPU modules (JAX 0.10.2) carry each pattern; docs/tpu.md names them. */
#include "core/internal.h"
#include "test.h"

/* temp bytes of a CPU module (the file name says CPU), or UINT64_MAX when it fails */
static uint64_t cpu_temp(const char *text) {
    hbm_hlo_module *m = NULL;
    if (hbm_hlo_parse(text, strlen(text), "t.cpu.hlo", &m) != HBM_OK) return UINT64_MAX;
    hbm_plan *p = NULL;
    uint64_t t = UINT64_MAX;
    if (hbm_plan_run(m, NULL, &p) == HBM_OK) {
        hbm_plan_stats st;
        hbm_plan_get_stats(p, &st);
        if (st.backend == HBM_BACKEND_CPU) t = st.temp_size_in_bytes;
        hbm_plan_free(p);
    }
    hbm_hlo_module_free(m);
    return t;
}

/* A loop fusion that reads its f32[4,5] operand through bitcasts does not take the
 * operand's buffer (a bitcast is not elementwise): the dot's 80 bytes stay a temp. XLA:GPU's
 * hint lets bitcasts through; XLA:CPU's zoo modules remat-nothing_saveable-f32-none1 and
 * two more are 4 MiB short without this rule. */
static void test_bitcast_in_fusion_blocks_sharing(void) {
    const char *text = "HloModule m, is_scheduled=true\n"
                       "%fb (a: f32[4,5]) -> f32[4,5] {\n"
                       "  %a = f32[4,5]{1,0} parameter(0)\n"
                       "  %b = f32[20]{0} bitcast(%a)\n"
                       "  %n = f32[20]{0} negate(%b)\n"
                       "  ROOT %r = f32[4,5]{1,0} bitcast(%n)\n"
                       "}\n"
                       "ENTRY e {\n"
                       "  p = f32[4,3]{1,0} parameter(0)\n"
                       "  w = f32[3,5]{1,0} parameter(1)\n"
                       "  d = f32[4,5]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                       "  ROOT f = f32[4,5]{1,0} fusion(d), kind=kLoop, calls=%fb\n"
                       "}\n";
    CHECK_EQ_U64(cpu_temp(text), 80);
}

/* The same fusion with a copy of an unchanged layout where the bitcasts were: a copy is
 * elementwise, so the fusion writes into the dot's buffer and no temp is left. */
static void test_copy_in_fusion_shares(void) {
    const char *text = "HloModule m, is_scheduled=true\n"
                       "%fc (a: f32[4,5]) -> f32[4,5] {\n"
                       "  %a = f32[4,5]{1,0} parameter(0)\n"
                       "  %c = f32[4,5]{1,0} copy(%a)\n"
                       "  ROOT %n = f32[4,5]{1,0} negate(%c)\n"
                       "}\n"
                       "ENTRY e {\n"
                       "  p = f32[4,3]{1,0} parameter(0)\n"
                       "  w = f32[3,5]{1,0} parameter(1)\n"
                       "  d = f32[4,5]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                       "  ROOT f = f32[4,5]{1,0} fusion(d), kind=kLoop, calls=%fc\n"
                       "}\n";
    CHECK_EQ_U64(cpu_temp(text), 0);
}

/* An elementwise op whose result has another layout than its operand does not share it
 * (ShapeUtil::Equal compares layouts): the dot's 80 bytes stay a temp; with the operand's
 * layout, the negate writes in place. */
static void test_layout_change_blocks_sharing(void) {
    const char *other = "HloModule m, is_scheduled=true\n"
                        "ENTRY e {\n"
                        "  p = f32[4,3]{1,0} parameter(0)\n"
                        "  w = f32[3,5]{1,0} parameter(1)\n"
                        "  d = f32[4,5]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                        "  ROOT n = f32[4,5]{0,1} negate(d)\n"
                        "}\n";
    CHECK_EQ_U64(cpu_temp(other), 80);
    const char *same = "HloModule m, is_scheduled=true\n"
                       "ENTRY e {\n"
                       "  p = f32[4,3]{1,0} parameter(0)\n"
                       "  w = f32[3,5]{1,0} parameter(1)\n"
                       "  d = f32[4,5]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                       "  ROOT n = f32[4,5]{1,0} negate(d)\n"
                       "}\n";
    CHECK_EQ_U64(cpu_temp(same), 0);
}

/* An output fusion whose root adds a dot to the parameter shares that parameter's buffer
 * when the add is its only use; a second use of the parameter (a slice here) stops it. */
static void test_output_fusion_add_root(void) {
    const char *one = "HloModule m, is_scheduled=true\n"
                      "%fo (x: f32[4,3], y: f32[3,5], z: f32[4,5]) -> f32[4,5] {\n"
                      "  %x = f32[4,3]{1,0} parameter(0)\n"
                      "  %y = f32[3,5]{1,0} parameter(1)\n"
                      "  %z = f32[4,5]{1,0} parameter(2)\n"
                      "  %d = f32[4,5]{1,0} dot(%x, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                      "  ROOT %s = f32[4,5]{1,0} add(%d, %z)\n"
                      "}\n"
                      "ENTRY e {\n"
                      "  p = f32[4,3]{1,0} parameter(0)\n"
                      "  w = f32[3,5]{1,0} parameter(1)\n"
                      "  d = f32[4,5]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                      "  ROOT f = f32[4,5]{1,0} fusion(p, w, d), kind=kOutput, calls=%fo\n"
                      "}\n";
    CHECK_EQ_U64(cpu_temp(one), 0);
    const char *two = "HloModule m, is_scheduled=true\n"
                      "%fo (x: f32[4,3], y: f32[3,5], z: f32[4,5]) -> f32[4,5] {\n"
                      "  %x = f32[4,3]{1,0} parameter(0)\n"
                      "  %y = f32[3,5]{1,0} parameter(1)\n"
                      "  %z = f32[4,5]{1,0} parameter(2)\n"
                      "  %zs = f32[4,3]{1,0} slice(%z), slice={[0:4], [0:3]}\n"
                      "  %d = f32[4,5]{1,0} dot(%zs, %y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                      "  ROOT %s = f32[4,5]{1,0} add(%d, %z)\n"
                      "}\n"
                      "ENTRY e {\n"
                      "  p = f32[4,3]{1,0} parameter(0)\n"
                      "  w = f32[3,5]{1,0} parameter(1)\n"
                      "  d = f32[4,5]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                      "  ROOT f = f32[4,5]{1,0} fusion(p, w, d), kind=kOutput, calls=%fo\n"
                      "}\n";
    CHECK_EQ_U64(cpu_temp(two), 80);
}

int main(void) {
    RUN(test_bitcast_in_fusion_blocks_sharing);
    RUN(test_copy_in_fusion_shares);
    RUN(test_layout_change_blocks_sharing);
    RUN(test_output_fusion_add_root);
    return test_done();
}
