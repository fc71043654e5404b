/* test_frames.c - an instruction's source line from XLA's stack frames: a chain whose top
 * frames are wrappers (contextlib.py, JAX's own files) names the user's caller, read from the
 * text's StackFrames tables and from the same module written as an xla.HloModuleProto with
 * its StackFrameIndexProto (src/hlo/frames.c, proto_read.c, proto_write.c); fit's
 * hbmi_jax_where gives the same for both. */
#include <string.h>

#include "fit/fit_internal.h"
#include "hlo/hlo_internal.h"
#include "test.h"

/* frames 1..3: train.py:42 calls contextlib.py:144 calls jax/_src/ad_checkpoint.py:9; frame 4
 * is contextlib alone (every frame a wrapper); frame 5 names itself its parent (a loop) */
static const char text[] =
    "HloModule frames, entry_computation_layout={(f32[4]{0})->(f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0})}\n"
    "\n"
    "FileNames\n"
    "1 \"/home/u/train.py\"\n"
    "2 \"/usr/lib/python3.12/contextlib.py\"\n"
    "3 \"/venv/lib/python3.12/site-packages/jax/_src/ad_checkpoint.py\"\n"
    "4 \"/home/u/model.py\"\n"
    "\n"
    "FunctionNames\n"
    "1 \"step\"\n"
    "2 \"__exit__\"\n"
    "3 \"checkpoint_name\"\n"
    "\n"
    "FileLocations\n"
    "1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=4 end_column=9}\n"
    "2 {file_name_id=2 function_name_id=2 line=144 end_line=144 column=8 end_column=8}\n"
    "3 {file_name_id=3 function_name_id=3 line=9 end_line=9 column=2 end_column=2}\n"
    "\n"
    "StackFrames\n"
    "1 {file_location_id=1 parent_frame_id=0}\n"
    "2 {file_location_id=2 parent_frame_id=1}\n"
    "3 {file_location_id=3 parent_frame_id=2}\n"
    "4 {file_location_id=2 parent_frame_id=0}\n"
    "5 {file_location_id=3 parent_frame_id=5}\n"
    "\n"
    "ENTRY %main (p: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4]) {\n"
    "  %p = f32[4]{0} parameter(0)\n"
    "  %a = f32[4]{0} negate(%p), metadata={op_name=\"jit(step)/neg\" stack_frame_id=3}\n"
    "  %b = f32[4]{0} abs(%p), metadata={op_name=\"jit(step)/abs\" source_file=\"/usr/lib/python3.12/functools.py\" "
    "source_line=7 stack_frame_id=3}\n"
    "  %c = f32[4]{0} exponential(%p), metadata={op_name=\"jit(step)/exp\" source_file=\"/home/u/model.py\" source_line=5 "
    "stack_frame_id=3}\n"
    "  %d = f32[4]{0} sine(%p), metadata={op_name=\"jit(step)/sin\" stack_frame_id=4}\n"
    "  %e = f32[4]{0} cosine(%p), metadata={op_name=\"jit(step)/cos\" stack_frame_id=5}\n"
    "  ROOT %t = (f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(%a, %b, %c, %d, %e)\n"
    "}\n";

static const hbmi_instr *find(const hbm_hlo_module *m, const char *name) {
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c].n; i++) {
            const hbmi_instr *in = &m->comps[c].ins[i];
            if (in->name.n == strlen(name) && !memcmp(in->name.p, name, in->name.n)) return in;
        }
    return NULL;
}

static int file_is(const hbmi_instr *in, const char *file, int line) {
    if (!in) return 0;
    int ok = in->meta_source_file.n == strlen(file) && !memcmp(in->meta_source_file.p, file, in->meta_source_file.n) &&
             in->meta_source_line == line;
    if (!ok)
        fprintf(stderr, "%.*s: %.*s:%d, expected %s:%d\n", (int)in->name.n, in->name.p, (int)in->meta_source_file.n,
                in->meta_source_file.p ? in->meta_source_file.p : "", in->meta_source_line, file, line);
    return ok;
}

