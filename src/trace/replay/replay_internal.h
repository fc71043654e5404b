/* replay_internal.h - the replay engine (replay.c) as the floor above it composes it: a
 * trace prepared once (its alloc/free pairing), each configuration replayed once against
 * it. The engine formats nothing: what happens at an OOM beyond counting it (the report,
 * its diagnosis) is the caller's hook, called once, at the first one, with the allocator
 * in its state then. */
#ifndef HBM_TRACE_REPLAY_INTERNAL_H
#define HBM_TRACE_REPLAY_INTERNAL_H

#include <string.h>

#include "hbm/alloc.h"
#include "hbm/replay.h"
#include "trace/trace_internal.h"

/* What every configuration's replay of one trace shares. */
typedef struct hbmi_replay_plan {
    const hbm_trace *t;
    uint64_t *slot;       /* per event: a free's alloc index + 1 (0: none), written by
                             hbmi_replay_prepare; an alloc's is the pairing's scratch, which
                             the plan's owner may lend to one replay at a time (its scratch) */
    uint64_t lower_bound; /* the most bytes live at once (hbm_replay_bounds_get's) */
    size_t nbuffers;      /* the buffers of hbm_trace_to_timeline (non-zero sizes) */
} hbmi_replay_plan;

hbm_status hbmi_replay_prepare(const hbm_trace *t, hbmi_replay_plan *p);

/* The allocator a replay runs on dev: the policy cfg names (alloc/), the recorder over it
 * when cfg says trace= (trace/), and the handle (alloc/): hbm_allocator_open_config's
 * composition, made here so that the replay calls each floor below it directly. */
hbm_status hbmi_replay_allocator_open(hbm_device *dev, const hbm_config *cfg, hbm_allocator **out);
void hbmi_replay_plan_free(hbmi_replay_plan *p);
/* hbm_replay_bounds_get of the plan's trace, its pairing and bound reused. */
hbm_status hbmi_replay_bounds(const hbmi_replay_plan *p, double timeout_s, size_t max_buffers, hbm_replay_bounds *out);

typedef struct hbmi_replay_hooks {
    /* at the first OOM (the allocator's OOM record taken): r->first_oom_* are set */
    void (*on_first_oom)(void *user, hbm_allocator *a, hbm_replay_result *r);
    void *user;
    int stop_at_first_oom; /* 1: end the replay there (r says where; peaks so far) */
} hbmi_replay_hooks;

/* Replay p's trace against cfg on a fresh device opened from device_spec; r->config gets
 * cfg->text. h may be NULL. Returns r->status. p is only read: one plan serves several
 * replays, nested (a hook's) or on other threads. The replay keeps each alloc's address at
 * the alloc's index of scratch: NULL, an array of its own; else the caller's, written at
 * alloc events' indices only, so p->slot itself when the caller owns p and runs its
 * replays one after another (warm memory: no array to allocate per configuration). */
hbm_status hbmi_replay_one(const hbmi_replay_plan *p, uint64_t *scratch, const char *device_spec,
                           const hbm_replay_config *cfg, const hbmi_replay_hooks *h, hbm_replay_result *r);

/* s into buf[cap], cut at cap - 1 bytes (a configuration into a result's config). */
static inline void hbmi_strlcpy_cut(char *buf, size_t cap, const char *s) {
    size_t k = strnlen(s, cap - 1);
    memcpy(buf, s, k);
    buf[k] = 0;
}

/* r failed with s: its status and the last error's message. Returns s. */
hbm_status hbmi_replay_result_fail(hbm_replay_result *r, hbm_status s);

#endif
