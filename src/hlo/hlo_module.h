/* src/hlo/hlo_module.h - the parsed form of an HLO module, as hlo's neighbours read it: the
 * buffer assignment (src/plan), hbm fit (src/fit) and, through dataflow.h, both over the
 * dataflow. Shapes, opcodes, instructions and computations, XLA's own assignment where the
 * input carries one; everything lives in one arena owned by the module, strings are slices of
 * the module's own copy of the text. The parser's own declarations stay in hlo_internal.h
 * (src/hlo only), which includes this. */
#ifndef HBM_HLO_MODULE_H
#define HBM_HLO_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/internal.h"
#include "hbm/hlo.h"
#include "hbm/proto.h"

typedef struct hbmi_str {
    const char *p;
    uint32_t n;
} hbmi_str;

/* --- shapes ---------------------------------------------------------------------------- */
#define HBMI_PRIM_TUPLE 255

typedef struct hbmi_shape {
    uint8_t prim;      /* hbm_hlo_prim value, or HBMI_PRIM_TUPLE */
    uint8_t dynamic;   /* some dimension is bounded-dynamic (<=N) */
    uint16_t elem_bits; /* element_size_in_bits from the layout's E(n), 0 if none */
    uint32_t n;        /* rank, or number of tuple elements */
    int64_t *dims;
    struct hbmi_shape *elems;
    int64_t memory_space; /* S(n) in the layout, 0 = device default */
    uint64_t tiled_elems; /* elements once padded to the layout's tiles (T(8,128)...), 0 if untiled */
    uint64_t layout_key;  /* minor_to_major as hbmi_layout_key gives it: 0 the default (major first) */
    uint32_t nodes;    /* nodes of the shape tree (1 for an array) */
} hbmi_shape;

/* Byte size as XLA's GPU compiler counts it (tuples: pointer_size per element). */
uint64_t hbmi_shape_bytes(const hbmi_shape *s, unsigned pointer_size);
/* The most bytes a shape (and all of a module's values together) may hold: XLA's sizes
 * are int64 (ValidateShapeSize, xla/shape_util.cc); the parser refuses more. */
#define HBMI_MAX_BYTES ((uint64_t)INT64_MAX)
/* The subshape at flattened pre-order node k (0 = the shape itself). */
const hbmi_shape *hbmi_shape_node(const hbmi_shape *s, uint32_t k);
/* Node offset of tuple element i of s (s must be a tuple). */
uint32_t hbmi_shape_child(const hbmi_shape *s, uint32_t i);
int hbmi_shape_equal(const hbmi_shape *a, const hbmi_shape *b);
/* "f32[300000,50]" / "(f32[2], s32[])" without layouts, into buf (truncated). */
void hbmi_shape_print(const hbmi_shape *s, char *buf, size_t cap);
uint64_t hbmi_shape_elements(const hbmi_shape *s);

/* --- opcodes ---------------------------------------------------------------------------- */
typedef enum hbmi_op {
    HOP_OTHER,
    HOP_PARAMETER,
    HOP_CONSTANT,
    HOP_TUPLE,
    HOP_GTE,
    HOP_BITCAST,
    HOP_WHILE,
    HOP_CALL,
    HOP_CONDITIONAL,
    HOP_FUSION,
    HOP_CUSTOM_CALL,
    HOP_ASYNC_START,  /* async-start and the "<op>-start" sugar of wrapped async ops */
    HOP_ASYNC_UPDATE,
    HOP_ASYNC_DONE,   /* async-done and "<op>-done" */
    HOP_COPY,
    HOP_COPY_START,
    HOP_COPY_DONE,
    HOP_LEGACY_START, /* all-gather-start, collective-permute-start: ((in) or in, out, ...) */
    HOP_ALL_REDUCE_START,
    HOP_ALL_REDUCE_DONE,
    HOP_SEND,
    HOP_RECV,
    HOP_SEND_DONE,
    HOP_RECV_DONE,
    HOP_DUS,
    HOP_SCATTER,
    HOP_DOMAIN,
    HOP_OPT_BARRIER,
    HOP_ADD_DEPENDENCY,
    HOP_ELEMENTWISE, /* IsElementwise in XLA (copy excluded: HOP_COPY) */
    HOP_SORT,
    HOP_TRIANGULAR_SOLVE,
    HOP_COUNT_
} hbmi_op;

