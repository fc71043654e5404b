/* test_plan_model.c - one model of an XLA program: on every module of the shared corpus
 * (HBM_SHARED_DATA/hlo/xladumps, jaxdecomp, tpu) the plan's timeline, the trace the other
 * commands read (hbm view/replay/diff/export, hbm.load: hbm_trace_load), the explanation and
 * the Memory Viewer agree with each other and with XLA's layout:
 *  - the timeline is a valid placement (hbm_timeline_verify: no two buffers share bytes at
 *    one step) whose peak is the plan's peak_live_bytes at peak_step, never above peak_bytes;
 *  - the buffers live at the peak sum to the peak; the trace's peak is the same;
 *  - the temp heap's live peak is at most its size (fragmentation >= 0);
 *  - per memory space, the viewer's peak heap is at most its total allocation, and its
 *    buffers at the peak (small ones grouped) sum to the peak heap.
 * Plus a small module of our own where sharing matters (in-place updates, a donated
 * parameter). Skips the corpus when the data is absent. */
#include <dirent.h>
#include <stdlib.h>

#include "core/internal.h"
#include "plan/memview.h"
#include "report/view_internal.h"
#include "test.h"
#include "trace/trace_internal.h"

static int n_modules, n_ok, n_other_buffers;

/* What a command wrote, in memory. */
typedef struct outbuf {
    char *p;
    size_t n;
    FILE *f;
} outbuf;
static FILE *out_open(outbuf *o) {
    o->p = NULL;
    o->n = 0;
    return o->f = open_memstream(&o->p, &o->n);
}
static char *out_close(outbuf *o) {
    fclose(o->f);
    return o->p;
}

/* Whether the text has want; says which command and module when not. */
static int says(const char *text, const char *want, const char *cmd, const char *name) {
    if (text && strstr(text, want)) return 1;
    fprintf(stderr, "  %s: %s does not say %s\n", name, cmd, want);
    return 0;
}

/* Every command that shows a module's figures agrees with the plan: the same peak, at the same
 * step with its instruction, with the same buffers live there (the plan's timeline buffers,
 * identified by their place), as the trace that view, replay, diff, export and hbm.load read
 * and the Memory Viewer of the device space show them; and what each writes says so. Sets
 * g_differs when some command names other buffers at the peak than the plan. */
