/* hbm/replay_torch.h - how closely the "torch" policy follows PyTorch's real allocator on
 * a recorded snapshot.
 *
 * A PyTorch memory snapshot records, besides each alloc and free, every decision of the
 * caching allocator about device memory: segment_alloc / segment_free (cudaMalloc /
 * cudaFree) and segment_map / segment_unmap (pages of an expandable segment). Replaying
 * the allocs and frees through allocator=torch (its twin) and comparing its own segment
 * events with those says whether the twin made the same decisions, and comparing where
 * each allocation lands says whether it placed every block where PyTorch did.
 *
 *   hbm_trace *t;  hbm_trace_load("snapshot.pickle", &t);
 *   hbm_torch_match m;
 *   hbm_replay_torch_match(t, NULL, NULL, &m);   // the recorded settings, inferred device
 *   printf("%llu of %llu segment events\n", m.segments_same, m.segments_recorded);
 *
 * Rules of the comparison:
 *   - the recorded segment events that precede an alloc (since the previous alloc) are the
 *     real allocator's decisions inside that malloc; the twin's events during the same
 *     malloc are compared with them pairwise, in order: a recorded event is reproduced when
 *     the twin's event at its position has the same kind and size;
 *   - a run of recorded segment_free / segment_unmap events that no segment_alloc,
 *     segment_map or oom follows is a torch.cuda.empty_cache() call of the program: the
 *     twin empties its cache there too, and its events are compared with the run;
 *   - an alloc matches when the twin puts it in the segment that corresponds to the
 *     recorded one (the segments paired by the matched segment_alloc / segment_map events)
 *     at the same offset from the segment's base (an expandable segment's base is the
 *     start of its virtual range);
 *   - blocks are freed at free_completed (PyTorch returns them to the cache then).
 * A history that starts mid-run (t->history_start > 0: the loader rebuilt the state at its
 * start from the snapshot's segments) is replayed from that state: the twin gets its
 * cudaMalloc segments at their addresses with their live blocks, and only the history's
 * own events are compared (expandable segments: their mapped runs, in one virtual range
 * per stream and pool).
 */
#ifndef HBM_REPLAY_TORCH_H
#define HBM_REPLAY_TORCH_H

#include <stdint.h>
#include <stdio.h>

#include "hbm/status.h"
#include "hbm/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbm_torch_match {
    char config[256];           /* the twin's configuration */
    char device[64];            /* the simulated device it ran on */
    uint64_t segments_recorded; /* recorded segment_alloc/free/map/unmap events */
    uint64_t segments_same;     /* ... reproduced by the twin in order, kind and size */
    uint64_t segments_twin;     /* segment events the twin made */
    uint64_t allocs;            /* recorded allocations (the twin's successes included) */
    uint64_t allocs_same;       /* ... placed at the recorded offset of the corresponding segment */
    uint64_t allocs_before_history; /* recorded allocs in a segment the history never allocates
                                       (it existed before the history began; never the same) */
    uint64_t ooms_recorded, ooms_twin; /* OOM events: recorded; the twin's failed allocations */
    uint64_t empty_cache_calls; /* empty_cache() calls inferred from the history */
    int64_t first_segment_diff; /* event index of the first recorded segment event not reproduced, -1 */
    int64_t first_alloc_diff;   /* event index of the first alloc placed elsewhere, -1 */
    uint64_t peak_reserved_recorded, peak_reserved_twin;
} hbm_torch_match;

/* Replay t through allocator=torch and compare. config: a whole configuration when it
 * starts with "allocator=", else config items for the twin after the recorded settings
 * (hbm_torch_recorded_settings; "max_split_size_mb=128", ...), NULL = the recorded
 * settings alone. device_spec: NULL = hbm_replay_default_device's (for a snapshot without
 * an OOM, its peak reserved bytes: cudaMalloc fails where the real one must have). */
HBM_API hbm_status hbm_replay_torch_match(const hbm_trace *t, const char *config, const char *device_spec, hbm_torch_match *out);

/* The settings a snapshot was recorded with, as config items of allocator=torch: its
 * allocator_settings (PYTORCH_CUDA_ALLOC_CONF as PyTorch parsed it), else
 * "expandable_segments=true" when the history maps pages, else "" (PyTorch's defaults). */
HBM_API hbm_status hbm_torch_recorded_settings(const hbm_trace *t, char *buf, size_t cap);

/* The allocator's state when a mid-run history begins (cudaMalloc segments, and the runs
 * of mapped pages of expandable segments): each with its live blocks, in address order. The twin starts
 * from it instead of an empty device: the segments at their addresses, live blocks live
 * (their frees in the history free them), the gaps cached. */
typedef struct hbm_torch_block_state {
    uint64_t addr, size, requested; /* size as PyTorch held it (a multiple of 512) */
} hbm_torch_block_state;
typedef struct hbm_torch_segment_state {
    uint64_t addr, size, stream;
    int small;                          /* small pool (2 MiB segments) */
    const hbm_torch_block_state *live;
    size_t nlive;
    int expandable; /* a run of mapped pages of an expandable segment (addr, size: the run);
                       the runs of one stream and pool share one virtual range, from the
                       lowest of them */
} hbm_torch_segment_state;

