/* hbm/file.h - output files written whole or not at all.
 *
 *   hbm_output o;
 *   if (hbm_output_open(&o, "out.json") == HBM_OK) {   // "-" = standard output
 *       fprintf(o.f, ...);
 *       s = hbm_output_commit(&o);   // or hbm_output_abort(&o) on an error of your own
 *   }
 *
 * A file is written to a temporary name in the same folder and renamed over the
 * destination once every write, the flush and the close succeeded: on any failure (a full
 * disk, ulimit -f, a crash) an existing file is left as it was and the temporary removed.
 * A destination that exists and is not a regular file (/dev/null, a FIFO) is written in
 * place. */
#ifndef HBM_FILE_H
#define HBM_FILE_H

#include <stdio.h>

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hbm_output {
    FILE *f;          /* write here */
    char path[4096];  /* the destination; "-" = standard output */
    char tmp[4200];   /* the temporary next to it; "" for standard output or in place */
} hbm_output;

/* Create the temporary (mode 0666 less the umask) or take stdout for "-". */
HBM_API hbm_status hbm_output_open(hbm_output *o, const char *path);
/* Flush and close, checking every write; rename over the destination. For stdout: flush
 * and check (stdout stays open). On failure the destination is untouched. */
HBM_API hbm_status hbm_output_commit(hbm_output *o);
/* Close and remove the temporary; the destination is untouched. */
HBM_API void hbm_output_abort(hbm_output *o);

#ifdef __cplusplus
}
#endif
#endif
