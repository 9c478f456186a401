/* Pipeline transfers and the DP stream's reductions and gathers (see ops_comm.h). */
#include <stdlib.h>

#include "exec/ops_comm.h"

static int rank_at_stage(const tr_op_ctx *c, int stage) {
    ts_coords co = c->rt->coords;
    co.pp = stage;
    return ts_rank_of(c->s->l, co);
}

static ts_status sends_reserve(tr_sends *q) {
    if (q->n < q->cap) return TS_OK;
    int cap = q->cap ? 2 * q->cap : 16;
    ts_request **r = realloc(q->reqs, (size_t)cap * sizeof *r);
    float **b = r ? realloc(q->bufs, (size_t)cap * sizeof *b) : NULL;
    if (r) q->reqs = r;
    if (b) q->bufs = b;
    if (!r || !b) return TS_FAIL(TS_ERR_NOMEM, "out of memory for pipeline sends");
    q->cap = cap;
    return TS_OK;
}

ts_status tr_pipe_op(const tr_op_ctx *c, tr_sends *sends, const ts_op *op) {
    size_t n = (size_t)c->s->Tl * c->s->C;
    float *buf = op->part == TS_PART_PP_ACT ? c->w->cur : c->w->dcur;
    int tag = 2 * op->chunk + (op->part == TS_PART_PP_GRAD);
    int peer = rank_at_stage(c, op->peer);
    if (op->kind == TS_OP_RECV) return c->be->recv(buf, n, peer, tag);
    TS_CHECK(sends_reserve(sends));
    /* The send reads its own copy: `buf` is overwritten by the next op before the send ends. */
    float *copy = NULL;
    TS_CHECK(c->be->alloc(n * sizeof *copy, (void **)&copy));
    ts_status st = tr_copy_floats(c, copy, buf, n);
    if (st == TS_OK) st = c->be->send(copy, n, peer, tag, &sends->reqs[sends->n]);
    if (st != TS_OK) {
        c->be->free(copy);
        return st;
    }
    sends->bufs[sends->n++] = copy;
    return TS_OK;
}

ts_status tr_sends_wait(tr_sends *q, const ts_backend *be) {
    for (int i = 0; i < q->n; i++) {
        TS_CHECK(be->wait(q->reqs[i]));
        be->free(q->bufs[i]);
    }
    q->n = 0;
    return TS_OK;
}

void tr_sends_free(tr_sends *q, const ts_backend *be) {
    for (int i = 0; i < q->n; i++) {
        be->wait(q->reqs[i]);
        be->free(q->bufs[i]);
    }
    free(q->reqs);
    free(q->bufs);
    *q = (tr_sends){0};
}

ts_status tr_grad_reduce_op(tr_store *st, const int32_t *segs, int n) {
    for (int k = 0; k < n; k++) TS_CHECK(tr_store_reduce(st, segs[k]));
    return TS_OK;
}

ts_status tr_param_gather_op(tr_store *st, const ts_op *op, const int32_t *segs, int n) {
    if (op->phase != TS_PHASE_STEP) return tr_store_gather_layer(st, st->s->local_of[op->layer]);
    for (int k = 0; k < n; k++) TS_CHECK(tr_store_gather(st, segs[k]));
    return TS_OK;
}
