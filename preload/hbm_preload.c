/* hbm_preload.c - the LD_PRELOAD library of `hbm run`: watches an unmodified program's
 * device allocations, records them, and enforces an optional limit with hbm's OOM report.
 *
 * Intercepted: the runtime's cudaMalloc / cudaFree / cudaMallocAsync / cudaFreeAsync /
 * cudaStreamSynchronize / cudaDeviceSynchronize (by symbol interposition), and the driver's
 * cuMemAlloc_v2 / cuMemFree_v2 / cuMemAllocAsync / cuMemFreeAsync / cuMemAllocFromPoolAsync /
 * cuStreamSynchronize / cuCtxSynchronize (and their _ptsz forms) however the program
 * reaches them: linked directly, through dlsym(), or through cuGetProcAddress(), which is
 * how CUDA 12+ runtimes and XLA find driver entry points. A runtime call is recorded once:
 * the driver calls it makes inside are passed through (a per-thread depth counter).
 *
 * Every admitted allocation is mirrored in a model: hbm's platform allocator on a sim
 * device of the --limit's size, so a refused allocation gets hbm's OOM report (with the
 * live buffers, labelled by API) and the summary's numbers come from hbm's stats.
 *
 * The trace (HBM_RUN_TRACE=FILE) is hbm's trace format (docs/trace-format.md), streamed
 * through hbm_trace_writer: alloc / free / oom / sync events with time, address, size,
 * stream, thread and a tag whose label is the API called, and the device the program
 * allocated on (its name, index and total bytes, as the driver reports them). The first process of the run
 * that touches device memory creates FILE (O_EXCL: hbm run removed any old one); another
 * process (a child that execs) writes FILE.<pid>. A forked child stops recording (the
 * buffer is flushed before the fork, so nothing is written twice). Everything is written
 * under one lock; at exit the destructor flushes and closes the file.
 *
 * Environment (set by hbm run): HBM_RUN_TRACE=FILE, HBM_RUN_TRACE_TMP=the name the first
 * process writes FILE under (hbm run renames it when the program ends), HBM_RUN_LIMIT=bytes
 * (0 or unset: no limit), HBM_RUN_QUIET=1 (no summary), HBM_RUN_SEEN=a file each
 * process that uses CUDA appends a byte to (hbm run says so when none did).
 * Virtual memory (cuMemCreate / cuMemMap / cuMemUnmap / cuMemRelease: PyTorch's expandable
 * segments, XLA's allocators from 2026 builds) is recorded by its physical memory: an alloc
 * at cuMemCreate of device memory (the handle stands for the address), a free once the
 * handle is released and no longer mapped, which is when the driver gives the memory back.
 * Not intercepted: cuMemAllocManaged, cuMemAllocPitch, cudaMallocManaged/cudaMallocPitch. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "device/cuda_abi.h"
#include "hbm/hbm.h"
#include "trace/trace_internal.h"

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef void *CUmemoryPool;
typedef int cudaError_t;
typedef void *cudaStream_t;
#define OOM_CU 2  /* CUDA_ERROR_OUT_OF_MEMORY */
#define OOM_RT 2  /* cudaErrorMemoryAllocation */

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*aasync_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*fasync_fn)(CUdeviceptr, CUstream);
typedef CUresult (*apool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*ssync_fn)(CUstream);
typedef CUresult (*csync_fn)(void);
typedef void *CUcontext;
typedef CUresult (*csync2_fn)(CUcontext); /* cuCtxSynchronize from CUDA 13 (version 13000) */
typedef unsigned long long CUmemHandle; /* CUmemGenericAllocationHandle */
typedef CUresult (*create_fn)(CUmemHandle *, size_t, const hbmi_CUmemAllocationProp *, unsigned long long);
typedef CUresult (*mrelease_fn)(CUmemHandle);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemHandle, unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*gpa1_fn)(const char *, void **, int, unsigned long long);
typedef CUresult (*gpa2_fn)(const char *, void **, int, unsigned long long, int *);
typedef void *(*dlsym_fn)(void *, const char *);

/* ---- state ------------------------------------------------------------------------------ */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* Held across a free's driver call and its recording, and by an allocation's recording:
 * once the driver has freed an address another thread may get it back, and its alloc
 * must not be recorded before this free. Lock order: order_mu, then mu. */
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread int depth; /* >0: inside an intercepted call; pass through */
static __thread uint32_t thread_no; /* 1, 2, ... in order of first event (under mu) */
static uint32_t threads;
static hbm_device *mdev;
static hbm_allocator *model;
static hbmi_map addrs; /* real address -> model address */
static hbmi_map sizes; /* real address -> bytes requested */
static hbmi_map handles; /* cuMemCreate handle recorded -> its mappings, | RELEASED once released */
static hbmi_map mapped;  /* address a handle is mapped at -> the handle */
static hbmi_map mapsize; /* that address -> bytes mapped */
#define RELEASED (1ull << 63)
static hbm_trace_writer *tw; /* NULL: no trace */
static uint64_t t0, n_events;
static uint64_t limit, cur_bytes, peak_bytes, n_allocs, n_frees, n_ooms, n_refused;
static int quiet;
static atomic_int ready;
static char trace_path[600];
static dlsym_fn real_dlsym_p;

