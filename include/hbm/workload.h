/* hbm/workload.h - synthetic but realistic allocation sequences, as timelines, and a
 * runner that plays a timeline's allocs and frees against an allocator.
 *
 *   hbm_transformer_spec s;  hbm_timeline *tl;  hbm_run_result r;
 *   hbm_transformer_spec_default(&s);
 *   hbm_workload_transformer(&s, &tl);       // one training step, clock = event index
 *   hbm_timeline_run(tl, allocator, &r);     // r.status == HBM_ERR_OOM: r.failed_buffer
 */
#ifndef HBM_WORKLOAD_H
#define HBM_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "hbm/alloc.h"
#include "hbm/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One training step of a decoder-only transformer with Adam, as a runtime allocates it:
 * f32 weights and two f32 Adam moments, bf16 activations saved per layer in the forward
 * pass (flash attention: no score matrices), f32 logits, then the backward pass freeing
 * activations in reverse while weight gradients appear, and the optimizer update
 * consuming the gradients. */
typedef struct hbm_transformer_spec {
    int layers;
    int d_model;
    int seq_len;
    int batch;
    int vocab;
} hbm_transformer_spec;

/* 24 layers, d_model 3072, 2048 tokens, batch 9, vocab 65536: 2.9 B parameters whose step
 * peaks just above 60 GiB, JAX's default 75 % of an 80 GiB device. */
HBM_API void hbm_transformer_spec_default(hbm_transformer_spec *s);
HBM_API hbm_status hbm_workload_transformer(const hbm_transformer_spec *s, hbm_timeline **out);
/* What `hbm demo` says of the step: the parameter count, the shape, tl's buffers and bytes
 * by category (weights and gradients, Adam state, activations) and its peak live bytes,
 * three lines and a blank one. tl: the step hbm_workload_transformer(s) built. */
HBM_API hbm_status hbm_transformer_describe(const hbm_transformer_spec *s, const hbm_timeline *tl, FILE *f);

typedef struct hbm_run_result {
    hbm_status status;     /* HBM_OK, or the first failure */
    size_t events;         /* allocs + frees performed */
    size_t failed_buffer;  /* index of the buffer whose allocation failed (if any) */
    uint64_t peak_in_use;  /* stats at the end of the run (before the final cleanup) */
    uint64_t peak_reserved;
} hbm_run_result;

/* Allocate each buffer at its start and free it at its end (frees first at equal times;
 * ties by index), stopping at the first failure; everything still allocated is freed
 * before returning. The tags of the timeline travel with the allocations. */
HBM_API hbm_status hbm_timeline_run(const hbm_timeline *tl, hbm_allocator *a, hbm_run_result *r);

#ifdef __cplusplus
}
#endif
#endif
