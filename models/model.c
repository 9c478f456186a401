/* Model specs: loading Tessera's own JSON (Hugging Face config.json is handed to hf.c), writing it
 * back, and the cross-field rules every model must satisfy.
 *
 * Tessera's model JSON (models/llm/NAME.json). Every number may also be written
 * {"value": x, "source": "..."}. Unknown fields are an error, so a typo cannot silently become a
 * default.
 *
 *   field            type     required  default             meaning
 *   name             string   yes                           <= 63 characters
 *   source           string   no        ""                  where the figures come from (<= 255)
 *   notes            string   no                            free text, not loaded
 *   layers           int      yes                           [1, 100000]
 *   hidden           int      yes                           [1, 2^24]
 *   heads            int      yes                           [1, 65536]
 *   kv_heads         int      no        heads               [1, heads], divides heads (1 = MQA)
 *   head_dim         int      no        hidden/heads        [1, 65536]; with "mla":
 *                                                           qk_nope_dim + qk_rope_dim
 *   ffn_hidden       int      yes                           [0, 2^28]; 0 only when every
 *                                                           layer is MoE
 *   vocab            int      yes                           [1, 2^31]
 *   max_seq          int      no        4096                [1, 2^27]
 *   activation       string   no        "swiglu"            "gelu" | "swiglu" | "relu2"
 *   norm             string   no        "rmsnorm"           "rmsnorm" | "layernorm"
 *   position         string   no        "rope"              "rope" | "learned" | "alibi"
 *   position_offset  int      no        0                   extra learned position rows (OPT: 2)
 *   embed_dim        int      no        hidden              word-embedding width; != hidden adds
 *                                                           project_in/out matrices (OPT-350m)
 *   tied_embeddings, qkv_bias, linear_bias, embed_norm, dropout
 *                    bool     no        false
 *   moe              object   no        (dense)
 *     experts        int      yes                           [0, 65536]; 0 = dense
 *     top_k          int      if experts > 0                [1, experts]
 *     expert_ffn     int      no        ffn_hidden          [1, 2^28]
 *     shared_experts int      no        0                   [0, 65536]
 *     shared_ffn     int      no        expert_ffn          [1, 2^28] when shared_experts > 0
 *     first_dense    int      no        0                   [0, layers - 1]
 *     every          int      no        1                   [1, 100000]
 *     capacity_factor number  no        0 (dropless)        [0, 1000]
 *     router         string   no        "softmax"           "softmax" | "sigmoid" (DeepSeek-V3)
 *     router_expert_bias bool no        false               DeepSeek-V3's balancing bias
 *     router_groups, router_group_topk  int  no  0          group-limited routing (8, 4)
 *     router_scale   number   no        0 (= 1)             routed weights' scale (2.5)
 *     pad_to_capacity bool   no        true                with a capacity factor: experts padded to
 *                                                           it (false: the tokens kept, at most it)
 *     load_cv        number  no        0.034 (model.h)     [0, 100]; dropless routing: the
 *                                                           coefficient of variation of tokens
 *                                                           per expert (ts_moe_load_factor);
 *                                                           0: perfectly balanced
 *   mla              object   no        (ordinary attention)
 *     q_lora_rank    int      no        0                   [0, 2^20]; 0: queries straight from h
 *     kv_lora_rank   int      yes                           [1, 2^20]
 *     qk_nope_dim, qk_rope_dim  int yes                     [0, 65536], sum >= 1
 *     v_dim          int      yes                           [1, 65536]
 *     index_heads, index_head_dim  int  no  0               [0, 65536]; DeepSeek-V3.2's indexer
 *   mtp_layers       int      no        0                   [0, 64] (DeepSeek-V3: 1)
 *   rope_theta       number   no        0 (not given)       [0, 1e12] rotary base
 *   qk_norm          string   no        "none"              "none" | "head" | "full" (model.h)
 *   norms_per_layer  int      no        2                   [1, 8] (Gemma 2/3: 4, GPT-J: 1)
 *   window           object   no        (full attention)    local attention (model.h ts_window)
 *     tokens         int      yes                           [1, 2^27] window or chunk length
 *     full_every     int      no        0                   [0, 100000]; layer i is global when
 *                                                           (i + 1) % full_every == 0
 *     chunked        bool     no        false               chunked (Llama 4), else sliding
 *   attn_softcap, logit_softcap  number  no  0 (none)       [0, 1e6] (Gemma 2)
 *   attn_sinks, router_bias, embed_scaled, gelu_gate
 *                    bool     no        false               (gpt-oss, gpt-oss, Gemma, Gemma)
 *   attn_gate        bool     no        false               sigmoid gate on the attention output
 *                                                           (Qwen3-Next, AFMoE); not with "mla"
 *   norm_affine      string   no        "full"              "full" | "weight" | "none": what each
 *                                                           norm learns (model.h; DBRX, OLMo)
 *
 * Example (models/llm/llama2-70b.json):
 *   {"name": "llama2-70b", "source": "...", "layers": 80, "hidden": 8192, "heads": 64,
 *    "kv_heads": 8, "ffn_hidden": 28672, "vocab": 32000, "max_seq": 4096,
 *    "activation": "swiglu", "norm": "rmsnorm", "position": "rope", "tied_embeddings": false} */
