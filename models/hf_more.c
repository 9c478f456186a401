/* Hugging Face readers for Nemotron, Granite (Granite MoE, and Granite 4.0 where it has no Mamba
 * layers), Phi-3.5-MoE, DBRX, OLMo, OLMo 3, and the refused JetMoE, DiffLlama, Gemma 3n,
 * LongCat-Flash, Nemotron-NAS, DeciLM, Gemma 4 and MiMo-V2-Flash
 * (hf_impl.h). Each maps the keys transformers' <Type>Config writes onto ts_model, with the
 * modules that family's modelling code builds (transformers/models/<type>/modeling_<type>.py).
 *
 * Approximation shared with hf.c (below 1e-5 of the total): a bias on the attention output
 * projection alone counts with the MLP's biases (linear_bias) or not at all when the MLP has none
 * (Phi-3.5-MoE's o_proj bias, h per layer). */
#include <string.h>

#include "models/hf_impl.h"
#include "models/model_limits.h"

/* Nemotron-4 and its Minitron prunings (transformers NemotronConfig, NemotronDecoderLayer):
 * Llama's attention with attention_bias on Q, K, V and O; a 2-matrix MLP (up_proj, down_proj,
 * mlp_bias) with hidden_act, squared ReLU ("relu2": the default, and Nemotron-4's);
 * NemotronLayerNorm1P, a LayerNorm with weight and bias (the weight stored less 1), before
 * attention, before the MLP and at the end; rotary on partial_rotary_factor (0.5) of each head,
 * which changes no parameter; an untied head by default. */
ts_status read_nemotron(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama(r, root, nm, m));
    char act[32];
    TS_CHECK(ts_jr_str(r, root, "hidden_act", 0, "relu2", act, sizeof act));
    /* any other activation keeps the 2-matrix shape, which TS_ACT_GELU stands for (model.h) */
    m->activation = strcmp(act, "relu2") == 0 ? TS_ACT_RELU2 : TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    return TS_OK;
}

/* Granite 3.x MoE (transformers GraniteMoeConfig, GraniteMoeMoE): Llama's attention with
 * attention_bias on Q, K, V and O; every layer num_local_experts SwiGLU experts of
 * intermediate_size (input_linear holds gate and up, output_linear down; no biases), routed to
 * num_experts_per_tok by a router without bias. The embedding, attention, residual and logits
 * multipliers scale activations, not parameters. */
ts_status read_granitemoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    return read_expert_layers(r, root, nm, "num_local_experts", m);
}

/* Granite MoE with a shared expert (transformers GraniteMoeSharedConfig, GraniteMoeSharedMLP):
 * one always-on SwiGLU MLP of shared_intermediate_size (0: none) beside the routed experts. */
ts_status read_granitemoeshared(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_granitemoe(r, root, nm, m));
    ts_moe *e = &m->moe;
    TS_CHECK(hf_int(r, root, nm, "moe.shared_ffn", "shared_intermediate_size", 0, 0, TS_MAX_FFN, 0, &e->shared_ffn));
    e->shared_experts = e->shared_ffn > 0;
    return TS_OK;
}

/* Granite 4.0 (transformers GraniteMoeHybridConfig, GraniteMoeHybridDecoderLayer in
 * modular_granitemoehybrid.py): each layer mixes its sequence by Granite's attention (attention_bias
 * on Q, K, V and O) or by a Mamba-2 mixer, as layer_types says (absent: every layer Mamba, the
 * config's layers_block_type), then runs the always-on SwiGLU shared_mlp of shared_intermediate_size
 * (default 1024), plus num_local_experts (default 8) routed experts of intermediate_size when there
 * are any: Granite MoE Shared's layer. The releases without Mamba layers (granite-4.0-micro, -1b and
 * -350m: every layer "attention", no experts) are dense transformers and read so; the hybrids (the
 * "-h-" releases) are refused with their Mamba layers counted. position_embedding_type ("rope" or
 * "nope") moves no parameter. */
