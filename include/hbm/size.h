/* hbm/size.h - byte sizes in human units, both ways. */
#ifndef HBM_SIZE_H
#define HBM_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse a size: "1048576", "80GiB", "80G", "1.5GiB", "512MB", "2 MiB", "16k".
 * K/M/G/T/P suffixes are powers of 1024 whether written K, KB, KiB (case-insensitive),
 * as in XLA, PyTorch and mimalloc. Fractions are allowed with a suffix and must come out
 * to a whole number of bytes after rounding down. Errors name the text. */
hbm_status hbm_size_parse(const char *text, uint64_t *out);

/* Print a size the way XLA/TSL's HumanReadableNumBytes does: "112B", "10.0KiB",
 * "57.22MiB", "335.59GiB" (KiB with one decimal, larger units with two, truncated
 * to the unit by integer division first). Returns buf. buf must hold 32 bytes. */
char *hbm_size_xla(int64_t bytes, char buf[32]);

/* Compact human form for tables: "0 B", "512 B", "1.50 KiB", "80.00 GiB". */
char *hbm_size_human(uint64_t bytes, char buf[32]);

#ifdef __cplusplus
}
#endif
#endif
