/* BF16 storage (common/bf16.h) and the BF16 mixed-precision reference (exec/kernel_table_cpu_bf16.c,
 * exec/bf16_ref.h), suite `bf16` (no MPI, no GPU): the conversion rounds to nearest even with exact
 * ties, the bf16 table rounds activations and leaves weight gradients in fp32, and one-rank bf16
 * training stays within TS_BF16_LOSS_RTOL of fp32 training on tiny and tiny-moe while the
 * tolerance stays well below what training itself changes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bf16.h"
#include "exec/backend.h"
#include "exec/bf16_ref.h"
#include "exec/kernel_table.h"
#include "exec/kernels.h"
#include "exec/launch.h"
#include "tests/helpers.h"

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Ties are exact: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (even: down), 1 + 3·2^-8 halfway
 * between 1 + 2^-7 and 1 + 2^-6 (odd: up); one bit past a tie goes up. */
Test(bf16, rounds_to_nearest_even) {
    cr_expect_eq(ts_bf16_from_float(1.0f).bits, 0x3F80);
    cr_expect_eq(ts_bf16_from_float(1.0f + 0x1p-8f).bits, 0x3F80, "tie to even (down)");
    cr_expect_eq(ts_bf16_from_float(1.0f + 3 * 0x1p-8f).bits, 0x3F82, "tie to even (up)");
    cr_expect_eq(ts_bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f).bits, 0x3F81, "past the tie");
    cr_expect_eq(ts_bf16_from_float(-2.0f).bits, 0xC000);
    cr_expect_eq(ts_bf16_from_float(from_bits(0x7F7FFFFFu)).bits, 0x7F80, "fp32 max rounds to +inf");
    cr_expect_eq(ts_bf16_from_float(INFINITY).bits, 0x7F80);
    cr_expect_eq(ts_bf16_from_float(-INFINITY).bits, 0xFF80);
    cr_expect(isnan(ts_bf16_round(NAN)), "NaN stays NaN");
    cr_expect(isnan(ts_bf16_to_float(ts_bf16_from_float(from_bits(0x7F800001u)))),
              "a NaN whose payload is in the dropped bits stays NaN (not inf)");
    cr_expect_eq(ts_bf16_from_float(from_bits(0x00010000u)).bits, 0x0001, "subnormals keep their upper bits");
    cr_expect_eq(ts_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3F82, "kernels.h's ts_bf16_bits is this conversion");
}

/* Every bf16 value survives the round trip, and rounding is within half an ulp (2^-8 relative: 2^-7 ulp at 1). */
Test(bf16, round_trip_and_error_bound) {
    for (uint32_t b = 0; b < 0x10000u; b++) {
        ts_bf16 v = {(uint16_t)b};
        float x = ts_bf16_to_float(v);
        if (isnan(x)) continue;
        cr_assert_eq(ts_bf16_from_float(x).bits, b, "bf16 0x%04x does not round-trip", b);
    }
    float *x = test_random_floats(100000, 7);
    double worst = 0;
    for (int i = 0; i < 100000; i++) {
        float v = x[i] * 1e3f;
        if (v == 0) continue;
        worst = fmax(worst, fabs((double)ts_bf16_round(v) - v) / fabs(v));
    }
    free(x);
    cr_expect(worst <= TS_BF16_UNIT_ROUNDOFF, "relative error %g > 2^-8", worst);
    cr_expect(worst > TS_BF16_UNIT_ROUNDOFF / 2, "relative error %g: rounding seems not to happen", worst);
}

static int all_bf16(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ts_bf16_round(x[i]) != x[i]) return 0;
    return 1;
}

/* The linear layer: out is bf16 and equals the fp32 GEMM of the rounded operands, rounded; the
 * weight gradient is the fp32 GEMM of rounded operands added into fp32 (Megatron's main_grad). */
Test(bf16, table_rounds_activations_not_weight_grads) {
    const ts_kernels *b = ts_kernels_cpu_bf16(), *f = ts_kernels_cpu();
    cr_assert_str_eq(b->name, "cpu-bf16");
    enum { T = 5, IC = 7, OC = 3 };
    float *in = test_random_floats(T * IC, 1), *w = test_random_floats(OC * IC, 2), *dout = test_random_floats(T * OC, 3);
    float rin[T * IC], rw[OC * IC], rd[T * OC], out[T * OC], ref[T * OC], dw[OC * IC] = {0}, dwr[OC * IC] = {0};
    for (int i = 0; i < T * IC; i++) rin[i] = ts_bf16_round(in[i]);
    for (int i = 0; i < OC * IC; i++) rw[i] = ts_bf16_round(w[i]);
    for (int i = 0; i < T * OC; i++) rd[i] = ts_bf16_round(dout[i]);
    cr_assert_eq(b->linear_fwd(out, in, w, T, IC, OC), TS_OK);
    f->linear_fwd(ref, rin, rw, T, IC, OC);
    for (int i = 0; i < T * OC; i++) cr_expect_eq(out[i], ts_bf16_round(ref[i]), "out[%d]", i);
    cr_expect(all_bf16(out, T * OC));
    cr_assert_eq(b->linear_bwd_weight(dw, dout, in, T, IC, OC), TS_OK);
    f->linear_bwd_weight(dwr, rd, rin, T, IC, OC);
    cr_expect(memcmp(dw, dwr, sizeof dw) == 0, "dw is the fp32 product of the rounded operands");
    cr_expect(!all_bf16(dw, OC * IC), "weight gradients stay fp32");
    float x[T * IC], rstd[T], nw[IC];
    for (int i = 0; i < IC; i++) nw[i] = 1.0f + 0.01f * i;
    cr_assert_eq(b->rmsnorm_fwd(x, rstd, in, nw, T, IC, 1e-5f), TS_OK);
    cr_expect(all_bf16(x, T * IC), "the norm's output is bf16");
    cr_expect(!all_bf16(rstd, T), "rstd stays fp32");
    free(in);
    free(w);
    free(dout);
}

