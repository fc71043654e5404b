/* hbm/status.h - status codes and the thread-local last-error message.
 *
 * Every fallible hbm call returns an hbm_status: HBM_OK (0) on success, a
 * negative code on failure. The details (what, where, which value) are in
 * hbm_last_error(), a per-thread string overwritten by the next failure.
 *
 *   hbm_status s = hbm_device_open("sim:80GiB", &dev);
 *   if (s != HBM_OK) fprintf(stderr, "%s: %s\n", hbm_status_str(s), hbm_last_error());
 */
#ifndef HBM_STATUS_H
#define HBM_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* HBM_API marks what libhbm.so exports: the functions declared in include/hbm/, and only
 * them (the library is built with hidden visibility; tests/test_exports.sh checks both). */
#if defined(__GNUC__) || defined(__clang__)
#define HBM_API __attribute__((visibility("default")))
#else
#define HBM_API
#endif

/* X(name, value, description) */
#define HBM_STATUS_LIST(X)                                                          \
    X(HBM_OK, 0, "ok")                                                              \
    X(HBM_ERR_INVALID, -1, "invalid argument")                                     \
    X(HBM_ERR_NOMEM, -2, "out of host memory")                                     \
    X(HBM_ERR_OOM, -3, "out of device memory (RESOURCE_EXHAUSTED)")                \
    X(HBM_ERR_NOT_AVAILABLE, -4, "not available")                                  \
    X(HBM_ERR_CONFIG, -5, "bad configuration")                                     \
    X(HBM_ERR_PARSE, -6, "parse error")                                            \
    X(HBM_ERR_IO, -7, "I/O error")                                                 \
    X(HBM_ERR_BAD_FREE, -8, "invalid free")                                        \
    X(HBM_ERR_UNSUPPORTED, -9, "unsupported")                                      \
    X(HBM_ERR_INFEASIBLE, -10, "infeasible")                                       \
    X(HBM_ERR_TIMEOUT, -11, "timed out")                                           \
    X(HBM_ERR_DEVICE, -12, "device error")                                         \
    X(HBM_ERR_CORRUPT, -13, "invariant violated")

typedef enum hbm_status {
#define HBM_STATUS_ENUM_(name, value, desc) name = value,
    HBM_STATUS_LIST(HBM_STATUS_ENUM_)
#undef HBM_STATUS_ENUM_
} hbm_status;

/* A short fixed description of a status ("out of device memory ..."). Never NULL. */
HBM_API const char *hbm_status_str(hbm_status s);

/* The symbolic name of a status ("HBM_ERR_OOM"). Never NULL. */
HBM_API const char *hbm_status_name(hbm_status s);

/* The calling thread's message for its most recent failure ("" if none). */
HBM_API const char *hbm_last_error(void);

/* Clear the calling thread's last-error message (and its location). */
HBM_API void hbm_clear_error(void);

/* Where the calling thread's last error was found in an input, when it was found at a
 * place of one (an HLO syntax error: FILE:LINE:COLUMN; a CSV line: FILE:LINE, column 0;
 * the message then starts "FILE:LINE:COLUMN: " or "FILE:LINE: "): copies FILE into file
 * (cut to cap bytes with a NUL; file may be NULL), sets *line and *column and returns 1.
 * Otherwise returns 0 with *line = *column = 0 and file "". The location is a field of the
 * thread's error record, set with the message; context added in front of the message
 * later ("module m: ...") keeps it. */
HBM_API int hbm_last_error_location(char *file, size_t cap, int *line, int *column);

#ifdef __cplusplus
}
#endif
#endif
