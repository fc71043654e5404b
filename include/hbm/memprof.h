/* hbm/memprof.h - the memory profile inside a JAX/XProf profile (*.xplane.pb, or a LOGDIR).
 *
 * The host plane ("/host:CPU") of a profile that jax.profiler.trace writes records every
 * allocation and free of the device allocators as MemoryAllocation / MemoryDeallocation
 * events, with the allocator's state after each as stats. This reads them (no protobuf-c
 * needed: the wire format is walked directly), computes XProf's Memory Profile summary per
 * allocator (xprof/convert/xplane_to_memory_profile.cc: the peak, its step, the
 * allocations active there, the memory capacity), and, when the profile also holds the
 * compiled modules, attributes each allocation live at the peak to the module execution
 * that made it (temp, output) or to the arrays kept between calls.
 *
 *   hbm_memprof *mp;
 *   if (hbm_memprof_open("logdir", &mp)) fprintf(stderr, "%s\n", hbm_last_error());
 *   for (size_t a = 0; a < hbm_memprof_allocator_count(mp); a++) {
 *       const hbm_memprof_summary *s = hbm_memprof_allocator(mp, a);   // figures
 *   }
 *   hbm_memprof_attribute(mp);          // plans the profile's modules (optional)
 *   hbm_memprof_write(mp, -1, 0, 15, 72, 0, stdout);                   // text, all devices
 *   hbm_memprof_close(mp);
 */
#ifndef HBM_MEMPROF_H
#define HBM_MEMPROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hbm/status.h"
#include "hbm/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One MemoryAllocation or MemoryDeallocation event with its stats (TSL's stat names,
 * tsl/profiler/utils/xplane_schema.cc). Strings are "" when the event does not carry
 * them; numbers 0 (data_type, step_id: -1). */
typedef struct hbm_memprof_event {
    int64_t time_ps;            /* the line's timestamp_ns x 1000 + the event's offset_ps */
    int dealloc;                /* 1: MemoryDeallocation */
    uint32_t allocator;         /* index into the allocators */
    uint64_t bytes_allocated;   /* "bytes_allocated": in use after the event (XProf: heap) */
    uint64_t bytes_reserved;    /* "bytes_reserved" (XProf: stack_reserved_bytes) */
    uint64_t bytes_available;   /* "bytes_available" (XProf: free_memory_bytes) */
    uint64_t peak_bytes_in_use; /* "peak_bytes_in_use": the allocator's own peak so far */
    uint64_t requested_bytes;   /* "requested_bytes" */
    uint64_t allocation_bytes;  /* "allocation_bytes": the block handed out */
    uint64_t addr;              /* "addr" */
    double fragmentation;       /* "fragmentation" */
    int64_t step_id;            /* "group_id", else XProf's fix (the previous step + 1) */
    int64_t data_type;          /* "data_type" (TensorFlow's DataType enum), -1 if absent */
    int64_t id;                 /* "id" (TSL's kStepId; XProf reads group_id for the step) */
    const char *tf_op;          /* "tf_op" */
    const char *region_type;    /* "region_type" */
    const char *tensor_shape;   /* "shape" (TSL's kTensorShapes) */
} hbm_memprof_event;

/* How sure an attribution is. */
typedef enum hbm_memprof_sure {
    HBM_MEMPROF_UNKNOWN = 0, /* nothing matched */
    HBM_MEMPROF_LIKELY,      /* one of size or time matched, or several buffers fit */
    HBM_MEMPROF_SURE         /* time and size both matched one buffer of one module */
} hbm_memprof_sure;

/* One allocation live at the peak (XProf's active allocations), with its attribution. */
typedef struct hbm_memprof_active {
    size_t event;           /* index of its MemoryAllocation event */
    int64_t program_id;     /* the module whose execution made it, -1 none */
    const char *module;     /* its name as the profile lists it ("jit_f(3)"), "" none */
    const char *kind;       /* "temp", "output", "parameter" (of the running module: made
                             * earlier, of one of its parameters' size), "arrays kept between
                             * calls", "" not attributed */
    const char *shape;      /* the module buffer's shape where matched, else the event's */
    const char *why;        /* what matched, in words */
    hbm_memprof_sure sure;
    int current;            /* made by the execution running at the peak */
} hbm_memprof_active;

