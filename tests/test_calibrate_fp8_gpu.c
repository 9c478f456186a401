/* `tessera calibrate --device cuda`'s FP8 grid on a real GPU, suite `cuda_gpu` (SKIP without a CUDA
 * build and a GPU, never a pass): the fp8 timer runs both accumulation modes, and calibrate either
 * measures the grid into the profile's FP8 curve, which an fp8 plan then uses (compute capability
 * 8.9+), or keeps the template's curve and says so in one line (below 8.9). The same paths are
 * checked without a GPU on synthetic rows in tests/test_calibrate_fp8.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "exec/calibrate.h"
#include "exec/gpu_bench.h"
#include "models/system.h"
#include "tests/helpers.h"

Test(cuda_gpu, calibrate_fp8_grid, .timeout = 400) {
    char name[128];
    int major = 0, minor = 0;
    if (ts_gpu_describe(name, sizeof name, &major, &minor) != TS_OK)
        cr_skip_test("no CUDA GPU here (%s)", ts_error_message());
    int cc = major * 10 + minor;
    if (ts_calib_fp8_capable(cc)) {
        ts_gpu_gemm_shape g = {4096, 4096, 4096, "square"};
        double fast = 0, split = 0;
        int calls = 0;
        cr_assert_eq(ts_gpu_time_gemm_fp8(&g, 1, 0.05, &fast, &calls), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_gpu_time_gemm_fp8(&g, 0, 0.05, &split, NULL), TS_OK, "%s", ts_error_message());
        cr_expect(calls >= 3 && fast > 0 && split > 0, "%d calls, %g s, %g s", calls, fast, split);
        fprintf(stderr, "%s (%d.%d): fp8 4096^3 %.1f TFLOP/s fast accumulation, %.1f split\n", name, major, minor,
                ts_gpu_gemm_flops(&g) / fast / 1e12, ts_gpu_gemm_flops(&g) / split / 1e12);
    }
    char *dir = make_temp_dir(), profile[4096];
    snprintf(profile, sizeof profile, "%s/profile.json", dir);
    const char *args[] = {"calibrate", "--device", "cuda", "--quick", "-o", profile, NULL};
    cli_result r = run_argv_timeout(args, 300);
    cr_assert_eq(r.status, 0, "calibrate --device cuda: exit %d, stderr: %s", r.status, r.err);
    ts_system s;
    cr_assert_eq(ts_system_load(profile, &s), TS_OK, "%s", ts_error_message());
    const char *line = strstr(r.err, "tessera calibrate: fp8: ");
    cr_assert(line != NULL, "no fp8 line: %s", r.err);
    fprintf(stderr, "%.*s\n", (int)strcspn(line, "\n"), line);
    if (ts_calib_fp8_capable(cc)) {
        cr_expect(strncmp(line, "tessera calibrate: fp8: measured on ", 36) == 0, "%s", line);
        cr_expect(s.peak_flops[TS_DTYPE_FP8] > s.peak_flops[TS_DTYPE_BF16], "fp8 peak %g, bf16 %g",
                  s.peak_flops[TS_DTYPE_FP8], s.peak_flops[TS_DTYPE_BF16]);
        cr_expect(s.gemm_eff_fp8.n >= 2, "efficiency.gemm_fp8 has %d points", s.gemm_eff_fp8.n);
        cli_result p = run_cli("plan", "-m", "tiny", "-s", profile, "--gpus", "1", "--global-batch", "8", "--seq",
                               "128", "--dtype", "fp8", NULL);
        cr_expect_eq(p.status, 0, "plan --dtype fp8 on the profile: exit %d: %s", p.status, p.err);
        cli_result_free(&p);
    } else {
        cr_expect(strstr(line, "not measured") != NULL, "%s", line);
        cr_expect_eq(s.peak_flops[TS_DTYPE_FP8], 0, "no FP8 peak below 8.9");
    }
    cli_result_free(&r);
    remove_dir(dir);
}
