/* fit_jax.c - fit's changes in the terms of the JAX program that made the module: which pass
 * of autodiff a value belongs to (JAX's name stack in op_name), the source line (metadata, or
 * the module's StackFrames tables), the argument a donation names, and the values a scanned
 * loop saves for its backward loop (scan residuals). Rules and sources: docs/fit.md. */
#include <stdlib.h>
#include <string.h>

#include "fit/fit_result.h"

/* --- the name stack ----------------------------------------------------------------------- */

/* JAX names the backward pass "transpose(jvp(...))" and the forward "jvp(...)" (jax/_src/
 * interpreters/ad.py, the name-stack transforms); recomputed ops sit under
 * "checkpoint/rematted_computation" (jax/_src/ad_checkpoint.py). */
int hbmi_jax_pass(const char *op, size_t n) {
    if (!op || !n) return HBMI_JAX_OTHER;
    if (hbmi_span_has(op, n, "rematted_computation")) return HBMI_JAX_REMAT;
    if (hbmi_span_has(op, n, "transpose(")) return HBMI_JAX_BWD;
    if (hbmi_span_has(op, n, "jvp(")) return HBMI_JAX_FWD;
    return HBMI_JAX_OTHER;
}

int hbmi_jax_has_backward(const hbm_hlo_module *m) {
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c].n; i++) {
            const hbmi_instr *in = &m->comps[c].ins[i];
            int p = hbmi_jax_pass(in->meta_op_name.p, in->meta_op_name.n);
            if (p == HBMI_JAX_BWD || p == HBMI_JAX_REMAT) return 1;
        }
    return 0;
}

/* --- source lines ----------------------------------------------------------------------------- */
/* the metadata's source file unless it is a wrapper's; else the stack frames' user line
 * (the rule and the walk: src/hlo/frames.c) */
int hbmi_jax_where(const hbm_hlo_module *m, const hbmi_instr *in, char *file, size_t cap, int *line) {
    file[0] = 0;
    *line = 0;
    if (in->meta_source_file.n) {
        hbmi_plan_unescape(file, cap, in->meta_source_file.p, in->meta_source_file.n);
        *line = in->meta_source_line;
        if (!hbmi_hlo_wrapper_file(file, strlen(file))) return 1;
        file[0] = 0;
        *line = 0;
    }
    return hbmi_hlo_frame_where(m, in, file, cap, line);
}

/* The Flax module path in an op_name: the top module jvp(NAME) names, then the parts between
 * JAX's own (jit(...), while, body, closed_call, checkpoint, ...) and the primitive: for
 * "jit(step)/jvp(Model)/while/body/closed_call/layers/wi/dot_general", "Model/layers/wi". */
int hbmi_jax_module_path(const char *op, char *out, size_t cap) {
    out[0] = 0;
    const char *last = strrchr(op, '/');
    if (!last) return 0;
    const char *start = op;
    char top[128] = "";
    const char *j = strstr(op, "jvp(");
    if (j && j[4] != ')') {
        const char *e = strchr(j, ')');
        if (e && e - j - 4 < (long)sizeof top) snprintf(top, sizeof top, "%.*s", (int)(e - j - 4), j + 4);
    }
    static const char *const own[] = {"while", "body", "cond", "closed_call", "checkpoint", "rematted_computation",
                                      "branch", "remat", "pjit", "shard_map", "scan", "custom_jvp_call", "custom_vjp_call"};
    for (const char *p = op; p < last;) { /* start after the last part that is JAX's own */
        const char *e = strchr(p, '/');
        size_t n = (size_t)(e - p);
        int mine = memchr(p, '(', n) != NULL;
        for (size_t k = 0; k < sizeof own / sizeof own[0] && !mine; k++) mine = strlen(own[k]) == n && !memcmp(p, own[k], n);
        if (mine) start = e + 1;
        p = e + 1;
    }
    size_t n = start < last ? (size_t)(last - start) : 0;
    if (!n && !top[0]) return 0;
    snprintf(out, cap, "%s%s%.*s", top, top[0] && n ? "/" : "", (int)n, start);
    return 1;
}

