/* The speed gauge of CPU ranks: how fast the core a rank runs on computes at this moment.
 *
 * Why: a shared VM's cores change speed in phases of seconds. On this
 * project's 2-core VM (2026-11-22) one sgemm of 256×688×256 ran 475 to 765 times per CPU-second
 * within 40 s on one core with next to no time stolen (0.15% of the ticks of another 40 s with
 * both cores busy, /proc/stat), and the two cores moved partly apart: two ranks training at once
 * took steps up to 25% apart at the same moments. Training steps follow: 10 runs of one layout
 * spread by 35-47% (coefficient of variation 12-17%).
 *
 * A reading runs the kinds a training step spends its time in, through the backend:
 * TS_GAUGE_CALLS sgemm of TS_GAUGE_M×N×K, then one causal attention forward and backward of
 * TS_GAUGE_T tokens, TS_GAUGE_H query and TS_GAUGE_KV key/value heads of TS_GAUGE_D (tiny's
 * heads), and divides their FLOPs (ts_gauge_flop) by the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), not the wall clock: ranks that share a core read the core's speed,
 * not their share of it, and the process's other threads (MPI's, OpenBLAS's idle ones) do not
 * count. So it reads one core with one OpenBLAS thread per rank (tessera run's default); with
 * more, the calling thread's share. Time the hypervisor steals is not CPU time, so steal is not
 * seen. The GEMMs take about a third of a reading (5.2-5.8 ms here), the attention pass the rest
 * (9.6-10.0 ms).
 *
 * Why both: the kinds do not move alike. Measured here (2026-11-22, 8 rounds of 4 layouts, 1-4
 * ranks on the 2 cores, both parts read between every step): as timed, the layouts' steps spread
 * with a coefficient of variation of 10-21%; times a GEMM-only reading 6-11%, and their ratio to
 * the one-rank layout's step moved by 10-13% from round to round; times this reading (GEMMs a
 * third of its time) 5-11% and 5-9%. And the GEMM-only reading put the multi-rank steps 4-11%
 * further from the one-rank step than an attention reading did, where the simulator's ratios
 * agreed with the latter's within 5%: in a one-rank run beside an idle core the GEMMs read
 * relatively slower than the step ran.
 *
 * Readings taken between steps, one before the first and one after each step, give each step the
 * mean of the two either side of it, combined over the ranks as their synchronisation dictates
 * (ts_gauge_step_speeds). A step's
 * time × its speed is its work in gauge FLOPs: divided by a reference speed (the calibration's,
 * node.gauge_flops_per_s) it is the time the step would have taken at that speed. `tessera run` records the readings,
 * calibrate's in-situ pass sets the reference, and compare and validate put measured times at
 * the reference speed with them. A reference read by another gauge (another mix) does not
 * compare: profiles written before a change of mix need calibrating again.
 *
 * For CPU ranks only: a GPU's speed is not its host core's. */
#ifndef TS_SPEED_GAUGE_H
#define TS_SPEED_GAUGE_H

#include "exec/backend.h"
#include "exec/runtime.h"

#define TS_GAUGE_M 256
#define TS_GAUGE_N 688
#define TS_GAUGE_K 256
#define TS_GAUGE_CALLS 4
#define TS_GAUGE_T 128 /* attention: tokens, query heads, kv heads, head dim (tiny's) */
#define TS_GAUGE_H 8
#define TS_GAUGE_KV 4
#define TS_GAUGE_D 32

typedef struct {
    const ts_backend *be;
    float *a, *b, *c; /* backend memory, M×K, K×N, M×N */
    float *q, *k, *v, *o, *lse, *dq, *dk, *dv, *scratch; /* attention operands, backend memory */
    int *pos; /* (T) positions 0..T-1 */
} ts_gauge;

ts_status ts_gauge_init(ts_gauge *g, const ts_backend *be);
void ts_gauge_free(ts_gauge *g); /* a zeroed gauge is fine */

/* One reading: FLOP per CPU-second of the gauge's kernels, now. TS_ERR_EXTERNAL when the CPU
 * clock fails or does not move. */
ts_status ts_gauge_read(ts_gauge *g, double *flops_per_s);

/* The FLOPs of one reading. */
double ts_gauge_flop(void);

/* Step speeds from `ranks` ranks' readings, rank r's steps + 1 at readings + r·(steps + 1), rank
 * r in pipeline stage stage[r] (>= 0): readings[0] was taken before step 0 and readings[s + 1]
 * after step s, and a rank's speed over step s is the mean of the two. The ranks of a stage
 * synchronise within the step (TP, SP, CP, EP, DP collectives), so a stage goes at its slowest
 * rank's speed; the step's critical path visits every stage in turn (equal work each), so the
 * step's speed is the harmonic mean of the stages'. One stage: the slowest rank's.
 * Measured here (2026-11-22): a shared VM's cores sit for seconds to minutes at speeds up to 1.6×
 * apart (two ranks of one DP step computed in 0.60 s and 0.40 s). Re-reading three validate runs
 * of 24 layouts (tessera validate --repeat 3, each run's per-rank readings): at the ranks' mean
 * speed the median |error| was 8.8%, 11.5% and 9.3% (worst 25.2%, 19.8%, 23.2%, the multi-rank
 * cases 9-10% under-predicted on average); at this speed 3.2%, 4.1% and 3.4% (worst 11.7%, 15.6%,
 * 9.8%); at the slowest rank's over all stages 3.2-4.6% but worst 15.5-20.0%, the pipeline cases
 * over-predicted. (Those profiles' node.speed_cv was their spread as timed; a fresh run with it
 * at the gauge's speed gave 5.2% / 20.3%.) Waits at the many synchronisations within a step,
 * shorter than the readings' spacing, stay the cost model's (planner/cost.h ts_lockstep_scale). */
void ts_gauge_step_speeds(const double *readings, const int *stage, int ranks, int steps, double *speeds);

/* Collective over the runtime's world: each rank passes its steps + 1 readings; rank 0 receives
 * every rank's in `all` (world × (steps + 1), rank r's at all + r·(steps + 1); `all` matters on
 * rank 0 only), ready for ts_gauge_step_speeds. */
ts_status ts_gauge_world_readings(const ts_runtime *rt, const double *readings, int steps, double *all);

#endif