static int g_differs; /* set by check_commands */
static void check_commands(hbm_plan *p, const char *path) {
    g_differs = 1; /* until shown otherwise */
    hbm_plan_stats st;
    hbm_plan_get_stats(p, &st);
    const hbm_timeline *tl = hbm_plan_timeline(p);
    const char *step_name = hbm_plan_step_name(p, st.peak_step);
    char name[320];
    snprintf(name, sizeof name, "%s", step_name);
    /* the plan's buffers at its peak: timeline indices */
    size_t n = tl->count;
    uint8_t *plan_set = calloc(n + 1, 1), *other = calloc(n + 1, 1);
    for (size_t i = 0; i < n; i++)
        plan_set[i] = st.peak_live_bytes && tl->buffers[i].start <= st.peak_step && st.peak_step < tl->buffers[i].end;
    int differs = 0, ok = 1;
    /* the trace (hbm_trace_load: what the CLI and hbm.load read) and its view model */
    hbm_trace *t = NULL;
    if (path) CHECK_OK(hbm_trace_load(path, &t)); /* as the CLI and hbm.load read it */
    else CHECK_OK(hbm_plan_trace(p, &t));         /* (a plan made with other options) */
    if (!path) path = "(module)";
    if (!t) {
        free(plan_set);
        free(other);
        return;
    }
    hbmi_view v;
    CHECK_OK(hbmi_view_build(t, &v));
    const char *tname;
    int64_t tstep = v.peak_use ? hbm_trace_event_step(t, v.peak_i, &tname) : -1;
    if (v.peak_use != st.peak_live_bytes || (v.peak_use && (tstep != st.peak_step || strcmp(tname, name)))) {
        fprintf(stderr, "  %s: trace peak %" PRIu64 " at step %" PRId64 ", plan %" PRIu64 " at %" PRId64 "\n", path,
                v.peak_use, tstep, st.peak_live_bytes, st.peak_step);
        ok = 0;
    }
    if (v.at_peak_bytes != v.peak_use) ok = 0; /* the buffers at the peak sum to it */
    for (size_t k = 0; k < v.n_at_peak; k++) { /* each trace buffer is a timeline buffer by its address */
        uint64_t addr = v.tl->buffers[v.at_peak[k]].offset, i = (addr - 0x100000000ULL) / 256u;
        if (i < n) other[i] = 1;
        else differs = 1;
    }
    if (memcmp(plan_set, other, n)) differs = 1;
    if (differs && getenv("DEBUG_MODEL")) fprintf(stderr, "  %s: trace buffers at the peak differ\n", path);
    /* the Memory Viewer's device space: its peak and buffers at the peak (none grouped) */
    hbmi_memview mv;
    CHECK_OK(hbmi_memview_build(p, 1, &mv)); /* (1: none grouped) */
    memset(other, 0, n);
    for (size_t si = 0; si < mv.n_spaces; si++) {
        const hbmi_memview_space *sp = &mv.spaces[si];
        if (sp->color) continue;
        if (sp->peak != st.peak_live_bytes || (sp->peak && sp->peak_at != st.peak_step)) {
            fprintf(stderr, "  %s: viewer peak %" PRIu64 " at %" PRId64 "\n", path, sp->peak, sp->peak_at);
            ok = 0;
        }
        /* span index -> timeline index: the timeline holds the device spans in order */
        size_t *tl_of = calloc(p->n_spans + 1, sizeof *tl_of), k = 0;
        for (size_t i = 0; i < p->n_spans; i++) tl_of[i] = p->spans[i].color == 0 ? k++ : SIZE_MAX;
        for (size_t j = 0; j < sp->n_objs; j++)
            if (tl_of[sp->objs[j]] < n) other[tl_of[sp->objs[j]]] = 1;
        if (sp->peak && memcmp(plan_set, other, n)) {
            differs = 1;
            if (getenv("DEBUG_MODEL")) fprintf(stderr, "  %s: viewer buffers at the peak differ\n", path);
        }
        free(tl_of);
    }
    hbmi_memview_free(&mv);
    /* what each command writes names the peak where the plan does */
    char want[512], peak[64];
    snprintf(peak, sizeof peak, "%" PRIu64, st.peak_live_bytes);
    outbuf o;
    char *txt;
    if (st.peak_live_bytes) {
        char jname[400];
        FILE *js = fmemopen(jname, sizeof jname, "w");
        hbmi_json_str(js, name);
        fclose(js);
        /* plan --json */
        CHECK_OK(hbm_plan_json(p, out_open(&o), 15, 0, 0));
        txt = out_close(&o);
        snprintf(want, sizeof want, "\"peak_step\": %" PRId64 ",", st.peak_step);
        ok &= says(txt, want, "plan --json", path);
        snprintf(want, sizeof want, "\"peak_instruction\": %s", jname);
        ok &= says(txt, want, "plan --json", path);
        snprintf(want, sizeof want, "\"peak_live_bytes\": %s,", peak);
        ok &= says(txt, want, "plan --json", path);
        free(txt);
        /* plan (text): the explanation */
        CHECK_OK(hbm_plan_explain(p, out_open(&o), 0, 0, NULL, 15));
        txt = out_close(&o);
        snprintf(want, sizeof want, "step %" PRId64 " of %zu (instruction %s)", st.peak_step, st.n_steps, name);
        ok &= says(txt, want, "plan", path);
        free(txt);
        /* view --json of the module (the Memory Viewer) */
        CHECK_OK(hbm_plan_view_json(p, NULL, out_open(&o)));
        txt = out_close(&o);
        snprintf(want, sizeof want, "\"peak_heap_bytes\": %s", peak);
        ok &= says(txt, want, "view --json", path);
        free(txt);
        /* the trace's commands: view --json (hbm.load), diff --json, replay --json, export */
        snprintf(want, sizeof want, "\"peak_step\": %" PRId64 ", \"peak_instruction\": %s", st.peak_step, jname);
        CHECK_OK(hbm_view_all(t, 1, NULL, out_open(&o)));
        txt = out_close(&o);
        ok &= says(txt, want, "hbm.load / view --json (trace)", path);
        free(txt);
        CHECK_OK(hbm_diff_write(t, t, 5, 1, out_open(&o)));
        txt = out_close(&o);
        ok &= says(txt, want, "diff --json", path);
        free(txt);
        hbm_replay_result none;
        memset(&none, 0, sizeof none);
        CHECK_OK(hbm_replay_write(t, "sim:80GiB", &none, 0, NULL, out_open(&o), 1));
        txt = out_close(&o);
        ok &= says(txt, want, "replay --json", path);
        free(txt);
        CHECK_OK(hbm_export_perfetto(t, out_open(&o)));
        txt = out_close(&o);
        char pw[600];
        snprintf(pw, sizeof pw, "{\"bytes\": %s, %s", peak, want);
        ok &= says(txt, pw, "export --format perfetto", path);
        free(txt);
        /* the text forms say the same position */
        snprintf(want, sizeof want, "at step %" PRId64 " (", st.peak_step);
        CHECK_OK(hbm_diff_write(t, t, 5, 0, out_open(&o)));
        txt = out_close(&o);
        ok &= says(txt, want, "diff", path);
        free(txt);
        CHECK_OK(hbm_replay_write(t, "sim:80GiB", &none, 0, NULL, out_open(&o), 0));
        txt = out_close(&o);
        ok &= !strstr(txt, " event ") || says(NULL, "no event", "replay", path);
        free(txt);
    }
    hbmi_view_free(&v);
    hbm_trace_free(t);
    free(plan_set);
    free(other);
    if (!ok) test_failures_++;
    g_differs = differs;
}

