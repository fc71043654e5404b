/* rmm.c - RMM's logging_resource_adaptor CSV:
 *   Thread,Time,Action,Pointer,Size,Stream
 *   140573312345856,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020
 * Time is seconds (with a fraction) or HH:MM:SS.ffffff / HH:MM:SS:ffffff as older RMM
 * wrote it; Action is allocate, allocate failure, free or deallocate. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_internal.h"

typedef struct field {
    const char *p;
    size_t n;
} field;

static int field_eq(field f, const char *s) { return strlen(s) == f.n && !memcmp(f.p, s, f.n); }

static int parse_u64(field f, int base, uint64_t *out) {
    char buf[40];
    while (f.n && isspace((unsigned char)*f.p)) f.p++, f.n--;
    while (f.n && isspace((unsigned char)f.p[f.n - 1])) f.n--;
    if (!f.n || f.n >= sizeof buf) return -1;
    memcpy(buf, f.p, f.n);
    buf[f.n] = 0;
    if (buf[0] == '-' || buf[0] == '+') return -1;
    char *end;
    int b = base;
    if (f.n > 2 && buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')) b = 16;
    unsigned long long v = strtoull(buf, &end, b);
    if (*end || end == buf) return -1;
    *out = v;
    return 0;
}

/* seconds.fraction or H:M:S[.:]fraction, into nanoseconds */
static int parse_time(field f, uint64_t *ns) {
    uint64_t part[4] = {0};
    int np = 0, frac_digits = 0, in_frac = 0;
    size_t colons = 0;
    for (size_t i = 0; i < f.n; i++) colons += f.p[i] == ':';
    for (size_t i = 0; i < f.n; i++) {
        char c = f.p[i];
        if (c >= '0' && c <= '9') {
            if (in_frac) {
                if (frac_digits < 9) part[np] = part[np] * 10 + (uint64_t)(c - '0'), frac_digits++;
            } else {
                if (part[np] > UINT64_MAX / 10 - 10) return -1;
                part[np] = part[np] * 10 + (uint64_t)(c - '0');
            }
        } else if ((c == ':' || c == '.') && np < 3 && !in_frac) {
            /* the 3rd colon of H:M:S:f, or a dot, starts the fraction */
            if (c == '.' || (size_t)np == 2) in_frac = 1;
            np++;
        } else {
            return -1;
        }
    }
    (void)colons;
    if (!f.n) return -1;
    uint64_t frac = in_frac ? part[np] : 0;
    for (int d = frac_digits; d < 9; d++) frac *= 10;
    int whole = in_frac ? np : np + 1; /* number of whole-number parts */
    uint64_t secs = 0;
    if (whole == 1) secs = part[0];
    else if (whole == 3) secs = part[0] * 3600 + part[1] * 60 + part[2];
    else return -1;
    *ns = secs * 1000000000ULL + frac;
    return 0;
}

hbm_status hbm_trace_parse_rmm_csv(const char *text, size_t len, const char *name, hbm_trace **out) {
    if (!text || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_parse_rmm_csv: NULL argument");
    *out = NULL;
    if (!name) name = "rmm.csv";
    hbm_trace *t;
    hbm_status s = hbm_trace_new(&t);
    if (s) return s;
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->source, sizeof t->source, "rmm");
    hbmi_map threads; /* RMM thread id -> small number */
    hbmi_map_init(&threads);
    size_t off = 0, line = 0;
    uint64_t t0 = 0;
    int have_t0 = 0;
    while (!s && off < len) {
        size_t eol = off;
        while (eol < len && text[eol] != '\n') eol++;
        size_t n = eol - off;
        if (n && text[off + n - 1] == '\r') n--;
        line++;
        const char *l = text + off;
        off = eol + 1;
        if (line == 1) {
            if (n < 37 || memcmp(l, "Thread,Time,Action,Pointer,Size,Stream", 38 <= n ? 38 : n))
                s = hbmi_error(HBM_ERR_PARSE, "%s:1: expected the header Thread,Time,Action,Pointer,Size,Stream", name);
            continue;
        }
        if (!n) continue;
        field f[6];
        int nf = 0;
        size_t st = 0;
        for (size_t i = 0; i <= n && nf < 7; i++) {
            if (i == n || l[i] == ',') {
                if (nf < 6) f[nf] = (field){l + st, i - st};
                nf++;
                st = i + 1;
            }
        }
        if (nf != 6) {
            s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "expected 6 comma-separated fields, found %d", nf);
            break;
        }
        hbm_trace_event e = {0};
        uint64_t tid, ns;
        const char *what = NULL;
        if (parse_u64(f[0], 10, &tid)) what = "Thread: expected an integer thread id";
        else if (parse_time(f[1], &ns)) what = "Time: expected seconds (1634567890.123456) or HH:MM:SS.ffffff";
        else if (field_eq(f[2], "allocate")) e.kind = HBM_EV_ALLOC;
        else if (field_eq(f[2], "free") || field_eq(f[2], "deallocate")) e.kind = HBM_EV_FREE;
        else if (field_eq(f[2], "allocate failure")) e.kind = HBM_EV_OOM;
        else what = "Action: expected allocate, allocate failure, free or deallocate";
        if (!what && parse_u64(f[3], 16, &e.addr)) what = "Pointer: expected a hex address";
        if (!what && parse_u64(f[4], 10, &e.size)) what = "Size: expected a byte count";
        if (!what && parse_u64(f[5], 16, &e.stream)) what = "Stream: expected a hex stream handle";
        if (what) {
            s = hbmi_error_at(HBM_ERR_PARSE, name, line, 0, "%s", what);
            break;
        }
        if (!have_t0) t0 = ns, have_t0 = 1;
        e.time_ns = ns >= t0 ? ns - t0 : 0;
        uint64_t small;
        if (!hbmi_map_get(&threads, tid == UINT64_MAX ? 0 : tid, &small)) {
            small = threads.count + 1;
            if ((s = hbmi_map_put(&threads, tid == UINT64_MAX ? 0 : tid, small))) break;
        }
        e.thread = (uint32_t)small;
        if (e.kind == HBM_EV_ALLOC) e.requested = e.size;
        if (e.kind == HBM_EV_OOM) e.requested = e.size, e.size = 0, e.addr = 0;
        if (e.kind == HBM_EV_FREE) e.size = 0; /* the block's size comes from its alloc */
        s = hbm_trace_add(t, &e);
    }
    if (!s && line == 0) s = hbmi_error(HBM_ERR_PARSE, "%s:1: empty file, expected the RMM header", name);
    hbmi_map_destroy(&threads);
    if (s) {
        hbm_trace_free(t);
        return s;
    }
    *out = t;
    return HBM_OK;
}
