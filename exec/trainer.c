/* The trainer: this rank's shard of the model, the data it sees, the step loop over its stage
 * program, data-parallel reduction and the optimizer (see trainer.h). What each op computes is in
 * trainer_ops.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/trainer_impl.h"
#include "exec/watchdog.h"
#include "program/schedule.h"

void ts_train_opts_defaults(ts_train_opts *o) {
    *o = (ts_train_opts){.seed = 1234, .text = NULL, .lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f,
                         .eps = 1e-8f, .weight_decay = 0.1f, .order = TS_ORDER_PROGRAM};
}

void tr_account(ts_trainer *t, double *category_live, double bytes) {
    *category_live += bytes;
    /* The peak of each category, tracked through the offset of the live field. */
    size_t off = (size_t)((char *)category_live - (char *)&t->live);
    double *peak = (double *)((char *)&t->mem + off);
    if (*category_live > *peak) *peak = *category_live;
}

static ts_status alloc_floats(ts_trainer *t, double *category, size_t n, float **out) {
    void *p;
    TS_CHECK(t->be->alloc(n * sizeof(float), &p));
    *out = p;
    tr_account(t, category, (double)n * sizeof(float));
    return TS_OK;
}

/* ---- Shapes and shards ------------------------------------------------------------------- */

static int layer_is_moe(const ts_trainer *t, int global) { return ts_model_layer_is_moe(t->m, global); }

/* Elements of a local layer's non-expert segment and expert segment. */
static size_t shared_size(const ts_trainer *t, int global) {
    size_t C = (size_t)t->C;
    size_t n = C + (size_t)t->QKVr * C + C * t->Qr + C;
    if (layer_is_moe(t, global)) n += (size_t)t->E * C;
    else n += 3 * (size_t)t->Fr * C;
    return n;
}

static size_t expert_size(const ts_trainer *t, int global) {
    return layer_is_moe(t, global) ? 3 * (size_t)t->El * t->Fer * t->C : 0;
}

/* Views of a layer's tensors in its two segments' buffers (either may be NULL). */
static tr_layer layer_views(const ts_trainer *t, int global, float *shared, float *experts) {
    size_t C = (size_t)t->C;
    tr_layer v = {0};
    if (shared) {
        float *p = shared;
        v.attn_norm = p, p += C;
        v.qkv = p, p += (size_t)t->QKVr * C;
        v.attn_out = p, p += C * t->Qr;
        v.mlp_norm = p, p += C;
        if (layer_is_moe(t, global)) {
            v.router = p;
        } else {
            v.gate = p, p += (size_t)t->Fr * C;
            v.up = p, p += (size_t)t->Fr * C;
            v.down = p;
        }
    }
    if (experts && layer_is_moe(t, global)) {
        size_t per = (size_t)t->El * t->Fer * C;
        v.gate = experts;
        v.up = experts + per;
        v.down = experts + 2 * per;
    }
    return v;
}

tr_layer tr_layer_params(const ts_trainer *t, int local) {
    return layer_views(t, t->global_of[local], t->seg[2 * local].param, t->seg[2 * local + 1].param);
}

tr_layer tr_layer_grads(const ts_trainer *t, int local) {
    return layer_views(t, t->global_of[local], t->seg[2 * local].grad, t->seg[2 * local + 1].grad);
}

/* Every element of a local layer's tensors with its index in the full tensor (exec/reference.h
 * layout): the one mapping from this rank's shard to the model, used to initialise parameters
 * and to assemble them again. `replicated` is set for tensors every TP rank holds whole. */
typedef void (*element_fn)(void *ctx, ts_ref_kind kind, int layer, size_t global_index, float *elem,
                           int replicated);

static void map_layer(const ts_trainer *t, int global, tr_layer p, int shared, int experts,
                      element_fn fn, void *ctx) {
    size_t C = (size_t)t->C, D = (size_t)t->D, Q = (size_t)t->H * D, KVD_all = (size_t)t->KV * D;
    if (shared) {
        for (size_t c = 0; c < C; c++) {
            fn(ctx, TS_REF_ATTN_NORM, global, c, &p.attn_norm[c], 1);
            fn(ctx, TS_REF_MLP_NORM, global, c, &p.mlp_norm[c], 1);
        }
        for (int r = 0; r < t->QKVr; r++) {
            size_t grow;
            if (r < t->Qr) grow = (size_t)t->tp_i * t->Qr + (size_t)r;
            else if (r < t->Qr + t->KVD) grow = Q + (size_t)t->tp_i * t->KVD + (size_t)(r - t->Qr);
            else grow = Q + KVD_all + (size_t)t->tp_i * t->KVD + (size_t)(r - t->Qr - t->KVD);
            for (size_t c = 0; c < C; c++) fn(ctx, TS_REF_QKV, global, grow * C + c, &p.qkv[(size_t)r * C + c], 0);
        }
        for (size_t o = 0; o < C; o++)
            for (int q = 0; q < t->Qr; q++)
                fn(ctx, TS_REF_ATTN_OUT, global, o * Q + (size_t)t->tp_i * t->Qr + (size_t)q,
                   &p.attn_out[o * t->Qr + (size_t)q], 0);
        if (p.router)
            for (size_t i = 0; i < (size_t)t->E * C; i++) fn(ctx, TS_REF_ROUTER, global, i, &p.router[i], 1);
    }
    int moe = layer_is_moe(t, global);
    if ((moe && experts) || (!moe && shared)) {
        int El = moe ? t->El : 1, e0 = moe ? t->e0 : 0;
        size_t Fl = moe ? (size_t)t->Fer : (size_t)t->Fr, Fg = moe ? (size_t)t->Fe : (size_t)t->F;
        for (int el = 0; el < El; el++) {
            size_t e = (size_t)(e0 + el);
            for (size_t f = 0; f < Fl; f++) {
                size_t gf = (size_t)t->tp_i * Fl + f;
                for (size_t c = 0; c < C; c++) {
                    size_t li = ((size_t)el * Fl + f) * C + c, gi = (e * Fg + gf) * C + c;
                    fn(ctx, TS_REF_GATE, global, gi, &p.gate[li], 0);
                    fn(ctx, TS_REF_UP, global, gi, &p.up[li], 0);
                }
            }
            for (size_t o = 0; o < C; o++)
                for (size_t f = 0; f < Fl; f++)
                    fn(ctx, TS_REF_DOWN, global, (e * C + o) * Fg + (size_t)t->tp_i * Fl + f,
                       &p.down[((size_t)el * C + o) * Fl + f], 0);
        }
    }
}

