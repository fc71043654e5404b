/* proto_write.c - an hbm_hlo_module as the xla.HloModuleProto XLA would serialize (the fields
 * hbm reads), for tests and benchmarks: the same module through both readers must plan the
 * same, and a profile of any size can be made from text modules. With attrs, what the model
 * keeps no field for is read from each instruction's text line into XLA's own fields (the
 * layouts' dimension order and tiles, backend_config, frontend_attributes, dimensions, slice,
 * dot and convolution dimension numbers, ...), and the module's frontend attributes from its
 * header, so that the text written back from the proto (src/hlo/proto_text.c) says what the
 * original said. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/hlo_internal.h"

#ifdef HBM_HAVE_PROTOBUF_C
#include <protobuf-c/protobuf-c.h>

#include "hbm_xla.pb-c.h"

typedef struct wr {
    hbmi_arena a;
} wr;

static hbm_status oom(void) { return hbmi_error(HBM_ERR_NOMEM, "out of host memory"); }

/* dst = n bytes (zeroed) of the writer's arena, or out of host memory returned */
#define WA(dst, n)                                                                  \
    do {                                                                            \
        size_t wa_n_ = (n);                                                         \
        if (!((dst) = hbmi_arena_alloc(&w->a, wa_n_ ? wa_n_ : 1))) return oom(); \
    } while (0)

