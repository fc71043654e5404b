/* xprof_memory.c - the memory profile of an XProf profile (hbm/memprof.h): the device
 * allocators' MemoryAllocation / MemoryDeallocation events of the host plane, read from the
 * XSpace's wire format directly (tsl/profiler/protobuf/xplane.proto's field numbers), and
 * XProf's Memory Profile summary of each allocator computed as
 * xprof/convert/xplane_to_memory_profile.cc computes it. The module executions of the
 * device planes (events with a program_id stat) are kept for the attribution
 * (memprof_attr.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/memprof.h"
#include "hbm/proto.h"
#include "hlo/hlo_profile.h"
#include "trace/import/memprof_internal.h"
#include "trace/import/memprof_view.h"

/* --- the wire format ------------------------------------------------------------------- */
typedef struct wfield {
    union { /* written as one word: callers compare num and wire together, and a load of
             * both after two stores of one each waits for the stores to retire */
        struct {
            uint32_t num;
            uint32_t wire;
        };
        uint64_t nw;
    };
    uint64_t v;          /* varint, fixed64 bits, fixed32 bits */
    const uint8_t *b;    /* length-delimited: the bytes */
    size_t n;
} wfield;

/* 1: a field at *i, 0: the end, -1: malformed */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int wnext(const uint8_t *p, size_t n, size_t *i, wfield *f) {
    if (*i >= n) return 0;
    uint64_t tag;
    if (hbmi_varint_get(p, n, i, &tag) <= 0) return -1;
    struct {
        uint32_t num, wire;
    } nw = {tag >> 3 <= UINT32_MAX ? (uint32_t)(tag >> 3) : 0, (uint32_t)(tag & 7)};
    memcpy(&f->nw, &nw, sizeof f->nw);
    f->b = NULL;
    f->n = 0;
    f->v = 0;
    switch (f->wire) {
    case 0: return hbmi_varint_get(p, n, i, &f->v) > 0 ? 1 : -1;
    case 1:
        if (n - *i < 8) return -1;
        for (int k = 7; k >= 0; k--) f->v = f->v << 8 | p[*i + (size_t)k];
        *i += 8;
        return 1;
    case 5:
        if (n - *i < 4) return -1;
        for (int k = 3; k >= 0; k--) f->v = f->v << 8 | p[*i + (size_t)k];
        *i += 4;
        return 1;
    case 2: {
        uint64_t l;
        if (hbmi_varint_get(p, n, i, &l) <= 0 || l > n - *i) return -1;
        f->b = p + *i;
        f->n = (size_t)l;
        *i += (size_t)l;
        return 1;
    }
    default: return -1;
    }
}

/* the stats hbm reads (TSL's names, xla/tsl/profiler/utils/xplane_schema.cc) */
enum {
    ST_NONE = 0, ST_ALLOCATOR, ST_RESERVED, ST_ALLOCATED, ST_AVAILABLE, ST_FRAG, ST_PEAK, ST_REQUESTED,
    ST_ALLOCATION, ST_ADDR, ST_TF_OP, ST_GROUP, ST_REGION, ST_DTYPE, ST_SHAPES, ST_ID, ST_INDEX_ON_HOST,
    ST_ORDINAL, ST_PROGRAM, ST_COUNT_
};
static const char *const stat_names[ST_COUNT_] = {
    "", "allocator_name", "bytes_reserved", "bytes_allocated", "bytes_available", "fragmentation",
    "peak_bytes_in_use", "requested_bytes", "allocation_bytes", "addr", "tf_op", "group_id", "region_type",
    "data_type", "shape", "id", "index_on_host", "device_ordinal", "program_id",
};

static int stat_code(const uint8_t *s, size_t n) {
    for (int k = 1; k < ST_COUNT_; k++)
        if (n && stat_names[k][0] == s[0] && strnlen(stat_names[k], n + 1) == n && !memcmp(stat_names[k], s, n))
            return k;
    return ST_NONE;
}

typedef struct smeta {
    uint64_t id;
    const uint8_t *name;
    size_t n;
    int code;
} smeta;

typedef struct plane_meta {
    smeta *st;
    size_t nst, cap;
    hbmi_map st_index;  /* stat metadata id -> index into st */
    uint64_t alloc_id, dealloc_id;
    int has_alloc, has_dealloc, has_program;
    uint32_t small[256]; /* stat ids below 256 (TSL numbers them from 1): index + 1, 0 none */
} plane_meta;

static void plane_meta_free(plane_meta *pm) {
    hbmi_free(pm->st);
    hbmi_map_destroy(&pm->st_index);
    memset(pm, 0, sizeof *pm);
}

static int str_eq(const uint8_t *b, size_t n, const char *s) { return strnlen(s, n + 1) == n && !memcmp(b, s, n); }

/* the (id, name) of an XEventMetadata / XStatMetadata message; 0 malformed */
static int meta_id_name(const uint8_t *p, size_t n, uint64_t *id, const uint8_t **name, size_t *nn) {
    size_t i = 0;
    wfield f;
    int r;
    *id = 0;
    *name = (const uint8_t *)"";
    *nn = 0;
    while ((r = wnext(p, n, &i, &f)) > 0) {
        if (f.num == 1 && f.wire == 0) *id = f.v;
        else if (f.num == 2 && f.wire == 2) *name = f.b, *nn = f.n;
    }
    return r == 0;
}

/* a map entry's value (field 2) */
static int map_value(const uint8_t *p, size_t n, const uint8_t **v, size_t *vn) {
    size_t i = 0;
    wfield f;
    int r;
    *v = NULL;
    *vn = 0;
    while ((r = wnext(p, n, &i, &f)) > 0)
        if (f.num == 2 && f.wire == 2) *v = f.b, *vn = f.n;
    return r == 0;
}

