/* fleet_report.c - the fleet view rendered: a terminal table that fits 100 columns however
 * many ranks (the worst and the outliers first, the rest summarised), JSON, and one
 * self-contained HTML page (src/report/html/fleet.html); and the summary document of one
 * input. The figures come from the engine (src/api/fleet.c). */
#include <inttypes.h>
#include <string.h>

#include "hbm/size.h"
#include "report/fleet_model.h"
#include "report/view_internal.h"

/* --- JSON ----------------------------------------------------------------------------- */

static void jstr(FILE *f, const char *s, unsigned how) { hbmi_json_write_str(f, s ? s : "", how); }

static void site_json(FILE *f, const hbmi_site *s, unsigned how) {
    fputs("{\"op\": ", f);
    jstr(f, s->op, how);
    fputs(", \"source\": ", f);
    jstr(f, s->source, how);
    fputs(", \"category\": ", f);
    jstr(f, s->category, how);
    fprintf(f, ", \"bytes\": %" PRIu64 ", \"buffers\": %" PRIu64 "}", s->bytes, s->buffers);
}

/* The figures of a rank read (the summary's and the fleet's ranks share them). */
static void figures_json(FILE *f, const hbmi_rank *r, long top, unsigned how) {
    fputs("\"device\": ", f);
    jstr(f, r->device, how);
    if (r->frag_stated) fputs(", \"figures\": \"xprof\"", f); /* a memory profile's: XProf's definitions */
    fprintf(f,
            ", \"device_index\": %d, \"events\": %" PRIu64 ", \"allocs\": %" PRIu64 ", \"frees\": %" PRIu64
            ", \"ooms\": %" PRIu64 ", \"peak_bytes_in_use\": %" PRIu64 ", \"peak_event\": %" PRId64
            ", \"peak_bytes_reserved\": %" PRIu64 ", \"reserved_at_peak_bytes\": %" PRIu64
            ", \"fragmentation_at_peak\": %.6f, \"first_oom_event\": %" PRId64 ", \"live_at_peak\": %" PRIu64
            ", \"live_at_peak_bytes\": %" PRIu64 ", \"sites_total\": %zu, \"sites\": [",
            r->device_index, r->events, r->allocs, r->frees, r->ooms, r->peak_use, r->peak_event, r->peak_res,
            r->res_at_peak, hbmi_rank_frag(r), r->first_oom_event, r->live_at_peak, r->live_at_peak_bytes, r->nsites);
    for (size_t i = 0; i < r->nsites && (top < 0 || i < (size_t)top); i++) {
        if (i) fputs(", ", f);
        site_json(f, &r->sites[i], how);
    }
    fputc(']', f);
}

