/* dataflow.c - which instructions define buffers, which alias, and how long each value
 * lives: XLA's HloDataflowAnalysis (non-SSA), HloAliasAnalysis and HloLiveRange, reduced
 * to what buffer assignment needs. See DESIGN.md "Dataflow" and docs/plan.md. */
#include <string.h>
#include <strings.h>

#include "hlo/dataflow.h"
#include "hlo/hlo_internal.h"

typedef struct dfb {
    hbmi_df *df;
    uint32_t *seq;     /* sequential computations, callees first */
    uint32_t n_seq;
    uint8_t *phi;      /* per position: defined by a phi (SSA form), or NULL */
} dfb;

/* n bytes of the dataflow's arena; NULL (the caller returns arena_oom) when there are none */
static void *dalloc(dfb *b, size_t n) { return hbmi_arena_alloc(&b->df->arena, n ? n : 1); }
static hbm_status arena_oom(void) { return hbmi_error(HBM_ERR_NOMEM, "plan: out of host memory in the dataflow"); }
static hbm_status oom(void) { return hbmi_error(HBM_ERR_NOMEM, "plan: out of host memory"); }

static hbmi_instr *I(const hbmi_df *df, uint32_t gid) { return hbmi_df_instr(df, gid); }
static uint32_t G(const hbmi_df *df, uint32_t comp, uint32_t idx) { return df->comp_base[comp] + idx; }

/* --- computation kinds and the call graph --------------------------------------------------- */
static hbm_status classify(dfb *b) {
    hbm_hlo_module *m = b->df->m;
    uint32_t *stack = hbmi_malloc(sizeof *stack * (m->n_comps + 1) * 2);
    uint8_t *state = hbmi_calloc(m->n_comps, 1);
    b->seq = dalloc(b, sizeof *b->seq * m->n_comps);
    if (!stack || !state || !b->seq) {
        hbmi_free(stack);
        hbmi_free(state);
        return b->seq ? oom() : arena_oom();
    }
    /* mark fusion / embedded / async computations from every caller */
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        hbmi_comp *c = &m->comps[ci];
        for (uint32_t i = 0; i < c->n; i++) {
            hbmi_instr *in = &c->ins[i];
            for (uint32_t k = 0; k < in->n_called; k++) {
                hbmi_comp *cc = &m->comps[in->called[k]];
                if (in->op == HOP_FUSION) cc->kind = HBMI_COMP_FUSION;
                else if (in->op == HOP_ASYNC_START && !cc->kind) cc->kind = HBMI_COMP_ASYNC;
                else if ((in->called_role[k] == HBMI_CALLED_APPLY && in->op != HOP_CALL) || in->op == HOP_CUSTOM_CALL) {
                    if (!cc->kind) cc->kind = HBMI_COMP_EMBEDDED;
                }
            }
        }
    }
    /* sequential: the entry and what while/call/conditional reach; post-order DFS */
    uint32_t sp = 0;
    stack[sp++] = m->entry;
    state[m->entry] = 1;
    while (sp) {
        uint32_t ci = stack[sp - 1];
        hbmi_comp *c = &m->comps[ci];
        int pushed = 0;
        for (uint32_t i = 0; i < c->n && !pushed; i++) {
            hbmi_instr *in = &c->ins[i];
            if (in->op != HOP_WHILE && in->op != HOP_CALL && in->op != HOP_CONDITIONAL) continue;
            for (uint32_t k = 0; k < in->n_called; k++) {
                uint32_t cj = in->called[k];
                /* call's to_apply is called */
                if (in->called_role[k] == HBMI_CALLED_APPLY && in->op != HOP_CALL) continue;
                if (state[cj] == 0) {
                    state[cj] = 1;
                    stack[sp++] = cj;
                    pushed = 1;
                    break;
                }
            }
        }
        if (pushed) continue;
        sp--;
        if (state[ci] == 1) {
            state[ci] = 2;
            c->kind = HBMI_COMP_SEQUENTIAL;
            b->seq[b->n_seq++] = ci;
        }
    }
    hbmi_free(stack);
    hbmi_free(state);
    return HBM_OK;
}

/* --- users and post order ----------------------------------------------------------------------- */
static hbm_status build_users(dfb *b, hbmi_comp *c) {
    uint32_t *cnt = hbmi_calloc(c->n + 1, sizeof *cnt);
    if (!cnt) return oom();
    hbm_status st = HBM_OK;
    for (uint32_t i = 0; i < c->n; i++)
        for (uint32_t k = 0; k < c->ins[i].n_ops; k++) c->ins[c->ins[i].ops[k]].n_users++;
    for (uint32_t i = 0; i < c->n; i++) {
        hbmi_instr *in = &c->ins[i];
        if (in->n_users) {
            in->users = dalloc(b, sizeof *in->users * in->n_users);
            if (!in->users) {
                st = arena_oom();
                break;
            }
        }
    }
    for (uint32_t i = 0; i < c->n && !st; i++)
        for (uint32_t k = 0; k < c->ins[i].n_ops; k++) {
            uint32_t o = c->ins[i].ops[k];
            uint32_t j = cnt[o];
            /* an instruction using the same operand twice is one user */
            if (j && c->ins[o].users[j - 1] == i) {
                c->ins[o].n_users--;
                continue;
            }
            c->ins[o].users[cnt[o]++] = i;
        }
    hbmi_free(cnt);
    return st;
}

/* XLA's MakeInstructionPostOrder (without control/channel dependencies): DFS from each
 * user-less instruction in text order, first operand first. Writes order[] (indices). */
static hbm_status post_order(hbmi_comp *c, uint32_t *order) {
    uint8_t *vis = hbmi_calloc(c->n, 1);
    uint32_t cap = c->n + 16, sp = 0, n = 0;
    uint32_t *st = hbmi_malloc(sizeof *st * cap);
    if (!vis || !st) {
        hbmi_free(vis);
        hbmi_free(st);
        return oom();
    }
    for (uint32_t r = 0; r < c->n; r++) {
        if (c->ins[r].n_users) continue;
        st[sp++] = r;
        while (sp) {
            uint32_t cur = st[sp - 1];
            if (vis[cur]) {
                sp--;
                if (vis[cur] == 1) {
                    vis[cur] = 2;
                    order[n++] = cur;
                }
                continue;
            }
            vis[cur] = 1;
            hbmi_instr *in = &c->ins[cur];
            if (sp + in->n_ops >= cap) {
                size_t ncap = cap;
                if (hbmi_grow((void **)&st, &ncap, sp + in->n_ops + 1, sizeof *st) != HBM_OK) {
                    hbmi_free(vis);
                    hbmi_free(st);
                    return oom();
                }
                cap = (uint32_t)ncap;
            }
            for (uint32_t k = in->n_ops; k-- > 0;)
                if (!vis[in->ops[k]]) st[sp++] = in->ops[k];
        }
    }
    /* instructions on a cycle or otherwise unreached (cannot happen in valid HLO) */
    for (uint32_t i = 0; i < c->n; i++)
        if (vis[i] != 2) order[n++] = i;
    hbmi_free(vis);
    hbmi_free(st);
    return HBM_OK;
}

/* --- value definition --------------------------------------------------------------------------- */
int hbmi_df_async_wrapped(const hbm_hlo_module *m, const hbmi_instr *in) {
    if (in->op != HOP_ASYNC_START || in->shape->prim != HBMI_PRIM_TUPLE || in->shape->n < 2) return 0;
    for (uint32_t k = 0; k < in->n_called; k++) {
        if (in->called_role[k] != HBMI_CALLED_CALLS) continue;
        hbmi_str t = m->comps[in->called[k]].exec_thread;
        if (t.n && !(t.n == 4 && !memcmp(t.p, "main", 4))) return 0;
    }
    return 1;
}

