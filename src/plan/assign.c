/* assign.c - XLA's buffer assignment (xla/service/buffer_assignment.cc) over hbm's
 * dataflow: allocations for parameters, constants and live-out buffers, reuse of operand
 * allocations, the heap simulation of the temp buffers (HeapSimulator::RunComputation with
 * operand-buffer sharing, then GlobalDecreasingSizeBestFitHeap spatial and temporal, the
 * smaller wins), CombineTempAllocations, the summary stats and the peak buffers. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan/plan_internal.h"
#include "pack/xla_heap.h"

typedef struct ctx {
    hbm_plan *p;
    hbmi_df *df;
    uint32_t *alloc_indices; /* XLA's allocation_indices */
    uint32_t n_ai;
    size_t cap_ai;
    uint8_t *delayed;        /* per value: assigned by the heap simulation */
    int no_index;            /* after the reuse phase: no interference index needed */
} ctx;

static hbm_status oom(void) { return hbmi_error(HBM_ERR_NOMEM, "plan: out of host memory"); }

static hbmi_instr *VI(const hbmi_df *df, uint32_t v) { return hbmi_df_instr(df, df->values[v].gid); }

/* The memory space (XLA's color) of value v: S(n) in its layout. */
static int64_t value_color(const hbmi_df *df, uint32_t v) {
    const hbmi_shape *sh = hbmi_shape_node(VI(df, v)->shape, df->values[v].node);
    return sh ? sh->memory_space : 0;
}

/* The alignment of buffers in memory space color. XLA:TPU places its device (HBM) temp
 * buffers at multiples of 16 KiB: every offset of a color-0 preallocated-temp value in its
 * buffer-assignment dumps is one (libtpu 0.0.52, v4/v5e/v5p/v6e; docs/tpu.md). An
 * --alignment given by the user holds everywhere. */
#define HBMI_TPU_HBM_ALIGN 16384u
static uint64_t color_alignment(const hbm_plan *p, int64_t color) {
    if (p->opt.backend == HBM_BACKEND_TPU && p->alignment_from != HBMI_ALIGN_OPTION && color == 0) return HBMI_TPU_HBM_ALIGN;
    return p->opt.alignment;
}

/* --- allocations ------------------------------------------------------------------------------- */
/* hbmi_grow for the plan's arrays, whose counts and capacities are 32-bit (a plan holds
 * millions of allocations: their records stay small): *cap to at least need, doubled from
 * first. */
static hbm_status grow32(void **arr, uint32_t *cap, size_t need, size_t elem, size_t first) {
    size_t c = *cap;
    if (need > UINT32_MAX || hbmi_grow_from(arr, &c, need, elem, first)) return oom();
    *cap = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
    return HBM_OK;
}
static hbm_status alloc_add_value(ctx *c, hbmi_alloc *a, uint32_t v, uint64_t offset) {
    if (a->n_values == a->cap_values) { /* values and offsets: one capacity */
        uint32_t cv = a->cap_values, co = a->cap_values;
        TRY(grow32((void **)&a->values, &cv, (size_t)a->n_values + 1, sizeof *a->values, 4));
        TRY(grow32((void **)&a->offsets, &co, (size_t)a->n_values + 1, sizeof *a->offsets, 4));
        a->cap_values = cv < co ? cv : co;
    }
    a->values[a->n_values] = v;
    a->offsets[a->n_values++] = offset;
    const hbmi_value *val = &c->df->values[v];
    if (!val->has_range) {
        a->no_range++;
    } else if (!a->heap && !c->no_index) {
        TRY(grow32((void **)&a->iv, &a->cap_iv, (size_t)a->n_iv + 1, sizeof *a->iv, 4));
        uint32_t pos = a->n_iv;
        while (pos && a->iv[pos - 1].start > val->start) pos--;
        memmove(&a->iv[pos + 1], &a->iv[pos], sizeof *a->iv * (a->n_iv - pos));
        a->iv[pos].start = val->start;
        a->iv[pos].end = val->end;
        a->iv[pos].value = v;
        a->n_iv++;
        if (val->end - val->start > a->max_len) a->max_len = val->end - val->start;
    }
    c->p->value_alloc[v] = (uint32_t)(a - c->p->allocs);
    c->p->value_offset[v] = offset;
    return HBM_OK;
}

static hbm_status alloc_add_peak(hbmi_alloc *a, uint32_t v) {
    TRY(grow32((void **)&a->peak, &a->cap_peak, (size_t)a->n_peak + 1, sizeof *a->peak, 4));
    a->peak[a->n_peak++] = v;
    return HBM_OK;
}

static hbm_status new_empty(ctx *c, uint64_t size, hbmi_alloc **out) {
    hbm_plan *p = c->p;
    TRY(grow32((void **)&p->allocs, &p->cap_allocs, (size_t)p->n_allocs + 1, sizeof *p->allocs, 16));
    hbmi_alloc *a = &p->allocs[p->n_allocs++];
    memset(a, 0, sizeof *a);
    a->size = size;
    a->param_no = -1;
    *out = a;
    return HBM_OK;
}

static hbm_status new_alloc(ctx *c, const hbmi_buffer *b, hbmi_alloc **out) {
    hbmi_alloc *a;
    TRY(new_empty(c, b->size, &a));
    a->color = value_color(c->df, b->values[0]);
    for (uint32_t i = 0; i < b->n_values; i++) TRY(alloc_add_value(c, a, b->values[i], 0));
    TRY(alloc_add_peak(a, b->values[0]));
    a->live_out = b->live_out;
    *out = a;
    return HBM_OK;
}

static hbm_status push_ai(ctx *c, uint32_t idx) {
    if (hbmi_grow((void **)&c->alloc_indices, &c->cap_ai, (size_t)c->n_ai + 1, sizeof *c->alloc_indices) != HBM_OK)
        return oom();
    c->alloc_indices[c->n_ai++] = idx;
    return HBM_OK;
}

/* node of value v at position instruction gid */
static uint32_t node_at(const hbmi_df *df, uint32_t v, uint32_t gid) {
    const hbmi_instr *in = hbmi_df_instr(df, gid);
    for (uint32_t k = 0; k < in->shape->nodes; k++) {
        const hbmi_vset *s = &df->vs[in->pos_base + k];
        for (uint32_t t = 0; t < s->n; t++)
            if (hbmi_vset_at(s, t) == v) return k;
    }
    return 0;
}

static int can_share_as_operand(const hbm_plan *p, const hbmi_df *df, uint32_t user_v, uint32_t operand_v) {
    const hbmi_value *u = &df->values[user_v], *o = &df->values[operand_v];
    const hbmi_instr *ui = hbmi_df_instr(df, u->gid);
    (void)p;
    if (ui->op == HOP_COPY || u->wrapped) return 0;
    if (!hbmi_df_is_user_of(df, u->gid, o->end_pos)) return 0;
    return hbmi_df_can_share(df, o->end_pos, node_at(df, operand_v, o->end_pos), u->gid, u->node);
}

static int live_range_interferes(const hbm_plan *p, const hbmi_df *df, uint32_t v1, uint32_t v2) {
    const hbmi_value *a = &df->values[v1], *b = &df->values[v2];
    if (!a->has_range || !b->has_range) return 1;
    if (a->start > b->end || b->start > a->end) return 0;
    if (a->end == b->start) return !can_share_as_operand(p, df, v2, v1);
    if (b->end == a->start) return !can_share_as_operand(p, df, v1, v2);
    return 1;
}

/* Put buffer b into allocation a where XLA's rules allow it: *assigned says whether it did. */
static hbm_status maybe_assign(ctx *c, hbmi_alloc *a, const hbmi_buffer *b, int *assigned) {
    const hbmi_df *df = c->df;
    *assigned = 0;
    if (b->size > a->size) return HBM_OK;
    if (value_color(df, b->values[0]) != a->color) return HBM_OK;
    if ((a->param_no >= 0 && !a->param_aliased) || a->constant) return HBM_OK; /* read-only */
    if (a->tuple) return HBM_OK;                                                 /* not reusable */
    /* pairwise LiveRangeInterferes, looking only at assigned values that can overlap */
    for (uint32_t j = 0; j < b->n_values; j++) {
        uint32_t nv = b->values[j];
        const hbmi_value *v = &df->values[nv];
        if (a->n_values && (a->no_range || !v->has_range)) return HBM_OK;
        /* last interval starting at or before v->end */
        uint32_t lo = 0, hi = a->n_iv;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (a->iv[mid].start <= v->end) lo = mid + 1;
            else hi = mid;
        }
        for (uint32_t i = lo; i-- > 0;) {
            if (a->iv[i].start + a->max_len < v->start) break;
            if (a->iv[i].end < v->start) continue;
            if (live_range_interferes(c->p, df, nv, a->iv[i].value)) return HBM_OK;
        }
        const hbmi_instr *ni = VI(df, nv);
        if (ni->op == HOP_COPY) {
            for (uint32_t i = 0; i < a->n_values; i++) {
                const hbmi_value *av = &df->values[a->values[i]];
                for (uint32_t k = 0; k < av->n_pos; k++)
                    if (hbmi_df_is_user_of(df, v->gid, av->pos[k])) return HBM_OK;
            }
        }
    }
    if (b->live_out && a->size != b->size) return HBM_OK;
    for (uint32_t j = 0; j < b->n_values; j++) TRY(alloc_add_value(c, a, b->values[j], 0));
    if (b->live_out) a->live_out = 1;
    *assigned = 1;
    return HBM_OK;
}

