/* Hugging Face config.json → ts_model (see hf.h).
 *
 * One reader per architecture family, chosen from a table by model_type. Each maps the keys that
 * transformers writes for that family (the *Config classes in transformers/models/<type>/) onto
 * Tessera's fields, with defaults for keys a file leaves out, and fixes what the
 * architecture implies but the config does not say (GPT-2's learned positions, BLOOM's ALiBi and
 * embedding LayerNorm, OPT's two extra position rows, Qwen2's Q/K/V biases, ...).
 *
 * Approximations, all below 1e-5 of the total: a bias on the attention output projection alone
 * (Llama/DeepSeek attention_bias, NeoX attention_bias=false) cannot be told apart from
 * linear_bias, which also covers MLP biases, so it follows the MLP; DeepSeek-V3's router bias
 * (e_score_correction_bias, one per expert) and Qwen2-MoE's shared-expert gate (h per layer) are
 * not counted; OPT-350m has no final LayerNorm (do_layer_norm_before=false) but one is counted. */
#include "models/hf.h"
#include "models/hf_impl.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "models/model_limits.h"

/* Records in `nm` that Tessera's `field` (NULL: none) comes from `key` of the object `r` reads,
 * e.g. "ffn_hidden" from "text_config.intermediate_size", so that ts_model_validate_named's
 * messages name the key the file has. */
void hf_name(ts_field_names *nm, const ts_jreader *r, const char *field, const char *key) {
    if (field == NULL) return;
    char path[sizeof nm->at[0].key];
    const char *parent = strcmp(r->path, "$") == 0 ? "" : r->path + 2; /* without "$." */
    snprintf(path, sizeof path, "%s%s%s", parent, *parent ? "." : "", key);
    ts_field_names_set(nm, field, path);
}

/* An optional integer that may also be written null (transformers writes "head_dim": null), read
 * into Tessera's `field` (recorded in `nm`). */
ts_status hf_int(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *field,
                 const char *key, int required, int64_t min, int64_t max, int64_t def, int64_t *out) {
    hf_name(nm, r, field, key);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!required && cJSON_IsNull(it)) {
        *out = def;
        return TS_OK;
    }
    return ts_jr_int(r, root, key, required, min, max, def, out);
}

ts_status hf_bool(const ts_jreader *r, const cJSON *root, const char *key, int required, int def, int *out) {
    if (!required && cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, key))) {
        *out = def;
        return TS_OK;
    }
    return ts_jr_bool(r, root, key, required, def, out);
}

ts_status hf_i32(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *field,
                 const char *key, int required, int64_t min, int64_t max, int64_t def, int *out) {
    int64_t v;
    TS_CHECK(hf_int(r, root, nm, field, key, required, min, max, def, &v));
    *out = (int)v;
    return TS_OK;
}

/* An optional number that may be null (Gemma 3 writes "attn_logit_softcapping": null): 0. */
static ts_status hf_num_or_null(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *field,
                                const char *key, double *out) {
    hf_name(nm, r, field, key);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = 0;
    if (it == NULL || cJSON_IsNull(it)) return TS_OK;
    return ts_jr_num(r, root, key, 0, 0, 1e6, 0, out);
}

/* `a` when present (or when `b` is absent too, so a missing-field message names `a`), else `b`:
 * BLOOM configs write n_embed or hidden_size, n_layer or num_hidden_layers. */
const char *pick(const cJSON *root, const char *a, const char *b) {
    if (cJSON_GetObjectItemCaseSensitive(root, a) != NULL ||
        cJSON_GetObjectItemCaseSensitive(root, b) == NULL)
        return a;
    return b;
}

/* Training keeps dropout masks when any of the family's dropout rates is positive. */
ts_status read_dropout(const ts_jreader *r, const cJSON *root, const hf_rate *rates, int n,
                       int *out) {
    *out = 0;
    for (int i = 0; i < n; i++) {
        double p;
        TS_CHECK(ts_jr_num(r, root, rates[i].key, 0, 0, 1, rates[i].def, &p));
        if (p > 0) *out = 1;
    }
    return TS_OK;
}

ts_status read_shape(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_keys *k,
                     ts_model *m) {
    TS_CHECK(hf_int(r, root, nm, "hidden", k->hidden, 1, 1, TS_MAX_HIDDEN, 0, &m->hidden));
    TS_CHECK(hf_i32(r, root, nm, "layers", k->layers, 1, 1, TS_MAX_LAYERS, 0, &m->layers));
    TS_CHECK(hf_i32(r, root, nm, "heads", k->heads, 1, 1, TS_MAX_HEADS, 0, &m->heads));
    TS_CHECK(hf_int(r, root, nm, "vocab", "vocab_size", 1, 1, TS_MAX_VOCAB, 0, &m->vocab));
    TS_CHECK(hf_int(r, root, nm, "max_seq", k->max_seq, 0, 1, TS_MAX_SEQ, k->max_seq_def, &m->max_seq));
    TS_CHECK(hf_bool(r, root, "tie_word_embeddings", 0, k->tied_def, &m->tied_embeddings));
    m->kv_heads = m->heads;
    return TS_OK;
}

/* head_dim (Mistral, Llama 3.1+ write it; null or absent means hidden / heads, then exact). */
ts_status read_head_dim(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_keys *k,
                        ts_model *m) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
    if (m->hidden % m->heads != 0 && (it == NULL || cJSON_IsNull(it)))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: %lld is not divisible by %s %d, so head_dim must "
                       "be given", r->file, r->path, k->hidden, (long long)m->hidden, k->heads, m->heads);
    return hf_i32(r, root, nm, "head_dim", "head_dim", 0, 1, TS_MAX_HEAD_DIM, m->hidden / m->heads, &m->head_dim);
}

ts_status read_kv_heads(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(hf_i32(r, root, nm, "kv_heads", "num_key_value_heads", 0, 1, m->heads, m->heads, &m->kv_heads));
    if (m->heads % m->kv_heads != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.num_key_value_heads: num_attention_heads %d is not "
                       "divisible by num_key_value_heads %d", r->file, r->path, m->heads, m->kv_heads);
    return TS_OK;
}

/* rope_theta (absent: not given, Megatron-LM's default 10000 then applies). transformers 5 saves it
 * in rope_parameters, per layer type where the types differ ("full_attention" and
 * "sliding_attention": Gemma 3's global and local bases); the full-attention layers' is kept, the
 * one base Megatron-LM's --rotary-base sets. */
ts_status read_rope_theta(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    hf_name(nm, r, "rope_theta", "rope_theta");
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "rope_theta");
    if (it != NULL && !cJSON_IsNull(it)) return ts_jr_num(r, root, "rope_theta", 0, 0, TS_MAX_ROPE_THETA, 0, &m->rope_theta);
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (!cJSON_IsObject(params)) return TS_OK;
    ts_jreader pr, fr;
    ts_jreader_child(r, "rope_parameters", 0, &pr);
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(params, "full_attention");
    if (cJSON_IsObject(full)) {
        ts_jreader_child(&pr, "full_attention", 0, &fr);
        pr = fr;
        params = full;
    }
    it = cJSON_GetObjectItemCaseSensitive(params, "rope_theta");
    if (it == NULL || cJSON_IsNull(it)) return TS_OK;
    hf_name(nm, &pr, "rope_theta", "rope_theta");
    return ts_jr_num(&pr, params, "rope_theta", 0, 0, TS_MAX_ROPE_THETA, 0, &m->rope_theta);
}

const hf_keys llama_keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                            "max_position_embeddings", 4096, 0};
const hf_rate attention_dropout[] = {{"attention_dropout", 0.0}};

/* Llama, Mistral, Mixtral, Qwen2(-MoE): pre-RMSNorm, RoPE, SwiGLU, grouped-query attention. */
ts_status read_llama_like(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_shape(r, root, nm, &llama_keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &llama_keys, m));
    TS_CHECK(read_kv_heads(r, root, nm, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "intermediate_size", 1, 0, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, attention_dropout, 1, &m->dropout));
    m->activation = TS_ACT_SWIGLU;
    m->norm = TS_NORM_RMSNORM;
    m->position = TS_POS_ROPE;
    return read_rope_theta(r, root, nm, m);
}

ts_status read_llama(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    return hf_bool(r, root, "mlp_bias", 0, 0, &m->linear_bias);
}

