/* minimalloc_csv.c - MiniMalloc's CSV problem/solution format.
 *
 *   id,lower,upper,size[,alignment][,offset]
 *   0,0,10,1024
 *
 * Buffer `id` lives over [lower, upper) and needs `size` bytes; `begin`/`end` are accepted
 * for lower/upper (as MiniMalloc does), columns may come in any order, unknown columns are
 * ignored. A non-numeric id is kept as the buffer's label. Errors name file:line. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "pack/minimalloc_csv.h"
#include "hbm/file.h"
#include "hbm/pack.h"

enum { COL_ID, COL_LOWER, COL_UPPER, COL_SIZE, COL_ALIGN, COL_OFFSET, COL_N };

/* Next field of a comma-separated line [p, end): trimmed [*fs, *fe); returns the position
 * after the comma (or end). */
static const char *next_field(const char *p, const char *end, const char **fs, const char **fe) {
    const char *q = p;
    while (q < end && *q != ',') q++;
    const char *a = p, *b = q;
    while (a < b && isspace((unsigned char)*a)) a++;
    while (b > a && isspace((unsigned char)b[-1])) b--;
    *fs = a;
    *fe = b;
    return q < end ? q + 1 : NULL;
}

static int field_is(const char *a, const char *b, const char *name) {
    size_t n = strlen(name);
    if ((size_t)(b - a) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)a[i]) != name[i]) return 0;
    return 1;
}

static int parse_u64(const char *a, const char *b, uint64_t *out) {
    char tmp[32];
    size_t n = (size_t)(b - a);
    if (!n || n >= sizeof tmp) return 0;
    memcpy(tmp, a, n);
    tmp[n] = 0;
    if (!isdigit((unsigned char)tmp[0])) return 0;
    errno = 0;
    char *endp;
    unsigned long long v = strtoull(tmp, &endp, 10);
    if (errno || *endp) return 0;
    *out = v;
    return 1;
}

static int parse_i64(const char *a, const char *b, int64_t *out) {
    char tmp[32];
    size_t n = (size_t)(b - a);
    if (!n || n >= sizeof tmp) return 0;
    memcpy(tmp, a, n);
    tmp[n] = 0;
    if (!isdigit((unsigned char)tmp[0]) && !(tmp[0] == '-' && isdigit((unsigned char)tmp[1]))) return 0;
    errno = 0;
    char *endp;
    long long v = strtoll(tmp, &endp, 10);
    if (errno || *endp) return 0;
    *out = v;
    return 1;
}

