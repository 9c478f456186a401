/* A planning problem: model, system, GPU count and training options, and which layouts are
 * valid for it (divisibility and limits, no prices). The planner fills it (planner/problem.h
 * ts_problem_init derives the counts and the compute scale); the step program and both
 * interpreters read it.
 *
 * ts_problem is a plain value; it owns no heap memory. */
#ifndef TS_PROGRAM_PROBLEM_H
#define TS_PROGRAM_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "models/model.h"
#include "models/stack.h"
#include "models/system.h"
#include "program/layout.h"

/* How FP8 tensors are scaled (Transformer Engine recipes): delayed scaling (DelayedScaling: the
 * scale from an amax history), current per-tensor scaling (Float8CurrentScaling: the amax of the
 * tensor itself, an extra pass) and MXFP8 block scaling (MXFP8BlockScaling: a scale per 32
 * elements, Blackwell) and DeepSeek-V3's fine-grained block scaling (TE Float8BlockScaling,
 * Megatron-LM --fp8-recipe blockwise: an fp32 scale per 1×128 activation tile and per 128×128
 * weight block, Hopper; DeepSeek-V3 report §3.3.2). */
typedef enum { TS_FP8_DELAYED, TS_FP8_TENSORWISE, TS_FP8_MXFP8, TS_FP8_BLOCKWISE, TS_FP8_RECIPE_COUNT } ts_fp8_recipe;
extern const char *const ts_fp8_recipe_names[]; /* "delayed", "tensorwise", "mxfp8", "blockwise"; NULL-terminated */

/* How context parallelism exchanges the attention's inputs (the recipe's CP block, recipe.c):
 * ring  K/V blocks passed around the CP ring beside the attention (ring attention, Liu et al.
 *       2023; Megatron-LM's context parallelism, cp_comm_type=p2p);
 * allgather  K/V all-gathered before the attention, dK/dV reduce-scattered after it (Llama 3
 *       §3.3.2; Transformer Engine's cp_comm_type=all_gather);
 * a2a   Ulysses: Q, K, V all-to-all from sequence to head sharding before the attention and the
 *       output back after it (DeepSpeed-Ulysses, Jacobs et al. 2023); heads must divide by tp·cp. */
typedef enum { TS_CP_RING, TS_CP_ALLGATHER, TS_CP_A2A, TS_CP_KIND_COUNT } ts_cp_kind;
extern const char *const ts_cp_kind_names[]; /* "ring", "allgather", "a2a"; NULL-terminated */

/* How MoE tokens reach their experts and come back (planner/moe_cost.h prices them):
 * auto       deepep for a model whose router is node-limited (router_groups with
 *            router_group_topk: DeepSeek-V3 routes each token to at most 4 nodes so that its
 *            IB traffic is bounded, §2.1.2 and §3.2.2), else alltoall;
 * alltoall   Megatron-Core's alltoall token dispatcher: every routed copy sent to its
 *            expert's rank by one NCCL all-to-all (dispatch) and back (combine);
 * allgather  Megatron-Core's allgather dispatcher: every rank's tokens all-gathered over the EP
 *            group, each rank keeps its experts' copies; the combine is a reduce-scatter;
 * deepep     DeepSeek's DeepEP (the kernels of DeepSeek-V3 §3.2.2; Megatron-Core's flex
 *            dispatcher): a token crosses IB once per destination node and is forwarded over
 *            NVLink to its experts' GPUs there; the combine reduces inside the node first. */
typedef enum { TS_MOE_DISPATCH_AUTO, TS_MOE_DISPATCH_ALLTOALL, TS_MOE_DISPATCH_ALLGATHER, TS_MOE_DISPATCH_DEEPEP,
               TS_MOE_DISPATCH_COUNT } ts_moe_dispatcher;
extern const char *const ts_moe_dispatcher_names[]; /* "auto", "alltoall", "allgather", "deepep"; NULL-ended */

/* Which fused attention kernel runs the attention core, as Megatron-LM's --attention-backend
 * names them (Transformer Engine's DotProductAttention backends):
 * fused  cuDNN's fused attention (TE FusedAttention; NVTE_FUSED_ATTN=1, the default on Hopper and
 *        later): the system's efficiency.attention;
 * flash  the FlashAttention-2 package (TE FlashAttention; NVTE_FUSED_ATTN=0, as several NVIDIA
 *        recipes set it): the system's efficiency.attention_flash where the GPU has one
 *        (models/system.h). Unfused attention is train.flash_attention = 0. */
typedef enum { TS_ATTN_FUSED, TS_ATTN_FLASH, TS_ATTN_BACKEND_COUNT } ts_attn_backend;
extern const char *const ts_attn_backend_names[]; /* "fused", "flash"; NULL-terminated */
extern const char *const ts_ce_names[];           /* "fused", "unfused": train.ce_fusion 1, 0 */

