/* hbm/proto.h - XLA's protobuf files: XProf profiles (a profile directory, *.xplane.pb) and
 * XLA's dumps (*.hlo_proto.pb, *.hlo.pb: a serialized xla.HloProto or xla.HloModuleProto).
 * Found by content, not by name. Each compiled module becomes the same hbm_hlo_module the
 * text parser builds, and when the file carries XLA's own BufferAssignmentProto, its
 * figures come with it (hbm_hlo_xla_stats): the truth, beside hbm's own plan.
 *
 *   hbm_proto_file *f;
 *   if (hbm_proto_open("logdir", &f) != HBM_OK) fprintf(stderr, "%s\n", hbm_last_error());
 *   for (size_t i = 0; i < hbm_proto_module_count(f); i++) {   // largest first
 *       hbm_proto_module_info mi;
 *       hbm_proto_module(f, i, &mi);                            // name, XLA's figures
 *   }
 *   hbm_hlo_module *m;
 *   hbm_proto_load(f, 0, &m);                                   // the largest
 *   hbm_proto_close(f);                                         // m stays valid
 *
 * Read with protobuf-c from the project's own schemas (proto/hbm_xla.proto and
 * proto/hbm_xplane.proto: XLA's and TSL's field numbers). Built without protobuf-c, every
 * call that reads a file returns
 * HBM_ERR_NOT_AVAILABLE saying what is missing; hbm_proto_sniff still answers.
 */
#ifndef HBM_PROTO_H
#define HBM_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hbm/hlo.h"
#include "hbm/plan.h"
#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hbm_proto_kind {
    HBM_PROTO_NONE = 0,   /* not one of these (HLO text, another format) */
    HBM_PROTO_XSPACE,     /* a profile: tensorflow.profiler.XSpace (*.xplane.pb) */
    HBM_PROTO_HLO_PROTO,  /* xla.HloProto: module and buffer assignment (*.hlo_proto.pb) */
    HBM_PROTO_HLO_MODULE, /* xla.HloModuleProto alone (--xla_dump_hlo_as_proto *.hlo.pb) */
    HBM_PROTO_PROFILE_DIR /* a directory holding a profile (LOGDIR, .../plugins/profile/RUN) */
} hbm_proto_kind;

HBM_API const char *hbm_proto_kind_str(hbm_proto_kind k); /* "XProf profile (XSpace)", ... */

/* Which of these the bytes are, from their first fields (len may be a prefix of the file:
 * 512 bytes are enough). HBM_PROTO_NONE for text and anything else. */
HBM_API hbm_proto_kind hbm_proto_sniff(const void *data, size_t len);
/* The same for a path: a directory holding a profile, or a file by its first bytes.
 * HBM_PROTO_NONE when it is neither (or cannot be read: the caller's open says why). */
HBM_API hbm_proto_kind hbm_proto_path_kind(const char *path);
/* 1 when hbm was built with protobuf-c and can read these files. */
HBM_API int hbm_proto_available(void);

/* XLA's own figures, from the BufferAssignmentProto (device memory, color 0, only; the
 * names and sums of JAX's compiled.memory_analysis()). */
typedef struct hbm_xla_stats {
    uint64_t argument_size_in_bytes; /* entry parameter allocations */
    uint64_t output_size_in_bytes;   /* maybe_live_out allocations */
    uint64_t alias_size_in_bytes;    /* both */
    uint64_t temp_size_in_bytes;     /* neither, nor constant, nor thread-local */
    uint64_t constant_size_in_bytes;
    uint64_t thread_local_size_in_bytes;
    uint64_t total_allocation_bytes; /* every device allocation */
    uint64_t other_memory_bytes;     /* allocations in other memory spaces (host, ...) */
    size_t n_allocations;            /* device allocations */
    uint64_t peak_bytes;             /* arguments + outputs - alias + temp + constants */
    int has_heap_trace;              /* the heap simulator's trace is there */
    uint64_t heap_peak_bytes;        /* most bytes live at once in that trace */
    size_t n_heap_peak_buffers;      /* logical buffers live at that point */
} hbm_xla_stats;

/* One of the logical buffers live at the peak of XLA's heap trace, largest first. Strings
 * stay valid while the module lives. */
typedef struct hbm_xla_buffer {
    uint64_t size;
    int64_t id;              /* LogicalBufferProto id */
    const char *instruction; /* defining instruction ("" if unknown) */
    const char *opcode;
    char shape_index[32];    /* "{}", "{1,0}" */
    int64_t allocation;      /* BufferAllocationProto index, -1 if unassigned */
    int64_t offset;          /* in that allocation */
} hbm_xla_buffer;

/* XLA's figures of a module read from a protobuf that carries its buffer assignment;
 * HBM_ERR_NOT_AVAILABLE (with a message saying so) when it does not. */
HBM_API hbm_status hbm_hlo_xla_stats(const hbm_hlo_module *m, hbm_xla_stats *out);
/* Up to max of the buffers at the peak of XLA's heap trace, largest first; the count. */
HBM_API size_t hbm_hlo_xla_peak_buffers(const hbm_hlo_module *m, hbm_xla_buffer *out, size_t max);