ts_status read_granitemoehybrid(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (types == NULL || cJSON_IsNull(types))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.layer_types: absent, so every layer is a Mamba-2 (state-space) layer "
                       "(GraniteMoeHybridConfig's default); Tessera models decoder-only transformers only", r->file,
                       r->path);
    if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != m->layers)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.layer_types: expected a list of %d entries, one a layer, got %s", r->file,
                       r->path, m->layers, cJSON_IsArray(types) ? "another length" : ts_json_type_name(types));
    int mamba = 0;
    for (int i = 0; i < m->layers; i++) {
        const cJSON *t = cJSON_GetArrayItem(types, i);
        int is_mamba = cJSON_IsString(t) && strcmp(t->valuestring, "mamba") == 0;
        if (!is_mamba && !(cJSON_IsString(t) && strcmp(t->valuestring, "attention") == 0))
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.layer_types[%d]: expected \"attention\" or \"mamba\", got %s",
                           r->file, r->path, i, ts_json_type_name(t));
        mamba += is_mamba;
    }
    if (mamba > 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.layer_types: %d of %d layers are \"mamba\" (Mamba-2 state-space "
                       "layers); Tessera models decoder-only transformers only", r->file, r->path, mamba, m->layers);
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    ts_moe *e = &m->moe;
    TS_CHECK(hf_i32(r, root, nm, "moe.experts", "num_local_experts", 0, 0, TS_MAX_EXPERTS, 8, &e->experts));
    if (e->experts == 0) { /* the shared MLP is the layer's MLP; no router reads num_experts_per_tok */
        int unused;
        TS_CHECK(hf_i32(r, root, nm, "moe.top_k", "num_experts_per_tok", 0, 0, TS_MAX_EXPERTS, 0, &unused));
        *e = (ts_moe){0};
        return hf_int(r, root, nm, "ffn_hidden", "shared_intermediate_size", 0, 1, TS_MAX_FFN, 1024, &m->ffn_hidden);
    }
    TS_CHECK(hf_i32(r, root, nm, "moe.top_k", "num_experts_per_tok", 0, 1, e->experts, 2, &e->top_k));
    TS_CHECK(hf_int(r, root, nm, "moe.shared_ffn", "shared_intermediate_size", 0, 0, TS_MAX_FFN, 1024, &e->shared_ffn));
    hf_name(nm, r, "moe.expert_ffn", "intermediate_size");
    e->expert_ffn = m->ffn_hidden;
    e->shared_experts = e->shared_ffn > 0;
    e->every = 1;
    return TS_OK;
}

/* Phi-3.5-MoE (transformers PhimoeConfig, PhimoeDecoderLayer): Mixtral's layer with Llama's
 * attention (attention_bias on Q, K, V and O), nn.LayerNorm with weight and bias in place of
 * RMSNorm (input, post-attention, final), num_local_experts SwiGLU experts of intermediate_size
 * without biases and a router without bias, sliding_window on every layer when given. Not counted
 * (below 1e-6 of the total): the LM head's bias (lm_head_bias, vocab_size values). */
ts_status read_phimoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    m->norm = TS_NORM_LAYERNORM;
    TS_CHECK(read_expert_layers(r, root, nm, "num_local_experts", m));
    return read_sliding(r, root, nm, m, 0);
}

/* DBRX (transformers DbrxConfig with its nested DbrxAttentionConfig and DbrxFFNConfig, whose
 * defaults apply when attn_config / ffn_config or a key in them is absent): d_model, n_heads,
 * n_layers, max_seq_len; a fused Wqkv for grouped-query attention of attn_config.kv_n_heads
 * (clip_qkv clamps activations, no parameter) and out_proj, no biases; every layer
 * ffn_config.moe_num_experts GLU experts (w1, v1, w2) of ffn_hidden_size, top moe_top_k, a router
 * without bias; LayerNorms without bias (norm_1, norm_2, norm_f: nn.LayerNorm(bias=False)); an
 * untied head. */
