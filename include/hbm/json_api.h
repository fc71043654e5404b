/* hbm/json_api.h - the library's outputs as strings and files, for bindings (the Python
 * package hbm calls these through ctypes) and for the CLI, which shares them.
 *
 * Functions named *_format render a result already computed (a plan, a fit, a trace's
 * fields) into a caller buffer with snprintf's rules: at most cap bytes including a
 * terminating NUL go to buf (buf may be NULL when cap is 0), and *len receives the full
 * length without the NUL; when *len >= cap the text was cut, so call again with cap > *len
 * (the second call renders again and computes nothing). Functions named *_string run an
 * engine (a replay, a view, a diff) once and return its output in a string of its own size:
 * *out is NUL-terminated, *len its bytes without the NUL, freed with hbm_string_free; on
 * failure *out is NULL. Both return HBM_OK or a status with hbm_last_error() set.
 *
 *   hbm_plan_target t;  char buf[1 << 16];  size_t n;
 *   hbm_plan_target_resolve("h100", NULL, 0, &t);
 *   hbm_plan_json_format(p, 15, &t, buf, sizeof buf, &n);   // as `hbm plan --json --device h100`
 *
 * Files (*_file) are written whole or not at all: into a temporary name in the same
 * folder, then renamed.
 */
#ifndef HBM_JSON_API_H
#define HBM_JSON_API_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hbm/config.h"
#include "hbm/fit.h"
#include "hbm/plan.h"
#include "hbm/status.h"
#include "hbm/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- plans ------------------------------------------------------------------------------ */

/* The device a plan is judged against (what `hbm plan --device/--capacity/--framework-limit`
 * mean). capacity 0 = no device (no verdict). */
typedef struct hbm_plan_target {
    uint64_t capacity;     /* bytes */
    double fraction;       /* share the framework lets XLA use; 0 = no framework limit */
    char device_name[64];  /* "H100-80GB", "a device of 16.00GiB", "" */
} hbm_plan_target;

/* device: a name `hbm devices` lists (its capacity and default fraction), or NULL;
 * capacity: a size ("80GiB", "17179869184") with fraction HBM_FRACTION_BACKEND (the
 * module's backend decides: JAX's 0.75 on XLA:GPU, 1 on TPU and CPU), or NULL;
 * framework_limit: a fraction in (0, 1] that overrides either, or 0 for the default.
 * Both device and capacity, an unknown device, a bad size or fraction: HBM_ERR_INVALID. */
HBM_API hbm_status hbm_plan_target_resolve(const char *device, const char *capacity, double framework_limit,
                                           hbm_plan_target *out);

/* Plan options for an XLA backend name: NULL (read from the module), "gpu" (also "cuda",
 * "rocm"), "cpu", "tpu"; anything else is HBM_ERR_INVALID naming it. */
HBM_API hbm_status hbm_plan_backend_options(const char *backend, hbm_plan_options *o);

/* The text of `hbm plan`: XLA's report with top peak buffers, then hbm's explanation (at
 * most 8 of them) and, with a target capacity, the verdict. */
HBM_API hbm_status hbm_plan_write_text(const hbm_plan *p, FILE *f, size_t top, const hbm_plan_target *t);

/* All that `hbm plan` prints, to f. JSON: hbm_plan_json's object alone, or, with XLA's own
 * assignment (a protobuf input) or a --pack what-if, {"plan": that object, "xla": ...,
 * "comparison": ... (hbm_plan_xla_json), "pack": {...} (hbm_plan_pack_json)}. Text:
 * hbm_plan_write_text, then a blank line and hbm_plan_xla_text, then hbm_plan_pack_text,
 * with lines longer than width columns cut in the middle with "..." (0: whole); nothing
 * is written when one of them fails. */
typedef struct hbm_plan_output {
    const hbm_plan *plan;
    size_t top;                    /* peak buffers listed (XLA's report: 15) */
    const hbm_plan_target *target; /* NULL: no device, no verdict */
    const hbm_pack_result *pack;   /* the --pack what-if (hbm_plan_pack_temp), NULL: none */
    hbm_pack_algo pack_algo;       /* its algorithm */
    uint64_t pack_heap_bytes;      /* XLA's heap it is compared with (hbm_plan_pack_temp's) */
    int json;
    size_t width;
} hbm_plan_output;
HBM_API hbm_status hbm_plan_output_write(const hbm_plan_output *o, FILE *f);

/* 1 when the plan's verdict against t is negative (hbm plan's exit status 1): it does not
 * fit the device, or only beyond the share the framework lets XLA use, so that as
 * configured the program runs out of memory; 0 otherwise (t NULL or without capacity: 0). */