/* Every layer MoE: `experts_key` experts of intermediate_size each, num_experts_per_tok a token
 * (Mixtral, OLMoE). */
ts_status read_expert_layers(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *experts_key,
                             ts_model *m) {
    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", experts_key, 1, 1, TS_MAX_EXPERTS, 0, &e->experts));
    TS_CHECK(hf_i32(r, root, nm, "moe.top_k", "num_experts_per_tok", 1, 1, e->experts, 0, &e->top_k));
    e->expert_ffn = m->ffn_hidden;
    hf_name(nm, r, "moe.expert_ffn", "intermediate_size");
    e->every = 1;
    return TS_OK;
}

static ts_status read_mixtral(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    return read_expert_layers(r, root, nm, "num_local_experts", m);
}

/* Qwen2 has biases on Q, K and V only (transformers Qwen2Attention). */
static ts_status read_qwen2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    m->qkv_bias = 1;
    return TS_OK;
}

/* Qwen's experts (Qwen2-MoE, Qwen3-MoE): num_experts of moe_intermediate_size, top num_experts_per_tok;
 * layer i is sparse when (i + 1) % decoder_sparse_step == 0, i.e. first_dense = step - 1 and
 * every = step; `shared` also reads one shared expert of shared_expert_intermediate_size. */
static ts_status read_qwen_experts(const ts_jreader *r, const cJSON *root, ts_field_names *nm, int shared,
                                   ts_model *m) {
    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", "num_experts", 1, 1, TS_MAX_EXPERTS, 0, &e->experts));
    TS_CHECK(hf_i32(r, root, nm, "moe.top_k", "num_experts_per_tok", 1, 1, e->experts, 0, &e->top_k));
    TS_CHECK(hf_int(r, root, nm, "moe.expert_ffn", "moe_intermediate_size", 1, 1, TS_MAX_FFN, 0, &e->expert_ffn));
    if (shared) {
        TS_CHECK(hf_int(r, root, nm, "moe.shared_ffn", "shared_expert_intermediate_size", 0, 0, TS_MAX_FFN, 0,
                        &e->shared_ffn));
        e->shared_experts = e->shared_ffn > 0;
    }
    int step;
    TS_CHECK(hf_i32(r, root, nm, "moe.every", "decoder_sparse_step", 0, 1, m->layers, 1, &step));
    hf_name(nm, r, "moe.first_dense", "decoder_sparse_step");
    e->first_dense = step - 1;
    e->every = step;
    const cJSON *dense = cJSON_GetObjectItemCaseSensitive(root, "mlp_only_layers");
    if (dense != NULL && !(cJSON_IsArray(dense) && cJSON_GetArraySize(dense) == 0))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.mlp_only_layers: expected an empty list (a dense "
                       "layer set other than decoder_sparse_step is not supported), got %s",
                       r->file, r->path, ts_json_type_name(dense));
    return TS_OK;
}

/* Qwen2-MoE: Qwen2 attention, its experts with one shared expert. */
static ts_status read_qwen2_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_qwen2(r, root, nm, m));
    return read_qwen_experts(r, root, nm, 1, m);
}

/* DeepSeek's router (transformers DeepseekV3Config / DeepseekV2Config): scoring_func
 * ("sigmoid" in V3, "softmax" in V2), topk_method "noaux_tc" (V3's bias-based balancing),
 * n_group / topk_group (group-limited routing, used when n_group > 1) and routed_scaling_factor. */
static ts_status read_deepseek_router(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_moe *e) {
    char score[32], method[32];
    TS_CHECK(ts_jr_str(r, root, "scoring_func", 0, "softmax", score, sizeof score));
    TS_CHECK(ts_jr_str(r, root, "topk_method", 0, "greedy", method, sizeof method));
    e->router_sigmoid = strcmp(score, "sigmoid") == 0;
    e->router_expert_bias = strcmp(method, "noaux_tc") == 0;
    int groups, group_topk;
    TS_CHECK(hf_i32(r, root, nm, "moe.router_groups", "n_group", 0, 0, e->experts, 0, &groups));
    TS_CHECK(hf_i32(r, root, nm, "moe.router_group_topk", "topk_group", 0, 0, TS_MAX_EXPERTS, 0, &group_topk));
    if (groups > 1) e->router_groups = groups, e->router_group_topk = group_topk;
    double scale;
    TS_CHECK(ts_jr_num(r, root, "routed_scaling_factor", 0, 0, 1e6, 1, &scale));
    if (scale != 1) e->router_scale = scale;
    return TS_OK;
}


/* DeepSeek-V3 (transformers DeepseekV3Config): MLA attention; layer i is MoE when
 * i >= first_k_dense_replace and i % moe_layer_freq == 0, which is Tessera's rule with
 * first_dense rounded up to a multiple of the frequency. The shared experts form one MLP of
 * n_shared_experts * moe_intermediate_size, the same parameters as n_shared_experts experts. */

ts_status read_deepseek_v3(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_shape(r, root, nm, &llama_keys, m));
    TS_CHECK(read_kv_heads(r, root, nm, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "intermediate_size", 1, 0, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, attention_dropout, 1, &m->dropout));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    TS_CHECK(read_rope_theta(r, root, nm, m));
    m->activation = TS_ACT_SWIGLU;
    m->norm = TS_NORM_RMSNORM;
    m->position = TS_POS_ROPE;

    ts_mla *a = &m->mla;
    TS_CHECK(hf_i32(r, root, nm, "mla.q_lora_rank", "q_lora_rank", 0, 0, TS_MAX_LORA_RANK, 0, &a->q_lora_rank));
    TS_CHECK(hf_i32(r, root, nm, "mla.kv_lora_rank", "kv_lora_rank", 1, 1, TS_MAX_LORA_RANK, 0, &a->kv_lora_rank));
    TS_CHECK(hf_i32(r, root, nm, "mla.qk_nope_dim", "qk_nope_head_dim", 1, 0, TS_MAX_HEAD_DIM, 0, &a->qk_nope_dim));
    TS_CHECK(hf_i32(r, root, nm, "mla.qk_rope_dim", "qk_rope_head_dim", 1, 0, TS_MAX_HEAD_DIM, 0, &a->qk_rope_dim));
    TS_CHECK(hf_i32(r, root, nm, "mla.v_dim", "v_head_dim", 1, 1, TS_MAX_HEAD_DIM, 0, &a->v_dim));
    m->head_dim = a->qk_nope_dim + a->qk_rope_dim;
    hf_name(nm, r, "head_dim", "qk_nope_head_dim"); /* with qk_rope_head_dim: MLA's query/key width */
    return read_deepseek_moe(r, root, nm, m);
}

/* A family's routed experts and the shared ones beside them (as wide as a routed expert,
 * moe_intermediate_size): the keys naming the counts and transformers' defaults. */
ts_status hf_read_experts(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_expert_keys *k,
                          ts_moe *e) {
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", k->experts, 0, k->experts_min, TS_MAX_EXPERTS, k->experts_def,
                    &e->experts));
    if (e->experts == 0) return TS_OK;
    TS_CHECK(hf_i32(r, root, nm, "moe.top_k", k->top_k, k->required, 1, e->experts, k->top_k_def, &e->top_k));
    TS_CHECK(hf_int(r, root, nm, "moe.expert_ffn", "moe_intermediate_size", k->required, 1, TS_MAX_FFN, k->ffn_def,
                    &e->expert_ffn));
    TS_CHECK(hf_i32(r, root, nm, "moe.shared_experts", k->shared, 0, 0, TS_MAX_EXPERTS, k->shared_def,
                    &e->shared_experts));
    if (e->shared_experts > 0) e->shared_ffn = e->expert_ffn;
    hf_name(nm, r, "moe.shared_ffn", "moe_intermediate_size");
    return TS_OK;
}

/* What DeepSeek-V3 and GLM-4.5 share: num_nextn_predict_layers MTP modules, routed experts of
 * moe_intermediate_size and as many shared ones, dense layers before first_k_dense_replace (every
 * moe_layer_freq-th after), the grouped sigmoid router. */
