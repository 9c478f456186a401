/* The experts' ops of one MoE layer for one micro-batch: ROUTER, DISPATCH, EXPERT_FC1,
 * EXPERT_FC2 and COMBINE, forward (and recompute) and backward. The router's top-k choices go to
 * the host, which plans the dispatch (ts_moe_plan); under EP the rows travel to the ranks owning
 * their experts and back by all-to-all-v, each rank's experts processing the rows of every EP
 * peer in expert-major order. With the experts apart from TP (etp = 1 < tp) each rank routes its
 * own Tm = Tl rows over an EP group that spans TP ranks, to whole experts. The block's norm, activation and ends are the MLP block's
 * (exec/ops_mlp.h). The router's spread of tokens is added to c->stats. */
#ifndef TS_OPS_MOE_H
#define TS_OPS_MOE_H

#include "exec/act_cache.h"
#include "exec/op_ctx.h"
#include "exec/param_layout.h"

ts_status tr_moe_fwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_acts *a);
/* Weight gradients are stashed in c->wq under (op->layer, op->mb, op->part). */
ts_status tr_moe_bwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_layer G, tr_acts *a);
/* The router's W ops: its stashed weight gradient run into G.router; with the experts apart from
 * TP (exec/trainer_shape.h) the GEMM runs into the workspace and the TP all-reduce the program
 * puts after it (an op of part ROUTER, kind collective) sums the ranks' shares into G.router. */
ts_status tr_moe_router_wgrad(const tr_op_ctx *c, const ts_op *op, tr_layer G);

#endif
