/* The transformer's element-wise, norm, rotary, attention and optimizer ops as CUDA kernels, the
 * GPU twins of exec/kernels.h: same arguments, same formulas, same conventions (row-major fp32;
 * forward kernels overwrite, backward kernels ADD into gradients except ts_cuda_rope_bwd, which
 * rotates in place like ts_rope_bwd). Every pointer is device memory, including ts_attn_shape's
 * q_pos and k_pos. Each call launches on the backend's compute stream (backend_cuda.h), checks the
 * launch and returns without waiting. Grids come from exec/launch.h.
 *
 * Defined in exec/kernels_cuda.cu, so only in CUDA builds (make CUDA=1); tests/test_cuda.c diffs
 * each against the CPU kernel (skipped where no GPU exists). GELU and LayerNorm have no CPU
 * kernel in kernels.h (the trainer's models use SwiGLU and RMSNorm); their references are in the
 * test. */
#ifndef TS_KERNELS_CUDA_H
#define TS_KERNELS_CUDA_H

#include <stddef.h>

#include "common/status.h"
#include "exec/kernels.h"

/* out (n) = a + b (out may alias either). */
ts_status ts_cuda_add(float *out, const float *a, const float *b, size_t n);

/* GELU, tanh form (Hendrycks & Gimpel 2016): out = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
ts_status ts_cuda_gelu_fwd(float *out, const float *x, size_t n);
/* dx (n) += gelu'(x) dout. */
ts_status ts_cuda_gelu_bwd(float *dx, const float *dout, const float *x, size_t n);

/* As ts_swiglu_fwd / ts_swiglu_bwd (dgate, dup overwritten; dup may alias dact). */
ts_status ts_cuda_swiglu_fwd(float *act, const float *gate, const float *up, size_t n);
ts_status ts_cuda_swiglu_bwd(float *dgate, float *dup, const float *dact, const float *gate,
                             const float *up, size_t n);

/* As ts_rmsnorm_fwd / ts_rmsnorm_bwd: one block per row. */
ts_status ts_cuda_rmsnorm_fwd(float *out, float *rstd, const float *x, const float *w, int T, int C,
                              float eps);
ts_status ts_cuda_rmsnorm_bwd(float *dx, float *dw, const float *dout, const float *x,
                              const float *w, const float *rstd, int T, int C);

/* LayerNorm (Ba et al. 2016): out (T, C) = (x - mean) rstd w + b, mean and rstd (T) saved.
 * Backward: dx (T, C) += rstd (g - mean_c g - xhat mean_c(g xhat)), g = dout w, xhat = (x - mean)
 * rstd; dw (C) += sum_t dout xhat; db (C) += sum_t dout. */
ts_status ts_cuda_layernorm_fwd(float *out, float *mean, float *rstd, const float *x, const float *w,
                                const float *b, int T, int C, float eps);
ts_status ts_cuda_layernorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x,
                                const float *w, const float *mean, const float *rstd, int T, int C);

/* As ts_rope_fwd / ts_rope_bwd (in place; pos is device memory). */
ts_status ts_cuda_rope_fwd(float *x, int ldx, const int *pos, int T, int H, int D, float theta);
ts_status ts_cuda_rope_bwd(float *dx, int ldx, const int *pos, int T, int H, int D, float theta);

/* As ts_attention_fwd / ts_attention_bwd: the plain (not tiled) algorithm, one thread per (query,
 * head) with an online softmax, so no scratch; the backward accumulates dk, dv with atomics.
 * Meant as the GPU reference, not as FlashAttention. */
ts_status ts_cuda_attention_fwd(float *out, float *lse, const float *q, const float *k,
                                const float *v, const ts_attn_shape *s);
ts_status ts_cuda_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                const float *k, const float *v, const float *out, const float *lse,
                                const ts_attn_shape *s);

/* As ts_adamw. */
ts_status ts_cuda_adamw(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                        float beta1, float beta2, float eps, float weight_decay, int step);

#endif
