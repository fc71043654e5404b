/* hbm/alloc.h - device-memory allocators.
 *
 * An allocator hands out blocks of a device's memory under a policy:
 *   bfc       XLA's best-fit-with-coalescing: preallocate fraction x total, or grow by
 *             regions (2 MiB, doubling) when XLA_PYTHON_CLIENT_PREALLOCATE=false
 *   platform  exact on-demand allocation from the device; frees return memory at once
 *   cuda_async  CUDA's stream-ordered pool (cuMemAllocFromPoolAsync) on cuda: devices, a
 *             model of it on sim:/host: devices (replay): frees are reusable at once on
 *             their stream, on other streams after a synchronization
 *   vmm       "expandable segments": one large virtual range, 2 MiB physical pages mapped
 *             on demand (cuMemCreate/cuMemMap) and unmapped on trim or memory pressure
 * configured from a "key=value,..." string or, when config is NULL, from the environment
 * variables JAX/TensorFlow users already set (see hbm/config.h).
 *
 *   hbm_device *dev;  hbm_allocator *a;  uint64_t p;
 *   hbm_device_open("sim:80GiB", &dev);
 *   hbm_allocator_open(dev, "allocator=bfc,fraction=0.6", &a);
 *   hbm_tag t = {.op_name = "matmul", .shape = "f32[1024,1024]"};
 *   if (hbm_alloc(a, 4 << 20, &t, &p) == HBM_ERR_OOM) hbm_oom_report_write(a, stderr);
 *   hbm_free(a, p);
 *   hbm_allocator_close(a);  hbm_device_close(dev);
 *
 * All calls on one allocator are thread-safe; the first thread to call enters without an
 * atomic instruction, and the first call from another thread costs one process-wide memory
 * barrier (Linux membarrier), after which all threads share a spin lock. The allocator
 * never touches device memory: its metadata lives in host memory and grows with the number
 * of blocks, not the pool size.
 */
#ifndef HBM_ALLOC_H
#define HBM_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hbm/config.h"
#include "hbm/device.h"
#include "hbm/status.h"
#include "hbm/tag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbm_allocator hbm_allocator;

/* Statistics, named as XLA's AllocatorStats. X(name, description) */
#define HBM_STATS_FIELDS(X)                                                                  \
    X(num_allocs, "successful allocations since open")                                       \
    X(num_frees, "successful frees since open")                                              \
    X(num_ooms, "allocations that failed for lack of device memory")                         \
    X(bytes_in_use, "bytes in live blocks (after rounding)")                                 \
    X(peak_bytes_in_use, "highest bytes_in_use since open or the last peak reset")           \
    X(largest_alloc_size, "largest single block handed out")                                 \
    X(bytes_limit, "most device memory this allocator may take")                             \
    X(bytes_reserved, "device memory held by the allocator (in use + cached free)")          \
    X(peak_bytes_reserved, "highest bytes_reserved")                                         \
    X(largest_free_block_bytes, "largest block allocatable without asking the device")       \
    X(pool_bytes, "device memory obtained in regions (bfc) or blocks (platform)")            \
    X(peak_pool_bytes, "highest pool_bytes")                                                 \
    X(num_regions, "device regions currently held")                                          \
    X(device_allocs, "raw device allocations made")                                          \
    X(device_frees, "raw device frees made")

#define HBM_STATS_VERSION 1

typedef struct hbm_stats {
    uint32_t version; /* HBM_STATS_VERSION */
    uint32_t reserved_;
#define HBM_STATS_MEMBER_(name, desc) uint64_t name;
    HBM_STATS_FIELDS(HBM_STATS_MEMBER_)
#undef HBM_STATS_MEMBER_
} hbm_stats;

/* XLA's fragmentation metric: (free - largest free block) / free, where free is the
 * reserved memory not in use (bytes_reserved - bytes_in_use); 0 when nothing is free. */
HBM_API double hbm_stats_fragmentation(const hbm_stats *s);

/* Write the stats as "name: value" lines or as one JSON object. */
HBM_API hbm_status hbm_stats_write_text(const hbm_stats *s, FILE *f);
HBM_API hbm_status hbm_stats_write_json(const hbm_stats *s, FILE *f);

