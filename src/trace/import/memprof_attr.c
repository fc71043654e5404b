/* memprof_attr.c - who made each allocation live at a memory profile's peak.
 *
 * The allocator's events say what was live, not why (JAX leaves tf_op and region_type
 * empty). The profile says the rest: its modules (XLA's HloProto, planned as hbm plan
 * plans them: the temp allocation's size, each output's and parameter's size and shape)
 * and when each module ran (events with a program_id stat: the launches on the host
 * plane, the kernels on the device planes). An executable allocates its temp and output
 * buffers just before it launches its first kernel, so an allocation belongs to the
 * module of the first launch after it; its size then says which buffer it is. What no
 * module made (or made in an earlier execution and still held) is an array kept between
 * calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/plan.h"
#include "hbm/proto.h"
#include "trace/import/memprof_internal.h"

typedef struct pbuf {
    uint64_t size;
    const char *shape;
    int output; /* else a parameter */
} pbuf;

typedef struct pinfo {
    int64_t program_id;
    const char *name;
    int planned;
    uint64_t temp, outputs, arguments;
    pbuf *bufs;
    size_t nbufs;
} pinfo;

static int cmp_exec(const void *x, const void *y) {
    const hbmi_memprof_exec *a = x, *b = y;
    if (a->start_ps != b->start_ps) return a->start_ps < b->start_ps ? -1 : 1;
    return a->device < b->device ? -1 : a->device > b->device;
}

/* The first module event at or after t on the host (or, with no host launches, on the
 * allocator's device plane): its index, or SIZE_MAX. */
static size_t next_exec(const hbm_memprof *mp, int64_t t, int device, int use_host) {
    size_t lo = 0, hi = mp->nex;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mp->ex[mid].start_ps < t) lo = mid + 1;
        else hi = mid;
    }
    for (size_t k = lo; k < mp->nex; k++)
        if (use_host ? mp->ex[k].device < 0 : mp->ex[k].device == device) return k;
    return SIZE_MAX;
}

static char *arena_fmt(hbm_memprof *mp, const char *fmt, ...) HBMI_PRINTF(2, 3);
static char *arena_fmt(hbm_memprof *mp, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    size_t n = strlen(tmp);
    char *r = hbmi_arena_alloc(&mp->arena, n + 1);
    if (r) memcpy(r, tmp, n);
    return r ? r : "";
}

/* Plan module pid of f (once): its temp size and its output and parameter buffers. */
static hbm_status plan_program(hbm_memprof *mp, hbm_proto_file *f, pinfo *pi) {
    size_t n = hbm_proto_module_count(f), pick = n;
    hbm_proto_module_info mi;
    for (size_t i = 0; i < n; i++)
        if (!hbm_proto_module(f, i, &mi) && mi.program_id == pi->program_id) pick = i;
    if (pick == n) return HBM_OK; /* not among the profile's modules */
    hbm_proto_module(f, pick, &mi);
    pi->name = arena_fmt(mp, "%s", mi.name);
    hbm_hlo_module *m;
    hbm_status s = hbm_proto_load(f, pick, &m);
    if (s) return s == HBM_ERR_NOMEM ? s : HBM_OK;
    hbm_plan *p;
    if ((s = hbm_plan_run(m, NULL, &p))) {
        hbm_hlo_module_free(m);
        return s == HBM_ERR_NOMEM ? s : HBM_OK;
    }
    hbm_plan_stats st;
    hbm_plan_get_stats(p, &st);
    pi->temp = st.temp_size_in_bytes;
    pi->outputs = st.output_size_in_bytes;
    pi->arguments = st.argument_size_in_bytes;
    const hbm_timeline *tl = hbm_plan_timeline(p);
    if (tl && tl->count) {
        pi->bufs = hbmi_arena_alloc(&mp->arena, tl->count * sizeof *pi->bufs);
        for (size_t b = 0; pi->bufs && b < tl->count; b++) {
            const hbm_tag *tg = hbm_timeline_tag(tl, b);
            if (!tg || (tg->category != HBM_CAT_OUTPUT && tg->category != HBM_CAT_PARAMETER)) continue;
            pbuf *pb = &pi->bufs[pi->nbufs++];
            pb->size = tl->buffers[b].size;
            pb->shape = arena_fmt(mp, "%s", tg->shape ? tg->shape : "");
            pb->output = tg->category == HBM_CAT_OUTPUT;
        }
    }
    pi->planned = 1;
    mp->n_planned++;
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    return HBM_OK;
}

