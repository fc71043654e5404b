/* xla_compare.c - XLA's own buffer assignment (read from a protobuf input: the module's
 * BufferAssignmentProto) beside hbm's plan of the same module: XLA's figures labelled as
 * XLA's, then one line saying whether hbm's own plan reaches the same, and where not, which
 * figures and which buffers differ (defined at the same instruction and shape index). */
#include <string.h>

#include "hbm/proto.h"
#include "hbm/size.h"
#include "plan/plan_internal.h"

static const char *kind_str(hbmi_xla_cat k) {
    switch (k) {
    case HBMI_XLA_PARAMETER: return "parameter";
    case HBMI_XLA_OUTPUT: return "output";
    case HBMI_XLA_CONSTANT: return "constant";
    case HBMI_XLA_THREAD_LOCAL: return "thread-local";
    case HBMI_XLA_TEMP: return "temp";
    default: return "none";
    }
}

/* the kind of allocation hbm put value v in, as XLA's would be named */
static hbmi_xla_cat value_kind(const hbm_plan *p, uint32_t v) {
    uint32_t a = p->value_alloc ? p->value_alloc[v] : UINT32_MAX;
    if (a == UINT32_MAX || a >= p->n_allocs) return HBMI_XLA_NONE;
    const hbmi_alloc *al = &p->allocs[a];
    if (al->color) return HBMI_XLA_NONE;
    return al->param_no >= 0 ? HBMI_XLA_PARAMETER
           : al->live_out    ? HBMI_XLA_OUTPUT
           : al->constant    ? HBMI_XLA_CONSTANT
           : al->thread_local ? HBMI_XLA_THREAD_LOCAL
                              : HBMI_XLA_TEMP;
}

/* hbm's value defined where XLA's logical buffer b is, or UINT32_MAX */
static uint32_t value_at(const hbm_plan *p, const hbmi_xla_lbuf *b) {
    const hbmi_df *df = p->df;
    const hbm_hlo_module *m = p->m;
    if (!df || b->comp < 0 || (uint64_t)b->comp >= m->n_comps || b->instr < 0 || (uint64_t)b->instr >= m->comps[b->comp].n)
        return UINT32_MAX;
    const hbmi_instr *in = &m->comps[b->comp].ins[b->instr];
    if (!in->analyzed || b->node >= in->shape->nodes) return UINT32_MAX;
    uint32_t gid = df->comp_base[b->comp] + (uint32_t)b->instr;
    const hbmi_vset *vs = hbmi_df_set(df, gid, b->node);
    for (uint32_t k = 0; k < vs->n; k++) {
        uint32_t v = hbmi_vset_at(vs, k);
        if (df->values[v].gid == gid && df->values[v].node == b->node) return v;
    }
    return UINT32_MAX;
}

typedef struct cmp_fig { const char *key, *word; uint64_t xla, hbm; } cmp_fig;

static size_t figures(const hbm_plan *p, const hbm_xla_stats *x, cmp_fig *out) {
    const hbm_plan_stats *s = &p->stats;
    const cmp_fig all[] = {
        {"argument_size_in_bytes", "arguments", x->argument_size_in_bytes, s->argument_size_in_bytes},
        {"output_size_in_bytes", "outputs", x->output_size_in_bytes, s->output_size_in_bytes},
        {"alias_size_in_bytes", "alias", x->alias_size_in_bytes, s->alias_size_in_bytes},
        {"temp_size_in_bytes", "temp", x->temp_size_in_bytes, s->temp_size_in_bytes},
        {"constant_size_in_bytes", "constants", x->constant_size_in_bytes, s->constant_size_in_bytes},
        {"allocations", "allocations", x->n_allocations, s->n_allocations},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i].xla != all[i].hbm) out[n++] = all[i];
    return n;
}

/* Buffers whose size or kind differ, XLA's first; calls fn for each, returns the count. */
typedef void (*diff_fn)(void *ctx, const hbm_plan *p, const hbmi_xla_lbuf *b, uint32_t v, size_t i);
static size_t buffer_diffs(const hbm_plan *p, diff_fn fn, void *ctx) {
    const hbmi_xla *x = p->m->xla;
    const hbmi_df *df = p->df;
    uint8_t *seen = df ? hbmi_calloc(df->n_values ? df->n_values : 1, 1) : NULL;
    size_t n = 0;
    for (uint32_t i = 0; i < x->n_lbufs; i++) {
        const hbmi_xla_lbuf *b = &x->lbufs[i];
        /* other memory spaces; thread-local scalars */
        if (b->cat == HBMI_XLA_NONE || b->cat == HBMI_XLA_THREAD_LOCAL) continue;
        uint32_t v = value_at(p, b);
        if (v != UINT32_MAX && seen) seen[v] = 1;
        if (v != UINT32_MAX && df->values[v].size == b->size && value_kind(p, v) == b->cat) continue;
        if (fn) fn(ctx, p, b, v, n);
        n++;
    }
    for (uint32_t v = 0; seen && v < df->n_values; v++) { /* values XLA has no buffer for */
        char k = value_kind(p, v);
        if (seen[v] || !k || k == 'l' || !df->values[v].size || df->values[v].is_tuple) continue;
        if (fn) fn(ctx, p, NULL, v, n);
        n++;
    }
    hbmi_free(seen);
    return n;
}

