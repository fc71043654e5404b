/* replay_report.c - a replay's result written: the table or the JSON object of an
 * hbm_replay_report (the engine, trace/replay/replay_run.c, built it), the twin's match
 * (hbm_torch_match_write, _explain), and --suggest's table. Nothing here replays or
 * searches: each function writes what it is given. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/replay.h"
#include "hbm/size.h"
#include "report/replay_render.h"
#include "trace/trace_view.h"

/* ---- writing ----------------------------------------------------------------------------------- */

/* The twin's match against what PyTorch recorded (hbm_replay_torch_match computed it). */
static double match_pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 100.0; }

hbm_status hbm_torch_match_write(const hbm_torch_match *m, FILE *f, int json) {
    if (!m || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_match_write: NULL argument");
    if (json) {
        fprintf(f,
                "{\"segments\": [%" PRIu64 ", %" PRIu64 "], \"addresses\": [%" PRIu64 ", %" PRIu64 "], \"twin_segment_events\": %" PRIu64
                ", \"ooms\": [%" PRIu64 ", %" PRIu64 "], \"empty_cache_calls\": %" PRIu64 ", \"first_segment_diff\": %" PRId64
                ", \"first_address_diff\": %" PRId64 ", \"allocs_in_segments_before_history\": %" PRIu64 "}",
                m->segments_same, m->segments_recorded, m->allocs_same, m->allocs, m->segments_twin, m->ooms_twin,
                m->ooms_recorded, m->empty_cache_calls, m->first_segment_diff, m->first_alloc_diff, m->allocs_before_history);
        return HBM_OK;
    }
    /* (none recorded: nothing to match, not 0/0 = 100%) */
    if (m->segments_recorded)
        fprintf(f, "segments %" PRIu64 "/%" PRIu64 " (%.1f%%)", m->segments_same, m->segments_recorded,
                match_pct(m->segments_same, m->segments_recorded));
    else
        fputs("segments: none recorded", f);
    if (m->allocs)
        fprintf(f, ", addresses %" PRIu64 "/%" PRIu64 " (%.1f%%)", m->allocs_same, m->allocs, match_pct(m->allocs_same, m->allocs));
    else
        fputs(", addresses: no allocations", f);
    return HBM_OK;
}

hbm_status hbm_torch_match_explain(const hbm_trace *t, const hbm_torch_match *m, FILE *f) {
    if (!t || !m || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_match_explain: NULL argument");
    char a[32];
    size_t hs = t->history_start, nh = t->count - hs;
    if (m->first_segment_diff >= 0 && (size_t)m->first_segment_diff < nh) {
        const hbm_trace_event *e = &t->events[hs + (size_t)m->first_segment_diff];
        fprintf(f, "  first segment difference: event %" PRId64 ", PyTorch's %s of %s at 0x%" PRIx64
                   ": the twin made another decision there", m->first_segment_diff, hbm_event_kind_str((hbm_event_kind)e->kind),
                hbm_size_xla((int64_t)e->size, a), e->addr);
        if (m->segments_twin != m->segments_recorded)
            fprintf(f, " (%" PRIu64 " segment events by the twin, %" PRIu64 " recorded)", m->segments_twin, m->segments_recorded);
        fputc('\n', f);
    }
    if (m->first_alloc_diff >= 0 && (size_t)m->first_alloc_diff < nh) {
        const hbm_trace_event *e = &t->events[hs + (size_t)m->first_alloc_diff];
        fprintf(f, "  first address difference: event %" PRId64 ", %s of %s at 0x%" PRIx64 ": ", m->first_alloc_diff,
                hbm_event_kind_str((hbm_event_kind)e->kind), hbm_size_xla((int64_t)(e->requested ? e->requested : e->size), a),
                e->addr);
        if (m->allocs_before_history)
            fprintf(f, "%" PRIu64 " allocations land in segments reserved before the history that the snapshot's end "
                       "state no longer holds (their blocks then are unknown)\n", m->allocs_before_history);
        else if (e->kind == HBM_EV_ALLOC && m->ooms_twin > m->ooms_recorded)
            fprintf(f, "the twin ran out of memory there (device too small?)\n");
        else
            fprintf(f, "the twin placed it elsewhere (a decision before it differs, or the state rebuilt at the "
                       "history's start does)\n");
    }
    return HBM_OK;
}

static void col_size(char *buf, size_t cap, uint64_t v) {
    char h[32];
    snprintf(buf, cap, "%s", hbm_size_xla((int64_t)v, h));
}

/* The table's first row: what PyTorch did, from the snapshot's own events. "peak held" is
 * the most bytes its live blocks held at once (as the other rows'), "reserved" its peak
 * reserved, "calls" the segment events (cudaMalloc / cudaFree, map / unmap), "frag"
 * unknown (the snapshot does not say which free block was largest). */
static void recorded_row(const hbm_trace *t, const hbm_torch_recorded *rec, uint64_t calls, FILE *f) {
    char a[32], b[32], c[32], w[64];
    col_size(a, sizeof a, rec->peak_in_use);
    col_size(b, sizeof b, rec->peak_reserved);
    fprintf(f, "%-28s %11s %11s %6s %7" PRIu64 "  ", "recorded (PyTorch)", a, b, "-", calls);
    if (rec->oom_event >= 0)
        fprintf(f, "%s: %s\n", hbmi_event_when(t, rec->oom_event, t->events[rec->oom_event].time_ns, w, sizeof w),
                hbm_size_xla((int64_t)rec->oom_bytes, c));
    else
        fputs("none\n", f);
    if (rec->peak_event >= 0) {
        int64_t ev = hbmi_event_number(t, rec->peak_event);
        if (ev < 0) snprintf(w, sizeof w, "before the history");
        else snprintf(w, sizeof w, "event %" PRId64, ev);
        /* reserved minus the bytes requested (memory_viz's in-use curve), not PyTorch's
         * "reserved but unallocated", which counts blocks as held (rounded to 512 B) */
        fprintf(f, "  PyTorch's peak reserved (%s): %s of it not requested, %" PRIu64 " segment%s\n", w,
                hbm_size_xla((int64_t)rec->unallocated_at_peak, c), rec->segments_at_peak,
                rec->segments_at_peak == 1 ? "" : "s");
    }
}

/* Split a configuration into its items (a roundup list's brackets keep their commas). */
static size_t config_items(const char *cfg, char items[][96], size_t max) {
    size_t n = 0;
    for (const char *p = cfg; *p && n < max;) {
        const char *q = p;
        int depth = 0;
        while (*q && (*q != ',' || depth)) depth += *q == '[' ? 1 : *q == ']' && depth ? -1 : 0, q++;
        if (q > p) snprintf(items[n++], sizeof items[0], "%.*s", (int)(q - p), p);
        p = *q ? q + 1 : q;
    }
    return n;
}

/* The columns s takes as hbmi_text_fit shows it (a control character as \xNN). */
static size_t columns(const char *s) {
    size_t cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        cols += *p < 0x20 || *p == 0x7f ? 4 : (*p & 0xC0) != 0x80;
    return cols;
}

/* A row's label in 28 columns, and whether it had to be cut. A configuration that does not
 * fit loses what every torch row shares (the recorded settings, said above the table) and
 * "allocator=", then its middle, so what tells the rows apart stays visible. */
static int row_label(const char *cfg, const char *recorded, char *out, size_t cap) {
    if (strlen(cfg) <= 28) {
        hbmi_text_fit(out, cap, cfg, 28, 0);
        return columns(cfg) > 28;
    }
    char it[24][96], rec[24][96], short_[300] = "";
    size_t n = config_items(cfg, it, 24), nr = recorded ? config_items(recorded, rec, 24) : 0, len = 0;
    int torch = n && !strcmp(it[0], "allocator=torch");
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) { /* the items not among the recorded settings */
        int skip = 0;
        for (size_t k = 0; torch && i && k < nr && !skip; k++) skip = !strcmp(it[i], rec[k]);
        if (skip) it[i][0] = 0;
        else kept++;
    }
    for (size_t i = 0; i < n && len < sizeof short_; i++) {
        if (!it[i][0]) continue;
        /* "allocator=" goes where other items follow: a row of the recorded settings alone
         * reads "allocator=torch", as it does when the settings are PyTorch's defaults */
        const char *x = strncmp(it[i], "allocator=", 10) || kept == 1 ? it[i] : it[i] + 10;
        len += (size_t)snprintf(short_ + len, sizeof short_ - len, "%s%s", len ? "," : "", x);
    }
    hbmi_text_fit(out, cap, short_, 28, 1);
    return columns(short_) > 28;
}

/* The device in words, as the engine found it (the spec, when nobody did). */
static const char *device_words(const char *words, const char *spec) { return words[0] ? words : spec; }

/* The JSON members "recorded": {...}, "match": {...} (a leading ", "): the one writer of
 * what PyTorch did and the twin's match, for hbm replay --json and hbm_torch_replay_write. */
static void twin_json(const hbm_trace *t, const hbm_torch_recorded *r, const hbm_torch_match *m, FILE *f) {
    fprintf(f, ", \"recorded\": {\"peak_bytes_in_use\": %" PRIu64 ", \"peak_bytes_reserved\": %" PRIu64
               ", \"peak_event\": %" PRId64 ", \"requested_bytes_at_peak\": %" PRIu64
               ", \"reserved_unallocated_at_peak\": %" PRIu64 ", \"segments_at_peak\": %" PRIu64 ", \"oom\": ",
            r->peak_in_use, r->peak_reserved, hbmi_event_number(t, r->peak_event), r->requested_at_peak, r->unallocated_at_peak,
            r->segments_at_peak);
    if (r->oom_event >= 0) fprintf(f, "{\"event\": %" PRId64 ", \"bytes\": %" PRIu64 "}}", hbmi_event_number(t, r->oom_event), r->oom_bytes);
    else fputs("null}", f);
    fputs(", \"match\": {\"config\": ", f);
    hbmi_json_str(f, m->config);
    fputs(", \"device\": ", f);
    hbmi_json_str(f, m->device);
    fputs(", \"result\": ", f);
    hbm_torch_match_write(m, f, 1);
    fputc('}', f);
}

void hbmi_torch_replay_render(const hbm_trace *t, const hbm_torch_recorded *r, const hbm_torch_match *m, FILE *f,
                              int json) {
    if (json) {
        twin_json(t, r, m, f);
        return;
    }
    /* the recorded row is the table's first (hbm_replay_report_write) */
    fputc('\n', f);
    fprintf(f, "twin %s on %s: ", m->config, m->device);
    hbm_torch_match_write(m, f, 0);
    if (m->allocs_before_history) fprintf(f, " (%" PRIu64 " in segments from before the history)", m->allocs_before_history);
    fputc('\n', f);
}

static hbm_status write_json(const hbm_replay_report *rep, FILE *f) {
    const hbm_trace *t = rep->trace;
    fputs("{\"trace\": ", f);
    hbmi_json_str(f, t->name);
    fputs(", \"device\": ", f);
    hbmi_json_str(f, rep->device);
    fputs(", \"device_assumed\": ", f); /* why this device: hbm_replay_default_device's words */
    hbmi_json_str(f, rep->device_is_default && rep->device_why ? rep->device_why : "given (--device)");
    fprintf(f, ", \"events\": %zu, \"optimal_bound_bytes\": %" PRIu64 ", \"packed_bytes\": %" PRIu64, t->count,
            rep->bounds.lower_bound, rep->bounds.packed);
    hbmi_json_plan_peak(f, t);
    fputs(", \"results\": [", f);
    for (size_t i = 0; i < rep->n; i++) {
        const hbm_replay_result *x = &rep->rows[i];
        fputs(i ? ", {\"config\": " : "{\"config\": ", f);
        hbmi_json_str(f, x->config);
        fputs(", \"allocator\": ", f);
        hbmi_json_str(f, x->allocator);
        fprintf(f, ", \"status\": \"%s\"", hbm_status_name(x->status));
        if (x->status) {
            fputs(", \"error\": ", f);
            hbmi_json_str(f, x->error);
            fputs("}", f);
            continue;
        }
        fprintf(f,
                ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"ooms\": %" PRIu64
                ", \"peak_bytes_in_use\": %" PRIu64 ", \"peak_bytes_reserved\": %" PRIu64
                ", \"fragmentation_at_peak\": %.6f, \"device_calls\": %" PRIu64 ", \"events_per_second\": %.0f",
                x->allocs, x->frees, x->ooms, x->peak_in_use, x->peak_reserved, x->frag_at_peak, x->device_calls,
                x->seconds > 0 ? (double)x->events / x->seconds : 0.0);
        if (x->first_oom_event >= 0) {
            fprintf(f, ", \"first_oom\": {\"event\": %" PRId64 ", \"before_history\": %s, \"time_ns\": %" PRIu64
                       ", \"bytes\": %" PRIu64,
                    hbmi_event_number(t, x->first_oom_event), hbmi_event_number(t, x->first_oom_event) < 0 ? "true" : "false",
                    t->has_time ? x->first_oom_time_ns : 0, x->first_oom_bytes);
            hbmi_json_step(f, t, x->first_oom_event, "oom");
            fputs(", \"report\": ", f);
            hbmi_json_str(f, x->first_oom_report);
            fprintf(f, "}, \"last_oom\": {\"event\": %" PRId64 ", \"time_ns\": %" PRIu64 "}, \"largest_oom_bytes\": %" PRIu64,
                    hbmi_event_number(t, x->last_oom_event), t->has_time ? x->last_oom_time_ns : 0, x->largest_oom_bytes);
        } else {
            fputs(", \"first_oom\": null", f);
        }
        fputc('}', f);
    }
    fputc(']', f);
    if (rep->twin_row >= 0 && !rep->twin_status) twin_json(t, &rep->recorded, &rep->twin, f);
    if (rep->twin_row >= 0 && rep->twin_status == HBM_ERR_OOM) { /* the rows stand; the twin could not start */
        fputs(", \"match\": null, \"match_not_run\": ", f);
        hbmi_json_str(f, rep->twin_why);
    }
    fputs("}\n", f);
    return rep->twin_row >= 0 && rep->twin_status != HBM_ERR_OOM ? rep->twin_status : HBM_OK;
}

hbm_status hbm_replay_report_write(const hbm_replay_report *rep, FILE *f, int json) {
    if (!rep || !rep->trace || (rep->n && !rep->rows) || !f)
        return hbmi_error(HBM_ERR_INVALID, "hbm_replay_report_write: NULL argument");
    if (json) return write_json(rep, f);
    const hbm_trace *t = rep->trace;
    const hbm_replay_result *r = rep->rows;
    size_t n = rep->n;
    int tw = rep->twin_row;
    uint64_t bound = rep->bounds.lower_bound, packed = rep->bounds.packed;
    const char *rec = tw >= 0 ? rep->recorded_settings : NULL;
    char a[32], b[32], c[32], name[80], cfg[64], w[160];
    hbmi_text_fit(name, sizeof name, t->name, 48, 1);
    fprintf(f, "replay of %s (%s%s%s%zu events", name, t->device[0] ? "device " : "", t->device,
            t->device[0] ? ", " : "", t->count - t->history_start);
    if (t->history_start)
        fprintf(f, " after %zu rebuilt from %s", t->history_start,
                strcmp(t->source, "xprof") ? "its segments" : "what was in use before its first event");
    fprintf(f, ")\n  on %s", device_words(rep->device_words, rep->device));
    if (rep->device_is_default) fprintf(f, " (%s; --device sets another)", rep->device_why);
    fputc('\n', f);
    if (tw >= 0) {
        hbmi_text_fit(w, sizeof w, rec[0] ? rec : "PyTorch's defaults", 60, 0);
        fprintf(f, "  torch rows: the recorded settings (%s) unless a row sets others\n", w);
    }
    fprintf(f, "\n%-28s %11s %11s %6s %7s  %s\n", "configuration", "peak held", "reserved", "frag", "calls",
            "first OOM");
    if (tw >= 0) recorded_row(t, &rep->recorded, rep->recorded_calls, f);
    for (size_t i = 0; i < n; i++) {
        const hbm_replay_result *x = &r[i];
        row_label(x->config, rec, cfg, sizeof cfg);
        if (x->status) {
            fprintf(f, "%-28s %s: %s\n", cfg, hbm_status_str(x->status), x->error);
            continue;
        }
        col_size(a, sizeof a, x->peak_in_use);
        col_size(b, sizeof b, x->peak_reserved);
        fprintf(f, "%-28s %11s %11s %5.1f%% %7" PRIu64 "  ", cfg, a, b, 100.0 * x->frag_at_peak, x->device_calls);
        if (x->first_oom_event >= 0)
            fprintf(f, "%s: %s (%" PRIu64 " OOM%s)\n", hbmi_event_when_short(t, x->first_oom_event, x->first_oom_time_ns, w, sizeof w),
                    hbm_size_xla((int64_t)x->first_oom_bytes, c), x->ooms, x->ooms == 1 ? "" : "s");
        else
            fprintf(f, "none\n");
    }
    for (size_t i = 0; i < n; i++) /* the rows whose label had to be cut, whole */
        if (row_label(r[i].config, rec, cfg, sizeof cfg)) fprintf(f, "  %s = %s\n", cfg, r[i].config);
    if (bound) {
        fprintf(f, "\n%-28s %11s  (max bytes live at once: no allocator can peak lower)\n", "optimal packing bound",
                hbm_size_xla((int64_t)bound, a));
        if (packed)
            fprintf(f, "%-28s %11s  (a static placement of every buffer, knowing the future%s)\n", "best packing found",
                    hbm_size_xla((int64_t)packed, a), packed == bound ? ": optimal" : "");
        hbmi_text_plan_peak(f, t);
    }
    if (tw >= 0 && !r[tw].status) { /* the twin against what PyTorch did, and where they first part, why */
        if (rep->twin_status == HBM_ERR_OOM) {
            fputs("\ntwin (the torch row) against PyTorch: not run: ", f);
            hbmi_fputs_visible(rep->twin_why, f);
            fputc('\n', f);
        } else if (rep->twin_status) {
            return rep->twin_status;
        } else {
            fprintf(f, "\ntwin (the torch row) against PyTorch: ");
            hbm_torch_match_write(&rep->twin, f, 0);
            fputc('\n', f);
            hbm_torch_match_explain(t, &rep->twin, f);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (r[i].status || r[i].first_oom_event < 0) continue;
        fprintf(f, "\n--- first OOM with %s: %s ---\n%s\n", r[i].config,
                hbmi_event_when(t, r[i].first_oom_event, r[i].first_oom_time_ns, w, sizeof w),
                r[i].first_oom_report ? r[i].first_oom_report : "");
        if (r[i].ooms > 1) /* the later ones, summarised */
            fprintf(f, "(then %" PRIu64 " more OOMs, the last at %s; the largest request %s)\n", r[i].ooms - 1,
                    hbmi_event_when(t, r[i].last_oom_event, r[i].last_oom_time_ns, w, sizeof w),
                    hbm_size_xla((int64_t)r[i].largest_oom_bytes, c));
    }
    return HBM_OK;
}

hbm_status hbm_torch_suggest_write(const hbm_torch_suggestion *s, FILE *f, int json) {
    if (!s || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_torch_suggest_write: NULL argument");
    char a[32], b[32];
    if (json) {
        fputs("{\"device\": ", f);
        hbmi_json_str(f, s->device);
        fprintf(f, ", \"capacity\": %" PRIu64 ", \"max_live_bytes\": %" PRIu64 ", \"suggestion\": ", s->capacity, s->lower_bound);
        if (s->best >= 0) {
            fputs("{\"env\": ", f);
            hbmi_json_str(f, s->c[s->best].env);
            fputs(", \"config\": ", f);
            hbmi_json_str(f, s->c[s->best].config);
            fprintf(f, ", \"peak_bytes_reserved\": %" PRIu64 ", \"fragmentation_at_peak\": %.6f}", s->c[s->best].peak_reserved,
                    s->c[s->best].frag_at_peak);
        } else {
            fputs("null", f);
        }
        fprintf(f, ", \"over_by_bytes\": %" PRIu64 ", \"candidates\": [", s->over_by);
        for (size_t k = 0; k < s->n; k++) {
            const hbm_torch_candidate *c = &s->c[k];
            fputs(k ? ", {\"config\": " : "{\"config\": ", f);
            hbmi_json_str(f, c->config);
            fputs(", \"env\": ", f);
            hbmi_json_str(f, c->env);
            fprintf(f, ", \"status\": \"%s\", \"ooms\": %" PRIu64 ", \"peak_bytes_reserved\": %" PRIu64
                       ", \"peak_bytes_in_use\": %" PRIu64 ", \"fragmentation_at_peak\": %.6f}",
                    hbm_status_name(c->status), c->ooms, c->peak_reserved, c->peak_in_use, c->frag_at_peak);
        }
        fputs("]}\n", f);
        return HBM_OK;
    }
    fprintf(f, "on %s:\n", device_words(s->device_words, s->device));
    if (s->best == 0) {
        fprintf(f, "the recorded settings do not run out of memory here: nothing to change\n");
    } else if (s->best > 0) {
        const hbm_torch_candidate *c = &s->c[s->best];
        fprintf(f, "%s\n  avoids the OOM: peak reserved %s, fragmentation at the peak %.1f%%\n", c->env,
                hbm_size_xla((int64_t)c->peak_reserved, a), 100.0 * c->frag_at_peak);
    } else if (s->over_by) {
        fprintf(f, "no setting avoids the OOM: the program needs %s at once, %s more than the device holds\n",
                hbm_size_xla((int64_t)s->lower_bound, a), hbm_size_xla((int64_t)s->over_by, b));
    } else {
        fprintf(f, "no PyTorch setting avoids the OOM, though the most bytes needed at once (%s) fit: fragmentation\n",
                hbm_size_xla((int64_t)s->lower_bound, a));
    }
    /* the settings' column fits the longest within 100 columns; past that the rows drop the
     * variable's name, which the column's title then says once, and one still too long is
     * cut in the middle there and given whole under the table */
    static const char var[] = "PYTORCH_CUDA_ALLOC_CONF=";
    int ew = 56, strip = 0;
    for (size_t k = 0; k < s->n; k++) strip |= strlen(s->c[k].env) > 66;
    for (size_t k = 0; k < s->n; k++) {
        const char *e = s->c[k].env;
        size_t len = strlen(e) - (strip && !strncmp(e, var, sizeof var - 1) ? sizeof var - 1 : 0);
        if ((int)len > ew) ew = (int)len;
    }
    if (ew > 66) ew = 66;
    fprintf(f, "\n%-*s %6s %14s %10s\n", ew, strip ? var : "setting", "OOMs", "peak reserved", "frag@peak");
    int cut = 0;
    for (size_t k = 0; k < s->n; k++) {
        const hbm_torch_candidate *c = &s->c[k];
        char env[sizeof c->env + 8];
        hbmi_text_fit(env, sizeof env, c->env + (strip && !strncmp(c->env, var, sizeof var - 1) ? sizeof var - 1 : 0), ew, 1);
        cut |= strstr(c->env, env) == NULL;
        if (c->status) {
            fprintf(f, "%-*s %s\n", ew, env, hbm_status_str(c->status));
            continue;
        }
        fprintf(f, "%-*s %6" PRIu64 " %14s %9.1f%%\n", ew, env, c->ooms, hbm_size_xla((int64_t)c->peak_reserved, a),
                100.0 * c->frag_at_peak);
    }
    if (cut) {
        fprintf(f, "\nsettings cut above, in full:\n");
        for (size_t k = 0; k < s->n; k++)
            if ((int)strlen(s->c[k].env) - (strip && !strncmp(s->c[k].env, var, sizeof var - 1) ? (int)sizeof var - 1 : 0) > ew)
                fprintf(f, "  %s\n", s->c[k].env);
    }
    return HBM_OK;
}
