/* perfetto.c - Chrome / Perfetto trace JSON (opens in ui.perfetto.dev and
 * chrome://tracing): counter tracks "in use" and "reserved" (bytes), an instant per OOM,
 * times in microseconds. A counter is written only when its value changes. A trace without
 * times (a snapshot recorded without time_us) is laid out by event number instead, one
 * microsecond per event, and says so in otherData.clock; the state before a snapshot's
 * history sits at 0 and events count from the history's first. */
#include <inttypes.h>

#include "trace/trace_internal.h"

hbm_status hbm_export_perfetto(const hbm_trace *t, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_export_perfetto: NULL argument");
    uint64_t *use, *res;
    hbm_status s = hbmi_trace_curves(t, &use, &res, NULL);
    if (s) return s;
    char dev[96];
    snprintf(dev, sizeof dev, "hbm %s", t->device[0] ? t->device : "device");
    fputs("{\"displayTimeUnit\": \"ms\", \"otherData\": {\"source\": ", f);
    hbmi_json_str(f, t->name);
    fputs(t->has_time ? ", \"clock\": \"time\"" : ", \"clock\": \"event number (the trace has no times): 1 us = 1 event\"", f);
    fputs("}, \"traceEvents\": [\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": ", f);
    hbmi_json_str(f, dev);
    fputs("}}", f);
    uint64_t last_use = UINT64_MAX, last_res = UINT64_MAX;
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        int64_t ev = hbmi_event_number(t, (int64_t)i);
        if (ev < 0) ev = 0; /* the rebuilt state sits at 0 */
        double us = t->has_time ? (double)e->time_ns / 1000.0 : (double)ev;
        if (use[i] != last_use || i + 1 == t->count) {
            fprintf(f, ",\n{\"name\": \"in use\", \"ph\": \"C\", \"ts\": %.3f, \"pid\": 1, \"args\": {\"bytes\": %" PRIu64 "}}",
                    us, use[i]);
            last_use = use[i];
        }
        if (res[i] != last_res || i + 1 == t->count) {
            fprintf(f, ",\n{\"name\": \"reserved\", \"ph\": \"C\", \"ts\": %.3f, \"pid\": 1, \"args\": {\"bytes\": %" PRIu64 "}}",
                    us, res[i]);
            last_res = res[i];
        }
        if (e->kind == HBM_EV_OOM) {
            const hbm_tag *tg = hbm_trace_tag(t, e->tag);
            fprintf(f,
                    ",\n{\"name\": \"OOM\", \"ph\": \"i\", \"s\": \"p\", \"ts\": %.3f, \"pid\": 1, \"tid\": %u, \"args\": "
                    "{\"requested_bytes\": %" PRIu64 ", \"event\": %" PRId64 ", \"in_use_bytes\": %" PRIu64,
                    us, e->thread, e->requested, ev, use[i]);
            if (tg && tg->op_name) {
                fputs(", \"op\": ", f);
                hbmi_json_str(f, tg->op_name);
            }
            fputs("}}", f);
        }
    }
    fputs("\n]}\n", f);
    hbmi_free(use);
    hbmi_free(res);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the Perfetto trace failed") : HBM_OK;
}
