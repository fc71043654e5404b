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

/* An advice line: marked (HBMI_WHOLE, the mark hbmi_write_fitted writes whole) so that
 * write_wrapped wraps it at the width instead of cutting it. */
static void advice(FILE *f, int indent, const char *label, const char *text) {
    while (*text == '\n') fputc(*text++, f);
    fprintf(f, "%c%*s%s", HBMI_WHOLE, indent, "", label);
    hbmi_fputs_visible(text, f);
    fputc('\n', f);
}

/* What the scan over L layers saves, and the change that stops saving it. */
static void residual_names(FILE *f, const hbmi_jax_residual *x) {
    char a[32], t[1400], where[600];
    snprintf(t, sizeof t, "\nThe scan over %lld layers saves %s per layer for its backward pass (%s, %s%s):",
             (long long)x->layers, x->per_layer, x->shape, hbm_size_human(x->bytes, a),
             x->at_peak ? ", at the peak" : "");
    advice(f, 0, "", t);
    char mod[256];
    int flax = hbmi_jax_module_path(x->op_name, mod, sizeof mod) && strchr(mod, '/');
    if (x->source_file[0]) snprintf(where, sizeof where, "%s:%d", x->source_file, x->source_line);
    else if (flax) snprintf(where, sizeof where, "the Flax module %s", mod);
    else snprintf(where, sizeof where, "%s", x->op_name);
    if (x->carry)
        snprintf(t, sizeof t, "the layer's input, the scan's carry (loop %s writes it, loop %s reads it), %s%s%s", x->loop,
                 x->backward_loop, x->source_file[0] ? "scan at " : "op ", where, "");
    else
        snprintf(t, sizeof t, "computed by %s%s%s (loop %s writes it, loop %s reads it)", x->op_name,
                 x->source_file[0] || flax ? x->source_file[0] ? " at " : " in " : "",
                 x->source_file[0] || flax ? where : "", x->loop, x->backward_loop);
    advice(f, 2, "", t);
    if (x->maxtext && x->carry) {
        snprintf(t, sizeof t, "MaxText names it \"%s\": remat_policy=custom with %s=offload keeps it in host "
                              "memory, the layer recomputed from it",
                 x->maxtext, x->maxtext);
        advice(f, 2, "", t);
    } else if (x->maxtext) {
        const char *rec, *off;
        hbmi_jax_maxtext_policies(x->maxtext, &rec, &off);
        snprintf(t, sizeof t, "MaxText saves it as \"%s\": remat_policy=%s recomputes it%s%s%s", x->maxtext,
                 rec ? rec : "full", off ? ", remat_policy=" : "", off ? off : "", off ? " keeps it in host memory" : "");
        advice(f, 2, "", t);
    } else if (x->carry) {
        snprintf(t, sizeof t,
                 "x = checkpoint_name(x, \"layer_input\") first in the scanned body, and "
                 "policy=jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
                 "names_which_can_be_offloaded=[\"layer_input\"], offload_src=\"device\", offload_dst=\"pinned_host\") "
                 "on its jax.checkpoint: the input goes to host memory, the layer is recomputed from it");
        advice(f, 2, "change: ", t);
    } else {
        char nm[128];
        const char *last = strrchr(x->op_name, '/');
        last = last ? last + 1 : x->op_name;
        size_t k = 0;
        for (; *last && k < 40; last++)
            if ((*last >= 'a' && *last <= 'z') || (*last >= 'A' && *last <= 'Z') || (*last >= '0' && *last <= '9') ||
                *last == '_')
                nm[k++] = *last;
        if (!k) k = (size_t)snprintf(nm, sizeof nm, "saved");
        nm[k] = 0;
        if (x->source_line > 0) {
            snprintf(nm + k, sizeof nm - k, "_%d", x->source_line);
        } else if (flax) { /* the module's own name first: "wi_dot_general" */
            const char *own = strrchr(mod, '/') + 1;
            char tmp[128];
            snprintf(tmp, sizeof tmp, "%.20s_%.40s", own, nm);
            snprintf(nm, sizeof nm, "%s", tmp);
        }
        snprintf(t, sizeof t,
                 "x = checkpoint_name(x, \"%s\") %s %s, and on the scanned body's jax.checkpoint "
                 "policy=jax.checkpoint_policies.save_any_names_but_these(\"%s\") (the backward loop recomputes it; "
                 "other named values stay saved), or policy=jax.checkpoint_policies.save_and_offload_only_these_names("
                 "names_which_can_be_saved=[], names_which_can_be_offloaded=[\"%s\"], offload_src=\"device\", "
                 "offload_dst=\"pinned_host\") (kept in host memory)",
                 nm, x->source_file[0] ? "at" : "in", where, nm, nm);
        advice(f, 2, "change: ", t);
    }
}

