/* Can this machine judge the simulator? `tessera validate`'s noise verdict (reports/validate.h).
 *
 * An error of 5% cannot be told from a machine whose runs of the same work spread by 30%: the
 * verdict compares the target with what the machine did while the matrix ran:
 *   - the spread of each run's measured steps ((max − min) / median of the steps after warm-up),
 *     and with --repeat the spread of a case's passes, median over the cases;
 *   - the speed gauge's spread over the same steps (exec/speed_gauge.h), which the measured steps
 *     are put at; a step spread far above it is noise the gauge does not see (on a busy machine
 *     MPI transfers wait for both ends to get a core: tens of ms per collective);
 *   - the load average before the experiment (getloadavg(3)) against the cores.
 * The target can be judged when the median spread is at most the median target. A replay
 * (sim/replay.h) runs on the measured times and is judged whatever the noise. */
#ifndef TS_VALIDATE_NOISE_H
#define TS_VALIDATE_NOISE_H

#include "common/status.h"

#define TS_VALIDATE_TARGET_MEDIAN 0.05 /* median |error| the simulator is held to (DESIGN.md) */
#define TS_VALIDATE_TARGET_WORST 0.15

/* From a `tessera run --json` file: the spread of the steps after the first `warmup`, and of the
 * gauge's speeds over them (0 when the run has no gauge). */
ts_status ts_run_spreads(const char *run_json, int warmup, double *step_spread, double *gauge_spread);

typedef struct {
    double load_avg_1min; /* before the experiment; -1 unknown */
    long cores;
    double step_spread, gauge_spread, repeat_spread; /* medians over the cases (repeat: NAN with one pass) */
    double spread;        /* the larger of step_spread and repeat_spread */
    int judgeable;        /* spread ≤ TS_VALIDATE_TARGET_MEDIAN */
    char verdict[256];
} ts_validate_noise;

/* The load average and cores now, before anything runs. */
void ts_validate_noise_start(ts_validate_noise *n);

/* The verdict from the cases' median spreads (repeat_spread NAN with one pass). */
void ts_validate_noise_judge(ts_validate_noise *n, double step_spread, double gauge_spread, double repeat_spread);

#endif
