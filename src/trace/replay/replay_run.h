/* replay_run.h - what the floors above compose from the replay engine (replay_run.c)
 * besides hbm/replay.h: the most configurations one request replays, and the PyTorch part
 * of a report whose rows were replayed elsewhere (hbm_replay_many's results). */
#ifndef HBM_TRACE_REPLAY_RUN_H
#define HBM_TRACE_REPLAY_RUN_H

#include "hbm/replay.h"

/* The configurations of one request, at most (hbm_replay_request.n). */
#define HBMI_REPLAY_MAX_CONFIGS 64

/* rep's trace, rows and device set: what PyTorch recorded and the first torch row's twin,
 * on a PyTorch snapshot (rep->twin_row = -1 otherwise). */
hbm_status hbmi_replay_twin(hbm_replay_report *rep);

/* The device of a spec in words, as the device itself reads the spec:
 * "sim:85520809984,name=H100-80GB" as "H100-80GB (79.65GiB)", "sim:80GiB" as "a simulated
 * device of 80.00GiB"; a spec that does not open as it is. */
void hbmi_replay_device_words(const char *spec, char *buf, size_t cap);

/* How many requests the engine has run in this process (hbm_replay_run and
 * hbm_torch_suggest, each counted once, whatever their configurations): what a test reads
 * to see that an output computed its replay once. */
size_t hbmi_replay_requests(void);

#endif