ts_status read_deepseek_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(hf_i32(r, root, nm, "mtp_layers", "num_nextn_predict_layers", 0, 0, TS_MAX_MTP_LAYERS, 0,
                    &m->mtp_layers));
    ts_moe *e = &m->moe;
    static const hf_expert_keys keys = {"n_routed_experts", "num_experts_per_tok", "n_shared_experts", 1, 0, 0, 0, 0, 0};
    TS_CHECK(hf_read_experts(r, root, nm, &keys, e));
    if (e->experts == 0) return TS_OK;
    int first, freq;
    TS_CHECK(hf_i32(r, root, nm, "moe.first_dense", "first_k_dense_replace", 0, 0, m->layers - 1, 0, &first));
    TS_CHECK(hf_i32(r, root, nm, "moe.every", "moe_layer_freq", 0, 1, m->layers, 1, &freq));
    e->first_dense = (first + freq - 1) / freq * freq;
    e->every = freq;
    return read_deepseek_router(r, root, nm, e);
}

/* GLM-4.5 (transformers Glm4MoeConfig): Llama-shaped grouped-query attention with its head_dim and
 * Q/K/V biases (attention_bias), DeepSeek-V3's experts, router and MTP modules without MLA.
 * partial_rotary_factor rotates part of each head (rotary's bytes are counted whole) and
 * use_qk_norm adds two head-wide norms (below 1e-5 of the total, not counted). */
static ts_status read_glm4_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    TS_CHECK(read_deepseek_moe(r, root, nm, m));
    /* Glm4MoeTopkRouter scores with a sigmoid and a per-expert correction bias whatever the
     * config says (it has no scoring_func / topk_method keys) */
    m->moe.router_sigmoid = m->moe.experts > 0;
    m->moe.router_expert_bias = m->moe.experts > 0;
    return TS_OK;
}

/* Solar Open (transformers SolarOpenConfig, modular_solar_open.py): Llama's decoder layer
 * (LlamaAttention: no QK norm, Q/K/V biases by attention_bias, o_proj without) with GLM-4.5's
 * experts and router (Glm4MoeMoE) on every layer: n_routed_experts of moe_intermediate_size, top
 * num_experts_per_tok, n_shared_experts as one MLP, a sigmoid with a correction bias. The class has
 * no dense layers, MTP modules or QK norm, so a config's intermediate_size, first_k_dense_replace
 * (Solar-Open-100B writes 10240 and 0), num_nextn_predict_layers and use_qk_norm change nothing.
 * Absent keys take SolarOpenConfig's defaults (head_dim 128, 8 key/value heads, 128 experts of
 * 1280, top 8, one shared expert, 131072 positions). */
static ts_status read_solar_open(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 131072, 0};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(hf_i32(r, root, nm, "head_dim", "head_dim", 0, 1, TS_MAX_HEAD_DIM, 128, &m->head_dim));
    TS_CHECK(hf_i32(r, root, nm, "kv_heads", "num_key_value_heads", 0, 1, m->heads, m->heads < 8 ? m->heads : 8,
                    &m->kv_heads));
    TS_CHECK(read_dropout(r, root, attention_dropout, 1, &m->dropout));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    TS_CHECK(read_rope_theta(r, root, nm, m));
    int64_t unused_ffn; /* still a size: a malformed one is refused */
    TS_CHECK(hf_int(r, root, nm, NULL, "intermediate_size", 0, 0, TS_MAX_FFN, 0, &unused_ffn));
    m->activation = TS_ACT_SWIGLU;
    m->norm = TS_NORM_RMSNORM;
    m->position = TS_POS_ROPE;
    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", "n_routed_experts", 0, 1, TS_MAX_EXPERTS, 128, &e->experts));
    TS_CHECK(hf_i32(r, root, nm, "moe.top_k", "num_experts_per_tok", 0, 1, e->experts, e->experts < 8 ? e->experts : 8,
                    &e->top_k));
    TS_CHECK(hf_int(r, root, nm, "moe.expert_ffn", "moe_intermediate_size", 0, 1, TS_MAX_FFN, 1280, &e->expert_ffn));
    TS_CHECK(hf_i32(r, root, nm, "moe.shared_experts", "n_shared_experts", 0, 0, TS_MAX_EXPERTS, 1,
                    &e->shared_experts));
    if (e->shared_experts > 0) e->shared_ffn = e->expert_ffn;
    e->every = 1; /* every layer, first_dense 0 */
    TS_CHECK(read_deepseek_router(r, root, nm, e));
    e->router_sigmoid = e->router_expert_bias = 1; /* Glm4MoeTopkRouter's, whatever the keys say */
    if (m->heads % m->kv_heads != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.num_key_value_heads: num_attention_heads %d is not divisible by "
                       "num_key_value_heads %d", r->file, r->path, m->heads, m->kv_heads);
    return TS_OK;
}

/* What GPT-2 and GPT-J share: the shape under GPT-2's key names, a GELU MLP of n_inner (null: 4h),
 * LayerNorm, dropout at the three rates. */
ts_status read_gpt_block(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_keys *keys,
                         const hf_rate *rates, ts_model *m) {
    TS_CHECK(read_shape(r, root, nm, keys, m));
    TS_CHECK(read_head_dim(r, root, nm, keys, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "n_inner", 0, 1, TS_MAX_FFN, 4 * m->hidden, &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, rates, 3, &m->dropout));
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    return TS_OK;
}

/* GPT-2: learned positions, pre-LayerNorm, biases everywhere, GELU MLP of n_inner (null: 4h),
 * LM head tied to the embedding. */
static ts_status read_gpt2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"n_embd", "n_layer", "n_head", "n_positions", 1024, 1};
    static const hf_rate rates[] = {{"resid_pdrop", 0.1}, {"embd_pdrop", 0.1}, {"attn_pdrop", 0.1}};
    TS_CHECK(read_gpt_block(r, root, nm, &keys, rates, m));
    m->position = TS_POS_LEARNED;
    m->qkv_bias = m->linear_bias = 1;
    return read_gpt2_head_type(r, root, nm, m);
}

/* GPT-NeoX: rotary, LayerNorm, biased Q/K/V and dense (attention_bias) and MLP, untied head. */
static ts_status read_gpt_neox(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 2048, 0};
    static const hf_rate rates[] = {{"hidden_dropout", 0.0}, {"attention_dropout", 0.0}};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &keys, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "intermediate_size", 1, 1, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 1, &m->qkv_bias));
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_ROPE;
    m->linear_bias = 1;
    return TS_OK;
}

/* BLOOM: ALiBi (no position table), a LayerNorm after the word embedding, MLP 4h, biases, tied
 * head. Sequence length from seq_length (ALiBi has no hard limit). */
static ts_status read_bloom(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_rate rates[] = {{"hidden_dropout", 0.0}, {"attention_dropout", 0.0}};
    hf_keys keys = {pick(root, "hidden_size", "n_embed"),
                    pick(root, "n_layer", "num_hidden_layers"),
                    pick(root, "n_head", "num_attention_heads"), "seq_length", 2048, 1};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &keys, m));
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    m->ffn_hidden = 4 * m->hidden;
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_ALIBI;
    m->embed_norm = 1;
    m->qkv_bias = m->linear_bias = 1;
    return TS_OK;
}

/* OPT: learned positions with max_position_embeddings + 2 rows (OPTLearnedPositionalEmbedding's
 * offset of 2), ReLU MLP of ffn_dim (the GELU shape), biases (enable_bias), tied head, and
 * project_in/out when word_embed_proj_dim differs from hidden_size (OPT-350m). */
static ts_status read_opt(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 2048, 1};
    static const hf_rate rates[] = {{"dropout", 0.1}, {"attention_dropout", 0.0}};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &keys, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "ffn_dim", 1, 1, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(hf_int(r, root, nm, "embed_dim", "word_embed_proj_dim", 0, 1, TS_MAX_HIDDEN, m->hidden,
                    &m->embed_dim));
    if (m->embed_dim == m->hidden) m->embed_dim = 0;
    TS_CHECK(hf_bool(r, root, "enable_bias", 0, 1, &m->linear_bias));
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    m->qkv_bias = m->linear_bias;
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_LEARNED;
    m->position_offset = 2;
    return TS_OK;
}


/* --- issue 19's families ---------------------------------------------------------------------- */

static int is_full_layer(const cJSON *types, int i) {
    const cJSON *t = cJSON_GetArrayItem(types, i);
    return cJSON_IsString(t) && strcmp(t->valuestring, "full_attention") == 0;
}

/* The first of the n layer types that breaks "full exactly at first, first + period, ...", or -1. */
static int pattern_break(const cJSON *types, int n, int first, int period) {
    for (int i = 0; i < n; i++)
        if (is_full_layer(types, i) != (i >= first && (i - first) % period == 0)) return i;
    return -1;
}

