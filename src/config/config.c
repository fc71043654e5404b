/* config.c - options from "key=value,..." strings and from the environment variables
 * JAX, XLA and TensorFlow users already set. One table (HBM_CONFIG_OPTIONS in
 * hbm/config.h) names every option; this file parses, prints and documents them. */
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/device_models.h"
#include "hbm/config.h"
#include "hbm/size.h"

typedef struct opt_desc {
    const char *key, *hbm_env, *framework_env, *accepted, *doc;
} opt_desc;

static const opt_desc opts[HBM_OPT_COUNT_] = {
#define HBMI_DESC_(field, key, hv, fv, acc, doc) {key, hv, fv, acc, doc},
    HBM_CONFIG_OPTIONS(HBMI_DESC_)
#undef HBMI_DESC_
};

static const char *const allocator_names[] = {"bfc", "platform", "cuda_async", "vmm", "torch"};

const char *hbm_allocator_kind_str(hbm_allocator_kind k) {
    return (unsigned)k < sizeof allocator_names / sizeof allocator_names[0] ? allocator_names[k] : "?";
}

static void set_source(hbm_config *c, hbm_config_option o, const char *src) {
    snprintf(c->source[o], sizeof c->source[o], "%s", src);
}

void hbm_config_default(hbm_config *c) {
    memset(c, 0, sizeof *c);
    c->allocator = HBM_ALLOCATOR_BFC;
    c->policy = HBM_POLICY_JAX;
    c->preallocate = 1;
    c->fraction = 0.75;
    c->limit = 0;
    c->initial_region = 2u << 20;
    c->release_on_oom = 1;
    c->async_prealloc = 0;
    c->report_top = 10;
    c->max_split_size = UINT64_MAX;
    c->max_non_split_rounding = 20u << 20;
    for (int i = 0; i < HBM_OPT_COUNT_; i++) set_source(c, (hbm_config_option)i, "default");
}

/* ---- value parsers; `who` names the key or variable for messages -------------------- */

static hbm_status bad_value(hbm_config_option o, const char *who, const char *value, const char *accepted) {
    return hbmi_error(HBM_ERR_CONFIG, "%s='%s' is not valid: expected %s", who, value,
                      accepted ? accepted : opts[o].accepted);
}

/* ---- the frameworks' own rules for their variables --------------------------------------
 * JAX/XLA (jax/_src/xla_bridge.py and xla/python/xla_client.py,
 * generate_pjrt_gpu_plugin_options, jax 0.4.3x): an empty variable is unset;
 *   XLA_PYTHON_CLIENT_PREALLOCATE: preallocate = value not in ("false", "False", "0"), so
 *     any other text, "no", "off" and "FALSE" included, leaves preallocation on;
 *   XLA_[PYTHON_]CLIENT_MEM_FRACTION: float(value), Python's syntax (surrounding whitespace,
 *     '_' between digits, inf, nan); XLA multiplies the device's total memory by it and
 *     allows more than 1 (oversubscription under unified memory).
 * TensorFlow (tensorflow/core/common_runtime/gpu/gpu_process_state.cc, gpu_cudamallocasync_
 * allocator.cc, TF 2.x): TF_GPU_ALLOCATOR is compared exactly (strcmp) with
 * "cuda_malloc_async" (the async pool), "cuda_malloc" (every request straight to cudaMalloc)
 * and "memory_guard" (a debug allocator over BFC); any other value means the BFC default. */
static int jax_preallocate(const char *v) { return strcmp(v, "false") && strcmp(v, "False") && strcmp(v, "0"); }

static int is_py_space(char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

/* Python's float(v) for ASCII text: 1 and *out on success, 0 when Python raises ValueError. */
static int py_float(const char *v, double *out) {
    char buf[128];
    size_t n = 0;
    while (is_py_space(*v)) v++;
    size_t len = strlen(v);
    while (len && is_py_space(v[len - 1])) len--;
    if (!len || len >= sizeof buf) return 0;
    /* '_' only between two digits; keep the rest */
    for (size_t i = 0; i < len; i++) {
        if (v[i] == '_') {
            if (!i || i + 1 == len || !isdigit((unsigned char)v[i - 1]) || !isdigit((unsigned char)v[i + 1])) return 0;
            continue;
        }
        buf[n++] = v[i];
    }
    buf[n] = 0;
    const char *p = buf;
    if (*p == '+' || *p == '-') p++;
    if (hbmi_streq_ci(p, "inf") || hbmi_streq_ci(p, "infinity") || hbmi_streq_ci(p, "nan")) {
        *out = strtod(buf, NULL);
        return 1;
    }
    /* digits [. digits] | . digits, then an optional exponent: no hex, no nan(...) */
    int digits = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) p++, digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
    }
    if (*p) return 0;
    *out = strtod(buf, NULL); /* overflow gives inf as Python does; underflow 0 */
    return 1;
}

