/* fit.c - hbm_fit_run: settings, donations, then the recompute/offload set (hbm's search and
 * XLA's algorithm), each written as a module and planned again; the result and its queries. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit/fit_internal.h"
#include "fit/fit_result.h"

void hbm_fit_options_default(hbm_fit_options *o) {
    memset(o, 0, sizeof *o);
    hbm_plan_options_default(&o->plan);
    o->timeout_s = 2.0;
}

hbm_status hbm_fit_remat_parse(const char *s, hbm_fit_remat *out) {
    if (s && !strcmp(s, "hbm")) return *out = HBM_FIT_REMAT_HBM, HBM_OK;
    if (s && !strcmp(s, "xla")) return *out = HBM_FIT_REMAT_XLA, HBM_OK;
    if (s && !strcmp(s, "none")) return *out = HBM_FIT_REMAT_NONE, HBM_OK;
    return hbmi_error(HBM_ERR_INVALID, "remat '%s': expected hbm, xla or none", s ? s : "");
}

const char *hbm_fit_kind_str(hbm_fit_kind k) {
    switch (k) {
    case HBM_FIT_SETTING: return "setting";
    case HBM_FIT_DONATE: return "donate";
    case HBM_FIT_REMATERIALIZE: return "remat";
    case HBM_FIT_OFFLOAD: return "offload";
    }
    return "?";
}

const char *hbmi_fit_str(hbm_fit_result *r, const char *p, size_t n) {
    char *s = hbmi_arena_alloc(&r->strings, n + 1);
    if (!s) return "";
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

/* Parse and plan a changed module's text with r's rules: its peak, and the plan and module
 * when plan_out (else freed). Counts one plan. */
static hbm_status plan_text(hbm_fit_result *r, const char *text, size_t len, uint64_t *peak, hbm_plan **plan_out,
                            hbm_hlo_module **mod_out) {
    hbm_hlo_module *m2 = NULL;
    hbm_plan *p2 = NULL;
    hbm_status s = hbm_hlo_parse(text, len, r->m->path[0] ? r->m->path : "fit", &m2);
    if (!s) s = hbm_plan_run(m2, &r->popt, &p2);
    if (!s) {
        hbm_plan_stats st;
        hbm_plan_get_stats(p2, &st);
        *peak = st.peak_bytes;
    }
    if (plan_out && !s) {
        *plan_out = p2;
        *mod_out = m2;
    } else {
        hbm_plan_free(p2);
        hbm_hlo_module_free(m2);
    }
    r->n_plans++;
    return s;
}

/* Plan a changed module's text (taken: kept in *keep when keep, else freed): its peak. */
static hbm_status plan_changed(hbm_fit_result *r, char *text, size_t len, uint64_t *peak, char **keep,
                               size_t *keep_len, hbm_plan **plan_out, hbm_hlo_module **mod_out) {
    hbm_status s = plan_text(r, text, len, peak, plan_out, mod_out);
    if (s) s = hbmi_error_prefix(s, "fit: the changed module does not plan: ");
    if (keep && !s) {
        free(*keep);
        *keep = text;
        *keep_len = len;
    } else {
        free(text);
    }
    return s;
}

/* Plan module m with edits e: the changed module's peak (and its text when keep). */
static hbm_status verify(hbm_fit_result *r, const hbmi_fit_edit *e, size_t n, uint64_t *peak, char **keep,
                         size_t *keep_len, hbm_plan **plan_out, hbm_hlo_module **mod_out) {
    char *text;
    size_t len;
    hbm_status s = hbmi_fit_write_mem(r->m, e, n, &text, &len);
    return s ? s : plan_changed(r, text, len, peak, keep, keep_len, plan_out, mod_out);
}

/* Plan XLA's set: the clones of its walk on the instruction lists when it made them (written
 * in rounds, fit_xla.c), else its candidates. */
static size_t gather(hbm_fit_result *r, hbmi_fit_model *mo, int xla, hbmi_fit_edit *out, int with_don);
static hbm_status xla_verify(hbm_fit_result *r, hbmi_fit_model *mo, hbmi_fit_edit *ed, uint64_t *peak, char **keep,
                             size_t *keep_len, hbm_plan **plan_out, hbm_hlo_module **mod_out) {
    if (!mo->n_xc) return verify(r, ed, gather(r, mo, 1, ed, 0), peak, keep, keep_len, plan_out, mod_out);
    char *text;
    size_t len;
    hbm_status s = hbmi_fit_xla_write(mo, &text, &len);
    return s ? s : plan_changed(r, text, len, peak, keep, keep_len, plan_out, mod_out);
}

/* Residual x recomputed by the backward loop (fit_recompute.c), planned: x->recompute_peak,
 * or why it is not in x->why_estimate. Only running out of host memory is an error. */
static hbm_status recompute(hbm_fit_result *r, hbmi_jax_residual *x) {
    char *text = NULL;
    size_t len = 0;
    uint64_t flops = 0;
    hbm_status s = hbmi_jax_recompute_write(r->m, x, r->res, r->n_res, &text, &len, &flops, x->why_estimate,
                                            sizeof x->why_estimate);
    if (s == HBM_ERR_NOMEM) return s;
    if (s) return HBM_OK;
    memcpy(x->recompute_note, x->why_estimate, sizeof x->recompute_note);
    x->why_estimate[0] = 0;
    uint64_t peak = 0;
    s = plan_text(r, text, len, &peak, NULL, NULL);
    if (!s) {
        x->recompute_peak = peak;
        x->recompute_flops = flops; /* what the written module computes again */
    } else if (s != HBM_ERR_NOMEM) {
        snprintf(x->why_estimate, sizeof x->why_estimate, "the edited module does not plan: %s", hbm_last_error());
        x->recompute_note[0] = 0;
        s = HBM_OK;
    }
    free(text);
    return s;
}

/* Whether the module has HLO text behind its instructions: every change fit makes is written
 * into that text (a module read from protobuf gets its whole text from hbmi_proto_text). */
static int has_text(const hbm_hlo_module *m) {
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t j = 0; j < m->comps[ci].n; j++) {
            const char *p = m->comps[ci].ins[j].opcode.p;
            if (!m->comps[ci].ins[j].synthetic && (p < m->text || p >= m->text + m->len)) return 0;
        }
    return 1;
}

