/* The transformer's math as small fp32 CPU kernels with hand-written backward passes: the plain
 * reference that the executor runs on CPU ranks and that every faster path is diffed against.
 *
 * Every kernel works on a shard, so Megatron-style tensor, sequence, context and expert
 * parallelism are the same calls on smaller pieces plus a collective between them:
 *   - linear layers take whatever rows (column parallel) or columns (row parallel) of a weight
 *     the rank holds, stored contiguously; row-parallel outputs are partial sums to all-reduce;
 *   - RMSNorm works per row (sequence parallel needs nothing else);
 *   - attention takes the rank's query heads and their kv heads, and explicit token positions, so
 *     a chunk of queries can attend to any chunk of keys (context parallel), and partial results
 *     over key chunks merge through their log-sum-exp (ring attention);
 *   - the embedding and the cross-entropy work on a vocabulary slice [v0, v0 + Vs) (Megatron's
 *     vocab-parallel embedding and cross-entropy, Shoeybi et al. 2019 §3);
 *   - MoE routing, dispatch (gather by expert) and combine are separate, so expert parallelism is
 *     an all-to-all between dispatch and the expert MLPs.
 *
 * Conventions. Row-major fp32. Shapes in comments: T rows (tokens), C model width, Vs vocabulary
 * slice, H query heads and KV key/value heads of the shard, D head dim, F MLP width of the shard,
 * E experts, K experts per token. Weights are stored (out, in) as in PyTorch's nn.Linear.
 * Forward kernels overwrite their outputs. Backward kernels ADD into the gradients they produce
 * (inputs and parameters alike), so callers zero them first and contributions from several uses
 * accumulate; the exceptions (ts_ce_bwd, ts_rope_bwd) say so. No kernel allocates: buffers the
 * caller passes as `scratch` have the stated size. */
#ifndef TS_KERNELS_H
#define TS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "common/host_device.h"

/* C (M, N) = alpha * op(A) (M, K) * op(B) (K, N) + beta * C, row-major; op(X) = X^T when trans_x
 * is nonzero. lda/ldb/ldc are the row strides of A, B, C as stored. A thin wrapper over
 * cblas_sgemm that every GEMM in Tessera's CPU path goes through. */
void ts_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);

/* ---- Linear: out = in · w^T ------------------------------------------------------------------ */

/* out (T, OC) = in (T, IC) · w^T, w (OC, IC). */
void ts_linear_fwd(float *out, const float *in, const float *w, int T, int IC, int OC);
/* din (T, IC) += dout (T, OC) · w;  dw (OC, IC) += dout^T · in. */
void ts_linear_bwd(float *din, float *dw, const float *dout, const float *in, const float *w, int T,
                   int IC, int OC);
/* Its two halves, for schedules that run weight gradients apart (zero-bubble's B and W). */
void ts_linear_bwd_input(float *din, const float *dout, const float *w, int T, int IC, int OC);
void ts_linear_bwd_weight(float *dw, const float *dout, const float *in, int T, int IC, int OC);

/* ---- RMSNorm (Zhang & Sennrich 2019): out = x / rms(x) * w ----------------------------------- */

/* out (T, C) = x (T, C) * rstd * w (C), rstd (T) = 1 / sqrt(mean_c x^2 + eps). */
void ts_rmsnorm_fwd(float *out, float *rstd, const float *x, const float *w, int T, int C,
                    float eps);
/* dx (T, C) += rstd (w dout - x rstd^2 mean_c(dout w x));  dw (C) += sum_t dout x rstd. */
void ts_rmsnorm_bwd(float *dx, float *dw, const float *dout, const float *x, const float *w,
                    const float *rstd, int T, int C);

/* ---- Vocab-parallel embedding ---------------------------------------------------------------- */

/* out (T, C): row t = wte[tokens[t] - v0] when tokens[t] is in [v0, v0 + Vs), else zeros, so the
 * sum over the vocabulary shards (a TP all-reduce) is the full embedding. wte (Vs, C). */
void ts_embedding_fwd(float *out, const int *tokens, const float *wte, int v0, int Vs, int T,
                      int C);
/* dwte (Vs, C) += dout (T, C) rows scattered by token, for tokens in the slice. */
void ts_embedding_bwd(float *dwte, const float *dout, const int *tokens, int v0, int Vs, int T,
                      int C);

/* ---- Rotary position embedding (Su et al. 2021; Llama's rotate-half layout) ------------------ */

/* Rotates H heads of head_dim D in place; row t starts at x + t*ldx and holds the heads back to
 * back. For i < D/2, with angle = pos[t] * theta^(-2i/D):
 *   x[i] <- x[i] cos - x[i + D/2] sin,   x[i + D/2] <- x[i + D/2] cos + x[i] sin. */
