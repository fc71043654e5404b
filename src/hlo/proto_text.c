/* proto_text.c - a module read from XLA's protobuf written back as its HLO text, the way
 * XLA prints it (openxla/xla: HloModule::ToString in xla/hlo/ir/hlo_module.cc, the
 * instruction printer and its extra attributes in xla/hlo/ir/hlo_instruction.cc and
 * hlo_instructions.cc, Shape/Layout printing in xla/shape.cc and xla/layout.cc): the header
 * with is_scheduled, input_output_alias, buffer_donor, entry_computation_layout and the
 * module's frontend attributes; each computation with its signature (ENTRY last, as the
 * proto orders them); each instruction with its shape and layout (tiles T(..), element
 * size E(n), memory space S(n)), operands and the attributes hbm and its users read.
 * hbm fit edits this text (src/fit/fit_emit.c) and re-plans it with the text parser. Made
 * on demand: reading a module does not pay for it (docs/protobuf.md). */
#include <stdio.h>
#include <string.h>

#include "hlo/hlo_internal.h"

#ifdef HBM_HAVE_PROTOBUF_C
#include <protobuf-c/protobuf-c.h>

#include "hbm_xla.pb-c.h"

typedef struct tb {
    char *p;
    size_t n, cap;
} tb;

static hbm_status no_room(void) { return hbmi_error(HBM_ERR_NOMEM, "out of host memory writing the module's HLO text"); }

static hbm_status room(tb *b, size_t k) {
    if (HBMI_LIKELY(b->n + k + 1 <= b->cap)) return HBM_OK;
    size_t c = b->cap ? b->cap : 1 << 16;
    while (c < b->n + k + 1) {
        if (c > SIZE_MAX / 2) return no_room();
        c *= 2;
    }
    char *q = hbmi_realloc(b->p, c);
    if (!q) return no_room();
    b->p = q;
    b->cap = c;
    return HBM_OK;
}

static hbm_status put(tb *b, const char *s, size_t k) {
    if (!k) return HBM_OK;
    TRY(room(b, k));
    memcpy(b->p + b->n, s, k);
    b->n += k;
    return HBM_OK;
}
#define PUT(b, lit) put((b), (lit), sizeof(lit) - 1)
static hbm_status put_c(tb *b, char c) {
    TRY(room(b, 1));
    b->p[b->n++] = c;
    return HBM_OK;
}
static hbm_status put_s(tb *b, const char *s) { return put(b, s, strlen(s)); }
static hbm_status put_hs(tb *b, hbmi_str s) { return put(b, s.p, s.n); }

static hbm_status put_int(tb *b, int64_t v) {
    char t[24];
    int k = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do t[k++] = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0) t[k++] = '-';
    TRY(room(b, (size_t)k));
    while (k) b->p[b->n++] = t[--k];
    return HBM_OK;
}

/* PUT(b, key) then v: ", index=3" */
static hbm_status put_key_int(tb *b, const char *key, int64_t v) {
    TRY(put_s(b, key));
    return put_int(b, v);
}

static hbm_status put_ints(tb *b, const int64_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i) TRY(put_c(b, ','));
        TRY(put_int(b, v[i]));
    }
    return HBM_OK;
}

/* "{1,0}" */
static hbm_status put_brace_ints(tb *b, const int64_t *v, size_t n) {
    TRY(put_c(b, '{'));
    TRY(put_ints(b, v, n));
    return put_c(b, '}');
}

/* key then "{1,0}" */
static hbm_status put_key_ints(tb *b, const char *key, const int64_t *v, size_t n) {
    TRY(put_s(b, key));
    return put_brace_ints(b, v, n);
}

/* s as absl::CEscape writes it (XLA's quoted strings): \n \r \t \" \' \\, other bytes outside
 * printable ASCII as three octal digits */
