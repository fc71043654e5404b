/* format.c - the native trace file: a 32-byte header, then records appended as they
 * happen (docs/trace-format.md). The writer buffers HBM_TRACE_FLUSH_EVENTS events; the
 * reader checks every record and names the byte offset of anything unexpected. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_internal.h"

#define WBUF (HBM_TRACE_FLUSH_EVENTS * HBMI_EVENT_MAX)

struct hbm_trace_writer {
    FILE *f;
    char *path;
    size_t n;
    uint32_t events; /* in the buffer */
    hbmi_ev_state st;
    unsigned char buf[WBUF];
};

/* ---- writer ------------------------------------------------------------------------------ */

static hbm_status w_flush(hbm_trace_writer *w) {
    if (w->n && fwrite(w->buf, 1, w->n, w->f) != w->n) {
        w->n = 0;
        return hbmi_error(HBM_ERR_IO, "writing trace %s: %s", w->path, strerror(errno));
    }
    w->n = 0;
    w->events = 0;
    return fflush(w->f) ? hbmi_error(HBM_ERR_IO, "writing trace %s: %s", w->path, strerror(errno)) : HBM_OK;
}

static hbm_status w_put(hbm_trace_writer *w, const void *data, size_t n) {
    if (w->n + n > WBUF) {
        hbm_status s = w_flush(w);
        if (s) return s;
        if (n > WBUF) {
            if (fwrite(data, 1, n, w->f) != n) return hbmi_error(HBM_ERR_IO, "writing trace %s", w->path);
            return HBM_OK;
        }
    }
    memcpy(w->buf + w->n, data, n);
    w->n += n;
    return HBM_OK;
}

/* A variable-length record: type, 3 zero bytes, u32 payload length, payload. */
static hbm_status w_record(hbm_trace_writer *w, int type, const unsigned char *payload, size_t n) {
    unsigned char h[8] = {(unsigned char)type, 0, 0, 0};
    if (n > UINT32_MAX) return hbmi_error(HBM_ERR_INVALID, "trace record of %zu bytes is too long", n);
    hbmi_put32(h + 4, (uint32_t)n);
    hbm_status s = w_put(w, h, 8);
    return s ? s : w_put(w, payload, n);
}

static hbm_status w_meta(hbm_trace_writer *w, const char *key, const char *val) {
    size_t kl = strlen(key), vl = strlen(val);
    unsigned char *p = hbmi_malloc(8 + kl + vl);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbmi_put32(p, (uint32_t)kl);
    memcpy(p + 4, key, kl);
    hbmi_put32(p + 4 + kl, (uint32_t)vl);
    memcpy(p + 8 + kl, val, vl);
    hbm_status s = w_record(w, HBMI_REC_META, p, 8 + kl + vl);
    hbmi_free(p);
    return s;
}

hbm_status hbmi_trace_writer_device(hbm_trace_writer *w, const char *name, int index, uint64_t bytes) {
    hbm_status s = HBM_OK;
    char v[64];
    if (name && *name) { /* as a reader takes it: 1 to 63 printable bytes */
        snprintf(v, sizeof v, "%s", name);
        for (char *c = v; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
        s = w_meta(w, "device", v);
    }
    if (!s && index >= 0 && index <= 4096) snprintf(v, sizeof v, "%d", index), s = w_meta(w, "device_index", v);
    if (!s && bytes && bytes <= 1ull << 62) snprintf(v, sizeof v, "%" PRIu64, bytes), s = w_meta(w, "device_bytes", v);
    return s;
}

hbm_status hbmi_trace_writer_fopen(FILE *f, const char *path, const char *device, uint64_t capacity,
                                   hbm_trace_writer **out) {
    *out = NULL;
    hbm_trace_writer *w = hbmi_calloc(1, sizeof *w);
    if (!w || !(w->path = hbmi_strdup(path))) {
        hbmi_free(w);
        fclose(f);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a trace writer");
    }
    w->f = f;
    unsigned char h[HBMI_TRACE_HEADER] = {0};
    memcpy(h, HBMI_TRACE_MAGIC, 8);
    hbmi_put32(h + 8, HBMI_TRACE_VERSION);
    hbmi_put32(h + 12, HBMI_TRACE_HEADER);
    hbmi_put64(h + 16, capacity);
    hbmi_put32(h + 24, 0); /* flags: none defined */
    hbm_status s = w_put(w, h, sizeof h);
    if (!s) s = hbmi_trace_writer_device(w, device, -1, 0);
    if (!s) s = w_flush(w);
    if (s) {
        fclose(w->f);
        hbmi_free(w->path);
        hbmi_free(w);
        return s;
    }
    *out = w;
    return HBM_OK;
}

hbm_status hbm_trace_writer_open(const char *path, const char *device, uint64_t capacity, hbm_trace_writer **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_writer_open: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "wb");
    if (!f) return hbmi_error(HBM_ERR_IO, "cannot create trace %s: %s", path, strerror(errno));
    return hbmi_trace_writer_fopen(f, path, device, capacity, out);
}

