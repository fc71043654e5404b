/* input.c - opening what the commands read, by content: HLO text, or one module of XLA's
 * protobuf inputs (an XProf profile directory or *.xplane.pb, *.hlo_proto.pb, *.hlo.pb).
 * Shared by plan, view and diff; the commands keep their own handling of everything else. */
#include "cli.h"

int cli_open_module(const char *cmd, const char *path, const char *module, FILE *notes, hbm_hlo_module **out) {
    hbm_status s = hbm_hlo_open_noted(path, module, notes, out);
    return s ? cli_fail(cmd, s) : 0;
}

int cli_load_trace(const char *cmd, const char *path, const char *module, int device, FILE *notes, hbm_trace **out,
                   hbm_hlo_module **xla_module, hbm_plan **xla_plan) {
    *out = NULL;
    if (xla_module) *xla_module = NULL;
    if (xla_plan) *xla_plan = NULL;
    hbm_proto_kind k = hbm_proto_path_kind(path);
    if ((k == HBM_PROTO_XSPACE || k == HBM_PROTO_PROFILE_DIR) && !module) {
        /* a profile with a memory profile: its allocators' events (else its largest module) */
        hbm_memprof *mp;
        int ok = hbm_memprof_open(path, &mp) == HBM_OK, has = ok && hbm_memprof_allocator_count(mp) > 0;
        if (ok) hbm_memprof_close(mp);
        if (has) {
            hbm_status s = hbm_trace_load_device(path, device, out);
            return s ? cli_fail(cmd, s) : 0;
        }
    }
    if (k == HBM_PROTO_NONE) {
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
