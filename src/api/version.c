/* version.c - the library's version (hbm/hbm.h, the header of everything: so it lives on
 * the top floor, not in core/). */
#include "hbm/hbm.h"

const char *hbm_version(void) { return HBM_VERSION_STRING; }
