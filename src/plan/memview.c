/* memview.c - XProf's Memory Viewer of a plan, offline: the model (one heap per memory
 * space over the schedule) and its terminal and JSON forms; the HTML page is
 * src/report/html/memory_viewer.html filled with the JSON (plan_html.c).
 *
 * Definitions follow openxla/xprof xprof/convert/hlo_proto_to_memory_visualization_utils.cc
 * and frontend/app/components/memory_viewer/memory_usage/memory_usage.ts:
 *  - "indefinite" allocations (entry parameters, constants, maybe-live-out) hold their
 *    bytes for the whole program; the heap size at a point is their total plus the temp
 *    buffers live there; the unpadded heap size adds the same indefinite total to the
 *    temp buffers' unpadded sizes;
 *  - peak heap = the largest heap size (the first point reaching it); padding overhead =
 *    peak heap - unpadded heap at that point; HLO temp without fragmentation = peak heap -
 *    indefinite; with fragmentation = total allocation - indefinite; fragmentation =
 *    (total allocation - peak heap) / (total allocation - indefinite);
 *  - the buffers at the peak: each indefinite allocation by its largest value, then the temp
 *    buffers live at the peak in program order; those under 16 KiB grouped as "small".
 * hbm's x-axis is the schedule step (XProf's is the heap simulator's events): the instruction
 * at each step names the point. Thread-local allocations (reducer scalars) are left out, as
 * from hbm plan's device figures. */
#include <inttypes.h>
#include <string.h>

#include "hbm/size.h"
#include "plan/memview.h"

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

void hbmi_memview_free(hbmi_memview *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n_spaces; i++) {
        hbmi_free(v->spaces[i].heap);
        hbmi_free(v->spaces[i].unpadded);
        hbmi_free(v->spaces[i].objs);
    }
    hbmi_free(v->spaces);
    memset(v, 0, sizeof *v);
}

/* XProf's program order at the peak: indefinite allocations first, then temp buffers by
 * the step that defines them */
static _Thread_local const hbmi_span *g_spans;
static int cmp_program_order(const void *x, const void *y) {
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    const hbmi_span *a = &g_spans[i], *b = &g_spans[j];
    if (a->indefinite != b->indefinite) return a->indefinite ? -1 : 1;
    if (!a->indefinite && a->s != b->s) return a->s < b->s ? -1 : 1;
    return i < j ? -1 : i > j;
}

static const hbmi_alloc *span_alloc(const hbm_plan *p, const hbmi_span *s) { return &p->allocs[s->alloc]; }

