/* api_json.c - the library's outputs as strings and whole files (hbm/json_api.h): what the
 * CLI prints, for bindings. Each function here composes existing library calls; the
 * formats themselves live with their modules (plan/report.c, report/view_*.c, trace/). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "fit/fit_terms.h"
#include "fit/fit_text.h"
#include "hbm/file.h"
#include "hbm/hbm.h"
#include "hbm/replay_torch.h"
#include "trace/trace_view.h"

/* --- output into a caller buffer or a file --------------------------------------------- */

/* Each *_format or *_string call opens a sink, calls its writer once into the sink's FILE
 * and closes the sink with the writer's status: a caller's buffer (snprintf rules, core's
 * hbmi_mem), a string of its own size, or a file written whole or not at all (hbm/file.h).
 * A *_format call renders a result; a call that computes (a view's model, a diff) is a
 * *_string call, so that a caller never runs it twice to learn the size. */

static hbm_status file_open(hbm_output *o, const char *path) {
    if (!path || !*path) return hbmi_error(HBM_ERR_INVALID, "write: no file name");
    return hbm_output_open(o, path);
}

static hbm_status file_close(hbm_output *o, hbm_status s) {
    if (s) {
        hbm_output_abort(o);
        return s;
    }
    return hbm_output_commit(o);
}

/* --- plans ------------------------------------------------------------------------------ */

hbm_status hbm_plan_target_resolve(const char *device, const char *capacity, double framework_limit,
                                   hbm_plan_target *out) {
    if (!out) return hbmi_error(HBM_ERR_INVALID, "plan target: NULL argument");
    memset(out, 0, sizeof *out);
    if (device && capacity) return hbmi_error(HBM_ERR_INVALID, "give a device or a capacity, not both");
    if (device) {
        const hbm_device_model *dm = hbm_device_model_find(device);
        if (!dm) return HBM_ERR_INVALID; /* the message names close choices */
        out->capacity = dm->capacity_bytes;
        out->fraction = dm->default_fraction;
        snprintf(out->device_name, sizeof out->device_name, "%s", dm->name);
    } else if (capacity) {
        if (hbm_size_parse(capacity, &out->capacity) != HBM_OK || !out->capacity)
            return hbmi_error(HBM_ERR_INVALID, "capacity '%s': expected a size such as 80GiB", capacity);
        out->fraction = HBM_FRACTION_BACKEND; /* JAX's 0.75 on XLA:GPU, all of it on TPU and CPU */
        char h[32]; /* in the units the report uses, whatever the spelling given */
        snprintf(out->device_name, sizeof out->device_name, "a device of %s", hbm_size_human(out->capacity, h));
    }
    if (framework_limit != 0) {
        if (!(framework_limit > 0 && framework_limit <= 1))
            return hbmi_error(HBM_ERR_INVALID, "framework limit %g: expected a fraction in (0, 1]", framework_limit);
        out->fraction = framework_limit;
    }
    return HBM_OK;
}

hbm_status hbm_plan_backend_options(const char *backend, hbm_plan_options *o) {
    if (!o) return hbmi_error(HBM_ERR_INVALID, "plan backend: NULL argument");
    hbm_plan_options_default(o);
    if (!backend) return HBM_OK; /* read from the module */
    if (!strcmp(backend, "cuda") || !strcmp(backend, "rocm")) backend = "gpu";
    return hbm_backend_parse(backend, &o->backend);
}

static const hbm_plan_target no_target;

hbm_status hbm_plan_write_text(const hbm_plan *p, FILE *f, size_t top, const hbm_plan_target *t) {
    if (!t) t = &no_target;
    hbm_plan_stats st;
    hbm_status s = hbm_plan_get_stats(p, &st);
    if (s) return s;
    if (st.backend == HBM_BACKEND_TPU && t->capacity && st.peak_bytes > t->capacity) /* XLA:TPU's words */
        s = hbm_plan_report_tpu(p, f, t->capacity, top);
    else
        s = hbm_plan_report_target(p, f, top, t->capacity, t->fraction);
    if (!s)
        s = hbm_plan_explain(p, f, t->capacity, t->fraction, t->capacity ? t->device_name : NULL, top < 8 ? top : 8);
    return s;
}

