/* src/alloc/alloc_policy.h - what a neighbour that drives an allocator's policy itself (the
 * recorder, hbm_allocator_open, the trace replay and the torch twin in src/trace) reads of
 * the alloc module: the policy under a handle and its switches. The handle's struct stays in
 * alloc_internal.h, which includes this and is read only inside src/alloc. */
#ifndef HBM_ALLOC_POLICY_H
#define HBM_ALLOC_POLICY_H

#include <stdint.h>

#include "core/internal.h"
#include "hbm/alloc.h"

/* The policy cfg names, over dev, with the byte limit cfg and the device give it: its ops
 * and state, for hbm_allocator_wrap or an adaptor (allocator.c: the policy table). */
hbm_status hbmi_policy_open(hbm_device *dev, const hbm_config *cfg, const hbm_allocator_ops **ops, void **self);

/* The policy a runs: its ops, and its state into *self. A caller that owns a alone may call
 * them directly (no lock taken); the ops stay a's until it is closed. */
const hbm_allocator_ops *hbmi_allocator_policy(const hbm_allocator *a, void **self);
/* a's tag table (the ids its policy's alloc takes). */
hbmi_tagtab *hbmi_allocator_tags(hbm_allocator *a);

/* The policy's bytes_in_use counter as it keeps it (what its stats would say), for a replay
 * that checks its peak after every allocation without a stats call; NULL for a policy that
 * computes it only in its stats. */
const uint64_t *hbmi_policy_in_use(const hbm_allocator *a);

/* Quiet OOMs on a: its policy and its device return HBM_ERR_OOM without a message (the last
 * error stays as it was) and skip what they compute only for the message, for a caller that
 * counts failures past the first (a replay). Returns the old setting. The setting belongs to
 * a, its policy's state and its device: other allocators keep theirs. */
int hbmi_allocator_set_quiet(hbm_allocator *a, int on);
/* The device number a's out-of-memory text names (PyTorch's "GPU N": a replay of a snapshot
 * of cuda:N says N), for the wrapper's report and the torch policy's own message. */
void hbmi_allocator_set_ordinal(hbm_allocator *a, int ordinal);
/* Record a failed allocation for the OOM report, as hbm_alloc does; for callers that
 * drive the policy directly while owning the handle alone (trace replay). */
void hbmi_allocator_note_oom(hbm_allocator *a, uint64_t size, uint32_t tag_id);

#endif
