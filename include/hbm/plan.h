/* hbm/plan.h - predict XLA's device memory from a compiled HLO module, before anything runs.
 *
 * hbm_plan_run() reproduces XLA's buffer assignment for the GPU backend: dataflow and
 * aliasing (tuples, bitcasts, while/call/conditional, donated parameters, in-place custom
 * calls, async pairs), one allocation per entry parameter, constant and live-out buffer,
 * operand-buffer reuse, and the temp buffers packed by XLA's heap simulator (best fit,
 * spatial and temporal orders, the smaller wins), all temp allocations combined into one.
 * The numbers are those of JAX's compiled.memory_analysis(); the report is XLA's
 * "BufferAssignment OOM Debugging" text followed by hbm's explanation.
 *
 *   hbm_hlo_module *m;  hbm_plan *p;  hbm_plan_stats st;
 *   hbm_hlo_parse_file("svd.hlo", &m);
 *   hbm_plan_run(m, NULL, &p);
 *   hbm_plan_get_stats(p, &st);          // st.temp_size_in_bytes, ...
 *   hbm_plan_report(p, stdout, 15);      // XLA's stats block + peak buffers
 *   hbm_plan_free(p);  hbm_hlo_module_free(m);
 */
#ifndef HBM_PLAN_H
#define HBM_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hbm/device_models.h" /* the known devices, for this header's readers too */
#include "hbm/hlo.h"
#include "hbm/pack.h"
#include "hbm/status.h"
#include "hbm/tag.h"
#include "hbm/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbm_plan hbm_plan;

/* Whose rules: XLA's GPU, CPU or TPU compiler. AUTO reads it from the module (file name,
 * custom-call targets, tiled layouts, backend configs); GPU when nothing says otherwise. */
typedef enum hbm_backend { HBM_BACKEND_AUTO = 0, HBM_BACKEND_GPU, HBM_BACKEND_CPU, HBM_BACKEND_TPU } hbm_backend;
HBM_API const char *hbm_backend_str(hbm_backend b); /* "gpu", "cpu", "tpu", "auto" */
/* "gpu"/"cpu"/"tpu"/"auto" -> *out; HBM_ERR_INVALID naming the value otherwise */
HBM_API hbm_status hbm_backend_parse(const char *s, hbm_backend *out);

/* The largest buffer alignment a plan takes: XLA aligns buffers to tens or hundreds of bytes
 * (GPU 128 or 256, CPU 64, TPU 128); past 1 GiB an "alignment" is no buffer alignment, and
 * offsets rounded to it leave 64 bits (2^63 rounded every size to 0). */
#define HBM_PLAN_ALIGNMENT_MAX ((uint64_t)1 << 30)

typedef struct hbm_plan_options {
    uint64_t alignment;    /* buffer alignment, a power of two up to HBM_PLAN_ALIGNMENT_MAX;
                            * 0 = the backend's (GPU 128, CPU 64, TPU 128) */
    unsigned pointer_size; /* bytes per tuple element; 0 = 8 (XLA:TPU: 4) */
    hbm_backend backend;   /* AUTO: detected */
    unsigned tuple_align;  /* a tuple's table rounds up to this many bytes; 0 = the backend's
                            * (XLA:TPU: 512 on v4 and v5e, 32 on v5p and v6e; else none) */
    unsigned heap;         /* how the device temp heap is packed: HBM_PLAN_HEAP_*; 0 = the
                            * backend's (XLA:TPU sequential, docs/tpu.md; else best of) */
} hbm_plan_options;

/* hbm_plan_options.heap */
#define HBM_PLAN_HEAP_DEFAULT 0u
/* XLA's GlobalDecreasingSizeBestFitHeap, spatial and temporal, the smaller (GPU, CPU) */
#define HBM_PLAN_HEAP_BEST_OF 1u
/* the values in the order the heap simulation allocates them, each put in the smallest free
 * chunk that holds it, else on top of the heap; freed chunks merge with their neighbours
 * (XLA:TPU, measured) */
#define HBM_PLAN_HEAP_SEQUENTIAL 2u

