/* One token's MoE routing and its backward, shared by the CPU kernel (exec/kernels.c ts_router_fwd) and its CUDA
 * twin (exec/kernels_cuda_moe.cu), so the two cannot drift: softmax of the token's E router
 * logits z into p, the K most probable experts into sel (ties to the lower index), and their
 * probabilities renormalised over the K into w. Header-only; a host and device function under
 * nvcc. */
#ifndef TS_ROUTER_TOKEN_H
#define TS_ROUTER_TOKEN_H

#include <math.h>

#include "common/host_device.h"

static inline TS_HOST_DEVICE void ts_router_token(const float *z, float *p, int *sel, float *w, int E, int K) {
    float zmax = -INFINITY, sum = 0.0f;
    for (int e = 0; e < E; e++) zmax = fmaxf(zmax, z[e]);
    for (int e = 0; e < E; e++) {
        p[e] = expf(z[e] - zmax);
        sum += p[e];
    }
    for (int e = 0; e < E; e++) p[e] /= sum;
    float picked = 0.0f;
    for (int a = 0; a < K; a++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int b = 0; b < a; b++) taken |= sel[b] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        sel[a] = best;
        picked += p[best];
    }
    for (int a = 0; a < K; a++) w[a] = p[sel[a]] / picked;
}

/* Its backward (exec/kernels.h ts_router_bwd): dz (E) += the gradient of the K weights `dw`
 * through the renormalisation, then the softmax, for the experts `sel` chosen with probabilities p. */
static inline TS_HOST_DEVICE void ts_router_token_bwd(float *dz, const float *dw, const float *p, const int *sel,
                                                       int E, int K) {
    float picked = 0.0f, dw_dot_w = 0.0f;
    for (int a = 0; a < K; a++) picked += p[sel[a]];
    for (int a = 0; a < K; a++) dw_dot_w += dw[a] * p[sel[a]] / picked;
    float p_dot_dp = 0.0f;
    for (int a = 0; a < K; a++) p_dot_dp += p[sel[a]] * (dw[a] - dw_dot_w) / picked;
    for (int e = 0; e < E; e++) dz[e] -= p[e] * p_dot_dp;
    for (int a = 0; a < K; a++) dz[sel[a]] += p[sel[a]] * (dw[a] - dw_dot_w) / picked;
}

#endif
