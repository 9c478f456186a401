/* The ranges a model spec's fields must lie in, shared by the loaders (model.c, hf.c) and
 * ts_model_validate.
 *
 * They reject typos and nonsense while admitting absurd-but-meaningful sizes (a 1e15-parameter
 * model loads). They also bound every product that other modules form in 64-bit integers:
 * hidden * ffn <= 2^52, vocab * hidden <= 2^55, max_seq * hidden <= 2^51, and an attention
 * projection's width (heads * head_dim) <= 2^26, so a width fits an int. */
#ifndef TS_MODEL_LIMITS_H
#define TS_MODEL_LIMITS_H

#define TS_MAX_LAYERS 100000
#define TS_MAX_HIDDEN (1LL << 24)
#define TS_MAX_HEADS 65536
#define TS_MAX_HEAD_DIM 65536
#define TS_MAX_ATTN_WIDTH (1LL << 26) /* heads * head_dim, heads * v_dim */
#define TS_MAX_VOCAB (1LL << 31)
#define TS_MAX_FFN (1LL << 28)
#define TS_MAX_SEQ (1LL << 27)
#define TS_MAX_POS_OFFSET 65536
#define TS_MAX_EXPERTS 65536
#define TS_MAX_CAPACITY_FACTOR 1000.0
#define TS_MAX_LOAD_CV 100.0
#define TS_MAX_LORA_RANK (1 << 20)
#define TS_MAX_MTP_LAYERS 64
#define TS_MAX_ROPE_THETA 1e12
#define TS_MAX_NORMS_PER_LAYER 8
#define TS_MAX_SOFTCAP 1e6

#endif
