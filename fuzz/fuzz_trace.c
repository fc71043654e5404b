/* fuzz_trace.c - the native trace reader on arbitrary bytes; what loads must convert,
 * replay and export without trouble. */
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
    }
    hbm_trace_free(t);
    return 0;
}
