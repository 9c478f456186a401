/* Hugging Face readers for recent MoE families and Llama kin with their own MLP (hf_impl.h):
 * MiniMax-M2, Ling (bailing_moe, remote code), DeepSeek-V3.2, MiMo (remote code), dots.llm1,
 * Arcee (AFM), Apertus, AFMoE (Trinity), Jais 2, NanoChat, BitNet and GLM-4.7-Flash. Each maps the keys of that family's <Type>Config onto ts_model, with
 * the modules its modelling code builds (transformers models/<type>/modular_<type>.py; for the
 * remote-code families the modeling_*.py of the model's own repository: inclusionAI/Ling-lite-1.5
 * modeling_bailing_moe.py, XiaomiMiMo/MiMo-7B-Base modeling_mimo.py; DeepSeek-V3.2's indexer from
 * deepseek-ai/DeepSeek-V3.2-Exp inference/model.py).
 *
 * Approximations, each below 1e-5 of the total: Apertus' xIELU activation learns two scalars a
 * layer (alpha_p, alpha_n) that are not counted; Ling's attention output bias (use_bias, h a layer)
 * is not counted; MiMo's MTP module holds three RMSNorms (token, hidden, final) where Tessera's
 * count of an MTP module has two. */
#include <string.h>

#include "models/hf_impl.h"
#include "models/model_limits.h"

/* The 2-matrix MLP of transformers' NemotronMLP (up_proj, down_proj) under `hidden_act`: squared
 * ReLU ("relu2") is TS_ACT_RELU2; any other activation (Apertus' "xielu") keeps the same two
 * matrices, which TS_ACT_GELU stands for (model.h). */
static ts_status read_two_matrix_mlp(const ts_jreader *r, const cJSON *root, const char *def_act, ts_model *m) {
    char act[32];
    TS_CHECK(ts_jr_str(r, root, "hidden_act", 0, def_act, act, sizeof act));
    m->activation = strcmp(act, "relu2") == 0 ? TS_ACT_RELU2 : TS_ACT_GELU;
    return TS_OK;
}

/* Llama's layer with attention_bias (default `bias_def`) on Q, K and V and the family's own default
 * of max_position_embeddings. */
static ts_status read_llama_biased(const ts_jreader *r, const cJSON *root, ts_field_names *nm, int bias_def,
                                   int64_t max_seq_def, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, bias_def, &m->qkv_bias));
    return hf_int(r, root, nm, "max_seq", "max_position_embeddings", 0, 1, TS_MAX_SEQ, max_seq_def, &m->max_seq);
}

/* Arcee AFM (transformers ArceeConfig, ArceeMLP = NemotronMLP): Llama's layer (attention_bias,
 * mlp_bias) with a non-gated MLP, squared ReLU by default. */
ts_status read_arcee(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama(r, root, nm, m));
    return read_two_matrix_mlp(r, root, "relu2", m);
}

/* Apertus (transformers ApertusConfig, ApertusAttention, ApertusMLP): Llama's attention with an
 * RMSNorm of head_dim on queries and keys (q_norm, k_norm), a non-gated MLP (up_proj, down_proj,
 * no bias) under xIELU by default, two RMSNorms a layer (attention_layernorm,
 * feedforward_layernorm) and 65536 positions by default. */
ts_status read_apertus(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_biased(r, root, nm, 0, 65536, m));
    m->qk_norm = TS_QKNORM_HEAD;
    return read_two_matrix_mlp(r, root, "xielu", m);
}

/* MiMo (remote code MiMoConfig, modeling_mimo.py MiMoForCausalLM): Qwen2's decoder (biases on Q,
 * K and V) and num_nextn_predict_layers MTP modules (MiMoMTPLayers: a Qwen2 attention and MLP,
 * input_proj 2h -> h and their norms), counted apart as DeepSeek-V3's. A window would follow
 * Qwen2's use_sliding_window (false in MiMo-7B's configs). */
ts_status read_mimo(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    m->qkv_bias = 1;
    TS_CHECK(hf_i32(r, root, nm, "mtp_layers", "num_nextn_predict_layers", 0, 0, TS_MAX_MTP_LAYERS, 0,
                    &m->mtp_layers));
    int use = 0;
    TS_CHECK(hf_bool(r, root, "use_sliding_window", 0, 0, &use));
    return use ? read_sliding(r, root, nm, m, 0) : TS_OK;
}