HBM_API int hbm_plan_target_fails(const hbm_plan *p, const hbm_plan_target *t);

/* `hbm plan` text, `hbm plan --json` and hbm's explanation alone (hbm_plan_explain): t may
 * be NULL (no device). hbm_plan_html_string: the HTML page of XProf's Memory Viewer of the
 * plan (hbm_plan_view_html, whose model is built from the plan on each call); title NULL =
 * the module's name. */
HBM_API hbm_status hbm_plan_text_format(const hbm_plan *p, size_t top, const hbm_plan_target *t, char *buf, size_t cap,
                                        size_t *len);
HBM_API hbm_status hbm_plan_json_format(const hbm_plan *p, size_t top, const hbm_plan_target *t, char *buf, size_t cap,
                                        size_t *len);
HBM_API hbm_status hbm_plan_explain_format(const hbm_plan *p, size_t top, const hbm_plan_target *t, char *buf, size_t cap,
                                           size_t *len);
HBM_API hbm_status hbm_plan_html_string(const hbm_plan *p, const char *title, char **out, size_t *len);
/* What `hbm view M.hlo` prints to f: XProf's Memory Viewer of the plan (hbm_plan_view_text,
 * or hbm_plan_view_json with json), and in text, when XLA's own assignment came with the
 * module, a blank line and hbm_plan_xla_text with o->top buffers. o NULL: the defaults. */
HBM_API hbm_status hbm_plan_view_write(const hbm_plan *p, const hbm_plan_view_options *o, int json, FILE *f);
/* `hbm view M.hlo` (json 0) or `hbm view M.hlo --json` (json 1): XProf's Memory Viewer of
 * the plan; top buffers per table (0 = 15). */
HBM_API hbm_status hbm_plan_view_string(const hbm_plan *p, int json, int top, char **out, size_t *len);

/* --- fit -------------------------------------------------------------------------------- */

/* What `hbm fit` prints: hbm_fit_json (json), or hbm_fit_text with top changes listed and
 * lines longer than width columns cut in the middle with "..." (0: whole; nothing is
 * written when it fails). */
HBM_API hbm_status hbm_fit_write(const hbm_fit_result *r, FILE *f, int json, size_t top, size_t width);

/* --- traces ----------------------------------------------------------------------------- */

/* {"name", "source", "device", "capacity_bytes", "events", "truncated_at"} of a trace. */
HBM_API hbm_status hbm_trace_info_format(const hbm_trace *t, char *buf, size_t cap, size_t *len);

/* What `hbm view` writes: HBM_VIEW_TEXT, HBM_VIEW_JSON (--json) or HBM_VIEW_HTML (--html).
 * top < 0 and title NULL take hbm_view_options_default's. */
typedef enum hbm_view_kind { HBM_VIEW_TEXT = 0, HBM_VIEW_JSON = 1, HBM_VIEW_HTML = 2 } hbm_view_kind;
HBM_API hbm_status hbm_view_string(const hbm_trace *t, hbm_view_kind kind, int top, const char *title, char **out,
                                   size_t *len);
/* hbm diff A B (json: --json), every contributor. */
HBM_API hbm_status hbm_diff_string(const hbm_trace *a, const hbm_trace *b, int json, char **out, size_t *len);
HBM_API hbm_status hbm_view_file(const hbm_trace *t, hbm_view_kind kind, int top, const char *title, const char *path);

/* `hbm export`: format "perfetto", "pprof", "torch" or "minimalloc" (else HBM_ERR_INVALID
 * naming them). hbm_export_write writes to f; hbm_export_file to path, whole or not at all. */
HBM_API hbm_status hbm_export_write(const hbm_trace *t, const char *format, FILE *f);
/* HBM_OK when format is one of those; else HBM_ERR_INVALID naming them. */
HBM_API hbm_status hbm_export_format_check(const char *format);
/* The formats, as that message names them: "perfetto, pprof, torch or minimalloc". */
HBM_API const char *hbm_export_formats(void);
HBM_API hbm_status hbm_export_file(const hbm_trace *t, const char *format, const char *path);
/* Which devices `hbm export` wrote in format from the n traces it loaded (n > 1: one per
 * device; n = 1: all[0], with its attached devices when perfetto writes them all), as the
 * end of its "wrote OUT" line: " (device cuda:0)", " (devices cuda:0, cuda:1)", or nothing
 * for a trace without a device name; then a newline. */
HBM_API hbm_status hbm_export_devices_write(const hbm_trace *const *all, size_t n, const char *format, FILE *f);

