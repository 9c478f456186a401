/* What the files of the Hugging Face import (hf.h) share. Not a public surface.
 *
 *   hf.c        the key readers below, the families before these (Solar Open with GLM-4.5), the
 *               model_type table and ts_model_from_hf
 *   hf_more.c   Nemotron, Granite (MoE), Phi-3.5-MoE, DBRX, OLMo, OLMo 3; JetMoE, DiffLlama, Gemma 3n and
 *               LongCat-Flash (refused)
 *   hf_parallel.c  Phi, Falcon, Command R (cohere, cohere2), StableLM and Persimmon
 *   hf_llama_kin.c  ERNIE 4.5 (MoE), Hunyuan (MoE), SmolLM3, DeepSeek v1 MoE, MiniCPM, Seed-OSS,
 *                   InternLM2, GLM-4 (glm, glm4) and CWM: Llama's decoder layer with their own keys
 *   hf_gpt_kin.c    GPT-BigCode, GPT-Neo and MPT: GPT-2's block; CodeGen reads as GPT-J
 *   hf_remote.c     ChatGLM 1-3 / GLM-4 (chatglm), Baichuan, Qwen 1 (qwen), EXAONE 3.x (exaone) and EXAONE 4
 *                   (exaone4): remote-code Chinese and Korean families, mostly Llama's layer renamed
 *   hf_recent.c     MiniMax-M2, Ling (bailing_moe), DeepSeek-V3.2, MiMo, dots.llm1, Arcee, Apertus,
 *                   AFMoE (Trinity), Jais 2, NanoChat and BitNet
 *
 * Every reader takes the reader `r` of the object `root` it reads (its file and JSON path) and
 * records in `nm` which key each of Tessera's fields came from, so that the cross-field rules
 * (ts_model_validate_named) name the file's keys. */
#ifndef TS_MODELS_HF_IMPL_H
#define TS_MODELS_HF_IMPL_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "common/json.h"
#include "common/status.h"
#include "models/model.h"

typedef struct {
    const char *key;
    double def; /* transformers' default when the key is absent */
} hf_rate;

/* The shape every family shares, under that family's key names. */
typedef struct {
    const char *hidden, *layers, *heads, *max_seq;
    int64_t max_seq_def;
    int tied_def;
} hf_keys;

extern const hf_keys llama_keys;         /* hidden_size, num_hidden_layers, ... (4096, untied) */
extern const hf_rate attention_dropout[]; /* {"attention_dropout", 0} */

/* Records that Tessera's `field` (NULL: none) comes from `key` of the object `r` reads. */
void hf_name(ts_field_names *nm, const ts_jreader *r, const char *field, const char *key);
/* An integer key (null or absent: `def` unless required) read into `field`. */
ts_status hf_int(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *field, const char *key,
                 int required, int64_t min, int64_t max, int64_t def, int64_t *out);
ts_status hf_i32(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *field, const char *key,
                 int required, int64_t min, int64_t max, int64_t def, int *out);
/* A boolean key (null or absent: `def` unless required; configs write "tie_word_embeddings": null
 * for unset, as mlx-community's Gemma 3 and Rostlab's ProstT5 do). */
