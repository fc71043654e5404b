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
    int fail;
} wr;

static void *wa(wr *w, size_t n) {
    void *p = hbmi_arena_alloc(&w->a, n ? n : 1);
    if (!p) w->fail = 1;
    return p;
}

static char *wstr(wr *w, hbmi_str s, int unescape) {
    char *r = wa(w, (size_t)s.n + 1);
    if (!r) return (char *)"";
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
    return r;
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

static Hbmpb__ShapeProto *wshape(wr *w, const hbmi_shape *s) {
    Hbmpb__ShapeProto *sp = wa(w, sizeof *sp);
    if (!sp) return NULL;
    hbmpb__shape_proto__init(sp);
    sp->element_type = xla_type(s->prim);
    if (s->prim == HBMI_PRIM_TUPLE) {
        sp->n_tuple_shapes = s->n;
        sp->tuple_shapes = wa(w, sizeof *sp->tuple_shapes * s->n);
        for (uint32_t i = 0; sp->tuple_shapes && i < s->n; i++) sp->tuple_shapes[i] = wshape(w, &s->elems[i]);
        return sp;
    }
    sp->n_dimensions = s->n;
    sp->dimensions = s->dims;
    if (s->dynamic && s->n) { /* which dimension is not kept: mark all (sizes are the bounds) */
        sp->n_is_dynamic_dimension = s->n;
        sp->is_dynamic_dimension = wa(w, sizeof *sp->is_dynamic_dimension * s->n);
        for (uint32_t i = 0; sp->is_dynamic_dimension && i < s->n; i++) sp->is_dynamic_dimension[i] = 1;
    }
    if (s->elem_bits || s->memory_space) {
        Hbmpb__LayoutProto *l = wa(w, sizeof *l);
        if (!l) return sp;
        hbmpb__layout_proto__init(l);
        l->element_size_in_bits = s->elem_bits;
        l->memory_space = s->memory_space;
        sp->layout = l;
    }
    return sp;
}

static Hbmpb__OutputOperandAliasing *walias(wr *w, const hbmi_alias *a) {
    Hbmpb__OutputOperandAliasing *o = wa(w, sizeof *o);
    if (!o) return NULL;
    hbmpb__output_operand_aliasing__init(o);
    o->n_output_shape_index = a->out_len;
    o->output_shape_index = wa(w, sizeof(int64_t) * (a->out_len + 1u));
    o->n_operand_shape_index = a->in_len;
    o->operand_shape_index = wa(w, sizeof(int64_t) * (a->in_len + 1u));
    if (!o->output_shape_index || !o->operand_shape_index) return o;
    for (int i = 0; i < a->out_len; i++) o->output_shape_index[i] = a->out[i];
    for (int i = 0; i < a->in_len; i++) o->operand_shape_index[i] = a->in[i];
    o->operand_index = a->operand;
    return o;
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

static int64_t *wints(wr *w, const char *p, const char *e, size_t *n) {
    int64_t tmp[64];
    if (*p == '{') p++;
    *n = ints(&p, e, tmp, 64);
    int64_t *r = wa(w, sizeof *r * (*n + 1));
    if (r) memcpy(r, tmp, sizeof *r * *n);
    else *n = 0;
    return r;
}

/* the layout of each array of shape s from its text at *pp: {1,0:T(8,128)(2,1)...} */
static void wlayout(wr *w, Hbmpb__ShapeProto *sp, const char **pp, const char *e, int depth) {
    const char *p = *pp;
    while (p < e && *p == ' ') p++;
    if (sp->element_type == 13) {
        if (p < e && *p == '(') p++;
        for (size_t i = 0; i < sp->n_tuple_shapes && depth < 64; i++) {
            wlayout(w, sp->tuple_shapes[i], &p, e, depth + 1);
            while (p < e && (*p == ',' || *p == ' ')) p++;
        }
        if (p < e && *p == ')') p++;
        *pp = p;
        return;
    }
    while (p < e && *p != '[') p++;
    while (p < e && *p != ']') p++;
    if (p < e) p++;
    if (p < e && *p == '{') {
        p++;
        Hbmpb__LayoutProto *l = sp->layout;
        if (!l && (l = wa(w, sizeof *l)) != NULL) hbmpb__layout_proto__init(l), sp->layout = l;
        int64_t m2m[64];
        size_t n = ints(&p, e, m2m, 64);
        if (l && (l->minor_to_major = wa(w, sizeof *m2m * (n + 1))) != NULL) {
            memcpy(l->minor_to_major, m2m, sizeof *m2m * n);
            l->n_minor_to_major = n;
        }
        if (p < e && *p == ':') p++;
        while (p < e && *p != '}') {
            if (*p == 'T' && p + 1 < e && p[1] == '(' && l) {
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
                    Hbmpb__TileProto *t = wa(w, sizeof *t);
                    int64_t *d = wa(w, sizeof *d * (k + 1));
                    if (!t || !d) break;
                    hbmpb__tile_proto__init(t);
                    memcpy(d, td, sizeof *d * k);
                    t->dimensions = d;
                    t->n_dimensions = k;
                    tl[nt++] = t;
                }
                if ((l->tiles = wa(w, sizeof *l->tiles * (nt + 1))) != NULL) {
                    memcpy(l->tiles, tl, sizeof *tl * nt);
                    l->n_tiles = nt;
                }
                continue;
            }
            if (*p == '(') p = skip_val(p + 1, e) + (p < e); /* E(4), S(1) (kept by the model), others */
            else p++;
        }
        if (p < e) p++;
    }
    *pp = p;
}

/* C escapes undone (\n \t \" \\ \ooo) */
static char *unesc(wr *w, const char *p, size_t n, size_t *len) {
    char *r = wa(w, n + 1);
    size_t k = 0;
    if (!r) return *len = 0, (char *)"";
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
    return r;
}

/* frontend_attributes={a="1",b="2"} */
static Hbmpb__FrontendAttributes *wfront(wr *w, const char *p, const char *e) {
    Hbmpb__FrontendAttributes *fa = wa(w, sizeof *fa);
    Hbmpb__FrontendAttributes__MapEntry *ent[64];
    size_t n = 0;
    if (!fa) return NULL;
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
        Hbmpb__FrontendAttributes__MapEntry *me = wa(w, sizeof *me);
        if (!me) break;
        hbmpb__frontend_attributes__map_entry__init(me);
        me->key = unesc(w, k, kl, &vl);
        me->value = unesc(w, v, (size_t)(ve - v), &vl);
        ent[n++] = me;
        p = skip_val(p, e);
    }
    if ((fa->map = wa(w, sizeof *fa->map * (n + 1))) != NULL) memcpy(fa->map, ent, sizeof *ent * n), fa->n_map = n;
    return fa;
}

