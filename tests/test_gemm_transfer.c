/* A GEMM curve carried over by measured ratios (models/gemm_transfer.h): the B200 system files
 * carry what the committed OpenXLA table gives, the decades' medians are the medians, the last
 * ratio is held, and the reader refuses what is not a table. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/gemm_transfer.h"
#include "tests/helpers.h"

static ts_system load_system(const char *name) {
    ts_system s;
    cr_assert_eq(ts_system_load(name, &s), TS_OK, "%s", ts_error_message());
    return s;
}

/* b200-dgx.json's curve is h100-sxm-dgx.json's carried by the committed table (bench/gemm_transfer
 * prints it), and the GB200's B200 takes the same curve. */
Test(gemm_transfer, b200_files_carry_the_measured_ratio) {
    ts_system h100 = load_system("h100-sxm-dgx"), b200 = load_system("b200-dgx"), gb200 = load_system("gb200-nvl72");
    char *path = test_data_path("validation/xla/matmul-perf-table.csv");
    ts_gemm_pairs p;
    ts_gemm_pairs_init(&p);
    cr_assert_eq(ts_gemm_pairs_read(&p, path, "sm_90", "sm_100", "bf16xbf16->bf16"), TS_OK, "%s", ts_error_message());
    cr_expect_eq(p.n, 375, "a full 3 x 5^3 grid of shapes, got %d", p.n);
    ts_gemm_ratio_bin bins[TS_GEMM_RATIO_BINS_MAX];
    int n = ts_gemm_ratio_bins(&p, h100.peak_flops[TS_DTYPE_BF16], b200.peak_flops[TS_DTYPE_BF16], bins,
                               TS_GEMM_RATIO_BINS_MAX);
    cr_expect_eq(n, 5, "decades 1e8 to 1e12");
    for (int i = 1; i < n; i++) cr_expect_gt(bins[i].ratio, bins[i - 1].ratio, "B200's GEMMs fill later: ratio rises");
    ts_eff_curve c;
    cr_assert_eq(ts_gemm_curve_transfer(bins, n, &h100.gemm_eff, 1e12, &c), TS_OK, "%s", ts_error_message());
    cr_assert_eq(b200.gemm_eff.n, c.n);
    for (int i = 0; i < c.n; i++) {
        cr_expect(fabs(b200.gemm_eff.flops[i] / c.flops[i] - 1) < 1e-9 && fabs(b200.gemm_eff.eff[i] - c.eff[i]) < 1e-9,
                  "point %d: file %g %.3f, carried %g %.3f", i, b200.gemm_eff.flops[i], b200.gemm_eff.eff[i],
                  c.flops[i], c.eff[i]);
        cr_expect(gb200.gemm_eff.flops[i] == b200.gemm_eff.flops[i] && gb200.gemm_eff.eff[i] == b200.gemm_eff.eff[i]);
    }
    ts_gemm_pairs_free(&p);
    free(path);
}

/* Three shapes a decade apart and two in one decade: medians per decade, FLOPs geometric. */
Test(gemm_transfer, decades_take_medians_and_the_last_ratio_is_held) {
    char *path = test_write_temp("sm,b,m,n,k,dtype,flops_per_s\n"
                                 "a,1,500,1000,100,x,100\n" /* 1e8: a 100, b 50 -> 0.5 */
                                 "b,1,500,1000,100,x,50\n"
                                 "a,1,500,1000,1000,x,100\n" /* 1e9: 0.6 and 0.8 -> 0.7 */
                                 "b,1,500,1000,1000,x,60\n"
                                 "a,2,500,1000,1000,x,100\n"
                                 "b,2,500,1000,1000,x,80\n"
                                 "a,1,500,1000,1000,y,1\n" /* another dtype: left out */
                                 "c,1,500,1000,1000,x,1\n"); /* another GPU: left out */
    ts_gemm_pairs p;
    ts_gemm_pairs_init(&p);
    cr_assert_eq(ts_gemm_pairs_read(&p, path, "a", "b", "x"), TS_OK, "%s", ts_error_message());
    cr_expect_eq(p.n, 3);
    ts_gemm_ratio_bin bins[4];
    int n = ts_gemm_ratio_bins(&p, 1.0, 1.0, bins, 4);
    cr_assert_eq(n, 2);
    cr_expect(fabs(bins[0].flops - 1e8) < 1e-3 && fabs(bins[0].ratio - 0.5) < 1e-12 && bins[0].shapes == 1);
    cr_expect(fabs(bins[1].flops - sqrt(2.0) * 1e9) < 1e-3 && fabs(bins[1].ratio - 0.7) < 1e-12 && bins[1].shapes == 2,
              "%g %g", bins[1].flops, bins[1].ratio);
    ts_eff_curve flat = {.n = 1, .flops = {1e9}, .eff = {0.8}}, c;
    cr_assert_eq(ts_gemm_curve_transfer(bins, n, &flat, 1e12, &c), TS_OK);
    cr_expect_eq(c.n, 3, "two decades and the held ratio");
    cr_expect(c.eff[0] == 0.4 && c.eff[1] == 0.56 && c.eff[2] == 0.56 && c.flops[1] == 1.41e9 && c.flops[2] == 1e12,
              "%g %g %g at %g", c.eff[0], c.eff[1], c.eff[2], c.flops[1]);
    cr_expect_eq(ts_gemm_curve_transfer(bins, 0, &flat, 1e12, &c), TS_ERR_INPUT);
    ts_gemm_pairs_free(&p);
    test_remove_temp(path);
}

Test(gemm_transfer, reader_refuses_what_is_not_a_table) {
    static const struct {
        const char *text, *said;
    } bad[] = {
        {"sm,b,m,n,k,flops\n", ":1: expected the header"},
        {"sm,b,m,n,k,dtype,flops_per_s\na,1,2,3,4,x,fast\n", ":2: expected sm,b,m,n,k"},
        {"sm,b,m,n,k,dtype,flops_per_s\na,1,2,3,4,x,-5\n", ":2: expected sm,b,m,n,k"},
        {"sm,b,m,n,k,dtype,flops_per_s\na,1,2,3,4,x,5,6\n", ":2: expected sm,b,m,n,k"},
        {"sm,b,m,n,k,dtype,flops_per_s\na,1,2,3,4,x,5\nb,1,2,3,4,x,6\na,1,2,3,4,x,7\n", ":4: a x b=1 m=2 n=3 k=4 given twice"},
        {"sm,b,m,n,k,dtype,flops_per_s\na,1,2,3,4,x,5\nb,1,2,3,5,x,6\n", "no x shape measured on both a and b"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *path = test_write_temp(bad[i].text);
        ts_gemm_pairs p;
        ts_gemm_pairs_init(&p);
        ts_error_clear();
        cr_expect_eq(ts_gemm_pairs_read(&p, path, "a", "b", "x"), TS_ERR_INPUT, "case %zu", i);
        cr_expect(strstr(ts_error_message(), bad[i].said) && strstr(ts_error_message(), path), "case %zu: %s", i,
                  ts_error_message());
        ts_gemm_pairs_free(&p);
        test_remove_temp(path);
    }
    ts_gemm_pairs p;
    ts_gemm_pairs_init(&p);
    cr_expect_eq(ts_gemm_pairs_read(&p, "/nonexistent/table.csv", "a", "b", "x"), TS_ERR_IO);
}
