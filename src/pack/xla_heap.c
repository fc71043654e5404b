/* xla_heap.c - XLA's GlobalDecreasingSizeBestFitHeap over an hbm_timeline.
 *
 * The order (spatial: size desc, lifetime desc, index; temporal: lifetime desc, size
 * desc, index) and the placement (smallest gap that fits between the chunks already
 * placed that overlap in time, lowest offset among equals, else after the highest
 * overlapping chunk: the space above it is one infinite free chunk, as MakeFreeChunks
 * starts from {0, INT64_MAX}, never a smaller fit bounded by the heap's current size;
 * offsets rounded up to the alignment) follow
 * xla/service/heap_simulator/heap_simulator.cc. Chunks are found with an interval tree
 * keyed by start time with the maximum end of each subtree, as XLA's BufferIntervalTree. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "pack/xla_heap.h"

typedef struct tnode {
    int64_t start, end, subtree_end; /* [start, end) */
    uint64_t offset, size;
    uint32_t left, right; /* index + 1, 0 = none */
} tnode;

typedef struct group {
    uint64_t size, align;
    int64_t min_start, max_end;
    uint32_t head;
    int pinned;
    uint64_t offset;
} group;

typedef struct heap {
    hbm_timeline *tl;
    tnode *nodes;
    uint32_t n_nodes, root;
    uint32_t *gid;    /* buffer -> group */
    uint32_t *next;   /* next member of the same group, UINT32_MAX = end */
    uint32_t *first;  /* group -> first member */
    group *groups;
    uint32_t n_groups;
    struct chunk { uint64_t offset, size; } *found, *tmp;
    size_t n_found, cap_found, cap_tmp;
    uint32_t *stack;
    uint64_t heap_size;
    int temporal;
} heap;

/* A treap keyed by start (random priorities keep it balanced whatever the insertion order;
 * XLA's plain BST degenerates when buffers arrive sorted by time). */
static uint64_t prio(uint32_t id) { return (uint64_t)id * 0x9e3779b97f4a7c15ULL ^ 0x5bd1e9955bd1e995ULL; }

static void fix_end(heap *h, uint32_t id) {
    tnode *n = &h->nodes[id];
    int64_t e = n->end;
    if (n->left && h->nodes[n->left - 1].subtree_end > e) e = h->nodes[n->left - 1].subtree_end;
    if (n->right && h->nodes[n->right - 1].subtree_end > e) e = h->nodes[n->right - 1].subtree_end;
    n->subtree_end = e;
}

/* insert node id into the subtree rooted at root (index + 1); returns the new root + 1 */
static uint32_t treap_insert(heap *h, uint32_t root, uint32_t id, int depth) {
    if (!root || depth > 200) {
        if (root) { /* pathological depth: append without rotations */
            tnode *r = &h->nodes[root - 1];
            if (r->subtree_end < h->nodes[id].end) r->subtree_end = h->nodes[id].end;
            uint32_t *link = r->start > h->nodes[id].start ? &r->left : &r->right;
            *link = treap_insert(h, *link, id, depth);
            return root;
        }
        return id + 1;
    }
    tnode *r = &h->nodes[root - 1];
    if (r->start > h->nodes[id].start) {
        r->left = treap_insert(h, r->left, id, depth + 1);
        if (prio(r->left - 1) > prio(root - 1)) { /* rotate right */
            uint32_t l = r->left;
            tnode *ln = &h->nodes[l - 1];
            r->left = ln->right;
            ln->right = root;
            fix_end(h, root - 1);
            fix_end(h, l - 1);
            return l;
        }
    } else {
        r->right = treap_insert(h, r->right, id, depth + 1);
        if (prio(r->right - 1) > prio(root - 1)) { /* rotate left */
            uint32_t rr = r->right;
            tnode *rn = &h->nodes[rr - 1];
            r->right = rn->left;
            rn->left = root;
            fix_end(h, root - 1);
            fix_end(h, rr - 1);
            return rr;
        }
    }
    fix_end(h, root - 1);
    return root;
}

static void tree_add(heap *h, int64_t s, int64_t e, uint64_t off, uint64_t size) {
    uint32_t id = h->n_nodes++;
    tnode *n = &h->nodes[id];
    n->start = s;
    n->end = e;
    n->subtree_end = e;
    n->offset = off;
    n->size = size;
    n->left = n->right = 0;
    h->root = treap_insert(h, h->root, id, 0);
}

