/* src/fit/fit_result.h - the result of hbm_fit_run, shared by fit.c and fit_report.c. */
#ifndef HBM_FIT_RESULT_H
#define HBM_FIT_RESULT_H

#include "fit/fit_internal.h"
#include "fit/fit_text.h"

/* A buffer [L, ...] a loop writes one slice of per iteration (dynamic-update-slice into its
 * carried buffer) under jvp(...) and a loop under transpose(...) reads: what a scan over L
 * layers saves for its backward pass (fit_jax.c). */
typedef struct hbmi_jax_residual {
    const char *loop, *backward_loop; /* the forward and backward while instructions */
    uint32_t comp, loop_ins, index;   /* the loop's computation and instruction; its element */
    uint32_t fwd_body;                /* the forward loop's body */
    uint32_t bwd_body, bwd_index;     /* the backward loop's body, the element it reads it as */
    int64_t layers;                   /* L */
    uint64_t bytes;                   /* the whole buffer */
    const char *shape, *per_layer;    /* "bf16[32,4,8192,4096]", "bf16[4,8192,4096]" */
    int carry;                        /* the slice saved is a carried value: the layer's input */
    int64_t carry_elem;               /* carry: the loop element it is (-1: not the carry) */
    uint32_t value_ins;               /* not the carry: the forward body instruction that computes
                                       * it (UINT32_MAX: inside the stacking fusion) */
    uint64_t recompute_peak;          /* planned peak with the backward loop recomputing it (0: not) */
    char why_estimate[200];           /* why it is not planned recomputed ("" : it is, or not tried) */
    char recompute_note[200];         /* planned: how the clones read an input not as it was ("": as it was) */
    const char *op_name;              /* what computes the slice (or the update, for a carry) */
    const char *source_file;
    int source_line;
    int at_peak;                      /* among the plan's peak buffers */
    uint64_t estimate;                /* bytes - one layer's slice: estimated, not planned */
    uint64_t host_peak;               /* planned peak with the buffer in host memory (0: not planned) */
    uint64_t with_set_peak;           /* planned peak with it there and the chosen set besides (0: not) */
    uint32_t with_set_changes;        /* the chosen set's edits in that plan */
    uint64_t recompute_flops;         /* its computation again, once per layer (0: none counted) */
    const char *maxtext;              /* MaxText's checkpoint name, or NULL */
} hbmi_jax_residual;

struct hbm_fit_result {
    hbm_hlo_module *m;         /* the module as given (the caller's; outlives the result) */
    hbm_plan_options popt;     /* the rules every changed module is planned with */
    hbm_fit_summary sum;
    const hbmi_fit_rates *rates;
    hbm_fit_change *ch;        /* candidates listed: settings, donations, then changes */
    hbmi_fit_edit *ed;         /* the edit of each */
    size_t n_ch, cap_ch, cap_ed;
    hbmi_arena strings;
    char setting[320]; /* the checked fraction advice, or why none fits */
    char *text;                /* the chosen module, as planned */
    size_t text_len;
    uint64_t final_peak;
    uint64_t temp_after_don;
    int64_t xla_limit;         /* the limit XLA's algorithm worked to (its tracker's bytes) */
    int64_t xla_before, xla_after; /* its tracker's peak before and after, as XLA prints them */
    uint32_t n_candidates;     /* candidates the model has */
    uint32_t n_plans;          /* modules planned */
    double seconds;
    int has_backward;          /* some op_name under transpose(...): autodiff saved values */
    hbmi_jax_residual *res;    /* scan residuals */
    size_t best_res;           /* the one of sum.residual_peak (when that is not 0) */
    size_t recompute_res;      /* the one of sum.recompute_peak (when that is not 0) */
    size_t n_res, cap_res;
    hbm_plan_buffer left[5];   /* the largest buffers at the final peak no change touched */
    size_t n_left;
};

/* The edits that put residual x's buffer in host memory (S(5)): into e (cap), their count, 0
 * when they do not fit in cap or the loop is not found. */
size_t hbmi_jax_residual_edits(const hbm_hlo_module *m, const hbmi_jax_residual *x, hbmi_fit_edit *e, size_t cap);
/* The module with residual x's buffer cut to one layer and the backward loop computing the
 * slice again (fit_recompute.c), into *text (malloc'ed); all: every residual found (the
 * carry's own residual gives the layer's input); *flops: the clones', once per layer.
 * HBM_ERR_UNSUPPORTED with why set when the
 * backward loop does not hold what it is computed from; written, why says how the clones read an
 * input that is not the value itself (a narrower copy, converted back), else "". */
hbm_status hbmi_jax_recompute_write(const hbm_hlo_module *m, const hbmi_jax_residual *x, const hbmi_jax_residual *all,
                                    size_t n_all, char **text, size_t *len, uint64_t *flops, char *why,
                                    size_t why_cap);
/* plan's explanation in JAX's terms (fit_terms.h): a result holding only whether the module
 * has a backward pass and its scan residuals, nothing planned; *out NULL for a module JAX did
 * not compile (no op_name begins with jit( or pjit(). */
hbm_status hbmi_fit_terms_run(const hbm_plan *p, hbm_fit_result **out);
/* Find the scan residuals of r->m (p: its plan, for which are at the peak). */
hbm_status hbmi_jax_residuals(hbm_fit_result *r, const hbm_plan *p);

const char *hbmi_fit_str(hbm_fit_result *r, const char *p, size_t n);

#endif
