/* The one-process reference transformer: parameters, forward, backward and AdamW for a ts_model,
 * built from exec/kernels.h with nothing sharded. It is the ground truth the parallel executor is
 * diffed against (same seed, same data: every layout must reproduce its losses and parameters),
 * in the manner of llm.c's train_gpt2.c.
 *
 * The model (Llama-shaped, decoder only): token embedding; per layer
 *   x += attn_out(attention(rope(qkv(rmsnorm(x)))))      GQA, causal, RoPE theta 10000
 *   x += mlp(rmsnorm(x))                                 SwiGLU, or top-k MoE of SwiGLU experts
 * final RMSNorm, LM head (the embedding when tied), mean next-token cross-entropy.
 * Supported: SwiGLU, RMSNorm, RoPE, no biases, no MLA, no shared experts, embed_dim == hidden;
 * ts_ref_init rejects anything else with TS_ERR_INPUT.
 *
 * Parameters are initialised element by element from (seed, tensor, index) with a counter-based
 * generator (ts_ref_init_value), so a sharded executor initialises exactly its slice, bit for bit
 * equal to the reference, without materialising the rest.
 *
 * Memory: ts_ref_init makes a few allocations carved into named views (parameters and gradients
 * in one block, activations in another); ts_ref_free releases all of them. */
#ifndef TS_REFERENCE_H
#define TS_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "models/model.h"

#define TS_REF_ROPE_THETA 10000.0f
#define TS_REF_NORM_EPS 1e-5f
#define TS_REF_INIT_STD 0.02f

/* The parameter tensors. Shapes use C = hidden, Q = heads*head_dim, KV = kv_heads*head_dim,
 * V = vocab, and per layer E experts of width F (a dense layer is E = 1, F = ffn_hidden). */
typedef enum {
    TS_REF_EMBED,      /* (V, C) */
    TS_REF_FINAL_NORM, /* (C) */
    TS_REF_LM_HEAD,    /* (V, C); absent when tied (the embedding serves) */
    TS_REF_ATTN_NORM,  /* (C) per layer */
    TS_REF_QKV,      /* (Q + 2*KV, C): rows of the query heads, then key heads, then value heads */
    TS_REF_ATTN_OUT, /* (C, Q) */
    TS_REF_MLP_NORM, /* (C) */
    TS_REF_ROUTER,   /* (E, C); MoE layers only */
    TS_REF_GATE,     /* (E, F, C) */
    TS_REF_UP,       /* (E, F, C) */
    TS_REF_DOWN,     /* (E, C, F) */
    TS_REF_KIND_COUNT
} ts_ref_kind;
extern const char *const ts_ref_kind_names[]; /* "embed", "qkv", ...; indexed by ts_ref_kind */

typedef struct {
    float *attn_norm, *qkv, *attn_out, *mlp_norm;
    float *router; /* NULL in dense layers */
    float *gate, *up, *down;
} ts_ref_layer;

typedef struct {
    float *embed, *final_norm;
    float *lm_head;      /* == embed when tied */
    ts_ref_layer *layer; /* (layers) */
} ts_ref_params;

/* Activations of one layer for N = batch*seq tokens; R = N (dense) or N*K (MoE) MLP rows. */
typedef struct {
    float *ln1, *ln1_rstd;        /* (N, C), (N) */
    float *qkv;                   /* (N, Q + 2*KV) after rotary */
    float *att, *lse;             /* (N, Q), (N, heads) */
    float *mid;                   /* (N, C) the residual after attention */
    float *ln2, *ln2_rstd;        /* (N, C), (N) */
    float *router_logits, *probs; /* (N, E) each; MoE only */
    float *weight;                /* (N, K); MoE only */
    int *expert, *slot;           /* (N, K); MoE only */
    int *slot_token;              /* (R); MoE only */
    int *offset;                  /* (E + 1); MoE only */
    float *xe, *ye;               /* (R, C) expert inputs and outputs by slot; MoE only */
    float *gate, *up, *act;       /* (R, F) */
    float *out;                   /* (N, C) the residual after the MLP: the next layer's input */
} ts_ref_layer_acts;

