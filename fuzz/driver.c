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
    printf("fuzz driver: %zu seeds, %ld mutated inputs, no crash\n", nseeds, iters);
    for (size_t i = 0; i < nseeds; i++) free(seeds[i].data);
    free(seeds);
    free(buf);
    return 0;
}
