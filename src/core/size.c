/* size.c - sizes in human units: parsing "80GiB", printing like XLA. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/size.h"

/* A number past 2^64 - 1 bytes: the text is a size, too large (*out saturated). */
static hbm_status too_large(const char *text, uint64_t *out) {
    *out = UINT64_MAX;
    return hbmi_error(HBM_ERR_INVALID, "size '%s' is too large", text);
}

hbm_status hbm_size_parse(const char *text, uint64_t *out) {
    if (!text || !out) return hbmi_error(HBM_ERR_INVALID, "size: NULL argument");
    *out = 0;
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p) && *p != '.')
        return hbmi_error(HBM_ERR_INVALID, "size '%s': expected a number such as 1048576, 80GiB or 1.5G", text);
    uint64_t whole = 0;
    int digits = 0;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p++ - '0');
        if (whole > (UINT64_MAX - d) / 10) return too_large(text, out);
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
    /* K, M, G, T, P, E: "KiB" (IEC) and a bare "K" are powers of 1024, "KB" (SI) powers
     * of 1000 */
    static const char prefixes[] = "KMGTPE";
    const char *pre = *p ? strchr(prefixes, toupper((unsigned char)*p)) : NULL;
    int power = pre ? (int)(pre - prefixes) + 1 : 0, binary = 1;
    if (power) {
        p++;
        if (*p == 'i' || *p == 'I') {
            p++;
            if (*p == 'b' || *p == 'B') p++;
        } else if (*p == 'b' || *p == 'B') {
            p++;
            binary = 0;
        }
    } else if (*p == 'b' || *p == 'B') {
        p++;
    }
    while (isspace((unsigned char)*p)) p++;
    if (*p)
        return hbmi_error(HBM_ERR_INVALID, "size '%s': unexpected '%s' (units: B, KiB, MiB, GiB, TiB or KB, MB, GB, TB)",
                          text, p);
    if (fnum && !power) return hbmi_error(HBM_ERR_INVALID, "size '%s': a byte count must be whole", text);
    uint64_t unit = 1;
    for (int i = 0; i < power; i++) unit *= binary ? 1024 : 1000;
    if (whole > UINT64_MAX / unit) return too_large(text, out);
    uint64_t v = whole * unit;
    if (fnum) {
        /* fnum/fden * unit, fden <= 1e12 so split the unit to avoid overflow */
        uint64_t q = unit / fden, r = unit % fden;
        uint64_t add = fnum * q;
        double rest = (double)fnum * (double)r / (double)fden;
        add += (uint64_t)floor(rest);
        if (v > UINT64_MAX - add) return too_large(text, out);
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
    /* one format for every size hbm prints: XLA's, which hbm's reports quote */
    if (bytes <= (uint64_t)INT64_MAX) return hbm_size_xla((int64_t)bytes, buf);
    snprintf(buf, 32, "%.2fEiB", (double)(bytes >> 40) / (double)(1 << 20));
    return buf;
}

/* PyTorch's format_size (c10/cuda/CUDACachingAllocator.cpp), the sizes of its OOM message:
 * "512 bytes", "1.50 KiB", "20.00 MiB", "4.94 GiB". */
char *hbmi_size_torch(uint64_t n, char buf[32]) {
    if (n <= 1024) snprintf(buf, 32, "%" PRIu64 " bytes", n);
    else if (n <= 1048576) snprintf(buf, 32, "%.2f KiB", (double)n / 1024.0);
    else if (n <= 1073741824ull) snprintf(buf, 32, "%.2f MiB", (double)n / 1048576.0);
    else snprintf(buf, 32, "%.2f GiB", (double)n / 1073741824.0);
    return buf;
}