/* Does instruction in (of computation c) define the value at shape node k? */
static int defines(const hbm_hlo_module *m, const hbmi_comp *c, const hbmi_instr *in, uint32_t k) {
    const hbmi_shape *s = in->shape;
    switch (in->op) {
    case HOP_PARAMETER: return c->is_entry;
    case HOP_TUPLE: return k == 0;
    case HOP_GTE:
    case HOP_BITCAST:
    case HOP_DOMAIN:
    case HOP_OPT_BARRIER:
    case HOP_ADD_DEPENDENCY:
    case HOP_WHILE:
    case HOP_CALL:
    case HOP_CONDITIONAL:
    case HOP_ASYNC_UPDATE:
    case HOP_ALL_REDUCE_DONE: return 0;
    case HOP_ASYNC_DONE: /* the output aliases the async result; a tuple output's table is its own */
        if (in->n_ops != 1) return 1; /* malformed: define */
        return hbmi_shape_node(s, k) && hbmi_shape_node(s, k)->prim == HBMI_PRIM_TUPLE;
    case HOP_COPY_DONE: return in->n_ops != 1; /* malformed: define */
    case HOP_ASYNC_START:
    case HOP_LEGACY_START:
        if (s->prim != HBMI_PRIM_TUPLE || s->n < 2 || k == 0) return 1;
        if (in->op == HOP_ASYNC_START && hbmi_df_async_wrapped(m, in) && k >= hbmi_shape_child(s, 1) &&
            k < hbmi_shape_child(s, 1) + s->elems[1].nodes) /* the wrapped op defines the output's */
            return hbmi_shape_node(s, k)->prim == HBMI_PRIM_TUPLE; /* arrays; the start its tuples */
        if (k < hbmi_shape_child(s, 1)) { /* inside {0}: the operands */
            const hbmi_shape *e0 = &s->elems[0];
            if (e0->prim == HBMI_PRIM_TUPLE) return k == 1; /* {0} itself is a defined tuple */
            return in->n_ops == 0;
        }
        return 1;
    case HOP_COPY_START:
        if (s->prim != HBMI_PRIM_TUPLE || s->n < 2) return 1;
        return !(k >= hbmi_shape_child(s, 1) && k < hbmi_shape_child(s, 1) + s->elems[1].nodes) || !in->n_ops;
    case HOP_SEND:
        if (s->prim != HBMI_PRIM_TUPLE || s->n < 1 || !in->n_ops) return 1;
        return !(k >= 1 && k < 1 + s->elems[0].nodes);
    case HOP_RECV_DONE:
        if (s->prim != HBMI_PRIM_TUPLE || s->n < 1 || !in->n_ops) return 1;
        return !(k >= 1 && k < 1 + s->elems[0].nodes);
    default: (void)m; return 1;
    }
}

/* --- value sets ------------------------------------------------------------------------------------- */
static int vs_contains(const hbmi_vset *s, uint32_t v) {
    for (uint32_t i = 0; i < s->n; i++)
        if (hbmi_vset_at(s, i) == v) return 1;
    return 0;
}

/* dst |= src; sets *grew when dst grew */
static hbm_status vs_union(dfb *b, hbmi_vset *dst, const hbmi_vset *src, int *grew) {
    if (dst == src || !src->n) return HBM_OK;
    uint32_t add = 0;
    for (uint32_t i = 0; i < src->n; i++)
        if (!vs_contains(dst, hbmi_vset_at(src, i))) add++;
    if (!add) return HBM_OK;
    if (dst->n == 0 && src->n == 1) {
        dst->n = 1;
        dst->one = src->one;
        *grew = 1;
        return HBM_OK;
    }
    uint32_t n = dst->n + add;
    uint32_t *arr = dalloc(b, sizeof *arr * n);
    if (!arr) return arena_oom();
    uint32_t k = 0;
    for (uint32_t i = 0; i < dst->n; i++) arr[k++] = hbmi_vset_at(dst, i);
    for (uint32_t i = 0; i < src->n; i++) {
        uint32_t v = hbmi_vset_at(src, i);
        int dup = 0;
        for (uint32_t j = 0; j < k && !dup; j++) dup = arr[j] == v;
        if (!dup) arr[k++] = v;
    }
    /* keep sorted: insertion sort, sets are tiny */
    for (uint32_t i = 1; i < k; i++) {
        uint32_t v = arr[i], j = i;
        while (j && arr[j - 1] > v) {
            arr[j] = arr[j - 1];
            j--;
        }
        arr[j] = v;
    }
    dst->n = k;
    dst->many = arr;
    *grew = 1;
    return HBM_OK;
}

static hbmi_vset *VS(hbmi_df *df, uint32_t gid, uint32_t node) { return &df->vs[I(df, gid)->pos_base + node]; }

/* dst[gid_d, node_d + t] |= src[gid_s, node_s + t] for t over count nodes */
static hbm_status flow(dfb *b, int *changed, uint32_t gd, uint32_t nd, uint32_t gs, uint32_t ns, uint32_t count) {
    hbmi_df *df = b->df;
    const hbmi_instr *d = I(df, gd), *s = I(df, gs);
    for (uint32_t t = 0; t < count; t++) {
        if (nd + t >= d->shape->nodes || ns + t >= s->shape->nodes) break;
        if (b->phi && b->phi[d->pos_base + nd + t]) continue; /* its phi is its only value */
        TRY(vs_union(b, VS(df, gd, nd + t), VS(df, gs, ns + t), changed));
    }
    return HBM_OK;
}

static uint32_t nodes_of(const hbmi_shape *s) { return s->nodes; }

/* One propagation step for instruction idx of computation ci. */
static hbm_status propagate(dfb *b, uint32_t ci, uint32_t idx, int *ch) {
    hbmi_df *df = b->df;
    hbm_hlo_module *m = df->m;
    hbmi_comp *c = &m->comps[ci];
    hbmi_instr *in = &c->ins[idx];
    uint32_t g = G(df, ci, idx);
    const hbmi_shape *s = in->shape;
    uint32_t o0 = in->n_ops ? G(df, ci, in->ops[0]) : 0;
    switch (in->op) {
    case HOP_TUPLE:
        for (uint32_t i = 0; i < in->n_ops && i < s->n; i++)
            TRY(flow(b, ch, g, hbmi_shape_child(s, i), G(df, ci, in->ops[i]), 0, s->elems[i].nodes));
        return HBM_OK;
    case HOP_GTE: {
        if (!in->n_ops) return HBM_OK;
        const hbmi_shape *os = I(df, o0)->shape;
        if (os->prim != HBMI_PRIM_TUPLE || in->gte_index < 0 || (uint64_t)in->gte_index >= os->n) return HBM_OK;
        return flow(b, ch, g, 0, o0, hbmi_shape_child(os, (uint32_t)in->gte_index), nodes_of(s));
    }
    case HOP_BITCAST:
    case HOP_DOMAIN:
    case HOP_OPT_BARRIER:
    case HOP_ADD_DEPENDENCY:
    case HOP_ASYNC_UPDATE:
    case HOP_ALL_REDUCE_DONE:
        return in->n_ops ? flow(b, ch, g, 0, o0, 0, nodes_of(s)) : 1;
    case HOP_ASYNC_DONE:
    case HOP_COPY_DONE: {
        if (in->n_ops != 1) return HBM_OK;
        const hbmi_shape *os = I(df, o0)->shape;
        if (os->prim != HBMI_PRIM_TUPLE || os->n < 2) return flow(b, ch, g, 0, o0, 0, nodes_of(s));
        uint32_t which = in->op == HOP_COPY_DONE ? 0 : 1;
        uint32_t src = hbmi_shape_child(os, which);
        if (in->op == HOP_ASYNC_DONE && s->prim == HBMI_PRIM_TUPLE) { /* the elements, not the table */
            const hbmi_shape *ss = &os->elems[which];
            for (uint32_t i = 0; i < s->n && ss->prim == HBMI_PRIM_TUPLE && i < ss->n; i++)
                TRY(flow(b, ch, g, hbmi_shape_child(s, i), o0, src + hbmi_shape_child(ss, i), s->elems[i].nodes));
            return HBM_OK;
        }
        return flow(b, ch, g, 0, o0, src, nodes_of(s));
    }
    case HOP_ASYNC_START:
    case HOP_LEGACY_START: {
        if (s->prim != HBMI_PRIM_TUPLE || s->n < 2 || !in->n_ops) return HBM_OK;
        const hbmi_shape *e0 = &s->elems[0];
        if (e0->prim == HBMI_PRIM_TUPLE) {
            for (uint32_t i = 0; i < in->n_ops && i < e0->n; i++)
                TRY(flow(b, ch, g, 1 + hbmi_shape_child(e0, i), G(df, ci, in->ops[i]), 0, e0->elems[i].nodes));
            return HBM_OK;
        }
        return flow(b, ch, g, 1, o0, 0, e0->nodes);
    }
    case HOP_COPY_START:
        if (s->prim != HBMI_PRIM_TUPLE || s->n < 2 || !in->n_ops) return HBM_OK;
        return flow(b, ch, g, hbmi_shape_child(s, 1), o0, 0, s->elems[1].nodes);
    case HOP_SEND:
        if (s->prim != HBMI_PRIM_TUPLE || s->n < 1 || !in->n_ops) return HBM_OK;
        return flow(b, ch, g, 1, o0, 0, s->elems[0].nodes);
    case HOP_RECV_DONE: {
        if (s->prim != HBMI_PRIM_TUPLE || s->n < 1 || !in->n_ops) return HBM_OK;
        const hbmi_shape *os = I(df, o0)->shape;
        if (os->prim != HBMI_PRIM_TUPLE || os->n < 1) return HBM_OK;
        return flow(b, ch, g, 1, o0, 1, s->elems[0].nodes);
    }
    case HOP_WHILE: {
        uint32_t body = UINT32_MAX, cond = UINT32_MAX;
        for (uint32_t k = 0; k < in->n_called; k++) {
            if (in->called_role[k] == HBMI_CALLED_BODY) body = in->called[k];
            if (in->called_role[k] == HBMI_CALLED_CONDITION) cond = in->called[k];
        }
        if (!in->n_ops) return HBM_OK;
        uint32_t n = nodes_of(s);
        TRY(flow(b, ch, g, 0, o0, 0, n));
        if (body != UINT32_MAX) {
            hbmi_comp *bc = &m->comps[body];
            uint32_t root = G(df, body, bc->root);
            TRY(flow(b, ch, g, 0, root, 0, n));
            if (bc->n_params) TRY(flow(b, ch, G(df, body, bc->params[0]), 0, g, 0, n));
        }
        if (cond != UINT32_MAX && m->comps[cond].n_params)
            TRY(flow(b, ch, G(df, cond, m->comps[cond].params[0]), 0, g, 0, n));
        return HBM_OK;
    }
    case HOP_CALL:
    case HOP_CONDITIONAL: {
        for (uint32_t k = 0; k < in->n_called; k++) {
            uint32_t cc = in->called[k];
            hbmi_comp *callee = &m->comps[cc];
            if (callee->kind != HBMI_COMP_SEQUENTIAL) continue;
            uint32_t first = in->op == HOP_CALL ? 0 : k + 1; /* branch k gets operand k+1 */
            for (uint32_t p = 0; p < callee->n_params; p++) {
                uint32_t opi = in->op == HOP_CALL ? first + p : first;
                if (opi >= in->n_ops) break;
                uint32_t pg = G(df, cc, callee->params[p]);
                TRY(flow(b, ch, pg, 0, G(df, ci, in->ops[opi]), 0, nodes_of(I(df, pg)->shape)));
                if (in->op == HOP_CONDITIONAL) break;
            }
            TRY(flow(b, ch, g, 0, G(df, cc, callee->root), 0, nodes_of(s)));
        }
        return HBM_OK;
    }
    default: return HBM_OK; /* defined everywhere it does not flow */
    }
}

