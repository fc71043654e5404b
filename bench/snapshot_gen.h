/* snapshot_gen.h - the PyTorch snapshots the benchmarks generate (bench_snapshot,
 * bench_replay): a training loop's history (allocation sites of one step, forward and
 * backward, a caching allocator's segments and address reuse) with stacks in either
 * layout, and the two ways of writing it as a pickle: as torch.cuda.memory._dump_snapshot()
 * writes it (frames shared through the memo) and as Python's pickler writes a snapshot
 * whose frames are distinct objects. Static functions for one program each; an includer
 * uses what it needs (hence the unused attributes). */
#ifndef HBM_BENCH_SNAPSHOT_GEN_H
#define HBM_BENCH_SNAPSHOT_GEN_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "hbm/hbm.h"
#include "trace/trace_internal.h"

#define GEN_UNUSED __attribute__((unused))

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static GEN_UNUSED uint64_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

#define NSITES 400   /* allocation sites of one training step */
#define NFRAMES 2400 /* distinct frames */

typedef struct site {
    uint64_t size;
    uint32_t bt, tag; /* its stack (backtrace of frame tags) and the frame to blame */
} site;

typedef struct cache { /* freed blocks by size, LIFO: a caching allocator without splitting */
    uint64_t size, *addr;
    size_t n, cap;
} cache;

static cache caches[NSITES * 2];
static size_t ncaches;
static uint64_t next_addr = 0x7f0000000000ULL;

static GEN_UNUSED cache *cache_of(uint64_t size) {
    for (size_t i = 0; i < ncaches; i++)
        if (caches[i].size == size) return &caches[i];
    caches[ncaches].size = size;
    return &caches[ncaches++];
}

static GEN_UNUSED void die(const char *what) {
    fprintf(stderr, "bench_snapshot: %s: %s\n", what, hbm_last_error());
    exit(1);
}

/* The pickle writers' bytes: a buffer that cannot grow ends the benchmark there. */
static GEN_UNUSED void gen_put(hbmi_buf *b, const void *d, size_t n) {
    if (hbmi_buf_put(b, d, n)) die("out of host memory writing the pickle");
}
static GEN_UNUSED void gen_byte(hbmi_buf *b, unsigned char c) { gen_put(b, &c, 1); }
static GEN_UNUSED void gen_pk_str(hbmi_buf *b, const char *s) {
    if (hbmi_pk_str(b, s)) die("out of host memory writing the pickle");
}
static GEN_UNUSED void gen_pk_int(hbmi_buf *b, int64_t v) {
    if (hbmi_pk_int(b, v)) die("out of host memory writing the pickle");
}
static GEN_UNUSED void gen_pk_uint(hbmi_buf *b, uint64_t v) {
    if (hbmi_pk_uint(b, v)) die("out of host memory writing the pickle");
}

static GEN_UNUSED void add(hbm_trace *t, hbm_trace_event e) {
    if (hbm_trace_add(t, &e)) die("hbm_trace_add");
}

/* the frames: user code, torch.nn modules, autograd and C++ ATen frames */
static GEN_UNUSED void make_sites(hbm_trace *t, site *sites) {
    static uint64_t frames[NFRAMES];
    static const char *files[] = {"/home/user/project/train.py", "/home/user/project/model/transformer.py",
                                  "/home/user/project/model/attention.py", "/home/user/project/model/mlp.py",
                                  "/home/user/project/data/loader.py",
                                  "/usr/lib/python3/site-packages/torch/nn/modules/module.py",
                                  "/usr/lib/python3/site-packages/torch/nn/functional.py",
                                  "/usr/lib/python3/site-packages/torch/autograd/graph.py", "??"};
    static const char *names[] = {"forward", "_call_impl", "_wrapped_call_impl", "train_step", "main",
                                  "scaled_dot_product_attention", "linear", "layer_norm", "gelu", "backward",
                                  "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)",
                                  "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)",
                                  "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)",
                                  "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"};
    for (uint32_t i = 0; i < NFRAMES; i++) {
        char fn[160];
        snprintf(fn, sizeof fn, "%s", names[rnd() % (sizeof names / sizeof names[0])]);
        hbm_tag tg = {.op_name = fn, .source_file = files[i % (sizeof files / sizeof files[0])],
                      .source_line = (int)(10 + rnd() % 900)};
        uint32_t id;
        if (hbm_trace_intern(t, &tg, &id)) die("intern");
        frames[i] = id;
    }
    for (size_t s = 0; s < NSITES; s++) {
        /* a shared prefix (main, train_step, the model), then the site's own frames */
        uint64_t st[32];
        size_t n = 10 + rnd() % 21, k = 0;
        for (; k < n / 2; k++) st[n - 1 - k] = frames[k * 7 % 60];
        for (; k < n; k++) st[n - 1 - k] = frames[60 + rnd() % (NFRAMES - 60)];
        if (hbm_trace_add_backtrace(t, st, n, &sites[s].bt)) die("backtrace");
        sites[s].tag = (uint32_t)st[0];
        /* sizes as tensors have them: 512 B to 256 MiB, log-uniform, multiples of 512 */
        double lg = 9 + (double)(rnd() % 1900) / 100.0;
        uint64_t sz = (uint64_t)1 << (int)lg;
        sz += (sz / 8) * (rnd() % 8);
        sites[s].size = (sz + 511) / 512 * 512;
    }
}