#include "models/model.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/paths.h"
#include "models/hf.h"
#include "models/model_limits.h"

const char *const ts_activation_names[] = {"gelu", "swiglu", "relu2", NULL};
const char *const ts_norm_names[] = {"rmsnorm", "layernorm", NULL};
const char *const ts_position_names[] = {"rope", "learned", "alibi", NULL};
const char *const ts_qk_norm_names[] = {"none", "head", "full", NULL};
const char *const ts_norm_affine_names[] = {"full", "weight", "none", NULL};

static const char *const model_keys[] = {
    "name", "source", "notes", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden",
    "vocab", "max_seq", "activation", "norm", "position", "position_offset", "embed_dim",
    "tied_embeddings", "qkv_bias", "linear_bias", "embed_norm", "dropout", "moe", "mla",
    "mtp_layers", "rope_theta", "qk_norm", "norms_per_layer", "window", "attn_softcap",
    "logit_softcap", "attn_sinks", "attn_gate", "router_bias", "embed_scaled", "gelu_gate", "norm_affine", NULL};
static const char *const window_keys[] = {"tokens", "full_every", "chunked", NULL};
static const char *const moe_keys[] = {"experts",     "top_k", "expert_ffn", "shared_experts", "load_cv",
                                       "shared_ffn",  "first_dense", "every",
                                       "capacity_factor", "router", "router_expert_bias",
                                       "router_groups", "router_group_topk", "router_scale",
                                       "pad_to_capacity", NULL};
static const char *const router_names[] = {"softmax", "sigmoid", NULL};
static const char *const mla_keys[] = {"q_lora_rank", "kv_lora_rank", "qk_nope_dim", "qk_rope_dim",
                                       "v_dim", "index_heads", "index_head_dim", NULL};

/* An optional sub-object `key` with only `keys` in it: *obj NULL when absent, else its reader in
 * *r. */
static ts_status open_section(const ts_jreader *parent, const cJSON *root, const char *key,
                              const char *const *keys, const cJSON **obj, ts_jreader *r) {
    TS_CHECK(ts_jr_obj(parent, root, key, 0, obj));
    if (*obj == NULL) return TS_OK;
    ts_jreader_child(parent, key, 0, r);
    return ts_jr_known_keys(r, *obj, keys);
}

static ts_status read_moe(const ts_jreader *parent, const cJSON *root, const ts_model *m,
                          ts_moe *moe) {
    const cJSON *obj;
    ts_jreader r;
    memset(moe, 0, sizeof *moe);
    TS_CHECK(open_section(parent, root, "moe", moe_keys, &obj, &r));
    if (obj == NULL) return TS_OK;
    TS_CHECK(ts_jr_i32(&r, obj, "experts", 1, 0, TS_MAX_EXPERTS, 0, &moe->experts));
    if (moe->experts == 0) return TS_OK; /* dense: the other fields are ignored */
    TS_CHECK(ts_jr_i32(&r, obj, "top_k", 1, 1, moe->experts, 0, &moe->top_k));
    TS_CHECK(ts_jr_int(&r, obj, "expert_ffn", 0, 1, TS_MAX_FFN, m->ffn_hidden, &moe->expert_ffn));
    TS_CHECK(ts_jr_i32(&r, obj, "shared_experts", 0, 0, TS_MAX_EXPERTS, 0, &moe->shared_experts));
    if (moe->shared_experts > 0)
        TS_CHECK(ts_jr_int(&r, obj, "shared_ffn", 0, 1, TS_MAX_FFN, moe->expert_ffn,
                           &moe->shared_ffn));
    TS_CHECK(ts_jr_i32(&r, obj, "first_dense", 0, 0, m->layers - 1, 0, &moe->first_dense));
    TS_CHECK(ts_jr_i32(&r, obj, "every", 0, 1, TS_MAX_LAYERS, 1, &moe->every));
    TS_CHECK(ts_jr_num(&r, obj, "capacity_factor", 0, 0, TS_MAX_CAPACITY_FACTOR, 0,
                       &moe->capacity_factor));
    TS_CHECK(ts_jr_num(&r, obj, "load_cv", 0, 0, TS_MAX_LOAD_CV, TS_MOE_DEFAULT_LOAD_CV, &moe->load_cv));
    int pad;
    TS_CHECK(ts_jr_bool(&r, obj, "pad_to_capacity", 0, 1, &pad));
    moe->capacity_unpadded = !pad;
    TS_CHECK(ts_jr_enum(&r, obj, "router", 0, router_names, 0, &moe->router_sigmoid));
    TS_CHECK(ts_jr_bool(&r, obj, "router_expert_bias", 0, 0, &moe->router_expert_bias));
    TS_CHECK(ts_jr_i32(&r, obj, "router_groups", 0, 0, moe->experts, 0, &moe->router_groups));
    TS_CHECK(ts_jr_i32(&r, obj, "router_group_topk", 0, 0, TS_MAX_EXPERTS, 0, &moe->router_group_topk));
    return ts_jr_num(&r, obj, "router_scale", 0, 0, TS_MAX_SOFTCAP, 0, &moe->router_scale);
}

