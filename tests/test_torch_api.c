/* test_torch_api.c - hbm_torch_malloc / hbm_torch_free (PyTorch's pluggable-allocator ABI)
 * configured from the environment, against the fake driver (or a real GPU). */
#include <unistd.h>

#include "cuda_test.h"

static int fake;

/* Run fn with stderr captured into buf. */
static void capture_stderr(void (*fn)(void *), void *arg, char *buf, size_t cap) {
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, cap - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
}

static void big_alloc(void *out) { *(void **)out = hbm_torch_malloc((ssize_t)40 << 20, 0, NULL); }
static void bad_device(void *out) { *(void **)out = hbm_torch_malloc(4096, 9, NULL); }

static void test_torch(void) {
    setenv("HBM_ALLOCATOR", "vmm", 1);
    setenv("HBM_LIMIT", "64MiB", 1);
    void *p = hbm_torch_malloc(1 << 20, 0, NULL);
    CHECK(p != NULL);
    void *q = hbm_torch_malloc(30 << 20, 0, (struct CUstream_st *)(uintptr_t)0x77);
    CHECK(q != NULL);
    if (fake) ((char *)q)[(30 << 20) - 1] = 1;
    hbm_allocator *a = hbm_torch_allocator(0);
    CHECK(a);
    CHECK_STR(hbm_allocator_name(a), "vmm");
    hbm_stats st;
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_limit, 64u << 20);
    CHECK_EQ_U64(st.num_allocs, 2);
    char buf[16384];
    void *r = (void *)1;
    capture_stderr(big_alloc, &r, buf, sizeof buf);
    CHECK(r == NULL);
    CHECK_CONTAINS(buf, "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 41943040 bytes.");
    CHECK_CONTAINS(buf, "allocator vmm");
    capture_stderr(bad_device, &r, buf, sizeof buf);
    CHECK(r == NULL);
    CHECK_CONTAINS(buf, "cannot open an allocator on cuda:9");
    CHECK(hbm_torch_malloc(0, 0, NULL) == NULL);
    hbm_torch_free(q, 30 << 20, 0, (struct CUstream_st *)(uintptr_t)0x77);
    hbm_torch_free(p, 1 << 20, 0, NULL);
    hbm_torch_free(NULL, 0, 0, NULL);
    CHECK_OK(hbm_stats_get(a, &st));
    CHECK_EQ_U64(st.bytes_in_use, 0);
    CHECK_OK(hbm_check(a));
    hbm_torch_shutdown();
    if (fake) CHECK_EQ_U64(fake_query("maps"), 0);
    /* another policy after a shutdown: cuda_async with TF's variable */
    unsetenv("HBM_ALLOCATOR");
    setenv("TF_GPU_ALLOCATOR", "cuda_malloc_async", 1);
    p = hbm_torch_malloc(1 << 20, 0, NULL);
    CHECK(p != NULL);
    CHECK_STR(hbm_allocator_name(hbm_torch_allocator(0)), "cuda_async");
    hbm_torch_free(p, 1 << 20, 0, NULL);
    hbm_torch_shutdown();
    unsetenv("TF_GPU_ALLOCATOR");
    unsetenv("HBM_LIMIT");
}

/* hbm_torch_configure and hbm_torch_oom_report_file (the Python package's use_hbm_allocator
 * and dump_on_oom). */
static void test_torch_configure(void) {
    setenv("HBM_ALLOCATOR", "vmm", 1); /* the string wins: the environment is not read */
    CHECK_STATUS(hbm_torch_configure("allocator=nope"), HBM_ERR_CONFIG);
    CHECK_CONTAINS(hbm_last_error(), "nope");
    CHECK_OK(hbm_torch_configure("allocator=platform,limit=8MiB"));
    char path[] = "/tmp/hbm_torch_oom_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    unlink(path);
    CHECK_OK(hbm_torch_oom_report_file(path));
    void *p = hbm_torch_malloc(1 << 20, 0, NULL);
    CHECK(p != NULL);
    CHECK_STR(hbm_allocator_name(hbm_torch_allocator(0)), "platform");
    CHECK_STATUS(hbm_torch_configure(NULL), HBM_ERR_INVALID); /* already open */
    char buf[16384];
    void *r = (void *)1;
    capture_stderr(big_alloc, &r, buf, sizeof buf);
    CHECK(r == NULL);
    CHECK_CONTAINS(buf, "OOM report written to");
    FILE *f = fopen(path, "r");
    CHECK(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(path);
    CHECK_CONTAINS(buf, "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 41943040 bytes.");
    hbm_torch_free(p, 1 << 20, 0, NULL);
    hbm_torch_shutdown();
    CHECK_OK(hbm_torch_oom_report_file(NULL));
    CHECK_OK(hbm_torch_configure(NULL));
    p = hbm_torch_malloc(1 << 20, 0, NULL); /* the environment again */
    CHECK(p != NULL);
    CHECK_STR(hbm_allocator_name(hbm_torch_allocator(0)), "vmm");
    hbm_torch_free(p, 1 << 20, 0, NULL);
    hbm_torch_shutdown();
    unsetenv("HBM_ALLOCATOR");
}

int main(void) {
    fake = cuda_test_setup();
    RUN(test_torch);
    RUN(test_torch_configure);
    return test_done();
}