/* bf16 against fp32 training: the gap is real (rounding happened), within the stated tolerance,
 * and the tolerance is small against the loss's own change over the steps. */
static void expect_within_tolerance(const char *model) {
    enum { STEPS = 6, BATCH = 4, SEQ = 64 };
    float f[STEPS], b[STEPS];
    cr_assert_eq(ts_bf16_ref_losses(model, BATCH, SEQ, STEPS, TS_DEVICE_CPU, 0, f, NULL), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_bf16_ref_losses(model, BATCH, SEQ, STEPS, TS_DEVICE_CPU, 1, b, NULL), TS_OK, "%s",
                 ts_error_message());
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        double gap = fabs((double)b[s] - f[s]) / fabs((double)f[s]);
        printf("bf16 %s step %d: fp32 %.6f bf16 %.6f relative gap %.3g\n", model, s, f[s], b[s], gap);
        worst = fmax(worst, gap);
    }
    double change = fabs((double)f[0] - f[STEPS - 1]) / f[0];
    printf("bf16 %s: worst gap %.3g (tolerance %g), loss change over %d steps %.3g\n", model, worst,
           TS_BF16_LOSS_RTOL, STEPS, change);
    cr_expect(worst > 0, "%s: bf16 losses equal fp32 ones: no rounding happened", model);
    cr_expect(worst <= TS_BF16_LOSS_RTOL, "%s: bf16 gap %g > %g", model, worst, TS_BF16_LOSS_RTOL);
    cr_expect(change > 4 * TS_BF16_LOSS_RTOL, "%s: the tolerance %g is not small against training's change %g",
              model, TS_BF16_LOSS_RTOL, change);
}

Test(bf16, tiny_losses_within_tolerance, .timeout = 120) { expect_within_tolerance("tiny"); }
Test(bf16, tiny_moe_losses_within_tolerance, .timeout = 120) { expect_within_tolerance("tiny-moe"); }

/* The shapes the reference refuses are input errors, named. */
Test(bf16, reference_refuses_bad_shapes) {
    float l[1];
    cr_expect_eq(ts_bf16_ref_losses("tiny", 1, 4096, 1, TS_DEVICE_CPU, 0, l, NULL), TS_ERR_INPUT);
    cr_expect_eq(ts_bf16_ref_losses("tiny", 1, 16, 0, TS_DEVICE_CPU, 0, l, NULL), TS_ERR_INPUT);
}

/* On a machine without a usable GPU the CUDA reference refuses with the backend's reason. */
Test(bf16, reference_on_cuda_needs_a_gpu) {
    if (ts_cuda_gpu_count() > 0) cr_skip_test("this machine has a GPU: cuda_gpu/bf16_training_vs_cpu runs it");
    float l[1];
    ts_error_clear();
    cr_expect_eq(ts_bf16_ref_losses("tiny", 1, 16, 1, TS_DEVICE_CUDA, 1, l, NULL), TS_ERR_INPUT);
    const char *m = ts_error_message();
    cr_expect(strstr(m, "built without CUDA") != NULL || strstr(m, "no CUDA GPU") != NULL, "%s", m);
}

/* --precision's values, and the backend each gives: the CPU backend with the cpu-bf16 table. */
Test(bf16, precision_flag_and_backend) {
    int b = -1;
    cr_expect_eq(ts_precision_parse("fp32", &b), TS_OK);
    cr_expect_eq(b, 0);
    cr_expect_eq(ts_precision_parse("bf16", &b), TS_OK);
    cr_expect_eq(b, 1);
    ts_error_clear();
    cr_expect_eq(ts_precision_parse("fp16", &b), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "expected fp32 or bf16") != NULL, "%s", ts_error_message());
    const ts_backend *cpu = ts_backend_cpu(1), *with = ts_backend_bf16(cpu);
    cr_assert_not_null(with);
    cr_expect_eq(with->kernels, ts_kernels_cpu_bf16());
    cr_expect_eq((void *)with->alloc, (void *)cpu->alloc, "the rest of the backend is the CPU's");
    cr_expect_eq(cpu->kernels, ts_kernels_cpu(), "the CPU backend itself is unchanged");
    cli_result r = run_cli("run", "--plan", "none.json", "--precision", "fp16", NULL);
    cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    cr_expect(one_line_error(r.err, "run"), "%s", r.err);
    cli_result_free(&r);
}
