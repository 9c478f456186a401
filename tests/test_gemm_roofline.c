/* GEMMs no faster than their HBM traffic (planner/cost.h ts_gemm_s, ts_gemm_memory_s,
 * ts_wgrad_gemm_s; planner/op_cost.h ts_wgrad_op_s): few tokens against a large weight, and the
 * weight gradient that accumulates into main_grad; the closed form and the step program price
 * them alike. */
#include <criterion/criterion.h>
#include <math.h>

#include "planner/cost.h"
#include "planner/layer.h"
#include "planner/moe_cost.h"
#include "planner/op_cost.h"
#include "planner/problem.h"
#include "planner/wgrad_accum.h"
#include "program/program.h"
#include "tests/helpers.h"

static double hbm_s(const ts_system *s, double bytes) { return bytes / (s->hbm_bytes_per_s * s->hbm_eff); }

/* 16 tokens through a 14336 × 4096 weight read the weight (117 MB in bf16) for 1.9 GFLOP: the
 * read is the time. A large square stays at the curve's compute time. CPU ranks keep the curve. */
Test(roofline, gemm_is_no_faster_than_its_operands) {
    ts_problem pb = test_problem("llama2-70b", "h100-sxm-dgx", 8, 8, 4096, 1);
    const ts_system *s = &pb.sys;
    double m = 16, n = 14336, k = 4096;
    double bytes = (m * k + k * n) * 2 + m * n * 2;
    cr_expect_float_eq(ts_gemm_memory_s(s, TS_DTYPE_BF16, m, n, k, 1), hbm_s(s, bytes), 1e-15);
    cr_expect(ts_gemm_s(s, TS_DTYPE_BF16, m, n, k) > ts_gemm_compute_s(s, TS_DTYPE_BF16, m, n, k), "memory-bound");
    cr_expect_float_eq(ts_gemm_s(s, TS_DTYPE_BF16, m, n, k), hbm_s(s, bytes), 1e-15);
    /* FP8 reads a byte an element and writes BF16 */
    cr_expect_float_eq(ts_gemm_memory_s(s, TS_DTYPE_FP8, m, n, k, 1), hbm_s(s, (m * k + k * n) + m * n * 2), 1e-15);
    cr_expect_eq(ts_gemm_s(s, TS_DTYPE_BF16, 8192, 8192, 8192), ts_gemm_compute_s(s, TS_DTYPE_BF16, 8192, 8192, 8192));

    ts_problem cpu = test_problem("tiny", "cpu-localhost", 2, 8, 256, 1);
    cr_expect_eq(ts_gemm_memory_s(&cpu.sys, TS_DTYPE_FP32, m, n, k, 1), 0);
    cr_expect_eq(ts_gemm_s(&cpu.sys, TS_DTYPE_FP32, m, n, k), ts_gemm_compute_s(&cpu.sys, TS_DTYPE_FP32, m, n, k));
}

/* The weight gradient W(m×n) over k tokens reads its inputs and writes W's gradient in 2 bytes
 * (the plain GEMM's roofline); accumulating into main_grad adds what planner/wgrad_accum.h
 * measured of main_grad's read and write: x0 of it where the GEMM is memory-bound, x_inf of it
 * where the compute is long. */