ts_status read_dbrx(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"d_model", "n_layers", "n_heads", "max_seq_len", 2048, 0};
    static const hf_rate rates[] = {{"resid_pdrop", 0.0}, {"emb_pdrop", 0.0}};
    static const hf_rate attn_rates[] = {{"attn_pdrop", 0.0}};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &keys, m));
    int dropout, attn_dropout;
    TS_CHECK(read_dropout(r, root, rates, 2, &dropout));
    const cJSON *attn, *ffn;
    TS_CHECK(ts_jr_obj(r, root, "attn_config", 0, &attn));
    TS_CHECK(ts_jr_obj(r, root, "ffn_config", 0, &ffn));
    ts_jreader ar, fr;
    ts_jreader_child(r, "attn_config", 0, &ar);
    ts_jreader_child(r, "ffn_config", 0, &fr);

    TS_CHECK(hf_i32(&ar, attn, nm, "kv_heads", "kv_n_heads", 0, 1, m->heads, 1, &m->kv_heads));
    if (m->heads % m->kv_heads != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.kv_n_heads: n_heads %d is not divisible by kv_n_heads %d", r->file,
                       ar.path, m->heads, m->kv_heads);
    TS_CHECK(read_dropout(&ar, attn, attn_rates, 1, &attn_dropout));
    m->dropout = dropout || attn_dropout;
    TS_CHECK(read_rope_theta(&ar, attn, nm, m));

    ts_moe *e = &m->moe;
    TS_CHECK(hf_int(&fr, ffn, nm, "moe.expert_ffn", "ffn_hidden_size", 0, 1, TS_MAX_FFN, 3584, &e->expert_ffn));
    m->ffn_hidden = e->expert_ffn;
    hf_name(nm, &fr, "ffn_hidden", "ffn_hidden_size");
    TS_CHECK(hf_i32(&fr, ffn, nm, "moe.experts", "moe_num_experts", 0, 1, TS_MAX_EXPERTS, 4, &e->experts));
    TS_CHECK(hf_i32(&fr, ffn, nm, "moe.top_k", "moe_top_k", 0, 1, e->experts, 1, &e->top_k));
    e->every = 1;
    m->activation = TS_ACT_SWIGLU;
    m->norm = TS_NORM_LAYERNORM;
    m->norm_affine = TS_NORM_AFFINE_WEIGHT;
    m->position = TS_POS_ROPE;
    return TS_OK;
}

/* OLMo 1 (transformers OlmoConfig, OlmoDecoderLayer): Llama's attention and SwiGLU MLP, Q/K/V/O
 * biases from attention_bias, clip_qkv clamping activations (no parameter), and OlmoLayerNorm, a
 * LayerNorm with neither weight nor bias (Groeneveld et al. 2024, OLMo §2.1: "non-parametric
 * layer norm"), before attention, before the MLP and at the end. */
ts_status read_olmo(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(hf_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    m->norm = TS_NORM_LAYERNORM;
    m->norm_affine = TS_NORM_AFFINE_NONE;
    return TS_OK;
}

/* OLMo 3 (transformers Olmo3Config, Olmo3DecoderLayer): OLMo 2's layer (Q and K normed over the
 * whole projection, norms after attention and MLP) with sliding-window attention on the layers
 * layer_types names; Olmo3Config's default puts a full-attention layer every fourth
 * ("sliding_attention" if (i + 1) % 4 != 0), as allenai/Olmo-3-1025-7B's config writes it. */
ts_status read_olmo3(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_olmo2(r, root, nm, m));
    return read_sliding(r, root, nm, m, 4);
}

/* JetMoE (transformers JetMoeConfig, JetMoeBlock): every layer routes both its MLP and its
 * attention through num_local_experts experts (JetMoeMoA: per-expert query and output
 * projections, top num_experts_per_tok, shared key/value; Shen et al. 2024, JetMoE §2). Tessera's
 * attention is dense (model.h), so the family is refused, naming the key, rather than counted
 * wrong. */
ts_status read_jetmoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    (void)m;
    int experts;
    TS_CHECK(hf_i32(r, root, nm, NULL, "num_local_experts", 0, 1, TS_MAX_EXPERTS, 8, &experts));
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.num_local_experts: JetMoE routes attention as well as the MLP through "
                   "%d experts (mixture of attention heads); Tessera models dense attention only", r->file, r->path,
                   experts);
}