/* --- scan residuals --------------------------------------------------------------------- */

static int opcode_is(const hbmi_instr *in, const char *w) {
    return in->opcode.n == strlen(w) && !memcmp(in->opcode.p, w, in->opcode.n);
}

static const hbmi_instr *strip(const hbmi_comp *c, const hbmi_instr *x) {
    for (int k = 0; k < 16 && (x->op == HOP_BITCAST || x->op == HOP_COPY) && x->n_ops; k++) x = &c->ins[x->ops[0]];
    return x;
}

/* the value under JAX's reduce_precision (around a name a policy saves) and converts */
static const hbmi_instr *under(const hbmi_comp *c, const hbmi_instr *x) {
    for (int k = 0; k < 8 && x->n_ops && (opcode_is(x, "reduce-precision") || opcode_is(x, "convert")); k++)
        x = strip(c, &c->ins[x->ops[0]]);
    return x;
}

/* x is element k of the body's parameter (a get-tuple-element of it) */
static int carried(const hbmi_comp *b, const hbmi_instr *x, int64_t k) {
    x = strip(b, x);
    return x->op == HOP_GTE && x->gte_index == k && x->n_ops && b->ins[x->ops[0]].op == HOP_PARAMETER;
}

/* The body's root element k, when it is the carried buffer k updated in place by a
 * dynamic-update-slice of one slice along dimension 0 (bare, or a fusion's root): the body
 * instruction the slice comes from (*val), and the DUS itself (*dus, for its metadata). */
static int writes_slice(const hbm_hlo_module *m, const hbmi_comp *b, const hbmi_instr *x, int64_t k,
                        const hbmi_instr **val, const hbmi_instr **dus, const hbmi_instr **writer) {
    x = strip(b, x);
    int64_t elem = -1; /* an element of a multi-output fusion's tuple */
    if (x->op == HOP_GTE && x->n_ops && b->ins[x->ops[0]].op == HOP_FUSION) {
        elem = x->gte_index;
        x = &b->ins[x->ops[0]];
    }
    if (x->op == HOP_DUS && x->n_ops >= 2 && elem < 0) {
        if (!carried(b, &b->ins[x->ops[0]], k)) return 0;
        *val = under(b, strip(b, &b->ins[x->ops[1]]));
        *dus = *writer = x;
        return 1;
    }
    if (x->op != HOP_FUSION || !x->n_called) return 0;
    const hbmi_comp *f = &m->comps[x->called[0]];
    const hbmi_instr *r = strip(f, &f->ins[f->root]);
    if (elem >= 0) {
        if (r->op != HOP_TUPLE || (uint64_t)elem >= r->n_ops) return 0;
        r = strip(f, &f->ins[r->ops[elem]]);
    } else if (x->shape->prim == HBMI_PRIM_TUPLE) {
        return 0;
    }
    if (r->op != HOP_DUS || r->n_ops < 2) return 0;
    const hbmi_instr *buf = strip(f, &f->ins[r->ops[0]]);
    if (buf->op != HOP_PARAMETER || buf->param_no < 0 || (uint64_t)buf->param_no >= x->n_ops) return 0;
    if (!carried(b, &b->ins[x->ops[buf->param_no]], k)) return 0;
    const hbmi_instr *u = under(f, strip(f, &f->ins[r->ops[1]]));
    if (u->op == HOP_PARAMETER && u->param_no >= 0 && (uint64_t)u->param_no < x->n_ops)
        *val = under(b, strip(b, &b->ins[x->ops[u->param_no]]));
    else
        *val = u; /* computed inside the fusion */
    *dus = r;
    *writer = x;
    return 1;
}

