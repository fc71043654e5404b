/* src/plan/plan_fit.h - what hbm fit reads of a computed plan: the module and its dataflow the
 * plan was computed over, where a value was placed, and the alignment XLA's own assignment
 * used. fit includes this, never plan_internal.h. */
#ifndef HBM_PLAN_FIT_H
#define HBM_PLAN_FIT_H

#include "hbm/plan.h"
#include "hlo/dataflow.h"

/* Whether the backend's runtime reads a memory fraction: XLA:GPU's does
 * (XLA_PYTHON_CLIENT_MEM_FRACTION), XLA:TPU's and XLA:CPU's read none. hbm_plan_fraction's
 * default and every fraction advised (plan's verdict, fit's setting) follow it. */
int hbmi_backend_reads_fraction(hbm_backend b);

/* The module and its dataflow analysis (values, buffers) the plan was computed over. */
const hbm_hlo_module *hbmi_plan_module(const hbm_plan *p);
const hbmi_df *hbmi_plan_df(const hbm_plan *p);

/* Whether value v lives in a device temp or output allocation: placed, memory space 0, and its
 * allocation holds no entry parameter, constant or thread-local scalar. */
int hbmi_plan_value_in_device_temp(const hbm_plan *p, uint32_t v);

/* The alignment of XLA's own assignment when the plan took it from the module (its
 * BufferAssignment in a dump or profile); 0 when it came from an option, the text's print form
 * or the backend's default. */
uint64_t hbmi_plan_xla_alignment(const hbm_plan *p);

/* HLO text's C-style string escapes undone (\' \" \\ \n), into dst (NUL-terminated). */
void hbmi_plan_unescape(char *dst, size_t cap, const char *src, size_t n);

#endif
