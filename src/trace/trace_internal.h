/* trace_internal.h - helpers shared by the trace reader, writer, importers and exporters. */
#ifndef HBM_TRACE_INTERNAL_H
#define HBM_TRACE_INTERNAL_H

#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/trace.h"
#include "trace/trace_view.h"

/* hbm's own state of a trace (hbm_trace.priv_), allocated with it by hbm_trace_new. */
struct hbmi_trace_priv {
    size_t cap; /* of hbm_trace.events */
    struct hbmi_tagtab *tags;
    /* A trace made from an HLO module's plan (hbm_plan_trace): steps is 1 and event i is at
     * schedule step time_ns / 1000 + step0, whose instruction is step_names[step] (n_steps
     * of them): positions read "step N (name)", as hbm plan counts, not "event N". */
    int steps;
    int64_t step0;
    char **step_names;
    size_t n_steps;
    uint64_t *bt_frames; /* all backtraces' frames, concatenated */
    size_t bt_nframes, bt_cap;
    uint64_t *bt_index;  /* backtrace id i (1-based): frames at bt_index[2i-2], count bt_index[2i-1] */
    size_t bt_count, bt_index_cap;
    /* A PyTorch snapshot's root keys hbm keeps as they were read, for the torch export to
     * write back: "allocator_settings" (defaults too, every key PyTorch wrote) and
     * "external_annotations", as pickle opcodes of key, value pairs (protocol 2, for a
     * SETITEMS); NULL when the snapshot had neither. torch_settings_kept: it had the first. */
    unsigned char *torch_keys;
    size_t torch_keys_n;
    int torch_settings_kept;
    /* A snapshot's "segments" of this device with their blocks, as read (for the torch
     * export); NULL for other sources. */
    struct hbmi_torch_segs *torch_segs;
};

#define HBMI_TRACE_MAGIC "HBMTRACE"
/* Version 2 added the sync event (type 7), version 3 segment_map / segment_unmap (8, 9);
 * readers accept 1 to 3, writers write 3. */
#define HBMI_TRACE_VERSION 3u
#define HBMI_TRACE_VERSION_MIN 1u
#define HBMI_TRACE_HEADER 32u
#define HBMI_REC_TAG 0x10
#define HBMI_REC_BACKTRACE 0x11
#define HBMI_REC_META 0x12

static inline void hbmi_put32(unsigned char *p, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 4);
#else
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
#endif
}
static inline void hbmi_put64(unsigned char *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
#endif
}
static inline uint32_t hbmi_get32(const unsigned char *p) {
    uint32_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&v, p, 4);
#else
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
#endif
    return v;
}
static inline uint64_t hbmi_get64(const unsigned char *p) {
    uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&v, p, 8);
#else
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
#endif
    return v;
}

/* Events are compact: the kind byte, then 8 LEB128 varints: time delta (ns since the
 * previous event), address delta (zigzag, against the previous event's address), size,
 * size - requested (zigzag), stream, thread, tag, backtrace. At most 1 + 8 x 10 bytes. */
#define HBMI_EVENT_MAX 81

typedef struct hbmi_ev_state {
    uint64_t time, addr;
} hbmi_ev_state;

static inline uint64_t hbmi_zigzag(uint64_t d) { return (d << 1) ^ (uint64_t)((int64_t)d >> 63); }
static inline uint64_t hbmi_unzigzag(uint64_t z) { return (z >> 1) ^ (uint64_t)-(int64_t)(z & 1); }

/* Encode e after st into p; returns the bytes written and advances st. */
static inline size_t hbmi_event_encode(unsigned char *p, const hbm_trace_event *e, hbmi_ev_state *st) {
    unsigned char *q = p;
    *q++ = e->kind;
    q = hbmi_varint_put(q, e->time_ns - st->time);
    q = hbmi_varint_put(q, hbmi_zigzag(e->addr - st->addr));
    q = hbmi_varint_put(q, e->size);
    q = hbmi_varint_put(q, hbmi_zigzag(e->size - e->requested));
    q = hbmi_varint_put(q, e->stream);
    q = hbmi_varint_put(q, e->thread);
    q = hbmi_varint_put(q, e->tag);
    q = hbmi_varint_put(q, e->backtrace);
    st->time = e->time_ns;
    st->addr = e->addr;
    return (size_t)(q - p);
}

/* A writer on an open stream (owned from now on, closed on failure too); path names it in
 * messages. */
hbm_status hbmi_trace_writer_fopen(FILE *f, const char *path, const char *device, uint64_t capacity,
                                   hbm_trace_writer **out);
/* The device records (docs/trace-format.md, "The device"): name (NULL or "": none; control
 * bytes become '?', cut at 63 bytes), index (< 0: none), total bytes (0: none). */
hbm_status hbmi_trace_writer_device(hbm_trace_writer *w, const char *name, int index, uint64_t bytes);
/* A meta record (keys the reader knows: device, source, name). */
hbm_status hbmi_trace_writer_meta(hbm_trace_writer *w, const char *key, const char *value);

/* A growable byte buffer for exporters. what names the output for the message when it cannot
 * grow ("out of host memory writing WHAT"); each write returns HBM_ERR_NOMEM then. */