/* the while loop of comp c that takes element k of loop w as an operand of its tuple: the
 * backward loop when its op_name (or its body's) is under transpose(...) */
static int read_by_backward(const hbm_hlo_module *m, const hbmi_comp *c, uint32_t w, int64_t k, uint32_t *bwd,
                            uint32_t *bwd_body, uint32_t *bwd_index) {
    for (uint32_t i = 0; i < c->n; i++) {
        const hbmi_instr *w2 = &c->ins[i];
        if (w2->op != HOP_WHILE || i == w || !w2->n_ops) continue;
        const hbmi_instr *t = &c->ins[w2->ops[0]];
        if (t->op != HOP_TUPLE) continue;
        int found = 0;
        for (uint32_t j = 0; j < t->n_ops && !found; j++) {
            const hbmi_instr *g = strip(c, &c->ins[t->ops[j]]);
            found = g->op == HOP_GTE && g->gte_index == k && g->n_ops && g->ops[0] == w;
            if (found) *bwd_index = j;
        }
        if (!found) continue;
        int back = hbmi_jax_pass(w2->meta_op_name.p, w2->meta_op_name.n) == HBMI_JAX_BWD;
        for (uint32_t q = 0; !back && q < w2->n_called; q++) {
            if (w2->called_role && w2->called_role[q] != HBMI_CALLED_BODY) continue;
            const hbmi_comp *b = &m->comps[w2->called[q]];
            for (uint32_t j = 0; j < b->n && !back; j++)
                back = hbmi_jax_pass(b->ins[j].meta_op_name.p, b->ins[j].meta_op_name.n) == HBMI_JAX_BWD;
        }
        *bwd_body = UINT32_MAX;
        for (uint32_t q = 0; q < w2->n_called; q++)
            if (!w2->called_role || w2->called_role[q] == HBMI_CALLED_BODY) *bwd_body = w2->called[q];
        if (back) {
            *bwd = i;
            return 1;
        }
    }
    return 0;
}

static const char *op_str(hbm_fit_result *r, const hbmi_str *s) {
    char t[1024];
    hbmi_plan_unescape(t, sizeof t, s->p ? s->p : "", s->n);
    return hbmi_fit_str(r, t, strlen(t));
}

