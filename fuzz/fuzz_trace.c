/* fuzz_trace.c - the native trace reader on arbitrary bytes; what loads must convert,
 * replay, export and view without trouble (output goes to /dev/null). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hbm/hbm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hbm_trace *t;
    if (hbm_trace_parse(data, size, "fuzz.hbmt", &t) != HBM_OK) return 0;
    hbm_timeline *tl;
    if (hbm_trace_to_timeline(t, &tl) == HBM_OK) hbm_timeline_free(tl);
    if (t->count < 5000) {
        hbm_replay_result r;
        hbm_replay(t, "sim:1GiB", "allocator=platform", &r);
        hbm_replay_result_release(&r);
        static FILE *null;
        if (!null) null = fopen("/dev/null", "w");
        if (null) {
            hbm_export_perfetto(t, null);
            hbm_export_pprof(t, null);
            hbm_export_torch(t, null);
            hbm_view_text(t, NULL, null);
            hbm_view_json(t, NULL, null);
            hbm_view_html(t, NULL, null);
        }
    }
    hbm_trace_free(t);
    return 0;
}
