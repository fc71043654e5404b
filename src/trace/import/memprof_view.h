/* src/trace/import/memprof_view.h - what the memory profile's renderer
 * (src/report/memprof_report.c) reads beyond hbm/memprof.h: what the profile holds besides
 * its memory events, and the attribution's counts. memprof_internal.h stays with the reader. */
#ifndef HBM_MEMPROF_VIEW_H
#define HBM_MEMPROF_VIEW_H

#include <stddef.h>

#include "hbm/memprof.h"

typedef struct hbmi_memprof_holds {
    size_t n_planes, n_device_planes;
    int has_host;         /* a host plane */
    int has_metadata;     /* the compiled modules ('/host:metadata') */
    size_t n_modules;     /* attribution (hbm_memprof_attribute): the profile's modules */
    size_t n_planned;     /* and those planned */
    const char *attr_note; /* why nothing was attributed; "" */
} hbmi_memprof_holds;

void hbmi_memprof_holds_get(const hbm_memprof *mp, hbmi_memprof_holds *out);

#endif