static ts_status read_mla(const ts_jreader *parent, const cJSON *root, ts_mla *mla) {
    const cJSON *obj;
    ts_jreader r;
    memset(mla, 0, sizeof *mla);
    TS_CHECK(open_section(parent, root, "mla", mla_keys, &obj, &r));
    if (obj == NULL) return TS_OK;
    TS_CHECK(ts_jr_i32(&r, obj, "q_lora_rank", 0, 0, TS_MAX_LORA_RANK, 0, &mla->q_lora_rank));
    TS_CHECK(ts_jr_i32(&r, obj, "kv_lora_rank", 1, 1, TS_MAX_LORA_RANK, 0, &mla->kv_lora_rank));
    TS_CHECK(ts_jr_i32(&r, obj, "qk_nope_dim", 1, 0, TS_MAX_HEAD_DIM, 0, &mla->qk_nope_dim));
    TS_CHECK(ts_jr_i32(&r, obj, "qk_rope_dim", 1, 0, TS_MAX_HEAD_DIM, 0, &mla->qk_rope_dim));
    TS_CHECK(ts_jr_i32(&r, obj, "v_dim", 1, 1, TS_MAX_HEAD_DIM, 0, &mla->v_dim));
    TS_CHECK(ts_jr_i32(&r, obj, "index_heads", 0, 0, TS_MAX_HEADS, 0, &mla->index_heads));
    return ts_jr_i32(&r, obj, "index_head_dim", 0, 0, TS_MAX_HEAD_DIM, 0, &mla->index_head_dim);
}

static ts_status read_window(const ts_jreader *parent, const cJSON *root, ts_window *w) {
    const cJSON *obj;
    ts_jreader r;
    memset(w, 0, sizeof *w);
    TS_CHECK(open_section(parent, root, "window", window_keys, &obj, &r));
    if (obj == NULL) return TS_OK;
    TS_CHECK(ts_jr_int(&r, obj, "tokens", 1, 1, TS_MAX_SEQ, 0, &w->tokens));
    TS_CHECK(ts_jr_i32(&r, obj, "full_every", 0, 0, TS_MAX_LAYERS, 0, &w->full_every));
    return ts_jr_bool(&r, obj, "chunked", 0, 0, &w->chunked);
}

/* The fields issue 19 added for today's families (see the table above); all optional. */
static ts_status read_extras(const ts_jreader *r, const cJSON *root, ts_model *m) {
    TS_CHECK(ts_jr_num(r, root, "rope_theta", 0, 0, TS_MAX_ROPE_THETA, 0, &m->rope_theta));
    TS_CHECK(ts_jr_enum(r, root, "qk_norm", 0, ts_qk_norm_names, TS_QKNORM_NONE, &m->qk_norm));
    TS_CHECK(ts_jr_i32(r, root, "norms_per_layer", 0, 1, TS_MAX_NORMS_PER_LAYER, 2, &m->norms_per_layer));
    if (m->norms_per_layer == 2) m->norms_per_layer = 0; /* the usual two, stored as the default 0 */
    TS_CHECK(read_window(r, root, &m->window));
    TS_CHECK(ts_jr_num(r, root, "attn_softcap", 0, 0, TS_MAX_SOFTCAP, 0, &m->attn_softcap));
    TS_CHECK(ts_jr_num(r, root, "logit_softcap", 0, 0, TS_MAX_SOFTCAP, 0, &m->logit_softcap));
    TS_CHECK(ts_jr_bool(r, root, "attn_sinks", 0, 0, &m->attn_sinks));
    TS_CHECK(ts_jr_bool(r, root, "attn_gate", 0, 0, &m->attn_gate));
    TS_CHECK(ts_jr_bool(r, root, "router_bias", 0, 0, &m->router_bias));
    TS_CHECK(ts_jr_bool(r, root, "embed_scaled", 0, 0, &m->embed_scaled));
    TS_CHECK(ts_jr_enum(r, root, "norm_affine", 0, ts_norm_affine_names, TS_NORM_AFFINE_FULL, &m->norm_affine));
    return ts_jr_bool(r, root, "gelu_gate", 0, 0, &m->gelu_gate);
}

