/* allocator.c - the allocator handle over any policy or adaptor: the policy table,
 * serialized calls, interned tags and the state at each out-of-memory failure (taken by
 * oom_state.c). It calls nothing above alloc/: hbm_allocator_open composes a policy with
 * the trace recorder one floor up (src/trace/allocator_open.c). */
#include <inttypes.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "device/device_alloc.h"

static const struct {
    hbm_allocator_kind kind;
    hbmi_policy_create_fn create;
} policies[] = {
    {HBM_ALLOCATOR_BFC, hbmi_bfc_create},
    {HBM_ALLOCATOR_PLATFORM, hbmi_platform_create},
    {HBM_ALLOCATOR_CUDA_ASYNC, hbmi_async_create},
    {HBM_ALLOCATOR_VMM, hbmi_vmm_create},
    {HBM_ALLOCATOR_TORCH, hbmi_torch_create},
};

const uint64_t *hbmi_policy_in_use(const hbm_allocator *a) {
    const uint64_t *p = hbmi_torch_in_use(a);
    if (!p) p = hbmi_bfc_in_use(a);
    if (!p) p = hbmi_platform_in_use(a);
    if (!p) p = hbmi_async_in_use(a);
    return p;
}

int hbmi_allocator_set_quiet(hbm_allocator *a, int on) {
    int old = a->quiet;
    a->quiet = on;
    (void)(hbmi_torch_set_quiet(a, on) || hbmi_bfc_set_quiet(a, on) || hbmi_platform_set_quiet(a, on) ||
           hbmi_async_set_quiet(a, on) || hbmi_async_cuda_set_quiet(a, on) || hbmi_vmm_set_quiet(a, on));
    if (a->dev) hbmi_device_set_quiet(a->dev, on);
    return old;
}

hbm_status hbmi_policy_open(hbm_device *dev, const hbm_config *cfg, const hbm_allocator_ops **ops, void **self) {
    hbmi_policy_create_fn create = NULL;
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
        if (policies[i].kind == cfg->allocator) create = policies[i].create;
    if (!create)
        return hbmi_error(HBM_ERR_NOT_AVAILABLE,
                          "allocator '%s' (from %s) is not available in this build yet; accepted now: bfc, platform, cuda_async, vmm, torch",
                          hbm_allocator_kind_str(cfg->allocator), cfg->source[HBM_OPT_allocator]);
    uint64_t free_now = 0, total = 0;
    hbm_status s = hbm_device_mem_info(dev, &free_now, &total);
    if (s) return s;
    uint64_t limit = hbm_config_bytes_limit(cfg, total, free_now);
    if (limit == 0) return hbmi_error(HBM_ERR_CONFIG, "the configuration leaves a byte limit of 0 on this device");
    return create(dev, cfg, limit, ops, self);
}

hbm_status hbm_allocator_wrap(const hbm_allocator_ops *ops, void *self, hbm_device *dev, const hbm_config *cfg,
                              hbm_allocator **out) {
    if (!ops || !out || !ops->alloc || !ops->free || !ops->stats || !ops->destroy) {
        if (ops && ops->destroy) ops->destroy(self);
        return hbmi_error(HBM_ERR_INVALID, "hbm_allocator_wrap: NULL argument or incomplete ops");
    }
    hbm_allocator *a = hbmi_calloc(1, sizeof *a);
    hbm_status s = a ? hbmi_tagtab_new(&a->tags) : hbmi_error(HBM_ERR_NOMEM, "out of host memory for an allocator");
    if (s) {
        hbmi_free(a);
        ops->destroy(self);
        return s;
    }
    a->ops = ops;
    a->self = self;
    a->plain_alloc = ops->alloc_stream ? NULL : ops->alloc;
    a->plain_free = ops->free_stream ? NULL : ops->free;
    a->dev = dev;
    if (cfg)
        a->cfg = *cfg;
    else
        hbm_config_default(&a->cfg);
    hbmi_lock_init(&a->lock, 1);
    *out = a;
    return HBM_OK;
}

void hbm_allocator_close(hbm_allocator *a) {
    if (!a) return;
    a->ops->destroy(a->self);
    hbmi_oom_record_clear(&a->oom);
    hbmi_tagtab_free(a->tags);
    hbmi_free(a);
}

static void record_oom(hbm_allocator *a, uint64_t size, uint32_t tag_id) {
    hbmi_oom_record *r = &a->oom;
    r->valid = 1;
    r->count++;
    r->requested = size;
    r->rounded = a->ops->rounded_size ? a->ops->rounded_size(a->self, size) : size;
    r->tag_id = tag_id;
    memset(&r->stats, 0, sizeof r->stats);
    a->ops->stats(a->self, &r->stats);
    r->stats.version = HBM_STATS_VERSION;
    r->dev_free = r->dev_total = 0;
    if (a->dev) hbm_device_mem_info(a->dev, &r->dev_free, &r->dev_total);
    hbmi_oom_snapshot(a);
}