hbm_status hbmi_jax_residuals(hbm_fit_result *r, const hbm_plan *p) {
    const hbm_hlo_module *m = r->m;
    hbm_plan_buffer pk[16];
    size_t npk = p ? hbm_plan_peak_buffers(p, pk, 16) : 0;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        const hbmi_comp *c = &m->comps[ci];
        for (uint32_t wi = 0; wi < c->n; wi++) {
            const hbmi_instr *w = &c->ins[wi];
            if (w->op != HOP_WHILE || w->shape->prim != HBMI_PRIM_TUPLE) continue;
            const hbmi_comp *b = NULL;
            for (uint32_t q = 0; q < w->n_called; q++)
                if (!w->called_role || w->called_role[q] == HBMI_CALLED_BODY) b = &m->comps[w->called[q]];
            if (!b || b->ins[b->root].op != HOP_TUPLE) continue;
            const hbmi_instr *root = &b->ins[b->root];
            for (uint32_t k = 0; k < root->n_ops && k < w->shape->n; k++) {
                const hbmi_shape *el = &w->shape->elems[k];
                if (el->prim == HBMI_PRIM_TUPLE || el->n < 2 || el->dims[0] < 2) continue;
                const hbmi_instr *val = NULL, *dus = NULL, *writer = NULL;
                if (!writes_slice(m, b, &b->ins[root->ops[k]], k, &val, &dus, &writer)) continue;
                if (hbmi_jax_pass(dus->meta_op_name.p, dus->meta_op_name.n) != HBMI_JAX_FWD) continue;
                uint32_t bwd, bwd_body, bwd_index;
                if (!read_by_backward(m, c, wi, k, &bwd, &bwd_body, &bwd_index)) continue;
                if (hbmi_grow((void **)&r->res, &r->cap_res, r->n_res + 1, sizeof *r->res))
                    return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
                hbmi_jax_residual *x = &r->res[r->n_res++];
                memset(x, 0, sizeof *x);
                x->layers = el->dims[0];
                x->bytes = hbmi_shape_bytes(el, 8);
                char sh[160];
                hbmi_shape_print(el, sh, sizeof sh);
                x->shape = hbmi_fit_str(r, sh, strlen(sh));
                hbmi_shape one = *el;
                one.n--;
                one.dims++;
                one.tiled_elems = 0;
                hbmi_shape_print(&one, sh, sizeof sh);
                x->per_layer = hbmi_fit_str(r, sh, strlen(sh));
                x->loop = hbmi_fit_str(r, w->name.p, w->name.n);
                x->backward_loop = hbmi_fit_str(r, c->ins[bwd].name.p, c->ins[bwd].name.n);
                x->index = k;
                int64_t j = -1;
                for (uint32_t e = 0; e < root->n_ops && j < 0; e++)
                    if (e != k && carried(b, val, e)) j = e;
                x->carry = j >= 0; /* the slice saved is a carried value: the layer's input */
                x->carry_elem = j;
                x->value_ins = !x->carry && val >= b->ins && val < b->ins + b->n ? (uint32_t)(val - b->ins) : UINT32_MAX;
                const hbmi_instr *src = x->carry ? dus : val;
                x->op_name = op_str(r, x->carry ? &dus->meta_op_name : &val->meta_op_name);
                char file[512];
                int line = 0;
                hbmi_jax_where(m, src, file, sizeof file, &line);
                if (!file[0] && src != dus) hbmi_jax_where(m, dus, file, sizeof file, &line);
                x->source_file = hbmi_fit_str(r, file, strlen(file));
                x->source_line = line;
                /* recomputing it: what computes it, once per layer (computed inside the fusion
                 * that stacks it: that fusion) */
                if (!x->carry) {
                    const hbmi_instr *v = val >= b->ins && val < b->ins + b->n ? val : writer;
                    x->recompute_flops = hbmi_fit_instr_flops(m, b, v) * (uint64_t)x->layers;
                }
                x->maxtext = hbmi_jax_maxtext_name(x->op_name);
                /* a MaxText layer names its input "decoder_layer_input" (checkpoint_name first in
                 * each decoder layer; remat_policy=custom offloads it by that name) */
                for (uint32_t q = 0; x->carry && !x->maxtext && q < b->n; q++) {
                    char t[1024];
                    hbmi_plan_unescape(t, sizeof t, b->ins[q].meta_op_name.p ? b->ins[q].meta_op_name.p : "",
                                       b->ins[q].meta_op_name.n);
                    if (strstr(t, "decoder/layers")) x->maxtext = "decoder_layer_input";
                }
                x->loop_ins = wi;
                x->bwd_body = bwd_body;
                x->fwd_body = (uint32_t)(b - m->comps);
                x->bwd_index = bwd_index;
                x->comp = ci;
                for (size_t q = 0; q < npk && !x->at_peak; q++) x->at_peak = pk[q].size == x->bytes && !strcmp(pk[q].shape, x->shape);
                /* what the backward loop keeps of it when it is not saved: one layer's slice */
                x->estimate = x->bytes - x->bytes / (uint64_t)x->layers;
            }
        }
    }
    return HBM_OK;
}

/* --- MaxText's remat_policy ----------------------------------------------------------------- */
/* MaxText names its layers' projections with checkpoint_name and maps remat_policy to the
 * names saved or offloaded (src/maxtext/layers/nnx_decoders.py, get_remat_policy). The Flax
 * module path in op_name gives the name: its decoder's layers are "decoder/layers" (scanned)
 * or "decoder/layers_N" ("jvp(Transformer)/decoder/layers_0/pre_self_attention_layer_norm/..."
 * in a MaxText op_name), and .../mlp/wi_0/... is "mlpwi_0". */
