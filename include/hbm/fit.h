/* hbm/fit.h - what change makes an XLA module fit: settings, donation, rematerialization and
 * host offload, each verified by planning the changed module with hbm_plan_run().
 *
 * hbm_fit_run() reads the plan of a scheduled module, lists the changes that can take bytes
 * off its peak (an input_output_alias for a parameter that could be donated; a value live
 * across the peak recomputed before its later uses by a clone "NAME.remat"; a value with a
 * long idle span moved to host memory S(5) with copy-start/copy-done pairs), chooses the set
 * that reaches the target at the least cost by a branch-and-bound search over the whole
 * schedule (a time budget; proven optimal or not), writes the changed module as HLO text and
 * plans it again: every figure it reports is that of a plan, never an estimate. It also runs
 * XLA's own HloRematerialization ("always remat", with the limit GetSchedulerMemoryLimit
 * gives) on the same module as the baseline, verified the same way.
 *
 *   hbm_fit_options o;  hbm_fit_result *r;
 *   hbm_fit_options_default(&o);
 *   o.target_bytes = 30ull << 30;              // peak to reach (capacity x framework limit)
 *   hbm_fit_run(m, &o, &r);                    // m: a parsed module (hbm/hlo.h)
 *   hbm_fit_text(r, stdout);                   // or hbm_fit_json, hbm_fit_emit
 *   hbm_fit_free(r);
 */
#ifndef HBM_FIT_H
#define HBM_FIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hbm/hlo.h"
#include "hbm/plan.h"
#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which set the result's chosen set (and --emit) is: hbm's search, XLA's algorithm, none. */
typedef enum hbm_fit_remat { HBM_FIT_REMAT_HBM = 0, HBM_FIT_REMAT_XLA, HBM_FIT_REMAT_NONE } hbm_fit_remat;
/* "hbm"/"xla"/"none" -> *out */
HBM_API hbm_status hbm_fit_remat_parse(const char *s, hbm_fit_remat *out);

typedef struct hbm_fit_options {
    hbm_plan_options plan;  /* the rules (backend, alignment) */
    uint64_t target_bytes;  /* the peak to reach (0: the module's own peak, nothing to do) */
    uint64_t capacity;      /* the device's bytes, for the settings advice (0: none) */
    double fraction;        /* the framework's share of capacity (0 or 1: none; HBM_FRACTION_BACKEND: the backend's default) */
    const char *device;     /* known device name (host bandwidth table), or NULL */
    double timeout_s;       /* time budget of the search (0: 2 s) */
    hbm_fit_remat remat;    /* whose set is chosen (default HBM) */
    int no_offload, no_donate, no_remat; /* leave a kind of change out */
} hbm_fit_options;

HBM_API void hbm_fit_options_default(hbm_fit_options *o);

typedef enum hbm_fit_kind { HBM_FIT_SETTING = 0, HBM_FIT_DONATE, HBM_FIT_REMATERIALIZE, HBM_FIT_OFFLOAD } hbm_fit_kind;
HBM_API const char *hbm_fit_kind_str(hbm_fit_kind k); /* "setting", "donate", "remat", "offload" */

/* One candidate change. Strings stay valid while the result lives. */
typedef struct hbm_fit_change {
    hbm_fit_kind kind;
    const char *instruction; /* the value's instruction (the parameter for a donation) */
    const char *shape;       /* "f32[1024,1024]" */
    const char *op_name;     /* metadata, "" if none */
    const char *source_file;
    int source_line;
    int param_number;        /* donation: the parameter; -1 otherwise */
    uint64_t bytes;          /* the value's size */
    uint64_t model_bytes;    /* bytes the liveness model says it takes off the peak */
    int64_t verified_peak;   /* peak of the module with this change alone, re-planned
                                (-1: not planned alone) */
    uint64_t recompute_flops; /* remat: FLOPs of the clone (dot/convolution/elementwise) */
    uint64_t bytes_read;      /* remat: operand bytes the clone reads; offload: bytes moved */
    double cost_s;            /* estimated seconds it adds on the device (table in fit.md) */
    int chosen;               /* in hbm's set (settings, donations: always) */
    int xla_chosen;           /* in the set of XLA's algorithm */
    const char *jax;          /* the JAX-side change, one line */
} hbm_fit_change;

