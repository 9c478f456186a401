/* GPU timers of gpu_bench.h: bf16 GEMMs through cublasGemmEx, fp8 GEMMs through cublasLtMatmul (scale
 * pointers, fast or split accumulation, the heuristic's algorithm: as Transformer Engine), either
 * writing C or adding into it (a weight gradient into its bf16 or fp32 main_grad), the
 * tiled attention, and an empty kernel's launch. Each owns its buffers, handles and stream (the
 * legacy default stream), times with CUDA events after one warm-up call, and repeats until min_s
 * has passed (at least 3 calls). Inputs are constant small values: speed does not depend on them. */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "exec/kernels_cuda_common.cuh"

extern "C" {
#include "exec/gpu_bench.h"
}

#define TS_CUBLASLT_WORKSPACE_BYTES (32u << 20) /* cuBLASLt's recommended Hopper workspace, 32 MiB */

/* One call of the measured operation. */
typedef ts_status (*timed_fn)(void *ctx);

/* Seconds per call of fn: a warm-up, then batches of calls between two events until min_s;
 * *calls (may be NULL): how many were timed. */
static ts_status time_calls(timed_fn fn, void *ctx, double min_s, double *seconds, int *calls_out) {
    ts_status res = TS_OK;
    cudaEvent_t a = NULL, b = NULL;
    float ms = 0;
    int calls = 0;
    TS_CUDA_GOTO(cudaEventCreate(&a), res, fail);
    TS_CUDA_GOTO(cudaEventCreate(&b), res, fail);
    TS_CHECK_GOTO(fn(ctx), res, fail);
    TS_CUDA_GOTO(cudaDeviceSynchronize(), res, fail);
    for (int batch = 1; calls < 3 || ms * 1e-3 < min_s; batch *= 2) {
        TS_CUDA_GOTO(cudaEventRecord(a, 0), res, fail);
        for (int i = 0; i < batch; i++) TS_CHECK_GOTO(fn(ctx), res, fail);
        TS_CUDA_GOTO(cudaEventRecord(b, 0), res, fail);
        TS_CUDA_GOTO(cudaEventSynchronize(b), res, fail);
        float t = 0;
        TS_CUDA_GOTO(cudaEventElapsedTime(&t, a, b), res, fail);
        ms += t;
        calls += batch;
    }
    *seconds = ms * 1e-3 / calls;
    if (calls_out) *calls_out = calls;
fail:
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    return res;
}

/* Device buffer of `bytes` filled with the byte `fill` (0x3c: small positive values in bf16 and fp8). */
static ts_status dev_buffer(size_t bytes, int fill, void **out) {
    ts_status res = TS_OK;
    *out = NULL;
    TS_CUDA_GOTO(cudaMalloc(out, bytes ? bytes : 1), res, fail);
    TS_CUDA_GOTO(cudaMemset(*out, fill, bytes), res, fail);
fail:
    return res;
}

/* ---- GEMMs ------------------------------------------------------------------------------------- */

typedef struct {
    const ts_gpu_gemm_shape *g;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo; /* fp8: cuBLASLt's first heuristic choice, picked once */
    cudaDataType_t c_type;     /* C's dtype: bf16, or fp32 for an fp32 main_grad */
    float beta;                /* 1: C accumulates the product (a weight gradient into main_grad) */
    void *A, *B, *C, *ws;
    float *scale; /* fp8: the per-tensor scale of A and of B (1.0), device memory */
} gemm_ctx;

/* Column-major C (m × n) = A^T B with A stored (k × m) and B (k × n): the "TN" layout both cuBLAS
 * paths accept (cuBLASLt's fp8 GEMMs require it on Hopper). */
