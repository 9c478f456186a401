/* Hugging Face readers for Chinese and Korean families published with their own modelling code
 * (hf_impl.h): ChatGLM 1 / 2 / 3 and GLM-4 (chatglm), Baichuan 1 / 2 (baichuan), Qwen 1 (qwen) and
 * EXAONE 3 / 3.5 (exaone), and EXAONE 4 (exaone4) and EXAONE MoE (exaone_moe, K-EXAONE), in transformers. Each maps the keys of the
 * model repository's configuration_<type>.py (THUDM/chatglm3-6b, baichuan-inc/Baichuan2-7B-Base,
 * Qwen/Qwen-7B, LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct; transformers models/exaone4) onto ts_model,
 * with the modules its modeling_<type>.py builds. All but ChatGLM-6B v1 (GLM-130B's LayerNorm and
 * GELU block) are Llama's layer under other names (pre-RMSNorm, SwiGLU, no biases but the ones said
 * below); they differ in keys, defaults, biases, positions and, for EXAONE 4, Q/K norms and local
 * layers. */
#include <string.h>

#include "models/hf_impl.h"
#include "models/model_limits.h"

/* ChatGLM-6B v1 (remote code ChatGLMConfig and modeling_chatglm.py of THUDM/chatglm-6b; GLM-130B's
 * block, Zeng et al. 2022, arXiv:2210.02414): word_embeddings of vocab_size rows, per layer
 * LayerNorms, a fused query_key_value (3h * h) and dense (h * h), both biased, a GELU MLP
 * dense_h_to_4h / dense_4h_to_h of inner_hidden_size, biased; a final LayerNorm and lm_head, which
 * transformers ties to the embedding (the config leaves tie_word_embeddings at its default, true:
 * 6.2B parameters, the README's 62亿). Its 2-D rotary positions and DeepNorm residual scaling hold
 * no parameter. */
static ts_status read_chatglm_v1(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_layers", "num_attention_heads", "max_sequence_length", 2048, 1};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &keys, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "inner_hidden_size", 0, 1, TS_MAX_FFN, 16384, &m->ffn_hidden));
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_ROPE;
    m->qkv_bias = m->linear_bias = 1;
    return TS_OK;
}

/* ChatGLM 2 / 3 and GLM-4 (remote code ChatGLMConfig, modeling_chatglm.py of THUDM/chatglm3-6b and
 * THUDM/glm-4-9b-chat): an embedding of padded_vocab_size rows and an untied output_layer;
 * per layer a fused query_key_value of num_attention_heads query heads and, with
 * multi_query_attention, multi_query_group_num key/value groups (else one a head), each
 * kv_channels wide, biased when add_bias_linear or add_qkv_bias; dense (biased with
 * add_bias_linear); an MLP dense_h_to_4h of 2 * ffn_hidden_size (SwiGLU) and dense_4h_to_h, biased
 * with add_bias_linear; RMSNorm when rmsnorm, else LayerNorm. The rotary embedding covers half of
 * each head with base 10000 * rope_ratio (RotaryEmbedding in modeling_chatglm.py). With
 * post_layer_norm false the final norm is missing, h parameters still counted (below 1e-5).
 * ChatGLM-6B v1 writes vocab_size instead of padded_vocab_size (read_chatglm_v1). Defaults:
 * ChatGLMConfig's __init__. */
