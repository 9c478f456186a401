/* CUDA kernels for the transformer's element-wise, norm, rotary, attention and optimizer ops (see
 * kernels_cuda.h): the formulas of exec/kernels.c, one GPU thread per element, row or (query,
 * head). Plain kernels meant to be right and readable, the GPU twin of the CPU reference, not
 * tuned ones: element-wise ops use grid-stride loops, row ops one block per row with a
 * shared-memory tree reduction, attention one warp per (query, head) or (key, kv head) with an
 * online softmax (Milakov & Gimelshein 2018). Grids and blocks come from exec/launch.h through the launch macros
 * of kernels_cuda_common.cuh. The embedding and cross-entropy are in kernels_cuda_vocab.cu, the
 * MoE routing, dispatch and combine in kernels_cuda_moe.cu. */
#include <math.h>

#include "common/bf16.h"
#include "exec/kernels_cuda_common.cuh"

unsigned long long ts_cuda_launch_count_ = 0;

extern "C" unsigned long long ts_cuda_launches(void) { return ts_cuda_launch_count_; }

/* B = 1 gives a kernel's bf16 mixed-precision form for kernel_table_cuda_bf16.cu, rounding where
 * kernel_table_cpu_bf16.c rounds but inside the one launch: weights read as their bf16 copies,
 * activations and activation gradients written as bf16 values (fp32 storage); B = 0 is fp32. */
template <int B> __device__ static inline float bf(float x) { return B ? ts_bf16_round(x) : x; }

/* ---- element-wise ------------------------------------------------------------------------------ */

template <int B> __global__ static void add_kernel(float *out, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) out[i] = bf<B>(a[i] + b[i]);
}

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */

__global__ static void gelu_fwd_kernel(float *out, const float *x, size_t n) {
    GRID_STRIDE(i, n) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v)));
    }
}

__global__ static void gelu_bwd_kernel(float *dx, const float *dout, const float *x, size_t n) {
    GRID_STRIDE(i, n) {
        float v = x[i], u = GELU_K * (v + 0.044715f * v * v * v), t = tanhf(u);
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] += dout[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
}

template <int B> __global__ static void swiglu_fwd_kernel(float *act, const float *gate, const float *up, size_t n) {
    GRID_STRIDE(i, n) {
        float g = gate[i];
        act[i] = bf<B>(g / (1.0f + expf(-g)) * up[i]);
    }
}

template <int B>
__global__ static void swiglu_bwd_kernel(float *dgate, float *dup, const float *dact, const float *gate,
                                         const float *up, size_t n) {
    GRID_STRIDE(i, n) {
        float g = gate[i], sig = 1.0f / (1.0f + expf(-g)), da = dact[i], u = up[i];
        dgate[i] = bf<B>(da * u * sig * (1.0f + g * (1.0f - sig)));
        dup[i] = bf<B>(da * g * sig);
    }
}

__global__ static void adamw_kernel(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                                    float b1, float b2, float eps, float wd, float c1, float c2) {
    GRID_STRIDE(i, n) {
        float gr = grad[i];
        float mi = b1 * m[i] + (1.0f - b1) * gr, vi = b2 * v[i] + (1.0f - b2) * gr * gr;
        m[i] = mi;
        v[i] = vi;
        param[i] -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * param[i]);
    }
}

template <int B> static ts_status add_t(float *out, const float *a, const float *b, size_t n) {
    ts_status res = TS_OK;
    LAUNCH_1D(add_kernel<B>, n, out, a, b, n);
fail:
    return res;
}

extern "C" ts_status ts_cuda_add(float *out, const float *a, const float *b, size_t n) { return add_t<0>(out, a, b, n); }
extern "C" ts_status ts_cuda_add_bf16(float *out, const float *a, const float *b, size_t n) {
    return add_t<1>(out, a, b, n);
}