static ts_status gemm_bf16_call(void *p) {
    gemm_ctx *c = (gemm_ctx *)p;
    ts_status res = TS_OK;
    float one = 1.0f;
    TS_CUBLAS_GOTO(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, c->g->m, c->g->n, c->g->k, &one, c->A, CUDA_R_16BF,
                                c->g->k, c->B, CUDA_R_16BF, c->g->k, &c->beta, c->C, c->c_type, c->g->m,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   res, fail);
fail:
    return res;
}

static ts_status gemm_fp8_call(void *p) {
    gemm_ctx *c = (gemm_ctx *)p;
    ts_status res = TS_OK;
    float one = 1.0f;
    TS_CUBLAS_GOTO(cublasLtMatmul(c->lt, c->op, &one, c->A, c->la, c->B, c->lb, &c->beta, c->C, c->lc, c->C, c->lc,
                                  &c->algo, c->ws, TS_CUBLASLT_WORKSPACE_BYTES, 0),
                   res, fail);
fail:
    return res;
}

/* The fp8 matmul's descriptors: E4M3 A (k × m, transposed) and B (k × n), C (m × n) of c->c_type, the
 * scale pointers, fast accumulation or not (gpu_bench.h), and the heuristic's first algorithm. */
static ts_status fp8_layouts(gemm_ctx *c, int fast_accum) {
    ts_status res = TS_OK;
    cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    int8_t fast = fast_accum != 0;
    const float one = 1.0f;
    uint64_t ws = TS_CUBLASLT_WORKSPACE_BYTES;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t best = {};
    int found = 0;
    TS_CUDA_GOTO(cudaMalloc((void **)&c->scale, sizeof one), res, fail);
    TS_CUDA_GOTO(cudaMemcpy(c->scale, &one, sizeof one, cudaMemcpyHostToDevice), res, fail);
    TS_CUBLAS_GOTO(cublasLtCreate(&c->lt), res, fail);
    TS_CUBLAS_GOTO(cublasLtMatmulDescCreate(&c->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), res, fail);
    TS_CUBLAS_GOTO(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t), res, fail);
    TS_CUBLAS_GOTO(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n), res, fail);
    TS_CUBLAS_GOTO(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &c->scale, sizeof c->scale),
                   res, fail);
    TS_CUBLAS_GOTO(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &c->scale, sizeof c->scale),
                   res, fail);
    TS_CUBLAS_GOTO(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast), res, fail);
    TS_CUBLAS_GOTO(cublasLtMatrixLayoutCreate(&c->la, CUDA_R_8F_E4M3, c->g->k, c->g->m, c->g->k), res, fail);
    TS_CUBLAS_GOTO(cublasLtMatrixLayoutCreate(&c->lb, CUDA_R_8F_E4M3, c->g->k, c->g->n, c->g->k), res, fail);
    TS_CUBLAS_GOTO(cublasLtMatrixLayoutCreate(&c->lc, c->c_type, c->g->m, c->g->n, c->g->m), res, fail);
    TS_CUBLAS_GOTO(cublasLtMatmulPreferenceCreate(&pref), res, fail);
    TS_CUBLAS_GOTO(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                   res, fail);
    TS_CUBLAS_GOTO(cublasLtMatmulAlgoGetHeuristic(c->lt, c->op, c->la, c->lb, c->lc, c->lc, pref, 1, &best, &found), res,
                   fail);
    if (found < 1) {
        res = TS_FAIL(TS_ERR_EXTERNAL, "gpu gemm timer: cuBLASLt has no fp8 algorithm for m %d n %d k %d", c->g->m,
                      c->g->n, c->g->k);
        goto fail;
    }
    c->algo = best.algo;
fail:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    return res;
}

static void gemm_ctx_free(gemm_ctx *c) {
    if (c->la) cublasLtMatrixLayoutDestroy(c->la);
    if (c->lb) cublasLtMatrixLayoutDestroy(c->lb);
    if (c->lc) cublasLtMatrixLayoutDestroy(c->lc);
    if (c->op) cublasLtMatmulDescDestroy(c->op);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    cudaFree(c->A), cudaFree(c->B), cudaFree(c->C), cudaFree(c->ws), cudaFree(c->scale);
}