static void check_plan(hbm_plan *p, const char *name) {
    hbm_plan_stats st;
    CHECK_OK(hbm_plan_get_stats(p, &st));
    const hbm_timeline *tl = hbm_plan_timeline(p);
    CHECK(tl);
    hbm_status vs = hbm_timeline_verify(tl, 0);
    if (vs) fprintf(stderr, "  %s: %s\n", name, hbm_last_error());
    CHECK_OK(vs);
    uint64_t peak;
    int64_t at;
    CHECK_OK(hbm_timeline_peak(tl, &peak, &at));
    if (peak != st.peak_live_bytes || (peak && at != st.peak_step))
        fprintf(stderr, "  %s: timeline peak %" PRIu64 " at %" PRId64 ", plan %" PRIu64 " at %" PRId64 "\n", name, peak,
                at, st.peak_live_bytes, st.peak_step);
    CHECK_EQ_U64(peak, st.peak_live_bytes);
    CHECK(!peak || at == st.peak_step);
    CHECK(st.peak_live_bytes <= st.peak_bytes);
    uint64_t sum = 0;
    for (size_t i = 0; i < tl->count; i++)
        if (tl->buffers[i].start <= st.peak_step && st.peak_step < tl->buffers[i].end) sum += tl->buffers[i].size;
    CHECK_EQ_U64(sum, st.peak_live_bytes);
    CHECK(p->temp_live_peak <= st.temp_size_in_bytes + st.host_temp_size_in_bytes);
    /* the viewer */
    hbmi_memview v;
    CHECK_OK(hbmi_memview_build(p, 0, &v));
    int ok = 1;
    for (size_t i = 0; i < v.n_spaces && ok; i++) {
        const hbmi_memview_space *sp = &v.spaces[i];
        uint64_t objs = sp->small_bytes;
        for (size_t k = 0; k < sp->n_objs; k++) objs += p->spans[sp->objs[k]].size;
        if (sp->peak > sp->total || objs != sp->peak || sp->peak_unpadded > sp->peak) {
            fprintf(stderr, "  %s S(%" PRId64 "): peak heap %" PRIu64 ", total %" PRIu64 ", buffers at peak %" PRIu64 "\n",
                    name, sp->color, sp->peak, sp->total, objs);
            ok = 0;
        }
        /* the device space: its peak and total are the plan's (other spaces are not device memory) */
        if (sp->color == 0) {
            if (sp->peak != st.peak_live_bytes || sp->total != st.peak_bytes) ok = 0;
        }
    }
    hbmi_memview_free(&v);
    CHECK(ok);
}

static void check_file(const char *path) {
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(hbmi_read_file(path, &text, &len));
    hbm_hlo_module *m;
    hbm_status s = hbm_hlo_parse(text, len, path, &m);
    hbmi_free(text);
    CHECK_OK(s);
    hbm_plan *p;
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    n_modules++;
    int before = test_failures_;
    check_plan(p, path);
    check_commands(p, path);
    n_other_buffers += g_differs;
    /* the trace that view, replay, diff, export and hbm.load read */
    hbm_trace *t = NULL;
    hbm_timeline *tt = NULL;
    uint64_t tp = 0;
    int64_t ta;
    hbm_plan_stats st;
    hbm_plan_get_stats(p, &st);
    if (hbm_trace_load(path, &t) == HBM_OK && hbm_trace_to_timeline(t, &tt) == HBM_OK) hbm_timeline_peak(tt, &tp, &ta);
    if (tp != st.peak_live_bytes) {
        fprintf(stderr, "  %s: trace peak %" PRIu64 ", plan %" PRIu64 "\n", path, tp, st.peak_live_bytes);
        test_failures_++;
    }
    hbm_timeline_free(tt);
    hbm_trace_free(t);
    n_ok += test_failures_ == before;
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void check_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t k = strlen(e->d_name);
        if (k < 5 || strcmp(e->d_name + k - 4, ".hlo")) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            names = realloc(names, cap * sizeof *names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        check_file(path);
        free(names[i]);
    }
    free(names);
}

