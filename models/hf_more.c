/* Hugging Face readers for Nemotron, Granite (and Granite MoE), Phi-3.5-MoE, DBRX and OLMo
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
 * mlp_bias) with hidden_act, squared ReLU ("relu2") in every published checkpoint;
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
    TS_CHECK(ts_jr_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
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

/* Phi-3.5-MoE (transformers PhimoeConfig, PhimoeDecoderLayer): Mixtral's layer with Llama's
 * attention (attention_bias on Q, K, V and O), nn.LayerNorm with weight and bias in place of
 * RMSNorm (input, post-attention, final), num_local_experts SwiGLU experts of intermediate_size
 * without biases and a router without bias, sliding_window on every layer when given. Not counted
 * (below 1e-6 of the total): the LM head's bias (lm_head_bias, vocab_size values). */
ts_status read_phimoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    TS_CHECK(read_llama_like(r, root, nm, m));
    TS_CHECK(ts_jr_bool(r, root, "attention_bias", 0, 0, &m->qkv_bias));
    m->norm = TS_NORM_LAYERNORM;
    TS_CHECK(read_expert_layers(r, root, nm, "num_local_experts", m));
    return read_sliding(r, root, nm, m, 0);
}
