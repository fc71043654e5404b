/* sniff.c - is a file an HLO module's text? (hbm view, hbm.load choose the plan's view) */
#include "hbm/file.h"
#include "hbm/hlo.h"

int hbm_hlo_file_is_text(const char *path) {
    /* by content, as every reader: a byte-order mark, comments or gzip around it too */
    hbm_file_kind k;
    return path && !hbm_file_sniff_path(path, &k, NULL) && k == HBM_FILE_HLO;
}
