/* file.c - whole files into memory, for the readers of every input format; output files
 * written whole or not at all (a temporary renamed when complete). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "hbm/file.h"

/* At most max bytes of the file at path (SIZE_MAX: all of it), NUL-terminated. */
static hbm_status read_raw(const char *path, size_t max, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return hbmi_error(HBM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return hbmi_error(HBM_ERR_IO, "%s is a directory, not a file", path);
    }
    size_t cap = max < (1 << 16) ? max : (1 << 16), n = 0;
    char *p = hbmi_malloc(cap + 1);
    while (p) {
        size_t got = fread(p + n, 1, cap - n, f);
        n += got;
        if (n < cap || cap == max) break;
        size_t grow = cap <= (max - 1) / 2 ? 2 * cap : max;
        char *q = hbmi_realloc(p, grow + 1);
        if (!q) {
            hbmi_free(p);
            p = NULL;
            break;
        }
        p = q;
        cap = grow;
    }
    int err = ferror(f);
    fclose(f);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading %s", path);
    if (err) {
        hbmi_free(p);
        return hbmi_error(HBM_ERR_IO, "error reading %s: %s", path, strerror(errno));
    }
    p[n] = 0;
    *data = p;
    *len = n;
    return HBM_OK;
}

/* A gzip'd input in place of the compressed bytes (read whole: the mapping's paging is
 * for plain files). */
static hbm_status inflate_in_place(const char *path, char **data, size_t *len) {
    if (!hbmi_is_gzip(*data, *len)) return HBM_OK;
    unsigned char *out;
    size_t n;
    hbm_status s = hbmi_gunzip(*data, *len, 0, path, &out, &n);
    hbmi_free(*data);
    *data = s ? NULL : (char *)out;
    *len = s ? 0 : n;
    return s;
}

hbm_status hbmi_read_file(const char *path, char **data, size_t *len) {
    hbm_status s = read_raw(path, SIZE_MAX, data, len);
    return s ? s : inflate_in_place(path, data, len);
}

hbm_status hbmi_parse_file(const char *path, hbmi_parse_fn parse, void *out) {
    char *data;
    size_t len;
    hbm_status s = hbmi_read_file(path, &data, &len);
    if (s) return s;
    s = parse(data, len, path, out);
    hbmi_free(data);
    return s;
}

hbm_status hbmi_read_head(const char *path, size_t max, unsigned char **data, size_t *len) {
    return read_raw(path, max, (char **)data, len);
}

hbm_status hbmi_input_open(const char *path, hbmi_input *m) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= HBMI_INPUT_MAP_MIN &&
        (uint64_t)st.st_size <= SIZE_MAX) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED && hbmi_is_gzip(p, (size_t)st.st_size)) { /* inflated whole, below */
            munmap(p, (size_t)st.st_size);
            p = MAP_FAILED;
        }
        if (p != MAP_FAILED) {
            close(fd);
            madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
            m->data = p;
            m->len = (size_t)st.st_size;
            m->mapped = 1;
            return HBM_OK;
        }
    }
    if (fd >= 0) close(fd);
    return hbmi_read_file(path, &m->data, &m->len); /* small files, pipes, no mmap: read */
}

void hbmi_input_progress(hbmi_input *m, size_t upto) {
    if (!m || !m->mapped) return;
    long ps = sysconf(_SC_PAGESIZE);
    size_t pg = ps > 0 ? (size_t)ps : 4096, lo = upto / pg * pg;
    if (lo > m->dropped && !madvise(m->data + m->dropped, lo - m->dropped, MADV_DONTNEED)) m->dropped = lo;
    size_t hi = upto + 2 * HBMI_INPUT_WINDOW < m->len ? upto + 2 * HBMI_INPUT_WINDOW : m->len;
#ifdef MADV_POPULATE_READ /* one call maps the window's pages, where reading them would fault on each */
    size_t from = m->ready > lo ? m->ready : lo;
    from = from / pg * pg;
    if (hi > from) madvise(m->data + from, hi - from, MADV_POPULATE_READ);
#endif
    m->ready = hi;
    m->next = upto + HBMI_INPUT_WINDOW;
}

void hbmi_input_close(hbmi_input *m) {
    if (m->mapped) munmap(m->data, m->len);
    else hbmi_free(m->data);
    memset(m, 0, sizeof *m);
}

/* ---- output files: a temporary in the same folder, renamed when complete ---------------- */

hbm_status hbm_output_open(hbm_output *o, const char *path) {
    if (!o || !path || !*path) return hbmi_error(HBM_ERR_INVALID, "hbm_output_open: no path");
    memset(o, 0, sizeof *o);
    if (strlen(path) >= sizeof o->path) return hbmi_error(HBM_ERR_INVALID, "output path too long: %.64s...", path);
    snprintf(o->path, sizeof o->path, "%s", path);
    if (!strcmp(path, "-")) {
        o->f = stdout;
        return HBM_OK;
    }
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) return hbmi_error(HBM_ERR_IO, "cannot write %s: it is a directory", path);
    if (exists && !S_ISREG(st.st_mode)) {
        /* a device (/dev/null, /dev/stdout), a FIFO or a socket: written in place, never
         * replaced by a renamed regular file (which would take /dev/null's place) */
        o->f = fopen(path, "wb");
        if (!o->f) return hbmi_error(HBM_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return HBM_OK;
    }
    static atomic_uint counter; /* (threads write their files at once: the fleet's rank pages) */
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(o->tmp, sizeof o->tmp, "%s.tmp-%ld-%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) {
            int e = errno;
            o->tmp[0] = 0;
            return hbmi_error(HBM_ERR_IO, "cannot write %s: %s", path, strerror(e));
        }
        o->f = fdopen(fd, "wb");
        if (!o->f) {
            int e = errno;
            close(fd);
            unlink(o->tmp);
            o->tmp[0] = 0;
            return hbmi_error(HBM_ERR_IO, "cannot write %s: %s", path, strerror(e));
        }
        return HBM_OK;
    }
    o->tmp[0] = 0;
    return hbmi_error(HBM_ERR_IO, "cannot write %s: no free temporary name next to it", path);
}

hbm_status hbm_output_commit(hbm_output *o) {
    if (!o || !o->f) return hbmi_error(HBM_ERR_INVALID, "hbm_output_commit: not open");
    if (o->f == stdout) {
        o->f = NULL;
        errno = 0;
        if (fflush(stdout) == 0 && !ferror(stdout)) return HBM_OK;
        return hbmi_error(HBM_ERR_IO, "error writing standard output: %s", errno ? strerror(errno) : "write failed");
    }
    errno = 0;
    int bad = fflush(o->f) != 0 || ferror(o->f);
    int e = errno;
    if (fclose(o->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (!bad && !o->tmp[0]) return HBM_OK; /* written in place (not a regular file) */
    if (!bad && o->tmp[0] && rename(o->tmp, o->path) == 0) {
        o->tmp[0] = 0;
        return HBM_OK;
    }
    if (!bad) e = errno;
    if (!o->tmp[0]) return hbmi_error(HBM_ERR_IO, "error writing %s: %s", o->path, e ? strerror(e) : "write failed");
    unlink(o->tmp);
    o->tmp[0] = 0;
    return hbmi_error(HBM_ERR_IO, "error writing %s (left as it was): %s", o->path, e ? strerror(e) : "write failed");
}

void hbm_output_abort(hbm_output *o) {
    if (!o) return;
    if (o->f && o->f != stdout) fclose(o->f);
    o->f = NULL;
    if (o->tmp[0]) unlink(o->tmp);
    o->tmp[0] = 0;
}
