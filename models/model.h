/* A decoder-only transformer: what the planner, simulator and executor need to know of a model.
 *
 * Loaded from Tessera's own JSON (models/llm/NAME.json, schema in README "File formats") or from a
 * Hugging Face config.json (Llama, Mistral, Mixtral, Qwen2, DeepSeek-V3, GPT-2, GPT-NeoX, BLOOM,
 * OPT). A ts_model is a plain value: it owns no heap memory, so it can be copied freely and needs
 * no _free. */
#ifndef TS_MODEL_H
#define TS_MODEL_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "common/status.h"

typedef enum {
    TS_ACT_GELU,   /* 2-matrix MLP: h -> ffn -> h (GPT-2/3, NeoX, BLOOM, OPT uses relu: same shape) */
    TS_ACT_SWIGLU, /* 3-matrix gated MLP: gate and up h -> ffn, down ffn -> h (Llama, Mistral) */
    TS_ACT_RELU2,  /* 2-matrix MLP with squared ReLU (Nemotron-4) */
    TS_ACT_COUNT
} ts_activation;

typedef enum { TS_NORM_RMSNORM, TS_NORM_LAYERNORM, TS_NORM_COUNT } ts_norm;
typedef enum { TS_POS_ROPE, TS_POS_LEARNED, TS_POS_ALIBI, TS_POS_COUNT } ts_position;
/* Normalisation of queries and keys before the attention scores: none; per head, a norm of width
 * head_dim shared by the heads (Qwen3, Gemma 3; Megatron-LM --qk-layernorm); or over the whole
 * projection, widths heads*head_dim and kv_heads*head_dim (OLMo 2). */
typedef enum { TS_QKNORM_NONE, TS_QKNORM_HEAD, TS_QKNORM_FULL, TS_QKNORM_COUNT } ts_qk_norm;
/* What a norm learns: the norm's own vectors (RMSNorm a weight, LayerNorm a weight and a bias);
 * a weight only (LayerNorm without bias: DBRX, transformers nn.LayerNorm(bias=False)); nothing
 * (OLMo's non-parametric LayerNorm, transformers OlmoLayerNorm). Changes the parameter count only. */
typedef enum { TS_NORM_AFFINE_FULL, TS_NORM_AFFINE_WEIGHT, TS_NORM_AFFINE_NONE, TS_NORM_AFFINE_COUNT } ts_norm_affine;

/* Names as written in JSON, indexed by the enums above; NULL-terminated. */
extern const char *const ts_activation_names[];
extern const char *const ts_norm_names[];
extern const char *const ts_position_names[];
extern const char *const ts_qk_norm_names[]; /* "none", "head", "full" */
extern const char *const ts_norm_affine_names[]; /* "full", "weight", "none" */

/* Mixture of experts. experts == 0 means a dense model and the other fields are ignored. */
typedef struct {
    int experts;            /* routed experts per MoE layer */
    int top_k;              /* routed experts per token */
    int64_t expert_ffn;     /* hidden size of one routed expert's MLP */
    int shared_experts;     /* always-on experts per MoE layer (DeepSeek) */
    int64_t shared_ffn;     /* hidden size of one shared expert's MLP */
    int first_dense;        /* layers [0, first_dense) are dense (DeepSeek-V3: 3) */
    int every;              /* after first_dense, every `every`-th layer is MoE (1 = all) */
    double capacity_factor; /* expert capacity = cf * top_k * tokens / experts; 0 = dropless */
    int capacity_unpadded;  /* with a capacity: experts run the tokens they keep, not padded to the
                               capacity (JSON "pad_to_capacity": false; Megatron-Core without
                               --moe-pad-expert-input-to-capacity) */
    double load_cv;         /* dropless: coefficient of variation of the tokens an expert gets
                               per micro-batch (0 = perfectly balanced; default
                               TS_MOE_DEFAULT_LOAD_CV; `tessera run --json` measures it) */
    /* The router (DeepSeek-V3 §2.1.2: sigmoid scores, a bias per expert for load balance, top-k
     * among the best router_group_topk of router_groups groups, weights scaled by router_scale).
     * None changes the parameters or the cost; the exports pass them on. */
    int router_sigmoid;     /* 1: sigmoid scores, 0: softmax */
    int router_expert_bias; /* auxiliary-loss-free balancing bias (not a trained parameter) */
    int router_groups;      /* 0 = no group-limited routing */
    int router_group_topk;
    double router_scale; /* 0 = 1 */
} ts_moe;