HBM_API hbm_status hbm_allocator_open(hbm_device *dev, const char *config, hbm_allocator **out);
HBM_API hbm_status hbm_allocator_open_config(hbm_device *dev, const hbm_config *cfg, hbm_allocator **out);
HBM_API void hbm_allocator_close(hbm_allocator *a);

/* size > 0. On HBM_ERR_OOM the allocator keeps what it needs for hbm_oom_report_write. */
HBM_API hbm_status hbm_alloc(hbm_allocator *a, uint64_t size, const hbm_tag *tag, uint64_t *addr_out);
/* addr must be an address returned by hbm_alloc and not yet freed; anything else
 * (unknown, double free, inside a block) is HBM_ERR_BAD_FREE and changes nothing. */
HBM_API hbm_status hbm_free(hbm_allocator *a, uint64_t addr);

/* --- Streams ---------------------------------------------------------------------------
 * A stream is an opaque 64-bit handle (a CUstream / cudaStream_t cast to an integer; 0 is
 * the default stream). Stream-ordered policies (cuda_async) make a block freed on stream
 * S reusable at once by allocations on S and by other streams only after a
 * synchronization of S; the others ignore streams. hbm_alloc and hbm_free are these
 * calls on stream 0. */
#define HBM_STREAM_DEFAULT 0u
#define HBM_STREAM_ALL UINT64_MAX /* hbm_allocator_sync: every stream (device sync) */
HBM_API hbm_status hbm_alloc_stream(hbm_allocator *a, uint64_t size, const hbm_tag *tag, uint64_t stream,
                                    uint64_t *addr_out);
HBM_API hbm_status hbm_free_stream(hbm_allocator *a, uint64_t addr, uint64_t stream);
/* The host waited for stream (cuStreamSynchronize; HBM_STREAM_ALL: the whole device): the
 * blocks freed on it become reusable by every stream. On a cuda: device this really
 * synchronizes. A no-op for policies without streams. */
HBM_API hbm_status hbm_allocator_sync(hbm_allocator *a, uint64_t stream);

HBM_API hbm_status hbm_stats_get(hbm_allocator *a, hbm_stats *out);
/* Set peak_bytes_in_use, peak_bytes_reserved, peak_pool_bytes to their current values. */
HBM_API hbm_status hbm_stats_reset_peaks(hbm_allocator *a);

/* Validate every invariant of the allocator's state; HBM_ERR_CORRUPT with a message. */
HBM_API hbm_status hbm_check(hbm_allocator *a);

/* Release wholly free device regions back to the device. */
HBM_API hbm_status hbm_allocator_trim(hbm_allocator *a);

HBM_API const char *hbm_allocator_name(const hbm_allocator *a); /* "bfc", "platform", ... */
HBM_API hbm_device *hbm_allocator_device(const hbm_allocator *a);
/* The configuration the allocator was opened with. */
HBM_API const hbm_config *hbm_allocator_config(const hbm_allocator *a);

/* One live or free block, or a device region, as the allocator sees it. */
typedef enum hbm_block_kind { HBM_BLOCK_LIVE, HBM_BLOCK_FREE, HBM_BLOCK_REGION } hbm_block_kind;
typedef struct hbm_block {
    hbm_block_kind kind;
    uint64_t addr;
    uint64_t size;      /* as held (rounded) */
    uint64_t requested; /* as asked (live blocks), else 0 */
    const hbm_tag *tag; /* live blocks with a tag, else NULL; valid during the callback */
    uint64_t seq;       /* allocation sequence number (live blocks) */
} hbm_block;
typedef int (*hbm_block_fn)(void *user, const hbm_block *b); /* nonzero stops the walk */

/* Visit every region, free block and live block in address order of regions. */
HBM_API hbm_status hbm_allocator_walk(hbm_allocator *a, hbm_block_fn fn, void *user);

/* --- OOM report --------------------------------------------------------------------- */

/* Called (without the allocator's lock held) each time an allocation fails for lack of
 * memory; a natural place to call hbm_oom_report_write. NULL removes the handler. */
