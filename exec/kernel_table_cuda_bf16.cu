/* The CUDA table in BF16 mixed precision (see kernel_table.h, ts_kernels_cuda_bf16): the GPU twin of
 * kernel_table_cpu_bf16.c, rounding at the same points with the same rule (common/bf16.h) so that
 * the two can be diffed: linear layers as cuBLAS bf16 GEMMs with fp32 accumulation (cublasGemmEx,
 * CUDA_R_16BF operands, CUBLAS_COMPUTE_32F) whose weights are bf16 copies of the fp32 master
 * weights, the weight gradient accumulated into fp32 (Megatron's main_grad); attention as the tiled
 * tensor-core kernels (kernels_cuda_flash.cu); the residual add, RMSNorm, rotary and SwiGLU as the
 * bf16 forms of their kernels (one launch each, rounding inside); the rest (embedding, attention's
 * merge, MoE routing, dispatch and combine, the cross-entropy's gradient) the fp32 CUDA kernels with
 * their outputs rounded by a second launch.
 *
 * Tensors stay fp32 allocations holding bf16 values (the trainer allocates fp32), so this table
 * reproduces Megatron-Core's bf16 numerics, not its memory: operands are converted to bf16 words in
 * stream-ordered scratch for each GEMM (one conversion launch), and the ops listed last take a
 * rounding launch. */
#include <cstdint>

#include "common/bf16.h"
#include "exec/kernels_cuda_common.cuh"

__global__ static void round_rows_kernel(float *x, size_t rows, size_t cols, size_t ld) {
    GRID_STRIDE(i, rows * cols) {
        size_t r = i / cols, c = i % cols;
        x[r * ld + c] = ts_bf16_round(x[r * ld + c]);
    }
}

/* Rounds rows × cols floats of x (row stride ld) to bf16 values, in place. */
static ts_status round_rows(float *x, size_t rows, size_t cols, size_t ld) {
    ts_status res = TS_OK;
    LAUNCH_1D(round_rows_kernel, rows * cols, x, rows, cols, ld);
fail:
    return res;
}

/* x[0 .. n) rounded in place, four floats to a 16-byte access where x is 16-byte aligned. */
__global__ static void round_flat_kernel(float *x, size_t n, int vec) {
    size_t groups = vec ? n / 4 : 0;
    GRID_STRIDE(i, groups) {
        float4 v = reinterpret_cast<float4 *>(x)[i];
        v.x = ts_bf16_round(v.x), v.y = ts_bf16_round(v.y), v.z = ts_bf16_round(v.z), v.w = ts_bf16_round(v.w);
        reinterpret_cast<float4 *>(x)[i] = v;
    }
    GRID_STRIDE(i, n - 4 * groups) x[4 * groups + i] = ts_bf16_round(x[4 * groups + i]);
}

static int aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static ts_status round_n(float *x, size_t n) {
    ts_status res = TS_OK;
    int vec = aligned16(x);
    LAUNCH_1D(round_flat_kernel, vec ? n / 4 + n % 4 : n, x, n, vec);
fail:
    return res;
}

/* Rows idx[0 .. n) of x (cols wide) rounded; a row named twice is rounded twice, which changes
 * nothing (rounding is idempotent), so the races of repeated rows write equal values. */
__global__ static void round_indexed_kernel(float *x, const int *idx, size_t n, size_t cols) {
    GRID_STRIDE(i, n * cols) {
        int r = idx[i / cols];
        if (r >= 0) x[(size_t)r * cols + i % cols] = ts_bf16_round(x[(size_t)r * cols + i % cols]);
    }
}

static ts_status round_indexed(float *x, const int *idx, size_t n, size_t cols) {
    ts_status res = TS_OK;
    LAUNCH_1D(round_indexed_kernel, n * cols, x, idx, n, cols);
fail:
    return res;
}

/* A then B (na, nb floats) as bf16 words into dst (na + nb), in one launch; with `vec` (na and nb
 * multiples of 4, A and B 16-byte aligned) four floats to a 16-byte load and an 8-byte store. */
