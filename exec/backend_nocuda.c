/* The CUDA backend's entry points in builds without CUDA (make without CUDA=1): they fail with
 * "built without CUDA (make CUDA=1)" (the kernel table is NULL), so callers need no #ifdef (see
 * backend.h, kernel_table.h, gpu_bench.h). In CUDA builds exec/backend_cuda.cu,
 * exec/kernel_table_cuda*.cu and exec/gpu_bench.cu define them and this file compiles to nothing but a typedef. */
#include "exec/backend.h"
#include "exec/gpu_bench.h"
#include "exec/kernel_table.h"

#ifndef TS_CUDA

const ts_backend *ts_backend_cuda(ts_comm *world, ts_comm *const *groups, int n_groups) {
    (void)world;
    (void)groups;
    (void)n_groups;
    TS_FAIL(TS_ERR_INPUT, "cuda backend: built without CUDA (make CUDA=1)");
    return NULL;
}

void ts_backend_cuda_free(ts_comm *world, ts_comm *const *groups, int n_groups) {
    (void)world;
    (void)groups;
    (void)n_groups;
}

const ts_kernels *ts_kernels_cuda(void) { return NULL; }

const ts_kernels *ts_kernels_cuda_bf16(void) { return NULL; }

/* exec/gpu_bench.h's timers (exec/gpu_bench.cu in CUDA builds). */
#define NO_CUDA TS_FAIL(TS_ERR_INPUT, "gpu benchmarks: built without CUDA (make CUDA=1)")

ts_status ts_gpu_time_gemm(ts_dtype dtype, const ts_gpu_gemm_shape *g, double min_s, double *seconds) {
    (void)dtype, (void)g, (void)min_s, (void)seconds;
    return NO_CUDA;
}

ts_status ts_gpu_time_gemm_fp8(const ts_gpu_gemm_shape *g, int fast_accum, double min_s, double *seconds, int *calls) {
    (void)g, (void)fast_accum, (void)min_s, (void)seconds, (void)calls;
    return NO_CUDA;
}

ts_status ts_gpu_time_wgrad(ts_dtype dtype, const ts_gpu_gemm_shape *g, ts_dtype grad_dtype, int accumulate,
                            double min_s, double *seconds) {
    (void)dtype, (void)g, (void)grad_dtype, (void)accumulate, (void)min_s, (void)seconds;
    return NO_CUDA;
}

ts_status ts_gpu_time_attention(const ts_gpu_attn_shape *a, int bwd, double min_s, double *seconds) {
    (void)a, (void)bwd, (void)min_s, (void)seconds;
    return NO_CUDA;
}

ts_status ts_gpu_time_launch(double *seconds) {
    (void)seconds;
    return NO_CUDA;
}

ts_status ts_gpu_describe(char *name, size_t name_size, int *cc_major, int *cc_minor) {
    (void)name, (void)name_size, (void)cc_major, (void)cc_minor;
    return NO_CUDA;
}

#else
typedef int ts_backend_nocuda_empty_; /* ISO C: a translation unit is not empty */
#endif
