/* hbm/hbm.h - everything of libhbm.
 *
 * hbm manages and explains accelerator memory: device-memory allocators with JAX/XLA's
 * semantics (alloc.h, config.h, device.h), the timeline every analysis shares
 * (timeline.h), and the helpers they use (status.h, size.h, tag.h).
 */
#ifndef HBM_HBM_H
#define HBM_HBM_H

#define HBM_VERSION_MAJOR 0
#define HBM_VERSION_MINOR 1
#define HBM_VERSION_PATCH 0
#define HBM_VERSION_STRING "0.1.0"

#include "hbm/alloc.h"
#include "hbm/config.h"
#include "hbm/device.h"
#include "hbm/device_models.h"
#include "hbm/event.h"
#include "hbm/file.h"
#include "hbm/fit.h"
#include "hbm/hlo.h"
#include "hbm/json_api.h"
#include "hbm/pack.h"
#include "hbm/plan.h"
#include "hbm/proto.h"
#include "hbm/size.h"
#include "hbm/status.h"
#include "hbm/tag.h"
#include "hbm/timeline.h"
#include "hbm/torch.h"
#include "hbm/workload.h"
#include "hbm/trace.h"
#include "hbm/replay_torch.h"
#include "hbm/replay.h"
#include "hbm/view.h"
#include "hbm/fleet.h"
#include "hbm/memprof.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version string ("0.1.0"), which may differ from the header's. */
HBM_API const char *hbm_version(void);

#ifdef __cplusplus
}
#endif
#endif
