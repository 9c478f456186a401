/* Hugging Face readers for the families built on Llama's decoder layer: ERNIE 4.5 (dense and MoE),
 * Hunyuan (dense and MoE), SmolLM3, DeepSeek v1 MoE, MiniCPM, Seed-OSS, InternLM2, GLM-4 (glm,
 * glm4), CWM and Snowflake Arctic (hf_impl.h). Each maps the keys of that family's <Type>Config
 * onto ts_model, with the modules its modelling code builds (transformers
 * models/<type>/modeling_<type>.py; for the remote-code families, deepseek, minicpm, internlm2 and
 * arctic, the modeling_*.py of the model's own repository, e.g. internlm/internlm2_5-7b).
 *
 * All of them are Llama's decoder layer (pre-RMSNorm, RoPE, grouped-query attention, SwiGLU MLP)
 * with their own defaults, biases, Q/K norms and experts. As in hf.c, a bias on the attention
 * output projection alone counts with the MLP's biases (linear_bias), so that Seed-OSS's
 * attention_out_bias follows mlp_bias (below 1e-5 of the total either way). */
#include <string.h>

#include "models/hf_impl.h"
#include "models/model_limits.h"

/* Llama's layer read with a family's own defaults for the keys a file may leave out: whether the
 * head is tied to the embedding, and max_position_embeddings. */
static ts_status read_llama_defaults(const ts_jreader *r, const cJSON *root, ts_field_names *nm, int tied_def,
                                     int64_t max_seq_def, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "tie_word_embeddings", 0, tied_def, &m->tied_embeddings));
    return hf_int(r, root, nm, "max_seq", "max_position_embeddings", 0, 1, TS_MAX_SEQ, max_seq_def, &m->max_seq);
}

/* An integer key that is either one number or a list with one entry a layer (Hunyuan's moe_topk,
 * num_experts); Tessera keeps one value for every layer, so the list's entries must agree. */
static ts_status read_per_layer(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *field,
                                const char *key, int64_t min, int64_t max, int def, int *out) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsArray(list)) return hf_i32(r, root, nm, field, key, 0, min, max, def, out);
    hf_name(nm, r, field, key);
    int n = cJSON_GetArraySize(list);
    if (n == 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected an integer or a list of one per layer, got an empty list",
                       r->file, r->path, key);
    ts_jreader lr;
    ts_jreader_child(r, key, 0, &lr);
    for (int i = 0; i < n; i++) {
        ts_jreader er;
        ts_jreader_child(&lr, NULL, i, &er);
        const cJSON *it = cJSON_GetArrayItem(list, i);
        /* the range first: a double beyond int64_t's has no integer to convert to */
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= (double)min && it->valuedouble <= (double)max) ||
            it->valuedouble != (double)(int64_t)it->valuedouble)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s: expected an integer in [%lld, %lld], got %s", r->file, er.path,
                           (long long)min, (long long)max, cJSON_IsNumber(it) ? "another number" : ts_json_type_name(it));
        if (i > 0 && (int)it->valuedouble != *out)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s: expected %d like the layers before it (Tessera models one value for "
                           "every layer), got %g", r->file, er.path, *out, it->valuedouble);
        *out = (int)it->valuedouble;
    }
    return TS_OK;
}

/* ERNIE 4.5 dense (transformers Ernie4_5Config, Ernie4_5Attention, Ernie4_5MLP): Llama's layer
 * with use_bias on Q, K, V, O and the MLP, head_dim 128, a tied head and 131072 positions by
 * default (ERNIE-4.5-0.3B: 16 heads of 128 on a 1024-wide model). */
ts_status read_ernie4_5(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_defaults(r, root, nm, 1, 131072, m));
    TS_CHECK(hf_bool(r, root, "use_bias", 0, 0, &m->qkv_bias));
    m->linear_bias = m->qkv_bias;
    return TS_OK;
}

/* ERNIE 4.5 MoE (transformers Ernie4_5_MoeConfig, Ernie4_5_MoeDecoderLayer): layer i is MoE when
 * (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i <= moe_layer_end_index (-1:
 * the last layer), else a dense MLP of intermediate_size. A MoE layer holds moe_num_experts SwiGLU
 * experts of moe_intermediate_size, top moe_k, and one shared MLP of moe_num_shared_experts *
 * moe_intermediate_size (the parameters of that many experts). The router (gate, no bias) scores
 * with a softmax and a per-expert correction bias (moe_statics.e_score_correction_bias, always
 * built; not trained, not counted). */
