/* Op durations that replace the simulator's costs, keyed by (global rank, op index in the rank's
 * stage program). Replay (sim/replay.h) fills one from a measured trace so that the engine runs
 * each compute op for as long as it ran for real, and only the rest (dependencies, schedule,
 * bubbles, waits, communication) comes from the model.
 *
 * An overridden op runs for exactly its duration: no lockstep factor, no overlap slowdown, no core
 * sharing (a measured duration already holds them). Ops left unset (NAN) keep the model's cost,
 * but with a table no op shares cores (sim/cores.h): replay sets every compute op. */
#ifndef TS_COST_OVERRIDE_H
#define TS_COST_OVERRIDE_H

#include <stdint.h>

#include "program/program.h"

typedef struct {
    int n_ranks;
    int64_t *first; /* (n_ranks + 1) rank r's ops are dur_s[first[r] .. first[r + 1]) */
    double *dur_s;  /* (first[n_ranks]) seconds, NAN where the model's cost stands */
    int64_t n_set;  /* durations set */
    double *start_s; /* (n_ranks) when each rank begins its step (replay: as measured), 0 default */
    uint8_t *alone;  /* (first[n_ranks]) 1: a collective this rank ran without waiting for its
                        peers (the run issued it and went on), for its duration alone */
} ts_cost_override;

/* An empty table (every op NAN) for every rank of `prog`'s layout; ts_cost_override_free frees it. */
ts_status ts_cost_override_init(ts_cost_override *t, const ts_program *prog);
void ts_cost_override_free(ts_cost_override *t);

/* Op `op` of global rank `rank` runs `dur_s` ≥ 0 seconds; TS_ERR_INPUT when the rank or op is out
 * of the program or the duration is not a finite non-negative number. */
ts_status ts_cost_override_set(ts_cost_override *t, int rank, int op, double dur_s);

/* Rank `rank` begins its step `start_s` ≥ 0 seconds after the simulation's start; TS_ERR_INPUT out
 * of range. */
ts_status ts_cost_override_set_start(ts_cost_override *t, int rank, double start_s);

/* Collective `op` of `rank` runs alone for its duration (see `alone`); every member of it must be
 * marked. TS_ERR_INPUT out of range. */
ts_status ts_cost_override_set_alone(ts_cost_override *t, int rank, int op);

/* The duration of op `op` of global rank `rank`, NAN when unset. The caller keeps both in range. */
static inline double ts_cost_override_get(const ts_cost_override *t, int rank, int op) {
    return t->dur_s[t->first[rank] + op];
}

#endif
