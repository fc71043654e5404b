/* pyval.c - the value pool shared by the pickle and JSON readers, and the streaming of a
 * snapshot's trace entries into records (see pyval.h). */
#include <string.h>

#include "hbm/trace.h"
#include "trace/import/pyval.h"

hbmi_pv *hbmi_pv_new(hbmi_pvpool *p, hbmi_pvtype type) {
    hbmi_pv *v = p->free_list, **items = NULL;
    size_t cap = 0;
    if (v) { /* a value given back: its items array serves again */
        p->free_list = (hbmi_pv *)(void *)v->s;
        items = v->items;
        cap = v->cap;
    } else {
        if (!p->nslabs || p->slab_used == HBMI_PV_SLAB) {
            if (hbmi_grow((void **)&p->slabs, &p->slabcap, p->nslabs + 1, sizeof *p->slabs)) return NULL;
            hbmi_pv *slab = hbmi_malloc(HBMI_PV_SLAB * sizeof *slab);
            if (!slab) return NULL;
            p->slabs[p->nslabs++] = slab;
            p->slab_used = 0;
        }
        v = &p->slabs[p->nslabs - 1][p->slab_used++];
    }
    memset(v, 0, sizeof *v);
    v->items = items;
    v->cap = cap;
    v->type = (uint8_t)type;
    return v;
}

int hbmi_pv_push(hbmi_pv *v, hbmi_pv *item) {
    v->plain = 0;
    if (v->n == v->cap && hbmi_grow((void **)&v->items, &v->cap, v->n + 1, sizeof *v->items)) return -1;
    v->items[v->n++] = item;
    return 0;
}

int hbmi_pv_reserve(hbmi_pv *v, size_t n) {
    v->plain = 0;
    return n > v->cap - v->n && hbmi_grow((void **)&v->items, &v->cap, v->n + n, sizeof *v->items) ? -1 : 0;
}

/* What a value owns besides its items array: its string and its records. */
static void pv_free_owned(hbmi_pv *v) {
    hbmi_free(v->s);
    if (v->ev) hbmi_big_free(v->ev->r, v->ev->cap, sizeof *v->ev->r);
    hbmi_free(v->ev);
    v->s = NULL;
    v->ev = NULL;
}

void hbmi_pvpool_free(hbmi_pvpool *p) {
    for (size_t i = 0; i < p->nslabs; i++) {
        size_t n = i + 1 == p->nslabs ? p->slab_used : HBMI_PV_SLAB;
        for (size_t k = 0; k < n; k++) {
            hbmi_pv *v = &p->slabs[i][k];
            if (v->type == PV_FREE_) v->s = NULL; /* the free list's link */
            pv_free_owned(v);
            hbmi_free(v->items);
        }
        hbmi_free(p->slabs[i]);
    }
    hbmi_free(p->slabs);
    hbmi_map_destroy(&p->stacks);
    hbmi_map_destroy(&p->shared);
    hbmi_free(p->kept);
    hbmi_free(p->staged);
    hbmi_free(p->work);
    hbmi_free(p->xb);
    hbmi_free(p->xoff);
    hbmi_map_destroy(&p->xids);
    memset(p, 0, sizeof *p);
}

/* Give v and what only it holds back to the pool (values kept are shared: left alone). */
static int pv_give_back(hbmi_pvpool *p, hbmi_pv *v) {
    size_t n = 0;
    if (v->keep) return 0;
    if (hbmi_grow((void **)&p->work, &p->work_cap, 1, sizeof *p->work)) return -1;
    p->work[n++] = v;
    while (n) {
        hbmi_pv *x = p->work[--n];
        if (x->type == PV_LIST || x->type == PV_TUPLE || x->type == PV_DICT) {
            if (hbmi_grow((void **)&p->work, &p->work_cap, n + x->n, sizeof *p->work)) return -1;
            for (size_t i = 0; i < x->n; i++)
                if (!x->items[i]->keep) p->work[n++] = x->items[i];
        }
        pv_free_owned(x);
        x->type = PV_FREE_;
        x->s = (char *)(void *)p->free_list; /* the items array stays, for the next value */
        p->free_list = x;
    }
    return 0;
}