static hbm_status define_values(dfb *b) {
    hbmi_df *df = b->df;
    hbm_hlo_module *m = df->m;
    /* positions */
    uint32_t npos = 0;
    for (uint32_t s = 0; s < b->n_seq; s++) {
        hbmi_comp *c = &m->comps[b->seq[s]];
        for (uint32_t i = 0; i < c->n; i++) {
            c->ins[i].pos_base = npos;
            c->ins[i].analyzed = 1;
            if (npos > UINT32_MAX - c->ins[i].shape->nodes)
                return hbmi_error(HBM_ERR_UNSUPPORTED, "plan: module too large");
            npos += c->ins[i].shape->nodes;
        }
    }
    df->n_pos = npos;
    df->vs = hbmi_calloc(npos ? npos : 1, sizeof *df->vs);
    if (!df->vs) return oom();
    /* post order of every sequential computation; XLA numbers positions with the entry
     * first (reverse post order of the call graph), wrapped async computations after */
    uint32_t **orders = hbmi_calloc(b->n_seq + 1, sizeof *orders);
    if (!orders) return oom();
    hbm_status st = HBM_OK;
    uint32_t acc = 0;
    for (uint32_t s = b->n_seq; !st && s-- > 0;) {
        hbmi_comp *c = &m->comps[b->seq[s]];
        orders[s] = hbmi_malloc(sizeof *orders[s] * c->n);
        if (!orders[s]) {
            st = oom();
        } else if ((st = post_order(c, orders[s]))) {
            break;
        } else {
            for (uint32_t t = 0; t < c->n; t++) c->ins[orders[s][t]].post = acc + t;
            acc += c->n;
        }
    }
    /* values: computations callees first (a wrapped async computation before its caller),
     * instructions in post order */
    size_t cap = 0;
    uint32_t wrapped_post = acc;
    for (uint32_t s = 0; !st && s < b->n_seq; s++) {
        uint32_t ci = b->seq[s];
        hbmi_comp *c = &m->comps[ci];
        for (int pass = 0; !st && pass < 2; pass++)
            for (uint32_t t = 0; !st && t < c->n; t++) {
                hbmi_instr *in = &c->ins[orders[s][t]];
                uint32_t lo = 0, hi = in->shape->nodes;
                if (pass == 0) {
                    if (!hbmi_df_async_wrapped(m, in)) continue;
                    lo = hbmi_shape_child(in->shape, 1);
                    hi = lo + in->shape->elems[1].nodes;
                }
                for (uint32_t k = lo; k < hi; k++) {
                    if (pass == 1 && !defines(m, c, in, k)) continue;
                    if (hbmi_grow((void **)&df->values, &cap, (size_t)df->n_values + 1, sizeof *df->values) != HBM_OK) {
                        st = oom();
                        break;
                    }
                    hbmi_value *v = &df->values[df->n_values];
                    memset(v, 0, sizeof *v);
                    v->gid = G(df, ci, orders[s][t]);
                    v->node = k;
                    v->wrapped = pass == 0;
                    v->post = pass == 0 ? wrapped_post++ : in->post;
                    const hbmi_shape *sub = hbmi_shape_node(in->shape, k);
                    v->is_tuple = sub->prim == HBMI_PRIM_TUPLE;
                    v->size = hbmi_df_shape_bytes(df, sub);
                    v->entry_param = in->op == HOP_PARAMETER && c->is_entry;
                    v->constant = in->op == HOP_CONSTANT;
                    uint32_t id = df->n_values++;
                    /* a tuple the wrapped op returns has its own table, in the async
                     * computation; the start's position holds the start's table */
                    if (pass == 0 && v->is_tuple) continue;
                    hbmi_vset *set = &df->vs[in->pos_base + k];
                    set->n = 1;
                    set->one = id;
                }
            }
    }
    /* phi values (SSA form), numbered after the others as XLA numbers them */
    for (uint32_t s = 0; !st && b->phi && s < b->n_seq; s++) {
        uint32_t ci = b->seq[s];
        hbmi_comp *c = &m->comps[ci];
        for (uint32_t i = 0; !st && i < c->n; i++) {
            hbmi_instr *in = &c->ins[i];
            for (uint32_t k = 0; k < in->shape->nodes; k++) {
                if (!b->phi[in->pos_base + k]) continue;
                if (hbmi_grow((void **)&df->values, &cap, (size_t)df->n_values + 1, sizeof *df->values) != HBM_OK) {
                    st = oom();
                    break;
                }
                hbmi_value *v = &df->values[df->n_values];
                memset(v, 0, sizeof *v);
                v->gid = G(df, ci, i);
                v->node = k;
                v->post = in->post;
                const hbmi_shape *sub = hbmi_shape_node(in->shape, k);
                v->is_tuple = sub->prim == HBMI_PRIM_TUPLE;
                v->size = hbmi_df_shape_bytes(df, sub);
                df->vs[in->pos_base + k].n = 1;
                df->vs[in->pos_base + k].one = df->n_values++;
            }
        }
    }
    for (uint32_t s = 0; s < b->n_seq; s++) hbmi_free(orders[s]);
    hbmi_free(orders);
    return st;
}

/* The while loops' and their bodies' parameters, their body roots', their conditions'
 * parameters: XLA's dataflow runs in SSA form for buffer assignment (HloAliasAnalysis::Run
 * calls HloDataflowAnalysis::Run with ssa_form=true): where a loop's element can hold more
 * than one value (its body writes a new one), the while, the body parameter and the
 * condition parameter each define a phi value there; where the body passes the element
 * through unchanged the phi resolves to the loop's input (OptimizePhiValues). The non-SSA
 * solution says which: a phi where the union of the init and body-root values has several.
 * *marked: the number of phi positions marked in b->phi. */
