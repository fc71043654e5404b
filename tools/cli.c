/* cli.c - what every subcommand of the hbm tool shares: one argument parser over a table
 * of options (which also prints --help), one wording for usage errors, output checks. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_fail(const char *cmd, hbm_status s) {
    const char *e = hbm_last_error();
    fprintf(stderr, "hbm %s: %s%s%s\n", cmd, hbm_status_str(s), *e ? ": " : "", e);
    /* out of device memory and infeasible are answers (1); anything else is trouble with
     * the input or the output (2) */
    return s == HBM_ERR_OOM || s == HBM_ERR_INFEASIBLE ? 1 : 2;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "hbm %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'hbm %s --help'.\n", cmd);
    return 2;
}

int cli_bad_value(const char *cmd, const char *opt, const char *value, const char *why) {
    if (!why || !*why) why = "not accepted";
    if (value) return cli_usage_error(cmd, "%s '%s': %s", opt, value, why);
    return cli_usage_error(cmd, "%s: %s", opt, why);
}

int cli_device_arg(const char *cmd, const char *device, char *spec, size_t cap) {
    hbm_device *d;
    if (hbm_replay_device_spec(device, spec, cap) || hbm_device_open(spec, &d))
        return cli_bad_value(cmd, "--device", NULL, hbm_last_error());
    hbm_device_close(d); /* a simulated device: address space only, nothing is touched */
    return 0;
}

int cli_plan_target(const char *cmd, const char *device, const char *cap_text, double fraction, hbm_plan_target *t) {
    if (device && cap_text) return cli_usage_error(cmd, "--device and --capacity exclude each other");
    if (!hbm_plan_target_resolve(device, cap_text, fraction, t)) return 0;
    char why[600];
    snprintf(why, sizeof why, "%s%s", hbm_last_error(), device ? "; or give --capacity SIZE" : "");
    return cli_bad_value(cmd, device ? "--device" : "--capacity", NULL, why);
}

/* Which commands read each kind of file (the first is the one suggested), or a hint for
 * the kinds no command reads. */
static const struct {
    hbm_file_kind kind;
    const char *cmds; /* " plan view " */
    const char *hint;
} readers[] = {
    {HBM_FILE_HLO, " plan view diff fit export replay ", NULL},
    {HBM_FILE_TORCH_PICKLE, " view replay diff export ", NULL},
    {HBM_FILE_TORCH_JSON, " view replay diff export ", NULL},
    {HBM_FILE_HBM_TRACE, " view replay diff export ", NULL},
    {HBM_FILE_RMM_CSV, " view replay diff export ", NULL},
    {HBM_FILE_MINIMALLOC_CSV, " pack ", NULL},
    {HBM_FILE_HLO_PROTO, " plan view diff fit export replay ", NULL},
    {HBM_FILE_XSPACE, " plan view diff fit export replay ", NULL},
    {HBM_FILE_PERFETTO, "", "open it in https://ui.perfetto.dev (hbm export writes this format, it reads traces)"},
    {HBM_FILE_BINARY, "", "hbm reads HLO modules, hbm traces, PyTorch snapshots, RMM logs, MiniMalloc CSV"},
};

int cli_input(const char *cmd, const char *path) {
    hbm_file_kind k;
    int gz = 0;
    if (!path || !strcmp(path, "-") || hbm_file_sniff_path(path, &k, &gz)) return -1; /* the reader says why */
    if (k == HBM_FILE_EMPTY) {
        fprintf(stderr, "hbm %s: %s: empty file\n", cmd, path);
        return 2;
    }
    char me[24];
    snprintf(me, sizeof me, " %s ", cmd);
    for (size_t i = 0; i < CLI_N(readers); i++) {
        if (readers[i].kind != k || strstr(readers[i].cmds, me)) continue;
        const char *want = !strcmp(cmd, "plan") ? "an HLO module" : !strcmp(cmd, "pack") ? "a MiniMalloc CSV" : "a trace";
        fprintf(stderr, "hbm %s: %s is %s%s, not %s: ", cmd, path, hbm_file_kind_str(k), gz ? " (gzip'd)" : "", want);
        if (readers[i].hint) fprintf(stderr, "%s\n", readers[i].hint);
        else fprintf(stderr, "try 'hbm %.*s %s'\n", (int)strcspn(readers[i].cmds + 1, " "), readers[i].cmds + 1, path);
        return 2;
    }
    return -1;
}

int cli_output_done(const char *cmd, hbm_output *o, hbm_status s) {
    if (s) hbm_output_abort(o);
    else s = hbm_output_commit(o);
    if (!s) return 0;
    const char *e = hbm_last_error();
    if (!strcmp(o->path, "-"))
        fprintf(stderr, "hbm %s: error writing standard output: %s\n", cmd, *e ? e : hbm_status_str(s));
    else
        fprintf(stderr, "hbm %s: cannot write %s (an existing file is left as it was): %s\n", cmd, o->path,
                *e ? e : hbm_status_str(s));
    return 2;
}

