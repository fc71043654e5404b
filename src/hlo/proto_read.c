/* proto_read.c - reading XLA's protobuf inputs with protobuf-c (see proto.c for the
 * sniffing): the profile's module list, each module into the text parser's model, XLA's
 * buffer assignment summed and its heap trace replayed. Every allocation protobuf-c makes
 * goes to an arena (the module's own for a module), so nothing is freed piecemeal. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/size.h"
#include "hlo/hlo_internal.h"

#ifdef HBM_HAVE_PROTOBUF_C
#include <protobuf-c/protobuf-c.h>

#include "hbm_xla.pb-c.h"
#include "hbm_xplane.pb-c.h"

typedef struct pmod {
    char *name;        /* as listed */
    char *module_name;
    int64_t program_id;
    const uint8_t *data;
    size_t len;
    int module_only;   /* an HloModuleProto, not an HloProto */
    int has_assignment;
    hbm_xla_stats st;
    size_t order;      /* position in the file */
} pmod;

struct hbm_proto_file {
    hbm_proto_kind kind;
    char path[4096];
    size_t hosts;
    char *buf;
    size_t len;
    hbmi_arena arena; /* the unpacked XSpace, names */
    pmod *mods;
    size_t n, cap;
    hbmi_hlo_backend hint; /* backend from the profile's device planes */
};

int hbm_proto_available(void) { return 1; }

static void *arena_cb(void *d, size_t n) { return hbmi_arena_alloc(d, n); }
static void arena_nofree(void *d, void *p) { (void)d, (void)p; }

static char *arena_strdup(hbmi_arena *a, const char *s, size_t n) {
    char *r = hbmi_arena_alloc(a, n + 1);
    if (r) memcpy(r, s, n);
    return r;
}

/* The framing only (tag, length) of one field at *i of a message: its number (0 past 2^32),
 * and for a length-delimited field its bytes. Lets the listing hand protobuf-c just the
 * submessages it needs (the metadata plane, each allocation) instead of copying a profile's
 * whole trace into unknown fields. 1: a field, 0: the end, -1: malformed. */
static int frame_next(const uint8_t *p, size_t n, size_t *i, uint32_t *field, const uint8_t **body, size_t *blen) {
    if (*i >= n) return 0;
    uint64_t tag, v;
    if (hbmi_varint_get(p, n, i, &tag) <= 0) return -1;
    *field = tag >> 3 <= UINT32_MAX ? (uint32_t)(tag >> 3) : 0;
    *body = NULL;
    *blen = 0;
    switch (tag & 7) {
    case 0: return hbmi_varint_get(p, n, i, &v) > 0 ? 1 : -1;
    case 1: if (n - *i < 8) return -1; *i += 8; return 1;
    case 5: if (n - *i < 4) return -1; *i += 4; return 1;
    case 2:
        if (hbmi_varint_get(p, n, i, &v) <= 0 || v > n - *i) return -1;
        *body = p + *i;
        *blen = (size_t)v;
        *i += (size_t)v;
        return 1;
    default: return -1;
    }
}

/* protobuf-c has no nesting limit: a ShapeProto nested a million deep would exhaust the
 * stack. This walks the wire format once, guided by protobuf-c's own descriptors, and
 * rejects nesting deeper than any XLA shape (64 tuple levels, as the text parser allows). */
#define WIRE_DEPTH 80
static int wire_ok(const uint8_t *p, size_t n, const ProtobufCMessageDescriptor *d, int depth) {
    if (depth > WIRE_DEPTH) return 0;
    size_t i = 0, bl;
    uint32_t fld;
    const uint8_t *b;
    int r;
    while ((r = frame_next(p, n, &i, &fld, &b, &bl)) > 0) {
        /* each level of nesting takes two bytes at least (tag, length): bl bytes nest at most
         * bl / 2 deep, and a field that cannot pass the limit need not be walked */
        if (!b || (uint64_t)depth + 1 + bl / 2 <= WIRE_DEPTH) continue;
        const ProtobufCFieldDescriptor *fd = d && fld ? protobuf_c_message_descriptor_get_field(d, fld) : NULL;
        if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE && !wire_ok(b, bl, fd->descriptor, depth + 1)) return 0;
    }
    return r == 0;
}

/* the string field `want` of a message (its first), copied into a; "" if none; NULL if malformed */
static char *frame_string(hbmi_arena *a, const uint8_t *p, size_t n, uint32_t want) {
    size_t i = 0, bl;
    uint32_t fld;
    const uint8_t *b;
    int r;
    while ((r = frame_next(p, n, &i, &fld, &b, &bl)) > 0)
        if (fld == want && b) return arena_strdup(a, (const char *)b, bl);
    return r < 0 ? NULL : arena_strdup(a, "", 0);
}

/* memory_analysis() from XLA's allocations: device memory (color 0) only. */
static void alloc_stats(Hbmpb__BufferAllocationProto *const *a, size_t n, hbm_xla_stats *st) {
    memset(st, 0, sizeof *st);
    for (size_t i = 0; i < n; i++) {
        const Hbmpb__BufferAllocationProto *x = a[i];
        uint64_t size = x->size > 0 ? (uint64_t)x->size : 0;
        if (x->color) {
            st->other_memory_bytes += size;
            continue;
        }
        st->n_allocations++;
        st->total_allocation_bytes += size;
        int param = x->is_entry_computation_parameter, out = x->maybe_live_out;
        if (param) st->argument_size_in_bytes += size;
        if (out) st->output_size_in_bytes += size;
        if (param && out) st->alias_size_in_bytes += size;
        if (x->is_constant) st->constant_size_in_bytes += size;
        if (x->is_thread_local) st->thread_local_size_in_bytes += size;
        if (!param && !out && !x->is_constant && !x->is_thread_local) st->temp_size_in_bytes += size;
    }
    st->peak_bytes = st->argument_size_in_bytes + st->output_size_in_bytes - st->alias_size_in_bytes +
                     st->temp_size_in_bytes + st->constant_size_in_bytes;
}

/* --- the module list ------------------------------------------------------------------------- */
static hbm_status add_module(hbm_proto_file *f, const char *name, int64_t program_id, const uint8_t *data,
                             size_t len, int module_only) {
    if (f->n == f->cap && hbmi_grow((void **)&f->mods, &f->cap, f->n + 1, sizeof *f->mods))
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    pmod *m = &f->mods[f->n];
    memset(m, 0, sizeof *m);
    m->program_id = program_id;
    m->data = data;
    m->len = len;
    m->module_only = module_only;
    m->order = f->n;
    /* the module's name and XLA's allocations, found by the framing; the rest untouched */
    hbmi_arena scratch = {0};
    ProtobufCAllocator al = {arena_cb, arena_nofree, &scratch};
    hbm_status s = HBM_OK;
    size_t i = 0, bl, na = 0, cap = 0;
    uint32_t fld;
    const uint8_t *b;
    int r;
    Hbmpb__BufferAllocationProto **allocs = NULL;
    if (module_only) {
        m->module_name = frame_string(&f->arena, data, len, 1);
        if (!m->module_name) s = HBM_ERR_PARSE;
    } else {
        while (!s && (r = frame_next(data, len, &i, &fld, &b, &bl)) > 0) {
            if (fld == 1 && b && !m->module_name) {
                if (!(m->module_name = frame_string(&f->arena, b, bl, 1))) s = HBM_ERR_PARSE;
            } else if (fld == 3 && b) { /* buffer_assignment: its buffer_allocations (3) */
                m->has_assignment = 1;
                size_t j = 0, al_len;
                const uint8_t *ab;
                uint32_t af;
                int q;
                while (!s && (q = frame_next(b, bl, &j, &af, &ab, &al_len)) > 0) {
                    if (af != 3 || !ab) continue;
                    if (na == cap && hbmi_grow((void **)&allocs, &cap, na + 1, sizeof *allocs)) s = HBM_ERR_NOMEM;
                    else if (!(allocs[na] = hbmpb__buffer_allocation_proto__unpack(&al, al_len, ab))) s = HBM_ERR_PARSE;
                    else na++;
                }
                if (!s && q < 0) s = HBM_ERR_PARSE;
            }
        }
        if (!s && r < 0) s = HBM_ERR_PARSE;
        if (!s && !m->module_name) m->module_name = arena_strdup(&f->arena, "", 0);
    }
    if (!s && m->has_assignment) alloc_stats(allocs, na, &m->st);
    hbmi_free(allocs);
    if (!s) {
        m->name = name ? arena_strdup(&f->arena, name, strlen(name)) : m->module_name;
        if (!m->module_name || !m->name) s = HBM_ERR_NOMEM;
    }
    hbmi_arena_free(&scratch);
    if (s == HBM_ERR_NOMEM) return hbmi_error(s, "out of host memory");
    if (s)
        return hbmi_error(s, "%s: %s%s%s is not a valid %s (truncated or corrupt)", f->path, name ? "module '" : "",
                          name ? name : "", name ? "'" : "the file", module_only ? "xla.HloModuleProto" : "xla.HloProto");
    f->n++;
    return HBM_OK;
}