typedef void (*hbm_oom_fn)(void *user, hbm_allocator *a, uint64_t requested);
HBM_API void hbm_allocator_set_oom_handler(hbm_allocator *a, hbm_oom_fn fn, void *user);

/* Write the report of the most recent failed allocation: XLA's first line
 * "RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes.", the numbers,
 * the top live buffers with their tags, an occupancy map and a diagnosis with the setting
 * to try. HBM_ERR_INVALID if no allocation has failed yet. */
HBM_API hbm_status hbm_oom_report_write(hbm_allocator *a, FILE *f);
/* The same into buf (always NUL-terminated when cap > 0); *len gets the full length. */
HBM_API hbm_status hbm_oom_report_format(hbm_allocator *a, char *buf, size_t cap, size_t *len);

/* Why the most recent allocation failed, and the setting that would have avoided it. */
typedef enum hbm_oom_cause {
    HBM_OOM_CAUSE_NONE,           /* no allocation has failed */
    HBM_OOM_CAUSE_EXCEEDS_DEVICE, /* the request alone is larger than the device */
    HBM_OOM_CAUSE_TOO_BIG,        /* live + request exceed what the device can give */
    HBM_OOM_CAUSE_LIMIT,          /* the framework's fraction/limit binds; the device has room */
    HBM_OOM_CAUSE_DEVICE_SHARED,  /* the pool may grow but others hold the device's memory */
    HBM_OOM_CAUSE_FRAGMENTATION   /* enough free in total, not in one block */
} hbm_oom_cause;

typedef struct hbm_oom_diagnosis {
    hbm_oom_cause cause;
    uint64_t requested, rounded;
    uint64_t must_free;   /* TOO_BIG: bytes that must go */
    char env[128];        /* the setting to try as an environment assignment, or "" */
    char config[128];     /* the same as a config string item, or "" */
} hbm_oom_diagnosis;

HBM_API hbm_status hbm_oom_diagnose(hbm_allocator *a, hbm_oom_diagnosis *out);

HBM_API const char *hbm_oom_cause_str(hbm_oom_cause c);

/* --- Writing your own policy or adaptor ------------------------------------------------
 * A policy is a vtable over an opaque self. The wrapper (hbm_allocator) serializes every
 * call with its own lock, interns tags (tag_id, stable for the allocator's life, 0 = none)
 * and keeps the OOM record; policies only keep blocks and stats. */
typedef struct hbm_allocator_ops {
    const char *name;
    hbm_status (*alloc)(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id,
                        uint64_t *addr_out);
    hbm_status (*free)(void *self, uint64_t addr);
    void (*stats)(void *self, hbm_stats *out);
    void (*reset_peaks)(void *self);
    hbm_status (*check)(void *self);
    /* Visit regions, free and live blocks; b->tag is ignored, tag_id is the live block's. */
    hbm_status (*walk)(void *self, int (*fn)(void *user, const hbm_block *b, uint32_t tag_id),
                       void *user);
    hbm_status (*trim)(void *self);   /* may be NULL */
    uint64_t (*rounded_size)(void *self, uint64_t size); /* size as held; NULL = as asked */
    void (*destroy)(void *self);
    /* Optional, for stream-ordered policies (NULL: alloc/free, and sync does nothing). */
    hbm_status (*alloc_stream)(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id,
                               uint64_t stream, uint64_t *addr_out);
    hbm_status (*free_stream)(void *self, uint64_t addr, uint64_t stream);
    hbm_status (*sync)(void *self, uint64_t stream);
} hbm_allocator_ops;

/* Wrap a policy into an allocator handle. On success the handle owns self. */
HBM_API hbm_status hbm_allocator_wrap(const hbm_allocator_ops *ops, void *self, hbm_device *dev,
                                      const hbm_config *cfg, hbm_allocator **out);

/* The interned tag of a live block (NULL for tag_id 0 or unknown). */
HBM_API const hbm_tag *hbm_allocator_tag(hbm_allocator *a, uint32_t tag_id);

#ifdef __cplusplus
}
#endif
#endif