/* After a negative verdict, the peak in JAX's terms (fit/fit_terms.h). */
static hbm_status jax_terms(hbm_status s, const hbm_plan *p, const hbm_plan_target *t, FILE *f, size_t width) {
    return !s && hbm_plan_target_fails(p, t) ? hbmi_fit_terms_write(p, f, width) : s;
}

static hbm_status plan_output_text(const hbm_plan_output *o, int xla, FILE *f) {
    hbm_status s = jax_terms(hbm_plan_write_text(o->plan, f, o->top, o->target), o->plan, o->target, f, o->width);
    if (!s && xla) {
        fputc('\n', f);
        s = hbm_plan_xla_text(o->plan, f, o->top);
    }
    if (!s && o->pack) s = hbm_plan_pack_text(o->pack, o->pack_algo, o->pack_heap_bytes, f);
    return s;
}

hbm_status hbm_plan_output_write(const hbm_plan_output *o, FILE *f) {
    if (!o || !o->plan || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_output_write: NULL argument");
    int xla = hbm_plan_xla_same(o->plan) >= 0; /* XLA's own assignment came with the module */
    if (!o->json) { /* lines fitted to the width, advice whole */
        hbmi_mem m;
        hbm_status s = hbmi_mem_open(&m, 1);
        return s ? s : hbmi_mem_fitted(&m, plan_output_text(o, xla, m.f), f, o->width);
    }
    const hbm_plan_target *t = o->target ? o->target : &no_target;
    if (o->pack || xla) /* {"plan": ..., "xla": ..., "comparison": ..., "pack": ...} */
        fputs("{\"plan\": ", f);
    hbm_status s = hbm_plan_json(o->plan, f, o->top, t->capacity, t->fraction);
    if (!s && xla) {
        fputs(", ", f);
        s = hbm_plan_xla_json(o->plan, f, o->top);
        if (!o->pack) fputs("}\n", f);
    }
    if (o->pack) {
        fputs(", \"pack\": ", f);
        hbm_status ps = hbm_plan_pack_json(o->pack, o->pack_algo, o->pack_heap_bytes, f);
        fputs("}\n", f);
        if (!s) s = ps;
    }
    return s;
}

int hbm_plan_target_fails(const hbm_plan *p, const hbm_plan_target *t) {
    if (!p || !t) return 0;
    return hbm_plan_verdict_get(p, t->capacity, t->fraction, NULL) >= HBM_VERDICT_FITS_PHYSICALLY_ONLY;
}

static hbm_status plan_html(const hbm_plan *p, const char *title, FILE *f) {
    hbm_plan_view_options o; /* XProf's Memory Viewer of the plan */
    hbm_plan_view_options_default(&o);
    if (title) o.title = title;
    return hbm_plan_view_html(p, &o, f);
}

#define PLAN_CHECK_()                                                                 \
    do {                                                                              \
        if (!p) return hbmi_error(HBM_ERR_INVALID, "plan format: NULL plan");          \
    } while (0)

hbm_status hbm_plan_text_format(const hbm_plan *p, size_t top, const hbm_plan_target *t, char *buf, size_t cap,
                                size_t *len) {
    PLAN_CHECK_();
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_buffer(&m, buf, cap, len);
    return s ? s : hbmi_mem_buffer(&m, jax_terms(hbm_plan_write_text(p, m.f, top, t), p, t, m.f, 0), buf, cap, len);
}

hbm_status hbm_plan_json_format(const hbm_plan *p, size_t top, const hbm_plan_target *t, char *buf, size_t cap,
                                size_t *len) {
    PLAN_CHECK_();
    if (!t) t = &no_target;
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_buffer(&m, buf, cap, len);
    return s ? s : hbmi_mem_buffer(&m, hbm_plan_json(p, m.f, top, t->capacity, t->fraction), buf, cap, len);
}

hbm_status hbm_plan_explain_format(const hbm_plan *p, size_t top, const hbm_plan_target *t, char *buf, size_t cap,
                                   size_t *len) {
    PLAN_CHECK_();
    if (!t) t = &no_target;
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_buffer(&m, buf, cap, len);
    return s ? s
             : hbmi_mem_buffer(&m,
                               jax_terms(hbm_plan_explain(p, m.f, t->capacity, t->fraction,
                                                          t->capacity ? t->device_name : NULL, top),
                                         p, t, m.f, 0),
                               buf, cap, len);
}

hbm_status hbm_plan_html_string(const hbm_plan *p, const char *title, char **out, size_t *len) {
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_string(&m, out, len);
    if (s) return s;
    if (!p) s = hbmi_error(HBM_ERR_INVALID, "plan format: NULL plan");
    return hbmi_mem_string(&m, s ? s : plan_html(p, title, m.f), out, len);
}

hbm_status hbm_plan_view_write(const hbm_plan *p, const hbm_plan_view_options *o, int json, FILE *f) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_view_write: NULL argument");
    hbm_plan_view_options d;
    if (!o) hbm_plan_view_options_default(&d), o = &d;
    hbm_status s = json ? hbm_plan_view_json(p, o, f) : hbm_plan_view_text(p, o, f);
    if (!s && !json && hbm_plan_xla_same(p) >= 0) { /* XLA's own figures and hbm's agreement */
        fputc('\n', f);
        s = hbm_plan_xla_text(p, f, (size_t)o->top);
    }
    return s;
}

