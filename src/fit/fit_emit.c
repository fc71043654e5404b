/* fit_emit.c - write a module with fit's edits applied, as scheduled HLO text.
 *
 * The module's own text is the printer: every line not edited is copied as it was read, so
 * what is written parses back to the same module. The edits touch the entry computation
 * only: a remat clone is the original's line under the name NAME.remat (XLA's suffix),
 * inserted before its first new user, whose operands are renamed to it; an offload is a
 * copy-start/copy-done pair to host memory (layout memory space S(5)) after the value's last
 * use before the idle span and a pair back before the next use; a donation is one more
 * input_output_alias entry in the module's header. Scheduled order is text order. Edits may
 * be in any computation run in sequence (entry, while bodies, called computations). */
#include <stdlib.h>
#include <string.h>

#include "fit/fit_internal.h"

static int name_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-' || c == '$';
}

typedef struct emitter {
    const hbm_hlo_module *m;
    const hbmi_comp *e;  /* the computation being written */
    uint32_t base;       /* global index of its instruction 0 */
    const hbmi_fit_edit *ed;
    size_t n_ed;
    int32_t *by_ins;  /* per entry instruction: the edit of its value, -1 */
    char **name1;     /* per edit: the clone, or the value back on the device */
    char **name2;     /* offload: the host copy (copy-done to host) */
    int32_t *alias_k;   /* per instruction: the remat edit whose value it aliases (bitcast, gte), -1 */
    char **alias_name;  /* per instruction: its clone's name, read by the users from the edit's at */
    uint8_t *alias_drop; /* per instruction: an alias left without users (not written) */
    FILE *f;
} emitter;

static int name_taken(const hbm_hlo_module *m, const char *nm) {
    size_t k = strlen(nm);
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c].n; i++) {
            hbmi_str s = m->comps[c].ins[i].name;
            if (s.n == k && !memcmp(s.p, nm, k)) return 1;
        }
    return 0;
}

/* NAME + suffix, made unique in m with ".1", ".2" ... A clone of a clone counts on as XLA's
 * HloInstruction::Clone names it: "x.remat" cloned again is "x.remat2", then "x.remat3". */
char *hbmi_fit_fresh_name(const hbm_hlo_module *m, hbmi_str base, const char *suffix) {
    size_t cap = base.n + strlen(suffix) + 24;
    char *s = hbmi_malloc(cap);
    if (!s) return NULL;
    size_t sl = strlen(suffix), d = base.n;
    while (d > 0 && base.p[d - 1] >= '0' && base.p[d - 1] <= '9') d--;
    if (sl > 1 && d >= sl && !memcmp(base.p + d - sl, suffix, sl) && base.n - d < 9) {
        long k = base.n > d ? strtol(base.p + d, NULL, 10) : 1; /* "x.remat" is the first */
        snprintf(s, cap, "%.*s%ld", (int)d, base.p, k + 1);
        hbmi_str nb = {.p = s, .n = (uint32_t)strlen(s)};
        char *r = hbmi_fit_fresh_name(m, nb, ""); /* made unique from that name */
        hbmi_free(s);
        return r;
    }
    snprintf(s, cap, "%.*s%s", (int)base.n, base.p, suffix);
    for (int k = 1; name_taken(m, s) && k < 1000000; k++)
        snprintf(s, cap, "%.*s%s.%d", (int)base.n, base.p, suffix, k);
    for (char *q = s; *q; q++) /* "x#0" (an element, written as an operand) names nothing by itself */
        if (*q == '#') *q = '.';
    return s;
}

/* End of instruction i's text, trailing blanks cut: where the next instruction starts, or
 * for the last one the computation's closing brace (a line "}" alone, or "}, attr=...").
 * An instruction may span lines (a backend config string with newlines). */