/* --- donation ----------------------------------------------------------------------------------- */
static uint32_t top_value(const hbmi_df *df, uint32_t gid) {
    const hbmi_vset *vs = hbmi_df_set(df, gid, 0);
    for (uint32_t k = 0; k < vs->n; k++) {
        uint32_t v = hbmi_vset_at(vs, k);
        if (df->values[v].gid == gid && df->values[v].node == 0) return v;
    }
    return UINT32_MAX;
}

static hbmi_str layout_text(const hbm_hlo_module *m, const hbmi_instr *in) {
    const char *s = m->text + in->off, *e = in->opcode.p;
    hbmi_str r = {e, 0};
    for (const char *q = s; q < e; q++)
        if (*q == ']') r.p = q + 1;
    while (e > r.p && e[-1] == ' ') e--;
    r.n = (uint32_t)(e - r.p);
    return r;
}

static int out_aliased(const hbm_hlo_module *m, int32_t out) {
    for (uint32_t k = 0; k < m->n_io_alias; k++) {
        const hbmi_alias *a = &m->io_alias[k];
        if (out < 0 ? a->out_len == 0 : (a->out_len >= 1 && a->out[0] == out)) return 1;
    }
    return 0;
}

static hbm_status add_change(hbm_fit_result *r, const hbm_fit_change *c, const hbmi_fit_edit *e) {
    if (hbmi_grow((void **)&r->ch, &r->cap_ch, r->n_ch + 1, sizeof *r->ch) ||
        hbmi_grow((void **)&r->ed, &r->cap_ed, r->n_ch + 1, sizeof *r->ed))
        return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    r->ch[r->n_ch] = *c;
    r->ed[r->n_ch] = *e;
    r->n_ch++;
    return HBM_OK;
}

static void describe(hbm_fit_result *r, hbm_fit_change *c, uint32_t ci, uint32_t i) {
    const hbmi_instr *in = &r->m->comps[ci].ins[i];
    char sh[160];
    hbmi_shape_print(in->shape, sh, sizeof sh);
    c->instruction = hbmi_fit_str(r, in->name.p, in->name.n);
    c->shape = hbmi_fit_str(r, sh, strlen(sh));
    /* the metadata's C escapes undone, as the plan's buffers give them (a module read from text
     * and from protobuf say the same) */
    char t[1024];
    hbmi_plan_unescape(t, sizeof t, in->meta_op_name.p ? in->meta_op_name.p : "", in->meta_op_name.n);
    c->op_name = hbmi_fit_str(r, t, strlen(t));
    hbmi_plan_unescape(t, sizeof t, in->meta_source_file.p ? in->meta_source_file.p : "", in->meta_source_file.n);
    c->source_file = hbmi_fit_str(r, t, strlen(t));
    c->source_line = in->meta_source_line;
    c->param_number = -1;
}

/* JAX names an entry parameter by its argument's path ("params['w']", "args[2]", "x": the
 * MLIR argument locations jax/_src/interpreters/mlir.py gives from the arguments' names);
 * donation works on a whole argument of f, by name or by position. */
static const char *donate_text(hbm_fit_result *r, const hbm_fit_change *c, uint32_t pn) {
    const char *op = c->op_name;
    size_t n = 0;
    while (op[n] == '_' || (op[n] >= 'a' && op[n] <= 'z') || (op[n] >= 'A' && op[n] <= 'Z') ||
           (n && op[n] >= '0' && op[n] <= '9'))
        n++;
    int path = n && (!op[n] || op[n] == '[' || op[n] == '.');
    char j[700];
    if (path && n == 4 && !memcmp(op, "args", 4) && op[4] == '[' && op[5] >= '0' && op[5] <= '9') {
        long k = strtol(op + 5, NULL, 10);
        snprintf(j, sizeof j, "jax.jit(f, donate_argnums=(%ld,)): donates positional argument %ld (%s is HLO parameter %u)",
                 k, k, op, pn);
    } else if (path) {
        snprintf(j, sizeof j, "jax.jit(f, donate_argnames=(\"%.*s\",)): donates argument %.*s (%s is HLO parameter %u)",
                 (int)n, op, (int)n, op, op, pn);
    } else {
        snprintf(j, sizeof j,
                 "jax.jit(f, donate_argnums=(%u,)): HLO parameter %u, when each argument of f is one array "
                 "(no op_name names it; JAX numbers f's arrays from 0 and leaves unused ones out)",
                 pn, pn);
    }
    return hbmi_fit_str(r, j, strlen(j));
}

static hbm_status donations(hbm_fit_result *r, const hbm_plan *p) {
    const hbm_hlo_module *m = r->m;
    const hbmi_df *df = hbmi_plan_df(p);
    const hbmi_comp *e = &m->comps[m->entry];
    const hbmi_instr *root = &e->ins[e->root];
    uint32_t base = df->comp_base[m->entry];
    uint32_t nout = root->op == HOP_TUPLE ? root->n_ops : 1;
    uint8_t *taken = hbmi_calloc(e->n_params + 1, 1);
    if (!taken) return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    hbm_status s = HBM_OK;
    for (uint32_t k = 0; k < nout && !s; k++) {
        int32_t out = root->op == HOP_TUPLE ? (int32_t)k : -1;
        uint32_t oi = root->op == HOP_TUPLE ? root->ops[k] : e->root;
        const hbmi_instr *oin = &e->ins[oi];
        if (out_aliased(m, out) || oin->shape->prim == HBMI_PRIM_TUPLE || oin->op == HOP_PARAMETER) continue;
        uint32_t ov = top_value(df, base + oi);
        if (ov == UINT32_MAX || df->values[ov].entry_param || df->values[ov].constant) continue;
        int64_t ostart = df->values[ov].start;
        hbmi_str ol = layout_text(m, oin);
        for (uint32_t pn = 0; pn < e->n_params; pn++) {
            if (taken[pn]) continue;
            const hbmi_instr *pin = &e->ins[e->params[pn]];
            if (!hbmi_shape_equal(pin->shape, oin->shape) || pin->shape->memory_space ||
                hbmi_param_node_aliased(m, (int64_t)pn, 0, pin->shape))
                continue;
            hbmi_str pl = layout_text(m, pin);
            if (pl.n != ol.n || memcmp(pl.p, ol.p, pl.n)) continue;
            uint32_t pv = top_value(df, base + e->params[pn]);
            if (pv == UINT32_MAX) continue;
            int64_t last = -1;
            for (uint32_t u = 0; u < df->values[pv].n_uses; u++) {
                const hbmi_instr *ui = hbmi_df_instr(df, df->values[pv].uses[u]);
                if (ui->time > last) last = ui->time;
            }
            if (last > ostart) continue; /* read after the output is written: XLA would copy */
            hbmi_fit_edit ed = {.kind = HBM_FIT_DONATE, .param = pn, .out = out};
            hbm_fit_change c;
            memset(&c, 0, sizeof c);
            c.kind = HBM_FIT_DONATE;
            describe(r, &c, m->entry, e->params[pn]);
            c.param_number = (int)pn;
            c.bytes = df->values[pv].size;
            c.model_bytes = c.bytes;
            uint64_t peak = 0;
            s = verify(r, &ed, 1, &peak, NULL, NULL, NULL, NULL);
            if (s) break;
            c.verified_peak = (int64_t)peak;
            c.jax = donate_text(r, &c, pn);
            s = add_change(r, &c, &ed);
            taken[pn] = 1;
            break;
        }
    }
    hbmi_free(taken);
    return s;
}

