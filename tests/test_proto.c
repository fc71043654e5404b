/* test_proto.c - XLA's protobuf inputs: content sniffing; every module of the shared HLO
 * sets written as an xla.HloModuleProto (src/hlo/proto_write.c) and read back plans exactly
 * as its text does; bad input (truncated, corrupt, hostile nesting, a trace-only profile, a
 * module without assignment) gives a clear error or note, never a crash. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hlo/hlo_internal.h"
#include "plan/plan_internal.h"
#include "test.h"

static char tmpdir[] = "/tmp/hbm_test_proto_XXXXXX";

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

static void test_sniff(void) {
    CHECK(hbm_proto_sniff("HloModule m\n", 12) == HBM_PROTO_NONE);
    CHECK(hbm_proto_sniff("\nHloModule jit_f, entry_computation_layout={()->f32[]}\n", 55) == HBM_PROTO_NONE);
    CHECK(hbm_proto_sniff("", 0) == HBM_PROTO_NONE);
    CHECK(hbm_proto_sniff(NULL, 4) == HBM_PROTO_NONE);
    /* HloModuleProto: name "jit_f", entry name */
    static const unsigned char mod[] = {0x0a, 5, 'j', 'i', 't', '_', 'f', 0x12, 4, 'm', 'a', 'i', 'n'};
    CHECK(hbm_proto_sniff(mod, sizeof mod) == HBM_PROTO_HLO_MODULE);
    /* HloProto: hlo_module { name "f" } */
    static const unsigned char hp[] = {0x0a, 3, 0x0a, 1, 'f'};
    CHECK(hbm_proto_sniff(hp, sizeof hp) == HBM_PROTO_HLO_PROTO);
    /* XSpace: planes { id 1, name "/host:metadata" } */
    static const unsigned char xs[] = {0x0a, 4, 0x08, 1, 0x12, 0};
    CHECK(hbm_proto_sniff(xs, sizeof xs) == HBM_PROTO_XSPACE);
    /* a PyTorch pickle starts 0x80: not ours */
    static const unsigned char pk[] = {0x80, 2, '}', 'q'};
    CHECK(hbm_proto_sniff(pk, sizeof pk) == HBM_PROTO_NONE);
    CHECK(hbm_proto_path_kind("/nonexistent/file") == HBM_PROTO_NONE);
}

/* two plans give the same figures and the same peak buffers */
static int plans_same(const char *name, const hbm_plan *pa, const hbm_plan *pb) {
    hbm_plan_stats x, y;
    hbm_plan_get_stats(pa, &x);
    hbm_plan_get_stats(pb, &y);
    int ok = x.argument_size_in_bytes == y.argument_size_in_bytes && x.output_size_in_bytes == y.output_size_in_bytes &&
             x.alias_size_in_bytes == y.alias_size_in_bytes && x.temp_size_in_bytes == y.temp_size_in_bytes &&
             x.constant_size_in_bytes == y.constant_size_in_bytes && x.peak_bytes == y.peak_bytes &&
             x.peak_step == y.peak_step && x.n_allocations == y.n_allocations && x.backend == y.backend &&
             x.thread_local_size_in_bytes == y.thread_local_size_in_bytes && x.n_steps == y.n_steps &&
             x.estimate == y.estimate && x.host_temp_size_in_bytes == y.host_temp_size_in_bytes;
    hbm_plan_buffer ba[15], bb[15];
    size_t na = hbm_plan_peak_buffers(pa, ba, 15), nb = hbm_plan_peak_buffers(pb, bb, 15);
    ok = ok && na == nb;
    for (size_t i = 0; ok && i < na; i++)
        ok = ba[i].size == bb[i].size && !strcmp(ba[i].label, bb[i].label) && !strcmp(ba[i].shape, bb[i].shape) &&
             !strcmp(ba[i].instruction, bb[i].instruction) && !strcmp(ba[i].op_name, bb[i].op_name) &&
             !strcmp(ba[i].source_file, bb[i].source_file) && ba[i].source_line == bb[i].source_line;
    if (!ok)
        fprintf(stderr, "%s: temp %llu peak %llu, against temp %llu peak %llu\n", name,
                (unsigned long long)x.temp_size_in_bytes, (unsigned long long)x.peak_bytes,
                (unsigned long long)y.temp_size_in_bytes, (unsigned long long)y.peak_bytes);
    return ok;
}

static int same_plan(const char *name, hbm_hlo_module *a, hbm_hlo_module *b) {
    hbm_plan *pa = NULL, *pb = NULL;
    hbm_status sa = hbm_plan_run(a, NULL, &pa), sb = hbm_plan_run(b, NULL, &pb);
    int ok = sa == sb && (sa || plans_same(name, pa, pb));
    hbm_plan_free(pa);
    hbm_plan_free(pb);
    return ok;
}

/* Module m, read from protobuf and planned as pm, written as its whole HLO text
 * (hbmi_proto_text): the text, parsed by the text parser, plans the same under the same rules
 * (the backend, and the alignment XLA's assignment showed: the text cannot say it). */
