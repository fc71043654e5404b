/* models.c - accelerators hbm knows by name, with the memory a framework can see and the
 * share of it the framework uses by default. GPUs: the total the driver reports
 * (cuMemGetInfo's, which nvidia-smi, deviceQuery and PyTorch's OOM message "X GiB total
 * capacity" print), the marketing name staying the name; docs/gpu.md gives each figure's
 * source. Drivers differ a little (an A100 40GB printed 39.59 and 39.50 GiB under two
 * drivers, 40339 MiB under a third): where sources differ, the smallest, since a verdict must
 * not count memory the driver may not give. A figure PyTorch printed in GiB with two decimals
 * is taken as that many MiB (x 1024, rounded): exact to 5 MiB. Where no source gives a driver
 * total the figure is nvidia-smi's or the nominal size, and the note says so.
 * TPUs: the HBM XLA:TPU itself plans against, the Y of its compile-time OOM "Used X of Y hbm"
 * (what is left of the chip once the runtime has reserved its part), as XLA prints it: in
 * binary units with two decimals, so the exact byte count is not known beyond that. */
#include <ctype.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/device_models.h"
#include "hbm/size.h"

#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)

static const hbm_device_model models[] = {
    /* 85,520,809,984 B reported (modal-labs/modal-client PR 2797), nvidia-smi's 81559 MiB */
    {"H100-80GB", "h100,h100-sxm,h100-pcie,h100-80g", MiB(81559), 0.75, "NVIDIA H100 80GB: driver's 81559 MiB"},
    /* cuMemGetInfo on the H200 measured here (docs/gpu.md): 150,754,820,096 B */
    {"H200-141GB", "h200,h200-sxm,h200-141g", MiB(143771), 0.75, "NVIDIA H200 141GB: driver's 143771 MiB (measured)"},
    /* deviceQuery: "40339 MBytes (42298834944 bytes)" (bottlerocket-os/bottlerocket PR 3873);
     * PyTorch's OOM: 39.59 GiB (raoyongming/DenseCLIP issue 52), 39.50 GiB (TianheWu/CoSeR 10) */
    {"A100-40GB", "a100-40,a100-40g,a100-sxm4-40gb", 42298834944ull, 0.75, "NVIDIA A100 40GB: driver's 39.39 GiB"},
    /* PyTorch's OOM on A100 80GB: "79.25 GiB total capacity" (wbfwonderful/Vad-R1 issue 11,
     * HiDream-ai/VAREdit issue 6) */
    {"A100-80GB", "a100,a100-80,a100-80g,a100-sxm4-80gb", MiB(81152), 0.75, "NVIDIA A100 80GB: driver's 79.25 GiB"},
    {"V100-16GB", "v100,v100-16,v100-16g,v100-sxm2-16gb", GiB(16), 0.75, "NVIDIA V100 16GB (nominal: no driver total found)"},
    /* PyTorch's OOM on V100 32GB: "31.74 GiB total capacity" (liucongg/ChatGLM-Finetuning
     * issue 73, haotian-liu/LLaVA issue 812) */
    {"V100-32GB", "v100-32,v100-32g,v100-sxm2-32gb", MiB(32502), 0.75, "NVIDIA V100 32GB: driver's 31.74 GiB"},
    /* nvidia-smi's 23034 MiB (modal-labs/modal-client PR 2797); no driver total found */
    {"L4", "l4-24gb,nvidia-l4", MiB(23034), 0.75, "NVIDIA L4 24GB (nvidia-smi's 23034 MiB)"},
    /* NVML's total on an A10: 24146608128 bytes (github.com/mayooot/detect-gpu issue 3) = nvidia-smi's
     * 23028 MiB; no driver total found */
    {"A10", "a10-24gb,nvidia-a10", MiB(23028), 0.75, "NVIDIA A10 24GB (nvidia-smi's 23028 MiB)"},
    /* PyTorch's OOM on a T4: "14.75 GiB total capacity" (hpcaitech/Open-Sora issue 697); nvidia-smi
     * says 15360 MiB */
    {"T4", "t4-16gb,tesla-t4,nvidia-t4", MiB(15104), 0.75, "NVIDIA T4 16GB: driver's 14.75 GiB"},
    /* the runtime's total global memory on a B200: 178.35 GiB (github.com/pytorch/ao PR 4002) */
    {"B200", "b200-180gb,b200-192gb,nvidia-b200", MiB(182630), 0.75, "NVIDIA B200: driver's 178.35 GiB"},
    /* PyTorch's OOM on an RTX 4090: "23.64 GiB" (ali-vilab/VGen issue 104, 3DTopia/Phidias-Diffusion
     * issue 8; older drivers 23.65 and 23.68) */
    {"RTX-4090", "4090,rtx4090,geforce-rtx-4090", MiB(24207), 0.75, "NVIDIA GeForce RTX 4090 24GB: driver's 23.64 GiB"},
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

/* XLA's GPU client (xla/pjrt/gpu/gpu_helpers.cc, CreateBFCAllocator and RoundGpuMemoryLimit):
 * allocator_memory = total_memory * memory_fraction, converted to size_t, then rounded up to
 * kGpuMemoryLimitGranularity (2 MiB) on CUDA/ROCm; BFC takes it as its memory limit. */
uint64_t hbm_xla_gpu_limit(uint64_t total, double fraction) {
    if (!(fraction > 0.0 && fraction < 1.0)) return total;
    double b = (double)total * fraction;
    uint64_t m = b >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)b;
    const uint64_t g = (uint64_t)2 << 20;
    if (m > UINT64_MAX - (g - 1)) return total;
    m = (m + g - 1) / g * g;
    return m < total ? m : total;
}

