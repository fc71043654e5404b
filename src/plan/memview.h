/* src/plan/memview.h - XProf's Memory Viewer model of a plan (memview.c), for the JSON the
 * HTML page reads (plan_view.h) and the tests. */
#ifndef HBM_PLAN_MEMVIEW_H
#define HBM_PLAN_MEMVIEW_H

#include "plan/plan_internal.h"
#include "plan/plan_view.h"

typedef struct hbmi_memview_space {
    int64_t color;            /* memory space S(n) */
    uint64_t total;           /* all its allocations (thread-local left out) */
    uint64_t indefinite;      /* parameters, constants, maybe-live-out */
    uint64_t arguments;       /* entry parameters */
    uint64_t peak, peak_unpadded; /* heap size at the peak, and unpadded heap size there */
    int64_t peak_at;          /* first step of the peak */
    size_t steps;
    uint64_t *heap, *unpadded; /* per step */
    size_t *objs, n_objs;     /* spans (p->spans indices) at the peak, >= small, program order */
    uint64_t small_bytes;     /* spans at the peak under the small size, grouped */
    size_t n_small;
} hbmi_memview_space;

typedef struct hbmi_memview {
    hbmi_memview_space *spaces; /* device (0) first, by color */
    size_t n_spaces;
    uint64_t small;
} hbmi_memview;

/* What the module says about a span's representative value. */
typedef struct hbmi_memview_buf {
    char instruction[320]; /* name, with the shape index of a tuple element ("fusion.3{1}") */
    char op_name[1024], source_file[1024]; /* unescaped */
    int source_line;
    char shape[512];  /* with layout, as the module writes it */
    char opcode[64];  /* XLA label */
} hbmi_memview_buf;

hbm_status hbmi_memview_build(const hbm_plan *p, uint64_t small, hbmi_memview *v);
void hbmi_memview_free(hbmi_memview *v);
void hbmi_memview_describe(const hbm_plan *p, const hbmi_span *s, hbmi_memview_buf *o);
const char *hbmi_memview_alloc_type(const hbm_plan *p, const hbmi_span *s);
const char *hbmi_memview_space_name(int64_t color, char buf[48]);
/* the objects at the peak in program order (by 0), by size (1) or by padding (2): a copy */
hbm_status hbmi_memview_sorted(const hbm_plan *p, const hbmi_memview_space *sp, int by, size_t **out);

#endif
