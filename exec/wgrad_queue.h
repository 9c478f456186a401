/* Deferred weight-gradient GEMMs: the backward (B) of a layer part stashes dw += doutᵀ·in for
 * each of its weights, and the part's W op runs them (ZB-H1 runs the W ops in slots of their own;
 * the other schedules run each block's W ops right after its B). Entries are keyed by (layer, micro-batch, part); layer -1 is the LM head.
 *
 * Memory. Each stash keeps its own copy of `dout` (backend memory, counted under activations),
 * freed when it runs; `in` and `dw` are the caller's and must stay valid until then. The queue
 * owns the copies; tr_wgrad_free releases those never run. */
#ifndef TS_WGRAD_QUEUE_H
#define TS_WGRAD_QUEUE_H

#include "exec/kernel_table.h"
#include "exec/trainer_shape.h"

/* dw (OC, IC) += dout^T (OC, T) · in (T, IC). */
typedef struct {
    float *dw;
    float *dout; /* owned copy (backend memory) */
    const float *in;
    int T, IC, OC;
} tr_wgrad;

typedef struct {
    int layer, mb, part;
    int n, cap;
    tr_wgrad *w;
} tr_wgrad_entry;

typedef struct {
    const ts_backend *be;
    tr_tally *tally;
    int n, cap;
    tr_wgrad_entry *e;
} tr_wgrad_queue;

/* An empty queue; `be` and `tally` must outlive it. */
void tr_wgrad_init(tr_wgrad_queue *q, const ts_backend *be, tr_tally *tally);
void tr_wgrad_free(tr_wgrad_queue *q);

/* Stashes dw += dout^T · in under (layer, mb, part), copying dout (T, OC). */
ts_status tr_wgrad_stash(tr_wgrad_queue *q, int layer, int mb, int part, float *dw, const float *dout,
                         const float *in, int T, int IC, int OC);
/* Runs and drops every GEMM stashed under (layer, mb, part), in stash order; every copy is freed,
 * even after a failed GEMM (the first error is returned). */
ts_status tr_wgrad_run(tr_wgrad_queue *q, int layer, int mb, int part);

#endif