static hbm_status read_plane_meta(const uint8_t *p, size_t n, plane_meta *pm) {
    size_t i = 0;
    wfield f;
    int r;
    hbmi_map_init(&pm->st_index);
    while ((r = wnext(p, n, &i, &f)) > 0) {
        if ((f.num != 4 && f.num != 5) || f.wire != 2) continue;
        const uint8_t *v;
        size_t vn, nn;
        uint64_t id;
        const uint8_t *name;
        if (!map_value(f.b, f.n, &v, &vn) || (v && !meta_id_name(v, vn, &id, &name, &nn))) return HBM_ERR_PARSE;
        if (!v) continue;
        if (f.num == 4) {
            if (str_eq(name, nn, "MemoryAllocation")) pm->alloc_id = id, pm->has_alloc = 1;
            else if (str_eq(name, nn, "MemoryDeallocation")) pm->dealloc_id = id, pm->has_dealloc = 1;
            continue;
        }
        if (id == UINT64_MAX) continue;
        if (pm->nst == pm->cap && hbmi_grow((void **)&pm->st, &pm->cap, pm->nst + 1, sizeof *pm->st))
            return HBM_ERR_NOMEM;
        smeta *sm = &pm->st[pm->nst];
        sm->id = id;
        sm->name = name;
        sm->n = nn;
        sm->code = stat_code(name, nn);
        if (sm->code == ST_PROGRAM) pm->has_program = 1;
        if (hbmi_map_put(&pm->st_index, id, pm->nst)) return HBM_ERR_NOMEM;
        if (id < 256) pm->small[id] = (uint32_t)pm->nst + 1;
        pm->nst++;
    }
    return r == 0 ? HBM_OK : HBM_ERR_PARSE;
}

static inline const smeta *stat_meta(const plane_meta *pm, uint64_t id) {
    if (id < 256) return pm->small[id] ? &pm->st[pm->small[id] - 1] : NULL;
    uint64_t k;
    return hbmi_map_get(&pm->st_index, id, &k) ? &pm->st[k] : NULL;
}

/* --- the profile ------------------------------------------------------------------------ */
static char *pool_str(hbm_memprof *mp, const uint8_t *s, size_t n) {
    char *r = hbmi_arena_alloc(&mp->arena, n + 1);
    if (r && n) memcpy(r, s, n);
    return r;
}

static int allocator_index(hbm_memprof *mp, const uint8_t *name, size_t n) {
    if (mp->last_al < mp->nal && mp->last_al_len == n && !memcmp(mp->al[mp->last_al].allocator, name, n))
        return (int)mp->last_al; /* the same as the event before, as a rule */
    mp->last_al_len = n;
    for (size_t k = 0; k < mp->nal; k++)
        if (strlen(mp->al[k].allocator) == n && !memcmp(mp->al[k].allocator, name, n)) return (int)(mp->last_al = k);
    mp->last_al = mp->nal;
    if (mp->nal == mp->alcap && hbmi_grow((void **)&mp->al, &mp->alcap, mp->nal + 1, sizeof *mp->al)) return -1;
    hbm_memprof_summary *s = &mp->al[mp->nal];
    memset(s, 0, sizeof *s);
    if (!(s->allocator = pool_str(mp, name, n))) return -1;
    return (int)mp->nal++;
}

static const char *kind_of_value(const wfield *f) {
    switch (f->num) {
    case 2: return "a double";
    case 3: return "an unsigned integer";
    case 4: return "an integer";
    case 5: return "a string";
    case 6: return "bytes";
    case 7: return "a reference";
    default: return "no value";
    }
}

/* A damaged event: named by its kind, plane line and position, and the stat. */
static hbm_status damaged(const hbm_memprof *mp, int dealloc, size_t line, size_t ev, int64_t t, const char *stat,
                          const char *what) {
    return hbmi_error(HBM_ERR_PARSE, "%s: damaged memory event: %s #%zu of line %zu of '/host:CPU' (at %.3f ms): %s%s%s%s",
                      mp->path, dealloc ? "MemoryDeallocation" : "MemoryAllocation", ev, line, (double)t / 1e9,
                      stat ? "stat '" : "", stat ? stat : "", stat ? "' " : "", what);
}

/* An XStat as TSL writes it, its metadata id then one value (an integer, a double, a
 * string or a reference): 1 with them; 0 for anything else, read field by field instead. */
static inline int stat_fast(const uint8_t *b, size_t n, uint64_t *mid, int *have_mid, wfield *val) {
    size_t j = 1;
    uint64_t id, v = 0;
    if (n < 3 || b[0] != 0x08 || hbmi_varint_get(b, n, &j, &id) <= 0 || j >= n) return 0;
    uint8_t t = b[j++];
    const uint8_t *sb = NULL;
    size_t sn = 0;
    if (t == 0x18 || t == 0x20 || t == 0x38) { /* uint64, int64, ref: varints */
        if (hbmi_varint_get(b, n, &j, &v) <= 0) return 0;
    } else if (t == 0x11) { /* double */
        if (n - j < 8) return 0;
        for (int k = 7; k >= 0; k--) v = v << 8 | b[j + (size_t)k];
        j += 8;
    } else if (t == 0x2a) { /* str */
        uint64_t l;
        if (hbmi_varint_get(b, n, &j, &l) <= 0 || l > n - j) return 0;
        sb = b + j;
        sn = (size_t)l;
        j += sn;
    } else
        return 0;
    if (j != n) return 0;
    *mid = id;
    *have_mid = 1;
    struct {
        uint32_t num, wire;
    } nw = {t >> 3u, t & 7u};
    memcpy(&val->nw, &nw, sizeof val->nw); /* one word, as wnext writes it */
    val->v = v;
    val->b = sb;
    val->n = sn;
    return 1;
}