/* BufferAssigner::AssignSingleHloBuffer */
static hbm_status assign_single(ctx *c, uint32_t bi) {
    hbmi_df *df = c->df;
    hbm_plan *p = c->p;
    const hbmi_buffer *b = &df->buffers[bi];
    for (uint32_t i = 0; i < b->n_values; i++) {
        const hbmi_value *v = &df->values[b->values[i]];
        if (v->constant) {
            hbmi_alloc *a;
            TRY(new_alloc(c, b, &a));
            a->constant = 1;
            return HBM_OK;
        }
        if (v->entry_param) {
            hbmi_alloc *a;
            TRY(new_alloc(c, b, &a));
            a->param_no = VI(df, b->values[i])->param_no;
            a->param_aliased =
                (uint8_t)hbmi_param_node_aliased(df->m, a->param_no, v->node, hbmi_df_instr(df, v->gid)->shape);
            if (a->param_aliased) TRY(push_ai(c, (uint32_t)(a - p->allocs)));
            return HBM_OK;
        }
    }
    for (uint32_t i = 0; i < b->n_values; i++) {
        uint32_t vid = b->values[i];
        const hbmi_value *v = &df->values[vid];
        if (v->is_tuple) {
            hbmi_alloc *a;
            TRY(new_alloc(c, b, &a));
            a->tuple = 1;
            return HBM_OK;
        }
        const hbmi_instr *vin = VI(df, vid);
        int top = v->wrapped ? v->node == hbmi_shape_child(vin->shape, 1) : v->node == 0;
        if (top) {
            const hbmi_instr *in = vin;
            uint32_t comp = df->gid_comp[v->gid];
            for (uint32_t k = 0; k < in->n_ops; k++) {
                uint32_t og = df->comp_base[comp] + in->ops[k];
                const hbmi_vset *set = hbmi_df_set(df, og, 0);
                for (uint32_t t = 0; t < set->n; t++) {
                    uint32_t ai = p->value_alloc[hbmi_vset_at(set, t)];
                    if (ai == UINT32_MAX) continue;
                    int done;
                    TRY(maybe_assign(c, &p->allocs[ai], b, &done));
                    if (done) return HBM_OK;
                }
            }
        }
    }
    for (uint32_t k = c->n_ai; k-- > 0;) {
        /* XLA:TPU never puts a temp buffer into an output's allocation, a donated
         * parameter's included (measured, its compiler is not public): a scalar loss
         * "multiply(reduce fusion, constant)" at the root keeps the fusion's 512 bytes in
         * the temp allocation, an offloaded scan's slices stay in HBM temp, and an
         * optimizer step's scalars stay out of the donated parameters' allocations
         * (docs/tpu.md, rule 6) */
        const hbmi_alloc *cand = &p->allocs[c->alloc_indices[k]];
        if (p->opt.backend == HBM_BACKEND_TPU && !b->live_out && cand->live_out) continue;
        int done;
        TRY(maybe_assign(c, &p->allocs[c->alloc_indices[k]], b, &done));
        if (done) return HBM_OK;
    }
    if (!b->live_out) {
        for (uint32_t i = 0; i < b->n_values; i++) c->delayed[b->values[i]] = 1;
        return HBM_OK;
    }
    hbmi_alloc *a;
    TRY(new_alloc(c, b, &a));
    return push_ai(c, (uint32_t)(a - p->allocs));
}

/* --- the heap simulation ------------------------------------------------------------------------- */
typedef enum ev_kind { EV_ALLOC, EV_FREE, EV_SHARE } ev_kind;

typedef struct event {
    uint32_t value;
    uint32_t with; /* EV_SHARE: the value shared with */
    uint8_t kind;  /* ev_kind */
} event;

typedef struct sim {
    event *ev;
    size_t n_ev, cap_ev;
    uint32_t *first_alloc; /* per buffer: first allocated value + 1 */
    uint32_t *group;       /* per value: colocation root value (union-find) */
    uint64_t *gsize;       /* per root: size */
} sim;

static hbm_status emit(sim *s, ev_kind kind, uint32_t v, uint32_t with) {
    if (hbmi_grow((void **)&s->ev, &s->cap_ev, s->n_ev + 1, sizeof *s->ev) != HBM_OK) return oom();
    s->ev[s->n_ev].kind = (uint8_t)kind;
    s->ev[s->n_ev].value = v;
    s->ev[s->n_ev].with = with;
    s->n_ev++;
    return HBM_OK;
}

static uint32_t groot(sim *s, uint32_t v) {
    while (s->group[v] != v) v = s->group[v] = s->group[s->group[v]];
    return v;
}

static _Thread_local const hbmi_df *sort_df;
static int cmp_values_by_range(const void *a, const void *b) {
    const hbmi_value *x = &sort_df->values[*(const uint32_t *)a], *y = &sort_df->values[*(const uint32_t *)b];
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* XLA:TPU's heap puts an all-reduce at its operand's offset when both have one shape (a
 * reduce fusion and the all-reduce of its scalar share 512 bytes in every dump that has
 * them): its backend's sharing hint, not public, answers yes where the generic rule (not
 * elementwise) says no. */
static int tpu_heap_share(const hbm_plan *p, const hbmi_instr *user, const hbmi_instr *operand, uint32_t onode,
                          uint32_t unode) {
    static const char ar[] = "all-reduce";
    if (p->opt.backend != HBM_BACKEND_TPU || user->opcode.n != sizeof ar - 1 || memcmp(user->opcode.p, ar, sizeof ar - 1))
        return 0;
    const hbmi_shape *os = hbmi_shape_node(operand->shape, onode), *us = hbmi_shape_node(user->shape, unode);
    return os && us && os->prim != HBMI_PRIM_TUPLE && hbmi_shape_equal(os, us);
}

/* HeapSimulator::RunComputation for the values with in_set[v]: Alloc/Free/ShareWith events. */
static hbm_status simulate(ctx *c, const uint8_t *in_set, sim *s) {
    hbmi_df *df = c->df;
    uint32_t nv = df->n_values, T = df->n_flat + 1;
    uint32_t *vals = hbmi_malloc(sizeof *vals * (nv + 1));
    uint32_t *def_cnt = hbmi_calloc(T + 1, sizeof *def_cnt), *free_cnt = hbmi_calloc(T + 1, sizeof *free_cnt);
    uint32_t *def_list = hbmi_malloc(sizeof *def_list * (nv + 1)), *free_list = hbmi_malloc(sizeof *free_list * (nv + 1));
    uint8_t *freed_pending = hbmi_calloc(nv + 1, 1);
    int64_t *end = hbmi_malloc(sizeof *end * (nv + 1));
    s->first_alloc = hbmi_calloc(df->n_buffers + 1, sizeof *s->first_alloc);
    s->group = hbmi_malloc(sizeof *s->group * (nv + 1));
    s->gsize = hbmi_malloc(sizeof *s->gsize * (nv + 1));
    hbm_status st = HBM_OK;
    if (!vals || !def_cnt || !free_cnt || !def_list || !free_list || !freed_pending || !end || !s->first_alloc ||
        !s->group || !s->gsize) {
        st = oom();
        goto out;
    }
    uint32_t n = 0;
    for (uint32_t v = 0; v < nv; v++) {
        s->group[v] = v;
        s->gsize[v] = df->buffers[df->values[v].buffer].size;
        end[v] = df->values[v].end;
        if (in_set[v] && df->values[v].has_range && df->values[v].end < (int64_t)T) vals[n++] = v;
    }
    sort_df = df;
    hbmi_qsort(vals, n, sizeof *vals, cmp_values_by_range);
    sort_df = NULL;
    /* buckets by start and end time, in the sorted order */
    for (uint32_t i = 0; i < n; i++) {
        def_cnt[df->values[vals[i]].start + 1]++;
        free_cnt[df->values[vals[i]].end + 1]++;
    }
    for (uint32_t t = 0; t < T; t++) {
        def_cnt[t + 1] += def_cnt[t];
        free_cnt[t + 1] += free_cnt[t];
    }
    {
        uint32_t *dpos = hbmi_malloc(sizeof *dpos * (T + 1)), *fpos = hbmi_malloc(sizeof *fpos * (T + 1));
        if (!dpos || !fpos) {
            hbmi_free(dpos);
            hbmi_free(fpos);
            st = oom();
            goto out;
        }
        memcpy(dpos, def_cnt, sizeof *dpos * (T + 1));
        memcpy(fpos, free_cnt, sizeof *fpos * (T + 1));
        for (uint32_t i = 0; i < n; i++) {
            const hbmi_value *v = &df->values[vals[i]];
            def_list[dpos[v->start]++] = vals[i];
            free_list[fpos[v->end]++] = vals[i];
            freed_pending[vals[i]] = 1;
        }
        hbmi_free(dpos);
        hbmi_free(fpos);
    }
    for (uint32_t t = 0; t < T; t++) {
        for (uint32_t k = def_cnt[t]; k < def_cnt[t + 1]; k++) {
            uint32_t v = def_list[k];
            const hbmi_value *val = &df->values[v];
            const hbmi_buffer *buf = &df->buffers[val->buffer];
            if (s->first_alloc[val->buffer]) {
                uint32_t w = s->first_alloc[val->buffer] - 1;
                uint32_t r = groot(s, w);
                s->group[v] = r;
                if ((st = emit(s, EV_SHARE, v, w))) goto out;
                continue;
            }
            int shared = 0;
            if (buf->n_values == 1 && !val->wrapped) {
                const hbmi_instr *in = VI(df, v);
                uint32_t comp = df->gid_comp[val->gid];
                for (uint32_t o = 0; o < in->n_ops && !shared; o++) {
                    uint32_t og = df->comp_base[comp] + in->ops[o];
                    const hbmi_instr *oi = hbmi_df_instr(df, og);
                    for (uint32_t node = 0; node < oi->shape->nodes && !shared; node++) {
                        const hbmi_vset *set = &df->vs[oi->pos_base + node];
                        for (uint32_t q = 0; q < set->n && !shared; q++) {
                            uint32_t ov = hbmi_vset_at(set, q);
                            const hbmi_value *ovv = &df->values[ov];
                            if (df->buffers[ovv->buffer].n_values > 1 || !ovv->has_range || ovv->wrapped) continue;
                            if (end[ov] != (int64_t)t || !in_set[ov] || !freed_pending[ov]) continue;
                            if (in->op == HOP_COPY || !hbmi_df_is_user_of(df, val->gid, ovv->gid)) continue;
                            if (!hbmi_df_can_share(df, ovv->gid, ovv->node, val->gid, val->node) &&
                                !tpu_heap_share(c->p, in, oi, ovv->node, val->node))
                                continue;
                            if ((st = emit(s, EV_FREE, ov, 0))) goto out;
                            freed_pending[ov] = 0;
                            uint32_t r = groot(s, ov);
                            s->group[v] = r;
                            if (s->gsize[v] > s->gsize[r]) s->gsize[r] = s->gsize[v];
                            if ((st = emit(s, EV_SHARE, v, ov))) goto out;
                            end[ov] = val->end;
                            shared = 1;
                        }
                    }
                }
            }
            if (!shared) {
                if ((st = emit(s, EV_ALLOC, v, 0))) goto out;
                s->first_alloc[val->buffer] = v + 1;
            }
        }
        for (uint32_t k = free_cnt[t]; k < free_cnt[t + 1]; k++) {
            uint32_t v = free_list[k];
            if (!freed_pending[v]) continue;
            freed_pending[v] = 0;
            if ((st = emit(s, EV_FREE, v, 0))) goto out;
        }
    }
out:
    hbmi_free(vals);
    hbmi_free(def_cnt);
    hbmi_free(free_cnt);
    hbmi_free(def_list);
    hbmi_free(free_list);
    hbmi_free(freed_pending);
    hbmi_free(end);
    return st;
}