extern "C" ts_status ts_gpu_describe(char *name, size_t name_size, int *cc_major, int *cc_minor) {
    ts_status res = TS_OK;
    cudaDeviceProp p;
    int dev = 0;
    TS_CUDA_GOTO(cudaGetDevice(&dev), res, fail);
    TS_CUDA_GOTO(cudaGetDeviceProperties(&p, dev), res, fail);
    snprintf(name, name_size, "%s", p.name);
    *cc_major = p.major;
    *cc_minor = p.minor;
fail:
    return res;
}

/* Seconds per call of one GEMM of `g` in bf16 or fp8 (fast_accum: fp8 only) into C of c_dtype
 * (bf16 or fp32), beta 0 or 1; *calls may be NULL. */
static ts_status time_gemm(ts_dtype dtype, const ts_gpu_gemm_shape *g, int fast_accum, ts_dtype c_dtype, float beta,
                           double min_s, double *seconds, int *calls) {
    ts_status res = TS_OK;
    gemm_ctx c = {};
    c.g = g;
    c.c_type = c_dtype == TS_DTYPE_FP32 ? CUDA_R_32F : CUDA_R_16BF;
    c.beta = beta;
    char name[256];
    int major = 0, minor = 0;
    if (dtype != TS_DTYPE_BF16 && dtype != TS_DTYPE_FP8)
        return TS_FAIL(TS_ERR_INPUT, "gpu gemm timer: dtype %s, expected bf16 or fp8", ts_dtype_names[dtype]);
    if (c_dtype != TS_DTYPE_BF16 && c_dtype != TS_DTYPE_FP32)
        return TS_FAIL(TS_ERR_INPUT, "gpu gemm timer: output dtype %s, expected bf16 or fp32", ts_dtype_names[c_dtype]);
    TS_CHECK(ts_gpu_describe(name, sizeof name, &major, &minor));
    if (dtype == TS_DTYPE_FP8 && major * 10 + minor < 89)
        return TS_FAIL(TS_ERR_INPUT, "gpu gemm timer: fp8 needs compute capability 8.9+, %s is %d.%d", name, major,
                       minor);
    size_t in = dtype == TS_DTYPE_FP8 ? 1 : 2;
    TS_CHECK_GOTO(dev_buffer((size_t)g->k * g->m * in, 0x3c, &c.A), res, fail);
    TS_CHECK_GOTO(dev_buffer((size_t)g->k * g->n * in, 0x3c, &c.B), res, fail);
    TS_CHECK_GOTO(dev_buffer((size_t)g->m * g->n * (c_dtype == TS_DTYPE_FP32 ? 4 : 2), 0, &c.C), res, fail);
    if (dtype == TS_DTYPE_BF16) {
        TS_CUBLAS_GOTO(cublasCreate(&c.blas), res, fail);
        TS_CHECK_GOTO(time_calls(gemm_bf16_call, &c, min_s, seconds, calls), res, fail);
    } else {
        TS_CHECK_GOTO(dev_buffer(TS_CUBLASLT_WORKSPACE_BYTES, 0, &c.ws), res, fail);
        TS_CHECK_GOTO(fp8_layouts(&c, fast_accum), res, fail);
        TS_CHECK_GOTO(time_calls(gemm_fp8_call, &c, min_s, seconds, calls), res, fail);
    }
fail:
    gemm_ctx_free(&c);
    return res;
}

extern "C" ts_status ts_gpu_time_gemm(ts_dtype dtype, const ts_gpu_gemm_shape *g, double min_s, double *seconds) {
    return time_gemm(dtype, g, 0, TS_DTYPE_BF16, 0.0f, min_s, seconds, NULL);
}

