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
    int nomem;
    char *why;
    size_t why_cap;
    char *comps, *comps_kept; /* copies of fused computations the clones call */
    size_t n_comps, n_kept;
    uint64_t flops; /* of the clones, once */
} rc;

static void add(rc *r, size_t a, size_t b, const char *s) {
    if (r->nomem) return;
    if (hbmi_grow((void **)&r->p, &r->cap, r->n + 1, sizeof *r->p)) {
        r->nomem = 1;
        return;
    }
    size_t k = strlen(s);
    char *c = hbmi_malloc(k + 1);
    if (!c) {
        r->nomem = 1;
        return;
    }
    memcpy(c, s, k + 1);
    r->p[r->n] = (patch){a, b, c, r->n};
    r->n++;
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
 * span of its digits, replaced by "1" */
static int shrink(rc *r, const char *a, const char *b, int64_t idx) {
    if (idx >= 0) {
        if (a >= b || *a != '(') return 0;
        if (!hbmi_fit_list_item(a + 1, b, idx, &a, &b)) return 0;
    }
    const char *l = memchr(a, '[', (size_t)(b - a));
    if (!l) return 0;
    const char *d = l + 1, *e = d;
    while (e < b && *e >= '0' && *e <= '9') e++;
    if (e == d) return 0;
    add(r, (size_t)(d - r->m->text), (size_t)(e - r->m->text), "1");
    return 1;
}

static int shrink_ins(rc *r, const hbmi_instr *in, int64_t idx) {
    const char *a, *b;
    return shape_span(r->m, in, &a, &b) && shrink(r, a, b, idx);
}

/* the signature of computation c: parameter p's shape (p >= 0) or the result's (p < 0) */
static int sig_span(const hbm_hlo_module *m, const hbmi_comp *c, int64_t p, const char **a, const char **b) {
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

static int shrink_sig(rc *r, const hbmi_comp *c, int64_t p, int64_t idx) {
    const char *a, *b;
    return sig_span(r->m, c, p, &a, &b) && shrink(r, a, b, idx);
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

static int fail(rc *r, const char *msg) {
    if (r->why && r->why_cap) snprintf(r->why, r->why_cap, "%s", msg);
    return 0;
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
 * its opening parenthesis): with the comma before it, or after it for the first */
static int drop_item(rc *r, const char *a, const char *b, int64_t idx) {
    if (a >= b || *a != '(') return 0;
    const char *ia, *ib;
    if (!hbmi_fit_list_item(a + 1, b, idx, &ia, &ib)) return 0;
    const char *from = ia, *to = ib;
    if (idx > 0) {
        while (from > a + 1 && from[-1] != ',') from--;
        if (from > a + 1) from--;
    } else {
        while (to < b && (*to == ',' || *to == ' ')) to++;
    }
    add(r, (size_t)(from - r->m->text), (size_t)(to - r->m->text), "");
    return 1;
}

static int drop_shape_item(rc *r, const hbmi_instr *in, int64_t idx) {
    const char *a, *b;
    return shape_span(r->m, in, &a, &b) && drop_item(r, a, b, idx);
}

static int drop_sig_item(rc *r, const hbmi_comp *c, int64_t p, int64_t idx) {
    const char *a, *b;
    return sig_span(r->m, c, p, &a, &b) && drop_item(r, a, b, idx);
}

static int drop_operand(rc *r, const hbmi_instr *in, int64_t idx) {
    const char *p = in->opcode.p + in->opcode.n, *e = r->m->text + r->m->len;
    const char *q = p;
    for (int depth = 0; q < e; q++) {
        if (*q == '(') depth++;
        else if (*q == ')' && --depth == 0) break;
    }
    return drop_item(r, p, q + 1, idx);
}

/* instruction i of c deleted: its line */
static void drop_line(rc *r, const hbmi_comp *c, uint32_t i) {
    size_t a = line_start(r->m, &c->ins[i]), b;
    if (i + 1 < c->n) {
        b = line_start(r->m, &c->ins[i + 1]);
    } else {
        b = c->ins[i].off;
        while (b < r->m->len && r->m->text[b] != '\n') b++;
        if (b < r->m->len) b++;
    }
    if (b > a) add(r, a, b, "");
}

/* computation f deleted: from its header's line to its closing brace's */
static void drop_comp(rc *r, const hbmi_comp *f) {
    size_t a = f->off;
    while (a < r->m->len && (r->m->text[a] == '\n' || r->m->text[a] == ' ')) a++;
    while (a > 0 && r->m->text[a - 1] != '\n') a--;
    size_t b = f->ins[f->n - 1].off;
    while (b < r->m->len && r->m->text[b] != '\n') b++; /* the last instruction's line */
    if (b < r->m->len) b++;
    while (b < r->m->len && r->m->text[b] != '\n') b++; /* the brace's */
    if (b < r->m->len) b++;
    if (b < r->m->len && r->m->text[b] == '\n') b++; /* the blank line after it */
    add(r, a, b, "");
}

/* a get-tuple-element's index=N past the element dropped: N-1 */
static void renumber(rc *r, const hbmi_instr *g, int64_t k) {
    if (g->gte_index <= k || g->synthetic) return;
    const char *p = g->opcode.p, *e = r->m->text + r->m->len;
    static const char key[] = "index=";
    for (; p + sizeof key - 1 < e && *p != '\n'; p++)
        if (!memcmp(p, key, sizeof key - 1) && (p[-1] == ' ' || p[-1] == ',')) {
            const char *d = p + sizeof key - 1, *q = d;
            while (q < e && *q >= '0' && *q <= '9') q++;
            char t[24];
            snprintf(t, sizeof t, "%lld", (long long)(g->gte_index - 1));
            add(r, (size_t)(d - r->m->text), (size_t)(q - r->m->text), t);
            return;
        }
}

/* element k of loop w (computation c) dropped: from the loop's shape and its operand tuple, its
 * body's and condition's parameter and signature, the body's root; the get-tuple-elements of
 * later elements renumbered. fwd: the forward loop, whose update in place (and the fusion
 * that does it) goes, with the buffer it started from when nothing else reads that. Every
 * reader of the element must be gone: the update in place (fwd), the tuple's pass-through. */
static int drop_loop(rc *r, const hbmi_comp *c, uint32_t wi, int64_t k, int fwd, int64_t iv) {
    const hbm_hlo_module *m = r->m;
    const hbmi_instr *w = &c->ins[wi];
    if (iv > k) return fail(r, "the loop's index comes after the element in its tuple");
    if (!drop_shape_item(r, w, k)) return fail(r, "the loop's shape text is not as expected");
    const hbmi_instr *t = w->n_ops ? &c->ins[w->ops[0]] : NULL;
    if (!t || t->op != HOP_TUPLE || !drop_shape_item(r, t, k) || !drop_operand(r, t, k))
        return fail(r, "the loop's operand is not a tuple");
    if (fwd) {
        const hbmi_instr *init = &c->ins[t->ops[k]];
        if (init->n_users == 1 && init->op != HOP_PARAMETER && !init->synthetic) drop_line(r, c, t->ops[k]);
    }
    for (uint32_t i = 0; i < c->n; i++) {
        const hbmi_instr *g = &c->ins[i];
        if (g->op != HOP_GTE || !g->n_ops || g->ops[0] != wi) continue;
        if (g->gte_index == k) {
            for (uint32_t u = 0; u < g->n_users; u++) /* only the backward loop's tuple reads it */
                if (!fwd || c->ins[g->users[u]].op != HOP_TUPLE) return fail(r, "something else reads the buffer after the loop");
            if (!g->synthetic) drop_line(r, c, i);
        } else {
            renumber(r, g, k);
        }
    }
    for (hbmi_called_role role = HBMI_CALLED_BODY; role; role = role == HBMI_CALLED_BODY ? HBMI_CALLED_CONDITION : 0) {
        const hbmi_comp *b = body_of(m, w, role);
        if (!b || !b->n_params) continue;
        const hbmi_instr *pa = &b->ins[b->params[0]];
        if (!drop_shape_item(r, pa, k) || !drop_sig_item(r, b, 0, k))
            return fail(r, "a loop parameter's text is not as expected");
        const hbmi_instr *root = &b->ins[b->root];
        uint32_t keep_reader = UINT32_MAX; /* the forward update in place */
        if (role == HBMI_CALLED_BODY && fwd && root->op == HOP_TUPLE && (uint64_t)k < root->n_ops) keep_reader = root->ops[k];
        for (uint32_t i = 0; i < b->n; i++) {
            const hbmi_instr *g = &b->ins[i];
            if (g->op != HOP_GTE || !g->n_ops || g->ops[0] != b->params[0]) continue;
            if (g->gte_index != k) {
                renumber(r, g, k);
                continue;
            }
            if (!g->synthetic) drop_line(r, b, i);
        }
        if (role != HBMI_CALLED_BODY) continue;
        if (root->op != HOP_TUPLE || !drop_shape_item(r, root, k) || !drop_operand(r, root, k) ||
            !drop_sig_item(r, b, -1, k))
            return fail(r, "the loop body's root is not a tuple");
        if (!fwd) continue;
        /* the update in place: bitcasts and copies, then the DUS or its fusion, deleted */
        uint32_t xi = keep_reader;
        for (int hop = 0; hop < 8 && xi != UINT32_MAX; hop++) {
            const hbmi_instr *x = &b->ins[xi];
            if (x->n_users != 1) return fail(r, "the update in place has other readers");
            drop_line(r, b, xi);
            if ((x->op == HOP_BITCAST || x->op == HOP_COPY) && x->n_ops) {
                xi = x->ops[0];
                continue;
            }
            if (x->op != HOP_DUS && !(x->op == HOP_FUSION && x->shape->prim != HBMI_PRIM_TUPLE))
                return fail(r, "the forward loop stacks it through a multi-output fusion");
            if (x->op == HOP_FUSION && x->n_called) drop_comp(r, &m->comps[x->called[0]]);
            break;
        }
    }
    return 1;
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

/* element e of the forward loop (operand tuple ft, body fb) is loop-invariant (the body passes
 * it on) and the backward loop (operand tuple bt) starts from the same value: its element
 * there, else -1 */
static int64_t invariant(const hbmi_comp *c, const hbmi_comp *fb, const hbmi_instr *ft, const hbmi_instr *bt,
                         int64_t e) {
    const hbmi_instr *fr = &fb->ins[fb->root];
    if (fr->op != HOP_TUPLE || (uint64_t)e >= fr->n_ops || (uint64_t)e >= ft->n_ops || elem_of(fb, &fb->ins[fr->ops[e]]) != e)
        return -1;
    for (uint32_t j = 0; j < bt->n_ops; j++)
        if (strip(c, &c->ins[bt->ops[j]]) == strip(c, &c->ins[ft->ops[e]])) return j;
    return -1;
}

typedef struct mapped {
    char name[320]; /* what the backward body reads for a forward body instruction */
} mapped;

/* the text of computation f with its name and its instructions' names suffixed ".recompute",
 * added to r->comps (written before the backward body) */
static void copy_comp(rc *r, const hbmi_comp *f) {
    const hbm_hlo_module *m = r->m;
    size_t a = f->off;
    while (a < m->len && (m->text[a] == '\n' || m->text[a] == ' ')) a++;
    size_t b = f->ins[f->n - 1].off;
    while (b < m->len && m->text[b] != '\n') b++;
    if (b < m->len) b++;
    while (b < m->len && m->text[b] != '\n') b++;
    if (b < m->len) b++;
    FILE *o = open_memstream(&r->comps, &r->n_comps);
    if (!o) {
        r->nomem = 1;
        return;
    }
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
        r->nomem = 1;
        return;
    }
    free(r->comps_kept);
    r->comps_kept = r->comps;
    r->n_kept = r->n_comps;
    r->comps = NULL;
}

/* one cloned line: instruction in of computation c renamed NAME.recompute, its operands renamed
 * by map (per instruction of c; empty: the operand's own clone name) */
static void clone_line(rc *r, const hbmi_comp *c, uint32_t i, mapped *map, char **out, size_t *on) {
    const hbm_hlo_module *m = r->m;
    const hbmi_instr *in = &c->ins[i];
    size_t e = in->off; /* to the next instruction, or the end of the last one's line */
    if (i + 1 < c->n) e = c->ins[i + 1].off;
    else
        while (e < m->len && m->text[e] != '\n') e++;
    const char *s = m->text + in->off, *lim = m->text + e;
    while (lim > s && (lim[-1] == '\n' || lim[-1] == ' ' || lim[-1] == '\r')) lim--;
    FILE *f = open_memstream(out, on);
    if (!f) {
        r->nomem = 1;
        return;
    }
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
        copy_comp(r, &m->comps[in->called[0]]);
    } else {
        fwrite(ob, 1, (size_t)(lim - ob), f);
    }
    fputc('\n', f);
    if (fclose(f)) r->nomem = 1;
}

/* The value computed inside the stacking fusion in (instruction i of c; its computation f,
 * the value vu, its instructions marked in inner), as a fusion of its own: a copy of f with
 * only those instructions, vu its root, the parameters it reads renumbered in order, called
 * with the matching operands (renamed by map). */
static void clone_inner(rc *r, const hbmi_comp *c, uint32_t i, const hbmi_comp *f, const hbmi_instr *vu,
                        const uint8_t *inner, mapped *map, FILE *C) {
    const hbm_hlo_module *m = r->m;
    const hbmi_instr *in = &c->ins[i];
    char *t = NULL;
    size_t tn = 0;
    FILE *o = open_memstream(&t, &tn);
    if (!o) {
        r->nomem = 1;
        return;
    }
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
        r->nomem = 1;
        return;
    }
    for (uint32_t k = 0; k < f->n; k++)
        snprintf(fm[k].name, sizeof fm[k].name, "%%%.*s.recompute", (int)f->ins[k].name.n, f->ins[k].name.p);
    np = 0;
    for (uint32_t k = 0; k < f->n; k++) {
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
        clone_line(r, f, k, fm, &ln, &n);
        if (ln) fprintf(o, "%s%s", q == vu ? "  ROOT " : "", q == vu ? ln + 2 : ln);
        free(ln);
    }
    fprintf(o, "}\n\n");
    hbmi_free(fm);
    if (fclose(o)) {
        free(t);
        r->nomem = 1;
        return;
    }
    /* kept with the other copies, before the backward body */
    char *all = NULL;
    size_t an = 0;
    FILE *a2 = open_memstream(&all, &an);
    if (!a2) {
        free(t);
        r->nomem = 1;
        return;
    }
    if (r->comps_kept) fwrite(r->comps_kept, 1, r->n_kept, a2);
    fwrite(t, 1, tn, a2);
    free(t);
    if (fclose(a2)) {
        r->nomem = 1;
        return;
    }
    free(r->comps_kept);
    r->comps_kept = all;
    r->n_kept = an;
    fprintf(C, "  %s = %.*s fusion(", map[i].name, (int)(vb - va), va);
    np = 0;
    for (uint32_t p = 0; p < f->n_params && p < in->n_ops; p++)
        if (inner[f->params[p]]) fprintf(C, "%s%s", np++ ? ", " : "", map[in->ops[p]].name);
    fprintf(C, "), kind=kLoop, calls=%%%.*s.recompute\n", (int)f->name.n, f->name.p);
}

static int build(rc *r, const hbmi_jax_residual *x, const hbmi_jax_residual *all, size_t n_all) {
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
        if (wr->op != HOP_FUSION || !wr->n_called || wr->shape->prim == HBMI_PRIM_TUPLE)
            return fail(r, "it is computed inside a multi-output fusion that stacks it with other values");
        vf = &m->comps[wr->called[0]];
        const hbmi_instr *y = &vf->ins[vf->root];
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
    mapped *map = hbmi_calloc(fb->n + 1, sizeof *map);
    if (!cone || !map) {
        hbmi_free(cone);
        hbmi_free(map);
        r->nomem = 1;
        return 0;
    }
    int ok = 1;
    cone[vi] = 1;
    uint8_t *inner = vf ? hbmi_calloc(vf->n + 1, 1) : NULL; /* the value's instructions inside the fusion */
    if (vf && !inner) {
        hbmi_free(cone);
        hbmi_free(map);
        r->nomem = 1;
        return 0;
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
        int64_t eb = e >= 0 ? invariant(c, fb, ft, bt, e) : -1;
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
            ok = fail(r, "it reads the loop's whole tuple");
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
    if (!L) ok = 0, r->nomem = 1;
    for (uint32_t i = 0; ok && i < fb->n; i++) {
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
            ok = fail(r, "a loop element has no shape text");
            break;
        }
        if (e == iv_f) {
            snprintf(map[i].name, sizeof map[i].name, "%%%s.layer", pre);
        } else {
            /* loop-invariant: the forward body passes it on, the backward loop starts from the same value */
            int64_t eb = invariant(c, fb, ft, bt, e);
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
                    ok = fail(r, "the backward loop's shape text is not as expected");
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
                fprintf(L, "}\n  %s = %.*s bitcast(%s.one)\n", map[i].name, (int)(sb - sa), sa, map[i].name);
            } else {
                char why[256];
                snprintf(why, sizeof why,
                         "it needs element %lld of the forward loop (%.*s), which the backward loop does not hold",
                         (long long)e, (int)(sb - sa), sa);
                ok = fail(r, why);
                break;
            }
        }
    }
    char *head = NULL;
    size_t nh = 0;
    if (ok) { /* the layer index L-1-i, a zero, then the clones in the forward body's order */
        FILE *H = open_memstream(&head, &nh);
        if (!H) {
            ok = 0, r->nomem = 1;
        } else {
            fprintf(H, "  %%%s.i = s32[] get-tuple-element(%%%.*s), index=%lld\n", pre, bpn, bp,
                    (long long)(iv_b > x->bwd_index ? iv_b - 1 : iv_b));
            fprintf(H, "  %%%s.last = s32[] constant(%lld)\n", pre, (long long)(x->layers - 1));
            fprintf(H, "  %%%s.layer = s32[] subtract(%%%s.last, %%%s.i)\n", pre, pre, pre);
            fprintf(H, "  %%%s.zero = s32[] constant(0)\n", pre);
            if (fclose(H)) ok = 0, r->nomem = 1;
        }
    }
    if (L && fclose(L)) ok = 0, r->nomem = 1;
    char *clones = NULL;
    size_t ncl = 0;
    FILE *C = ok ? open_memstream(&clones, &ncl) : NULL;
    if (ok && !C) ok = 0, r->nomem = 1;
    for (uint32_t i = 0; ok && i < fb->n; i++) {
        if (cone[i] != 1 || (fb->ins[i].op == HOP_GTE && fb->ins[i].ops[0] == fb->params[0]) ||
            (fb->ins[i].op == HOP_COPY && fb->ins[i].n_ops))
            continue;
        if (vf && i == vi) {
            clone_inner(r, fb, i, vf, vu, inner, map, C);
            for (uint32_t k = 0; k < vf->n; k++)
                if (inner[k]) r->flops += hbmi_fit_instr_flops(m, vf, &vf->ins[k]);
            continue;
        }
        r->flops += hbmi_fit_instr_flops(m, fb, &fb->ins[i]);
        char *ln = NULL;
        size_t n = 0;
        clone_line(r, fb, i, map, &ln, &n);
        if (ln) fputs(ln, C);
        free(ln);
    }
    /* the slice as the reader reads one layer of the buffer */
    const hbmi_instr *v = &fb->ins[vi];
    const char *va, *vb;
    if (ok && shape_span(m, v, &va, &vb)) {
        const hbmi_shape *sh = &fw->shape->elems[x->index];
        const char *wa, *wb;
        if (shape_span(m, fw, &wa, &wb) && hbmi_fit_list_item(wa + 1, wb, x->index, &wa, &wb)) {
            const char *l = memchr(wa, '[', (size_t)(wb - wa)), *d = l ? l + 1 : wb;
            while (d < wb && *d >= '0' && *d <= '9') d++;
            if (l) fprintf(C, "  %%%s.one = %.*s1%.*s bitcast(%s)\n", pre, (int)(l + 1 - wa), wa, (int)(wb - d), d,
                           map[vi].name);
            else ok = fail(r, "the residual's shape text has no dimensions");
        } else {
            ok = fail(r, "the forward loop's shape text is not as expected");
        }
        (void)sh;
    }
    if (C && fclose(C)) ok = 0, r->nomem = 1;
    /* the readers in the backward body: the recomputed slice instead of the buffer */
    uint32_t first = UINT32_MAX;
    for (uint32_t i = 0; ok && i < bb->n; i++) {
        const hbmi_instr *g = &bb->ins[i];
        if (!(g->op == HOP_GTE && g->n_ops && g->ops[0] == bb->params[0] && g->gte_index == x->bwd_index)) continue;
        for (uint32_t u = 0; ok && u < g->n_users; u++) {
            const hbmi_instr *us = &bb->ins[g->users[u]];
            if (us->op == HOP_TUPLE && us->is_root) continue;
            if (us->op != HOP_FUSION && !(us->opcode.n == 13 && !memcmp(us->opcode.p, "dynamic-slice", 13))) {
                ok = fail(r, "the backward loop reads it other than by a dynamic-slice or a fusion");
                break;
            }
            if (g->users[u] < first) first = g->users[u];
            for (uint32_t j = 0; j < us->n_ops; j++) {
                if (us->ops[j] != i) continue;
                const char *na, *nb;
                char nm[200];
                snprintf(nm, sizeof nm, "%%%s.one", pre);
                if (!operand_name(m, us, j, &na, &nb)) {
                    ok = fail(r, "a reader's operand text is not as expected");
                    break;
                }
                add(r, (size_t)(na - m->text), (size_t)(nb - m->text), nm);
                if (us->op == HOP_FUSION && us->n_called) {
                    const hbmi_comp *f = &m->comps[us->called[0]];
                    if (j < f->n_params) {
                        shrink_ins(r, &f->ins[f->params[j]], -1);
                        shrink_sig(r, f, j, -1);
                    }
                }
            }
        }
    }
    if (ok && first == UINT32_MAX) ok = fail(r, "the backward body does not read it");
    if (ok && r->comps_kept) { /* before the backward body's header */
        size_t at = bb->off;
        while (at < m->len && (m->text[at] == '\n' || m->text[at] == ' ')) at++;
        while (at > 0 && m->text[at - 1] != '\n') at--;
        add(r, at, at, r->comps_kept);
    }
    if (ok) {
        size_t at = line_start(m, &bb->ins[first]);
        add(r, at, at, head);
        add(r, at, at, lines ? lines : "");
        add(r, at, at, clones ? clones : "");
    }
    free(head);
    free(lines);
    free(clones);
    hbmi_free(cone);
    hbmi_free(map);
    hbmi_free(inner);
    if (!ok) return 0;
    return drop_loop(r, c, x->loop_ins, x->index, 1, iv_f) && drop_loop(r, c, bwd, x->bwd_index, 0, iv_b);
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
    int ok = build(&r, x, all, n_all);
    if (ok && flops) *flops = r.flops * (uint64_t)(x->layers > 0 ? x->layers : 0);
    hbm_status s = HBM_OK;
    if (r.nomem) {
        s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    } else if (!ok) {
        s = HBM_ERR_UNSUPPORTED;
    } else {
        hbmi_qsort(r.p, r.n, sizeof *r.p, cmp_patch);
        FILE *f = open_memstream(text, len);
        if (!f) {
            s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
        } else {
            size_t cur = 0;
            for (size_t k = 0; k < r.n; k++) {
                if (r.p[k].a < cur) continue; /* the same span twice: once */
                fwrite(m->text + cur, 1, r.p[k].a - cur, f);
                fputs(r.p[k].s, f);
                cur = r.p[k].b;
            }
            fwrite(m->text + cur, 1, m->len - cur, f);
            if (fclose(f)) s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
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
