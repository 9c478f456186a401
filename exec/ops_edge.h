/* The model's edges for one micro-batch: the vocab-parallel embedding (EMBED, TP_EMBED) on the
 * first stage, the final norm with the LM head (HEAD) and the vocab-parallel cross-entropy (LOSS)
 * on the last, forward and backward. The loss's share of the step's mean is added to
 * c->stats->loss_sum (by the first rank of each TP group). */
#ifndef TS_OPS_EDGE_H
#define TS_OPS_EDGE_H

#include "exec/act_cache.h"
#include "exec/op_ctx.h"
#include "exec/param_layout.h"

/* `P` and `G` the edges' parameters and gradients, `a` the head's cached activations for op->mb
 * (HEAD and LOSS; NULL for EMBED and TP_EMBED). The LM head's weight gradient is stashed in c->wq
 * under (-1, op->mb, TS_PART_HEAD). */
ts_status tr_edge_op(const tr_op_ctx *c, const ts_op *op, tr_edge P, tr_edge G, tr_acts *a);

#endif
