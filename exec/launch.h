/* The CPU-side half of the CUDA backend, in plain C so it builds and is tested on every machine:
 * kernel launch configurations (grid and block sizes), the mapping of a row-major GEMM onto
 * column-major cuBLAS, GPU selection (one MPI rank per GPU), and the `--device` choice.
 *
 * The .cu files (backend_cuda.cu, kernels_cuda.cu) call these helpers and never compute a grid
 * or an operand order themselves, so what decides how a kernel is launched is unit-tested without
 * a GPU (tests/test_cuda.c). Nothing here allocates. */
#ifndef TS_LAUNCH_H
#define TS_LAUNCH_H

#include <stddef.h>

#include "common/status.h"

/* ---- Launch configurations ------------------------------------------------------------------- */

/* A 1-D launch: `grid` blocks of `block` threads. grid == 0 means there is nothing to do and the
 * caller skips the launch (CUDA rejects empty grids). */
typedef struct {
    unsigned grid, block;
} ts_launch;

#define TS_LAUNCH_MAX_BLOCK 1024      /* threads per block, every GPU since compute capability 2.0 */
#define TS_LAUNCH_MAX_GRID 2147483647u /* blocks in grid x (2^31 - 1) */

/* Element-wise kernels over n items with grid-stride loops: block threads per block (a multiple
 * of 32 in [32, 1024]), grid = ceil(n / block) capped at max_grid (>= 1; the loop covers the
 * rest). Fails (TS_ERR_INPUT, naming the bad value) on a bad block or max_grid. */
ts_status ts_launch_1d(size_t n, int block, unsigned max_grid, ts_launch *out);

/* Row kernels (norms, softmax): one block per row of `cols` items, whose threads stride over the
 * row and reduce with a shared-memory tree. block = the smallest power of two >= cols, clamped to
 * [32, max_block] (max_block a power of two in [32, 1024]); grid = rows. Shared memory needed:
 * ts_launch_smem(block, per_thread) bytes. */
ts_status ts_launch_rows(int rows, int cols, int max_block, ts_launch *out);
size_t ts_launch_smem(const ts_launch *l, size_t per_thread_bytes);

/* ---- Row-major GEMM on column-major cuBLAS ----------------------------------------------------- */

/* cuBLAS is column-major. A row-major matrix read column-major is its transpose, so row-major
 * C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands and the dimensions M and
 * N, keep each operand's own transpose flag and leading dimension. This struct is the cuBLAS call:
 * C(m x n) = op(first) op(second), where first is the row-major call's B and second its A. */
typedef struct {
    int trans_first, trans_second; /* nonzero: CUBLAS_OP_T */
    int m, n, k;
    int ld_first, ld_second, ld_c;
} ts_gemm_cm;

/* Checks a row-major GEMM's arguments (dimensions >= 0; lda >= the stored row length of A,
 * max(1, ta ? M : K); the same for ldb, ldc >= max(1, N)) and fills its column-major call.
 * Errors are TS_ERR_INPUT naming the argument, its value and the least it may be. */
ts_status ts_gemm_colmajor(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc,
                           ts_gemm_cm *out);

/* ---- Devices ----------------------------------------------------------------------------------- */

typedef enum { TS_DEVICE_CPU = 0, TS_DEVICE_CUDA } ts_device;

/* "cpu" or "cuda"; anything else is TS_ERR_INPUT ("--device: expected cpu or cuda, got ..."). */
ts_status ts_device_parse(const char *name, ts_device *out);
/* The name ts_device_parse reads: "cpu" or "cuda". */
const char *ts_device_name(ts_device d);

/* 1 when this build has the CUDA backend (make CUDA=1), else 0. */
int ts_cuda_built(void);

/* The GPUs this process sees (cudaGetDeviceCount); 0 in CPU builds, without a GPU, or when the
 * count cannot be read (callers that need the reason use ts_device_runnable). */
int ts_cuda_gpu_count(void);

/* Whether `tessera run` can train on `d` here. CPU: always. CUDA: in CUDA builds when this
 * process's local rank has a GPU of its own (cudaGetDeviceCount); otherwise TS_ERR_INPUT with
 * "built without CUDA (make CUDA=1)" in CPU builds, "no CUDA GPU found (...)" or too few GPUs for
 * the local rank (ts_cuda_pick_device's message). */
ts_status ts_device_runnable(ts_device d);

/* This process's rank among the ranks of its node, from the launcher's environment
 * (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, in that order); 0 when none is set.
 * A set but malformed value is TS_ERR_INPUT naming the variable. */
ts_status ts_local_rank(int *out);
/* The same parse for one value (exposed for tests): a decimal integer >= 0. */
ts_status ts_local_rank_parse(const char *var, const char *value, int *out);

/* One MPI rank per GPU: local rank r drives GPU r. Fails (TS_ERR_INPUT, the CLI exits 2) when the
 * node has no GPU ("no CUDA GPU found ...") or fewer GPUs than local ranks. */
ts_status ts_cuda_pick_device(int local_rank, int device_count, int *device);

#endif
