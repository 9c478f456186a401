/* Exact parameter counts of a ts_model (declared in model.h).
 *
 * Everything is computed in doubles: the loaders admit sizes whose counts exceed 2^63, and a
 * double is exact for integers below 2^53 (every real model).
 *
 * Per layer (h = hidden, a = heads * head_dim, k = kv_heads * head_dim, f = MLP hidden size):
 *   attention   GQA: Q h*a, K and V h*k each, O a*h (Vaswani et al. 2017; GQA: Ainslie et al.
 *               2023); qkv_bias adds a + 2k, linear_bias adds h.
 *               MLA (DeepSeek-V2 §2.1, arXiv:2405.04434; transformers DeepseekV3Attention), with
 *               n = heads, r = qk_rope_dim, d = qk_nope_dim, v = v_dim:
 *                 q_a h*q_lora + q_a norm(q_lora), q_b q_lora*n*(d+r)   [q_lora = 0: q h*n*(d+r)]
 *                 kv_a h*(kv_lora + r) + kv_a norm(kv_lora), kv_b kv_lora*n*(d+v), o n*v*h;
 *               qkv_bias adds the q_a and kv_a biases, linear_bias the o bias.
 *               attn_gate adds W_g h*a beside Q (and a to qkv_bias): Qwen3-Next's q_proj of 2a,
 *               AFMoE's gate_proj, Megatron-Core's linear_qkv widened by heads * kv_channels.
 *               DeepSeek-V3.2's indexer (inference/model.py Indexer), i heads of width w: wq_b
 *               q_lora*i*w (h*i*w without q_lora), wk h*w, k_norm a LayerNorm 2w, weights_proj h*i.
 *   MLP         SwiGLU: gate and up h*f, down f*h (Shazeer 2020); GELU/ReLU^2: up h*f, down f*h;
 *               linear_bias adds f per h->f matrix and h.
 *   norms       two per layer (norms_per_layer: Gemma 2/3 four, GPT-J one); RMSNorm h (a
 *               weight), LayerNorm 2h (weight and bias); norm_affine: h without the bias (DBRX),
 *               0 when the norm learns nothing (OLMo). qk_norm adds a norm of head_dim on
 *               queries and one on keys (Qwen3 q_norm/k_norm, transformers Qwen3Attention), or
 *               of heads*head_dim and kv_heads*head_dim (OLMo 2, transformers Olmo2Attention).
 *               attn_sinks adds one logit per head (gpt-oss, transformers GptOssAttention.sinks).
 *   MoE layer   router h*experts (router_bias: + experts, gpt-oss), experts routed MLPs of expert_ffn, shared_experts
 *               MLPs of shared_ffn (DeepSeekMoE, arXiv:2401.06066).
 * Outside the layers: the word embedding V*e (e = embed_dim or h), learned positions
 * (max_seq + position_offset)*h, an LM head V*e unless tied, a final norm, BLOOM's embedding norm,
 * OPT-350m's project_in/out 2*e*h.
 *
 * Megatron-LM's closed form (Narayanan et al. SC'21, eq. 2),
 *   P = 12*l*h^2 * (1 + 13/(12h) + (V + s)/(12*l*h)),
 * is this count for a GPT with tied embeddings, learned positions and 4h MLP, less the final
 * LayerNorm (2h) that eq. 2 leaves out.
 *
 * Active parameters drop the (experts - top_k) routed experts a token does not use in each MoE
 * layer. DeepSeek-V3's multi-token-prediction modules (DeepSeek-V3 report §2.2, arXiv:2412.19437)
 * are one full transformer layer, two RMSNorms of h and a 2h->h projection each; they share the
 * embedding and head and are reported apart from total/active, as the report does (671B + 14B). */
#include "models/model.h"

#include <math.h>

#include "common/stats.h"

static double norm_params(const ts_model *m, double width) {
    if (m->norm_affine == TS_NORM_AFFINE_NONE) return 0;
    if (m->norm_affine == TS_NORM_AFFINE_WEIGHT) return width;
    return m->norm == TS_NORM_LAYERNORM ? 2 * width : width;
}

static double mlp_params(const ts_model *m, double f) {
    double h = (double)m->hidden;
    double ups = m->activation == TS_ACT_SWIGLU ? 2 : 1; /* h->f matrices */
    double p = (ups + 1) * h * f;
    if (m->linear_bias) p += ups * f + h;
    return p;
}

static double mla_params(const ts_model *m) {
    const ts_mla *a = &m->mla;
    double h = (double)m->hidden, n = m->heads;
    double qk = (double)a->qk_nope_dim + a->qk_rope_dim;
    double p = 0;
    if (a->q_lora_rank > 0) {
        p += h * a->q_lora_rank + norm_params(m, a->q_lora_rank) + (double)a->q_lora_rank * n * qk;
        if (m->qkv_bias) p += a->q_lora_rank;
    } else {
        p += h * n * qk;
    }
    double kv_a = (double)a->kv_lora_rank + a->qk_rope_dim;
    p += h * kv_a + norm_params(m, a->kv_lora_rank);
    if (m->qkv_bias) p += kv_a;
    p += (double)a->kv_lora_rank * n * ((double)a->qk_nope_dim + a->v_dim);
    p += n * a->v_dim * h;
    if (m->linear_bias) p += h;
    if (a->index_heads > 0) {
        double q_in = a->q_lora_rank > 0 ? a->q_lora_rank : h, i = a->index_heads, w = a->index_head_dim;
        p += q_in * i * w + h * w + 2 * w + h * i;
    }
    return p;
}

