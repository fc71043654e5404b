/* gzip.c - gzip'd inputs (.pickle.gz, .hlo.gz: people compress snapshots and modules to
 * share them) inflated with zlib when hbm was built with it (CMake finds it; Debian:
 * zlib1g-dev). Without it a gzip input is an error that says what to do. */
#include <string.h>

#include "core/internal.h"

#ifdef HBM_HAVE_ZLIB
#include <zlib.h>

hbm_status hbmi_gunzip(const void *data, size_t len, size_t max, const char *name, unsigned char **out,
                       size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return hbmi_error(HBM_ERR_NOMEM, "out of host memory inflating %s", name);
    size_t cap = len < ((size_t)1 << 16) ? (size_t)1 << 16 : len * 4, n = 0;
    if (max && cap > max) cap = max;
    unsigned char *buf = hbmi_malloc(cap + 1);
    const unsigned char *in = data;
    size_t left = len;
    int rc = Z_OK;
    while (buf) {
        if (n == cap) {
            if (max && n >= max) break; /* a head is all the caller wants */
            size_t ncap = max && cap * 2 > max ? max : cap * 2;
            unsigned char *q = hbmi_realloc(buf, ncap + 1);
            if (!q) {
                hbmi_free(buf);
                buf = NULL;
                break;
            }
            buf = q;
            cap = ncap;
        }
        uInt chunk_in = left > (1u << 30) ? 1u << 30 : (uInt)left;
        uInt chunk_out = cap - n > (1u << 30) ? 1u << 30 : (uInt)(cap - n);
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = chunk_in;
        z.next_out = buf + n;
        z.avail_out = chunk_out;
        rc = inflate(&z, Z_NO_FLUSH);
        in += chunk_in - z.avail_in;
        left -= chunk_in - z.avail_in;
        n += chunk_out - z.avail_out;
        if (rc == Z_STREAM_END) {
            /* concatenated members (gzip a b > c) are one stream; trailing zeros are padding */
            while (left && !*in) in++, left--;
            if (!left) break;
            if (inflateReset(&z) != Z_OK) break;
            continue;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) break;
        if (rc == Z_BUF_ERROR && !left) break; /* input ends inside the stream */
    }
    inflateEnd(&z);
    if (!buf) return hbmi_error(HBM_ERR_NOMEM, "out of host memory inflating %s", name);
    if (rc != Z_STREAM_END && !(max && n)) { /* (a head: what came out of the bytes given) */
        hbmi_free(buf);
        if (rc == Z_BUF_ERROR || rc == Z_OK)
            return hbmi_error(HBM_ERR_PARSE, "%s: the file ends early (gzip data truncated after %zu bytes)", name, len);
        return hbmi_error(HBM_ERR_PARSE, "%s: damaged gzip data (%s)", name, z.msg ? z.msg : "inflate failed");
    }
    buf[n] = 0;
    *out = buf;
    *out_len = n;
    return HBM_OK;
}
#else
hbm_status hbmi_gunzip(const void *data, size_t len, size_t max, const char *name, unsigned char **out,
                       size_t *out_len) {
    (void)data, (void)len, (void)max;
    *out = NULL;
    *out_len = 0;
    return hbmi_error(HBM_ERR_UNSUPPORTED,
                      "%s is gzip-compressed and this hbm was built without zlib: gunzip it first, or "
                      "install zlib's headers (Debian: zlib1g-dev) and rebuild hbm",
                      name);
}
#endif