static void vname(const hbm_plan *p, uint32_t v, char *buf, size_t cap) {
    const hbmi_value *val = &p->df->values[v];
    const hbmi_instr *in = hbmi_df_instr(p->df, val->gid);
    snprintf(buf, cap, "%.*s", (int)in->name.n, in->name.p);
}

static void lname(const hbm_plan *p, const hbmi_xla_lbuf *b, char *buf, size_t cap) {
    if (b->comp >= 0) {
        const hbmi_instr *in = &p->m->comps[b->comp].ins[b->instr];
        snprintf(buf, cap, "%.*s%s", (int)in->name.n, in->name.p, strcmp(b->index, "{}") ? b->index : "");
    } else {
        snprintf(buf, cap, "buffer %lld", (long long)b->id);
    }
}

typedef struct tctx { FILE *f; char first[160]; } tctx;
static void text_first(void *ctx, const hbm_plan *p, const hbmi_xla_lbuf *b, uint32_t v, size_t i) {
    tctx *t = ctx;
    if (i) return;
    char nm[96], a[32], c[32];
    if (b) lname(p, b, nm, sizeof nm);
    else vname(p, v, nm, sizeof nm);
    if (b && v != UINT32_MAX)
        snprintf(t->first, sizeof t->first, "%s is %s %s in XLA's, %s %s in hbm's", nm, hbm_size_human(b->size, a),
                 kind_str(b->cat), hbm_size_human(p->df->values[v].size, c), kind_str(value_kind(p, v)));
    else if (b)
        snprintf(t->first, sizeof t->first, "%s (%s %s) has no buffer of its own in hbm's", nm,
                 hbm_size_human(b->size, a), kind_str(b->cat));
    else
        snprintf(t->first, sizeof t->first, "%s (%s %s) has no buffer of its own in XLA's", nm,
                 hbm_size_human(p->df->values[v].size, a), kind_str(value_kind(p, v)));
}

hbm_status hbm_plan_xla_text(const hbm_plan *p, FILE *f, size_t top) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_xla_text: NULL argument");
    const hbmi_xla *x = p->m->xla;
    if (!x) return hbmi_error(HBM_ERR_NOT_AVAILABLE, "%s: no XLA buffer assignment in this input", p->m->path);
    const hbm_xla_stats *s = &x->st;
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(f, "XLA's own buffer assignment (the file's BufferAssignmentProto):\n");
    fprintf(f, "  arguments %s, outputs %s, alias %s, temp %s, constants %s; %zu allocations\n",
            hbm_size_human(s->argument_size_in_bytes, a), hbm_size_human(s->output_size_in_bytes, b),
            hbm_size_human(s->alias_size_in_bytes, c), hbm_size_human(s->temp_size_in_bytes, d),
            hbm_size_human(s->constant_size_in_bytes, e), s->n_allocations);
    if (s->has_heap_trace) {
        fprintf(f, "  XLA's heap trace peaks at %s live, %zu buffer%s%s\n", hbm_size_human(s->heap_peak_bytes, a),
                s->n_heap_peak_buffers, s->n_heap_peak_buffers == 1 ? "" : "s", x->n_peak && top ? ":" : "");
        for (uint32_t i = 0; i < x->n_peak && i < top && i < 3; i++) {
            const hbmi_xla_lbuf *lb = &x->lbufs[x->peak[i]];
            char nm[96];
            lname(p, lb, nm, sizeof nm);
            fprintf(f, "    %10s  %s\n", hbm_size_human(lb->size, a), nm);
        }
        if (x->n_peak > 3 && top > 3) fprintf(f, "    ... and %u smaller\n", x->n_peak - 3);
    } else {
        fprintf(f, "  (no heap simulator trace of device memory in the file)\n");
    }
    cmp_fig fig[8];
    size_t nf = figures(p, s, fig);
    tctx t = {f, ""};
    size_t nb = buffer_diffs(p, text_first, &t);
    fprintf(f, "hbm's own plan:");
    if (!nf && !nb) fprintf(f, " the same figures and the same buffers\n");
    for (size_t i = 0; i < nf; i++) {
        uint64_t diff = fig[i].hbm > fig[i].xla ? fig[i].hbm - fig[i].xla : fig[i].xla - fig[i].hbm;
        if (!strcmp(fig[i].key, "allocations"))
            fprintf(f, "%s %llu allocations, XLA %llu", i ? ";" : "", (unsigned long long)fig[i].hbm,
                    (unsigned long long)fig[i].xla);
        else
            fprintf(f, "%s %s %s %s than XLA's", i ? ";" : "", fig[i].word, hbm_size_human(diff, b),
                    fig[i].hbm > fig[i].xla ? "more" : "less");
    }
    if (nf && !nb) fprintf(f, "; the same buffers (the temp heap is packed differently)\n");
    else if (nb) fprintf(f, "%s%zu buffer%s differ%s (--json lists them)\n  %s\n", nf ? "; " : " the same figures; ",
                         nb, nb == 1 ? "" : "s", nb == 1 ? "s" : "", t.first);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "write error") : HBM_OK;
}