static const char *ins_end(const emitter *em, uint32_t i) {
    const char *s = em->m->text + em->e->ins[i].off, *end = em->m->text + em->m->len, *q;
    if (i + 1 < em->e->n) {
        q = em->m->text + em->e->ins[i + 1].off;
    } else {
        q = s;
        while (q < end) {
            while (q < end && *q != '\n') q++;
            if (q >= end) break;
            const char *l = q + 1;
            while (l < end && (*l == ' ' || *l == '\t')) l++;
            if (l < end && *l == '}' && (l + 1 >= end || l[1] == '\n' || l[1] == '\r' || l[1] == ',' || l[1] == ' '))
                break;
            q++;
        }
    }
    while (q > s && (q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\r' || q[-1] == '\n')) q--;
    return q;
}

/* The operand list "(...)" of instruction in: [*a, *b) including the parentheses. */
static void operand_span(const hbmi_instr *in, const char *lim, const char **a, const char **b) {
    const char *p = in->opcode.p + in->opcode.n;
    *a = p;
    int depth = 0;
    while (p < lim) {
        if (*p == '(' || *p == '{' || *p == '[') depth++;
        else if (*p == ')' || *p == '}' || *p == ']') {
            if (--depth == 0) {
                p++;
                break;
            }
        }
        p++;
    }
    *b = p;
}

/* The name operand o is read under at a line placed before original instruction pos (clone
 * lines: `self` is the value cloned or reloaded, clones at one place go in instruction order). */
static const char *renamed(const emitter *em, uint32_t o, uint32_t pos, int64_t self) {
    int32_t k = em->by_ins[em->base + o];
    const char *nm = k >= 0 ? em->name1[k] : NULL;
    if (k < 0 && em->alias_k[em->base + o] >= 0 && em->alias_name[em->base + o]) {
        k = em->alias_k[em->base + o];
        nm = em->alias_name[em->base + o];
    }
    if (k < 0) return NULL;
    const hbmi_fit_edit *d = &em->ed[k];
    if (d->kind != HBM_FIT_REMATERIALIZE && d->kind != HBM_FIT_OFFLOAD) return NULL;
    if (self == (int64_t)o) return NULL;
    if (d->at < pos || (d->at == pos && (self < 0 || (int64_t)o < self))) return nm;
    return NULL;
}

static int is_alias(const hbmi_instr *in) { return (in->op == HOP_BITCAST || in->op == HOP_GTE) && !in->is_root; }

/* The aliases of the value edit k clones (bitcasts and get-tuple-elements of it, of them):
 * those read at or after the edit's `at` get a clone (NAME.remat) placed after the value's
 * clone; those read only there are dropped. Sets *early when a real use is before at. */
static hbm_status mark_aliases(emitter *em, const hbmi_comp *c, uint32_t base, uint32_t a, int32_t k, int depth,
                               int *early, int *late) {
    const hbmi_instr *in = &c->ins[a];
    for (uint32_t u = 0; u < in->n_users; u++) {
        uint32_t ui = in->users[u];
        if (is_alias(&c->ins[ui]) && depth < 8) {
            int e2 = 0, l2 = 0;
            hbm_status s = mark_aliases(em, c, base, ui, k, depth + 1, &e2, &l2);
            if (s) return s;
            if (l2 && !em->alias_name[base + ui]) {
                em->alias_k[base + ui] = k;
                em->alias_name[base + ui] = hbmi_fit_fresh_name(em->m, c->ins[ui].name, ".remat");
                if (!em->alias_name[base + ui]) return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
            }
            if (!e2) em->alias_drop[base + ui] = 1;
            *early |= e2;
            *late |= l2;
        } else if (ui >= em->ed[k].at) {
            *late = 1;
        } else {
            *early = 1;
        }
    }
    return HBM_OK;
}

/* Write instruction i's line, placed before original instruction pos, named nm (NULL: its own). */
static void write_line(emitter *em, uint32_t i, uint32_t pos, const char *nm, int64_t self) {
    const hbmi_instr *in = &em->e->ins[i];
    const char *s = em->m->text + in->off, *e = ins_end(em, i), *oa, *ob;
    operand_span(in, e, &oa, &ob);
    FILE *f = em->f;
    fputs("  ", f);
    if (nm) {
        fwrite(s, 1, (size_t)(in->name.p - s), f);
        fputs(nm, f);
        s = in->name.p + in->name.n;
    }
    fwrite(s, 1, (size_t)(oa - s), f);
    const char *p = oa;
    while (p < ob) {
        if (name_char((unsigned char)*p) || *p == '%') {
            const char *t = p;
            if (*t == '%') t++;
            const char *q = t;
            while (q < ob && name_char((unsigned char)*q)) q++;
            while (q + 1 < ob && *q == '#' && q[1] >= '0' && q[1] <= '9') /* "%x#1": element 1 of x */
                for (q++; q < ob && *q >= '0' && *q <= '9';) q++;
            const char *to = NULL;
            for (uint32_t k = 0; k < in->n_ops && !to; k++) {
                hbmi_str on = em->e->ins[in->ops[k]].name;
                if (on.n == (uint32_t)(q - t) && !memcmp(on.p, t, on.n)) to = renamed(em, in->ops[k], pos, self);
            }
            if (to) {
                fwrite(p, 1, (size_t)(t - p), f);
                fputs(to, f);
            } else {
                fwrite(p, 1, (size_t)(q - p), f);
            }
            p = q;
        } else {
            fputc(*p++, f);
        }
    }
    fwrite(ob, 1, (size_t)(e - ob), f);
    fputc('\n', f);
}

static void elem_span(const char *ts, const char *te, int64_t idx, const char **s, const char **e);

/* The shape text of instruction in, [*s, *e): from its line; for an element read as "%x#N"
 * (no line of its own), element N of x's tuple shape text, its index comments skipped. */
static void shape_text(const emitter *em, const hbmi_instr *in, const char **s, const char **e) {
    if (in->synthetic) {
        const char *ts, *te;
        shape_text(em, &em->e->ins[in->ops[0]], &ts, &te);
        elem_span(ts, te, in->gte_index, s, e);
        return;
    }
    const char *p = em->m->text + in->off;
    while (*p != '=') p++;
    p++;
    while (*p == ' ') p++;
    const char *q = in->opcode.p;
    while (q > p && q[-1] == ' ') q--;
    *s = p, *e = q;
}

/* Blanks and index comments skipped in [p, e). */
const char *hbmi_fit_blank(const char *p, const char *e) {
    while (p < e) {
        if (*p == ' ') p++;
        else if (*p == '/' && p + 1 < e && p[1] == '*') {
            const char *q = p + 2;
            while (q + 1 < e && !(q[0] == '*' && q[1] == '/')) q++;
            p = q + 2;
        } else break;
    }
    return p;
}

int hbmi_fit_list_item(const char *s, const char *e, int64_t idx, const char **a, const char **b) {
    int depth = 0;
    int64_t k = 0;
    const char *p = s;
    while (p < e && k < idx) {
        if (*p == '(' || *p == '{' || *p == '[') depth++;
        else if (*p == ')' || *p == '}' || *p == ']') {
            if (!depth) return 0;
            depth--;
        } else if (*p == ',' && !depth) k++;
        p++;
    }
    if (k != idx) return 0;
    p = hbmi_fit_blank(p, e);
    const char *q = p;
    for (depth = 0; q < e; q++) {
        if (*q == '(' || *q == '{' || *q == '[') depth++;
        else if (*q == ')' || *q == '}' || *q == ']') {
            if (!depth) break;
            depth--;
        } else if (*q == ',' && !depth) break;
    }
    *a = p, *b = q;
    return 1;
}

/* Element idx of the tuple shape text [ts, te): [*s, *e), its index comment skipped; empty
 * at te when there is no such element. */
static void elem_span(const char *ts, const char *te, int64_t idx, const char **s, const char **e) {
    if (ts < te && *ts == '(') ts++;
    if (!hbmi_fit_list_item(ts, te, idx, s, e)) *s = *e = te;
}

/* The shape text of instruction in ("f32[4,8]{1,0}") and the same in host memory space. */
static void shapes(const emitter *em, const hbmi_instr *in, char *dev, char *host, size_t cap) {
    const char *s, *e;
    shape_text(em, in, &s, &e);
    size_t n = (size_t)(e - s);
    if (n >= cap / 2) n = cap / 2 - 1;
    memcpy(dev, s, n);
    dev[n] = 0;
    const char *lb = memchr(dev, '{', n);
    if (!lb) { /* no layout: XLA's default, minor to major = rank-1 ... 0 */
        size_t k = (size_t)snprintf(host, cap, "%s{", dev);
        for (uint32_t d = in->shape->n; d-- > 0 && k < cap;)
            k += (size_t)snprintf(host + k, cap - k, "%u%s", d, d ? "," : "");
        if (k < cap) snprintf(host + k, cap - k, ":S(5)}");
        return;
    }
    size_t rb = n; /* the layout's closing brace */
    while (rb > 0 && dev[rb - 1] != '}') rb--;
    rb--;
    int has_colon = memchr(lb, ':', (size_t)(dev + rb - lb)) != NULL;
    snprintf(host, cap, "%.*s%sS(5)%s", (int)rb, dev, has_colon ? "" : ":", dev + rb);
}

static void write_offload_out(emitter *em, size_t k) {
    const hbmi_fit_edit *d = &em->ed[k];
    const hbmi_instr *in = &em->e->ins[d->ins];
    char dev[1024], host[1040];
    shapes(em, in, dev, host, sizeof dev);
    /* copy-start's tuple: (destination, source, context), as memory space assignment writes it */
    fprintf(em->f, "  %%%s-start = (%s, %s, u32[]) copy-start(%%%.*s)\n", em->name2[k], host, dev, (int)in->name.n,
            in->name.p);
    fprintf(em->f, "  %%%s = %s copy-done(%%%s-start)\n", em->name2[k], host, em->name2[k]);
}

static void write_offload_back(emitter *em, size_t k) {
    const hbmi_fit_edit *d = &em->ed[k];
    const hbmi_instr *in = &em->e->ins[d->ins];
    char dev[1024], host[1040];
    shapes(em, in, dev, host, sizeof dev);
    fprintf(em->f, "  %%%s-start = (%s, %s, u32[]) copy-start(%%%s)\n", em->name1[k], dev, host, em->name2[k]);
    fprintf(em->f, "  %%%s = %s copy-done(%%%s-start)\n", em->name1[k], dev, em->name1[k]);
}

/* A parameter kept in host memory: its line with the S(5) layout. */
static void write_param_host(emitter *em, uint32_t i) {
    const hbmi_instr *in = &em->e->ins[i];
    char dev[1024], host[1040];
    shapes(em, in, dev, host, sizeof dev);
    const char *s = em->m->text + in->off, *q = s, *e = ins_end(em, i);
    while (*q != '=') q++;
    q++;
    while (*q == ' ') q++;
    fputs("  ", em->f);
    fwrite(s, 1, (size_t)(q - s), em->f);
    fprintf(em->f, "%s ", host);
    fwrite(in->opcode.p, 1, (size_t)(e - in->opcode.p), em->f);
    fputc('\n', em->f);
}

/* An array of instruction i's shape (element `out` of its tuple, -1: the shape itself) moved to
 * host memory: its line with S(5) in that layout (a scan's stacked residual, fit_jax.c). */
static void write_host_elem(emitter *em, uint32_t i, int32_t out) {
    const hbmi_instr *in = &em->e->ins[i];
    const char *s, *e;
    shape_text(em, in, &s, &e);
    const hbmi_shape *sh = in->shape;
    if (out >= 0) {
        elem_span(s, e, out, &s, &e);
        sh = (uint32_t)out < in->shape->n ? &in->shape->elems[out] : NULL;
    }
    char *line = NULL;
    size_t n = 0;
    FILE *keep = em->f, *m = open_memstream(&line, &n);
    if (!m) return;
    em->f = m;
    write_line(em, i, i, NULL, -1);
    fclose(m);
    em->f = keep;
    if (!line) return;
    /* the line is "  " + the text from the instruction's start: the element's layout there */
    size_t a = 2 + (size_t)(s - (em->m->text + in->off)), b = 2 + (size_t)(e - (em->m->text + in->off));
    const char *lb = memchr(line + a, '{', b > a ? b - a : 0);
    if (b > n || !sh) {
        fputs(line, em->f);
    } else if (!lb) { /* no layout: XLA's default, minor to major rank-1 ... 0 */
        fwrite(line, 1, b, em->f);
        fputc('{', em->f);
        for (uint32_t d = sh->n; d-- > 0;) fprintf(em->f, "%u%s", d, d ? "," : "");
        fprintf(em->f, ":S(5)}%s", line + b);
    } else {
        size_t rb = b; /* the layout's closing brace */
        while (rb > a && line[rb - 1] != '}') rb--;
        rb--;
        int colon = memchr(lb, ':', (size_t)(line + rb - lb)) != NULL;
        size_t sp = rb; /* a memory space already there (TPU's S(1)) is replaced */
        for (size_t q = (size_t)(lb - line); q + 1 < rb; q++)
            if (line[q] == 'S' && line[q + 1] == '(') sp = q;
        size_t se = sp;
        if (sp < rb)
            while (se < rb && line[se] != ')') se++;
        fwrite(line, 1, sp, em->f);
        fprintf(em->f, "%sS(5)%s", colon ? "" : ":", line + (sp < rb ? se + 1 : rb));
    }
    free(line);
}

/* The entry_computation_layout text [a, b) of parameter pn in the header, or 0. */
static int header_param(const char *t, const char *hend, int64_t pn, const char **a, const char **b) {
    static const char key[] = "entry_computation_layout={(";
    const char *q = NULL;
    for (const char *x = t; x + sizeof key - 1 <= hend && !q; x++)
        if (!memcmp(x, key, sizeof key - 1)) q = x + sizeof key - 1;
    if (!q) return 0;
    int64_t k = 0;
    int depth = 0;
    const char *start = q;
    for (; q < hend; q++) {
        if (*q == '(' || *q == '{' || *q == '[') depth++;
        else if ((*q == ')' || *q == '}' || *q == ']') && depth > 0) depth--;
        else if ((*q == ',' || *q == ')') && depth == 0) {
            if (k == pn) {
                *a = start;
                *b = q;
                return 1;
            }
            if (*q == ')') return 0;
            k++;
            start = q + 1;
            while (start < hend && *start == ' ') start++;
        }
        if (*q == ')' && depth == 0) break;
    }
    return 0;
}

/* The header with the donations added to input_output_alias and the parameters kept in host
 * memory written with S(5) in entry_computation_layout (when it names them as their lines do). */
static void write_header_alias(emitter *em, const char *t, const char *hend, const char *name_end);
static void write_header(emitter *em, const char *hend) {
    const hbm_hlo_module *m = em->m;
    const char *t = m->text, *name_end = m->name.p + m->name.n;
    size_t hl = (size_t)(hend - t), cap = hl + 1;
    char *h = NULL;
    size_t n = 0;
    const char *cur = t;
    for (int64_t pn = 0;; pn++) {
        const char *a, *b;
        if (!header_param(t, hend, pn, &a, &b)) break;
        for (size_t j = 0; j < em->n_ed; j++) {
            const hbmi_fit_edit *d = &em->ed[j];
            if (d->kind != HBM_FIT_OFFLOAD || d->from != UINT32_MAX || d->param != pn) continue;
            char dev[1024], host[1040];
            em->e = &m->comps[d->comp];
            shapes(em, &m->comps[d->comp].ins[d->ins], dev, host, sizeof dev);
            if ((size_t)(b - a) != strlen(dev) || memcmp(a, dev, (size_t)(b - a))) continue;
            size_t need = n + (size_t)(a - cur) + strlen(host) + hl + 1;
            if (need > cap || !h) {
                char *g = realloc(h, need > cap ? need : cap);
                if (!g) { /* out of memory: the header as it was */
                    free(h);
                    write_header_alias(em, t, hend, name_end);
                    return;
                }
                h = g;
                cap = need > cap ? need : cap;
            }
            memcpy(h + n, cur, (size_t)(a - cur));
            n += (size_t)(a - cur);
            memcpy(h + n, host, strlen(host));
            n += strlen(host);
            cur = b;
        }
    }
    if (!h) {
        write_header_alias(em, t, hend, name_end);
        return;
    }
    memcpy(h + n, cur, (size_t)(hend - cur));
    n += (size_t)(hend - cur);
    /* the module's name comes before entry_computation_layout: its end is where it was */
    write_header_alias(em, h, h + n, h + (name_end - t));
    free(h);
}

static void write_header_alias(emitter *em, const char *t, const char *hend, const char *name_end) {
    const char *ia = NULL;
    const char *key = "input_output_alias={";
    size_t kl = strlen(key);
    for (const char *q = t; q + kl <= hend; q++)
        if (!memcmp(q, key, kl)) {
            ia = q + kl;
            break;
        }
    char add[4096];
    size_t k = 0;
    int any = 0;
    for (size_t j = 0; j < em->n_ed && k < sizeof add - 64; j++) {
        const hbmi_fit_edit *d = &em->ed[j];
        if (d->kind != HBM_FIT_DONATE) continue;
        char out[24];
        if (d->out < 0) snprintf(out, sizeof out, "{}");
        else snprintf(out, sizeof out, "{%d}", d->out);
        k += (size_t)snprintf(add + k, sizeof add - k, "%s%s: (%lld, {}, may-alias)", any ? ", " : "", out,
                              (long long)d->param);
        any = 1;
    }
    if (!any) {
        fwrite(t, 1, (size_t)(hend - t), em->f);
        return;
    }
    if (ia) { /* before the list's closing brace */
        const char *q = ia;
        int depth = 1, has = 0;
        while (q < hend && depth) {
            if (*q == '{') depth++;
            else if (*q == '}') depth--;
            if (*q == '(') has = 1;
            if (depth) q++;
        }
        const char *c = q;
        while (c > ia && c[-1] == ' ') c--;
        fwrite(t, 1, (size_t)(c - t), em->f);
        fprintf(em->f, "%s%s%s", has ? ", " : " ", add, " ");
        fwrite(q, 1, (size_t)(hend - q), em->f);
        return;
    }
    const char *nm = name_end;
    fwrite(t, 1, (size_t)(nm - t), em->f);
    fprintf(em->f, ", input_output_alias={ %s }", add);
    fwrite(nm, 1, (size_t)(hend - nm), em->f);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Write computation c's instructions with their edits (from the start of its first
 * instruction's line to the end of its last instruction's line). */
static void write_comp(emitter *em, uint32_t c, uint32_t *order) {
    const hbmi_fit_edit *ed = em->ed;
    size_t n_ed = em->n_ed;
    em->e = &em->m->comps[c];
    uint32_t n = em->e->n;
    for (uint32_t i = 0; i < n; i++) {
        /* lines placed before i: clones and reloads, in instruction order */
        size_t no = 0;
        for (size_t k = 0; k < n_ed; k++)
            if ((ed[k].kind == HBM_FIT_REMATERIALIZE || ed[k].kind == HBM_FIT_OFFLOAD) && ed[k].comp == c &&
                ed[k].at == i)
                order[no++] = ed[k].ins;
        hbmi_qsort(order, no, sizeof *order, cmp_u32);
        for (size_t j = 0; j < no; j++) {
            int32_t k = em->by_ins[em->base + order[j]];
            if (ed[k].kind == HBM_FIT_REMATERIALIZE) {
                write_line(em, ed[k].ins, i, em->name1[k], ed[k].ins);
                for (uint32_t a = 0; a < n; a++) /* its aliases' clones, in order (an element read as
                                                     "%clone#N" needs no line) */
                    if (em->alias_k[em->base + a] == k && em->alias_name[em->base + a] && !em->e->ins[a].synthetic)
                        write_line(em, a, i, em->alias_name[em->base + a], a);
            } else {
                write_offload_back(em, (size_t)k);
            }
        }
        int32_t k = em->by_ins[em->base + i];
        if (k >= 0 && ed[k].kind == HBMI_FIT_HOST_ELEM) write_host_elem(em, i, ed[k].out);
        else if (k >= 0 && ed[k].kind == HBM_FIT_OFFLOAD && ed[k].from == UINT32_MAX) write_param_host(em, i);
        else if (!(k >= 0 && ed[k].kind == HBM_FIT_REMATERIALIZE && ed[k].drop) && !em->alias_drop[em->base + i] &&
                 !em->e->ins[i].synthetic)
            write_line(em, i, i, NULL, -1);
        for (size_t j = 0; j < n_ed; j++)
            if (ed[j].kind == HBM_FIT_OFFLOAD && ed[j].comp == c && ed[j].from == i) {
                /* a get-tuple-element scheduled later moves here, next to its tuple */
                if (ed[j].ins > i && !em->e->ins[ed[j].ins].synthetic) write_line(em, ed[j].ins, i, NULL, -1);
                write_offload_out(em, j);
            }
    }
}

static hbm_status write_impl(const hbm_hlo_module *m, const hbmi_fit_edit *ed, size_t n_ed, int all, FILE *f) {
    if (!m || !f || (n_ed && !ed)) return hbmi_error(HBM_ERR_INVALID, "fit: no module or file");
    emitter em = {.m = m, .ed = ed, .n_ed = n_ed, .f = f};
    uint32_t total = 0;
    hbm_status s = HBM_OK;
    uint32_t *base = hbmi_malloc(sizeof *base * (m->n_comps + 1));
    uint8_t *edited = hbmi_calloc(m->n_comps + 1, 1);
    if (base)
        for (uint32_t c = 0; c < m->n_comps; c++) {
            base[c] = total;
            total += m->comps[c].n;
        }
    em.by_ins = hbmi_malloc(sizeof *em.by_ins * (total + 1));
    em.name1 = hbmi_calloc(n_ed + 1, sizeof *em.name1);
    em.name2 = hbmi_calloc(n_ed + 1, sizeof *em.name2);
    uint32_t *order = hbmi_malloc(sizeof *order * (n_ed + 1));
    em.alias_k = hbmi_malloc(sizeof *em.alias_k * (total + 1));
    em.alias_name = hbmi_calloc(total + 1, sizeof *em.alias_name);
    em.alias_drop = hbmi_calloc(total + 1, 1);
    if (!base || !edited || !em.by_ins || !em.name1 || !em.name2 || !order || !em.alias_k || !em.alias_name ||
        !em.alias_drop) {
        s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
        goto out;
    }
    for (uint32_t i = 0; i < total; i++) em.by_ins[i] = em.alias_k[i] = -1;
    for (size_t k = 0; k < n_ed; k++) {
        const hbmi_fit_edit *d = &ed[k];
        if (d->kind == HBM_FIT_DONATE || d->kind == HBM_FIT_SETTING) continue;
        if (d->comp >= m->n_comps || d->ins >= m->comps[d->comp].n || d->at >= m->comps[d->comp].n ||
            em.by_ins[base[d->comp] + d->ins] >= 0) {
            s = hbmi_error(HBM_ERR_INVALID, "fit: bad edit of instruction %u", d->ins);
            goto out;
        }
        em.by_ins[base[d->comp] + d->ins] = (int32_t)k;
        edited[d->comp] = 1;
        if (d->kind == HBMI_FIT_HOST_ELEM) continue; /* its own line, rewritten */
        hbmi_str nm = m->comps[d->comp].ins[d->ins].name;
        if (d->kind == HBM_FIT_REMATERIALIZE) {
            em.name1[k] = hbmi_fit_fresh_name(m, nm, ".remat");
        } else {
            em.name1[k] = hbmi_fit_fresh_name(m, nm, ".reload");
            /* a parameter in host memory is its own host copy */
            if (d->from == UINT32_MAX) {
                em.name2[k] = hbmi_malloc(nm.n + 1);
                if (em.name2[k]) {
                    memcpy(em.name2[k], nm.p, nm.n);
                    em.name2[k][nm.n] = 0;
                }
            } else {
                em.name2[k] = hbmi_fit_fresh_name(m, nm, ".offload");
            }
            if (!em.name2[k]) em.name1[k] = NULL;
        }
        if (!em.name1[k]) {
            s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
            goto out;
        }
        if (d->kind == HBM_FIT_OFFLOAD && d->from != UINT32_MAX && d->from < d->ins)
            em.alias_drop[base[d->comp] + d->ins] = 1; /* written after `from` instead */
        if (d->kind == HBM_FIT_REMATERIALIZE) {
            int early = 0, late = 0;
            em.e = &m->comps[d->comp];
            if ((s = mark_aliases(&em, &m->comps[d->comp], base[d->comp], d->ins, (int32_t)k, 0, &early, &late)))
                goto out;
        }
    }
    /* an element of a clone read as "%x#N" is "%CLONE#N": the name of its tuple's clone (in
     * instruction order, a tuple's before its elements') and the index */
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c].n; i++) {
            const hbmi_instr *in = &m->comps[c].ins[i];
            uint32_t g = base[c] + i;
            if (!in->synthetic || !em.alias_name[g]) continue;
            uint32_t o = base[c] + in->ops[0];
            const char *up = em.alias_name[o] ? em.alias_name[o] : em.by_ins[o] >= 0 ? em.name1[em.by_ins[o]] : NULL;
            if (!up) continue;
            size_t cap = strlen(up) + 24;
            char *nm = hbmi_malloc(cap);
            if (!nm) {
                s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
                goto out;
            }
            snprintf(nm, cap, "%s#%lld", up, (long long)in->gte_index);
            hbmi_free(em.alias_name[g]);
            em.alias_name[g] = nm;
        }
    /* the header: the first line */
    const char *end = m->text + m->len;
    const char *cur = memchr(m->text, '\n', m->len);
    if (!cur) cur = end;
    write_header(&em, cur);
    for (uint32_t c = 0; c < m->n_comps; c++) { /* computations are in text order */
        if (!edited[c] && !all) continue;
        em.e = &m->comps[c];
        em.base = base[c];
        const char *first = m->text + em.e->ins[0].off;
        while (first > cur && first[-1] != '\n') first--;
        if (first < cur) {
            s = hbmi_error(HBM_ERR_UNSUPPORTED, "fit: computation %u starts on the header line", c);
            goto out;
        }
        fwrite(cur, 1, (size_t)(first - cur), f);
        write_comp(&em, c, order);
        cur = ins_end(&em, em.e->n - 1);
        while (cur < end && *cur != '\n') cur++;
        if (cur < end) cur++;
    }
    fwrite(cur, 1, (size_t)(end - cur), f);
    if (ferror(f)) s = hbmi_error(HBM_ERR_IO, "fit: cannot write the module");
out:
    for (size_t k = 0; em.name1 && em.name2 && k < n_ed; k++) {
        hbmi_free(em.name1[k]);
        hbmi_free(em.name2[k]);
    }
    for (uint32_t i = 0; em.alias_name && i < total; i++) hbmi_free(em.alias_name[i]);
    hbmi_free(em.alias_name);
    hbmi_free(em.alias_k);
    hbmi_free(em.alias_drop);
    hbmi_free(em.name1);
    hbmi_free(em.name2);
    hbmi_free(em.by_ins);
    hbmi_free(order);
    hbmi_free(base);
    hbmi_free(edited);
    return s;
}

hbm_status hbmi_fit_write(const hbm_hlo_module *m, const hbmi_fit_edit *e, size_t n, FILE *f) {
    return write_impl(m, e, n, 0, f);
}

hbm_status hbmi_fit_write_all(const hbm_hlo_module *m, FILE *f) { return write_impl(m, NULL, 0, 1, f); }

hbm_status hbmi_fit_write_mem(const hbm_hlo_module *m, const hbmi_fit_edit *e, size_t n, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    FILE *f = open_memstream(text, len);
    if (!f) return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    hbm_status s = hbmi_fit_write(m, e, n, f);
    if (fclose(f) && !s) s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    if (s) {
        free(*text);
        *text = NULL;
    }
    return s;
}
