/* twin_segs.c - the recorded segments the PyTorch twin asks about (twin_internal.h): a
 * sorted array in chunks, so that a history holding 100,000 segments (a repeated one, whose
 * segments live at its end leak on every repetition) costs a bisection and a move of at
 * most one chunk per segment event, not a move of the whole array. */
#include <string.h>

#include "core/internal.h"
#include "trace/replay/twin_internal.h"

#define CHUNK HBMI_TWIN_SEGS_CHUNK

void hbmi_twin_segs_init(hbmi_twin_segs *s) { memset(s, 0, sizeof *s); }

void hbmi_twin_segs_destroy(hbmi_twin_segs *s) {
    for (size_t k = 0; k < s->nch; k++) hbmi_free(s->ch[k]);
    hbmi_free(s->ch);
    hbmi_free(s->first);
    hbmi_free(s->list);
    hbmi_twin_segs_init(s);
}

static int key_less(uint64_t b1, uint64_t s1, uint64_t b2, uint64_t s2) { return b1 < b2 || (b1 == b2 && s1 < s2); }

static void set_first(hbmi_twin_segs *s, size_t k) {
    s->first[2 * k] = s->ch[k]->e[0].base, s->first[2 * k + 1] = s->ch[k]->e[0].size;
}

/* The chunk that holds the first entry not below (base, size), or where it would go: the
 * last whose first key is below it (the first chunk when none is). s->nch > 0. */
static size_t chunk_of(const hbmi_twin_segs *s, uint64_t base, uint64_t size) {
    size_t lo = 0, hi = s->nch; /* chunks [0, lo) start below the key */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_less(s->first[2 * mid], s->first[2 * mid + 1], base, size)) lo = mid + 1;
        else hi = mid;
    }
    return lo ? lo - 1 : 0;
}