static hbm_status wstr(wr *w, hbmi_str s, int unescape, char **out) {
    char *r;
    WA(r, (size_t)s.n + 1);
    size_t k = 0;
    for (uint32_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        if (unescape && ch == '\\' && i + 1 < s.n) {
            char e = s.p[++i];
            ch = e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
        r[k++] = ch;
    }
    r[k] = 0;
    *out = r;
    return HBM_OK;
}

static int xla_type(uint8_t prim) { /* hbm_hlo_prim -> xla.PrimitiveType */
    static const uint8_t map[HBM_HLO_PRIM_COUNT_] = {
        [HBM_HLO_PRED] = 1, [HBM_HLO_S2] = 26, [HBM_HLO_S4] = 21, [HBM_HLO_S8] = 2, [HBM_HLO_S16] = 3,
        [HBM_HLO_S32] = 4, [HBM_HLO_S64] = 5, [HBM_HLO_U2] = 27, [HBM_HLO_U4] = 22, [HBM_HLO_U8] = 6,
        [HBM_HLO_U16] = 7, [HBM_HLO_U32] = 8, [HBM_HLO_U64] = 9, [HBM_HLO_F16] = 10, [HBM_HLO_BF16] = 16,
        [HBM_HLO_F32] = 11, [HBM_HLO_F64] = 12, [HBM_HLO_C64] = 15, [HBM_HLO_C128] = 18, [HBM_HLO_TOKEN] = 17,
        [HBM_HLO_F8E5M2] = 19, [HBM_HLO_F8E4M3FN] = 20, [HBM_HLO_F8E4M3B11FNUZ] = 23, [HBM_HLO_F8E5M2FNUZ] = 24,
        [HBM_HLO_F8E4M3FNUZ] = 25, [HBM_HLO_F8E4M3] = 28, [HBM_HLO_F8E3M4] = 29, [HBM_HLO_F8E8M0FNU] = 33,
        [HBM_HLO_F4E2M1FN] = 32, [HBM_HLO_OPAQUE] = 14};
    return prim == HBMI_PRIM_TUPLE ? 13 : prim < HBM_HLO_PRIM_COUNT_ ? map[prim] : 0;
}

static hbm_status wshape(wr *w, const hbmi_shape *s, Hbmpb__ShapeProto **out) {
    Hbmpb__ShapeProto *sp;
    WA(sp, sizeof *sp);
    hbmpb__shape_proto__init(sp);
    *out = sp;
    sp->element_type = xla_type(s->prim);
    if (s->prim == HBMI_PRIM_TUPLE) {
        sp->n_tuple_shapes = s->n;
        WA(sp->tuple_shapes, sizeof *sp->tuple_shapes * s->n);
        for (uint32_t i = 0; i < s->n; i++) TRY(wshape(w, &s->elems[i], &sp->tuple_shapes[i]));
        return HBM_OK;
    }
    sp->n_dimensions = s->n;
    sp->dimensions = s->dims;
    if (s->dynamic && s->n) { /* which dimension is not kept: mark all (sizes are the bounds) */
        sp->n_is_dynamic_dimension = s->n;
        WA(sp->is_dynamic_dimension, sizeof *sp->is_dynamic_dimension * s->n);
        for (uint32_t i = 0; i < s->n; i++) sp->is_dynamic_dimension[i] = 1;
    }
    if (s->elem_bits || s->memory_space) {
        Hbmpb__LayoutProto *l;
        WA(l, sizeof *l);
        hbmpb__layout_proto__init(l);
        l->element_size_in_bits = s->elem_bits;
        l->memory_space = s->memory_space;
        sp->layout = l;
    }
    return HBM_OK;
}

static hbm_status walias(wr *w, const hbmi_alias *a, Hbmpb__OutputOperandAliasing **out) {
    Hbmpb__OutputOperandAliasing *o;
    WA(o, sizeof *o);
    hbmpb__output_operand_aliasing__init(o);
    o->n_output_shape_index = a->out_len;
    WA(o->output_shape_index, sizeof(int64_t) * (a->out_len + 1u));
    o->n_operand_shape_index = a->in_len;
    WA(o->operand_shape_index, sizeof(int64_t) * (a->in_len + 1u));
    for (int i = 0; i < a->out_len; i++) o->output_shape_index[i] = a->out[i];
    for (int i = 0; i < a->in_len; i++) o->operand_shape_index[i] = a->in[i];
    o->operand_index = a->operand;
    *out = o;
    return HBM_OK;
}


/* --- the text line's attributes into XLA's fields ---------------------------------------------- */
static int name_ch(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-' || c == '$';
}

/* past the value at p (balanced brackets, strings), up to a depth-0 ',' or e */
static const char *skip_val(const char *p, const char *e) {
    int d = 0;
    while (p < e) {
        char c = *p;
        if (c == '"') {
            for (p++; p < e && *p != '"'; p++)
                if (*p == '\\') p++;
            p++;
            continue;
        }
        if (c == '(' || c == '[' || c == '{') d++;
        else if (c == ')' || c == ']' || c == '}') {
            if (!d) return p;
            d--;
        } else if (c == ',' && !d) {
            return p;
        }
        p++;
    }
    return p > e ? e : p;
}

/* the integers at *p ("1,0", "{1,0}" after the brace): into a (n at most), count */
static size_t ints(const char **pp, const char *e, int64_t *a, size_t n) {
    const char *p = *pp;
    size_t k = 0;
    while (p < e && k < n) {
        while (p < e && (*p == ' ' || *p == ',')) p++;
        if (p >= e || !((*p >= '0' && *p <= '9') || *p == '-')) break;
        int neg = *p == '-';
        if (neg) p++;
        uint64_t v = 0; /* wraps on absurd input rather than overflowing */
        while (p < e && *p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p++ - '0');
        a[k++] = (int64_t)(neg ? 0 - v : v);
    }
    *pp = p;
    return k;
}

static hbm_status wints(wr *w, const char *p, const char *e, int64_t **out, size_t *n) {
    int64_t tmp[64];
    if (*p == '{') p++;
    size_t k = ints(&p, e, tmp, 64);
    int64_t *r;
    WA(r, sizeof *r * (k + 1));
    memcpy(r, tmp, sizeof *r * k);
    *out = r, *n = k;
    return HBM_OK;
}

/* the layout of each array of shape s from its text at *pp: {1,0:T(8,128)(2,1)...} */
static hbm_status wlayout(wr *w, Hbmpb__ShapeProto *sp, const char **pp, const char *e, int depth) {
    const char *p = *pp;
    while (p < e && *p == ' ') p++;
    if (sp->element_type == 13) {
        if (p < e && *p == '(') p++;
        for (size_t i = 0; i < sp->n_tuple_shapes && depth < 64; i++) {
            TRY(wlayout(w, sp->tuple_shapes[i], &p, e, depth + 1));
            while (p < e && (*p == ',' || *p == ' ')) p++;
        }
        if (p < e && *p == ')') p++;
        *pp = p;
        return HBM_OK;
    }
    while (p < e && *p != '[') p++;
    while (p < e && *p != ']') p++;
    if (p < e) p++;
    if (p < e && *p == '{') {
        p++;
        Hbmpb__LayoutProto *l = sp->layout;
        if (!l) {
            WA(l, sizeof *l);
            hbmpb__layout_proto__init(l), sp->layout = l;
        }
        int64_t m2m[64];
        size_t n = ints(&p, e, m2m, 64);
        WA(l->minor_to_major, sizeof *m2m * (n + 1));
        memcpy(l->minor_to_major, m2m, sizeof *m2m * n);
        l->n_minor_to_major = n;
        if (p < e && *p == ':') p++;
        while (p < e && *p != '}') {
            if (*p == 'T' && p + 1 < e && p[1] == '(') {
                p++;
                Hbmpb__TileProto *tl[16];
                size_t nt = 0;
                while (p < e && *p == '(' && nt < 16) {
                    p++;
                    int64_t td[16];
                    size_t k = 0;
                    while (p < e && *p != ')' && k < 16) {
                        if (*p == '*') td[k++] = INT64_MIN, p++;
                        else if (!ints(&p, e, &td[k], 1)) break;
                        else k++;
                        if (p < e && *p == ',') p++;
                    }
                    while (p < e && *p != ')') p++;
                    if (p < e) p++;
                    Hbmpb__TileProto *t;
                    int64_t *d;
                    WA(t, sizeof *t);
                    WA(d, sizeof *d * (k + 1));
                    hbmpb__tile_proto__init(t);
                    memcpy(d, td, sizeof *d * k);
                    t->dimensions = d;
                    t->n_dimensions = k;
                    tl[nt++] = t;
                }
                WA(l->tiles, sizeof *l->tiles * (nt + 1));
                memcpy(l->tiles, tl, sizeof *tl * nt);
                l->n_tiles = nt;
                continue;
            }
            if (*p == '(') p = skip_val(p + 1, e) + (p < e); /* E(4), S(1) (kept by the model), others */
            else p++;
        }
        if (p < e) p++;
    }
    *pp = p;
    return HBM_OK;
}

/* C escapes undone (\n \t \" \\ \ooo) */
static hbm_status unesc(wr *w, const char *p, size_t n, char **out, size_t *len) {
    char *r;
    WA(r, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            c = p[++i];
            if (c >= '0' && c <= '7') {
                int v = 0;
                for (int d = 0; d < 3 && i < n && p[i] >= '0' && p[i] <= '7'; d++) v = v * 8 + (p[i++] - '0');
                i--;
                c = (char)v;
            } else {
                c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
            }
        }
        r[k++] = c;
    }
    r[k] = 0;
    *len = k;
    *out = r;
    return HBM_OK;
}

