/* map.c - the hash map's slow paths (growth) and its invariant walker; the rest is inline
 * in map.h, which describes the layout. */
#include <string.h>

#include "core/internal.h"

void hbmi_map_init(hbmi_map *m) { memset(m, 0, sizeof *m); }

void hbmi_map_destroy(hbmi_map *m) {
    hbmi_free(m->s);
    hbmi_map_init(m);
}

hbm_status hbmi_map_bad_key_(void) { return hbmi_error(HBM_ERR_INVALID, "hash map key UINT64_MAX is reserved"); }

/* Room for n keys: the smallest power of two (16 or more, at least the current one) that
 * keeps them at most half full; the keys are placed again in slot order. */
hbm_status hbmi_map_grow_(hbmi_map *m, size_t n) {
    size_t cap = m->cap ? m->cap : 16;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 2 / sizeof(hbmi_map_slot))
            return hbmi_error(HBM_ERR_NOMEM, "a hash table of %zu keys is too large", n);
        cap *= 2;
    }
    if (cap == m->cap) return HBM_OK;
    hbmi_map_slot *ns = hbmi_calloc(cap, sizeof *ns);
    if (!ns) return hbmi_error(HBM_ERR_NOMEM, "out of host memory growing a hash table to %zu slots", cap);
    hbmi_map n2 = {ns, cap, m->count, (unsigned)(64 - __builtin_ctzll((unsigned long long)cap))};
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->s[i].key) continue;
        size_t j = hbmi_map_home(&n2, m->s[i].key);
        while (ns[j].key) j = (j + 1) & (cap - 1);
        ns[j] = m->s[i];
    }
    hbmi_free(m->s);
    *m = n2;
    return HBM_OK;
}

hbm_status hbmi_map_reserve(hbmi_map *m, size_t n) {
    if (2 * n <= m->cap) return HBM_OK;
    return hbmi_map_grow_(m, n);
}

hbm_status hbmi_map_check(const hbmi_map *m) {
    if (!m->cap) {
        if (m->s || m->count)
            return hbmi_error(HBM_ERR_CORRUPT, "hash map: no slots but %zu keys or an array", m->count);
        return HBM_OK;
    }
    if (!m->s) return hbmi_error(HBM_ERR_CORRUPT, "hash map: %zu slots but no array", m->cap);
    if ((m->cap & (m->cap - 1)) || m->cap < 16)
        return hbmi_error(HBM_ERR_CORRUPT, "hash map: %zu slots, not a power of two of 16 or more", m->cap);
    if (m->shift != 64u - (unsigned)__builtin_ctzll((unsigned long long)m->cap))
        return hbmi_error(HBM_ERR_CORRUPT, "hash map: shift %u does not go with %zu slots", m->shift, m->cap);
    size_t mask = m->cap - 1, used = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->s[i].key) continue;
        used++;
        for (size_t j = hbmi_map_home(m, m->s[i].key); j != i; j = (j + 1) & mask)
            if (!m->s[j].key)
                return hbmi_error(HBM_ERR_CORRUPT, "hash map: key in slot %zu is cut off from its home by empty slot %zu", i, j);
        const hbmi_map_slot *first = hbmi_map_find(m, m->s[i].key - 1);
        if (first != &m->s[i])
            return hbmi_error(HBM_ERR_CORRUPT, "hash map: the key in slot %zu is held twice (slot %zu too)", i,
                              (size_t)(first - m->s));
    }
    if (used != m->count) return hbmi_error(HBM_ERR_CORRUPT, "hash map: %zu slots used, count %zu", used, m->count);
    if (2 * used > m->cap) return hbmi_error(HBM_ERR_CORRUPT, "hash map: %zu keys in %zu slots, over half", used, m->cap);
    return HBM_OK;
}
