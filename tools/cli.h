/* cli.h - shared by the subcommands of the hbm tool. Each subcommand is one function
 * `int cmd_NAME(int argc, char **argv)` (argv[0] is the subcommand's name) returning the
 * process exit status: 0 success (it fits, it completed), 1 a negative verdict (it does
 * not fit, an OOM found), 2 bad usage, bad input or output that could not be written.
 * Every subcommand reads its arguments with cli_parse over a table of cli_opt, and its
 * --help is printed from the same table. */
#ifndef HBM_CLI_H
#define HBM_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "hbm/hbm.h"

/* --- the argument parser ------------------------------------------------------------- */

typedef enum cli_kind {
    CLI_FLAG,  /* int *: set to 1; takes no value */
    CLI_STR,   /* const char **: the value (the last one given) */
    CLI_LIST,  /* cli_list *: every value given, in order (the option may be repeated) */
    CLI_INT,   /* int *: a whole number from lo to hi */
    CLI_REAL,  /* double *: a number greater than lo, at most hi */
    CLI_SIZE,  /* uint64_t *: a size > 0 as hbm_size_parse reads it (80GiB, 40GB, 1048576) */
    CLI_POW2,  /* uint64_t *: a size that is a power of two, at most hi when hi > 0 */
    CLI_COLUMNS, /* size_t *: terminal columns: 0 (no limit) or lo to hi */
    CLI_PARSE, /* anything: parse(value, dest), a library parser whose message names the value */
} cli_kind;

#define CLI_LIST_MAX 32
typedef struct cli_list {
    const char *v[CLI_LIST_MAX];
    int n;
} cli_list;

typedef struct cli_opt {
    const char *name;  /* "--format" */
    const char *alias; /* "-o", or NULL */
    cli_kind kind;
    void *dest;
    const char *arg;  /* the value's name in --help ("N", "SIZE"); NULL for flags */
    const char *help; /* its --help text; lines separated by \n */
    long lo, hi;      /* CLI_INT, CLI_REAL, CLI_COLUMNS bounds; CLI_SIZE, CLI_POW2: hi > 0 the largest */
    const char *expect;              /* what is accepted, for the message (default: from kind and bounds;
                                      * CLI_PARSE: the parser's last error) */
    hbm_status (*parse)(const char *value, void *dest); /* CLI_PARSE */
    const char **raw;                /* when set: the value as given */
    int required;                    /* the command needs it: "missing --format F" without it */
} cli_opt;

typedef struct cli_command {
    const char *name;  /* "replay" */
    const char *args;  /* positional arguments as --help shows them: "TRACE", "A B" ("[X]": optional) */
    int max_args;      /* at most this many positional arguments */
    int rest;          /* the first positional argument and all after it are left (hbm run's command) */
    int many;          /* up to max_args positional arguments, all in cli_args.all (hbm view's inputs) */
    const char *usage; /* more usage lines (other forms), or NULL */
    const char *about; /* what the command does (paragraphs), printed before the options */
    const cli_opt *opts;
    size_t nopts;
    void (*more_help)(FILE *f); /* printed after the options (hbm config: the settings) */
    const char *exits;          /* "Exit status: ..." */
    const char *examples;       /* "Example:\n  hbm ..." */
} cli_command;

#define CLI_N(a) (sizeof(a) / sizeof((a)[0]))

/* What cli_parse leaves: the positional arguments; with rest, argv[first] onwards. */
typedef struct cli_args {
    const char *pos[4];
    int n;
    int first; /* rest: the index in argv of the first positional argument (argc when none) */
    char **all; /* many: every positional argument (nall), moved to the front of argv */
    int nall;
} cli_args;

/* Parse argv[1..] against c's table (argv[0] is the command's name). "--name value",
 * "--name=value" and "-a value" (a value that is one of c's options, as in "--format
 * --json", is a missing value); "--" ends the options; "-" is a positional argument;
 * -h/--help prints c's help. Returns -1 to go on, else the exit status to return now: 0
 * after the help, 2 after a usage error (printed: "hbm NAME: --format needs a value",
 * "unknown option '--x'", "--top 'x': expected a whole number from 0 to 100000", a
 * missing or unexpected positional argument). */
int cli_parse(const cli_command *c, int argc, char **argv, cli_args *out);
/* 1 when the terminal's locale is UTF-8 (LC_ALL, else LC_CTYPE, else LANG names one, as
 * setlocale reads them), else 0: output is then ASCII (LC_ALL=C, or no locale set). */
int cli_utf8(void);
/* CLI_PARSE parsers shared by commands: a packing algorithm (hbm_pack_algo *). */
hbm_status cli_pack_algo(const char *value, void *algo);
/* c's help: usage lines made from the table, about, options, exit status, examples. */
void cli_help(const cli_command *c, FILE *f);

/* --- messages and output --------------------------------------------------------------- */

/* Print "hbm NAME: <status text>: <last error>" to stderr; return 1 for HBM_ERR_OOM and
 * HBM_ERR_INFEASIBLE (verdicts), else 2. */
int cli_fail(const char *cmd, hbm_status s);
/* Print "hbm NAME: message" + usage hint to stderr and return 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An option's value that is not accepted, found after parsing (a device, an allocator):
 * "hbm NAME: OPT 'VALUE': why" + usage hint, or "hbm NAME: OPT: why" when value is NULL
 * (why names it already); returns 2. */
