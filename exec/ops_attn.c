/* The attention block's ops, with ring attention under CP (see ops_attn.h). */
#include "exec/ops_attn.h"

#include "exec/reference.h"

#define EPS TS_REF_NORM_EPS

/* Attention of `batch` sequences of micro-batch mb from sequence b on: their queries against keys
 * and values k, v (row stride ld) at positions k_pos. */
static ts_attn_shape attn_shape_of(const tr_op_ctx *c, int mb, int b, int batch, int ld, const int *k_pos) {
    const tr_shape *s = c->s;
    size_t T0 = (size_t)b * s->Ts;
    return (ts_attn_shape){.Tq = s->Ts, .Tk = s->Ts, .H = s->Hr, .KV = s->KVr, .D = s->D, .ldq = s->QKVr,
                           .ldk = ld, .ldv = ld, .ldo = s->Qr,
                           .q_pos = c->data->dev_pos + (size_t)mb * s->T + T0, .k_pos = k_pos, .batch = batch};
}

/* ---- Context parallelism: ring attention ---------------------------------------------------- */

/* Ring attention (Liu et al. 2023, "Ring Attention with Blockwise Transformers"), with Megatron's
 * load-balanced causal chunks (each CP member holds chunks cp_i and 2·cp−1−cp_i of every sequence,
 * exec/trainer_data.h). Member i's keys and values travel the ring i → i+1 in cp − 1 steps;
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
static int cp_peer(const tr_op_ctx *c, int step) {
    ts_coords co = c->rt->coords;
    co.cp = ((c->s->cp_i + step) % c->s->cp + c->s->cp) % c->s->cp;
    return ts_rank_of(c->s->l, co);
}

/* The key positions of the block ring step `step` holds: its owner's. */
static const int *ring_k_pos(const tr_op_ctx *c, int step) {
    const tr_shape *s = c->s;
    int owner = ((s->cp_i - step) % s->cp + s->cp) % s->cp;
    return c->data->dev_kv_pos + (size_t)owner * s->Ts;
}

/* Sends `count` floats from `send` to the next member and receives as many into `recv` from the
 * previous one. */
static ts_status ring_swap(const tr_op_ctx *c, const float *send, float *recv, size_t count) {
    ts_request *req = NULL;
    TS_CHECK(c->be->send(send, count, cp_peer(c, 1), RING_TAG, &req));
    ts_status st = c->be->recv(recv, count, cp_peer(c, -1), RING_TAG);
    ts_status sw = c->be->wait(req);
    TS_CHECK(st);
    return sw;
}

static ts_status ring_fwd_start(const tr_op_ctx *c, tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t kv = 2 * (size_t)s->KVD;
    w->ring_cur = 0;
    TS_CHECK(c->k->copy_rows(w->ring[0], kv, a->qkv + s->Qr, (size_t)s->QKVr, (size_t)s->T, kv));
    return c->be->send(w->ring[0], (size_t)s->T * kv, cp_peer(c, 1), RING_TAG, &w->ring_send);
}

/* Ring step `step` > 0 of the forward: the block sent on last step is done with; the previous
 * member's arrives in the other one, which becomes the block in use and, but for the last step,
 * is sent on. */
static ts_status ring_fwd_advance(const tr_op_ctx *c, int step, size_t count) {
    tr_work *w = c->w;
    int cur = w->ring_cur;
    TS_CHECK(c->be->recv(w->ring[1 - cur], count, cp_peer(c, -1), RING_TAG));
    ts_request *done = w->ring_send;
    w->ring_send = NULL;
    TS_CHECK(c->be->wait(done));
    w->ring_cur = 1 - cur;
    if (step == c->s->cp - 1) return TS_OK;
    return c->be->send(w->ring[w->ring_cur], count, cp_peer(c, 1), RING_TAG, &w->ring_send);
}

static ts_status ring_fwd(const tr_op_ctx *c, tr_acts *a, int mb) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t kv = 2 * (size_t)s->KVD, count = (size_t)s->T * kv;
    if (w->ring_send == NULL) return TS_FAIL(TS_ERR_INPUT, "ring attention: no CP_RING op before ATTN");
    for (int step = 0; step < s->cp; step++) {
        if (step > 0) TS_CHECK(ring_fwd_advance(c, step, count));
        const int *k_pos = ring_k_pos(c, step);
        for (int b = 0; b < s->mbs; b++) {
            size_t T0 = (size_t)b * s->Ts;
            const float *q = a->qkv + T0 * s->QKVr, *kk = w->ring[w->ring_cur] + T0 * kv;
            ts_attn_shape sh = attn_shape_of(c, mb, b, 1, (int)kv, k_pos);
            float *out = a->att + T0 * s->Qr, *lse = a->lse + T0 * s->Hr;
            if (step == 0) {
                TS_CHECK(c->k->attention_fwd(out, lse, q, kk, kk + s->KVD, &sh, w->scratch));
                continue;
            }
            TS_CHECK(c->k->attention_fwd(w->ring_out, w->ring_lse, q, kk, kk + s->KVD, &sh, w->scratch));
            TS_CHECK(c->k->attention_merge(out, lse, w->ring_out, w->ring_lse, s->Ts, s->Hr, s->D, s->Qr));
        }
    }
    return TS_OK;
}

