/* src/core/map.h - the one hash map of libhbm: u64 -> u64, open addressing.
 *
 * Layout: one array of (key + 1, value) slots side by side (a probe reads one cache line),
 * 0 = an empty slot, so key UINT64_MAX cannot be stored. Capacity a power of two (16 or
 * more), kept at most half full: a lookup probes one or two slots on average.
 * Hash: multiplicative (Fibonacci hashing: the key times 2^64 / golden ratio, the top
 * log2(cap) bits of the product), one multiply; the keys here are addresses, page indices,
 * event indices and hashes, which it spreads well (consecutive keys land far apart).
 * Probing: linear. Deletion: backward shift (the later keys of the cluster move into the
 * hole), so there are no tombstones and a lookup stops at the first empty slot.
 * Order: callers may walk the slots (m->s[0 .. cap)), but the order is the hash's: a caller
 * whose result depends on it must sort (trace.c, torch_snapshot.c and vmm.c's reclaim do).
 * Lookups, puts and deletes are inline (the replay's pairing, the allocators' frees); growth
 * is not. hbmi_map_check walks the invariants (in the manner of tlsf_check). */
#ifndef HBM_CORE_MAP_H
#define HBM_CORE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/status.h"

#if defined(__GNUC__)
#define HBMI_MAP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HBMI_MAP_UNLIKELY(x) (x)
#endif

typedef struct hbmi_map_slot {
    uint64_t key; /* the key + 1; 0 = empty */
    uint64_t val;
} hbmi_map_slot;

typedef struct hbmi_map {
    hbmi_map_slot *s; /* cap slots, or NULL */
    size_t cap;       /* a power of two (>= 16), or 0 */
    size_t count;     /* keys held */
    unsigned shift;   /* 64 - log2(cap): a key's home is the product's top log2(cap) bits */
} hbmi_map;

#define HBMI_MAP_MUL 0x9e3779b97f4a7c15ULL

void hbmi_map_init(hbmi_map *m);
void hbmi_map_destroy(hbmi_map *m);
/* Room for n keys in all, so that puts up to that count neither grow nor fail. */
hbm_status hbmi_map_reserve(hbmi_map *m, size_t n);
/* The map's invariants (in the manner of tlsf_check): a power-of-two capacity of 16 or more
 * (or none) with the shift that goes with it, at most half full, count equal to the used
 * slots, and every key reachable from its home slot with no empty slot between (what
 * lookups and backward-shift deletion rely on) and held once. HBM_ERR_CORRUPT, naming the
 * slot, when one fails. */
hbm_status hbmi_map_check(const hbmi_map *m);

/* The slow paths of the inline functions below (not for callers). */
hbm_status hbmi_map_grow_(hbmi_map *m, size_t n);
hbm_status hbmi_map_bad_key_(void);

/* The home slot of a stored key (key + 1). */
static inline size_t hbmi_map_home(const hbmi_map *m, uint64_t stored) {
    return (size_t)((stored * HBMI_MAP_MUL) >> m->shift);
}

/* Whether n more keys fit without growing. */
static inline int hbmi_map_room(const hbmi_map *m, size_t n) { return 2 * (m->count + n) <= m->cap; }

/* The slot holding key, or NULL. (Key UINT64_MAX is stored as 0, which no probe matches
 * before the empty slot that ends it.) */
static inline hbmi_map_slot *hbmi_map_find(const hbmi_map *m, uint64_t key) {
    if (!m->cap) return NULL;
    uint64_t k = key + 1;
    size_t mask = m->cap - 1;
    for (size_t i = hbmi_map_home(m, k);; i = (i + 1) & mask) {
        hbmi_map_slot *sl = &m->s[i];
        if (!sl->key) return NULL;
        if (sl->key == k) return sl;
    }
}

/* 1 and *val (may be NULL) if present, else 0. */
static inline int hbmi_map_get(const hbmi_map *m, uint64_t key, uint64_t *val) {
    const hbmi_map_slot *sl = hbmi_map_find(m, key);
    if (!sl) return 0;
    if (val) *val = sl->val;
    return 1;
}

/* Insert or overwrite; *had = whether key was there and then *old = the value it had (had
 * and old may be NULL). Fails (the map unchanged) only when it must grow and cannot, or for
 * key UINT64_MAX (HBM_ERR_INVALID). */
static inline hbm_status hbmi_map_swap(hbmi_map *m, uint64_t key, uint64_t val, int *had, uint64_t *old) {
    if (HBMI_MAP_UNLIKELY(key == UINT64_MAX)) return hbmi_map_bad_key_();
    if (HBMI_MAP_UNLIKELY(!hbmi_map_room(m, 1))) {
        hbm_status s = hbmi_map_grow_(m, m->count + 1);
        if (s) return s;
    }
    uint64_t k = key + 1;
    size_t mask = m->cap - 1, i = hbmi_map_home(m, k);
    for (; m->s[i].key; i = (i + 1) & mask)
        if (m->s[i].key == k) {
            if (had) *had = 1;
            if (old) *old = m->s[i].val;
            m->s[i].val = val;
            return HBM_OK;
        }
    m->s[i].key = k;
    m->s[i].val = val;
    m->count++;
    if (had) *had = 0;
    return HBM_OK;
}

/* Insert or overwrite. Key UINT64_MAX is not allowed. Cannot fail after a reserve that
 * counted this key. */
static inline hbm_status hbmi_map_put(hbmi_map *m, uint64_t key, uint64_t val) {
    return hbmi_map_swap(m, key, val, NULL, NULL);
}

/* Insert a key known to be absent into a map with room reserved (hbmi_map_room(m, 1)):
 * no checks, cannot fail (an allocator's hot path after its reserve). A key put twice so
 * would be held twice, which hbmi_map_check reports. Not for key UINT64_MAX. */
static inline void hbmi_map_insert(hbmi_map *m, uint64_t key, uint64_t val) {
    uint64_t k = key + 1;
    size_t mask = m->cap - 1, i = hbmi_map_home(m, k);
    while (m->s[i].key) i = (i + 1) & mask;
    m->s[i].key = k;
    m->s[i].val = val;
    m->count++;
}

/* Remove the key in slot sl (backward shift). */
static inline void hbmi_map_del_slot(hbmi_map *m, hbmi_map_slot *sl) {
    size_t mask = m->cap - 1, i = (size_t)(sl - m->s);
    for (size_t j = i;;) { /* the later keys of the cluster move into the hole */
        j = (j + 1) & mask;
        uint64_t kj = m->s[j].key;
        if (!kj) break;
        /* key j may move to i if its home is not in the cyclic range (i, j] */
        if (((j - hbmi_map_home(m, kj)) & mask) >= ((j - i) & mask)) {
            m->s[i] = m->s[j];
            i = j;
        }
    }
    m->s[i].key = 0;
    m->count--;
}

/* 1 and *val (may be NULL) if removed, else 0. */
static inline int hbmi_map_del(hbmi_map *m, uint64_t key, uint64_t *val) {
    hbmi_map_slot *sl = hbmi_map_find(m, key);
    if (!sl) return 0;
    if (val) *val = sl->val;
    hbmi_map_del_slot(m, sl);
    return 1;
}

#endif