static void sim_free(sim *s) {
    hbmi_free(s->ev);
    hbmi_free(s->first_alloc);
    hbmi_free(s->group);
    hbmi_free(s->gsize);
    memset(s, 0, sizeof *s);
}

/* NoFragmentationStatsHeap: Alloc and ShareWith add the size, Free subtracts it. */
static uint64_t nofrag_peak(const hbmi_df *df, sim *s) {
    int64_t cur = 0, best = 0;
    for (size_t i = 0; i < s->n_ev; i++) {
        const event *e = &s->ev[i];
        int64_t size = (int64_t)s->gsize[groot(s, e->value)];
        if (!df->values[e->value].size && !size) continue;
        cur += e->kind == EV_FREE ? -size : size;
        if (cur > best) best = cur;
    }
    return (uint64_t)best;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* ComputePeakMemoryLogicalBuffers: the values live at the first point of maximal live size,
 * counting a colocated group once. */
static hbm_status heap_peak_values(ctx *c, sim *s, hbmi_alloc *a) {
    const hbmi_df *df = c->df;
    uint32_t nv = df->n_values;
    uint32_t *live_cnt = hbmi_calloc(nv + 1, sizeof *live_cnt); /* per group root */
    uint32_t *rep = hbmi_malloc(sizeof *rep * (nv + 1));
    uint8_t *in_live = hbmi_calloc(nv + 1, 1);
    if (!live_cnt || !rep || !in_live) {
        hbmi_free(live_cnt);
        hbmi_free(rep);
        hbmi_free(in_live);
        return oom();
    }
    int64_t cur = 0, best = 0;
    size_t best_at = 0;
    for (int pass = 0; pass < 2; pass++) {
        cur = 0;
        memset(live_cnt, 0, sizeof *live_cnt * (nv + 1));
        for (size_t i = 0; i < s->n_ev; i++) {
            const event *e = &s->ev[i];
            uint32_t r = groot(s, e->value);
            int64_t size = (int64_t)s->gsize[r];
            int64_t d = 0;
            if (e->kind == EV_FREE) {
                if (live_cnt[r] && --live_cnt[r] == 0) {
                    d = -size;
                    if (pass) in_live[rep[r]] = 0;
                }
            } else {
                if (live_cnt[r]++ == 0) {
                    d = size;
                    rep[r] = e->value;
                    if (pass) in_live[e->value] = 1;
                }
            }
            cur += d;
            if (!pass && cur > best) {
                best = cur;
                best_at = i;
            }
            if (pass && i == best_at) break;
        }
        if (!best) break;
    }
    hbm_status st = HBM_OK;
    if (best)
        for (uint32_t v = 0; v < nv && !st; v++)
            if (in_live[v]) st = alloc_add_peak(a, v);
    if (!st && a->n_peak) hbmi_qsort(a->peak, a->n_peak, sizeof *a->peak, cmp_u32);
    hbmi_free(live_cnt);
    hbmi_free(rep);
    hbmi_free(in_live);
    return st;
}

typedef struct tlkey {
    uint64_t key;
    uint32_t v;
} tlkey;

static int cmp_tlkey(const void *a, const void *b) {
    const tlkey *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

/* XLA:TPU's HBM heap (measured, docs/tpu.md Rules): the simulation's events in their order,
 * as an allocator would serve them. An Alloc takes the smallest free chunk that holds it at
 * the chunk's (aligned) start, ties to the lowest; what is left past the next aligned offset
 * stays a free chunk, and the block keeps the rest of the chunk when nothing is left; with no
 * chunk that holds it, it goes on top of the heap at the next aligned offset. The last Free of
 * a group returns its block: it merges with the free chunks it touches (a gap shorter than the
 * alignment between them counts as touching) and, reaching the top, lowers the top. Offsets
 * per group root into off[]; the heap's size is the highest top. */
typedef struct fchunk {
    uint64_t a, b; /* [a, b) */
} fchunk;

static hbm_status heap_sequential(ctx *c, sim *s, uint64_t align, uint64_t *off, uint64_t *heap_size) {
    const hbmi_df *df = c->df;
    uint32_t nv = df->n_values;
    size_t *last = hbmi_malloc(sizeof *last * (nv + 1));
    uint64_t *ext = hbmi_malloc(sizeof *ext * (nv + 1));
    uint8_t *placed = hbmi_calloc(nv + 1, 1);
    fchunk *fc = NULL;
    size_t n_fc = 0, cap_fc = 0;
    hbm_status st = HBM_OK;
    uint64_t top = 0, hw = 0;
    if (!last || !ext || !placed) {
        st = oom();
        goto out;
    }
    for (uint32_t v = 0; v < nv; v++) last[v] = SIZE_MAX;
    for (size_t i = 0; i < s->n_ev; i++)
        if (s->ev[i].kind == EV_FREE) last[groot(s, s->ev[i].value)] = i;
    for (size_t i = 0; i < s->n_ev; i++) {
        const event *e = &s->ev[i];
        uint32_t r = groot(s, e->value);
        uint64_t size = s->gsize[r];
        if (!size) continue;
        if (e->kind == EV_ALLOC && !placed[r]) {
            size_t best = SIZE_MAX;
            for (size_t k = 0; k < n_fc; k++) {
                if (fc[k].a + size > fc[k].b) continue;
                if (best == SIZE_MAX || fc[k].b - fc[k].a < fc[best].b - fc[best].a ||
                    (fc[k].b - fc[k].a == fc[best].b - fc[best].a && fc[k].a < fc[best].a))
                    best = k;
            }
            if (best != SIZE_MAX) {
                uint64_t o = fc[best].a, rest = hbmi_align_up(o + size, align);
                off[r] = o;
                if (rest < fc[best].b) {
                    ext[r] = o + size;
                    fc[best].a = rest;
                } else {
                    ext[r] = fc[best].b;
                    fc[best] = fc[--n_fc];
                }
            } else {
                off[r] = hbmi_align_up(top, align);
                top = ext[r] = off[r] + size;
                if (top > hw) hw = top;
            }
            placed[r] = 1;
        } else if (e->kind == EV_FREE && last[r] == i && placed[r]) {
            uint64_t a = off[r], b = ext[r];
            for (size_t k = 0; k < n_fc;) {
                if ((fc[k].b <= a && hbmi_align_up(fc[k].b, align) >= a) || (b <= fc[k].a && hbmi_align_up(b, align) >= fc[k].a)) {
                    if (fc[k].a < a) a = fc[k].a;
                    if (fc[k].b > b) b = fc[k].b;
                    fc[k] = fc[--n_fc];
                    k = 0;
                    continue;
                }
                k++;
            }
            if (hbmi_align_up(b, align) >= top) {
                top = a;
            } else {
                if (hbmi_grow((void **)&fc, &cap_fc, n_fc + 1, sizeof *fc) != HBM_OK) {
                    st = oom();
                    goto out;
                }
                fc[n_fc].a = a;
                fc[n_fc++].b = b;
            }
        }
    }
    *heap_size = hw;
out:
    hbmi_free(last);
    hbmi_free(ext);
    hbmi_free(placed);
    hbmi_free(fc);
    return st;
}

/* Pack the simulated values as GlobalDecreasingSizeBestFitHeap does, spatial and temporal,
 * keep the smaller; the intervals are in event time, [alloc or share event, free event]. */
static hbm_status heap_pack(ctx *c, sim *s, hbmi_alloc *a, int64_t color, uint64_t *heap_size) {
    const hbmi_df *df = c->df;
    uint32_t nv = df->n_values;
    int64_t *st = hbmi_malloc(sizeof *st * (nv + 1)), *en = hbmi_malloc(sizeof *en * (nv + 1));
    uint8_t *primary = hbmi_calloc(nv + 1, 1);
    uint32_t *prim_of = hbmi_malloc(sizeof *prim_of * (nv + 1));
    tlkey *keys = hbmi_malloc(sizeof *keys * (s->n_ev + 1));
    uint64_t *off_spatial = NULL;
    hbm_timeline *tl = NULL;
    hbm_status rc = HBM_OK;
    *heap_size = 0;
    if (!st || !en || !primary || !prim_of || !keys || hbm_timeline_new(&tl) != HBM_OK) {
        rc = oom();
        goto out;
    }
    uint32_t n = 0;
    for (size_t i = 0; i < s->n_ev; i++) {
        const event *e = &s->ev[i];
        if (e->kind == EV_FREE) {
            en[e->value] = (int64_t)i + 1;
        } else {
            st[e->value] = (int64_t)i;
            en[e->value] = (int64_t)s->n_ev + 1;
            keys[n++].v = e->value;
            if (e->kind == EV_ALLOC) {
                primary[e->value] = 1;
                prim_of[groot(s, e->value)] = e->value;
            }
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = keys[i].v;
        keys[i].key = ((uint64_t)prim_of[groot(s, v)] << 32) | (primary[v] ? 0 : (uint64_t)v + 1);
    }
    hbmi_qsort(keys, n, sizeof *keys, cmp_tlkey);
    if (hbm_timeline_reserve(tl, n) != HBM_OK) {
        rc = oom();
        goto out;
    }
    uint32_t *tl_value = hbmi_malloc(sizeof *tl_value * (n + 1));
    if (!tl_value) {
        rc = oom();
        goto out;
    }
    size_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = keys[i].v;
        uint64_t size = s->gsize[groot(s, v)];
        if (!size) { /* zero-sized: offset 0, no interval */
            if ((rc = alloc_add_value(c, a, v, 0))) {
                hbmi_free(tl_value);
                goto out;
            }
            continue;
        }
        size_t idx;
        if (hbm_timeline_add(tl, size, st[v], en[v], NULL, &idx) != HBM_OK) {
            hbmi_free(tl_value);
            rc = oom();
            goto out;
        }
        tl->buffers[idx].id = prim_of[groot(s, v)];
        tl->buffers[idx].alignment = color_alignment(c->p, color);
        tl_value[m++] = v;
    }
    uint64_t hs_spatial = 0, hs_temporal = 0;
    off_spatial = hbmi_malloc(sizeof *off_spatial * (m + 1));
    if (!off_spatial) {
        hbmi_free(tl_value);
        rc = oom();
        goto out;
    }
    rc = hbmi_xla_best_fit(tl, 0, &hs_spatial);
    for (size_t i = 0; rc == HBM_OK && i < m; i++) off_spatial[i] = tl->buffers[i].offset;
    if (rc == HBM_OK) rc = hbmi_xla_best_fit(tl, 1, &hs_temporal);
    if (rc != HBM_OK) {
        hbmi_free(tl_value);
        goto out;
    }
    int use_temporal = hs_temporal < hs_spatial;
    *heap_size = use_temporal ? hs_temporal : hs_spatial;
    uint64_t *off_seq = NULL; /* per group root, HBM_PLAN_HEAP_SEQUENTIAL */
    if (c->p->opt.heap == HBM_PLAN_HEAP_SEQUENTIAL && color == 0) {
        off_seq = hbmi_calloc(nv + 1, sizeof *off_seq);
        rc = off_seq ? heap_sequential(c, s, color_alignment(c->p, color), off_seq, heap_size) : oom();
        if (rc) {
            hbmi_free(off_seq);
            hbmi_free(tl_value);
            goto out;
        }
    }
    for (size_t i = 0; i < m; i++) {
        uint64_t off = off_seq ? off_seq[groot(s, tl_value[i])] : use_temporal ? tl->buffers[i].offset : off_spatial[i];
        if (off_seq) tl->buffers[i].offset = off;
        if ((rc = alloc_add_value(c, a, tl_value[i], off))) {
            hbmi_free(off_seq);
            hbmi_free(tl_value);
            goto out;
        }
    }
    hbmi_free(off_seq);
    hbmi_free(tl_value);
out:
    if (!rc && tl && (!c->p->heap_tl || *heap_size > c->p->heap_tl_size)) { /* keep it for hbm_plan_pack_temp */
        hbm_timeline_free(c->p->heap_tl);
        c->p->heap_tl = tl;
        c->p->heap_tl_size = *heap_size;
        tl = NULL;
    }
    hbm_timeline_free(tl);
    hbmi_free(off_spatial);
    hbmi_free(st);
    hbmi_free(en);
    hbmi_free(primary);
    hbmi_free(prim_of);
    hbmi_free(keys);
    return rc;
}

/* Bytes of value v that only pad its layout's tiles. */
uint64_t hbmi_plan_value_padding(const hbmi_df *df, uint32_t v) {
    const hbmi_value *val = &df->values[v];
    const hbmi_shape *sh = hbmi_shape_node(hbmi_df_instr(df, val->gid)->shape, val->node);
    if (!sh || !sh->tiled_elems) return 0;
    hbmi_shape plain = *sh;
    plain.tiled_elems = 0;
    uint64_t u = hbmi_shape_bytes(&plain, df->pointer_size);
    return val->size > u ? val->size - u : 0;
}

/* --- thread-local allocations ------------------------------------------------------------------ */
/* Does instruction in of a thread-local computation define the value at shape node k?
 * Parameters of computations called in a parallel context define their values. */
static int tl_defines(const hbmi_instr *in, uint32_t k) {
    switch (in->op) {
    case HOP_TUPLE: return k == 0;
    case HOP_GTE:
    case HOP_BITCAST:
    case HOP_DOMAIN:
    case HOP_OPT_BARRIER:
    case HOP_ADD_DEPENDENCY: return 0;
    default: return 1;
    }
}

/* GatherComputationsByAllocationType, then AssignBuffersForComputations(thread-local): a
 * computation reached through a reducer, comparator, custom call or fusion (and anything it
 * calls) is thread-local; every value defined there, outside fusion computations, gets an
 * allocation of its own (constants a constant allocation). They follow the heap in XLA's
 * allocation list, which decides where CombineTempAllocations puts each temp allocation,
 * and they count in XLA's "Total bytes used" but in none of memory_analysis()'s figures. */
static hbm_status thread_locals(ctx *c) {
    hbm_hlo_module *m = c->df->m;
    uint32_t n = m->n_comps;
    uint8_t *mark = hbmi_calloc(n + 1, 1); /* bit 1: global, bit 2: thread-local */
    uint32_t *queue = hbmi_malloc(sizeof *queue * (2 * (size_t)n + 1));
    if (!mark || !queue) {
        hbmi_free(mark);
        hbmi_free(queue);
        return oom();
    }
    uint32_t qh = 0, qt = 0;
    queue[qt++] = m->entry;
    mark[m->entry] = 1;
    while (qh < qt) {
        uint32_t ci = queue[qh++];
        const hbmi_comp *cp = &m->comps[ci];
        for (uint32_t i = 0; i < cp->n; i++) {
            const hbmi_instr *in = &cp->ins[i];
            for (uint32_t k = 0; k < in->n_called; k++) {
                int global_call = in->op == HOP_WHILE || in->op == HOP_CONDITIONAL || in->op == HOP_CALL ||
                                  ((in->op == HOP_ASYNC_START || in->op == HOP_ASYNC_UPDATE || in->op == HOP_ASYNC_DONE) &&
                                   in->called_role[k] == HBMI_CALLED_CALLS);
                uint8_t want = (mark[ci] & 2) || !global_call ? 2 : 1;
                uint32_t cj = in->called[k];
                if (cj < n && !(mark[cj] & want)) {
                    mark[cj] |= want;
                    queue[qt++] = cj;
                }
            }
        }
    }
    hbm_status st = HBM_OK;
    for (uint32_t ci = 0; ci < n && !st; ci++) {
        const hbmi_comp *cp = &m->comps[ci];
        if (mark[ci] != 2 || cp->kind == HBMI_COMP_FUSION) continue;
        for (uint32_t i = 0; i < cp->n && !st; i++) {
            const hbmi_instr *in = &cp->ins[i];
            for (uint32_t k = 0; k < in->shape->nodes && !st; k++) {
                if (!tl_defines(in, k)) continue;
                hbmi_alloc *a;
                st = new_empty(c, hbmi_df_shape_bytes(c->df, hbmi_shape_node(in->shape, k)), &a);
                if (st) break;
                if (in->op == HOP_CONSTANT) a->constant = 1;
                else a->thread_local = 1;
            }
        }
    }
    hbmi_free(mark);
    hbmi_free(queue);
    return st;
}

/* --- CombineTempAllocations ------------------------------------------------------------------------ */
static void swap_alloc(hbmi_alloc *x, hbmi_alloc *y) {
    hbmi_alloc t = *x;
    *x = *y;
    *y = t;
}

static hbm_status combine_temps(ctx *c) {
    hbm_plan *p = c->p;
    /* std::partition (not stable), as libstdc++/libc++ implement it for random access */
    uint32_t first = 0, last = p->n_allocs;
    for (;;) {
        while (first != last && !hbmi_alloc_is_temp(&p->allocs[first])) first++;
        if (first == last) break;
        last--;
        while (first != last && hbmi_alloc_is_temp(&p->allocs[last])) last--;
        if (first == last) break;
        swap_alloc(&p->allocs[first], &p->allocs[last]);
        first++;
    }
    if (first >= p->n_allocs) return HBM_OK;
    /* each temp allocation joins the first one of its memory space */
    uint32_t kept = first;
    for (uint32_t i = first; i < p->n_allocs; i++) {
        hbmi_alloc *t = &p->allocs[i];
        hbmi_alloc *comb = NULL;
        for (uint32_t j = first; j < kept && !comb; j++)
            if (p->allocs[j].color == t->color) comb = &p->allocs[j];
        if (!comb) {
            if (i != kept) swap_alloc(&p->allocs[kept], t);
            kept++;
            continue;
        }
        uint64_t base = hbmi_align_up(comb->size, color_alignment(p, comb->color));
        comb->size = base + t->size;
        for (uint32_t k = 0; k < t->n_values; k++) TRY(alloc_add_value(c, comb, t->values[k], base + t->offsets[k]));
        for (uint32_t k = 0; k < t->n_peak; k++) TRY(alloc_add_peak(comb, t->peak[k]));
        comb->heap |= t->heap;
        hbmi_free(t->values);
        hbmi_free(t->offsets);
        hbmi_free(t->peak);
        hbmi_free(t->iv);
        t->iv = NULL;
        t->values = t->peak = NULL;
        t->offsets = NULL;
        t->n_values = t->cap_values = t->n_peak = t->cap_peak = 0;
    }
    p->n_allocs = kept;
    for (uint32_t j = first; j < kept; j++)
        for (uint32_t k = 0; k < p->allocs[j].n_values; k++) p->value_alloc[p->allocs[j].values[k]] = j;
    return HBM_OK;
}

/* --- peak buffers (TopKPeakBuffers) ------------------------------------------------------------------ */
static hbm_status intern(ctx *c, const char **out, const char *s, size_t n) {
    char *r = hbmi_arena_alloc(&c->p->strings, n + 1);
    if (!r) return oom();
    memcpy(r, s, n);
    r[n] = 0;
    *out = r;
    return HBM_OK;
}

/* HLO text escapes strings C-style (\\' \\" \\\\ \\n); XLA's report prints them raw. */
void hbmi_plan_unescape(char *dst, size_t cap, const char *src, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++) {
        char ch = src[i];
        if (ch == '\\' && i + 1 < n) {
            char e = src[++i];
            ch = e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
        dst[k++] = ch;
    }
    if (cap) dst[k] = 0;
}

const char *hbmi_plan_label(const hbmi_instr *in, char *buf, size_t cap) {
    const char *txt = NULL;
    if (in->op == HOP_ASYNC_START || in->op == HOP_ASYNC_UPDATE || in->op == HOP_ASYNC_DONE) {
        static const char *const real[] = {"all-gather-done", "collective-permute-done", "async-start",
                                           "async-update", "async-done", NULL};
        int is_real = 0;
        for (int i = 0; real[i]; i++)
            if (strlen(real[i]) == in->opcode.n && !memcmp(real[i], in->opcode.p, in->opcode.n)) is_real = 1;
        if (!is_real)
            txt = in->op == HOP_ASYNC_START ? "async-start" : in->op == HOP_ASYNC_UPDATE ? "async-update" : "async-done";
    }
    if (txt) snprintf(buf, cap, "%s", txt);
    else snprintf(buf, cap, "%.*s", (int)in->opcode.n, in->opcode.p);
    return buf;
}

/* The opcode of the op an async-start wraps: the root of its computation, or the sugar's
 * name without "-start" ("all-to-all-start" -> "all-to-all"). */
void hbmi_plan_wrapped_label(const hbm_hlo_module *m, const hbmi_instr *in, char *buf, size_t cap) {
    for (uint32_t k = 0; k < in->n_called; k++) {
        if (in->called_role[k] != HBMI_CALLED_CALLS) continue;
        const hbmi_comp *wc = &m->comps[in->called[k]];
        const hbmi_instr *r = &wc->ins[wc->root];
        snprintf(buf, cap, "%.*s", (int)r->opcode.n, r->opcode.p);
        return;
    }
    uint32_t n = in->opcode.n;
    if (n > 6 && !memcmp(in->opcode.p + n - 6, "-start", 6)) n -= 6;
    snprintf(buf, cap, "%.*s", (int)n, in->opcode.p);
}

static hbm_status rank_peaks(ctx *c) {
    hbm_plan *p = c->p;
    const hbmi_df *df = c->df;
    enum { K = 64 };
    struct {
        uint64_t size;
        uint32_t v, alloc;
    } top[K];
    size_t n = 0;
    /* a multimap keyed by size: equal keys keep insertion order; full -> drop the first
     * smallest when a strictly larger one arrives */
    for (uint32_t ai = 0; ai < p->n_allocs; ai++) {
        const hbmi_alloc *a = &p->allocs[ai];
        if (a->color == HBMI_HOST_SPACE) continue; /* device memory only */
        for (uint32_t k = 0; k < a->n_peak; k++) {
            uint32_t v = a->peak[k];
            uint64_t size = df->buffers[df->values[v].buffer].size;
            if (n == K) {
                if (size <= top[0].size) continue;
                memmove(&top[0], &top[1], sizeof top[0] * (K - 1));
                n--;
            }
            size_t pos = n;
            while (pos && top[pos - 1].size > size) pos--;
            memmove(&top[pos + 1], &top[pos], sizeof top[0] * (n - pos));
            top[pos].size = size;
            top[pos].v = v;
            top[pos].alloc = ai;
            n++;
        }
    }
    p->n_peak = 0;
    for (size_t i = n; i-- > 0;) {
        hbm_plan_buffer *o = &p->peak[p->n_peak++];
        const hbmi_value *val = &df->values[top[i].v];
        const hbmi_instr *in = hbmi_df_instr(df, val->gid);
        const hbmi_alloc *a = &p->allocs[top[i].alloc];
        char buf[1024];
        o->size = top[i].size;
        if (val->wrapped) hbmi_plan_wrapped_label(df->m, in, buf, sizeof buf);
        else hbmi_plan_label(in, buf, sizeof buf);
        TRY(intern(c, &o->label, buf, strlen(buf)));
        hbmi_shape_print(hbmi_shape_node(in->shape, val->node), buf, sizeof buf);
        TRY(intern(c, &o->shape, buf, strlen(buf)));
        TRY(intern(c, &o->instruction, in->name.p, in->name.n));
        hbmi_plan_unescape(buf, sizeof buf, in->meta_op_name.p ? in->meta_op_name.p : "", in->meta_op_name.n);
        TRY(intern(c, &o->op_name, buf, strlen(buf)));
        hbmi_plan_unescape(buf, sizeof buf, in->meta_source_file.p ? in->meta_source_file.p : "", in->meta_source_file.n);
        TRY(intern(c, &o->source_file, buf, strlen(buf)));
        o->source_line = in->meta_source_line;
        o->param_number = val->entry_param ? (int)in->param_no : -1;
        o->padding = hbmi_plan_value_padding(df, top[i].v);
        o->category = a->param_no >= 0 ? HBM_CAT_PARAMETER
                      : a->constant    ? HBM_CAT_CONSTANT
                      : a->live_out    ? HBM_CAT_OUTPUT
                                       : HBM_CAT_TEMP;
    }
    return HBM_OK;
}

/* --- the timeline of the plan --------------------------------------------------------------------- */
static hbm_category alloc_category(const hbmi_alloc *a) {
    return a->param_no >= 0 ? HBM_CAT_PARAMETER : a->constant ? HBM_CAT_CONSTANT : a->live_out ? HBM_CAT_OUTPUT : HBM_CAT_TEMP;
}

/* XProf's "indefinite" allocations: entry parameters, constants and maybe-live-out
 * allocations hold their bytes for the whole run (thread-local ones are not device heap). */
static int alloc_indefinite(const hbmi_alloc *a) { return a->param_no >= 0 || a->constant || a->live_out; }

/* The lifetime [s, e) in schedule steps a value of a temp allocation occupies it; 0 if none. */
static int value_interval(const hbm_plan *p, uint32_t v, int64_t *s, int64_t *e) {
    const hbmi_df *df = p->df;
    const hbmi_value *val = &df->values[v];
    if (!df->buffers[val->buffer].size || !val->has_range) return 0;
    int64_t T = df->n_flat ? df->n_flat : 1;
    *s = val->start;
    *e = val->end + 1;
    if (*e > T) *e = T;
    if (*s >= *e) *s = *e - 1;
    return 1;
}

/* Of size bytes holding value v, those that are not padding of its layout's tiles. */
static uint64_t unpadded(const hbmi_df *df, uint32_t v, uint64_t size) {
    uint64_t pad = hbmi_plan_value_padding(df, v);
    return size > pad ? size - pad : 0;
}

static int cmp_span(const void *x, const void *y) {
    const hbmi_span *a = x, *b = y;
    if (a->alloc != b->alloc) return a->alloc < b->alloc ? -1 : 1;
    if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
    return a->s < b->s ? -1 : a->s > b->s;
}

/* The plan's memory over the schedule, as XLA lays it out: an indefinite allocation is one
 * span over the whole run, at its size, named by its largest value (as XProf's Memory Viewer
 * does); in a temp allocation, the values at one offset (a buffer reused in place, an alias,
 * the values colocated with it) whose live ranges overlap are one span, at their largest
 * size, named by the largest of them. So the spans live at any step never exceed the
 * allocations that hold them, and the sum of those live at the peak is the peak. */
static hbm_status build_spans(ctx *c) {
    hbm_plan *p = c->p;
    const hbmi_df *df = p->df;
    int64_t T = df->n_flat ? df->n_flat : 1;
    size_t n = 0;
    for (uint32_t ai = 0; ai < p->n_allocs; ai++) n += p->allocs[ai].n_values + 1;
    hbmi_span *sp = hbmi_malloc(sizeof *sp * (n + 1));
    if (!sp) return oom();
    n = 0;
    for (uint32_t ai = 0; ai < p->n_allocs; ai++) {
        const hbmi_alloc *a = &p->allocs[ai];
        if (a->thread_local || !a->size) continue;
        if (alloc_indefinite(a)) {
            uint32_t rep = UINT32_MAX;
            uint64_t best = 0;
            for (uint32_t k = 0; k < a->n_values; k++) {
                uint64_t sz = df->buffers[df->values[a->values[k]].buffer].size;
                if (rep == UINT32_MAX || sz > best) rep = a->values[k], best = sz;
            }
            sp[n++] = (hbmi_span){0, T, a->size, 0, rep == UINT32_MAX ? a->size : unpadded(df, rep, a->size), ai, rep, 1, 0};
            continue;
        }
        for (uint32_t k = 0; k < a->n_values; k++) {
            uint32_t v = a->values[k];
            int64_t s, e;
            if (!value_interval(p, v, &s, &e)) continue;
            uint64_t size = df->buffers[df->values[v].buffer].size;
            sp[n++] = (hbmi_span){s, e, size, p->value_offset[v], unpadded(df, v, size), ai, v, 0, 0};
        }
    }
    hbmi_qsort(sp, n, sizeof *sp, cmp_span);
    size_t m = 0;
    for (size_t i = 0; i < n;) { /* merge overlapping spans of one place */
        hbmi_span u = sp[i];
        size_t j = i + 1;
        for (; j < n && !u.indefinite && sp[j].alloc == u.alloc && sp[j].offset == u.offset && sp[j].s < u.e; j++) {
            if (sp[j].e > u.e) u.e = sp[j].e;
            if (sp[j].size > u.size) {
                u.size = sp[j].size;
                u.unpadded = sp[j].unpadded;
                u.value = sp[j].value;
            }
        }
        sp[m++] = u;
        i = j;
    }
    for (size_t i = 0; i < m; i++) sp[i].color = p->allocs[sp[i].alloc].color;
    hbmi_free(p->spans);
    p->spans = sp;
    p->n_spans = m;
    return HBM_OK;
}

/* The step where the most device bytes are live (the spans of build_spans in S(0); host
 * memory and the other spaces left out), and the peak of the device temp allocations alone. */
static hbm_status peak_step(ctx *c) {
    hbm_plan *p = c->p;
    TRY(build_spans(c));
    int64_t T = p->df->n_flat ? p->df->n_flat : 1;
    int64_t *delta = hbmi_calloc((size_t)T + 2, sizeof *delta), *tdelta = hbmi_calloc((size_t)T + 2, sizeof *tdelta);
    if (!delta || !tdelta) {
        hbmi_free(delta);
        hbmi_free(tdelta);
        return oom();
    }
    for (size_t i = 0; i < p->n_spans; i++) {
        const hbmi_span *sp = &p->spans[i];
        if (sp->color != 0) continue; /* device memory only */
        delta[sp->s] += (int64_t)sp->size;
        delta[sp->e] -= (int64_t)sp->size;
        if (!sp->indefinite) {
            tdelta[sp->s] += (int64_t)sp->size;
            tdelta[sp->e] -= (int64_t)sp->size;
        }
    }
    int64_t cur = 0, best = -1, at = 0, tcur = 0, tbest = 0;
    for (int64_t t = 0; t < T; t++) {
        cur += delta[t];
        tcur += tdelta[t];
        if (cur > best) {
            best = cur;
            at = t;
        }
        if (tcur > tbest) tbest = tcur;
    }
    hbmi_free(delta);
    hbmi_free(tdelta);
    p->stats.peak_step = at;
    p->stats.peak_live_bytes = best > 0 ? (uint64_t)best : 0;
    p->stats.n_steps = p->df->n_flat;
    p->temp_live_peak = (uint64_t)tbest;
    return HBM_OK;
}

static hbm_status build_timeline(hbm_plan *p) {
    const hbmi_df *df = p->df;
    hbm_timeline *tl;
    if (hbm_timeline_new(&tl) != HBM_OK) return hbmi_error(HBM_ERR_NOMEM, "plan: out of host memory");
    snprintf(tl->clock, sizeof tl->clock, "step");
    snprintf(tl->name, sizeof tl->name, "%.*s", (int)df->m->name.n, df->m->name.p);
    uint64_t *bases = hbmi_calloc(p->n_allocs + 1, sizeof *bases), at = 0;
    if (!bases || hbm_timeline_reserve(tl, p->n_spans) != HBM_OK) {
        hbmi_free(bases);
        hbm_timeline_free(tl);
        return hbmi_error(HBM_ERR_NOMEM, "plan: out of host memory building the timeline");
    }
    for (uint32_t ai = 0; ai < p->n_allocs; ai++) { /* device allocations end to end, aligned */
        const hbmi_alloc *a = &p->allocs[ai];
        if (a->color != 0 || a->thread_local) continue;
        at = hbmi_align_up(at, p->opt.alignment ? p->opt.alignment : 1);
        bases[ai] = at;
        at += a->size;
    }
    for (size_t i = 0; i < p->n_spans; i++) {
        const hbmi_span *sp = &p->spans[i];
        if (sp->color != 0) continue; /* not device memory (host S(5), TPU S(1) ...) */
        const hbmi_alloc *a = &p->allocs[sp->alloc];
        hbm_category cat = alloc_category(a);
        hbm_tag tag = {.category = cat};
        char shape[256], label[64], opn[1024], src[1024];
        if (sp->value != UINT32_MAX) {
            const hbmi_value *val = &df->values[sp->value];
            const hbmi_instr *in = hbmi_df_instr(df, val->gid);
            hbmi_shape_print(hbmi_shape_node(in->shape, val->node), shape, sizeof shape);
            if (val->wrapped) hbmi_plan_wrapped_label(df->m, in, label, sizeof label);
            else hbmi_plan_label(in, label, sizeof label);
            hbmi_plan_unescape(opn, sizeof opn, in->meta_op_name.p ? in->meta_op_name.p : "", in->meta_op_name.n);
            hbmi_plan_unescape(src, sizeof src, in->meta_source_file.p ? in->meta_source_file.p : "", in->meta_source_file.n);
            tag = (hbm_tag){opn[0] ? opn : NULL, shape, src[0] ? src : NULL, in->meta_source_line, label, cat};
        }
        size_t idx;
        if (hbm_timeline_add(tl, sp->size, sp->s, sp->e, &tag, &idx) != HBM_OK) {
            hbmi_free(bases);
            hbm_timeline_free(tl);
            return hbmi_error(HBM_ERR_NOMEM, "plan: out of host memory building the timeline");
        }
        hbm_tl_buffer *b = &tl->buffers[idx];
        b->id = sp->value == UINT32_MAX ? UINT64_MAX : sp->value;
        b->offset = bases[sp->alloc] + sp->offset;
        b->alignment = p->opt.alignment;
        b->flags = HBM_TL_PINNED;
    }
    hbmi_free(bases);
    p->tl = tl;
    return HBM_OK;
}

/* XLA:TPU's memory_analysis() temp: its device (color 0) preallocated-temp allocation,
 * rounded up to 16 KiB, or nothing when that allocation holds only tuple tables and the
 * one-element values of scalar work (loop counters, compares, copies and while state: add,
 * lt, copy, while{k}, wide.param{k} in its dumps), which the TPU's scalar unit keeps out of
 * HBM. Read from 169 generated modules' dumps, not from XLA's source: the TPU compiler that
 * fills CompiledMemoryStats is not public (docs/tpu.md). */
static int tpu_hbm_value(const hbmi_df *df, uint32_t v) {
    const hbmi_value *val = &df->values[v];
    if (val->is_tuple) return 0;
    const hbmi_instr *in = hbmi_df_instr(df, val->gid);
    const hbmi_shape *sh = hbmi_shape_node(in->shape, val->node);
    if (sh && hbmi_shape_elements(sh) > 1) return 1;
    switch (in->op) {
    case HOP_ELEMENTWISE:
    case HOP_COPY:
    case HOP_PARAMETER:
    case HOP_WHILE:
    case HOP_GTE:
    case HOP_BITCAST:
    case HOP_TUPLE:
    case HOP_CONSTANT:
    case HOP_CALL:
    case HOP_CONDITIONAL:
    case HOP_OPT_BARRIER: return 0;
    default: return 1;
    }
}

static uint64_t tpu_temp_bytes(const hbm_plan *p, const hbmi_alloc *a) {
    for (uint32_t k = 0; k < a->n_values; k++)
        if (tpu_hbm_value(p->df, a->values[k])) return hbmi_align_up(a->size, HBMI_TPU_HBM_ALIGN);
    return 0;
}

/* --- driver ------------------------------------------------------------------------------------------ */
void hbm_plan_options_default(hbm_plan_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->pointer_size = 8;
}

hbm_status hbm_plan_options_for_device(hbm_plan_options *o, const char *device) {
    if (!o || !device) return hbmi_error(HBM_ERR_INVALID, "plan: NULL argument");
    const hbm_device_model *dm = hbm_device_model_find(device);
    if (!dm) return hbmi_error(HBM_ERR_INVALID, "device '%s': not a known device ('hbm devices' lists them)", device);
    if (strncmp(dm->name, "TPU-", 4)) return HBM_OK;
    o->backend = HBM_BACKEND_TPU;
    /* v4 and v5e round a tuple's table to 512 bytes, v5p and v6e to 32 */
    o->tuple_align = !strcmp(dm->name, "TPU-v5p") || !strcmp(dm->name, "TPU-v6e") ? 32 : 512;
    return HBM_OK;
}

const char *hbm_backend_str(hbm_backend b) {
    return b == HBM_BACKEND_GPU ? "gpu" : b == HBM_BACKEND_CPU ? "cpu" : b == HBM_BACKEND_TPU ? "tpu" : "auto";
}

hbm_status hbm_backend_parse(const char *s, hbm_backend *out) {
    static const hbm_backend all[] = {HBM_BACKEND_AUTO, HBM_BACKEND_GPU, HBM_BACKEND_CPU, HBM_BACKEND_TPU};
    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++)
        if (!strcasecmp(s, hbm_backend_str(all[i]))) return *out = all[i], HBM_OK;
    return hbmi_error(HBM_ERR_INVALID, "backend '%s': expected gpu, cpu, tpu or auto", s ? s : "");
}

static int text_has(const hbm_hlo_module *m, const char *needle) { return hbmi_span_has(m->text, m->len, needle); }

static int str_is(hbmi_str s, const char *w) { return s.n == strlen(w) && !memcmp(s.p, w, s.n); }
static int str_starts(hbmi_str s, const char *w) { return s.n >= strlen(w) && !memcmp(s.p, w, strlen(w)); }

/* Opcodes XLA:GPU's FusionWrapper (xla/service/gpu/transforms/fusion_wrapper.cc) wraps into
 * a fusion wherever they stand unfused in the entry or a loop or branch of it; copy is left
 * out (copy insertion runs later and leaves its copies unfused). One of them unfused there
 * means another compiler. */
static int gpu_would_wrap(hbmi_str op) {
    static const char *const wrapped[] = {
        "abs", "add", "and", "atan2", "bitcast-convert", "broadcast", "ceil", "cbrt", "clamp", "count-leading-zeros",
        "compare", "complex", "concatenate", "convert", "cosine", "divide", "dot", "dynamic-slice",
        "dynamic-update-slice", "erf", "exponential", "exponential-minus-one", "floor", "gather", "imag", "iota",
        "is-finite", "log", "log-plus-one", "map", "maximum", "minimum", "multiply", "negate", "not", "or", "pad",
        "popcnt", "power", "real", "reshape", "reduce", "reduce-precision", "reduce-window", "remainder", "reverse",
        "round-nearest-afz", "round-nearest-even", "rsqrt", "scatter", "select", "shift-left", "shift-right-logical",
        "shift-right-arithmetic", "sign", "sine", "slice", "sqrt", "subtract", "stochastic-convert", "tan", "tanh",
        "transpose", "xor"};
    for (size_t i = 0; i < sizeof wrapped / sizeof *wrapped; i++)
        if (str_is(op, wrapped[i])) return 1;
    return 0;
}

/* What the computations the entry runs (itself, loops, branches; not fusions or calls'
 * callees) show: 1 an op XLA:GPU would have wrapped, or a fusion named without the kind
 * prefix XLA:GPU's RenameFusions (loop_, input_, ...) and FusionWrapper (wrapped_) give
 * every fusion; 2 such GPU names. */
static int scan_names(const hbm_hlo_module *m, uint32_t ci, int depth, int *gpu_names) {
    if (ci >= m->n_comps || depth > 64) return 0;
    const hbmi_comp *c = &m->comps[ci];
    int cpu = 0;
    for (uint32_t i = 0; i < c->n && !cpu; i++) {
        const hbmi_instr *in = &c->ins[i];
        if (in->op == HOP_FUSION && in->fusion_kind != HBMI_FUSION_CUSTOM) {
            static const char *const kinds[] = {"loop_", "input_", "output_", "wrapped_", "custom_"};
            int named = 0;
            for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) named |= str_starts(in->name, kinds[k]);
            if (named) *gpu_names = 1;
            /* "fusion", "fusion.3": XLA's default name, which old GPU dumps keep too */
            else if (!str_starts(in->name, "fusion")) cpu = 1;
        } else if (gpu_would_wrap(in->opcode)) {
            cpu = 1;
        }
        if (in->op == HOP_WHILE || in->op == HOP_CONDITIONAL)
            for (uint32_t k = 0; k < in->n_called && !cpu; k++) cpu = scan_names(m, in->called[k], depth + 1, gpu_names);
    }
    return cpu;
}

