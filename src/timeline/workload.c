/* workload.c - a transformer training step as a timeline, and a runner that plays any
 * timeline against an allocator. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/size.h"
#include "hbm/workload.h"
#include "timeline/timeline_internal.h"

void hbm_transformer_spec_default(hbm_transformer_spec *s) {
    s->layers = 24;
    s->d_model = 3072;
    s->seq_len = 2048;
    s->batch = 9;
    s->vocab = 65536;
}

/* Builds buffers whose end is not known yet: open ones get their end when closed. */
typedef struct builder {
    hbm_timeline *tl;
    int64_t now;
    struct open_buf { uint64_t size; int64_t start; hbm_tag tag; char shape[64], op[64]; } *open;
    size_t nopen, cap;
} builder;

/* Open a buffer; *h: its handle (index into open). */
static hbm_status b_alloc(builder *b, size_t *h, uint64_t size, hbm_category cat, const char *op, const char *fmt, ...)
    HBMI_PRINTF(6, 7);
static hbm_status b_alloc(builder *b, size_t *h, uint64_t size, hbm_category cat, const char *op, const char *fmt, ...) {
    TRY(hbmi_grow((void **)&b->open, &b->cap, b->nopen + 1, sizeof *b->open));
    struct open_buf *o = &b->open[b->nopen];
    o->size = size;
    o->start = b->now++;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->shape, sizeof o->shape, fmt, ap);
    va_end(ap);
    snprintf(o->op, sizeof o->op, "%s", op);
    o->tag = (hbm_tag){.op_name = NULL, .shape = NULL, .label = NULL, .category = cat};
    *h = b->nopen++;
    return HBM_OK;
}

static hbm_status b_free(builder *b, size_t h) {
    struct open_buf *o = &b->open[h];
    hbm_tag t = o->tag;
    t.op_name = o->op;
    t.shape = o->shape;
    return hbm_timeline_add(b->tl, o->size, o->start, b->now++, &t, NULL);
}

/* per layer: qkv [d,3d], out [d,d], up [d,4d], down [4d,d] */
static const struct { const char *name; int rows, cols; } mats[4] = {
    {"attn.qkv", 1, 3}, {"attn.out", 1, 1}, {"mlp.up", 1, 4}, {"mlp.down", 4, 1}};