const hbmi_pv *hbmi_pv_get(const hbmi_pv *d, const char *key) {
    if (!d || d->type != PV_DICT) return NULL;
    size_t kl = strlen(key);
    for (size_t i = 0; i + 1 < d->n; i += 2) {
        const hbmi_pv *k = d->items[i];
        if (k->type == PV_STR && k->len == kl && !memcmp(k->s, key, kl)) return d->items[i + 1];
    }
    return NULL;
}

/* Int value of v (ints, bools, floats truncated), or def. */
static int64_t int_or(const hbmi_pv *v, int64_t def) {
    if (!v) return def;
    if (v->type == PV_INT || v->type == PV_BOOL) return v->i;
    if (v->type == PV_FLOAT && v->f == v->f && v->f > -9.2e18 && v->f < 9.2e18) return (int64_t)v->f;
    return def;
}

int64_t hbmi_pv_int(const hbmi_pv *d, const char *key, int64_t def) { return int_or(hbmi_pv_get(d, key), def); }

const char *hbmi_pv_str(const hbmi_pv *d, const char *key) {
    const hbmi_pv *v = hbmi_pv_get(d, key);
    return v && v->type == PV_STR ? v->s : NULL;
}

/* --- streaming trace entries ------------------------------------------------------- */

static const struct {
    const char *name;
    uint8_t kind;
} actions[] = {
    {"alloc", HBM_EV_ALLOC},
    {"free_completed", HBM_EV_FREE},
    {"free_requested", HBM_EV_FREE_REQUESTED},
    {"free", HBM_EV_FREE},
    {"segment_alloc", HBM_EV_SEGMENT_ALLOC},
    {"segment_map", HBM_EV_SEGMENT_MAP},
    {"segment_free", HBM_EV_SEGMENT_FREE},
    {"segment_unmap", HBM_EV_SEGMENT_UNMAP},
    {"oom", HBM_EV_OOM},
};

static uint8_t action_kind(const hbmi_pv *a) {
    for (size_t k = 0; k < sizeof actions / sizeof actions[0]; k++)
        if (!strcmp(a->s, actions[k].name)) return actions[k].kind;
    return 0; /* "snapshot" markers and future actions */
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* Hash of a frame (a dict of scalars); a shared (kept) frame by its identity, as equal
 * pickled frames are one object. -1 when it is not a dict of scalars. */
static int frame_hash(const hbmi_pv *fr, uint64_t *h) {
    if (fr->keep) {
        *h = hbmi_hash64(*h ^ (uint64_t)(uintptr_t)fr);
        return 0;
    }
    if (fr->type != PV_DICT) return -1;
    for (size_t i = 0; i < fr->n; i++) {
        const hbmi_pv *x = fr->items[i];
        *h = hbmi_hash64(*h ^ x->type);
        if (x->type == PV_STR || x->type == PV_BYTES) *h = hash_bytes(*h, x->s, x->len);
        else if (x->type <= PV_FLOAT) *h = hbmi_hash64(*h ^ (uint64_t)x->i);
        else return -1;
    }
    return 0;
}

static int scalar_eq(const hbmi_pv *a, const hbmi_pv *b) {
    if (a == b) return 1;
    if (a->type != b->type) return 0;
    if (a->type == PV_STR || a->type == PV_BYTES) return a->len == b->len && !memcmp(a->s, b->s, a->len);
    return a->type <= PV_FLOAT && a->i == b->i;
}

static int frames_eq(const hbmi_pv *a, const hbmi_pv *b) {
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const hbmi_pv *x = a->items[i], *y = b->items[i];
        if (x == y) continue;
        if (x->keep || y->keep || x->type != PV_DICT || y->type != PV_DICT || x->n != y->n) return 0;
        for (size_t k = 0; k < x->n; k++)
            if (!scalar_eq(x->items[k], y->items[k])) return 0;
    }
    return 1;
}

/* The index in p->kept of the stack equal to frames: an earlier one of the same content,
 * else frames itself, kept from now on. A shared list object (pickle memo) is found again
 * by its identity. -1 when out of memory. */