/* The embedding or LM head rows of this rank's vocabulary slice. */
static void map_vocab_rows(const ts_trainer *t, float *rows, ts_ref_kind kind, element_fn fn, void *ctx) {
    size_t C = (size_t)t->C;
    for (size_t r = 0; r < (size_t)t->Vr; r++)
        for (size_t c = 0; c < C; c++) fn(ctx, kind, 0, ((size_t)t->v0 + r) * C + c, &rows[r * C + c], 0);
}

/* The head segment: the final norm (replicated) and, untied, the LM head rows. */
static void map_head(const ts_trainer *t, float *seg, element_fn fn, void *ctx) {
    for (int c = 0; c < t->C; c++) fn(ctx, TS_REF_FINAL_NORM, 0, (size_t)c, &seg[c], 1);
    if (!t->m->tied_embeddings) map_vocab_rows(t, seg + t->C, TS_REF_LM_HEAD, fn, ctx);
}

static void init_element(void *ctx, ts_ref_kind kind, int layer, size_t gi, float *elem, int replicated) {
    (void)replicated;
    *elem = ts_ref_init_value(*(const uint64_t *)ctx, layer, kind, (int64_t)gi);
}

/* ---- Segments ---------------------------------------------------------------------------- */

static ts_status segment_init(ts_trainer *t, tr_segment *s, size_t n, int group, int zero) {
    s->n = n;
    s->group = group;
    s->members = ts_comm_size(t->rt->comm[group]);
    s->index = ts_comm_rank(t->rt->comm[group]);
    /* Alone in its group, a segment has nothing to shard (and the program no ops to reduce it). */
    s->zero = s->members == 1 ? 0 : zero;
    zero = s->zero;
    s->part = (n + (size_t)s->members - 1) / (size_t)s->members;
    size_t padded = s->part * (size_t)s->members;
    if (n == 0) return TS_OK;
    if (zero >= 3) TS_CHECK(alloc_floats(t, &t->live.weights, s->part, &s->param_shard));
    else TS_CHECK(alloc_floats(t, &t->live.weights, padded, &s->param));
    if (zero <= 1) {
        TS_CHECK(alloc_floats(t, &t->live.grads, padded, &s->grad));
        s->owns_grad = 1;
    }
    /* ZeRO-1 reduce-scatters in place: the shard is the start of the gradient buffer, as
     * Megatron's distributed optimizer reuses its gradient buffer. */
    if (zero == 1) s->grad_shard = s->grad;
    if (zero >= 2) TS_CHECK(alloc_floats(t, &t->live.grads, s->part, &s->grad_shard));
    size_t state = zero >= 1 ? s->part : n;
    TS_CHECK(alloc_floats(t, &t->live.optimizer, state, &s->adam_m));
    TS_CHECK(alloc_floats(t, &t->live.optimizer, state, &s->adam_v));
    return TS_OK;
}

static void segment_free(const ts_trainer *t, tr_segment *s) {
    t->be->free(s->param);
    if (s->owns_grad) t->be->free(s->grad);
    t->be->free(s->param_shard);
    if (s->grad_shard != s->grad) t->be->free(s->grad_shard);
    t->be->free(s->adam_m);
    t->be->free(s->adam_v);
}

/* Initial values are written on the host from the full layout, then copied into the segments'
 * backend memory (ZeRO-3: each member its shard only; a segment alone in its group, zero forced
 * to 0, keeps its parameters whole). */
static ts_status init_layer(ts_trainer *t, int j) {
    ts_status res = TS_OK;
    int g = t->global_of[j];
    tr_segment *sh = &t->seg[2 * j], *ex = &t->seg[2 * j + 1];
    float *full_sh = calloc(sh->part * sh->members + 1, sizeof(float));
    float *full_ex = calloc(ex->part * ex->members + 1, sizeof(float));
    if (!full_sh || !full_ex) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory initialising layer %d", g);
        goto exit;
    }
    map_layer(t, g, layer_views(t, g, full_sh, full_ex), 1, 1, init_element, &t->opts.seed);
    tr_segment *both[2] = {sh, ex};
    float *full[2] = {full_sh, full_ex};
    for (int k = 0; k < 2; k++) {
        tr_segment *s = both[k];
        if (s->n == 0) continue;
        if (s->zero >= 3)
            TS_CHECK_GOTO(t->k->to_device(s->param_shard, full[k] + s->index * s->part, s->part * sizeof(float)),
                          res, exit);
        else
            TS_CHECK_GOTO(t->k->to_device(s->param, full[k], s->n * sizeof(float)), res, exit);
    }
exit:
    free(full_sh);
    free(full_ex);
    return res;
}