/* The step's buffers into b->tl; w, m, v, g: nw handles each, acts: 4 per layer. */
static hbm_status build_step(builder *b, const hbm_transformer_spec *s, size_t nw, size_t *w, size_t *m, size_t *v,
                             size_t *g, size_t *acts) {
    const uint64_t L = (uint64_t)s->layers, d = (uint64_t)s->d_model, T = (uint64_t)s->seq_len, B = (uint64_t)s->batch,
                   V = (uint64_t)s->vocab;
    char op[64];
    /* weights and optimizer state, alive for the whole step */
    for (size_t i = 0; i < nw; i++) {
        uint64_t r = i < nw - 1 ? mats[i % 4].rows * d : V, c = i < nw - 1 ? mats[i % 4].cols * d : d;
        if (i < nw - 1) snprintf(op, sizeof op, "layers.%zu.%s", i / 4, mats[i % 4].name);
        else snprintf(op, sizeof op, "embed");
        TRY(b_alloc(b, &w[i], r * c * 4, HBM_CAT_WEIGHT, op, "f32[%llu,%llu]", (unsigned long long)r, (unsigned long long)c));
        TRY(b_alloc(b, &m[i], r * c * 4, HBM_CAT_OPTIMIZER, op, "f32[%llu,%llu] adam.m", (unsigned long long)r,
                    (unsigned long long)c));
        TRY(b_alloc(b, &v[i], r * c * 4, HBM_CAT_OPTIMIZER, op, "f32[%llu,%llu] adam.v", (unsigned long long)r,
                    (unsigned long long)c));
    }
    /* forward: activations saved for the backward pass (bf16) */
    static const struct { const char *name; int width; } saved[4] = {
        {"input", 1}, {"attn.qkv", 3}, {"attn.out", 1}, {"mlp.up", 4}};
    for (uint64_t l = 0; l < L; l++)
        for (int k = 0; k < 4; k++) {
            snprintf(op, sizeof op, "layers.%llu.%s", (unsigned long long)l, saved[k].name);
            TRY(b_alloc(b, &acts[4 * l + (uint64_t)k], B * T * saved[k].width * d * 2, HBM_CAT_ACTIVATION, op,
                        "bf16[%llu,%llu,%llu]", (unsigned long long)B, (unsigned long long)T,
                        (unsigned long long)(saved[k].width * d)));
        }
    size_t logits, dx;
    TRY(b_alloc(b, &logits, B * T * V * 4, HBM_CAT_ACTIVATION, "lm_head", "f32[%llu,%llu,%llu]", (unsigned long long)B,
                (unsigned long long)T, (unsigned long long)V));
    /* backward: d(loss)/d(logits) is written in place; dx flows down the layers */
    TRY(b_alloc(b, &dx, B * T * d * 2, HBM_CAT_ACTIVATION, "lm_head.grad_input", "bf16[%llu,%llu,%llu]",
                (unsigned long long)B, (unsigned long long)T, (unsigned long long)d));
    TRY(b_alloc(b, &g[nw - 1], V * d * 4, HBM_CAT_WEIGHT, "embed.grad", "f32[%llu,%llu]", (unsigned long long)V,
                (unsigned long long)d));
    TRY(b_free(b, logits));
    for (uint64_t l = L; l-- > 0;) {
        for (int k = 3; k >= 0; k--) {
            size_t i = 4 * l + (uint64_t)k;
            snprintf(op, sizeof op, "layers.%llu.%s.grad", (unsigned long long)l, mats[k].name);
            TRY(b_alloc(b, &g[i], mats[k].rows * d * mats[k].cols * d * 4, HBM_CAT_WEIGHT, op, "f32[%llu,%llu]",
                        (unsigned long long)(mats[k].rows * d), (unsigned long long)(mats[k].cols * d)));
        }
        snprintf(op, sizeof op, "layers.%llu.grad_input", (unsigned long long)l);
        size_t ndx;
        TRY(b_alloc(b, &ndx, B * T * d * 2, HBM_CAT_ACTIVATION, op, "bf16[%llu,%llu,%llu]", (unsigned long long)B,
                    (unsigned long long)T, (unsigned long long)d));
        TRY(b_free(b, dx));
        dx = ndx;
        for (int k = 3; k >= 0; k--) TRY(b_free(b, acts[4 * l + (uint64_t)k]));
    }
    TRY(b_free(b, dx));
    /* optimizer: each gradient is consumed by the update */
    for (size_t i = 0; i < nw; i++) TRY(b_free(b, g[i]));
    for (size_t i = 0; i < nw; i++) {
        TRY(b_free(b, w[i]));
        TRY(b_free(b, m[i]));
        TRY(b_free(b, v[i]));
    }
    return HBM_OK;
}

