/* src/hlo/dataflow.h - XLA's dataflow, alias and live-range analyses over a parsed module
 * (HloDataflowAnalysis with ssa_form=false, HloAliasAnalysis, HloLiveRange), as buffer
 * assignment uses them. Computations called by while/call/conditional are "sequential"
 * and analysed; fusion and to_apply computations are not (XLA allocates only the fusion's
 * output; embedded computations are thread-local). */
#ifndef HBM_HLO_DATAFLOW_H
#define HBM_HLO_DATAFLOW_H

#include "hlo/hlo_module.h"

typedef struct hbmi_value {
    uint32_t gid;      /* defining instruction (global id) */
    uint32_t node;     /* shape node (flattened shape index) */
    uint32_t buffer;   /* HloBuffer index */
    uint8_t is_tuple;
    uint8_t entry_param;
    uint8_t constant;
    uint8_t has_range; /* defined in the flattened schedule */
    uint8_t wrapped;   /* defined by the op an async-start wraps (its {1} output) */
    uint32_t post;     /* post-order position of the defining instruction */
    uint64_t size;
    int64_t start, end; /* live range, inclusive, in schedule time */
    uint32_t end_pos;   /* gid of the position with the latest time */
    uint32_t n_uses, n_pos;
    uint32_t *uses;     /* gids of using instructions (deduplicated) */
    uint32_t *pos;      /* gids of the positions (instructions holding it) */
} hbmi_value;

typedef struct hbmi_buffer {
    uint32_t n_values;
    uint32_t *values;  /* value ids, ascending */
    uint64_t size;     /* max over the values */
    uint8_t live_out;
    uint32_t min_post; /* smallest post-order position of its values' instructions */
} hbmi_buffer;

typedef struct hbmi_vset {
    uint32_t n;
    uint32_t one;
    uint32_t *many;
} hbmi_vset;

typedef struct hbmi_df {
    hbm_hlo_module *m;
    hbmi_arena arena;
    unsigned pointer_size;
    unsigned tuple_align;
    uint8_t fusion_shapes_equal; /* XLA:CPU: a fusion shares an operand of its own shape only */
    uint32_t n_gid;
    uint32_t *gid_comp, *gid_idx;
    uint32_t *comp_base; /* gid of instruction 0 of each computation */
    uint32_t n_pos;
    hbmi_vset *vs;       /* per position */
    uint32_t n_values;
    hbmi_value *values;
    uint32_t n_buffers;
    hbmi_buffer *buffers;
    uint32_t n_flat;      /* flattened schedule length = schedule end time */
    uint32_t *flat;       /* gids in schedule order */
} hbmi_df;

/* tuple_align: a tuple's table rounds up to it (XLA:TPU), 0 or 1: none */
hbm_status hbmi_df_run(hbm_hlo_module *m, unsigned pointer_size, unsigned tuple_align, hbmi_df **out);
/* Bytes of a value of shape sub under df's tuple rules. */
uint64_t hbmi_df_shape_bytes(const hbmi_df *df, const hbmi_shape *sub);
void hbmi_df_free(hbmi_df *df);

static inline hbmi_instr *hbmi_df_instr(const hbmi_df *df, uint32_t gid) {
    return &df->m->comps[df->gid_comp[gid]].ins[df->gid_idx[gid]];
}
static inline const hbmi_vset *hbmi_df_set(const hbmi_df *df, uint32_t gid, uint32_t node) {
    return &df->vs[hbmi_df_instr(df, gid)->pos_base + node];
}
static inline uint32_t hbmi_vset_at(const hbmi_vset *s, uint32_t i) { return s->n == 1 ? s->one : s->many[i]; }

/* in is an async-start whose wrapped computation runs on the main thread (the sugar
 * "all-to-all-start" etc., or async-start with a main-thread computation): its {1} output is
 * defined by the wrapped op, scheduled just before the start. */
int hbmi_df_async_wrapped(const hbm_hlo_module *m, const hbmi_instr *in);

/* user directly uses operand (gid) */
int hbmi_df_is_user_of(const hbmi_df *df, uint32_t user, uint32_t operand);
/* XLA's CanShareOperandBufferWithUser with the GPU fusion hint: may the value of user at
 * user_node reuse the buffer of operand's value at operand_node? */
int hbmi_df_can_share(const hbmi_df *df, uint32_t operand, uint32_t operand_node, uint32_t user,
                      uint32_t user_node);

/* Is node (flattened shape index) of entry parameter param, whose shape is ps, named in the
 * module's input_output_alias (a donated buffer)? */
int hbmi_param_node_aliased(const hbm_hlo_module *m, int64_t param, uint32_t node, const hbmi_shape *ps);

#endif