/* head_dim defaults to the query/key width: qk_nope_dim + qk_rope_dim under MLA, else hidden /
 * heads, which must then be exact. */
static ts_status read_head_dim(const ts_jreader *r, const cJSON *root, ts_model *m) {
    int64_t def = m->mla.kv_lora_rank > 0 ? m->mla.qk_nope_dim + m->mla.qk_rope_dim
                                          : m->hidden / m->heads;
    if (cJSON_GetObjectItemCaseSensitive(root, "head_dim") == NULL && m->mla.kv_lora_rank == 0 &&
        m->hidden % m->heads != 0)
        return TS_FAIL(TS_ERR_INPUT,
                       "%s: %s.head_dim: missing field, expected an integer because hidden %lld is "
                       "not divisible by heads %d",
                       r->file, r->path, (long long)m->hidden, m->heads);
    return ts_jr_i32(r, root, "head_dim", 0, 1, TS_MAX_HEAD_DIM, def, &m->head_dim);
}

static ts_status read_own(const char *file, const cJSON *root, ts_model *m) {
    ts_jreader r;
    ts_jreader_root(&r, file);
    TS_CHECK(ts_jr_known_keys(&r, root, model_keys));
    TS_CHECK(ts_jr_str(&r, root, "name", 1, NULL, m->name, sizeof m->name));
    TS_CHECK(ts_jr_str(&r, root, "source", 0, "", m->source, sizeof m->source));
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(root, "notes");
    if (notes != NULL && !cJSON_IsString(notes))
        return TS_FAIL(TS_ERR_INPUT, "%s: $.notes: expected a string, got %s", file,
                       ts_json_type_name(notes));
    TS_CHECK(ts_jr_i32(&r, root, "layers", 1, 1, TS_MAX_LAYERS, 0, &m->layers));
    TS_CHECK(ts_jr_int(&r, root, "hidden", 1, 1, TS_MAX_HIDDEN, 0, &m->hidden));
    TS_CHECK(ts_jr_i32(&r, root, "heads", 1, 1, TS_MAX_HEADS, 0, &m->heads));
    TS_CHECK(ts_jr_i32(&r, root, "kv_heads", 0, 1, m->heads, m->heads, &m->kv_heads));
    TS_CHECK(ts_jr_int(&r, root, "ffn_hidden", 1, 0, TS_MAX_FFN, 0, &m->ffn_hidden));
    TS_CHECK(ts_jr_int(&r, root, "vocab", 1, 1, TS_MAX_VOCAB, 0, &m->vocab));
    TS_CHECK(ts_jr_int(&r, root, "max_seq", 0, 1, TS_MAX_SEQ, 4096, &m->max_seq));
    int e;
    TS_CHECK(ts_jr_enum(&r, root, "activation", 0, ts_activation_names, TS_ACT_SWIGLU, &e));
    m->activation = (ts_activation)e;
    TS_CHECK(ts_jr_enum(&r, root, "norm", 0, ts_norm_names, TS_NORM_RMSNORM, &e));
    m->norm = (ts_norm)e;
    TS_CHECK(ts_jr_enum(&r, root, "position", 0, ts_position_names, TS_POS_ROPE, &e));
    m->position = (ts_position)e;
    TS_CHECK(ts_jr_i32(&r, root, "position_offset", 0, 0, TS_MAX_POS_OFFSET, 0,
                      &m->position_offset));
    TS_CHECK(ts_jr_int(&r, root, "embed_dim", 0, 1, TS_MAX_HIDDEN, m->hidden, &m->embed_dim));
    if (m->embed_dim == m->hidden) m->embed_dim = 0;
    TS_CHECK(ts_jr_bool(&r, root, "tied_embeddings", 0, 0, &m->tied_embeddings));
    TS_CHECK(ts_jr_bool(&r, root, "qkv_bias", 0, 0, &m->qkv_bias));
    TS_CHECK(ts_jr_bool(&r, root, "linear_bias", 0, 0, &m->linear_bias));
    TS_CHECK(ts_jr_bool(&r, root, "embed_norm", 0, 0, &m->embed_norm));
    TS_CHECK(ts_jr_bool(&r, root, "dropout", 0, 0, &m->dropout));
    TS_CHECK(read_mla(&r, root, &m->mla));
    TS_CHECK(read_head_dim(&r, root, m));
    TS_CHECK(read_moe(&r, root, m, &m->moe));
    TS_CHECK(ts_jr_i32(&r, root, "mtp_layers", 0, 0, TS_MAX_MTP_LAYERS, 0, &m->mtp_layers));
    return read_extras(&r, root, m);
}