hbm_status hbm_workload_transformer(const hbm_transformer_spec *s, hbm_timeline **out) {
    if (!s || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_workload_transformer: NULL argument");
    if (s->layers < 1 || s->layers > 1000 || s->d_model < 8 || s->seq_len < 1 || s->batch < 1 || s->vocab < 2)
        return hbmi_error(HBM_ERR_INVALID, "transformer spec out of range (layers %d, d_model %d, seq %d, batch %d, vocab %d)",
                          s->layers, s->d_model, s->seq_len, s->batch, s->vocab);
    builder b;
    memset(&b, 0, sizeof b);
    TRY(hbm_timeline_new(&b.tl));
    snprintf(b.tl->clock, sizeof b.tl->clock, "event");
    snprintf(b.tl->name, sizeof b.tl->name, "transformer step L%d d%d B%dx%d", s->layers, s->d_model, s->batch, s->seq_len);
    const uint64_t L = (uint64_t)s->layers;
    const size_t nw = 4 * L + 1; /* + embedding */
    size_t *w = hbmi_malloc(nw * sizeof *w), *m = hbmi_malloc(nw * sizeof *m), *v = hbmi_malloc(nw * sizeof *v);
    size_t *g = hbmi_malloc(nw * sizeof *g), *acts = hbmi_malloc(4 * L * sizeof *acts);
    hbm_status st = !w || !m || !v || !g || !acts ? hbmi_error(HBM_ERR_NOMEM, "out of host memory building a workload")
                                                 : build_step(&b, s, nw, w, m, v, g, acts);
    hbmi_free(w);
    hbmi_free(m);
    hbmi_free(v);
    hbmi_free(g);
    hbmi_free(acts);
    hbmi_free(b.open);
    if (st) {
        hbm_timeline_free(b.tl);
        return st;
    }
    *out = b.tl;
    return HBM_OK;
}

/* ---- running a timeline against an allocator --------------------------------------- */

hbm_status hbm_timeline_run(const hbm_timeline *tl, hbm_allocator *a, hbm_run_result *r) {
    if (!tl || !a || !r) return hbmi_error(HBM_ERR_INVALID, "hbm_timeline_run: NULL argument");
    memset(r, 0, sizeof *r);
    if (tl->count > UINT32_MAX) return hbmi_error(HBM_ERR_INVALID, "timeline too large to run");
    hbmi_tl_event *ev = NULL;
    hbm_status s = hbmi_timeline_events(tl, &ev);
    if (s) return s;
    uint64_t *addr = hbmi_malloc(tl->count * sizeof *addr + 1);
    uint8_t *held = hbmi_calloc(tl->count + 1, 1);
    if (!addr || !held) {
        hbmi_free(ev);
        hbmi_free(addr);
        hbmi_free(held);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory running %zu buffers", tl->count);
    }
    for (size_t e = 0; e < 2 * tl->count && !s; e++) {
        size_t i = ev[e].buf;
        if (ev[e].is_start) {
            s = hbm_alloc(a, tl->buffers[i].size, hbm_timeline_tag(tl, i), &addr[i]);
            if (s) r->failed_buffer = i;
            else held[i] = 1;
        } else if (held[i]) {
            s = hbm_free(a, addr[i]);
            held[i] = 0;
        }
        if (!s) r->events++;
    }
    hbm_stats st;
    hbm_stats_get(a, &st);
    r->peak_in_use = st.peak_bytes_in_use;
    r->peak_reserved = st.peak_bytes_reserved;
    r->status = s;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", hbm_last_error());
    for (size_t i = 0; i < tl->count; i++)
        if (held[i]) hbm_free(a, addr[i]);
    hbmi_free(ev);
    hbmi_free(addr);
    hbmi_free(held);
    if (s) hbmi_error(s, "%s", msg);
    return s;
}

hbm_status hbm_transformer_describe(const hbm_transformer_spec *s, const hbm_timeline *tl, FILE *f) {
    if (!s || !tl || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_transformer_describe: NULL argument");
    uint64_t by_cat[HBM_CAT_COUNT_] = {0}, peak = 0;
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tag *t = hbm_timeline_tag(tl, i);
        if (t && (unsigned)t->category < HBM_CAT_COUNT_) by_cat[t->category] += tl->buffers[i].size;
    }
    hbm_timeline_peak(tl, &peak, NULL);
    char a[32], b[32], c[32], d[32];
    uint64_t params = (uint64_t)s->layers * 12 * (uint64_t)s->d_model * (uint64_t)s->d_model +
                      (uint64_t)s->vocab * (uint64_t)s->d_model;
    fprintf(f,
            "One training step of a %.1fB-parameter transformer (%d layers, d_model %d, batch %d x %d tokens):\n"
            "  %zu buffers: weights and their gradients %s, Adam state %s, activations %s;\n"
            "  %s live at the step's peak.\n\n",
            (double)params / 1e9, s->layers, s->d_model, s->batch, s->seq_len, tl->count,
            hbm_size_human(by_cat[HBM_CAT_WEIGHT], a), hbm_size_human(by_cat[HBM_CAT_OPTIMIZER], b),
            hbm_size_human(by_cat[HBM_CAT_ACTIVATION], c), hbm_size_human(peak, d));
    return HBM_OK;
}