static void test_corpus(void) {
    DIR *d = opendir(HBM_SHARED_DATA "/hlo/xladumps");
    if (!d) TEST_SKIP("%s not found (the shared data set is absent)", HBM_SHARED_DATA "/hlo/xladumps");
    closedir(d);
    check_dir(HBM_SHARED_DATA "/hlo/xladumps");
    check_dir(HBM_SHARED_DATA "/hlo/jaxdecomp");
    check_dir(HBM_SHARED_DATA "/hlo/tpu");
    fprintf(stderr, "one model: %d of %d modules consistent; %d where a command names other buffers at the peak "
                    "than hbm plan\n", n_ok, n_modules, n_other_buffers);
    CHECK(n_modules >= 1000);
    CHECK(n_ok == n_modules);
    CHECK(n_other_buffers == 0);
}

/* A donated parameter updated in place twice, then returned: one buffer, not three. */
static const char kInPlace[] =
    "HloModule inplace, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024], p1: f32[16,1024], i: s32[]) -> f32[1024,1024] {\n"
    "  %p0 = f32[1024,1024]{1,0} parameter(0)\n"
    "  %p1 = f32[16,1024]{1,0} parameter(1)\n"
    "  %i = s32[] parameter(2)\n"
    "  %z = s32[] constant(0)\n"
    "  %t = f32[1024,1024]{1,0} add(%p0, %p0)\n"
    "  %u1 = f32[1024,1024]{1,0} dynamic-update-slice(%t, %p1, %i, %z)\n"
    "  ROOT %u2 = f32[1024,1024]{1,0} dynamic-update-slice(%u1, %p1, %z, %z)\n"
    "}\n";

static void test_in_place(void) {
    hbm_hlo_module *m;
    CHECK_OK(hbm_hlo_parse(kInPlace, sizeof kInPlace - 1, "inplace", &m));
    hbm_plan *p;
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    hbm_plan_stats st;
    CHECK_OK(hbm_plan_get_stats(p, &st));
    check_plan(p, "inplace");
    /* the view of the plan names the same peak as the plan */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_OK(hbm_plan_view_json(p, NULL, f));
    fclose(f);
    char want[96];
    snprintf(want, sizeof want, "\"total_allocation_bytes\": %" PRIu64, st.peak_bytes);
    CHECK_CONTAINS(buf, want);
    snprintf(want, sizeof want, "\"peak_heap_bytes\": %" PRIu64, st.peak_live_bytes);
    CHECK_CONTAINS(buf, want);
    free(buf);
    /* the updates reuse their operand's bytes: the peak holds p0, p1, i and one 4 MiB buffer
     * (t, u1, u2 in one place), not three */
    CHECK(st.peak_live_bytes < 2 * 4194304 + 65536 + 4096);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

/* A TPU module with a buffer in memory space S(1) (the alternate memory XLA's memory-space
 * assignment uses, not HBM): 4 MiB temps in device memory, one 1 MiB temp in S(1). */
static const char kSpaces[] =
    "HloModule spaces, is_scheduled=true\n"
    "\n"
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = f32[1024,1024]{1,0} parameter(0)\n"
    "  %a = f32[1024,1024]{1,0} add(%p0, %p0)\n"
    "  %v = f32[256,1024]{1,0:S(1)} slice(%a), slice={[0:256], [0:1024]}\n"
    "  %b = f32[256,1024]{1,0} negate(%v)\n"
    "  %c = f32[1024,1024]{1,0} multiply(%a, %a)\n"
    "  %z = s32[] constant(0)\n"
    "  ROOT %d = f32[1024,1024]{1,0} dynamic-update-slice(%c, %b, %z, %z)\n"
    "}\n";

static void test_memory_spaces(void) {
    hbm_hlo_module *m;
    CHECK_OK(hbm_hlo_parse(kSpaces, sizeof kSpaces - 1, "spaces", &m));
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    o.backend = HBM_BACKEND_TPU;
    hbm_plan *p;
    CHECK_OK(hbm_plan_run(m, &o, &p));
    hbm_plan_stats st;
    CHECK_OK(hbm_plan_get_stats(p, &st));
    /* the 1 MiB value in S(1) is in no device figure, and is the other spaces' figure */
    CHECK_EQ_U64(st.other_space_size_in_bytes, 1048576);
    CHECK(st.total_allocation_bytes >= st.peak_bytes + st.other_space_size_in_bytes);
    CHECK_EQ_U64(st.peak_bytes, st.argument_size_in_bytes + st.output_size_in_bytes - st.alias_size_in_bytes +
                                    st.temp_size_in_bytes + st.constant_size_in_bytes);
    const hbm_timeline *tl = hbm_plan_timeline(p);
    CHECK(tl);
    for (size_t i = 0; tl && i < tl->count; i++) { /* the slice (in S(1)) is not on the device timeline */
        const hbm_tag *tg = hbm_timeline_tag(tl, i);
        CHECK(!tg || !tg->label || strcmp(tg->label, "slice"));
    }
    check_plan(p, "spaces");
    check_commands(p, NULL);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

int main(void) {
    RUN(test_in_place);
    RUN(test_memory_spaces);
    RUN(test_corpus);
    return test_done();
}