static hbm_status put_esc(tb *b, const char *s, size_t n) {
    TRY(room(b, n));
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '"' ? "\\\"" : c == '\'' ? "\\'"
                        : c == '\\' ? "\\\\" : NULL;
        if (e) {
            TRY(put(b, e, 2));
        } else if (c < 0x20 || c >= 0x7f) {
            char o[4] = {'\\', (char)('0' + (c >> 6)), (char)('0' + ((c >> 3) & 7)), (char)('0' + (c & 7))};
            TRY(put(b, o, 4));
        } else {
            TRY(put_c(b, (char)c));
        }
    }
    return HBM_OK;
}

static hbm_status put_quoted(tb *b, const char *s, size_t n) {
    TRY(put_c(b, '"'));
    TRY(put_esc(b, s, n));
    return put_c(b, '"');
}

/* key then s quoted */
static hbm_status put_key_quoted(tb *b, const char *key, const char *s, size_t n) {
    TRY(put_s(b, key));
    return put_quoted(b, s, n);
}

/* xla.PrimitiveType as the text names it (xla/primitive_util.cc) */
static const char *type_name(int32_t t) {
    static const char *const names[] = {
        "invalid", "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64", "tuple",
        "opaque", "c64", "bf16", "token", "c128", "f8e5m2", "f8e4m3fn", "s4", "u4", "f8e4m3b11fnuz", "f8e5m2fnuz",
        "f8e4m3fnuz", "s2", "u2", "f8e4m3", "f8e3m4", "s1", "u1", "f4e2m1fn", "f8e8m0fnu", "buffer"};
    return t >= 0 && t < (int32_t)(sizeof names / sizeof names[0]) ? names[t] : "invalid";
}

/* Shape::Print: f32[2,<=3]{1,0:T(8,128)E(4)S(1)}, (a, b) for tuples; the layout printed only
 * when asked, and for a scalar only when it says more than its (empty) dimension order. */
static hbm_status put_shape(tb *b, const Hbmpb__ShapeProto *sp, int layout, int depth) {
    if (depth > 80) return HBM_OK;
    if (sp->element_type == 13) {
        TRY(put_c(b, '('));
        for (size_t i = 0; i < sp->n_tuple_shapes; i++) {
            if (i) TRY(PUT(b, ", "));
            TRY(put_shape(b, sp->tuple_shapes[i], layout, depth + 1));
        }
        return put_c(b, ')');
    }
    TRY(put_s(b, type_name(sp->element_type)));
    TRY(put_c(b, '['));
    for (size_t i = 0; i < sp->n_dimensions; i++) {
        if (i) TRY(put_c(b, ','));
        if (i < sp->n_is_dynamic_dimension && sp->is_dynamic_dimension[i]) TRY(PUT(b, "<="));
        TRY(put_int(b, sp->dimensions[i]));
    }
    TRY(put_c(b, ']'));
    const Hbmpb__LayoutProto *l = sp->layout;
    if (!layout || !l) return HBM_OK;
    int extra = l->n_tiles || l->element_size_in_bits || l->memory_space;
    if (!sp->n_dimensions && !extra) return HBM_OK;
    TRY(put_c(b, '{'));
    TRY(put_ints(b, l->minor_to_major, l->n_minor_to_major));
    if (extra) {
        TRY(put_c(b, ':'));
        if (l->n_tiles) TRY(put_c(b, 'T'));
        for (size_t t = 0; t < l->n_tiles; t++) {
            const Hbmpb__TileProto *tp = l->tiles[t];
            TRY(put_c(b, '('));
            for (size_t j = 0; j < tp->n_dimensions; j++) {
                if (j) TRY(put_c(b, ','));
                if (tp->dimensions[j] < 0) TRY(put_c(b, '*')); /* a combined dimension */
                else TRY(put_int(b, tp->dimensions[j]));
            }
            TRY(put_c(b, ')'));
        }
        if (l->element_size_in_bits) {
            TRY(put_key_int(b, "E(", l->element_size_in_bits));
            TRY(put_c(b, ')'));
        }
        if (l->memory_space) {
            TRY(put_key_int(b, "S(", l->memory_space));
            TRY(put_c(b, ')'));
        }
    }
    return put_c(b, '}');
}

