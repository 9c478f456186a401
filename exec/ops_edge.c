/* The embedding, head and loss (see ops_edge.h). */
#include "exec/ops_edge.h"

#include "exec/reference.h"

#define EPS TS_REF_NORM_EPS

static ts_status embed_op(const tr_op_ctx *c, const ts_op *op, tr_edge P, tr_edge G) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t T = (size_t)s->T, Tl = (size_t)s->Tl, C = (size_t)s->C;
    const int *inputs = c->data->dev_inputs + (size_t)op->mb * T;
    if (op->phase == TS_PHASE_FWD) {
        TS_CHECK(c->k->embedding_fwd(w->proj, inputs, P.embed, s->v0, s->Vr, s->T, s->C));
        if (s->l->tp == 1) TS_CHECK(tr_copy_floats(c, w->cur, w->proj, T * C));
        return TS_OK;
    }
    if (s->l->sp) TS_CHECK(c->be->all_gather(tr_comm(c, TS_GROUP_TP), w->dcur, w->dfull, Tl * C));
    return c->k->embedding_bwd(G.embed, s->l->sp ? w->dfull : w->dcur, inputs, s->v0, s->Vr, s->T, s->C);
}

static ts_status head_fwd(const tr_op_ctx *c, tr_edge P, tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t Tl = (size_t)s->Tl, C = (size_t)s->C;
    TS_CHECK(tr_copy_floats(c, a->xf, w->cur, Tl * C));
    TS_CHECK(c->k->rmsnorm_fwd(s->l->sp ? w->rows : a->lnf, a->rstdf, a->xf, P.final_norm, s->Tl, s->C, EPS));
    if (s->l->sp) TS_CHECK(c->be->all_gather(tr_comm(c, TS_GROUP_TP), w->rows, a->lnf, Tl * C));
    return c->k->linear_fwd(a->logits_v, a->lnf, P.lm_head, s->T, s->C, s->Vr);
}

/* The LM head's input gradient (its weight gradient stashed), summed across TP, then the final
 * norm's backward into dcur. */
static ts_status head_bwd(const tr_op_ctx *c, const ts_op *op, tr_edge P, tr_edge G, tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t T = (size_t)s->T, Tl = (size_t)s->Tl, C = (size_t)s->C;
    TS_CHECK(tr_zero_floats(c, w->dln, T * C));
    TS_CHECK(c->k->linear_bwd_input(w->dln, w->dlogits, P.lm_head, s->T, s->C, s->Vr));
    TS_CHECK(tr_wgrad_stash(c->wq, -1, op->mb, TS_PART_HEAD, G.lm_head, w->dlogits, a->lnf, s->T, s->C, s->Vr));
    if (s->l->tp > 1) TS_CHECK(c->be->all_reduce(tr_comm(c, TS_GROUP_TP), w->dln, w->dln, T * C));
    TS_CHECK(tr_zero_floats(c, w->dcur, Tl * C));
    const float *dl = s->l->sp ? w->dln + (size_t)s->tp_i * Tl * C : w->dln;
    return tr_norm_bwd(c, w->dcur, G.final_norm, dl, a->xf, P.final_norm, a->rstdf);
}

/* The vocab-parallel cross-entropy: the logits' max, the sums of exponentials and the targets'
 * logits reduced across TP; the per-token losses summed on the host. */
static ts_status loss_fwd(const tr_op_ctx *c, const int *targets, tr_acts *a) {
    const ts_kernels *k = c->k;
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t T = (size_t)s->T;
    ts_comm *tp = tr_comm(c, TS_GROUP_TP);
    TS_CHECK(k->ce_max(a->ce_max, a->logits_v, s->T, s->Vr));
    if (s->l->tp > 1) TS_CHECK(c->be->all_reduce_max(tp, a->ce_max, a->ce_max, T));
    TS_CHECK(k->ce_sums(a->ce_sum, a->ce_tgt, a->logits_v, a->ce_max, targets, s->v0, s->T, s->Vr));
    if (s->l->tp > 1) {
        TS_CHECK(c->be->all_reduce(tp, a->ce_sum, a->ce_sum, T));
        TS_CHECK(c->be->all_reduce(tp, a->ce_tgt, a->ce_tgt, T));
    }
    TS_CHECK(k->ce_loss(w->scratch, a->ce_max, a->ce_sum, a->ce_tgt, s->T));
    if (s->tp_i == 0) { /* the per-token losses to the host, summed there */
        TS_CHECK(k->to_host(w->host_loss, w->scratch, T * sizeof(float)));
        double sum = 0;
        for (size_t i = 0; i < T; i++) sum += w->host_loss[i];
        c->stats->loss_sum += sum / ((double)s->B * s->seq);
    }
    return TS_OK;
}

ts_status tr_edge_op(const tr_op_ctx *c, const ts_op *op, tr_edge P, tr_edge G, tr_acts *a) {
    const tr_shape *s = c->s;
    int bwd = op->phase != TS_PHASE_FWD;
    const int *targets = c->data->dev_targets + (size_t)op->mb * s->T;
    float *rows;
    switch (op->part) {
    case TS_PART_EMBED:
        return embed_op(c, op, P, G);
    case TS_PART_TP_EMBED:
        TS_CHECK(tr_tp_close(c, c->w->proj, &rows));
        return tr_copy_floats(c, c->w->cur, rows, (size_t)s->Tl * s->C);
    case TS_PART_HEAD:
        return bwd ? head_bwd(c, op, P, G, a) : head_fwd(c, P, a);
    case TS_PART_LOSS: {
        if (!bwd) return loss_fwd(c, targets, a);
        float dloss = 1.0f / (float)((double)s->B * s->seq);
        return c->k->ce_bwd(c->w->dlogits, a->logits_v, a->ce_max, a->ce_sum, targets, s->v0, s->T, s->Vr, dloss);
    }
    default:
        return TS_FAIL(TS_ERR_INPUT, "the edges have no op for part \"%s\"", ts_part_names[op->part]);
    }
}
