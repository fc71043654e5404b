/* driver.c - runs a libFuzzer target without libFuzzer: every file of the corpus
 * directory given as argv[1], then deterministic random mutations of them (and of random
 * bytes) for HBM_FUZZ_ITERS iterations (default 20000). A crash or sanitizer report fails
 * the test; the target's own return value is ignored, as libFuzzer does. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng = 0x243f6a8885a308d3ULL;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

typedef struct seed { uint8_t *data; size_t size; } seed;

/* The values of a libFuzzer dictionary (name="value" lines, \xNN \\ \" escapes). */
static size_t read_dict(const char *path, seed *out, size_t max) {
    FILE *f = fopen(path, "r");
    char line[512];
    size_t n = 0;
    while (f && n < max && fgets(line, sizeof line, f)) {
        char *a = strchr(line, '"'), *b = strrchr(line, '"');
        if (line[0] == '#' || !a || b <= a) continue;
        seed v = {malloc((size_t)(b - a)), 0};
        for (char *p = a + 1; p < b; p++) {
            unsigned x;
            if (*p == '\\' && p[1] == 'x' && sscanf(p + 2, "%2x", &x) == 1) v.data[v.size++] = (uint8_t)x, p += 3;
            else if (*p == '\\' && p + 1 < b) v.data[v.size++] = (uint8_t)*++p;
            else v.data[v.size++] = (uint8_t)*p;
        }
        out[n++] = v;
    }
    if (f) fclose(f);
    return n;
}

int main(int argc, char **argv) {
    seed *seeds = NULL;
    size_t nseeds = 0;
    if (argc > 1) {
        DIR *d = opendir(argv[1]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
            FILE *f = fopen(path, "rb");
            if (!f) continue;
            seed s = {malloc(1 << 20), 0};
            s.size = fread(s.data, 1, 1 << 20, f);
            fclose(f);
            seeds = realloc(seeds, (nseeds + 1) * sizeof *seeds);
            seeds[nseeds++] = s;
            LLVMFuzzerTestOneInput(s.data, s.size);
        }
        if (d) closedir(d);
    }
    long iters = getenv("HBM_FUZZ_ITERS") ? atol(getenv("HBM_FUZZ_ITERS")) : 20000;
    uint8_t *buf = malloc(1 << 20);
    for (long i = 0; i < iters; i++) {
        size_t n;
        if (nseeds && (next() % 8)) {
            seed *s = &seeds[next() % nseeds];
            n = s->size;
            memcpy(buf, s->data, n);
            int muts = 1 + (int)(next() % 8);
            for (int m = 0; m < muts && n; m++) {
                size_t at = next() % n;
                switch (next() % 4) {
                case 0: buf[at] = (uint8_t)next(); break;                 /* flip a byte */
                case 1: n = at; break;                                      /* truncate */
                case 2: memmove(buf + at, buf + at + 1, n - at - 1); n--; break; /* delete */
                default: if (n < (1 << 20) - 1) { memmove(buf + at + 1, buf + at, n - at); buf[at] = "{}[](),=\"%:\n 0"[next() % 15]; n++; }
                }
            }
        } else {
            n = next() % 256;
            for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)next();
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    /* then the dictionary's values (fuzz/hbm.dict, beside corpus/NAME) put into the seeds:
     * sizes past 64 bits, control characters, the starts of other kinds of file */
    seed dict[64];
    char dpath[4200];
    snprintf(dpath, sizeof dpath, "%s/../../hbm.dict", argc > 1 ? argv[1] : ".");
    size_t nd = read_dict(dpath, dict, 64);
    long dict_iters = nseeds && nd ? iters / 4 : 0;
    for (long i = 0; i < dict_iters; i++) {
        seed *s = &seeds[next() % nseeds], *v = &dict[next() % nd];
        size_t at = s->size ? next() % (s->size + 1) : 0, cut = at < s->size ? next() % 24 : 0;
        if (cut > s->size - at) cut = s->size - at;
        if (s->size - cut + v->size > 1 << 20) continue;
        memcpy(buf, s->data, at); /* the value in place of 0 to 23 bytes (a number, a name) */
        memcpy(buf + at, v->data, v->size);
        memcpy(buf + at + v->size, s->data + at + cut, s->size - at - cut);
        LLVMFuzzerTestOneInput(buf, s->size - cut + v->size);
    }
    for (size_t i = 0; i < nd; i++) free(dict[i].data);
    printf("fuzz driver: %zu seeds, %ld mutated inputs, %ld with dictionary values, no crash\n", nseeds, iters,
           dict_iters);
    for (size_t i = 0; i < nseeds; i++) free(seeds[i].data);
    free(seeds);
    free(buf);
    return 0;
}