/* dots.llm1 (transformers Dots1Config, Dots1Attention = Qwen3Attention, Dots1MoE = DeepseekV3MoE):
 * Qwen3's attention (an RMSNorm of head_dim on queries and keys, attention_bias), DeepSeek-V3's
 * experts (n_routed_experts of moe_intermediate_size, n_shared_experts as one MLP, dense layers
 * before first_k_dense_replace) and its router, which scores with a sigmoid and a per-expert
 * correction bias whatever the config says. Sliding windows only where layer_types says
 * (Dots1Config puts them on layers >= max_window_layers, none in the released configs). */
ts_status read_dots1(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias)); /* o_proj's bias not counted, as Qwen3's */
    m->qk_norm = TS_QKNORM_HEAD;
    TS_CHECK(read_deepseek_moe(r, root, nm, m));
    m->moe.router_sigmoid = m->moe.experts > 0;
    m->moe.router_expert_bias = m->moe.experts > 0;
    int64_t below;
    TS_CHECK(hf_int(r, root, nm, NULL, "max_window_layers", 0, 0, TS_MAX_LAYERS, m->layers, &below));
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (cJSON_IsArray(types)) return read_sliding(r, root, nm, m, 0);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (below < m->layers && w != NULL && !cJSON_IsNull(w))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.max_window_layers: windows on the layers from %lld on are not "
                       "modelled; give layer_types or max_window_layers >= num_hidden_layers (%d)", r->file, r->path,
                       (long long)below, m->layers);
    return TS_OK;
}

/* MiniMax-M2 (transformers MiniMaxM2Config, MiniMaxM2Attention = FlexOlmoAttention,
 * MiniMaxM2SparseMoeBlock): grouped-query attention of head_dim (128 by default) without biases,
 * RMSNorm over the whole query and key projections (use_qk_norm; qk_norm_type "per_layer", or
 * "per_head" for one of head_dim), every layer num_local_experts SwiGLU experts of
 * intermediate_size, top num_experts_per_tok, a router without bias scoring with a sigmoid and a
 * per-expert correction bias (e_score_correction_bias, a buffer). Rotary on rotary_dim of each head
 * changes no parameter. The MTP modules the config names (num_mtp_modules) are not built by
 * transformers' model and are not read. */
ts_status read_minimax_m2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_i32(r, root, nm, "head_dim", "head_dim", 0, 1, TS_MAX_HEAD_DIM, 128, &m->head_dim));
    TS_CHECK(hf_int(r, root, nm, "max_seq", "max_position_embeddings", 0, 1, TS_MAX_SEQ, 196608, &m->max_seq));
    int qk;
    TS_CHECK(hf_bool(r, root, "use_qk_norm", 0, 1, &qk));
    static const char *const qk_types[] = {"per_layer", "per_head", NULL};
    int per_head;
    TS_CHECK(ts_jr_enum(r, root, "qk_norm_type", 0, qk_types, 0, &per_head));
    m->qk_norm = !qk ? TS_QKNORM_NONE : per_head ? TS_QKNORM_HEAD : TS_QKNORM_FULL;
    TS_CHECK(read_expert_layers(r, root, nm, "num_local_experts", m));
    m->moe.router_sigmoid = 1;
    return hf_bool(r, root, "use_routing_bias", 0, 1, &m->moe.router_expert_bias);
}

/* Ling's router and shared experts (BailingMoeV2Config; absent in v1 configs): score_function
 * ("softmax" in v1, "sigmoid"), moe_router_enable_expert_bias, n_group / topk_group,
 * routed_scaling_factor; moe_shared_expert_intermediate_size (else moe_intermediate_size). */
static ts_status read_bailing_router(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    ts_moe *e = &m->moe;
    char score[32];
    TS_CHECK(ts_jr_str(r, root, "score_function", 0, "softmax", score, sizeof score));
    e->router_sigmoid = strcmp(score, "sigmoid") == 0;
    TS_CHECK(hf_bool(r, root, "moe_router_enable_expert_bias", 0, 0, &e->router_expert_bias));
    int groups, group_topk;
    TS_CHECK(hf_i32(r, root, nm, "moe.router_groups", "n_group", 0, 0, e->experts, 0, &groups));
    TS_CHECK(hf_i32(r, root, nm, "moe.router_group_topk", "topk_group", 0, 0, TS_MAX_EXPERTS, 0, &group_topk));
    if (groups > 1) e->router_groups = groups, e->router_group_topk = group_topk;
    double scale;
    TS_CHECK(ts_jr_num(r, root, "routed_scaling_factor", 0, 0, 1e6, 1, &scale));
    if (scale != 1) e->router_scale = scale;
    if (e->shared_experts > 0)
        TS_CHECK(hf_int(r, root, nm, "moe.shared_ffn", "moe_shared_expert_intermediate_size", 0, 1, TS_MAX_FFN,
                        e->expert_ffn, &e->shared_ffn));
    return TS_OK;
}