/* Every API the trace names; tag id = index + 1, label = the API. */
static const char *const apis[] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemFreeAsync",
                                   "cuMemAllocFromPoolAsync", "cuStreamSynchronize", "cuCtxSynchronize",
                                   "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync",
                                   "cudaStreamSynchronize", "cudaDeviceSynchronize", "cuMemCreate", "cuMemRelease",
                                   "cuMemUnmap"};
#define NAPIS (sizeof apis / sizeof apis[0])

static dlsym_fn real_dlsym(void) {
    if (!real_dlsym_p) {
        real_dlsym_p = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!real_dlsym_p) real_dlsym_p = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    return real_dlsym_p;
}
static void *next_sym(const char *name) { return real_dlsym() ? real_dlsym()(RTLD_NEXT, name) : NULL; }

/* The trace's device, as the driver reports it for the context current on this thread:
 * meta records device (cuDeviceGetName), device_index (cuCtxGetDevice) and device_bytes
 * (cuDeviceTotalMem_v2), docs/trace-format.md. Asked once, by the first allocation that
 * succeeded (the program's context exists then), outside hbm's locks (dlopen takes the
 * loader's); the driver is the one the program loaded ($HBM_CUDA_DRIVER, else
 * libcuda.so.1), not loaded again. The records go in before the next event; when the
 * driver cannot say, the trace names no device. */
typedef CUresult (*ctxdev_fn)(int *);
typedef CUresult (*devname_fn)(char *, int, int);
typedef CUresult (*devtotal_fn)(size_t *, int);
static atomic_int device_state; /* 0 not asked, 1 being asked, 2 answered */
static char device_name[64];
static int device_ord = -1;
static uint64_t device_total;
static int device_written; /* (mu) */

static void ask_device(void) {
    int expect = 0;
    if (atomic_load(&device_state) || !atomic_compare_exchange_strong(&device_state, &expect, 1)) return;
    const char *path = getenv("HBM_CUDA_DRIVER");
    void *h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h && real_dlsym()) {
        ctxdev_fn ctxdev = (ctxdev_fn)real_dlsym()(h, "cuCtxGetDevice");
        devname_fn devname = (devname_fn)real_dlsym()(h, "cuDeviceGetName");
        devtotal_fn devtotal = (devtotal_fn)real_dlsym()(h, "cuDeviceTotalMem_v2");
        int dev = -1;
        char name[64] = "";
        size_t total = 0;
        if (ctxdev && devname && devtotal && !ctxdev(&dev) && dev >= 0 && dev <= 4096 &&
            !devname(name, (int)sizeof name, dev) && !devtotal(&total, dev) && total) {
            name[sizeof name - 1] = 0;
            if (!*name) snprintf(name, sizeof name, "cuda:%d", dev);
            memcpy(device_name, name, sizeof name);
            device_ord = dev;
            device_total = total;
        }
    }
    if (h) dlclose(h);
    atomic_store(&device_state, 2);
}

/* The device records, once answered (mu held). */
static void write_device(void) {
    device_written = 1;
    if (!device_total) return;
    hbm_status s = hbmi_trace_writer_device(tw, device_name, device_ord, device_total);
    if (s) {
        fprintf(stderr, "hbm run: %s; the trace stops here\n", hbm_last_error());
        hbm_trace_writer_close(tw);
        tw = NULL;
    }
}

/* Append one event (mu held). A write error stops the trace with a message. */
static void emit(hbm_event_kind kind, uint64_t addr, uint64_t size, uint64_t requested, uint64_t stream,
                 const char *api) {
    if (!device_written && tw && atomic_load(&device_state) == 2) write_device();
    if (!tw) return;
    if (!thread_no) thread_no = ++threads;
    uint32_t tag = 0;
    for (uint32_t i = 0; i < NAPIS && !tag; i++)
        if (!strcmp(apis[i], api)) tag = i + 1;
    hbm_trace_event e = {.kind = (uint8_t)kind, .thread = thread_no, .time_ns = hbmi_now_ns() - t0, .addr = addr,
                         .size = size, .requested = requested, .stream = stream, .tag = tag};
    if (hbm_trace_writer_event(tw, &e)) {
        fprintf(stderr, "hbm run: %s; the trace stops here\n", hbm_last_error());
        hbm_trace_writer_close(tw);
        tw = NULL;
        return;
    }
    n_events++;
}

/* Create the trace: FILE for the first process of the run, FILE.<pid> for others. */
static void trace_open(const char *path, const char *tmp) {
    /* the first process writes to hbm run's temporary name (renamed to FILE when the
     * program ends, so an existing FILE is kept until then); it says FILE */
    snprintf(trace_path, sizeof trace_path, "%s", path);
    int fd = open(tmp && *tmp ? tmp : trace_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
        snprintf(trace_path, sizeof trace_path, "%s.%ld", path, (long)getpid());
        fd = open(trace_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (f) setvbuf(f, NULL, _IONBF, 0); /* the writer buffers; stdio then never allocates */
    if (!f) {
        fprintf(stderr, "hbm run: cannot create the trace %s: %s; not writing a trace\n", trace_path, strerror(errno));
        if (fd >= 0) close(fd);
        return;
    }
    hbm_status s = hbmi_trace_writer_fopen(f, trace_path, NULL, limit, &tw);
    if (!s) s = hbmi_trace_writer_meta(tw, "source", "hbm run");
    for (uint32_t i = 0; !s && i < NAPIS; i++) {
        hbm_tag tag = {.label = apis[i]};
        s = hbm_trace_writer_tag(tw, i + 1, &tag);
    }
    if (!s) s = hbm_trace_writer_flush(tw);
    if (s) {
        fprintf(stderr, "hbm run: %s; not writing a trace\n", hbm_last_error());
        hbm_trace_writer_close(tw);
        tw = NULL;
    }
    t0 = hbmi_now_ns();
}

/* fork: the buffer is written before it, so the child has nothing of the parent's to
 * write; the child stops recording (its copy of the file offset is the parent's). */
static void before_fork(void) {
    pthread_mutex_lock(&order_mu);
    pthread_mutex_lock(&mu);
    if (tw) hbm_trace_writer_flush(tw);
}
static void after_fork_parent(void) {
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&order_mu);
}
static void after_fork_child(void) {
    if (tw) hbm_trace_writer_close(tw); /* nothing buffered: closes the child's descriptor only */
    tw = NULL;
    atomic_store(&ready, 0);
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&order_mu);
}

