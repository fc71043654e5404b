/* fit_report.c - hbm fit's text (lines of at most 100 columns) and JSON. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fit/fit_result.h"
#include "hbm/size.h"

/* the library's one JSON string writer */
#define jstr hbmi_json_str

static const char *flops_human(uint64_t x, char *buf, size_t cap) {
    static const char *const u[] = {"", "K", "M", "G", "T", "P", "E"};
    double v = (double)x;
    int k = 0;
    while (v >= 1000 && k < 6) {
        v /= 1000;
        k++;
    }
    if (k) snprintf(buf, cap, "%.1f %sFLOP", v, u[k]);
    else snprintf(buf, cap, "%" PRIu64 " FLOP", x);
    return buf;
}

static const char *secs(double s, char *buf, size_t cap) {
    if (s < 1e-3) snprintf(buf, cap, "%.0f us", s * 1e6);
    else if (s < 1) snprintf(buf, cap, "%.1f ms", s * 1e3);
    else snprintf(buf, cap, "%.2f s", s);
    return buf;
}

static void set_line(FILE *f, const char *who, const hbm_fit_set *s, uint64_t target) {
    char a[32], b[32], c[32], d[32];
    if (!s->found) {
        fprintf(f, "  %-4s no set formed\n", who);
        return;
    }
    fprintf(f, "  %-4s %-5s peak %s (%s the target by %s), %zu change%s\n", who, s->fits ? "FITS" : "MISS",
            hbm_size_human(s->peak_bytes, a), s->peak_bytes <= target ? "under" : "over",
            hbm_size_human(s->peak_bytes <= target ? target - s->peak_bytes : s->peak_bytes - target, b), s->n_changes,
            s->n_changes == 1 ? "" : "s");
    fprintf(f, "       recompute %s, offload %s, about %s on the device%s\n",
            flops_human(s->recompute_flops, c, sizeof c), hbm_size_human(s->offload_bytes, d),
            secs(s->cost_s, a, sizeof a),
            s->from_baseline ? " (XLA's set: the cheaper)" : s->proven_optimal ? " (least cost: proven)" : "");
}