/* What recompute=selective recomputes, as Megatron-Core's --recompute-modules names it
 * (transformer_config.py recompute_modules, default ["core_attn"]; transformer_layer.py,
 * multi_latent_attention.py, moe/experts.py, moe/moe_layer.py, moe/shared_experts.py):
 * core_attn       the attention core (unfused: its s×s scores; fused kernels keep none)
 * mla_up_proj     MLA's up-projections and RoPE: q, k and v rebuilt from the latents
 * layernorm       the two norms' outputs rebuilt from their inputs
 * mlp             a dense layer's MLP block from its input (its norm and TP collectives too)
 * moe_act         the routed experts' activation (grouped GEMM only, as Megatron-Core asserts)
 * shared_experts  the shared experts from their input
 * moe             a MoE layer's whole MLP block from its input: router, dispatch, experts and
 *                 combine again */
typedef enum { TS_RCM_CORE_ATTN, TS_RCM_MLA_UP_PROJ, TS_RCM_LAYERNORM, TS_RCM_MLP, TS_RCM_MOE_ACT,
               TS_RCM_SHARED_EXPERTS, TS_RCM_MOE, TS_RCM_COUNT } ts_recompute_module;
extern const char *const ts_recompute_module_names[]; /* "core_attn", ...; NULL-terminated */
#define TS_RCM_BIT(m) (1u << (m))
#define TS_RCM_DEFAULT TS_RCM_BIT(TS_RCM_CORE_ATTN)

typedef struct {
    int64_t global_batch;   /* sequences per step */
    int64_t seq;            /* tokens per sequence */
    ts_dtype dtype;         /* compute and activation precision */
    ts_fp8_recipe fp8_recipe; /* dtype fp8: the scaling recipe (default delayed) */
    int fp8_attention;      /* dtype fp8: the fused attention runs in FP8 too (default: BF16) */
    int fp8_param_gather;   /* dtype fp8: FP8 primary weights, all-gathered in FP8 (Megatron-Core
                               --fp8-param-gather; program/recipe.h ts_weight_elem_bytes) */
    int flash_attention;    /* fused attention: no s×s scores kept, causal half computed */
    ts_attn_backend attn_backend; /* with flash_attention: which kernel (default fused, cuDNN) */
    int ce_fusion;          /* the loss's cross entropy: 1 fused, 0 unfused, -1 (default) as the
                               stack states it (ts_train_ce_fused) */
    int tp_across_nodes;    /* allow TP groups to span nodes */
    ts_cp_kind cp_kind;     /* CP's exchange (ring by default) */
    ts_moe_dispatcher moe_dispatcher; /* MoE token dispatcher (auto by default) */
    double moe_a2a_overlap; /* fraction of the EP dispatch/combine hidden under computation
                               (default 0: Megatron-Core runs them exposed unless
                               --overlap-moe-expert-parallel-comm; planner/moe_cost.h) */
    int moe_combined_1f1b;  /* Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm):
                               each forward paired with an earlier micro-batch's backward, one's EP
                               dispatch and combine beside the other's computation
                               (program/schedule.h ts_sched_combined_1f1b) */
    int moe_shared_expert_overlap; /* Megatron-Core's --moe-shared-expert-overlap: the shared experts'
                               FC1 and activation beside the dispatch, their FC2 beside the combine
                               (a stream of their own; program.c) */
    int moe_fp8_dispatch;   /* dispatch FP8 (1 byte + a scale per 128) as DeepSeek-V3 §3.3.2 does;
                               on by default under fp8 with the deepep dispatcher */
    unsigned recompute_modules; /* recompute=selective: what it recomputes (TS_RCM_BIT of each;
                               default TS_RCM_DEFAULT, core_attn alone) */
    int moe_grouped_gemm;   /* the local experts as one grouped GEMM (default; Megatron-Core
                               --moe-grouped-gemm, TEGroupedMLP); 0: SequentialMLP, one GEMM per
                               expert and their outputs concatenated (planner/moe_cost.h) */
    double weight_bytes;    /* bytes per parameter: weights (2, ZeRO paper's mixed precision) */
    double grad_bytes;      /* gradients (2) */
    double optimizer_bytes; /* Adam: fp32 master, momentum, variance (12; ZeRO paper's K) */
    double bucket_bytes;    /* DP gradient communication bucket */
    double activation_scale; /* activation bytes relative to 16-bit ones (fp32: 2) */
    ts_stack stack;         /* the software stack: what it runs and how (models/stack.h);
                               default the unrestricted one */
    /* Memory kept free below the usable bytes against allocator fragmentation (planner/
     * problem.h ts_problem_init): a fraction of the usable bytes when mem_headroom_bytes is 0. */
    double mem_headroom_frac;
    double mem_headroom_bytes;
} ts_train;

