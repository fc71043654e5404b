/* hbm/config.h - allocator configuration from "key=value,..." strings or the environment.
 *
 * One table (HBM_CONFIG_OPTIONS) drives parsing, `hbm config`, the docs and JSON.
 * Each option has a key, an hbm environment variable and, where one exists, the variable
 * JAX / TensorFlow users already set. Precedence, highest first:
 *   config string  >  HBM_* variable  >  framework variable  >  policy default.
 * hbm_allocator_open(dev, NULL, ...) reads the environment; with a config string it uses
 * that string and the defaults only (no environment), so programs get what they ask for.
 * A bad value is an error naming the variable or key, the value and what is accepted.
 */
#ifndef HBM_CONFIG_H
#define HBM_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hbm_allocator_kind {
    HBM_ALLOCATOR_BFC,
    HBM_ALLOCATOR_PLATFORM,
    HBM_ALLOCATOR_CUDA_ASYNC,
    HBM_ALLOCATOR_VMM,
    HBM_ALLOCATOR_TORCH
} hbm_allocator_kind;

typedef enum hbm_policy {
    HBM_POLICY_JAX,        /* current JAX: fraction (0.75) of total device memory */
    HBM_POLICY_JAX_LEGACY  /* JAX before 0.4.1: fraction (0.90) of memory free at open */
} hbm_policy;

/* PyTorch's roundup_power2_divisions: one entry per power-of-two interval, [1 MiB, 2 MiB)
 * (and below) to [32 GiB, 64 GiB) and above. */
#define HBM_TORCH_ROUNDUP_INTERVALS 16

/* X(field, key, hbm variable, framework variable(s) or NULL, accepted values, doc) */
#define HBM_CONFIG_OPTIONS(X)                                                               \
    X(allocator, "allocator", "HBM_ALLOCATOR",                                              \
      "XLA_PYTHON_CLIENT_ALLOCATOR, TF_GPU_ALLOCATOR",                                      \
      "bfc|platform|cuda_async|vmm|torch (XLA: default|bfc|platform|cuda_async; "           \
      "TF: cuda_malloc_async; PYTORCH_CUDA_ALLOC_CONF backend: native|cudaMallocAsync)",    \
      "allocation policy")                                                                  \
    X(policy, "policy", "HBM_POLICY", NULL, "jax|jax_legacy",                               \
      "jax: fraction of total memory (default 0.75); jax_legacy: of free memory (0.90)")   \
    X(preallocate, "preallocate", "HBM_PREALLOCATE", "XLA_PYTHON_CLIENT_PREALLOCATE",       \
      "true|false|1|0|yes|no", "bfc: take the whole limit at open instead of growing")      \
    X(fraction, "fraction", "HBM_MEM_FRACTION",                                             \
      "XLA_PYTHON_CLIENT_MEM_FRACTION, XLA_CLIENT_MEM_FRACTION",                            \
      "a number in (0, 1], e.g. .6", "share of device memory the allocator may use")        \
    X(limit, "limit", "HBM_LIMIT", NULL, "a size: 40GiB (x 2^30), 40GB (x 10^9); 0 = fraction", \
      "absolute byte limit, overrides fraction")                                            \
    X(initial_region, "initial_region", "HBM_INITIAL_REGION", NULL,                         \
      "a size >= 256 (e.g. 2MiB)", "bfc growth: first region size, doubling after")         \
    X(release_on_oom, "release_on_oom", "HBM_RELEASE_ON_OOM", NULL, "true|false",           \
      "bfc growth: on OOM return wholly free regions to the device and retry")              \
    X(async_prealloc, "async_prealloc", "HBM_ASYNC_PREALLOC",                               \
      "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC", "bytes >= -1 (-1 = the pool size)",        \
      "cuda_async: bytes to preallocate in the pool")                                       \
    X(report_top, "report_top", "HBM_REPORT_TOP", NULL, "an integer in [0, 1000]",          \
      "live buffers listed in the OOM report")                                              \
    X(trace, "trace", "HBM_TRACE", NULL, "a file path; %p = pid, %n = allocator number",   \
      "record every alloc/free into this trace file (docs/traces.md)")                      \
    X(trace_backtrace, "trace_backtrace", "HBM_TRACE_BACKTRACE", NULL, "true|false",        \
      "with trace: also record a native backtrace per allocation (slower)")                \
    X(expandable_segments, "expandable_segments", "HBM_EXPANDABLE_SEGMENTS",                \
      "PYTORCH_CUDA_ALLOC_CONF", "true|false (PyTorch: True|False)",                        \
      "torch: one growing virtual segment per stream and pool (2 MiB / 20 MiB pages)")       \
    X(max_split_size_mb, "max_split_size_mb", "HBM_MAX_SPLIT_SIZE_MB",                      \
      "PYTORCH_CUDA_ALLOC_CONF", "an integer >= 20 (MiB); 0 = no limit (PyTorch's default)", \
      "torch: cached blocks of this size or more are never split")                          \
    X(max_non_split_rounding_mb, "max_non_split_rounding_mb", "HBM_MAX_NON_SPLIT_ROUNDING_MB", \
      "PYTORCH_CUDA_ALLOC_CONF", "an integer >= 20 (MiB; default 20)",                      \
      "torch: an unsplittable block serves a request only if less than this larger")         \
    X(roundup_power2_divisions, "roundup_power2_divisions", "HBM_ROUNDUP_POWER2_DIVISIONS", \
      "PYTORCH_CUDA_ALLOC_CONF",                                                            \
      "a power of 2, or [MB:N,...,>:N] with MB a power of 2 and N a power of 2 or 0",       \
      "torch: round sizes up to one of N equal steps between two powers of two")            \
    X(garbage_collection_threshold, "garbage_collection_threshold",                         \
      "HBM_GARBAGE_COLLECTION_THRESHOLD", "PYTORCH_CUDA_ALLOC_CONF",                        \
      "a number in (0, 1); 0 = off",                                                        \
      "torch, with fraction or limit set: free the oldest cached blocks above this share")

