/* pyval.c - the value pool shared by the pickle and JSON readers. */
#include <string.h>

#include "core/internal.h"
#include "trace/pyval.h"

hbmi_pv *hbmi_pv_new(hbmi_pvpool *p, hbmi_pvtype type) {
    if (!p->nslabs || p->slab_used == HBMI_PV_SLAB) {
        if (hbmi_grow((void **)&p->slabs, &p->slabcap, p->nslabs + 1, sizeof *p->slabs)) return NULL;
        hbmi_pv *slab = hbmi_malloc(HBMI_PV_SLAB * sizeof *slab);
        if (!slab) return NULL;
        p->slabs[p->nslabs++] = slab;
        p->slab_used = 0;
    }
    hbmi_pv *v = &p->slabs[p->nslabs - 1][p->slab_used++];
    memset(v, 0, sizeof *v);
    v->type = type;
    return v;
}

int hbmi_pv_push(hbmi_pv *v, hbmi_pv *item) {
    if (hbmi_grow((void **)&v->items, &v->cap, v->n + 1, sizeof *v->items)) return -1;
    v->items[v->n++] = item;
    return 0;
}

void hbmi_pvpool_free(hbmi_pvpool *p) {
    for (size_t i = 0; i < p->nslabs; i++) {
        size_t n = i + 1 == p->nslabs ? p->slab_used : HBMI_PV_SLAB;
        for (size_t k = 0; k < n; k++) {
            hbmi_free(p->slabs[i][k].s);
            hbmi_free(p->slabs[i][k].items);
        }
        hbmi_free(p->slabs[i]);
    }
    hbmi_free(p->slabs);
    memset(p, 0, sizeof *p);
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

int64_t hbmi_pv_int(const hbmi_pv *d, const char *key, int64_t def) {
    const hbmi_pv *v = hbmi_pv_get(d, key);
    if (!v) return def;
    if (v->type == PV_INT || v->type == PV_BOOL) return v->i;
    if (v->type == PV_FLOAT && v->f == v->f && v->f > -9.2e18 && v->f < 9.2e18) return (int64_t)v->f;
    return def;
}

const char *hbmi_pv_str(const hbmi_pv *d, const char *key) {
    const hbmi_pv *v = hbmi_pv_get(d, key);
    return v && v->type == PV_STR ? v->s : NULL;
}
