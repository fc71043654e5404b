/* src/device/device_alloc.h - what an allocator handle sets on the device it allocates from,
 * beyond hbm/device.h. */
#ifndef HBM_DEVICE_ALLOC_H
#define HBM_DEVICE_ALLOC_H

#include "hbm/device.h"

/* Quiet OOMs on dev: hbm_device_alloc returns HBM_ERR_OOM for want of room without a message,
 * and a device op's own HBM_ERR_OOM (sim's address space, host's mmap, a driver's) leaves
 * the last error as it was before the call. Set by hbmi_allocator_set_quiet for its device. */
void hbmi_device_set_quiet(hbm_device *dev, int on);

#endif
