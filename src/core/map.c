/* map.c - u64 -> u64 hash map, linear probing with backward-shift deletion. */
#include <string.h>

#include "core/internal.h"

void hbmi_map_init(hbmi_map *m) { memset(m, 0, sizeof *m); }

void hbmi_map_destroy(hbmi_map *m) {
    hbmi_free(m->keys);
    hbmi_free(m->vals);
    hbmi_map_init(m);
}

static hbm_status map_rehash(hbmi_map *m, size_t ncap) {
    uint64_t *nk = hbmi_calloc(ncap, sizeof *nk);
    uint64_t *nv = hbmi_malloc(ncap * sizeof *nv);
    if (!nk || !nv) {
        hbmi_free(nk);
        hbmi_free(nv);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory growing a hash table to %zu slots", ncap);
    }
    size_t mask = ncap - 1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = hbmi_hash64(m->keys[i]) & mask;
        while (nk[j]) j = (j + 1) & mask;
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    hbmi_free(m->keys);
    hbmi_free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return HBM_OK;
}

hbm_status hbmi_map_reserve(hbmi_map *m, size_t n) {
    size_t need = n + n / 2 + 1; /* load factor <= 2/3 */
    if (need <= m->cap) return HBM_OK;
    size_t c = 16;
    while (c < need) c *= 2;
    return map_rehash(m, c);
}

hbm_status hbmi_map_put(hbmi_map *m, uint64_t key, uint64_t val) {
    if (key == UINT64_MAX) return hbmi_error(HBM_ERR_INVALID, "hash map key UINT64_MAX is reserved");
    if ((m->count + 1) * 3 > m->cap * 2) {
        hbm_status s = map_rehash(m, m->cap ? m->cap * 2 : 16);
        if (s) return s;
    }
    uint64_t k = key + 1;
    size_t mask = m->cap - 1, i = hbmi_hash64(k) & mask;
    while (m->keys[i]) {
        if (m->keys[i] == k) {
            m->vals[i] = val;
            return HBM_OK;
        }
        i = (i + 1) & mask;
    }
    m->keys[i] = k;
    m->vals[i] = val;
    m->count++;
    return HBM_OK;
}

static size_t map_find(const hbmi_map *m, uint64_t key) {
    if (!m->cap || key == UINT64_MAX) return SIZE_MAX;
    uint64_t k = key + 1;
    size_t mask = m->cap - 1, i = hbmi_hash64(k) & mask;
    while (m->keys[i]) {
        if (m->keys[i] == k) return i;
        i = (i + 1) & mask;
    }
    return SIZE_MAX;
}

int hbmi_map_get(const hbmi_map *m, uint64_t key, uint64_t *val) {
    size_t i = map_find(m, key);
    if (i == SIZE_MAX) return 0;
    if (val) *val = m->vals[i];
    return 1;
}

int hbmi_map_del(hbmi_map *m, uint64_t key, uint64_t *val) {
    size_t i = map_find(m, key);
    if (i == SIZE_MAX) return 0;
    if (val) *val = m->vals[i];
    size_t mask = m->cap - 1, j = i;
    for (;;) { /* backward shift: move later entries of the cluster into the hole */
        j = (j + 1) & mask;
        if (!m->keys[j]) break;
        size_t home = hbmi_hash64(m->keys[j]) & mask;
        /* entry j may move to i if its home is not in the cyclic range (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->count--;
    return 1;
}

hbm_status hbmi_map_check(const hbmi_map *m) {
    if (!m->cap) {
        if (m->keys || m->vals || m->count)
            return hbmi_error(HBM_ERR_CORRUPT, "hash map: no slots but %zu keys or arrays", m->count);
        return HBM_OK;
    }
    if (m->cap & (m->cap - 1)) return hbmi_error(HBM_ERR_CORRUPT, "hash map: %zu slots, not a power of two", m->cap);
    size_t mask = m->cap - 1, used = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        used++;
        for (size_t j = hbmi_hash64(m->keys[i]) & mask; j != i; j = (j + 1) & mask)
            if (!m->keys[j])
                return hbmi_error(HBM_ERR_CORRUPT, "hash map: key in slot %zu is cut off from its home by empty slot %zu", i, j);
    }
    if (used != m->count) return hbmi_error(HBM_ERR_CORRUPT, "hash map: %zu slots used, count %zu", used, m->count);
    if (used * 3 > m->cap * 2) return hbmi_error(HBM_ERR_CORRUPT, "hash map: %zu keys in %zu slots, over 2/3", used, m->cap);
    return HBM_OK;
}
