/* sniff.c - an HLO file by its content: is it a module's text (hbm view, hbm.load choose
 * the plan's view), and the module of a file in either form. */
#include <sys/stat.h>

#include "core/internal.h"
#include "hbm/file.h"
#include "hbm/hlo.h"
#include "hbm/proto.h"

int hbm_hlo_file_is_text(const char *path) {
    /* by content, as every reader: a byte-order mark, comments or gzip around it too */
    hbm_file_kind k;
    return path && !hbm_file_sniff_path(path, &k, NULL) && k == HBM_FILE_HLO;
}

static hbm_status parse_cb(const char *data, size_t len, const char *name, void *out) {
    return hbm_hlo_parse(data, len, name, out);
}

/* The module of a file, HLO text or protobuf (src/hlo/proto.c finds the kind, proto_read.c
 * reads it); `module` picks one of a profile's, NULL the largest. Above both readers, so
 * neither calls the other back. */
hbm_status hbm_hlo_open(const char *path, const char *module, hbm_hlo_module **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "hlo: NULL argument");
    *out = NULL;
    if (hbm_proto_path_kind(path) != HBM_PROTO_NONE) {
        hbm_proto_file *f;
        hbm_status s = hbm_proto_open(path, &f);
        if (s) return s;
        size_t pick = 0; /* the largest */
        if (module) s = hbm_proto_find(f, module, &pick);
        if (!s) s = hbm_proto_load(f, pick, out);
        hbm_proto_close(f);
        return s;
    }
    if (module && *module)
        return hbmi_error(HBM_ERR_INVALID, "%s: HLO text holds one module: no module to choose ('%s')", path, module);
    struct stat st;
    if (!stat(path, &st) && S_ISDIR(st.st_mode))
        return hbmi_error(HBM_ERR_INVALID, "%s is a directory without a profile (no plugins/profile/RUN/*.xplane.pb, "
                          "no *.xplane.pb in it)", path);
    return hbmi_parse_file(path, parse_cb, out);
}

/* HLO text, or any protobuf input: its largest module. */
hbm_status hbm_hlo_parse_file(const char *path, hbm_hlo_module **out) { return hbm_hlo_open(path, NULL, out); }