/* One memory event's stats into e (its allocator's name into *an). */
static hbm_status read_memory_event(hbm_memprof *mp, const plane_meta *pm, const uint8_t *p, size_t n, size_t from,
                                    int *odd, hbm_memprof_event *e, const uint8_t **an, size_t *ann, size_t line,
                                    size_t evno) {
    size_t i = from;
    wfield f;
    int r;
    *an = NULL;
    *ann = 0;
    e->step_id = -1;
    e->data_type = -1;
    e->tf_op = e->region_type = e->tensor_shape = "";
    char ordinal[24];
    while ((r = wnext(p, n, &i, &f)) > 0) {
        if (f.num != 4 || f.wire != 2) { /* stats; from > 0: a metadata id or offset here is odd */
            if (odd && (f.num == 1 || f.num == 2) && f.wire == 0) *odd = 1;
            continue;
        }
        wfield val = {0};
        uint64_t mid = 0;
        int have_mid = 0;
        if (!stat_fast(f.b, f.n, &mid, &have_mid, &val)) {
            size_t j = 0;
            wfield g;
            int q;
            while ((q = wnext(f.b, f.n, &j, &g)) > 0) {
                if (g.num == 1 && g.wire == 0) mid = g.v, have_mid = 1;
                else if (g.num >= 2 && g.num <= 7) val = g;
            }
            if (q < 0) return damaged(mp, e->dealloc, line, evno, e->time_ps, NULL, "a stat is truncated");
        }
        const smeta *sm = have_mid ? stat_meta(pm, mid) : NULL;
        if (!sm || sm->code == ST_NONE || sm->code == ST_PROGRAM) continue;
        const char *nm = stat_names[sm->code];
        const uint8_t *sv = NULL;
        size_t sn = 0;
        int is_int = (val.num == 3 && val.wire == 0) || (val.num == 4 && val.wire == 0);
        if (val.num == 5 && val.wire == 2) sv = val.b, sn = val.n;
        if (val.num == 7 && val.wire == 0) {
            const smeta *ref = stat_meta(pm, val.v);
            if (!ref) return damaged(mp, e->dealloc, line, evno, e->time_ps, nm, "refers to no stat metadata");
            sv = ref->name, sn = ref->n;
        }
        switch (sm->code) {
        case ST_ALLOCATOR:
        case ST_TF_OP:
        case ST_REGION:
        case ST_SHAPES: {
            if (!sv) {
                char w[64];
                snprintf(w, sizeof w, "holds %s, not a string", kind_of_value(&val));
                return damaged(mp, e->dealloc, line, evno, e->time_ps, nm, w);
            }
            if (sm->code == ST_ALLOCATOR) {
                *an = sv, *ann = sn;
                break;
            }
            char *s = pool_str(mp, sv, sn);
            if (!s) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
            if (sm->code == ST_TF_OP) e->tf_op = s;
            else if (sm->code == ST_REGION) e->region_type = s;
            else e->tensor_shape = s;
            break;
        }
        case ST_FRAG:
            if (val.num != 2 || val.wire != 1) {
                char w[64];
                snprintf(w, sizeof w, "holds %s, not a double", kind_of_value(&val));
                return damaged(mp, e->dealloc, line, evno, e->time_ps, nm, w);
            }
            memcpy(&e->fragmentation, &val.v, sizeof e->fragmentation);
            break;
        default: {
            if (!is_int) {
                char w[64];
                snprintf(w, sizeof w, "holds %s, not an integer", kind_of_value(&val));
                return damaged(mp, e->dealloc, line, evno, e->time_ps, nm, w);
            }
            int64_t sv64 = (int64_t)val.v;
            int bytes = sm->code == ST_RESERVED || sm->code == ST_ALLOCATED || sm->code == ST_AVAILABLE ||
                        sm->code == ST_PEAK || sm->code == ST_REQUESTED || sm->code == ST_ALLOCATION;
            if (bytes && val.num == 4 && sv64 < 0) {
                char w[64];
                snprintf(w, sizeof w, "is negative (%lld bytes)", (long long)sv64);
                return damaged(mp, e->dealloc, line, evno, e->time_ps, nm, w);
            }
            switch (sm->code) {
            case ST_RESERVED: e->bytes_reserved = val.v; break;
            case ST_ALLOCATED: e->bytes_allocated = val.v; break;
            case ST_AVAILABLE: e->bytes_available = val.v; break;
            case ST_PEAK: e->peak_bytes_in_use = val.v; break;
            case ST_REQUESTED: e->requested_bytes = val.v; break;
            case ST_ALLOCATION: e->allocation_bytes = val.v; break;
            case ST_ADDR: e->addr = val.v; break;
            case ST_GROUP: e->step_id = sv64; break;
            case ST_DTYPE: e->data_type = sv64; break;
            case ST_ID: e->id = sv64; break;
            case ST_INDEX_ON_HOST:
            case ST_ORDINAL:
                if (!*an) { /* XProf: the memory id is the ordinal unless a name follows */
                    snprintf(ordinal, sizeof ordinal, "%lld", (long long)sv64);
                    *an = (const uint8_t *)ordinal;
                    *ann = strlen(ordinal);
                }
                break;
            }
        }
        }
    }
    if (r < 0) return damaged(mp, e->dealloc, line, evno, e->time_ps, NULL, "a stat is truncated");
    int a = allocator_index(mp, *an ? *an : (const uint8_t *)"", *ann);
    if (a < 0) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    e->allocator = (uint32_t)a;
    *an = NULL; /* ordinal[] goes out of scope */
    return HBM_OK;
}

/* A line's timestamp (ns) as the picoseconds its events' offsets add to, saturated. */
static int64_t ns_to_ps(int64_t ns) {
    return ns > INT64_MAX / 1000 ? INT64_MAX : ns < INT64_MIN / 1000 ? INT64_MIN : ns * 1000;
}

static int64_t add_ps(int64_t a, int64_t b) {
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return b > 0 ? INT64_MAX : INT64_MIN;
    return a + b;
}

/* One line (f: its XLine message) read whole: memory events (the host plane) or module
 * executions; every field walked. The fast path below falls back to it. */
