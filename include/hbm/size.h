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
 * IEC units are binary: KiB, MiB, GiB, TiB, PiB, EiB = 1024^1..6. SI units are decimal:
 * KB, MB, GB, TB, PB, EB = 1000^1..6 (so "40GB" is 40000000000 bytes, 37.25 GiB). A
 * bare prefix (K, M, G, T) is binary, as in ulimit, Docker and `ls -h`. Letters are
 * case-insensitive. Fractions are allowed with a unit and are rounded down to a whole
 * number of bytes. Errors name the text. *out is set on every call: the size; on
 * failure 0, or UINT64_MAX when the text is a size past 2^64 - 1 bytes (too large, as
 * opposed to malformed), so that a caller tells the two apart without reading the message. */
HBM_API hbm_status hbm_size_parse(const char *text, uint64_t *out);

/* Print a size the way XLA/TSL's HumanReadableNumBytes does: "112B", "10.0KiB",
 * "57.22MiB", "335.59GiB" (KiB with one decimal, larger units with two, truncated
 * to the unit by integer division first). Returns buf. buf must hold 32 bytes. */
HBM_API char *hbm_size_xla(int64_t bytes, char buf[32]);

/* The one format hbm prints sizes in, XLA's (hbm_size_xla) for unsigned sizes: "0B",
 * "512B", "1.5KiB", "80.00GiB", so that hbm's own lines and the XLA reports it quotes
 * read alike. */
HBM_API char *hbm_size_human(uint64_t bytes, char buf[32]);

#ifdef __cplusplus
}
#endif
#endif
