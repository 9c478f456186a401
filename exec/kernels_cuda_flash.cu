/* Tiled causal grouped-query attention on tensor cores (FlashAttention-2, Dao 2023: Alg. 1 forward,
 * Alg. 2 backward), the bf16 mixed-precision twin of ts_cuda_attention_fwd / _bwd: same arguments,
 * same conventions (fp32 tensors with strides, positions per row, lse of the scaled scores, the
 * backward ADDS into dq, dk, dv), but q, k, v, dout and the probabilities are rounded to bf16 and
 * every product runs on mma.sync.m16n8k16 bf16 fragments with fp32 accumulation (sm_80+). The
 * softmax statistics, the accumulators and D_i = rowsum(dO ∘ O) stay fp32.
 *
 * Each warp owns 16 rows; their scores and accumulators live in registers as the instruction's
 * fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16", bf16: lane = 4·g + t holds rows g and
 * g + 8, columns 2t and 2t + 1 of each 8-column accumulator tile), so a row's max and sum take two
 * shuffles among its 4 lanes, and the probabilities become the next product's A operand in
 * registers (an accumulator tile pair is an A fragment's layout). The block's warps share the other
 * side's tiles, staged in shared memory as bf16, row-major or transposed so that every B fragment
 * is read as 32-bit words of one row (exec/flash_launch.h for the layouts).
 *
 * No Tq × Tk buffer: a block holds one query tile (forward, dQ) or one key tile (dK, dV) and walks
 * the other side tile by tile; a tile whose rows are all masked (every key past every query,
 * judged by positions, so CP's load-balanced chunks skip correctly too) is skipped. The backward is
 * deterministic (no atomics): dK, dV per key tile and kv head, summing the group's query heads and
 * the query tiles in order; dQ per query tile. Tiles, shared memory and grids come from
 * exec/flash_launch.h; the kernels are compiled for its head-dim widths. */
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

#include "common/bf16.h"
#include "exec/kernels_cuda_common.cuh"

extern "C" {
#include "exec/flash_launch.h"
}

typedef __nv_bfloat16 bf16;

#define WARP 32
#define PAD TS_FLASH_PAD

/* What every flash kernel reads: the shape and pointers of one call. */
struct flash_args {
    const float *q, *k, *v, *out, *dout, *lse, *di;
    int Tq, Tk, H, KV, D, ldq, ldk, ldv, ldo;
    const int *q_pos, *k_pos;
    float scale;  /* 1 / sqrt(D) */
    int bf16_out; /* round what is written (out; dq, dk, dv after the addition) to bf16 values */
};

/* A written value, rounded to bf16 where the call asks (the bf16 table's activations). */
__device__ static __forceinline__ float written(const flash_args &a, float x) { return a.bf16_out ? ts_bf16_round(x) : x; }

/* d += a · b, one m16n8k16 bf16 product with fp32 accumulation. */
__device__ static __forceinline__ void mma16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ static __forceinline__ uint32_t word(const bf16 *p) { return *reinterpret_cast<const uint32_t *>(p); }

__device__ static __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

/* The A fragment of rows r0..r0+15, columns c0..c0+15 of a row-major bf16 tile (row stride ld). */
__device__ static __forceinline__ void frag_a(uint32_t a[4], const bf16 *s, int ld, int r0, int c0) {
    int g = (threadIdx.x % WARP) >> 2, t = threadIdx.x & 3;
    const bf16 *p = s + (r0 + g) * ld + c0 + 2 * t;
    a[0] = word(p);
    a[1] = word(p + 8 * ld);
    a[2] = word(p + 8);
    a[3] = word(p + 8 * ld + 8);
}

/* The B fragment (k0..k0+15 × n0..n0+7) whose element (k, n) is s[n · ld + k]: a tile holding one
 * n per row, k along it. */
__device__ static __forceinline__ void frag_b(uint32_t b[2], const bf16 *s, int ld, int n0, int k0) {
    int g = (threadIdx.x % WARP) >> 2, t = threadIdx.x & 3;
    const bf16 *p = s + (n0 + g) * ld + k0 + 2 * t;
    b[0] = word(p);
    b[1] = word(p + 8);
}

