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
    int err;
} tb;

static int room(tb *b, size_t k) {
    if (b->err) return 0;
    if (b->n + k + 1 <= b->cap) return 1;
    size_t c = b->cap ? b->cap : 1 << 16;
    while (c < b->n + k + 1) {
        if (c > SIZE_MAX / 2) return b->err = 1, 0;
        c *= 2;
    }
    char *q = hbmi_realloc(b->p, c);
    if (!q) return b->err = 1, 0;
    b->p = q;
    b->cap = c;
    return 1;
}

static void put(tb *b, const char *s, size_t k) {
    if (k && room(b, k)) memcpy(b->p + b->n, s, k), b->n += k;
}
#define PUT(b, lit) put((b), (lit), sizeof(lit) - 1)
static void put_c(tb *b, char c) {
    if (room(b, 1)) b->p[b->n++] = c;
}
static void put_s(tb *b, const char *s) { put(b, s, strlen(s)); }
static void put_hs(tb *b, hbmi_str s) { put(b, s.p, s.n); }

static void put_int(tb *b, int64_t v) {
    char t[24];
    int k = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do t[k++] = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0) t[k++] = '-';
    if (!room(b, (size_t)k)) return;
    while (k) b->p[b->n++] = t[--k];
}

static void put_ints(tb *b, const int64_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i) put_c(b, ',');
        put_int(b, v[i]);
    }
}

/* "{1,0}" */
static void put_brace_ints(tb *b, const int64_t *v, size_t n) {
    put_c(b, '{');
    put_ints(b, v, n);
    put_c(b, '}');
}

/* s as absl::CEscape writes it (XLA's quoted strings): \n \r \t \" \' \\, other bytes outside
 * printable ASCII as three octal digits */
static void put_esc(tb *b, const char *s, size_t n) {
    if (!room(b, n)) return;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '"' ? "\\\"" : c == '\'' ? "\\'"
                        : c == '\\' ? "\\\\" : NULL;
        if (e) {
            put(b, e, 2);
        } else if (c < 0x20 || c >= 0x7f) {
            char o[4] = {'\\', (char)('0' + (c >> 6)), (char)('0' + ((c >> 3) & 7)), (char)('0' + (c & 7))};
            put(b, o, 4);
        } else {
            put_c(b, (char)c);
        }
    }
}