extern "C" ts_status ts_cuda_gelu_fwd(float *out, const float *x, size_t n) {
    ts_status res = TS_OK;
    LAUNCH_1D(gelu_fwd_kernel, n, out, x, n);
fail:
    return res;
}

extern "C" ts_status ts_cuda_gelu_bwd(float *dx, const float *dout, const float *x, size_t n) {
    ts_status res = TS_OK;
    LAUNCH_1D(gelu_bwd_kernel, n, dx, dout, x, n);
fail:
    return res;
}

template <int B> static ts_status swiglu_fwd_t(float *act, const float *gate, const float *up, size_t n) {
    ts_status res = TS_OK;
    LAUNCH_1D(swiglu_fwd_kernel<B>, n, act, gate, up, n);
fail:
    return res;
}

template <int B>
static ts_status swiglu_bwd_t(float *dgate, float *dup, const float *dact, const float *gate, const float *up,
                              size_t n) {
    ts_status res = TS_OK;
    LAUNCH_1D(swiglu_bwd_kernel<B>, n, dgate, dup, dact, gate, up, n);
fail:
    return res;
}

extern "C" ts_status ts_cuda_swiglu_fwd(float *act, const float *gate, const float *up, size_t n) {
    return swiglu_fwd_t<0>(act, gate, up, n);
}
extern "C" ts_status ts_cuda_swiglu_fwd_bf16(float *act, const float *gate, const float *up, size_t n) {
    return swiglu_fwd_t<1>(act, gate, up, n);
}
extern "C" ts_status ts_cuda_swiglu_bwd(float *dgate, float *dup, const float *dact, const float *gate,
                                        const float *up, size_t n) {
    return swiglu_bwd_t<0>(dgate, dup, dact, gate, up, n);
}
extern "C" ts_status ts_cuda_swiglu_bwd_bf16(float *dgate, float *dup, const float *dact, const float *gate,
                                             const float *up, size_t n) {
    return swiglu_bwd_t<1>(dgate, dup, dact, gate, up, n);
}

extern "C" ts_status ts_cuda_adamw(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                                   float beta1, float beta2, float eps, float weight_decay, int step) {
    ts_status res = TS_OK;
    if (step < 1) return TS_FAIL(TS_ERR_INPUT, "cuda adamw: step %d, expected >= 1 (1-based)", step);
    float c1 = 1.0f - powf(beta1, (float)step), c2 = 1.0f - powf(beta2, (float)step);
    LAUNCH_1D(adamw_kernel, n, param, m, v, grad, n, lr, beta1, beta2, eps, weight_decay, c1, c2);
fail:
    return res;
}

/* ---- norms: one block per row -------------------------------------------------------------------- */

template <int B>
__global__ static void rmsnorm_fwd_kernel(float *out, float *rstd, const float *x, const float *w, int C,
                                          float eps) {
    extern __shared__ double sh[];
    const float *xt = x + (size_t)blockIdx.x * C;
    float *ot = out + (size_t)blockIdx.x * C;
    double ss = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ss += (double)xt[c] * xt[c];
    ss = block_sum(ss, sh);
    float r = (float)(1.0 / sqrt(ss / C + eps));
    for (int c = threadIdx.x; c < C; c += blockDim.x) ot[c] = bf<B>(xt[c] * r * bf<B>(w[c]));
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

/* The weight gradient stays fp32 in both forms (Megatron's main_grad). */
template <int B>
__global__ static void rmsnorm_bwd_kernel(float *dx, float *dw, const float *dout, const float *x,
                                          const float *w, const float *rstd, int C) {
    extern __shared__ double sh[];
    size_t off = (size_t)blockIdx.x * C;
    float r = rstd[blockIdx.x];
    double dot = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dot += (double)dout[off + c] * bf<B>(w[c]) * x[off + c];
    float mean = (float)(block_sum(dot, sh) / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float xc = x[off + c], gc = dout[off + c];
        dx[off + c] = bf<B>(dx[off + c] + r * (bf<B>(w[c]) * gc - xc * r * r * mean));
        atomicAdd(&dw[c], gc * xc * r);
    }
}

__global__ static void layernorm_fwd_kernel(float *out, float *mean, float *rstd, const float *x,
                                            const float *w, const float *b, int C, float eps) {
    extern __shared__ double sh[];
    const float *xt = x + (size_t)blockIdx.x * C;
    float *ot = out + (size_t)blockIdx.x * C;
    double s = 0, ss = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += xt[c];
    double mu = block_sum(s, sh) / C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ss += (xt[c] - mu) * (xt[c] - mu);
    float r = (float)(1.0 / sqrt(block_sum(ss, sh) / C + eps)), m = (float)mu;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ot[c] = (xt[c] - m) * r * w[c] + b[c];
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = m;
        rstd[blockIdx.x] = r;
    }
}

