/* bench_plan.c - parse + plan speed and memory on generated transformer-like HLO modules
 * of 5, 20 and 50 MB, shaped like real XLA GPU dumps: per layer one weight parameter, two
 * cuBLAS gemm custom calls (tuple with a workspace, JSON backend_config), five fusions each
 * with its own 9-instruction fused computation, JAX metadata on every instruction. Prints MB/s (median of runs; in wall-clock and in CPU time), the ratio against a memchr line
 * scan of the same text in the same process, and the peak extra resident memory of
 * parse + plan (measured in a forked child) as a multiple of the input size. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hbm/hbm.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

/* One layer as XLA prints a GPU transformer block after optimizations: every fusion has
 * its own fused computation (as in real dumps), gemms are cuBLAS custom calls with a
 * workspace and a backend_config, every instruction carries JAX metadata. */
static void layer(sbuf *b, size_t L, const char **prev, char *prevbuf) {
    const char *T = "bf16[4096,1024]{1,0}";
    char md[600];
    const char *ops[] = {"attention/q_proj", "attention/softmax", "mlp/gelu", "residual/add", "layer_norm/scale"};
    /* fused computations of this layer */
    for (int f = 0; f < 5; f++) {
        snprintf(md, sizeof md,
                 "metadata={op_name=\"jit(train_step)/jit(main)/jvp(transformer)/decoder/layers_%zu/%s/mul\" "
                 "source_file=\"/home/user/project/src/model/transformer.py\" source_line=%d}",
                 L, ops[f], 100 + f * 7);
        put(b, "%%fused_computation.%zu.%d (param_0.%zu%d: bf16[4096,1024], param_1.%zu%d: bf16[4096,1024]) -> bf16[4096,1024] {\n",
            L, f, L, f, L, f);
        put(b, "  %%param_0.%zu%d = %s parameter(0)\n  %%param_1.%zu%d = %s parameter(1)\n", L, f, T, L, f, T);
        put(b, "  %%convert.%zu%d = f32[4096,1024]{1,0} convert(%s %%param_0.%zu%d), %s\n", L, f, T, L, f, md);
        put(b, "  %%constant.%zu%d = f32[] constant(0.5)\n", L, f);
        put(b, "  %%broadcast.%zu%d = f32[4096,1024]{1,0} broadcast(f32[] %%constant.%zu%d), dimensions={}, %s\n", L, f, L, f, md);
        put(b, "  %%multiply.%zu%d = f32[4096,1024]{1,0} multiply(f32[4096,1024]{1,0} %%convert.%zu%d, f32[4096,1024]{1,0} %%broadcast.%zu%d), %s\n",
            L, f, L, f, L, f, md);
        put(b, "  %%tanh.%zu%d = f32[4096,1024]{1,0} tanh(f32[4096,1024]{1,0} %%multiply.%zu%d), %s\n", L, f, L, f, md);
        put(b, "  %%convert.1.%zu%d = %s convert(f32[4096,1024]{1,0} %%tanh.%zu%d), %s\n", L, f, T, L, f, md);
        put(b, "  ROOT %%add.%zu%d = %s add(%s %%convert.1.%zu%d, %s %%param_1.%zu%d), %s\n}\n\n", L, f, T, T, L, f, T, L, f, md);
    }
    (void)prev;
    (void)prevbuf;
}

static void entry_layer(sbuf *b, size_t L, char *prev) {
    const char *T = "bf16[4096,1024]{1,0}";
    char md[600];
    snprintf(md, sizeof md,
             "metadata={op_name=\"jit(train_step)/jit(main)/jvp(transformer)/decoder/layers_%zu/mlp/dense/dot_general"
             "[dimension_numbers=(([1], [0]), ([], [])) precision=None preferred_element_type=bfloat16]\" "
             "source_file=\"/home/user/project/src/model/transformer.py\" source_line=%zu}",
             L, 200 + L % 40);
    put(b, "  %%w.%zu = bf16[1024,1024]{1,0} parameter(%zu), sharding={replicated}, metadata={op_name=\"params['decoder']['layers_%zu']['mlp']['kernel']\"}\n",
        L, L + 1, L);
    char cur[64];
    snprintf(cur, sizeof cur, "%s", prev);
    for (int f = 0; f < 5; f++) {
        if (f == 1 || f == 3) {
            put(b, "  %%gemm.%zu.%d = (%s, s8[4194304]{0}) custom-call(%s %%%s, bf16[1024,1024]{1,0} %%w.%zu), "
                   "custom_call_target=\"__cublas$gemm\", %s, backend_config={\"operation_queue_id\":\"0\",\"wait_on_operation_queues\":[],"
                   "\"gemm_backend_config\":{\"alpha_real\":1,\"beta\":0,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],"
                   "\"rhs_contracting_dimensions\":[\"0\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"alpha_imag\":0,"
                   "\"precision_config\":{\"operand_precision\":[\"DEFAULT\",\"DEFAULT\"],\"algorithm\":\"ALG_UNSET\"},\"epilogue\":\"DEFAULT\","
                   "\"lhs_stride\":\"4194304\",\"rhs_stride\":\"1048576\",\"grad_x\":false,\"grad_y\":false,\"damax_output\":false},"
                   "\"force_earliest_schedule\":false}\n",
                L, f, T, T, cur, L, md);
            put(b, "  %%gte.%zu.%d = %s get-tuple-element((%s, s8[4194304]{0}) %%gemm.%zu.%d), index=0\n", L, f, T, T, L, f);
            snprintf(cur, sizeof cur, "gte.%zu.%d", L, f);
        }
        put(b, "  %%fusion.%zu.%d = %s fusion(%s %%%s, %s %%%s), kind=kLoop, calls=%%fused_computation.%zu.%d, %s\n", L, f, T, T, cur,
            T, prev, L, f, md);
        snprintf(cur, sizeof cur, "fusion.%zu.%d", L, f);
    }
    snprintf(prev, 64, "%s", cur);
}