static void setup(void) {
    const char *t = getenv("HBM_RUN_TRACE"), *l = getenv("HBM_RUN_LIMIT"), *q = getenv("HBM_RUN_QUIET");
    /* tell hbm run that a process of the run uses CUDA (it prints the summary then) */
    const char *seen = getenv("HBM_RUN_SEEN");
    if (seen && *seen) { /* a file, not an inherited descriptor: programs close those */
        int fd = open(seen, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "1", 1) < 0) { /* hbm run then says no allocation was seen */
            }
            close(fd);
        }
    }
    quiet = q && *q && strcmp(q, "0");
    if (l && *l && hbm_size_parse(l, &limit)) {
        fprintf(stderr, "hbm run: HBM_RUN_LIMIT=%s is not a size; no limit\n", l);
        limit = 0;
    }
    char spec[128], cfg[128];
    snprintf(spec, sizeof spec, "sim:%" PRIu64 ",name=hbm run,granularity=512", (uint64_t)(1ull << 60));
    snprintf(cfg, sizeof cfg, "allocator=platform,limit=%" PRIu64 ",report_top=10", limit ? limit : (uint64_t)(1ull << 60));
    hbmi_map_init(&addrs);
    hbmi_map_init(&sizes);
    hbmi_map_init(&handles);
    hbmi_map_init(&mapped);
    hbmi_map_init(&mapsize);
    if (hbm_device_open(spec, &mdev) || hbm_allocator_open(mdev, cfg, &model)) {
        fprintf(stderr, "hbm run: cannot set up the model (%s); not recording\n", hbm_last_error());
        return;
    }
    if (t && *t) trace_open(t, getenv("HBM_RUN_TRACE_TMP"));
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    atomic_store(&ready, 1);
}
static void init(void) { pthread_once(&once, setup); }

__attribute__((destructor)) static void finish(void) {
    pthread_mutex_lock(&mu);
    if (!atomic_load(&ready)) {
        pthread_mutex_unlock(&mu);
        return;
    }
    hbm_status ts = tw ? hbm_trace_writer_close(tw) : HBM_OK;
    if (ts) fprintf(stderr, "hbm run: %s\n", hbm_last_error());
    if (!quiet) {
        char a[32], b[32];
        fprintf(stderr, "hbm run: %" PRIu64 " allocations, %" PRIu64 " frees, peak %s in use (%" PRIu64 " bytes), %s live at exit",
                n_allocs, n_frees, hbm_size_human(peak_bytes, a), peak_bytes, hbm_size_human(cur_bytes, b));
        if (limit) fprintf(stderr, "; %" PRIu64 " refused by --limit %s (%" PRIu64 " bytes)", n_refused, hbm_size_human(limit, a), limit);
        if (n_ooms > n_refused) fprintf(stderr, "; %" PRIu64 " failed in the driver", n_ooms - n_refused);
        if (tw) fprintf(stderr, "; trace %s (%" PRIu64 " events)", trace_path, n_events);
        fprintf(stderr, "\n");
    }
    tw = NULL;
    atomic_store(&ready, 0);
    pthread_mutex_unlock(&mu);
}

/* Admit an allocation into the model; 0 = refused (the OOM report is printed). */
static int admit(size_t n, const char *api, uint64_t stream, uint64_t *maddr) {
    init();
    *maddr = 0;
    if (!atomic_load(&ready) || !n) return 1;
    hbm_tag tag = {.op_name = api, .label = "device allocation"};
    pthread_mutex_lock(&mu);
    hbm_status s = atomic_load(&ready) ? hbm_alloc(model, n, &tag, maddr) : HBM_OK;
    if (s == HBM_ERR_OOM) {
        n_ooms++, n_refused++;
        emit(HBM_EV_OOM, 0, 0, n, stream, api);
        char a[32], b[32], c[32], d[32];
        fprintf(stderr,
                "hbm run: refused %s(%s, %zu bytes): %s in use + %s is past --limit %s (%" PRIu64 " bytes); raising\n"
                "  --limit to at least %s would let it through. The allocator's report:\n",
                api, hbm_size_human(n, a), n, hbm_size_human(cur_bytes, b), a, hbm_size_human(limit, c), limit,
                hbm_size_human(cur_bytes + n, d));
        hbm_oom_report_write(model, stderr);
    } else if (s) {
        *maddr = 0; /* host trouble in the model: let it through unrecorded */
        s = HBM_OK;
    }
    pthread_mutex_unlock(&mu);
    return s == HBM_OK;
}

