/* cli.h - shared by the subcommands of the hbm tool. Each subcommand is one function
 * `int cmd_NAME(int argc, char **argv)` (argv[0] is the subcommand's name) returning the
 * process exit status: 0 success (it fits, it completed), 1 a negative verdict (it does
 * not fit, an OOM found), 2 bad usage, bad input or output that could not be written. */
#ifndef HBM_CLI_H
#define HBM_CLI_H

#include <stdio.h>

#include "hbm/hbm.h"

/* Print "hbm NAME: <status text>: <last error>" to stderr; return 1 for HBM_ERR_OOM and
 * HBM_ERR_INFEASIBLE (verdicts), else 2. */
int cli_fail(const char *cmd, hbm_status s);
/* Print "hbm NAME: message" + usage hint to stderr and return 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...);
/* Finish an output file opened with hbm_output_open: commit it when s is HBM_OK, else
 * remove the temporary. On failure print "hbm NAME: cannot write PATH (...)" and return
 * the exit status (2); 0 when the file is complete. */
int cli_output_done(const char *cmd, hbm_output *o, hbm_status s);
/* Terminal width of text output: 100 columns unless --width says otherwise (0: no limit).
 * Parse "--width N" at argv[*i] (advancing *i); returns 0, or the exit status of a usage
 * error. */
#define CLI_WIDTH 100
int cli_width_arg(const char *cmd, int argc, char **argv, int *i, size_t *width);
/* Write text to f with every line longer than width columns (a tab counts up to the next
 * multiple of 8; 0 = no limit) cut in the middle with "...", so both ends survive
 * (file:line at the end of a line, its subject at the start). hbm's text is ASCII: the
 * ellipsis is too, whatever the locale. Returns 0, or -1 on a write error. */
int cli_write_fitted(FILE *f, const char *text, size_t len, size_t width);
/* s as a whole decimal number in [lo, hi] into *out: 0, or -1 when it is not one. */
int cli_parse_int(const char *s, long lo, long hi, int *out);
/* argv[i] equals a or b (b may be NULL). */
int cli_is(const char *arg, const char *a, const char *b);

#define HBM_COMMANDS(X)                                                                     \
    X(config, "print the resolved allocator configuration and where each value came from") \
    X(demo, "a training step that runs out of memory under JAX's defaults, and the fix") \
    X(run, "run a CUDA program unmodified: trace its device allocations, enforce a limit") \
    X(replay, "replay a trace against allocator configurations: would another have survived?") \
    X(export, "write a trace as Perfetto JSON, pprof, a PyTorch snapshot or MiniMalloc CSV") \
    X(view, "show a trace: peak, timeline, top buffers and totals (terminal or --html page)") \
    X(diff, "compare two traces, snapshots or plans: both peaks and what makes the difference") \
    X(plan, "predict XLA's device memory for an HLO module: XLA's report, the peak, a verdict") \
    X(devices, "list the devices 'hbm plan --device' knows and their memory") \
    X(pack, "place buffers with known lifetimes at offsets: heuristics or an exact search")

#define HBM_CMD_DECL_(name, help) int cmd_##name(int argc, char **argv);
HBM_COMMANDS(HBM_CMD_DECL_)
#undef HBM_CMD_DECL_

#endif
