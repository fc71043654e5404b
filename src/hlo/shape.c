/* shape.c - the arena, primitive types, opcodes and shape arithmetic of HLO. */
#include <stdio.h>
#include <string.h>

#include "hlo/hlo_internal.h"

/* --- arena ------------------------------------------------------------------------------ */
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

/* --- primitive types ---------------------------------------------------------------------- */
static const struct {
    const char *name;
    int bits;
} prims[] = {
#define HBMI_PRIM_ROW_(n, s, b) {s, b},
    HBM_HLO_PRIM_LIST(HBMI_PRIM_ROW_)
#undef HBMI_PRIM_ROW_
};

int hbm_hlo_prim_bits(hbm_hlo_prim p) {
    if ((unsigned)p >= HBM_HLO_PRIM_COUNT_) return -1;
    return prims[p].bits;
}

const char *hbm_hlo_prim_name(hbm_hlo_prim p) {
    if ((unsigned)p >= HBM_HLO_PRIM_COUNT_) return "";
    return prims[p].name;
}

int hbmi_prim_lookup(const char *p, size_t n) {
    for (int i = 0; i < HBM_HLO_PRIM_COUNT_; i++)
        if (strlen(prims[i].name) == n && !memcmp(prims[i].name, p, n)) return i;
    return -1;
}

/* --- opcodes -------------------------------------------------------------------------------- */
static const char *const elementwise_ops[] = {
    "abs", "round-nearest-afz", "round-nearest-even", "ceil", "clz", "convert", "bitcast-convert",
    "cos", "exponential", "exponential-minus-one", "floor", "imag", "is-finite", "log",
    "log-plus-one", "not", "negate", "popcnt", "real", "reduce-precision", "rsqrt", "logistic",
    "sign", "sine", "sqrt", "cbrt", "tan", "tanh", "erf", "add", "atan2", "compare", "complex",
    "divide", "maximum", "minimum", "multiply", "power", "remainder", "subtract", "and", "or",
    "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical", "stochastic-convert",
    "select", "clamp", "cosine", "exp", "expm1", "log1p", NULL};

static int streq_n(const char *p, size_t n, const char *s) { return strlen(s) == n && !memcmp(p, s, n); }

static int ends_with(const char *p, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n > k && !memcmp(p + n - k, suf, k);
}

