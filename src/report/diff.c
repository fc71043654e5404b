/* diff.c - hbm diff A B: two traces (snapshots, hbm traces, plans) side by side: the peak of
 * each, the difference, and what makes it: the buffers live at each peak grouped by op,
 * source line and category, matched between A and B, largest change first. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/size.h"
#include "report/view_internal.h"
#include "trace/trace_view.h"

typedef hbmi_contrib contrib;

static int contrib_key_cmp(const void *x, const void *y) {
    return strcmp(((const contrib *)x)->key, ((const contrib *)y)->key);
}

static int64_t delta(const contrib *c) { return (int64_t)c->bytes[1] - (int64_t)c->bytes[0]; }

static int contrib_delta_cmp(const void *x, const void *y) {
    const contrib *a = x, *b = y;
    int64_t da = delta(a), db = delta(b);
    uint64_t ma = da < 0 ? (uint64_t)-da : (uint64_t)da, mb = db < 0 ? (uint64_t)-db : (uint64_t)db;
    if (ma != mb) return ma > mb ? -1 : 1;
    uint64_t sa = a->bytes[0] + a->bytes[1], sb = b->bytes[0] + b->bytes[1];
    if (sa != sb) return sa > sb ? -1 : 1;
    return strcmp(a->key, b->key);
}

static const char *tag_op(const hbm_tag *tg) {
    return tg && tg->op_name && *tg->op_name ? tg->op_name : tg && tg->label && *tg->label ? tg->label : "(untagged)";
}

size_t hbmi_contrib_merge(hbmi_contrib *c, size_t m) {
    hbmi_qsort(c, m, sizeof *c, contrib_key_cmp);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (k && !strcmp(c[k - 1].key, c[i].key)) {
            for (int side = 0; side < 2; side++) {
                c[k - 1].bytes[side] += c[i].bytes[side];
                c[k - 1].count[side] += c[i].count[side];
            }
            hbmi_free(c[i].key);
            hbmi_free(c[i].site);
        } else {
            c[k++] = c[i];
        }
    }
    hbmi_qsort(c, k, sizeof *c, contrib_delta_cmp);
    return k;
}

const char *hbmi_contrib_op(const hbm_tag *tg) { return tag_op(tg); }

/* ---- source files as the program knows them -------------------------------------------
 * The same program run from two checkouts (/root/code/proj/m.py, /home/u/proj/m.py) must
 * meet at one site. A file under site-packages/ or dist-packages/ is named from its package
 * root (torch/_ops.py); any other by the fewest trailing path components that name at most
 * one file of each trace, so that a file of A and the file of B that ends the same way
 * share it, and two files of one trace never do. */

static int is_sep(char ch) { return ch == '/' || ch == '\\'; }

/* where the last k components of p start (p itself when it has no more) */
static const char *last_components(const char *p, size_t k) {
    const char *e = p + strlen(p);
    while (e > p && k) {
        e--;
        if (is_sep(*e) && e + 1 < p + strlen(p)) k--;
    }
    return k ? p : e + 1;
}

static int same_path(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (*a != *b && !(is_sep(*a) && is_sep(*b))) return 0;
    return !*a && !*b;
}

static const char *package_path(const char *p) {
    static const char *roots[] = {"site-packages", "dist-packages"};
    for (size_t r = 0; r < 2; r++)
        for (const char *q = strstr(p, roots[r]); q; q = strstr(q + 1, roots[r])) {
            size_t n = strlen(roots[r]);
            if ((q == p || is_sep(q[-1])) && is_sep(q[n]) && q[n + 1]) return q + n + 1;
        }
    return NULL;
}

typedef struct file_set {
    const char **v; /* distinct source files of one trace's peak */
    size_t n;
} file_set;

static size_t count_ending(const file_set *fs, const char *suffix) {
    size_t c = 0, ls = strlen(suffix);
    for (size_t i = 0; i < fs->n; i++) {
        size_t lf = strlen(fs->v[i]);
        if (lf >= ls && same_path(fs->v[i] + lf - ls, suffix) && (lf == ls || is_sep(fs->v[i][lf - ls - 1]))) c++;
    }
    return c;
}

/* The name of file f (of trace side) for grouping and for the table. */
static const char *program_path(const char *f, const file_set fs[2]) {
    const char *pkg = package_path(f);
    if (pkg) return pkg;
    for (size_t k = 1;; k++) {
        const char *suf = last_components(f, k);
        if (suf == f || (count_ending(&fs[0], suf) <= 1 && count_ending(&fs[1], suf) <= 1)) return suf;
    }
}

static int str_cmp(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }

static hbm_status files_of(const hbmi_view *v, file_set *fs) {
    fs->n = 0;
    fs->v = hbmi_calloc(v->n_at_peak + 1, sizeof *fs->v);
    if (!fs->v) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t k = 0; k < v->n_at_peak; k++) {
        const hbm_tag *tg = hbm_timeline_tag_at(v->tl, v->tl->buffers[v->at_peak[k]].tag);
        if (tg && tg->source_file && *tg->source_file) fs->v[fs->n++] = tg->source_file;
    }
    hbmi_qsort(fs->v, fs->n, sizeof *fs->v, str_cmp);
    size_t m = 0;
    for (size_t i = 0; i < fs->n; i++)
        if (!m || strcmp(fs->v[m - 1], fs->v[i])) fs->v[m++] = fs->v[i];
    fs->n = m;
    return HBM_OK;
}

