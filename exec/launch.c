/* Launch configurations, the GEMM operand mapping and GPU selection (see launch.h). */
#include "exec/launch.h"

#ifdef TS_CUDA
#include "exec/backend_cuda.h"
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>

ts_status ts_launch_1d(size_t n, int block, unsigned max_grid, ts_launch *out) {
    if (block < 32 || block > TS_LAUNCH_MAX_BLOCK || block % 32 != 0)
        return TS_FAIL(TS_ERR_INPUT, "launch: block of %d threads, expected a multiple of 32 in [32, %d]",
                       block, TS_LAUNCH_MAX_BLOCK);
    if (max_grid < 1 || max_grid > TS_LAUNCH_MAX_GRID)
        return TS_FAIL(TS_ERR_INPUT, "launch: max_grid %u, expected 1 to %u", max_grid, TS_LAUNCH_MAX_GRID);
    size_t blocks = n / (size_t)block + (n % (size_t)block != 0);
    out->block = (unsigned)block;
    out->grid = blocks > max_grid ? max_grid : (unsigned)blocks;
    return TS_OK;
}

ts_status ts_launch_rows(int rows, int cols, int max_block, ts_launch *out) {
    if (max_block < 32 || max_block > TS_LAUNCH_MAX_BLOCK || (max_block & (max_block - 1)) != 0)
        return TS_FAIL(TS_ERR_INPUT, "launch: max_block %d, expected a power of two in [32, %d]",
                       max_block, TS_LAUNCH_MAX_BLOCK);
    if (rows < 0 || cols < 0)
        return TS_FAIL(TS_ERR_INPUT, "launch: %d rows of %d columns, expected both >= 0", rows, cols);
    unsigned block = 32;
    while ((int)block < cols && (int)block < max_block) block *= 2;
    out->block = block;
    out->grid = cols == 0 ? 0u : (unsigned)rows;
    return TS_OK;
}

size_t ts_launch_smem(const ts_launch *l, size_t per_thread_bytes) {
    return (size_t)l->block * per_thread_bytes;
}

/* The least leading dimension of a row-major operand stored `cols` wide. */
static int ld_min(int cols) { return cols > 1 ? cols : 1; }

ts_status ts_gemm_colmajor(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc,
                           ts_gemm_cm *out) {
    if (M < 0 || N < 0 || K < 0)
        return TS_FAIL(TS_ERR_INPUT, "gemm: dimensions M=%d N=%d K=%d, expected all >= 0", M, N, K);
    /* Row-major op(A) is M x K: A is stored M x K (K wide) or, transposed, K x M (M wide). */
    int a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
    if (lda < ld_min(a_cols))
        return TS_FAIL(TS_ERR_INPUT, "gemm: lda=%d, expected at least %d (A is %s)", lda, ld_min(a_cols),
                       trans_a ? "K x M, transposed" : "M x K");
    if (ldb < ld_min(b_cols))
        return TS_FAIL(TS_ERR_INPUT, "gemm: ldb=%d, expected at least %d (B is %s)", ldb, ld_min(b_cols),
                       trans_b ? "N x K, transposed" : "K x N");
    if (ldc < ld_min(N)) return TS_FAIL(TS_ERR_INPUT, "gemm: ldc=%d, expected at least %d (N)", ldc, ld_min(N));
    out->trans_first = trans_b != 0;
    out->trans_second = trans_a != 0;
    out->m = N;
    out->n = M;
    out->k = K;
    out->ld_first = ldb;
    out->ld_second = lda;
    out->ld_c = ldc;
    return TS_OK;
}

ts_status ts_device_parse(const char *name, ts_device *out) {
    if (name && strcmp(name, "cpu") == 0) {
        *out = TS_DEVICE_CPU;
        return TS_OK;
    }
    if (name && strcmp(name, "cuda") == 0) {
        *out = TS_DEVICE_CUDA;
        return TS_OK;
    }
    return TS_FAIL(TS_ERR_INPUT, "--device: expected cpu or cuda, got \"%s\"", name ? name : "");
}

const char *ts_device_name(ts_device d) { return d == TS_DEVICE_CUDA ? "cuda" : "cpu"; }

int ts_cuda_built(void) {
#ifdef TS_CUDA
    return 1;
#else
    return 0;
#endif
}

int ts_cuda_gpu_count(void) {
#ifdef TS_CUDA
    int count = 0;
    char why[256];
    return ts_cuda_device_count(&count, why, sizeof why) == TS_OK ? count : 0;
#else
    return 0;
#endif
}

ts_status ts_device_runnable(ts_device d) {
    if (d == TS_DEVICE_CPU) return TS_OK;
#ifdef TS_CUDA
    int count = 0, local = 0, device = 0;
    char why[256];
    TS_CHECK(ts_cuda_device_count(&count, why, sizeof why));
    if (count == 0 && why[0])
        return TS_FAIL(TS_ERR_INPUT, "--device cuda: no CUDA GPU found (%s)", why);
    TS_CHECK(ts_local_rank(&local));
    return ts_cuda_pick_device(local, count, &device);
#else
    return TS_FAIL(TS_ERR_INPUT, "--device cuda: built without CUDA (make CUDA=1)");
#endif
}

ts_status ts_local_rank_parse(const char *var, const char *value, int *out) {
    char *end = NULL;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : -1;
    if (!value || end == value || *end != '\0' || errno != 0 || v < 0 || v > 1000000)
        return TS_FAIL(TS_ERR_INPUT, "%s: expected a local rank (an integer >= 0), got \"%s\"", var,
                       value ? value : "");
    *out = (int)v;
    return TS_OK;
}

ts_status ts_local_rank(int *out) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                                       NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v) return ts_local_rank_parse(vars[i], v, out);
    }
    *out = 0;
    return TS_OK;
}

ts_status ts_cuda_pick_device(int local_rank, int device_count, int *device) {
    if (device_count <= 0)
        return TS_FAIL(TS_ERR_INPUT, "no CUDA GPU found (cudaGetDeviceCount reports %d); "
                                     "run on a GPU node or use --device cpu", device_count);
    if (local_rank < 0)
        return TS_FAIL(TS_ERR_INPUT, "local rank %d, expected >= 0", local_rank);
    if (local_rank >= device_count)
        return TS_FAIL(TS_ERR_INPUT, "local rank %d needs GPU %d but this node has %d GPU(s): "
                                     "start at most %d rank(s) per node (one rank per GPU)",
                       local_rank, local_rank, device_count, device_count);
    *device = local_rank;
    return TS_OK;
}