/* One verified set: what it is and what the changed module's plan says. */
typedef struct hbm_fit_set {
    int found;               /* a set was formed (may still miss the target) */
    int fits;                /* its re-planned peak <= target */
    int proven_optimal;      /* hbm: the search finished (least cost among its candidates) */
    int from_baseline;       /* hbm: XLA's set (with hbm's donations) was the better verified one */
    uint64_t peak_bytes;     /* re-planned peak of the changed module */
    uint64_t recompute_flops;
    uint64_t offload_bytes;  /* bytes moved each way to the host */
    double cost_s;
    size_t n_changes;
    double seconds;          /* time spent searching and verifying */
    char xla_message[256];   /* baseline: XLA's "Can't reduce memory use below ..." or "" */
} hbm_fit_set;

typedef struct hbm_fit_result hbm_fit_result;

typedef struct hbm_fit_summary {
    const char *module;
    uint64_t target_bytes;
    uint64_t peak_before;     /* the module as given */
    uint64_t argument_bytes, output_bytes, alias_bytes, temp_bytes;
    hbm_fit_set hbm;          /* hbm's search */
    hbm_fit_set xla;          /* the baseline, XLA's algorithm */
    hbm_fit_remat chosen;     /* which of the two the emitted module is */
    int fits;                 /* the chosen set's re-planned peak <= target */
    size_t n_changes;         /* candidates listed */
    const char *setting;      /* the framework setting that fits it, or "" */
    /* When the set misses: the lowest planned peak with a scan residual in host memory (a
     * checkpoint policy in the JAX code), alone or with the set besides; 0 when none was
     * planned. residual_fits: that peak <= target (then exit status 0 too). */
    uint64_t residual_peak;
    int residual_alone;       /* residual_peak is the residual alone, no XLA-side change */
    int residual_fits;
    /* When the set misses: the lowest planned peak of the module with a scan residual
     * recomputed by the backward loop (the policy that stops saving it), 0 when none was
     * planned. recompute_fits: that peak <= target; then hbm_fit_emit writes that module
     * (the set's is not written) and the exit status is 0 too. */
    uint64_t recompute_peak;
    int recompute_fits;
} hbm_fit_summary;

/* Fit module m (parsed, ideally scheduled) to o->target_bytes. m is not changed. */
HBM_API hbm_status hbm_fit_run(hbm_hlo_module *m, const hbm_fit_options *o, hbm_fit_result **out);
HBM_API void hbm_fit_free(hbm_fit_result *r);

HBM_API hbm_status hbm_fit_get_summary(const hbm_fit_result *r, hbm_fit_summary *out);
/* Candidate i (0-based, ranked: chosen first, then by bytes); NULL past the end. */
HBM_API const hbm_fit_change *hbm_fit_change_at(const hbm_fit_result *r, size_t i);

/* Text, lines of at most 100 columns: the verdict, the chosen set beside XLA's, the changes. */
HBM_API hbm_status hbm_fit_text(const hbm_fit_result *r, FILE *f, size_t top);
/* JSON: target, before/after, both sets, every candidate with "chosen". */
HBM_API hbm_status hbm_fit_json(const hbm_fit_result *r, FILE *f);
/* The changed module of the chosen set as scheduled HLO text (what was planned). */
HBM_API hbm_status hbm_fit_emit(const hbm_fit_result *r, FILE *f);

/* The same three into buf (snprintf rules: *len is the whole length, buf holds at most
 * cap - 1 bytes and a NUL), for bindings. */
HBM_API hbm_status hbm_fit_text_format(const hbm_fit_result *r, size_t top, char *buf, size_t cap, size_t *len);
HBM_API hbm_status hbm_fit_json_format(const hbm_fit_result *r, char *buf, size_t cap, size_t *len);
HBM_API hbm_status hbm_fit_emit_format(const hbm_fit_result *r, char *buf, size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