static hbm_status mark_phis(dfb *b, int64_t *marked) {
    hbmi_df *df = b->df;
    hbm_hlo_module *m = df->m;
    int64_t n = 0;
    for (uint32_t s = 0; s < b->n_seq; s++) {
        uint32_t ci = b->seq[s];
        hbmi_comp *c = &m->comps[ci];
        for (uint32_t i = 0; i < c->n; i++) {
            hbmi_instr *in = &c->ins[i];
            if (in->op != HOP_WHILE || !in->n_ops) continue;
            uint32_t body = UINT32_MAX, cond = UINT32_MAX;
            for (uint32_t k = 0; k < in->n_called; k++) {
                if (in->called_role[k] == HBMI_CALLED_BODY) body = in->called[k];
                if (in->called_role[k] == HBMI_CALLED_CONDITION) cond = in->called[k];
            }
            if (body == UINT32_MAX || !m->comps[body].n_params) continue;
            const hbmi_instr *bp = &m->comps[body].ins[m->comps[body].params[0]];
            const hbmi_instr *cp =
                cond != UINT32_MAX && m->comps[cond].n_params ? &m->comps[cond].ins[m->comps[cond].params[0]] : NULL;
            for (uint32_t k = 0; k < in->shape->nodes; k++) {
                if (df->vs[in->pos_base + k].n < 2) continue;
                if (!b->phi) {
                    b->phi = hbmi_calloc(df->n_pos + 1, 1);
                    if (!b->phi) return oom();
                }
                b->phi[in->pos_base + k] = 1;
                if (k < bp->shape->nodes) b->phi[bp->pos_base + k] = 1;
                if (cp && k < cp->shape->nodes) b->phi[cp->pos_base + k] = 1;
                n++;
            }
        }
    }
    *marked = n;
    return HBM_OK;
}

static hbm_status solve(dfb *b) {
    hbmi_df *df = b->df;
    for (int iter = 0; iter < 1000; iter++) {
        int changed = 0;
        for (uint32_t s = b->n_seq; s-- > 0;) { /* callers first */
            uint32_t ci = b->seq[s];
            hbmi_comp *c = &df->m->comps[ci];
            for (uint32_t i = 0; i < c->n; i++) TRY(propagate(b, ci, i, &changed));
        }
        if (!changed) return HBM_OK;
    }
    return hbmi_error(HBM_ERR_UNSUPPORTED, "plan: dataflow did not converge");
}

/* --- flattened schedule (HloLiveRange::FlattenSchedule) --------------------------------------------- */
static hbm_status flatten(dfb *b, uint32_t ci, uint8_t *done, int depth) {
    hbmi_df *df = b->df;
    hbm_hlo_module *m = df->m;
    hbmi_comp *c = &m->comps[ci];
    if (done[ci] || depth > 256) return HBM_OK;
    done[ci] = 1;
    c->span_start = df->n_flat;
    /* is_scheduled=true: the text order is the schedule; otherwise XLA's post order */
    uint32_t *order = NULL;
    if (!m->is_scheduled) {
        order = hbmi_malloc(sizeof *order * c->n);
        hbm_status st = order ? post_order(c, order) : oom();
        if (st) {
            hbmi_free(order);
            return st;
        }
    }
    for (uint32_t t = 0; t < c->n; t++) {
        uint32_t i = order ? order[t] : t;
        hbmi_instr *in = &c->ins[i];
        if (in->op == HOP_WHILE) {
            for (int pass = 0; pass < 2; pass++)
                for (uint32_t k = 0; k < in->n_called; k++) {
                    if (in->called_role[k] != (pass ? HBMI_CALLED_BODY : HBMI_CALLED_CONDITION)) continue;
                    hbm_status st = flatten(b, in->called[k], done, depth + 1);
                    if (st) {
                        hbmi_free(order);
                        return st;
                    }
                }
        } else if (in->op == HOP_CALL || in->op == HOP_CONDITIONAL) {
            for (uint32_t k = 0; k < in->n_called; k++) {
                if (m->comps[in->called[k]].kind != HBMI_COMP_SEQUENTIAL) continue;
                hbm_status st = flatten(b, in->called[k], done, depth + 1);
                if (st) {
                    hbmi_free(order);
                    return st;
                }
            }
        }
        if (in->op == HOP_ASYNC_START && hbmi_df_async_wrapped(m, in)) {
            /* the wrapped computation (parameters, then the op) runs before the start */
            uint32_t slots = in->n_ops + 1;
            for (uint32_t k = 0; k < in->n_called; k++)
                if (in->called_role[k] == HBMI_CALLED_CALLS && m->comps[in->called[k]].n > 1)
                    slots = m->comps[in->called[k]].n;
            for (uint32_t k = 0; k < slots; k++) df->flat[df->n_flat++] = G(df, ci, i);
        }
        in->time = df->n_flat;
        df->flat[df->n_flat++] = G(df, ci, i);
    }
    c->span_end = df->n_flat;
    hbmi_free(order);
    return HBM_OK;
}

/* --- positions, uses, live ranges ------------------------------------------------------------------- */
static int may_use(const hbmi_instr *user, uint32_t opno, uint32_t node) {
    switch (user->op) {
    case HOP_GTE:
    case HOP_COPY: return node == 0;
    case HOP_TUPLE:
    case HOP_CALL: return 0;
    case HOP_CONDITIONAL: return opno == 0;
    default: return 1;
    }
}

int hbmi_param_node_aliased(const hbm_hlo_module *m, int64_t param, uint32_t node, const hbmi_shape *ps) {
    for (uint32_t a = 0; a < m->n_io_alias; a++) {
        const hbmi_alias *al = &m->io_alias[a];
        if (al->operand != param) continue;
        /* node of the aliased parameter index */
        const hbmi_shape *s = ps;
        uint32_t k = 0;
        int ok = 1;
        for (uint32_t d = 0; d < al->in_len && ok; d++) {
            if (s->prim != HBMI_PRIM_TUPLE || al->in[d] < 0 || (uint32_t)al->in[d] >= s->n) ok = 0;
            else {
                k += hbmi_shape_child(s, (uint32_t)al->in[d]);
                s = &s->elems[al->in[d]];
            }
        }
        if (ok && k == node) return 1;
    }
    return 0;
}

static hbm_status uses_and_ranges(dfb *b) {
    hbmi_df *df = b->df;
    hbm_hlo_module *m = df->m;
    uint32_t nv = df->n_values;
    uint32_t *npos = hbmi_calloc(nv + 1, sizeof *npos), *nuse = hbmi_calloc(nv + 1, sizeof *nuse);
    if (!npos || !nuse) {
        hbmi_free(npos);
        hbmi_free(nuse);
        return oom();
    }
    hbm_status st = HBM_OK;
    for (int pass = 0; pass < 2 && !st; pass++) {
        if (pass == 1) {
            for (uint32_t v = 0; v < nv; v++) {
                df->values[v].pos = dalloc(b, sizeof(uint32_t) * npos[v]);
                df->values[v].uses = dalloc(b, sizeof(uint32_t) * nuse[v]);
                if (!df->values[v].pos || !df->values[v].uses) {
                    st = arena_oom();
                    break;
                }
            }
            if (st) break;
        }
        for (uint32_t s = 0; s < b->n_seq; s++) {
            uint32_t ci = b->seq[s];
            hbmi_comp *c = &m->comps[ci];
            for (uint32_t i = 0; i < c->n; i++) {
                hbmi_instr *in = &c->ins[i];
                uint32_t g = G(df, ci, i);
                for (uint32_t k = 0; k < in->shape->nodes; k++) {
                    const hbmi_vset *set = &df->vs[in->pos_base + k];
                    for (uint32_t t = 0; t < set->n; t++) {
                        uint32_t v = hbmi_vset_at(set, t);
                        hbmi_value *val = &df->values[v];
                        if (pass == 0) npos[v]++;
                        else if (!val->n_pos || val->pos[val->n_pos - 1] != g) val->pos[val->n_pos++] = g;
                    }
                }
                for (uint32_t opn = 0; opn < in->n_ops; opn++) {
                    uint32_t og = G(df, ci, in->ops[opn]);
                    const hbmi_instr *oi = I(df, og);
                    for (uint32_t k = 0; k < oi->shape->nodes; k++) {
                        if (!in->is_root && !may_use(in, opn, k)) continue;
                        const hbmi_vset *set = &df->vs[oi->pos_base + k];
                        for (uint32_t t = 0; t < set->n; t++) {
                            uint32_t v = hbmi_vset_at(set, t);
                            hbmi_value *val = &df->values[v];
                            if (pass == 0) nuse[v]++;
                            else if (!val->n_uses || val->uses[val->n_uses - 1] != g) val->uses[val->n_uses++] = g;
                        }
                    }
                }
            }
        }
    }
    hbmi_free(npos);
    hbmi_free(nuse);
    TRY(st);
    int64_t end_time = df->n_flat;
    for (uint32_t v = 0; v < nv; v++) {
        hbmi_value *val = &df->values[v];
        hbmi_instr *def = I(df, val->gid);
        hbmi_comp *dc = &m->comps[df->gid_comp[val->gid]];
        if (def->time < 0) continue;
        val->has_range = 1;
        /* HloLiveRange::CalculateBufferStartEndMap */
        int64_t start = val->wrapped ? def->time - 1 : def->time;
        if (def->op == HOP_PARAMETER) start = dc->span_start;
        int64_t end = def->is_root && !val->wrapped ? dc->span_end : start;
        if (val->wrapped) { /* async context: live until the async-done */
            for (uint32_t u = 0; u < def->n_users; u++) {
                const hbmi_instr *ui = &dc->ins[def->users[u]];
                if (ui->op == HOP_ASYNC_DONE && ui->time > end) end = ui->time;
            }
        }
        val->end_pos = val->gid;
        for (uint32_t p = 0; p < val->n_pos; p++) { /* GetLastPosition */
            if (p == 0 && !val->wrapped && val->pos[0] == val->gid) continue;
            hbmi_instr *pi = I(df, val->pos[p]);
            hbmi_comp *pc = &m->comps[df->gid_comp[val->pos[p]]];
            int64_t t = pi->is_root ? pc->span_end : pi->time;
            if (t > end) {
                end = t;
                val->end_pos = val->pos[p];
            }
        }
        if (val->entry_param && !hbmi_param_node_aliased(m, def->param_no, val->node, def->shape)) {
            end = end_time;
        } else {
            for (uint32_t u = 0; u < val->n_uses; u++) { /* GetLastUsageTime */
                hbmi_instr *ui = I(df, val->uses[u]);
                if (ui->op == HOP_CALL) continue;
                int64_t t = ui->time;
                if (ui->op == HOP_WHILE) { /* live until the body starts */
                    for (uint32_t k = 0; k < ui->n_called; k++)
                        if (ui->called_role[k] == HBMI_CALLED_BODY && m->comps[ui->called[k]].n_params) {
                            hbmi_comp *bc = &m->comps[ui->called[k]];
                            t = bc->ins[bc->params[0]].time;
                        }
                }
                if (t > end) end = t;
            }
        }
        if (end < start) end = start;
        val->start = start;
        val->end = end;
    }
    return HBM_OK;
}

