/* sniff.c - an HLO file by its content: is it a module's text (hbm view, hbm.load choose
 * the plan's view), and the module of a file in either form. */
#include "hbm/file.h"
#include "hbm/hlo.h"
#include "hbm/proto.h"

int hbm_hlo_file_is_text(const char *path) {
    /* by content, as every reader: a byte-order mark, comments or gzip around it too */
    hbm_file_kind k;
    return path && !hbm_file_sniff_path(path, &k, NULL) && k == HBM_FILE_HLO;
}

/* HLO text, or any protobuf input (src/hlo/proto.c): its largest module. */
hbm_status hbm_hlo_parse_file(const char *path, hbm_hlo_module **out) { return hbm_hlo_open(path, NULL, out); }
