/* The layout search: every layout of the problem (DP, TP, PP, CP, EP, SP, ZeRO stage,
 * micro-batch, schedule and vpp, recompute) that honours the pins, evaluated by the closed form,
 * the best `top_k` kept by the objective.
 *
 * Pruning: for each shard and pipeline depth, m·(slowest stage's compute and exposed TP/CP/EP
 * time per micro-batch) plus the fewest pipeline transfers is a lower bound of the step time of
 * every ZeRO stage and schedule below it (bubble and DP terms are ≥ 0); once top_k
 * feasible layouts are held, a group whose bound exceeds the worst held is skipped unevaluated.
 * It therefore drops nothing feasible and better (tests compare it with prune = 0).
 *
 * Equivalent duplicates are not enumerated: with pp = 1 only sched=1f1b; with dp·cp = 1 only
 * zero=0; with fused attention, selective recompute (no memory saved, more time) is skipped —
 * unless the field is pinned. */
#ifndef TS_SEARCH_H
#define TS_SEARCH_H

#include <stdint.h>

#include "planner/problem.h"

typedef enum { TS_OBJ_TIME, TS_OBJ_MEMORY, TS_OBJ_COST, TS_OBJ_COUNT } ts_objective;

/* The memory objective's default slowdown allowed over the fastest layout (see objective.c). */
#define TS_DEFAULT_MAX_SLOWDOWN 1.10
extern const char *const ts_objective_names[]; /* "time", "memory", "cost" */

typedef struct {
    ts_pins pins;
    int top_k;              /* layouts kept (>= 1) */
    ts_objective objective; /* time: step_s; memory: bytes per GPU (within max_slowdown of the
                               fastest); cost: GPU-seconds per token */
    int prune;              /* 1: branch and bound (default); 0: evaluate everything */
    unsigned schedules;     /* bit (1u << ts_schedule) per schedule allowed; 0 = all */
    /* 1: also interleaved layouts whose pp·vpp does not divide the layers (vpp among the divisors
     * of ⌈layers/pp⌉ too), costed as if split nearly evenly: candidates for explicit splits
     * (planner/partition.h), never valid on their own. 0 (default): even splits only. */
    int explicit_splits;
    /* objective memory: the least memory among layouts whose step time is within this factor of
     * the fastest layout's (default 1.10; planner/objective.c). Infinity: least memory at any
     * speed. */
    double max_slowdown;
    double max_step_s; /* >0: layouts slower than this are left out (set by the memory objective) */
} ts_search_opts;

void ts_search_opts_defaults(ts_search_opts *o);

typedef struct {
    ts_eval *best;       /* (n_best) feasible layouts, best first; owned */
    int n_best;
    int64_t searched;    /* valid layouts in the space under the pins */
    int64_t evaluated;   /* of those, evaluated (the rest pruned by the bound) */
    int64_t feasible;    /* evaluated layouts that fit in memory */
    double search_s;
    ts_eval closest;     /* the valid layout needing the least memory (meaningful when n_best==0) */
    int has_closest;
    char reason[1024];   /* when nothing fits: why, and what would */
    /* Uneven stages (planner/partition.h, ts_search_partitioned): */
    struct ts_split *splits; /* (n_best) best[i]'s split, pp = 0 for the even one; NULL: all even */
    int partitioned;         /* layouts whose stages the program re-partitioned */
    double partition_s;      /* the time that took (inside search_s) */
    int partition_errors;    /* layouts on which GLPK failed (kept even) */
    char partition_error[512]; /* the first such failure's message */
    /* objective memory: the fastest layout's step time and the cap it set (max_slowdown × it);
     * 0 for the other objectives. */
    double fastest_step_s, step_cap_s;
} ts_search_result;

/* Whether the search offers layout l's experts' TP degree (its etp; 0 follows tp), with the
 * fields in `pinned` (bits of ts_pin) pinned. Unpinned, an MoE model on a stack that splits
 * experts apart (stack.etp) is offered etp = tp (0) and, at tp > 1, etp = 1; etp = tp at ep is
 * left out of the space where etp = 1 at ep·tp splits the same expert weights over the same ranks
 * with less communication (SP on, ep·tp dividing the experts; docs/moe.md says when it is still
 * faster), and wholly for experts with biases on a stack that runs those only apart from TP
 * (stack.moe_bias_etp1). A pinned etp offers whatever is valid, a pinned ep lifts the first rule;
 * dense models and tp = 1 only etp = 0 (an unpinned etp equal to tp is spelt 0). */
int ts_search_offers_etp(const ts_problem *pb, const ts_layout *l, unsigned pinned);

/* Runs the search. TS_ERR_INFEASIBLE (result still filled, `reason` and the error message say
 * what came closest and how many GPUs would do) when no valid layout fits; TS_ERR_INPUT when the
 * pins leave no valid layout at all. */
ts_status ts_search(const ts_problem *pb, const ts_search_opts *opts, ts_search_result *out);
void ts_search_result_free(ts_search_result *r);

/* The memory objective's step-time cap (planner/objective.c): the fastest layout's step time
 * under the same pins (a time search, uneven stages by `po` when not NULL) into *fastest_s and
 * max_slowdown × it into *cap_s; both 0 when the objective is not memory or max_slowdown is
 * infinite. Fails like ts_search when nothing fits. */
ts_status ts_memory_step_cap(const ts_problem *pb, const ts_search_opts *opts, double *fastest_s, double *cap_s);

/* The objective's value for an evaluated layout (smaller is better). */
double ts_objective_value(const ts_problem *pb, ts_objective obj, const ts_eval *e);

#endif