/* Which layers attend locally, from layer_types ("sliding_attention" / "full_attention" per
 * layer, transformers' newer configs) when given, else `def_full_every`. Tessera keeps the pattern
 * "global when (i + 1) % N == 0" (model.h ts_window). A pattern of one global layer every N that
 * starts elsewhere in its period (CWM's layers 0, 4, 8, ...: CwmConfig's default) is read as N: each
 * global layer moves within its period, which changes no parameter and, with whole periods, no
 * FLOPs (the cost model prices the layers' mean; GPT-Neo's are read so too). Another pattern is
 * refused, naming the first entry that breaks Tessera's own. */
ts_status read_layer_types(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m,
                           int def_full_every) {
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    m->window.full_every = def_full_every;
    if (!cJSON_IsArray(types)) return TS_OK;
    hf_name(nm, r, "window.full_every", "layer_types");
    int n = cJSON_GetArraySize(types), first = -1, second = -1;
    if (n != m->layers) /* transformers' layer_type_validation refuses it too */
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.layer_types: %d entries, expected one a layer (%d)", r->file, r->path, n,
                       m->layers);
    for (int i = 0; i < n && second < 0; i++)
        if (is_full_layer(types, i)) *(first < 0 ? &first : &second) = i;
    m->window.full_every = first + 1; /* 0: no full layer, every layer local */
    int bad = first < 0 ? -1 : pattern_break(types, n, first, first + 1);
    if (bad < 0) return TS_OK;
    int period = second < 0 ? n : second - first; /* the phase-shifted reading */
    if (first < period && pattern_break(types, n, first, period) < 0) {
        if (n % period != 0)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.layer_types: a full-attention layer every %d layers from layer %d "
                           "over %d layers: Tessera's pattern (the last of each %d) would count another number of "
                           "them", r->file, r->path, period, first, n, period);
        m->window.full_every = period;
        return TS_OK;
    }
    const cJSON *t = cJSON_GetArrayItem(types, bad);
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.layer_types[%d]: Tessera models a full-attention layer every N layers "
                   "(N = %d here), got \"%s\"", r->file, r->path, bad, first + 1,
                   cJSON_IsString(t) ? t->valuestring : "?");
}

/* sliding_window (null or absent: none), on the layers read_layer_types says. */
ts_status read_sliding(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m,
                       int def_full_every) {
    int64_t w;
    TS_CHECK(hf_int(r, root, nm, "window.tokens", "sliding_window", 0, 1, TS_MAX_SEQ, 0, &w));
    int use = 1;
    if (cJSON_GetObjectItemCaseSensitive(root, "use_sliding_window") != NULL)
        TS_CHECK(hf_bool(r, root, "use_sliding_window", 0, 0, &use));
    if (w == 0 || !use) return TS_OK;
    m->window.tokens = w;
    return read_layer_types(r, root, nm, m, def_full_every);
}

/* Qwen3 (transformers Qwen3Attention): Llama's shape with an RMSNorm of head_dim on queries and
 * keys; attention_bias would put biases on Q, K, V and O. */
static ts_status read_qwen3(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    m->linear_bias = 0;
    m->qk_norm = TS_QKNORM_HEAD;
    return read_sliding(r, root, nm, m, 0);
}

/* Qwen3-MoE: Qwen3 attention, experts as Qwen2-MoE without a shared expert. */
static ts_status read_qwen3_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_qwen3(r, root, nm, m));
    return read_qwen_experts(r, root, nm, 0, m);
}

/* The shape of a grouped-query model under `keys`, its head dim, kv heads and a required
 * intermediate_size (Gemma, StarCoder2, Phi, Command R, StableLM). */
ts_status read_gqa_shape(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_keys *keys,
                         ts_model *m) {
    TS_CHECK(read_shape(r, root, nm, keys, m));
    TS_CHECK(read_head_dim(r, root, nm, keys, m));
    TS_CHECK(read_kv_heads(r, root, nm, m));
    return hf_int(r, root, nm, "ffn_hidden", "intermediate_size", 1, 1, TS_MAX_FFN, 0, &m->ffn_hidden);
}

/* Gemma 2 and 3 (transformers Gemma2DecoderLayer, Gemma3DecoderLayer): GeGLU MLP, four RMSNorms
 * per layer (input, post-attention, pre- and post-feedforward), embeddings scaled by sqrt(h) and
 * tied by default; Gemma 2 soft-caps scores and logits and alternates sliding and global layers
 * (layer 0 local); Gemma 3 has Q/K norms and one global layer in sliding_window_pattern (6).
 * Gemma 1 (transformers GemmaDecoderLayer) is the same without the sandwich norms (two RMSNorms
 * per layer), soft caps or local attention. */
static ts_status read_gemma(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m, int version) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 8192, 1};
    TS_CHECK(read_gqa_shape(r, root, nm, &keys, m));
    TS_CHECK(read_dropout(r, root, attention_dropout, 1, &m->dropout));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    TS_CHECK(read_rope_theta(r, root, nm, m));
    m->activation = TS_ACT_SWIGLU;
    m->gelu_gate = 1;
    m->norm = TS_NORM_RMSNORM;
    m->position = TS_POS_ROPE;
    m->norms_per_layer = version == 1 ? 0 : 4;
    m->embed_scaled = 1;
    if (version == 1) return TS_OK;
    int64_t every = 2;
    if (version == 3) {
        m->qk_norm = TS_QKNORM_HEAD;
        TS_CHECK(hf_int(r, root, nm, "window.full_every", "sliding_window_pattern", 0, 1, TS_MAX_LAYERS, 6, &every));
    } else {
        TS_CHECK(hf_num_or_null(r, root, nm, "attn_softcap", "attn_logit_softcapping", &m->attn_softcap));
        TS_CHECK(hf_num_or_null(r, root, nm, "logit_softcap", "final_logit_softcapping", &m->logit_softcap));
    }
    return read_sliding(r, root, nm, m, (int)every);
}
static ts_status read_gemma1(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    return read_gemma(r, root, nm, m, 1);
}
static ts_status read_gemma2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    return read_gemma(r, root, nm, m, 2);
}
static ts_status read_gemma3(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    return read_gemma(r, root, nm, m, 3);
}

/* A soft cap the class defaults to `def` when the key is absent; null: none. */
static ts_status hf_softcap(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *field,
                            const char *key, double def, double *out) {
    if (cJSON_GetObjectItemCaseSensitive(root, key) != NULL) return hf_num_or_null(r, root, nm, field, key, out);
    hf_name(nm, r, field, key);
    *out = def;
    return TS_OK;
}

/* VaultGemma (transformers VaultGemmaConfig, Gemma2Config's keys and defaults; VaultGemmaDecoderLayer,
 * Gemma2DecoderLayer with post_attention_layernorm and post_feedforward_layernorm deleted;
 * google/vaultgemma-1b): Gemma 2's layer with two RMSNorms where Gemma 2 has four. Absent keys take
 * VaultGemmaConfig's defaults: caps 50 and 30 (null: none), a 4096-token window on the layers
 * layer_types marks "sliding_attention" (by default every other one, layer 0 local); a layer_types of
 * full attention only leaves no window. */
static ts_status read_vaultgemma(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_gemma(r, root, nm, m, 2));
    m->norms_per_layer = 0; /* two norms a layer */
    TS_CHECK(hf_softcap(r, root, nm, "attn_softcap", "attn_logit_softcapping", 50, &m->attn_softcap));
    TS_CHECK(hf_softcap(r, root, nm, "logit_softcap", "final_logit_softcapping", 30, &m->logit_softcap));
    if (cJSON_GetObjectItemCaseSensitive(root, "sliding_window") == NULL) {
        m->window.tokens = 4096;
        hf_name(nm, r, "window.tokens", "sliding_window");
        TS_CHECK(read_layer_types(r, root, nm, m, 2));
    }
    if (m->window.full_every == 1) m->window.tokens = 0; /* every layer attends fully */
    return TS_OK;
}

/* Phi-3 (transformers Phi3Attention, Phi3MLP): fused qkv_proj and gate_up_proj hold the same
 * matrices as Llama's separate ones; sliding_window (Phi-3-mini: 2047) on every layer. */
