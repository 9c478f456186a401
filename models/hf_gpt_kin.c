/* Hugging Face readers for the GPT-2-shaped families: GPT-BigCode (StarCoder, SantaCoder; and
 * SantaCoder's first release, a gpt2 config with attention_head_type), GPT-Neo and MPT
 * (hf_impl.h). Each maps the keys that family's config class writes onto ts_model, with the
 * modules its modelling code builds (transformers/models/<type>/modeling_<type>.py). CodeGen
 * (transformers CodeGenBlock: one LayerNorm feeding attention and MLP, a fused qkv_proj without
 * bias, rotary_dim, a biased GELU MLP of n_inner, an untied head) writes GPT-J's keys and is read
 * by hf.c's GPT-J reader. */
#include <string.h>

#include "models/hf_impl.h"
#include "models/model_limits.h"

/* GPT-BigCode (transformers GPTBigCodeConfig, GPTBigCodeAttention): GPT-2's block (learned
 * positions, LayerNorm, biases on every linear layer, a GELU MLP of n_inner, head tied) whose fused
 * c_attn projects keys and values for one head shared by all queries when multi_query (its default,
 * StarCoder's and SantaCoder's): h * (h + 2 * head_dim), else for every head. */
ts_status read_gpt_bigcode(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"n_embd", "n_layer", "n_head", "n_positions", 1024, 1};
    static const hf_rate rates[] = {{"resid_pdrop", 0.1}, {"embd_pdrop", 0.1}, {"attn_pdrop", 0.1}};
    int multi_query;
    TS_CHECK(read_gpt_block(r, root, nm, &keys, rates, m));
    TS_CHECK(hf_bool(r, root, "multi_query", 0, 1, &multi_query));
    m->kv_heads = multi_query ? 1 : m->heads;
    hf_name(nm, r, "kv_heads", "multi_query");
    m->position = TS_POS_LEARNED;
    m->qkv_bias = m->linear_bias = 1;
    return TS_OK;
}

/* SantaCoder as first released (bigcode/santacoder: remote code GPT2CustomConfig over model_type gpt2,
 * modeling_gpt2_mq.py) writes attention_head_type: "multiquery" projects keys and values for one
 * head (kv_attn, h -> 2 * head_dim, with bias), as GPT-BigCode does; "multihead" is GPT-2's. */
ts_status read_gpt2_head_type(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const char *const types[] = {"multihead", "multiquery", NULL};
    int type;
    TS_CHECK(ts_jr_enum(r, root, "attention_head_type", 0, types, 0, &type));
    if (type == 1) {
        m->kv_heads = 1;
        hf_name(nm, r, "kv_heads", "attention_head_type");
    }
    return TS_OK;
}

/* Walks GPT-Neo's layers in order, checking that the global ones repeat with one period in which
 * exactly one layer is global. */
typedef struct {
    int layers;       /* walked so far */
    int first_global; /* -1: none yet */
    int period;       /* distance between the first two global layers; 0 until known */
    int bad;          /* the first layer breaking the period, -1: none */
} neo_walk;

static void neo_step(neo_walk *w, int global) {
    int i = w->layers++;
    if (w->bad >= 0) return;
    if (global && w->first_global < 0) {
        w->first_global = i;
    } else if (global && w->period == 0) {
        w->period = i - w->first_global;
    } else if (w->period > 0 && i > w->first_global && ((i - w->first_global) % w->period == 0) != global) {
        w->bad = i;
    }
}

/* GPTNeoConfig's attention_types: a list of [kinds, repeats] whose kinds ("global", "local") are
 * repeated in order (GPTNeoConfig.expand_attention_types_params), one per layer. */