/* --- the JAX side of a recompute or an offload ---------------------------------------------------- */
/* a checkpoint name from the op_name's last part ("dot_general" of ".../closed_call/dot_general") */
static void ckpt_name(const char *op, char *out, size_t cap) {
    const char *p = strrchr(op, '/');
    p = p ? p + 1 : op;
    size_t n = 0;
    for (; *p && n + 1 < cap && n < 40; p++)
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')
            out[n++] = *p;
    out[n] = 0;
    if (!n || !strcmp(out, "while")) snprintf(out, cap, "%s", n ? "scan_output" : "v"); /* a loop's result */
}

/* the value is one autodiff saves: computed under jvp(...) and read under transpose(...) */
static int residual(const hbm_hlo_module *m, uint32_t ci, uint32_t i) {
    const hbmi_comp *c = &m->comps[ci];
    const hbmi_instr *in = &c->ins[i];
    if (hbmi_jax_pass(in->meta_op_name.p, in->meta_op_name.n) != HBMI_JAX_FWD) return 0;
    for (uint32_t u = 0; u < in->n_users; u++) {
        const hbmi_instr *us = &c->ins[in->users[u]];
        if (hbmi_jax_pass(us->meta_op_name.p, us->meta_op_name.n) == HBMI_JAX_BWD) return 1;
        if (us->op == HOP_TUPLE) /* into a backward loop */
            for (uint32_t v = 0; v < us->n_users; v++) {
                const hbmi_instr *w = &c->ins[us->users[v]];
                if (hbmi_jax_pass(w->meta_op_name.p, w->meta_op_name.n) == HBMI_JAX_BWD) return 1;
            }
    }
    return 0;
}

static const char *jax_hint(hbm_fit_result *r, const hbmi_fit_cand *cd) {
    const hbm_hlo_module *m = r->m;
    const hbmi_instr *in = &m->comps[cd->edit.comp].ins[cd->edit.ins];
    char j[2048];
    if (cd->edit.kind == HBM_FIT_OFFLOAD && cd->edit.from == UINT32_MAX) {
        char op[512];
        hbmi_plan_unescape(op, sizeof op, in->meta_op_name.p ? in->meta_op_name.p : "", in->meta_op_name.n);
        char who[600];
        if (op[0]) snprintf(who, sizeof who, "argument %s (HLO parameter %lld)", op, (long long)cd->edit.param);
        else snprintf(who, sizeof who, "HLO parameter %lld", (long long)cd->edit.param);
        snprintf(j, sizeof j,
                 "keep %s in host memory: pass it as jax.device_put(x, s.with_memory_kind('pinned_host')) (s: its "
                 "sharding; the same for its in_shardings entry) and inside f read it through "
                 "jax.device_put(x, s.with_memory_kind('device'))",
                 who);
        return hbmi_fit_str(r, j, strlen(j));
    }
    if (cd->edit.drop) {
        snprintf(j, sizeof j, "no JAX-side change: XLA's schedule moves it next to its first use (computed later, "
                              "not twice); hbm fit --emit writes that module");
        return hbmi_fit_str(r, j, strlen(j));
    }
    if (in->op == HOP_GTE && in->n_ops) /* a scan's residual as the loop leaves it */
        for (size_t k = 0; k < r->n_res; k++) {
            const hbmi_jax_residual *x = &r->res[k];
            const hbmi_instr *src = &m->comps[cd->edit.comp].ins[in->ops[0]];
            int leaving = x->comp == cd->edit.comp && x->loop_ins == in->ops[0] && (int64_t)x->index == in->gte_index;
            int read = x->bwd_body == cd->edit.comp && src->op == HOP_PARAMETER && (int64_t)x->bwd_index == in->gte_index;
            int filled = x->fwd_body == cd->edit.comp && src->op == HOP_PARAMETER && (int64_t)x->index == in->gte_index;
            if (leaving || read || filled) {
                snprintf(j, sizeof j, "the scan over %lld layers saves it for the backward pass: the change is the "
                                      "policy named above",
                         (long long)x->layers);
                return hbmi_fit_str(r, j, strlen(j));
            }
        }
    if (!r->has_backward) {
        snprintf(j, sizeof j, "no JAX-side change: this module has no backward pass, and jax.checkpoint policies act "
                              "only on what autodiff saves; the change is XLA's (hbm fit --emit writes it)");
        return hbmi_fit_str(r, j, strlen(j));
    }
    if (!residual(m, cd->edit.comp, cd->edit.ins)) {
        int pass = hbmi_jax_pass(in->meta_op_name.p, in->meta_op_name.n);
        snprintf(j, sizeof j,
                 "no JAX-side change: autodiff does not save it (%s); the change is XLA's (hbm fit --emit writes it)",
                 pass == HBMI_JAX_FWD   ? "computed and read in the forward pass"
                 : pass == HBMI_JAX_BWD ? "part of the backward pass"
                 : pass == HBMI_JAX_REMAT ? "already recomputed in the backward pass"
                 : in->meta_op_name.n   ? "outside autodiff"
                                        : "no op_name says which pass computes it");
        return hbmi_fit_str(r, j, strlen(j));
    }
    char op[512], name[48], file[512], where[1100];
    int line;
    hbmi_plan_unescape(op, sizeof op, in->meta_op_name.p ? in->meta_op_name.p : "", in->meta_op_name.n);
    ckpt_name(op, name, sizeof name);
    char mod[256];
    if (hbmi_jax_where(m, in, file, sizeof file, &line)) snprintf(where, sizeof where, "at %s:%d", file, line);
    else if (hbmi_jax_module_path(op, mod, sizeof mod) && strchr(mod, '/'))
        snprintf(where, sizeof where, "in the Flax module %s, where %s is computed", mod, op);
    else snprintf(where, sizeof where, "where %s is computed", op);
    if (cd->edit.kind == HBM_FIT_OFFLOAD)
        snprintf(j, sizeof j,
                 "x = checkpoint_name(x, \"%s\") %s, and on the function around it jax.checkpoint(f, "
                 "policy=jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
                 "names_which_can_be_offloaded=[\"%s\"], offload_src=\"device\", offload_dst=\"pinned_host\"))",
                 name, where, name);
    else
        snprintf(j, sizeof j,
                 "x = checkpoint_name(x, \"%s\") %s, and on the function around it jax.checkpoint(f, "
                 "policy=jax.checkpoint_policies.save_any_names_but_these(\"%s\")): the backward pass recomputes it",
                 name, where, name);
    return hbmi_fit_str(r, j, strlen(j));
}

