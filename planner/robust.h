/* Ties and robustness: layouts whose uncertainty bands (planner/bands.h) overlap the fastest's
 * are a tie — the prediction cannot tell them apart — and a tie is broken toward the layout least
 * likely to disappoint: not tight on memory (planner/stack_rules.h), then the fewest exotic
 * dimensions, then the predicted step. */
#ifndef TS_ROBUST_H
#define TS_ROBUST_H

#include <stddef.h>

#include "planner/bands.h"

/* The largest vpp of the published recipes in validation/published (NVIDIA's GPT-3 175B, 12) and
 * the smallest model those recipes shard with TP (Nemotron-4 15B at tp=4; SC'21 Table 1 runs
 * 18.4B and up at tp=8): beyond them a layout is exotic. An MoE model counts its active
 * parameters: NVIDIA's MoE recipes run tp=1 at 3B and 5B active (Qwen3-30B-A3B, GPT-OSS-120B) and
 * tp=2 from 22B active on H100 (Qwen3-235B-A22B, DeepSeek-V3; Megatron-Bridge
 * scripts/performance/configs, 25.09). */
#define TS_EXOTIC_VPP 12
#define TS_EXOTIC_TP1_PARAMS 15e9

/* Exotic dimensions of `l`: cp > 1, tp = 1 on a model of TS_EXOTIC_TP1_PARAMS or more, vpp above
 * TS_EXOTIC_VPP, a layout the stack does not run (pinned). Their count; `buf` (may be NULL)
 * receives them in words ("cp=4, tp=1 at 69B parameters"), "" when none. */
int ts_exotic_dims(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap);

/* For n layouts in rank order with their bands ([0] the fastest): *n_tied, the size of the tie
 * group (layouts whose band overlaps the fastest's), and a permutation `order` (n) that puts the
 * group first, most robust first, and keeps the rest in rank order. */
ts_status ts_robust_order(const ts_problem *pb, const ts_eval *e, const ts_band *bands, int n, int *order,
                          int *n_tied);

#endif
