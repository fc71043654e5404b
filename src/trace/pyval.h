/* pyval.h - a small tree of Python-like values, built by the pickle and JSON readers and
 * walked by the PyTorch snapshot importer. Every value belongs to a pool freed at once,
 * so shared references (pickle memo) and cycles need no reference counting. */
#ifndef HBM_TRACE_PYVAL_H
#define HBM_TRACE_PYVAL_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/status.h"

typedef enum hbmi_pvtype { PV_NONE, PV_BOOL, PV_INT, PV_FLOAT, PV_STR, PV_BYTES, PV_LIST, PV_TUPLE, PV_DICT } hbmi_pvtype;

typedef struct hbmi_pv {
    hbmi_pvtype type;
    int64_t i;            /* bool, int (values >= 2^63 wrap, as addresses do) */
    double f;
    char *s;              /* str / bytes, NUL-terminated, len bytes */
    size_t len;
    struct hbmi_pv **items; /* list / tuple: n items; dict: n/2 key, value pairs */
    size_t n, cap;
} hbmi_pv;

typedef struct hbmi_pvpool {
    hbmi_pv **slabs; /* values are carved from slabs of HBMI_PV_SLAB (one malloc each), */
    size_t nslabs, slabcap, slab_used; /* all full but the last (slab_used values) */
} hbmi_pvpool;

#define HBMI_PV_SLAB 4096

hbmi_pv *hbmi_pv_new(hbmi_pvpool *p, hbmi_pvtype type);
/* Append to a list/tuple/dict's items; 0 on success. */
int hbmi_pv_push(hbmi_pv *v, hbmi_pv *item);
void hbmi_pvpool_free(hbmi_pvpool *p);

/* The value of key in a dict (str keys), or NULL. */
const hbmi_pv *hbmi_pv_get(const hbmi_pv *dict, const char *key);
/* Int value of key (ints, bools, floats truncated), or def. */
int64_t hbmi_pv_int(const hbmi_pv *dict, const char *key, int64_t def);
const char *hbmi_pv_str(const hbmi_pv *dict, const char *key);

/* Parsers: on error HBM_ERR_PARSE naming name and the byte offset. */
hbm_status hbmi_pickle_parse(const unsigned char *data, size_t len, const char *name, hbmi_pvpool *pool,
                             hbmi_pv **out);
hbm_status hbmi_json_parse(const char *text, size_t len, const char *name, hbmi_pvpool *pool, hbmi_pv **out);

#endif
