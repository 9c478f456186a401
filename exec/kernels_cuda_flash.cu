/* Tiled causal grouped-query attention on tensor cores (FlashAttention-2, Dao 2023: Alg. 1 forward,
 * Alg. 2 backward), the bf16 mixed-precision twin of ts_cuda_attention_fwd / _bwd: same arguments,
 * same conventions (fp32 tensors with strides, positions per row, lse of the scaled scores, the
 * backward ADDS into dq, dk, dv), but q, k, v, dout and P are rounded to bf16 in shared memory and
 * every product runs as WMMA 16×16×16 bf16 fragments with fp32 accumulation (sm_80+). The softmax
 * statistics, the output accumulator and D_i = rowsum(dO ∘ O) stay fp32.
 *
 * No Tq × Tk buffer: a block holds one query tile (forward, dQ) or one key tile (dK, dV) and walks
 * the other side tile by tile; a key tile whose first position is past every query of the tile is
 * skipped (the causal half), judged by positions so CP's load-balanced chunks skip correctly too.
 * The backward is deterministic (no atomics): dK, dV per key tile and kv head, summing the
 * group's query heads and the query tiles in order; dQ per query tile. Tiles, shared memory and
 * grids come from exec/flash_launch.h. */
#include <cuda_bf16.h>
#include <mma.h>

#include <climits>

#include "common/bf16.h"
#include "exec/kernels_cuda_common.cuh"

extern "C" {
#include "exec/flash_launch.h"
}

using namespace nvcuda;
typedef __nv_bfloat16 bf16;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_frag;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a_frag;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b_row_frag;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b_col_frag;

#define WARP 32

/* What every flash kernel reads: the shape and pointers of one call. */
struct flash_args {
    const float *q, *k, *v, *out, *dout, *lse, *di;
    int Tq, Tk, H, KV, D, ldq, ldk, ldv, ldo;
    const int *q_pos, *k_pos;
    float scale;  /* 1 / sqrt(D) */
    int bf16_out; /* round what is written (out; dq, dk, dv after the addition) to bf16 values */
};

/* A written value, rounded to bf16 where the call asks (the bf16 table's activations). */
__device__ static inline float written(const flash_args &a, float x) { return a.bf16_out ? ts_bf16_round(x) : x; }

