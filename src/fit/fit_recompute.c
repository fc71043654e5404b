/* fit_recompute.c - a scan residual recomputed in the backward loop, as an edited module.
 *
 * For a residual computed in the forward body (not the carry), the module is written with
 * (a) its element dropped from both loops (the loops' and their operand tuples' shapes and
 * operands, their bodies' and conditions' parameters and signatures, the bodies' roots; the
 * get-tuple-elements of later elements renumbered) and the forward body's update in place
 * deleted, with its fusion's computation; (b) the backward body computing the slice again
 * before its reader: the forward body's instructions from the layer's input and weights,
 * cloned (a cloned fusion calls its own copy of its computation), with the layer's input read
 * from the carry's own residual, the loop-invariant weights from the backward loop's tuple (or
 * the backward body's own slice of them) and the layer index L-1-i (JAX's scan transposes to
 * a reverse scan: jax/_src/lax/control_flow/loops.py, _scan_transpose runs scan_p with
 * reverse=not reverse). The reader gets the recomputed slice as a [1, ...] array: its
 * dynamic-slice of one layer at any index clamps to index 0 (XLA's DynamicSlice semantics),
 * so it reads the recomputed value. The text is edited in place: a list of replacements of
 * spans of the module's text, written in order. */
#include <stdlib.h>
#include <string.h>

#include "fit/fit_result.h"

typedef struct patch {
    size_t a, b; /* replace text [a, b) */
    char *s;
    size_t seq;
} patch;

typedef struct rc {
    const hbm_hlo_module *m;
    patch *p;
    size_t n, cap;
    char *why;
    size_t why_cap;
    char note[256]; /* how the clones read an input when that is not the value itself */
    char *comps, *comps_kept; /* copies of fused computations the clones call */
    size_t n_comps, n_kept;
    uint64_t flops; /* of the clones, once */
} rc;

