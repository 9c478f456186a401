/* The executor's two streams. A rank issues its stage program's ops in program order; on a GPU
 * the DP stream runs the gradient reductions and parameter gathers (the program's TS_STREAM_DP
 * ops) while the compute stream runs everything else, so DP and ZeRO traffic overlaps the
 * backward as the program says (backend.h op_begin). On CPU ranks MPI blocks, so both are one.
 *
 * The program carries the data (program/data.h): what each op reads and writes, the segments of
 * each DP op, and the data edges in its dependencies. So an op here waits for its latest
 * dependency on the other stream, nothing re-derived. Each stream runs in issue order, so one
 * wait per op is enough, and any interleaving of the two streams that honours the waits computes
 * what the serial order computes. ts_op_streams_check verifies that the waits order every
 * conflicting pair of ops (write after read or write, read after write), and `tessera run
 * --stream-order` runs the interleavings that issue DP ops as early or as late as the waits
 * allow on CPU ranks (tests/test_exec_parity.c: bit-identical training). */
#ifndef TS_OP_STREAMS_H
#define TS_OP_STREAMS_H

#include <stdint.h>

#include "program/program.h"

/* Where a stage's tensors live (the trainer's segment layout), checked against the program's
 * (program/data.h ts_stage_segments). n_seg = 2·n_local + 2. */
typedef struct {
    int layers;                     /* the model's global layers */
    const int *local_of;            /* (layers) local layer of a global one; -1: not on the stage */
    int n_local;
    int seg_embed, seg_head;        /* segment indices; -1 when not on this stage */
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

/* The waits and DP segment lists of stage program `sp` (from its dependencies and data) and the
 * issue order. TS_ERR_INPUT when the trainer's map `m` is not the program's segments.
 * ts_op_streams_free releases it (also after a failure). */
ts_status ts_op_streams_init(ts_op_streams *s, const ts_stage_program *sp, const ts_seg_map *m,
                             ts_stream_order order);
void ts_op_streams_free(ts_op_streams *s);

/* TS_OK when the waits of `s` order every pair of ops of `sp` on different streams that touch the
 * same resource (one of them writing); TS_ERR_INPUT naming the first pair they do not. */
ts_status ts_op_streams_check(const ts_stage_program *sp, const ts_op_streams *s);

#endif
