/* test_api_json.c - hbm/json_api.h: outputs into caller buffers and whole files, the
 * plan target, the backend check, replay defaults and the last error's location. */
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "trace/replay/replay_run.h" /* hbmi_replay_requests */

static const char *svd = HBM_SOURCE_DIR "/examples/svd_oom.hlo";


static void test_target(void) {
    hbm_plan_target t;
    CHECK_OK(hbm_plan_target_resolve("v100-16gb", NULL, 0, &t));
    CHECK_EQ_U64(t.capacity, 17179869184ull);
    CHECK(t.fraction > 0.74 && t.fraction < 0.76);
    CHECK_STR(t.device_name, "V100-16GB");
    CHECK_OK(hbm_plan_target_resolve(NULL, "16GiB", 0.5, &t));
    CHECK_EQ_U64(t.capacity, 17179869184ull);
    CHECK(t.fraction == 0.5);
    CHECK_STR(t.device_name, "a device of 16.00GiB");
    CHECK_OK(hbm_plan_target_resolve(NULL, NULL, 0, &t));
    CHECK_EQ_U64(t.capacity, 0);
    CHECK_STATUS(hbm_plan_target_resolve("h100", "16GiB", 0, &t), HBM_ERR_INVALID);
    CHECK_STATUS(hbm_plan_target_resolve("no-such-gpu", NULL, 0, &t), HBM_ERR_INVALID);
    CHECK_STATUS(hbm_plan_target_resolve(NULL, "lots", 0, &t), HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "lots");
    CHECK_STATUS(hbm_plan_target_resolve(NULL, "1GiB", 1.5, &t), HBM_ERR_INVALID);
    CHECK_STATUS(hbm_plan_target_resolve(NULL, "1GiB", -0.1, &t), HBM_ERR_INVALID);
    hbm_plan_options o;
    CHECK_OK(hbm_plan_backend_options(NULL, &o));
    CHECK(o.backend == HBM_BACKEND_AUTO);
    CHECK_OK(hbm_plan_backend_options("gpu", &o));
    CHECK(o.backend == HBM_BACKEND_GPU);
    CHECK_OK(hbm_plan_backend_options("cuda", &o));
    CHECK(o.backend == HBM_BACKEND_GPU);
    CHECK_OK(hbm_plan_backend_options("tpu", &o));
    CHECK(o.backend == HBM_BACKEND_TPU);
    CHECK_STATUS(hbm_plan_backend_options("xpu", &o), HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "xpu");
}

