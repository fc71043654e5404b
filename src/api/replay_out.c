/* replay_out.c - a replay composed for the CLI and the bindings (hbm/json_api.h,
 * hbm_replay_write, hbm_torch_replay_write): the engine's result (trace/replay/replay_run.c)
 * computed once, then written by report/replay_report.c, to a FILE or a caller's buffer. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/hbm.h"
#include "hbm/replay.h"
#include "hbm/replay_torch.h"
#include "report/replay_render.h"
#include "trace/replay/replay_run.h"

/* Results made elsewhere (hbm_replay_many), written as a request's report would be. */
hbm_status hbm_replay_write(const hbm_trace *t, const char *device_spec, const hbm_replay_result *r, size_t n,
                            const hbm_replay_bounds *bounds, FILE *f, int json) {
    if (!t || !r || !f || !device_spec) return hbmi_error(HBM_ERR_INVALID, "hbm_replay_write: NULL argument");
    hbm_replay_report rep;
    memset(&rep, 0, sizeof rep);
    rep.trace = t;
    snprintf(rep.device, sizeof rep.device, "%s", device_spec);
    rep.rows = (hbm_replay_result *)r; /* read only */
    char dflt[sizeof rep.device];
    if (!hbm_replay_default_device(t, dflt, sizeof dflt, &rep.device_why)) rep.device_is_default = !strcmp(dflt, device_spec);
    hbmi_replay_device_words(rep.device, rep.device_words, sizeof rep.device_words);
    rep.n = n;
    if (bounds) rep.bounds = *bounds;
    hbm_status s = hbmi_replay_twin(&rep);
    return s ? s : hbm_replay_report_write(&rep, f, json);
}

hbm_status hbm_torch_replay_write(const hbm_trace *t, FILE *f, int json) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_replay_write: NULL argument");
    hbm_torch_recorded r;
    hbm_torch_match m;
    hbm_status s = hbm_torch_recorded_get(t, &r);
    if (!s) s = hbm_replay_torch_match(t, NULL, NULL, &m);
    if (s) return s;
    hbmi_torch_replay_render(t, &r, &m, f, json);
    return HBM_OK;
}

/* hbm_replay_run_write's replay; twin and bound_buffers as in hbm_replay_request. */
static hbm_status run_write(const hbm_trace *t, const char *device, const char *const *configs, size_t n, FILE *f,
                            int json, int *failed, int twin, size_t bound_buffers) {
    if (failed) *failed = 0;
    if (!t || !f || (n && !configs)) return hbmi_error(HBM_ERR_INVALID, "replay: NULL argument");
    if (n > HBMI_REPLAY_MAX_CONFIGS)
        return hbmi_error(HBM_ERR_INVALID, "replay: %zu configurations, at most %d", n, HBMI_REPLAY_MAX_CONFIGS);
    /* the defaults: PyTorch's allocator for a PyTorch snapshot, JAX's two otherwise */
    static const char *const defaults[] = {"allocator=bfc", "allocator=platform"};
    static const char *const torch_default[] = {"allocator=torch"};
    if (!n && !strcmp(t->source, "torch")) configs = torch_default, n = 1;
    else if (!n) configs = defaults, n = 2;
    for (size_t i = 0; i < n; i++)
        if (!configs[i]) return hbmi_error(HBM_ERR_INVALID, "replay: configuration %zu is NULL", i);
    hbm_replay_config *v = hbmi_calloc(n, sizeof *v);
    if (!v) return hbmi_error(HBM_ERR_NOMEM, "replay: out of host memory");
    hbm_status s = HBM_OK;
    for (size_t i = 0; i < n && !s; i++) s = hbm_replay_config_make(t, configs[i], &v[i]);
    /* hbm pack's default budget (counted work) for the packing: the same figure on every run */
    hbm_replay_request q = {.trace = t, .device = device, .configs = v, .n = n, .twin = twin, .bound_buffers = bound_buffers};
    hbm_replay_report rep;
    if (!s) s = hbm_replay_run(&q, &rep);
    hbmi_free(v);
    if (s) return s;
    s = hbm_replay_report_write(&rep, f, json);
    for (size_t i = 0; failed && i < rep.n; i++) /* as documented: a configuration that could not run, or ran out of memory */
        if ((rep.rows[i].status && rep.rows[i].status != HBM_ERR_NOT_AVAILABLE) || rep.rows[i].first_oom_event >= 0) *failed = 1;
    hbm_replay_report_release(&rep);
    return s;
}

hbm_status hbm_replay_run_write(const hbm_trace *t, const char *device, const char *const *configs, size_t n,
                                FILE *f, int json, int *failed) {
    return run_write(t, device, configs, n, f, json, failed, 1, 100000);
}

