/* load.c - open any supported trace by its content. */
#include <string.h>
#include <sys/stat.h>

#include "hbm/file.h"
#include "hbm/plan.h"
#include "hbm/memprof.h"
#include "hbm/proto.h"
#include "trace/trace_internal.h"

/* An HLO module (as XLA prints it): plan it and take the plan's timeline as the runtime
 * sequence (each buffer allocated at its first schedule step, freed after its last). */
static hbm_status load_hlo(const void *data, size_t len, const char *name, hbm_trace **out) {
    hbm_hlo_module *m;
    hbm_status s = hbm_hlo_parse(data, len, name, &m);
    if (s) return s;
    hbm_plan *p;
    s = hbm_plan_run(m, NULL, &p);
    if (!s) {
        s = hbm_plan_trace(p, out);
        /* named where it came from, as every trace (two modules of one function differ by
         * file, not by module name) */
        if (!s && name) snprintf((*out)->name, sizeof (*out)->name, "%s", name);
        hbm_plan_free(p);
    }
    hbm_hlo_module_free(m);
    return s;
}

/* gzip'd bytes in memory, inflated for fn (files are inflated as they are read). */
static hbm_status load_gzip(const void *data, size_t len, const char *name,
                            hbm_status (*fn)(const void *, size_t, const char *, void *, void *), void *a, void *b) {
    unsigned char *in;
    size_t n;
    hbm_status s = hbmi_gunzip(data, len, 0, name, &in, &n);
    if (s) return s;
    s = hbmi_is_gzip(in, n) ? hbmi_error(HBM_ERR_PARSE, "%s: gzip inside gzip", name) : fn(in, n, name, a, b);
    hbmi_free(in);
    return s;
}

static hbm_status load_mem_(const void *data, size_t len, const char *name, void *out, void *unused) {
    (void)unused;
    return hbm_trace_load_mem(data, len, name, out);
}

/* Why data is not a trace: empty, or another kind of file named ("an HLO module as
 * protobuf"), or what is expected. */
static hbm_status not_a_trace(const void *data, size_t len, const char *name) {
    hbm_file_kind k = hbm_file_sniff(data, len);
    if (k == HBM_FILE_EMPTY) return hbmi_error(HBM_ERR_PARSE, "%s: empty file", name);
    if (k != HBM_FILE_UNKNOWN)
        return hbmi_error(HBM_ERR_PARSE, "%s is %s, not a trace hbm reads (an hbm trace, a PyTorch snapshot, an "
                          "RMM log or an HLO module)", name, hbm_file_kind_str(k));
    return hbmi_error(HBM_ERR_PARSE,
                      "%s: not a recognized trace (expected an hbm trace \"HBMTRACE\", a PyTorch snapshot "
                      "pickle or JSON, an RMM log CSV starting \"Thread,Time,Action\", or an HLO module)", name);
}