static void no_backward_text(FILE *f) {
    advice(f, 0, "",
           "\nNo backward pass in this module (no op_name under transpose(...)): jax.checkpoint policies do not "
           "apply to it. What does: donating arguments (donate_argnames), keeping arguments in host memory "
           "(memory_kind='pinned_host'), a smaller batch or sequence.");
}

/* The residual named, then what each change takes off, verified by planning where it was. */
static void residual_text(FILE *f, const hbm_fit_result *r, const hbmi_jax_residual *x) {
    char a[32], b[32], t[1400];
    residual_names(f, x);
    uint64_t before = r->sum.peak_before, target = r->sum.target_bytes;
    if (x->host_peak && x->host_peak < before) {
        char c[32], d[32];
        snprintf(t, sizeof t,
                 "%s (%llu bytes) in host memory, verified: the module with this buffer in host memory (S(5)) "
                 "plans to a peak of %s, %s the target by %s; no extra FLOPs, %s each way over the host link",
                 hbm_size_human(before - x->host_peak, b), (unsigned long long)(before - x->host_peak),
                 hbm_size_human(x->host_peak, c), x->host_peak <= target ? "under" : "over",
                 hbm_size_human(x->host_peak <= target ? target - x->host_peak : x->host_peak - target, d),
                 hbm_size_human(x->bytes, a));
        if (r->rates && r->rates->host_bw > 0) {
            char e[32];
            size_t k = strlen(t);
            snprintf(t + k, sizeof t - k, " (about %s at %s's %.0f GB/s)",
                     secs(2.0 * (double)x->bytes / r->rates->host_bw, e, sizeof e), r->rates->name,
                     r->rates->host_bw / 1e9);
        }
        advice(f, 2, "takes off: ", t);
        if (x->with_set_peak) {
            char g[32], h[32];
            snprintf(t, sizeof t,
                     "with the chosen set besides (%u change%s, below), verified: the module plans to %s, %s the "
                     "target by %s",
                     x->with_set_changes, x->with_set_changes == 1 ? "" : "s", hbm_size_human(x->with_set_peak, g),
                     x->with_set_peak <= target ? "under" : "over",
                     hbm_size_human(x->with_set_peak <= target ? target - x->with_set_peak : x->with_set_peak - target, h));
            advice(f, 2, "           ", t);
        }
    }
    if (x->host_peak && x->host_peak >= before) {
        char c[32];
        snprintf(t, sizeof t, "nothing alone, verified: the module with this buffer in host memory (S(5)) "
                              "plans to %s, the peak as it is",
                 hbm_size_human(x->host_peak, c));
        advice(f, 2, "takes off: ", t);
    } else if (!x->carry && x->recompute_peak) {
        char fl[32] = "", c[32], d[32];
        if (x->recompute_flops) {
            char g[24];
            snprintf(fl, sizeof fl, "; %s more", flops_human(x->recompute_flops, g, sizeof g));
        }
        uint64_t rp = x->recompute_peak;
        if (rp < before)
            snprintf(t, sizeof t,
                     "%s (%llu bytes) recomputed instead, verified: the module with the backward loop computing "
                     "it again plans to a peak of %s, %s the target by %s%s%s%s",
                     hbm_size_human(before - rp, b), (unsigned long long)(before - rp), hbm_size_human(rp, c),
                     rp <= target ? "under" : "over", hbm_size_human(rp <= target ? target - rp : rp - target, d), fl,
                     x->recompute_note[0] ? "; " : "", x->recompute_note);
        else
            snprintf(t, sizeof t,
                     "nothing recomputed instead, verified: the module with the backward loop computing it again "
                     "plans to %s%s",
                     hbm_size_human(rp, c), fl);
        advice(f, 2, x->host_peak && x->host_peak < before ? "           " : "takes off: ", t);
    } else if (!x->carry || !x->host_peak) {
        char fl[32] = "";
        if (!x->carry && x->recompute_flops) {
            char g[24];
            snprintf(fl, sizeof fl, "; %s more", flops_human(x->recompute_flops, g, sizeof g));
        }
        snprintf(t, sizeof t, "up to %s (%llu bytes: the buffer less the one layer the backward loop holds)%s, "
                              "estimated, not verified by planning%s%s%s",
                 hbm_size_human(x->estimate, b), (unsigned long long)x->estimate,
                 x->carry ? "" : " recomputed instead", fl, x->why_estimate[0] ? ": " : "", x->why_estimate);
        advice(f, 2, x->host_peak && x->host_peak < before ? "           " : "takes off: ", t);
    }
}