/* "file:line" with the file as the program knows it */
static const char *site_of(const hbm_tag *tg, const file_set fs[2], char *buf, size_t cap) {
    buf[0] = 0;
    if (!tg || !tg->source_file) return buf;
    const char *f = program_path(tg->source_file, fs);
    if (tg->source_line > 0) snprintf(buf, cap, "%s:%d", f, tg->source_line);
    else snprintf(buf, cap, "%s", f);
    return buf;
}

/* The contributors of both peaks, merged by key and sorted by change. */
static hbm_status contributors(const hbmi_view v[2], const file_set fs[2], contrib **out, size_t *nout) {
    size_t n = v[0].n_at_peak + v[1].n_at_peak, m = 0;
    contrib *c = hbmi_calloc(n + 1, sizeof *c);
    if (!c) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbm_status s = HBM_OK;
    for (int side = 0; side < 2 && !s; side++) {
        for (size_t k = 0; k < v[side].n_at_peak && !s; k++) {
            const hbm_tl_buffer *b = &v[side].tl->buffers[v[side].at_peak[k]];
            const hbm_tag *tg = hbm_timeline_tag_at(v[side].tl, b->tag);
            char src[300], key[1024];
            snprintf(key, sizeof key, "%s\x1f%s\x1f%s", tag_op(tg), site_of(tg, fs, src, sizeof src),
                     tg ? hbm_category_str(tg->category) : "");
            if (!(c[m].key = hbmi_strdup(key))) {
                s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
                break;
            }
            c[m].tag = tg;
            c[m].site = hbmi_strdup(src);
            if (!c[m].site) {
                hbmi_free(c[m].key);
                s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
                break;
            }
            c[m].bytes[side] = b->size;
            c[m].count[side] = 1;
            m++;
        }
    }
    if (!s) m = hbmi_contrib_merge(c, m);
    if (s) {
        for (size_t i = 0; i < m; i++) hbmi_free(c[i].key), hbmi_free(c[i].site);
        hbmi_free(c);
        return s;
    }
    *out = c;
    *nout = m;
    return HBM_OK;
}

static void side_text(FILE *f, const char *which, const hbm_trace *t, const hbmi_view *v) {
    char a[32], b[32], name[80], w[64], l1[160], l2[96];
    hbmi_text_fit(name, sizeof name, t->name, 44, 1);
    fprintf(f, "%s  %s (%s%s%s)\n", which, name, t->source[0] ? t->source : "hbm", t->device[0] ? ", device " : "",
            t->device);
    snprintf(l1, sizeof l1, "   peak in use %s at %s", hbm_size_xla((int64_t)v->peak_use, a),
             hbmi_event_when(t, (int64_t)v->peak_i, v->peak_i < t->count ? t->events[v->peak_i].time_ns : 0, w, sizeof w));
    snprintf(l2, sizeof l2, "peak reserved %s, %zu buffers live at the peak", hbm_size_xla((int64_t)v->peak_res, b),
             v->n_at_peak);
    /* one line when it fits 100 columns (a step's instruction name makes it longer) */
    if (strlen(l1) + 2 + strlen(l2) <= 100) fprintf(f, "%s, %s\n", l1, l2);
    else fprintf(f, "%s,\n   %s\n", l1, l2);
}

/* Row i's site cut to the table's 33 columns in the middle, keeping the first character in
 * which it differs from any other shown row's site that the same cut would print alike:
 * two sites never read the same. */
enum { SITE_COLS = 33 };
static void site_cut(const contrib *c, size_t n, size_t i, char *out, size_t cap) {
    const char *me = *c[i].site ? c[i].site : "-";
    size_t len = strlen(me), head = 0;
    hbmi_text_fit(out, cap, me, SITE_COLS, 1);
    if (len <= SITE_COLS) return;
    for (size_t j = 0; j < n; j++) {
        char other[128];
        if (j == i || !strcmp(c[j].site, me)) continue;
        if (strcmp(hbmi_text_fit(other, sizeof other, c[j].site, SITE_COLS, 1), out)) continue;
        size_t d = 0;
        while (me[d] && me[d] == c[j].site[d]) d++;
        if (d + 1 > head) head = d + 1;
    }
    if (!head) return;
    size_t keep = SITE_COLS - 3;
    if (head + 4 <= keep) snprintf(out, cap, "%.*s...%s", (int)head, me, me + len - (keep - head));
    else snprintf(out, cap, "%.*s...", (int)keep, me); /* a difference this deep: the start, up to it */
}