static hbm_status parse_jax_fraction(hbm_config *c, const char *who, const char *v) {
    double f;
    if (!py_float(v, &f))
        return hbmi_error(HBM_ERR_CONFIG, "%s='%s' is not valid: expected a number (JAX reads it with Python's float())",
                          who, v);
    if (!(f > 0.0) || f != f || f - f != 0.0) /* <= 0, nan, inf */
        return hbmi_error(HBM_ERR_CONFIG,
                          "%s='%s' is not valid: JAX accepts it, but XLA would give the allocator %s bytes; "
                          "expected a finite number above 0 (e.g. .6)", who, v, f > 0.0 ? "an undefined number of" : "no");
    c->fraction = f;
    return HBM_OK;
}

static hbm_status parse_bool(hbm_config_option o, const char *who, const char *v, int *out) {
    static const char *const yes[] = {"true", "1", "yes", "on"}, *const no[] = {"false", "0", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (hbmi_streq_ci(v, yes[i])) return *out = 1, HBM_OK;
        if (hbmi_streq_ci(v, no[i])) return *out = 0, HBM_OK;
    }
    return bad_value(o, who, v, "true or false (also 1/0, yes/no, on/off)");
}

static hbm_status parse_allocator(const char *who, const char *v, hbm_allocator_kind *out) {
    if (!strcmp(who, "TF_GPU_ALLOCATOR")) { /* TF's rule: exact values, anything else = BFC */
        if (!strcmp(v, "cuda_malloc_async")) return *out = HBM_ALLOCATOR_CUDA_ASYNC, HBM_OK;
        if (!strcmp(v, "cuda_malloc")) return *out = HBM_ALLOCATOR_PLATFORM, HBM_OK;
        return *out = HBM_ALLOCATOR_BFC, HBM_OK;
    }
    if (hbmi_streq_ci(v, "default")) return *out = HBM_ALLOCATOR_BFC, HBM_OK;
    for (unsigned i = 0; i < sizeof allocator_names / sizeof allocator_names[0]; i++)
        if (hbmi_streq_ci(v, allocator_names[i])) return *out = (hbm_allocator_kind)i, HBM_OK;
    if (!strcmp(who, "XLA_PYTHON_CLIENT_ALLOCATOR"))
        return bad_value(HBM_OPT_allocator, who, v, "default, bfc, platform or cuda_async");
    return bad_value(HBM_OPT_allocator, who, v, "default, bfc, platform, cuda_async, vmm or torch");
}

/* ---- PyTorch's caching allocator settings ---------------------------------------------
 * PyTorch (c10/core/AllocatorConfig.cpp, parseArgs and its helpers) splits the value into
 * tokens at ',' ':' '[' ']' and drops spaces; keys are compared exactly; numbers go through
 * stoi/stod. Here a number must be all digits (stoi would also take "128abc" as 128: we
 * refuse it rather than guess). */