void hbmi_allocator_note_oom(hbm_allocator *a, uint64_t size, uint32_t tag_id) { record_oom(a, size, tag_id); }

/* The failure path of an allocation, out of line so that the usual path keeps a small frame:
 * records the state for the OOM report, releases the lock and calls the handler. */
static __attribute__((noinline, cold)) hbm_status alloc_oom(hbm_allocator *a, hbmi_lock_how how, uint64_t size,
                                                             uint32_t tag_id) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", hbm_last_error());
    record_oom(a, size, tag_id);
    if (!a->quiet) hbmi_error(HBM_ERR_OOM, "%s", msg); /* mem_info may have touched it */
    hbm_oom_fn fn = a->oom_fn;
    void *user = a->oom_user;
    hbmi_lock_release(&a->lock, how);
    if (fn) fn(user, a, size);
    return HBM_ERR_OOM;
}

/* Every allocation but hbm_alloc's usual one: tagged, on a stream, contended or with bad
 * arguments. */
static __attribute__((noinline)) hbm_status alloc_general(hbm_allocator *a, uint64_t size, const hbm_tag *tag,
                                                          uint64_t stream, uint64_t *addr_out) {
    if (HBMI_UNLIKELY(!a || !addr_out)) return hbmi_error(HBM_ERR_INVALID, "hbm_alloc: NULL argument");
    if (HBMI_UNLIKELY(size == 0)) return hbmi_error(HBM_ERR_INVALID, "hbm_alloc: size 0");
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    uint32_t tag_id = 0;
    hbm_status s = tag ? hbmi_tagtab_intern(a->tags, tag, &tag_id) : HBM_OK;
    if (!s)
        s = a->ops->alloc_stream ? a->ops->alloc_stream(a->self, size, tag, tag_id, stream, addr_out)
                                 : a->ops->alloc(a->self, size, tag, tag_id, addr_out);
    if (HBMI_UNLIKELY(s == HBM_ERR_OOM)) return alloc_oom(a, how, size, tag_id);
    hbmi_lock_release(&a->lock, how);
    return s;
}

/* The usual call (valid arguments, untagged, by the thread the lock is biased to, on a
 * policy without streams) keeps a small frame: at 100,000 live blocks, where a pair is
 * bound by cache misses, each instruction fewer lets more of the next call's misses
 * overlap this one's (the general path's frame cost 12-14 ns per pair there). */
hbm_status hbm_alloc(hbm_allocator *a, uint64_t size, const hbm_tag *tag, uint64_t *addr_out) {
    if (HBMI_LIKELY(a && addr_out && size && !tag && a->plain_alloc && hbmi_lock_enter_biased(&a->lock))) {
        hbm_status s = a->plain_alloc(a->self, size, NULL, 0, addr_out);
        if (HBMI_UNLIKELY(s == HBM_ERR_OOM)) return alloc_oom(a, HBMI_LOCK_BIASED, size, 0);
        hbmi_lock_release(&a->lock, HBMI_LOCK_BIASED);
        return s;
    }
    return alloc_general(a, size, tag, HBM_STREAM_DEFAULT, addr_out);
}

hbm_status hbm_alloc_stream(hbm_allocator *a, uint64_t size, const hbm_tag *tag, uint64_t stream,
                            uint64_t *addr_out) {
    return alloc_general(a, size, tag, stream, addr_out);
}

static __attribute__((noinline)) hbm_status free_general(hbm_allocator *a, uint64_t addr, uint64_t stream) {
    if (HBMI_UNLIKELY(!a)) return hbmi_error(HBM_ERR_INVALID, "hbm_free: NULL allocator");
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    hbm_status s = a->ops->free_stream ? a->ops->free_stream(a->self, addr, stream) : a->ops->free(a->self, addr);
    hbmi_lock_release(&a->lock, how);
    return s;
}

hbm_status hbm_free(hbm_allocator *a, uint64_t addr) {
    if (HBMI_LIKELY(a && a->plain_free && hbmi_lock_enter_biased(&a->lock))) {
        hbm_status s = a->plain_free(a->self, addr);
        hbmi_lock_release(&a->lock, HBMI_LOCK_BIASED);
        return s;
    }
    return free_general(a, addr, HBM_STREAM_DEFAULT);
}

hbm_status hbm_free_stream(hbm_allocator *a, uint64_t addr, uint64_t stream) { return free_general(a, addr, stream); }

hbm_status hbm_allocator_sync(hbm_allocator *a, uint64_t stream) {
    if (!a) return hbmi_error(HBM_ERR_INVALID, "hbm_allocator_sync: NULL allocator");
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    hbm_status s = a->ops->sync ? a->ops->sync(a->self, stream) : HBM_OK;
    hbmi_lock_release(&a->lock, how);
    return s;
}

