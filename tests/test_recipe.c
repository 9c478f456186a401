/* program/recipe.h: the layer recipe's sizes, and local attention's share of the core. The
 * closed form and the program builder both read the recipe (no formula twice), so the golden
 * outputs pin what they cost; here, the recipe's own arithmetic on cases with exact answers. */
#include <criterion/criterion.h>
#include <math.h>

#include "planner/cost.h"
#include "planner/layer.h"
#include "program/recipe.h"
#include "tests/helpers.h"

static ts_shard one_gpu(void) {
    return (ts_shard){.tp = 1, .cp = 1, .ep = 1, .sp = 0, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
}

/* A window of s/2 on every layer leaves 1 − 1/4 of the causal pairs (s·w − w²/2 of s²/2); every
 * other layer local (Gemma 2) the mean of that and 1; chunks of s/4 leave a quarter. */
Test(recipe, local_attention_fraction) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 8, 8, 4096, 1);
    ts_model *m = &pb.model;
    cr_expect_eq(ts_local_attention_fraction(m, 4096), 1.0, "no local attention");
    m->window = (ts_window){.tokens = 2048, .full_every = 0, .chunked = 0};
    cr_expect(fabs(ts_local_attention_fraction(m, 4096) - 0.75) < 1e-15);
    cr_expect_eq(ts_local_attention_fraction(m, 2048), 1.0, "a window as long as the sequence changes nothing");
    m->window.full_every = 2;
    cr_expect(fabs(ts_local_attention_fraction(m, 4096) - 0.875) < 1e-15);
    m->window = (ts_window){.tokens = 1024, .full_every = 0, .chunked = 1};
    cr_expect(fabs(ts_local_attention_fraction(m, 4096) - 0.25) < 1e-15);
}

/* The core's FLOPs (model FLOPs too) take the fraction; the GEMMs do not. */
Test(recipe, local_attention_scales_the_core_only) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 8, 8, 4096, 1);
    ts_shard sh = one_gpu();
    ts_attn_recipe full, local;
    ts_attn_recipe_of(&pb, &sh, &full);
    pb.model.window = (ts_window){.tokens = 2048, .full_every = 0, .chunked = 0};
    ts_attn_recipe_of(&pb, &sh, &local);
    cr_expect(fabs(local.core_flops / full.core_flops - 0.75) < 1e-15, "%g", local.core_flops / full.core_flops);
    cr_expect_eq(local.n_qkv, full.n_qkv);
    cr_expect_eq(local.qkv[0].n, full.qkv[0].n);
    cr_expect_eq(local.matmul_params, full.matmul_params);
}

/* Llama-2-7B on one GPU: T = 4096 tokens, QKV 4096 → 3·4096 (MHA), MLP 3 matrices of 11008,
 * the core 2·T·s·a·(d_qk + d_v) over the full s², the TP collective 2·T·h bytes. */
Test(recipe, llama2_7b_sizes) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 8, 8, 4096, 1);
    ts_shard sh = one_gpu();
    ts_attn_recipe a;
    ts_mlp_recipe mlp;
    ts_attn_recipe_of(&pb, &sh, &a);
    ts_mlp_recipe_of(&pb, &sh, 0, &mlp);
    cr_expect_eq(a.tokens, 4096);
    cr_expect_eq(a.n_qkv, 1);
    cr_expect_eq(a.qkv[0].n, 3 * 4096.0);
    cr_expect_eq(a.core_flops, 2.0 * 4096 * 4096 * 32 * (128 + 128));
    cr_expect_eq(mlp.fc1.n, 2 * 11008.0);
    cr_expect_eq(mlp.fc2.k, 11008.0);
    cr_expect_eq(mlp.matmul_params, 3.0 * 4096 * 11008);
    cr_expect_eq(mlp.tp_bytes, 2.0 * 4096 * 4096);
    sh.tp = 2;
    sh.sp = 1;
    ts_mlp_recipe_of(&pb, &sh, 0, &mlp);
    cr_expect_eq(mlp.fc1.n, 11008.0, "the h→f side sharded over TP");
    ts_attn_recipe_of(&pb, &sh, &a);
    cr_expect_eq(a.q_heads, 16);
}