static hbm_status read_line(hbm_memprof *mp, const wfield *lf, const plane_meta *pm, int host, int device, int execs,
                            size_t line) {
    const wfield *fp = lf;
    {
        const wfield f = *fp;
        /* the line's timestamp first (its fields may come in any order) */
        int64_t ts_ns = 0;
        size_t j = 0;
        wfield g;
        int q;
        while ((q = wnext(f.b, f.n, &j, &g)) > 0)
            if (g.num == 3 && g.wire == 0) ts_ns = (int64_t)g.v;
        if (q < 0) return hbmi_error(HBM_ERR_PARSE, "%s: line %zu of a plane is truncated or corrupt", mp->path, line);
        int64_t base = ns_to_ps(ts_ns);
        size_t evno = 0;
        j = 0;
        while ((q = wnext(f.b, f.n, &j, &g)) > 0) {
            if (g.num != 4 || g.wire != 2) continue;
            size_t k = 0;
            wfield h;
            int s;
            uint64_t mid = 0;
            int64_t off = 0, dur = 0;
            int stats = 0;
            /* the metadata id comes first as TSL writes events: the others are skipped here */
            s = wnext(g.b, g.n, &k, &h);
            if (s > 0 && h.num == 1 && h.wire == 0) {
                mid = h.v;
                int is_mem = host && ((pm->has_alloc && mid == pm->alloc_id) || (pm->has_dealloc && mid == pm->dealloc_id));
                if (execs ? is_mem : !is_mem) {
                    evno++;
                    continue;
                }
            }
            k = 0;
            while ((s = wnext(g.b, g.n, &k, &h)) > 0) {
                if (h.num == 1 && h.wire == 0) mid = h.v;
                else if (h.num == 2 && h.wire == 0) off = (int64_t)h.v;
                else if (h.num == 3 && h.wire == 0) dur = (int64_t)h.v;
                else if (h.num == 4) stats = 1;
            }
            int64_t t = add_ps(base, off);
            int mem = host && ((pm->has_alloc && mid == pm->alloc_id) || (pm->has_dealloc && mid == pm->dealloc_id));
            if (s < 0 && mem && !execs) {
                /* the last stat read whole names where the damage is */
                const char *last_stat = NULL;
                size_t k3 = 0;
                while (wnext(g.b, g.n, &k3, &h) > 0) {
                    size_t m = 0;
                    wfield x;
                    while (h.num == 4 && h.wire == 2 && wnext(h.b, h.n, &m, &x) > 0)
                        if (x.num == 1 && x.wire == 0) {
                            const smeta *sm = stat_meta(pm, x.v);
                            if (sm && sm->code) last_stat = stat_names[sm->code];
                        }
                }
                char w[96];
                snprintf(w, sizeof w, "a stat is cut short (the one after '%s')", last_stat ? last_stat : "none");
                return damaged(mp, pm->has_dealloc && mid == pm->dealloc_id, line, evno, t, NULL, w);
            }
            if (s < 0) return hbmi_error(HBM_ERR_PARSE, "%s: event %zu of line %zu is truncated or corrupt", mp->path, evno, line);
            if (mem && !execs) {
                if (mp->nev == mp->evcap && hbmi_grow((void **)&mp->ev, &mp->evcap, mp->nev + 1, sizeof *mp->ev))
                    return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
                hbm_memprof_event *e = &mp->ev[mp->nev];
                memset(e, 0, sizeof *e);
                e->time_ps = t;
                e->dealloc = pm->has_dealloc && mid == pm->dealloc_id && !(pm->has_alloc && mid == pm->alloc_id);
                const uint8_t *an;
                size_t ann;
                hbm_status st = read_memory_event(mp, pm, g.b, g.n, 0, NULL, e, &an, &ann, line, evno);
                if (st) return st;
                mp->nev++;
            } else if (execs && !mem && stats && pm->has_program) {
                /* a module's kernel (device planes) or launch (host): its program_id */
                size_t k2 = 0;
                int64_t pid = -1;
                while ((s = wnext(g.b, g.n, &k2, &h)) > 0) {
                    if (h.num != 4 || h.wire != 2) continue;
                    size_t m = 0;
                    wfield x;
                    uint64_t smid = 0, v = 0;
                    int hm = 0, hv = 0;
                    while (wnext(h.b, h.n, &m, &x) > 0) {
                        if (x.num == 1 && x.wire == 0) smid = x.v, hm = 1;
                        else if ((x.num == 3 || x.num == 4) && x.wire == 0) v = x.v, hv = 1;
                    }
                    const smeta *sm = hm ? stat_meta(pm, smid) : NULL;
                    if (sm && sm->code == ST_PROGRAM && hv) pid = (int64_t)v;
                }
                if (pid >= 0) {
                    if (mp->nex == mp->excap && hbmi_grow((void **)&mp->ex, &mp->excap, mp->nex + 1, sizeof *mp->ex))
                        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
                    hbmi_memprof_exec *x = &mp->ex[mp->nex++];
                    x->start_ps = t;
                    x->end_ps = add_ps(t, dur > 0 ? dur : 0);
                    x->program_id = pid;
                    x->device = host ? -1 : device;
                }
            }
            evno++;
        }
        if (q < 0) return hbmi_error(HBM_ERR_PARSE, "%s: line %zu of a plane is truncated or corrupt", mp->path, line);
    }
    return HBM_OK;
}

static int is_mem_id(const plane_meta *pm, uint64_t mid) {
    return (pm->has_alloc && mid == pm->alloc_id) || (pm->has_dealloc && mid == pm->dealloc_id);
}

/* A line's field other than an event (tag 0x22), in the fast passes below: the timestamp
 * read into *base (ps). 0: the line goes the slow way (a damaged field, a second timestamp,
 * for the last one counts for events before it too, or an event behind a tag of more bytes
 * than it needs). */
static int line_field_fast(const uint8_t *b, size_t n, size_t *j, int64_t *base, int *have_ts) {
    wfield g;
    if (wnext(b, n, j, &g) <= 0) return 0;
    if (g.num == 3 && g.wire == 0) {
        if (*have_ts) return 0;
        *base = ns_to_ps((int64_t)g.v);
        *have_ts = 1;
    }
    return !(g.num == 4 && g.wire == 2);
}

/* One line's memory events in one pass, the common case: each event costs its tag, its
 * length and its first field (the metadata id, first as TSL writes events), so most are
 * skipped unread. 1: done; 0: the line is unusual (a memory event before the line's
 * timestamp, a second timestamp, a damaged field) and is read again by read_line, which
 * walks it whole and names any damage; what this pass added is taken back first. */
static int read_line_fast(hbm_memprof *mp, const uint8_t *b, size_t n, const plane_meta *pm, size_t line) {
    size_t j = 0, evno = 0, first = mp->nev;
    int64_t base = 0;
    int have_ts = 0;
    while (j < n) {
        if (b[j] == 0x22) { /* field 4, length-delimited: an event */
            j++;
            uint64_t l;
            if (hbmi_varint_get(b, n, &j, &l) <= 0 || l > n - j) goto slow;
            const uint8_t *e = b + j;
            size_t en = (size_t)l, k = 1;
            j += en;
            uint64_t mid = 0;
            int got = en >= 2 && e[0] == 0x08 && hbmi_varint_get(e, en, &k, &mid) > 0;
            if (got && !is_mem_id(pm, mid)) {
                evno++;
                continue;
            }
            /* a memory event (its id first, then its offset, as TSL writes them), else one
             * whose id does not come first: the slow path */
            if (!got || !have_ts) goto slow;
            int64_t off = 0;
            if (k < en && e[k] == 0x10) {
                k++;
                uint64_t o;
                if (hbmi_varint_get(e, en, &k, &o) <= 0) goto slow;
                off = (int64_t)o;
            }
            if (mp->nev == mp->evcap && hbmi_grow((void **)&mp->ev, &mp->evcap, mp->nev + 1, sizeof *mp->ev)) goto slow;
            hbm_memprof_event *ev = &mp->ev[mp->nev];
            memset(ev, 0, sizeof *ev);
            ev->time_ps = add_ps(base, off);
            ev->dealloc = pm->has_dealloc && mid == pm->dealloc_id && !(pm->has_alloc && mid == pm->alloc_id);
            const uint8_t *an;
            size_t ann;
            int odd = 0;
            if (read_memory_event(mp, pm, e, en, k, &odd, ev, &an, &ann, line, evno) || odd) goto slow;
            mp->nev++;
            evno++;
            continue;
        }
        if (!line_field_fast(b, n, &j, &base, &have_ts)) goto slow;
    }
    return 1;
slow:
    mp->nev = first;
    return 0;
}