static int cmp_attr(const void *x, const void *y) {
    const Hbmpb__FrontendAttributes__MapEntry *a = *(const Hbmpb__FrontendAttributes__MapEntry *const *)x,
                                               *c = *(const Hbmpb__FrontendAttributes__MapEntry *const *)y;
    return strcmp(a->key, c->key);
}

/* the entries of e[0..n) as key="value", comma-separated */
static hbm_status put_attr_entries(tb *b, Hbmpb__FrontendAttributes__MapEntry *const *e, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i) TRY(put_c(b, ','));
        TRY(put_s(b, e[i]->key));
        TRY(put_c(b, '='));
        TRY(put_quoted(b, e[i]->value, strlen(e[i]->value)));
    }
    return HBM_OK;
}

/* frontend_attributes={a="1",b="2"}, keys in order (XLA prints its map sorted) */
static hbm_status put_frontend(tb *b, const Hbmpb__FrontendAttributes *fa) {
    if (!fa || !fa->n_map) return HBM_OK;
    Hbmpb__FrontendAttributes__MapEntry **e = hbmi_malloc(sizeof *e * fa->n_map);
    if (!e) return no_room();
    memcpy(e, fa->map, sizeof *e * fa->n_map);
    hbmi_qsort(e, fa->n_map, sizeof *e, cmp_attr);
    hbm_status s = PUT(b, ", frontend_attributes={");
    if (!s) s = put_attr_entries(b, e, fa->n_map);
    hbmi_free(e);
    TRY(s);
    return put_c(b, '}');
}

/* {1}: (0, {}) */
static hbm_status put_index(tb *b, const int64_t *v, size_t n) { return put_brace_ints(b, v, n); }

/* ConvolutionDimensionNumbersToString: dim_labels=b01f_01io->b01f */
static hbm_status put_dim_labels(tb *b, const Hbmpb__ConvolutionDimensionNumbers *d) {
    size_t ns = d->n_input_spatial_dimensions;
    if (ns > 9 || d->n_kernel_spatial_dimensions != ns || d->n_output_spatial_dimensions != ns) return HBM_OK;
    char in[12], k[12], out[12];
    size_t r = ns + 2;
    memset(in, '?', r), memset(k, '?', r), memset(out, '?', r);
#define SET(arr, i, ch) do { if ((i) < 0 || (uint64_t)(i) >= r) return HBM_OK; (arr)[i] = (ch); } while (0)
    SET(in, d->input_batch_dimension, 'b');
    SET(in, d->input_feature_dimension, 'f');
    SET(k, d->kernel_input_feature_dimension, 'i');
    SET(k, d->kernel_output_feature_dimension, 'o');
    SET(out, d->output_batch_dimension, 'b');
    SET(out, d->output_feature_dimension, 'f');
    for (size_t i = 0; i < ns; i++) {
        SET(in, d->input_spatial_dimensions[i], (char)('0' + i));
        SET(k, d->kernel_spatial_dimensions[i], (char)('0' + i));
        SET(out, d->output_spatial_dimensions[i], (char)('0' + i));
    }
#undef SET
    TRY(PUT(b, ", dim_labels="));
    TRY(put(b, in, r));
    TRY(put_c(b, '_'));
    TRY(put(b, k, r));
    TRY(PUT(b, "->"));
    return put(b, out, r);
}

static int is(hbmi_str s, const char *w) { return s.n == strlen(w) && !memcmp(s.p, w, s.n); }

static void *arena_cb(void *d, size_t n) { return hbmi_arena_alloc(d, n); }
static void arena_nofree(void *d, void *p) { (void)d, (void)p; }