ts_status ts_model_from_json(const char *file, const cJSON *root, ts_model *out) {
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(root))
        return TS_FAIL(TS_ERR_INPUT, "%s: $: expected an object, got %s", file,
                       ts_json_type_name(root));
    if (cJSON_GetObjectItemCaseSensitive(root, "model_type") != NULL ||
        cJSON_GetObjectItemCaseSensitive(root, "architectures") != NULL)
        return ts_model_from_hf(file, root, out);
    TS_CHECK(read_own(file, root, out));
    return ts_model_validate(file, out);
}

ts_status ts_model_load(const char *name_or_path, ts_model *out) {
    char path[4096];
    TS_CHECK(ts_zoo_resolve("models/llm", name_or_path, path, sizeof path));
    cJSON *root = NULL;
    TS_CHECK(ts_json_load_file(path, &root));
    ts_status res = ts_model_from_json(path, root, out);
    cJSON_Delete(root);
    return res;
}

/* The router fields, written only when set (files of other MoE models stay as they were). */
static ts_status add_router(cJSON *moe, const ts_moe *e) {
    ts_status res = TS_OK;
    if (e->router_sigmoid) TS_CJSON_GOTO(cJSON_AddStringToObject(moe, "router", "sigmoid"), res, fail);
    if (e->router_expert_bias) TS_CJSON_GOTO(cJSON_AddBoolToObject(moe, "router_expert_bias", 1), res, fail);
    if (e->router_groups > 0) {
        TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "router_groups", e->router_groups), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "router_group_topk", e->router_group_topk), res, fail);
    }
    if (e->router_scale > 0) TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "router_scale", e->router_scale), res, fail);
fail:
    return res;
}

/* The issue-19 fields, each written only when it differs from its default, so the files of
 * models without them stay as they were. */
static ts_status add_extras(cJSON *root, const ts_model *m) {
    ts_status res = TS_OK;
    if (m->rope_theta > 0) TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "rope_theta", m->rope_theta), res, fail);
    if (m->qk_norm != TS_QKNORM_NONE)
        TS_CJSON_GOTO(cJSON_AddStringToObject(root, "qk_norm", ts_qk_norm_names[m->qk_norm]), res, fail);
    if (ts_model_norms_per_layer(m) != 2)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "norms_per_layer", m->norms_per_layer), res, fail);
    if (m->window.tokens > 0) {
        cJSON *w = cJSON_AddObjectToObject(root, "window");
        TS_CJSON_GOTO(w, res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(w, "tokens", (double)m->window.tokens), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(w, "full_every", m->window.full_every), res, fail);
        TS_CJSON_GOTO(cJSON_AddBoolToObject(w, "chunked", m->window.chunked), res, fail);
    }
    if (m->attn_softcap > 0)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "attn_softcap", m->attn_softcap), res, fail);
    if (m->logit_softcap > 0)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "logit_softcap", m->logit_softcap), res, fail);
    if (m->attn_sinks) TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "attn_sinks", 1), res, fail);
    if (m->attn_gate) TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "attn_gate", 1), res, fail);
    if (m->router_bias) TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "router_bias", 1), res, fail);
    if (m->embed_scaled) TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "embed_scaled", 1), res, fail);
    if (m->gelu_gate) TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "gelu_gate", 1), res, fail);
    if (m->norm_affine != TS_NORM_AFFINE_FULL)
        TS_CJSON_GOTO(cJSON_AddStringToObject(root, "norm_affine", ts_norm_affine_names[m->norm_affine]), res, fail);
fail:
    return res;
}

