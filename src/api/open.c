/* open.c - opening one HLO module as the commands do, with what a reader needs to know of
 * the choice said on the way (hbm_hlo_open_noted, hbm/proto.h): a profile or protobuf of
 * several modules lists them as XProf's module selector does and names the one shown; a
 * profile run of several hosts says which host's file is read; a module without XLA's own
 * buffer assignment says that only hbm's plan follows. */
#include "core/internal.h"
#include "hbm/hbm.h"

hbm_status hbm_hlo_open_noted(const char *path, const char *module, FILE *notes, hbm_hlo_module **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "hlo: NULL argument");
    *out = NULL;
    if (!notes || hbm_proto_path_kind(path) == HBM_PROTO_NONE) return hbm_hlo_open(path, module, out);
    hbm_proto_file *f;
    hbm_status s = hbm_proto_open(path, &f);
    if (s) return s;
    size_t pick = 0, n = hbm_proto_module_count(f);
    if (module) s = hbm_proto_find(f, module, &pick);
    hbm_proto_module_info mi;
    if (!s && n > 1) { /* as XProf's module selector: the choice, and the others */
        s = hbm_proto_list(f, notes, pick);
        if (!s) s = hbm_proto_module(f, pick, &mi);
        if (!s && fprintf(notes, "%s %s%s\n\n", module ? "Showing" : "Showing the largest,", mi.name,
                          module ? "" : " (--module NAME picks another)") < 0)
            s = hbmi_error(HBM_ERR_IO, "cannot write the module list");
    }
    size_t hosts = hbm_proto_file_hosts(f);
    if (!s && hosts > 1)
        fprintf(notes, "note: the profile run has %zu hosts' files; reading %s\n", hosts, hbm_proto_file_path(f));
    if (!s) s = hbm_proto_module(f, pick, &mi);
    if (!s && !mi.has_assignment &&
        fprintf(notes, "note: no XLA buffer assignment for this module in %s: hbm's own plan only\n  (%s)\n\n", path,
                hbm_proto_file_kind(f) == HBM_PROTO_HLO_MODULE ? "an xla.HloModuleProto alone, as "
                                                                 "--xla_dump_hlo_as_proto writes it"
                                                               : "the xla.HloProto holds the module only") < 0)
        s = hbmi_error(HBM_ERR_IO, "cannot write the note");
    if (!s) s = hbm_proto_load(f, pick, out);
    hbm_proto_close(f);
    return s;
}
