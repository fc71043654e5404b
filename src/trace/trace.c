/* trace.c - the in-memory event list, its tags and backtraces, and its conversion to and
 * from the shared hbm_timeline. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/plan.h"
#include "hbm/trace.h"
#include "timeline/timeline_events.h"
#include "trace/trace_internal.h"

const char *hbm_event_kind_str(hbm_event_kind k) {
    switch (k) {
#define HBM_EV_STR_(name, value, text) \
    case name: return text;
        HBM_TRACE_KINDS(HBM_EV_STR_)
#undef HBM_EV_STR_
    }
    return "?";
}

hbm_status hbm_trace_new(hbm_trace **out) {
    if (!out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_new: NULL out");
    *out = NULL;
    struct trace_alloc { /* the trace and its priv_ in one allocation */
        hbm_trace pub;
        struct hbmi_trace_priv priv;
    } *both = hbmi_calloc(1, sizeof *both);
    if (!both) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a trace");
    hbm_trace *t = &both->pub;
    t->priv_ = &both->priv;
    hbm_status s = hbmi_tagtab_new(&t->priv_->tags);
    if (s) {
        hbmi_free(both);
        return s;
    }
    t->has_time = 1;
    *out = t;
    return HBM_OK;
}

void hbmi_torch_segs_free(hbmi_torch_segs *x) {
    if (!x) return;
    hbmi_free(x->s);
    hbmi_free(x->b);
    hbmi_free(x->xb);
    hbmi_free(x->xoff);
    hbmi_free(x->runs);
    hbmi_free(x->marks);
    hbmi_free(x->twin_addr);
    hbmi_free(x->twin_seg);
    hbmi_free(x);
}

void hbm_trace_free(hbm_trace *t) {
    if (!t) return;
    hbm_trace_free_all(t->others, t->n_others);
    hbmi_tagtab_free(t->priv_->tags);
    hbmi_big_free(t->events, t->priv_->cap, sizeof *t->events);
    hbmi_free(t->priv_->bt_frames);
    hbmi_free(t->priv_->bt_index);
    hbmi_free(t->priv_->step_names);
    hbmi_free(t->priv_->torch_keys);
    hbmi_torch_segs_free(t->priv_->torch_segs);
    hbmi_free(t); /* and its priv_, in the same allocation */
}

void hbm_trace_free_all(hbm_trace **traces, size_t n) {
    if (!traces) return;
    for (size_t i = 0; i < n; i++) hbm_trace_free(traces[i]);
    hbmi_free(traces);
}

hbm_status hbm_trace_add(hbm_trace *t, const hbm_trace_event *e) {
    if (HBMI_UNLIKELY(t->count == t->priv_->cap)) {
        hbm_status s = hbmi_big_grow((void **)&t->events, &t->priv_->cap, t->count + 1, sizeof *t->events);
        if (s) return s;
    }
    t->events[t->count++] = *e;
    return HBM_OK;
}

hbm_status hbm_trace_intern(hbm_trace *t, const hbm_tag *tag, uint32_t *id_out) {
    return hbmi_tagtab_intern(t->priv_->tags, tag, id_out);
}

const hbm_tag *hbm_trace_tag(const hbm_trace *t, uint32_t id) { return t ? hbmi_tagtab_get(t->priv_->tags, id) : NULL; }
uint32_t hbm_trace_tag_count(const hbm_trace *t) { return t ? hbmi_tagtab_count(t->priv_->tags) : 0; }

hbm_status hbm_trace_add_backtrace(hbm_trace *t, const uint64_t *frames, size_t n, uint32_t *id_out) {
    if (t->priv_->bt_count >= UINT32_MAX - 1) return hbmi_error(HBM_ERR_NOMEM, "trace: too many backtraces");
    hbm_status s = hbmi_grow((void **)&t->priv_->bt_frames, &t->priv_->bt_cap, t->priv_->bt_nframes + n + 1, sizeof *t->priv_->bt_frames);
    if (!s) s = hbmi_grow((void **)&t->priv_->bt_index, &t->priv_->bt_index_cap, 2 * t->priv_->bt_count + 2, sizeof *t->priv_->bt_index);
    if (s) return s;
    if (n) memcpy(t->priv_->bt_frames + t->priv_->bt_nframes, frames, n * sizeof *frames);
    t->priv_->bt_index[2 * t->priv_->bt_count] = t->priv_->bt_nframes;
    t->priv_->bt_index[2 * t->priv_->bt_count + 1] = n;
    t->priv_->bt_nframes += n;
    *id_out = (uint32_t)++t->priv_->bt_count;
    return HBM_OK;
}

