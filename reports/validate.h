/* The validation experiment of `tessera validate`: does the simulator predict this machine?
 *
 * Calibrates the machine (`tessera calibrate --quick`, in situ at the matrix's batch and length)
 * unless a system spec is given, then for each layout of a matrix of small ones (DP, TP, SP, PP
 * with every schedule, CP, ZeRO stages, recompute, EP and combinations of the tiny and tiny-moe
 * models, up to max_ranks ranks) writes its plan, trains it for real (`tessera run` under mpirun,
 * a child process of `self`), simulates one step (sim/engine.h) and compares the two traces op by
 * op (sim/compare.h). With repeat R it calibrates and trains every layout once per pass, so that
 * calibrations and runs alike sample a shared machine at R moments, and simulates with the
 * calibration whose in-situ step is the median. Measured steps are put at the calibration's speed
 * with the speed gauge (exec/speed_gauge.h) where the runs and the profile have one; the steps
 * as timed are kept beside ("raw").
 *
 * Files, in opts.dir: profile.json (profile.pN.json per pass with repeat > 1), and per case
 * case-II.plan.json, case-II.sim.trace.json, case-II.run.trace.json, case-II.run.json (pass P > 1:
 * case-II.rP.run.trace.json, case-II.rP.run.json).
 *
 * JSON form (ts_validate_json; DESIGN.md's "validate" fields and more):
 *   {"system", "repeat",
 *    "cases": [{sim/compare.h's comparison, "case", "ranks", "simulated_s", "measured_s", "error",
 *               "measured_raw_s", "raw_error", "measured_runs_s", "measured_raw_runs_s",
 *               "measured_spread", "measured_raw_spread"}],
 *    "median_abs_error", "max_abs_error", "median_abs_raw_error", "max_abs_raw_error",
 *    with opts.replay: "replay": {"median_abs_error", "max_abs_error"} and per case "replay":
 *    {sim/replay.h's JSON of the first pass, "errors": [each pass's], "error": their median},
 *    per case "memory" (reports/validate_memory.h) and "memory": {"median_abs_error": {category: x},
 *    "max_abs_error": {...}},
 *    "noise": {"load_avg_1min", "cores", "step_spread", "gauge_spread", "repeat_spread", "judgeable",
 *              "verdict"} (reports/validate_noise.h),
 *    on CPU ranks: "within_cores": {"cores", "cases", "median_abs_error", "max_abs_error"} over the
 *    cases of at most that many ranks}
 * Errors are fractions of the measured step; a spread is (max − min) / median over the passes. */
#ifndef TS_VALIDATE_H
#define TS_VALIDATE_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "exec/launch.h" /* ts_device */
#include "sim/compare.h"
#include "sim/replay.h"
#include "reports/validate_memory.h"
#include "reports/validate_noise.h"

#define TS_VALIDATE_CASES 24      /* the layouts of the matrix */
#define TS_VALIDATE_MAX_REPEAT 20 /* passes */
#define TS_VALIDATE_WARMUP 3      /* steps of each run left out of its median */

typedef struct {
    const char *self;     /* the tessera binary that calibrates and runs (children) */
    const char *system;   /* the spec to plan and simulate with; NULL: calibrate each pass */
    const char *dir;      /* an existing folder for the files; NULL: a temporary one, removed */
    int max_ranks;        /* the largest layouts to run, in ranks */
    int steps;            /* training steps per run, > TS_VALIDATE_WARMUP */
    int repeat;           /* passes, 1..TS_VALIDATE_MAX_REPEAT */
    int situ_steps;       /* the calibration's in-situ steps (calibrate --situ-steps) */
    int64_t batch, seq;   /* sequences per step, tokens per sequence */
    unsigned char only[TS_VALIDATE_CASES]; /* nonzero: run only these cases; all zero: every one */
    int replay;           /* also replay every run's trace (sim/replay.h) */
    double repeat_to;     /* > 0: passes (2 .. TS_VALIDATE_MAX_REPEAT, `repeat` ignored) until the
                             median over the cases of their passes' spread / √passes is at most
                             this fraction: the measured steps' medians then hold to about it */
    FILE *log;            /* progress lines ("tessera validate: pass 1/1 [1/24] ..."); NULL: silent */
    ts_device device;     /* where the runs and the calibration train (their --device) */
} ts_validate_opts;

