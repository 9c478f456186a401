/* Simulated against measured: two Chrome traces of the same step program (sim/trace.h schema; the
 * simulator writes one, `tessera run --trace` the other) aligned op by op.
 *
 * Ops are matched by (rank, op index in the stage program): every op event of the simulated
 * trace must have a measured event of the same rank and index with the same name, and each
 * simulated rank must have as many op events in both. A simulated trace may hold one rank per
 * stage (the default of `tessera sim`); the measured one holds every rank, and only the ranks
 * the simulation holds are compared. Traces of different layouts, models or programs are
 * refused with TS_ERR_INPUT naming the first difference.
 *
 * Errors are signed fractions, (simulated − measured) / measured: per op kind (collectives split
 * by collective: "collective:all_reduce"), per stage (the time from a rank's first op start to
 * its last op end, averaged over the stage's compared ranks) and for the step (otherData.step_s,
 * or the caller's measured figure).
 *
 * Speed. When both traces carry otherData.gauge_flops_per_s (the speed gauge of CPU ranks,
 * exec/speed_gauge.h: the simulation's is its system's node.gauge_flops_per_s, the calibration's
 * speed; the run's, the speed measured around its traced step), every measured time is first put
 * at the simulation's speed: × speed = measured gauge / simulated gauge. A shared machine whose
 * speed moved between calibration and run then compares at one speed; the times as timed are
 * kept beside (measured_raw_step_s). Without both, speed is 1. */
#ifndef TS_COMPARE_H
#define TS_COMPARE_H

#include <cjson/cJSON.h>

#include "common/status.h"

typedef struct {
    char kind[48];             /* "gemm", "collective:all_reduce", ... */
    int ops;                   /* matched op events of this kind */
    double simulated_s, measured_s; /* summed over the matched events */
    double error;              /* of the sums; NAN when nothing was measured */
    double median_abs_op_error; /* over single ops with a measured time; NAN when none */
} ts_compare_kind;

typedef struct {
    int stage, ranks;               /* ranks compared */
    double simulated_s, measured_s; /* first op start to last op end, mean over the ranks */
    double error;
} ts_compare_stage;

typedef struct {
    char layout[160], model[64];
    int ops;                        /* matched op events */
    double simulated_step_s, measured_step_s, step_error; /* measured at the simulation's speed */
    double measured_raw_step_s; /* as timed */
    double speed;               /* measured gauge / simulated gauge; 1 when not both known */
    int gauged;                 /* both traces carried a gauge */
    int n_kinds, n_stages;
    ts_compare_kind *kinds;         /* owned */
    ts_compare_stage *stages;       /* owned, by stage */
} ts_compare;

/* Aligns the simulated trace at `sim_path` with the measured one at `measured_path`. */
ts_status ts_compare_traces(const char *sim_path, const char *measured_path, ts_compare *out);
void ts_compare_free(ts_compare *c);

/* Replaces the step figures' measured side (e.g. a median over steps instead of the traced step):
 * `measured_s` at the simulation's speed and `raw_s` as timed (equal without gauges; see
 * above). */
void ts_compare_set_measured_step(ts_compare *c, double measured_s, double raw_s);

/* The comparison as JSON: {"layout", "model", "ops", "step": {"simulated_s", "measured_s",
 * "error", "measured_raw_s", "speed" (with gauges only)}, "kinds": [{"kind", "ops", "simulated_s", "measured_s", "error",
 * "median_abs_op_error"}], "stages": [{"stage", "ranks", "simulated_s", "measured_s", "error"}]};
 * NANs become null. The caller frees it with cJSON_Delete. */
ts_status ts_compare_json(const ts_compare *c, cJSON **out);

/* The op events of one trace as they were timed, for replay (sim/replay.h) and op-by-op listings:
 * each event's rank, op index, kind (cat, a ts_op_kind_names entry; -1 for an unknown one), name
 * and span, sorted by (rank, op). The trace is checked as ts_compare_traces checks it. */
typedef struct {
    int rank, stage, op, kind; /* stage from the rank's process name, -1 unknown */
    int group;                 /* collective: its ts_group; else -1 */
    int peer, chunk;           /* send, recv: the peer stage and the chunk; else -1 */
    char name[64], coll[24];   /* coll: a collective's ("all-reduce"), else "" */
    double start_s, dur_s;
} ts_trace_op;

typedef struct {
    char layout[160], model[64];
    double step_s;       /* otherData's */
    int n;
    ts_trace_op *ops;    /* (n) owned */
} ts_trace_ops;

ts_status ts_trace_ops_read(const char *path, ts_trace_ops *out);
void ts_trace_ops_free(ts_trace_ops *t);

#endif
