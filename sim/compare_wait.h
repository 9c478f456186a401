/* Wait versus transfer. A measured collective or receive span holds two things: the wait for the
 * last peer to arrive (arrival skew: one rank's compute ran late) and the transfer after it. The
 * executor's spans of all ranks lie on one clock (exec/run.c), so a collective's members' starts
 * are their arrivals and the latest is when the transfer could begin; a receive's transfer begins
 * once both it and its matching send (the k-th send of the peer to this stage with the same chunk
 * and phase, MPI's order) have started. Nothing is added to the timed step to learn this.
 *
 * For both traces of a comparison, per communication op:
 *   wait     = transfer start − end of the rank's previous op (the rank idle or blocked),
 *   transfer = op end − transfer start,
 * where the simulated transfer start is the span's start (the simulator starts a collective when
 * its last member arrives, a receive when its data is sent) and the measured one max(own start,
 * last arrival). The simulator's communication is then compared with the measured transfer, and
 * the waits are reported beside each other. Sends are non-blocking and left out. The previous op
 * is the one a rank ran before, as the CPU executor and a serial_ops simulation run one op at a
 * time; with overlapping streams (GPUs) it is the latest-ending op that started before, and a
 * wait is then an upper bound. */
#ifndef TS_COMPARE_WAIT_H
#define TS_COMPARE_WAIT_H

#include <cjson/cJSON.h>

#include "common/status.h"
#include "program/layout.h"
#include "sim/compare.h"

typedef struct {
    char kind[48];                     /* "collective:all-reduce", "recv" */
    int ops;                           /* compared ops of the kind */
    double simulated_s, simulated_wait_s; /* summed over the compared ops */
    double measured_transfer_s, measured_wait_s; /* at the comparison's speed */
    double transfer_error;             /* (simulated − transfer) / transfer; NAN when 0 */
} ts_wait_kind;

typedef struct {
    int n_kinds;
    ts_wait_kind *kinds; /* (n_kinds) owned */
} ts_compare_waits;

/* The split over the ranks the simulated trace holds (traces checked by ts_compare_traces first),
 * measured times × `speed`. */
ts_status ts_compare_waits_read(const char *sim_path, const char *measured_path, double speed,
                                ts_compare_waits *out);
void ts_compare_waits_free(ts_compare_waits *w);

/* Adds "waits": [{"kind", "ops", "simulated_s", "measured_transfer_s", "transfer_error",
 * "simulated_wait_s", "measured_wait_s"}] to `root`. */
ts_status ts_compare_waits_json(const ts_compare_waits *w, cJSON *root);

/* For every op of the measured trace `m` (of layout `l`), in its order: the transfer of a
 * collective or receive as above (NAN for other ops) and, when `send_of` is not NULL, for a
 * receive the index in `m` of its matching send (-1 for none or another op). */
ts_status ts_trace_transfers(const ts_trace_ops *m, const ts_layout *l, double *transfer_s, int *send_of);

#endif