/* --- alias analysis: HloBuffers ------------------------------------------------------------------------ */
static uint32_t uf_find(uint32_t *p, uint32_t x) {
    while (p[x] != x) {
        p[x] = p[p[x]];
        x = p[x];
    }
    return x;
}

static void uf_union(uint32_t *p, uint32_t a, uint32_t b) {
    a = uf_find(p, a);
    b = uf_find(p, b);
    if (a == b) return;
    if (a < b) p[b] = a;
    else p[a] = b;
}

static void union_sets(uint32_t *p, const hbmi_vset *x, const hbmi_vset *y) {
    if (!x->n || !y->n) return;
    uint32_t a = hbmi_vset_at(x, 0);
    for (uint32_t i = 0; i < x->n; i++) uf_union(p, a, hbmi_vset_at(x, i));
    for (uint32_t i = 0; i < y->n; i++) uf_union(p, a, hbmi_vset_at(y, i));
}

/* node of shape index idx[0..len) in s, or UINT32_MAX */
static uint32_t index_node(const hbmi_shape *s, const int32_t *idx, uint32_t len) {
    uint32_t k = 0;
    for (uint32_t d = 0; d < len; d++) {
        if (s->prim != HBMI_PRIM_TUPLE || idx[d] < 0 || (uint32_t)idx[d] >= s->n) return UINT32_MAX;
        k += hbmi_shape_child(s, (uint32_t)idx[d]);
        s = &s->elems[idx[d]];
    }
    return k;
}

/* fusion parameter number whose buffer the fused output element at root is updated in place
 * (dynamic-update-slice or scatter on a parameter, through bitcasts), or -1 */
static int64_t inplace_param(const hbmi_comp *fc, uint32_t r) {
    const hbmi_instr *x = &fc->ins[r];
    while (x->op == HOP_BITCAST && x->n_ops) x = &fc->ins[x->ops[0]];
    if ((x->op != HOP_DUS && x->op != HOP_SCATTER) || !x->n_ops) return -1;
    const hbmi_instr *o = &fc->ins[x->ops[0]];
    while (o->op == HOP_BITCAST && o->n_ops) o = &fc->ins[o->ops[0]];
    return o->op == HOP_PARAMETER ? o->param_no : -1;
}

/* The instruction's own text (for attributes the parser keeps no field for). */
static int instr_text_has(const hbm_hlo_module *m, const hbmi_instr *in, const char *word) {
    const char *p = m->text + in->off, *end = memchr(p, '\n', m->len - in->off);
    size_t n = end ? (size_t)(end - p) : m->len - in->off, k = strlen(word);
    for (size_t i = 0; i + k <= n; i++)
        if ((p[i] | 32) == (word[0] | 32) && !strncasecmp(p + i, word, k)) return 1;
    return 0;
}

/* AliasInfo::IsDefaultInPlaceOperation: dynamic-update-slice, scatter and all-reduce-start
 * update their operands in place (xla/hlo/analysis/alias_info.cc), except an all-reduce-start
 * on NVSHMEM, which needs separate input and output buffers. */
static int default_in_place(const hbm_hlo_module *m, const hbmi_instr *in) {
    if (!in->n_ops) return 0;
    if (in->op == HOP_DUS || in->op == HOP_SCATTER) return 1;
    return in->op == HOP_ALL_REDUCE_START && !instr_text_has(m, in, "nvshmem");
}

/* How many of a default in-place op's operands are updated in place: one updates the whole
 * output, several update output element i each (scatter: its operands, not indices/updates). */
static uint32_t in_place_operands(const hbmi_instr *in) {
    return in->op == HOP_DUS ? 1 : in->op == HOP_SCATTER ? (in->n_ops - 1) / 2 : in->n_ops;
}

/* Does async-start in wrap a dynamic-update-slice: its called computation's root, or the
 * sugar "dynamic-update-slice-start" that prints none? */
static int async_wraps_dus(const hbm_hlo_module *m, const hbmi_instr *in) {
    static const char sugar[] = "dynamic-update-slice-start";
    if (in->opcode.n == sizeof sugar - 1 && !memcmp(in->opcode.p, sugar, sizeof sugar - 1)) return 1;
    for (uint32_t k = 0; k < in->n_called; k++) {
        if (in->called_role[k] != HBMI_CALLED_CALLS) continue;
        const hbmi_comp *wc = &m->comps[in->called[k]];
        return wc->ins[wc->root].op == HOP_DUS;
    }
    return 0;
}

