/* test_proto_xprof.c - the shared XProf profile (HBM_SHARED_DATA/xprof): every truth.csv row
 * reproduced exactly from XLA's own BufferAssignmentProto in the profile, and hbm's own plan
 * of each module compared with it. Skips when the data or protobuf-c is absent. */
#include <stdlib.h>

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
        size_t i;
        CHECK_OK(hbm_proto_find(pf, mod, &i));
        hbm_proto_module_info mi;
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

int main(void) {
    RUN(test_truth);
    return test_done();
}