__global__ static void layernorm_bwd_kernel(float *dx, float *dw, float *db, const float *dout, const float *x,
                                            const float *w, const float *mean, const float *rstd, int C) {
    extern __shared__ double sh[];
    size_t off = (size_t)blockIdx.x * C;
    float m = mean[blockIdx.x], r = rstd[blockIdx.x];
    double sg = 0, sgx = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float gc = dout[off + c] * w[c], xh = (x[off + c] - m) * r;
        sg += gc;
        sgx += (double)gc * xh;
    }
    float mg = (float)(block_sum(sg, sh) / C), mgx = (float)(block_sum(sgx, sh) / C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float d = dout[off + c], xh = (x[off + c] - m) * r;
        dx[off + c] += r * (d * w[c] - mg - xh * mgx);
        atomicAdd(&dw[c], d * xh);
        atomicAdd(&db[c], d);
    }
}

template <int B>
static ts_status rmsnorm_fwd_t(float *out, float *rstd, const float *x, const float *w, int T, int C, float eps) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("rmsnorm_fwd", T, C));
    LAUNCH_ROWS(rmsnorm_fwd_kernel<B>, T, C, out, rstd, x, w, C, eps);
fail:
    return res;
}

template <int B>
static ts_status rmsnorm_bwd_t(float *dx, float *dw, const float *dout, const float *x, const float *w,
                               const float *rstd, int T, int C) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("rmsnorm_bwd", T, C));
    LAUNCH_ROWS(rmsnorm_bwd_kernel<B>, T, C, dx, dw, dout, x, w, rstd, C);
fail:
    return res;
}

extern "C" ts_status ts_cuda_rmsnorm_fwd(float *out, float *rstd, const float *x, const float *w, int T, int C,
                                         float eps) {
    return rmsnorm_fwd_t<0>(out, rstd, x, w, T, C, eps);
}
extern "C" ts_status ts_cuda_rmsnorm_fwd_bf16(float *out, float *rstd, const float *x, const float *w, int T, int C,
                                              float eps) {
    return rmsnorm_fwd_t<1>(out, rstd, x, w, T, C, eps);
}
extern "C" ts_status ts_cuda_rmsnorm_bwd(float *dx, float *dw, const float *dout, const float *x,
                                         const float *w, const float *rstd, int T, int C) {
    return rmsnorm_bwd_t<0>(dx, dw, dout, x, w, rstd, T, C);
}
extern "C" ts_status ts_cuda_rmsnorm_bwd_bf16(float *dx, float *dw, const float *dout, const float *x,
                                              const float *w, const float *rstd, int T, int C) {
    return rmsnorm_bwd_t<1>(dx, dw, dout, x, w, rstd, T, C);
}

extern "C" ts_status ts_cuda_layernorm_fwd(float *out, float *mean, float *rstd, const float *x, const float *w,
                                           const float *b, int T, int C, float eps) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("layernorm_fwd", T, C));
    LAUNCH_ROWS(layernorm_fwd_kernel, T, C, out, mean, rstd, x, w, b, C, eps);
fail:
    return res;
}