static char *generate(size_t target, size_t *len, size_t *n_ins) {
    sbuf fused = {malloc(1 << 20), 0, 1 << 20}, entry = {malloc(1 << 20), 0, 1 << 20};
    const char *T = "bf16[4096,1024]{1,0}";
    size_t L = 0, ins = 0;
    char prev[64] = "x";
    put(&entry, "ENTRY %%main.1 (x: bf16[4096,1024]) -> bf16[4096,1024] {\n  %%x = %s parameter(0), metadata={op_name=\"x\"}\n", T);
    ins = 1;
    while (fused.n + entry.n + 256 < target) {
        layer(&fused, L, NULL, NULL);
        entry_layer(&entry, L, prev);
        ins += 5 * 9 + 1 + 5 + 4;
        L++;
    }
    put(&entry, "  ROOT %%out = %s copy(%s %%%s)\n}\n", T, T, prev);
    ins++;
    sbuf b = {malloc(fused.n + entry.n + 512), 0, fused.n + entry.n + 512};
    put(&b, "HloModule jit_train_step, is_scheduled=true, entry_computation_layout={(bf16[4096,1024]{1,0})->bf16[4096,1024]{1,0}}\n\n");
    memcpy(b.p + b.n, fused.p, fused.n);
    b.n += fused.n;
    memcpy(b.p + b.n, entry.p, entry.n);
    b.n += entry.n;
    b.p[b.n] = 0;
    free(fused.p);
    free(entry.p);
    *len = b.n;
    *n_ins = ins;
    return b.p;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* VmRSS or VmHWM of this process in KiB (-1 if unknown) */
static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, k)) v = atol(line + k + 1);
    fclose(f);
    return v;
}

/* reset VmHWM to the current RSS (Linux: write 5 to clear_refs) */
static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

int main(void) {
    const size_t sizes[] = {5, 20, 50};
    printf("%-6s %10s %8s %10s %8s %8s %8s %11s %7s\n", "size", "instrs", "temp", "parse+plan", "MB/s", "cpu MB/s",
           "vs-scan", "peak-extra", "x-input");
    for (size_t si = 0; si < 3; si++) {
        size_t len, n_ins;
        char *text = generate(sizes[si] << 20, &len, &n_ins);
        double mb = (double)len / (1 << 20);
        /* memory: peak extra RSS of parse + plan in a child that already holds the text */
        long extra_kb = -1;
        int pipefd[2];
        if (pipe(pipefd) == 0) {
            pid_t pid = fork();
            if (pid == 0) {
                volatile char sum = 0;
                for (size_t i = 0; i < len; i += 4096) sum = (char)(sum + text[i]);
                long before = reset_peak() ? status_kb("VmRSS:") : -1;
                hbm_hlo_module *m;
                hbm_plan *p;
                long extra = -1;
                if (!hbm_hlo_parse(text, len, "bench", &m) && !hbm_plan_run(m, NULL, &p)) {
                    long hwm = status_kb("VmHWM:");
                    extra = before >= 0 && hwm >= 0 ? hwm - before : -1;
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
        double t[5], scan[5], cpu[5];
        uint64_t temp = 0;
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            size_t lines = 0;
            for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + len - p))); p++) lines++;
            scan[r] = now() - t0;
            if (!lines) return 1;
            t0 = now();
            double c0 = cpu_now();
            hbm_hlo_module *m;
            hbm_plan *p;
            if (hbm_hlo_parse(text, len, "bench", &m) || hbm_plan_run(m, NULL, &p)) {
                fprintf(stderr, "bench: %s\n", hbm_last_error());
                return 1;
            }
            t[r] = now() - t0;
            cpu[r] = cpu_now() - c0;
            hbm_plan_stats st;
            hbm_plan_get_stats(p, &st);
            temp = st.temp_size_in_bytes;
            hbm_plan_free(p);
            hbm_hlo_module_free(m);
        }
        qsort(t, 5, sizeof *t, cmp_d);
        qsort(scan, 5, sizeof *scan, cmp_d);
        qsort(cpu, 5, sizeof *cpu, cmp_d);
        char tb[32];
        printf("%4zuMB %10zu %8s %9.3fs %8.1f %8.1f %7.1fx %9.1fMB %6.2fx\n", sizes[si], n_ins,
               hbm_size_xla((int64_t)temp, tb), t[2], mb / t[2], mb / cpu[2], t[2] / scan[2], extra_kb / 1024.0,
               extra_kb / 1024.0 / mb);
        free(text);
    }
    printf("(MB/s: input MiB / median parse+plan time of 5 runs; cpu MB/s: the same over the median\n"
           " CPU time of this process (what a loaded machine changes less); vs-scan: the time over a\n"
           " memchr line count of the same text; peak-extra: peak RSS (VmHWM) during parse+plan minus the\n"
           " RSS before, in a child that holds the text; x-input: that over the input size.)\n");
    return 0;
}
