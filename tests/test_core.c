/* test_core.c - status strings, sizes, the hash map, the tag table, fault injection. */
#include <unistd.h>

#include "core/internal.h"
#include "test.h"

static void test_status(void) {
    CHECK_STR(hbm_status_name(HBM_ERR_OOM), "HBM_ERR_OOM");
    CHECK_CONTAINS(hbm_status_str(HBM_ERR_OOM), "RESOURCE_EXHAUSTED");
    CHECK_STR(hbm_status_str(HBM_OK), "ok");
    CHECK_STR(hbm_status_str((hbm_status)-999), "unknown status");
    hbm_status s = hbmi_error(HBM_ERR_CONFIG, "value %d", 7);
    CHECK(s == HBM_ERR_CONFIG);
    CHECK_STR(hbm_last_error(), "value 7");
    hbmi_error_prefix(s, "ctx: ");
    CHECK_STR(hbm_last_error(), "ctx: value 7");
    hbm_clear_error();
    CHECK_STR(hbm_last_error(), "");
    CHECK_STR(hbm_category_str(HBM_CAT_TEMP), "temp");
    CHECK_STR(hbm_category_str((hbm_category)99), "");
}

/* The location of an error is a field of the thread's error record, set where the error is
 * found, not read back out of the message. */
static void test_error_record(void) {
    char file[64];
    int line = -1, col = -1;
    CHECK_STATUS(hbmi_error_at(HBM_ERR_PARSE, "my model.hlo", 3, 7, "expected %s", "']'"), HBM_ERR_PARSE);
    CHECK_STR(hbm_last_error(), "my model.hlo:3:7: expected ']'");
    CHECK(hbm_last_error_location(file, sizeof file, &line, &col) == 1); /* a blank in FILE */
    CHECK_STR(file, "my model.hlo");
    CHECK(line == 3 && col == 7);
    hbmi_error_prefix(HBM_ERR_PARSE, "fit: the changed module does not plan: "); /* context kept apart */
    CHECK_STR(hbm_last_error(), "fit: the changed module does not plan: my model.hlo:3:7: expected ']'");
    CHECK(hbm_last_error_location(file, sizeof file, &line, &col) == 1);
    CHECK_STR(file, "my model.hlo");
    CHECK(line == 3 && col == 7);
    hbmi_error_at(HBM_ERR_PARSE, "log.csv", 12, 0, "too many columns");
    CHECK_STR(hbm_last_error(), "log.csv:12: too many columns");
    CHECK(hbm_last_error_location(NULL, 0, &line, &col) == 1);
    CHECK(line == 12 && col == 0);
    /* a message that only looks like a location (a value quoted from the input) has none */
    hbmi_error(HBM_ERR_INVALID, "a.hlo:1:2: is not a device name");
    CHECK(hbm_last_error_location(file, sizeof file, &line, &col) == 0);
    CHECK_STR(file, "");
    CHECK(line == 0 && col == 0);
    hbmi_error_at(HBM_ERR_PARSE, "x.hlo", 1, 1, "bad");
    hbm_clear_error();
    CHECK(hbm_last_error_location(file, sizeof file, &line, &col) == 0);
    CHECK_STR(hbm_last_error(), "");
}

static void test_size_parse(void) {
    static const struct { const char *text; uint64_t want; } ok[] = {
        {"0", 0}, {"1048576", 1048576}, {"80GiB", 80ULL << 30}, {"80G", 80ULL << 30}, {"80 gb", 80000000000ULL},
        {"1.5GiB", 3ULL << 29}, {"2MiB", 2u << 20}, {"16k", 16384}, {"512B", 512}, {" 7 ", 7},
        {"0.5K", 512}, {"1T", 1ULL << 40}, {"141GB", 141000000000ULL}, {".25MiB", 1u << 18},
        /* SI decimal, IEC binary, a bare prefix binary */
        {"40GB", 40000000000ULL}, {"40GiB", 40ULL << 30}, {"1KB", 1000}, {"1kB", 1000}, {"1.5MB", 1500000},
        {"2TB", 2000000000000ULL}, {"2TiB", 2ULL << 40}, {"3M", 3u << 20}, {"1EiB", 1ULL << 60},
        {"18EB", 18000000000000000000ULL}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 1234;
        CHECK_OK(hbm_size_parse(ok[i].text, &v));
        CHECK_EQ_U64(v, ok[i].want);
    }
    static const char *const bad[] = {"", "GiB", "-1", "1.5", "12XB", "1 2", "99999999999999999999",
                                      "20000000000T", "1e3", "abc", "19EB", "16EiB", "1iB", "1KiBB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v;
        CHECK_STATUS(hbm_size_parse(bad[i], &v), HBM_ERR_INVALID);
        CHECK(strlen(hbm_last_error()) > 0);
        /* too large (a size past 2^64 - 1) is told by *out, not by the message's words */
        int large = !strcmp(bad[i], "99999999999999999999") || !strcmp(bad[i], "20000000000T") ||
                    !strcmp(bad[i], "19EB") || !strcmp(bad[i], "16EiB");
        CHECK_EQ_U64(v, large ? UINT64_MAX : 0);
    }
    uint64_t v = 7; /* a fraction that carries past 2^64 - 1 */
    CHECK_STATUS(hbm_size_parse("18446744073709551.9KB", &v), HBM_ERR_INVALID);
    CHECK_EQ_U64(v, UINT64_MAX);
}

