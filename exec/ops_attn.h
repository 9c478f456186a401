/* The attention block's ops of one layer for one micro-batch: NORM1, SP_GATHER_ATTN, QKV,
 * CP_RING, ATTN, PROJ and TP_ATTN, forward (and recompute) and backward; under CP, ring attention
 * (ops_attn.c says how the program's ops map onto it). `P` and `G` are the layer's parameters and
 * gradients, `a` its cached activations for op->mb. */
#ifndef TS_OPS_ATTN_H
#define TS_OPS_ATTN_H

#include "exec/act_cache.h"
#include "exec/op_ctx.h"
#include "exec/param_layout.h"

/* Forward (phase FWD, or RECOMPUTE: the same without reading or writing the slot's `cur`). */
ts_status tr_attn_fwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_acts *a);
/* Backward (B); weight gradients are stashed in c->wq under (op->layer, op->mb, op->part). */
ts_status tr_attn_bwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_layer G, tr_acts *a);

#endif