static hbm_status open_xspace(hbm_proto_file *f) {
    ProtobufCAllocator al = {arena_cb, arena_nofree, &f->arena};
    const uint8_t *p = (const uint8_t *)f->buf, *b;
    size_t i = 0, bl;
    uint32_t fld;
    int r, metadata = 0;
    while ((r = frame_next(p, f->len, &i, &fld, &b, &bl)) > 0) {
        if (fld != 1 || !b) continue; /* planes */
        char *name = frame_string(&f->arena, b, bl, 2);
        if (!name) break;
        if (!strncmp(name, "/device:GPU", 11)) f->hint = HBMI_HLO_BACKEND_GPU;
        if (!strncmp(name, "/device:TPU", 11)) f->hint = HBMI_HLO_BACKEND_TPU;
        if (strcmp(name, "/host:metadata")) continue; /* the trace: not read */
        metadata = 1;
        const Hbmpb__XPlane *pl = hbmpb__xplane__unpack(&al, bl, b);
        if (!pl) break;
        int64_t sid = INT64_MIN; /* XProf's kHloProto stat: "Hlo Proto" */
        for (size_t k = 0; k < pl->n_stat_metadata; k++) {
            const Hbmpb__XPlane__StatMetadataEntry *e = pl->stat_metadata[k];
            if (e->value && !strcmp(e->value->name, "Hlo Proto")) sid = e->key;
        }
        if (sid == INT64_MIN) continue;
        for (size_t k = 0; k < pl->n_event_metadata; k++) {
            const Hbmpb__XEventMetadata *em = pl->event_metadata[k]->value;
            if (!em) continue;
            for (size_t q = 0; q < em->n_stats; q++) {
                const Hbmpb__XStat *st = em->stats[q];
                if (st->metadata_id != sid || st->value_case != HBMPB__XSTAT__VALUE_BYTES_VALUE) continue;
                const char *nm = em->name[0] ? em->name : em->display_name;
                hbm_status s = add_module(f, nm, em->id, st->bytes_value.data, st->bytes_value.len, 0);
                if (s) return s;
            }
        }
    }
    if (r)
        return hbmi_error(HBM_ERR_PARSE, "%s: not a valid XProf profile (XSpace protobuf): truncated or corrupt",
                          f->path);
    if (!f->n)
        return hbmi_error(HBM_ERR_PARSE,
                          "%s: a profile without HLO protos (%s): it holds the trace only, not the compiled "
                          "modules; profile with a JAX that records them (jax.profiler.trace), or dump them with "
                          "XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_proto and open DIR/*.hlo.pb",
                          f->path, metadata ? "its '/host:metadata' plane has no 'Hlo Proto' stat"
                                            : "no '/host:metadata' plane");
    return HBM_OK;
}

