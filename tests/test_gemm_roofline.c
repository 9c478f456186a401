/* GEMMs no faster than their HBM traffic (planner/cost.h ts_gemm_s, ts_gemm_memory_s,
 * ts_wgrad_gemm_s; planner/op_cost.h ts_wgrad_op_s): few tokens against a large weight, and the
 * weight gradient that accumulates into fp32 main_grad; the closed form and the step program
 * price them alike. */
#include <criterion/criterion.h>
#include <math.h>

#include "planner/cost.h"
#include "planner/layer.h"
#include "planner/moe_cost.h"
#include "planner/op_cost.h"
#include "planner/problem.h"
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

/* The weight gradient W(m×n) over k tokens reads its inputs and reads and writes W's gradient:
 * in fp32 where it accumulates into main_grad (8 bytes), else a 2-byte write. */
Test(roofline, wgrad_reads_and_writes_its_gradient) {
    ts_problem pb = test_problem("llama2-70b", "h100-sxm-dgx", 8, 8, 4096, 1);
    const ts_system *s = &pb.sys;
    double m = 6144, n = 16384, k = 1024, in = 1;
    double fused = 4 * (m * n * 8 + k * (m + n) * in), apart = 4 * (m * n * 2 + k * (m + n) * in);
    cr_expect_float_eq(ts_wgrad_gemm_s(s, 1e-9, m, n, k, 4, in, 1), hbm_s(s, fused), 1e-15);
    cr_expect_float_eq(ts_wgrad_gemm_s(s, 1e-9, m, n, k, 4, in, 0), hbm_s(s, apart), 1e-15);
    cr_expect_eq(ts_wgrad_gemm_s(s, 1.0, m, n, k, 4, in, 1), 1.0, "compute-bound: its compute");
    ts_problem cpu = test_problem("tiny", "cpu-localhost", 2, 8, 256, 1);
    cr_expect_eq(ts_wgrad_gemm_s(&cpu.sys, 1e-9, m, n, k, 4, in, 1), 1e-9, "CPU ranks: the curve");

    /* the stack decides: Megatron-Core accumulates in the GEMM (grad_accum_bytes 0), the 2021
     * Megatron-LM adds afterwards */
    cr_expect_float_eq(ts_wgrad_op_s(&pb, TS_PART_FC1, 1e-9, m, n, k, 4), hbm_s(s, 4 * (m * n * 8 + k * (m + n) * 2)),
                       1e-15);
    pb.train.stack.grad_accum_bytes = 6;
    cr_expect_float_eq(ts_wgrad_op_s(&pb, TS_PART_FC1, 1e-9, m, n, k, 4), hbm_s(s, 4 * (m * n * 2 + k * (m + n) * 2)),
                       1e-15);
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
                                                  pb.train.moe_grouped_gemm);
        }
    }
    ts_program_free(&p);
    cr_expect(expert_s > 1.2 * expert_compute_s, "experts' weight gradients memory-bound: %g s against %g s of compute",
              expert_s, expert_compute_s);
    cr_expect(fabs(wgrad_s / moe.wgrad_s - 1) < 1e-9, "program %g s, closed form %g s", wgrad_s, moe.wgrad_s);
}
