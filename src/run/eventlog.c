/* eventlog.c - CSV event log of hbm run; see eventlog.h. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "core/internal.h"
#include "run/eventlog.h"

hbm_status hbmi_eventlog_open(hbmi_eventlog *log, const char *path) {
    memset(log, 0, sizeof *log);
    log->f = fopen(path, "w");
    if (!log->f) return hbmi_error(HBM_ERR_IO, "cannot write the trace %s: %s", path, strerror(errno));
    log->t0 = hbmi_now_ns();
    fprintf(log->f, "# hbm run event log v1\ntime_ns,action,addr,size,stream,api\n");
    return HBM_OK;
}

void hbmi_eventlog_write(hbmi_eventlog *log, const char *action, uint64_t addr, uint64_t size, uint64_t stream,
                         const char *api) {
    if (!log->f) return;
    fprintf(log->f, "%" PRIu64 ",%s,0x%" PRIx64 ",%" PRIu64 ",0x%" PRIx64 ",%s\n", hbmi_now_ns() - log->t0, action, addr,
            size, stream, api);
    log->events++;
}

void hbmi_eventlog_close(hbmi_eventlog *log) {
    if (log->f) fclose(log->f);
    log->f = NULL;
}
