/* sim.c - a simulated device: address space only, no memory behind it.
 * Addresses are handed out by a bump pointer from a fixed base and never reused, so a
 * run is deterministic and a stale address can never alias a new block. Capacity is
 * enforced by device.c's accounting. */
#include <stdio.h>

#include "core/internal.h"
#include "device/device_internal.h"

#define SIM_BASE 0x7f0000000000ULL
#define SIM_ALIGN 512

typedef struct sim_device {
    uint64_t next;
} sim_device;

static hbm_status sim_alloc(void *ctx, uint64_t size, uint64_t *addr_out) {
    sim_device *d = ctx;
    uint64_t a = hbmi_align_up(d->next, SIM_ALIGN);
    if (a + size < a) return hbmi_error(HBM_ERR_OOM, "sim: address space exhausted");
    d->next = a + size;
    *addr_out = a;
    return HBM_OK;
}

static hbm_status sim_free(void *ctx, uint64_t addr, uint64_t size) { return HBM_OK; }

static void sim_destroy(void *ctx) { hbmi_free(ctx); }

static const hbm_device_ops sim_ops = {
    .kind = "sim", .alloc = sim_alloc, .free = sim_free, .mem_info = NULL, .destroy = sim_destroy};

hbm_status hbmi_sim_device_create(const hbmi_device_args *args, const hbm_device_ops **ops, void **ctx,
                                  hbm_device_info *info) {
    sim_device *d = hbmi_calloc(1, sizeof *d);
    if (!d) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a sim device");
    d->next = SIM_BASE;
    hbmi_device_info_named(args, "sim", info);
    info->alignment = SIM_ALIGN;
    *ops = &sim_ops;
    *ctx = d;
    return HBM_OK;
}
