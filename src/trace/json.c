/* json.c - a small JSON reader (RFC 8259) into the pyval tree: objects become dicts,
 * arrays lists, integers without fraction/exponent ints, other numbers floats. Depth is
 * limited so hostile input cannot overflow the stack; errors give the byte offset. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "trace/pyval.h"

#define MAX_DEPTH 200

typedef struct js {
    const char *p;
    size_t len, off;
    const char *name;
    hbmi_pvpool *pool;
} js;

static hbm_status jerr(js *j, const char *what) {
    return hbmi_error(HBM_ERR_PARSE, "%s: JSON byte offset %zu: %s", j->name, j->off, what);
}

static void ws(js *j) {
    while (j->off < j->len && (j->p[j->off] == ' ' || j->p[j->off] == '\t' || j->p[j->off] == '\n' || j->p[j->off] == '\r'))
        j->off++;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t utf8(unsigned cp, char *o) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), o[2] = (char)(0x80 | (cp & 0x3f)), 3;
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

static hbm_status string(js *j, hbmi_pv **out) {
    j->off++; /* opening quote */
    size_t start = j->off, end = start;
    while (end < j->len && j->p[end] != '"') end += j->p[end] == '\\' ? 2 : 1;
    if (end >= j->len) return jerr(j, "unterminated string");
    hbmi_pv *v = hbmi_pv_new(j->pool, PV_STR);
    if (!v || !(v->s = hbmi_malloc(end - start + 1))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading JSON");
    size_t n = 0;
    while (j->off < end) {
        char c = j->p[j->off];
        if ((unsigned char)c < 0x20) return jerr(j, "control character inside a string");
        if (c != '\\') {
            v->s[n++] = c;
            j->off++;
            continue;
        }
        char e = j->p[j->off + 1];
        j->off += 2;
        switch (e) {
        case '"': case '\\': case '/': v->s[n++] = e; break;
        case 'b': v->s[n++] = '\b'; break;
        case 'f': v->s[n++] = '\f'; break;
        case 'n': v->s[n++] = '\n'; break;
        case 'r': v->s[n++] = '\r'; break;
        case 't': v->s[n++] = '\t'; break;
        case 'u': {
            unsigned cp = 0;
            for (int i = 0; i < 4; i++) {
                int h = j->off < end ? hexval(j->p[j->off]) : -1;
                if (h < 0) return jerr(j, "\\u needs 4 hex digits");
                cp = cp * 16 + (unsigned)h;
                j->off++;
            }
            /* 6 input bytes always make at most 4 output bytes (surrogates kept as is) */
            n += utf8(cp, v->s + n);
            break;
        }
        default: j->off -= 2; return jerr(j, "unknown escape in a string");
        }
    }
    v->s[n] = 0;
    v->len = n;
    j->off = end + 1;
    *out = v;
    return HBM_OK;
}

static hbm_status number(js *j, hbmi_pv **out) {
    size_t s = j->off;
    int isfloat = 0;
    if (j->off < j->len && j->p[j->off] == '-') j->off++;
    size_t digits = j->off;
    while (j->off < j->len && ((j->p[j->off] >= '0' && j->p[j->off] <= '9') || j->p[j->off] == '.' ||
                               j->p[j->off] == 'e' || j->p[j->off] == 'E' || j->p[j->off] == '+' ||
                               (j->p[j->off] == '-' && j->off > s))) {
        if (j->p[j->off] < '0' || j->p[j->off] > '9') isfloat = 1;
        j->off++;
    }
    if (j->off == digits) return jerr(j, "expected a value (object, array, string, number, true, false, null)");
    char buf[64];
    size_t n = j->off - s;
    if (n >= sizeof buf) return jerr(j, "number too long");
    memcpy(buf, j->p + s, n);
    buf[n] = 0;
    char *end;
    hbmi_pv *v = hbmi_pv_new(j->pool, isfloat ? PV_FLOAT : PV_INT);
    if (!v) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading JSON");
    errno = 0;
    if (isfloat) {
        v->f = strtod(buf, &end);
    } else if (buf[0] == '-') {
        v->i = strtoll(buf, &end, 10);
    } else {
        v->i = (int64_t)strtoull(buf, &end, 10); /* addresses above 2^63 wrap */
    }
    if (*end || errno) {
        j->off = s;
        return jerr(j, "malformed or out-of-range number");
    }
    *out = v;
    return HBM_OK;
}

static hbm_status value(js *j, int depth, hbmi_pv **out) {
    ws(j);
    if (j->off >= j->len) return jerr(j, "unexpected end of data, expected a value");
    if (depth > MAX_DEPTH) return jerr(j, "nesting deeper than 200");
    char c = j->p[j->off];
    if (c == '"') return string(j, out);
    if (c == '{' || c == '[') {
        hbmi_pv *v = hbmi_pv_new(j->pool, c == '{' ? PV_DICT : PV_LIST);
        if (!v) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading JSON");
        char close = c == '{' ? '}' : ']';
        j->off++;
        ws(j);
        if (j->off < j->len && j->p[j->off] == close) {
            j->off++;
            *out = v;
            return HBM_OK;
        }
        for (;;) {
            hbmi_pv *item;
            hbm_status s;
            if (c == '{') {
                ws(j);
                if (j->off >= j->len || j->p[j->off] != '"') return jerr(j, "expected a string key");
                if ((s = string(j, &item))) return s;
                if (hbmi_pv_push(v, item)) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
                ws(j);
                if (j->off >= j->len || j->p[j->off] != ':') return jerr(j, "expected ':' after a key");
                j->off++;
            }
            if ((s = value(j, depth + 1, &item))) return s;
            if (hbmi_pv_push(v, item)) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
            ws(j);
            if (j->off < j->len && j->p[j->off] == ',') {
                j->off++;
                continue;
            }
            if (j->off < j->len && j->p[j->off] == close) {
                j->off++;
                *out = v;
                return HBM_OK;
            }
            return jerr(j, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    static const struct { const char *w; hbmi_pvtype t; int i; } lit[] = {
        {"true", PV_BOOL, 1}, {"false", PV_BOOL, 0}, {"null", PV_NONE, 0}};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(lit[i].w);
        if (j->len - j->off >= n && !memcmp(j->p + j->off, lit[i].w, n)) {
            hbmi_pv *v = hbmi_pv_new(j->pool, lit[i].t);
            if (!v) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading JSON");
            v->i = lit[i].i;
            j->off += n;
            *out = v;
            return HBM_OK;
        }
    }
    return number(j, out);
}

hbm_status hbmi_json_parse(const char *text, size_t len, const char *name, hbmi_pvpool *pool, hbmi_pv **out) {
    js j = {.p = text, .len = len, .name = name ? name : "json", .pool = pool};
    hbm_status s = value(&j, 0, out);
    if (s) return s;
    ws(&j);
    if (j.off != j.len) return jerr(&j, "extra data after the top-level value");
    return HBM_OK;
}