static hbm_status build_space(const hbm_plan *p, int64_t color, uint64_t small, hbmi_memview_space *sp) {
    memset(sp, 0, sizeof *sp);
    sp->color = color;
    size_t T = p->df->n_flat ? p->df->n_flat : 1;
    sp->steps = T;
    for (uint32_t ai = 0; ai < p->n_allocs; ai++) {
        const hbmi_alloc *a = &p->allocs[ai];
        if (a->color != color || a->thread_local) continue;
        sp->total += a->size;
        if (a->param_no >= 0) sp->arguments += a->size;
        if (a->param_no >= 0 || a->constant || a->live_out) sp->indefinite += a->size;
    }
    int64_t *d = hbmi_calloc(T + 1, sizeof *d), *du = hbmi_calloc(T + 1, sizeof *du);
    sp->heap = hbmi_malloc(sizeof *sp->heap * T);
    sp->unpadded = hbmi_malloc(sizeof *sp->unpadded * T);
    if (!d || !du || !sp->heap || !sp->unpadded) {
        hbmi_free(d);
        hbmi_free(du);
        return hbmi_error(HBM_ERR_NOMEM, "memory viewer: out of host memory");
    }
    for (size_t i = 0; i < p->n_spans; i++) {
        const hbmi_span *s = &p->spans[i];
        if (s->color != color || s->indefinite) continue;
        d[s->s] += (int64_t)s->size;
        d[s->e] -= (int64_t)s->size;
        du[s->s] += (int64_t)s->unpadded;
        du[s->e] -= (int64_t)s->unpadded;
    }
    int64_t cur = 0, curu = 0;
    sp->peak_at = 0;
    for (size_t t = 0; t < T; t++) {
        cur += d[t];
        curu += du[t];
        sp->heap[t] = sp->indefinite + (uint64_t)cur;
        sp->unpadded[t] = sp->indefinite + (uint64_t)curu;
        if (sp->heap[t] > sp->heap[sp->peak_at]) sp->peak_at = (int64_t)t;
    }
    hbmi_free(d);
    hbmi_free(du);
    sp->peak = sp->heap[sp->peak_at];
    sp->peak_unpadded = sp->unpadded[sp->peak_at];
    /* the buffers at the peak: indefinite first (by allocation), then temps in program order */
    size_t n = 0;
    for (size_t i = 0; i < p->n_spans; i++) {
        const hbmi_span *s = &p->spans[i];
        if (s->color == color && s->s <= sp->peak_at && sp->peak_at < s->e) n++;
    }
    size_t *idx = hbmi_malloc(sizeof *idx * (n + 1));
    sp->objs = hbmi_malloc(sizeof *sp->objs * (n + 1));
    if (!idx || !sp->objs) {
        hbmi_free(idx);
        return hbmi_error(HBM_ERR_NOMEM, "memory viewer: out of host memory");
    }
    n = 0;
    for (size_t i = 0; i < p->n_spans; i++) {
        const hbmi_span *s = &p->spans[i];
        if (s->color == color && s->s <= sp->peak_at && sp->peak_at < s->e) idx[n++] = i;
    }
    g_spans = p->spans;
    hbmi_qsort(idx, n, sizeof *idx, cmp_program_order);
    sp->n_objs = 0;
    for (size_t k = 0; k < n; k++) {
        const hbmi_span *s = &p->spans[idx[k]];
        if (s->size < small) {
            sp->small_bytes += s->size;
            sp->n_small++;
        } else {
            sp->objs[sp->n_objs++] = idx[k];
        }
    }
    hbmi_free(idx);
    return HBM_OK;
}

hbm_status hbmi_memview_build(const hbm_plan *p, uint64_t small, hbmi_memview *v) {
    memset(v, 0, sizeof *v);
    v->small = small ? small : 16 * 1024;
    /* the memory spaces that hold an allocation, device (0) first */
    int64_t colors[64];
    size_t nc = 0;
    for (uint32_t ai = 0; ai < p->n_allocs; ai++) {
        const hbmi_alloc *a = &p->allocs[ai];
        if (a->thread_local) continue;
        size_t k = 0;
        while (k < nc && colors[k] != a->color) k++;
        if (k == nc && nc < 64) colors[nc++] = a->color;
    }
    if (!nc) colors[nc++] = 0;
    hbmi_qsort(colors, nc, sizeof *colors, cmp_i64);
    v->spaces = hbmi_calloc(nc, sizeof *v->spaces);
    if (!v->spaces) return hbmi_error(HBM_ERR_NOMEM, "memory viewer: out of host memory");
    for (size_t i = 0; i < nc; i++) {
        hbm_status s = build_space(p, colors[i], v->small, &v->spaces[i]);
        v->n_spaces = i + 1;
        if (s) {
            hbmi_memview_free(v);
            return s;
        }
    }
    return HBM_OK;
}

/* --- what a buffer is ----------------------------------------------------------------------- */
const char *hbmi_memview_alloc_type(const hbm_plan *p, const hbmi_span *s) {
    const hbmi_alloc *a = span_alloc(p, s);
    /* XProf's BufferAllocationStruct::category() order */
    return a->param_no >= 0 ? "Parameter" : a->live_out ? "Output" : a->thread_local ? "Thread-local"
                              : a->constant ? "Constant" : "Temporary";
}