HBM_API void hbm_plan_options_default(hbm_plan_options *o);
/* The rules of the chip a known device name ('hbm devices') stands for: a TPU sets the TPU
 * backend and its generation's tuple rounding; other devices change nothing. */
HBM_API hbm_status hbm_plan_options_for_device(hbm_plan_options *o, const char *device);

/* Plan module m (not modified in any way a caller can see; it must outlive the plan). */
HBM_API hbm_status hbm_plan_run(hbm_hlo_module *m, const hbm_plan_options *o, hbm_plan **out);
HBM_API void hbm_plan_free(hbm_plan *p);

/* The numbers, with JAX's memory_analysis() names where they exist. */
typedef struct hbm_plan_stats {
    uint64_t argument_size_in_bytes; /* entry parameter allocations */
    uint64_t output_size_in_bytes;   /* maybe_live_out allocations */
    uint64_t alias_size_in_bytes;    /* parameters donated to outputs (input_output_alias) */
    uint64_t temp_size_in_bytes;     /* the combined preallocated temp allocation */
    uint64_t constant_size_in_bytes;
    uint64_t total_allocation_bytes; /* sum of all allocations (XLA's "total allocation") */
    int64_t temp_fragmentation_bytes;  /* temp heap size - its peak of live bytes */
    int64_t total_fragmentation_bytes; /* total allocation - whole-module minimum; either is
                                          negative where XLA states none (its minimum counts a
                                          buffer shared by several values once per value) */
    uint64_t peak_bytes;             /* device bytes the executable needs:
                                        arguments + outputs - aliased + temp + constants */
    int64_t peak_step;               /* schedule step where the most bytes are live */
    uint64_t peak_live_bytes;        /* bytes live at that step (all categories) */
    size_t n_steps;                  /* length of the (flattened) schedule */
    size_t n_allocations;
    uint64_t host_argument_size_in_bytes; /* buffers in host memory (layout S(5)): not device */
    uint64_t host_output_size_in_bytes;   /* memory, left out of every figure above */
    uint64_t host_alias_size_in_bytes;
    uint64_t host_temp_size_in_bytes;
    hbm_backend backend;             /* the rules applied (detected or given) */
    uint64_t padding_bytes;          /* of peak_bytes, what only pads tiled layouts (TPU T(8,128)):
                                        the padding of each parameter, output and constant
                                        allocation and of the temp buffers live at the heap's peak */
    int estimate;                    /* the module was not scheduled by XLA (no is_scheduled=true):
                                        the figures are hbm's estimate over XLA's post order */
    uint64_t thread_local_size_in_bytes; /* reducer/comparator scalars: in XLA's "Total bytes
                                            used" (total_allocation_bytes), not in memory_analysis() */
    uint64_t other_space_size_in_bytes; /* allocations in memory spaces other than device memory
                                           S(0) and host S(5) (TPU S(1) ...): not HBM, left out of
                                           every device figure above but total_allocation_bytes */
} hbm_plan_stats;

HBM_API hbm_status hbm_plan_get_stats(const hbm_plan *p, hbm_plan_stats *out);

/* One of XLA's "Peak buffers", largest first. Strings stay valid while p lives. */
typedef struct hbm_plan_buffer {
    uint64_t size;
    const char *label;       /* XLA label: the defining opcode ("custom-call") */
    const char *shape;       /* "f32[300000,50]" */
    const char *instruction; /* defining instruction's name */
    const char *op_name;     /* metadata, "" if none */
    const char *source_file;
    int source_line;
    hbm_category category;   /* parameter, constant, output, temp */
    int param_number;        /* entry parameter number, -1 otherwise */
    uint64_t padding;        /* bytes of size that only pad the layout's tiles (TPU) */
} hbm_plan_buffer;

/* Up to max peak buffers as XLA ranks them (15 in XLA's report). Returns the count. */
HBM_API size_t hbm_plan_peak_buffers(const hbm_plan *p, hbm_plan_buffer *out, size_t max);