/* dim_labels=b01f_01io->b01f */
static Hbmpb__ConvolutionDimensionNumbers *wconv(wr *w, const char *p, const char *e) {
    const char *u = memchr(p, '_', (size_t)(e - p)), *a = u ? memchr(u, '-', (size_t)(e - u)) : NULL;
    if (!u || !a || a + 2 > e || a[1] != '>') return NULL;
    size_t r = (size_t)(u - p);
    if (r < 2 || r > 11 || (size_t)(a - u - 1) != r || (size_t)(e - a - 2) != r) return NULL;
    Hbmpb__ConvolutionDimensionNumbers *d = wa(w, sizeof *d);
    int64_t *is = wa(w, 8 * r), *ks = wa(w, 8 * r), *os = wa(w, 8 * r);
    if (!d || !is || !ks || !os) return NULL;
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
    return d;
}

static int key_is(const char *k, size_t n, const char *w) { return n == strlen(w) && !memcmp(k, w, n); }

/* xa as the instruction's unknown fields, as protobuf-c keeps a field it does not know: its
 * number and wire type, then its bytes as on the wire (a length prefix included) */
static void wunknown(wr *w, Hbmpb__HloInstructionProto *ip, const Hbmpb__HloInstructionAttrs *xa) {
    size_t n = hbmpb__hlo_instruction_attrs__get_packed_size(xa), k = 0, i = 0;
    if (!n) return;
    uint8_t *b = wa(w, n);
    ProtobufCMessageUnknownField *u = wa(w, sizeof *u * n); /* at most one field a byte */
    if (!b || !u) return;
    hbmpb__hlo_instruction_attrs__pack(xa, b);
    while (i < n) {
        uint64_t tag, v;
        if (hbmi_varint_get(b, n, &i, &tag) <= 0) return;
        size_t at = i;
        switch (tag & 7) {
        case 0: if (hbmi_varint_get(b, n, &i, &v) <= 0) return; break;
        case 1: i += 8; break;
        case 5: i += 4; break;
        case 2: if (hbmi_varint_get(b, n, &i, &v) <= 0 || v > n - i) return; i += (size_t)v; break;
        default: return;
        }
        if (i > n) return;
        u[k].tag = (uint32_t)(tag >> 3);
        u[k].wire_type = (ProtobufCWireType)(tag & 7);
        u[k].len = i - at;
        u[k].data = b + at;
        k++;
    }
    ip->base.n_unknown_fields = (unsigned)k;
    ip->base.unknown_fields = u;
}