/* Two accumulator tiles (columns 16kk.. and 16kk + 8..) as the A fragment of the next product. */
__device__ static __forceinline__ void acc_to_a(uint32_t a[4], const float c0[4], const float c1[4]) {
    a[0] = pack(c0[0], c0[1]);
    a[1] = pack(c0[2], c0[3]);
    a[2] = pack(c1[0], c1[1]);
    a[3] = pack(c1[2], c1[3]);
}

/* The reduction of a row's value over the 4 lanes that hold it. */
__device__ static __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ static __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* `rows` rows of src (row r at src[(row0 + r) · ld + col], fp32) as bf16 into `rm` (row-major, row
 * stride DP + PAD) and/or `tr` (transposed: dst[c · (rows + PAD) + r]); zeros past `valid` rows
 * and D columns, so the padding adds nothing to any product. A thread takes 4 consecutive columns
 * of a row (one 16-byte load where D, ld, col and src allow it), and issues LOADS_IN_FLIGHT such
 * loads before it stores any: the tiles' global loads were the kernels' main stall (Nsight
 * Compute on an H100: about two thirds of the cycles between instructions waiting on them with
 * one scalar load at a time). Row-major only, consecutive threads read consecutive columns of a
 * row; with a transposed copy a warp reads 8 rows × 16 columns (64 bytes of each row), so that
 * its transposed stores fall on distinct banks (consecutive columns of one row were 16-way
 * conflicts: 38% excess shared-memory wavefronts in the forward); exec/flash_launch.h's
 * ts_flash_tile_group maps threads to groups. rows is a multiple of 8. */