static hbm_status oom(void) { return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory"); }

/* a module this writer cannot edit: why, for the caller's reasons, and the status */
static hbm_status fail(rc *r, const char *msg) {
    if (r->why && r->why_cap) snprintf(r->why, r->why_cap, "%s", msg);
    return hbmi_error(HBM_ERR_UNSUPPORTED, "fit: the residual is not recomputed: %s", msg);
}

static hbm_status add(rc *r, size_t a, size_t b, const char *s) {
    if (hbmi_grow((void **)&r->p, &r->cap, r->n + 1, sizeof *r->p)) return oom();
    size_t k = strlen(s);
    char *c = hbmi_malloc(k + 1);
    if (!c) return oom();
    memcpy(c, s, k + 1);
    r->p[r->n] = (patch){a, b, c, r->n};
    r->n++;
    return HBM_OK;
}

static int nchar(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-' || c == '$';
}

/* the shape text of an instruction: [*a, *b) */
static int shape_span(const hbm_hlo_module *m, const hbmi_instr *in, const char **a, const char **b) {
    if (in->synthetic) return 0;
    const char *p = m->text + in->off;
    while (*p && *p != '=') p++;
    if (!*p) return 0;
    p++;
    while (*p == ' ') p++;
    const char *q = in->opcode.p;
    while (q > p && q[-1] == ' ') q--;
    *a = p, *b = q;
    return q > p;
}

/* in the shape text [a, b) (element idx of a tuple, -1: the array), the first dimension: the
 * span of its digits, replaced by "1"; a shape with no first dimension is left as it is */
static hbm_status shrink(rc *r, const char *a, const char *b, int64_t idx) {
    if (idx >= 0) {
        if (a >= b || *a != '(') return HBM_OK;
        if (!hbmi_fit_list_item(a + 1, b, idx, &a, &b)) return HBM_OK;
    }
    const char *l = memchr(a, '[', (size_t)(b - a));
    if (!l) return HBM_OK;
    const char *d = l + 1, *e = d;
    while (e < b && *e >= '0' && *e <= '9') e++;
    if (e == d) return HBM_OK;
    return add(r, (size_t)(d - r->m->text), (size_t)(e - r->m->text), "1");
}

static hbm_status shrink_ins(rc *r, const hbmi_instr *in, int64_t idx) {
    const char *a, *b;
    return shape_span(r->m, in, &a, &b) ? shrink(r, a, b, idx) : HBM_OK;
}

/* the parameter list of computation c's signature: [*q, *close), inside its parentheses */
static int sig_params(const hbm_hlo_module *m, const hbmi_comp *c, const char **q0, const char **close0) {
    const char *s = m->text + c->off, *end = m->text + c->ins[0].off;
    while (s < end && *s != '(') s++;
    if (s >= end) return 0;
    const char *q = s + 1;
    int depth = 0;
    const char *close = NULL;
    for (const char *x = q; x < end; x++) {
        if (*x == '(' || *x == '{' || *x == '[') depth++;
        else if (*x == ')' || *x == '}' || *x == ']') {
            if (!depth) {
                close = x;
                break;
            }
            depth--;
        }
    }
    if (!close) return 0;
    *q0 = q, *close0 = close;
    return 1;
}

/* the signature of computation c: parameter p's shape (p >= 0) or the result's (p < 0) */
static int sig_span(const hbm_hlo_module *m, const hbmi_comp *c, int64_t p, const char **a, const char **b) {
    const char *q, *close, *end = m->text + c->ins[0].off;
    if (!sig_params(m, c, &q, &close)) return 0;
    if (p >= 0) {
        const char *ia, *ib;
        if (!hbmi_fit_list_item(q, close, p, &ia, &ib)) return 0;
        const char *col = memchr(ia, ':', (size_t)(ib - ia));
        if (!col) return 0;
        *a = hbmi_fit_blank(col + 1, ib);
        *b = ib;
        return 1;
    }
    const char *ar = close + 1;
    while (ar < end && (*ar == ' ' || *ar == '-' || *ar == '>')) ar++;
    const char *br = end;
    while (br > ar && br[-1] != '{') br--;
    if (br > ar) br--;
    while (br > ar && br[-1] == ' ') br--;
    *a = ar, *b = br;
    return br > ar;
}

static hbm_status shrink_sig(rc *r, const hbmi_comp *c, int64_t p, int64_t idx) {
    const char *a, *b;
    return sig_span(r->m, c, p, &a, &b) ? shrink(r, a, b, idx) : HBM_OK;
}

/* the start of instruction in's line */
static size_t line_start(const hbm_hlo_module *m, const hbmi_instr *in) {
    size_t o = in->off;
    while (o > 0 && m->text[o - 1] != '\n') o--;
    return o;
}

/* operand j's name token in instruction in's operand list: [*a, *b) */
static int operand_name(const hbm_hlo_module *m, const hbmi_instr *in, uint32_t j, const char **a, const char **b) {
    const char *p = in->opcode.p + in->opcode.n, *e = m->text + m->len;
    if (p >= e || *p != '(') return 0;
    const char *ia, *ib;
    if (!hbmi_fit_list_item(p + 1, e, j, &ia, &ib)) return 0;
    const char *t = ia;
    if (t < ib && *t == '%') t++;
    const char *q = t;
    while (q < ib && nchar((unsigned char)*q)) q++;
    *a = ia, *b = q;
    return q > t;
}

static const hbmi_instr *strip(const hbmi_comp *c, const hbmi_instr *x) {
    for (int k = 0; k < 16 && (x->op == HOP_BITCAST || x->op == HOP_COPY) && x->n_ops; k++) x = &c->ins[x->ops[0]];
    return x;
}

static const hbmi_comp *body_of(const hbm_hlo_module *m, const hbmi_instr *w, hbmi_called_role role) {
    for (uint32_t q = 0; q < w->n_called; q++)
        if (w->called_role ? w->called_role[q] == role : role == HBMI_CALLED_BODY) return &m->comps[w->called[q]];
    return NULL;
}

/* the tuple's item idx removed from the text [a, b) (a tuple shape or an operand list, a at
 * its opening parenthesis): with the comma before it, or after it for the first; a text not
 * as expected fails with why */
static hbm_status drop_item(rc *r, const char *a, const char *b, int64_t idx, const char *why) {
    if (a >= b || *a != '(') return fail(r, why);
    const char *ia, *ib;
    if (!hbmi_fit_list_item(a + 1, b, idx, &ia, &ib)) return fail(r, why);
    const char *from = ia, *to = ib;
    if (idx > 0) {
        while (from > a + 1 && from[-1] != ',') from--;
        if (from > a + 1) from--;
    } else {
        while (to < b && (*to == ',' || *to == ' ')) to++;
    }
    return add(r, (size_t)(from - r->m->text), (size_t)(to - r->m->text), "");
}

static hbm_status drop_shape_item(rc *r, const hbmi_instr *in, int64_t idx, const char *why) {
    const char *a, *b;
    return shape_span(r->m, in, &a, &b) ? drop_item(r, a, b, idx, why) : fail(r, why);
}

static hbm_status drop_sig_item(rc *r, const hbmi_comp *c, int64_t p, int64_t idx, const char *why) {
    const char *a, *b;
    return sig_span(r->m, c, p, &a, &b) ? drop_item(r, a, b, idx, why) : fail(r, why);
}

static hbm_status drop_operand(rc *r, const hbmi_instr *in, int64_t idx, const char *why) {
    const char *p = in->opcode.p + in->opcode.n, *e = r->m->text + r->m->len;
    const char *q = p;
    for (int depth = 0; q < e; q++) {
        if (*q == '(') depth++;
        else if (*q == ')' && --depth == 0) break;
    }
    return drop_item(r, p, q + 1, idx, why);
}

/* instruction i of c deleted: its line */
static hbm_status drop_line(rc *r, const hbmi_comp *c, uint32_t i) {
    size_t a = line_start(r->m, &c->ins[i]), b;
    if (i + 1 < c->n) {
        b = line_start(r->m, &c->ins[i + 1]);
    } else {
        b = c->ins[i].off;
        while (b < r->m->len && r->m->text[b] != '\n') b++;
        if (b < r->m->len) b++;
    }
    return b > a ? add(r, a, b, "") : HBM_OK;
}

/* computation f deleted: from its header's line to its closing brace's */
static hbm_status drop_comp(rc *r, const hbmi_comp *f) {
    size_t a = f->off;
    while (a < r->m->len && (r->m->text[a] == '\n' || r->m->text[a] == ' ')) a++;
    while (a > 0 && r->m->text[a - 1] != '\n') a--;
    size_t b = f->ins[f->n - 1].off;
    while (b < r->m->len && r->m->text[b] != '\n') b++; /* the last instruction's line */
    if (b < r->m->len) b++;
    while (b < r->m->len && r->m->text[b] != '\n') b++; /* the brace's */
    if (b < r->m->len) b++;
    if (b < r->m->len && r->m->text[b] == '\n') b++; /* the blank line after it */
    return add(r, a, b, "");
}

/* a get-tuple-element's index=N past the element dropped: N-1 */
static hbm_status renumber(rc *r, const hbmi_instr *g, int64_t k) {
    if (g->gte_index <= k || g->synthetic) return HBM_OK;
    const char *p = g->opcode.p, *e = r->m->text + r->m->len;
    static const char key[] = "index=";
    for (; p + sizeof key - 1 < e && *p != '\n'; p++)
        if (!memcmp(p, key, sizeof key - 1) && (p[-1] == ' ' || p[-1] == ',')) {
            const char *d = p + sizeof key - 1, *q = d;
            while (q < e && *q >= '0' && *q <= '9') q++;
            char t[24];
            snprintf(t, sizeof t, "%lld", (long long)(g->gte_index - 1));
            return add(r, (size_t)(d - r->m->text), (size_t)(q - r->m->text), t);
        }
    return HBM_OK;
}

/* the operand list of instruction in: [*a, *b), inside its parentheses */
static int ops_span(const hbm_hlo_module *m, const hbmi_instr *in, const char **a, const char **b) {
    const char *p = in->opcode.p + in->opcode.n, *e = m->text + m->len;
    if (p >= e || *p != '(') return 0;
    const char *q = p;
    for (int depth = 0; q < e; q++) {
        if (*q == '(') depth++;
        else if (*q == ')' && --depth == 0) break;
    }
    if (q >= e) return 0;
    *a = p + 1, *b = q;
    return 1;
}

/* The multi-output fusion fi of body b, whose element d stacked the residual, left with its
 * other elements. XLA's rematerialization clones a multi-output fusion whole and reads the
 * element it needs through a new get-tuple-element (gte.remat, RematerializeInstructions in
 * xla/hlo/transforms/simplifiers/hlo_rematerialization.cc); here the stacked buffer, its
 * operand, is dropped from the loop, so the fusion cannot stay whole: its computation keeps the
 * instructions those elements read, the parameters among them renumbered in order (signature,
 * parameter(N) and the fusion's operands), its root the one element left (an instruction of
 * its own: ROOT) or the tuple of those left; the fusion's shape follows, and its elements'
 * get-tuple-elements are renumbered, or with one element left read the fusion itself (a
 * bitcast of the same shape). The get-tuple-element of element d is already deleted. */
static hbm_status narrow_fusion(rc *r, const hbmi_comp *b, uint32_t fi, int64_t d) {
    const hbm_hlo_module *m = r->m;
    const hbmi_instr *F = &b->ins[fi];
    if (F->op != HOP_FUSION || !F->n_called) return fail(r, "the stacking fusion is not a fusion");
    const hbmi_comp *f = &m->comps[F->called[0]];
    const hbmi_instr *R = &f->ins[f->root];
    if (R->op != HOP_TUPLE || (uint64_t)d >= R->n_ops || R->n_ops < 2) return fail(r, "the stacking fusion's root is not a tuple");
    for (uint32_t u = 0; u < F->n_users; u++) {
        const hbmi_instr *g = &b->ins[F->users[u]];
        if (g->op != HOP_GTE || (g->synthetic && g->gte_index != d))
            return fail(r, "the stacking fusion's tuple is read other than by a get-tuple-element of its own line");
    }
    uint8_t *keep = hbmi_calloc(f->n + 1, 1);
    int64_t *num = keep ? hbmi_calloc(f->n_params + 1, sizeof *num) : NULL;
    char *t = NULL;
    size_t tn = 0;
    FILE *o = keep && num ? open_memstream(&t, &tn) : NULL;
    if (!o) {
        hbmi_free(keep);
        hbmi_free(num);
        return oom();
    }
    for (uint32_t j = 0; j < R->n_ops; j++)
        if (j != d) keep[R->ops[j]] = 1;
    for (uint32_t i = f->n; i-- > 0;) /* operands come before users */
        if (keep[i] && i != f->root)
            for (uint32_t k = 0; k < f->ins[i].n_ops; k++) keep[f->ins[i].ops[k]] = 1;
    hbm_status s = HBM_OK;
    int64_t np = 0;
    for (uint32_t p = 0; p < f->n_params; p++) num[p] = keep[f->params[p]] ? np++ : -1;
    const char *sq, *sc, *oa, *ob, *ra, *rb, *fa, *fb2;
    if (!sig_params(m, f, &sq, &sc) || !ops_span(m, F, &oa, &ob) || !sig_span(m, f, -1, &ra, &rb) ||
        !shape_span(m, F, &fa, &fb2) || *fa != '(' || *ra != '(')
        s = fail(r, "the stacking fusion's text is not as expected");
    /* the signature's parameters and the fusion's operands, those kept */
    for (int pass = 0; !s && pass < 2; pass++) {
        const char *la = pass ? oa : sq, *lb = pass ? ob : sc;
        np = 0;
        for (uint32_t p = 0; !s && p < f->n_params; p++) {
            const char *ia, *ib;
            if (num[p] < 0) continue;
            if (!hbmi_fit_list_item(la, lb, p, &ia, &ib)) {
                s = fail(r, "the stacking fusion's parameters are not as expected");
                break;
            }
            fprintf(o, "%s%.*s", np++ ? ", " : "", (int)(ib - ia), ia);
        }
        fputc(0, o);
    }
    /* the result: the elements left (the signature's, the fusion's, the root tuple's shape) */
    uint32_t left = UINT32_MAX;
    const char *ta = NULL, *tb = NULL, *ua = NULL, *ub = NULL;
    if (!s && R->n_ops > 2 && (!shape_span(m, R, &ta, &tb) || !ops_span(m, R, &ua, &ub) || *ta != '('))
        s = fail(r, "the stacking fusion's root is not as expected");
    for (int pass = 0; !s && pass < (R->n_ops > 2 ? 3 : 2); pass++) {
        const char *la = (pass == 2 ? ta : pass ? fa : ra) + 1, *lb = pass == 2 ? tb : pass ? fb2 : rb;
        while (lb > la && lb[-1] != ')') lb--;
        if (lb > la) lb--;
        if (R->n_ops > 2) fputc('(', o);
        for (uint32_t j = 0, w = 0; !s && j < R->n_ops; j++) {
            const char *ia, *ib;
            if (j == d) continue;
            if (!hbmi_fit_list_item(la, lb, j, &ia, &ib)) {
                s = fail(r, "the stacking fusion's shape is not as expected");
                break;
            }
            fprintf(o, "%s%.*s", w++ ? ", " : "", (int)(ib - ia), ia);
            left = j;
        }
        if (R->n_ops > 2) fputc(')', o);
        fputc(0, o);
    }
    if (fclose(o) && !s) s = oom();
    if (!s) {
        const char *sig = t, *ops = sig + strlen(sig) + 1, *res = ops + strlen(ops) + 1, *fsh = res + strlen(res) + 1,
                   *rsh = fsh + strlen(fsh) + 1;
        if ((s = add(r, (size_t)(sq - m->text), (size_t)(sc - m->text), sig)) ||
            (s = add(r, (size_t)(oa - m->text), (size_t)(ob - m->text), ops)) ||
            (s = add(r, (size_t)(ra - m->text), (size_t)(rb - m->text), res)) ||
            (s = add(r, (size_t)(fa - m->text), (size_t)(fb2 - m->text), fsh)))
            goto out;
        for (uint32_t i = 0; i < f->n; i++) {
            const hbmi_instr *in = &f->ins[i];
            if (i == f->root) continue;
            if (!keep[i]) {
                if ((s = drop_line(r, f, i))) goto out;
            } else if (in->op == HOP_PARAMETER && num[in->param_no] != in->param_no) {
                const char *d0 = in->opcode.p + in->opcode.n + 1, *d1 = d0;
                while (*d1 >= '0' && *d1 <= '9') d1++;
                char nb[24];
                snprintf(nb, sizeof nb, "%lld", (long long)num[in->param_no]);
                if ((s = add(r, (size_t)(d0 - m->text), (size_t)(d1 - m->text), nb))) goto out;
            }
        }
        if (R->n_ops > 2) { /* the tuple of those left */
            if (!(s = add(r, (size_t)(ta - m->text), (size_t)(tb - m->text), rsh)))
                s = drop_item(r, ua - 1, ub + 1, d, "the stacking fusion's root is not as expected");
        } else { /* the one left is the root */
            const hbmi_instr *k = &f->ins[R->ops[left]];
            if (k->is_root || k->op == HOP_PARAMETER) {
                s = fail(r, "the stacking fusion passes a parameter through");
            } else {
                if (!(s = drop_line(r, f, f->root))) s = add(r, k->off, k->off, "ROOT ");
            }
        }
        for (uint32_t u = 0; !s && u < F->n_users; u++) {
            const hbmi_instr *g = &b->ins[F->users[u]];
            if (g->gte_index == d) continue;
            if (R->n_ops > 2) {
                s = renumber(r, g, d);
                continue;
            }
            static const char key[] = "index=";
            const char *p = g->opcode.p, *e = m->text + m->len;
            for (; p + sizeof key - 1 < e && *p != '\n'; p++)
                if (!memcmp(p, key, sizeof key - 1)) break;
            if (p + sizeof key - 1 >= e || *p == '\n') {
                s = fail(r, "a get-tuple-element's text is not as expected");
                break;
            }
            p += sizeof key - 1;
            while (*p >= '0' && *p <= '9') p++;
            char nb[200];
            snprintf(nb, sizeof nb, "bitcast(%%%.*s)", (int)F->name.n, F->name.p);
            s = add(r, (size_t)(g->opcode.p - m->text), (size_t)(p - m->text), nb);
        }
    }
out:
    free(t);
    hbmi_free(keep);
    hbmi_free(num);
    return s;
}

/* element k of loop w (computation c) dropped: from the loop's shape and its operand tuple, its
 * body's and condition's parameter and signature, the body's root; the get-tuple-elements of
 * later elements renumbered. fwd: the forward loop, whose update in place (and the fusion
 * that does it) goes, with the buffer it started from when nothing else reads that. Every
 * reader of the element must be gone: the update in place (fwd), the tuple's pass-through. */
static hbm_status drop_loop(rc *r, const hbmi_comp *c, uint32_t wi, int64_t k, int fwd, int64_t iv) {
    const hbm_hlo_module *m = r->m;
    const hbmi_instr *w = &c->ins[wi];
    if (iv > k) return fail(r, "the loop's index comes after the element in its tuple");
    TRY(drop_shape_item(r, w, k, "the loop's shape text is not as expected"));
    const hbmi_instr *t = w->n_ops ? &c->ins[w->ops[0]] : NULL;
    if (!t || t->op != HOP_TUPLE) return fail(r, "the loop's operand is not a tuple");
    TRY(drop_shape_item(r, t, k, "the loop's operand is not a tuple"));
    TRY(drop_operand(r, t, k, "the loop's operand is not a tuple"));
    if (fwd) {
        const hbmi_instr *init = &c->ins[t->ops[k]];
        if (init->n_users == 1 && init->op != HOP_PARAMETER && !init->synthetic) TRY(drop_line(r, c, t->ops[k]));
    }
    for (uint32_t i = 0; i < c->n; i++) {
        const hbmi_instr *g = &c->ins[i];
        if (g->op != HOP_GTE || !g->n_ops || g->ops[0] != wi) continue;
        if (g->gte_index == k) {
            for (uint32_t u = 0; u < g->n_users; u++) /* only the backward loop's tuple reads it */
                if (!fwd || c->ins[g->users[u]].op != HOP_TUPLE) return fail(r, "something else reads the buffer after the loop");
            if (!g->synthetic) TRY(drop_line(r, c, i));
        } else {
            TRY(renumber(r, g, k));
        }
    }
    for (hbmi_called_role role = HBMI_CALLED_BODY; role; role = role == HBMI_CALLED_BODY ? HBMI_CALLED_CONDITION : 0) {
        const hbmi_comp *b = body_of(m, w, role);
        if (!b || !b->n_params) continue;
        const hbmi_instr *pa = &b->ins[b->params[0]];
        TRY(drop_shape_item(r, pa, k, "a loop parameter's text is not as expected"));
        TRY(drop_sig_item(r, b, 0, k, "a loop parameter's text is not as expected"));
        const hbmi_instr *root = &b->ins[b->root];
        uint32_t keep_reader = UINT32_MAX; /* the forward update in place */
        if (role == HBMI_CALLED_BODY && fwd && root->op == HOP_TUPLE && (uint64_t)k < root->n_ops) keep_reader = root->ops[k];
        for (uint32_t i = 0; i < b->n; i++) {
            const hbmi_instr *g = &b->ins[i];
            if (g->op != HOP_GTE || !g->n_ops || g->ops[0] != b->params[0]) continue;
            if (g->gte_index != k) {
                TRY(renumber(r, g, k));
                continue;
            }
            if (!g->synthetic) TRY(drop_line(r, b, i));
        }
        if (role != HBMI_CALLED_BODY) continue;
        static const char not_tuple[] = "the loop body's root is not a tuple";
        if (root->op != HOP_TUPLE) return fail(r, not_tuple);
        TRY(drop_shape_item(r, root, k, not_tuple));
        TRY(drop_operand(r, root, k, not_tuple));
        TRY(drop_sig_item(r, b, -1, k, not_tuple));
        if (!fwd) continue;
        /* the update in place: bitcasts and copies, then the DUS or its fusion, deleted */
        uint32_t xi = keep_reader;
        for (int hop = 0; hop < 8 && xi != UINT32_MAX; hop++) {
            const hbmi_instr *x = &b->ins[xi];
            if (x->n_users != 1) return fail(r, "the update in place has other readers");
            if (!x->synthetic) TRY(drop_line(r, b, xi)); /* "%fusion#N" in the root has no line */
            if ((x->op == HOP_BITCAST || x->op == HOP_COPY) && x->n_ops) {
                xi = x->ops[0];
                continue;
            }
            if (x->op == HOP_GTE && x->n_ops && b->ins[x->ops[0]].op == HOP_FUSION &&
                b->ins[x->ops[0]].shape->prim == HBMI_PRIM_TUPLE) { /* one element of a multi-output fusion */
                TRY(narrow_fusion(r, b, x->ops[0], x->gte_index));
                break;
            }
            if (x->op != HOP_DUS && !(x->op == HOP_FUSION && x->shape->prim != HBMI_PRIM_TUPLE))
                return fail(r, "the forward loop stacks it through a multi-output fusion");
            if (x->op == HOP_FUSION && x->n_called) TRY(drop_comp(r, &m->comps[x->called[0]]));
            break;
        }
    }
    return HBM_OK;
}

/* "known_induction_variable":{"tuple_index":"N"} in the loop's backend config, else element 0 */
static int64_t induction(const hbm_hlo_module *m, const hbmi_comp *c, uint32_t wi) {
    const hbmi_instr *w = &c->ins[wi];
    size_t end = wi + 1 < c->n ? c->ins[wi + 1].off : m->len;
    const char *s = m->text + w->off;
    static const char key[] = "\"known_induction_variable\":{\"tuple_index\":\"";
    for (const char *p = s; p + sizeof key - 1 < m->text + end; p++)
        if (!memcmp(p, key, sizeof key - 1)) return strtoll(p + sizeof key - 1, NULL, 10);
    return 0;
}

/* x is element e of body b's parameter (through bitcasts and copies): e, else -1 */
static int64_t elem_of(const hbmi_comp *b, const hbmi_instr *x) {
    x = strip(b, x);
    return x->op == HOP_GTE && x->n_ops && b->ins[x->ops[0]].op == HOP_PARAMETER && b->n_params &&
                   x->ops[0] == b->params[0]
               ? x->gte_index
               : -1;
}

/* in slices element e of body b's parameter along its first dimension: a dynamic-slice, or a
 * fusion whose root (through bitcasts) is one of a fusion parameter that is that element: e,
 * else -1 */
static int64_t slice_of(const hbm_hlo_module *m, const hbmi_comp *b, const hbmi_instr *in) {
    static const char ds[] = "dynamic-slice";
    if (in->opcode.n == sizeof ds - 1 && !memcmp(in->opcode.p, ds, sizeof ds - 1) && in->n_ops)
        return elem_of(b, &b->ins[in->ops[0]]);
    if (in->op != HOP_FUSION || !in->n_called || in->shape->prim == HBMI_PRIM_TUPLE) return -1;
    const hbmi_comp *f = &m->comps[in->called[0]];
    const hbmi_instr *y = strip(f, &f->ins[f->root]);
    if (!(y->opcode.n == sizeof ds - 1 && !memcmp(y->opcode.p, ds, sizeof ds - 1) && y->n_ops)) return -1;
    const hbmi_instr *p = strip(f, &f->ins[y->ops[0]]);
    if (p->op != HOP_PARAMETER || p->param_no < 0 || (uint64_t)p->param_no >= in->n_ops) return -1;
    return elem_of(b, &b->ins[in->ops[p->param_no]]);
}

/* element e of the forward loop (instruction fwi of c: operand tuple ft, body fb) is
 * loop-invariant (the body passes it on) and the backward loop (operand tuple bt) starts from
 * the same value, the forward loop's operand or its element e as the loop leaves it (XLA:TPU
 * passes the loop's result on): its element there, else -1 */
static int64_t invariant(const hbmi_comp *c, const hbmi_comp *fb, uint32_t fwi, const hbmi_instr *ft,
                         const hbmi_instr *bt, int64_t e) {
    const hbmi_instr *fr = &fb->ins[fb->root];
    if (fr->op != HOP_TUPLE || (uint64_t)e >= fr->n_ops || (uint64_t)e >= ft->n_ops || elem_of(fb, &fb->ins[fr->ops[e]]) != e)
        return -1;
    for (uint32_t j = 0; j < bt->n_ops; j++) {
        const hbmi_instr *g = strip(c, &c->ins[bt->ops[j]]);
        if (g == strip(c, &c->ins[ft->ops[e]])) return j;
        if (g->op == HOP_GTE && g->n_ops && g->ops[0] == fwi && g->gte_index == e) return j;
    }
    return -1;
}

typedef struct mapped {
    char name[320]; /* what the backward body reads for a forward body instruction */
} mapped;

/* the text of computation f with its name and its instructions' names suffixed ".recompute",
 * added to r->comps (written before the backward body) */
static hbm_status copy_comp(rc *r, const hbmi_comp *f) {
    const hbm_hlo_module *m = r->m;
    size_t a = f->off;
    while (a < m->len && (m->text[a] == '\n' || m->text[a] == ' ')) a++;
    size_t b = f->ins[f->n - 1].off;
    while (b < m->len && m->text[b] != '\n') b++;
    if (b < m->len) b++;
    while (b < m->len && m->text[b] != '\n') b++;
    if (b < m->len) b++;
    FILE *o = open_memstream(&r->comps, &r->n_comps);
    if (!o) return oom();
    if (r->comps_kept) fwrite(r->comps_kept, 1, r->n_kept, o);
    const char *p = m->text + a, *e = m->text + b, *hdr_end = m->text + f->ins[0].off;
    while (p < e) {
        if (!nchar((unsigned char)*p) || (p > m->text + a && nchar((unsigned char)p[-1]))) {
            fputc(*p++, o);
            continue;
        }
        const char *q = p;
        while (q < e && nchar((unsigned char)*q)) q++;
        int hit = 0, pct = p > m->text && p[-1] == '%';
        if (pct && (size_t)(q - p) == f->name.n && !memcmp(p, f->name.p, f->name.n)) hit = 1;
        for (uint32_t i = 0; i < f->n && !hit; i++)
            if ((size_t)(q - p) == f->ins[i].name.n && !memcmp(p, f->ins[i].name.p, f->ins[i].name.n))
                hit = pct || (p < hdr_end && q < e && *q == ':');
        fwrite(p, 1, (size_t)(q - p), o);
        if (hit) fputs(".recompute", o);
        p = q;
    }
    fputc('\n', o);
    if (fclose(o)) {
        free(r->comps);
        r->comps = NULL;
        return oom();
    }
    free(r->comps_kept);
    r->comps_kept = r->comps;
    r->n_kept = r->n_comps;
    r->comps = NULL;
    return HBM_OK;
}

/* one cloned line: instruction in of computation c renamed NAME.recompute, its operands renamed
 * by map (per instruction of c; empty: the operand's own clone name) */
static hbm_status clone_line(rc *r, const hbmi_comp *c, uint32_t i, mapped *map, char **out, size_t *on) {
    const hbm_hlo_module *m = r->m;
    const hbmi_instr *in = &c->ins[i];
    size_t e = in->off; /* to the next instruction, or the end of the last one's line */
    if (i + 1 < c->n) e = c->ins[i + 1].off;
    else
        while (e < m->len && m->text[e] != '\n') e++;
    const char *s = m->text + in->off, *lim = m->text + e;
    while (lim > s && (lim[-1] == '\n' || lim[-1] == ' ' || lim[-1] == '\r')) lim--;
    FILE *f = open_memstream(out, on);
    if (!f) return oom();
    fprintf(f, "  %s", map[i].name);
    const char *p = in->name.p + in->name.n;
    const char *oa = in->opcode.p + in->opcode.n, *ob = oa;
    int depth = 0;
    for (; ob < lim; ob++) {
        if (*ob == '(') depth++;
        else if (*ob == ')' && --depth == 0) {
            ob++;
            break;
        }
    }
    fwrite(p, 1, (size_t)(oa - p), f);
    for (p = oa; p < ob;) {
        if (*p == '%') {
            const char *t = p + 1, *q = t;
            while (q < ob && nchar((unsigned char)*q)) q++;
            const char *to = NULL;
            for (uint32_t k = 0; k < in->n_ops && !to; k++) {
                hbmi_str nm = c->ins[in->ops[k]].name;
                if (nm.n == (uint32_t)(q - t) && !memcmp(nm.p, t, nm.n)) to = map[in->ops[k]].name + 1;
            }
            fputc('%', f);
            if (to) fputs(to, f);
            else fwrite(t, 1, (size_t)(q - t), f);
            p = q;
        } else {
            fputc(*p++, f);
        }
    }
    const char *cl = NULL; /* a fusion's computation: its own copy (a fused computation has one caller) */
    hbmi_str cn = {0};
    if (in->op == HOP_FUSION && in->n_called) {
        cn = m->comps[in->called[0]].name;
        for (const char *q = ob; q + 7 + cn.n <= lim && !cl; q++)
            if (!memcmp(q, "calls=%", 7) && !memcmp(q + 7, cn.p, cn.n) && (q + 7 + cn.n == lim || !nchar((unsigned char)q[7 + cn.n])))
                cl = q + 7 + cn.n;
    }
    if (cl) {
        fwrite(ob, 1, (size_t)(cl - ob), f);
        fputs(".recompute", f);
        fwrite(cl, 1, (size_t)(lim - cl), f);
    } else {
        fwrite(ob, 1, (size_t)(lim - ob), f);
    }
    fputc('\n', f);
    hbm_status st = cl ? copy_comp(r, &m->comps[in->called[0]]) : HBM_OK;
    if (fclose(f) && !st) st = oom();
    if (st) {
        free(*out);
        *out = NULL;
    }
    return st;
}

/* The value computed inside the stacking fusion in (instruction i of c; its computation f,
 * the value vu, its instructions marked in inner), as a fusion of its own: a copy of f with
 * only those instructions, vu its root, the parameters it reads renumbered in order, called
 * with the matching operands (renamed by map). */
static hbm_status clone_inner(rc *r, const hbmi_comp *c, uint32_t i, const hbmi_comp *f, const hbmi_instr *vu,
                              const uint8_t *inner, mapped *map, FILE *C) {
    const hbm_hlo_module *m = r->m;
    const hbmi_instr *in = &c->ins[i];
    char *t = NULL;
    size_t tn = 0;
    FILE *o = open_memstream(&t, &tn);
    if (!o) return oom();
    const char *va, *vb;
    shape_span(m, vu, &va, &vb);
    fprintf(o, "%%%.*s.recompute (", (int)f->name.n, f->name.p);
    int64_t np = 0;
    for (uint32_t p = 0; p < f->n_params; p++) {
        const hbmi_instr *q = &f->ins[f->params[p]];
        if (!inner[f->params[p]]) continue;
        const char *a, *b;
        shape_span(m, q, &a, &b);
        fprintf(o, "%s%.*s.recompute: %.*s", np++ ? ", " : "", (int)q->name.n, q->name.p, (int)(b - a), a);
    }
    fprintf(o, ") -> %.*s {\n", (int)(vb - va), va);
    mapped *fm = hbmi_calloc(f->n + 1, sizeof *fm);
    if (!fm) {
        fclose(o);
        free(t);
        return oom();
    }
    for (uint32_t k = 0; k < f->n; k++)
        snprintf(fm[k].name, sizeof fm[k].name, "%%%.*s.recompute", (int)f->ins[k].name.n, f->ins[k].name.p);
    np = 0;
    hbm_status s = HBM_OK;
    for (uint32_t k = 0; !s && k < f->n; k++) {
        if (!inner[k]) continue;
        const hbmi_instr *q = &f->ins[k];
        if (q->op == HOP_PARAMETER) {
            const char *a, *b;
            shape_span(m, q, &a, &b);
            int64_t pn = 0; /* its number among the parameters kept */
            for (uint32_t p = 0; p < f->n_params && f->params[p] != k; p++) pn += inner[f->params[p]];
            fprintf(o, "  %s = %.*s parameter(%lld)\n", fm[k].name, (int)(b - a), a, (long long)pn);
            continue;
        }
        char *ln = NULL;
        size_t n = 0;
        if ((s = clone_line(r, f, k, fm, &ln, &n))) break;
        fprintf(o, "%s%s", q == vu ? "  ROOT " : "", q == vu ? ln + 2 : ln);
        free(ln);
    }
    fprintf(o, "}\n\n");
    hbmi_free(fm);
    if (fclose(o) && !s) s = oom();
    if (s) {
        free(t);
        return s;
    }
    /* kept with the other copies, before the backward body */
    char *all = NULL;
    size_t an = 0;
    FILE *a2 = open_memstream(&all, &an);
    if (!a2) {
        free(t);
        return oom();
    }
    if (r->comps_kept) fwrite(r->comps_kept, 1, r->n_kept, a2);
    fwrite(t, 1, tn, a2);
    free(t);
    if (fclose(a2)) {
        free(all);
        return oom();
    }
    free(r->comps_kept);
    r->comps_kept = all;
    r->n_kept = an;
    fprintf(C, "  %s = %.*s fusion(", map[i].name, (int)(vb - va), va);
    np = 0;
    for (uint32_t p = 0; p < f->n_params && p < in->n_ops; p++)
        if (inner[f->params[p]]) fprintf(C, "%s%s", np++ ? ", " : "", map[in->ops[p]].name);
    /* the fusion's own kind (kOutput around a convolution on TPU), else kLoop */
    const char *kd = "kLoop";
    int kn = 5;
    for (const char *q = in->opcode.p, *e = m->text + m->len; q + 5 < e && *q != '\n'; q++)
        if (!memcmp(q, "kind=", 5) && (q[-1] == ' ' || q[-1] == ',')) {
            const char *k0 = q + 5, *k1 = k0;
            while (k1 < e && nchar((unsigned char)*k1)) k1++;
            if (k1 > k0) kd = k0, kn = (int)(k1 - k0);
            break;
        }
    fprintf(C, "), kind=%.*s, calls=%%%.*s.recompute\n", kn, kd, (int)f->name.n, f->name.p);
    return HBM_OK;
}

static hbm_status build(rc *r, const hbmi_jax_residual *x, const hbmi_jax_residual *all, size_t n_all) {
    const hbm_hlo_module *m = r->m;
    const hbmi_comp *c = &m->comps[x->comp];
    if (x->fwd_body >= m->n_comps || x->bwd_body >= m->n_comps) return fail(r, "a loop body is not found");
    const hbmi_comp *fb = &m->comps[x->fwd_body], *bb = &m->comps[x->bwd_body];
    uint32_t bwd = UINT32_MAX;
    for (uint32_t i = 0; i < c->n; i++)
        if (c->ins[i].name.n == strlen(x->backward_loop) && !memcmp(c->ins[i].name.p, x->backward_loop, c->ins[i].name.n))
            bwd = i;
    if (bwd == UINT32_MAX) return fail(r, "the backward loop is not found");
    if (x->carry) return fail(r, "it is the scan's carry: recomputing it is recomputing the layers before it");
    /* the value: the forward body's instruction, or inside the fusion that stacks it (vf: that
     * fusion's computation, vu: the value there) */
    uint32_t vi = x->value_ins;
    const hbmi_comp *vf = NULL;
    const hbmi_instr *vu = NULL;
    if (vi == UINT32_MAX) {
        const hbmi_instr *root = &fb->ins[fb->root];
        if (root->op != HOP_TUPLE || x->index >= root->n_ops) return fail(r, "the forward body's root is not a tuple");
        uint32_t wi = root->ops[x->index];
        for (int hop = 0; hop < 8 && (fb->ins[wi].op == HOP_BITCAST || fb->ins[wi].op == HOP_COPY) && fb->ins[wi].n_ops; hop++)
            wi = fb->ins[wi].ops[0];
        const hbmi_instr *wr = &fb->ins[wi];
        int64_t vd = -1; /* an element of a multi-output fusion (XLA:TPU's): the one that stacks it */
        if (wr->op == HOP_GTE && wr->n_ops && fb->ins[wr->ops[0]].op == HOP_FUSION &&
            fb->ins[wr->ops[0]].shape->prim == HBMI_PRIM_TUPLE) {
            vd = wr->gte_index;
            wi = wr->ops[0];
            wr = &fb->ins[wi];
        }
        if (wr->op != HOP_FUSION || !wr->n_called || (vd < 0 && wr->shape->prim == HBMI_PRIM_TUPLE))
            return fail(r, "the forward body stacks it other than by a fusion or an update in place");
        vf = &m->comps[wr->called[0]];
        const hbmi_instr *y = &vf->ins[vf->root];
        if (vd >= 0) {
            if (y->op != HOP_TUPLE || (uint64_t)vd >= y->n_ops) return fail(r, "the stacking fusion's root is not a tuple");
            y = &vf->ins[y->ops[vd]];
        }
        for (int hop = 0; hop < 8 && (y->op == HOP_BITCAST || y->op == HOP_COPY) && y->n_ops; hop++) y = &vf->ins[y->ops[0]];
        if (y->op != HOP_DUS || y->n_ops < 2) return fail(r, "the stacking fusion's root is not an update in place");
        vu = &vf->ins[y->ops[1]];
        for (int hop = 0; hop < 8 && vu->n_ops &&
                          (vu->op == HOP_BITCAST || vu->op == HOP_COPY || (vu->opcode.n == 16 && !memcmp(vu->opcode.p, "reduce-precision", 16)));
             hop++)
            vu = &vf->ins[vu->ops[0]];
        if (vu->op == HOP_PARAMETER) return fail(r, "the stacking fusion saves a value it does not compute");
        vi = wi;
    }
    const hbmi_instr *fw = &c->ins[x->loop_ins], *bw = &c->ins[bwd];
    if (!fw->n_ops || !bw->n_ops || c->ins[fw->ops[0]].op != HOP_TUPLE || c->ins[bw->ops[0]].op != HOP_TUPLE)
        return fail(r, "a loop's operand is not a tuple");
    const hbmi_instr *ft = &c->ins[fw->ops[0]], *bt = &c->ins[bw->ops[0]];
    if (!bb->n_params || !fb->n_params) return fail(r, "a loop body has no parameter");
    /* the forward body's instructions that compute it, back to the loop's elements */
    uint8_t *cone = hbmi_calloc(fb->n + 1, 1);
    mapped *map = cone ? hbmi_calloc(fb->n + 1, sizeof *map) : NULL;
    if (!cone || !map) {
        hbmi_free(cone);
        hbmi_free(map);
        return oom();
    }
    hbm_status s = HBM_OK;
    cone[vi] = 1;
    uint8_t *inner = vf ? hbmi_calloc(vf->n + 1, 1) : NULL; /* the value's instructions inside the fusion */
    if (vf && !inner) {
        hbmi_free(cone);
        hbmi_free(map);
        return oom();
    }
    if (vf) {
        inner[vu - vf->ins] = 1;
        for (uint32_t i = vf->n; i-- > 0;)
            if (inner[i])
                for (uint32_t k = 0; k < vf->ins[i].n_ops; k++) inner[vf->ins[i].ops[k]] = 1;
    }
    uint32_t first_reader = UINT32_MAX; /* where the clones go: before the backward body's first reader */
    for (uint32_t i = 0; i < bb->n && first_reader == UINT32_MAX; i++) {
        const hbmi_instr *g = &bb->ins[i];
        if (g->op == HOP_GTE && g->n_ops && g->ops[0] == bb->params[0] && g->gte_index == x->bwd_index)
            for (uint32_t u = 0; u < g->n_users; u++)
                if (!bb->ins[g->users[u]].is_root && g->users[u] < first_reader) first_reader = g->users[u];
    }
    for (uint32_t i = fb->n; i-- > 0;) { /* operands come before users */
        if (!cone[i]) continue;
        const hbmi_instr *in = &fb->ins[i];
        if (in->op == HOP_GTE && in->n_ops && in->ops[0] == fb->params[0]) continue;
        /* the layer's slice of a loop-invariant stacked input (a weight): JAX's scan slices each
         * of its xs once per iteration, and the backward loop's own slice of the same input, of
         * the same shape, before the reader, is the same layer's */
        int64_t e = slice_of(m, fb, in);
        int64_t eb = e >= 0 ? invariant(c, fb, x->loop_ins, ft, bt, e) : -1;
        uint32_t twin = UINT32_MAX;
        for (uint32_t j = 0; eb >= 0 && j < first_reader && j < bb->n && twin == UINT32_MAX; j++)
            if (slice_of(m, bb, &bb->ins[j]) == eb && hbmi_shape_bytes(bb->ins[j].shape, 8) == hbmi_shape_bytes(in->shape, 8) &&
                bb->ins[j].shape->n == in->shape->n)
                twin = j;
        if (twin != UINT32_MAX) {
            cone[i] = 2;
            snprintf(map[i].name, sizeof map[i].name, "%%%.*s", (int)bb->ins[twin].name.n, bb->ins[twin].name.p);
            continue;
        }
        if (in->op == HOP_PARAMETER) {
            s = fail(r, "it reads the loop's whole tuple");
            break;
        }
        for (uint32_t k = 0; k < in->n_ops; k++) /* the stacking fusion: the operands the value reads */
            if (!(vf && i == vi) || (k < vf->n_params && inner[vf->params[k]])) cone[in->ops[k]] = 1;
    }
    const char *bp = bb->ins[bb->params[0]].name.p;
    int bpn = (int)bb->ins[bb->params[0]].name.n;
    char pre[160];
    snprintf(pre, sizeof pre, "%.*s.recompute", (int)fb->ins[vi].name.n, fb->ins[vi].name.p);
    int64_t iv_f = induction(m, c, x->loop_ins), iv_b = induction(m, c, bwd);
    char *lines = NULL;
    size_t nl = 0;
    FILE *L = open_memstream(&lines, &nl);
    if (!L) s = oom();
    for (uint32_t i = 0; !s && i < fb->n; i++) {
        if (cone[i] != 1) continue;
        const hbmi_instr *in = &fb->ins[i];
        if (in->op == HOP_COPY && in->n_ops) { /* copy insertion's, for the carried buffer: the value itself */
            memcpy(map[i].name, map[in->ops[0]].name, sizeof map[i].name);
            continue;
        }
        if (!(in->op == HOP_GTE && in->n_ops && in->ops[0] == fb->params[0])) {
            snprintf(map[i].name, sizeof map[i].name, "%%%.*s.recompute", (int)in->name.n, in->name.p);
            continue;
        }
        int64_t e = in->gte_index;
        const char *sa, *sb;
        if (!shape_span(m, in, &sa, &sb)) {
            s = fail(r, "a loop element has no shape text");
            break;
        }
        if (e == iv_f) {
            snprintf(map[i].name, sizeof map[i].name, "%%%s.layer", pre);
        } else {
            /* loop-invariant: the forward body passes it on, the backward loop starts from the same value */
            int64_t eb = invariant(c, fb, x->loop_ins, ft, bt, e);
            const hbmi_jax_residual *saved = NULL;
            for (size_t q = 0; eb < 0 && q < n_all && !saved; q++)
                if (all[q].carry && all[q].comp == x->comp && all[q].loop_ins == x->loop_ins && all[q].carry_elem == e &&
                    all[q].bwd_body == x->bwd_body)
                    saved = &all[q];
            uint32_t twin = UINT32_MAX; /* the backward body's own slice of it, before the reader */
            for (uint32_t j = 0; saved && j < first_reader && j < bb->n && twin == UINT32_MAX; j++)
                if (slice_of(m, bb, &bb->ins[j]) == (int64_t)saved->bwd_index &&
                    hbmi_shape_bytes(bb->ins[j].shape, 8) == hbmi_shape_bytes(in->shape, 8))
                    twin = j;
            if (eb >= 0) {
                snprintf(map[i].name, sizeof map[i].name, "%%%s.in%lld", pre, (long long)e);
                fprintf(L, "  %s = %.*s get-tuple-element(%%%.*s), index=%lld\n", map[i].name, (int)(sb - sa), sa, bpn,
                        bp, (long long)(eb > x->bwd_index ? eb - 1 : eb));
            } else if (twin != UINT32_MAX) {
                snprintf(map[i].name, sizeof map[i].name, "%%%.*s", (int)bb->ins[twin].name.n, bb->ins[twin].name.p);
            } else if (saved) {
                /* the layer's input: one layer of the carry's own residual */
                const char *wa, *wb;
                if (!shape_span(m, bw, &wa, &wb) || !hbmi_fit_list_item(wa + 1, wb, saved->bwd_index, &wa, &wb)) {
                    s = fail(r, "the backward loop's shape text is not as expected");
                    break;
                }
                const char *l = memchr(wa, '[', (size_t)(wb - wa)), *d = l ? l + 1 : wb;
                while (d < wb && *d >= '0' && *d <= '9') d++;
                snprintf(map[i].name, sizeof map[i].name, "%%%s.in%lld", pre, (long long)e);
                fprintf(L, "  %s.all = %.*s get-tuple-element(%%%.*s), index=%u\n", map[i].name, (int)(wb - wa), wa, bpn,
                        bp, saved->bwd_index > x->bwd_index ? saved->bwd_index - 1 : saved->bwd_index);
                fprintf(L, "  %s.one = %.*s1%.*s dynamic-slice(%s.all, %%%s.layer", map[i].name, (int)(l + 1 - wa), wa,
                        (int)(wb - d), d, map[i].name, pre);
                const hbmi_shape *sh = &fw->shape->elems[saved->index];
                for (uint32_t q = 1; q < sh->n; q++) fprintf(L, ", %%%s.zero", pre);
                fprintf(L, "), dynamic_slice_sizes={1");
                for (uint32_t q = 1; q < sh->n; q++) fprintf(L, ",%lld", (long long)sh->dims[q]);
                fprintf(L, "}\n");
                if (sh->prim == in->shape->prim) {
                    fprintf(L, "  %s = %.*s bitcast(%s.one)\n", map[i].name, (int)(sb - sa), sa, map[i].name);
                } else { /* XLA:TPU stacks the input narrower (bf16 of an f32 carry): converted back */
                    const char *lb = memchr(sa, '[', (size_t)(sb - sa)), *rb = lb ? memchr(lb, ']', (size_t)(sb - lb)) : NULL;
                    if (!rb) {
                        s = fail(r, "the layer's input has no dimensions");
                        break;
                    }
                    char held[48], want[48];
                    hbmi_shape one = *sh;
                    one.n = one.n ? one.n - 1 : 0;
                    one.dims = sh->dims + (sh->n ? 1 : 0);
                    one.tiled_elems = 0;
                    hbmi_shape_print(&one, held, sizeof held);
                    hbmi_shape_print(in->shape, want, sizeof want);
                    snprintf(r->note, sizeof r->note,
                             "the clone reads the layer's input %s from the %s copy the backward loop holds, converted "
                             "back (rounded)",
                             want, held);
                    fprintf(L, "  %s.wide = %.*s[1%s%.*s] convert(%s.one)\n", map[i].name, (int)(lb - sa), sa,
                            rb > lb + 1 ? "," : "", (int)(rb - lb - 1), lb + 1, map[i].name);
                    fprintf(L, "  %s = %.*s bitcast(%s.wide)\n", map[i].name, (int)(sb - sa), sa, map[i].name);
                }
            } else {
                char why[256];
                snprintf(why, sizeof why,
                         "it needs element %lld of the forward loop (%.*s), which the backward loop does not hold",
                         (long long)e, (int)(sb - sa), sa);
                s = fail(r, why);
                break;
            }
        }
    }
    char *head = NULL;
    size_t nh = 0;
    if (!s) { /* the layer index L-1-i, a zero, then the clones in the forward body's order */
        FILE *H = open_memstream(&head, &nh);
        if (!H) {
            s = oom();
        } else {
            fprintf(H, "  %%%s.i = s32[] get-tuple-element(%%%.*s), index=%lld\n", pre, bpn, bp,
                    (long long)(iv_b > x->bwd_index ? iv_b - 1 : iv_b));
            fprintf(H, "  %%%s.last = s32[] constant(%lld)\n", pre, (long long)(x->layers - 1));
            fprintf(H, "  %%%s.layer = s32[] subtract(%%%s.last, %%%s.i)\n", pre, pre, pre);
            fprintf(H, "  %%%s.zero = s32[] constant(0)\n", pre);
            if (fclose(H)) s = oom();
        }
    }
    if (L && fclose(L) && !s) s = oom();
    char *clones = NULL;
    size_t ncl = 0;
    FILE *C = !s ? open_memstream(&clones, &ncl) : NULL;
    if (!s && !C) s = oom();
    for (uint32_t i = 0; !s && i < fb->n; i++) {
        if (cone[i] != 1 || (fb->ins[i].op == HOP_GTE && fb->ins[i].ops[0] == fb->params[0]) ||
            (fb->ins[i].op == HOP_COPY && fb->ins[i].n_ops))
            continue;
        if (vf && i == vi) {
            if ((s = clone_inner(r, fb, i, vf, vu, inner, map, C))) break;
            for (uint32_t k = 0; k < vf->n; k++)
                if (inner[k]) r->flops += hbmi_fit_instr_flops(m, vf, &vf->ins[k]);
            continue;
        }
        r->flops += hbmi_fit_instr_flops(m, fb, &fb->ins[i]);
        char *ln = NULL;
        size_t n = 0;
        if ((s = clone_line(r, fb, i, map, &ln, &n))) break;
        fputs(ln, C);
        free(ln);
    }
    /* the slice as the reader reads one layer of the buffer */
    const hbmi_instr *v = &fb->ins[vi];
    const char *va, *vb;
    if (!s && shape_span(m, v, &va, &vb)) {
        const hbmi_shape *sh = &fw->shape->elems[x->index];
        const char *wa, *wb;
        if (shape_span(m, fw, &wa, &wb) && hbmi_fit_list_item(wa + 1, wb, x->index, &wa, &wb)) {
            const char *l = memchr(wa, '[', (size_t)(wb - wa)), *d = l ? l + 1 : wb;
            while (d < wb && *d >= '0' && *d <= '9') d++;
            if (l) fprintf(C, "  %%%s.one = %.*s1%.*s bitcast(%s)\n", pre, (int)(l + 1 - wa), wa, (int)(wb - d), d,
                           map[vi].name);
            else s = fail(r, "the residual's shape text has no dimensions");
        } else {
            s = fail(r, "the forward loop's shape text is not as expected");
        }
        (void)sh;
    }
    if (C && fclose(C) && !s) s = oom();
    /* the readers in the backward body: the recomputed slice instead of the buffer */
    uint32_t first = UINT32_MAX;
    for (uint32_t i = 0; !s && i < bb->n; i++) {
        const hbmi_instr *g = &bb->ins[i];
        if (!(g->op == HOP_GTE && g->n_ops && g->ops[0] == bb->params[0] && g->gte_index == x->bwd_index)) continue;
        for (uint32_t u = 0; !s && u < g->n_users; u++) {
            const hbmi_instr *us = &bb->ins[g->users[u]];
            if (us->op == HOP_TUPLE && us->is_root) continue;
            if (us->op != HOP_FUSION && !(us->opcode.n == 13 && !memcmp(us->opcode.p, "dynamic-slice", 13))) {
                s = fail(r, "the backward loop reads it other than by a dynamic-slice or a fusion");
                break;
            }
            if (g->users[u] < first) first = g->users[u];
            for (uint32_t j = 0; !s && j < us->n_ops; j++) {
                if (us->ops[j] != i) continue;
                const char *na, *nb;
                char nm[200];
                snprintf(nm, sizeof nm, "%%%s.one", pre);
                if (!operand_name(m, us, j, &na, &nb)) {
                    s = fail(r, "a reader's operand text is not as expected");
                    break;
                }
                if ((s = add(r, (size_t)(na - m->text), (size_t)(nb - m->text), nm))) break;
                if (us->op == HOP_FUSION && us->n_called) {
                    const hbmi_comp *f = &m->comps[us->called[0]];
                    if (j < f->n_params && !(s = shrink_ins(r, &f->ins[f->params[j]], -1))) s = shrink_sig(r, f, j, -1);
                }
            }
        }
    }
    if (!s && first == UINT32_MAX) s = fail(r, "the backward body does not read it");
    if (!s && r->comps_kept) { /* before the backward body's header */
        size_t at = bb->off;
        while (at < m->len && (m->text[at] == '\n' || m->text[at] == ' ')) at++;
        while (at > 0 && m->text[at - 1] != '\n') at--;
        s = add(r, at, at, r->comps_kept);
    }
    if (!s) {
        size_t at = line_start(m, &bb->ins[first]);
        if (!(s = add(r, at, at, head)) && !(s = add(r, at, at, lines ? lines : "")))
            s = add(r, at, at, clones ? clones : "");
    }
    free(head);
    free(lines);
    free(clones);
    hbmi_free(cone);
    hbmi_free(map);
    hbmi_free(inner);
    if (s) return s;
    TRY(drop_loop(r, c, x->loop_ins, x->index, 1, iv_f));
    return drop_loop(r, c, bwd, x->bwd_index, 0, iv_b);
}

static int cmp_patch(const void *a, const void *b) {
    const patch *x = a, *y = b;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

hbm_status hbmi_jax_recompute_write(const hbm_hlo_module *m, const hbmi_jax_residual *x, const hbmi_jax_residual *all,
                                    size_t n_all, char **text, size_t *len, uint64_t *flops, char *why, size_t why_cap) {
    *text = NULL;
    *len = 0;
    if (flops) *flops = 0;
    if (why && why_cap) why[0] = 0;
    rc r = {.m = m, .why = why, .why_cap = why_cap};
    hbm_status s = build(&r, x, all, n_all);
    if (!s && flops) *flops = r.flops * (uint64_t)(x->layers > 0 ? x->layers : 0);
    if (!s && why && why_cap) snprintf(why, why_cap, "%s", r.note);
    if (!s) {
        hbmi_qsort(r.p, r.n, sizeof *r.p, cmp_patch);
        FILE *f = open_memstream(text, len);
        if (!f) {
            s = oom();
        } else {
            size_t cur = 0;
            for (size_t k = 0; k < r.n; k++) {
                if (r.p[k].a < cur) continue; /* the same span twice: once */
                fwrite(m->text + cur, 1, r.p[k].a - cur, f);
                fputs(r.p[k].s, f);
                cur = r.p[k].b;
            }
            fwrite(m->text + cur, 1, m->len - cur, f);
            if (fclose(f)) s = oom();
        }
        if (s) {
            free(*text);
            *text = NULL;
        }
    }
    free(r.comps_kept);
    for (size_t k = 0; k < r.n; k++) hbmi_free(r.p[k].s);
    hbmi_free(r.p);
    return s;
}