__global__ static void to_bf16_kernel(ts_bf16 *dst, const float *A, size_t na, const float *B, size_t nb, int vec) {
    if (!vec) {
        GRID_STRIDE(i, na + nb) dst[i] = ts_bf16_from_float(i < na ? A[i] : B[i - na]);
        return;
    }
    size_t ga = na / 4;
    GRID_STRIDE(i, ga + nb / 4) {
        float4 v = i < ga ? reinterpret_cast<const float4 *>(A)[i] : reinterpret_cast<const float4 *>(B)[i - ga];
        uint2 w = make_uint2(ts_bf16_from_float(v.x).bits | (unsigned)ts_bf16_from_float(v.y).bits << 16,
                             ts_bf16_from_float(v.z).bits | (unsigned)ts_bf16_from_float(v.w).bits << 16);
        reinterpret_cast<uint2 *>(dst)[i] = w;
    }
}

static const ts_kernels *fp32(void) { return ts_kernels_cuda(); }

/* ---- linear: bf16 GEMM operands in stream-ordered scratch ---------------------------------------- */

/* A and B (na, nb floats) as bf16 words in one scratch allocation *buf, then the row-major GEMM
 * C (M, N, fp32) = alpha op(A) op(B) + beta C with fp32 accumulation. */
static ts_status gemm_bf16_operands(int ta, int tb, int M, int N, int K, const float *A, size_t na, int lda,
                                    const float *B, size_t nb, int ldb, float beta, float *C, int ldc) {
    ts_status res = TS_OK;
    ts_bf16 *buf = NULL;
    ts_launch l;
    int vec = na % 4 == 0 && nb % 4 == 0 && aligned16(A) && aligned16(B);
    TS_CUDA_GOTO(cudaMallocAsync((void **)&buf, (na + nb ? na + nb : 1) * sizeof *buf, stream()), res, fail);
    TS_CHECK_GOTO(ts_launch_1d(vec ? (na + nb) / 4 : na + nb, ELEMENT_BLOCK, ELEMENT_MAX_GRID, &l), res, fail);
    to_bf16_kernel<<<l.grid, l.block, 0, stream()>>>(buf, A, na, B, nb, vec);
    TS_LAUNCH_GOTO(to_bf16_kernel, res, fail);
    TS_CHECK_GOTO(ts_cuda_gemm_mixed(TS_DTYPE_BF16, TS_DTYPE_FP32, ta, tb, M, N, K, 1.0f, buf, lda, buf + na, ldb,
                                     beta, C, ldc),
                  res, fail);
fail:
    if (buf) cudaFreeAsync(buf, stream());
    return res;
}

/* The operands of kernels.c's ts_linear_* (as kernel_table_cuda.cu passes them to fp32 cuBLAS). */
static ts_status b_linear_fwd(float *out, const float *in, const float *w, int T, int IC, int OC) {
    TS_CHECK(gemm_bf16_operands(0, 1, T, OC, IC, in, (size_t)T * IC, IC, w, (size_t)OC * IC, IC, 0.0f, out, OC));
    return round_n(out, (size_t)T * OC);
}

static ts_status b_linear_bwd_input(float *din, const float *dout, const float *w, int T, int IC, int OC) {
    TS_CHECK(gemm_bf16_operands(0, 0, T, IC, OC, dout, (size_t)T * OC, OC, w, (size_t)OC * IC, IC, 1.0f, din, IC));
    return round_n(din, (size_t)T * IC);
}

static ts_status b_linear_bwd_weight(float *dw, const float *dout, const float *in, int T, int IC, int OC) {
    return gemm_bf16_operands(1, 0, OC, IC, T, dout, (size_t)T * OC, OC, in, (size_t)T * IC, IC, 1.0f, dw, IC);
}

/* ---- the fp32 kernels, their activations rounded ------------------------------------------------- */

