/* When each op of a step program ran: the spans either interpreter records (the simulator's
 * simulated times, the executor's measured ones), one array per rank indexed like the rank's
 * stage program. program/trace.h writes them in the one Chrome-trace schema both share. */
#ifndef TS_SPAN_H
#define TS_SPAN_H

typedef struct {
    double start_s, end_s;
} ts_op_span;

typedef struct {
    int rank;          /* global rank */
    int stage;         /* its pipeline stage */
    ts_op_span *spans; /* (the stage program's n_ops); NULL when not kept */
} ts_rank_spans;

/* The spans of one step over some ranks, as a trace or a report reads them. */
typedef struct {
    int n_ranks;
    const ts_rank_spans *ranks; /* (n_ranks), ascending global rank */
    double step_s;
    double gauge_flops_per_s;   /* the speed gauge reading the times hold at (exec/speed_gauge.h);
                                   0 unknown */
} ts_step_spans;

#endif