/* frontend_attributes={a="1",b="2"} */
static hbm_status wfront(wr *w, const char *p, const char *e, Hbmpb__FrontendAttributes **out) {
    Hbmpb__FrontendAttributes *fa;
    Hbmpb__FrontendAttributes__MapEntry *ent[64];
    size_t n = 0;
    WA(fa, sizeof *fa);
    hbmpb__frontend_attributes__init(fa);
    if (p < e && *p == '{') p++;
    while (p < e && *p != '}' && n < 64) {
        while (p < e && (*p == ',' || *p == ' ')) p++;
        const char *k = p;
        while (p < e && name_ch((unsigned char)*p)) p++;
        if (p == k || p >= e || *p != '=') break;
        size_t kl = (size_t)(p - k), vl;
        p++;
        const char *v = p, *ve = skip_val(p, e);
        if (ve - v >= 2 && *v == '"') v++, ve--;
        Hbmpb__FrontendAttributes__MapEntry *me;
        WA(me, sizeof *me);
        hbmpb__frontend_attributes__map_entry__init(me);
        TRY(unesc(w, k, kl, &me->key, &vl));
        TRY(unesc(w, v, (size_t)(ve - v), &me->value, &vl));
        ent[n++] = me;
        p = skip_val(p, e);
    }
    WA(fa->map, sizeof *fa->map * (n + 1));
    memcpy(fa->map, ent, sizeof *ent * n), fa->n_map = n;
    *out = fa;
    return HBM_OK;
}

