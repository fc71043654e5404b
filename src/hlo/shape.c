/* shape.c - primitive types, opcodes and shape arithmetic of HLO. */
#include <stdio.h>
#include <string.h>

#include "hlo/hlo_internal.h"

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

static const uint8_t prim_len[] = {
#define HBMI_PRIM_LEN_(n, s, b) sizeof(s) - 1,
    HBM_HLO_PRIM_LIST(HBMI_PRIM_LEN_)
#undef HBMI_PRIM_LEN_
};

int hbmi_prim_lookup(const char *p, size_t n) {
    for (int i = 0; i < HBM_HLO_PRIM_COUNT_; i++)
        if (prim_len[i] == n && prims[i].name[0] == p[0] && !memcmp(prims[i].name, p, n)) return i;
    return -1;
}

/* --- opcodes -------------------------------------------------------------------------------- */
#define OPN(s) {s, sizeof(s) - 1}
static const struct {
    const char *name;
    uint8_t len;
} elementwise_ops[] = {
    OPN("abs"), OPN("round-nearest-afz"), OPN("round-nearest-even"), OPN("ceil"), OPN("clz"), OPN("convert"), OPN("bitcast-convert"),
    OPN("cos"), OPN("exponential"), OPN("exponential-minus-one"), OPN("floor"), OPN("imag"), OPN("is-finite"), OPN("log"),
    OPN("log-plus-one"), OPN("not"), OPN("negate"), OPN("popcnt"), OPN("real"), OPN("reduce-precision"), OPN("rsqrt"), OPN("logistic"),
    OPN("sign"), OPN("sine"), OPN("sqrt"), OPN("cbrt"), OPN("tan"), OPN("tanh"), OPN("erf"), OPN("add"), OPN("atan2"), OPN("compare"), OPN("complex"),
    OPN("divide"), OPN("maximum"), OPN("minimum"), OPN("multiply"), OPN("power"), OPN("remainder"), OPN("subtract"), OPN("and"), OPN("or"),
    OPN("xor"), OPN("shift-left"), OPN("shift-right-arithmetic"), OPN("shift-right-logical"), OPN("stochastic-convert"),
    OPN("select"), OPN("clamp"), OPN("cosine"), OPN("exp"), OPN("expm1"), OPN("log1p"), {NULL, 0}};

static int streq_len(const char *p, size_t n, const char *s, size_t len) { return len == n && s[0] == p[0] && !memcmp(p, s, n); }

static int ends_with(const char *p, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n > k && !memcmp(p + n - k, suf, k);
}

/* XLA's HloInstruction::FusionKind, as its text and HloInstructionProto.fusion_kind name it
 * (xla/hlo/ir/hlo_instruction.cc, ToString(FusionKind)). */
static const char *const fusion_kinds[] = {"", "kLoop", "kInput", "kOutput", "kCustom"};

hbmi_fusion_kind hbmi_fusion_kind_of(const char *p, size_t n) {
    if (!n) return HBMI_FUSION_NONE;
    for (size_t k = 1; k < sizeof fusion_kinds / sizeof *fusion_kinds; k++)
        if (strlen(fusion_kinds[k]) == n && !memcmp(p, fusion_kinds[k], n)) return (hbmi_fusion_kind)k;
    return HBMI_FUSION_OTHER;
}

const char *hbmi_fusion_kind_name(hbmi_fusion_kind k) {
    return (size_t)k < sizeof fusion_kinds / sizeof *fusion_kinds ? fusion_kinds[k] : "";
}