static int cmp_mods(const void *x, const void *y) {
    const pmod *a = x, *b = y;
    if (a->st.peak_bytes != b->st.peak_bytes) return a->st.peak_bytes > b->st.peak_bytes ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

void hbm_proto_close(hbm_proto_file *f) {
    if (!f) return;
    hbmi_arena_free(&f->arena);
    hbmi_free(f->mods);
    hbmi_free(f->buf);
    hbmi_free(f);
}

static hbm_status open_buf(hbm_proto_file *f, hbm_proto_kind k, hbm_proto_file **out);

hbm_status hbm_proto_open(const char *path, hbm_proto_file **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_proto_open: NULL argument");
    *out = NULL;
    hbm_proto_file *f = hbmi_calloc(1, sizeof *f);
    if (!f) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbm_proto_kind k = hbm_proto_path_kind(path);
    snprintf(f->path, sizeof f->path, "%s", path);
    if (k == HBM_PROTO_PROFILE_DIR) {
        f->hosts = hbmi_proto_find_profile(path, f->path, sizeof f->path);
        k = HBM_PROTO_XSPACE;
    }
    hbm_status s = hbmi_read_file(f->path, &f->buf, &f->len);
    if (s) {
        hbm_proto_close(f);
        return s;
    }
    return open_buf(f, k, out);
}

hbm_status hbm_proto_open_mem(const void *data, size_t len, const char *name, hbm_proto_file **out) {
    if ((!data && len) || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_proto_open_mem: NULL argument");
    *out = NULL;
    hbm_proto_file *f = hbmi_calloc(1, sizeof *f);
    if (!f || !(f->buf = hbmi_malloc(len ? len : 1))) {
        hbmi_free(f);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    if (len) memcpy(f->buf, data, len);
    f->len = len;
    snprintf(f->path, sizeof f->path, "%s", name ? name : "input");
    return open_buf(f, HBM_PROTO_NONE, out);
}

static hbm_status open_buf(hbm_proto_file *f, hbm_proto_kind k, hbm_proto_file **out) {
    hbm_status s;
    if (k == HBM_PROTO_NONE) k = hbm_proto_sniff(f->buf, f->len);
    f->kind = k;
    if (k == HBM_PROTO_XSPACE) s = open_xspace(f);
    else if (k == HBM_PROTO_HLO_PROTO) s = add_module(f, NULL, -1, (const uint8_t *)f->buf, f->len, 0);
    else if (k == HBM_PROTO_HLO_MODULE) s = add_module(f, NULL, -1, (const uint8_t *)f->buf, f->len, 1);
    else
        s = hbmi_error(HBM_ERR_PARSE, "%s: not a protobuf hbm reads (an XProf profile *.xplane.pb, an xla.HloProto "
                       "*.hlo_proto.pb or an xla.HloModuleProto *.hlo.pb)", f->path);
    if (s) {
        hbm_proto_close(f);
        return s;
    }
    hbmi_qsort(f->mods, f->n, sizeof *f->mods, cmp_mods);
    *out = f;
    return HBM_OK;
}

hbm_proto_kind hbm_proto_file_kind(const hbm_proto_file *f) { return f ? f->kind : HBM_PROTO_NONE; }
const char *hbm_proto_file_path(const hbm_proto_file *f) { return f ? f->path : ""; }
size_t hbm_proto_file_hosts(const hbm_proto_file *f) { return f ? f->hosts : 0; }
size_t hbm_proto_module_count(const hbm_proto_file *f) { return f ? f->n : 0; }

hbm_status hbm_proto_module(const hbm_proto_file *f, size_t i, hbm_proto_module_info *out) {
    if (!f || !out || i >= f->n) return hbmi_error(HBM_ERR_INVALID, "hbm_proto_module: no module %zu", i);
    const pmod *m = &f->mods[i];
    memset(out, 0, sizeof *out);
    out->name = m->name;
    out->module_name = m->module_name;
    out->program_id = m->program_id;
    out->has_assignment = m->has_assignment;
    out->xla = m->st;
    out->proto_bytes = m->len;
    return HBM_OK;
}

hbm_status hbm_proto_find(const hbm_proto_file *f, const char *name, size_t *index) {
    if (!f || !name || !index) return hbmi_error(HBM_ERR_INVALID, "hbm_proto_find: NULL argument");
    size_t pick = f->n, same = 0;
    for (size_t i = 0; i < f->n && pick == f->n; i++)
        if (!strcmp(f->mods[i].name, name)) pick = i;
    for (size_t i = 0; i < f->n && pick == f->n; i++) /* the module name, when one program has it */
        if (!strcmp(f->mods[i].module_name, name)) {
            for (size_t j = 0; j < f->n; j++) same += !strcmp(f->mods[j].module_name, name);
            pick = i;
        }
    char have[512] = "";
    size_t k = 0;
    if (same > 1) { /* several programs of that name: which one is not for hbm to guess */
        for (size_t j = 0; j < f->n && k + 80 < sizeof have; j++)
            if (!strcmp(f->mods[j].module_name, name))
                k += (size_t)snprintf(have + k, sizeof have - k, "%s'%.60s' (program id %" PRId64 ")", k ? ", " : "",
                                      f->mods[j].name, f->mods[j].program_id);
        return hbmi_error(HBM_ERR_INVALID, "%s: %zu modules are called '%s': %s%s; name one as listed", f->path, same,
                          name, have, k + 80 >= sizeof have ? ", ..." : "");
    }
    if (pick < f->n) return *index = pick, HBM_OK;
    for (size_t i = 0; i < f->n && k + 80 < sizeof have; i++)
        k += (size_t)snprintf(have + k, sizeof have - k, "%s%.60s", i ? ", " : "", f->mods[i].name);
    return hbmi_error(HBM_ERR_INVALID, "%s: no module '%s' (it holds %s%s)", f->path, name, have,
                      k + 80 >= sizeof have ? ", ..." : "");
}

/* --- one module into hbm's model ----------------------------------------------------------------- */
typedef struct idref { int64_t id; uint32_t comp, idx; } idref;

static int cmp_idref(const void *x, const void *y) {
    const idref *a = x, *b = y;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    return a->comp < b->comp ? -1 : a->comp > b->comp;
}

/* The entry for id; in computation comp when comp != UINT32_MAX. */
static const idref *find_id(const idref *t, size_t n, int64_t id, uint32_t comp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo; i < n && t[i].id == id; i++)
        if (comp == UINT32_MAX || t[i].comp == comp) return &t[i];
    return NULL;
}

/* A direct index of one computation's instruction ids, when they are compact (XLA numbers a
 * computation's instructions in sequence): slot[id - lo] = position + 1, 0 for none. on = 0
 * when the ids are too spread out: the caller searches the sorted table instead. */
typedef struct dense {
    uint32_t *slot;
    size_t cap;
    int64_t lo;
    uint64_t span;
    int on;
} dense;

/* ids[pos[j]] for j < n (pos NULL: ids[j]) at position j. 0: out of host memory. */
static int dense_build(dense *d, const Hbmpb__HloInstructionProto *const *ins, const uint32_t *pos, size_t n) {
    d->on = 0;
    if (!n) return 1;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t j = 0; j < n; j++) {
        int64_t id = ins[pos ? pos[j] : j]->id;
        if (id < lo) lo = id;
        if (id > hi) hi = id;
    }
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;
    if (span > 4 * (uint64_t)n + 64 || n >= UINT32_MAX) return 1;
    if (span > d->cap) {
        uint32_t *s = hbmi_realloc(d->slot, sizeof *s * (size_t)span);
        if (!s) return 0;
        d->slot = s;
        d->cap = (size_t)span;
    }
    memset(d->slot, 0, sizeof *d->slot * (size_t)span);
    for (size_t j = n; j-- > 0;) /* the first of equal ids wins */
        d->slot[(uint64_t)ins[pos ? pos[j] : j]->id - (uint64_t)lo] = (uint32_t)j + 1;
    d->lo = lo;
    d->span = span;
    d->on = 1;
    return 1;
}

/* position of id, -1 when not there */
static int64_t dense_get(const dense *d, int64_t id) {
    uint64_t k = (uint64_t)id - (uint64_t)d->lo;
    return id >= d->lo && k < d->span && d->slot[k] ? (int64_t)d->slot[k] - 1 : -1;
}

typedef struct conv {
    hbm_hlo_module *m;
    const char *file;
    idref *comps, *ins;  /* by id */
    size_t n_comps, n_ins;
    const Hbmpb__StackFrameIndexProto *frames;
    hbmi_str *frame_files; /* per file name of frames, escaped once (p NULL: not yet) */
    dense dn;
    uint8_t *tiled;      /* per global instruction: a tiled layout somewhere in its shape */
    const Hbmpb__HloInstructionProto **src; /* per global instruction (comp_base + index) */
    size_t *comp_base;
} conv;

static hbm_status fail(conv *c, hbm_status s, const char *fmt, const char *a, long long b) {
    char what[512];
    snprintf(what, sizeof what, fmt, a, b);
    return hbmi_error(s, "%s: module '%.*s': %s", c->file, (int)c->m->name.n, c->m->name.p, what);
}

/* n bytes of the module's arena; NULL (the caller returns nomem) when there are none */
static void *cv_alloc(conv *c, size_t n) { return hbmi_arena_alloc(&c->m->arena, n ? n : 1); }
static hbm_status nomem(const conv *c) { return hbmi_error(HBM_ERR_NOMEM, "%s: out of host memory", c->file); }

static hbmi_str S(const char *s) {
    size_t n = strlen(s);
    return (hbmi_str){s, (uint32_t)(n < UINT32_MAX ? n : UINT32_MAX)};
}

/* xla.PrimitiveType -> hbm_hlo_prim (-1: not one hbm sizes) */
static int prim_of(int32_t t) {
    static const signed char map[35] = {
        -1, HBM_HLO_PRED, HBM_HLO_S8, HBM_HLO_S16, HBM_HLO_S32, HBM_HLO_S64, HBM_HLO_U8, HBM_HLO_U16, HBM_HLO_U32,
        HBM_HLO_U64, HBM_HLO_F16, HBM_HLO_F32, HBM_HLO_F64, -1 /* TUPLE */, HBM_HLO_OPAQUE, HBM_HLO_C64, HBM_HLO_BF16,
        HBM_HLO_TOKEN, HBM_HLO_C128, HBM_HLO_F8E5M2, HBM_HLO_F8E4M3FN, HBM_HLO_S4, HBM_HLO_U4, HBM_HLO_F8E4M3B11FNUZ,
        HBM_HLO_F8E5M2FNUZ, HBM_HLO_F8E4M3FNUZ, HBM_HLO_S2, HBM_HLO_U2, HBM_HLO_F8E4M3, HBM_HLO_F8E3M4, -1 /* S1 */,
        -1 /* U1 */, HBM_HLO_F4E2M1FN, HBM_HLO_F8E8M0FNU, -1 /* BUFFER */};
    return t >= 0 && t < 35 ? map[t] : -1;
}

static hbm_status conv_shape(conv *c, const Hbmpb__ShapeProto *sp, hbmi_shape *s, int depth, uint8_t *tiled) {
    if (depth > 64) return fail(c, HBM_ERR_PARSE, "%sshape nested too deeply", "", 0);
    if (sp->element_type == 13) { /* TUPLE */
        s->prim = HBMI_PRIM_TUPLE;
        size_t n = sp->n_tuple_shapes;
        if (n > UINT32_MAX / 2) return fail(c, HBM_ERR_PARSE, "%stuple shape too large", "", 0);
        s->n = (uint32_t)n;
        s->elems = cv_alloc(c, sizeof *s->elems * n);
        if (!s->elems) return nomem(c);
        s->nodes = 1;
        for (size_t i = 0; i < n; i++) {
            TRY(conv_shape(c, sp->tuple_shapes[i], &s->elems[i], depth + 1, tiled));
            if (s->nodes > UINT32_MAX / 2 - s->elems[i].nodes) return fail(c, HBM_ERR_PARSE, "%stuple shape too large", "", 0);
            s->nodes += s->elems[i].nodes;
        }
        return HBM_OK;
    }
    int pr = prim_of(sp->element_type);
    if (pr < 0) return fail(c, HBM_ERR_UNSUPPORTED, "%selement type %lld (xla.PrimitiveType) is not one hbm sizes", "",
                            sp->element_type);
    s->prim = (uint8_t)pr;
    s->nodes = 1;
    size_t n = sp->n_dimensions;
    if (n > 64) return fail(c, HBM_ERR_PARSE, "%stoo many dimensions (%lld)", "", (long long)n);
    s->n = (uint32_t)n;
    if (n) {
        s->dims = cv_alloc(c, sizeof *s->dims * n);
        if (!s->dims) return nomem(c);
        for (size_t i = 0; i < n; i++) {
            if (sp->dimensions[i] < 0) return fail(c, HBM_ERR_PARSE, "%snegative dimension %lld", "", sp->dimensions[i]);
            s->dims[i] = sp->dimensions[i];
        }
    }
    for (size_t i = 0; i < sp->n_is_dynamic_dimension; i++)
        if (sp->is_dynamic_dimension[i]) s->dynamic = 1;
    const Hbmpb__LayoutProto *l = sp->layout;
    if (!l) return HBM_OK;
    s->elem_bits = (uint16_t)(l->element_size_in_bits > 0 && l->element_size_in_bits < 64 ? l->element_size_in_bits : 0);
    s->memory_space = l->memory_space;
    int64_t m2m[64], tiles[64];
    uint32_t n_m2m = 0, n_dims = 0, tile_len[16], n_tiles = 0;
    int ok = 1;
    for (size_t i = 0; i < l->n_minor_to_major; i++) {
        int64_t v = l->minor_to_major[i];
        if (n_m2m < 64 && v >= 0 && (uint64_t)v < s->n) m2m[n_m2m++] = v;
        else ok = 0;
    }
    s->layout_key = hbmi_layout_key(m2m, n_m2m);
    if (!l->n_tiles) return HBM_OK;
    *tiled = 1;
    /* the tiled size as the text parser computes it from "{1,0:T(8,128)(2,1)}" */
    for (size_t t = 0; t < l->n_tiles && ok; t++) {
        const Hbmpb__TileProto *tp = l->tiles[t];
        size_t k = tp->n_dimensions;
        if (!k || k > 16 || n_tiles >= 16) ok = 0;
        for (size_t j = 0; j < k && ok; j++) {
            if (tp->dimensions[j] <= 0 || n_dims >= 64) ok = 0; /* combined dimensions: unknown sizes */
            else tiles[n_dims++] = tp->dimensions[j];
        }
        if (ok) tile_len[n_tiles++] = (uint32_t)k;
    }
    if (ok) s->tiled_elems = hbmi_tiled_elements(s, m2m, n_m2m, tiles, tile_len, n_tiles, NULL);
    return HBM_OK;
}

/* the role the text parser gives each called computation of an instruction */
static hbmi_called_role called_role(const hbmi_instr *in, size_t k) {
    switch (in->op) {
    case HOP_WHILE: return k == 0 ? HBMI_CALLED_BODY : HBMI_CALLED_CONDITION; /* XLA: body, then condition */
    case HOP_CONDITIONAL: return HBMI_CALLED_BRANCH;
    case HOP_FUSION:
    case HOP_CUSTOM_CALL:
    case HOP_ASYNC_START: return HBMI_CALLED_CALLS;
    default: return HBMI_CALLED_APPLY; /* call's to_apply; reducers, comparators */
    }
}

/* s as the HLO text writes it (C escapes), which the planner's reports undo; s as it is
 * when there is no host memory for the copy */
static hbmi_str S_esc(conv *c, const char *s) {
    size_t n = strcspn(s, "\\\"\n\t"), extra = 0;
    if (!s[n]) return S(s); /* nothing to escape: the common case */
    for (; s[n]; n++) extra += s[n] == '\\' || s[n] == '"' || s[n] == '\n' || s[n] == '\t';
    if (n + extra >= UINT32_MAX) return S(s);
    char *r = cv_alloc(c, n + extra + 1);
    if (!r) return S(s);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\\' || ch == '"' || ch == '\n' || ch == '\t') {
            r[k++] = '\\';
            ch = ch == '\n' ? 'n' : ch == '\t' ? 't' : ch;
        }
        r[k++] = ch;
    }
    return (hbmi_str){r, (uint32_t)k};
}