/* The first index of chunk c whose entry is not below (base, size) (c->n: none). */
static size_t lower_in(const hbmi_twin_segs_chunk *c, uint64_t base, uint64_t size) {
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_less(c->e[mid].base, c->e[mid].size, base, size)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Chunk k removed from the order (it is empty or merged; not freed here). */
static void chunk_remove(hbmi_twin_segs *s, size_t k) {
    memmove(s->ch + k, s->ch + k + 1, (s->nch - k - 1) * sizeof *s->ch);
    memmove(s->first + 2 * k, s->first + 2 * k + 2, 2 * (s->nch - k - 1) * sizeof *s->first);
    s->nch--;
}

hbm_status hbmi_twin_segs_add(hbmi_twin_segs *s, uint64_t base, uint64_t size) {
    /* everything that can fail first, so that a failure changes nothing */
    hbm_status st = hbmi_grow((void **)&s->list, &s->caplist, 2 * (s->n + 1), sizeof *s->list);
    if (!st) st = hbmi_grow((void **)&s->ch, &s->capch, s->nch + 1, sizeof *s->ch);
    if (!st) st = hbmi_grow((void **)&s->first, &s->capfirst, 2 * (s->nch + 1), sizeof *s->first);
    if (st) return st;
    size_t k = s->nch ? chunk_of(s, base, size) : 0;
    if (!s->nch || s->ch[k]->n == CHUNK) { /* a new chunk: the first, or the upper half of a full one */
        hbmi_twin_segs_chunk *nc = hbmi_malloc(sizeof *nc);
        if (!nc) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for the twin's recorded segments");
        if (!s->nch) {
            nc->n = 0;
            s->ch[0] = nc, s->nch = 1;
        } else {
            hbmi_twin_segs_chunk *c = s->ch[k];
            nc->n = CHUNK / 2;
            memcpy(nc->e, c->e + CHUNK / 2, (CHUNK / 2) * sizeof *c->e);
            c->n = CHUNK / 2;
            memmove(s->ch + k + 2, s->ch + k + 1, (s->nch - k - 1) * sizeof *s->ch);
            memmove(s->first + 2 * k + 4, s->first + 2 * k + 2, 2 * (s->nch - k - 1) * sizeof *s->first);
            s->ch[k + 1] = nc, s->nch++;
            set_first(s, k + 1);
            if (!key_less(base, size, nc->e[0].base, nc->e[0].size)) k++;
        }
    }
    hbmi_twin_segs_chunk *c = s->ch[k];
    size_t i = lower_in(c, base, size);
    memmove(c->e + i + 1, c->e + i, (c->n - i) * sizeof *c->e);
    c->e[i] = (hbmi_twin_seg){base, size, s->n};
    c->n++;
    if (!i) set_first(s, k);
    s->list[2 * s->n] = base, s->list[2 * s->n + 1] = size, s->n++;
    if (size > s->longest) s->longest = size;
    return HBM_OK;
}

/* Entry i of chunk k removed; a chunk left below a quarter full joins a neighbour that
 * has room, so the chunks stay few. */
static void entry_remove(hbmi_twin_segs *s, size_t k, size_t i) {
    hbmi_twin_segs_chunk *c = s->ch[k];
    memmove(c->e + i, c->e + i + 1, (c->n - i - 1) * sizeof *c->e);
    if (!--c->n) {
        hbmi_free(c);
        chunk_remove(s, k);
        return;
    }
    if (!i) set_first(s, k);
    if (c->n >= CHUNK / 4) return;
    size_t l = k, r = k + 1; /* merge chunk r into chunk l */
    if (r >= s->nch || c->n + s->ch[r]->n > 3 * CHUNK / 4) l = k - 1, r = k;
    if (k == 0 && r == 0) return;
    if (s->ch[l]->n + s->ch[r]->n > 3 * CHUNK / 4) return;
    memcpy(s->ch[l]->e + s->ch[l]->n, s->ch[r]->e, s->ch[r]->n * sizeof *c->e);
    s->ch[l]->n += s->ch[r]->n;
    hbmi_free(s->ch[r]);
    chunk_remove(s, r);
}

/* The entry (base, size) whose position is pos: *k, *i. 1 when found. */
static int find_pos(const hbmi_twin_segs *s, uint64_t base, uint64_t size, size_t pos, size_t *kk, size_t *ii) {
    if (!s->nch) return 0;
    size_t k = chunk_of(s, base, size), i = lower_in(s->ch[k], base, size);
    for (; k < s->nch; k++, i = 0)
        for (const hbmi_twin_segs_chunk *c = s->ch[k]; i < c->n; i++) {
            const hbmi_twin_seg *e = &c->e[i];
            if (e->base != base || e->size != size) return 0;
            if (e->pos == pos) {
                *kk = k, *ii = i;
                return 1;
            }
        }
    return 0;
}

void hbmi_twin_segs_del(hbmi_twin_segs *s, uint64_t base) {
    if (!s->nch) return;
    /* the segments at base, in the order of their sizes: the one first in the list */
    size_t k = chunk_of(s, base, 0), i = lower_in(s->ch[k], base, 0), bk = 0, bi = 0, best = SIZE_MAX;
    for (; k < s->nch; k++, i = 0) {
        const hbmi_twin_segs_chunk *c = s->ch[k];
        for (; i < c->n && c->e[i].base == base; i++)
            if (c->e[i].pos < best) best = c->e[i].pos, bk = k, bi = i;
        if (i < c->n) break;
    }
    if (best == SIZE_MAX) return;
    entry_remove(s, bk, bi);
    size_t last = --s->n; /* the list's last takes the place freed there */
    if (best == last) return;
    uint64_t lb = s->list[2 * last], ls = s->list[2 * last + 1];
    if (find_pos(s, lb, ls, last, &k, &i)) s->ch[k]->e[i].pos = best;
    s->list[2 * best] = lb, s->list[2 * best + 1] = ls;
}

int hbmi_twin_segs_has(const hbmi_twin_segs *s, uint64_t addr) {
    if (addr == UINT64_MAX || !s->nch) return 0; /* nothing holds the last byte: base + size would wrap */
    size_t lo = 0, hi = s->nch; /* chunks [0, lo) start at or below addr */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->first[2 * mid] <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return 0;
    size_t k = lo - 1;
    const hbmi_twin_segs_chunk *c = s->ch[k];
    size_t i = 0, n = c->n; /* entries [0, i) of chunk k start at or below addr */
    while (i < n) {
        size_t mid = i + (n - i) / 2;
        if (c->e[mid].base <= addr) i = mid + 1;
        else n = mid;
    }
    /* from the highest base down, until one holds addr or none further down can reach it:
     * below a base b with b + longest <= addr, every segment ends at or below addr (one
     * whose end wraps holds nothing) */
    uint64_t longest = s->longest;
    for (;;) {
        while (i-- > 0) {
            const hbmi_twin_seg *e = &c->e[i];
            if (addr < e->base + e->size) return 1;
            if (e->base + longest >= e->base && e->base + longest <= addr) return 0;
        }
        if (!k--) return 0;
        c = s->ch[k];
        i = c->n;
    }
}

hbm_status hbmi_twin_segs_check(const hbmi_twin_segs *s) {
    size_t total = 0;
    uint8_t *seen = hbmi_calloc(s->n + 1, 1);
    if (!seen) return hbmi_error(HBM_ERR_NOMEM, "out of host memory checking the twin's recorded segments");
    hbm_status st = HBM_OK;
    const hbmi_twin_seg *prev = NULL;
    for (size_t k = 0; k < s->nch && !st; k++) {
        const hbmi_twin_segs_chunk *c = s->ch[k];
        if (!c->n || c->n > CHUNK) st = hbmi_error(HBM_ERR_CORRUPT, "twin segments: chunk %zu holds %zu entries", k, c->n);
        else if (s->first[2 * k] != c->e[0].base || s->first[2 * k + 1] != c->e[0].size)
            st = hbmi_error(HBM_ERR_CORRUPT, "twin segments: chunk %zu's first key is not its first entry's", k);
        for (size_t i = 0; i < c->n && !st; prev = &c->e[i], i++) {
            const hbmi_twin_seg *e = &c->e[i];
            total++;
            if (prev && key_less(e->base, e->size, prev->base, prev->size))
                st = hbmi_error(HBM_ERR_CORRUPT, "twin segments: entry %zu of chunk %zu out of order", i, k);
            else if (e->pos >= s->n || seen[e->pos])
                st = hbmi_error(HBM_ERR_CORRUPT, "twin segments: position %zu out of range or twice", e->pos);
            else if (s->list[2 * e->pos] != e->base || s->list[2 * e->pos + 1] != e->size)
                st = hbmi_error(HBM_ERR_CORRUPT, "twin segments: position %zu in the list is another segment", e->pos);
            else if (e->size > s->longest)
                st = hbmi_error(HBM_ERR_CORRUPT, "twin segments: a segment longer than the longest");
            else seen[e->pos] = 1;
        }
    }
    if (!st && total != s->n) st = hbmi_error(HBM_ERR_CORRUPT, "twin segments: %zu entries, %zu in the list", total, s->n);
    hbmi_free(seen);
    return st;
}
