/* view_model.c - the figures shared by the terminal, JSON and HTML views. */
#include <stdlib.h>
#include <string.h>

#include "report/view_internal.h"
#include "trace/trace_view.h"

const char *hbmi_view_source(const hbm_tag *tg, char *buf, size_t cap) {
    buf[0] = 0;
    if (tg && tg->source_file) {
        if (tg->source_line > 0) snprintf(buf, cap, "%s:%d", tg->source_file, tg->source_line);
        else snprintf(buf, cap, "%s", tg->source_file);
    }
    return buf;
}

typedef struct sort_item {
    uint64_t size;
    int64_t start;
    size_t idx;
} sort_item;

static int by_size_desc(const void *a, const void *b) {
    const sort_item *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int total_cmp(const void *a, const void *b) {
    const hbmi_total *x = a, *y = b;
    if (x->at_peak != y->at_peak) return x->at_peak > y->at_peak ? -1 : 1;
    if (x->allocated != y->allocated) return x->allocated > y->allocated ? -1 : 1;
    return strcmp(x->key, y->key);
}

static int key_cmp(const void *a, const void *b) { return strcmp(((const hbmi_total *)a)->key, ((const hbmi_total *)b)->key); }

/* Per-tag sums folded into per-key totals (op name or source line). */
static hbm_status fold(const hbmi_view *v, const hbmi_total *per_tag, uint32_t ntags, int by_line, hbmi_total **out,
                       size_t *nout) {
    hbmi_total *raw = hbmi_calloc((size_t)ntags + 1, sizeof *raw);
    if (!raw) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    size_t n = 0;
    for (uint32_t i = 0; i <= ntags; i++) {
        if (!per_tag[i].count) continue;
        const hbm_tag *tg = hbm_timeline_tag_at(v->tl, i);
        char src[300];
        const char *key = by_line ? hbmi_view_source(tg, src, sizeof src) : (tg && tg->op_name ? tg->op_name : "");
        if (!*key) key = by_line ? "(unknown)" : (tg && tg->label ? tg->label : "(untagged)");
        raw[n] = per_tag[i];
        raw[n].key = hbmi_strdup(key);
        if (!raw[n].key) {
            for (size_t k = 0; k < n; k++) hbmi_free((char *)raw[k].key);
            hbmi_free(raw);
            return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        }
        n++;
    }
    hbmi_qsort(raw, n, sizeof *raw, key_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && !strcmp(raw[m - 1].key, raw[i].key)) {
            raw[m - 1].at_peak += raw[i].at_peak;
            raw[m - 1].allocated += raw[i].allocated;
            raw[m - 1].count += raw[i].count;
            hbmi_free((char *)raw[i].key);
        } else {
            raw[m++] = raw[i];
        }
    }
    hbmi_qsort(raw, m, sizeof *raw, total_cmp);
    *out = raw;
    *nout = m;
    return HBM_OK;
}

void hbmi_view_free(hbmi_view *v) {
    hbm_timeline_free(v->tl);
    hbmi_free(v->use);
    hbmi_free(v->res);
    hbmi_free(v->at_peak);
    for (size_t i = 0; i < v->n_op; i++) hbmi_free((char *)v->by_op[i].key);
    for (size_t i = 0; i < v->n_line; i++) hbmi_free((char *)v->by_line[i].key);
    hbmi_free(v->by_op);
    hbmi_free(v->by_line);
    memset(v, 0, sizeof *v);
}

hbm_status hbmi_view_build(const hbm_trace *t, hbmi_view *v) {
    memset(v, 0, sizeof *v);
    v->t = t;
    v->first_oom = -1;
    hbm_status s = hbm_trace_to_timeline(t, &v->tl);
    if (!s) s = hbmi_trace_curves_why(t, &v->use, &v->res, &v->has_segments, v->inconsistent, sizeof v->inconsistent);
    if (s) {
        hbmi_view_free(v);
        return s;
    }
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        v->allocs += e->kind == HBM_EV_ALLOC && i >= t->history_start; /* the history's own */
        v->frees += e->kind == HBM_EV_FREE;
        if (e->kind == HBM_EV_OOM && !v->ooms++) v->first_oom = (int64_t)i;
        if (v->use[i] > v->peak_use) v->peak_use = v->use[i], v->peak_i = i;
        if (v->res[i] > v->peak_res) v->peak_res = v->res[i];
    }
    const hbm_timeline *tl = v->tl;
    v->at_peak = hbmi_malloc(tl->count * sizeof *v->at_peak + 1);
    uint32_t ntags = 0;
    for (size_t i = 0; i < tl->count; i++)
        if (tl->buffers[i].tag > ntags) ntags = tl->buffers[i].tag;
    hbmi_total *per_tag = hbmi_calloc((size_t)ntags + 1, sizeof *per_tag);
    if (!v->at_peak || !per_tag) {
        hbmi_free(per_tag);
        hbmi_view_free(v);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a view");
    }
    int64_t p = (int64_t)v->peak_i;
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        hbmi_total *pt = &per_tag[b->tag];
        pt->allocated += b->size;
        pt->count++;
        if (t->count && b->start <= p && p < b->end) {
            v->at_peak[v->n_at_peak++] = i;
            v->at_peak_bytes += b->size;
            pt->at_peak += b->size;
        }
    }
    sort_item *si = hbmi_malloc(v->n_at_peak * sizeof *si + 1);
    if (!si) {
        hbmi_free(per_tag);
        hbmi_view_free(v);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a view");
    }
    for (size_t i = 0; i < v->n_at_peak; i++)
        si[i] = (sort_item){tl->buffers[v->at_peak[i]].size, tl->buffers[v->at_peak[i]].start, v->at_peak[i]};
    hbmi_qsort(si, v->n_at_peak, sizeof *si, by_size_desc);
    for (size_t i = 0; i < v->n_at_peak; i++) v->at_peak[i] = si[i].idx;
    hbmi_free(si);
    s = fold(v, per_tag, ntags, 0, &v->by_op, &v->n_op);
    if (!s) s = fold(v, per_tag, ntags, 1, &v->by_line, &v->n_line);
    hbmi_free(per_tag);
    if (s) hbmi_view_free(v);
    return s;
}
