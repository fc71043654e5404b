/* twin_internal.h - the PyTorch twin (torch_twin.c) as a walk that another replay can take
 * beside it: hbm_replay_run steps it through the snapshot's events inside the torch row's
 * own walk, so that the trace is walked once for the row and its twin. The two keep their
 * own allocators and devices: the row starts from an empty device, the twin from the
 * prelude seeded at its recorded addresses, and neither sees the other's state (the twin
 * reads no message the row sets and leaves the OOM quiet flag as it found it). */
#ifndef HBM_TRACE_REPLAY_TWIN_INTERNAL_H
#define HBM_TRACE_REPLAY_TWIN_INTERNAL_H

#include "hbm/replay_torch.h"

typedef struct hbmi_twin hbmi_twin;

/* hbm_replay_torch_match_from's twin, opened and seeded, before its first event. Its own
 * failures (a configuration that does not run the torch policy, a device that does not
 * open) are hbmi_twin_end's to return; HBM_ERR_INVALID / HBM_ERR_NOMEM here, *tw NULL. */
hbm_status hbmi_twin_begin(const hbm_trace *t, const hbm_torch_segment_state *segs, size_t nsegs, const char *config,
                           const char *device_spec, hbm_torch_match *out, hbmi_twin **tw);
/* Replay t's events before index upto (t's numbering; those before its history are the
 * prelude, seeded, not replayed) that the twin has not yet replayed. */
void hbmi_twin_step(hbmi_twin *tw, size_t upto);
/* The rest of the events, the last comparison; frees tw. Returns the twin's status, with
 * its message as the last error when it failed. */
hbm_status hbmi_twin_end(hbmi_twin *tw);

#endif
