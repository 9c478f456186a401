/* Replay: the simulator run on a real step's measured compute (the trace-driven validation of
 * Lumos, Liang et al. 2025, arXiv:2504.09307, and of ASTRA-sim's trace inputs).
 *
 * Every compute op (GEMM, attention, element-wise, optimizer) of every rank runs for exactly the
 * time it took in a measured trace (`tessera run --trace`), keyed by (rank, op index) through
 * sim/cost_override.h, and so does every transfer: a collective's or receive's time after its last
 * peer arrived (sim/compare_wait.h). Dependencies, the schedule, bubbles and the waits between
 * ranks (who arrives when, who waits for whom) stay the simulator's. The replayed step against the
 * measured one then isolates what the simulator itself models from how fast the cores and the
 * MPI transfers happened to be: on a shared machine whose speed moves by tens of percent between
 * calibration and run, a replay error stays the model's.
 *
 * Beside it, the same replay with the transfers modelled (`modelled_comm_s`): on an idle machine
 * the two agree when the communication model does; on a busy one a transfer waits for both ends
 * to get a core (tens of ms per collective were measured with ten processes on two cores), which
 * no link model holds. The communication model itself is compared op kind by op kind against the
 * measured transfers (`tessera compare`).
 *
 * The measured step is the trace's (otherData.step_s: the slowest rank's step as timed, which
 * also holds the executor's work outside the step program — loading the batch, zeroing the
 * gradients, waiting for the last pipeline sends and the loss all-reduce); `measured_ops_s` is the
 * part the program covers (each rank's first op start to its last op end, the latest rank). */
#ifndef TS_REPLAY_H
#define TS_REPLAY_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "program/problem.h"
#include "program/program.h"

typedef struct {
    char layout[160], model[64];
    int64_t ops;            /* compute ops replayed (every rank) */
    double replayed_step_s; /* the simulated step on the measured compute */
    double measured_step_s; /* the trace's step, as timed */
    double measured_ops_s;  /* its ops' extent (see above) */
    double error;           /* (replayed − measured) / measured */
    double modelled_comm_step_s, modelled_comm_error; /* the same with the transfers modelled */
} ts_replay;

/* Replays the trace at `measured_path` on `prog` (built for `pb`: the plan the run trained).
 * TS_ERR_INPUT when the trace is of another layout or program. */
ts_status ts_replay_trace(const ts_problem *pb, const ts_program *prog, const char *measured_path, ts_replay *out);

/* The same for layout `index` (0-based) of the plan file `plan` (model, system, uneven stages as
 * `tessera run --plan` reads them). */
ts_status ts_replay_plan(const char *plan, int index, const char *measured_path, ts_replay *out);

/* {"layout", "model", "ops", "replayed_s", "measured_s", "measured_ops_s", "error",
 * "modelled_comm_s", "modelled_comm_error"}; NANs null. */
ts_status ts_replay_json(const ts_replay *r, cJSON **out);

#endif
