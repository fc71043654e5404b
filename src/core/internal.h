/* src/core/internal.h - what every part of libhbm shares and no user sees.
 * Internal names start with hbmi_. */
#ifndef HBM_CORE_INTERNAL_H
#define HBM_CORE_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/status.h"
#include "hbm/tag.h"

#if defined(__GNUC__)
#define HBMI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define HBMI_LIKELY(x) __builtin_expect(!!(x), 1)
#define HBMI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HBMI_PRINTF(f, a)
#define HBMI_LIKELY(x) (x)
#define HBMI_UNLIKELY(x) (x)
#endif

/* --- errors ------------------------------------------------------------------------- */
/* Set the thread's last-error message and return s, so: return hbmi_error(S, "...", ...). */
hbm_status hbmi_error(hbm_status s, const char *fmt, ...) HBMI_PRINTF(2, 3);
/* Inside: every function that can fail returns hbm_status, raising its error with
 * hbmi_error or hbmi_error_at where it happens; a caller passes a failure on with TRY. */
#define TRY(expr)                       \
    do {                                \
        hbm_status try_s_ = (expr);     \
        if (try_s_) return try_s_;      \
    } while (0)
/* The same, for an error found at a place of an input: the message starts
 * "FILE:LINE:COLUMN: " (column 0: "FILE:LINE: "), and the thread's error record keeps
 * file, line and column beside it (hbm_last_error_location). line counts from 1. */
hbm_status hbmi_error_at(hbm_status s, const char *file, size_t line, size_t column, const char *fmt, ...)
    HBMI_PRINTF(5, 6);
/* The thread's last error as one record: its status, where in an input it was found (file,
 * line, column; line 0: nowhere in particular) and its message (src/core/status.c). */
#define HBMI_ERRBUF 1024
typedef struct hbmi_error_record {
    hbm_status status;
    unsigned line, column;
    char file[HBMI_ERRBUF];
    char message[HBMI_ERRBUF];
} hbmi_error_record;
/* A caller that must leave the last error as it was across a call that may set it once (a
 * quiet allocator's device) takes a mark before and undoes after: the record the call
 * replaced comes back. Costs nothing when no error is set (a counter is read); each error set
 * keeps the record it replaces. An undo after more than one change since the mark does
 * nothing. */
uint64_t hbmi_error_mark(void);
void hbmi_error_undo(uint64_t mark);
/* Prefix the current last-error message with context ("config: " + old). Returns s. */
hbm_status hbmi_error_prefix(hbm_status s, const char *fmt, ...) HBMI_PRINTF(2, 3);

/* --- host memory, with SQLite-style fault injection ------------------------------------ */
/* All metadata allocations of libhbm go through these. When a test arms the fault
 * injector (hbm_debug_fail_host_alloc), the Nth call from now fails. */
void *hbmi_malloc(size_t n);
void *hbmi_calloc(size_t count, size_t size);
void *hbmi_realloc(void *p, size_t n);
void hbmi_free(void *p);
char *hbmi_strdup(const char *s);
/* Grow *arr (element size elem) to hold at least need elements; doubles. */
hbm_status hbmi_grow(void **arr, size_t *cap, size_t need, size_t elem);
/* The same, the first capacity given (arrays that stay small in their thousands: a plan's
 * allocations start at 4). */
hbm_status hbmi_grow_from(void **arr, size_t *cap, size_t need, size_t elem, size_t first);

/* Test hook (also exported for tests, not in public headers): make the nth host allocation
 * from now fail (1 = the next one); 0 disarms. Returns how many host allocations were made
 * since the last arm call. */
uint64_t hbm_debug_fail_host_alloc(uint64_t nth);

/* --- the u64 -> u64 hash map (core/map.h) -------------------------------------------- */
#include "core/map.h"

/* A 64-bit mixer (murmur3's finalizer), for hashing strings and frames into keys. */
static inline uint64_t hbmi_hash64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* --- a pool of records: one growing array, given-back slots reused first ---------------- */
/* The array stays the owner's (typed: p->b[i]); the pool counts its slots and chains the
 * given-back ones through a uint32_t field of the record at offset link (index + 1, 0 =
 * end), which the owner may use for other things while the record is in use. */
typedef struct hbmi_pool {
    size_t n;           /* slots [0, n) have been handed out at least once */
    size_t cap;         /* slots allocated */
    size_t used;        /* handed out and not given back */
    uint32_t free_head; /* index + 1 of a given-back slot, 0 = none */
} hbmi_pool;