const char *hbmi_memview_space_name(int64_t color, char buf[48]) {
    if (color == 0) snprintf(buf, 48, "device memory S(0)");
    else if (color == HBMI_HOST_SPACE) snprintf(buf, 48, "host memory S(5)");
    else if (color == HBMI_TPU_UNCOUNTED_SPACE) snprintf(buf, 48, "TPU tables and scalars (not HBM)");
    else snprintf(buf, 48, "memory space S(%" PRId64 ")", color);
    return buf;
}

/* ",0,1" for node k of shape s (pre-order), as XProf's GetInstructionNameWithShapeIndex */
static void shape_index(const hbmi_shape *s, uint32_t k, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    while (k && s && s->prim == HBMI_PRIM_TUPLE) {
        uint32_t i = 0;
        for (; i < s->n; i++) {
            uint32_t c = hbmi_shape_child(s, i);
            if (k >= c && k < c + s->elems[i].nodes) {
                int w = snprintf(buf + n, cap - n, ",%u", i);
                if (w > 0 && (size_t)w < cap - n) n += (size_t)w;
                k -= c;
                s = &s->elems[i];
                break;
            }
        }
        if (i == s->n) break;
    }
}

void hbmi_memview_describe(const hbm_plan *p, const hbmi_span *s, hbmi_memview_buf *o) {
    memset(o, 0, sizeof *o);
    if (s->value == UINT32_MAX) return;
    const hbmi_df *df = p->df;
    const hbmi_value *val = &df->values[s->value];
    const hbmi_instr *in = hbmi_df_instr(df, val->gid);
    char idx[64];
    shape_index(in->shape, val->node, idx, sizeof idx);
    if (idx[0]) snprintf(o->instruction, sizeof o->instruction, "%.*s{%s}", (int)in->name.n, in->name.p, idx + 1);
    else snprintf(o->instruction, sizeof o->instruction, "%.*s", (int)in->name.n, in->name.p);
    hbmi_plan_unescape(o->op_name, sizeof o->op_name, in->meta_op_name.p ? in->meta_op_name.p : "", in->meta_op_name.n);
    hbmi_plan_unescape(o->source_file, sizeof o->source_file, in->meta_source_file.p ? in->meta_source_file.p : "",
                       in->meta_source_file.n);
    o->source_line = in->meta_source_line;
    hbmi_plan_shape_text(df->m, in, val->node, o->shape, sizeof o->shape);
    if (val->wrapped) hbmi_plan_wrapped_label(df->m, in, o->opcode, sizeof o->opcode);
    else hbmi_plan_label(in, o->opcode, sizeof o->opcode);
}

/* --- terminal --------------------------------------------------------------------------------- */
static const char *hs(uint64_t b, char buf[32]) { return hbm_size_human(b, buf); }

/* Printable text of s (n bytes) into out: control characters as '?', cut to width. */
static const char *clean(char *out, size_t cap, const char *s, size_t n, int width, int middle) {
    char tmp[1024];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < sizeof tmp; i++) tmp[k++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    tmp[k] = 0;
    return hbmi_text_fit(out, cap, tmp, width, middle);
}