static ts_status neo_walk_types(const ts_jreader *r, const cJSON *types, neo_walk *w) {
    const cJSON *entry;
    cJSON_ArrayForEach(entry, types) {
        const cJSON *kinds = cJSON_GetArrayItem(entry, 0), *k;
        int64_t repeats;
        if (!cJSON_IsArray(entry) || cJSON_GetArraySize(entry) != 2 || !cJSON_IsArray(kinds) ||
            !ts_json_int_in(cJSON_GetArrayItem(entry, 1), 0, TS_MAX_LAYERS, &repeats))
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.attention_types: expected a list of [[\"global\" or \"local\", ...], "
                           "repeats] pairs, got %s", r->file, r->path, ts_json_type_name(entry));
        for (int64_t n = 0; n < repeats && cJSON_GetArraySize(kinds) > 0; n++) {
            cJSON_ArrayForEach(k, kinds) {
                int global = cJSON_IsString(k) && strcmp(k->valuestring, "global") == 0;
                if (!global && !(cJSON_IsString(k) && strcmp(k->valuestring, "local") == 0))
                    return TS_FAIL(TS_ERR_INPUT, "%s: %s.attention_types: expected \"global\" or \"local\" "
                                   "attention, got %s", r->file, r->path, ts_json_type_name(k));
                if (w->layers >= TS_MAX_LAYERS) return TS_OK; /* refused below: more than num_layers */
                neo_step(w, global);
            }
        }
    }
    return TS_OK;
}

/* GPT-Neo's local layers (window_size tokens; GPTNeoSelfAttention masks all but the window_size
 * latest) as Tessera's pattern, one global layer every `period`. GPT-Neo 125M to 2.7B alternate
 * global and local from layer 0, Tessera's pattern puts the global layer last in its period: the
 * same layers of each kind, each global layer moved within its period, which changes no parameter
 * and no total FLOPs. Another pattern is refused. */
static ts_status read_neo_layers(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "attention_types");
    neo_walk w = {0, -1, 0, -1};
    hf_name(nm, r, "window.full_every", "attention_types");
    TS_CHECK(hf_int(r, root, nm, "window.tokens", "window_size", 0, 1, TS_MAX_SEQ, 256, &m->window.tokens));
    if (types == NULL) {
        for (int i = 0; i < m->layers; i++) neo_step(&w, i % 2 == 0); /* GPTNeoConfig: [[["global", "local"], 12]] */
    } else if (!cJSON_IsArray(types)) {
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.attention_types: expected a list, got %s", r->file, r->path,
                       ts_json_type_name(types));
    } else {
        TS_CHECK(neo_walk_types(r, types, &w));
    }
    if (w.layers != m->layers)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.attention_types: expands to %d layers, num_layers is %d", r->file,
                       r->path, w.layers, m->layers);
    if (w.period == 0) w.period = m->layers;
    if (w.bad < 0 && w.first_global >= w.period) w.bad = w.first_global;
    if (w.bad < 0 && m->layers % w.period != 0) w.bad = m->layers - 1;
    if (w.bad >= 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.attention_types: Tessera models one global layer in every N "
                       "layers, layer %d breaks the pattern", r->file, r->path, w.bad);
    if (w.first_global < 0) m->window.full_every = 0; /* every layer local */
    else if (w.period == 1) m->window.tokens = 0;     /* every layer global */
    else m->window.full_every = w.period;
    return TS_OK;
}

/* GPT-Neo (transformers GPTNeoConfig, GPTNeoBlock): learned positions, two LayerNorms, Q, K and V
 * without bias and a biased out_proj (counted with the MLP's biases, linear_bias), a biased GELU MLP
 * of intermediate_size (null: 4h), the head tied; global and local attention layers
 * (read_neo_layers). */
ts_status read_gpt_neo(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"hidden_size", "num_layers", "num_heads", "max_position_embeddings", 2048, 1};
    static const hf_rate rates[] = {{"resid_dropout", 0.0}, {"embed_dropout", 0.0}, {"attention_dropout", 0.0}};
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &keys, m));
    TS_CHECK(hf_int(r, root, nm, "ffn_hidden", "intermediate_size", 0, 1, TS_MAX_FFN, 4 * m->hidden, &m->ffn_hidden));
    TS_CHECK(read_dropout(r, root, rates, 3, &m->dropout));
    m->activation = TS_ACT_GELU;
    m->norm = TS_NORM_LAYERNORM;
    m->position = TS_POS_LEARNED;
    m->linear_bias = 1;
    return read_neo_layers(r, root, nm, m);
}

/* MPT's attention (attn_config, MptAttentionConfig's defaults for what it leaves out): Wqkv for
 * multihead_attention, one key/value head for multiquery_attention, kv_n_heads for llm-foundry's
 * grouped_query_attention; ALiBi unless alibi is false, then the learned position table
 * (learned_pos_emb) or rotary; qk_ln adds a LayerNorm over the whole query and key projections
 * (llm-foundry's q_ln, k_ln). */
