/* program/recipe.h: the layer recipe's sizes, and local attention's share of the core. The
 * closed form and the program builder both read the recipe (no formula twice), so the golden
 * outputs pin what they cost; here, the recipe's own arithmetic on cases with exact answers. */
#include <criterion/criterion.h>
#include <math.h>

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