static int text_plans_same(const char *name, hbm_hlo_module *m, const hbm_plan *pm) {
    hbm_hlo_module *t = NULL;
    hbm_plan *pt = NULL;
    if (hbmi_proto_text(m) || hbm_hlo_parse(m->text, m->len, name, &t)) {
        fprintf(stderr, "%s: its text: %s\n", name, hbm_last_error());
        return 0;
    }
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    o.backend = pm->opt.backend;
    /* the alignment the proto's own assignment showed (GPU); a TPU's come from its rules,
     * which an alignment given as an option would replace */
    o.alignment = pm->opt.backend == HBM_BACKEND_TPU ? 0 : pm->opt.alignment;
    int ok = !hbm_plan_run(t, &o, &pt) && plans_same(name, pm, pt) &&
             hbm_hlo_instruction_count(t) == hbm_hlo_instruction_count(m) &&
             hbm_hlo_computation_count(t) == hbm_hlo_computation_count(m) && hbm_hlo_is_scheduled(t) == hbm_hlo_is_scheduled(m);
    hbm_plan_free(pt);
    hbm_hlo_module_free(t);
    return ok;
}

/* every `step`-th *.hlo of dir: text and its HloModuleProto plan the same, and so does the
 * text written back from the proto (*n_text of them, *bad_text differ) */
static int round_trip_dir(const char *dir, int step, int *n_out, int *n_text, int *bad_text) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    int k = 0, bad = 0, n = 0;
    char path[4096], pb[4096];
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".hlo") || (k++ % step)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        hbm_hlo_module *mt, *mp;
        if (hbm_hlo_parse_file(path, &mt)) continue; /* a module the text reader rejects: not this test's */
        uint8_t *bytes;
        size_t len;
        if (hbmi_proto_write_module(mt, 1, &bytes, &len)) {
            hbm_hlo_module_free(mt);
            bad++;
            continue;
        }
        snprintf(pb, sizeof pb, "%s/%s.hlo.pb", tmpdir, e->d_name);
        write_file(pb, bytes, len);
        hbmi_free(bytes);
        if (hbm_proto_path_kind(pb) != HBM_PROTO_HLO_MODULE || hbm_hlo_parse_file(pb, &mp)) {
            fprintf(stderr, "%s: %s\n", e->d_name, hbm_last_error());
            hbm_hlo_module_free(mt);
            bad++;
            unlink(pb);
            continue;
        }
        unlink(pb);
        if (hbm_hlo_instruction_count(mt) != hbm_hlo_instruction_count(mp) ||
            hbm_hlo_computation_count(mt) != hbm_hlo_computation_count(mp) ||
            hbm_hlo_is_scheduled(mt) != hbm_hlo_is_scheduled(mp) || !same_plan(e->d_name, mt, mp))
            bad++;
        n++;
        hbm_plan *pp = NULL;
        if (!hbm_plan_run(mp, NULL, &pp)) {
            (*n_text)++;
            *bad_text += !text_plans_same(e->d_name, mp, pp);
        }
        hbm_plan_free(pp);
        hbm_hlo_module_free(mt);
        hbm_hlo_module_free(mp);
    }
    closedir(d);
    *n_out = n;
    return bad;
}

static void test_round_trip(void) {
    int n1 = 0, n2 = 0, nt = 0, bt = 0;
    int b1 = round_trip_dir(HBM_SHARED_DATA "/hlo/jaxdecomp", 1, &n1, &nt, &bt);
    int b2 = round_trip_dir(HBM_SHARED_DATA "/hlo/xladumps", 7, &n2, &nt, &bt);
    int n3 = 0, b3 = round_trip_dir(HBM_SHARED_DATA "/hlo/tpu", 1, &n3, &nt, &bt); /* tiled layouts */
    n2 += n3;
    if (b3 > 0) b2 = (b2 > 0 ? b2 : 0) + b3;
    if (b1 < 0 && b2 < 0) TEST_SKIP("%s not found (the shared data set is absent)", HBM_SHARED_DATA "/hlo");
    fprintf(stderr, "round trip text -> HloModuleProto -> hbm: %d + %d modules, %d differ\n", n1, n2,
            (b1 > 0 ? b1 : 0) + (b2 > 0 ? b2 : 0));
    fprintf(stderr, "HloModuleProto -> its HLO text -> the text parser: %d modules, %d differ\n", nt, bt);
    CHECK(b1 <= 0 && b2 <= 0);
    CHECK(n1 + n2 > 100);
    CHECK(bt == 0);
    CHECK(nt == n1 + n2);
}

static const char *small_text =
    "HloModule jit_small, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }\n"
    "ENTRY %main (p: f32[1024]) -> f32[1024] {\n"
    "  %p = f32[1024]{0} parameter(0), metadata={op_name=\"x\\\"y\" source_file=\"a.py\" source_line=3}\n"
    "  %e = f32[1024]{0} exponential(%p)\n"
    "  ROOT %n = f32[1024]{0} negate(%e)\n"
    "}\n";

static void small_proto(uint8_t **bytes, size_t *len) {
    hbm_hlo_module *m;
    *bytes = NULL;
    if (hbm_hlo_parse(small_text, strlen(small_text), "small", &m)) return;
    if (hbmi_proto_write_module(m, 1, bytes, len)) *bytes = NULL;
    hbm_hlo_module_free(m);
}

/* --- hbm fit on a module read from protobuf --------------------------------------------------- */
static const char *fit_text =
    "HloModule fit_remat, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}\n"
    "ENTRY %main (p0: f32[1024,1024]) -> f32[1024,1024] {\n"
    "  %p0 = f32[1024,1024]{1,0} parameter(0)\n"
    "  %a = f32[1024,1024]{1,0} exponential(%p0), metadata={op_name=\"jit(f)/exp\" source_file=\"model.py\" source_line=12}\n"
    "  %b = f32[1024,1024]{1,0} negate(%a)\n"
    "  %c = f32[1024,1024]{1,0} dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %d = f32[1024,1024]{1,0} dot(%c, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %e = f32[1024,1024]{1,0} dot(%d, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %f = f32[1024,1024]{1,0} dot(%e, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %g = f32[1024,1024]{1,0} add(%f, %a)\n"
    "  ROOT %h = f32[1024,1024]{1,0} negate(%g)\n"
    "}\n";

