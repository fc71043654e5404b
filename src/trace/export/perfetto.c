/* perfetto.c - Chrome / Perfetto trace JSON (opens in ui.perfetto.dev and
 * chrome://tracing): counter tracks "in use" and "reserved" (bytes), an instant per OOM,
 * times in microseconds. A counter is written only when its value changes. A trace without
 * times (a snapshot recorded without time_us) is laid out by event number instead, one
 * microsecond per event, and says so in otherData.clock; the state before a snapshot's
 * history sits at 0 and events count from the history's first. An HLO module's plan is laid
 * out by schedule step (1 us = 1 step), with an instant at the step hbm plan names its peak. Each device of a snapshot is
 * a process of its own ("hbm cuda:0", "hbm cuda:1"), with its own tracks. */
#include <inttypes.h>

#include "trace/trace_internal.h"

/* One device's tracks, process pid ("hbm cuda:1"). */
static hbm_status write_device(const hbm_trace *t, int pid, FILE *f) {
    uint64_t *use, *res;
    hbm_status s = hbmi_trace_curves(t, &use, &res, NULL);
    if (s) return s;
    char dev[96];
    snprintf(dev, sizeof dev, "hbm %s", t->device[0] ? t->device : "device");
    fprintf(f, "%s{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": ", pid > 1 ? ",\n" : "", pid);
    hbmi_json_str(f, dev);
    fputs("}}", f);
    uint64_t last_use = UINT64_MAX, last_res = UINT64_MAX;
    size_t peak_i = 0; /* the first event at the most bytes in use */
    for (size_t i = 0; i < t->count; i++)
        if (use[i] > use[peak_i]) peak_i = i;
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        int64_t ev = hbmi_event_number(t, (int64_t)i);
        if (ev < 0) ev = 0; /* the rebuilt state sits at 0 */
        double us = t->priv_->steps ? (double)hbmi_event_pos(t, (int64_t)i) : t->has_time ? (double)e->time_ns / 1000.0 : (double)ev;
        if (use[i] != last_use || i + 1 == t->count) {
            fprintf(f, ",\n{\"name\": \"in use\", \"ph\": \"C\", \"ts\": %.3f, \"pid\": %d, \"args\": {\"bytes\": %" PRIu64 "}}",
                    us, pid, use[i]);
            last_use = use[i];
        }
        if (res[i] != last_res || i + 1 == t->count) {
            fprintf(f, ",\n{\"name\": \"reserved\", \"ph\": \"C\", \"ts\": %.3f, \"pid\": %d, \"args\": {\"bytes\": %" PRIu64 "}}",
                    us, pid, res[i]);
            last_res = res[i];
        }
        if (t->priv_->steps && i == peak_i && use[i]) { /* a plan's: where hbm plan puts its peak */
            fprintf(f, ",\n{\"name\": \"peak of live bytes\", \"ph\": \"i\", \"s\": \"p\", \"ts\": %.3f, \"pid\": %d, "
                       "\"args\": {\"bytes\": %" PRIu64, us, pid, use[i]);
            hbmi_json_step(f, t, (int64_t)i, "peak");
            fputs("}}", f);
        }
        if (e->kind == HBM_EV_OOM) {
            const hbm_tag *tg = hbm_trace_tag(t, e->tag);
            fprintf(f,
                    ",\n{\"name\": \"OOM\", \"ph\": \"i\", \"s\": \"p\", \"ts\": %.3f, \"pid\": %d, \"tid\": %u, \"args\": "
                    "{\"requested_bytes\": %" PRIu64 ", \"event\": %" PRId64 ", \"in_use_bytes\": %" PRIu64,
                    us, pid, e->thread, e->requested, ev, use[i]);
            if (tg && tg->op_name) {
                fputs(", \"op\": ", f);
                hbmi_json_str(f, tg->op_name);
            }
            fputs("}}", f);
        }
    }
    hbmi_free(use);
    hbmi_free(res);
    return HBM_OK;
}

hbm_status hbm_export_perfetto(const hbm_trace *t, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_export_perfetto: NULL argument");
    fputs("{\"displayTimeUnit\": \"ms\", \"otherData\": {\"source\": ", f);
    hbmi_json_str(f, t->name);
    fputs(t->priv_->steps     ? ", \"clock\": \"schedule step (an HLO module's plan): 1 us = 1 step\""
          : t->has_time ? ", \"clock\": \"time\""
                        : ", \"clock\": \"event number (the trace has no times): 1 us = 1 event\"",
          f);
    fputs("}, \"traceEvents\": [\n", f);
    /* every device of the file (hbm_trace_load attaches the others), one process each */
    hbm_status s = write_device(t, 1, f);
    for (size_t k = 0; !s && k < t->n_others; k++) s = write_device(t->others[k], (int)k + 2, f);
    if (s) return s;
    fputs("\n]}\n", f);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the Perfetto trace failed") : HBM_OK;
}
