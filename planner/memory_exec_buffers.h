/* The buffers of a plan for CPU ranks, priced as the CPU executor (exec/) holds them.
 *
 * On GPUs the planner counts Megatron-LM's buffers (planner/stages.c): two DP gradient buckets,
 * the TP/SP collectives' and the pipeline's send/receive buffers of one micro-batch, and under
 * ZeRO-3 two gathered layers (stages.c zero3_params). The CPU executor holds other ones, all counted under "buffers" in
 * its tally (exec/trainer_shape.h), by design (docs/calibration-and-validation.md, "Memory"):
 *   - the ops' workspace (exec/op_ctx.h tr_work): the slot's tensors and every op's scratch,
 *     allocated once at their largest; TP, SP, CP and EP collectives run in place on them, so
 *     there are no collective buffers apart from it, and no DP buckets (gradients are reduced in
 *     place in their segments);
 *   - the parameter store's (exec/param_store.h): a reduce-scatter's landing shard (the largest
 *     segment's share), under ZeRO-2/3 the two one-layer gradient buffers, under ZeRO-3 two
 *     gathered copies of each kind of segment (the layer running and the one prefetched);
 *   - the pipeline's send copies (exec/ops_comm.h), held from their SEND op to the step's end,
 *     and DualPipe's gradient-mirror copies (sent: to the step's end; received: one segment at a
 *     time, added and freed).
 * The sizes come from one place: the executor allocates the workspace with
 * ts_exec_work_floats and sizes its segments with ts_exec_seg_floats. */
#ifndef TS_PLANNER_MEMORY_EXEC_BUFFERS_H
#define TS_PLANNER_MEMORY_EXEC_BUFFERS_H

#include "planner/memory_exec.h"
#include "program/program.h"

/* The workspace's backend tensors, in exec/op_ctx.c's order (WORK_TENSORS). */
#define TS_EXEC_WORK_TENSORS 26

/* Floats of each workspace tensor for a rank of shapes `d`, at least 1 each (the executor
 * allocates an unused tensor as one float); ring_rows: the tokens of one CP attention call
 * (seq/cp) under CP, 0 without it. */
void ts_exec_work_floats(const ts_exec_dims *d, size_t ring_rows, size_t out[TS_EXEC_WORK_TENSORS]);

/* What a parameter segment holds (exec/param_layout.h tr_seg_kind, same order): a layer's
 * non-expert tensors, its local experts, the embedding rows, the head (final norm, then the
 * untied LM head's rows). */
typedef enum { TS_EXEC_SEG_SHARED, TS_EXEC_SEG_EXPERTS, TS_EXEC_SEG_EMBED, TS_EXEC_SEG_HEAD } ts_exec_seg;

/* Elements of a segment of `kind` for shapes `d`: of a MoE layer (moe) or a dense one; `tied`:
 * the LM head reads the embedding. */
size_t ts_exec_seg_floats(const ts_exec_dims *d, ts_exec_seg kind, int moe, int tied);

/* The peak of the buffers stage `stage` of `prog` holds while it trains (the workspace, the
 * store's, the pipeline's and mirror's copies), in bytes, walking its program in issue order over
 * two steps (ZeRO-3's gathered copies follow the gathers' segment lists, program/data.h, and go at
 * the optimizer step). `d`: the rank's
 * shapes (ts_exec_dims_of). TS_ERR_NOMEM. */
ts_status ts_memory_exec_buffers(const ts_program *prog, const ts_problem *pb, const ts_exec_dims *d, int stage,
                                 double *peak_bytes);

#endif
