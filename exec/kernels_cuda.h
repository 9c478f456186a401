/* The transformer's element-wise, norm, rotary, attention and optimizer ops as CUDA kernels, the
 * GPU twins of exec/kernels.h: same arguments, same formulas, same conventions (row-major fp32;
 * forward kernels overwrite, backward kernels ADD into gradients except ts_cuda_rope_bwd, which
 * rotates in place like ts_rope_bwd). Every pointer is device memory, including ts_attn_shape's
 * q_pos and k_pos. Each call launches on the backend's compute stream (backend_cuda.h), checks the
 * launch and returns without waiting. Grids come from exec/launch.h.
 *
 * Defined in exec/kernels_cuda.cu (element-wise, norms, rotary, attention, AdamW),
 * exec/kernels_cuda_vocab.cu (embedding, cross-entropy) and exec/kernels_cuda_moe.cu (routing,
 * dispatch, combine), so only in CUDA builds (make CUDA=1); tests/test_cuda.c diffs
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

/* As ts_attention_fwd / ts_attention_bwd, untiled: one warp per (query, head) with an online
 * softmax, so no scratch; the backward computes dq the same way and dk, dv with one warp per
 * (key, kv head), without atomics (deterministic). A warp holds a head in registers, so the head
 * dimension D is at most TS_CUDA_ATTN_MAX_D (TS_ERR_INPUT above). Not FlashAttention: no shared
 * memory tiles, keys are read once per query. */
#define TS_CUDA_ATTN_MAX_D 256
ts_status ts_cuda_attention_fwd(float *out, float *lse, const float *q, const float *k,
                                const float *v, const ts_attn_shape *s);
ts_status ts_cuda_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                const float *k, const float *v, const float *out, const float *lse,
                                const ts_attn_shape *s);
/* The same attention tiled on tensor cores (FlashAttention-2, exec/kernels_cuda_flash.cu): q, k,
 * v, dout and the probabilities rounded to bf16, mma.sync m16n8k16 products with fp32
 * accumulation in registers, fp32 softmax statistics; no Tq × Tk buffer; the backward deterministic (no
 * atomics; it allocates Tq·H floats of D_i on the stream). Needs compute capability 8.0+; D up to
 * TS_FLASH_MAX_D (256); tiles and grids from exec/flash_launch.h. bf16_out = 1 rounds what they
 * write (out; dq, dk, dv after the addition) to bf16 values in the same launch (the bf16 table). */
ts_status ts_cuda_flash_attention_fwd(float *out, float *lse, const float *q, const float *k,
                                      const float *v, const ts_attn_shape *s, int bf16_out);
ts_status ts_cuda_flash_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                      const float *k, const float *v, const float *out, const float *lse,
                                      const ts_attn_shape *s, int bf16_out);

/* As ts_attention_merge: one thread per (query, head). */
ts_status ts_cuda_attention_merge(float *out, float *lse, const float *out2, const float *lse2, int Tq, int H,
                                  int D, int ldo);

/* ---- Vocab-parallel embedding and cross-entropy (kernels_cuda_vocab.cu) ---- */

/* As ts_embedding_fwd / ts_embedding_bwd (tokens device memory). The backward runs one thread per
 * column over the tokens in order, as the CPU loop adds them, so repeated tokens sum in the same
 * order (no atomics, deterministic). */
ts_status ts_cuda_embedding_fwd(float *out, const int *tokens, const float *wte, int v0, int Vs, int T,
                                int C);
ts_status ts_cuda_embedding_bwd(float *dwte, const float *dout, const int *tokens, int v0, int Vs, int T,
                                int C);

/* As ts_ce_max, ts_ce_sums (the sum of exponentials in double, as on the CPU), ts_ce_loss and
 * ts_ce_bwd (dlogits overwritten, may be logits). One block per row for the reductions. */
ts_status ts_cuda_ce_max(float *max, const float *logits, int T, int Vs);
ts_status ts_cuda_ce_sums(float *sumexp, float *target_logit, const float *logits, const float *max,
                          const int *targets, int v0, int T, int Vs);
ts_status ts_cuda_ce_loss(float *loss, const float *max, const float *sumexp, const float *target_logit,
                          int T);
ts_status ts_cuda_ce_bwd(float *dlogits, const float *logits, const float *max, const float *sumexp,
                         const int *targets, int v0, int T, int Vs, float dloss);

/* ---- Mixture of experts (kernels_cuda_moe.cu) ---- */

/* As ts_router_fwd / ts_router_bwd: one thread per token. */
ts_status ts_cuda_router_fwd(float *probs, int *expert, float *weight, const float *logits, int T, int E,
                             int K, int G, int M);
ts_status ts_cuda_router_bwd(float *dlogits, const float *dweight, const float *probs, const int *expert,
                             int T, int E, int K);
/* As ts_moe_gather_fwd / ts_moe_gather_bwd; the backward, like the embedding's, one thread per
 * column over the slots in order. */
ts_status ts_cuda_moe_gather_fwd(float *xe, const float *x, const int *slot_token, int n_slots, int C);
ts_status ts_cuda_moe_gather_bwd(float *dx, const float *dxe, const int *slot_token, int n_slots, int C);
/* As ts_moe_combine_fwd / ts_moe_combine_bwd (each slot belongs to one assignment, so dye needs
 * no atomics; dweight one thread per assignment). */
ts_status ts_cuda_moe_combine_fwd(float *out, const float *ye, const float *weight, const int *slot, int T,
                                  int K, int C);
ts_status ts_cuda_moe_combine_bwd(float *dye, float *dweight, const float *dout, const float *ye,
                                  const float *weight, const int *slot, int T, int K, int C);

/* ---- BF16 mixed-precision forms (kernel_table_cuda_bf16.cu) ---- */

/* The same kernels rounding as kernel_table_cpu_bf16.c does, inside the one launch: weights read as
 * bf16 copies (rmsnorm's w), activations and activation gradients written as bf16 values (out, act,
 * dgate, dup, dx, rotated rows); rstd and the norm's weight gradient stay fp32. */
ts_status ts_cuda_add_bf16(float *out, const float *a, const float *b, size_t n);
ts_status ts_cuda_swiglu_fwd_bf16(float *act, const float *gate, const float *up, size_t n);
ts_status ts_cuda_swiglu_bwd_bf16(float *dgate, float *dup, const float *dact, const float *gate,
                                  const float *up, size_t n);
ts_status ts_cuda_rmsnorm_fwd_bf16(float *out, float *rstd, const float *x, const float *w, int T, int C,
                                   float eps);
ts_status ts_cuda_rmsnorm_bwd_bf16(float *dx, float *dw, const float *dout, const float *x,
                                   const float *w, const float *rstd, int T, int C);
ts_status ts_cuda_rope_fwd_bf16(float *x, int ldx, const int *pos, int T, int H, int D, float theta);
ts_status ts_cuda_rope_bwd_bf16(float *dx, int ldx, const int *pos, int T, int H, int D, float theta);

/* Kernel launches this process has made through these files (cuBLAS's not counted): a test holds
 * a fused op to one launch by the difference across a call. */
unsigned long long ts_cuda_launches(void);

/* As ts_adamw. */
ts_status ts_cuda_adamw(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                        float beta1, float beta2, float eps, float weight_decay, int step);

#endif
