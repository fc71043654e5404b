/* hbm/trace.h - allocation traces: record, read, import, convert, replay, export.
 *
 * A trace is the runtime half of "why did it OOM": every alloc / free / failed alloc an
 * allocator saw, in order, with a monotonic time, address, size, stream, thread, tag and
 * optionally a native backtrace. It comes from
 *   - the recorder: hbm_allocator_open(dev, "allocator=bfc,trace=run.hbmt", &a), or
 *     HBM_TRACE=run.hbmt in the environment of any program using hbm;
 *   - hbm run --trace run.hbmt -- COMMAND: any program's CUDA allocations, frees and
 *     synchronizations, intercepted with LD_PRELOAD (docs/gpu.md);
 *   - importers: RMM logging CSV, PyTorch memory snapshots (pickle or JSON).
 * It turns into an hbm_timeline (alloc/free pairs become buffers) for the packer, views
 * and exporters, and replays against other allocator configurations (what-if).
 *
 *   hbm_trace *t;
 *   hbm_trace_load("snapshot.pickle", &t);          // any supported format, by content
 *   hbm_timeline *tl;  hbm_trace_to_timeline(t, &tl);
 *   ...
 *   hbm_timeline_free(tl);  hbm_trace_free(t);
 *
 * File format: docs/trace-format.md (binary, little-endian, versioned, append-only).
 */
