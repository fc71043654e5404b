/* test_cuda_nodriver.c - without a CUDA driver, cuda:<n> fails with a clear status. */
#include "test.h"

static void test_nodriver(void) {
    setenv("HBM_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    hbm_device *d = (hbm_device *)1;
    CHECK_STATUS(hbm_device_open("cuda:0", &d), HBM_ERR_NOT_AVAILABLE);
    CHECK(d == NULL);
    CHECK_CONTAINS(hbm_last_error(), "device 'cuda:0': no CUDA driver: cannot load /nonexistent/libcuda.so.1");
    /* the result is kept: a second open says the same, cheaply */
    CHECK_STATUS(hbm_device_open("cuda:1", &d), HBM_ERR_NOT_AVAILABLE);
    CHECK_CONTAINS(hbm_last_error(), "no CUDA driver");
    CHECK(hbm_torch_malloc(4096, 0, NULL) == NULL);
}

int main(void) {
    RUN(test_nodriver);
    return test_done();
}