/* --- the sets ----------------------------------------------------------------------------------- */
/* edits: the donations chosen, then the candidates flagged (hbm's or XLA's) */
static size_t gather(hbm_fit_result *r, hbmi_fit_model *mo, int xla, hbmi_fit_edit *out, int with_don) {
    size_t n = 0;
    /* a clone of a tuple-shaped value and copies of one of its elements (through the same
     * get-tuple-element) cannot both be written: the clone is kept (the model counted both;
     * the plan of what is written is what is reported) */
    for (uint32_t k = 0; !xla && k < mo->n_cand; k++) {
        hbmi_fit_cand *c = &mo->cand[k];
        if (!c->chosen || c->edit.kind != HBM_FIT_OFFLOAD || c->edit.from == UINT32_MAX) continue;
        const hbmi_instr *g = &mo->m->comps[c->edit.comp].ins[c->edit.ins];
        if (g->op != HOP_GTE || !g->n_ops) continue;
        for (uint32_t j = 0; j < mo->n_cand; j++)
            if (mo->cand[j].chosen && mo->cand[j].edit.kind == HBM_FIT_REMATERIALIZE &&
                mo->cand[j].edit.comp == c->edit.comp && mo->cand[j].edit.ins == g->ops[0])
                c->chosen = 0;
    }
    for (size_t k = 0; with_don && k < r->n_ch; k++)
        if (r->ch[k].kind == HBM_FIT_DONATE && r->ch[k].chosen) out[n++] = r->ed[k];
    for (uint32_t k = 0; k < mo->n_cand; k++)
        if (xla ? mo->cand[k].xla_chosen : mo->cand[k].chosen) out[n++] = mo->cand[k].edit;
    return n;
}

static void set_totals(const hbmi_fit_model *mo, int xla, hbm_fit_set *s) {
    s->recompute_flops = 0;
    s->offload_bytes = 0;
    s->cost_s = 0;
    s->n_changes = 0;
    for (uint32_t k = 0; k < mo->n_cand; k++) {
        const hbmi_fit_cand *c = &mo->cand[k];
        if (!(xla ? c->xla_chosen : c->chosen)) continue;
        s->n_changes++;
        s->cost_s += c->cost_s;
        if (c->edit.kind == HBM_FIT_OFFLOAD) s->offload_bytes += c->bytes;
        else s->recompute_flops += c->flops;
    }
}

/* Verify the set the search left in cand[].chosen; keep it in best when it fits or gets
 * lower than the best so far (fitting sets: the search's order, cheaper first). */
typedef struct best_set {
    uint8_t *set;
    uint64_t peak;
    int fits, proven;
} best_set;

static hbm_status try_set(hbm_fit_result *r, hbmi_fit_model *mo, hbmi_fit_edit *ed, best_set *b, int proven,
                          uint64_t *peak) {
    uint32_t before = 0, after = 0;
    for (uint32_t k = 0; k < mo->n_cand; k++) before += mo->cand[k].chosen != 0;
    size_t n = gather(r, mo, 0, ed, 1);
    for (uint32_t k = 0; k < mo->n_cand; k++) after += mo->cand[k].chosen != 0;
    if (after != before) proven = 0; /* not the set the search proved */
    hbm_status s = verify(r, ed, n, peak, NULL, NULL, NULL, NULL);
    if (s) return s;
    int fits = *peak <= r->sum.target_bytes;
    if ((fits && !b->fits) || (!fits && !b->fits && *peak < b->peak)) {
        for (uint32_t k = 0; k < mo->n_cand; k++) b->set[k] = mo->cand[k].chosen;
        b->peak = *peak;
        b->fits = fits;
        b->proven = proven;
    }
    return HBM_OK;
}