/* What JAX 0.11 gave on the one GPU measured (an H200, docs/gpu.md): at every fraction tried
 * its bytes_limit was 0.9957-0.9961 of total x fraction, up to 0.43 % under the rule above,
 * which the source does not explain. A fraction is advised only when it holds the need under
 * that lower figure too, so that the device measured would not run out with it. */
#define XLA_SEEN_SHORT 0.0043
uint64_t hbmi_xla_gpu_limit_seen(uint64_t total, double fraction) {
    uint64_t lim = hbm_xla_gpu_limit(total, fraction);
    return lim - (uint64_t)((double)lim * XLA_SEEN_SHORT);
}

double hbm_xla_gpu_fraction_for(uint64_t need, uint64_t total) {
    for (int k = 1; k <= (int)(HBM_XLA_MAX_FRACTION * 100 + 0.5); k++)
        if (hbmi_xla_gpu_limit_seen(total, k / 100.0) >= need) return k / 100.0;
    return 0.0;
}

const char *hbm_fraction_text(double fraction, char *buf, size_t n) {
    if (!buf || !n) return "";
    if (fraction >= 1.0) snprintf(buf, n, "1");
    else snprintf(buf, n, ".%02d", (int)(fraction * 100.0 + 0.5));
    return buf;
}

/* The fraction advice for a module needing need bytes on a device of total bytes, each
 * figure checked under XLA's rule and what JAX gave below it (hbmi_xla_gpu_limit_seen): the
 * smallest fraction whose limit holds the need, or, where none up to HBM_XLA_MAX_FRACTION
 * does, by how much the largest falls short. */
int hbmi_fraction_setting(char *buf, size_t n, uint64_t need, uint64_t total) {
    char a[32], b[32], c[32], d[32], fs[16];
    double fr = hbm_xla_gpu_fraction_for(need, total);
    if (fr > 0) {
        snprintf(buf, n, "XLA_PYTHON_CLIENT_MEM_FRACTION=%s (or XLA_PYTHON_CLIENT_ALLOCATOR=platform)",
                 hbm_fraction_text(fr, fs, sizeof fs));
        return 1;
    }
    uint64_t top = hbm_xla_gpu_limit(total, HBM_XLA_MAX_FRACTION);
    uint64_t seen = hbmi_xla_gpu_limit_seen(total, HBM_XLA_MAX_FRACTION);
    snprintf(buf, n,
             "XLA_PYTHON_CLIENT_ALLOCATOR=platform (no fraction fits: the module needs %s, "
             "XLA_PYTHON_CLIENT_MEM_FRACTION=%s gives %s under XLA's rule and %s as JAX 0.11 gave on "
             "an H200, short by %s)",
             hbm_size_human(need, a), hbm_fraction_text(HBM_XLA_MAX_FRACTION, fs, sizeof fs),
             hbm_size_human(top, b), hbm_size_human(seen, d), hbm_size_human(need > seen ? need - seen : 0, c));
    return 0;
}

void hbmi_fraction_advice(FILE *f, uint64_t need, uint64_t total, const char *indent) {
    char a[32], b[32], c[32], d[32], fs[16];
    double fr = hbm_xla_gpu_fraction_for(need, total);
    if (fr > 0) {
        uint64_t lim = hbm_xla_gpu_limit(total, fr);
        hbmi_mark_whole(f);
        fprintf(f, "%sSet XLA_PYTHON_CLIENT_MEM_FRACTION=%s (or XLA_PYTHON_CLIENT_ALLOCATOR=platform):\n", indent,
                hbm_fraction_text(fr, fs, sizeof fs));
        hbmi_mark_whole(f);
        fprintf(f, "%s  XLA's limit is then %s (%s x %s, rounded up to 2 MiB), which holds the %s needed,\n",
                indent, hbm_size_human(lim, a), fs, hbm_size_human(total, b), hbm_size_human(need, c));
        hbmi_mark_whole(f);
        fprintf(f, "%s  as does %s, 0.43 %% less, as JAX 0.11 gave on an H200.\n", indent,
                hbm_size_human(hbmi_xla_gpu_limit_seen(total, fr), a));
        return;
    }
    uint64_t top = hbm_xla_gpu_limit(total, HBM_XLA_MAX_FRACTION);
    uint64_t seen = hbmi_xla_gpu_limit_seen(total, HBM_XLA_MAX_FRACTION);
    hbmi_mark_whole(f);
    fprintf(f, "%sNo fraction fits: the module needs %s, XLA_PYTHON_CLIENT_MEM_FRACTION=%s gives %s\n", indent,
            hbm_size_human(need, a), hbm_fraction_text(HBM_XLA_MAX_FRACTION, fs, sizeof fs), hbm_size_human(top, b));
    hbmi_mark_whole(f);
    fprintf(f, "%s  under XLA's rule and %s as JAX 0.11 gave on an H200, short by %s.\n", indent,
            hbm_size_human(seen, d), hbm_size_human(need > seen ? need - seen : 0, c));
    hbmi_mark_whole(f);
    fprintf(f, "%s  XLA_PYTHON_CLIENT_ALLOCATOR=platform takes what is needed from the device's %s,\n", indent,
            hbm_size_human(total, d));
    hbmi_mark_whole(f);
    fprintf(f, "%s  with no fraction.\n", indent);
}
