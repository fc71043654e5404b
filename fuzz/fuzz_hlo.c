/* fuzz_hlo.c - any bytes into the HLO parser and, when they parse, through the planner
 * and its reports: no crash, no leak, no sanitizer report. */
#include <stdint.h>
#include <stdio.h>

#include "hbm/hbm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    hbm_hlo_module *m = NULL;
    if (hbm_hlo_parse((const char *)data, size, "fuzz", &m) != HBM_OK) return 0;
    hbm_plan *p = NULL;
    if (hbm_plan_run(m, NULL, &p) == HBM_OK) {
        static FILE *sink;
        if (!sink) sink = fopen("/dev/null", "w");
        if (sink) {
            hbm_plan_report(p, sink, 15);
            hbm_plan_explain(p, sink, 16ull << 30, 0.75, "fuzz", 8);
            hbm_plan_json(p, sink, 15, 0, 0);
        }
        hbm_plan_free(p);
    }
    hbm_hlo_module_free(m);
    return 0;
}