ts_status read_ernie4_5_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_ernie4_5(r, root, nm, m));
    ts_moe *e = &m->moe;
    static const hf_expert_keys keys = {"moe_num_experts", "moe_k", "moe_num_shared_experts", 0, 1, 64, 6, 0, 1536};
    TS_CHECK(hf_read_experts(r, root, nm, &keys, e));
    int start, end, every;
    TS_CHECK(hf_i32(r, root, nm, "moe.every", "moe_layer_interval", 0, 1, m->layers, 1, &every));
    TS_CHECK(hf_i32(r, root, nm, "moe.first_dense", "moe_layer_start_index", 0, 0, m->layers - 1, 1, &start));
    TS_CHECK(ts_jr_i32(r, root, "moe_layer_end_index", 0, -1, m->layers - 1, -1, &end));
    /* the first layer at or after start with (i + 1) % every == 0, then every `every`-th */
    e->first_dense = (start + every) / every * every - 1;
    e->every = every;
    int last_moe = m->layers / every * every - 1;
    if (end >= 0 && end < last_moe)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.moe_layer_end_index: Tessera models MoE layers up to the last one (%d "
                       "here) or -1, got %d", r->file, r->path, last_moe, end);
    e->router_expert_bias = 1; /* Ernie4_5_MoeStatics: built whatever the config says */
    return TS_OK;
}

/* Hunyuan dense (transformers HunYuanDenseV1Config, HunYuanDenseV1Attention): Llama's attention
 * (attention_bias on Q, K, V and O) with an RMSNorm of head_dim on queries and on keys
 * (query_layernorm, key_layernorm, built whatever use_qk_norm says), an MLP without biases. */
ts_status read_hunyuan_dense(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_defaults(r, root, nm, 0, 2048, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    m->qk_norm = TS_QKNORM_HEAD;
    return TS_OK;
}

/* Hunyuan MoE (transformers HunYuanMoEV1Config, HunYuanMoE): Hunyuan's attention; every layer
 * num_experts SwiGLU experts of intermediate_size, top moe_topk (each an integer or a list of one
 * per layer), routed by a gate without bias (wg) with a softmax, and with use_mixed_mlp_moe one
 * shared MLP of intermediate_size beside them. Hunyuan-A13B's moe_intermediate_size and
 * num_shared_expert lists are not read by transformers' model (there they equal
 * intermediate_size and 1). */
ts_status read_hunyuan_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_hunyuan_dense(r, root, nm, m));
    ts_moe *e = &m->moe;
    TS_CHECK(read_per_layer(r, root, nm, "moe.experts", "num_experts", 1, TS_MAX_EXPERTS, 1, &e->experts));
    TS_CHECK(read_per_layer(r, root, nm, "moe.top_k", "moe_topk", 1, e->experts, 1, &e->top_k));
    int mixed;
    TS_CHECK(hf_bool(r, root, "use_mixed_mlp_moe", 0, 0, &mixed));
    e->expert_ffn = m->ffn_hidden;
    hf_name(nm, r, "moe.expert_ffn", "intermediate_size");
    e->shared_experts = mixed;
    e->shared_ffn = mixed ? m->ffn_hidden : 0;
    e->every = 1;
    return TS_OK;
}

/* SmolLM3 (transformers SmolLM3Config, SmolLM3Attention): Llama's layer (attention_bias on Q, K,
 * V, O; mlp_bias) with a tied head by default. The NoPE layers (no_rope_layers, one in
 * no_rope_layer_interval) skip the rotary embedding, which holds no parameter. With
 * use_sliding_window, SmolLM3Config puts the window on the NoPE layers, a pattern Tessera cannot
 * hold unless layer_types says one it can (read_sliding). */
