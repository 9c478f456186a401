/* Hugging Face readers for Phi-1/2, Falcon, Command R (Command R7B, Command A), StableLM and Persimmon
 * (hf_impl.h): the families whose layers feed attention and the MLP from one LayerNorm, or may, and
 * Persimmon, LayerNorm'd as StableLM. Each maps the keys
 * transformers' <Type>Config writes onto ts_model, with the modules that family's modelling code builds
 * (transformers/models/<type>/modeling_<type>.py). Gemma 1 is read with Gemma 2 and 3 in hf.c. */
#include <string.h>

#include "models/hf_impl.h"
#include "models/model_limits.h"

/* What Phi, Command R and StableLM share: the grouped-query shape under `keys`, dropout at `rates`,
 * rotary with rope_theta, LayerNorm, and a Q/K norm of `qk_kind` when the boolean `qk_key` is
 * true. partial_rotary_factor (Phi, StableLM: the share of each head that is rotated) is checked
 * only: Tessera prices the rotary work whole, as for GLM-4.5. */
static ts_status read_rotary_layernorm(const ts_jreader *r, const cJSON *root, ts_field_names *nm,
                                       const hf_keys *keys, const hf_rate *rates, int n_rates, const char *qk_key,
                                       int qk_kind, ts_model *m) {
    double rotary_share;
    int qk_norm;
    TS_CHECK(read_gqa_shape(r, root, nm, keys, m));
    TS_CHECK(read_dropout(r, root, rates, n_rates, &m->dropout));
    TS_CHECK(ts_jr_num(r, root, "partial_rotary_factor", 0, 0, 1, 1, &rotary_share));
    TS_CHECK(read_rope_theta(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, qk_key, 0, 0, &qk_norm));
    m->qk_norm = qk_norm ? qk_kind : TS_QKNORM_NONE;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_ROPE;
    return TS_OK;
}

/* Phi-1/1.5/2 (transformers PhiAttention, PhiMLP, PhiDecoderLayer): attention and a 2-matrix GELU
 * MLP in parallel from one LayerNorm, biases on Q, K, V, dense and both MLP matrices, rotary on
 * partial_rotary_factor of each head, untied head; qk_layernorm adds a LayerNorm of head_dim on
 * queries and one on keys. Approximation (2e-5 of Phi-2): the LM head's bias (vocab_size) is not
 * counted, as for GPT-J. */
ts_status read_phi(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 2048, 0};
    static const hf_rate rates[] = {{"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attention_dropout", 0.0}};
    TS_CHECK(read_rotary_layernorm(r, root, nm, &keys, rates, 3, "qk_layernorm", TS_QKNORM_HEAD, m));
    m->activation = TS_ACT_GELU;
    m->norms_per_layer = 1;
    m->qkv_bias = m->linear_bias = 1;
    return TS_OK;
}

/* Falcon's attention (transformers FalconAttention): one fused query_key_value of
 * (heads + 2 * kv) * head_dim, kv = num_kv_heads (RW configs: n_head_kv) with
 * new_decoder_architecture (Falcon-40B/180B), 1 with multi_query (Falcon-7B), else heads. RW
 * configs (model_type RefinedWeb / RefinedWebModel) have no new_decoder_architecture key:
 * transformers' convert_custom_code_checkpoint.py sets it exactly when n_head_kv is present. */
static ts_status read_falcon_kv(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *heads_key,
                                int *new_arch, ts_model *m) {
    const char *kv_key = pick(root, "num_kv_heads", "n_head_kv");
    int rw_grouped = cJSON_GetObjectItemCaseSensitive(root, "n_head_kv") != NULL, multi_query;
    TS_CHECK(hf_bool(r, root, "new_decoder_architecture", 0, rw_grouped, new_arch));
    TS_CHECK(hf_bool(r, root, "multi_query", 0, 1, &multi_query));
    if (!*new_arch) {
        m->kv_heads = multi_query ? 1 : m->heads;
        hf_name(nm, r, "kv_heads", multi_query ? "multi_query" : kv_key);
        return TS_OK;
    }
    TS_CHECK(hf_i32(r, root, nm, "kv_heads", kv_key, 0, 1, m->heads, m->heads, &m->kv_heads));
    if (m->heads % m->kv_heads != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: %s %d is not divisible by %s %d", r->file, r->path, kv_key,
                       heads_key, m->heads, kv_key, m->kv_heads);
    return TS_OK;
}

/* Falcon (transformers FalconConfig, FalconDecoderLayer): a GELU MLP of ffn_hidden_size (null: 4h),
 * LayerNorm, rotary unless alibi, biases on every linear layer when `bias`, LM head tied by default
 * (the checkpoints store lm_head.weight beside the embedding all the same, which the Hub's counts
 * include: huggingface/transformers#35715). With parallel_attn, attention and MLP read the same
 * input: one LayerNorm, or two (ln_attn, ln_mlp) when num_ln_in_parallel_attn is 2, its default
 * under new_decoder_architecture; sequential blocks have two. RW configs write n_layer, n_head (and
 * n_embed), read in their place. */