hbm_status hbm_fit_text(const hbm_fit_result *r, FILE *f, size_t top) {
    if (!r || !f) return hbmi_error(HBM_ERR_INVALID, "fit: no result");
    const hbm_fit_summary *s = &r->sum;
    char a[32], b[32], c[32], w[128], w2[128];
    fprintf(f, "hbm fit: %s\n", hbmi_fit(w, sizeof w, s->module, 88, 1));
    fprintf(f, "  needs %s (%" PRIu64 " bytes): arguments %s, outputs %s, temp %s\n", hbm_size_human(s->peak_before, a),
            s->peak_before, hbm_size_human(s->argument_bytes, b), hbm_size_human(s->output_bytes, c),
            hbm_size_human(s->temp_bytes, w));
    fprintf(f, "  target %s (%" PRIu64 " bytes)", hbm_size_human(s->target_bytes, a), s->target_bytes);
    if (s->peak_before <= s->target_bytes) {
        fprintf(f, ": it fits as it is.\n");
        return ferror(f) ? hbmi_error(HBM_ERR_IO, "fit: write error") : HBM_OK;
    }
    fprintf(f, ", %s to take off the peak\n", hbm_size_human(s->peak_before - s->target_bytes, a));
    if (s->setting && s->setting[0]) { /* the setting is advice: never cut */
        fprintf(f, "  The device has the room; the framework's limit is what is exceeded:\n");
        hbmi_mark_whole(f);
        fprintf(f, "    %s\n", s->setting);
    }
    fprintf(f, "\nVerified by planning the changed module (%u candidate%s, %u plans, %.2f s):\n", r->n_candidates,
            r->n_candidates == 1 ? "" : "s", r->n_plans, r->seconds);
    set_line(f, "hbm", &s->hbm, s->target_bytes);
    set_line(f, "XLA", &s->xla, s->target_bytes);
    if (s->xla.xla_message[0]) {
        /* XLA's own sentence, on lines of at most 100 columns */
        const char *m = s->xla.xla_message;
        fprintf(f, "       XLA would warn:\n");
        while (*m) {
            size_t n = strlen(m);
            if (n > 90) {
                n = 90;
                while (n > 40 && m[n] != ' ') n--;
            }
            fprintf(f, "         %.*s\n", (int)n, m);
            m += n;
            while (*m == ' ') m++;
        }
    }
    size_t shown = 0;
    for (size_t i = 0; i < r->n_ch && shown < top; i++) {
        const hbm_fit_change *ch = &r->ch[i];
        if (ch->kind == HBM_FIT_SETTING) continue;
        if (!shown)
            fprintf(f, "\n%-7s %-5s %10s %10s %12s  %s\n", "change", "set", "bytes", "alone", "cost", "value");
        shown++;
        const char *set = ch->chosen && ch->xla_chosen ? "both" : ch->chosen ? "hbm" : ch->xla_chosen ? "XLA" : "-";
        char alone[32] = "-", cost[32] = "-";
        if (ch->verified_peak >= 0) hbm_size_human((uint64_t)ch->verified_peak, alone);
        if (ch->kind == HBM_FIT_REMATERIALIZE) flops_human(ch->recompute_flops, cost, sizeof cost);
        else if (ch->kind == HBM_FIT_OFFLOAD) secs(ch->cost_s, cost, sizeof cost);
        else snprintf(cost, sizeof cost, "free");
        char what[200];
        if (ch->kind == HBM_FIT_DONATE) snprintf(what, sizeof what, "parameter %d %s", ch->param_number, ch->shape);
        else snprintf(what, sizeof what, "%s %s", ch->instruction, ch->shape);
        fprintf(f, "%-7s %-5s %10s %10s %12s  %s\n", hbm_fit_kind_str(ch->kind), set, hbm_size_human(ch->bytes, a),
                alone, cost, hbmi_fit(w, sizeof w, what, 48, 0));
        hbmi_buffer_where(f, 10, 86, ch->source_file[0] ? ch->source_file : NULL, ch->source_line,
                          ch->op_name[0] ? ch->op_name : NULL);
        if (ch->jax && ch->jax[0]) fprintf(f, "          JAX: %s\n", hbmi_fit(w2, sizeof w2, ch->jax, 85, 0));
    }
    if (!s->fits) {
        const hbm_fit_set *best = s->chosen == HBM_FIT_REMAT_XLA ? &s->xla : &s->hbm;
        fprintf(f, "\nNothing within the limits fits: the best set reaches %s, %s over the target.\n",
                hbm_size_human(r->final_peak, a),
                hbm_size_human(r->final_peak > s->target_bytes ? r->final_peak - s->target_bytes : 0, b));
        (void)best;
        if (r->n_left) fprintf(f, "Left at its peak, untouched by any change (largest first):\n");
        for (size_t i = 0; i < r->n_left; i++) {
            const hbm_plan_buffer *bu = &r->left[i];
            char what[200];
            snprintf(what, sizeof what, "%s %s %s", bu->label, bu->instruction, bu->shape);
            hbmi_buffer_row(f, 2, hbm_size_human(bu->size, a), -1, hbm_category_str(bu->category),
                            hbmi_fit(w, sizeof w, what, 76, 0));
        }
    }
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "fit: write error") : HBM_OK;
}

static void jset(FILE *f, const char *key, const hbm_fit_set *s) {
    fprintf(f,
            ",\n  \"%s\": {\"found\": %s, \"fits\": %s, \"proven_optimal\": %s, \"from_baseline\": %s, \"peak_bytes\": %" PRIu64
            ", \"recompute_flops\": %" PRIu64 ", \"offload_bytes\": %" PRIu64
            ", \"cost_seconds\": %.6g, \"changes\": %zu, \"seconds\": %.3f, \"xla_message\": ",
            key, s->found ? "true" : "false", s->fits ? "true" : "false", s->proven_optimal ? "true" : "false",
            s->from_baseline ? "true" : "false",
            s->peak_bytes, s->recompute_flops, s->offload_bytes, s->cost_s, s->n_changes, s->seconds);
    jstr(f, s->xla_message);
    fputc('}', f);
}

