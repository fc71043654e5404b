/* plan_dir.c - hbm plan DUMPDIR: the multi-module program. Each HLO module of an XLA dump
 * folder planned on threads (hbmi_parallel_for), one module per thread at a time: its need
 * (hbm_plan_stats.peak_bytes, what hbm plan FILE prints as the executable's need), its
 * arguments, outputs and temp, its verdict against a target; the largest named. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "hbm/fleet.h"
#include "hbm/hlo.h"
#include "hbm/json_api.h"
#include "hbm/plan.h"
#include "hbm/size.h"

typedef struct mod {
    char *path, *file, *name; /* file: the name in the folder; name: the module's (HloModule NAME) */
    char *error;
    hbm_plan_stats st;
    int fails; /* with a target: 1 when hbm plan's verdict is negative */
} mod;

struct hbm_plan_dir {
    char *dir;
    mod *m;
    size_t n, failed, not_fitting, largest; /* largest: index (when some module was planned) */
    int has_target, jobs;
    hbm_plan_target target;
};

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int by_file(const void *a, const void *b) { return strcmp(((const mod *)a)->file, ((const mod *)b)->file); }

void hbm_plan_dir_free(hbm_plan_dir *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) {
        hbmi_free(d->m[i].path);
        hbmi_free(d->m[i].file);
        hbmi_free(d->m[i].name);
        hbmi_free(d->m[i].error);
    }
    hbmi_free(d->m);
    hbmi_free(d->dir);
    hbmi_free(d);
}

/* The folder's modules: its *after_optimizations.txt when there are any (XLA dumps each
 * module before and after its passes; the buffer assignment is of the latter), else every
 * regular file of HLO text. */