/* DiffLlama (transformers DiffLlamaConfig, modular_diffllama.py DiffLlamaAttention; Ye et al. 2024,
 * Differential Transformer, arXiv:2410.05258): Llama's projections, but each pair of heads takes the
 * difference of two softmax maps over values of 2 * head_dim, weighted by lambdas learned from four
 * vectors of head_dim a layer and normed per head pair. Tessera's attention has neither the lambdas
 * nor the second map, so the family is refused rather than counted and costed wrong. */
ts_status read_diffllama(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    (void)root, (void)nm, (void)m;
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.model_type: \"diffllama\" uses differential attention (two softmax "
                   "maps a head pair and learned lambda vectors, 4 * head_dim a layer); Tessera models standard "
                   "attention only", r->file, r->path);
}

/* Gemma 3n (transformers Gemma3nTextConfig, modular_gemma3n.py): Gemma 3's layer carrying per-layer
 * embeddings (a second table of hidden_size_per_layer_input a layer, gated into each layer),
 * altup_num_inputs copies of the hidden state (AltUp), a low-rank residual (LAuReL), and its last
 * num_kv_shared_layers layers reusing earlier layers' keys and values. Tessera models one residual
 * stream, one embedding table and K/V in every layer, so the family is refused, naming the key
 * (google/gemma-3n-E2B's language model: 4.46B parameters, 2.01B of them the per-layer table). */
ts_status read_gemma3n(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    (void)m;
    int64_t ple;
    TS_CHECK(hf_int(r, root, nm, NULL, "hidden_size_per_layer_input", 0, 0, TS_MAX_HIDDEN, 256, &ple));
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.hidden_size_per_layer_input: Gemma 3n adds per-layer embeddings (%lld "
                   "a layer), AltUp's parallel hidden states and LAuReL's low-rank residual to every layer and shares "
                   "K/V across its last layers; Tessera models one residual stream and one embedding table",
                   r->file, r->path, (long long)ple);
}

/* LongCat-Flash (transformers LongcatFlashConfig, modular_longcat_flash.py; LongCat-Flash report,
 * arXiv:2509.01322 §2): each layer holds two MLA blocks and two dense MLPs in sequence beside one
 * shortcut-connected MoE whose router also picks zero_expert_num zero-computation (identity)
 * experts, so the experts a token computes vary. Tessera's layer is one attention and one MLP or
 * MoE, every expert computing, so the family is refused, naming the key. */
ts_status read_longcat_flash(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    (void)m;
    int layers, zero;
    TS_CHECK(hf_i32(r, root, nm, NULL, "num_layers", 0, 1, TS_MAX_LAYERS, 28, &layers));
    TS_CHECK(hf_i32(r, root, nm, NULL, "zero_expert_num", 0, 0, TS_MAX_EXPERTS, 256, &zero));
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.num_layers: each of LongCat-Flash's %d layers holds two attention blocks "
                   "and two MLPs beside a shortcut MoE whose router also picks %d zero-computation (identity) "
                   "experts; Tessera models one attention and one MLP or MoE a layer, every expert computing",
                   r->file, r->path, layers, zero);
}

/* The least and greatest of the numbers seen (n of them; both 0 when none was). */
typedef struct {
    double lo, hi;
    int n;
} num_span;

static void span_add(num_span *s, const cJSON *v) {
    if (!cJSON_IsNumber(v)) return;
    if (s->n == 0 || v->valuedouble < s->lo) s->lo = v->valuedouble;
    if (s->n == 0 || v->valuedouble > s->hi) s->hi = v->valuedouble;
    s->n++;
}

/* The blocks of Nemotron-NAS's block_configs: how many drop or replace their attention or FFN,
 * and the FFN multipliers of the rest (ffn_mult: the FFN width over hidden_size, rounded by
 * modeling_decilm.py's _ffn_mult_to_intermediate_size). */
