/* memprof_internal.h - the memory profile's reader (xprof_memory.c) and attribution
 * (memprof_attr.c) share this; the renderer reads memprof_view.h. */
#ifndef HBM_MEMPROF_INTERNAL_H
#define HBM_MEMPROF_INTERNAL_H

#include "hbm/memprof.h"
#include "core/arena.h"

/* One event of a module on a device plane (a kernel) or the host (a launch): its program. */
typedef struct hbmi_memprof_exec {
    int64_t start_ps, end_ps;
    int64_t program_id;
    int device; /* the device plane's number, -1 the host plane */
} hbmi_memprof_exec;

struct hbm_memprof {
    char path[4096];  /* the file read */
    char given[4096]; /* as given (a directory) */
    int from_file;
    char *buf;        /* the file's bytes (map.data) */
    size_t len;
    hbmi_input map;   /* a file mapped, or read (small files, gzip); open_mem: a copy */
    hbmi_arena arena; /* strings, active allocations */
    hbm_memprof_event *ev; /* each allocator's events in time order (after reading) */
    size_t nev, evcap;
    size_t *order;
    hbm_memprof_summary *al;
    size_t nal, alcap;
    size_t last_al, last_al_len; /* the allocator of the event read last (its name's length) */
    hbmi_memprof_exec *ex;
    size_t nex, excap;
    int execs_read; /* the module events are read (hbmi_memprof_read_execs) */
    size_t n_planes, n_device_planes;
    int has_host, has_metadata;
    /* attribution */
    size_t n_modules, n_planned;
    char attr_note[256];
};

/* The module events of every plane into mp->ex (once): for the attribution. */
hbm_status hbmi_memprof_read_execs(hbm_memprof *mp);

#endif
