/* fleet.c - many ranks at once: each input summarised on its own thread (a thread holds one
 * file at a time and keeps only the summary of its devices), then reduced in the caller:
 * the figures' median and spread, outliers, groups, and the worst rank against the median
 * one (hbm diff's contributors, from the two summaries). docs/fleet.md. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hbm/file.h"
#include "hbm/proto.h"
#include "hbm/trace.h"
#include "hbm/view.h"
#include "api/fleet_read.h"
#include "trace/trace_view.h"

void hbm_fleet_options_default(hbm_fleet_options *o) {
    memset(o, 0, sizeof *o);
    o->margin = 0.10;
    o->group_tolerance = 0.02;
    o->top = 15;
}

/* --- one input ------------------------------------------------------------------------ */

typedef struct input_result {
    hbmi_rank *r;
    size_t n;
} input_result;

static hbm_status rank_page(const hbm_fleet_options *o, const hbm_trace *t, const hbm_memprof *mp, int mp_device,
                            size_t input, size_t dev, hbmi_rank *r) {
    char name[64], path[4200];
    snprintf(name, sizeof name, "rank-%zu-%zu.html", input, dev);
    snprintf(path, sizeof path, "%s/%s", o->pages, name);
    hbm_output out;
    hbm_status s = hbm_output_open(&out, path);
    if (s) return s;
    hbm_view_options vo;
    hbm_view_options_default(&vo);
    if ((s = mp ? hbm_memprof_html(mp, mp_device, out.f) : hbm_view_html(t, &vo, out.f))) {
        hbm_output_abort(&out);
        return s;
    }
    if ((s = hbm_output_commit(&out))) return s;
    return (r->page = hbmi_strdup(name)) ? HBM_OK : hbmi_error(HBM_ERR_NOMEM, "out of host memory");
}

/* A profile's ranks: one per allocator of its memory profile, in XProf's order (by name),
 * each page the memory profile's page of that allocator (hbm view --html PROFILE's). */