hbm_status hbm_stats_get(hbm_allocator *a, hbm_stats *out) {
    if (!a || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_stats_get: NULL argument");
    memset(out, 0, sizeof *out);
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    a->ops->stats(a->self, out);
    hbmi_lock_release(&a->lock, how);
    out->version = HBM_STATS_VERSION;
    return HBM_OK;
}

hbm_status hbm_stats_reset_peaks(hbm_allocator *a) {
    if (!a) return hbmi_error(HBM_ERR_INVALID, "hbm_stats_reset_peaks: NULL allocator");
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    if (a->ops->reset_peaks) a->ops->reset_peaks(a->self);
    hbmi_lock_release(&a->lock, how);
    return HBM_OK;
}

hbm_status hbm_check(hbm_allocator *a) {
    if (!a) return hbmi_error(HBM_ERR_INVALID, "hbm_check: NULL allocator");
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    hbm_status s = a->ops->check ? a->ops->check(a->self) : HBM_OK;
    hbmi_lock_release(&a->lock, how);
    return s;
}

hbm_status hbm_allocator_trim(hbm_allocator *a) {
    if (!a) return hbmi_error(HBM_ERR_INVALID, "hbm_allocator_trim: NULL allocator");
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    hbm_status s = a->ops->trim ? a->ops->trim(a->self) : HBM_OK;
    hbmi_lock_release(&a->lock, how);
    return s;
}

const char *hbm_allocator_name(const hbm_allocator *a) { return a ? a->ops->name : ""; }
hbm_device *hbm_allocator_device(const hbm_allocator *a) { return a ? a->dev : NULL; }
const hbm_config *hbm_allocator_config(const hbm_allocator *a) { return a ? &a->cfg : NULL; }
const hbm_allocator_ops *hbmi_allocator_policy(const hbm_allocator *a, void **self) {
    *self = a->self;
    return a->ops;
}
hbmi_tagtab *hbmi_allocator_tags(hbm_allocator *a) { return a->tags; }

const hbm_tag *hbm_allocator_tag(hbm_allocator *a, uint32_t tag_id) {
    return a ? hbmi_tagtab_get(a->tags, tag_id) : NULL;
}

void hbm_allocator_set_oom_handler(hbm_allocator *a, hbm_oom_fn fn, void *user) {
    if (!a) return;
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    a->oom_fn = fn;
    a->oom_user = user;
    hbmi_lock_release(&a->lock, how);
}

typedef struct walk_ctx {
    hbm_allocator *a;
    hbm_block_fn fn;
    void *user;
} walk_ctx;

static int walk_tramp(void *user, const hbm_block *b, uint32_t tag_id) {
    walk_ctx *w = user;
    hbm_block c = *b;
    c.tag = b->kind == HBM_BLOCK_LIVE ? hbmi_tagtab_get(w->a->tags, tag_id) : NULL;
    return w->fn(w->user, &c);
}

hbm_status hbm_allocator_walk(hbm_allocator *a, hbm_block_fn fn, void *user) {
    if (!a || !fn) return hbmi_error(HBM_ERR_INVALID, "hbm_allocator_walk: NULL argument");
    if (!a->ops->walk) return hbmi_error(HBM_ERR_UNSUPPORTED, "allocator %s cannot list its blocks", a->ops->name);
    walk_ctx w = {a, fn, user};
    hbmi_lock_how how = hbmi_lock_acquire(&a->lock);
    hbm_status s = a->ops->walk(a->self, walk_tramp, &w);
    hbmi_lock_release(&a->lock, how);
    return s;
}

/* ---- stats helpers ------------------------------------------------------------------ */

double hbm_stats_fragmentation(const hbm_stats *s) {
    if (!s || s->bytes_reserved <= s->bytes_in_use) return 0.0;
    uint64_t avail = s->bytes_reserved - s->bytes_in_use;
    uint64_t largest = s->largest_free_block_bytes < avail ? s->largest_free_block_bytes : avail;
    return (double)(avail - largest) / (double)avail;
}

hbm_status hbm_stats_write_text(const hbm_stats *s, FILE *f) {
    if (!s || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_stats_write_text: NULL argument");
#define HBMI_PRINT_(name, desc) fprintf(f, "%-26s %20" PRIu64 "\n", #name ":", s->name);
    HBM_STATS_FIELDS(HBMI_PRINT_)
#undef HBMI_PRINT_
    fprintf(f, "%-26s %20.4f\n", "fragmentation:", hbm_stats_fragmentation(s));
    return HBM_OK;
}

hbm_status hbm_stats_write_json(const hbm_stats *s, FILE *f) {
    if (!s || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_stats_write_json: NULL argument");
    fprintf(f, "{\"version\": %u", s->version);
#define HBMI_PRINT_(name, desc) fprintf(f, ", \"%s\": %" PRIu64, #name, s->name);
    HBM_STATS_FIELDS(HBMI_PRINT_)
#undef HBMI_PRINT_
    fprintf(f, ", \"fragmentation\": %.6f}", hbm_stats_fragmentation(s));
    return HBM_OK;
}
