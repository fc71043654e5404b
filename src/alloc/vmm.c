/* vmm.c - "vmm", expandable segments: one large virtual range reserved at open, physical
 * pages (2 MiB, or the driver's granularity if larger) mapped on demand under the blocks
 * that need them, and unmapped on trim or when an allocation needs physical memory that
 * only free cached pages can give. Virtual space is cheap, so it is reserved at 4x the
 * pool size: a free physical page can back any virtual address, and the fragmentation
 * that can make an allocation fail is confined to pages shared by live blocks.
 *
 * On a cuda: device: cuMemAddressReserve, cuMemCreate + cuMemMap + cuMemSetAccess per
 * page, cuMemUnmap + cuMemRelease, cuMemAddressFree at close. On sim: devices (replay),
 * the same page accounting with each page a raw allocation of the device (so device
 * capacity, free= and fault injection apply) and a synthetic virtual range.
 *
 * Placement: sizes round to 512 bytes; requests over half a page round to whole pages and
 * start on a page boundary (so they touch no extra page); best fit over free virtual
 * blocks (smallest, then lowest address), split, coalesce on free.
 * Stats: bytes_reserved = pool_bytes = mapped pages x page size, num_regions = mapped
 * pages, largest_free_block_bytes = mapped pages no live block touches x page size (each
 * can back any request), so XLA's fragmentation metric measures memory stranded in
 * partly used pages. Metadata: one record per block and per mapped page. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "device/cuda_driver.h"
#include "hbm/size.h"

#define VMM_ROUND 512u
#define VMM_PAGE (2u << 20)
#define VMM_VA_FACTOR 4

enum { V_UNUSED, V_LIVE, V_FREE };

typedef struct vblk {
    uint64_t addr, size, requested, seq;
    uint32_t tag_id, prev, next, fpos; /* prev/next: address neighbours, index+1 */
    uint8_t state;
} vblk;

/* The order in which reclaim offers idle pages: the slot order of the hash table that held
 * the mapped pages before core/map.c became the one map (murmur3's finalizer of index + 1,
 * its low bits; linear probing; at most 2/3 full, doubling from 16; backward-shift
 * deletion), kept by this index of the page numbers alone. Which idle pages a partial
 * reclaim unmaps decides how many a later allocation maps again (the calls column of a
 * replay), so vmm's replays stay as they were; the map's own slot order (or the pages'
 * addresses) would change them (bolongcheng_xl_fwd_fp32 on its default device: 15863 ->
 * 15853 calls). Lookups go to the map; this index is only walked. */
typedef struct vorder {
    uint64_t *k; /* page index + 1; 0 = empty */
    size_t cap, count;
} vorder;

typedef struct vmm {
    hbm_device *dev;
    hbmi_cuda_dev *cd; /* NULL: sim twin */
    uint64_t page, va, va_size;
    vblk *b;          /* slots of blocks; unused ones chained through next */
    hbmi_pool blocks;
    uint32_t first;   /* the lowest block, index + 1 */
    uint32_t *freev;
    size_t nfree, capfree;
    hbmi_map live;   /* addr -> block */
    hbmi_map mapped; /* page index -> handle (sim: the device address of the page) */
    vorder order;    /* the mapped pages in the order reclaim offers them */
    hbmi_map refs;   /* page index -> live blocks touching it (only pages with refs > 0) */
    uint64_t idle_pages; /* mapped pages with no live block */
    hbm_stats st;
    int quiet; /* hbmi_allocator_set_quiet */
} vmm;

/* ---- the physical side: sim twin or CUDA ------------------------------------------------ */

/* On a sim: device the virtual range is synthetic and starts here for every pool, so a
 * replay's addresses depend on its request alone (a process-wide counter moved them). */
#define VMM_SIM_VA 0x100000000000ULL

