/* status.c - status strings and the thread-local last-error message. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

/* The calling thread's last error, one record (hbmi_error_record, core/internal.h). The message is
 * written once, where the error happens; the location is set there too, beside it, and
 * never read back out of the text. */
static _Thread_local hbmi_error_record hbmi_err;
#define hbmi_errbuf hbmi_err.message
/* The record the last change replaced, and the count of changes (hbmi_error_mark). */
static _Thread_local hbmi_error_record hbmi_err_prev;
static _Thread_local uint64_t hbmi_err_gen;
static void record_copy(hbmi_error_record *to, const hbmi_error_record *from);
static void changing(void) {
    record_copy(&hbmi_err_prev, &hbmi_err);
    hbmi_err_gen++;
}

const char *hbm_status_str(hbm_status s) {
    switch (s) {
#define HBMI_CASE_(name, value, desc) \
    case name:                        \
        return desc;
        HBM_STATUS_LIST(HBMI_CASE_)
#undef HBMI_CASE_
    }
    return "unknown status";
}

const char *hbm_status_name(hbm_status s) {
    switch (s) {
#define HBMI_CASE_(name, value, desc) \
    case name:                        \
        return #name;
        HBM_STATUS_LIST(HBMI_CASE_)
#undef HBMI_CASE_
    }
    return "HBM_ERR_UNKNOWN";
}

const char *hbm_last_error(void) { return hbmi_errbuf; }

void hbm_clear_error(void) {
    changing();
    hbmi_err.status = HBM_OK;
    hbmi_err.line = hbmi_err.column = 0;
    hbmi_err.file[0] = hbmi_errbuf[0] = 0;
}

int hbm_last_error_location(char *file, size_t cap, int *line, int *column) {
    int found = hbmi_err.line > 0;
    if (file && cap) {
        size_t n = found ? strlen(hbmi_err.file) : 0;
        if (n > cap - 1) n = cap - 1;
        memcpy(file, hbmi_err.file, n);
        file[n] = 0;
    }
    if (line) *line = found ? (int)hbmi_err.line : 0;
    if (column) *column = found ? (int)hbmi_err.column : 0;
    return found;
}

/* Messages quote names and text from files (a path, an op_name, a CSV field): their
 * control characters are made visible ("\x1b"), so that no message retitles or clears the
 * terminal it is printed to. Line breaks and tabs stay. */
static void visible(char buf[HBMI_ERRBUF]) {
    char out[HBMI_ERRBUF];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)buf; *p && n + 5 < sizeof out; p++) {
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f)
            n += (size_t)snprintf(out + n, sizeof out - n, "\\x%02x", *p);
        else
            out[n++] = (char)*p;
    }
    out[n] = 0;
    memcpy(buf, out, n + 1);
}

/* The record's message from fmt, after prefix (NULL: none); status s, no location. */
static void set_message(hbm_status s, const char *prefix, const char *fmt, va_list ap) {
    changing();
    size_t n = prefix ? (size_t)snprintf(hbmi_errbuf, sizeof hbmi_errbuf, "%s", prefix) : 0;
    if (n < sizeof hbmi_errbuf) vsnprintf(hbmi_errbuf + n, sizeof hbmi_errbuf - n, fmt, ap);
    visible(hbmi_errbuf);
    hbmi_err.status = s;
    hbmi_err.line = hbmi_err.column = 0;
    hbmi_err.file[0] = 0;
}

/* Records are copied as far as their strings go (a message is mostly short, the buffers are
 * 1 KiB each). */
static void record_copy(hbmi_error_record *to, const hbmi_error_record *from) {
    to->status = from->status;
    to->line = from->line;
    to->column = from->column;
    memcpy(to->file, from->file, strnlen(from->file, sizeof from->file - 1) + 1);
    memcpy(to->message, from->message, strnlen(from->message, sizeof from->message - 1) + 1);
}
uint64_t hbmi_error_mark(void) { return hbmi_err_gen; }
void hbmi_error_undo(uint64_t mark) {
    if (hbmi_err_gen != mark + 1) return;
    record_copy(&hbmi_err, &hbmi_err_prev);
    hbmi_err_gen = mark;
}

hbm_status hbmi_error(hbm_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(s, NULL, fmt, ap);
    va_end(ap);
    return s;
}

hbm_status hbmi_error_at(hbm_status s, const char *file, size_t line, size_t column, const char *fmt, ...) {
    char where[HBMI_ERRBUF];
    if (column) snprintf(where, sizeof where, "%s:%zu:%zu: ", file, line, column);
    else snprintf(where, sizeof where, "%s:%zu: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    set_message(s, where, fmt, ap);
    va_end(ap);
    snprintf(hbmi_err.file, sizeof hbmi_err.file, "%s", file);
    visible(hbmi_err.file);
    hbmi_err.line = line > 0 && line <= 0x7fffffff ? (unsigned)line : 0;
    hbmi_err.column = hbmi_err.line && column <= 0x7fffffff ? (unsigned)column : 0;
    return s;
}

hbm_status hbmi_error_prefix(hbm_status s, const char *fmt, ...) {
    changing();
    char old[HBMI_ERRBUF];
    memcpy(old, hbmi_errbuf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(hbmi_errbuf, sizeof hbmi_errbuf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof hbmi_errbuf)
        snprintf(hbmi_errbuf + n, sizeof hbmi_errbuf - (size_t)n, "%s", old);
    visible(hbmi_errbuf);
    hbmi_err.status = s; /* the location, where the error was found, stays */
    return s;
}

const char *hbm_category_str(hbm_category c) {
    static const char *const names[] = {
#define HBMI_CAT_STR_(name, str) str,
        HBM_CATEGORY_LIST(HBMI_CAT_STR_)
#undef HBMI_CAT_STR_
    };
    if ((unsigned)c >= sizeof names / sizeof names[0]) return "";
    return names[c];
}