/* The CP block of each kind (recipe.c, "Context parallelism"): Llama-3-70B at 4K tokens, tp=8,
 * cp=2: T = 2048 tokens, one kv head per TP rank, B = 2·T·(2·1·128) bytes. */
Test(recipe, cp_kinds_sizes) {
    ts_problem pb = test_problem("llama3-70b", "h100-sxm-dgx", 16, 8, 4096, 1);
    ts_shard sh = {.tp = 8, .cp = 2, .ep = 1, .sp = 1, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_attn_recipe a;
    double B = 2.0 * 2048 * 2 * 128;
    ts_attn_recipe_of(&pb, &sh, &a);
    cr_expect_eq(a.kv_block_bytes, B);
    cr_expect_eq(a.core_kernels, 2);
    cr_expect_eq(a.cp_fwd.around[0].steps, 1);
    cr_expect_eq(a.cp_fwd.around[0].step_bytes, B);
    cr_expect_eq(a.cp_fwd.around[0].bytes, 2 * B, "in effect an all-gather of the cp blocks");
    cr_expect_eq(a.cp_fwd.around[1].coll, -1);
    cr_expect_eq(a.cp_bwd.around[0].step_bytes, 2 * B, "K, V and the dK, dV accumulator");
    cr_expect_eq(a.cp_bwd.around[1].steps, 1);
    cr_expect_eq(a.cp_bwd.around[1].step_bytes, B, "the accumulator's hop home");
    pb.train.cp_kind = TS_CP_ALLGATHER;
    ts_attn_recipe_of(&pb, &sh, &a);
    cr_expect_eq(a.cp_fwd.around[0].steps, 0);
    cr_expect_eq(a.cp_fwd.around[0].coll, TS_COLL_ALLGATHER);
    cr_expect_eq(a.cp_fwd.around[0].bytes, 2 * B);
    cr_expect_eq(a.cp_bwd.around[1].coll, TS_COLL_REDUCE_SCATTER);
    pb.train.cp_kind = TS_CP_A2A;
    ts_attn_recipe_of(&pb, &sh, &a);
    cr_expect_eq(a.core_kernels, 1, "Ulysses: one kernel over the whole sequence");
    cr_expect_eq(a.cp_fwd.around[0].coll, TS_COLL_ALLTOALL);
    cr_expect_eq(a.cp_fwd.around[0].bytes, 2.0 * 2048 * (8 + 2) * 128, "Q, K, V");
    cr_expect_eq(a.cp_fwd.around[1].bytes, 2.0 * 2048 * 8 * 128, "the output");
}

/* Ring CP priced as it runs: at 4K tokens with tp=8, cp=2 on H100s the CP pair sits on two nodes,
 * and a K/V block's transfer over the NIC outlasts the attention of the block beside it, so the
 * ring is exposed, by exactly max(0, transfer − block's attention) per step plus the backward's
 * hop home (cost.h ts_cp_ring_exposed_s). */
Test(recipe, cp_ring_exposed_per_step) {
    ts_problem pb = test_problem("llama3-70b", "h100-sxm-dgx", 16, 8, 4096, 1);
    const ts_system *s = &pb.sys;
    ts_shard sh = {.tp = 8, .cp = 2, .ep = 1, .sp = 1, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_attn_recipe a;
    ts_attn_recipe_of(&pb, &sh, &a);
    ts_link link = ts_group_link(s, sh.tp, sh.cp);
    cr_assert_eq(link, TS_LINK_NIC);
    double f = 0.5 * a.core_flops, fwd = ts_attention_s(s, pb.train.dtype, f, f / 2);
    double bwd = ts_attention_s(s, pb.train.dtype, 2.5 * f, 2.5 * f / 2);
    double x1 = ts_coll_s(s, TS_COLL_SENDRECV, 2, a.kv_block_bytes, link);
    double x2 = ts_coll_s(s, TS_COLL_SENDRECV, 2, 2 * a.kv_block_bytes, link);
    cr_expect_gt(x1, fwd / 2, "a block's transfer (%.2f us) outlasts its attention (%.2f us)", 1e6 * x1, 1e6 * fwd / 2);
    double want = fmax(0, x1 - fwd / 2) + fmax(0, x2 - bwd / 2) + x1;
    ts_layer_cost c;
    ts_layer_cost_of(&pb, &sh, 0, &c);
    cr_expect_gt(c.cp_s, 0);
    cr_expect(fabs(c.cp_s - want) <= 1e-12 * want, "cp_s %.9g s, want %.9g s", c.cp_s, want);
    /* Inside a node (tp=1, cp=2) the same blocks cross NVLink and hide behind their attention:
     * what is left is the backward's hop home. */
    sh.tp = 1;
    sh.sp = 0;
    ts_attn_recipe_of(&pb, &sh, &a);
    link = ts_group_link(s, sh.tp, sh.cp);
    ts_layer_cost_of(&pb, &sh, 0, &c);
    double hop = ts_coll_s(s, TS_COLL_SENDRECV, 2, a.kv_block_bytes, link);
    cr_expect(fabs(c.cp_s - hop) <= 1e-12 * hop, "cp_s %.9g s, the hop home %.9g s", c.cp_s, hop);
}

/* The attention output gate: its projection widens the QKV GEMM by the queries' width (Megatron-Core's
 * linear_qkv), which every TP rank splits as it splits Q; its element-wise product reads the gate and
 * the core's output and writes the result. The parameter count moves by the same h·a a layer. */
Test(recipe, attention_output_gate_widens_qkv) {
    ts_problem pb = test_problem("llama3-8b", "h100-sxm-dgx", 8, 8, 4096, 1);
    ts_shard sh = one_gpu();
    sh.tp = 2;
    ts_attn_recipe plain, gated;
    ts_attn_recipe_of(&pb, &sh, &plain);
    ts_param_count before, after;
    ts_model_params(&pb.model, &before);
    pb.model.attn_gate = 1;
    ts_attn_recipe_of(&pb, &sh, &gated);
    ts_model_params(&pb.model, &after);
    double a_rank = 32.0 / 2 * 128, T = 4096;
    cr_expect_eq(gated.qkv[0].n - plain.qkv[0].n, a_rank, "%g", gated.qkv[0].n - plain.qkv[0].n);
    cr_expect_eq(gated.matmul_params - plain.matmul_params, 4096 * a_rank);
    cr_expect_eq(gated.gate_bytes, 3 * 2 * T * a_rank);
    cr_expect_eq(plain.gate_bytes, 0);
    cr_expect_eq(gated.proj.k, plain.proj.k, "the output projection keeps its width");
    cr_expect_eq(gated.kv_block_bytes, plain.kv_block_bytes, "CP passes K and V only");
    cr_expect_eq(after.total - before.total, 32.0 * 4096 * 32 * 128);
    /* its backward keeps the gate and the core's output beside the gated product: two more 16-bit
     * tensors of the rank's query width a token */
    ts_layer_cost c_gated, c_plain;
    ts_layer_cost_of(&pb, &sh, 0, &c_gated);
    pb.model.attn_gate = 0;
    ts_layer_cost_of(&pb, &sh, 0, &c_plain);
    cr_expect(fabs((c_gated.act_bytes - c_plain.act_bytes) / pb.train.activation_scale - 2 * 2 * T * a_rank) < 1,
              "%g bytes more", c_gated.act_bytes - c_plain.act_bytes);
}