static ts_status read_mpt_attention(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m,
                                    int *dropout) {
    static const hf_rate rates[] = {{"attn_pdrop", 0.0}};
    const cJSON *attn;
    ts_jreader ar;
    char type[48];
    int alibi, learned, qk_ln;
    TS_CHECK(ts_jr_obj(r, root, "attn_config", 0, &attn));
    ts_jreader_child(r, "attn_config", 0, &ar);
    TS_CHECK(ts_jr_str(&ar, attn, "attn_type", 0, "multihead_attention", type, sizeof type));
    if (strcmp(type, "multiquery_attention") == 0) {
        m->kv_heads = 1;
        hf_name(nm, &ar, "kv_heads", "attn_type");
    } else if (strcmp(type, "grouped_query_attention") == 0) {
        TS_CHECK(hf_i32(&ar, attn, nm, "kv_heads", "kv_n_heads", 0, 1, m->heads, 1, &m->kv_heads));
        if (m->heads % m->kv_heads != 0)
            return TS_FAIL(TS_ERR_INPUT, "%s: %s.kv_n_heads: n_heads %d is not divisible by kv_n_heads %d",
                           r->file, ar.path, m->heads, m->kv_heads);
    } else if (strcmp(type, "multihead_attention") != 0) {
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.attn_type: expected \"multihead_attention\", \"multiquery_attention\" "
                       "or \"grouped_query_attention\", got \"%s\"", r->file, ar.path, type);
    }
    TS_CHECK(read_dropout(&ar, attn, rates, 1, dropout));
    TS_CHECK(hf_bool(&ar, attn, "alibi", 0, 1, &alibi));
    TS_CHECK(hf_bool(&ar, attn, "qk_ln", 0, 0, &qk_ln));
    TS_CHECK(hf_bool(r, root, "learned_pos_emb", 0, 1, &learned));
    m->position = alibi ? TS_POS_ALIBI : learned ? TS_POS_LEARNED : TS_POS_ROPE;
    m->qk_norm = qk_ln ? TS_QKNORM_FULL : TS_QKNORM_NONE;
    return TS_OK;
}

/* MPT (transformers MptConfig, MptBlock; mosaicml/mpt-7b's own modeling_mpt.py): d_model, n_heads,
 * n_layers, max_seq_len; a GELU MLP of expansion_ratio * d_model (up_proj, down_proj); no biases
 * when no_bias (its default), and then LayerNorms with a weight only (norm_1, norm_2, norm_f: "bias
 * = None"); norm_type rmsnorm variants RMSNorm; the head tied to wte. */
ts_status read_mpt(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m) {
    static const hf_keys keys = {"d_model", "n_layers", "n_heads", "max_seq_len", 2048, 1};
    static const hf_rate rates[] = {{"resid_pdrop", 0.0}, {"emb_pdrop", 0.0}};
    double ratio;
    int no_bias, dropout, attn_dropout;
    char norm[48];
    TS_CHECK(read_shape(r, root, nm, &keys, m));
    TS_CHECK(read_head_dim(r, root, nm, &keys, m));
    TS_CHECK(ts_jr_num(r, root, "expansion_ratio", 0, 1e-3, 1e3, 4, &ratio));
    m->ffn_hidden = (int64_t)(ratio * (double)m->hidden);
    hf_name(nm, r, "ffn_hidden", "expansion_ratio");
    if ((double)m->ffn_hidden != ratio * (double)m->hidden)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.expansion_ratio: %g times d_model %lld is not a whole MLP width",
                       r->file, r->path, ratio, (long long)m->hidden);
    TS_CHECK(read_dropout(r, root, rates, 2, &dropout));
    TS_CHECK(read_mpt_attention(r, root, nm, m, &attn_dropout));
    m->dropout = dropout || attn_dropout;
    TS_CHECK(hf_bool(r, root, "no_bias", 0, 1, &no_bias));
    TS_CHECK(ts_jr_str(r, root, "norm_type", 0, "low_precision_layernorm", norm, sizeof norm));
    m->qkv_bias = m->linear_bias = !no_bias;
    m->norm = strstr(norm, "rmsnorm") ? TS_NORM_RMSNORM : TS_NORM_LAYERNORM;
    m->norm_affine = no_bias && m->norm == TS_NORM_LAYERNORM ? TS_NORM_AFFINE_WEIGHT : TS_NORM_AFFINE_FULL;
    m->activation = TS_ACT_GELU;
    return TS_OK;
}
