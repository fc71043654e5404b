/* device.c - device handles: spec parsing, capacity accounting, validation of frees,
 * fault injection and counters, over a backend vtable (sim, host, cuda).
 * The backend registry: hbm_device_open picks a backend's constructor (sim.c, host.c,
 * cuda.c) by the spec's name, and each backend fills the handle through device_internal.h,
 * so device.c and its backends call each other - the one cycle the layout keeps. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "device/device_alloc.h"
#include "device/device_internal.h"
#include "hbm/size.h"

struct hbm_device {
    const hbm_device_ops *ops;
    void *ctx;
    hbm_device_info info;
    pthread_mutex_t lock;
    hbmi_map live;        /* addr -> accounted size */
    uint64_t external;    /* bytes held by "other processes" (sim free=) */
    uint64_t fail_at, fail_after, fail_every;
    hbm_device_counters c;
    int quiet; /* hbmi_device_set_quiet */
};

static hbm_status parse_u64_opt(const char *spec, const char *key, const char *val, uint64_t *out) {
    char *end;
    unsigned long long v = strtoull(val, &end, 10);
    if (!*val || *end || val[0] == '-')
        return hbmi_error(HBM_ERR_INVALID, "device '%s': %s=%s is not a non-negative integer", spec, key, val);
    *out = v;
    return HBM_OK;
}