static void test_plan_outputs(void) {
    hbm_hlo_module *m;
    hbm_plan *p;
    CHECK_OK(hbm_hlo_parse_file(svd, &m));
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    hbm_plan_target t;
    CHECK_OK(hbm_plan_target_resolve("v100-16gb", NULL, 0, &t));
    /* the buffer version equals what the FILE version writes */
    char *mem = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&mem, &n);
    CHECK(f);
    CHECK_OK(hbm_plan_json(p, f, 15, t.capacity, t.fraction));
    fclose(f);
    size_t len = 0;
    CHECK_OK(hbm_plan_json_format(p, 15, &t, NULL, 0, &len));
    CHECK_EQ_U64(len, n);
    char *buf = malloc(len + 1);
    CHECK(buf);
    CHECK_OK(hbm_plan_json_format(p, 15, &t, buf, len + 1, &len));
    CHECK_STR(buf, mem);
    CHECK_CONTAINS(buf, "\"temp_size_in_bytes\": 360336162820");
    CHECK_CONTAINS(buf, "\"verdict\": \"does_not_fit\"");
    /* cut to the buffer, NUL-terminated, full length reported */
    char small[8];
    CHECK_OK(hbm_plan_json_format(p, 15, &t, small, sizeof small, &len));
    CHECK_EQ_U64(len, n);
    CHECK_EQ_U64(strlen(small), 7);
    CHECK(!memcmp(small, mem, 7));
    free(buf);
    free(mem);
    /* the CLI's text: XLA's block, the explanation, the verdict */
    CHECK_OK(hbm_plan_text_format(p, 15, &t, NULL, 0, &len));
    buf = malloc(len + 1);
    CHECK(buf);
    CHECK_OK(hbm_plan_text_format(p, 15, &t, buf, len + 1, &len));
    CHECK_CONTAINS(buf, "BufferAssignment OOM Debugging.");
    CHECK_CONTAINS(buf, "Verdict for V100-16GB");
    CHECK_CONTAINS(buf, "DOES NOT FIT");
    free(buf);
    CHECK_OK(hbm_plan_text_format(p, 15, NULL, NULL, 0, &len));
    buf = malloc(len + 1);
    CHECK(buf);
    CHECK_OK(hbm_plan_text_format(p, 15, NULL, buf, len + 1, &len));
    CHECK(!strstr(buf, "Verdict"));
    free(buf);
    CHECK_OK(hbm_plan_explain_format(p, 8, &t, NULL, 0, &len));
    buf = malloc(len + 1);
    CHECK(buf);
    CHECK_OK(hbm_plan_explain_format(p, 8, &t, buf, len + 1, &len));
    CHECK(!strstr(buf, "BufferAssignment"));
    CHECK_CONTAINS(buf, "DOES NOT FIT");
    free(buf);
    CHECK_OK(hbm_plan_html_string(p, "svd", &buf, &len));
    CHECK(buf && len == strlen(buf));
    CHECK_CONTAINS(buf, "<html");
    CHECK_CONTAINS(buf, "svd");
    hbm_string_free(buf);
    CHECK_OK(hbm_plan_view_string(p, 1, 3, &buf, &len));
    CHECK(buf && len == strlen(buf));
    CHECK_CONTAINS(buf, "\"module\"");
    hbm_string_free(buf);
    buf = (char *)"x";
    CHECK_STATUS(hbm_plan_view_string(NULL, 0, 0, &buf, &len), HBM_ERR_INVALID);
    CHECK(buf == NULL && len == 0);
    CHECK_STATUS(hbm_plan_html_string(p, NULL, NULL, &len), HBM_ERR_INVALID);
    CHECK_STATUS(hbm_plan_json_format(NULL, 15, NULL, NULL, 0, &len), HBM_ERR_INVALID);
    CHECK_STATUS(hbm_plan_json_format(p, 15, NULL, NULL, 0, NULL), HBM_ERR_INVALID);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);
}