extern "C" ts_status ts_gpu_time_gemm_fp8(const ts_gpu_gemm_shape *g, int fast_accum, double min_s, double *seconds,
                                          int *calls) {
    return time_gemm(TS_DTYPE_FP8, g, fast_accum, TS_DTYPE_BF16, 0.0f, min_s, seconds, calls);
}

extern "C" ts_status ts_gpu_time_wgrad(ts_dtype dtype, const ts_gpu_gemm_shape *g, ts_dtype grad_dtype, int accumulate,
                                       double min_s, double *seconds) {
    return time_gemm(dtype, g, 0, grad_dtype, accumulate ? 1.0f : 0.0f, min_s, seconds, NULL);
}

/* ---- attention and launch latency ---------------------------------------------------------------- */

typedef struct {
    ts_attn_shape s;
    int bwd;
    float *q, *k, *v, *out, *lse, *dq, *dk, *dv;
} attn_ctx;

static ts_status attn_call(void *p) {
    attn_ctx *c = (attn_ctx *)p;
    if (!c->bwd) return ts_cuda_flash_attention_fwd(c->out, c->lse, c->q, c->k, c->v, &c->s, 0);
    return ts_cuda_flash_attention_bwd(c->dq, c->dk, c->dv, c->out, c->q, c->k, c->v, c->out, c->lse, &c->s, 0);
}

extern "C" ts_status ts_gpu_time_attention(const ts_gpu_attn_shape *a, int bwd, double min_s, double *seconds) {
    ts_status res = TS_OK;
    attn_ctx c = {};
    int *pos = NULL, *gpos = NULL;
    size_t rows = (size_t)a->seq * a->batch, nq = rows * a->heads * a->head_dim, nk = rows * a->kv_heads * a->head_dim;
    pos = (int *)malloc(rows * sizeof *pos);
    TS_ALLOC_GOTO(pos, res, fail);
    for (size_t i = 0; i < rows; i++) pos[i] = (int)(i % a->seq);
    TS_CUDA_GOTO(cudaMalloc((void **)&gpos, rows * sizeof *gpos), res, fail);
    TS_CUDA_GOTO(cudaMemcpy(gpos, pos, rows * sizeof *gpos, cudaMemcpyHostToDevice), res, fail);
    {
        float **bufs[] = {&c.q, &c.out, &c.dq, &c.k, &c.v, &c.dk, &c.dv};
        for (int i = 0; i < 7; i++) TS_CHECK_GOTO(dev_buffer((i < 3 ? nq : nk) * 4, 0, (void **)bufs[i]), res, fail);
        TS_CHECK_GOTO(dev_buffer(rows * a->heads * 4, 0, (void **)&c.lse), res, fail);
    }
    c.s = (ts_attn_shape){a->seq, a->seq, a->heads, a->kv_heads, a->head_dim, a->heads * a->head_dim,
                          a->kv_heads * a->head_dim, a->kv_heads * a->head_dim, a->heads * a->head_dim, gpos, gpos,
                          a->batch};
    c.bwd = 0;
    TS_CHECK_GOTO(attn_call(&c), res, fail); /* the backward reads a real lse */
    c.bwd = bwd;
    TS_CHECK_GOTO(time_calls(attn_call, &c, min_s, seconds, NULL), res, fail);
fail:
    free(pos);
    cudaFree(gpos);
    float *bufs[] = {c.q, c.k, c.v, c.out, c.lse, c.dq, c.dk, c.dv};
    for (int i = 0; i < 8; i++) cudaFree(bufs[i]);
    return res;
}

__global__ static void empty_kernel(void) {}

static ts_status launch_call(void *p) {
    ts_status res = TS_OK;
    (void)p;
    empty_kernel<<<1, 32>>>();
    TS_LAUNCH_GOTO(empty_kernel, res, fail);
fail:
    return res;
}

extern "C" ts_status ts_gpu_time_launch(double *seconds) { return time_calls(launch_call, NULL, 0.05, seconds, NULL); }
