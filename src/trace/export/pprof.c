/* pprof.c - a pprof heap profile (profile.proto), gzip-wrapped as `go tool pprof`
 * and pprof.me expect. Sample types: alloc_objects/count, alloc_space/bytes (everything
 * allocated over the trace) and inuse_objects/count, inuse_space/bytes (live at the peak of
 * bytes in use). One sample per (tag, backtrace): its stack is the tag's frame (op name,
 * source file:line) above the native return addresses. */
#include <string.h>

#include "trace/trace_internal.h"

/* ---- protobuf wire format ------------------------------------------------------------------ */

static hbm_status pb_varint(hbmi_buf *b, uint64_t v) {
    unsigned char t[10];
    return hbmi_buf_put(b, t, (size_t)(hbmi_varint_put(t, v) - t));
}
static hbm_status pb_key(hbmi_buf *b, unsigned field, unsigned wire) { return pb_varint(b, (uint64_t)field << 3 | wire); }
static hbm_status pb_uint(hbmi_buf *b, unsigned field, uint64_t v) {
    TRY(pb_key(b, field, 0));
    return pb_varint(b, v);
}
static hbm_status pb_bytes(hbmi_buf *b, unsigned field, const void *p, size_t n) {
    TRY(pb_key(b, field, 2));
    TRY(pb_varint(b, n));
    return hbmi_buf_put(b, p, n);
}
/* m as field of b; m is emptied for the next message */
static hbm_status pb_msg(hbmi_buf *b, unsigned field, hbmi_buf *m) {
    TRY(pb_bytes(b, field, m->p, m->n));
    m->n = 0;
    return HBM_OK;
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

/* *id: the string's place in the table, written there the first time */
static hbm_status str_id(strtab *st, const char *s, uint64_t *id) {
    *id = 0;
    if (!s || !*s) return HBM_OK;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = s; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    h = hbmi_hash64(h);
    if (h == UINT64_MAX) h = 0;
    if (hbmi_map_get(&st->index, h, id)) return HBM_OK;
    *id = st->n++;
    if (hbmi_map_put(&st->index, h, *id)) return hbmi_error(HBM_ERR_NOMEM, "out of host memory writing a pprof profile");
    return pb_bytes(&st->table, 6, s, strlen(s));
}

/* pb_uint of the id of string s */
static hbm_status pb_str(hbmi_buf *b, unsigned field, strtab *st, const char *s) {
    uint64_t id;
    TRY(str_id(st, s, &id));
    return pb_uint(b, field, id);
}

typedef struct group {
    uint32_t tag, bt;
    int64_t alloc_n, alloc_b, inuse_n, inuse_b;
} group;

#define W "a pprof profile"

/* The buffers a profile is written with: out the whole, m a sample or a value type, sub its
 * parts, packed a packed field, locs the locations and functions. */
typedef struct profile {
    hbmi_buf out, m, sub, packed, locs;
    strtab st;
    hbmi_map frame_ids; /* native return address -> location id */
} profile;

/* One location and function per tag, and one for untagged allocations (ids 1..ntags + 1). */
static hbm_status tag_locations(profile *pr, const hbm_trace *t, uint32_t ntags) {
    for (uint32_t i = 1; i <= ntags + 1; i++) {
        const hbm_tag *tg = i <= ntags ? hbm_trace_tag(t, i) : NULL;
        uint64_t id = i;
        hbmi_buf line = {.what = W};
        hbm_status s = pb_uint(&line, 1, id);
        if (!s && tg && tg->source_line > 0) s = pb_uint(&line, 2, (uint64_t)tg->source_line);
        if (!s) s = pb_uint(&pr->sub, 1, id);
        if (!s) s = pb_msg(&pr->sub, 4, &line);
        hbmi_buf_free(&line);
        TRY(s);
        TRY(pb_msg(&pr->locs, 4, &pr->sub));
        const char *name = tg ? (tg->op_name ? tg->op_name : (tg->label ? tg->label : "(tag)")) : "(untagged)";
        TRY(pb_uint(&pr->sub, 1, id));
        TRY(pb_str(&pr->sub, 2, &pr->st, name));
        TRY(pb_str(&pr->sub, 3, &pr->st, tg && tg->label ? tg->label : name));
        if (tg && tg->source_file) TRY(pb_str(&pr->sub, 4, &pr->st, tg->source_file));
        TRY(pb_msg(&pr->locs, 5, &pr->sub));
    }
    return HBM_OK;
}

/* Sample i: its stack (the tag's location over the native frames), its four values, its
 * labels. */
static hbm_status sample(profile *pr, const hbm_trace *t, const group *gi, uint64_t untagged, uint64_t *next_frame) {
    pr->packed.n = 0;
    if (gi->tag) TRY(pb_varint(&pr->packed, gi->tag));
    size_t nf = 0;
    const uint64_t *fr = hbm_trace_backtrace(t, gi->bt, &nf);
    for (size_t k = 0; k < nf; k++) {
        uint64_t id, a = fr[k] == UINT64_MAX ? 0 : fr[k];
        if (!hbmi_map_get(&pr->frame_ids, a, &id)) {
            id = (*next_frame)++;
            TRY(hbmi_map_put(&pr->frame_ids, a, id));
            TRY(pb_uint(&pr->sub, 1, id));
            TRY(pb_uint(&pr->sub, 3, fr[k]));
            TRY(pb_msg(&pr->locs, 4, &pr->sub));
        }
        TRY(pb_varint(&pr->packed, id));
    }
    if (!gi->tag && !nf) TRY(pb_varint(&pr->packed, untagged));
    TRY(pb_bytes(&pr->m, 1, pr->packed.p, pr->packed.n));
    pr->packed.n = 0;
    TRY(pb_varint(&pr->packed, (uint64_t)gi->alloc_n));
    TRY(pb_varint(&pr->packed, (uint64_t)gi->alloc_b));
    TRY(pb_varint(&pr->packed, (uint64_t)gi->inuse_n));
    TRY(pb_varint(&pr->packed, (uint64_t)gi->inuse_b));
    TRY(pb_bytes(&pr->m, 2, pr->packed.p, pr->packed.n));
    const hbm_tag *tg = hbm_trace_tag(t, gi->tag);
    if (tg && tg->shape) {
        TRY(pb_str(&pr->sub, 1, &pr->st, "shape"));
        TRY(pb_str(&pr->sub, 2, &pr->st, tg->shape));
        TRY(pb_msg(&pr->m, 3, &pr->sub));
    }
    if (tg && tg->category) {
        TRY(pb_str(&pr->sub, 1, &pr->st, "category"));
        TRY(pb_str(&pr->sub, 2, &pr->st, hbm_category_str(tg->category)));
        TRY(pb_msg(&pr->m, 3, &pr->sub));
    }
    return pb_msg(&pr->out, 2, &pr->m);
}

/* The profile of the groups g[0..ng) into pr->out. */
static hbm_status write_profile(profile *pr, const hbm_trace *t, const group *g, size_t ng) {
    strtab *st = &pr->st;
    TRY(pb_bytes(&st->table, 6, "", 0)); /* string 0 is "" */
    st->n = 1;
    static const char *types[4][2] = {{"alloc_objects", "count"}, {"alloc_space", "bytes"},
                                      {"inuse_objects", "count"}, {"inuse_space", "bytes"}};
    uint64_t s_space, s_bytes, s_inuse;
    TRY(str_id(st, "space", &s_space));
    TRY(str_id(st, "bytes", &s_bytes));
    TRY(str_id(st, "inuse_space", &s_inuse));
    for (int i = 0; i < 4; i++) {
        TRY(pb_str(&pr->m, 1, st, types[i][0]));
        TRY(pb_str(&pr->m, 2, st, types[i][1]));
        TRY(pb_msg(&pr->out, 1, &pr->m));
    }
    /* locations and functions: tag i -> id i; untagged -> ntags + 1; native frames after */
    uint32_t ntags = hbm_trace_tag_count(t);
    uint64_t untagged = (uint64_t)ntags + 1, next_frame = untagged + 1;
    for (size_t i = 0; i < ng; i++) TRY(sample(pr, t, &g[i], untagged, &next_frame));
    TRY(tag_locations(pr, t, ntags));
    TRY(hbmi_buf_put(&pr->out, pr->locs.p, pr->locs.n));
    TRY(hbmi_buf_put(&pr->out, st->table.p, st->table.n)); /* every string is interned by now */
    TRY(pb_uint(&pr->out, 10, t->count ? t->events[t->count - 1].time_ns : 0)); /* duration_nanos */
    TRY(pb_uint(&pr->sub, 1, s_space));
    TRY(pb_uint(&pr->sub, 2, s_bytes));
    TRY(pb_msg(&pr->out, 11, &pr->sub)); /* period_type */
    return pb_uint(&pr->out, 14, s_inuse); /* default_sample_type */
}

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

    profile pr = {.out = {.what = W}, .m = {.what = W}, .sub = {.what = W}, .packed = {.what = W}, .locs = {.what = W},
                  .st = {.table = {.what = W}}};
    hbmi_map_init(&pr.st.index);
    hbmi_map_init(&pr.frame_ids);
    if (!s) s = write_profile(&pr, t, g, ng);
    if (!s) s = gzip_write(pr.out.p, pr.out.n, f);
    hbmi_buf_free(&pr.out);
    hbmi_buf_free(&pr.m);
    hbmi_buf_free(&pr.sub);
    hbmi_buf_free(&pr.packed);
    hbmi_buf_free(&pr.locs);
    hbmi_buf_free(&pr.st.table);
    hbmi_map_destroy(&pr.st.index);
    hbmi_map_destroy(&pr.frame_ids);
    hbmi_map_destroy(&gidx);
    hbmi_free(g);
    return s;
}