Test(roofline, wgrad_reads_and_writes_its_gradient) {
    ts_problem pb = test_problem("llama2-70b", "h100-sxm-dgx", 8, 8, 4096, 1);
    const ts_system *s = &pb.sys;
    double m = 6144, n = 16384, k = 1024, in = 1;
    double plain = hbm_s(s, 4 * (m * n * 2 + k * (m + n) * in)), fp32 = hbm_s(s, 4 * m * n * 8);
    const ts_accum_curve *c32 = ts_accum_curve_for(4), *c16 = ts_accum_curve_for(2);
    cr_expect_float_eq(ts_wgrad_gemm_s(s, 1e-9, m, n, k, 4, in, 0), plain, 1e-15);
    cr_expect_float_eq(ts_wgrad_gemm_s(s, 1e-9, m, n, k, 4, in, 4), plain + ts_accum_added_s(c32, plain, fp32), 1e-15);
    cr_expect(ts_wgrad_gemm_s(s, 1e-9, m, n, k, 4, in, 4) > plain + fp32 / 2, "memory-bound: most of the traffic adds");
    double long_s = 1.0, bf16 = hbm_s(s, 4 * m * n * 4);
    cr_expect_float_eq(ts_wgrad_gemm_s(s, long_s, m, n, k, 4, in, 2), long_s + ts_accum_added_s(c16, long_s, bf16),
                       1e-12);
    cr_expect(ts_wgrad_gemm_s(s, long_s, m, n, k, 4, in, 2) < long_s + 0.2 * bf16, "compute-bound: a small share");
    ts_problem cpu = test_problem("tiny", "cpu-localhost", 2, 8, 256, 1);
    cr_expect_eq(ts_wgrad_gemm_s(&cpu.sys, 1e-9, m, n, k, 4, in, 4), 1e-9, "CPU ranks: the curve");

    /* the stack decides: Megatron-Core accumulates in the GEMM (grad_accum_bytes 0) into a
     * main_grad of the reduced gradients' bytes, the 2021 Megatron-LM adds afterwards */
    double in16 = hbm_s(s, 4 * (m * n * 2 + k * (m + n) * 2)), g = ts_grad_reduce_bytes(&pb.train);
    cr_expect_float_eq(ts_wgrad_op_s(&pb, TS_PART_FC1, 1e-9, m, n, k, 4),
                       in16 + ts_accum_added_s(ts_accum_curve_for(g), in16, hbm_s(s, 4 * m * n * 2 * g)), 1e-15);
    pb.train.stack.grad_accum_bytes = 6;
    cr_expect_float_eq(ts_wgrad_op_s(&pb, TS_PART_FC1, 1e-9, m, n, k, 4), in16, 1e-15);
}

/* DeepSeek-V3 in fp8 over EP 8: 32 local experts of 7168 × 2048 see 1024 tokens each, so their
 * weight gradients are memory-bound; the program's weight-gradient GEMMs of a MoE layer cost
 * what the closed form charges the layer. */
Test(roofline, moe_wgrad_closed_form_is_the_programs) {
    ts_problem pb = test_problem("deepseek-v3", "h100-sxm-dgx", 8, 8, 4096, 1);
    ts_train_set_dtype(&pb.train, TS_DTYPE_FP8);
    ts_layout l = test_layout("dp=8,tp=1,pp=1,cp=1,ep=8,sp=0,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_shard sh = {.tp = 1, .cp = 1, .ep = 8, .sp = 0, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_layer_cost moe;
    ts_layer_cost_of(&pb, &sh, 1, &moe);

    ts_program p;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &p), TS_OK, "%s", ts_error_message());
    int layer = pb.model.layers - 2; /* a MoE layer (the first three are dense) */
    cr_assert(ts_model_layer_is_moe(&pb.model, layer));
    const ts_stage_program *sp = &p.stages[0];
    double wgrad_s = 0, expert_compute_s = 0, expert_s = 0;
    for (int i = 0; i < sp->n_ops; i++) {
        const ts_op *op = &sp->ops[i];
        if (op->kind != TS_OP_GEMM || op->phase != TS_PHASE_WGRAD || op->layer != layer || op->mb != 0) continue;
        double t = ts_op_cost_s(&pb, &l, op);
        wgrad_s += t;
        if (op->part == TS_PART_EXPERT_FC1 || op->part == TS_PART_EXPERT_FC2) {
            expert_s += t;
            double one = 2.0 * op->m * op->n * op->k;
            expert_compute_s += ts_gemm_bwd_scale(&pb.sys, TS_DTYPE_FP8) *
                                ts_grouped_gemm_s(&pb.sys, TS_DTYPE_FP8, op->m, op->n, op->k, op->flops / one, op->k,
                                                  pb.train.moe_grouped_gemm, pb.train.stack.grouped_gemm_streams);
        }
    }
    ts_program_free(&p);
    cr_expect(expert_s > 1.2 * expert_compute_s, "experts' weight gradients memory-bound: %g s against %g s of compute",
              expert_s, expert_compute_s);
    cr_expect(fabs(wgrad_s / moe.wgrad_s - 1) < 1e-9, "program %g s, closed form %g s", wgrad_s, moe.wgrad_s);
}
