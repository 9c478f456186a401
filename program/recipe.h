/* The layer recipe: one transformer layer's work for one micro-batch on one rank, written once.
 *
 * A recipe lists the layer's GEMMs (forward shapes, as the kernels run them), its attention core,
 * its element-wise passes with their HBM bytes and its collectives with their bytes. It holds no
 * prices. Two readers use it and nothing else re-derives a layer's shapes:
 *   - the planner's closed form (planner/layer.c) prices and sums it;
 *   - the step-program builder (program/program.c) instantiates it per micro-batch, chunk and
 *     phase: forward, backward (input gradients from the same shapes transposed, weight
 *     gradients apart) and recompute.
 *
 * Notation (formulas and sources in recipe.c): b micro-batch, s sequence, T = b·s/cp tokens held
 * by this rank, h hidden, t TP, r = 1/t under SP else 1, a/g query/kv heads per TP rank. */
#ifndef TS_RECIPE_H
#define TS_RECIPE_H

#include "program/problem.h"

/* How one layer's work is sharded over a rank. */
typedef struct {
    int tp, cp, ep, sp, mbs;
    ts_recompute recompute;
    int etp; /* the experts' TP (ts_layout.etp); 0: tp */
} ts_shard;

/* The experts' TP degree of a shard: etp when set, else tp. */
int ts_shard_etp(const ts_shard *sh);

/* A GEMM C(m×n) = A(m×k)·B(k×n) in forward, `count` copies of it (local experts). `part` is the
 * ts_part (program/program.h) it belongs to. */
typedef struct {
    int part;
    double m, n, k, count;
} ts_gemm_shape;

#define TS_RECIPE_MAX_QKV 4

/* The precision a GEMM of part `part` (ts_part) runs in. Under fp8 the linear layers (QKV, the
 * output projection, the MLP, the experts and shared experts) run FP8, as Transformer Engine's
 * Linear / LayerNormLinear / LayerNormMLP / GroupedLinear modules do inside fp8_autocast; the
 * router, the LM head (Megatron-Core's output layer is not a TE module) and unfused attention's
 * score GEMMs stay BF16. Other dtypes: the step's dtype. */
ts_dtype ts_gemm_dtype(const ts_problem *pb, int part);
/* The fused attention core's precision: BF16 under fp8 (TE's DotProductAttention runs BF16
 * unless FP8 attention is asked for: train.fp8_attention), else the step's dtype. */
ts_dtype ts_attention_dtype(const ts_problem *pb);
/* Bytes per weight of the FP8 copies Transformer Engine keeps beside the 16-bit weights under
 * fp8 (the FP8 weight and, where the GPU's FP8 GEMMs are TN only, its transpose; MXFP8 row- and
 * column-wise with their scales); 0 unless fp8. */
double ts_fp8_weight_copy_bytes(const ts_problem *pb);

/* Bytes per parameter of the weights as held and all-gathered (ZeRO's parameter gathers): the
 * 16-bit weight (train.weight_bytes), or under fp8 with fp8_param_gather the FP8 primary weight,
 * 1 byte plus the recipe's scales (Megatron-Core --fp8-param-gather: "Keep the compute param in
 * fp8 (do not use any other intermediate dtype) and perform the param all-gather in fp8"; the
 * fp32 master copy stays in the optimizer states). ts_fp8_weight_copy_bytes then counts only
 * the copies beside it (the transpose). */
double ts_weight_elem_bytes(const ts_problem *pb);

/* Whether the FP8 recipe all-reduces its amaxes at the end of every fp8_autocast region
 * (Transformer Engine's DelayedScaling with reduce_amax, the default): fp8 with the delayed
 * recipe. Current (tensor-wise), MXFP8 and blockwise scaling take each tensor's scale from the
 * tensor itself and reduce nothing per region (recipe.c). */
int ts_fp8_amax_reduced(const ts_problem *pb);

/* Bytes of one amax reduction over `gemms` FP8 GEMMs (the recipes' amax_gemms summed over the
 * layers a rank holds): an fp32 amax per tensor, 3 tensors a GEMM in forward (input, weight,
 * output) and 2 in backward (output and input gradients), as Transformer Engine sizes its FP8
 * metadata (recipe.c). */
double ts_amax_reduce_bytes(double gemms, int forward);

