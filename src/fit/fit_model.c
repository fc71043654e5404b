/* fit_model.c - the liveness model fit optimizes over, and the candidate changes.
 *
 * The axis is the plan's flattened schedule (HloLiveRange's times: while bodies and called
 * computations inlined where they run). live[t] is the bytes of device buffers (temps, outputs) live at
 * time t, each buffer over the union of its values' live ranges, as the plan assigned them.
 * Outputs count from their definition on; parameters and constants are outside the model.
 * A candidate is one value and one idle span of it: the time between its definition (or one
 * use) and its next use. Recomputing it (a clone before the next use) frees its bytes over the
 * span and keeps its operands live until the clone runs; moving it to the host frees them for
 * the price of two transfers. The search (fit.c) and XLA's algorithm (fit_xla.c) choose among
 * the same candidates; the module written with the choice is planned again to verify it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit/fit_internal.h"

/* Peak FP32 FLOP/s, device memory bandwidth and host link bandwidth per direction, from the
 * vendors' datasheets (docs/fit.md names them). */
static const hbmi_fit_rates rates[] = {
    {"A100", 19.5e12, 2.039e12, 32e9},  /* A100 80GB SXM: HBM2e 2039 GB/s, PCIe Gen4 64 GB/s both ways */
    {"H100", 67e12, 3.35e12, 64e9},     /* H100 SXM: HBM3 3.35 TB/s, PCIe Gen5 128 GB/s both ways */
    {"H200", 67e12, 4.8e12, 64e9},      /* H200 SXM: HBM3e 4.8 TB/s, PCIe Gen5 128 GB/s */
    {"V100", 15.7e12, 900e9, 16e9},     /* V100 SXM2: HBM2 900 GB/s, PCIe Gen3 32 GB/s */
    {"B200", 80e12, 8e12, 64e9},        /* B200: HBM3e 8 TB/s, PCIe Gen5 (PCIe Gen6 host: not assumed) */
    {"L4", 30.3e12, 300e9, 32e9},       /* L4: GDDR6 300 GB/s, PCIe Gen4 x16 */
    {"A10", 31.2e12, 600e9, 32e9},      /* A10: GDDR6 600 GB/s, PCIe Gen4 */
    {"T4", 8.1e12, 320e9, 16e9},        /* T4: GDDR6 320 GB/s, PCIe Gen3 */
    {"RTX-4090", 82.6e12, 1008e9, 32e9}, /* RTX 4090: GDDR6X 1008 GB/s, PCIe Gen4 */
    {"MI300X", 163.4e12, 5.3e12, 64e9}, /* MI300X: HBM3 5.3 TB/s, PCIe Gen5 */
    {"TPU-v4", 275e12, 1.2e12, 32e9},   /* TPU v4: bf16 275 TFLOPS, HBM 1200 GB/s; host: PCIe Gen4 assumed */
    {"TPU-v5e", 197e12, 819e9, 32e9},   /* TPU v5e: bf16 197 TFLOPS, HBM 819 GB/s; host: PCIe Gen4 assumed */
    {"TPU-v5p", 459e12, 2.765e12, 32e9}, /* TPU v5p: bf16 459 TFLOPS, HBM 2765 GB/s; host: assumed */
};

const hbmi_fit_rates *hbmi_fit_rates_for(const char *device, hbm_backend b) {
    if (device) {
        const hbm_device_model *dm = hbm_device_model_find(device);
        const char *nm = dm ? dm->name : device;
        for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
            if (!strncmp(nm, rates[i].name, strlen(rates[i].name))) return &rates[i];
    }
    /* no device: the A100 (the GPU the shared dumps came from), TPU v5e for TPU modules */
    return b == HBM_BACKEND_TPU ? &rates[11] : &rates[0];
}

/* --- FLOPs from shapes ---------------------------------------------------------------------------- */
/* The integers of attribute key={a,b,...} in instruction in's text; count, or -1 if absent. */
static int attr_ints(const hbm_hlo_module *m, const hbmi_instr *in, const char *key, int64_t *out, int max) {
    const char *s = m->text + in->off, *end = m->text + m->len;
    const char *e = s;
    while (e < end && *e != '\n') e++;
    size_t kl = strlen(key);
    for (const char *q = s; q + kl < e; q++) {
        if (memcmp(q, key, kl) || (q > s && q[-1] != ' ' && q[-1] != ',')) continue;
        q += kl;
        if (*q == '{') q++;
        int n = 0;
        while (q < e && *q != '}' && *q != ',' && *q != ' ' && n < max) {
            char *nx;
            long long v = strtoll(q, &nx, 10);
            if (nx == q) break;
            out[n++] = v;
            q = nx;
            if (*q == ',' && q + 1 < e && q[1] >= '0' && q[1] <= '9') q++;
            else break;
        }
        return n;
    }
    return -1;
}