static ts_status read_phi3(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    return read_sliding(r, root, nm, m, 0);
}

/* gpt-oss (transformers GptOssAttention, GptOssExperts, GptOssTopKRouter): biases on Q, K, V, O,
 * a learned sink logit per head, experts of intermediate_size with biases, a router with a bias,
 * sliding-window and full layers alternating (layer_types). */
static ts_status read_gpt_oss(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", "num_local_experts", 1, 1, TS_MAX_EXPERTS, 0, &e->experts));
    const char *k = cJSON_GetObjectItemCaseSensitive(root, "num_experts_per_tok") ? "num_experts_per_tok"
                                                                                  : "experts_per_token";
    TS_CHECK(hf_i32(r, root, nm, "moe.top_k", k, 1, 1, e->experts, 0, &e->top_k));
    e->expert_ffn = m->ffn_hidden;
    hf_name(nm, r, "moe.expert_ffn", "intermediate_size");
    e->every = 1;
    m->qkv_bias = m->linear_bias = 1;
    m->attn_sinks = 1;
    m->router_bias = 1;
    return read_sliding(r, root, nm, m, 2);
}

/* OLMo 2 (transformers Olmo2Attention, Olmo2DecoderLayer): RMSNorm over the whole Q and K
 * projections, norms after attention and MLP (two per layer, as pre-norms count). */
ts_status read_olmo2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    m->qk_norm = TS_QKNORM_FULL;
    return TS_OK;
}

/* OLMoE (transformers OlmoeConfig): OLMo 2's attention (Q and K normed over the whole projection,
 * OlmoeAttention's q_norm of hidden_size), every layer num_experts experts of intermediate_size. */
static ts_status read_olmoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_olmo2(r, root, nm, m));
    return read_expert_layers(r, root, nm, "num_experts", m);
}

/* StarCoder2 (transformers Starcoder2Config): GQA with rotary, a 2-matrix GELU MLP, LayerNorm,
 * biases everywhere when use_bias, a sliding window on every layer. */
static ts_status read_starcoder2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 4096, 1};
    static const hf_rate rates[] = {{"residual_dropout", 0.0}, {"embedding_dropout", 0.0}, {"attention_dropout", 0.0}};
    TS_CHECK(read_gqa_shape(r, root, nm, &keys, m));
    TS_CHECK(read_dropout(r, root, rates, 3, &m->dropout));
    TS_CHECK(hf_bool(r, root, "use_bias", 0, 1, &m->linear_bias));
    TS_CHECK(read_rope_theta(r, root, nm, m));
    m->qkv_bias = m->linear_bias;
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_ROPE;
    return read_sliding(r, root, nm, m, 0);
}

/* GPT-J (transformers GPTJBlock): attention and MLP in parallel from one LayerNorm, rotary on
 * rotary_dim of each head, no Q/K/V/O biases, a biased GELU MLP of n_inner (null: 4h), untied head.
 * Approximations (1e-5 of the total): the attention output's bias counted with the MLP's
 * (linear_bias), the LM head's bias not counted. */
static ts_status read_gptj(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"n_embd", "n_layer", "n_head", "n_positions", 2048, 0};
    static const hf_rate rates[] = {{"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}};
    TS_CHECK(read_gpt_block(r, root, nm, &keys, rates, m));
    m->position = TS_POS_ROPE;
    m->norms_per_layer = 1;
    m->linear_bias = 1;
    return TS_OK;
}

/* Llama 4 text model (transformers Llama4TextConfig, inside text_config): MoE layers every
 * interleave_moe_layer_step (layer i is MoE when (i + 1) % step == 0) with one shared expert of
 * intermediate_size, dense layers of intermediate_size_mlp, chunked attention on the RoPE
 * layers (attention_chunk_size; every no_rope_layer_interval-th layer is global, NoPE). Its Q/K
 * norm is an L2 norm without weights. */
static ts_status read_llama4_text(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "intermediate_size_mlp", 1, 1, TS_MAX_FFN, 0, &m->ffn_hidden));
    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", "num_local_experts", 1, 1, TS_MAX_EXPERTS, 0, &e->experts));
    TS_CHECK(hf_i32(r, root, nm, "moe.top_k", "num_experts_per_tok", 1, 1, e->experts, 0, &e->top_k));
    TS_CHECK(hf_int(r, root, nm, "moe.expert_ffn", "intermediate_size", 1, 1, TS_MAX_FFN, 0, &e->expert_ffn));
    e->shared_experts = 1;
    e->shared_ffn = e->expert_ffn;
    hf_name(nm, r, "moe.shared_ffn", "intermediate_size");
    int step, nope_every;
    TS_CHECK(hf_i32(r, root, nm, "moe.every", "interleave_moe_layer_step", 0, 1, m->layers, 1, &step));
    hf_name(nm, r, "moe.first_dense", "interleave_moe_layer_step");
    e->first_dense = step - 1;
    e->every = step;
    TS_CHECK(hf_int(r, root, nm, "window.tokens", "attention_chunk_size", 0, 1, TS_MAX_SEQ, 0, &m->window.tokens));
    TS_CHECK(hf_i32(r, root, nm, "window.full_every", "no_rope_layer_interval", 0, 0, TS_MAX_LAYERS, 4, &nope_every));
    m->window.full_every = nope_every;
    m->window.chunked = 1;
    return TS_OK;
}

typedef ts_status (*hf_reader)(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);

/* model_type → reader. kimi_k2 is a DeepseekV3ForCausalLM; deepseek_v2 writes the same keys. The
 * multimodal gemma3 and llama4 configs hold the language model under text_config (read_config).
 * granite is Llama's shape (transformers GraniteConfig): its multipliers change no parameter. */
static const char *const hf_types[] = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe",
                                       "deepseek_v3", "gpt2", "gpt_neox", "bloom", "opt",
                                       "qwen3", "qwen3_moe", "gemma2", "gemma3_text", "gemma3",
                                       "phi3", "gpt_oss", "deepseek_v2", "kimi_k2", "olmo2",
                                       "starcoder2", "gptj", "llama4", "llama4_text", "glm4_moe",
                                       "olmoe",
                                       "nemotron", "granite", "granitemoe", "granitemoeshared",
                                       "phimoe", "dbrx", "olmo",
                                       "gemma", "phi", "falcon", "cohere", "stablelm", "cohere2",
                                       "ernie4_5", "ernie4_5_moe", "hunyuan_v1_dense", "hunyuan_v1_moe", "smollm3",
                                       "deepseek", "minicpm", "seed_oss",
                                       "gpt_bigcode", "gpt_neo", "codegen", "mpt", "internlm2", "glm", "glm4",
                                       "chatglm", "baichuan", "qwen", "exaone", "exaone4",
                                       "minimax_m2", "bailing_moe", "deepseek_v32", "mimo", "dots1", "arcee",
                                       "apertus",
                                       /* ministral (MinistralConfig): Mistral's layer with sliding_window on
                                        * the layers layer_types names, read as Phi-3; internlm (InternLM v1,
                                        * remote code modeling_internlm.py): Llama's layer with Q/K/V biases
                                        * from `bias` (default true), read as InternLM2; helium
                                        * (HeliumConfig): Llama's layer. */
                                       "olmo3", "ministral", "internlm", "helium", "jetmoe", "solar_open", "afmoe",
                                       "cwm", "vaultgemma", "persimmon", "jais2", "nanochat", "bitnet",
                                       "glm4_moe_lite", "exaone_moe", "granitemoehybrid", "arctic",
                                       /* refused: their readers say what is not modelled */
                                       "diffllama", "gemma3n_text", "longcat_flash", "nemotron-nas", "deci", "gemma4_text",
                                       "mimo_v2_flash", NULL};
