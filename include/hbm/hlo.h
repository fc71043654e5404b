/* hbm/hlo.h - read XLA HLO text exactly as XLA prints it (compiled.as_text(),
 * --xla_dump_to *after_optimizations.txt, torch_xla dumps).
 *
 *   hbm_hlo_module *m;
 *   if (hbm_hlo_parse_file("module.hlo", &m) != HBM_OK)
 *       fprintf(stderr, "%s\n", hbm_last_error());   // "module.hlo:12:7: expected ..."
 *   printf("%s has %zu computations\n", hbm_hlo_module_name(m), hbm_hlo_computation_count(m));
 *   hbm_hlo_module_free(m);
 *
 * The parser reads every construct real dumps contain (tuple shapes with index comments,
 * layouts with tiling and memory spaces, metadata, backend configs, shardings, elided
 * constants, input_output_alias, buffer_donor, stack-frame sections, execution threads);
 * attributes it does not need are skipped. Syntax errors report file:line:column and the
 * offending text. hbm/plan.h turns a module into XLA's buffer assignment.
 */
#ifndef HBM_HLO_H
#define HBM_HLO_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbm_hlo_module hbm_hlo_module;

/* XLA's primitive types. */
#define HBM_HLO_PRIM_LIST(X)                                                                \
    X(PRED, "pred", 8) X(S2, "s2", 2) X(S4, "s4", 4) X(S8, "s8", 8) X(S16, "s16", 16)       \
    X(S32, "s32", 32) X(S64, "s64", 64) X(U2, "u2", 2) X(U4, "u4", 4) X(U8, "u8", 8)        \
    X(U16, "u16", 16) X(U32, "u32", 32) X(U64, "u64", 64) X(F16, "f16", 16)                \
    X(BF16, "bf16", 16) X(F32, "f32", 32) X(F64, "f64", 64) X(C64, "c64", 64)              \
    X(C128, "c128", 128) X(TOKEN, "token", 0) X(F8E5M2, "f8e5m2", 8)                        \
    X(F8E4M3FN, "f8e4m3fn", 8) X(F8E4M3B11FNUZ, "f8e4m3b11fnuz", 8)                         \
    X(F8E5M2FNUZ, "f8e5m2fnuz", 8) X(F8E4M3FNUZ, "f8e4m3fnuz", 8) X(F8E4M3, "f8e4m3", 8)    \
    X(F8E3M4, "f8e3m4", 8) X(F8E8M0FNU, "f8e8m0fnu", 8) X(F4E2M1FN, "f4e2m1fn", 4)          \
    X(OPAQUE, "opaque", 0)

typedef enum hbm_hlo_prim {
#define HBM_HLO_PRIM_ENUM_(n, s, b) HBM_HLO_##n,
    HBM_HLO_PRIM_LIST(HBM_HLO_PRIM_ENUM_)
#undef HBM_HLO_PRIM_ENUM_
    HBM_HLO_PRIM_COUNT_
} hbm_hlo_prim;

/* Bits of one element as stored unpacked (pred = 8, s4 = 4, token = 0), -1 if unknown. */
HBM_API int hbm_hlo_prim_bits(hbm_hlo_prim p);
/* "f32" etc. ("" if out of range). */
HBM_API const char *hbm_hlo_prim_name(hbm_hlo_prim p);

/* Parse text (len bytes, need not be NUL-terminated; it is copied). name is used in error
 * messages ("name:line:col: ..."), may be NULL. */
HBM_API hbm_status hbm_hlo_parse(const char *text, size_t len, const char *name, hbm_hlo_module **out);
HBM_API hbm_status hbm_hlo_parse_file(const char *path, hbm_hlo_module **out);
/* 1 when the file at path starts (after white space) with "HloModule": XLA's HLO text. */
HBM_API int hbm_hlo_file_is_text(const char *path);
HBM_API void hbm_hlo_module_free(hbm_hlo_module *m);

/* Size in bytes of a shape written in HLO syntax ("f32[300000,50]{1,0}", "(f32[2], s32[])",
 * "s4[7]{0:E(4)}"), as XLA's GPU backend counts it (tuple: pointer_size bytes per element,
 * sub-byte types one byte per element unless the layout packs them with E(n)). */
HBM_API hbm_status hbm_hlo_shape_bytes(const char *shape, unsigned pointer_size, uint64_t *bytes);

HBM_API const char *hbm_hlo_module_name(const hbm_hlo_module *m); /* copy in the module */
HBM_API int hbm_hlo_is_scheduled(const hbm_hlo_module *m);
HBM_API size_t hbm_hlo_computation_count(const hbm_hlo_module *m);
HBM_API size_t hbm_hlo_instruction_count(const hbm_hlo_module *m); /* all computations */
/* Host bytes the module holds (its copy of the text plus its arena). */
HBM_API uint64_t hbm_hlo_host_bytes(const hbm_hlo_module *m);

/* Computation i (0-based, in file order): name, instruction count, whether it is ENTRY. */
HBM_API hbm_status hbm_hlo_computation_info(const hbm_hlo_module *m, size_t i, const char **name,
                                            size_t *n_instructions, int *is_entry);

/* What one instruction says about itself. Strings point into the module and are not
 * NUL-terminated beyond their length: use the *_len fields. */
typedef struct hbm_hlo_instruction_info {
    const char *name;       size_t name_len;
    const char *opcode;     size_t opcode_len;
    const char *op_name;    size_t op_name_len;     /* metadata op_name, may be empty */
    const char *source_file; size_t source_file_len;
    int source_line;
    int is_root;
    size_t n_operands;
    uint64_t bytes;         /* size of its shape (pointer size 8) */
    char shape[128];        /* printed without layout, truncated */
} hbm_hlo_instruction_info;

HBM_API hbm_status hbm_hlo_instruction(const hbm_hlo_module *m, size_t comp, size_t i,
                                       hbm_hlo_instruction_info *out);

#ifdef __cplusplus
}
#endif
#endif