static int64_t keep_stack(hbmi_pvpool *p, hbmi_pv *frames) {
    uint64_t v, h = 0x9E3779B97F4A7C15ull ^ frames->n;
    int shared = frames->keep;
    if (shared && hbmi_map_get(&p->shared, (uint64_t)(uintptr_t)frames, &v)) return (int64_t)v;
    int hashable = 1;
    for (size_t i = 0; i < frames->n && hashable; i++) hashable = !frame_hash(frames->items[i], &h);
    h &= UINT64_MAX >> 1; /* never the map's reserved key */
    int known = hashable && hbmi_map_get(&p->stacks, h, &v);
    if (!known || !frames_eq(p->kept[v], frames)) {
        if (p->nkept == p->kept_cap && hbmi_grow((void **)&p->kept, &p->kept_cap, p->nkept + 1, sizeof *p->kept))
            return -1;
        v = p->nkept;
        p->kept[p->nkept++] = frames;
        frames->keep = 1;
        if (hashable && !known && hbmi_map_put(&p->stacks, h, v)) return -1;
    }
    return shared && hbmi_map_put(&p->shared, (uint64_t)(uintptr_t)frames, v) ? -1 : (int64_t)v;
}

hbmi_pv *hbmi_pv_keep_stack_index(hbmi_pvpool *p, hbmi_pv *list, uint32_t *bt) {
    int64_t at = keep_stack(p, list);
    if (at < 0 || at >= UINT32_MAX) return NULL;
    *bt = (uint32_t)at + 1;
    return (hbmi_pv *)p->kept[at];
}

uint8_t hbmi_pv_action_kind(hbmi_pvpool *p, const hbmi_pv *a) {
    for (int i = 0; i < 4; i++)
        if (p->act_pv[i] == a) return p->act_kind[i];
    uint8_t kind = action_kind(a);
    if (a->keep) { /* shared: seen again */
        memmove(p->act_pv + 1, p->act_pv, 3 * sizeof *p->act_pv);
        memmove(p->act_kind + 1, p->act_kind, 3);
        p->act_pv[0] = a;
        p->act_kind[0] = kind;
    }
    return kind;
}

hbmi_pv *hbmi_pv_staged(hbmi_pvpool *p, const hbm_trace_event *e) {
    if (p->nstaged == p->staged_cap && hbmi_grow((void **)&p->staged, &p->staged_cap, p->nstaged + 1, sizeof *p->staged))
        return NULL;
    hbmi_pv *v = hbmi_pv_new(p, PV_ENTRY);
    if (!v) return NULL;
    v->i = (int64_t)p->nstaged;
    p->staged[p->nstaged++] = *e;
    p->staged_live++;
    return v;
}

hbmi_pv *hbmi_pv_keep_stack(hbmi_pvpool *p, hbmi_pv *list) {
    int64_t at = keep_stack(p, list);
    if (at < 0) return NULL;
    hbmi_pv *kept = (hbmi_pv *)p->kept[at];
    if (kept != list && pv_give_back(p, list)) return NULL;
    return kept;
}

/* A size or address: ints as they are (addresses above 2^63 wrap); floats truncated when
 * in 0 to 2^63, else out of range; other types 0. Negative ints are out of range for sizes. */
static void num(hbm_trace_event *r, const hbmi_pv *v, uint32_t field, uint64_t *out) {
    *out = 0;
    if (!v) return;
    if (v->type == PV_INT || v->type == PV_BOOL) {
        *out = (uint64_t)v->i;
        if (v->i < 0 && field == 's' && !r->tag) r->tag = field, r->requested = (uint64_t)v->i;
    } else if (v->type == PV_FLOAT) {
        if (v->f >= 0 && v->f < 9.2e18) *out = (uint64_t)v->f;
        else if (!r->tag) r->tag = field | HBMI_PVEV_FLOAT, memcpy(&r->requested, &v->f, sizeof v->f);
    }
}