/* `hbm replay`: replay t against n configuration strings (n = 0: "allocator=bfc" and
 * "allocator=platform") on device (NULL: a simulated device of the trace's capacity, else
 * sim:80GiB; a name or sim:SIZE as hbm_replay_device_spec takes), with the optimal bound
 * and a 1-second packing, and write the table (json = 0) or the JSON object. *failed (may
 * be NULL) is set when a configuration could not run or ran out of memory. At most 64
 * configurations. */
HBM_API hbm_status hbm_replay_run_write(const hbm_trace *t, const char *device, const char *const *configs, size_t n,
                                        FILE *f, int json, int *failed);
/* `hbm replay --suggest` (json: --json): hbm_torch_suggest on device (a name or sim:SIZE,
 * NULL: the trace's own capacity, else the history's peak reserved), then its table or
 * JSON. *failed (may be NULL) is set when no setting avoids the OOM. A trace that is not a
 * PyTorch snapshot is HBM_ERR_INVALID. */
HBM_API hbm_status hbm_replay_suggest_write(const hbm_trace *t, const char *device, FILE *f, int json, int *failed);
/* `hbm replay` of a file with several devices (a profile's allocators): each of the nt
 * traces replayed against the configurations as hbm_replay_run_write does (without the
 * bound and the packing), one table of all: device, allocator, configuration, peak held,
 * reserved, fragmentation, first OOM. */
HBM_API hbm_status hbm_replay_devices_write(const hbm_trace *const *ts, size_t nt, const char *device,
                                           const char *const *configs, size_t n, FILE *f, int *failed);
/* What hbm_replay_run_write writes (json: 1 the JSON object, 0 the table), replayed once. */
HBM_API hbm_status hbm_replay_string(const hbm_trace *t, const char *device, const char *const *configs, size_t n, int json,
                                     char **out, size_t *len);
/* hbm_replay_string's JSON object with the same "results" rows, for a caller that reads
 * only those (hbm.Trace.replay): without what PyTorch recorded and the twin's match (no
 * "recorded" or "match", so no second replay of the torch row, and no error when the twin
 * alone cannot run) and without the packing ("packed_bytes" 0, as for a trace too big to
 * pack); "optimal_bound_bytes" stays. */
HBM_API hbm_status hbm_replay_rows_string(const hbm_trace *t, const char *device, const char *const *configs, size_t n,
                                          char **out, size_t *len);
/* hbm replay TRACE --suggest --json (device: a name or sim:SIZE, NULL: the trace's own
 * capacity, else the history's peak reserved). */
HBM_API hbm_status hbm_replay_suggest_string(const hbm_trace *t, const char *device, char **out, size_t *len);
/* A string an hbm_*_string call returned (NULL: nothing). */
HBM_API void hbm_string_free(char *s);

/* --- the demo --------------------------------------------------------------------------- */

/* What `hbm demo` runs and tells. device: sim:SIZE or a name `hbm devices` lists (as
 * hbm_replay_device_spec takes it; shown as given). examples: the folder that holds
 * svd_oom.hlo and svd_fixed.hlo, or NULL (a note says where part two would come from).
 * getenv_fn: the environment that configures the allocator, as it configures any program
 * using libhbm (NULL: getenv; the process's environment is never changed). */
typedef struct hbm_demo_options {
    const char *device;
    const char *examples;
    hbm_getenv_fn getenv_fn;
    void *getenv_user;
} hbm_demo_options;
/* device "sim:80GiB" (an H100-sized GPU), no examples, getenv. */
HBM_API void hbm_demo_options_default(hbm_demo_options *o);
/* One training step of a 2.9B-parameter transformer (hbm_transformer_spec_default) against
 * the allocator the environment configures, on a fresh simulated device each run: run 1
 * with the environment's settings; when it runs out of memory, the OOM report with its
 * advice checked by running the step (a fraction: the smallest, in steps of .01, that
 * covers the whole step), then run 2 with that advice, or why no setting helps. When the
 * step completed and examples is given, the seed bug and its fix planned against a
 * V100-16GB as `hbm plan` would. Written to f as it goes; *completed: 1 when the step
 * completed (at first or with the advice), else 0 (no setting makes it fit: a negative
 * verdict). A bad device or variable fails before anything is written; HBM_ERR_IO when a
 * write to f failed. */
HBM_API hbm_status hbm_demo_write(const hbm_demo_options *o, FILE *f, int *completed);

/* hbm_last_error_location: hbm/status.h */

#ifdef __cplusplus
}
#endif
#endif