static uint64_t elems(const hbmi_shape *s) {
    if (!s || s->prim == HBMI_PRIM_TUPLE) {
        uint64_t t = 0;
        for (uint32_t i = 0; s && i < s->n; i++) t += elems(&s->elems[i]);
        return t;
    }
    return hbmi_shape_elements(s);
}

static int is_opc(const hbmi_instr *in, const char *w) {
    size_t n = strlen(w);
    return in->opcode.n == n && !memcmp(in->opcode.p, w, n);
}

static uint64_t flops_of(const hbm_hlo_module *m, const hbmi_comp *c, const hbmi_instr *in, int depth);

static uint64_t comp_flops(const hbm_hlo_module *m, uint32_t ci, int depth) {
    const hbmi_comp *c = &m->comps[ci];
    uint64_t t = 0;
    for (uint32_t i = 0; i < c->n; i++) t += flops_of(m, c, &c->ins[i], depth + 1);
    return t;
}

/* FLOPs of one instruction: dot 2*out*K, convolution 2*out*(kernel/out features), fft
 * 5 N log2 n, reduce the input's elements, elementwise the output's; fusions the sum of their
 * instructions; data movement none. */
static uint64_t flops_of(const hbm_hlo_module *m, const hbmi_comp *c, const hbmi_instr *in, int depth) {
    if (depth > 8) return 0;
    uint64_t out = elems(in->shape);
    if (in->op == HOP_FUSION) {
        uint64_t t = 0;
        for (uint32_t k = 0; k < in->n_called; k++) t += comp_flops(m, in->called[k], depth);
        return t;
    }
    if (in->op == HOP_ELEMENTWISE) return out;
    if (is_opc(in, "dot")) {
        int64_t cd[8];
        int n = attr_ints(m, in, "lhs_contracting_dims=", cd, 8);
        uint64_t k = 1;
        const hbmi_shape *l = in->n_ops ? c->ins[in->ops[0]].shape : NULL;
        for (int i = 0; l && i < n; i++)
            if (cd[i] >= 0 && (uint32_t)cd[i] < l->n) k *= (uint64_t)l->dims[cd[i]];
        return 2 * out * k;
    }
    if (is_opc(in, "convolution") && in->n_ops >= 2) {
        const hbmi_shape *kern = c->ins[in->ops[1]].shape;
        uint64_t ke = elems(kern), of = 1;
        /* dim_labels=b01f_01io->b01f: 'o' in the kernel part is its output feature dimension */
        const char *s = m->text + in->off, *e = s;
        while (*e && *e != '\n') e++;
        const char *dl = NULL;
        for (const char *q = s; q + 11 < e && !dl; q++)
            if (!memcmp(q, "dim_labels=", 11)) dl = q + 11;
        if (dl) {
            const char *u = dl;
            while (u < e && *u != '_') u++;
            for (uint32_t d = 0; u + 1 + d < e && u[1 + d] != '-' && d < kern->n; d++)
                if (u[1 + d] == 'o') of = (uint64_t)kern->dims[d];
        }
        return 2 * out * (of ? ke / of : ke);
    }
    if (is_opc(in, "fft")) {
        int64_t fl[4];
        int n = attr_ints(m, in, "fft_length=", fl, 4);
        double len = 1;
        for (int i = 0; i < n; i++) len *= (double)fl[i];
        return len > 1 ? (uint64_t)(5.0 * (double)out * log2(len)) : out;
    }
    if (is_opc(in, "reduce") || is_opc(in, "reduce-window")) {
        uint64_t t = 0;
        for (uint32_t k = 0; k < in->n_ops / 2 + (in->n_ops == 1); k++) t += elems(c->ins[in->ops[k]].shape);
        return t;
    }
    return 0;
}

/* --- what XLA may recompute (HloRematerialization's IsRematerializable) -------------------------- */
static const char *const side_effects[] = {
    "rng", "rng-bit-generator", "rng-get-and-update-state", "infeed", "outfeed", "send", "send-done", "recv",
    "recv-done", "after-all", "all-reduce", "all-gather", "all-to-all", "reduce-scatter", "collective-permute",
    "collective-broadcast", "ragged-all-to-all", "custom-call", NULL};

static int side_effecting(const hbmi_instr *in) {
    for (const char *const *w = side_effects; *w; w++)
        if (is_opc(in, *w)) return 1;
    return 0;
}

/* layout text of in's shape: after ']' up to the opcode */
static hbmi_str layout_of(const hbm_hlo_module *m, const hbmi_instr *in) {
    const char *s = m->text + in->off, *e = in->opcode.p;
    hbmi_str r = {e, 0};
    for (const char *q = s; q < e; q++)
        if (*q == ']') r.p = q + 1;
    r.n = (uint32_t)(e - r.p);
    return r;
}