/* the attributes of instruction in (its text line) into ip, those only the text prints as its
 * unknown fields (HloInstructionAttrs) */
static void wattrs(wr *w, const hbm_hlo_module *m, const hbmi_instr *in, Hbmpb__HloInstructionProto *ip) {
    Hbmpb__HloInstructionAttrs xa_ = HBMPB__HLO_INSTRUCTION_ATTRS__INIT, *xa = &xa_;
    const char *s = m->text + in->off, *end = m->text + m->len, *e = s;
    while (e < end && *e != '\n') e++;
    const char *p = in->opcode.p;
    if (p < s || p >= e) return;
    /* the shape's layouts: after '=' up to the opcode */
    const char *q = memchr(s, '=', (size_t)(p - s));
    if (q && ip->shape) {
        q++;
        wlayout(w, ip->shape, &q, p, 0);
    }
    p += in->opcode.n;
    if (p >= e || *p != '(') return;
    for (p++; p < e;) { /* past the operands */
        p = skip_val(p, e);
        if (p >= e || *p != ',') break;
        p++;
    }
    if (p >= e || *p != ')') return;
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
            if (*v == '"' && ve - v >= 2) ip->backend_config.data = (uint8_t *)unesc(w, v + 1, (size_t)(ve - v - 2), &n);
            else ip->backend_config.data = (uint8_t *)unesc(w, v, 0, &n), n = 0;
            if (*v == '{') { /* a JSON object, as it is */
                char *r = wa(w, (size_t)(ve - v) + 1);
                if (r) memcpy(r, v, (size_t)(ve - v)), ip->backend_config.data = (uint8_t *)r, n = (size_t)(ve - v);
            }
            ip->backend_config.len = n;
        } else if (key_is(k, kl, "frontend_attributes")) {
            ip->frontend_attributes = wfront(w, v, ve);
        } else if (key_is(k, kl, "dimensions")) {
            xa->dimensions = wints(w, v, ve, &xa->n_dimensions);
        } else if (key_is(k, kl, "dynamic_slice_sizes")) {
            xa->dynamic_slice_sizes = wints(w, v, ve, &xa->n_dynamic_slice_sizes);
        } else if (key_is(k, kl, "fft_length")) {
            xa->fft_length = wints(w, v, ve, &xa->n_fft_length);
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
                Hbmpb__HloInstructionAttrs__SliceDimensions *d = wa(w, sizeof *d);
                if (!d) break;
                hbmpb__hlo_instruction_attrs__slice_dimensions__init(d);
                d->start = t[0], d->limit = t[1], d->stride = t[2];
                sd[ns++] = d;
            }
            if ((xa->slice_dimensions = wa(w, sizeof *sd * (ns + 1))) != NULL)
                memcpy(xa->slice_dimensions, sd, sizeof *sd * ns), xa->n_slice_dimensions = ns;
        } else if (kl > 5 && !memcmp(k + kl - 5, "_dims", 5) && (!memcmp(k, "lhs_", 4) || !memcmp(k, "rhs_", 4))) {
            if (!dd && (dd = wa(w, sizeof *dd)) != NULL) hbmpb__dot_dimension_numbers__init(dd), xa->dot_dimension_numbers = dd;
            if (!dd) continue;
            if (key_is(k, kl, "lhs_contracting_dims")) dd->lhs_contracting_dimensions = wints(w, v, ve, &dd->n_lhs_contracting_dimensions);
            else if (key_is(k, kl, "rhs_contracting_dims")) dd->rhs_contracting_dimensions = wints(w, v, ve, &dd->n_rhs_contracting_dimensions);
            else if (key_is(k, kl, "lhs_batch_dims")) dd->lhs_batch_dimensions = wints(w, v, ve, &dd->n_lhs_batch_dimensions);
            else if (key_is(k, kl, "rhs_batch_dims")) dd->rhs_batch_dimensions = wints(w, v, ve, &dd->n_rhs_batch_dimensions);
        } else if (key_is(k, kl, "dim_labels")) {
            xa->convolution_dimension_numbers = wconv(w, v, ve);
        } else if (key_is(k, kl, "kind") && in->op == HOP_FUSION) {
            char *d = wa(w, (size_t)(ve - v) + 1);
            if (d) memcpy(d, v, (size_t)(ve - v)), ip->fusion_kind = d;
        } else if (key_is(k, kl, "direction")) {
            char *d = wa(w, (size_t)(ve - v) + 1);
            if (d) memcpy(d, v, (size_t)(ve - v)), xa->comparison_direction = d;
        } else if (key_is(k, kl, "channel_id")) {
            const char *x = v;
            ints(&x, ve, &xa->channel_id, 1);
        } else if (key_is(k, kl, "constrain_layout")) {
            xa->constrain_layout = ve - v == 4 && !memcmp(v, "true", 4);
        }
    }
    wunknown(w, ip, xa);
}