static char *fmt_view(const hbm_trace *t, hbm_view_kind k, int top) {
    size_t len;
    char *b;
    if (hbm_view_string(t, k, top, NULL, &b, &len)) return NULL;
    if (len != strlen(b)) { /* a string of its own size */
        hbm_string_free(b);
        return NULL;
    }
    return b;
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* What the CLI prints, written by the library (hbm plan, hbm devices, hbm pack's progress):
 * the JSON wrapper around a --pack what-if, text lines cut to the width, the verdict. */
static char *written(FILE *f, char **mem) {
    fclose(f);
    return *mem;
}

static void test_cli_outputs(void) {
    hbm_hlo_module *m;
    hbm_plan *p;
    CHECK_OK(hbm_hlo_parse_file(svd, &m));
    CHECK_OK(hbm_plan_run(m, NULL, &p));
    hbm_plan_target t;
    CHECK_OK(hbm_plan_target_resolve("v100-16gb", NULL, 0, &t));
    CHECK(hbm_plan_target_fails(p, &t)); /* 335 GiB on a 16 GiB device */
    CHECK(!hbm_plan_target_fails(p, NULL));
    hbm_plan_target big;
    CHECK_OK(hbm_plan_target_resolve(NULL, "1TiB", 1, &big));
    CHECK(!hbm_plan_target_fails(p, &big));
    hbm_pack_options po;
    hbm_pack_options_default(&po);
    po.algo = HBM_PACK_GREEDY_SIZE;
    hbm_pack_result pr;
    uint64_t heap = 0;
    CHECK_OK(hbm_plan_pack_temp(p, &po, &pr, &heap));
    char *mem = NULL;
    size_t n = 0;
    /* JSON alone: the plan's object as hbm_plan_json writes it */
    hbm_plan_output o = {.plan = p, .top = 3, .target = &t, .json = 1};
    FILE *f = open_memstream(&mem, &n);
    CHECK_OK(hbm_plan_output_write(&o, f));
    written(f, &mem);
    char *alone = NULL;
    size_t an = 0;
    f = open_memstream(&alone, &an);
    CHECK_OK(hbm_plan_json(p, f, 3, t.capacity, t.fraction));
    written(f, &alone);
    CHECK_STR(mem, alone);
    free(mem);
    /* with the what-if: {"plan": <the same>, "pack": {...}} */
    o.pack = &pr, o.pack_algo = po.algo, o.pack_heap_bytes = heap;
    f = open_memstream(&mem, &n);
    CHECK_OK(hbm_plan_output_write(&o, f));
    written(f, &mem);
    CHECK(!strncmp(mem, "{\"plan\": ", 9));
    CHECK(!strncmp(mem + 9, alone, an));
    CHECK_CONTAINS(mem + 9 + an, ", \"pack\": {\"algorithm\": \"greedy\"");
    CHECK_EQ_U64(strlen(mem) > 3 ? (uint64_t)!strcmp(mem + strlen(mem) - 3, "}}\n") : 0, 1);
    free(mem);
    free(alone);
    /* text: no line longer than the width, some cut in the middle; 0: whole */
    o.json = 0, o.width = 40;
    f = open_memstream(&mem, &n);
    CHECK_OK(hbm_plan_output_write(&o, f));
    written(f, &mem);
    size_t longest = 0, cuts = 0;
    for (char *line = mem, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        CHECK(nl);
        if (!nl) break;
        if ((size_t)(nl - line) > longest) longest = (size_t)(nl - line);
        *nl = 0;
        cuts += strstr(line, "...") != NULL;
        *nl = '\n';
    }
    CHECK(longest <= 40);
    CHECK(cuts > 0);
    CHECK_CONTAINS(mem, "Repacking"); /* the what-if's lines follow the plan's */
    free(mem);
    o.width = 0;
    f = open_memstream(&mem, &n);
    CHECK_OK(hbm_plan_output_write(&o, f));
    written(f, &mem);
    CHECK(strlen(mem) > 0);
    CHECK_CONTAINS(mem, "BufferAssignment OOM Debugging");
    free(mem);
    hbm_plan_free(p);
    hbm_hlo_module_free(m);

    /* hbm devices: a JSON array of every model, a table fitted to the width */
    f = open_memstream(&mem, &n);
    CHECK_OK(hbm_device_models_write(f, 1, 0));
    written(f, &mem);
    CHECK(mem[0] == '[');
    const hbm_device_model *h100 = hbm_device_model_find("H100-80GB");
    CHECK(h100);
    char want[160];
    snprintf(want, sizeof want, "{\"name\": \"H100-80GB\", \"capacity_bytes\": %llu, \"default_fraction\": 0.75",
             h100 ? (unsigned long long)h100->capacity_bytes : 0ull);
    CHECK_CONTAINS(mem, want);
    size_t objects = 0;
    for (const char *q = mem; (q = strstr(q, "{\"name\"")); q++) objects++;
    CHECK_EQ_U64(objects, hbm_device_model_count());
    free(mem);
    f = open_memstream(&mem, &n);
    CHECK_OK(hbm_device_models_write(f, 0, 30));
    written(f, &mem);
    CHECK(!strncmp(mem, "NAME", 4));
    for (char *line = mem, *nl; *line && (nl = strchr(line, '\n')); line = nl + 1) CHECK(nl - line <= 30);
    free(mem);

    /* hbm pack's progress line on a terminal, then blanked after a long search */
    hbm_pack_progress pg = {.seconds = 1.5, .nodes = 1234, .best = UINT64_MAX, .lower_bound = 4096};
    f = open_memstream(&mem, &n);
    hbm_pack_progress_line(f, &pg);
    hbm_pack_result quick = {.seconds = 0.1}, slow = {.seconds = 0.6};
    hbm_pack_progress_end(f, &quick);
    written(f, &mem);
    CHECK_STR(mem, "\r      1.5 s          1234 nodes  best -  bound 4096   ");
    free(mem);
    f = open_memstream(&mem, &n);
    hbm_pack_progress_end(f, &slow);
    written(f, &mem);
    CHECK_EQ_U64(strlen(mem), 72);
    free(mem);
}

static void test_trace_outputs(void) {
    hbm_trace *t;
    CHECK_OK(hbm_trace_load(svd, &t)); /* an HLO module loads as its runtime sequence */
    size_t len;
    char info[512];
    CHECK_OK(hbm_trace_info_format(t, info, sizeof info, &len));
    CHECK(len < sizeof info);
    CHECK_CONTAINS(info, "\"events\": ");
    char *j = fmt_view(t, HBM_VIEW_JSON, 3);
    CHECK(j);
    CHECK_CONTAINS(j, "\"peak_bytes_in_use\"");
    hbm_string_free(j);
    char *h = fmt_view(t, HBM_VIEW_HTML, -1);
    CHECK(h);
    CHECK_CONTAINS(h, "<html");
    hbm_string_free(h);
    CHECK_STATUS(hbm_view_string(t, (hbm_view_kind)7, -1, NULL, &h, &len), HBM_ERR_INVALID);
    CHECK(h == NULL);
    CHECK_OK(hbm_diff_string(t, t, 1, &h, &len)); /* a trace against itself */
    CHECK(h && len == strlen(h));
    CHECK_CONTAINS(h, "\"delta_bytes_in_use\"");
    hbm_string_free(h);
    CHECK_STATUS(hbm_diff_string(t, NULL, 0, &h, &len), HBM_ERR_INVALID);
    CHECK(h == NULL);

    char dir[] = "/tmp/hbm_api_json_XXXXXX", path[256], tmp_left[300];
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/out.json", dir);
    CHECK_STATUS(hbm_export_file(t, "svg", path), HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "perfetto");
    CHECK(!exists(path));
    mode_t old = umask(022);
    CHECK_OK(hbm_export_file(t, "perfetto", path));
    umask(old);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644); /* as fopen would create it */
    CHECK_OK(hbm_view_file(t, HBM_VIEW_TEXT, 5, NULL, path)); /* replaces it whole */
    snprintf(tmp_left, sizeof tmp_left, "rm -f %s/out.json; rmdir %s", dir, dir);
    CHECK(system(tmp_left) == 0); /* fails if a temporary file was left behind */
    snprintf(path, sizeof path, "%s/no/such/dir/x.html", dir);
    CHECK_STATUS(hbm_view_file(t, HBM_VIEW_HTML, -1, NULL, path), HBM_ERR_IO);

    /* replay: the default configurations and device, replayed once for a string of its
     * own size (the engine counts the requests it runs) */
    size_t runs = hbmi_replay_requests();
    char *r = NULL;
    CHECK_OK(hbm_replay_string(t, NULL, NULL, 0, 1, &r, &len));
    CHECK(hbmi_replay_requests() == runs + 1);
    CHECK(r && len == strlen(r));
    CHECK_CONTAINS(r, "\"config\": \"allocator=bfc\"");
    CHECK_CONTAINS(r, "\"config\": \"allocator=platform\"");
    CHECK_CONTAINS(r, "\"device\": \"sim:80GiB\"");
    { /* byte for byte what hbm_replay_run_write writes (the CLI's hbm replay), but times */
        char *w = NULL;
        size_t wn = 0;
        FILE *wf = open_memstream(&w, &wn);
        CHECK(wf);
        CHECK_OK(hbm_replay_run_write(t, NULL, NULL, 0, wf, 0, NULL));
        fclose(wf);
        char *txt = NULL;
        size_t tn = 0;
        CHECK_OK(hbm_replay_string(t, NULL, NULL, 0, 0, &txt, &tn));
        CHECK(txt && tn == wn);
        CHECK(txt && !strncmp(txt, w, strcspn(w, "\n"))); /* the heading line */
        hbm_string_free(txt);
        free(w);
    }
    /* the rows alone: the same configurations, no packing (hbm.replay returns only rows) */
    char *rows = NULL;
    size_t rlen = 0;
    runs = hbmi_replay_requests();
    CHECK_OK(hbm_replay_rows_string(t, NULL, NULL, 0, &rows, &rlen));
    CHECK(hbmi_replay_requests() == runs + 1);
    CHECK(rows && rlen == strlen(rows));
    CHECK(rlen <= len);
    CHECK_CONTAINS(rows, "\"config\": \"allocator=bfc\"");
    CHECK_CONTAINS(rows, "\"config\": \"allocator=platform\"");
    CHECK_CONTAINS(rows, "\"packed_bytes\": 0,");
    CHECK(strstr(r, "\"packed_bytes\": 0,") == NULL); /* the full replay packs the svd's buffers */
    CHECK(!strncmp(strstr(rows, "\"optimal_bound_bytes\""), strstr(r, "\"optimal_bound_bytes\""), 40));
    CHECK(rlen > 0 && rows[rlen - 1] == '\n');
    char *str = (char *)"x";
    size_t slen = 0;
    CHECK_STATUS(hbm_replay_rows_string(t, "no-such-gpu", NULL, 0, &str, &slen), HBM_ERR_INVALID);
    CHECK(str == NULL);
    CHECK_STATUS(hbm_replay_suggest_string(t, NULL, &str, &slen), HBM_ERR_INVALID); /* not a PyTorch snapshot */
    CHECK(str == NULL);
    hbm_string_free(NULL);
    hbm_string_free(rows);
    hbm_string_free(r);
    const char *cfg[] = {"allocator=vmm"};
    int failed = 1;
    char *mem = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&mem, &n);
    CHECK(f);
    CHECK_OK(hbm_replay_run_write(t, "h100", cfg, 1, f, 0, &failed));
    fclose(f);
    CHECK(failed == 1); /* the svd's 335 GiB request runs out of memory on an H100 */
    CHECK_CONTAINS(mem, "vmm");
    free(mem);
    r = (char *)"x";
    CHECK_STATUS(hbm_replay_string(t, "no-such-gpu", NULL, 0, 1, &r, &len), HBM_ERR_INVALID);
    CHECK(r == NULL && len == 0);
    hbm_trace_free(t);
}