#define LOADS_IN_FLIGHT 4
template <int DP>
__device__ static __forceinline__ void load_tile(bf16 *rm, bf16 *tr, const float *src, int ld, int col, int row0,
                                                 int valid, int rows, int D) {
    const int groups = rows * (DP / 4);
    bool vec = D % 4 == 0 && ld % 4 == 0 && col % 4 == 0 && (reinterpret_cast<uintptr_t>(src) & 15) == 0;
    bool by_warp = tr != NULL;
    for (int base = threadIdx.x; base < groups; base += LOADS_IN_FLIGHT * blockDim.x) {
        float4 x[LOADS_IN_FLIGHT];
#pragma unroll
        for (int u = 0; u < LOADS_IN_FLIGHT; u++) {
            int i = base + u * blockDim.x, r, c;
            ts_flash_tile_group(i, DP, by_warp, &r, &c);
            x[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (i >= groups || r >= valid || c >= D) continue;
            const float *p = src + (size_t)(row0 + r) * ld + col + c;
            if (vec) {
                x[u] = __ldg(reinterpret_cast<const float4 *>(p));
            } else {
                x[u].x = p[0];
                x[u].y = c + 1 < D ? p[1] : 0.0f;
                x[u].z = c + 2 < D ? p[2] : 0.0f;
                x[u].w = c + 3 < D ? p[3] : 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < LOADS_IN_FLIGHT; u++) {
            int i = base + u * blockDim.x, r, c;
            ts_flash_tile_group(i, DP, by_warp, &r, &c);
            if (i >= groups) continue;
            __nv_bfloat162 lo = __floats2bfloat162_rn(x[u].x, x[u].y), hi = __floats2bfloat162_rn(x[u].z, x[u].w);
            if (rm) {
                __nv_bfloat162 *d = reinterpret_cast<__nv_bfloat162 *>(rm + r * (DP + PAD) + c);
                d[0] = lo;
                d[1] = hi;
            }
            if (tr) {
                tr[c * (rows + PAD) + r] = lo.x;
                tr[(c + 1) * (rows + PAD) + r] = lo.y;
                tr[(c + 2) * (rows + PAD) + r] = hi.x;
                tr[(c + 3) * (rows + PAD) + r] = hi.y;
            }
        }
    }
}

/* Whether any of the block's threads has `mine` (a barrier: every thread calls it). */
__device__ static __forceinline__ bool block_any(bool mine) { return __syncthreads_or(mine) != 0; }

/* The block-wide max (sign 1) or min (sign -1) of every thread's x; every thread gets it. */
__device__ static __forceinline__ int block_extreme(int x, int sign, int *slot) {
    if (threadIdx.x == 0) *slot = sign > 0 ? INT_MIN : INT_MAX;
    __syncthreads();
    if (sign > 0) atomicMax(slot, x);
    else atomicMin(slot, x);
    __syncthreads();
    return *slot;
}

/* acc += X · Y for X (16 × BT) the accumulator tiles x and Y's element (k, n) at Yt[n · (BT + PAD)
 * + k] (a transposed tile). */
template <int DP, int BT>
__device__ static __forceinline__ void acc_product(float (*acc)[4], float (*x)[4], const bf16 *Yt) {
#pragma unroll
    for (int kk = 0; kk < BT / 16; kk++) {
        uint32_t xa[4];
        acc_to_a(xa, x[2 * kk], x[2 * kk + 1]);
#pragma unroll
        for (int n = 0; n < DP / 8; n++) {
            uint32_t yb[2];
            frag_b(yb, Yt, BT + PAD, n * 8, kk * 16);
            mma16816(acc[n], xa, yb);
        }
    }
}

/* ---- forward ------------------------------------------------------------------------------------ */

/* One warp's 16 query rows against one key tile: S = Q Kᵀ, masked and scaled, the online softmax
 * (Alg. 1 lines 8-10) on rows g and g + 8 of each lane, O rescaled and O += P V. */
template <int DP, int BC>
__device__ static __forceinline__ void fwd_tile(const flash_args &a, const bf16 *Qs, const bf16 *Ks, const bf16 *Vt, const int *kp,
                                int r0, const int qp[2], float m[2], float l[2], float (*o)[4]) {
    int t = threadIdx.x & 3;
    float s[BC / 8][4];
#pragma unroll
    for (int j = 0; j < BC / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DP / 16; kk++) {
        uint32_t qa[4];
        frag_a(qa, Qs, DP + PAD, r0, kk * 16);
#pragma unroll
        for (int j = 0; j < BC / 8; j++) {
            uint32_t kb[2];
            frag_b(kb, Ks, DP + PAD, j * 8, kk * 16);
            mma16816(s[j], qa, kb);
        }
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < BC / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int half = e >> 1, key = kp[j * 8 + 2 * t + (e & 1)];
            s[j][e] = key <= qp[half] ? s[j][e] * a.scale : -INFINITY;
            mx[half] = fmaxf(mx[half], s[j][e]);
        }
    float alpha[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float m_new = fmaxf(m[h], quad_max(mx[h]));
        alpha[h] = m[h] == -INFINITY ? 0.0f : __expf(m[h] - m_new);
        m[h] = m_new;
    }
#pragma unroll
    for (int j = 0; j < BC / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float mh = m[e >> 1];
            s[j][e] = mh == -INFINITY ? 0.0f : __expf(s[j][e] - mh);
            sum[e >> 1] += s[j][e];
        }
#pragma unroll
    for (int h = 0; h < 2; h++) l[h] = l[h] * alpha[h] + quad_sum(sum[h]);
#pragma unroll
    for (int n = 0; n < DP / 8; n++) o[n][0] *= alpha[0], o[n][1] *= alpha[0], o[n][2] *= alpha[1], o[n][3] *= alpha[1];
    acc_product<DP, BC>(o, s, Vt); /* O += P V */
}

template <int DP, int BC>
__global__ static void __launch_bounds__(TS_FLASH_MAX_WARPS * WARP) flash_fwd_kernel(flash_args a, float *out,
                                                                                     float *lse) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int ext;
    int br = blockDim.x / WARP * 16, h = blockIdx.y, b = blockIdx.z, q0 = blockIdx.x * br;
    int lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3, r0 = threadIdx.x / WARP * 16;
    int nq = min(br, a.Tq - q0), col = ts_flash_kv_head(h, a.H, a.KV) * a.D, q_row0 = b * a.Tq + q0, k_seq0 = b * a.Tk;
    bf16 *Qs = (bf16 *)smem, *Ks = Qs + br * (DP + PAD), *Vt = Ks + BC * (DP + PAD);
    int *kp = (int *)(Vt + DP * (BC + PAD));
    load_tile<DP>(Qs, NULL, a.q, a.ldq, h * a.D, q_row0, nq, br, a.D);
    int qp[2];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) qp[hf] = r0 + g + 8 * hf < nq ? a.q_pos[q_row0 + r0 + g + 8 * hf] : INT_MIN;
    int qmax = block_extreme(max(qp[0], qp[1]), 1, &ext);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    for (int k0 = 0; k0 < a.Tk; k0 += BC) {
        int nk = min(BC, a.Tk - k0);
        bool seen = false;
        for (int j = threadIdx.x; j < nk; j += blockDim.x) seen |= a.k_pos[k_seq0 + k0 + j] <= qmax;
        if (!block_any(seen)) continue; /* every key past every query */
        load_tile<DP>(Ks, NULL, a.k, a.ldk, col, k_seq0 + k0, nk, BC, a.D);
        load_tile<DP>(NULL, Vt, a.v, a.ldv, col, k_seq0 + k0, nk, BC, a.D);
        for (int j = threadIdx.x; j < BC; j += blockDim.x) kp[j] = j < nk ? a.k_pos[k_seq0 + k0 + j] : INT_MAX;
        __syncthreads();
        fwd_tile<DP, BC>(a, Qs, Ks, Vt, kp, r0, qp, m, l, o);
        __syncthreads(); /* K, V and the positions are reloaded next */
    }
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        int r = r0 + g + 8 * hf;
        if (r >= nq) continue;
        float inv = l[hf] > 0.0f ? 1.0f / l[hf] : 0.0f;
        float *row = out + (size_t)(q_row0 + r) * a.ldo + h * a.D;
#pragma unroll
        for (int n = 0; n < DP / 8; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int d = n * 8 + 2 * t + e;
                if (d < a.D) row[d] = written(a, o[n][2 * hf + e] * inv);
            }
        if (t == 0) lse[(size_t)(q_row0 + r) * a.H + h] = l[hf] > 0.0f ? m[hf] + logf(l[hf]) : -INFINITY;
    }
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
 * into dS so that dQ = dS K and dK = dSᵀ Q. Invisible pairs give 0. */