typedef struct {
    ts_model model;
    int seq, batch;
    uint64_t seed;
    int experts_max, top_k_max; /* over layers: 1, 1 for a dense model */

    size_t n_params;
    float *param_mem, *grad_mem; /* (n_params) each, tensors in ts_ref_kind order, layer by layer */
    ts_ref_params params, grads;
    float *adam_m, *adam_v; /* (n_params); NULL until the first ts_ref_adamw */

    int *inputs, *targets;     /* (batch, seq) from the last forward */
    int *pos;                  /* (seq) 0, 1, ...: rotary positions and the causal mask */
    float *encoded;            /* (N, C) the embedding output */
    ts_ref_layer_acts *acts;   /* (layers) */
    float *lnf, *lnf_rstd;     /* (N, C), (N) */
    float *logits;             /* (N, V) */
    float *ce_max, *ce_sumexp; /* (N) each: cross-entropy pieces (kernels.h) */
    float *ce_target, *losses; /* (N) each */
    float *attn_scratch;       /* (seq) */
    float *proj;               /* (N, C) */
    /* backward buffers */
    float *dres, *dln;        /* (N, C) */
    float *datt, *dqkv;       /* (N, Q), (N, Q + 2*KV) */
    float *dlogits;           /* (N, V) */
    float *dye, *dxe;         /* (R_max, C) */
    float *dweight, *drouter; /* (N, K_max), (N, E_max) */
    float *mlp_scratch;       /* (2, R_max, F_max) */
    float loss;               /* mean loss of the last forward */

    float *act_mem;
    int *int_mem;
} ts_ref;

/* TS_ERR_INPUT, naming the model and what is missing, for an architecture the reference does not
 * implement or nonpositive sizes; TS_OK otherwise. Allocates nothing (ts_ref_init's first check). */
ts_status ts_ref_check(const ts_model *m, int seq, int batch);

/* Allocates and initialises the reference for `batch` sequences of `seq` tokens. TS_ERR_INPUT for
 * an architecture the reference does not implement or nonpositive sizes, TS_ERR_NOMEM. On failure
 * nothing is left allocated. */
ts_status ts_ref_init(ts_ref *r, const ts_model *m, int seq, int batch, uint64_t seed);
void ts_ref_free(ts_ref *r);

/* The initial value of element `index` (row-major in the shape above) of tensor `kind` of layer
 * `layer` (0 for the model-wide tensors): 1 for the norms, else normal(0, TS_REF_INIT_STD) drawn
 * from splitmix64 of (seed, layer, kind, index). */
float ts_ref_init_value(uint64_t seed, int layer, ts_ref_kind kind, int64_t index);
/* Number of dimensions (1 to 3) and the shape of tensor `kind` of `layer`; 0 when the tensor does
 * not exist (an untied LM head's absence, a dense layer's router). */
int ts_ref_tensor_shape(const ts_model *m, int layer, ts_ref_kind kind, int64_t shape[3]);
/* Where the tensor lives in `p`: the embedding for a tied LM head, NULL for a dense layer's
 * router. */
float *ts_ref_tensor(ts_ref_params *p, int layer, ts_ref_kind kind);

/* Runs the model on tokens (batch, seq + 1): inputs are columns [0, seq), targets [1, seq + 1),
 * all in [0, vocab). Returns the mean cross-entropy over batch*seq predictions. */
float ts_ref_forward(ts_ref *r, const int *tokens);
/* Adds loss_scale * d(mean loss of the last forward)/d(parameters) into r->grads (1 for a single
 * batch, 1/M to accumulate M micro-batches into one step's gradient). */
void ts_ref_backward(ts_ref *r, float loss_scale);
void ts_ref_zero_grad(ts_ref *r);
/* One AdamW step (kernels.h ts_adamw) over every parameter, step counting from 1. Allocates the
 * moments on first use: TS_ERR_NOMEM. */
ts_status ts_ref_adamw(ts_ref *r, float lr, float beta1, float beta2, float eps, float weight_decay,
                       int step);

/* ---- Data ------------------------------------------------------------------------------------ */

/* tokens (batch, seq + 1) for training step `step`: sequence b is an arithmetic progression
 * modulo vocab with a start and a stride in [1, 4] drawn from (seed, step, b), so the next token
 * follows from the previous two and the loss falls within a few steps. */
void ts_synthetic_batch(uint64_t seed, int step, int batch, int seq, int vocab, int *tokens);

/* A text file as a token stream: byte values modulo vocab. */
typedef struct {
    unsigned char *bytes;
    size_t n;
} ts_text_source;

/* Reads the whole file. TS_ERR_IO naming the file, TS_ERR_NOMEM. */
ts_status ts_text_source_init(ts_text_source *src, const char *path);
void ts_text_source_free(ts_text_source *src);
/* tokens (batch, seq + 1): windows of the file at offsets drawn from (seed, step, b).
 * TS_ERR_INPUT when the file is shorter than seq + 1 bytes. */
ts_status ts_text_batch(const ts_text_source *src, uint64_t seed, int step, int batch, int seq,
                        int vocab, int *tokens);

#endif
