/* async_cuda.c - cuda_async on a real GPU: a pool of our own (cuMemPoolCreate) with the
 * release threshold at the pool size, cuMemAllocFromPoolAsync / cuMemFreeAsync on the
 * caller's stream, and XLA's recovery (synchronize the stream and retry once) when the
 * pool runs dry. The pool's placement is the driver's; hbm keeps the live blocks (for
 * stats, bad-free checks and the OOM report) and enforces the pool size as a limit on
 * bytes in use. async_prealloc bytes are allocated and freed at open, as TF does. */
#include <inttypes.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "device/cuda_driver.h"
#include "hbm/size.h"

typedef struct cblk {
    uint64_t addr, size, requested, seq;
    uint32_t tag_id, next_free;
} cblk;

typedef struct cpool {
    hbm_device *dev;
    hbmi_cuda_dev *cd;
    hbmi_CUmemoryPool pool;
    hbmi_map index; /* addr -> block */
    cblk *blocks;
    size_t nblocks, cap;
    uint32_t free_head;
    hbm_stats st;
} cpool;

static uint64_t cp_rounded(void *self, uint64_t size) {
    (void)self;
    return size > UINT64_MAX - 512 ? size : hbmi_align_up(size, 512);
}

static void refresh_reserved(cpool *p) {
    uint64_t r = 0;
    if (!p->cd->drv->MemPoolGetAttribute(p->pool, HBMI_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r)) {
        p->st.bytes_reserved = p->st.pool_bytes = r;
        hbmi_stats_update_peaks(&p->st);
    }
}

static hbm_status cp_alloc_stream(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t stream,
                                  uint64_t *addr_out) {
    cpool *p = self;
    uint64_t held = cp_rounded(p, size);
    char a[32], b[32];
    if (held > p->st.bytes_limit || p->st.bytes_in_use > p->st.bytes_limit - held) {
        p->st.num_ooms++;
        return hbmi_error(HBM_ERR_OOM, "cuda_async: %s more would pass the pool size %s", hbm_size_human(held, a),
                          hbm_size_human(p->st.bytes_limit, b));
    }
    hbm_status s = hbmi_map_reserve(&p->index, p->index.count + 1);
    if (!s && !p->free_head) s = hbmi_grow((void **)&p->blocks, &p->cap, p->nblocks + 1, sizeof *p->blocks);
    if (s) return s;
    hbmi_CUcontext saved;
    if ((s = hbmi_cuda_enter(p->cd, &saved))) return s;
    const hbmi_cuda_driver *d = p->cd->drv;
    hbmi_CUdeviceptr ptr = 0;
    hbmi_CUstream st = (hbmi_CUstream)(uintptr_t)stream;
    hbmi_CUresult r = d->MemAllocFromPoolAsync(&ptr, (size_t)size, p->pool, st);
    if (r == HBMI_CUDA_ERROR_OUT_OF_MEMORY && !d->StreamSynchronize(st)) /* XLA: sync the stream, retry */
        r = d->MemAllocFromPoolAsync(&ptr, (size_t)size, p->pool, st);
    hbmi_cuda_leave(p->cd, saved);
    if (r) {
        if (r == HBMI_CUDA_ERROR_OUT_OF_MEMORY) p->st.num_ooms++;
        return hbmi_cuda_error(d, r, "cuda_async: cuMemAllocFromPoolAsync(%s, stream 0x%" PRIx64 ")",
                               hbm_size_human(size, a), stream);
    }
    uint32_t i;
    if (p->free_head) {
        i = p->free_head - 1;
        p->free_head = p->blocks[i].next_free;
    } else {
        i = (uint32_t)p->nblocks++;
    }
    p->st.num_allocs++;
    p->blocks[i] = (cblk){ptr, held, size, p->st.num_allocs, tag_id, 0};
    hbmi_map_put(&p->index, ptr, i);
    p->st.device_allocs++;
    p->st.bytes_in_use += held;
    if (held > p->st.largest_alloc_size) p->st.largest_alloc_size = held;
    refresh_reserved(p);
    hbmi_stats_update_peaks(&p->st);
    *addr_out = ptr;
    (void)tag;
    return HBM_OK;
}