static int same_str(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

static int same_set(const hbm_fit_set *a, const hbm_fit_set *b) {
    return a->found == b->found && a->fits == b->fits && a->proven_optimal == b->proven_optimal &&
           a->from_baseline == b->from_baseline && a->peak_bytes == b->peak_bytes &&
           a->recompute_flops == b->recompute_flops && a->offload_bytes == b->offload_bytes &&
           a->n_changes == b->n_changes && same_str(a->xla_message, b->xla_message);
}

/* the peak of the module r emits, planned again */
static uint64_t emitted_peak(const hbm_fit_result *r) {
    char *t = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&t, &n);
    uint64_t peak = 0;
    if (!f) return 0;
    hbm_status s = hbm_fit_emit(r, f);
    fclose(f);
    hbm_hlo_module *m;
    hbm_plan *p;
    if (!s && !hbm_hlo_parse(t, n, "emitted", &m)) {
        if (!hbm_plan_run(m, NULL, &p)) {
            hbm_plan_stats st;
            hbm_plan_get_stats(p, &st);
            peak = st.peak_bytes;
            hbm_plan_free(p);
        }
        hbm_hlo_module_free(m);
    }
    free(t);
    return peak;
}

/* fit on the module's text and on the same module written as an xla.HloModuleProto and read
 * back: the same advice (every change, each set) and the same figures; the module fit emits
 * from the proto (its text written by hbmi_proto_text, then changed) plans to them */
static int fit_same(const char *what, const char *text, size_t len, const hbm_fit_options *o) {
    hbm_hlo_module *mt = NULL, *mp = NULL;
    hbm_proto_file *f = NULL;
    uint8_t *b = NULL;
    size_t bl = 0;
    hbm_fit_result *rt = NULL, *rp = NULL;
    int ok = 0;
    if (hbm_hlo_parse(text, len, what, &mt) || hbmi_proto_write_module(mt, 1, &b, &bl) ||
        hbm_proto_open_mem(b, bl, what, &f) || hbm_proto_load(f, 0, &mp)) {
        fprintf(stderr, "%s: %s\n", what, hbm_last_error());
        goto out;
    }
    if (hbm_fit_run(mt, o, &rt) || hbm_fit_run(mp, o, &rp)) {
        fprintf(stderr, "%s: fit: %s\n", what, hbm_last_error());
        goto out;
    }
    hbm_fit_summary a, c;
    hbm_fit_get_summary(rt, &a);
    hbm_fit_get_summary(rp, &c);
    ok = same_str(a.module, c.module) && a.target_bytes == c.target_bytes && a.peak_before == c.peak_before &&
         a.temp_bytes == c.temp_bytes && a.fits == c.fits && a.n_changes == c.n_changes && same_set(&a.hbm, &c.hbm) &&
         same_set(&a.xla, &c.xla) && same_str(a.setting, c.setting) && a.n_changes > 0 && !a.fits == !a.hbm.fits;
    if (!ok)
        fprintf(stderr, "%s: text: peak %llu hbm %llu/%zu/%d xla %llu/%zu changes %zu; proto: peak %llu hbm %llu/%zu/%d xla %llu/%zu changes %zu\n",
                what, (unsigned long long)a.peak_before, (unsigned long long)a.hbm.peak_bytes, a.hbm.n_changes,
                a.hbm.proven_optimal, (unsigned long long)a.xla.peak_bytes, a.xla.n_changes, a.n_changes,
                (unsigned long long)c.peak_before, (unsigned long long)c.hbm.peak_bytes, c.hbm.n_changes,
                c.hbm.proven_optimal, (unsigned long long)c.xla.peak_bytes, c.xla.n_changes, c.n_changes);
    for (size_t i = 0; ok && i < a.n_changes; i++) {
        const hbm_fit_change *x = hbm_fit_change_at(rt, i), *y = hbm_fit_change_at(rp, i);
        ok = x && y && x->kind == y->kind && same_str(x->instruction, y->instruction) && same_str(x->shape, y->shape) &&
             same_str(x->op_name, y->op_name) && same_str(x->source_file, y->source_file) &&
             x->source_line == y->source_line && x->param_number == y->param_number && x->bytes == y->bytes &&
             x->model_bytes == y->model_bytes && x->verified_peak == y->verified_peak &&
             x->recompute_flops == y->recompute_flops && x->bytes_read == y->bytes_read && x->chosen == y->chosen &&
             x->xla_chosen == y->xla_chosen && same_str(x->jax, y->jax);
        if (!ok && x && y)
            fprintf(stderr,
                    "%s: change %zu differs: %s %s '%s' %s:%d '%s' kind %d bytes %llu peak %llu flops %llu chosen %d/%d"
                    " / %s %s '%s' %s:%d '%s' kind %d bytes %llu peak %llu flops %llu chosen %d/%d\n",
                    what, i, x->instruction, x->shape, x->op_name, x->source_file, x->source_line, x->jax, (int)x->kind,
                    (unsigned long long)x->bytes, (unsigned long long)x->verified_peak,
                    (unsigned long long)x->recompute_flops, (int)x->chosen, (int)x->xla_chosen, y->instruction, y->shape,
                    y->op_name, y->source_file, y->source_line, y->jax, (int)y->kind, (unsigned long long)y->bytes,
                    (unsigned long long)y->verified_peak, (unsigned long long)y->recompute_flops, (int)y->chosen,
                    (int)y->xla_chosen);
    }
    uint64_t et = emitted_peak(rt), ep = emitted_peak(rp);
    if (ok && (!ep || ep != et || ep != (a.chosen == HBM_FIT_REMAT_XLA ? c.xla.peak_bytes : c.hbm.peak_bytes))) {
        fprintf(stderr, "%s: the emitted module plans to %llu from the proto, %llu from the text\n", what,
                (unsigned long long)ep, (unsigned long long)et);
        ok = 0;
    }
    fprintf(stderr, "%s: fit from text and from proto: %s (peak %llu -> %llu, %zu changes listed)\n", what,
            ok ? "the same" : "DIFFER", (unsigned long long)a.peak_before, (unsigned long long)c.hbm.peak_bytes,
            c.n_changes);
out:
    hbm_fit_free(rt);
    hbm_fit_free(rp);
    hbm_hlo_module_free(mt);
    hbm_hlo_module_free(mp);
    hbm_proto_close(f);
    hbmi_free(b);
    return ok;
}