/* frame id of a StackFrameIndexProto (ids are 1-based positions in its lists) */
static int pb_frame(const void *tables, long id, hbmi_frame *out) {
    const Hbmpb__StackFrameIndexProto *fr = tables;
    if (id <= 0 || (size_t)id > fr->n_stack_frames || !fr->stack_frames[id - 1]) return 0;
    const Hbmpb__StackFrameIndexProto__StackFrame *sf = fr->stack_frames[id - 1];
    int32_t loc = sf->file_location_id;
    if (loc <= 0 || (size_t)loc > fr->n_file_locations || !fr->file_locations[loc - 1]) return 0;
    const Hbmpb__StackFrameIndexProto__FileLocation *fl = fr->file_locations[loc - 1];
    if (fl->file_name_id <= 0 || (size_t)fl->file_name_id > fr->n_file_names) return 0;
    out->file = fr->file_names[fl->file_name_id - 1];
    out->file_len = strlen(out->file);
    out->file_id = fl->file_name_id;
    out->line = fl->line;
    out->parent = sf->parent_frame_id;
    return 1;
}

/* the source line: the metadata's file unless a wrapper's, else the frame stack_frame_id
 * names walked out of wrappers to the user's caller (src/hlo/frames.c); where every frame is
 * a wrapper's, the metadata's file or the first frame's, as given */
static void meta(conv *c, hbmi_instr *in, const Hbmpb__OpMetadata *md) {
    if (!md) return;
    in->meta_op_name = S_esc(c, md->op_name);
    in->meta_source_file = S_esc(c, md->source_file);
    int32_t line = md->source_line;
    const Hbmpb__StackFrameIndexProto *fr = c->frames;
    size_t fn = strlen(md->source_file);
    if ((!fn || hbmi_hlo_wrapper_file(md->source_file, fn)) && md->stack_frame_id > 0 && fr) {
        hbmi_frame f;
        int got = hbmi_hlo_frame_walk(pb_frame, fr, md->stack_frame_id, &f) > 0;
        if (!got && !fn) got = pb_frame(fr, md->stack_frame_id, &f); /* all wrappers: the first */
        if (got) {
            hbmi_str *ff = c->frame_files ? &c->frame_files[f.file_id - 1] : NULL;
            if (ff && !ff->p) *ff = S_esc(c, fr->file_names[f.file_id - 1]);
            in->meta_source_file = ff ? *ff : S_esc(c, fr->file_names[f.file_id - 1]);
            line = f.line;
        }
    }
    in->meta_source_line = line > 0 && line < INT32_MAX ? line : 0;
}

static void conv_alias(const int64_t *out, size_t n_out, int64_t operand, const int64_t *in, size_t n_in, hbmi_alias *a) {
    memset(a, 0, sizeof *a);
    for (size_t i = 0; i < n_out && a->out_len < HBMI_MAX_INDEX; i++) a->out[a->out_len++] = (int32_t)out[i];
    for (size_t i = 0; i < n_in && a->in_len < HBMI_MAX_INDEX; i++) a->in[a->in_len++] = (int32_t)in[i];
    a->operand = operand;
}

static hbm_status conv_instr(conv *c, hbmi_instr *in, const Hbmpb__HloInstructionProto *ip, uint8_t *tiled) {
    in->name = S(ip->name);
    in->opcode = S(ip->opcode);
    in->op = (uint8_t)hbmi_op_lookup(in->opcode.p, in->opcode.n);
    in->time = -1;
    in->param_no = in->op == HOP_PARAMETER ? ip->parameter_number : -1;
    in->gte_index = in->op == HOP_GTE ? ip->tuple_index : -1;
    in->fusion_kind = (uint8_t)hbmi_fusion_kind_of(ip->fusion_kind, strlen(ip->fusion_kind));
    if (ip->custom_call_target[0]) in->target = S(ip->custom_call_target);
    meta(c, in, ip->metadata);
    if (!ip->shape) return fail(c, HBM_ERR_PARSE, "instruction '%s' has no shape", ip->name, 0);
    in->shape = cv_alloc(c, sizeof *in->shape);
    if (!in->shape) return nomem(c);
    TRY(conv_shape(c, ip->shape, in->shape, 0, tiled));
    if (in->op == HOP_PARAMETER && in->param_no < 0)
        return fail(c, HBM_ERR_PARSE, "parameter '%s' has number %lld", ip->name, in->param_no);
    if (ip->n_output_operand_aliasing) {
        in->n_alias = (uint32_t)ip->n_output_operand_aliasing;
        in->alias = cv_alloc(c, sizeof *in->alias * in->n_alias);
        if (!in->alias) return nomem(c);
        for (uint32_t k = 0; k < in->n_alias; k++) {
            const Hbmpb__OutputOperandAliasing *a = ip->output_operand_aliasing[k];
            conv_alias(a->output_shape_index, a->n_output_shape_index, a->operand_index, a->operand_shape_index,
                       a->n_operand_shape_index, &in->alias[k]);
        }
    }
    return HBM_OK;
}

/* Instruction order of computation ci: its schedule when there is one (the order XLA prints
 * a scheduled module in), else the proto's (operands before users). */
static hbm_status comp_order(conv *c, const Hbmpb__HloComputationProto *cp, const Hbmpb__HloScheduleProto__InstructionSequence *seq,
                      uint32_t *order) {
    size_t n = cp->n_instructions;
    if (!seq) {
        for (size_t j = 0; j < n; j++) order[j] = (uint32_t)j;
        return HBM_OK;
    }
    idref *t = NULL;
    uint8_t *used = hbmi_calloc(n ? n : 1, 1);
    if (!used || !dense_build(&c->dn, (const Hbmpb__HloInstructionProto *const *)cp->instructions, NULL, n) ||
        (!c->dn.on && !(t = hbmi_malloc(sizeof *t * n)))) {
        hbmi_free(used);
        return fail(c, HBM_ERR_NOMEM, "%sout of host memory", "", 0);
    }
    if (t) {
        for (size_t j = 0; j < n; j++) t[j] = (idref){cp->instructions[j]->id, 0, (uint32_t)j};
        hbmi_qsort(t, n, sizeof *t, cmp_idref);
    }
    size_t k = 0;
    hbm_status st = HBM_OK;
    for (size_t q = 0; q < seq->n_instruction_ids && !st; q++) {
        idref d1;
        const idref *r = NULL;
        if (t) {
            r = find_id(t, n, seq->instruction_ids[q], UINT32_MAX);
        } else {
            int64_t at = dense_get(&c->dn, seq->instruction_ids[q]);
            if (at >= 0) d1 = (idref){seq->instruction_ids[q], 0, (uint32_t)at}, r = &d1;
        }
        if (!r || used[r->idx]) {
            st = fail(c, HBM_ERR_PARSE, "the schedule of '%s' names instruction id %lld twice or not in it", cp->name,
                      seq->instruction_ids[q]);
            break;
        }
        used[r->idx] = 1;
        order[k++] = r->idx;
    }
    for (size_t j = 0; j < n && !st; j++) /* unscheduled ones (none in XLA's output) after */
        if (!used[j]) order[k++] = (uint32_t)j;
    hbmi_free(t);
    hbmi_free(used);
    return st;
}

