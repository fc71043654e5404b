/* src/api/export_torch.c - hbm export --format torch: the PyTorch allocator twin (trace/replay)
 * gives the blocks of each trace that is not a snapshot, then the writer (trace/export) renders
 * the snapshot. */
#include "core/internal.h"
#include "hbm/trace.h"
#include "trace/trace_view.h"

hbm_status hbm_export_torch_all(hbm_trace *const *traces, size_t n, FILE *f) {
    if (!traces || !n || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_export_torch: NULL argument");
    hbmi_torch_segs **own = hbmi_calloc(n, sizeof *own);
    if (!own) return hbmi_error(HBM_ERR_NOMEM, "out of host memory writing a snapshot");
    hbm_status s = HBM_OK;
    for (size_t d = 0; d < n && !s; d++) /* traces that are not snapshots: the twin's run on them */
        if (!hbmi_trace_has_torch_segs(traces[d]) && hbmi_torch_twin_end_state(traces[d], &own[d]) == HBM_ERR_NOMEM)
            s = hbmi_error(HBM_ERR_NOMEM, "out of host memory writing a snapshot");
    if (!s) s = hbmi_export_torch_write(traces, n, own, f);
    for (size_t d = 0; d < n; d++) hbmi_torch_segs_free(own[d]);
    hbmi_free(own);
    return s;
}

hbm_status hbm_export_torch(const hbm_trace *t, FILE *f) {
    if (!t || !f) return hbmi_error(HBM_ERR_INVALID, "hbm_export_torch: NULL argument");
    hbm_trace *one = (hbm_trace *)t;
    return hbm_export_torch_all(&one, 1, f);
}