static hbm_status fit_text(const hbm_fit_result *r, FILE *f, size_t top, size_t width) {
    int cell = width ? 48 : 1000, wide = width ? 86 : 1000, row = width ? 76 : 1000; /* width 0: nothing cut */
    if (!r || !f) return hbmi_error(HBM_ERR_INVALID, "fit: no result");
    const hbm_fit_summary *s = &r->sum;
    char a[32], b[32], c[32], d[32], w[1100];
    fprintf(f, "hbm fit: %s\n", hbmi_text_fit(w, sizeof w, s->module, width ? 88 : 1000, 1));
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
        advice(f, 4, "", s->setting);
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
    for (size_t i = 0; i < r->n_res; i++) residual_text(f, r, &r->res[i]);
    if (!r->has_backward) no_backward_text(f);
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
        char what[700];
        if (ch->kind == HBM_FIT_DONATE) snprintf(what, sizeof what, "parameter %d %s", ch->param_number, ch->shape);
        else snprintf(what, sizeof what, "%s %s", ch->instruction, ch->shape);
        fprintf(f, "%-7s %-5s %10s %10s %12s  %s\n", hbm_fit_kind_str(ch->kind), set, hbm_size_human(ch->bytes, a),
                alone, cost, hbmi_text_fit(w, sizeof w, what, cell, 0));
        hbmi_buffer_where(f, 10, wide, ch->source_file[0] ? ch->source_file : NULL, ch->source_line,
                          ch->op_name[0] ? ch->op_name : NULL);
        if (ch->jax && ch->jax[0]) advice(f, 10, "JAX: ", ch->jax);
    }
    if (shown || r->n_res)
        advice(f, 0, "",
               "\nCheck a change in JAX: jax.ad_checkpoint.print_saved_residuals(f, *args) lists what autodiff saves; "
               "jax.jit(f).lower(*args).compile().memory_analysis() gives XLA's bytes.");
    if (!s->fits && s->residual_fits) {
        const hbmi_jax_residual *x = &r->res[r->best_res];
        char t[1400], where[600];
        if (x->source_file[0]) snprintf(where, sizeof where, " at %s:%d", x->source_file, x->source_line);
        else where[0] = 0;
        snprintf(t, sizeof t,
                 "\nWhat fits: the scan residual %s (%s%s%s, above) in host memory, by its checkpoint policy in "
                 "the JAX code%s: the module plans to %s, under the target by %s. The set of XLA-side changes "
                 "alone reaches %s, %s over it.",
                 x->shape, x->carry ? "the layer's input" : "computed", x->carry && where[0] ? ", scan" : "", where,
                 s->residual_alone ? "" : ", with the chosen set besides", hbm_size_human(s->residual_peak, a),
                 hbm_size_human(s->target_bytes - s->residual_peak, b), hbm_size_human(r->final_peak, c),
                 hbm_size_human(r->final_peak > s->target_bytes ? r->final_peak - s->target_bytes : 0, d));
        advice(f, 0, "", t);
    } else if (!s->fits && s->recompute_fits) {
        const hbmi_jax_residual *x = &r->res[r->recompute_res];
        char t[1400], where[600];
        if (x->source_file[0]) snprintf(where, sizeof where, ", computed at %s:%d", x->source_file, x->source_line);
        else where[0] = 0;
        snprintf(t, sizeof t,
                 "\nWhat fits: the scan residual %s (%s per layer%s, above) recomputed by the backward loop, by its "
                 "checkpoint policy in the JAX code: the module plans to %s, under the target by %s. The set of "
                 "XLA-side changes alone reaches %s, %s over it.",
                 x->shape, x->per_layer, where, hbm_size_human(s->recompute_peak, a),
                 hbm_size_human(s->target_bytes - s->recompute_peak, b), hbm_size_human(r->final_peak, c),
                 hbm_size_human(r->final_peak > s->target_bytes ? r->final_peak - s->target_bytes : 0, d));
        advice(f, 0, "", t);
    } else if (!s->fits) {
        fprintf(f, "\nNothing within the limits fits: the best set reaches %s, %s over the target.\n",
                hbm_size_human(r->final_peak, a),
                hbm_size_human(r->final_peak > s->target_bytes ? r->final_peak - s->target_bytes : 0, b));
        if (r->n_left) fprintf(f, "Left at its peak, untouched by any change (largest first):\n");
        for (size_t i = 0; i < r->n_left; i++) {
            const hbm_plan_buffer *bu = &r->left[i];
            char what[700];
            snprintf(what, sizeof what, "%s %s %s", bu->label, bu->instruction, bu->shape);
            hbmi_buffer_row(f, 2, hbm_size_human(bu->size, a), -1, hbm_category_str(bu->category),
                            hbmi_text_fit(w, sizeof w, what, row, 0));
        }
    }
    if (!s->fits && s->recompute_fits) {
        const hbmi_jax_residual *x = &r->res[r->recompute_res];
        char t[600];
        snprintf(t, sizeof t,
                 "hbm fit --emit writes the module with the backward loop recomputing the scan residual %s, planned to "
                 "%s (%" PRIu64 " bytes), not the XLA-side set.",
                 x->shape, hbm_size_human(s->recompute_peak, a), s->recompute_peak);
        advice(f, 0, "", t);
    }
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "fit: write error") : HBM_OK;
}