static const hf_reader hf_readers[] = {read_llama, read_llama, read_mixtral, read_qwen2,
                                       read_qwen2_moe, read_deepseek_v3, read_gpt2,
                                       read_gpt_neox, read_bloom, read_opt,
                                       read_qwen3, read_qwen3_moe, read_gemma2, read_gemma3, read_gemma3,
                                       read_phi3, read_gpt_oss, read_deepseek_v3, read_deepseek_v3, read_olmo2,
                                       read_starcoder2, read_gptj, read_llama4_text, read_llama4_text,
                                       read_glm4_moe, read_olmoe,
                                       read_nemotron, read_llama, read_granitemoe, read_granitemoeshared,
                                       read_phimoe, read_dbrx, read_olmo,
                                       read_gemma1, read_phi, read_falcon, read_cohere, read_stablelm, read_cohere2,
                                       read_ernie4_5, read_ernie4_5_moe, read_hunyuan_dense, read_hunyuan_moe,
                                       read_smollm3, read_deepseek_v1, read_minicpm, read_seed_oss,
                                       read_gpt_bigcode, read_gpt_neo, read_gptj, read_mpt, read_internlm2, read_glm,
                                       read_glm4,
                                       read_chatglm, read_baichuan, read_qwen, read_exaone, read_exaone4,
                                       read_minimax_m2, read_bailing_moe, read_deepseek_v32, read_mimo, read_dots1,
                                       read_arcee, read_apertus,
                                       read_olmo3, read_phi3, read_internlm2, read_llama, read_jetmoe,
                                       read_solar_open, read_afmoe, read_cwm, read_vaultgemma, read_persimmon,
                                       read_jais2, read_nanochat, read_bitnet, read_glm4_moe_lite, read_exaone_moe,
                                       read_granitemoehybrid, read_arctic,
                                       read_diffllama, read_gemma3n,
                                       read_longcat_flash, read_nemotron_nas, read_deci, read_gemma4,
                                       read_mimo_v2_flash};
_Static_assert(sizeof hf_types / sizeof hf_types[0] == sizeof hf_readers / sizeof hf_readers[0] + 1,
               "one reader per model_type");

/* The readers that refuse their family, saying what Tessera does not model (hf_more.c). */
static const hf_reader hf_refusing[] = {read_jetmoe, read_diffllama, read_gemma3n, read_longcat_flash,
                                        read_nemotron_nas, read_deci, read_gemma4, read_mimo_v2_flash};

static int refusing(hf_reader rd) {
    for (size_t i = 0; i < sizeof hf_refusing / sizeof hf_refusing[0]; i++)
        if (hf_refusing[i] == rd) return 1;
    return 0;
}

/* The model_type of an architectures[] name, for configs whose model_type is missing or unknown
 * (transformers' *ForCausalLM class names). */
static const char *const hf_arch_names[][2] = {
    {"LlamaForCausalLM", "llama"}, {"MistralForCausalLM", "mistral"}, {"MixtralForCausalLM", "mixtral"},
    {"Qwen2ForCausalLM", "qwen2"}, {"Qwen2MoeForCausalLM", "qwen2_moe"}, {"Qwen3ForCausalLM", "qwen3"},
    {"Qwen3MoeForCausalLM", "qwen3_moe"}, {"DeepseekV3ForCausalLM", "deepseek_v3"},
    {"DeepseekV2ForCausalLM", "deepseek_v2"}, {"GPT2LMHeadModel", "gpt2"}, {"GPTNeoXForCausalLM", "gpt_neox"},
    {"BloomForCausalLM", "bloom"}, {"OPTForCausalLM", "opt"}, {"Gemma2ForCausalLM", "gemma2"},
    {"Gemma3ForCausalLM", "gemma3_text"}, {"Gemma3ForConditionalGeneration", "gemma3"},
    {"Phi3ForCausalLM", "phi3"}, {"GptOssForCausalLM", "gpt_oss"}, {"Olmo2ForCausalLM", "olmo2"},
    {"Starcoder2ForCausalLM", "starcoder2"}, {"GPTJForCausalLM", "gptj"},
    {"Llama4ForConditionalGeneration", "llama4"}, {"Llama4ForCausalLM", "llama4_text"},
    {"Glm4MoeForCausalLM", "glm4_moe"}, {"OlmoeForCausalLM", "olmoe"},
    {"NemotronForCausalLM", "nemotron"}, {"GraniteForCausalLM", "granite"}, {"GraniteMoeForCausalLM", "granitemoe"},
    {"GraniteMoeSharedForCausalLM", "granitemoeshared"}, {"PhimoeForCausalLM", "phimoe"},
    {"PhiMoEForCausalLM", "phimoe"}, {"DbrxForCausalLM", "dbrx"}, {"OlmoForCausalLM", "olmo"},
    {"GemmaForCausalLM", "gemma"}, {"PhiForCausalLM", "phi"}, {"FalconForCausalLM", "falcon"},
    {"RWForCausalLM", "falcon"}, {"CohereForCausalLM", "cohere"}, {"StableLmForCausalLM", "stablelm"},
    {"StableLMEpochForCausalLM", "stablelm"}, {"Cohere2ForCausalLM", "cohere2"},
    {"Ernie4_5_ForCausalLM", "ernie4_5"}, {"Ernie4_5_MoeForCausalLM", "ernie4_5_moe"},
    {"HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense"}, {"HunYuanMoEV1ForCausalLM", "hunyuan_v1_moe"},
    {"SmolLM3ForCausalLM", "smollm3"}, {"DeepseekForCausalLM", "deepseek"}, {"MiniCPMForCausalLM", "minicpm"},
    {"SeedOssForCausalLM", "seed_oss"},
    {"GPTBigCodeForCausalLM", "gpt_bigcode"}, {"GPTNeoForCausalLM", "gpt_neo"}, {"CodeGenForCausalLM", "codegen"},
    {"MptForCausalLM", "mpt"}, {"MPTForCausalLM", "mpt"}, {"InternLM2ForCausalLM", "internlm2"},
    {"GlmForCausalLM", "glm"}, {"Glm4ForCausalLM", "glm4"},
    {"ChatGLMModel", "chatglm"}, {"ChatGLMForConditionalGeneration", "chatglm"}, {"BaichuanForCausalLM", "baichuan"},
    {"BaiChuanForCausalLM", "baichuan"}, {"QWenLMHeadModel", "qwen"}, {"ExaoneForCausalLM", "exaone"},
    {"Exaone4ForCausalLM", "exaone4"},
    {"MiniMaxM2ForCausalLM", "minimax_m2"}, {"BailingMoeForCausalLM", "bailing_moe"},
    {"BailingMoeV2ForCausalLM", "bailing_moe"}, {"DeepseekV32ForCausalLM", "deepseek_v32"},
    {"MiMoForCausalLM", "mimo"}, {"Dots1ForCausalLM", "dots1"}, {"ArceeForCausalLM", "arcee"},
    {"ApertusForCausalLM", "apertus"},
    {"Olmo3ForCausalLM", "olmo3"}, {"MinistralForCausalLM", "ministral"}, {"InternLMForCausalLM", "internlm"},
    {"HeliumForCausalLM", "helium"}, {"JetMoeForCausalLM", "jetmoe"}, {"FlexOlmoForCausalLM", "olmoe"},
    {"Ministral3ForCausalLM", "mistral"}, {"GlmMoeDsaForCausalLM", "deepseek_v32"},
    {"SolarOpenForCausalLM", "solar_open"}, {"AfmoeForCausalLM", "afmoe"}, {"CwmForCausalLM", "cwm"},
    {"VaultGemmaForCausalLM", "vaultgemma"}, {"PersimmonForCausalLM", "persimmon"}, {"Jais2ForCausalLM", "jais2"},
    {"NanoChatForCausalLM", "nanochat"}, {"BitNetForCausalLM", "bitnet"}, {"DiffLlamaForCausalLM", "diffllama"},
    {"Gemma3nForCausalLM", "gemma3n_text"}, {"Gemma3nForConditionalGeneration", "gemma3n_text"},
    {"LongcatFlashForCausalLM", "longcat_flash"}, {"DeciLMForCausalLM", "nemotron-nas"},
    {"Glm4MoeLiteForCausalLM", "glm4_moe_lite"}, {"Gemma4ForCausalLM", "gemma4_text"},
    {"Gemma4ForConditionalGeneration", "gemma4_text"}, {"MiMoV2FlashForCausalLM", "mimo_v2_flash"},
    {"ExaoneMoeForCausalLM", "exaone_moe"}, {"ExaoneMoEForCausalLM", "exaone_moe"},
    {"GraniteMoeHybridForCausalLM", "granitemoehybrid"}, {"ArcticForCausalLM", "arctic"}, {NULL, NULL}};

/* Architectures that are not decoder-only transformers: state-space (Mamba) layers, alone or mixed
 * with attention, or recurrent blocks, linear attention's recurrent form among them (Qwen3-Next's
 * and Qwen3.5's Gated DeltaNet, MiniMax-01's lightning attention, Kimi Linear's delta attention,
 * LFM2's short convolutions; transformers models/qwen3_5, qwen3_5_moe, minimax, kimi_linear,
 * lfm2_moe). Refused with what is not modelled. */