static ts_status add_fields(cJSON *root, const ts_model *m) {
    ts_status res = TS_OK;
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "name", m->name), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "source", m->source), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "layers", m->layers), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "hidden", (double)m->hidden), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "heads", m->heads), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "kv_heads", m->kv_heads), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "head_dim", m->head_dim), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "ffn_hidden", (double)m->ffn_hidden), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "vocab", (double)m->vocab), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "max_seq", (double)m->max_seq), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "activation", ts_activation_names[m->activation]),
                  res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "norm", ts_norm_names[m->norm]), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "position", ts_position_names[m->position]), res,
                  fail);
    if (m->position_offset != 0)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "position_offset", m->position_offset), res,
                      fail);
    if (m->embed_dim != 0)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "embed_dim", (double)m->embed_dim), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "tied_embeddings", m->tied_embeddings), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "qkv_bias", m->qkv_bias), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "linear_bias", m->linear_bias), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "embed_norm", m->embed_norm), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(root, "dropout", m->dropout), res, fail);
    if (m->moe.experts > 0) {
        const ts_moe *e = &m->moe;
        cJSON *moe = cJSON_AddObjectToObject(root, "moe");
        TS_CJSON_GOTO(moe, res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "experts", e->experts), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "top_k", e->top_k), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "expert_ffn", (double)e->expert_ffn), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "shared_experts", e->shared_experts), res, fail);
        if (e->shared_experts > 0)
            TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "shared_ffn", (double)e->shared_ffn), res,
                          fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "first_dense", e->first_dense), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "every", e->every), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "capacity_factor", e->capacity_factor), res,
                      fail);
        if (e->load_cv != TS_MOE_DEFAULT_LOAD_CV) /* written only when not the default */
            TS_CJSON_GOTO(cJSON_AddNumberToObject(moe, "load_cv", e->load_cv), res, fail);
        if (e->capacity_unpadded) TS_CJSON_GOTO(cJSON_AddBoolToObject(moe, "pad_to_capacity", 0), res, fail);
        TS_CHECK_GOTO(add_router(moe, e), res, fail);
    }
    if (m->mla.kv_lora_rank > 0) {
        cJSON *mla = cJSON_AddObjectToObject(root, "mla");
        TS_CJSON_GOTO(mla, res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(mla, "q_lora_rank", m->mla.q_lora_rank), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(mla, "kv_lora_rank", m->mla.kv_lora_rank), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(mla, "qk_nope_dim", m->mla.qk_nope_dim), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(mla, "qk_rope_dim", m->mla.qk_rope_dim), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(mla, "v_dim", m->mla.v_dim), res, fail);
        if (m->mla.index_heads > 0) {
            TS_CJSON_GOTO(cJSON_AddNumberToObject(mla, "index_heads", m->mla.index_heads), res, fail);
            TS_CJSON_GOTO(cJSON_AddNumberToObject(mla, "index_head_dim", m->mla.index_head_dim), res, fail);
        }
    }
    if (m->mtp_layers > 0)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "mtp_layers", m->mtp_layers), res, fail);
    res = add_extras(root, m);
fail:
    return res;
}

cJSON *ts_model_to_json(const ts_model *m) {
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) {
        TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing model %s", m->name);
        return NULL;
    }
    if (add_fields(root, m) != TS_OK) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* --- cross-field rules ----------------------------------------------------------------------- */

void ts_field_names_init(ts_field_names *n) { memset(n, 0, sizeof *n); }

void ts_field_names_set(ts_field_names *n, const char *field, const char *key) {
    int i = 0;
    while (i < n->count && strcmp(n->at[i].field, field) != 0) i++;
    if (i == TS_FIELD_NAMES_MAX) return;
    if (i == n->count) n->count++;
    n->at[i].field = field;
    snprintf(n->at[i].key, sizeof n->at[i].key, "%s", key);
}

const char *ts_field_name(const ts_field_names *n, const char *field) {
    for (int i = 0; n != NULL && i < n->count; i++)
        if (strcmp(n->at[i].field, field) == 0) return n->at[i].key;
    return field;
}

/* How a message's text (not its JSON path) calls `field`: the file's key when recorded, else
 * Tessera's field without its section ("top_k" for "moe.top_k"). */
static const char *word(const ts_field_names *n, const char *field) {
    const char *name = ts_field_name(n, field);
    const char *dot = strrchr(name, '.');
    return name == field && dot != NULL ? dot + 1 : name;
}

static ts_status check_range(const char *file, const ts_field_names *n, const char *field, int64_t v,
                             int64_t lo, int64_t hi) {
    if (v >= lo && v <= hi) return TS_OK;
    return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: expected an integer in [%lld, %lld], got %lld", file,
                   ts_field_name(n, field), (long long)lo, (long long)hi, (long long)v);
}

static ts_status check_number(const char *file, const ts_field_names *n, const char *field, double v,
                              double hi) {
    if (v >= 0 && v <= hi) return TS_OK;
    return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: expected a number in [0, %g], got %g", file,
                   ts_field_name(n, field), hi, v);
}

/* heads * `dim` within TS_MAX_ATTN_WIDTH; `what` names dim in the message. */
static ts_status check_width(const char *file, const ts_field_names *n, const char *field, const ts_model *m,
                             int64_t dim, const char *what) {
    int64_t width = (int64_t)m->heads * dim;
    if (width <= TS_MAX_ATTN_WIDTH) return TS_OK;
    return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: %s * %s = %lld is wider than the %lld limit", file,
                   ts_field_name(n, field), word(n, "heads"), what, (long long)width,
                   (long long)TS_MAX_ATTN_WIDTH);
}

static int every_layer_is_moe(const ts_model *m) {
    return m->moe.experts > 0 && m->moe.first_dense == 0 && m->moe.every == 1;
}

