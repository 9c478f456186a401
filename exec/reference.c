/* The single-process reference transformer (reference.h): parameter layout and initialisation,
 * forward, backward, AdamW, and the synthetic and text token sources. Every piece of math is a
 * kernels.h call; this file only wires shapes and buffers, in the order of llm.c's
 * train_gpt2.c. */
#include "exec/reference.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/parallel.h"
#include "exec/kernels.h"

const char *const ts_ref_kind_names[] = {
    "embed",    "final_norm", "lm_head", "attn_norm", "qkv",  "attn_out",
    "mlp_norm", "router",     "gate",    "up",        "down", NULL,
};

/* ---- Counter-based random numbers ------------------------------------------------------------ */
/* splitmix64 (Steele, Lea & Flood 2014) chained over the coordinates: every value is a pure
 * function of (seed, a, b, c), so any subset can be drawn in any order. */

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t hash4(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    return splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b) ^ c);
}

/* Box-Muller on the two 32-bit halves of one hash: u1 in (0, 1], u2 in [0, 1). */
float ts_ref_init_value(uint64_t seed, int layer, ts_ref_kind kind, int64_t index) {
    if (kind == TS_REF_FINAL_NORM || kind == TS_REF_ATTN_NORM || kind == TS_REF_MLP_NORM)
        return 1.0f;
    uint64_t h = hash4(seed, (uint64_t)layer, (uint64_t)kind, (uint64_t)index);
    double u1 = ((double)(h >> 32) + 1.0) / 4294967296.0;
    double u2 = (double)(h & 0xFFFFFFFFu) / 4294967296.0;
    return TS_REF_INIT_STD * (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

/* ---- Parameter layout ------------------------------------------------------------------------ */

/* Experts, experts per token and MLP width of a layer (a dense layer is one expert). */
static void mlp_dims(const ts_model *m, int layer, int *E, int *K, int *F) {
    int moe = ts_model_layer_is_moe(m, layer);
    *E = moe ? m->moe.experts : 1;
    *K = moe ? m->moe.top_k : 1;
    *F = (int)(moe ? m->moe.expert_ffn : m->ffn_hidden);
}

int ts_ref_tensor_shape(const ts_model *m, int layer, ts_ref_kind kind, int64_t shape[3]) {
    int64_t C = m->hidden, Q = (int64_t)m->heads * m->head_dim;
    int64_t KV = (int64_t)m->kv_heads * m->head_dim;
    int E, K, F;
    mlp_dims(m, layer, &E, &K, &F);
    switch (kind) {
    case TS_REF_EMBED: shape[0] = m->vocab, shape[1] = C; return 2;
    case TS_REF_LM_HEAD:
        if (m->tied_embeddings) return 0;
        shape[0] = m->vocab, shape[1] = C;
        return 2;
    case TS_REF_FINAL_NORM:
    case TS_REF_ATTN_NORM:
    case TS_REF_MLP_NORM: shape[0] = C; return 1;
    case TS_REF_QKV: shape[0] = Q + 2 * KV, shape[1] = C; return 2;
    case TS_REF_ATTN_OUT: shape[0] = C, shape[1] = Q; return 2;
    case TS_REF_ROUTER:
        if (!ts_model_layer_is_moe(m, layer)) return 0;
        shape[0] = E, shape[1] = C;
        return 2;
    case TS_REF_GATE:
    case TS_REF_UP: shape[0] = E, shape[1] = F, shape[2] = C; return 3;
    case TS_REF_DOWN: shape[0] = E, shape[1] = C, shape[2] = F; return 3;
    case TS_REF_KIND_COUNT: break;
    }
    return 0;
}

static size_t tensor_numel(const ts_model *m, int layer, ts_ref_kind kind) {
    int64_t shape[3];
    int dims = ts_ref_tensor_shape(m, layer, kind, shape);
    size_t n = dims ? 1 : 0;
    for (int d = 0; d < dims; d++) n *= (size_t)shape[d];
    return n;
}

static float **tensor_slot(ts_ref_params *p, int layer, ts_ref_kind kind) {
    ts_ref_layer *l = &p->layer[layer];
    switch (kind) {
    case TS_REF_EMBED: return &p->embed;
    case TS_REF_FINAL_NORM: return &p->final_norm;
    case TS_REF_LM_HEAD: return &p->lm_head;
    case TS_REF_ATTN_NORM: return &l->attn_norm;
    case TS_REF_QKV: return &l->qkv;
    case TS_REF_ATTN_OUT: return &l->attn_out;
    case TS_REF_MLP_NORM: return &l->mlp_norm;
    case TS_REF_ROUTER: return &l->router;
    case TS_REF_GATE: return &l->gate;
    case TS_REF_UP: return &l->up;
    case TS_REF_DOWN: return &l->down;
    case TS_REF_KIND_COUNT: break;
    }
    return NULL;
}

float *ts_ref_tensor(ts_ref_params *p, int layer, ts_ref_kind kind) {
    return *tensor_slot(p, layer, kind);
}

/* Hands out consecutive views of `base`; with base NULL it only counts, so one function both
 * sizes and carves a block (the two passes cannot disagree). */
typedef struct {
    float *fbase;
    int *ibase;
    size_t fused, iused;
} carver;

static float *take(carver *c, size_t n) {
    float *p = (c->fbase && n) ? c->fbase + c->fused : NULL;
    c->fused += n;
    return p;
}

static int *take_int(carver *c, size_t n) {
    int *p = (c->ibase && n) ? c->ibase + c->iused : NULL;
    c->iused += n;
    return p;
}

/* Global tensors first, then layer by layer, each in ts_ref_kind order. */
static void point_params(carver *c, const ts_model *m, ts_ref_params *p) {
    for (int k = TS_REF_EMBED; k <= TS_REF_LM_HEAD; k++)
        *tensor_slot(p, 0, (ts_ref_kind)k) = take(c, tensor_numel(m, 0, (ts_ref_kind)k));
    if (m->tied_embeddings) p->lm_head = p->embed;
    for (int l = 0; l < m->layers; l++)
        for (int k = TS_REF_ATTN_NORM; k < TS_REF_KIND_COUNT; k++)
            *tensor_slot(p, l, (ts_ref_kind)k) = take(c, tensor_numel(m, l, (ts_ref_kind)k));
}

static void point_acts(carver *c, ts_ref *r) {
    const ts_model *m = &r->model;
    size_t N = (size_t)r->batch * r->seq, C = (size_t)m->hidden, V = (size_t)m->vocab;
    size_t Q = (size_t)m->heads * m->head_dim, QKV = Q + 2 * (size_t)m->kv_heads * m->head_dim;
    size_t rf_max = 0, moe_rows_max = 0;
    r->inputs = take_int(c, N);
    r->targets = take_int(c, N);
    r->pos = take_int(c, (size_t)r->seq);
    r->encoded = take(c, N * C);
    for (int l = 0; l < m->layers; l++) {
        ts_ref_layer_acts *a = &r->acts[l];
        int E, K, F;
        mlp_dims(m, l, &E, &K, &F);
        int moe = ts_model_layer_is_moe(m, l);
        size_t R = N * (size_t)K;
        a->ln1 = take(c, N * C);
        a->ln1_rstd = take(c, N);
        a->qkv = take(c, N * QKV);
        a->att = take(c, N * Q);
        a->lse = take(c, N * (size_t)m->heads);
        a->mid = take(c, N * C);
        a->ln2 = take(c, N * C);
        a->ln2_rstd = take(c, N);
        a->router_logits = take(c, moe ? N * E : 0);
        a->probs = take(c, moe ? N * E : 0);
        a->weight = take(c, moe ? R : 0);
        a->expert = take_int(c, moe ? R : 0);
        a->slot = take_int(c, moe ? R : 0);
        a->slot_token = take_int(c, moe ? R : 0);
        a->offset = take_int(c, moe ? (size_t)E + 1 : 0);
        a->xe = take(c, moe ? R * C : 0);
        a->ye = take(c, moe ? R * C : 0);
        a->gate = take(c, R * F);
        a->up = take(c, R * F);
        a->act = take(c, R * F);
        a->out = take(c, N * C);
        if (R * F > rf_max) rf_max = R * F;
        if (moe && R > moe_rows_max) moe_rows_max = R;
    }
    r->lnf = take(c, N * C);
    r->lnf_rstd = take(c, N);
    r->logits = take(c, N * V);
    r->ce_max = take(c, N);
    r->ce_sumexp = take(c, N);
    r->ce_target = take(c, N);
    r->losses = take(c, N);
    r->attn_scratch = take(c, (size_t)r->seq);
    r->proj = take(c, N * C);
    r->dres = take(c, N * C);
    r->dln = take(c, N * C);
    r->datt = take(c, N * Q);
    r->dqkv = take(c, N * QKV);
    r->dlogits = take(c, N * V);
    r->dye = take(c, moe_rows_max * C);
    r->dxe = take(c, moe_rows_max * C);
    r->dweight = take(c, N * (size_t)r->top_k_max);
    r->drouter = take(c, N * (size_t)r->experts_max);
    r->mlp_scratch = take(c, 2 * rf_max);
}

/* ---- Init / free ----------------------------------------------------------------------------- */

ts_status ts_ref_check(const ts_model *m, int seq, int batch) {
    const char *why = NULL;
    if (m->activation != TS_ACT_SWIGLU)
        why = "activation must be swiglu";
    else if (m->norm != TS_NORM_RMSNORM)
        why = "norm must be rmsnorm";
    else if (m->position != TS_POS_ROPE)
        why = "position must be rope";
    else if (m->qkv_bias || m->linear_bias)
        why = "biases are not supported by the executor";
    else if (m->embed_norm || m->dropout)
        why = "embed_norm and dropout are not supported by the executor";
    else if (m->embed_dim != 0 && m->embed_dim != m->hidden)
        why = "embed_dim must equal hidden";
    else if (m->mla.kv_lora_rank != 0)
        why = "multi-head latent attention is not supported by the executor";
    else if (m->attn_gate)
        why = "the attention output gate is not supported by the executor";
    else if (m->moe.experts > 0 && m->moe.shared_experts > 0)
        why = "shared experts are not supported by the executor";
    else if (m->moe.experts > 0 && m->moe.capacity_factor > 0)
        why = "MoE must be dropless (capacity_factor 0)";
    else if (m->kv_heads <= 0 || m->heads % m->kv_heads != 0)
        why = "heads must be a multiple of kv_heads";
    else if (m->head_dim <= 0 || m->head_dim % 2 != 0)
        why = "head_dim must be even (rotary pairs)";
    else if (m->hidden <= 0 || m->hidden > INT_MAX || m->vocab <= 0 || m->vocab > INT_MAX ||
             m->ffn_hidden > INT_MAX || m->moe.expert_ffn > INT_MAX ||
             (int64_t)(m->heads + 2 * m->kv_heads) * m->head_dim > INT_MAX)
        why = "sizes must fit in int";
    if (why)
        return TS_FAIL(TS_ERR_INPUT, "model %s: the reference cannot run it: %s", m->name, why);
    if (seq <= 0 || batch <= 0)
        return TS_FAIL(TS_ERR_INPUT,
                       "reference: seq and batch must be positive, got seq %d batch %d", seq,
                       batch);
    return TS_OK;
}

typedef struct {
    float *w;
    uint64_t seed;
    int layer;
    ts_ref_kind kind;
} init_fill;

static void init_range(void *ctx, size_t lo, size_t hi) {
    const init_fill *f = ctx;
    for (size_t i = lo; i < hi; i++) f->w[i] = ts_ref_init_value(f->seed, f->layer, f->kind, (int64_t)i);
}

/* A tensor's initial values, split over threads (common/parallel.h): each element its own. */
static void init_tensor(ts_ref *r, int layer, ts_ref_kind kind) {
    init_fill f = {ts_ref_tensor(&r->params, layer, kind), r->seed, layer, kind};
    ts_par_ranges(tensor_numel(&r->model, layer, kind), ts_par_threads(), init_range, &f);
}

ts_status ts_ref_init(ts_ref *r, const ts_model *m, int seq, int batch, uint64_t seed) {
    memset(r, 0, sizeof *r);
    ts_status st = ts_ref_check(m, seq, batch);
    if (st != TS_OK) return st;
    r->model = *m;
    r->seq = seq;
    r->batch = batch;
    r->seed = seed;
    r->experts_max = r->top_k_max = 1;
    for (int l = 0; l < m->layers; l++) {
        int E, K, F;
        mlp_dims(m, l, &E, &K, &F);
        if (E > r->experts_max) r->experts_max = E;
        if (K > r->top_k_max) r->top_k_max = K;
    }

    r->params.layer = calloc(2 * (size_t)m->layers + 1, sizeof *r->params.layer);
    TS_ALLOC_GOTO(r->params.layer, st, fail);
    r->grads.layer = r->params.layer + m->layers;
    carver pc = {0};
    point_params(&pc, m, &r->params);
    r->n_params = pc.fused;
    r->param_mem = malloc(2 * r->n_params * sizeof *r->param_mem);
    TS_ALLOC_GOTO(r->param_mem, st, fail);
    r->grad_mem = r->param_mem + r->n_params;
    pc = (carver){.fbase = r->param_mem};
    point_params(&pc, m, &r->params);
    pc = (carver){.fbase = r->grad_mem};
    point_params(&pc, m, &r->grads);
    ts_ref_zero_grad(r);

    for (int k = TS_REF_EMBED; k <= TS_REF_LM_HEAD; k++) init_tensor(r, 0, (ts_ref_kind)k);
    for (int l = 0; l < m->layers; l++)
        for (int k = TS_REF_ATTN_NORM; k < TS_REF_KIND_COUNT; k++)
            init_tensor(r, l, (ts_ref_kind)k);

    r->acts = calloc((size_t)m->layers + 1, sizeof *r->acts);
    TS_ALLOC_GOTO(r->acts, st, fail);
    carver ac = {0};
    point_acts(&ac, r);
    r->act_mem = malloc(ac.fused * sizeof *r->act_mem);
    TS_ALLOC_GOTO(r->act_mem, st, fail);
    r->int_mem = malloc(ac.iused * sizeof *r->int_mem);
    TS_ALLOC_GOTO(r->int_mem, st, fail);
    ac = (carver){.fbase = r->act_mem, .ibase = r->int_mem};
    point_acts(&ac, r);
    for (int t = 0; t < seq; t++) r->pos[t] = t;
    return TS_OK;

fail:
    ts_ref_free(r);
    return st;
}

void ts_ref_free(ts_ref *r) {
    free(r->params.layer);
    free(r->param_mem);
    free(r->adam_m);
    free(r->acts);
    free(r->act_mem);
    free(r->int_mem);
    memset(r, 0, sizeof *r);
}

void ts_ref_zero_grad(ts_ref *r) { memset(r->grad_mem, 0, r->n_params * sizeof *r->grad_mem); }

/* ---- Forward --------------------------------------------------------------------------------- */

static void add(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void zero(float *p, size_t n) { memset(p, 0, n * sizeof *p); }

static ts_attn_shape attn_shape(const ts_ref *r) {
    const ts_model *m = &r->model;
    int Q = m->heads * m->head_dim, QKV = Q + 2 * m->kv_heads * m->head_dim;
    return (ts_attn_shape){.Tq = r->seq,
                           .Tk = r->seq,
                           .H = m->heads,
                           .KV = m->kv_heads,
                           .D = m->head_dim,
                           .ldq = QKV,
                           .ldk = QKV,
                           .ldv = QKV,
                           .ldo = Q,
                           .q_pos = r->pos,
                           .k_pos = r->pos};
}

float ts_ref_forward(ts_ref *r, const int *tokens) {
    const ts_model *m = &r->model;
    const ts_ref_params *p = &r->params;
    int B = r->batch, T = r->seq, N = B * T, C = (int)m->hidden, V = (int)m->vocab;
    int H = m->heads, KV = m->kv_heads, D = m->head_dim, Q = H * D, QKV = Q + 2 * KV * D;
    ts_attn_shape as = attn_shape(r);

    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            r->inputs[b * T + t] = tokens[b * (T + 1) + t];
            r->targets[b * T + t] = tokens[b * (T + 1) + t + 1];
        }
    }
    ts_embedding_fwd(r->encoded, r->inputs, p->embed, 0, V, N, C);

    const float *x = r->encoded;
    for (int l = 0; l < m->layers; l++) {
        const ts_ref_layer *w = &p->layer[l];
        ts_ref_layer_acts *a = &r->acts[l];
        int E, K, F;
        mlp_dims(m, l, &E, &K, &F);

        ts_rmsnorm_fwd(a->ln1, a->ln1_rstd, x, w->attn_norm, N, C, TS_REF_NORM_EPS);
        ts_linear_fwd(a->qkv, a->ln1, w->qkv, N, C, QKV);
        for (int b = 0; b < B; b++) {
            float *qkv = a->qkv + (size_t)b * T * QKV;
            ts_rope_fwd(qkv, QKV, as.q_pos, T, H + KV, D, TS_REF_ROPE_THETA); /* q and k heads */
            ts_attention_fwd(a->att + (size_t)b * T * Q, a->lse + (size_t)b * T * H, qkv, qkv + Q,
                             qkv + Q + KV * D, &as, r->attn_scratch);
        }
        ts_linear_fwd(r->proj, a->att, w->attn_out, N, Q, C);
        add(a->mid, x, r->proj, (size_t)N * C);

        ts_rmsnorm_fwd(a->ln2, a->ln2_rstd, a->mid, w->mlp_norm, N, C, TS_REF_NORM_EPS);
        if (!ts_model_layer_is_moe(m, l)) {
            ts_mlp_fwd(r->proj, a->gate, a->up, a->act, a->ln2, w->gate, w->up, w->down, N, C, F);
        } else {
            ts_linear_fwd(a->router_logits, a->ln2, w->router, N, C, E);
            ts_router_fwd(a->probs, a->expert, a->weight, a->router_logits, N, E, K, m->moe.router_groups,
                          m->moe.router_group_topk);
            ts_moe_plan(a->offset, a->slot_token, a->slot, a->expert, N, E, K);
            ts_moe_gather_fwd(a->xe, a->ln2, a->slot_token, N * K, C);
            for (int e = 0; e < E; e++) {
                size_t s0 = (size_t)a->offset[e];
                int n = a->offset[e + 1] - a->offset[e];
                if (n == 0) continue;
                ts_mlp_fwd(a->ye + s0 * C, a->gate + s0 * F, a->up + s0 * F, a->act + s0 * F,
                           a->xe + s0 * C, w->gate + (size_t)e * F * C, w->up + (size_t)e * F * C,
                           w->down + (size_t)e * C * F, n, C, F);
            }
            ts_moe_combine_fwd(r->proj, a->ye, a->weight, a->slot, N, K, C);
        }
        add(a->out, a->mid, r->proj, (size_t)N * C);
        x = a->out;
    }

    ts_rmsnorm_fwd(r->lnf, r->lnf_rstd, x, p->final_norm, N, C, TS_REF_NORM_EPS);
    ts_linear_fwd(r->logits, r->lnf, p->lm_head, N, C, V);
    ts_ce_max(r->ce_max, r->logits, N, V);
    ts_ce_sums(r->ce_sumexp, r->ce_target, r->logits, r->ce_max, r->targets, 0, N, V);
    ts_ce_loss(r->losses, r->ce_max, r->ce_sumexp, r->ce_target, N);
    double sum = 0;
    for (int i = 0; i < N; i++) sum += r->losses[i];
    r->loss = (float)(sum / N);
    return r->loss;
}

/* ---- Backward -------------------------------------------------------------------------------- */
/* dres carries d(loss)/d(residual stream) down through the layers; each block's contribution is
 * added by the RMSNorm backward that ends it. */

void ts_ref_backward(ts_ref *r, float loss_scale) {
    const ts_model *m = &r->model;
    const ts_ref_params *p = &r->params;
    ts_ref_params *g = &r->grads;
    int B = r->batch, T = r->seq, N = B * T, C = (int)m->hidden, V = (int)m->vocab;
    int H = m->heads, KV = m->kv_heads, D = m->head_dim, Q = H * D, QKV = Q + 2 * KV * D;
    ts_attn_shape as = attn_shape(r);
    const float *x_last = m->layers ? r->acts[m->layers - 1].out : r->encoded;

    ts_ce_bwd(r->dlogits, r->logits, r->ce_max, r->ce_sumexp, r->targets, 0, N, V,
              loss_scale / (float)N);
    zero(r->dln, (size_t)N * C);
    ts_linear_bwd(r->dln, g->lm_head, r->dlogits, r->lnf, p->lm_head, N, C, V);
    zero(r->dres, (size_t)N * C);
    ts_rmsnorm_bwd(r->dres, g->final_norm, r->dln, x_last, p->final_norm, r->lnf_rstd, N, C);

    for (int l = m->layers - 1; l >= 0; l--) {
        const ts_ref_layer *w = &p->layer[l];
        ts_ref_layer *gw = &g->layer[l];
        const ts_ref_layer_acts *a = &r->acts[l];
        const float *x = l > 0 ? r->acts[l - 1].out : r->encoded;
        int E, K, F;
        mlp_dims(m, l, &E, &K, &F);

        zero(r->dln, (size_t)N * C);
        if (!ts_model_layer_is_moe(m, l)) {
            ts_mlp_bwd(r->dln, gw->gate, gw->up, gw->down, r->dres, a->ln2, a->gate, a->up, a->act,
                       w->gate, w->up, w->down, N, C, F, r->mlp_scratch);
        } else {
            size_t R = (size_t)N * K;
            zero(r->dye, R * C);
            zero(r->dweight, R);
            ts_moe_combine_bwd(r->dye, r->dweight, r->dres, a->ye, a->weight, a->slot, N, K, C);
            zero(r->dxe, R * C);
            for (int e = 0; e < E; e++) {
                size_t s0 = (size_t)a->offset[e];
                int n = a->offset[e + 1] - a->offset[e];
                if (n == 0) continue;
                ts_mlp_bwd(r->dxe + s0 * C, gw->gate + (size_t)e * F * C,
                           gw->up + (size_t)e * F * C, gw->down + (size_t)e * C * F,
                           r->dye + s0 * C, a->xe + s0 * C, a->gate + s0 * F, a->up + s0 * F,
                           a->act + s0 * F, w->gate + (size_t)e * F * C, w->up + (size_t)e * F * C,
                           w->down + (size_t)e * C * F, n, C, F, r->mlp_scratch);
            }
            ts_moe_gather_bwd(r->dln, r->dxe, a->slot_token, (int)R, C);
            zero(r->drouter, (size_t)N * E);
            ts_router_bwd(r->drouter, r->dweight, a->probs, a->expert, N, E, K);
            ts_linear_bwd(r->dln, gw->router, r->drouter, a->ln2, w->router, N, C, E);
        }
        ts_rmsnorm_bwd(r->dres, gw->mlp_norm, r->dln, a->mid, w->mlp_norm, a->ln2_rstd, N, C);

        zero(r->datt, (size_t)N * Q);
        ts_linear_bwd(r->datt, gw->attn_out, r->dres, a->att, w->attn_out, N, Q, C);
        zero(r->dqkv, (size_t)N * QKV);
        for (int b = 0; b < B; b++) {
            const float *qkv = a->qkv + (size_t)b * T * QKV;
            float *dqkv = r->dqkv + (size_t)b * T * QKV;
            ts_attention_bwd(dqkv, dqkv + Q, dqkv + Q + KV * D, r->datt + (size_t)b * T * Q, qkv,
                             qkv + Q, qkv + Q + KV * D, a->att + (size_t)b * T * Q,
                             a->lse + (size_t)b * T * H, &as);
            ts_rope_bwd(dqkv, QKV, as.q_pos, T, H + KV, D, TS_REF_ROPE_THETA);
        }
        zero(r->dln, (size_t)N * C);
        ts_linear_bwd(r->dln, gw->qkv, r->dqkv, a->ln1, w->qkv, N, C, QKV);
        ts_rmsnorm_bwd(r->dres, gw->attn_norm, r->dln, x, w->attn_norm, a->ln1_rstd, N, C);
    }
    ts_embedding_bwd(g->embed, r->dres, r->inputs, 0, V, N, C);
}

/* ---- AdamW ----------------------------------------------------------------------------------- */

ts_status ts_ref_adamw(ts_ref *r, float lr, float beta1, float beta2, float eps, float weight_decay,
                       int step) {
    if (r->adam_m == NULL) {
        r->adam_m = calloc(2 * r->n_params, sizeof *r->adam_m);
        if (r->adam_m == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory: AdamW moments");
        r->adam_v = r->adam_m + r->n_params;
    }
    ts_adamw(r->param_mem, r->adam_m, r->adam_v, r->grad_mem, r->n_params, lr, beta1, beta2, eps,
             weight_decay, step);
    return TS_OK;
}

/* ---- Data ------------------------------------------------------------------------------------ */

void ts_synthetic_batch(uint64_t seed, int step, int batch, int seq, int vocab, int *tokens) {
    for (int b = 0; b < batch; b++) {
        uint64_t h = hash4(seed, (uint64_t)step, (uint64_t)b, 0);
        int64_t start = (int64_t)((h & 0xFFFFFFFFu) % (uint64_t)vocab),
                span = vocab < 64 ? vocab : 64;
        int64_t stride = 1 + (int64_t)((h >> 32) % 4);
        for (int t = 0; t <= seq; t++)
            tokens[(size_t)b * (seq + 1) + t] = (int)((start + stride * t) % span);
    }
}

ts_status ts_text_source_init(ts_text_source *src, const char *path) {
    memset(src, 0, sizeof *src);
    ts_status st = TS_OK;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return TS_FAIL(TS_ERR_IO, "%s: %s", path, strerror(errno));
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        st = TS_FAIL(TS_ERR_IO, "%s: %s", path, strerror(errno));
        goto done;
    }
    src->bytes = malloc((size_t)size + 1);
    TS_ALLOC_GOTO(src->bytes, st, done);
    src->n = fread(src->bytes, 1, (size_t)size, f);
    if (src->n != (size_t)size) st = TS_FAIL(TS_ERR_IO, "%s: short read", path);
done:
    fclose(f);
    if (st != TS_OK) ts_text_source_free(src);
    return st;
}

void ts_text_source_free(ts_text_source *src) {
    free(src->bytes);
    memset(src, 0, sizeof *src);
}

ts_status ts_text_batch(const ts_text_source *src, uint64_t seed, int step, int batch, int seq,
                        int vocab, int *tokens) {
    if (src->n < (size_t)seq + 1)
        return TS_FAIL(TS_ERR_INPUT, "text source: %zu bytes, need at least seq + 1 = %d", src->n,
                       seq + 1);
    size_t windows = src->n - (size_t)seq;
    for (int b = 0; b < batch; b++) {
        size_t off = (size_t)(hash4(seed, (uint64_t)step, (uint64_t)b, 1) % windows);
        for (int t = 0; t <= seq; t++)
            tokens[(size_t)b * (seq + 1) + t] = src->bytes[off + t] % vocab;
    }
    return TS_OK;
}
