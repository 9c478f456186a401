/* The CUDA kernel table (see kernel_table.h): exec/kernels_cuda.h's kernels, the linear layers as
 * fp32 cuBLAS GEMMs (ts_cuda_gemm, the operands of kernels.c's ts_linear_*), and memory ops on the
 * current op's stream (ts_cuda_stream: compute, or DP inside a gradient reduction or parameter
 * gather), so each op's work stays in order with its collectives (backend_cuda.cu orders the
 * streams). */
#include "exec/kernels_cuda_common.cuh"

/* ---- memory ------------------------------------------------------------------------------------ */

static ts_status cuda_zero(void *p, size_t bytes) {
    ts_status res = TS_OK;
    if (bytes) TS_CUDA_GOTO(cudaMemsetAsync(p, 0, bytes, stream()), res, fail);
fail:
    return res;
}

static ts_status cuda_copy(void *dst, const void *src, size_t bytes) {
    ts_status res = TS_OK;
    if (bytes) TS_CUDA_GOTO(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), res, fail);
fail:
    return res;
}

static ts_status cuda_copy_rows(float *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows,
                                size_t cols) {
    ts_status res = TS_OK;
    if (rows && cols)
        TS_CUDA_GOTO(cudaMemcpy2DAsync(dst, ld_dst * sizeof *dst, src, ld_src * sizeof *src, cols * sizeof *dst, rows,
                                       cudaMemcpyDeviceToDevice, stream()),
                     res, fail);
fail:
    return res;
}

/* Host copies wait for the stream: the host reads (or reuses) its side right after. */
static ts_status cuda_to_host(void *host_dst, const void *src, size_t bytes) {
    return bytes ? ts_cuda_to_host(host_dst, src, bytes) : TS_OK;
}

static ts_status cuda_to_device(void *dst, const void *host_src, size_t bytes) {
    return bytes ? ts_cuda_to_device(dst, host_src, bytes) : TS_OK;
}

/* ---- linear: kernels.c's ts_linear_* on cuBLAS ------------------------------------------------- */

static ts_status cuda_linear_fwd(float *out, const float *in, const float *w, int T, int IC, int OC) {
    return ts_cuda_gemm(TS_DTYPE_FP32, 0, 1, T, OC, IC, 1.0f, in, IC, w, IC, 0.0f, out, OC);
}

static ts_status cuda_linear_bwd_input(float *din, const float *dout, const float *w, int T, int IC, int OC) {
    return ts_cuda_gemm(TS_DTYPE_FP32, 0, 0, T, IC, OC, 1.0f, dout, OC, w, IC, 1.0f, din, IC);
}

static ts_status cuda_linear_bwd_weight(float *dw, const float *dout, const float *in, int T, int IC, int OC) {
    return ts_cuda_gemm(TS_DTYPE_FP32, 1, 0, OC, IC, T, 1.0f, dout, OC, in, IC, 1.0f, dw, IC);
}

/* The attention kernel keeps no scores, so the CPU's scratch is not needed. */
static ts_status cuda_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                                    const ts_attn_shape *s, float *scratch) {
    (void)scratch;
    return ts_cuda_attention_fwd(out, lse, q, k, v, s);
}

extern "C" const ts_kernels *ts_kernels_cuda(void) {
    static ts_kernels cuda;
    if (cuda.name) return &cuda;
    cuda.zero = cuda_zero;
    cuda.copy = cuda_copy;
    cuda.copy_rows = cuda_copy_rows;
    cuda.to_host = cuda_to_host;
    cuda.to_device = cuda_to_device;
    cuda.add = ts_cuda_add;
    cuda.linear_fwd = cuda_linear_fwd;
    cuda.linear_bwd_input = cuda_linear_bwd_input;
    cuda.linear_bwd_weight = cuda_linear_bwd_weight;
    cuda.rmsnorm_fwd = ts_cuda_rmsnorm_fwd;
    cuda.rmsnorm_bwd = ts_cuda_rmsnorm_bwd;
    cuda.embedding_fwd = ts_cuda_embedding_fwd;
    cuda.embedding_bwd = ts_cuda_embedding_bwd;
    cuda.rope_fwd = ts_cuda_rope_fwd;
    cuda.rope_bwd = ts_cuda_rope_bwd;
    cuda.attention_fwd = cuda_attention_fwd;
    cuda.attention_bwd = ts_cuda_attention_bwd;
    cuda.attention_merge = ts_cuda_attention_merge;
    cuda.swiglu_fwd = ts_cuda_swiglu_fwd;
    cuda.swiglu_bwd = ts_cuda_swiglu_bwd;
    cuda.router_fwd = ts_cuda_router_fwd;
    cuda.router_bwd = ts_cuda_router_bwd;
    cuda.moe_gather_fwd = ts_cuda_moe_gather_fwd;
    cuda.moe_gather_bwd = ts_cuda_moe_gather_bwd;
    cuda.moe_combine_fwd = ts_cuda_moe_combine_fwd;
    cuda.moe_combine_bwd = ts_cuda_moe_combine_bwd;
    cuda.ce_max = ts_cuda_ce_max;
    cuda.ce_sums = ts_cuda_ce_sums;
    cuda.ce_loss = ts_cuda_ce_loss;
    cuda.ce_bwd = ts_cuda_ce_bwd;
    cuda.adamw = ts_cuda_adamw;
    cuda.name = "cuda"; /* last: marks the table filled */
    return &cuda;
}
