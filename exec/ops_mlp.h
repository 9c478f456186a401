/* The MLP block's ops of one layer for one micro-batch: NORM2, SP_GATHER_MLP, FC1, ACT, FC2 and
 * TP_MLP, forward (and recompute) and backward, and the block's ends, which the experts' ops
 * (exec/ops_moe.h) share: ACT serves a dense layer's slice and a MoE layer's expert rows alike.
 * `P` and `G` are the layer's parameters and gradients, `a` its cached activations for op->mb. */
#ifndef TS_OPS_MLP_H
#define TS_OPS_MLP_H

#include "exec/act_cache.h"
#include "exec/op_ctx.h"
#include "exec/param_layout.h"

/* Forward (phase FWD, or RECOMPUTE: the same without writing the slot's `cur`). */
ts_status tr_mlp_fwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_acts *a);
/* Backward (B); weight gradients are stashed in c->wq under (op->layer, op->mb, op->part). */
ts_status tr_mlp_bwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_layer G, tr_acts *a);

/* Forward, after the block's last compute op (FC2, or the experts' combine): without TP no
 * collective closes the block, so out = mid + proj here (and, in the forward, the next layer's
 * input `cur`). Nothing to do under TP. */
ts_status tr_mlp_close_fwd(const tr_op_ctx *c, const ts_op *op, tr_acts *a);
/* Backward, as the attention block's starts: an MLP block that no TP collective closed gets its
 * closing norm backward now. Nothing to do when none is open. */
ts_status tr_mlp_close_open_bwd(const tr_op_ctx *c, tr_layer P, tr_layer G, tr_acts *a);

#endif
