/* test_hlo.c - the HLO parser: every syntax real dumps contain, shape sizes of every
 * primitive type, error positions, allocation-failure cleanup. */
#include "core/internal.h"
#include "test.h"

static hbm_hlo_module *parse(const char *text) {
    hbm_hlo_module *m = NULL;
    if (hbm_hlo_parse(text, strlen(text), "t.hlo", &m) != HBM_OK) return NULL;
    return m;
}

static void test_sizes_of_every_primitive(void) {
    static const struct {
        const char *shape;
        uint64_t bytes;
    } cases[] = {
        {"pred[3]", 3},          {"s2[5]", 5},          {"s4[7]", 7},           {"s4[7]{0:E(4)}", 4},
        {"u4[16]{0:E(4)}", 8},   {"u2[9]{0:E(2)}", 3},  {"s8[10]", 10},         {"u8[10]", 10},
        {"s16[3]", 6},           {"u16[3]", 6},         {"s32[3]", 12},         {"u32[3]", 12},
        {"s64[3]", 24},          {"u64[3]", 24},        {"f16[3]", 6},          {"bf16[3]", 6},
        {"f32[3]", 12},          {"f64[3]", 24},        {"c64[3]", 24},         {"c128[3]", 48},
        {"f8e5m2[4]", 4},        {"f8e4m3fn[4]", 4},    {"f8e4m3b11fnuz[4]", 4}, {"f8e5m2fnuz[4]", 4},
        {"f8e4m3fnuz[4]", 4},    {"f8e4m3[4]", 4},      {"f8e3m4[4]", 4},       {"f8e8m0fnu[4]", 4},
        {"f4e2m1fn[4]", 4},      {"token[]", 0},        {"f32[]", 4},           {"f32[0,5]", 0},
        {"f32[300000,50]{1,0}", 60000000},               {"f32[300000,300000]", 360000000000ull},
        {"(f32[2], s32[])", 16}, {"((f32[2]), f32[2], u32[])", 24},               {"()", 0},
        /* tiled layouts pad to the tile; each further tile tiles the shape the one before
         * left (tiled_layout.md), so a (2,1) sub-tile of a (8,128) tile adds no padding.
         * The sizes marked "TPU" are XLA:TPU's own, read in its buffer-assignment dumps
         * (libtpu 0.0.52, docs/tpu.md); the rest follow by hand */
        {"f32[8,128]{1,0:T(8,128)}", 4096},              {"bf16[8,128]{1,0:T(8,128)(2,1)S(1)}", 2048},
        {"f32[3,5]{1,0:T(8,128)}", 4096},                {"bf16[1000,1000]{1,0:T(8,128)(2,1)}", 2048000},
        {"f32[5]{0:T(8,128)}", 4096},                    {"f32[2,3,5]{2,1,0:T(8,128)}", 8192},
        {"f32[5,3]{0,1:T(8,128)}", 4096},                {"s8[40,200]{1,0:T(8,128)(4,1)}", 40 * 256},
        {"bf16[1024]{0:T(1024)(128)(2,1)}", 2048},       /* issue 36's hand case: [1,1024] [1,8,128] [1,4,128,2,1] */
        {"bf16[1031]{0:T(1024)(128)(2,1)S(3)}", 4096},   /* TPU */
        {"pred[116,256]{1,0:T(8,128)(4,1)}", 30720},     /* TPU: 120 rows, not 128 */
        {"s8[161,536]{1,0:T(8,128)(4,1)S(1)}", 107520},  /* TPU */
        {"s4[1024,253,256]{2,0,1:T(64,128)(8,1)E(4)}", 33161216}, /* TPU */
        {"s4[1]{0:T(1024)(128)(8,1)E(4)}", 512},         /* TPU */
        {"u8[1,256,1]{1,2,0:T(4,128)(4,1)}", 1024},      /* TPU */
        {"s32[620,1]{0,1:T(1,128)}", 2560},              /* TPU */
        {"f32[128,1889]{0,1:T(8,128)S(1)SC(0:952)}", 487424}, /* TPU */
        {"bf16[]{:T(256)}", 512},                        {"f8e4m3fn[]{:T(512)}", 512}, /* TPU */
        {"s8[2,128]{1,0:T(2,128)(4,1)}", 512},           /* the (4,1) tile pads the 2 rows to 4 */
        {"f32[<=10,4]", 160 + 8}, {"(f32[1], /*index=1*/f32[1], /*index=2*/s8[3])", 24},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t b = 1234567;
        CHECK_OK(hbm_hlo_shape_bytes(cases[i].shape, 8, &b));
        if (b != cases[i].bytes) fprintf(stderr, "shape %s\n", cases[i].shape);
        CHECK_EQ_U64(b, cases[i].bytes);
    }
    uint64_t b;
    CHECK_OK(hbm_hlo_shape_bytes("(f32[2], s32[], pred[1])", 4, &b));
    CHECK_EQ_U64(b, 12);
    CHECK_EQ_U64(hbm_hlo_prim_bits(HBM_HLO_S4), 4);
    CHECK_EQ_U64(hbm_hlo_prim_bits(HBM_HLO_PRED), 8);
    CHECK_STR(hbm_hlo_prim_name(HBM_HLO_BF16), "bf16");
    CHECK_STATUS(hbm_hlo_shape_bytes("q32[3]", 8, &b), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "unknown element type");
    CHECK_STATUS(hbm_hlo_shape_bytes("f32[3", 8, &b), HBM_ERR_PARSE);
    CHECK_STATUS(hbm_hlo_shape_bytes("f32[3] junk", 8, &b), HBM_ERR_PARSE);
}

