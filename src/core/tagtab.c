/* tagtab.c - interned copies of hbm_tag, so buffers carry a 32-bit id. */
#include <string.h>

#include "core/internal.h"

struct hbmi_tagtab {
    hbm_tag *tags; /* tags[0] unused: id 0 means "no tag" */
    size_t count, cap;
    hbmi_map index; /* hash of tag -> id (chained through next on collision) */
    uint32_t *next;
    size_t next_cap;
};

static uint64_t str_hash(uint64_t h, const char *s) {
    if (!s) return hbmi_hash64(h ^ 0x9e3779b97f4a7c15ULL);
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return hbmi_hash64(h + 1);
}

static uint64_t tag_hash(const hbm_tag *t) {
    uint64_t h = 0xcbf29ce484222325ULL;
    h = str_hash(h, t->op_name);
    h = str_hash(h, t->shape);
    h = str_hash(h, t->source_file);
    h = str_hash(h, t->label);
    h = hbmi_hash64(h ^ (uint64_t)(uint32_t)t->source_line ^ ((uint64_t)t->category << 32));
    return h == UINT64_MAX ? 0 : h;
}

static int str_eq(const char *a, const char *b) {
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

static int tag_eq(const hbm_tag *a, const hbm_tag *b) {
    return a->source_line == b->source_line && a->category == b->category &&
           str_eq(a->op_name, b->op_name) && str_eq(a->shape, b->shape) &&
           str_eq(a->source_file, b->source_file) && str_eq(a->label, b->label);
}

hbm_status hbmi_tagtab_new(hbmi_tagtab **out) {
    hbmi_tagtab *t = hbmi_calloc(1, sizeof *t);
    if (!t) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a tag table");
    hbmi_map_init(&t->index);
    t->count = 1;
    *out = t;
    return HBM_OK;
}

static void tag_release(hbm_tag *t) {
    hbmi_free((char *)t->op_name);
    hbmi_free((char *)t->shape);
    hbmi_free((char *)t->source_file);
    hbmi_free((char *)t->label);
}

void hbmi_tagtab_free(hbmi_tagtab *t) {
    if (!t) return;
    for (size_t i = 1; i < t->count; i++) tag_release(&t->tags[i]);
    hbmi_free(t->tags);
    hbmi_free(t->next);
    hbmi_map_destroy(&t->index);
    hbmi_free(t);
}

static int dup_field(const char *src, const char **dst) {
    *dst = NULL;
    if (!src) return 1;
    *dst = hbmi_strdup(src);
    return *dst != NULL;
}

hbm_status hbmi_tagtab_intern(hbmi_tagtab *t, const hbm_tag *tag, uint32_t *id_out) {
    *id_out = 0;
    if (!tag) return HBM_OK;
    uint64_t h = tag_hash(tag), head = 0;
    if (hbmi_map_get(&t->index, h, &head)) {
        for (uint32_t id = (uint32_t)head; id; id = t->next[id]) {
            if (tag_eq(&t->tags[id], tag)) {
                *id_out = id;
                return HBM_OK;
            }
        }
    }
    if (t->count >= UINT32_MAX) return hbmi_error(HBM_ERR_NOMEM, "more than 2^32 distinct tags");
    hbm_status s = hbmi_grow((void **)&t->tags, &t->cap, t->count + 1, sizeof *t->tags);
    if (s) return s;
    s = hbmi_grow((void **)&t->next, &t->next_cap, t->count + 1, sizeof *t->next);
    if (s) return s;
    hbm_tag c = *tag;
    c.op_name = c.shape = c.source_file = c.label = NULL; /* never free the caller's strings */
    if (!dup_field(tag->op_name, &c.op_name) || !dup_field(tag->shape, &c.shape) ||
        !dup_field(tag->source_file, &c.source_file) || !dup_field(tag->label, &c.label)) {
        tag_release(&c);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory copying a tag");
    }
    uint32_t id = (uint32_t)t->count;
    s = hbmi_map_put(&t->index, h, id);
    if (s) {
        tag_release(&c);
        return s;
    }
    t->tags[id] = c;
    t->next[id] = (uint32_t)head;
    t->count++;
    *id_out = id;
    return HBM_OK;
}

const hbm_tag *hbmi_tagtab_get(const hbmi_tagtab *t, uint32_t id) {
    if (!t || id == 0 || id >= t->count) return NULL;
    return &t->tags[id];
}

uint32_t hbmi_tagtab_count(const hbmi_tagtab *t) { return t ? (uint32_t)(t->count - 1) : 0; }