static void test_fit_proto(void) {
    hbm_fit_options o;
    hbm_fit_options_default(&o);
    o.target_bytes = (uint64_t)16 << 20; /* needs 20 MiB */
    o.timeout_s = 30;
    CHECK(fit_same("fit_remat", fit_text, strlen(fit_text), &o));
    const char *tpu = HBM_SHARED_DATA "/hlo/tpu/qwen3_train_step.tpu_after_optimizations.hlo";
    FILE *f = fopen(tpu, "rb");
    if (!f) return; /* the shared set is absent: the module above is the test */
    static char buf[4 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    o.target_bytes = 26000000000ull; /* needs 25.96 GiB: tiled layouts, while loops, donations */
    o.timeout_s = 300; /* the search and every check run to their end under ASan too: the same
                          budget cut at a different point would differ by timing alone */
    CHECK(fit_same("qwen3_train_step (TPU)", buf, n, &o));
}

static void test_small_module(void) {
    uint8_t *b;
    size_t len;
    small_proto(&b, &len);
    CHECK(b);
    char path[512];
    snprintf(path, sizeof path, "%s/small.hlo.pb", tmpdir);
    write_file(path, b, len);
    hbmi_free(b);
    hbm_proto_file *f;
    CHECK_OK(hbm_proto_open(path, &f));
    CHECK(hbm_proto_file_kind(f) == HBM_PROTO_HLO_MODULE);
    CHECK(hbm_proto_module_count(f) == 1);
    hbm_proto_module_info mi;
    CHECK_OK(hbm_proto_module(f, 0, &mi));
    CHECK_STR(mi.name, "jit_small");
    CHECK(!mi.has_assignment);
    size_t i = 9;
    CHECK_OK(hbm_proto_find(f, "jit_small", &i));
    CHECK(i == 0);
    CHECK_STATUS(hbm_proto_find(f, "other", &i), HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "jit_small");
    hbm_hlo_module *m;
    CHECK_OK(hbm_proto_load(f, 0, &m));
    hbm_proto_close(f);
    hbm_xla_stats xs;
    CHECK_STATUS(hbm_hlo_xla_stats(m, &xs), HBM_ERR_NOT_AVAILABLE); /* no assignment: said so */
    CHECK_CONTAINS(hbm_last_error(), "no XLA buffer assignment");
    hbm_hlo_instruction_info ii;
    CHECK_OK(hbm_hlo_instruction(m, 0, 0, &ii));
    CHECK(ii.op_name_len == 4 && !memcmp(ii.op_name, "x\\\"y", 4)); /* escaped as the text has it */
    CHECK(ii.source_line == 3);
    hbm_plan *p;
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    hbm_plan_stats st;
    CHECK_OK(hbm_plan_get_stats(p, &st));
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096);
    CHECK_EQ_U64(st.alias_size_in_bytes, 4096);
    CHECK(hbm_plan_xla_same(p) == -1);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    CHECK_STATUS(hbm_hlo_open(path, "nope", &m), HBM_ERR_INVALID);
    CHECK_OK(hbm_hlo_open(path, "jit_small", &m));
    hbm_hlo_module_free(m);
    unlink(path);
}

/* --- XLA's alignment, as its assignment shows it --------------------------------------------- */
typedef struct pbuf {
    uint8_t b[4096];
    size_t n;
} pbuf;

static void pb_varint(pbuf *w, uint64_t v) {
    if (w->n + 10 <= sizeof w->b) w->n = (size_t)(hbmi_varint_put(w->b + w->n, v) - w->b);
}
static void pb_int(pbuf *w, unsigned field, uint64_t v) {
    pb_varint(w, (uint64_t)field << 3);
    pb_varint(w, v);
}
static void pb_bytes(pbuf *w, unsigned field, const void *data, size_t len) {
    pb_varint(w, (uint64_t)field << 3 | 2);
    pb_varint(w, len);
    if (w->n + len <= sizeof w->b) memcpy(w->b + w->n, data, len), w->n += len;
}