hbm_status hbm_minimalloc_parse(const char *text, size_t len, const char *name, hbm_timeline **out) {
    if (!text || !out) return hbmi_error(HBM_ERR_INVALID, "minimalloc: NULL argument");
    if (!name) name = "<csv>";
    hbm_file_kind kind = hbm_file_sniff(text, len); /* another kind of file is named, not parsed */
    if (kind == HBM_FILE_EMPTY) return hbmi_error(HBM_ERR_PARSE, "%s: empty file", name);
    if (kind != HBM_FILE_MINIMALLOC_CSV && kind != HBM_FILE_UNKNOWN)
        return hbmi_error(HBM_ERR_PARSE, "%s is %s, not a MiniMalloc CSV (id,lower,upper,size)", name,
                          hbm_file_kind_str(kind));
    hbm_timeline *tl;
    hbm_status s = hbm_timeline_new(&tl);
    if (s) return s;
    const char *base = strrchr(name, '/');
    snprintf(tl->name, sizeof tl->name, "%s", base ? base + 1 : name);
    int col[COL_N];
    for (int i = 0; i < COL_N; i++) col[i] = -1;
    int ncols = 0, have_header = 0;
    size_t line = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        line++;
        const char *ls = p;
        p = nl ? nl + 1 : end;
        while (le > ls && (le[-1] == '\r' || isspace((unsigned char)le[-1]))) le--;
        while (ls < le && isspace((unsigned char)*ls)) ls++;
        if (ls == le) continue;
        if (memchr(ls, '\0', (size_t)(le - ls))) {
            s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "NUL byte in line");
            goto fail;
        }
        const char *fs, *fe, *q = ls;
        if (!have_header) {
            for (ncols = 0; q; ncols++) {
                q = next_field(q, le, &fs, &fe);
                int c = -1;
                if (field_is(fs, fe, "id")) c = COL_ID;
                else if (field_is(fs, fe, "lower") || field_is(fs, fe, "begin")) c = COL_LOWER;
                else if (field_is(fs, fe, "upper") || field_is(fs, fe, "end")) c = COL_UPPER;
                else if (field_is(fs, fe, "size")) c = COL_SIZE;
                else if (field_is(fs, fe, "alignment")) c = COL_ALIGN;
                else if (field_is(fs, fe, "offset")) c = COL_OFFSET;
                if (c >= 0) {
                    if (col[c] >= 0) {
                        s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "column '%.*s' appears twice", (int)(fe - fs), fs);
                        goto fail;
                    }
                    col[c] = ncols;
                }
                if (ncols > 1000) {
                    s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "too many columns");
                    goto fail;
                }
            }
            if (col[COL_LOWER] < 0 || col[COL_UPPER] < 0 || col[COL_SIZE] < 0) {
                s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0,
                                  "header needs columns lower (or begin), upper (or end) and size, e.g. 'id,lower,upper,size'");
                goto fail;
            }
            have_header = 1;
            continue;
        }
        const char *f[COL_N][2] = {{0}};
        int nf = 0;
        for (; q; nf++) {
            q = next_field(q, le, &fs, &fe);
            for (int c = 0; c < COL_N; c++)
                if (col[c] == nf) {
                    f[c][0] = fs;
                    f[c][1] = fe;
                }
        }
        if (nf != ncols) {
            s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "%d fields, the header has %d", nf, ncols);
            goto fail;
        }
        int64_t lower, upper;
        uint64_t size, align = 0, offset = HBM_NO_OFFSET, id = tl->count;
        if (!parse_i64(f[COL_LOWER][0], f[COL_LOWER][1], &lower) || !parse_i64(f[COL_UPPER][0], f[COL_UPPER][1], &upper)) {
            s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "lower and upper must be integers");
            goto fail;
        }
        if (!parse_u64(f[COL_SIZE][0], f[COL_SIZE][1], &size) || !size) {
            s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "size must be a positive integer, got '%.*s'",
                              (int)(f[COL_SIZE][1] - f[COL_SIZE][0]), f[COL_SIZE][0]);
            goto fail;
        }
        if (lower >= upper) {
            s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "empty lifetime [%" PRId64 ", %" PRId64 ") (need lower < upper)",
                              lower, upper);
            goto fail;
        }
        if (col[COL_ALIGN] >= 0 && !parse_u64(f[COL_ALIGN][0], f[COL_ALIGN][1], &align)) {
            s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "alignment must be a non-negative integer");
            goto fail;
        }
        if (col[COL_OFFSET] >= 0 && f[COL_OFFSET][0] != f[COL_OFFSET][1] &&
            !parse_u64(f[COL_OFFSET][0], f[COL_OFFSET][1], &offset)) {
            s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "offset must be a non-negative integer");
            goto fail;
        }
        hbm_tag tag = {0};
        char label[128];
        int numeric_id = 1;
        if (col[COL_ID] >= 0) {
            const char *a = f[COL_ID][0], *b = f[COL_ID][1];
            if (!parse_u64(a, b, &id)) {
                numeric_id = 0;
                snprintf(label, sizeof label, "%.*s", (int)(b - a), a);
                tag.label = label;
            }
        }
        size_t idx;
        if ((s = hbm_timeline_add(tl, size, lower, upper, numeric_id ? NULL : &tag, &idx))) goto fail;
        tl->buffers[idx].alignment = align;
        tl->buffers[idx].offset = offset;
        if (numeric_id) tl->buffers[idx].id = id;
    }
    if (!have_header) {
        s = hbmi_error(HBM_ERR_PARSE, "%s: no header line (expected 'id,lower,upper,size')", name);
        goto fail;
    }
    *out = tl;
    return HBM_OK;
fail:
    hbm_timeline_free(tl);
    return s;
}

static hbm_status parse_cb(const char *data, size_t len, const char *name, void *out) {
    return hbm_minimalloc_parse(data, len, name, out);
}

hbm_status hbm_minimalloc_read(const char *path, hbm_timeline **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "minimalloc: NULL argument");
    return hbmi_parse_file(path, parse_cb, out);
}

hbm_status hbm_minimalloc_write(const hbm_timeline *tl, FILE *f) { return hbmi_minimalloc_write(tl, f, 1); }

hbm_status hbmi_minimalloc_write(const hbm_timeline *tl, FILE *f, int csv_ids) {
    if (!tl || !f) return hbmi_error(HBM_ERR_INVALID, "minimalloc: NULL argument");
    int align = 0, offs = 0;
    for (size_t i = 0; i < tl->count && csv_ids; i++) {
        if (tl->buffers[i].alignment > 1) align = 1;
        if (tl->buffers[i].offset != HBM_NO_OFFSET) offs = 1;
    }
    fprintf(f, "id,lower,upper,size%s%s\n", align ? ",alignment" : "", offs ? ",offset" : "");
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        const hbm_tag *t = csv_ids ? hbm_timeline_tag(tl, i) : NULL;
        if (t && t->label) fprintf(f, "%s", t->label);
        else fprintf(f, "%" PRIu64, csv_ids ? b->id : (uint64_t)i);
        fprintf(f, ",%" PRId64 ",%" PRId64 ",%" PRIu64, b->start, b->end, b->size);
        if (align) fprintf(f, ",%" PRIu64, b->alignment);
        if (offs) {
            if (b->offset == HBM_NO_OFFSET) fputs(",", f);
            else fprintf(f, ",%" PRIu64, b->offset);
        }
        fputc('\n', f);
    }
    if (ferror(f)) return hbmi_error(HBM_ERR_IO, "minimalloc: write failed");
    return HBM_OK;
}
