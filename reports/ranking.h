/* The answer of `tessera plan`: the planner's ranked layouts (planner/search.h,
 * ts_search_partitioned: uneven stages where the partitioner finds them), optionally refined by
 * simulation — the best K layouts' step programs simulated (one rank per stage, sim/engine.h)
 * and re-ranked by simulated step time, ties keeping the closed form's order — shown as a table or
 * as the plan JSON (planner/plan_json.h) with the request's partition settings ("partition",
 * "partition_objective", "partition_node_limit") and, when refined, "refine" in the request and
 * "sim_step_s" on the refined layouts. */
#ifndef TS_RANKING_H
#define TS_RANKING_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "planner/partition.h"
#include "planner/search.h"

typedef struct {
    ts_partition_opts partition;
    int refine;      /* simulate and re-rank the best `refine` layouts; 0: no */
    const char *fix; /* the pins as given (--fix), recorded in the JSON's request; NULL: none */
} ts_ranking_opts;

/* ts_partition_opts_defaults, no refinement, no pins. */
void ts_ranking_opts_defaults(ts_ranking_opts *o);

/* ts_ranking_free frees the search and the simulated times. */
typedef struct {
    ts_search_result search;
    double *sim_step_s; /* (refined) simulated step time of the i-th layout after re-ranking;
                           NULL without refinement */
    int refined;        /* min(refine, layouts found) */
    double refine_s;    /* wall time of the simulations */
} ts_ranking;

/* Searches `pb` under `so` and o->partition, then refines. When the search fails `out` is empty;
 * when the refinement fails out->search holds the search (its partition_errors may be said). */
ts_status ts_ranking_make(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o, ts_ranking *out);
void ts_ranking_free(ts_ranking *r);

/* Simulates the first k layouts of r (k ≤ r->n_best; one rank per stage, each on its split) and
 * re-ranks them by simulated step time, their splits with them; sim_step_s[i] (k) receives the
 * i-th layout's after re-ranking. */
ts_status ts_ranking_refine(const ts_problem *pb, ts_search_result *r, int k, double *sim_step_s);

/* The plan JSON of the ranking (`tessera plan --json`, and its -o file); the caller deletes *out. */
ts_status ts_ranking_json(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o,
                          const ts_ranking *r, cJSON **out);
/* The table: '#' lines for the problem, the search, the partitioning and the refinement, a header
 * and units row, one row per layout (with the simulated step and its difference from the closed
 * form when refined), the best layout, and the uneven splits. */
ts_status ts_ranking_print(FILE *f, const ts_problem *pb, const ts_ranking_opts *o, const ts_ranking *r);

#endif