static hbm_status run_hbm(hbm_fit_result *r, hbmi_fit_model *mo, double timeout, uint64_t don_peak,
                          hbmi_fit_edit *ed) {
    uint64_t target = r->sum.target_bytes;
    hbm_fit_set *set = &r->sum.hbm;
    uint64_t t0 = hbmi_now_ns();
    /* the model's target: the temp bytes that may stay live, lowered by what the plan of the
     * last try missed (heap fragmentation, values the model does not see) */
    int64_t fixed = (int64_t)don_peak - mo->max_live;
    int64_t tm = (int64_t)target - fixed;
    best_set b = {hbmi_calloc(mo->n_cand + 1, 1), don_peak, 0, 0}; /* nothing but the donations */
    if (!b.set) return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    hbm_status s = HBM_OK;
    int infeasible = 0;
    for (int round = 0; round < 6 && !s; round++) {
        int proven = 0;
        double left = timeout - (double)(hbmi_now_ns() - t0) / 1e9;
        if (left < 0.05) left = 0.05;
        if (!hbmi_fit_search(mo, tm, left / 3, &proven)) {
            infeasible = 1;
            break;
        }
        uint64_t peak = 0;
        s = try_set(r, mo, ed, &b, proven, &peak);
        if (s || peak <= target) break;
        tm -= (int64_t)(peak - target) + (int64_t)(peak - target) / 4 + 1;
    }
    if (!s && infeasible && !b.fits) {
        /* nothing in the model reaches it: the lowest model target a set reaches (bisection),
         * verified, says how far the best combination gets */
        int64_t hi = 0, lo = tm;
        for (uint32_t t = 0; t < mo->n; t++)
            if (mo->live[t] > hi) hi = mo->live[t];
        double left = timeout - (double)(hbmi_now_ns() - t0) / 1e9;
        for (int it = 0; it < 12 && hi - lo > (hi >> 10) && left > 0.05; it++) {
            int64_t mid = lo + (hi - lo) / 2;
            int proven;
            if (hbmi_fit_search(mo, mid, left / 16, &proven)) hi = mid;
            else lo = mid;
            left = timeout - (double)(hbmi_now_ns() - t0) / 1e9;
        }
        int proven;
        if (hbmi_fit_search(mo, hi, left > 0.05 ? left / 4 : 0.05, &proven)) {
            uint64_t peak;
            s = try_set(r, mo, ed, &b, 0, &peak);
        }
    }
    for (uint32_t k = 0; k < mo->n_cand; k++) mo->cand[k].chosen = b.set[k];
    hbmi_free(b.set);
    if (s) return s;
    set->found = 1;
    set->fits = b.fits;
    set->proven_optimal = b.proven;
    set->peak_bytes = b.peak;
    set_totals(mo, 0, set);
    set->seconds = (double)(hbmi_now_ns() - t0) / 1e9;
    return HBM_OK;
}

static hbm_status run_xla(hbm_fit_result *r, hbmi_fit_model *mo, hbmi_fit_edit *ed) {
    hbm_fit_set *set = &r->sum.xla;
    uint64_t t0 = hbmi_now_ns();
    hbmi_fit_xla_rule rule = {1, 0, 0, &r->xla_before, &r->xla_after, 0};
    int64_t limit;
    if (r->popt.backend == HBM_BACKEND_TPU) {
        /* XLA:TPU's post-optimization rematerialization, as libtpu logs it: limit = 95 % of
         * the HBM - (arguments - aliased outputs) - overlays (the program's, not in the
         * module: 0 here); Run takes the output size off; its tracker counts the temps (not
         * the entry parameters: measured, docs/fit.md); xla_tpu_rematerialization_min_size_in_bytes
         * is 10 MiB (libtpu's tpu_comp_env dump) */
        int64_t given = (int64_t)r->sum.target_bytes * 95 / 100 -
                        ((int64_t)r->sum.argument_bytes - (int64_t)r->sum.alias_bytes);
        limit = given - (int64_t)mo->outputs_all;
        rule.count_args = 0;
        rule.min_remat_bytes = 10u << 20;
        rule.shown_outputs = (int64_t)mo->outputs_all;
        rule.lists = 1; /* the walk as XLA writes it: clones placed and cloned again (docs/fit.md) */
    } else {
        /* GetSchedulerMemoryLimit: (device memory - parameters - outputs + aliased) x 95 %,
         * then HloRematerialization::Run takes the module's output size off */
        int64_t io = (int64_t)(r->sum.argument_bytes + r->sum.output_bytes) - (int64_t)r->sum.alias_bytes;
        limit = ((int64_t)r->sum.target_bytes - io) * 95 / 100 - (int64_t)mo->outputs_all;
    }
    if (limit < 0) limit = 0;
    r->xla_limit = limit;
    hbmi_fit_xla(mo, limit, &rule, set->xla_message, sizeof set->xla_message);
    uint64_t peak = 0;
    hbm_status s = xla_verify(r, mo, ed, &peak, NULL, NULL, NULL, NULL);
    if (s) return s;
    set->found = 1;
    set->peak_bytes = peak;
    set->fits = peak <= r->sum.target_bytes;
    set_totals(mo, 1, set);
    set->seconds = (double)(hbmi_now_ns() - t0) / 1e9;
    return HBM_OK;
}

static hbm_status add_cand_change(hbm_fit_result *r, hbmi_fit_cand *c, hbmi_fit_edit *ed, int plan_it) {
    hbm_fit_change ch;
    memset(&ch, 0, sizeof ch);
    ch.kind = (hbm_fit_kind)c->edit.kind;
    describe(r, &ch, c->edit.comp, c->edit.ins);
    if (c->edit.kind == HBM_FIT_OFFLOAD && c->edit.from == UINT32_MAX) ch.param_number = (int)c->edit.param;
    ch.bytes = c->bytes;
    uint64_t pen = 0;
    for (uint32_t j = 0; j < c->n_pen; j++) pen += c->pen[j].bytes;
    ch.model_bytes = c->bytes > pen ? c->bytes - pen : 0;
    ch.recompute_flops = c->flops;
    ch.bytes_read = c->bytes_read;
    ch.cost_s = c->cost_s;
    ch.chosen = c->chosen ? 1 : 0;
    ch.xla_chosen = c->xla_chosen;
    ch.jax = jax_hint(r, c);
    ch.verified_peak = -1;
    if (plan_it) {
        uint64_t peak;
        ed[0] = c->edit;
        hbm_status s = verify(r, ed, 1, &peak, NULL, NULL, NULL, NULL);
        if (s) return s;
        ch.verified_peak = (int64_t)peak;
    }
    return add_change(r, &ch, &c->edit);
}

static int cmp_bytes_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x > y ? -1 : x < y; /* (bytes << 24 | index): larger first */
}

/* The changes listed: the chosen (hbm's or XLA's), each planned alone while time is left,
 * then every other candidate, largest first (not planned: verified_peak -1). */