ts_status read_chatglm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_rate rates[] = {{"hidden_dropout", 0.0}, {"attention_dropout", 0.0}};
    if (cJSON_GetObjectItemCaseSensitive(root, "padded_vocab_size") == NULL &&
        cJSON_GetObjectItemCaseSensitive(root, "vocab_size") != NULL)
        return read_chatglm_v1(r, root, nm, m);
    TS_CHECK(hf_int(r, root, nm, "vocab", "padded_vocab_size", 1, 1, TS_MAX_VOCAB, 0, &m->vocab));
    TS_CHECK(hf_int(r, root, nm, "hidden", "hidden_size", 0, 1, TS_MAX_HIDDEN, 4096, &m->hidden));
    TS_CHECK(hf_i32(r, root, nm, "layers", "num_layers", 0, 1, TS_MAX_LAYERS, 28, &m->layers));
    TS_CHECK(hf_i32(r, root, nm, "heads", "num_attention_heads", 0, 1, TS_MAX_HEADS, 32, &m->heads));
    TS_CHECK(hf_i32(r, root, nm, "head_dim", "kv_channels", 0, 1, TS_MAX_HEAD_DIM, 128, &m->head_dim));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "ffn_hidden_size", 0, 1, TS_MAX_FFN, 13696, &m->ffn_hidden));
    TS_CHECK(hf_int(r, root, nm, "max_seq", "seq_length", 0, 1, TS_MAX_SEQ, 2048, &m->max_seq));
    int mqa, rms, qkv_bias;
    TS_CHECK(hf_bool(r, root, "multi_query_attention", 0, 0, &mqa));
    TS_CHECK(hf_i32(r, root, nm, "kv_heads", "multi_query_group_num", 0, 1, m->heads, 1, &m->kv_heads));
    if (!mqa) m->kv_heads = m->heads;
    if (m->heads % m->kv_heads != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.multi_query_group_num: num_attention_heads %d is not divisible by "
                       "multi_query_group_num %d", r->file, r->path, m->heads, m->kv_heads);
    TS_CHECK(hf_bool(r, root, "add_bias_linear", 0, 0, &m->linear_bias));
    TS_CHECK(hf_bool(r, root, "add_qkv_bias", 0, 0, &qkv_bias));
    m->qkv_bias = qkv_bias || m->linear_bias;
    TS_CHECK(hf_bool(r, root, "rmsnorm", 0, 1, &rms));
    double rope_ratio;
    TS_CHECK(ts_jr_num(r, root, "rope_ratio", 0, 1e-6, TS_MAX_ROPE_THETA / 1e4, 1, &rope_ratio));
    m->rope_theta = 1e4 * rope_ratio;
    hf_name(nm, r, "rope_theta", "rope_ratio");
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    m->norm = rms ? TS_NORM_RMSNORM : TS_NORM_LAYERNORM;
    m->activation = TS_ACT_SWIGLU;
    m->position = TS_POS_ROPE;
    m->tied_embeddings = 0; /* output_layer is its own matrix whatever tie_word_embeddings says */
    return TS_OK;
}

/* Baichuan 1 and 2 (remote code BaichuanConfig, modeling_baichuan.py of baichuan-inc/Baichuan2-7B-Base
 * and -13B-Base): Llama's layer with the query, key and value projections fused in W_pack (3h * h,
 * no bias), an untied head (Baichuan 2's NormHead normalises the same V * h weight). The 7B models
 * rotate (RoPE, max_position_embeddings), the 13B ones add ALiBi biases instead (model_max_length);
 * the config does not say which, so the rule is vLLM's (vllm/model_executor/models/baichuan.py,
 * BaichuanForCausalLM: hidden_size 4096 is the 7B's RoPE, any other ALiBi). Neither holds a
 * parameter. */
ts_status read_baichuan(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_int(r, root, nm, "max_seq", pick(root, "max_position_embeddings", "model_max_length"), 0, 1,
                    TS_MAX_SEQ, 4096, &m->max_seq));
    if (m->hidden != 4096) m->position = TS_POS_ALIBI;
    return TS_OK;
}

/* Qwen 1 (remote code QWenConfig, modeling_qwen.py of Qwen/Qwen-7B): per layer a fused c_attn of
 * 3 * heads * kv_channels rows, always biased; c_proj, and an MLP whose w1 and w2 (SwiGLU's up
 * and gate) each map h to intermediate_size / 2 (QWenMLP: ff_dim_in = intermediate_size // 2) and
 * c_proj back, biased unless no_bias; RMSNorm (ln_1, ln_2, ln_f); an untied lm_head. Rotary base
 * rotary_emb_base; the context it was trained on is seq_length (its dynamic-NTK and log-n
 * scalings stretch it, with no parameter). */
