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

hbm_status hbmi_error(hbm_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(hbmi_errbuf, sizeof hbmi_errbuf, fmt, ap);
    va_end(ap);
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