/* Which XLA compiler produced the module: the dump's file name says it
 * (module_0001.jit_f.sm_8.0_gpu_after_optimizations.txt, ...cpu_after_optimizations.txt);
 * else the content: tiled layouts mean TPU; CUDA/ROCm library calls, GPU backend configs,
 * command buffers, the GPU scheduler's scheduling_name metadata and its fusion names mean
 * GPU; the CPU runtime's calls, %parallel_ computations, outer_dimension_partitions, ops
 * XLA:GPU would have wrapped in a fusion and fusions not named the GPU's way mean CPU.
 * *evidence: the file name, the content, or none (GPU assumed). */
static hbm_backend detect_backend(const hbm_hlo_module *m, hbmi_backend_evidence *evidence) {
    if (m->backend_hint != HBMI_HLO_BACKEND_NONE) { /* a profile names its devices */
        *evidence = HBMI_EVIDENCE_CONTENT;
        return m->backend_hint == HBMI_HLO_BACKEND_TPU   ? HBM_BACKEND_TPU
               : m->backend_hint == HBMI_HLO_BACKEND_CPU ? HBM_BACKEND_CPU
                                                         : HBM_BACKEND_GPU;
    }
    const char *base = strrchr(m->path, '/');
    base = base ? base + 1 : m->path;
    *evidence = HBMI_EVIDENCE_FILE_NAME;
    if (strstr(base, "tpu")) return HBM_BACKEND_TPU;
    if (strstr(base, "gpu") || strstr(base, ".sm_")) return HBM_BACKEND_GPU;
    if (strstr(base, "cpu")) return HBM_BACKEND_CPU;
    *evidence = HBMI_EVIDENCE_CONTENT;
    if (text_has(m, ":T(")) return HBM_BACKEND_TPU;
    if (text_has(m, "custom_call_target=\"__cublas") || text_has(m, "custom_call_target=\"__cudnn") ||
        text_has(m, "custom_call_target=\"cusolver") || text_has(m, "custom_call_target=\"__cusolver") ||
        text_has(m, "custom_call_target=\"cu_") || text_has(m, "custom_call_target=\"__gpu") ||
        text_has(m, "custom_call_target=\"__triton") || text_has(m, "\"operation_queue_id\"") ||
        text_has(m, "command_buffer") || text_has(m, "scheduling_name=") || text_has(m, "fingerprint_before_lhs"))
        return HBM_BACKEND_GPU;
    if (text_has(m, "custom_call_target=\"__xla_cpu") || text_has(m, "%parallel_") ||
        text_has(m, "\"outer_dimension_partitions\""))
        return HBM_BACKEND_CPU;
    int gpu_names = 0;
    /* names tell only after XLA's passes: before them (not scheduled) no op is fused or
     * wrapped on any backend, so an unfused op says nothing (a torch_xla module for Neuron
     * is not XLA:CPU's) */
    if (m->is_scheduled && scan_names(m, m->entry, 0, &gpu_names)) return HBM_BACKEND_CPU;
    if (gpu_names) return HBM_BACKEND_GPU;
    *evidence = HBMI_EVIDENCE_NONE;
    return HBM_BACKEND_GPU;
}