/* The imbalance of a balanced router's dropless routing when the model file does not give one
 * (an auxiliary balancing loss, GShard / Switch / Megatron-Core --moe-aux-loss-coeff 1e-2, or
 * DeepSeek-V3's loss-free bias): balancing holds the experts' loads equal on average, not in
 * each micro-batch. Fitted to the one paired measurement of dropless against padded routing in
 * a published recipe: Megatron-Core's MoE model zoo (yanring/Megatron-MoE-ModelZoo,
 * best_practice/Mixtral/run_mixtral_8x22B.sh and runtime_configs/benchmarking/runtime.conf):
 * Mixtral-8x22B on H100, TP2 PP8 EP8 ETP1 MBS1 GBS256 seq 4096, aux-loss 1e-2, alltoall,
 * dropless ~455 TFLOP/s against ~470 with --moe-expert-capacity-factor 1.0
 * --moe-pad-expert-input-to-capacity (every expert runs exactly its even share): dropless is
 * 3.3% slower. Tessera's simulator gives that ratio (1F1B, as the zoo ran) at load_cv = 0.034
 * (docs/moe.md has the command). For scale: binomial sampling alone (each of the micro-batch's 8·2048·2 copies
 * routed independently) gives sqrt((1 - 1/8)/4096) = 0.015 for that run; tokens of one
 * document pick alike, so the realised spread is larger. */
#define TS_MOE_DEFAULT_LOAD_CV 0.034

/* Tokens the busiest rank of an expert-parallel group of `ep` ranks processes, relative to an
 * even share (T·top_k·ep/experts per local expert): with a capacity factor, the capacity (tokens
 * beyond it are dropped; GShard and Switch pad every expert to it), or without padding the
 * smaller of the capacity and the dropless share; dropless, 1 + cv_rank · E[max of ep standard normals], cv_rank =
 * load_cv / sqrt(experts / ep) (a rank's E/ep experts' loads add up, independent and normal to a
 * first approximation), so 1 for balanced routing or ep = 1. Every EP collective waits for that
 * rank, so the step runs at its pace. */
double ts_moe_load_factor(const ts_moe *x, int ep);

/* Multi-head latent attention (DeepSeek-V2/V3). kv_lora_rank == 0 means ordinary (GQA) attention.
 * Parameters are counted exactly; FLOPs and activations are approximated (see count.h). */
typedef struct {
    int q_lora_rank; /* 0: queries projected directly from h */
    int kv_lora_rank;
    int qk_nope_dim; /* per-head query/key dims without rotary */
    int qk_rope_dim; /* per-head rotary dims (the rotary key is shared across heads) */
    int v_dim;       /* per-head value dim */
    /* DeepSeek-V3.2's lightning indexer (DeepSeek Sparse Attention; deepseek-ai/DeepSeek-V3.2-Exp
     * inference/model.py Indexer): index_heads heads of index_head_dim choose the tokens MLA
     * attends to. 0: none. Counted in the parameters (count.c), not in the FLOPs. */
    int index_heads;
    int index_head_dim;
} ts_mla;

/* Local attention on some layers: a sliding window (Mistral, Gemma 2/3, gpt-oss: a token attends
 * to the `tokens` before it) or chunks (Llama 4: a token attends within its `tokens`-aligned
 * chunk). Which layers: layer i attends to the whole sequence when full_every > 0 and
 * (i + 1) % full_every == 0, else locally; full_every == 0 makes every layer local (Mistral
 * v0.1). tokens == 0: no local attention anywhere. Changes the attention core's FLOPs and memory,
 * not the parameters; ts_model_layer_window says which window a layer has. */
typedef struct {
    int64_t tokens;
    int full_every;
    int chunked;
} ts_window;

typedef struct {
    char name[64];
    char source[256]; /* where the figures come from (paper, model card, config.json) */
    int layers;
    int64_t hidden;
    int heads;
    int kv_heads;       /* == heads for MHA, 1 for MQA */
    int head_dim;       /* usually hidden / heads */
    int64_t ffn_hidden; /* dense MLP hidden size */
    int64_t vocab;
    int64_t max_seq;
    ts_activation activation;
    ts_norm norm;
    ts_position position;
    int position_offset; /* extra rows of a learned position table (OPT: 2) */
    int64_t embed_dim;   /* word-embedding width when it differs from hidden, with project_in/out
                            matrices between the two (OPT-350m: 512); 0 = hidden */
    int tied_embeddings; /* LM head shares the input embedding matrix */
    int qkv_bias;        /* biases on the Q, K, V projections (Qwen2, GPT-2, ...) */
    int linear_bias;     /* biases on the attention output and MLP matrices (GPT-2, BLOOM, ...) */
    int embed_norm;      /* a norm right after the embedding (BLOOM) */
    int dropout;         /* training keeps dropout masks (1 byte per element, Korthikanti 2022) */
    ts_moe moe;
    ts_mla mla;
    int mtp_layers; /* extra multi-token-prediction layers (DeepSeek-V3: 1), counted separately */
    double rope_theta;   /* rotary base; 0 = not given (Megatron-LM's default, 10000) */
    int qk_norm;         /* ts_qk_norm */
    int norms_per_layer; /* 0 = 2 (pre-attention and pre-MLP); 4 = Gemma 2/3's sandwich norms; 1 = one
                            norm feeding attention and MLP in parallel (GPT-J) */
    ts_window window;    /* local attention (sliding window or chunked) */
    double attn_softcap;  /* Gemma 2: scores soft-capped as c*tanh(x/c); 0 = none */
    double logit_softcap; /* Gemma 2: final logits soft-capped the same way; 0 = none */
    int attn_sinks;       /* a learned sink logit per head (gpt-oss): heads parameters per layer */
    int attn_gate;        /* the attention's output gated element-wise by sigmoid(x W_g), W_g h -> heads *
                             head_dim beside Q (Qwen3-Next, AFMoE; Megatron-Core's attention_output_gate
                             widens linear_qkv by it) */
    int router_bias;      /* the MoE router has a bias, one per expert (gpt-oss) */
    int embed_scaled;     /* embeddings multiplied by sqrt(hidden) (Gemma) */
    int gelu_gate;        /* gated MLP with a GELU gate (GeGLU: Gemma) rather than SiLU (SwiGLU) */
    int norm_affine;      /* ts_norm_affine: what every norm learns (0: its own weight, and bias) */
} ts_model;

