/* memprof_report.c - a profile's memory profile as text and JSON (hbm view PROFILE): the
 * figures hbm_memprof computed, rendered only. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/size.h"
#include "report/view_internal.h"
#include "trace/import/memprof_view.h"

static const char *sure_str(hbm_memprof_sure s) {
    return s == HBM_MEMPROF_SURE ? "sure" : s == HBM_MEMPROF_LIKELY ? "likely" : "unknown";
}

static const char *sz(uint64_t v, char b[32]) { return hbm_size_xla((int64_t)v, b); }

static double ms(int64_t ps) { return (double)ps / 1e9; }

/* in use (or reserved) after each event, as columns of the maximum of their events */
static void spark(FILE *f, const char *label, const hbm_memprof_event *ev, size_t n, int reserved, uint64_t scale,
                  int width, int ascii) {
    static const char *blocks[] = {" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char levels[] = " .:-=+*#@";
    fprintf(f, "  %-9s ", label);
    if (!n || !scale) {
        fputs("(nothing)\n", f);
        return;
    }
    size_t cols = width <= 0 || n < (size_t)width ? n : (size_t)width; /* 0: a column per event */
    uint64_t top = 0;
    for (size_t c = 0; c < cols; c++) {
        uint64_t m = 0;
        for (size_t i = c * n / cols; i < (c + 1) * n / cols; i++) {
            uint64_t v = reserved ? ev[i].bytes_reserved : ev[i].bytes_allocated;
            if (v > m) m = v;
        }
        if (m > top) top = m;
        int lv = (int)((double)m / (double)scale * 8.0 + 0.999);
        if (lv > 8) lv = 8;
        if (m && !lv) lv = 1;
        if (ascii) fputc(levels[lv], f);
        else fputs(blocks[lv], f);
    }
    char b[32];
    fprintf(f, "  max %s\n", sz(top, b));
}

static const char *attr_note(const hbm_memprof *mp) {
    hbmi_memprof_holds h;
    hbmi_memprof_holds_get(mp, &h);
    return h.attr_note;
}

static void what_it_holds(const hbm_memprof *mp, FILE *f) {
    fprintf(f, "%s: no memory profile: the host plane ('/host:CPU') records no MemoryAllocation or "
               "MemoryDeallocation events",
            hbm_memprof_path(mp));
    hbmi_memprof_holds h;
    hbmi_memprof_holds_get(mp, &h);
    if (!h.has_host) fputs(" (the profile has no host plane)", f);
    fprintf(f, ".\nIt holds %zu planes, %zu of them devices%s.\n", h.n_planes, h.n_device_planes,
            h.has_metadata ? ", and the compiled modules ('/host:metadata')" : "");
}

static void table_all(const hbm_memprof *mp, FILE *f) {
    char b[5][32];
    fprintf(f, "%-7s %-16s %7s %11s %11s %11s %6s %11s\n", "device", "allocator", "events", "peak", "reserved",
            "capacity", "frag", "peak stat");
    for (size_t a = 0; a < hbm_memprof_allocator_count(mp); a++) {
        const hbm_memprof_summary *s = hbm_memprof_allocator(mp, a);
        fprintf(f, "%-7d %-16s %7zu %11s %11s %11s %5.1f%% %11s\n", s->device_index, s->allocator, s->n_events,
                sz(s->peak_bytes_in_use, b[0]), sz(s->peak_reserved, b[1]), sz(s->memory_capacity, b[2]),
                s->peak_fragmentation * 100.0, sz(s->max_peak_bytes_in_use, b[3]));
    }
    fputc('\n', f);
}

static void text_one(const hbm_memprof *mp, const hbm_memprof_summary *s, size_t top, int width, int ascii, FILE *f) {
    char b[6][32];
    const hbm_memprof_event *ev = hbm_memprof_events(mp, NULL) + s->first_event;
    fprintf(f, "Memory profile of %s (device %d) in %s\n", s->allocator, s->device_index, hbm_memprof_path(mp));
    fprintf(f, "  %zu events: %zu allocations, %zu deallocations, over %.3f ms\n", s->n_events, s->n_allocations,
            s->n_deallocations, ms(s->last_time_ps - s->first_time_ps));
    fprintf(f, "  peak in use       %s at %.3f ms (step %" PRId64 ", event %zu): the largest bytes_allocated + bytes_reserved\n",
            sz(s->peak_bytes_in_use, b[0]), ms(s->peak_offset_ps), s->peak_step, s->peak_event - s->first_event);
    fprintf(f, "  at the peak       allocated %s, reserved %s, available %s, capacity %s, fragmentation %.1f%%\n",
            sz(s->peak_allocated, b[0]), sz(s->peak_reserved, b[1]), sz(s->peak_available, b[2]),
            sz(s->memory_capacity, b[3]), s->peak_fragmentation * 100.0);
    fprintf(f, "  allocator's peak  %s (its peak_bytes_in_use stat", sz(s->max_peak_bytes_in_use, b[0]));
    if (s->max_peak_bytes_in_use > s->max_bytes_allocated)
        fprintf(f, ": %s above the events' largest bytes_allocated %s, reached before the profile began)\n",
                sz(s->max_peak_bytes_in_use - s->max_bytes_allocated, b[1]), sz(s->max_bytes_allocated, b[2]));
    else
        fprintf(f, ", the same as the events' largest bytes_allocated)\n");
    fprintf(f, "  before the first  %s in use\n\n", sz(s->held_before_bytes, b[0]));
    uint64_t scale = 0;
    for (size_t i = 0; i < s->n_events; i++) {
        if (ev[i].bytes_allocated > scale) scale = ev[i].bytes_allocated;
        if (ev[i].bytes_reserved > scale) scale = ev[i].bytes_reserved;
    }
    spark(f, "in use", ev, s->n_events, 0, scale, width, ascii);
    spark(f, "reserved", ev, s->n_events, 1, scale, width, ascii);
    fprintf(f, "  %-9s 0 .. %.3f ms\n\n", "", ms(s->last_time_ps - s->first_time_ps));
    size_t show = s->n_active < top ? s->n_active : top;
    fprintf(f, "Live at the peak: %zu allocation%s of the peak's step, and %s held from before it (top %zu):\n",
            s->n_active, s->n_active == 1 ? "" : "s", sz(s->unmapped_bytes, b[0]), show);
    fprintf(f, "  %10s %10s  %-7s %-9s %-28s %s\n", "size", "requested", "sure", "kind", "made by", "shape / dtype / region");
    for (size_t k = 0; k < show; k++) {
        const hbm_memprof_active *a = &s->active[k];
        const hbm_memprof_event *e = &hbm_memprof_events(mp, NULL)[a->event];
        char who[64], what[160];
        snprintf(who, sizeof who, "%s%s", a->module[0] ? a->module : "-", a->current ? " (running)" : "");
        int w = snprintf(what, sizeof what, "%s", a->shape[0] ? a->shape : "");
        if (e->data_type > 0 && w < (int)sizeof what) w += snprintf(what + w, sizeof what - (size_t)w, " dtype %lld", (long long)e->data_type);
        if (e->region_type[0] && w < (int)sizeof what) w += snprintf(what + w, sizeof what - (size_t)w, " %s", e->region_type);
        if (e->tf_op[0] && w < (int)sizeof what) snprintf(what + w, sizeof what - (size_t)w, " op %s", e->tf_op);
        fprintf(f, "  %10s %10s  %-7s %-9s %-28s %s\n", sz(e->allocation_bytes, b[0]), sz(e->requested_bytes, b[1]),
                s->attributed ? sure_str(a->sure) : "-", a->kind[0] ? a->kind : "-", who, what[0] ? what : "-");
    }
    if (s->unmapped_bytes)
        fprintf(f, "  %10s %10s  %-7s %-9s %s\n", sz(s->unmapped_bytes, b[0]), "-", "-", "held",
                "from before the peak's step: arrays kept between calls (XProf: \"unused preallocated device memory\")");
    fputc('\n', f);
    if (s->attributed && s->running_program_id >= 0) {
        char c[10][32];
        fprintf(f, "At the peak, %s was running. By its plan it needs %s (temp %s\n"
                   "  + outputs %s); the blocks made for this execution hold %s (the allocator\n"
                   "  rounds sizes up).\n"
                   "Already held, %s: %s in blocks of its parameters' sizes made earlier (its\n"
                   "  arguments: %s), %s in other blocks made by earlier executions, %s in arrays\n"
                   "  made in the profile by no module, %s from before the peak's step that no module in\n"
                   "  the profile made (arrays kept between calls).\n",
                s->running_module, sz(s->running_temp_bytes + s->running_output_bytes, c[0]),
                sz(s->running_temp_bytes, c[1]), sz(s->running_output_bytes, c[2]), sz(s->current_bytes, c[3]),
                sz(s->running_param_bytes + s->earlier_bytes + s->kept_bytes + s->unmapped_bytes, c[4]),
                sz(s->running_param_bytes, c[5]), sz(s->running_argument_bytes, c[6]), sz(s->earlier_bytes, c[7]),
                sz(s->kept_bytes, c[8]), sz(s->unmapped_bytes, c[9]));
        for (size_t k = 0; k < show; k++)
            if (s->active[k].why[0])
                fprintf(f, "  %s: %s\n", sz(hbm_memprof_events(mp, NULL)[s->active[k].event].allocation_bytes, b[0]), s->active[k].why);
    } else if (attr_note(mp)[0]) {
        fprintf(f, "Not attributed: %s\n", attr_note(mp));
    } else if (s->attributed) {
        fprintf(f, "Not attributed: no module with a program_id ran after the peak's allocation\n");
    }
}

static void json_one(const hbm_memprof *mp, const hbm_memprof_summary *s, size_t top, FILE *f) {
    const hbm_memprof_event *ev = hbm_memprof_events(mp, NULL) + s->first_event;
    fputs("{\"allocator\":", f);
    hbmi_json_str(f, s->allocator);
    fprintf(f, ",\"device_index\":%d,\"events\":%zu,\"allocations\":%zu,\"deallocations\":%zu", s->device_index,
            s->n_events, s->n_allocations, s->n_deallocations);
    fprintf(f, ",\"max_bytes_allocated\":%" PRIu64 ",\"max_bytes_reserved\":%" PRIu64
               ",\"max_peak_bytes_in_use_stat\":%" PRIu64 ",\"peak_bytes_usage_lifetime\":%" PRIu64,
            s->max_bytes_allocated, s->max_bytes_reserved, s->max_peak_bytes_in_use, s->peak_bytes_usage_lifetime);
    fprintf(f, ",\"peak_bytes_in_use\":%" PRIu64 ",\"peak_allocated_bytes\":%" PRIu64 ",\"peak_reserved_bytes\":%" PRIu64
               ",\"peak_available_bytes\":%" PRIu64 ",\"memory_capacity\":%" PRIu64 ",\"peak_fragmentation\":%.6f",
            s->peak_bytes_in_use, s->peak_allocated, s->peak_reserved, s->peak_available, s->memory_capacity,
            s->peak_fragmentation);
    fprintf(f, ",\"peak_time_ps\":%" PRId64 ",\"peak_offset_ps\":%" PRId64 ",\"peak_step\":%" PRId64
               ",\"peak_event\":%zu,\"unmapped_bytes\":%" PRIu64 ",\"held_before_bytes\":%" PRIu64,
            s->peak_time_ps, s->peak_offset_ps, s->peak_step, s->peak_event - s->first_event, s->unmapped_bytes,
            s->held_before_bytes);
    /* the timeline, at most 1000 points as XProf samples it (SampleMemoryProfileTimeline): the
     * largest of each box, count1 boxes of width events, then count2 of width + 1 */
    const size_t max = 1000, n = s->n_events;
    size_t width = n > max ? n / max : 1, count1 = n > max ? max * (width + 1) - n : n,
           count2 = n > max ? max - count1 : 0;
    fputs(",\"timeline\":[", f);
    for (size_t c = 0; c < count1 + count2; c++) {
        size_t from = c < count1 ? c * width : count1 * width + (c - count1) * (width + 1);
        size_t to = from + (c < count1 ? width : width + 1), best = from;
        for (size_t i = from; i < to && i < n; i++)
            if (ev[i].bytes_allocated + ev[i].bytes_reserved > ev[best].bytes_allocated + ev[best].bytes_reserved) best = i;
        fprintf(f, "%s[%" PRId64 ",%" PRIu64 ",%" PRIu64 "]", c ? "," : "", ev[best].time_ps - s->first_time_ps,
                ev[best].bytes_allocated, ev[best].bytes_reserved);
    }
    fputs("],\"active\":[", f);
    size_t show = s->n_active < top ? s->n_active : top;
    for (size_t k = 0; k < show; k++) {
        const hbm_memprof_active *a = &s->active[k];
        const hbm_memprof_event *e = &hbm_memprof_events(mp, NULL)[a->event];
        fprintf(f, "%s{\"allocation_bytes\":%" PRIu64 ",\"requested_bytes\":%" PRIu64 ",\"address\":%" PRIu64
                   ",\"time_ps\":%" PRId64 ",\"step\":%" PRId64 ",\"data_type\":%lld,\"tensor_shape\":",
                k ? "," : "", e->allocation_bytes, e->requested_bytes, e->addr, e->time_ps - s->first_time_ps,
                e->step_id, (long long)e->data_type);
        hbmi_json_str(f, e->tensor_shape);
        fputs(",\"region_type\":", f);
        hbmi_json_str(f, e->region_type);
        fputs(",\"tf_op\":", f);
        hbmi_json_str(f, e->tf_op);
        fprintf(f, ",\"program_id\":%lld,\"module\":", (long long)a->program_id);
        hbmi_json_str(f, a->module);
        fputs(",\"kind\":", f);
        hbmi_json_str(f, a->kind);
        fputs(",\"shape\":", f);
        hbmi_json_str(f, a->shape);
        fprintf(f, ",\"running\":%s,\"sure\":\"%s\",\"why\":", a->current ? "true" : "false",
                s->attributed ? sure_str(a->sure) : "unknown");
        hbmi_json_str(f, a->why);
        fputc('}', f);
    }
    fputs("]", f);
    if (s->attributed && s->running_program_id >= 0) {
        fprintf(f, ",\"running\":{\"program_id\":%lld,\"module\":", (long long)s->running_program_id);
        hbmi_json_str(f, s->running_module);
        fprintf(f, ",\"temp_size_in_bytes\":%" PRIu64 ",\"output_size_in_bytes\":%" PRIu64
                   ",\"argument_size_in_bytes\":%" PRIu64 ",\"made_in_this_execution_bytes\":%" PRIu64
                   ",\"parameter_blocks_bytes\":%" PRIu64 ",\"made_earlier_bytes\":%" PRIu64
                   ",\"kept_arrays_bytes\":%" PRIu64 ",\"held_from_before_bytes\":%" PRIu64 "}",
                s->running_temp_bytes, s->running_output_bytes, s->running_argument_bytes, s->current_bytes,
                s->running_param_bytes, s->earlier_bytes, s->kept_bytes, s->unmapped_bytes);
    }
    fputc('}', f);
}

hbm_status hbm_memprof_write(const hbm_memprof *mp, int device, int json, size_t top, int width, int ascii, FILE *f) {
    if (!mp || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_memprof_write: NULL argument");
    if (width < 8) width = 8;
    if (width > 1000) width = 1000;
    int only = -1;
    if (device >= 0 && (only = hbm_memprof_find_device(mp, device)) < 0) {
        char have[256] = "";
        size_t k = 0;
        for (size_t a = 0; a < hbm_memprof_allocator_count(mp) && k + 24 < sizeof have; a++)
            k += (size_t)snprintf(have + k, sizeof have - k, "%s%d", a ? ", " : "", hbm_memprof_allocator(mp, a)->device_index);
        return hbmi_error(HBM_ERR_INVALID, "%s: no allocator of device %d in the memory profile (it has %s)", hbm_memprof_path(mp),
                          device, hbm_memprof_allocator_count(mp) ? have : "none");
    }
    if (json) {
        hbmi_memprof_holds h;
        hbmi_memprof_holds_get(mp, &h);
        fputs("{\"file\":", f);
        hbmi_json_str(f, hbm_memprof_path(mp));
        fprintf(f, ",\"memory_profile\":%s,\"planes\":%zu,\"device_planes\":%zu,\"module_events\":%zu,"
                   "\"modules\":%zu,\"modules_planned\":%zu,\"allocators\":[",
                hbm_memprof_allocator_count(mp) ? "true" : "false", h.n_planes, h.n_device_planes,
                hbm_memprof_execution_count(mp), h.n_modules, h.n_planned);
        int first = 1;
        for (size_t a = 0; a < hbm_memprof_allocator_count(mp); a++) {
            if (only >= 0 && (size_t)only != a) continue;
            if (!first) fputc(',', f);
            first = 0;
            json_one(mp, hbm_memprof_allocator(mp, a), top, f);
        }
        fputs("]}\n", f);
        return ferror(f) ? hbmi_error(HBM_ERR_IO, "write error") : HBM_OK;
    }
    if (!hbm_memprof_allocator_count(mp)) what_it_holds(mp, f);
    if (only < 0 && hbm_memprof_allocator_count(mp) > 1) table_all(mp, f);
    for (size_t a = 0; a < hbm_memprof_allocator_count(mp); a++) {
        if (only >= 0 && (size_t)only != a) continue;
        if (a && only < 0) fputc('\n', f);
        text_one(mp, hbm_memprof_allocator(mp, a), top, width, ascii, f);
    }
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "write error") : HBM_OK;
}


/* --- the page ---------------------------------------------------------------------------- */

extern const char hbmi_asset_memory_profile_html[];
extern const size_t hbmi_asset_memory_profile_html_len;

typedef struct page_ctx {
    const hbm_memprof *mp;
    const char *data; /* --json's document */
    size_t len;
} page_ctx;

static hbm_status page_fill(void *ctx, const char *name, size_t n, FILE *f) {
    const page_ctx *c = ctx;
    if (hbmi_page_marker_is(name, n, "TITLE")) {
        for (const char *p = hbm_memprof_path(c->mp); *p; p++) {
            if (*p == '<') fputs("&lt;", f);
            else if (*p == '>') fputs("&gt;", f);
            else if (*p == '&') fputs("&amp;", f);
            else fputc(*p, f);
        }
    } else if (hbmi_page_marker_is(name, n, "DATA")) {
        /* '<' appears in JSON only inside strings, where \u003c says the same: no "</script>" */
        for (size_t i = 0; i < c->len; i++) {
            if (c->data[i] == '<') fputs("\\u003c", f);
            else fputc(c->data[i], f);
        }
    } else {
        return hbmi_error(HBM_ERR_CORRUPT, "memory profile page: unknown marker %.*s (a broken build)", (int)n, name);
    }
    return HBM_OK;
}

hbm_status hbm_memprof_html(const hbm_memprof *mp, int device, FILE *f) {
    if (!mp || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_memprof_html: NULL argument");
    char *data = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&data, &len);
    if (!m) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbm_status s = hbm_memprof_write(mp, device, 1, SIZE_MAX, 8, 0, m); /* every allocation at the peak */
    if (fclose(m) && !s) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    if (!s) {
        page_ctx c = {mp, data, len};
        s = hbmi_page_write(hbmi_asset_memory_profile_html, hbmi_asset_memory_profile_html_len, page_fill, &c, f);
    }
    free(data);
    if (!s && ferror(f)) s = hbmi_error(HBM_ERR_IO, "writing the memory profile page failed");
    return s;
}