static int append_event(hbmi_pv *list, const hbm_trace_event *r) {
    if (!list->ev && !(list->ev = hbmi_calloc(1, sizeof *list->ev))) return -1;
    hbmi_pvevs *e = list->ev;
    if (e->n == e->cap && hbmi_big_grow((void **)&e->r, &e->cap, e->n + 1, sizeof *e->r)) return -1;
    e->r[e->n++] = *r;
    return 0;
}

static int to_record(hbmi_pvpool *p, hbmi_pv *list, const hbmi_pv *d) {
    hbm_trace_event r = {0};
    const hbmi_pv *addr = NULL, *size = NULL, *stream = NULL, *time = NULL, *dfree = NULL;
    hbmi_pv *frames = NULL;
    const hbmi_pv *actv = NULL, *xp[8]; /* other keys' (key, value) pairs, kept for the export */
    size_t nxp = 0;
    int action = 0;
    for (size_t i = 0; i + 1 < d->n; i += 2) { /* the first of each key, as hbmi_pv_get */
        const hbmi_pv *k = d->items[i];
        hbmi_pv *v = d->items[i + 1];
        if (k->type != PV_STR) continue;
#define KEY_(name, var) (k->len == sizeof name - 1 && !memcmp(k->s, name, sizeof name - 1) && !(var))
        if (KEY_("action", action)) action = 1, r.kind = v->type == PV_STR ? action_kind(v) : 0, actv = v;
        else if (KEY_("addr", addr)) addr = v;
        else if (KEY_("size", size)) size = v;
        else if (KEY_("stream", stream)) stream = v;
        else if (KEY_("time_us", time)) time = v;
        else if (KEY_("device_free", dfree)) dfree = v;
        else if (KEY_("frames", frames)) frames = v;
        else if (nxp < 8) xp[nxp++] = k, xp[nxp++] = v;
#undef KEY_
    }
    if (nxp && (r.thread = hbmi_pv_extra(p, xp, nxp / 2)) == UINT32_MAX) return -1;
    num(&r, addr, 'a', &r.addr);
    num(&r, size, 's', &r.size);
    r.stream = (uint64_t)int_or(stream, 0);
    r.time_ns = (uint64_t)int_or(time, -1);
    if (!r.tag) r.requested = (uint64_t)int_or(dfree, 0);
    if (!r.kind) r.requested = hbmi_pv_other_action(p, actv, frames != NULL);
    if (frames && frames->type == PV_LIST && frames->n && !hbmi_pv_keep_stack_index(p, frames, &r.backtrace)) return -1;
    return append_event(list, &r);
}

static int xput(hbmi_pvpool *p, const void *d, size_t n) {
    if (hbmi_grow((void **)&p->xb, &p->xcap, p->xn + n, 1)) return -1;
    memcpy(p->xb + p->xn, d, n);
    p->xn += n;
    return 0;
}

/* A str / int / bool / None value as pickle opcodes; 1 for another type, -1 out of memory. */
static int xvalue(hbmi_pvpool *p, const hbmi_pv *v) {
    unsigned char h[10];
    switch (v ? v->type : PV_FREE_) {
    case PV_NONE: return xput(p, "N", 1);
    case PV_BOOL: h[0] = v->i ? 0x88 : 0x89; return xput(p, h, 1);
    case PV_INT: {
        h[0] = 0x8a, h[1] = 8; /* LONG1, 8 bytes little-endian */
        for (int i = 0; i < 8; i++) h[2 + i] = (unsigned char)((uint64_t)v->i >> (8 * i));
        return xput(p, h, 10);
    }
    case PV_STR: {
        if (v->len > UINT32_MAX) return 1;
        h[0] = 'X';
        for (int i = 0; i < 4; i++) h[1 + i] = (unsigned char)(v->len >> (8 * i));
        return xput(p, h, 5) || xput(p, v->s, v->len) ? -1 : 0;
    }
    default: return 1;
    }
}

