/* platform.c - XLA's "platform" allocator: every allocation goes to the device and every
 * free returns memory at once. Nothing is cached, so nothing fragments inside hbm, and
 * it is as slow as the device's own allocator. The memory fraction does not apply (as in
 * JAX); an explicit limit= does. */
#include <inttypes.h>
#include <string.h>

#include "alloc/blocktab.h"
#include "hbm/size.h"

typedef struct platform {
    hbm_device *dev;
    uint64_t granularity;
    hbmi_blocktab live;
    hbm_stats st;
    int quiet; /* hbmi_allocator_set_quiet */
} platform;

static uint64_t plat_rounded(void *self, uint64_t size) {
    platform *p = self;
    return size > UINT64_MAX - p->granularity ? size : hbmi_align_up(size, p->granularity);
}

static hbm_status plat_alloc(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t *addr_out) {
    platform *p = self;
    uint64_t held = plat_rounded(p, size);
    if (held > p->st.bytes_limit || p->st.bytes_in_use > p->st.bytes_limit - held) {
        p->st.num_ooms++;
        char a[32], b[32];
        if (p->quiet) return HBM_ERR_OOM;
        return hbmi_error(HBM_ERR_OOM, "platform: %s more would pass the limit of %s", hbm_size_human(held, a),
                          hbm_size_human(p->st.bytes_limit, b));
    }
    /* reserve metadata first so a device allocation is never orphaned */
    hbm_status s = hbmi_blocktab_reserve(&p->live);
    if (s) return s;
    uint64_t addr;
    s = hbm_device_alloc(p->dev, size, &addr);
    if (s) {
        if (s == HBM_ERR_OOM) p->st.num_ooms++;
        return s;
    }
    p->st.num_allocs++;
    hbmi_blocktab_insert(&p->live, &(hbmi_blk){addr, held, size, p->st.num_allocs, tag_id, 0});
    p->st.device_allocs++;
    p->st.bytes_in_use += held;
    p->st.bytes_reserved += held;
    p->st.pool_bytes += held;
    p->st.num_regions++;
    if (held > p->st.largest_alloc_size) p->st.largest_alloc_size = held;
    hbmi_stats_update_peaks(&p->st);
    *addr_out = addr;
    return HBM_OK;
}

static hbm_status plat_free(void *self, uint64_t addr) {
    platform *p = self;
    hbmi_blk *b = hbmi_blocktab_find(&p->live, addr);
    if (!b) return hbmi_error(HBM_ERR_BAD_FREE, "platform: free of 0x%" PRIx64 ", which is not a live allocation", addr);
    hbm_status s = hbm_device_free(p->dev, addr);
    if (s) return s;
    uint64_t size = hbmi_blocktab_remove(&p->live, b);
    p->st.num_frees++;
    p->st.device_frees++;
    p->st.bytes_in_use -= size;
    p->st.bytes_reserved -= size;
    p->st.pool_bytes -= size;
    p->st.num_regions--;
    return HBM_OK;
}

static void plat_stats(void *self, hbm_stats *out) { *out = ((platform *)self)->st; }
static void plat_reset_peaks(void *self) { hbmi_stats_reset_peaks(&((platform *)self)->st); }

static hbm_status plat_check(void *self) {
    platform *p = self;
    hbm_status s = hbmi_blocktab_check(&p->live, "platform");
    if (!s && (p->live.bytes != p->st.bytes_in_use || p->st.bytes_in_use != p->st.pool_bytes ||
               p->live.index.count != p->st.num_regions))
        s = hbmi_error(HBM_ERR_CORRUPT, "platform: %zu blocks of %" PRIu64 " bytes, stats say %" PRIu64 " of %" PRIu64,
                       p->live.index.count, p->live.bytes, p->st.num_regions, p->st.bytes_in_use);
    return s;
}

/* Blocks in address order, as hbm_allocator_walk promises. */
static hbm_status plat_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    return hbmi_blocktab_walk(&((platform *)self)->live, fn, user);
}

static void plat_destroy(void *self) {
    platform *p = self;
    HBMI_BLOCKTAB_FOREACH(&p->live, b) hbm_device_free(p->dev, b->addr);
    hbmi_blocktab_destroy(&p->live);
    hbmi_free(p);
}

static const hbm_allocator_ops platform_ops = {
    .name = "platform", .alloc = plat_alloc, .free = plat_free, .stats = plat_stats,
    .reset_peaks = plat_reset_peaks, .check = plat_check, .walk = plat_walk, .trim = NULL,
    .rounded_size = plat_rounded, .destroy = plat_destroy};

int hbmi_platform_set_quiet(hbm_allocator *a, int on) {
    if (a->ops != &platform_ops) return 0;
    ((platform *)a->self)->quiet = on;
    return 1;
}

const uint64_t *hbmi_platform_in_use(const hbm_allocator *a) {
    return a->ops == &platform_ops ? &((const platform *)a->self)->st.bytes_in_use : NULL;
}

hbm_status hbmi_platform_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                                const hbm_allocator_ops **ops, void **self) {
    platform *p = hbmi_calloc(1, sizeof *p);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a platform allocator");
    hbm_device_info info;
    hbm_device_info_get(dev, &info);
    p->dev = dev;
    p->granularity = info.granularity ? info.granularity : 1;
    hbmi_blocktab_init(&p->live);
    p->st.bytes_limit = cfg->limit ? bytes_limit : info.total_bytes;
    *ops = &platform_ops;
    *self = p;
    return HBM_OK;
}