void ts_rope_fwd(float *x, int ldx, const int *pos, int T, int H, int D, float theta);
/* The transpose (inverse) rotation, applied IN PLACE to the gradient dx: rotary is orthogonal, so
 * this maps d(rotated) to d(unrotated). */
void ts_rope_bwd(float *dx, int ldx, const int *pos, int T, int H, int D, float theta);

/* ---- Causal attention (grouped-query) -------------------------------------------------------- */

/* Shapes of one attention call over `batch` sequences. q holds H query heads per row, k and v
 * hold KV heads per row (H % KV == 0); query head h reads kv head h / (H / KV). A TP shard passes
 * its own heads: with Megatron's split (heads and kv heads each divided by tp, or kv heads
 * replicated when tp > kv_heads) this local mapping is the model's. Sequence b's Tq query rows
 * follow sequence b - 1's (q, out, lse, q_pos), as its Tk key rows do (k, v, k_pos); a query sees
 * only its own sequence's keys, and query i sees key j iff k_pos[j] <= q_pos[i]. One call over
 * the batch gives what `batch` calls over one sequence each give (a GPU fills with all of them). */
typedef struct {
    int Tq, Tk;        /* query rows, key/value rows, per sequence */
    int H, KV, D;      /* query heads, kv heads, head dim */
    int ldq, ldk, ldv; /* row strides (floats) of q (Tq, H*D), k and v (Tk, KV*D) */
    int ldo;           /* row stride of out / dout (Tq, H*D) */
    const int *q_pos;  /* (batch·Tq) position of each query row */
    const int *k_pos;  /* (batch·Tk) position of each key row */
    int batch;         /* sequences; 0 counts as 1 */
} ts_attn_shape;

/* The sequences of a shape (batch, or 1 when 0); the CUDA kernels call it too. */
static inline TS_HOST_DEVICE int ts_attn_batch(const ts_attn_shape *s) { return s->batch > 1 ? s->batch : 1; }

/* out (Tq, H, D) = softmax(q k^T / sqrt(D), causal by position) v; lse (Tq, H) the natural log of
 * each softmax denominator (of the scaled scores). A query that sees no key gets out = 0 and
 * lse = -inf. scratch: Tk floats. */
void ts_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                      const ts_attn_shape *s, float *scratch);
/* dq (Tq, H*D, stride ldq), dk (Tk, KV*D, ldk), dv (Tk, KV*D, ldv) += the gradients for
 * dout (Tq, H*D, ldo). Scores are recomputed and normalised with the given out and lse
 * (FlashAttention-2's backward, Dao 2023, Alg. 2): passing the out and lse of the whole key range
 * while k, v hold only one chunk of it gives that chunk's share, which is how a ring-attention
 * rank computes its backward. Needs no scratch. */
void ts_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                      const float *k, const float *v, const float *out, const float *lse,
                      const ts_attn_shape *s);
/* Merges the partial attention (out2, lse2) over one key chunk into (out, lse) over another, as if
 * both chunks had been one: lse' = log(e^lse + e^lse2), out' = e^(lse-lse')out + e^(lse2-lse')out2.
 * out, out2 (Tq, H*D) with row stride ldo; lse, lse2 (Tq, H). */
void ts_attention_merge(float *out, float *lse, const float *out2, const float *lse2, int Tq, int H,
                        int D, int ldo);

/* ---- SwiGLU MLP (Shazeer 2020): out = (silu(x w_gate^T) * (x w_up^T)) w_down^T ------------ */

/* act (n) = silu(gate) * up, element-wise (the SwiGLU activation). */
void ts_swiglu_fwd(float *act, const float *gate, const float *up, size_t n);
/* dgate, dup (n) = its gradients for dact (n); dup may alias dact. */
void ts_swiglu_bwd(float *dgate, float *dup, const float *dact, const float *gate, const float *up,
                   size_t n);

/* x (T, C); w_gate, w_up (F, C); w_down (C, F). Saves gate, up, act (T, F), act = silu(gate)*up,
 * for the backward. With F a column slice of the gate/up rows and the matching columns of
 * w_down, out (T, C) is that shard's partial sum (Megatron's column- then row-parallel MLP). */
void ts_mlp_fwd(float *out, float *gate, float *up, float *act, const float *x, const float *w_gate,
                const float *w_up, const float *w_down, int T, int C, int F);
/* dx (T, C), dw_gate, dw_up (F, C), dw_down (C, F) += the gradients for dout (T, C).
 * scratch: 2*T*F floats. */
void ts_mlp_bwd(float *dx, float *dw_gate, float *dw_up, float *dw_down, const float *dout,
                const float *x, const float *gate, const float *up, const float *act,
                const float *w_gate, const float *w_up, const float *w_down, int T, int C, int F,
                float *scratch);