static hbm_status alias_buffers(dfb *b) {
    hbmi_df *df = b->df;
    hbm_hlo_module *m = df->m;
    uint32_t nv = df->n_values;
    uint32_t *p = hbmi_malloc(sizeof *p * (nv + 1));
    if (!p) return oom();
    for (uint32_t v = 0; v < nv; v++) p[v] = v;
    /* values sharing a position */
    for (uint32_t i = 0; i < df->n_pos; i++)
        if (df->vs[i].n > 1) union_sets(p, &df->vs[i], &df->vs[i]);
    /* in-place operations */
    for (uint32_t s = 0; s < b->n_seq; s++) {
        uint32_t ci = b->seq[s];
        hbmi_comp *c = &m->comps[ci];
        for (uint32_t i = 0; i < c->n; i++) {
            hbmi_instr *in = &c->ins[i];
            uint32_t g = G(df, ci, i);
            if (in->op == HOP_CUSTOM_CALL) {
                for (uint32_t a = 0; a < in->n_alias; a++) {
                    const hbmi_alias *al = &in->alias[a];
                    if (al->operand < 0 || (uint64_t)al->operand >= in->n_ops) continue;
                    uint32_t og = G(df, ci, in->ops[al->operand]);
                    uint32_t on = index_node(I(df, og)->shape, al->in, al->in_len);
                    uint32_t un = index_node(in->shape, al->out, al->out_len);
                    if (on == UINT32_MAX || un == UINT32_MAX) continue;
                    union_sets(p, VS(df, g, un), VS(df, og, on));
                }
            } else if (default_in_place(m, in)) {
                uint32_t k = in_place_operands(in);
                if (k == 1) {
                    union_sets(p, VS(df, g, 0), VS(df, G(df, ci, in->ops[0]), 0));
                } else if (in->shape->prim == HBMI_PRIM_TUPLE) {
                    for (uint32_t e = 0; e < k && e < in->shape->n && e < in->n_ops; e++)
                        union_sets(p, VS(df, g, hbmi_shape_child(in->shape, e)), VS(df, G(df, ci, in->ops[e]), 0));
                }
            } else if (in->op == HOP_ASYNC_START && in->n_ops && async_wraps_dus(m, in) &&
                       in->shape->prim == HBMI_PRIM_TUPLE && in->shape->n > 1) {
                /* an async dynamic-update-slice ("dynamic-update-slice-start", XLA:TPU's host
                 * offload) updates its operand 0 in place, as the op it wraps: the start's
                 * output {1} is that buffer (GetInPlaceInputOutputPairs of the wrapped op) */
                union_sets(p, VS(df, g, hbmi_shape_child(in->shape, 1)), VS(df, G(df, ci, in->ops[0]), 0));
            } else if (in->op == HOP_WHILE && in->n_ops) {
                /* a loop's input, its body's parameter and root, its condition's parameter
                 * and its output are one buffer (HloAliasAnalysis: the while's aliased values) */
                for (uint32_t k = 0; k < in->n_called; k++) {
                    const hbmi_comp *cc = &m->comps[in->called[k]];
                    if (in->called_role[k] != HBMI_CALLED_BODY && in->called_role[k] != HBMI_CALLED_CONDITION) continue;
                    for (uint32_t n = 0; n < in->shape->nodes; n++) {
                        if (cc->n_params && n < cc->ins[cc->params[0]].shape->nodes)
                            union_sets(p, VS(df, g, n), VS(df, G(df, in->called[k], cc->params[0]), n));
                        if (in->called_role[k] == HBMI_CALLED_BODY && n < cc->ins[cc->root].shape->nodes)
                            union_sets(p, VS(df, g, n), VS(df, G(df, in->called[k], cc->root), n));
                    }
                }
                for (uint32_t n = 0; n < in->shape->nodes && n < I(df, G(df, ci, in->ops[0]))->shape->nodes; n++)
                    union_sets(p, VS(df, g, n), VS(df, G(df, ci, in->ops[0]), n));
            } else if (in->op == HOP_FUSION && in->n_called) {
                const hbmi_comp *fc = &m->comps[in->called[0]];
                const hbmi_instr *root = &fc->ins[fc->root];
                if (root->op == HOP_TUPLE && in->shape->prim == HBMI_PRIM_TUPLE) {
                    for (uint32_t e = 0; e < root->n_ops && e < in->shape->n; e++) {
                        int64_t pn = inplace_param(fc, root->ops[e]);
                        if (pn >= 0 && (uint64_t)pn < in->n_ops)
                            union_sets(p, VS(df, g, hbmi_shape_child(in->shape, e)), VS(df, G(df, ci, in->ops[pn]), 0));
                    }
                } else {
                    int64_t pn = inplace_param(fc, fc->root);
                    if (pn >= 0 && (uint64_t)pn < in->n_ops) union_sets(p, VS(df, g, 0), VS(df, G(df, ci, in->ops[pn]), 0));
                }
            }
        }
    }
    /* donated parameters: input_output_alias */
    hbmi_comp *entry = &m->comps[m->entry];
    uint32_t rootg = G(df, m->entry, entry->root);
    for (uint32_t a = 0; a < m->n_io_alias; a++) {
        const hbmi_alias *al = &m->io_alias[a];
        if (al->operand < 0 || (uint64_t)al->operand >= entry->n_params) continue;
        uint32_t pg = G(df, m->entry, entry->params[al->operand]);
        uint32_t pn = index_node(I(df, pg)->shape, al->in, al->in_len);
        uint32_t on = index_node(I(df, rootg)->shape, al->out, al->out_len);
        if (pn == UINT32_MAX || on == UINT32_MAX) continue;
        union_sets(p, VS(df, rootg, on), VS(df, pg, pn));
    }
    /* number the buffers by their smallest value id */
    uint32_t *bid = hbmi_malloc(sizeof *bid * (nv + 1));
    if (!bid) {
        hbmi_free(p);
        return oom();
    }
    uint32_t nb = 0;
    for (uint32_t v = 0; v < nv; v++) {
        uint32_t r = uf_find(p, v);
        if (r == v) bid[v] = nb++;
        df->values[v].buffer = bid[r];
    }
    df->n_buffers = nb;
    df->buffers = dalloc(b, sizeof *df->buffers * (nb ? nb : 1));
    hbm_status st = df->buffers ? HBM_OK : arena_oom();
    if (df->buffers) {
        for (uint32_t v = 0; v < nv; v++) df->buffers[df->values[v].buffer].n_values++;
        for (uint32_t i = 0; i < nb && !st; i++) {
            df->buffers[i].values = dalloc(b, sizeof(uint32_t) * df->buffers[i].n_values);
            if (!df->buffers[i].values) st = arena_oom();
            df->buffers[i].n_values = 0;
            df->buffers[i].min_post = UINT32_MAX;
        }
        for (uint32_t v = 0; v < nv && !st; v++) {
            hbmi_buffer *bf = &df->buffers[df->values[v].buffer];
            bf->values[bf->n_values++] = v;
            if (df->values[v].size > bf->size) bf->size = df->values[v].size;
            if (df->values[v].post < bf->min_post) bf->min_post = df->values[v].post;
        }
        /* live out: a value at a position of the entry root */
        const hbmi_instr *ri = I(df, rootg);
        for (uint32_t k = 0; k < ri->shape->nodes && !st; k++) {
            const hbmi_vset *set = &df->vs[ri->pos_base + k];
            for (uint32_t t = 0; t < set->n; t++) df->buffers[df->values[hbmi_vset_at(set, t)].buffer].live_out = 1;
        }
    }
    hbmi_free(bid);
    hbmi_free(p);
    return st;
}

/* --- sharing rules ---------------------------------------------------------------------------------- */
int hbmi_df_is_user_of(const hbmi_df *df, uint32_t user, uint32_t operand) {
    if (df->gid_comp[user] != df->gid_comp[operand]) return 0;
    const hbmi_instr *u = I(df, user);
    uint32_t oi = df->gid_idx[operand];
    for (uint32_t k = 0; k < u->n_ops; k++)
        if (u->ops[k] == oi) return 1;
    return 0;
}

static int elementwise_on(const hbmi_instr *x) { return x->op == HOP_ELEMENTWISE; }

static int op_is(const hbmi_instr *x, const char *name) {
    size_t n = strlen(name);
    return x->opcode.n == n && !memcmp(x->opcode.p, name, n);
}

/* HloInstruction::IsElementwiseOnOperand: a dynamic-update-slice on its operand 0 only */
static int elementwise_on_operand(const hbmi_instr *h, uint32_t opno) {
    return h->op == HOP_ELEMENTWISE || (h->op == HOP_DUS && opno == 0);
}

static uint32_t operand_index(const hbmi_instr *h, uint32_t x) {
    for (uint32_t k = 0; k < h->n_ops; k++)
        if (h->ops[k] == x) return k;
    return UINT32_MAX;
}

/* The hero of a fusion root: up through bitcasts and one-operand elementwise ops
 * (FindNonTrivialHero, reduced to the chains these fusions have). */
static uint32_t hero_of(const hbmi_comp *fc, uint32_t r) {
    for (uint32_t d = 0; d < fc->n; d++) {
        const hbmi_instr *x = &fc->ins[r];
        if (x->n_ops != 1 || (x->op != HOP_BITCAST && x->op != HOP_ELEMENTWISE)) break;
        r = x->ops[0];
    }
    return r;
}

/* GPU's FusionCanShareBufferHint (xla/service/gpu/buffer_sharing.cc): walking the users
 * from the fusion parameter, every op met is elementwise on the operand it is reached
 * through (a copy is not), a bitcast, a tuple, the reduction hero of a reduction fusion,
 * the root dynamic-update-slice's update operand or the root scatter's input, or a
 * dynamic-slice reading the root dynamic-update-slice's own slice; the output must be
 * reached. A multi-output fusion whose walk reaches another output shares only when the
 * output is elementwise and no reached output has a transpose or copy hero. */