int hbmi_fit_can_clone(const hbm_hlo_module *m, const hbmi_comp *c, const hbmi_instr *in) {
    switch (in->op) {
    case HOP_PARAMETER: case HOP_CONSTANT: case HOP_CALL: case HOP_CONDITIONAL: case HOP_WHILE:
    case HOP_CUSTOM_CALL: case HOP_TUPLE: case HOP_GTE: case HOP_BITCAST: case HOP_ASYNC_START:
    case HOP_ASYNC_UPDATE: case HOP_ASYNC_DONE: case HOP_COPY_START: case HOP_COPY_DONE: case HOP_LEGACY_START:
    case HOP_ALL_REDUCE_START: case HOP_ALL_REDUCE_DONE: case HOP_SEND: case HOP_RECV: case HOP_SEND_DONE:
    case HOP_RECV_DONE: case HOP_DOMAIN: case HOP_OPT_BARRIER: case HOP_ADD_DEPENDENCY:
        return 0;
    default:
        break;
    }
    /* a synchronous collective may be cloned unless its layout is constrained (XLA: for an
     * HloCollectiveInstruction IsRematerializable is !constrain_layout(); every device runs the
     * same program, so each clones it); the asynchronous pairs above stay where they are */
    static const char *const collectives[] = {"all-reduce", "all-gather", "all-to-all", "reduce-scatter",
                                              "collective-permute", "collective-broadcast", "ragged-all-to-all",
                                              NULL};
    for (const char *const *w = collectives; *w; w++)
        if (is_opc(in, *w)) {
            const char *s = m->text + in->off, *e = s;
            while (*e && *e != '\n') e++;
            for (const char *q = s; q + 22 <= e; q++)
                if (!memcmp(q, "constrain_layout=true", 21)) return 0;
            return 1;
        }
    if (side_effecting(in)) return 0;
    if (in->op == HOP_COPY && in->n_ops == 1) { /* copies copy-insertion added: same layout */
        hbmi_str a = layout_of(m, in), b = layout_of(m, &c->ins[in->ops[0]]);
        if (a.n == b.n && !memcmp(a.p, b.p, a.n)) return 0;
    }
    if (in->op == HOP_FUSION) /* a fusion has the side effects of what it fuses */
        for (uint32_t k = 0; k < in->n_called; k++) {
            const hbmi_comp *fc = &m->comps[in->called[k]];
            for (uint32_t i = 0; i < fc->n; i++)
                if (side_effecting(&fc->ins[i]) || fc->ins[i].op == HOP_CUSTOM_CALL) return 0;
        }
    return 1;
}

/* --- the model ------------------------------------------------------------------------------------- */
/* a device buffer that is neither a parameter, a constant nor thread-local (temp, or placed
 * in an output allocation); with movable, also not an output itself (not live out) */
static int device_value(const hbm_plan *p, uint32_t v, int movable) {
    if (!hbmi_plan_value_in_device_temp(p, v)) return 0;
    const hbmi_df *df = hbmi_plan_df(p);
    const hbmi_value *val = &df->values[v];
    if (val->entry_param || val->constant) return 0;
    return !movable || !df->buffers[val->buffer].live_out;
}
#define temp_device(p, v) device_value(p, v, 1)

static hbm_status add_cand(hbmi_fit_model *mo, const hbmi_fit_cand *c) {
    if (mo->n_cand == mo->cap_cand) {
        size_t cap = mo->cap_cand;
        if (hbmi_grow((void **)&mo->cand, &cap, (size_t)mo->n_cand + 1, sizeof *mo->cand))
            return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
        mo->cap_cand = (uint32_t)cap;
    }
    mo->cand[mo->n_cand++] = *c;
    return HBM_OK;
}


/* The uses of instruction i's buffers as XLA's GetUsers sees them: the users of i and of its
 * aliases that are bitcasts and get-tuple-elements (IsSupportedIndirectUser); for a tuple-shaped
 * i (a multi-output fusion) the get-tuple-element says which element. Any other alias (a
 * tuple, a while's operand) or a user that is the root makes the buffer an indirect use or
 * live out: returns -1 (not a candidate). *aliased: some use is through an alias. */
typedef struct use_t {
    int64_t t;
    uint32_t ins;  /* the user */
    uint32_t elem; /* the element of a tuple-shaped value (node index), 0 for an array */
    int64_t t_end; /* the read ends here: an asynchronous start reads until its done */
    uint32_t ins_end;
} use_t;

static int is_async_start(const hbmi_instr *in) {
    return in->op == HOP_ASYNC_START || in->op == HOP_LEGACY_START || in->op == HOP_ALL_REDUCE_START ||
           in->op == HOP_COPY_START;
}

/* A use by instruction ui of computation c at its time; an asynchronous start keeps reading
 * its operands until its done (the latest of its readers). */
static use_t use_at(const hbmi_comp *c, uint32_t ui, uint32_t elem) {
    const hbmi_instr *us = &c->ins[ui];
    use_t r = {us->time, ui, elem, us->time, ui};
    if (is_async_start(us))
        for (uint32_t k = 0; k < us->n_users; k++) {
            const hbmi_instr *d = &c->ins[us->users[k]];
            if (d->time > r.t_end) r.t_end = d->time, r.ins_end = us->users[k];
        }
    return r;
}

