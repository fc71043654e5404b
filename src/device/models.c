/* models.c - accelerators hbm knows by name, with the memory a framework can see and the
 * share of it the framework uses by default. Capacities are the totals nvidia-smi / the
 * runtime reports where known (e.g. 81559 MiB for an H100 80GB), otherwise the nominal size.
 * TPUs: the HBM XLA:TPU itself plans against, the Y of its compile-time OOM "Used X of Y hbm"
 * (what is left of the chip once the runtime has reserved its part), as XLA prints it: in
 * binary units with two decimals, so the exact byte count is not known beyond that. */
#include <ctype.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/plan.h"
#include "hbm/size.h"

#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)

static const hbm_device_model models[] = {
    {"H100-80GB", "h100,h100-sxm,h100-pcie,h100-80g", MiB(81559), 0.75, "NVIDIA H100 80GB (SXM/PCIe)"},
    {"H200-141GB", "h200,h200-sxm,h200-141g", MiB(143771), 0.75, "NVIDIA H200 141GB"},
    {"A100-40GB", "a100-40,a100-40g,a100-sxm4-40gb", MiB(40960), 0.75, "NVIDIA A100 40GB"},
    {"A100-80GB", "a100,a100-80,a100-80g,a100-sxm4-80gb", MiB(81920), 0.75, "NVIDIA A100 80GB"},
    {"V100-16GB", "v100,v100-16,v100-16g,v100-sxm2-16gb", GiB(16), 0.75, "NVIDIA V100 16GB (nominal)"},
    {"V100-32GB", "v100-32,v100-32g,v100-sxm2-32gb", GiB(32), 0.75, "NVIDIA V100 32GB (nominal)"},
    {"L4", "l4-24gb,nvidia-l4", MiB(23034), 0.75, "NVIDIA L4 24GB"},
    /* NVML's total on an A10: 24146608128 bytes (github.com/mayooot/detect-gpu issue 3) */
    {"A10", "a10-24gb,nvidia-a10", MiB(23028), 0.75, "NVIDIA A10 24GB"},
    {"T4", "t4-16gb,tesla-t4,nvidia-t4", MiB(15360), 0.75, "NVIDIA T4 16GB (nvidia-smi's 15360 MiB)"},
    /* the runtime's total global memory on a B200: 178.35 GiB (github.com/pytorch/ao PR 4002) */
    {"B200", "b200-180gb,b200-192gb,nvidia-b200", MiB(182630), 0.75, "NVIDIA B200 (178.35 GiB, as CUDA reports)"},
    {"RTX-4090", "4090,rtx4090,geforce-rtx-4090", MiB(24564), 0.75, "NVIDIA GeForce RTX 4090 24GB"},
    /* TPU v4 (32 GiB per chip: its runtime says "would exceed memory (size=34359738368)"):
     * "Used 98.33G of 30.75G hbm" in a public TPU v4-128 training log */
    {"TPU-v4", "v4,tpuv4,tpu-v4-chip", MiB(31488), 1.0, "TPU v4 per chip: XLA:TPU's 30.75G of 32 GiB"},
    /* TPU v5e (16 GiB per chip): "Used 19.22G of 15.75G hbm" (a v5litepod-1 run), "Used
     * 28.59G of 15.75G hbm" (v5e-8), both public reports quoting XLA:TPU */
    {"TPU-v5e", "v5e,tpuv5e,tpu-v5-lite", MiB(16128), 1.0, "TPU v5e per chip: XLA:TPU's 15.75G of 16 GiB"},
    /* TPU v5p (Google lists 95 GB per chip): "Used 110.81G of 95.74G hbm" (v5p-64), "Used 112.37G of
     * 95.74G hbm": printed to 0.01 GiB, so 98038 MiB is that figure, not a byte count */
    {"TPU-v5p", "v5p,tpuv5p", MiB(98038), 1.0, "TPU v5p per chip: XLA:TPU's 95.74G (rounded)"},
    /* TPU v6e, Trillium (32 GiB per chip): "Used 35.40G of 31.25G hbm" (openxla/xla
     * docs/errors/error_1000.md), "Used 46.60G of 31.25G hbm" (a v6e-8 run) */
    {"TPU-v6e", "v6e,tpuv6e,trillium,tpu-v6-lite", MiB(32000), 1.0, "TPU v6e (Trillium): XLA:TPU's 31.25G of 32 GiB"},
    {"MI300X", "mi300,mi300x-192gb,amd-mi300x", GiB(192), 0.75, "AMD Instinct MI300X 192GB (nominal)"},
};

size_t hbm_device_model_count(void) { return sizeof models / sizeof models[0]; }

const hbm_device_model *hbm_device_model_at(size_t i) {
    return i < hbm_device_model_count() ? &models[i] : NULL;
}

static int alias_match(const char *list, const char *name) {
    size_t n = strlen(name);
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n) {
            size_t i = 0;
            while (i < n && tolower((unsigned char)p[i]) == tolower((unsigned char)name[i])) i++;
            if (i == n) return 1;
        }
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

const hbm_device_model *hbm_device_model_find(const char *name) {
    if (!name || !*name) {
        hbmi_error(HBM_ERR_INVALID, "device: empty name");
        return NULL;
    }
    for (size_t i = 0; i < hbm_device_model_count(); i++)
        if (hbmi_streq_ci(models[i].name, name) || alias_match(models[i].aliases, name)) return &models[i];
    hbmi_error(HBM_ERR_INVALID,
               "device '%s' is not known; 'hbm devices' lists them (e.g. H100-80GB, A100-40GB, V100-16GB, "
               "TPU-v5e)",
               name);
    return NULL;
}

static hbm_status emit_table(const void *ctx, FILE *f) {
    (void)ctx;
    fprintf(f, "%-12s %10s %14s %8s  %s\n", "NAME", "CAPACITY", "BYTES", "FRACTION", "NOTE");
    for (size_t i = 0; i < hbm_device_model_count(); i++) {
        const hbm_device_model *d = &models[i];
        char h[32];
        fprintf(f, "%-12s %10s %14llu %8.2f  %s\n%-12s also: %s\n", d->name, hbm_size_human(d->capacity_bytes, h),
                (unsigned long long)d->capacity_bytes, d->default_fraction, d->note, "", d->aliases);
    }
    return HBM_OK;
}

hbm_status hbm_device_models_write(FILE *f, int json, size_t width) {
    if (!f) return hbmi_error(HBM_ERR_INVALID, "hbm_device_models_write: NULL file");
    if (!json) return hbmi_emit_fitted(emit_table, NULL, f, width);
    fputc('[', f);
    for (size_t i = 0; i < hbm_device_model_count(); i++) {
        const hbm_device_model *d = &models[i];
        fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
        hbmi_json_write_str(f, d->name, 0);
        fprintf(f, ", \"capacity_bytes\": %llu, \"default_fraction\": %.2f, \"aliases\": ",
                (unsigned long long)d->capacity_bytes, d->default_fraction);
        hbmi_json_write_str(f, d->aliases, 0);
        fputc('}', f);
    }
    fputs("\n]\n", f);
    return HBM_OK;
}
