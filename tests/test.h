/* tests/test.h - the whole test harness: checks that report file:line and hbm's
 * last error, and a runner. A test program exits 0 (pass), 77 (skip) or 1 (fail).
 *
 *   static void test_something(void) { CHECK_OK(hbm_device_open("sim:1GiB", &d)); ... }
 *   int main(void) { RUN(test_something); return test_done(); }
 */
#ifndef HBM_TEST_H
#define HBM_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/hbm.h"

static int test_failures_;
static int test_checks_;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        test_checks_++;                                                                   \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__,      \
                    __LINE__, #cond, hbm_last_error());                                   \
            test_failures_++;                                                             \
            return;                                                                       \
        }                                                                                 \
    } while (0)

#define CHECK_STATUS(expr, want)                                                          \
    do {                                                                                  \
        test_checks_++;                                                                   \
        hbm_status got_ = (expr);                                                         \
        if (got_ != (want)) {                                                             \
            fprintf(stderr, "%s:%d: %s returned %s, want %s (last error: %s)\n", __FILE__, \
                    __LINE__, #expr, hbm_status_name(got_), hbm_status_name(want),        \
                    hbm_last_error());                                                    \
            test_failures_++;                                                             \
            return;                                                                       \
        }                                                                                 \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, HBM_OK)

#define CHECK_EQ_U64(a, b)                                                                \
    do {                                                                                  \
        test_checks_++;                                                                   \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                  \
        if (a_ != b_) {                                                                   \
            fprintf(stderr, "%s:%d: %s == %" PRIu64 ", want %s == %" PRIu64 "\n",         \
                    __FILE__, __LINE__, #a, a_, #b, b_);                                  \
            test_failures_++;                                                             \
            return;                                                                       \
        }                                                                                 \
    } while (0)

#define CHECK_STR(a, b)                                                                   \
    do {                                                                                  \
        test_checks_++;                                                                   \
        const char *a_ = (a), *b_ = (b);                                                  \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                          \
            fprintf(stderr, "%s:%d: %s == \"%s\", want \"%s\"\n", __FILE__, __LINE__, #a, \
                    a_ ? a_ : "(null)", b_ ? b_ : "(null)");                              \
            test_failures_++;                                                             \
            return;                                                                       \
        }                                                                                 \
    } while (0)

/* The string s contains needle. */
#define CHECK_CONTAINS(s, needle)                                                         \
    do {                                                                                  \
        test_checks_++;                                                                   \
        const char *s_ = (s), *n_ = (needle);                                             \
        if (!s_ || !strstr(s_, n_)) {                                                     \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
                    s_ ? s_ : "(null)", n_);                                              \
            test_failures_++;                                                             \
            return;                                                                       \
        }                                                                                 \
    } while (0)

#define RUN(fn)                                                                           \
    do {                                                                                  \
        int before_ = test_failures_;                                                     \
        fn();                                                                             \
        fprintf(stderr, "%s %s\n", test_failures_ == before_ ? "ok  " : "FAIL", #fn);     \
    } while (0)

static inline int test_done(void) {
    fprintf(stderr, "%d checks, %d failures\n", test_checks_, test_failures_);
    return test_failures_ ? 1 : 0;
}

/* Skip the whole test program with a reason. */
#define TEST_SKIP(...)                                                                    \
    do {                                                                                  \
        fprintf(stderr, "SKIP: ");                                                        \
        fprintf(stderr, __VA_ARGS__);                                                     \
        fprintf(stderr, "\n");                                                            \
        exit(77);                                                                         \
    } while (0)

/* Deterministic xorshift PRNG for randomized tests. */
typedef struct test_rng { uint64_t s; } test_rng;
static inline uint64_t test_rand(test_rng *r) {
    uint64_t x = r->s ? r->s : 0x9e3779b97f4a7c15ULL;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return r->s = x;
}
/* Uniform in [0, n). */
static inline uint64_t test_below(test_rng *r, uint64_t n) { return n ? test_rand(r) % n : 0; }

#endif