/* Stacks as _record_memory_history(stacks="all") records them: 40-80 frames, innermost
 * first: the unwinder's and the caching allocator's C++ frames, the operator's ATen and
 * autograd frames, then Python frames each with the interpreter's C++ frames under it,
 * down to main. About four frames in five are C++ ("??" or a .cpp file, line 0). */
#define NFRAMES_R 3000
static GEN_UNUSED void make_sites_real(hbm_trace *t, site *sites) {
    static uint64_t frames[NFRAMES_R];
    static const char *head[] = {"torch::unwind::unwind()", "torch::CapturedTraceback::gather(bool, bool, bool)",
                                 "torch::cuda::(anonymous namespace)::gather_with_cpp()",
                                 "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed "
                                 "char, unsigned long, CUstream_st*)",
                                 "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, "
                                 "signed char, unsigned long, CUstream_st*)",
                                 "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned "
                                 "long)"};
    static const char *interp[] = {"_PyEval_EvalFrameDefault", "_PyFunction_Vectorcall", "PyObject_Call",
                                   "_PyObject_MakeTpCall", "method_vectorcall", "cfunction_call",
                                   "slot_tp_call", "_PyObject_Call_Prepend", "pymain_run_python.constprop.0",
                                   "Py_RunMain"};
    static const char *aten[] = {"at::_ops::%s::call(at::Tensor const&, at::Tensor const&)",
                                 "at::native::%s_out_cuda(at::Tensor const&, at::Tensor const&, at::Tensor&)",
                                 "torch::autograd::VariableType::(anonymous namespace)::%s(c10::DispatchKeySet, "
                                 "at::Tensor const&)",
                                 "torch::autograd::generated::%sBackward0::apply(std::vector<at::Tensor, "
                                 "std::allocator<at::Tensor> >&&)",
                                 "at::(anonymous namespace)::wrapper_CUDA_%s(at::Tensor const&)"};
    static const char *ops[] = {"mm", "bmm", "addmm", "softmax", "layer_norm", "gelu", "mul", "add", "cat",
                                "_scaled_dot_product_efficient_attention", "empty_strided", "native_dropout"};
    static const char *pyfiles[] = {"/home/user/project/train.py", "/home/user/project/model/transformer.py",
                                    "/home/user/project/model/attention.py", "/home/user/project/model/mlp.py",
                                    "/usr/lib/python3/site-packages/torch/nn/modules/module.py",
                                    "/usr/lib/python3/site-packages/torch/nn/functional.py",
                                    "/usr/lib/python3/site-packages/torch/_tensor.py",
                                    "/usr/lib/python3/site-packages/torch/autograd/graph.py"};
    static const char *pynames[] = {"forward", "_call_impl", "_wrapped_call_impl", "train_step", "main",
                                    "scaled_dot_product_attention", "linear", "layer_norm", "gelu", "backward",
                                    "_engine_run_backward", "<module>"};
    for (uint32_t i = 0; i < NFRAMES_R; i++) {
        char fn[200];
        hbm_tag tg = {.op_name = fn, .source_file = "??"};
        if (i < 6) {
            snprintf(fn, sizeof fn, "%s", head[i]);
            if (i == 2) tg.source_file = "/pytorch/torch/csrc/cuda/memory_snapshot.cpp";
        } else if (i < 16) {
            snprintf(fn, sizeof fn, "%s", interp[i - 6]);
        } else if (i < 1216) {
            snprintf(fn, sizeof fn, aten[rnd() % 5], ops[rnd() % 12]);
            if (i % 3 == 0) tg.source_file = "/pytorch/build/aten/src/ATen/RegisterCUDA.cpp";
            snprintf(fn + strlen(fn), sizeof fn - strlen(fn), "%s", i % 2 ? "" : " [clone .isra.0]");
        } else {
            snprintf(fn, sizeof fn, "%s", pynames[rnd() % 12]);
            tg.source_file = pyfiles[i % 8];
            tg.source_line = (int)(10 + rnd() % 1500);
        }
        uint32_t id;
        if (hbm_trace_intern(t, &tg, &id)) die("intern");
        frames[i] = id;
    }
    for (size_t s = 0; s < NSITES; s++) {
        uint64_t st[96];
        size_t n = 40 + rnd() % 41, k = 0;
        for (; k < 6; k++) st[k] = frames[k];
        for (size_t m = 4 + rnd() % 10; m--;) st[k++] = frames[16 + rnd() % 1200];
        /* Python frames (the site's own, then a shared prefix down to main), each with
         * one to three interpreter frames under it */
        for (size_t depth = 0; k < n; depth++) {
            size_t left = n - k;
            st[k++] = frames[left > 12 ? 1216 + rnd() % (NFRAMES_R - 1216) : 1216 + (left * 7) % 60];
            for (size_t j = 1 + rnd() % 3; j-- && k < n;) st[k++] = frames[6 + rnd() % 8];
        }
        st[n - 1] = frames[15];
        if (hbm_trace_add_backtrace(t, st, n, &sites[s].bt)) die("backtrace");
        sites[s].tag = (uint32_t)st[0];
        double lg = 9 + (double)(rnd() % 1900) / 100.0;
        uint64_t sz = (uint64_t)1 << (int)lg;
        sz += (sz / 8) * (rnd() % 8);
        sites[s].size = (sz + 511) / 512 * 512;
    }
}

