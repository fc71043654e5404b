/* pprof.c - a pprof heap profile (profile.proto), gzip-wrapped as `go tool pprof`
 * and pprof.me expect. Sample types: alloc_objects/count, alloc_space/bytes (everything
 * allocated over the trace) and inuse_objects/count, inuse_space/bytes (live at the peak of
 * bytes in use). One sample per (tag, backtrace): its stack is the tag's frame (op name,
 * source file:line) above the native return addresses. */
#include <string.h>

#include "trace/trace_internal.h"

/* ---- protobuf wire format ------------------------------------------------------------------ */

static void pb_varint(hbmi_buf *b, uint64_t v) {
    unsigned char t[10];
    hbmi_buf_put(b, t, (size_t)(hbmi_varint_put(t, v) - t));
}
static void pb_key(hbmi_buf *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)field << 3 | wire); }
static void pb_uint(hbmi_buf *b, unsigned field, uint64_t v) {
    pb_key(b, field, 0);
    pb_varint(b, v);
}
static void pb_bytes(hbmi_buf *b, unsigned field, const void *p, size_t n) {
    pb_key(b, field, 2);
    pb_varint(b, n);
    hbmi_buf_put(b, p, n);
}
static void pb_msg(hbmi_buf *b, unsigned field, hbmi_buf *m) {
    pb_bytes(b, field, m->p, m->n);
    if (m->oom) b->oom = 1;
    m->n = 0;
}

