/* fuzz_config.c - the small parsers of libhbm: config strings, device specs, sizes.
 * Any input must give HBM_OK or an error status with a message, never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/hbm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    hbm_config c;
    hbm_config_default(&c);
    if (hbm_config_apply(&c, s) != HBM_OK && !hbm_last_error()[0]) abort();
    uint64_t v;
    if (hbm_size_parse(s, &v) != HBM_OK && !hbm_last_error()[0]) abort();
    hbm_device *d = NULL;
    hbm_status st = hbm_device_open(s, &d);
    if (st == HBM_OK) {
        uint64_t a;
        if (hbm_device_alloc(d, 4096, &a) == HBM_OK) hbm_device_free(d, a);
        hbm_device_close(d);
    } else if (d != NULL || !hbm_last_error()[0]) {
        abort();
    }
    free(s);
    return 0;
}
