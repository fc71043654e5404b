/* platform.c - XLA's "platform" allocator: every allocation goes to the device and every
 * free returns memory at once. Nothing is cached, so nothing fragments inside hbm, and
 * it is as slow as the device's own allocator. The memory fraction does not apply (as in
 * JAX); an explicit limit= does. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "hbm/size.h"

typedef struct plat_block {
    uint64_t addr, size, requested, seq;
    uint32_t tag_id;
    uint32_t next_free; /* free-list link when unused, index+1 */
} plat_block;

typedef struct platform {
    hbm_device *dev;
    uint64_t granularity;
    hbmi_map index; /* addr -> block index */
    plat_block *blocks;
    size_t nblocks, cap;
    uint32_t free_head; /* index+1 of an unused slot, 0 = none */
    hbm_stats st;
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
        return hbmi_error(HBM_ERR_OOM, "platform: %s more would pass the limit of %s", hbm_size_human(held, a),
                          hbm_size_human(p->st.bytes_limit, b));
    }
    /* reserve metadata first so a device allocation is never orphaned */
    hbm_status s = hbmi_map_reserve(&p->index, p->index.count + 1);
    if (!s && !p->free_head) s = hbmi_grow((void **)&p->blocks, &p->cap, p->nblocks + 1, sizeof *p->blocks);
    if (s) return s;
    uint64_t addr;
    s = hbm_device_alloc(p->dev, size, &addr);
    if (s) {
        if (s == HBM_ERR_OOM) p->st.num_ooms++;
        return s;
    }
    uint32_t i;
    if (p->free_head) {
        i = p->free_head - 1;
        p->free_head = p->blocks[i].next_free;
    } else {
        i = (uint32_t)p->nblocks++;
    }
    p->st.num_allocs++;
    p->blocks[i] = (plat_block){addr, held, size, p->st.num_allocs, tag_id, 0};
    hbmi_map_put(&p->index, addr, i);
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
    uint64_t i;
    if (!hbmi_map_get(&p->index, addr, &i))
        return hbmi_error(HBM_ERR_BAD_FREE, "platform: free of 0x%" PRIx64 ", which is not a live allocation", addr);
    hbm_status s = hbm_device_free(p->dev, addr);
    if (s) return s;
    hbmi_map_del(&p->index, addr, NULL);
    plat_block *b = &p->blocks[i];
    p->st.num_frees++;
    p->st.device_frees++;
    p->st.bytes_in_use -= b->size;
    p->st.bytes_reserved -= b->size;
    p->st.pool_bytes -= b->size;
    p->st.num_regions--;
    b->size = 0;
    b->next_free = p->free_head;
    p->free_head = (uint32_t)i + 1;
    return HBM_OK;
}

static void plat_stats(void *self, hbm_stats *out) { *out = ((platform *)self)->st; }
static void plat_reset_peaks(void *self) { hbmi_stats_reset_peaks(&((platform *)self)->st); }

static hbm_status plat_check(void *self) {
    platform *p = self;
    uint64_t sum = 0, n = 0;
    for (size_t i = 0; i < p->nblocks; i++) {
        if (!p->blocks[i].size) continue;
        uint64_t j;
        if (!hbmi_map_get(&p->index, p->blocks[i].addr, &j) || j != i)
            return hbmi_error(HBM_ERR_CORRUPT, "platform: block %zu at 0x%" PRIx64 " is not indexed", i, p->blocks[i].addr);
        sum += p->blocks[i].size;
        n++;
    }
    if (n != p->index.count || sum != p->st.bytes_in_use || p->st.bytes_in_use != p->st.pool_bytes)
        return hbmi_error(HBM_ERR_CORRUPT, "platform: %" PRIu64 " blocks / %" PRIu64 " bytes, stats say %zu / %" PRIu64,
                          n, sum, p->index.count, p->st.bytes_in_use);
    return HBM_OK;
}

typedef struct plat_ref {
    uint64_t addr;
    uint32_t idx;
} plat_ref;

static int plat_cmp(const void *x, const void *y) {
    uint64_t a = ((const plat_ref *)x)->addr, b = ((const plat_ref *)y)->addr;
    return a < b ? -1 : a > b;
}

/* Blocks in address order, as hbm_allocator_walk promises (slots are in reuse order). */
static hbm_status plat_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    platform *p = self;
    plat_ref *order = hbmi_malloc((p->index.count ? p->index.count : 1) * sizeof *order);
    if (!order) return hbmi_error(HBM_ERR_NOMEM, "platform: out of host memory listing %zu blocks", p->index.count);
    size_t n = 0;
    for (size_t i = 0; i < p->nblocks && n < p->index.count; i++)
        if (p->blocks[i].size) order[n++] = (plat_ref){p->blocks[i].addr, (uint32_t)i};
    qsort(order, n, sizeof *order, plat_cmp);
    for (size_t k = 0; k < n; k++) {
        plat_block *b = &p->blocks[order[k].idx];
        hbm_block r = {HBM_BLOCK_REGION, b->addr, b->size, 0, NULL, 0};
        hbm_block l = {HBM_BLOCK_LIVE, b->addr, b->size, b->requested, NULL, b->seq};
        if (fn(user, &r, 0) || fn(user, &l, b->tag_id)) break;
    }
    hbmi_free(order);
    return HBM_OK;
}

static void plat_destroy(void *self) {
    platform *p = self;
    for (size_t i = 0; i < p->nblocks; i++)
        if (p->blocks[i].size) hbm_device_free(p->dev, p->blocks[i].addr);
    hbmi_map_destroy(&p->index);
    hbmi_free(p->blocks);
    hbmi_free(p);
}

static const hbm_allocator_ops platform_ops = {
    .name = "platform", .alloc = plat_alloc, .free = plat_free, .stats = plat_stats,
    .reset_peaks = plat_reset_peaks, .check = plat_check, .walk = plat_walk, .trim = NULL,
    .rounded_size = plat_rounded, .destroy = plat_destroy};

hbm_status hbmi_platform_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                                const hbm_allocator_ops **ops, void **self) {
    platform *p = hbmi_calloc(1, sizeof *p);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a platform allocator");
    hbm_device_info info;
    hbm_device_info_get(dev, &info);
    p->dev = dev;
    p->granularity = info.granularity ? info.granularity : 1;
    hbmi_map_init(&p->index);
    p->st.bytes_limit = cfg->limit ? bytes_limit : info.total_bytes;
    *ops = &platform_ops;
    *self = p;
    return HBM_OK;
}
