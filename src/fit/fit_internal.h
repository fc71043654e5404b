/* src/fit/fit_internal.h - shared by the parts of hbm fit: the liveness model over the entry
 * computation's schedule (fit_model.c), the searches (fit.c: hbm's branch and bound, fit_xla.c:
 * XLA's HloRematerialization), the module writer (fit_emit.c) and the formatters
 * (fit_report.c). */
#ifndef HBM_FIT_INTERNAL_H
#define HBM_FIT_INTERNAL_H

#include "hbm/fit.h"
#include "plan/plan_fit.h"

/* One change as the writer applies it. Remat: a clone of instruction `ins` placed before
 * instruction `at` of the same computation, read by the users at or after `at`; `drop` when the original is left
 * without users (a move). Offload: copies to host after `from` and back before `at`.
 * Donate: parameter `param` aliased to output index `out` (-1: the root is the array). */
/* An edit kind of fit's own, beside hbm_fit_kind's: an array of an instruction's shape (element
 * `out` of its tuple, -1 the shape) written in host memory, S(5) (a scan residual moved there). */
#define HBMI_FIT_HOST_ELEM 16

typedef struct hbmi_fit_edit {
    uint8_t kind; /* hbm_fit_kind */
    uint8_t drop;
    uint32_t comp;          /* the computation of ins, from and at */
    uint32_t ins, from, at;
    int64_t param;
    int32_t out;
} hbmi_fit_edit;

/* Write module m with the edits applied as HLO text to f. */
hbm_status hbmi_fit_write(const hbm_hlo_module *m, const hbmi_fit_edit *e, size_t n, FILE *f);
/* Every computation written line by line, no edit (the writer's round-trip check). */
hbm_status hbmi_fit_write_all(const hbm_hlo_module *m, FILE *f);
/* Write into a malloc'ed buffer (*text, *len). */
/* Item idx of a comma list at depth 0 of [s, e) (s after its opening bracket), blanks and an
 * index comment skipped: [*a, *b); 0 when the list has no such item. */
int hbmi_fit_list_item(const char *s, const char *e, int64_t idx, const char **a, const char **b);
/* [p, e) past blanks and index comments (the "index=5" comments XLA writes in tuple shapes). */
const char *hbmi_fit_blank(const char *p, const char *e);
hbm_status hbmi_fit_write_mem(const hbm_hlo_module *m, const hbmi_fit_edit *e, size_t n, char **text, size_t *len);
/* A name for a line the writer adds: base + suffix, unique in m (".1", ".2" ...); a clone of a
 * clone counts on as XLA names it ("x.remat" -> "x.remat2"). Malloc'ed; NULL out of memory. */
char *hbmi_fit_fresh_name(const hbm_hlo_module *m, hbmi_str base, const char *suffix);

/* The candidate as the model sees it: steps (entry instruction indices) [lo, hi] where it
 * takes `bytes` off, and the operand extensions it adds (remat). */
typedef struct hbmi_fit_pen {
    uint32_t lo, hi;
    uint64_t bytes;
} hbmi_fit_pen;

typedef struct hbmi_fit_cand {
    hbmi_fit_edit edit;
    uint32_t lo, hi;     /* steps freed, inclusive */
    uint64_t bytes;
    uint32_t group;      /* the value: at most one candidate of a group is chosen */
    uint8_t depth;       /* its computation's depth below the entry (0: the entry) */
    uint32_t n_pen;
    hbmi_fit_pen pen[4]; /* operand extensions (remat; more operands: not a candidate) */
    uint64_t flops, bytes_read;
    double cost_s;
    int64_t verified_peak;
    int chosen, xla_chosen;
} hbmi_fit_cand;

/* One clone XLA's walk made (fit_xla.c): of instruction `ins` of computation `comp` when src is
 * UINT32_MAX, else of clone src (an index of the model's xc[]); placed before instruction
 * at_ins, or before clone at_src when that is not UINT32_MAX; gen 1 for a clone of the
 * instruction, 2 for a clone of that clone ...; src_dead when its source is left without
 * users (a move: the source is not written). */
typedef struct hbmi_fit_xla_clone {
    uint32_t comp, ins, src, at_ins, at_src;
    uint8_t gen, src_dead;
} hbmi_fit_xla_clone;

typedef struct hbmi_fit_model {
    const hbm_plan *p;
    const hbm_hlo_module *m;
    uint32_t n;          /* entry steps */
    int64_t *live;       /* per time: device bytes live, parameters and constants aside */
    int64_t *live_xla;   /* the same without the outputs (XLA's tracker) */
    int64_t max_live;
    uint64_t fixed;      /* peak - temp: arguments + outputs - aliased + constants */
    uint64_t args, outputs_all;
    uint64_t params_in_live; /* bytes of the parameters that may go to host memory, in live[] */
    uint8_t *depth;      /* per computation: calls below the entry (0 entry and unreached) */
    uint32_t n_cand, cap_cand;
    hbmi_fit_cand *cand;
    hbmi_fit_xla_clone *xc; /* XLA's walk on the instruction lists (a TPU module): its clones */
    uint32_t n_xc;
} hbmi_fit_model;

