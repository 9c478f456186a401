/* The run driver of `tessera run`: trains a plan's layout for real on this MPI rank (CPU: OpenBLAS
 * + Open MPI; GPU: cuBLAS + NCCL, one GPU per rank), op by op as the step program says, and
 * gathers on world rank 0 what the run reports: losses, step times (the slowest rank's per step),
 * the last step's op spans of every rank, every rank's memory peaks, the MoE routing spread and,
 * on CPU ranks, the speed gauge's readings between steps (exec/speed_gauge.h).
 *
 * Every rank of the job calls ts_run with the same options; it makes the runtime (MPI_Init), the
 * program, the backend, the trainer and the watchdog (exec/watchdog.h), runs the steps and frees
 * them again. MPI_Finalize stays the caller's (ts_runtime_finalize), after ts_run_result_free.
 *
 * A rank that fails cannot leave alone: its peers wait for it in collectives, and freeing the
 * trainer or the watchdog is itself collective (or waits for sends no peer will receive). So on
 * failure ts_run returns the error with this rank's runtime, trainer and watchdog left as they
 * are, and the result with them (the trainer points into it: not to be freed), and the caller
 * ends the whole job with the message (ts_runtime_abort), as `tessera run` does.
 *
 * The executor trains fp32 whatever precision the plan was made for (plan defaults to bf16): the
 * problem is made fp32 here, so the program's byte counts and the planner memory reported beside
 * the measured one are those of what runs (4 + 4 + 8 bytes per parameter, 4-byte activations).
 *
 * The reports of a result (exec/run_report.c) write what rank 0 holds: the `tessera run --json`
 * document, the table and the Chrome trace of the last step (program/trace.h). */
#ifndef TS_RUN_H
#define TS_RUN_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "exec/bf16_ref.h" /* --precision: ts_precision_parse, ts_backend_bf16 */
#include "exec/launch.h"
#include "exec/trainer.h"
#include "planner/problem.h"
#include "program/program.h"

/* An injected failure for the tests (TESSERA_FAULT_RANK, _STEP, _MODE): rank `rank` fails at the
 * start of step `step` — an error (TS_ERR_EXTERNAL) naming the step, or with mode "kill" it
 * SIGKILLs itself, with "stop" SIGSTOPs itself (a stalled rank) and fails when continued. */
typedef struct {
    int rank; /* -1: none */
    int step;
    const char *mode; /* NULL or "fail": the error */
} ts_run_fault;

typedef struct {
    const char *plan;        /* the plan file (tessera plan -o): its uneven stages and the planner's
                                memory of the layout are read from it */
    int index;               /* which of its layouts, 0-based */
    ts_problem pb;           /* the plan's problem as read (ts_plan_read); trained in fp32 */
    ts_layout layout;        /* its index-th layout */
    int steps, warmup;       /* warmup < steps; the first `warmup` steps are left out of the
                                step-time statistics */
    int threads;             /* OpenBLAS threads per rank (CPU ranks) */
    double timeout_s;        /* the watchdog's limit per phase (exec/watchdog.h); 0: none */
    ts_device device;
    int bf16;                /* BF16 mixed precision (--precision bf16): the device's bf16 kernel table
                                (exec/bf16_ref.h's ts_backend_bf16); 0: fp32 */
    ts_train_opts train;
    const char *params;      /* write the trained parameters here (rank 0, atomically, float32 in
                                exec/reference.h's order); NULL: not written */
    FILE *log;               /* rank 0's note when the plan is not fp32; NULL: silent */
    int log_steps;           /* and a line per step to `log` ("step 1/10: loss ..., ... s") */
    ts_run_fault fault;
} ts_run_opts;

/* No plan, 10 steps of which 2 warm-up, 1 thread, timeout 1800 s (torch.distributed's default
 * process-group timeout), CPU, ts_train_opts_defaults, no parameters written, log stderr without
 * the step lines, no fault. */
void ts_run_opts_defaults(ts_run_opts *o);
/* The injected fault the environment asks for (TESSERA_FAULT_RANK, TESSERA_FAULT_STEP (default
 * 0), TESSERA_FAULT_MODE); rank -1 when TESSERA_FAULT_RANK is unset. */
void ts_run_fault_from_env(ts_run_fault *f);