/* rc: the call's result; 0 = success, OOM_CU (= OOM_RT) = out of memory, others are
 * errors that allocated nothing and are not recorded. */
static void commit(int rc, uint64_t addr, size_t n, uint64_t maddr, const char *api, uint64_t stream) {
    if (!maddr) return;
    if (!rc) ask_device();
    pthread_mutex_lock(&order_mu);
    pthread_mutex_lock(&mu);
    if (!atomic_load(&ready)) {
        /* finished (exit) or forked in between: the model is no longer kept */
    } else if (rc) {
        hbm_free(model, maddr);
        if (rc == OOM_CU) {
            n_ooms++;
            emit(HBM_EV_OOM, 0, 0, n, stream, api);
        }
    } else if (hbmi_map_reserve(&sizes, sizes.count + 1) == HBM_OK && hbmi_map_put(&addrs, addr, maddr) == HBM_OK) {
        hbmi_map_put(&sizes, addr, n);
        n_allocs++;
        cur_bytes += n;
        if (cur_bytes > peak_bytes) peak_bytes = cur_bytes;
        emit(HBM_EV_ALLOC, addr, n, n, stream, api);
    } else {
        hbm_free(model, maddr);
    }
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&order_mu);
}

/* The free of a recorded address (mu held). */
static void release_locked(uint64_t addr, const char *api, uint64_t stream) {
    uint64_t maddr;
    if (atomic_load(&ready) && addr && hbmi_map_del(&addrs, addr, &maddr)) {
        uint64_t n = 0;
        hbmi_map_del(&sizes, addr, &n);
        hbm_free(model, maddr);
        n_frees++;
        cur_bytes -= n;
        emit(HBM_EV_FREE, addr, n, n, stream, api);
    }
}
static void release(uint64_t addr, const char *api, uint64_t stream) {
    if (!atomic_load(&ready) || !addr) return;
    pthread_mutex_lock(&mu);
    release_locked(addr, api, stream);
    pthread_mutex_unlock(&mu);
}

/* A free's driver call runs under order_mu when there is something to record. */
static int free_begin(uint64_t addr) {
    if (!addr || !atomic_load(&ready)) return 0;
    pthread_mutex_lock(&order_mu);
    return 1;
}
static void free_end(int locked) {
    if (locked) pthread_mutex_unlock(&order_mu);
}

/* The host waited for stream (HBM_STREAM_ALL: the device): a sync event for replay. */
static void synced(uint64_t stream, const char *api) {
    if (!atomic_load(&ready)) return;
    pthread_mutex_lock(&mu);
    if (atomic_load(&ready)) emit(HBM_EV_SYNC, 0, 0, 0, stream, api);
    pthread_mutex_unlock(&mu);
}

/* ---- the common paths ---------------------------------------------------------------------- */
static CUresult do_alloc(alloc_fn real, CUdeviceptr *p, size_t n, const char *api) {
    if (!real) return 999;
    if (depth) return real(p, n);
    uint64_t m;
    if (!admit(n, api, 0, &m)) return OOM_CU;
    depth++;
    CUresult r = real(p, n);
    depth--;
    commit(r, r == 0 ? *p : 0, n, m, api, 0);
    return r;
}
static CUresult do_free(free_fn real, CUdeviceptr p, const char *api) {
    if (!real) return 999;
    if (depth) return real(p);
    int locked = free_begin(p);
    depth++;
    CUresult r = real(p);
    depth--;
    if (!r) release(p, api, 0);
    free_end(locked);
    return r;
}
static CUresult do_aasync(aasync_fn real, CUdeviceptr *p, size_t n, CUstream s, const char *api) {
    if (!real) return 999;
    if (depth) return real(p, n, s);
    uint64_t m;
    if (!admit(n, api, (uint64_t)(uintptr_t)s, &m)) return OOM_CU;
    depth++;
    CUresult r = real(p, n, s);
    depth--;
    commit(r, r == 0 ? *p : 0, n, m, api, (uint64_t)(uintptr_t)s);
    return r;
}
static CUresult do_fasync(fasync_fn real, CUdeviceptr p, CUstream s, const char *api) {
    if (!real) return 999;
    if (depth) return real(p, s);
    int locked = free_begin(p);
    depth++;
    CUresult r = real(p, s);
    depth--;
    if (!r) release(p, api, (uint64_t)(uintptr_t)s);
    free_end(locked);
    return r;
}
static CUresult do_apool(apool_fn real, CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s, const char *api) {
    if (!real) return 999;
    if (depth) return real(p, n, pool, s);
    uint64_t m;
    if (!admit(n, api, (uint64_t)(uintptr_t)s, &m)) return OOM_CU;
    depth++;
    CUresult r = real(p, n, pool, s);
    depth--;
    commit(r, r == 0 ? *p : 0, n, m, api, (uint64_t)(uintptr_t)s);
    return r;
}

static CUresult do_ssync(ssync_fn real, CUstream s, const char *api) {
    if (!real) return 999;
    if (depth) return real(s);
    depth++;
    CUresult r = real(s);
    depth--;
    if (!r) synced((uint64_t)(uintptr_t)s, api);
    return r;
}
static CUresult do_csync(csync_fn real, const char *api) {
    if (!real) return 999;
    if (depth) return real();
    depth++;
    CUresult r = real();
    depth--;
    if (!r) synced(HBM_STREAM_ALL, api);
    return r;
}
/* CUDA 13's cuCtxSynchronize takes the context (NULL: the current one); recorded as the
 * context sync it is, on every stream */