hbm_status hbmi_trace_writer_meta(hbm_trace_writer *w, const char *key, const char *value) {
    return w_meta(w, key, value);
}

hbm_status hbm_trace_writer_tag(hbm_trace_writer *w, uint32_t id, const hbm_tag *tag) {
    if (!w || !tag) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_writer_tag: NULL argument");
    const char *str[4] = {tag->op_name, tag->shape, tag->source_file, tag->label};
    size_t len[4], total = 12;
    for (int i = 0; i < 4; i++) total += 4 + (len[i] = str[i] ? strlen(str[i]) : 0);
    unsigned char *p = hbmi_malloc(total);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbmi_put32(p, id);
    hbmi_put32(p + 4, (uint32_t)tag->source_line);
    hbmi_put32(p + 8, (uint32_t)tag->category);
    size_t o = 12;
    for (int i = 0; i < 4; i++) {
        /* a NULL string is written with length 0xffffffff so it reads back as NULL */
        hbmi_put32(p + o, str[i] ? (uint32_t)len[i] : UINT32_MAX);
        if (len[i]) memcpy(p + o + 4, str[i], len[i]);
        o += 4 + len[i];
    }
    hbm_status s = w_record(w, HBMI_REC_TAG, p, total);
    hbmi_free(p);
    return s;
}

hbm_status hbm_trace_writer_backtrace(hbm_trace_writer *w, uint32_t id, const uint64_t *frames, size_t n) {
    if (!w) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_writer_backtrace: NULL writer");
    unsigned char *p = hbmi_malloc(8 + 8 * n);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbmi_put32(p, id);
    hbmi_put32(p + 4, (uint32_t)n);
    for (size_t i = 0; i < n; i++) hbmi_put64(p + 8 + 8 * i, frames[i]);
    hbm_status s = w_record(w, HBMI_REC_BACKTRACE, p, 8 + 8 * n);
    hbmi_free(p);
    return s;
}

hbm_status hbm_trace_writer_event(hbm_trace_writer *w, const hbm_trace_event *e) {
    if (HBMI_UNLIKELY(w->events >= HBM_TRACE_FLUSH_EVENTS || w->n + HBMI_EVENT_MAX > WBUF)) {
        hbm_status s = w_flush(w);
        if (s) return s;
    }
    w->n += hbmi_event_encode(w->buf + w->n, e, &w->st);
    w->events++;
    return HBM_OK;
}

hbm_status hbm_trace_writer_flush(hbm_trace_writer *w) {
    return w ? w_flush(w) : hbmi_error(HBM_ERR_INVALID, "hbm_trace_writer_flush: NULL writer");
}

hbm_status hbm_trace_writer_close(hbm_trace_writer *w) {
    if (!w) return HBM_OK;
    hbm_status s = w_flush(w);
    if (fclose(w->f) && !s) s = hbmi_error(HBM_ERR_IO, "closing trace %s: %s", w->path, strerror(errno));
    hbmi_free(w->path);
    hbmi_free(w);
    return s;
}

hbm_status hbm_trace_write(const hbm_trace *t, const char *path) {
    if (!t || !path) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_write: NULL argument");
    hbm_trace_writer *w;
    hbm_status s = hbm_trace_writer_open(path, t->device, t->capacity, &w);
    if (s) return s;
    if (t->source[0]) s = w_meta(w, "source", t->source);
    if (!s && t->name[0]) s = w_meta(w, "name", t->name);
    if (!s && t->stacks) s = w_meta(w, "stacks", "frames"); /* before the backtraces that use it */
    /* a snapshot's: no times, its rebuilt state, its device number */
    char v[64];
    if (!s && !t->has_time) s = w_meta(w, "time", "none");
    if (!s && t->device_index) snprintf(v, sizeof v, "%d", t->device_index), s = w_meta(w, "device_index", v);
    if (!s && t->history_start) {
        snprintf(v, sizeof v, "%zu %" PRIu64 " %" PRIu64 " %" PRIu64, t->history_start, t->live_before_bytes,
                 t->live_before_blocks, t->reserved_before_bytes);
        s = w_meta(w, "history_start", v);
    }
    for (uint32_t i = 1; !s && i <= hbm_trace_tag_count(t); i++) s = hbm_trace_writer_tag(w, i, hbm_trace_tag(t, i));
    for (uint32_t i = 1; !s && i <= t->priv_->bt_count; i++) {
        size_t n;
        const uint64_t *fr = hbm_trace_backtrace(t, i, &n);
        s = hbm_trace_writer_backtrace(w, i, fr, n);
    }
    for (size_t i = 0; !s && i < t->count; i++) s = hbm_trace_writer_event(w, &t->events[i]);
    hbm_status c = hbm_trace_writer_close(w);
    return s ? s : c;
}