/* The fields of ip that only the text prints (HloInstructionAttrs): protobuf-c kept them among
 * the instruction's unknown fields (the tag apart, each field's bytes as on the wire); they are
 * framed again and read, into the arena a. An empty message when there are none or they do
 * not read (the instruction is then printed without them). */
static const Hbmpb__HloInstructionAttrs *attrs_of(const Hbmpb__HloInstructionProto *ip, hbmi_arena *a,
                                                  Hbmpb__HloInstructionAttrs *none) {
    static const uint32_t want[] = {14, 16, 17, 20, 26, 30, 32, 56, 63};
    size_t n = 0;
    for (unsigned i = 0; i < ip->base.n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &ip->base.unknown_fields[i];
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            if (u->tag == want[k]) n += 10 + u->len;
    }
    if (!n) return none;
    uint8_t *buf = hbmi_arena_alloc(a, n), *q = buf;
    if (!buf) return none;
    for (unsigned i = 0; i < ip->base.n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &ip->base.unknown_fields[i];
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            if (u->tag == want[k]) {
                q = hbmi_varint_put(q, (uint64_t)u->tag << 3 | (uint64_t)u->wire_type);
                if (u->len) memcpy(q, u->data, u->len);
                q += u->len;
            }
    }
    ProtobufCAllocator al = {arena_cb, arena_nofree, a};
    const Hbmpb__HloInstructionAttrs *x = hbmpb__hlo_instruction_attrs__unpack(&al, (size_t)(q - buf), buf);
    return x ? x : none;
}

/* the computations in called of role `role`: key=%a or key={%a, %b} */
static hbm_status put_called(tb *b, const hbm_hlo_module *m, const hbmi_instr *in, hbmi_called_role role,
                             const char *key, int braces) {
    size_t n = 0;
    for (uint32_t k = 0; k < in->n_called; k++) n += in->called_role[k] == role;
    if (!n) return HBM_OK;
    TRY(PUT(b, ", "));
    TRY(put_s(b, key));
    TRY(put_c(b, '='));
    if (braces || n > 1) TRY(put_c(b, '{'));
    for (uint32_t k = 0, i = 0; k < in->n_called; k++) {
        if (in->called_role[k] != role) continue;
        if (i++) TRY(PUT(b, ", "));
        TRY(put_c(b, '%'));
        TRY(put_hs(b, m->comps[in->called[k]].name));
    }
    if (braces || n > 1) TRY(put_c(b, '}'));
    return HBM_OK;
}

/* metadata={op_type="Add" op_name="jit(f)/add" source_file="f.py" source_line=3} */
static hbm_status put_metadata(tb *b, const hbmi_instr *in, const Hbmpb__OpMetadata *md) {
    TRY(PUT(b, ", metadata={"));
    int sp = 0;
    if (md->op_type[0]) {
        TRY(put_key_quoted(b, "op_type=", md->op_type, strlen(md->op_type)));
        sp = 1;
    }
    /* the model's strings: escaped as the text parser keeps them; the source file is the one
     * the stack frames name where the metadata gives a frame, not a file */
    if (in->meta_op_name.n) {
        TRY(put(b, &" op_name=\""[!sp], sp ? 10 : 9));
        TRY(put_hs(b, in->meta_op_name));
        TRY(put_c(b, '"'));
        sp = 1;
    }
    if (in->meta_source_file.n) {
        TRY(put(b, &" source_file=\""[!sp], sp ? 14 : 13));
        TRY(put_hs(b, in->meta_source_file));
        TRY(put_c(b, '"'));
        sp = 1;
    }
    if (in->meta_source_line) {
        TRY(put(b, &" source_line="[!sp], sp ? 13 : 12));
        TRY(put_int(b, in->meta_source_line));
    }
    return put_c(b, '}');
}

