/* fuzz_json.c - the PyTorch snapshot JSON reader on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "hbm/hbm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hbm_trace *t;
    if (hbm_trace_parse_torch_json((const char *)data, size, "fuzz.json", &t) == HBM_OK) hbm_trace_free(t);
    return 0;
}