/* ---- reader ------------------------------------------------------------------------------ */

typedef struct rd {
    hbm_trace *t;
    uint32_t *tagmap; /* file tag id -> trace tag id */
    size_t tagmap_cap;
    uint32_t *btmap;
    size_t btmap_cap;
} rd;

static hbm_status bad(const char *name, size_t off, const char *what) {
    return hbmi_error(HBM_ERR_PARSE, "%s: byte offset %zu: %s", name, off, what);
}

static hbm_status map_set(uint32_t **m, size_t *cap, uint32_t key, uint32_t val) {
    if (key >= 1u << 26) return hbmi_error(HBM_ERR_PARSE, "id %u is too large", key);
    size_t old = *cap;
    hbm_status s = hbmi_grow((void **)m, cap, (size_t)key + 1, sizeof **m);
    if (s) return s;
    if (*cap > old) memset(*m + old, 0, (*cap - old) * sizeof **m);
    (*m)[key] = val;
    return HBM_OK;
}

static hbm_status rd_tag(rd *r, const unsigned char *p, size_t n, const char *name, size_t off) {
    if (n < 12) return bad(name, off, "tag record shorter than 12 bytes");
    uint32_t id = hbmi_get32(p);
    hbm_tag tag = {0};
    tag.source_line = (int)hbmi_get32(p + 4);
    uint32_t cat = hbmi_get32(p + 8);
    tag.category = cat < HBM_CAT_COUNT_ ? (hbm_category)cat : HBM_CAT_NONE;
    char *str[4] = {0};
    size_t o = 12;
    hbm_status s = HBM_OK;
    for (int i = 0; i < 4 && !s; i++) {
        if (o + 4 > n) {
            s = bad(name, off + 8 + o, "tag record ends before its strings");
            break;
        }
        uint32_t len = hbmi_get32(p + o);
        o += 4;
        if (len == UINT32_MAX) continue;
        if (len > n - o) {
            s = bad(name, off + 8 + o - 4, "tag string longer than its record");
            break;
        }
        if (!(str[i] = hbmi_malloc(len + 1))) {
            s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
            break;
        }
        memcpy(str[i], p + o, len);
        str[i][len] = 0;
        o += len;
    }
    uint32_t tid = 0;
    if (!s) {
        tag.op_name = str[0];
        tag.shape = str[1];
        tag.source_file = str[2];
        tag.label = str[3];
        s = hbm_trace_intern(r->t, &tag, &tid);
    }
    if (!s) s = map_set(&r->tagmap, &r->tagmap_cap, id, tid);
    for (int i = 0; i < 4; i++) hbmi_free(str[i]);
    return s;
}

static hbm_status rd_bt(rd *r, const unsigned char *p, size_t n, const char *name, size_t off) {
    if (n < 8) return bad(name, off, "backtrace record shorter than 8 bytes");
    uint32_t id = hbmi_get32(p), k = hbmi_get32(p + 4);
    if ((n - 8) / 8 < k) return bad(name, off, "backtrace frame count exceeds its record");
    uint64_t *fr = hbmi_malloc(8 * (size_t)k + 1);
    if (!fr) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (uint32_t i = 0; i < k; i++) {
        fr[i] = hbmi_get64(p + 8 + 8 * i);
        if (r->t->stacks) { /* frames are tag ids: renumber them as the tags were */
            if (fr[i] >= r->tagmap_cap || !r->tagmap[fr[i]]) {
                hbmi_free(fr);
                return bad(name, off, "stack frame uses a tag id that no earlier record declared");
            }
            fr[i] = r->tagmap[fr[i]];
        }
    }
    uint32_t bid;
    hbm_status s = hbm_trace_add_backtrace(r->t, fr, k, &bid);
    hbmi_free(fr);
    return s ? s : map_set(&r->btmap, &r->btmap_cap, id, bid);
}

/* A device field that is not what a writer writes: the offending value (its first 64
 * bytes, control bytes shown as '?'), named. */