static void test_size_format(void) {
    char b[32];
    /* XLA's HumanReadableNumBytes, as in the seed bug report */
    CHECK_STR(hbm_size_xla(112, b), "112B");
    CHECK_STR(hbm_size_xla(0, b), "0B");
    CHECK_STR(hbm_size_xla(1023, b), "1023B");
    CHECK_STR(hbm_size_xla(1024, b), "1.0KiB");
    CHECK_STR(hbm_size_xla(10240, b), "10.0KiB");
    CHECK_STR(hbm_size_xla(60000000, b), "57.22MiB");
    CHECK_STR(hbm_size_xla(360000000000LL, b), "335.28GiB");
    CHECK_STR(hbm_size_xla(-2048, b), "-2.0KiB");
    CHECK_STR(hbm_size_xla(INT64_MIN, b), "-8E");
    CHECK_STR(hbm_size_human(512, b), "512B");
    CHECK_STR(hbm_size_human(80ULL << 30, b), "80.00GiB");
    CHECK_STR(hbm_size_human(1536, b), "1.5KiB");
    CHECK_STR(hbm_size_human(UINT64_MAX, b), "16.00EiB");
}

static void test_map(void) {
    hbmi_map m;
    hbmi_map_init(&m);
    test_rng r = {42};
    enum { N = 20000 };
    static uint64_t keys[N];
    for (int i = 0; i < N; i++) {
        keys[i] = test_rand(&r) >> 1;
        CHECK_OK(hbmi_map_put(&m, keys[i], (uint64_t)i));
    }
    CHECK_EQ_U64(m.count, N);
    CHECK_OK(hbmi_map_check(&m));
    for (int i = 0; i < N; i++) {
        uint64_t v;
        CHECK(hbmi_map_get(&m, keys[i], &v));
        CHECK_EQ_U64(v, i);
    }
    /* delete every other key; the rest must stay reachable (backward shift) */
    for (int i = 0; i < N; i += 2) CHECK(hbmi_map_del(&m, keys[i], NULL));
    for (int i = 0; i < N; i++) {
        uint64_t v;
        CHECK(hbmi_map_get(&m, keys[i], &v) == (i % 2));
    }
    CHECK(!hbmi_map_del(&m, keys[0], NULL));
    CHECK_OK(hbmi_map_check(&m));
    /* the walker sees a broken map: a count off by one, a key cut off from its home */
    m.count++;
    CHECK_STATUS(hbmi_map_check(&m), HBM_ERR_CORRUPT);
    m.count--;
    size_t mask = m.cap - 1, at = 0, far = 0;
    for (; at < m.cap; at++) { /* a key, and an empty slot two before its home */
        far = (hbmi_map_home(&m, m.s[at].key) + m.cap - 2) & mask;
        if (m.s[at].key && !m.s[far].key) break;
    }
    CHECK(at < m.cap);
    if (at < m.cap) { /* moved there, the key is out of reach: lookups start at its home */
        m.s[far] = m.s[at];
        m.s[at].key = 0;
        CHECK_STATUS(hbmi_map_check(&m), HBM_ERR_CORRUPT);
        m.s[at] = m.s[far];
        m.s[far].key = 0;
    }
    CHECK_OK(hbmi_map_check(&m));
    CHECK_STATUS(hbmi_map_put(&m, UINT64_MAX, 1), HBM_ERR_INVALID);
    CHECK_OK(hbmi_map_put(&m, keys[1], 99));
    uint64_t v;
    CHECK(hbmi_map_get(&m, keys[1], &v) && v == 99);
    hbmi_map_destroy(&m);
}

static void test_tagtab(void) {
    hbmi_tagtab *t;
    CHECK_OK(hbmi_tagtab_new(&t));
    char op[16] = "matmul";
    hbm_tag a = {.op_name = op, .shape = "f32[4]", .source_line = 3, .category = HBM_CAT_TEMP};
    uint32_t ia, ib, ic, in;
    CHECK_OK(hbmi_tagtab_intern(t, &a, &ia));
    strcpy(op, "changed"); /* the table keeps its own copy */
    hbm_tag b = {.op_name = "matmul", .shape = "f32[4]", .source_line = 3, .category = HBM_CAT_TEMP};
    CHECK_OK(hbmi_tagtab_intern(t, &b, &ib));
    CHECK_EQ_U64(ia, ib);
    b.source_line = 4;
    CHECK_OK(hbmi_tagtab_intern(t, &b, &ic));
    CHECK(ic != ia);
    CHECK_OK(hbmi_tagtab_intern(t, NULL, &in));
    CHECK_EQ_U64(in, 0);
    CHECK_STR(hbmi_tagtab_get(t, ia)->op_name, "matmul");
    CHECK(hbmi_tagtab_get(t, 0) == NULL && hbmi_tagtab_get(t, 99) == NULL);
    CHECK_EQ_U64(hbmi_tagtab_count(t), 2);
    hbmi_tagtab_free(t);
}

