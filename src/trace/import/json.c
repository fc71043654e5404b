/* json.c - a small JSON reader (RFC 8259) into the pyval tree: objects become dicts,
 * arrays lists, integers without fraction/exponent ints, other numbers floats. Depth is
 * limited so hostile input cannot overflow the stack; errors give the byte offset. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "trace/import/pyval.h"

#define MAX_DEPTH 200

/* Short strings repeat (keys, file and function names): equal ones share one value. */
#define INTERN_MAX 96
#define INTERN_SLOTS 8192

typedef struct js {
    const char *p;
    size_t len, off;
    const char *name;
    hbmi_pvpool *pool;
    hbmi_pv **intern; /* INTERN_SLOTS entries, by hash of the raw bytes; NULL when none */
    hbmi_pv **stack;  /* items of the open containers: each gets an exact array at its close */
    size_t sn, scap;
} js;

static hbm_status spush(js *j, hbmi_pv *v) {
    if (j->sn == j->scap && hbmi_grow((void **)&j->stack, &j->scap, j->sn + 1, sizeof *j->stack))
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading JSON");
    j->stack[j->sn++] = v;
    return HBM_OK;
}

/* The container's items: stack[base, sn) moved into an array of their exact count. */
static hbm_status close_items(js *j, hbmi_pv *v, size_t base) {
    size_t n = j->sn - base;
    if (n > v->cap) { /* (a value given back to the pool keeps its array: reused when large enough) */
        hbmi_free(v->items);
        v->cap = 0;
        if (!(v->items = hbmi_malloc(n * sizeof *v->items))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading JSON");
        v->cap = n;
    }
    if (n) memcpy(v->items, j->stack + base, n * sizeof *v->items);
    v->n = n;
    j->sn = base;
    return HBM_OK;
}


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

/* A string without escapes (the common case): its value in one pass. */
static hbm_status plain_string(js *j, size_t start, size_t end, hbmi_pv **out) {
    size_t n = end - start;
    const char *src = j->p + start;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)src[k];
        if (c < 0x20) {
            j->off = start + k;
            return jerr(j, "control character inside a string");
        }
        h = (h ^ c) * 0x100000001b3ull;
    }
    hbmi_pv **slot = j->intern && n <= INTERN_MAX ? &j->intern[h & (INTERN_SLOTS - 1)] : NULL;
    if (slot && *slot && (*slot)->len == n && !memcmp((*slot)->s, src, n)) {
        j->off = end + 1;
        *out = *slot;
        return HBM_OK;
    }
    hbmi_pv *v = hbmi_pv_new(j->pool, PV_STR);
    if (!v || !(v->s = hbmi_malloc(n + 1))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading JSON");
    memcpy(v->s, src, n);
    v->s[n] = 0;
    v->len = n;
    if (slot) *slot = v, v->keep = 1; /* shared: never given back */
    j->off = end + 1;
    *out = v;
    return HBM_OK;
}

static hbm_status string(js *j, hbmi_pv **out) {
    j->off++; /* opening quote */
    size_t start = j->off, end = start;
    const char *q = memchr(j->p + start, '"', j->len - start);
    if (q && !memchr(j->p + start, '\\', (size_t)(q - (j->p + start))))
        return plain_string(j, start, (size_t)(q - j->p), out);
    while (end < j->len && j->p[end] != '"') end += j->p[end] == '\\' ? 2 : 1;
    if (end >= j->len) return jerr(j, "unterminated string");
    hbmi_pv *v = hbmi_pv_new(j->pool, PV_STR); /* with escapes: not shared */
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
    size_t n = j->off - s;
    if (!isfloat && j->off - digits <= 18 && (j->p[digits] != '0' || j->off - digits == 1)) {
        int64_t x = 0; /* at most 18 digits: no overflow */
        for (size_t k = digits; k < j->off; k++) x = x * 10 + (j->p[k] - '0');
        hbmi_pv *v = hbmi_pv_new(j->pool, PV_INT);
        if (!v) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading JSON");
        v->i = j->p[s] == '-' ? -x : x;
        *out = v;
        return HBM_OK;
    }
    char buf[64];
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
        if (errno == ERANGE && !*end) { /* wider than 64 bits: a float, as from a pickle (pickle.c) */
            errno = 0;
            v->type = PV_FLOAT;
            v->f = strtod(buf, &end);
        }
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
        size_t base = j->sn;
        for (;;) {
            hbmi_pv *item;
            hbm_status s;
            if (c == '{') {
                ws(j);
                if (j->off >= j->len || j->p[j->off] != '"') return jerr(j, "expected a string key");
                if ((s = string(j, &item)) || (s = spush(j, item))) return s;
                ws(j);
                if (j->off >= j->len || j->p[j->off] != ':') return jerr(j, "expected ':' after a key");
                j->off++;
            }
            if ((s = value(j, depth + 1, &item))) return s;
            if (j->pool->in && j->off >= j->pool->in->next) hbmi_input_progress(j->pool->in, j->off);
            if (c == '[' && j->pool->events) { /* a snapshot's trace entries become records at once */
                if (hbmi_pv_list_add(j->pool, v, item)) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading JSON");
            } else if ((s = spush(j, item))) {
                return s;
            }
            ws(j);
            if (j->off < j->len && j->p[j->off] == ',') {
                j->off++;
                continue;
            }
            if (j->off < j->len && j->p[j->off] == close) {
                j->off++;
                if ((c == '{' || !j->pool->events) && (s = close_items(j, v, base))) return s;
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
    j.intern = hbmi_calloc(INTERN_SLOTS, sizeof *j.intern); /* without it, strings are not shared */
    hbm_status s = value(&j, 0, out);
    hbmi_free(j.intern);
    hbmi_free(j.stack);
    if (s) return s;
    ws(&j);
    if (j.off != j.len) return jerr(&j, "extra data after the top-level value");
    return HBM_OK;
}
