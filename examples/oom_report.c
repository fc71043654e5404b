/* oom_report.c - the smallest program that shows hbm's OOM report.
 *
 *   cc oom_report.c $(pkg-config --cflags --libs --static hbm) -o oom_report && ./oom_report
 *
 * A simulated 16 GiB GPU, JAX's default BFC allocator (75 % preallocated), and a buffer
 * that does not fit next to the ones already live. */
#include <hbm/hbm.h>
#include <stdio.h>

int main(void) {
    hbm_device *dev;
    hbm_allocator *a;
    hbm_status s = hbm_device_open("sim:16GiB", &dev);
    if (s == HBM_OK) s = hbm_allocator_open(dev, "allocator=bfc", &a);
    if (s != HBM_OK) {
        fprintf(stderr, "%s: %s\n", hbm_status_str(s), hbm_last_error());
        return 1;
    }
    uint64_t weights, acts, logits;
    hbm_tag w = {.op_name = "params", .shape = "f32[2147483648]", .category = HBM_CAT_WEIGHT};
    hbm_tag x = {.op_name = "jit(step)/mlp/dot_general", .shape = "bf16[64,2048,16384]",
                 .source_file = "model.py", .source_line = 57, .category = HBM_CAT_ACTIVATION};
    hbm_tag l = {.op_name = "jit(step)/lm_head/dot_general", .shape = "f32[64,2048,8192]",
                 .source_file = "model.py", .source_line = 91, .category = HBM_CAT_ACTIVATION};
    hbm_alloc(a, 8ull << 30, &w, &weights);
    hbm_alloc(a, 4ull << 30, &x, &acts);
    if (hbm_alloc(a, 4ull << 30, &l, &logits) == HBM_ERR_OOM) hbm_oom_report_write(a, stdout);
    hbm_stats st;
    hbm_stats_get(a, &st);
    hbm_stats_write_json(&st, stdout);
    printf("\n");
    hbm_allocator_close(a);
    hbm_device_close(dev);
    return 0;
}
