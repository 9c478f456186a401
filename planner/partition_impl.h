/* What the files of the uneven-stage partitioner (partition.h) share. Not a public surface.
 *
 *   partition.c            the problem: its instance of a planning problem, a split's evaluation
 *                          under it (and under planner/stages.c), the infeasibility in words
 *   split.c                the split type
 *   partition_brute.c      the optimum by enumeration (the reference)
 *   partition_levels.c     the search over T without GLPK: stage-time levels, relaxed bounds,
 *                          per-stage policies, the primal heuristic
 *   partition_ilp.c        the GLPK program: its model, the search over T, the step phase
 *   partition_search.c     the planner's use: ts_search_partitioned and the auto policy */
#ifndef TS_PARTITION_IMPL_H
#define TS_PARTITION_IMPL_H

#include <time.h>

#include "planner/partition.h"
#include "program/schedule.h"

#define K_POL TS_RECOMPUTE_COUNT

static inline int policy_allowed(const ts_partition_problem *p, int k) {
    return p->policies == 0 || (p->policies & (1u << k));
}

static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* partition.c */

/* Σ_s τ_s of an evaluated split. */
double ts_part_sum_s(const ts_split *s);
/* Fills info->why (and short_stage, short_bytes) with why no split fits: the uniform split with
 * each stage's least-memory policy, and which stage of it is short by how much. */
void ts_part_explain_infeasible(const ts_partition_problem *p, ts_partition_info *info);

/* partition_levels.c. kind_count: (n_kinds) layers of each kind; ts: the time scale (seconds
 * per unit) of the program's scaled times. */

/* Largest count of kind-t layers stage s can hold under policy k by memory alone. */
int ts_part_count_cap(const ts_partition_problem *p, int t, int s, int k, int kind_count);
/* Every time a stage can take, sorted, deduplicated and scaled by 1/ts; *out NULL and *n_out 0
 * when there would be too many to list (*out: free it). */
ts_status ts_part_stage_time_levels(const ts_partition_problem *p, const int *kind_count, double ts, double **out,
                                    int *n_out);
/* A lower bound of the slowest stage's time, and of Σ_s τ_s, that need no program. */
double ts_part_relaxed_bound_s(const ts_partition_problem *p);
double ts_part_least_sum_s(const ts_partition_problem *p);
/* Given the layers of `s`, each stage's fastest policy that fits; re-evaluates `s`. */
void ts_part_best_policies(const ts_partition_problem *p, ts_split *s);
/* A split whose stages all take at most cap_s, when one is easy to find: 1 with `s` filled, or 0. */
int ts_part_heuristic(const ts_partition_problem *p, const int *kind_count, double cap_s, ts_split *s);

/* `n` layers of a stage spread over its `parts` chunks, the first n mod parts one more: how many
 * chunk `i` takes. */
static inline int ts_part_spread(int n, int parts, int i) { return n / parts + (i < n % parts); }

/* The last stage's fixed work (LM head, loss, MTP modules) in layers of the model's last kind,
 * rounded: it runs in the model's last chunk, which the chunk rule below counts that many layers
 * heavier. At most a chunk's even share less one, so every chunk keeps a layer. */
static inline int ts_part_tail_layers(const ts_partition_problem *p) {
    double t = p->time_s[p->kind[p->layers - 1]][TS_RECOMPUTE_NONE];
    double f = p->fixed_time_s[(p->pp - 1) * K_POL + TS_RECOMPUTE_NONE];
    int cap = p->layers / (p->pp * p->vpp) - 1;
    if (!(t > 0) || !(f > 0) || cap <= 0) return 0;
    int e = (int)(f / t + 0.5);
    return e < cap ? e : cap;
}

/* Whether a split of `p` keeps each stage's chunks within one layer of each other, the earlier
 * chunks the heavier (as ts_part_spread), the model's last chunk counted with its fixed work
 * (ts_part_tail_layers): the rule the GLPK program (partition_ilp.c add_even_chunk_rows), the
 * brute force and the heuristic share when the layers come in several runs of kinds and stages
 * interleave (with one run any split is respread evenly; partition_ilp.c read_split). */
static inline int ts_part_chunks_even(const ts_partition_problem *p, const int *layers) {
    int runs = 1;
    for (int i = 1; i < p->layers; i++) runs += p->kind[i] != p->kind[i - 1];
    if (runs == 1 || p->vpp <= 1) return 1;
    int V = p->pp * p->vpp, tail = ts_part_tail_layers(p);
    for (int s = 0; s < p->pp; s++) {
        int first = 0, prev = 0;
        for (int ch = 0; ch < p->vpp; ch++) {
            int g = ts_sched_chunk(p->schedule, p->pp, p->vpp, s, ch);
            int n = layers[g] + (g == V - 1 ? tail : 0);
            if (ch == 0) first = prev = n;
            if (n > prev || first - n > 1) return 0;
            prev = n;
        }
    }
    return 1;
}

#endif
