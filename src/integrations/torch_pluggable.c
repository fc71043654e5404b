/* torch_pluggable.c - the PyTorch pluggable-allocator entry points; see hbm/torch.h. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/torch.h"

#define TORCH_MAX_DEVICES 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static hbm_device *devs[TORCH_MAX_DEVICES];
static hbm_allocator *allocs[TORCH_MAX_DEVICES];
static int failed[TORCH_MAX_DEVICES]; /* reported once */
static char config[512];              /* hbm_torch_configure; "" = the environment */
static char oom_path[1024];           /* hbm_torch_oom_report_file; "" = stderr only */

hbm_status hbm_torch_configure(const char *text) {
    hbm_config c;
    if (text) {
        if (strlen(text) >= sizeof config)
            return hbmi_error(HBM_ERR_INVALID, "hbm_torch: configuration longer than %zu bytes", sizeof config - 1);
        hbm_status s = hbm_config_resolve(text, &c);
        if (s) return s;
    }
    pthread_mutex_lock(&mu);
    int open = 0;
    for (int i = 0; i < TORCH_MAX_DEVICES; i++) open |= allocs[i] != NULL;
    if (!open) snprintf(config, sizeof config, "%s", text ? text : "");
    pthread_mutex_unlock(&mu);
    if (open)
        return hbmi_error(HBM_ERR_INVALID, "hbm_torch: an allocator is already open; configure before the first "
                                           "CUDA allocation (or after hbm_torch_shutdown)");
    return HBM_OK;
}

hbm_status hbm_torch_oom_report_file(const char *path) {
    if (path && strlen(path) >= sizeof oom_path)
        return hbmi_error(HBM_ERR_INVALID, "hbm_torch: OOM report path longer than %zu bytes", sizeof oom_path - 1);
    pthread_mutex_lock(&mu);
    snprintf(oom_path, sizeof oom_path, "%s", path ? path : "");
    pthread_mutex_unlock(&mu);
    return HBM_OK;
}

/* The OOM report into the file set by hbm_torch_oom_report_file, whole (a temporary name,
 * then renamed); stderr says where it went or why it could not. */
static void write_oom_file(hbm_allocator *a) {
    char path[sizeof oom_path], tmp[sizeof oom_path + 8];
    pthread_mutex_lock(&mu);
    snprintf(path, sizeof path, "%s", oom_path);
    pthread_mutex_unlock(&mu);
    if (!path[0]) return;
    static pthread_mutex_t file_mu = PTHREAD_MUTEX_INITIALIZER; /* one writer of the .tmp name */
    pthread_mutex_lock(&file_mu);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    hbm_status s = f ? hbm_oom_report_write(a, f) : HBM_ERR_IO;
    if (f && fclose(f) && !s) s = HBM_ERR_IO;
    if (!s && rename(tmp, path)) s = HBM_ERR_IO;
    if (s) {
        remove(tmp);
        fprintf(stderr, "hbm_torch: could not write the OOM report to %s\n", path);
    } else {
        fprintf(stderr, "hbm_torch: OOM report written to %s\n", path);
    }
    pthread_mutex_unlock(&file_mu);
}

hbm_allocator *hbm_torch_allocator(int device) {
    if (device < 0 || device >= TORCH_MAX_DEVICES) {
        hbmi_error(HBM_ERR_INVALID, "hbm_torch: device %d is out of range [0, %d)", device, TORCH_MAX_DEVICES);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    hbm_allocator *a = allocs[device];
    if (!a) {
        char spec[32];
        snprintf(spec, sizeof spec, "cuda:%d", device);
        hbm_status s = hbm_device_open(spec, &devs[device]);
        if (!s) s = hbm_allocator_open(devs[device], config[0] ? config : NULL, &allocs[device]);
        if (s) {
            if (!failed[device]) {
                fprintf(stderr, "hbm_torch: cannot open an allocator on %s: %s: %s\n", spec, hbm_status_str(s),
                        hbm_last_error());
                failed[device] = 1;
            }
            hbm_device_close(devs[device]);
            devs[device] = NULL;
        }
        a = allocs[device];
    }
    pthread_mutex_unlock(&mu);
    return a;
}

void *hbm_torch_malloc(ssize_t size, int device, struct CUstream_st *stream) {
    if (size <= 0) return NULL;
    hbm_allocator *a = hbm_torch_allocator(device);
    if (!a) return NULL;
    uint64_t addr;
    hbm_status s = hbm_alloc_stream(a, (uint64_t)size, NULL, (uint64_t)(uintptr_t)stream, &addr);
    if (s == HBM_ERR_OOM) {
        hbm_oom_report_write(a, stderr);
        write_oom_file(a);
        return NULL;
    }
    if (s) {
        fprintf(stderr, "hbm_torch_malloc(%zd, cuda:%d): %s: %s\n", size, device, hbm_status_str(s), hbm_last_error());
        return NULL;
    }
    return (void *)(uintptr_t)addr;
}

void hbm_torch_free(void *ptr, ssize_t size, int device, struct CUstream_st *stream) {
    if (!ptr) return;
    hbm_allocator *a = hbm_torch_allocator(device);
    if (!a) return;
    hbm_status s = hbm_free_stream(a, (uint64_t)(uintptr_t)ptr, (uint64_t)(uintptr_t)stream);
    if (s) fprintf(stderr, "hbm_torch_free(%p, %zd, cuda:%d): %s: %s\n", ptr, size, device, hbm_status_str(s), hbm_last_error());
}

void hbm_torch_shutdown(void) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < TORCH_MAX_DEVICES; i++) {
        hbm_allocator_close(allocs[i]);
        hbm_device_close(devs[i]);
        allocs[i] = NULL, devs[i] = NULL, failed[i] = 0;
    }
    pthread_mutex_unlock(&mu);
}