static int fusion_can_share(const hbmi_df *df, const hbmi_instr *fusion, uint32_t opno, uint32_t user_node) {
    const hbmi_comp *fc = &df->m->comps[fusion->called[0]];
    int64_t param = -1;
    for (uint32_t i = 0; i < fc->n; i++)
        if (fc->ins[i].op == HOP_PARAMETER && fc->ins[i].param_no == (int64_t)opno) param = i;
    if (param < 0) return 0;
    uint32_t out = fc->root;
    const hbmi_instr *r = &fc->ins[fc->root];
    if (user_node) { /* element of a tuple-shaped output */
        if (r->op != HOP_TUPLE) return 0;
        uint32_t e;
        for (e = 0; e < fusion->shape->n; e++)
            if (hbmi_shape_child(fusion->shape, e) == user_node) break;
        if (e >= r->n_ops) return 0;
        out = r->ops[e];
    }
    uint32_t nb_root = out;
    if (fc->ins[nb_root].op == HOP_BITCAST && fc->ins[nb_root].n_ops) nb_root = fc->ins[nb_root].ops[0];
    const hbmi_instr *nr = &fc->ins[nb_root];
    /* a reduction fusion's hero reduce is emitted first: what follows it cannot interfere */
    uint32_t hero_red = UINT32_MAX;
    uint32_t n_roots = r->op == HOP_TUPLE ? r->n_ops : 1;
    for (uint32_t k = 0; k < n_roots && hero_red == UINT32_MAX; k++) {
        uint32_t h = hero_of(fc, r->op == HOP_TUPLE ? r->ops[k] : fc->root);
        if (op_is(&fc->ins[h], "reduce")) hero_red = h;
    }
    uint8_t vis_small[256];
    uint32_t q_small[257];
    int heap_bufs = fc->n > 256;
    uint8_t *vis = heap_bufs ? hbmi_calloc(fc->n, 1) : vis_small;
    uint32_t *q = heap_bufs ? hbmi_malloc(sizeof *q * (fc->n + 1)) : q_small;
    if (!vis || !q) {
        if (heap_bufs) {
            hbmi_free(vis);
            hbmi_free(q);
        }
        return 0;
    }
    if (!heap_bufs) memset(vis, 0, fc->n);
    uint32_t qh = 0, qt = 0;
    q[qt++] = (uint32_t)param;
    vis[param] = 1;
    int found = 0, ok = 1;
    while (qh < qt && ok) {
        uint32_t x = q[qh++];
        if (x == out) found = 1; /* its other users are checked too */
        if (x == hero_red) continue;
        const hbmi_instr *xi = &fc->ins[x];
        for (uint32_t u = 0; u < xi->n_users && ok; u++) {
            uint32_t h = xi->users[u];
            const hbmi_instr *hi = &fc->ins[h];
            if (!vis[h]) {
                vis[h] = 1;
                q[qt++] = h;
            }
            uint32_t oi = operand_index(hi, x);
            if (h == nb_root && hi->op == HOP_SCATTER) {
                uint32_t inputs = hi->shape->prim == HBMI_PRIM_TUPLE ? hi->shape->n : 1, uses = 0;
                for (uint32_t k = 0; k < hi->n_ops; k++) uses += hi->ops[k] == x;
                if (oi < inputs && uses == 1) continue;
            }
            if (nr->op == HOP_DUS && nr->n_ops >= 2 && op_is(hi, "dynamic-slice") && hi->n_ops &&
                nr->ops[0] == hi->ops[0] && hbmi_shape_equal(hi->shape, fc->ins[nr->ops[1]].shape)) {
                /* the same slice as the update: read before it is written */
                if (hbmi_shape_elements(hi->shape) != 1 || hbmi_shape_elements(fc->ins[nr->ops[1]].shape) != 1)
                    for (uint32_t k = 1; k < hi->n_ops && ok; k++)
                        if (k + 1 >= nr->n_ops || hi->ops[k] != nr->ops[k + 1]) ok = 0;
            } else if ((!elementwise_on_operand(hi, oi) || hi->op == HOP_COPY) && hi->op != HOP_BITCAST &&
                       hi->op != HOP_TUPLE && h != hero_red) {
                if (h != nb_root || hi->op != HOP_DUS || oi != 1) ok = 0;
            }
        }
    }
    if (ok && r->op == HOP_TUPLE) { /* IsMultiOutputFusion */
        int other = 0, transpose = 0;
        for (uint32_t k = 0; k < r->n_ops; k++) {
            if (!vis[r->ops[k]]) continue;
            if (r->ops[k] != out) other = 1;
            const hbmi_instr *h = &fc->ins[hero_of(fc, r->ops[k])];
            if (op_is(h, "transpose") || h->op == HOP_COPY) transpose = 1;
        }
        if (other && (nr->op != HOP_ELEMENTWISE || transpose)) ok = 0;
    }
    if (heap_bufs) {
        hbmi_free(vis);
        hbmi_free(q);
    }
    return ok && found;
}

/* XLA:CPU passes no buffer-sharing hint, so HloDataflowAnalysis::
 * CanShareOperandBufferWithUser decides alone (xla/hlo/analysis/hlo_dataflow_analysis.cc):
 * an output fusion whose root is an add shares the add's operand that is not the dot or
 * convolution, when the fusion parameter's only use is that operand; every other fusion
 * shares when each transitive use of the fusion parameter is elementwise on what reaches it
 * or a tuple (AreTransitiveUsesElementwiseOrTuple; HloInstruction::IsElementwiseImpl:
 * a copy is, a dynamic-update-slice on its operand 0 is, a bitcast is not). */
static int cpu_fusion_can_share(const hbmi_df *df, const hbmi_instr *fusion, uint32_t opno) {
    const hbmi_comp *fc = &df->m->comps[fusion->called[0]];
    int64_t param = -1;
    for (uint32_t i = 0; i < fc->n; i++)
        if (fc->ins[i].op == HOP_PARAMETER && fc->ins[i].param_no == (int64_t)opno) param = i;
    if (param < 0) return 0;
    if (fusion->fusion_kind == HBMI_FUSION_OUTPUT) {
        const hbmi_instr *r = &fc->ins[fc->root];
        if (!op_is(r, "add") || r->n_ops != 2) return 0;
        int d = -1;
        for (int k = 0; k < 2 && d < 0; k++)
            if (op_is(&fc->ins[r->ops[k]], "dot") || op_is(&fc->ins[r->ops[k]], "convolution")) d = k;
        if (d < 0) return 0;
        const hbmi_instr *pi = &fc->ins[param];
        uint32_t uses = 0;
        for (uint32_t u = 0; u < pi->n_users; u++) {
            const hbmi_instr *hi = &fc->ins[pi->users[u]];
            for (uint32_t k = 0; k < hi->n_ops; k++) uses += hi->ops[k] == (uint32_t)param;
        }
        return uses == 1 && r->ops[1 - d] == (uint32_t)param;
    }
    uint8_t vis_small[256];
    uint32_t q_small[257];
    int heap_bufs = fc->n > 256;
    uint8_t *vis = heap_bufs ? hbmi_calloc(fc->n, 1) : vis_small;
    uint32_t *q = heap_bufs ? hbmi_malloc(sizeof *q * (fc->n + 1)) : q_small;
    int ok = vis && q;
    if (ok && !heap_bufs) memset(vis, 0, fc->n);
    uint32_t qh = 0, qt = 0;
    if (ok) {
        q[qt++] = (uint32_t)param;
        vis[param] = 1;
    }
    while (ok && qh < qt) {
        uint32_t x = q[qh++];
        const hbmi_instr *xi = &fc->ins[x];
        for (uint32_t u = 0; u < xi->n_users && ok; u++) {
            uint32_t h = xi->users[u];
            const hbmi_instr *hi = &fc->ins[h];
            for (uint32_t k = 0; k < hi->n_ops && ok; k++)
                if (hi->ops[k] == x && !elementwise_on_operand(hi, k) && hi->op != HOP_COPY && hi->op != HOP_TUPLE) ok = 0;
            if (!vis[h]) {
                vis[h] = 1;
                q[qt++] = h;
            }
        }
    }
    if (heap_bufs) {
        hbmi_free(vis);
        hbmi_free(q);
    }
    return ok;
}

/* tuple element of s that holds shape node k (k > 0) */
static uint32_t element_of(const hbmi_shape *s, uint32_t k) {
    if (s->prim != HBMI_PRIM_TUPLE) return UINT32_MAX;
    for (uint32_t e = 0; e < s->n; e++) {
        uint32_t c = hbmi_shape_child(s, e);
        if (k >= c && k < c + s->elems[e].nodes) return e;
    }
    return UINT32_MAX;
}

/* is (operand opno, {}) -> output node user_node one of u's default in-place pairs? */
static int in_place_pair(const hbmi_instr *u, uint32_t opno, uint32_t user_node) {
    uint32_t k = in_place_operands(u);
    if (k == 1) return opno == 0 && user_node == 0;
    return opno < k && u->shape->prim == HBMI_PRIM_TUPLE && opno < u->shape->n &&
           user_node == hbmi_shape_child(u->shape, opno);
}

