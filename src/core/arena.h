/* src/core/arena.h - bump allocation in chunks, freed all at once (core/arena.c): the parsed
 * HLO module, a plan's and a fit's strings, a memory profile's events live in one each. */
#ifndef HBM_CORE_ARENA_H
#define HBM_CORE_ARENA_H

#include <stddef.h>

typedef struct hbmi_arena_chunk {
    struct hbmi_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} hbmi_arena_chunk;

typedef struct hbmi_arena {
    hbmi_arena_chunk *head;
    size_t total; /* bytes obtained from hbmi_malloc (for the memory figures) */
} hbmi_arena;

void *hbmi_arena_alloc(hbmi_arena *a, size_t n); /* 16-byte aligned, zeroed; NULL on OOM */
void hbmi_arena_free(hbmi_arena *a);

#endif
