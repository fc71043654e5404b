/* fuzz_rmm.c - the RMM log CSV importer on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/hbm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hbm_trace *t;
    if (hbm_trace_parse_rmm_csv((const char *)data, size, "fuzz.csv", &t) == HBM_OK) {
        hbm_timeline *tl;
        if (hbm_trace_to_timeline(t, &tl) == HBM_OK) hbm_timeline_free(tl);
        hbm_trace_free(t);
    }
    return 0;
}
