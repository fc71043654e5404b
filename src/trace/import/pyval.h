/* pyval.h - a small tree of Python-like values, built by the pickle and JSON readers and
 * walked by the PyTorch snapshot importer. Every value belongs to a pool freed at once,
 * so shared references (pickle memo) and cycles need no reference counting.
 *
 * Streaming snapshots (pool->events set): a snapshot's history is millions of small dicts
 * ({"action", "addr", "size", ..., "frames"}), far larger as a tree than in the file. With
 * events set, every dict with a str "action" appended to a list becomes a compact record
 * of that list (list->ev) as soon as it is appended, its values go back to the pool, and
 * its "frames" list is kept once per distinct stack (equal stacks share one list). */
#ifndef HBM_TRACE_PYVAL_H
#define HBM_TRACE_PYVAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"
#include "hbm/status.h"
#include "hbm/trace.h"

typedef enum hbmi_pvtype {
    PV_NONE, PV_BOOL, PV_INT, PV_FLOAT, PV_STR, PV_BYTES, PV_LIST, PV_TUPLE, PV_DICT,
    PV_ENTRY, /* a trace entry decoded by the pickle reader: i = its event in pool->staged */
    PV_FREE_
} hbmi_pvtype;

typedef struct hbmi_pv {
    uint8_t type; /* hbmi_pvtype */
    uint8_t keep; /* shared (pickle memo, interned string, a kept stack): never returned to the pool */
    uint8_t plain; /* a shared dict known not to be a trace entry (until its items change) */
    union {
        int64_t i; /* bool, int (values >= 2^63 wrap, as addresses do) */
        double f;
    };
    char *s; /* str / bytes, NUL-terminated, len bytes */
    size_t len;
    struct hbmi_pv **items; /* list / tuple: n items; dict: n/2 key, value pairs */
    size_t n, cap;
    struct hbmi_pvevs *ev; /* a list's trace entries, read as records (streaming) */
} hbmi_pv;

/* A list's trace entries, read as they were appended, each in the event it becomes (the
 * importer takes the array over as the trace's events):
 *   kind        hbm_event_kind of "action"; 0 for other actions ("snapshot" markers, ...)
 *   addr, size, stream   as given (addresses above 2^63 wrap)
 *   time_ns     "time_us" as an int64 (-1: none)
 *   requested   an OOM's "device_free"; with a bad field, its raw value (int64, or double bits)
 *   tag         0, or the field out of range ('a' addr, 's' size), | HBMI_PVEV_FLOAT for a double
 *   backtrace   1 + index of its stack ("frames") in pool->kept, 0 for none */
typedef struct hbmi_pvevs {
    hbm_trace_event *r;
    size_t n, cap;
} hbmi_pvevs;
#define HBMI_PVEV_FLOAT 0x100u

typedef struct hbmi_pvpool {
    hbmi_pv **slabs; /* values are carved from slabs of HBMI_PV_SLAB (one malloc each), */
    size_t nslabs, slabcap, slab_used; /* all full but the last (slab_used values) */
    hbmi_pv *free_list; /* values given back (linked through s; they keep their items array) */
    int events;         /* streaming: trace entries become records (set before parsing) */
    hbmi_map stacks;    /* stack hash -> index in kept */
    struct hbmi_pv **kept; /* the distinct stacks (frames lists), kept */
    size_t nkept, kept_cap;
    hbmi_map shared;    /* a kept frames list object -> the kept list equal to it */
    hbmi_input *in;    /* the input, when mapped: parsers let the pages they have read go */
    hbm_trace_event *staged; /* entries decoded, not yet appended (PV_ENTRY values) */
    size_t nstaged, staged_cap, staged_live;
    const struct hbmi_pv *act_pv[4]; /* action strings met last, and their kinds */
    uint8_t act_kind[4];
    hbmi_pv **work;     /* values to give back (an explicit stack: nesting may be deep) */
    size_t work_cap;
    /* An entry's keys the importer does not read ("compile_context", "user_metadata": str,
     * int, bool or None values), kept for the torch export: the distinct sets, each as
     * pickle opcodes of its key, value pairs (protocol 2) in xb[xoff[id - 1], xoff[id]);
     * the record's thread is its id (0: none). A record of another action (kind 0:
     * "snapshot", ...) has in requested its name's place in act + 1, | HBMI_PVEV_FRAMES when
     * it had "frames". */
    unsigned char *xb;
    size_t xn, xcap;
    size_t *xoff;       /* nx + 1 offsets */
    size_t nx, xoff_cap;
    hbmi_map xids;      /* hash of a set's bytes -> its id */
    const hbmi_pv *xlast[8]; /* the last set's key, value objects (memo reads repeat them) */
    size_t nxlast;
    uint32_t xlast_id;
    char act[16][48];   /* names of the other actions met */
    unsigned nact;
} hbmi_pvpool;
#define HBMI_PVEV_FRAMES (1ull << 32)

