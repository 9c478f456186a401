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

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "models/model_limits.h"

/* An optional integer that may also be written null (transformers writes "head_dim": null). */
static ts_status hf_int(const ts_jreader *r, const cJSON *root, const char *key, int required,
                        int64_t min, int64_t max, int64_t def, int64_t *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!required && cJSON_IsNull(it)) {
        *out = def;
        return TS_OK;
    }
    return ts_jr_int(r, root, key, required, min, max, def, out);
}

static ts_status hf_i32(const ts_jreader *r, const cJSON *root, const char *key, int required,
                        int64_t min, int64_t max, int64_t def, int *out) {
    int64_t v;
    TS_CHECK(hf_int(r, root, key, required, min, max, def, &v));
    *out = (int)v;
    return TS_OK;
}

/* `a` when present (or when `b` is absent too, so a missing-field message names `a`), else `b`:
 * BLOOM configs write n_embed or hidden_size, n_layer or num_hidden_layers. */
static const char *pick(const cJSON *root, const char *a, const char *b) {
    if (cJSON_GetObjectItemCaseSensitive(root, a) != NULL ||
        cJSON_GetObjectItemCaseSensitive(root, b) == NULL)
        return a;
    return b;
}

typedef struct {
    const char *key;
    double def; /* transformers' default when the key is absent */
} hf_rate;

/* Training keeps dropout masks when any of the family's dropout rates is positive. */
static ts_status read_dropout(const ts_jreader *r, const cJSON *root, const hf_rate *rates, int n,
                              int *out) {
    *out = 0;
    for (int i = 0; i < n; i++) {
        double p;
        TS_CHECK(ts_jr_num(r, root, rates[i].key, 0, 0, 1, rates[i].def, &p));
        if (p > 0) *out = 1;
    }
    return TS_OK;
}

/* The shape every family shares, under that family's key names. */
typedef struct {
    const char *hidden, *layers, *heads, *max_seq;
    int64_t max_seq_def;
    int tied_def;
} hf_keys;

static ts_status read_shape(const ts_jreader *r, const cJSON *root, const hf_keys *k,
                            ts_model *m) {
    TS_CHECK(hf_int(r, root, k->hidden, 1, 1, TS_MAX_HIDDEN, 0, &m->hidden));
    TS_CHECK(hf_i32(r, root, k->layers, 1, 1, TS_MAX_LAYERS, 0, &m->layers));
    TS_CHECK(hf_i32(r, root, k->heads, 1, 1, TS_MAX_HEADS, 0, &m->heads));
    TS_CHECK(hf_int(r, root, "vocab_size", 1, 1, TS_MAX_VOCAB, 0, &m->vocab));
    TS_CHECK(hf_int(r, root, k->max_seq, 0, 1, TS_MAX_SEQ, k->max_seq_def, &m->max_seq));
    TS_CHECK(ts_jr_bool(r, root, "tie_word_embeddings", 0, k->tied_def, &m->tied_embeddings));
    m->kv_heads = m->heads;
    return TS_OK;
}

/* head_dim (Mistral, Llama 3.1+ write it; null or absent means hidden / heads, then exact). */
static ts_status read_head_dim(const ts_jreader *r, const cJSON *root, const hf_keys *k,
                               ts_model *m) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
    if (m->hidden % m->heads != 0 && (it == NULL || cJSON_IsNull(it)))
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: %lld is not divisible by %s %d, so head_dim must "
                       "be given", r->file, k->hidden, (long long)m->hidden, k->heads, m->heads);
    return hf_i32(r, root, "head_dim", 0, 1, TS_MAX_HEAD_DIM, m->hidden / m->heads, &m->head_dim);
}

static ts_status read_kv_heads(const ts_jreader *r, const cJSON *root, ts_model *m) {
    TS_CHECK(hf_i32(r, root, "num_key_value_heads", 0, 1, m->heads, m->heads, &m->kv_heads));
    if (m->heads % m->kv_heads != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.num_key_value_heads: num_attention_heads %d is not "
                       "divisible by num_key_value_heads %d", r->file, m->heads, m->kv_heads);
    return TS_OK;
}

static const hf_keys llama_keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                   "max_position_embeddings", 4096, 0};
static const hf_rate attention_dropout[] = {{"attention_dropout", 0.0}};

/* Llama, Mistral, Mixtral, Qwen2(-MoE): pre-RMSNorm, RoPE, SwiGLU, grouped-query attention. */
static ts_status read_llama_like(const ts_jreader *r, const cJSON *root, ts_model *m) {
    TS_CHECK(read_shape(r, root, &llama_keys, m));
    TS_CHECK(read_head_dim(r, root, &llama_keys, m));
    TS_CHECK(read_kv_heads(r, root, m));
    TS_CHECK(hf_int(r, root, "intermediate_size", 1, 0, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, attention_dropout, 1, &m->dropout));
    m->activation = TS_ACT_SWIGLU;
    m->norm = TS_NORM_RMSNORM;
    m->position = TS_POS_ROPE;
    return TS_OK;
}