hbm_status hbm_trace_load_mem(const void *data, size_t len, const char *name, hbm_trace **out) {
    if ((!data && len) || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_load: NULL argument");
    const unsigned char *p = data;
    if (!name) name = "input";
    if (len >= 8 && !memcmp(p, HBMI_TRACE_MAGIC, 8)) return hbm_trace_parse(data, len, name, out);
    if (len >= 1 && p[0] == 0x80) return hbm_trace_parse_torch_pickle(data, len, name, out);
    if (hbmi_is_gzip(data, len)) return load_gzip(data, len, name, load_mem_, out, NULL);
    hbm_file_kind k = hbm_file_sniff(data, len);
    if (k == HBM_FILE_TORCH_JSON) return hbm_trace_parse_torch_json(data, len, name, out);
    if (k == HBM_FILE_RMM_CSV) return hbm_trace_parse_rmm_csv(data, len, name, out);
    if (k == HBM_FILE_HLO) return load_hlo(data, len, name, out);
    return not_a_trace(data, len, name);
}

/* 0 for hbm's own formats, 1 for a PyTorch snapshot's pickle, 2 for its JSON. */
static int torch_kind(const void *data, size_t len) {
    const unsigned char *p = data;
    size_t i = 0;
    while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n')) i++;
    if (len >= 1 && p[0] == 0x80) return 1;
    return i < len && p[i] == '{' && hbm_file_sniff(data, len) == HBM_FILE_TORCH_JSON ? 2 : 0;
}

static hbm_status load_all_mem_(const void *data, size_t len, const char *name, void *out, void *n) {
    return hbm_trace_load_all_mem(data, len, name, out, n);
}

hbm_status hbm_trace_load_all_mem(const void *data, size_t len, const char *name, hbm_trace ***out, size_t *n) {
    if ((!data && len) || !out || !n) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_load_all: NULL argument");
    *out = NULL;
    *n = 0;
    if (!name) name = "input";
    if (hbmi_is_gzip(data, len)) return load_gzip(data, len, name, load_all_mem_, out, n);
    int kind = torch_kind(data, len);
    if (kind) return hbmi_torch_parse_all(data, len, kind == 2, name, NULL, out, n);
    hbm_trace **arr = hbmi_calloc(1, sizeof *arr);
    if (!arr) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    hbm_status s = hbm_trace_load_mem(data, len, name, &arr[0]);
    if (s) {
        hbmi_free(arr);
        return s;
    }
    *out = arr;
    *n = 1;
    return HBM_OK;
}

static const hbm_trace *const *peak_order_;
static uint64_t *peak_of_;
static int cmp_peak(const void *x, const void *y) {
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    if (peak_of_[a] != peak_of_[b]) return peak_of_[a] > peak_of_[b] ? -1 : 1;
    return peak_order_[a]->device_index < peak_order_[b]->device_index ? -1 : 1;
}

/* A profile whose host plane records the device allocators' events (hbm/memprof.h): each
 * allocator's trace, the largest peak first. 0 with *n = 0 when it records none. */
static hbm_status load_memprof(const char *path, hbm_trace ***out, size_t *n) {
    *n = 0;
    hbm_memprof *mp;
    hbm_status s = hbm_memprof_open(path, &mp);
    if (s) return s;
    size_t na = hbm_memprof_allocator_count(mp);
    if (!na) {
        hbm_memprof_close(mp);
        return HBM_OK;
    }
    hbm_trace **arr = hbmi_calloc(na, sizeof *arr), **sorted = hbmi_calloc(na, sizeof *sorted);
    uint64_t *peak = hbmi_calloc(na, sizeof *peak);
    size_t *idx = hbmi_calloc(na, sizeof *idx);
    if (!arr || !sorted || !peak || !idx) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    for (size_t a = 0; a < na && !s; a++) {
        s = hbm_memprof_trace(mp, a, &arr[a]);
        if (!s) {
            arr[a]->capacity = hbm_memprof_allocator(mp, a)->memory_capacity;
            peak[a] = hbm_memprof_allocator(mp, a)->peak_bytes_in_use;
            idx[a] = a;
        }
    }
    hbm_memprof_close(mp);
    if (!s) {
        peak_order_ = (const hbm_trace *const *)arr;
        peak_of_ = peak;
        hbmi_qsort(idx, na, sizeof *idx, cmp_peak);
        for (size_t a = 0; a < na; a++) sorted[a] = arr[idx[a]];
        *out = sorted;
        *n = na;
        sorted = NULL;
    } else {
        for (size_t a = 0; arr && a < na; a++) hbm_trace_free(arr[a]);
    }
    hbmi_free(arr);
    hbmi_free(sorted);
    hbmi_free(peak);
    hbmi_free(idx);
    return s;
}

/* XLA's protobuf inputs (a profile directory, *.xplane.pb, *.hlo_proto.pb, *.hlo.pb): a
 * profile's memory profile when it has one (each allocator's events), else the largest
 * module, planned as an HLO module's text is (hbm/proto.h picks others). */
static hbm_status load_proto(const char *path, hbm_trace ***out, size_t *n) {
    hbm_proto_kind k = hbm_proto_path_kind(path);
    if (k == HBM_PROTO_XSPACE || k == HBM_PROTO_PROFILE_DIR) {
        hbm_status ms = load_memprof(path, out, n);
        if (ms || *n) return ms;
    }
    hbm_hlo_module *m;
    hbm_status s = hbm_hlo_open(path, NULL, &m);
    if (s) return s;
    hbm_trace **arr = hbmi_calloc(1, sizeof *arr);
    hbm_plan *p = NULL;
    if (!arr) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    if (!s) s = hbm_plan_run(m, NULL, &p);
    if (!s) s = hbm_plan_trace(p, &arr[0]);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    if (s) {
        hbmi_free(arr);
        return s;
    }
    *out = arr;
    *n = 1;
    return HBM_OK;
}

hbm_status hbm_trace_load_all(const char *path, hbm_trace ***out, size_t *n) {
    if (!path || !out || !n) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_load_all: NULL argument");
    /* a directory is a profile's LOGDIR or nothing: the HLO reader says which, in the words
     * plan and fit use ("... is a directory without a profile (...)") */
    struct stat st;
    if (hbm_proto_path_kind(path) != HBM_PROTO_NONE || (!stat(path, &st) && S_ISDIR(st.st_mode)))
        return load_proto(path, out, n);
    /* snapshots (which can be gigabytes) are read from a mapping whose pages go once read */
    hbmi_input in;
    hbm_status s = hbmi_input_open(path, &in);
    if (s) return s;
    int kind = torch_kind(in.data, in.len);
    if (kind) {
        *out = NULL;
        *n = 0;
        s = hbmi_torch_parse_all(in.data, in.len, kind == 2, path, &in, out, n);
        hbmi_input_close(&in);
        return s;
    }
    if (in.mapped) { /* the other readers take NUL-terminated text */
        hbmi_input_close(&in);
        if ((s = hbmi_read_file(path, &in.data, &in.len))) return s;
    }
    s = hbm_trace_load_all_mem(in.data, in.len, path, out, n);
    hbmi_free(in.data);
    return s;
}

hbm_status hbm_trace_load_device(const char *path, int device_index, hbm_trace **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_load_device: NULL argument");
    *out = NULL;
    hbm_trace **all;
    size_t n;
    hbm_status s = hbm_trace_load_all(path, &all, &n);
    if (s) return s;
    size_t pick = n;
    for (size_t i = 0; i < n && pick == n; i++)
        if (device_index < 0 || all[i]->device_index == device_index) pick = i;
    if (pick == n) {
        char have[256] = "";
        size_t k = 0;
        for (size_t i = 0; i < n && k + 24 < sizeof have; i++)
            k += (size_t)snprintf(have + k, sizeof have - k, "%s%d", i ? ", " : "", all[i]->device_index);
        hbm_trace_free_all(all, n);
        return hbmi_error(HBM_ERR_INVALID, "%s: no device %d in this file (it holds device%s %s)", path, device_index,
                          n > 1 ? "s" : "", have);
    }
    if (device_index < 0) {
        *out = hbmi_trace_keep_others(all, n, pick);
        return HBM_OK;
    }
    *out = all[pick];
    all[pick] = NULL;
    hbm_trace_free_all(all, n);
    return HBM_OK;
}

hbm_status hbm_trace_load(const char *path, hbm_trace **out) { return hbm_trace_load_device(path, -1, out); }
