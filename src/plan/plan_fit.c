/* src/plan/plan_fit.c - the accessors of plan_fit.h: what hbm fit reads of a plan. */
#include "plan/plan_internal.h"

const hbm_hlo_module *hbmi_plan_module(const hbm_plan *p) { return p->m; }

const hbmi_df *hbmi_plan_df(const hbm_plan *p) { return p->df; }

int hbmi_plan_value_in_device_temp(const hbm_plan *p, uint32_t v) {
    uint32_t a = p->value_alloc[v];
    if (a == UINT32_MAX) return 0;
    const hbmi_alloc *al = &p->allocs[a];
    /* device memory only: host memory S(5) and other spaces (TPU S(1)) are out of the device figures */
    return al->color == 0 && al->param_no < 0 && !al->constant && !al->thread_local;
}

uint64_t hbmi_plan_xla_alignment(const hbm_plan *p) {
    return p->alignment_from == HBMI_ALIGN_XLA ? p->opt.alignment : 0;
}
