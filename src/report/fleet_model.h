/* fleet_model.h - the fleet view's result (many ranks at once), computed once by the engine
 * (src/api/fleet.c) and rendered by src/report/fleet_report.c: one summary per rank (a
 * device of an input), the figures across ranks, outliers, groups and the diff of the worst
 * rank against the median one. */
#ifndef HBM_REPORT_FLEET_MODEL_H
#define HBM_REPORT_FLEET_MODEL_H

#include "core/internal.h"
#include "hbm/fleet.h"
#include "hbm/memprof.h"
#include "report/view_model.h"

#define HBMI_SUMMARY_VERSION 1

/* The buffers live at a rank's peak grouped as hbm diff groups them. */
typedef struct hbmi_site {
    char *op, *source, *category;
    uint64_t bytes, buffers;
} hbmi_site;

typedef struct hbmi_rank {
    char *name;        /* the input's path, with "#device" when its file holds several */
    char *path;        /* the input (a summary: the path the summary names) */
    char *device;      /* "cuda:0", "" */
    char *error;       /* why it could not be read, or NULL */
    char *page;        /* its own hbm view page (file name in the pages folder), or NULL */
    int device_index;
    uint64_t events, allocs, frees, ooms;
    uint64_t peak_use, peak_res, res_at_peak; /* reserved at the event of the peak in use */
    int64_t peak_event, first_oom_event;
    uint64_t live_at_peak, live_at_peak_bytes;
    double frag;       /* the fragmentation at the peak the input states (frag_stated) */
    int frag_stated;   /* 1: a profile's memory profile (XProf's fragmentation stat), else
                        * computed from reserved and in use (hbmi_rank_frag) */
    hbmi_site *sites;  /* largest first (as hbm diff sorts one side) */
    size_t nsites;
    /* set by the reduction */
    int group;         /* 1-based; 0 when it failed */
    int outlier;       /* bit 0: in use, bit 1: reserved over the median by more than the margin */
    double over[2];    /* in use [0] and reserved [1] over the fleet's median, as a fraction */
} hbmi_rank;

typedef struct hbmi_stat {
    double min, median, max;
} hbmi_stat;

typedef struct hbmi_group {
    size_t first, count; /* ranks by peak in use (order[first, first + count)) */
    uint64_t lo, hi;     /* peak in use of its smallest and largest */
} hbmi_group;

struct hbm_fleet {
    hbm_fleet_options o;
    size_t inputs;       /* inputs given (after a folder's expansion) */
    hbmi_rank *ranks;    /* in input order, a file's devices in its order */
    size_t n, nfailed;
    size_t *order;       /* the ranks read, by peak in use (ascending, then name) */
    size_t nok;
    hbmi_stat use, res, frag, ooms;
    hbmi_group *groups;
    size_t ngroups;
    size_t worst, median; /* rank indices (valid when nok > 0) */
    hbmi_contrib *diff;   /* worst (B) against the median rank (A) */
    size_t ndiff;
    double seconds;       /* reading and reducing (not in --json: it differs run to run) */
    int jobs;             /* threads used */
};

/* One input's summary document (format version HBMI_SUMMARY_VERSION) for its ranks. */
void hbmi_summary_write(FILE *f, const char *path, const hbmi_rank *r, size_t n);
/* The fragmentation at the peak: a profile's own (XProf's stat at the peak event), else
 * (reserved - in use) / reserved at the peak of bytes in use; 0 when nothing reserved. */
static inline double hbmi_rank_frag(const hbmi_rank *r) {
    if (r->frag_stated) return r->frag;
    return r->res_at_peak > r->peak_use ? (double)(r->res_at_peak - r->peak_use) / (double)r->res_at_peak : 0.0;
}
/* One rank's figures as JSON (the fleet's ranks list; sites: at most top, -1 all). */
void hbmi_rank_json(FILE *f, const hbmi_rank *r, long top);

#endif