static hbm_status conv_module(conv *c, const Hbmpb__HloModuleProto *mp) {
    hbm_hlo_module *m = c->m;
    m->name = S(mp->name);
    size_t nc = mp->n_computations;
    if (!nc) return fail(c, HBM_ERR_PARSE, "%sno computations", "", 0);
    if (nc > UINT32_MAX / 4) return fail(c, HBM_ERR_PARSE, "%stoo many computations", "", 0);
    c->frames = mp->stack_frame_index;
    if (c->frames && c->frames->n_file_names && !(c->frame_files = hbmi_calloc(c->frames->n_file_names, sizeof *c->frame_files)))
        return fail(c, HBM_ERR_NOMEM, "%sout of host memory", "", 0);
    m->comps = cv_alloc(c, sizeof *m->comps * nc);
    c->comps = hbmi_malloc(sizeof *c->comps * nc);
    const Hbmpb__HloScheduleProto__InstructionSequence **seq = hbmi_calloc(nc, sizeof *seq);
    if (!m->comps || !c->comps || !seq) {
        hbmi_free(seq);
        return !m->comps ? nomem(c) : fail(c, HBM_ERR_NOMEM, "%sout of host memory", "", 0);
    }
    m->n_comps = (uint32_t)nc;
    size_t total = 0;
    for (size_t ci = 0; ci < nc; ci++) {
        c->comps[ci] = (idref){mp->computations[ci]->id, (uint32_t)ci, 0};
        total += mp->computations[ci]->n_instructions;
    }
    hbmi_qsort(c->comps, nc, sizeof *c->comps, cmp_idref);
    c->n_comps = nc;
    if (mp->schedule) {
        for (size_t k = 0; k < mp->schedule->n_sequences; k++) {
            const Hbmpb__HloScheduleProto__SequencesEntry *e = mp->schedule->sequences[k];
            const idref *r = find_id(c->comps, nc, e->key, UINT32_MAX);
            if (r && e->value) seq[r->comp] = e->value;
        }
        m->is_scheduled = mp->schedule->n_sequences > 0;
    }
    hbm_status st = HBM_OK;
    c->ins = hbmi_malloc(sizeof *c->ins * (total ? total : 1));
    c->tiled = hbmi_calloc(total ? total : 1, 1);
    c->src = cv_alloc(c, sizeof *c->src * (total ? total : 1)); /* kept: the module's whole text is made from it */
    c->comp_base = hbmi_malloc(sizeof *c->comp_base * nc);
    if (!c->ins || !c->tiled || !c->src || !c->comp_base)
        st = !c->src ? nomem(c) : fail(c, HBM_ERR_NOMEM, "%sout of host memory", "", 0);
    size_t g = 0;
    for (size_t ci = 0; ci < nc && !st; ci++) {
        const Hbmpb__HloComputationProto *cp = mp->computations[ci];
        hbmi_comp *cc = &m->comps[ci];
        c->comp_base[ci] = g;
        cc->name = S(cp->name);
        cc->exec_thread = S(cp->execution_thread);
        size_t n = cp->n_instructions;
        if (!n) {
            st = fail(c, HBM_ERR_PARSE, "computation '%s' has no instructions", cp->name, 0);
            break;
        }
        cc->n = (uint32_t)n;
        cc->ins = cv_alloc(c, sizeof *cc->ins * n);
        uint32_t *order = hbmi_malloc(sizeof *order * n);
        if (!cc->ins || !order) {
            hbmi_free(order);
            st = !cc->ins ? nomem(c) : fail(c, HBM_ERR_NOMEM, "%sout of host memory", "", 0);
            break;
        }
        st = comp_order(c, cp, seq[ci], order);
        for (size_t j = 0; j < n && !st; j++) {
            const Hbmpb__HloInstructionProto *ip = cp->instructions[order[j]];
            c->ins[g] = (idref){ip->id, (uint32_t)ci, (uint32_t)j};
            c->src[g] = ip;
            st = conv_instr(c, &cc->ins[j], ip, &c->tiled[g]);
            g++;
        }
        hbmi_free(order);
    }
    hbmi_free(seq);
    TRY(st);
    c->n_ins = g;
    hbmi_qsort(c->ins, g, sizeof *c->ins, cmp_idref);
    /* operands, called computations and the root, by id */
    for (size_t ci = 0; ci < nc; ci++) {
        const Hbmpb__HloComputationProto *cp = mp->computations[ci];
        hbmi_comp *cc = &m->comps[ci];
        if (!dense_build(&c->dn, c->src + c->comp_base[ci], NULL, cc->n))
            return fail(c, HBM_ERR_NOMEM, "%sout of host memory", "", 0);
        int64_t at = c->dn.on ? dense_get(&c->dn, cp->root_id) : -1;
        const idref *root = c->dn.on ? NULL : find_id(c->ins, g, cp->root_id, (uint32_t)ci);
        cc->root = at >= 0 ? (uint32_t)at : root ? root->idx : cc->n - 1; /* as the text parser: else the last */
        cc->ins[cc->root].is_root = 1;
        for (uint32_t j = 0; j < cc->n; j++) {
            hbmi_instr *in = &cc->ins[j];
            const Hbmpb__HloInstructionProto *ip = c->src[c->comp_base[ci] + j];
            if (ip->n_operand_ids) {
                in->n_ops = (uint32_t)ip->n_operand_ids;
                in->ops = cv_alloc(c, sizeof *in->ops * in->n_ops);
                if (!in->ops) return nomem(c);
                for (uint32_t k = 0; k < in->n_ops; k++) {
                    int64_t op = -1;
                    if (c->dn.on) {
                        op = dense_get(&c->dn, ip->operand_ids[k]);
                    } else {
                        const idref *r = find_id(c->ins, g, ip->operand_ids[k], (uint32_t)ci);
                        if (r) op = r->idx;
                    }
                    if (op < 0) return fail(c, HBM_ERR_PARSE, "operand of '%s' (id %lld) is not in its computation", ip->name,
                                            ip->operand_ids[k]);
                    if (op == j) return fail(c, HBM_ERR_PARSE, "instruction '%s' uses itself", ip->name, 0);
                    in->ops[k] = (uint32_t)op;
                }
            }
            size_t ncall = ip->n_called_computation_ids;
            if (in->op == HOP_ASYNC_UPDATE || in->op == HOP_ASYNC_DONE) ncall = 0; /* text prints none */
            if (ncall) {
                in->n_called = (uint32_t)ncall;
                in->called = cv_alloc(c, sizeof *in->called * ncall);
                in->called_role = cv_alloc(c, ncall);
                if (!in->called || !in->called_role) return nomem(c);
                for (size_t k = 0; k < ncall; k++) {
                    const idref *r = find_id(c->comps, nc, ip->called_computation_ids[k], UINT32_MAX);
                    if (!r) return fail(c, HBM_ERR_PARSE, "'%s' calls computation id %lld, which is not in the module",
                                        ip->name, ip->called_computation_ids[k]);
                    if (r->comp == ci) return fail(c, HBM_ERR_PARSE, "'%s' calls its own computation", ip->name, 0);
                    in->called[k] = r->comp;
                    in->called_role[k] = (uint8_t)called_role(in, k);
                }
            }
        }
    }
    /* the entry */
    const idref *e = mp->entry_computation_id ? find_id(c->comps, nc, mp->entry_computation_id, UINT32_MAX) : NULL;
    uint32_t entry = e ? e->comp : (uint32_t)nc - 1;
    if (!e && mp->entry_computation_name[0])
        for (uint32_t ci = 0; ci < nc; ci++)
            if (!strcmp(mp->computations[ci]->name, mp->entry_computation_name)) entry = ci;
    m->entry = entry;
    m->comps[entry].is_entry = 1;
    /* donated parameters */
    const Hbmpb__HloInputOutputAliasProto *io = mp->input_output_alias;
    if (io && io->n_entries) {
        m->n_io_alias = (uint32_t)io->n_entries;
        m->io_alias = cv_alloc(c, sizeof *m->io_alias * io->n_entries);
        if (!m->io_alias) return nomem(c);
        for (size_t k = 0; k < io->n_entries; k++) {
            const Hbmpb__HloInputOutputAliasProto__AliasEntryProto *a = io->entries[k];
            conv_alias(a->output_shape_index, a->n_output_shape_index, a->parameter_number, a->parameter_shape_index,
                       a->n_parameter_shape_index, &m->io_alias[k]);
        }
    }
    const Hbmpb__HloBufferDonorProto *bd = mp->buffer_donor;
    if (bd && bd->n_entries) {
        m->n_donors = (uint32_t)bd->n_entries;
        m->donors = cv_alloc(c, sizeof *m->donors * bd->n_entries);
        if (!m->donors) return nomem(c);
        for (size_t k = 0; k < bd->n_entries; k++)
            conv_alias(NULL, 0, bd->entries[k]->parameter_number, bd->entries[k]->parameter_shape_index,
                       bd->entries[k]->n_parameter_shape_index, &m->donors[k]);
    }
    return HBM_OK;
}