static int where_is(const hbm_hlo_module *m, const char *name, const char *file, int line) {
    char f[256];
    int l = -1;
    const hbmi_instr *in = find(m, name);
    if (!in) return 0;
    hbmi_jax_where(m, in, f, sizeof f, &l);
    int ok = !strcmp(f, file) && l == line;
    if (!ok) fprintf(stderr, "fit: %s at %s:%d, expected %s:%d\n", name, f, l, file, line);
    return ok;
}

/* the rule the module's lines show, the same from the text and from the protobuf */
static void check_lines(const hbm_hlo_module *m) {
    CHECK(file_is(find(m, "a"), "/home/u/train.py", 42));  /* out of ad_checkpoint.py and contextlib.py */
    CHECK(file_is(find(m, "b"), "/home/u/train.py", 42));  /* a wrapper's source_file: the frames' line */
    CHECK(file_is(find(m, "c"), "/home/u/model.py", 5));   /* a user's source_file stays */
    CHECK(file_is(find(m, "d"), "/usr/lib/python3.12/contextlib.py", 144)); /* all wrappers: as given */
    CHECK(file_is(find(m, "e"), "/venv/lib/python3.12/site-packages/jax/_src/ad_checkpoint.py", 9)); /* a loop */
    CHECK(where_is(m, "a", "/home/u/train.py", 42));
    CHECK(where_is(m, "b", "/home/u/train.py", 42));
    CHECK(where_is(m, "c", "/home/u/model.py", 5));
    CHECK(where_is(m, "d", "", 0)); /* fit names no wrapper's line */
    CHECK(where_is(m, "e", "", 0));
}

static void test_wrapper_rule(void) {
    static const char *const wrap[] = {"/usr/lib/python3.12/contextlib.py", "/usr/lib/python3.12/functools.py",
                                       "/x/site-packages/optax/_src/update.py", "/x/dist-packages/a.py",
                                       "/src/jax/jax/_src/api.py", "/src/flax/flax/linen/module.py",
                                       "/src/flax/flax/core/scope.py"};
    static const char *const user[] = {"/home/u/train.py", "/app/trainer/model/modeling_llama3.py", "contextlib.pyx",
                                       "/src/jax/jax/experimental/x.py", ""};
    for (size_t k = 0; k < sizeof wrap / sizeof *wrap; k++) CHECK(hbmi_hlo_wrapper_file(wrap[k], strlen(wrap[k])));
    for (size_t k = 0; k < sizeof user / sizeof *user; k++) CHECK(!hbmi_hlo_wrapper_file(user[k], strlen(user[k])));
}

static void test_text(void) {
    hbm_hlo_module *m = NULL;
    CHECK(!hbm_hlo_parse(text, sizeof text - 1, "frames", &m));
    if (!m) return;
    check_lines(m);
    hbm_hlo_module_free(m);
}

static void test_proto(void) {
    if (!hbm_proto_available()) TEST_SKIP("hbm built without protobuf-c");
    hbm_hlo_module *mt = NULL, *mp = NULL;
    hbm_proto_file *f = NULL;
    uint8_t *b = NULL;
    size_t bl = 0;
    CHECK(!hbm_hlo_parse(text, sizeof text - 1, "frames", &mt));
    CHECK(mt && !hbmi_proto_write_module(mt, 1, &b, &bl));
    /* the frames travel as XLA writes them: the user's file once, in the frame index, not
     * also in the metadata of the instructions whose line came from the frames */
    size_t n = 0;
    static const char user[] = "/home/u/train.py";
    for (size_t i = 0; b && i + sizeof user - 1 <= bl; i++) n += !memcmp(b + i, user, sizeof user - 1);
    CHECK(n == 1);
    CHECK(b && !hbm_proto_open_mem(b, bl, "frames.pb", &f) && !hbm_proto_load(f, 0, &mp));
    if (mp) check_lines(mp);
    hbm_hlo_module_free(mp);
    hbm_proto_close(f);
    hbmi_free(b);
    hbm_hlo_module_free(mt);
}

int main(void) {
    RUN(test_wrapper_rule);
    RUN(test_text);
    RUN(test_proto);
    return test_done();
}