/* One training step: forward allocates activations (with short-lived temporaries), backward
 * frees them in reverse with a gradient temporary each. */
static GEN_UNUSED void step(hbm_trace *t, const site *sites, uint64_t *clock, uint64_t *live) {
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < NSITES; k++) {
            size_t s = pass ? NSITES - 1 - k : k;
            uint64_t sizes[2] = {sites[s].size, sites[(s * 31 + 7) % NSITES].size};
            for (int j = 0; j < 2; j++) {
                int keep = !pass && !j; /* the activation */
                if (pass && !j) continue;
                cache *c = cache_of(sizes[j]);
                uint64_t addr;
                *clock += 1 + rnd() % 40;
                if (c->n) {
                    addr = c->addr[--c->n];
                } else {
                    uint64_t seg = (sizes[j] + (2u << 20) - 1) / (2u << 20) * (2u << 20);
                    addr = next_addr;
                    next_addr += seg;
                    add(t, (hbm_trace_event){.kind = HBM_EV_SEGMENT_ALLOC, .time_ns = *clock * 1000, .addr = addr,
                                             .size = seg});
                }
                add(t, (hbm_trace_event){.kind = HBM_EV_ALLOC, .time_ns = *clock * 1000, .addr = addr,
                                         .size = sizes[j], .requested = sizes[j], .tag = sites[s].tag,
                                         .backtrace = sites[s].bt});
                if (keep) {
                    live[s] = addr;
                    continue;
                }
                *clock += 1 + rnd() % 40;
                add(t, (hbm_trace_event){.kind = HBM_EV_FREE, .time_ns = *clock * 1000, .addr = addr,
                                         .size = sizes[j], .tag = sites[s].tag, .backtrace = sites[s].bt});
                if (hbmi_grow((void **)&c->addr, &c->cap, c->n + 1, sizeof *c->addr)) die("grow");
                c->addr[c->n++] = addr;
            }
            if (pass) {
                cache *c = cache_of(sites[s].size);
                *clock += 1 + rnd() % 40;
                add(t, (hbm_trace_event){.kind = HBM_EV_FREE, .time_ns = *clock * 1000, .addr = live[s],
                                         .size = sites[s].size, .tag = sites[s].tag, .backtrace = sites[s].bt});
                if (hbmi_grow((void **)&c->addr, &c->cap, c->n + 1, sizeof *c->addr)) die("grow");
                c->addr[c->n++] = live[s];
            }
        }
}