/* the opcode's own attributes (ExtraAttributesToStringImpl) */
static hbm_status put_extra(tb *b, const hbmi_instr *in, const Hbmpb__HloInstructionProto *ip,
                            const Hbmpb__HloInstructionAttrs *xa) {
    if (in->op == HOP_FUSION && ip->fusion_kind[0]) {
        TRY(PUT(b, ", kind="));
        TRY(put_s(b, ip->fusion_kind));
    }
    if (xa->n_dimensions || is(in->opcode, "broadcast")) TRY(put_key_ints(b, ", dimensions=", xa->dimensions, xa->n_dimensions));
    if (xa->n_slice_dimensions) {
        TRY(PUT(b, ", slice={"));
        for (size_t k = 0; k < xa->n_slice_dimensions; k++) {
            const Hbmpb__HloInstructionAttrs__SliceDimensions *sd = xa->slice_dimensions[k];
            if (k) TRY(PUT(b, ", "));
            TRY(put_key_int(b, "[", sd->start));
            TRY(put_key_int(b, ":", sd->limit));
            if (sd->stride != 1) TRY(put_key_int(b, ":", sd->stride));
            TRY(put_c(b, ']'));
        }
        TRY(put_c(b, '}'));
    }
    if (xa->n_dynamic_slice_sizes)
        TRY(put_key_ints(b, ", dynamic_slice_sizes=", xa->dynamic_slice_sizes, xa->n_dynamic_slice_sizes));
    if (in->op == HOP_GTE) TRY(put_key_int(b, ", index=", in->gte_index));
    if (xa->comparison_direction[0]) {
        TRY(PUT(b, ", direction="));
        TRY(put_s(b, xa->comparison_direction));
    }
    const Hbmpb__DotDimensionNumbers *dd = xa->dot_dimension_numbers;
    if (dd) {
        if (dd->n_lhs_batch_dimensions)
            TRY(put_key_ints(b, ", lhs_batch_dims=", dd->lhs_batch_dimensions, dd->n_lhs_batch_dimensions));
        TRY(put_key_ints(b, ", lhs_contracting_dims=", dd->lhs_contracting_dimensions, dd->n_lhs_contracting_dimensions));
        if (dd->n_rhs_batch_dimensions)
            TRY(put_key_ints(b, ", rhs_batch_dims=", dd->rhs_batch_dimensions, dd->n_rhs_batch_dimensions));
        TRY(put_key_ints(b, ", rhs_contracting_dims=", dd->rhs_contracting_dimensions, dd->n_rhs_contracting_dimensions));
    }
    if (xa->convolution_dimension_numbers) TRY(put_dim_labels(b, xa->convolution_dimension_numbers));
    if (xa->n_fft_length) TRY(put_key_ints(b, ", fft_length=", xa->fft_length, xa->n_fft_length));
    if (xa->channel_id > 0) TRY(put_key_int(b, ", channel_id=", xa->channel_id));
    if (xa->constrain_layout) TRY(PUT(b, ", constrain_layout=true"));
    if (ip->custom_call_target[0])
        TRY(put_key_quoted(b, ", custom_call_target=", ip->custom_call_target, strlen(ip->custom_call_target)));
    if (in->n_alias) {
        TRY(PUT(b, ", output_to_operand_aliasing={"));
        for (uint32_t k = 0; k < ip->n_output_operand_aliasing; k++) {
            const Hbmpb__OutputOperandAliasing *a = ip->output_operand_aliasing[k];
            if (k) TRY(PUT(b, ", "));
            TRY(put_index(b, a->output_shape_index, a->n_output_shape_index));
            TRY(put_key_int(b, ": (", a->operand_index));
            TRY(PUT(b, ", "));
            TRY(put_index(b, a->operand_shape_index, a->n_operand_shape_index));
            TRY(put_c(b, ')'));
        }
        TRY(put_c(b, '}'));
    }
    return HBM_OK;
}