/* Lines marked as advice wrapped at spaces to the width (continued two columns further in),
 * the others cut as every table is; width 0: written whole. */
static void write_wrapped(FILE *f, const char *text, size_t len, size_t width) {
    size_t at = 0;
    while (at < len) {
        const char *line = text + at, *nl = memchr(line, '\n', len - at);
        size_t n = nl ? (size_t)(nl - line) : len - at;
        at += n + (nl ? 1 : 0);
        if (n && line[0] == HBMI_WHOLE) {
            line++, n--;
            size_t ind = 0;
            while (ind < n && line[ind] == ' ') ind++;
            size_t cont = ind + 2, col0 = 0;
            while (width > cont + 20 && col0 + n > width) {
                size_t cut = width - col0; /* < n */
                while (cut > ind && line[cut] != ' ') cut--;
                if (cut <= ind) { /* a word longer than the line: whole, on a line of its own */
                    cut = width - col0;
                    while (cut < n && line[cut] != ' ') cut++;
                    if (cut >= n) break;
                }
                fprintf(f, "%*s%.*s\n", (int)col0, "", (int)cut, line);
                line += cut;
                n -= cut;
                while (n && *line == ' ') line++, n--;
                col0 = cont;
                ind = 0;
            }
            fprintf(f, "%*s%.*s\n", (int)col0, "", (int)n, line);
        } else {
            hbmi_write_fitted(f, line, n, width);
            fputc('\n', f);
        }
    }
}

/* render's text, written into memory first, then to f wrapped at width (write_wrapped). */
typedef hbm_status (*text_fn)(const hbm_fit_result *r, FILE *f, size_t top, size_t width);
static hbm_status write_text(const hbm_fit_result *r, FILE *f, size_t top, size_t width, text_fn render) {
    char *mem = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&mem, &n);
    if (!m) return hbmi_error(HBM_ERR_NOMEM, "out of host memory formatting output");
    hbm_status s = render(r, m, top, width);
    if (fclose(m) && !s) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory formatting output");
    if (!s) write_wrapped(f, mem, n, width);
    free(mem);
    if (!s && ferror(f)) s = hbmi_error(HBM_ERR_IO, "fit: write error");
    return s;
}

hbm_status hbmi_fit_text_width(const hbm_fit_result *r, FILE *f, size_t top, size_t width) {
    if (!r || !f) return hbmi_error(HBM_ERR_INVALID, "fit: no result");
    return write_text(r, f, top, width, fit_text);
}