static void chart(FILE *f, const hbmi_memview_space *sp, const hbm_plan *p, int width, int ascii) {
    enum { H = 8 };
    size_t T = sp->steps;
    /* 0: no limit, a column per step (up to the columns held here) */
    int cols = width == 0 ? (T < 1000 ? (int)T : 1000) : width < 8 ? 8 : width;
    if ((size_t)cols > T) cols = (int)T;
    uint64_t top = sp->peak ? sp->peak : 1;
    /* each column: the maximum heap (and unpadded heap) over its steps */
    uint64_t colv[1024], colu[1024];
    if (cols > 1024) cols = 1024;
    int peak_col = 0;
    for (int c = 0; c < cols; c++) {
        size_t a = (size_t)c * T / (size_t)cols, b = (size_t)(c + 1) * T / (size_t)cols;
        if (b <= a) b = a + 1;
        colv[c] = colu[c] = 0;
        for (size_t t = a; t < b && t < T; t++) {
            if (sp->heap[t] > colv[c]) colv[c] = sp->heap[t];
            if (sp->unpadded[t] > colu[c]) colu[c] = sp->unpadded[t];
            if ((int64_t)t == sp->peak_at) peak_col = c;
        }
    }
    static const char *const eighths[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    static const char asc[] = " .:-=+*##";
    char a[32];
    for (int r = H - 1; r >= 0; r--) {
        if (r == H - 1) fprintf(f, "  %10s |", hs(sp->peak, a));
        else if (r == 0) fprintf(f, "  %10s |", "0");
        else fprintf(f, "  %10s |", "");
        for (int c = 0; c < cols; c++) {
            /* eighths of this row filled by the heap size */
            double lvl = (double)colv[c] / (double)top * H - r;
            int e = lvl >= 1 ? 8 : lvl <= 0 ? 0 : (int)(lvl * 8 + 0.5);
            if (ascii) fputc(asc[e], f);
            else fputs(eighths[e], f);
        }
        fputc('\n', f);
    }
    fprintf(f, "  %10s +", "");
    for (int c = 0; c < cols; c++) fputc(c == peak_col ? '^' : '-', f);
    fputc('\n', f);
    char name[128], cut[128];
    hbmi_str nm = p->df->n_flat ? hbmi_df_instr(p->df, p->df->flat[sp->peak_at])->name : (hbmi_str){"", 0};
    clean(name, sizeof name, nm.p, nm.n, 60, 1);
    int pad = peak_col > 40 ? peak_col - 40 : peak_col;
    (void)cut;
    fprintf(f, "  %10s  %*s^ peak: step %" PRId64 " %s\n", "", pad > 0 && peak_col <= 40 ? pad : 0, "", sp->peak_at, name);
    fprintf(f, "  %10s  x: program order, steps 0..%zu (not time); y: heap size (padded)\n", "", T ? T - 1 : 0);
}

static void obj_line(FILE *f, const hbm_plan *p, const hbmi_span *s, size_t rank) {
    hbmi_memview_buf d;
    hbmi_memview_describe(p, s, &d);
    char a[32], b[32], c[32], nm[64], sh[64];
    clean(nm, sizeof nm, d.instruction, strlen(d.instruction), 26, 1);
    hbmi_text_fit(sh, sizeof sh, d.shape, 22, 0);
    fprintf(f, "  %3zu %10s %10s %9s  %-10s %-26s %s\n", rank, hs(s->size, a), hs(s->unpadded, b),
            hs(s->size - s->unpadded, c), hbmi_memview_alloc_type(p, s), nm, sh);
}

typedef struct sort_ctx {
    const hbm_plan *p;
    int by; /* 1 size, 2 padding */
} sort_ctx;
static _Thread_local sort_ctx g_sort;
static int cmp_obj(const void *x, const void *y) {
    const hbmi_span *a = &g_sort.p->spans[*(const size_t *)x], *b = &g_sort.p->spans[*(const size_t *)y];
    uint64_t ka = g_sort.by == 1 ? a->size : a->size - a->unpadded, kb = g_sort.by == 1 ? b->size : b->size - b->unpadded;
    if (ka != kb) return ka > kb ? -1 : 1;
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    return i < j ? -1 : i > j;
}

hbm_status hbmi_memview_sorted(const hbm_plan *p, const hbmi_memview_space *sp, int by, size_t **out) {
    size_t *o = hbmi_malloc(sizeof *o * (sp->n_objs + 1));
    if (!o) return hbmi_error(HBM_ERR_NOMEM, "memory viewer: out of host memory");
    memcpy(o, sp->objs, sizeof *o * sp->n_objs);
    if (by) {
        g_sort = (sort_ctx){p, by};
        hbmi_qsort(o, sp->n_objs, sizeof *o, cmp_obj);
    }
    *out = o;
    return HBM_OK;
}

static hbm_status text_space(const hbm_plan *p, const hbmi_memview *v, const hbmi_memview_space *sp,
                             const hbm_plan_view_options *o, FILE *f) {
    char a[32], b[32], c[32], nm[48];
    uint64_t temp_nofrag = sp->peak - sp->indefinite, temp_frag = sp->total - sp->indefinite;
    double frag = temp_frag ? (double)(sp->total - sp->peak) / (double)temp_frag : 0.0;
    fprintf(f, "\nMemory space: %s\n", hbmi_memview_space_name(sp->color, nm));
    fprintf(f, "  Peak memory allocation   %10s with fragmentation, %s without\n", hs(sp->total, a), hs(sp->peak, b));
    fprintf(f, "  Padding overhead         %10s (peak heap %s, unpadded %s)\n", hs(sp->peak - sp->peak_unpadded, a),
            hs(sp->peak, b), hs(sp->peak_unpadded, c));
    fprintf(f, "  Total argument size      %10s\n", hs(sp->arguments, a));
    fprintf(f, "  HLO temporaries          %10s with fragmentation, %s without\n", hs(temp_frag, a), hs(temp_nofrag, b));
    fprintf(f, "  Fragmentation            %9.1f%% (%s)\n", frag * 100.0, hs(sp->total - sp->peak, a));
    fprintf(f, "  Indefinite lifetime      %10s (parameters, constants, outputs: the whole program)\n",
            hs(sp->indefinite, a));
    fprintf(f, "\n  Memory Allocation Size vs. Program Order\n");
    chart(f, sp, p, o->width >= 0 ? o->width : 72, o->ascii);
    static const char *const titles[] = {"by program order", "by size", "by padding size"};
    for (int by = 0; by < 3; by++) {
        if (by == 2 && sp->peak == sp->peak_unpadded && !(o->flags & 1)) continue; /* no padding: same as by size */
        fprintf(f, "\n  HLO Ops at Peak Memory Allocation Time, %s (%zu buffers", titles[by], sp->n_objs);
        if (sp->n_small) fprintf(f, " + %zu small", sp->n_small);
        fprintf(f, ")\n    #       size   unpadded   padding  type       instruction                shape\n");
        size_t *ord;
        hbm_status s = hbmi_memview_sorted(p, sp, by, &ord);
        if (s) return s;
        size_t top = o->top > 0 ? (size_t)o->top : 15;
        size_t show = sp->n_objs < top ? sp->n_objs : top;
        for (size_t k = 0; k < show; k++) obj_line(f, p, &p->spans[ord[k]], k + 1);
        if (sp->n_objs > show) fprintf(f, "    ... %zu more (--top N)\n", sp->n_objs - show);
        hbmi_free(ord);
        if (sp->n_small)
            fprintf(f, "        %10s  small: %zu buffers under %s\n", hs(sp->small_bytes, a), sp->n_small,
                    hs(v->small, b));
        if (by == 0) {
            /* the largest buffer's card */
            size_t *bs;
            if ((s = hbmi_memview_sorted(p, sp, 1, &bs))) return s;
            if (sp->n_objs) {
                const hbmi_span *x = &p->spans[bs[0]];
                hbmi_memview_buf d;
                hbmi_memview_describe(p, x, &d);
                char line[1100], cut[1024];
                fprintf(f, "\n  Largest buffer at the peak\n");
                clean(cut, sizeof cut, d.instruction, strlen(d.instruction), 80, 1);
                fprintf(f, "    instruction    %s (%s)\n", cut, d.opcode);
                fprintf(f, "    size           %s (unpadded %s, padding %s)\n", hs(x->size, a), hs(x->unpadded, b),
                        hs(x->size - x->unpadded, c));
                fprintf(f, "    shape          %s\n", hbmi_text_fit(cut, sizeof cut, d.shape, 80, 1));
                fprintf(f, "    allocation     %s, lifetime steps [%" PRId64 ", %" PRId64 ")\n",
                        hbmi_memview_alloc_type(p, x), x->s, x->e);
                if (d.op_name[0]) fprintf(f, "    op_name        %s\n", clean(cut, sizeof cut, d.op_name, strlen(d.op_name), 80, 1));
                if (d.source_file[0]) {
                    snprintf(line, sizeof line, "%s:%d", d.source_file, d.source_line);
                    fprintf(f, "    source         %s\n", clean(cut, sizeof cut, line, strlen(line), 80, 1));
                }
            }
            hbmi_free(bs);
        }
    }
    return HBM_OK;
}

/* The options (opt, or the defaults) into *o and the view of p they ask for into *v. */
static hbm_status view_open(const hbm_plan *p, const hbm_plan_view_options *opt, hbm_plan_view_options *o, hbmi_memview *v) {
    if (opt) *o = *opt;
    else hbm_plan_view_options_default(o);
    return hbmi_memview_build(p, o->small_buffer_size, v);
}

hbm_status hbm_plan_view_text(const hbm_plan *p, const hbm_plan_view_options *opt, FILE *f) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "plan view: NULL argument");
    hbm_plan_view_options o;
    hbmi_memview v;
    hbm_status s = view_open(p, opt, &o, &v);
    if (s) return s;
    char name[80], nm[48];
    const char *mn = hbm_hlo_module_name(p->m);
    clean(name, sizeof name, mn, strlen(mn), 60, 1);
    fprintf(f, "Memory Viewer: %s (%s, %zu schedule steps%s)\n", name, hbm_backend_str(p->stats.backend),
            (size_t)p->df->n_flat, p->stats.estimate ? "; ESTIMATE: the module is not scheduled" : "");
    fprintf(f, "  memory spaces:");
    for (size_t i = 0; i < v.n_spaces; i++) fprintf(f, "%s %s", i ? "," : "", hbmi_memview_space_name(v.spaces[i].color, nm));
    fprintf(f, "\n");
    for (size_t i = 0; i < v.n_spaces && !s; i++)
        if (o.memory_space < 0 || v.spaces[i].color == o.memory_space) s = text_space(p, &v, &v.spaces[i], &o, f);
    hbmi_memview_free(&v);
    if (s) return s;
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan view: write error") : HBM_OK;
}

