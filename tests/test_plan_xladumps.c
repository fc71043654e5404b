/* test_plan_xladumps.c - a real JAX application's modules, GPU and CPU, each with the
 * allocations XLA itself assigned (HBM_SHARED_DATA/hlo/xladumps/truth.csv): how many of them
 * hbm plans exactly (argument, output and temp bytes; XLA's "Total bytes used"), overall and
 * per construct. Every module must be exact; renamed (no backend in the file name), each must
 * be read as the compiler that made it or said to be assumed. Skips when the data is absent. */
#include <stdlib.h>

#include "core/internal.h"
#include "plan/plan_internal.h"
#include "test.h"

enum { K_ALL, K_GPU, K_CPU, K_CMDBUF, K_CALL, K_ALLREDUCE, K_WHILE, K_COND, K_SORT, K_CUSTOM, K_ASYNC, K_N };
static const char *const kind_name[K_N] = {"all modules", "GPU",         "CPU",          "command buffers",
                                           "call",        "all-reduce",  "while loops",  "conditionals",
                                           "sort",        "custom calls", "async pairs"};
static const char *const kind_pattern[K_N] = {NULL,     NULL,         NULL,          "command_buffer", " call(",
                                              "all-reduce", " while(", " conditional(", " sort(",      " custom-call(",
                                              "-start("};
static int total[K_N], exact[K_N], total_bytes_exact, consistent;
/* renamed (no backend in the file name): [GPU, CPU module] x [read as GPU, as CPU, assumed] */
static int renamed[2][3];

static void test_corpus(void) {
    const char *dir = HBM_SHARED_DATA "/hlo/xladumps";
    char path[4096];
    snprintf(path, sizeof path, "%s/truth.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) TEST_SKIP("%s not found (the shared data set is absent)", path);
    char line[2048];
    int header = 1;
    while (fgets(line, sizeof line, f)) {
        if (header) {
            header = 0;
            CHECK_CONTAINS(line, "name,backend,argument_size_in_bytes,output_size_in_bytes,temp_size_in_bytes");
            continue;
        }
        char name[512], backend[64];
        unsigned long long arg, out, temp, alias, tb;
        if (sscanf(line, "%511[^,],%63[^,],%llu,%llu,%llu,%llu,%llu", name, backend, &arg, &out, &temp, &alias, &tb) != 7)
            continue;
        snprintf(path, sizeof path, "%s/%s.hlo", dir, name);
        char *text = NULL;
        size_t len = 0;
        CHECK_OK(hbmi_read_file(path, &text, &len));
        hbm_hlo_module *m;
        hbm_status s = hbm_hlo_parse(text, len, path, &m);
        if (s) fprintf(stderr, "%s: %s\n", name, hbm_last_error());
        CHECK_OK(s);
        hbm_plan *p;
        s = hbm_plan_run(m, NULL, &p);
        if (s) fprintf(stderr, "%s: %s\n", name, hbm_last_error());
        CHECK_OK(s);
        hbm_plan_stats st;
        CHECK_OK(hbm_plan_get_stats(p, &st));
        int ok = st.argument_size_in_bytes == arg && st.output_size_in_bytes == out && st.temp_size_in_bytes == temp &&
                 st.alias_size_in_bytes == alias;
        if (!ok)
            fprintf(stderr, "  differs: %s: hbm %llu/%llu/%llu, XLA %llu/%llu/%llu\n", name,
                    (unsigned long long)st.argument_size_in_bytes, (unsigned long long)st.output_size_in_bytes,
                    (unsigned long long)st.temp_size_in_bytes, arg, out, temp);
        total_bytes_exact += st.total_allocation_bytes == tb;
        /* the figures agree with each other: the peak of live bytes fits in what is needed
         * (shared buffers counted once); a negative fragmentation is never printed */
        int agree = st.peak_live_bytes <= st.peak_bytes;
        if (!agree)
            fprintf(stderr, "  inconsistent: %s: peak live %llu, needs %llu, fragmentation %lld / %lld\n", name,
                    (unsigned long long)st.peak_live_bytes, (unsigned long long)st.peak_bytes,
                    (long long)st.temp_fragmentation_bytes, (long long)st.total_fragmentation_bytes);
        consistent += agree;
        int is_cpu = !strncmp(backend, "cpu", 3);
        for (int k = 0; k < K_N; k++) {
            int has = k == K_ALL || (k == K_GPU && !is_cpu) || (k == K_CPU && is_cpu) ||
                      (kind_pattern[k] && strstr(text, kind_pattern[k]));
            if (!has) continue;
            total[k]++;
            exact[k] += ok;
        }
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
        /* the same module renamed: its backend read from its content alone */
        CHECK_OK(hbm_hlo_parse(text, len, "/tmp/renamed/module.hlo", &m));
        CHECK_OK(hbm_plan_run(m, NULL, &p));
        CHECK_OK(hbm_plan_get_stats(p, &st));
        int col = !p->backend_evidence ? 2 : st.backend == HBM_BACKEND_CPU ? 1 : 0;
        renamed[is_cpu][col]++;
        if (col == (is_cpu ? 0 : 1)) fprintf(stderr, "  renamed %s: read as %s\n", name, hbm_backend_str(st.backend));
        if (col == 1) /* planned with CPU rules: XLA:CPU's figures */
            CHECK(st.temp_size_in_bytes == temp && st.output_size_in_bytes == out && st.argument_size_in_bytes == arg);
        hbm_plan_free(p);
        hbm_hlo_module_free(m);
        hbmi_free(text);
    }
    fclose(f);
    CHECK(total[K_ALL] >= 1000);
    fprintf(stderr, "%-16s %7s %7s\n", "modules with", "exact", "of");
    for (int k = 0; k < K_N; k++)
        fprintf(stderr, "%-16s %7d %7d  (%.2f %%)\n", kind_name[k], exact[k], total[k],
                total[k] ? 100.0 * exact[k] / total[k] : 0.0);
    fprintf(stderr, "%-16s %7d %7d\n", "total_bytes", total_bytes_exact, total[K_ALL]);
    fprintf(stderr, "%-16s %7d %7d\n", "consistent", consistent, total[K_ALL]);
    fprintf(stderr, "renamed: GPU modules read as GPU %d, CPU %d, assumed GPU %d; CPU modules read as GPU %d, CPU %d, "
                    "assumed GPU %d\n",
            renamed[0][0], renamed[0][1], renamed[0][2], renamed[1][0], renamed[1][1], renamed[1][2]);
    CHECK(renamed[0][1] == 0 && renamed[1][0] == 0); /* never the wrong compiler read from the content */
    CHECK(renamed[0][0] == total[K_GPU]);
    CHECK(renamed[1][1] >= 10); /* XLA:CPU's parallel loops, unwrapped ops, fusion names */
    CHECK(exact[K_ALL] == total[K_ALL]);
    CHECK(exact[K_ALL] * 1000 >= total[K_ALL] * 995);
    CHECK(total_bytes_exact * 1000 >= total[K_ALL] * 995);
    CHECK(exact[K_CPU] == total[K_CPU]);
    CHECK(consistent == total[K_ALL]);
}

int main(void) {
    RUN(test_corpus);
    return test_done();
}
