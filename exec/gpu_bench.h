/* What `calibrate --device cuda` and bench/gpu_targets.c measure on a GPU beyond the executor's
 * own kernels: the shapes (plain C, tested on every machine: tests/test_gpu_bench.c) and the timers
 * (exec/gpu_bench.cu, CUDA builds only; elsewhere they fail with "built without CUDA").
 *
 * Grids:
 *   - GEMMs in bf16 (cublasGemmEx, CUDA_R_16BF, CUBLAS_COMPUTE_32F) and fp8 (cublasLtMatmul,
 *     CUDA_R_8F_E4M3 operands, bf16 output, fp32 accumulation; compute capability 8.9+): squares
 *     1024..8192 (a GPU needs 8192-sized GEMMs to reach its peak; docs/gpu.md) and the GEMMs of a
 *     Llama-3.2-1B layer at 8192 tokens (hidden 2048, 32 heads of 64 over 8 kv heads, SwiGLU
 *     8192: QKV 2048→3072, out 2048→2048, gate+up 2048→16384, down 8192→2048; Meta's
 *     Llama-3.2-1B config.json) and its LM head (vocab 128256);
 *   - attention fwd and bwd, causal, at FlashAttention-2's benchmark shapes (Dao-AILab/flash-attention
 *     README, "Performance": head dim 64 or 128, hidden 2048 so 32 or 16 heads, sequence 512 .. 16k,
 *     batch 16k / sequence), whose best H100 figure is 335 TFLOP/s (Dao 2023, Sec. 4.1, Fig. 7);
 *   - the launch latency of an empty kernel.
 * FLOPs are FlashAttention-2's convention (its benchmark script): forward 4 · seq² · D · heads ·
 * batch, halved when causal; backward 2.5 × forward; a GEMM 2 m n k. */
#ifndef TS_GPU_BENCH_H
#define TS_GPU_BENCH_H

#include "common/status.h"
#include "models/system.h" /* ts_dtype */

typedef struct {
    int m, n, k;
    const char *what; /* "square", "qkv", "out", "gate+up", "down", "lm-head" */
} ts_gpu_gemm_shape;

typedef struct {
    int seq, batch, heads, kv_heads, head_dim;
} ts_gpu_attn_shape;

#define TS_GPU_GEMM_MAX 16
#define TS_GPU_ATTN_MAX 16

/* The GEMM grid (quick: fewer squares, the 1B layer's GEMMs kept) into out (TS_GPU_GEMM_MAX);
 * returns the count. */
int ts_gpu_gemm_grid(int quick, ts_gpu_gemm_shape *out);
/* The m, n and k values of `tessera calibrate --device cuda`'s GEMM grids (exec/calibrate.c: every
 * (m, n, k) of them, the bf16 grid and the fp8 one), 64 .. 8192 (quick: 64 .. 4096); returns how many. */
int ts_gpu_calib_dims(int quick, const int **dims);

/* The fp8 grid of `tessera calibrate --device cuda` (TS_GPU_FP8_GRID_MAX): every (m, n, k) of
 * ts_gpu_calib_dims, as the bf16 grid (so the two are measured at the same shapes), then the shapes
 * of ts_gpu_gemm_grid not among them (the Llama-3.2-1B layer's training GEMMs); returns the count. */
#define TS_GPU_FP8_GRID_MAX 134 /* 5³ + TS_GPU_GEMM_MAX's 9 */
int ts_gpu_fp8_grid(int quick, ts_gpu_gemm_shape *out);

/* The attention grid (quick: sequences 1k and 4k only) into out (TS_GPU_ATTN_MAX). */
int ts_gpu_attn_grid(int quick, ts_gpu_attn_shape *out);

double ts_gpu_gemm_flops(const ts_gpu_gemm_shape *g);
/* Forward (bwd = 0) or backward (bwd = 1) FLOPs of causal attention, FlashAttention-2's count. */
double ts_gpu_attn_flops(const ts_gpu_attn_shape *a, int bwd);

/* ---- timers (CUDA builds; TS_ERR_INPUT "built without CUDA (make CUDA=1)" elsewhere) ---- */

/* Seconds per call of a GEMM of dtype TS_DTYPE_BF16 or TS_DTYPE_FP8 (others refused; fp8 refused
 * below compute capability 8.9), averaged over calls filling at least min_s after a warm-up. Owns
 * its buffers and handles, so it needs no backend. */
ts_status ts_gpu_time_gemm(ts_dtype dtype, const ts_gpu_gemm_shape *g, double min_s, double *seconds);
/* Seconds per call of an fp8 GEMM as Transformer Engine issues one (transformer_engine/common/gemm/
 * cublaslt_gemm.cu): cublasLtMatmul, E4M3 A and B in the "TN" layout (the only one Hopper's fp8
 * tensor cores take), per-tensor scales through CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER (device
 * floats), bf16 output, fp32 accumulation, the algorithm cuBLASLt's heuristic ranks first with a
 * 32 MiB workspace, picked once. fast_accum sets CUBLASLT_MATMUL_DESC_FAST_ACCUM: Transformer
 * Engine's forward GEMM runs with it, the two backward GEMMs without (split accumulator,
 * module/base.py _2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD = True). *calls: how many
 * were timed. Refused below compute capability 8.9. */
ts_status ts_gpu_time_gemm_fp8(const ts_gpu_gemm_shape *g, int fast_accum, double min_s, double *seconds, int *calls);
/* Seconds per call of a weight-gradient GEMM as Megatron-Core's gradient-accumulation fusion issues
 * it: C(m × n) = A·B over k added into the weight's main_grad (beta = 1) of `grad_dtype`
 * (TS_DTYPE_BF16 or TS_DTYPE_FP32), or, with accumulate = 0, written fresh (beta = 0) in that dtype.
 * The operands are `dtype`: bf16 through cublasGemmEx, fp8 through cublasLtMatmul as
 * ts_gpu_time_gemm_fp8 issues it with split accumulation (Transformer Engine v1.11
 * module/linear.py's backward: fp8_gemm(out=weight.main_grad, accumulate=True,
 * use_split_accumulator=_2X_ACC_WGRAD) under fuse_wgrad_accumulation). The pair says what reading
 * and writing main_grad adds to the GEMM. Refused as ts_gpu_time_gemm refuses. */
ts_status ts_gpu_time_wgrad(ts_dtype dtype, const ts_gpu_gemm_shape *g, ts_dtype grad_dtype, int accumulate,
                            double min_s, double *seconds);
/* Seconds per call of the tiled attention (exec/kernels_cuda_flash.cu) forward (bwd = 0) or
 * backward (bwd = 1) on a causal batch of shape a. */
ts_status ts_gpu_time_attention(const ts_gpu_attn_shape *a, int bwd, double min_s, double *seconds);
/* Seconds from one launch of an empty kernel to the next, back to back on one stream. */
ts_status ts_gpu_time_launch(double *seconds);
/* The GPU's name and compute capability (this process's current device: the one the CUDA backend
 * picked for the rank, device 0 before it). */
ts_status ts_gpu_describe(char *name, size_t name_size, int *cc_major, int *cc_minor);

#endif
