/* async_cuda.c - cuda_async on a real GPU: a pool of our own (cuMemPoolCreate) with the
 * release threshold at the pool size, cuMemAllocFromPoolAsync / cuMemFreeAsync on the
 * caller's stream, and XLA's recovery (synchronize the stream and retry once) when the
 * pool runs dry. The pool's placement is the driver's; hbm keeps the live blocks (for
 * stats, bad-free checks and the OOM report) and enforces the pool size as a limit on
 * bytes in use. async_prealloc bytes are allocated and freed at open, as TF does. */
#include <inttypes.h>
#include <string.h>

#include "alloc/blocktab.h"
#include "device/cuda_driver.h"
#include "hbm/size.h"

typedef struct cpool {
    hbm_device *dev;
    hbmi_cuda_dev *cd;
    hbmi_CUmemoryPool pool;
    hbmi_blocktab live;
    hbm_stats st;
    int quiet; /* hbmi_allocator_set_quiet */
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
        if (p->quiet) return HBM_ERR_OOM;
        return hbmi_error(HBM_ERR_OOM, "cuda_async: %s more would pass the pool size %s", hbm_size_human(held, a),
                          hbm_size_human(p->st.bytes_limit, b));
    }
    hbm_status s = hbmi_blocktab_reserve(&p->live);
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
    p->st.num_allocs++;
    hbmi_blocktab_insert(&p->live, &(hbmi_blk){ptr, held, size, p->st.num_allocs, tag_id, 0});
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
    hbmi_blk *b = hbmi_blocktab_find(&p->live, addr);
    if (!b) return hbmi_error(HBM_ERR_BAD_FREE, "cuda_async: free of 0x%" PRIx64 ", which is not a live allocation", addr);
    hbmi_CUcontext saved;
    hbm_status s = hbmi_cuda_enter(p->cd, &saved);
    if (s) return s;
    hbmi_CUresult r = p->cd->drv->MemFreeAsync(addr, (hbmi_CUstream)(uintptr_t)stream);
    hbmi_cuda_leave(p->cd, saved);
    if (r) return hbmi_cuda_error(p->cd->drv, r, "cuda_async: cuMemFreeAsync(0x%" PRIx64 ")", addr);
    p->st.num_frees++;
    p->st.device_frees++;
    p->st.bytes_in_use -= hbmi_blocktab_remove(&p->live, b);
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
    hbm_status s = hbmi_blocktab_check(&p->live, "cuda_async");
    if (!s && p->live.bytes != p->st.bytes_in_use)
        s = hbmi_error(HBM_ERR_CORRUPT, "cuda_async: %" PRIu64 " bytes in blocks, stats say %" PRIu64, p->live.bytes,
                       p->st.bytes_in_use);
    return s;
}

static hbm_status cp_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    return hbmi_blocktab_walk(&((cpool *)self)->live, fn, user);
}

static void cp_destroy(void *self) {
    cpool *p = self;
    hbmi_CUcontext saved;
    if (!hbmi_cuda_enter(p->cd, &saved)) {
        HBMI_BLOCKTAB_FOREACH(&p->live, b) p->cd->drv->MemFreeAsync(b->addr, NULL);
        p->cd->drv->CtxSynchronize();
        p->cd->drv->MemPoolDestroy(p->pool);
        hbmi_cuda_leave(p->cd, saved);
    }
    hbmi_blocktab_destroy(&p->live);
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
    hbmi_blocktab_init(&p->live);
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
        hbmi_blocktab_destroy(&p->live);
        hbmi_free(p);
        return s;
    }
    refresh_reserved(p);
    *ops = &cuda_async_ops;
    *self = p;
    return HBM_OK;
}

int hbmi_async_cuda_set_quiet(hbm_allocator *a, int on) {
    if (a->ops != &cuda_async_ops) return 0;
    ((cpool *)a->self)->quiet = on;
    return 1;
}
