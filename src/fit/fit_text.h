/* src/fit/fit_text.h - what the facade (src/api/api_json.c, hbm_fit_write) calls of fit's
 * text report beyond hbm/fit.h. fit's result and its internals stay in fit_result.h and
 * fit_internal.h, inside src/fit. */
#ifndef HBM_FIT_TEXT_H
#define HBM_FIT_TEXT_H

#include <stddef.h>
#include <stdio.h>

#include "hbm/fit.h"

/* The text with advice lines marked (a leading \x01: wrapped at width, never cut), then
 * written: other lines cut to width as every table is (0: nothing cut or wrapped). */
hbm_status hbmi_fit_text_width(const hbm_fit_result *r, FILE *f, size_t top, size_t width);

#endif
