/* One token's MoE routing, shared by the CPU kernel (exec/kernels.c ts_router_fwd) and its CUDA
 * twin (exec/kernels_cuda_moe.cu), so the two cannot drift: softmax of the token's E router
 * logits z into p, the K most probable experts into sel (ties to the lower index), and their
 * probabilities renormalised over the K into w. Header-only; a host and device function under
 * nvcc. */
#ifndef TS_ROUTER_TOKEN_H
#define TS_ROUTER_TOKEN_H

#include <math.h>

#ifdef __CUDACC__
#define TS_HOST_DEVICE __host__ __device__
#else
#define TS_HOST_DEVICE
#endif

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

#endif
