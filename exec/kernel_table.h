/* The trainer's kernels as a table of function pointers, one table per device (nccl-tests'
 * testColl habit, as for the backend): the CPU table wraps exec/kernels.h on host memory
 * (kernel_table_cpu.c), the CUDA table wraps exec/kernels_cuda.h and cuBLAS on device memory
 * (kernel_table_cuda.cu). Each backend points at its table (ts_backend.kernels), so the trainer
 * calls `be->kernels->rmsnorm_fwd(...)` and never #ifdefs on the device.
 *
 * Every entry has the arguments, formula and conventions of the kernels.h function of the same
 * name (forward kernels overwrite; backward kernels ADD into gradients except ce_bwd and
 * rope_bwd), and every pointer is memory of the table's device (from ts_backend.alloc),
 * ts_attn_shape's q_pos and k_pos included, except the host side of to_host and to_device. Entries
 * return ts_status: the CPU table always TS_OK, the CUDA table a launch or argument error (work is
 * queued on the backend's compute stream; to_host and to_device wait for it).
 *
 * What the table leaves to the host: ts_moe_plan (a counting sort whose offsets size the EP
 * all-to-alls, so the host needs them anyway; the trainer copies the router's choices to the host,
 * plans there and copies the slots back). */
#ifndef TS_KERNEL_TABLE_H
#define TS_KERNEL_TABLE_H

#include <stddef.h>

#include "common/status.h"
#include "exec/kernels.h"

typedef struct ts_kernels {
    const char *name; /* "cpu", "cuda" */

    /* ---- memory ---- */
    ts_status (*zero)(void *p, size_t bytes);
    ts_status (*copy)(void *dst, const void *src, size_t bytes); /* device to device, no overlap */
    /* rows × cols floats from src (row stride ld_src floats) to dst (row stride ld_dst). */
    ts_status (*copy_rows)(float *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows,
                           size_t cols);
    ts_status (*to_host)(void *host_dst, const void *src, size_t bytes);
    ts_status (*to_device)(void *dst, const void *host_src, size_t bytes);
    /* out (n) = a + b; out may alias a or b. */
    ts_status (*add)(float *out, const float *a, const float *b, size_t n);

    /* ---- linear, norm, embedding, rotary ---- */
    ts_status (*linear_fwd)(float *out, const float *in, const float *w, int T, int IC, int OC);
    ts_status (*linear_bwd_input)(float *din, const float *dout, const float *w, int T, int IC, int OC);
    ts_status (*linear_bwd_weight)(float *dw, const float *dout, const float *in, int T, int IC, int OC);
    ts_status (*rmsnorm_fwd)(float *out, float *rstd, const float *x, const float *w, int T, int C,
                             float eps);
    ts_status (*rmsnorm_bwd)(float *dx, float *dw, const float *dout, const float *x, const float *w,
                             const float *rstd, int T, int C);
    ts_status (*embedding_fwd)(float *out, const int *tokens, const float *wte, int v0, int Vs, int T,
                               int C);
    ts_status (*embedding_bwd)(float *dwte, const float *dout, const int *tokens, int v0, int Vs, int T,
                               int C);
    ts_status (*rope_fwd)(float *x, int ldx, const int *pos, int T, int H, int D, float theta);
    ts_status (*rope_bwd)(float *dx, int ldx, const int *pos, int T, int H, int D, float theta);

    /* ---- attention (scratch: Tk floats; the CUDA kernel needs none and ignores it) ---- */
    ts_status (*attention_fwd)(float *out, float *lse, const float *q, const float *k, const float *v,
                               const ts_attn_shape *s, float *scratch);
    ts_status (*attention_bwd)(float *dq, float *dk, float *dv, const float *dout, const float *q,
                               const float *k, const float *v, const float *out, const float *lse,
                               const ts_attn_shape *s);
    ts_status (*attention_merge)(float *out, float *lse, const float *out2, const float *lse2, int Tq, int H,
                                 int D, int ldo);

    /* ---- MLP and mixture of experts ---- */
    ts_status (*swiglu_fwd)(float *act, const float *gate, const float *up, size_t n);
    ts_status (*swiglu_bwd)(float *dgate, float *dup, const float *dact, const float *gate,
                            const float *up, size_t n);
    ts_status (*router_fwd)(float *probs, int *expert, float *weight, const float *logits, int T, int E,
                            int K, int G, int M);
    ts_status (*router_bwd)(float *dlogits, const float *dweight, const float *probs, const int *expert,
                            int T, int E, int K);
    ts_status (*moe_gather_fwd)(float *xe, const float *x, const int *slot_token, int n_slots, int C);
    ts_status (*moe_gather_bwd)(float *dx, const float *dxe, const int *slot_token, int n_slots, int C);
    ts_status (*moe_combine_fwd)(float *out, const float *ye, const float *weight, const int *slot, int T,
                                 int K, int C);
    ts_status (*moe_combine_bwd)(float *dye, float *dweight, const float *dout, const float *ye,
                                 const float *weight, const int *slot, int T, int K, int C);

    /* ---- vocab-parallel cross-entropy ---- */
    ts_status (*ce_max)(float *max, const float *logits, int T, int Vs);
    ts_status (*ce_sums)(float *sumexp, float *target_logit, const float *logits, const float *max,
                         const int *targets, int v0, int T, int Vs);
    ts_status (*ce_loss)(float *loss, const float *max, const float *sumexp, const float *target_logit,
                         int T);
    ts_status (*ce_bwd)(float *dlogits, const float *logits, const float *max, const float *sumexp,
                        const int *targets, int v0, int T, int Vs, float dloss);

    /* ---- optimizer ---- */
    ts_status (*adamw)(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int step);
} ts_kernels;

