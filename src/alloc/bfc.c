/* bfc.c - placeholder until the BFC policy lands (being written now). */
#include "alloc/alloc_internal.h"

hbm_status hbmi_bfc_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                           const hbm_allocator_ops **ops, void **self) {
    return hbmi_error(HBM_ERR_NOT_AVAILABLE, "bfc: not written yet");
}