/* ---- Mixture of experts: top-k routing, dispatch, combine ------------------------------------ */
/* An expert that receives no token runs ts_mlp_* with T = 0; every kernel accepts empty inputs. */

/* probs (T, E) = softmax(logits (T, E)); expert (T, K) the K largest probabilities in descending
 * order (ties to the lower index), from the M best of G expert groups when G > 1 and M < G
 * (node-limited routing, exec/router_token.h); weight (T, K) those probabilities renormalised to sum to 1
 * (Mixtral's routing, Jiang et al. 2024). */
void ts_router_fwd(float *probs, int *expert, float *weight, const float *logits, int T, int E,
                   int K, int G, int M);
/* dlogits (T, E) += the gradient through the renormalisation and the softmax for dweight (T, K);
 * the selection itself is piecewise constant. */
void ts_router_bwd(float *dlogits, const float *dweight, const float *probs, const int *expert,
                   int T, int E, int K);
/* Groups the T*K (token, choice) assignments by expert, dropless: slots [offset[e], offset[e+1])
 * belong to expert e, in token order. offset (E+1); slot_token (T*K) the token of each slot;
 * slot (T, K) the slot of each assignment. offset[e+1]-offset[e] are the all-to-all counts. */
void ts_moe_plan(int *offset, int *slot_token, int *slot, const int *expert, int T, int E, int K);
/* xe (n_slots, C): row s = x[slot_token[s]], x (T, C). */
void ts_moe_gather_fwd(float *xe, const float *x, const int *slot_token, int n_slots, int C);
/* dx (T, C) += dxe (n_slots, C) rows scattered back to their tokens. */
void ts_moe_gather_bwd(float *dx, const float *dxe, const int *slot_token, int n_slots, int C);
/* out (T, C) = sum_k weight[t,k] * ye[slot[t,k]], ye (T*K, C) the expert outputs by slot. */
void ts_moe_combine_fwd(float *out, const float *ye, const float *weight, const int *slot, int T,
                        int K, int C);
/* dye (T*K, C) += weight * dout by slot;  dweight (T, K) += dout[t] . ye[slot[t,k]]. */
void ts_moe_combine_bwd(float *dye, float *dweight, const float *dout, const float *ye,
                        const float *weight, const int *slot, int T, int K, int C);

/* ---- Vocab-parallel cross-entropy ------------------------------------------------------------ */
/* A rank holding logits (T, Vs) for vocabulary [v0, v0 + Vs) computes the loss in three steps with
 * two all-reduces between them (Megatron's vocab-parallel cross-entropy):
 *   1. ts_ce_max           local row max            -> all-reduce MAX -> max (T)
 *   2. ts_ce_sums          sum exp(z - max), z_target -> all-reduce SUM of both
 *   3. ts_ce_loss          loss = max + log(sumexp) - z_target
 * and the backward ts_ce_bwd needs only max and sumexp, no further communication. */

/* max (T) = max over the slice of each row of logits (T, Vs). */
void ts_ce_max(float *max, const float *logits, int T, int Vs);
/* sumexp (T) = sum over the slice of exp(logit - max[t]) with the GLOBAL max; target_logit (T) =
 * the logit of targets[t] when it lies in the slice, else 0 (so the SUM over shards is it). */
void ts_ce_sums(float *sumexp, float *target_logit, const float *logits, const float *max,
                const int *targets, int v0, int T, int Vs);
/* loss (T) = max + log(sumexp) - target_logit, all three reduced over the shards. */
void ts_ce_loss(float *loss, const float *max, const float *sumexp, const float *target_logit,
                int T);
/* dlogits (T, Vs) = dloss * (softmax - onehot(target)), OVERWRITTEN (it may be `logits` itself):
 * the gradient of dloss * sum_t loss[t]; dloss = 1/(tokens) gives the mean. */
void ts_ce_bwd(float *dlogits, const float *logits, const float *max, const float *sumexp,
               const int *targets, int v0, int T, int Vs, float dloss);

/* ---- bf16 ------------------------------------------------------------------------------------ */

/* x rounded to bf16 (the upper 16 bits of an fp32, round to nearest even): the 16-bit word the
 * GPU's bf16 GEMMs read (calibrate's bf16 grid, the CUDA tests); common/bf16.h's conversion. */
uint16_t ts_bf16_bits(float x);

/* ---- AdamW (Loshchilov & Hutter 2019) -------------------------------------------------------- */

/* One update of n parameters at step t (1-based), element-wise so any shard (ZeRO) updates alone:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr * ((m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * p). */
void ts_adamw(float *param, float *m, float *v, const float *grad, size_t n, float lr, float beta1,
              float beta2, float eps, float weight_decay, int step);

#endif