static int torch_uint(const char *v, uint64_t *out) {
    if (!*v) return 0;
    uint64_t n = 0;
    for (const char *p = v; *p; p++) {
        if (!isdigit((unsigned char)*p) || n > (UINT64_MAX - 9) / 10) return 0;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    *out = n;
    return 1;
}

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }
static unsigned log2_floor(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

static hbm_status torch_bad(const char *who, const char *key, const char *val, const char *accepted);

/* A bad roundup_power2_divisions value. torch: it is PYTORCH_CUDA_ALLOC_CONF's (who), whose
 * messages name the key and what PyTorch accepts for it (AllocatorConfig::
 * parseRoundUpPower2Divisions, c10/core/AllocatorConfig.cpp) */
static hbm_status roundup_bad(const char *who, const char *v, int torch) {
    if (torch)
        return torch_bad(who, "roundup_power2_divisions", v,
                         "a power of 2 (1, 2, 4, 8, ...: the divisions of every size interval), or a list "
                         "[MB:N,...,>:N] with MB a power of 2 (MiB) and N a power of 2 or 0");
    return bad_value(HBM_OPT_roundup_power2_divisions, who, v,
                     "a power of 2, or [MB:N,...,>:N] with MB a power of 2 (MiB) and N a power of 2 or 0 "
                     "(PyTorch's roundup_power2_divisions)");
}

/* roundup_power2_divisions: "N" (every interval) or "[MB:N,MB:N,...,>:N]": MB a power of two
 * in MiB naming the interval [MB, 2 MB) (clamped to the 16 intervals from 1 MiB); the first
 * entry also covers every interval below it, ">" every interval after the last one named;
 * N a power of two, or 0 (no rounding beyond 512 bytes). */
static hbm_status parse_roundup(hbm_config *c, const char *who, const char *v, int torch) {
    uint32_t t[HBM_TORCH_ROUNDUP_INTERVALS] = {0};
    uint64_t n;
    while (*v == ' ') v++;
    if (*v != '[') {
        if (!torch_uint(v, &n) || !is_pow2(n) || n > UINT32_MAX) return roundup_bad(who, v, torch);
        for (int i = 0; i < HBM_TORCH_ROUNDUP_INTERVALS; i++) t[i] = (uint32_t)n;
        memcpy(c->roundup_power2_divisions, t, sizeof t);
        return HBM_OK;
    }
    const char *p = v + 1;
    size_t last = 0;
    int first = 1;
    for (;;) {
        char k[32], d[32];
        size_t kl = 0, dl = 0;
        while (*p == ' ') p++;
        if (*p == ']' && first) break; /* "[]" */
        while (*p && *p != ':' && *p != ',' && *p != ']' && kl + 1 < sizeof k) if (*p != ' ') k[kl++] = *p++; else p++;
        k[kl] = 0;
        if (*p != ':') return roundup_bad(who, v, torch);
        p++;
        while (*p && *p != ',' && *p != ']' && dl + 1 < sizeof d) if (*p != ' ') d[dl++] = *p++; else p++;
        d[dl] = 0;
        if (!torch_uint(d, &n) || (n && !is_pow2(n)) || n > UINT32_MAX)
            return hbmi_error(HBM_ERR_CONFIG, "%s: roundup_power2_divisions entry '%s:%s' is not valid: the divisions must be "
                                              "a power of 2, or 0 to disable rounding (PyTorch)", who, k, d);
        if (!strcmp(k, ">")) {
            for (size_t i = last; i < HBM_TORCH_ROUNDUP_INTERVALS; i++) t[i] = (uint32_t)n;
        } else {
            uint64_t mb;
            if (!torch_uint(k, &mb) || !is_pow2(mb))
                return hbmi_error(HBM_ERR_CONFIG, "%s: roundup_power2_divisions entry '%s:%s' is not valid: the interval "
                                                  "must be a power of 2 in MiB (e.g. 256), or '>' (PyTorch)", who, k, d);
            size_t idx = log2_floor(mb);
            if (idx > HBM_TORCH_ROUNDUP_INTERVALS - 1) idx = HBM_TORCH_ROUNDUP_INTERVALS - 1;
            if (first)
                for (size_t i = 0; i < idx; i++) t[i] = (uint32_t)n;
            first = 0;
            t[idx] = (uint32_t)n;
            last = idx;
        }
        if (*p == ',') { p++; continue; }
        if (*p == ']') break;
        return roundup_bad(who, v, torch);
    }
    p++;
    while (*p == ' ') p++;
    if (*p) return roundup_bad(who, v, torch);
    memcpy(c->roundup_power2_divisions, t, sizeof t);
    return HBM_OK;
}

static hbm_status parse_value(hbm_config *c, hbm_config_option o, const char *who, const char *v) {
    char *end;
    switch (o) {
    case HBM_OPT_allocator: return parse_allocator(who, v, &c->allocator);
    case HBM_OPT_policy:
        if (hbmi_streq_ci(v, "jax")) return c->policy = HBM_POLICY_JAX, HBM_OK;
        if (hbmi_streq_ci(v, "jax_legacy")) return c->policy = HBM_POLICY_JAX_LEGACY, HBM_OK;
        return bad_value(o, who, v, NULL);
    case HBM_OPT_preallocate:
        if (!strcmp(who, "XLA_PYTHON_CLIENT_PREALLOCATE")) return c->preallocate = jax_preallocate(v), HBM_OK;
        return parse_bool(o, who, v, &c->preallocate);
    case HBM_OPT_release_on_oom: return parse_bool(o, who, v, &c->release_on_oom);
    case HBM_OPT_fraction: {
        if (!strncmp(who, "XLA_", 4)) return parse_jax_fraction(c, who, v);
        errno = 0;
        double f = strtod(v, &end);
        if (!*v || *end || errno || !(f > 0.0 && f <= 1.0)) return bad_value(o, who, v, NULL);
        c->fraction = f;
        return HBM_OK;
    }
    case HBM_OPT_limit:
    case HBM_OPT_initial_region: {
        uint64_t n;
        if (hbm_size_parse(v, &n)) return bad_value(o, who, v, NULL);
        if (o == HBM_OPT_initial_region && n < 256) return bad_value(o, who, v, NULL);
        *(o == HBM_OPT_limit ? &c->limit : &c->initial_region) = n;
        return HBM_OK;
    }
    case HBM_OPT_async_prealloc: {
        if (!strcmp(v, "-1")) return c->async_prealloc = -1, HBM_OK;
        uint64_t n;
        if (hbm_size_parse(v, &n) || n > INT64_MAX) return bad_value(o, who, v, NULL);
        c->async_prealloc = (int64_t)n;
        return HBM_OK;
    }
    case HBM_OPT_report_top: {
        errno = 0;
        long n = strtol(v, &end, 10);
        if (!*v || *end || errno || n < 0 || n > 1000) return bad_value(o, who, v, NULL);
        c->report_top = (int)n;
        return HBM_OK;
    }
    case HBM_OPT_trace:
        if (strlen(v) >= sizeof c->trace) return bad_value(o, who, v, "a path shorter than 256 bytes");
        snprintf(c->trace, sizeof c->trace, "%s", v);
        return HBM_OK;
    case HBM_OPT_trace_backtrace: return parse_bool(o, who, v, &c->trace_backtrace);
    case HBM_OPT_expandable_segments: return parse_bool(o, who, v, &c->expandable_segments);
    case HBM_OPT_max_split_size_mb:
    case HBM_OPT_max_non_split_rounding_mb: {
        uint64_t mb;
        if (!torch_uint(v, &mb) || (o == HBM_OPT_max_non_split_rounding_mb && mb == 0) || (mb && mb < 20))
            return bad_value(o, who, v, NULL);
        uint64_t bytes = !mb ? UINT64_MAX : mb > (UINT64_MAX >> 20) ? UINT64_MAX : mb << 20;
        *(o == HBM_OPT_max_split_size_mb ? &c->max_split_size : &c->max_non_split_rounding) = bytes;
        return HBM_OK;
    }
    case HBM_OPT_roundup_power2_divisions: return parse_roundup(c, who, v, 0);
    case HBM_OPT_garbage_collection_threshold: {
        errno = 0;
        double f = strtod(v, &end);
        if (!*v || *end || errno || !(f >= 0.0 && f < 1.0)) return bad_value(o, who, v, NULL);
        c->garbage_collection_threshold = f;
        return HBM_OK;
    }
    case HBM_OPT_COUNT_: break;
    }
    return hbmi_error(HBM_ERR_CONFIG, "internal: unknown option %d", (int)o);
}

/* ---- PYTORCH_CUDA_ALLOC_CONF ------------------------------------------------------------ */

static hbm_status torch_bad(const char *who, const char *key, const char *val, const char *accepted) {
    return hbmi_error(HBM_ERR_CONFIG, "%s: %s:%s is not valid: PyTorch accepts %s", who, key, val, accepted);
}

static void set_torch_source(hbm_config *c, hbm_config_option o, const char *who) { set_source(c, o, who); }

hbm_status hbm_config_apply_torch(hbm_config *c, const char *text, const char *who) {
    if (!c || !text) return hbmi_error(HBM_ERR_INVALID, "hbm_config_apply_torch: NULL argument");
    if (!who) who = "PYTORCH_CUDA_ALLOC_CONF";
    /* tokens: runs of other characters, and each of , : [ ] alone; spaces dropped */
    enum { MAXTOK = 192 }; /* a 16-entry roundup list is 65 tokens */
    char tok[MAXTOK][48];
    size_t nt = 0, len = 0;
    for (const char *p = text;; p++) {
        int sep = !*p || *p == ',' || *p == ':' || *p == '[' || *p == ']';
        if (sep && len) {
            if (nt == MAXTOK) return hbmi_error(HBM_ERR_CONFIG, "%s='%.60s...' has too many items", who, text);
            tok[nt++][len] = 0;
            len = 0;
        }
        if (!*p) break;
        if (sep) {
            if (nt == MAXTOK) return hbmi_error(HBM_ERR_CONFIG, "%s='%.60s...' has too many items", who, text);
            tok[nt][0] = *p, tok[nt][1] = 0, nt++;
        } else if (*p != ' ') {
            if (nt == MAXTOK) return hbmi_error(HBM_ERR_CONFIG, "%s='%.60s...' has too many items", who, text);
            if (len + 1 >= sizeof tok[0]) return hbmi_error(HBM_ERR_CONFIG, "%s: item '%.40s...' is too long", who, p - len);
            tok[nt][len++] = *p;
        }
    }
    hbm_config t = *c; /* all or nothing */
    for (size_t i = 0; i < nt; i++) {
        const char *key = tok[i];
        if (i + 1 >= nt || strcmp(tok[i + 1], ":"))
            return hbmi_error(HBM_ERR_CONFIG, "%s: expected ':' after '%s' (PyTorch's syntax is key:value,key:value)", who, key);
        i += 2;
        if (i >= nt) return hbmi_error(HBM_ERR_CONFIG, "%s: '%s:' has no value", who, key);
        char val[512] = "";
        if (!strcmp(tok[i], "[")) { /* a list, up to its ']' */
            size_t vl = 0;
            for (; i < nt; i++) {
                size_t tl = strlen(tok[i]);
                if (vl + tl >= sizeof val) return hbmi_error(HBM_ERR_CONFIG, "%s: the value of %s is too long", who, key);
                memcpy(val + vl, tok[i], tl + 1);
                vl += tl;
                if (!strcmp(tok[i], "]")) break;
            }
            if (i == nt) return hbmi_error(HBM_ERR_CONFIG, "%s: %s:%s has no closing ']'", who, key, val);
        } else {
            snprintf(val, sizeof val, "%s", tok[i]);
        }
        uint64_t n;
        hbm_status s = HBM_OK;
        if (!strcmp(key, "expandable_segments")) {
            if (strcmp(val, "True") && strcmp(val, "False")) return torch_bad(who, key, val, "True or False");
            t.expandable_segments = !strcmp(val, "True");
            set_torch_source(&t, HBM_OPT_expandable_segments, who);
        } else if (!strcmp(key, "max_split_size_mb") || !strcmp(key, "max_non_split_rounding_mb")) {
            if (!torch_uint(val, &n) || n < 20) return torch_bad(who, key, val, "an integer >= 20 (MiB)");
            uint64_t bytes = n > (UINT64_MAX >> 20) ? UINT64_MAX : n << 20;
            int split = !strcmp(key, "max_split_size_mb");
            *(split ? &t.max_split_size : &t.max_non_split_rounding) = bytes;
            set_torch_source(&t, split ? HBM_OPT_max_split_size_mb : HBM_OPT_max_non_split_rounding_mb, who);
        } else if (!strcmp(key, "garbage_collection_threshold")) {
            char *end;
            errno = 0;
            double f = strtod(val, &end);
            if (*end || errno || !(f > 0.0 && f < 1.0)) return torch_bad(who, key, val, "a number in (0.0, 1.0)");
            t.garbage_collection_threshold = f;
            set_torch_source(&t, HBM_OPT_garbage_collection_threshold, who);
        } else if (!strcmp(key, "roundup_power2_divisions")) {
            if ((s = parse_roundup(&t, who, val, 1))) return s;
            set_torch_source(&t, HBM_OPT_roundup_power2_divisions, who);
        } else if (!strcmp(key, "backend")) {
            if (!strcmp(val, "native")) t.allocator = HBM_ALLOCATOR_TORCH;
            else if (!strcmp(val, "cudaMallocAsync")) t.allocator = HBM_ALLOCATOR_CUDA_ASYNC;
            else return torch_bad(who, key, val, "native or cudaMallocAsync");
            set_torch_source(&t, HBM_OPT_allocator, who);
        } else if (!strcmp(key, "release_lock_on_cudamalloc") || !strcmp(key, "pinned_use_cuda_host_register") ||
                   !strcmp(key, "pinned_use_background_threads") || !strcmp(key, "graph_capture_record_stream_reuse")) {
            if (strcmp(val, "True") && strcmp(val, "False")) return torch_bad(who, key, val, "True or False");
            /* no effect on where memory goes */
        } else if (!strcmp(key, "pinned_num_register_threads") || !strcmp(key, "pinned_reserve_segment_size_mb")) {
            if (!torch_uint(val, &n) || !n) return torch_bad(who, key, val, "a positive integer");
        } else {
            return hbmi_error(HBM_ERR_CONFIG,
                              "%s: unrecognized option '%s' (PyTorch's: backend, expandable_segments, max_split_size_mb, "
                              "max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold, "
                              "release_lock_on_cudamalloc, pinned_*)", who, key);
        }
        if (i + 1 < nt) {
            if (strcmp(tok[i + 1], ","))
                return hbmi_error(HBM_ERR_CONFIG, "%s: expected ',' after %s:%s, found '%s'", who, key, val, tok[i + 1]);
            i++;
        }
    }
    *c = t;
    return HBM_OK;
}

/* ---- environment ----------------------------------------------------------------------- */

static const char *env_get(hbm_getenv_fn fn, void *user, const char *name) {
    const char *v = fn ? fn(user, name) : getenv(name);
    return v && *v ? v : NULL; /* an empty variable counts as unset */
}

static hbm_status apply_env(hbm_config *c, hbm_config_option o, hbm_getenv_fn fn, void *user, const char *name) {
    const char *v = env_get(fn, user, name);
    if (!v) return HBM_OK;
    hbm_status s = parse_value(c, o, name, v);
    if (!s) set_source(c, o, name);
    return s;
}

static void apply_policy_defaults(hbm_config *c) {
    if (c->policy == HBM_POLICY_JAX_LEGACY && !strcmp(c->source[HBM_OPT_fraction], "default")) {
        c->fraction = 0.90;
        set_source(c, HBM_OPT_fraction, "policy jax_legacy");
    }
}

hbm_status hbm_config_from_env_fn(hbm_config *c, hbm_getenv_fn fn, void *user) {
    if (!c) return hbmi_error(HBM_ERR_INVALID, "hbm_config_from_env: NULL config");
    hbm_config_default(c);
    const char *f1 = env_get(fn, user, "XLA_PYTHON_CLIENT_MEM_FRACTION");
    const char *f2 = env_get(fn, user, "XLA_CLIENT_MEM_FRACTION");
    if (f1 && f2)
        return hbmi_error(HBM_ERR_CONFIG,
                          "XLA_PYTHON_CLIENT_MEM_FRACTION='%s' and XLA_CLIENT_MEM_FRACTION='%s' are both set; "
                          "set only one (JAX refuses both too)", f1, f2);
    /* framework variables first, hbm's own after: later ones win */
    struct { hbm_config_option o; const char *name; } order[] = {
        {HBM_OPT_allocator, "TF_GPU_ALLOCATOR"},
        {HBM_OPT_preallocate, "XLA_PYTHON_CLIENT_PREALLOCATE"},
        {HBM_OPT_fraction, "XLA_PYTHON_CLIENT_MEM_FRACTION"},
        {HBM_OPT_fraction, "XLA_CLIENT_MEM_FRACTION"},
        {HBM_OPT_async_prealloc, "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC"},
    };
    hbm_status s;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *tf = order[i].o == HBM_OPT_allocator ? env_get(fn, user, order[i].name) : NULL;
        if (tf && strcmp(tf, "cuda_malloc_async") && strcmp(tf, "cuda_malloc")) continue; /* TF: BFC */
        if ((s = apply_env(c, order[i].o, fn, user, order[i].name))) return s;
    }
    /* XLA_PYTHON_CLIENT_ALLOCATOR=default leaves TF_GPU_ALLOCATOR's choice in place */
    const char *xa = env_get(fn, user, "XLA_PYTHON_CLIENT_ALLOCATOR");
    if (xa && !hbmi_streq_ci(xa, "default")) {
        if ((s = apply_env(c, HBM_OPT_allocator, fn, user, "XLA_PYTHON_CLIENT_ALLOCATOR"))) return s;
    } else if (xa && (s = parse_allocator("XLA_PYTHON_CLIENT_ALLOCATOR", xa, &(hbm_allocator_kind){0}))) {
        return s;
    }
    /* PyTorch's variable: its errors matter only to the torch policy (a JAX program must not
     * fail over a setting meant for PyTorch in the same environment) */
    const char *pt = env_get(fn, user, "PYTORCH_CUDA_ALLOC_CONF");
    char pt_error[512] = "";
    if (pt && hbm_config_apply_torch(c, pt, "PYTORCH_CUDA_ALLOC_CONF"))
        snprintf(pt_error, sizeof pt_error, "%s", hbm_last_error());
    for (int o = 0; o < HBM_OPT_COUNT_; o++)
        if ((s = apply_env(c, (hbm_config_option)o, fn, user, opts[o].hbm_env))) return s;
    if (pt_error[0] && c->allocator == HBM_ALLOCATOR_TORCH) return hbmi_error(HBM_ERR_CONFIG, "%s", pt_error);
    apply_policy_defaults(c);
    return HBM_OK;
}