__device__ static __forceinline__ void p_ds(const flash_args &a, bool vis, float s, float dp_, float lse, float di, float *p,
                                   float *ds) {
    *p = vis && lse != -INFINITY ? __expf(s * a.scale - lse) : 0.0f;
    *ds = *p * (dp_ - di) * a.scale;
}

/* Sᵀ = K Qᵀ and dPᵀ = V dOᵀ (or S = Q Kᵀ and dP = dO Vᵀ: the same products with the sides
 * swapped) of one warp's 16 rows r0.. of A, B and dB row-major, against the BT rows of the other
 * side. */
template <int DP, int BT>
__device__ static __forceinline__ void scores(float (*s)[4], float (*dp)[4], const bf16 *A, const bf16 *dA, const bf16 *B,
                              const bf16 *dB, int r0) {
#pragma unroll
    for (int j = 0; j < BT / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DP / 16; kk++) {
        uint32_t fa[4], fda[4];
        frag_a(fa, A, DP + PAD, r0, kk * 16);
        frag_a(fda, dA, DP + PAD, r0, kk * 16);
#pragma unroll
        for (int j = 0; j < BT / 8; j++) {
            uint32_t fb[2], fdb[2];
            frag_b(fb, B, DP + PAD, j * 8, kk * 16);
            frag_b(fdb, dB, DP + PAD, j * 8, kk * 16);
            mma16816(s[j], fa, fb);
            mma16816(dp[j], fda, fdb);
        }
    }
}

