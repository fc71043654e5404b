/* fuzz_minimalloc.c - MiniMalloc CSV parsing, then (for small inputs) every packing
 * algorithm, whose packings must verify. */
#include <stdint.h>
#include <stdlib.h>

#include "hbm/hbm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hbm_timeline *tl;
    if (hbm_minimalloc_parse((const char *)data, size, "fuzz.csv", &tl)) return 0;
    if (tl->count <= 24) {
        hbm_pack_algo algos[] = {HBM_PACK_GREEDY_SIZE, HBM_PACK_BEST, HBM_PACK_EXACT};
        for (int q = 0; q < 3; q++) {
            if (algos[q] == HBM_PACK_EXACT && tl->count > 10) break;
            hbm_pack_options o;
            hbm_pack_options_default(&o);
            o.algo = algos[q];
            o.minimize = algos[q] == HBM_PACK_EXACT;
            o.timeout_s = 0.005;
            hbm_pack_result r;
            hbm_status s = hbm_pack(tl, &o, &r);
            if (s == HBM_OK && hbm_timeline_verify(tl, 0) != HBM_OK) abort();
            if (s == HBM_ERR_CORRUPT) abort();
        }
    }
    hbm_timeline_free(tl);
    return 0;
}