ts_status hf_bool(const ts_jreader *r, const cJSON *root, const char *key, int required, int def, int *out);
/* *out = 1 when any of the `n` dropout rates is positive. */
ts_status read_dropout(const ts_jreader *r, const cJSON *root, const hf_rate *rates, int n, int *out);
/* hidden, layers, heads, vocab_size, max_seq, tie_word_embeddings; kv_heads = heads. */
ts_status read_shape(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_keys *k, ts_model *m);
/* head_dim, else hidden / heads when exact. */
ts_status read_head_dim(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_keys *k, ts_model *m);
/* num_key_value_heads (absent: heads), dividing the heads. */
ts_status read_kv_heads(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* rope_theta of `root` (absent or null: not given). */
ts_status read_rope_theta(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* Llama's shape, GQA, intermediate_size, RoPE, SwiGLU, RMSNorm, attention dropout. */
ts_status read_llama_like(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* read_llama_like with attention_bias and mlp_bias. */
ts_status read_llama(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* Every layer MoE: `experts_key` experts of intermediate_size, num_experts_per_tok a token. */
ts_status read_expert_layers(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *experts_key,
                             ts_model *m);
/* Which layers are global: one every `def_full_every`, unless layer_types lists them (a periodic
 * pattern, whatever its phase; else refused). */
ts_status read_layer_types(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m,
                           int def_full_every);
/* sliding_window (null or absent: none), global every `def_full_every` layers unless layer_types says. */
ts_status read_sliding(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m, int def_full_every);

/* `a` when the object has it (or has neither, so a missing-field message names `a`), else `b`. */
const char *pick(const cJSON *root, const char *a, const char *b);
/* read_shape, read_head_dim, read_kv_heads and a required intermediate_size. */
ts_status read_gqa_shape(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_keys *keys,
                         ts_model *m);
/* GPT-2's and GPT-J's block: the shape under `keys`, head_dim, a GELU MLP of n_inner (null: 4h),
 * LayerNorm, dropout at the three `rates`. */
ts_status read_gpt_block(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_keys *keys,
                         const hf_rate *rates, ts_model *m);

/* OLMo 2 (hf.c): Llama's layer, Q and K normed over the whole projection, attention_bias. */
ts_status read_olmo2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);

/* DeepSeek's experts (hf.c): num_nextn_predict_layers MTP modules, n_routed_experts of
 * moe_intermediate_size and n_shared_experts as many shared ones, dense layers before
 * first_k_dense_replace (every moe_layer_freq-th after), the router (scoring_func, n_group, ...). */
ts_status read_deepseek_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* A family's routed experts (count, top-k, moe_intermediate_size) and shared ones, by its keys and
 * transformers' defaults; `required`: the top-k and width have none (DeepSeek's). The count read
 * 0 (allowed when experts_min is 0) leaves the rest unread: a dense model. */
typedef struct {
    const char *experts, *top_k, *shared;
    int required, experts_min, experts_def, top_k_def, shared_def;
    int64_t ffn_def;
} hf_expert_keys;
ts_status hf_read_experts(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const hf_expert_keys *k,
                          ts_moe *e);
/* DeepSeek-V3 (hf.c): MLA attention and read_deepseek_moe's experts. */
ts_status read_deepseek_v3(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);

/* hf_more.c's families. */
ts_status read_nemotron(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_granitemoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_granitemoeshared(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_granitemoehybrid(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_phimoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_dbrx(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_olmo(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_olmo3(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* JetMoE: refused (its attention is a mixture of experts, which ts_model cannot hold). */
ts_status read_jetmoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* Refused too: DiffLlama (differential attention), Gemma 3n (per-layer embeddings, AltUp, LAuReL,
 * shared K/V) and LongCat-Flash (two attentions a layer, zero-computation experts). */
ts_status read_diffllama(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_gemma3n(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_longcat_flash(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* And Nemotron-NAS (layers of different shapes, block_configs) and DeciLM-7B (key/value heads per layer). */
ts_status read_nemotron_nas(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_deci(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* And Gemma 4 (full-attention layers of their own shape, per-layer embeddings, shared K/V). */
ts_status read_gemma4(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* And MiMo-V2-Flash (values narrower than queries and keys, key/value heads by layer type). */
ts_status read_mimo_v2_flash(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);

/* hf_parallel.c's families. */
ts_status read_phi(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_falcon(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_cohere(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_cohere2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_stablelm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_persimmon(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);

/* hf_llama_kin.c's families. */
ts_status read_ernie4_5(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_ernie4_5_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_hunyuan_dense(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_hunyuan_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_smollm3(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_deepseek_v1(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_minicpm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_seed_oss(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_internlm2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_glm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_glm4(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_cwm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_arctic(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* hf_gpt_kin.c's families. */
/* SantaCoder's attention_head_type on a gpt2 config ("multiquery": one key/value head). */
ts_status read_gpt2_head_type(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_gpt_bigcode(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_gpt_neo(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_mpt(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* hf_remote.c's families. */
ts_status read_chatglm(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_baichuan(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_qwen(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_exaone(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_exaone4(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_exaone_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);

/* hf_recent.c's families. */
ts_status read_minimax_m2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_bailing_moe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_deepseek_v32(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_mimo(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_dots1(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_arcee(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_apertus(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_afmoe(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_jais2(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_nanochat(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_bitnet(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
ts_status read_glm4_moe_lite(const ts_jreader *r, const cJSON *root, ts_field_names *nm, ts_model *m);
/* A "dense" / "sparse" (or false / true) list a layer under `key`: its leading dense layers in
 * *first (-1 when absent); a dense layer after an MoE one is refused. */
ts_status hf_moe_schedule(const ts_jreader *r, const cJSON *root, ts_field_names *nm, const char *key, int layers,
                          int *first);

#endif