/* The CPU table: exec/kernels.h on host memory, memcpy and memset; results bit-identical to
 * calling the kernels directly. */
const ts_kernels *ts_kernels_cpu(void);

/* The entries a BF16 mixed-precision table replaces (they write bf16 activations or activation
 * gradients, or read bf16 weights); the others are the fp32 table's own (memory ops, the embedding's
 * weight gradient, cross-entropy statistics, the router's softmax, AdamW). Each bf16 table defines
 * b_<entry> for these. */
#define TS_KERNELS_BF16_ENTRIES(X)                                                                 \
    X(add) X(linear_fwd) X(linear_bwd_input) X(linear_bwd_weight) X(rmsnorm_fwd) X(rmsnorm_bwd)    \
    X(embedding_fwd) X(rope_fwd) X(rope_bwd) X(attention_fwd) X(attention_bwd) X(attention_merge)  \
    X(swiglu_fwd) X(swiglu_bwd) X(router_bwd) X(moe_gather_fwd) X(moe_gather_bwd)                  \
    X(moe_combine_fwd) X(moe_combine_bwd) X(ce_bwd)

/* The CPU table in BF16 mixed precision (exec/kernel_table_cpu_bf16.c): the CPU kernels with bf16
 * rounding where Megatron-Core's --bf16 keeps tensors in bf16 (weights as read, activations,
 * activation gradients), fp32 accumulation, fp32 weight gradients and optimizer. The reference for
 * the GPU's bf16 losses (exec/bf16_ref.h). */
const ts_kernels *ts_kernels_cpu_bf16(void);

/* The CUDA table (exec/kernel_table_cuda.cu): exec/kernels_cuda.h, fp32 GEMMs on cuBLAS
 * (ts_cuda_gemm, so ts_backend_cuda must have run), copies on the compute stream. NULL in builds
 * without CUDA (exec/backend_nocuda.c). */
const ts_kernels *ts_kernels_cuda(void);

/* The CUDA table in BF16 mixed precision (exec/kernel_table_cuda_bf16.cu), the GPU twin of
 * ts_kernels_cpu_bf16: bf16 cuBLAS GEMMs with fp32 accumulation, the tiled tensor-core attention,
 * bf16 rounding at the CPU table's points. NULL in builds without CUDA. */
const ts_kernels *ts_kernels_cuda_bf16(void);

#endif