/* --- JSON -------------------------------------------------------------------------------------- */
/* A JSON string; "</" written "<\/" so that the text can sit inside an HTML <script>. */
static void jstrn(FILE *f, const char *s, size_t n) { hbmi_json_write_strn(f, s, n, HBMI_JSON_ETAG); }
static void jstr(FILE *f, const char *s) { hbmi_json_write_str(f, s, HBMI_JSON_ETAG); }

static void json_buf(FILE *f, const hbm_plan *p, const hbmi_span *s) {
    hbmi_memview_buf d;
    hbmi_memview_describe(p, s, &d);
    fprintf(f, "{\"size\": %" PRIu64 ", \"unpadded_size\": %" PRIu64 ", \"padding\": %" PRIu64 ", \"instruction\": ",
            s->size, s->unpadded, s->size - s->unpadded);
    jstr(f, d.instruction);
    fprintf(f, ", \"opcode\": ");
    jstr(f, d.opcode);
    fprintf(f, ", \"shape\": ");
    jstr(f, d.shape);
    fprintf(f, ", \"allocation_type\": ");
    jstr(f, hbmi_memview_alloc_type(p, s));
    fprintf(f, ", \"op_name\": ");
    jstr(f, d.op_name);
    fprintf(f, ", \"source_file\": ");
    jstr(f, d.source_file);
    fprintf(f, ", \"source_line\": %d, \"allocation\": %u, \"offset\": %" PRIu64 ", \"start\": %" PRId64
               ", \"end\": %" PRId64 "}",
            d.source_line, s->alloc, s->offset, s->s, s->e);
}