/* Everything at once, as recent JAX/XLA dumps print it. */
static const char *kEverything =
    "HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[8,128]{1,0}, s32[])->(f32[8,128]{1,0}, s32[])}, "
    "input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, buffer_donor={ (0, {}) }, "
    "allow_spmd_sharding_propagation_to_output={true}, num_partitions=1, frontend_attributes={fingerprint_before_lhs=\"abc\"}\n"
    "\n"
    "%add.clone (x.1: f32[], y.1: f32[]) -> f32[] {\n"
    "  %x.1 = f32[] parameter(0)\n"
    "  %y.1 = f32[] parameter(1)\n"
    "  ROOT %add.2 = f32[] add(f32[] %x.1, f32[] %y.1)\n"
    "}\n"
    "\n"
    "%fused_computation (param_0: f32[8,128]) -> f32[8,128] {\n"
    "  %param_0 = f32[8,128]{1,0} parameter(0)\n"
    "  %constant.9 = f32[] constant(2), metadata={op_name=\"jit(step)/mul\" source_file=\"/a/b.py\" source_line=7 stack_frame_id=3}\n"
    "  %broadcast.1 = f32[8,128]{1,0:T(8,128)} broadcast(f32[] %constant.9), dimensions={}\n"
    "  ROOT %multiply.1 = f32[8,128]{1,0} multiply(f32[8,128]{1,0} %param_0, f32[8,128]{1,0} %broadcast.1)\n"
    "}\n"
    "\n"
    "%region_body (p.2: (s32[], f32[8,128])) -> (s32[], f32[8,128]) {\n"
    "  %p.2 = (s32[], f32[8,128]{1,0}) parameter(0)\n"
    "  %i = s32[] get-tuple-element((s32[], f32[8,128]{1,0}) %p.2), index=0\n"
    "  %one = s32[] constant(1)\n"
    "  %i.1 = s32[] add(s32[] %i, s32[] %one)\n"
    "  %v = f32[8,128]{1,0} get-tuple-element((s32[], f32[8,128]{1,0}) %p.2), index=1\n"
    "  %v.1 = f32[8,128]{1,0} fusion(f32[8,128]{1,0} %v), kind=kLoop, calls=%fused_computation, control-predecessors={%i.1}\n"
    "  ROOT %t.1 = (s32[], /*index=1*/f32[8,128]{1,0}) tuple(s32[] %i.1, f32[8,128]{1,0} %v.1)\n"
    "}\n"
    "\n"
    "%region_cond (p.3: (s32[], f32[8,128])) -> pred[] {\n"
    "  %p.3 = (s32[], f32[8,128]{1,0}) parameter(0)\n"
    "  %i.2 = s32[] get-tuple-element(%p.3), index=0\n"
    "  %n = s32[] constant(10)\n"
    "  ROOT %lt = pred[] compare(s32[] %i.2, s32[] %n), direction=LT\n"
    "}, execution_thread=\"main\"\n"
    "\n"
    "ENTRY %main.20 (Arg_0.1: f32[8,128], Arg_1.2: s32[]) -> (f32[8,128], s32[]) {\n"
    "  %Arg_0.1 = f32[8,128]{1,0} parameter(0), sharding={replicated}, metadata={op_name=\"x\"}\n"
    "  %Arg_1.2 = s32[] parameter(1), sharding={devices=[2,2]<=[4] last_tile_dim_replicate}\n"
    "  %table = f32[4]{0} constant({...})\n"
    "  %c = c64[] constant((1, 0))\n"
    "  %tuple.1 = (s32[], f32[8,128]{1,0}) tuple(s32[] %Arg_1.2, f32[8,128]{1,0} %Arg_0.1)\n"
    "  %while.1 = (s32[], f32[8,128]{1,0}) while((s32[], f32[8,128]{1,0}) %tuple.1), condition=%region_cond, body=%region_body, "
    "backend_config={\"known_trip_count\":{\"n\":\"10\"}}\n"
    "  %w1 = f32[8,128]{1,0} get-tuple-element(%while.1), index=1\n"
    "  %ars = ((f32[8,128]{1,0}), f32[8,128]{1,0}, u32[]{:S(2)}) all-reduce-start-like-start(f32[8,128]{1,0} %w1), to_apply=%add.clone, "
    "backend_config=\"\\000\\001\"\n"
    "  %ard = f32[8,128]{1,0} all-reduce-start-like-done(((f32[8,128]{1,0}), f32[8,128]{1,0}, u32[]{:S(2)}) %ars)\n"
    "  %w0 = s32[] get-tuple-element(%while.1), index=0, frontend_attributes={_xla_stream_annotation=\"1\"}\n"
    "  ROOT %out = (f32[8,128]{1,0}, s32[]) tuple(f32[8,128]{1,0} %ard, s32[] %w0) // the result\n"
    "}\n"
    "\n"
    "FileNames\n"
    "1 \"/a/b.py\"\n"
    "FunctionNames\n"
    "1 \"step\"\n"
    "FileLocations\n"
    "1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=2 end_column=9}\n"
    "StackFrames\n"
    "1 {file_location_id=1 parent_frame_id=1}\n";

