/* hbm/replay.h - a replay as a request and its result: the configurations as values, each
 * replayed once on the same simulated device, and everything the table and its JSON show
 * (for a PyTorch snapshot: what PyTorch recorded, and how closely the torch row's twin
 * follows it), so that writing the result computes nothing.
 *
 *   hbm_replay_config c[2];
 *   hbm_replay_config_make(t, "allocator=bfc", &c[0]);
 *   hbm_replay_config_make(t, "allocator=torch", &c[1]);
 *   hbm_replay_request q = {.trace = t, .configs = c, .n = 2, .twin = 1, .bound_buffers = 100000};
 *   hbm_replay_report rep;
 *   if (!hbm_replay_run(&q, &rep)) hbm_replay_report_write(&rep, stdout, 0);
 *   hbm_replay_report_release(&rep);
 */
#ifndef HBM_REPLAY_H
#define HBM_REPLAY_H

#include <stdio.h>

#include "hbm/config.h"
#include "hbm/replay_torch.h"
#include "hbm/status.h"
#include "hbm/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One configuration, as a value: what is opened (cfg) and how it is shown (text). */
typedef struct hbm_replay_config {
    char text[320];     /* the configuration string; under the recorded settings, those first */
    hbm_config cfg;     /* what the replay opens (unused when status is not HBM_OK) */
    int recorded;       /* 1: allocator=torch on a PyTorch snapshot, under its recorded settings */
    hbm_status status;  /* HBM_OK, or why text does not resolve (the row then says so) */
    char error[256];
} hbm_replay_config;

/* config resolved (hbm_config_resolve) for a replay of t: allocator=torch on a PyTorch
 * snapshot runs under the settings it was recorded with, config's own items after them
 * (hbm_torch_config_with_recorded). A configuration that does not resolve is still made
 * (out->status says why; its row reports it); HBM_ERR_INVALID only for a NULL argument or
 * a string longer than out->text holds. */
HBM_API hbm_status hbm_replay_config_make(const hbm_trace *t, const char *config, hbm_replay_config *out);

typedef struct hbm_replay_request {
    const hbm_trace *trace;
    const char *device;               /* a device name or sim:SIZE; NULL: hbm_replay_default_device */
    const hbm_replay_config *configs; /* n of them, at most 64 */
    size_t n;
    int twin;                         /* a PyTorch snapshot with a torch row: what PyTorch recorded, and
                                         the first torch row's twin matched against it */
    size_t bound_buffers;             /* pack the trace's buffers when at most this many (0: the lower
                                         bound only) */
} hbm_replay_request;

typedef struct hbm_replay_report {
    const hbm_trace *trace;
    char device[160];                 /* the spec replayed on */
    char device_words[160];           /* it in words, as the device reads it: "H100-80GB
                                         (79.65GiB)", "a simulated device of 80.00GiB"; the
                                         spec itself when it does not open ("": the spec) */
    int device_is_default;            /* 1: it is hbm_replay_default_device's, */
    const char *device_why;           /* ... which says why (a static string) */
    hbm_replay_result *rows;          /* one per configuration, in the request's order */
    size_t n;
    hbm_replay_bounds bounds;
    int twin_row;                     /* the row the twin follows; -1: none (no recorded row either) */
    char recorded_settings[200];      /* hbm_torch_recorded_settings, when twin_row >= 0 */
    hbm_torch_recorded recorded;      /* what PyTorch did, when twin_row >= 0 */
    uint64_t recorded_calls;          /* its segment events (cudaMalloc/cudaFree, map/unmap) */
    hbm_status twin_status;           /* HBM_OK, or why the twin could not run */
    hbm_torch_match twin;             /* when twin_status is HBM_OK */
    char twin_why[256];               /* HBM_ERR_OOM: why the twin could not start (a device smaller
                                         than the state PyTorch held when the history starts) */
} hbm_replay_report;

/* Replay each configuration of q once, then the bounds and, when asked, the twin. Returns
 * HBM_OK when the report was made (each row's status says whether it ran), else the
 * error, with out released. Free out with hbm_replay_report_release. */
HBM_API hbm_status hbm_replay_run(const hbm_replay_request *q, hbm_replay_report *out);
/* The comparison table (json = 0) or one JSON object: "trace", "device", "events",
 * "optimal_bound_bytes", "packed_bytes", "results", and for a PyTorch snapshot with a
 * torch row "recorded" and "match". */
HBM_API hbm_status hbm_replay_report_write(const hbm_replay_report *r, FILE *f, int json);
HBM_API void hbm_replay_report_release(hbm_replay_report *r);

#ifdef __cplusplus
}
#endif

#endif