__device__ static inline float warp_max(float x) {
    for (int o = WARP / 2; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ static inline float warp_sum(float x) {
    for (int o = WARP / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* rows × dp bf16 into dst from fp32 src rows row0.. (stride ld, column offset col), zero beyond
 * `valid` rows and D columns (the padding adds nothing to any product). */
__device__ static void load_tile(bf16 *dst, const float *src, int ld, int col, int row0, int valid, int rows, int D,
                                 int dp) {
    for (int i = threadIdx.x; i < rows * dp; i += blockDim.x) {
        int r = i / dp, c = i % dp;
        float x = (r < valid && c < D) ? src[(size_t)(row0 + r) * ld + col + c] : 0.0f;
        dst[i] = __float2bfloat16_rn(x);
    }
}

/* The block-wide max (or min, with sign = -1) of pos[0 .. n) into *slot; every thread gets it. */
__device__ static int block_extreme(const int *pos, int n, int sign, int *slot) {
    __syncthreads();
    if (threadIdx.x == 0) *slot = sign > 0 ? INT_MIN : INT_MAX;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        if (sign > 0) atomicMax(slot, pos[i]);
        else atomicMin(slot, pos[i]);
    }
    __syncthreads();
    return *slot;
}

/* C (16 × 16·nb, ld ldc, fp32) = A (16 × 16·nk, row-major bf16) · B^T, B (16·nb × 16·nk row-major):
 * scores from row tiles of two operands that both hold a head per row. */
__device__ static void mm_abt(float *C, int ldc, const bf16 *A, int lda, const bf16 *B, int ldb, int nb, int nk) {
    for (int j = 0; j < nb; j++) {
        acc_frag acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < nk; kk++) {
            a_frag fa;
            b_col_frag fb;
            wmma::load_matrix_sync(fa, A + kk * 16, lda);
            wmma::load_matrix_sync(fb, B + (size_t)j * 16 * ldb + kk * 16, ldb);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(C + j * 16, acc, ldc, wmma::mem_row_major);
    }
}

/* C (16 × 16·nd, fp32, accumulated in place) += A (16 × 16·nk bf16) · B (16·nk × 16·nd bf16). */
__device__ static void mm_ab_acc(float *C, int ldc, const bf16 *A, int lda, const bf16 *B, int ldb, int nd, int nk) {
    for (int d = 0; d < nd; d++) {
        acc_frag acc;
        wmma::load_matrix_sync(acc, C + d * 16, ldc, wmma::mem_row_major);
        for (int kk = 0; kk < nk; kk++) {
            a_frag fa;
            b_row_frag fb;
            wmma::load_matrix_sync(fa, A + kk * 16, lda);
            wmma::load_matrix_sync(fb, B + (size_t)kk * 16 * ldb + d * 16, ldb);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(C + d * 16, acc, ldc, wmma::mem_row_major);
    }
}

/* ---- forward ------------------------------------------------------------------------------------ */

/* The warp's 16 rows of one key tile: mask, online softmax (Alg. 1 lines 8-10), P in bf16, the
 * output accumulator rescaled. S holds the raw scores on entry. */
__device__ static void fwd_softmax_rows(const flash_args &a, float *S, bf16 *P, float *O, float *m, float *l, int r0,
                                        int q_row0, int nq, int k_row0, int nk, int bc, int dp) {
    int lane = threadIdx.x % WARP;
    for (int r = r0; r < r0 + 16; r++) {
        int qp = r < nq ? a.q_pos[q_row0 + r] : INT_MIN;
        float mx = -INFINITY;
        for (int j = lane; j < bc; j += WARP) {
            bool vis = r < nq && j < nk && a.k_pos[k_row0 + j] <= qp;
            float s = vis ? S[r * bc + j] * a.scale : -INFINITY;
            S[r * bc + j] = s;
            mx = fmaxf(mx, s);
        }
        mx = warp_max(mx);
        float m_old = m[r], m_new = fmaxf(m_old, mx), sum = 0.0f;
        for (int j = lane; j < bc; j += WARP) {
            float p = m_new == -INFINITY ? 0.0f : __expf(S[r * bc + j] - m_new);
            P[r * bc + j] = __float2bfloat16_rn(p);
            sum += p;
        }
        sum = warp_sum(sum);
        float alpha = m_old == -INFINITY ? 0.0f : __expf(m_old - m_new);
        for (int d = lane; d < dp; d += WARP) O[r * dp + d] *= alpha;
        __syncwarp();
        if (lane == 0) {
            m[r] = m_new;
            l[r] = l[r] * alpha + sum;
        }
    }
    __syncwarp();
}

__global__ static void flash_fwd_kernel(flash_args a, float *out, float *lse, int br, int bc, int dp) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ int ext;
    int h = blockIdx.y, b = blockIdx.z, q0 = blockIdx.x * br, warp = threadIdx.x / WARP;
    int nq = min(br, a.Tq - q0), col = ts_flash_kv_head(h, a.H, a.KV) * a.D;
    int q_row0 = b * a.Tq + q0, k_seq0 = b * a.Tk;
    bf16 *Qs = (bf16 *)smem, *Ks = Qs + br * dp, *Vs = Ks + bc * dp;
    float *S = (float *)(Vs + bc * dp);
    bf16 *P = (bf16 *)(S + br * bc);
    float *O = (float *)(P + br * bc), *m = O + br * dp, *l = m + br;
    load_tile(Qs, a.q, a.ldq, h * a.D, q_row0, nq, br, a.D, dp);
    for (int i = threadIdx.x; i < br * dp; i += blockDim.x) O[i] = 0.0f;
    for (int r = threadIdx.x; r < br; r += blockDim.x) m[r] = -INFINITY, l[r] = 0.0f;
    int qmax = block_extreme(a.q_pos + q_row0, nq, 1, &ext);
    for (int k0 = 0; k0 < a.Tk; k0 += bc) {
        int nk = min(bc, a.Tk - k0);
        if (block_extreme(a.k_pos + k_seq0 + k0, nk, -1, &ext) > qmax) continue; /* all masked */
        load_tile(Ks, a.k, a.ldk, col, k_seq0 + k0, nk, bc, a.D, dp);
        load_tile(Vs, a.v, a.ldv, col, k_seq0 + k0, nk, bc, a.D, dp);
        __syncthreads();
        int r0 = warp * 16;
        mm_abt(S + r0 * bc, bc, Qs + r0 * dp, dp, Ks, dp, bc / 16, dp / 16);
        __syncwarp();
        fwd_softmax_rows(a, S, P, O, m, l, r0, q_row0, nq, k_seq0 + k0, nk, bc, dp);
        mm_ab_acc(O + r0 * dp, dp, P + r0 * bc, bc, Vs, dp, dp / 16, bc / 16);
        __syncthreads(); /* K and V are reloaded next */
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nq * a.D; i += blockDim.x) {
        int r = i / a.D, d = i % a.D;
        out[(size_t)(q_row0 + r) * a.ldo + h * a.D + d] = written(a, l[r] > 0.0f ? O[r * dp + d] / l[r] : 0.0f);
    }
    for (int r = threadIdx.x; r < nq; r += blockDim.x)
        lse[(size_t)(q_row0 + r) * a.H + h] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
}

/* ---- backward ----------------------------------------------------------------------------------- */

/* D_i = rowsum(dO ∘ O) per (query row, head) (Alg. 2 line 4), fp32. */
__global__ static void flash_bwd_di_kernel(float *di, flash_args a, size_t n) {
    GRID_STRIDE(e, n) {
        size_t i = e / a.H;
        int h = (int)(e % a.H);
        const float *o = a.out + i * a.ldo + (size_t)h * a.D, *g = a.dout + i * a.ldo + (size_t)h * a.D;
        float s = 0.0f;
        for (int d = 0; d < a.D; d++) s += o[d] * g[d];
        di[e] = s;
    }
}

/* P and dS of one (key, query) pair from the raw score s and dP (Alg. 2 lines 11-14), scale folded
 * into dS so that dQ = dS K and dK = dS^T Q. Invisible pairs give 0. */
__device__ static inline void p_ds(const flash_args &a, bool vis, float s, float dp_, float lse, float di, float *p,
                                   float *ds) {
    *p = vis && lse != -INFINITY ? __expf(s * a.scale - lse) : 0.0f;
    *ds = *p * (dp_ - di) * a.scale;
}

__global__ static void flash_bwd_dkdv_kernel(flash_args a, float *dk, float *dv, int br, int bc, int dp) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ int ext;
    int g = blockIdx.y, b = blockIdx.z, k0 = blockIdx.x * bc, lane = threadIdx.x % WARP, r0 = threadIdx.x / WARP * 16;
    int nk = min(bc, a.Tk - k0), group = a.H / a.KV, k_row0 = b * a.Tk + k0, q_seq0 = b * a.Tq;
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + bc * dp, *Qs = Vs + bc * dp, *dOs = Qs + br * dp;
    float *dKa = (float *)(dOs + br * dp), *dVa = dKa + bc * dp, *St = dVa + bc * dp, *dPt = St + bc * br;
    bf16 *Pt = (bf16 *)(dPt + bc * br), *dSt = Pt + bc * br;
    float *lse_s = (float *)(dSt + bc * br), *di_s = lse_s + br;
    load_tile(Ks, a.k, a.ldk, g * a.D, k_row0, nk, bc, a.D, dp);
    load_tile(Vs, a.v, a.ldv, g * a.D, k_row0, nk, bc, a.D, dp);
    for (int i = threadIdx.x; i < bc * dp; i += blockDim.x) dKa[i] = dVa[i] = 0.0f;
    int kmin = block_extreme(a.k_pos + k_row0, nk, -1, &ext);
    for (int h = g * group; h < (g + 1) * group; h++)
        for (int q0 = 0; q0 < a.Tq; q0 += br) {
            int nq = min(br, a.Tq - q0), q_row0 = q_seq0 + q0;
            if (block_extreme(a.q_pos + q_row0, nq, 1, &ext) < kmin) continue; /* no query sees these keys */
            load_tile(Qs, a.q, a.ldq, h * a.D, q_row0, nq, br, a.D, dp);
            load_tile(dOs, a.dout, a.ldo, h * a.D, q_row0, nq, br, a.D, dp);
            for (int c = threadIdx.x; c < br; c += blockDim.x) {
                lse_s[c] = c < nq ? a.lse[(size_t)(q_row0 + c) * a.H + h] : -INFINITY;
                di_s[c] = c < nq ? a.di[(size_t)(q_row0 + c) * a.H + h] : 0.0f;
            }
            __syncthreads();
            mm_abt(St + r0 * br, br, Ks + r0 * dp, dp, Qs, dp, br / 16, dp / 16);  /* S^T = K Q^T */
            mm_abt(dPt + r0 * br, br, Vs + r0 * dp, dp, dOs, dp, br / 16, dp / 16); /* dP^T = V dO^T */
            __syncwarp();
            for (int i = lane; i < 16 * br; i += WARP) {
                int r = r0 + i / br, c = i % br, e = r * br + c;
                bool vis = r < nk && c < nq && a.k_pos[k_row0 + r] <= a.q_pos[q_row0 + c];
                float p, ds;
                p_ds(a, vis, St[e], dPt[e], lse_s[c], di_s[c], &p, &ds);
                Pt[e] = __float2bfloat16_rn(p);
                dSt[e] = __float2bfloat16_rn(ds);
            }
            __syncwarp();
            mm_ab_acc(dVa + r0 * dp, dp, Pt + r0 * br, br, dOs, dp, dp / 16, br / 16); /* dV += P^T dO */
            mm_ab_acc(dKa + r0 * dp, dp, dSt + r0 * br, br, Qs, dp, dp / 16, br / 16); /* dK += dS^T Q */
            __syncthreads(); /* Q and dO are reloaded next */
        }
    __syncthreads();
    for (int i = threadIdx.x; i < nk * a.D; i += blockDim.x) {
        int r = i / a.D, d = i % a.D;
        float *pk = &dk[(size_t)(k_row0 + r) * a.ldk + g * a.D + d], *pv = &dv[(size_t)(k_row0 + r) * a.ldv + g * a.D + d];
        *pk = written(a, *pk + dKa[r * dp + d]);
        *pv = written(a, *pv + dVa[r * dp + d]);
    }
}

__global__ static void flash_bwd_dq_kernel(flash_args a, float *dq, int br, int bc, int dp) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ int ext;
    int h = blockIdx.y, b = blockIdx.z, q0 = blockIdx.x * br, lane = threadIdx.x % WARP, r0 = threadIdx.x / WARP * 16;
    int nq = min(br, a.Tq - q0), col = ts_flash_kv_head(h, a.H, a.KV) * a.D, q_row0 = b * a.Tq + q0, k_seq0 = b * a.Tk;
    bf16 *Qs = (bf16 *)smem, *dOs = Qs + br * dp, *Ks = dOs + br * dp, *Vs = Ks + bc * dp;
    float *dQa = (float *)(Vs + bc * dp), *S = dQa + br * dp, *dP = S + br * bc;
    bf16 *dS = (bf16 *)(dP + br * bc);
    float *lse_s = (float *)(dS + br * bc), *di_s = lse_s + br;
    load_tile(Qs, a.q, a.ldq, h * a.D, q_row0, nq, br, a.D, dp);
    load_tile(dOs, a.dout, a.ldo, h * a.D, q_row0, nq, br, a.D, dp);
    for (int i = threadIdx.x; i < br * dp; i += blockDim.x) dQa[i] = 0.0f;
    for (int r = threadIdx.x; r < br; r += blockDim.x) {
        lse_s[r] = r < nq ? a.lse[(size_t)(q_row0 + r) * a.H + h] : -INFINITY;
        di_s[r] = r < nq ? a.di[(size_t)(q_row0 + r) * a.H + h] : 0.0f;
    }
    int qmax = block_extreme(a.q_pos + q_row0, nq, 1, &ext);
    for (int k0 = 0; k0 < a.Tk; k0 += bc) {
        int nk = min(bc, a.Tk - k0), k_row0 = k_seq0 + k0;
        if (block_extreme(a.k_pos + k_row0, nk, -1, &ext) > qmax) continue;
        load_tile(Ks, a.k, a.ldk, col, k_row0, nk, bc, a.D, dp);
        load_tile(Vs, a.v, a.ldv, col, k_row0, nk, bc, a.D, dp);
        __syncthreads();
        mm_abt(S + r0 * bc, bc, Qs + r0 * dp, dp, Ks, dp, bc / 16, dp / 16);   /* S = Q K^T */
        mm_abt(dP + r0 * bc, bc, dOs + r0 * dp, dp, Vs, dp, bc / 16, dp / 16); /* dP = dO V^T */
        __syncwarp();
        for (int i = lane; i < 16 * bc; i += WARP) {
            int r = r0 + i / bc, c = i % bc, e = r * bc + c;
            bool vis = r < nq && c < nk && a.k_pos[k_row0 + c] <= a.q_pos[q_row0 + r];
            float p, ds;
            p_ds(a, vis, S[e], dP[e], lse_s[r], di_s[r], &p, &ds);
            dS[e] = __float2bfloat16_rn(ds);
        }
        __syncwarp();
        mm_ab_acc(dQa + r0 * dp, dp, dS + r0 * bc, bc, Ks, dp, dp / 16, bc / 16); /* dQ += dS K */
        __syncthreads();
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nq * a.D; i += blockDim.x) {
        int r = i / a.D, d = i % a.D;
        float *p = &dq[(size_t)(q_row0 + r) * a.ldq + h * a.D + d];
        *p = written(a, *p + dQa[r * dp + d]);
    }
}

/* ---- host side ---------------------------------------------------------------------------------- */

static ts_status flash_cfg(ts_flash_kernel kind, const ts_attn_shape *s, ts_flash_cfg *c) {
    ts_status res = TS_OK;
    int dev = 0, major = 0, minor = 0;
    TS_CUDA_GOTO(cudaGetDevice(&dev), res, fail);
    TS_CUDA_GOTO(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), res, fail);
    TS_CUDA_GOTO(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), res, fail);
    TS_CHECK(ts_flash_config(kind, s->Tq, s->Tk, s->H, s->KV, s->D, ts_attn_batch(s), major, minor, c));
    TS_CHECK(ts_flash_check_strides(s->ldq, s->ldk, s->ldv, s->ldo, s->H, s->KV, s->D));
