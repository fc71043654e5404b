/* src/hlo/hlo_internal.h - what the HLO readers (parse.c, proto_read.c, proto_text.c,
 * frames.c, shape.c) and the dataflow (dataflow.c) share beyond the module's form
 * (hlo_module.h, which neighbours read): layouts, tiles, the text's stack-frame tables, the
 * protobuf writer. Included only inside src/hlo. */
#ifndef HBM_HLO_INTERNAL_H
#define HBM_HLO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"
#include "hbm/hlo.h"
#include "hbm/proto.h"
#include "hlo/hlo_module.h"
#include "hlo/hlo_profile.h"

/* hbmi_shape_equal and the same minor_to_major order in every array (XLA's ShapeUtil::Equal
 * on untiled layouts) */
int hbmi_shape_equal_layout(const hbmi_shape *a, const hbmi_shape *b);
/* 0 for the default order (n-1, ..., 0) or none, else 1 + a hash of the order */
uint64_t hbmi_layout_key(const int64_t *m2m, uint32_t n_m2m);

/* m as a serialized xla.HloModuleProto (*out: hbmi_free), for tests and benchmarks
 * (src/hlo/proto_write.c); attrs: what the model keeps no field for (layouts, backend_config,
 * frontend attributes, dimensions, ...) read from the text into XLA's fields;
 * HBM_ERR_NOT_AVAILABLE without protobuf-c. */
hbm_status hbmi_proto_write_module(const hbm_hlo_module *m, int attrs, uint8_t **out, size_t *len);

/* A layout's split config "SC(d:i1,i2,..)": physical dimension d (major first) cut at the
 * indices; -1: none. */
typedef struct hbmi_split {
    int64_t dim;
    uint32_t n_idx;
    int64_t idx[16];
} hbmi_split;
/* Elements of s once padded to its layout's tiles (0 when untiled or not computable). */
uint64_t hbmi_tiled_elements(const hbmi_shape *s, const int64_t *m2m, uint32_t n_m2m, const int64_t *tiles,
                             const uint32_t *tile_len, uint32_t n_tiles, const hbmi_split *split);

/* --- source lines from stack frames (src/hlo/frames.c) ------------------------------------ */
/* One frame of a module's stack-frame tables: its file (file_len bytes, not terminated; as
 * the text writes it, or the protobuf's string), the file's id, the line, the parent frame. */
typedef struct hbmi_frame {
    const char *file;
    size_t file_len;
    long file_id;
    int line;
    long parent;
} hbmi_frame;
typedef int (*hbmi_frame_get)(const void *tables, long frame, hbmi_frame *out); /* 0: no such frame */
/* From frame outward through parent frames: the first whose file is not a wrapper, into *out;
 * its id, or 0 (out zeroed) when every frame is a wrapper or the tables lack one. */
long hbmi_hlo_frame_walk(hbmi_frame_get get, const void *tables, long frame, hbmi_frame *out);
/* The text parser's last step: each instruction whose metadata gives a stack_frame_id and no
 * source file, or a wrapper's, gets the file and line of the walk (a slice of the text's
 * FileNames table); where every frame is a wrapper's and the metadata names no file, the
 * first frame's. The protobuf reader does the same from a StackFrameIndexProto. */
hbm_status hbmi_hlo_text_frames(hbm_hlo_module *m);
/* The first row of the text's table TITLE ("FileNames", "StackFrames", ...), NULL if none;
 * a row's "key=N" value (0 if absent), and its quoted string (*s, length returned). */
const char *hbmi_hlo_table(const hbm_hlo_module *m, const char *title);
long hbmi_hlo_row_field(const char *row, const char *key);
size_t hbmi_hlo_row_string(const char *row, const char **s);

/* 1-based line and column of byte offset off in m's text. */
void hbmi_hlo_where(const hbm_hlo_module *m, size_t off, uint32_t *line, uint32_t *col);

/* Primitive type by name ("f32"): returns hbm_hlo_prim or -1. */
int hbmi_prim_lookup(const char *p, size_t n);
hbmi_op hbmi_op_lookup(const char *p, size_t n);

#endif