/* dst[row r, column d] (row stride ld, column offset col) = written(dst + acc) for r < valid, d < D,
 * over a warp's rows r0.. (lanes' rows g and g + 8). */
template <int DP>
__device__ static __forceinline__ void add_out(const flash_args &a, float *dst, int ld, int col, int row0, int r0, int valid,
                               float (*acc)[4]) {
    int g = (threadIdx.x % WARP) >> 2, t = threadIdx.x & 3;
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        int r = r0 + g + 8 * hf;
        if (r >= valid) continue;
        float *row = dst + (size_t)(row0 + r) * ld + col;
#pragma unroll
        for (int n = 0; n < DP / 8; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int d = n * 8 + 2 * t + e;
                if (d < a.D) row[d] = written(a, row[d] + acc[n][2 * hf + e]);
            }
    }
}

template <int DP>
__global__ static void __launch_bounds__(TS_FLASH_MAX_WARPS * WARP) flash_bwd_dkdv_kernel(flash_args a, float *dk,
                                                                                          float *dv) {
    const int BQ = TS_FLASH_BWD_TILE;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int ext;
    int bk = blockDim.x / WARP * 16, kvh = blockIdx.y, b = blockIdx.z, k0 = blockIdx.x * bk;
    int lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3, r0 = threadIdx.x / WARP * 16;
    int nk = min(bk, a.Tk - k0), group = a.H / a.KV, k_row0 = b * a.Tk + k0, q_seq0 = b * a.Tq;
    bf16 *Ks = (bf16 *)smem, *Vs = Ks + bk * (DP + PAD), *Qs = Vs + bk * (DP + PAD), *dOs = Qs + BQ * (DP + PAD);
    bf16 *Qt = dOs + BQ * (DP + PAD), *dOt = Qt + DP * (BQ + PAD);
    float *lse_s = (float *)(dOt + DP * (BQ + PAD)), *di_s = lse_s + BQ;
    int *qp = (int *)(di_s + BQ);
    load_tile<DP>(Ks, NULL, a.k, a.ldk, kvh * a.D, k_row0, nk, bk, a.D);
    load_tile<DP>(Vs, NULL, a.v, a.ldv, kvh * a.D, k_row0, nk, bk, a.D);
    int kp[2];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) kp[hf] = r0 + g + 8 * hf < nk ? a.k_pos[k_row0 + r0 + g + 8 * hf] : INT_MAX;
    int kmin = block_extreme(min(kp[0], kp[1]), -1, &ext);
    float dk_acc[DP / 8][4], dv_acc[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk_acc[n][e] = dv_acc[n][e] = 0.0f;
    for (int h = kvh * group; h < (kvh + 1) * group; h++)
        for (int q0 = 0; q0 < a.Tq; q0 += BQ) {
            int nq = min(BQ, a.Tq - q0), q_row0 = q_seq0 + q0;
            bool seen = false;
            for (int j = threadIdx.x; j < nq; j += blockDim.x) seen |= a.q_pos[q_row0 + j] >= kmin;
            if (!block_any(seen)) continue; /* no query sees these keys */
            load_tile<DP>(Qs, Qt, a.q, a.ldq, h * a.D, q_row0, nq, BQ, a.D);
            load_tile<DP>(dOs, dOt, a.dout, a.ldo, h * a.D, q_row0, nq, BQ, a.D);
            for (int c = threadIdx.x; c < BQ; c += blockDim.x) {
                lse_s[c] = c < nq ? a.lse[(size_t)(q_row0 + c) * a.H + h] : -INFINITY;
                di_s[c] = c < nq ? a.di[(size_t)(q_row0 + c) * a.H + h] : 0.0f;
                qp[c] = c < nq ? a.q_pos[q_row0 + c] : INT_MIN;
            }
            __syncthreads();
            float st[BQ / 8][4], dpt[BQ / 8][4];
            scores<DP, BQ>(st, dpt, Ks, Vs, Qs, dOs, r0); /* Sᵀ = K Qᵀ, dPᵀ = V dOᵀ */
#pragma unroll
            for (int j = 0; j < BQ / 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int c = j * 8 + 2 * t + (e & 1);
                    p_ds(a, kp[e >> 1] <= qp[c], st[j][e], dpt[j][e], lse_s[c], di_s[c], &st[j][e], &dpt[j][e]);
                }
            acc_product<DP, BQ>(dv_acc, st, dOt);  /* dV += Pᵀ dO */
            acc_product<DP, BQ>(dk_acc, dpt, Qt);  /* dK += dSᵀ Q */
            __syncthreads(); /* Q, dO and their statistics are reloaded next */
        }
    add_out<DP>(a, dk, a.ldk, kvh * a.D, k_row0, r0, nk, dk_acc);
    add_out<DP>(a, dv, a.ldv, kvh * a.D, k_row0, r0, nk, dv_acc);
}

