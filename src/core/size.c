/* size.c - sizes in human units: parsing "80GiB", printing like XLA. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/size.h"

hbm_status hbm_size_parse(const char *text, uint64_t *out) {
    if (!text || !out) return hbmi_error(HBM_ERR_INVALID, "size: NULL argument");
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p) && *p != '.')
        return hbmi_error(HBM_ERR_INVALID, "size '%s': expected a number such as 1048576, 80GiB or 1.5G", text);
    uint64_t whole = 0;
    int digits = 0;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p++ - '0');
        if (whole > (UINT64_MAX - d) / 10) return hbmi_error(HBM_ERR_INVALID, "size '%s' is too large", text);
        whole = whole * 10 + d;
        digits++;
    }
    /* fraction kept as numerator/denominator to stay exact */
    uint64_t fnum = 0, fden = 1;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (fden < 1000000000000ULL) {
                fnum = fnum * 10 + (uint64_t)(*p - '0');
                fden *= 10;
            }
            p++;
            digits++;
        }
    }
    if (!digits) return hbmi_error(HBM_ERR_INVALID, "size '%s': expected digits", text);
    while (isspace((unsigned char)*p)) p++;
    int shift = 0;
    switch (toupper((unsigned char)*p)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    case 'P': shift = 50; break;
    case 'E': shift = 60; break;
    default: break;
    }
    if (shift) {
        p++;
        if (*p == 'i' || *p == 'I') p++;
        if (*p == 'b' || *p == 'B') p++;
    } else if (*p == 'b' || *p == 'B') {
        p++;
    }
    while (isspace((unsigned char)*p)) p++;
    if (*p) return hbmi_error(HBM_ERR_INVALID, "size '%s': unexpected '%s' (units: B, KiB, MiB, GiB, TiB)", text, p);
    if (fnum && !shift) return hbmi_error(HBM_ERR_INVALID, "size '%s': a byte count must be whole", text);
    if (shift && whole > (UINT64_MAX >> shift)) return hbmi_error(HBM_ERR_INVALID, "size '%s' is too large", text);
    uint64_t v = whole << shift;
    if (fnum) {
        /* fnum/fden * 2^shift, fden <= 1e12 so split the shift to avoid overflow */
        uint64_t unit = 1ULL << shift;
        uint64_t q = unit / fden, r = unit % fden;
        uint64_t add = fnum * q;
        double rest = (double)fnum * (double)r / (double)fden;
        add += (uint64_t)floor(rest);
        if (v > UINT64_MAX - add) return hbmi_error(HBM_ERR_INVALID, "size '%s' is too large", text);
        v += add;
    }
    *out = v;
    return HBM_OK;
}

char *hbm_size_xla(int64_t bytes, char buf[32]) {
    if (bytes == INT64_MIN) {
        snprintf(buf, 32, "-8E");
        return buf;
    }
    const char *neg = bytes < 0 ? "-" : "";
    if (bytes < 0) bytes = -bytes;
    if (bytes < 1024) {
        snprintf(buf, 32, "%s%" PRId64 "B", neg, bytes);
        return buf;
    }
    static const char units[] = "KMGTPE";
    const char *u = units;
    while (bytes >= (int64_t)1024 * 1024) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, 32, *u == 'K' ? "%s%.1f%ciB" : "%s%.2f%ciB", neg, (double)bytes / 1024.0, *u);
    return buf;
}

char *hbm_size_human(uint64_t bytes, char buf[32]) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, 32, "%" PRIu64 " B", bytes);
        return buf;
    }
    int u = 0;
    double v = (double)bytes;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, 32, "%.2f %s", v, units[u]);
    return buf;
}
