/* The discrete-event simulator of one training step: it walks the step program (program.h) on
 * simulated ranks and costs each op with planner/cost.h, the functions the planner's closed form
 * uses.
 *
 * Deterministic: events are ordered by (time, sequence number). Each rank has one queue per
 * stream (program.h); an op starts when its dependencies are done and the previous op of its
 * stream on that rank is done. A collective starts when every simulated member is ready (so a
 * late rank delays its group) and ends for all members together. Communication is a fluid flow
 * over links (each rank's NVLink and NIC): concurrent flows share a link max-min fairly, so DP
 * traffic slows pipeline traffic on the same NIC; latency is paid before the flow. A compute op
 * that starts while communication is active on its rank runs `overlap_slowdown` slower.
 *
 * Scale: by default one representative rank per pipeline stage is simulated (TP, CP, DP and EP
 * peers behave alike, so their collectives complete as the representative's do); `full`
 * simulates every rank. */
#ifndef TS_ENGINE_H
#define TS_ENGINE_H

#include <stdint.h>

#include "program/program.h"
#include "program/span.h"
#include "planner/op_cost.h"
#include "sim/cost_override.h"

typedef struct {
    int full;                    /* every rank (1) or one per stage (0) */
    const double *compute_scale; /* NULL, or (ranks) multiplier of each global rank's compute
                                    durations (a straggler has 1.1); needs full = 1 */
    int free_comm;               /* every collective and transfer takes no time (schedule tests) */
    int stats_spans_only;        /* full mode: keep op spans only for the ranks the statistics read
                                    (each stage's first); the others' ts_rank_spans.spans are NULL.
                                    A 1024-rank step then stores 4 ranks' spans instead of 1024
                                    (16 bytes per rank-op), for callers that write no trace */
    const ts_cost_override *cost_override; /* NULL, or op durations that replace the model's
                                    (replay, sim/replay.h); needs full = 1 */
} ts_sim_opts;

typedef struct {
    double busy_s;         /* compute stream busy */
    double bubble_s;       /* compute idle with no communication of the rank in flight */
    double exposed_comm_s; /* compute idle while communication of the rank is in flight */
    double lockstep_scale; /* the factor on its compute (planner/cost.h ts_lockstep_scale over
                              its compute time between synchronisations) */
} ts_stage_stats;

typedef struct {
    double step_s;
    double bubble_fraction;          /* mean over stages of bubble_s / step_s */
    int n_ranks;                     /* simulated */
    ts_rank_spans *ranks;              /* (n_ranks), ascending global rank */
    ts_op_span *span_block;          /* every rank's spans, which are views into it */
    ts_stage_stats *stages;          /* (pp), of each stage's first simulated rank */
    double kind_s[TS_OP_KIND_COUNT]; /* op time by kind, summed over ops of one rank per stage */
    int64_t events;
    double sim_s;                    /* wall-clock time the simulation took */
    double gauge_flops_per_s;        /* the speed the times hold at on the speed gauge of CPU
                                        ranks (exec/speed_gauge.h): the system's
                                        node.gauge_flops_per_s; measured, for the executor's
                                        steps; 0 unknown */
} ts_sim_result;

ts_status ts_simulate(const ts_problem *pb, const ts_program *prog, const ts_sim_opts *opts,
                      ts_sim_result *out);
void ts_sim_result_free(ts_sim_result *r);

/* The result's spans as the trace writer and reports read them (a view into `r`). */
ts_step_spans ts_sim_spans(const ts_sim_result *r);

#endif
