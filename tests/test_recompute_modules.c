/* Megatron-Core's recompute modules under recompute=selective (program/problem.h
 * ts_recompute_module): what each drops from the activations and redoes in backward, in the
 * closed form (planner/layer.c) and the step program (program/program.c), and Megatron-Core's
 * refusals of them. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "planner/cost.h"
#include "planner/layer.h"
#include "program/program.h"
#include "program/recipe.h"
#include "tests/helpers.h"

#define RCM(m) TS_RCM_BIT(TS_RCM_##m)

/* The layer's costs under none and selective with `modules`. */
static void costs(ts_problem pb, const ts_shard *in, int moe, unsigned modules, ts_layer_cost *none,
                  ts_layer_cost *sel) {
    pb.train.recompute_modules = modules;
    ts_shard sh = *in;
    sh.recompute = TS_RECOMPUTE_NONE;
    ts_layer_cost_of(&pb, &sh, moe, none);
    sh.recompute = TS_RECOMPUTE_SELECTIVE;
    ts_layer_cost_of(&pb, &sh, moe, sel);
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

/* Megatron-Core's default, core_attn, is the attention core again: under fused attention it
 * keeps nothing less; no module at all redoes nothing. */
Test(recompute_modules, core_attn_is_the_default_and_the_attention_core) {
    ts_problem pb = test_problem("llama2-70b", "h100-sxm-dgx", 64, 64, 4096, 1);
    cr_expect_eq(pb.train.recompute_modules, TS_RCM_DEFAULT);
    ts_shard sh = {.tp = 8, .cp = 1, .ep = 1, .sp = 1, .mbs = 1};
    ts_layer_cost none, sel, empty_none, empty;
    costs(pb, &sh, 0, TS_RCM_DEFAULT, &none, &sel);
    ts_layer_fwd attn;
    ts_layer_attention_of(&pb, &sh, &attn);
    cr_expect(close_to(sel.recompute_s, attn.attn_fwd_s * pb.compute_scale), "%g vs %g", sel.recompute_s,
              attn.attn_fwd_s);
    cr_expect(close_to(sel.act_bytes, none.act_bytes), "fused attention keeps no scores to drop");
    costs(pb, &sh, 0, 0, &empty_none, &empty);
    cr_expect_eq(empty.recompute_s, 0);
    cr_expect(close_to(empty.act_bytes, empty_none.act_bytes));
    cr_expect(close_to(empty.hw_flops, empty.model_flops));
}

/* mla_up_proj drops q, k and v (16-bit, 2·T·heads·(2·qk + v) bytes) and redoes the GEMMs that
 * make them from the latents: DeepSeek-V3's q up-projection (1536 → 128·192) and kv
 * up-projection (512 → 128·256). */
Test(recompute_modules, mla_up_proj_drops_q_k_v_and_redoes_the_up_projections) {
    ts_problem pb = test_problem("deepseek-v3", "h100-sxm-dgx", 64, 64, 4096, 1);
    ts_shard sh = {.tp = 1, .cp = 1, .ep = 8, .sp = 0, .mbs = 1};
    ts_layer_cost none, sel, core;
    costs(pb, &sh, 1, RCM(MLA_UP_PROJ), &none, &sel);
    double T = 4096, heads = 128;
    cr_expect(close_to(none.act_bytes - sel.act_bytes, 2.0 * T * heads * (2.0 * 192 + 128)), "dropped %g",
              none.act_bytes - sel.act_bytes);
    double up = ts_gemm_s(&pb.sys, TS_DTYPE_BF16, T, heads * 192, 1536) + ts_gemm_s(&pb.sys, TS_DTYPE_BF16, T, heads * 256, 512);
    cr_expect(close_to(sel.recompute_s, up * pb.compute_scale), "recompute %g, up-projections %g", sel.recompute_s, up);
    cr_expect(close_to(sel.hw_flops - sel.model_flops, 2.0 * T * (heads * 192 * 1536 + heads * 256 * 512)));
    costs(pb, &sh, 1, RCM(MLA_UP_PROJ) | RCM(CORE_ATTN), &none, &core);
    cr_expect_gt(core.recompute_s, sel.recompute_s);
}

/* mlp rebuilds a dense layer's MLP block from its input: its activations and its norm's output
 * go, its forward (and under TP its gather and reduce-scatter) comes again; a MoE layer's block
 * is untouched (Megatron-Core: "mlp" is the dense MLP submodule). */
Test(recompute_modules, mlp_rebuilds_the_dense_block_with_its_tp_collectives) {
    ts_problem pb = test_problem("llama2-70b", "h100-sxm-dgx", 64, 64, 4096, 1);
    ts_shard sh = {.tp = 8, .cp = 1, .ep = 1, .sp = 1, .mbs = 1};
    ts_layer_cost none, sel, ln;
    costs(pb, &sh, 0, RCM(MLP), &none, &sel);
    double T = 4096, h = 8192, f = 28672.0 / 8;
    /* gate, up (16-bit each), the product (FC2's input) and the norm's output, TP-split */
    cr_expect(close_to(none.act_bytes - sel.act_bytes, T * (4.0 * f + 2.0 * f) + 2.0 * T * h / 8), "dropped %g",
              none.act_bytes - sel.act_bytes);
    cr_expect_gt(sel.recompute_s, 0);
    cr_expect_gt(sel.tp_s, none.tp_s, "the block's SP gather and reduce-scatter again");
    /* layernorm beside it rebuilds the first norm only: the block rebuilds the second */
    costs(pb, &sh, 0, RCM(MLP) | RCM(LAYERNORM), &none, &ln);
    cr_expect(close_to(sel.act_bytes - ln.act_bytes, 2.0 * T * h / 8), "%g", sel.act_bytes - ln.act_bytes);
    ts_problem moe = test_problem("mixtral-8x7b", "h100-sxm-dgx", 64, 64, 4096, 1);
    ts_shard msh = {.tp = 1, .cp = 1, .ep = 8, .sp = 0, .mbs = 1};
    costs(moe, &msh, 1, RCM(MLP), &none, &sel);
    cr_expect(close_to(sel.act_bytes, none.act_bytes), "mlp leaves a MoE layer's block alone");
}

/* moe rebuilds the MoE block from the norm's output: its expert activations go, and the
 * dispatch and combine run a third time; moe_act drops the routed experts' FC2 inputs alone. */
Test(recompute_modules, moe_dispatches_again_and_moe_act_drops_the_activation) {
    ts_problem pb = test_problem("mixtral-8x7b", "h100-sxm-dgx", 64, 64, 4096, 1);
    ts_shard sh = {.tp = 1, .cp = 1, .ep = 8, .sp = 0, .mbs = 1};
    ts_layer_cost none, sel, act;
    costs(pb, &sh, 1, RCM(MOE), &none, &sel);
    cr_expect(close_to(sel.ep_s, 1.5 * none.ep_s), "ep %g vs %g", sel.ep_s, none.ep_s);
    cr_expect_lt(sel.act_bytes, none.act_bytes);
    costs(pb, &sh, 1, RCM(MOE_ACT), &none, &act);
    ts_mlp_recipe mr;
    ts_mlp_recipe_of(&pb, &sh, 1, &mr);
    cr_expect(close_to(none.act_bytes - act.act_bytes, mr.routed_tokens * 2.0 * 14336), "dropped %g",
              none.act_bytes - act.act_bytes);
    cr_expect(close_to(act.ep_s, none.ep_s));
    cr_expect_lt(act.recompute_s, sel.recompute_s);
}

/* Megatron-Core refuses mla_up_proj without MLA and moe_act without the grouped GEMM
 * (transformer_config.py); so does the problem. */
Test(recompute_modules, megatron_core_refusals) {
    ts_model m;
    ts_system s;
    cr_assert_eq(ts_model_load("llama3-8b", &m), TS_OK);
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &s), TS_OK);
    ts_train t;
    ts_train_defaults(&t);
    t.recompute_modules = RCM(MLA_UP_PROJ);
    ts_problem pb;
    cr_expect_eq(ts_problem_init(&pb, &m, &s, &t, 8), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "mla_up_proj") != NULL, "%s", ts_error_message());
    ts_error_clear();
    cr_assert_eq(ts_model_load("mixtral-8x7b", &m), TS_OK, "%s", ts_error_message());
    t.recompute_modules = RCM(MOE_ACT);
    t.moe_grouped_gemm = 0;
    cr_expect_eq(ts_problem_init(&pb, &m, &s, &t, 8), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "grouped GEMM") != NULL, "%s", ts_error_message());
    ts_error_clear();
    t.recompute_modules = 1u << TS_RCM_COUNT;
    t.moe_grouped_gemm = 1;
    cr_expect_eq(ts_problem_init(&pb, &m, &s, &t, 8), TS_ERR_INPUT);
    ts_error_clear();
    char buf[64];
    cr_expect_str_eq(ts_recompute_modules_format(RCM(MLA_UP_PROJ) | RCM(MLP), ", ", "\"", buf, sizeof buf),
                     "\"mla_up_proj\", \"mlp\"");
}