hbmi_op hbmi_op_lookup(const char *p, size_t n) {
    static const struct {
        const char *name;
        hbmi_op op;
        uint8_t len;
    } fixed[] = {{"parameter", HOP_PARAMETER, sizeof("parameter") - 1},
                 {"constant", HOP_CONSTANT, sizeof("constant") - 1},
                 {"tuple", HOP_TUPLE, sizeof("tuple") - 1},
                 {"get-tuple-element", HOP_GTE, sizeof("get-tuple-element") - 1},
                 {"bitcast", HOP_BITCAST, sizeof("bitcast") - 1},
                 {"while", HOP_WHILE, sizeof("while") - 1},
                 {"call", HOP_CALL, sizeof("call") - 1},
                 {"conditional", HOP_CONDITIONAL, sizeof("conditional") - 1},
                 {"fusion", HOP_FUSION, sizeof("fusion") - 1},
                 {"custom-call", HOP_CUSTOM_CALL, sizeof("custom-call") - 1},
                 {"async-start", HOP_ASYNC_START, sizeof("async-start") - 1},
                 {"async-update", HOP_ASYNC_UPDATE, sizeof("async-update") - 1},
                 {"async-done", HOP_ASYNC_DONE, sizeof("async-done") - 1},
                 {"copy", HOP_COPY, sizeof("copy") - 1},
                 {"copy-start", HOP_COPY_START, sizeof("copy-start") - 1},
                 {"copy-done", HOP_COPY_DONE, sizeof("copy-done") - 1},
                 {"all-gather-start", HOP_LEGACY_START, sizeof("all-gather-start") - 1},
                 {"collective-permute-start", HOP_LEGACY_START, sizeof("collective-permute-start") - 1},
                 {"all-gather-done", HOP_ASYNC_DONE, sizeof("all-gather-done") - 1},
                 {"collective-permute-done", HOP_ASYNC_DONE, sizeof("collective-permute-done") - 1},
                 {"all-reduce-start", HOP_ALL_REDUCE_START, sizeof("all-reduce-start") - 1},
                 {"all-reduce-done", HOP_ALL_REDUCE_DONE, sizeof("all-reduce-done") - 1},
                 {"send", HOP_SEND, sizeof("send") - 1},
                 {"recv", HOP_RECV, sizeof("recv") - 1},
                 {"send-done", HOP_SEND_DONE, sizeof("send-done") - 1},
                 {"recv-done", HOP_RECV_DONE, sizeof("recv-done") - 1},
                 {"dynamic-update-slice", HOP_DUS, sizeof("dynamic-update-slice") - 1},
                 {"scatter", HOP_SCATTER, sizeof("scatter") - 1},
                 {"sort", HOP_SORT, sizeof("sort") - 1},
                 {"triangular-solve", HOP_TRIANGULAR_SOLVE, sizeof("triangular-solve") - 1},
                 {"domain", HOP_DOMAIN, sizeof("domain") - 1},
                 {"opt-barrier", HOP_OPT_BARRIER, sizeof("opt-barrier") - 1},
                 {"optimization-barrier", HOP_OPT_BARRIER, sizeof("optimization-barrier") - 1},
                 {"add-dependency", HOP_ADD_DEPENDENCY, sizeof("add-dependency") - 1}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (streq_len(p, n, fixed[i].name, fixed[i].len)) return fixed[i].op;
    for (size_t i = 0; elementwise_ops[i].name; i++)
        if (streq_len(p, n, elementwise_ops[i].name, elementwise_ops[i].len)) return HOP_ELEMENTWISE;
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
    uint64_t e = s->tiled_elems ? s->tiled_elems : hbmi_shape_elements(s);
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

int hbmi_shape_equal_layout(const hbmi_shape *a, const hbmi_shape *b) {
    if (!hbmi_shape_equal(a, b)) return 0;
    if (a->prim == HBMI_PRIM_TUPLE) {
        for (uint32_t i = 0; i < a->n; i++)
            if (!hbmi_shape_equal_layout(&a->elems[i], &b->elems[i])) return 0;
        return 1;
    }
    return a->layout_key == b->layout_key;
}

uint64_t hbmi_layout_key(const int64_t *m2m, uint32_t n_m2m) {
    int deflt = 1;
    for (uint32_t i = 0; i < n_m2m; i++)
        if (m2m[i] != (int64_t)(n_m2m - 1 - i)) deflt = 0;
    if (deflt) return 0;
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the dimension numbers */
    for (uint32_t i = 0; i < n_m2m; i++) {
        h ^= (uint64_t)m2m[i] + 1;
        h *= 1099511628211ull;
    }
    return h == UINT64_MAX ? h : h + 1;
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
            if (i && i % 5 == 0) { /* ShapeUtil::HumanString's kAnnotationPrintInterval */
                snprintf(tmp, sizeof tmp, "/*index=%u*/", i);
                at = put(buf, cap, at, tmp);
            }
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
