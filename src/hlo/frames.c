/* frames.c - the source line of an instruction from the stack frames XLA keeps for it: the
 * text's StackFrames / FileLocations / FileNames tables (XLA's 2026 text, metadata
 * stack_frame_id=N) or a protobuf's StackFrameIndexProto. A frame whose file is a wrapper or
 * a library is not the user's line: the walk goes out through parent frames (callers) to the
 * first that is not. Rules and sources: docs/fit.md ("source lines"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/hlo_internal.h"

int hbmi_span_has(const char *s, size_t n, const char *w) {
    size_t k = strlen(w);
    if (!k) return 1;
    for (size_t i = 0; i + k <= n; i++) { /* i: the next place w could start */
        const char *q = memchr(s + i, w[0], n - k + 1 - i);
        if (!q) return 0;
        i = (size_t)(q - s);
        if (!memcmp(q, w, k)) return 1;
    }
    return 0;
}

int hbmi_hlo_wrapper_file(const char *f, size_t n) {
    static const char *const tail[] = {"contextlib.py", "functools.py"};
    for (size_t k = 0; k < 2; k++) {
        size_t t = strlen(tail[k]);
        if (n >= t && !memcmp(f + n - t, tail[k], t)) return 1;
    }
    /* JAX's, Flax's and any installed library's frames: the user's line is a caller's */
    static const char *const lib[] = {"/jax/_src/", "/site-packages/", "/dist-packages/", "/flax/core/", "/flax/linen/"};
    for (size_t k = 0; k < sizeof lib / sizeof *lib; k++)
        if (hbmi_span_has(f, n, lib[k])) return 1;
    return 0;
}

long hbmi_hlo_frame_walk(hbmi_frame_get get, const void *tables, long frame, hbmi_frame *out) {
    for (int hops = 0; frame > 0 && hops < 64; hops++) {
        if (!get(tables, frame, out)) break;
        if (!hbmi_hlo_wrapper_file(out->file, out->file_len)) return frame;
        if (out->parent >= frame) break; /* a parent is an earlier frame: a table that loops is not read */
        frame = out->parent;
    }
    memset(out, 0, sizeof *out);
    return 0;
}

/* --- the text's tables ------------------------------------------------------------------------ */
const char *hbmi_hlo_table(const hbm_hlo_module *m, const char *title) {
    if (!m->text) return NULL;
    char key[32];
    int kn = snprintf(key, sizeof key, "\n%s\n", title);
    if (kn <= 0 || (size_t)kn >= sizeof key) return NULL;
    for (const char *p = m->text; p + kn <= m->text + m->len; p++)
        if (*p == '\n' && !memcmp(p, key, (size_t)kn)) return p + kn;
    return NULL;
}

long hbmi_hlo_row_field(const char *row, const char *key) {
    const char *nl = row ? strchr(row, '\n') : NULL;
    const char *p = row ? strstr(row, key) : NULL;
    if (!p || (nl && p > nl)) return 0;
    return strtol(p + strlen(key), NULL, 10);
}

size_t hbmi_hlo_row_string(const char *row, const char **s) {
    while (*row == ' ') row++;
    size_t n = 0;
    if (*row == '"') {
        row++;
        while (row[n] && row[n] != '"' && row[n] != '\n') n++;
    }
    *s = row;
    return n;
}

/* the text's three tables, each row (past its id) by id: XLA prints ids as 1-based positions */
typedef struct text_tables {
    const char **row[3]; /* StackFrames, FileLocations, FileNames */
    size_t n[3];
} text_tables;

static void tables_free(text_tables *t) {
    for (int k = 0; k < 3; k++) hbmi_free(t->row[k]);
}