/* "+1.00GiB", "-512B", "0B" */
static const char *signed_size(int64_t d, char *buf, size_t cap) {
    char h[32];
    hbm_size_xla(d < 0 ? -d : d, h);
    snprintf(buf, cap, "%s%s", d > 0 ? "+" : d < 0 ? "-" : "", h);
    return buf;
}

static void change_line(FILE *f, const char *what, uint64_t a, uint64_t b) {
    char d[40];
    int64_t x = (int64_t)b - (int64_t)a;
    fprintf(f, "  %s %s", what, signed_size(x, d, sizeof d));
    if (a) fprintf(f, " (%+.1f %%)", 100.0 * (double)x / (double)a);
    fputc('\n', f);
}

static void side_json(FILE *f, const hbm_trace *t, const hbmi_view *v) {
    fputc('{', f);
    hbmi_json_trace_id(f, t);
    fprintf(f,
            ", \"peak_bytes_in_use\": %" PRIu64 ", \"peak_event\": %" PRId64 ", \"peak_bytes_reserved\": %" PRIu64
            ", \"live_at_peak\": %zu, \"live_at_peak_bytes\": %" PRIu64,
            v->peak_use, hbmi_event_number(t, (int64_t)v->peak_i), v->peak_res,
            v->n_at_peak, v->at_peak_bytes);
    if (v->peak_use) hbmi_json_step(f, t, (int64_t)v->peak_i, "peak");
    fputc('}', f);
}

hbm_status hbm_diff_write(const hbm_trace *a, const hbm_trace *b, int top, int json, FILE *f) {
    if (!a || !b || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_diff_write: NULL argument");
    hbmi_view v[2];
    hbm_status s = hbmi_view_build(a, &v[0]);
    if (s) return s;
    if ((s = hbmi_view_build(b, &v[1]))) {
        hbmi_view_free(&v[0]);
        return s;
    }
    contrib *c = NULL;
    size_t n = 0;
    file_set fs[2] = {{0}};
    if (!(s = files_of(&v[0], &fs[0])) && !(s = files_of(&v[1], &fs[1]))) s = contributors(v, fs, &c, &n);
    size_t show = top < 0 || (size_t)top > n ? n : (size_t)top;
    if (!s && json) {
        fputs("{\"a\": ", f);
        side_json(f, a, &v[0]);
        fputs(", \"b\": ", f);
        side_json(f, b, &v[1]);
        fprintf(f, ", \"delta_bytes_in_use\": %" PRId64 ", \"delta_bytes_reserved\": %" PRId64 ", \"contributors\": [",
                (int64_t)v[1].peak_use - (int64_t)v[0].peak_use, (int64_t)v[1].peak_res - (int64_t)v[0].peak_res);
        for (size_t i = 0; i < show; i++) {
            fputs(i ? ", {\"op\": " : "{\"op\": ", f);
            hbmi_json_str(f, tag_op(c[i].tag));
            fputs(", \"source\": ", f);
            hbmi_json_str(f, c[i].site);
            fputs(", \"category\": ", f);
            hbmi_json_str(f, c[i].tag ? hbm_category_str(c[i].tag->category) : "");
            fprintf(f,
                    ", \"a_bytes\": %" PRIu64 ", \"b_bytes\": %" PRIu64 ", \"delta_bytes\": %" PRId64
                    ", \"a_buffers\": %" PRIu64 ", \"b_buffers\": %" PRIu64 "}",
                    c[i].bytes[0], c[i].bytes[1], delta(&c[i]), c[i].count[0], c[i].count[1]);
        }
        fprintf(f, "], \"contributors_total\": %zu}\n", n);
    } else if (!s) {
        side_text(f, "A", a, &v[0]);
        side_text(f, "B", b, &v[1]);
        fputs("B - A at the peaks:\n", f);
        change_line(f, "in use  ", v[0].peak_use, v[1].peak_use);
        change_line(f, "reserved", v[0].peak_res, v[1].peak_res);
        fprintf(f, "\nWhat makes it: buffers live at each peak by op and source line, largest change first\n"
                   "(top %zu of %zu):\n", show, n);
        if (show)
            fprintf(f, "  %10s %10s %10s  %-30s %s\n", "change", "in A", "in B", "op", "source");
        for (size_t i = 0; i < show; i++) {
            char d[40], x[32], y[32], op[128], src[128];
            hbmi_text_fit(op, sizeof op, tag_op(c[i].tag), 30, 0);
            site_cut(c, show, i, src, sizeof src);
            fprintf(f, "  %10s %10s %10s  %-30s %s\n", signed_size(delta(&c[i]), d, sizeof d),
                    hbm_size_xla((int64_t)c[i].bytes[0], x), hbm_size_xla((int64_t)c[i].bytes[1], y), op, src);
        }
    }
    for (size_t i = 0; i < n; i++) hbmi_free(c[i].key), hbmi_free(c[i].site);
    hbmi_free(c);
    hbmi_free(fs[0].v);
    hbmi_free(fs[1].v);
    hbmi_view_free(&v[0]);
    hbmi_view_free(&v[1]);
    if (s) return s;
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the diff failed") : HBM_OK;
}