/* The embedding (head = 0) or the head segment (ZeRO-1 at most: parameters whole). */
static ts_status init_edge(ts_trainer *t, tr_segment *s, int head) {
    float *host = calloc(s->n, sizeof(float));
    if (host == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory initialising the %s", head ? "head" : "embedding");
    if (head) map_head(t, host, init_element, &t->opts.seed);
    else map_vocab_rows(t, host, TS_REF_EMBED, init_element, &t->opts.seed);
    ts_status st = t->k->to_device(s->param, host, s->n * sizeof(float));
    free(host);
    return st;
}

/* ---- Set-up ------------------------------------------------------------------------------ */

ts_status ts_trainer_check(const ts_problem *pb, const ts_layout *l) {
    const ts_model *m = &pb->model;
    ts_ref probe;
    /* The reference rejects what it does not implement; reuse its checks on a 1-token probe. */
    ts_status st = ts_ref_init(&probe, m, 1, 1, 1);
    if (st != TS_OK) return st;
    ts_ref_free(&probe);
    if (m->tied_embeddings && l->pp > 1)
        return TS_FAIL(TS_ERR_INPUT, "the executor does not share tied embeddings across pipeline stages "
                                     "(%s is tied; use pp=1 or an untied model)", m->name);
    if (m->kv_heads % l->tp != 0)
        return TS_FAIL(TS_ERR_INPUT, "the executor needs tp=%d to divide %d kv heads", l->tp, m->kv_heads);
    if (m->vocab % l->tp != 0)
        return TS_FAIL(TS_ERR_INPUT, "the executor needs tp=%d to divide the vocabulary %lld", l->tp,
                       (long long)m->vocab);
    /* ZeRO-2/3 reduce each layer's gradients as its backward ends, and its shared one-layer
     * gradient buffer would mix the norms' gradients of one layer's B with another's W. */
    if (ts_schedules[l->schedule].splits_w && l->zero >= 2)
        return TS_FAIL(TS_ERR_INPUT, "the executor runs ZB-H1 only with zero <= 1 (got zero=%d)", l->zero);
    if (m->mtp_layers > 0) return TS_FAIL(TS_ERR_INPUT, "the executor does not run MTP modules");
    long long T = (long long)l->mbs * pb->train.seq / l->cp;
    if (pb->train.seq % (2 * l->cp) != 0 || (l->sp && T % l->tp != 0))
        return TS_FAIL(TS_ERR_INPUT, "the executor needs seq divisible by 2·cp and, under SP, the "
                                     "%lld tokens of a micro-batch divisible by tp", T);
    return TS_OK;
}

/* Token rows of this rank: its replica's sequences, and under CP its two load-balanced chunks of
 * each (chunks cp_i and 2·cp-1-cp_i of 2·cp, Megatron's causal balancing). */
static void positions_of(int cp, int cp_i, int Ts, int *pos) {
    int half = Ts / 2;
    for (int i = 0; i < half; i++) {
        pos[i] = cp_i * half + i;
        pos[half + i] = (2 * cp - 1 - cp_i) * half + i;
    }
}

static ts_status init_data(ts_trainer *t) {
    size_t mT = (size_t)t->m_mb * t->T;
    t->tokens = malloc((size_t)t->B * (t->seq + 1) * sizeof *t->tokens);
    t->inputs = malloc(mT * sizeof *t->inputs);
    t->targets = malloc(mT * sizeof *t->targets);
    t->pos = malloc(mT * sizeof *t->pos);
    t->kv_pos = malloc((size_t)t->cp * t->Ts * sizeof *t->kv_pos);
    if (!t->tokens || !t->inputs || !t->targets || !t->pos || !t->kv_pos)
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for the token buffers");
    int *one = malloc((size_t)t->Ts * sizeof *one);
    if (!one) return TS_FAIL(TS_ERR_NOMEM, "out of memory for positions");
    for (int r = 0; r < t->cp; r++) {
        if (t->cp == 1) {
            for (int i = 0; i < t->Ts; i++) one[i] = i;
        } else {
            positions_of(t->cp, r, t->Ts, one);
        }
        memcpy(t->kv_pos + (size_t)r * t->Ts, one, (size_t)t->Ts * sizeof *one);
    }
    for (int mb = 0; mb < t->m_mb; mb++)
        for (int b = 0; b < t->mbs; b++)
            memcpy(t->pos + (size_t)mb * t->T + (size_t)b * t->Ts, t->kv_pos + (size_t)t->cp_i * t->Ts,
                   (size_t)t->Ts * sizeof *one);
    free(one);
    /* What the kernels read, in backend memory: positions once, tokens per step (load_batch). */
    const ts_backend *be = t->be;
    size_t kvn = (size_t)t->cp * t->Ts, TK = (size_t)t->T * (t->K > 0 ? t->K : 1);
    TS_CHECK(be->alloc(mT * sizeof(int), (void **)&t->dev_inputs));
    TS_CHECK(be->alloc(mT * sizeof(int), (void **)&t->dev_targets));
    TS_CHECK(be->alloc(mT * sizeof(int), (void **)&t->dev_pos));
    TS_CHECK(be->alloc(kvn * sizeof(int), (void **)&t->dev_kv_pos));
    TS_CHECK(be->alloc(sizeof(float), (void **)&t->loss_buf));
    TS_CHECK(t->k->to_device(t->dev_pos, t->pos, mT * sizeof(int)));
    TS_CHECK(t->k->to_device(t->dev_kv_pos, t->kv_pos, kvn * sizeof(int)));
    t->host_expert = malloc(TK * sizeof(int));
    t->host_slot = malloc(TK * sizeof(int));
    t->host_slot_token = malloc(TK * sizeof(int));
    t->host_loss = malloc((size_t)t->T * sizeof(float) + 1);
    if (!t->host_expert || !t->host_slot || !t->host_slot_token || !t->host_loss)
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for the host's routing and loss buffers");
    return TS_OK;
}

/* This step's tokens: the global batch from the data source, then this rank's rows. */
static ts_status load_batch(ts_trainer *t, int step) {
    if (t->opts.text) {
        ts_text_source src;
        TS_CHECK(ts_text_source_init(&src, t->opts.text));
        ts_status st = ts_text_batch(&src, t->opts.seed, step, t->B, t->seq, t->V, t->tokens);
        ts_text_source_free(&src);
        TS_CHECK(st);
    } else {
        ts_synthetic_batch(t->opts.seed, step, t->B, t->seq, t->V, t->tokens);
    }
    int per_replica = t->B / t->l->dp;
    for (int mb = 0; mb < t->m_mb; mb++)
        for (int b = 0; b < t->mbs; b++) {
            const int *row = t->tokens + (size_t)(t->dp_i * per_replica + mb * t->mbs + b) * (t->seq + 1);
            for (int i = 0; i < t->Ts; i++) {
                size_t k = (size_t)mb * t->T + (size_t)b * t->Ts + (size_t)i;
                int p = t->pos[k];
                t->inputs[k] = row[p];
                t->targets[k] = row[p + 1];
            }
        }
    size_t bytes = (size_t)t->m_mb * t->T * sizeof(int);
    TS_CHECK(t->k->to_device(t->dev_inputs, t->inputs, bytes));
    return t->k->to_device(t->dev_targets, t->targets, bytes);
}

static ts_status alloc_scratch(ts_trainer *t) {
    size_t T = (size_t)t->T, C = (size_t)t->C, ep = (size_t)t->l->ep;
    size_t TK = T * (size_t)(t->K > 0 ? t->K : 1), R = t->K > 0 ? TK * ep : T; /* rows an expert set gets */
    size_t Fmax = (size_t)(t->Fr > t->Fer ? t->Fr : t->Fer), rows = R > T ? R : T;
    size_t ring = t->cp > 1 ? T * 4 * t->KVD : 0, Ts = t->cp > 1 ? (size_t)t->Ts : 0;
    float **bufs[] = {&t->cur, &t->dcur, &t->dmid, &t->dfull, &t->dln, &t->proj, &t->rows, &t->datt,
                      &t->dqkv, &t->ring[0], &t->ring[1], &t->ring_out, &t->ring_lse, &t->dact, &t->dgate,
                      &t->dup, &t->dxe, &t->dye, &t->dxr, &t->dyr, &t->dweight, &t->dlogits_r, &t->dlogits,
                      &t->scratch, &t->norm_grad};
    size_t sizes[] = {T * C, T * C, T * C, T * C, T * C, T * C, T * C, T * t->Qr, T * t->QKVr, ring, ring,
                      Ts * t->Qr, Ts * t->Hr, rows * Fmax, rows * Fmax, rows * Fmax, TK * C, TK * C, rows * C,
                      rows * C, TK, T * (size_t)(t->E > 0 ? t->E : 1), T * t->Vr, T, C};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        TS_CHECK(alloc_floats(t, &t->live.buffers, sizes[i] ? sizes[i] : 1, bufs[i]));
    size_t counts = ep * (size_t)(t->El > 0 ? t->El : 1);
    t->ep_counts = calloc(counts, sizeof(int));
    t->a2a = calloc(4 * ep, sizeof(int));
    if (!t->ep_counts || !t->a2a) return TS_FAIL(TS_ERR_NOMEM, "out of memory for all-to-all counts");
    return TS_OK;
}

ts_status ts_trainer_init(ts_trainer **out, const ts_problem *pb, const ts_program *prog,
                          const ts_runtime *rt, const ts_backend *be, const ts_train_opts *opts) {
    *out = NULL;
    const ts_layout *l = &prog->layout;
    TS_CHECK(ts_trainer_check(pb, l));
    ts_status res = TS_OK;
    ts_trainer *t = calloc(1, sizeof *t);
    TS_ALLOC_GOTO(t, res, fail);
    const ts_model *m = &pb->model;
    *t = (ts_trainer){.pb = pb, .prog = prog, .rt = rt, .be = be, .k = be->kernels, .opts = *opts, .m = m, .l = l};
    t->stage = rt->coords.pp;
    t->tp_i = rt->coords.tp;
    t->cp_i = rt->coords.cp;
    t->dp_i = rt->coords.dp;
    t->ep_i = ts_comm_rank(rt->comm[TS_GROUP_EP]);
    t->C = (int)m->hidden;
    t->V = (int)m->vocab;
    t->Vr = t->V / l->tp;
    t->v0 = t->tp_i * t->Vr;
    t->H = m->heads;
    t->KV = m->kv_heads;
    t->D = m->head_dim;
    t->Hr = t->H / l->tp;
    t->KVr = t->KV / l->tp;
    t->Qr = t->Hr * t->D;
    t->KVD = t->KVr * t->D;
    t->QKVr = t->Qr + 2 * t->KVD;
    t->F = (int)m->ffn_hidden;
    t->Fr = t->F / l->tp;
    t->E = m->moe.experts;
    t->El = t->E ? t->E / l->ep : 0;
    t->e0 = t->ep_i * t->El;
    t->K = t->E ? m->moe.top_k : 0;
    t->Fe = (int)m->moe.expert_ffn;
    t->Fer = t->E ? t->Fe / l->tp : 0;
    t->seq = (int)pb->train.seq;
    t->cp = l->cp;
    t->Ts = t->seq / l->cp;
    t->mbs = l->mbs;
    t->B = (int)pb->train.global_batch;
    t->T = t->mbs * t->Ts;
    t->Tl = l->sp ? t->T / l->tp : t->T;
    t->m_mb = l->microbatches;
    t->split_w = ts_schedules[l->schedule].splits_w;

    /* Layers of this stage: the global layers of every chunk it runs. */
    int L = m->layers;
    t->global_of = calloc((size_t)L, sizeof *t->global_of);
    t->local_of = malloc((size_t)L * sizeof *t->local_of);
    TS_ALLOC_GOTO(t->global_of, res, fail);
    TS_ALLOC_GOTO(t->local_of, res, fail);
    for (int j = 0; j < L; j++) t->local_of[j] = -1;
    const ts_stage_program *sp = &prog->stages[t->stage];
    for (int i = 0; i < sp->n_ops; i++) {
        int j = sp->ops[i].layer;
        if (j >= 0 && j < L && t->local_of[j] < 0) t->local_of[j] = 0;
    }
    for (int j = 0; j < L; j++)
        if (t->local_of[j] == 0) {
            t->local_of[j] = t->n_local;
            t->global_of[t->n_local++] = j;
        }

    /* Parameters: two segments per layer, then the embedding (stage 0) and the head (last). */
    int zero = l->zero;
    t->n_seg = 2 * t->n_local + 2;
    t->seg = calloc((size_t)t->n_seg, sizeof *t->seg);
    TS_ALLOC_GOTO(t->seg, res, fail);
    size_t biggest = 0;
    for (int j = 0; j < t->n_local; j++) {
        int g = t->global_of[j];
        TS_CHECK_GOTO(segment_init(t, &t->seg[2 * j], shared_size(t, g), TS_GROUP_DPCP, zero), res, fail);
        TS_CHECK_GOTO(segment_init(t, &t->seg[2 * j + 1], expert_size(t, g), TS_GROUP_EDP, zero), res, fail);
        size_t both = t->seg[2 * j].part * t->seg[2 * j].members + t->seg[2 * j + 1].part * t->seg[2 * j + 1].members;
        if (both > biggest) biggest = both;
    }
    /* The embedding and head keep whole gradients (ZeRO-1 at most): no per-micro-batch ops
     * reduce them in the program. */
    int edge_zero = zero > 1 ? 1 : zero;
    t->seg_embed = t->seg_head = -1;
    if (t->stage == 0) {
        t->seg_embed = 2 * t->n_local;
        TS_CHECK_GOTO(segment_init(t, &t->seg[t->seg_embed], (size_t)t->Vr * t->C, TS_GROUP_DPCP, edge_zero),
                      res, fail);
    }
    if (t->stage == l->pp - 1) {
        t->seg_head = 2 * t->n_local + 1;
        size_t n = (size_t)t->C + (m->tied_embeddings ? 0 : (size_t)t->Vr * t->C);
        TS_CHECK_GOTO(segment_init(t, &t->seg[t->seg_head], n, TS_GROUP_DPCP, edge_zero), res, fail);
    }
    if (zero >= 2 && biggest) {
        for (int b = 0; b < 2 && b < t->n_local; b++)
            TS_CHECK_GOTO(alloc_floats(t, &t->live.grads, biggest, &t->grad_layer[b]), res, fail);
        for (int j = 0; j < t->n_local; j++) {
            tr_segment *sh = &t->seg[2 * j], *ex = &t->seg[2 * j + 1];
            if (sh->zero >= 2) sh->grad = t->grad_layer[j % 2];
            if (ex->zero >= 2) ex->grad = t->grad_layer[j % 2] + sh->part * sh->members;
        }
    }
    for (int j = 0; j < t->n_local; j++) TS_CHECK_GOTO(init_layer(t, j), res, fail);
    if (t->seg_embed >= 0) TS_CHECK_GOTO(init_edge(t, &t->seg[t->seg_embed], 0), res, fail);
    if (t->seg_head >= 0) TS_CHECK_GOTO(init_edge(t, &t->seg[t->seg_head], 1), res, fail);

    /* Chunk bounds, from the forward ops of the program. */
    int v = l->vpp;
    t->chunk_lo = malloc((size_t)v * sizeof(int));
    t->chunk_hi = calloc((size_t)v, sizeof(int));
    t->grad_buffer = malloc((size_t)t->n_seg * sizeof *t->grad_buffer);
    if (!t->chunk_lo || !t->chunk_hi || !t->grad_buffer) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory for chunk bounds");
        goto fail;
    }
    for (int c = 0; c < v; c++) t->chunk_lo[c] = L;
    for (int i = 0; i < sp->n_ops; i++) {
        const ts_op *op = &sp->ops[i];
        if (op->phase != TS_PHASE_FWD || op->layer < 0) continue;
        if (op->layer < t->chunk_lo[op->chunk]) t->chunk_lo[op->chunk] = op->layer;
        if (op->layer + 1 > t->chunk_hi[op->chunk]) t->chunk_hi[op->chunk] = op->layer + 1;
    }
    for (int i = 0; i < t->n_seg; i++) { /* layer segments under ZeRO-2/3: grad_layer[j % 2] */
        int layered = i < 2 * t->n_local && t->grad_layer[0] && t->seg[i].zero >= 2;
        t->grad_buffer[i] = (int8_t)(layered ? i / 2 % 2 : -1);
    }
    ts_seg_map map = {.layers = L, .local_of = t->local_of, .n_local = t->n_local,
                      .seg_embed = t->seg_embed, .seg_head = t->seg_head,
                      .head_uses_embed = m->tied_embeddings, .vpp = v, .chunk_lo = t->chunk_lo,
                      .chunk_hi = t->chunk_hi, .grad_buffer = t->grad_buffer};
    TS_CHECK_GOTO(ts_op_streams_init(&t->streams, sp, &map, t->opts.order), res, fail);
    TS_CHECK_GOTO(be->clock_init(sp->n_ops, &t->clock), res, fail);
    size_t max_part = 1;
    for (int i = 0; i < t->n_seg; i++)
        if (t->seg[i].part > max_part) max_part = t->seg[i].part;
    TS_CHECK_GOTO(alloc_floats(t, &t->live.buffers, max_part, &t->shard_tmp), res, fail);

    t->acts = calloc((size_t)(t->n_local + 1), sizeof *t->acts);
    TS_ALLOC_GOTO(t->acts, res, fail);
    for (int j = 0; j <= t->n_local; j++) {
        t->acts[j] = calloc((size_t)t->m_mb, sizeof **t->acts);
        TS_ALLOC_GOTO(t->acts[j], res, fail);
    }
    TS_CHECK_GOTO(alloc_scratch(t), res, fail);
    TS_CHECK_GOTO(init_data(t), res, fail);
    *out = t;
    return TS_OK;
fail:
    ts_trainer_free(t);
    return res;
}