/* A fusion's kind (kind=kLoop, kInput, kOutput, kCustom); OTHER: a kind XLA may add. */
typedef enum hbmi_fusion_kind {
    HBMI_FUSION_NONE = 0,
    HBMI_FUSION_LOOP,
    HBMI_FUSION_INPUT,
    HBMI_FUSION_OUTPUT,
    HBMI_FUSION_CUSTOM,
    HBMI_FUSION_OTHER,
} hbmi_fusion_kind;
/* The kind named by "kLoop" etc. (n bytes, not terminated); NONE when n is 0. */
hbmi_fusion_kind hbmi_fusion_kind_of(const char *p, size_t n);
/* Its name as XLA writes it ("kLoop"); "" for NONE and OTHER. */
const char *hbmi_fusion_kind_name(hbmi_fusion_kind k);

/* What an instruction calls a computation for (the text's attribute that names it). */
typedef enum hbmi_called_role {
    HBMI_CALLED_CALLS = 1, /* calls=, called_computations=: fusion, custom call, async */
    HBMI_CALLED_BODY,      /* a while's body= */
    HBMI_CALLED_CONDITION, /* a while's condition= */
    HBMI_CALLED_BRANCH,    /* a conditional's branch_computations= (true_, false_) */
    HBMI_CALLED_APPLY,     /* to_apply=: call's callee, reducers, comparators, select/scatter */
} hbmi_called_role;

/* How the dataflow runs a computation (dataflow.c). */
typedef enum hbmi_comp_kind {
    HBMI_COMP_UNUSED = 0,   /* called by nothing the entry reaches */
    HBMI_COMP_SEQUENTIAL,   /* scheduled and analysed: entry, while, call, conditional */
    HBMI_COMP_FUSION,       /* a fusion's body: only the fusion's output is allocated */
    HBMI_COMP_EMBEDDED,     /* to_apply of reducers etc.: thread-local */
    HBMI_COMP_ASYNC,        /* an async-start's wrapped computation */
} hbmi_comp_kind;

/* The kind of allocation XLA put a logical buffer in (its BufferAllocationProto's flags). */
typedef enum hbmi_xla_cat {
    HBMI_XLA_NONE = 0, /* unassigned, or in another memory space */
    HBMI_XLA_PARAMETER,
    HBMI_XLA_OUTPUT,
    HBMI_XLA_CONSTANT,
    HBMI_XLA_THREAD_LOCAL,
    HBMI_XLA_TEMP,
} hbmi_xla_cat;

/* The compiler a module was built by, when its input says (a profile's device planes). */
typedef enum hbmi_hlo_backend {
    HBMI_HLO_BACKEND_NONE = 0,
    HBMI_HLO_BACKEND_GPU,
    HBMI_HLO_BACKEND_CPU,
    HBMI_HLO_BACKEND_TPU,
} hbmi_hlo_backend;

/* One output_to_operand_aliasing / input_output_alias entry. */
#define HBMI_MAX_INDEX 8
typedef struct hbmi_alias {
    uint8_t out_len, in_len;
    int32_t out[HBMI_MAX_INDEX];
    int64_t operand; /* operand number, or parameter number */
    int32_t in[HBMI_MAX_INDEX];
} hbmi_alias;

typedef struct hbmi_instr {
    hbmi_str name;
    hbmi_str opcode;  /* as written ("all-to-all-start") */
    uint8_t op;       /* hbmi_op */
    uint8_t is_root;
    uint8_t fusion_kind; /* hbmi_fusion_kind */
    uint8_t analyzed; /* in a sequential computation (set by the dataflow) */
    uint8_t synthetic; /* a get-tuple-element for an operand written "%x#N": no line of its own */
    uint8_t meta_walked; /* meta_source_file/line come from the text's stack frames */
    hbmi_shape *shape;
    uint32_t n_ops;
    uint32_t *ops;    /* operand instruction indices in the same computation */
    uint32_t n_called;
    uint32_t *called; /* computation indices: calls/body/condition/branches/to_apply */
    uint8_t *called_role; /* hbmi_called_role of each */
    hbmi_str *called_names; /* until resolved */
    hbmi_str *op_names;     /* operand names until resolved */
    int64_t param_no;
    int64_t gte_index;
    hbmi_str meta_op_name, meta_source_file;
    int32_t meta_source_line;
    int32_t meta_frame; /* metadata stack_frame_id: a row of the text's StackFrames; 0 none */
    hbmi_str target; /* custom_call_target */
    uint32_t n_alias;
    hbmi_alias *alias; /* output_to_operand_aliasing */
    size_t off; /* byte offset of the instruction in the text */
    /* filled by the dataflow */
    uint32_t n_users;
    uint32_t *users;
    uint32_t pos_base; /* first position id of this instruction's shape nodes */
    int64_t time;      /* flattened schedule time, -1 if not scheduled */
    uint32_t post;     /* post-order position */
} hbmi_instr;