ts_status read_qwen(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_rate rates[] = {{"emb_dropout_prob", 0.0}, {"attn_dropout_prob", 0.0}};
    const hf_keys keys = {"hidden_size", "num_hidden_layers", "num_attention_heads",
                          pick(root, "seq_length", "max_position_embeddings"), 8192, 0};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(hf_i32(r, root, nm, "head_dim", "kv_channels", 0, 1, TS_MAX_HEAD_DIM, 128, &m->head_dim));
    int64_t inter;
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "intermediate_size", 0, 2, TS_MAX_FFN, 22016, &inter));
    if (inter % 2 != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.intermediate_size: expected an even number (w1 and w2 are half of it "
                       "each), got %lld", r->file, r->path, (long long)inter);
    m->ffn_hidden = inter / 2;
    int no_bias;
    TS_CHECK(hf_bool(r, root, "no_bias", 0, 1, &no_bias));
    m->linear_bias = !no_bias;
    m->qkv_bias = 1;
    hf_name(nm, r, "rope_theta", "rotary_emb_base");
    TS_CHECK(ts_jr_num(r, root, "rotary_emb_base", 0, 1, TS_MAX_ROPE_THETA, 10000, &m->rope_theta));
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    m->activation = TS_ACT_SWIGLU;
    m->norm = TS_NORM_RMSNORM;
    m->position = TS_POS_ROPE;
    return TS_OK;
}

/* EXAONE 3.0 / 3.5 (remote code ExaoneConfig, modeling_exaone.py of
 * LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct): Llama's layer under GPT-2's names (transformer.wte, h.N.ln_1,
 * attn.attention.q_proj / k_proj / v_proj / out_proj, ln_2, mlp.c_fc_0 / c_fc_1 / c_proj, ln_f; no
 * bias anywhere), num_layers layers, grouped-query attention, RoPE, a head tied by default
 * (ExaoneConfig: tie_word_embeddings true; the 7.8B and 32B configs untie it) and intermediate_size
 * 4h when null. */
ts_status read_exaone(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_layers", "num_attention_heads", "max_position_embeddings",
                                 2048, 1};
    static const hf_rate rates[] = {{"resid_dropout", 0.0}, {"embed_dropout", 0.0}, {"attention_dropout", 0.0}};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &keys, m));
    TS_CHECK(read_kv_heads(r, root, nm, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "intermediate_size", 0, 1, TS_MAX_FFN, 4 * m->hidden,
                    &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, rates, 3, &m->dropout));
    m->activation = TS_ACT_SWIGLU;
    m->norm = TS_NORM_RMSNORM;
    m->position = TS_POS_ROPE;
    return read_rope_theta(r, root, nm, m);
}

/* Exaone4Config's sliding_window_pattern: a number N (a global layer every N), or "L...LG" (N - 1
 * local layers, then a global one, repeated); when layer_types is absent it says which layers are
 * local (null: 4, as absent; Exaone4Config ignores it when sliding_window is null). Another string is
 * refused. */
static ts_status exaone4_pattern(const ts_jreader *r, const cJSON *root, int *every) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "sliding_window_pattern");
    if (!cJSON_IsString(p)) return hf_i32(r, root, NULL, NULL, "sliding_window_pattern", 0, 1, TS_MAX_LAYERS, 4, every);
    size_t n = strlen(p->valuestring);
    int ok = n > 0 && n <= TS_MAX_LAYERS && p->valuestring[n - 1] == 'G';
    for (size_t i = 0; ok && i + 1 < n; i++) ok = p->valuestring[i] == 'L';
    if (!ok)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.sliding_window_pattern: Tessera models one global layer closing every "
                       "period (\"LLLG\"), got \"%.32s\"", r->file, r->path, p->valuestring);
    *every = (int)n;
    return TS_OK;
}