const char *hbmi_plan_module_name(const hbm_plan *p) { return hbm_hlo_module_name(p->m); }

hbm_status hbmi_memview_json(const hbm_plan *p, const hbm_plan_view_options *opt, int with_series, FILE *f) {
    hbm_plan_view_options o;
    hbmi_memview v;
    hbm_status s = view_open(p, opt, &o, &v);
    if (s) return s;
    fprintf(f, "{\"module\": ");
    jstr(f, hbm_hlo_module_name(p->m));
    fprintf(f, ", \"backend\": \"%s\", \"estimate\": %s, \"clock\": \"step\", \"schedule_steps\": %zu, "
               "\"small_buffer_size\": %" PRIu64 ", \"peak_bytes\": %" PRIu64 ", \"memory_spaces\": [",
            hbm_backend_str(p->stats.backend), p->stats.estimate ? "true" : "false", (size_t)p->df->n_flat, v.small,
            p->stats.peak_bytes);
    int first = 1;
    for (size_t i = 0; i < v.n_spaces; i++) {
        const hbmi_memview_space *sp = &v.spaces[i];
        if (o.memory_space >= 0 && sp->color != o.memory_space) continue;
        char nm[48];
        uint64_t tf = sp->total - sp->indefinite;
        fprintf(f, "%s\n {\"color\": %" PRId64 ", \"name\": ", first ? "" : ",", sp->color);
        first = 0;
        jstr(f, hbmi_memview_space_name(sp->color, nm));
        fprintf(f,
                ", \"total_allocation_bytes\": %" PRIu64 ", \"peak_heap_bytes\": %" PRIu64
                ", \"peak_unpadded_heap_bytes\": %" PRIu64 ", \"padding_overhead_bytes\": %" PRIu64
                ", \"argument_bytes\": %" PRIu64 ", \"indefinite_bytes\": %" PRIu64
                ", \"hlo_temp_bytes\": %" PRIu64 ", \"hlo_temp_without_fragmentation_bytes\": %" PRIu64
                ", \"fragmentation_bytes\": %" PRIu64 ", \"fragmentation\": %.6f, \"peak_step\": %" PRId64
                ", \"peak_instruction\": ",
                sp->total, sp->peak, sp->peak_unpadded, sp->peak - sp->peak_unpadded, sp->arguments, sp->indefinite,
                tf, sp->peak - sp->indefinite, sp->total - sp->peak, tf ? (double)(sp->total - sp->peak) / (double)tf : 0.0,
                sp->peak_at);
        hbmi_str pn = p->df->n_flat ? hbmi_df_instr(p->df, p->df->flat[sp->peak_at])->name : (hbmi_str){"", 0};
        jstrn(f, pn.p, pn.n);
        fprintf(f, ", \"small_bytes\": %" PRIu64 ", \"small_count\": %zu,\n  \"max_heap\": [", sp->small_bytes,
                sp->n_small);
        for (size_t k = 0; k < sp->n_objs; k++) {
            fprintf(f, "%s\n   ", k ? "," : "");
            json_buf(f, p, &p->spans[sp->objs[k]]);
        }
        fprintf(f, "]");
        if (with_series) {
            fprintf(f, ",\n  \"heap_sizes\": [");
            for (size_t t = 0; t < sp->steps; t++) fprintf(f, "%s%" PRIu64, t ? "," : "", sp->heap[t]);
            fprintf(f, "],\n  \"unpadded_heap_sizes\": [");
            for (size_t t = 0; t < sp->steps; t++) fprintf(f, "%s%" PRIu64, t ? "," : "", sp->unpadded[t]);
            fprintf(f, "],\n  \"buffers\": [");
            /* every temp buffer of the space, for the allocation timeline and lifetimes */
            int fb = 1;
            for (size_t i2 = 0; i2 < p->n_spans; i2++) {
                const hbmi_span *x = &p->spans[i2];
                if (x->color != sp->color || x->indefinite) continue;
                fprintf(f, "%s\n   [%" PRIu64 ",%" PRIu64 ",%" PRId64 ",%" PRId64 ",%zu]", fb ? "" : ",", x->offset,
                        x->size, x->s, x->e, i2);
                fb = 0;
            }
            fprintf(f, "]");
        }
        fprintf(f, "}");
    }
    fprintf(f, "]");
    if (with_series) {
        fprintf(f, ",\n \"instructions\": [");
        for (size_t t = 0; t < p->df->n_flat; t++) {
            hbmi_str nm = hbmi_df_instr(p->df, p->df->flat[t])->name;
            if (t) fputc(',', f);
            jstrn(f, nm.p, nm.n);
        }
        fprintf(f, "]");
    }
    fprintf(f, "}\n");
    hbmi_memview_free(&v);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan view: write error") : HBM_OK;
}