static hbm_status cp_alloc(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t *addr_out) {
    return cp_alloc_stream(self, size, tag, tag_id, 0, addr_out);
}

static hbm_status cp_free_stream(void *self, uint64_t addr, uint64_t stream) {
    cpool *p = self;
    uint64_t i;
    if (!hbmi_map_get(&p->index, addr, &i))
        return hbmi_error(HBM_ERR_BAD_FREE, "cuda_async: free of 0x%" PRIx64 ", which is not a live allocation", addr);
    hbmi_CUcontext saved;
    hbm_status s = hbmi_cuda_enter(p->cd, &saved);
    if (s) return s;
    hbmi_CUresult r = p->cd->drv->MemFreeAsync(addr, (hbmi_CUstream)(uintptr_t)stream);
    hbmi_cuda_leave(p->cd, saved);
    if (r) return hbmi_cuda_error(p->cd->drv, r, "cuda_async: cuMemFreeAsync(0x%" PRIx64 ")", addr);
    hbmi_map_del(&p->index, addr, NULL);
    cblk *b = &p->blocks[i];
    p->st.num_frees++;
    p->st.device_frees++;
    p->st.bytes_in_use -= b->size;
    b->size = 0;
    b->next_free = p->free_head;
    p->free_head = (uint32_t)i + 1;
    return HBM_OK;
}

static hbm_status cp_free(void *self, uint64_t addr) { return cp_free_stream(self, addr, 0); }

static hbm_status cp_sync(void *self, uint64_t stream) {
    cpool *p = self;
    hbmi_CUcontext saved;
    hbm_status s = hbmi_cuda_enter(p->cd, &saved);
    if (s) return s;
    hbmi_CUresult r = stream == HBM_STREAM_ALL ? p->cd->drv->CtxSynchronize()
                                               : p->cd->drv->StreamSynchronize((hbmi_CUstream)(uintptr_t)stream);
    hbmi_cuda_leave(p->cd, saved);
    if (r) return hbmi_cuda_error(p->cd->drv, r, "cuda_async: synchronize stream 0x%" PRIx64, stream);
    refresh_reserved(p);
    return HBM_OK;
}

static hbm_status cp_trim(void *self) {
    cpool *p = self;
    hbmi_CUresult r = p->cd->drv->MemPoolTrimTo(p->pool, 0);
    if (r) return hbmi_cuda_error(p->cd->drv, r, "cuda_async: cuMemPoolTrimTo");
    refresh_reserved(p);
    return HBM_OK;
}

static void cp_stats(void *self, hbm_stats *out) {
    cpool *p = self;
    refresh_reserved(p);
    *out = p->st;
    /* the pool's free memory is the driver's to place; report what it holds unused */
    out->largest_free_block_bytes = p->st.bytes_reserved > p->st.bytes_in_use ? p->st.bytes_reserved - p->st.bytes_in_use : 0;
}
static void cp_reset_peaks(void *self) { hbmi_stats_reset_peaks(&((cpool *)self)->st); }

static hbm_status cp_check(void *self) {
    cpool *p = self;
    uint64_t sum = 0, n = 0;
    for (size_t i = 0; i < p->nblocks; i++) {
        if (!p->blocks[i].size) continue;
        uint64_t j;
        if (!hbmi_map_get(&p->index, p->blocks[i].addr, &j) || j != i)
            return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: block %zu is not indexed", i);
        sum += p->blocks[i].size, n++;
    }
    if (n != p->index.count || sum != p->st.bytes_in_use)
        return hbmi_error(HBM_ERR_CORRUPT, "cuda_async: %" PRIu64 " blocks / %" PRIu64 " bytes, stats say %zu / %" PRIu64, n,
                          sum, p->index.count, p->st.bytes_in_use);
    return HBM_OK;
}

