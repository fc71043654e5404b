/* file.c - whole files into memory, for the readers of every input format. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

hbm_status hbmi_read_file(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return hbmi_error(HBM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *p = hbmi_malloc(cap + 1);
    while (p) {
        size_t got = fread(p + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *q = hbmi_realloc(p, 2 * cap + 1);
        if (!q) {
            hbmi_free(p);
            p = NULL;
            break;
        }
        p = q;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading %s", path);
    if (err) {
        hbmi_free(p);
        return hbmi_error(HBM_ERR_IO, "error reading %s", path);
    }
    p[n] = 0;
    *data = p;
    *len = n;
    return HBM_OK;
}