extern "C" ts_status ts_cuda_layernorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x,
                                           const float *w, const float *mean, const float *rstd, int T, int C) {
    ts_status res = TS_OK;
    TS_CHECK(rows_check("layernorm_bwd", T, C));
    LAUNCH_ROWS(layernorm_bwd_kernel, T, C, dx, dw, db, dout, x, w, mean, rstd, C);
fail:
    return res;
}

/* ---- rotary ------------------------------------------------------------------------------------- */

/* One thread per (row, head, pair i < D/2); the angle in double as in kernels.c. */
template <int B>
__global__ static void rope_kernel(float *x, int ldx, const int *pos, int T, int H, int D, float theta,
                                   float sign) {
    int half = D / 2;
    size_t n = (size_t)T * H * half;
    GRID_STRIDE(e, n) {
        int i = (int)(e % half), h = (int)(e / half % H), t = (int)(e / half / H);
        double angle = pos[t] * pow((double)theta, -2.0 * i / D);
        float c = (float)cos(angle), s = sign * (float)sin(angle);
        float *xh = x + (size_t)t * ldx + (size_t)h * D;
        float a = xh[i], b = xh[i + half];
        xh[i] = bf<B>(a * c - b * s);
        xh[i + half] = bf<B>(b * c + a * s);
    }
}

template <int B>
static ts_status rope(float *x, int ldx, const int *pos, int T, int H, int D, float theta, float sign) {
    ts_status res = TS_OK;
    if (T < 0 || H < 0 || D < 0 || D % 2 != 0 || ldx < H * D)
        return TS_FAIL(TS_ERR_INPUT, "cuda rope: T=%d H=%d D=%d ldx=%d, expected D even and ldx >= H*D", T, H, D,
                       ldx);
    LAUNCH_1D(rope_kernel<B>, (size_t)T * H * (D / 2), x, ldx, pos, T, H, D, theta, sign);
fail:
    return res;
}

extern "C" ts_status ts_cuda_rope_fwd(float *x, int ldx, const int *pos, int T, int H, int D, float theta) {
    return rope<0>(x, ldx, pos, T, H, D, theta, 1.0f);
}
extern "C" ts_status ts_cuda_rope_fwd_bf16(float *x, int ldx, const int *pos, int T, int H, int D, float theta) {
    return rope<1>(x, ldx, pos, T, H, D, theta, 1.0f);
}
extern "C" ts_status ts_cuda_rope_bwd(float *dx, int ldx, const int *pos, int T, int H, int D, float theta) {
    return rope<0>(dx, ldx, pos, T, H, D, theta, -1.0f);
}
extern "C" ts_status ts_cuda_rope_bwd_bf16(float *dx, int ldx, const int *pos, int T, int H, int D, float theta) {
    return rope<1>(dx, ldx, pos, T, H, D, theta, -1.0f);
}

/* ---- attention ---------------------------------------------------------------------------------- */

/* Attention runs one warp per (query, head) forward and for dq, one warp per (key, kv head) for dk
 * and dv: the lanes split the head dimension (element d on lane d % 32), so rows are read
 * coalesced and a dot product is a lane-local sum and a butterfly over the warp. The butterfly
 * leaves the same sum on every lane (each pairwise add is commutative), so the online softmax's
 * branches are the same on all lanes. The backward needs no atomics: every output row has one
 * warp, so it is deterministic (FlashAttention-2's split of dq from dk, dv; Dao 2023, Sec. 3.1). */
#define WARP 32
#define ATTN_PER_LANE (TS_CUDA_ATTN_MAX_D / WARP) /* head elements per lane, in registers */

__device__ static inline float warp_sum(float v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* This lane's elements of a row of D into registers (0 past D). */
__device__ static inline void lane_load(float *r, const float *row, int D, int lane) {
#pragma unroll
    for (int c = 0; c < ATTN_PER_LANE; c++) r[c] = c * WARP + lane < D ? row[c * WARP + lane] : 0.0f;
}

/* r · row over the warp (r this lane's registers). */
__device__ static inline float warp_dot(const float *r, const float *row, int D, int lane) {
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < ATTN_PER_LANE; c++)
        if (c * WARP + lane < D) s += r[c] * row[c * WARP + lane];
    return warp_sum(s);
}