/* dim_labels=b01f_01io->b01f; *out NULL where the labels are not those */
static hbm_status wconv(wr *w, const char *p, const char *e, Hbmpb__ConvolutionDimensionNumbers **out) {
    *out = NULL;
    const char *u = memchr(p, '_', (size_t)(e - p)), *a = u ? memchr(u, '-', (size_t)(e - u)) : NULL;
    if (!u || !a || a + 2 > e || a[1] != '>') return HBM_OK;
    size_t r = (size_t)(u - p);
    if (r < 2 || r > 11 || (size_t)(a - u - 1) != r || (size_t)(e - a - 2) != r) return HBM_OK;
    Hbmpb__ConvolutionDimensionNumbers *d;
    int64_t *is, *ks, *os;
    WA(d, sizeof *d);
    WA(is, 8 * r);
    WA(ks, 8 * r);
    WA(os, 8 * r);
    hbmpb__convolution_dimension_numbers__init(d);
    d->input_spatial_dimensions = is, d->kernel_spatial_dimensions = ks, d->output_spatial_dimensions = os;
    d->n_input_spatial_dimensions = d->n_kernel_spatial_dimensions = d->n_output_spatial_dimensions = r - 2;
    for (size_t i = 0; i < r; i++) {
        char ci = p[i], ck = u[1 + i], co = a[2 + i];
        if (ci == 'b') d->input_batch_dimension = (int64_t)i;
        else if (ci == 'f') d->input_feature_dimension = (int64_t)i;
        else if (ci >= '0' && ci <= '9' && (size_t)(ci - '0') < r - 2) is[ci - '0'] = (int64_t)i;
        if (ck == 'i') d->kernel_input_feature_dimension = (int64_t)i;
        else if (ck == 'o') d->kernel_output_feature_dimension = (int64_t)i;
        else if (ck >= '0' && ck <= '9' && (size_t)(ck - '0') < r - 2) ks[ck - '0'] = (int64_t)i;
        if (co == 'b') d->output_batch_dimension = (int64_t)i;
        else if (co == 'f') d->output_feature_dimension = (int64_t)i;
        else if (co >= '0' && co <= '9' && (size_t)(co - '0') < r - 2) os[co - '0'] = (int64_t)i;
    }
    *out = d;
    return HBM_OK;
}

static int key_is(const char *k, size_t n, const char *w) { return n == strlen(w) && !memcmp(k, w, n); }

/* xa as the instruction's unknown fields, as protobuf-c keeps a field it does not know: its
 * number and wire type, then its bytes as on the wire (a length prefix included) */
static hbm_status wunknown(wr *w, Hbmpb__HloInstructionProto *ip, const Hbmpb__HloInstructionAttrs *xa) {
    size_t n = hbmpb__hlo_instruction_attrs__get_packed_size(xa), k = 0, i = 0;
    if (!n) return HBM_OK;
    uint8_t *b;
    ProtobufCMessageUnknownField *u;
    WA(b, n);
    WA(u, sizeof *u * n); /* at most one field a byte */
    hbmpb__hlo_instruction_attrs__pack(xa, b);
    while (i < n) { /* bytes protobuf-c wrote itself; ones it could not read back: no unknown fields */
        uint64_t tag, v;
        if (hbmi_varint_get(b, n, &i, &tag) <= 0) return HBM_OK;
        size_t at = i;
        switch (tag & 7) {
        case 0: if (hbmi_varint_get(b, n, &i, &v) <= 0) return HBM_OK; break;
        case 1: i += 8; break;
        case 5: i += 4; break;
        case 2: if (hbmi_varint_get(b, n, &i, &v) <= 0 || v > n - i) return HBM_OK; i += (size_t)v; break;
        default: return HBM_OK;
        }
        if (i > n) return HBM_OK;
        u[k].tag = (uint32_t)(tag >> 3);
        u[k].wire_type = (ProtobufCWireType)(tag & 7);
        u[k].len = i - at;
        u[k].data = b + at;
        k++;
    }
    ip->base.n_unknown_fields = (unsigned)k;
    ip->base.unknown_fields = u;
    return HBM_OK;
}

/* the attributes of instruction in (its text line) into ip, those only the text prints as its
 * unknown fields (HloInstructionAttrs) */