static hbm_status list_changes(hbm_fit_result *r, hbmi_fit_model *mo, hbmi_fit_edit *ed, double budget_s) {
    uint64_t t0 = hbmi_now_ns();
    uint32_t listed = 0;
    for (uint32_t k = 0; k < mo->n_cand; k++) {
        hbmi_fit_cand *c = &mo->cand[k];
        if (!c->chosen && !c->xla_chosen) continue;
        int plan_it = listed < 16 && (double)(hbmi_now_ns() - t0) / 1e9 < budget_s;
        hbm_status s = add_cand_change(r, c, ed, plan_it);
        if (s) return s;
        listed++;
    }
    uint64_t *key = hbmi_malloc(sizeof *key * (mo->n_cand + 1));
    if (!key) return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    uint32_t n = 0;
    for (uint32_t k = 0; k < mo->n_cand; k++)
        if (!mo->cand[k].chosen && !mo->cand[k].xla_chosen) {
            uint64_t b = mo->cand[k].bytes >> 10; /* KiB: room for the index below */
            key[n++] = (b > 0xFFFFFFFFFFull ? 0xFFFFFFFFFFull : b) << 24 | (uint64_t)(k & 0xFFFFFF);
        }
    hbmi_qsort(key, n, sizeof *key, cmp_bytes_desc);
    hbm_status s = HBM_OK;
    for (uint32_t j = 0; j < n && !s; j++) s = add_cand_change(r, &mo->cand[key[j] & 0xFFFFFF], ed, 0);
    hbmi_free(key);
    return s;
}

static void settings(hbm_fit_result *r, const hbm_fit_options *o) {
    uint64_t need = r->sum.peak_before;
    if (!o->capacity || !(o->fraction > 0 && o->fraction < 1)) return;
    if (!hbmi_backend_reads_fraction(r->popt.backend)) return;
    uint64_t limit = hbm_xla_gpu_limit(o->capacity, o->fraction);
    if (need <= limit || need > o->capacity) return;
    /* checked under XLA's rule: a fraction whose limit holds the need, or none and by how much */
    hbmi_fraction_setting(r->setting, sizeof r->setting, need, o->capacity);
    hbm_fit_change c;
    memset(&c, 0, sizeof c);
    c.kind = HBM_FIT_SETTING;
    c.instruction = c.shape = c.op_name = c.source_file = "";
    c.param_number = -1;
    c.jax = r->setting;
    c.verified_peak = (int64_t)need;
    c.chosen = 1;
    hbmi_fit_edit e = {.kind = HBM_FIT_SETTING};
    add_change(r, &c, &e);
}

/* The largest buffers at the final plan's peak that no change touched. */
static void untouchable(hbm_fit_result *r, const hbm_plan *p2) {
    hbm_plan_buffer b[64];
    size_t n = hbm_plan_peak_buffers(p2, b, 64);
    r->n_left = 0;
    for (size_t i = 0; i < n && r->n_left < 5; i++) {
        int touched = 0;
        for (size_t k = 0; k < r->n_ch && !touched; k++)
            touched = r->ch[k].instruction && !strcmp(r->ch[k].instruction, b[i].instruction) &&
                      r->ch[k].kind != HBM_FIT_SETTING;
        if (touched) continue;
        hbm_plan_buffer *d = &r->left[r->n_left++];
        *d = b[i];
        d->label = hbmi_fit_str(r, b[i].label, strlen(b[i].label));
        d->shape = hbmi_fit_str(r, b[i].shape, strlen(b[i].shape));
        d->instruction = hbmi_fit_str(r, b[i].instruction, strlen(b[i].instruction));
        d->op_name = hbmi_fit_str(r, b[i].op_name, strlen(b[i].op_name));
        d->source_file = hbmi_fit_str(r, b[i].source_file, strlen(b[i].source_file));
    }
}