hbm_status hbm_replay_devices_write(const hbm_trace *const *ts, size_t nt, const char *device,
                                   const char *const *configs, size_t n, FILE *f, int *failed) {
    if (failed) *failed = 0;
    if (!ts || !f || (n && !configs)) return hbmi_error(HBM_ERR_INVALID, "replay: NULL argument");
    static const char *const defaults[] = {"allocator=bfc", "allocator=platform"};
    if (!n) configs = defaults, n = 2;
    if (n > HBMI_REPLAY_MAX_CONFIGS)
        return hbmi_error(HBM_ERR_INVALID, "replay: %zu configurations, at most %d", n, HBMI_REPLAY_MAX_CONFIGS);
    hbm_replay_config *v = hbmi_calloc(n, sizeof *v);
    if (!v) return hbmi_error(HBM_ERR_NOMEM, "replay: out of host memory");
    hbm_status s = HBM_OK;
    fprintf(f, "%-7s %-16s %-28s %11s %11s %6s  %s\n", "device", "allocator", "configuration", "peak held", "reserved",
            "frag", "first OOM");
    for (size_t d = 0; d < nt && !s; d++) {
        const hbm_trace *t = ts[d];
        for (size_t i = 0; i < n && !s; i++) s = hbm_replay_config_make(t, configs[i], &v[i]);
        hbm_replay_request q = {.trace = t, .device = device, .configs = v, .n = n};
        hbm_replay_report rep;
        if (!s) s = hbm_replay_run(&q, &rep);
        if (s) break;
        for (size_t i = 0; i < rep.n; i++) {
            const hbm_replay_result *r = &rep.rows[i];
            char a[32], b[32], o[64];
            if (r->status) snprintf(o, sizeof o, "could not run: %s", hbm_status_name(r->status));
            else if (r->first_oom_event >= 0) snprintf(o, sizeof o, "event %" PRId64 ": %s", r->first_oom_event,
                                                        hbm_size_xla((int64_t)r->first_oom_bytes, a));
            else snprintf(o, sizeof o, "none");
            fprintf(f, "%-7d %-16.16s %-28.28s %11s %11s %5.1f%%  %s\n", t->device_index, t->device, r->config,
                    hbm_size_xla((int64_t)r->peak_in_use, a), hbm_size_xla((int64_t)r->peak_reserved, b),
                    r->frag_at_peak * 100.0, o);
            if (failed && ((r->status && r->status != HBM_ERR_NOT_AVAILABLE) || r->first_oom_event >= 0)) *failed = 1;
        }
        hbm_replay_report_release(&rep);
    }
    hbmi_free(v);
    return s;
}

/* The outputs as strings of their own size: the writer called once into core's sink
 * (hbmi_mem), its status closing it. A replay is never run to learn a size. */

/* hbm replay --json's object without what PyTorch recorded and without the packing */
static hbm_status rows_write(const hbm_trace *t, const char *device, const char *const *configs, size_t n, FILE *f) {
    return run_write(t, device, configs, n, f, 1, NULL, 0, 0);
}

hbm_status hbm_replay_suggest_write(const hbm_trace *t, const char *device, FILE *f, int json, int *failed) {
    if (failed) *failed = 0;
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "suggest: NULL argument");
    hbm_torch_suggestion sg;
    char spec[160];
    hbm_status s = device ? hbm_replay_device_spec(device, spec, sizeof spec) : HBM_OK;
    if (!s) s = hbm_torch_suggest(t, device ? spec : NULL, &sg);
    if (!s) s = hbm_torch_suggest_write(&sg, f, json);
    if (!s && failed) *failed = sg.best < 0;
    return s;
}

hbm_status hbm_replay_string(const hbm_trace *t, const char *device, const char *const *configs, size_t n, int json,
                             char **out, size_t *len) {
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_string(&m, out, len);
    return s ? s : hbmi_mem_string(&m, hbm_replay_run_write(t, device, configs, n, m.f, json, NULL), out, len);
}

hbm_status hbm_replay_rows_string(const hbm_trace *t, const char *device, const char *const *configs, size_t n,
                                  char **out, size_t *len) {
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_string(&m, out, len);
    return s ? s : hbmi_mem_string(&m, rows_write(t, device, configs, n, m.f), out, len);
}

hbm_status hbm_replay_suggest_string(const hbm_trace *t, const char *device, char **out, size_t *len) {
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_string(&m, out, len);
    if (s) return s;
    if (!t) s = hbmi_error(HBM_ERR_INVALID, "suggest: NULL trace");
    return hbmi_mem_string(&m, s ? s : hbm_replay_suggest_write(t, device, m.f, 1, NULL), out, len);
}