static hbm_status wattrs(wr *w, const hbm_hlo_module *m, const hbmi_instr *in, Hbmpb__HloInstructionProto *ip) {
    Hbmpb__HloInstructionAttrs xa_ = HBMPB__HLO_INSTRUCTION_ATTRS__INIT, *xa = &xa_;
    const char *s = m->text + in->off, *end = m->text + m->len, *e = s;
    while (e < end && *e != '\n') e++;
    const char *p = in->opcode.p;
    if (p < s || p >= e) return HBM_OK;
    /* the shape's layouts: after '=' up to the opcode */
    const char *q = memchr(s, '=', (size_t)(p - s));
    if (q && ip->shape) {
        q++;
        TRY(wlayout(w, ip->shape, &q, p, 0));
    }
    p += in->opcode.n;
    if (p >= e || *p != '(') return HBM_OK;
    for (p++; p < e;) { /* past the operands */
        p = skip_val(p, e);
        if (p >= e || *p != ',') break;
        p++;
    }
    if (p >= e || *p != ')') return HBM_OK;
    p++;
    Hbmpb__DotDimensionNumbers *dd = NULL;
    while (p < e && *p == ',') {
        p++;
        while (p < e && *p == ' ') p++;
        const char *k = p;
        while (p < e && name_ch((unsigned char)*p)) p++;
        size_t kl = (size_t)(p - k);
        if (p >= e || *p != '=') break;
        const char *v = ++p, *ve = skip_val(p, e);
        p = ve;
        size_t n;
        if (key_is(k, kl, "backend_config")) {
            char *r;
            int quoted = *v == '"' && ve - v >= 2;
            TRY(unesc(w, quoted ? v + 1 : v, quoted ? (size_t)(ve - v - 2) : 0, &r, &n));
            if (!quoted) n = 0;
            if (*v == '{') { /* a JSON object, as it is */
                WA(r, (size_t)(ve - v) + 1);
                memcpy(r, v, (size_t)(ve - v)), n = (size_t)(ve - v);
            }
            ip->backend_config.data = (uint8_t *)r;
            ip->backend_config.len = n;
        } else if (key_is(k, kl, "frontend_attributes")) {
            TRY(wfront(w, v, ve, &ip->frontend_attributes));
        } else if (key_is(k, kl, "dimensions")) {
            TRY(wints(w, v, ve, &xa->dimensions, &xa->n_dimensions));
        } else if (key_is(k, kl, "dynamic_slice_sizes")) {
            TRY(wints(w, v, ve, &xa->dynamic_slice_sizes, &xa->n_dynamic_slice_sizes));
        } else if (key_is(k, kl, "fft_length")) {
            TRY(wints(w, v, ve, &xa->fft_length, &xa->n_fft_length));
        } else if (key_is(k, kl, "slice")) {
            Hbmpb__HloInstructionAttrs__SliceDimensions *sd[64];
            size_t ns = 0;
            for (const char *x = v; x < ve && ns < 64; x++) {
                if (*x != '[') continue;
                int64_t t[3] = {0, 0, 1};
                x++;
                size_t c = 0;
                while (x < ve && *x != ']' && c < 3) {
                    if (!ints(&x, ve, &t[c], 1)) break;
                    c++;
                    if (x < ve && *x == ':') x++;
                }
                if (c == 3 && x < ve && *x != ']') continue; /* not a slice */
                Hbmpb__HloInstructionAttrs__SliceDimensions *d;
                WA(d, sizeof *d);
                hbmpb__hlo_instruction_attrs__slice_dimensions__init(d);
                d->start = t[0], d->limit = t[1], d->stride = t[2];
                sd[ns++] = d;
            }
            WA(xa->slice_dimensions, sizeof *sd * (ns + 1));
            memcpy(xa->slice_dimensions, sd, sizeof *sd * ns), xa->n_slice_dimensions = ns;
        } else if (kl > 5 && !memcmp(k + kl - 5, "_dims", 5) && (!memcmp(k, "lhs_", 4) || !memcmp(k, "rhs_", 4))) {
            if (!dd) {
                WA(dd, sizeof *dd);
                hbmpb__dot_dimension_numbers__init(dd), xa->dot_dimension_numbers = dd;
            }
            if (key_is(k, kl, "lhs_contracting_dims")) TRY(wints(w, v, ve, &dd->lhs_contracting_dimensions, &dd->n_lhs_contracting_dimensions));
            else if (key_is(k, kl, "rhs_contracting_dims")) TRY(wints(w, v, ve, &dd->rhs_contracting_dimensions, &dd->n_rhs_contracting_dimensions));
            else if (key_is(k, kl, "lhs_batch_dims")) TRY(wints(w, v, ve, &dd->lhs_batch_dimensions, &dd->n_lhs_batch_dimensions));
            else if (key_is(k, kl, "rhs_batch_dims")) TRY(wints(w, v, ve, &dd->rhs_batch_dimensions, &dd->n_rhs_batch_dimensions));
        } else if (key_is(k, kl, "dim_labels")) {
            TRY(wconv(w, v, ve, &xa->convolution_dimension_numbers));
        } else if (key_is(k, kl, "kind") && in->op == HOP_FUSION) {
            char *d;
            WA(d, (size_t)(ve - v) + 1);
            memcpy(d, v, (size_t)(ve - v)), ip->fusion_kind = d;
        } else if (key_is(k, kl, "direction")) {
            char *d;
            WA(d, (size_t)(ve - v) + 1);
            memcpy(d, v, (size_t)(ve - v)), xa->comparison_direction = d;
        } else if (key_is(k, kl, "channel_id")) {
            const char *x = v;
            ints(&x, ve, &xa->channel_id, 1);
        } else if (key_is(k, kl, "constrain_layout")) {
            xa->constrain_layout = ve - v == 4 && !memcmp(v, "true", 4);
        }
    }
    return wunknown(w, ip, xa);
}

