/* hbm/file.h - output files written whole or not at all.
 *
 *   hbm_output o;
 *   if (hbm_output_open(&o, "out.json") == HBM_OK) {   // "-" = standard output
 *       fprintf(o.f, ...);
 *       s = hbm_output_commit(&o);   // or hbm_output_abort(&o) on an error of your own
 *   }
 *
 * A file is written to a temporary name in the same folder and renamed over the
 * destination once every write, the flush and the close succeeded: on any failure (a full
 * disk, ulimit -f, a crash) an existing file is left as it was and the temporary removed.
 * A destination that exists and is not a regular file (/dev/null, a FIFO) is written in
 * place. */
#ifndef HBM_FILE_H
#define HBM_FILE_H

#include <stdio.h>

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbm_output {
    FILE *f;          /* write here */
    char path[4096];  /* the destination; "-" = standard output */
    char tmp[4200];   /* the temporary next to it; "" for standard output or in place */
} hbm_output;

/* Create the temporary (mode 0666 less the umask) or take stdout for "-". */
HBM_API hbm_status hbm_output_open(hbm_output *o, const char *path);
/* Flush and close, checking every write; rename over the destination. For stdout: flush
 * and check (stdout stays open). On failure the destination is untouched. */
HBM_API hbm_status hbm_output_commit(hbm_output *o);
/* Close and remove the temporary; the destination is untouched. */
HBM_API void hbm_output_abort(hbm_output *o);

/* --- what a file is, by its content ---------------------------------------------------
 * Every reader of hbm (and every command) recognises the kinds of file hbm knows from
 * their first bytes, so that a file given to the wrong reader is named ("a PyTorch memory
 * snapshot (pickle)") instead of failing on its bytes. A gzip stream is looked into: the
 * kind is that of its content, with *gzip set. */
#define HBM_FILE_KINDS(X)                                                   \
    X(HBM_FILE_UNKNOWN, "text of no kind hbm reads")                        \
    X(HBM_FILE_BINARY, "binary data of no kind hbm reads")                  \
    X(HBM_FILE_EMPTY, "an empty file")                                      \
    X(HBM_FILE_HLO, "an HLO module (text)")                                 \
    X(HBM_FILE_TORCH_PICKLE, "a PyTorch memory snapshot (pickle)")          \
    X(HBM_FILE_TORCH_JSON, "a PyTorch memory snapshot (JSON)")              \
    X(HBM_FILE_HBM_TRACE, "an hbm trace")                                   \
    X(HBM_FILE_RMM_CSV, "an RMM log (CSV)")                                 \
    X(HBM_FILE_MINIMALLOC_CSV, "a MiniMalloc problem (CSV)")                \
    X(HBM_FILE_HLO_PROTO, "an XLA HLO module as protobuf (HloProto)")       \
    X(HBM_FILE_XSPACE, "an XProf profile (XSpace protobuf, .xplane.pb)")    \
    X(HBM_FILE_PERFETTO, "a Chrome/Perfetto trace (JSON)")                  \
    X(HBM_FILE_GZIP, "a gzip file whose content could not be read")

typedef enum hbm_file_kind {
#define HBM_FILE_ENUM_(name, text) name,
    HBM_FILE_KINDS(HBM_FILE_ENUM_)
#undef HBM_FILE_ENUM_
} hbm_file_kind;

/* The kind of the bytes [data, data + len): a file's start (a few KiB suffice) or all of
 * it. A gzip stream is HBM_FILE_GZIP here (its content is not inflated from memory);
 * hbm_file_sniff_path looks inside. */
HBM_API hbm_file_kind hbm_file_sniff(const void *data, size_t len);
/* The kind of the file at path from its first 64 KiB, inflated first when it is gzip
 * (*gzip = 1; gzip may be NULL). HBM_ERR_IO when it cannot be read. */
HBM_API hbm_status hbm_file_sniff_path(const char *path, hbm_file_kind *kind, int *gzip);
/* "a PyTorch memory snapshot (pickle)": the kind in words, with its article. */
HBM_API const char *hbm_file_kind_str(hbm_file_kind kind);

#ifdef __cplusplus
}
#endif
#endif