/* Room for `extra` more takes, so that none of them can fail. */
hbm_status hbmi_pool_reserve(hbmi_pool *p, void **v, size_t size, size_t extra);
/* Free the array and forget every slot. */
void hbmi_pool_destroy(hbmi_pool *p, void **v);
/* The pool's invariants (in the manner of tlsf_check): n <= cap, the given-back list within
 * [0, n), without a cycle, as long as n - used, and (is_free given) exactly the records that
 * is_free says are unused. HBM_ERR_CORRUPT naming `who` and the slot when one fails. */
hbm_status hbmi_pool_check(const hbmi_pool *p, const void *v, size_t size, size_t link, int (*is_free)(const void *rec),
                           const char *who);

/* The link is read and written as the uint32_t it is declared (not by memcpy, whose bytes
 * may alias anything: the owner's other fields would be reloaded and stored around every
 * take and give; bfc_free ran 3% more instructions so). */
static inline uint32_t *hbmi_pool_linkp_(const void *v, size_t size, size_t link, uint32_t i) {
    return (uint32_t *)((char *)(uintptr_t)v + (size_t)i * size + link);
}
static inline uint32_t hbmi_pool_link_(const void *v, size_t size, size_t link, uint32_t i) {
    return *hbmi_pool_linkp_(v, size, link, i);
}
/* A slot (reserved first): a given-back one if any, else the next new one. Its contents
 * are what they were: the caller sets every field. */
static inline uint32_t hbmi_pool_take(hbmi_pool *p, void *v, size_t size, size_t link) {
    uint32_t i;
    if (p->free_head) {
        i = p->free_head - 1;
        p->free_head = hbmi_pool_link_(v, size, link, i);
    } else {
        i = (uint32_t)p->n++;
    }
    p->used++;
    return i;
}
/* Give slot i back (the caller marks the record unused). */
static inline void hbmi_pool_give(hbmi_pool *p, void *v, size_t size, size_t link, uint32_t i) {
    *hbmi_pool_linkp_(v, size, link, i) = p->free_head;
    p->free_head = i + 1;
    p->used--;
}

/* --- tag table: interned hbm_tag copies, ids 1..n ------------------------------------- */
typedef struct hbmi_tagtab hbmi_tagtab;
hbm_status hbmi_tagtab_new(hbmi_tagtab **out);
void hbmi_tagtab_free(hbmi_tagtab *t);
/* NULL tag -> 0. Equal tags get equal ids. */
hbm_status hbmi_tagtab_intern(hbmi_tagtab *t, const hbm_tag *tag, uint32_t *id_out);
const hbm_tag *hbmi_tagtab_get(const hbmi_tagtab *t, uint32_t id);
uint32_t hbmi_tagtab_count(const hbmi_tagtab *t);

/* --- misc ---------------------------------------------------------------------------- */
static inline uint64_t hbmi_align_up(uint64_t x, uint64_t a) {
    if (a <= 1) return x; /* (no division on the common paths) */
    if (!(a & (a - 1))) return (x + a - 1) & ~(a - 1);
    return (x + a - 1) / a * a;
}
/* qsort for arrays that may be empty: qsort(NULL, 0, ...) is undefined behaviour in C. */
static inline void hbmi_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    if (n > 1) qsort(base, n, size, cmp);
}
/* fn(ctx, i) for i in [0, n) on jobs threads (0: the cores online, at most n), the caller
 * one of them; each thread takes the next i until none is left. Returns the threads used. */
int hbmi_parallel_for(size_t n, int jobs, void (*fn)(void *ctx, size_t i), void *ctx);
int hbmi_cores(void); /* the cores online (1 to 1024) */
/* Read a whole file into memory (NUL-terminated for text parsers; free with hbmi_free). */
hbm_status hbmi_read_file(const char *path, char **data, size_t *len);
/* Read path whole (as hbmi_read_file) and parse its bytes: parse(data, len, path, out), the
 * bytes freed after; the read's or the parser's status. */
typedef hbm_status (*hbmi_parse_fn)(const char *data, size_t len, const char *name, void *out);
hbm_status hbmi_parse_file(const char *path, hbmi_parse_fn parse, void *out);
/* A protobuf (LEB128) varint at p[*i], p holding n bytes: 1 with *v and *i past it; 0 when
 * the data ends inside it; -1 when it does not fit 64 bits (an eleventh byte, or a tenth
 * above 1). Protobuf, hbm's trace format and the file sniffing read their varints here. */
