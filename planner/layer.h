/* One transformer layer, one micro-batch, one GPU: time, communication and activation memory
 * for a given shard (tp, cp, ep, sp, micro-batch) and recompute policy.
 *
 * The closed form the planner sums over stages; the formulas and their sources are in layer.c. */
#ifndef TS_LAYER_H
#define TS_LAYER_H

#include "planner/problem.h"
#include "program/recipe.h"


typedef struct {
    double fwd_s;       /* forward compute */
    double bwd_s;       /* backward compute (input + weight gradients), without recompute */
    double wgrad_s;     /* of bwd_s: weight-gradient GEMMs (W of zero-bubble) */
    double recompute_s; /* forward work repeated in backward */
    double tp_s;        /* exposed TP communication, forward + backward + recompute */
    double tp_split_w_s; /* the same when weight gradients run apart (ZB-H1): nothing hides the
                            backward's collectives */
    double cp_s;        /* exposed CP ring traffic */
    double ep_s;        /* exposed EP all-to-all */
    double ep_paired_s; /* the same when each forward runs beside another micro-batch's backward
                           (Megatron-Core's combined 1F1B, layer.c combined_exposed_s); ep_s
                           unless train.moe_combined_1f1b */
    double act_bytes;   /* activations kept from forward to backward */
    double peak_bytes;  /* transient extra while this layer runs backward (full recompute) */
    double model_flops; /* forward+backward model FLOPs on this GPU (non-causal convention) */
    double hw_flops;    /* model_flops plus recompute */
    double amax_gemms;  /* FP8 delayed scaling: GEMMs whose amaxes are reduced (program/recipe.h) */
    double amax_tp_s;   /* summed over a stage (planner/stages.c): one chunk's amax reductions, at
                           its forward's end and its backward's, over TP; 0 for a layer */
    double amax_dp_s;   /* and over DP×CP */
} ts_layer_cost;

/* Costs of a dense (moe = 0) or MoE (moe = 1) layer. */
void ts_layer_cost_of(const ts_problem *pb, const ts_shard *sh, int moe, ts_layer_cost *out);

/* The forward parts of a layer (per micro-batch): GEMM and attention-core times, element-wise
 * traffic, the GEMM weights a rank multiplies. */
typedef struct {
    double gemm_s;             /* forward GEMM time */
    double fp8_gemm_s;         /* of it, FP8 GEMMs' (their backward: planner/cost.h ts_gemm_bwd_scale) */
    double wgrad_s;            /* weight-gradient GEMM time in backward (≈ forward GEMM time) */
    double attn_fwd_s;         /* attention core forward */
    double attn_bwd_s;         /* attention core backward */
    double elem_bytes;         /* forward element-wise HBM traffic */
    double fp8_cast_bytes;     /* FP8 casts' HBM traffic in forward (0 unless fp8) */
    double fp8_cast_bwd_bytes; /* and in backward */
    double copy_bytes;         /* copies priced once each way (MoE: recipe.h copy_bytes) */
    double matmul_params_rank; /* GEMM weights this rank multiplies per token (active) */
    double amax_gemms;         /* FP8 delayed scaling: GEMMs whose amaxes are reduced */
    /* sizes of the attention block's recipe (program/recipe.h) that the rest of the layer reads */
    double q_heads, kv_heads, qk_dim, v_dim, core_flops, kv_block_bytes;
    ts_cp_pass cp_fwd, cp_bwd;
    double qkv_up_s, qkv_up_flops; /* MLA: of the GEMMs, the up-projections (recipe.h qkv_up) */
} ts_layer_fwd;

/* The attention block's parts alone: they depend on tp, cp and the micro-batch, not on ep, SP or
 * the MLP, so costing several of those for one shard computes them once. */
void ts_layer_attention_of(const ts_problem *pb, const ts_shard *sh, ts_layer_fwd *out);

/* The layer's costs under every recompute policy at once (out[rc]; sh->recompute is ignored),
 * from its attention parts (ts_layer_attention_of for the same tp, cp and micro-batch): what the
 * policies share is costed once. */
void ts_layer_costs_with(const ts_problem *pb, const ts_shard *sh, int moe, const ts_layer_fwd *attn,
                         ts_layer_cost out[TS_RECOMPUTE_COUNT]);

/* The LM head, final norm and loss on the last stage, as a layer-shaped cost; activations are
 * the fp32 logits (Korthikanti 2022, extra terms: 4·s·b·v/t). */
void ts_head_cost_of(const ts_problem *pb, const ts_shard *sh, ts_layer_cost *out);

/* The embedding on the first stage (memory bound) and its output kept per micro-batch. */
void ts_embed_cost_of(const ts_problem *pb, const ts_shard *sh, ts_layer_cost *out);

#endif