/* Ling / Ring (remote code BailingMoeConfig, modeling_bailing_moe.py; v2 BailingMoeV2Config, same
 * model_type): Llama's shape with a fused query_key_value (use_qkv_bias) of the same matrices as
 * q, k and v; layer i is MoE when i >= first_k_dense_replace (a SwiGLU MLP of intermediate_size
 * before), num_experts SwiGLU experts of moe_intermediate_size, top num_experts_per_tok, and
 * num_shared_experts as one MLP of their summed width; an untied head (norm_head normalises its
 * rows, no parameter). v2 adds an RMSNorm of head_dim on queries and keys (use_qk_norm), MTP
 * modules (num_nextn_predict_layers) and DeepSeek-V3's router. */
ts_status read_bailing_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_rate rates[] = {{"embedding_dropout", 0.1}, {"attention_dropout", 0.1}, {"output_dropout", 0.1}};
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(read_dropout(r, root, rates, 3, &m->dropout));
    TS_CHECK(hf_bool(r, root, "use_qkv_bias", 0, 0, &m->qkv_bias));
    int qk;
    TS_CHECK(hf_bool(r, root, "use_qk_norm", 0, 0, &qk));
    m->qk_norm = qk ? TS_QKNORM_HEAD : TS_QKNORM_NONE;
    TS_CHECK(hf_i32(r, root, nm, "mtp_layers", "num_nextn_predict_layers", 0, 0, TS_MAX_MTP_LAYERS, 0,
                    &m->mtp_layers));
    ts_moe *e = &m->moe;
    /* BailingMoeConfig's defaults: 16 experts, top 2, no shared expert */
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", "num_experts", 0, 0, TS_MAX_EXPERTS, 16, &e->experts));
    if (e->experts == 0) return TS_OK;
    TS_CHECK(hf_i32(r, root, nm, "moe.top_k", "num_experts_per_tok", 0, 1, e->experts, 2, &e->top_k));
    TS_CHECK(hf_int(r, root, nm, "moe.expert_ffn", "moe_intermediate_size", 1, 1, TS_MAX_FFN, 0, &e->expert_ffn));
    TS_CHECK(hf_i32(r, root, nm, "moe.shared_experts", "num_shared_experts", 0, 0, TS_MAX_EXPERTS, 0,
                    &e->shared_experts));
    TS_CHECK(hf_i32(r, root, nm, "moe.first_dense", "first_k_dense_replace", 0, 0, m->layers - 1, 0,
                    &e->first_dense));
    e->every = 1;
    return read_bailing_router(r, root, nm, m);
}

/* DeepSeek-V3.2 (deepseek-ai/DeepSeek-V3.2-Exp, DeepseekV32Config): DeepSeek-V3 with the lightning
 * indexer of DeepSeek Sparse Attention in every layer (inference/model.py Indexer): wq_b
 * q_lora_rank -> index_n_heads * index_head_dim, wk h -> index_head_dim, k_norm a LayerNorm of
 * index_head_dim, weights_proj h -> index_n_heads. Its top-k selection (index_topk) changes no
 * parameter. */
ts_status read_deepseek_v32(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_deepseek_v3(r, root, nm, m));
    ts_mla *a = &m->mla;
    TS_CHECK(hf_i32(r, root, nm, "mla.index_heads", "index_n_heads", 0, 0, TS_MAX_HEADS, 64, &a->index_heads));
    return hf_i32(r, root, nm, "mla.index_head_dim", "index_head_dim", 0, 0, TS_MAX_HEAD_DIM, 128,
                  &a->index_head_dim);
}

/* A layer schedule, "dense" / "sparse" a layer (transformers' mlp_layer_types) or false / true
 * (is_moe_layer, K-EXAONE's remote-code config.json): its leading dense layers, for Tessera's
 * dense-first layers (moe.first_dense, then MoE on every layer). *first = -1 when `key` is absent;
 * a dense layer after an MoE one is refused, naming the entry. */
