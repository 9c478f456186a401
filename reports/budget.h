/* The budget's answer in words (planner/budget.h): which GPU count and global batch the plan
 * uses, how many GPUs stay idle and how many sequences per step it adds or drops, and the next
 * best choices — as '#' lines above the plan's table and as the plan JSON's "budget" object:
 *   "budget": {"gpus_max", "batch_tolerance", "global_batch_requested", "gpus", "idle_gpus",
 *              "global_batch", "batch_change", "searched", "pruned_counts",
 *              "choices": [{"gpus", "global_batch", "layout", "step_s", "tokens_per_s", "mfu"}]} */
#ifndef TS_REPORTS_BUDGET_H
#define TS_REPORTS_BUDGET_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "planner/budget.h"

ts_status ts_budget_print(FILE *f, int64_t batch_requested, const ts_budget_opts *bo, const ts_budget_result *r);
ts_status ts_budget_add_json(cJSON *root, int64_t batch_requested, const ts_budget_opts *bo,
                             const ts_budget_result *r);

#endif