/* Group-limited routing as Megatron-Core's TransformerConfig checks it (moe_router_num_groups
 * divides num_moe_experts, moe_router_group_topk in [1, num_groups]) and as the router can pick:
 * top_k experts from the router_group_topk groups kept (DeepSeek-V3 §2.1.2, Hugging Face
 * DeepseekV3's n_group / topk_group). */
static ts_status validate_router_groups(const char *file, const ts_field_names *n, const ts_moe *e) {
    if (e->router_groups == 0 && e->router_group_topk == 0) return TS_OK;
    if (e->router_groups < 1 || e->experts % e->router_groups != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: expected a divisor of %s %d (%s is given), got %d", file,
                       ts_field_name(n, "moe.router_groups"), word(n, "moe.experts"), e->experts,
                       word(n, "moe.router_group_topk"), e->router_groups);
    TS_CHECK(check_range(file, n, "moe.router_group_topk", e->router_group_topk, 1, e->router_groups));
    int64_t reachable = (int64_t)e->router_group_topk * (e->experts / e->router_groups);
    if (e->top_k > reachable)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: expected at most %s × experts per group = %d × %d = %lld, got %d",
                       file, ts_field_name(n, "moe.top_k"), word(n, "moe.router_group_topk"), e->router_group_topk,
                       e->experts / e->router_groups, (long long)reachable, e->top_k);
    return TS_OK;
}

static ts_status validate_moe(const char *file, const ts_field_names *n, const ts_model *m) {
    const ts_moe *e = &m->moe;
    TS_CHECK(check_range(file, n, "moe.experts", e->experts, 0, TS_MAX_EXPERTS));
    if (e->experts == 0) return TS_OK;
    if (e->top_k < 1 || e->top_k > e->experts)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: expected an integer in [1, %d] (%s), got %d", file,
                       ts_field_name(n, "moe.top_k"), e->experts, word(n, "moe.experts"), e->top_k);
    TS_CHECK(check_range(file, n, "moe.expert_ffn", e->expert_ffn, 1, TS_MAX_FFN));
    TS_CHECK(check_range(file, n, "moe.shared_experts", e->shared_experts, 0, TS_MAX_EXPERTS));
    TS_CHECK(check_range(file, n, "moe.shared_ffn", e->shared_ffn, e->shared_experts > 0 ? 1 : 0,
                         TS_MAX_FFN));
    if (e->first_dense < 0 || e->first_dense >= m->layers)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: expected an integer in [0, %d] so that some of the %d layers "
                       "are MoE, got %d", file, ts_field_name(n, "moe.first_dense"), m->layers - 1,
                       m->layers, e->first_dense);
    TS_CHECK(check_range(file, n, "moe.every", e->every, 1, TS_MAX_LAYERS));
    TS_CHECK(validate_router_groups(file, n, e));
    return check_number(file, n, "moe.capacity_factor", e->capacity_factor, TS_MAX_CAPACITY_FACTOR);
}

static ts_status validate_mla(const char *file, const ts_field_names *n, const ts_model *m) {
    const ts_mla *a = &m->mla;
    if (a->kv_lora_rank == 0) {
        if (a->q_lora_rank || a->qk_nope_dim || a->qk_rope_dim || a->v_dim)
            return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: expected an integer >= 1 when other mla fields are set, "
                           "got 0", file, ts_field_name(n, "mla.kv_lora_rank"));
        return TS_OK;
    }
    TS_CHECK(check_range(file, n, "mla.kv_lora_rank", a->kv_lora_rank, 1, TS_MAX_LORA_RANK));
    TS_CHECK(check_range(file, n, "mla.q_lora_rank", a->q_lora_rank, 0, TS_MAX_LORA_RANK));
    TS_CHECK(check_range(file, n, "mla.qk_nope_dim", a->qk_nope_dim, 0, TS_MAX_HEAD_DIM));
    TS_CHECK(check_range(file, n, "mla.qk_rope_dim", a->qk_rope_dim, 0, TS_MAX_HEAD_DIM));
    TS_CHECK(check_range(file, n, "mla.v_dim", a->v_dim, 1, TS_MAX_HEAD_DIM));
    TS_CHECK(check_range(file, n, "mla.index_heads", a->index_heads, 0, TS_MAX_HEADS));
    TS_CHECK(check_range(file, n, "mla.index_head_dim", a->index_head_dim, 0, TS_MAX_HEAD_DIM));
    const char *nope = word(n, "mla.qk_nope_dim"), *rope = word(n, "mla.qk_rope_dim");
    if (a->qk_nope_dim + a->qk_rope_dim < 1)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: %s + %s must be >= 1, got 0", file,
                       ts_field_name(n, "mla.qk_rope_dim"), nope, rope);
    char sum[2 * sizeof n->at[0].key + 8];
    snprintf(sum, sizeof sum, "(%s + %s)", nope, rope);
    TS_CHECK(check_width(file, n, "mla.qk_nope_dim", m, a->qk_nope_dim + a->qk_rope_dim, sum));
    return check_width(file, n, "mla.v_dim", m, a->v_dim, word(n, "mla.v_dim"));
}

