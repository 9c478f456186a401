/* Reading a Hugging Face transformers config.json into a ts_model.
 *
 * Supported model_type values: the table in hf.c (docs/models.md lists them), and vision-language
 * wrappers whose language model is one of them (in text_config, or at the root for Qwen2-VL). Keys
 * are the ones transformers writes (hidden_size, num_key_value_heads, n_routed_experts, n_embd,
 * ffn_dim, ...), with transformers' class defaults where a diff-saved text_config leaves them out;
 * errors name the Hugging Face key. */
#ifndef TS_MODELS_HF_H
#define TS_MODELS_HF_H

#include <cjson/cJSON.h>

#include "common/status.h"
#include "models/model.h"

/* Fills *out from `root` (a parsed config.json; `file` names it in messages) and validates it.
 * The name is "_name_or_path" when present, else the file's name without ".json". An
 * unsupported model_type is TS_ERR_INPUT listing the supported ones. */
ts_status ts_model_from_hf(const char *file, const cJSON *root, ts_model *out);

#endif
