/* One token's MoE routing and its backward, shared by the CPU kernel (exec/kernels.c ts_router_fwd) and its CUDA
 * twin (exec/kernels_cuda_moe.cu), so the two cannot drift: softmax of the token's E router
 * logits z into p, the K most probable experts into sel (ties to the lower index), and their
 * probabilities renormalised over the K into w. Node-limited (group-limited) routing, DeepSeek-V3
 * §2.1.2 (DeepSeek-V2 §2.2.3 device-limited; Megatron-Core --moe-router-num-groups and
 * --moe-router-group-topk): with G > 1 groups of E/G consecutive experts and M < G, the K come
 * only from the M groups whose two most probable experts' sum is highest (the one when a group
 * holds one; ties to the lower group), so a token's experts lie on at most M groups' ranks.
 * Header-only; a host and device function under nvcc. */
#ifndef TS_ROUTER_TOKEN_H
#define TS_ROUTER_TOKEN_H

#include <math.h>

#include "common/host_device.h"

/* Group g's score: the sum of its two largest probabilities (its one, for a group of one). */
static inline TS_HOST_DEVICE float ts_router_group_score(const float *p, int g, int size) {
    float a = -1.0f, b = -1.0f;
    for (int e = g * size; e < (g + 1) * size; e++) {
        if (p[e] > a) b = a, a = p[e];
        else if (p[e] > b) b = p[e];
    }
    return size > 1 ? a + b : a;
}

/* Whether expert e's group is among the M best of G (always when there is no limit). */
static inline TS_HOST_DEVICE int ts_router_allowed(const float *p, int e, int E, int G, int M) {
    if (G <= 1 || M >= G) return 1;
    int size = E / G, g = e / size, better = 0;
    float mine = ts_router_group_score(p, g, size);
    for (int o = 0; o < G; o++) {
        float s = ts_router_group_score(p, o, size);
        better += s > mine || (s == mine && o < g);
    }
    return better < M;
}

static inline TS_HOST_DEVICE void ts_router_token(const float *z, float *p, int *sel, float *w, int E, int K, int G,
                                                  int M) {
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
            if (!taken && (best < 0 || p[e] > p[best]) && ts_router_allowed(p, e, E, G, M)) best = e;
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