/* the header's frontend_attributes={...} */
static Hbmpb__FrontendAttributes *wmodule_front(wr *w, const hbm_hlo_module *m) {
    const char *s = m->text, *e = memchr(s, '\n', m->len);
    static const char key[] = "frontend_attributes=";
    if (!e) e = s + m->len;
    int d = 0;
    for (const char *p = s; p + sizeof key - 1 < e; p++) {
        if (*p == '{' || *p == '(') d++;
        else if ((*p == '}' || *p == ')') && d) d--;
        else if (!d && !memcmp(p, key, sizeof key - 1) && (p[-1] == ' ' || p[-1] == ','))
            return wfront(w, p + sizeof key - 1, skip_val(p + sizeof key - 1, e));
    }
    return NULL;
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
static Hbmpb__StackFrameIndexProto *wframes(wr *w, const hbm_hlo_module *m) {
    const char *fn, *fu, *lo, *sf;
    size_t n_fn = table_rows(m, "FileNames", &fn), n_fu = table_rows(m, "FunctionNames", &fu);
    size_t n_lo = table_rows(m, "FileLocations", &lo), n_sf = table_rows(m, "StackFrames", &sf);
    if (!n_fn || !n_lo || !n_sf) return NULL;
    Hbmpb__StackFrameIndexProto *x = wa(w, sizeof *x);
    if (!x) return NULL;
    hbmpb__stack_frame_index_proto__init(x);
    x->file_names = wa(w, sizeof *x->file_names * n_fn);
    x->function_names = wa(w, sizeof *x->function_names * (n_fu + 1));
    x->file_locations = wa(w, sizeof *x->file_locations * n_lo);
    x->stack_frames = wa(w, sizeof *x->stack_frames * n_sf);
    if (w->fail) return NULL;
    for (size_t k = 0; k < n_fn; k++, fn = next_row(fn)) {
        const char *q;
        size_t n = hbmi_hlo_row_string(row_rest(fn), &q);
        x->file_names[k] = wstr(w, (hbmi_str){q, (uint32_t)n}, 1);
    }
    for (size_t k = 0; k < n_fu; k++, fu = next_row(fu)) {
        const char *q;
        size_t n = hbmi_hlo_row_string(row_rest(fu), &q);
        x->function_names[k] = wstr(w, (hbmi_str){q, (uint32_t)n}, 1);
    }
    for (size_t k = 0; k < n_lo && !w->fail; k++, lo = next_row(lo)) {
        Hbmpb__StackFrameIndexProto__FileLocation *l = wa(w, sizeof *l);
        if (!l) break;
        hbmpb__stack_frame_index_proto__file_location__init(l);
        l->file_name_id = id_in(hbmi_hlo_row_field(lo, "file_name_id="), n_fn);
        l->function_name_id = id_in(hbmi_hlo_row_field(lo, "function_name_id="), n_fu);
        long line = hbmi_hlo_row_field(lo, "line=");
        l->line = line > 0 && line < INT32_MAX ? (int32_t)line : 0;
        x->file_locations[k] = l;
    }
    for (size_t k = 0; k < n_sf && !w->fail; k++, sf = next_row(sf)) {
        Hbmpb__StackFrameIndexProto__StackFrame *f = wa(w, sizeof *f);
        if (!f) break;
        hbmpb__stack_frame_index_proto__stack_frame__init(f);
        f->file_location_id = id_in(hbmi_hlo_row_field(sf, "file_location_id="), n_lo);
        f->parent_frame_id = id_in(hbmi_hlo_row_field(sf, "parent_frame_id="), n_sf);
        x->stack_frames[k] = f;
    }
    x->n_file_names = n_fn;
    x->n_function_names = n_fu;
    x->n_file_locations = n_lo;
    x->n_stack_frames = n_sf;
    return w->fail ? NULL : x;
}

hbm_status hbmi_proto_write_module(const hbm_hlo_module *m, int attrs, uint8_t **out, size_t *len) {
    wr w = {{0}, 0};
    Hbmpb__HloModuleProto *mp = wa(&w, sizeof *mp);
    if (!mp) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbmpb__hlo_module_proto__init(mp);
    mp->name = wstr(&w, m->name, 0);
    if (attrs && m->text) mp->frontend_attributes = wmodule_front(&w, m);
    mp->stack_frame_index = m->text && !m->pb_module ? wframes(&w, m) : NULL;
    size_t n_frames = mp->stack_frame_index ? mp->stack_frame_index->n_stack_frames : 0;
    mp->n_computations = m->n_comps;
    mp->computations = wa(&w, sizeof *mp->computations * m->n_comps);
    mp->entry_computation_id = m->entry + 1;
    if (m->n_comps) mp->entry_computation_name = wstr(&w, m->comps[m->entry].name, 0); /* as XLA writes it */
    Hbmpb__HloScheduleProto *sch = NULL;
    if (m->is_scheduled) {
        sch = wa(&w, sizeof *sch);
        if (sch) {
            hbmpb__hlo_schedule_proto__init(sch);
            sch->n_sequences = m->n_comps;
            sch->sequences = wa(&w, sizeof *sch->sequences * m->n_comps);
        }
        mp->schedule = sch;
    }
    int64_t base = 1;
    for (uint32_t ci = 0; ci < m->n_comps && mp->computations && !w.fail; ci++) {
        const hbmi_comp *c = &m->comps[ci];
        Hbmpb__HloComputationProto *cp = wa(&w, sizeof *cp);
        if (!cp) break;
        hbmpb__hlo_computation_proto__init(cp);
        mp->computations[ci] = cp;
        cp->name = wstr(&w, c->name, 0);
        cp->id = ci + 1;
        cp->root_id = base + c->root;
        if (c->exec_thread.n) cp->execution_thread = wstr(&w, c->exec_thread, 1);
        cp->n_instructions = c->n;
        cp->instructions = wa(&w, sizeof *cp->instructions * c->n);
        int64_t *seq = sch ? wa(&w, sizeof *seq * c->n) : NULL;
        for (uint32_t j = 0; j < c->n && cp->instructions && !w.fail; j++) {
            const hbmi_instr *in = &c->ins[j];
            Hbmpb__HloInstructionProto *ip = wa(&w, sizeof *ip);
            if (!ip) break;
            hbmpb__hlo_instruction_proto__init(ip);
            cp->instructions[j] = ip;
            ip->id = base + j;
            if (seq) seq[j] = ip->id;
            ip->name = wstr(&w, in->name, 0);
            ip->opcode = wstr(&w, in->opcode, 0);
            ip->shape = wshape(&w, in->shape);
            if (in->param_no >= 0) ip->parameter_number = in->param_no;
            if (in->gte_index >= 0) ip->tuple_index = in->gte_index;
            const char *fk = hbmi_fusion_kind_name(in->fusion_kind);
            if (fk[0]) ip->fusion_kind = wstr(&w, (hbmi_str){fk, (uint32_t)strlen(fk)}, 0);
            if (in->target.n) ip->custom_call_target = wstr(&w, in->target, 1);
            int32_t frame = n_frames ? id_in(in->meta_frame, n_frames) : 0;
            if (in->meta_op_name.n || in->meta_source_file.n || in->meta_source_line || frame) {
                Hbmpb__OpMetadata *md = wa(&w, sizeof *md);
                if (md) {
                    hbmpb__op_metadata__init(md);
                    md->op_name = wstr(&w, in->meta_op_name, 1);
                    /* a file the frames gave: the frame alone, as XLA writes it */
                    int walked = frame && in->meta_walked;
                    md->source_file = walked ? "" : wstr(&w, in->meta_source_file, 1);
                    md->source_line = walked ? 0 : in->meta_source_line;
                    md->stack_frame_id = frame;
                    ip->metadata = md;
                }
            }
            ip->n_operand_ids = in->n_ops;
            ip->operand_ids = wa(&w, sizeof(int64_t) * (in->n_ops + 1u));
            for (uint32_t k = 0; k < in->n_ops && ip->operand_ids; k++) ip->operand_ids[k] = base + in->ops[k];
            ip->n_called_computation_ids = in->n_called;
            ip->called_computation_ids = wa(&w, sizeof(int64_t) * (in->n_called + 1u));
            for (uint32_t k = 0, q = 0; k < in->n_called && ip->called_computation_ids; k++) {
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
            ip->output_operand_aliasing = wa(&w, sizeof *ip->output_operand_aliasing * (in->n_alias + 1u));
            for (uint32_t k = 0; k < in->n_alias && ip->output_operand_aliasing; k++)
                ip->output_operand_aliasing[k] = walias(&w, &in->alias[k]);
            if (attrs && m->text && in->off < m->len) wattrs(&w, m, in, ip);
        }
        if (sch && sch->sequences) {
            Hbmpb__HloScheduleProto__SequencesEntry *e = wa(&w, sizeof *e);
            Hbmpb__HloScheduleProto__InstructionSequence *s = wa(&w, sizeof *s);
            if (e && s) {
                hbmpb__hlo_schedule_proto__sequences_entry__init(e);
                hbmpb__hlo_schedule_proto__instruction_sequence__init(s);
                s->n_instruction_ids = c->n;
                s->instruction_ids = seq;
                e->key = ci + 1;
                e->value = s;
                sch->sequences[ci] = e;
            }
        }
        base += c->n;
    }
    if (m->n_io_alias) {
        Hbmpb__HloInputOutputAliasProto *io = wa(&w, sizeof *io);
        if (io) {
            hbmpb__hlo_input_output_alias_proto__init(io);
            io->n_entries = m->n_io_alias;
            io->entries = wa(&w, sizeof *io->entries * m->n_io_alias);
            for (uint32_t k = 0; k < m->n_io_alias && io->entries; k++) {
                Hbmpb__HloInputOutputAliasProto__AliasEntryProto *e = wa(&w, sizeof *e);
                Hbmpb__OutputOperandAliasing *a = walias(&w, &m->io_alias[k]);
                if (!e || !a) break;
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
    }
    if (m->n_donors) {
        Hbmpb__HloBufferDonorProto *bd = wa(&w, sizeof *bd);
        if (bd) {
            hbmpb__hlo_buffer_donor_proto__init(bd);
            bd->n_entries = m->n_donors;
            bd->entries = wa(&w, sizeof *bd->entries * m->n_donors);
            for (uint32_t k = 0; k < m->n_donors && bd->entries; k++) {
                Hbmpb__HloBufferDonorProto__BufferDonorEntryProto *e = wa(&w, sizeof *e);
                Hbmpb__OutputOperandAliasing *a = walias(&w, &m->donors[k]);
                if (!e || !a) break;
                hbmpb__hlo_buffer_donor_proto__buffer_donor_entry_proto__init(e);
                e->parameter_number = a->operand_index;
                e->n_parameter_shape_index = a->n_operand_shape_index;
                e->parameter_shape_index = a->operand_shape_index;
                bd->entries[k] = e;
            }
            mp->buffer_donor = bd;
        }
    }
    hbm_status s = HBM_OK;
    if (w.fail || !mp->computations) {
        s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    } else {
        *len = hbmpb__hlo_module_proto__get_packed_size(mp);
        *out = hbmi_malloc(*len ? *len : 1);
        if (!*out) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
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
