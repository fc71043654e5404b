/* fleet_summary.c - one rank's summary: its figures from a trace (the same hbm view
 * computes: hbmi_view_build), and the summary document read back (docs/fleet.md). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/fleet_read.h"
#include "trace/import/pyval.h"
#include "trace/trace_view.h"

void hbmi_rank_free(hbmi_rank *r) {
    hbmi_free(r->name);
    hbmi_free(r->path);
    hbmi_free(r->device);
    hbmi_free(r->error);
    hbmi_free(r->page);
    for (size_t i = 0; i < r->nsites; i++) {
        hbmi_free(r->sites[i].op);
        hbmi_free(r->sites[i].source);
        hbmi_free(r->sites[i].category);
    }
    hbmi_free(r->sites);
    memset(r, 0, sizeof *r);
}

/* op \x1f source \x1f category into a site's three strings */
static hbm_status site_from_key(const char *key, hbmi_site *s) {
    const char *a = strchr(key, '\x1f'), *b = a ? strchr(a + 1, '\x1f') : NULL;
    if (!a || !b) return hbmi_error(HBM_ERR_INVALID, "a contributor key without its three parts");
    s->op = hbmi_malloc((size_t)(a - key) + 1);
    s->source = hbmi_malloc((size_t)(b - a));
    s->category = hbmi_strdup(b + 1);
    if (!s->op || !s->source || !s->category) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    memcpy(s->op, key, (size_t)(a - key));
    s->op[a - key] = 0;
    memcpy(s->source, a + 1, (size_t)(b - a - 1));
    s->source[b - a - 1] = 0;
    return HBM_OK;
}

/* Contributors (one side: bytes[0], count[0]) merged as hbm diff merges them
 * (hbmi_contrib_merge, largest first) into the rank's sites; c's keys are freed. */
static hbm_status sites_of(hbmi_contrib *c, size_t m, hbmi_rank *r) {
    hbm_status s = HBM_OK;
    m = hbmi_contrib_merge(c, m);
    if (!(r->sites = hbmi_calloc(m + 1, sizeof *r->sites))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t i = 0; i < m && !s; i++) {
        s = site_from_key(c[i].key, &r->sites[i]);
        r->sites[i].bytes = c[i].bytes[0];
        r->sites[i].buffers = c[i].count[0];
        r->nsites = i + 1;
    }
    for (size_t i = 0; i < m; i++) hbmi_free(c[i].key);
    return s;
}

/* The buffers live at the peak grouped by (op, source, category) as hbm diff groups them:
 * hbmi_contrib_merge over one side, so the order is the diff's (largest first). */
static hbm_status sites(const hbmi_view *v, hbmi_rank *r) {
    hbmi_contrib *c = hbmi_calloc(v->n_at_peak + 1, sizeof *c);
    if (!c) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbm_status s = HBM_OK;
    size_t m = 0;
    for (size_t k = 0; k < v->n_at_peak; k++, m++) {
        const hbm_tl_buffer *b = &v->tl->buffers[v->at_peak[k]];
        const hbm_tag *tg = hbm_timeline_tag_at(v->tl, b->tag);
        char src[300], key[1024];
        snprintf(key, sizeof key, "%s\x1f%s\x1f%s", hbmi_contrib_op(tg), hbmi_view_source(tg, src, sizeof src),
                 tg ? hbm_category_str(tg->category) : "");
        if (!(c[m].key = hbmi_strdup(key))) {
            s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
            break;
        }
        c[m].bytes[0] = b->size;
        c[m].count[0] = 1;
    }
    if (!s) s = sites_of(c, m, r);
    else
        for (size_t i = 0; i < m; i++) hbmi_free(c[i].key);
    hbmi_free(c);
    return s;
}