ts_status read_smollm3(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_defaults(r, root, nm, 1, 32768, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    TS_CHECK(hf_bool(r, root, "mlp_bias", 0, 0, &m->linear_bias));
    int use;
    TS_CHECK(hf_bool(r, root, "use_sliding_window", 0, 0, &use));
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (use && w != NULL && !cJSON_IsNull(w) && !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "layer_types")))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.use_sliding_window: a window on the NoPE layers (one in "
                       "no_rope_layer_interval) is not modelled; give layer_types or set it false", r->file, r->path);
    return use ? read_sliding(r, root, nm, m, 0) : TS_OK;
}

/* DeepSeek MoE v1 (deepseek-ai/deepseek-moe-16b-base, remote code DeepseekConfig,
 * modeling_deepseek.py; Dai et al. 2024, DeepSeekMoE, arXiv:2401.06066): Llama's attention
 * (attention_bias) and DeepSeek-V3's experts without MLA: layer i is MoE when i >=
 * first_k_dense_replace and i % moe_layer_freq == 0, n_routed_experts of moe_intermediate_size
 * and n_shared_experts as one MLP of their summed width; a softmax router without bias. */
ts_status read_deepseek_v1(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_defaults(r, root, nm, 0, 2048, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    return read_deepseek_moe(r, root, nm, m);
}

/* MiniCPM 1 / 2 (openbmb/MiniCPM-2B, remote code MiniCPMConfig, modeling_minicpm.py): Llama's
 * layer (attention_bias on Q, K, V, O), a tied head by default. Its muP scalings (scale_emb on the
 * embedding, scale_depth on the residual branches, dim_model_base on the logits) multiply
 * activations and hold no parameter (Hu et al. 2024, MiniCPM, §4). MiniCPM-MoE-8x2B's config
 * (same model_type) adds num_experts SwiGLU experts of intermediate_size on every layer, top
 * num_experts_per_tok, as Mixtral's. */
ts_status read_minicpm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_defaults(r, root, nm, 1, 2048, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    const cJSON *experts = cJSON_GetObjectItemCaseSensitive(root, "num_experts");
    if (experts == NULL || cJSON_IsNull(experts)) return TS_OK;
    return read_expert_layers(r, root, nm, "num_experts", m);
}

/* Seed-OSS (transformers SeedOssConfig, SeedOssAttention, SeedOssMLP): Llama's layer with
 * attention_bias (default true) on Q, K and V, attention_out_bias on O and mlp_bias on the MLP
 * (both default false; attention_out_bias follows mlp_bias, as above), head_dim 128 by default (not
 * hidden / heads: Seed-OSS-36B has 80 heads of 128 on a 5120-wide model), dropout on attention
 * (attention_dropout) and on the residual branches (residual_dropout), both 0.1 by default. */
ts_status read_seed_oss(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_rate rates[] = {{"attention_dropout", 0.1}, {"residual_dropout", 0.1}};
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
    TS_CHECK(read_llama_defaults(r, root, nm, 0, 524288, m));
    if (hd == NULL || cJSON_IsNull(hd)) m->head_dim = 128; /* SeedOssConfig's default */
    TS_CHECK(read_dropout(r, root, rates, 2, &m->dropout));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 1, &m->qkv_bias));
    int mlp_bias;
    TS_CHECK(hf_bool(r, root, "mlp_bias", 0, 0, &mlp_bias));
    m->linear_bias = mlp_bias;
    return TS_OK;
}

/* InternLM2 and 2.5 (remote code InternLM2Config, InternLM2Attention): Llama's shape, RMSNorms and
 * SwiGLU MLP (w1, w3, w2: no bias) with a fused wqkv of (heads + 2 * kv_heads) * head_dim rows,
 * the same matrices as Llama's q, k and v; `bias` (InternLM2Config's default true, false in the
 * released configs) puts biases on wqkv and wo, of which wo's (h per layer, below 1e-5 of the
 * total) is not counted; an untied head (output). */
ts_status read_internlm2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    return hf_bool(r, root, "bias", 0, 1, &m->qkv_bias);
}

/* GLM-4 (transformers GlmConfig / Glm4Config): Llama's grouped-query shape with head_dim (128 when
 * absent), biases on Q, K and V from attention_bias (true by default; o_proj has none), a SwiGLU
 * MLP held in one gate_up_proj without bias, RMSNorm, rotary on partial_rotary_factor (0.5) of each
 * head, checked only as for Phi. Glm4DecoderLayer (GLM-4-0414) adds post_self_attn_layernorm and
 * post_mlp_layernorm: four norms a layer. */
