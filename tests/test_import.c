/* test_import.c - importers: RMM CSV, PyTorch snapshot pickle (protocols 2-4, written by
 * Python's pickle in fuzz/corpus) and JSON; their errors; the pickle reader's refusals. */
#include <unistd.h>

#include "trace/import/pyval.h"
#include "trace/trace_internal.h"
#include "test.h"

static hbm_trace *load_src(const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", HBM_SOURCE_DIR, rel);
    hbm_trace *t = NULL;
    if (hbm_trace_load(path, &t)) fprintf(stderr, "%s: %s\n", path, hbm_last_error());
    return t;
}

static void check_snapshot(hbm_trace *t) {
    CHECK(t);
    CHECK_STR(t->source, "torch");
    CHECK_STR(t->device, "cuda:0");
    CHECK_EQ_U64(t->count, 6);
    const hbm_trace_event *e = t->events;
    CHECK_EQ_U64(e[0].kind, HBM_EV_SEGMENT_ALLOC);
    CHECK_EQ_U64(e[0].size, 20971520);
    CHECK_EQ_U64(e[1].kind, HBM_EV_ALLOC);
    CHECK_EQ_U64(e[1].addr, 0x7f0000000000ULL);
    CHECK_EQ_U64(e[1].size, 4096);
    CHECK_EQ_U64(e[1].time_ns, 1000);
    const hbm_tag *tg = hbm_trace_tag(t, e[1].tag);
    CHECK(tg);
    CHECK_STR(tg->source_file, "train.py"); /* the first frame outside torch */
    CHECK_EQ_U64(tg->source_line, 42);
    CHECK_STR(tg->op_name, "step");
    CHECK_STR(tg->label, "forward");
    CHECK_EQ_U64(e[2].tag, 0);
    CHECK_EQ_U64(e[2].size, 1 << 20);
    CHECK_EQ_U64(e[3].kind, HBM_EV_FREE_REQUESTED);
    CHECK_EQ_U64(e[4].kind, HBM_EV_FREE);
    CHECK_EQ_U64(e[5].kind, HBM_EV_OOM);
    CHECK_EQ_U64(e[5].requested, 1ull << 40);
    hbm_timeline *tl;
    CHECK_OK(hbm_trace_to_timeline(t, &tl));
    CHECK_EQ_U64(tl->count, 2);
    CHECK_EQ_U64(tl->buffers[0].start, 1);
    CHECK_EQ_U64(tl->buffers[0].end, 4);
    hbm_timeline_free(tl);
}

static void test_torch_pickle(void) {
    const char *files[] = {"fuzz/corpus/fuzz_pickle/snapshot_p2.pickle", "fuzz/corpus/fuzz_pickle/snapshot_p3.pickle",
                           "fuzz/corpus/fuzz_pickle/snapshot_p4.pickle", "fuzz/corpus/fuzz_json/snapshot.json"};
    for (int i = 0; i < 4; i++) {
        hbm_trace *t = load_src(files[i]);
        check_snapshot(t);
        hbm_trace_free(t);
        if (test_failures_) return;
    }
}

static void test_torch_segments_only(void) {
    hbm_trace *t = load_src("fuzz/corpus/fuzz_pickle/segments_only.pickle");
    CHECK(t);
    CHECK_EQ_U64(t->count, 2);
    CHECK_EQ_U64(t->events[1].kind, HBM_EV_ALLOC);
    CHECK_EQ_U64(t->events[1].addr, 0x7f0000000000ULL + 4096);
    CHECK_EQ_U64(t->events[1].requested, 1000000);
    hbm_trace_free(t);
}

