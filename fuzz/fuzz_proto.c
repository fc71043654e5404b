/* fuzz_proto.c - any bytes into the protobuf reader (XSpace, HloProto, HloModuleProto by
 * content): the module list, every module read into hbm's model with XLA's assignment, and
 * when one reads, through the planner, the comparison with XLA's and the reports; then the
 * module's whole HLO text written from the proto (what hbm fit edits), read back by the text
 * parser and planned. The same bytes as a profile's memory profile (hbm/memprof.h): the
 * allocators' events, XProf's summary, the attribution, the text and JSON, each
 * allocator's trace. No crash, no leak, no sanitizer report. Seeded from the shared profile
 * (../shared/data/xprof). */
#include <stdint.h>
#include <stdio.h>

#include "hbm/hbm.h"
#include "hlo/hlo_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (4u << 20)) return 0;
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    hbm_memprof *mp = NULL;
    if (hbm_memprof_open_mem(data, size, "fuzz", &mp) == HBM_OK) {
        if (hbm_memprof_attribute(mp) == HBM_OK && sink) {
            hbm_memprof_write(mp, -1, 0, 15, 40, 1, sink);
            hbm_memprof_write(mp, -1, 1, 15, 40, 0, sink);
        }
        for (size_t a = 0; a < hbm_memprof_allocator_count(mp) && a < 4; a++) {
            hbm_trace *t = NULL;
            if (hbm_memprof_trace(mp, a, &t) == HBM_OK) hbm_trace_free(t);
        }
        hbm_memprof_close(mp);
    }
    hbm_proto_file *f = NULL;
    if (hbm_proto_open_mem(data, size, "fuzz", &f) != HBM_OK) return 0;
    if (sink) hbm_proto_list(f, sink, 0);
    size_t n = hbm_proto_module_count(f);
    for (size_t i = 0; i < n && i < 4; i++) {
        hbm_hlo_module *m = NULL;
        if (hbm_proto_load(f, i, &m) != HBM_OK) continue;
        hbm_xla_stats xs;
        hbm_xla_buffer b[8];
        if (hbm_hlo_xla_stats(m, &xs) == HBM_OK) hbm_hlo_xla_peak_buffers(m, b, 8);
        hbm_plan *p = NULL;
        if (hbm_plan_run(m, NULL, &p) == HBM_OK) {
            if (sink) {
                hbm_plan_report(p, sink, 15);
                hbm_plan_xla_text(p, sink, 15);
                hbm_plan_xla_json(p, sink, 15);
            }
            hbm_plan_free(p);
        }
        hbm_hlo_module *t = NULL;
        if (hbmi_proto_text(m) == HBM_OK && hbm_hlo_parse(m->text, m->len, "fuzz", &t) == HBM_OK &&
            hbm_plan_run(t, NULL, &p) == HBM_OK)
            hbm_plan_free(p);
        hbm_hlo_module_free(t);
        hbm_hlo_module_free(m);
    }
    hbm_proto_close(f);
    return 0;
}