static const char *const hf_unmodelled[] = {"nemotron_h", "jamba", "falcon_h1", "mamba", "mamba2", "zamba",
                                            "zamba2", "bamba", "recurrent_gemma", "rwkv",
                                            "falcon_mamba", "qwen3_next", "lfm2", "lfm2_moe", "qwen3_5",
                                            "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "minimax",
                                            "kimi_linear", NULL};
static const char *const hf_unmodelled_arch[] = {"Mamba", "Jamba", "NemotronH", "FalconH1", "Zamba", "Bamba",
                                                 "RecurrentGemma", "Rwkv", "Qwen3Next", "Qwen3_5", "MiniMaxFor",
                                                 "KimiLinear", "Lfm2", NULL};

static int lookup_type(const char *type) {
    for (int i = 0; hf_types[i]; i++)
        if (strcmp(hf_types[i], type) == 0) return i;
    return -1;
}

/* Vision-language wrappers whose language model is a family above: its keys at the root (the
 * Qwen2-VL and Qwen2.5-VL configs on the Hub) or under text_config (transformers' newer saves,
 * model_type qwen2_5_vl_text). transformers' Qwen2_5_VLTextModel is Qwen2's decoder with
 * multimodal RoPE sections, which move no parameters or FLOPs; Qwen3-VL's text models
 * (Qwen3VLTextConfig, Qwen3VLMoeTextConfig, under text_config) are Qwen3's and Qwen3-MoE's decoders
 * with interleaved multimodal RoPE, likewise. Phi-3.5-vision (remote code, Phi3VForCausalLM in
 * microsoft/Phi-3.5-vision-instruct's modeling_phi3_v.py) keeps Phi-3's keys and decoder at the root.
 * transformers' Glm4vTextDecoderLayer and Glm4vMoeTextDecoderLayer (models/glm4v, models/glm4v_moe)
 * hold Glm4's and Glm4Moe's modules (four norms and fused gate_up; the MoE with shared experts and
 * first_k_dense_replace) with multimodal RoPE sections, which move no parameters; Glm4vConfig builds
 * its text config from the root's keys when text_config is absent (GLM-4.1V's first saves). */
static const char *const hf_text_alias[][2] = {
    {"qwen2_vl", "qwen2"},         {"qwen2_5_vl", "qwen2"},         {"qwen2_vl_text", "qwen2"},
    {"qwen2_5_vl_text", "qwen2"},  {"qwen3_vl_text", "qwen3"},      {"qwen3_vl_moe_text", "qwen3_moe"},
    {"phi3_v", "phi3"},            {"glm4v_text", "glm4"},          {"glm4v_moe_text", "glm4_moe"},
    {"glm4v", "glm4"},             {"glm4v_moe", "glm4_moe"},       {"gemma3n", "gemma3n_text"},
    {NULL, NULL}};

/* Text-only model_types whose decoder is a family above under another name (no vision tower).
 * Ministral 3 (transformers Ministral3Config, also the text_config of Mistral 3's 2512 releases)
 * is Mistral's decoder with YaRN and Llama 4's attention-temperature scaling, which move no
 * parameters. FlexOlmo (FlexOlmoConfig) is OLMoE's layer with OLMo 2's attention and its norms
 * after attention and MLP rather than before: the same two norms a layer, so OLMoE's count.
 * GLM-5 (GlmMoeDsaConfig) is DeepSeek-V3.2's layer under DeepSeek's keys: MLA, the DSA indexer,
 * shared and routed experts after first_k_dense_replace dense layers, MTP (GLM-5 report,
 * arXiv:2602.15763, Table 1). Its indexer_types may mark layers "shared", reusing the previous
 * layer's top-k; counted as full indexers here (at most ~9M parameters a layer). */
static const char *const hf_kin_alias[][2] = {
    {"ministral3", "mistral"}, {"flex_olmo", "olmoe"}, {"glm_moe_dsa", "deepseek_v32"}, {NULL, NULL}};

/* The family an alias table names for `type`; -1 when it names none. */
static int alias_of(const char *const table[][2], const char *type) {
    for (int i = 0; table[i][0]; i++)
        if (strcmp(table[i][0], type) == 0) return lookup_type(table[i][1]);
    return -1;
}

/* The family of a model_type: its own, or the one an alias names; -1 when unknown. */
static int family_of(const char *type) {
    int t = lookup_type(type);
    if (t < 0) t = alias_of(hf_text_alias, type);
    return t >= 0 ? t : alias_of(hf_kin_alias, type);
}

static ts_status refuse_unmodelled(const ts_jreader *r, const char *key, const char *mt) {
    for (int i = 0; hf_unmodelled[i]; i++)
        if (strcmp(mt, hf_unmodelled[i]) == 0)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: \"%s\" has state-space (Mamba) or recurrent layers; "
                           "Tessera models decoder-only transformers only", r->file, r->path, key, mt);
    return TS_OK;
}

/* Where a wrapper keeps its language model: text_config (transformers' composite configs), or
 * llm_config (InternVL's remote-code configs, InternVLChatConfig). */
static const char *text_key(const cJSON *root) {
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "text_config")) &&
        cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "llm_config")))
        return "llm_config";
    return "text_config";
}

/* A multimodal config (LLaVA, Mistral 3, Idefics 3, ... or one of the aliases above) whose
 * text_config is a family Tessera reads: that family, read from text_config. */
static ts_status text_config_type(const ts_jreader *r, const cJSON *root, int *type) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, text_key(root));
    *type = -1;
    if (!cJSON_IsObject(text)) return TS_OK;
    ts_jreader tr;
    ts_jreader_child(r, text_key(root), 0, &tr);
    char mt[64];
    TS_CHECK(ts_jr_str(&tr, text, "model_type", 0, "", mt, sizeof mt));
    TS_CHECK(refuse_unmodelled(&tr, "model_type", mt));
    *type = family_of(mt);
    return TS_OK;
}

/* model_type, or the first architectures[] entry Tessera knows; refuses what it cannot model.
 * *nested: the language model is read from text_config (gemma3, llama4 and the wrappers). */
static ts_status pick_type(const ts_jreader *r, const cJSON *root, int *type, int *nested) {
    char mt[64];
    TS_CHECK(ts_jr_str(r, root, "model_type", 0, "", mt, sizeof mt));
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures"), *a;
    TS_CHECK(refuse_unmodelled(r, "model_type", mt));
    cJSON_ArrayForEach(a, archs) {
        for (int i = 0; cJSON_IsString(a) && hf_unmodelled_arch[i]; i++)
            if (strstr(a->valuestring, hf_unmodelled_arch[i]))
                return TS_FAIL(TS_ERR_INPUT, "%s: $.architectures: \"%s\" has state-space (Mamba) or recurrent "
                               "layers; Tessera models decoder-only transformers only", r->file, a->valuestring);
    }
    int has_text = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, text_key(root)));
    *type = lookup_type(mt);
    if (*type >= 0) {
        *nested = has_text && (strcmp(mt, "gemma3") == 0 || strcmp(mt, "llama4") == 0);
        return TS_OK;
    }
    *type = family_of(mt);
    int text_type;
    TS_CHECK(text_config_type(r, root, &text_type));
    if (text_type >= 0) *type = text_type;
    *nested = *type >= 0 && has_text;
    if (*type >= 0) return TS_OK;
    cJSON_ArrayForEach(a, archs) {
        for (int i = 0; cJSON_IsString(a) && hf_arch_names[i][0]; i++)
            if (strcmp(a->valuestring, hf_arch_names[i][0]) == 0) {
                *type = lookup_type(hf_arch_names[i][1]);
                return TS_OK;
            }
    }
    char list[2048] = "";
    for (int i = 0; hf_types[i]; i++) {
        if (refusing(hf_readers[i])) continue; /* known, and refused */
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", hf_types[i]);
    }
    const cJSON *text_mt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, text_key(root)),
                                                            "model_type");
    if (cJSON_IsString(text_mt))
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s.model_type: \"%s\" (the language model of \"%s\"): expected "
                       "one of %s", r->file, text_key(root), text_mt->valuestring, mt, list);
    return TS_FAIL(TS_ERR_INPUT, "%s: $.model_type: got \"%s\", expected a known architectures[] entry or one of %s",
                   r->file, mt, list);
}