hbmi_op hbmi_op_lookup(const char *p, size_t n) {
    static const struct {
        const char *name;
        hbmi_op op;
    } fixed[] = {{"parameter", HOP_PARAMETER},
                 {"constant", HOP_CONSTANT},
                 {"tuple", HOP_TUPLE},
                 {"get-tuple-element", HOP_GTE},
                 {"bitcast", HOP_BITCAST},
                 {"while", HOP_WHILE},
                 {"call", HOP_CALL},
                 {"conditional", HOP_CONDITIONAL},
                 {"fusion", HOP_FUSION},
                 {"custom-call", HOP_CUSTOM_CALL},
                 {"async-start", HOP_ASYNC_START},
                 {"async-update", HOP_ASYNC_UPDATE},
                 {"async-done", HOP_ASYNC_DONE},
                 {"copy", HOP_COPY},
                 {"copy-start", HOP_COPY_START},
                 {"copy-done", HOP_COPY_DONE},
                 {"all-gather-start", HOP_LEGACY_START},
                 {"collective-permute-start", HOP_LEGACY_START},
                 {"all-gather-done", HOP_ASYNC_DONE},
                 {"collective-permute-done", HOP_ASYNC_DONE},
                 {"all-reduce-start", HOP_ALL_REDUCE_START},
                 {"all-reduce-done", HOP_ALL_REDUCE_DONE},
                 {"send", HOP_SEND},
                 {"recv", HOP_RECV},
                 {"send-done", HOP_SEND_DONE},
                 {"recv-done", HOP_RECV_DONE},
                 {"dynamic-update-slice", HOP_DUS},
                 {"scatter", HOP_SCATTER},
                 {"domain", HOP_DOMAIN},
                 {"opt-barrier", HOP_OPT_BARRIER},
                 {"optimization-barrier", HOP_OPT_BARRIER},
                 {"add-dependency", HOP_ADD_DEPENDENCY}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (streq_n(p, n, fixed[i].name)) return fixed[i].op;
    for (size_t i = 0; elementwise_ops[i]; i++)
        if (streq_n(p, n, elementwise_ops[i])) return HOP_ELEMENTWISE;
    /* the async sugar: all-to-all-start, custom-call-start, reduce-scatter-done, ... */
    if (ends_with(p, n, "-start")) return HOP_ASYNC_START;
    if (ends_with(p, n, "-update")) return HOP_ASYNC_UPDATE;
    if (ends_with(p, n, "-done")) return HOP_ASYNC_DONE;
    return HOP_OTHER;
}

/* --- shapes ---------------------------------------------------------------------------------- */
uint64_t hbmi_shape_elements(const hbmi_shape *s) {
    uint64_t e = 1;
    for (uint32_t i = 0; i < s->n; i++) {
        uint64_t d = s->dims[i] < 0 ? 0 : (uint64_t)s->dims[i];
        if (d && e > UINT64_MAX / d) return UINT64_MAX;
        e *= d;
    }
    return e;
}

uint64_t hbmi_shape_bytes(const hbmi_shape *s, unsigned pointer_size) {
    if (s->prim == HBMI_PRIM_TUPLE) return (uint64_t)pointer_size * s->n;
    int bits = hbm_hlo_prim_bits((hbm_hlo_prim)s->prim);
    if (bits <= 0) return 0;
    uint64_t e = hbmi_shape_elements(s);
    if (e == UINT64_MAX) return UINT64_MAX;
    uint64_t bytes;
    if (s->elem_bits && s->elem_bits < 8) /* packed sub-byte layout E(n) */
        bytes = (e / 8) * s->elem_bits + ((e % 8) * s->elem_bits + 7) / 8;
    else if (bits < 8)
        bytes = e; /* unpacked: one byte per element */
    else {
        uint64_t per = (uint64_t)bits / 8;
        if (e > UINT64_MAX / per) return UINT64_MAX;
        bytes = e * per;
    }
    if (s->dynamic) bytes += 4ull * s->n; /* GPU: an s32 per dimension of metadata */
    return bytes;
}

uint32_t hbmi_shape_child(const hbmi_shape *s, uint32_t i) {
    uint32_t off = 1;
    for (uint32_t k = 0; k < i && k < s->n; k++) off += s->elems[k].nodes;
    return off;
}

const hbmi_shape *hbmi_shape_node(const hbmi_shape *s, uint32_t k) {
    while (k) {
        if (s->prim != HBMI_PRIM_TUPLE) return NULL;
        uint32_t off = 1, i;
        for (i = 0; i < s->n; i++) {
            if (k < off + s->elems[i].nodes) break;
            off += s->elems[i].nodes;
        }
        if (i == s->n) return NULL;
        k -= off;
        s = &s->elems[i];
    }
    return s;
}

int hbmi_shape_equal(const hbmi_shape *a, const hbmi_shape *b) {
    if (a->prim != b->prim || a->n != b->n) return 0;
    if (a->prim == HBMI_PRIM_TUPLE) {
        for (uint32_t i = 0; i < a->n; i++)
            if (!hbmi_shape_equal(&a->elems[i], &b->elems[i])) return 0;
        return 1;
    }
    for (uint32_t i = 0; i < a->n; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return a->elem_bits == b->elem_bits && a->memory_space == b->memory_space;
}

static size_t put(char *buf, size_t cap, size_t at, const char *s) {
    while (*s && at + 1 < cap) buf[at++] = *s++;
    if (cap) buf[at < cap ? at : cap - 1] = 0;
    return at;
}

static size_t print_rec(const hbmi_shape *s, char *buf, size_t cap, size_t at, int depth) {
    char tmp[32];
    if (s->prim == HBMI_PRIM_TUPLE) {
        at = put(buf, cap, at, "(");
        for (uint32_t i = 0; i < s->n; i++) {
            if (i) at = put(buf, cap, at, ", ");
            if (depth > 16) {
                at = put(buf, cap, at, "...");
                break;
            }
            at = print_rec(&s->elems[i], buf, cap, at, depth + 1);
        }
        return put(buf, cap, at, ")");
    }
    at = put(buf, cap, at, hbm_hlo_prim_name((hbm_hlo_prim)s->prim));
    at = put(buf, cap, at, "[");
    for (uint32_t i = 0; i < s->n; i++) {
        snprintf(tmp, sizeof tmp, "%s%lld", i ? "," : "", (long long)s->dims[i]);
        at = put(buf, cap, at, tmp);
    }
    return put(buf, cap, at, "]");
}

void hbmi_shape_print(const hbmi_shape *s, char *buf, size_t cap) {
    if (!cap) return;
    buf[0] = 0;
    print_rec(s, buf, cap, 0, 0);
}