int hbmi_df_can_share(const hbmi_df *df, uint32_t operand, uint32_t operand_node, uint32_t user, uint32_t user_node) {
    const hbmi_instr *u = I(df, user), *o = I(df, operand);
    if (!hbmi_df_is_user_of(df, user, operand)) return 0;
    const hbmi_shape *os = hbmi_shape_node(o->shape, operand_node);
    const hbmi_shape *us = hbmi_shape_node(u->shape, user_node);
    if (!os || !us) return 0;
    /* XLA:CPU: ShapeUtil::Equal of the two, layouts included, before any rule */
    if (df->fusion_shapes_equal && !hbmi_shape_equal_layout(os, us)) return 0;
    uint32_t opno = 0;
    for (uint32_t k = 0; k < u->n_ops; k++)
        if (u->ops[k] == df->gid_idx[operand]) {
            opno = k;
            break;
        }
    if (u->op == HOP_FUSION && u->n_called) {
        if (!hbmi_shape_equal(os, us)) {
            if (df->fusion_shapes_equal) return 0;
            if (os->prim == HBMI_PRIM_TUPLE || us->prim == HBMI_PRIM_TUPLE) return 0;
            if (hbmi_shape_elements(os) != hbmi_shape_elements(us)) return 0;
            if (hbm_hlo_prim_bits((hbm_hlo_prim)os->prim) != hbm_hlo_prim_bits((hbm_hlo_prim)us->prim)) return 0;
        }
        if (df->fusion_shapes_equal) return cpu_fusion_can_share(df, u, opno);
        return fusion_can_share(df, u, opno, user_node);
    }
    if (!hbmi_shape_equal(os, us)) return 0;
    uint32_t uses_of_operand = 0;
    for (uint32_t k = 0; k < u->n_ops; k++) uses_of_operand += u->ops[k] == df->gid_idx[operand];
    if (default_in_place(df->m, u) && in_place_pair(u, opno, user_node)) return 1; /* must alias */
    if (u->op == HOP_DUS || u->op == HOP_SCATTER) return uses_of_operand == 1 && opno == 0;
    if (u->op == HOP_TRIANGULAR_SOLVE) return uses_of_operand == 1 && opno == 1;
    if (u->op == HOP_SORT) { /* only with no other user, and element i for operand i */
        if (o->n_users != 1) return 0;
        if (u->n_ops == 1) return 1;
        return user_node && uses_of_operand == 1 && element_of(u->shape, user_node) == opno;
    }
    if (u->op == HOP_CUSTOM_CALL) {
        /* GPU's CanShareBufferHint: cuSOLVER's Cholesky overwrites its operand with output {0} */
        static const char chol[] = "__cusolver$cholesky";
        if (u->target.n == sizeof chol - 1 && !memcmp(u->target.p, chol, sizeof chol - 1) &&
            u->shape->prim == HBMI_PRIM_TUPLE && user_node == hbmi_shape_child(u->shape, 0))
            return 1;
        for (uint32_t a = 0; a < u->n_alias; a++)
            if ((uint64_t)u->alias[a].operand == opno) return 1;
        return 0;
    }
    return elementwise_on(u);
}

/* --- driver ------------------------------------------------------------------------------------------- */
void hbmi_df_free(hbmi_df *df) {
    if (!df) return;
    hbmi_arena_free(&df->arena);
    hbmi_free(df->vs);
    hbmi_free(df->values);
    hbmi_free(df->gid_comp);
    hbmi_free(df->gid_idx);
    hbmi_free(df->comp_base);
    hbmi_free(df->flat);
    hbmi_free(df);
}

static void reset_module(hbm_hlo_module *m) {
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        hbmi_comp *c = &m->comps[ci];
        c->kind = 0;
        c->n_params = 0;
        c->params = NULL;
        for (uint32_t i = 0; i < c->n; i++) {
            c->ins[i].n_users = 0;
            c->ins[i].users = NULL;
            c->ins[i].analyzed = 0;
            c->ins[i].time = -1;
        }
    }
}

/* XLA:TPU rounds a tuple's index table (4 bytes an element) up to 512 bytes on v4 and v5e,
 * 32 on v5p and v6e (its buffer-assignment dumps, docs/tpu.md) */
uint64_t hbmi_df_shape_bytes(const hbmi_df *df, const hbmi_shape *sub) {
    uint64_t b = hbmi_shape_bytes(sub, df->pointer_size);
    if (sub->prim == HBMI_PRIM_TUPLE && df->tuple_align > 1) b = (b + df->tuple_align - 1) / df->tuple_align * df->tuple_align;
    return b;
}

hbm_status hbmi_df_run(hbm_hlo_module *m, unsigned pointer_size, unsigned tuple_align, hbmi_df **out) {
    *out = NULL;
    hbmi_df *df = hbmi_calloc(1, sizeof *df);
    if (!df) return hbmi_error(HBM_ERR_NOMEM, "plan: out of host memory");
    df->m = m;
    df->pointer_size = pointer_size;
    df->tuple_align = tuple_align;
    dfb b = {df, NULL, 0, NULL};
    hbm_status st = HBM_OK;
    reset_module(m);
    uint64_t n = 0;
    df->comp_base = hbmi_malloc(sizeof *df->comp_base * m->n_comps);
    for (uint32_t ci = 0; df->comp_base && ci < m->n_comps; ci++) {
        df->comp_base[ci] = (uint32_t)n;
        n += m->comps[ci].n;
    }
    if (n >= UINT32_MAX) st = hbmi_error(HBM_ERR_UNSUPPORTED, "plan: too many instructions");
    df->n_gid = (uint32_t)n;
    df->gid_comp = hbmi_malloc(sizeof(uint32_t) * (n + 1));
    df->gid_idx = hbmi_malloc(sizeof(uint32_t) * (n + 1));
    uint64_t slots = n + 1;
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t i = 0; i < m->comps[ci].n; i++)
            if (m->comps[ci].ins[i].op == HOP_ASYNC_START) {
                const hbmi_instr *in = &m->comps[ci].ins[i];
                uint64_t k = in->n_ops + 1;
                for (uint32_t j = 0; j < in->n_called; j++)
                    if (m->comps[in->called[j]].n > k) k = m->comps[in->called[j]].n;
                slots += k;
            }
    if (slots > UINT32_MAX) slots = UINT32_MAX;
    df->flat = hbmi_malloc(sizeof(uint32_t) * slots);
    if (!st && (!df->comp_base || !df->gid_comp || !df->gid_idx || !df->flat)) st = oom();
    for (uint32_t ci = 0; !st && ci < m->n_comps; ci++)
        for (uint32_t i = 0; i < m->comps[ci].n; i++) {
            df->gid_comp[df->comp_base[ci] + i] = ci;
            df->gid_idx[df->comp_base[ci] + i] = i;
        }
    if (!st) st = classify(&b);
    /* users for every computation (fusion analysis needs them too); parameters by number */
    for (uint32_t ci = 0; !st && ci < m->n_comps; ci++) {
        hbmi_comp *c = &m->comps[ci];
        if ((st = build_users(&b, c))) break;
        int64_t maxp = -1;
        for (uint32_t i = 0; i < c->n; i++)
            if (c->ins[i].op == HOP_PARAMETER && c->ins[i].param_no > maxp) maxp = c->ins[i].param_no;
        if (maxp >= 0 && maxp < (int64_t)c->n) {
            c->n_params = (uint32_t)maxp + 1;
            c->params = dalloc(&b, sizeof *c->params * c->n_params);
            if (!c->params) {
                st = arena_oom();
                break;
            }
            for (uint32_t i = 0; i < c->n_params; i++) c->params[i] = 0;
            for (uint32_t i = 0; i < c->n; i++)
                if (c->ins[i].op == HOP_PARAMETER && c->ins[i].param_no >= 0) c->params[c->ins[i].param_no] = i;
        } else if (maxp >= (int64_t)c->n) {
            st = hbmi_error(HBM_ERR_PARSE, "%s: computation %.*s: parameter(%lld) but only %u instructions", m->path,
                            (int)c->name.n, c->name.p, (long long)maxp, c->n);
        }
    }
    if (!st) st = define_values(&b);
    if (!st) st = solve(&b);
    int64_t phis = 0;
    if (!st) st = mark_phis(&b, &phis);
    if (!st && phis) { /* SSA form: again with the loops' phi values */
        hbmi_free(df->vs);
        hbmi_free(df->values);
        df->vs = NULL;
        df->values = NULL;
        df->n_values = 0;
        st = define_values(&b);
        if (!st) st = solve(&b);
    }
    if (!st) {
        uint8_t *done = hbmi_calloc(m->n_comps, 1);
        if (!done) st = oom();
        else {
            st = flatten(&b, m->entry, done, 0);
            hbmi_free(done);
        }
    }
    if (!st) st = uses_and_ranges(&b);
    if (!st) st = alias_buffers(&b);
    hbmi_free(b.phi);
    if (st) {
        hbmi_df_free(df);
        return st;
    }
    *out = df;
    return HBM_OK;
}