int cli_parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || isspace((unsigned char)*s) || *end || errno || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int cli_utf8(void) {
    const char *v = NULL;
    const char *names[] = {"LC_ALL", "LC_CTYPE", "LANG"};
    for (size_t i = 0; i < CLI_N(names) && (!v || !*v); i++) v = getenv(names[i]);
    if (!v) return 0;
    for (const char *p = v; *p; p++) /* "en_US.UTF-8", "C.utf8" */
        if (tolower((unsigned char)p[0]) == 'u' && tolower((unsigned char)p[1]) == 't' &&
            tolower((unsigned char)p[2]) == 'f' && (p[3] == '8' || (p[3] == '-' && p[4] == '8')))
            return 1;
    return 0;
}

int cli_is(const char *arg, const char *a, const char *b) { return !strcmp(arg, a) || (b && !strcmp(arg, b)); }

/* --- the parser ------------------------------------------------------------------------ */

/* The value v of option o (spelled as given: opt) into o->dest; 0, or 2 after the message. */
static int set_value(const char *cmd, const cli_opt *o, const char *opt, const char *v) {
    char expect[160] = "";
    int ok = 1;
    switch (o->kind) {
    case CLI_FLAG:
        break; /* no value */
    case CLI_STR:
        *(const char **)o->dest = v;
        break;
    case CLI_LIST: {
        cli_list *l = o->dest;
        if (l->n >= CLI_LIST_MAX) return cli_usage_error(cmd, "%s: at most %d of them", opt, CLI_LIST_MAX);
        l->v[l->n++] = v;
        break;
    }
    case CLI_INT:
        ok = !cli_parse_int(v, o->lo, o->hi, o->dest);
        snprintf(expect, sizeof expect, "expected a whole number from %ld to %ld", o->lo, o->hi);
        break;
    case CLI_REAL: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        int number = *v && !isspace((unsigned char)*v) && !*end;
        /* past the bound, or past what a double holds (1e999: ERANGE, HUGE_VAL; "inf"):
         * too large, with the bound */
        if (number && !isnan(d) && d > (double)o->hi && !(errno && fabs(d) < 1.0))
            return cli_usage_error(cmd, "%s '%s': too large: at most %ld", opt, v, o->hi);
        ok = number && !errno && isfinite(d) && d > (double)o->lo && d <= (double)o->hi;
        if (ok) *(double *)o->dest = d;
        snprintf(expect, sizeof expect, "expected a number in (%ld, %ld]", o->lo, o->hi);
        break;
    }
    case CLI_SIZE:
    case CLI_POW2: {
        uint64_t n = 0, hi = o->hi > 0 ? (uint64_t)o->hi : UINT64_MAX;
        char most[32];
        hbm_size_human(hi, most);
        hbm_status ps = hbm_size_parse(v, &n);
        /* a number past what 64 bits hold (saturated), or past the option's bound: too large,
         * not "> 0" */
        if ((ps && n == UINT64_MAX) || (!ps && n > hi)) {
            if (hi == UINT64_MAX)
                return cli_usage_error(cmd, "%s '%s': too large: at most 2^64 - 1 bytes (%s)", opt, v, most);
            return cli_usage_error(cmd, "%s '%s': too large: at most %" PRIu64 " bytes (%s)", opt, v, hi, most);
        }
        ok = ps == HBM_OK && n > 0 && (o->kind == CLI_SIZE || !(n & (n - 1)));
        if (ok) *(uint64_t *)o->dest = n;
        if (o->kind == CLI_SIZE) snprintf(expect, sizeof expect, "expected a size > 0: bytes, or 80GiB (x 2^30), 40GB (x 10^9)");
        else snprintf(expect, sizeof expect, "expected a power of two from 1 to %s (bytes: 256, 4KiB, ...)", most);
        break;
    }
    case CLI_COLUMNS: {
        char *end;
        errno = 0;
        unsigned long n = strtoul(v, &end, 10);
        ok = isdigit((unsigned char)*v) && !*end && !errno && (n == 0 || (n >= (unsigned long)o->lo && n <= (unsigned long)o->hi));
        if (ok) *(size_t *)o->dest = n;
        snprintf(expect, sizeof expect, "expected columns: 0 (no limit) or %ld to %ld", o->lo, o->hi);
        break;
    }
    case CLI_PARSE:
        if (o->parse(v, o->dest) != HBM_OK) /* the parser's message, or the table's expect */
            return o->expect ? cli_bad_value(cmd, opt, v, o->expect) : cli_bad_value(cmd, opt, NULL, hbm_last_error());
        break;
    }
    if (!ok) return cli_usage_error(cmd, "%s '%s': %s", opt, v, o->expect ? o->expect : expect);
    if (o->raw) *o->raw = v;
    return 0;
}