static void put_quoted(tb *b, const char *s, size_t n) {
    put_c(b, '"');
    put_esc(b, s, n);
    put_c(b, '"');
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
static void put_shape(tb *b, const Hbmpb__ShapeProto *sp, int layout, int depth) {
    if (depth > 80) return;
    if (sp->element_type == 13) {
        put_c(b, '(');
        for (size_t i = 0; i < sp->n_tuple_shapes; i++) {
            if (i) PUT(b, ", ");
            put_shape(b, sp->tuple_shapes[i], layout, depth + 1);
        }
        put_c(b, ')');
        return;
    }
    put_s(b, type_name(sp->element_type));
    put_c(b, '[');
    for (size_t i = 0; i < sp->n_dimensions; i++) {
        if (i) put_c(b, ',');
        if (i < sp->n_is_dynamic_dimension && sp->is_dynamic_dimension[i]) PUT(b, "<=");
        put_int(b, sp->dimensions[i]);
    }
    put_c(b, ']');
    const Hbmpb__LayoutProto *l = sp->layout;
    if (!layout || !l) return;
    int extra = l->n_tiles || l->element_size_in_bits || l->memory_space;
    if (!sp->n_dimensions && !extra) return;
    put_c(b, '{');
    put_ints(b, l->minor_to_major, l->n_minor_to_major);
    if (extra) {
        put_c(b, ':');
        if (l->n_tiles) put_c(b, 'T');
        for (size_t t = 0; t < l->n_tiles; t++) {
            const Hbmpb__TileProto *tp = l->tiles[t];
            put_c(b, '(');
            for (size_t j = 0; j < tp->n_dimensions; j++) {
                if (j) put_c(b, ',');
                if (tp->dimensions[j] < 0) put_c(b, '*'); /* a combined dimension */
                else put_int(b, tp->dimensions[j]);
            }
            put_c(b, ')');
        }
        if (l->element_size_in_bits) PUT(b, "E("), put_int(b, l->element_size_in_bits), put_c(b, ')');
        if (l->memory_space) PUT(b, "S("), put_int(b, l->memory_space), put_c(b, ')');
    }
    put_c(b, '}');
}

static int cmp_attr(const void *x, const void *y) {
    const Hbmpb__FrontendAttributes__MapEntry *a = *(const Hbmpb__FrontendAttributes__MapEntry *const *)x,
                                               *c = *(const Hbmpb__FrontendAttributes__MapEntry *const *)y;
    return strcmp(a->key, c->key);
}

/* frontend_attributes={a="1",b="2"}, keys in order (XLA prints its map sorted) */
static void put_frontend(tb *b, const Hbmpb__FrontendAttributes *fa) {
    if (!fa || !fa->n_map) return;
    Hbmpb__FrontendAttributes__MapEntry **e = hbmi_malloc(sizeof *e * fa->n_map);
    if (!e) {
        b->err = 1;
        return;
    }
    memcpy(e, fa->map, sizeof *e * fa->n_map);
    hbmi_qsort(e, fa->n_map, sizeof *e, cmp_attr);
    PUT(b, ", frontend_attributes={");
    for (size_t i = 0; i < fa->n_map; i++) {
        if (i) put_c(b, ',');
        put_s(b, e[i]->key);
        put_c(b, '=');
        put_quoted(b, e[i]->value, strlen(e[i]->value));
    }
    put_c(b, '}');
    hbmi_free(e);
}

/* {1}: (0, {}) */
static void put_index(tb *b, const int64_t *v, size_t n) { put_brace_ints(b, v, n); }

/* ConvolutionDimensionNumbersToString: dim_labels=b01f_01io->b01f */
static void put_dim_labels(tb *b, const Hbmpb__ConvolutionDimensionNumbers *d) {
    size_t ns = d->n_input_spatial_dimensions;
    if (ns > 9 || d->n_kernel_spatial_dimensions != ns || d->n_output_spatial_dimensions != ns) return;
    char in[12], k[12], out[12];
    size_t r = ns + 2;
    memset(in, '?', r), memset(k, '?', r), memset(out, '?', r);
#define SET(arr, i, ch) do { if ((i) < 0 || (uint64_t)(i) >= r) return; (arr)[i] = (ch); } while (0)
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
    PUT(b, ", dim_labels=");
    put(b, in, r);
    put_c(b, '_');
    put(b, k, r);
    PUT(b, "->");
    put(b, out, r);
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
static void put_called(tb *b, const hbm_hlo_module *m, const hbmi_instr *in, hbmi_called_role role, const char *key,
                       int braces) {
    size_t n = 0;
    for (uint32_t k = 0; k < in->n_called; k++) n += in->called_role[k] == role;
    if (!n) return;
    PUT(b, ", ");
    put_s(b, key);
    put_c(b, '=');
    if (braces || n > 1) put_c(b, '{');
    for (uint32_t k = 0, i = 0; k < in->n_called; k++) {
        if (in->called_role[k] != role) continue;
        if (i++) PUT(b, ", ");
        put_c(b, '%');
        put_hs(b, m->comps[in->called[k]].name);
    }
    if (braces || n > 1) put_c(b, '}');
}

/* instruction in of cc from ip; at[0], at[1]: where its name and opcode are written */
static void put_instr(tb *b, hbm_hlo_module *m, hbmi_comp *cc, hbmi_instr *in, const Hbmpb__HloInstructionProto *ip,
                      const Hbmpb__HloInstructionAttrs *xa, size_t at[2]) {
    PUT(b, "  ");
    size_t off = b->n;
    if (in->is_root) PUT(b, "ROOT ");
    put_c(b, '%');
    size_t name_at = b->n;
    put_hs(b, in->name);
    PUT(b, " = ");
    put_shape(b, ip->shape, 1, 0);
    put_c(b, ' ');
    size_t opc_at = b->n;
    put_hs(b, in->opcode);
    put_c(b, '(');
    if (in->op == HOP_PARAMETER) {
        put_int(b, in->param_no);
    } else if (in->op == HOP_CONSTANT) {
        PUT(b, "{...}"); /* the literal's values are not read; XLA elides large ones the same way */
    } else {
        for (uint32_t k = 0; k < in->n_ops; k++) {
            if (k) PUT(b, ", ");
            put_c(b, '%');
            put_hs(b, cc->ins[in->ops[k]].name);
        }
    }
    put_c(b, ')');
    /* the opcode's own attributes (ExtraAttributesToStringImpl) */
    if (in->op == HOP_FUSION && ip->fusion_kind[0]) PUT(b, ", kind="), put_s(b, ip->fusion_kind);
    if (xa->n_dimensions || is(in->opcode, "broadcast"))
        PUT(b, ", dimensions="), put_brace_ints(b, xa->dimensions, xa->n_dimensions);
    if (xa->n_slice_dimensions) {
        PUT(b, ", slice={");
        for (size_t k = 0; k < xa->n_slice_dimensions; k++) {
            const Hbmpb__HloInstructionAttrs__SliceDimensions *sd = xa->slice_dimensions[k];
            if (k) PUT(b, ", ");
            put_c(b, '[');
            put_int(b, sd->start);
            put_c(b, ':');
            put_int(b, sd->limit);
            if (sd->stride != 1) put_c(b, ':'), put_int(b, sd->stride);
            put_c(b, ']');
        }
        put_c(b, '}');
    }
    if (xa->n_dynamic_slice_sizes)
        PUT(b, ", dynamic_slice_sizes="), put_brace_ints(b, xa->dynamic_slice_sizes, xa->n_dynamic_slice_sizes);
    if (in->op == HOP_GTE) PUT(b, ", index="), put_int(b, in->gte_index);
    if (xa->comparison_direction[0]) PUT(b, ", direction="), put_s(b, xa->comparison_direction);
    const Hbmpb__DotDimensionNumbers *dd = xa->dot_dimension_numbers;
    if (dd) {
        if (dd->n_lhs_batch_dimensions)
            PUT(b, ", lhs_batch_dims="), put_brace_ints(b, dd->lhs_batch_dimensions, dd->n_lhs_batch_dimensions);
        PUT(b, ", lhs_contracting_dims=");
        put_brace_ints(b, dd->lhs_contracting_dimensions, dd->n_lhs_contracting_dimensions);
        if (dd->n_rhs_batch_dimensions)
            PUT(b, ", rhs_batch_dims="), put_brace_ints(b, dd->rhs_batch_dimensions, dd->n_rhs_batch_dimensions);
        PUT(b, ", rhs_contracting_dims=");
        put_brace_ints(b, dd->rhs_contracting_dimensions, dd->n_rhs_contracting_dimensions);
    }
    if (xa->convolution_dimension_numbers) put_dim_labels(b, xa->convolution_dimension_numbers);
    if (xa->n_fft_length) PUT(b, ", fft_length="), put_brace_ints(b, xa->fft_length, xa->n_fft_length);
    if (xa->channel_id > 0) PUT(b, ", channel_id="), put_int(b, xa->channel_id);
    if (xa->constrain_layout) PUT(b, ", constrain_layout=true");
    if (ip->custom_call_target[0])
        PUT(b, ", custom_call_target="), put_quoted(b, ip->custom_call_target, strlen(ip->custom_call_target));
    if (in->n_alias) {
        PUT(b, ", output_to_operand_aliasing={");
        for (uint32_t k = 0; k < ip->n_output_operand_aliasing; k++) {
            const Hbmpb__OutputOperandAliasing *a = ip->output_operand_aliasing[k];
            if (k) PUT(b, ", ");
            put_index(b, a->output_shape_index, a->n_output_shape_index);
            PUT(b, ": (");
            put_int(b, a->operand_index);
            PUT(b, ", ");
            put_index(b, a->operand_shape_index, a->n_operand_shape_index);
            put_c(b, ')');
        }
        put_c(b, '}');
    }
    /* the called computations, as the text parser gives them their roles */
    put_called(b, m, in, HBMI_CALLED_CONDITION, "condition", 0);
    put_called(b, m, in, HBMI_CALLED_BODY, "body", 0);
    put_called(b, m, in, HBMI_CALLED_BRANCH, "branch_computations", 1);
    if (is(in->opcode, "select-and-scatter") && in->n_called == 2 && in->called_role[0] == HBMI_CALLED_APPLY &&
        in->called_role[1] == HBMI_CALLED_APPLY) {
        PUT(b, ", select=%"), put_hs(b, m->comps[in->called[0]].name);
        PUT(b, ", scatter=%"), put_hs(b, m->comps[in->called[1]].name);
    } else {
        put_called(b, m, in, HBMI_CALLED_APPLY, "to_apply", 0);
    }
    put_called(b, m, in, HBMI_CALLED_CALLS, in->op == HOP_CUSTOM_CALL ? "called_computations" : "calls",
               in->op == HOP_CUSTOM_CALL);
    put_frontend(b, ip->frontend_attributes);
    const Hbmpb__OpMetadata *md = ip->metadata;
    if (md && (md->op_type[0] || in->meta_op_name.n || in->meta_source_file.n || in->meta_source_line)) {
        PUT(b, ", metadata={");
        int sp = 0;
        if (md->op_type[0]) PUT(b, "op_type="), put_quoted(b, md->op_type, strlen(md->op_type)), sp = 1;
        /* the model's strings: escaped as the text parser keeps them; the source file is the one
         * the stack frames name where the metadata gives a frame, not a file */
        if (in->meta_op_name.n)
            put(b, &" op_name=\""[!sp], sp ? 10 : 9), put_hs(b, in->meta_op_name), put_c(b, '"'), sp = 1;
        if (in->meta_source_file.n)
            put(b, &" source_file=\""[!sp], sp ? 14 : 13), put_hs(b, in->meta_source_file), put_c(b, '"'), sp = 1;
        if (in->meta_source_line) put(b, &" source_line="[!sp], sp ? 13 : 12), put_int(b, in->meta_source_line);
        put_c(b, '}');
    }
    if (ip->backend_config.len) { /* a JSON object as it is, anything else quoted */
        PUT(b, ", backend_config=");
        if (ip->backend_config.data[0] == '{') put(b, (const char *)ip->backend_config.data, ip->backend_config.len);
        else put_quoted(b, (const char *)ip->backend_config.data, ip->backend_config.len);
    }
    put_c(b, '\n');
    in->off = off;
    at[0] = name_at;
    at[1] = opc_at;
}

/* (a: f32[2], b: s32[]) -> f32[2]: the parameters by number, shapes without layout; with
 * layout (entry_computation_layout): (f32[2]{0}, s32[])->f32[2]{0} */
static void put_signature(tb *b, const hbm_hlo_module *m, uint32_t ci, const Hbmpb__HloInstructionProto *const *src,
                          int layout) {
    const hbmi_comp *cc = &m->comps[ci];
    uint32_t np = 0;
    for (uint32_t j = 0; j < cc->n; j++) np += cc->ins[j].op == HOP_PARAMETER;
    uint32_t *at = hbmi_malloc(sizeof *at * (np + 1u));
    if (!at) {
        b->err = 1;
        return;
    }
    for (uint32_t k = 0; k < np; k++) at[k] = UINT32_MAX;
    for (uint32_t j = 0; j < cc->n; j++) {
        const hbmi_instr *in = &cc->ins[j];
        if (in->op == HOP_PARAMETER && in->param_no >= 0 && in->param_no < (int64_t)np && at[in->param_no] == UINT32_MAX)
            at[in->param_no] = j;
    }
    put_c(b, '(');
    for (uint32_t k = 0, done = 0; k < np; k++) {
        if (at[k] == UINT32_MAX) continue;
        if (done++) PUT(b, ", ");
        if (!layout) put_hs(b, cc->ins[at[k]].name), PUT(b, ": ");
        put_shape(b, src[at[k]]->shape, layout, 0);
    }
    hbmi_free(at);
    if (layout) PUT(b, ")->");
    else PUT(b, ") -> ");
    put_shape(b, src[cc->root]->shape, layout, 0);
}

hbm_status hbmi_proto_text(hbm_hlo_module *m) {
    if (!m || !m->pb_module || m->text_full) return HBM_OK;
    const Hbmpb__HloModuleProto *mp = m->pb_module;
    const Hbmpb__HloInstructionProto *const *src = (const Hbmpb__HloInstructionProto *const *)m->pb_ins;
    tb b = {0};
    size_t total = 0;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) total += m->comps[ci].n;
    size_t *base = hbmi_malloc(sizeof *base * (m->n_comps + 1u)), *comp_at = hbmi_malloc(sizeof *comp_at * (m->n_comps + 1u));
    size_t(*at)[2] = hbmi_malloc(sizeof *at * (total + 1));
    if (!base || !comp_at || !at) b.err = 1;
    for (uint32_t ci = 0, g = 0; !b.err && ci < m->n_comps; g += m->comps[ci].n, ci++) base[ci] = g;
    /* the header (HloModule::ToString) */
    PUT(&b, "HloModule ");
    size_t name_at = b.n;
    put_hs(&b, m->name);
    if (m->is_scheduled) PUT(&b, ", is_scheduled=true");
    const Hbmpb__HloInputOutputAliasProto *io = mp->input_output_alias;
    if (io && io->n_entries) {
        PUT(&b, ", input_output_alias={ ");
        for (size_t k = 0; k < io->n_entries; k++) {
            const Hbmpb__HloInputOutputAliasProto__AliasEntryProto *a = io->entries[k];
            if (k) PUT(&b, ", ");
            put_index(&b, a->output_shape_index, a->n_output_shape_index);
            PUT(&b, ": (");
            put_int(&b, a->parameter_number);
            PUT(&b, ", ");
            put_index(&b, a->parameter_shape_index, a->n_parameter_shape_index);
            put_s(&b, a->kind == 2 ? ", must-alias)" : ", may-alias)");
        }
        PUT(&b, " }");
    }
    const Hbmpb__HloBufferDonorProto *bd = mp->buffer_donor;
    if (bd && bd->n_entries) {
        PUT(&b, ", buffer_donor={ ");
        for (size_t k = 0; k < bd->n_entries; k++) {
            if (k) PUT(&b, ", ");
            put_c(&b, '(');
            put_int(&b, bd->entries[k]->parameter_number);
            PUT(&b, ", ");
            put_index(&b, bd->entries[k]->parameter_shape_index, bd->entries[k]->n_parameter_shape_index);
            put_c(&b, ')');
        }
        PUT(&b, " }");
    }
    if (!b.err) {
        PUT(&b, ", entry_computation_layout={");
        put_signature(&b, m, m->entry, src + base[m->entry], 1);
        put_c(&b, '}');
    }
    put_frontend(&b, mp->frontend_attributes);
    PUT(&b, "\n\n");
    /* the computations, in the proto's order (callees first, the entry last) */
    for (uint32_t ci = 0; ci < m->n_comps && !b.err; ci++) {
        hbmi_comp *cc = &m->comps[ci];
        comp_at[ci] = b.n;
        if (cc->is_entry) PUT(&b, "ENTRY ");
        put_c(&b, '%');
        put_hs(&b, cc->name);
        put_c(&b, ' ');
        put_signature(&b, m, ci, src + base[ci], 0);
        PUT(&b, " {\n");
        for (uint32_t j = 0; j < cc->n; j++) {
            hbmi_arena scratch = {0};
            Hbmpb__HloInstructionAttrs none = HBMPB__HLO_INSTRUCTION_ATTRS__INIT;
            const Hbmpb__HloInstructionProto *ip = src[base[ci] + j];
            put_instr(&b, m, cc, &cc->ins[j], ip, attrs_of(ip, &scratch, &none), at[base[ci] + j]);
            hbmi_arena_free(&scratch);
        }
        put_c(&b, '}');
        if (cc->exec_thread.n && !is(cc->exec_thread, "main"))
            PUT(&b, ", execution_thread="), put_quoted(&b, cc->exec_thread.p, cc->exec_thread.n);
        PUT(&b, "\n\n");
    }
    if (b.err || !room(&b, 1)) {
        hbmi_free(b.p);
        hbmi_free(base);
        hbmi_free(comp_at);
        hbmi_free(at);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory writing the module's HLO text");
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