fail:
    return res;
}

static flash_args args_of(const ts_attn_shape *s, const float *q, const float *k, const float *v, const float *out,
                          const float *dout, const float *lse, const float *di, int bf16_out) {
    flash_args a = {q,      k,      v,      out,    dout,   lse,    di,       s->Tq,    s->Tk,
                    s->H,   s->KV,  s->D,   s->ldq, s->ldk, s->ldv, s->ldo,   s->q_pos, s->k_pos,
                    1.0f / sqrtf((float)s->D), bf16_out};
    return a;
}

/* Launches kernel with cfg's grid and its shared memory (opting in past the 48 KB default). */
#define FLASH_LAUNCH(kernel, cfg, ...)                                                             \
    do {                                                                                           \
        TS_CUDA_GOTO(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,     \
                                          (int)(cfg).smem_bytes),                                  \
                     res, fail);                                                                   \
        dim3 grid_((cfg).grid_x, (cfg).grid_y, (cfg).grid_z);                                      \
        kernel<<<grid_, (cfg).warps * WARP, (cfg).smem_bytes, stream()>>>(__VA_ARGS__);            \
        TS_LAUNCH_GOTO(kernel, res, fail);                                                         \
    } while (0)

extern "C" ts_status ts_cuda_flash_attention_fwd(float *out, float *lse, const float *q, const float *k,
                                                 const float *v, const ts_attn_shape *s, int bf16_out) {
    ts_status res = TS_OK;
    ts_flash_cfg c;
    TS_CHECK_CTX(flash_cfg(TS_FLASH_FWD, s, &c), "cuda flash attention forward");
    if (c.grid_x == 0) return TS_OK;
    FLASH_LAUNCH(flash_fwd_kernel, c, args_of(s, q, k, v, NULL, NULL, NULL, NULL, bf16_out), out, lse, c.br, c.bc, c.dp);
fail:
    return res;
}