typedef enum hbm_config_option {
#define HBM_CONFIG_ENUM_(field, key, hv, fv, acc, doc) HBM_OPT_##field,
    HBM_CONFIG_OPTIONS(HBM_CONFIG_ENUM_)
#undef HBM_CONFIG_ENUM_
    HBM_OPT_COUNT_
} hbm_config_option;

typedef struct hbm_config {
    hbm_allocator_kind allocator;
    hbm_policy policy;
    int preallocate;
    double fraction;
    uint64_t limit;
    uint64_t initial_region;
    int release_on_oom;
    int64_t async_prealloc;
    int report_top;
    char trace[256];     /* trace file path, "" = do not record */
    int trace_backtrace;
    /* PyTorch's caching allocator (allocator=torch; PYTORCH_CUDA_ALLOC_CONF) */
    int expandable_segments;
    uint64_t max_split_size;        /* bytes; UINT64_MAX = no limit */
    uint64_t max_non_split_rounding; /* bytes (20 MiB) */
    uint32_t roundup_power2_divisions[HBM_TORCH_ROUNDUP_INTERVALS]; /* per power of two from 1 MiB */
    double garbage_collection_threshold; /* 0 = off */
    /* Where each value came from: "default", "policy jax_legacy", "config", or the name
     * of the environment variable that set it. Indexed by hbm_config_option. */
    char source[HBM_OPT_COUNT_][40];
} hbm_config;

typedef const char *(*hbm_getenv_fn)(void *user, const char *name);

/* Defaults of the jax policy: bfc, preallocate, fraction 0.75 of total memory. */
HBM_API void hbm_config_default(hbm_config *c);
/* Defaults, then the environment (getenv). */
HBM_API hbm_status hbm_config_from_env(hbm_config *c);
/* The same with an injectable getenv (tests; NULL fn = getenv). */
HBM_API hbm_status hbm_config_from_env_fn(hbm_config *c, hbm_getenv_fn fn, void *user);
/* Apply "key=value,key=value" on top of c (whitespace around items is ignored). */
HBM_API hbm_status hbm_config_apply(hbm_config *c, const char *text);
/* Apply a PYTORCH_CUDA_ALLOC_CONF value in PyTorch's syntax on top of c
 * ("expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:[256:1,>:8],
 * garbage_collection_threshold:0.6,backend:native|cudaMallocAsync"), with PyTorch's
 * validation (c10/core/AllocatorConfig.cpp); `who` names the source in messages and in
 * c->source. backend selects allocator=torch (native) or cuda_async (cudaMallocAsync). */
HBM_API hbm_status hbm_config_apply_torch(hbm_config *c, const char *text, const char *who);
/* NULL: from the environment; else defaults + text. */
HBM_API hbm_status hbm_config_resolve(const char *text, hbm_config *out);

/* The byte limit this configuration gives on a device with total and free memory: limit=
 * when set (at most total); allocator=bfc under policy=jax with a fraction below 1, XLA's
 * (total x fraction rounded up to 2 MiB, hbm_xla_gpu_limit); else total (jax_legacy: free)
 * x fraction. */
HBM_API uint64_t hbm_config_bytes_limit(const hbm_config *c, uint64_t total, uint64_t free_now);

HBM_API const char *hbm_allocator_kind_str(hbm_allocator_kind k);

/* The resolved configuration with sources, as a table or JSON. */
HBM_API hbm_status hbm_config_write(const hbm_config *c, FILE *f, int json);
/* Every option: key, variables, accepted values and meaning. */
HBM_API hbm_status hbm_config_write_doc(FILE *f);
/* One "note: ..." line per JAX/TF variable in the environment whose value means something
 * other than it seems (XLA_PYTHON_CLIENT_PREALLOCATE=no is "on" to JAX), and one when
 * PYTORCH_CUDA_ALLOC_CONF is set while the allocator is not torch (its keys act only
 * there); returns how many (NULL fn = getenv). */
HBM_API int hbm_config_write_notes(FILE *f, hbm_getenv_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