static ts_status read_llama(const ts_jreader *r, const cJSON *root, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, m));
    TS_CHECK(ts_jr_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    return ts_jr_bool(r, root, "mlp_bias", 0, 0, &m->linear_bias);
}

static ts_status read_mixtral(const ts_jreader *r, const cJSON *root, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, m));
    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, "num_local_experts", 1, 1, TS_MAX_EXPERTS, 0, &e->experts));
    TS_CHECK(hf_i32(r, root, "num_experts_per_tok", 1, 1, e->experts, 0, &e->top_k));
    e->expert_ffn = m->ffn_hidden;
    e->every = 1;
    return TS_OK;
}

/* Qwen2 has biases on Q, K and V only (transformers Qwen2Attention). */
static ts_status read_qwen2(const ts_jreader *r, const cJSON *root, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, m));
    m->qkv_bias = 1;
    return TS_OK;
}

/* Qwen2-MoE: layer i is sparse when (i + 1) % decoder_sparse_step == 0, i.e. first_dense =
 * step - 1 and every = step; one shared expert of shared_expert_intermediate_size. */
static ts_status read_qwen2_moe(const ts_jreader *r, const cJSON *root, ts_model *m) {
    TS_CHECK(read_qwen2(r, root, m));
    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, "num_experts", 1, 1, TS_MAX_EXPERTS, 0, &e->experts));
    TS_CHECK(hf_i32(r, root, "num_experts_per_tok", 1, 1, e->experts, 0, &e->top_k));
    TS_CHECK(hf_int(r, root, "moe_intermediate_size", 1, 1, TS_MAX_FFN, 0, &e->expert_ffn));
    TS_CHECK(hf_int(r, root, "shared_expert_intermediate_size", 0, 0, TS_MAX_FFN, 0,
                    &e->shared_ffn));
    e->shared_experts = e->shared_ffn > 0;
    int step;
    TS_CHECK(hf_i32(r, root, "decoder_sparse_step", 0, 1, m->layers, 1, &step));
    e->first_dense = step - 1;
    e->every = step;
    const cJSON *dense = cJSON_GetObjectItemCaseSensitive(root, "mlp_only_layers");
    if (dense != NULL && !(cJSON_IsArray(dense) && cJSON_GetArraySize(dense) == 0))
        return TS_FAIL(TS_ERR_INPUT, "%s: $.mlp_only_layers: expected an empty list (a dense "
                       "layer set other than decoder_sparse_step is not supported), got %s",
                       r->file, ts_json_type_name(dense));
    return TS_OK;
}

/* DeepSeek-V3 (transformers DeepseekV3Config): MLA attention; layer i is MoE when
 * i >= first_k_dense_replace and i % moe_layer_freq == 0, which is Tessera's rule with
 * first_dense rounded up to a multiple of the frequency. The shared experts form one MLP of
 * n_shared_experts * moe_intermediate_size, the same parameters as n_shared_experts experts. */
static ts_status read_deepseek_v3(const ts_jreader *r, const cJSON *root, ts_model *m) {
    TS_CHECK(read_shape(r, root, &llama_keys, m));
    TS_CHECK(read_kv_heads(r, root, m));
    TS_CHECK(hf_int(r, root, "intermediate_size", 1, 0, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, attention_dropout, 1, &m->dropout));
    TS_CHECK(ts_jr_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    m->activation = TS_ACT_SWIGLU;
    m->norm = TS_NORM_RMSNORM;
    m->position = TS_POS_ROPE;

    ts_mla *a = &m->mla;
    TS_CHECK(hf_i32(r, root, "q_lora_rank", 0, 0, TS_MAX_LORA_RANK, 0, &a->q_lora_rank));
    TS_CHECK(hf_i32(r, root, "kv_lora_rank", 1, 1, TS_MAX_LORA_RANK, 0, &a->kv_lora_rank));
    TS_CHECK(hf_i32(r, root, "qk_nope_head_dim", 1, 0, TS_MAX_HEAD_DIM, 0, &a->qk_nope_dim));
    TS_CHECK(hf_i32(r, root, "qk_rope_head_dim", 1, 0, TS_MAX_HEAD_DIM, 0, &a->qk_rope_dim));
    TS_CHECK(hf_i32(r, root, "v_head_dim", 1, 1, TS_MAX_HEAD_DIM, 0, &a->v_dim));
    m->head_dim = a->qk_nope_dim + a->qk_rope_dim;
    TS_CHECK(hf_i32(r, root, "num_nextn_predict_layers", 0, 0, TS_MAX_MTP_LAYERS, 0,
                    &m->mtp_layers));

    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, "n_routed_experts", 0, 0, TS_MAX_EXPERTS, 0, &e->experts));
    if (e->experts == 0) return TS_OK;
    TS_CHECK(hf_i32(r, root, "num_experts_per_tok", 1, 1, e->experts, 0, &e->top_k));
    TS_CHECK(hf_int(r, root, "moe_intermediate_size", 1, 1, TS_MAX_FFN, 0, &e->expert_ffn));
    TS_CHECK(hf_i32(r, root, "n_shared_experts", 0, 0, TS_MAX_EXPERTS, 0, &e->shared_experts));
    if (e->shared_experts > 0) e->shared_ffn = e->expert_ffn;
    int first, freq;
    TS_CHECK(hf_i32(r, root, "first_k_dense_replace", 0, 0, m->layers - 1, 0, &first));
    TS_CHECK(hf_i32(r, root, "moe_layer_freq", 0, 1, m->layers, 1, &freq));
    e->first_dense = (first + freq - 1) / freq * freq;
    e->every = freq;
    return TS_OK;
}