/* The dot product of two rows over the warp. */
__device__ static inline float row_dot(const float *a, const float *b, int D, int lane) {
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < ATTN_PER_LANE; c++)
        if (c * WARP + lane < D) s += a[c * WARP + lane] * b[c * WARP + lane];
    return warp_sum(s);
}

/* r += a · row, this lane's elements. */
__device__ static inline void lane_axpy(float *r, float a, const float *row, int D, int lane) {
#pragma unroll
    for (int c = 0; c < ATTN_PER_LANE; c++)
        if (c * WARP + lane < D) r[c] += a * row[c * WARP + lane];
}

/* row += r, this lane's elements. */
__device__ static inline void lane_add(float *row, const float *r, int D, int lane) {
#pragma unroll
    for (int c = 0; c < ATTN_PER_LANE; c++)
        if (c * WARP + lane < D) row[c * WARP + lane] += r[c];
}

/* out accumulates in registers with an online softmax, rescaled whenever the running max grows
 * (Milakov & Gimelshein 2018). */
__global__ static void attention_fwd_kernel(float *out, float *lse, const float *q, const float *k,
                                            const float *v, ts_attn_shape s) {
    int D = s.D, group = s.H / s.KV;
    float scale = rsqrtf((float)D);
    GRID_STRIDE(t, (size_t)ts_attn_batch(&s) * s.Tq * s.H * WARP) {
        size_t e = t / WARP; /* the block is a multiple of 32 threads: a warp shares e */
        int lane = (int)(t % WARP);
        int i = (int)(e / s.H), h = (int)(e % s.H), j0 = i / s.Tq * s.Tk; /* its sequence's keys */
        size_t kv_off = (size_t)(h / group) * D;
        float qr[ATTN_PER_LANE], o[ATTN_PER_LANE] = {0};
        lane_load(qr, q + (size_t)i * s.ldq + (size_t)h * D, D, lane);
        float m = -INFINITY, sum = 0.0f;
        for (int j = j0; j < j0 + s.Tk; j++) {
            if (s.k_pos[j] > s.q_pos[i]) continue;
            float sc = scale * warp_dot(qr, k + (size_t)j * s.ldk + kv_off, D, lane);
            if (sc > m) {
                float a = m == -INFINITY ? 0.0f : expf(m - sc);
#pragma unroll
                for (int c = 0; c < ATTN_PER_LANE; c++) o[c] *= a;
                sum *= a;
                m = sc;
            }
            float p = expf(sc - m);
            lane_axpy(o, p, v + (size_t)j * s.ldv + kv_off, D, lane);
            sum += p;
        }
        float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
        float *oi = out + (size_t)i * s.ldo + (size_t)h * D;
#pragma unroll
        for (int c = 0; c < ATTN_PER_LANE; c++)
            if (c * WARP + lane < D) oi[c * WARP + lane] = o[c] * inv;
        if (lane == 0) lse[e] = sum == 0.0f ? -INFINITY : m + logf(sum);
    }
}

/* FlashAttention-2's backward (Dao 2023, Alg. 2), dq half: per (query, head), over the keys it
 * sees, p = exp(scale q·k - lse), ds = p (dout·v - dout·out), dq += ds scale k. */