/* Whether the executor can train o's layout (ts_trainer_check on the problem as trained, fp32)
 * and, when o->plan is set, the plan's stages build its step program. Needs no MPI: `tessera run` asks before it
 * starts any rank. */
ts_status ts_run_check(const ts_run_opts *o);

#define TS_RUN_MEM_KINDS 5 /* the memory categories of ts_run_mem_names */
extern const char *const ts_run_mem_names[TS_RUN_MEM_KINDS]; /* weights, grads, optimizer,
                                                                activations, buffers */

/* What a run reports. Every rank holds `rank`, `pb`, `layout`, `plan_dtype`, `prog`, `world`,
 * `steps`, `warmup`, `losses` and `step_s`; the rest is filled on world rank 0 only (zero or
 * NULL elsewhere). ts_run_result_free frees what the pointers hold, and the program. */
typedef struct {
    int rank;               /* this process's world rank */
    ts_problem pb;          /* as trained: fp32 */
    ts_layout layout;
    ts_dtype plan_dtype;    /* what the plan was made for */
    ts_program prog;        /* the step program every rank walked; has_prog 0: none */
    int has_prog;
    int world, steps, warmup;
    float *losses;          /* (steps) the global batch's mean loss per step */
    double *step_s;         /* (steps) the slowest rank's time per step */
    double median_s, p10_s, p90_s; /* of the measured steps (after the warm-up), ts_quantile */
    double kind_s[TS_OP_KIND_COUNT]; /* the last step's time by op kind, mean over the ranks */
    double *mem;            /* (world, TS_RUN_MEM_KINDS) each rank's peak bytes by category */
    double mem_worst[TS_RUN_MEM_KINDS]; /* the largest of each category over the ranks */
    double moe_load_cv;     /* the routing's spread over the ranks (ts_trainer_moe_load); < 0: dense */
    /* The speed gauge (CPU ranks; NULL / 0 on GPUs): */
    double *speed;          /* (steps) each step's speed, FLOP/s (ts_gauge_step_speeds) */
    double *readings;       /* (world, steps + 1) each rank's readings, before step 0 and after each */
    double gauge_median, gauge_lo, gauge_hi; /* FLOP/s: median, lowest and highest over the measured steps */
    double gauge_step_flop; /* median over the measured steps of time × speed: a step's work, FLOP */
    /* The last step's op spans of every rank, for the trace: rank r's stage program's n_ops from
     * spans + span_off[r] (world + 1 offsets, the last the total). */
    ts_op_span *spans;
    int *span_off;
    ts_eval plan_eval;      /* the planner's evaluation of the layout, fp32 (ts_plan_evaluate) */
    int has_plan_eval;      /* 0 when that failed */
} ts_run_result;

void ts_run_result_init(ts_run_result *r);
void ts_run_result_free(ts_run_result *r);

/* Trains o->steps steps on this rank and gathers the results on world rank 0. Collective over
 * the job. On failure see above: the caller ends the job. */
ts_status ts_run(const ts_run_opts *o, ts_run_result *out);

/* ---- Reports of rank 0's result (exec/run_report.c) -------------------------------------------- */

/* The `tessera run --json` document (DESIGN.md's "run" fields and more):
 *   {"layout", "model", "dtype", "plan_dtype", "ranks", "steps", "warmup",
 *    "step_s": {"median", "p10", "p90", "each"}, "losses", "kind_s": {per op kind},
 *    "memory_bytes": {categories, "total"}, "memory_bytes_by_rank": [{"rank", "stage", ...}],
 *    "moe_load_cv" (MoE models), "gauge": {"flops_per_s", "readings_flops_per_s",
 *    "median_flops_per_s", "step_flop_median"} (with a gauge),
 *    "planner_memory_bytes" (when the planner evaluated the layout)}.
 * The caller deletes *out. */
ts_status ts_run_result_json(const ts_run_result *r, cJSON **out);
/* The summary as '#' lines: layout, losses, step-time quantiles, time by op kind, the worst
 * rank's memory, the gauge and the MoE routing. */
ts_status ts_run_result_print(FILE *f, const ts_run_result *r);
/* The last step's measured ops of every rank as a Chrome trace (program/trace.h) at `path`. */
ts_status ts_run_result_trace(const ts_run_result *r, const char *path);

#endif