static _Thread_local const hbmi_df *bsort_df;
static int cmp_buffers(const void *x, const void *y) {
    const hbmi_buffer *a = &bsort_df->buffers[*(const uint32_t *)x], *b = &bsort_df->buffers[*(const uint32_t *)y];
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    if (a->live_out != b->live_out) return a->live_out ? -1 : 1;
    if (a->min_post != b->min_post) return a->min_post < b->min_post ? -1 : 1;
    uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    return i < j ? -1 : i > j;
}

void hbm_plan_free(hbm_plan *p) {
    if (!p) return;
    for (uint32_t i = 0; i < p->n_allocs; i++) {
        hbmi_free(p->allocs[i].values);
        hbmi_free(p->allocs[i].offsets);
        hbmi_free(p->allocs[i].peak);
        hbmi_free(p->allocs[i].iv);
    }
    hbmi_free(p->allocs);
    hbmi_free(p->value_alloc);
    hbmi_free(p->value_offset);
    hbm_timeline_free(p->tl);
    hbmi_free(p->spans);
    hbm_timeline_free(p->heap_tl);
    hbmi_arena_free(&p->strings);
    hbmi_df_free(p->df);
    hbmi_free(p);
}

static hbm_status run(ctx *c) {
    hbm_plan *p = c->p;
    hbmi_df *df = c->df;
    uint32_t nb = df->n_buffers, nv = df->n_values;
    p->value_alloc = hbmi_malloc(sizeof *p->value_alloc * (nv + 1));
    p->value_offset = hbmi_calloc(nv + 1, sizeof *p->value_offset);
    c->delayed = hbmi_calloc(nv + 1, 1);
    uint32_t *order = hbmi_malloc(sizeof *order * (nb + 1));
    if (!p->value_alloc || !p->value_offset || !c->delayed || !order) {
        hbmi_free(order);
        return oom();
    }
    for (uint32_t v = 0; v < nv; v++) p->value_alloc[v] = UINT32_MAX;
    for (uint32_t i = 0; i < nb; i++) order[i] = i;
    bsort_df = df;
    hbmi_qsort(order, nb, sizeof *order, cmp_buffers);
    bsort_df = NULL;
    for (uint32_t i = 0; i < nb; i++) {
        hbm_status st = assign_single(c, order[i]);
        if (st) {
            hbmi_free(order);
            return st;
        }
    }
    hbmi_free(order);
    c->no_index = 1;
    /* the temp heap */
    sim s;
    memset(&s, 0, sizeof s);
    /* one heap per memory space (SplitBuffersByColor), in increasing order */
    uint8_t *in_color = hbmi_malloc(nv + 1);
    if (!in_color) return oom();
    int64_t color = -1;
    for (;;) {
        int64_t next = INT64_MAX;
        for (uint32_t v = 0; v < nv; v++)
            if (c->delayed[v] && value_color(df, v) > color && value_color(df, v) < next) next = value_color(df, v);
        if (next == INT64_MAX) break;
        color = next;
        for (uint32_t v = 0; v < nv; v++) in_color[v] = c->delayed[v] && value_color(df, v) == color;
        hbmi_alloc *h = NULL;
        uint64_t hs = 0;
        hbm_status st = simulate(c, in_color, &s);
        if (!st) st = new_empty(c, 0, &h);
        if (!st) st = heap_pack(c, &s, h, color, &hs);
        if (!st) st = heap_peak_values(c, &s, h);
        if (st) {
            sim_free(&s);
            hbmi_free(in_color);
            return st;
        }
        h->heap = 1;
        h->color = color;
        h->size = hs;
        if (color == 0) { /* device memory's heap */
            p->temp_heap_size += hs;
            p->temp_heap_live += nofrag_peak(df, &s);
        }
        sim_free(&s);
    }
    hbmi_free(in_color);
    p->stats.temp_fragmentation_bytes = (int64_t)p->temp_heap_size - (int64_t)p->temp_heap_live;
    TRY(thread_locals(c));
    TRY(combine_temps(c));
    if (p->opt.backend == HBM_BACKEND_TPU && p->alignment_from != HBMI_ALIGN_OPTION)
        for (uint32_t i = 0; i < p->n_allocs; i++) {
            hbmi_alloc *a = &p->allocs[i];
            if (a->color != 0 || !hbmi_alloc_is_temp(a)) continue;
            uint64_t b = tpu_temp_bytes(p, a);
            if (b) a->size = b;
            else a->color = HBMI_TPU_UNCOUNTED_SPACE; /* tables and scalars only */
        }
    /* summary stats */
    hbm_plan_stats *st = &p->stats;
    for (uint32_t i = 0; i < p->n_allocs; i++) {
        const hbmi_alloc *a = &p->allocs[i];
        if (a->color == HBMI_HOST_SPACE) { /* memory_analysis()'s host_* figures */
            if (a->param_no >= 0) st->host_argument_size_in_bytes += a->size;
            if (a->param_no >= 0 && a->param_aliased) st->host_alias_size_in_bytes += a->size;
            if (a->live_out) st->host_output_size_in_bytes += a->size;
            if (hbmi_alloc_is_temp(a)) st->host_temp_size_in_bytes += a->size;
            st->total_allocation_bytes += a->size;
            continue;
        }
        if (a->color != 0) { /* another memory space (TPU S(1) ...): not device (HBM) memory */
            st->other_space_size_in_bytes += a->size;
            st->total_allocation_bytes += a->size;
            continue;
        }
        if (a->param_no >= 0) {
            st->argument_size_in_bytes += a->size;
            if (a->param_aliased) st->alias_size_in_bytes += a->size;
        }
        if (a->constant) st->constant_size_in_bytes += a->size;
        if (a->live_out) st->output_size_in_bytes += a->size;
        if (hbmi_alloc_is_temp(a)) st->temp_size_in_bytes += a->size;
        if (a->thread_local) st->thread_local_size_in_bytes += a->size;
        st->total_allocation_bytes += a->size;
        if (a->thread_local) continue;
        if (a->heap || hbmi_alloc_is_temp(a)) {
            for (uint32_t k = 0; k < a->n_peak; k++) st->padding_bytes += hbmi_plan_value_padding(df, a->peak[k]);
        } else {
            uint64_t pad = 0; /* of the value that sizes the allocation */
            for (uint32_t k = 0; k < a->n_values; k++)
                if (df->values[a->values[k]].size == a->size && hbmi_plan_value_padding(df, a->values[k]) > pad)
                    pad = hbmi_plan_value_padding(df, a->values[k]);
            st->padding_bytes += pad;
        }
    }
    st->n_allocations = p->n_allocs;
    st->estimate = !p->m->is_scheduled;
    st->peak_bytes = st->argument_size_in_bytes + st->output_size_in_bytes - st->alias_size_in_bytes +
                     st->temp_size_in_bytes + st->constant_size_in_bytes;
    /* total fragmentation: total allocation minus the whole-module minimum (all values
     * except constants, no fragmentation) */
    uint8_t *all = hbmi_malloc(nv + 1);
    if (!all) return oom();
    for (uint32_t v = 0; v < nv; v++) all[v] = !df->values[v].constant;
    memset(&s, 0, sizeof s);
    hbm_status rc = simulate(c, all, &s);
    if (!rc) st->total_fragmentation_bytes = (int64_t)st->total_allocation_bytes - (int64_t)nofrag_peak(df, &s);
    sim_free(&s);
    hbmi_free(all);
    TRY(rc);
    TRY(rank_peaks(c));
    return peak_step(c);
}