/* the i-th word of the positional arguments' names that is required (not "[...]", not "--") */
static int required_words(const char *args, const char *words[8], int lens[8]) {
    int n = 0;
    for (const char *p = args ? args : ""; *p && n < 8;) {
        size_t k = strcspn(p, " ");
        if (k && *p != '[' && !(k == 2 && !strncmp(p, "--", 2))) words[n] = p, lens[n++] = (int)k;
        p += k + (p[k] == ' ');
    }
    return n;
}

static const cli_opt *find_opt(const cli_command *c, const char *a, size_t len) {
    for (size_t k = 0; k < c->nopts; k++) {
        const cli_opt *o = &c->opts[k];
        if ((strlen(o->name) == len && !strncmp(o->name, a, len)) ||
            (o->alias && strlen(o->alias) == len && !strncmp(o->alias, a, len)))
            return o;
    }
    return NULL;
}

int cli_parse(const cli_command *c, int argc, char **argv, cli_args *out) {
    memset(out, 0, sizeof *out);
    out->first = argc;
    unsigned given = 0; /* the required options seen (bit k: opts[k]) */
    int options = 1; /* until "--" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && !strcmp(a, "--")) {
            options = 0;
            continue;
        }
        if (options && a[0] == '-' && a[1]) {
            if (cli_is(a, "-h", "--help")) {
                cli_help(c, stdout);
                return 0;
            }
            const char *eq = a[1] == '-' ? strchr(a, '=') : NULL; /* --name=value */
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            const cli_opt *o = find_opt(c, a, len);
            char opt[64];
            snprintf(opt, sizeof opt, "%.*s", (int)(len < 60 ? len : 60), a);
            if (!o) return cli_usage_error(c->name, "unknown option '%s'", opt);
            if (o - c->opts < 32) given |= 1u << (o - c->opts);
            if (o->kind == CLI_FLAG) {
                if (eq) return cli_usage_error(c->name, "%s takes no value (got '%s')", opt, a);
                *(int *)o->dest = 1;
                continue;
            }
            const char *v = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
            /* "--format --json": the next word is one of the command's options, not a value */
            if (!v || (!eq && (cli_is(v, "-h", "--help") || (v[0] == '-' && find_opt(c, v, v[1] == '-' ? strcspn(v, "=") : strlen(v))))))
                return cli_usage_error(c->name, "%s needs a value", opt);
            if (!eq) i++;
            int rc = set_value(c->name, o, opt, v);
            if (rc) return rc;
            continue;
        }
        if (c->rest) { /* hbm run: the command starts here */
            out->first = i;
            break;
        }
        if (c->many && out->nall < c->max_args) { /* (written at or before i: argv[i] is read already) */
            argv[1 + out->nall++] = (char *)a;
            out->all = argv + 1;
            if (out->n < (int)CLI_N(out->pos)) out->pos[out->n++] = a;
            continue;
        }
        if (out->n >= c->max_args || out->n >= (int)CLI_N(out->pos)) {
            if (!c->max_args) return cli_usage_error(c->name, "unexpected argument '%s': hbm %s takes none", a, c->name);
            return cli_usage_error(c->name, "unexpected argument '%s': hbm %s takes %s", a, c->name, c->args);
        }
        out->pos[out->n++] = a;
    }
    const char *words[8];
    int lens[8];
    int need = required_words(c->args, words, lens);
    int have = c->rest ? (out->first < argc) : out->n;
    if (have < need) {
        char missing[200] = "";
        size_t at = 0;
        for (int k = have; k < need && at < sizeof missing; k++)
            at += (size_t)snprintf(missing + at, sizeof missing - at, "%s%.*s", k == have ? "" : k + 1 == need ? " and " : ", ",
                                   lens[k], words[k]);
        return cli_usage_error(c->name, "missing %s", missing);
    }
    for (size_t k = 0; k < c->nopts && k < 32; k++)
        if (c->opts[k].required && !(given & (1u << k)))
            return cli_usage_error(c->name, "missing %s %s", c->opts[k].name, c->opts[k].arg ? c->opts[k].arg : "");
    return -1;
}

hbm_status cli_pack_algo(const char *value, void *algo) { return hbm_pack_algo_parse(value, algo); }

/* --- help ------------------------------------------------------------------------------ */

