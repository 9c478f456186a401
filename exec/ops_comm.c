/* Pipeline transfers and the DP stream's reductions and gathers (see ops_comm.h). */
#include <stdlib.h>

#include "exec/ops_comm.h"
#include "program/schedule.h"

static int rank_at_stage(const tr_op_ctx *c, int stage) {
    ts_coords co = c->rt->coords;
    co.pp = stage;
    return ts_rank_of(c->s->l, co);
}

void tr_sends_init(tr_sends *sends, tr_tally *tally) { *sends = (tr_sends){.tally = tally}; }

static ts_status sends_reserve(tr_sends *q) {
    if (q->n < q->cap) return TS_OK;
    int cap = q->cap ? 2 * q->cap : 16;
    ts_request **r = realloc(q->reqs, (size_t)cap * sizeof *r);
    float **b = r ? realloc(q->bufs, (size_t)cap * sizeof *b) : NULL;
    size_t *f = b ? realloc(q->floats, (size_t)cap * sizeof *f) : NULL;
    if (r) q->reqs = r;
    if (b) q->bufs = b;
    if (f) q->floats = f;
    if (!r || !b || !f) return TS_FAIL(TS_ERR_NOMEM, "out of memory for pipeline sends");
    q->cap = cap;
    return TS_OK;
}

/* Send i's copy freed once its send has completed (or been waited for after a failure). */
static void sends_release(tr_sends *q, const ts_backend *be, int i) {
    be->free(q->bufs[i]);
    tr_tally_add(q->tally, TR_MEM_BUFFERS, -(double)q->floats[i] * sizeof(float));
}

/* Posts a send of `src` (n floats) to `peer`, from a copy of it that `sends` owns. */
static ts_status send_copy(const tr_op_ctx *c, tr_sends *sends, const float *src, size_t n, int peer, int tag) {
    TS_CHECK(sends_reserve(sends));
    float *copy = NULL;
    TS_CHECK(tr_alloc_floats(c->be, sends->tally, TR_MEM_BUFFERS, n, &copy));
    sends->bufs[sends->n] = copy;
    sends->floats[sends->n] = n;
    ts_status st = tr_copy_floats(c, copy, src, n);
    if (st == TS_OK) st = c->be->send(copy, n, peer, tag, &sends->reqs[sends->n]);
    if (st != TS_OK) {
        sends_release(sends, c->be, sends->n);
        return st;
    }
    sends->n++;
    return TS_OK;
}

ts_status tr_pipe_op(const tr_op_ctx *c, tr_sends *sends, const ts_op *op) {
    size_t n = (size_t)c->s->Tl * c->s->C;
    float *buf = op->part == TS_PART_PP_ACT ? c->w->cur : c->w->dcur;
    int tag = 2 * op->chunk + (op->part == TS_PART_PP_GRAD);
    int peer = rank_at_stage(c, op->peer);
    if (op->kind == TS_OP_RECV) return c->be->recv(buf, n, peer, tag);
    /* The send reads its own copy: `buf` is overwritten by the next op before the send ends. */
    return send_copy(c, sends, buf, n, peer, tag);
}

/* One segment's gradients sent to the other copy, or the other copy's received and added. */
static ts_status mirror_segment(const tr_op_ctx *c, tr_sends *sends, tr_segment *g, const ts_op *op, int peer,
                                int tag) {
    if (g->n == 0) return TS_OK;
    if (op->kind == TS_OP_SEND) return send_copy(c, sends, g->grad, g->n, peer, tag);
    float *in = NULL;
    TS_CHECK(tr_alloc_floats(c->be, sends->tally, TR_MEM_BUFFERS, g->n, &in));
    ts_status st = c->be->recv(in, g->n, peer, tag);
    if (st == TS_OK) st = c->k->add(g->grad, g->grad, in, g->n);
    c->be->free(in);
    tr_tally_add(sends->tally, TR_MEM_BUFFERS, -(double)g->n * sizeof *in);
    return st;
}

ts_status tr_mirror_op(const tr_op_ctx *c, tr_sends *sends, tr_store *st, const ts_op *op) {
    const tr_shape *s = c->s;
    const ts_layout *l = s->l;
    int model = ts_chunk_model(l, op->chunk), local = -1;
    for (int k = 0; k < l->vpp; k++)
        if (ts_chunk_model(l, ts_chunk_global(l, s->stage, k)) == model) local = k;
    if (local < 0) return TS_FAIL(TS_ERR_INPUT, "stage %d holds no copy of model chunk %d", s->stage, model);
    /* Tags past the pipeline transfers' 2·chunk + 1 < 4·pp. */
    int peer = rank_at_stage(c, op->peer), tag = 4 * l->pp + model, g = ts_chunk_global(l, s->stage, local);
    for (int j = 0; j < s->n_local; j++)
        if (s->chunk_of[j] == local) {
            TS_CHECK(mirror_segment(c, sends, &st->seg[2 * j], op, peer, tag));
            TS_CHECK(mirror_segment(c, sends, &st->seg[2 * j + 1], op, peer, tag));
        }
    if (ts_chunk_opens(l, g)) TS_CHECK(mirror_segment(c, sends, &st->seg[st->seg_embed], op, peer, tag));
    if (ts_chunk_closes(l, g)) TS_CHECK(mirror_segment(c, sends, &st->seg[st->seg_head], op, peer, tag));
    return TS_OK;
}

ts_status tr_sends_wait(tr_sends *q, const ts_backend *be) {
    /* Every send is waited for (the wait frees its request, failed or not) and its copy released,
     * also after a failure, so the list is empty whatever happens; the first failure is returned. */
    ts_status res = TS_OK;
    for (int i = 0; i < q->n; i++) {
        ts_status st = be->wait(q->reqs[i]);
        if (res == TS_OK) res = st;
        sends_release(q, be, i);
    }
    q->n = 0;
    return res;
}

void tr_sends_free(tr_sends *q, const ts_backend *be) {
    for (int i = 0; i < q->n; i++) {
        be->wait(q->reqs[i]);
        sends_release(q, be, i);
    }
    free(q->reqs);
    free(q->bufs);
    free(q->floats);
    *q = (tr_sends){0};
}

ts_status tr_grad_reduce_op(tr_store *st, const int32_t *segs, int n) {
    for (int k = 0; k < n; k++) TS_CHECK(tr_store_reduce(st, segs[k]));
    return TS_OK;
}

ts_status tr_param_gather_op(tr_store *st, const ts_op *op, const int32_t *segs, int n) {
    if (op->phase != TS_PHASE_STEP) return tr_store_gather_copy(st, segs, n);
    for (int k = 0; k < n; k++) TS_CHECK(tr_store_gather(st, segs[k]));
    return TS_OK;
}