static int tree_query(heap *h, int64_t s, int64_t e) {
    if (!h->root) return 1;
    uint32_t sp = 0;
    h->stack[sp++] = h->root - 1;
    while (sp) {
        tnode *t = &h->nodes[h->stack[--sp]];
        if (t->subtree_end <= s) continue;
        if (t->left) h->stack[sp++] = t->left - 1;
        if (t->start < e && t->end > s) {
            if (h->n_found == h->cap_found &&
                hbmi_grow((void **)&h->found, &h->cap_found, h->n_found + 1, sizeof *h->found) != HBM_OK)
                return 0;
            h->found[h->n_found].offset = t->offset;
            h->found[h->n_found].size = t->size;
            h->n_found++;
        }
        if (t->start >= e) continue;
        if (t->right) h->stack[sp++] = t->right - 1;
    }
    return 1;
}

static _Thread_local heap *sort_ctx;

static int cmp_group(const void *a, const void *b) {
    const heap *h = sort_ctx;
    const group *x = &h->groups[*(const uint32_t *)a], *y = &h->groups[*(const uint32_t *)b];
    const hbm_tl_buffer *bx = &h->tl->buffers[x->head], *by = &h->tl->buffers[y->head];
    if (h->temporal) {
        int64_t dx = x->max_end - x->min_start, dy = y->max_end - y->min_start;
        if (dx != dy) return dx > dy ? -1 : 1;
        if (x->size != y->size) return x->size > y->size ? -1 : 1;
    } else {
        if (x->size != y->size) return x->size > y->size ? -1 : 1;
        int64_t dx = bx->end - bx->start, dy = by->end - by->start;
        if (dx != dy) return dx > dy ? -1 : 1;
    }
    return x->head < y->head ? -1 : x->head > y->head;
}

/* The chunks found, by offset (the order among equal offsets does not matter to place):
 * insertion sort when few, else a least-significant-digit radix sort over the bytes in which
 * the offsets differ (no comparison calls: placing sorts once per buffer). */
static int sort_chunks(heap *h) {
    struct chunk *a = h->found;
    size_t n = h->n_found;
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            struct chunk x = a[i];
            size_t j = i;
            for (; j > 0 && a[j - 1].offset > x.offset; j--) a[j] = a[j - 1];
            a[j] = x;
        }
        return 1;
    }
    if (h->cap_tmp < n && hbmi_grow((void **)&h->tmp, &h->cap_tmp, n, sizeof *h->tmp) != HBM_OK) return 0;
    uint64_t differ = 0;
    for (size_t i = 1; i < n; i++) differ |= a[i].offset ^ a[0].offset;
    struct chunk *src = a, *dst = h->tmp;
    for (int shift = 0; shift < 64; shift += 8) {
        if (!((differ >> shift) & 0xff)) continue;
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[((src[i].offset >> shift) & 0xff) + 1]++;
        for (int d = 0; d < 256; d++) count[d + 1] += count[d];
        for (size_t i = 0; i < n; i++) dst[count[(src[i].offset >> shift) & 0xff]++] = src[i];
        struct chunk *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, n * sizeof *a);
    return 1;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return a > 1 ? (x + a - 1) / a * a : x; }

static int place(heap *h, uint32_t g) {
    group *gr = &h->groups[g];
    h->n_found = 0;
    for (uint32_t m = h->first[g]; m != UINT32_MAX; m = h->next[m]) {
        const hbm_tl_buffer *b = &h->tl->buffers[m];
        if (!tree_query(h, b->start, b->end)) return 0;
    }
    uint64_t offset;
    if (gr->pinned) {
        offset = gr->offset;
    } else {
        if (!sort_chunks(h)) return 0;
        uint64_t best_off = UINT64_MAX, best_size = UINT64_MAX, at = 0;
        for (size_t i = 0; i < h->n_found; i++) {
            const struct chunk *c = &h->found[i];
            if (at < c->offset) {
                uint64_t free = c->offset - at;
                if (free >= gr->size && free < best_size) {
                    best_size = free;
                    best_off = at;
                }
            }
            uint64_t end = align_up(c->offset + c->size, gr->align);
            if (end > at) at = end;
        }
        offset = best_off != UINT64_MAX ? best_off : at;
    }
    if (offset + gr->size > h->heap_size) h->heap_size = offset + gr->size;
    for (uint32_t m = h->first[g]; m != UINT32_MAX; m = h->next[m]) {
        hbm_tl_buffer *b = &h->tl->buffers[m];
        b->offset = offset;
        tree_add(h, b->start, b->end, offset, gr->size);
    }
    return 1;
}

