/* The memory of a plan for CPU ranks, priced as the CPU executor (exec/) holds it.
 *
 * The planner's memory model (planner/stages.c) is Megatron-LM's on GPUs: 16-bit activations
 * counted as Korthikanti et al. 2022 Table 2, recompute dropping what it rebuilds, ZeRO-2/3
 * sharding every parameter. The executor that trains a CPU-rank plan keeps other things, by
 * design (docs/calibration-and-validation.md, "Memory"):
 *   - activations: one entry per (layer, micro-batch), made by its first forward op and freed by
 *     its last weight-gradient op (exec/act_cache.h), of the tensors ts_exec_entry_of counts; a
 *     copy of each deferred weight gradient's output gradient from its B op to its W op
 *     (exec/wgrad_queue.h); recompute repeats the forward into the same entry (it saves no
 *     memory there);
 *   - buffers: its workspace, the store's, the pipeline's send copies
 *     (planner/memory_exec_buffers.h), not Megatron's DP buckets and collective buffers;
 *   - the embedding and the head (with the final norm) kept at ZeRO-1 under ZeRO-2/3
 *     (exec/param_store.c: they are reduced whole, their segments are not gathered), on the
 *     stages whose program holds them (ZB-V and DualPipe put the head on the first stage too).
 * So for a plan on CPU ranks (ts_memory_exec_applies) the planner prices these instead: the
 * activations by walking the stage programs (program/program.h, the ones the executor runs) with
 * the entry sizes the executor allocates (this module is their one source: exec/act_cache.c
 * calls ts_exec_entry_of), the edges' states at ZeRO-1. Each category is its largest over the
 * stages, as `tessera run` reports the worst rank per category. A MoE layer's expert rows are
 * priced at the busiest rank's mean share (ts_moe_load_factor); the run's rows follow the
 * routing it draws. Only one layout's evaluation (ts_evaluate, planner/evaluate.c) is priced so:
 * the search ranks and checks fits by the model's figures.
 * GPU plans are untouched. */
#ifndef TS_PLANNER_MEMORY_EXEC_H
#define TS_PLANNER_MEMORY_EXEC_H

#include <stddef.h>

#include "planner/stages.h"

/* The shapes an activation entry depends on (exec/trainer_shape.h names them): tokens of a
 * micro-batch T and rows between blocks Tl, rows a MoE layer routes Tm (T, or Tl with the experts
 * apart from TP), hidden C, per-rank query/kv widths and heads, MLP slice Fr, expert slice Fer
 * (over etp), vocabulary rows Vr, experts E, top-k K, EP degree. */
typedef struct {
    size_t T, Tl, Tm, C, QKVr, Qr, Hr, Fr, Fer, Vr, E, K, El, ep;
} ts_exec_dims;

/* One entry's sizes: floats and device ints in the backend allocation, host ints beside it;
 * K top-k (0: dense), R rows an expert set can get, F the MLP slice. */
typedef struct {
    size_t floats, dev_ints, host_ints;
    size_t K, R, F;
} ts_exec_entry;

/* The entry of a layer (moe: a MoE layer) or of the head (head: the final norm, logits and loss). */
ts_exec_entry ts_exec_entry_of(const ts_exec_dims *d, int head, int moe);

/* The shapes of one rank of layout `l`. */
void ts_exec_dims_of(const ts_problem *pb, const ts_layout *l, ts_exec_dims *out);

/* Whether the plan is for CPU ranks, run by the CPU executor: the system runs one op at a time
 * (serial_ops) or shares cores among ranks (node.cores), as `tessera calibrate` writes on CPUs
 * and models/systems/cpu-localhost.json states. */
int ts_memory_exec_applies(const ts_system *s);

/* Replaces `mem` (the planner's worst stage, from ts_stages_finish) with the executor's figures for
 * layout `l` on stages `st`: each category's largest over the stages, total their sum; the
 * buffers the executor's own (planner/memory_exec_buffers.h). On a layout the program builder refuses,
 * TS_ERR_INPUT and `mem` unchanged. */
ts_status ts_memory_exec_price(const ts_stages *st, const ts_problem *pb, const ts_layout *l, ts_memory *mem);

#endif
