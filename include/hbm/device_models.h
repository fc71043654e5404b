/* hbm/device_models.h - the devices hbm knows by name (device/models.c): their memory
 * and the share of it the usual framework lets XLA use, and XLA's GPU memory limit under a
 * fraction. `hbm devices` lists them; `hbm plan --device`, `hbm replay --device` and the
 * allocators' OOM advice read them. (hbm/plan.h includes this header.) */
#ifndef HBM_DEVICE_MODELS_H
#define HBM_DEVICE_MODELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- known devices ------------------------------------------------------------------------ */
typedef struct hbm_device_model {
    const char *name;        /* "H100-80GB" */
    const char *aliases;     /* comma-separated other spellings, lowercase: "h100,h100-sxm" */
    uint64_t capacity_bytes; /* physical memory */
    double default_fraction; /* what the usual framework (JAX) lets XLA use: 0.75 */
    const char *note;
} hbm_device_model;

HBM_API size_t hbm_device_model_count(void);
HBM_API const hbm_device_model *hbm_device_model_at(size_t i);
/* Case-insensitive lookup by name or alias; NULL (with an error naming close choices) if none. */
HBM_API const hbm_device_model *hbm_device_model_find(const char *name);
/* `hbm devices`: every known device as a table (name, capacity in human units and bytes,
 * default fraction, note; its aliases on the line under it), lines longer than width
 * columns cut in the middle with "..." (0: whole), or as a JSON array of {"name",
 * "capacity_bytes", "default_fraction", "aliases"}. */
HBM_API hbm_status hbm_device_models_write(FILE *f, int json, size_t width);

/* The bytes XLA's GPU client lets its BFC allocator use on a device whose driver reports
 * total bytes, under memory fraction (XLA_PYTHON_CLIENT_MEM_FRACTION): CreateBFCAllocator
 * (xla/pjrt/gpu/gpu_helpers.cc) takes total x fraction as a size_t and rounds it up to 2 MiB
 * (RoundGpuMemoryLimit); that is BFC's bytes_limit and, preallocating, its pool. Capped at
 * total (what the device has); fraction >= 1 or <= 0: total. docs/gpu.md has the source and
 * what it leaves unexplained of the H200 measurement. */
HBM_API uint64_t hbm_xla_gpu_limit(uint64_t total, double fraction);
/* The smallest XLA_PYTHON_CLIENT_MEM_FRACTION, in hundredths up to HBM_XLA_MAX_FRACTION (a
 * preallocated pool of the whole device leaves the CUDA context no room), whose
 * hbm_xla_gpu_limit holds need bytes, and does so still 0.43 % lower, as JAX 0.11 gave on
 * the H200 measured (docs/gpu.md); 0 when none does. */
#define HBM_XLA_MAX_FRACTION 0.99
HBM_API double hbm_xla_gpu_fraction_for(uint64_t need, uint64_t total);
/* A fraction as the environment variable takes it: ".84", ".05"; "1" from 1 up. */
HBM_API const char *hbm_fraction_text(double fraction, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
