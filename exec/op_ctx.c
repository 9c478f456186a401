/* The ops' workspace and the steps several blocks share (see op_ctx.h). */
#include <stdlib.h>

#include "exec/op_ctx.h"
#include "planner/memory_exec_buffers.h"

/* The workspace's backend tensors, in one order for allocating and freeing. */
#define WORK_TENSORS(w)                                                                                         \
    {&(w)->cur, &(w)->dcur, &(w)->dmid, &(w)->dfull, &(w)->dln, &(w)->proj, &(w)->rows, &(w)->datt, &(w)->dqkv, \
     &(w)->ring[0], &(w)->ring[1], &(w)->ring_out, &(w)->ring_lse, &(w)->dact, &(w)->dgate, &(w)->dup,         \
     &(w)->dxe, &(w)->dye, &(w)->dxr, &(w)->dyr, &(w)->dweight, &(w)->dlogits_r, &(w)->dlogits,              \
     &(w)->scratch, &(w)->norm_grad, &(w)->router_grad}

ts_status tr_work_init(tr_work *w, const tr_shape *s, const ts_backend *be, tr_tally *tally) {
    *w = (tr_work){0};
    size_t T = (size_t)s->T, ep = (size_t)s->l->ep;
    size_t TK = T * (size_t)(s->K > 0 ? s->K : 1);
    float **bufs[] = WORK_TENSORS(w);
    _Static_assert(sizeof bufs / sizeof bufs[0] == TS_EXEC_WORK_TENSORS, "the planner sizes every tensor");
    /* Sized by the planner's function, which prices CPU-rank plans' buffers with the same sizes. */
    size_t sizes[TS_EXEC_WORK_TENSORS];
    ts_exec_dims d;
    tr_shape_dims(s, &d);
    ts_exec_work_floats(&d, s->cp > 1 ? (size_t)s->Ts : 0, sizes);
    for (size_t i = 0; i < TS_EXEC_WORK_TENSORS; i++)
        TS_CHECK(tr_alloc_floats(be, tally, TR_MEM_BUFFERS, sizes[i], bufs[i]));
    w->ep_counts = calloc(ep * (size_t)(s->El > 0 ? s->El : 1), sizeof(int));
    w->a2a = calloc(4 * ep, sizeof(int));
    if (!w->ep_counts || !w->a2a) return TS_FAIL(TS_ERR_NOMEM, "out of memory for all-to-all counts");
    w->host_expert = malloc(TK * sizeof(int));
    w->host_slot = malloc(TK * sizeof(int));
    w->host_slot_token = malloc(TK * sizeof(int));
    w->host_loss = malloc(T * sizeof(float) + 1);
    if (!w->host_expert || !w->host_slot || !w->host_slot_token || !w->host_loss)
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for the host's routing and loss buffers");
    return TS_OK;
}

void tr_work_free(tr_work *w, const ts_backend *be) {
    if (w->ring_send) be->wait(w->ring_send); /* a step that failed between its ring ops */
    float **bufs[] = WORK_TENSORS(w);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(*bufs[i]);
    free(w->ep_counts);
    free(w->a2a);
    free(w->host_expert);
    free(w->host_slot);
    free(w->host_slot_token);
    free(w->host_loss);
    *w = (tr_work){0};
}

ts_comm *tr_comm(const tr_op_ctx *c, ts_group g) { return c->rt->comm[g]; }

ts_status tr_copy_floats(const tr_op_ctx *c, float *dst, const float *src, size_t n) {
    return c->k->copy(dst, src, n * sizeof(float));
}

ts_status tr_zero_floats(const tr_op_ctx *c, float *p, size_t n) { return c->k->zero(p, n * sizeof(float)); }

ts_status tr_tp_close(const tr_op_ctx *c, float *partial, float **rows) {
    const tr_shape *s = c->s;
    size_t n = (size_t)s->Tl * s->C;
    if (s->l->sp) {
        TS_CHECK(c->be->reduce_scatter(tr_comm(c, TS_GROUP_TP), partial, c->w->rows, n));
        *rows = c->w->rows;
    } else {
        if (s->l->tp > 1) TS_CHECK(c->be->all_reduce(tr_comm(c, TS_GROUP_TP), partial, partial, n));
        *rows = partial;
    }
    return TS_OK;
}

ts_status tr_norm_bwd(const tr_op_ctx *c, float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd) {
    const tr_shape *s = c->s;
    float *ng = c->w->norm_grad;
    if (!s->l->sp) return c->k->rmsnorm_bwd(dx, dw, dout, x, w, rstd, s->Tl, s->C);
    TS_CHECK(tr_zero_floats(c, ng, (size_t)s->C));
    TS_CHECK(c->k->rmsnorm_bwd(dx, ng, dout, x, w, rstd, s->Tl, s->C));
    TS_CHECK(c->be->all_reduce(tr_comm(c, TS_GROUP_TP), ng, ng, (size_t)s->C));
    return c->k->add(dw, dw, ng, (size_t)s->C);
}

ts_status tr_sp_gather_bwd(const tr_op_ctx *c) {
    return c->be->all_gather(tr_comm(c, TS_GROUP_TP), c->w->dcur, c->w->dfull, (size_t)c->s->Tl * c->s->C);
}
