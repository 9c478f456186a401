/* CUDA kernels for the vocab-parallel embedding and cross-entropy (see kernels_cuda.h): the
 * formulas of exec/kernels.c on a vocabulary slice [v0, v0 + Vs). Row reductions (max, sum of
 * exponentials) run one block per row with the shared-memory trees of kernels_cuda_common.cuh;
 * the embedding's backward adds each column's rows in token order, as the CPU loop does. */
#include <math.h>

#include "exec/kernels_cuda_common.cuh"

/* ---- embedding --------------------------------------------------------------------------------- */

__global__ static void embedding_fwd_kernel(float *out, const int *tokens, const float *wte, int v0, int Vs,
                                            int T, int C) {
    GRID_STRIDE(e, (size_t)T * C) {
        size_t t = e / C, c = e % C;
        int row = tokens[t] - v0;
        out[e] = row >= 0 && row < Vs ? wte[(size_t)row * C + c] : 0.0f;
    }
}

/* One thread per column c, over the tokens in order: a token seen twice adds twice, in the CPU's
 * order, without atomics. */
__global__ static void embedding_bwd_kernel(float *dwte, const float *dout, const int *tokens, int v0, int Vs,
                                            int T, int C) {
    GRID_STRIDE(c, (size_t)C) {
        for (int t = 0; t < T; t++) {
            int row = tokens[t] - v0;
            if (row < 0 || row >= Vs) continue;
            dwte[(size_t)row * C + c] += dout[(size_t)t * C + c];
        }
    }
}

static ts_status vocab_check(const char *what, int T, int Vs, int C) {
    if (T < 0 || Vs < 0 || C < 0)
        return TS_FAIL(TS_ERR_INPUT, "cuda %s: T=%d Vs=%d C=%d, expected all >= 0", what, T, Vs, C);
    return TS_OK;
}

extern "C" ts_status ts_cuda_embedding_fwd(float *out, const int *tokens, const float *wte, int v0, int Vs, int T,
                                           int C) {
    ts_status res = TS_OK;
    TS_CHECK(vocab_check("embedding_fwd", T, Vs, C));
    LAUNCH_1D(embedding_fwd_kernel, (size_t)T * C, out, tokens, wte, v0, Vs, T, C);
fail:
    return res;
}

extern "C" ts_status ts_cuda_embedding_bwd(float *dwte, const float *dout, const int *tokens, int v0, int Vs, int T,
                                           int C) {
    ts_status res = TS_OK;
    TS_CHECK(vocab_check("embedding_bwd", T, Vs, C));
    if (T == 0) return TS_OK;
    LAUNCH_1D(embedding_bwd_kernel, (size_t)C, dwte, dout, tokens, v0, Vs, T, C);
fail:
    return res;
}

/* ---- cross-entropy ----------------------------------------------------------------------------- */

__global__ static void ce_max_kernel(float *max, const float *logits, int Vs) {
    extern __shared__ double sh[];
    const float *z = logits + (size_t)blockIdx.x * Vs;
    double m = -INFINITY;
    for (int j = threadIdx.x; j < Vs; j += blockDim.x) m = fmax(m, (double)z[j]);
    m = block_max(m, sh);
    if (threadIdx.x == 0) max[blockIdx.x] = (float)m;
}

__global__ static void ce_sums_kernel(float *sumexp, float *target_logit, const float *logits, const float *max,
                                      const int *targets, int v0, int Vs) {
    extern __shared__ double sh[];
    size_t t = blockIdx.x;
    const float *z = logits + t * Vs;
    double s = 0;
    for (int j = threadIdx.x; j < Vs; j += blockDim.x) s += exp((double)z[j] - max[t]);
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        sumexp[t] = (float)s;
        int j = targets[t] - v0;
        target_logit[t] = j >= 0 && j < Vs ? z[j] : 0.0f;
    }
}

__global__ static void ce_loss_kernel(float *loss, const float *max, const float *sumexp, const float *target_logit,
                                      int T) {
    GRID_STRIDE(t, (size_t)T) loss[t] = max[t] + logf(sumexp[t]) - target_logit[t];
}

/* Element-wise: each thread reads its logit before it writes the gradient there (in place). */
__global__ static void ce_bwd_kernel(float *dlogits, const float *logits, const float *max, const float *sumexp,
                                     const int *targets, int v0, int T, int Vs, float dloss) {
    GRID_STRIDE(e, (size_t)T * Vs) {
        size_t t = e / Vs;
        int j = (int)(e % Vs);
        float p = expf(logits[e] - max[t]) / sumexp[t];
        dlogits[e] = dloss * (p - (v0 + j == targets[t] ? 1.0f : 0.0f));
    }
}

extern "C" ts_status ts_cuda_ce_max(float *max, const float *logits, int T, int Vs) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("ce_max", T, Vs));
    LAUNCH_ROWS(ce_max_kernel, T, Vs, max, logits, Vs);
fail:
    return res;
}

extern "C" ts_status ts_cuda_ce_sums(float *sumexp, float *target_logit, const float *logits, const float *max,
                                     const int *targets, int v0, int T, int Vs) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("ce_sums", T, Vs));
    LAUNCH_ROWS(ce_sums_kernel, T, Vs, sumexp, target_logit, logits, max, targets, v0, Vs);
fail:
    return res;
}

extern "C" ts_status ts_cuda_ce_loss(float *loss, const float *max, const float *sumexp, const float *target_logit,
                                     int T) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("ce_loss", T, 0));
    LAUNCH_1D(ce_loss_kernel, (size_t)T, loss, max, sumexp, target_logit, T);
fail:
    return res;
}

extern "C" ts_status ts_cuda_ce_bwd(float *dlogits, const float *logits, const float *max, const float *sumexp,
                                    const int *targets, int v0, int T, int Vs, float dloss) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("ce_bwd", T, Vs));
    LAUNCH_1D(ce_bwd_kernel, (size_t)T * Vs, dlogits, logits, max, sumexp, targets, v0, T, Vs, dloss);
fail:
    return res;
}