/* The modules of `mask` in their order, each in `quote`, joined by `sep` ("mla_up_proj mlp");
 * returns buf. */
const char *ts_recompute_modules_format(unsigned mask, const char *sep, const char *quote, char *buf, size_t cap);
/* ", selective recompute of a,b" where t's modules are not the default, else "": what the first
 * line of a plan or a sweep says of them. Returns buf. */
const char *ts_recompute_modules_said(const ts_train *t, char *buf, size_t cap);

/* Megatron-Core's own refusals of recompute modules (transformer_config.py __post_init__):
 * mla_up_proj needs multi-head latent attention, moe_act the grouped GEMM; bits beyond
 * TS_RCM_COUNT are refused too. NULL when t's modules are valid for m, else why (in buf). */
const char *ts_recompute_modules_invalid(const ts_model *m, const ts_train *t, char *buf, size_t cap);

/* Defaults: global batch 1024, seq 4096, bf16, flash attention, ring CP, TP inside a node, 2+2+12
 * bytes/param, 40M-parameter buckets. (ts_problem_init refuses seq > the model's max_seq when
 * its positions are learned, see ts_seq_extends; the CLI lowers its default seq to max_seq.) */
void ts_train_defaults(ts_train *t);

/* Sets the precision and what follows from it: 16-bit (bf16, fp16; fp8 keeps 16-bit master
 * weights and activations) trains with 2+2+12 bytes per parameter (ZeRO paper's mixed-precision
 * Adam) and 16-bit activations; fp32 with 4+4+8 (weights, gradients, Adam's two moments) and
 * 32-bit activations. */
void ts_train_set_dtype(ts_train *t, ts_dtype d);

/* Whether the LM loss's cross entropy runs fused: train.ce_fusion where given (--cross-entropy),
 * else the stack's statement (models/stack.h ce_fused). */
int ts_train_ce_fused(const ts_train *t);

/* Whether `seq` tokens go beyond the context the model was trained at (max_seq) — context
 * extension: 1 when seq > max_seq and the positions are relative (RoPE, ALiBi), which is how
 * long-context models are trained (Llama 3 §3.4: 8K pre-training, then 128K with a larger RoPE
 * base; Code Llama §2.4 likewise); -1 when seq > max_seq and the positions are a learned absolute
 * table (GPT-2, OPT, BLOOM's embedding has no row beyond max_seq): refused; 0 otherwise. */
int ts_seq_extends(const ts_model *m, int64_t seq);
/* Bytes per gradient element that the DP reduction moves: the stack's gradient-reduction dtype
 * (fp32 in Megatron-DeepSpeed's BF16 optimizer), else the gradients' own bytes. */
double ts_grad_reduce_bytes(const ts_train *t);

typedef struct {
    ts_model model;
    ts_system sys;
    ts_train train;
    int gpus;
    ts_param_count params;
    double model_flops_per_step; /* forward+backward, no recompute (Megatron/PaLM convention) */
    double usable_bytes;         /* per GPU, after reserve and head-room: the line no pick crosses */
    double headroom_bytes;       /* of the system's usable bytes, kept free (ts_train mem_headroom) */
    double compute_scale;        /* compute ops' time multiplier for ranks sharing cores and
                                    ranks in lockstep (cost.h ts_compute_scale × ts_lockstep_scale) */
} ts_problem;

/* Why a layout is not valid for the problem (divisibility, limits), or NULL when valid.
 * `buf` receives the message (NULL: no message, a fixed string is returned). Memory is not
 * checked here (see ts_eval.fits). */
const char *ts_layout_invalid(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap);
/* The same for a layout whose stages may come from an explicit split (explicit_split = 1; see
 * planner/partition.h): interleaving then needs a layer in each of the pp·vpp chunks, not
 * pp·vpp dividing the layers. */
const char *ts_layout_invalid_split(const ts_problem *pb, const ts_layout *l, int explicit_split, char *buf,
                                    size_t cap);
/* The parts of those checks that concern only the ZeRO stage (given pp and the rest), and only
 * the schedule and vpp (whatever the ZeRO stage); ts_layout_invalid runs them last, the search
 * alone where it checked the rest already. `buf` may be NULL (no message). */
const char *ts_zero_invalid(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap);
/* The checks of ts_layout_invalid that hold whatever the ZeRO stage, schedule, vpp and recompute
 * policy (the search's shard level); under --overlap-moe-expert-parallel-comm ep > 1, and
 * ts_layout_invalid refuses full recompute. */
const char *ts_shard_invalid(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap);
const char *ts_schedule_invalid(const ts_problem *pb, const ts_layout *l, int explicit_split, char *buf, size_t cap);

#endif
