/* The step program's communication ops that move whole tensors between ranks: the pipeline's
 * transfers of the slot's activation (PP_ACT) and gradient (PP_GRAD) between stages, and the DP
 * stream's gradient reductions (GRAD_REDUCE) and parameter gathers (PARAM_GATHER) over the
 * parameter store's segments. (The collectives inside a block, TP, SP, CP and EP, are the
 * blocks' own ops.)
 *
 * Memory. A pipeline send reads its own copy of the tensor (backend memory), since the next op
 * overwrites the slot before the send ends; tr_sends owns the copies until they are waited for
 * (at the step's end), counted under buffers in the tally (planner/memory_exec_buffers.h prices
 * them), as is a received mirror copy while it is added. */
#ifndef TS_OPS_COMM_H
#define TS_OPS_COMM_H

#include "exec/op_ctx.h"
#include "exec/param_store.h"

/* Pipeline sends under way this step. */
typedef struct {
    int n, cap;
    ts_request **reqs;
    float **bufs;    /* backend memory, freed once the send completes */
    size_t *floats;  /* each copy's size */
    tr_tally *tally; /* where the copies are counted (tr_sends_init) */
} tr_sends;

/* An empty list whose copies `tally` counts; tr_sends_free releases it. */
void tr_sends_init(tr_sends *sends, tr_tally *tally);

/* PP_ACT / PP_GRAD, SEND or RECV: the slot's `cur` (activation) or `dcur` (gradient) to or from
 * the stage op->peer; a send is posted and added to `sends`. */
ts_status tr_pipe_op(const tr_op_ctx *c, tr_sends *sends, const ts_op *op);
/* Waits for every send under way and frees its copy, all of them even after a failure (the
 * first failure is returned); the list is then empty. */
ts_status tr_sends_wait(tr_sends *sends, const ts_backend *be);
/* Waits for what is left (a failed step's) and frees the list. */
void tr_sends_free(tr_sends *sends, const ts_backend *be);

/* MIRROR_GRAD (DualPipe), SEND or RECV: the gradients of the local chunk running model chunk
 * ts_chunk_model(op->chunk) (its layers' segments, the embedding where it opens a pipeline, the
 * head where it closes one) posted to the stage op->peer holding the other copy; or that copy's
 * received and added, so that both copies update alike. */
ts_status tr_mirror_op(const tr_op_ctx *c, tr_sends *sends, tr_store *st, const ts_op *op);

/* GRAD_REDUCE: segments segs[0 .. n) of the store reduced over their groups, in that order. */
ts_status tr_grad_reduce_op(tr_store *st, const int32_t *segs, int n);
/* PARAM_GATHER: in the step phase, segments segs[0 .. n) gathered after the optimizer (ZeRO-1/2);
 * otherwise ZeRO-3's gather of segs[0] before its use, releasing the copies segs[1 .. n). */
ts_status tr_param_gather_op(tr_store *st, const ts_op *op, const int32_t *segs, int n);

#endif