static hbm_status cp_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    cpool *p = self;
    for (size_t i = 0; i < p->nblocks; i++) {
        cblk *b = &p->blocks[i];
        if (!b->size) continue;
        hbm_block r = {HBM_BLOCK_REGION, b->addr, b->size, 0, NULL, 0};
        hbm_block l = {HBM_BLOCK_LIVE, b->addr, b->size, b->requested, NULL, b->seq};
        if (fn(user, &r, 0) || fn(user, &l, b->tag_id)) break;
    }
    return HBM_OK;
}

static void cp_destroy(void *self) {
    cpool *p = self;
    hbmi_CUcontext saved;
    if (!hbmi_cuda_enter(p->cd, &saved)) {
        for (size_t i = 0; i < p->nblocks; i++)
            if (p->blocks[i].size) p->cd->drv->MemFreeAsync(p->blocks[i].addr, NULL);
        p->cd->drv->CtxSynchronize();
        p->cd->drv->MemPoolDestroy(p->pool);
        hbmi_cuda_leave(p->cd, saved);
    }
    hbmi_map_destroy(&p->index);
    hbmi_free(p->blocks);
    hbmi_free(p);
}

static const hbm_allocator_ops cuda_async_ops = {
    .name = "cuda_async", .alloc = cp_alloc, .free = cp_free, .stats = cp_stats, .reset_peaks = cp_reset_peaks,
    .check = cp_check, .walk = cp_walk, .trim = cp_trim, .rounded_size = cp_rounded, .destroy = cp_destroy,
    .alloc_stream = cp_alloc_stream, .free_stream = cp_free_stream, .sync = cp_sync};

hbm_status hbmi_async_cuda_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                                  const hbm_allocator_ops **ops, void **self) {
    hbmi_cuda_dev *cd = hbmi_cuda_dev_of(dev);
    const hbmi_cuda_driver *d = cd->drv;
    cpool *p = hbmi_calloc(1, sizeof *p);
    if (!p) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a cuda_async pool");
    p->dev = dev;
    p->cd = cd;
    hbmi_map_init(&p->index);
    p->st.bytes_limit = bytes_limit;
    hbmi_CUcontext saved;
    hbm_status s = hbmi_cuda_enter(cd, &saved);
    if (s) {
        hbmi_free(p);
        return s;
    }
    hbmi_CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = HBMI_CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = HBMI_CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = HBMI_CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = cd->ordinal;
    uint64_t threshold = bytes_limit;
    hbmi_CUresult r = d->MemPoolCreate(&p->pool, &props);
    if (r) s = hbmi_cuda_error(d, r, "cuda_async: cuMemPoolCreate on cuda:%d", cd->ordinal);
    else if ((r = d->MemPoolSetAttribute(p->pool, HBMI_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold)) != 0)
        s = hbmi_cuda_error(d, r, "cuda_async: setting the release threshold");
    uint64_t pre = cfg->async_prealloc < 0 ? bytes_limit : (uint64_t)cfg->async_prealloc;
    if (!s && pre) { /* as TF: allocate, free, synchronize: the pool keeps the memory */
        hbmi_CUdeviceptr ptr;
        if ((r = d->MemAllocFromPoolAsync(&ptr, (size_t)pre, p->pool, NULL)) != 0)
            s = hbmi_cuda_error(d, r, "cuda_async: preallocating %" PRIu64 " bytes (async_prealloc from %s)", pre,
                                cfg->source[HBM_OPT_async_prealloc]);
        else if ((r = d->MemFreeAsync(ptr, NULL)) != 0 || (r = d->StreamSynchronize(NULL)) != 0)
            s = hbmi_cuda_error(d, r, "cuda_async: releasing the preallocation");
    }
    if (s && p->pool) d->MemPoolDestroy(p->pool);
    hbmi_cuda_leave(cd, saved);
    if (s) {
        hbmi_map_destroy(&p->index);
        hbmi_free(p);
        return s;
    }
    refresh_reserved(p);
    *ops = &cuda_async_ops;
    *self = p;
    return HBM_OK;
}