hbm_status hbm_fit_text(const hbm_fit_result *r, FILE *f, size_t top) { return hbmi_fit_text_width(r, f, top, 100); }

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
            ",\n  \"xla_limit_bytes\": %" PRId64 ",\n  \"xla_tracker_before_bytes\": %" PRId64
            ",\n  \"xla_tracker_after_bytes\": %" PRId64 ",\n  \"candidates\": %u,\n  \"plans\": %u,\n  \"seconds\": %.3f",
            s->target_bytes, s->peak_before, r->final_peak ? r->final_peak : s->peak_before, s->fits ? "true" : "false",
            s->chosen == HBM_FIT_REMAT_XLA ? "xla" : s->chosen == HBM_FIT_REMAT_NONE ? "none" : "hbm",
            s->argument_bytes, s->output_bytes, s->alias_bytes, s->temp_bytes,
            s->chosen == HBM_FIT_REMAT_XLA ? s->xla.recompute_flops : s->hbm.recompute_flops, r->xla_limit,
            r->xla_before, r->xla_after, r->n_candidates, r->n_plans, r->seconds);
    fprintf(f, ",\n  \"setting\": ");
    jstr(f, s->setting);
    fprintf(f, ",\n  \"residual_peak_bytes\": %" PRIu64 ",\n  \"residual_alone\": %s,\n  \"residual_fits\": %s",
            s->residual_peak, s->residual_alone ? "true" : "false", s->residual_fits ? "true" : "false");
    fprintf(f, ",\n  \"recompute_residual_peak_bytes\": %" PRIu64 ",\n  \"recompute_residual_fits\": %s",
            s->recompute_peak, s->recompute_fits ? "true" : "false");
    /* what hbm_fit_emit writes plans to this: the recompute module, else the set's */
    fprintf(f, ",\n  \"emitted_peak_bytes\": %" PRIu64,
            !s->fits && s->recompute_fits ? s->recompute_peak : r->final_peak ? r->final_peak : s->peak_before);
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
    fprintf(f, "\n  ],\n  \"has_backward\": %s,\n  \"scan_residuals\": [", r->has_backward ? "true" : "false");
    for (size_t i = 0; i < r->n_res; i++) {
        const hbmi_jax_residual *x = &r->res[i];
        fprintf(f, "%s\n    {\"layers\": %lld, \"bytes\": %" PRIu64 ", \"shape\": ", i ? "," : "", (long long)x->layers,
                x->bytes);
        jstr(f, x->shape);
        fprintf(f, ", \"per_layer\": ");
        jstr(f, x->per_layer);
        fprintf(f, ", \"carry\": %s, \"loop\": ", x->carry ? "true" : "false");
        jstr(f, x->loop);
        fprintf(f, ", \"backward_loop\": ");
        jstr(f, x->backward_loop);
        fprintf(f, ", \"op_name\": ");
        jstr(f, x->op_name);
        fprintf(f, ", \"source_file\": ");
        jstr(f, x->source_file);
        fprintf(f, ", \"source_line\": %d, \"at_peak\": %s, \"estimated_bytes_off\": %" PRIu64
                   ", \"verified\": %s, ",
                x->source_line, x->at_peak ? "true" : "false", x->estimate, x->host_peak ? "true" : "false");
        fprintf(f, "\"host_peak_bytes\": %" PRIu64 ", \"with_set_peak_bytes\": %" PRIu64
                   ", \"recompute_flops\": %" PRIu64 ", \"recompute_peak_bytes\": %" PRIu64
                   ", \"recompute_not_planned\": ",
                x->host_peak, x->with_set_peak, x->recompute_flops, x->recompute_peak);
        jstr(f, x->why_estimate);
        fprintf(f, ", \"recompute_note\": ");
        jstr(f, x->recompute_note);
        fprintf(f, ", \"maxtext_name\": ");
        jstr(f, x->maxtext ? x->maxtext : "");
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

/* plan's explanation in JAX's terms (fit_terms.h): what autodiff saves, named, and the change
 * that stops saving it; the bytes each change takes off are hbm fit's to verify. */
static hbm_status terms_text(const hbm_fit_result *r, FILE *f, size_t top, size_t width) {
    (void)top, (void)width;
    if (!r->has_backward) {
        no_backward_text(f);
        return HBM_OK;
    }
    for (size_t i = 0; i < r->n_res; i++) {
        char a[32], t[300];
        residual_names(f, &r->res[i]);
        snprintf(t, sizeof t,
                 "up to %s (the buffer less the one layer the backward loop holds), estimated; hbm fit plans the "
                 "module with each change and says what it takes off",
                 hbm_size_human(r->res[i].estimate, a));
        advice(f, 2, "takes off: ", t);
    }
    return HBM_OK;
}

hbm_status hbmi_fit_terms_write(const hbm_plan *p, FILE *f, size_t width) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "fit terms: NULL argument");
    hbm_fit_result *r = NULL;
    hbm_status s = hbmi_fit_terms_run(p, &r);
    if (s || !r) return s;
    s = write_text(r, f, 0, width, terms_text);
    hbm_fit_free(r);
    return s;
}