static CUresult do_csync2(csync2_fn real, CUcontext c, const char *api) {
    if (!real) return 999;
    if (depth) return real(c);
    depth++;
    CUresult r = real(c);
    depth--;
    if (!r) synced(HBM_STREAM_ALL, api);
    return r;
}

/* Physical memory: recorded at its cuMemCreate (device memory only), freed when its handle is
 * released and unmapped, by whichever call comes last. */
static CUresult do_create(create_fn real, CUmemHandle *h, size_t n, const hbmi_CUmemAllocationProp *prop,
                          unsigned long long flags, const char *api) {
    if (!real) return 999;
    if (depth || !prop || prop->location.type != HBMI_CU_MEM_LOCATION_TYPE_DEVICE) return real(h, n, prop, flags);
    uint64_t m;
    if (!admit(n, api, 0, &m)) return OOM_CU;
    depth++;
    CUresult r = real(h, n, prop, flags);
    depth--;
    commit(r, r == 0 ? *h : 0, n, m, api, 0);
    if (r == 0 && m) {
        pthread_mutex_lock(&mu);
        if (hbmi_map_get(&addrs, *h, &m)) hbmi_map_put(&handles, *h, 0);
        pthread_mutex_unlock(&mu);
    }
    return r;
}
/* the handle's state after a change; its memory freed once released and unmapped (mu held) */
static void handle_set(CUmemHandle h, uint64_t st, const char *api) {
    if (st != RELEASED) {
        hbmi_map_put(&handles, h, st);
        return;
    }
    hbmi_map_del(&handles, h, NULL);
    release_locked(h, api, 0);
}
static CUresult do_mrelease(mrelease_fn real, CUmemHandle h, const char *api) {
    if (!real) return 999;
    if (depth) return real(h);
    int locked = free_begin(h);
    depth++;
    CUresult r = real(h);
    depth--;
    uint64_t st;
    pthread_mutex_lock(&mu);
    if (!r && hbmi_map_get(&handles, h, &st)) handle_set(h, st | RELEASED, api);
    pthread_mutex_unlock(&mu);
    free_end(locked);
    return r;
}
static CUresult do_map(map_fn real, CUdeviceptr p, size_t n, size_t off, CUmemHandle h, unsigned long long fl) {
    if (!real) return 999;
    if (depth) return real(p, n, off, h, fl);
    depth++;
    CUresult r = real(p, n, off, h, fl);
    depth--;
    uint64_t st;
    pthread_mutex_lock(&mu);
    if (!r && hbmi_map_get(&handles, h, &st) && hbmi_map_reserve(&mapsize, mapsize.count + 1) == HBM_OK &&
        hbmi_map_put(&mapped, p, h) == HBM_OK) {
        hbmi_map_put(&mapsize, p, n);
        hbmi_map_put(&handles, h, st + 1);
    }
    pthread_mutex_unlock(&mu);
    return r;
}
/* an unmap may cover several mappings side by side: each one's handle loses a mapping */
static CUresult do_unmap(unmap_fn real, CUdeviceptr p, size_t n, const char *api) {
    if (!real) return 999;
    if (depth) return real(p, n);
    int locked = free_begin(p);
    depth++;
    CUresult r = real(p, n);
    depth--;
    pthread_mutex_lock(&mu);
    for (uint64_t at = p, h, len, st; !r && at < p + n && hbmi_map_get(&mapped, at, &h); at += len ? len : n) {
        len = 0;
        hbmi_map_del(&mapped, at, NULL);
        hbmi_map_del(&mapsize, at, &len);
        if (hbmi_map_get(&handles, h, &st) && (st & ~RELEASED)) handle_set(h, st - 1, api);
    }
    pthread_mutex_unlock(&mu);
    free_end(locked);
    return r;
}

/* ---- wrappers for pointers handed out by dlsym / cuGetProcAddress --------------------------
 * Each kind has a few slots; a slot remembers one real entry point (e.g. cuMemAllocAsync
 * and cuMemAllocAsync_ptsz take two) and its wrapper calls that one. */
#define NSLOT 4
enum { K_ALLOC, K_FREE, K_AASYNC, K_FASYNC, K_APOOL, K_SSYNC, K_CSYNC, K_CSYNC2, K_CREATE, K_MRELEASE, K_MAP, K_UNMAP, K_COUNT };
static void *slot_real[K_COUNT][NSLOT];
static void *slot_wrap[K_COUNT][NSLOT];
static const char *const kind_api[K_COUNT] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemFreeAsync",
                                              "cuMemAllocFromPoolAsync", "cuStreamSynchronize", "cuCtxSynchronize",
                                              "cuCtxSynchronize", "cuMemCreate", "cuMemRelease", "cuMemMap",
                                              "cuMemUnmap"};