/* instruction in of cc from ip; at[0], at[1]: where its name and opcode are written */
static hbm_status put_instr(tb *b, hbm_hlo_module *m, hbmi_comp *cc, hbmi_instr *in, const Hbmpb__HloInstructionProto *ip,
                            const Hbmpb__HloInstructionAttrs *xa, size_t at[2]) {
    TRY(PUT(b, "  "));
    size_t off = b->n;
    if (in->is_root) TRY(PUT(b, "ROOT "));
    TRY(put_c(b, '%'));
    size_t name_at = b->n;
    TRY(put_hs(b, in->name));
    TRY(PUT(b, " = "));
    TRY(put_shape(b, ip->shape, 1, 0));
    TRY(put_c(b, ' '));
    size_t opc_at = b->n;
    TRY(put_hs(b, in->opcode));
    TRY(put_c(b, '('));
    if (in->op == HOP_PARAMETER) {
        TRY(put_int(b, in->param_no));
    } else if (in->op == HOP_CONSTANT) {
        TRY(PUT(b, "{...}")); /* the literal's values are not read; XLA elides large ones the same way */
    } else {
        for (uint32_t k = 0; k < in->n_ops; k++) {
            if (k) TRY(PUT(b, ", "));
            TRY(put_c(b, '%'));
            TRY(put_hs(b, cc->ins[in->ops[k]].name));
        }
    }
    TRY(put_c(b, ')'));
    TRY(put_extra(b, in, ip, xa));
    /* the called computations, as the text parser gives them their roles */
    TRY(put_called(b, m, in, HBMI_CALLED_CONDITION, "condition", 0));
    TRY(put_called(b, m, in, HBMI_CALLED_BODY, "body", 0));
    TRY(put_called(b, m, in, HBMI_CALLED_BRANCH, "branch_computations", 1));
    if (is(in->opcode, "select-and-scatter") && in->n_called == 2 && in->called_role[0] == HBMI_CALLED_APPLY &&
        in->called_role[1] == HBMI_CALLED_APPLY) {
        TRY(PUT(b, ", select=%"));
        TRY(put_hs(b, m->comps[in->called[0]].name));
        TRY(PUT(b, ", scatter=%"));
        TRY(put_hs(b, m->comps[in->called[1]].name));
    } else {
        TRY(put_called(b, m, in, HBMI_CALLED_APPLY, "to_apply", 0));
    }
    TRY(put_called(b, m, in, HBMI_CALLED_CALLS, in->op == HOP_CUSTOM_CALL ? "called_computations" : "calls",
                   in->op == HOP_CUSTOM_CALL));
    TRY(put_frontend(b, ip->frontend_attributes));
    const Hbmpb__OpMetadata *md = ip->metadata;
    if (md && (md->op_type[0] || in->meta_op_name.n || in->meta_source_file.n || in->meta_source_line))
        TRY(put_metadata(b, in, md));
    if (ip->backend_config.len) { /* a JSON object as it is, anything else quoted */
        TRY(PUT(b, ", backend_config="));
        if (ip->backend_config.data[0] == '{') TRY(put(b, (const char *)ip->backend_config.data, ip->backend_config.len));
        else TRY(put_quoted(b, (const char *)ip->backend_config.data, ip->backend_config.len));
    }
    TRY(put_c(b, '\n'));
    in->off = off;
    at[0] = name_at;
    at[1] = opc_at;
    return HBM_OK;
}

/* the parameters' shapes in order (at[k]: the instruction of parameter k, UINT32_MAX: none),
 * each after its name unless with layout */
static hbm_status put_params(tb *b, const hbmi_comp *cc, const uint32_t *at, uint32_t np,
                             const Hbmpb__HloInstructionProto *const *src, int layout) {
    for (uint32_t k = 0, done = 0; k < np; k++) {
        if (at[k] == UINT32_MAX) continue;
        if (done++) TRY(PUT(b, ", "));
        if (!layout) {
            TRY(put_hs(b, cc->ins[at[k]].name));
            TRY(PUT(b, ": "));
        }
        TRY(put_shape(b, src[at[k]]->shape, layout, 0));
    }
    return HBM_OK;
}