/* ---- gzip with stored deflate blocks (valid for every reader; the profile is small) -------- */

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n) {
    static uint32_t table[256];
    static int init;
    if (!init) { /* benign race: every thread computes the same table */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        init = 1;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static hbm_status gzip_write(const unsigned char *p, size_t n, FILE *f) {
    static const unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    int ok = fwrite(hdr, 1, 10, f) == 10;
    size_t off = 0;
    do {
        size_t k = n - off > 65535 ? 65535 : n - off;
        unsigned char bh[5] = {off + k == n ? 1 : 0, (unsigned char)k, (unsigned char)(k >> 8),
                               (unsigned char)~k, (unsigned char)(~k >> 8)};
        ok = ok && fwrite(bh, 1, 5, f) == 5 && (k == 0 || fwrite(p + off, 1, k, f) == k);
        off += k;
    } while (off < n && ok);
    unsigned char tail[8];
    hbmi_put32(tail, crc32_update(0, p, n));
    hbmi_put32(tail + 4, (uint32_t)n);
    ok = ok && fwrite(tail, 1, 8, f) == 8;
    return ok ? HBM_OK : hbmi_error(HBM_ERR_IO, "writing the pprof profile failed");
}

/* ---- the profile ------------------------------------------------------------------------------ */

typedef struct strtab {
    hbmi_buf table; /* the encoded string_table entries, in order */
    hbmi_map index; /* hash -> id (collisions fall back to a new entry: harmless duplicates) */
    uint64_t n;
} strtab;

static uint64_t str_id(strtab *st, const char *s) {
    if (!s || !*s) return 0;
    uint64_t h = 0xcbf29ce484222325ULL, id;
    for (const char *p = s; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    h = hbmi_hash64(h);
    if (h == UINT64_MAX) h = 0;
    if (hbmi_map_get(&st->index, h, &id)) return id;
    id = st->n++;
    if (hbmi_map_put(&st->index, h, id)) st->table.oom = 1;
    pb_bytes(&st->table, 6, s, strlen(s));
    return id;
}

typedef struct group {
    uint32_t tag, bt;
    int64_t alloc_n, alloc_b, inuse_n, inuse_b;
} group;

hbm_status hbm_export_pprof(const hbm_trace *t, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_export_pprof: NULL argument");
    uint64_t *use, *res;
    hbm_status s = hbmi_trace_curves(t, &use, &res, NULL);
    if (s) return s;
    size_t peak_at = 0;
    for (size_t i = 0; i < t->count; i++)
        if (use[i] > use[peak_at]) peak_at = i;
    hbmi_free(use);
    hbmi_free(res);

    group *g = NULL;
    size_t ng = 0, gcap = 0;
    hbmi_map gidx, live; /* (tag, bt) -> group; addr -> alloc event index */
    hbmi_map_init(&gidx);
    hbmi_map_init(&live);
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        uint64_t key = e->addr == UINT64_MAX ? 0 : e->addr, gi;
        if (e->kind == HBM_EV_ALLOC) {
            uint32_t bt = t->stacks ? 0 : e->backtrace; /* source stacks: the tag names the frame */
            uint64_t gk = (uint64_t)e->tag << 32 | bt;
            if (!hbmi_map_get(&gidx, gk, &gi)) {
                if ((s = hbmi_grow((void **)&g, &gcap, ng + 1, sizeof *g))) break;
                g[ng] = (group){.tag = e->tag, .bt = bt};
                gi = ng++;
                if ((s = hbmi_map_put(&gidx, gk, gi))) break;
            }
            g[gi].alloc_n++;
            g[gi].alloc_b += (int64_t)(e->requested ? e->requested : e->size); /* in use = bytes asked for */
            if (i <= peak_at) s = hbmi_map_put(&live, key, i);
        } else if (e->kind == HBM_EV_FREE && i <= peak_at) {
            hbmi_map_del(&live, key, NULL);
        }
    }
    /* what was live right after the peak event */
    for (size_t k = 0; !s && k < live.cap; k++) {
        if (!live.s[k].key) continue;
        const hbm_trace_event *a = &t->events[live.s[k].val];
        uint64_t gi = 0;
        hbmi_map_get(&gidx, (uint64_t)a->tag << 32 | (t->stacks ? 0 : a->backtrace), &gi);
        g[gi].inuse_n++;
        g[gi].inuse_b += (int64_t)(a->requested ? a->requested : a->size);
    }
    hbmi_map_destroy(&live);

    hbmi_buf out = {0}, m = {0}, sub = {0}, packed = {0};
    strtab st = {0};
    hbmi_map_init(&st.index);
    pb_bytes(&st.table, 6, "", 0); /* string 0 is "" */
    st.n = 1;
    static const char *types[4][2] = {{"alloc_objects", "count"}, {"alloc_space", "bytes"},
                                      {"inuse_objects", "count"}, {"inuse_space", "bytes"}};
    uint64_t s_space = str_id(&st, "space"), s_bytes = str_id(&st, "bytes"), s_inuse = str_id(&st, "inuse_space");
    for (int i = 0; i < 4 && !s; i++) {
        pb_uint(&m, 1, str_id(&st, types[i][0]));
        pb_uint(&m, 2, str_id(&st, types[i][1]));
        pb_msg(&out, 1, &m);
    }
    /* locations and functions: tag i -> id i; untagged -> ntags + 1; native frames after */
    uint32_t ntags = hbm_trace_tag_count(t);
    uint64_t untagged = (uint64_t)ntags + 1;
    hbmi_map frame_ids;
    hbmi_map_init(&frame_ids);
    uint64_t next_frame = untagged + 1;
    hbmi_buf locs = {0};
    for (size_t i = 0; i < ng && !s; i++) {
        packed.n = 0;
        if (g[i].tag) pb_varint(&packed, g[i].tag);
        size_t nf = 0;
        const uint64_t *fr = hbm_trace_backtrace(t, g[i].bt, &nf);
        for (size_t k = 0; k < nf; k++) {
            uint64_t id, a = fr[k] == UINT64_MAX ? 0 : fr[k];
            if (!hbmi_map_get(&frame_ids, a, &id)) {
                id = next_frame++;
                if ((s = hbmi_map_put(&frame_ids, a, id))) break;
                pb_uint(&sub, 1, id);
                pb_uint(&sub, 3, fr[k]);
                pb_msg(&locs, 4, &sub);
            }
            pb_varint(&packed, id);
        }
        if (!g[i].tag && !nf) pb_varint(&packed, untagged);
        pb_bytes(&m, 1, packed.p, packed.n);
        packed.n = 0;
        pb_varint(&packed, (uint64_t)g[i].alloc_n);
        pb_varint(&packed, (uint64_t)g[i].alloc_b);
        pb_varint(&packed, (uint64_t)g[i].inuse_n);
        pb_varint(&packed, (uint64_t)g[i].inuse_b);
        pb_bytes(&m, 2, packed.p, packed.n);
        const hbm_tag *tg = hbm_trace_tag(t, g[i].tag);
        if (tg && tg->shape) {
            pb_uint(&sub, 1, str_id(&st, "shape"));
            pb_uint(&sub, 2, str_id(&st, tg->shape));
            pb_msg(&m, 3, &sub);
        }
        if (tg && tg->category) {
            pb_uint(&sub, 1, str_id(&st, "category"));
            pb_uint(&sub, 2, str_id(&st, hbm_category_str(tg->category)));
            pb_msg(&m, 3, &sub);
        }
        pb_msg(&out, 2, &m);
    }
    /* a location + function for each tag, and one for untagged allocations */
    for (uint32_t i = 1; i <= ntags + 1 && !s; i++) {
        const hbm_tag *tg = i <= ntags ? hbm_trace_tag(t, i) : NULL;
        uint64_t id = i;
        hbmi_buf line = {0};
        pb_uint(&line, 1, id);
        if (tg && tg->source_line > 0) pb_uint(&line, 2, (uint64_t)tg->source_line);
        pb_uint(&sub, 1, id);
        pb_msg(&sub, 4, &line);
        hbmi_buf_free(&line);
        pb_msg(&locs, 4, &sub);
        const char *name = tg ? (tg->op_name ? tg->op_name : (tg->label ? tg->label : "(tag)")) : "(untagged)";
        pb_uint(&sub, 1, id);
        pb_uint(&sub, 2, str_id(&st, name));
        pb_uint(&sub, 3, str_id(&st, tg && tg->label ? tg->label : name));
        if (tg && tg->source_file) pb_uint(&sub, 4, str_id(&st, tg->source_file));
        pb_msg(&locs, 5, &sub);
    }
    hbmi_buf_put(&out, locs.p, locs.n);
    hbmi_buf_put(&out, st.table.p, st.table.n); /* every string is interned by now */
    if (st.table.oom || locs.oom) out.oom = 1;
    pb_uint(&out, 10, t->count ? t->events[t->count - 1].time_ns : 0); /* duration_nanos */
    pb_uint(&sub, 1, s_space);
    pb_uint(&sub, 2, s_bytes);
    pb_msg(&out, 11, &sub);      /* period_type */
    pb_uint(&out, 14, s_inuse); /* default_sample_type */
    if (!s && out.oom) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory writing a pprof profile");
    if (!s) s = gzip_write(out.p, out.n, f);
    hbmi_buf_free(&out);
    hbmi_buf_free(&m);
    hbmi_buf_free(&sub);
    hbmi_buf_free(&packed);
    hbmi_buf_free(&locs);
    hbmi_buf_free(&st.table);
    hbmi_map_destroy(&st.index);
    hbmi_map_destroy(&frame_ids);
    hbmi_map_destroy(&gidx);
    hbmi_free(g);
    return s;
}