#define SLOTS(X) X(0) X(1) X(2) X(3)
#define DEF_WRAPS(i)                                                                                      \
    static CUresult w_alloc_##i(CUdeviceptr *p, size_t n) { return do_alloc((alloc_fn)slot_real[K_ALLOC][i], p, n, kind_api[K_ALLOC]); } \
    static CUresult w_free_##i(CUdeviceptr p) { return do_free((free_fn)slot_real[K_FREE][i], p, kind_api[K_FREE]); } \
    static CUresult w_aasync_##i(CUdeviceptr *p, size_t n, CUstream s) {                                  \
        return do_aasync((aasync_fn)slot_real[K_AASYNC][i], p, n, s, kind_api[K_AASYNC]);                 \
    }                                                                                                     \
    static CUresult w_fasync_##i(CUdeviceptr p, CUstream s) {                                             \
        return do_fasync((fasync_fn)slot_real[K_FASYNC][i], p, s, kind_api[K_FASYNC]);                    \
    }                                                                                                     \
    static CUresult w_apool_##i(CUdeviceptr *p, size_t n, CUmemoryPool pl, CUstream s) {                  \
        return do_apool((apool_fn)slot_real[K_APOOL][i], p, n, pl, s, kind_api[K_APOOL]);                 \
    }                                                                                                     \
    static CUresult w_ssync_##i(CUstream s) { return do_ssync((ssync_fn)slot_real[K_SSYNC][i], s, kind_api[K_SSYNC]); } \
    static CUresult w_csync_##i(void) { return do_csync((csync_fn)slot_real[K_CSYNC][i], kind_api[K_CSYNC]); } \
    static CUresult w_csync2_##i(CUcontext c) { return do_csync2((csync2_fn)slot_real[K_CSYNC2][i], c, kind_api[K_CSYNC2]); } \
    static CUresult w_create_##i(CUmemHandle *h, size_t n, const hbmi_CUmemAllocationProp *pr, unsigned long long fl) { \
        return do_create((create_fn)slot_real[K_CREATE][i], h, n, pr, fl, kind_api[K_CREATE]);             \
    }                                                                                                     \
    static CUresult w_mrelease_##i(CUmemHandle h) { return do_mrelease((mrelease_fn)slot_real[K_MRELEASE][i], h, kind_api[K_MRELEASE]); } \
    static CUresult w_map_##i(CUdeviceptr p, size_t n, size_t off, CUmemHandle h, unsigned long long fl) { \
        return do_map((map_fn)slot_real[K_MAP][i], p, n, off, h, fl);                                     \
    }                                                                                                     \
    static CUresult w_unmap_##i(CUdeviceptr p, size_t n) { return do_unmap((unmap_fn)slot_real[K_UNMAP][i], p, n, kind_api[K_UNMAP]); }
SLOTS(DEF_WRAPS)
#define INIT_WRAPS(i)                                                                                     \
    slot_wrap[K_ALLOC][i] = (void *)w_alloc_##i, slot_wrap[K_FREE][i] = (void *)w_free_##i,               \
    slot_wrap[K_AASYNC][i] = (void *)w_aasync_##i, slot_wrap[K_FASYNC][i] = (void *)w_fasync_##i,         \
    slot_wrap[K_APOOL][i] = (void *)w_apool_##i, slot_wrap[K_SSYNC][i] = (void *)w_ssync_##i,             \
    slot_wrap[K_CSYNC][i] = (void *)w_csync_##i, slot_wrap[K_CSYNC2][i] = (void *)w_csync2_##i,           \
    slot_wrap[K_CREATE][i] = (void *)w_create_##i, slot_wrap[K_MRELEASE][i] = (void *)w_mrelease_##i,     \
    slot_wrap[K_MAP][i] = (void *)w_map_##i, slot_wrap[K_UNMAP][i] = (void *)w_unmap_##i;

static int is_ours(void *p) {
    Dl_info a, b;
    return dladdr(p, &a) && dladdr((void *)&is_ours, &b) && a.dli_fbase == b.dli_fbase;
}

