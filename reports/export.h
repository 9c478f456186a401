/* A planned layout as configuration people can launch (issue 19): Megatron-LM pretrain_gpt.py
 * arguments (export_megatron.c), a torchrun or Slurm sbatch script running them
 * (export_launch.c), a Megatron-Bridge recipe (export_bridge.c) and a DeepSpeed config
 * (export_deepspeed.c). Each builds the planned model exactly, or says what it cannot express:
 * '#' comment lines beside the Megatron arguments and in the scripts, a "comment" field and
 * stderr notes beside the DeepSpeed config. docs/export.md shows them, with the commands.
 *
 * Batch arithmetic, the same in all: global batch = micro-batch × micro-batches × dp, where
 * micro-batches is Megatron's number of micro-batches per step and DeepSpeed's
 * gradient_accumulation_steps, and dp = GPUs / (tp · pp · cp). */
#ifndef TS_EXPORT_H
#define TS_EXPORT_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "planner/problem.h"

struct ts_split;

/* Which Megatron-LM the arguments are for. CURRENT: Megatron-LM with
 * --pipeline-model-parallel-layout (core_r0.14, mid-2025, and later). LEGACY: releases before it,
 * whose uneven stages are --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers
 * (only the first and last stage may differ from the others; a split they cannot express is
 * refused) and whose vocabulary is --vocab-size. */
typedef enum { TS_MEGATRON_CURRENT, TS_MEGATRON_LEGACY, TS_MEGATRON_VERSION_COUNT } ts_megatron_version;
extern const char *const ts_megatron_version_names[]; /* "current", "legacy"; NULL-ended */

typedef struct {
    /* the plan's uneven stages (planner/partition.h), or NULL for the planner's even split */
    const struct ts_split *split;
    ts_megatron_version version;
} ts_export_opts;

/* '#' comment lines (the layout, the environment, then anything Megatron-LM cannot say), then one
 * line of pretrain_gpt.py flags, values shell-quoted where needed. `l` must be valid for `pb`
 * with microbatches derived. *out is malloc'd; the caller frees it. A split the LEGACY form
 * cannot express: TS_ERR_INPUT naming --megatron-version. */
ts_status ts_export_megatron(const ts_problem *pb, const ts_layout *l, const ts_export_opts *o, char **out);
/* TS_ERR_INPUT (naming `what`, the target) when software stack `stack` (models/stacks/) cannot run
 * `l`: Megatron-LM, its launch scripts and Megatron-Bridge refuse what megatron-core does not run
 * (ZB-H1, GPipe), rather than write arguments that would train another schedule. */
ts_status ts_export_stack_check(const char *stack, const char *what, const ts_layout *l);

typedef enum { TS_LAUNCH_TORCHRUN, TS_LAUNCH_SBATCH } ts_launch_kind;

/* A bash script launching pretrain_gpt.py with those flags: torchrun on one node (NODE_RANK,
 * MASTER_ADDR from the environment), or a Slurm batch file (#SBATCH nodes, tasks per node, GPUs
 * per node) running torchrun on each node through srun. The environment Megatron-LM needs is
 * exported in it. *out is malloc'd. */
ts_status ts_export_launch(const ts_problem *pb, const ts_layout *l, const ts_export_opts *o, ts_launch_kind kind,
                           char **out);

/* A Python file building a Megatron-Bridge ConfigContainer (model provider, parallelism,
 * precision, recompute, batch) for the layout; *out is malloc'd. What Megatron-Bridge cannot
 * express is said in '#' comments. */
ts_status ts_export_bridge(const ts_problem *pb, const ts_layout *l, const ts_export_opts *o, char **out);

/* The DeepSpeed config (caller frees with cJSON_Delete) and `notes`: '#' lines for what the
 * config cannot say (malloc'd, "" when none; the caller frees it); the config's "comment" field
 * holds the same notes. */
ts_status ts_export_deepspeed(const ts_problem *pb, const ts_layout *l, cJSON **config, char **notes);

/* --- shared by the export_*.c files ----------------------------------------------------------- */

/* Layers of global chunk g (model order; the schedule places it, program/schedule.h): the
 * split's, or the planner's even split of stages (ts_even_split). */
int ts_export_split_layers(const ts_model *m, const ts_layout *l, const struct ts_split *split, int g);
/* Virtual stages: pp · vpp of the split, or pp. */
int ts_export_virtual_stages(const ts_layout *l, const struct ts_split *split);
/* The stages differ in layers (an explicit split, or layers not divisible by pp). */
int ts_export_uneven(const ts_model *m, const ts_layout *l, const struct ts_split *split);
/* Writes `s` to f, single-quoted for a POSIX shell when it holds anything but [A-Za-z0-9_.,:/=+-]. */
void ts_export_shell_word(FILE *f, const char *s);
/* Megatron-LM's --moe-layer-freq for the model's dense/MoE pattern: "1" when every layer is MoE,
 * else a Python list expression ("([0]*3+[1]*58)"), as Megatron-LM's moe_freq_type evaluates it. */
void ts_export_moe_layer_freq(const ts_model *m, char *buf, size_t cap);
/* Whether CUDA_DEVICE_MAX_CONNECTIONS=1 must be set (tp > 1 or cp > 1 without Megatron-FSDP:
 * Megatron-LM's validate_args asserts it on Hopper and earlier; Megatron-FSDP asserts it unset). */
int ts_export_needs_max_connections_1(const ts_layout *l);
/* Runs `write` into a malloc'd string (open_memstream); NOMEM when that fails. */
ts_status ts_export_to_string(char **out, const char *what, ts_status (*write)(FILE *, const void *), const void *arg);

#endif
