/* oom_report.c - the out-of-memory report: XLA's first line, the numbers, the largest live
 * buffers with their tags, an occupancy map like BFC's, and a diagnosis that names the
 * setting to try. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "alloc/torch_caching.h"
#include "hbm/device_models.h"
#include "hbm/size.h"
#include "alloc/oom_report.h"

#define MAP_WIDTH HBMI_OOM_MAP_WIDTH

typedef hbmi_oom_live live_buf;

static void print_tag(FILE *f, const live_buf *l) {
    if (!l->has_tag) {
        fprintf(f, "(untagged)");
        return;
    }
    const hbm_tag *t = &l->tag;
    int any = 0;
    if (t->label && *t->label) fprintf(f, "%s%s", any++ ? " " : "", t->label);
    if (t->op_name && *t->op_name) fprintf(f, "%sop=%s", any++ ? " " : "", t->op_name);
    if (t->shape && *t->shape) fprintf(f, "%s%s", any++ ? " " : "", t->shape);
    if (t->category != HBM_CAT_NONE) fprintf(f, "%s[%s]", any++ ? " " : "", hbm_category_str(t->category));
    if (t->source_file && *t->source_file) {
        fprintf(f, "%s%s", any++ ? " " : "", t->source_file);
        if (t->source_line) fprintf(f, ":%d", t->source_line);
    }
    if (!any) fprintf(f, "(untagged)");
}

/* ".85" as JAX users write it; "1.0" for the whole device. */
/* The smallest fraction in hundredths whose limit holds need bytes of total, checked under
 * the rule the framework applies: PyTorch's set_per_process_memory_fraction allows total x f;
 * XLA's BFC total x f rounded up to 2 MiB, up to .99 (hbm_xla_gpu_fraction_for). 0: none. */
static int fraction_str(uint64_t need, uint64_t total, int torch, char *buf, size_t n) {
    if (!torch) {
        double fr = hbm_xla_gpu_fraction_for(need, total);
        if (fr > 0) hbm_fraction_text(fr, buf, n);
        return fr > 0;
    }
    for (int k = 1; k <= 100; k++)
        if ((uint64_t)((double)total * (k / 100.0)) >= need) {
            if (k == 100) snprintf(buf, n, "1.0");
            else snprintf(buf, n, ".%02d", k);
            return 1;
        }
    return 0;
}

const char *hbm_oom_cause_str(hbm_oom_cause c) {
    switch (c) {
    case HBM_OOM_CAUSE_NONE: return "none";
    case HBM_OOM_CAUSE_EXCEEDS_DEVICE: return "request larger than the device";
    case HBM_OOM_CAUSE_TOO_BIG: return "too big for the device";
    case HBM_OOM_CAUSE_LIMIT: return "framework limit";
    case HBM_OOM_CAUSE_DEVICE_SHARED: return "device memory held elsewhere";
    case HBM_OOM_CAUSE_FRAGMENTATION: return "fragmentation";
    }
    return "?";
}

/* The numbers every diagnosis works from. */
typedef struct oom_facts {
    uint64_t R, used, limit, reserved, free_pool, physical, need, headroom;
} oom_facts;

static oom_facts facts_of(const hbmi_oom_record *r) {
    const hbm_stats *s = &r->stats;
    oom_facts x;
    x.R = r->rounded;
    x.used = s->bytes_in_use;
    x.limit = s->bytes_limit;
    x.reserved = s->bytes_reserved;
    x.free_pool = x.reserved > x.used ? x.reserved - x.used : 0;
    x.physical = x.reserved + r->dev_free; /* the most this process could hold */
    x.need = x.used + x.R;
    x.headroom = x.limit > x.reserved ? x.limit - x.reserved : 0;
    return x;
}