/* One line's module executions in one pass (the events with a program_id stat: kernels on
 * the device planes, launches on the host), as read_line_fast reads memory events: 1 done,
 * 0 the line is unusual (read_line reads it again; what this pass added is taken back). */
static int read_line_execs_fast(hbm_memprof *mp, const uint8_t *b, size_t n, const plane_meta *pm, int host,
                                int device) {
    size_t j = 0, first = mp->nex;
    int64_t base = 0;
    int have_ts = 0;
    while (j < n) {
        if (b[j] == 0x22) { /* an event */
            j++;
            uint64_t l;
            if (hbmi_varint_get(b, n, &j, &l) <= 0 || l > n - j) goto slow;
            const uint8_t *e = b + j;
            size_t en = (size_t)l, k = 0;
            j += en;
            uint64_t mid = 0, v;
            if (en >= 2 && e[0] == 0x08) { /* a memory event (its id first): not a module's */
                k = 1;
                if (hbmi_varint_get(e, en, &k, &mid) <= 0) goto slow;
                if (host && is_mem_id(pm, mid)) continue;
            }
            if (!have_ts) goto slow;
            int64_t off = 0, dur = 0, pid = -1;
            while (k < en) {
                uint8_t t = e[k++];
                if (t == 0x08 || t == 0x10 || t == 0x18) {
                    if (hbmi_varint_get(e, en, &k, &v) <= 0) goto slow;
                    if (t == 0x08) mid = v;
                    else if (t == 0x10) off = (int64_t)v;
                    else dur = (int64_t)v;
                } else if (t == 0x22) { /* a stat: its program_id */
                    if (hbmi_varint_get(e, en, &k, &v) <= 0 || v > en - k) goto slow;
                    uint64_t smid = 0;
                    int hm = 0;
                    wfield val;
                    if (!stat_fast(e + k, (size_t)v, &smid, &hm, &val)) goto slow;
                    k += (size_t)v;
                    const smeta *sm = stat_meta(pm, smid);
                    if (sm && sm->code == ST_PROGRAM && (val.num == 3 || val.num == 4) && val.wire == 0)
                        pid = (int64_t)val.v;
                } else {
                    size_t k0 = k - 1;
                    wfield h;
                    if (wnext(e, en, &k0, &h) <= 0 || h.num <= 4) goto slow; /* the four read above, unusually */
                    k = k0;
                }
            }
            if (pid < 0 || (host && is_mem_id(pm, mid))) continue;
            if (mp->nex == mp->excap && hbmi_grow((void **)&mp->ex, &mp->excap, mp->nex + 1, sizeof *mp->ex)) goto slow;
            hbmi_memprof_exec *x = &mp->ex[mp->nex++];
            x->start_ps = add_ps(base, off);
            x->end_ps = add_ps(x->start_ps, dur > 0 ? dur : 0);
            x->program_id = pid;
            x->device = host ? -1 : device;
            continue;
        }
        if (!line_field_fast(b, n, &j, &base, &have_ts)) goto slow;
    }
    return 1;
slow:
    mp->nex = first;
    return 0;
}

/* One plane's lines: memory events (the host plane) and module executions. */
static hbm_status read_lines(hbm_memprof *mp, const uint8_t *p, size_t n, const plane_meta *pm, int host,
                             int device, int execs) {
    size_t i = 0, line = 0;
    wfield f;
    int r;
    while ((r = wnext(p, n, &i, &f)) > 0) {
        if (f.num != 3 || f.wire != 2) continue;
        if (execs ? !read_line_execs_fast(mp, f.b, f.n, pm, host, device) : !read_line_fast(mp, f.b, f.n, pm, line)) {
            hbm_status s = read_line(mp, &f, pm, host, device, execs, line);
            if (s) return s;
        }
        line++;
    }
    return r == 0 ? HBM_OK : hbmi_error(HBM_ERR_PARSE, "%s: a plane is truncated or corrupt", mp->path);
}

static int device_number(const char *s) {
    for (; *s; s++)
        if (*s >= '0' && *s <= '9') {
            long v = strtol(s, NULL, 10);
            return v >= 0 && v < 1 << 20 ? (int)v : -1;
        }
    return -1;
}