template <int DP>
__global__ static void __launch_bounds__(TS_FLASH_MAX_WARPS * WARP) flash_bwd_dq_kernel(flash_args a, float *dq) {
    const int BK = TS_FLASH_BWD_TILE;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int ext;
    int br = blockDim.x / WARP * 16, h = blockIdx.y, b = blockIdx.z, q0 = blockIdx.x * br;
    int lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3, r0 = threadIdx.x / WARP * 16;
    int nq = min(br, a.Tq - q0), col = ts_flash_kv_head(h, a.H, a.KV) * a.D, q_row0 = b * a.Tq + q0, k_seq0 = b * a.Tk;
    bf16 *Qs = (bf16 *)smem, *dOs = Qs + br * (DP + PAD), *Ks = dOs + br * (DP + PAD), *Vs = Ks + BK * (DP + PAD);
    bf16 *Kt = Vs + BK * (DP + PAD);
    int *kp = (int *)(Kt + DP * (BK + PAD));
    load_tile<DP>(Qs, NULL, a.q, a.ldq, h * a.D, q_row0, nq, br, a.D);
    load_tile<DP>(dOs, NULL, a.dout, a.ldo, h * a.D, q_row0, nq, br, a.D);
    int qp[2];
    float lse_r[2], di_r[2];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        int r = r0 + g + 8 * hf;
        qp[hf] = r < nq ? a.q_pos[q_row0 + r] : INT_MIN;
        lse_r[hf] = r < nq ? a.lse[(size_t)(q_row0 + r) * a.H + h] : -INFINITY;
        di_r[hf] = r < nq ? a.di[(size_t)(q_row0 + r) * a.H + h] : 0.0f;
    }
    int qmax = block_extreme(max(qp[0], qp[1]), 1, &ext);
    float dq_acc[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; n++) dq_acc[n][0] = dq_acc[n][1] = dq_acc[n][2] = dq_acc[n][3] = 0.0f;
    for (int k0 = 0; k0 < a.Tk; k0 += BK) {
        int nk = min(BK, a.Tk - k0), k_row0 = k_seq0 + k0;
        bool seen = false;
        for (int j = threadIdx.x; j < nk; j += blockDim.x) seen |= a.k_pos[k_row0 + j] <= qmax;
        if (!block_any(seen)) continue;
        load_tile<DP>(Ks, Kt, a.k, a.ldk, col, k_row0, nk, BK, a.D);
        load_tile<DP>(Vs, NULL, a.v, a.ldv, col, k_row0, nk, BK, a.D);
        for (int j = threadIdx.x; j < BK; j += blockDim.x) kp[j] = j < nk ? a.k_pos[k_row0 + j] : INT_MAX;
        __syncthreads();
        float s[BK / 8][4], dp[BK / 8][4];
        scores<DP, BK>(s, dp, Qs, dOs, Ks, Vs, r0); /* S = Q Kᵀ, dP = dO Vᵀ */
#pragma unroll
        for (int j = 0; j < BK / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int hf = e >> 1;
                float p;
                p_ds(a, kp[j * 8 + 2 * t + (e & 1)] <= qp[hf], s[j][e], dp[j][e], lse_r[hf], di_r[hf], &p, &dp[j][e]);
            }
        acc_product<DP, BK>(dq_acc, dp, Kt); /* dQ += dS K */
        __syncthreads();
    }
    add_out<DP>(a, dq, a.ldq, h * a.D, q_row0, r0, nq, dq_acc);
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