static double qk_norm_params(const ts_model *m) {
    double q = (double)m->heads * m->head_dim, kv = (double)m->kv_heads * m->head_dim;
    if (m->qk_norm == TS_QKNORM_HEAD) return 2 * norm_params(m, m->head_dim);
    if (m->qk_norm == TS_QKNORM_FULL) return norm_params(m, q) + norm_params(m, kv);
    return 0;
}

static double attention_params(const ts_model *m) {
    double sinks = m->attn_sinks ? m->heads : 0;
    if (m->mla.kv_lora_rank > 0) return mla_params(m) + sinks;
    double h = (double)m->hidden;
    double q = (double)m->heads * m->head_dim, kv = (double)m->kv_heads * m->head_dim;
    double gate = m->attn_gate ? q : 0; /* W_g beside W_q, and its bias with theirs */
    double p = 2 * h * q + 2 * h * kv + h * gate + qk_norm_params(m) + sinks;
    if (m->qkv_bias) p += q + 2 * kv + gate;
    if (m->linear_bias) p += h;
    return p;
}

static double moe_block_params(const ts_model *m) {
    const ts_moe *e = &m->moe;
    double router = ((double)m->hidden + (m->router_bias ? 1 : 0)) * e->experts;
    return router + e->experts * mlp_params(m, (double)e->expert_ffn) +
           e->shared_experts * mlp_params(m, (double)e->shared_ffn);
}

static double moe_layer_count(const ts_model *m) {
    const ts_moe *e = &m->moe;
    if (e->experts <= 0 || e->every <= 0 || m->layers <= e->first_dense) return 0;
    return (double)((m->layers - e->first_dense - 1) / e->every + 1);
}

int ts_model_layer_is_moe(const ts_model *m, int layer) {
    const ts_moe *e = &m->moe;
    if (layer < 0 || layer >= m->layers || e->experts <= 0 || e->every <= 0) return 0;
    return layer >= e->first_dense && (layer - e->first_dense) % e->every == 0;
}

int ts_model_norms_per_layer(const ts_model *m) { return m->norms_per_layer > 0 ? m->norms_per_layer : 2; }

int64_t ts_model_layer_window(const ts_model *m, int layer) {
    const ts_window *w = &m->window;
    if (w->tokens <= 0 || layer < 0 || layer >= m->layers) return 0;
    if (w->full_every > 0 && (layer + 1) % w->full_every == 0) return 0;
    return w->tokens;
}

double ts_model_layer_params(const ts_model *m, int layer) {
    if (layer < 0 || layer >= m->layers) return 0;
    double p = attention_params(m) + ts_model_norms_per_layer(m) * norm_params(m, (double)m->hidden);
    if (ts_model_layer_is_moe(m, layer)) return p + moe_block_params(m);
    return p + mlp_params(m, (double)m->ffn_hidden);
}

void ts_model_params(const ts_model *m, ts_param_count *out) {
    double h = (double)m->hidden, v = (double)m->vocab;
    double e = m->embed_dim > 0 ? (double)m->embed_dim : h;
    double layer_norms = ts_model_norms_per_layer(m) * norm_params(m, h);

    out->attention = attention_params(m);
    out->per_layer_dense = out->attention + mlp_params(m, (double)m->ffn_hidden) + layer_norms;
    out->expert = m->moe.experts > 0 ? mlp_params(m, (double)m->moe.expert_ffn) : 0;
    out->per_layer_moe =
        m->moe.experts > 0 ? out->attention + moe_block_params(m) + layer_norms : 0;

    out->embedding = v * e;
    if (m->position == TS_POS_LEARNED)
        out->embedding += ((double)m->max_seq + m->position_offset) * h;
    out->lm_head = m->tied_embeddings ? 0 : v * e;
    double outside = norm_params(m, h); /* final norm */
    if (m->embed_norm) outside += norm_params(m, h);
    if (m->embed_dim > 0) outside += 2 * e * h;

    double n_moe = moe_layer_count(m), n_dense = m->layers - n_moe;
    out->total = out->embedding + out->lm_head + outside + n_dense * out->per_layer_dense +
                 n_moe * out->per_layer_moe;
    out->active = out->total - n_moe * (m->moe.experts - m->moe.top_k) * out->expert;

    double mtp_layer = m->moe.experts > 0 ? out->per_layer_moe : out->per_layer_dense;
    out->mtp = m->mtp_layers * (mtp_layer + 2 * norm_params(m, h) + 2 * h * h);
}

double ts_moe_load_factor(const ts_moe *x, int ep) {
    double dropless = 1.0;
    if (x->load_cv > 0 && ep > 1 && x->experts > 0)
        dropless = 1.0 + x->load_cv / sqrt((double)x->experts / ep) * ts_expected_max_normal(ep);
    if (x->capacity_factor <= 0) return dropless;
    return x->capacity_unpadded && dropless < x->capacity_factor ? dropless : x->capacity_factor;
}