static void test_parse_everything(void) {
    hbm_hlo_module *m = parse(kEverything);
    CHECK(m);
    CHECK_STR(hbm_hlo_module_name(m), "jit_step");
    CHECK(hbm_hlo_is_scheduled(m));
    CHECK_EQ_U64(hbm_hlo_computation_count(m), 5);
    const char *name;
    size_t n;
    int entry;
    CHECK_OK(hbm_hlo_computation_info(m, 4, &name, &n, &entry));
    CHECK_STR(name, "main.20");
    CHECK_EQ_U64(n, 11);
    CHECK(entry);
    hbm_hlo_instruction_info in;
    CHECK_OK(hbm_hlo_instruction(m, 1, 1, &in));
    CHECK(in.source_line == 7);
    CHECK(in.op_name_len == strlen("jit(step)/mul") && !memcmp(in.op_name, "jit(step)/mul", in.op_name_len));
    CHECK_OK(hbm_hlo_instruction(m, 4, 7, &in));
    CHECK_STR(in.shape, "((f32[8,128]), f32[8,128], u32[])");
    CHECK_EQ_U64(in.bytes, 24);
    CHECK_OK(hbm_hlo_instruction(m, 4, 10, &in));
    CHECK(in.is_root);
    CHECK_EQ_U64(in.n_operands, 2);
    /* it plans: parameters are donated, so the outputs alias them */
    hbm_plan *p;
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    hbm_plan_stats st;
    CHECK_OK(hbm_plan_get_stats(p, &st));
    CHECK_EQ_U64(st.argument_size_in_bytes, 4096 + 4);
    CHECK_EQ_U64(st.alias_size_in_bytes, 4096 + 4);
    CHECK_EQ_U64(st.constant_size_in_bytes, 16 + 8 + 4 + 4); /* entry, body and condition constants */
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

static void test_old_style_and_unscheduled(void) {
    /* no '%' sigils, no operand shapes, no ROOT marker, no ENTRY keyword */
    const char *t = "HloModule old\n"
                    "main {\n"
                    "  p = f32[16] parameter(0)\n"
                    "  e = f32[16] exponential(p)\n"
                    "  n = f32[16] negate(e)\n"
                    "}\n";
    hbm_hlo_module *m = parse(t);
    CHECK(m);
    CHECK(!hbm_hlo_is_scheduled(m));
    hbm_hlo_instruction_info in;
    CHECK_OK(hbm_hlo_instruction(m, 0, 2, &in));
    CHECK(in.is_root);
    hbm_hlo_module_free(m);
}

static void check_error(const char *text, const char *where, const char *what) {
    hbm_hlo_module *m = (hbm_hlo_module *)1;
    hbm_status s = hbm_hlo_parse(text, strlen(text), "t.hlo", &m);
    if (s != HBM_ERR_PARSE || m != NULL || !strstr(hbm_last_error(), where) || !strstr(hbm_last_error(), what)) {
        fprintf(stderr, "for input:\n%s\ngot: %s (%s), want %s ... %s\n", text, hbm_status_name(s), hbm_last_error(),
                where, what);
        test_failures_++;
    }
    test_checks_++;
}

static void test_error_positions(void) {
    check_error("", "t.hlo", ": empty file");
    check_error("\n", "t.hlo:2:1:", "expected 'HloModule'");
    check_error("HloModule m\nENTRY e {\n  p = f32[2 parameter(0)\n}\n", "t.hlo:3:13:", "parameter(0)");
    check_error("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  q = f32[2] negate(f32[2] r)\n}\n",
                "t.hlo:4:28:", "operand is not defined");
    check_error("HloModule m\nENTRY e {\n  p = q32[2] parameter(0)\n}\n", "t.hlo:3:7:", "unknown element type");
    check_error("HloModule m\nENTRY e {\n  p = f32[2] parameter(0), metadata={op_name=\"x}\n}\n", "t.hlo:3:",
                "unterminated string");
    check_error("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n", "t.hlo:4:1:", "expected '}'");
    check_error("HloModule m\nENTRY e {\n  c = f32[2] fusion(), calls=%nowhere\n}\n", "t.hlo:3:31:",
                "called computation is not defined");
    check_error("HloModule m\nENTRY e {\n  p = f32[2] parameter(0), sharding={devices=[2]<=[2]]\n}\n", "t.hlo:3:",
                "bracket");
    check_error("HloModule m\nENTRY e {\n}\n", "t.hlo:3:2:", "no instructions");
    /* a ',' after a computation's '}' with no attribute name after it */
    check_error("HloModule m\nENTRY e {\n  ROOT a = f32[] constant(0)\n}, =1\n", "t.hlo:4:4:",
                "expected a computation attribute, found '=1'");
}

/* A shape of more bytes than an int64 counts (XLA's limit) and a module whose values add up
 * to more are errors naming the shape or the instruction and its line; a UTF-8 byte-order
 * mark before HloModule is skipped; another kind of file is named, its bytes not quoted. */
static void test_sizes_and_kinds(void) {
    check_error("HloModule m\nENTRY e {\n  ROOT p = f32[4611686018427387904,4] parameter(0)\n}\n", "t.hlo:3:12:",
                "shape f32[4611686018427387904,4]: it holds more than 2^63 - 1 bytes");
    check_error("HloModule m\nENTRY e {\n  ROOT p = f32[2305843009213693952] parameter(0)\n}\n", "t.hlo:3:12:",
                "it holds more than 2^63 - 1 bytes"); /* 2^63 bytes: one more than int64 */
    check_error("HloModule m\nENTRY e {\n  p = u8[2,8]{1,0:T(8,1152921504606846976)} parameter(0)\n}\n", "t.hlo:3:7:",
                "more than 2^63 - 1 bytes"); /* padded to its tiles */
    check_error("HloModule m\nENTRY e {\n  p = f32[1152921504606846976] parameter(0)\n"
                "  q = f32[1152921504606846976] negate(p)\n  ROOT r = f32[1152921504606846976] negate(q)\n}\n",
                "t.hlo:4:3:", "q = f32[1152921504606846976]: the module's values up to it hold more than 2^63 - 1");
    uint64_t b = 0;
    CHECK(hbm_hlo_shape_bytes("f32[4611686018427387904,4]", 8, &b) == HBM_ERR_PARSE);
    CHECK_OK(hbm_hlo_shape_bytes("u8[9223372036854775807]", 8, &b));
    CHECK(b == 9223372036854775807ull);
    CHECK(hbm_hlo_shape_bytes("(u8[9223372036854775807], u8[1])", 8, &b) == HBM_OK); /* each fits */
    hbm_hlo_module *m = parse("\xef\xbb\xbfHloModule bom\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n");
    CHECK(m && !strcmp(hbm_hlo_module_name(m), "bom"));
    hbm_hlo_module_free(m);
    const char pickle[] = "\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94u.";
    m = (hbm_hlo_module *)1;
    CHECK(hbm_hlo_parse(pickle, sizeof pickle - 1, "s.pickle", &m) == HBM_ERR_PARSE && !m);
    CHECK(strstr(hbm_last_error(), "s.pickle is a PyTorch memory snapshot (pickle), not an HLO module"));
    for (const char *e = hbm_last_error(); *e; e++) CHECK((unsigned char)*e >= 0x20 && (unsigned char)*e < 0x7f);
}

static void test_never_crashes_on_prefixes(void) {
    /* every prefix of a real module either parses or fails cleanly */
    size_t len = strlen(kEverything);
    for (size_t k = 0; k < len; k += 7) {
        hbm_hlo_module *m = NULL;
        hbm_status s = hbm_hlo_parse(kEverything, k, "prefix", &m);
        CHECK(s == HBM_OK || s == HBM_ERR_PARSE);
        if (m) {
            hbm_plan *p = NULL;
            if (hbm_plan_run(m, NULL, &p) == HBM_OK) hbm_plan_free(p);
        }
        hbm_hlo_module_free(m);
    }
}

static void test_fault_injection(void) {
    for (uint64_t n = 1; n < 10000; n++) {
        hbm_debug_fail_host_alloc(n);
        hbm_hlo_module *m = NULL;
        hbm_status s = hbm_hlo_parse(kEverything, strlen(kEverything), "t.hlo", &m);
        hbm_plan *p = NULL;
        hbm_status s2 = s == HBM_OK ? hbm_plan_run(m, NULL, &p) : s;
        hbm_debug_fail_host_alloc(0);
        if (s == HBM_OK) CHECK(m != NULL);
        else CHECK(s == HBM_ERR_NOMEM && m == NULL);
        if (s2 == HBM_OK) {
            hbm_plan_free(p);
            hbm_hlo_module_free(m);
            return; /* the first n that succeeds everywhere */
        }
        CHECK(s2 == HBM_ERR_NOMEM && p == NULL);
        hbm_hlo_module_free(m);
    }
    CHECK(!"allocation failures never stopped");
}

/* A computation with more instructions than parse_computation's 64-entry stack buffer, so
 * its instruction array moves to the heap: every way that can fail must free it. */
static char *long_module(uint32_t n_instr) {
    size_t cap = 128 + (size_t)n_instr * 64, len = 0;
    char *t = malloc(cap);
    if (!t) return NULL;
    len += (size_t)snprintf(t + len, cap - len, "HloModule long\n\nENTRY %%main () -> f32[4] {\n");
    len += (size_t)snprintf(t + len, cap - len, "  %%v0 = f32[4]{0} constant({1, 2, 3, 4})\n");
    for (uint32_t i = 1; i < n_instr; i++)
        len += (size_t)snprintf(t + len, cap - len, "  %%v%u = f32[4]{0} negate(f32[4]{0} %%v%u)\n", i, i - 1);
    snprintf(t + len, cap - len, "}\n");
    return t;
}

static void test_long_computation_error_paths(void) {
    char *t = long_module(100);
    CHECK(t != NULL);
    if (!t) return;
    hbm_hlo_module *m = parse(t);
    CHECK(m != NULL);
    hbm_hlo_module_free(m);
    /* the regression the HLO fuzzer found: past 64 instructions, the text ends before the
     * closing '}' (the array was leaked); under ASan any leak here fails the test */
    size_t len = strlen(t);
    CHECK_STATUS(hbm_hlo_parse(t, len - 2, "cut.hlo", &m), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "expected '}' closing the computation");
    /* ... and an instruction that fails to parse past 64 */
    char *bad = strstr(t, "%v80 =");
    CHECK(bad != NULL);
    if (bad) bad[5] = '!';
    CHECK_STATUS(hbm_hlo_parse(t, len, "bad.hlo", &m), HBM_ERR_PARSE);
    if (bad) bad[5] = '=';
    /* every host allocation failing in turn, growth of the array included */
    int done = 0;
    for (uint64_t n = 1; n < 10000 && !done; n++) {
        hbm_debug_fail_host_alloc(n);
        hbm_status s = hbm_hlo_parse(t, len, "t.hlo", &m);
        hbm_debug_fail_host_alloc(0);
        if (s == HBM_OK) {
            done = 1;
            hbm_hlo_module_free(m);
        } else {
            CHECK(s == HBM_ERR_NOMEM && m == NULL);
        }
    }
    CHECK(done);
    free(t);
}

/* the fuzzer's own input, where ../shared/data holds it */
static void test_fuzz_regression_inputs(void) {
#ifdef HBM_SHARED_DATA
    const char *path = HBM_SHARED_DATA "/fuzz/hlo-leak-parse_computation.hlo";
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("  (skipped: %s absent)\n", path);
        return;
    }
    fclose(f);
    hbm_hlo_module *m = NULL;
    hbm_status s = hbm_hlo_parse_file(path, &m);
    CHECK(s == HBM_ERR_PARSE && m == NULL);
    hbm_hlo_module_free(m);
#endif
}

static void test_file_errors(void) {
    hbm_hlo_module *m;
    CHECK_STATUS(hbm_hlo_parse_file("/nonexistent/x.hlo", &m), HBM_ERR_IO);
    CHECK_CONTAINS(hbm_last_error(), "/nonexistent/x.hlo");
    CHECK_STATUS(hbm_hlo_parse(NULL, 1, "x", &m), HBM_ERR_INVALID);
}

int main(void) {
    RUN(test_sizes_of_every_primitive);
    RUN(test_parse_everything);
    RUN(test_old_style_and_unscheduled);
    RUN(test_error_positions);
    RUN(test_sizes_and_kinds);
    RUN(test_never_crashes_on_prefixes);
    RUN(test_fault_injection);
    RUN(test_long_computation_error_paths);
    RUN(test_fuzz_regression_inputs);
    RUN(test_file_errors);
    return test_done();
}