void hbmi_summary_write(FILE *f, const char *path, const hbmi_rank *r, size_t n) {
    fprintf(f, "{\"hbm_summary\": %d, \"path\": ", HBMI_SUMMARY_VERSION);
    jstr(f, path, HBMI_JSON_NL);
    fputs(", \"ranks\": [", f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n  {" : "\n  {", f);
        figures_json(f, &r[i], -1, HBMI_JSON_NL);
        fputc('}', f);
    }
    fputs("]}\n", f);
}

static void rank_json(FILE *f, const hbm_fleet *fl, const hbmi_rank *r, unsigned how) {
    fputs("{\"name\": ", f);
    jstr(f, r->name, how);
    fputs(", \"path\": ", f);
    jstr(f, r->path, how);
    if (r->error) {
        fputs(", \"error\": ", f);
        jstr(f, r->error, how);
        fputc('}', f);
        return;
    }
    fputs(", ", f);
    figures_json(f, r, fl->o.top, how);
    fprintf(f, ", \"group\": %d, \"outlier\": %s, \"over_median_in_use\": %.6f, \"over_median_reserved\": %.6f", r->group,
            r->outlier ? "true" : "false", r->over[0], r->over[1]);
    if (r->page) {
        fputs(", \"page\": ", f);
        jstr(f, r->page, how);
    }
    fputc('}', f);
}

static void stat_json(FILE *f, const char *key, hbmi_stat s, int frac) {
    if (frac) fprintf(f, "\"%s\": {\"min\": %.6f, \"median\": %.6f, \"max\": %.6f}", key, s.min, s.median, s.max);
    else fprintf(f, "\"%s\": {\"min\": %.0f, \"median\": %.0f, \"max\": %.0f}", key, s.min, s.median, s.max);
}

/* a contributor's key: op \x1f source \x1f category */
static void key_parts(const char *key, char *op, char *src, char *cat, size_t cap) {
    const char *a = strchr(key, '\x1f'), *b = a ? strchr(a + 1, '\x1f') : NULL;
    if (!a || !b) {
        snprintf(op, cap, "%s", key);
        src[0] = cat[0] = 0;
        return;
    }
    snprintf(op, cap, "%.*s", (int)(a - key), key);
    snprintf(src, cap, "%.*s", (int)(b - a - 1), a + 1);
    snprintf(cat, cap, "%s", b + 1);
}

static void fleet_json(const hbm_fleet *fl, FILE *f, unsigned how) {
    fprintf(f,
            "{\"hbm_fleet\": 1, \"inputs\": %zu, \"ranks_total\": %zu, \"read\": %zu, \"failed\": %zu, \"margin\": %.6f"
            ", \"group_tolerance\": %.6f",
            fl->inputs, fl->n, fl->nok, fl->nfailed, fl->o.margin, fl->o.group_tolerance);
    if (fl->nok) {
        fputs(", \"stats\": {", f);
        stat_json(f, "peak_bytes_in_use", fl->use, 0);
        fputs(", ", f);
        stat_json(f, "peak_bytes_reserved", fl->res, 0);
        fputs(", ", f);
        stat_json(f, "fragmentation_at_peak", fl->frag, 1);
        fputs(", ", f);
        stat_json(f, "ooms", fl->ooms, 0);
        fputs("}, \"worst\": ", f);
        jstr(f, fl->ranks[fl->worst].name, how);
        fputs(", \"median\": ", f);
        jstr(f, fl->ranks[fl->median].name, how);
        fputs(", \"outliers\": [", f);
        int first = 1;
        for (size_t k = fl->nok; k-- > 0;) {
            const hbmi_rank *r = &fl->ranks[fl->order[k]];
            if (!r->outlier) continue;
            fputs(first ? "" : ", ", f);
            first = 0;
            jstr(f, r->name, how);
        }
        fputs("], \"groups\": [", f);
        for (size_t g = 0; g < fl->ngroups; g++) {
            const hbmi_group *gr = &fl->groups[g];
            fprintf(f, "%s{\"group\": %zu, \"count\": %zu, \"min_peak_bytes_in_use\": %" PRIu64
                       ", \"max_peak_bytes_in_use\": %" PRIu64 ", \"ranks\": [",
                    g ? ", " : "", g + 1, gr->count, gr->lo, gr->hi);
            for (size_t k = 0; k < gr->count; k++) {
                if (k) fputs(", ", f);
                jstr(f, fl->ranks[fl->order[gr->first + k]].name, how);
            }
            fputs("]}", f);
        }
        const hbmi_rank *a = &fl->ranks[fl->median], *b = &fl->ranks[fl->worst];
        fputs("], \"diff\": {\"a\": ", f);
        jstr(f, a->name, how);
        fputs(", \"b\": ", f);
        jstr(f, b->name, how);
        fprintf(f, ", \"delta_bytes_in_use\": %" PRId64 ", \"delta_bytes_reserved\": %" PRId64 ", \"contributors\": [",
                (int64_t)b->peak_use - (int64_t)a->peak_use, (int64_t)b->peak_res - (int64_t)a->peak_res);
        size_t show = fl->ndiff < (size_t)fl->o.top ? fl->ndiff : (size_t)fl->o.top;
        for (size_t i = 0; i < show; i++) {
            const hbmi_contrib *c = &fl->diff[i];
            char op[1024], src[1024], cat[1024];
            key_parts(c->key, op, src, cat, sizeof op);
            fputs(i ? ", {\"op\": " : "{\"op\": ", f);
            jstr(f, op, how);
            fputs(", \"source\": ", f);
            jstr(f, src, how);
            fputs(", \"category\": ", f);
            jstr(f, cat, how);
            fprintf(f,
                    ", \"a_bytes\": %" PRIu64 ", \"b_bytes\": %" PRIu64 ", \"delta_bytes\": %" PRId64 ", \"a_buffers\": %" PRIu64
                    ", \"b_buffers\": %" PRIu64 "}",
                    c->bytes[0], c->bytes[1], (int64_t)c->bytes[1] - (int64_t)c->bytes[0], c->count[0], c->count[1]);
        }
        fprintf(f, "], \"contributors_total\": %zu}", fl->ndiff);
    }
    fputs(", \"ranks\": [", f);
    for (size_t i = 0; i < fl->n; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        rank_json(f, fl, &fl->ranks[i], how);
    }
    fputs("]}\n", f);
}

/* --- text ----------------------------------------------------------------------------- */

/* "+12.3%"; from +1000% on, the ratio to the median ("698x"), which fits the column */
static const char *pct(double x, char *buf, size_t cap) {
    if (x >= 10) snprintf(buf, cap, "%.0fx", x + 1);
    else snprintf(buf, cap, "%+.1f%%", 100.0 * x);
    return buf;
}

static void stat_line(FILE *f, const char *what, hbmi_stat s, int kind) {
    char a[32], b[32], c[32], d[32];
    if (kind == 0) {
        hbm_size_xla((int64_t)s.median, a);
        hbm_size_xla((int64_t)s.min, b);
        hbm_size_xla((int64_t)s.max, c);
    } else if (kind == 1) {
        snprintf(a, sizeof a, "%.1f%%", 100 * s.median);
        snprintf(b, sizeof b, "%.1f%%", 100 * s.min);
        snprintf(c, sizeof c, "%.1f%%", 100 * s.max);
    } else {
        snprintf(a, sizeof a, "%.0f", s.median);
        snprintf(b, sizeof b, "%.0f", s.min);
        snprintf(c, sizeof c, "%.0f", s.max);
    }
    if (kind == 0 && s.median > 0) snprintf(d, sizeof d, "%.1f%%", 100.0 * (s.max - s.min) / s.median);
    else snprintf(d, sizeof d, "-");
    fprintf(f, "  %-24s %12s %12s %12s %12s\n", what, a, b, c, d);
}

#define NAME_W 26
#define SITE_W 24

/* The folder every rank's name starts with ("dir/"), shown once above the table; 0 when none. */
static size_t common_dir(const hbm_fleet *fl) {
    const char *first = NULL;
    size_t n = 0;
    for (size_t i = 0; i < fl->n; i++) {
        const char *s = fl->ranks[i].name;
        if (!first) {
            first = s;
            n = strlen(s);
            continue;
        }
        size_t k = 0;
        while (k < n && s[k] == first[k]) k++;
        n = k;
    }
    while (n && first[n - 1] != '/') n--;
    return n;
}

static void rank_row(FILE *f, const hbm_fleet *fl, const hbmi_rank *r, size_t idx, size_t cut) {
    char mark[3] = "  ", name[4 * NAME_W + 8], u[32], v[32], fr[16], over[24], g[12], site[4 * SITE_W + 48], raw[700];
    mark[0] = idx == fl->worst ? 'W' : idx == fl->median ? 'M' : ' ';
    mark[1] = r->outlier ? '!' : ' ';
    hbmi_text_fit(name, sizeof name, r->name + cut, NAME_W, 1);
    snprintf(fr, sizeof fr, "%.1f%%", 100 * hbmi_rank_frag(r));
    snprintf(g, sizeof g, "G%d", r->group);
    if (r->nsites) {
        char sz[32], where[4 * SITE_W + 8];
        const hbmi_site *s = &r->sites[0];
        hbm_size_xla((int64_t)s->bytes, sz);
        const char *w = *s->source ? s->source : s->op, *slash = *s->source ? strrchr(w, '/') : NULL;
        hbmi_text_fit(where, sizeof where, slash ? slash + 1 : w, SITE_W - 1 - (int)strlen(sz), 1); /* the file's name */
        snprintf(site, sizeof site, "%s %s", sz, where);
        (void)raw;
    } else {
        snprintf(site, sizeof site, "-");
    }
    fprintf(f, "%s %-*s %9s %9s %5s %4" PRIu64 " %4s %7s  %s\n", mark, NAME_W, name, hbm_size_xla((int64_t)r->peak_use, u),
            hbm_size_xla((int64_t)r->peak_res, v), fr, r->ooms, g, pct(r->over[0], over, sizeof over), site);
}

static void text_ranks(const hbm_fleet *fl, FILE *f) {
    size_t limit = fl->o.top > 0 ? (size_t)fl->o.top : 1, shown = 0;
    char *listed = hbmi_calloc(fl->n + 1, 1);
    if (!listed) return;
    size_t cut = common_dir(fl);
    if (cut) fprintf(f, "\nranks in %.*s\n", (int)cut, fl->ranks[0].name);
    fprintf(f, "%s   %-*s %9s %9s %5s %4s %4s %7s  %s\n", cut ? "" : "\n", NAME_W, "rank", "in use", "reserved", "frag", "OOMs", "grp",
            "vs med", "largest at its peak");
    /* the worst, the outliers (largest first), ranks with OOMs, then the median rank */
    for (int pass = 0; pass < 4; pass++) {
        for (size_t k = fl->nok; k-- > 0 && shown < limit;) {
            size_t i = fl->order[k];
            const hbmi_rank *r = &fl->ranks[i];
            int want = pass == 0 ? i == fl->worst : pass == 1 ? r->outlier != 0 : pass == 2 ? r->ooms > 0 : i == fl->median;
            if (!want || listed[i]) continue;
            listed[i] = 1;
            shown++;
            rank_row(f, fl, r, i, cut);
        }
    }
    size_t rest = fl->nok - shown, out_rest = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t k = 0; k < fl->nok; k++) {
        const hbmi_rank *r = &fl->ranks[fl->order[k]];
        if (listed[fl->order[k]]) continue;
        out_rest += r->outlier != 0;
        if (r->peak_use < lo) lo = r->peak_use;
        if (r->peak_use > hi) hi = r->peak_use;
    }
    if (rest) {
        char a[32], b[32];
        fprintf(f, "   ... %zu more rank%s, in use %s - %s", rest, rest == 1 ? "" : "s", hbm_size_xla((int64_t)lo, a),
                hbm_size_xla((int64_t)hi, b));
        if (out_rest) fprintf(f, " (%zu of them outliers: --top shows more)\n", out_rest);
        else fprintf(f, " (none more than %.1f%% over the median)\n", 100 * fl->o.margin);
    }
    fputs("   (W the worst rank, M the median rank, ! an outlier; vs med: peak in use over the median)\n", f);
    hbmi_free(listed);
}

static void text_failed(const hbm_fleet *fl, FILE *f) {
    if (!fl->nfailed) return;
    fprintf(f, "\n%zu input%s could not be read:\n", fl->nfailed, fl->nfailed == 1 ? "" : "s");
    size_t shown = 0, limit = fl->o.top > 0 ? (size_t)fl->o.top : 1;
    for (size_t i = 0; i < fl->n; i++) {
        const hbmi_rank *r = &fl->ranks[i];
        if (!r->error) continue;
        if (shown++ == limit) {
            fprintf(f, "   ... and %zu more\n", fl->nfailed - limit);
            break;
        }
        char name[400], why[400];
        const char *e = r->error;
        size_t pl = strlen(r->name);
        if (!strncmp(e, r->name, pl) && !strncmp(e + pl, ": ", 2)) e += pl + 2; /* the path once */
        hbmi_text_fit(name, sizeof name, r->name, 96, 1);
        hbmi_text_fit(why, sizeof why, e, 95, 0);
        fprintf(f, " x %s\n     %s\n", name, why);
    }
}

static void text_groups(const hbm_fleet *fl, FILE *f) {
    fprintf(f, "\n%zu group%s (ranks by peak in use; one joins a group while within %.1f%% of its smallest):\n",
            fl->ngroups, fl->ngroups == 1 ? "" : "s", 100 * fl->o.group_tolerance);
    size_t limit = fl->o.top > 0 ? (size_t)fl->o.top : 1;
    for (size_t g = 0; g < fl->ngroups && g < limit; g++) {
        const hbmi_group *gr = &fl->groups[g];
        char a[32], b[32], first[200], line[400];
        hbmi_text_fit(first, sizeof first, fl->ranks[fl->order[gr->first]].name, 34, 1);
        snprintf(line, sizeof line, "  G%-3zu %5zu rank%s %10s - %-10s %s%s", g + 1, gr->count, gr->count == 1 ? " " : "s",
                 hbm_size_xla((int64_t)gr->lo, a), hbm_size_xla((int64_t)gr->hi, b), first, gr->count > 1 ? ", ..." : "");
        fprintf(f, "%s\n", line);
    }
    if (fl->ngroups > limit) fprintf(f, "  ... and %zu more groups\n", fl->ngroups - limit);
}

static void text_diff(const hbm_fleet *fl, FILE *f) {
    const hbmi_rank *a = &fl->ranks[fl->median], *b = &fl->ranks[fl->worst];
    char an[400], bn[400];
    hbmi_text_fit(an, sizeof an, a->name, 96, 1);
    hbmi_text_fit(bn, sizeof bn, b->name, 96, 1);
    if (fl->worst == fl->median) {
        fprintf(f, "\none rank read: no median rank to compare with\n");
        return;
    }
    size_t show = fl->ndiff < (size_t)fl->o.top ? fl->ndiff : (size_t)fl->o.top;
    char d[40], x[32];
    int64_t du = (int64_t)b->peak_use - (int64_t)a->peak_use;
    hbm_size_xla(du < 0 ? -du : du, x);
    snprintf(d, sizeof d, "%s%s", du > 0 ? "+" : du < 0 ? "-" : "", x);
    fprintf(f, "\nThe worst rank against the median rank (hbm diff M W):\n  M %s\n  W %s\n", an, bn);
    fprintf(f, "in use %s at the peaks; the buffers live at each peak by op and source line, largest\n"
               "change first (top %zu of %zu):\n",
            d, show, fl->ndiff);
    if (show) fprintf(f, "  %11s %10s %10s  %-30s %s\n", "change", "median", "worst", "op", "source");
    for (size_t i = 0; i < show; i++) {
        const hbmi_contrib *c = &fl->diff[i];
        char op[1024], src[1024], cat[1024], opf[128], srcf[128], y[32], z[32];
        key_parts(c->key, op, src, cat, sizeof op);
        int64_t dd = (int64_t)c->bytes[1] - (int64_t)c->bytes[0];
        hbm_size_xla(dd < 0 ? -dd : dd, x);
        snprintf(d, sizeof d, "%s%s", dd > 0 ? "+" : dd < 0 ? "-" : "", x);
        hbmi_text_fit(opf, sizeof opf, op, 30, 0);
        hbmi_text_fit(srcf, sizeof srcf, *src ? src : "-", 32, 1);
        fprintf(f, "  %11s %10s %10s  %-30s %s\n", d, hbm_size_xla((int64_t)c->bytes[0], y),
                hbm_size_xla((int64_t)c->bytes[1], z), opf, srcf);
    }
}

static void fleet_text(const hbm_fleet *fl, FILE *f) {
    fprintf(f, "%s%zu rank%s from %zu input%s", fl->o.title ? fl->o.title : "", fl->n, fl->n == 1 ? "" : "s", fl->inputs,
            fl->inputs == 1 ? "" : "s");
    fprintf(f, ", %zu read, %zu could not be read (%d thread%s, %.2fs)\n", fl->nok, fl->nfailed, fl->jobs,
            fl->jobs == 1 ? "" : "s", fl->seconds);
    if (fl->nok) {
        fprintf(f, "\n  %-24s %12s %12s %12s %12s\n", "across ranks", "median", "min", "max", "max-min");
        stat_line(f, "peak in use", fl->use, 0);
        stat_line(f, "peak reserved", fl->res, 0);
        stat_line(f, "fragmentation at peak", fl->frag, 1);
        stat_line(f, "OOMs", fl->ooms, 2);
        size_t nout = 0;
        for (size_t i = 0; i < fl->n; i++) nout += fl->ranks[i].outlier != 0;
        fprintf(f, "\n%zu outlier%s: more than %.1f%% over the median peak in use or peak reserved\n", nout,
                nout == 1 ? "" : "s", 100 * fl->o.margin);
        text_ranks(fl, f);
    }
    text_failed(fl, f);
    if (fl->nok) {
        text_groups(fl, f);
        text_diff(fl, f);
    }
}

/* --- HTML ----------------------------------------------------------------------------- */

extern const char hbmi_asset_fleet_html[];
extern const size_t hbmi_asset_fleet_html_len;

typedef struct page_ctx {
    const hbm_fleet *fl;
} page_ctx;

static hbm_status fill(void *ctx, const char *name, size_t n, FILE *f) {
    const hbm_fleet *fl = ((page_ctx *)ctx)->fl;
    if (hbmi_page_marker_is(name, n, "TITLE")) {
        char t[64];
        snprintf(t, sizeof t, "%zu ranks", fl->n);
        for (const char *p = fl->o.title ? fl->o.title : t; *p; p++) {
            if (*p == '<') fputs("&lt;", f);
            else if (*p == '>') fputs("&gt;", f);
            else if (*p == '&') fputs("&amp;", f);
            else fputc(*p, f);
        }
    } else if (hbmi_page_marker_is(name, n, "DATA")) {
        fleet_json(fl, f, HBMI_JSON_SCRIPT);
    } else if (hbmi_page_marker_is(name, n, "PAGES")) {
        const char *p = fl->o.pages ? strrchr(fl->o.pages, '/') : NULL;
        hbmi_json_write_str(f, fl->o.pages ? (p ? p + 1 : fl->o.pages) : "", HBMI_JSON_SCRIPT);
    } else {
        return hbmi_error(HBM_ERR_CORRUPT, "fleet page: unknown marker %.*s (a broken build)", (int)n, name);
    }
    return HBM_OK;
}

hbm_status hbm_fleet_write(const hbm_fleet *fl, hbm_fleet_form form, FILE *f) {
    if (!fl || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_fleet_write: NULL argument");
    hbm_status s = HBM_OK;
    if (form == HBM_FLEET_JSON) fleet_json(fl, f, HBMI_JSON_NL);
    else if (form == HBM_FLEET_TEXT) fleet_text(fl, f);
    else if (form == HBM_FLEET_HTML) {
        page_ctx c = {fl};
        s = hbmi_page_write(hbmi_asset_fleet_html, hbmi_asset_fleet_html_len, fill, &c, f);
    } else
        return hbmi_error(HBM_ERR_INVALID, "hbm_fleet_write: form %d is none of text (0), JSON (1), HTML (2)", (int)form);
    if (s) return s;
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the fleet view failed") : HBM_OK;
}