HBM_API hbm_status hbm_replay_torch_match_from(const hbm_trace *t, const hbm_torch_segment_state *segs, size_t nsegs,
                                               const char *config, const char *device_spec, hbm_torch_match *out);

/* "segments 22/22 (100.0%), addresses 782/782 (100.0%)" or the JSON object
 * {"segments": [same, recorded], "addresses": [same, allocs], ...}. */
HBM_API hbm_status hbm_torch_match_write(const hbm_torch_match *m, FILE *f, int json);

/* config ("allocator=torch[,items]") under the settings t was recorded with: those of
 * hbm_torch_recorded_settings whose keys config does not set, then config's own items.
 * HBM_ERR_INVALID when config is not allocator=torch or the result does not fit cap. */
HBM_API hbm_status hbm_torch_config_with_recorded(const hbm_trace *t, const char *config, char *buf, size_t cap);

/* Where the twin first parts from PyTorch, in words, one line per kind of difference
 * ("  first segment difference: event 12, PyTorch's segment_alloc of 20.00MiB: ..."), and
 * why as far as the snapshot tells; nothing when every event matched. t: the trace m came
 * from (event numbers count from its history's start). */
HBM_API hbm_status hbm_torch_match_explain(const hbm_trace *t, const hbm_torch_match *m, FILE *f);

/* What the real allocator did, from the snapshot's own segment events: its peak reserved
 * bytes, the bytes requested by live allocations at that moment (the history gives
 * requested sizes, not PyTorch's rounded block sizes), the rest of the reserve, the live
 * cudaMalloc segments then, and the first OOM. */
typedef struct hbm_torch_recorded {
    uint64_t peak_reserved;
    int64_t peak_event;          /* event index of the peak, -1 if nothing was reserved */
    uint64_t requested_at_peak;  /* bytes asked by the allocations live at the peak */
    uint64_t unallocated_at_peak; /* peak_reserved - requested_at_peak */
    uint64_t segments_at_peak;   /* cudaMalloc segments held at the peak (expandable: 0) */
    int64_t oom_event;           /* first oom event, -1 if none */
    uint64_t oom_bytes;
    uint64_t peak_in_use;        /* most bytes live at once (requested sizes, as pytorch.org/memory_viz draws them) */
    int64_t peak_in_use_event;   /* its event index, -1 if nothing was allocated */
} hbm_torch_recorded;

HBM_API hbm_status hbm_torch_recorded_get(const hbm_trace *t, hbm_torch_recorded *out);

/* For `hbm replay` of a PyTorch snapshot: the twin's match under the recorded settings as a
 * text line (hbm_replay_write puts what PyTorch recorded in the table's first row), or the
 * JSON members "recorded": {...}, "match": {...} (no braces around them, a leading ", "),
 * written by the same code as `hbm replay --json`'s (the same keys, events numbered from
 * the history's first). */
HBM_API hbm_status hbm_torch_replay_write(const hbm_trace *t, FILE *f, int json);

/* --- hbm replay --suggest: the smallest PyTorch setting that avoids the OOM ---------------
 * Replays the history under the recorded settings and under each single change PyTorch
 * offers (expandable_segments on or off, max_split_size_mb 20 ... 1024,
 * backend:cudaMallocAsync) on the device (device_spec, else the trace's capacity, else the
 * history's peak reserved bytes: the least the real device had). The answer is the change
 * without an OOM that reserves least at its peak; when none avoids it, how many bytes the
 * program is over: the most bytes needed at once (live, or live plus a recorded request
 * that failed) minus the device's capacity (no allocator can do better), or 0 when it is
 * fragmentation no setting here fixes. A snapshot without history (no event after the
 * blocks rebuilt from its segments) is HBM_ERR_INVALID: there is nothing to replay. */
#define HBM_TORCH_SUGGEST_MAX 16
typedef struct hbm_torch_candidate {
    char config[160];  /* hbm config string */
    char env[160];     /* the same as PYTORCH_CUDA_ALLOC_CONF=... */
    hbm_status status; /* HBM_OK when it ran */
    uint64_t ooms, peak_reserved, peak_in_use;
    double frag_at_peak;
} hbm_torch_candidate;

typedef struct hbm_torch_suggestion {
    char device[96];
    char device_words[160];   /* device in words (hbm_replay_report's device_words) */
    uint64_t capacity;
    uint64_t lower_bound;     /* most bytes needed at once (live, or live + a request that failed) */
    size_t n;                 /* candidates; [0] is the recorded settings */
    hbm_torch_candidate c[HBM_TORCH_SUGGEST_MAX];
    int best;                 /* index of the answer, -1 if none avoids the OOM */
    uint64_t over_by;         /* none: lower_bound - capacity (0: fragmentation) */
} hbm_torch_suggestion;

HBM_API hbm_status hbm_torch_suggest(const hbm_trace *t, const char *device_spec, hbm_torch_suggestion *out);
/* The answer as the line to use, the numbers, and the table of candidates; or JSON. */
HBM_API hbm_status hbm_torch_suggest_write(const hbm_torch_suggestion *s, FILE *f, int json);

#ifdef __cplusplus
}
#endif
#endif