hbm_status hbm_fit_json(const hbm_fit_result *r, FILE *f) {
    if (!r || !f) return hbmi_error(HBM_ERR_INVALID, "fit: no result");
    const hbm_fit_summary *s = &r->sum;
    fprintf(f, "{\n  \"module\": ");
    jstr(f, s->module);
    fprintf(f,
            ",\n  \"target_bytes\": %" PRIu64 ",\n  \"bytes_before\": %" PRIu64 ",\n  \"bytes_after\": %" PRIu64
            ",\n  \"fits\": %s,\n  \"chosen\": \"%s\",\n  \"argument_size_in_bytes\": %" PRIu64
            ",\n  \"output_size_in_bytes\": %" PRIu64 ",\n  \"alias_size_in_bytes\": %" PRIu64
            ",\n  \"temp_size_in_bytes\": %" PRIu64 ",\n  \"recompute_flops\": %" PRIu64
            ",\n  \"xla_limit_bytes\": %" PRId64 ",\n  \"candidates\": %u,\n  \"plans\": %u,\n  \"seconds\": %.3f",
            s->target_bytes, s->peak_before, r->final_peak ? r->final_peak : s->peak_before, s->fits ? "true" : "false",
            s->chosen == HBM_FIT_REMAT_XLA ? "xla" : s->chosen == HBM_FIT_REMAT_NONE ? "none" : "hbm",
            s->argument_bytes, s->output_bytes, s->alias_bytes, s->temp_bytes,
            s->chosen == HBM_FIT_REMAT_XLA ? s->xla.recompute_flops : s->hbm.recompute_flops, r->xla_limit,
            r->n_candidates, r->n_plans, r->seconds);
    fprintf(f, ",\n  \"setting\": ");
    jstr(f, s->setting);
    jset(f, "hbm", &s->hbm);
    jset(f, "xla", &s->xla);
    fprintf(f, ",\n  \"changes\": [");
    for (size_t i = 0; i < r->n_ch; i++) {
        const hbm_fit_change *c = &r->ch[i];
        fprintf(f, "%s\n    {\"kind\": \"%s\", \"chosen\": %s, \"xla_chosen\": %s, \"instruction\": ", i ? "," : "",
                hbm_fit_kind_str(c->kind), c->chosen ? "true" : "false", c->xla_chosen ? "true" : "false");
        jstr(f, c->instruction);
        fprintf(f, ", \"shape\": ");
        jstr(f, c->shape);
        fprintf(f, ", \"op_name\": ");
        jstr(f, c->op_name);
        fprintf(f, ", \"source_file\": ");
        jstr(f, c->source_file);
        fprintf(f,
                ", \"source_line\": %d, \"param_number\": %d, \"bytes\": %" PRIu64 ", \"model_bytes\": %" PRIu64
                ", \"verified_peak_bytes\": %" PRId64 ", \"recompute_flops\": %" PRIu64 ", \"bytes_read\": %" PRIu64
                ", \"cost_seconds\": %.6g, \"jax\": ",
                c->source_line, c->param_number, c->bytes, c->model_bytes, c->verified_peak, c->recompute_flops,
                c->bytes_read, c->cost_s);
        jstr(f, c->jax);
        fputc('}', f);
    }
    fprintf(f, "\n  ],\n  \"untouched_at_peak\": [");
    for (size_t i = 0; i < r->n_left; i++) {
        fprintf(f, "%s\n    {\"bytes\": %" PRIu64 ", \"instruction\": ", i ? "," : "", r->left[i].size);
        jstr(f, r->left[i].instruction);
        fprintf(f, ", \"shape\": ");
        jstr(f, r->left[i].shape);
        fprintf(f, ", \"category\": \"%s\"}", hbm_category_str(r->left[i].category));
    }
    fprintf(f, "\n  ]\n}\n");
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "fit: write error") : HBM_OK;
}

/* --- into a caller's buffer (snprintf rules), for bindings ---------------------------------- */
struct fit_emit { const hbm_fit_result *r; size_t top; };

static hbm_status emit_text(const void *c, FILE *f) {
    const struct fit_emit *e = c;
    return hbm_fit_text(e->r, f, e->top);
}
static hbm_status emit_json(const void *c, FILE *f) { return hbm_fit_json(((const struct fit_emit *)c)->r, f); }
static hbm_status emit_hlo(const void *c, FILE *f) { return hbm_fit_emit(((const struct fit_emit *)c)->r, f); }

static hbm_status to_buffer(hbmi_emit_fn fn, const hbm_fit_result *r, size_t top, char *buf, size_t cap,
                            size_t *len) {
    if (!r) return hbmi_error(HBM_ERR_INVALID, "fit format: NULL argument");
    struct fit_emit e = {r, top};
    return hbmi_format_mem(fn, &e, buf, cap, len);
}

hbm_status hbm_fit_text_format(const hbm_fit_result *r, size_t top, char *buf, size_t cap, size_t *len) {
    return to_buffer(emit_text, r, top, buf, cap, len);
}
hbm_status hbm_fit_json_format(const hbm_fit_result *r, char *buf, size_t cap, size_t *len) {
    return to_buffer(emit_json, r, 0, buf, cap, len);
}
hbm_status hbm_fit_emit_format(const hbm_fit_result *r, char *buf, size_t cap, size_t *len) {
    return to_buffer(emit_hlo, r, 0, buf, cap, len);
}
