/* The shapes of the GPU benchmarks and their FLOP counts (see gpu_bench.h). */
#include "exec/gpu_bench.h"

/* Llama-3.2-1B (meta-llama/Llama-3.2-1B config.json): hidden 2048, 32 heads × 64, 8 kv heads,
 * intermediate 8192, vocab 128256; 8192 tokens per GEMM (a micro-batch of 4 × 2048). */
#define L1B_TOKENS 8192
#define L1B_HIDDEN 2048
#define L1B_KV (8 * 64)
#define L1B_FFN 8192
#define L1B_VOCAB 128256

int ts_gpu_gemm_grid(int quick, ts_gpu_gemm_shape *out) {
    static const int squares[] = {1024, 2048, 4096, 8192}, quick_squares[] = {4096, 8192};
    const int *sq = quick ? quick_squares : squares;
    int n_sq = quick ? 2 : 4, n = 0;
    for (int i = 0; i < n_sq; i++) out[n++] = (ts_gpu_gemm_shape){sq[i], sq[i], sq[i], "square"};
    out[n++] = (ts_gpu_gemm_shape){L1B_TOKENS, L1B_HIDDEN + 2 * L1B_KV, L1B_HIDDEN, "qkv"};
    out[n++] = (ts_gpu_gemm_shape){L1B_TOKENS, L1B_HIDDEN, L1B_HIDDEN, "out"};
    out[n++] = (ts_gpu_gemm_shape){L1B_TOKENS, 2 * L1B_FFN, L1B_HIDDEN, "gate+up"};
    out[n++] = (ts_gpu_gemm_shape){L1B_TOKENS, L1B_HIDDEN, L1B_FFN, "down"};
    out[n++] = (ts_gpu_gemm_shape){L1B_TOKENS, L1B_VOCAB, L1B_HIDDEN, "lm-head"};
    return n;
}

int ts_gpu_calib_dims(int quick, const int **dims) {
    static const int full[] = {64, 256, 1024, 4096, 8192}, quick_dims[] = {64, 1024, 4096};
    *dims = quick ? quick_dims : full;
    return quick ? 3 : 5;
}

int ts_gpu_fp8_grid(int quick, ts_gpu_gemm_shape *out) {
    const int *d;
    int nd = ts_gpu_calib_dims(quick, &d), n = 0, cube;
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < nd; j++)
            for (int l = 0; l < nd; l++) out[n++] = (ts_gpu_gemm_shape){d[i], d[j], d[l], "grid"};
    cube = n;
    ts_gpu_gemm_shape layer[TS_GPU_GEMM_MAX];
    int nl = ts_gpu_gemm_grid(quick, layer);
    for (int i = 0; i < nl; i++) {
        int seen = 0;
        for (int j = 0; j < cube && !seen; j++)
            seen = out[j].m == layer[i].m && out[j].n == layer[i].n && out[j].k == layer[i].k;
        if (!seen) out[n++] = layer[i];
    }
    return n;
}

int ts_gpu_attn_grid(int quick, ts_gpu_attn_shape *out) {
    static const int seqs[] = {512, 1024, 2048, 4096, 8192, 16384}, quick_seqs[] = {1024, 4096};
    static const int dims[] = {64, 128};
    const int *s = quick ? quick_seqs : seqs;
    int n_s = quick ? 2 : 6, n = 0;
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < n_s; i++) {
            int heads = 2048 / dims[d];
            out[n++] = (ts_gpu_attn_shape){s[i], 16384 / s[i], heads, heads, dims[d]};
        }
    return n;
}

double ts_gpu_gemm_flops(const ts_gpu_gemm_shape *g) { return 2.0 * g->m * g->n * g->k; }

double ts_gpu_attn_flops(const ts_gpu_attn_shape *a, int bwd) {
    double fwd = 4.0 * a->seq * a->seq * a->head_dim * a->heads * a->batch / 2; /* causal: half */
    return bwd ? 2.5 * fwd : fwd;
}