/* the header's frontend_attributes={...} */
static hbm_status wmodule_front(wr *w, const hbm_hlo_module *m, Hbmpb__FrontendAttributes **out) {
    const char *s = m->text, *e = memchr(s, '\n', m->len);
    static const char key[] = "frontend_attributes=";
    if (!e) e = s + m->len;
    int d = 0;
    for (const char *p = s; p + sizeof key - 1 < e; p++) {
        if (*p == '{' || *p == '(') d++;
        else if ((*p == '}' || *p == ')') && d) d--;
        else if (!d && !memcmp(p, key, sizeof key - 1) && (p[-1] == ' ' || p[-1] == ','))
            return wfront(w, p + sizeof key - 1, skip_val(p + sizeof key - 1, e), out);
    }
    return HBM_OK;
}

/* rows of the text's table title: each "ID ..." with ID its 1-based position (as XLA prints
 * them); their count, or 0 where the table is absent or its ids are not positions */
static size_t table_rows(const hbm_hlo_module *m, const char *title, const char **first) {
    const char *t = *first = hbmi_hlo_table(m, title), *end = m->text + m->len;
    size_t n = 0;
    while (t && t < end && *t != '\n') {
        char *e;
        long k = strtol(t, &e, 10);
        if (e == t || k != (long)n + 1 || k >= INT32_MAX) return 0;
        n++;
        while (t < end && *t != '\n') t++;
        t++;
    }
    return t ? n : 0;
}

static const char *row_rest(const char *t) { /* past the row's id */
    while (*t >= '0' && *t <= '9') t++;
    return t;
}

static const char *next_row(const char *t) {
    while (*t && *t != '\n') t++;
    return *t ? t + 1 : t;
}

static int32_t id_in(long v, size_t n) { return v > 0 && (size_t)v <= n ? (int32_t)v : 0; }

/* the text's StackFrames, FileLocations, FileNames and FunctionNames tables as XLA's
 * StackFrameIndexProto (ids: 1-based positions in its lists, as in the text); NULL where the
 * text has no frames */
static hbm_status wframes(wr *w, const hbm_hlo_module *m, Hbmpb__StackFrameIndexProto **out) {
    const char *fn, *fu, *lo, *sf;
    size_t n_fn = table_rows(m, "FileNames", &fn), n_fu = table_rows(m, "FunctionNames", &fu);
    size_t n_lo = table_rows(m, "FileLocations", &lo), n_sf = table_rows(m, "StackFrames", &sf);
    *out = NULL;
    if (!n_fn || !n_lo || !n_sf) return HBM_OK;
    Hbmpb__StackFrameIndexProto *x;
    WA(x, sizeof *x);
    hbmpb__stack_frame_index_proto__init(x);
    WA(x->file_names, sizeof *x->file_names * n_fn);
    WA(x->function_names, sizeof *x->function_names * (n_fu + 1));
    WA(x->file_locations, sizeof *x->file_locations * n_lo);
    WA(x->stack_frames, sizeof *x->stack_frames * n_sf);
    for (size_t k = 0; k < n_fn; k++, fn = next_row(fn)) {
        const char *q;
        size_t n = hbmi_hlo_row_string(row_rest(fn), &q);
        TRY(wstr(w, (hbmi_str){q, (uint32_t)n}, 1, &x->file_names[k]));
    }
    for (size_t k = 0; k < n_fu; k++, fu = next_row(fu)) {
        const char *q;
        size_t n = hbmi_hlo_row_string(row_rest(fu), &q);
        TRY(wstr(w, (hbmi_str){q, (uint32_t)n}, 1, &x->function_names[k]));
    }
    for (size_t k = 0; k < n_lo; k++, lo = next_row(lo)) {
        Hbmpb__StackFrameIndexProto__FileLocation *l;
        WA(l, sizeof *l);
        hbmpb__stack_frame_index_proto__file_location__init(l);
        l->file_name_id = id_in(hbmi_hlo_row_field(lo, "file_name_id="), n_fn);
        l->function_name_id = id_in(hbmi_hlo_row_field(lo, "function_name_id="), n_fu);
        long line = hbmi_hlo_row_field(lo, "line=");
        l->line = line > 0 && line < INT32_MAX ? (int32_t)line : 0;
        x->file_locations[k] = l;
    }
    for (size_t k = 0; k < n_sf; k++, sf = next_row(sf)) {
        Hbmpb__StackFrameIndexProto__StackFrame *f;
        WA(f, sizeof *f);
        hbmpb__stack_frame_index_proto__stack_frame__init(f);
        f->file_location_id = id_in(hbmi_hlo_row_field(sf, "file_location_id="), n_lo);
        f->parent_frame_id = id_in(hbmi_hlo_row_field(sf, "parent_frame_id="), n_sf);
        x->stack_frames[k] = f;
    }
    x->n_file_names = n_fn;
    x->n_function_names = n_fu;
    x->n_file_locations = n_lo;
    x->n_stack_frames = n_sf;
    *out = x;
    return HBM_OK;
}