static GEN_UNUSED hbm_trace *generate(uint64_t events, int real) {
    hbm_trace *t;
    if (hbm_trace_new(&t)) die("hbm_trace_new");
    snprintf(t->source, sizeof t->source, "torch");
    snprintf(t->device, sizeof t->device, "cuda:0");
    t->stacks = 1;
    t->has_time = 1;
    static site sites[NSITES];
    static uint64_t live[NSITES];
    if (real) make_sites_real(t, sites);
    else make_sites(t, sites);
    uint64_t clock = 0;
    while (t->count < events) step(t, sites, &clock, live);
    return t;
}

/* --- the pickle, as PyTorch writes it ------------------------------------------------ */

typedef struct pkw {
    hbmi_buf b;
    FILE *f;
    uint32_t memo;          /* next memo index */
    uint32_t key_at[16];    /* memo index of each key / action name (0: not yet written) */
    uint32_t *frame_at;     /* memo index of each frame dict, by tag id (0: not yet) */
} pkw;

static GEN_UNUSED void flush(pkw *w, int all) {
    if (w->b.n >= ((size_t)16 << 20) || (all && w->b.n)) {
        if (fwrite(w->b.p, 1, w->b.n, w->f) != w->b.n) die("writing the pickle");
        w->b.n = 0;
    }
}

static GEN_UNUSED void put_memo(pkw *w) { /* LONG_BINPUT: Python's pickler memoizes every object */
    unsigned char op[5] = {'r'};
    hbmi_put32(op + 1, w->memo++);
    gen_put(&w->b, op, 5);
}

static GEN_UNUSED void get_memo(pkw *w, uint32_t at) {
    unsigned char op[5] = {'j'};
    hbmi_put32(op + 1, at);
    gen_put(&w->b, at < 256 ? (unsigned char[]){'h', (unsigned char)at} : op, at < 256 ? 2 : 5);
}

/* a key or action name: once, then from the memo (Python interns them) */
static GEN_UNUSED void put_name(pkw *w, int k, const char *s) {
    if (w->key_at[k]) {
        get_memo(w, w->key_at[k] - 1);
        return;
    }
    gen_pk_str(&w->b, s);
    w->key_at[k] = w->memo + 1;
    put_memo(w);
}

enum { K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_TIME, K_FRAMES, K_FILENAME, K_LINE, K_NAME, A_ALLOC, A_FREE, A_SEGMENT,
       K_SEGMENTS, K_TRACES };

static GEN_UNUSED void put_frames(pkw *w, const hbm_trace *t, uint32_t bt) {
    size_t n = 0;
    const uint64_t *fr = hbm_trace_backtrace(t, bt, &n);
    gen_byte(&w->b, ']');
    put_memo(w);
    gen_byte(&w->b, '(');
    for (size_t i = 0; i < n; i++) {
        uint32_t id = (uint32_t)fr[i];
        if (w->frame_at[id]) {
            get_memo(w, w->frame_at[id] - 1);
            continue;
        }
        const hbm_tag *tg = hbm_trace_tag(t, id);
        gen_byte(&w->b, '}');
        w->frame_at[id] = w->memo + 1;
        put_memo(w);
        gen_byte(&w->b, '(');
        put_name(w, K_FILENAME, "filename");
        gen_pk_str(&w->b, tg->source_file);
        put_memo(w);
        put_name(w, K_LINE, "line");
        gen_pk_int(&w->b, tg->source_line);
        put_name(w, K_NAME, "name");
        gen_pk_str(&w->b, tg->op_name);
        put_memo(w);
        gen_byte(&w->b, 'u');
    }
    gen_byte(&w->b, 'e');
}