/* (a: f32[2], b: s32[]) -> f32[2]: the parameters by number, shapes without layout; with
 * layout (entry_computation_layout): (f32[2]{0}, s32[])->f32[2]{0} */
static hbm_status put_signature(tb *b, const hbm_hlo_module *m, uint32_t ci, const Hbmpb__HloInstructionProto *const *src,
                                int layout) {
    const hbmi_comp *cc = &m->comps[ci];
    uint32_t np = 0;
    for (uint32_t j = 0; j < cc->n; j++) np += cc->ins[j].op == HOP_PARAMETER;
    uint32_t *at = hbmi_malloc(sizeof *at * (np + 1u));
    if (!at) return no_room();
    for (uint32_t k = 0; k < np; k++) at[k] = UINT32_MAX;
    for (uint32_t j = 0; j < cc->n; j++) {
        const hbmi_instr *in = &cc->ins[j];
        if (in->op == HOP_PARAMETER && in->param_no >= 0 && in->param_no < (int64_t)np && at[in->param_no] == UINT32_MAX)
            at[in->param_no] = j;
    }
    hbm_status s = put_c(b, '(');
    if (!s) s = put_params(b, cc, at, np, src, layout);
    hbmi_free(at);
    TRY(s);
    TRY(layout ? PUT(b, ")->") : PUT(b, ") -> "));
    return put_shape(b, src[cc->root]->shape, layout, 0);
}

/* the header (HloModule::ToString); *name_at: where the module's name is written */
static hbm_status put_header(tb *b, const hbm_hlo_module *m, const Hbmpb__HloInstructionProto *const *entry_src,
                             size_t *name_at) {
    const Hbmpb__HloModuleProto *mp = m->pb_module;
    TRY(PUT(b, "HloModule "));
    *name_at = b->n;
    TRY(put_hs(b, m->name));
    if (m->is_scheduled) TRY(PUT(b, ", is_scheduled=true"));
    const Hbmpb__HloInputOutputAliasProto *io = mp->input_output_alias;
    if (io && io->n_entries) {
        TRY(PUT(b, ", input_output_alias={ "));
        for (size_t k = 0; k < io->n_entries; k++) {
            const Hbmpb__HloInputOutputAliasProto__AliasEntryProto *a = io->entries[k];
            if (k) TRY(PUT(b, ", "));
            TRY(put_index(b, a->output_shape_index, a->n_output_shape_index));
            TRY(put_key_int(b, ": (", a->parameter_number));
            TRY(PUT(b, ", "));
            TRY(put_index(b, a->parameter_shape_index, a->n_parameter_shape_index));
            TRY(put_s(b, a->kind == 2 ? ", must-alias)" : ", may-alias)"));
        }
        TRY(PUT(b, " }"));
    }
    const Hbmpb__HloBufferDonorProto *bd = mp->buffer_donor;
    if (bd && bd->n_entries) {
        TRY(PUT(b, ", buffer_donor={ "));
        for (size_t k = 0; k < bd->n_entries; k++) {
            if (k) TRY(PUT(b, ", "));
            TRY(put_key_int(b, "(", bd->entries[k]->parameter_number));
            TRY(PUT(b, ", "));
            TRY(put_index(b, bd->entries[k]->parameter_shape_index, bd->entries[k]->n_parameter_shape_index));
            TRY(put_c(b, ')'));
        }
        TRY(PUT(b, " }"));
    }
    TRY(PUT(b, ", entry_computation_layout={"));
    TRY(put_signature(b, m, m->entry, entry_src, 1));
    TRY(put_c(b, '}'));
    TRY(put_frontend(b, mp->frontend_attributes));
    return PUT(b, "\n\n");
}