#ifndef HBM_TRACE_H
#define HBM_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hbm/alloc.h"
#include "hbm/event.h"
#include "hbm/status.h"
#include "hbm/tag.h"
#include "hbm/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One event. Field meanings by kind:
         *   alloc           addr = block handed out, size = bytes held, requested = bytes asked
         *   free            addr = block freed (size may be 0 when the source does not say)
         *   free_requested  PyTorch: the user freed it; memory returns at the matching free
         *   oom             requested = bytes asked, addr 0, size = the device's free bytes at
         *                   that moment when the source says (PyTorch's device_free), else 0
         *   segment_*       the allocator took (gave back) size bytes of device memory at addr
         *   segment_(un)map an expandable segment mapped (unmapped) size bytes of physical memory
         *                   at addr inside its reserved virtual range (PyTorch; format version 3)
         *   sync            the host waited for stream (HBM_STREAM_ALL: the whole device), so
         *                   blocks freed on it are reusable by every stream (format version 2) */
typedef struct hbm_trace_event {
            uint8_t kind;       /* hbm_event_kind */
            uint8_t pad_[3];
    uint32_t thread;    /* small thread number (recorder) or the source's id truncated */
    uint64_t time_ns;   /* monotonic nanoseconds since the trace's start */
    uint64_t addr;
    uint64_t size;
    uint64_t requested;
    uint64_t stream;    /* alloc/free/oom: the stream used; sync: the stream waited for */
    uint32_t tag;       /* hbm_trace_tag(t, tag); 0 = none */
    uint32_t backtrace; /* hbm_trace_backtrace(t, id, ...); 0 = none */
} hbm_trace_event;

typedef struct hbm_trace {
    hbm_trace_event *events; /* count entries, in order */
    size_t count;
    char name[128];          /* where it came from */
    char source[32];         /* "hbm", "rmm", "torch" */
    char device[64];         /* device name, if known */
    uint64_t capacity;       /* device bytes, 0 if unknown */
    uint64_t truncated_at;   /* byte offset of a torn final record (crash), else 0 */
    int device_index;        /* N of cuda:N when the source numbers its devices, else 0 */
    int has_time;            /* 1: time_ns are times; 0: the source has none and time_ns is
                              * the event's index in the source (say "event N", not seconds) */
    /* A history that starts mid-run (PyTorch's ring buffer): the state when it began,
     * rebuilt from the snapshot's end state, is events [0, history_start) at time 0:
     * segment events for what was reserved, then allocs for what was live. */
    size_t history_start;
    uint64_t live_before_bytes;     /* bytes live before the history (requested) */
    uint64_t live_before_blocks;    /* in that many blocks */
    uint64_t reserved_before_bytes; /* bytes reserved before the history */
    /* The file's other devices, when this trace came from hbm_trace_load (first device);
     * owned, freed with it; hbm_view_all shows them after this one. */
    struct hbm_trace **others;
    size_t n_others;
    /* 1: backtraces are source stacks (PyTorch's frames), each frame a tag id (op_name = the
     * function, source_file, source_line), innermost first; 0: native return addresses. */
    int stacks;
    /* The allocator settings the snapshot was recorded with, as hbm config items for
     * allocator=torch ("expandable_segments=true,max_split_size_mb=128"), "" when none. */
    char torch_settings[160];
    /* hbm's own state of the trace (the events' capacity, the tag table, backtraces, a plan's
     * steps, a PyTorch snapshot's kept keys and segments): src/trace/trace_internal.h. */
    struct hbmi_trace_priv *priv_;
} hbm_trace;

HBM_API hbm_status hbm_trace_new(hbm_trace **out);
HBM_API void hbm_trace_free(hbm_trace *t);
/* Append one event (copied). */
HBM_API hbm_status hbm_trace_add(hbm_trace *t, const hbm_trace_event *e);
/* Intern a tag, 0 for NULL. */
HBM_API hbm_status hbm_trace_intern(hbm_trace *t, const hbm_tag *tag, uint32_t *id_out);
HBM_API const hbm_tag *hbm_trace_tag(const hbm_trace *t, uint32_t id);
HBM_API uint32_t hbm_trace_tag_count(const hbm_trace *t);
/* Store a backtrace (n return addresses, innermost first); ids are 1, 2, ... */
HBM_API hbm_status hbm_trace_add_backtrace(hbm_trace *t, const uint64_t *frames, size_t n, uint32_t *id_out);
/* Frames of backtrace id (NULL/0 when id is 0 or unknown). */
HBM_API const uint64_t *hbm_trace_backtrace(const hbm_trace *t, uint32_t id, size_t *n);

/* Buffers from alloc/free pairs on the clock "event" (event index): an alloc at event i
 * freed at event j lives [i, j); a block never freed lives to the end of the trace; frees
 * of blocks allocated before the trace began are ignored. Sizes are the bytes asked
 * (requested, or size when the source does not say); offsets are the addresses. */
HBM_API hbm_status hbm_trace_to_timeline(const hbm_trace *t, hbm_timeline **out);

/* The reverse, for plans: each buffer becomes an alloc at start and a free at end (frees
 * first at equal times), time_ns = (time - first start) x 1000, unique synthetic addresses. */
HBM_API hbm_status hbm_trace_from_timeline(const hbm_timeline *tl, hbm_trace **out);

/* The trace of a plan (hbm/plan.h) that hbm view, replay, diff, export and hbm.load read:
 * hbm_trace_from_timeline of hbm_plan_timeline(p), each event at its schedule step and each
 * step named by its instruction, so every position reads "step N (instruction)" as hbm plan
 * says it. Named after the module; independent of p once made. */
struct hbm_plan;
HBM_API hbm_status hbm_plan_trace(const struct hbm_plan *p, hbm_trace **out);
/* The schedule step of event i of a plan's trace and its instruction (into *name, "" when
 * unnamed); -1 for a trace that is not a plan's or an i past its end. */
HBM_API int64_t hbm_trace_event_step(const hbm_trace *t, size_t i, const char **name);

/* --- files ------------------------------------------------------------------------------ */

/* The native binary format ("HBMTRACE", docs/trace-format.md). A file that ends inside a
 * record (a crash while writing) loads the complete records and sets truncated_at.
 * Errors name the byte offset and what was expected. */
HBM_API hbm_status hbm_trace_read(const char *path, hbm_trace **out);
HBM_API hbm_status hbm_trace_parse(const void *data, size_t len, const char *name, hbm_trace **out);
HBM_API hbm_status hbm_trace_write(const hbm_trace *t, const char *path);

/* Any supported input, chosen by content: hbm trace, RMM CSV, PyTorch snapshot pickle or
 * JSON. */
HBM_API hbm_status hbm_trace_load(const char *path, hbm_trace **out);
HBM_API hbm_status hbm_trace_load_mem(const void *data, size_t len, const char *name, hbm_trace **out);

/* Every device a file holds: a PyTorch snapshot has a history (and segments) per GPU, the
 * other formats one device. Devices without data are left out; the order is the one to
 * show them in: a device with an OOM first, then by peak bytes in use, largest first.
 * *n >= 1 on success. Free with hbm_trace_free_all (the traces and the array). */
HBM_API hbm_status hbm_trace_load_all(const char *path, hbm_trace ***out, size_t *n);
HBM_API hbm_status hbm_trace_load_all_mem(const void *data, size_t len, const char *name, hbm_trace ***out, size_t *n);
HBM_API void hbm_trace_free_all(hbm_trace **traces, size_t n);
/* One device of a file: device_index N (cuda:N), or -1 for the first in the order above
 * (what hbm_trace_load gives, with the others in t->others). An index the file does not hold is HBM_ERR_INVALID, with a
 * message listing the devices it does hold. */
HBM_API hbm_status hbm_trace_load_device(const char *path, int device_index, hbm_trace **out);

/* Importers on bytes in memory (a snapshot: its first device, as above). Errors name the line (CSV) or byte offset (pickle, JSON). */
HBM_API hbm_status hbm_trace_parse_rmm_csv(const char *text, size_t len, const char *name, hbm_trace **out);
HBM_API hbm_status hbm_trace_parse_torch_pickle(const void *data, size_t len, const char *name, hbm_trace **out);
HBM_API hbm_status hbm_trace_parse_torch_json(const char *text, size_t len, const char *name, hbm_trace **out);

/* Streaming writer: events are buffered and written every HBM_TRACE_FLUSH_EVENTS events,
 * on hbm_trace_writer_flush and at close, so a crash loses at most one buffer. */
#define HBM_TRACE_FLUSH_EVENTS 4096
typedef struct hbm_trace_writer hbm_trace_writer;
HBM_API hbm_status hbm_trace_writer_open(const char *path, const char *device, uint64_t capacity,
                                         hbm_trace_writer **out);
/* Declare tag id (ids must be declared before events use them; equal ids overwrite). */
HBM_API hbm_status hbm_trace_writer_tag(hbm_trace_writer *w, uint32_t id, const hbm_tag *tag);
HBM_API hbm_status hbm_trace_writer_backtrace(hbm_trace_writer *w, uint32_t id, const uint64_t *frames, size_t n);
HBM_API hbm_status hbm_trace_writer_event(hbm_trace_writer *w, const hbm_trace_event *e);
HBM_API hbm_status hbm_trace_writer_flush(hbm_trace_writer *w);
HBM_API hbm_status hbm_trace_writer_close(hbm_trace_writer *w); /* flushes; NULL is fine */

/* --- recording ----------------------------------------------------------------------- */

#define HBM_TRACE_BACKTRACES 1u /* capture a native backtrace per alloc (slow) */

/* Wrap an allocator handle: every call goes to inner and is recorded into path. inner is
         * owned from now on in every case: closing the new handle closes inner and the file, and
         * on failure inner is closed. The config option trace=PATH
         * (HBM_TRACE=PATH) does the same inside hbm_allocator_open without a second lock. */
HBM_API hbm_status hbm_trace_wrap(hbm_allocator *inner, const char *path, unsigned flags, hbm_allocator **out);

/* --- replay (what-if) ------------------------------------------------------------------ */

typedef struct hbm_replay_result {
    char config[256];           /* the allocator configuration string */
    char allocator[32];         /* its policy name */
    hbm_status status;          /* HBM_OK, or why the configuration could not run */
    char error[256];            /* message when status != HBM_OK */
    uint64_t events;            /* events replayed */
    uint64_t allocs, frees, ooms;
    uint64_t peak_in_use;       /* bytes (as held by the allocator) */
    uint64_t peak_reserved;
    double frag_at_peak;        /* XLA's metric at the moment of peak in use */
    uint64_t device_calls;      /* raw device allocations + frees */
    int64_t first_oom_event;    /* event index of the first failed alloc, -1 if none */
    uint64_t first_oom_time_ns;
    uint64_t first_oom_bytes;
    char *first_oom_report;     /* the allocator's OOM report (owned; NULL if none) */
    double seconds;             /* wall time of the replay */
    /* every OOM, summarised (only the first is reported: later ones cost what a fit costs) */
    uint64_t largest_oom_bytes; /* the largest request that failed */
    int64_t last_oom_event;     /* event index of the last failed alloc, -1 if none */
    uint64_t last_oom_time_ns;
} hbm_replay_result;

/* Replay t against allocator configuration config (as for hbm_allocator_open) on a fresh
 * device opened from device_spec (e.g. "sim:80GiB"). Failed allocations are skipped
 * (their frees ignored) and replay goes on; the first one is described in r (its OOM
 * report), the others counted and summarised (largest request, last event). An "oom"
 * event of the trace is tried too (and freed at once if it fits: the program died there).
 * Returns HBM_OK when the replay ran (r->status also says HBM_OK); a configuration that
 * cannot be opened gives its status in both. Free r with hbm_replay_result_release. */
HBM_API hbm_status hbm_replay(const hbm_trace *t, const char *device_spec, const char *config, hbm_replay_result *r);
/* The same for n configurations; the trace's alloc/free pairing is computed once and
 * shared (seconds in each result covers its own replay only). Returns the first
 * failure, with every result filled in. */
HBM_API hbm_status hbm_replay_many(const hbm_trace *t, const char *device_spec, const char *const *configs, size_t n,
                                   hbm_replay_result *results);
HBM_API void hbm_replay_result_release(hbm_replay_result *r);

/* A device spec for a replay: "sim:SIZE[,...]" as is, or a device name ("h100", "a100-40g",
 * ...) as a simulated device of its capacity. */
HBM_API hbm_status hbm_replay_device_spec(const char *name, char *buf, size_t cap);

/* The device a replay of t runs on when none is given, the same for every mode (the table,
 * the torch twin, --suggest): the device the trace's header names (its capacity, or the
 * device_bytes meta record: *why "from the trace header"); for a PyTorch
 * snapshot with an OOM, the bytes PyTorch had reserved then plus the free memory CUDA
 * reported (what the process could reach); for another snapshot, its peak reserved bytes
 * (the least the real device had); else sim:80GiB ("default, the trace names no device").
 * *why (may be NULL) says which, in words ("the snapshot's peak reserved"). */
HBM_API hbm_status hbm_replay_default_device(const hbm_trace *t, char *buf, size_t cap, const char **why);

/* What the best allocator could have done on a trace: the most bytes live at once (no
 * allocator can peak lower) and a static packing of its buffers (hbm_pack's best
 * heuristic, within timeout_s) that shows how close to that bound one can get. */
typedef struct hbm_replay_bounds {
    uint64_t lower_bound;  /* max bytes live at once (0 = unknown) */
    uint64_t packed;       /* extent of the packing found (0 = not computed) */
    int proven;            /* packed == lower_bound */
} hbm_replay_bounds;

/* Traces with more than max_buffers buffers get the lower bound only. */
HBM_API hbm_status hbm_replay_bounds_get(const hbm_trace *t, double timeout_s, size_t max_buffers, hbm_replay_bounds *out);

/* The comparison table of n results (text), or a JSON object with "trace", "device",
 * "events", "optimal_bound_bytes", "packed_bytes" and "results". b may be NULL. */
HBM_API hbm_status hbm_replay_write(const hbm_trace *t, const char *device_spec, const hbm_replay_result *r, size_t n,
                                    const hbm_replay_bounds *b, FILE *f, int json);

/* --- export ---------------------------------------------------------------------------- */

/* Chrome / Perfetto trace JSON: counters "in use" and "reserved", instants for OOMs; t and
 * the devices attached to it (t->others) each a process of its own. */
HBM_API hbm_status hbm_export_perfetto(const hbm_trace *t, FILE *f);
/* pprof profile.proto, gzip-wrapped: alloc_objects/alloc_space (total) and
 * inuse_objects/inuse_space (at the peak), by tag and backtrace. */
HBM_API hbm_status hbm_export_pprof(const hbm_trace *t, FILE *f);
/* A PyTorch memory snapshot (pickle protocol 2: segments + device_traces) of one device, or
 * of n devices (hbm_trace_load_all's traces): the end state's real segments and blocks, the
 * history with segment_map/unmap, times only where the trace has them. */
HBM_API hbm_status hbm_export_torch(const hbm_trace *t, FILE *f);
HBM_API hbm_status hbm_export_torch_all(hbm_trace *const *traces, size_t n, FILE *f);
/* MiniMalloc CSV (id,lower,upper,size) of the timeline's buffers. */
HBM_API hbm_status hbm_export_minimalloc(const hbm_timeline *tl, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