/* A candidate over the span between the read that ended at prev (instruction prev_ins, or
 * the definition) and the next read `use`: bytes of instruction ins of computation ci, its
 * kind still to be set. */
static hbmi_fit_cand span_cand(const hbmi_fit_model *mo, uint32_t ci, uint32_t ins, uint32_t group, int64_t prev,
                               uint32_t prev_ins, const use_t *use, uint64_t bytes) {
    hbmi_fit_cand cd;
    memset(&cd, 0, sizeof cd);
    cd.lo = (uint32_t)(prev + 1);
    cd.hi = (uint32_t)(use->t - 1);
    cd.bytes = bytes;
    cd.group = group;
    cd.verified_peak = -1;
    cd.depth = mo->depth ? mo->depth[ci] : 0;
    cd.edit.comp = ci;
    cd.edit.ins = ins;
    cd.edit.at = use->ins;
    cd.edit.from = prev_ins;
    cd.edit.param = -1;
    return cd;
}

/* The span as a host offload: size bytes copied out and back at the host bandwidth. */
static hbm_status add_offload(hbmi_fit_model *mo, const hbmi_fit_rates *r, hbmi_fit_cand oc, uint64_t size) {
    oc.edit.kind = HBM_FIT_OFFLOAD;
    oc.bytes_read = size;
    oc.cost_s = 2.0 * (double)size / r->host_bw;
    return add_cand(mo, &oc);
}

static int collect_uses(const hbmi_comp *c, uint32_t i, uint32_t elem, int depth, use_t *u, uint32_t *nu,
                        uint32_t cap, int *aliased) {
    const hbmi_instr *in = &c->ins[i];
    if (depth > 8) return -1;
    for (uint32_t k = 0; k < in->n_users; k++) {
        uint32_t ui = in->users[k];
        const hbmi_instr *us = &c->ins[ui];
        if (us->is_root || us->time < 0 || us->op == HOP_TUPLE || us->op == HOP_WHILE) return -1;
        /* an alias's own place in the schedule holds the buffer too (XLA: IsInUse while it is
         * placed): it ends a span like a reader */
        if (us->op == HOP_BITCAST) {
            *aliased = 1;
            if (*nu == cap) return -1;
            u[(*nu)++] = use_at(c, ui, elem);
            if (collect_uses(c, ui, elem, depth + 1, u, nu, cap, aliased) < 0) return -1;
            continue;
        }
        if (us->op == HOP_GTE) {
            /* a flat tuple's element: nested tuples are not candidates (XLA: index size > 1) */
            if (depth > 0 || in->shape->prim != HBMI_PRIM_TUPLE || us->gte_index < 0 ||
                (uint64_t)us->gte_index >= in->shape->n || us->shape->prim == HBMI_PRIM_TUPLE)
                return -1;
            *aliased = 1;
            if (*nu == cap) return -1;
            u[(*nu)++] = use_at(c, ui, (uint32_t)us->gte_index + 1);
            if (collect_uses(c, ui, (uint32_t)us->gte_index + 1, depth + 1, u, nu, cap, aliased) < 0) return -1;
            continue;
        }
        if (in->shape->prim == HBMI_PRIM_TUPLE && depth == 0) return -1; /* the whole tuple read */
        if (*nu == cap) return -1;
        u[(*nu)++] = use_at(c, ui, elem);
    }
    return 0;
}