hbm_status hbmi_rank_from_trace(const hbm_trace *t, hbmi_rank *r) {
    hbmi_view v;
    hbm_status s = hbmi_view_build(t, &v);
    if (s) return s;
    r->device_index = t->device_index;
    r->events = t->count - t->history_start;
    r->allocs = v.allocs;
    r->frees = v.frees;
    r->ooms = v.ooms;
    r->peak_use = v.peak_use;
    r->peak_res = v.peak_res;
    r->res_at_peak = t->count ? v.res[v.peak_i] : 0;
    r->peak_event = hbmi_event_number(t, (int64_t)v.peak_i);
    r->first_oom_event = hbmi_event_number(t, v.first_oom);
    r->live_at_peak = v.n_at_peak;
    r->live_at_peak_bytes = v.at_peak_bytes;
    if (!(r->device = hbmi_strdup(t->device))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    if (!s) s = sites(&v, r);
    hbmi_view_free(&v);
    return s;
}

/* A memory profile's allocator as a rank: the figures hbm view PROFILE shows, all read from
 * the one summary the memory profile's engine computed (xprof_memory.c, XProf's
 * definitions): peak in use is XProf's (the largest bytes_allocated + bytes_reserved), peak
 * reserved the largest bytes_reserved, reserved and fragmentation at the peak that event's
 * stats. The sites are XProf's active allocations at the peak: each live allocation by the
 * module that made it and its kind (the attribution), the bytes held from before the
 * peak's step, and the reserved ("stack") bytes, so that they make the peak. */
hbm_status hbmi_rank_from_memprof(const hbm_memprof *mp, size_t i, hbmi_rank *r) {
    const hbm_memprof_summary *a = hbm_memprof_allocator(mp, i);
    if (!a) return hbmi_error(HBM_ERR_INVALID, "hbmi_rank_from_memprof: no allocator %zu", i);
    const hbm_memprof_event *ev = hbm_memprof_events(mp, NULL);
    r->device_index = a->device_index;
    r->events = a->n_events;
    r->allocs = a->n_allocations;
    r->frees = a->n_deallocations;
    r->ooms = 0;
    r->peak_use = a->peak_bytes_in_use;
    r->peak_res = a->max_bytes_reserved;
    r->res_at_peak = a->peak_reserved;
    r->frag = a->peak_fragmentation;
    r->frag_stated = 1;
    r->peak_event = a->n_events ? (int64_t)(a->peak_event - a->first_event) : -1;
    r->first_oom_event = -1;
    if (!(r->device = hbmi_strdup(a->allocator))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbmi_contrib *c = hbmi_calloc(a->n_active + 3, sizeof *c);
    if (!c) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbm_status s = HBM_OK;
    size_t m = 0;
    for (size_t k = 0; k < a->n_active + 2 && !s; k++) {
        const hbm_memprof_active *x = k < a->n_active ? &a->active[k] : NULL;
        const hbm_memprof_event *e = x ? &ev[x->event] : NULL;
        uint64_t bytes = x ? e->allocation_bytes : k == a->n_active ? a->unmapped_bytes : a->peak_reserved;
        if (!x && !bytes) continue;
        char key[1024]; /* "jit_f(3) temp": the module and the kind, as the diff table shows ops */
        if (!x && k == a->n_active)
            snprintf(key, sizeof key, "held from before the peak's step\x1f\x1f" "arrays kept between calls");
        else if (!x)
            snprintf(key, sizeof key, "stack (bytes_reserved at the peak)\x1f\x1fstack");
        else if (*x->module && *x->kind)
            snprintf(key, sizeof key, "%s %s\x1f\x1f%s", x->module, x->kind, x->kind);
        else
            snprintf(key, sizeof key, "%s\x1f\x1f%s",
                     *x->module ? x->module : *e->tf_op ? e->tf_op : *x->kind ? x->kind : "(unattributed)", x->kind);
        if (!(c[m].key = hbmi_strdup(key))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        c[m].bytes[0] = bytes;
        c[m].count[0] = 1;
        r->live_at_peak++;
        r->live_at_peak_bytes += bytes;
        m++;
    }
    if (!s) s = sites_of(c, m, r);
    else
        for (size_t k = 0; k < m; k++) hbmi_free(c[k].key);
    hbmi_free(c);
    return s;
}

/* --- the summary document read back ----------------------------------------------------- */

int hbm_fleet_is_summary(const void *head, size_t n) {
    const char *p = head, *end = p + n;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    if (p == end || *p++ != '{') return 0;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    static const char key[] = "\"hbm_summary\"";
    return (size_t)(end - p) >= sizeof key - 1 && !memcmp(p, key, sizeof key - 1);
}

int hbm_fleet_is_summary_file(const char *path) {
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return 0;
    char head[64];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return hbm_fleet_is_summary(head, n);
}

static hbm_status need_u64(const hbmi_pv *d, const char *key, const char *name, size_t i, uint64_t *out) {
    const hbmi_pv *x = hbmi_pv_get(d, key);
    if (!x || x->type != PV_INT || x->i < 0)
        return hbmi_error(HBM_ERR_PARSE, "%s: rank %zu: \"%s\" is missing or not a count of bytes/events", name, i, key);
    *out = (uint64_t)x->i;
    return HBM_OK;
}

static hbm_status need_i64(const hbmi_pv *d, const char *key, const char *name, size_t i, int64_t *out) {
    const hbmi_pv *x = hbmi_pv_get(d, key);
    if (!x || x->type != PV_INT) return hbmi_error(HBM_ERR_PARSE, "%s: rank %zu: \"%s\" is missing or not an integer", name, i, key);
    *out = x->i;
    return HBM_OK;
}

static char *dup_str(const hbmi_pv *d, const char *key) {
    const hbmi_pv *x = hbmi_pv_get(d, key);
    return hbmi_strdup(x && x->type == PV_STR ? x->s : "");
}

static hbm_status rank_read(const hbmi_pv *d, const char *name, size_t i, hbmi_rank *r) {
    if (!d || d->type != PV_DICT) return hbmi_error(HBM_ERR_PARSE, "%s: rank %zu is not an object", name, i);
    hbm_status s;
    int64_t di = 0;
    if ((s = need_i64(d, "device_index", name, i, &di)) || (s = need_u64(d, "events", name, i, &r->events)) ||
        (s = need_u64(d, "allocs", name, i, &r->allocs)) || (s = need_u64(d, "frees", name, i, &r->frees)) ||
        (s = need_u64(d, "ooms", name, i, &r->ooms)) || (s = need_u64(d, "peak_bytes_in_use", name, i, &r->peak_use)) ||
        (s = need_u64(d, "peak_bytes_reserved", name, i, &r->peak_res)) ||
        (s = need_u64(d, "reserved_at_peak_bytes", name, i, &r->res_at_peak)) ||
        (s = need_i64(d, "peak_event", name, i, &r->peak_event)) ||
        (s = need_i64(d, "first_oom_event", name, i, &r->first_oom_event)) ||
        (s = need_u64(d, "live_at_peak", name, i, &r->live_at_peak)) ||
        (s = need_u64(d, "live_at_peak_bytes", name, i, &r->live_at_peak_bytes)))
        return s;
    r->device_index = (int)di;
    const hbmi_pv *fig = hbmi_pv_get(d, "figures");
    if (fig && fig->type == PV_STR && !strcmp(fig->s, "xprof")) { /* the profile's own fragmentation */
        const hbmi_pv *fr = hbmi_pv_get(d, "fragmentation_at_peak");
        if (!fr || (fr->type != PV_FLOAT && fr->type != PV_INT))
            return hbmi_error(HBM_ERR_PARSE, "%s: rank %zu: \"fragmentation_at_peak\" is missing or not a number", name, i);
        r->frag = fr->type == PV_FLOAT ? fr->f : (double)fr->i;
        r->frag_stated = 1;
    }
    if (!(r->device = dup_str(d, "device"))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    const hbmi_pv *st = hbmi_pv_get(d, "sites");
    if (!st || st->type != PV_LIST) return hbmi_error(HBM_ERR_PARSE, "%s: rank %zu: \"sites\" is missing or not a list", name, i);
    if (!(r->sites = hbmi_calloc(st->n + 1, sizeof *r->sites))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t k = 0; k < st->n; k++) {
        const hbmi_pv *x = st->items[k];
        if (!x || x->type != PV_DICT) return hbmi_error(HBM_ERR_PARSE, "%s: rank %zu: site %zu is not an object", name, i, k);
        hbmi_site *si = &r->sites[k];
        r->nsites = k + 1;
        if ((s = need_u64(x, "bytes", name, i, &si->bytes)) || (s = need_u64(x, "buffers", name, i, &si->buffers)))
            return s;
        if (!(si->op = dup_str(x, "op")) || !(si->source = dup_str(x, "source")) || !(si->category = dup_str(x, "category")))
            return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    return HBM_OK;
}

hbm_status hbmi_summary_read(const char *text, size_t len, const char *name, hbmi_rank **out, size_t *n) {
    *out = NULL;
    *n = 0;
    hbmi_pvpool pool = {0};
    hbmi_pv *root = NULL;
    hbm_status s = hbmi_json_parse(text, len, name, &pool, &root);
    const hbmi_pv *ver = s ? NULL : hbmi_pv_get(root, "hbm_summary");
    const hbmi_pv *list = s ? NULL : hbmi_pv_get(root, "ranks");
    if (!s && (!root || root->type != PV_DICT || !ver || ver->type != PV_INT))
        s = hbmi_error(HBM_ERR_PARSE, "%s: not an hbm summary (no \"hbm_summary\" version)", name);
    else if (!s && ver->i != HBMI_SUMMARY_VERSION)
        s = hbmi_error(HBM_ERR_UNSUPPORTED, "%s: hbm summary version %" PRId64 ", this hbm reads version %d", name, ver->i,
                       HBMI_SUMMARY_VERSION);
    else if (!s && (!list || list->type != PV_LIST))
        s = hbmi_error(HBM_ERR_PARSE, "%s: \"ranks\" is missing or not a list", name);
    hbmi_rank *r = NULL;
    if (!s && !(r = hbmi_calloc(list->n + 1, sizeof *r))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    size_t m = 0;
    char *path = NULL;
    if (!s) {
        const hbmi_pv *e = hbmi_pv_get(root, "error");
        if (e && e->type == PV_STR)
            s = hbmi_error(HBM_ERR_PARSE, "%s", e->s); /* a summary of an input its writer could not read */
        else if (!(path = dup_str(root, "path")))
            s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    for (; !s && m < list->n; m++) {
        s = rank_read(list->items[m], name, m, &r[m]);
        if (!s && !(r[m].path = hbmi_strdup(path))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    size_t nlist = list ? list->n : 0; /* read before the pool that holds it is freed */
    hbmi_free(path);
    hbmi_pvpool_free(&pool);
    if (s) {
        for (size_t i = 0; i <= m && r && i < nlist; i++) hbmi_rank_free(&r[i]);
        hbmi_free(r);
        return s;
    }
    *out = r;
    *n = m;
    return HBM_OK;
}