/* The largest layouts `device` can run here, in ranks, for a requested maximum: CPU ranks as
 * requested; on CUDA one rank per GPU, so at most `gpus` (one GPU: the matrix's one-rank cases). */
int ts_validate_max_ranks(ts_device device, int gpus, int requested);

/* max_ranks 8, steps 8, repeat 1, situ_steps 16, batch 8, seq 128, every case, log stderr, CPU. */
void ts_validate_opts_defaults(ts_validate_opts *o);

typedef struct {
    int index;   /* in the matrix, 0-based */
    int ranks;
    ts_compare cmp; /* the first pass's traces; its measured step the median over the passes */
    double raw_s[TS_VALIDATE_MAX_REPEAT]; /* each pass's median step, as timed */
    double flop[TS_VALIDATE_MAX_REPEAT];  /* and its work in gauge FLOPs (0: no gauge) */
    double run_s[TS_VALIDATE_MAX_REPEAT]; /* at the calibration's speed where known, else as timed */
    double raw_error;   /* the step error against the measured step as timed */
    double run_spread, raw_spread; /* (max − min) / median of run_s, raw_s */
    ts_replay replay;   /* opts.replay: the first pass's trace replayed */
    double replay_errors[TS_VALIDATE_MAX_REPEAT]; /* each pass's replay error */
    double replay_error; /* their median; NAN without opts.replay */
    double step_spread[TS_VALIDATE_MAX_REPEAT], gauge_spread[TS_VALIDATE_MAX_REPEAT]; /* each pass's run's
                           (reports/validate_noise.h) */
    ts_validate_memory memory; /* the first pass's run: predicted against measured peaks */
} ts_validate_case;

/* The experiment's outcome. ts_validate_result_free frees the cases. */
typedef struct {
    char system[4200];  /* the spec the plans and simulations used (a profile when calibrated) */
    int steps, repeat;
    int64_t batch, seq;
    int bf16;     /* the runs trained bf16 mixed precision (GPUs, ts_situ_mode_of), else fp32 */
    int n;                    /* cases run */
    ts_validate_case *cases;  /* (n), in matrix order */
    /* Over the cases: |error| at the calibration's speed, |raw_error| as timed, and the median
     * spreads (NAN without cases). */
    double median_abs_error, max_abs_error, median_abs_raw_error, max_abs_raw_error;
    double median_spread, median_raw_spread;
    int replayed; /* opts.replay */
    double replay_median_abs_error, replay_max_abs_error; /* over the cases' replay errors */
    ts_validate_noise noise; /* can this machine judge the target? */
    /* Per memory category over the cases that report it: median and worst |error| (NAN: none). */
    double memory_median_abs_error[TS_VALIDATE_MEM_KINDS], memory_max_abs_error[TS_VALIDATE_MEM_KINDS];
    /* CPU ranks: the cases of at most `within_cores` ranks (the machine's cores; 0 on GPUs, where
     * nothing is summarised apart), how many, and their median and worst |error| (NAN: none).
     * Past the cores the operating system time-slices the ranks, which the simulator shares out
     * evenly (sim/cores.h): those cases carry the scheduler's error beside the simulator's. */
    int within_cores, n_within;
    double within_median_abs_error, within_max_abs_error;
} ts_validate_result;

/* Fills the within-cores summary of r for a machine of `cores` cores (0: leaves it empty). */
void ts_validate_within_cores(ts_validate_result *r, int cores);

/* Runs the experiment. Children that fail (a calibration, a run) fail it with TS_ERR_EXTERNAL
 * naming the command; their own message is on stderr above. */
ts_status ts_validate(const ts_validate_opts *o, ts_validate_result *out);
void ts_validate_result_free(ts_validate_result *r);

/* The JSON form above; the caller deletes *out. */
ts_status ts_validate_json(const ts_validate_result *r, cJSON **out);
/* The table: '#' lines echoing the setup, one row per case (layout, ranks, simulated and measured
 * step, error, with repeat > 1 the spread, with a gauge the raw step and error, and the op kind
 * furthest off), then the median and worst |error|. */
ts_status ts_validate_print(FILE *f, const ts_validate_result *r);

#endif