static int cmp_use(const void *a, const void *b) {
    const use_t *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* The candidates of instruction i of computation ci. */
static hbm_status value_cands(hbmi_fit_model *mo, const hbmi_fit_rates *r, uint32_t ci, uint32_t i, int remat,
                              int offload, uint64_t min_bytes) {
    const hbm_plan *p = mo->p;
    const hbmi_df *df = hbmi_plan_df(p);
    const hbm_hlo_module *m = hbmi_plan_module(p);
    const hbmi_comp *c = &m->comps[ci];
    const hbmi_instr *in = &c->ins[i];
    if (in->is_root || in->time < 0 || !in->n_users || in->shape->memory_space) return HBM_OK;
    uint32_t gid = df->comp_base[ci] + i;
    /* every buffer i defines (a tuple: its index table and each element) is a device temp */
    uint32_t nodes = in->shape->prim == HBMI_PRIM_TUPLE ? in->shape->nodes : 1;
    if (nodes > 64) return HBM_OK;
    uint64_t esize[64];
    int64_t elast[64];
    uint64_t size = 0;
    for (uint32_t nd = 0; nd < nodes; nd++) {
        if (nd && hbmi_shape_node(in->shape, nd)->prim == HBMI_PRIM_TUPLE) return HBM_OK;
        const hbmi_vset *vs = hbmi_df_set(df, gid, nd);
        uint32_t v = UINT32_MAX;
        for (uint32_t k = 0; k < vs->n; k++)
            if (df->values[hbmi_vset_at(vs, k)].gid == gid) v = hbmi_vset_at(vs, k);
        if (v == UINT32_MAX || !temp_device(p, v) || !df->values[v].has_range) return HBM_OK;
        esize[nd] = df->values[v].size;
        elast[nd] = -1;
        size += esize[nd];
    }
    if (size < min_bytes || size == 0) return HBM_OK;
    use_t us[64];
    uint32_t nu = 0;
    int aliased = 0;
    if (collect_uses(c, i, 0, 0, us, &nu, 64, &aliased) < 0 || !nu) return HBM_OK;
    hbmi_qsort(us, nu, sizeof *us, cmp_use);
    for (uint32_t k = 0; k < nu; k++)
        if (us[k].t_end > elast[us[k].elem]) elast[us[k].elem] = us[k].t_end;
    if (nodes == 1) {
        /* used past its last user (through a call's parameter): keep it */
        uint32_t v = UINT32_MAX;
        const hbmi_vset *vs = hbmi_df_set(df, gid, 0);
        for (uint32_t k = 0; k < vs->n; k++)
            if (df->values[hbmi_vset_at(vs, k)].gid == gid) v = hbmi_vset_at(vs, k);
        uint32_t lk = 0;
        for (uint32_t k = 1; k < nu; k++)
            if (us[k].t_end > us[lk].t_end) lk = k;
        const hbmi_instr *last = &c->ins[us[lk].ins];
        if (df->values[v].end > us[lk].t_end && last->op != HOP_CALL && last->op != HOP_CONDITIONAL) return HBM_OK;
    }
    int clone = remat && hbmi_fit_can_clone(m, c, in) && in->n_ops <= 4;
    uint64_t fl = clone ? flops_of(m, c, in, 0) : 0, rd = 0;
    for (uint32_t k = 0; k < in->n_ops; k++) rd += hbmi_shape_bytes(c->ins[in->ops[k]].shape, 8);
    int64_t prev = in->time;
    uint32_t prev_ins = i;
    for (uint32_t u = 0; u < nu; u++) {
        int64_t t = us[u].t;
        if (t - prev >= 2) {
            /* the bytes live across the span: the elements read again at or after t */
            uint64_t bytes = nodes == 1 ? size : esize[0];
            for (uint32_t nd = 1; nd < nodes; nd++)
                if (elast[nd] >= t) bytes += esize[nd];
            hbmi_fit_cand cd = span_cand(mo, ci, i, gid, prev, prev_ins, &us[u], bytes);
            if (clone) {
                hbmi_fit_cand rc = cd;
                rc.edit.kind = HBM_FIT_REMATERIALIZE;
                rc.edit.drop = prev == in->time; /* nothing uses the original: a move */
                for (uint32_t k = 0; k < in->n_ops; k++) {
                    uint32_t og = df->comp_base[ci] + in->ops[k];
                    const hbmi_vset *vs = hbmi_df_set(df, og, 0);
                    int dup = 0;
                    for (uint32_t j = 0; j < k; j++) dup |= in->ops[j] == in->ops[k];
                    if (dup) continue;
                    /* the operand's buffer is live to its last value's end (the model counts a
                     * buffer over the union of its values: a loop's slot stays live) */
                    int64_t end = -1;
                    uint64_t ob = 0;
                    for (uint32_t j = 0; j < vs->n; j++) {
                        uint32_t ov = hbmi_vset_at(vs, j);
                        if (!temp_device(p, ov) || !df->values[ov].has_range) continue;
                        const hbmi_buffer *bu = &df->buffers[df->values[ov].buffer];
                        for (uint32_t q = 0; q < bu->n_values; q++)
                            if (df->values[bu->values[q]].has_range && df->values[bu->values[q]].end > end)
                                end = df->values[bu->values[q]].end;
                        ob += bu->size;
                    }
                    if (end >= 0 && end < t - 1 && ob) {
                        hbmi_fit_pen *pe = &rc.pen[rc.n_pen++];
                        pe->lo = (uint32_t)(end + 1);
                        pe->hi = (uint32_t)(t - 1);
                        pe->bytes = ob;
                    }
                }
                rc.flops = rc.edit.drop ? 0 : fl;
                rc.bytes_read = rc.edit.drop ? 0 : rd;
                rc.cost_s = rc.edit.drop ? 0 : (double)rc.flops / r->flops + (double)(rc.bytes_read + size) / r->hbm_bw;
                hbm_status s = add_cand(mo, &rc);
                if (s) return s;
            }
            /* host offload: an array read directly (XLA's offload skips bitcast and tuple users) */
            if (offload && !aliased && nodes == 1 && t - prev >= 3 && in->shape->n >= 1) {
                hbm_status s = add_offload(mo, r, cd, size);
                if (s) return s;
            }
        }
        if (us[u].t_end > prev) {
            prev = us[u].t_end;
            prev_ins = us[u].ins_end;
        }
    }
    return HBM_OK;
}

/* Host offload of a value read under another instruction's name g: one element of a
 * tuple-shaped value read through its get-tuple-element (a cuBLAS call's result, a
 * multi-output fusion's element), or an asynchronous op's result under its -done (a
 * collective-permute's, an all-gather's, while it waits for its next reader). g's value v is
 * copied to host memory after g (or its reader before the span) and back before g's next
 * reader; g moves next to the definition when the span starts there (a get-tuple-element
 * scheduled late). XLA's own offload takes single-buffer values it defines itself only; the
 * pair is the same as for an array. */
static hbm_status offload_spans(hbmi_fit_model *mo, const hbmi_fit_rates *r, uint32_t ci, uint32_t g, uint32_t v,
                                int64_t def_time, uint32_t def_ins, uint64_t min_bytes) {
    const hbm_plan *p = mo->p;
    const hbmi_df *df = hbmi_plan_df(p);
    const hbmi_comp *c = &hbmi_plan_module(p)->comps[ci];
    const hbmi_instr *gi = &c->ins[g];
    if (gi->is_root || gi->time < 0 || gi->shape->prim == HBMI_PRIM_TUPLE || gi->shape->memory_space ||
        gi->shape->n < 1 || gi->n_users > 64 || !temp_device(p, v) || !df->values[v].has_range)
        return HBM_OK;
    uint64_t size = df->values[v].size;
    if (size < min_bytes || !size) return HBM_OK;
    use_t us[64];
    uint32_t nu = 0;
    for (uint32_t u = 0; u < gi->n_users; u++) {
        const hbmi_instr *ui = &c->ins[gi->users[u]];
        if (ui->is_root || ui->time < 0 || ui->op == HOP_TUPLE || ui->op == HOP_WHILE || ui->op == HOP_BITCAST ||
            ui->op == HOP_GTE)
            return HBM_OK;
        us[nu++] = use_at(c, gi->users[u], 0);
    }
    if (!nu) return HBM_OK;
    hbmi_qsort(us, nu, sizeof *us, cmp_use);
    int64_t maxend = -1;
    for (uint32_t k = 0; k < nu; k++)
        if (us[k].t_end > maxend) maxend = us[k].t_end;
    if (df->values[v].end > maxend) return HBM_OK; /* read by something else after */
    int64_t prev = def_time;
    uint32_t prev_ins = def_ins;
    for (uint32_t u = 0; u < nu; u++) {
        int64_t t = us[u].t;
        if (t - prev >= 3) { /* from: before g, which moves next to it */
            hbm_status s = add_offload(mo, r, span_cand(mo, ci, g, df->comp_base[ci] + g, prev, prev_ins, &us[u], size),
                                       size);
            if (s) return s;
        }
        if (us[u].t_end > prev) {
            prev = us[u].t_end;
            prev_ins = us[u].ins_end;
        }
    }
    return HBM_OK;
}

static hbm_status alias_offload_cands(hbmi_fit_model *mo, const hbmi_fit_rates *r, uint32_t ci, uint32_t i,
                                      uint64_t min_bytes) {
    const hbm_plan *p = mo->p;
    const hbmi_df *df = hbmi_plan_df(p);
    const hbmi_comp *c = &hbmi_plan_module(p)->comps[ci];
    const hbmi_instr *in = &c->ins[i];
    if (in->is_root || in->time < 0 || in->shape->memory_space) return HBM_OK;
    uint32_t gid = df->comp_base[ci] + i;
    if (in->op == HOP_ASYNC_DONE && in->shape->prim != HBMI_PRIM_TUPLE) {
        /* the done's result: a value the start defined, read under the done's name */
        const hbmi_vset *vs = hbmi_df_set(df, gid, 0);
        if (vs->n != 1) return HBM_OK;
        uint32_t v = hbmi_vset_at(vs, 0);
        if (df->values[v].gid == gid) return HBM_OK; /* its own value: value_cands has it */
        return offload_spans(mo, r, ci, i, v, in->time, i, min_bytes);
    }
    if (in->shape->prim != HBMI_PRIM_TUPLE) return HBM_OK;
    for (uint32_t k = 0; k < in->n_users; k++) {
        uint32_t g = in->users[k];
        const hbmi_instr *gi = &c->ins[g];
        if (gi->op != HOP_GTE || gi->gte_index < 0 || (uint64_t)gi->gte_index >= in->shape->n) continue;
        int dup = 0;
        for (uint32_t j = 0; j < in->n_users; j++) {
            const hbmi_instr *o = &c->ins[in->users[j]];
            if (in->users[j] != g && (o->op != HOP_GTE || o->gte_index == gi->gte_index)) dup = 1;
        }
        if (dup) continue;
        const hbmi_vset *vs = hbmi_df_set(df, gid, hbmi_shape_child(in->shape, (uint32_t)gi->gte_index));
        if (vs->n != 1 || df->values[hbmi_vset_at(vs, 0)].gid != gid) continue;
        hbm_status s = offload_spans(mo, r, ci, g, hbmi_vset_at(vs, 0), in->time, i, min_bytes);
        if (s) return s;
    }
    return HBM_OK;
}

/* An entry parameter held in host memory (memory_kind="pinned_host"): its S(5) layout and one
 * copy to the device before its first reader, live to its last. It frees its bytes before the
 * first read and after the last; the transfer costs its bytes once at the host link. Only
 * arrays read directly or through bitcasts, not donated, not an output, not in host memory
 * already. Its bytes
 * join live[] (a parameter is otherwise outside the model). */
static hbm_status param_cands(hbmi_fit_model *mo, const hbmi_fit_rates *r, const uint8_t *donated,
                              uint64_t min_bytes) {
    const hbm_plan *p = mo->p;
    const hbmi_df *df = hbmi_plan_df(p);
    const hbm_hlo_module *m = hbmi_plan_module(p);
    const hbmi_comp *c = &m->comps[m->entry];
    for (uint32_t pn = 0; pn < c->n_params; pn++) {
        uint32_t i = c->params[pn];
        const hbmi_instr *in = &c->ins[i];
        if ((donated && donated[pn]) || in->is_root || !in->n_users || in->shape->prim == HBMI_PRIM_TUPLE ||
            in->shape->memory_space || hbmi_param_node_aliased(m, (int64_t)pn, 0, in->shape))
            continue;
        uint32_t gid = df->comp_base[m->entry] + i;
        const hbmi_vset *vs = hbmi_df_set(df, gid, 0);
        if (vs->n != 1) continue;
        uint32_t v = hbmi_vset_at(vs, 0);
        if (df->values[v].gid != gid || !df->values[v].has_range || df->buffers[df->values[v].buffer].live_out)
            continue;
        uint64_t size = df->values[v].size;
        if (size < min_bytes || !size) continue;
        int64_t first = INT64_MAX, last = -1;
        uint32_t at = UINT32_MAX;
        int ok = 1;
        for (uint32_t k = 0; k < in->n_users && ok; k++) {
            const hbmi_instr *u = &c->ins[in->users[k]];
            if (u->is_root || u->time < 0 || u->op == HOP_TUPLE || u->op == HOP_WHILE || u->op == HOP_GTE) {
                ok = 0;
                continue;
            }
            /* the copy goes before the first reader (a bitcast reads the copy too) */
            if (u->time < first) first = u->time, at = in->users[k];
            if (u->op == HOP_BITCAST) { /* the readers through it keep the copy live */
                use_t us[64];
                uint32_t nu = 0;
                int aliased = 0;
                if (collect_uses(c, in->users[k], 0, 1, us, &nu, 64, &aliased) < 0) ok = 0;
                for (uint32_t q = 0; q < nu; q++)
                    if (us[q].t_end > last) last = us[q].t_end;
                continue;
            }
            if (use_at(c, in->users[k], 0).t_end > last) last = use_at(c, in->users[k], 0).t_end;
            /* read inside a called computation: the device copy lives to its end */
            for (uint32_t q = 0; q < u->n_called; q++)
                if (m->comps[u->called[q]].kind == HBMI_COMP_SEQUENTIAL && m->comps[u->called[q]].span_end > last)
                    last = m->comps[u->called[q]].span_end;
        }
        if (!ok || at == UINT32_MAX || first < 1) continue;
        hbmi_fit_cand cd;
        memset(&cd, 0, sizeof cd);
        cd.edit.kind = HBM_FIT_OFFLOAD;
        cd.edit.comp = m->entry;
        cd.edit.ins = i;
        cd.edit.at = at;
        cd.edit.from = UINT32_MAX; /* nothing to copy out: the argument arrives in host memory */
        cd.edit.param = pn;
        cd.lo = 0;
        cd.hi = mo->n - 1;
        cd.bytes = size;
        cd.group = gid;
        cd.verified_peak = -1;
        cd.n_pen = 1;
        cd.pen[0].lo = (uint32_t)(first - 1);
        cd.pen[0].hi = (uint32_t)(last < (int64_t)mo->n ? last : mo->n - 1);
        cd.pen[0].bytes = size;
        cd.bytes_read = size;
        cd.cost_s = (double)size / r->host_bw;
        hbm_status s = add_cand(mo, &cd);
        if (s) return s;
        /* the parameter's bytes in the model, over the whole run */
        for (uint32_t t = 0; t < mo->n; t++) mo->live[t] += (int64_t)size;
        mo->params_in_live += size;
    }
    return HBM_OK;
}

hbm_status hbmi_fit_model_build(const hbm_plan *p, const hbmi_fit_rates *r, int remat, int offload,
                                const uint8_t *donated, hbmi_fit_model *mo) {
    memset(mo, 0, sizeof *mo);
    mo->p = p;
    mo->m = hbmi_plan_module(p);
    const hbmi_df *df = hbmi_plan_df(p);
    const hbm_hlo_module *m = hbmi_plan_module(p);
    uint32_t n = df->n_flat;
    mo->n = n;
    mo->live = hbmi_calloc((size_t)n + 2, sizeof *mo->live);
    if (!mo->live) return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    /* live bytes per time: each device buffer but parameters and constants, over its values'
     * union (live_xla: without the outputs, as XLA's tracker counts) */
    mo->live_xla = hbmi_calloc((size_t)n + 2, sizeof *mo->live_xla);
    if (!mo->live_xla) return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    for (uint32_t b = 0; b < df->n_buffers; b++) {
        const hbmi_buffer *bu = &df->buffers[b];
        int64_t lo = INT64_MAX, hi = -1;
        int dev = 0;
        for (uint32_t k = 0; k < bu->n_values; k++) {
            uint32_t v = bu->values[k];
            if (!df->values[v].has_range) continue;
            dev |= device_value(p, v, 0);
            if (df->values[v].start < lo) lo = df->values[v].start;
            if (df->values[v].end > hi) hi = df->values[v].end;
        }
        if (!dev || hi < 0 || lo < 0) continue;
        if (hi >= (int64_t)n) hi = n - 1;
        mo->live[lo] += (int64_t)bu->size;
        mo->live[hi + 1] -= (int64_t)bu->size;
        if (!bu->live_out) {
            mo->live_xla[lo] += (int64_t)bu->size;
            mo->live_xla[hi + 1] -= (int64_t)bu->size;
        }
    }
    for (uint32_t t = 1; t < n; t++) {
        mo->live[t] += mo->live[t - 1];
        mo->live_xla[t] += mo->live_xla[t - 1];
    }

    hbm_plan_stats st;
    hbm_plan_get_stats(p, &st);
    mo->fixed = st.peak_bytes - st.temp_size_in_bytes;
    mo->args = st.argument_size_in_bytes;
    const hbmi_shape *rs = m->comps[m->entry].ins[m->comps[m->entry].root].shape;
    for (uint32_t k = 0; k < rs->nodes; k++) mo->outputs_all += hbmi_shape_bytes(hbmi_shape_node(rs, k), 8);
    /* each sequential computation's depth below the entry (XLA handles a caller before the
     * computations it calls: its baseline prefers the outer candidates) */
    mo->depth = hbmi_calloc((size_t)m->n_comps + 1, 1);
    if (!mo->depth) return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    for (int changed = 1, round = 0; changed && round < 16; round++) {
        changed = 0;
        for (uint32_t ci = 0; ci < m->n_comps; ci++) {
            if (m->comps[ci].kind != HBMI_COMP_SEQUENTIAL || (ci != m->entry && !mo->depth[ci])) continue;
            for (uint32_t i = 0; i < m->comps[ci].n; i++) {
                const hbmi_instr *in = &m->comps[ci].ins[i];
                for (uint32_t k = 0; k < in->n_called; k++) {
                    uint32_t cc = in->called[k];
                    if (cc == ci || m->comps[cc].kind != HBMI_COMP_SEQUENTIAL || mo->depth[cc]) continue;
                    mo->depth[cc] = (uint8_t)(mo->depth[ci] + 1 > 250 ? 250 : mo->depth[ci] + 1);
                    changed = 1;
                }
            }
        }
    }
    /* values below 1/4096 of the temp peak cannot matter much; they only slow the search */
    uint64_t min_bytes = st.temp_size_in_bytes / 4096;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        if (m->comps[ci].kind != HBMI_COMP_SEQUENTIAL) continue;
        for (uint32_t i = 0; i < m->comps[ci].n; i++) {
            hbm_status s = value_cands(mo, r, ci, i, remat, offload, min_bytes);
            if (!s && offload) s = alias_offload_cands(mo, r, ci, i, min_bytes);
            if (s) {
                hbmi_fit_model_free(mo);
                return s;
            }
        }
    }
    if (offload) {
        hbm_status s = param_cands(mo, r, donated, min_bytes);
        if (s) {
            hbmi_fit_model_free(mo);
            return s;
        }
    }
    mo->max_live = 0;
    for (uint32_t t = 0; t < n; t++)
        if (mo->live[t] > mo->max_live) mo->max_live = mo->live[t];
    return HBM_OK;
}

void hbmi_fit_model_free(hbmi_fit_model *mo) {
    hbmi_free(mo->live);
    hbmi_free(mo->live_xla);
    hbmi_free(mo->depth);
    hbmi_free(mo->cand);
    hbmi_free(mo->xc);
    hbmi_free(mo->xrd);
    memset(mo, 0, sizeof *mo);
}

hbm_status hbmi_fit_model_add(hbmi_fit_model *mo, const hbmi_fit_cand *c) { return add_cand(mo, c); }

uint64_t hbmi_fit_instr_flops(const hbm_hlo_module *m, const hbmi_comp *c, const hbmi_instr *in) {
    return flops_of(m, c, in, 0);
}