static const char *align_text =
    "HloModule jit_al, is_scheduled=true\n"
    "ENTRY %main (p: f32[64]) -> f32[2,32] {\n"
    "  %p = f32[64]{0} parameter(0)\n"
    "  %a = f32[1]{0} slice(%p), slice={[0:1]}\n"
    "  %b = f32[1]{0} slice(%p), slice={[1:2]}\n"
    "  %c = f32[2]{0} concatenate(%a, %b), dimensions={0}\n"
    "  ROOT %r = f32[2,32]{1,0} broadcast(%c), dimensions={0}\n"
    "}\n";

/* xla.HloProto of align_text with a hand-made BufferAssignmentProto: temps a (4 bytes at 0),
 * b (4 bytes at b_off, live with a), a third (256 bytes at 512); the heap trace allocates a
 * and b, frees them, then allocates the third. Its bytes in *hp (malloc'ed), their count. */
static size_t align_hloproto(uint64_t b_off, uint8_t **hp_out) {
    hbm_hlo_module *m = NULL;
    size_t n = 0;
    *hp_out = NULL;
    uint8_t *mod = NULL;
    size_t mod_len = 0;
    if (hbm_hlo_parse(align_text, strlen(align_text), "al", &m) || hbmi_proto_write_module(m, 1, &mod, &mod_len))
        goto done;
    pbuf ba = {.n = 0}, x, y;
    const uint64_t size[3] = {4, 4, 256}, off[3] = {0, b_off, 512};
    for (int k = 0; k < 3; k++) { /* logical_buffers (1): id, size */
        x.n = 0;
        pb_int(&x, 1, (uint64_t)k + 1);
        pb_int(&x, 2, size[k]);
        pb_bytes(&ba, 1, x.b, x.n);
    }
    x.n = 0; /* buffer_allocations (3): index 0, size 768, assigned (9) {id, offset, size} */
    pb_int(&x, 1, 0);
    pb_int(&x, 2, 768);
    for (int k = 0; k < 3; k++) {
        y.n = 0;
        pb_int(&y, 1, (uint64_t)k + 1);
        if (off[k]) pb_int(&y, 2, off[k]);
        pb_int(&y, 3, size[k]);
        pb_bytes(&x, 9, y.b, y.n);
    }
    pb_bytes(&ba, 3, x.b, x.n);
    x.n = 0; /* heap_simulator_traces (4): events (1) {kind, buffer_id} */
    const int ev[5][2] = {{0, 1}, {0, 2}, {1, 1}, {1, 2}, {0, 3}};
    for (int k = 0; k < 5; k++) {
        y.n = 0;
        if (ev[k][0]) pb_int(&y, 1, (uint64_t)ev[k][0]);
        pb_int(&y, 2, (uint64_t)ev[k][1]);
        pb_bytes(&x, 1, y.b, y.n);
    }
    pb_bytes(&ba, 4, x.b, x.n);
    size_t cap = mod_len + ba.n + 32;
    uint8_t *hp = hbmi_malloc(cap);
    if (!hp) goto done;
    pbuf *h = hbmi_malloc(sizeof *h);
    if (h) {
        h->n = 0;
        pb_varint(h, 1 << 3 | 2);
        pb_varint(h, mod_len);
        memcpy(hp, h->b, h->n);
        n = h->n;
        memcpy(hp + n, mod, mod_len);
        n += mod_len;
        h->n = 0;
        pb_bytes(h, 3, ba.b, ba.n);
        memcpy(hp + n, h->b, h->n);
        n += h->n;
        hbmi_free(h);
        *hp_out = hp;
    } else {
        hbmi_free(hp);
        n = 0;
    }
done:
    hbmi_free(mod);
    hbm_hlo_module_free(m);
    return n;
}

static hbm_hlo_module *load_first(const uint8_t *data, size_t n, const char *name) {
    hbm_hlo_module *out = NULL;
    hbm_proto_file *f;
    if (n && !hbm_proto_open_mem(data, n, name, &f)) {
        if (hbm_proto_load(f, 0, &out)) out = NULL;
        hbm_proto_close(f);
    }
    return out;
}

static hbm_hlo_module *align_module(uint64_t b_off) {
    uint8_t *hp;
    size_t n = align_hloproto(b_off, &hp);
    hbm_hlo_module *m = load_first(hp, n, "al.hlo_proto.pb");
    hbmi_free(hp);
    return m;
}

/* growable protobuf writer for the profile below */
typedef struct gbuf {
    uint8_t *b;
    size_t n, cap;
} gbuf;
static void g_raw(gbuf *w, const void *d, size_t len) {
    if (w->n + len > w->cap) {
        size_t cap = (w->n + len) * 2;
        uint8_t *nb = hbmi_realloc(w->b, cap);
        if (!nb) return;
        w->b = nb, w->cap = cap;
    }
    memcpy(w->b + w->n, d, len), w->n += len;
}
static void g_varint(gbuf *w, uint64_t v) {
    uint8_t t[10];
    g_raw(w, t, (size_t)(hbmi_varint_put(t, v) - t));
}
static void g_bytes(gbuf *w, unsigned field, const void *d, size_t len) {
    g_varint(w, (uint64_t)field << 3 | 2);
    g_varint(w, len);
    g_raw(w, d, len);
}
static void g_int(gbuf *w, unsigned field, uint64_t v) {
    g_varint(w, (uint64_t)field << 3);
    g_varint(w, v);
}

