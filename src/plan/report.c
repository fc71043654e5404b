/* report.c - a plan as XLA prints it ("BufferAssignment OOM Debugging."), as hbm explains
 * it (where the peak is, who owns it, does it fit), and as JSON. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/size.h"
#include "plan/plan_fit.h"
#include "plan/plan_internal.h"

static const char *sz(uint64_t b, char buf[32]) { return hbm_size_xla((int64_t)b, buf); }

hbm_status hbm_plan_report(const hbm_plan *p, FILE *f, size_t top) { return hbm_plan_report_target(p, f, top, 0, 0); }

hbm_status hbm_plan_report_target(const hbm_plan *p, FILE *f, size_t top, uint64_t capacity, double fraction) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "plan report: NULL argument");
    /* XLA prints its heading only when an allocation fails (BufferAssignment::ToVerboseString,
     * xla/service/buffer_assignment.cc, called by GpuExecutable::VerboseAllocationError under
     * ResourceExhausted); a module that fits, or no device, gets a neutral one */
    hbm_plan_verdict v = hbm_plan_verdict_get(p, capacity, fraction, NULL);
    int oom = v == HBM_VERDICT_DOES_NOT_FIT || v == HBM_VERDICT_FITS_PHYSICALLY_ONLY;
    const hbm_plan_stats *s = &p->stats;
    char a[32], b[32];
    if (s->estimate) {
        /* not XLA's words: XLA has not scheduled this module, so nobody assigned its buffers yet */
        fprintf(f, "ESTIMATE: the module is not scheduled (no is_scheduled=true, e.g. a dump from before XLA's\n"
                   "optimizations): hbm orders each computation as XLA's post order would and assigns buffers\n"
                   "by XLA's rules, but XLA's own schedule, fusions and buffer assignment will differ.\n");
        fprintf(f, "Buffer assignment estimate (hbm):\n");
    } else {
        fprintf(f, oom ? "BufferAssignment OOM Debugging.\n"
                       : "Buffer assignment (XLA's stats and peak buffers, as hbm computes them):\n");
        fprintf(f, "BufferAssignment stats:\n");
    }
    fprintf(f, "             parameter allocation: %10s\n", sz(s->argument_size_in_bytes, a));
    fprintf(f, "              constant allocation: %10s\n", sz(s->constant_size_in_bytes, a));
    fprintf(f, "        maybe_live_out allocation: %10s\n", sz(s->output_size_in_bytes, a));
    fprintf(f, "     preallocated temp allocation: %10s\n", sz(s->temp_size_in_bytes, a));
    if ((p->temp_heap_size || s->temp_fragmentation_bytes) && s->temp_fragmentation_bytes >= 0) {
        double pct = s->temp_size_in_bytes ? 100.0 * (double)s->temp_fragmentation_bytes / (double)s->temp_size_in_bytes : 0;
        fprintf(f, "  preallocated temp fragmentation: %10s (%.2f%%)\n", hbm_size_xla(s->temp_fragmentation_bytes, b), pct);
    }
    fprintf(f, "                 total allocation: %10s\n", sz(s->total_allocation_bytes, a));
    if (s->total_fragmentation_bytes >= 0) {
        double pct = s->total_allocation_bytes
                         ? 100.0 * (double)s->total_fragmentation_bytes / (double)s->total_allocation_bytes
                         : 0;
        fprintf(f, "              total fragmentation: %10s (%.2f%%)\n", hbm_size_xla(s->total_fragmentation_bytes, b),
                pct);
    }
    fprintf(f, "Peak buffers:");
    size_t n = p->n_peak < top ? p->n_peak : top;
    for (size_t i = 0; i < n; i++) {
        const hbm_plan_buffer *pb = &p->peak[i];
        fprintf(f, "\n\tBuffer %zu:\n\t\tSize: %s\n", i + 1, sz(pb->size, a));
        if (pb->op_name[0]) {
            fputs("\t\tOperator: op_name=\"", f); /* (as XLA; control characters made visible) */
            hbmi_fputs_visible(pb->op_name, f);
            fputc('"', f);
            if (pb->source_file[0]) {
                fputs(" source_file=\"", f);
                hbmi_fputs_visible(pb->source_file, f);
                fputc('"', f);
            }
            if (pb->source_line) fprintf(f, " source_line=%d", pb->source_line);
            fprintf(f, "\n");
        }
        if (pb->param_number >= 0) fprintf(f, "\t\tEntry Parameter Subshape: %s\n", pb->shape);
        else fprintf(f, "\t\tXLA Label: %s\n\t\tShape: %s\n", pb->label, pb->shape);
        fprintf(f, "\t\t==========================");
    }
    fprintf(f, "\n");
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan report: write error") : HBM_OK;
}