/* Bytes per element of a GEMM input kept for the backward when only that GEMM needs it: 2 (16
 * bits), or under fp8 the FP8 copy Transformer Engine saves in place of it (TE 2.x linear.py:
 * "Discard row-wise data since it is not needed in backward pass", the column-wise FP8 input
 * kept for the weight gradient; DeepSeek-V3 §3.3.3 caches Linear inputs in FP8 likewise): 1
 * byte plus the recipe's scales (MXFP8 1/32, blockwise 4/128 per element). */
double ts_gemm_input_saved_bytes(const ts_problem *pb);

/* Bytes per element of a GEMM's inputs as the GEMM reads them: under fp8 the linear layers' FP8
 * copies (ts_gemm_input_saved_bytes), else the dtype's 2 bytes (4 in fp32). */
double ts_gemm_operand_bytes(const ts_problem *pb, int part);

/* One CP collective around the attention core (recipe.c, "Context parallelism"): a ts_coll
 * (models/coll.h) over the CP group of `bytes` (nccl-tests' size), or none when coll < 0. With
 * steps > 0 it runs as ring CP runs it, `steps` point-to-point transfers of `step_bytes` each to
 * the next rank of the ring, not as NCCL's collective. */
typedef struct {
    int coll;
    double bytes;
    int steps;
    double step_bytes;
} ts_cp_coll;

/* CP's exchange in one pass (forward, or backward) of the attention. `around[0]` comes before the
 * core: with ring steps it runs beside the core, each step overlapped with the kernel of the
 * block in flight; else it is exposed, the core waiting on it. `around[1]` follows the core,
 * exposed. */
typedef struct {
    ts_cp_coll around[2];
} ts_cp_pass;

/* The attention block: it depends on tp, cp and the micro-batch only. */
typedef struct {
    double tokens;                         /* T */
    double q_heads, kv_heads;              /* per TP rank; kv heads replicated when t > g */
    ts_gemm_shape qkv[TS_RECIPE_MAX_QKV];  /* h → heads side (MLA: down- and up-projections) */
    int n_qkv;
    unsigned qkv_up;                       /* MLA: bit i, qkv[i] makes q, k or v from a latent (or q
                                              from h): what recompute module mla_up_proj rebuilds */
    ts_gemm_shape proj;                    /* heads → h */
    double qk_dim, v_dim;                  /* per-head dims of the core */
    double core_flops;                     /* QKᵀ and AV over the full s² (model FLOPs) */
    int core_kernels;                      /* ring CP: the core runs as cp ring-step kernels */
    ts_gemm_shape scores_qk, scores_av;    /* unfused attention: batched GEMMs over the scores */
    double scores_bytes;                   /* unfused: scores written, soft-maxed, read back */
    double kv_block_bytes;                 /* CP: this rank's K and V block */
    ts_cp_pass cp_fwd, cp_bwd;             /* CP: the exchange in forward, in backward */
    double rotary_bytes;                   /* rotary on q and k (in the first norm's pass) */
    double gate_bytes;                     /* attn_gate: sigmoid(gate) ⊙ output (with rotary's) */
    double matmul_params;                  /* GEMM weights this rank multiplies per token */
    double fp8_cast_bytes[2];              /* FP8 casts in forward: [0] the QKV inputs, [1] the
                                              projection's input (0 unless fp8; recipe.c) */
    double fp8_cast_bwd_bytes;             /* FP8 casts of the block's output gradients */
    double amax_gemms;                     /* FP8 delayed scaling: GEMMs whose amaxes are reduced
                                              (ts_amax_reduce_bytes), TE's attention's 3 with them */
} ts_attn_recipe;