hbm_status hbm_plan_run(hbm_hlo_module *m, const hbm_plan_options *o, hbm_plan **out) {
    if (!m || !out) return hbmi_error(HBM_ERR_INVALID, "plan: NULL argument");
    *out = NULL;
    if (o && o->alignment && ((o->alignment & (o->alignment - 1)) || o->alignment > HBM_PLAN_ALIGNMENT_MAX))
        return hbmi_error(HBM_ERR_INVALID, "plan: alignment %" PRIu64 " is not a power of two up to %" PRIu64 " (1GiB)",
                          o->alignment, HBM_PLAN_ALIGNMENT_MAX);
    if (o && o->heap > HBM_PLAN_HEAP_SEQUENTIAL)
        return hbmi_error(HBM_ERR_INVALID, "plan: heap %u is not a heap packing (0 to %u)", o->heap, HBM_PLAN_HEAP_SEQUENTIAL);
    hbm_plan *p = hbmi_calloc(1, sizeof *p);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "plan: out of host memory");
    hbm_plan_options_default(&p->opt);
    if (o) {
        if (o->alignment) p->opt.alignment = o->alignment, p->alignment_from = HBMI_ALIGN_OPTION;
        if (o->pointer_size) p->opt.pointer_size = o->pointer_size;
        p->opt.backend = o->backend;
        p->opt.tuple_align = o->tuple_align;
        p->opt.heap = o->heap;
    }
    p->m = m;
    p->backend_evidence = HBMI_EVIDENCE_OPTION;
    if (p->opt.backend == HBM_BACKEND_AUTO) p->opt.backend = detect_backend(m, &p->backend_evidence);
    /* XLA:GPU aligns buffers to kXlaAllocatedBufferAlignBytes: 128 bytes, 256 in builds since
     * mid-2025, which a file with XLA's own assignment shows (src/hlo/proto_read.c); XLA:CPU
     * slices its temp buffer at 64 (cpu_function_runtime::Align) */
    if (!p->opt.alignment && p->opt.backend == HBM_BACKEND_GPU && m->xla && m->xla->alignment)
        p->opt.alignment = m->xla->alignment, p->alignment_from = HBMI_ALIGN_XLA;
    /* operands written "%x#N" are the print form of XLA builds from 2026, which align to 256 */
    if (!p->opt.alignment && p->opt.backend == HBM_BACKEND_GPU && m->tuple_refs)
        p->opt.alignment = 256, p->alignment_from = HBMI_ALIGN_TEXT;
    if (!p->opt.alignment) p->opt.alignment = p->opt.backend == HBM_BACKEND_CPU ? 64 : 128;
    p->stats.backend = p->opt.backend;
    /* XLA:TPU: a tuple's table holds 4 bytes an element, rounded up to 512 (v4, v5e) or 32
     * (v5p, v6e) bytes; without a device named, v5e's */
    if (p->opt.backend == HBM_BACKEND_TPU) {
        if (!o || !o->pointer_size || o->pointer_size == 8) p->opt.pointer_size = 4;
        if (!p->opt.tuple_align) p->opt.tuple_align = 512;
    }
    /* XLA:TPU packs its HBM temp heap sequentially (v4, v5e, v5p, v6e; docs/tpu.md, Rules) */
    if (p->opt.heap == HBM_PLAN_HEAP_DEFAULT)
        p->opt.heap = p->opt.backend == HBM_BACKEND_TPU ? HBM_PLAN_HEAP_SEQUENTIAL : HBM_PLAN_HEAP_BEST_OF;
    hbm_status s = hbmi_df_run(m, p->opt.pointer_size, p->opt.tuple_align, &p->df);
    if (s != HBM_OK) {
        hbm_plan_free(p);
        return s;
    }
    /* HloDataflowAnalysis::CanShareOperandBufferWithUser (xla/hlo/analysis/
     * hlo_dataflow_analysis.cc): operand and user of different shapes share only where the
     * backend's AliasInfo::MayAlias says so; XLA:GPU's hint lets a fusion take an operand
     * of the same size through a bitcast, XLA:CPU gives none (a dot f32[1,5] read by a
     * fusion of f32[5] keeps its own temp buffer in its dumps, JAX 0.10.2) */
    p->df->fusion_shapes_equal = p->opt.backend == HBM_BACKEND_CPU;
    ctx c = {p, p->df, NULL, 0, 0, NULL, 0};
    s = run(&c);
    hbmi_free(c.alloc_indices);
    hbmi_free(c.delayed);
    if (s) {
        hbm_plan_free(p);
        return s;
    }
    *out = p;
    return HBM_OK;
}

