/* bench_proto.c - XLA's protobuf inputs (issue 24): (1) listing the modules of a 100 MB XProf
 * profile, made in memory from the shared profile (HBM_SHARED_DATA/xprof) in two shapes: the
 * whole XSpace concatenated with itself (every plane repeated: thousands of modules, each
 * with XLA's assignment), and one metadata plane with the trace planes repeated (a long
 * trace, few modules); target under 2 s. (2) reading a module from its HloModuleProto
 * against parsing its HLO text, the same module both ways (a generated 20 MB module and
 * the shared HLO sets); target: proto no slower than text. (3) the memory profile of the
 * same 100 MB profiles (the allocators' events, XProf's summary): no slower than the
 * listing, both read from the bytes in memory and from a file (as hbm plan and hbm view
 * read it), the median of 7 runs each and their ratio. CPU time, this process. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hbm/hbm.h"
#include "hlo/hlo_internal.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0, *len = (size_t)n;
    return b;
}

/* top-level field k of a message: [*at, *at + *n) including its tag and length */
static int next_field(const unsigned char *p, size_t len, size_t *i, size_t *start, size_t *end, unsigned *field,
                      const unsigned char **body, size_t *blen) {
    if (*i >= len) return 0;
    *start = *i;
    uint64_t tag, l;
    if (hbmi_varint_get(p, len, i, &tag) <= 0 || (tag & 7) != 2 || hbmi_varint_get(p, len, i, &l) <= 0) return 0;
    *body = p + *i;
    *blen = (size_t)l;
    *i += (size_t)l;
    *end = *i;
    *field = (unsigned)(tag >> 3);
    return *i <= len;
}

#define RUNS 7

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One read, CPU seconds: what = 0 the module listing, 1 the memory profile; from the bytes
 * in memory (path NULL: hbm_*_open_mem, which copy them) or from the file (as hbm plan and
 * hbm view open it). -1 on error. */
static double one_read(int what, const char *buf, size_t len, const char *path, size_t *count) {
    double t0 = now();
    if (!what) {
        hbm_proto_file *f;
        if (path ? hbm_proto_open(path, &f) : hbm_proto_open_mem(buf, len, "bench", &f)) {
            fprintf(stderr, "bench_proto: %s\n", hbm_last_error());
            return -1;
        }
        *count = hbm_proto_module_count(f);
        FILE *sink = fopen("/dev/null", "w");
        if (sink) {
            hbm_proto_list(f, sink, 0);
            fclose(sink);
        }
        hbm_proto_close(f);
    } else {
        hbm_memprof *mp;
        if (path ? hbm_memprof_open(path, &mp) : hbm_memprof_open_mem(buf, len, "bench", &mp)) {
            fprintf(stderr, "bench_proto: %s\n", hbm_last_error());
            return -1;
        }
        hbm_memprof_events(mp, count);
        hbm_memprof_close(mp);
    }
    return now() - t0;
}

/* The module listing from the bytes in memory: the best of 3 reads, CPU seconds; -1 on error. */
static double list_time(const char *buf, size_t len, size_t *modules) {
    double best = 1e9;
    for (int r = 0; r < 3; r++) {
        double t = one_read(0, buf, len, NULL, modules);
        if (t < 0) return -1;
        if (t < best) best = t;
    }
    return best;
}

/* The listing against the memory profile of the same profile: the median of RUNS reads of
 * each (alternating), in memory and from a file, and their ratio. */
static void list_vs_memprof(const char *what, const char *buf, size_t len) {
    char path[] = "/tmp/hbm_bench_proto_XXXXXX";
    int fd = mkstemp(path);
    FILE *w = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int have_file = w && fwrite(buf, 1, len, w) == len;
    if (w) fclose(w);
    double t[2][2][RUNS], med[2][2] = {{0}};
    size_t mods = 0, evs = 0;
    for (int from = 0; from < 1 + have_file; from++) {
        for (int r = 0; r < RUNS; r++)
            for (int k = 0; k < 2; k++)
                if ((t[from][k][r] = one_read(k, buf, len, from ? path : NULL, k ? &evs : &mods)) < 0) goto out;
        for (int k = 0; k < 2; k++) med[from][k] = median(t[from][k], RUNS);
    }
    printf("%s, %.1f MB: %zu modules, %zu memory events; CPU s, median of %d\n", what, (double)len / 1e6, mods, evs,
           RUNS);
    printf("                       in memory   MB/s     from the file   MB/s\n");
    const char *names[] = {"listing the modules", "the memory profile"};
    for (int k = 0; k < 2; k++)
        printf("  %-20s %9.4f %6.0f %17.4f %6.0f\n", names[k], med[0][k], (double)len / 1e6 / med[0][k], med[1][k],
               have_file ? (double)len / 1e6 / med[1][k] : 0.0);
    printf("  memory profile / listing: %.2f in memory, %.2f from the file (target <= 1)\n", med[0][1] / med[0][0],
           have_file ? med[1][1] / med[1][0] : 0.0);
out:
    if (fd >= 0) remove(path);
}

