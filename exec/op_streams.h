/* The executor's two streams. A rank issues its stage program's ops in program order; on a GPU
 * the DP stream runs the gradient reductions and parameter gathers (the program's TS_STREAM_DP
 * ops) while the compute stream runs everything else, so DP and ZeRO traffic overlaps the
 * backward as the program says (backend.h op_begin). On CPU ranks MPI blocks, so both are one.
 *
 * The program's dependencies (sim/program.h) are timing for the simulator, not a full account of
 * the data: the bucket holding the embedding waits for layer 0's backward, not the embedding's;
 * the optimizer under ZeRO-2 names no reduction. So the waits across streams come from what each
 * op touches. A segment (exec/trainer_impl.h: [2j] shared and [2j+1] expert tensors of local
 * layer j, then the embedding and the head) has two resources, its parameters and its gradients,
 * and under ZeRO-2/3 the layers' gradients live in two one-layer buffers (alternate layers), two
 * more resources:
 *   - compute ops of a layer (or the embedding, head and loss) read its parameters, and in the
 *     backward (B and W) write its gradients; the optimizer writes everything;
 *   - a gradient reduction writes its segments' gradients (in place, and ZeRO-2 zeroes them);
 *   - a parameter gather writes its segments' parameters; a ZeRO-3 gather may release any layer's
 *     gathered copy, so it writes every layer's parameters.
 * An op waits for the last op of the other stream issued before it that conflicts with it
 * (write after read or write, read after write) and for its program dependencies on the other
 * stream. Each stream runs in issue order, so waiting for the latest such op is enough: one wait
 * per op. The result: any interleaving of the two streams that honours the waits computes what
 * the serial order computes. `tessera run --stream-order` runs such interleavings on CPU ranks to
 * check that (tests/test_exec_parity.c). */
#ifndef TS_OP_STREAMS_H
#define TS_OP_STREAMS_H

#include <stdint.h>

#include "program/program.h"

/* Where a stage's tensors live (the trainer's segment layout). n_seg = 2·n_local + 2. */
typedef struct {
    int layers;                     /* the model's global layers */
    const int *local_of;            /* (layers) local layer of a global one; -1: not on the stage */
    int n_local;
    int seg_embed, seg_head;        /* segment indices; -1 when not on this stage */
    int head_uses_embed;            /* tied embeddings: the head reads the embedding's segment */
    int vpp;
    const int *chunk_lo, *chunk_hi; /* (vpp) global layers [lo, hi) of each local chunk */
    const int8_t *grad_buffer;      /* (n_seg) the one-layer gradient buffer (0 or 1) a segment's
                                       gradients live in under ZeRO-2/3; -1: its own */
} ts_seg_map;

/* The order a rank issues its ops in: the program's, or (CPU checks of the GPU streams) an
 * interleaving the waits allow that runs every DP op as soon as it may (dp-early) or as late as
 * it may (dp-late). */
typedef enum { TS_ORDER_PROGRAM, TS_ORDER_DP_EARLY, TS_ORDER_DP_LATE, TS_ORDER_COUNT } ts_stream_order;
extern const char *const ts_stream_order_names[]; /* "program", "dp-early", "dp-late" */
/* TS_OK and *out, or TS_ERR_INPUT naming the choices. */
ts_status ts_stream_order_parse(const char *text, ts_stream_order *out);

/* Whether `op` runs on the DP stream (the program's TS_STREAM_DP ops). */
static inline int ts_op_on_dp(const ts_op *op) { return op->stream == TS_STREAM_DP; }

typedef struct {
    int n_ops;
    int32_t *after;     /* (n_ops) the op of the other stream it waits for; -1: none */
    uint32_t *seg_start; /* (n_ops + 1) DP op i reduces or gathers segs[seg_start[i] ..
                            seg_start[i + 1]) in that order (ZeRO-3 gathers: its layer's two) */
    int32_t *segs;
    int32_t *order;     /* (n_ops) the ops in the order to issue them */
} ts_op_streams;

/* Computes the streams, waits and DP segment lists of stage program `sp` on map `m`, and the
 * issue order. TS_ERR_INPUT when an op names a layer the map does not hold. ts_op_streams_free
 * releases it (also after a failure). */
ts_status ts_op_streams_init(ts_op_streams *s, const ts_stage_program *sp, const ts_seg_map *m,
                             ts_stream_order order);
void ts_op_streams_free(ts_op_streams *s);

#endif
