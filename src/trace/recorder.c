/* recorder.c - the tracking adaptor: wraps a policy (or a whole allocator handle) and
 * appends every alloc, free and failed alloc to a trace file, with a monotonic time, the
 * address, held and requested sizes, a small thread number, the tag and optionally a
 * native backtrace, the stream (hbm_alloc_stream / hbm_free_stream; 0 for hbm_alloc) and
 * stream synchronizations (hbm_allocator_sync), all forwarded to the wrapped policy.
 * Changes of the allocator's reserved bytes become segment events.
 * Calls arrive serialized by the outer handle's lock, so the recorder needs none. */
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "alloc/alloc_policy.h"
#include "device/cuda_driver.h"
#include "trace/trace_internal.h"

#if defined(__GLIBC__)
#include <execinfo.h>
#define HBMI_HAVE_BACKTRACE 1
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HBMI_HAVE_TSC 1
#endif

#define MAX_FRAMES 32

typedef struct recorder {
    hbm_allocator_ops ops; /* ours: forwards to iops/iself */
    const hbm_allocator_ops *iops;
    void *iself;
    hbm_allocator *handle; /* set when wrapping a handle (hbm_trace_wrap) */
    hbm_trace_writer *w;
    uint64_t t0;
    uint32_t tags_written; /* tag ids 1..tags_written are in the file */
    unsigned flags;
    uint64_t last_reserved;
    hbmi_map bts; /* backtrace hash -> id */
    uint32_t nbt;
    int stopped; /* a record could not be written: the trace stops there, the allocations go on */
    /* clock: ns = base_ns + (tick - base_tick) * rate, re-based against the monotonic
     * clock every CLOCK_REBASE events; times never go backwards */
    uint64_t base_tick, base_ns, tick0, last_ns;
    double rate;
    uint32_t until_rebase;
} recorder;

#define CLOCK_REBASE 4096

static inline uint64_t ticks(void) {
#ifdef HBMI_HAVE_TSC
    return __rdtsc();
#else
    return hbmi_now_ns();
#endif
}

/* Measure ticks per ns over a short spin (about 50 us), then refine at each re-base. */
static void clock_init(recorder *r) {
    r->rate = 1.0;
#ifdef HBMI_HAVE_TSC
    uint64_t n0 = hbmi_now_ns(), k0 = ticks(), n1, k1;
    do {
        n1 = hbmi_now_ns();
        k1 = ticks();
    } while (n1 - n0 < 50000);
    if (k1 > k0) r->rate = (double)(n1 - n0) / (double)(k1 - k0);
#endif
    r->tick0 = r->base_tick = ticks();
    r->t0 = hbmi_now_ns();
    r->base_ns = 0;
    r->until_rebase = CLOCK_REBASE;
}

static void clock_rebase(recorder *r) {
    uint64_t k = ticks(), n = hbmi_now_ns() - r->t0;
#ifdef HBMI_HAVE_TSC
    if (n > 10000000 && k > r->tick0) r->rate = (double)n / (double)(k - r->tick0); /* over >= 10 ms */
#endif
    r->base_tick = k;
    r->base_ns = n;
    r->until_rebase = CLOCK_REBASE;
}

static inline uint64_t now_rel(recorder *r) {
    if (HBMI_UNLIKELY(!--r->until_rebase)) clock_rebase(r);
    uint64_t k = ticks();
    uint64_t ns = r->base_ns + (k > r->base_tick ? (uint64_t)((double)(k - r->base_tick) * r->rate) : 0);
    if (ns < r->last_ns) ns = r->last_ns;
    return r->last_ns = ns;
}

static atomic_uint thread_counter;
static _Thread_local uint32_t thread_no;

static inline uint32_t this_thread(void) {
    if (HBMI_UNLIKELY(!thread_no)) thread_no = atomic_fetch_add(&thread_counter, 1) + 1;
    return thread_no;
}

static uint32_t capture_backtrace(recorder *r) {
#ifdef HBMI_HAVE_BACKTRACE
    void *fr[MAX_FRAMES];
    int n = backtrace(fr, MAX_FRAMES);
    int skip = n > 3 ? 3 : 0; /* capture_backtrace, rec_alloc, hbm_alloc */
    uint64_t f64[MAX_FRAMES], h = 0x9e3779b97f4a7c15ULL;
    for (int i = skip; i < n; i++) {
        f64[i - skip] = (uint64_t)(uintptr_t)fr[i];
        h = hbmi_hash64(h ^ f64[i - skip]);
    }
    if (h == UINT64_MAX) h = 0;
    uint64_t id;
    if (hbmi_map_get(&r->bts, h, &id)) return (uint32_t)id;
    if (hbmi_map_put(&r->bts, h, r->nbt + 1)) return 0;
    if (hbm_trace_writer_backtrace(r->w, r->nbt + 1, f64, (size_t)(n - skip))) return 0;
    return ++r->nbt;
#else
    (void)r;
    return 0;
#endif
}

