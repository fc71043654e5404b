/* replay_render.h - replay_report.c's writer for the floor above that composes it: what
 * PyTorch recorded and the twin's match, given (hbm_torch_replay_write's output). */
#ifndef HBM_REPORT_REPLAY_RENDER_H
#define HBM_REPORT_REPLAY_RENDER_H

#include <stdio.h>

#include "hbm/replay_torch.h"

/* json: the members ', "recorded": {...}, "match": {...}'; else the twin's line. */
void hbmi_torch_replay_render(const hbm_trace *t, const hbm_torch_recorded *r, const hbm_torch_match *m, FILE *f,
                              int json);

#endif