/* computation ci, its instructions from src (at: where each one's name and opcode go) */
static hbm_status put_computation(tb *b, hbm_hlo_module *m, uint32_t ci, const Hbmpb__HloInstructionProto *const *src,
                                  size_t (*at)[2]) {
    hbmi_comp *cc = &m->comps[ci];
    if (cc->is_entry) TRY(PUT(b, "ENTRY "));
    TRY(put_c(b, '%'));
    TRY(put_hs(b, cc->name));
    TRY(put_c(b, ' '));
    TRY(put_signature(b, m, ci, src, 0));
    TRY(PUT(b, " {\n"));
    for (uint32_t j = 0; j < cc->n; j++) {
        hbmi_arena scratch = {0};
        Hbmpb__HloInstructionAttrs none = HBMPB__HLO_INSTRUCTION_ATTRS__INIT;
        hbm_status s = put_instr(b, m, cc, &cc->ins[j], src[j], attrs_of(src[j], &scratch, &none), at[j]);
        hbmi_arena_free(&scratch);
        TRY(s);
    }
    TRY(put_c(b, '}'));
    if (cc->exec_thread.n && !is(cc->exec_thread, "main"))
        TRY(put_key_quoted(b, ", execution_thread=", cc->exec_thread.p, cc->exec_thread.n));
    return PUT(b, "\n\n");
}

/* the whole text into b, in the proto's order (callees first, the entry last); name_at,
 * comp_at[ci], at[base[ci] + j]: where the names are written */
static hbm_status put_module(tb *b, hbm_hlo_module *m, size_t *base, size_t *name_at, size_t *comp_at, size_t (*at)[2]) {
    const Hbmpb__HloInstructionProto *const *src = (const Hbmpb__HloInstructionProto *const *)m->pb_ins;
    for (uint32_t ci = 0, g = 0; ci < m->n_comps; g += m->comps[ci].n, ci++) base[ci] = g;
    TRY(put_header(b, m, src + base[m->entry], name_at));
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        comp_at[ci] = b->n;
        TRY(put_computation(b, m, ci, src + base[ci], at + base[ci]));
    }
    return room(b, 1);
}

hbm_status hbmi_proto_text(hbm_hlo_module *m) {
    if (!m || !m->pb_module || m->text_full) return HBM_OK;
    tb b = {0};
    size_t total = 0, name_at = 0;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) total += m->comps[ci].n;
    size_t *base = hbmi_malloc(sizeof *base * (m->n_comps + 1u)), *comp_at = hbmi_malloc(sizeof *comp_at * (m->n_comps + 1u));
    size_t(*at)[2] = hbmi_malloc(sizeof *at * (total + 1));
    hbm_status s = !base || !comp_at || !at ? no_room() : put_module(&b, m, base, &name_at, comp_at, at);
    if (s) {
        hbmi_free(b.p);
        hbmi_free(base);
        hbmi_free(comp_at);
        hbmi_free(at);
        return s;
    }
    b.p[b.n] = 0;
    /* every slice into the text moves to the new one; the old text stays until the module goes
     * (a plan made before may still point into it) */
    m->name.p = b.p + name_at;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        hbmi_comp *cc = &m->comps[ci];
        cc->off = comp_at[ci];
        cc->name.p = b.p + comp_at[ci] + (cc->is_entry ? 7 : 1);
        for (uint32_t j = 0; j < cc->n; j++) {
            cc->ins[j].name.p = b.p + at[base[ci] + j][0];
            cc->ins[j].opcode.p = b.p + at[base[ci] + j][1];
        }
    }
    hbmi_free(m->text_old);
    m->text_old = m->text;
    m->text = b.p;
    m->len = b.n;
    m->text_full = 1;
    m->host_bytes += b.cap;
    hbmi_free(base);
    hbmi_free(comp_at);
    hbmi_free(at);
    return HBM_OK;
}
#else
hbm_status hbmi_proto_text(hbm_hlo_module *m) {
    (void)m;
    return HBM_OK;
}
#endif