static GEN_UNUSED int write_pickle(const hbm_trace *t, const char *path) {
    pkw w = {.f = fopen(path, "wb"), .frame_at = hbmi_calloc(NFRAMES + 2, sizeof *w.frame_at)};
    if (!w.f || !w.frame_at) die("opening the pickle");
    gen_put(&w.b, "\x80\x02}", 3); /* PROTO 2, the snapshot dict */
    put_memo(&w);
    gen_byte(&w.b, '(');
    /* "segments": the end state is not what this bench measures; the history is */
    put_name(&w, K_SEGMENTS, "segments");
    gen_byte(&w.b, ']');
    put_memo(&w);
    put_name(&w, K_TRACES, "device_traces");
    gen_byte(&w.b, ']');
    put_memo(&w);
    gen_byte(&w.b, ']'); /* device 0's entries */
    put_memo(&w);
    gen_byte(&w.b, '(');
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        int seg = e->kind == HBM_EV_SEGMENT_ALLOC;
        gen_byte(&w.b, '}');
        put_memo(&w);
        gen_byte(&w.b, '(');
        put_name(&w, K_ACTION, "action");
        if (seg) put_name(&w, A_SEGMENT, "segment_alloc");
        else if (e->kind == HBM_EV_ALLOC) put_name(&w, A_ALLOC, "alloc");
        else put_name(&w, A_FREE, "free_completed");
        put_name(&w, K_ADDR, "addr");
        gen_pk_uint(&w.b, e->addr);
        put_name(&w, K_SIZE, "size");
        gen_pk_uint(&w.b, e->size);
        put_name(&w, K_STREAM, "stream");
        gen_pk_int(&w.b, 0);
        put_name(&w, K_TIME, "time_us");
        gen_pk_uint(&w.b, e->time_ns / 1000);
        put_name(&w, K_FRAMES, "frames");
        if (seg) {
            gen_byte(&w.b, ']');
            put_memo(&w);
        } else {
            put_frames(&w, t, e->backtrace);
        }
        gen_byte(&w.b, 'u');
        if ((i + 1) % 1000 == 0) gen_put(&w.b, "e(", 2); /* APPENDS in batches of 1000 */
        flush(&w, 0);
    }
    gen_put(&w.b, "eau.", 4); /* entries, device_traces, the dict, STOP */
    flush(&w, 1);
    hbmi_buf_free(&w.b);
    hbmi_free(w.frame_at);
    return fclose(w.f);
}

/* --- the pickle, as Python writes a snapshot whose frames are distinct objects -------
 * Protocol 4 as pickle.dump writes it by default: FRAME opcodes every 64 KiB, MEMOIZE
 * after every str, dict and list, BINGET / LONG_BINGET for an object met again. Strings
 * are shared objects (met again: read back from the memo); each event's frames list and
 * each of its frame dicts are new objects (written out in full every time), as in a
 * snapshot whose history was built or copied in Python, except that a frame met twice in
 * one stack (the interpreter's, under several Python frames) is one object there, read
 * back the second time, as in a real CS336 history copied so. Keys as PyTorch orders them. */

typedef struct pyw {
    hbmi_buf b; /* the current frame */
    FILE *f;
    uint32_t memo;
    hbmi_map str_at; /* string hash -> memo index + 1 */
} pyw;

static GEN_UNUSED void py_commit(pyw *w, int force) { /* the framer: a frame once it holds 64 KiB */
    if (w->b.n < 65536 && !(force && w->b.n)) return;
    unsigned char h[9] = {0x95};
    hbmi_put64(h + 1, w->b.n);
    if (fwrite(h, 1, 9, w->f) != 9 || fwrite(w->b.p, 1, w->b.n, w->f) != w->b.n)
        die("writing the pickle");
    w->b.n = 0;
}

static GEN_UNUSED void py_memoize(pyw *w) {
    gen_byte(&w->b, 0x94);
    w->memo++;
}

static GEN_UNUSED void py_get(pyw *w, uint32_t at) {
    unsigned char op[5] = {'j'};
    hbmi_put32(op + 1, at);
    gen_put(&w->b, at < 256 ? (unsigned char[]){'h', (unsigned char)at} : op, at < 256 ? 2 : 5);
}

static GEN_UNUSED void py_str(pyw *w, const char *s) {
    size_t n = strlen(s);
    uint64_t h = 1469598103934665603ull, at;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    h = hbmi_hash64(h) & (UINT64_MAX >> 1);
    if (hbmi_map_get(&w->str_at, h, &at)) {
        py_get(w, (uint32_t)at - 1);
        return;
    }
    if (n < 256) {
        gen_put(&w->b, (unsigned char[]){0x8c, (unsigned char)n}, 2);
    } else {
        unsigned char op[5] = {'X'};
        hbmi_put32(op + 1, (uint32_t)n);
        gen_put(&w->b, op, 5);
    }
    gen_put(&w->b, s, n);
    if (hbmi_map_put(&w->str_at, h, (uint64_t)w->memo + 1)) die("memo");
    py_memoize(w);
}