int cli_bad_value(const char *cmd, const char *opt, const char *value, const char *why);
/* --device D of a command that simulates a device: D (sim:SIZE or a name 'hbm devices'
 * lists) as a device spec in spec, checked by opening it; 0, or 2 after the message
 * "hbm NAME: --device: <why, naming D>". */
int cli_device_arg(const char *cmd, const char *device, char *spec, size_t cap);
/* The device a plan is judged against (plan, fit): --device NAME or --capacity SIZE
 * (cap_text, as given), not both, and --framework-limit (0: the default) into *t; 0, or 2
 * after the message ("hbm NAME: --device: <why>; or give --capacity SIZE"). */
int cli_plan_target(const char *cmd, const char *device, const char *cap_text, double fraction, hbm_plan_target *t);
/* The input file of command cmd, recognised by its content before it is read: a kind of
 * file that another command reads (or none does) is named, with the command to try ("hbm
 * plan: s.pickle is a PyTorch memory snapshot (pickle), not an HLO module: try 'hbm view
 * s.pickle'"), and so is an empty file; returns 2 after that message, else -1 (go on: the
 * reader says what else is wrong, where). */
int cli_input(const char *cmd, const char *path);
/* Finish an output file opened with hbm_output_open: commit it when s is HBM_OK, else
 * remove the temporary. On failure print "hbm NAME: cannot write PATH (...)" and return
 * the exit status (2); 0 when the file is complete. */
int cli_output_done(const char *cmd, hbm_output *o, hbm_status s);
/* Terminal width of text output: 100 columns unless --width says otherwise (0: no limit;
 * else CLI_WIDTH_MIN or more). */
#define CLI_WIDTH 100
#define CLI_WIDTH_MIN 40
#define CLI_WIDTH_MAX 100000
/* The --width option of text output, into a size_t. */
#define CLI_OPT_WIDTH(where)                                                                 \
    {.name = "--width", .kind = CLI_COLUMNS, .dest = (where), .arg = "COLUMNS", .lo = CLI_WIDTH_MIN, \
     .hi = CLI_WIDTH_MAX, .help = "cut longer lines in the middle with '...' (default 100; 0: no limit)"}
/* Write help text to f with lines longer than width wrapped at spaces, continued under
 * the line's text ("  key   text", "  values: text"). Returns 0, or -1 on a write error. */
int cli_write_wrapped(FILE *f, const char *text, size_t len, size_t width);
/* s as a whole decimal number in [lo, hi] into *out: 0, or -1 when it is not one. */
int cli_parse_int(const char *s, long lo, long hi, int *out);
/* argv[i] equals a or b (b may be NULL). */
int cli_is(const char *arg, const char *a, const char *b);

/* The exit status paragraph most commands share. */
#define CLI_EXITS_DONE "Exit status: 0 done, 2 bad usage or input (found before any work), or output that\n" \
                       "could not be written."

#define HBM_COMMANDS(X)                                                                     \
    X(config, "print the resolved allocator configuration and where each value came from") \
    X(demo, "a training step that runs out of memory under JAX's defaults, and the fix") \
    X(run, "run a CUDA program unmodified: trace its device allocations, enforce a limit") \
    X(replay, "replay a trace against allocator configurations: would another have survived?") \
    X(export, "write a trace as Perfetto JSON, pprof, a PyTorch snapshot or MiniMalloc CSV") \
    X(view, "show a trace: peak, timeline, top buffers and totals (terminal or --html page)") \
    X(diff, "compare two traces, snapshots or plans: both peaks and what makes the difference") \
    X(plan, "predict XLA's device memory for an HLO module: XLA's report, the peak, a verdict") \
    X(fit, "what makes an HLO module fit: settings, donation, recompute, host offload, verified") \
    X(devices, "list the devices 'hbm plan --device' knows and their memory") \
    X(pack, "place buffers with known lifetimes at offsets: heuristics or an exact search")

#define HBM_CMD_DECL_(name, help) int cmd_##name(int argc, char **argv);
HBM_COMMANDS(HBM_CMD_DECL_)
#undef HBM_CMD_DECL_

/* --- inputs (tools/input.c) --------------------------------------------------------- */
/* Open path as one HLO module: text, or a protobuf input (profile directory, *.xplane.pb,
 * *.hlo_proto.pb, *.hlo.pb) found by content. module (NULL: the largest) picks one of
 * several; the list and the choice go to notes (NULL: nowhere). 0, or the exit status
 * after the error is printed. */
int cli_open_module(const char *cmd, const char *path, const char *module, FILE *notes, hbm_hlo_module **out);
/* A trace to view or compare: what hbm_trace_load_device opens, or a protobuf input's
 * module planned as the sequence XLA runs. With xla_plan, a module that carries XLA's own
 * assignment comes back planned (*xla_module, *xla_plan: the caller frees them) for
 * hbm_plan_xla_text; NULL otherwise. 0 or the exit status after the error is printed. */
int cli_load_trace(const char *cmd, const char *path, const char *module, int device, FILE *notes, hbm_trace **out,
                   hbm_hlo_module **xla_module, hbm_plan **xla_plan);

#endif
