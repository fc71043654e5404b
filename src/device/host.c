/* host.c - real host memory as a device: each raw allocation is its own mmap, so tests
 * can write into every byte of every block and detect overlaps. Capacity is enforced by
 * device.c's accounting; pages are touched only by the caller. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "core/internal.h"
#include "device/device_internal.h"

static hbm_status host_alloc(void *ctx, uint64_t size, uint64_t *addr_out) {
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return hbmi_error(HBM_ERR_OOM, "host: mmap of %llu bytes failed: %s", (unsigned long long)size, strerror(errno));
    *addr_out = (uint64_t)(uintptr_t)p;
    return HBM_OK;
}

static hbm_status host_free(void *ctx, uint64_t addr, uint64_t size) {
    if (munmap((void *)(uintptr_t)addr, (size_t)size))
        return hbmi_error(HBM_ERR_DEVICE, "host: munmap failed: %s", strerror(errno));
    return HBM_OK;
}

static const hbm_device_ops host_ops = {.kind = "host", .alloc = host_alloc, .free = host_free};

hbm_status hbmi_host_device_create(const hbmi_device_args *args, const hbm_device_ops **ops, void **ctx,
                                   hbm_device_info *info) {
    if (args->free_bytes) return hbmi_error(HBM_ERR_INVALID, "device '%s': free= is for sim devices only", args->spec);
    hbmi_device_info_named(args, "host", info);
    info->alignment = 4096;
    info->granularity = 4096;
    *ops = &host_ops;
    *ctx = NULL;
    return HBM_OK;
}