hbm_status hbm_config_from_env(hbm_config *c) { return hbm_config_from_env_fn(c, NULL, NULL); }

hbm_status hbm_config_apply(hbm_config *c, const char *text) {
    if (!c || !text) return hbmi_error(HBM_ERR_INVALID, "hbm_config_apply: NULL argument");
    const char *p = text;
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p)) p++;
        if (!*p) break;
        const char *item = p;
        int depth = 0; /* roundup_power2_divisions=[256:1,>:8] keeps its commas */
        while (*p && (*p != ',' || depth)) {
            depth += *p == '[' ? 1 : *p == ']' && depth ? -1 : 0;
            p++;
        }
        size_t n = (size_t)(p - item);
        while (n && isspace((unsigned char)item[n - 1])) n--;
        char buf[256];
        if (n >= sizeof buf) return hbmi_error(HBM_ERR_CONFIG, "config item '%.40s...' is too long", item);
        memcpy(buf, item, n);
        buf[n] = 0;
        char *eq = strchr(buf, '=');
        if (!eq) return hbmi_error(HBM_ERR_CONFIG, "config item '%s' is not key=value (e.g. fraction=0.6)", buf);
        *eq = 0;
        char *key = buf, *val = eq + 1;
        size_t kl = strlen(key);
        while (kl && isspace((unsigned char)key[kl - 1])) key[--kl] = 0;
        while (isspace((unsigned char)*val)) val++;
        int found = -1;
        for (int o = 0; o < HBM_OPT_COUNT_; o++)
            if (!strcmp(key, opts[o].key)) found = o;
        if (found < 0) {
            char keys[512] = "";
            for (int o = 0; o < HBM_OPT_COUNT_; o++) {
                strcat(keys, o ? ", " : "");
                strcat(keys, opts[o].key);
            }
            return hbmi_error(HBM_ERR_CONFIG, "unknown config key '%s' (accepted: %s)", key, keys);
        }
        hbm_status s = parse_value(c, (hbm_config_option)found, key, val);
        if (s) return s;
        set_source(c, (hbm_config_option)found, "config");
    }
    apply_policy_defaults(c);
    return HBM_OK;
}