static void test_pickle_errors(void) {
    hbm_trace *t;
    /* a GLOBAL opcode (code execution in real pickle) is refused with its offset */
    static const unsigned char glob[] = {0x80, 2, 'c', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n', '.'};
    CHECK_STATUS(hbm_trace_parse_torch_pickle(glob, sizeof glob, "g.pickle", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "g.pickle: pickle byte offset 2: unsupported opcode 0x63 ('c')");
    static const unsigned char proto1[] = {0x80, 1, '}', '.'};
    CHECK_STATUS(hbm_trace_parse_torch_pickle(proto1, sizeof proto1, "p", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "protocol 1");
    static const unsigned char nostop[] = {0x80, 2, '}'};
    CHECK_STATUS(hbm_trace_parse_torch_pickle(nostop, sizeof nostop, "p", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "p: the file ends early (truncated at byte 3 of a pickle)");
    static const unsigned char cut[] = {0x80, 2, '}', 'X', 9, 0, 0, 0, 's', 'e', 'g'}; /* inside a string */
    CHECK_STATUS(hbm_trace_parse_torch_pickle(cut, sizeof cut, "c.pickle", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "c.pickle: the file ends early (truncated at byte 11 of a pickle)");
    static const unsigned char cutget[] = {0x80, 2, '}', 'j', 1}; /* a memo get without its index */
    CHECK_STATUS(hbm_trace_parse_torch_pickle(cutget, sizeof cutget, "c", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "the file ends early (truncated at byte 5 of a pickle)");
    /* a frames list whose first item reads back a frame dict stored after it in the same list
     * (no pickler writes that): refused as the memo get it is, not resolved to an item the
     * list does not have yet */
    static const unsigned char fwd[] = {128, 2, 125, 40, 88, 13, 0, 0, 0, 100, 101, 118, 105, 99, 101, 95, 116, 114, 97, 99, 101, 115, 93, 93, 40, 125, 40, 88, 6, 0, 0, 0, 97, 99, 116, 105, 111, 110, 113, 16, 88, 5, 0, 0, 0, 97, 108, 108, 111, 99, 113, 17, 88, 4, 0, 0, 0, 97, 100, 100, 114, 113, 18, 75, 1, 88, 4, 0, 0, 0, 115, 105, 122, 101, 113, 19, 75, 8, 88, 6, 0, 0, 0, 102, 114, 97, 109, 101, 115, 113, 20, 93, 117, 125, 40, 104, 16, 104, 17, 104, 18, 75, 2, 104, 19, 75, 8, 104, 20, 93, 113, 32, 40, 104, 33, 125, 113, 33, 40, 88, 8, 0, 0, 0, 102, 105, 108, 101, 110, 97, 109, 101, 88, 4, 0, 0, 0, 97, 46, 112, 121, 88, 4, 0, 0, 0, 108, 105, 110, 101, 75, 1, 88, 4, 0, 0, 0, 110, 97, 109, 101, 88, 1, 0, 0, 0, 102, 117, 101, 117, 101, 97, 117, 46};
    CHECK_STATUS(hbm_trace_parse_torch_pickle(fwd, sizeof fwd, "f.pickle", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "f.pickle: pickle byte offset 113: memo get of an index never stored");
    static const unsigned char notdict[] = {0x80, 2, ']', '.'};
    CHECK_STATUS(hbm_trace_parse_torch_pickle(notdict, sizeof notdict, "p", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "expected a dict");
    static const unsigned char badget[] = {0x80, 2, 'h', 5, '.'};
    CHECK_STATUS(hbm_trace_parse_torch_pickle(badget, sizeof badget, "p", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "memo get of an index never stored");
    /* a list appended to itself through the memo: a cycle, read without looping */
    static const unsigned char cyc[] = {0x80, 2, '}', 'q', 0, 'X', 13, 0, 0, 0, 'd', 'e', 'v', 'i', 'c', 'e', '_',
                                        't', 'r', 'a', 'c', 'e', 's', ']', 'q', 1, 'h', 1, 'a', 's', '.'};
    CHECK_OK(hbm_trace_parse_torch_pickle(cyc, sizeof cyc, "cyc", &t));
    CHECK_EQ_U64(t->count, 0);
    hbm_trace_free(t);
    /* negative and 9-byte LONG1 integers */
    static const unsigned char longs[] = {0x80, 2, '}', 'X', 1, 0, 0, 0, 'a', 0x8a, 2, 0xff, 0x7f,
                                          's', 'X', 1, 0, 0, 0, 'b', 0x8a, 1, 0xfe, 's', '.'};
    hbmi_pvpool pool = {0};
    hbmi_pv *root;
    CHECK_OK(hbmi_pickle_parse(longs, sizeof longs, "l", &pool, &root));
    CHECK_EQ_U64(hbmi_pv_int(root, "a", 0), 32767);
    CHECK(hbmi_pv_int(root, "b", 0) == -2);
    hbmi_pvpool_free(&pool);
    /* wider than 64 bits (2^70, 9 bytes): a float, which sizes refuse by name; 2^64 - 1 (9
     * bytes, the top one 0) wraps as addresses do */
    static const unsigned char wide[] = {0x80, 2, '}', 'X', 1, 0, 0, 0, 'a', 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0x40,
                                         's', 'X', 1, 0, 0, 0, 'b', 0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0, 's', '.'};
    CHECK_OK(hbmi_pickle_parse(wide, sizeof wide, "w", &pool, &root));
    CHECK(hbmi_pv_get(root, "a")->type == PV_FLOAT && hbmi_pv_get(root, "a")->f == 1180591620717411303424.0);
    CHECK(hbmi_pv_int(root, "b", 0) == -1);
    hbmi_pvpool_free(&pool);
}

/* A size no device holds (2^70, or sizes whose sum passes 2^63) is an error naming the
 * event; a history no allocator can have made is named by its first inconsistent event. */
static void test_impossible_sizes(void) {
    hbm_trace *t;
    const char *big = "{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 4096, \"size\": 512},"
                      " {\"action\": \"alloc\", \"addr\": 8192, \"size\": 1180591620717411303424}]]}";
    CHECK_STATUS(hbm_trace_parse_torch_json(big, strlen(big), "big.json", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "big.json: event 1: \"size\" is 1.18059e+21, outside 0 to 2^63");
    const char *sum = "{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 4096, \"size\": 512},"
                      " {\"action\": \"alloc\", \"addr\": 8192, \"size\": 9223372036854775807}]]}";
    CHECK_OK(hbm_trace_parse_torch_json(sum, strlen(sum), "sum.json", &t));
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    CHECK_STATUS(hbm_view_all(t, 0, NULL, f), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "sum.json: event 1: the bytes in use pass 2^63 - 1 with an allocation of "
                                     "9223372036854775807 bytes");
    fclose(f);
    free(out);
    hbm_trace_free(t);
    /* freed twice: the second free is named, and the figures are said not to be real */
    const char *twice = "{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 4096, \"size\": 512},"
                        " {\"action\": \"free_completed\", \"addr\": 4096, \"size\": 512},"
                        " {\"action\": \"free_completed\", \"addr\": 4096, \"size\": 512}]]}";
    CHECK_OK(hbm_trace_parse_torch_json(twice, strlen(twice), "twice.json", &t));
    f = open_memstream(&out, &n);
    CHECK_OK(hbm_view_all(t, 0, NULL, f));
    fclose(f);
    CHECK_CONTAINS(out, "warning: an impossible history");
    CHECK_CONTAINS(out, "real: event 2 frees 0x1000, which is not allocated");
    free(out);
    f = open_memstream(&out, &n);
    CHECK_OK(hbm_view_all(t, 1, NULL, f));
    fclose(f);
    CHECK_CONTAINS(out, "\"warning\": \"event 2 frees 0x1000, which is not allocated\"");
    free(out);
    hbm_trace_free(t);
    /* in use above reserved: a block outside every segment */
    const char *above = "{\"segments\": [{\"device\": 0, \"address\": 4096, \"total_size\": 2097152, \"blocks\": []}], "
                        "\"device_traces\": [[{\"action\": \"segment_alloc\", \"addr\": 4096, \"size\": 2097152},"
                        " {\"action\": \"alloc\", \"addr\": 4096, \"size\": 1048576},"
                        " {\"action\": \"alloc\", \"addr\": 9999872, \"size\": 4194304}]]}";
    CHECK_OK(hbm_trace_parse_torch_json(above, strlen(above), "above.json", &t));
    f = open_memstream(&out, &n);
    CHECK_OK(hbm_view_all(t, 0, NULL, f));
    fclose(f);
    CHECK_CONTAINS(out, "real: event 2 has 5.00MiB in use, above the 2.00MiB reserved");
    free(out);
    hbm_trace_free(t);
}

static void test_json_errors(void) {
    hbm_trace *t;
    const char *bad = "{\"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1,}]]}";
    CHECK_STATUS(hbm_trace_parse_torch_json(bad, strlen(bad), "s.json", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "s.json: JSON byte offset 50: expected a string key");
    char deep[301];
    memset(deep, '[', 300);
    deep[300] = 0;
    CHECK_STATUS(hbm_trace_parse_torch_json(deep, strlen(deep), "d", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "nesting deeper than 200");
    const char *nothing = "{\"x\": 1}";
    CHECK_STATUS(hbm_trace_parse_torch_json(nothing, strlen(nothing), "n", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "neither");
    hbmi_pvpool pool = {0};
    hbmi_pv *root;
    const char *esc = "{\"s\": \"a\\u00e9\\n\\\"b\", \"big\": 18446744073709551615, \"f\": -1.5e2}";
    CHECK_OK(hbmi_json_parse(esc, strlen(esc), "e", &pool, &root));
    CHECK_STR(hbmi_pv_str(root, "s"), "a\xc3\xa9\n\"b");
    CHECK(hbmi_pv_int(root, "big", 0) == -1); /* 2^64-1 wraps, as addresses do */
    CHECK(hbmi_pv_get(root, "f")->f == -150.0);
    hbmi_pvpool_free(&pool);
}

static void test_rmm(void) {
    const char *csv = "Thread,Time,Action,Pointer,Size,Stream\r\n"
                      "140573312345856,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\r\n"
                      "140573312345999,1634567890.234567,allocate,0x7f8a40000400,2048,0x7f8a38001020\r\n"
                      "140573312345856,1634567890.345678,deallocate,0x7f8a40000000,1024,0x7f8a38001020\r\n"
                      "140573312345856,1634567890.5,allocate failure,0x0,4096,0x0\r\n";
    hbm_trace *t;
    CHECK_OK(hbm_trace_load_mem(csv, strlen(csv), "m.csv", &t));
    CHECK_STR(t->source, "rmm");
    CHECK_EQ_U64(t->count, 4);
    CHECK_EQ_U64(t->events[0].time_ns, 0);
    CHECK_EQ_U64(t->events[1].time_ns, 111111000);
    CHECK_EQ_U64(t->events[0].thread, 1);
    CHECK_EQ_U64(t->events[1].thread, 2);
    CHECK_EQ_U64(t->events[2].thread, 1);
    CHECK_EQ_U64(t->events[1].stream, 0x7f8a38001020ULL);
    CHECK_EQ_U64(t->events[2].kind, HBM_EV_FREE);
    CHECK_EQ_U64(t->events[3].kind, HBM_EV_OOM);
    CHECK_EQ_U64(t->events[3].requested, 4096);
    hbm_trace_free(t);
    const char *clock = "Thread,Time,Action,Pointer,Size,Stream\n1,06:06:35:473591,allocate,0x10,5,0x0\n"
                        "1,06:06:36.5,free,0x10,5,0x0\n";
    CHECK_OK(hbm_trace_parse_rmm_csv(clock, strlen(clock), "c.csv", &t));
    CHECK_EQ_U64(t->events[1].time_ns, 1026409000);
    hbm_trace_free(t);
    struct { const char *text, *want; } bad[] = {
        {"Thread,Time\n", "x.csv:1: expected the header"},
        {"Thread,Time,Action,Pointer,Size,Stream\n1,2,allocate,0x1\n", "x.csv:2: expected 6 comma-separated fields, found 4"},
        {"Thread,Time,Action,Pointer,Size,Stream\n1,2,alloc,0x1,5,0x0\n", "x.csv:2: Action"},
        {"Thread,Time,Action,Pointer,Size,Stream\n1,2,allocate,zz,5,0x0\n", "x.csv:2: Pointer"},
        {"Thread,Time,Action,Pointer,Size,Stream\n1,2,allocate,0x1,-5,0x0\n", "x.csv:2: Size"},
        {"Thread,Time,Action,Pointer,Size,Stream\n\n1,1:2,allocate,0x1,5,0x0\n", "x.csv:3: Time"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(hbm_trace_parse_rmm_csv(bad[i].text, strlen(bad[i].text), "x.csv", &t), HBM_ERR_PARSE);
        CHECK_CONTAINS(hbm_last_error(), bad[i].want);
    }
    CHECK_STATUS(hbm_trace_load_mem("hello", 5, "h.txt", &t), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "h.txt: not a recognized trace");
}

static void test_fault_injection(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz/corpus/fuzz_pickle/snapshot_p4.pickle", HBM_SOURCE_DIR);
    char *data;
    size_t len;
    CHECK_OK(hbmi_read_file(path, &data, &len));
    for (uint64_t k = 1;; k++) {
        hbm_trace *t;
        hbm_debug_fail_host_alloc(k);
        hbm_status s = hbm_trace_parse_torch_pickle(data, len, "p", &t);
        hbm_debug_fail_host_alloc(0);
        if (s == HBM_OK) {
            hbm_trace_free(t);
            break;
        }
        CHECK_STATUS(s, HBM_ERR_NOMEM);
    }
    hbmi_free(data);
}

/* A snapshot's devices, the state before its history, bad sizes, and strings shared by the
 * JSON reader (the same figures whichever way a string is written). */
static void test_torch_devices_and_state(void) {
    const char *js =
        "{\"segments\": [{\"device\": 1, \"address\": 4096, \"total_size\": 2097152, \"stream\": 0, \"blocks\": ["
        "{\"address\": 4096, \"size\": 1024, \"requested_size\": 1000, \"state\": \"active_allocated\", \"frames\": []},"
        "{\"address\": 5120, \"size\": 2096128, \"state\": \"inactive\"}]}],"
        " \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 64, \"size\": 10, \"stream\": 0, \"frames\": []}],"
        " [{\"action\": \"free_completed\", \"addr\": 999, \"size\": 77, \"stream\": 0, \"frames\": []},"
        "  {\"action\": \"oom\", \"addr\": 0, \"size\": 5000, \"device_free\": 123, \"stream\": 0, \"frames\": []}]]}";
    hbm_trace **all;
    size_t n;
    CHECK_OK(hbm_trace_load_all_mem(js, strlen(js), "d.json", &all, &n));
    CHECK_EQ_U64(n, 2);
    if (n != 2) return;
    hbm_trace *t = all[0]; /* the device with the OOM first */
    CHECK_STR(t->device, "cuda:1");
    CHECK_EQ_U64(t->has_time, 0);
    /* before the history: the block active at the end and the one the history frees, and the segment */
    CHECK_EQ_U64(t->history_start, 3);
    CHECK_EQ_U64(t->live_before_blocks, 2);
    CHECK_EQ_U64(t->live_before_bytes, 1000 + 77);
    CHECK_EQ_U64(t->reserved_before_bytes, 2097152);
    CHECK_EQ_U64(t->events[0].kind, HBM_EV_SEGMENT_ALLOC);
    const hbm_trace_event *oom = &t->events[t->count - 1];
    CHECK_EQ_U64(oom->kind, HBM_EV_OOM);
    CHECK_EQ_U64(oom->requested, 5000);
    CHECK_EQ_U64(oom->size, 123); /* the device's free bytes */
    CHECK_STR(all[1]->device, "cuda:0");
    CHECK_EQ_U64(all[1]->history_start, 0);
    hbm_trace_free_all(all, n);
    /* a negative size is an error naming the event */
    const char *neg = "{\"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"size\": 5},"
                      " {\"action\": \"alloc\", \"addr\": 2, \"size\": -5}]]}";
    hbm_trace *x;
    CHECK_STATUS(hbm_trace_parse_torch_json(neg, strlen(neg), "n.json", &x), HBM_ERR_PARSE);
    CHECK_CONTAINS(hbm_last_error(), "n.json: event 1: \"size\" is -5");
    /* an unknown device index names those there are */
    CHECK_STATUS(hbm_trace_load_device(HBM_SOURCE_DIR "/fuzz/corpus/fuzz_json/snapshot.json", 3, &x), HBM_ERR_INVALID);
    CHECK_CONTAINS(hbm_last_error(), "no device 3 in this file (it holds device 0)");
}

/* Streaming the history: one list object shared by two devices (pickle memo), an entry
 * dict read back from the memo, and equal stacks kept once. */
static void test_torch_streaming(void) {
    /* {"segments": [], "device_traces": [L, L]} with L = [alloc 64, free 64], memo as Python writes it */
    static const char shared[] =
        "\x80\x02}(X\x08\x00\x00\x00segments]X\x0d\x00\x00\x00" "device_traces](]q\x00(}(X\x06\x00\x00\x00" "actionq\x01X\x05\x00\x00\x00" "allocX\x04\x00\x00\x00" "addrq\x02K@X\x04\x00\x00\x00sizeq\x03Kdu}(h\x01X\x0e\x00\x00\x00" "free_completedh\x02K@h\x03Kdueh\x00" "eu.";
    hbm_trace **all;
    size_t n;
    CHECK_OK(hbm_trace_load_all_mem(shared, sizeof shared - 1, "shared.pickle", &all, &n));
    CHECK_EQ_U64(n, 2);
    for (size_t i = 0; i < n && !test_failures_; i++) {
        CHECK_EQ_U64(all[i]->count, 2);
        CHECK_EQ_U64(all[i]->events[0].kind, HBM_EV_ALLOC);
        CHECK_EQ_U64(all[i]->events[0].size, 100);
        CHECK_EQ_U64(all[i]->events[1].kind, HBM_EV_FREE);
    }
    hbm_trace_free_all(all, n);
    /* [[D, D]]: the entry dict D stored in the memo and appended again */
    static const char again[] =
        "\x80\x02}X\x0d\x00\x00\x00" "device_traces]](}q\x00(X\x06\x00\x00\x00" "actionX\x05\x00\x00\x00" "allocX\x04\x00\x00\x00" "addrK@X\x04\x00\x00\x00sizeKduh\x00" "eas.";
    hbm_trace *t;
    CHECK_OK(hbm_trace_load_mem(again, sizeof again - 1, "again.pickle", &t));
    CHECK_EQ_U64(t->count, 2);
    CHECK_EQ_U64(t->events[1].addr, 64);
    CHECK_EQ_U64(t->events[1].size, 100);
    hbm_trace_free(t);
    /* the same bytes of memo references ("( j0 e") after index 0 was stored again: the new frame */
    static const char again_frames[] =
        "\x80\x02}(X\x0d\x00\x00\x00" "device_traces]](}(X\x06\x00\x00\x00" "actionX\x05\x00\x00\x00" "allocX\x04\x00\x00\x00" "addrK\x01X\x04\x00\x00\x00sizeK\x08X\x06\x00\x00\x00" "frames](}(X\x08\x00\x00\x00" "filenameX\x04\x00\x00\x00" "a.pyX\x04\x00\x00\x00lineK\x01X\x04\x00\x00\x00nameX\x01\x00\x00\x00" "fur\x00\x00\x00\x00" "eu}(X\x06\x00\x00\x00" "actionX\x05\x00\x00\x00" "allocX\x04\x00\x00\x00" "addrK\x02X\x04\x00\x00\x00sizeK\x08X\x06\x00\x00\x00" "frames](j\x00\x00\x00\x00" "eu}(X\x06\x00\x00\x00" "actionX\x05\x00\x00\x00" "allocX\x04\x00\x00\x00" "addrK\x03X\x04\x00\x00\x00sizeK\x08X\x06\x00\x00\x00" "frames](}(X\x08\x00\x00\x00" "filenameX\x04\x00\x00\x00" "b.pyX\x04\x00\x00\x00lineK\x02X\x04\x00\x00\x00nameX\x01\x00\x00\x00" "fur\x00\x00\x00\x00" "eu}(X\x06\x00\x00\x00" "actionX\x05\x00\x00\x00" "allocX\x04\x00\x00\x00" "addrK\x04X\x04\x00\x00\x00sizeK\x08X\x06\x00\x00\x00" "frames](j\x00\x00\x00\x00" "eueau.";
    CHECK_OK(hbm_trace_load_mem(again_frames, sizeof again_frames - 1, "memo.pickle", &t));
    CHECK_EQ_U64(t->count, 4);
    static const char *want[] = {"a.py", "a.py", "b.py", "b.py"};
    for (size_t i = 0; i < 4 && i < t->count; i++) {
        const hbm_tag *fr = hbm_trace_tag(t, t->events[i].tag);
        CHECK(fr && fr->source_file && !strcmp(fr->source_file, want[i]));
    }
    hbm_trace_free(t);
    /* JSON: equal frames lists (not shared objects in JSON) make one stack; another differs */
    const char *js = "{\"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, \"size\": 8, \"frames\": "
                     "[{\"filename\": \"a.py\", \"line\": 3, \"name\": \"f\"}]},"
                     "{\"action\": \"alloc\", \"addr\": 2, \"size\": 8, \"frames\": "
                     "[{\"filename\": \"a.py\", \"line\": 3, \"name\": \"f\"}]},"
                     "{\"action\": \"alloc\", \"addr\": 3, \"size\": 8, \"frames\": "
                     "[{\"filename\": \"a.py\", \"line\": 4, \"name\": \"f\"}]}]]}";
    CHECK_OK(hbm_trace_load_mem(js, strlen(js), "s.json", &t));
    CHECK_EQ_U64(t->count, 3);
    CHECK(t->events[0].backtrace && t->events[0].backtrace == t->events[1].backtrace);
    CHECK(t->events[2].backtrace && t->events[2].backtrace != t->events[0].backtrace);
    const hbm_tag *tg = hbm_trace_tag(t, t->events[2].tag);
    CHECK(tg && tg->source_line == 4);
    hbm_trace_free(t);
}

/* Differential: random histories written as PyTorch pickles them (keys and frames read
 * back from the memo: the fast paths), with every key and frame written out (the usual
 * path), and as Python pickles a snapshot whose frames are distinct objects (keys and
 * strings read back, each frames list and frame dict new with a memo store never read
 * back; with protocol 4's MEMOIZE, FRAME opcodes inside the lists; and with a frame met
 * twice in one stack, its second place a memo read of the first, as Python writes one
 * object met twice), load to the same events. */
typedef struct pw {
    hbmi_buf b;
    uint32_t memo, key_at[16], frame_at[8], str_at[9];
    int shared; /* memoized form */
    int anew;   /* 1: frames new, strings memoized (LONG_BINPUT); 2: the same with MEMOIZE and FRAMEs;
                   3: 2 with frames met twice in a stack */
    int twice;  /* a frame met twice in some stacks (anew 3; written out again when not anew) */
} pw;

static void pw_put(pw *w) {
    if (w->anew == 2) {
        hbmi_buf_byte(&w->b, 0x94);
        w->memo++;
        return;
    }
    unsigned char op[5] = {'r'};
    hbmi_put32(op + 1, w->memo++);
    hbmi_buf_put(&w->b, op, 5);
}

static void pw_get(pw *w, uint32_t at);

static void pw_str(pw *w, int s, const char *text) { /* a str read back once written (anew) */
    if (w->anew && w->str_at[s]) return pw_get(w, w->str_at[s] - 1);
    hbmi_pk_str(&w->b, text);
    if (w->anew) w->str_at[s] = w->memo + 1, pw_put(w);
}

static void pw_get(pw *w, uint32_t at) {
    unsigned char op[5] = {'j'};
    hbmi_put32(op + 1, at);
    hbmi_buf_put(&w->b, op, 5);
}

static void pw_key(pw *w, int k, const char *name) {
    if ((w->shared || w->anew) && w->key_at[k]) return pw_get(w, w->key_at[k] - 1);
    hbmi_pk_str(&w->b, name);
    if (w->shared || w->anew) w->key_at[k] = w->memo + 1, pw_put(w);
}

/* A frame; its memo index when it has one in the anew forms. */
static uint32_t pw_frame(pw *w, int f) {
    uint32_t at = w->memo;
    if (w->shared && w->frame_at[f]) return pw_get(w, w->frame_at[f] - 1), 0;
    char file[32];
    snprintf(file, sizeof file, "/u/m%d.py", f);
    if (w->anew >= 2 && f % 3 == 1) hbmi_buf_put(&w->b, "\x95\x00\x00\x01\x00\x00\x00\x00\x00", 9); /* FRAME */
    hbmi_buf_byte(&w->b, '}');
    if (w->shared) w->frame_at[f] = w->memo + 1, pw_put(w);
    if (w->anew) pw_put(w); /* stored, never read back */
    hbmi_buf_byte(&w->b, '(');
    pw_key(w, 10, "filename");
    pw_str(w, f, file);
    pw_key(w, 11, "line");
    hbmi_pk_int(&w->b, 10 + f);
    pw_key(w, 12, "name");
    pw_str(w, 8, "f");
    hbmi_buf_byte(&w->b, 'u');
    return at;
}

static void pw_history(pw *w, uint64_t seed) {
    static const char *acts[] = {"alloc", "free_completed", "segment_alloc", "oom", "snapshot"};
    hbmi_buf_put(&w->b, w->anew >= 2 ? "\x80\x04}(" : "\x80\x02}(", 4);
    hbmi_pk_str(&w->b, "device_traces");
    hbmi_buf_put(&w->b, "]]((", 3);
    for (int i = 0; i < 300; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t r = seed >> 11;
        hbmi_buf_byte(&w->b, '}');
        if (w->shared || w->anew) pw_put(w);
        hbmi_buf_byte(&w->b, '(');
        int a = (int)(r % 5);
        pw_key(w, 0, "action");
        pw_key(w, 5 + a, acts[a]);
        pw_key(w, 1, "addr");
        hbmi_pk_uint(&w->b, r & 4 ? (r >> 7) % 1000 * 512 : (r >> 7) * 4096); /* small and wide ints */
        pw_key(w, 2, "size");
        hbmi_pk_uint(&w->b, (r >> 20) % 70000);
        if (r & 8) pw_key(w, 3, "stream"), hbmi_pk_int(&w->b, r & 16 ? 0 : 7);
        if (r & 32) pw_key(w, 4, "time_us"), hbmi_pk_uint(&w->b, (uint64_t)i * 1000 + (r & 511));
        if (a == 3) pw_key(w, 13, "device_free"), hbmi_pk_uint(&w->b, r >> 30);
        if (r & 64) pw_key(w, 14, "compile_context"), hbmi_buf_byte(&w->b, 'N'); /* a key not read: skipped */
        pw_key(w, 15, "frames");
        hbmi_buf_byte(&w->b, ']');
        if (w->shared || w->anew) pw_put(w);
        int nf = (int)((r >> 40) % 4); /* 0-3 frames of 8: stacks repeat */
        if (nf) {
            uint32_t at[4] = {0};
            hbmi_buf_byte(&w->b, '(');
            for (int f = 0; f < nf; f++) at[f] = pw_frame(w, (int)((r >> (44 + 3 * f)) % 8));
            int again = w->twice ? (int)((r >> 36) % 3) : 0; /* 1, 2: frame 0 or nf - 1 again */
            if (again && w->anew) pw_get(w, at[again == 1 ? 0 : nf - 1]); /* the same object: read back */
            else if (again) pw_frame(w, (int)((r >> (44 + 3 * (again == 1 ? 0 : nf - 1))) % 8));
            hbmi_buf_byte(&w->b, 'e');
        }
        hbmi_buf_byte(&w->b, 'u');
        if (i % 100 == 99) hbmi_buf_put(&w->b, "e(", 2);
    }
    hbmi_buf_put(&w->b, "eau.", 4);
}

static void test_torch_fast_paths(void) {
    for (uint64_t seed = 1; seed <= 60 && !test_failures_; seed++) {
        pw a = {.shared = seed <= 20, .anew = seed > 50 ? 3 : seed > 40 ? 2 : seed > 20, .twice = seed > 50},
           b = {.shared = 0, .twice = seed > 50};
        pw_history(&a, seed);
        pw_history(&b, seed);
        CHECK(a.b.n && b.b.n);
        hbm_trace *ta = NULL, *tb = NULL;
        CHECK_OK(hbm_trace_load_mem(a.b.p, a.b.n, "memo.pickle", &ta));
        CHECK_OK(hbm_trace_load_mem(b.b.p, b.b.n, "plain.pickle", &tb));
        if (ta && tb) {
            CHECK_EQ_U64(ta->count, tb->count);
            size_t bad = 0;
            for (size_t i = 0; i < ta->count && i < tb->count; i++) {
                const hbm_trace_event *x = &ta->events[i], *y = &tb->events[i];
                const hbm_tag *gx = hbm_trace_tag(ta, x->tag), *gy = hbm_trace_tag(tb, y->tag);
                size_t nx = 0, ny = 0;
                const uint64_t *fx = hbm_trace_backtrace(ta, x->backtrace, &nx);
                const uint64_t *fy = hbm_trace_backtrace(tb, y->backtrace, &ny);
                bad += x->kind != y->kind || x->addr != y->addr || x->size != y->size || x->requested != y->requested ||
                       x->stream != y->stream || x->time_ns != y->time_ns || nx != ny || !gx != !gy ||
                       (gx && gx->source_line != gy->source_line);
                for (size_t j = 0; j < nx && j < ny; j++) { /* each frame: file and line */
                    const hbm_tag *a1 = hbm_trace_tag(ta, (uint32_t)fx[j]), *b1 = hbm_trace_tag(tb, (uint32_t)fy[j]);
                    bad += !a1 != !b1 || (a1 && (a1->source_line != b1->source_line ||
                                                 strcmp(a1->source_file ? a1->source_file : "",
                                                        b1->source_file ? b1->source_file : "")));
                }
            }
            CHECK_EQ_U64(bad, 0);
            CHECK(ta->count > 100);
        }
        hbm_trace_free(ta);
        hbm_trace_free(tb);
        hbmi_buf_free(&a.b);
        hbmi_buf_free(&b.b);
    }
}

/* A snapshot's trace written as an hbm trace and read back keeps what the snapshot said:
 * no times, its rebuilt state, its device number. */
static void test_torch_to_hbm_trace(void) {
    const char *js = "{\"segments\": [{\"device\": 1, \"address\": 4096, \"total_size\": 2097152, \"stream\": 0,"
                     " \"blocks\": [{\"address\": 4096, \"size\": 1024, \"requested_size\": 1000,"
                     " \"state\": \"active_allocated\"}]}],"
                     " \"device_traces\": [[], [{\"action\": \"alloc\", \"addr\": 8192, \"size\": 512},"
                     " {\"action\": \"free_completed\", \"addr\": 8192, \"size\": 512}]]}";
    hbm_trace *t = NULL, *u = NULL;
    CHECK_OK(hbm_trace_load_mem(js, strlen(js), "s.json", &t));
    if (!t) return;
    CHECK_EQ_U64(t->has_time, 0);
    CHECK(t->history_start > 0);
    char path[64];
    snprintf(path, sizeof path, "/tmp/hbm_test_import_%d.hbmt", (int)getpid());
    CHECK_OK(hbm_trace_write(t, path));
    CHECK_OK(hbm_trace_read(path, &u));
    if (u) {
        CHECK_EQ_U64(u->count, t->count);
        CHECK_EQ_U64(u->has_time, 0);
        CHECK_EQ_U64(u->device_index, 1);
        CHECK_EQ_U64(u->history_start, t->history_start);
        CHECK_EQ_U64(u->live_before_bytes, 1000);
        CHECK_EQ_U64(u->live_before_blocks, 1);
        CHECK_EQ_U64(u->reserved_before_bytes, t->reserved_before_bytes);
    }
    unlink(path);
    hbm_trace_free(u);
    hbm_trace_free(t);
}

int main(void) {
    RUN(test_torch_pickle);
    RUN(test_torch_devices_and_state);
    RUN(test_torch_streaming);
    RUN(test_torch_fast_paths);
    RUN(test_torch_to_hbm_trace);
    RUN(test_torch_segments_only);
    RUN(test_pickle_errors);
    RUN(test_impossible_sizes);
    RUN(test_json_errors);
    RUN(test_rmm);
    RUN(test_fault_injection);
    return test_done();
}