/* Loads a zoo name ("llama2-70b", looked up in models/llm/ under the data directory), a path to
 * Tessera's JSON, or a path to a Hugging Face config.json (detected by "model_type" or
 * "architectures"). Bad input: TS_ERR_INPUT naming file, JSON path, expected vs got. */
ts_status ts_model_load(const char *name_or_path, ts_model *out);
/* Same from an already-parsed tree; `file` names it in messages. */
ts_status ts_model_from_json(const char *file, const cJSON *root, ts_model *out);
/* Tessera's JSON form of `m` (round-trips through ts_model_from_json). NULL when out of memory. */
cJSON *ts_model_to_json(const ts_model *m);

/* What a model's fields are called in the file they came from, so that the cross-field rules name
 * the key the user wrote: a Hugging Face reader records "ffn_hidden" -> "intermediate_size" (or
 * "text_config.intermediate_size") as it reads each key. A field not recorded keeps Tessera's own
 * name ("moe.top_k"). A plain value: no heap memory. */
#define TS_FIELD_NAMES_MAX 64 /* more than the ~40 fields ts_model_validate checks */
typedef struct {
    int count;
    struct {
        const char *field; /* Tessera's path without "$." ("moe.experts"); a string literal */
        char key[96];      /* the file's path without "$." ("text_config.n_routed_experts") */
    } at[TS_FIELD_NAMES_MAX];
} ts_field_names;

void ts_field_names_init(ts_field_names *n);
/* Records (or replaces) the key of `field`; past TS_FIELD_NAMES_MAX fields the field keeps
 * Tessera's name. */
void ts_field_names_set(ts_field_names *n, const char *field, const char *key);
/* The key recorded for `field`, else `field` itself; `n` may be NULL. */
const char *ts_field_name(const ts_field_names *n, const char *field);

/* Checks the cross-field rules (heads divisible by kv_heads, top_k <= experts, ...), messages
 * naming Tessera's fields. */
ts_status ts_model_validate(const char *file, const ts_model *m);
/* The same, each field named as `names` says (NULL: Tessera's names). */
ts_status ts_model_validate_named(const char *file, const ts_model *m, const ts_field_names *names);

/* Parameter counts (exact for the supported architectures; doubles so absurd sizes such as
 * 1e15 parameters cannot overflow). */
typedef struct {
    double total;     /* every parameter, each tied matrix once */
    double active;    /* used per token: top_k routed + shared experts */
    double embedding; /* input embedding (+ learned positions) */
    double lm_head;   /* 0 when tied */
    double per_layer_dense; /* one dense layer (attention + MLP + norms) */
    double per_layer_moe;   /* one MoE layer with all experts (0 for dense models) */
    double expert;          /* one routed expert's MLP */
    double attention;       /* one layer's attention block (projections, biases) */
    double mtp;             /* multi-token-prediction modules, NOT included in total/active */
} ts_param_count;

void ts_model_params(const ts_model *m, ts_param_count *out);
int ts_model_layer_is_moe(const ts_model *m, int layer);
/* Parameters of layer `layer` (all experts counted). */
double ts_model_layer_params(const ts_model *m, int layer);
/* The local-attention window of layer `layer` in tokens (m->window.tokens), or 0 when the layer
 * attends to the whole sequence. What the cost model reads for attention FLOPs and memory. */
int64_t ts_model_layer_window(const ts_model *m, int layer);
/* Norms per layer as counted: norms_per_layer, 0 read as 2. */
int ts_model_norms_per_layer(const ts_model *m);

#endif