/* The plan's device memory as a timeline (clock "step" = position in the flattened schedule),
 * as XLA lays it out: each parameter, constant and maybe-live-out allocation is one buffer
 * over the whole run (named by its largest value); in a temp allocation, the values at one
 * offset whose live ranges overlap (in-place updates, aliases, colocated values) are one
 * buffer at their largest size, named by the largest. Offsets are pinned (HBM_TL_PINNED):
 * the device allocations laid end to end in XLA's allocation order, each aligned, so
 * hbm_timeline_verify() holds and hbm_timeline_peak() is stats.peak_live_bytes at
 * stats.peak_step, never above stats.peak_bytes. Only device memory (S(0)) is in it:
 * host-memory (S(5)), other spaces' (TPU S(1) ...) and thread-local allocations are not. Owned by p; built on the first call (not thread-safe until then); NULL if
 * host memory runs out. */
HBM_API const hbm_timeline *hbm_plan_timeline(const hbm_plan *p);

/* What-if: pack the buffers of the plan's temp heap (XLA's heap simulation input,
 * colocated values merged into one buffer) with another algorithm (hbm/pack.h). r->extent
 * is the heap the algorithm needs; compare with the heap_bytes XLA's simulator needed.
 * HBM_OK with r->extent = 0 when the plan has no temp heap. */
HBM_API hbm_status hbm_plan_pack_temp(const hbm_plan *p, const hbm_pack_options *o, hbm_pack_result *r, uint64_t *heap_bytes);
/* That what-if as `hbm plan --pack ALGO` prints it: text (a blank line, then lines of at
 * most 100 columns: the repacked heap, XLA's, the bound, the waste saved) or the JSON
 * object's members after "pack": {"algorithm", "xla_heap_bytes", "heap_bytes",
 * "lower_bound_bytes", "proven", "seconds"}. */
HBM_API hbm_status hbm_plan_pack_text(const hbm_pack_result *r, hbm_pack_algo algo, uint64_t heap_bytes, FILE *f);
HBM_API hbm_status hbm_plan_pack_json(const hbm_pack_result *r, hbm_pack_algo algo, uint64_t heap_bytes, FILE *f);

/* Name of the instruction at schedule step t ("" if out of range). */
HBM_API const char *hbm_plan_step_name(const hbm_plan *p, int64_t t);
/* Where step t runs: its computation and, outward, the instructions that call it up to the
 * entry ("%body (while body of while.5) < %main"). Per-thread buffer, "" if out of range. */
HBM_API const char *hbm_plan_step_where(const hbm_plan *p, int64_t t);

/* --- XProf's Memory Viewer, offline -------------------------------------------------------
 * What openxla/xprof's Memory Viewer shows for the module, with its definitions, one heap per
 * memory space (device S(0), host S(5), others): the overview (peak heap with and without
 * fragmentation, padding overhead, argument size, HLO temporaries, fragmentation), the heap
 * and unpadded heap size at each schedule step (x-axis: program order, not time), and the
 * buffers at the peak (parameters, constants and outputs for the whole run, then the temp
 * buffers live there) with size, unpadded size, shape with layout, allocation type, op_name
 * and source line; buffers under small_buffer_size are grouped as "small". The figures are
 * the plan's: the device space's total is hbm_plan_stats.peak_bytes, its peak heap the plan's
 * peak_live_bytes at peak_step, and the buffers at the peak those of hbm_plan_timeline(). */
typedef struct hbm_plan_view_options {
    int width;                  /* chart columns in the terminal (default 72; 0: a column per step, at most 1000) */
    int top;                    /* buffers listed per table (default 15) */
    int ascii;                  /* ASCII chart instead of Unicode blocks */
    int64_t memory_space;       /* only S(n); -1 (default) every space */
    uint64_t small_buffer_size; /* grouped as "small" under this (default 16 KiB, XProf's) */
    unsigned flags;             /* 1: list "by padding size" even without padding */
    const char *title;          /* HTML page title (default: the module's name) */
} hbm_plan_view_options;

HBM_API void hbm_plan_view_options_default(hbm_plan_view_options *o);
/* Terminal form, at most 100 columns. */
HBM_API hbm_status hbm_plan_view_text(const hbm_plan *p, const hbm_plan_view_options *o, FILE *f);
/* The same figures as JSON: per memory space the overview, peak_step, peak_instruction and
 * "max_heap" (the buffers at the peak, program order). */