static void jstr(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void json_diff(void *ctx, const hbm_plan *p, const hbmi_xla_lbuf *b, uint32_t v, size_t i) {
    FILE *f = ctx;
    char nm[256];
    if (b && b->comp >= 0) {
        const hbmi_instr *in = &p->m->comps[b->comp].ins[b->instr];
        snprintf(nm, sizeof nm, "%.*s", (int)in->name.n, in->name.p);
    } else if (!b) {
        vname(p, v, nm, sizeof nm);
    } else {
        nm[0] = 0;
    }
    fprintf(f, "%s{\"instruction\": ", i ? ", " : "");
    jstr(f, nm);
    fprintf(f, ", \"index\": ");
    if (b) {
        jstr(f, b->index);
    } else { /* the value's shape node as an index: its node number */
        char ix[32];
        snprintf(ix, sizeof ix, "node %u", p->df->values[v].node);
        jstr(f, p->df->values[v].node ? ix : "{}");
    }
    fprintf(f, ", \"xla_bytes\": %llu, \"xla_kind\": \"%s\", \"hbm_bytes\": %llu, \"hbm_kind\": \"%s\"}",
            (unsigned long long)(b ? b->size : 0), b ? kind_str(b->cat) : "none",
            (unsigned long long)(v != UINT32_MAX ? p->df->values[v].size : 0),
            v != UINT32_MAX ? kind_str(value_kind(p, v)) : "none");
}

hbm_status hbm_plan_xla_json(const hbm_plan *p, FILE *f, size_t top) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_xla_json: NULL argument");
    const hbmi_xla *x = p->m->xla;
    if (!x) return hbmi_error(HBM_ERR_NOT_AVAILABLE, "%s: no XLA buffer assignment in this input", p->m->path);
    const hbm_xla_stats *s = &x->st;
    fprintf(f, "\"xla\": {\"argument_size_in_bytes\": %llu, \"output_size_in_bytes\": %llu, "
               "\"alias_size_in_bytes\": %llu, \"temp_size_in_bytes\": %llu, \"constant_size_in_bytes\": %llu, "
               "\"thread_local_size_in_bytes\": %llu, \"total_allocation_bytes\": %llu, \"other_memory_bytes\": %llu, "
               "\"allocations\": %zu, \"peak_bytes\": %llu, \"heap_trace\": %s, \"heap_peak_bytes\": %llu, "
               "\"heap_peak_buffers\": [",
            (unsigned long long)s->argument_size_in_bytes, (unsigned long long)s->output_size_in_bytes,
            (unsigned long long)s->alias_size_in_bytes, (unsigned long long)s->temp_size_in_bytes,
            (unsigned long long)s->constant_size_in_bytes, (unsigned long long)s->thread_local_size_in_bytes,
            (unsigned long long)s->total_allocation_bytes, (unsigned long long)s->other_memory_bytes, s->n_allocations,
            (unsigned long long)s->peak_bytes, s->has_heap_trace ? "true" : "false",
            (unsigned long long)s->heap_peak_bytes);
    for (uint32_t i = 0; i < x->n_peak && i < top; i++) {
        const hbmi_xla_lbuf *b = &x->lbufs[x->peak[i]];
        char nm[256] = "";
        if (b->comp >= 0) {
            const hbmi_instr *in = &p->m->comps[b->comp].ins[b->instr];
            snprintf(nm, sizeof nm, "%.*s", (int)in->name.n, in->name.p);
        }
        fprintf(f, "%s{\"instruction\": ", i ? ", " : "");
        jstr(f, nm);
        fprintf(f, ", \"index\": ");
        jstr(f, b->index);
        fprintf(f, ", \"bytes\": %llu, \"allocation\": %lld, \"offset\": %lld}", (unsigned long long)b->size,
                (long long)b->alloc, (long long)b->offset);
    }
    cmp_fig fig[8];
    size_t nf = figures(p, s, fig);
    size_t nb = buffer_diffs(p, NULL, NULL);
    fprintf(f, "]}, \"comparison\": {\"same\": %s, \"hbm_heap_peak_bytes\": %llu, \"figures\": [", !nf && !nb ? "true" : "false",
            (unsigned long long)p->temp_heap_live);
    for (size_t i = 0; i < nf; i++)
        fprintf(f, "%s{\"key\": \"%s\", \"xla\": %llu, \"hbm\": %llu}", i ? ", " : "", fig[i].key,
                (unsigned long long)fig[i].xla, (unsigned long long)fig[i].hbm);
    fprintf(f, "], \"buffers\": [");
    buffer_diffs(p, json_diff, f);
    fprintf(f, "]}");
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "write error") : HBM_OK;
}

int hbm_plan_xla_same(const hbm_plan *p) {
    if (!p || !p->m->xla) return -1;
    cmp_fig fig[8];
    return !figures(p, &p->m->xla->st, fig) && !buffer_diffs(p, NULL, NULL);
}
