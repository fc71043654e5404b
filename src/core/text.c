/* text.c - text for a terminal column: control characters made visible, cut to a width; an
 * output written through a memory stream into a caller's buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/json_api.h" /* hbm_string_free */

/* Byte offset of column col in s (UTF-8: continuation bytes take no column). */
static size_t col_offset(const char *s, size_t len, size_t col) {
    size_t i = 0, c = 0;
    while (i < len && (c < col || ((unsigned char)s[i] & 0xC0) == 0x80)) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
        if (c > col) break;
        i++;
    }
    return i;
}

void hbmi_fputs_visible(const char *s, FILE *f) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
    }
}

const char *hbmi_text_fit(char *out, size_t cap, const char *s, int width, int middle) {
    char clean[1024];
    size_t n = 0, cols = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && n + 5 < sizeof clean; p++) {
        if (*p < 0x20 || *p == 0x7f) n += (size_t)snprintf(clean + n, sizeof clean - n, "\\x%02x", *p), cols += 4;
        else clean[n++] = (char)*p, cols += (*p & 0xC0) != 0x80;
    }
    clean[n] = 0;
    if (width < 4) width = 4;
    if (cols <= (size_t)width) {
        snprintf(out, cap, "%s", clean);
        return out;
    }
    size_t keep = (size_t)width - 3;
    if (!middle) {
        snprintf(out, cap, "%.*s...", (int)col_offset(clean, n, keep), clean);
        return out;
    }
    size_t head = keep / 3, tail = keep - head;
    size_t h = col_offset(clean, n, head), t = col_offset(clean, n, cols - tail);
    snprintf(out, cap, "%.*s...%s", (int)h, clean, clean + t);
    return out;
}

/* set while hbmi_emit_fitted runs its writer: only then is a whole line marked */
static _Thread_local int fitting;

hbm_status hbmi_mem_open(hbmi_mem *m, int marks) {
    m->data = NULL;
    m->n = 0;
    if (!(m->f = open_memstream(&m->data, &m->n))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory formatting output");
    m->fitting = fitting;
    fitting = marks; /* text for a buffer: no marks; for hbmi_mem_fitted: marks */
    return HBM_OK;
}

hbm_status hbmi_mem_open_buffer(hbmi_mem *m, char *buf, size_t cap, size_t *len) {
    if (!len || (cap && !buf)) return hbmi_error(HBM_ERR_INVALID, "format: NULL argument");
    return hbmi_mem_open(m, 0);
}

hbm_status hbmi_mem_open_string(hbmi_mem *m, char **out, size_t *len) {
    if (!out || !len) return hbmi_error(HBM_ERR_INVALID, "string: NULL argument");
    *out = NULL;
    *len = 0;
    return hbmi_mem_open(m, 0);
}

hbm_status hbmi_mem_string(hbmi_mem *m, hbm_status s, char **out, size_t *len) {
    fitting = m->fitting;
    if (fclose(m->f) && !s) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory formatting output");
    if (s) {
        free(m->data);
        *out = NULL;
        *len = 0;
        return s;
    }
    *out = m->data;
    *len = m->n;
    return HBM_OK;
}

hbm_status hbmi_mem_fitted(hbmi_mem *m, hbm_status s, FILE *f, size_t width) {
    char *text;
    size_t n;
    if ((s = hbmi_mem_string(m, s, &text, &n))) return s;
    hbmi_write_fitted(f, text, n, width);
    free(text);
    return HBM_OK;
}

hbm_status hbmi_mem_buffer(hbmi_mem *m, hbm_status s, char *buf, size_t cap, size_t *len) {
    char *text;
    size_t n;
    if ((s = hbmi_mem_string(m, s, &text, &n))) return s;
    if (cap) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(buf, text, k);
        buf[k] = 0;
    }
    *len = n;
    free(text);
    return HBM_OK;
}

void hbm_string_free(char *s) { free(s); }

hbm_status hbmi_format_mem(hbmi_emit_fn fn, const void *ctx, char *buf, size_t cap, size_t *len) {
    if (!len || (cap && !buf)) return hbmi_error(HBM_ERR_INVALID, "format: NULL argument");
    hbmi_mem m;
    hbm_status s = hbmi_mem_open(&m, 0);
    return s ? s : hbmi_mem_buffer(&m, fn(ctx, m.f), buf, cap, len);
}

void hbmi_buffer_row(FILE *f, int indent, const char *size, double pct, const char *category, const char *what) {
    fprintf(f, "%*s%10s", indent, "", size);
    if (pct >= 0) fprintf(f, " %5.1f%%", pct);
    fprintf(f, "  %-9s %s\n", category, what);
}

void hbmi_buffer_where(FILE *f, int indent, int width, const char *file, int line, const char *op) {
    char loc[512], cut[1100];
    if (file) {
        snprintf(loc, sizeof loc, "%s:%d", file, line);
        fprintf(f, "%*sat %s\n", indent, "", hbmi_text_fit(cut, sizeof cut, loc, width, 1));
    }
    if (op) fprintf(f, "%*sop %s\n", indent, "", hbmi_text_fit(cut, sizeof cut, op, width, 1));
}

/* the column after the first k bytes of a line (tabs to the next multiple of 8) */
static size_t columns(const char *s, size_t k) {
    size_t c = 0;
    for (size_t i = 0; i < k; i++) c = s[i] == '\t' ? (c / 8 + 1) * 8 : c + 1;
    return c;
}

void hbmi_mark_whole(FILE *f) {
    if (fitting) fputc(HBMI_WHOLE, f);
}

void hbmi_write_fitted(FILE *f, const char *text, size_t len, size_t width) {
    size_t at = 0;
    while (at < len) {
        const char *line = text + at, *nl = memchr(line, '\n', len - at);
        size_t n = nl ? (size_t)(nl - line) : len - at;
        at += n + (nl ? 1 : 0);
        int whole = n && line[0] == HBMI_WHOLE; /* advice: never cut */
        if (whole) line++, n--;
        if (whole || !width || columns(line, n) <= width) {
            fwrite(line, 1, n, f);
        } else {
            /* keep a third of the room at the start, the rest at the end */
            size_t room = width - 3, head = 0, tail = 0;
            while (head < n && columns(line, head + 1) <= room / 3) head++;
            while (tail < n - head && columns(line, head) + 3 + (tail + 1) <= width) tail++;
            fwrite(line, 1, head, f);
            fputs("...", f);
            fwrite(line + n - tail, 1, tail, f);
        }
        if (nl) fputc('\n', f);
    }
}

hbm_status hbmi_emit_fitted(hbmi_emit_fn fn, const void *ctx, FILE *f, size_t width) {
    hbmi_mem m;
    hbm_status s = hbmi_mem_open(&m, 1);
    return s ? s : hbmi_mem_fitted(&m, fn(ctx, m.f), f, width);
}