/* --- XLA's buffer assignment --------------------------------------------------------------------- */
static int cmp_lbuf_id(const void *x, const void *y) {
    const hbmi_xla_lbuf *a = x, *b = y;
    return a->id < b->id ? -1 : a->id > b->id;
}

static hbmi_xla_lbuf *find_lbuf(hbmi_xla *x, int64_t id) {
    hbmi_xla_lbuf key = {.id = id};
    return x->n_lbufs ? bsearch(&key, x->lbufs, x->n_lbufs, sizeof key, cmp_lbuf_id) : NULL;
}

static _Thread_local const hbmi_xla *peak_sort_x;
static int cmp_peak(const void *x, const void *y) {
    const hbmi_xla_lbuf *a = &peak_sort_x->lbufs[*(const uint32_t *)x], *b = &peak_sort_x->lbufs[*(const uint32_t *)y];
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Replay one heap simulator trace: ALLOC takes the buffer's bytes, SHARE_WITH lends the
 * canonical buffer's (its lifetime becomes the union), FREE gives them back when the last
 * sharer goes. Returns the peak; *at = the event after which it is first reached. ref and
 * canon are scratch arrays of n_lbufs. */
static uint64_t replay(hbmi_xla *x, const Hbmpb__HeapSimulatorTrace *t, size_t upto, uint32_t *ref, uint32_t *canon,
                       size_t *at) {
    uint64_t live = 0, peak = 0;
    memset(ref, 0, sizeof *ref * x->n_lbufs);
    for (uint32_t i = 0; i < x->n_lbufs; i++) canon[i] = i;
    *at = 0;
    for (size_t e = 0; e < t->n_events && e < upto; e++) {
        const Hbmpb__HeapSimulatorTrace__Event *ev = t->events[e];
        hbmi_xla_lbuf *b = find_lbuf(x, ev->buffer_id);
        if (!b) continue;
        uint32_t bi = (uint32_t)(b - x->lbufs);
        if (ev->kind == 0 || ev->kind == 2) { /* ALLOC, SHARE_WITH */
            uint32_t c = bi;
            if (ev->kind == 2) {
                hbmi_xla_lbuf *cb = find_lbuf(x, ev->share_with_canonical_id);
                if (cb) c = canon[cb - x->lbufs];
            }
            canon[bi] = c;
            if (!ref[c]++) live += x->lbufs[c].size;
        } else if (ev->kind == 1) { /* FREE */
            uint32_t c = canon[bi];
            if (ref[c] && !--ref[c]) live -= x->lbufs[c].size;
        }
        if (live > peak) peak = live, *at = e + 1;
    }
    return peak;
}

/* The alignment XLA's build used, as its assignment shows it (0: it does not say). XLA:GPU
 * aligns every buffer it places to kXlaAllocatedBufferAlignBytes
 * (xla/service/gpu/gpu_constants.h): 128 bytes until mid-2025, 256 since (openxla/xla pull
 * request 27784, for cuBLAS 12.9.1.4; the constant is the same for CUDA and ROCm). The heap
 * simulator puts a buffer at the start of a free gap rounded up to that alignment, so:
 * an offset that is an odd multiple of 128 means 128 (a 256 build never makes one); a buffer
 * at an offset o whose gap starts at e (the highest end below it among the buffers whose
 * lifetimes, in the heap trace, overlap its own) with e <= o - 128 < o <= e + 255 means 256
 * (a 128 build would have put it at e rounded up to 128, below o). */
typedef struct span {
    uint64_t off, end;
    size_t from, to; /* heap trace events: first (ALLOC, SHARE_WITH) and FREE */
    size_t trace;
} span;

static int cmp_span_end(const void *x, const void *y) {
    const span *a = x, *b = y;
    return a->end < b->end ? -1 : a->end > b->end;
}

static uint64_t seen_alignment(hbmi_xla *x, const Hbmpb__BufferAssignmentProto *ba) {
    for (uint32_t i = 0; i < x->n_lbufs; i++)
        if (x->lbufs[i].alloc >= 0 && x->lbufs[i].cat != HBMI_XLA_NONE && x->lbufs[i].offset % 256 == 128) return 128;
    size_t n = 0;
    for (size_t t = 0; t < ba->n_heap_simulator_traces; t++) n += ba->heap_simulator_traces[t]->n_events;
    span *sp = hbmi_malloc(sizeof *sp * (n ? n : 1));
    uint32_t *at = hbmi_malloc(sizeof *at * (x->n_lbufs ? x->n_lbufs : 1));
    uint64_t found = 0;
    if (!sp || !at) goto out;
    size_t k = 0;
    for (size_t t = 0; t < ba->n_heap_simulator_traces; t++) {
        const Hbmpb__HeapSimulatorTrace *tr = ba->heap_simulator_traces[t];
        size_t k0 = k;
        for (uint32_t i = 0; i < x->n_lbufs; i++) at[i] = UINT32_MAX;
        for (size_t e = 0; e < tr->n_events; e++) {
            const Hbmpb__HeapSimulatorTrace__Event *ev = tr->events[e];
            hbmi_xla_lbuf *b = find_lbuf(x, ev->buffer_id);
            if (!b || b->alloc < 0 || b->cat == HBMI_XLA_NONE || b->offset < 0) continue;
            uint32_t bi = (uint32_t)(b - x->lbufs);
            if ((ev->kind == 0 || ev->kind == 2) && at[bi] == UINT32_MAX) {
                at[bi] = (uint32_t)k;
                sp[k++] = (span){(uint64_t)b->offset, (uint64_t)b->offset + b->size, e, tr->n_events, t};
            } else if (ev->kind == 1 && at[bi] != UINT32_MAX && at[bi] >= k0) {
                sp[at[bi]].to = e;
            }
        }
    }
    hbmi_qsort(sp, k, sizeof *sp, cmp_span_end);
    for (size_t i = 0; i < k && !found; i++) {
        uint64_t o = sp[i].off;
        if (!o || o % 256) continue;
        /* the spans ending in (o - 256, o]: the first with end > o - 256 */
        size_t lo = 0, hi = k;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (sp[mid].end + 256 > o) hi = mid;
            else lo = mid + 1;
        }
        uint64_t e = 0;
        int any = 0;
        for (size_t j = lo, seen = 0; j < k && sp[j].end <= o && seen < 256; j++, seen++) {
            const span *c = &sp[j];
            if (c->trace != sp[i].trace || c->off >= o || c->from > sp[i].to || sp[i].from > c->to) continue;
            if (!any || c->end > e) e = c->end, any = 1;
        }
        if (any && e + 128 <= o) found = 256;
    }
out:
    hbmi_free(sp);
    hbmi_free(at);
    return found;
}

