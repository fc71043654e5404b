/* hbm/pack.h - static memory packing: give every buffer of a timeline an offset so that
 * no two buffers live at the same time overlap in memory (the dynamic storage allocation
 * problem), with heuristics and an exact search.
 *
 *   hbm_pack_options o;  hbm_pack_result r;
 *   hbm_pack_options_default(&o);
 *   o.algo = HBM_PACK_EXACT;  o.capacity = 1 << 20;
 *   hbm_status s = hbm_pack(tl, &o, &r);   // offsets written into tl->buffers[i].offset
 */
#ifndef HBM_PACK_H
#define HBM_PACK_H

#include <stdint.h>
#include <stdio.h>

#include "hbm/status.h"
#include "hbm/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hbm_pack_algo {
    HBM_PACK_GREEDY_SIZE,  /* TFLite's greedy by size */
    HBM_PACK_XLA_SPATIAL,  /* XLA's decreasing-size best fit, spatial order */
    HBM_PACK_XLA_TEMPORAL, /* XLA's decreasing-size best fit, temporal order */
    HBM_PACK_XLA,          /* the smaller of the two, as XLA's buffer assignment does */
    HBM_PACK_BEST,         /* hbm's best heuristic (budget: HBM_PACK_BEST_DEFAULT_S of
                            * counted work, or timeout_s of wall time) */
    HBM_PACK_EXACT         /* exact search (anytime with a timeout) */
} hbm_pack_algo;

/* The budget of HBM_PACK_BEST when timeout_s is 0 (seconds). Without a timeout every
 * budget inside hbm_pack (this one, the phases of an exact fit) is work counted, each
 * step costed at what it takes on the machine the budgets were tuned on, not the clock:
 * the same timeline and options give the same packing on every run and machine (about
 * 9 ms there; more on a slower or busy machine). A timeout makes the run wall-clock
 * bound, and its result depends on the machine's speed and load. */
#define HBM_PACK_BEST_DEFAULT_S 0.009

typedef struct hbm_pack_progress {
    double seconds;
    uint64_t nodes;
    uint64_t best;        /* best packing extent found so far (UINT64_MAX = none) */
    uint64_t lower_bound; /* best bound proven so far */
} hbm_pack_progress;

typedef struct hbm_pack_options {
    hbm_pack_algo algo;
    uint64_t capacity;    /* 0 = unbounded */
    int minimize;         /* exact: find and prove the minimum extent */
    double timeout_s;     /* wall-clock limit, time-dependent; 0 = none (reproducible;
                           * best: HBM_PACK_BEST_DEFAULT_S of counted work) */
    uint64_t alignment;   /* for buffers whose own alignment is 0 (0 or 1 = none) */
    void (*progress)(void *user, const hbm_pack_progress *p); /* may be NULL */
    void *progress_user;
} hbm_pack_options;

typedef struct hbm_pack_result {
    uint64_t extent;      /* max offset + size of the packing (0 if none found) */
    uint64_t lower_bound; /* proven: no packing has a smaller extent */
    int feasible;         /* a packing within capacity was found and written */
    int proven;           /* extent == lower_bound, or (not feasible) infeasibility proven */
    int timed_out;
    double seconds;
    uint64_t nodes;       /* search nodes (exact) */
} hbm_pack_result;

HBM_API void hbm_pack_options_default(hbm_pack_options *o);
HBM_API const char *hbm_pack_algo_str(hbm_pack_algo a);
HBM_API hbm_status hbm_pack_algo_parse(const char *text, hbm_pack_algo *out);

/* Pack tl in place (buffers with HBM_TL_PINNED keep their offsets). Every packing is
 * verified with hbm_timeline_verify before this returns. HBM_ERR_INFEASIBLE when no
 * packing within capacity exists (proven) or none was found in time. */
HBM_API hbm_status hbm_pack(hbm_timeline *tl, const hbm_pack_options *o, hbm_pack_result *r);

/* A hard instance with a known optimum, for tests and benchmarks: a capacity x steps
 * rectangle cut at random (guillotine cuts in time and in space, on a grid of
 * capacity / 256 bytes) into about `buffers` buffers, listed in random order. A perfect
 * packing exists, so the optimum equals the lower bound (capacity rounded down to a
 * multiple of 256). */
HBM_API hbm_status hbm_pack_generate(uint64_t seed, size_t buffers, uint64_t capacity, int64_t steps,
                                     hbm_timeline **out);

/* Relaxations: smaller problems whose optimum is a lower bound on tl's (each keeps every
 * size and only drops pairs alive together, so any packing of tl is one of theirs; not
 * the other way round). New timelines (ids, tags, alignment and pins kept):
 *  - window: the buffers alive in [from, to), lifetimes cut to it;
 *  - above: only the times where at least min_live bytes are live: of the sections
 *    between tl's start and end points, those that hold that many, numbered from 0 (the
 *    new clock: a buffer lives over the kept sections it lived in); buffers alive in none
 *    of them are left out. */
HBM_API hbm_status hbm_pack_relax_window(const hbm_timeline *tl, int64_t from, int64_t to, hbm_timeline **out);
HBM_API hbm_status hbm_pack_relax_above(const hbm_timeline *tl, uint64_t min_live, hbm_timeline **out);

/* MiniMalloc's CSV: header id,lower,upper,size[,alignment][,offset] (or begin/end). */
HBM_API hbm_status hbm_minimalloc_read(const char *path, hbm_timeline **out);
HBM_API hbm_status hbm_minimalloc_parse(const char *text, size_t len, const char *name, hbm_timeline **out);
HBM_API hbm_status hbm_minimalloc_write(const hbm_timeline *tl, FILE *f);

/* A packing run as `hbm pack` reports it: the input, the relaxation packed instead of it
 * (if any), what was asked and what came out. */
typedef struct hbm_pack_report {
    const char *file;             /* the input's name */
    const hbm_timeline *tl;       /* what was packed */
    size_t whole;                 /* the file's buffers (more than tl's for a relaxation) */
    const char *window;           /* the relaxation to [FROM, TO) as written ("FROM:TO"; NULL: none) */
    int64_t window_from, window_to;
    uint64_t above;               /* the relaxation to the times with this many bytes live (0: none) */
    const char *capacity_text;    /* the capacity as written (NULL: none) */
    const hbm_pack_options *o;
    const hbm_pack_result *r;
    size_t width;                 /* text: lines longer than this many columns cut in the middle
                                     with "..." (0: whole; hbm pack --width) */
} hbm_pack_report;

/* The report as text (the input, the lower bound, the packing or why there is none, the
 * time; fitted to rep->width) or as one line of JSON. Checks f for write errors
 * (HBM_ERR_IO). */
HBM_API hbm_status hbm_pack_report_write(const hbm_pack_report *rep, FILE *f, int json);

/* The progress line of a long search, as `hbm pack` shows it on a terminal: a function for
 * hbm_pack_options.progress with progress_user the FILE * it writes to (stderr), each call
 * redrawing one line ("\r  12.5 s  12345 nodes  best 1048576  bound 1040000"). After
 * hbm_pack, hbm_pack_progress_end(f, r) blanks that line when the search ran long enough
 * to draw it (r->seconds >= 0.5). */
HBM_API void hbm_pack_progress_line(void *file, const hbm_pack_progress *p);
HBM_API void hbm_pack_progress_end(FILE *f, const hbm_pack_result *r);

#ifdef __cplusplus
}
#endif
#endif
