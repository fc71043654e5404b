/* allocator_open.c - hbm_allocator_open: an allocator composed from outside alloc/ (as RMM
 * composes resources and adaptors): the policy the configuration names (src/alloc/), wrapped
 * in the trace recorder (recorder.c, beside it) when trace=PATH or HBM_TRACE asks for it,
 * under the handle that serializes calls and keeps the OOM state. It stands on the
 * recorder's floor, below the replay that opens allocators. */
#include "alloc/alloc_policy.h"
#include "trace/trace_internal.h"

hbm_status hbm_allocator_open(hbm_device *dev, const char *config, hbm_allocator **out) {
    hbm_config cfg;
    hbm_status s = hbm_config_resolve(config, &cfg);
    if (s) return s;
    return hbm_allocator_open_config(dev, &cfg, out);
}

hbm_status hbm_allocator_open_config(hbm_device *dev, const hbm_config *cfg, hbm_allocator **out) {
    if (!dev || !cfg || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_allocator_open: NULL argument");
    *out = NULL;
    const hbm_allocator_ops *ops;
    void *self;
    hbm_status s = hbmi_policy_open(dev, cfg, &ops, &self);
    if (!s) s = hbmi_recorder_over(cfg, dev, &ops, &self);
    return s ? s : hbm_allocator_wrap(ops, self, dev, cfg, out);
}