static hbm_status attach_xla(conv *c, const Hbmpb__BufferAssignmentProto *ba) {
    hbm_hlo_module *m = c->m;
    hbmi_xla *x = cv_alloc(c, sizeof *x);
    if (!x) return nomem(c);
    alloc_stats(ba->buffer_allocations, ba->n_buffer_allocations, &x->st);
    size_t n = ba->n_logical_buffers;
    if (n > UINT32_MAX / 2) return fail(c, HBM_ERR_PARSE, "%stoo many logical buffers", "", 0);
    x->lbufs = cv_alloc(c, sizeof *x->lbufs * n);
    if (!x->lbufs) return nomem(c);
    x->n_lbufs = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        const Hbmpb__LogicalBufferProto *lb = ba->logical_buffers[i];
        hbmi_xla_lbuf *b = &x->lbufs[i];
        b->id = lb->id;
        b->size = lb->size > 0 ? (uint64_t)lb->size : 0;
        b->alloc = -1;
        b->comp = b->instr = -1;
        snprintf(b->index, sizeof b->index, "{}");
        const Hbmpb__LogicalBufferProto__Location *d = lb->defined_at;
        if (!d) continue;
        const idref *r = find_id(c->ins, c->n_ins, d->instruction_id, UINT32_MAX);
        if (!r) continue;
        b->comp = r->comp;
        b->instr = r->idx;
        const hbmi_shape *s = m->comps[r->comp].ins[r->idx].shape;
        size_t k = 0;
        k += (size_t)snprintf(b->index, sizeof b->index, "{");
        for (size_t q = 0; q < d->n_shape_index; q++) {
            int64_t v = d->shape_index[q];
            if (k < sizeof b->index - 24) k += (size_t)snprintf(b->index + k, sizeof b->index - k, "%s%lld", q ? "," : "", (long long)v);
            if (s && s->prim == HBMI_PRIM_TUPLE && v >= 0 && (uint64_t)v < s->n) {
                b->node += hbmi_shape_child(s, (uint32_t)v);
                s = &s->elems[v];
            } else {
                s = NULL;
            }
        }
        snprintf(b->index + k, sizeof b->index - k, "}");
    }
    hbmi_qsort(x->lbufs, n, sizeof *x->lbufs, cmp_lbuf_id);
    for (size_t i = 0; i < ba->n_buffer_allocations; i++) {
        const Hbmpb__BufferAllocationProto *a = ba->buffer_allocations[i];
        hbmi_xla_cat cat = a->is_entry_computation_parameter ? HBMI_XLA_PARAMETER
                           : a->maybe_live_out                 ? HBMI_XLA_OUTPUT
                           : a->is_constant                    ? HBMI_XLA_CONSTANT
                           : a->is_thread_local                ? HBMI_XLA_THREAD_LOCAL
                                                               : HBMI_XLA_TEMP;
        for (size_t k = 0; k < a->n_assigned; k++) {
            hbmi_xla_lbuf *b = find_lbuf(x, a->assigned[k]->logical_buffer_id);
            if (!b) continue;
            b->alloc = a->index;
            b->offset = a->assigned[k]->offset;
            b->cat = a->color ? HBMI_XLA_NONE : cat;
        }
    }
    /* the heap trace of device memory with the highest peak */
    const Hbmpb__HeapSimulatorTrace *best = NULL;
    size_t best_at = 0;
    uint32_t *ref = hbmi_malloc(sizeof *ref * (n ? n : 1)), *canon = hbmi_malloc(sizeof *canon * (n ? n : 1));
    if (!ref || !canon) {
        hbmi_free(ref);
        hbmi_free(canon);
        return fail(c, HBM_ERR_NOMEM, "%sout of host memory", "", 0);
    }
    for (size_t i = 0; i < ba->n_heap_simulator_traces; i++) {
        const Hbmpb__HeapSimulatorTrace *t = ba->heap_simulator_traces[i];
        int device = 1;
        for (size_t k = 0; k < ba->n_buffer_allocations; k++)
            if (ba->buffer_allocations[k]->index == t->buffer_allocation_index && ba->buffer_allocations[k]->color) device = 0;
        if (!device) continue;
        size_t at;
        uint64_t pk = replay(x, t, SIZE_MAX, ref, canon, &at);
        x->st.has_heap_trace = 1;
        if (!best || pk > x->st.heap_peak_bytes) best = t, best_at = at, x->st.heap_peak_bytes = pk;
    }
    if (best) { /* what is live at the peak */
        size_t at;
        replay(x, best, best_at, ref, canon, &at);
        uint32_t k = 0;
        for (uint32_t i = 0; i < x->n_lbufs; i++) k += ref[i] > 0;
        x->peak = cv_alloc(c, sizeof *x->peak * k); /* none: the module comes without its peak buffers */
        if (x->peak) {
            for (uint32_t i = 0; i < x->n_lbufs; i++)
                if (ref[i]) x->peak[x->n_peak++] = i;
            peak_sort_x = x;
            hbmi_qsort(x->peak, x->n_peak, sizeof *x->peak, cmp_peak);
            x->st.n_heap_peak_buffers = x->n_peak;
        }
    }
    hbmi_free(ref);
    hbmi_free(canon);
    x->alignment = seen_alignment(x, ba);
    m->xla = x;
    return HBM_OK;
}

static size_t put(char *t, size_t k, const char *s, size_t n) {
    memcpy(t + k, s, n);
    return k + n;
}

/* frontend attributes as the light text carries them: ", frontend_attributes={k="v",...}" */
static size_t fa_len(const Hbmpb__FrontendAttributes *fa) {
    size_t n = 0;
    for (size_t i = 0; fa && i < fa->n_map; i++) n += strlen(fa->map[i]->key) + strlen(fa->map[i]->value) + 4;
    return fa && fa->n_map ? n + 24 : 0;
}

static size_t put_flat(char *t, size_t k, const char *s, size_t n) { /* one line: no line breaks */
    for (size_t q = 0; q < n; q++) t[k++] = s[q] == '\n' || s[q] == '\r' || s[q] == 0 ? ' ' : s[q];
    return k;
}

static size_t fa_put(char *t, size_t k, const Hbmpb__FrontendAttributes *fa) {
    if (!fa || !fa->n_map) return k;
    k = put(t, k, ", frontend_attributes={", 23);
    for (size_t i = 0; i < fa->n_map; i++) {
        if (i) t[k++] = ',';
        k = put_flat(t, k, fa->map[i]->key, strlen(fa->map[i]->key));
        k = put(t, k, "=\"", 2);
        k = put_flat(t, k, fa->map[i]->value, strlen(fa->map[i]->value));
        t[k++] = '"';
    }
    t[k++] = '}';
    return k;
}

/* The module's text for the few questions the planner asks of the text itself (which
 * compiler: custom-call targets, backend configs, frontend attributes, tiled layouts,
 * %parallel_ computations; an instruction's attributes): one line per instruction with
 * those, at in->off. The whole HLO text, which hbm fit edits, is made when asked
 * (hbmi_proto_text, src/hlo/proto_text.c): it answers those questions the same. */
static hbm_status synth_text(conv *c, const Hbmpb__HloModuleProto *mp) {
    hbm_hlo_module *m = c->m;
    size_t len = 1 + fa_len(mp->frontend_attributes) + 2;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        len += m->comps[ci].name.n + 2;
        for (uint32_t j = 0; j < m->comps[ci].n; j++) {
            const Hbmpb__HloInstructionProto *ip = c->src[c->comp_base[ci] + j];
            len += strlen(ip->name) + strlen(ip->opcode) + strlen(ip->custom_call_target) + ip->backend_config.len + 64 +
                   fa_len(ip->frontend_attributes);
        }
    }
    char *t = hbmi_malloc(len);
    if (!t) return fail(c, HBM_ERR_NOMEM, "%sout of host memory", "", 0);
    size_t k = 0;
    if (mp->frontend_attributes && mp->frontend_attributes->n_map) {
        k = fa_put(t, k, mp->frontend_attributes);
        t[k++] = '\n';
    }
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        const hbmi_comp *cc = &m->comps[ci];
        t[k++] = '%';
        k = put(t, k, cc->name.p, cc->name.n);
        t[k++] = '\n';
        for (uint32_t j = 0; j < cc->n; j++) {
            size_t g = c->comp_base[ci] + j;
            const Hbmpb__HloInstructionProto *ip = c->src[g];
            cc->ins[j].off = k;
            t[k++] = '%';
            k = put(t, k, cc->ins[j].name.p, cc->ins[j].name.n);
            k = put(t, k, " = ", 3);
            k = put(t, k, cc->ins[j].opcode.p, cc->ins[j].opcode.n);
            if (ip->custom_call_target[0]) {
                k = put(t, k, ", custom_call_target=\"", 22);
                k = put(t, k, cc->ins[j].target.p, cc->ins[j].target.n);
                t[k++] = '"';
            }
            k = fa_put(t, k, ip->frontend_attributes);
            if (ip->backend_config.len) {
                k = put(t, k, ", backend_config=", 17);
                k = put_flat(t, k, (const char *)ip->backend_config.data, ip->backend_config.len);
            }
            if (c->tiled[g]) k = put(t, k, " :T(", 4);
            t[k++] = '\n';
        }
    }
    t[k] = 0;
    m->text = t;
    m->len = k;
    return HBM_OK;
}

static hbm_status load(const hbm_proto_file *f, size_t i, int look_around, hbm_hlo_module **out);