static void test_error_location(void) {
    const char *bad = "HloModule m\n\nENTRY e {\n  x = f32[2 parameter(0)\n}\n";
    hbm_hlo_module *m;
    CHECK_STATUS(hbm_hlo_parse(bad, strlen(bad), "bad.hlo", &m), HBM_ERR_PARSE);
    char file[64];
    int line = -1, col = -1;
    CHECK(hbm_last_error_location(file, sizeof file, &line, &col) == 1);
    CHECK_STR(file, "bad.hlo");
    CHECK(line == 4);
    CHECK(col > 0);
    char cut[4];
    CHECK(hbm_last_error_location(cut, sizeof cut, NULL, NULL) == 1);
    CHECK_STR(cut, "bad");
    const char *csv = "Thread,Time,Action,Pointer,Size,Stream\n1,2,allocate,0x10\n";
    hbm_trace *t;
    CHECK(hbm_trace_parse_rmm_csv(csv, strlen(csv), "log.csv", &t) == HBM_ERR_PARSE);
    CHECK(hbm_last_error_location(file, sizeof file, &line, &col) == 1);
    CHECK_STR(file, "log.csv");
    CHECK(line == 2 && col == 0);
    hbm_clear_error();
    CHECK(hbm_last_error_location(file, sizeof file, &line, &col) == 0);
    CHECK_STR(file, "");
    CHECK(line == 0 && col == 0);
    hbm_plan_target t2;
    CHECK_STATUS(hbm_plan_target_resolve(NULL, "16:2: GiB", 0, &t2), HBM_ERR_INVALID);
    CHECK(hbm_last_error_location(NULL, 0, &line, &col) == 0); /* "capacity '16:2: ..." has no FILE: */
}

