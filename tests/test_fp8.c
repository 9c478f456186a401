/* FP8 as Transformer Engine runs it (program/recipe.c, planner/cost.c): which GEMMs run FP8, the
 * FP8 GEMM curve, attention left in BF16, the cast bytes in the program's ops, and the closed form
 * against the simulator under fp8. */
#include <criterion/criterion.h>
#include <math.h>

#include "planner/cost.h"
#include "planner/layer.h"
#include "planner/op_cost.h"
#include "planner/problem.h"
#include "program/program.h"
#include "program/recipe.h"
#include "sim/engine.h"
#include "tests/helpers.h"

static ts_problem with_dtype(ts_problem pb, ts_dtype dt) {
    ts_train_set_dtype(&pb.train, dt);
    return pb;
}

static ts_layout layout(const char *text) {
    ts_layout l;
    ts_error_clear();
    cr_assert_eq(ts_layout_parse("test", text, &l), TS_OK, "%s: %s", text, ts_error_message());
    return l;
}

/* Under fp8 the linear layers run FP8, the router, the LM head and unfused scores BF16; other
 * dtypes run everything in their own. */
Test(fp8, which_gemms_run_fp8) {
    ts_problem pb = with_dtype(test_problem("mixtral-8x7b", "h100-sxm-dgx", 8, 8, 4096, 1), TS_DTYPE_FP8);
    static const int fp8_parts[] = {TS_PART_QKV, TS_PART_PROJ, TS_PART_FC1, TS_PART_FC2, TS_PART_EXPERT_FC1,
                                    TS_PART_EXPERT_FC2};
    for (size_t i = 0; i < sizeof fp8_parts / sizeof fp8_parts[0]; i++)
        cr_expect_eq(ts_gemm_dtype(&pb, fp8_parts[i]), TS_DTYPE_FP8, "%s", ts_part_names[fp8_parts[i]]);
    cr_expect_eq(ts_gemm_dtype(&pb, TS_PART_ROUTER), TS_DTYPE_BF16);
    cr_expect_eq(ts_gemm_dtype(&pb, TS_PART_HEAD), TS_DTYPE_BF16);
    cr_expect_eq(ts_gemm_dtype(&pb, TS_PART_ATTN), TS_DTYPE_BF16);
    cr_expect_eq(ts_attention_dtype(&pb), TS_DTYPE_BF16);
    pb.train.fp8_attention = 1;
    cr_expect_eq(ts_attention_dtype(&pb), TS_DTYPE_FP8);
    ts_problem f32 = with_dtype(pb, TS_DTYPE_FP32);
    cr_expect_eq(ts_gemm_dtype(&f32, TS_PART_QKV), TS_DTYPE_FP32);
    cr_expect_eq(ts_gemm_dtype(&f32, TS_PART_HEAD), TS_DTYPE_FP32);
}

/* The FP8 curve is the system's own, not the BF16 curve at the FP8 peak: an FP8 GEMM of 5.5e11
 * FLOPs is 1.87× a BF16 one (the paired measurement's 0.936 of twice the peak), and without a
 * curve FP8 falls back to 0.9 of the BF16 efficiency. */
Test(fp8, gemm_curve_and_fallback) {
    ts_system s;
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK, "%s", ts_error_message());
    cr_assert_gt(s.gemm_eff_fp8.n, 0);
    double m = 8192, n = 8192, k = 4096, flops = 2 * m * n * k;
    double speedup = ts_gemm_s(&s, TS_DTYPE_BF16, m, n, k) / ts_gemm_s(&s, TS_DTYPE_FP8, m, n, k);
    cr_expect(speedup > 1.8 && speedup < 1.95, "FP8 GEMM speed-up %.3f", speedup);
    s.gemm_eff_fp8.n = 0;
    cr_expect(fabs(ts_gemm_eff(&s, TS_DTYPE_FP8, flops) - 0.9 * ts_gemm_eff(&s, TS_DTYPE_BF16, flops)) < 1e-15);
}

