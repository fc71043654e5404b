/* status.c - status strings and the thread-local last-error message. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

#define HBMI_ERRBUF 1024
static _Thread_local char hbmi_errbuf[HBMI_ERRBUF];

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

void hbm_clear_error(void) { hbmi_errbuf[0] = 0; }

static _Thread_local int hbmi_quiet_oom_;

int hbmi_oom_quiet(void) { return hbmi_quiet_oom_; }

int hbmi_oom_quiet_set(int on) {
    int old = hbmi_quiet_oom_;
    hbmi_quiet_oom_ = on;
    return old;
}

/* Messages quote names and text from files (a path, an op_name, a CSV field): their
 * control characters are made visible ("\x1b"), so that no message retitles or clears the
 * terminal it is printed to. Line breaks and tabs stay. */
static void visible(void) {
    char out[HBMI_ERRBUF];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)hbmi_errbuf; *p && n + 5 < sizeof out; p++) {
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f)
            n += (size_t)snprintf(out + n, sizeof out - n, "\\x%02x", *p);
        else
            out[n++] = (char)*p;
    }
    out[n] = 0;
    memcpy(hbmi_errbuf, out, n + 1);
}

hbm_status hbmi_error(hbm_status s, const char *fmt, ...) {
    if (s == HBM_ERR_OOM && hbmi_quiet_oom_) return s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(hbmi_errbuf, sizeof hbmi_errbuf, fmt, ap);
    va_end(ap);
    visible();
    return s;
}

hbm_status hbmi_error_prefix(hbm_status s, const char *fmt, ...) {
    char old[HBMI_ERRBUF];
    memcpy(old, hbmi_errbuf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(hbmi_errbuf, sizeof hbmi_errbuf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof hbmi_errbuf)
        snprintf(hbmi_errbuf + n, sizeof hbmi_errbuf - (size_t)n, "%s", old);
    visible();
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