static void put_wrapped(FILE *f, const char *word, size_t *col, size_t indent) {
    size_t n = strlen(word);
    if (*col + 1 + n > 96 && *col > indent) { /* the usage's continuation lines: under its first argument */
        fprintf(f, "\n%*s", (int)indent, "");
        *col = indent;
    }
    fprintf(f, " %s", word);
    *col += 1 + n;
}

static void usage_line(const cli_command *c, FILE *f) {
    char head[64], word[96];
    size_t indent = (size_t)snprintf(head, sizeof head, "Usage: hbm %s", c->name), col = indent;
    fputs(head, f);
    if (c->args && !c->rest) put_wrapped(f, c->args, &col, indent);
    for (size_t k = 0; k < c->nopts; k++) {
        const cli_opt *o = &c->opts[k];
        snprintf(word, sizeof word, "%s%s%s%s%s%s", o->required ? "" : "[", o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "", o->required ? "" : "]", o->kind == CLI_LIST ? "..." : "");
        put_wrapped(f, word, &col, indent);
    }
    if (c->args && c->rest) put_wrapped(f, c->args, &col, indent);
    fputc('\n', f);
    if (c->usage) fprintf(f, "%s\n", c->usage);
}

/* "  -o, --output OUT  help" with the help's further lines under its first */
static void option_lines(FILE *f, const char *alias, const char *name, const char *arg, const char *help, int column) {
    char left[96];
    int n = snprintf(left, sizeof left, "  %s%s%s%s%s", alias ? alias : "", alias ? ", " : "", name, arg ? " " : "",
                     arg ? arg : "");
    fputs(left, f);
    if (n + 2 > column) fprintf(f, "\n%*s", column, "");
    else fprintf(f, "%*s", column - n, "");
    for (const char *p = help ? help : ""; *p;) {
        size_t k = strcspn(p, "\n");
        fwrite(p, 1, k, f);
        p += k;
        if (*p == '\n' && *++p) fprintf(f, "\n%*s", column, "");
    }
    fputc('\n', f);
}

void cli_help(const cli_command *c, FILE *f) {
    usage_line(c, f);
    if (c->about) fprintf(f, "\n%s\n", c->about);
    int column = 16; /* "  -h, --help" + 2, at least */
    for (size_t k = 0; k < c->nopts; k++) {
        const cli_opt *o = &c->opts[k];
        int n = 2 + (o->alias ? (int)strlen(o->alias) + 2 : 0) + (int)strlen(o->name) + (o->arg ? 1 + (int)strlen(o->arg) : 0);
        if (n + 2 > column && n + 2 <= 24) column = n + 2;
    }
    fprintf(f, "\nOptions:\n");
    for (size_t k = 0; k < c->nopts; k++)
        option_lines(f, c->opts[k].alias, c->opts[k].name, c->opts[k].arg, c->opts[k].help, column);
    option_lines(f, "-h", "--help", NULL, "this text", column);
    if (c->more_help) {
        fputc('\n', f);
        c->more_help(f);
    }
    if (c->exits) fprintf(f, "\n%s\n", c->exits);
    if (c->examples) fprintf(f, "\n%s\n", c->examples);
}

/* Where a wrapped line's continuation starts: after "label:   " when the text begins with
 * one, else after the first gap of two spaces (a key column), else after the first word. */
static size_t hang_of(const char *line, size_t n) {
    size_t i = 0;
    while (i < n && line[i] == ' ') i++;
    size_t lead = i, j = i;
    while (j < n && line[j] != ' ') j++;
    if (j > lead && line[j - 1] == ':') {
        while (j < n && line[j] == ' ') j++;
        return j;
    }
    for (size_t k = lead; k + 2 < n; k++)
        if (line[k] == ' ' && line[k + 1] == ' ') {
            while (k < n && line[k] == ' ') k++;
            return k;
        }
    return j < n ? j + 1 : lead; /* a key too long for its column: under the text after it */
}

int cli_write_wrapped(FILE *f, const char *text, size_t len, size_t width) {
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (text + at)) : len - at, hang = hang_of(text + at, n), col = 0;
        const char *p = text + at;
        while (width && n - col > width - (col ? hang : 0) && hang + 20 < width) {
            size_t room = width - (col ? hang : 0), cut = col + room;
            while (cut > col && p[cut] != ' ') cut--;
            if (cut == col) break; /* one long word: left whole */
            if (col && fprintf(f, "%*s", (int)hang, "") < 0) return -1;
            if (fwrite(p + col, 1, cut - col, f) != cut - col || fputc('\n', f) == EOF) return -1;
            col = cut + 1;
        }
        if (col && fprintf(f, "%*s", (int)hang, "") < 0) return -1;
        if (fwrite(p + col, 1, n - col, f) != n - col || (nl && fputc('\n', f) == EOF)) return -1;
        at += n + (nl ? 1 : 0);
    }
    return 0;
}