const uint64_t *hbm_trace_backtrace(const hbm_trace *t, uint32_t id, size_t *n) {
    if (!t || id == 0 || id > t->priv_->bt_count) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = (size_t)t->priv_->bt_index[2 * id - 1];
    return t->priv_->bt_frames + t->priv_->bt_index[2 * id - 2];
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Alloc/free pairing shared by the timeline conversion, the exporters and the views. */
hbm_status hbm_trace_to_timeline(const hbm_trace *t, hbm_timeline **out) {
    if (!t || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_to_timeline: NULL argument");
    *out = NULL;
    hbm_timeline *tl;
    hbm_status s = hbm_timeline_new(&tl);
    if (s) return s;
    snprintf(tl->clock, sizeof tl->clock, "event");
    snprintf(tl->name, sizeof tl->name, "%.63s", t->name);
    hbmi_map live; /* addr -> event index of its alloc */
    hbmi_map_init(&live);
    uint32_t *tagmap = NULL; /* trace tag id -> timeline tag id, filled lazily (0 = not yet) */
    uint32_t ntags = hbm_trace_tag_count(t);
    if (ntags && !(tagmap = hbmi_calloc(ntags + 1, sizeof *tagmap))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t i = 0; i < t->count && !s; i++) {
        const hbm_trace_event *e = &t->events[i];
        if (e->kind == HBM_EV_ALLOC) {
            s = hbmi_map_put(&live, e->addr == UINT64_MAX ? 0 : e->addr, i);
        } else if (e->kind == HBM_EV_FREE) {
            uint64_t j;
            if (hbmi_map_del(&live, e->addr == UINT64_MAX ? 0 : e->addr, &j))
                s = hbm_timeline_reserve(tl, 1);
            else
                continue;
            if (s) break;
            const hbm_trace_event *a = &t->events[j];
            uint64_t size = a->requested ? a->requested : a->size;
            if (!size) continue;
            hbm_tl_buffer *b = &tl->buffers[tl->count];
            uint32_t tg = 0;
            if (a->tag && a->tag <= ntags) {
                if (!tagmap[a->tag] && (s = hbm_timeline_intern(tl, hbm_trace_tag(t, a->tag), &tagmap[a->tag]))) break;
                tg = tagmap[a->tag];
            }
            *b = (hbm_tl_buffer){.id = j, .size = size, .start = (int64_t)j, .end = (int64_t)i,
                                 .offset = a->addr, .alignment = 0, .tag = tg, .flags = 0};
            tl->count++;
        }
    }
    /* blocks never freed live to the end; add them in allocation order */
    if (!s && live.count) {
        uint64_t *idx = hbmi_malloc(live.count * sizeof *idx);
        size_t n = 0;
        if (!idx) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        for (size_t k = 0; !s && k < live.cap; k++)
            if (live.s[k].key) idx[n++] = live.s[k].val;
        if (!s) {
            hbmi_qsort(idx, n, sizeof *idx, u64_cmp);
            s = hbm_timeline_reserve(tl, n);
        }
        for (size_t k = 0; !s && k < n; k++) {
            const hbm_trace_event *a = &t->events[idx[k]];
            uint64_t size = a->requested ? a->requested : a->size;
            if (!size) continue;
            uint32_t tg = 0;
            if (a->tag && a->tag <= ntags) {
                if (!tagmap[a->tag] && (s = hbm_timeline_intern(tl, hbm_trace_tag(t, a->tag), &tagmap[a->tag]))) break;
                tg = tagmap[a->tag];
            }
            tl->buffers[tl->count++] = (hbm_tl_buffer){.id = idx[k], .size = size, .start = (int64_t)idx[k],
                                                       .end = (int64_t)t->count, .offset = a->addr, .tag = tg};
        }
        hbmi_free(idx);
    }
    hbmi_free(tagmap);
    hbmi_map_destroy(&live);
    if (s) {
        hbm_timeline_free(tl);
        return s;
    }
    *out = tl;
    return HBM_OK;
}

/* Events of a timeline: alloc at start, free at end, in time order (frees first at equal
 * times), with the time in the buffer's clock units x 1000 as time_ns. */
hbm_status hbm_trace_from_timeline(const hbm_timeline *tl, hbm_trace **out) {
    if (!tl || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_from_timeline: NULL argument");
    *out = NULL;
    hbm_trace *t;
    hbm_status s = hbm_trace_new(&t);
    if (s) return s;
    snprintf(t->name, sizeof t->name, "%s", tl->name);
    snprintf(t->source, sizeof t->source, "timeline");
    t->has_time = 0; /* schedule steps, not times */
    hbmi_tl_event *p = NULL;
    s = hbmi_timeline_events(tl, &p);
    if (!s) s = hbmi_big_grow((void **)&t->events, &t->priv_->cap, 2 * tl->count, sizeof *t->events);
    int64_t t0 = tl->count && p ? p[0].t : 0; /* the earliest start */
    t->priv_->steps = !strcmp(tl->clock, "step");
    t->priv_->step0 = t0;
    for (size_t i = 0; !s && i < 2 * tl->count; i++) {
        const hbm_tl_buffer *b = &tl->buffers[p[i].buf];
        /* plan offsets are relative to different allocations: use a unique address per buffer */
        uint64_t addr = 0x100000000ULL + (uint64_t)p[i].buf * 256u;
        hbm_trace_event e = {.kind = p[i].is_start ? HBM_EV_ALLOC : HBM_EV_FREE,
                             .time_ns = (uint64_t)(p[i].t - t0) * 1000u, .addr = addr,
                             .size = b->size, .requested = p[i].is_start ? b->size : 0};
        if (p[i].is_start && b->tag) s = hbm_trace_intern(t, hbm_timeline_tag_at(tl, b->tag), &e.tag);
        if (!s) s = hbm_trace_add(t, &e);
    }
    hbmi_free(p);
    if (s) {
        hbm_trace_free(t);
        return s;
    }
    *out = t;
    return HBM_OK;
}

/* (hbm/trace.h) The names live in one block: n pointers, then the strings. */
hbm_status hbm_plan_trace(const hbm_plan *p, hbm_trace **out) {
    if (!p || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_trace: NULL argument");
    *out = NULL;
    const hbm_timeline *tl = hbm_plan_timeline(p);
    if (!tl) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for the plan's timeline");
    hbm_plan_stats st;
    hbm_status s = hbm_plan_get_stats(p, &st);
    hbm_trace *t = NULL;
    if (!s) s = hbm_trace_from_timeline(tl, &t);
    if (s) return s;
    size_t n = st.n_steps, bytes = n * sizeof(char *);
    for (size_t i = 0; i < n; i++) bytes += strlen(hbm_plan_step_name(p, (int64_t)i)) + 1;
    char **names = n ? hbmi_malloc(bytes) : NULL;
    if (n && !names) {
        hbm_trace_free(t);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory naming the schedule's steps");
    }
    char *at = (char *)(names + n);
    for (size_t i = 0; i < n; i++) {
        const char *nm = hbm_plan_step_name(p, (int64_t)i);
        size_t k = strlen(nm) + 1;
        memcpy(at, nm, k);
        names[i] = at;
        at += k;
    }
    t->priv_->step_names = names;
    t->priv_->n_steps = n;
    *out = t;
    return HBM_OK;
}

int64_t hbm_trace_event_step(const hbm_trace *t, size_t i, const char **name) {
    if (name) *name = "";
    if (!t || !t->priv_->steps || i >= t->count) return -1;
    int64_t step = (int64_t)(t->events[i].time_ns / 1000u) + t->priv_->step0;
    if (name && step >= 0 && (size_t)step < t->priv_->n_steps) *name = t->priv_->step_names[step];
    return step;
}

/* (trace_internal.h) */
hbm_trace *hbmi_trace_keep_others(hbm_trace **all, size_t n, size_t pick) {
    hbm_trace *t = all[pick];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (i != pick) all[k++] = all[i];
    if (k) {
        t->others = all; /* the array holds the others now */
        t->n_others = k;
    } else {
        hbmi_free(all);
    }
    return t;
}
