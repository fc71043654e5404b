/* src/trace/trace_view.h - what the renderers (src/report) and the API floor read of a trace
 * beyond hbm/trace.h: events' positions as the user counts them, a plan's steps, the
 * live-bytes curves and the device a trace is shown on. trace_internal.h includes it; a
 * renderer includes this, never trace_internal.h. */
#ifndef HBM_TRACE_VIEW_H
#define HBM_TRACE_VIEW_H

#include <stdint.h>
#include <stdio.h>

#include "hbm/trace.h"

/* The device a trace is replayed and viewed on when none is given: the one its header
 * names (the capacity, or the meta device_bytes that replaces it: docs/trace-format.md),
 * else hbm's default, a simulated 80 GiB device. *why (may be NULL) says which in the
 * words hbm replay and hbm view print. */
#define HBMI_DEVICE_FROM_HEADER "from the trace header"
#define HBMI_DEVICE_DEFAULT "default, the trace names no device"
#define HBMI_DEVICE_DEFAULT_BYTES (80ull << 30)
uint64_t hbmi_trace_device_bytes(const hbm_trace *t, const char **why);

/* Live-bytes sweeps shared by exporters and views: bytes in use (sum of sizes of blocks
 * live after each event) and reserved (segment events; or in use when the trace has
 * none). Arrays of t->count entries, owned by the caller (hbmi_free). */
hbm_status hbmi_trace_curves(const hbm_trace *t, uint64_t **in_use, uint64_t **reserved, int *has_segments);
/* The same, and the first event no allocator can have produced, in words, into why ("" when
 * the history is consistent): an allocation of a block that is live, a free of one that is
 * not (past a rebuilt start), bytes in use above the bytes reserved. */
hbm_status hbmi_trace_curves_why(const hbm_trace *t, uint64_t **in_use, uint64_t **reserved, int *has_segments,
                                 char *why, size_t cap);
/* The peak of bytes in use, as hbmi_trace_curves counts it, without the arrays. */
hbm_status hbmi_trace_peak_use(const hbm_trace *t, uint64_t *peak);

/* A trace made from an HLO module's plan (hbm_plan_trace): 1, and its schedule's instruction
 * names, step by step (*n of them); 0 and NULL for another trace. */
int hbmi_trace_is_plan(const hbm_trace *t);
const char *const *hbmi_trace_step_names(const hbm_trace *t, size_t *n);

/* "name": ..., "source": ..., "device": ... of a trace (JSON members, no braces). */
void hbmi_json_trace_id(FILE *f, const hbm_trace *t);

/* An event's number as the user sees it: counted from the history's first event; -1 for
 * the state rebuilt before a snapshot's history (events [0, history_start)). */
static inline int64_t hbmi_event_number(const hbm_trace *t, int64_t i) {
    return i < (int64_t)t->history_start ? -1 : i - (int64_t)t->history_start;
}
/* An event's position as the user counts it: its schedule step in a plan's trace
 * (hbm_plan_trace; i == count: the step after the last), else hbmi_event_number. */
int64_t hbmi_event_pos(const hbm_trace *t, int64_t i);
/* "step N" or "event N": the unit hbmi_event_pos counts in. */
const char *hbmi_event_unit(const hbm_trace *t);
/* "event N (1.234567s)" (time_ns, when the trace has times), "event N", "step N
 * (instruction)" in a plan's trace (hbm_plan_trace), or "the start (before the history)": it
 * reads after "at". Returns buf. */
const char *hbmi_event_when(const hbm_trace *t, int64_t i, uint64_t time_ns, char *buf, size_t cap);
/* The same without the instruction's name ("step N"), for narrow columns. */
const char *hbmi_event_when_short(const hbm_trace *t, int64_t i, uint64_t time_ns, char *buf, size_t cap);

/* In a plan's trace, `, "KEY_step": N, "KEY_instruction": "name"` for event i (JSON
 * members after others); nothing for another trace. */
void hbmi_json_step(FILE *f, const hbm_trace *t, int64_t i, const char *key);

/* A plan's trace (hbm_plan_trace): its peak of live bytes and where, as JSON members
 * (`, "peak_live_bytes": N, "peak_step": S, "peak_instruction": "..."`) or as a line of
 * replay's table; nothing for another trace. */
void hbmi_json_plan_peak(FILE *f, const hbm_trace *t);
void hbmi_text_plan_peak(FILE *f, const hbm_trace *t);

/* A snapshot for PyTorch's memory_viz (hbm_export_torch_all, api/export_torch.c): the writer
 * (trace/export) takes the blocks of each trace that is not a snapshot from the caller, who
 * runs the PyTorch allocator twin on it (trace/replay): an export renders, it runs no engine. */
typedef struct hbmi_torch_segs hbmi_torch_segs;
/* 1 when t is a snapshot that kept its own segments and blocks (no twin needed). */
int hbmi_trace_has_torch_segs(const hbm_trace *t);
/* The twin run on t: its segments and blocks at the end, into *out (owned by the caller). */
hbm_status hbmi_torch_twin_end_state(const hbm_trace *t, hbmi_torch_segs **out);
void hbmi_torch_segs_free(hbmi_torch_segs *x);
/* The snapshot of traces[0..n) (one per device) into f; own[d]: the twin's end state of a
 * trace that is not a snapshot (NULL: none, or the trace's own). */
hbm_status hbmi_export_torch_write(hbm_trace *const *traces, size_t n, hbmi_torch_segs *const *own, FILE *f);

#endif
