/* The data a step program moves: each stage's parameter segments, the segments each op reads and
 * writes, and the data edges that follow from them.
 *
 * A stage's parameters are segments: [2j] the non-expert and [2j+1] the expert tensors of local
 * layer j (the stage's layers in model order), then the embedding (the stage holding the first
 * chunk) and the LM head (the last). Each segment has two resources, its parameters P and its
 * gradients G; under ZeRO-2/3 a layer's gradients live in one of two one-layer buffers
 * (alternate layers), two more resources B. What ops touch:
 *   - compute ops of a layer (or the embedding, head and loss) read its parameters, and in the
 *     backward (B and W) write its gradients; the optimizer writes everything;
 *   - a gradient reduction writes its segments' gradients (in place; ZeRO-2 zeroes them);
 *   - a parameter gather writes its segments' parameters; ZeRO-3 gathers one segment an op
 *     (a layer's shared parameters over DP×CP, its experts' over EDP) and holds two gathered
 *     copies of each kind (the layer running and the one prefetched), so its gather also releases,
 *     hence writes, its own segment's older copy or else the older of the two, which its segment
 *     list names after its own.
 * The DP ops' segments (a bucket holds the layers between its op's layer and the previous
 * bucket's, with the embedding riding in the bucket of layer 0 and the head in that of the last
 * layer) are listed in the program, in the order the executor reduces or gathers them.
 *
 * Data edges. The executor runs DP ops (gradient reductions, parameter gathers) on a stream of
 * their own beside everything else. So each op also waits for the latest op of the other stream
 * issued before it that conflicts with it (write after read or write, read after write); the
 * builder adds that op to its dependencies when they do not already order the two. The program's
 * dependencies are then a full account of the data: the simulator and the executor honour the
 * same edges, and any interleaving of the two streams that honours them computes what the serial
 * order computes (exec/op_streams.h checks this and runs such interleavings). */
#ifndef TS_DATA_H
#define TS_DATA_H

#include <stdint.h>

#include "program/program.h"

#define TS_ACCESS_MAX(n_seg) (2 * (2 * (n_seg) + 2))

/* What op i of `sp` reads and writes, into `out` (room for TS_ACCESS_MAX(n_seg)); returns the
 * count. */
int ts_op_accesses(const ts_stage_program *sp, int i, ts_access *out);

/* Fills the stage's segments, the DP ops' segment lists and the data edges of a stage program
 * whose ops and timing dependencies are built (program.c calls it last). TS_ERR_INPUT when an op
 * names a layer the stage does not hold; TS_ERR_NOMEM. */
ts_status ts_stage_data_build(const ts_problem *pb, const ts_layout *l, int stage, ts_stage_program *sp);
/* Releases what ts_stage_data_build added (ts_program_free calls it). */
void ts_stage_data_free(ts_stage_program *sp);

#endif