static hbm_status plan_view(const hbm_plan *p, int json, int top, FILE *f) {
    hbm_plan_view_options o;
    hbm_plan_view_options_default(&o);
    if (top > 0) o.top = top;
    return json ? hbm_plan_view_json(p, &o, f) : hbm_plan_view_text(p, &o, f);
}

hbm_status hbm_plan_view_string(const hbm_plan *p, int json, int top, char **out, size_t *len) {
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_string(&m, out, len);
    if (s) return s;
    if (!p) s = hbmi_error(HBM_ERR_INVALID, "plan format: NULL plan");
    return hbmi_mem_string(&m, s ? s : plan_view(p, json, top, m.f), out, len);
}

/* --- fit -------------------------------------------------------------------------------- */

hbm_status hbm_fit_write(const hbm_fit_result *r, FILE *f, int json, size_t top, size_t width) {
    if (!r || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_fit_write: NULL argument");
    if (json) return hbm_fit_json(r, f);
    return hbmi_fit_text_width(r, f, top, width);
}

/* --- traces ----------------------------------------------------------------------------- */

static hbm_status trace_info(const hbm_trace *t, FILE *f) {
    fputc('{', f);
    hbmi_json_trace_id(f, t);
    fprintf(f, ", \"capacity_bytes\": %" PRIu64 ", \"events\": %zu, \"truncated_at\": %" PRIu64 "}", t->capacity,
            t->count, t->truncated_at);
    return HBM_OK;
}

hbm_status hbm_trace_info_format(const hbm_trace *t, char *buf, size_t cap, size_t *len) {
    if (!t) return hbmi_error(HBM_ERR_INVALID, "trace info: NULL trace");
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_buffer(&m, buf, cap, len);
    return s ? s : hbmi_mem_buffer(&m, trace_info(t, m.f), buf, cap, len);
}

static hbm_status view_options(const hbm_trace *t, hbm_view_kind kind, int top, const char *title, hbm_view_options *o) {
    if (!t) return hbmi_error(HBM_ERR_INVALID, "view: NULL trace");
    if (kind != HBM_VIEW_TEXT && kind != HBM_VIEW_JSON && kind != HBM_VIEW_HTML)
        return hbmi_error(HBM_ERR_INVALID, "view: kind %d is not text (0), json (1) or html (2)", (int)kind);
    hbm_view_options_default(o);
    if (top >= 0) o->top = top;
    if (title) o->title = title;
    return HBM_OK;
}

static hbm_status view(const hbm_trace *t, hbm_view_kind kind, const hbm_view_options *o, FILE *f) {
    return kind == HBM_VIEW_HTML ? hbm_view_html(t, o, f) : hbm_view_all(t, kind == HBM_VIEW_JSON, o, f);
}

hbm_status hbm_view_string(const hbm_trace *t, hbm_view_kind kind, int top, const char *title, char **out,
                           size_t *len) {
    hbm_view_options o;
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_string(&m, out, len);
    if (s) return s;
    s = view_options(t, kind, top, title, &o);
    return hbmi_mem_string(&m, s ? s : view(t, kind, &o, m.f), out, len);
}

hbm_status hbm_view_file(const hbm_trace *t, hbm_view_kind kind, int top, const char *title, const char *path) {
    hbm_view_options o;
    hbm_output out;
    hbm_status s = view_options(t, kind, top, title, &o);
    if (!s) s = file_open(&out, path);
    return s ? s : file_close(&out, view(t, kind, &o, out.f));
}

static const char export_formats[] = "perfetto, pprof, torch or minimalloc";

const char *hbm_export_formats(void) { return export_formats; }

hbm_status hbm_export_format_check(const char *format) {
    if (format && (!strcmp(format, "perfetto") || !strcmp(format, "pprof") || !strcmp(format, "torch") ||
                   !strcmp(format, "minimalloc")))
        return HBM_OK;
    return hbmi_error(HBM_ERR_INVALID, "export format '%s': expected %s", format ? format : "(none)", export_formats);
}

hbm_status hbm_export_write(const hbm_trace *t, const char *format, FILE *f) {
    if (!t || !format || !f) return hbmi_error(HBM_ERR_INVALID, "export: NULL argument");
    if (!strcmp(format, "perfetto")) return hbm_export_perfetto(t, f);
    if (!strcmp(format, "pprof")) return hbm_export_pprof(t, f);
    if (!strcmp(format, "torch")) return hbm_export_torch(t, f);
    if (!strcmp(format, "minimalloc")) {
        hbm_timeline *tl;
        hbm_status s = hbm_trace_to_timeline(t, &tl);
        if (!s) s = hbm_export_minimalloc(tl, f);
        hbm_timeline_free(tl);
        return s;
    }
    return hbm_export_format_check(format);
}

hbm_status hbm_export_file(const hbm_trace *t, const char *format, const char *path) {
    if (!t || !format) return hbmi_error(HBM_ERR_INVALID, "export: NULL argument");
    hbm_status s = hbm_export_format_check(format);
    if (s) return s;
    hbm_output out;
    if ((s = file_open(&out, path))) return s;
    return file_close(&out, hbm_export_write(t, format, out.f));
}

hbm_status hbm_export_devices_write(const hbm_trace *const *all, size_t n, const char *format, FILE *f) {
    if (!all || !n || !all[0] || !format || !f) return hbmi_error(HBM_ERR_INVALID, "export devices: NULL argument");
    const hbm_trace *first = all[0];
    size_t nd = n > 1 ? n : 1 + (strcmp(format, "perfetto") ? 0 : first->n_others);
    for (size_t k = 0; k < nd && (nd > 1 || first->device[0]); k++) {
        const hbm_trace *d = n > 1 ? all[k] : k ? first->others[k - 1] : first;
        fputs(k ? ", " : nd > 1 ? " (devices " : " (device ", f);
        hbmi_fputs_visible(d->device[0] ? d->device : "?", f);
    }
    fputs(nd > 1 || first->device[0] ? ")\n" : "\n", f);
    return HBM_OK;
}


hbm_status hbm_diff_string(const hbm_trace *a, const hbm_trace *b, int json, char **out, size_t *len) {
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_string(&m, out, len);
    if (s) return s;
    if (!a || !b) s = hbmi_error(HBM_ERR_INVALID, "diff: NULL trace");
    return hbmi_mem_string(&m, s ? s : hbm_diff_write(a, b, json ? -1 : 15, json, m.f), out, len);
}


/* --- XLA's own assignment beside the plan (protobuf inputs, hbm/proto.h) ------------------- */
static hbm_status plan_xla(const hbm_plan *p, size_t top, int json, FILE *f) {
    if (!json) return hbm_plan_xla_text(p, f, top);
    fputc('{', f);
    hbm_status s = hbm_plan_xla_json(p, f, top);
    fputs("}\n", f);
    return s;
}

hbm_status hbm_plan_xla_format(const hbm_plan *p, size_t top, int json, char *buf, size_t cap, size_t *len) {
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_buffer(&m, buf, cap, len);
    return s ? s : hbmi_mem_buffer(&m, plan_xla(p, top, json, m.f), buf, cap, len);
}