static hbm_status memprof_ranks(const hbm_fleet_options *o, hbm_memprof *mp, const char *path, size_t input,
                                input_result *res) {
    size_t n = hbm_memprof_allocator_count(mp);
    hbm_status s = hbm_memprof_attribute(mp);
    if (!s && !(res->r = hbmi_calloc(n + 1, sizeof *res->r))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t d = 0; d < n && !s; d++) {
        hbmi_rank *r = &res->r[d];
        res->n = d + 1;
        if (!(r->path = hbmi_strdup(path))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        if (!s) s = hbmi_rank_from_memprof(mp, d, r);
        if (!s && o->pages) s = rank_page(o, NULL, mp, r->device_index, input, d, r); /* the memory profile's page */
    }
    return s;
}

/* An input's ranks: from its summary, or from the trace (each device a rank), its page
 * written while the trace is held. */
static hbm_status read_input(const hbm_fleet_options *o, const char *path, size_t input, input_result *res) {
    if (hbm_fleet_is_summary_file(path)) {
        char *text;
        size_t len;
        hbm_status s = hbmi_read_file(path, &text, &len);
        if (s) return s;
        s = hbmi_summary_read(text, len, path, &res->r, &res->n);
        hbmi_free(text);
        return s;
    }
    hbm_proto_kind kind = hbm_proto_path_kind(path);
    if (kind == HBM_PROTO_XSPACE || kind == HBM_PROTO_PROFILE_DIR) {
        /* a profile with a memory profile: each allocator a rank with the figures hbm view
         * PROFILE shows (XProf's); without one, its largest module's plan as a trace */
        hbm_memprof *mp;
        hbm_status s = hbm_memprof_open(path, &mp);
        if (s) return s;
        if (hbm_memprof_allocator_count(mp)) {
            s = memprof_ranks(o, mp, path, input, res);
            hbm_memprof_close(mp);
            return s;
        }
        hbm_memprof_close(mp);
    }
    hbm_trace **all;
    size_t n;
    hbm_status s = hbm_trace_load_all(path, &all, &n);
    if (s) return s;
    if (!(res->r = hbmi_calloc(n + 1, sizeof *res->r))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t d = 0; d < n && !s; d++) {
        hbmi_rank *r = &res->r[d];
        res->n = d + 1;
        if (!(r->path = hbmi_strdup(path))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        if (!s) s = hbmi_rank_from_trace(all[d], r);
        if (!s && o->pages) s = rank_page(o, all[d], NULL, -1, input, d, r);
    }
    hbm_trace_free_all(all, n);
    return s;
}

/* --- threads -------------------------------------------------------------------------- */

typedef struct pool {
    const hbm_fleet_options *o;
    const char *const *paths;
    const char *const *docs; /* summaries in memory (hbm_fleet_from_summaries), else NULL */
    const size_t *lens;
    size_t n;
    input_result *res;
    char **errors;
} pool;

static void one(void *ctx, size_t i) {
    pool *p = ctx;
    hbm_status s = p->docs ? hbmi_summary_read(p->docs[i], p->lens[i], p->paths[i], &p->res[i].r, &p->res[i].n)
                           : read_input(p->o, p->paths[i], i, &p->res[i]);
    if (s) {
        for (size_t d = 0; d < p->res[i].n; d++) hbmi_rank_free(&p->res[i].r[d]);
        hbmi_free(p->res[i].r);
        p->res[i].r = NULL;
        p->res[i].n = 0;
        const char *msg = hbm_last_error();
        p->errors[i] = hbmi_strdup(msg && *msg ? msg : hbm_status_str(s));
        if (!p->errors[i]) p->errors[i] = (char *)""; /* out of memory for the message itself */
    }
}

/* --- inputs: files and folders -------------------------------------------------------- */

typedef struct names {
    char **v;
    size_t n, cap;
} names;

static hbm_status add_name(names *l, const char *s) {
    if (l->n == l->cap && hbmi_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v))
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    if (!(l->v[l->n] = hbmi_strdup(s))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    l->n++;
    return HBM_OK;
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* A folder's regular files by name (hidden ones skipped); F is left out when F.summary.json
 * is beside it (its summary stands for it). */
static hbm_status expand_dir(const char *dir, names *out) {
    DIR *d = opendir(dir);
    if (!d) return hbmi_error(HBM_ERR_IO, "%s: cannot open the folder: %s", dir, strerror(errno));
    names l = {0};
    hbm_status s = HBM_OK;
    for (struct dirent *e; !s && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[4200];
        snprintf(p, sizeof p, "%s%s%s", dir, ends_with(dir, "/") ? "" : "/", e->d_name);
        struct stat st;
        if (stat(p, &st) || !S_ISREG(st.st_mode)) continue;
        s = add_name(&l, p);
    }
    closedir(d);
    if (!s) hbmi_qsort(l.v, l.n, sizeof *l.v, str_cmp);
    for (size_t i = 0; i < l.n && !s; i++) {
        char sum[4300];
        snprintf(sum, sizeof sum, "%s.summary.json", l.v[i]);
        if (bsearch(&(const char *){sum}, l.v, l.n, sizeof *l.v, str_cmp)) continue;
        s = add_name(out, l.v[i]);
    }
    for (size_t i = 0; i < l.n; i++) hbmi_free(l.v[i]);
    hbmi_free(l.v);
    if (!s && !out->n) s = hbmi_error(HBM_ERR_INVALID, "%s is a directory without a profile (no plugins/profile/RUN/*.xplane.pb, no *.xplane.pb "
                                         "in it), and without files to read as ranks", dir);
    return s;
}

/* --- the reduction -------------------------------------------------------------------- */

typedef struct by_peak_item {
    uint64_t peak;
    const char *name;
    size_t idx;
} by_peak_item;

static int by_peak(const void *a, const void *b) {
    const by_peak_item *x = a, *y = b;
    if (x->peak != y->peak) return x->peak < y->peak ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return x->idx < y->idx ? -1 : 1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* min, median (the lower middle: a figure some rank has) and max of one figure */
static hbmi_stat stat_of(double *v, size_t n) {
    hbmi_qsort(v, n, sizeof *v, cmp_double);
    return (hbmi_stat){v[0], v[(n - 1) / 2], v[n - 1]};
}

/* Over the median of peak in use (or reserved) as a fraction: (x - median) / median. */
static double fleet_over(const hbm_fleet *f, const hbmi_rank *r, int reserved) {
    double med = reserved ? f->res.median : f->use.median;
    double x = (double)(reserved ? r->peak_res : r->peak_use);
    return med > 0 ? (x - med) / med : 0.0;
}

static hbm_status diff_of(hbm_fleet *f) {
    const hbmi_rank *side[2] = {&f->ranks[f->median], &f->ranks[f->worst]};
    size_t m = side[0]->nsites + side[1]->nsites;
    hbmi_contrib *c = hbmi_calloc(m + 1, sizeof *c);
    if (!c) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    size_t k = 0;
    for (int sd = 0; sd < 2; sd++) {
        for (size_t i = 0; i < side[sd]->nsites; i++, k++) {
            const hbmi_site *st = &side[sd]->sites[i];
            size_t len = strlen(st->op) + strlen(st->source) + strlen(st->category) + 3;
            if (!(c[k].key = hbmi_malloc(len))) {
                for (size_t j = 0; j < k; j++) hbmi_free(c[j].key);
                hbmi_free(c);
                return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
            }
            snprintf(c[k].key, len, "%s\x1f%s\x1f%s", st->op, st->source, st->category);
            c[k].bytes[sd] = st->bytes;
            c[k].count[sd] = st->buffers;
        }
    }
    f->ndiff = hbmi_contrib_merge(c, k);
    f->diff = c;
    return HBM_OK;
}

static hbm_status reduce(hbm_fleet *f) {
    f->order = hbmi_malloc(f->n * sizeof *f->order + 1);
    double *v = hbmi_malloc(f->n * sizeof *v + 1);
    f->groups = hbmi_calloc(f->n + 1, sizeof *f->groups);
    hbm_status s = HBM_OK;
    if (!f->order || !v || !f->groups) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t i = 0; i < f->n && !s; i++)
        if (!f->ranks[i].error) f->order[f->nok++] = i;
    if (s || !f->nok) {
        hbmi_free(v);
        return s;
    }
    by_peak_item *it = hbmi_malloc(f->nok * sizeof *it);
    if (!it) {
        hbmi_free(v);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    for (size_t k = 0; k < f->nok; k++)
        it[k] = (by_peak_item){f->ranks[f->order[k]].peak_use, f->ranks[f->order[k]].name, f->order[k]};
    hbmi_qsort(it, f->nok, sizeof *it, by_peak);
    for (size_t k = 0; k < f->nok; k++) f->order[k] = it[k].idx;
    hbmi_free(it);
    for (int fig = 0; fig < 4; fig++) {
        for (size_t k = 0; k < f->nok; k++) {
            const hbmi_rank *r = &f->ranks[f->order[k]];
            v[k] = fig == 0 ? (double)r->peak_use : fig == 1 ? (double)r->peak_res : fig == 2 ? hbmi_rank_frag(r) : (double)r->ooms;
        }
        hbmi_stat st = stat_of(v, f->nok);
        *(fig == 0 ? &f->use : fig == 1 ? &f->res : fig == 2 ? &f->frag : &f->ooms) = st;
    }
    hbmi_free(v);
    f->median = f->order[(f->nok - 1) / 2];
    f->worst = f->order[f->nok - 1];
    /* groups: by peak in use, a rank joins the open group while its peak is within the
     * tolerance of the group's smallest, else it opens the next */
    for (size_t k = 0; k < f->nok; k++) {
        hbmi_rank *r = &f->ranks[f->order[k]];
        hbmi_group *g = f->ngroups ? &f->groups[f->ngroups - 1] : NULL;
        if (!g || (double)r->peak_use > (double)g->lo * (1.0 + f->o.group_tolerance)) {
            g = &f->groups[f->ngroups++];
            g->first = k;
            g->lo = r->peak_use;
        }
        g->count++;
        g->hi = r->peak_use;
        r->group = (int)f->ngroups;
        r->over[0] = fleet_over(f, r, 0);
        r->over[1] = fleet_over(f, r, 1);
        r->outlier = (r->over[0] > f->o.margin) | (r->over[1] > f->o.margin) << 1;
    }
    return diff_of(f);
}

/* --- the facade ----------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hbm_fleet_free(hbm_fleet *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) hbmi_rank_free(&f->ranks[i]);
    for (size_t i = 0; i < f->ndiff; i++) hbmi_free(f->diff[i].key);
    hbmi_free(f->diff);
    hbmi_free(f->ranks);
    hbmi_free(f->order);
    hbmi_free(f->groups);
    hbmi_free(f);
}

size_t hbm_fleet_ranks(const hbm_fleet *f) { return f ? f->n : 0; }
size_t hbm_fleet_failed(const hbm_fleet *f) { return f ? f->nfailed : 0; }

/* The ranks of every input in order (an input that failed: one rank with its error). */
static hbm_status gather(hbm_fleet *f, pool *p) {
    size_t total = 0;
    for (size_t i = 0; i < p->n; i++) total += p->errors[i] ? 1 : p->res[i].n;
    if (!(f->ranks = hbmi_calloc(total + 1, sizeof *f->ranks))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbm_status s = HBM_OK;
    for (size_t i = 0; i < p->n; i++) {
        if (p->errors[i]) {
            hbmi_rank *r = &f->ranks[f->n++];
            r->error = p->errors[i];
            p->errors[i] = NULL;
            if (!*r->error && !(r->error = hbmi_strdup("out of host memory"))) s = HBM_ERR_NOMEM;
            if (!(r->name = hbmi_strdup(p->paths[i])) || !(r->path = hbmi_strdup(p->paths[i])))
                s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
            f->nfailed++;
            continue;
        }
        for (size_t d = 0; d < p->res[i].n; d++) {
            hbmi_rank *r = &f->ranks[f->n++];
            *r = p->res[i].r[d];
            char nm[4300];
            if (p->res[i].n > 1) snprintf(nm, sizeof nm, "%s#%s", r->path, *r->device ? r->device : "?");
            else snprintf(nm, sizeof nm, "%s", r->path);
            if (!(r->name = hbmi_strdup(nm))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        }
        hbmi_free(p->res[i].r);
        p->res[i].r = NULL;
    }
    return s;
}

static hbm_status fleet_make(const char *const *paths, const char *const *docs, const size_t *lens, size_t n,
                             const hbm_fleet_options *o, hbm_fleet **out) {
    double t0 = now_s();
    hbm_fleet *f = hbmi_calloc(1, sizeof *f);
    pool p = {.paths = paths, .docs = docs, .lens = lens, .n = n};
    p.res = hbmi_calloc(n + 1, sizeof *p.res);
    p.errors = hbmi_calloc(n + 1, sizeof *p.errors);
    if (!f || !p.res || !p.errors) {
        hbmi_free(f);
        hbmi_free(p.res);
        hbmi_free(p.errors);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    if (o) f->o = *o;
    else hbm_fleet_options_default(&f->o);
    p.o = &f->o;
    f->inputs = n;
    f->jobs = hbmi_parallel_for(n, f->o.jobs, one, &p);
    hbm_status s = gather(f, &p);
    for (size_t i = 0; i < n; i++) {
        for (size_t d = 0; p.res[i].r && d < p.res[i].n; d++) hbmi_rank_free(&p.res[i].r[d]);
        hbmi_free(p.res[i].r);
        if (p.errors[i] && *p.errors[i]) hbmi_free(p.errors[i]);
    }
    hbmi_free(p.res);
    hbmi_free(p.errors);
    if (!s) s = reduce(f);
    f->seconds = now_s() - t0;
    if (s) {
        hbm_fleet_free(f);
        return s;
    }
    *out = f;
    return HBM_OK;
}

hbm_status hbm_fleet_run(const char *const *inputs, size_t n, const hbm_fleet_options *o, hbm_fleet **out) {
    if (!inputs || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_fleet_run: NULL argument");
    *out = NULL;
    if (!n) return hbmi_error(HBM_ERR_INVALID, "hbm_fleet_run: no inputs");
    if (o && (o->margin < 0 || o->group_tolerance < 0))
        return hbmi_error(HBM_ERR_INVALID, "hbm_fleet_run: a negative margin (%g) or group tolerance (%g)", o->margin,
                          o->group_tolerance);
    if (o && o->pages && mkdir(o->pages, 0777) && errno != EEXIST)
        return hbmi_error(HBM_ERR_IO, "%s: cannot make the folder of the ranks' pages: %s", o->pages, strerror(errno));
    names l = {0};
    hbm_status s = HBM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        struct stat st;
        if (!inputs[i]) s = hbmi_error(HBM_ERR_INVALID, "hbm_fleet_run: input %zu is NULL", i);
        else if (!stat(inputs[i], &st) && S_ISDIR(st.st_mode)) s = expand_dir(inputs[i], &l);
        else s = add_name(&l, inputs[i]);
    }
    if (!s) s = fleet_make((const char *const *)l.v, NULL, NULL, l.n, o, out);
    for (size_t i = 0; i < l.n; i++) hbmi_free(l.v[i]);
    hbmi_free(l.v);
    return s;
}

hbm_status hbm_fleet_from_summaries(const char *const *docs, const size_t *lens, const char *const *names_, size_t n,
                                    const hbm_fleet_options *o, hbm_fleet **out) {
    if (!docs || !lens || !names_ || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_fleet_from_summaries: NULL argument");
    *out = NULL;
    if (!n) return hbmi_error(HBM_ERR_INVALID, "hbm_fleet_from_summaries: no summaries");
    return fleet_make(names_, docs, lens, n, o, out);
}

/* --- one input's summary document ----------------------------------------------------- */

static hbm_status summary_to(const char *input, FILE *f) {
    input_result res = {0};
    hbm_fleet_options o;
    hbm_fleet_options_default(&o);
    hbm_status s = read_input(&o, input, 0, &res);
    if (!s) hbmi_summary_write(f, input, res.r, res.n);
    for (size_t d = 0; d < res.n; d++) hbmi_rank_free(&res.r[d]);
    hbmi_free(res.r);
    if (!s && ferror(f)) s = hbmi_error(HBM_ERR_IO, "writing the summary failed");
    return s;
}

hbm_status hbm_fleet_summary_file(const char *input, const char *out) {
    if (!input || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_fleet_summary_file: NULL argument");
    hbm_output o;
    hbm_status s = hbm_output_open(&o, out);
    if (s) return s;
    if ((s = summary_to(input, o.f))) {
        hbm_output_abort(&o);
        return s;
    }
    return hbm_output_commit(&o);
}

hbm_status hbm_fleet_summary_string(const char *input, char **out, size_t *len) {
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_string(&m, out, len);
    if (s) return s;
    if (!input) s = hbmi_error(HBM_ERR_INVALID, "hbm_fleet_summary_string: NULL argument");
    return hbmi_mem_string(&m, s ? s : summary_to(input, m.f), out, len);
}

hbm_status hbm_fleet_format(const hbm_fleet *fl, hbm_fleet_form form, char *buf, size_t cap, size_t *len) {
    if (!fl || !len || (cap && !buf)) return hbmi_error(HBM_ERR_INVALID, "hbm_fleet_format: NULL argument");
    hbmi_mem m;
    hbm_status s = hbmi_mem_open_buffer(&m, buf, cap, len);
    return s ? s : hbmi_mem_buffer(&m, hbm_fleet_write(fl, form, m.f), buf, cap, len);
}