__global__ static void attention_bwd_dq_kernel(float *dq, const float *dout, const float *q, const float *k,
                                               const float *v, const float *out, const float *lse,
                                               ts_attn_shape s) {
    int D = s.D, group = s.H / s.KV;
    float scale = rsqrtf((float)D);
    GRID_STRIDE(t, (size_t)ts_attn_batch(&s) * s.Tq * s.H * WARP) {
        size_t e = t / WARP; /* the block is a multiple of 32 threads: a warp shares e */
        int lane = (int)(t % WARP);
        int i = (int)(e / s.H), h = (int)(e % s.H), j0 = i / s.Tq * s.Tk;
        float l = lse[e];
        if (l == -INFINITY) continue;
        size_t kv_off = (size_t)(h / group) * D;
        float qr[ATTN_PER_LANE], gr[ATTN_PER_LANE], acc[ATTN_PER_LANE] = {0};
        lane_load(qr, q + (size_t)i * s.ldq + (size_t)h * D, D, lane);
        lane_load(gr, dout + (size_t)i * s.ldo + (size_t)h * D, D, lane);
        float delta = warp_dot(gr, out + (size_t)i * s.ldo + (size_t)h * D, D, lane);
        for (int j = j0; j < j0 + s.Tk; j++) {
            if (s.k_pos[j] > s.q_pos[i]) continue;
            const float *kj = k + (size_t)j * s.ldk + kv_off;
            float p = expf(scale * warp_dot(qr, kj, D, lane) - l);
            float ds = p * (warp_dot(gr, v + (size_t)j * s.ldv + kv_off, D, lane) - delta);
            lane_axpy(acc, ds * scale, kj, D, lane);
        }
        lane_add(dq + (size_t)i * s.ldq + (size_t)h * D, acc, D, lane);
    }
}

/* The dk, dv half: per (key, kv head), over the queries of its group's heads that see the key,
 * dv += p dout, dk += ds scale q (p and ds as in the dq half, recomputed). */
__global__ static void attention_bwd_dkdv_kernel(float *dk, float *dv, const float *dout, const float *q,
                                                 const float *k, const float *v, const float *out,
                                                 const float *lse, ts_attn_shape s) {
    int D = s.D, group = s.H / s.KV;
    float scale = rsqrtf((float)D);
    GRID_STRIDE(t, (size_t)ts_attn_batch(&s) * s.Tk * s.KV * WARP) {
        size_t e = t / WARP; /* the block is a multiple of 32 threads: a warp shares e */
        int lane = (int)(t % WARP);
        int j = (int)(e / s.KV), g = (int)(e % s.KV), i0 = j / s.Tk * s.Tq; /* its sequence's queries */
        float kr[ATTN_PER_LANE], vr[ATTN_PER_LANE], dkr[ATTN_PER_LANE] = {0}, dvr[ATTN_PER_LANE] = {0};
        lane_load(kr, k + (size_t)j * s.ldk + (size_t)g * D, D, lane);
        lane_load(vr, v + (size_t)j * s.ldv + (size_t)g * D, D, lane);
        for (int i = i0; i < i0 + s.Tq; i++) {
            if (s.k_pos[j] > s.q_pos[i]) continue;
            for (int h = g * group; h < (g + 1) * group; h++) {
                float l = lse[(size_t)i * s.H + h];
                if (l == -INFINITY) continue;
                const float *qi = q + (size_t)i * s.ldq + (size_t)h * D;
                const float *gi = dout + (size_t)i * s.ldo + (size_t)h * D;
                const float *oi = out + (size_t)i * s.ldo + (size_t)h * D;
                float p = expf(scale * warp_dot(kr, qi, D, lane) - l);
                float ds = p * (warp_dot(vr, gi, D, lane) - row_dot(gi, oi, D, lane));
                lane_axpy(dvr, p, gi, D, lane);
                lane_axpy(dkr, ds * scale, qi, D, lane);
            }
        }
        lane_add(dk + (size_t)j * s.ldk + (size_t)g * D, dkr, D, lane);
        lane_add(dv + (size_t)j * s.ldv + (size_t)g * D, dvr, D, lane);
    }
}

/* ts_attention_merge's formula per (query, head): a chunk no key of which the query sees
 * (lse2 = -inf) leaves the row as it is. */