static hbm_status page_map_cuda(vmm *v, uint64_t idx, uint64_t *handle) {
    const hbmi_cuda_driver *d = v->cd->drv;
    hbmi_CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = HBMI_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = HBMI_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = v->cd->ordinal;
    hbmi_CUmemAccessDesc acc = {{HBMI_CU_MEM_LOCATION_TYPE_DEVICE, v->cd->ordinal}, HBMI_CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    uint64_t at = v->va + idx * v->page;
    hbmi_CUmemGenericAllocationHandle h;
    hbmi_CUresult r = d->MemCreate(&h, (size_t)v->page, &prop, 0);
    if (r) return hbmi_cuda_error(d, r, "vmm: cuMemCreate of a %" PRIu64 "-byte page", v->page);
    if ((r = d->MemMap(at, (size_t)v->page, 0, h, 0)) != 0) {
        d->MemRelease(h);
        return hbmi_cuda_error(d, r, "vmm: cuMemMap at 0x%" PRIx64, at);
    }
    if ((r = d->MemSetAccess(at, (size_t)v->page, &acc, 1)) != 0) {
        d->MemUnmap(at, (size_t)v->page);
        d->MemRelease(h);
        return hbmi_cuda_error(d, r, "vmm: cuMemSetAccess at 0x%" PRIx64, at);
    }
    *handle = h;
    return HBM_OK;
}

static hbm_status page_unmap_cuda(vmm *v, uint64_t idx, uint64_t handle) {
    const hbmi_cuda_driver *d = v->cd->drv;
    uint64_t at = v->va + idx * v->page;
    hbmi_CUresult r = d->MemUnmap(at, (size_t)v->page);
    if (r) return hbmi_cuda_error(d, r, "vmm: cuMemUnmap at 0x%" PRIx64, at);
    if ((r = d->MemRelease(handle)) != 0) return hbmi_cuda_error(d, r, "vmm: cuMemRelease");
    return HBM_OK;
}

static hbm_status page_map(vmm *v, uint64_t idx, uint64_t *handle) {
    if (!v->cd) return hbm_device_alloc(v->dev, v->page, handle);
    hbmi_CUcontext saved;
    hbm_status s = hbmi_cuda_enter(v->cd, &saved);
    if (s) return s;
    s = page_map_cuda(v, idx, handle);
    hbmi_cuda_leave(v->cd, saved);
    return s;
}

static hbm_status page_unmap(vmm *v, uint64_t idx, uint64_t handle) {
    if (!v->cd) return hbm_device_free(v->dev, handle);
    hbmi_CUcontext saved;
    hbm_status s = hbmi_cuda_enter(v->cd, &saved);
    if (s) return s;
    s = page_unmap_cuda(v, idx, handle);
    hbmi_cuda_leave(v->cd, saved);
    return s;
}

/* ---- reclaim's order ------------------------------------------------------------------ */

static size_t vo_home(const vorder *o, uint64_t k) { return (size_t)(hbmi_hash64(k) & (o->cap - 1)); }

static hbm_status vo_rehash(vorder *o, size_t ncap) {
    uint64_t *nk = hbmi_calloc(ncap, sizeof *nk);
    if (!nk) return hbmi_error(HBM_ERR_NOMEM, "out of host memory growing a vmm page index to %zu slots", ncap);
    vorder n = {nk, ncap, o->count};
    for (size_t i = 0; i < o->cap; i++) {
        if (!o->k[i]) continue;
        size_t j = vo_home(&n, o->k[i]);
        while (nk[j]) j = (j + 1) & (ncap - 1);
        nk[j] = o->k[i];
    }
    hbmi_free(o->k);
    *o = n;
    return HBM_OK;
}

static hbm_status vo_reserve(vorder *o, size_t n) {
    size_t need = n + n / 2 + 1, c = 16;
    if (need <= o->cap) return HBM_OK;
    while (c < need) c *= 2;
    return vo_rehash(o, c);
}

static void vo_add(vorder *o, uint64_t idx) { /* reserved by the caller; idx not in it */
    uint64_t k = idx + 1;
    size_t i = vo_home(o, k);
    while (o->k[i]) i = (i + 1) & (o->cap - 1);
    o->k[i] = k;
    o->count++;
}

static void vo_del(vorder *o, uint64_t idx) {
    if (!o->cap) return;
    uint64_t k = idx + 1;
    size_t mask = o->cap - 1, i = vo_home(o, k);
    for (; o->k[i] != k; i = (i + 1) & mask)
        if (!o->k[i]) return;
    for (size_t j = i;;) { /* backward shift */
        j = (j + 1) & mask;
        if (!o->k[j]) break;
        size_t home = vo_home(o, o->k[j]);
        if (((j - home) & mask) >= ((j - i) & mask)) { /* home not in the cyclic range (i, j] */
            o->k[i] = o->k[j];
            i = j;
        }
    }
    o->k[i] = 0;
    o->count--;
}

/* ---- pages ------------------------------------------------------------------------------- */

static void page_range(const vmm *v, uint64_t addr, uint64_t size, uint64_t *lo, uint64_t *hi) {
    *lo = (addr - v->va) / v->page;
    *hi = (addr - v->va + size - 1) / v->page; /* inclusive */
}

static hbm_status unmap_page(vmm *v, uint64_t idx) {
    uint64_t h;
    if (!hbmi_map_get(&v->mapped, idx, &h)) return HBM_OK;
    hbm_status s = page_unmap(v, idx, h);
    if (s) return s;
    hbmi_map_del(&v->mapped, idx, NULL);
    vo_del(&v->order, idx);
    v->idle_pages--;
    v->st.device_frees++;
    v->st.bytes_reserved -= v->page;
    v->st.pool_bytes -= v->page;
    v->st.num_regions--;
    return HBM_OK;
}

/* Unmap idle pages outside [keep_lo, keep_hi] until `want` are gone (UINT64_MAX: all). */
static uint64_t reclaim(vmm *v, uint64_t want, uint64_t keep_lo, uint64_t keep_hi) {
    uint64_t done = 0;
    for (size_t k = 0; k < v->order.cap && done < want;) {
        uint64_t key = v->order.k[k];
        if (!key) { k++; continue; }
        uint64_t idx = key - 1;
        if (hbmi_map_get(&v->refs, idx, NULL) || (idx >= keep_lo && idx <= keep_hi) || unmap_page(v, idx)) {
            k++;
            continue;
        }
        done++; /* backward-shift deletion may have moved another key into slot k: look again */
    }
    return done;
}

/* Map every unmapped page in [lo, hi]; on failure unmap what this call mapped. */
static hbm_status map_pages(vmm *v, uint64_t lo, uint64_t hi) {
    uint64_t missing = 0;
    for (uint64_t i = lo; i <= hi; i++) missing += !hbmi_map_get(&v->mapped, i, NULL);
    if (!missing) return HBM_OK;
    uint64_t room = (v->st.bytes_limit - v->st.bytes_reserved) / v->page;
    if (missing > room) reclaim(v, missing - room, lo, hi);
    room = (v->st.bytes_limit - v->st.bytes_reserved) / v->page;
    if (missing > room) {
        char a[32], b[32], c[32];
        if (v->quiet) return HBM_ERR_OOM;
        return hbmi_error(HBM_ERR_OOM, "vmm: %" PRIu64 " more pages (%s) would pass the limit %s (%s mapped, all in use)",
                          missing, hbm_size_human(missing * v->page, a), hbm_size_human(v->st.bytes_limit, b),
                          hbm_size_human(v->st.bytes_reserved, c));
    }
    hbm_status s = hbmi_map_reserve(&v->mapped, v->mapped.count + missing);
    if (!s) s = vo_reserve(&v->order, v->order.count + missing);
    if (s) return s;
    for (uint64_t i = lo; i <= hi; i++) {
        if (hbmi_map_get(&v->mapped, i, NULL)) continue;
        uint64_t h;
        s = page_map(v, i, &h);
        if (s == HBM_ERR_OOM && reclaim(v, 1, lo, hi)) s = page_map(v, i, &h); /* the device is short: give back */
        if (s) {
            for (uint64_t j = lo; j < i; j++) /* roll back the pages mapped here (idle: no refs yet) */
                if (!hbmi_map_get(&v->refs, j, NULL)) unmap_page(v, j);
            return s;
        }
        hbmi_map_put(&v->mapped, i, h);
        vo_add(&v->order, i);
        v->idle_pages++;
        v->st.device_allocs++;
        v->st.bytes_reserved += v->page;
        v->st.pool_bytes += v->page;
        v->st.num_regions++;
    }
    hbmi_stats_update_peaks(&v->st);
    return HBM_OK;
}

/* ---- blocks ---------------------------------------------------------------------------- */

static uint32_t new_block(vmm *v) {
    uint32_t i = hbmi_pool_take(&v->blocks, v->b, sizeof *v->b, offsetof(vblk, next));
    memset(&v->b[i], 0, sizeof v->b[i]);
    return i;
}
static void drop_block(vmm *v, uint32_t i) {
    v->b[i].state = V_UNUSED;
    hbmi_pool_give(&v->blocks, v->b, sizeof *v->b, offsetof(vblk, next), i);
}
static void free_add(vmm *v, uint32_t i) {
    v->b[i].fpos = (uint32_t)v->nfree;
    v->freev[v->nfree++] = i;
}
static void free_del(vmm *v, uint32_t i) {
    uint32_t pos = v->b[i].fpos, last = v->freev[--v->nfree];
    v->freev[pos] = last;
    v->b[last].fpos = pos;
}

/* Split free block i at offset off (0 < off < size): the right part becomes a new free block. */
static uint32_t split(vmm *v, uint32_t i, uint64_t off) {
    uint32_t r = new_block(v);
    vblk *x = &v->b[i];
    v->b[r] = (vblk){.addr = x->addr + off, .size = x->size - off, .prev = i + 1, .next = x->next, .state = V_FREE};
    if (x->next) v->b[x->next - 1].prev = r + 1;
    x->next = r + 1;
    x->size = off;
    free_add(v, r);
    return r;
}

static uint64_t vmm_rounded(void *self, uint64_t size) {
    vmm *v = self;
    if (size > UINT64_MAX - v->page) return size;
    return size > v->page / 2 ? hbmi_align_up(size, v->page) : hbmi_align_up(size, VMM_ROUND);
}

static void refs_add(vmm *v, uint64_t addr, uint64_t size, int delta) {
    uint64_t lo, hi;
    page_range(v, addr, size, &lo, &hi);
    for (uint64_t i = lo; i <= hi; i++) {
        uint64_t n = 0;
        hbmi_map_get(&v->refs, i, &n);
        if (delta > 0) {
            if (!n) v->idle_pages--;
            hbmi_map_put(&v->refs, i, n + 1); /* reserved by the caller */
        } else if (n == 1) {
            hbmi_map_del(&v->refs, i, NULL);
            v->idle_pages++;
        } else {
            hbmi_map_put(&v->refs, i, n - 1);
        }
    }
}

static void update_free_stats(vmm *v) { v->st.largest_free_block_bytes = v->idle_pages * v->page; }

static hbm_status vmm_alloc(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t *addr_out) {
    vmm *v = self;
    uint64_t need = vmm_rounded(v, size), align = size > v->page / 2 ? v->page : VMM_ROUND;
    char a[32], b[32];
    if (need > v->st.bytes_limit || v->st.bytes_in_use > v->st.bytes_limit - need) {
        v->st.num_ooms++;
        if (v->quiet) return HBM_ERR_OOM;
        return hbmi_error(HBM_ERR_OOM, "vmm: %s more would pass the limit %s", hbm_size_human(need, a),
                          hbm_size_human(v->st.bytes_limit, b));
    }
    /* best fit in virtual space */
    int found = 0;
    uint32_t best = 0;
    uint64_t best_at = 0;
    for (size_t k = 0; k < v->nfree; k++) {
        vblk *x = &v->b[v->freev[k]];
        uint64_t at = hbmi_align_up(x->addr, align);
        if (at - x->addr > x->size || x->size - (at - x->addr) < need) continue;
        if (!found || x->size < v->b[best].size || (x->size == v->b[best].size && x->addr < v->b[best].addr))
            best = v->freev[k], best_at = at, found = 1;
    }
    if (!found) {
        v->st.num_ooms++;
        if (v->quiet) return HBM_ERR_OOM;
        return hbmi_error(HBM_ERR_OOM, "vmm: no free virtual range of %s in the %s reservation", hbm_size_human(need, a),
                          hbm_size_human(v->va_size, b));
    }
    uint64_t lo, hi;
    page_range(v, best_at, need, &lo, &hi);
    hbm_status s = hbmi_pool_reserve(&v->blocks, (void **)&v->b, sizeof *v->b, 2);
    if (!s) s = hbmi_grow((void **)&v->freev, &v->capfree, v->blocks.n + 2, sizeof *v->freev); /* >= blocks */
    if (!s) s = hbmi_map_reserve(&v->live, v->live.count + 1);
    if (!s) s = hbmi_map_reserve(&v->refs, v->refs.count + (hi - lo + 1));
    if (s) return s;
    s = map_pages(v, lo, hi);
    if (s) {
        if (s == HBM_ERR_OOM) v->st.num_ooms++;
        update_free_stats(v);
        return s;
    }
    uint32_t i = best;
    if (best_at > v->b[i].addr) i = split(v, i, best_at - v->b[i].addr);
    if (v->b[i].size > need) split(v, i, need);
    free_del(v, i);
    vblk *x = &v->b[i];
    v->st.num_allocs++;
    x->state = V_LIVE;
    x->requested = size;
    x->seq = v->st.num_allocs;
    x->tag_id = tag_id;
    hbmi_map_put(&v->live, x->addr, i);
    refs_add(v, x->addr, x->size, +1);
    v->st.bytes_in_use += need;
    if (need > v->st.largest_alloc_size) v->st.largest_alloc_size = need;
    hbmi_stats_update_peaks(&v->st);
    update_free_stats(v);
    *addr_out = x->addr;
    (void)tag;
    return HBM_OK;
}

static void absorb_right(vmm *v, uint32_t i, uint32_t j) {
    vblk *x = &v->b[i], *y = &v->b[j];
    x->size += y->size;
    x->next = y->next;
    if (y->next) v->b[y->next - 1].prev = i + 1;
    free_del(v, j);
    drop_block(v, j);
}

static hbm_status vmm_free(void *self, uint64_t addr) {
    vmm *v = self;
    uint64_t i;
    if (!hbmi_map_get(&v->live, addr, &i))
        return hbmi_error(HBM_ERR_BAD_FREE, "vmm: free of 0x%" PRIx64 ", which is not a live allocation", addr);
    hbmi_map_del(&v->live, addr, NULL);
    vblk *x = &v->b[i];
    refs_add(v, x->addr, x->size, -1);
    v->st.num_frees++;
    v->st.bytes_in_use -= x->size;
    x->state = V_FREE;
    x->tag_id = 0;
    free_add(v, (uint32_t)i); /* capacity: one entry per block, grown at alloc */
    if (x->next && v->b[x->next - 1].state == V_FREE) absorb_right(v, (uint32_t)i, x->next - 1);
    if (x->prev && v->b[x->prev - 1].state == V_FREE) absorb_right(v, x->prev - 1, (uint32_t)i);
    update_free_stats(v);
    return HBM_OK;
}

static hbm_status vmm_trim(void *self) {
    vmm *v = self;
    reclaim(v, UINT64_MAX, 1, 0);
    update_free_stats(v);
    return HBM_OK;
}

static void vmm_stats(void *self, hbm_stats *out) { *out = ((vmm *)self)->st; }
static void vmm_reset_peaks(void *self) { hbmi_stats_reset_peaks(&((vmm *)self)->st); }

static int vblk_unused(const void *rec) { return ((const vblk *)rec)->state == V_UNUSED; }

static hbm_status vmm_check(vmm *v) {
    uint64_t at = v->va, live = 0, nlive = 0, nfree = 0;
    uint32_t prev = 0;
    hbm_status s = hbmi_pool_check(&v->blocks, v->b, sizeof *v->b, offsetof(vblk, next), vblk_unused, "vmm");
    if (s) return s;
    for (uint32_t j = v->first; j; j = v->b[j - 1].next) {
        vblk *x = &v->b[j - 1];
        if (x->addr != at || x->prev != prev || !x->size || x->state == V_UNUSED)
            return hbmi_error(HBM_ERR_CORRUPT, "vmm: block at 0x%" PRIx64 " breaks the tiling (expected 0x%" PRIx64 ")",
                              x->addr, at);
        if (x->state == V_LIVE) {
            uint64_t k, lo, hi;
            if (!hbmi_map_get(&v->live, x->addr, &k) || k != j - 1)
                return hbmi_error(HBM_ERR_CORRUPT, "vmm: live block 0x%" PRIx64 " is not indexed", x->addr);
            page_range(v, x->addr, x->size, &lo, &hi);
            for (uint64_t p = lo; p <= hi; p++)
                if (!hbmi_map_get(&v->mapped, p, NULL) || !hbmi_map_get(&v->refs, p, NULL))
                    return hbmi_error(HBM_ERR_CORRUPT, "vmm: page %" PRIu64 " under live block 0x%" PRIx64
                                      " is not mapped or not counted", p, x->addr);
            live += x->size, nlive++;
        } else {
            if (x->fpos >= v->nfree || v->freev[x->fpos] != j - 1)
                return hbmi_error(HBM_ERR_CORRUPT, "vmm: free block 0x%" PRIx64 " is not listed", x->addr);
            if (prev && v->b[prev - 1].state == V_FREE)
                return hbmi_error(HBM_ERR_CORRUPT, "vmm: free neighbours at 0x%" PRIx64 " not coalesced", x->addr);
            nfree++;
        }
        at += x->size;
        prev = j;
    }
    if (at != v->va + v->va_size)
        return hbmi_error(HBM_ERR_CORRUPT, "vmm: blocks end at 0x%" PRIx64 ", not at the reservation's end", at);
    /* every counted page is mapped and its count is the number of live blocks on it */
    for (size_t k = 0; k < v->refs.cap; k++) {
        if (!v->refs.s[k].key) continue;
        if (!hbmi_map_get(&v->mapped, v->refs.s[k].key - 1, NULL))
            return hbmi_error(HBM_ERR_CORRUPT, "vmm: page %" PRIu64 " is counted but not mapped", v->refs.s[k].key - 1);
    }
    /* reclaim's order lists exactly the mapped pages */
    size_t listed = 0;
    for (size_t k = 0; k < v->order.cap; k++) {
        if (!v->order.k[k]) continue;
        listed++;
        if (!hbmi_map_get(&v->mapped, v->order.k[k] - 1, NULL))
            return hbmi_error(HBM_ERR_CORRUPT, "vmm: page %" PRIu64 " is in reclaim's order but not mapped", v->order.k[k] - 1);
    }
    if (listed != v->mapped.count || listed != v->order.count)
        return hbmi_error(HBM_ERR_CORRUPT, "vmm: reclaim's order lists %zu pages (counts %zu), %zu are mapped", listed,
                          v->order.count, v->mapped.count);
    if (hbmi_map_check(&v->live) || hbmi_map_check(&v->mapped) || hbmi_map_check(&v->refs))
        return hbmi_error_prefix(HBM_ERR_CORRUPT, "vmm: ");
    uint64_t refsum = 0, want = 0;
    for (size_t k = 0; k < v->refs.cap; k++)
        if (v->refs.s[k].key) refsum += v->refs.s[k].val;
    for (uint32_t j = v->first; j; j = v->b[j - 1].next)
        if (v->b[j - 1].state == V_LIVE) {
            uint64_t lo, hi;
            page_range(v, v->b[j - 1].addr, v->b[j - 1].size, &lo, &hi);
            want += hi - lo + 1;
        }
    if (live != v->st.bytes_in_use || nlive != v->live.count || nfree != v->nfree || refsum != want ||
        v->mapped.count * v->page != v->st.bytes_reserved || v->st.bytes_reserved != v->st.pool_bytes ||
        v->mapped.count != v->st.num_regions || v->idle_pages != v->mapped.count - v->refs.count ||
        v->st.bytes_reserved > v->st.bytes_limit)
        return hbmi_error(HBM_ERR_CORRUPT,
                          "vmm: counted %" PRIu64 " live bytes in %" PRIu64 " blocks, %zu mapped pages, %" PRIu64
                          " page refs (want %" PRIu64 "); stats say %" PRIu64 " bytes, %" PRIu64 " reserved, %" PRIu64 " idle",
                          live, nlive, v->mapped.count, refsum, want, v->st.bytes_in_use, v->st.bytes_reserved, v->idle_pages);
    return HBM_OK;
}
static hbm_status vmm_check_op(void *self) { return vmm_check(self); }

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Regions: runs of mapped pages; in each, the blocks that overlap it (clipped). */
static hbm_status vmm_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    vmm *v = self;
    uint64_t *pg = hbmi_malloc((v->mapped.count ? v->mapped.count : 1) * sizeof *pg);
    if (!pg) return hbmi_error(HBM_ERR_NOMEM, "out of host memory walking a vmm pool");
    size_t n = 0;
    for (size_t k = 0; k < v->mapped.cap; k++)
        if (v->mapped.s[k].key) pg[n++] = v->mapped.s[k].key - 1;
    hbmi_qsort(pg, n, sizeof *pg, u64_cmp);
    uint32_t j = v->first;
    int stop = 0;
    for (size_t k = 0; k < n && !stop;) {
        size_t e = k + 1;
        while (e < n && pg[e] == pg[e - 1] + 1) e++;
        uint64_t lo = v->va + pg[k] * v->page, hi = v->va + (pg[e - 1] + 1) * v->page;
        hbm_block r = {HBM_BLOCK_REGION, lo, hi - lo, 0, NULL, 0};
        stop = fn(user, &r, 0);
        while (j && v->b[j - 1].addr + v->b[j - 1].size <= lo) j = v->b[j - 1].next;
        for (uint32_t q = j; q && v->b[q - 1].addr < hi && !stop; q = v->b[q - 1].next) {
            vblk *x = &v->b[q - 1];
            uint64_t s0 = x->addr > lo ? x->addr : lo, e0 = x->addr + x->size < hi ? x->addr + x->size : hi;
            int is_live = x->state == V_LIVE;
            hbm_block blk = {is_live ? HBM_BLOCK_LIVE : HBM_BLOCK_FREE, is_live ? x->addr : s0,
                             is_live ? x->size : e0 - s0, is_live ? x->requested : 0, NULL, is_live ? x->seq : 0};
            stop = fn(user, &blk, is_live ? x->tag_id : 0);
        }
        k = e;
    }
    hbmi_free(pg);
    return HBM_OK;
}