/* The backward's FP8 GEMMs run with split accumulation (efficiency.gemm_fp8_bwd): the closed form
 * charges dgrad and wgrad 1/0.909 of the curve's time, the simulator each backward GEMM op the
 * same; the forward and BF16 GEMMs are as the curve gives. */
Test(fp8, backward_gemms_split_accumulate) {
    ts_problem f8 = with_dtype(test_problem("llama2-70b", "h100-sxm-dgx", 64, 64, 4096, 1), TS_DTYPE_FP8);
    /* main_grad's accumulation (planner/wgrad_accum.h) left out: what it adds depends on the
     * GEMM's length, which the split accumulation changes */
    f8.train.stack.grad_accum_bytes = 6;
    cr_assert_eq(f8.sys.gemm_fp8_bwd_eff, 0.909);
    cr_expect(fabs(ts_gemm_bwd_scale(&f8.sys, TS_DTYPE_FP8) - 1 / 0.909) < 1e-12);
    cr_expect_eq(ts_gemm_bwd_scale(&f8.sys, TS_DTYPE_BF16), 1.0);
    ts_problem fast = f8;
    fast.sys.gemm_fp8_bwd_eff = 0;
    ts_shard sh = {.tp = 8, .cp = 1, .ep = 1, .sp = 1, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_layer_cost a, b;
    ts_layer_cost_of(&fast, &sh, 0, &a);
    ts_layer_cost_of(&f8, &sh, 0, &b);
    ts_layer_fwd p;
    ts_layer_attention_of(&f8, &sh, &p);
    cr_expect_eq(b.fwd_s, a.fwd_s, "the forward accumulates fast");
    cr_expect_gt(b.bwd_s, a.bwd_s);
    cr_expect(fabs((b.wgrad_s - a.wgrad_s) * 2 - (b.bwd_s - a.bwd_s)) < 1e-12, "dgrad and wgrad alike");
    /* the simulator's op: a backward FP8 GEMM at 1/0.909 of its forward twin */
    ts_layout l = layout("dp=2,tp=8,pp=4,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_op op = {.kind = TS_OP_GEMM, .part = TS_PART_FC1, .phase = TS_PHASE_FWD, .m = 4096, .n = 7168, .k = 8192};
    op.flops = 2.0 * op.m * op.n * op.k;
    double fwd = ts_op_cost_s(&f8, &l, &op);
    op.phase = TS_PHASE_WGRAD;
    cr_expect(fabs(ts_op_cost_s(&f8, &l, &op) / fwd - 1 / 0.909) < 1e-9);
}

/* A Llama-70B-class layer (tp=8 with SP, mbs 1, seq 4096) in the closed form: FP8 against BF16
 * within the published 1.3-1.55× of Megatron-Core recipes; attention costs the same. */
Test(fp8, llama70b_layer_speedup_in_published_band) {
    ts_problem bf = test_problem("llama2-70b", "h100-sxm-dgx", 64, 64, 4096, 1);
    ts_problem f8 = with_dtype(bf, TS_DTYPE_FP8);
    ts_shard sh = {.tp = 8, .cp = 1, .ep = 1, .sp = 1, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_layer_cost a, b;
    ts_layer_cost_of(&bf, &sh, 0, &a);
    ts_layer_cost_of(&f8, &sh, 0, &b);
    double speedup = (a.fwd_s + a.bwd_s) / (b.fwd_s + b.bwd_s);
    cr_expect(speedup >= 1.3 && speedup <= 1.55, "FP8 layer speed-up %.3f", speedup);
    cr_expect_eq(a.model_flops, b.model_flops);
    ts_layer_fwd pa, pf;
    ts_layer_attention_of(&bf, &sh, &pa);
    ts_layer_attention_of(&f8, &sh, &pf);
    cr_expect_eq(pf.attn_fwd_s, pa.attn_fwd_s, "attention stays BF16 under fp8");
    cr_expect_eq(pf.attn_bwd_s, pa.attn_bwd_s);
    cr_expect_lt(pf.gemm_s, pa.gemm_s);
    f8.train.fp8_attention = 1;
    ts_layer_attention_of(&f8, &sh, &pf);
    cr_expect_lt(pf.attn_fwd_s, pa.attn_fwd_s, "--fp8-attention prices the core at the FP8 rate");
}

/* The CP ring's op carries the attention it runs beside (planner/op_cost.c): that attention is
 * BF16 under fp8 as the attention op is, so the ring op costs what it costs in BF16; with
 * --fp8-attention both run at the FP8 rate. */
Test(fp8, cp_ring_beside_bf16_attention) {
    ts_problem bf = test_problem("llama2-70b", "h100-sxm-dgx", 64, 64, 8192, 1);
    ts_problem f8 = with_dtype(bf, TS_DTYPE_FP8);
    ts_layout l = layout("dp=4,tp=8,pp=1,cp=2,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_op ring = {.kind = TS_OP_COLL, .part = TS_PART_CP_RING, .phase = TS_PHASE_FWD, .group = TS_GROUP_CP,
                  .coll = TS_COLL_ALLGATHER, .m = 1, .n = 64e6, .flops = 4e13, .bytes = 128e6};
    ts_op attn = {.kind = TS_OP_ATTENTION, .phase = TS_PHASE_FWD, .m = 2, .flops = 4e13};
    double ring_bf = ts_op_cost_s(&bf, &l, &ring), attn_bf = ts_op_cost_s(&bf, &l, &attn);
    cr_expect_geq(ring_bf, attn_bf, "the ring op spans its attention");
    cr_expect_eq(ts_op_cost_s(&f8, &l, &ring), ring_bf, "BF16 attention beside the ring under fp8");
    cr_expect_eq(ts_op_cost_s(&f8, &l, &attn), attn_bf);
    f8.train.fp8_attention = 1;
    cr_expect_lt(ts_op_cost_s(&f8, &l, &ring), ring_bf, "--fp8-attention: the ring's attention at the FP8 rate");
}

/* Cast bytes per GEMM: c·m·k forward, c·m·n backward, c = 4 (delayed), 6 (tensorwise), 4.0625
 * (mxfp8, blockwise); on a GPU whose FP8 GEMMs take any layout (B200) the tensor-scaled recipes
 * write no transposed copy, 3 and 5; none under bf16. */
Test(fp8, cast_bytes_per_recipe) {
    static const struct {
        const char *system;
        double per_elem[TS_FP8_RECIPE_COUNT];
    } gpus[] = {{"h100-sxm-dgx", {4.0, 6.0, 4.0625, 4.0625}}, {"b200-dgx", {3.0, 5.0, 4.0625, 4.0625}}};
    for (size_t g = 0; g < sizeof gpus / sizeof gpus[0]; g++) {
        ts_problem pb = test_problem("llama2-7b", gpus[g].system, 8, 8, 4096, 1);
        ts_shard sh = {.tp = 1, .cp = 1, .ep = 1, .sp = 0, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
        ts_attn_recipe a;
        ts_mlp_recipe r;
        ts_attn_recipe_of(&pb, &sh, &a);
        ts_mlp_recipe_of(&pb, &sh, 0, &r);
        cr_expect_eq(a.fp8_cast_bytes[0] + a.fp8_cast_bytes[1] + a.fp8_cast_bwd_bytes, 0);
        cr_expect_eq(r.fp8_cast_bytes[0] + r.fp8_cast_bytes[1] + r.fp8_cast_bwd_bytes[0] + r.fp8_cast_bwd_bytes[1], 0);
        pb = with_dtype(pb, TS_DTYPE_FP8);
        for (int rc = 0; rc < TS_FP8_RECIPE_COUNT; rc++) {
            pb.train.fp8_recipe = (ts_fp8_recipe)rc;
            ts_attn_recipe_of(&pb, &sh, &a);
            ts_mlp_recipe_of(&pb, &sh, 0, &r);
            double T = 4096, h = 4096, f = 11008, c = gpus[g].per_elem[rc];
            cr_expect_eq(a.fp8_cast_bytes[0], c * T * h, "%s %s", gpus[g].system, ts_fp8_recipe_names[rc]);
            cr_expect_eq(a.fp8_cast_bwd_bytes, c * T * (3 * h + h));
            cr_expect_eq(r.fp8_cast_bytes[1], c * T * f);
            cr_expect_eq(r.fp8_cast_bwd_bytes[0], c * T * 2 * f);
        }
    }
}

/* Bytes of the step program's ops of `kind` (or of `part` when kind < 0). */
static double program_bytes(const ts_problem *pb, const ts_layout *l, int kind, int part) {
    ts_program prog;
    ts_error_clear();
    cr_assert_eq(ts_program_build(pb, l, NULL, &prog), TS_OK, "%s", ts_error_message());
    double sum = 0;
    for (int s = 0; s < prog.pp; s++)
        for (int i = 0; i < prog.stages[s].n_ops; i++) {
            const ts_op *op = &prog.stages[s].ops[i];
            if (kind >= 0 ? op->kind == kind : op->part == part) sum += op->bytes;
        }
    ts_program_free(&prog);
    return sum;
}

static double elementwise_bytes(const ts_problem *pb, const ts_layout *l) {
    return program_bytes(pb, l, TS_OP_ELEMENTWISE, -1);
}

/* The step program carries the casts in its element-wise ops under fp8, and only then: per layer,
 * micro-batch and pass exactly the recipe's bytes. */
Test(fp8, program_carries_cast_bytes) {
    ts_layout l = layout("dp=1,tp=2,pp=2,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none");
    ts_problem bf = test_problem("llama2-7b", "h100-sxm-dgx", 4, 4, 2048, 1);
    ts_problem f8 = with_dtype(bf, TS_DTYPE_FP8);
    double extra = elementwise_bytes(&f8, &l) - elementwise_bytes(&bf, &l);
    ts_shard sh = {.tp = 2, .cp = 1, .ep = 1, .sp = 1, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_attn_recipe a;
    ts_mlp_recipe r;
    ts_attn_recipe_of(&f8, &sh, &a);
    ts_mlp_recipe_of(&f8, &sh, 0, &r);
    double per_layer = a.fp8_cast_bytes[0] + a.fp8_cast_bytes[1] + a.fp8_cast_bwd_bytes + r.fp8_cast_bytes[0] +
                       r.fp8_cast_bytes[1] + r.fp8_cast_bwd_bytes[0] + r.fp8_cast_bwd_bytes[1];
    double want = per_layer * f8.model.layers * 4; /* 4 micro-batches */
    cr_expect_gt(per_layer, 0);
    cr_expect(fabs(extra - want) <= 1e-9 * want, "program adds %g cast bytes, recipe %g", extra, want);
}

/* The simulator prices the same FP8 work as the closed form (tests/test_sim_program.c's 2%). */
Test(fp8, closed_form_within_2_percent_of_simulator) {
    static const char *const layouts[] = {
        "dp=8,tp=8,pp=1,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=1,sched=1f1b,recompute=none",
        "dp=2,tp=8,pp=4,cp=1,ep=1,sp=1,zero=1,mbs=1,vpp=5,sched=interleaved,recompute=none",
        "dp=4,tp=4,pp=4,cp=1,ep=1,sp=0,zero=0,mbs=2,vpp=1,sched=gpipe,recompute=full",
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        ts_layout l = layout(layouts[i]);
        ts_problem pb = with_dtype(test_problem("llama2-70b", "h100-sxm-dgx", ts_rank_count(&l), 256, 4096, 1),
                                   TS_DTYPE_FP8);
        ts_eval e;
        ts_error_clear();
        cr_assert_eq(ts_evaluate(&pb, &l, &e), TS_OK, "%s", ts_error_message());
        ts_program prog;
        ts_sim_result r;
        cr_assert_eq(ts_program_build(&pb, &l, NULL, &prog), TS_OK, "%s", ts_error_message());
        cr_assert_eq(ts_simulate(&pb, &prog, NULL, &r), TS_OK, "%s", ts_error_message());
        double err = (r.step_s - e.step_s) / e.step_s;
        cr_expect(fabs(err) <= 0.02, "%s: simulated %.4f s, closed form %.4f s (%+.2f%%)", layouts[i], r.step_s,
                  e.step_s, 100 * err);
        ts_sim_result_free(&r);
        ts_program_free(&prog);
    }
}

/* DeepSeek-V3's block scaling: an fp32 scale per 128×128 weight block beside the FP8 weight and
 * its transpose; per-tensor recipes 2 bytes (1 where FP8 GEMMs take any layout, B200: no
 * transpose; 0 beside FP8 primary weights); MXFP8 an E8M0 scale per 32, row- and column-wise. */
Test(fp8, weight_copy_bytes_per_recipe) {
    static const struct {
        const char *system;
        double per_weight[TS_FP8_RECIPE_COUNT], param_gather[TS_FP8_RECIPE_COUNT];
    } gpus[] = {
        {"h100-sxm-dgx", {2.0, 2.0, 2.0625, 2.0 + 8.0 / 16384}, {1.0, 1.0, 1.03125, 1.0 + 4.0 / 16384}},
        {"b200-dgx", {1.0, 1.0, 2.0625, 2.0 + 8.0 / 16384}, {0.0, 0.0, 1.03125, 1.0 + 4.0 / 16384}},
    };
    for (size_t g = 0; g < sizeof gpus / sizeof gpus[0]; g++) {
        ts_problem pb = with_dtype(test_problem("llama2-7b", gpus[g].system, 8, 8, 4096, 1), TS_DTYPE_FP8);
        for (int rc = 0; rc < TS_FP8_RECIPE_COUNT; rc++) {
            pb.train.fp8_recipe = (ts_fp8_recipe)rc;
            pb.train.fp8_param_gather = 0;
            cr_expect_eq(ts_fp8_weight_copy_bytes(&pb), gpus[g].per_weight[rc], "%s %s", gpus[g].system,
                         ts_fp8_recipe_names[rc]);
            pb.train.fp8_param_gather = 1;
            cr_expect_eq(ts_fp8_weight_copy_bytes(&pb), gpus[g].param_gather[rc], "%s %s, FP8 primary weights",
                         gpus[g].system, ts_fp8_recipe_names[rc]);
        }
        pb.train.dtype = TS_DTYPE_BF16;
        cr_expect_eq(ts_fp8_weight_copy_bytes(&pb), 0);
    }
}

/* Under fp8 the inputs only a GEMM keeps for its backward are its FP8 copy (TE 2.x keeps the
 * column-wise FP8 input): per token of a Llama-2-7B layer (SwiGLU, tp = 1) the QKV and first MLP
 * GEMMs' inputs (h each) and the second MLP GEMM's (f) drop from 2 bytes to 1 (+ the recipe's
 * scales); the norms' inputs and the attention's tensors stay 16-bit. */
Test(fp8, gemm_inputs_kept_in_fp8) {
    ts_problem bf = test_problem("llama2-7b", "h100-sxm-dgx", 8, 8, 4096, 1);
    ts_problem f8 = with_dtype(bf, TS_DTYPE_FP8);
    ts_shard sh = {.tp = 1, .cp = 1, .ep = 1, .sp = 0, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    double T = 4096, h = 4096, f = 11008;
    static const double per_elem[TS_FP8_RECIPE_COUNT] = {1.0, 1.0, 1.0 + 1.0 / 32, 1.0 + 4.0 / 128};
    ts_layer_cost a, b;
    ts_layer_cost_of(&bf, &sh, 0, &a);
    cr_expect_eq(ts_gemm_input_saved_bytes(&bf), 2.0);
    for (int rc = 0; rc < TS_FP8_RECIPE_COUNT; rc++) {
        f8.train.fp8_recipe = (ts_fp8_recipe)rc;
        ts_layer_cost_of(&f8, &sh, 0, &b);
        double saved = (2.0 - per_elem[rc]) * T * (2 * h + f) * bf.train.activation_scale;
        cr_expect(fabs(a.act_bytes - b.act_bytes - saved) <= 1e-9 * saved, "%s: %g saved, expected %g",
                  ts_fp8_recipe_names[rc], a.act_bytes - b.act_bytes, saved);
    }
}

/* --fp8-param-gather (Megatron-Core): FP8 primary weights, so ZeRO's parameter all-gathers carry
 * 1 byte per weight instead of 2, in the program and the closed form alike, and the weights
 * held drop by the 16-bit copy (the FP8 transpose stays beside the FP8 weight). */
Test(fp8, param_gather_in_fp8) {
    ts_layout l = layout("dp=8,tp=1,pp=1,cp=1,ep=1,sp=0,zero=3,mbs=1,vpp=1,sched=1f1b,recompute=full");
    ts_problem pb = with_dtype(test_problem("llama2-7b", "h100-sxm-dgx", 8, 64, 4096, 1), TS_DTYPE_FP8);
    ts_problem pg = pb;
    pg.train.fp8_param_gather = 1;
    cr_expect_eq(ts_weight_elem_bytes(&pb), 2.0);
    cr_expect_eq(ts_weight_elem_bytes(&pg), 1.0);
    cr_expect_eq(ts_fp8_weight_copy_bytes(&pg), 1.0);
    double b16 = program_bytes(&pb, &l, -1, TS_PART_PARAM_GATHER), b8 = program_bytes(&pg, &l, -1, TS_PART_PARAM_GATHER);
    cr_assert(b16 > 0);
    cr_expect(fabs(b8 / b16 - 0.5) < 1e-12, "gathered bytes %g -> %g", b16, b8);
    ts_eval a, b;
    cr_assert_eq(ts_evaluate(&pb, &l, &a), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_evaluate(&pg, &l, &b), TS_OK, "%s", ts_error_message());
    cr_expect(b.time.dp_comm < a.time.dp_comm, "DP %g -> %g s", a.time.dp_comm, b.time.dp_comm);
    cr_expect(b.mem.weights < a.mem.weights && b.mem.buffers < a.mem.buffers);
    pg.train.dtype = TS_DTYPE_BF16;
    cr_expect_eq(ts_weight_elem_bytes(&pg), 2.0, "no FP8 primary weights without fp8");
}

/* MXFP8 needs tensor cores that have it. */
Test(fp8, mxfp8_refused_without_hardware) {
    ts_model m;
    ts_system h100, b200;
    ts_train t;
    ts_problem pb;
    cr_assert_eq(ts_model_load("llama2-7b", &m), TS_OK);
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &h100), TS_OK);
    cr_assert_eq(ts_system_load("b200-dgx", &b200), TS_OK);
    ts_train_defaults(&t);
    ts_train_set_dtype(&t, TS_DTYPE_FP8);
    t.fp8_recipe = TS_FP8_MXFP8;
    ts_error_clear();
    cr_expect_eq(ts_problem_init(&pb, &m, &h100, &t, 8), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "no MXFP8") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_expect_eq(ts_problem_init(&pb, &m, &b200, &t, 8), TS_OK, "%s", ts_error_message());
}