/* An XProf profile (XSpace) whose '/host:metadata' plane holds the modules of
 * align_module(off[k]) for k < n, named jit_al<k>. */
static hbm_hlo_module *align_profile_first(const uint64_t *off, int n) {
    gbuf plane = {0}, sp = {0};
    g_bytes(&plane, 2, "/host:metadata", 14);
    gbuf sm = {0}, e = {0};
    g_int(&sm, 1, 7);
    g_bytes(&sm, 2, "Hlo Proto", 9);
    g_int(&e, 1, 7);
    g_bytes(&e, 2, sm.b, sm.n);
    g_bytes(&plane, 5, e.b, e.n); /* stat_metadata {7: "Hlo Proto"} */
    for (int k = 0; k < n; k++) {
        uint8_t *hp;
        size_t len = align_hloproto(off[k], &hp);
        gbuf st = {0}, em = {0}, ent = {0};
        g_int(&st, 1, 7);
        g_bytes(&st, 6, hp, len);
        char name[32];
        snprintf(name, sizeof name, "jit_al%d", k);
        g_int(&em, 1, (uint64_t)k + 1);
        g_bytes(&em, 2, name, strlen(name));
        g_bytes(&em, 5, st.b, st.n);
        g_int(&ent, 1, (uint64_t)k + 1);
        g_bytes(&ent, 2, em.b, em.n);
        g_bytes(&plane, 4, ent.b, ent.n); /* event_metadata {k+1: the module} */
        hbmi_free(hp), hbmi_free(st.b), hbmi_free(em.b), hbmi_free(ent.b);
    }
    g_bytes(&sp, 1, plane.b, plane.n);
    hbm_hlo_module *m = load_first(sp.b, sp.n, "al.xplane.pb");
    hbmi_free(plane.b), hbmi_free(sp.b), hbmi_free(sm.b), hbmi_free(e.b);
    return m;
}

static uint64_t align_temp(hbm_hlo_module *m, uint64_t alignment, int *from_xla) {
    hbm_plan_options o;
    hbm_plan_options_default(&o);
    o.alignment = alignment;
    o.backend = HBM_BACKEND_GPU; /* (its unfused ops would read as XLA:CPU's) */
    hbm_plan *p;
    if (hbm_plan_run(m, &o, &p)) return UINT64_MAX;
    hbm_plan_stats st;
    hbm_plan_get_stats(p, &st);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        hbm_plan_explain(p, f, 0, 0, NULL, 3);
        fclose(f);
    }
    if (from_xla)
        *from_xla = !text ? 0
                    : strstr(text, "alignment (XLA's build, as its assignment shows)") ? 1
                    : strstr(text, "alignment (XLA's build, as other modules show)")   ? 2
                                                                                        : 0;
    free(text);
    hbm_plan_free(p);
    return st.temp_size_in_bytes;
}

static void test_xla_alignment(void) {
    int from = -1;
    /* b at 256 above a, live together, ending at 4: only a 256-byte build leaves that gap */
    hbm_hlo_module *m = align_module(256);
    CHECK(m);
    if (!m) return;
    uint64_t t128 = align_temp(m, 128, NULL), t256 = align_temp(m, 256, NULL);
    CHECK(t128 != t256); /* the module tells the two apart */
    CHECK_EQ_U64(align_temp(m, 0, &from), t256);
    CHECK(from == 1);
    hbm_hlo_module_free(m);
    /* b at 128: an odd multiple of 128, which only a 128-byte build makes */
    m = align_module(128);
    CHECK(m);
    if (m) {
        CHECK_EQ_U64(align_temp(m, 0, &from), t128);
        CHECK(from == 1); /* said to be XLA's too */
        hbm_hlo_module_free(m);
    }
    /* b at 512, far above a: no evidence either way, XLA:GPU's long-standing 128 */
    m = align_module(512);
    CHECK(m);
    if (m) {
        CHECK_EQ_U64(align_temp(m, 0, &from), t128);
        CHECK(from == 0);
        /* an explicit --alignment wins over the file */
        CHECK_EQ_U64(align_temp(m, 256, &from), t256);
        CHECK(from == 0);
        hbm_hlo_module_free(m);
    }
    /* the same module in a profile beside one that shows its build's alignment: one XLA
     * compiled both, so the other's evidence is taken, and said so */
    static const uint64_t offs[3][2] = {{512, 256}, {512, 128}, {512, 512}};
    const uint64_t want[3] = {t256, t128, t128};
    const int said[3] = {2, 2, 0}; /* the third: neither shows it, 128 */
    for (int k = 0; k < 3; k++) {
        m = align_profile_first(offs[k], 2);
        CHECK(m);
        if (!m) continue;
        CHECK_EQ_U64(align_temp(m, 0, &from), want[k]);
        CHECK(from == said[k]);
        hbm_hlo_module_free(m);
    }
}

