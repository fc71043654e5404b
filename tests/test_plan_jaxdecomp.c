/* test_plan_jaxdecomp.c - real scheduled XLA modules with the bytes XLA reported
 * (HBM_SHARED_DATA/hlo/jaxdecomp/truth.csv): argument, output and temp sizes must match
 * byte for byte on every module. Skips when the data is absent. */
#include <stdlib.h>

#include "test.h"

static int checked;

static void test_truth(void) {
    const char *dir = HBM_SHARED_DATA "/hlo/jaxdecomp";
    char path[4096];
    snprintf(path, sizeof path, "%s/truth.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) TEST_SKIP("%s not found (the shared data set is absent)", path);
    char line[1024];
    int header = 1;
    while (fgets(line, sizeof line, f)) {
        if (header) {
            header = 0;
            CHECK_CONTAINS(line, "name,argument_size_in_bytes,output_size_in_bytes,temp_size_in_bytes");
            continue;
        }
        char name[512];
        unsigned long long arg, out, temp;
        if (sscanf(line, "%511[^,],%llu,%llu,%llu", name, &arg, &out, &temp) != 4) continue;
        snprintf(path, sizeof path, "%s/%s.hlo", dir, name);
        hbm_hlo_module *m;
        hbm_status s = hbm_hlo_parse_file(path, &m);
        if (s) fprintf(stderr, "%s: %s\n", name, hbm_last_error());
        CHECK_OK(s);
        hbm_plan *p;
        s = hbm_plan_run(m, NULL, &p);
        if (s) fprintf(stderr, "%s: %s\n", name, hbm_last_error());
        CHECK_OK(s);
        hbm_plan_stats st;
        CHECK_OK(hbm_plan_get_stats(p, &st));
        if (st.argument_size_in_bytes != arg || st.output_size_in_bytes != out || st.temp_size_in_bytes != temp)
            fprintf(stderr, "%s: hbm %llu/%llu/%llu, XLA %llu/%llu/%llu\n", name,
                    (unsigned long long)st.argument_size_in_bytes, (unsigned long long)st.output_size_in_bytes,
                    (unsigned long long)st.temp_size_in_bytes, arg, out, temp);
        CHECK_EQ_U64(st.argument_size_in_bytes, arg);
        CHECK_EQ_U64(st.output_size_in_bytes, out);
        CHECK_EQ_U64(st.temp_size_in_bytes, temp);
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
        checked++;
    }
    fclose(f);
    CHECK(checked >= 10);
}

int main(void) {
    RUN(test_truth);
    fprintf(stderr, "%d modules match XLA byte for byte\n", checked);
    return test_done();
}