/* EXAONE 4.0 (transformers Exaone4Config, Exaone4Attention, Exaone4DecoderLayer; Exaone4
 * technical report, arXiv:2507.11407 §2): Llama's projections without bias, an RMSNorm of head_dim
 * on queries and on keys (q_norm, k_norm), the layer's two RMSNorms moved onto the attention's and
 * the MLP's outputs (post_attention_layernorm, post_feedforward_layernorm: the same parameters),
 * local attention of sliding_window tokens (4096 when absent; null: none) on the layers
 * layer_types says, else three local to one global (sliding_window_pattern 4). */
ts_status read_exaone4(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    int every;
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_int(r, root, nm, "max_seq", "max_position_embeddings", 0, 1, TS_MAX_SEQ, 2048, &m->max_seq));
    m->qk_norm = TS_QKNORM_HEAD;
    TS_CHECK(exaone4_pattern(r, root, &every));
    if (cJSON_GetObjectItemCaseSensitive(root, "sliding_window") != NULL) return read_sliding(r, root, nm, m, every);
    cJSON *with = cJSON_Duplicate(root, 1); /* Exaone4Config's default window, then layer_types as given */
    if (!with || !cJSON_AddNumberToObject(with, "sliding_window", 4096)) {
        cJSON_Delete(with);
        return TS_FAIL(TS_ERR_NOMEM, "%s: %s: out of memory", r->file, r->path);
    }
    ts_status st = read_sliding(r, with, nm, m, every);
    cJSON_Delete(with);
    return st;
}

/* ExaoneMoeConfig.sliding_windows (newer transformers): a window per layer, 0 on full-attention
 * layers, over sliding_window (ExaoneMoeAttention: sliding_windows[i] or sliding_window). Tessera
 * has one window: the positive entries must agree (and replace sliding_window); which layers are
 * local stays layer_types' say (read_exaone4). */
static ts_status exaone_moe_windows(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "sliding_windows");
    if (list == NULL || cJSON_IsNull(list) || m->window.tokens == 0) return TS_OK;
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != m->layers)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.sliding_windows: expected a list of %d windows, one a layer", r->file,
                       r->path, m->layers);
    int64_t w = 0;
    for (int i = 0; i < m->layers; i++) {
        int64_t v;
        if (!ts_json_int_in(cJSON_GetArrayItem(list, i), 0, TS_MAX_SEQ, &v))
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.sliding_windows[%d]: expected a window in [0, %lld]", r->file,
                           r->path, i, (long long)TS_MAX_SEQ);
        if (v > 0 && w > 0 && v != w)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.sliding_windows[%d]: Tessera models one window on every local "
                           "layer (%lld), got %lld", r->file, r->path, i, (long long)w, (long long)v);
        if (v > 0) w = v;
    }
    if (w > 0) m->window.tokens = w, hf_name(nm, r, "window.tokens", "sliding_windows");
    return TS_OK;
}