extern "C" ts_status ts_cuda_flash_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                                 const float *k, const float *v, const float *out, const float *lse,
                                                 const ts_attn_shape *s, int bf16_out) {
    ts_status res = TS_OK;
    ts_flash_cfg ckv, cq;
    float *di = NULL;
    TS_CHECK_CTX(flash_cfg(TS_FLASH_BWD_DKDV, s, &ckv), "cuda flash attention backward");
    TS_CHECK_CTX(flash_cfg(TS_FLASH_BWD_DQ, s, &cq), "cuda flash attention backward");
    if (ckv.grid_x == 0) return TS_OK;
    {
        size_t n = (size_t)ts_attn_batch(s) * s->Tq * s->H;
        TS_CUDA_GOTO(cudaMallocAsync((void **)&di, n * sizeof *di, stream()), res, fail);
        flash_args a = args_of(s, q, k, v, out, dout, lse, di, bf16_out);
        ts_launch l;
        TS_CHECK_GOTO(ts_launch_1d(n, ELEMENT_BLOCK, ELEMENT_MAX_GRID, &l), res, fail);
        flash_bwd_di_kernel<<<l.grid, l.block, 0, stream()>>>(di, a, n);
        TS_LAUNCH_GOTO(flash_bwd_di_kernel, res, fail);
        FLASH_LAUNCH(flash_bwd_dkdv_kernel, ckv, a, dk, dv, ckv.br, ckv.bc, ckv.dp);
        FLASH_LAUNCH(flash_bwd_dq_kernel, cq, a, dq, cq.br, cq.bc, cq.dp);
    }
fail:
    if (di) cudaFreeAsync(di, stream());
    return res;
}