ts_status hf_moe_schedule(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *key, int layers,
                          int *first) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, key);
    *first = -1;
    if (list == NULL || cJSON_IsNull(list)) return TS_OK;
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != layers)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected a list of %d entries, one a layer, got %s", r->file, r->path,
                       key, layers, cJSON_IsArray(list) ? "another length" : ts_json_type_name(list));
    int dense = 0;
    for (int i = 0; i < layers; i++) {
        const cJSON *t = cJSON_GetArrayItem(list, i);
        int sparse = cJSON_IsBool(t) ? cJSON_IsTrue(t) : cJSON_IsString(t) && strcmp(t->valuestring, "sparse") == 0;
        int known = cJSON_IsBool(t) || (cJSON_IsString(t) && (sparse || strcmp(t->valuestring, "dense") == 0));
        if (!known)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s[%d]: expected \"dense\" or \"sparse\" (or a boolean), got %s",
                           r->file, r->path, key, i, ts_json_type_name(t));
        if (!sparse && i != dense)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s[%d]: a dense layer after an MoE layer; Tessera models the dense "
                           "layers first", r->file, r->path, key, i);
        dense += !sparse;
    }
    hf_name(nm, r, "moe.first_dense", key);
    *first = dense;
    return TS_OK;
}

/* GLM-4.7-Flash (transformers Glm4MoeLiteConfig, modular_glm4_moe_lite.py): DeepSeek-V3's
 * multi-latent attention (Glm4MoeLiteAttention is DeepseekV3Attention) and DeepSeek-V3's keys, with
 * GLM-4.5's experts and router (Glm4MoeMoE, Glm4MoeTopkRouter: a sigmoid and a per-expert
 * correction bias whatever the config says). Its dense layers are mlp_layer_types' leading "dense"
 * entries, by default the first (first_k_dense_replace, which its config.json also writes, is not
 * read by the modelling code). */
ts_status read_glm4_moe_lite(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_deepseek_v3(r, root, nm, m));
    if (m->moe.experts == 0) return TS_OK;
    int first;
    TS_CHECK(hf_moe_schedule(r, root, nm, "mlp_layer_types", m->layers, &first));
    if (first < 0) first = 1; /* Glm4MoeLiteConfig.__post_init__: ["dense"] + ["sparse"] * (layers - 1) */
    if (first >= m->layers) { /* every layer dense: no expert is built */
        m->moe = (ts_moe){0};
        return TS_OK;
    }
    m->moe.first_dense = first;
    m->moe.every = 1;
    m->moe.router_sigmoid = 1;
    m->moe.router_expert_bias = 1;
    return TS_OK;
}

/* AFMoE / Trinity (transformers AfmoeConfig, modular_afmoe.py): Llama's grouped-query attention of
 * head_dim (128 by default) with an RMSNorm of head_dim on queries and keys and a sigmoid gate on
 * its output from its own h -> heads * head_dim projection (AfmoeAttention.gate_proj), four RMSNorms
 * a layer (before and after attention and MLP), num_dense_layers SwiGLU MLPs of intermediate_size
 * first, then num_experts SwiGLU experts of moe_intermediate_size, top num_experts_per_tok, and
 * num_shared_experts as one MLP of their summed width; the router scores with a sigmoid, adds a
 * per-expert bias to choose (expert_bias, not trained) and scales by route_scale. Sliding windows
 * on the layers layer_types names, else all but every global_attn_every_n_layers-th (4). mup_enabled
 * scales the embeddings and changes no parameter. */
ts_status read_afmoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_i32(r, root, nm, "head_dim", "head_dim", 0, 1, TS_MAX_HEAD_DIM, 128, &m->head_dim));
    TS_CHECK(hf_int(r, root, nm, "max_seq", "max_position_embeddings", 0, 1, TS_MAX_SEQ, 16384, &m->max_seq));
    m->qk_norm = TS_QKNORM_HEAD;
    m->attn_gate = 1;
    m->norms_per_layer = 4;
    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", "num_experts", 0, 0, TS_MAX_EXPERTS, 64, &e->experts));
    TS_CHECK(hf_i32(r, root, nm, "moe.first_dense", "num_dense_layers", 0, 0, m->layers, 1, &e->first_dense));
    if (e->experts > 0 && e->first_dense < m->layers) {
        TS_CHECK(hf_i32(r, root, nm, "moe.top_k", "num_experts_per_tok", 0, 1, e->experts,
                        e->experts < 6 ? e->experts : 6, &e->top_k));
        TS_CHECK(hf_int(r, root, nm, "moe.expert_ffn", "moe_intermediate_size", 0, 1, TS_MAX_FFN, 1408,
                        &e->expert_ffn));
        TS_CHECK(hf_i32(r, root, nm, "moe.shared_experts", "num_shared_experts", 0, 0, TS_MAX_EXPERTS, 2,
                        &e->shared_experts));
        if (e->shared_experts > 0) e->shared_ffn = e->expert_ffn;
        double scale;
        TS_CHECK(ts_jr_num(r, root, "route_scale", 0, 0, 1e6, 1, &scale));
        if (scale != 1) e->router_scale = scale;
        e->every = 1;
        e->router_sigmoid = e->router_expert_bias = 1;
    } else {
        *e = (ts_moe){0}; /* every layer dense */
    }
    int every;
    TS_CHECK(hf_i32(r, root, nm, NULL, "global_attn_every_n_layers", 0, 1, TS_MAX_LAYERS, 4, &every));
    return read_sliding(r, root, nm, m, every);
}