ts_status read_falcon(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_rate rates[] = {{"hidden_dropout", 0.0}, {"attention_dropout", 0.0}};
    hf_keys keys = {pick(root, "hidden_size", "n_embed"), pick(root, "num_hidden_layers", "n_layer"),
                    pick(root, "num_attention_heads", "n_head"), "max_position_embeddings", 2048, 1};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &keys, m));
    int new_arch, parallel, alibi, norms;
    TS_CHECK(read_falcon_kv(r, root, nm, keys.heads, &new_arch, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "ffn_hidden_size", 0, 1, TS_MAX_FFN, 4 * m->hidden, &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    TS_CHECK(hf_bool(r, root, "parallel_attn", 0, 1, &parallel));
    TS_CHECK(hf_i32(r, root, nm, "norms_per_layer", "num_ln_in_parallel_attn", 0, 1, 2, new_arch ? 2 : 1, &norms));
    TS_CHECK(hf_bool(r, root, "bias", 0, 0, &m->linear_bias));
    TS_CHECK(hf_bool(r, root, "alibi", 0, 0, &alibi));
    TS_CHECK(read_rope_theta(r, root, nm, m));
    m->qkv_bias = m->linear_bias;
    m->norms_per_layer = parallel && norms == 1 ? 1 : 0;
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = alibi ? TS_POS_ALIBI : TS_POS_ROPE;
    return TS_OK;
}

/* Command R (transformers CohereConfig, CohereDecoderLayer): attention and a SwiGLU MLP in parallel
 * from one LayerNorm, grouped-query attention (attention_bias: Q/K/V/O biases), LM head tied by
 * default; use_qk_norm (Command R+) norms queries and keys with a weight per head and channel, of
 * heads * head_dim and kv_heads * head_dim. Every CohereLayerNorm learns a weight and no bias. */
ts_status read_cohere(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 8192, 1};
    TS_CHECK(read_rotary_layernorm(r, root, nm, &keys, attention_dropout, 1, "use_qk_norm", TS_QKNORM_FULL, m));
    m->activation = TS_ACT_SWIGLU;
    m->norms_per_layer = 1;
    m->norm_affine = TS_NORM_AFFINE_WEIGHT;
    return hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias);
}

/* Command R7B, Command A (transformers Cohere2Config): Command R's layer without Q/K norms, a
 * sliding window on three layers in four (layer_types, or sliding_window_pattern: layer i global
 * when (i + 1) % pattern == 0; its global layers have no rotary, which changes no parameter). */
ts_status read_cohere2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_cohere(r, root, nm, m));
    int every;
    TS_CHECK(hf_i32(r, root, nm, "window.full_every", "sliding_window_pattern", 0, 1, TS_MAX_LAYERS, 4, &every));
    return read_sliding(r, root, nm, m, every);
}

/* StableLM (transformers StableLmConfig, StableLmDecoderLayer): Llama's SwiGLU MLP and
 * grouped-query attention with LayerNorm, Q/K/V biases when use_qkv_bias, rotary on
 * partial_rotary_factor of each head, untied head; use_parallel_residual feeds attention and MLP
 * from one LayerNorm; qk_layernorm norms each head of queries and keys on its own (weights of
 * heads * head_dim and kv_heads * head_dim, no bias: counted with one, below 1e-5 of the total). */
ts_status read_stablelm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 4096, 0};
    static const hf_rate rates[] = {{"hidden_dropout", 0.0}, {"attention_dropout", 0.0}};
    TS_CHECK(read_rotary_layernorm(r, root, nm, &keys, rates, 2, "qk_layernorm", TS_QKNORM_FULL, m));
    int parallel;
    TS_CHECK(hf_bool(r, root, "use_parallel_residual", 0, 0, &parallel));
    m->norms_per_layer = parallel ? 1 : 0;
    m->activation = TS_ACT_SWIGLU;
    return hf_bool(r, root, "use_qkv_bias", 0, 0, &m->qkv_bias);
}

/* Persimmon (transformers PersimmonConfig, PersimmonAttention, PersimmonMLP, PersimmonDecoderLayer;
 * adept/persimmon-8b-base): multi-head attention through one fused query_key_value (h -> 3h with
 * bias, whatever num_key_value_heads says) and a biased dense output; a LayerNorm of head_dim
 * (weight and bias) on the queries and one on the keys when qk_layernorm (its default); rotary on
 * partial_rotary_factor of each head, which changes no parameter; a 2-matrix MLP with biases of
 * intermediate_size under hidden_act, squared ReLU by default (any other: the same two matrices);
 * LayerNorms before attention, before the MLP and at the end; an untied head. head_dim is
 * hidden_size / num_attention_heads, which must be exact (PersimmonAttention raises otherwise).
 * PersimmonConfig's defaults: 16384 positions, rope_theta 25000. */
ts_status read_persimmon(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 16384, 0};
    static const hf_rate rates[] = {{"hidden_dropout", 0.0}, {"attention_dropout", 0.0}};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    if (m->hidden % m->heads != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.hidden_size: %lld is not divisible by num_attention_heads %d", r->file,
                       r->path, (long long)m->hidden, m->heads);
    m->head_dim = (int)(m->hidden / m->heads);
    hf_name(nm, r, "head_dim", "hidden_size");
    int64_t unused_kv; /* not PersimmonConfig's (adept/persimmon-8b-base writes 64); a malformed one is refused */
    TS_CHECK(hf_int(r, root, nm, NULL, "num_key_value_heads", 0, 1, TS_MAX_HEADS, m->heads, &unused_kv));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "intermediate_size", 1, 1, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    TS_CHECK(read_rope_theta(r, root, nm, m));
    if (m->rope_theta == 0) m->rope_theta = 25000; /* PersimmonConfig's rope_theta */
    int qk_layernorm;
    char act[32];
    TS_CHECK(hf_bool(r, root, "qk_layernorm", 0, 1, &qk_layernorm));
    TS_CHECK(ts_jr_str(r, root, "hidden_act", 0, "relu2", act, sizeof act));
    m->activation = strcmp(act, "relu2") == 0 ? TS_ACT_RELU2 : TS_ACT_GELU;
    m->qk_norm = qk_layernorm ? TS_QKNORM_HEAD : TS_QKNORM_NONE;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_ROPE;
    m->qkv_bias = m->linear_bias = 1;
    return TS_OK;
}