/* The step program replays each module's forward ops in the recompute phase, before the
 * layer's backward: layernorm both norms, mlp the dense block (its norm, FC1, activation, FC2),
 * core_attn nothing when not asked. */
Test(recompute_modules, program_replays_the_modules_ops) {
    ts_problem pb = test_problem("tiny", "h100-sxm-dgx", 1, 8, 256, 1);
    pb.train.recompute_modules = RCM(LAYERNORM) | RCM(MLP);
    ts_layout l = test_layout("dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=selective");
    l.microbatches = 8;
    ts_program prog;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &prog), TS_OK, "%s", ts_error_message());
    int count[TS_PART_COUNT] = {0};
    const ts_stage_program *sp = &prog.stages[0];
    for (int i = 0; i < sp->n_ops; i++)
        if (sp->ops[i].phase == TS_PHASE_RECOMPUTE) count[sp->ops[i].part]++;
    int per = 8 * pb.model.layers; /* every layer of every micro-batch */
    cr_expect_eq(count[TS_PART_NORM1], per);
    cr_expect_eq(count[TS_PART_NORM2], per, "the block's norm, once");
    cr_expect_eq(count[TS_PART_FC1], per);
    cr_expect_eq(count[TS_PART_ACT], per);
    cr_expect_eq(count[TS_PART_FC2], per);
    cr_expect_eq(count[TS_PART_ATTN], 0, "core_attn was not asked");
    cr_expect_eq(count[TS_PART_QKV], 0);
    ts_program_free(&prog);
}

/* The plan's head line says what selective recomputes when it is not Megatron-Core's default. */
Test(recompute_modules, plan_says_the_modules) {
    cli_result r = run_cli("plan", "--model", "deepseek-v3", "--system", "b200-dgx", "--gpus", "256", "--global-batch",
                           "2048", "--dtype", "fp8", "--fix", "tp=1,pp=16,ep=8,mbs=1,recompute=selective",
                           "--recompute-modules", "mlp,mla_up_proj", "--partition", "uniform", "--top", "1", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "flash attention, selective recompute of mla_up_proj,mlp\n") != NULL, "%s", r.out);
    cli_result_free(&r);
    r = run_cli("plan", "--model", "deepseek-v3", "--system", "b200-dgx", "--gpus", "256", "--global-batch", "2048",
                "--dtype", "fp8", "--fix", "tp=1,pp=16,ep=8,mbs=1", "--partition", "uniform", "--top", "1", NULL);
    cr_expect(strstr(r.out, "selective recompute of") == NULL, "the default is not said: %s", r.out);
    cli_result_free(&r);
}