/* Jais 2 (transformers Jais2Config, modular_jais2.py: Jais2DecoderLayer = LlamaDecoderLayer with
 * Jais2MLP = NemotronMLP): Llama's attention with attention_bias (true by default) on Q, K, V and O;
 * a 2-matrix MLP (up_proj, down_proj) with mlp_bias (true by default) under hidden_act, squared ReLU by
 * default; nn.LayerNorm with weight and bias before attention, before the MLP and at the end; an
 * untied head, 8192 positions and a rotary base of 500000 by default. o_proj's bias follows mlp_bias
 * (linear_bias): exact when the two keys agree, as both defaults do. */
ts_status read_jais2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_biased(r, root, nm, 1, 8192, m));
    TS_CHECK(hf_bool(r, root, "mlp_bias", 0, 1, &m->linear_bias));
    if (m->rope_theta == 0) m->rope_theta = 500000; /* Jais2Config's default */
    m->norm = TS_NORM_LAYERNORM;
    return read_two_matrix_mlp(r, root, "relu2", m);
}

/* NanoChat (transformers NanoChatConfig, modeling_nanochat.py; karpathy/nanochat): Llama's
 * grouped-query attention, attention_bias (false by default) on Q, K, V and O, with an RMSNorm of
 * head_dim on queries and keys after the rotary embedding; a 2-matrix MLP (fc1, fc2, no bias) under
 * hidden_act, squared ReLU by default; every norm a weightless RMSNorm (two a layer and the final one,
 * which NanoChatModel also applies to the embeddings); the logits soft-capped at
 * final_logit_softcapping (15 by default; null: none); an untied head and 2048 positions by default.
 * With attention_bias, o_proj's bias (h a layer) is not counted, as wherever the MLP has none. */
ts_status read_nanochat(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_biased(r, root, nm, 0, 2048, m));
    m->qk_norm = TS_QKNORM_HEAD;
    m->norm_affine = TS_NORM_AFFINE_NONE;
    m->embed_norm = 1;
    hf_name(nm, r, "logit_softcap", "final_logit_softcapping");
    if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "final_logit_softcapping")))
        TS_CHECK(ts_jr_num(r, root, "final_logit_softcapping", 0, 0, TS_MAX_SOFTCAP, 15, &m->logit_softcap));
    return read_two_matrix_mlp(r, root, "relu2", m);
}

/* BitNet b1.58 (transformers BitNetConfig, modular_bitnet.py): Llama's decoder layer (input and
 * post-attention RMSNorms, grouped-query attention, attention_bias on Q, K, V and O) with two
 * sub-norms (Wang et al. 2023, "subln"): attn_sub_norm, an RMSNorm of hidden_size before o_proj,
 * and ffn_sub_norm, one of intermediate_size before down_proj of Gemma's gated MLP (gate_proj,
 * up_proj, down_proj) under squared ReLU. Every linear is an nn.Linear of the usual shape: training
 * holds it in bf16 and AutoBitLinear ternarises it (absmean) in each forward pass, the gradient
 * passing straight through (the -bf16 master weights, quantization_mode "online"). The gate's ReLU²
 * changes no parameter: SwiGLU's three matrices. Counted: three RMSNorms of h a layer. Not counted:
 * ffn_sub_norm, intermediate_size a layer (8.6e-5 of bitnet-b1.58-2B-4T's 2,412,820,480), nor
 * o_proj's bias under attention_bias, as Llama's. 2048 positions and an untied head by default. */
ts_status read_bitnet(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_biased(r, root, nm, 0, 2048, m));
    m->norms_per_layer = 3;
    return TS_OK;
}