/* The MLP block (dense) or the experts (MoE), and what a whole layer adds to the attention. */
typedef struct {
    int moe;
    ts_gemm_shape router;         /* MoE: token → expert scores */
    ts_gemm_shape fc1, fc2;       /* the dense MLP, or one local expert (count = local experts) */
    int shared;                   /* MoE with shared experts */
    ts_gemm_shape shared_fc1, shared_fc2;
    double routed_tokens;         /* MoE: token copies the busiest EP rank's experts take, T·top_k·cf */
    double act_bytes;             /* the activation pass of the dense MLP or routed experts (MoE:
                                     with the token permutation, permute_bytes) */
    double permute_bytes;         /* MoE: permute before the dispatch, unpermute after the combine */
    double copy_bytes;            /* MoE: copies of the routed rows, once each way (recipe_moe.c:
                                     the dispatcher's reorders, SequentialMLP's concatenation) */
    int tp_block;                 /* the block opens (SP) and closes with TP collectives: every
                                     dense MLP; MoE unless etp != tp and no shared experts */
    int tp_dispatcher;            /* MoE under SP with etp = tp: those collectives are the token
                                     dispatcher's gather and reduce-scatter of the routed copies,
                                     autograd functions of their own, so in backward they sit on
                                     the critical path (recipe_moe.c) */
    int to_coll, from_coll;       /* MoE: the EP collectives (ts_coll) to and from the experts */
    double to_bytes, from_bytes;  /* and their sizes (nccl-tests' size): to the experts in forward
                                     (and the output gradients in backward), FP8 when dispatched
                                     so; from the experts (the combine, and in backward the input
                                     gradients), 16-bit */
    double shared_act_bytes;      /* and of the shared experts */
    double norm_bytes;            /* one of the layer's two norm + bias-dropout-add passes */
    double tp_bytes;              /* one TP block collective (all-reduce or SP's pair) */
    double matmul_params;         /* GEMM weights this rank multiplies per token (active) */
    double fp8_cast_bytes[2];     /* FP8 casts in forward: [0] the h→f GEMMs' inputs, [1] the
                                     f→h GEMMs' inputs (0 unless fp8; recipe.c) */
    double fp8_cast_bwd_bytes[2]; /* FP8 casts in backward of the gradients of [0] the h→f
                                     outputs, [1] the f→h outputs */
    double amax_gemms;            /* FP8 delayed scaling: GEMMs whose amaxes are reduced, a local
                                     expert's each (ts_amax_reduce_bytes); 0 otherwise */
} ts_mlp_recipe;

void ts_attn_recipe_of(const ts_problem *pb, const ts_shard *sh, ts_attn_recipe *out);

/* The causal attention a model's layers compute at sequence length `seq`, as a fraction of full
 * causal attention, averaged over its layers (1 without local attention; see recipe.c). */
double ts_local_attention_fraction(const ts_model *m, double seq);
void ts_mlp_recipe_of(const ts_problem *pb, const ts_shard *sh, int moe, ts_mlp_recipe *out);

/* The first stage's embedding and the last stage's LM head and loss. */
typedef struct {
    double embed_bytes;      /* embedding lookup: read + write of T·h */
    double embed_tp_bytes;   /* its closing TP collective (vocab-parallel embedding) */
    ts_gemm_shape head;      /* logits: T × v/t, once more per MTP depth (count) */
    ts_gemm_shape mtp_proj;  /* the MTP modules' projection of [norm(h); norm(emb)], 2h -> h/t
                                (count: the depths; 0 without MTP) */
    double loss_fwd_bytes;   /* vocab-parallel cross entropy over fp32 logits, forward */
    double loss_bwd_bytes;   /* and its backward, down to the 16-bit logits' gradient */
    double p2p_bytes;        /* a pipeline send or receive of activations or their gradients */
} ts_edge_recipe;

/* The MoE dispatcher the problem runs: its option, auto resolved (program/problem.h). */
ts_moe_dispatcher ts_moe_dispatcher_of(const ts_problem *pb);
/* Whether the dispatch to the experts runs in FP8 (ts_train.moe_fp8_dispatch, or fp8 with
 * deepep), and its bytes per element: 1 + one fp32 scale per 128 (DeepSeek-V3 §3.3.2's 1×128
 * activation tiles), else 2. */
double ts_moe_dispatch_elem_bytes(const ts_problem *pb);
/* The routed experts' part of an MoE layer's recipe (recipe_moe.c), T tokens per rank. */
void ts_moe_recipe_fill(const ts_problem *pb, const ts_shard *sh, double T, ts_mlp_recipe *out);

void ts_edge_recipe_of(const ts_problem *pb, const ts_shard *sh, ts_edge_recipe *out);

/* Parameters one rank holds of layer `layer` (layers past the model's last are the MTP module,
 * MoE when the model is): its non-expert part over TP and its experts over ETP×EP (etp 0: tp). */
void ts_layer_params_rank(const ts_problem *pb, int tp, int ep, int etp, int layer, double *shared, double *experts);

/* Whether layer `layer` is MoE (MTP layers are when the model is). */
int ts_recipe_layer_is_moe(const ts_problem *pb, int layer);

#endif