hbm_status hbm_config_resolve(const char *text, hbm_config *out) {
    if (!out) return hbmi_error(HBM_ERR_INVALID, "hbm_config_resolve: NULL config");
    if (!text) return hbm_config_from_env(out);
    hbm_config_default(out);
    /* observability settings (what is recorded and reported, never how memory is
     * allocated) come from the environment even under a program's own config string, as
     * mimalloc's MIMALLOC_* options do; keys in the string still win */
    static const hbm_config_option observe[] = {HBM_OPT_trace, HBM_OPT_trace_backtrace, HBM_OPT_report_top};
    for (size_t i = 0; i < sizeof observe / sizeof observe[0]; i++) {
        hbm_status s = apply_env(out, observe[i], NULL, NULL, opts[observe[i]].hbm_env);
        if (s) return s;
    }
    return hbm_config_apply(out, text);
}

/* ---- notes: framework values that mean something other than they seem ------------------- */

static void note(FILE *f, int *n, const char *fmt, ...) HBMI_PRINTF(3, 4);
static void note(FILE *f, int *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("note: ", f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    va_end(ap);
    ++*n;
}

int hbm_config_write_notes(FILE *f, hbm_getenv_fn fn, void *user) {
    int n = 0;
    if (!f) return 0;
    const char *v = env_get(fn, user, "XLA_PYTHON_CLIENT_PREALLOCATE");
    if (v && strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "false") && strcmp(v, "False") &&
        strcmp(v, "true") && strcmp(v, "True"))
        note(f, &n,
             "XLA_PYTHON_CLIENT_PREALLOCATE='%s' means preallocate=%s: JAX turns preallocation off only "
             "for '0', 'false' or 'False'", v, jax_preallocate(v) ? "true" : "false");
    static const char *const fr[] = {"XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION"};
    for (int i = 0; i < 2; i++) {
        double x;
        if (!(v = env_get(fn, user, fr[i])) || !py_float(v, &x) || !(x > 0.0) || x - x != 0.0) continue;
        char *end;
        double plain = strtod(v, &end);
        if (*end || plain != x)
            note(f, &n, "%s='%s' is read as %g (Python's float(): surrounding spaces and '_' between digits "
                        "are allowed)", fr[i], v, x);
        if (x > 1.0)
            note(f, &n, "%s='%s' is more than the whole device: XLA allows it for unified memory "
                        "(oversubscription); on a plain GPU preallocation or the first large request fails",
                 fr[i], v);
    }
    if ((v = env_get(fn, user, "TF_GPU_ALLOCATOR"))) {
        if (!strcmp(v, "cuda_malloc"))
            note(f, &n, "TF_GPU_ALLOCATOR='cuda_malloc' sends every request to cudaMalloc: allocator=platform");
        else if (!strcmp(v, "memory_guard"))
            note(f, &n, "TF_GPU_ALLOCATOR='memory_guard' is TensorFlow's debug allocator over BFC: "
                        "allocator=bfc here, without its guard bytes");
        else if (strcmp(v, "cuda_malloc_async"))
            note(f, &n, "TF_GPU_ALLOCATOR='%s' is not a value TensorFlow acts on (it knows cuda_malloc_async, "
                        "cuda_malloc, memory_guard, compared exactly): TensorFlow uses BFC, and so does hbm", v);
    }
    /* PyTorch's variable sets the torch allocator's settings: under another allocator (a
     * JAX program beside it, the default) they are shown and do nothing */
    hbm_config c;
    if ((v = env_get(fn, user, "PYTORCH_CUDA_ALLOC_CONF")) && !hbm_config_from_env_fn(&c, fn, user) &&
        c.allocator != HBM_ALLOCATOR_TORCH && strcmp(c.source[HBM_OPT_allocator], "PYTORCH_CUDA_ALLOC_CONF")) {
        char fraction[96] = "";
        if (c.allocator == HBM_ALLOCATOR_BFC || c.allocator == HBM_ALLOCATOR_CUDA_ASYNC)
            snprintf(fraction, sizeof fraction, ", with fraction %g (%s)", c.fraction,
                     strcmp(c.source[HBM_OPT_fraction], "default") ? c.source[HBM_OPT_fraction] : "JAX's default");
        note(f, &n, "PYTORCH_CUDA_ALLOC_CONF sets the settings of allocator=torch (PyTorch's caching allocator: "
                    "expandable_segments, max_split_size_mb, ...), which act only under it; the allocator here is "
                    "%s (%s)%s, as for a JAX program: HBM_ALLOCATOR=torch, or backend:native in "
                    "PYTORCH_CUDA_ALLOC_CONF, models PyTorch",
             hbm_allocator_kind_str(c.allocator), c.source[HBM_OPT_allocator], fraction);
    }
    return n;
}

