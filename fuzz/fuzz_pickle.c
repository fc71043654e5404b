/* fuzz_pickle.c - the PyTorch snapshot pickle reader on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "hbm/hbm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hbm_trace *t;
    if (hbm_trace_parse_torch_pickle(data, size, "fuzz.pickle", &t) == HBM_OK) {
        hbm_timeline *tl;
        if (hbm_trace_to_timeline(t, &tl) == HBM_OK) hbm_timeline_free(tl);
        hbm_trace_free(t);
    }
    return 0;
}
