/* test_proto_xprof.c - the shared XProf profile (HBM_SHARED_DATA/xprof): every truth.csv row
 * reproduced exactly from XLA's own BufferAssignmentProto in the profile, and hbm's own plan
 * of each module compared with it; every module's HLO text written from the proto
 * (hbmi_proto_text) plans as the proto does. Skips when the data or protobuf-c is absent. */
#include <stdlib.h>

#include "hlo/hlo_internal.h"
#include "plan/plan_internal.h"
#include "test.h"

static const char *dir = HBM_SHARED_DATA "/xprof";

static void skip_unless_ready(void) {
    if (!hbm_proto_available()) TEST_SKIP("hbm built without protobuf-c");
}

static void test_truth(void) {
    skip_unless_ready();
    char path[4096];
    snprintf(path, sizeof path, "%s/truth.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) TEST_SKIP("%s not found (the shared data set is absent)", path);
    char line[1024];
    int header = 1, rows = 0, same = 0;
    hbm_proto_file *pf = NULL;
    char opened[512] = "";
    while (fgets(line, sizeof line, f)) {
        if (header) {
            header = 0;
            CHECK_CONTAINS(line, "file,module,argument_size_in_bytes,output_size_in_bytes,alias_size_in_bytes,"
                                 "temp_size_in_bytes,constant_size_in_bytes,allocations");
            continue;
        }
        char file[256], mod[256];
        unsigned long long arg, out, alias, temp, cst, nalloc;
        if (sscanf(line, "%255[^,],%255[^,],%llu,%llu,%llu,%llu,%llu,%llu", file, mod, &arg, &out, &alias, &temp, &cst,
                   &nalloc) != 8)
            continue;
        if (strcmp(file, opened)) {
            hbm_proto_close(pf);
            snprintf(path, sizeof path, "%s/%s", dir, file);
            CHECK_OK(hbm_proto_open(path, &pf));
            snprintf(opened, sizeof opened, "%s", file);
        }
        /* truth.csv names modules by module name; where several programs share one
         * (jit__normal(5), jit__normal(13)), which hbm_proto_find refuses to guess, its row
         * is the last compiled, the highest program id */
        size_t i = hbm_proto_module_count(pf);
        hbm_proto_module_info mi, best = {0};
        for (size_t k = 0; k < hbm_proto_module_count(pf); k++)
            if (!hbm_proto_module(pf, k, &mi) && !strcmp(mi.module_name, mod) &&
                (i == hbm_proto_module_count(pf) || mi.program_id > best.program_id))
                i = k, best = mi;
        CHECK(i < hbm_proto_module_count(pf));
        if (i == hbm_proto_module_count(pf)) continue;
        CHECK_OK(hbm_proto_module(pf, i, &mi));
        CHECK(mi.has_assignment);
        /* the listing's figures ... */
        CHECK_EQ_U64(mi.xla.argument_size_in_bytes, arg);
        CHECK_EQ_U64(mi.xla.output_size_in_bytes, out);
        CHECK_EQ_U64(mi.xla.alias_size_in_bytes, alias);
        CHECK_EQ_U64(mi.xla.temp_size_in_bytes, temp);
        CHECK_EQ_U64(mi.xla.constant_size_in_bytes, cst);
        CHECK_EQ_U64(mi.xla.n_allocations, nalloc);
        /* ... and the loaded module's */
        hbm_hlo_module *m;
        CHECK_OK(hbm_proto_load(pf, i, &m));
        hbm_xla_stats xs;
        CHECK_OK(hbm_hlo_xla_stats(m, &xs));
        CHECK_EQ_U64(xs.argument_size_in_bytes, arg);
        CHECK_EQ_U64(xs.temp_size_in_bytes, temp);
        CHECK_EQ_U64(xs.n_allocations, nalloc);
        CHECK(!xs.has_heap_trace || xs.heap_peak_bytes <= xs.temp_size_in_bytes);
        hbm_plan *p;
        CHECK_OK(hbm_plan_run(m, NULL, &p));
        hbm_plan_stats st;
        CHECK_OK(hbm_plan_get_stats(p, &st));
        int eq = st.argument_size_in_bytes == arg && st.output_size_in_bytes == out && st.alias_size_in_bytes == alias &&
                 st.temp_size_in_bytes == temp && st.constant_size_in_bytes == cst && st.n_allocations == nalloc;
        if (!eq)
            fprintf(stderr, "%s: hbm's own plan %llu/%llu/%llu/%llu/%llu/%zu, XLA's %llu/%llu/%llu/%llu/%llu/%llu\n", mod,
                    (unsigned long long)st.argument_size_in_bytes, (unsigned long long)st.output_size_in_bytes,
                    (unsigned long long)st.alias_size_in_bytes, (unsigned long long)st.temp_size_in_bytes,
                    (unsigned long long)st.constant_size_in_bytes, st.n_allocations, arg, out, alias, temp, cst, nalloc);
        same += eq;
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
        rows++;
    }
    fclose(f);
    hbm_proto_close(pf);
    CHECK(rows == 6);
    fprintf(stderr, "xprof truth: %d of %d modules exact from XLA's assignment; hbm's own plan equals it on %d\n",
            rows, rows, same);
}

/* every module of the profile: its HLO text, parsed by the text parser and planned under the
 * same rules (the backend, and the alignment XLA's assignment showed, which HLO text cannot
 * carry), gives the figures and the peak buffers the proto gives */
static void test_profile_text(void) {
    skip_unless_ready();
    char path[4096];
    snprintf(path, sizeof path, "%s/rocm_te_fused_attn.xplane.pb", dir);
    hbm_proto_file *pf;
    if (hbm_proto_open(path, &pf)) TEST_SKIP("%s: %s", path, hbm_last_error());
    size_t n = hbm_proto_module_count(pf), same = 0;
    for (size_t i = 0; i < n; i++) {
        hbm_hlo_module *m, *t = NULL;
        hbm_plan *pm = NULL, *pt = NULL;
        CHECK_OK(hbm_proto_load(pf, i, &m));
        CHECK_OK(hbm_plan_run(m, NULL, &pm));
        size_t light = m->len;
        CHECK_OK(hbmi_proto_text(m));
        CHECK(m->len > light && !memcmp(m->text, "HloModule ", 10));
        CHECK_OK(hbm_hlo_parse(m->text, m->len, "text", &t));
        hbm_plan_options o;
        hbm_plan_options_default(&o);
        o.backend = pm->opt.backend;
        o.alignment = pm->opt.alignment;
        if (t && !hbm_plan_run(t, &o, &pt)) {
            hbm_plan_stats x, y;
            hbm_plan_get_stats(pm, &x);
            hbm_plan_get_stats(pt, &y);
            int eq = x.argument_size_in_bytes == y.argument_size_in_bytes && x.output_size_in_bytes == y.output_size_in_bytes &&
                     x.alias_size_in_bytes == y.alias_size_in_bytes && x.temp_size_in_bytes == y.temp_size_in_bytes &&
                     x.constant_size_in_bytes == y.constant_size_in_bytes && x.peak_bytes == y.peak_bytes &&
                     x.peak_step == y.peak_step && x.n_allocations == y.n_allocations && x.n_steps == y.n_steps &&
                     hbm_hlo_instruction_count(t) == hbm_hlo_instruction_count(m);
            hbm_plan_buffer ba[15], bb[15];
            size_t na = hbm_plan_peak_buffers(pm, ba, 15), nb = hbm_plan_peak_buffers(pt, bb, 15);
            eq = eq && na == nb;
            for (size_t k = 0; eq && k < na; k++)
                eq = ba[k].size == bb[k].size && !strcmp(ba[k].instruction, bb[k].instruction) &&
                     !strcmp(ba[k].shape, bb[k].shape) && !strcmp(ba[k].op_name, bb[k].op_name) &&
                     !strcmp(ba[k].source_file, bb[k].source_file) && ba[k].source_line == bb[k].source_line;
            if (!eq)
                fprintf(stderr, "%s: proto peak %llu temp %llu, its text peak %llu temp %llu\n", hbm_hlo_module_name(m),
                        (unsigned long long)x.peak_bytes, (unsigned long long)x.temp_size_in_bytes,
                        (unsigned long long)y.peak_bytes, (unsigned long long)y.temp_size_in_bytes);
            same += (size_t)eq;
        }
        hbm_plan_free(pm);
        hbm_plan_free(pt);
        hbm_hlo_module_free(t);
        hbm_hlo_module_free(m);
    }
    hbm_proto_close(pf);
    fprintf(stderr, "xprof modules as HLO text: %zu of %zu plan as their proto does\n", same, n);
    CHECK(n == 9);
    CHECK(same == n);
}

int main(void) {
    RUN(test_truth);
    RUN(test_profile_text);
    return test_done();
}
