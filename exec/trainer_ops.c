/* What each op of the step program computes on this rank (see trainer.h). The program says which
 * op comes when; these handlers say what it means for this rank's shard. Ops run in program
 * order (on a GPU, queued in order on one compute stream), so an op may leave its result where
 * the next op of the same slot reads it: `cur` carries the residual stream forward through a
 * slot, `dcur` its gradient backward. Tensors are backend memory and every computation goes
 * through the kernel table t->k (trainer_impl.h says what stays on the host).
 *
 * Tensor parallelism follows Megatron-LM: QKV and the MLP's gate/up are column-parallel (this
 * rank's heads and slice), the output projection and down projection row-parallel with an
 * all-reduce after them (a reduce-scatter under SP, whose blocks start with an all-gather); the
 * embedding and LM head are vocab-parallel. Backward mirrors it: each block's input gradient is
 * all-reduced (reduce-scattered under SP) across TP. */
#include <stdlib.h>

#include "exec/trainer_impl.h"

#define EPS TS_REF_NORM_EPS

static ts_comm *comm(const ts_trainer *t, ts_group g) { return t->rt->comm[g]; }

/* n floats from src to dst, both backend memory. */
static ts_status copy_floats(const ts_trainer *t, float *dst, const float *src, size_t n) {
    return t->k->copy(dst, src, n * sizeof(float));
}

static ts_status zero_floats(const ts_trainer *t, float *p, size_t n) { return t->k->zero(p, n * sizeof(float)); }

static int rank_at_stage(const ts_trainer *t, int stage) {
    ts_coords c = t->rt->coords;
    c.pp = stage;
    return ts_rank_of(t->l, c);
}

/* ---- Deferred weight gradients --------------------------------------------------------------- */