static ts_status ring_bwd_start(const tr_op_ctx *c, const tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t kv = 2 * (size_t)s->KVD, n = (size_t)s->T * kv;
    w->ring_cur = 0;
    TS_CHECK(c->k->copy_rows(w->ring[0], kv, a->qkv + s->Qr, (size_t)s->QKVr, (size_t)s->T, kv));
    return tr_zero_floats(c, w->ring[0] + n, n);
}

/* dq into dqkv; the dk, dv of the block in use into its accumulator. */
static ts_status ring_bwd(const tr_op_ctx *c, const tr_acts *a, int mb) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t kv = 2 * (size_t)s->KVD, n = (size_t)s->T * kv;
    for (int step = 0; step < s->cp; step++) {
        if (step > 0) { /* block and accumulator on to the next member, the previous one's in */
            TS_CHECK(ring_swap(c, w->ring[w->ring_cur], w->ring[1 - w->ring_cur], 2 * n));
            w->ring_cur = 1 - w->ring_cur;
        }
        const int *k_pos = ring_k_pos(c, step);
        for (int b = 0; b < s->mbs; b++) {
            size_t T0 = (size_t)b * s->Ts;
            const float *q = a->qkv + T0 * s->QKVr, *kk = w->ring[w->ring_cur] + T0 * kv;
            float *dk = w->ring[w->ring_cur] + n + T0 * kv;
            ts_attn_shape sh = attn_shape_of(c, mb, b, 1, (int)kv, k_pos);
            TS_CHECK(c->k->attention_bwd(w->dqkv + T0 * s->QKVr, dk, dk + s->KVD, w->datt + T0 * s->Qr, q, kk,
                                         kk + s->KVD, a->att + T0 * s->Qr, a->lse + T0 * s->Hr, &sh));
        }
    }
    return TS_OK;
}

/* The accumulator in use belongs to the next member: one hop, and ours arrives from the previous
 * one; then rotary's backward on the keys' part and into dqkv. */
static ts_status ring_bwd_home(const tr_op_ctx *c, int mb) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t kv = 2 * (size_t)s->KVD, n = (size_t)s->T * kv;
    int cur = w->ring_cur;
    float *home = w->ring[1 - cur] + n;
    TS_CHECK(ring_swap(c, w->ring[cur] + n, home, n));
    TS_CHECK(c->k->rope_bwd(home, (int)kv, c->data->dev_pos + (size_t)mb * s->T, s->T, s->KVr, s->D,
                            TS_REF_ROPE_THETA));
    return c->k->copy_rows(w->dqkv + s->Qr, (size_t)s->QKVr, home, kv, (size_t)s->T, kv);
}

/* ---- The block --------------------------------------------------------------------------------- */

ts_status tr_attn_fwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_acts *a) {
    const ts_kernels *k = c->k;
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    int mb = op->mb;
    size_t T = (size_t)s->T, Tl = (size_t)s->Tl, C = (size_t)s->C;
    const int *pos = c->data->dev_pos + (size_t)mb * T;
    float *rows;
    switch (op->part) {
    case TS_PART_NORM1:
        if (op->phase == TS_PHASE_FWD) TS_CHECK(tr_copy_floats(c, a->x, w->cur, Tl * C));
        return k->rmsnorm_fwd(s->l->sp ? w->rows : a->ln1, a->rstd1, a->x, P.attn_norm, s->Tl, s->C, EPS);
    case TS_PART_SP_GATHER_ATTN:
        return c->be->all_gather(tr_comm(c, TS_GROUP_TP), w->rows, a->ln1, Tl * C);
    case TS_PART_QKV:
        TS_CHECK(k->linear_fwd(a->qkv, a->ln1, P.qkv, s->T, s->C, s->QKVr));
        return k->rope_fwd(a->qkv, s->QKVr, pos, s->T, s->Hr + s->KVr, s->D, TS_REF_ROPE_THETA);
    case TS_PART_CP_RING:
        return ring_fwd_start(c, a);
    case TS_PART_ATTN: {
        if (s->cp > 1) return ring_fwd(c, a, mb);
        /* The micro-batch's sequences in one call: one launch on a GPU, as the program's op. */
        const float *q = a->qkv;
        ts_attn_shape sh = attn_shape_of(c, mb, 0, s->mbs, s->QKVr, pos);
        return k->attention_fwd(a->att, a->lse, q, q + s->Qr, q + s->Qr + s->KVD, &sh, w->scratch);
    }
    case TS_PART_PROJ:
        TS_CHECK(k->linear_fwd(w->proj, a->att, P.attn_out, s->T, s->Qr, s->C));
        if (s->l->tp == 1) TS_CHECK(k->add(a->mid, a->x, w->proj, Tl * C));
        return TS_OK;
    case TS_PART_TP_ATTN:
        TS_CHECK(tr_tp_close(c, w->proj, &rows));
        return k->add(a->mid, a->x, rows, Tl * C);
    default:
        return TS_FAIL(TS_ERR_INPUT, "the attention block has no forward for part \"%s\"", ts_part_names[op->part]);
    }
}

