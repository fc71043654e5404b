/* proto_write.c - an hbm_hlo_module as the xla.HloModuleProto XLA would serialize (the fields
 * hbm reads), for tests and benchmarks: the same module through both readers must plan the
 * same, and a profile of any size can be made from text modules. Tiles are not kept by the
 * model and are not written. Each instruction's text line travels as its backend_config, so
 * the planner's questions to the text (which compiler, an instruction's attributes) get the
 * same answers from the module read back. */
#include <stdio.h>
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

hbm_status hbmi_proto_write_module(const hbm_hlo_module *m, int text_lines, uint8_t **out, size_t *len) {
    wr w = {{0}, 0};
    Hbmpb__HloModuleProto *mp = wa(&w, sizeof *mp);
    if (!mp) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbmpb__hlo_module_proto__init(mp);
    mp->name = wstr(&w, m->name, 0);
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
            if (in->fusion_kind) {
                char *fk = wa(&w, 3);
                if (fk) fk[0] = 'k', fk[1] = in->fusion_kind, ip->fusion_kind = fk;
            }
            if (in->target.n) ip->custom_call_target = wstr(&w, in->target, 1);
            if (in->meta_op_name.n || in->meta_source_file.n || in->meta_source_line) {
                Hbmpb__OpMetadata *md = wa(&w, sizeof *md);
                if (md) {
                    hbmpb__op_metadata__init(md);
                    md->op_name = wstr(&w, in->meta_op_name, 1);
                    md->source_file = wstr(&w, in->meta_source_file, 1);
                    md->source_line = in->meta_source_line;
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
                        if (in->called_role[r] == (q == 0 ? 'b' : 'w')) ip->called_computation_ids[q] = in->called[r] + 1;
                    q++;
                } else {
                    ip->called_computation_ids[k] = in->called[k] + 1;
                }
            }
            ip->n_output_operand_aliasing = in->n_alias;
            ip->output_operand_aliasing = wa(&w, sizeof *ip->output_operand_aliasing * (in->n_alias + 1u));
            for (uint32_t k = 0; k < in->n_alias && ip->output_operand_aliasing; k++)
                ip->output_operand_aliasing[k] = walias(&w, &in->alias[k]);
            if (text_lines && m->text && in->off < m->len) { /* the instruction's text line */
                const char *p = m->text + in->off, *e = memchr(p, '\n', m->len - in->off);
                ip->backend_config.data = (uint8_t *)p;
                ip->backend_config.len = e ? (size_t)(e - p) : m->len - in->off;
            }
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
hbm_status hbmi_proto_write_module(const hbm_hlo_module *m, int text_lines, uint8_t **out, size_t *len) {
    (void)m, (void)text_lines, (void)out, (void)len;
    return hbmi_error(HBM_ERR_NOT_AVAILABLE, "hbm was built without protobuf-c");
}
#endif
