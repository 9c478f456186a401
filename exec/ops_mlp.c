/* The MLP block's ops (see ops_mlp.h). */
#include "exec/ops_mlp.h"

#include "exec/reference.h"

#define EPS TS_REF_NORM_EPS

/* Elements of the activation: a dense layer's (T, Fr), a MoE layer's expert rows (rows, Fer). */
static size_t act_size(const tr_op_ctx *c, const ts_op *op, const tr_acts *a) {
    const tr_shape *s = c->s;
    int moe = tr_shape_is_moe(s, op->layer);
    return (size_t)(moe ? a->rows : s->T) * (moe ? s->Fer : s->Fr);
}

/* out = mid + the block's output rows, and in the forward the next layer's input. */
static ts_status close_block(const tr_op_ctx *c, const ts_op *op, tr_acts *a, const float *rows) {
    size_t n = (size_t)c->s->Tl * c->s->C;
    TS_CHECK(c->k->add(a->out, a->mid, rows, n));
    if (op->phase == TS_PHASE_FWD) TS_CHECK(tr_copy_floats(c, c->w->cur, a->out, n));
    return TS_OK;
}

ts_status tr_mlp_close_fwd(const tr_op_ctx *c, const ts_op *op, tr_acts *a) {
    if (c->s->l->tp > 1 && tr_shape_mlp_tp(c->s, op->layer)) return TS_OK; /* TP_MLP closes it */
    return close_block(c, op, a, c->w->proj);
}

ts_status tr_mlp_fwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_acts *a) {
    const ts_kernels *k = c->k;
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    float *rows;
    switch (op->part) {
    case TS_PART_NORM2: /* under SP into the rows SP_GATHER_MLP gathers, unless the block has none */
        return k->rmsnorm_fwd(s->l->sp && tr_shape_mlp_tp(s, op->layer) ? w->rows : a->ln2, a->rstd2, a->mid,
                              P.mlp_norm, s->Tl, s->C, EPS);
    case TS_PART_SP_GATHER_MLP:
        return c->be->all_gather(tr_comm(c, TS_GROUP_TP), w->rows, a->ln2, (size_t)s->Tl * s->C);
    case TS_PART_FC1:
        TS_CHECK(k->linear_fwd(a->gate, a->ln2, P.gate, s->T, s->C, s->Fr));
        return k->linear_fwd(a->up, a->ln2, P.up, s->T, s->C, s->Fr);
    case TS_PART_ACT:
        return k->swiglu_fwd(a->act, a->gate, a->up, act_size(c, op, a));
    case TS_PART_FC2:
        TS_CHECK(k->linear_fwd(w->proj, a->act, P.down, s->T, s->Fr, s->C));
        return tr_mlp_close_fwd(c, op, a);
    case TS_PART_TP_MLP:
        TS_CHECK(tr_tp_close(c, w->proj, &rows));
        return close_block(c, op, a, rows);
    default:
        return TS_FAIL(TS_ERR_INPUT, "the MLP block has no forward for part \"%s\"", ts_part_names[op->part]);
    }
}

/* The MLP block's end in backward: dcur = dmid + the norm's backward of dln. */
static ts_status finish_mlp(const tr_op_ctx *c, tr_acts *a, tr_layer P, tr_layer G, const float *dln_rows) {
    TS_CHECK(tr_copy_floats(c, c->w->dcur, c->w->dmid, (size_t)c->s->Tl * c->s->C));
    return tr_norm_bwd(c, c->w->dcur, G.mlp_norm, dln_rows, a->mid, P.mlp_norm, a->rstd2);
}

ts_status tr_mlp_close_open_bwd(const tr_op_ctx *c, tr_layer P, tr_layer G, tr_acts *a) {
    if (!c->w->mlp_open) return TS_OK;
    c->w->mlp_open = 0;
    return finish_mlp(c, a, P, G, c->w->dln);
}

ts_status tr_mlp_bwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_layer G, tr_acts *a) {
    const ts_kernels *k = c->k;
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t T = (size_t)s->T, Tl = (size_t)s->Tl, C = (size_t)s->C;
    int layer = op->layer, mb = op->mb;
    float *rows;
    switch (op->part) {
    case TS_PART_NORM2: /* the MLP block's backward starts: keep the residual's gradient */
        TS_CHECK(tr_copy_floats(c, w->dmid, w->dcur, Tl * C));
        if (!s->l->sp || !tr_shape_mlp_tp(s, layer)) TS_CHECK(tr_copy_floats(c, w->dfull, w->dcur, Tl * C));
        w->mlp_open = 1;
        return TS_OK;
    case TS_PART_SP_GATHER_MLP:
        return tr_sp_gather_bwd(c);
    case TS_PART_FC2:
        TS_CHECK(tr_zero_floats(c, w->dact, T * s->Fr));
        TS_CHECK(k->linear_bwd_input(w->dact, w->dfull, P.down, s->T, s->Fr, s->C));
        return tr_wgrad_stash(c->wq, layer, mb, TS_PART_FC2, G.down, w->dfull, a->act, s->T, s->Fr, s->C);
    case TS_PART_ACT:
        return k->swiglu_bwd(w->dgate, w->dup, w->dact, a->gate, a->up, act_size(c, op, a));
    case TS_PART_FC1:
        TS_CHECK(tr_zero_floats(c, w->dln, T * C));
        TS_CHECK(k->linear_bwd_input(w->dln, w->dgate, P.gate, s->T, s->C, s->Fr));
        TS_CHECK(k->linear_bwd_input(w->dln, w->dup, P.up, s->T, s->C, s->Fr));
        TS_CHECK(tr_wgrad_stash(c->wq, layer, mb, TS_PART_FC1, G.gate, w->dgate, a->ln2, s->T, s->C, s->Fr));
        return tr_wgrad_stash(c->wq, layer, mb, TS_PART_FC1, G.up, w->dup, a->ln2, s->T, s->C, s->Fr);
    case TS_PART_TP_MLP:
        TS_CHECK(tr_tp_close(c, w->dln, &rows));
        w->mlp_open = 0;
        return finish_mlp(c, a, P, G, rows);
    default:
        return TS_FAIL(TS_ERR_INPUT, "the MLP block has no backward for part \"%s\"", ts_part_names[op->part]);
    }
}