/* time: one clock reading per call, shared by its events (0 = read it now) */
static hbm_status emit(recorder *r, hbm_trace_event *e, uint64_t time) {
    e->thread = this_thread();
    e->time_ns = time ? time : now_rel(r);
    return hbm_trace_writer_event(r->w, e);
}

static hbm_status segment_check(recorder *r, uint64_t time) {
    hbm_stats st;
    r->iops->stats(r->iself, &st);
    if (st.bytes_reserved == r->last_reserved) return HBM_OK;
    hbm_trace_event e = {0};
    if (st.bytes_reserved > r->last_reserved) {
        e.kind = HBM_EV_SEGMENT_ALLOC;
        e.size = st.bytes_reserved - r->last_reserved;
    } else {
        e.kind = HBM_EV_SEGMENT_FREE;
        e.size = r->last_reserved - st.bytes_reserved;
    }
    r->last_reserved = st.bytes_reserved;
    return emit(r, &e, time);
}

/* A record's failure is its status; the allocator's callers get their allocation's own, so
 * the first failure stops the trace where it is (no later record is written) and the
 * allocations go on. */
static void stop_on(recorder *r, hbm_status s) {
    if (HBMI_UNLIKELY(s)) r->stopped = 1;
}

/* The records of one alloc_stream call that returned s: its tag when new, then the
 * allocation (HBM_OK) or the failed one (HBM_ERR_OOM); another failure is not recorded. */
static hbm_status record_alloc(recorder *r, hbm_status s, uint64_t size, const hbm_tag *tag, uint32_t tag_id,
                               uint64_t stream, const uint64_t *addr) {
    if (HBMI_UNLIKELY(tag_id > r->tags_written) && tag) {
        TRY(hbm_trace_writer_tag(r->w, tag_id, tag));
        r->tags_written = tag_id;
    }
    hbm_trace_event e = {.kind = HBM_EV_ALLOC, .requested = size, .stream = stream, .tag = tag ? tag_id : 0};
    uint64_t now = now_rel(r);
    if (s == HBM_OK) {
        e.addr = *addr;
        e.size = r->iops->rounded_size ? r->iops->rounded_size(r->iself, size) : size;
        TRY(segment_check(r, now));
    } else if (s == HBM_ERR_OOM) {
        e.kind = HBM_EV_OOM;
    } else {
        return HBM_OK;
    }
    if (r->flags & HBM_TRACE_BACKTRACES) e.backtrace = capture_backtrace(r);
    return emit(r, &e, now);
}

/* The records of a free or a sync on stream that succeeded. */
static hbm_status record_event(recorder *r, int kind, uint64_t addr, uint64_t stream) {
    hbm_trace_event e = {.kind = kind, .addr = addr, .stream = stream};
    uint64_t now = now_rel(r);
    TRY(emit(r, &e, now));
    return segment_check(r, now);
}

static hbm_status rec_alloc_stream(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t stream,
                                   uint64_t *addr_out) {
    recorder *r = self;
    hbm_status s = r->iops->alloc_stream ? r->iops->alloc_stream(r->iself, size, tag, tag_id, stream, addr_out)
                                         : r->iops->alloc(r->iself, size, tag, tag_id, addr_out);
    if (HBMI_LIKELY(!r->stopped)) stop_on(r, record_alloc(r, s, size, tag, tag_id, stream, addr_out));
    return s;
}

static hbm_status rec_alloc(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t *addr_out) {
    return rec_alloc_stream(self, size, tag, tag_id, HBM_STREAM_DEFAULT, addr_out);
}

static hbm_status rec_free_stream(void *self, uint64_t addr, uint64_t stream) {
    recorder *r = self;
    hbm_status s = r->iops->free_stream ? r->iops->free_stream(r->iself, addr, stream) : r->iops->free(r->iself, addr);
    if (!s && HBMI_LIKELY(!r->stopped)) stop_on(r, record_event(r, HBM_EV_FREE, addr, stream));
    return s;
}

static hbm_status rec_free(void *self, uint64_t addr) { return rec_free_stream(self, addr, HBM_STREAM_DEFAULT); }