/* GPT-2: learned positions, pre-LayerNorm, biases everywhere, GELU MLP of n_inner (null: 4h),
 * LM head tied to the embedding. */
static ts_status read_gpt2(const ts_jreader *r, const cJSON *root, ts_model *m) {
    static const hf_keys keys = {"n_embd", "n_layer", "n_head", "n_positions", 1024, 1};
    static const hf_rate rates[] = {{"resid_pdrop", 0.1}, {"embd_pdrop", 0.1}, {"attn_pdrop", 0.1}};
    TS_CHECK(read_shape(r, root, &keys, m));
    TS_CHECK(read_head_dim(r, root, &keys, m));
    TS_CHECK(hf_int(r, root, "n_inner", 0, 1, TS_MAX_FFN, 4 * m->hidden, &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, rates, 3, &m->dropout));
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_LEARNED;
    m->qkv_bias = m->linear_bias = 1;
    return TS_OK;
}

/* GPT-NeoX: rotary, LayerNorm, biased Q/K/V and dense (attention_bias) and MLP, untied head. */
static ts_status read_gpt_neox(const ts_jreader *r, const cJSON *root, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 2048, 0};
    static const hf_rate rates[] = {{"hidden_dropout", 0.0}, {"attention_dropout", 0.0}};
    TS_CHECK(read_shape(r, root, &keys, m));
    TS_CHECK(read_head_dim(r, root, &keys, m));
    TS_CHECK(hf_int(r, root, "intermediate_size", 1, 1, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(ts_jr_bool(r, root, "attention_bias", 0, 1, &m->qkv_bias));
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_ROPE;
    m->linear_bias = 1;
    return TS_OK;
}

/* BLOOM: ALiBi (no position table), a LayerNorm after the word embedding, MLP 4h, biases, tied
 * head. Sequence length from seq_length (ALiBi has no hard limit). */
static ts_status read_bloom(const ts_jreader *r, const cJSON *root, ts_model *m) {
    static const hf_rate rates[] = {{"hidden_dropout", 0.0}, {"attention_dropout", 0.0}};
    hf_keys keys = {pick(root, "hidden_size", "n_embed"),
                    pick(root, "n_layer", "num_hidden_layers"),
                    pick(root, "n_head", "num_attention_heads"), "seq_length", 2048, 1};
    TS_CHECK(read_shape(r, root, &keys, m));
    TS_CHECK(read_head_dim(r, root, &keys, m));
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
static ts_status read_opt(const ts_jreader *r, const cJSON *root, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                 "max_position_embeddings", 2048, 1};
    static const hf_rate rates[] = {{"dropout", 0.1}, {"attention_dropout", 0.0}};
    TS_CHECK(read_shape(r, root, &keys, m));
    TS_CHECK(read_head_dim(r, root, &keys, m));
    TS_CHECK(hf_int(r, root, "ffn_dim", 1, 1, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(hf_int(r, root, "word_embed_proj_dim", 0, 1, TS_MAX_HIDDEN, m->hidden,
                    &m->embed_dim));
    if (m->embed_dim == m->hidden) m->embed_dim = 0;
    TS_CHECK(ts_jr_bool(r, root, "enable_bias", 0, 1, &m->linear_bias));
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    m->qkv_bias = m->linear_bias;
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_LEARNED;
    m->position_offset = 2;
    return TS_OK;
}

typedef ts_status (*hf_reader)(const ts_jreader *r, const cJSON *root, ts_model *m);

static const char *const hf_types[] = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe",
                                       "deepseek_v3", "gpt2", "gpt_neox", "bloom", "opt", NULL};
static const hf_reader hf_readers[] = {read_llama, read_llama, read_mixtral, read_qwen2,
                                       read_qwen2_moe, read_deepseek_v3, read_gpt2,
                                       read_gpt_neox, read_bloom, read_opt};
_Static_assert(sizeof hf_types / sizeof hf_types[0] == sizeof hf_readers / sizeof hf_readers[0] + 1,
               "one reader per model_type");

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

ts_status ts_model_from_hf(const char *file, const cJSON *root, ts_model *out) {
    memset(out, 0, sizeof *out);
    ts_jreader r;
    ts_jreader_root(&r, file);
    int type;
    TS_CHECK(ts_jr_enum(&r, root, "model_type", 1, hf_types, 0, &type));
    TS_CHECK(read_name(&r, root, out));
    snprintf(out->source, sizeof out->source, "Hugging Face config.json (model_type %s): %s",
             hf_types[type], file);
    TS_CHECK(hf_readers[type](&r, root, out));
    return ts_model_validate(file, out);
}