uint32_t hbmi_pv_extra(hbmi_pvpool *p, const hbmi_pv *const *pairs, size_t n) {
    if (!n) return 0;
    int cache = 2 * n <= sizeof p->xlast / sizeof p->xlast[0]; /* objects that stay (memo): their set again */
    for (size_t i = 0; i < 2 * n && cache; i++) cache = pairs[i]->keep;
    if (cache && 2 * n == p->nxlast && !memcmp(pairs, p->xlast, 2 * n * sizeof *pairs)) return p->xlast_id;
    size_t at = p->xn;
    for (size_t i = 0; i < n; i++) {
        size_t pair_at = p->xn;
        int r = pairs[2 * i]->type == PV_STR ? xvalue(p, pairs[2 * i]) : 1;
        if (!r) r = xvalue(p, pairs[2 * i + 1]);
        if (r < 0) return UINT32_MAX;
        if (r > 0) p->xn = pair_at; /* a value of another type: that pair is not kept */
    }
    uint32_t id = 0, last = p->xlast_id;
    if (p->xn > at && last && p->xoff[last] - p->xoff[last - 1] == p->xn - at &&
        !memcmp(p->xb + p->xoff[last - 1], p->xb + at, p->xn - at)) { /* the last set again */
        p->xn = at;
        id = last;
    } else if (p->xn > at) { /* the same bytes as a set kept before: that one */
        uint64_t h = 0xcbf29ce484222325ull, v;
        for (size_t k = at; k < p->xn; k++) h = (h ^ p->xb[k]) * 0x100000001b3ull;
        h = (h & (UINT64_MAX >> 1)) | 1;
        if (hbmi_map_get(&p->xids, h, &v) && p->xoff[v] - p->xoff[v - 1] == p->xn - at &&
            !memcmp(p->xb + p->xoff[v - 1], p->xb + at, p->xn - at)) {
            id = (uint32_t)v;
            p->xn = at;
        } else {
            if (hbmi_grow((void **)&p->xoff, &p->xoff_cap, p->nx + 2, sizeof *p->xoff)) return UINT32_MAX;
            p->xoff[0] = 0;
            p->xoff[++p->nx] = p->xn;
            id = (uint32_t)p->nx;
            if (hbmi_map_put(&p->xids, h, id)) return UINT32_MAX;
        }
    }
    p->nxlast = 0;
    if (id) { /* the last set (by its objects too, when they stay) */
        p->xlast_id = id;
        if (cache) memcpy(p->xlast, pairs, 2 * n * sizeof *pairs), p->nxlast = 2 * n;
    }
    return id;
}

uint64_t hbmi_pv_other_action(hbmi_pvpool *p, const hbmi_pv *action, int has_frames) {
    if (!action || action->type != PV_STR || action->len >= sizeof p->act[0]) return 0;
    unsigned k = 0;
    while (k < p->nact && (strlen(p->act[k]) != action->len || memcmp(p->act[k], action->s, action->len))) k++;
    if (k == p->nact) {
        if (p->nact == sizeof p->act / sizeof p->act[0]) return 0;
        memcpy(p->act[k], action->s, action->len);
        p->act[k][action->len] = 0;
        p->nact++;
    }
    return (k + 1) | (has_frames ? HBMI_PVEV_FRAMES : 0);
}

/* A trace entry: a dict whose "action" is a str. */
static int is_entry(const hbmi_pv *d) {
    if (d->type != PV_DICT) return 0;
    for (size_t i = 0; i + 1 < d->n; i += 2) {
        const hbmi_pv *k = d->items[i];
        if (k->type == PV_STR && k->len == 6 && !memcmp(k->s, "action", 6)) return d->items[i + 1]->type == PV_STR;
    }
    return 0;
}

int hbmi_pv_list_add(hbmi_pvpool *p, hbmi_pv *list, hbmi_pv *item) {
    if (item->type == PV_ENTRY && !item->keep && (size_t)item->i < p->nstaged) {
        if (append_event(list, &p->staged[item->i])) return -1;
        if (!--p->staged_live) p->nstaged = 0; /* all appended: the room serves again */
        return pv_give_back(p, item);
    }
    if (!p->events || item->plain) return hbmi_pv_push(list, item);
    if (!is_entry(item)) {
        item->plain = item->keep; /* seen again (memo): known */
        return hbmi_pv_push(list, item);
    }
    if (to_record(p, list, item)) return -1;
    return pv_give_back(p, item);
}