hbm_status hbm_device_open(const char *spec, hbm_device **out) {
    if (!spec || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_device_open: NULL argument");
    *out = NULL;
    const char *colon = strchr(spec, ':');
    if (!colon)
        return hbmi_error(HBM_ERR_INVALID, "device '%s': expected KIND:ARGS, e.g. sim:80GiB, host:1GiB or cuda:0", spec);
    size_t klen = (size_t)(colon - spec);
    int is_sim = klen == 3 && !strncmp(spec, "sim", 3), is_host = klen == 4 && !strncmp(spec, "host", 4);
    int is_cuda = klen == 4 && !strncmp(spec, "cuda", 4);
    if (!is_sim && !is_host && !is_cuda)
        return hbmi_error(HBM_ERR_INVALID, "device '%s': unknown kind '%.*s' (accepted: sim, host, cuda)", spec, (int)klen,
                          spec);
    char buf[512];
    if (strlen(colon + 1) >= sizeof buf) return hbmi_error(HBM_ERR_INVALID, "device spec is too long");
    strcpy(buf, colon + 1);

    hbmi_device_args args = {.spec = spec};
    uint64_t fail_at = 0, fail_after = 0, fail_every = 0, gran = 512;
    char name[64] = "";
    /* first item: size (sim/host) or ordinal (cuda); then key=value options */
    char *save = NULL, *item = strtok_r(buf, ",", &save);
    if (!item) return hbmi_error(HBM_ERR_INVALID, "device '%s': missing size or ordinal after ':'", spec);
    if (is_cuda) {
        char *end;
        long n = strtol(item, &end, 10);
        if (*end || n < 0 || n > 1024) return hbmi_error(HBM_ERR_INVALID, "device '%s': '%s' is not a GPU ordinal", spec, item);
        args.ordinal = (int)n;
    } else {
        hbm_status s = hbm_size_parse(item, &args.total);
        if (s) return hbmi_error_prefix(s, "device '%s': ", spec);
        if (args.total == 0) return hbmi_error(HBM_ERR_INVALID, "device '%s': capacity must be > 0", spec);
    }
    while ((item = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(item, '=');
        if (!eq) return hbmi_error(HBM_ERR_INVALID, "device '%s': option '%s' is not key=value", spec, item);
        *eq = 0;
        const char *k = item, *v = eq + 1;
        hbm_status s = HBM_OK;
        if (!strcmp(k, "fail_at")) s = parse_u64_opt(spec, k, v, &fail_at);
        else if (!strcmp(k, "fail_after")) s = parse_u64_opt(spec, k, v, &fail_after);
        else if (!strcmp(k, "fail_every")) s = parse_u64_opt(spec, k, v, &fail_every);
        else if (!strcmp(k, "granularity")) {
            s = hbm_size_parse(v, &gran);
            if (!s && (gran == 0 || (gran & (gran - 1))))
                s = hbmi_error(HBM_ERR_INVALID, "device '%s': granularity=%s must be a power of two", spec, v);
        } else if (!strcmp(k, "free")) {
            s = hbm_size_parse(v, &args.free_bytes);
            if (!s && args.free_bytes > args.total)
                s = hbmi_error(HBM_ERR_INVALID, "device '%s': free=%s exceeds the capacity", spec, v);
        } else if (!strcmp(k, "name")) {
            snprintf(name, sizeof name, "%s", v);
            args.name = name;
        } else
            s = hbmi_error(HBM_ERR_INVALID,
                           "device '%s': unknown option '%s' (accepted: fail_at, fail_after, fail_every, "
                           "granularity, free, name)", spec, k);
        if (s) return s;
    }

    const hbm_device_ops *ops = NULL;
    void *ctx = NULL;
    hbm_device_info info;
    memset(&info, 0, sizeof info);
    hbm_status s;
    if (is_sim)
        s = hbmi_sim_device_create(&args, &ops, &ctx, &info);
    else if (is_host)
        s = hbmi_host_device_create(&args, &ops, &ctx, &info);
    else
        s = hbmi_cuda_device_create(&args, &ops, &ctx, &info);
    if (s) return s;
    if (info.granularity < gran) info.granularity = gran;
    hbm_device *dev;
    s = hbm_device_open_ops(ops, ctx, &info, &dev);
    if (s) return s;
    dev->fail_at = fail_at;
    dev->fail_after = fail_after;
    dev->fail_every = fail_every;
    if (args.free_bytes) dev->external = args.total - args.free_bytes;
    *out = dev;
    return HBM_OK;
}

hbm_status hbm_device_open_ops(const hbm_device_ops *ops, void *ctx, const hbm_device_info *info,
                               hbm_device **out) {
    if (!ops || !info || !out || !ops->alloc || !ops->free)
        return hbmi_error(HBM_ERR_INVALID, "hbm_device_open_ops: NULL argument or incomplete ops");
    hbm_device *dev = hbmi_calloc(1, sizeof *dev);
    if (!dev) {
        if (ops->destroy) ops->destroy(ctx);
        return hbmi_error(HBM_ERR_NOMEM, "out of host memory opening a device");
    }
    dev->ops = ops;
    dev->ctx = ctx;
    dev->info = *info;
    if (!dev->info.granularity) dev->info.granularity = 1;
    if (!dev->info.alignment) dev->info.alignment = 1;
    hbmi_map_init(&dev->live);
    pthread_mutex_init(&dev->lock, NULL);
    *out = dev;
    return HBM_OK;
}

void hbm_device_close(hbm_device *dev) {
    if (!dev) return;
    /* Give back whatever callers leaked so host memory is not lost. */
    for (size_t i = 0; i < dev->live.cap; i++)
        if (dev->live.s[i].key) dev->ops->free(dev->ctx, dev->live.s[i].key - 1, dev->live.s[i].val);
    if (dev->ops->destroy) dev->ops->destroy(dev->ctx);
    hbmi_map_destroy(&dev->live);
    pthread_mutex_destroy(&dev->lock);
    hbmi_free(dev);
}

hbm_status hbm_device_info_get(const hbm_device *dev, hbm_device_info *out) {
    if (!dev || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_device_info_get: NULL argument");
    *out = dev->info;
    return HBM_OK;
}

hbm_status hbm_device_mem_info(hbm_device *dev, uint64_t *free_bytes, uint64_t *total_bytes) {
    if (!dev) return hbmi_error(HBM_ERR_INVALID, "hbm_device_mem_info: NULL device");
    uint64_t f, t;
    if (dev->ops->mem_info) {
        hbm_status s = dev->ops->mem_info(dev->ctx, &f, &t);
        if (s) return s;
    } else {
        pthread_mutex_lock(&dev->lock);
        t = dev->info.total_bytes;
        uint64_t used = dev->c.bytes_in_use + dev->external;
        f = used < t ? t - used : 0;
        pthread_mutex_unlock(&dev->lock);
    }
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return HBM_OK;
}

hbm_status hbm_device_counters_get(const hbm_device *dev, hbm_device_counters *out) {
    if (!dev || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_device_counters_get: NULL argument");
    pthread_mutex_lock((pthread_mutex_t *)&dev->lock);
    *out = dev->c;
    pthread_mutex_unlock((pthread_mutex_t *)&dev->lock);
    return HBM_OK;
}

static int injected_failure(hbm_device *dev, uint64_t n) {
    return (dev->fail_at && n == dev->fail_at) || (dev->fail_after && n > dev->fail_after) ||
           (dev->fail_every && n % dev->fail_every == 0);
}

void hbmi_device_set_quiet(hbm_device *dev, int on) { dev->quiet = on; }

void hbmi_device_info_named(const hbmi_device_args *args, const char *kind, hbm_device_info *info) {
    char h[32];
    snprintf(info->kind, sizeof info->kind, "%s", kind);
    if (args->name) snprintf(info->name, sizeof info->name, "%s", args->name);
    else snprintf(info->name, sizeof info->name, "%s:%s", kind, hbm_size_human(args->total, h));
    info->total_bytes = args->total;
}

hbm_status hbm_device_alloc(hbm_device *dev, uint64_t size, uint64_t *addr_out) {
    if (!dev || !addr_out) return hbmi_error(HBM_ERR_INVALID, "hbm_device_alloc: NULL argument");
    if (size == 0) return hbmi_error(HBM_ERR_INVALID, "hbm_device_alloc: size 0");
    uint64_t g = dev->info.granularity;
    if (size > UINT64_MAX - g) return dev->quiet ? HBM_ERR_OOM : hbmi_error(HBM_ERR_OOM, "device %s: %" PRIu64 " bytes can never fit", dev->info.name, size);
    uint64_t acct = hbmi_align_up(size, g);
    pthread_mutex_lock(&dev->lock);
    uint64_t n = ++dev->c.alloc_calls;
    hbm_status s = HBM_OK;
    if (injected_failure(dev, n)) {
        s = dev->quiet ? HBM_ERR_OOM : hbmi_error(HBM_ERR_OOM, "device %s: injected failure of raw allocation #%" PRIu64, dev->info.name, n);
    } else if (dev->c.bytes_in_use + dev->external + acct > dev->info.total_bytes) {
        char a[32], f[32];
        uint64_t used = dev->c.bytes_in_use + dev->external;
        s = dev->quiet ? HBM_ERR_OOM : hbmi_error(HBM_ERR_OOM, "device %s: cannot allocate %s, %s free", dev->info.name, hbm_size_human(acct, a),
                       hbm_size_human(used < dev->info.total_bytes ? dev->info.total_bytes - used : 0, f));
    } else if ((s = hbmi_map_reserve(&dev->live, dev->live.count + 1)) == HBM_OK) {
        uint64_t addr = 0;
        if (dev->quiet) { /* the device's own failure (sim's address space, host's mmap) leaves no message */
            uint64_t mark = hbmi_error_mark();
            s = dev->ops->alloc(dev->ctx, acct, &addr);
            if (s == HBM_ERR_OOM) hbmi_error_undo(mark);
        } else {
            s = dev->ops->alloc(dev->ctx, acct, &addr);
        }
        if (!s) {
            hbmi_map_put(&dev->live, addr, acct); /* cannot fail: reserved above */
            dev->c.bytes_in_use += acct;
            if (dev->c.bytes_in_use > dev->c.peak_bytes_in_use) dev->c.peak_bytes_in_use = dev->c.bytes_in_use;
            *addr_out = addr;
        }
    }
    if (s) dev->c.alloc_failures++;
    pthread_mutex_unlock(&dev->lock);
    return s;
}

hbm_status hbm_device_free(hbm_device *dev, uint64_t addr) {
    if (!dev) return hbmi_error(HBM_ERR_INVALID, "hbm_device_free: NULL device");
    pthread_mutex_lock(&dev->lock);
    uint64_t acct;
    hbm_status s;
    if (!hbmi_map_get(&dev->live, addr, &acct)) {
        s = hbmi_error(HBM_ERR_BAD_FREE, "device %s: free of 0x%" PRIx64 ", which is not a live raw allocation",
                       dev->info.name, addr);
    } else {
        s = dev->ops->free(dev->ctx, addr, acct);
        if (!s) {
            hbmi_map_del(&dev->live, addr, NULL);
            dev->c.bytes_in_use -= acct;
            dev->c.free_calls++;
        }
    }
    pthread_mutex_unlock(&dev->lock);
    return s;
}

void *hbmi_device_ctx(hbm_device *dev, const hbm_device_ops *ops) { return dev && dev->ops == ops ? dev->ctx : NULL; }