static void diagnose_record(const hbm_allocator *a, const hbmi_oom_record *r, hbm_oom_diagnosis *d) {
    memset(d, 0, sizeof *d);
    if (!r->valid) return;
    const hbm_config *cfg = &a->cfg;
    int torch = !strcmp(a->ops->name, "torch");
    oom_facts x = facts_of(r);
    d->requested = r->requested;
    d->rounded = r->rounded;
    char fs[16];
    if (x.R > r->dev_total) {
        d->cause = HBM_OOM_CAUSE_EXCEEDS_DEVICE;
        d->must_free = x.R - r->dev_total;
    } else if (x.need > x.physical) {
        d->cause = HBM_OOM_CAUSE_TOO_BIG;
        d->must_free = x.need - x.physical;
    } else if (x.need > x.limit) {
        d->cause = HBM_OOM_CAUSE_LIMIT;
        if (cfg->limit) {
            snprintf(d->env, sizeof d->env, "HBM_LIMIT=%" PRIu64, x.need);
            snprintf(d->config, sizeof d->config, "limit=%" PRIu64, x.need);
        } else {
            if (!fraction_str(x.need, r->dev_total, torch, fs, sizeof fs)) { /* no fraction holds it */
                snprintf(d->env, sizeof d->env, "XLA_PYTHON_CLIENT_ALLOCATOR=platform");
                snprintf(d->config, sizeof d->config, "allocator=platform");
            } else {
                if (torch) snprintf(d->env, sizeof d->env, "torch.cuda.set_per_process_memory_fraction(%s)", fs);
                else snprintf(d->env, sizeof d->env, "XLA_PYTHON_CLIENT_MEM_FRACTION=%s", fs);
                snprintf(d->config, sizeof d->config, "fraction=%s", fs);
            }
        }
    } else if (x.headroom >= x.R && r->dev_free < x.R) {
        d->cause = HBM_OOM_CAUSE_DEVICE_SHARED;
    } else {
        d->cause = HBM_OOM_CAUSE_FRAGMENTATION;
        if (torch && !cfg->expandable_segments) {
            snprintf(d->env, sizeof d->env, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
            snprintf(d->config, sizeof d->config, "expandable_segments=true");
        } else if (!torch) {
            snprintf(d->env, sizeof d->env, "TF_GPU_ALLOCATOR=cuda_malloc_async");
            snprintf(d->config, sizeof d->config, "allocator=cuda_async");
        }
    }
}

hbm_status hbm_oom_diagnose(hbm_allocator *a, hbm_oom_diagnosis *out) {
    if (!a || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_oom_diagnose: NULL argument");
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    hbmi_oom_record r = a->oom;
    hbmi_lock_release(&a->lock, how);
    diagnose_record(a, &r, out);
    return HBM_OK;
}

/* The advice starts here: where f is, into *at (the report's text kept with it). */
static void advice_at(FILE *f, long *at) {
    if (at) *at = ftell(f);
}

/* advice: where the diagnosis's advice ("  Try: ..." to the report's end) starts in f, when
 * it gives one and advice is not NULL (f is then a memory stream). */
static void print_diagnosis(FILE *f, const hbm_allocator *a, const hbmi_oom_record *r, const live_buf *live,
                            size_t nlive, long *advice) {
    const hbm_stats *s = &r->stats;
    const hbm_config *cfg = &a->cfg;
    int torch = !strcmp(a->ops->name, "torch");
    hbm_oom_diagnosis d;
    diagnose_record(a, r, &d);
    oom_facts x = facts_of(r);
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32];
    fprintf(f, "Diagnosis: %s.\n", hbm_oom_cause_str(d.cause));
    switch (d.cause) {
    case HBM_OOM_CAUSE_NONE: break;
    case HBM_OOM_CAUSE_EXCEEDS_DEVICE:
        fprintf(f, "  The request alone (%s) is larger than the whole device (%s): no setting can make it fit.\n"
                   "  Find the operation that asks for it (the tag above) and shrink it: a smaller batch, sharding,\n"
                   "  or an algorithm that does not materialize this buffer.\n",
                hbm_size_xla((int64_t)x.R, b1), hbm_size_xla((int64_t)r->dev_total, b2));
        break;
    case HBM_OOM_CAUSE_TOO_BIG: {
        fprintf(f, "  %s live + %s requested = %s, but at most %s is available\n"
                   "  (%s held by this allocator + %s free on the device). At least %s must go.\n",
                hbm_size_xla((int64_t)x.used, b1), hbm_size_xla((int64_t)x.R, b2), hbm_size_xla((int64_t)x.need, b3),
                hbm_size_xla((int64_t)x.physical, b4), hbm_size_xla((int64_t)x.reserved, b5),
                hbm_size_xla((int64_t)r->dev_free, b6), hbm_size_xla((int64_t)d.must_free, b7));
        uint64_t acc = 0;
        size_t k = 0;
        while (k < nlive && acc < d.must_free) acc += live[k++].size;
        if (acc >= d.must_free && k)
            fprintf(f, "  Freeing the %zu largest live buffer%s listed above (%s) would be enough; otherwise reduce\n"
                       "  the batch size, shard the model, or rematerialize activations.\n",
                    k, k == 1 ? "" : "s", hbm_size_xla((int64_t)acc, b1));
        else
            fprintf(f, "  Reduce the batch size, shard the model, or rematerialize activations.\n");
        if (x.physical < r->dev_total && torch)
            fprintf(f, "  Note: %s of the device is held outside this allocator (the CUDA context, other\n"
                       "  processes: nvidia-smi lists them).\n", hbm_size_xla((int64_t)(r->dev_total - x.physical), b1));
        else if (x.physical < r->dev_total)
            fprintf(f, "  Note: %s of the device is held outside this allocator (other processes or allocators);\n"
                       "  if another JAX process preallocates, start it with XLA_PYTHON_CLIENT_PREALLOCATE=false.\n",
                    hbm_size_xla((int64_t)(r->dev_total - x.physical), b1));
        break;
    }
    case HBM_OOM_CAUSE_LIMIT:
        fprintf(f, "  %s live + %s requested = %s > the limit %s, while the device could give %s.\n",
                hbm_size_xla((int64_t)x.used, b1), hbm_size_xla((int64_t)x.R, b2), hbm_size_xla((int64_t)x.need, b3),
                hbm_size_xla((int64_t)x.limit, b4), hbm_size_xla((int64_t)x.physical, b5));
        if (cfg->limit)
            fprintf(f, "  The limit comes from %s.\n", cfg->source[HBM_OPT_limit]);
        else if (torch)
            fprintf(f, "  The per-process memory fraction %.2f (from %s) allows %s of %s.\n", cfg->fraction,
                    cfg->source[HBM_OPT_fraction], hbm_size_xla((int64_t)x.limit, b1), hbm_size_xla((int64_t)r->dev_total, b2));
        else if (cfg->policy == HBM_POLICY_JAX_LEGACY)
            fprintf(f, "  The jax_legacy policy takes %.2f of the memory free at start-up; with HBM_POLICY=jax the\n"
                       "  fraction below applies to the device's total.\n", cfg->fraction);
        else
            fprintf(f, "  The fraction %.2f (from %s) allows %s of %s.\n", cfg->fraction, cfg->source[HBM_OPT_fraction],
                    hbm_size_xla((int64_t)x.limit, b1), hbm_size_xla((int64_t)r->dev_total, b2));
        advice_at(f, advice);
        fprintf(f, "  Try: %s\n", d.env);
        if (!torch && !cfg->limit && !strcmp(d.config, "allocator=platform")) { /* no fraction holds it */
            uint64_t top = hbm_xla_gpu_limit(r->dev_total, HBM_XLA_MAX_FRACTION);
            uint64_t seen = hbmi_xla_gpu_limit_seen(r->dev_total, HBM_XLA_MAX_FRACTION);
            char b3x[32];
            fprintf(f, "  (no fraction fits: XLA_PYTHON_CLIENT_MEM_FRACTION=.99 gives %s under XLA's rule and %s as\n"
                       "  JAX 0.11 gave on an H200, short by %s)\n",
                    hbm_size_xla((int64_t)top, b1), hbm_size_xla((int64_t)seen, b3x),
                    hbm_size_xla((int64_t)(x.need > seen ? x.need - seen : 0), b2));
        }
        if (!cfg->limit && (double)x.need / (double)r->dev_total > 0.95)
            fprintf(f, "  (that leaves under 5%% of the device for the CUDA context and other libraries: tight)\n");
        break;
    case HBM_OOM_CAUSE_DEVICE_SHARED:
        if (torch) {
            fprintf(f, "  PyTorch could reserve %s more, but the device has only %s free: other processes\n"
                       "  hold the rest (nvidia-smi lists them).\n",
                    hbm_size_xla((int64_t)x.headroom, b1), hbm_size_xla((int64_t)r->dev_free, b2));
            break;
        }
        fprintf(f, "  The pool could grow by %s under its limit, but the device has only %s free:\n"
                   "  other processes or allocators hold the rest. Start them with XLA_PYTHON_CLIENT_PREALLOCATE=false\n"
                   "  or a smaller XLA_PYTHON_CLIENT_MEM_FRACTION.\n",
                hbm_size_xla((int64_t)x.headroom, b1), hbm_size_xla((int64_t)r->dev_free, b2));
        break;
    case HBM_OOM_CAUSE_FRAGMENTATION:
        fprintf(f, "  %s is free under the limit (%s in the pool, %s not yet reserved) but the largest free\n"
                   "  block is %s, smaller than the %s requested; fragmentation is %.1f%%.\n",
                hbm_size_xla((int64_t)(x.limit - x.used), b1), hbm_size_xla((int64_t)x.free_pool, b2),
                hbm_size_xla((int64_t)x.headroom, b3), hbm_size_xla((int64_t)s->largest_free_block_bytes, b4),
                hbm_size_xla((int64_t)x.R, b5), 100.0 * hbm_stats_fragmentation(s));
        if (torch && d.env[0] && (advice_at(f, advice), 1))
            fprintf(f, "  Try: %s (pages mapped as needed: a free block\n"
                       "  can grow), or 'hbm replay SNAPSHOT --suggest' to try each setting on the history.\n", d.env);
        else if (torch)
            fprintf(f, "  'hbm replay SNAPSHOT --suggest' tries each PYTORCH_CUDA_ALLOC_CONF setting on the history.\n");
        else if ((advice_at(f, advice), 1))
            fprintf(f, "  Try: %s (a stream-ordered pool that does not fragment this way),\n"
                       "  or XLA_PYTHON_CLIENT_ALLOCATOR=platform (exact allocations, slower), or allocate the largest\n"
                       "  long-lived buffers first.\n", d.env);
        break;
    }
}

static hbm_status report_write(hbm_allocator *a, FILE *f, long *advice);

hbm_status hbm_oom_report_write(hbm_allocator *a, FILE *f) {
    if (!a || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_oom_report_write: NULL argument");
    return report_write(a, f, NULL);
}

static hbm_status report_write(hbm_allocator *a, FILE *f, long *advice) {
    /* copy the record (and its block list, which the next failure replaces) under the lock */
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    hbmi_oom_record r = a->oom;
    live_buf *live = r.ntop ? hbmi_malloc(r.ntop * sizeof *live) : NULL;
    if (live) memcpy(live, r.top, r.ntop * sizeof *live);
    hbmi_lock_release(&a->lock, how);
    if (!r.valid) return hbmi_error(HBM_ERR_INVALID, "hbm_oom_report_write: no allocation has failed for lack of memory");
    size_t nlive = live ? r.ntop : 0;

    const hbm_stats *st = &r.stats;
    char b1[32], b2[32], b3[32];
    hbm_device_info di;
    memset(&di, 0, sizeof di);
    if (a->dev) hbm_device_info_get(a->dev, &di);
    int torch = !strcmp(a->ops->name, "torch");
    int torch_limit = torch && (a->cfg.limit || strcmp(a->cfg.source[HBM_OPT_fraction], "default"));
    if (torch) { /* PyTorch's own words first (CUDACachingAllocator's OutOfMemoryError) */
        char t1[32], t2[32], t3[32], t4[32], t5[32], t6[64] = "";
        uint64_t unalloc = st->bytes_reserved > st->bytes_in_use ? st->bytes_reserved - st->bytes_in_use : 0;
        if (torch_limit) snprintf(t6, sizeof t6, "%s allowed; ", hbmi_size_torch(st->bytes_limit, t5));
        char msg[640];
        snprintf(msg, sizeof msg,
                 "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. "
                 "%sOf the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but "
                 "unallocated. If reserved but unallocated memory is large try setting "
                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
                 hbmi_size_torch(hbmi_torch_allocation_size(r.rounded), t1), a->ordinal, hbmi_size_torch(r.dev_total, t2),
                 hbmi_size_torch(r.dev_free, t3), t6, hbmi_size_torch(st->bytes_in_use, t4), hbmi_size_torch(unalloc, t5));
        for (const char *p = msg; *p;) { /* PyTorch's one line, wrapped at spaces to 100 columns */
            size_t n = strlen(p), cut = n;
            if (n > 100)
                for (cut = 100; cut > 0 && p[cut] != ' '; cut--) {}
            if (!cut) cut = n;
            fprintf(f, "%.*s\n", (int)cut, p);
            p += cut + (p[cut] == ' ');
        }
    } else {
        fprintf(f, "RESOURCE_EXHAUSTED: Out of memory while trying to allocate %" PRIu64 " bytes.\n", r.requested);
    }
    char where[96];
    if (!strncmp(di.name, "sim:", 4) || !di.name[0]) snprintf(where, sizeof where, "a device of %s", hbm_size_xla((int64_t)r.dev_total, b2));
    else snprintf(where, sizeof where, "%s", di.name);
    fprintf(f, "hbm: allocator %s on %s could not allocate %s (rounded to %" PRIu64 ")",
            a->ops->name, torch ? where : di.name[0] ? di.name : "?", hbm_size_xla((int64_t)r.requested, b1), r.rounded);
    const hbm_tag *t = hbmi_tagtab_get(a->tags, r.tag_id);
    if (t) {
        live_buf tmp = {.has_tag = 1, .tag = *t};
        fprintf(f, " for ");
        print_tag(f, &tmp);
    }
    fprintf(f, "\n");
    fprintf(f, "  %-22s %12s", "limit:", hbm_size_xla((int64_t)st->bytes_limit, b1));
    if (torch && !torch_limit)
        fprintf(f, "  (the device: PyTorch sets no limit unless torch.cuda.set_per_process_memory_fraction)\n");
    else if (a->cfg.limit)
        fprintf(f, "  (limit from %s)\n", a->cfg.source[HBM_OPT_limit]);
    else if (torch)
        fprintf(f, "  (per-process memory fraction %.2f of the device, from %s)\n", a->cfg.fraction,
                a->cfg.source[HBM_OPT_fraction]);
    else if (!strcmp(a->ops->name, "platform"))
        fprintf(f, "  (the device; the platform allocator ignores the memory fraction)\n");
    else
        fprintf(f, "  (fraction %.2f of %s %s; fraction from %s)\n", a->cfg.fraction,
                hbm_size_xla((int64_t)(a->cfg.policy == HBM_POLICY_JAX ? r.dev_total : 0), b2),
                a->cfg.policy == HBM_POLICY_JAX ? "total" : "free at start-up", a->cfg.source[HBM_OPT_fraction]);
    fprintf(f, "  %-22s %12s  in %zu live buffers\n", "in use:", hbm_size_xla((int64_t)st->bytes_in_use, b1), r.nlive);
    fprintf(f, "  %-22s %12s  in %" PRIu64 " region%s; peak %s\n", "reserved:",
            hbm_size_xla((int64_t)st->bytes_reserved, b1), st->num_regions, st->num_regions == 1 ? "" : "s",
            hbm_size_xla((int64_t)st->peak_bytes_reserved, b2));
    fprintf(f, "  %-22s %12s\n", "free in pool:",
            hbm_size_xla((int64_t)(st->bytes_reserved > st->bytes_in_use ? st->bytes_reserved - st->bytes_in_use : 0), b1));
    fprintf(f, "  %-22s %12s\n", "largest free block:", hbm_size_xla((int64_t)st->largest_free_block_bytes, b1));
    fprintf(f, "  %-22s %11.1f%%  ((free - largest free block) / free, as XLA)\n", "fragmentation:",
            100.0 * hbm_stats_fragmentation(st));
    fprintf(f, "  %-22s %12s  of %s\n", "device free:", hbm_size_xla((int64_t)r.dev_free, b1),
            hbm_size_xla((int64_t)r.dev_total, b2));

    size_t top = (size_t)a->cfg.report_top < nlive ? (size_t)a->cfg.report_top : nlive;
    if (top) {
        uint64_t shown = 0;
        for (size_t i = 0; i < top; i++) shown += live[i].size;
        fprintf(f, "Largest live buffers (%zu of %zu, %s of %s in use):\n", top, r.nlive,
                hbm_size_xla((int64_t)shown, b1), hbm_size_xla((int64_t)st->bytes_in_use, b2));
        for (size_t i = 0; i < top; i++) {
            const live_buf *l = &live[i];
            fprintf(f, "  %3zu. %10s  at 0x%012" PRIx64 "  #%-6" PRIu64 " ", i + 1, hbm_size_xla((int64_t)l->size, b1),
                    l->addr, l->seq);
            print_tag(f, l);
            fputc('\n', f);
        }
    }
    if (r.map[0])
        fprintf(f, "Occupancy of the %s reserved (%d cells; '#' in use, '+' part, '.' free):\n  [%s]\n",
                hbm_size_xla((int64_t)r.span, b3), MAP_WIDTH, r.map);
    print_diagnosis(f, a, &r, live, nlive, advice);
    hbmi_free(live);
    return HBM_OK;
}

hbm_status hbm_oom_report_format(hbm_allocator *a, char *buf, size_t cap, size_t *len) {
    char *mem = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&mem, &n);
    if (!f) return hbmi_error(HBM_ERR_NOMEM, "out of host memory formatting the OOM report");
    hbm_status s = hbm_oom_report_write(a, f);
    fclose(f);
    if (!s) {
        if (cap) {
            size_t k = n < cap - 1 ? n : cap - 1;
            memcpy(buf, mem, k);
            buf[k] = 0;
        }
        if (len) *len = n;
    }
    free(mem);
    return s;
}

hbm_status hbmi_oom_text_get(hbm_allocator *a, hbmi_oom_text *out) {
    memset(out, 0, sizeof *out);
    char *mem = NULL;
    size_t n = 0;
    long at = -1;
    FILE *f = open_memstream(&mem, &n);
    if (!f) return hbmi_error(HBM_ERR_NOMEM, "out of host memory formatting the OOM report");
    hbm_status s = report_write(a, f, &at);
    if (fclose(f) && !s) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory formatting the OOM report");
    if (!s && !(out->text = hbmi_malloc(n + 1))) s = hbmi_error(HBM_ERR_NOMEM, "out of host memory formatting the OOM report");
    if (!s) {
        memcpy(out->text, mem, n + 1);
        out->advice = at >= 0 && (size_t)at <= n ? (size_t)at : n;
    }
    free(mem);
    return s;
}

hbm_status hbmi_oom_text_of(const char *text, hbmi_oom_text *out) {
    memset(out, 0, sizeof *out);
    if (!(out->text = hbmi_strdup(text))) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    out->advice = strlen(text);
    return HBM_OK;
}

hbm_status hbmi_oom_text_advise(hbmi_oom_text *r, const char *verdict) {
    size_t len = strlen(r->text), n = strlen(verdict);
    if (r->advice == len) return HBM_OK; /* no advice to replace */
    char *t = hbmi_realloc(r->text, r->advice + n + 1);
    if (!t) return hbmi_error(HBM_ERR_NOMEM, "out of host memory");
    memcpy(t + r->advice, verdict, n + 1);
    r->text = t;
    return HBM_OK;
}

void hbmi_oom_text_free(hbmi_oom_text *r) {
    hbmi_free(r->text);
    r->text = NULL;
    r->advice = 0;
}