static void bench_listing(void) {
    const char *path = HBM_SHARED_DATA "/xprof/rocm_te_fused_attn.xplane.pb";
    size_t len;
    char *x = slurp(path, &len);
    if (!x) {
        printf("listing: skipped (%s not found)\n", path);
        return;
    }
    const size_t target = (size_t)100 << 20;
    /* (a) the whole XSpace repeated */
    size_t copies = target / len + 1, n = copies * len, mods;
    char *big = malloc(n);
    for (size_t k = 0; k < copies; k++) memcpy(big + k * len, x, len);
    double t = list_time(big, n, &mods);
    printf("listing a %.1f MB profile (the shared one x%zu: %zu modules with XLA's assignment): %.3f s "
           "(target < 2 s)\n", (double)n / 1e6, copies, mods, t);
    list_vs_memprof("the shared profile repeated", big, n);
    /* (b) one metadata plane, the other planes repeated */
    const unsigned char *p = (const unsigned char *)x, *body;
    size_t i = 0, s, e, blen, meta_s = 0, meta_e = 0, other = 0;
    unsigned field;
    char *tr = malloc(target + 2 * len);
    size_t m = 0;
    while (next_field(p, len, &i, &s, &e, &field, &body, &blen)) {
        if (field != 1) continue;
        int meta = 0;
        for (size_t q = 0; q + 14 <= blen && q < 64 && !meta; q++) meta = !memcmp(body + q, "/host:metadata", 14);
        if (meta) meta_s = s, meta_e = e;
        else other += e - s;
    }
    memcpy(tr, x + meta_s, meta_e - meta_s);
    m = meta_e - meta_s;
    while (other && m < target) {
        i = 0;
        while (next_field(p, len, &i, &s, &e, &field, &body, &blen) && m < target)
            if (field == 1 && s != meta_s) memcpy(tr + m, x + s, e - s), m += e - s;
    }
    t = list_time(tr, m, &mods);
    printf("listing a %.1f MB profile (one metadata plane, trace planes repeated: %zu modules): %.3f s "
           "(target < 2 s)\n", (double)m / 1e6, mods, t);
    list_vs_memprof("one metadata plane, the trace planes repeated", tr, m);
    free(tr);
    free(big);
    free(x);
}

/* text parse vs proto read of the same module, best of 3 each */
static int read_both(const char *text, size_t len, double *tt, double *tp, size_t *pb_len) {
    hbm_hlo_module *m;
    if (hbm_hlo_parse(text, len, "bench", &m)) return 0;
    uint8_t *pb;
    size_t pl;
    if (hbmi_proto_write_module(m, 0, &pb, &pl)) {
        hbm_hlo_module_free(m);
        return 0;
    }
    hbm_hlo_module_free(m);
    double bt = 1e9, bp = 1e9;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        if (hbm_hlo_parse(text, len, "bench", &m)) break;
        double t1 = now();
        hbm_hlo_module_free(m);
        double t2 = now();
        hbm_proto_file *f;
        if (hbm_proto_open_mem(pb, pl, "bench", &f) || hbm_proto_load(f, 0, &m)) break;
        hbm_proto_close(f);
        double t3 = now();
        hbm_hlo_module_free(m);
        if (t1 - t0 < bt) bt = t1 - t0;
        if (t3 - t2 < bp) bp = t3 - t2;
    }
    hbmi_free(pb);
    *tt += bt;
    *tp += bp;
    *pb_len += pl;
    return 1;
}

static void bench_read(void) {
    /* a generated module: a chain of elementwise ops with metadata, about 20 MB of text */
    size_t cap = (size_t)24 << 20, n = 0;
    char *t = malloc(cap);
    n += (size_t)snprintf(t + n, cap - n, "HloModule jit_chain, is_scheduled=true\n\nENTRY %%main (p: f32[1024,256]) -> "
                          "f32[1024,256] {\n  %%p = f32[1024,256]{1,0} parameter(0)\n");
    int k = 1;
    const char *prev = "p";
    char pn[32];
    for (; n + 400 < cap - 4096 && k < 200000; k++) {
        n += (size_t)snprintf(t + n, cap - n,
                              "  %%a.%d = f32[1024,256]{1,0} add(%%%s, %%p), metadata={op_name=\"jit(f)/layer_%d/add\" "
                              "source_file=\"/workspace/model.py\" source_line=%d}\n",
                              k, prev, k, 100 + k % 50);
        snprintf(pn, sizeof pn, "a.%d", k);
        prev = pn;
    }
    n += (size_t)snprintf(t + n, cap - n, "  ROOT %%r = f32[1024,256]{1,0} negate(%%%s)\n}\n", prev);
    double tt = 0, tp = 0;
    size_t pl = 0;
    if (read_both(t, n, &tt, &tp, &pl))
        printf("reading a %.1f MB HLO module (%d instructions): text %.3f s, HloModuleProto (%.1f MB) %.3f s: "
               "proto/text %.2f (target <= 1)\n", (double)n / 1e6, k + 1, tt, (double)pl / 1e6, tp, tp / tt);
    free(t);
    /* the shared sets */
    const char *dirs[] = {HBM_SHARED_DATA "/hlo/jaxdecomp", HBM_SHARED_DATA "/hlo/xladumps"};
    tt = tp = 0;
    pl = 0;
    size_t tl = 0, count = 0;
    for (int d = 0; d < 2; d++) {
        DIR *dp = opendir(dirs[d]);
        struct dirent *e;
        while (dp && (e = readdir(dp))) {
            size_t l = strlen(e->d_name), len;
            if (l < 5 || strcmp(e->d_name + l - 4, ".hlo")) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dirs[d], e->d_name);
            char *txt = slurp(path, &len);
            if (txt && read_both(txt, len, &tt, &tp, &pl)) tl += len, count++;
            free(txt);
        }
        if (dp) closedir(dp);
    }
    if (count)
        printf("reading %zu shared modules (%.1f MB of text, %.1f MB as HloModuleProto): text %.3f s, proto %.3f s: "
               "proto/text %.2f (target <= 1)\n", count, (double)tl / 1e6, (double)pl / 1e6, tt, tp, tp / tt);
    else
        printf("reading shared modules: skipped (%s absent)\n", HBM_SHARED_DATA "/hlo");
}

int main(void) {
    if (!hbm_proto_available()) {
        printf("bench_proto: skipped (hbm built without protobuf-c)\n");
        return 0;
    }
    bench_listing();
    bench_read();
    return 0;
}