static hbm_status list(hbm_plan_dir *d) {
    DIR *dp = opendir(d->dir);
    if (!dp) return hbmi_error(HBM_ERR_IO, "%s: cannot open the folder: %s", d->dir, strerror(errno));
    size_t cap = 0;
    int after = 0;
    hbm_status s = HBM_OK;
    for (struct dirent *e; !s && (e = readdir(dp));) {
        if (e->d_name[0] == '.') continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", d->dir, e->d_name);
        struct stat st;
        if (stat(p, &st) || !S_ISREG(st.st_mode)) continue;
        int is_after = ends_with(e->d_name, "after_optimizations.txt");
        if (!is_after && (after || !hbm_hlo_file_is_text(p))) continue;
        if (is_after && !after) { /* from now on only these */
            after = 1;
            size_t k = 0;
            for (size_t i = 0; i < d->n; i++) {
                if (ends_with(d->m[i].file, "after_optimizations.txt")) d->m[k++] = d->m[i];
                else hbmi_free(d->m[i].path), hbmi_free(d->m[i].file);
            }
            d->n = k;
        }
        if (d->n == cap && hbmi_grow((void **)&d->m, &cap, d->n + 1, sizeof *d->m)) {
            s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
            break;
        }
        mod *m = &d->m[d->n];
        memset(m, 0, sizeof *m);
        m->path = hbmi_strdup(p);
        m->file = hbmi_strdup(e->d_name);
        d->n++;
        if (!m->path || !m->file) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    closedir(dp);
    if (!s && !d->n)
        s = hbmi_error(HBM_ERR_INVALID, "%s is a directory without a profile (no plugins/profile/RUN/*.xplane.pb, "
                                        "no *.xplane.pb in it), and without HLO text to plan", d->dir);
    if (!s) hbmi_qsort(d->m, d->n, sizeof *d->m, by_file);
    return s;
}

static void plan_one(void *ctx, size_t i) {
    hbm_plan_dir *d = ctx;
    mod *m = &d->m[i];
    hbm_hlo_module *hm;
    hbm_status s = hbm_hlo_parse_file(m->path, &hm);
    if (!s) {
        hbm_plan *p;
        if (!(s = hbm_plan_run(hm, NULL, &p))) {
            s = hbm_plan_get_stats(p, &m->st);
            if (d->has_target) m->fails = hbm_plan_target_fails(p, &d->target);
            hbm_plan_free(p);
        }
        if (!s && !(m->name = hbmi_strdup(hbm_hlo_module_name(hm)))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
        hbm_hlo_module_free(hm);
    }
    if (s) {
        const char *msg = hbm_last_error();
        m->error = hbmi_strdup(msg && *msg ? msg : hbm_status_str(s));
    }
}

hbm_status hbm_plan_dir_run(const char *dir, int jobs, const hbm_plan_target *target, hbm_plan_dir **out) {
    if (!dir || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_dir_run: NULL argument");
    *out = NULL;
    hbm_plan_dir *d = hbmi_calloc(1, sizeof *d);
    if (!d || !(d->dir = hbmi_strdup(dir))) {
        hbmi_free(d);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    }
    if (target && target->capacity) d->has_target = 1, d->target = *target;
    hbm_status s = list(d);
    if (s) {
        hbm_plan_dir_free(d);
        return s;
    }
    d->jobs = hbmi_parallel_for(d->n, jobs, plan_one, d);
    int any = 0;
    for (size_t i = 0; i < d->n; i++) {
        const mod *m = &d->m[i];
        if (m->error) {
            d->failed++;
            continue;
        }
        d->not_fitting += m->fails != 0;
        if (!any || m->st.peak_bytes > d->m[d->largest].st.peak_bytes) d->largest = i, any = 1;
    }
    *out = d;
    return HBM_OK;
}

void hbm_plan_dir_counts(const hbm_plan_dir *d, size_t *modules, size_t *failed, size_t *not_fitting) {
    if (modules) *modules = d ? d->n : 0;
    if (failed) *failed = d ? d->failed : 0;
    if (not_fitting) *not_fitting = d ? d->not_fitting : 0;
}

/* --- rendering ------------------------------------------------------------------------- */

typedef struct by_need_item {
    uint64_t need;
    size_t i;
} by_need_item;

static int by_need(const void *a, const void *b) {
    const by_need_item *x = a, *y = b;
    if (x->need != y->need) return x->need > y->need ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static void json_mod(FILE *f, const hbm_plan_dir *d, const mod *m) {
    fputs("{\"file\": ", f);
    hbmi_json_str(f, m->file);
    if (m->error) {
        fputs(", \"error\": ", f);
        hbmi_json_str(f, m->error);
        fputc('}', f);
        return;
    }
    fputs(", \"module\": ", f);
    hbmi_json_str(f, m->name);
    fprintf(f,
            ", \"need_bytes\": %" PRIu64 ", \"argument_size_in_bytes\": %" PRIu64 ", \"output_size_in_bytes\": %" PRIu64
            ", \"alias_size_in_bytes\": %" PRIu64 ", \"temp_size_in_bytes\": %" PRIu64,
            m->st.peak_bytes, m->st.argument_size_in_bytes, m->st.output_size_in_bytes, m->st.alias_size_in_bytes,
            m->st.temp_size_in_bytes);
    if (d->has_target) fprintf(f, ", \"fits\": %s", m->fails ? "false" : "true");
    fputc('}', f);
}

hbm_status hbm_plan_dir_write(const hbm_plan_dir *d, int json, size_t top, FILE *f) {
    if (!d || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_plan_dir_write: NULL argument");
    size_t ok = d->n - d->failed;
    by_need_item *it = hbmi_malloc(d->n * sizeof *it + 1);
    if (!it) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    size_t k = 0;
    for (size_t i = 0; i < d->n; i++)
        if (!d->m[i].error) it[k++] = (by_need_item){d->m[i].st.peak_bytes, i};
    hbmi_qsort(it, k, sizeof *it, by_need);
    if (json) {
        fputs("{\"dir\": ", f);
        hbmi_json_str(f, d->dir);
        fprintf(f, ", \"modules_total\": %zu, \"planned\": %zu, \"failed\": %zu", d->n, ok, d->failed);
        if (d->has_target) fprintf(f, ", \"capacity_bytes\": %" PRIu64 ", \"not_fitting\": %zu", d->target.capacity, d->not_fitting);
        if (ok) {
            fputs(", \"largest\": ", f);
            hbmi_json_str(f, d->m[d->largest].file);
            fprintf(f, ", \"largest_need_bytes\": %" PRIu64, d->m[d->largest].st.peak_bytes);
        }
        fputs(", \"modules\": [", f); /* largest need first, then the ones that failed */
        for (size_t j = 0; j < k; j++) {
            fputs(j ? ",\n  " : "\n  ", f);
            json_mod(f, d, &d->m[it[j].i]);
        }
        size_t j = k;
        for (size_t i = 0; i < d->n; i++)
            if (d->m[i].error) {
                fputs(j++ ? ",\n  " : "\n  ", f);
                json_mod(f, d, &d->m[i]);
            }
        fputs("]}\n", f);
    } else {
        fprintf(f, "%s: %zu module%s, %zu planned, %zu could not be (%d thread%s)\n", d->dir, d->n, d->n == 1 ? "" : "s", ok,
                d->failed, d->jobs, d->jobs == 1 ? "" : "s");
        if (ok) {
            const mod *L = &d->m[d->largest];
            char a[32], name[200];
            hbmi_text_fit(name, sizeof name, L->file, 70, 1);
            fprintf(f, "largest: %s needs %s (module %s)\n", name, hbm_size_xla((int64_t)L->st.peak_bytes, a), L->name);
            if (d->has_target)
                fprintf(f, "%zu of %zu modules do not fit %s\n", d->not_fitting, ok,
                        d->target.device_name[0] ? d->target.device_name : "the target");
            fprintf(f, "\n  %10s %10s %10s %10s %s %s\n", "need", "arguments", "outputs", "temp", d->has_target ? "fits" : "",
                    "file");
        }
        size_t show = k < top ? k : top;
        for (size_t j = 0; j < show; j++) {
            const mod *m = &d->m[it[j].i];
            char a[32], b[32], c[32], e[32], name[200];
            hbmi_text_fit(name, sizeof name, m->file, d->has_target ? 50 : 54, 1);
            fprintf(f, "  %10s %10s %10s %10s %s %s\n", hbm_size_xla((int64_t)m->st.peak_bytes, a),
                    hbm_size_xla((int64_t)m->st.argument_size_in_bytes, b), hbm_size_xla((int64_t)m->st.output_size_in_bytes, c),
                    hbm_size_xla((int64_t)m->st.temp_size_in_bytes, e), d->has_target ? (m->fails ? " no " : "yes ") : "",
                    name);
        }
        if (k > show) {
            char a[32], b[32];
            fprintf(f, "  ... %zu more, each needing %s - %s\n", k - show, hbm_size_xla((int64_t)it[k - 1].need, a),
                    hbm_size_xla((int64_t)it[show].need, b));
        }
        if (d->failed) {
            fprintf(f, "\n%zu could not be planned:\n", d->failed);
            size_t shown = 0;
            for (size_t i = 0; i < d->n && shown < top; i++) {
                if (!d->m[i].error) continue;
                char name[200], why[200];
                hbmi_text_fit(name, sizeof name, d->m[i].file, 96, 1);
                hbmi_text_fit(why, sizeof why, d->m[i].error, 95, 0);
                fprintf(f, " x %s\n     %s\n", name, why);
                shown++;
            }
        }
    }
    hbmi_free(it);
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "writing the modules failed") : HBM_OK;
}
