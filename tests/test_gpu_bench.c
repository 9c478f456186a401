/* The GPU benchmark shapes of exec/gpu_bench.h, suite `gpu_bench` (no GPU needed): the GEMM grid
 * reaches 8192-sized squares and holds a Llama-3.2-1B layer's GEMMs, the attention grid is
 * FlashAttention-2's benchmark set (hidden 2048, 16k tokens per batch), the FLOP counts follow
 * its convention, and the timers refuse cleanly where there is no GPU. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "exec/gpu_bench.h"
#include "exec/launch.h"

Test(gpu_bench, gemm_grid) {
    ts_gpu_gemm_shape g[TS_GPU_GEMM_MAX];
    for (int quick = 0; quick <= 1; quick++) {
        int n = ts_gpu_gemm_grid(quick, g), top = 0, layer = 0;
        cr_assert(n > 0 && n <= TS_GPU_GEMM_MAX, "%d shapes", n);
        for (int i = 0; i < n; i++) {
            cr_expect(g[i].m > 0 && g[i].n > 0 && g[i].k > 0);
            cr_expect(g[i].m % 16 == 0 && g[i].k % 16 == 0, "fp8 GEMMs need multiples of 16: %d %d", g[i].m, g[i].k);
            if (!strcmp(g[i].what, "square") && g[i].m == 8192) top = 1;
            if (!strcmp(g[i].what, "gate+up")) {
                layer = 1;
                cr_expect(g[i].n == 16384 && g[i].k == 2048, "gate+up %d x %d", g[i].n, g[i].k);
            }
        }
        cr_expect(top, "the grid reaches 8192 (where a GPU's GEMMs peak)");
        cr_expect(layer, "the 1B layer's GEMMs are in the grid");
    }
    cr_expect_lt(ts_gpu_gemm_grid(1, g), ts_gpu_gemm_grid(0, g), "--quick has fewer shapes");
    ts_gpu_gemm_shape s = {4096, 4096, 4096, "square"};
    cr_expect_float_eq(ts_gpu_gemm_flops(&s), 2.0 * 4096 * 4096 * 4096, 1);
}

Test(gpu_bench, attention_grid_is_flash_attention_2s) {
    ts_gpu_attn_shape a[TS_GPU_ATTN_MAX];
    int n = ts_gpu_attn_grid(0, a), seen512 = 0, seen16k = 0;
    cr_assert_eq(n, 12, "2 head dims x 6 lengths");
    for (int i = 0; i < n; i++) {
        cr_expect_eq(a[i].heads * a[i].head_dim, 2048, "hidden 2048");
        cr_expect_eq(a[i].seq * a[i].batch, 16384, "batch = 16k / seq");
        cr_expect(a[i].head_dim == 64 || a[i].head_dim == 128);
        seen512 |= a[i].seq == 512;
        seen16k |= a[i].seq == 16384;
    }
    cr_expect(seen512 && seen16k);
    cr_expect_eq(ts_gpu_attn_grid(1, a), 4);
    /* Causal forward: 4 seq² D heads batch / 2; backward 2.5 times that. */
    ts_gpu_attn_shape x = {2048, 8, 16, 16, 128};
    double fwd = 4.0 * 2048 * 2048 * 128 * 16 * 8 / 2;
    cr_expect_float_eq(ts_gpu_attn_flops(&x, 0), fwd, 1);
    cr_expect_float_eq(ts_gpu_attn_flops(&x, 1), 2.5 * fwd, 1);
}

Test(gpu_bench, timers_refuse_without_a_gpu) {
    if (ts_cuda_gpu_count() > 0) cr_skip_test("this machine has a GPU: bench/gpu_targets runs the timers");
    ts_gpu_gemm_shape g = {64, 64, 64, "square"};
    ts_gpu_attn_shape a = {64, 1, 2, 2, 64};
    double s;
    cr_expect_neq(ts_gpu_time_gemm(TS_DTYPE_BF16, &g, 0.01, &s), TS_OK);
    cr_expect_neq(ts_gpu_time_wgrad(TS_DTYPE_BF16, &g, TS_DTYPE_FP32, 1, 0.01, &s), TS_OK);
    cr_expect_neq(ts_gpu_time_attention(&a, 0, 0.01, &s), TS_OK);
    cr_expect_neq(ts_gpu_time_launch(&s), TS_OK);
}

/* The weight-gradient timer (bench/fp8_gemms --wgrad) on a GPU, suite cuda_gpu (SKIP without one):
 * plain and accumulating into a bf16 and an fp32 main_grad all time, fp8 too from compute
 * capability 8.9; a main_grad of another dtype is refused naming it. */
Test(cuda_gpu, wgrad_accumulation_timer, .timeout = 120) {
    char name[128];
    int major = 0, minor = 0;
    if (ts_gpu_describe(name, sizeof name, &major, &minor) != TS_OK)
        cr_skip_test("no CUDA GPU here (%s)", ts_error_message());
    ts_gpu_gemm_shape g = {4096, 4096, 2048, "square"};
    int fp8 = major * 10 + minor >= 89;
    for (int d = 0; d < 1 + fp8; d++) {
        ts_dtype dt = d ? TS_DTYPE_FP8 : TS_DTYPE_BF16;
        double plain = 0, acc16 = 0, acc32 = 0;
        cr_assert_eq(ts_gpu_time_wgrad(dt, &g, TS_DTYPE_BF16, 0, 0.02, &plain), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_gpu_time_wgrad(dt, &g, TS_DTYPE_BF16, 1, 0.02, &acc16), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_gpu_time_wgrad(dt, &g, TS_DTYPE_FP32, 1, 0.02, &acc32), TS_OK, "%s", ts_error_message());
        cr_expect(plain > 0 && acc16 > 0 && acc32 > 0, "%g %g %g s", plain, acc16, acc32);
        fprintf(stderr, "%s %s 4096x4096 over 2048: plain %.1f us, into bf16 main_grad %.1f, into fp32 %.1f\n", name,
                ts_dtype_names[dt], 1e6 * plain, 1e6 * acc16, 1e6 * acc32);
    }
    double s = 0;
    cr_expect_eq(ts_gpu_time_wgrad(TS_DTYPE_BF16, &g, TS_DTYPE_FP16, 1, 0.02, &s), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "output dtype fp16") != NULL, "%s", ts_error_message());
}