/* --- explanation --------------------------------------------------------------------------------------- */
typedef struct live_item {
    uint64_t size;
    size_t idx;
} live_item;

static int cmp_live(const void *x, const void *y) {
    const live_item *a = x, *b = y;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static const char *cat_name(hbm_category c) { return hbm_category_str(c); }

int hbmi_backend_reads_fraction(hbm_backend b) { return b != HBM_BACKEND_TPU && b != HBM_BACKEND_CPU; }

double hbm_plan_fraction(const hbm_plan *p, double fraction) {
    if (fraction >= 0) return fraction;
    return p && !hbmi_backend_reads_fraction(p->stats.backend) ? 1.0 : 0.75;
}

hbm_plan_verdict hbm_plan_verdict_get(const hbm_plan *p, uint64_t capacity, double fraction, uint64_t *limit) {
    fraction = hbm_plan_fraction(p, fraction);
    uint64_t use = hbm_xla_gpu_limit(capacity, fraction); /* XLA's BFC limit under the fraction */
    if (limit) *limit = use;
    if (!p || !capacity) return HBM_VERDICT_NONE;
    uint64_t need = p->stats.peak_bytes;
    return need > capacity ? HBM_VERDICT_DOES_NOT_FIT : need > use ? HBM_VERDICT_FITS_PHYSICALLY_ONLY : HBM_VERDICT_FITS;
}

const char *hbm_plan_verdict_str(hbm_plan_verdict v) {
    switch (v) {
    case HBM_VERDICT_FITS: return "fits";
    case HBM_VERDICT_FITS_PHYSICALLY_ONLY: return "fits_physically_only";
    case HBM_VERDICT_DOES_NOT_FIT: return "does_not_fit";
    default: return "";
    }
}

hbm_status hbm_plan_explain(const hbm_plan *p, FILE *f, uint64_t capacity, double fraction, const char *device,
                            size_t top) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "plan explain: NULL argument");
    const hbm_plan_stats *s = &p->stats;
    const hbm_timeline *tl = hbm_plan_timeline(p);
    if (!tl) return HBM_ERR_NOMEM;
    char a[32], b[32], c[32];
    fprintf(f, "\nhbm: explanation\n");
    static const char *const rules[] = {"", "GPU", "CPU", "TPU"};
    fprintf(f, "  Rules: XLA:%s buffer assignment, %" PRIu64 "-byte alignment%s%s.\n",
            rules[s->backend <= HBM_BACKEND_TPU ? s->backend : 1], p->opt.alignment,
            p->alignment_from == HBMI_ALIGN_XLA      ? (p->m && p->m->xla && p->m->xla->alignment_other
                                              ? " (XLA's build, as other modules show)"
                                              : " (XLA's build, as its assignment shows)")
            : p->alignment_from == HBMI_ALIGN_TEXT ? " (XLA 2026 print form: operands %x#N)"
                                       : "",
            s->backend != HBM_BACKEND_TPU ? ""
            : p->alignment_from == HBMI_ALIGN_OPTION ? ", buffers padded to their layout tiles"
                                          : ", buffers padded to their layout tiles, HBM temp buffers at 16 KiB");
    if (p->backend_evidence == HBMI_EVIDENCE_NONE && s->estimate)
        fprintf(f, "    (assumed: the backend is unknown, nothing in the module says which XLA compiler will\n"
                   "    compile it, and the module is not optimized; --backend cpu or tpu if not XLA:GPU)\n");
    else if (p->backend_evidence == HBMI_EVIDENCE_NONE)
        fprintf(f, "    (assumed: nothing in the module says which XLA compiler made it; --backend cpu or tpu\n"
                   "    if not XLA:GPU)\n");
    fprintf(f, "  The executable needs %s (%" PRIu64 " bytes) of device memory:\n    arguments %s + outputs %s",
            hbm_size_human(s->peak_bytes, a), s->peak_bytes, hbm_size_human(s->argument_size_in_bytes, b),
            hbm_size_human(s->output_size_in_bytes, c));
    if (s->alias_size_in_bytes) fprintf(f, " - donated %s", hbm_size_human(s->alias_size_in_bytes, a));
    fprintf(f, " + temp %s", hbm_size_human(s->temp_size_in_bytes, a));
    if (s->constant_size_in_bytes) fprintf(f, " + constants %s", hbm_size_human(s->constant_size_in_bytes, a));
    fprintf(f, ".\n");
    if (s->estimate) /* what the figure is worth before XLA's passes */
        fprintf(f, "    Not optimized, so an estimate: the arguments and outputs follow from the entry's\n"
                   "    signature, but temp counts every intermediate of the unfused module, most of which\n"
                   "    XLA's fusion removes; the compiled executable's need can be far lower.\n");
    if (s->total_allocation_bytes != s->peak_bytes) {
        /* what XLA's total counts beside the device need, wrapped at 100 columns */
        char line[200], part[120];
        snprintf(line, sizeof line, "  XLA's \"Total bytes used\" is %s (%" PRIu64 " bytes):",
                 hbm_size_human(s->total_allocation_bytes, a), s->total_allocation_bytes);
        uint64_t host = s->host_argument_size_in_bytes + s->host_output_size_in_bytes - s->host_alias_size_in_bytes +
                        s->host_temp_size_in_bytes;
        for (int k = 0; k < 4; k++) {
            part[0] = 0;
            if (k == 0 && s->thread_local_size_in_bytes)
                snprintf(part, sizeof part, " + %s of reducer scalars", hbm_size_human(s->thread_local_size_in_bytes, a));
            if (k == 1 && s->alias_size_in_bytes)
                snprintf(part, sizeof part, " + the donated %s again", hbm_size_human(s->alias_size_in_bytes, a));
            if (k == 2 && host) snprintf(part, sizeof part, " + %s of host memory S(5)", hbm_size_human(host, a));
            if (k == 3 && s->other_space_size_in_bytes)
                snprintf(part, sizeof part, " + %s in memory spaces other than device memory (S(1) ...: not HBM)",
                         hbm_size_human(s->other_space_size_in_bytes, a));
            if (!part[0]) continue;
            if (strlen(line) + strlen(part) > 98) {
                fprintf(f, "%s\n", line);
                snprintf(line, sizeof line, "   %s", part);
            } else {
                strncat(line, part, sizeof line - strlen(line) - 1);
            }
        }
        fprintf(f, "%s.\n", line);
    }
    if (s->temp_size_in_bytes) {
        /* the spans' peak (values sharing one offset counted once) never exceeds the heap */
        uint64_t live = p->temp_live_peak <= s->temp_size_in_bytes ? p->temp_live_peak : s->temp_size_in_bytes;
        fprintf(f, "  XLA reserves the temp allocation for the whole run; at most %s of it is live at once\n"
                   "    (%s free between live buffers at that step: fragmentation).\n",
                hbm_size_human(live, a), hbm_size_human(s->temp_size_in_bytes - live, b));
    }
    if (s->padding_bytes)
        fprintf(f, "  Padding to tiled layouts: %s of the %s needed (%.1f %%).\n",
                hbm_size_human(s->padding_bytes, a), hbm_size_human(s->peak_bytes, b),
                s->peak_bytes ? 100.0 * (double)s->padding_bytes / (double)s->peak_bytes : 0.0);
    /* the peak step, then where it is, and the colon last: the list of its buffers follows */
    fprintf(f, "  Peak of live bytes: step %" PRId64 " of %zu (instruction %s), %s live", s->peak_step, s->n_steps,
            hbm_plan_step_name(p, s->peak_step), hbm_size_human(s->peak_live_bytes, a));
    const char *where = hbm_plan_step_where(p, s->peak_step);
    int inside = strchr(where, '<') != NULL;
    if (s->peak_live_bytes < s->peak_bytes)
        fprintf(f, "\n    (the other %s is reserved but idle at that step)",
                hbm_size_human(s->peak_bytes - s->peak_live_bytes, b));
    if (inside) fprintf(f, ";\n    the step is inside %s", where);
    fprintf(f, ":\n");
    /* the buffers live at the peak step, largest first (each timeline buffer is one place) */
    live_item *items = hbmi_malloc(sizeof *items * (tl->count + 1));
    if (!items) return hbmi_error(HBM_ERR_NOMEM, "plan explain: out of host memory");
    size_t n = 0;
    for (size_t i = 0; i < tl->count; i++) {
        const hbm_tl_buffer *bf = &tl->buffers[i];
        if (bf->start <= s->peak_step && s->peak_step < bf->end) {
            items[n].size = bf->size;
            items[n++].idx = i;
        }
    }
    hbmi_qsort(items, n, sizeof *items, cmp_live);
    size_t show = n < top ? n : top;
    for (size_t k = 0; k < show; k++) {
        const hbm_tl_buffer *bf = &tl->buffers[items[k].idx];
        const hbm_tag *t = hbm_timeline_tag(tl, items[k].idx);
        double pct = s->peak_live_bytes ? 100.0 * (double)bf->size / (double)s->peak_live_bytes : 0;
        char full[512], what[256]; /* "label shape", cut to fit 100 columns */
        snprintf(full, sizeof full, "%s %s", t && t->label ? t->label : "", t && t->shape ? t->shape : "");
        hbmi_text_fit(what, sizeof what, full, 63, 0);
        hbmi_buffer_row(f, 4, hbm_size_xla((int64_t)bf->size, a), pct, t ? cat_name(t->category) : "", what);
        /* cut in the middle so that both ends survive (file:line, the op's last component) */
        if (t) hbmi_buffer_where(f, 15, 100 - 18, t->source_file, t->source_line, t->op_name);
    }
    if (n > show) fprintf(f, "    ... and %zu smaller buffers\n", n - show);
    /* a buffer that dwarfs the inputs is the usual culprit (e.g. an SVD's full U) */
    if (p->n_peak && p->peak[0].size > 4 * (s->argument_size_in_bytes + s->output_size_in_bytes) &&
        p->peak[0].size > s->peak_bytes / 2) {
        const hbm_plan_buffer *pb = &p->peak[0];
        fprintf(f, "  Suspect: %s %s (%s)\n    is %.0fx the size of all arguments and outputs together",
                pb->label, pb->shape, hbm_size_xla((int64_t)pb->size, a),
                (double)pb->size / (double)((s->argument_size_in_bytes + s->output_size_in_bytes) ? (s->argument_size_in_bytes + s->output_size_in_bytes) : 1));
        if (pb->source_file[0]) fprintf(f, "; it comes from %s:%d", pb->source_file, pb->source_line);
        fprintf(f, ".\n");
    }
    hbmi_free(items);
    uint64_t limit;
    fraction = hbm_plan_fraction(p, fraction);
    hbm_plan_verdict v = hbm_plan_verdict_get(p, capacity, fraction, &limit);
    if (v != HBM_VERDICT_NONE) {
        const char *dev = device && *device ? device : "the device";
        uint64_t need = s->peak_bytes;
        int jax_default = fabs(fraction - 0.75) < 1e-9; /* JAX's own 75 %, or a fraction given (--framework-limit) */
        hbm_size_human(capacity, a); /* said once: "a device of 1B" names its size already */
        if (strstr(dev, a)) fprintf(f, "\nVerdict for %s:\n", dev);
        else fprintf(f, "\nVerdict for %s (%s):\n", dev, a);
        if (v == HBM_VERDICT_DOES_NOT_FIT) {
            fprintf(f, "  DOES NOT FIT: needs %s, the device has %s (short by %s).\n", hbm_size_human(need, a),
                    hbm_size_human(capacity, b), hbm_size_human(need - capacity, c));
        } else if (v == HBM_VERDICT_FITS_PHYSICALLY_ONLY) {
            fprintf(f,
                    "  FITS PHYSICALLY BUT NOT UNDER THE FRAMEWORK'S %sLIMIT: needs %s,\n"
                    "    the framework lets XLA use %.*f %% = %s%s.\n",
                    jax_default ? "DEFAULT " : "", hbm_size_human(need, a), fraction * 100.0 < 10.0 ? 1 : 0,
                    fraction * 100.0, hbm_size_human(limit, b), jax_default ? " (JAX preallocates 75 %)" : "");
            if (!hbmi_backend_reads_fraction(s->backend)) {
                fprintf(f, "  XLA:%s's runtime reads no memory fraction (XLA_PYTHON_CLIENT_MEM_FRACTION is XLA:GPU's):\n"
                           "    with no limit of its own there, the module fits the device's %s.\n",
                        s->backend == HBM_BACKEND_TPU ? "TPU" : "CPU", hbm_size_human(capacity, c));
            } else {
                hbmi_fraction_advice(f, need, capacity, "  ");
                if (!jax_default) /* seen on an H200 with JAX 0.11: it compiles another module, which fits */
                    fprintf(f, "  Compiling for this limit, XLA tries to recompute values to fit under it, at a\n"
                               "    cost in time ('hbm fit' shows which; docs/fit.md compares with XLA's choice).\n");
            }
        } else {
            fprintf(f, "  FITS: needs %s of %s usable (%.1f %% of the device)%s.\n", hbm_size_human(need, a),
                    hbm_size_human(limit, b), 100.0 * (double)need / (double)capacity,
                    limit >= capacity ? ""
                    : jax_default     ? ",\n    under the framework's default limit"
                                      : ",\n    under the framework's limit");
        }
    }
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan explain: write error") : HBM_OK;
}

