/* What `tessera sim` reports about one simulated step, as JSON and as a table.
 *
 * JSON (DESIGN.md's "sim" fields first, then more):
 *   {"layout", "step_s", "bubble_fraction", "events", "sim_s",
 *    "stages": [{"stage", "busy_s", "bubble_s", "exposed_comm_s"}],
 *    "closed_form_step_s", "kind_s": {"gemm", "attention", "elementwise", "optimizer",
 *    "collective", "send", "recv"}, "ranks", "full", "model", "system", "gpus", "ops",
 *    "microbatches", "lockstep_scale" (only with node.speed_cv > 0)}
 * Times are seconds; "ranks" counts the simulated ranks, "full" whether every rank was (1) or one
 * per stage (0); "ops" is the step program's total over its stage programs; "kind_s" sums op
 * time by kind over one rank per stage; "lockstep_scale" is the largest of the stages' factors on
 * compute times for ranks waiting on the slowest (planner/cost.h ts_lockstep_scale over a stage's
 * compute time between synchronisations).
 *
 * The table: '#' lines echoing the problem, the layout and the step (simulated vs closed form;
 * with node.speed_cv > 0 a line with the lockstep factor), then one row per stage (stage, busy_s, bubble_s, exposed_comm_s) under a units row, then '#'
 * lines with the time by op kind, the events and the simulation's wall-clock time. */
#ifndef TS_SUMMARY_H
#define TS_SUMMARY_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "sim/engine.h"

/* `closed_form_step_s` is the planner's prediction for the same layout (ts_evaluate). The
 * caller frees *out with cJSON_Delete. */
ts_status ts_sim_summary_json(const ts_problem *pb, const ts_program *prog, const ts_sim_result *r,
                              double closed_form_step_s, cJSON **out);

ts_status ts_sim_summary_print(FILE *f, const ts_problem *pb, const ts_program *prog,
                               const ts_sim_result *r, double closed_form_step_s);

#endif
