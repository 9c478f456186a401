/* Benchmark: the GPU targets of the CUDA backend, on one GPU.
 *
 *   gemm      bf16 (cublasGemmEx, fp32 accumulation) and fp8 (cublasLt, E4M3, compute capability
 *             8.9+) TFLOP/s over exec/gpu_bench.h's grid: squares and a Llama-3.2-1B layer's GEMMs;
 *   attention the tiled bf16 kernels (exec/kernels_cuda_flash.cu), causal, forward and backward
 *             TFLOP/s at FlashAttention-2's benchmark shapes (hidden 2048, head dim 64 or 128,
 *             sequence 512 .. 16k, batch 16k / sequence), beside FlashAttention-2's best H100
 *             figure, 335 TFLOP/s (Dao 2023, "FlashAttention-2", Sec. 4.1 and Fig. 7; its
 *             README's "Performance" section gives the shapes);
 *   launch    an empty kernel's launch-to-launch time;
 *   mfu       one-GPU training of Llama-3.2-1B (bench/llama3.2-1b.json) in BF16 mixed precision
 *             (exec/bf16_ref.h with ts_kernels_cuda_bf16), 4 sequences of 2048 tokens per step:
 *             model FLOPs per token 6 N + 12 L (H D) T (PaLM, Chowdhery et al. 2022, App. B; N the
 *             matmul parameters: every parameter but the norms, the tied embedding once as the LM
 *             head) over the step time, as a fraction of the GPU's dense bf16 peak from its
 *             datasheet (H100 SXM 989 TFLOP/s, H100 PCIe 756, A100 312, H200 989: NVIDIA's H100,
 *             A100 and H200 datasheets) and of the best bf16 GEMM rate measured above.
 *
 * Without a GPU (or in a build without CUDA) it prints one line, "gpu_targets: no GPU (...)", and
 * exits 0, so `make bench` runs everywhere; scripts/gpu-check.sh runs it on a lent GPU.
 * Options: --quick (fewer shapes, 2 training steps), --min-s S (timing per point, default 0.2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_args.h"
#include "common/status.h"
#include "exec/bf16_ref.h"
#include "exec/gpu_bench.h"
#include "exec/launch.h"
#include "models/model.h"

#define FA2_H100_BEST_FLOPS 335e12 /* Dao 2023, Sec. 4.1, Fig. 7 */