/* --- JSON -------------------------------------------------------------------------------------------------- */
static void jstr(FILE *f, const char *s) { hbmi_json_write_str(f, s, 0); }

static void jfrag(FILE *f, int64_t v) {
    if (v < 0) fputs("null", f);
    else fprintf(f, "%" PRId64, v);
}

hbm_status hbm_plan_json(const hbm_plan *p, FILE *f, size_t top, uint64_t capacity, double fraction) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "plan json: NULL argument");
    const hbm_plan_stats *s = &p->stats;
    char name[64];
    snprintf(name, sizeof name, "%s", hbm_hlo_module_name(p->m));
    fprintf(f, "{\n  \"module\": ");
    jstr(f, name);
    fprintf(f, ",\n  \"estimate\": %s,\n  \"backend\": \"%s\"", s->estimate ? "true" : "false",
            hbm_backend_str(s->backend));
    fprintf(f, ",\n  \"backend_from\": \"%s\"",
            p->backend_evidence == HBMI_EVIDENCE_OPTION      ? "option"
            : p->backend_evidence == HBMI_EVIDENCE_FILE_NAME ? "file name"
            : p->backend_evidence == HBMI_EVIDENCE_CONTENT   ? "content"
                                         : "assumed");
    /* the one figure most scripts want, under a name that says it: peak_bytes' value
     * (total_bytes is XLA's "Total bytes used", host and other memory spaces included) */
    fprintf(f, ",\n  \"device_need_bytes\": %" PRIu64, s->peak_bytes);
    fprintf(f,
            ",\n  \"argument_size_in_bytes\": %" PRIu64 ",\n  \"output_size_in_bytes\": %" PRIu64
            ",\n  \"alias_size_in_bytes\": %" PRIu64 ",\n  \"temp_size_in_bytes\": %" PRIu64
            ",\n  \"constant_size_in_bytes\": %" PRIu64 ",\n  \"thread_local_size_in_bytes\": %" PRIu64
            ",\n  \"total_bytes\": %" PRIu64 ",\n  \"total_allocation_bytes\": %" PRIu64
            ",\n  \"peak_bytes\": %" PRIu64 ",\n  \"temp_fragmentation_bytes\": ",
            s->argument_size_in_bytes, s->output_size_in_bytes, s->alias_size_in_bytes, s->temp_size_in_bytes,
            s->constant_size_in_bytes, s->thread_local_size_in_bytes, s->total_allocation_bytes,
            s->total_allocation_bytes, s->peak_bytes);
    /* XLA states a fragmentation only when it is not negative (its no-fragmentation heap counts
     * a buffer shared by several values once per value): null where it would not */
    jfrag(f, s->temp_fragmentation_bytes);
    fprintf(f, ",\n  \"total_fragmentation_bytes\": ");
    jfrag(f, s->total_fragmentation_bytes);
    fprintf(f, ",\n  \"peak_step\": %" PRId64, s->peak_step);
    fprintf(f,
            ",\n  \"host_argument_size_in_bytes\": %" PRIu64 ",\n  \"host_output_size_in_bytes\": %" PRIu64
            ",\n  \"host_alias_size_in_bytes\": %" PRIu64 ",\n  \"host_temp_size_in_bytes\": %" PRIu64,
            s->host_argument_size_in_bytes, s->host_output_size_in_bytes, s->host_alias_size_in_bytes,
            s->host_temp_size_in_bytes);
    fprintf(f, ",\n  \"other_space_size_in_bytes\": %" PRIu64, s->other_space_size_in_bytes);
    fprintf(f, ",\n  \"padding_bytes\": %" PRIu64, s->padding_bytes);
    fprintf(f, ",\n  \"peak_instruction\": ");
    jstr(f, hbm_plan_step_name(p, s->peak_step));
    fprintf(f, ",\n  \"peak_computation\": ");
    jstr(f, hbm_plan_step_where(p, s->peak_step));
    fprintf(f, ",\n  \"peak_live_bytes\": %" PRIu64 ",\n  \"schedule_steps\": %zu", s->peak_live_bytes, s->n_steps);
    uint64_t limit;
    hbm_plan_verdict v = hbm_plan_verdict_get(p, capacity, fraction, &limit);
    if (v != HBM_VERDICT_NONE)
        fprintf(f, ",\n  \"capacity_bytes\": %" PRIu64 ",\n  \"framework_limit_bytes\": %" PRIu64 ",\n  \"verdict\": \"%s\"",
                capacity, limit, hbm_plan_verdict_str(v));
    if (v == HBM_VERDICT_FITS_PHYSICALLY_ONLY && hbmi_backend_reads_fraction(s->backend)) {
        /* the setting the text advises, checked the same way (XLA:GPU's: the others read no fraction) */
        char set[256];
        hbmi_fraction_setting(set, sizeof set, s->peak_bytes, capacity);
        fprintf(f, ",\n  \"setting\": ");
        jstr(f, set);
    }
    fprintf(f, ",\n  \"peak_buffers\": [");
    size_t n = p->n_peak < top ? p->n_peak : top;
    for (size_t i = 0; i < n; i++) {
        const hbm_plan_buffer *pb = &p->peak[i];
        fprintf(f, "%s\n    {\"size\": %" PRIu64 ", \"label\": ", i ? "," : "", pb->size);
        jstr(f, pb->label);
        fprintf(f, ", \"shape\": ");
        jstr(f, pb->shape);
        fprintf(f, ", \"instruction\": ");
        jstr(f, pb->instruction);
        fprintf(f, ", \"op_name\": ");
        jstr(f, pb->op_name);
        fprintf(f, ", \"source_file\": ");
        jstr(f, pb->source_file);
        fprintf(f, ", \"source_line\": %d, \"category\": ", pb->source_line);
        jstr(f, hbm_category_str(pb->category));
        if (s->padding_bytes) fprintf(f, ", \"padding\": %" PRIu64, pb->padding);
        fprintf(f, "}");
    }
    fprintf(f, "%s]\n}\n", n ? "\n  " : "");
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan json: write error") : HBM_OK;
}