uint64_t hbm_config_bytes_limit(const hbm_config *c, uint64_t total, uint64_t free_now) {
    if (c->limit) return c->limit < total ? c->limit : total;
    /* XLA's BFC under JAX's policy: total x fraction rounded up to 2 MiB (hbm_xla_gpu_limit,
     * xla/pjrt/gpu/gpu_helpers.cc); cuda_async and the others take total x fraction as it is */
    if (c->allocator == HBM_ALLOCATOR_BFC && c->policy == HBM_POLICY_JAX && c->fraction > 0 && c->fraction < 1)
        return hbm_xla_gpu_limit(total, c->fraction);
    uint64_t base = c->policy == HBM_POLICY_JAX_LEGACY ? free_now : total;
    double b = (double)base * c->fraction; /* a JAX fraction may exceed 1 */
    return b >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)b;
}

/* ---- printing ------------------------------------------------------------------------- */

/* "0" (none), "4" (the same everywhere) or PyTorch's list form "[1:4,2:0,>:8]" */
static void roundup_str(const hbm_config *c, char *buf, size_t n) {
    const uint32_t *t = c->roundup_power2_divisions;
    int same = 1;
    for (int i = 1; i < HBM_TORCH_ROUNDUP_INTERVALS; i++) same &= t[i] == t[0];
    if (same) {
        snprintf(buf, n, "%u", t[0]);
        return;
    }
    /* the tail of equal values becomes ">", which PyTorch applies from the last interval
     * named (inclusive): name that one too */
    int last = HBM_TORCH_ROUNDUP_INTERVALS - 1;
    while (last > 0 && t[last - 1] == t[HBM_TORCH_ROUNDUP_INTERVALS - 1]) last--;
    size_t l = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i <= last && l < n; i++) l += (size_t)snprintf(buf + l, n - l, "%u:%u,", 1u << i, t[i]);
    if (l < n) snprintf(buf + l, n - l, ">:%u]", t[HBM_TORCH_ROUNDUP_INTERVALS - 1]);
}

