/* What the CUDA backend offers beyond the ts_backend table (backend.h): GEMMs in bf16 as well as
 * fp32, the GPU count, the compute stream the kernels run on, and CUDA-event timers for per-op
 * timing. Defined in exec/backend_cuda.cu, so only in CUDA builds (make CUDA=1): include it from
 * .cu files or under #ifdef TS_CUDA. Pointers are device memory unless said otherwise. */
#ifndef TS_BACKEND_CUDA_H
#define TS_BACKEND_CUDA_H

#include <stddef.h>

#include "common/status.h"
#include "models/system.h" /* ts_dtype: the GEMMs take TS_DTYPE_FP32 or TS_DTYPE_BF16 */

/* The number of GPUs this process sees; 0 (and TS_OK) when there is none or no driver, with the
 * CUDA runtime's reason copied to `why` (may be NULL) so the caller can say it. */
ts_status ts_cuda_device_count(int *count, char *why, size_t why_size);

/* Row-major C (M, N) = alpha op(A) op(B) + beta C, A, B and C of `dtype` (TS_DTYPE_FP32, or
 * TS_DTYPE_BF16: 16-bit words of __nv_bfloat16; other dtypes are refused), accumulated in fp32
 * (cublasGemmEx, CUBLAS_COMPUTE_32F), on the current op's stream (ts_cuda_stream). Needs ts_backend_cuda first (it owns the cuBLAS handle). */
ts_status ts_cuda_gemm(ts_dtype dtype, int trans_a, int trans_b, int M, int N, int K, float alpha,
                       const void *A, int lda, const void *B, int ldb, float beta, void *C, int ldc);

/* The same with operands A, B of dtype `ab` and C of dtype `c` (TS_DTYPE_FP32 or TS_DTYPE_BF16;
 * bf16 operands into an fp32 C is Megatron's wgrad into fp32 main_grad, cuBLAS's CUDA_R_16BF A/B
 * with CUDA_R_32F C under CUBLAS_COMPUTE_32F); fp32 operands into bf16 C are refused. */
ts_status ts_cuda_gemm_mixed(ts_dtype ab, ts_dtype c, int trans_a, int trans_b, int M, int N, int K, float alpha,
                             const void *A, int lda, const void *B, int ldb, float beta, void *C, int ldc);

/* The stream the current op runs on as a cudaStream_t (void * keeps this header free of CUDA's):
 * the compute stream, or inside a DP op the DP stream (backend.h op_begin); the kernels launch
 * there. NULL (the legacy default stream) before ts_backend_cuda. */
void *ts_cuda_stream(void);

/* Per-op timing with a pair of CUDA events recorded on the compute stream: start, the op, stop;
 * stop waits for the stop event and gives the GPU time between them in seconds. */
typedef struct ts_cuda_timer ts_cuda_timer;
ts_status ts_cuda_timer_create(ts_cuda_timer **out);
ts_status ts_cuda_timer_start(ts_cuda_timer *t);
ts_status ts_cuda_timer_stop(ts_cuda_timer *t, double *seconds);
void ts_cuda_timer_free(ts_cuda_timer *t); /* NULL is ignored */

/* Copies between host and device memory on the current op's stream, waiting for completion. */
ts_status ts_cuda_to_device(void *dst, const void *src, size_t bytes);
ts_status ts_cuda_to_host(void *dst, const void *src, size_t bytes);

#endif