HBM_API hbm_status hbm_plan_view_json(const hbm_plan *p, const hbm_plan_view_options *o, FILE *f);
/* One self-contained HTML page (no network): the overview, "Memory Allocation Size vs.
 * Program Order" (a buffer's lifetime drawn on hover), the ops at the peak by program order,
 * size and padding with each buffer's card, the buffer allocation timeline (offset against
 * lifetime) and a memory-space selector. */
HBM_API hbm_status hbm_plan_view_html(const hbm_plan *p, const hbm_plan_view_options *o, FILE *f);

/* XLA's text: the "BufferAssignment stats:" block and up to top peak buffers, under XLA's
 * heading "BufferAssignment OOM Debugging." when it does not fit a device of capacity bytes
 * of which the framework lets XLA use fraction (XLA prints it only then), and a neutral
 * heading when it fits or capacity is 0. hbm_plan_report: no device (the neutral heading). */
HBM_API hbm_status hbm_plan_report_target(const hbm_plan *p, FILE *f, size_t top, uint64_t capacity,
                                          double fraction);
HBM_API hbm_status hbm_plan_report(const hbm_plan *p, FILE *f, size_t top);

/* XLA:TPU's compile-time OOM text for a device of capacity bytes of HBM ("Ran out of memory
 * in memory space hbm. Used X of Y hbm. ...", openxla/xla docs/errors/error_1000.md), HBM
 * being memory space 0 only; the runtime's reserved and the compiler's scoped bytes are not
 * in the module and are printed as unknown. Up to top largest program allocations. */
HBM_API hbm_status hbm_plan_report_tpu(const hbm_plan *p, FILE *f, uint64_t capacity, size_t top);
/* Whether a plan fits a device of capacity bytes whose framework lets XLA use fraction of
 * it (0 or 1: all of it): the verdict that hbm plan's text, its JSON and its exit status
 * give. *limit (may be NULL): the bytes XLA may use. capacity 0: HBM_VERDICT_NONE. */
typedef enum hbm_plan_verdict {
    HBM_VERDICT_NONE = 0,             /* no device */
    HBM_VERDICT_FITS,                 /* peak <= limit */
    HBM_VERDICT_FITS_PHYSICALLY_ONLY, /* limit < peak <= capacity: out of memory as configured */
    HBM_VERDICT_DOES_NOT_FIT,         /* capacity < peak */
} hbm_plan_verdict;
HBM_API hbm_plan_verdict hbm_plan_verdict_get(const hbm_plan *p, uint64_t capacity, double fraction, uint64_t *limit);
/* fraction HBM_FRACTION_BACKEND (what `--capacity` alone gives): the framework's default for
 * the module's backend, which hbm_plan_fraction resolves: JAX's XLA_PYTHON_CLIENT_MEM_FRACTION
 * default 0.75 on XLA:GPU (and with no plan); the whole capacity on XLA:TPU, whose runtime
 * reads no such variable, and on XLA:CPU. Any other fraction is returned as given. Every
 * call above that takes a fraction accepts HBM_FRACTION_BACKEND. */
#define HBM_FRACTION_BACKEND (-1.0)
HBM_API double hbm_plan_fraction(const hbm_plan *p, double fraction);
/* The JSON's words: "fits", "fits_physically_only", "does_not_fit"; "" for none. */
HBM_API const char *hbm_plan_verdict_str(hbm_plan_verdict v);

/* hbm's explanation: where the peak is in the schedule, which instructions and source
 * lines own it, and with capacity > 0 a verdict for a device of that many bytes whose
 * framework limits usable memory to fraction (0 = no framework limit, e.g. JAX's 0.75). */
HBM_API hbm_status hbm_plan_explain(const hbm_plan *p, FILE *f, uint64_t capacity, double fraction,
                                    const char *device_name, size_t top);

/* JSON: the memory_analysis() keys, peak_bytes, fragmentation and peak_buffers. */
HBM_API hbm_status hbm_plan_json(const hbm_plan *p, FILE *f, size_t top, uint64_t capacity, double fraction);

#ifdef __cplusplus
}
#endif
#endif