static ts_status stash_wgrad(ts_trainer *t, const ts_op *op, int part, float *dw, const float *dout,
                             const float *in, int T, int IC, int OC) {
    tr_wgrad_entry *e = NULL;
    for (int i = 0; i < t->n_wgrad && !e; i++)
        if (t->wgrad[i].layer == op->layer && t->wgrad[i].mb == op->mb && t->wgrad[i].part == part) e = &t->wgrad[i];
    if (e == NULL) {
        if (t->n_wgrad == t->cap_wgrad) {
            int cap = t->cap_wgrad ? 2 * t->cap_wgrad : 16;
            tr_wgrad_entry *g = realloc(t->wgrad, (size_t)cap * sizeof *g);
            if (g == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for deferred weight gradients");
            t->wgrad = g;
            t->cap_wgrad = cap;
        }
        e = &t->wgrad[t->n_wgrad++];
        *e = (tr_wgrad_entry){.layer = op->layer, .mb = op->mb, .part = part};
    }
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 4;
        tr_wgrad *w = realloc(e->w, (size_t)cap * sizeof *w);
        if (w == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for deferred weight gradients");
        e->w = w;
        e->cap = cap;
    }
    size_t n = (size_t)T * OC;
    float *copy = NULL;
    TS_CHECK(t->be->alloc(n * sizeof *copy, (void **)&copy));
    ts_status st = copy_floats(t, copy, dout, n);
    if (st != TS_OK) {
        t->be->free(copy);
        return st;
    }
    tr_account(t, &t->live.activations, (double)n * sizeof *copy);
    e->w[e->n++] = (tr_wgrad){dw, copy, in, T, IC, OC};
    return TS_OK;
}

static ts_status run_wgrad(ts_trainer *t, int layer, int mb, int part) {
    ts_status res = TS_OK;
    for (int i = 0; i < t->n_wgrad; i++) {
        tr_wgrad_entry *e = &t->wgrad[i];
        if (e->layer != layer || e->mb != mb || e->part != part) continue;
        /* Every copy is freed, even after a failed GEMM (the first error is kept). */
        for (int k = 0; k < e->n; k++) {
            tr_wgrad *w = &e->w[k];
            if (res == TS_OK) res = t->k->linear_bwd_weight(w->dw, w->dout, w->in, w->T, w->IC, w->OC);
            t->live.activations -= (double)w->T * w->OC * sizeof(float);
            t->be->free(w->dout);
        }
        free(e->w);
        t->wgrad[i] = t->wgrad[--t->n_wgrad];
        return res;
    }
    return res;
}

/* ---- Shared steps ------------------------------------------------------------------------- */

/* A norm's weight gradient: under SP each TP rank saw a shard of the tokens, so the shards' sums
 * are all-reduced across TP before they are added. */
static ts_status norm_bwd(ts_trainer *t, float *dx, float *dw, const float *dout, const float *x,
                          const float *w, const float *rstd) {
    if (!t->l->sp) return t->k->rmsnorm_bwd(dx, dw, dout, x, w, rstd, t->Tl, t->C);
    TS_CHECK(zero_floats(t, t->norm_grad, (size_t)t->C));
    TS_CHECK(t->k->rmsnorm_bwd(dx, t->norm_grad, dout, x, w, rstd, t->Tl, t->C));
    TS_CHECK(t->be->all_reduce(comm(t, TS_GROUP_TP), t->norm_grad, t->norm_grad, (size_t)t->C));
    return t->k->add(dw, dw, t->norm_grad, (size_t)t->C);
}

/* The block's output partial sums (T, C) reduced across TP: all-reduce, or reduce-scatter to
 * this rank's Tl rows under SP. Returns where the Tl rows are. */
static ts_status tp_close(ts_trainer *t, float *partial, float **rows) {
    size_t n = (size_t)t->Tl * t->C;
    if (t->l->sp) {
        TS_CHECK(t->be->reduce_scatter(comm(t, TS_GROUP_TP), partial, t->rows, n));
        *rows = t->rows;
    } else {
        if (t->l->tp > 1) TS_CHECK(t->be->all_reduce(comm(t, TS_GROUP_TP), partial, partial, n));
        *rows = partial;
    }
    return TS_OK;
}

/* Rows of local expert `el` in the expert-major buffers: start and count. */
static void expert_rows(const ts_trainer *t, const tr_acts *a, int el, int *start, int *count) {
    if (t->l->ep == 1) {
        *start = a->offset[el];
        *count = a->offset[el + 1] - a->offset[el];
        return;
    }
    int s = 0, n = 0;
    for (int e = 0; e <= el; e++)
        for (int r = 0; r < t->l->ep; r++) {
            int k = a->src_expert_rows[r * t->El + e];
            if (e < el) s += k;
            else n += k;
        }
    *start = s;
    *count = n;
}

/* Between source-major (as all-to-all-v delivers: per peer, per expert) and expert-major (per
 * expert, per peer) row order; `to_expert` picks the direction. */
static ts_status reorder_rows(const ts_trainer *t, const tr_acts *a, const float *src, float *dst, int to_expert) {
    int ep = t->l->ep, El = t->El;
    size_t C = (size_t)t->C, peer_off = 0;
    for (int r = 0; r < ep; r++) {
        size_t within = 0;
        for (int e = 0; e < El; e++) {
            int n = a->src_expert_rows[r * El + e];
            int start, count;
            expert_rows(t, a, e, &start, &count);
            size_t exp_off = (size_t)start;
            for (int q = 0; q < r; q++) exp_off += (size_t)a->src_expert_rows[q * El + e];
            const float *from = to_expert ? src + (peer_off + within) * C : src + exp_off * C;
            float *to = to_expert ? dst + exp_off * C : dst + (peer_off + within) * C;
            TS_CHECK(copy_floats(t, to, from, (size_t)n * C));
            within += (size_t)n;
        }
        peer_off += within;
    }
    return TS_OK;
}

/* All-to-all-v of rows between EP peers: send_rows[r] rows to peer r, recv_rows[r] back. */
static ts_status exchange_rows(ts_trainer *t, const float *in, const int *send_rows, float *out,
                               const int *recv_rows) {
    int ep = t->l->ep, C = t->C;
    int *sc = t->a2a, *sd = sc + ep, *rc = sd + ep, *rd = rc + ep;
    int so = 0, ro = 0;
    for (int r = 0; r < ep; r++) {
        sc[r] = send_rows[r] * C, sd[r] = so, so += sc[r];
        rc[r] = recv_rows[r] * C, rd[r] = ro, ro += rc[r];
    }
    return t->be->all_to_all_v(comm(t, TS_GROUP_EP), in, sc, sd, out, rc, rd);
}

/* One expert's load of one routing beside the even share (ts_trainer_moe_load). */
static void note_expert_load(ts_trainer *t, int load, double even) {
    t->moe_dev_sq += (load - even) * (load - even);
    t->moe_even_sq += even * even;
}

/* ---- Context parallelism: ring attention ---------------------------------------------------- */

/* Ring attention (Liu et al. 2023, "Ring Attention with Blockwise Transformers"), with Megatron's
 * load-balanced causal chunks (each CP member holds chunks cp_i and 2·cp−1−cp_i of every sequence,
 * positions_of in trainer.c). Member i's keys and values travel the ring i → i+1 in cp − 1 steps;
 * at step s member i holds the block of member (i − s) mod cp and attends its own queries to it
 * (causal by position, so a block's keys past a query are masked, never skipped by index). Each
 * step gives a partial output and log-sum-exp over that block, merged into the running ones:
 *     lse = log(e^lse + e^lse_s),  out = e^(lse_old − lse)·out + e^(lse_s − lse)·out_s
 * (ts_attention_merge), which is softmax attention over the union of the blocks.
 *
 * Backward (FlashAttention-2's, Dao 2023, Alg. 2, with the final out and lse: each block's share
 * of dq, dk, dv is exact by itself). The keys and values go round again, now with an accumulator of
 * their gradients: at step s member i adds its queries' dk, dv for the block it holds, then passes
 * block and accumulator on; after the last step each accumulator sits one member before its owner
 * and takes one more hop home.
 *
 * The program's ops map onto it: forward, CP_RING packs this member's keys and values and posts
 * their first send, ATTN runs the cp steps (each receives the next block, forwards it, attends to
 * it, merges); backward, the first CP_RING packs the block and zeroes its accumulator, ATTN runs
 * the cp steps, the second CP_RING brings the accumulator home and applies rotary's backward. */

#define RING_TAG (1 << 20) /* apart from the pipeline's tags (2·chunk + 1 at most) */

/* The world rank of the CP member `step` places on along the ring (-1: the previous one). */
static int cp_peer(const ts_trainer *t, int step) {
    ts_coords c = t->rt->coords;
    c.cp = ((t->cp_i + step) % t->cp + t->cp) % t->cp;
    return ts_rank_of(t->l, c);
}

/* Attention of `batch` sequences of micro-batch mb from sequence b on: their queries against keys
 * and values k, v (row stride ld) at positions k_pos. */
static ts_attn_shape attn_shape_of(const ts_trainer *t, int mb, int b, int batch, int ld, const int *k_pos) {
    size_t T0 = (size_t)b * t->Ts;
    return (ts_attn_shape){.Tq = t->Ts, .Tk = t->Ts, .H = t->Hr, .KV = t->KVr, .D = t->D, .ldq = t->QKVr,
                           .ldk = ld, .ldv = ld, .ldo = t->Qr, .q_pos = t->dev_pos + (size_t)mb * t->T + T0,
                           .k_pos = k_pos, .batch = batch};
}

/* Sends the block in use (its first `count` floats) to the next member and receives the previous
 * member's into the other block, which becomes the one in use. */
static ts_status ring_pass(ts_trainer *t, size_t count) {
    int cur = t->ring_cur;
    ts_request *req = NULL;
    TS_CHECK(t->be->send(t->ring[cur], count, cp_peer(t, 1), RING_TAG, &req));
    ts_status st = t->be->recv(t->ring[1 - cur], count, cp_peer(t, -1), RING_TAG);
    ts_status sw = t->be->wait(req);
    TS_CHECK(st);
    TS_CHECK(sw);
    t->ring_cur = 1 - cur;
    return TS_OK;
}

static ts_status ring_fwd_start(ts_trainer *t, tr_acts *a) {
    size_t kv = 2 * (size_t)t->KVD;
    t->ring_cur = 0;
    TS_CHECK(t->k->copy_rows(t->ring[0], kv, a->qkv + t->Qr, (size_t)t->QKVr, (size_t)t->T, kv));
    return t->be->send(t->ring[0], (size_t)t->T * kv, cp_peer(t, 1), RING_TAG, &t->ring_send);
}

static ts_status ring_fwd(ts_trainer *t, tr_acts *a, int mb) {
    const ts_kernels *k = t->k;
    size_t kv = 2 * (size_t)t->KVD, count = (size_t)t->T * kv;
    if (t->ring_send == NULL) return TS_FAIL(TS_ERR_INPUT, "ring attention: no CP_RING op before ATTN");
    for (int step = 0; step < t->cp; step++) {
        if (step > 0) {
            /* The block in use has been sent on (posted last step); the other one is free. */
            int cur = t->ring_cur;
            TS_CHECK(t->be->recv(t->ring[1 - cur], count, cp_peer(t, -1), RING_TAG));
            ts_request *done = t->ring_send;
            t->ring_send = NULL;
            TS_CHECK(t->be->wait(done));
            t->ring_cur = 1 - cur;
            if (step < t->cp - 1)
                TS_CHECK(t->be->send(t->ring[t->ring_cur], count, cp_peer(t, 1), RING_TAG, &t->ring_send));
        }
        int owner = ((t->cp_i - step) % t->cp + t->cp) % t->cp;
        const int *k_pos = t->dev_kv_pos + (size_t)owner * t->Ts;
        for (int b = 0; b < t->mbs; b++) {
            size_t T0 = (size_t)b * t->Ts;
            const float *q = a->qkv + T0 * t->QKVr, *kk = t->ring[t->ring_cur] + T0 * kv;
            ts_attn_shape sh = attn_shape_of(t, mb, b, 1, (int)kv, k_pos);
            float *out = a->att + T0 * t->Qr, *lse = a->lse + T0 * t->Hr;
            if (step == 0) {
                TS_CHECK(k->attention_fwd(out, lse, q, kk, kk + t->KVD, &sh, t->scratch));
                continue;
            }
            TS_CHECK(k->attention_fwd(t->ring_out, t->ring_lse, q, kk, kk + t->KVD, &sh, t->scratch));
            TS_CHECK(k->attention_merge(out, lse, t->ring_out, t->ring_lse, t->Ts, t->Hr, t->D, t->Qr));
        }
    }
    return TS_OK;
}

static ts_status ring_bwd_start(ts_trainer *t, const tr_acts *a) {
    size_t kv = 2 * (size_t)t->KVD, n = (size_t)t->T * kv;
    t->ring_cur = 0;
    TS_CHECK(t->k->copy_rows(t->ring[0], kv, a->qkv + t->Qr, (size_t)t->QKVr, (size_t)t->T, kv));
    return zero_floats(t, t->ring[0] + n, n);
}

/* dq into t->dqkv; the dk, dv of the block in use into its accumulator. */
static ts_status ring_bwd(ts_trainer *t, const tr_acts *a, int mb) {
    size_t kv = 2 * (size_t)t->KVD, n = (size_t)t->T * kv;
    for (int step = 0; step < t->cp; step++) {
        if (step > 0) TS_CHECK(ring_pass(t, 2 * n));
        int owner = ((t->cp_i - step) % t->cp + t->cp) % t->cp;
        const int *k_pos = t->dev_kv_pos + (size_t)owner * t->Ts;
        for (int b = 0; b < t->mbs; b++) {
            size_t T0 = (size_t)b * t->Ts;
            const float *q = a->qkv + T0 * t->QKVr, *kk = t->ring[t->ring_cur] + T0 * kv;
            float *dk = t->ring[t->ring_cur] + n + T0 * kv;
            ts_attn_shape sh = attn_shape_of(t, mb, b, 1, (int)kv, k_pos);
            TS_CHECK(t->k->attention_bwd(t->dqkv + T0 * t->QKVr, dk, dk + t->KVD, t->datt + T0 * t->Qr, q, kk,
                                         kk + t->KVD, a->att + T0 * t->Qr, a->lse + T0 * t->Hr, &sh));
        }
    }
    return TS_OK;
}

/* The accumulator in use belongs to the next member: one hop, and ours arrives from the previous
 * one; then rotary's backward on the keys' part and into dqkv. */
static ts_status ring_bwd_home(ts_trainer *t, int mb) {
    size_t kv = 2 * (size_t)t->KVD, n = (size_t)t->T * kv;
    int cur = t->ring_cur;
    ts_request *req = NULL;
    TS_CHECK(t->be->send(t->ring[cur] + n, n, cp_peer(t, 1), RING_TAG, &req));
    ts_status st = t->be->recv(t->ring[1 - cur] + n, n, cp_peer(t, -1), RING_TAG);
    ts_status sw = t->be->wait(req);
    TS_CHECK(st);
    TS_CHECK(sw);
    float *home = t->ring[1 - cur] + n;
    TS_CHECK(t->k->rope_bwd(home, (int)kv, t->dev_pos + (size_t)mb * t->T, t->T, t->KVr, t->D, TS_REF_ROPE_THETA));
    return t->k->copy_rows(t->dqkv + t->Qr, (size_t)t->QKVr, home, kv, (size_t)t->T, kv);
}

/* ---- Forward -------------------------------------------------------------------------------- */

/* The router's choices go to the host, which plans the dispatch (ts_moe_plan: the counts size
 * the EP all-to-alls) and sends the slots back for the gather and combine kernels. */
static ts_status plan_experts(ts_trainer *t, tr_acts *a) {
    size_t TK = (size_t)t->T * t->K;
    TS_CHECK(t->k->to_host(t->host_expert, a->expert, TK * sizeof(int)));
    ts_moe_plan(a->offset, t->host_slot_token, t->host_slot, t->host_expert, t->T, t->E, t->K);
    TS_CHECK(t->k->to_device(a->slot_token, t->host_slot_token, TK * sizeof(int)));
    return t->k->to_device(a->slot, t->host_slot, TK * sizeof(int));
}

static ts_status fwd_layer_op(ts_trainer *t, const ts_op *op, int j, tr_acts *a) {
    const ts_kernels *k = t->k;
    tr_layer P = tr_layer_params(t, j);
    int fwd = op->phase == TS_PHASE_FWD, mb = op->mb;
    size_t T = (size_t)t->T, Tl = (size_t)t->Tl, C = (size_t)t->C;
    int moe = ts_model_layer_is_moe(t->m, op->layer);
    float *rows;
    switch (op->part) {
    case TS_PART_NORM1:
        if (fwd) TS_CHECK(copy_floats(t, a->x, t->cur, Tl * C));
        return k->rmsnorm_fwd(t->l->sp ? t->rows : a->ln1, a->rstd1, a->x, P.attn_norm, t->Tl, t->C, EPS);
    case TS_PART_SP_GATHER_ATTN:
        return t->be->all_gather(comm(t, TS_GROUP_TP), t->rows, a->ln1, Tl * C);
    case TS_PART_QKV:
        TS_CHECK(k->linear_fwd(a->qkv, a->ln1, P.qkv, t->T, t->C, t->QKVr));
        return k->rope_fwd(a->qkv, t->QKVr, t->dev_pos + (size_t)mb * T, t->T, t->Hr + t->KVr, t->D,
                           TS_REF_ROPE_THETA);
    case TS_PART_CP_RING:
        return ring_fwd_start(t, a);
    case TS_PART_ATTN: {
        if (t->cp > 1) return ring_fwd(t, a, mb);
        /* The micro-batch's sequences in one call: one launch on a GPU, as the program's op. */
        const float *q = a->qkv;
        ts_attn_shape sh = attn_shape_of(t, mb, 0, t->mbs, t->QKVr, t->dev_pos + (size_t)mb * T);
        return k->attention_fwd(a->att, a->lse, q, q + t->Qr, q + t->Qr + t->KVD, &sh, t->scratch);
    }
    case TS_PART_PROJ:
        TS_CHECK(k->linear_fwd(t->proj, a->att, P.attn_out, t->T, t->Qr, t->C));
        if (t->l->tp == 1) TS_CHECK(k->add(a->mid, a->x, t->proj, Tl * C));
        return TS_OK;
    case TS_PART_TP_ATTN:
        TS_CHECK(tp_close(t, t->proj, &rows));
        return k->add(a->mid, a->x, rows, Tl * C);
    case TS_PART_NORM2:
        return k->rmsnorm_fwd(t->l->sp ? t->rows : a->ln2, a->rstd2, a->mid, P.mlp_norm, t->Tl, t->C, EPS);
    case TS_PART_SP_GATHER_MLP:
        return t->be->all_gather(comm(t, TS_GROUP_TP), t->rows, a->ln2, Tl * C);
    case TS_PART_FC1:
        TS_CHECK(k->linear_fwd(a->gate, a->ln2, P.gate, t->T, t->C, t->Fr));
        return k->linear_fwd(a->up, a->ln2, P.up, t->T, t->C, t->Fr);
    case TS_PART_ACT:
        return k->swiglu_fwd(a->act, a->gate, a->up, (size_t)(moe ? a->rows : t->T) * (moe ? t->Fer : t->Fr));
    case TS_PART_FC2:
        TS_CHECK(k->linear_fwd(t->proj, a->act, P.down, t->T, t->Fr, t->C));
        break; /* block end below */
    case TS_PART_ROUTER: {
        int TK = t->T * t->K;
        TS_CHECK(k->linear_fwd(a->logits, a->ln2, P.router, t->T, t->C, t->E));
        TS_CHECK(k->router_fwd(a->probs, a->expert, a->weight, a->logits, t->T, t->E, t->K));
        TS_CHECK(plan_experts(t, a));
        TS_CHECK(k->moe_gather_fwd(a->xe, a->ln2, a->slot_token, TK, t->C));
        if (t->l->ep == 1) {
            for (int e = 0; e < t->E; e++) note_expert_load(t, a->offset[e + 1] - a->offset[e], (double)TK / t->E);
            a->rows = TK;
            TS_CHECK(copy_floats(t, a->xr, a->xe, (size_t)TK * C));
        }
        return TS_OK;
    }
    case TS_PART_DISPATCH: {
        int ep = t->l->ep, El = t->El;
        int *cnt = t->ep_counts;
        for (int r = 0; r < ep; r++) {
            a->send_rows[r] = 0;
            for (int e = 0; e < El; e++) {
                int g = r * El + e;
                cnt[g] = a->offset[g + 1] - a->offset[g];
                a->send_rows[r] += cnt[g];
            }
        }
        TS_CHECK(t->be->all_to_all_int(comm(t, TS_GROUP_EP), cnt, a->src_expert_rows, El));
        a->rows = 0;
        for (int r = 0; r < ep; r++) {
            a->recv_rows[r] = 0;
            for (int e = 0; e < El; e++) a->recv_rows[r] += a->src_expert_rows[r * El + e];
            a->rows += a->recv_rows[r];
        }
        for (int e = 0; e < El; e++) { /* each local expert's load from the whole EP group */
            int load = 0;
            for (int r = 0; r < ep; r++) load += a->src_expert_rows[r * El + e];
            note_expert_load(t, load, (double)t->T * t->K * ep / t->E);
        }
        TS_CHECK(exchange_rows(t, a->xe, a->send_rows, t->dxr, a->recv_rows));
        return reorder_rows(t, a, t->dxr, a->xr, 1);
    }
    case TS_PART_EXPERT_FC1:
        for (int e = 0; e < t->El; e++) {
            int s, n;
            expert_rows(t, a, e, &s, &n);
            if (n == 0) continue;
            size_t w = (size_t)e * t->Fer * C;
            TS_CHECK(k->linear_fwd(a->gate + (size_t)s * t->Fer, a->xr + (size_t)s * C, P.gate + w, n, t->C, t->Fer));
            TS_CHECK(k->linear_fwd(a->up + (size_t)s * t->Fer, a->xr + (size_t)s * C, P.up + w, n, t->C, t->Fer));
        }
        return TS_OK;
    case TS_PART_EXPERT_FC2:
        for (int e = 0; e < t->El; e++) {
            int s, n;
            expert_rows(t, a, e, &s, &n);
            if (n == 0) continue;
            TS_CHECK(k->linear_fwd(a->yr + (size_t)s * C, a->act + (size_t)s * t->Fer,
                                   P.down + (size_t)e * C * t->Fer, n, t->Fer, t->C));
        }
        if (t->l->ep > 1) return TS_OK; /* COMBINE brings the rows back */
        TS_CHECK(copy_floats(t, a->ye, a->yr, (size_t)a->rows * C));
        TS_CHECK(k->moe_combine_fwd(t->proj, a->ye, a->weight, a->slot, t->T, t->K, t->C));
        break;
    case TS_PART_COMBINE:
        TS_CHECK(reorder_rows(t, a, a->yr, t->dxr, 0));
        TS_CHECK(exchange_rows(t, t->dxr, a->recv_rows, a->ye, a->send_rows));
        TS_CHECK(k->moe_combine_fwd(t->proj, a->ye, a->weight, a->slot, t->T, t->K, t->C));
        break;
    case TS_PART_TP_MLP:
        TS_CHECK(tp_close(t, t->proj, &rows));
        TS_CHECK(k->add(a->out, a->mid, rows, Tl * C));
        if (fwd) TS_CHECK(copy_floats(t, t->cur, a->out, Tl * C));
        return TS_OK;
    default:
        return TS_FAIL(TS_ERR_INPUT, "the executor has no forward for part \"%s\"", ts_part_names[op->part]);
    }
    /* The MLP's last compute op: without TP nothing else closes the block. */
    if (t->l->tp == 1) {
        TS_CHECK(k->add(a->out, a->mid, t->proj, Tl * C));
        if (fwd) TS_CHECK(copy_floats(t, t->cur, a->out, Tl * C));
    }
    return TS_OK;
}

/* ---- Backward ------------------------------------------------------------------------------ */

/* The attention block's end in backward: dcur = dmid + the norm's backward of dln. */
static ts_status finish_attention(ts_trainer *t, tr_acts *a, tr_layer P, tr_layer G, const float *dln_rows) {
    TS_CHECK(copy_floats(t, t->dcur, t->dmid, (size_t)t->Tl * t->C));
    return norm_bwd(t, t->dcur, G.attn_norm, dln_rows, a->x, P.attn_norm, a->rstd1);
}

static ts_status finish_mlp(ts_trainer *t, tr_acts *a, tr_layer P, tr_layer G, const float *dln_rows) {
    TS_CHECK(copy_floats(t, t->dcur, t->dmid, (size_t)t->Tl * t->C));
    return norm_bwd(t, t->dcur, G.mlp_norm, dln_rows, a->mid, P.mlp_norm, a->rstd2);
}

/* The combine's backward at the source: each row's gradient is its routing weight times the
 * output gradient; each weight's gradient is the row's output against it. Under TP the expert
 * outputs are partial sums over the F slices, so the weights' gradients are summed across TP. */
static ts_status combine_bwd(ts_trainer *t, const tr_acts *a) {
    size_t TK = (size_t)t->T * t->K;
    TS_CHECK(zero_floats(t, t->dye, TK * t->C));
    TS_CHECK(zero_floats(t, t->dweight, TK));
    TS_CHECK(t->k->moe_combine_bwd(t->dye, t->dweight, t->dfull, a->ye, a->weight, a->slot, t->T, t->K, t->C));
    if (t->l->tp > 1) TS_CHECK(t->be->all_reduce(comm(t, TS_GROUP_TP), t->dweight, t->dweight, TK));
    return TS_OK;
}

static ts_status bwd_layer_op(ts_trainer *t, const ts_op *op, int j, tr_acts *a) {
    const ts_kernels *k = t->k;
    tr_layer P = tr_layer_params(t, j), G = tr_layer_grads(t, j);
    int mb = op->mb, moe = ts_model_layer_is_moe(t->m, op->layer);
    size_t T = (size_t)t->T, Tl = (size_t)t->Tl, C = (size_t)t->C;
    float *rows;
    switch (op->part) {
    case TS_PART_NORM2: /* the MLP block's backward starts: keep the residual's gradient */
        TS_CHECK(copy_floats(t, t->dmid, t->dcur, Tl * C));
        if (!t->l->sp) TS_CHECK(copy_floats(t, t->dfull, t->dcur, T * C));
        t->mlp_open = 1;
        return TS_OK;
    case TS_PART_SP_GATHER_MLP:
    case TS_PART_SP_GATHER_ATTN:
        return t->be->all_gather(comm(t, TS_GROUP_TP), t->dcur, t->dfull, Tl * C);
    case TS_PART_FC2:
        TS_CHECK(zero_floats(t, t->dact, T * t->Fr));
        TS_CHECK(k->linear_bwd_input(t->dact, t->dfull, P.down, t->T, t->Fr, t->C));
        return stash_wgrad(t, op, TS_PART_FC2, G.down, t->dfull, a->act, t->T, t->Fr, t->C);
    case TS_PART_ACT: {
        size_t n = (size_t)(moe ? a->rows : t->T) * (moe ? t->Fer : t->Fr);
        return k->swiglu_bwd(t->dgate, t->dup, t->dact, a->gate, a->up, n);
    }
    case TS_PART_FC1:
        TS_CHECK(zero_floats(t, t->dln, T * C));
        TS_CHECK(k->linear_bwd_input(t->dln, t->dgate, P.gate, t->T, t->C, t->Fr));
        TS_CHECK(k->linear_bwd_input(t->dln, t->dup, P.up, t->T, t->C, t->Fr));
        TS_CHECK(stash_wgrad(t, op, TS_PART_FC1, G.gate, t->dgate, a->ln2, t->T, t->C, t->Fr));
        return stash_wgrad(t, op, TS_PART_FC1, G.up, t->dup, a->ln2, t->T, t->C, t->Fr);
    case TS_PART_COMBINE: /* backward of the combine: the rows' gradients go to their experts */
        TS_CHECK(combine_bwd(t, a));
        TS_CHECK(exchange_rows(t, t->dye, a->send_rows, t->dxr, a->recv_rows));
        return reorder_rows(t, a, t->dxr, t->dyr, 1);
    case TS_PART_EXPERT_FC2:
        TS_CHECK(zero_floats(t, t->dln, T * C));
        if (t->l->ep == 1) {
            TS_CHECK(combine_bwd(t, a));
            TS_CHECK(copy_floats(t, t->dyr, t->dye, (size_t)a->rows * C));
        }
        TS_CHECK(zero_floats(t, t->dact, (size_t)a->rows * t->Fer));
        for (int e = 0; e < t->El; e++) {
            int s, n;
            expert_rows(t, a, e, &s, &n);
            if (n == 0) continue;
            float *dw = G.down + (size_t)e * C * t->Fer;
            TS_CHECK(k->linear_bwd_input(t->dact + (size_t)s * t->Fer, t->dyr + (size_t)s * C,
                                         P.down + (size_t)e * C * t->Fer, n, t->Fer, t->C));
            TS_CHECK(stash_wgrad(t, op, TS_PART_EXPERT_FC2, dw, t->dyr + (size_t)s * C, a->act + (size_t)s * t->Fer,
                                 n, t->Fer, t->C));
        }
        return TS_OK;
    case TS_PART_EXPERT_FC1:
        TS_CHECK(zero_floats(t, t->dxr, (size_t)a->rows * C));
        for (int e = 0; e < t->El; e++) {
            int s, n;
            expert_rows(t, a, e, &s, &n);
            if (n == 0) continue;
            size_t w = (size_t)e * t->Fer * C, r = (size_t)s;
            TS_CHECK(k->linear_bwd_input(t->dxr + r * C, t->dgate + r * t->Fer, P.gate + w, n, t->C, t->Fer));
            TS_CHECK(k->linear_bwd_input(t->dxr + r * C, t->dup + r * t->Fer, P.up + w, n, t->C, t->Fer));
            TS_CHECK(stash_wgrad(t, op, TS_PART_EXPERT_FC1, G.gate + w, t->dgate + r * t->Fer, a->xr + r * C, n,
                                 t->C, t->Fer));
            TS_CHECK(stash_wgrad(t, op, TS_PART_EXPERT_FC1, G.up + w, t->dup + r * t->Fer, a->xr + r * C, n,
                                 t->C, t->Fer));
        }
        if (t->l->ep == 1) TS_CHECK(k->moe_gather_bwd(t->dln, t->dxr, a->slot_token, t->T * t->K, t->C));
        return TS_OK;
    case TS_PART_DISPATCH: /* backward of the dispatch: the inputs' gradients come home */
        TS_CHECK(reorder_rows(t, a, t->dxr, t->dyr, 0));
        TS_CHECK(exchange_rows(t, t->dyr, a->recv_rows, t->dxe, a->send_rows));
        return k->moe_gather_bwd(t->dln, t->dxe, a->slot_token, t->T * t->K, t->C);
    case TS_PART_ROUTER:
        TS_CHECK(zero_floats(t, t->dlogits_r, T * t->E));
        TS_CHECK(k->router_bwd(t->dlogits_r, t->dweight, a->probs, a->expert, t->T, t->E, t->K));
        /* The router is replicated across TP while dln holds TP partial sums: one rank adds its
         * (whole) contribution. */
        if (t->tp_i == 0) TS_CHECK(k->linear_bwd_input(t->dln, t->dlogits_r, P.router, t->T, t->C, t->E));
        return stash_wgrad(t, op, TS_PART_ROUTER, G.router, t->dlogits_r, a->ln2, t->T, t->C, t->E);
    case TS_PART_TP_MLP:
        TS_CHECK(tp_close(t, t->dln, &rows));
        t->mlp_open = 0;
        return finish_mlp(t, a, P, G, rows);
    case TS_PART_NORM1: /* the attention block's backward starts */
        if (t->mlp_open) { /* no TP collective closed the MLP block */
            t->mlp_open = 0;
            TS_CHECK(finish_mlp(t, a, P, G, t->dln));
        }
        TS_CHECK(copy_floats(t, t->dmid, t->dcur, Tl * C));
        if (!t->l->sp) TS_CHECK(copy_floats(t, t->dfull, t->dcur, T * C));
        return TS_OK;
    case TS_PART_PROJ:
        TS_CHECK(zero_floats(t, t->datt, T * t->Qr));
        TS_CHECK(k->linear_bwd_input(t->datt, t->dfull, P.attn_out, t->T, t->Qr, t->C));
        return stash_wgrad(t, op, TS_PART_PROJ, G.attn_out, t->dfull, a->att, t->T, t->Qr, t->C);
    case TS_PART_ATTN: {
        TS_CHECK(zero_floats(t, t->dqkv, T * t->QKVr));
        if (t->cp > 1) {
            TS_CHECK(ring_bwd(t, a, mb));
        } else {
            const float *q = a->qkv;
            float *dq = t->dqkv;
            ts_attn_shape sh = attn_shape_of(t, mb, 0, t->mbs, t->QKVr, t->dev_pos + (size_t)mb * T);
            TS_CHECK(k->attention_bwd(dq, dq + t->Qr, dq + t->Qr + t->KVD, t->datt, q, q + t->Qr, q + t->Qr + t->KVD,
                                      a->att, a->lse, &sh));
        }
        /* Rotary's backward on q (and k, when the keys are all local). */
        return k->rope_bwd(t->dqkv, t->QKVr, t->dev_pos + (size_t)mb * T, t->T, t->Hr + (t->cp > 1 ? 0 : t->KVr),
                           t->D, TS_REF_ROPE_THETA);
    }
    case TS_PART_CP_RING: /* before the attention's backward (the program's all-gather), then after */
        return op->coll == TS_COLL_ALLGATHER ? ring_bwd_start(t, a) : ring_bwd_home(t, mb);
    case TS_PART_QKV:
        TS_CHECK(zero_floats(t, t->dln, T * C));
        TS_CHECK(k->linear_bwd_input(t->dln, t->dqkv, P.qkv, t->T, t->C, t->QKVr));
        TS_CHECK(stash_wgrad(t, op, TS_PART_QKV, G.qkv, t->dqkv, a->ln1, t->T, t->C, t->QKVr));
        if (t->l->tp == 1) return finish_attention(t, a, P, G, t->dln);
        return TS_OK;
    case TS_PART_TP_ATTN:
        TS_CHECK(tp_close(t, t->dln, &rows));
        return finish_attention(t, a, P, G, rows);
    default:
        return TS_FAIL(TS_ERR_INPUT, "the executor has no backward for part \"%s\"", ts_part_names[op->part]);
    }
}

/* ---- Edges: embedding, head and loss, pipeline transfers ------------------------------------ */

static ts_status edge_op(ts_trainer *t, const ts_op *op) {
    const ts_kernels *k = t->k;
    size_t T = (size_t)t->T, Tl = (size_t)t->Tl, C = (size_t)t->C;
    int mb = op->mb, bwd = op->phase != TS_PHASE_FWD;
    const int *inputs = t->dev_inputs + (size_t)mb * T, *targets = t->dev_targets + (size_t)mb * T;
    tr_segment *emb = t->seg_embed >= 0 ? &t->seg[t->seg_embed] : NULL;
    tr_segment *head = t->seg_head >= 0 ? &t->seg[t->seg_head] : NULL;
    float *rows;
    switch (op->part) {
    case TS_PART_EMBED:
        if (!bwd) {
            TS_CHECK(k->embedding_fwd(t->proj, inputs, emb->param, t->v0, t->Vr, t->T, t->C));
            if (t->l->tp == 1) TS_CHECK(copy_floats(t, t->cur, t->proj, T * C));
            return TS_OK;
        }
        if (t->l->sp) TS_CHECK(t->be->all_gather(comm(t, TS_GROUP_TP), t->dcur, t->dfull, Tl * C));
        return k->embedding_bwd(emb->grad, t->l->sp ? t->dfull : t->dcur, inputs, t->v0, t->Vr, t->T, t->C);
    case TS_PART_TP_EMBED:
        TS_CHECK(tp_close(t, t->proj, &rows));
        return copy_floats(t, t->cur, rows, Tl * C);
    case TS_PART_HEAD: {
        tr_acts *a;
        TS_CHECK(tr_acts_get(t, t->n_local, mb, &a));
        const float *lm_head = t->m->tied_embeddings ? emb->param : head->param + t->C;
        float *dlm_head = t->m->tied_embeddings ? emb->grad : head->grad + t->C;
        if (op->phase == TS_PHASE_WGRAD) {
            ts_status st = run_wgrad(t, -1, mb, TS_PART_HEAD);
            tr_acts_release(t, t->n_local, mb);
            return st;
        }
        if (!bwd) {
            TS_CHECK(copy_floats(t, a->xf, t->cur, Tl * C));
            TS_CHECK(k->rmsnorm_fwd(t->l->sp ? t->rows : a->lnf, a->rstdf, a->xf, head->param, t->Tl, t->C, EPS));
            if (t->l->sp) TS_CHECK(t->be->all_gather(comm(t, TS_GROUP_TP), t->rows, a->lnf, Tl * C));
            return k->linear_fwd(a->logits_v, a->lnf, lm_head, t->T, t->C, t->Vr);
        }
        TS_CHECK(zero_floats(t, t->dln, T * C));
        TS_CHECK(k->linear_bwd_input(t->dln, t->dlogits, lm_head, t->T, t->C, t->Vr));
        ts_op at = *op;
        at.layer = -1;
        TS_CHECK(stash_wgrad(t, &at, TS_PART_HEAD, dlm_head, t->dlogits, a->lnf, t->T, t->C, t->Vr));
        if (t->l->tp > 1) TS_CHECK(t->be->all_reduce(comm(t, TS_GROUP_TP), t->dln, t->dln, T * C));
        TS_CHECK(zero_floats(t, t->dcur, Tl * C));
        const float *dl = t->l->sp ? t->dln + (size_t)t->tp_i * Tl * C : t->dln;
        return norm_bwd(t, t->dcur, head->grad, dl, a->xf, head->param, a->rstdf);
    }
    case TS_PART_LOSS: {
        tr_acts *a;
        TS_CHECK(tr_acts_get(t, t->n_local, mb, &a));
        if (bwd) {
            float dloss = 1.0f / (float)((double)t->B * t->seq);
            return k->ce_bwd(t->dlogits, a->logits_v, a->ce_max, a->ce_sum, targets, t->v0, t->T, t->Vr, dloss);
        }
        TS_CHECK(k->ce_max(a->ce_max, a->logits_v, t->T, t->Vr));
        if (t->l->tp > 1) TS_CHECK(t->be->all_reduce_max(comm(t, TS_GROUP_TP), a->ce_max, a->ce_max, T));
        TS_CHECK(k->ce_sums(a->ce_sum, a->ce_tgt, a->logits_v, a->ce_max, targets, t->v0, t->T, t->Vr));
        if (t->l->tp > 1) {
            TS_CHECK(t->be->all_reduce(comm(t, TS_GROUP_TP), a->ce_sum, a->ce_sum, T));
            TS_CHECK(t->be->all_reduce(comm(t, TS_GROUP_TP), a->ce_tgt, a->ce_tgt, T));
        }
        TS_CHECK(k->ce_loss(t->scratch, a->ce_max, a->ce_sum, a->ce_tgt, t->T));
        if (t->tp_i == 0) { /* the per-token losses to the host, summed there */
            TS_CHECK(k->to_host(t->host_loss, t->scratch, T * sizeof(float)));
            double s = 0;
            for (size_t i = 0; i < T; i++) s += t->host_loss[i];
            t->loss_sum += s / ((double)t->B * t->seq);
        }
        return TS_OK;
    }
    case TS_PART_PP_ACT:
    case TS_PART_PP_GRAD: {
        float *buf = op->part == TS_PART_PP_ACT ? t->cur : t->dcur;
        int tag = 2 * op->chunk + (op->part == TS_PART_PP_GRAD);
        int peer = rank_at_stage(t, op->peer);
        if (op->kind == TS_OP_RECV) return t->be->recv(buf, Tl * C, peer, tag);
        if (t->n_sends == t->cap_sends) {
            int cap = t->cap_sends ? 2 * t->cap_sends : 16;
            ts_request **r = realloc(t->sends, (size_t)cap * sizeof *r);
            float **b = r ? realloc(t->send_bufs, (size_t)cap * sizeof *b) : NULL;
            if (r) t->sends = r;
            if (b) t->send_bufs = b;
            if (!r || !b) return TS_FAIL(TS_ERR_NOMEM, "out of memory for pipeline sends");
            t->cap_sends = cap;
        }
        /* The send reads its own copy: `buf` is overwritten by the next op before the send ends. */
        float *copy = NULL;
        TS_CHECK(t->be->alloc(Tl * C * sizeof *copy, (void **)&copy));
        ts_status st = copy_floats(t, copy, buf, Tl * C);
        if (st == TS_OK) st = t->be->send(copy, Tl * C, peer, tag, &t->sends[t->n_sends]);
        if (st != TS_OK) {
            t->be->free(copy);
            return st;
        }
        t->send_bufs[t->n_sends++] = copy;
        return TS_OK;
    }
    default:
        return TS_FAIL(TS_ERR_INPUT, "the executor has no handler for part \"%s\"", ts_part_names[op->part]);
    }
}

ts_status tr_run_op(ts_trainer *t, const ts_op *op) {
    switch (op->part) {
    case TS_PART_GRAD_REDUCE: return tr_grad_reduce(t, op);
    case TS_PART_PARAM_GATHER: return tr_param_gather(t, op);
    case TS_PART_OPTIMIZER: return tr_optimizer(t);
    case TS_PART_EMBED:
    case TS_PART_TP_EMBED:
    case TS_PART_HEAD:
    case TS_PART_LOSS:
    case TS_PART_PP_ACT:
    case TS_PART_PP_GRAD: return edge_op(t, op);
    default: break;
    }
    int j = t->local_of[op->layer];
    tr_acts *a;
    TS_CHECK(tr_acts_get(t, j, op->mb, &a));
    if (op->phase == TS_PHASE_WGRAD) {
        ts_status st = run_wgrad(t, op->layer, op->mb, op->part);
        /* The layer's last weight gradient: its activations are done with. */
        if (op->part == TS_PART_QKV) tr_acts_release(t, j, op->mb);
        return st;
    }
    if (op->phase == TS_PHASE_BWD) return bwd_layer_op(t, op, j, a);
    return fwd_layer_op(t, op, j, a);
}