/* Recorded whether or not the policy cares: a replay against a stream-ordered one does. */
static hbm_status rec_sync(void *self, uint64_t stream) {
    recorder *r = self;
    hbm_status s = r->iops->sync ? r->iops->sync(r->iself, stream) : HBM_OK;
    if (!s && !r->stopped) stop_on(r, record_event(r, HBM_EV_SYNC, 0, stream));
    return s;
}

static void rec_stats(void *self, hbm_stats *out) {
    recorder *r = self;
    r->iops->stats(r->iself, out);
}
static void rec_reset_peaks(void *self) {
    recorder *r = self;
    if (r->iops->reset_peaks) r->iops->reset_peaks(r->iself);
}
static hbm_status rec_check(void *self) {
    recorder *r = self;
    return r->iops->check ? r->iops->check(r->iself) : HBM_OK;
}
static hbm_status rec_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    recorder *r = self;
    if (!r->iops->walk) return hbmi_error(HBM_ERR_UNSUPPORTED, "allocator %s cannot list its blocks", r->iops->name);
    return r->iops->walk(r->iself, fn, user);
}
static hbm_status rec_trim(void *self) {
    recorder *r = self;
    hbm_status s = r->iops->trim ? r->iops->trim(r->iself) : HBM_OK;
    if (!r->stopped) stop_on(r, segment_check(r, 0));
    return s;
}
static uint64_t rec_rounded(void *self, uint64_t size) {
    recorder *r = self;
    return r->iops->rounded_size ? r->iops->rounded_size(r->iself, size) : size;
}
static void rec_destroy(void *self) {
    recorder *r = self;
    hbm_trace_writer_close(r->w);
    r->iops->destroy(r->iself);
    hbmi_map_destroy(&r->bts);
    hbmi_free(r);
}

static atomic_uint recorder_counter;

/* "%p" -> process id, "%n" -> 1, 2, ... per recorder opened in this process, "%%" -> "%":
 * so HBM_TRACE=run-%p-%n.hbmt gives each allocator of each process its own file. */
static hbm_status expand_path(const char *in, char *out, size_t cap) {
    size_t o = 0;
    unsigned n = 0;
    for (const char *p = in; *p; p++) {
        char tmp[24] = {0};
        const char *add = tmp;
        if (p[0] == '%' && p[1] == 'p') snprintf(tmp, sizeof tmp, "%ld", (long)getpid()), p++;
        else if (p[0] == '%' && p[1] == 'n') {
            if (!n) n = atomic_fetch_add(&recorder_counter, 1) + 1;
            snprintf(tmp, sizeof tmp, "%u", n), p++;
        } else if (p[0] == '%' && p[1] == '%') tmp[0] = '%', p++;
        else tmp[0] = *p;
        size_t k = strlen(add);
        if (o + k >= cap) return hbmi_error(HBM_ERR_CONFIG, "trace=%s: the expanded path is too long", in);
        memcpy(out + o, add, k);
        o += k;
    }
    out[o] = 0;
    return HBM_OK;
}

hbm_status hbmi_recorder_create(const hbm_allocator_ops *iops, void *iself, hbm_device *dev, const char *path_in,
                                unsigned flags, const hbm_allocator_ops **ops_out, void **self_out) {
    char path[1024];
    hbm_status s = expand_path(path_in, path, sizeof path);
    if (s) return s;
    recorder *r = hbmi_calloc(1, sizeof *r);
    if (!r) return hbmi_error(HBM_ERR_NOMEM, "out of host memory for a trace recorder");
    hbm_device_info info = {0};
    if (dev) hbm_device_info_get(dev, &info);
    s = hbm_trace_writer_open(path, info.name, info.total_bytes, &r->w);
    const hbmi_cuda_dev *cd = hbmi_cuda_dev_of(dev);
    /* a GPU's number, as hbm run writes it (the header has its name and total) */
    if (!s && cd && (s = hbmi_trace_writer_device(r->w, NULL, cd->ordinal, 0))) hbm_trace_writer_close(r->w);
    if (s) {
        hbmi_free(r);
        return hbmi_error_prefix(s, "trace=%s: ", path);
    }
    r->iops = iops;
    r->iself = iself;
    r->flags = flags;
    hbmi_map_init(&r->bts);
    clock_init(r);
    hbm_stats st;
    iops->stats(iself, &st);
    r->ops = (hbm_allocator_ops){.name = iops->name, .alloc = rec_alloc, .free = rec_free, .stats = rec_stats,
                                 .reset_peaks = rec_reset_peaks, .check = rec_check,
                                 .walk = iops->walk ? rec_walk : NULL, .trim = rec_trim,
                                 .rounded_size = rec_rounded, .destroy = rec_destroy,
                                 .alloc_stream = rec_alloc_stream, .free_stream = rec_free_stream, .sync = rec_sync};
    if (st.bytes_reserved) { /* preallocated at open: one segment event first */
        hbm_trace_event e = {.kind = HBM_EV_SEGMENT_ALLOC, .size = st.bytes_reserved};
        r->last_reserved = st.bytes_reserved;
        stop_on(r, emit(r, &e, 0));
    }
    *ops_out = &r->ops;
    *self_out = r;
    return HBM_OK;
}

