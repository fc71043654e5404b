/* src/fit/fit_result.h - the result of hbm_fit_run, shared by fit.c and fit_report.c. */
#ifndef HBM_FIT_RESULT_H
#define HBM_FIT_RESULT_H

#include "fit/fit_internal.h"

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
    uint32_t n_candidates;     /* candidates the model has */
    uint32_t n_plans;          /* modules planned */
    double seconds;
    hbm_plan_buffer left[5];   /* the largest buffers at the final peak no change touched */
    size_t n_left;
};

const char *hbmi_fit_str(hbm_fit_result *r, const char *p, size_t n);

#endif