/* The attention block's end in backward: dcur = dmid + the norm's backward of dln. */
static ts_status finish_attention(const tr_op_ctx *c, tr_acts *a, tr_layer P, tr_layer G, const float *dln_rows) {
    TS_CHECK(tr_copy_floats(c, c->w->dcur, c->w->dmid, (size_t)c->s->Tl * c->s->C));
    return tr_norm_bwd(c, c->w->dcur, G.attn_norm, dln_rows, a->x, P.attn_norm, a->rstd1);
}

/* The attention's backward: dq, dk, dv into dqkv, then rotary's backward on q (and k, when the
 * keys are all local; under CP the keys' part is done when their gradients come home). */
static ts_status attention_bwd(const tr_op_ctx *c, const tr_acts *a, int mb) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t T = (size_t)s->T;
    const int *pos = c->data->dev_pos + (size_t)mb * T;
    TS_CHECK(tr_zero_floats(c, w->dqkv, T * s->QKVr));
    if (s->cp > 1) {
        TS_CHECK(ring_bwd(c, a, mb));
    } else {
        const float *q = a->qkv;
        float *dq = w->dqkv;
        ts_attn_shape sh = attn_shape_of(c, mb, 0, s->mbs, s->QKVr, pos);
        TS_CHECK(c->k->attention_bwd(dq, dq + s->Qr, dq + s->Qr + s->KVD, w->datt, q, q + s->Qr, q + s->Qr + s->KVD,
                                     a->att, a->lse, &sh));
    }
    return c->k->rope_bwd(w->dqkv, s->QKVr, pos, s->T, s->Hr + (s->cp > 1 ? 0 : s->KVr), s->D, TS_REF_ROPE_THETA);
}

ts_status tr_attn_bwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_layer G, tr_acts *a) {
    const ts_kernels *k = c->k;
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t T = (size_t)s->T, Tl = (size_t)s->Tl, C = (size_t)s->C;
    float *rows;
    switch (op->part) {
    case TS_PART_NORM1: /* the attention block's backward starts: keep the residual's gradient */
        TS_CHECK(tr_copy_floats(c, w->dmid, w->dcur, Tl * C));
        if (!s->l->sp) TS_CHECK(tr_copy_floats(c, w->dfull, w->dcur, T * C));
        return TS_OK;
    case TS_PART_SP_GATHER_ATTN:
        return tr_sp_gather_bwd(c);
    case TS_PART_PROJ:
        TS_CHECK(tr_zero_floats(c, w->datt, T * s->Qr));
        TS_CHECK(k->linear_bwd_input(w->datt, w->dfull, P.attn_out, s->T, s->Qr, s->C));
        return tr_wgrad_stash(c->wq, op->layer, op->mb, TS_PART_PROJ, G.attn_out, w->dfull, a->att, s->T, s->Qr, s->C);
    case TS_PART_ATTN:
        return attention_bwd(c, a, op->mb);
    case TS_PART_CP_RING: /* before the attention's backward (the program's all-gather), then after */
        return op->coll == TS_COLL_ALLGATHER ? ring_bwd_start(c, a) : ring_bwd_home(c, op->mb);
    case TS_PART_QKV:
        TS_CHECK(tr_zero_floats(c, w->dln, T * C));
        TS_CHECK(k->linear_bwd_input(w->dln, w->dqkv, P.qkv, s->T, s->C, s->QKVr));
        TS_CHECK(tr_wgrad_stash(c->wq, op->layer, op->mb, TS_PART_QKV, G.qkv, w->dqkv, a->ln1, s->T, s->C, s->QKVr));
        if (s->l->tp == 1) return finish_attention(c, a, P, G, w->dln);
        return TS_OK;
    case TS_PART_TP_ATTN:
        TS_CHECK(tr_tp_close(c, w->dln, &rows));
        return finish_attention(c, a, P, G, rows);
    default:
        return TS_FAIL(TS_ERR_INPUT, "the attention block has no backward for part \"%s\"", ts_part_names[op->part]);
    }
}