/* The memory events of the host plane, or (execs) the module events of every plane. */
static hbm_status read_space(hbm_memprof *mp, int execs) {
    const uint8_t *p = (const uint8_t *)mp->buf;
    size_t i = 0;
    wfield f;
    int r;
    while ((r = wnext(p, mp->len, &i, &f)) > 0) {
        if (f.num != 1 || f.wire != 2) continue;
        if (!execs) mp->n_planes++;
        /* the plane's name */
        size_t j = 0;
        wfield g;
        int q;
        const uint8_t *name = (const uint8_t *)"";
        size_t nn = 0;
        /* its first name, as the module listing takes it (hbm/proto.h): the fields after it
         * (lines, metadata) are not walked for a plane that is not read */
        while ((q = wnext(f.b, f.n, &j, &g)) > 0)
            if (g.num == 2 && g.wire == 2) {
                name = g.b, nn = g.n;
                break;
            }
        if (q < 0) {
            r = -1;
            break;
        }
        int host = str_eq(name, nn, "/host:CPU");
        int device = -1;
        if (nn > 8 && !memcmp(name, "/device:", 8) && !(nn >= 15 && !memcmp(name, "/device:CUSTOM", 14))) {
            char tmp[64];
            snprintf(tmp, sizeof tmp, "%.*s", (int)(nn < 63 ? nn : 63), (const char *)name);
            device = device_number(tmp);
            if (device < 0) device = 0;
            if (!execs) mp->n_device_planes++;
        }
        if (str_eq(name, nn, "/host:metadata")) mp->has_metadata = 1;
        if (!host && (device < 0 || !execs)) continue;
        plane_meta pm = {0};
        hbm_status s = read_plane_meta(f.b, f.n, &pm);
        if (s == HBM_ERR_NOMEM) {
            plane_meta_free(&pm);
            return hbmi_error(s, "out of host memory");
        }
        if (s) {
            plane_meta_free(&pm);
            return hbmi_error(s, "%s: plane '%.*s' is truncated or corrupt", mp->path, (int)(nn < 200 ? nn : 200),
                              (const char *)name);
        }
        if (host) mp->has_host = 1;
        if (execs ? pm.has_program : pm.has_alloc) s = read_lines(mp, f.b, f.n, &pm, host, device, execs);
        plane_meta_free(&pm);
        if (s) return s;
    }
    if (r < 0 || (r == 0 && i != mp->len))
        return hbmi_error(HBM_ERR_PARSE, "%s: not a valid XProf profile (XSpace protobuf): truncated or corrupt",
                          mp->path);
    return HBM_OK;
}

/* --- XProf's summary ------------------------------------------------------------------- */
static _Thread_local const hbm_memprof_event *sort_ev_; /* the comparators' events (per thread) */
typedef struct tkey {
    uint32_t allocator;
    int64_t time_ps;
    size_t idx;
} tkey;
static int cmp_time(const void *x, const void *y) {
    const tkey *a = x, *b = y;
    if (a->allocator != b->allocator) return a->allocator < b->allocator ? -1 : 1;
    if (a->time_ps != b->time_ps) return a->time_ps < b->time_ps ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx; /* stable: the file's order */
}

static int cmp_active(const void *x, const void *y) {
    const hbm_memprof_active *a = x, *b = y;
    const hbm_memprof_event *ea = &sort_ev_[a->event], *eb = &sort_ev_[b->event];
    /* XProf's MetadataComparator: allocation bytes, requested bytes (descending), then the
     * op, region, data type and shape */
    if (ea->allocation_bytes != eb->allocation_bytes) return ea->allocation_bytes > eb->allocation_bytes ? -1 : 1;
    if (ea->requested_bytes != eb->requested_bytes) return ea->requested_bytes > eb->requested_bytes ? -1 : 1;
    int c = strcmp(ea->tf_op, eb->tf_op);
    if (!c) c = strcmp(ea->region_type, eb->region_type);
    if (!c && ea->data_type != eb->data_type) c = ea->data_type < eb->data_type ? -1 : 1;
    if (!c) c = strcmp(ea->tensor_shape, eb->tensor_shape);
    return c ? c : (a->event < b->event ? -1 : a->event > b->event);
}

static int cmp_alloc_name(const void *x, const void *y) {
    return strcmp(((const hbm_memprof_summary *)x)->allocator, ((const hbm_memprof_summary *)y)->allocator);
}