hbm_status hbm_plan_view_json(const hbm_plan *p, const hbm_plan_view_options *o, FILE *f) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "plan view: NULL argument");
    return hbmi_memview_json(p, o, 0, f);
}

void hbm_plan_view_options_default(hbm_plan_view_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->width = 72;
    o->top = 15;
    o->memory_space = -1;
    o->small_buffer_size = 16 * 1024;
}

/* --- shapes as the module writes them ------------------------------------------------------------ */
static const char *skip_ws_comments(const char *q, const char *end) {
    for (;;) {
        while (q < end && (*q == ' ' || *q == '\t')) q++;
        if (q + 1 < end && q[0] == '/' && q[1] == '*') { /* comments such as index=5 in long tuples */
            const char *c = q + 2;
            while (c + 1 < end && !(c[0] == '*' && c[1] == '/')) c++;
            q = c + 2 <= end ? c + 2 : end;
            continue;
        }
        return q;
    }
}

/* Walk the shape at q; when node *k reaches want, copy it (arrays only) to out. Returns the
 * end of the shape, or NULL when the text is not a shape. */
static const char *walk_shape(const char *q, const char *end, uint32_t want, uint32_t *k, char *out, size_t cap) {
    q = skip_ws_comments(q, end);
    if (q >= end) return NULL;
    if (*q == '(') {
        (*k)++;
        q++;
        for (;;) {
            q = skip_ws_comments(q, end);
            if (q < end && *q == ')') return q + 1;
            if (!(q = walk_shape(q, end, want, k, out, cap))) return NULL;
            q = skip_ws_comments(q, end);
            if (q < end && *q == ',') q++;
            else if (q < end && *q == ')') return q + 1;
            else return NULL;
        }
    }
    const char *s = q;
    int depth = 0;
    while (q < end && *q != '\n') {
        char ch = *q;
        if (ch == '[' || ch == '{' || ch == '(') depth++;
        else if (ch == ']' || ch == '}' || ch == ')') {
            if (!depth) break;
            depth--;
        } else if (!depth && (ch == ' ' || ch == ',')) break;
        q++;
    }
    if (q == s) return NULL;
    if (*k == want) snprintf(out, cap, "%.*s", (int)(q - s), s);
    (*k)++;
    return q;
}

void hbmi_plan_shape_text(const hbm_hlo_module *m, const hbmi_instr *in, uint32_t node, char *buf, size_t cap) {
    buf[0] = 0;
    const char *end = m->text + m->len, *q = in->name.p;
    if (q && q >= m->text && q < end) {
        q += in->name.n;
        q = skip_ws_comments(q, end);
        if (q < end && *q == '=') {
            uint32_t k = 0;
            if (walk_shape(q + 1, end, node, &k, buf, cap) && buf[0]) return;
        }
    }
    hbmi_shape_print(hbmi_shape_node(in->shape, node), buf, cap); /* without its layout */
}