/* truncations and byte flips of a real module: an error or a module, never a crash */
static void test_bad_bytes(void) {
    uint8_t *b;
    size_t len;
    small_proto(&b, &len);
    CHECK(b);
    char path[512];
    snprintf(path, sizeof path, "%s/bad.pb", tmpdir);
    int errors = 0;
    for (size_t cut = 1; cut < len; cut += 3) {
        write_file(path, b, cut);
        hbm_hlo_module *m = NULL;
        hbm_status s = hbm_hlo_parse_file(path, &m);
        if (s) {
            errors++;
            CHECK(*hbm_last_error());
        }
        hbm_hlo_module_free(m);
    }
    CHECK(errors > 0);
    uint8_t *c = hbmi_malloc(len);
    CHECK(c);
    for (size_t at = 0; at < len; at++) {
        memcpy(c, b, len);
        c[at] ^= 0xff;
        write_file(path, c, len);
        hbm_hlo_module *m = NULL;
        if (!hbm_hlo_parse_file(path, &m)) {
            hbm_plan *p = NULL;
            if (!hbm_plan_run(m, NULL, &p)) hbm_plan_free(p);
        }
        hbm_hlo_module_free(m);
    }
    hbmi_free(c);
    hbmi_free(b);
    /* a shape nested a million deep: refused, not a stack overflow */
    size_t depth = 1000000, n = 0;
    uint8_t *deep = hbmi_malloc(depth * 12 + 64);
    CHECK(deep);
    /* HloModuleProto{name "d", computations{instructions{shape{tuple_shapes{tuple_shapes{...}}}}}}:
     * built inside out, each level a length-prefixed field */
    size_t cap = depth * 12 + 64, at = cap;
    uint64_t inner = 0;
    for (size_t k = 0; k < depth; k++) { /* ShapeProto.tuple_shapes (4) around the previous */
        uint8_t hdr[12];
        hdr[0] = 0x22;
        size_t h = (size_t)(hbmi_varint_put(hdr + 1, inner) - hdr);
        at -= h;
        memcpy(deep + at, hdr, h);
        inner += h;
    }
    (void)n;
    /* wrap: instruction.shape (3), computation.instructions (2), module.computations (3) */
    const uint8_t tags[] = {0x1a, 0x12, 0x1a};
    for (int w = 0; w < 3; w++) {
        uint8_t hdr[12];
        hdr[0] = tags[w];
        size_t h = (size_t)(hbmi_varint_put(hdr + 1, inner) - hdr);
        at -= h;
        memcpy(deep + at, hdr, h);
        inner += h;
    }
    at -= 3;
    memcpy(deep + at, "\x0a\x01" "d", 3);
    write_file(path, deep + at, cap - at);
    hbmi_free(deep);
    hbm_hlo_module *m = NULL;
    CHECK_STATUS(hbm_hlo_parse_file(path, &m), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "nested too deeply");
    unlink(path);
}

/* a profile with planes but no HLO protos: a trace-only profile, said so */
static void test_trace_only_profile(void) {
    char path[1024], run[512];
    snprintf(run, sizeof run, "%s/logdir/plugins/profile/2026_01_01_00_00_00", tmpdir);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/logdir", tmpdir);
    mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/logdir/plugins", tmpdir);
    mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/logdir/plugins/profile", tmpdir);
    mkdir(sub, 0700);
    mkdir(run, 0700);
    snprintf(path, sizeof path, "%s/host0.xplane.pb", run);
    /* XSpace { planes { id 1 name "/host:CPU" } planes { id 2 name "/device:GPU:0" } } */
    static const unsigned char xs[] = {0x0a, 13, 0x08, 1, 0x12, 9, '/', 'h', 'o', 's', 't', ':', 'C', 'P', 'U',
                                       0x0a, 17, 0x08, 2, 0x12, 13, '/', 'd', 'e', 'v', 'i', 'c', 'e', ':', 'G', 'P', 'U', ':', '0'};
    write_file(path, xs, sizeof xs);
    snprintf(sub, sizeof sub, "%s/logdir", tmpdir);
    CHECK(hbm_proto_path_kind(sub) == HBM_PROTO_PROFILE_DIR);
    hbm_proto_file *f = NULL;
    CHECK_STATUS(hbm_proto_open(sub, &f), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "without HLO protos");
    CHECK_CONTAINS(hbm_last_error(), "no '/host:metadata' plane");
    CHECK_CONTAINS(hbm_last_error(), "host0.xplane.pb");
    hbm_trace *t = NULL;
    CHECK_STATUS(hbm_trace_load(sub, &t), HBM_ERR_PARSE);
    unlink(path);
}