/* SQLite-style: fail the Nth host allocation for N = 1, 2, ... until interning succeeds. */
static void test_tagtab_faults(void) {
    for (uint64_t n = 1;; n++) {
        hbmi_tagtab *t = NULL;
        hbm_debug_fail_host_alloc(n);
        hbm_status s = hbmi_tagtab_new(&t);
        uint32_t id = 0;
        hbm_tag tag = {.op_name = "a", .shape = "b", .source_file = "c", .label = "d"};
        if (!s) s = hbmi_tagtab_intern(t, &tag, &id);
        hbm_debug_fail_host_alloc(0);
        if (!s) {
            CHECK(id == 1);
            hbmi_tagtab_free(t);
            CHECK(n > 3); /* it did take several allocations to get here */
            break;
        }
        CHECK(s == HBM_ERR_NOMEM);
        if (t) { /* a failed intern leaves the table usable and unchanged */
            CHECK_EQ_U64(hbmi_tagtab_count(t), 0);
            CHECK_OK(hbmi_tagtab_intern(t, &tag, &id));
            hbmi_tagtab_free(t);
        }
        CHECK(n < 100);
    }
}

static int slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
    return (int)n;
}

static int count_entries(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = -1;
        pclose(p);
    }
    return n;
}

static void test_output_files(void) {
    char dir[] = "/tmp/hbm-test-output-XXXXXX", path[300], buf[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/out.txt", dir);
    hbm_output o;
    /* a new file appears only on commit */
    CHECK_OK(hbm_output_open(&o, path));
    fputs("first", o.f);
    CHECK(slurp(path, buf, sizeof buf) < 0);
    CHECK_OK(hbm_output_commit(&o));
    CHECK(slurp(path, buf, sizeof buf) == 5 && !strcmp(buf, "first"));
    /* an abort keeps the old file and removes the temporary */
    CHECK_OK(hbm_output_open(&o, path));
    fputs("second, half written", o.f);
    hbm_output_abort(&o);
    CHECK(slurp(path, buf, sizeof buf) == 5 && !strcmp(buf, "first"));
    CHECK(count_entries(dir) == 1);
    /* a replacement is whole */
    CHECK_OK(hbm_output_open(&o, path));
    fputs("second", o.f);
    CHECK_OK(hbm_output_commit(&o));
    CHECK(slurp(path, buf, sizeof buf) == 6 && !strcmp(buf, "second"));
    CHECK(count_entries(dir) == 1);
    /* a folder is not a file; a missing folder names the path */
    CHECK_STATUS(hbm_output_open(&o, dir), HBM_ERR_IO);
    CHECK_CONTAINS(hbm_last_error(), "is a directory");
    char missing[340];
    snprintf(missing, sizeof missing, "%s/no/such/x", dir);
    CHECK_STATUS(hbm_output_open(&o, missing), HBM_ERR_IO);
    CHECK_CONTAINS(hbm_last_error(), missing);
    /* the input side: a folder is named as such */
    char *data;
    size_t len;
    CHECK_STATUS(hbmi_read_file(dir, &data, &len), HBM_ERR_IO);
    CHECK_CONTAINS(hbm_last_error(), "is a directory");
    unlink(path);
    rmdir(dir);
}

/* Big arrays: contents kept across the heap-to-mapping step and mremap growth, every
 * failure leaves the array as it was. */
static void test_big_arrays(void) {
    uint32_t *a = NULL;
    size_t cap = 0, n = (size_t)3 << 20; /* 12 MiB of uint32: heap, then its own mapping */
    for (size_t i = 0; i < n; i++) {
        if (i == cap) CHECK_OK(hbmi_big_grow((void **)&a, &cap, i + 1, sizeof *a));
        if (test_failures_) return;
        a[i] = (uint32_t)(i * 2654435761u);
    }
    CHECK(cap >= n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += a[i] != (uint32_t)(i * 2654435761u);
    CHECK_EQ_U64(bad, 0);
    size_t old = cap;
    hbm_debug_fail_host_alloc(1);
    CHECK_STATUS(hbmi_big_grow((void **)&a, &cap, cap + 1, sizeof *a), HBM_ERR_NOMEM);
    hbm_debug_fail_host_alloc(0);
    CHECK_EQ_U64(cap, old);
    CHECK_EQ_U64(a[n - 1], (uint32_t)((n - 1) * 2654435761u));
    hbmi_big_free(a, cap, sizeof *a);
    hbmi_big_free(NULL, 0, 1);
}

int main(void) {
    RUN(test_status);
    RUN(test_error_record);
    RUN(test_size_parse);
    RUN(test_size_format);
    RUN(test_map);
    RUN(test_tagtab);
    RUN(test_tagtab_faults);
    RUN(test_output_files);
    RUN(test_big_arrays);
    return test_done();
}