static GEN_UNUSED void py_int(pyw *w, int64_t v) { /* BININT1, BININT2, BININT, else LONG1 (shortest) */
    if (v >= 0 && v < 256) {
        gen_put(&w->b, (unsigned char[]){'K', (unsigned char)v}, 2);
    } else if (v >= 0 && v < 65536) {
        gen_put(&w->b, (unsigned char[]){'M', (unsigned char)v, (unsigned char)(v >> 8)}, 3);
    } else {
        gen_pk_int(&w->b, v);
    }
}

static GEN_UNUSED void py_frames(pyw *w, const hbm_trace *t, uint32_t bt) {
    size_t n = 0;
    const uint64_t *fr = bt ? hbm_trace_backtrace(t, bt, &n) : NULL;
    gen_byte(&w->b, ']');
    py_memoize(w);
    if (n > 1) gen_byte(&w->b, '(');
    uint32_t at[128]; /* the memo index of each place's dict */
    for (size_t i = 0; i < n; i++) {
        const hbm_tag *tg = hbm_trace_tag(t, (uint32_t)fr[i]);
        py_commit(w, 0);
        size_t j = 0;
        while (j < i && j < 128 && fr[j] != fr[i]) j++;
        if (j < i && j < 128) { /* met before in this stack: the same object */
            py_get(w, at[j]);
            continue;
        }
        if (i < 128) at[i] = w->memo;
        gen_byte(&w->b, '}');
        py_memoize(w);
        gen_byte(&w->b, '(');
        py_str(w, "name");
        py_str(w, tg->op_name);
        py_str(w, "filename");
        py_str(w, tg->source_file);
        py_str(w, "line");
        py_int(w, tg->source_line);
        gen_byte(&w->b, 'u');
    }
    if (n == 1) gen_byte(&w->b, 'a');
    if (n > 1) gen_byte(&w->b, 'e');
}

static GEN_UNUSED void py_entry(pyw *w, const hbm_trace *t, const hbm_trace_event *e, const char *action) {
    py_commit(w, 0);
    gen_byte(&w->b, '}');
    py_memoize(w);
    gen_byte(&w->b, '(');
    py_str(w, "action");
    py_str(w, action);
    py_str(w, "addr");
    py_int(w, (int64_t)e->addr);
    py_str(w, "size");
    py_int(w, (int64_t)e->size);
    py_str(w, "stream");
    py_int(w, 0);
    py_str(w, "time_us");
    py_int(w, (int64_t)(e->time_ns / 1000));
    py_str(w, "compile_context");
    py_str(w, "N/A");
    py_str(w, "user_metadata");
    py_str(w, "");
    py_str(w, "frames");
    py_frames(w, t, e->kind == HBM_EV_SEGMENT_ALLOC ? 0 : e->backtrace);
    gen_byte(&w->b, 'u');
}

static GEN_UNUSED int write_pickle_real(const hbm_trace *t, const char *path, size_t *entries) {
    pyw w = {.f = fopen(path, "wb")};
    if (!w.f) die("opening the pickle");
    hbmi_map_init(&w.str_at);
    if (fwrite("\x80\x04", 1, 2, w.f) != 2) die("writing the pickle");
    gen_byte(&w.b, '}');
    py_memoize(&w);
    gen_byte(&w.b, '(');
    py_str(&w, "segments");
    gen_byte(&w.b, ']');
    py_memoize(&w);
    py_str(&w, "device_traces");
    gen_byte(&w.b, ']');
    py_memoize(&w);
    gen_byte(&w.b, ']'); /* device 0's entries, appended in batches of 1000 */
    py_memoize(&w);
    gen_byte(&w.b, '(');
    size_t n = 0;
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        /* a free is requested, then completed once its stream's work is done */
        const char *a[2] = {e->kind == HBM_EV_SEGMENT_ALLOC ? "segment_alloc" : e->kind == HBM_EV_ALLOC ? "alloc"
                                                                                                   : "free_requested",
                            e->kind == HBM_EV_FREE ? "free_completed" : NULL};
        for (int k = 0; k < 2 && a[k]; k++) {
            py_entry(&w, t, e, a[k]);
            if (++n % 1000 == 0) gen_put(&w.b, "e(", 2);
        }
    }
    gen_put(&w.b, "eau.", 4); /* entries, device_traces, the dict, STOP */
    py_commit(&w, 1);
    hbmi_buf_free(&w.b);
    hbmi_map_destroy(&w.str_at);
    *entries = n;
    return fclose(w.f);
}

#endif