/* EXAONE MoE, K-EXAONE (transformers ExaoneMoeConfig, modular_exaone_moe.py; checkpoint
 * LGAI-EXAONE/K-EXAONE-236B-A23B): EXAONE 4.0's attention (ExaoneMoeAttention is Exaone4Attention:
 * Q/K/V/O without bias, an RMSNorm of head_dim on queries and on keys, local attention of
 * sliding_window tokens on the layers layer_types says, three local to one global by default, NoPE on
 * the global layers) in OLMoE's pre-norm layer (OlmoeDecoderLayer: input_layernorm and
 * post_attention_layernorm before attention and MLP; EXAONE 4's post-norms are as many RMSNorms of
 * h, so read_exaone4's count holds). The MLP is DeepSeek-V3's (ExaoneMoeSparseMoEBlock):
 * num_experts routed SwiGLU experts of moe_intermediate_size (ExaoneMoeExperts gate_up_proj
 * E x 2f x h, down_proj E x h x f), num_experts_per_tok a token, one shared MLP of
 * moe_intermediate_size * num_shared_experts (the parameters of num_shared_experts experts); a
 * router weight E x h scored by a sigmoid with e_score_correction_bias (a buffer, not a parameter),
 * top-k within the best topk_group of n_group groups, weights normalised (norm_topk_prob) and
 * scaled by routed_scaling_factor (ExaoneMoeTopkRouter, always so: the config's scoring_func and
 * topk_method keys change nothing). Layers are sparse by mlp_layer_types, else K-EXAONE's
 * is_moe_layer, else from first_k_dense_replace on (1 when absent). Defaults: ExaoneMoeConfig's
 * (64 experts of 1024, top 8, one shared, n_group 1, scale 2.5; max_position_embeddings 2048).
 *
 * Not modelled, no parameter: swiglu_limits (a clamp of gate and up). The checkpoint's one MTP
 * module (num_nextn_predict_layers; mtp.fc 2h -> h, three RMSNorms and a dense layer of
 * intermediate_size: 528,513,280 parameters in K-EXAONE) is neither built by transformers
 * (_keys_to_ignore_on_load_unexpected = mtp.*) nor the shape count.c gives an MTP module (the
 * model's MoE layer, 9x as large), so mtp_layers stays 0. */
ts_status read_exaone_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_exaone4(r, root, nm, m));
    TS_CHECK(exaone_moe_windows(r, root, nm, m));
    int mtp;
    /* validated, not counted: its MTP module is a dense layer (the comment above) */
    TS_CHECK(hf_i32(r, root, NULL, NULL, "num_nextn_predict_layers", 0, 0, TS_MAX_MTP_LAYERS, 0, &mtp));

    ts_moe *e = &m->moe;
    static const hf_expert_keys keys = {"num_experts", "num_experts_per_tok", "num_shared_experts", 0, 1, 64, 8, 1, 1024};
    TS_CHECK(hf_read_experts(r, root, nm, &keys, e));

    int first;
    TS_CHECK(hf_moe_schedule(r, root, nm, "mlp_layer_types", m->layers, &first));
    if (first < 0) TS_CHECK(hf_moe_schedule(r, root, nm, "is_moe_layer", m->layers, &first));
    if (first < 0)
        TS_CHECK(hf_i32(r, root, nm, "moe.first_dense", "first_k_dense_replace", 0, 0, m->layers, 1, &first));
    if (first >= m->layers) { /* every layer dense: transformers builds no expert */
        m->moe = (ts_moe){0};
        return TS_OK;
    }
    e->first_dense = first;
    e->every = 1;

    e->router_sigmoid = 1;     /* ExaoneMoeTopkRouter: router_logits.sigmoid() */
    e->router_expert_bias = 1; /* e_score_correction_bias added for the choice */
    int groups, group_topk;
    TS_CHECK(hf_i32(r, root, nm, "moe.router_groups", "n_group", 0, 1, e->experts, 1, &groups));
    TS_CHECK(hf_i32(r, root, nm, "moe.router_group_topk", "topk_group", 0, 1, groups, 1, &group_topk));
    if (e->experts % groups != 0) /* scores.view(-1, n_group, E // n_group) */
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.n_group: num_experts %d is not divisible by n_group %d", r->file,
                       r->path, e->experts, groups);
    if (groups > 1) e->router_groups = groups, e->router_group_topk = group_topk;
    double scale;
    TS_CHECK(ts_jr_num(r, root, "routed_scaling_factor", 0, 0, 1e6, 2.5, &scale));
    if (scale != 1) e->router_scale = scale;
    return TS_OK;
}
