/* arena.c - bump allocation in chunks, freed all at once (core/arena.h). */
#include <string.h>

#include "core/arena.h"
#include "core/internal.h"

void *hbmi_arena_alloc(hbmi_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    hbmi_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > (size_t)1 << 16 ? n : (size_t)1 << 16;
        if (c && c->cap >= ((size_t)1 << 16) && cap < c->cap * 2 && c->cap < ((size_t)1 << 24))
            cap = c->cap * 2 >= n ? c->cap * 2 : n;
        c = hbmi_malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->total += sizeof *c + cap;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void hbmi_arena_free(hbmi_arena *a) {
    hbmi_arena_chunk *c = a->head;
    while (c) {
        hbmi_arena_chunk *n = c->next;
        hbmi_free(c);
        c = n;
    }
    a->head = NULL;
    a->total = 0;
}
