/* device_internal.h - backends register here. */
#ifndef HBM_DEVICE_INTERNAL_H
#define HBM_DEVICE_INTERNAL_H

#include "hbm/device.h"

/* Each backend's constructor: size and options already parsed by device.c. */
typedef struct hbmi_device_args {
    uint64_t total;       /* capacity from the spec */
    uint64_t free_bytes;  /* sim: reported free (others hold the rest); 0 = all */
    const char *name;     /* NULL = default */
    const char *spec;     /* whole spec, for messages */
    int ordinal;          /* cuda:<n> */
} hbmi_device_args;

hbm_status hbmi_sim_device_create(const hbmi_device_args *args, const hbm_device_ops **ops, void **ctx,
                                  hbm_device_info *info);
hbm_status hbmi_host_device_create(const hbmi_device_args *args, const hbm_device_ops **ops, void **ctx,
                                   hbm_device_info *info);
hbm_status hbmi_cuda_device_create(const hbmi_device_args *args, const hbm_device_ops **ops, void **ctx,
                                   hbm_device_info *info);

/* A memory-only backend's info (sim, host): kind, the name given or "KIND:SIZE", the total. */
void hbmi_device_info_named(const hbmi_device_args *args, const char *kind, hbm_device_info *info);

/* The backend context of dev if its backend is ops, else NULL (cuda.c finds its own). */
void *hbmi_device_ctx(hbm_device *dev, const hbm_device_ops *ops);

#endif