hbm_status hbm_fit_run(hbm_hlo_module *m, const hbm_fit_options *opt, hbm_fit_result **out) {
    if (!m || !out) return hbmi_error(HBM_ERR_INVALID, "fit: no module");
    *out = NULL;
    /* a module read from XLA's protobuf: its HLO text, written from the proto, before the plan
     * (which then reads its names from that text) */
    hbm_status ts = hbmi_proto_text(m);
    if (ts) return ts;
    hbm_fit_options o;
    if (opt) o = *opt;
    else hbm_fit_options_default(&o);
    if (o.timeout_s <= 0) o.timeout_s = 2.0;
    uint64_t t0 = hbmi_now_ns();
    hbm_fit_result *r = hbmi_calloc(1, sizeof *r);
    if (!r) return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    r->m = m;
    hbm_plan *p = NULL;
    hbmi_fit_edit *ed = NULL;
    hbmi_fit_model mo;
    memset(&mo, 0, sizeof mo);
    hbm_status s = hbm_plan_run(m, &o.plan, &p);
    if (s) goto fail;
    hbm_plan_stats st;
    hbm_plan_get_stats(p, &st);
    r->popt = o.plan;
    r->popt.backend = st.backend; /* the changed modules get the same rules */
    o.fraction = hbm_plan_fraction(p, o.fraction); /* --capacity alone: the backend's own default */
    uint64_t xla_alignment = hbmi_plan_xla_alignment(p); /* XLA's, from its assignment */
    if (xla_alignment) r->popt.alignment = xla_alignment;
    r->sum.module = hbm_hlo_module_name(m);
    r->sum.peak_before = st.peak_bytes;
    r->sum.argument_bytes = st.argument_size_in_bytes;
    r->sum.output_bytes = st.output_size_in_bytes;
    r->sum.alias_bytes = st.alias_size_in_bytes;
    r->sum.temp_bytes = st.temp_size_in_bytes;
    r->sum.setting = "";
    r->sum.chosen = o.remat;
    /* a capacity of one byte is a target of one byte (or none under a fraction): not "no target" */
    uint64_t target = o.target_bytes ? o.target_bytes
                      : o.capacity   ? hbm_xla_gpu_limit(o.capacity, o.fraction)
                                     : st.peak_bytes;
    r->sum.target_bytes = target;
    settings(r, &o);
    r->sum.setting = r->setting;
    r->sum.hbm.peak_bytes = r->sum.xla.peak_bytes = st.peak_bytes;
    r->has_backward = hbmi_jax_has_backward(m);
    if (st.peak_bytes > target && (s = hbmi_jax_residuals(r, p))) goto fail;
    if (st.peak_bytes <= target) { /* nothing to do */
        r->sum.fits = 1;
        r->sum.hbm.found = r->sum.hbm.fits = r->sum.xla.found = r->sum.xla.fits = 1;
        r->sum.hbm.proven_optimal = 1;
        hbm_plan_free(p);
        *out = r;
        return HBM_OK;
    }
    if (!m->is_scheduled) {
        s = hbmi_error(HBM_ERR_UNSUPPORTED,
                       "fit: the module is not scheduled (no is_scheduled=true): XLA's order is unknown");
        goto fail;
    }
    if (!has_text(m)) {
        s = hbmi_error(HBM_ERR_UNSUPPORTED, "fit: the module has no HLO text to write its changes into");
        goto fail;
    }
    for (size_t k = 0; k < r->n_res; k++) { /* each scan residual in host memory, planned */
        hbmi_fit_edit he[64];
        size_t nh = hbmi_jax_residual_edits(m, &r->res[k], he, 64);
        uint64_t hp = 0;
        if (nh && !verify(r, he, nh, &hp, NULL, NULL, NULL, NULL)) r->res[k].host_peak = hp;
        if (!r->res[k].carry && (s = recompute(r, &r->res[k]))) goto fail;
    }
    const hbmi_fit_rates *rates = hbmi_fit_rates_for(o.device, st.backend);
    r->rates = rates;
    /* donations first: free, verified one by one */
    if (!o.no_donate && (s = donations(r, p))) goto fail;
    uint64_t don_peak = st.peak_bytes;
    r->temp_after_don = st.temp_size_in_bytes;
    {
        hbmi_fit_edit dd[64];
        size_t nd = 0;
        for (size_t k = 0; k < r->n_ch && nd < 64; k++)
            if (r->ch[k].kind == HBM_FIT_DONATE && r->ch[k].verified_peak >= 0 &&
                (uint64_t)r->ch[k].verified_peak < st.peak_bytes) {
                r->ch[k].chosen = 1;
                dd[nd++] = r->ed[k];
            }
        if (nd) {
            hbm_plan *pd;
            hbm_hlo_module *md;
            s = verify(r, dd, nd, &don_peak, NULL, NULL, &pd, &md);
            if (s) goto fail;
            hbm_plan_stats sd;
            hbm_plan_get_stats(pd, &sd);
            r->temp_after_don = sd.temp_size_in_bytes;
            hbm_plan_free(pd);
            hbm_hlo_module_free(md);
        }
    }
    {
        const hbmi_comp *ec = &m->comps[m->entry];
        uint8_t *donated = hbmi_calloc(ec->n_params + 1, 1);
        if (!donated) {
            s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
            goto fail;
        }
        for (size_t k = 0; k < r->n_ch; k++)
            if (r->ch[k].kind == HBM_FIT_DONATE && r->ch[k].chosen && r->ed[k].param >= 0 &&
                (uint64_t)r->ed[k].param < ec->n_params)
                donated[r->ed[k].param] = 1;
        s = hbmi_fit_model_build(p, rates, !o.no_remat, !o.no_offload, donated, &mo);
        hbmi_free(donated);
    }
    if (s) goto fail;
    ed = hbmi_malloc(sizeof *ed * ((size_t)mo.n_cand + r->n_ch + 2));
    if (!ed) {
        s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
        goto fail;
    }
    r->n_candidates = mo.n_cand;
    if (don_peak <= target) {
        r->sum.hbm.found = r->sum.hbm.fits = 1;
        r->sum.hbm.peak_bytes = don_peak;
        r->sum.hbm.proven_optimal = 1;
    } else {
        s = run_hbm(r, &mo, o.timeout_s, don_peak, ed);
        if (s) goto fail;
    }
    s = run_xla(r, &mo, ed); /* XLA's pass recomputes only: it takes no offload candidate */
    if (s) goto fail;
    if (o.remat != HBM_FIT_REMAT_XLA && r->sum.xla.fits &&
        (!r->sum.hbm.fits || r->sum.xla.recompute_flops < r->sum.hbm.recompute_flops)) {
        /* a portfolio: XLA's set, with hbm's donations, when it is the better verified one */
        uint8_t *keep = hbmi_malloc(mo.n_cand + 1);
        if (!keep) {
            s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
            goto fail;
        }
        for (uint32_t k = 0; k < mo.n_cand; k++) {
            keep[k] = mo.cand[k].chosen;
            mo.cand[k].chosen = mo.cand[k].xla_chosen;
        }
        uint64_t peak = 0;
        size_t n = gather(r, &mo, 0, ed, 1);
        s = verify(r, ed, n, &peak, NULL, NULL, NULL, NULL);
        if (s) {
            hbmi_free(keep);
            goto fail;
        }
        if (peak <= target) {
            hbm_fit_set *h = &r->sum.hbm;
            h->found = h->fits = 1;
            h->proven_optimal = 0;
            h->from_baseline = 1;
            h->peak_bytes = peak;
            set_totals(&mo, 0, h);
        } else {
            for (uint32_t k = 0; k < mo.n_cand; k++) mo.cand[k].chosen = keep[k];
        }
        hbmi_free(keep);
    }
    double left = o.timeout_s - (double)(hbmi_now_ns() - t0) / 1e9;
    s = list_changes(r, &mo, ed, left > 0.2 ? left : 0.2);
    if (s) goto fail;
    /* the chosen module, planned once more to keep its text and what is left at its peak */
    {
        int xla = o.remat == HBM_FIT_REMAT_XLA;
        size_t n = 0;
        if (o.remat != HBM_FIT_REMAT_NONE) n = gather(r, &mo, xla, ed, !xla);
        else
            for (size_t k = 0; k < r->n_ch; k++)
                if (r->ch[k].kind == HBM_FIT_DONATE && r->ch[k].chosen) ed[n++] = r->ed[k];
        uint64_t peak;
        hbm_plan *p2;
        hbm_hlo_module *m2;
        if (xla && mo.n_xc) s = xla_verify(r, &mo, ed, &peak, &r->text, &r->text_len, &p2, &m2);
        else s = verify(r, ed, n, &peak, &r->text, &r->text_len, &p2, &m2);
        if (s) goto fail;
        untouchable(r, p2);
        hbm_plan_free(p2);
        hbm_hlo_module_free(m2);
        r->sum.fits = peak <= target;
        r->final_peak = peak;
        /* the set misses: each scan residual in host memory with the set besides, planned (the
         * JAX-side policy and XLA-side changes together); a combination the writer refuses is
         * left unplanned */
        for (size_t k = 0; n && !r->sum.fits && k < r->n_res; k++) {
            hbmi_jax_residual *x = &r->res[k];
            if (!x->host_peak || x->host_peak >= r->sum.peak_before) continue;
            hbmi_fit_edit *both = hbmi_malloc(sizeof *both * (n + 64));
            if (!both) {
                s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
                goto fail;
            }
            memcpy(both, ed, sizeof *both * n);
            size_t nh = hbmi_jax_residual_edits(m, x, both + n, 64);
            uint64_t wp = 0;
            if (nh && !verify(r, both, n + nh, &wp, NULL, NULL, NULL, NULL)) {
                x->with_set_peak = wp;
                x->with_set_changes = (uint32_t)n;
            }
            hbmi_free(both);
        }
    }
    /* the route through a residual: in host memory alone (a JAX-side change only) when that
     * fits, else the lowest planned peak, with the set besides or not */
    uint64_t alone = 0, with = 0;
    size_t ka = 0, kw = 0;
    for (size_t k = 0; !r->sum.fits && k < r->n_res; k++) {
        const hbmi_jax_residual *x = &r->res[k];
        if (x->host_peak && (!alone || x->host_peak < alone)) alone = x->host_peak, ka = k;
        if (x->with_set_peak && (!with || x->with_set_peak < with)) with = x->with_set_peak, kw = k;
    }
    r->sum.residual_alone = alone && (alone <= target || !with || alone <= with);
    r->sum.residual_peak = r->sum.residual_alone ? alone : with;
    r->best_res = r->sum.residual_alone ? ka : kw;
    r->sum.residual_fits = r->sum.residual_peak && r->sum.residual_peak <= target;
    /* the route through recomputing a residual: the lowest planned; when it reaches the
     * target, its module is the one --emit writes (written again: the text planned) */
    for (size_t k = 0; !r->sum.fits && k < r->n_res; k++) {
        const hbmi_jax_residual *x = &r->res[k];
        if (!x->carry && x->recompute_peak && (!r->sum.recompute_peak || x->recompute_peak < r->sum.recompute_peak))
            r->sum.recompute_peak = x->recompute_peak, r->recompute_res = k;
    }
    r->sum.recompute_fits = r->sum.recompute_peak && r->sum.recompute_peak <= target;
    if (r->sum.recompute_fits) {
        char *text = NULL, why[200];
        size_t len = 0;
        s = hbmi_jax_recompute_write(m, &r->res[r->recompute_res], r->res, r->n_res, &text, &len, NULL, why, sizeof why);
        if (s == HBM_ERR_NOMEM) goto fail;
        if (s) { /* it was written once: the same module cannot be refused now */
            s = hbmi_error(HBM_ERR_CORRUPT, "fit: the recompute module is refused on writing it again: %s", why);
            goto fail;
        }
        free(r->text);
        r->text = text;
        r->text_len = len;
    }
    r->sum.n_changes = r->n_ch;
    r->seconds = (double)(hbmi_now_ns() - t0) / 1e9;
    hbmi_free(ed);
    hbmi_fit_model_free(&mo);
    hbm_plan_free(p);
    *out = r;
    return HBM_OK;
fail:
    hbmi_free(ed);
    hbmi_fit_model_free(&mo);
    hbm_plan_free(p);
    hbm_fit_free(r);
    return s;
}