/* --- XLA:TPU's compile-time OOM ------------------------------------------------------------------------ */
/* tsl's HumanReadableNumBytes, as XLA:TPU prints sizes: "0B", "336.5K", "260.00M", "35.40G" */
static const char *tpu_sz(uint64_t b, char buf[32]) {
    if (b < 1024) {
        snprintf(buf, 32, "%" PRIu64 "B", b);
        return buf;
    }
    static const char units[] = "KMGTPE";
    const char *u = units;
    double x = (double)b;
    while (x >= 1024.0 * 1024.0 && u[1]) {
        x /= 1024.0;
        u++;
    }
    snprintf(buf, 32, *u == 'K' ? "%.1f%c" : "%.2f%c", x / 1024.0, *u);
    return buf;
}

static uint64_t tile_padding(const hbm_plan *p, uint32_t v) {
    const hbmi_value *val = &p->df->values[v];
    const hbmi_shape *sh = hbmi_shape_node(hbmi_df_instr(p->df, val->gid)->shape, val->node);
    if (!sh || !sh->tiled_elems) return 0;
    hbmi_shape plain = *sh;
    plain.tiled_elems = 0;
    uint64_t u = hbmi_shape_bytes(&plain, p->df->pointer_size);
    return val->size > u ? val->size - u : 0;
}