/* Launches `kernel` (named `name` in errors) with cfg's grid, warps and shared memory (opting in
 * past the 48 KB default). */
template <typename Kernel, typename... Args>
static ts_status launch(Kernel kernel, const char *name, const ts_flash_cfg &c, Args... args) {
    ts_status res = TS_OK;
    TS_CUDA_GOTO(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem_bytes), res,
                 fail);
    /* The most shared memory per SM, so that as many blocks fit as registers allow (Nsight Compute
     * found the default carve-out holding an H100 to 4 blocks of 28 KB). */
    TS_CUDA_GOTO(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      (int)cudaSharedmemCarveoutMaxShared),
                 res, fail);
    kernel<<<dim3(c.grid_x, c.grid_y, c.grid_z), c.warps * WARP, c.smem_bytes, stream()>>>(args...);
    TS_LAUNCH_GOTO(flash_kernel, res, fail);
fail:
    if (res != TS_OK) ts_error_context(__FILE__, __LINE__, "%s", name);
    return res;
}

/* The kernels compiled for padded head dim DP (exec/flash_launch.h's TS_FLASH_WIDTHS). */
template <int DP>
static ts_status flash_fwd_at(const ts_flash_cfg &c, const flash_args &a, float *out, float *lse) {
    return launch(flash_fwd_kernel<DP, TS_FLASH_FWD_KEYS(DP)>, "flash_fwd_kernel", c, a, out, lse);
}

template <int DP>
static ts_status flash_bwd_at(const ts_flash_cfg &ckv, const ts_flash_cfg &cq, const flash_args &a, float *dq,
                              float *dk, float *dv) {
    TS_CHECK(launch(flash_bwd_dkdv_kernel<DP>, "flash_bwd_dkdv_kernel", ckv, a, dk, dv));
    return launch(flash_bwd_dq_kernel<DP>, "flash_bwd_dq_kernel", cq, a, dq);
}

/* Calls F<dp>(args...) for the compiled width dp. */
#define FLASH_AT_WIDTH(F, dp, ...)                                                                 \
    ((dp) == 16    ? F<16>(__VA_ARGS__)                                                            \
     : (dp) == 32  ? F<32>(__VA_ARGS__)                                                            \
     : (dp) == 64  ? F<64>(__VA_ARGS__)                                                            \
     : (dp) == 96  ? F<96>(__VA_ARGS__)                                                            \
     : (dp) == 128 ? F<128>(__VA_ARGS__)                                                           \
     : (dp) == 192 ? F<192>(__VA_ARGS__)                                                           \
     : (dp) == 256 ? F<256>(__VA_ARGS__)                                                           \
                   : TS_FAIL(TS_ERR_INPUT, "flash attention: no kernel for padded head dim %d", (dp)))

extern "C" ts_status ts_cuda_flash_attention_fwd(float *out, float *lse, const float *q, const float *k,
                                                 const float *v, const ts_attn_shape *s, int bf16_out) {
    ts_flash_cfg c;
    TS_CHECK_CTX(flash_cfg(TS_FLASH_FWD, s, &c), "cuda flash attention forward");
    if (c.grid_x == 0) return TS_OK;
    flash_args a = args_of(s, q, k, v, NULL, NULL, NULL, NULL, bf16_out);
    TS_CHECK_CTX(FLASH_AT_WIDTH(flash_fwd_at, c.dp, c, a, out, lse), "cuda flash attention forward");
    return TS_OK;
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
        TS_CHECK_GOTO(FLASH_AT_WIDTH(flash_bwd_at, ckv.dp, ckv, cq, a, dq, dk, dv), res, fail);
    }
fail:
    if (di) cudaFreeAsync(di, stream());
    return res;
}