static hbm_status bad_device(const char *name, size_t off, const char *key, const char *v, size_t vl, const char *want) {
    char shown[65], m[256];
    size_t n = vl < 64 ? vl : 64;
    for (size_t i = 0; i < n; i++) shown[i] = (unsigned char)v[i] < 0x20 || v[i] == 0x7f ? '?' : v[i];
    shown[n] = 0;
    snprintf(m, sizeof m, "meta %s '%s' is not %s", key, shown, want);
    return bad(name, off, m);
}

/* A decimal number of at most 19 digits and nothing else; 0 = not one. */
static int decimal(const char *v, size_t vl, uint64_t *out) {
    uint64_t x = 0;
    if (!vl || vl > 19) return 0;
    for (size_t i = 0; i < vl; i++) {
        if (v[i] < '0' || v[i] > '9') return 0;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return 1;
}

/* The meta record at byte offset off. The device fields (device, device_index,
 * device_bytes) are checked: a bad one is an error naming it; other keys are lenient. */
static hbm_status rd_meta(rd *r, const unsigned char *p, size_t n, const char *name, size_t off) {
    if (n < 4) return HBM_OK;
    uint32_t kl = hbmi_get32(p);
    if (kl > n - 4 || n - 4 - kl < 4) return HBM_OK;
    uint32_t vl = hbmi_get32(p + 4 + kl);
    if (vl > n - 8 - kl) return HBM_OK;
    const char *k = (const char *)p + 4, *v = (const char *)p + 8 + kl;
    char *dst = NULL;
    size_t cap = 0;
    uint64_t x;
    if (kl == 6 && !memcmp(k, "device", 6)) {
        int ok = vl > 0 && vl < sizeof r->t->device;
        for (uint32_t i = 0; ok && i < vl; i++) ok = (unsigned char)v[i] >= 0x20 && v[i] != 0x7f;
        if (!ok) return bad_device(name, off, "device", v, vl, "a device name (1 to 63 printable bytes)");
    }
    if (kl == 12 && !memcmp(k, "device_index", 12)) {
        if (!decimal(v, vl, &x) || x > 4096) return bad_device(name, off, "device_index", v, vl, "a device number 0 to 4096");
        r->t->device_index = (int)x;
    }
    if (kl == 12 && !memcmp(k, "device_bytes", 12)) {
        if (!decimal(v, vl, &x) || !x || x > (1ull << 62))
            return bad_device(name, off, "device_bytes", v, vl, "the device's total bytes (a decimal number, 1 to 2^62)");
        r->t->capacity = x; /* the device's total as the driver reported it: it replaces the header's */
    }
    if (kl == 6 && !memcmp(k, "stacks", 6)) r->t->stacks = vl == 6 && !memcmp(v, "frames", 6);
    if (kl == 6 && !memcmp(k, "device", 6)) dst = r->t->device, cap = sizeof r->t->device;
    else if (kl == 6 && !memcmp(k, "source", 6)) dst = r->t->source, cap = sizeof r->t->source;
    else if (kl == 4 && !memcmp(k, "name", 4)) dst = r->t->name, cap = sizeof r->t->name;
    if (dst) snprintf(dst, cap, "%.*s", (int)vl, v);
    char num[96];
    snprintf(num, sizeof num, "%.*s", (int)(vl < sizeof num ? vl : 0), v);
    if (kl == 4 && !memcmp(k, "time", 4)) r->t->has_time = strcmp(num, "none") != 0;
    unsigned long long hs, lb, lk, rb;
    if (kl == 13 && !memcmp(k, "history_start", 13) && sscanf(num, "%llu %llu %llu %llu", &hs, &lb, &lk, &rb) == 4) {
        r->t->history_start = (size_t)hs; /* checked against the events read */
        r->t->live_before_bytes = lb;
        r->t->live_before_blocks = lk;
        r->t->reserved_before_bytes = rb;
    }
    return HBM_OK;
}

hbm_status hbm_trace_parse(const void *data, size_t len, const char *name, hbm_trace **out) {
    if (!data || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_parse: NULL argument");
    *out = NULL;
    if (!name) name = "trace";
    const unsigned char *p = data;
    if (len < HBMI_TRACE_HEADER || memcmp(p, HBMI_TRACE_MAGIC, 8))
        return bad(name, 0, "expected the 32-byte header starting with \"HBMTRACE\"");
    uint32_t ver = hbmi_get32(p + 8), hsize = hbmi_get32(p + 12), flags = hbmi_get32(p + 24);
    if (ver < HBMI_TRACE_VERSION_MIN || ver > HBMI_TRACE_VERSION) {
        char m[96];
        snprintf(m, sizeof m, "format version %u, expected %u to %u", ver, HBMI_TRACE_VERSION_MIN, HBMI_TRACE_VERSION);
        return bad(name, 8, m);
    }
    if (hsize < HBMI_TRACE_HEADER || hsize > len) return bad(name, 12, "header size below 32 or past the end");
    if (flags) return bad(name, 24, "unknown header flags (a newer writer?)");
    rd r = {0};
    hbm_status s = hbm_trace_new(&r.t);
    if (s) return s;
    r.t->capacity = hbmi_get64(p + 16);
    snprintf(r.t->name, sizeof r.t->name, "%s", name);
    snprintf(r.t->source, sizeof r.t->source, "hbm");
    /* reserve for the likely event count up front: records are mostly events */
    s = hbmi_big_grow((void **)&r.t->events, &r.t->priv_->cap, (len - hsize) / 12 + 1, sizeof *r.t->events);
    hbmi_ev_state st = {0, 0};
    /* version 1 had types 1-6, version 2 added 7, version 3 added 8 and 9 */
    unsigned last_event = ver >= 3 ? HBM_EV_SEGMENT_UNMAP : ver == 2 ? HBM_EV_SYNC : HBM_EV_FREE_REQUESTED;
    size_t off = hsize;
    while (!s && off < len) {
        unsigned type = p[off];
        if (type >= HBM_EV_ALLOC && type <= last_event) {
            uint64_t v[8];
            size_t q = off + 1;
            int torn = 0, toolong = 0;
            for (int k = 0; k < 8; k++) {
                int got = hbmi_varint_get(p, len, &q, &v[k]);
                torn = got == 0, toolong = got < 0;
                if (got <= 0) break;
            }
            if (torn) {
                r.t->truncated_at = off;
                break;
            }
            if (toolong || v[5] > UINT32_MAX || v[6] > UINT32_MAX || v[7] > UINT32_MAX) {
                s = bad(name, off, "event field out of range (varint longer than 64 bits or id above 2^32)");
                break;
            }
            hbm_trace_event e = {.kind = (uint8_t)type, .time_ns = st.time + v[0], .addr = st.addr + hbmi_unzigzag(v[1]),
                                 .size = v[2], .requested = v[2] - hbmi_unzigzag(v[3]), .stream = v[4],
                                 .thread = (uint32_t)v[5], .tag = (uint32_t)v[6], .backtrace = (uint32_t)v[7]};
            st.time = e.time_ns;
            st.addr = e.addr;
            if (e.tag) {
                if (e.tag >= r.tagmap_cap || !r.tagmap[e.tag]) {
                    s = bad(name, off, "event uses a tag id that no earlier tag record declared");
                    break;
                }
                e.tag = r.tagmap[e.tag];
            }
            if (e.backtrace) {
                if (e.backtrace >= r.btmap_cap || !r.btmap[e.backtrace]) {
                    s = bad(name, off, "event uses a backtrace id that no earlier record declared");
                    break;
                }
                e.backtrace = r.btmap[e.backtrace];
            }
            s = hbm_trace_add(r.t, &e);
            off = q;
            continue;
        }
        if (type < HBMI_REC_TAG) {
            char m[96];
            snprintf(m, sizeof m, "unknown record type 0x%02x (expected an event 1-%u or a record >= 0x10)", type,
                     last_event);
            s = bad(name, off, m);
            break;
        }
        if (len - off < 8) {
            r.t->truncated_at = off;
            break;
        }
        uint32_t n = hbmi_get32(p + off + 4);
        if (n > len - off - 8) {
            r.t->truncated_at = off;
            break;
        }
        const unsigned char *q = p + off + 8;
        if (type == HBMI_REC_TAG) s = rd_tag(&r, q, n, name, off);
        else if (type == HBMI_REC_BACKTRACE) s = rd_bt(&r, q, n, name, off);
        else if (type == HBMI_REC_META) s = rd_meta(&r, q, n, name, off);
        /* other types >= 0x10 are skipped: later versions may add records */
        off += 8 + (size_t)n;
    }
    hbmi_free(r.tagmap);
    hbmi_free(r.btmap);
    if (!s && r.t->history_start > r.t->count)
        s = bad(name, 0, "meta history_start is beyond the events of the trace");
    if (s) {
        hbm_trace_free(r.t);
        return s;
    }
    *out = r.t;
    return HBM_OK;
}

static hbm_status parse_cb(const char *data, size_t len, const char *name, void *out) {
    return hbm_trace_parse(data, len, name, out);
}

hbm_status hbm_trace_read(const char *path, hbm_trace **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_read: NULL argument");
    return hbmi_parse_file(path, parse_cb, out);
}