typedef struct {
    int layers, no_attention, linear_attention, no_ffn, linear_ffn;
    num_span ffn_mult;
} nas_blocks;

static int block_flag(const cJSON *block, const char *part, const char *flag) {
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(block, part), flag));
}

static void count_nas_blocks(const cJSON *blocks, nas_blocks *b) {
    *b = (nas_blocks){0};
    const cJSON *block;
    cJSON_ArrayForEach(block, blocks) {
        b->layers++;
        if (block_flag(block, "attention", "no_op")) b->no_attention++;
        else if (block_flag(block, "attention", "replace_with_linear")) b->linear_attention++;
        if (block_flag(block, "ffn", "no_op")) b->no_ffn++;
        else if (block_flag(block, "ffn", "replace_with_linear")) b->linear_ffn++;
        else span_add(&b->ffn_mult,
                      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(block, "ffn"), "ffn_mult"));
    }
}

/* Nemotron-NAS (model_type "nemotron-nas", DeciLMForCausalLM; remote code modeling_decilm.py:
 * Llama-3.1-Nemotron-51B, Llama-3.3-Nemotron-Super-49B, Llama-3.1-Nemotron-Ultra-253B): a Llama whose
 * layers were searched one by one (Puzzle, Bercovich et al. 2024, arXiv:2411.19146), each entry of
 * block_configs giving its layer's attention (n_heads_in_group, or none, or a linear layer in its
 * place) and FFN (ffn_mult, or none, or a linear layer). Tessera's layers share one shape, so the
 * family is refused, saying how its layers differ. */
ts_status read_nemotron_nas(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    (void)nm, (void)m;
    const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(root, "block_configs");
    if (!cJSON_IsArray(blocks))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.block_configs: expected an array of per-layer blocks, got %s",
                       r->file, r->path, ts_json_type_name(blocks));
    nas_blocks b;
    count_nas_blocks(blocks, &b);
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.block_configs: Nemotron-NAS layers differ in shape (%d layers: %d without "
                   "attention, %d with a linear layer for it, %d without an FFN, %d with a linear layer for it, FFN "
                   "multipliers %g to %g); Tessera models layers of one shape", r->file, r->path, b.layers,
                   b.no_attention, b.linear_attention, b.no_ffn, b.linear_ffn, b.ffn_mult.lo, b.ffn_mult.hi);
}

/* DeciLM-7B (model_type "deci", remote code modeling_decilm.py): a Llama whose key/value heads
 * vary by layer (num_key_value_heads_per_layer, variable GQA). Tessera models one count for every
 * layer, so the family is refused, naming the key and the range. */
ts_status read_deci(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    (void)nm, (void)m;
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(root, "num_key_value_heads_per_layer");
    if (!cJSON_IsArray(kv))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.num_key_value_heads_per_layer: expected an array of key/value heads "
                       "per layer, got %s", r->file, r->path, ts_json_type_name(kv));
    num_span heads = {0};
    const cJSON *v;
    cJSON_ArrayForEach(v, kv) span_add(&heads, v);
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.num_key_value_heads_per_layer: DeciLM's key/value heads vary by layer "
                   "(%g to %g over %d layers); Tessera models one count for every layer", r->file, r->path, heads.lo, heads.hi,
                   cJSON_GetArraySize(kv));
}

/* Gemma 4 (transformers models/gemma4, Gemma4TextConfig in configuration_gemma4.py; the text model
 * of a gemma4 config's text_config): Gemma 3's layer whose full-attention layers have a shape of
 * their own (global_head_dim, 512 by default, against head_dim's 256; with attention_k_eq_v, their
 * num_global_key_value_heads keys serving as values, no v_proj), with per-layer embeddings
 * (hidden_size_per_layer_input, 256 by default, as Gemma 3n) and the last num_kv_shared_layers
 * layers reusing earlier layers' K/V in the small checkpoints. Tessera's layers share one attention
 * shape and hold K/V each, with one embedding table, so the family is refused, naming the first key
 * that applies (google/gemma-4-31B-it: 30.70B parameters, its full layers' attention 0.55B more
 * than the sliding layers' shape would give; E2B: 4.63B, 2.35B of them the per-layer table). */
