/* pack_report.c - a packing run as text and as JSON (hbm_pack_report_write), and the
 * progress line of a long search: what `hbm pack` prints; the CLI only parses and calls. */
#include <inttypes.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/pack.h"
#include "hbm/size.h"

static void write_json(const hbm_pack_report *rep, FILE *f, double over) {
    const hbm_pack_options *o = rep->o;
    const hbm_pack_result *r = rep->r;
    fprintf(f, "{\"file\": ");
    hbmi_json_write_str(f, rep->file, 0);
    if (rep->window)
        fprintf(f, ", \"relaxation\": {\"window\": [%lld, %lld], \"of_buffers\": %zu}", (long long)rep->window_from,
                (long long)rep->window_to, rep->whole);
    if (rep->above)
        fprintf(f, ", \"relaxation\": {\"above\": %llu, \"of_buffers\": %zu}", (unsigned long long)rep->above, rep->whole);
    fprintf(f, ", \"buffers\": %zu, \"algorithm\": \"%s\", \"capacity\": %llu, \"minimize\": %s, "
            "\"lower_bound\": %llu, \"feasible\": %s, \"extent\": %llu, \"over_lower_bound_pct\": %.3f, "
            "\"proven\": %s, \"timed_out\": %s, \"seconds\": %.6f, \"nodes\": %llu}\n",
            rep->tl->count, hbm_pack_algo_str(o->algo), (unsigned long long)o->capacity, o->minimize ? "true" : "false",
            (unsigned long long)r->lower_bound, r->feasible ? "true" : "false", (unsigned long long)r->extent,
            r->feasible ? over : 0.0, r->proven ? "true" : "false", r->timed_out ? "true" : "false", r->seconds,
            (unsigned long long)r->nodes);
}

static void write_text(const hbm_pack_report *rep, FILE *f, double over) {
    const hbm_pack_options *o = rep->o;
    const hbm_pack_result *r = rep->r;
    char e1[32], e2[32];
    if (rep->window || rep->above) {
        fprintf(f, "%s: a relaxation (", rep->file);
        if (rep->window) fprintf(f, "window %s", rep->window);
        else fprintf(f, "the times with at least %llu bytes live", (unsigned long long)rep->above);
        fprintf(f, "): bounds proven here hold for the file, packings do not\nrelaxation: %zu of %zu buffers",
                rep->tl->count, rep->whole);
    } else {
        fprintf(f, "%s: %zu buffers", rep->file, rep->tl->count);
    }
    fprintf(f, ", lower bound %llu (%s)\n", (unsigned long long)r->lower_bound, hbm_size_human(r->lower_bound, e1));
    const char *ct = rep->capacity_text;
    if (ct && strspn(ct, "0123456789") != strlen(ct)) /* the size understood */
        fprintf(f, "capacity %s = %llu bytes (%s)\n", ct, (unsigned long long)o->capacity, hbm_size_human(o->capacity, e2));
    if (r->feasible) {
        fprintf(f, "%s: extent %llu (%s), +%.2f%% over the lower bound", hbm_pack_algo_str(o->algo),
                (unsigned long long)r->extent, hbm_size_human(r->extent, e2), over);
        if (o->capacity) fprintf(f, ", fits %llu", (unsigned long long)o->capacity);
        if (r->proven) fprintf(f, ", optimal (proven)");
        else if (o->minimize) fprintf(f, ", not proven%s", r->timed_out ? " (timed out)" : "");
        fprintf(f, "\n  %.3f s", r->seconds); /* (a line of its own: the rest is the same every run) */
        if (r->nodes) fprintf(f, ", %llu nodes", (unsigned long long)r->nodes);
        fprintf(f, "\n");
    } else {
        fprintf(f, "%s: no packing within %llu: %s (%.3f s)\n", hbm_pack_algo_str(o->algo),
                (unsigned long long)o->capacity,
                r->proven ? "proven infeasible" : (r->timed_out ? "none found before the timeout" : "none found"),
                r->seconds);
        if (r->proven) fprintf(f, "  at least %llu bytes are needed\n", (unsigned long long)r->lower_bound);
    }
}

static double over_bound(const hbm_pack_result *r) {
    return r->lower_bound ? 100.0 * ((double)r->extent - (double)r->lower_bound) / (double)r->lower_bound : 0;
}

static hbm_status emit_text(const void *c, FILE *f) {
    const hbm_pack_report *rep = c;
    write_text(rep, f, over_bound(rep->r));
    return HBM_OK;
}

hbm_status hbm_pack_report_write(const hbm_pack_report *rep, FILE *f, int json) {
    if (!rep || !rep->tl || !rep->o || !rep->r || !f)
        return hbmi_error(HBM_ERR_INVALID, "hbm_pack_report_write: NULL argument");
    hbm_status s = HBM_OK;
    if (json) write_json(rep, f, over_bound(rep->r));
    else if (rep->width) s = hbmi_emit_fitted(emit_text, rep, f, rep->width); /* lines fitted to --width */
    else write_text(rep, f, over_bound(rep->r));
    if (s) return s;
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "pack: write error") : HBM_OK;
}

void hbm_pack_progress_line(void *file, const hbm_pack_progress *p) {
    FILE *f = file;
    if (!f || !p) return;
    char b1[32] = "-", b2[32];
    if (p->best != UINT64_MAX) snprintf(b1, sizeof b1, "%llu", (unsigned long long)p->best);
    snprintf(b2, sizeof b2, "%llu", (unsigned long long)p->lower_bound);
    fprintf(f, "\r  %7.1f s  %12llu nodes  best %s  bound %s   ", p->seconds, (unsigned long long)p->nodes, b1, b2);
    fflush(f);
}

void hbm_pack_progress_end(FILE *f, const hbm_pack_result *r) {
    if (f && r && r->seconds >= 0.5) fprintf(f, "\r%70s\r", "");
}