/* The wrapper for real entry point p of kind k (p itself when the slots are full). */
static void *wrap(int k, void *p) {
    if (!p || is_ours(p)) return p;
    pthread_mutex_lock(&mu);
    if (!slot_wrap[0][0]) { SLOTS(INIT_WRAPS) }
    void *w = p;
    for (int i = 0; i < NSLOT; i++) {
        if (slot_real[k][i] == p || !slot_real[k][i]) {
            slot_real[k][i] = p;
            w = slot_wrap[k][i];
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return w;
}

/* ---- cuGetProcAddress ----------------------------------------------------------------------------- */
static gpa1_fn real_gpa1;
static gpa2_fn real_gpa2;
static CUresult hook_gpa1(const char *sym, void **pfn, int ver, unsigned long long flags);
static CUresult hook_gpa2(const char *sym, void **pfn, int ver, unsigned long long flags, int *st);
static void rewrite_known(const char *sym, void **pfn, int ver);

/* HBM_RUN_DEBUG=1: each driver entry point the program looks up, by which route, at which
 * version, and whether hbm watches it, on stderr (to see what a runtime calls). */
static void debug_lookup(const char *route, const char *sym, int ver, void *got, void *given) {
    static int on = -1;
    if (on < 0) on = getenv("HBM_RUN_DEBUG") && *getenv("HBM_RUN_DEBUG") == '1';
    if (!on || !sym) return;
    if (ver) fprintf(stderr, "hbm run: %s %s version %d%s\n", route, sym, ver, got && got != given ? " (watched)" : "");
    else fprintf(stderr, "hbm run: %s %s%s\n", route, sym, got && got != given ? " (watched)" : "");
}

/* Replace *pfn for the base names the driver resolves (cuGetProcAddress takes base names);
 * the signature depends on the version asked for (cuCtxSynchronize takes a context from
 * CUDA 13.0, version 13000: cudaTypedefs.h's PFN_cuCtxSynchronize_v13000). */
static void rewrite_proc(const char *sym, void **pfn, int ver) {
    if (!sym || !pfn || !*pfn) return;
    void *got = *pfn;
    rewrite_known(sym, pfn, ver);
    debug_lookup("cuGetProcAddress", sym, ver, *pfn, got);
}
static void rewrite_known(const char *sym, void **pfn, int ver) {
    if (!strcmp(sym, "cuMemAlloc") && ver >= 3020) *pfn = wrap(K_ALLOC, *pfn);
    else if (!strcmp(sym, "cuMemFree") && ver >= 3020) *pfn = wrap(K_FREE, *pfn);
    else if (!strcmp(sym, "cuMemAllocAsync")) *pfn = wrap(K_AASYNC, *pfn);
    else if (!strcmp(sym, "cuMemFreeAsync")) *pfn = wrap(K_FASYNC, *pfn);
    else if (!strcmp(sym, "cuMemAllocFromPoolAsync")) *pfn = wrap(K_APOOL, *pfn);
    else if (!strcmp(sym, "cuStreamSynchronize")) *pfn = wrap(K_SSYNC, *pfn);
    else if (!strcmp(sym, "cuCtxSynchronize")) *pfn = wrap(ver >= 13000 ? K_CSYNC2 : K_CSYNC, *pfn);
    else if (!strcmp(sym, "cuMemCreate")) *pfn = wrap(K_CREATE, *pfn);
    else if (!strcmp(sym, "cuMemRelease")) *pfn = wrap(K_MRELEASE, *pfn);
    else if (!strcmp(sym, "cuMemMap")) *pfn = wrap(K_MAP, *pfn);
    else if (!strcmp(sym, "cuMemUnmap")) *pfn = wrap(K_UNMAP, *pfn);
    else if (!strcmp(sym, "cuGetProcAddress") && !is_ours(*pfn)) {
        if (ver >= 12000) real_gpa2 = (gpa2_fn)*pfn, *pfn = (void *)hook_gpa2;
        else real_gpa1 = (gpa1_fn)*pfn, *pfn = (void *)hook_gpa1;
    }
}
static CUresult hook_gpa1(const char *sym, void **pfn, int ver, unsigned long long flags) {
    if (!real_gpa1) real_gpa1 = (gpa1_fn)next_sym("cuGetProcAddress");
    if (!real_gpa1) return 500;
    CUresult r = real_gpa1(sym, pfn, ver, flags);
    if (!r) rewrite_proc(sym, pfn, ver);
    return r;
}
static CUresult hook_gpa2(const char *sym, void **pfn, int ver, unsigned long long flags, int *st) {
    if (!real_gpa2) real_gpa2 = (gpa2_fn)next_sym("cuGetProcAddress_v2");
    if (!real_gpa2) return 500;
    CUresult r = real_gpa2(sym, pfn, ver, flags, st);
    if (!r) rewrite_proc(sym, pfn, ver);
    return r;
}
EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
    return hook_gpa1(sym, pfn, ver, flags);
}
EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *st) {
    return hook_gpa2(sym, pfn, ver, flags, st);
}

/* ---- dlsym ----------------------------------------------------------------------------------------- */
static void *dlsym_known(const char *name, void *p);
EXPORT void *dlsym(void *handle, const char *name) {
    dlsym_fn real = real_dlsym();
    if (!real) return NULL;
    void *p = real(handle, name);
    if (!p || name[0] != 'c' || name[1] != 'u') return p;
    void *w = dlsym_known(name, p);
    debug_lookup("dlsym", name, 0, w, p);
    return w;
}
static void *dlsym_known(const char *name, void *p) {
    if (!strcmp(name, "cuMemAlloc_v2")) return wrap(K_ALLOC, p);
    if (!strcmp(name, "cuMemFree_v2")) return wrap(K_FREE, p);
    if (!strcmp(name, "cuMemAllocAsync") || !strcmp(name, "cuMemAllocAsync_ptsz")) return wrap(K_AASYNC, p);
    if (!strcmp(name, "cuMemFreeAsync") || !strcmp(name, "cuMemFreeAsync_ptsz")) return wrap(K_FASYNC, p);
    if (!strcmp(name, "cuMemAllocFromPoolAsync") || !strcmp(name, "cuMemAllocFromPoolAsync_ptsz")) return wrap(K_APOOL, p);
    if (!strcmp(name, "cuStreamSynchronize") || !strcmp(name, "cuStreamSynchronize_ptsz")) return wrap(K_SSYNC, p);
    if (!strcmp(name, "cuCtxSynchronize")) return wrap(K_CSYNC, p);
    if (!strcmp(name, "cuCtxSynchronize_v2")) return wrap(K_CSYNC2, p);
    if (!strcmp(name, "cuMemCreate")) return wrap(K_CREATE, p);
    if (!strcmp(name, "cuMemRelease")) return wrap(K_MRELEASE, p);
    if (!strcmp(name, "cuMemMap")) return wrap(K_MAP, p);
    if (!strcmp(name, "cuMemUnmap")) return wrap(K_UNMAP, p);
    if (!strcmp(name, "cuGetProcAddress") && !is_ours(p)) return real_gpa1 = (gpa1_fn)p, (void *)hook_gpa1;
    if (!strcmp(name, "cuGetProcAddress_v2") && !is_ours(p)) return real_gpa2 = (gpa2_fn)p, (void *)hook_gpa2;
    return p;
}