void ts_trainer_free(ts_trainer *t) {
    if (t == NULL) return;
    for (int i = 0; t->seg && i < t->n_seg; i++) segment_free(t, &t->seg[i]);
    t->be->free(t->grad_layer[0]);
    t->be->free(t->grad_layer[1]);
    for (int j = 0; t->acts && j <= t->n_local; j++) {
        for (int mb = 0; mb < t->m_mb && t->acts[j]; mb++) tr_acts_release(t, j, mb);
        free(t->acts[j]);
    }
    free(t->acts);
    if (t->ring_send) t->be->wait(t->ring_send); /* a step that failed between its ring ops */
    float *bufs[] = {t->cur, t->dcur, t->dmid, t->dfull, t->dln, t->proj, t->rows, t->datt, t->dqkv,
                     t->ring[0], t->ring[1], t->ring_out, t->ring_lse, t->dact, t->dgate, t->dup, t->dxe,
                     t->dye, t->dxr, t->dyr, t->dweight, t->dlogits_r, t->dlogits, t->scratch, t->norm_grad};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) t->be->free(bufs[i]);
    free(t->ep_counts);
    free(t->a2a);
    for (int i = 0; i < t->n_wgrad; i++) {
        for (int k = 0; k < t->wgrad[i].n; k++) t->be->free(t->wgrad[i].w[k].dout);
        free(t->wgrad[i].w);
    }
    free(t->wgrad);
    for (int i = 0; i < t->n_sends; i++) {
        t->be->wait(t->sends[i]);
        t->be->free(t->send_bufs[i]);
    }
    free(t->sends);
    free(t->send_bufs);
    t->be->free(t->shard_tmp);
    free(t->chunk_lo);
    free(t->chunk_hi);
    free(t->grad_buffer);
    ts_op_streams_free(&t->streams);
    t->be->clock_free(t->clock);
    free(t->seg);
    free(t->global_of);
    free(t->local_of);
    free(t->tokens);
    free(t->inputs);
    free(t->targets);
    free(t->pos);
    free(t->kv_pos);
    int *dev_ints[] = {t->dev_inputs, t->dev_targets, t->dev_pos, t->dev_kv_pos};
    for (size_t i = 0; i < sizeof dev_ints / sizeof dev_ints[0]; i++) t->be->free(dev_ints[i]);
    t->be->free(t->loss_buf);
    free(t->host_expert);
    free(t->host_slot);
    free(t->host_slot_token);
    free(t->host_loss);
    free(t);
}