/* The instruction's own line ("%iota.2 = s32[..]{1,0:T(8,128)} iota(), ..."), cut at cap. */
static void instr_line(const hbm_plan *p, const char *name, char *buf, size_t cap) {
    buf[0] = 0;
    const hbm_hlo_module *m = p->m;
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t i = 0; i < m->comps[ci].n; i++) {
            const hbmi_instr *in = &m->comps[ci].ins[i];
            if (in->name.n != strlen(name) || memcmp(in->name.p, name, in->name.n)) continue;
            const char *s = m->text + in->off, *e = memchr(s, '\n', m->len - in->off);
            size_t n = e ? (size_t)(e - s) : m->len - in->off;
            while (n && (*s == ' ' || *s == '\t')) s++, n--;
            if (n > 4 && !memcmp(s, "ROOT", 4)) s += 5, n -= 5;
            size_t k = 0;
            if (*s != '%' && k + 1 < cap) buf[k++] = '%';
            for (size_t j = 0; j < n && k + 4 < cap; j++) buf[k++] = (unsigned char)s[j] < 32 ? '?' : s[j];
            if (n >= cap - 4 && k + 4 <= cap) memcpy(buf + k, "...", 3), k += 3;
            buf[k] = 0;
            return;
        }
}

hbm_status hbm_plan_report_tpu(const hbm_plan *p, FILE *f, uint64_t capacity, size_t top) {
    if (!p || !f) return hbmi_error(HBM_ERR_INVALID, "plan report: NULL argument");
    char a[32], b[32], c[32], d[32];
    /* HBM is memory space 0 only: S(1) and the TPU's other spaces are not HBM */
    uint64_t args = 0, shared = 0, outs = 0, global = 0, temp = 0, live = 0, unpadded = 0;
    for (uint32_t i = 0; i < p->n_allocs; i++) {
        const hbmi_alloc *al = &p->allocs[i];
        if (al->color != 0 || al->thread_local) continue;
        if (al->param_no >= 0) {
            args += al->size;
            if (al->param_aliased) shared += al->size;
        }
        if (al->live_out) outs += al->size;
        if (al->constant) global += al->size;
        if (hbmi_alloc_is_temp(al)) {
            temp += al->size;
            for (uint32_t k = 0; k < al->n_peak; k++) {
                uint64_t sz = p->df->values[al->peak[k]].size, pad = tile_padding(p, al->peak[k]);
                live += sz;
                unpadded += sz - pad;
            }
        }
    }
    if (live > temp) live = temp;
    /* XLA:TPU's lines (libtpu 0.0.52, docs/tpu.md): the OOM line's Used counts arguments,
     * outputs not shared with them and the program, as its buffer assignment's total does;
     * "Total hbm usage >=" is reserved + program + arguments, and the program is global +
     * HLO temp (+ scoped, overlays) without the outputs */
    uint64_t program = global + temp, used = args + (outs > shared ? outs - shared : 0) + program;
    /* what JAX raises (libtpu 0.0.52: the error's text names Used as "HLO temporaries"), then
     * what libtpu's log reads */
    fprintf(f,
            "RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total memory required "
            "for HLO temporaries (%s) exceeds available HBM (%s). HLO module: %.*s.\n",
            tpu_sz(used, a), tpu_sz(capacity, b), (int)p->m->name.n, p->m->name.p);
    fprintf(f, "XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used %s of %s hbm.",
            tpu_sz(used, a), tpu_sz(capacity, b));
    if (used > capacity) fprintf(f, " Exceeded hbm capacity by %s.", tpu_sz(used - capacity, a));
    fprintf(f, " HLO module: %.*s.\n", (int)p->m->name.n, p->m->name.p);
    fprintf(f, "\nTotal hbm usage >= %s:\n", tpu_sz(program + args, a));
    fprintf(f, "    reserved        unknown (the runtime's; not in the module, not counted)\n");
    /* XLA's columns: the name in 12, the size right-aligned in 11 ("    program           2.00G ") */
    fprintf(f, "    program     %11s \n    arguments   %11s \n\n", tpu_sz(program, a), tpu_sz(args, b));
    fprintf(f, "Output size %s; shares %s with arguments.\n\n", tpu_sz(outs, a), tpu_sz(shared, b));
    fprintf(f, "Program hbm requirement %s:\n", tpu_sz(program, a));
    /* XLA:TPU's global holds the constants and buffers of its own (1.00M on a v5e) */
    fprintf(f, "    global          unknown (the compiler's; constants %s)\n", tpu_sz(global, a));
    fprintf(f, "    scoped          unknown (the TPU compiler's scratch; not counted)\n");
    double util = live ? 100.0 * (double)unpadded / (double)live : 100.0;
    double frag = temp ? 100.0 * (double)(temp - live) / (double)temp : 0.0;
    fprintf(f, "    HLO temp    %11s (%.1f%% utilization: Unpadded (%s) Padded (%s), %.1f%% fragmentation (%s))\n",
            tpu_sz(temp, a), util, tpu_sz(unpadded, b), tpu_sz(live, c), frag, tpu_sz(temp - live, d));
    fprintf(f, "    overlays        unknown (the compiled program's; not counted)\n");
    fprintf(f, "\n  Largest program allocations in hbm:\n");
    /* the values live at each HBM allocation's peak (parameters are the arguments), largest first */
    uint32_t best[64];
    size_t nb = 0, want = top < 64 ? top : 64;
    for (uint32_t i = 0; i < p->n_allocs; i++) {
        const hbmi_alloc *al = &p->allocs[i];
        if (al->color != 0 || al->thread_local || al->param_no >= 0) continue;
        for (uint32_t k = 0; k < al->n_peak; k++) {
            uint32_t v = al->peak[k];
            uint64_t sz = p->df->values[v].size;
            size_t at = nb < want ? nb++ : want;
            while (at > 0 && p->df->values[best[at - 1]].size < sz) {
                if (at < want) best[at] = best[at - 1];
                at--;
            }
            if (at < want) best[at] = v;
        }
    }
    char label[160], shape[160];
    for (size_t i = 0; i < nb; i++) {
        const hbmi_value *val = &p->df->values[best[i]];
        const hbmi_instr *in = hbmi_df_instr(p->df, val->gid);
        const hbmi_alloc *al = &p->allocs[p->value_alloc[best[i]]];
        uint64_t pad = tile_padding(p, best[i]);
        fprintf(f, "\n  %zu. Size: %s\n", i + 1, tpu_sz(val->size, a));
        if (in->meta_op_name.n) {
            fprintf(f, "     Operator: op_name=\"");
            for (uint32_t q = 0; q < in->meta_op_name.n; q++) { /* control characters escaped */
                unsigned char ch = (unsigned char)in->meta_op_name.p[q];
                if (ch < 32 || ch == 127) fprintf(f, "\\x%02x", ch);
                else fputc(ch, f);
            }
            fprintf(f, "\"\n");
        }
        hbmi_shape_print(hbmi_shape_node(in->shape, val->node), shape, sizeof shape);
        fprintf(f, "     Shape: %s\n", shape);
        fprintf(f, "     Unpadded size: %s\n", tpu_sz(val->size - pad, a));
        fprintf(f, "     Extra memory due to padding: %s (%.1fx expansion)\n", tpu_sz(pad, a),
                val->size > pad ? (double)val->size / (double)(val->size - pad) : 1.0);
        char nm[128];
        snprintf(nm, sizeof nm, "%.*s", (int)in->name.n, in->name.p);
        instr_line(p, nm, label, sizeof label);
        fprintf(f, "     XLA label: %s\n", label);
        fprintf(f, "     Allocation type: %s\n", hbmi_alloc_is_temp(al) ? "HLO temp"
                                                 : al->constant      ? "global"
                                                                     : "output");
        fprintf(f, "     ==========================\n");
    }
    return ferror(f) ? hbmi_error(HBM_ERR_IO, "plan report: write error") : HBM_OK;
}
