/* hbm/fleet.h - many ranks at once: the summary of each input (a PyTorch snapshot, an hbm
 * trace, any trace hbm reads; each device of a file is a rank), read on threads, and the
 * fleet across them: the median and spread of each figure, outliers over the median by a
 * stated margin, groups of ranks that behave alike, and what the worst rank holds at its
 * peak that the median rank does not (hbm diff of the two).
 *
 *   hbm_fleet_options o;  hbm_fleet_options_default(&o);  o.jobs = 8;
 *   const char *in[] = {"rank0.pickle", "rank1.pickle", "snapshots/"};
 *   hbm_fleet *fl;
 *   if (!hbm_fleet_run(in, 3, &o, &fl)) { hbm_fleet_write(fl, HBM_FLEET_TEXT, stdout); hbm_fleet_free(fl); }
 *
 * A summary (docs/fleet.md: one JSON document per input, {"hbm_summary": 1, ...}) is an
 * input too: a cluster job writes them next to the snapshots (hbm_fleet_summary_file), and
 * the fleet is reduced from them as it is from the snapshots, with the same result.
 * Thread-safe: calls on different objects may run at once. */
#ifndef HBM_FLEET_H
#define HBM_FLEET_H

#include <stddef.h>
#include <stdio.h>

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbm_fleet_options {
    int jobs;               /* threads reading files; 0 = the cores online (default) */
    double margin;          /* outlier: more than this over the median (default 0.10) */
    double group_tolerance; /* a group: peaks in use within this of its smallest (default 0.02) */
    int top;                /* rows of ranks listed in the text, sites per rank (default 15) */
    const char *pages;      /* a folder: each rank's own hbm view page written there
                             * (rank-N.html), linked from the HTML view; NULL: none */
    const char *title;      /* page / report title; NULL: "N ranks" */
} hbm_fleet_options;

typedef struct hbm_fleet hbm_fleet;

typedef enum hbm_fleet_form { HBM_FLEET_TEXT = 0, HBM_FLEET_JSON = 1, HBM_FLEET_HTML = 2 } hbm_fleet_form;

HBM_API void hbm_fleet_options_default(hbm_fleet_options *o);

/* The fleet of inputs: files (traces, snapshots, summaries) and folders (their files, by
 * name; a file F whose folder also holds F.summary.json is read from the summary). An input
 * that cannot be read is a rank with its error, the rest are read; HBM_ERR_INVALID when no
 * input is given. */
HBM_API hbm_status hbm_fleet_run(const char *const *inputs, size_t n, const hbm_fleet_options *o, hbm_fleet **out);
/* The same from summary documents already in memory (docs[i], lens[i] bytes; names[i] for
 * errors): how a caller reduces summaries a cluster computed (python: hbm.fleet(engine="dask")). */
HBM_API hbm_status hbm_fleet_from_summaries(const char *const *docs, const size_t *lens, const char *const *names,
                                            size_t n, const hbm_fleet_options *o, hbm_fleet **out);
HBM_API void hbm_fleet_free(hbm_fleet *f);

/* Ranks (devices of the inputs), and those that could not be read. */
HBM_API size_t hbm_fleet_ranks(const hbm_fleet *f);
HBM_API size_t hbm_fleet_failed(const hbm_fleet *f);

/* The fleet view: a table that fits 100 columns, JSON, or one self-contained HTML page. */
HBM_API hbm_status hbm_fleet_write(const hbm_fleet *f, hbm_fleet_form form, FILE *out);
/* The same into a buffer with snprintf's rules (hbm/json_api.h). */
HBM_API hbm_status hbm_fleet_format(const hbm_fleet *f, hbm_fleet_form form, char *buf, size_t cap, size_t *len);

/* One input's summary document: to a file written whole ("-": standard output), or, read
 * once, in a string of its own size (hbm/json_api.h's *_string rules: freed with
 * hbm_string_free). An input that cannot be read is an error (no document). */
HBM_API hbm_status hbm_fleet_summary_file(const char *input, const char *out);
HBM_API hbm_status hbm_fleet_summary_string(const char *input, char **out, size_t *len);
/* Whether the first bytes of a file are a summary document. */
HBM_API int hbm_fleet_is_summary(const void *head, size_t n);
/* The same of a file's first bytes; 0 when it cannot be opened. */
HBM_API int hbm_fleet_is_summary_file(const char *path);

/* --- the modules of an XLA dump folder (hbm plan DUMPDIR) ----------------------------------
 * Every HLO module of the folder (XLA's --xla_dump_to: its *after_optimizations.txt when it
 * has them, else every file of HLO text) planned on jobs threads: each module's need (what
 * hbm plan FILE says the executable needs), with a target its verdict, and the largest. */
struct hbm_plan_target;
typedef struct hbm_plan_dir hbm_plan_dir;
/* target: NULL or capacity 0 for no verdict. HBM_ERR_INVALID naming dir when it holds no module. */
HBM_API hbm_status hbm_plan_dir_run(const char *dir, int jobs, const struct hbm_plan_target *target, hbm_plan_dir **out);
/* Text (the largest top modules, the rest summarised; 100 columns) or JSON (every module). */
HBM_API hbm_status hbm_plan_dir_write(const hbm_plan_dir *d, int json, size_t top, FILE *f);
/* Modules, those that could not be planned, those that do not fit the target. */
HBM_API void hbm_plan_dir_counts(const hbm_plan_dir *d, size_t *modules, size_t *failed, size_t *not_fitting);
HBM_API void hbm_plan_dir_free(hbm_plan_dir *d);

#ifdef __cplusplus
}
#endif
#endif