/* ---- Activations ------------------------------------------------------------------------- */

/* One backend allocation per (layer, micro-batch), carved into the tensors the layer keeps; the
 * MoE counts the host plans with follow the struct in host memory. */
ts_status tr_acts_get(ts_trainer *t, int local, int mb, tr_acts **out) {
    tr_acts **slot = &t->acts[local][mb];
    if (*slot) {
        *out = *slot;
        return TS_OK;
    }
    size_t T = (size_t)t->T, Tl = (size_t)t->Tl, C = (size_t)t->C;
    int head = local == t->n_local;
    int moe = !head && layer_is_moe(t, t->global_of[local]);
    size_t K = (size_t)(moe ? t->K : 0), TK = T * K, ep = (size_t)t->l->ep;
    size_t F = moe ? (size_t)t->Fer : (size_t)t->Fr, R = moe ? TK * ep : T; /* rows an expert set can get */
    size_t floats, dev_ints = 0, host_ints = 0;
    if (head) {
        floats = Tl * C + T * C + Tl + T * t->Vr + 3 * T;
    } else {
        floats = Tl * C + T * C + Tl + T * t->QKVr + T * t->Qr + T * t->Hr + Tl * C + T * C + Tl +
                 3 * R * F + Tl * C;
        if (moe) {
            floats += 2 * T * t->E + TK + 2 * TK * C + 2 * R * C;
            dev_ints = 3 * TK;
            host_ints = (size_t)t->E + 1 + 2 * ep + ep * t->El;
        }
    }
    size_t host_bytes = sizeof(tr_acts) + host_ints * sizeof(int), dev_bytes = (floats + dev_ints) * sizeof(float);
    tr_acts *a = calloc(1, host_bytes);
    if (a == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for activations (%zu bytes)", host_bytes);
    ts_status st = t->be->alloc(dev_bytes, &a->dev);
    if (st != TS_OK) {
        free(a);
        return st;
    }
    float *f = a->dev;
#define TAKE(ptr, n) ((ptr) = f, f += (n))
    if (head) {
        TAKE(a->xf, Tl * C);
        TAKE(a->lnf, T * C);
        TAKE(a->rstdf, Tl);
        TAKE(a->logits_v, T * t->Vr);
        TAKE(a->ce_max, T);
        TAKE(a->ce_sum, T);
        TAKE(a->ce_tgt, T);
    } else {
        TAKE(a->x, Tl * C);
        TAKE(a->ln1, T * C);
        TAKE(a->rstd1, Tl);
        TAKE(a->qkv, T * t->QKVr);
        TAKE(a->att, T * t->Qr);
        TAKE(a->lse, T * t->Hr);
        TAKE(a->mid, Tl * C);
        TAKE(a->ln2, T * C);
        TAKE(a->rstd2, Tl);
        TAKE(a->gate, R * F);
        TAKE(a->up, R * F);
        TAKE(a->act, R * F);
        TAKE(a->out, Tl * C);
        if (moe) {
            TAKE(a->logits, T * t->E);
            TAKE(a->probs, T * t->E);
            TAKE(a->weight, TK);
            TAKE(a->xe, TK * C);
            TAKE(a->ye, TK * C);
            TAKE(a->xr, R * C);
            TAKE(a->yr, R * C);
            int *n = (int *)f;
            a->expert = n, n += TK;
            a->slot = n, n += TK;
            a->slot_token = n;
            n = (int *)(a + 1);
            a->offset = n, n += t->E + 1;
            a->send_rows = n, n += ep;
            a->recv_rows = n, n += ep;
            a->src_expert_rows = n;
        }
    }
#undef TAKE
    a->bytes = host_bytes + dev_bytes;
    tr_account(t, &t->live.activations, (double)a->bytes);
    *slot = a;
    *out = a;
    return TS_OK;
}

/* Frees the activations of a layer (local == n_local: the head) for micro-batch `mb` once its
 * backward, and its weight gradients, no longer need them. */
void tr_acts_release(ts_trainer *t, int local, int mb) {
    tr_acts *a = t->acts[local][mb];
    if (a == NULL) return;
    t->live.activations -= (double)a->bytes;
    t->be->free(a->dev);
    free(a);
    t->acts[local][mb] = NULL;
}

/* ---- Data parallelism and the optimizer -------------------------------------------------- */

/* Sums a segment's gradients over its group: all-reduce, or under ZeRO >= 1 reduce-scatter into
 * (ZeRO >= 2: added to) this member's shard. */
static ts_status reduce_segment(ts_trainer *t, tr_segment *s) {
    if (s->n == 0) return TS_OK;
    ts_comm *c = t->rt->comm[s->group];
    if (s->zero == 0) return t->be->all_reduce(c, s->grad, s->grad, s->n);
    if (s->zero == 1) return t->be->reduce_scatter(c, s->grad, s->grad, s->part);
    TS_CHECK(t->be->reduce_scatter(c, s->grad, t->shard_tmp, s->part));
    TS_CHECK(t->k->add(s->grad_shard, s->grad_shard, t->shard_tmp, s->part));
    return t->k->zero(s->grad, s->part * (size_t)s->members * sizeof(float));
}

/* The segments DP op `op` reduces or gathers, in order (exec/op_streams.h lists them). */
static const int32_t *dp_segments(const ts_trainer *t, const ts_op *op, int *n) {
    const ts_op_streams *st = &t->streams;
    int i = (int)(op - t->prog->stages[t->stage].ops);
    *n = (int)(st->seg_start[i + 1] - st->seg_start[i]);
    return st->segs + st->seg_start[i];
}

ts_status tr_grad_reduce(ts_trainer *t, const ts_op *op) {
    int n;
    const int32_t *segs = dp_segments(t, op, &n);
    for (int k = 0; k < n; k++) TS_CHECK(reduce_segment(t, &t->seg[segs[k]]));
    return TS_OK;
}

/* ZeRO-1/2: members' updated shards back into the whole parameters (in place). */
static ts_status gather_segment(ts_trainer *t, tr_segment *s) {
    if (s->n == 0 || s->zero == 0) return TS_OK;
    return t->be->all_gather(t->rt->comm[s->group], s->param + (size_t)s->index * s->part, s->param, s->part);
}

/* ZeRO-3: a layer's whole parameters gathered into fresh buffers; at most two layers are held
 * (the one running and the one prefetched). */
static ts_status gather_layer_z3(ts_trainer *t, int j) {
    for (int k = 0; k < t->z3_n; k++)
        if (t->z3_layers[k] == j) {
            for (int q = 0; q < 2; q++) {
                tr_segment *s = &t->seg[2 * j + q];
                if (s->zero < 3 || s->param == NULL) continue;
                t->live.weights -= (double)s->part * s->members * sizeof(float);
                t->be->free(s->param);
                s->param = NULL;
            }
            t->z3_layers[k] = t->z3_layers[--t->z3_n];
            break;
        }
    if (t->z3_n == 2) {
        int old = t->z3_layers[0];
        for (int k = 0; k < 2; k++) {
            tr_segment *s = &t->seg[2 * old + k];
            if (s->zero < 3) continue;
            if (s->param) t->live.weights -= (double)s->part * s->members * sizeof(float);
            t->be->free(s->param);
            s->param = NULL;
        }
        t->z3_layers[0] = t->z3_layers[1];
        t->z3_n = 1;
    }
    for (int k = 0; k < 2; k++) {
        tr_segment *s = &t->seg[2 * j + k];
        if (s->n == 0 || s->zero < 3) continue;
        TS_CHECK(alloc_floats(t, &t->live.weights, s->part * s->members, &s->param));
        TS_CHECK(t->be->all_gather(t->rt->comm[s->group], s->param_shard, s->param, s->part));
    }
    t->z3_layers[t->z3_n++] = j;
    return TS_OK;
}

ts_status tr_param_gather(ts_trainer *t, const ts_op *op) {
    if (op->phase != TS_PHASE_STEP) return gather_layer_z3(t, t->local_of[op->layer]);
    int n;
    const int32_t *segs = dp_segments(t, op, &n);
    for (int k = 0; k < n; k++) TS_CHECK(gather_segment(t, &t->seg[segs[k]]));
    return TS_OK;
}

ts_status tr_optimizer(ts_trainer *t) {
    const ts_train_opts *o = &t->opts;
    for (int i = 0; i < t->n_seg; i++) {
        tr_segment *s = &t->seg[i];
        if (s->n == 0) continue;
        /* Without data parallelism the program has no reduction ops; under ZeRO-2/3 nothing
         * reduced the embedding and head, which keep whole gradients. */
        int edge = i == t->seg_embed || i == t->seg_head;
        if (edge && t->l->zero >= 2) TS_CHECK(reduce_segment(t, s));
        if (s->zero == 0) {
            TS_CHECK(t->k->adamw(s->param, s->adam_m, s->adam_v, s->grad, s->n, o->lr, o->beta1, o->beta2,
                                 o->eps, o->weight_decay, t->step + 1));
            continue;
        }
        size_t start = (size_t)s->index * s->part;
        if (start >= s->n) continue;
        size_t n = s->n - start < s->part ? s->n - start : s->part;
        float *p = s->zero >= 3 ? s->param_shard : s->param + start;
        TS_CHECK(t->k->adamw(p, s->adam_m, s->adam_v, s->grad_shard, n, o->lr, o->beta1, o->beta2, o->eps,
                             o->weight_decay, t->step + 1));
        /* Under ZeRO-3 no step-start gather brings the embedding and head back whole. */
        if (edge && t->l->zero >= 3) TS_CHECK(gather_segment(t, s));
    }
    return TS_OK;
}

/* ---- The step ------------------------------------------------------------------------------ */

void ts_trainer_watch(ts_trainer *t, volatile sig_atomic_t *op) { t->watch_op = op; }

ts_status ts_trainer_step(ts_trainer *t, int step, float *loss, ts_op_span *spans) {
    t->step = step;
    TS_CHECK(load_batch(t, step));
    for (int i = 0; i < t->n_seg; i++) {
        tr_segment *s = &t->seg[i];
        if (s->n == 0) continue;
        if (s->owns_grad) TS_CHECK(t->k->zero(s->grad, s->part * (size_t)s->members * sizeof(float)));
        if (s->grad_shard && s->grad_shard != s->grad) TS_CHECK(t->k->zero(s->grad_shard, s->part * sizeof(float)));
    }
    t->loss_sum = 0;
    const ts_stage_program *sp = &t->prog->stages[t->stage];
    const ts_op_streams *so = &t->streams;
    TS_CHECK(t->be->step_begin(t->clock));
    for (int k = 0; k < sp->n_ops; k++) {
        int i = so->order[k];
        if (t->watch_op) *t->watch_op = i;
        ts_status st = t->be->op_begin(t->clock, i, ts_op_on_dp(&sp->ops[i]), so->after[i]);
        if (st == TS_OK) st = tr_run_op(t, &sp->ops[i]);
        if (st == TS_OK) st = t->be->op_end(t->clock, i);
        if (st != TS_OK) {
            char label[128];
            ts_error_context(__FILE__, __LINE__, "op %d \"%s\"", i, ts_op_label(&sp->ops[i], label, sizeof label));
            return st;
        }
    }
    if (spans) TS_CHECK(t->be->spans(t->clock, spans));
    if (t->watch_op) *t->watch_op = TS_WATCH_SENDS;
    for (int i = 0; i < t->n_sends; i++) {
        TS_CHECK(t->be->wait(t->sends[i]));
        t->be->free(t->send_bufs[i]);
    }
    t->n_sends = 0;
    /* The backend's collectives take its own memory: the loss goes through loss_buf. */
    float mine = (float)t->loss_sum;
    TS_CHECK(t->k->to_device(t->loss_buf, &mine, sizeof mine));
    TS_CHECK(t->be->all_reduce(t->rt->world, t->loss_buf, t->loss_buf, 1));
    return t->k->to_host(loss, t->loss_buf, sizeof *loss);
}

ts_exec_memory ts_trainer_memory(const ts_trainer *t) { return t->mem; }

void ts_trainer_moe_load(const ts_trainer *t, double *dev_sq, double *even_sq) {
    *dev_sq = t->moe_dev_sq;
    *even_sq = t->moe_even_sq;
}

/* ---- Assembling the parameters --------------------------------------------------------------- */

/* Offset of tensor (layer, kind) in the reference's flat parameters. */
static size_t ref_offset(const ts_model *m, int layer, ts_ref_kind kind) {
    size_t off = 0;
    int64_t shape[3];
    for (int k = TS_REF_EMBED; k <= TS_REF_LM_HEAD; k++) {
        if (layer == 0 && k == (int)kind && kind <= TS_REF_LM_HEAD) return off;
        if (k == TS_REF_LM_HEAD && m->tied_embeddings) continue;
        int dims = ts_ref_tensor_shape(m, 0, (ts_ref_kind)k, shape);
        size_t n = dims ? 1 : 0;
        for (int d = 0; d < dims; d++) n *= (size_t)shape[d];
        off += n;
    }
    for (int l = 0; l < m->layers; l++)
        for (int k = TS_REF_ATTN_NORM; k < TS_REF_KIND_COUNT; k++) {
            if (l == layer && k == (int)kind) return off;
            int dims = ts_ref_tensor_shape(m, l, (ts_ref_kind)k, shape);
            size_t n = dims ? 1 : 0;
            for (int d = 0; d < dims; d++) n *= (size_t)shape[d];
            off += n;
        }
    return off;
}

typedef struct {
    const ts_model *m;
    float *full;
    int tp_i;
} assemble_ctx;

static void assemble_element(void *ctx, ts_ref_kind kind, int layer, size_t gi, float *elem, int replicated) {
    assemble_ctx *a = ctx;
    if (replicated && a->tp_i != 0) return;
    if (kind == TS_REF_LM_HEAD && a->m->tied_embeddings) return;
    a->full[ref_offset(a->m, layer, kind) + gi] = *elem;
}

ts_status ts_trainer_param_count(const ts_trainer *t, size_t *n) {
    ts_ref probe;
    TS_CHECK(ts_ref_init(&probe, t->m, 1, 1, t->opts.seed));
    *n = probe.n_params;
    ts_ref_free(&probe);
    return TS_OK;
}

ts_status ts_trainer_gather_params(ts_trainer *t, float *out) {
    size_t n;
    TS_CHECK(ts_trainer_param_count(t, &n));
    ts_status res = TS_OK;
    float *full = calloc(n, sizeof *full), *host = NULL, *gathered = NULL, *sum = NULL;
    assemble_ctx a = {t->m, full, t->tp_i};
    if (!full) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory assembling %zu parameters", n);
        goto exit;
    }
    for (int i = 0; i < t->n_seg; i++) {
        tr_segment *s = &t->seg[i];
        if (s->n == 0) continue;
        size_t len = s->part * s->members;
        float *whole = s->param;
        if (s->zero >= 3) {
            TS_CHECK_GOTO(t->be->alloc(len * sizeof(float), (void **)&gathered), res, exit);
            TS_CHECK_GOTO(t->be->all_gather(t->rt->comm[s->group], s->param_shard, gathered, s->part), res, exit);
            whole = gathered;
        } else {
            TS_CHECK_GOTO(gather_segment(t, s), res, exit);
        }
        /* One member of each data-parallel group contributes, from a host copy. */
        if (s->index == 0) {
            host = malloc(len * sizeof *host);
            TS_ALLOC_GOTO(host, res, exit);
            TS_CHECK_GOTO(t->k->to_host(host, whole, len * sizeof *host), res, exit);
            if (i == t->seg_embed) map_vocab_rows(t, host, TS_REF_EMBED, assemble_element, &a);
            else if (i == t->seg_head) map_head(t, host, assemble_element, &a);
            else {
                int j = i / 2, g = t->global_of[j];
                tr_layer v = i % 2 ? layer_views(t, g, NULL, host) : layer_views(t, g, host, NULL);
                map_layer(t, g, v, i % 2 == 0, i % 2 == 1, assemble_element, &a);
            }
            free(host);
            host = NULL;
        }
        t->be->free(gathered);
        gathered = NULL;
    }
    /* Summed over the ranks in backend memory: the backend's collectives take no host buffers. */
    TS_CHECK_GOTO(t->be->alloc(n * sizeof *sum, (void **)&sum), res, exit);
    TS_CHECK_GOTO(t->k->to_device(sum, full, n * sizeof *sum), res, exit);
    TS_CHECK_GOTO(t->be->all_reduce(t->rt->world, sum, sum, n), res, exit);
    if (out) TS_CHECK_GOTO(t->k->to_host(out, sum, n * sizeof *out), res, exit);
exit:
    free(full);
    free(host);
    t->be->free(gathered);
    t->be->free(sum);
    return res;
}