static char *noted(const char *path, const char *module, hbm_status *st, hbm_hlo_module **m) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    *st = hbm_hlo_open_noted(path, module, f, m);
    fclose(f);
    return text;
}

/* hbm_hlo_open_noted: what plan, view and fit say of the module they show */
static void test_open_noted(void) {
    hbm_hlo_module *m = NULL;
    hbm_status st;
    char *t = noted(svd, NULL, &st, &m); /* HLO text: one module, nothing to say */
    CHECK(t);
    CHECK_OK(st);
    CHECK(m);
    CHECK_STR(t, "");
    free(t);
    hbm_hlo_module_free(m);
    m = NULL;
    t = noted(svd, "other", &st, &m);
    CHECK(t);
    CHECK_STATUS(st, HBM_ERR_INVALID);
    CHECK(!m);
    CHECK_STR(t, "");
    free(t);
    CHECK_STATUS(hbm_hlo_open_noted(NULL, NULL, stdout, &m), HBM_ERR_INVALID);
    CHECK_OK(hbm_hlo_open_noted(svd, NULL, NULL, &m)); /* no notes: hbm_hlo_open */
    hbm_hlo_module_free(m);
    m = NULL;
    const char *x = HBM_SHARED_DATA "/xprof/rocm_te_fused_attn.xplane.pb";
    if (access(x, R_OK)) {
        printf("(%s not found: the profile's notes not checked)\n", x);
        return;
    }
    t = noted(x, NULL, &st, &m); /* nine modules: the list, then the largest's name */
    CHECK(t);
    CHECK_OK(st);
    CHECK(m);
    CHECK_CONTAINS(t, "jit__normal(13)");
    CHECK_CONTAINS(t, "\nShowing the largest, jit_loss_fn(17) (--module NAME picks another)\n\n");
    CHECK(!strstr(t, "note: no XLA buffer assignment")); /* the profile carries XLA's */
    free(t);
    hbm_hlo_module_free(m);
    m = NULL;
    t = noted(x, "jit__normal(13)", &st, &m);
    CHECK(t);
    CHECK_OK(st);
    CHECK_CONTAINS(t, "\nShowing jit__normal(13)\n\n");
    free(t);
    hbm_hlo_module_free(m);
    m = NULL;
    t = noted(x, "no_such_module", &st, &m);
    CHECK(t);
    CHECK_STATUS(st, HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "no_such_module");
    CHECK(!m);
    free(t);
}

/* one list of export formats for the CLI's check and the writers' */
static void test_export_formats(void) {
    const char *ok[] = {"perfetto", "pprof", "torch", "minimalloc"};
    for (size_t i = 0; i < 4; i++) {
        CHECK_OK(hbm_export_format_check(ok[i]));
        CHECK_CONTAINS(hbm_export_formats(), ok[i]);
    }
    CHECK_STATUS(hbm_export_format_check("svg"), HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "'svg'");
    CHECK_CONTAINS(hbm_last_error(), hbm_export_formats());
    CHECK_STATUS(hbm_export_format_check(NULL), HBM_ERR_INVALID);
    CHECK_STATUS(hbm_export_format_check("Perfetto"), HBM_ERR_INVALID);
}

int main(void) {
    RUN(test_target);
    RUN(test_plan_outputs);
    RUN(test_cli_outputs);
    RUN(test_trace_outputs);
    RUN(test_error_location);
    RUN(test_open_noted);
    RUN(test_export_formats);
    return test_done();
}