/* ---- wrapping a whole handle: the inner "policy" is another allocator ---------------- */

static hbm_status h_alloc(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t *addr_out) {
    return hbm_alloc(self, size, tag, addr_out);
}
static hbm_status h_free(void *self, uint64_t addr) { return hbm_free(self, addr); }
static hbm_status h_alloc_stream(void *self, uint64_t size, const hbm_tag *tag, uint32_t tag_id, uint64_t stream,
                                 uint64_t *addr_out) {
    (void)tag_id;
    return hbm_alloc_stream(self, size, tag, stream, addr_out);
}
static hbm_status h_free_stream(void *self, uint64_t addr, uint64_t stream) { return hbm_free_stream(self, addr, stream); }
static hbm_status h_sync(void *self, uint64_t stream) { return hbm_allocator_sync(self, stream); }
static void h_stats(void *self, hbm_stats *out) { hbm_stats_get(self, out); }
static void h_reset_peaks(void *self) { hbm_stats_reset_peaks(self); }
static hbm_status h_check(void *self) { return hbm_check(self); }
static hbm_status h_trim(void *self) { return hbm_allocator_trim(self); }
static uint64_t h_rounded(void *self, uint64_t size) {
    void *ps;
    const hbm_allocator_ops *ops = hbmi_allocator_policy(self, &ps);
    return ops->rounded_size ? ops->rounded_size(ps, size) : size; /* read-only, no lock needed */
}
static void h_destroy(void *self) { hbm_allocator_close(self); }

typedef struct h_walk_ctx {
    int (*fn)(void *, const hbm_block *, uint32_t);
    void *user;
} h_walk_ctx;
static int h_walk_tramp(void *user, const hbm_block *b) {
    h_walk_ctx *c = user;
    return c->fn(c->user, b, 0);
}
static hbm_status h_walk(void *self, int (*fn)(void *, const hbm_block *, uint32_t), void *user) {
    h_walk_ctx c = {fn, user};
    return hbm_allocator_walk(self, h_walk_tramp, &c);
}

static const hbm_allocator_ops handle_ops = {
    .name = "traced", .alloc = h_alloc, .free = h_free, .stats = h_stats, .reset_peaks = h_reset_peaks,
    .check = h_check, .walk = h_walk, .trim = h_trim, .rounded_size = h_rounded, .destroy = h_destroy,
    .alloc_stream = h_alloc_stream, .free_stream = h_free_stream, .sync = h_sync};

hbm_status hbm_trace_wrap(hbm_allocator *inner, const char *path, unsigned flags, hbm_allocator **out) {
    if (!inner || !path || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_wrap: NULL argument");
    *out = NULL;
    const hbm_allocator_ops *ops;
    void *self;
    hbm_status s = hbmi_recorder_create(&handle_ops, inner, hbm_allocator_device(inner), path, flags, &ops, &self);
    if (s) {
        hbm_allocator_close(inner); /* owned in every case, as documented */
        return s;
    }
    ((recorder *)self)->ops.name = hbm_allocator_name(inner);
    ((recorder *)self)->handle = inner;
    s = hbm_allocator_wrap(ops, self, hbm_allocator_device(inner), hbm_allocator_config(inner), out);
    if (s) return s; /* wrap destroyed the recorder, which closed inner: as documented, it owns inner */
    return HBM_OK;
}

hbm_status hbmi_recorder_over(const hbm_config *cfg, hbm_device *dev, const hbm_allocator_ops **ops, void **self) {
    if (!cfg->trace[0]) return HBM_OK;
    const hbm_allocator_ops *rops; /* trace=PATH / HBM_TRACE: record through the tracking adaptor */
    void *rself;
    hbm_status s = hbmi_recorder_create(*ops, *self, dev, cfg->trace, cfg->trace_backtrace ? 1u : 0u, &rops, &rself);
    if (s) {
        (*ops)->destroy(*self);
        return s;
    }
    *ops = rops;
    *self = rself;
    return HBM_OK;
}