__global__ static void attention_merge_kernel(float *out, float *lse, const float *out2, const float *lse2, int Tq,
                                              int H, int D, int ldo) {
    size_t n = (size_t)Tq * H;
    GRID_STRIDE(e, n) {
        int i = (int)(e / H), h = (int)(e % H);
        float l2 = lse2[e];
        if (l2 == -INFINITY) continue;
        float *o1 = out + (size_t)i * ldo + (size_t)h * D;
        const float *o2 = out2 + (size_t)i * ldo + (size_t)h * D;
        float m = fmaxf(lse[e], l2);
        float lnew = m + logf(expf(lse[e] - m) + expf(l2 - m));
        float a = expf(lse[e] - lnew), b = expf(l2 - lnew);
        for (int d = 0; d < D; d++) o1[d] = a * o1[d] + b * o2[d];
        lse[e] = lnew;
    }
}

static ts_status attn_check(const char *what, const ts_attn_shape *s) {
    if (s->Tq < 0 || s->Tk < 0 || s->batch < 0 || s->H < 1 || s->KV < 1 || s->D < 1 || s->H % s->KV != 0)
        return TS_FAIL(TS_ERR_INPUT, "cuda %s: Tq=%d Tk=%d batch=%d H=%d KV=%d D=%d, expected sizes >= 0 and H a "
                       "multiple of KV", what, s->Tq, s->Tk, s->batch, s->H, s->KV, s->D);
    if (s->D > TS_CUDA_ATTN_MAX_D)
        return TS_FAIL(TS_ERR_INPUT, "cuda %s: head dim D=%d above %d (a warp holds a head in registers)", what,
                       s->D, TS_CUDA_ATTN_MAX_D);
    if (s->ldq < s->H * s->D || s->ldo < s->H * s->D || s->ldk < s->KV * s->D || s->ldv < s->KV * s->D)
        return TS_FAIL(TS_ERR_INPUT, "cuda %s: row strides ldq=%d ldo=%d ldk=%d ldv=%d below H*D=%d / KV*D=%d",
                       what, s->ldq, s->ldo, s->ldk, s->ldv, s->H * s->D, s->KV * s->D);
    return TS_OK;
}

extern "C" ts_status ts_cuda_attention_fwd(float *out, float *lse, const float *q, const float *k,
                                           const float *v, const ts_attn_shape *s) {
    ts_status res = TS_OK;
    TS_CHECK(attn_check("attention_fwd", s));
    LAUNCH_1D(attention_fwd_kernel, (size_t)ts_attn_batch(s) * s->Tq * s->H * WARP, out, lse, q, k, v, *s);
fail:
    return res;
}

extern "C" ts_status ts_cuda_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                           const float *k, const float *v, const float *out, const float *lse,
                                           const ts_attn_shape *s) {
    ts_status res = TS_OK;
    TS_CHECK(attn_check("attention_bwd", s));
    LAUNCH_1D(attention_bwd_dq_kernel, (size_t)ts_attn_batch(s) * s->Tq * s->H * WARP, dq, dout, q, k, v, out, lse,
              *s);
    LAUNCH_1D(attention_bwd_dkdv_kernel, (size_t)ts_attn_batch(s) * s->Tk * s->KV * WARP, dk, dv, dout, q, k, v,
              out, lse, *s);
fail:
    return res;
}

extern "C" ts_status ts_cuda_attention_merge(float *out, float *lse, const float *out2, const float *lse2, int Tq,
                                             int H, int D, int ldo) {
    ts_status res = TS_OK;
    if (Tq < 0 || H < 1 || D < 1 || ldo < H * D)
        return TS_FAIL(TS_ERR_INPUT, "cuda attention_merge: Tq=%d H=%d D=%d ldo=%d, expected ldo >= H*D", Tq, H, D,
                       ldo);
    LAUNCH_1D(attention_merge_kernel, (size_t)Tq * H, out, lse, out2, lse2, Tq, H, D, ldo);
fail:
    return res;
}