typedef struct maxtext_policy {
    const char *name;
    const char *saved;     /* space-separated checkpoint names kept on the device */
    const char *offloaded; /* kept in pinned host memory */
} maxtext_policy;

static const maxtext_policy k_maxtext[] = {
    {"minimal", "query_proj value_proj key_proj qkv_proj out_proj mlpwi_0 mlpwi_1 mlpwi mlpwo", ""},
    {"save_dot_except_mlpwi", "query_proj value_proj key_proj qkv_proj out_proj mlpwo", ""},
    {"save_dot_except_mlp", "query_proj value_proj key_proj qkv_proj out_proj", ""},
    {"save_qkv_proj", "query_proj value_proj key_proj qkv_proj", ""},
    {"save_out_proj", "out_proj", ""},
    {"full", "", ""},
    {"qkv_proj_offloaded", "", "query_proj value_proj key_proj"},
    {"minimal_offloaded", "", "query_proj value_proj key_proj qkv_proj out_proj mlpwi_0 mlpwi_1 mlpwi mlpwo"},
};

static int word_in(const char *list, const char *w) {
    size_t n = strlen(w);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ' ');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !memcmp(p, w, n)) return 1;
        p += k;
        while (*p == ' ') p++;
    }
    return 0;
}

/* the MaxText checkpoint name of a value from its op_name, or NULL */
const char *hbmi_jax_maxtext_name(const char *op) {
    if (!op || !strstr(op, "decoder/layers")) return NULL;
    static const struct { const char *path, *name; } k[] = {
        {"/mlp/wi_0/", "mlpwi_0"}, {"/mlp/wi_1/", "mlpwi_1"}, {"/mlp/wi/", "mlpwi"}, {"/mlp/wo/", "mlpwo"},
        {"/query/", "query_proj"}, {"/key/", "key_proj"}, {"/value/", "value_proj"}, {"/qkv_proj/", "qkv_proj"},
        {"/out/", "out_proj"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strstr(op, k[i].path)) return k[i].name;
    return NULL;
}

/* The policy that saves the most names on the device but not `name` (recompute), and the one
 * that offloads it (host). */
void hbmi_jax_maxtext_policies(const char *name, const char **recompute, const char **offload) {
    *recompute = *offload = NULL;
    size_t best = 0;
    for (size_t i = 0; i < sizeof k_maxtext / sizeof k_maxtext[0]; i++) {
        const maxtext_policy *q = &k_maxtext[i];
        if (q->offloaded[0]) {
            if (!*offload && word_in(q->offloaded, name)) *offload = q->name;
            continue;
        }
        if (word_in(q->saved, name)) continue;
        size_t n = q->saved[0] ? 1 : 0;
        for (const char *s = q->saved; *s; s++) n += *s == ' ';
        if (!*recompute || n > best) *recompute = q->name, best = n;
    }
}

/* --- the residual in host memory, as an edit to plan ------------------------------------------ */
static size_t add_edit(hbmi_fit_edit *e, size_t n, size_t cap, uint32_t comp, uint32_t ins, int32_t out) {
    for (size_t k = 0; k < n; k++)
        if (e[k].comp == comp && e[k].ins == ins) return n;
    if (n >= cap) return n;
    memset(&e[n], 0, sizeof e[n]);
    e[n].kind = HBMI_FIT_HOST_ELEM;
    e[n].comp = comp;
    e[n].ins = ins;
    e[n].at = ins;
    e[n].out = out;
    return n + 1;
}

/* element k of loop w's tuple through computation c (the loop, its operand tuple and what
 * reads it there), its body and condition (their parameter, what reads element k, the root) */
static size_t loop_edits(const hbm_hlo_module *m, uint32_t ci, uint32_t wi, int64_t k, int init, hbmi_fit_edit *e,
                         size_t n, size_t cap) {
    const hbmi_comp *c = &m->comps[ci];
    const hbmi_instr *w = &c->ins[wi];
    n = add_edit(e, n, cap, ci, wi, (int32_t)k);
    if (w->n_ops && c->ins[w->ops[0]].op == HOP_TUPLE) {
        const hbmi_instr *t = &c->ins[w->ops[0]];
        n = add_edit(e, n, cap, ci, w->ops[0], (int32_t)k);
        uint32_t ii = (uint32_t)k < t->n_ops ? t->ops[k] : UINT32_MAX;
        /* the buffer it starts from, when nothing else reads it */
        if (init && ii != UINT32_MAX && c->ins[ii].n_users == 1 && c->ins[ii].op != HOP_PARAMETER &&
            c->ins[ii].shape->prim != HBMI_PRIM_TUPLE)
            n = add_edit(e, n, cap, ci, ii, -1);
    }
    for (uint32_t i = 0; i < c->n; i++)
        if (c->ins[i].op == HOP_GTE && c->ins[i].n_ops && c->ins[i].ops[0] == wi && c->ins[i].gte_index == k &&
            !c->ins[i].synthetic)
            n = add_edit(e, n, cap, ci, i, -1);
    for (uint32_t q = 0; q < w->n_called; q++) {
        uint32_t bi = w->called[q];
        const hbmi_comp *b = &m->comps[bi];
        if (!b->n_params) continue;
        uint32_t pi = b->params[0];
        n = add_edit(e, n, cap, bi, pi, (int32_t)k);
        for (uint32_t i = 0; i < b->n; i++)
            if (b->ins[i].op == HOP_GTE && b->ins[i].n_ops && b->ins[i].ops[0] == pi && b->ins[i].gte_index == k &&
                !b->ins[i].synthetic)
                n = add_edit(e, n, cap, bi, i, -1);
        const hbmi_instr *r = &b->ins[b->root];
        if (r->op == HOP_TUPLE && (uint32_t)k < r->n_ops) {
            n = add_edit(e, n, cap, bi, b->root, (int32_t)k);
            uint32_t x = r->ops[k]; /* what writes it: the update in place, through bitcasts */
            for (int hop = 0; hop < 8; hop++) {
                const hbmi_instr *xi = &b->ins[x];
                if (xi->op == HOP_GTE && xi->n_ops && b->ins[xi->ops[0]].op == HOP_FUSION) {
                    n = add_edit(e, n, cap, bi, x, -1); /* an element of a multi-output fusion */
                    n = add_edit(e, n, cap, bi, xi->ops[0], (int32_t)xi->gte_index);
                    break;
                }
                if (xi->synthetic || xi->op == HOP_PARAMETER || xi->shape->prim == HBMI_PRIM_TUPLE) break;
                n = add_edit(e, n, cap, bi, x, -1);
                if (!((xi->op == HOP_BITCAST || xi->op == HOP_COPY) && xi->n_ops)) break;
                x = xi->ops[0];
            }
        }
    }
    return n;
}

size_t hbmi_jax_residual_edits(const hbm_hlo_module *m, const hbmi_jax_residual *x, hbmi_fit_edit *e, size_t cap) {
    const hbmi_comp *c = &m->comps[x->comp];
    uint32_t bwd = UINT32_MAX;
    for (uint32_t i = 0; i < c->n; i++)
        if (c->ins[i].name.n == strlen(x->backward_loop) && !memcmp(c->ins[i].name.p, x->backward_loop, c->ins[i].name.n))
            bwd = i;
    if (bwd == UINT32_MAX) return 0;
    size_t n = loop_edits(m, x->comp, x->loop_ins, x->index, 1, e, 0, cap);
    n = loop_edits(m, x->comp, bwd, x->bwd_index, 0, e, n, cap);
    return n < cap ? n : 0;
}