/* A module JAX compiled: some op_name in its name stack begins with jit( or pjit(. */
static int from_jax(const hbm_hlo_module *m) {
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c].n; i++) {
            const hbmi_str *o = &m->comps[c].ins[i].meta_op_name;
            if ((o->n > 4 && !memcmp(o->p, "jit(", 4)) || (o->n > 5 && !memcmp(o->p, "pjit(", 5))) return 1;
        }
    return 0;
}

hbm_status hbmi_fit_terms_run(const hbm_plan *p, hbm_fit_result **out) {
    *out = NULL;
    const hbm_hlo_module *m = hbmi_plan_module(p);
    if (!m || !from_jax(m)) return HBM_OK;
    hbm_fit_result *r = hbmi_calloc(1, sizeof *r);
    if (!r) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for fit's terms");
    r->m = (hbm_hlo_module *)m; /* read only: the residuals are found, nothing is changed */
    r->has_backward = hbmi_jax_has_backward(m);
    hbm_status s = r->has_backward ? hbmi_jax_residuals(r, p) : HBM_OK;
    if (s) {
        hbm_fit_free(r);
        return s;
    }
    *out = r;
    return HBM_OK;
}

void hbm_fit_free(hbm_fit_result *r) {
    if (!r) return;
    hbmi_free(r->ch);
    hbmi_free(r->ed);
    hbmi_free(r->res);
    free(r->text);
    hbmi_arena_free(&r->strings);
    hbmi_free(r);
}

hbm_status hbm_fit_get_summary(const hbm_fit_result *r, hbm_fit_summary *out) {
    if (!r || !out) return hbmi_error(HBM_ERR_INVALID, "fit: no result");
    *out = r->sum;
    return HBM_OK;
}

const hbm_fit_change *hbm_fit_change_at(const hbm_fit_result *r, size_t i) {
    return r && i < r->n_ch ? &r->ch[i] : NULL;
}

hbm_status hbm_fit_emit(const hbm_fit_result *r, FILE *f) {
    if (!r || !f) return hbmi_error(HBM_ERR_INVALID, "fit: no result");
    if (!r->text) return hbmi_fit_write(r->m, NULL, 0, f);
    if (fwrite(r->text, 1, r->text_len, f) != r->text_len) return hbmi_error(HBM_ERR_IO, "fit: cannot write");
    return HBM_OK;
}