/* the module's proto, in the writer's arena */
static hbm_status wmodule(wr *w, const hbm_hlo_module *m, int attrs, Hbmpb__HloModuleProto **out) {
    Hbmpb__HloModuleProto *mp;
    WA(mp, sizeof *mp);
    hbmpb__hlo_module_proto__init(mp);
    TRY(wstr(w, m->name, 0, &mp->name));
    if (attrs && m->text) TRY(wmodule_front(w, m, &mp->frontend_attributes));
    if (m->text && !m->pb_module) TRY(wframes(w, m, &mp->stack_frame_index));
    size_t n_frames = mp->stack_frame_index ? mp->stack_frame_index->n_stack_frames : 0;
    mp->n_computations = m->n_comps;
    WA(mp->computations, sizeof *mp->computations * m->n_comps);
    mp->entry_computation_id = m->entry + 1;
    if (m->n_comps) TRY(wstr(w, m->comps[m->entry].name, 0, &mp->entry_computation_name)); /* as XLA writes it */
    Hbmpb__HloScheduleProto *sch = NULL;
    if (m->is_scheduled) {
        WA(sch, sizeof *sch);
        hbmpb__hlo_schedule_proto__init(sch);
        sch->n_sequences = m->n_comps;
        WA(sch->sequences, sizeof *sch->sequences * m->n_comps);
        mp->schedule = sch;
    }
    int64_t base = 1;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        const hbmi_comp *c = &m->comps[ci];
        Hbmpb__HloComputationProto *cp;
        WA(cp, sizeof *cp);
        hbmpb__hlo_computation_proto__init(cp);
        mp->computations[ci] = cp;
        TRY(wstr(w, c->name, 0, &cp->name));
        cp->id = ci + 1;
        cp->root_id = base + c->root;
        if (c->exec_thread.n) TRY(wstr(w, c->exec_thread, 1, &cp->execution_thread));
        cp->n_instructions = c->n;
        WA(cp->instructions, sizeof *cp->instructions * c->n);
        int64_t *seq = NULL;
        if (sch) WA(seq, sizeof *seq * c->n);
        for (uint32_t j = 0; j < c->n; j++) {
            const hbmi_instr *in = &c->ins[j];
            Hbmpb__HloInstructionProto *ip;
            WA(ip, sizeof *ip);
            hbmpb__hlo_instruction_proto__init(ip);
            cp->instructions[j] = ip;
            ip->id = base + j;
            if (seq) seq[j] = ip->id;
            TRY(wstr(w, in->name, 0, &ip->name));
            TRY(wstr(w, in->opcode, 0, &ip->opcode));
            TRY(wshape(w, in->shape, &ip->shape));
            if (in->param_no >= 0) ip->parameter_number = in->param_no;
            if (in->gte_index >= 0) ip->tuple_index = in->gte_index;
            const char *fk = hbmi_fusion_kind_name(in->fusion_kind);
            if (fk[0]) TRY(wstr(w, (hbmi_str){fk, (uint32_t)strlen(fk)}, 0, &ip->fusion_kind));
            if (in->target.n) TRY(wstr(w, in->target, 1, &ip->custom_call_target));
            int32_t frame = n_frames ? id_in(in->meta_frame, n_frames) : 0;
            if (in->meta_op_name.n || in->meta_source_file.n || in->meta_source_line || frame) {
                Hbmpb__OpMetadata *md;
                WA(md, sizeof *md);
                hbmpb__op_metadata__init(md);
                TRY(wstr(w, in->meta_op_name, 1, &md->op_name));
                /* a file the frames gave: the frame alone, as XLA writes it */
                int walked = frame && in->meta_walked;
                if (walked) md->source_file = "";
                else TRY(wstr(w, in->meta_source_file, 1, &md->source_file));
                md->source_line = walked ? 0 : in->meta_source_line;
                md->stack_frame_id = frame;
                ip->metadata = md;
            }
            ip->n_operand_ids = in->n_ops;
            WA(ip->operand_ids, sizeof(int64_t) * (in->n_ops + 1u));
            for (uint32_t k = 0; k < in->n_ops; k++) ip->operand_ids[k] = base + in->ops[k];
            ip->n_called_computation_ids = in->n_called;
            WA(ip->called_computation_ids, sizeof(int64_t) * (in->n_called + 1u));
            for (uint32_t k = 0, q = 0; k < in->n_called; k++) {
                if (in->op == HOP_WHILE) { /* XLA's order: body, condition */
                    for (uint32_t r = 0; r < in->n_called; r++)
                        if (in->called_role[r] == (q == 0 ? HBMI_CALLED_BODY : HBMI_CALLED_CONDITION))
                            ip->called_computation_ids[q] = in->called[r] + 1;
                    q++;
                } else {
                    ip->called_computation_ids[k] = in->called[k] + 1;
                }
            }
            ip->n_output_operand_aliasing = in->n_alias;
            WA(ip->output_operand_aliasing, sizeof *ip->output_operand_aliasing * (in->n_alias + 1u));
            for (uint32_t k = 0; k < in->n_alias; k++) TRY(walias(w, &in->alias[k], &ip->output_operand_aliasing[k]));
            if (attrs && m->text && in->off < m->len) TRY(wattrs(w, m, in, ip));
        }
        if (sch) {
            Hbmpb__HloScheduleProto__SequencesEntry *e;
            Hbmpb__HloScheduleProto__InstructionSequence *s;
            WA(e, sizeof *e);
            WA(s, sizeof *s);
            hbmpb__hlo_schedule_proto__sequences_entry__init(e);
            hbmpb__hlo_schedule_proto__instruction_sequence__init(s);
            s->n_instruction_ids = c->n;
            s->instruction_ids = seq;
            e->key = ci + 1;
            e->value = s;
            sch->sequences[ci] = e;
        }
        base += c->n;
    }
    if (m->n_io_alias) {
        Hbmpb__HloInputOutputAliasProto *io;
        WA(io, sizeof *io);
        hbmpb__hlo_input_output_alias_proto__init(io);
        io->n_entries = m->n_io_alias;
        WA(io->entries, sizeof *io->entries * m->n_io_alias);
        for (uint32_t k = 0; k < m->n_io_alias; k++) {
            Hbmpb__HloInputOutputAliasProto__AliasEntryProto *e;
            Hbmpb__OutputOperandAliasing *a;
            WA(e, sizeof *e);
            TRY(walias(w, &m->io_alias[k], &a));
            hbmpb__hlo_input_output_alias_proto__alias_entry_proto__init(e);
            e->n_output_shape_index = a->n_output_shape_index;
            e->output_shape_index = a->output_shape_index;
            e->parameter_number = a->operand_index;
            e->n_parameter_shape_index = a->n_operand_shape_index;
            e->parameter_shape_index = a->operand_shape_index;
            io->entries[k] = e;
        }
        mp->input_output_alias = io;
    }
    if (m->n_donors) {
        Hbmpb__HloBufferDonorProto *bd;
        WA(bd, sizeof *bd);
        hbmpb__hlo_buffer_donor_proto__init(bd);
        bd->n_entries = m->n_donors;
        WA(bd->entries, sizeof *bd->entries * m->n_donors);
        for (uint32_t k = 0; k < m->n_donors; k++) {
            Hbmpb__HloBufferDonorProto__BufferDonorEntryProto *e;
            Hbmpb__OutputOperandAliasing *a;
            WA(e, sizeof *e);
            TRY(walias(w, &m->donors[k], &a));
            hbmpb__hlo_buffer_donor_proto__buffer_donor_entry_proto__init(e);
            e->parameter_number = a->operand_index;
            e->n_parameter_shape_index = a->n_operand_shape_index;
            e->parameter_shape_index = a->operand_shape_index;
            bd->entries[k] = e;
        }
        mp->buffer_donor = bd;
    }
    *out = mp;
    return HBM_OK;
}

hbm_status hbmi_proto_write_module(const hbm_hlo_module *m, int attrs, uint8_t **out, size_t *len) {
    wr w = {{0}};
    Hbmpb__HloModuleProto *mp = NULL;
    hbm_status s = wmodule(&w, m, attrs, &mp);
    if (!s) {
        *len = hbmpb__hlo_module_proto__get_packed_size(mp);
        *out = hbmi_malloc(*len ? *len : 1);
        if (!*out) s = oom();
        else hbmpb__hlo_module_proto__pack(mp, *out);
    }
    hbmi_arena_free(&w.a);
    return s;
}
#else
hbm_status hbmi_proto_write_module(const hbm_hlo_module *m, int attrs, uint8_t **out, size_t *len) {
    (void)m, (void)attrs, (void)out, (void)len;
    return hbmi_error(HBM_ERR_NOT_AVAILABLE, "hbm was built without protobuf-c");
}
#endif
