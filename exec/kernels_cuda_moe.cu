/* CUDA kernels for mixture-of-experts routing, dispatch (gather by expert) and combine (see
 * kernels_cuda.h): the formulas of exec/kernels.c. Routing is one thread per token (E and K are
 * small); gather and combine are element-wise over (row, column); the scatters back to tokens
 * (the gather's backward) run one thread per column over the slots in order, as the CPU loop
 * adds them, so they need no atomics and sum in the CPU's order. The dispatch plan itself
 * (ts_moe_plan) stays on the host, which needs its counts for the all-to-alls. */
#include <math.h>

#include "exec/kernels_cuda_common.cuh"
#include "exec/router_token.h"

/* ---- routing ------------------------------------------------------------------------------------ */

/* Softmax, then the K largest probabilities (ties to the lower index), renormalised. */
__global__ static void router_fwd_kernel(float *probs, int *expert, float *weight, const float *logits, int T,
                                         int E, int K, int G, int M) {
    GRID_STRIDE(t, (size_t)T) {
        ts_router_token(logits + t * E, probs + t * E, expert + t * K, weight + t * K, E, K, G, M);
    }
}

/* Through the renormalisation, then the softmax (kernels.c's derivation). */
__global__ static void router_bwd_kernel(float *dlogits, const float *dweight, const float *probs,
                                         const int *expert, int T, int E, int K) {
    GRID_STRIDE(t, (size_t)T) {
        ts_router_token_bwd(dlogits + t * E, dweight + t * K, probs + t * E, expert + t * K, E, K);
    }
}

static ts_status router_check(const char *what, int T, int E, int K) {
    if (T < 0 || E < 1 || K < 1 || K > E)
        return TS_FAIL(TS_ERR_INPUT, "cuda %s: T=%d E=%d K=%d, expected T >= 0 and 1 <= K <= E", what, T, E, K);
    return TS_OK;
}

extern "C" ts_status ts_cuda_router_fwd(float *probs, int *expert, float *weight, const float *logits, int T, int E,
                                        int K, int G, int M) {
    ts_status res = TS_OK;
    TS_CHECK(router_check("router_fwd", T, E, K));
    LAUNCH_1D(router_fwd_kernel, (size_t)T, probs, expert, weight, logits, T, E, K, G, M);
fail:
    return res;
}

extern "C" ts_status ts_cuda_router_bwd(float *dlogits, const float *dweight, const float *probs, const int *expert,
                                        int T, int E, int K) {
    ts_status res = TS_OK;
    TS_CHECK(router_check("router_bwd", T, E, K));
    LAUNCH_1D(router_bwd_kernel, (size_t)T, dlogits, dweight, probs, expert, T, E, K);
fail:
    return res;
}

/* ---- dispatch: rows gathered by slot ------------------------------------------------------------ */

__global__ static void moe_gather_fwd_kernel(float *xe, const float *x, const int *slot_token, int n_slots, int C) {
    GRID_STRIDE(e, (size_t)n_slots * C) {
        size_t s = e / C, c = e % C;
        xe[e] = x[(size_t)slot_token[s] * C + c];
    }
}

/* One thread per column, over the slots in order (a token holds K slots). */
__global__ static void moe_gather_bwd_kernel(float *dx, const float *dxe, const int *slot_token, int n_slots, int C) {
    GRID_STRIDE(c, (size_t)C) {
        for (int s = 0; s < n_slots; s++) dx[(size_t)slot_token[s] * C + c] += dxe[(size_t)s * C + c];
    }
}

extern "C" ts_status ts_cuda_moe_gather_fwd(float *xe, const float *x, const int *slot_token, int n_slots, int C) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("moe_gather_fwd", n_slots, C));
    LAUNCH_1D(moe_gather_fwd_kernel, (size_t)n_slots * C, xe, x, slot_token, n_slots, C);
fail:
    return res;
}

extern "C" ts_status ts_cuda_moe_gather_bwd(float *dx, const float *dxe, const int *slot_token, int n_slots, int C) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("moe_gather_bwd", n_slots, C));
    if (n_slots == 0) return TS_OK;
    LAUNCH_1D(moe_gather_bwd_kernel, (size_t)C, dx, dxe, slot_token, n_slots, C);
fail:
    return res;
}

/* ---- combine: weighted sum of each token's expert rows ----------------------------------------- */

__global__ static void moe_combine_fwd_kernel(float *out, const float *ye, const float *weight, const int *slot,
                                              int T, int K, int C) {
    GRID_STRIDE(e, (size_t)T * C) {
        size_t t = e / C, c = e % C;
        float o = 0.0f;
        for (int a = 0; a < K; a++) o += weight[t * K + a] * ye[(size_t)slot[t * K + a] * C + c];
        out[e] = o;
    }
}

/* dye: each slot is one (token, choice), so every element has one writer. */
__global__ static void moe_combine_bwd_rows_kernel(float *dye, const float *dout, const float *weight,
                                                   const int *slot, int T, int K, int C) {
    GRID_STRIDE(e, (size_t)T * K * C) {
        size_t ta = e / C, c = e % C, t = ta / K;
        dye[(size_t)slot[ta] * C + c] += weight[ta] * dout[t * C + c];
    }
}

/* dweight: one thread per (token, choice), the dot product in the CPU's order. */
__global__ static void moe_combine_bwd_weight_kernel(float *dweight, const float *dout, const float *ye,
                                                     const int *slot, int T, int K, int C) {
    GRID_STRIDE(ta, (size_t)T * K) {
        const float *g = dout + ta / K * C, *y = ye + (size_t)slot[ta] * C;
        float s = 0.0f;
        for (int c = 0; c < C; c++) s += g[c] * y[c];
        dweight[ta] += s;
    }
}

static ts_status combine_check(const char *what, int T, int K, int C) {
    if (T < 0 || K < 1 || C < 0)
        return TS_FAIL(TS_ERR_INPUT, "cuda %s: T=%d K=%d C=%d, expected T, C >= 0 and K >= 1", what, T, K, C);
    return TS_OK;
}

extern "C" ts_status ts_cuda_moe_combine_fwd(float *out, const float *ye, const float *weight, const int *slot, int T,
                                             int K, int C) {
    ts_status res = TS_OK;
    TS_CHECK(combine_check("moe_combine_fwd", T, K, C));
    LAUNCH_1D(moe_combine_fwd_kernel, (size_t)T * C, out, ye, weight, slot, T, K, C);
fail:
    return res;
}

static ts_status combine_bwd_rows(float *dye, const float *dout, const float *weight, const int *slot, int T, int K,
                                  int C) {
    ts_status res = TS_OK;
    LAUNCH_1D(moe_combine_bwd_rows_kernel, (size_t)T * K * C, dye, dout, weight, slot, T, K, C);
fail:
    return res;
}

static ts_status combine_bwd_weight(float *dweight, const float *dout, const float *ye, const int *slot, int T,
                                    int K, int C) {
    ts_status res = TS_OK;
    LAUNCH_1D(moe_combine_bwd_weight_kernel, (size_t)T * K, dweight, dout, ye, slot, T, K, C);
fail:
    return res;
}

extern "C" ts_status ts_cuda_moe_combine_bwd(float *dye, float *dweight, const float *dout, const float *ye,
                                             const float *weight, const int *slot, int T, int K, int C) {
    TS_CHECK(combine_check("moe_combine_bwd", T, K, C));
    TS_CHECK(combine_bwd_rows(dye, dout, weight, slot, T, K, C));
    return combine_bwd_weight(dweight, dout, ye, slot, T, K, C);
}
