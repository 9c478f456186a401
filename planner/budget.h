/* A GPU count as a budget and a global batch with a tolerance: the best (GPU count, global
 * batch) of a problem when the user has *at most* N GPUs and can move the batch by a few percent
 * — the question a capacity planner asks ("5128 GPUs, about 2520 sequences per step"), where an
 * exact count often has no valid layout at all (5128 = 8 × 641: no dp divides the batch).
 *
 * Candidates: GPU counts from gpus_max down, whole nodes below it (gpus_max itself first), and
 * for each count the global batches within ±batch_tolerance that some divisor of the count
 * divides exactly (floor and ceiling multiples of it; the requested batch always). Each
 * (count, batch) is searched (planner/search.h ts_search_partitioned, top 1) and ranked by the
 * objective per sequence: time — step seconds per sequence (the inverse of throughput at that
 * batch); cost — GPU-seconds per token; memory — bytes per GPU. Counts are visited downwards and
 * the time objective stops once the ideal time per sequence of a count (model FLOPs per
 * sequence at the dense peak of every GPU) exceeds the best found: fewer GPUs cannot beat it.
 *
 * ts_budget_result owns its choices; ts_budget_result_free releases them. */
#ifndef TS_BUDGET_H
#define TS_BUDGET_H

#include "planner/partition.h"
#include "planner/search.h"

typedef struct {
    int gpus_max;            /* at most this many GPUs */
    double batch_tolerance;  /* global batches within ±this fraction of the requested one (0: exact) */
    int exact_gpus;          /* 1: gpus_max GPUs exactly (only the batch moves) */
} ts_budget_opts;

typedef struct {
    int gpus;
    int64_t global_batch;
    ts_eval best;  /* the best layout there */
    double key;    /* the objective per sequence (see the top), smaller is better */
} ts_budget_choice;

typedef struct {
    ts_budget_choice *choices; /* (n) best first, at most TS_BUDGET_KEEP */
    int n;
    int searched;              /* (count, batch) problems searched */
    int pruned_counts;         /* GPU counts left out by the time bound */
} ts_budget_result;

#define TS_BUDGET_KEEP 8         /* choices kept for the report */
#define TS_BUDGET_MAX_SEARCHES 20000 /* (count, batch) searches at most, the largest counts first */

/* Searches the candidates of `base` (a problem initialised on gpus_max GPUs and the requested
 * batch). TS_OK with out->n ≥ 1; TS_ERR_INFEASIBLE when no candidate has a layout that fits;
 * TS_ERR_INPUT for a bad budget. */
ts_status ts_budget_search(const ts_problem *base, const ts_search_opts *so, const ts_partition_opts *po,
                           const ts_budget_opts *bo, ts_budget_result *out);
void ts_budget_result_free(ts_budget_result *r);

#endif