static ts_status read_glm_version(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m,
                                  int version) {
    double rotary_share;
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_i32(r, root, nm, "head_dim", "head_dim", 0, 1, TS_MAX_HEAD_DIM, 128, &m->head_dim));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 1, &m->qkv_bias));
    TS_CHECK(ts_jr_num(r, root, "partial_rotary_factor", 0, 0, 1, 0.5, &rotary_share));
    m->norms_per_layer = version == 4 ? 4 : 0;
    return TS_OK;
}

ts_status read_glm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    return read_glm_version(r, root, nm, m, 1);
}

ts_status read_glm4(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    return read_glm_version(r, root, nm, m, 4);
}

/* CWM, Meta's Code World Model (transformers CwmConfig, modular_cwm.py): Llama 3's layer without
 * attention biases (CwmAttention's q, k, v and o; mlp_bias may bias the MLP), 131072 positions by
 * default, and a window of sliding_window (8192 by default; null or 0: none) on the layers
 * layer_types names, CwmConfig's default a full layer at 0, 4, 8, ... (read as one every 4,
 * read_layer_types). */
ts_status read_cwm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_defaults(r, root, nm, 0, 131072, m));
    TS_CHECK(hf_bool(r, root, "mlp_bias", 0, 0, &m->linear_bias));
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (cJSON_IsNull(w) || (cJSON_IsNumber(w) && w->valuedouble == 0)) return TS_OK; /* CwmConfig: None */
    TS_CHECK(hf_int(r, root, nm, "window.tokens", "sliding_window", 0, 1, TS_MAX_SEQ, 8192, &m->window.tokens));
    return read_layer_types(r, root, nm, m, 4);
}

/* Snowflake Arctic (Snowflake/snowflake-arctic-instruct, remote code: ArcticConfig in
 * configuration_arctic.py, ArcticDecoderLayer in modeling_arctic.py): Mixtral's layer (Llama's
 * attention without biases, num_local_experts SwiGLU experts of intermediate_size, top
 * num_experts_per_tok, a router without bias) on the layers where (i + 1) % moe_layer_frequency == 0,
 * a SwiGLU MLP of intermediate_size on the others. With parallel_attn_mlp_res each MoE layer also
 * runs a dense "residual" SwiGLU MLP of hidden_size behind its own RMSNorm: read as one shared expert
 * of hidden_size, the same parameters and FLOPs (the extra norm, h a layer, is below 1e-6 of the
 * total). Arctic feeds its MoE the layer's input, beside attention, so that the all-to-all can
 * overlap attention and the residual MLP; Tessera schedules the MoE after attention and prices
 * the overlap as a shared expert's (--moe-shared-expert-overlap). The config's token dropping
 * (moe_token_dropping, moe_train_capacity_factor) is DeepSpeed-MoE's training setting, not the
 * model's, and is not read. Defaults are ArcticConfig's: 8 experts, top 1, an MoE layer every 2,
 * rope_theta 1e6. */
ts_status read_arctic(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    if (m->rope_theta == 0) m->rope_theta = 1e6;
    ts_moe *e = &m->moe;
    int every, residual;
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", "num_local_experts", 0, 1, TS_MAX_EXPERTS, 8, &e->experts));
    TS_CHECK(hf_i32(r, root, nm, "moe.top_k", "num_experts_per_tok", 0, 1, e->experts, 1, &e->top_k));
    TS_CHECK(hf_i32(r, root, nm, "moe.every", "moe_layer_frequency", 0, 1, m->layers, 2, &every));
    TS_CHECK(hf_bool(r, root, "parallel_attn_mlp_res", 0, 0, &residual));
    hf_name(nm, r, "moe.expert_ffn", "intermediate_size");
    e->expert_ffn = m->ffn_hidden;
    e->every = every;
    e->first_dense = every - 1;
    e->shared_experts = residual;
    e->shared_ffn = residual ? m->hidden : 0;
    return read_sliding(r, root, nm, m, 0);
}