static pinfo *find_pinfo(pinfo *ps, size_t n, int64_t pid) {
    for (size_t k = 0; k < n; k++)
        if (ps[k].program_id == pid) return &ps[k];
    return NULL;
}

hbm_status hbm_memprof_attribute(hbm_memprof *mp) {
    if (!mp) return hbmi_error(HBM_ERR_INVALID, "hbm_memprof_attribute: NULL argument");
    if (!mp->nal) return HBM_OK;
    hbm_status se = hbmi_memprof_read_execs(mp);
    if (se) return se;
    hbm_proto_file *f = NULL;
    /* the bytes already read (a file mapped): one copy, not the file read again */
    hbm_status s = hbm_proto_open_mem(mp->buf, mp->len, mp->path, &f);
    if (s == HBM_ERR_NOMEM) return s;
    if (s) { /* nothing to attribute with: the figures stand alone (the kinds stay "") */
        snprintf(mp->attr_note, sizeof mp->attr_note, "no modules to attribute with: %s", hbm_last_error());
        s = HBM_OK;
    } else mp->n_modules = hbm_proto_module_count(f);
    hbmi_qsort(mp->ex, mp->nex, sizeof *mp->ex, cmp_exec);
    int use_host = 0;
    for (size_t k = 0; k < mp->nex && !use_host; k++) use_host = mp->ex[k].device < 0;
    pinfo *ps = NULL;
    size_t nps = 0, cps = 0;
    for (size_t a = 0; a < mp->nal && !s; a++) {
        hbm_memprof_summary *sm = &mp->al[a];
        const hbm_memprof_event *pk = &mp->ev[sm->peak_event];
        size_t run = next_exec(mp, pk->time_ps, sm->device_index, use_host);
        int64_t run_pid = run == SIZE_MAX ? -1 : mp->ex[run].program_id;
        pinfo *rp = NULL;
        for (size_t pass = 0; pass < 2 && !s; pass++)
            for (size_t k = 0; k <= sm->n_active && !s; k++) {
                /* pass 0: the programs to plan; pass 1: the attribution */
                int64_t pid;
                size_t ex = SIZE_MAX;
                if (k == sm->n_active) pid = run_pid;
                else {
                    ex = next_exec(mp, mp->ev[sm->active[k].event].time_ps, sm->device_index, use_host);
                    pid = ex == SIZE_MAX ? -1 : mp->ex[ex].program_id;
                }
                if (pid < 0) {
                    if (pass && k < sm->n_active) {
                        hbm_memprof_active *ac = &sm->active[k];
                        ac->kind = "arrays kept between calls";
                        ac->sure = HBM_MEMPROF_LIKELY;
                        ac->why = "no module ran after it was made";
                    }
                    continue;
                }
                pinfo *pi = find_pinfo(ps, nps, pid);
                if (!pass) {
                    if (pi) continue;
                    if (nps == cps && hbmi_grow((void **)&ps, &cps, nps + 1, sizeof *ps)) {
                        s = HBM_ERR_NOMEM;
                        break;
                    }
                    pi = &ps[nps++];
                    memset(pi, 0, sizeof *pi);
                    pi->program_id = pid;
                    pi->name = "";
                    if (f) s = plan_program(mp, f, pi);
                    if (!pi->name[0]) pi->name = arena_fmt(mp, "program %lld", (long long)pid);
                    continue;
                }
                if (k == sm->n_active) break;
                hbm_memprof_active *ac = &sm->active[k];
                const hbm_memprof_event *ev = &mp->ev[ac->event];
                uint64_t r = ev->requested_bytes ? ev->requested_bytes : ev->allocation_bytes;
                ac->program_id = pid;
                ac->module = pi->name;
                ac->current = ex == run;
                int temp = pi->planned && pi->temp && r == pi->temp;
                size_t nout = 0, nparam = 0;
                const char *oshape = "";
                for (size_t b = 0; b < pi->nbufs; b++)
                    if (pi->bufs[b].size == r) {
                        if (pi->bufs[b].output) nout++, oshape = pi->bufs[b].shape;
                        else nparam++;
                    }
                const char *when = ac->current ? "made just before this module's launch at the peak"
                                               : "made before an earlier launch of this module, still held";
                if (!pi->planned) {
                    ac->kind = "";
                    ac->sure = HBM_MEMPROF_LIKELY;
                    ac->why = arena_fmt(mp, "%s; the module is not in the profile's HLO protos", when);
                } else if (temp && !nout) {
                    ac->kind = "temp";
                    ac->sure = HBM_MEMPROF_SURE;
                    ac->why = arena_fmt(mp, "%s; its size is the plan's temp allocation", when);
                } else if (nout && !temp) {
                    ac->kind = "output";
                    ac->shape = oshape;
                    ac->sure = nout == 1 ? HBM_MEMPROF_SURE : HBM_MEMPROF_LIKELY;
                    if (nout == 1) ac->why = arena_fmt(mp, "%s; its size is an output's of the plan", when);
                    else ac->why = arena_fmt(mp, "%s; %zu outputs of the plan have its size", when, nout);
                } else if (nout && temp) {
                    ac->kind = "temp";
                    ac->sure = HBM_MEMPROF_LIKELY;
                    ac->why = arena_fmt(mp, "%s; its size is the temp allocation's and an output's", when);
                } else { /* not one of its buffers: made by the program (device_put, a transfer) */
                    ac->kind = "arrays kept between calls";
                    ac->sure = HBM_MEMPROF_LIKELY;
                    ac->why = arena_fmt(mp, "made before a launch of %s, but no temp or output of its plan has this "
                                            "size: not made by it", pi->name);
                    ac->module = "";
                    ac->program_id = -1;
                    ac->current = 0;
                }
                (void)nparam;
            }
        rp = find_pinfo(ps, nps, run_pid);
        /* the running module: what it needed, and which earlier results it may take */
        if (!s && rp) {
            sm->running_program_id = run_pid;
            sm->running_module = rp->name;
            sm->running_temp_bytes = rp->temp;
            sm->running_output_bytes = rp->outputs;
            sm->running_argument_bytes = rp->arguments;
            /* each parameter of the running module taken once, by an earlier allocation of its size */
            unsigned char *taken = rp->nbufs ? hbmi_calloc(rp->nbufs, 1) : NULL;
            if (rp->nbufs && !taken) s = HBM_ERR_NOMEM;
            for (size_t k = 0; k < sm->n_active && !s; k++) {
                hbm_memprof_active *ac = &sm->active[k];
                const hbm_memprof_event *ev = &mp->ev[ac->event];
                uint64_t r = ev->requested_bytes ? ev->requested_bytes : ev->allocation_bytes;
                if (ac->current) {
                    sm->current_bytes += ev->allocation_bytes;
                    continue;
                }
                size_t b = 0;
                while (rp->planned && b < rp->nbufs && (rp->bufs[b].output || taken[b] || rp->bufs[b].size != r)) b++;
                if (!rp->planned || b == rp->nbufs) {
                    if (!strcmp(ac->kind, "arrays kept between calls")) sm->kept_bytes += ev->allocation_bytes;
                    else sm->earlier_bytes += ev->allocation_bytes;
                    continue;
                }
                taken[b] = 1;
                sm->running_param_bytes += ev->allocation_bytes;
                ac->why = arena_fmt(mp, "%s; now a parameter of the running module (%s has that size)", ac->why,
                                    rp->bufs[b].shape);
                ac->kind = "parameter";
                ac->shape = rp->bufs[b].shape;
            }
            hbmi_free(taken);
        }
        sm->attributed = !s;
    }
    hbmi_free(ps);
    hbm_proto_close(f);
    return s == HBM_ERR_NOMEM ? hbmi_error(s, "out of host memory") : s;
}