/* Per allocator: XProf's MemoryProfileSummary, the event counts and hbm's figures. */
typedef struct hbm_memprof_summary {
    const char *allocator;          /* "GPU_0_bfc" (or the device ordinal) */
    int device_index;               /* N of GPU_N / TPU_N in its name, else its position */
    size_t n_events, n_allocations, n_deallocations;
    size_t first_event;             /* its events, time order: hbm_memprof_events + index[] */
    uint64_t max_bytes_allocated;   /* the largest bytes_allocated stat */
    uint64_t max_peak_bytes_in_use; /* the largest peak_bytes_in_use stat */
    uint64_t peak_bytes_usage_lifetime; /* XProf: the last event's peak_bytes_in_use */
    /* XProf's peak_stats: the last event (in the file's order) whose reserved + allocated
     * reaches the highest value seen */
    uint64_t peak_bytes_in_use;     /* reserved + allocated there (XProf's peak heap usage) */
    uint64_t peak_allocated, peak_reserved, peak_available;
    double peak_fragmentation;
    int64_t peak_time_ps;           /* absolute */
    int64_t peak_offset_ps;         /* from the allocator's first event */
    size_t peak_event;              /* index into the events */
    int64_t peak_step;              /* XProf's step of the peak */
    uint64_t memory_capacity;       /* reserved + allocated + available at the peak */
    uint64_t unmapped_bytes;        /* in use at the peak by allocations outside the peak
                                     * step's events (made before the profile began or in
                                     * an earlier step): XProf's "unused preallocated device
                                     * memory" row */
    uint64_t held_before_bytes;     /* in use before the allocator's first event */
    int64_t first_time_ps, last_time_ps;
    hbm_memprof_active *active;     /* live at the peak, largest first (XProf's order) */
    size_t n_active;
    /* attribution (hbm_memprof_attribute) */
    int attributed;
    int64_t running_program_id;     /* the module executing at the peak, -1 none */
    const char *running_module;
    uint64_t running_temp_bytes, running_output_bytes; /* its plan's figures */
    uint64_t running_argument_bytes;
    uint64_t current_bytes;         /* of the active allocations: made by that execution */
    uint64_t running_param_bytes;   /* made earlier, of a size of one of its parameters each */
    uint64_t earlier_bytes;         /* made earlier by module executions, the rest */
    uint64_t kept_bytes;            /* made in the profile by no module (arrays kept between calls) */
    uint64_t max_bytes_reserved;    /* the largest bytes_reserved stat (the reserved timeline's max) */
} hbm_memprof_summary;

typedef struct hbm_memprof hbm_memprof;

/* Read a profile directory or *.xplane.pb. A profile without memory events opens fine with
 * 0 allocators (hbm_memprof_note says what it holds instead). A damaged memory event is
 * HBM_ERR_PARSE naming the event (its allocator, position and time) and the stat. */
HBM_API hbm_status hbm_memprof_open(const char *path, hbm_memprof **out);
HBM_API hbm_status hbm_memprof_open_mem(const void *data, size_t len, const char *name, hbm_memprof **out);
HBM_API void hbm_memprof_close(hbm_memprof *mp);
HBM_API const char *hbm_memprof_path(const hbm_memprof *mp);
/* Allocators, in the order XProf lists them (by name). */
HBM_API size_t hbm_memprof_allocator_count(const hbm_memprof *mp);
HBM_API const hbm_memprof_summary *hbm_memprof_allocator(const hbm_memprof *mp, size_t i);
/* The allocator of device index d, or -1. */
HBM_API int hbm_memprof_find_device(const hbm_memprof *mp, int d);
/* Every event, each allocator's in time order (summary.first_event, n_events). */
HBM_API const hbm_memprof_event *hbm_memprof_events(const hbm_memprof *mp, size_t *n);
/* Module events seen (launches on the host plane, kernels on the device planes: events
 * with a program_id stat); read by hbm_memprof_attribute, 0 before. */
HBM_API size_t hbm_memprof_execution_count(const hbm_memprof *mp);
/* Attribute the allocations live at each peak: plans the profile's modules (hbm/proto.h)
 * and matches sizes and times. HBM_OK with nothing attributed when the profile holds no
 * modules (the kinds stay "" and sure UNKNOWN). */
HBM_API hbm_status hbm_memprof_attribute(hbm_memprof *mp);
/* The memory profile as text or JSON. device: an allocator's device index, -1 all (several:
 * one table of all, then each). top: allocations listed; width: sparkline columns (0: a column per event); ascii:
 * no Unicode blocks. HBM_ERR_INVALID for a device the profile does not hold. */
HBM_API hbm_status hbm_memprof_write(const hbm_memprof *mp, int device, int json, size_t top, int width, int ascii,
                                     FILE *f);
/* The memory profile as one self-contained HTML page (no network): per allocator (device),
 * XProf's figures, the timeline of in use and reserved, and every allocation live at the
 * peak with its attribution (attribute first). device as for hbm_memprof_write. */
HBM_API hbm_status hbm_memprof_html(const hbm_memprof *mp, int device, FILE *f);
/* Allocator i's events as an hbm trace (alloc/free with addresses, sizes asked and
 * handed out; the bytes in use before its first event as one block live from the start),
 * for view --html, replay, diff and export. */
HBM_API hbm_status hbm_memprof_trace(const hbm_memprof *mp, size_t i, hbm_trace **out);

#ifdef __cplusplus
}
#endif
#endif