/* Dense bf16 tensor-core peaks from NVIDIA's datasheets, by a substring of the device name. */
static double datasheet_bf16(const char *name) {
    static const struct { const char *match; double flops; } rows[] = {
        {"H100 PCIe", 756e12}, {"H100", 989e12}, {"H200", 989e12}, {"A100", 312e12},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (strstr(name, rows[i].match)) return rows[i].flops;
    return 0;
}

static double bench_gemms(int quick, double min_s) {
    ts_gpu_gemm_shape g[TS_GPU_GEMM_MAX];
    int n = ts_gpu_gemm_grid(quick, g);
    double best = 0;
    printf("# gemm: TFLOP/s (bf16: cublasGemmEx, fp8: cublasLtMatmul E4M3 -> bf16, split accumulation as TE's backward GEMMs; fp32 accumulation)\n");
    printf("%-8s %6s %6s %6s %10s %10s\n", "what", "m", "n", "k", "bf16", "fp8");
    for (int i = 0; i < n; i++) {
        double s16 = 0, s8 = 0;
        if (ts_gpu_time_gemm(TS_DTYPE_BF16, &g[i], min_s, &s16) != TS_OK) {
            fprintf(stderr, "gpu_targets: %s\n", ts_error_message());
            exit(1);
        }
        int fp8 = ts_gpu_time_gemm(TS_DTYPE_FP8, &g[i], min_s, &s8) == TS_OK;
        double f = ts_gpu_gemm_flops(&g[i]), r16 = f / s16 / 1e12;
        if (r16 * 1e12 > best) best = r16 * 1e12;
        printf("%-8s %6d %6d %6d %10.1f ", g[i].what, g[i].m, g[i].n, g[i].k, r16);
        if (fp8) printf("%10.1f\n", f / s8 / 1e12);
        else printf("%10s\n", "-");
        ts_error_clear();
    }
    return best;
}

static void bench_attention(int quick, double min_s) {
    ts_gpu_attn_shape a[TS_GPU_ATTN_MAX];
    int n = ts_gpu_attn_grid(quick, a);
    printf("# attention (tiled bf16, causal): TFLOP/s, FlashAttention-2's best on H100: %.0f\n",
           FA2_H100_BEST_FLOPS / 1e12);
    printf("%6s %6s %6s %5s %10s %10s %10s\n", "seq", "batch", "heads", "D", "fwd", "bwd", "fwd+bwd");
    for (int i = 0; i < n; i++) {
        double f = 0, b = 0;
        if (ts_gpu_time_attention(&a[i], 0, min_s, &f) != TS_OK || ts_gpu_time_attention(&a[i], 1, min_s, &b) != TS_OK) {
            fprintf(stderr, "gpu_targets: %s\n", ts_error_message());
            exit(1);
        }
        double ff = ts_gpu_attn_flops(&a[i], 0), fb = ts_gpu_attn_flops(&a[i], 1);
        printf("%6d %6d %6d %5d %10.1f %10.1f %10.1f\n", a[i].seq, a[i].batch, a[i].heads, a[i].head_dim,
               ff / f / 1e12, fb / b / 1e12, (ff + fb) / (f + b) / 1e12);
    }
}

/* Model FLOPs per token of `m` at `seq` tokens (PaLM's 6N + 12 L (H D) T). */
static double flops_per_token(const ts_model *m, int seq) {
    ts_param_count pc;
    ts_model_params(m, &pc);
    double norms = (2.0 * m->layers + 1) * m->hidden, matmul = pc.total - norms;
    if (!m->tied_embeddings) matmul -= pc.embedding; /* the input embedding is a lookup */
    return 6 * matmul + 12.0 * m->layers * m->heads * m->head_dim * seq;
}

static void bench_mfu(const char *gpu, double gemm_best, int quick) {
    enum { BATCH = 4, SEQ = 2048 };
    int steps = quick ? 2 : 4;
    const char *path = "bench/llama3.2-1b.json";
    ts_model m;
    float loss[4];
    double step_s[4];
    if (ts_model_load(path, &m) != TS_OK ||
        ts_bf16_ref_losses(path, BATCH, SEQ, steps, TS_DEVICE_CUDA, 1, loss, step_s) != TS_OK) {
        fprintf(stderr, "gpu_targets: mfu: %s\n", ts_error_message());
        exit(1);
    }
    double t = step_s[steps - 1], model = flops_per_token(&m, SEQ) * BATCH * SEQ / t, peak = datasheet_bf16(gpu);
    printf("# mfu: llama3.2-1b bf16, %d x %d tokens, step %d of %d: %.3f s, loss %.4f\n", BATCH, SEQ, steps, steps, t,
           loss[steps - 1]);
    printf("model TFLOP/s %.1f", model / 1e12);
    if (peak > 0) printf(", MFU %.1f%% of the datasheet's %.0f", 100 * model / peak, peak / 1e12);
    printf(", %.1f%% of the best measured bf16 GEMM (%.0f)\n", 100 * model / gemm_best, gemm_best / 1e12);
}

int main(int argc, char **argv) {
    int quick = 0;
    double min_s = 0.2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--min-s") && i + 1 < argc) {
            if (!bench_parse_min_s("gpu_targets", argv[++i], &min_s)) return 2;
        } else {
            fprintf(stderr, "gpu_targets: unknown argument \"%s\" (--quick, --min-s S)\n", argv[i]);
            return 2;
        }
    }
    if (ts_device_runnable(TS_DEVICE_CUDA) != TS_OK) {
        printf("gpu_targets: no GPU (%s)\n", ts_error_message());
        return 0;
    }
    char name[256];
    int major = 0, minor = 0;
    double launch_s = 0;
    if (ts_gpu_describe(name, sizeof name, &major, &minor) != TS_OK || ts_gpu_time_launch(&launch_s) != TS_OK) {
        fprintf(stderr, "gpu_targets: %s\n", ts_error_message());
        return 1;
    }
    printf("# gpu_targets: %s (compute capability %d.%d), --min-s %g%s\n", name, major, minor, min_s,
           quick ? ", --quick" : "");
    printf("# launch: %.2f us per empty kernel\n", launch_s * 1e6);
    /* each part's wall time, so that a lent GPU's minutes are spent knowingly */
    double t0 = bench_now_s();
    double best = bench_gemms(quick, min_s);
    double t1 = bench_now_s();
    bench_attention(quick, min_s);
    double t2 = bench_now_s();
    bench_mfu(name, best, quick);
    printf("# wall: gemm %.1f s, attention %.1f s, mfu %.1f s\n", t1 - t0, t2 - t1, bench_now_s() - t2);
    return 0;
}
