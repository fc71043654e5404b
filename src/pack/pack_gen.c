/* pack_gen.c - generated packing instances with a known optimum (guillotine cuts of a
 * full rectangle), so tests and benchmarks need no external files. */
#include "core/internal.h"
#include "hbm/pack.h"

typedef struct rect {
    uint64_t off, w;
    int64_t t0, t1;
} rect;

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

hbm_status hbm_pack_generate(uint64_t seed, size_t buffers, uint64_t capacity, int64_t steps,
                             hbm_timeline **out) {
    if (!out || capacity < 256 || steps < 1 || buffers < 1 || buffers > 1000000)
        return hbmi_error(HBM_ERR_INVALID, "pack: generate: need capacity >= 256, steps >= 1, 1..1e6 buffers");
    uint64_t unit = capacity / 256, rs = hbmi_hash64(seed) | 1;
    rect *r = hbmi_malloc(buffers * sizeof *r);
    if (!r) return hbmi_error(HBM_ERR_NOMEM, "pack: out of host memory generating %zu buffers", buffers);
    size_t n = 1;
    r[0] = (rect){0, unit * 256, 0, steps};
    /* cut a random piece that can still be cut, until there are enough or none can be */
    for (int tries = 0; n < buffers && tries < 100000; tries++) {
        size_t i = next(&rs) % n;
        rect a = r[i];
        int space = (next(&rs) & 1) != 0;
        if (space && a.w >= 2 * unit) {
            uint64_t k = 1 + next(&rs) % (a.w / unit - 1);
            r[i] = (rect){a.off, k * unit, a.t0, a.t1};
            r[n++] = (rect){a.off + k * unit, a.w - k * unit, a.t0, a.t1};
        } else if (!space && a.t1 - a.t0 >= 2) {
            int64_t m = a.t0 + 1 + (int64_t)(next(&rs) % (uint64_t)(a.t1 - a.t0 - 1));
            r[i] = (rect){a.off, a.w, a.t0, m};
            r[n++] = (rect){a.off, a.w, m, a.t1};
        }
    }
    for (size_t i = n; i > 1; i--) { /* shuffle */
        size_t j = next(&rs) % i;
        rect t = r[i - 1];
        r[i - 1] = r[j];
        r[j] = t;
    }
    hbm_timeline *tl = NULL;
    hbm_status s = hbm_timeline_new(&tl);
    if (!s) s = hbm_timeline_reserve(tl, n);
    for (size_t i = 0; i < n && !s; i++) s = hbm_timeline_add(tl, r[i].w, r[i].t0, r[i].t1, NULL, NULL);
    hbmi_free(r);
    if (s) {
        if (tl) hbm_timeline_free(tl);
        return s;
    }
    snprintf(tl->name, sizeof tl->name, "gen-%llu-%zu", (unsigned long long)seed, n);
    *out = tl;
    return HBM_OK;
}
