/* bench_plan.c - parse + plan speed and memory on generated transformer-like HLO modules
 * of 5, 20 and 50 MB (scheduled, with the long metadata real JAX dumps carry: cuBLAS gemm
 * custom calls with workspaces, GELU and residual fusions, layer norms, one weight
 * parameter per layer). Prints MB/s (median of runs), the ratio against a memchr line
 * scan of the same text in the same process, and the peak extra resident memory of
 * parse + plan (measured in a forked child) as a multiple of the input size. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hbm/hbm.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = b->cap * 2 + (size_t)k + 1024;
        b->p = realloc(b->p, b->cap);
        if (!b->p) exit(1);
    }
}

static char *generate(size_t target, size_t *len, size_t *n_ins) {
    sbuf b = {malloc(1 << 20), 0, 1 << 20};
    const char *T = "bf16[4096,1024]{1,0}";
    put(&b, "HloModule jit_train_step, is_scheduled=true, entry_computation_layout={(bf16[4096,1024]{1,0})->bf16[4096,1024]{1,0}}\n\n");
    put(&b, "%%fused_gelu (param_0: bf16[4096,1024]) -> bf16[4096,1024] {\n  %%param_0 = %s parameter(0)\n"
            "  %%tanh.1 = %s tanh(%s %%param_0)\n  ROOT %%multiply.1 = %s multiply(%s %%param_0, %s %%tanh.1)\n}\n\n",
        T, T, T, T, T, T);
    put(&b, "%%fused_add (param_0.1: bf16[4096,1024], param_1.1: bf16[4096,1024]) -> bf16[4096,1024] {\n"
            "  %%param_0.1 = %s parameter(0)\n  %%param_1.1 = %s parameter(1)\n"
            "  ROOT %%add.1 = %s add(%s %%param_0.1, %s %%param_1.1)\n}\n\n",
        T, T, T, T, T);
    put(&b, "%%fused_norm (param_0.2: bf16[4096,1024]) -> bf16[4096,1024] {\n  %%param_0.2 = %s parameter(0)\n"
            "  %%c = bf16[] constant(0.5)\n  %%bc = %s broadcast(bf16[] %%c), dimensions={}\n"
            "  ROOT %%n = %s multiply(%s %%param_0.2, %s %%bc)\n}\n\n",
        T, T, T, T, T);
    put(&b, "ENTRY %%main.1 (x: bf16[4096,1024]) -> bf16[4096,1024] {\n  %%x = %s parameter(0), metadata={op_name=\"x\"}\n", T);
    size_t ins = 4 + 4 + 4 + 1, layer = 0;
    const char *prev = "x";
    char prevbuf[64], h[64];
    while (b.n < target) {
        const char *md = "metadata={op_name=\"jit(train_step)/jit(main)/transformer/decoder/layer_%zu/%s\" "
                         "source_file=\"/home/user/project/model/transformer.py\" source_line=%zu}";
        char m1[512], m2[512], m3[512], m4[512];
        snprintf(m1, sizeof m1, md, layer, "mlp/dense/dot_general[dimension_numbers=(([1], [0]), ([], [])) precision=None preferred_element_type=bfloat16]", 100 + layer % 50);
        snprintf(m2, sizeof m2, md, layer, "mlp/gelu/tanh", 140);
        snprintf(m3, sizeof m3, md, layer, "residual/add", 160);
        snprintf(m4, sizeof m4, md, layer, "layer_norm/mul", 170);
        put(&b, "  %%w.%zu = bf16[1024,1024]{1,0} parameter(%zu), sharding={replicated}, metadata={op_name=\"params['layer_%zu']['kernel']\"}\n", layer, layer + 1, layer);
        put(&b, "  %%nrm.%zu = %s fusion(%s %%%s), kind=kLoop, calls=%%fused_norm, %s\n", layer, T, T, prev, m4);
        put(&b, "  %%gemm.%zu = (%s, s8[4194304]{0}) custom-call(%s %%nrm.%zu, bf16[1024,1024]{1,0} %%w.%zu), "
                "custom_call_target=\"__cublas$gemm\", %s, backend_config={\"operation_queue_id\":\"0\",\"wait_on_operation_queues\":[],"
                "\"gemm_backend_config\":{\"alpha_real\":1,\"beta\":0,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],"
                "\"rhs_contracting_dimensions\":[\"0\"]},\"epilogue\":\"DEFAULT\",\"grad_x\":false,\"grad_y\":false}}\n",
            layer, T, T, layer, layer, m1);
        put(&b, "  %%gte.%zu = %s get-tuple-element((%s, s8[4194304]{0}) %%gemm.%zu), index=0\n", layer, T, T, layer);
        put(&b, "  %%gelu.%zu = %s fusion(%s %%gte.%zu), kind=kLoop, calls=%%fused_gelu, %s\n", layer, T, T, layer, m2);
        snprintf(h, sizeof h, "res.%zu", layer);
        put(&b, "  %%%s = %s fusion(%s %%gelu.%zu, %s %%%s), kind=kLoop, calls=%%fused_add, %s\n", h, T, T, layer, T, prev, m3);
        snprintf(prevbuf, sizeof prevbuf, "%s", h);
        prev = prevbuf;
        ins += 6;
        layer++;
    }
    put(&b, "  ROOT %%out = %s copy(%s %%%s)\n}\n", T, T, prev);
    *len = b.n;
    *n_ins = ins + 1;
    return b.p;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long maxrss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(void) {
    const size_t sizes[] = {5, 20, 50};
    printf("%-6s %10s %8s %10s %10s %9s %12s %8s\n", "size", "instrs", "temp", "parse+plan", "MB/s", "vs-scan", "peak-extra", "x-input");
    for (size_t si = 0; si < 3; si++) {
        size_t len, n_ins;
        char *text = generate(sizes[si] << 20, &len, &n_ins);
        double mb = (double)len / (1 << 20);
        double t[5], scan[5];
        uint64_t temp = 0;
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            size_t lines = 0;
            for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + len - p))); p++) lines++;
            scan[r] = now() - t0;
            if (!lines) return 1;
            t0 = now();
            hbm_hlo_module *m;
            hbm_plan *p;
            if (hbm_hlo_parse(text, len, "bench", &m) || hbm_plan_run(m, NULL, &p)) {
                fprintf(stderr, "bench: %s\n", hbm_last_error());
                return 1;
            }
            t[r] = now() - t0;
            hbm_plan_stats st;
            hbm_plan_get_stats(p, &st);
            temp = st.temp_size_in_bytes;
            hbm_plan_free(p);
            hbm_hlo_module_free(m);
        }
        qsort(t, 5, sizeof *t, cmp_d);
        qsort(scan, 5, sizeof *scan, cmp_d);
        /* memory: peak extra RSS of parse + plan in a child that already holds the text */
        long extra_kb = -1;
        int pipefd[2];
        if (pipe(pipefd) == 0) {
            pid_t pid = fork();
            if (pid == 0) {
                volatile char sum = 0;
                for (size_t i = 0; i < len; i += 4096) sum = (char)(sum + text[i]);
                long before = maxrss_kb();
                hbm_hlo_module *m;
                hbm_plan *p;
                long extra = -1;
                if (!hbm_hlo_parse(text, len, "bench", &m) && !hbm_plan_run(m, NULL, &p)) {
                    extra = maxrss_kb() - before;
                    hbm_plan_free(p);
                    hbm_hlo_module_free(m);
                }
                if (write(pipefd[1], &extra, sizeof extra) != (ssize_t)sizeof extra) _exit(1);
                _exit(0);
            }
            close(pipefd[1]);
            if (read(pipefd[0], &extra_kb, sizeof extra_kb) != (ssize_t)sizeof extra_kb) extra_kb = -1;
            close(pipefd[0]);
            waitpid(pid, NULL, 0);
        }
        char tb[32];
        printf("%4zuMB %10zu %8s %9.3fs %10.1f %8.1fx %10.1fMB %7.2fx\n", sizes[si], n_ins, hbm_size_xla((int64_t)temp, tb), t[2],
               mb / t[2], t[2] / scan[2], extra_kb / 1024.0, extra_kb / 1024.0 / mb);
        free(text);
    }
    printf("(MB/s: input MiB / median parse+plan time of 5 runs; vs-scan: that time over a memchr\n"
           " line count of the same text; peak-extra: growth of peak RSS during parse+plan.)\n");
    return 0;
}