static inline int hbmi_varint_get(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
    uint64_t r = 0;
    for (unsigned s = 0;; s += 7) {
        if (*i >= n) return 0;
        uint8_t c = p[(*i)++];
        if (s == 63 && c > 1) return -1;
        r |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) break;
    }
    *v = r;
    return 1;
}
/* v as a varint at p (at most ten bytes); returns the byte after it. */
static inline unsigned char *hbmi_varint_put(unsigned char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}
/* A whole input read once from start to end: a regular file of HBMI_INPUT_MAP_MIN bytes or more
 * is mapped (not NUL-terminated), others read as hbmi_read_file does. A reader at byte
 * upto calls hbmi_input_progress(m, upto) whenever upto >= m->next: the pages before it go
 * and the next ones are mapped ahead, so its memory holds what it built, not the file. */
typedef struct hbmi_input {
    char *data;
    size_t len, dropped, ready, next;
    int mapped;
} hbmi_input;
#define HBMI_INPUT_MAP_MIN ((size_t)1 << 20)
#define HBMI_INPUT_WINDOW ((size_t)8 << 20)
hbm_status hbmi_input_open(const char *path, hbmi_input *m);
/* The first max bytes of a file (fewer when it is shorter), NUL-terminated; as it is (a
 * gzip file is not inflated). */
hbm_status hbmi_read_head(const char *path, size_t max, unsigned char **data, size_t *len);
/* Inflate a gzip stream (concatenated members too) into *out (NUL-terminated, hbmi_free);
 * max > 0: stop after max bytes (a head: a truncated stream gives what it holds). Errors
 * name name: damaged or truncated data, or a build without zlib (HBM_ERR_UNSUPPORTED). */
hbm_status hbmi_gunzip(const void *data, size_t len, size_t max, const char *name, unsigned char **out,
                       size_t *out_len);
/* A gzip stream's first bytes. */
static inline int hbmi_is_gzip(const void *data, size_t len) {
    return len >= 2 && ((const unsigned char *)data)[0] == 0x1f && ((const unsigned char *)data)[1] == 0x8b;
}
void hbmi_input_progress(hbmi_input *m, size_t upto);
void hbmi_input_close(hbmi_input *m);
/* Arrays of many megabytes (a snapshot's events, its timeline): as hbmi_grow, in mappings
 * of their own (huge pages, no copy when they grow) above a few megabytes. An array grown
 * with hbmi_big_grow is freed with hbmi_big_free and its capacity, and only so. */
hbm_status hbmi_big_grow(void **arr, size_t *cap, size_t need, size_t elem);
void hbmi_big_free(void *arr, size_t cap, size_t elem);
/* A zone of n bytes aligned to a cache line for hot random-access metadata (an allocator's
 * records and index): on the heap below a few megabytes, above in a mapping of its own
 * with transparent huge pages, so that its TLB reach does not depend on where the heap
 * put it. Freed with hbmi_zone_free and the same n. NULL when out of memory. */
void *hbmi_zone_alloc(size_t n);
void hbmi_zone_free(void *p, size_t n);
/* Case-insensitive equality of ASCII strings. */
int hbmi_streq_ci(const char *a, const char *b);
/* Monotonic clock in nanoseconds. */
uint64_t hbmi_now_ns(void);
/* A size as PyTorch's OOM message prints it (its format_size): "512 bytes", "1.50 KiB",
 * "20.00 MiB", "4.94 GiB". Returns buf. */
char *hbmi_size_torch(uint64_t bytes, char buf[32]);

/* s for a terminal column of width columns: control characters made visible ("\x1b"),
 * cut with "..." at the end, or in the middle when middle (a path keeps its file name and
 * line). Returns out. */
const char *hbmi_text_fit(char *out, size_t cap, const char *s, int width, int middle);
/* A buffer in a table, as hbm plan's explanation and hbm fit list them: at indent, its size
 * in 10 columns, its share of the peak (pct >= 0) as " 12.5%", its category in 9 columns,
 * then what (cut by the caller). hbmi_buffer_where writes the lines under it, "at FILE:LINE"
 * and "op NAME" (NULL: no such line) at indent, each cut in the middle to width columns. */
void hbmi_buffer_row(FILE *f, int indent, const char *size, double pct, const char *category, const char *what);
/* XLA_PYTHON_CLIENT_MEM_FRACTION advice for need bytes on a device of total bytes, checked
 * under XLA's rule (src/device/models.c): as one setting string (1: a fraction fits, 0: none
 * does and the string says by how much), or as lines of plan's verdict. */
int hbmi_fraction_setting(char *buf, size_t n, uint64_t need, uint64_t total);
void hbmi_fraction_advice(FILE *f, uint64_t need, uint64_t total, const char *indent);
/* hbm_xla_gpu_limit less the 0.43 % JAX 0.11 gave under it on the H200 measured (docs/gpu.md):
 * the figure an advised fraction must hold the need under. */