/* The id of the set of other keys pairs[0..2n) (key, value objects), 0 when there are none
 * or a value is of a type not kept; UINT32_MAX out of memory. */
uint32_t hbmi_pv_extra(hbmi_pvpool *p, const hbmi_pv *const *pairs, size_t n);
/* requested of a record of another action (see above); 0 when the name is not kept. */
uint64_t hbmi_pv_other_action(hbmi_pvpool *p, const hbmi_pv *action, int has_frames);

#define HBMI_PV_SLAB 4096

hbmi_pv *hbmi_pv_new(hbmi_pvpool *p, hbmi_pvtype type);
/* Append to a list/tuple/dict's items; 0 on success. */
int hbmi_pv_push(hbmi_pv *v, hbmi_pv *item);
/* Room for n more items; 0 on success. */
int hbmi_pv_reserve(hbmi_pv *v, size_t n);
/* Append item to a list: a record when streaming and item is a trace entry, else an item.
 * 0 on success, -1 out of memory. */
int hbmi_pv_list_add(hbmi_pvpool *p, hbmi_pv *list, hbmi_pv *item);
void hbmi_pvpool_free(hbmi_pvpool *p);
/* The kept list equal to list (a stack of frames: list itself, kept from now on, when it is
 * the first of its content); NULL when out of memory. */
hbmi_pv *hbmi_pv_keep_stack(hbmi_pvpool *p, hbmi_pv *list);
/* The same, with its backtrace number (1 + its index in p->kept) in *bt. */
hbmi_pv *hbmi_pv_keep_stack_index(hbmi_pvpool *p, hbmi_pv *list, uint32_t *bt);
/* hbm_event_kind of an action name (a str value); 0 for others. */
uint8_t hbmi_pv_action_kind(hbmi_pvpool *p, const hbmi_pv *action);
/* A PV_ENTRY value holding the event e (see hbmi_pvevs), appended by hbmi_pv_list_add. */
hbmi_pv *hbmi_pv_staged(hbmi_pvpool *p, const hbm_trace_event *e);

/* The value of key in a dict (str keys), or NULL. */
const hbmi_pv *hbmi_pv_get(const hbmi_pv *dict, const char *key);
/* Int value of key (ints, bools, floats truncated), or def. */
int64_t hbmi_pv_int(const hbmi_pv *dict, const char *key, int64_t def);
const char *hbmi_pv_str(const hbmi_pv *dict, const char *key);

/* Parsers: on error HBM_ERR_PARSE naming name and the byte offset. */
hbm_status hbmi_pickle_parse(const unsigned char *data, size_t len, const char *name, hbmi_pvpool *pool,
                             hbmi_pv **out);
hbm_status hbmi_json_parse(const char *text, size_t len, const char *name, hbmi_pvpool *pool, hbmi_pv **out);

#endif