hbm_status hbm_plan_get_stats(const hbm_plan *p, hbm_plan_stats *out) {
    if (!p || !out) return hbmi_error(HBM_ERR_INVALID, "plan: NULL argument");
    *out = p->stats;
    return HBM_OK;
}

size_t hbm_plan_peak_buffers(const hbm_plan *p, hbm_plan_buffer *out, size_t max) {
    if (!p) return 0;
    size_t n = p->n_peak < max ? p->n_peak : max;
    if (out) memcpy(out, p->peak, sizeof *out * n);
    return n;
}

const hbm_timeline *hbm_plan_timeline(const hbm_plan *p) {
    if (!p) return NULL;
    if (!p->tl && build_timeline((hbm_plan *)p) != HBM_OK) return NULL; /* built on first use */
    return p->tl;
}

const char *hbm_plan_step_name(const hbm_plan *p, int64_t t) {
    static _Thread_local char buf[256];
    if (!p || t < 0 || (uint64_t)t >= p->df->n_flat) return "";
    const hbmi_instr *in = hbmi_df_instr(p->df, p->df->flat[t]);
    snprintf(buf, sizeof buf, "%.*s", (int)in->name.n, in->name.p);
    return buf;
}

/* The computation that runs step t and who calls it, outward to the entry:
 * "%body.3 (while body of while.5) < %command_buffer.1 (called by call.2) < %main". */
