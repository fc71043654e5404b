/* eventlog.h - the event log `hbm run --trace FILE` writes: CSV, one line per event.
 *
 *   # hbm run event log v1
 *   time_ns,action,addr,size,stream,api
 *   1234567,alloc,0x7f3a00000000,1048576,0x0,cuMemAlloc_v2
 *
 * time_ns: nanoseconds since the log was opened (monotonic). action: alloc, free, oom
 * (refused by --limit, or failed in the driver: then addr is 0). addr and stream in hex,
 * size in bytes as requested (for a free: the size of the block freed). api: the intercepted function.
 * This writer is one small file on purpose: once hbm's trace format (hbm/trace.h) lands,
 * `hbm run` should write that instead, and only this file changes. */
#ifndef HBM_RUN_EVENTLOG_H
#define HBM_RUN_EVENTLOG_H

#include <stdint.h>
#include <stdio.h>

#include "hbm/status.h"

typedef struct hbmi_eventlog {
    FILE *f;
    uint64_t t0, events;
} hbmi_eventlog;

hbm_status hbmi_eventlog_open(hbmi_eventlog *log, const char *path);
void hbmi_eventlog_write(hbmi_eventlog *log, const char *action, uint64_t addr, uint64_t size, uint64_t stream,
                         const char *api);
void hbmi_eventlog_close(hbmi_eventlog *log);

#endif
