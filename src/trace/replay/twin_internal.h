/* twin_internal.h - the PyTorch twin's own structures (torch_twin.c), here so a test can
 * reach them, and what the replay's report (src/report/replay_report.c) asks of it.
 *
 * The recorded segments: the (base, size) of the cudaMalloc segments the history holds at
 * the twin's current event. A history repeated or cut by PyTorch's ring buffer can hold two
 * at one base (a segment_free lost), and on a long one thousands are held, so adding and
 * removing one is O(log n) plus a chunk's move: a sorted array cut into chunks of at most
 * HBMI_TWIN_SEGS_CHUNK entries (by base, then size), with the chunks' first keys searched
 * by bisection, in the manner of a B+-tree of one level. Beside it, the segments in the
 * order a plain list with swap-removal keeps them (what the twin did before): which of two
 * at one base a segment_free ends is the one first in that list, so the twin's figures on
 * such histories stay what they were. */
#ifndef HBM_TRACE_REPLAY_TWIN_INTERNAL_H
#define HBM_TRACE_REPLAY_TWIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/replay_torch.h"
#include "hbm/status.h"

/* hbm_torch_recorded_get, and in the same walk the history's segment events (cudaMalloc /
 * cudaFree, map / unmap) into *calls. */
hbm_status hbmi_torch_recorded_scan(const hbm_trace *t, hbm_torch_recorded *out, uint64_t *calls);
/* hbm_torch_config_with_recorded with the recorded settings rec known already (config is
 * allocator=torch, alone or with items). */
hbm_status hbmi_torch_config_with(const char *rec, const char *config, char *buf, size_t cap);
/* hbm_replay_torch_match with t's recorded settings as hbm_torch_recorded_settings wrote
 * them (known already: not found again, a walk of the events when the snapshot does not
 * say them). */
hbm_status hbmi_twin_match(const hbm_trace *t, const char *recorded, const char *config, const char *device_spec,
                           hbm_torch_match *out);

/* 1 when the run of segment_free / segment_unmap events [run, end) of t (end: the first
 * event after it, or t->count) was the program's torch.cuda.empty_cache(), not the frees
 * of the malloc recorded at end (its retry after a failed cudaMalloc, or garbage
 * collection): by the stacks PyTorch recorded on them, else by the event at end and, for
 * a segment_alloc / segment_map, whether reserved (the bytes reserved when the run began)
 * plus its size fits in peak (the history's peak reserved; 0: unknown). */
int hbmi_twin_run_is_empty_cache(const hbm_trace *t, size_t run, size_t end, uint64_t reserved, uint64_t peak);

#define HBMI_TWIN_SEGS_CHUNK 64

typedef struct hbmi_twin_seg {
    uint64_t base, size;
    size_t pos; /* its index in the list order (hbmi_twin_segs.list) */
} hbmi_twin_seg;

typedef struct hbmi_twin_segs_chunk {
    size_t n;
    hbmi_twin_seg e[HBMI_TWIN_SEGS_CHUNK];
} hbmi_twin_segs_chunk;

typedef struct hbmi_twin_segs {
    hbmi_twin_segs_chunk **ch; /* in key order, none empty */
    uint64_t *first;           /* first[2k], first[2k + 1]: chunk k's first (base, size) */
    size_t nch, capch, capfirst;
    uint64_t *list;            /* (base, size) in the list order */
    size_t n, caplist;
    uint64_t longest;          /* the longest segment ever added (has walks back no further) */
} hbmi_twin_segs;

void hbmi_twin_segs_init(hbmi_twin_segs *s);
void hbmi_twin_segs_destroy(hbmi_twin_segs *s);
/* Add (base, size) at the list's end. HBM_ERR_NOMEM leaves s as it was. */
hbm_status hbmi_twin_segs_add(hbmi_twin_segs *s, uint64_t base, uint64_t size);
/* Remove the segment at base first in the list order (the list's last takes its place
 * there); none: nothing. */
void hbmi_twin_segs_del(hbmi_twin_segs *s, uint64_t base);
/* 1 when addr (not UINT64_MAX) is in a segment held: base <= addr < base + size, the sum
 * taken mod 2^64 (a segment whose end wraps holds nothing above its base). */
int hbmi_twin_segs_has(const hbmi_twin_segs *s, uint64_t addr);
/* The invariants (order, chunks' first keys, the list and the positions agreeing, the
 * counts), as tlsf_check does: HBM_ERR_CORRUPT naming the first broken one. */
hbm_status hbmi_twin_segs_check(const hbmi_twin_segs *s);

#endif