/* Device rates for the cost of a change (fit_model.c's table, sources in docs/fit.md). */
typedef struct hbmi_fit_rates {
    const char *name;
    double flops;     /* FLOP/s */
    double hbm_bw;    /* device memory bytes/s */
    double host_bw;   /* host link bytes/s, each way */
} hbmi_fit_rates;
const hbmi_fit_rates *hbmi_fit_rates_for(const char *device, hbm_backend b);

/* donated: per entry parameter, chosen for a donation (not offloaded); may be NULL */
hbm_status hbmi_fit_model_build(const hbm_plan *p, const hbmi_fit_rates *r, int remat, int offload,
                                const uint8_t *donated, hbmi_fit_model *out);
void hbmi_fit_model_free(hbmi_fit_model *mo);

/* XLA's HloRematerialization on the model: marks cand[].xla_chosen; limit in bytes as XLA's
 * tracker counts (arguments + temps); fills msg with XLA's warning when it cannot reach it. */
typedef struct hbmi_fit_xla_rule {
    int count_args;           /* the tracker counts the entry parameters (GPU) or not (TPU) */
    uint64_t min_remat_bytes; /* min_remat_size: smaller values are not candidates */
    int64_t shown_outputs;    /* added to the limit and peaks in the warning (TPU: outputs) */
    int64_t *before, *after;  /* out, may be NULL: the tracker's peak before and after, as shown */
    int lists;                /* walk the instruction lists (clones placed and cloned again as XLA
                                 does, each computation with its own limit): mo->xc */
} hbmi_fit_xla_rule;
void hbmi_fit_xla(hbmi_fit_model *mo, int64_t limit, const hbmi_fit_xla_rule *rule, char *msg, size_t cap);
/* The module with the clones of xc[] (written in rounds: the clones of instructions, then of
 * those clones ...), as HLO text in a malloc'ed buffer. */
hbm_status hbmi_fit_xla_write(const hbmi_fit_model *mo, char **text, size_t *len);
/* hbmi_fit_can_clone: XLA's IsRematerializable on one instruction (fit_model.c). */
int hbmi_fit_can_clone(const hbm_hlo_module *m, const hbmi_comp *c, const hbmi_instr *in);
/* Append a candidate to the model (out of memory: an error status). */
hbm_status hbmi_fit_model_add(hbmi_fit_model *mo, const hbmi_fit_cand *c);

/* hbm's search: choose candidates (cand[].chosen) so that live - savings <= target at every
 * step at least cost; returns 1 if a set reaches it, 0 if the best found does not (then the
 * set is the greedy deepest cut); *proven when the search finished within the time. */
int hbmi_fit_search(hbmi_fit_model *mo, int64_t target, double timeout_s, int *proven);

/* The pass of JAX's autodiff an op_name names (fit_jax.c). */
enum { HBMI_JAX_OTHER = 0, HBMI_JAX_FWD, HBMI_JAX_BWD, HBMI_JAX_REMAT };
int hbmi_jax_pass(const char *op, size_t n);
/* Some op_name is under transpose(...) or rematted_computation: the module has a backward pass. */
int hbmi_jax_has_backward(const hbm_hlo_module *m);
/* The user's file and line of an instruction: its metadata, else its stack frame, wrappers
 * (contextlib.py, functools.py, JAX's and Flax's internals) skipped; 0 when unknown. */
int hbmi_jax_where(const hbm_hlo_module *m, const hbmi_instr *in, char *file, size_t cap, int *line);
/* The Flax module path an op_name holds ("Model/layers/wi"), 0 when none. */
int hbmi_jax_module_path(const char *op, char *out, size_t cap);
/* MaxText's checkpoint name of a value from its op_name ("mlpwi_0"), or NULL; the remat_policy
 * values that recompute it and that offload it (NULL when none). */
const char *hbmi_jax_maxtext_name(const char *op);
void hbmi_jax_maxtext_policies(const char *name, const char **recompute, const char **offload);

/* FLOPs of an instruction as the cost model counts them (a fusion: what it fuses). */
uint64_t hbmi_fit_instr_flops(const hbm_hlo_module *m, const hbmi_comp *c, const hbmi_instr *in);

/* XLA's HumanReadableNumBytes: "1.50GiB" */
void hbmi_fit_xla_bytes(int64_t b, char *buf, size_t cap);

#endif