static hbm_status summarize(hbm_memprof *mp) {
    /* allocators by name (XProf sorts its memory ids); events renumbered to match */
    uint32_t *order = hbmi_calloc(mp->nal ? mp->nal : 1, sizeof *order);
    hbm_memprof_summary *sorted = hbmi_calloc(mp->nal ? mp->nal : 1, sizeof *sorted);
    if (!order || !sorted) {
        hbmi_free(order);
        hbmi_free(sorted);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    if (mp->nal) memcpy(sorted, mp->al, mp->nal * sizeof *sorted);
    hbmi_qsort(sorted, mp->nal, sizeof *sorted, cmp_alloc_name);
    for (size_t k = 0; k < mp->nal; k++)
        for (size_t m = 0; m < mp->nal; m++)
            if (sorted[m].allocator == mp->al[k].allocator) order[k] = (uint32_t)m;
    for (size_t e = 0; e < mp->nev; e++) mp->ev[e].allocator = order[mp->ev[e].allocator];
    if (mp->nal) memcpy(mp->al, sorted, mp->nal * sizeof *sorted);
    hbmi_free(sorted);
    hbmi_free(order);
    /* XProf's UpdateProfileSummary, in the events' order as the file holds them */
    for (size_t e = 0; e < mp->nev; e++) {
        const hbm_memprof_event *ev = &mp->ev[e];
        hbm_memprof_summary *s = &mp->al[ev->allocator];
        if (!s->n_events) s->peak_event = SIZE_MAX;
        s->n_events++;
        if (ev->dealloc) s->n_deallocations++;
        else s->n_allocations++;
        if (ev->bytes_allocated > s->max_bytes_allocated) s->max_bytes_allocated = ev->bytes_allocated;
        if (ev->peak_bytes_in_use > s->max_peak_bytes_in_use) s->max_peak_bytes_in_use = ev->peak_bytes_in_use;
        if (ev->bytes_reserved > s->max_bytes_reserved) s->max_bytes_reserved = ev->bytes_reserved;
        s->peak_bytes_usage_lifetime = ev->peak_bytes_in_use;
        uint64_t use = ev->bytes_reserved + ev->bytes_allocated;
        if (s->peak_event == SIZE_MAX || use >= s->peak_bytes_in_use) {
            s->peak_bytes_in_use = use;
            s->peak_event = e;
            s->peak_time_ps = ev->time_ps;
            s->peak_allocated = ev->bytes_allocated;
            s->peak_reserved = ev->bytes_reserved;
            s->peak_available = ev->bytes_available;
            s->peak_fragmentation = ev->fragmentation;
            s->memory_capacity = use + ev->bytes_available;
        }
    }
    /* each allocator's events in time order (XProf sorts its snapshots by time) */
    mp->order = hbmi_calloc(mp->nev ? mp->nev : 1, sizeof *mp->order);
    if (!mp->order) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    tkey *keys = hbmi_malloc((mp->nev ? mp->nev : 1) * sizeof *keys);
    if (!keys) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t e = 0; e < mp->nev; e++) keys[e] = (tkey){mp->ev[e].allocator, mp->ev[e].time_ps, e};
    hbmi_qsort(keys, mp->nev, sizeof *keys, cmp_time);
    for (size_t e = 0; e < mp->nev; e++) mp->order[e] = keys[e].idx;
    hbmi_free(keys);
    sort_ev_ = mp->ev;
    for (size_t k = 0, e = 0; k < mp->nal; k++) {
        hbm_memprof_summary *s = &mp->al[k];
        s->first_event = e;
        s->device_index = device_number(s->allocator);
        if (s->device_index < 0) s->device_index = (int)k;
        const hbm_memprof_event *first = &mp->ev[mp->order[e]];
        s->first_time_ps = first->time_ps;
        s->last_time_ps = mp->ev[mp->order[e + s->n_events - 1]].time_ps;
        s->peak_offset_ps = s->peak_time_ps - s->first_time_ps;
        /* in use before the first event: its figure less (or plus) its own block */
        uint64_t blk = first->allocation_bytes;
        s->held_before_bytes = first->dealloc ? first->bytes_allocated + blk
                                              : (first->bytes_allocated >= blk ? first->bytes_allocated - blk : 0);
        /* XProf's UpdateStepId: an event without a step takes the previous one's + 1 */
        int64_t last = -1;
        for (size_t m = 0; m < s->n_events; m++) {
            hbm_memprof_event *ev = &mp->ev[mp->order[e + m]];
            if (ev->step_id == -1) ev->step_id = last + 1;
            else last = ev->step_id;
        }
        /* GetPeakMemoryStep: the last event, in time order, at the peak's figure */
        s->peak_step = 0;
        for (size_t m = 0; m < s->n_events; m++) {
            const hbm_memprof_event *ev = &mp->ev[mp->order[e + m]];
            if (ev->bytes_reserved + ev->bytes_allocated == s->peak_bytes_in_use) s->peak_step = ev->step_id;
        }
        /* ProcessActiveAllocations: the peak step's allocations not freed by the peak */
        hbmi_map live;
        hbmi_map_init(&live);
        int64_t unmapped = (int64_t)s->peak_allocated, unmapped_free = 0;
        hbm_status st = HBM_OK;
        for (size_t m = 0; m < s->n_events && !st; m++) {
            size_t idx = mp->order[e + m];
            const hbm_memprof_event *ev = &mp->ev[idx];
            if (ev->time_ps > s->peak_time_ps) break;
            if (ev->step_id != s->peak_step) continue;
            uint64_t key = ev->addr == UINT64_MAX ? UINT64_MAX - 1 : ev->addr;
            if (!ev->dealloc) {
                st = hbmi_map_put(&live, key, idx);
                unmapped -= (int64_t)ev->allocation_bytes;
            } else {
                if (!hbmi_map_del(&live, key, NULL)) unmapped_free += (int64_t)ev->allocation_bytes;
                unmapped += (int64_t)ev->allocation_bytes;
            }
        }
        unmapped -= unmapped_free;
        s->unmapped_bytes = unmapped > 0 ? (uint64_t)unmapped : 0;
        if (!st && live.count) {
            s->active = hbmi_arena_alloc(&mp->arena, live.count * sizeof *s->active);
            if (!s->active) st = HBM_ERR_NOMEM;
            for (size_t c = 0; !st && c < live.cap; c++)
                if (live.s[c].key) {
                    hbm_memprof_active *a = &s->active[s->n_active++];
                    a->event = (size_t)live.s[c].val;
                    a->program_id = -1;
                    a->module = a->kind = a->why = "";
                    a->shape = mp->ev[a->event].tensor_shape;
                }
            hbmi_qsort(s->active, s->n_active, sizeof *s->active, cmp_active);
        }
        hbmi_map_destroy(&live);
        if (st) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        s->running_program_id = -1;
        s->running_module = "";
        e += s->n_events;
    }
    /* from here on the events are in that order: indices follow */
    hbm_memprof_event *tsorted = hbmi_calloc(mp->nev ? mp->nev : 1, sizeof *tsorted);
    size_t *inv = hbmi_calloc(mp->nev ? mp->nev : 1, sizeof *inv);
    if (!tsorted || !inv) {
        hbmi_free(tsorted);
        hbmi_free(inv);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    for (size_t k = 0; k < mp->nev; k++) {
        tsorted[k] = mp->ev[mp->order[k]];
        inv[mp->order[k]] = k;
    }
    for (size_t k = 0; k < mp->nal; k++) {
        hbm_memprof_summary *s = &mp->al[k];
        if (s->n_events) s->peak_event = inv[s->peak_event];
        for (size_t a = 0; a < s->n_active; a++) s->active[a].event = inv[s->active[a].event];
    }
    hbmi_free(inv);
    hbmi_free(mp->ev);
    mp->ev = tsorted;
    mp->evcap = mp->nev;
    return HBM_OK;
}

/* --- opening ------------------------------------------------------------------------------ */
static hbm_status open_buf(hbm_memprof *mp, hbm_memprof **out) {
    hbm_status s = HBM_OK;
    if (hbm_proto_sniff(mp->buf, mp->len) != HBM_PROTO_XSPACE)
        s = hbmi_error(HBM_ERR_PARSE, "%s: not an XProf profile (an XSpace *.xplane.pb or a profile directory)",
                       mp->path);
    if (!s) s = read_space(mp, 0);
    if (!s) s = summarize(mp);
    if (s) {
        hbm_memprof_close(mp);
        return s;
    }
    *out = mp;
    return HBM_OK;
}

hbm_status hbm_memprof_open(const char *path, hbm_memprof **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_memprof_open: NULL argument");
    *out = NULL;
    hbm_memprof *mp = hbmi_calloc(1, sizeof *mp);
    if (!mp) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    snprintf(mp->path, sizeof mp->path, "%s", path);
    if (hbm_proto_path_kind(path) == HBM_PROTO_PROFILE_DIR) hbmi_proto_find_profile(path, mp->path, sizeof mp->path);
    /* mapped, not copied: the reader walks the host plane's events and skips the rest */
    hbm_status s = hbmi_input_open(mp->path, &mp->map);
    if (s) {
        hbm_memprof_close(mp);
        return s;
    }
    mp->buf = mp->map.data;
    mp->len = mp->map.len;
    mp->from_file = 1;
    snprintf(mp->given, sizeof mp->given, "%s", path);
    return open_buf(mp, out);
}

hbm_status hbm_memprof_open_mem(const void *data, size_t len, const char *name, hbm_memprof **out) {
    if ((!data && len) || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_memprof_open_mem: NULL argument");
    *out = NULL;
    hbm_memprof *mp = hbmi_calloc(1, sizeof *mp);
    if (!mp || !(mp->buf = hbmi_malloc(len ? len : 1))) {
        hbmi_free(mp);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    if (len) memcpy(mp->buf, data, len);
    mp->len = len;
    mp->map.data = mp->buf; /* freed as a buffer read (not mapped) */
    mp->map.len = len;
    snprintf(mp->path, sizeof mp->path, "%s", name ? name : "input");
    snprintf(mp->given, sizeof mp->given, "%s", mp->path);
    return open_buf(mp, out);
}

void hbm_memprof_close(hbm_memprof *mp) {
    if (!mp) return;
    hbmi_arena_free(&mp->arena);
    hbmi_free(mp->ev);
    hbmi_free(mp->order);
    hbmi_free(mp->al);
    hbmi_free(mp->ex);
    hbmi_input_close(&mp->map);
    hbmi_free(mp);
}

const char *hbm_memprof_path(const hbm_memprof *mp) { return mp ? mp->path : ""; }
size_t hbm_memprof_allocator_count(const hbm_memprof *mp) { return mp ? mp->nal : 0; }
const hbm_memprof_summary *hbm_memprof_allocator(const hbm_memprof *mp, size_t i) {
    return mp && i < mp->nal ? &mp->al[i] : NULL;
}
int hbm_memprof_find_device(const hbm_memprof *mp, int d) {
    for (size_t k = 0; mp && k < mp->nal; k++)
        if (mp->al[k].device_index == d) return (int)k;
    return -1;
}
size_t hbm_memprof_execution_count(const hbm_memprof *mp) { return mp ? mp->nex : 0; }

void hbmi_memprof_holds_get(const hbm_memprof *mp, hbmi_memprof_holds *out) {
    out->n_planes = mp->n_planes;
    out->n_device_planes = mp->n_device_planes;
    out->has_host = mp->has_host;
    out->has_metadata = mp->has_metadata;
    out->n_modules = mp->n_modules;
    out->n_planned = mp->n_planned;
    out->attr_note = mp->attr_note;
}

hbm_status hbmi_memprof_read_execs(hbm_memprof *mp) {
    if (mp->execs_read) return HBM_OK;
    mp->nex = 0;
    hbm_status s = read_space(mp, 1);
    if (!s) mp->execs_read = 1;
    return s;
}

const hbm_memprof_event *hbm_memprof_events(const hbm_memprof *mp, size_t *n) {
    if (!mp) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = mp->nev;
    return mp->ev;
}

hbm_status hbm_memprof_trace(const hbm_memprof *mp, size_t i, hbm_trace **out) {
    if (!mp || !out || i >= mp->nal) return hbmi_error(HBM_ERR_INVALID, "hbm_memprof_trace: no allocator %zu", i);
    *out = NULL;
    const hbm_memprof_summary *s = &mp->al[i];
    hbm_trace *t;
    hbm_status st = hbm_trace_new(&t);
    if (st) return st;
    const char *base = strrchr(mp->path, '/');
    snprintf(t->name, sizeof t->name, "%.100s", base ? base + 1 : mp->path);
    snprintf(t->source, sizeof t->source, "xprof");
    snprintf(t->device, sizeof t->device, "%.60s", s->allocator);
    t->device_index = s->device_index;
    t->has_time = 1;
    const hbm_memprof_event *ev = mp->ev + s->first_event;
    /* what was in use before the first event: each block freed later without having been
     * allocated in the profile, at its address; the rest as one block (never freed) */
    hbmi_map live;
    hbmi_map_init(&live);
    uint64_t before = 0;
    size_t nb = 0;
    hbm_tag tg = {.op_name = "in use before the profile's first event", .label = "held before"};
    uint32_t tid = 0;
    st = hbm_trace_intern(t, &tg, &tid);
    for (int pass = 0; pass < 2 && !st; pass++) {
        hbmi_map_destroy(&live);
        hbmi_map_init(&live);
        for (size_t k = 0; k < s->n_events && !st; k++) {
            const hbm_memprof_event *x = &ev[k];
            uint64_t key = x->addr == UINT64_MAX ? UINT64_MAX - 1 : x->addr;
            if (!x->dealloc) st = hbmi_map_put(&live, key, 1);
            else if (!hbmi_map_del(&live, key, NULL) && x->allocation_bytes) {
                if (!pass) {
                    before += x->allocation_bytes;
                    continue;
                }
                hbm_trace_event e = {.kind = HBM_EV_ALLOC, .addr = x->addr, .size = x->allocation_bytes,
                                     .requested = x->requested_bytes, .tag = tid};
                st = hbm_trace_add(t, &e);
                nb++;
            }
        }
    }
    hbmi_map_destroy(&live);
    if (!st && s->held_before_bytes > before) {
        hbm_trace_event e = {.kind = HBM_EV_ALLOC, .addr = 0, .size = s->held_before_bytes - before,
                             .requested = s->held_before_bytes - before, .tag = tid};
        st = hbm_trace_add(t, &e);
        nb++;
    }
    t->history_start = t->count;
    t->live_before_bytes = s->held_before_bytes > before ? s->held_before_bytes : before;
    t->live_before_blocks = nb;
    for (size_t k = 0; k < s->n_events && !st; k++) {
        const hbm_memprof_event *x = &ev[k];
        hbm_trace_event e = {.kind = x->dealloc ? HBM_EV_FREE : HBM_EV_ALLOC,
                             .time_ns = (uint64_t)((x->time_ps - s->first_time_ps) / 1000),
                             .addr = x->addr, .size = x->allocation_bytes, .requested = x->requested_bytes};
        if (!x->dealloc && (x->tensor_shape[0] || x->tf_op[0] || x->region_type[0])) {
            hbm_tag etg = {.op_name = x->tf_op, .shape = x->tensor_shape, .label = x->region_type};
            uint32_t etid = 0;
            if ((st = hbm_trace_intern(t, &etg, &etid))) break;
            e.tag = etid;
        }
        st = hbm_trace_add(t, &e);
    }
    if (st) {
        hbm_trace_free(t);
        return st;
    }
    *out = t;
    return HBM_OK;
}