uint64_t hbmi_xla_gpu_limit_seen(uint64_t total, double fraction);
void hbmi_buffer_where(FILE *f, int indent, int width, const char *file, int line, const char *op);
/* Write text taken from a file to f, whole, its control characters made visible ("\x1b"):
 * printed, an op_name cannot retitle or clear the terminal. */
void hbmi_fputs_visible(const char *s, FILE *f);

/* The library's one JSON string writer (json.c): s (NULL: "") quoted, '"' and '\\'
 * escaped, control characters as \u00XX. HBMI_JSON_NL writes a newline as \n;
 * HBMI_JSON_SCRIPT also escapes '<', '>' and '&' (a string safe inside an HTML <script>);
 * HBMI_JSON_ETAG writes "</" as "<\/" and DEL as \u007f (safe there too, readable). */
enum { HBMI_JSON_NL = 1, HBMI_JSON_SCRIPT = 2, HBMI_JSON_ETAG = 4 };
void hbmi_json_write_str(FILE *f, const char *s, unsigned how);
/* The same for the n bytes at s. */
void hbmi_json_write_strn(FILE *f, const char *s, size_t n, unsigned how);
/* A JSON string as the trace, report and replay outputs write it (newlines as \n). */
static inline void hbmi_json_str(FILE *f, const char *s) { hbmi_json_write_str(f, s, HBMI_JSON_NL); }

/* What fn(ctx, f) writes, into buf (snprintf rules: at most cap - 1 bytes and a NUL; *len the
 * whole length) through a memory stream: the library's outputs as strings, for bindings. */
typedef hbm_status (*hbmi_emit_fn)(const void *ctx, FILE *f);
hbm_status hbmi_format_mem(hbmi_emit_fn fn, const void *ctx, char *buf, size_t cap, size_t *len);
/* The sink behind it and hbmi_emit_fitted, for a writer called straight: hbmi_mem_open
 * gives m.f, a FILE over a growable buffer (marks: whole lines marked, for
 * hbmi_mem_fitted); the writer writes to it once; hbmi_mem_string, hbmi_mem_buffer or
 * hbmi_mem_fitted closes it with the writer's status s, giving the text whole (a string of
 * its own size: *out NUL-terminated, *len bytes without the NUL, freed with
 * hbm_string_free), into a caller's buffer (snprintf rules: *len the whole length), or to f
 * with its lines fitted to width. Each frees what the writer wrote when s is not HBM_OK,
 * and returns s. */
typedef struct hbmi_mem {
    FILE *f;
    char *data;
    size_t n;
    int fitting; /* the width marks' state before the buffer opened */
} hbmi_mem;
hbm_status hbmi_mem_open(hbmi_mem *m, int marks);
/* hbmi_mem_open(m, 0) for a *_format call's buffer (len, and buf when cap > 0, given)
 * or a *_string call's string (out and len given; *out NULL and *len 0 until it closes):
 * HBM_ERR_INVALID naming the NULL argument otherwise. */
hbm_status hbmi_mem_open_buffer(hbmi_mem *m, char *buf, size_t cap, size_t *len);
hbm_status hbmi_mem_open_string(hbmi_mem *m, char **out, size_t *len);
hbm_status hbmi_mem_string(hbmi_mem *m, hbm_status s, char **out, size_t *len);
hbm_status hbmi_mem_buffer(hbmi_mem *m, hbm_status s, char *buf, size_t cap, size_t *len);
hbm_status hbmi_mem_fitted(hbmi_mem *m, hbm_status s, FILE *f, size_t width);
/* Text for a terminal: text's lines longer than width columns (tabs to the next multiple
 * of 8; 0 = no limit) cut in the middle with "...", so both ends survive (file:line at the
 * end of a line, its subject at the start). hbm's text is ASCII: the ellipsis is too,
 * whatever the locale. hbmi_emit_fitted writes what fn(ctx, .) writes to f so, all of it
 * once fn has returned HBM_OK (nothing otherwise); fn's status, or HBM_ERR_NOMEM. */
void hbmi_write_fitted(FILE *f, const char *text, size_t len, size_t width);
/* Advice is never cut: a line that starts with HBMI_WHOLE is written whole (the mark
 * dropped) whatever the width. hbmi_mark_whole(f) starts such a line, and writes the mark
 * only while hbmi_emit_fitted runs its writer, so text written straight to a file never
 * holds it. */
#define HBMI_WHOLE '\x01'
void hbmi_mark_whole(FILE *f);
hbm_status hbmi_emit_fitted(hbmi_emit_fn fn, const void *ctx, FILE *f, size_t width);

#endif