static ts_status validate_extras(const char *file, const ts_field_names *n, const ts_model *m) {
    TS_CHECK(check_number(file, n, "rope_theta", m->rope_theta, TS_MAX_ROPE_THETA));
    TS_CHECK(check_range(file, n, "qk_norm", m->qk_norm, 0, TS_QKNORM_COUNT - 1));
    TS_CHECK(check_range(file, n, "norms_per_layer", m->norms_per_layer, 0, TS_MAX_NORMS_PER_LAYER));
    TS_CHECK(check_range(file, n, "window.tokens", m->window.tokens, 0, TS_MAX_SEQ));
    TS_CHECK(check_range(file, n, "window.full_every", m->window.full_every, 0, TS_MAX_LAYERS));
    TS_CHECK(check_number(file, n, "attn_softcap", m->attn_softcap, TS_MAX_SOFTCAP));
    /* Megatron-Core refuses it too ("Output gate is not supported for MLA yet", core_v0.16.1
     * MLATransformerConfig) */
    if (m->attn_gate && m->mla.kv_lora_rank > 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: an attention output gate on multi-head latent attention is not "
                       "modelled", file, ts_field_name(n, "attn_gate"));
    return check_number(file, n, "logit_softcap", m->logit_softcap, TS_MAX_SOFTCAP);
}

/* The shape: sizes, heads, and the enums a reader sets. */
static ts_status validate_shape(const char *file, const ts_field_names *n, const ts_model *m) {
    TS_CHECK(check_range(file, n, "layers", m->layers, 1, TS_MAX_LAYERS));
    TS_CHECK(check_range(file, n, "hidden", m->hidden, 1, TS_MAX_HIDDEN));
    TS_CHECK(check_range(file, n, "heads", m->heads, 1, TS_MAX_HEADS));
    TS_CHECK(check_range(file, n, "kv_heads", m->kv_heads, 1, m->heads));
    if (m->heads % m->kv_heads != 0)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: %d %s are not divisible by %s %d", file,
                       ts_field_name(n, "heads"), m->heads, word(n, "heads"), word(n, "kv_heads"),
                       m->kv_heads);
    TS_CHECK(check_range(file, n, "head_dim", m->head_dim, 1, TS_MAX_HEAD_DIM));
    TS_CHECK(check_width(file, n, "head_dim", m, m->head_dim, word(n, "head_dim")));
    TS_CHECK(check_range(file, n, "ffn_hidden", m->ffn_hidden, 0, TS_MAX_FFN));
    TS_CHECK(check_range(file, n, "vocab", m->vocab, 1, TS_MAX_VOCAB));
    TS_CHECK(check_range(file, n, "max_seq", m->max_seq, 1, TS_MAX_SEQ));
    TS_CHECK(check_range(file, n, "activation", m->activation, 0, TS_ACT_COUNT - 1));
    TS_CHECK(check_range(file, n, "norm", m->norm, 0, TS_NORM_COUNT - 1));
    return check_range(file, n, "position", m->position, 0, TS_POS_COUNT - 1);
}

ts_status ts_model_validate_named(const char *file, const ts_model *m, const ts_field_names *n) {
    if (m->name[0] == '\0')
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: expected a non-empty string, got \"\"", file,
                       ts_field_name(n, "name"));
    TS_CHECK(validate_shape(file, n, m));
    TS_CHECK(check_range(file, n, "position_offset", m->position_offset, 0, TS_MAX_POS_OFFSET));
    if (m->position_offset != 0 && m->position != TS_POS_LEARNED)
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: applies to learned positions only, got %d with position \"%s\"",
                       file, ts_field_name(n, "position_offset"), m->position_offset,
                       ts_position_names[m->position]);
    TS_CHECK(check_range(file, n, "embed_dim", m->embed_dim, 0, TS_MAX_HIDDEN));
    TS_CHECK(check_range(file, n, "mtp_layers", m->mtp_layers, 0, TS_MAX_MTP_LAYERS));
    TS_CHECK(validate_moe(file, n, m));
    TS_CHECK(validate_mla(file, n, m));
    TS_CHECK(validate_extras(file, n, m));
    if (m->ffn_hidden == 0 && !every_layer_is_moe(m))
        return TS_FAIL(TS_ERR_INPUT, "%s: $.%s: expected an integer >= 1 because some layers are dense, got 0",
                       file, ts_field_name(n, "ffn_hidden"));
    return TS_OK;
}

ts_status ts_model_validate(const char *file, const ts_model *m) {
    return ts_model_validate_named(file, m, NULL);
}
