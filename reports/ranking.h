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

#include "planner/bands.h"
#include "planner/partition.h"
#include "planner/search.h"

typedef struct {
    ts_partition_opts partition;
    int refine;      /* simulate and re-rank the best `refine` layouts; 0: no */
    const char *fix; /* the pins as given (--fix), recorded in the JSON's request; NULL: none */
    const char *against; /* --against PINS: the pick beside the best layout under these pins,
                            term by term; NULL: none */
    const char *bands_dir; /* the published runs behind the bands (NULL: <data>/validation/published) */
    const ts_bands *stats; /* the residuals already computed for the problem's stack (NULL: compute
                              them from bands_dir); a sweep computes them once */
    int order_only; /* the caller reads the layouts and their order, never a band or a tie (the pick
                       of `tessera sim` and the other commands with free fields): the bands are
                       computed only where they can reorder the layouts; r->bands may stay NULL */
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
    /* Uncertainty (planner/bands.h, planner/robust.h): */
    ts_bands stats;     /* the residuals on the problem's stack */
    ts_band *bands;     /* (search.n_best) each layout's band */
    int tied;           /* ranks 1..tied overlap the fastest's band (a tie, most robust first) */
    int tied_pool;      /* of the pool's layouts (a plain search's best 200), those in the tie */
    int pool;           /* the layouts the tie is drawn from: the pool's and the ranked ones it
                           lacks (uneven splits) */
    int fastest;        /* where the fastest predicted layout stands after that (0-based; -1:
                           below the rows kept) */
    ts_eval fastest_eval;  /* the fastest predicted layout */
    /* --against: */
    int has_against;
    ts_eval against;
    ts_band against_band;
} ts_ranking;

/* Searches `pb` under `so` and o->partition, then refines, then gives every layout its band and,
 * unless the objective is memory, puts the layouts tied with the fastest first, most robust first
 * (planner/robust.h); then evaluates o->against. When the search fails `out` is empty; when a
 * later part fails out->search holds the search (its partition_errors may be said). */
ts_status ts_ranking_make(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o, ts_ranking *out);
void ts_ranking_free(ts_ranking *r);

/* Simulates the first k layouts of r (k ≤ r->n_best; one rank per stage, each on its split) and
 * re-ranks them by simulated step time, their splits with them; sim_step_s[i] (k) receives the
 * i-th layout's after re-ranking. */
ts_status ts_ranking_refine(const ts_problem *pb, ts_search_result *r, int k, double *sim_step_s);

/* The plan JSON of the ranking (`tessera plan --json`, and its -o file); the caller deletes *out. */
ts_status ts_ranking_json(const ts_problem *pb, const ts_search_opts *so, const ts_ranking_opts *o,
                          const ts_ranking *r, cJSON **out);
/* The table: '#' lines for the problem, the stack, the memory line, the bands, the search, the
 * partitioning and the refinement, a header and units row, one row per layout (its band, tie and
 * tight marks, and the simulated step and its difference from the closed form when refined), the
 * tie in words, the best layout, --against term by term, and the uneven splits. */
ts_status ts_ranking_print(FILE *f, const ts_problem *pb, const ts_ranking_opts *o, const ts_ranking *r);

#endif