hbm_status hbmi_xla_best_fit(hbm_timeline *tl, int temporal, uint64_t *heap_size) {
    if (!tl || !heap_size) return hbmi_error(HBM_ERR_INVALID, "xla heap: NULL argument");
    *heap_size = 0;
    size_t n = tl->count;
    if (!n) return HBM_OK;
    if (n >= UINT32_MAX / 2) return hbmi_error(HBM_ERR_UNSUPPORTED, "xla heap: too many buffers (%zu)", n);
    for (size_t i = 0; i < n; i++)
        if (tl->buffers[i].start >= tl->buffers[i].end)
            return hbmi_error(HBM_ERR_INVALID, "xla heap: buffer %zu has an empty lifetime [%lld, %lld)", i,
                              (long long)tl->buffers[i].start, (long long)tl->buffers[i].end);
    heap h;
    memset(&h, 0, sizeof h);
    h.tl = tl;
    h.temporal = temporal;
    h.nodes = hbmi_malloc(sizeof *h.nodes * n);
    h.gid = hbmi_malloc(sizeof *h.gid * n);
    h.next = hbmi_malloc(sizeof *h.next * n);
    h.first = hbmi_malloc(sizeof *h.first * n);
    h.groups = hbmi_calloc(n, sizeof *h.groups);
    h.stack = hbmi_malloc(sizeof *h.stack * (n + 1));
    uint32_t *order = hbmi_malloc(sizeof *order * n), *last = hbmi_malloc(sizeof *last * n);
    hbmi_map ids;
    hbmi_map_init(&ids);
    hbm_status s = HBM_OK;
    if (!h.nodes || !h.gid || !h.next || !h.first || !h.groups || !h.stack || !order || !last ||
        hbmi_map_reserve(&ids, n) != HBM_OK) {
        s = hbmi_error(HBM_ERR_NOMEM, "xla heap: out of host memory for %zu buffers", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const hbm_tl_buffer *b = &tl->buffers[i];
        uint64_t g;
        uint64_t key = b->id == UINT64_MAX ? UINT64_MAX - 1 : b->id;
        if (!hbmi_map_get(&ids, key, &g)) {
            g = h.n_groups++;
            if (hbmi_map_put(&ids, key, g) != HBM_OK) {
                s = hbmi_error(HBM_ERR_NOMEM, "xla heap: out of host memory");
                goto out;
            }
            group *gr = &h.groups[g];
            gr->head = (uint32_t)i;
            gr->min_start = b->start;
            gr->max_end = b->end;
            h.first[g] = (uint32_t)i;
            last[g] = (uint32_t)i;
        } else {
            h.next[last[g]] = (uint32_t)i;
            last[g] = (uint32_t)i;
        }
        h.next[i] = UINT32_MAX;
        h.gid[i] = (uint32_t)g;
        group *gr = &h.groups[g];
        if (b->size > gr->size) gr->size = b->size;
        if (b->alignment > gr->align) gr->align = b->alignment;
        if (b->start < gr->min_start) gr->min_start = b->start;
        if (b->end > gr->max_end) gr->max_end = b->end;
        if ((b->flags & HBM_TL_PINNED) && b->offset != HBM_NO_OFFSET) {
            gr->pinned = 1;
            gr->offset = b->offset;
        }
    }
    uint32_t np = 0, nfree = 0;
    for (uint32_t g = 0; g < h.n_groups; g++)
        if (h.groups[g].pinned) order[np++] = g;
    for (uint32_t g = 0; g < h.n_groups; g++)
        if (!h.groups[g].pinned) order[np + nfree++] = g;
    sort_ctx = &h;
    hbmi_qsort(order + np, nfree, sizeof *order, cmp_group);
    sort_ctx = NULL;
    for (uint32_t k = 0; k < h.n_groups; k++)
        if (!place(&h, order[k])) {
            s = hbmi_error(HBM_ERR_NOMEM, "xla heap: out of host memory");
            goto out;
        }
    *heap_size = h.heap_size;
out:
    hbmi_map_destroy(&ids);
    hbmi_free(h.nodes);
    hbmi_free(h.gid);
    hbmi_free(h.next);
    hbmi_free(h.first);
    hbmi_free(h.groups);
    hbmi_free(h.stack);
    hbmi_free(h.found);
    hbmi_free(h.tmp);
    hbmi_free(order);
    hbmi_free(last);
    return s;
}