static void value_str(const hbm_config *c, hbm_config_option o, char *buf, size_t n) {
    char h[32];
    switch (o) {
    case HBM_OPT_allocator: snprintf(buf, n, "%s", hbm_allocator_kind_str(c->allocator)); break;
    case HBM_OPT_policy: snprintf(buf, n, "%s", c->policy == HBM_POLICY_JAX ? "jax" : "jax_legacy"); break;
    case HBM_OPT_preallocate: snprintf(buf, n, "%s", c->preallocate ? "true" : "false"); break;
    case HBM_OPT_release_on_oom: snprintf(buf, n, "%s", c->release_on_oom ? "true" : "false"); break;
    case HBM_OPT_fraction: snprintf(buf, n, "%g", c->fraction); break;
    case HBM_OPT_limit:
        if (c->limit) snprintf(buf, n, "%s", hbm_size_human(c->limit, h));
        else snprintf(buf, n, "0");
        break;
    case HBM_OPT_initial_region: snprintf(buf, n, "%s", hbm_size_human(c->initial_region, h)); break;
    case HBM_OPT_async_prealloc: snprintf(buf, n, "%" PRId64, c->async_prealloc); break;
    case HBM_OPT_report_top: snprintf(buf, n, "%d", c->report_top); break;
    case HBM_OPT_trace: snprintf(buf, n, "%s", c->trace); break;
    case HBM_OPT_trace_backtrace: snprintf(buf, n, "%s", c->trace_backtrace ? "true" : "false"); break;
    case HBM_OPT_expandable_segments: snprintf(buf, n, "%s", c->expandable_segments ? "true" : "false"); break;
    case HBM_OPT_max_split_size_mb:
    case HBM_OPT_max_non_split_rounding_mb: {
        uint64_t b = o == HBM_OPT_max_split_size_mb ? c->max_split_size : c->max_non_split_rounding;
        snprintf(buf, n, "%" PRIu64, b == UINT64_MAX ? 0 : b >> 20);
        break;
    }
    case HBM_OPT_roundup_power2_divisions: roundup_str(c, buf, n); break;
    case HBM_OPT_garbage_collection_threshold: snprintf(buf, n, "%g", c->garbage_collection_threshold); break;
    case HBM_OPT_COUNT_: buf[0] = 0; break;
    }
}