ts_status read_gemma4(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    (void)m;
    int64_t ple;
    TS_CHECK(hf_int(r, root, nm, NULL, "hidden_size_per_layer_input", 0, 0, TS_MAX_HIDDEN, 256, &ple));
    if (ple > 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.hidden_size_per_layer_input: Gemma 4 adds per-layer embeddings (%lld a "
                       "layer) to every layer; Tessera models one embedding table", r->file, r->path, (long long)ple);
    int shared, head_dim, global_dim, k_eq_v;
    TS_CHECK(hf_i32(r, root, nm, NULL, "num_kv_shared_layers", 0, 0, TS_MAX_LAYERS, 0, &shared));
    if (shared > 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.num_kv_shared_layers: Gemma 4's last %d layers reuse earlier layers' "
                       "keys and values; Tessera models K/V in every layer", r->file, r->path, shared);
    TS_CHECK(hf_i32(r, root, nm, NULL, "head_dim", 0, 1, TS_MAX_HEAD_DIM, 256, &head_dim));
    TS_CHECK(hf_i32(r, root, nm, NULL, "global_head_dim", 0, 1, TS_MAX_HEAD_DIM, 512, &global_dim));
    if (global_dim != head_dim)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.global_head_dim: Gemma 4's full-attention layers have heads of %d where "
                       "its sliding layers have %d (head_dim); Tessera models one head width for every layer",
                       r->file, r->path, global_dim, head_dim);
    TS_CHECK(hf_bool(r, root, "attention_k_eq_v", 0, 0, &k_eq_v));
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: Gemma 4's %s; Tessera models one attention shape with K and V "
                   "projections in every layer", r->file, r->path, k_eq_v ? "attention_k_eq_v" : "model_type",
                   k_eq_v ? "full-attention layers use their keys as values (no v_proj)"
                          : "layers are not modelled (per-layer-type attention, per_layer_config)");
}

/* MiMo-V2-Flash (transformers MiMoV2FlashConfig, modular_mimo_v2_flash.py MiMoV2FlashAttention;
 * XiaomiMiMo/MiMo-V2-Flash): queries and keys of head_dim (192) against values of v_head_dim (128),
 * so o_proj is heads * v_head_dim wide; its sliding-window layers (hybrid_layer_pattern 1, learned
 * sinks) hold swa_num_key_value_heads (8) key/value heads against num_key_value_heads (4) on its
 * full-attention layers, which are layer 0 and every sixth from 5, not one period. Tessera models
 * one head width for Q, K and V outside MLA and one key/value head count for every layer; the
 * nearest single shape miscounts 0.29% of the 309B parameters (v_head_dim) and 0.015% (key/value
 * heads), so the family is refused, naming the key. */
ts_status read_mimo_v2_flash(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    (void)m;
    int head_dim, v_dim, kv, swa_kv;
    TS_CHECK(hf_i32(r, root, nm, NULL, "head_dim", 0, 1, TS_MAX_HEAD_DIM, 192, &head_dim));
    TS_CHECK(hf_i32(r, root, nm, NULL, "v_head_dim", 0, 1, TS_MAX_HEAD_DIM, 128, &v_dim));
    TS_CHECK(hf_i32(r, root, nm, NULL, "num_key_value_heads", 0, 1, TS_MAX_HEADS, 4, &kv));
    /* transformers ignores swa_num_key_value_heads and builds 2 * num_key_value_heads */
    TS_CHECK(hf_i32(r, root, nm, NULL, "swa_num_key_value_heads", 0, 1, TS_MAX_HEADS, 2 * kv, &swa_kv));
    return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: MiMo-V2-Flash's values are %d wide against queries and keys of "
                   "head_dim %d, and its sliding-window layers hold %d key/value heads against %d on its "
                   "full-attention layers; Tessera models one head width and one key/value head count for every "
                   "layer", r->file, r->path, v_dim != head_dim ? "v_head_dim" : "swa_num_key_value_heads", v_dim,
                   head_dim, swa_kv, kv);
}
