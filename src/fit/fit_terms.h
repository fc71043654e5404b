/* src/fit/fit_terms.h - what hbm plan's explanation borrows from fit: a module's peak in JAX's
 * terms. For a JAX module without a backward pass, that jax.checkpoint policies do not apply and
 * what does; with one, each scan residual named (the scan over L layers saves X per layer, what
 * computes it, at which line) with the change that stops saving it. The bytes a change takes
 * off are not planned here: hbm fit verifies them. Written wrapped at width (0: not wrapped);
 * nothing for a module JAX did not compile. */
#ifndef HBM_FIT_TERMS_H
#define HBM_FIT_TERMS_H

#include <stdio.h>
#include "hbm/plan.h"

hbm_status hbmi_fit_terms_write(const hbm_plan *p, FILE *f, size_t width);

#endif