hbm_status hbm_config_write(const hbm_config *c, FILE *f, int json) {
    if (!c || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_config_write: NULL argument");
    char v[300];
    int kw = 6, vw = 5; /* the columns fit every key and value ("option", "value") */
    for (int o = 0; o < HBM_OPT_COUNT_; o++) {
        value_str(c, (hbm_config_option)o, v, sizeof v);
        if ((int)strlen(opts[o].key) > kw) kw = (int)strlen(opts[o].key);
        if ((int)strlen(v) > vw) vw = (int)strlen(v);
    }
    if (vw > 40) vw = 40; /* a long roundup list pushes only its own source */
    if (json) fputc('{', f);
    else fprintf(f, "%-*s %-*s %s\n", kw, "option", vw, "value", "source");
    for (int o = 0; o < HBM_OPT_COUNT_; o++) {
        value_str(c, (hbm_config_option)o, v, sizeof v);
        if (json)
            fprintf(f, "%s\"%s\": {\"value\": \"%s\", \"source\": \"%s\"}", o ? ", " : "", opts[o].key, v, c->source[o]);
        else
            fprintf(f, "%-*s %-*s %s\n", kw, opts[o].key, vw, v, c->source[o]);
    }
    if (json) fputs("}\n", f);
    return HBM_OK;
}

hbm_status hbm_config_write_doc(FILE *f) {
    if (!f) return hbmi_error(HBM_ERR_INVALID, "hbm_config_write_doc: NULL stream");
    for (int o = 0; o < HBM_OPT_COUNT_; o++) {
        fprintf(f, "  %-15s %s\n", opts[o].key, opts[o].doc);
        fprintf(f, "  %-15s   values: %s\n", "", opts[o].accepted);
        fprintf(f, "  %-15s   env:    %s%s%s\n", "", opts[o].hbm_env, opts[o].framework_env ? ", " : "",
                opts[o].framework_env ? opts[o].framework_env : "");
    }
    return HBM_OK;
}
