/* What the kernel files of exec/ share (kernels_cuda.cu, kernels_cuda_vocab.cu,
 * kernels_cuda_moe.cu): the current op's stream, the grid-stride loop, a block-wide sum and max, and
 * a row shape check, and the launch macros that take their grids from exec/launch.h and check the launch
 * (TS_LAUNCH_GOTO). The macros return TS_OK for empty work and jump to the caller's `fail` label
 * with `res` set on a launch error. Included by .cu files only. */
#ifndef TS_KERNELS_CUDA_COMMON_CUH
#define TS_KERNELS_CUDA_COMMON_CUH

#include "exec/cuda_check.cuh"

#define ELEMENT_BLOCK 256
#define ELEMENT_MAX_GRID 65535u
/* Threads per row of the row kernels (norms, the cross-entropy's max and sums): 256, so that each
 * thread of a 2048-wide row takes 8 columns; 1024 threads of 2 columns each ran Llama-3.2-1B's
 * RMSNorm (4096 × 2048) in 0.34 ms on an H100, 15 times its 67 MB at the calibrated 3.07 TB/s. */
#define ROW_MAX_BLOCK 256

static inline cudaStream_t stream(void) { return (cudaStream_t)ts_cuda_stream(); }

#define GRID_STRIDE(i, n)                                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

/* Sums v over the block into every thread's result (blockDim.x a multiple of 32, sh of
 * blockDim.x / 32 doubles): shuffles within each warp, then every thread adds the warps' sums in
 * warp order, so the result is the same on every thread and every run; two barriers, where a tree
 * over shared memory took one per halving (ten at 1024 threads). */
__device__ static inline double block_sum(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    double r = 0;
    for (unsigned w = 0; w < blockDim.x / 32; w++) r += sh[w];
    __syncthreads();
    return r;
}

/* The same for the maximum. */
__device__ static inline double block_max(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    double r = sh[0];
    for (unsigned w = 1; w < blockDim.x / 32; w++) r = fmax(r, sh[w]);
    __syncthreads();
    return r;
}

/* A row kernel's shape: "cuda <what>: T=.. C=.., expected both >= 0". */
static inline ts_status rows_check(const char *what, int T, int C) {
    if (T < 0 || C < 0) return TS_FAIL(TS_ERR_INPUT, "cuda %s: T=%d C=%d, expected both >= 0", what, T, C);
    return TS_OK;
}

/* Launches an element-wise kernel over n items on the current op's stream (nothing for n == 0). */
#define LAUNCH_1D(kernel, n, ...)                                                                  \
    do {                                                                                           \
        ts_launch l_;                                                                              \
        TS_CHECK(ts_launch_1d((n), ELEMENT_BLOCK, ELEMENT_MAX_GRID, &l_));                         \
        if (l_.grid == 0) return TS_OK;                                                            \
        kernel<<<l_.grid, l_.block, 0, stream()>>>(__VA_ARGS__);                                   \
        TS_LAUNCH_GOTO(kernel, res, fail);                                                         \
    } while (0)

/* Launches a row kernel, one block per row, with a double per thread of shared memory. */
#define LAUNCH_ROWS(kernel, T, C, ...)                                                             \
    do {                                                                                           \
        ts_launch l_;                                                                              \
        TS_CHECK(ts_launch_rows((T), (C), ROW_MAX_BLOCK, &l_));                                    \
        if (l_.grid == 0) return TS_OK;                                                            \
        kernel<<<l_.grid, l_.block, ts_launch_smem(&l_, sizeof(double)), stream()>>>(__VA_ARGS__); \
        TS_LAUNCH_GOTO(kernel, res, fail);                                                         \
    } while (0)

#endif
