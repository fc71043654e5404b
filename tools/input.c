/* input.c - opening what the commands read, by content: HLO text, or one module of XLA's
 * protobuf inputs (an XProf profile directory or *.xplane.pb, *.hlo_proto.pb, *.hlo.pb).
 * Shared by plan, view and diff; the commands keep their own handling of everything else. */
#include "cli.h"

int cli_open_module(const char *cmd, const char *path, const char *module, FILE *notes, hbm_hlo_module **out) {
    *out = NULL;
    if (hbm_proto_path_kind(path) == HBM_PROTO_NONE) {
        hbm_status s = hbm_hlo_open(path, module, out);
        return s ? cli_fail(cmd, s) : 0;
    }
    hbm_proto_file *f;
    hbm_status s = hbm_proto_open(path, &f);
    if (s) return cli_fail(cmd, s);
    size_t pick = 0, n = hbm_proto_module_count(f);
    if (module) s = hbm_proto_find(f, module, &pick);
    if (!s && n > 1 && notes) { /* as XProf's module selector: the choice, and the others */
        hbm_proto_module_info mi;
        s = hbm_proto_list(f, notes, pick);
        if (!s) s = hbm_proto_module(f, pick, &mi);
        if (!s && fprintf(notes, "%s %s%s\n\n", module ? "Showing" : "Showing the largest,", mi.name,
                          module ? "" : " (--module NAME picks another)") < 0)
            s = HBM_ERR_IO;
    }
    size_t hosts = hbm_proto_file_hosts(f);
    if (!s && hosts > 1 && notes)
        fprintf(notes, "note: the profile run has %zu hosts' files; reading %s\n", hosts, hbm_proto_file_path(f));
    hbm_proto_module_info mi;
    if (!s) s = hbm_proto_module(f, pick, &mi);
    if (!s && !mi.has_assignment && notes &&
        fprintf(notes, "note: no XLA buffer assignment for this module in %s: hbm's own plan only\n  (%s)\n\n",
                path, hbm_proto_file_kind(f) == HBM_PROTO_HLO_MODULE ? "an xla.HloModuleProto alone, as "
                                                                "--xla_dump_hlo_as_proto writes it"
                                                              : "the xla.HloProto holds the module only") < 0)
        s = HBM_ERR_IO;
    if (!s) s = hbm_proto_load(f, pick, out);
    hbm_proto_close(f);
    return s ? cli_fail(cmd, s) : 0;
}

int cli_load_trace(const char *cmd, const char *path, const char *module, int device, FILE *notes, hbm_trace **out,
                   hbm_hlo_module **xla_module, hbm_plan **xla_plan) {
    *out = NULL;
    if (xla_module) *xla_module = NULL;
    if (xla_plan) *xla_plan = NULL;
    if (hbm_proto_path_kind(path) == HBM_PROTO_NONE) {
        if (module) return cli_usage_error(cmd, "--module: %s holds one module or none; it names modules of a "
                                                "profile or protobuf input", path);
        hbm_status s = hbm_trace_load_device(path, device, out);
        return s ? cli_fail(cmd, s) : 0;
    }
    hbm_hlo_module *m;
    int rc = cli_open_module(cmd, path, module, notes, &m);
    if (rc) return rc;
    hbm_plan *p;
    hbm_status s = hbm_plan_run(m, NULL, &p);
    if (!s) s = hbm_plan_trace(p, out);
    if (!s && xla_plan && hbm_plan_xla_same(p) >= 0) {
        *xla_plan = p;
        *xla_module = m;
        return 0;
    }
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    return s ? cli_fail(cmd, s) : 0;
}