typedef struct hbmi_buf {
    unsigned char *p;
    size_t n, cap;
    const char *what;
} hbmi_buf;
hbm_status hbmi_buf_put(hbmi_buf *b, const void *data, size_t n);
hbm_status hbmi_buf_byte(hbmi_buf *b, unsigned char c);
void hbmi_buf_free(hbmi_buf *b);
/* Pickle opcodes (protocol 2) of a str, and of an int in its shortest form. */
hbm_status hbmi_pk_str(hbmi_buf *b, const char *s);
hbm_status hbmi_pk_int(hbmi_buf *b, int64_t v);
hbm_status hbmi_pk_uint(hbmi_buf *b, uint64_t v);

/* (JSON strings: hbmi_json_str, core/internal.h) */

/* Every device of a PyTorch snapshot (pickle, or JSON when json), in display order. */
hbm_status hbmi_torch_parse_all(const void *data, size_t len, int json, const char *name, hbmi_input *in,
                                hbm_trace ***out, size_t *n);

/* A PyTorch allocator's end state as a snapshot's "segments" holds it: each segment with
 * its blocks in address order, as read (a snapshot) or as the PyTorch allocator twin left
 * them (any other trace). The torch export writes it back (hbm_trace.priv_->torch_segs). */
enum { HBMI_TBLK_INACTIVE, HBMI_TBLK_ALLOCATED, HBMI_TBLK_PENDING_FREE };
typedef struct hbmi_tblock {
    uint64_t addr, size, requested; /* size as the allocator held it */
    uint32_t backtrace;             /* its "frames" (hbm_trace_backtrace), 0 = [] */
    uint32_t tag;                   /* without a backtrace: the tag's frame (hbm_trace_tag) */
    uint8_t state;                  /* HBMI_TBLK_* */
} hbmi_tblock;
/* keys a segment had (written back only when it had them) */
enum { HBMI_TSEG_DEVICE = 1, HBMI_TSEG_SIZES = 2, HBMI_TSEG_TYPE = 4, HBMI_TSEG_POOL = 8, HBMI_TSEG_EXPANDABLE = 16,
       HBMI_TSEG_FRAMES = 32 };
typedef struct hbmi_tseg {
    uint64_t addr, total, allocated, active, requested, stream;
    int64_t pool[2];     /* segment_pool_id */
    size_t order;        /* its place in the snapshot's list (all devices) */
    size_t first, n;     /* its blocks: hbmi_torch_segs.b[first .. first + n) */
    uint32_t backtrace;  /* the segment's "frames" */
    int device;
    uint8_t small;       /* segment_type "small" (else "large") */
    uint8_t expandable;
    uint8_t keys;        /* HBMI_TSEG_* */
} hbmi_tseg;
typedef struct hbmi_torch_segs {
    hbmi_tseg *s;
    size_t n, cap;
    hbmi_tblock *b;
    size_t nb, capb;
    int64_t t0_us; /* the snapshot's first time_us (its times are kept from it), else 0 */
    /* The history entries' keys hbm does not read ("compile_context", ...): set id (1..nx)
     * -> pickle opcodes of its key, value pairs, xb[xoff[id - 1], xoff[id]); runs[i] = the
     * first event (index in the trace) of a run whose entries have set id runs[i + 1]. */
    unsigned char *xb;
    size_t *xoff, nx;
    uint64_t *runs;
    size_t nruns, runs_cap; /* runs: 2 * nruns values */
    /* Entries of other actions ("snapshot" markers, ...), not events of the trace: each
     * written back before event pos (device: -1 = this trace's; else the index of a device
     * without a trace of its own, whose list holds only such entries). */
    struct hbmi_tmark {
        size_t pos;
        int device;
        int has_frames;
        int64_t time_us; /* as read; -1 none */
        uint64_t addr, size, stream;
        uint32_t backtrace, xid;
        char action[48];
    } *marks;
    size_t nmarks, marks_cap;
    /* From the twin (hbmi_torch_twin_end_state): where it placed each alloc event of the
     * trace (twin_addr[i], 0: not placed), and its segment events, each made while it ran
     * event pos (written before it). */
    uint64_t *twin_addr;
    struct hbmi_tsegev {
        size_t pos;
        uint8_t kind; /* HBM_EV_SEGMENT_* */
        uint64_t addr, size, stream;
    } *twin_seg;
    size_t ntwin_seg, twin_seg_cap;
} hbmi_torch_segs;
void hbmi_torch_segs_free(hbmi_torch_segs *x);
/* The PyTorch allocator twin run on t (its allocs and frees, under the settings it was
 * recorded with): its segments and blocks at the end, into *out (owned by the caller). */
hbm_status hbmi_torch_twin_end_state(const hbm_trace *t, hbmi_torch_segs **out);

/* all[pick] with the other n - 1 traces attached as its others (the array is reused). */
hbm_trace *hbmi_trace_keep_others(hbm_trace **all, size_t n, size_t pick);

/* The tracking adaptor (recorder.c): a policy that records every call of the
 * inner one into path. On failure the inner policy is untouched (the caller destroys it).
 * hbm_allocator_open (allocator_open.c) composes it over the policy. */
hbm_status hbmi_recorder_create(const hbm_allocator_ops *iops, void *iself, hbm_device *dev, const char *path,
                                unsigned flags, const hbm_allocator_ops **ops_out, void **self_out);
/* The recorder over a policy just opened when cfg asks for one (trace=PATH or HBM_TRACE):
 * *ops and *self become the recorder's; without trace= nothing changes. On failure the
 * inner policy is destroyed. What hbm_allocator_open, and the replay on its own floor,
 * compose between the policy (hbmi_policy_open) and the handle (hbm_allocator_wrap). */
hbm_status hbmi_recorder_over(const hbm_config *cfg, hbm_device *dev, const hbm_allocator_ops **ops, void **self);

#endif