static int cmp_len(const void *x, const void *y) {
    const pmod *a = *(pmod *const *)x, *b = *(pmod *const *)y;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* The alignment XLA's build used, as the assignment of another module of the file shows it:
 * the modules of one profile were compiled by one XLA. The smallest modules first (a small
 * one often shows it: two buffers live side by side with a gap), at most 64 MB of them. */
static uint64_t file_alignment(const hbm_proto_file *f, size_t skip) {
    pmod **by = hbmi_malloc(sizeof *by * (f->n ? f->n : 1));
    if (!by) return 0;
    size_t n = 0;
    for (size_t j = 0; j < f->n; j++)
        if (j != skip && f->mods[j].has_assignment && !f->mods[j].module_only) by[n++] = &f->mods[j];
    hbmi_qsort(by, n, sizeof *by, cmp_len);
    uint64_t found = 0, spent = 0;
    for (size_t k = 0; k < n && !found && spent + by[k]->len <= (64u << 20); k++) {
        spent += by[k]->len;
        hbm_hlo_module *m = NULL;
        if (load(f, (size_t)(by[k] - f->mods), 0, &m) == HBM_OK && m->xla) found = m->xla->alignment;
        hbm_hlo_module_free(m);
    }
    hbmi_free(by);
    return found;
}

hbm_status hbm_proto_load(const hbm_proto_file *f, size_t i, hbm_hlo_module **out) { return load(f, i, 1, out); }

static hbm_status load(const hbm_proto_file *f, size_t i, int look_around, hbm_hlo_module **out) {
    if (!f || !out || i >= f->n) return hbmi_error(HBM_ERR_INVALID, "hbm_proto_load: no module %zu", i);
    *out = NULL;
    const pmod *pm = &f->mods[i];
    hbm_hlo_module *m = hbmi_calloc(1, sizeof *m);
    if (!m) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    size_t pl = strlen(f->path); /* its tail, where the name is */
    snprintf(m->path, sizeof m->path, "%s", f->path + (pl >= sizeof m->path ? pl - (sizeof m->path - 1) : 0));
    m->backend_hint = f->hint;
    m->name = S(pm->module_name);
    conv c = {.m = m, .file = f->path};
    ProtobufCAllocator al = {arena_cb, arena_nofree, &m->arena};
    const Hbmpb__HloModuleProto *mp = NULL;
    const Hbmpb__BufferAssignmentProto *ba = NULL;
    const ProtobufCMessageDescriptor *d = pm->module_only ? &hbmpb__hlo_module_proto__descriptor : &hbmpb__hlo_proto__descriptor;
    hbm_status st = HBM_OK;
    if (!wire_ok(pm->data, pm->len, d, 0)) {
        st = fail(&c, HBM_ERR_PARSE, pm->module_only ? "%snot a valid xla.HloModuleProto (truncated, corrupt or nested too deeply)" : "%snot a valid xla.HloProto (truncated, corrupt or nested too deeply)", "", 0);
    } else if (pm->module_only) {
        mp = hbmpb__hlo_module_proto__unpack(&al, pm->len, pm->data);
    } else {
        const Hbmpb__HloProto *hp = hbmpb__hlo_proto__unpack(&al, pm->len, pm->data);
        if (hp) {
            mp = hp->hlo_module;
            ba = hp->buffer_assignment;
            if (!mp) st = fail(&c, HBM_ERR_PARSE, "%sthe xla.HloProto holds no module (hlo_module)", "", 0);
        }
    }
    if (!st && !mp)
        st = fail(&c, HBM_ERR_PARSE, "not a valid %s (truncated or corrupt)", pm->module_only ? "xla.HloModuleProto" : "xla.HloProto", 0);
    if (!st) st = conv_module(&c, mp);
    if (!st && ba) st = attach_xla(&c, ba);
    if (!st && look_around) st = synth_text(&c, mp); /* a module read for its alignment alone needs no text */
    if (!st) {
        m->pb_module = mp;
        m->pb_ins = (const void **)c.src;
    }
    hbmi_free(c.comps);
    hbmi_free(c.ins);
    hbmi_free(c.dn.slot);
    hbmi_free(c.frame_files);
    hbmi_free(c.tiled);
    hbmi_free(c.comp_base);
    if (st) {
        hbm_hlo_module_free(m);
        return st;
    }
    if (look_around && m->xla && !m->xla->alignment && (m->xla->alignment = file_alignment(f, i)))
        m->xla->alignment_other = 1;
    m->host_bytes = m->len + 1 + m->arena.total + sizeof *m;
    *out = m;
    return HBM_OK;
}

/* --- the module list, as XProf's module selector shows it ------------------------------------------ */
static void put_name(char *buf, size_t cap, const char *s) {
    size_t k = 0;
    for (; *s && k + 5 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch == 0x7f) k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", ch);
        else buf[k++] = (char)ch;
    }
    buf[k] = 0;
}

hbm_status hbm_proto_list(const hbm_proto_file *f, FILE *out, size_t chosen) {
    if (!f || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_proto_list: NULL argument");
    size_t pl = strlen(f->path); /* its tail where it is long: the line fits 100 columns */
    int e = fprintf(out, "%zu modules in %s%s (largest first; XLA's own figures):\n", f->n, pl > 50 ? "..." : "",
                    f->path + (pl > 50 ? pl - 47 : 0)) < 0;
    e |= fprintf(out, "    %-50s %12s %12s %12s\n", "module", "arguments", "outputs", "temp") < 0;
    for (size_t i = 0; i < f->n; i++) {
        const pmod *m = &f->mods[i];
        char nm[64], a[32], b[32], t[32];
        put_name(nm, sizeof nm, m->name);
        if (strlen(nm) > 50) memcpy(nm + 47, "...", 4);
        if (m->has_assignment)
            e |= fprintf(out, "  %c %-50s %12s %12s %12s\n", i == chosen ? '*' : ' ', nm,
                         hbm_size_human(m->st.argument_size_in_bytes, a), hbm_size_human(m->st.output_size_in_bytes, b),
                         hbm_size_human(m->st.temp_size_in_bytes, t)) < 0;
        else
            e |= fprintf(out, "  %c %-50s %38s\n", i == chosen ? '*' : ' ', nm, "(no buffer assignment)") < 0;
    }
    return e ? hbmi_error(HBM_ERR_IO, "writing the module list failed") : HBM_OK;
}

#else /* built without protobuf-c */
struct hbm_proto_file {
    int unused;
};

int hbm_proto_available(void) { return 0; }

hbm_status hbm_proto_open(const char *path, hbm_proto_file **out) {
    if (out) *out = NULL;
    hbm_proto_kind k = hbm_proto_path_kind(path);
    return hbmi_error(HBM_ERR_NOT_AVAILABLE,
                      "%s (%s): this hbm was built without protobuf-c: install protoc-c and libprotobuf-c "
                      "(Debian: apt-get install protobuf-c-compiler libprotobuf-c-dev, or scripts/deps.sh) and "
                      "rebuild, or give the module as HLO text (compiled.as_text())",
                      path ? path : "input", k ? hbm_proto_kind_str(k) : "protobuf input");
}
hbm_status hbm_proto_open_mem(const void *data, size_t len, const char *name, hbm_proto_file **out) {
    if (out) *out = NULL;
    hbm_proto_kind k = hbm_proto_sniff(data, len);
    return hbmi_error(HBM_ERR_NOT_AVAILABLE,
                      "%s (%s): this hbm was built without protobuf-c: install protoc-c and libprotobuf-c "
                      "(Debian: apt-get install protobuf-c-compiler libprotobuf-c-dev, or scripts/deps.sh) and rebuild",
                      name ? name : "input", k ? hbm_proto_kind_str(k) : "protobuf input");
}
void hbm_proto_close(hbm_proto_file *f) { (void)f; }
hbm_proto_kind hbm_proto_file_kind(const hbm_proto_file *f) { return (void)f, HBM_PROTO_NONE; }
const char *hbm_proto_file_path(const hbm_proto_file *f) { return (void)f, ""; }
size_t hbm_proto_file_hosts(const hbm_proto_file *f) { return (void)f, 0; }
size_t hbm_proto_module_count(const hbm_proto_file *f) { return (void)f, 0; }
hbm_status hbm_proto_module(const hbm_proto_file *f, size_t i, hbm_proto_module_info *out) {
    (void)f, (void)i, (void)out;
    return hbmi_error(HBM_ERR_NOT_AVAILABLE, "hbm was built without protobuf-c");
}
hbm_status hbm_proto_find(const hbm_proto_file *f, const char *name, size_t *index) {
    (void)f, (void)name, (void)index;
    return hbmi_error(HBM_ERR_NOT_AVAILABLE, "hbm was built without protobuf-c");
}
hbm_status hbm_proto_load(const hbm_proto_file *f, size_t i, hbm_hlo_module **out) {
    (void)f, (void)i;
    if (out) *out = NULL;
    return hbmi_error(HBM_ERR_NOT_AVAILABLE, "hbm was built without protobuf-c");
}
hbm_status hbm_proto_list(const hbm_proto_file *f, FILE *out, size_t chosen) {
    (void)f, (void)out, (void)chosen;
    return hbmi_error(HBM_ERR_NOT_AVAILABLE, "hbm was built without protobuf-c");
}
#endif