/* XLA's figures of p's module (read from a protobuf with a buffer assignment) labelled as
 * XLA's, its heap trace's peak and up to top (at most 3 in text) of the buffers there, then
 * one line: "hbm's own plan: the same figures and the same buffers", or what differs.
 * HBM_ERR_NOT_AVAILABLE when the module has no XLA assignment. */
HBM_API hbm_status hbm_plan_xla_text(const hbm_plan *p, FILE *f, size_t top);
/* The same as two JSON object members (no braces): "xla": {memory_analysis() keys,
 * allocations, heap_peak_bytes, heap_peak_buffers}, "comparison": {same, figures that differ
 * [{key, xla, hbm}], buffers that differ [{instruction, index, xla_bytes, xla_kind,
 * hbm_bytes, hbm_kind}]}. */
HBM_API hbm_status hbm_plan_xla_json(const hbm_plan *p, FILE *f, size_t top);
/* The same into buf (snprintf rules: *len is the whole length), text or, with json, one
 * object {"xla": ..., "comparison": ...}: for bindings. */
HBM_API hbm_status hbm_plan_xla_format(const hbm_plan *p, size_t top, int json, char *buf, size_t cap, size_t *len);
/* 1 when hbm's plan has XLA's figures and buffers, 0 when not, -1 without XLA's. */
HBM_API int hbm_plan_xla_same(const hbm_plan *p);

/* --- opening a file or profile ------------------------------------------------------------- */
typedef struct hbm_proto_file hbm_proto_file;

typedef struct hbm_proto_module_info {
    const char *name;        /* as XProf lists it: "jit_train_step(17)" in a profile */
    const char *module_name; /* HloModuleProto name: "jit_train_step" */
    int64_t program_id;      /* XProf's program id, -1 if none */
    int has_assignment;      /* XLA's BufferAssignmentProto is there */
    hbm_xla_stats xla;       /* its figures (heap fields are filled by hbm_proto_load only) */
    size_t proto_bytes;      /* serialized size */
} hbm_proto_module_info;

/* Open a profile directory, *.xplane.pb, *.hlo_proto.pb or *.hlo.pb (by content) and list
 * its modules, largest first (arguments + outputs - alias + temp + constants by XLA's
 * figures; serialized size where there are none). Errors: not one of these, truncated or
 * corrupt, a profile without HLO protos (trace only), protobuf-c missing. */
HBM_API hbm_status hbm_proto_open(const char *path, hbm_proto_file **out);
/* The same from bytes in memory (copied; name is used in messages). */
HBM_API hbm_status hbm_proto_open_mem(const void *data, size_t len, const char *name, hbm_proto_file **out);
HBM_API void hbm_proto_close(hbm_proto_file *f);
HBM_API hbm_proto_kind hbm_proto_file_kind(const hbm_proto_file *f);
/* The file actually read (the profile's *.xplane.pb for a directory). */
HBM_API const char *hbm_proto_file_path(const hbm_proto_file *f);
/* Hosts' *.xplane.pb files in the profile run (only the first, by name, is read). */
HBM_API size_t hbm_proto_file_hosts(const hbm_proto_file *f);
HBM_API size_t hbm_proto_module_count(const hbm_proto_file *f);
HBM_API hbm_status hbm_proto_module(const hbm_proto_file *f, size_t i, hbm_proto_module_info *out);
/* Index of the module called name: its listed name ("jit_f(3)") or its module name
 * ("jit_f", when one program has it). HBM_ERR_INVALID naming the choices when none, and
 * listing them with their program ids when several programs have that module name. */
HBM_API hbm_status hbm_proto_find(const hbm_proto_file *f, const char *name, size_t *index);
/* Read module i into the model the HLO text parser builds (computations, instructions,
 * shapes with layouts, tiles and memory spaces, the schedule, metadata, aliasing), with
 * XLA's buffer assignment attached when there is one. Independent of f afterwards. */
HBM_API hbm_status hbm_proto_load(const hbm_proto_file *f, size_t i, hbm_hlo_module **out);

/* Module list as XProf's module selector shows it (name, arguments, outputs, temp), one
 * line each, largest first, fitted to 100 columns; the chosen one marked. */
HBM_API hbm_status hbm_proto_list(const hbm_proto_file *f, FILE *out, size_t chosen);

/* Open path as HLO text or any of the protobuf inputs above: module (NULL: the largest)
 * picks one of several. hbm_hlo_parse_file() is this with module NULL. */
HBM_API hbm_status hbm_hlo_open(const char *path, const char *module, hbm_hlo_module **out);
/* hbm_hlo_open, saying on notes (NULL: nowhere, as hbm_hlo_open) what a reader of the
 * module's figures needs to know of the choice, as `hbm plan`, `view` and `fit` print it: of
 * several modules, the list (hbm_proto_list) and "Showing NAME"; of a profile run of
 * several hosts, which host's file is read; a module without XLA's own buffer assignment,
 * that only hbm's plan follows. HBM_ERR_IO when a line of the list cannot be written. */
HBM_API hbm_status hbm_hlo_open_noted(const char *path, const char *module, FILE *notes, hbm_hlo_module **out);

#ifdef __cplusplus
}
#endif
#endif
