/* hbm/tag.h - what a framework knows about a buffer.
 *
 * A tag is passed by pointer and copied (interned) by whoever keeps it, so the caller's
 * strings only need to live for the duration of the call. Every field may be NULL / 0.
 */
#ifndef HBM_TAG_H
#define HBM_TAG_H

#include <stdint.h>

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Buffer categories, named as XLA's buffer assignment names its allocations. */
#define HBM_CATEGORY_LIST(X)          \
    X(HBM_CAT_NONE, "")               \
    X(HBM_CAT_PARAMETER, "parameter") \
    X(HBM_CAT_CONSTANT, "constant")   \
    X(HBM_CAT_OUTPUT, "output")       \
    X(HBM_CAT_TEMP, "temp")           \
    X(HBM_CAT_WEIGHT, "weight")       \
    X(HBM_CAT_ACTIVATION, "activation") \
    X(HBM_CAT_OPTIMIZER, "optimizer") \
    X(HBM_CAT_WORKSPACE, "workspace")

typedef enum hbm_category {
#define HBM_CAT_ENUM_(name, str) name,
    HBM_CATEGORY_LIST(HBM_CAT_ENUM_)
#undef HBM_CAT_ENUM_
    HBM_CAT_COUNT_
} hbm_category;

typedef struct hbm_tag {
    const char *op_name;     /* e.g. "jit(svd)/jit(main)/svd" or "aten::mm" */
    const char *shape;       /* e.g. "f32[300000,50]" */
    const char *source_file; /* e.g. "model.py" */
    int source_line;         /* 0 when unknown */
    const char *label;       /* free text: XLA label (opcode), PyTorch frame, user note */
    hbm_category category;
} hbm_tag;

/* "parameter", "temp", ... ("" for HBM_CAT_NONE or out of range). */
HBM_API const char *hbm_category_str(hbm_category c);

#ifdef __cplusplus
}
#endif
#endif