/* 1: the tables (n[0] 0 where the text has none), 0: out of memory */
static int tables_build(const hbm_hlo_module *m, text_tables *t) {
    static const char *const title[3] = {"StackFrames", "FileLocations", "FileNames"};
    memset(t, 0, sizeof *t);
    const char *end = m->text ? m->text + m->len : NULL;
    for (int k = 0; k < 3; k++) {
        const char *first = hbmi_hlo_table(m, title[k]), *p = first;
        if (!first) return 1; /* no frames: n[0] is 0 or the lookups fail */
        size_t n = 0;
        for (; p < end && *p != '\n'; n++) {
            while (p < end && *p != '\n') p++;
            p++;
        }
        if (!n) continue;
        if (!(t->row[k] = hbmi_calloc(n, sizeof *t->row[k]))) return tables_free(t), 0;
        t->n[k] = n;
        for (p = first; p < end && *p != '\n';) {
            char *e;
            long id = strtol(p, &e, 10);
            if (e != p && id > 0 && (size_t)id <= n && !t->row[k][id - 1]) t->row[k][id - 1] = e;
            while (p < end && *p != '\n') p++;
            p++;
        }
    }
    return 1;
}

static const char *row_of(const text_tables *t, int k, long id) {
    return id > 0 && (size_t)id <= t->n[k] ? t->row[k][id - 1] : NULL;
}

static int text_frame(const void *tables, long frame, hbmi_frame *out) {
    const text_tables *t = tables;
    const char *fr = row_of(t, 0, frame);
    if (!fr) return 0;
    const char *loc = row_of(t, 1, hbmi_hlo_row_field(fr, "file_location_id="));
    long file_id = loc ? hbmi_hlo_row_field(loc, "file_name_id=") : 0;
    const char *fn = loc ? row_of(t, 2, file_id) : NULL;
    if (!fn) return 0;
    out->file_len = hbmi_hlo_row_string(fn, &out->file);
    out->file_id = file_id;
    out->line = (int)hbmi_hlo_row_field(loc, "line=");
    out->parent = hbmi_hlo_row_field(fr, "parent_frame_id=");
    return 1;
}

int hbmi_hlo_frame_where(const hbm_hlo_module *m, const hbmi_instr *in, char *file, size_t cap, int *line) {
    file[0] = 0;
    *line = 0;
    text_tables t;
    hbmi_frame f;
    if (in->meta_frame <= 0 || !tables_build(m, &t)) return 0;
    long got = t.n[0] ? hbmi_hlo_frame_walk(text_frame, &t, in->meta_frame, &f) : 0;
    tables_free(&t);
    if (!got) return 0;
    snprintf(file, cap, "%.*s", (int)f.file_len, f.file);
    *line = f.line;
    return 1;
}

hbm_status hbmi_hlo_text_frames(hbm_hlo_module *m) {
    int any = 0; /* most modules name no frame: their text is not searched for tables */
    for (uint32_t c = 0; c < m->n_comps && !any; c++)
        for (uint32_t i = 0; i < m->comps[c].n && !any; i++) any = m->comps[c].ins[i].meta_frame > 0;
    if (!any) return HBM_OK;
    text_tables t;
    if (!tables_build(m, &t)) return hbmi_error(HBM_ERR_NOMEM, "hlo: out of host memory");
    for (uint32_t c = 0; t.n[0] && c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c].n; i++) {
            hbmi_instr *in = &m->comps[c].ins[i];
            hbmi_str sf = in->meta_source_file;
            if (in->meta_frame <= 0 || (sf.n && !hbmi_hlo_wrapper_file(sf.p, sf.n))) continue;
            hbmi_frame f;
            if (hbmi_hlo_frame_walk(text_frame, &t, in->meta_frame, &f) || (!sf.n && text_frame(&t, in->meta_frame, &f))) {
                in->meta_source_file = (hbmi_str){f.file, (uint32_t)(f.file_len < UINT32_MAX ? f.file_len : 0)};
                in->meta_source_line = f.line > 0 ? f.line : 0;
                in->meta_walked = 1;
            }
        }
    tables_free(&t);
    return HBM_OK;
}