/* ---- programs linked against libcuda / libcudart --------------------------------------------------- */
#define NEXT(type, name)                      \
    static type real_;                        \
    if (!real_) real_ = (type)next_sym(name);
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { NEXT(alloc_fn, "cuMemAlloc_v2") return do_alloc(real_, p, n, "cuMemAlloc_v2"); }
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { NEXT(free_fn, "cuMemFree_v2") return do_free(real_, p, "cuMemFree_v2"); }
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
    NEXT(aasync_fn, "cuMemAllocAsync") return do_aasync(real_, p, n, s, "cuMemAllocAsync");
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { NEXT(fasync_fn, "cuMemFreeAsync") return do_fasync(real_, p, s, "cuMemFreeAsync"); }
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pl, CUstream s) {
    NEXT(apool_fn, "cuMemAllocFromPoolAsync") return do_apool(real_, p, n, pl, s, "cuMemAllocFromPoolAsync");
}
EXPORT CUresult cuStreamSynchronize(CUstream s) {
    NEXT(ssync_fn, "cuStreamSynchronize") return do_ssync(real_, s, "cuStreamSynchronize");
}
EXPORT CUresult cuCtxSynchronize(void) { NEXT(csync_fn, "cuCtxSynchronize") return do_csync(real_, "cuCtxSynchronize"); }
EXPORT CUresult cuMemCreate(CUmemHandle *h, size_t n, const hbmi_CUmemAllocationProp *prop, unsigned long long fl) {
    NEXT(create_fn, "cuMemCreate") return do_create(real_, h, n, prop, fl, "cuMemCreate");
}
EXPORT CUresult cuMemRelease(CUmemHandle h) { NEXT(mrelease_fn, "cuMemRelease") return do_mrelease(real_, h, "cuMemRelease"); }
EXPORT CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemHandle h, unsigned long long fl) {
    NEXT(map_fn, "cuMemMap") return do_map(real_, p, n, off, h, fl);
}
EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t n) { NEXT(unmap_fn, "cuMemUnmap") return do_unmap(real_, p, n, "cuMemUnmap"); }
EXPORT CUresult cuCtxSynchronize_v2(CUcontext c) {
    NEXT(csync2_fn, "cuCtxSynchronize_v2") return do_csync2(real_, c, "cuCtxSynchronize");
}

typedef cudaError_t (*rt_malloc_fn)(void **, size_t);
typedef cudaError_t (*rt_free_fn)(void *);
typedef cudaError_t (*rt_malloc_async_fn)(void **, size_t, cudaStream_t);
typedef cudaError_t (*rt_free_async_fn)(void *, cudaStream_t);

static cudaError_t rt_alloc(void **p, size_t n, cudaStream_t s, const char *api, rt_malloc_fn m, rt_malloc_async_fn ma) {
    if (!m && !ma) return 999;
    if (depth) return m ? m(p, n) : ma(p, n, s);
    uint64_t mm;
    if (!admit(n, api, (uint64_t)(uintptr_t)s, &mm)) return OOM_RT;
    depth++;
    cudaError_t r = m ? m(p, n) : ma(p, n, s);
    depth--;
    commit(r, r == 0 ? (uint64_t)(uintptr_t)*p : 0, n, mm, api, (uint64_t)(uintptr_t)s);
    return r;
}
static cudaError_t rt_release(void *p, cudaStream_t s, const char *api, rt_free_fn f, rt_free_async_fn fa) {
    if (!f && !fa) return 999;
    if (depth) return f ? f(p) : fa(p, s);
    int locked = free_begin((uint64_t)(uintptr_t)p);
    depth++;
    cudaError_t r = f ? f(p) : fa(p, s);
    depth--;
    if (!r) release((uint64_t)(uintptr_t)p, api, (uint64_t)(uintptr_t)s);
    free_end(locked);
    return r;
}
EXPORT cudaError_t cudaMalloc(void **p, size_t n) { NEXT(rt_malloc_fn, "cudaMalloc") return rt_alloc(p, n, NULL, "cudaMalloc", real_, NULL); }
EXPORT cudaError_t cudaFree(void *p) { NEXT(rt_free_fn, "cudaFree") return rt_release(p, NULL, "cudaFree", real_, NULL); }
EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
    NEXT(rt_malloc_async_fn, "cudaMallocAsync") return rt_alloc(p, n, s, "cudaMallocAsync", NULL, real_);
}
EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    NEXT(rt_free_async_fn, "cudaFreeAsync") return rt_release(p, s, "cudaFreeAsync", NULL, real_);
}
/* cudaError_t and CUresult are both int, 0 = success: the driver paths serve the runtime's syncs */
EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    NEXT(ssync_fn, "cudaStreamSynchronize") return do_ssync(real_, s, "cudaStreamSynchronize");
}
EXPORT cudaError_t cudaDeviceSynchronize(void) {
    NEXT(csync_fn, "cudaDeviceSynchronize") return do_csync(real_, "cudaDeviceSynchronize");
}