typedef struct hbmi_comp {
    hbmi_str name;
    int is_entry;
    uint32_t n;
    hbmi_instr *ins;
    uint32_t root;
    hbmi_str exec_thread;
    size_t off;
    /* dataflow */
    uint8_t kind; /* hbmi_comp_kind */
    int64_t span_start, span_end;
    uint32_t *params; /* parameter instruction index by number, n_params entries */
    uint32_t n_params;
} hbmi_comp;

/* XLA's own buffer assignment of a module read from a protobuf (src/hlo/proto.c). */
typedef struct hbmi_xla_lbuf { /* one LogicalBufferProto (device memory) */
    int64_t id;
    uint64_t size;
    int64_t alloc;  /* BufferAllocationProto index, -1 unassigned */
    int64_t offset;
    hbmi_xla_cat cat;
    int64_t comp, instr; /* defining instruction (indices in the module), -1 unknown */
    uint32_t node;  /* its shape index as a flattened node */
    char index[32]; /* "{1,0}" */
} hbmi_xla_lbuf;

typedef struct hbmi_xla {
    hbm_xla_stats st;
    uint32_t n_lbufs;
    hbmi_xla_lbuf *lbufs;
    uint32_t n_peak;
    uint32_t *peak;     /* lbufs live at the heap trace's peak, largest first */
    uint64_t alignment; /* the alignment XLA's build used, as its offsets show (128, 256); 0 */
    int alignment_other; /* shown by another module's offsets in the same file */
} hbmi_xla;

struct hbm_hlo_module {
    hbmi_arena arena;
    char *text;
    size_t len;
    char path[256];
    hbmi_str name;
    int is_scheduled;
    uint32_t n_comps;
    hbmi_comp *comps;
    uint32_t entry;
    uint32_t n_io_alias;
    hbmi_alias *io_alias; /* out = output index, operand = parameter number, in = param index */
    uint32_t n_donors;
    hbmi_alias *donors;   /* buffer_donor entries: operand = parameter, in = index */
    uint64_t host_bytes;  /* bytes of host memory held (text + arena) */
    hbmi_xla *xla;        /* XLA's assignment (protobuf inputs that carry one), in the arena */
    hbmi_hlo_backend backend_hint; /* the compiler, known from a profile's devices */
    int tuple_refs;       /* the text writes operands "%x#N": XLA's print form from 2026 builds */
    /* a module read from protobuf: its unpacked xla.HloModuleProto (in the arena) and each
     * instruction's proto in the model's order (computation by computation), from which
     * hbmi_proto_text writes the module's whole HLO text; NULL for a module read as text */
    const void *pb_module;
    const void **pb_ins;
    int text_full;        /* hbmi_proto_text has written the whole text */
    char *text_old;       /* the text hbmi_proto_text replaced, freed with the module */
};

/* A module read from protobuf holds, until this is called, only the planner's one-line
 * summaries as its text (src/hlo/proto_read.c). This writes its whole HLO text as XLA
 * prints it (src/hlo/proto_text.c) and points every instruction (off, name, opcode) and the
 * module's name into it; nothing for a module that has its text. */
hbm_status hbmi_proto_text(hbm_hlo_module *m);

/* Whether the n bytes at s (not terminated) contain the word w: names in op_name, file paths,
 * a module's text. */
int hbmi_span_has(const char *s, size_t n, const char *w);

/* --- source lines from stack frames (src/hlo/frames.c) ------------------------------------ */
/* A file of a wrapper (contextlib.py, functools.py) or a library (JAX's, Flax's internals,
 * site-packages, dist-packages): not the user's line. */
int hbmi_hlo_wrapper_file(const char *file, size_t n);
/* The user's file and line for in from the text's tables (frames.c's walk); 0 (file "") when
 * the text gives in no frame or no frame outside wrappers. */
int hbmi_hlo_frame_where(const hbm_hlo_module *m, const hbmi_instr *in, char *file, size_t cap, int *line);

#endif
