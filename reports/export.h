/* A planned layout as configuration people can launch: Megatron-LM command-line arguments or a
 * DeepSpeed config JSON. What a framework cannot express is said, never silently dropped:
 * '#' comment lines beside the Megatron arguments, notes beside the DeepSpeed config.
 *
 * Batch arithmetic, the same in both: global batch = micro-batch × micro-batches × dp, where
 * micro-batches is Megatron's number of micro-batches per step and DeepSpeed's
 * gradient_accumulation_steps, and dp = GPUs / (tp · pp · cp). */
#ifndef TS_EXPORT_H
#define TS_EXPORT_H

#include <cjson/cJSON.h>

#include "planner/problem.h"

/* '#' comment lines (the layout, then anything Megatron-LM cannot say), then one line of
 * pretrain_gpt.py flags. `l` must be valid for `pb` with microbatches derived. *out is malloc'd;
 * the caller frees it. */
struct ts_split;
/* `split`: the plan's uneven stages (planner/partition.h), or NULL for the planner's even split;
 * given, it becomes --pipeline-model-parallel-layout, one segment per virtual stage, and its
 * per-stage recompute policies a comment (Megatron-LM has no per-stage recompute flag). */
ts_status ts_export_megatron(const ts_problem *pb, const ts_layout *l, const struct ts_split *split, char **out);

/* The DeepSpeed config (caller frees with cJSON_Delete) and `notes`: '#' lines for what the
 * config cannot say (malloc'd, "" when none; the caller frees it). */
ts_status ts_export_deepspeed(const ts_problem *pb, const ts_layout *l, cJSON **config, char **notes);

#endif