/* One launch each: the kernels' bf16 forms (kernels_cuda.cu), rounding inside. */
#define b_add ts_cuda_add_bf16
#define b_rmsnorm_fwd ts_cuda_rmsnorm_fwd_bf16
#define b_rmsnorm_bwd ts_cuda_rmsnorm_bwd_bf16
#define b_rope_fwd ts_cuda_rope_fwd_bf16
#define b_rope_bwd ts_cuda_rope_bwd_bf16
#define b_swiglu_fwd ts_cuda_swiglu_fwd_bf16
#define b_swiglu_bwd ts_cuda_swiglu_bwd_bf16

/* The others: the fp32 kernel, then a rounding launch. */
static ts_status b_embedding_fwd(float *out, const int *tokens, const float *wte, int v0, int Vs, int T, int C) {
    TS_CHECK(fp32()->embedding_fwd(out, tokens, wte, v0, Vs, T, C));
    return round_n(out, (size_t)T * C);
}

/* The tiled attention, rounding its outputs itself: one launch forward, three backward (D_i, dK
 * and dV, dQ). */
static ts_status b_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                                 const ts_attn_shape *s, float *scratch) {
    (void)scratch;
    return ts_cuda_flash_attention_fwd(out, lse, q, k, v, s, 1);
}

static ts_status b_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                                 const float *v, const float *out, const float *lse, const ts_attn_shape *s) {
    return ts_cuda_flash_attention_bwd(dq, dk, dv, dout, q, k, v, out, lse, s, 1);
}

static ts_status b_attention_merge(float *out, float *lse, const float *out2, const float *lse2, int Tq, int H, int D,
                                   int ldo) {
    TS_CHECK(fp32()->attention_merge(out, lse, out2, lse2, Tq, H, D, ldo));
    return round_rows(out, (size_t)Tq, (size_t)H * D, (size_t)ldo);
}

static ts_status b_router_bwd(float *dlogits, const float *dweight, const float *probs, const int *expert, int T,
                              int E, int K) {
    TS_CHECK(fp32()->router_bwd(dlogits, dweight, probs, expert, T, E, K));
    return round_n(dlogits, (size_t)T * E);
}

static ts_status b_moe_gather_fwd(float *xe, const float *x, const int *slot_token, int n_slots, int C) {
    TS_CHECK(fp32()->moe_gather_fwd(xe, x, slot_token, n_slots, C));
    return round_n(xe, (size_t)n_slots * C);
}

static ts_status b_moe_gather_bwd(float *dx, const float *dxe, const int *slot_token, int n_slots, int C) {
    TS_CHECK(fp32()->moe_gather_bwd(dx, dxe, slot_token, n_slots, C));
    return round_indexed(dx, slot_token, (size_t)n_slots, (size_t)C);
}

static ts_status b_moe_combine_fwd(float *out, const float *ye, const float *weight, const int *slot, int T, int K,
                                   int C) {
    TS_CHECK(fp32()->moe_combine_fwd(out, ye, weight, slot, T, K, C));
    return round_n(out, (size_t)T * C);
}

static ts_status b_moe_combine_bwd(float *dye, float *dweight, const float *dout, const float *ye,
                                   const float *weight, const int *slot, int T, int K, int C) {
    TS_CHECK(fp32()->moe_combine_bwd(dye, dweight, dout, ye, weight, slot, T, K, C));
    return round_indexed(dye, slot, (size_t)T * K, (size_t)C);
}

static ts_status b_ce_bwd(float *dlogits, const float *logits, const float *max, const float *sumexp,
                          const int *targets, int v0, int T, int Vs, float dloss) {
    TS_CHECK(fp32()->ce_bwd(dlogits, logits, max, sumexp, targets, v0, T, Vs, dloss));
    return round_n(dlogits, (size_t)T * Vs);
}

extern "C" const ts_kernels *ts_kernels_cuda_bf16(void) {
    static ts_kernels t;
    if (t.name) return &t;
    t = *fp32(); /* memory ops, fp32 statistics, weight gradients and the optimizer as they are */
#define SET(e) t.e = b_##e;
    TS_KERNELS_BF16_ENTRIES(SET)
#undef SET
    t.name = "cuda-bf16"; /* last: marks the table filled */
    return &t;
}