static void vmm_destroy(void *self) {
    vmm *v = self;
    for (size_t k = 0; k < v->mapped.cap; k++)
        if (v->mapped.s[k].key) page_unmap(v, v->mapped.s[k].key - 1, v->mapped.s[k].val);
    hbmi_CUcontext saved;
    if (v->cd && v->va && !hbmi_cuda_enter(v->cd, &saved)) {
        v->cd->drv->MemAddressFree(v->va, (size_t)v->va_size);
        hbmi_cuda_leave(v->cd, saved);
    }
    hbmi_map_destroy(&v->live);
    hbmi_map_destroy(&v->mapped);
    hbmi_free(v->order.k);
    hbmi_map_destroy(&v->refs);
    hbmi_pool_destroy(&v->blocks, (void **)&v->b);
    hbmi_free(v->freev);
    hbmi_free(v);
}

static const hbm_allocator_ops vmm_ops = {
    .name = "vmm", .alloc = vmm_alloc, .free = vmm_free, .stats = vmm_stats, .reset_peaks = vmm_reset_peaks,
    .check = vmm_check_op, .walk = vmm_walk, .trim = vmm_trim, .rounded_size = vmm_rounded, .destroy = vmm_destroy};

hbm_status hbmi_vmm_create(hbm_device *dev, const hbm_config *cfg, uint64_t bytes_limit,
                           const hbm_allocator_ops **ops, void **self) {
    hbm_device_info info;
    hbm_device_info_get(dev, &info);
    hbmi_cuda_dev *cd = hbmi_cuda_dev_of(dev);
    if (!cd && strcmp(info.kind, "sim"))
        return hbmi_error(HBM_ERR_UNSUPPORTED, "vmm: needs a cuda: device, or a sim: device for its model (not %s)",
                          info.kind);
    vmm *v = hbmi_calloc(1, sizeof *v);
    if (!v) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a vmm pool");
    v->dev = dev;
    v->cd = cd;
    v->page = VMM_PAGE;
    hbmi_map_init(&v->live);
    hbmi_map_init(&v->mapped);
    hbmi_map_init(&v->refs);
    hbm_status s = HBM_OK;
    hbmi_CUcontext saved = NULL;
    if (cd) {
        hbmi_CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = HBMI_CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = HBMI_CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = cd->ordinal;
        size_t g = 0;
        hbmi_CUresult r = cd->drv->MemGetAllocationGranularity(&g, &prop, HBMI_CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        if (r) s = hbmi_cuda_error(cd->drv, r, "vmm: cuMemGetAllocationGranularity on cuda:%d", cd->ordinal);
        else if (g > v->page) v->page = hbmi_align_up(g, v->page);
    } else if (info.granularity > v->page) {
        v->page = hbmi_align_up(info.granularity, v->page);
    }
    uint64_t limit = bytes_limit / v->page * v->page;
    if (!s && !limit) {
        char a[32];
        s = hbmi_error(HBM_ERR_CONFIG, "vmm: a limit of %s is less than one %" PRIu64 "-byte page",
                       hbm_size_human(bytes_limit, a), v->page);
    }
    v->st.bytes_limit = limit;
    v->va_size = limit * VMM_VA_FACTOR;
    if (!s && cd) {
        if (!(s = hbmi_cuda_enter(cd, &saved))) {
            hbmi_CUdeviceptr va = 0;
            hbmi_CUresult r = cd->drv->MemAddressReserve(&va, (size_t)v->va_size, (size_t)v->page, 0, 0);
            if (r) s = hbmi_cuda_error(cd->drv, r, "vmm: cuMemAddressReserve of %" PRIu64 " bytes", v->va_size);
            v->va = va;
            hbmi_cuda_leave(cd, saved);
        }
    } else if (!s) {
        v->va = VMM_SIM_VA;
    }
    if (!s) s = hbmi_pool_reserve(&v->blocks, (void **)&v->b, sizeof *v->b, 4);
    if (!s) s = hbmi_grow((void **)&v->freev, &v->capfree, 4, sizeof *v->freev);
    if (s) {
        vmm_destroy(v);
        return s;
    }
    uint32_t i = new_block(v);
    v->b[i] = (vblk){.addr = v->va, .size = v->va_size, .state = V_FREE};
    v->first = i + 1;
    free_add(v, i);
    (void)cfg;
    *ops = &vmm_ops;
    *self = v;
    return HBM_OK;
}

int hbmi_vmm_set_quiet(hbm_allocator *a, int on) {
    if (a->ops != &vmm_ops) return 0;
    ((vmm *)a->self)->quiet = on;
    return 1;
}