const char *hbm_plan_step_where(const hbm_plan *p, int64_t t) {
    static _Thread_local char buf[512];
    buf[0] = 0;
    if (!p || t < 0 || (uint64_t)t >= p->df->n_flat) return buf;
    const hbm_hlo_module *m = p->m;
    uint32_t ci = p->df->gid_comp[p->df->flat[t]];
    size_t len = 0;
    for (int depth = 0; depth < 16; depth++) {
        const hbmi_comp *c = &m->comps[ci];
        int w = snprintf(buf + len, sizeof buf - len, "%s%%%.*s", depth ? " < " : "", (int)c->name.n, c->name.p);
        if (w < 0 || (size_t)w >= sizeof buf - len) break;
        len += (size_t)w;
        if (ci == m->entry) break;
        /* the sequential instruction that calls it */
        int found = 0;
        for (uint32_t cj = 0; cj < m->n_comps && !found; cj++) {
            const hbmi_comp *cc = &m->comps[cj];
            if (cc->kind != HBMI_COMP_SEQUENTIAL) continue;
            for (uint32_t i = 0; i < cc->n && !found; i++) {
                const hbmi_instr *in = &cc->ins[i];
                for (uint32_t k = 0; k < in->n_called && !found; k++) {
                    if (in->called[k] != ci) continue;
                    const char *role = in->called_role[k] == HBMI_CALLED_BODY        ? "while body of "
                                       : in->called_role[k] == HBMI_CALLED_CONDITION ? "while condition of "
                                       : in->called_role[k] == HBMI_CALLED_BRANCH    ? "branch of "
                                                                                     : "called by ";
                    w = snprintf(buf + len, sizeof buf - len, " (%s%.*s)", role, (int)in->name.n, in->name.p);
                    if (w > 0 && (size_t)w < sizeof buf - len) len += (size_t)w;
                    ci = cj;
                    found = 1;
                }
            }
        }
        if (!found) break;
    }
    return buf;
}