/* the shared profile through a directory and the trace loader */
static void test_shared_profile_dir(void) {
    const char *x = HBM_SHARED_DATA "/xprof/rocm_te_fused_attn.xplane.pb";
    if (access(x, R_OK)) TEST_SKIP("%s not found (the shared data set is absent)", x);
    char dir[512], link[600];
    snprintf(dir, sizeof dir, "%s/logdir2/plugins/profile/run1", tmpdir);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/logdir2", tmpdir);
    mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/logdir2/plugins", tmpdir);
    mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/logdir2/plugins/profile", tmpdir);
    mkdir(sub, 0700);
    mkdir(dir, 0700);
    snprintf(link, sizeof link, "%s/host.xplane.pb", dir);
    CHECK(!symlink(x, link));
    snprintf(sub, sizeof sub, "%s/logdir2", tmpdir);
    hbm_proto_file *f;
    CHECK_OK(hbm_proto_open(sub, &f));
    CHECK(hbm_proto_module_count(f) == 9);
    CHECK(hbm_proto_file_hosts(f) == 1);
    hbm_proto_module_info a, b;
    CHECK_OK(hbm_proto_module(f, 0, &a));
    CHECK_STR(a.name, "jit_loss_fn(17)");
    CHECK_STR(a.module_name, "jit_loss_fn");
    CHECK(a.program_id == 17);
    for (size_t i = 1; i < hbm_proto_module_count(f); i++) { /* largest first */
        CHECK_OK(hbm_proto_module(f, i, &b));
        CHECK(b.xla.peak_bytes <= a.xla.peak_bytes);
        a = b;
    }
    size_t i;
    /* two programs of that name: refused, listing both with their program ids */
    CHECK(hbm_proto_find(f, "jit__normal", &i) == HBM_ERR_INVALID);
    CHECK(strstr(hbm_last_error(), "2 modules are called 'jit__normal'") != NULL);
    CHECK(strstr(hbm_last_error(), "'jit__normal(5)' (program id 5)") != NULL);
    CHECK(strstr(hbm_last_error(), "'jit__normal(13)' (program id 13)") != NULL);
    CHECK_OK(hbm_proto_find(f, "jit__normal(13)", &i));
    CHECK_OK(hbm_proto_module(f, i, &b));
    CHECK_STR(b.name, "jit__normal(13)");
    CHECK_OK(hbm_proto_find(f, "jit__threefry_fold_in", &i)); /* one program: its module name is enough */
    CHECK_OK(hbm_proto_module(f, i, &b));
    CHECK_STR(b.name, "jit__threefry_fold_in(11)");
    hbm_hlo_module *m;
    CHECK_OK(hbm_proto_load(f, 0, &m));
    hbm_proto_close(f);
    hbm_xla_stats xs;
    CHECK_OK(hbm_hlo_xla_stats(m, &xs));
    CHECK(xs.has_heap_trace && xs.heap_peak_bytes > 0 && xs.n_heap_peak_buffers > 0);
    hbm_xla_buffer buf[4];
    size_t nb = hbm_hlo_xla_peak_buffers(m, buf, 4);
    CHECK(nb > 1 && buf[0].size >= buf[1].size && buf[0].instruction[0]);
    hbm_plan *p;
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    hbm_plan_stats st;
    CHECK_OK(hbm_plan_get_stats(p, &st));
    CHECK(st.backend == HBM_BACKEND_GPU); /* the profile's /device:GPU planes say so */
    CHECK(hbm_plan_xla_same(p) >= 0);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
    hbm_trace *t;
    CHECK_OK(hbm_trace_load(sub, &t)); /* view/diff/Python route: the largest module */
    CHECK(t->count > 0);
    hbm_trace_free(t);
    unlink(link);
}

/* every host allocation of the proto writer failing in turn, on a module of many arena chunks
 * (tuple shapes with layouts, attributes, a schedule): out of host memory at once, with no
 * allocation after the failing one; the rest write the same bytes as with none failing. The
 * writer once went on past a failed chunk and read a tuple element it had not written. */
static void test_write_faults(void) {
    size_t cap = 1 << 20, n = 0;
    char *t = malloc(cap);
    if (!t) return;
    n += (size_t)snprintf(t + n, cap - n,
                          "HloModule faults, is_scheduled=true\n\nENTRY %%main (p: f32[8,128]) -> f32[8,128] {\n"
                          "  %%p = f32[8,128]{1,0} parameter(0)\n  %%g0 = f32[8,128]{1,0} negate(%%p)\n");
    for (int i = 0; i < 400; i++)
        n += (size_t)snprintf(t + n, cap - n,
                              "  %%t%d = (f32[8,128]{1,0:T(8,128)}, (f32[8,128]{0,1}, s32[4]{0})) tuple(%%g%d, %%g%d), "
                              "frontend_attributes={k=\"%d\"}\n"
                              "  %%g%d = f32[8,128]{1,0} get-tuple-element(%%t%d), index=0\n",
                              i, i, i, i, i + 1, i);
    n += (size_t)snprintf(t + n, cap - n, "  ROOT %%r = f32[8,128]{1,0} negate(%%g400)\n}\n");
    hbm_hlo_module *m = NULL;
    CHECK_OK(hbm_hlo_parse(t, n, "faults.hlo", &m));
    uint8_t *want = NULL;
    size_t want_len = 0;
    if (m) CHECK_OK(hbmi_proto_write_module(m, 1, &want, &want_len));
    size_t points = 0;
    for (uint64_t k = 1; m && want && k < 100000; k++) {
        uint8_t *b = NULL;
        size_t bl = 0;
        hbm_debug_fail_host_alloc(k);
        hbm_status s = hbmi_proto_write_module(m, 1, &b, &bl);
        uint64_t made = hbm_debug_fail_host_alloc(0);
        if (s == HBM_OK) {
            CHECK(bl == want_len && !memcmp(b, want, bl));
            hbmi_free(b);
            break;
        }
        points++;
        CHECK_STATUS(s, HBM_ERR_NOMEM);
        CHECK_STR(hbm_last_error(), "out of host memory");
        CHECK(made == k);
    }
    CHECK(points > 2);
    printf("  proto writer: %zu allocations (%zu bytes written), each failing in turn\n", points, want_len);
    hbmi_free(want);
    hbm_hlo_module_free(m);
    free(t);
}

int main(void) {
    if (!hbm_proto_available()) {
        RUN(test_sniff);
        TEST_SKIP("hbm built without protobuf-c (only the sniffing is tested)");
    }
    if (!mkdtemp(tmpdir)) TEST_SKIP("cannot make a temporary directory");
    RUN(test_sniff);
    RUN(test_small_module);
    RUN(test_xla_alignment);
    RUN(test_bad_bytes);
    RUN(test_trace_only_profile);
    RUN(test_shared_profile_dir);
    RUN(test_round_trip);
    RUN(test_fit_proto);
    RUN(test_write_faults);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_done();
}