/* "_name_or_path" (e.g. "meta-llama/Llama-2-7b-hf"), else the file name without ".json";
 * truncated to the 63 characters a name holds. */
static ts_status read_name(const ts_jreader *r, const cJSON *root, ts_model *m) {
    char buf[512];
    TS_CHECK(ts_jr_str(r, root, "_name_or_path", 0, "", buf, sizeof buf));
    const char *s = buf;
    size_t n = strlen(buf);
    if (n == 0) {
        const char *slash = strrchr(r->file, '/');
        s = slash ? slash + 1 : r->file;
        n = strlen(s);
        if (n > 5 && strcmp(s + n - 5, ".json") == 0) n -= 5;
    }
    if (n >= sizeof m->name) n = sizeof m->name - 1;
    memcpy(m->name, s, n);
    m->name[n] = '\0';
    return TS_OK;
}

/* transformers' defaults for the keys a text_config saved as a diff leaves out. Composite
 * configs (LLaVA, Gemma 3) were saved with the sub-config's to_diff_dict(), which drops every
 * value equal to its class's default: llava-hf/llava-1.5-7b-hf's text_config holds six keys, and
 * google/gemma-3-4b-it's no head_dim (256, not hidden_size / heads). Values from the classes'
 * __init__ signatures (transformers models/llama/configuration_llama.py LlamaConfig,
 * models/mistral/configuration_mistral.py MistralConfig, models/gemma3/configuration_gemma3.py
 * Gemma3TextConfig, models/gemma/configuration_gemma.py GemmaConfig and
 * models/gemma2/configuration_gemma2.py Gemma2Config: PaliGemma's text_config of google/paligemma-3b-pt-224
 * leaves out head_dim and the Gemma 2 soft caps are left out of PaliGemma 2's; models/glm4v/
 * configuration_glm4v.py Glm4vTextConfig, GLM-4.1V-9B's shape). */
static const struct {
    const char *type, *key;
    double value;
} hf_text_defaults[] = {
    {"llama", "vocab_size", 32000}, {"llama", "hidden_size", 4096}, {"llama", "intermediate_size", 11008},
    {"llama", "num_hidden_layers", 32}, {"llama", "num_attention_heads", 32},
    {"llama", "max_position_embeddings", 2048},
    {"mistral", "vocab_size", 32000}, {"mistral", "hidden_size", 4096}, {"mistral", "intermediate_size", 14336},
    {"mistral", "num_hidden_layers", 32}, {"mistral", "num_attention_heads", 32},
    {"mistral", "num_key_value_heads", 8}, {"mistral", "max_position_embeddings", 131072},
    {"mistral", "sliding_window", 4096},
    {"gemma3_text", "vocab_size", 262208}, {"gemma3_text", "hidden_size", 2304},
    {"gemma3_text", "intermediate_size", 9216}, {"gemma3_text", "num_hidden_layers", 26},
    {"gemma3_text", "num_attention_heads", 8}, {"gemma3_text", "num_key_value_heads", 4},
    {"gemma3_text", "head_dim", 256}, {"gemma3_text", "max_position_embeddings", 131072},
    {"gemma3_text", "sliding_window", 4096},
    {"gemma", "vocab_size", 256000}, {"gemma", "hidden_size", 3072}, {"gemma", "intermediate_size", 24576},
    {"gemma", "num_hidden_layers", 28}, {"gemma", "num_attention_heads", 16}, {"gemma", "num_key_value_heads", 16},
    {"gemma", "head_dim", 256}, {"gemma", "max_position_embeddings", 8192},
    {"gemma2", "vocab_size", 256000}, {"gemma2", "hidden_size", 2304}, {"gemma2", "intermediate_size", 9216},
    {"gemma2", "num_hidden_layers", 26}, {"gemma2", "num_attention_heads", 8}, {"gemma2", "num_key_value_heads", 4},
    {"gemma2", "head_dim", 256}, {"gemma2", "max_position_embeddings", 8192}, {"gemma2", "sliding_window", 4096},
    {"gemma2", "attn_logit_softcapping", 50}, {"gemma2", "final_logit_softcapping", 30},
    {"glm4v_text", "vocab_size", 151552}, {"glm4v_text", "hidden_size", 4096},
    {"glm4v_text", "intermediate_size", 13696}, {"glm4v_text", "num_hidden_layers", 40},
    {"glm4v_text", "num_attention_heads", 32}, {"glm4v_text", "num_key_value_heads", 2},
    {"glm4v_text", "max_position_embeddings", 32768}, {NULL, NULL, 0}};

/* A copy of `text` with its class's defaults (by its model_type, else `family`) for the keys it
 * leaves out; NULL when out of memory. The caller frees it. */
static cJSON *text_with_defaults(const cJSON *text, const char *family) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(text, "model_type");
    const char *type = cJSON_IsString(mt) ? mt->valuestring : family;
    if (strcmp(type, "gemma3") == 0) type = "gemma3_text";
    cJSON *copy = cJSON_Duplicate(text, 1);
    for (int i = 0; copy && hf_text_defaults[i].type; i++) {
        if (strcmp(hf_text_defaults[i].type, type) != 0 ||
            cJSON_GetObjectItemCaseSensitive(copy, hf_text_defaults[i].key) != NULL)
            continue;
        if (!cJSON_AddNumberToObject(copy, hf_text_defaults[i].key, hf_text_defaults[i].value)) {
            cJSON_Delete(copy);
            return NULL;
        }
    }
    return copy;
}

ts_status ts_model_from_hf(const char *file, const cJSON *root, ts_model *out) {
    memset(out, 0, sizeof *out);
    ts_jreader r;
    ts_jreader_root(&r, file);
    int type, nested;
    TS_CHECK(pick_type(&r, root, &type, &nested));
    TS_CHECK(read_name(&r, root, out));
    /* Multimodal configs hold the language model in text_config (gemma3, llama4, LLaVA-style
     * wrappers) or at the root (Qwen2-VL); the vision tower is not modelled (nor counted). */
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, text_key(root));
    char mt[64];
    TS_CHECK(ts_jr_str(&r, root, "model_type", 0, "", mt, sizeof mt));
    int wrapper = strcmp(mt, hf_types[type]) != 0 && (nested || family_of(mt) >= 0);
    int vision = nested || alias_of(hf_text_alias, mt) >= 0;
    snprintf(out->source, sizeof out->source, "Hugging Face config.json (model_type %s%s%s%s): %s",
             wrapper ? mt : hf_types[type], wrapper ? " read as " : "", wrapper ? hf_types[type] : "",
             nested ? ", its language model only: the vision tower is not modelled"
                    : vision ? ", the language model only: the vision tower is not modelled" : "", file);
    ts_jreader tr;
    if (nested) ts_jreader_child(&r, text_key(root), 0, &tr);
    /* The readers record each key they read, so the cross-field rules name the file's keys
     * (intermediate_size, text_config.num_key_value_heads), not Tessera's. */
    ts_field_names names;
    ts_field_names_init(&names);
    if (nested) {
        cJSON *full = text_with_defaults(text, hf_types[type]);
        if (!full) return TS_FAIL(TS_ERR_NOMEM, "%s: $.text_config: out of memory", file);
        ts_status st = hf_readers[type](&tr, full, &names, out);
        cJSON_Delete(full);
        TS_CHECK(st);
    } else {
        TS_CHECK(hf_readers[type](&r, root, &names, out));
    }
    /* A wrapper may state the head's tying on the outer config alone (Qwen2.5-VL's newer saves,
     * LLaVA); transformers' composite configs then take it from there. */
    if (nested && !cJSON_GetObjectItemCaseSensitive(text, "tie_word_embeddings") &&
        cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings"))
        TS_CHECK(hf_bool(&r, root, "tie_word_embeddings", 0, 0, &out->tied_embeddings));
    if (out->moe.experts > 0) out->moe.load_cv = TS_MOE_DEFAULT_LOAD_CV; /* config.json does not say */
    /* No window length (attention_chunk_size or sliding_window absent, null, or every layer full):
     * no local attention, whatever the layer pattern said, as Tessera's own JSON reads it back. */
    if (out->window.tokens == 0) out->window = (ts_window){0};
    return ts_model_validate_named(file, out, &names);
}
