/* src/plan/plan_internal.h - the state of a plan, shared by assign.c (XLA's buffer
 * assignment) and report.c (text, JSON, explanation). */
#ifndef HBM_PLAN_INTERNAL_H
#define HBM_PLAN_INTERNAL_H

#include "hbm/plan.h"
#include "hlo/dataflow.h"
#include "plan/plan_fit.h"

/* How the plan knows its backend. */
typedef enum hbmi_backend_evidence {
    HBMI_EVIDENCE_NONE = 0,  /* nothing told: GPU assumed */
    HBMI_EVIDENCE_OPTION,    /* the caller's option */
    HBMI_EVIDENCE_FILE_NAME, /* the dump's file name */
    HBMI_EVIDENCE_CONTENT    /* the module's content, or a profile's devices */
} hbmi_backend_evidence;

/* Where the plan's alignment came from. */
typedef enum hbmi_alignment_from {
    HBMI_ALIGN_BACKEND = 0, /* the backend's default */
    HBMI_ALIGN_OPTION,      /* the caller's option */
    HBMI_ALIGN_XLA,         /* XLA's own assignment in the file */
    HBMI_ALIGN_TEXT         /* the text's print form (operands "%x#N") */
} hbmi_alignment_from;

typedef struct hbmi_alloc {
    uint64_t size;
    int64_t param_no;  /* -1 if not an entry parameter */
    uint8_t param_aliased, constant, tuple, live_out, heap, thread_local;
    int64_t color;     /* memory space S(n) of its values: 0 device, 5 host (HBMI_HOST_SPACE) */
    uint32_t n_values, cap_values;
    uint32_t *values;  /* value ids */
    uint64_t *offsets;
    uint32_t n_peak, cap_peak;
    uint32_t *peak;    /* PeakMemoryLogicalBuffers: value ids */
    /* live ranges of the assigned values sorted by start, to test interference fast */
    uint32_t n_iv, cap_iv;
    struct hbmi_iv { int64_t start, end; uint32_t value; } *iv;
    int64_t max_len;
    uint32_t no_range; /* assigned values without a live range (interfere with all) */
} hbmi_alloc;

/* Bytes of one allocation over a stretch of the schedule: an indefinite allocation (parameter,
 * constant, maybe-live-out) over the whole run, or the values of a temp allocation at one
 * offset whose live ranges overlap, merged (in-place updates, aliases, colocated values). */
typedef struct hbmi_span {
    int64_t s, e;          /* [s, e) in schedule steps */
    uint64_t size;         /* the allocation's size (indefinite), or the largest value's */
    uint64_t offset;       /* within the allocation */
    uint64_t unpadded;     /* size less the padding of the representative value's tiles */
    uint32_t alloc, value; /* allocation index; representative (largest) value or UINT32_MAX */
    uint8_t indefinite;
    int64_t color;         /* memory space */
} hbmi_span;

struct hbm_plan {
    hbm_hlo_module *m;
    hbmi_df *df;
    hbm_plan_options opt;
    hbmi_alloc *allocs;
    uint32_t n_allocs, cap_allocs;
    uint32_t *value_alloc; /* per value: allocation index or UINT32_MAX */
    uint64_t *value_offset;
    hbm_plan_stats stats;
    hbm_timeline *tl;      /* the device spans, one buffer each (hbm_plan_timeline) */
    hbmi_span *spans;      /* the plan's memory over the schedule, by allocation and offset */
    size_t n_spans;
    uint64_t temp_live_peak; /* most bytes live at one step in the device temp allocations */
    hbmi_arena strings;
    /* XLA's peak buffer ranking, computed for up to 64 */
    hbm_plan_buffer peak[64];
    size_t n_peak;
    uint64_t temp_heap_size, temp_heap_live; /* heap simulator result and its peak */
    hbm_timeline *heap_tl;   /* the largest heap simulation's input, for repacking (ids:
                                colocated values share one) */
    uint64_t heap_tl_size;
    hbmi_backend_evidence backend_evidence;
    hbmi_alignment_from alignment_from;
};

#define HBMI_HOST_SPACE 5
/* XLA:TPU: a device temp allocation of tuple tables and scalar work only, which its
 * memory_analysis() does not count (assign.c, tpu_temp_bytes) */
#define HBMI_TPU_UNCOUNTED_SPACE (-1)

static inline int hbmi_alloc_is_temp(const hbmi_alloc *a) {
    return a->param_no < 0 && !a->live_out && !a->constant && !a->thread_local;
}

/* Bytes of value v that only pad its layout's tiles (TPU T(8,128)). */
uint64_t hbmi_plan_value_padding(const hbmi_df *df, uint32_t v);

/* The label of an async-start's wrapped op (its {1} output). */
void hbmi_plan_wrapped_label(const hbm_hlo_module *m, const hbmi_instr *in, char *buf, size_t cap);
/* Node k of in's shape as the module's text writes it, layout included ("f32[8,128]{1,0:T(8,128)}"). */
void hbmi_plan_shape_text(const hbm_hlo_module *m, const hbmi_instr *in, uint32_t k, char *buf, size_t cap);

/* Printable label of a value's defining instruction (XLA's HloOpcodeString). */
const char *hbmi_plan_label(const hbmi_instr *in, char *buf, size_t cap);

#endif
