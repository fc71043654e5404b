/* sniff.c - what a file is, from its first bytes: the kinds of file hbm reads, and the
 * ones people hand it by mistake (a profile, a trace of another tool, a compressed copy). */
#include <string.h>

#include "core/internal.h"
#include "hbm/file.h"

#define SNIFF_HEAD ((size_t)64 << 10)

const char *hbm_file_kind_str(hbm_file_kind kind) {
    static const char *const text[] = {
#define HBM_FILE_TEXT_(name, t) t,
        HBM_FILE_KINDS(HBM_FILE_TEXT_)
#undef HBM_FILE_TEXT_
    };
    return (unsigned)kind < sizeof text / sizeof text[0] ? text[kind] : text[0];
}

/* A length-delimited field 1..3 at p[*i] holding a short printable name (a module's or a
 * computation's): its field number, else 0. */
static int name_field(const unsigned char *p, size_t len, size_t *i) {
    uint64_t n;
    if (*i >= len || (p[*i] != 0x0a && p[*i] != 0x12 && p[*i] != 0x1a)) return 0;
    int field = p[(*i)++] >> 3;
    if (hbmi_varint_get(p, len, i, &n) <= 0 || n == 0 || n > 4096 || n > len - *i) return 0;
    for (uint64_t k = 0; k < n; k++)
        if (p[*i + k] < 0x20 || p[*i + k] >= 0x7f) return 0;
    *i += (size_t)n;
    return field;
}

/* xla.HloProto {1 hlo_module: HloModuleProto {1 name, 2 entry_computation_name, ...}}, an
 * HloSnapshot around it, or an HloModuleProto alone: a name field 1 then field 2, at
 * some depth of field-1 messages. */
static int is_hlo_proto(const unsigned char *p, size_t len) {
    size_t i = 0;
    for (int depth = 0; depth < 3 && i < len; depth++) {
        size_t j = i;
        if (name_field(p, len, &j) == 1 && name_field(p, len, &j) == 2) return 1;
        uint64_t n;
        if (p[i] != 0x0a) return 0;
        i++;
        if (hbmi_varint_get(p, len, &i, &n) <= 0) return 0;
    }
    return 0;
}

static int has(const unsigned char *p, size_t len, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= len; i++)
        if (p[i] == (unsigned char)s[0] && !memcmp(p + i, s, n)) return 1;
    return 0;
}

/* A CSV header of MiniMalloc's columns: id, lower/begin, upper/end, size (any order). */
static int is_minimalloc(const unsigned char *p, size_t len) {
    size_t e = 0;
    while (e < len && p[e] != '\n' && e < 256) e++;
    char line[258];
    for (size_t i = 0; i < e; i++) line[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 : p[i]);
    line[e] = 0;
    int lower = 0, size = 0, commas = 0;
    for (char *f = line; f; f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL) {
        while (*f == ' ') f++;
        size_t n = strcspn(f, ", \r");
        lower |= (n == 5 && !memcmp(f, "lower", 5)) || (n == 5 && !memcmp(f, "begin", 5));
        size |= n == 4 && !memcmp(f, "size", 4);
        commas += strchr(f, ',') != NULL;
    }
    return lower && size && commas >= 2;
}

hbm_file_kind hbm_file_sniff(const void *data, size_t len) {
    const unsigned char *p = data;
    if (!p || !len) return HBM_FILE_EMPTY;
    if (len > SNIFF_HEAD) len = SNIFF_HEAD; /* the head decides */
    if (len >= 2 && p[0] == 0x1f && p[1] == 0x8b) return HBM_FILE_GZIP;
    if (len >= 8 && !memcmp(p, "HBMTRACE", 8)) return HBM_FILE_HBM_TRACE;
    if (p[0] == 0x80 && len >= 2 && p[1] >= 2 && p[1] <= 5) return HBM_FILE_TORCH_PICKLE;
    size_t i = 0;
    if (len >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf) i = 3; /* UTF-8 byte-order mark */
    for (;;) { /* white space and comments, as the HLO parser skips them */
        while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n')) i++;
        if (i + 1 < len && p[i] == '/' && p[i + 1] == '/') {
            while (i < len && p[i] != '\n') i++;
        } else if (i + 1 < len && p[i] == '/' && p[i + 1] == '*') {
            i += 2;
            while (i + 1 < len && !(p[i] == '*' && p[i + 1] == '/')) i++;
            i = i + 1 < len ? i + 2 : len;
        } else {
            break;
        }
    }
    const unsigned char *t = p + i;
    size_t n = len - i;
    if (n >= 9 && !memcmp(t, "HloModule", 9)) return HBM_FILE_HLO;
    if (n >= 6 && !memcmp(t, "Thread", 6)) return HBM_FILE_RMM_CSV;
    if (n && (t[0] == '{' || t[0] == '[')) {
        /* Chrome's trace format: {"traceEvents": [...]} or a bare array of events; anything
         * else is left to the snapshot reader (its keys may lie past the head) */
        if (t[0] == '[' || (has(t, n < 4096 ? n : 4096, "\"traceEvents\"") && !has(t, n, "\"device_traces\"")))
            return HBM_FILE_PERFETTO;
        return HBM_FILE_TORCH_JSON;
    }
    if (p[0] == 0x0a && is_hlo_proto(p, len)) return HBM_FILE_HLO_PROTO;
    if (p[0] == 0x0a && (has(p, len, "/host:") || has(p, len, "/device:"))) return HBM_FILE_XSPACE;
    if (is_minimalloc(t, n)) return HBM_FILE_MINIMALLOC_CSV;
    size_t ctl = 0;
    for (size_t k = 0; k < len; k++) {
        if (!p[k]) return HBM_FILE_BINARY;
        ctl += p[k] < 0x20 && p[k] != '\t' && p[k] != '\n' && p[k] != '\r' && p[k] != '\f';
    }
    return ctl * 20 > len ? HBM_FILE_BINARY : HBM_FILE_UNKNOWN;
}

hbm_status hbm_file_sniff_path(const char *path, hbm_file_kind *kind, int *gzip) {
    if (!path || !kind) return hbmi_error(HBM_ERR_INVALID, "hbm_file_sniff_path: NULL argument");
    if (gzip) *gzip = 0;
    unsigned char *head;
    size_t len;
    hbm_status s = hbmi_read_head(path, SNIFF_HEAD, &head, &len);
    if (s) return s;
    *kind = hbm_file_sniff(head, len);
    if (*kind == HBM_FILE_GZIP) {
        unsigned char *in = NULL;
        size_t n = 0;
        if (gzip) *gzip = 1;
        if (!hbmi_gunzip(head, len, SNIFF_HEAD, path, &in, &n)) {
            hbm_file_kind k = hbm_file_sniff(in, n);
            *kind = k == HBM_FILE_EMPTY || k == HBM_FILE_GZIP ? HBM_FILE_GZIP : k;
            hbmi_free(in);
        }
        hbm_clear_error();
    }
    hbmi_free(head);
    return HBM_OK;
}
