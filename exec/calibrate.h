/* `tessera calibrate`: microbenchmarks of this machine through the executor's own code paths, and
 * the system spec (models/system.h) fitted to them, so that the planner and the simulator predict
 * what `tessera run` does here (NCCL_TOPO_DUMP_FILE's habit: the real machine round-trips through
 * the same schema as the predicted ones).
 *
 * What is measured (exec/calibrate.c), on the ranks of MPI_COMM_WORLD:
 *   - compute, on min(ranks, cores / threads) ranks at once, each with a core to itself (the
 *     others wait asleep, off the cores), because planner/cost.h's ts_compute_scale takes compute
 *     figures to be one rank's with a core to itself:
 *       GEMM: the backend's sgemm (OpenBLAS, fp32, row-major) over a grid of (m, n, k) in
 *       64..1024, the tiny models' range (GPUs: 64..8192, where cuBLAS reaches its peak); one
 *       repetition is one call each of NT (linear forward), NN (input gradient) and TN (weight
 *       gradient), the executor's mix; on GPUs the same grid again in bf16
 *       (ts_backend.gemm_bf16: cuBLAS, fp32 accumulation);
 *       FP8 GEMM, on GPUs of compute capability 8.9 and above (TS_CALIB_FP8_MIN_CC, checked on
 *       every rank): exec/gpu_bench.h's fp8 grid (the bf16 grid's (m, n, k) and a Llama-3.2-1B
 *       layer's GEMMs), each through cuBLASLt as Transformer Engine issues it
 *       (ts_gpu_time_gemm_fp8: E4M3, scale pointers, bf16 output); one row's time is the mean of
 *       Transformer Engine's three GEMMs per weight, the forward with fast accumulation and the
 *       two backward ones without: (t_fast + 2 t_split) / 3. Below 8.9 the GPU has no FP8
 *       tensor cores: nothing is measured and ts_calib_fp8_note says so;
 *       memory-bound kernels: ts_rmsnorm_fwd, ts_swiglu_fwd, ts_adamw at the tiny models' sizes
 *       (GPUs: up to 64 times more rows, where bandwidth rather than launch time dominates);
 *       attention: ts_attention_fwd and ts_attention_bwd, causal, grouped-query (tiny's heads);
 *   - communication, on every rank at once (as the executor's groups run): all-reduce,
 *     reduce-scatter, all-gather and all-to-all through the backend over blocks of g consecutive
 *     ranks, every block at once, for each divisor g >= 2 of the world; send/recv ping-pong
 *     between ranks 2i and 2i+1, every pair at once; sizes 1 KB .. 256 MB by factors of 2
 *     (quick: 1 KB .. 16 MB by factors of 4). Size is nccl-tests' (the full buffer; send-recv:
 *     one message), busbw = algbw × nccl-tests' factor (ts_calib_busbw_factor).
 * Each point: one warm-up call, one timed probe, then reps = min_point_s / probe (the same on
 * every rank) timed after a barrier; its time is one call's, the mean over the ranks taking part
 * (nccl-tests' default). Send-recv's time is half a round trip.
 *
 * Fitting (ts_calib_fit, pure, no MPI):
 *   - fp32 peak = the best GEMM rate; bf16 peak = the best bf16 GEMM rate where measured, else
 *     the fp32 figure (CPU ranks have no bf16 path: plans in bf16 cost as fp32); the efficiency curve = rate / peak per distinct GEMM FLOP
 *     count (equal counts pooled as total flops / total time), merged into at most
 *     TS_EFF_POINTS_MAX bins evenly spaced in log(flops);
 *   - fp8 (where the fp8 grid ran): peak_flops.fp8 = its best rate, efficiency.gemm_fp8 = rate /
 *     that peak by the same fitter as the fp32 curve (the schema of a zoo spec's FP8 curve, which
 *     planner/cost.h ts_gemm_eff prices FP8 GEMMs on); elsewhere the template's gemm_fp8 curve is
 *     kept and peak_flops.fp8 is 0 (no FP8);
 *   - hbm_bytes_per_s (efficiency.hbm = 1) and gpu.kernel_latency_s: time = latency + bytes / rate,
 *     linear least squares on the relative error over the memory-bound rows, latency >= 0 (a GPU
 *     kernel's launch costs microseconds, which small rows show); attention efficiency: one
 *     scale, least squares on the relative error of ts_attention_s over the rows' times less
 *     that latency;
 *   - collectives: time = a·latency + b·bytes / busbw, where a (latency steps) and b (bus volume
 *     per byte) are read off planner/cost.h's ts_coll_s itself (ring: all-reduce 2(n-1) steps and
 *     2(n-1)/n of the bytes, the others (n-1) and (n-1)/n, send-recv 1 and 1), so the fit cannot
 *     drift from the cost model. Linear least squares in (latency, 1/busbw) on the relative error
 *     (small and large messages weigh alike), latency >= 0 (ts_calib_fit_coll). Each collective
 *     gets its own fit (diagnostic), and one shared fit over every collective, size and group
 *     becomes the spec's link and fabric figures (efficiency.link_busbw = nic_busbw = 1: the fit
 *     is already achieved bus bandwidth). One host: the "nic" level is the same shared memory.
 * Every measured row carries the time the fitted spec predicts for it (model_s).
 *
 * A ts_calib is a plain value (fixed arrays, no heap memory, no _free). */
#ifndef TS_CALIBRATE_H
#define TS_CALIBRATE_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "common/status.h"
#include "exec/backend.h"
#include "exec/launch.h"
#include "models/system.h"
#include "planner/cost.h"

#define TS_CALIB_MAX_GEMM 160 /* 125 rows of a 5³ grid, and the fp8 grid's layer shapes (gpu_bench.h) */
#define TS_CALIB_MAX_MEM 16
#define TS_CALIB_MAX_ATTN 16
#define TS_CALIB_MAX_COLL 1024

typedef struct {
    int quick;        /* fewer shapes and sizes (to 16 MB), 5 ms per point: for tests and validate */
    int in_situ;      /* run the in-situ pass (ts_calib_situ) after the microbenchmarks */
    int situ_steps;   /* its training steps, the first a warm-up (0: 3 quick, else 5); more
                         steps average over more of a shared machine's speed phases */
    int situ_batch, situ_seq; /* its global batch and sequence length (0: TS_SITU_BATCH,
                                 TS_SITU_SEQ); kernels' speed in a step depends on the shapes */
    const char *situ_model;   /* the model it trains, a zoo name or a model JSON path (NULL:
                                 TS_SITU_MODEL) */
    int situ_mbs;             /* its micro-batch size (0: 1), dividing its global batch */
    int threads;      /* OpenBLAS threads per rank (ts_backend_cpu), as `tessera run --threads` */
    ts_device device; /* TS_DEVICE_CPU, or TS_DEVICE_CUDA: one GPU per rank (see ts_calibrate) */
    const char *argv; /* the command line, recorded in the spec's "source" (may be NULL) */
    FILE *log;        /* progress lines from rank 0 (NULL: silent) */
} ts_calib_opts;

typedef struct {
    int m, n, k, reps;
    double flops;   /* 2mnk: one call */
    double time_s;  /* one call (the mean of NT, NN, TN) */
    double model_s; /* ts_gemm_s with the fitted spec */
} ts_calib_gemm;

typedef struct {
    const char *kernel; /* "rmsnorm", "swiglu", "adamw" */
    int rows, cols;     /* rmsnorm (rows, cols); swiglu and adamw: rows·cols elements */
    int reps;
    double bytes;       /* read + written by one call */
    double time_s, model_s;
} ts_calib_mem;

typedef struct {
    int T, H, KV, D, bwd, reps; /* T queries and keys, H query and KV key/value heads of dim D */
    double flops;               /* executed, causal: fwd 0.5 · 4·T²·H·D, bwd 2.5 × that
                                   (planner/layer.c's convention) */
    double time_s, model_s;
} ts_calib_attn;

typedef struct {
    ts_coll coll;
    int ranks;      /* group size */
    int groups;     /* groups running at once */
    int reps;
    double bytes;   /* nccl-tests size: the full buffer (send-recv: one message) */
    double time_s;  /* one call; send-recv: half a round trip */
    double model_s; /* ts_coll_s with the fitted spec */
} ts_calib_coll;

typedef struct {
    int points;
    double latency_s, busbw_bytes_per_s;   /* this collective's own fit (per latency step) */
    double rms_error, max_error;           /* of its own fit, relative */
    double spec_rms_error, spec_max_error; /* of the spec's shared fit on its points */
} ts_calib_coll_fit;

/* The in-situ pass: kernels measured in isolation run at other speeds inside a training step
 * (caches shared with the neighbouring ops, other shapes, the trainer's own element-wise mix).
 * On each of the compute ranks at once (a core each, as the microbenchmarks and as a training
 * job's ranks run: every core busy; on GPUs every rank, a GPU each), `tessera run`'s trainer
 * trains a model (TS_SITU_MODEL unless the options name another, a zoo name or a model JSON path)
 * for a few steps on one rank each (MPI_COMM_SELF), global batch TS_SITU_BATCH of TS_SITU_SEQ
 * tokens in micro-batches of 1 unless the options say otherwise, the ranks' steps started together
 * (a barrier before each), in the device's precision (ts_situ_mode_of): fp32 on CPU ranks, and on
 * GPUs BF16 mixed precision (the bf16 kernel table, as `tessera run --precision bf16`) priced as
 * a bf16 plan is, since GPU plans are bf16; each op's measured time (median over the ranks' timed
 * steps) is summed by kind
 * beside the time the fitted spec gives it (sim/engine.h ts_op_cost_s), and the spec's figures
 * for the four compute kinds are scaled so that each kind's sum matches:
 *   GEMM: peak FLOP/s ÷ f_gemm (the efficiency curve keeps its shape): on CPU ranks fp32 and bf16
 *   (one figure: no bf16 path), on GPUs bf16 only (ts_calib_situ_apply says why);
 *   attention: efficiency.attention × f_gemm / f_attention (it also divides by the peak);
 *   element-wise: hbm_bytes_per_s ÷ f_elementwise;
 *   optimizer: efficiency.optimizer × f_elementwise / f_optimizer;
 * with f = measured / modelled. On CPU ranks every op's time is first put at the timed steps'
 * median speed on
 * the speed gauge (exec/speed_gauge.h, read between steps), which becomes
 * node.gauge_flops_per_s: the speed the profile's compute figures hold at. The spread of the
 * ranks' simultaneous steps, each at its own gauge speed, their standard deviation over their
 * mean (root mean square over the steps), becomes node.speed_cv (planner/cost.h
 * ts_lockstep_scale: ranks that synchronise run at the slowest one's pace on a machine whose
 * cores' speeds move apart): the part the gauge, read between steps, does not see, as measured
 * steps are put at their stages' slowest ranks' gauge speed (exec/speed_gauge.h). With one
 * compute rank the timed steps' spread over time stands in for it (0 with fewer than
 * TS_SITU_MIN_CV_STEPS of them). The spread is larger over shorter spans (the cores' speeds
 * apart for a moment, averaged out over longer ones): with two or more ranks it is also measured
 * over spans of 1, 2, 4, ... ops, and its decay with the span becomes node.speed_cv_decay, so
 * that ranks synchronising often wait longer (planner/cost.h). Measured on this project's VM
 * (2026-11-22, 10 two-rank DP steps' traces): 14% over single ops (1.4 ms), 11% over 21 ms, 9%
 * over 85 ms, 6% over the 0.48 s step: a decay of about 0.16.
 * On GPUs the gauge is not read (it measures a host core, speed_gauge.h): times are taken as
 * timed and node.gauge_flops_per_s is 0, as in a profile without the pass; the spread is still
 * measured (measured.in_situ, and calibrate_quality.h judges it) but node.speed_cv, its window
 * and decay stay 0: they price cores of a shared machine drifting apart for seconds, while a GPU
 * rank has its device to itself, and a few steps' jitter is no measure of GPUs apart in lockstep
 * (the zoo's GPU systems carry 0 too).
 * The shapes matter: on this project's 2-core VM, tiny's attention ran
 * 13% faster per modelled second at 128 tokens than at 256 inside a step (element-wise 5%),
 * though the microbenchmarks ran both lengths alike, so tessera validate runs the pass at its
 * matrix's batch and length, and scripts/gpu-check.sh at its sim-vs-run plan's model and shapes. */
#define TS_SITU_MODEL "tiny"
#define TS_SITU_BATCH 4
#define TS_SITU_SEQ 256
#define TS_SITU_MODEL_MAX 256 /* bytes of the model's name or path, with its NUL */

/* What the pass trains: a model (a zoo name or a model JSON path, as plan's -m), its global batch
 * of sequences of seq tokens, in micro-batches of mbs (dividing batch). */
typedef struct {
    const char *model;
    int batch, seq, mbs;
} ts_situ_shape;

/* The shape the options ask for, their unset fields (NULL, 0) the defaults above. Pure. */
ts_situ_shape ts_calib_situ_shape(const ts_calib_opts *o);

/* How the pass trains and prices on a device (ts_situ_mode_of). */
typedef struct {
    ts_dtype dtype; /* the problem's dtype its ops are priced in (ts_op_cost_s) */
    int bf16;       /* trains through the device's bf16 table (ts_backend_bf16), else fp32 */
    int gauged;     /* reads the speed gauge and sets node.gauge_flops_per_s and node.speed_cv */
} ts_situ_mode;

/* CPU ranks: fp32, fp32 table, gauged (the executor's fp32 and the CPU's only GEMM path); GPUs:
 * bf16, the bf16 table (GPU plans are bf16, and tessera run --precision bf16 trains them so), not
 * gauged. Pure. */
ts_situ_mode ts_situ_mode_of(ts_device device);

typedef enum { TS_SITU_GEMM, TS_SITU_ATTENTION, TS_SITU_ELEMENTWISE, TS_SITU_OPTIMIZER, TS_SITU_COUNT } ts_situ_kind;
extern const char *const ts_situ_kind_names[]; /* "gemm", "attention", "elementwise", "optimizer" */

typedef struct {
    int ops;
    double model_s, time_s; /* summed over the kind's ops of one step: fitted spec, measured */
    double factor;          /* time_s / model_s, applied to the spec (1 when no ops) */
} ts_calib_situ_kind;

#define TS_SITU_MAX_SPANS 24

/* With one compute rank, fewer timed in-situ steps than this leave node.speed_cv at 0 (too few to
 * estimate a spread over time). */
#define TS_SITU_MIN_CV_STEPS 4

typedef struct {
    char model[TS_SITU_MODEL_MAX]; /* the model trained, as named (a zoo name or a path) */
    int batch, seq, mbs;    /* the global batch, sequence length and micro-batch size trained */
    ts_situ_mode mode;      /* how it trained and priced (ts_situ_mode_of the calibrated device) */
    int steps, timed;       /* steps trained, of them timed (the first ones warm up) */
    int ranks;              /* ranks that trained at once */
    double step_s;          /* measured, median over ranks and timed steps, at the gauge speed below */
    double step_raw_s;      /* measured, median, as the clock read it */
    double gauge_flops_per_s; /* the speed gauge's median over ranks and timed steps
                                 (exec/speed_gauge.h), applied as node.gauge_flops_per_s */
    double step_cv;         /* the ranks' spread at the same steps, at the gauge's speed (one
                               rank: over time), applied as node.speed_cv, with step_raw_s as
                               node.speed_cv_window_s */
    /* Two or more ranks: their spread over spans of 1, 2, 4, ... consecutive ops (the same ops on
     * every rank, at the same step, each at its rank's gauge speed): the span's mean time and the
     * ranks' coefficient of
     * variation, root mean square over the spans and steps; and the decay, the slope of
     * -log cv over log span by least squares (clamped to [0, 1]), applied as
     * node.speed_cv_decay. */
    int n_spans;
    double span_s[TS_SITU_MAX_SPANS], span_cv[TS_SITU_MAX_SPANS];
    double cv_decay;
    ts_calib_situ_kind kind[TS_SITU_COUNT];
} ts_calib_situ;

typedef struct {
    /* where and how it ran */
    ts_device device;
    int ranks, cores, oversubscribed, threads, quick;
    int compute_ranks; /* ranks that ran the compute benchmarks at once */
    double min_point_s, elapsed_s;
    char host[64], date[32];      /* date: ISO 8601 UTC */
    char cpu[64];                 /* /proc/cpuinfo model name, "" when unknown */
    char openblas[128], mpi[256]; /* openblas_get_config(), MPI_Get_library_version() */
    char argv[256];
    double host_memory_bytes;
    char gpu[128];           /* CUDA: rank 0's GPU (ts_backend.device_name), "" on CPUs */
    int gpu_cc;              /* CUDA: the lowest compute capability of the ranks' GPUs, major·10 +
                                minor (90: Hopper); 0 on CPUs or unknown */
    double gpu_memory_bytes; /* CUDA: its memory (ts_backend.device_memory_bytes), 0 on CPUs */

    int n_gemm, n_mem, n_attn, n_coll, n_gemm_bf16, n_gemm_fp8;
    ts_calib_gemm gemm[TS_CALIB_MAX_GEMM];
    ts_calib_gemm gemm_bf16[TS_CALIB_MAX_GEMM]; /* the same grid in bf16, where the backend has it */
    ts_calib_gemm gemm_fp8[TS_CALIB_MAX_GEMM];  /* the fp8 grid, on GPUs with FP8 (see above) */
    ts_calib_mem mem[TS_CALIB_MAX_MEM];
    ts_calib_attn attn[TS_CALIB_MAX_ATTN];
    ts_calib_coll coll[TS_CALIB_MAX_COLL];

    /* the fit (ts_calib_fit) */
    ts_calib_coll_fit fit[TS_COLL_COUNT]; /* points = 0: not measured */
    ts_calib_coll_fit fit_all;            /* the shared fit the spec holds, over every collective */
    double gemm_rms_error, mem_rms_error, attn_rms_error; /* of the spec on the compute rows */
    double gemm_fp8_rms_error;                            /* of the spec on the fp8 rows */
    double gemm_bf16_rms_error;                           /* and on the bf16 rows (GPUs) */
    ts_system system;
    ts_calib_situ situ; /* steps = 0: not run */
} ts_calib;

/* Runs every microbenchmark on every rank of MPI_COMM_WORLD (MPI_Init if needed; the world needs
 * at least 2 ranks on CPUs) and fits the spec to them, starting from `tmpl` (cpu-localhost: the
 * fields that are not measured are kept). Collective: every rank returns the same result.
 *
 * With o->device TS_DEVICE_CUDA the same benchmarks run on one GPU per rank through the CUDA
 * backend (ts_backend_cuda: cuBLAS fp32 GEMMs, the CUDA kernel table, NCCL on device buffers):
 * every rank computes at once (a GPU each, no core sharing), one rank measures no communication
 * (the template's link figures are kept), the spec has node.gpus = ranks, node.cores = 0 and
 * serial_ops false, and the in-situ pass trains in bf16 without the speed gauge (ts_situ_mode_of);
 * the calibration's backend is closed before it, as the pass opens its own on its one-rank
 * runtime (ts_backend_cuda is once per process). */
ts_status ts_calibrate(const ts_calib_opts *o, const ts_system *tmpl, ts_calib *out);

/* Fits c->system, c->fit*, the rms errors and every row's model_s to the measured rows of `c`
 * (see above), starting from `tmpl`; c->ranks, c->cores (and the strings) say where it ran. Needs
 * at least one GEMM row; the other kinds keep the template's figures when they have no rows. */
ts_status ts_calib_fit(ts_calib *c, const ts_system *tmpl);

/* FP8 GEMMs need compute capability 8.9 or above: FP8 tensor cores arrived with Ada (8.9) and
 * Hopper (9.0), and cuBLASLt's E4M3 matmuls (cuBLAS documentation, cublasLtMatmul(), the FP8
 * requirements) run there and on later GPUs only. */
#define TS_CALIB_FP8_MIN_CC 89

/* Whether a GPU of compute capability `cc` (major·10 + minor) has FP8 tensor cores. */
int ts_calib_fp8_capable(int cc);

/* One line (no newline) saying what the profile's FP8 figures are: measured (rows, peak), or kept
 * from the template and why (a GPU below 8.9, or CPU ranks). */
void ts_calib_fp8_note(const ts_calib *c, char *buf, size_t cap);

/* Called before each in-situ step on every rank of the pass (ctx passed through); calibrate's is
 * a barrier, so that the ranks' steps run at the same moments. */
typedef ts_status (*ts_situ_sync)(void *ctx);

/* Doubles one rank's in-situ samples take: per step each op's time, then each step's time, then
 * the steps + 1 gauge readings (before the first step, after each). */
size_t ts_situ_sample_count(int steps, int n_ops);

/* Whether `sh` is a shape the pass can train on spec `sys` (ts_calib_situ above): the model loads,
 * 1 <= seq <= its max_seq, batch >= 1, mbs >= 1 dividing batch, and the executor trains it on one
 * rank (ts_trainer_check); TS_ERR_INPUT with one line saying which, else TS_OK. Needs no MPI, so
 * `tessera calibrate` asks before any rank starts. */
ts_status ts_calib_situ_check(const ts_system *sys, const ts_situ_shape *sh);

/* One rank's in-situ pass (see ts_calib_situ above) on this process (MPI_COMM_SELF): `steps` steps
 * of shape `sh` on the spec fitted so far in c->system, on c->device (CPU ranks: the CPU backend
 * with c->threads OpenBLAS threads; CUDA: its own backend on the pass's one-rank runtime, opened
 * and closed here, so the caller holds none) in its mode (ts_situ_mode_of), `sync` before each.
 * *samples (malloc'd, *count doubles, the caller frees) receives, as laid out in
 * ts_situ_sample_count, each op's time as timed, each step's and the gauge readings (0 where the
 * mode reads none). sync is called exactly `steps` times even when the pass fails, unless sync
 * itself fails. TS_ERR_INPUT when ts_calib_situ_check refuses the shape or steps < 2. */
ts_status ts_calib_situ_run(const ts_calib *c, const ts_situ_shape *sh, int steps, ts_situ_sync sync, void *ctx,
                            double **samples, size_t *count);

/* Fills c->situ's measured and modelled sums (not the factors) from `ranks` ranks' samples of
 * ts_calib_situ_run of shape `sh` laid end to end, `steps` steps each, with the spec fitted so far
 * in c->system, in c->device's mode (ts_situ_mode_of: priced in its dtype; without the gauge each
 * time counts as timed and gauge_flops_per_s is 0).
 * Pure. */
ts_status ts_calib_situ_sums(ts_calib *c, const ts_situ_shape *sh, const double *samples, int ranks, int steps);

/* Sets c->situ's factors from its sums and scales c->system's compute figures by them (see
 * above), in c->device's mode (ts_situ_mode_of: its dtype's peak; node.speed_cv and the gauge
 * only where gauged); kinds without ops keep factor 1. Pure. */
void ts_calib_situ_apply(ts_calib *c);

/* Least squares of time_s = a·latency + b·bytes / busbw over `n` rows (a, b from ts_coll_s, see
 * above), on the relative error, latency >= 0. Fills latency_s, busbw_bytes_per_s, points,
 * rms_error and max_error of *out. Needs n >= 1 and positive times. */
ts_status ts_calib_fit_coll(const ts_calib_coll *rows, int n, ts_calib_coll_fit *out);

/* nccl-tests' bus-bandwidth factor of collective `coll` over n ranks: busbw = algbw × factor
 * (all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all (n-1)/n; send-recv 1). */
double ts_calib_busbw_factor(ts_coll coll, int n);

/* The tables, nccl-tests style: a '#' header echoing the parameters, fixed-width columns with a
 * units row, one table per benchmark (per collective and group size), the fits and the spec. */
ts_status ts_calib_print(FILE *f, const ts_calib *c);

/* The JSON mirror of the tables (times in s, rates in FLOP/s and bytes/s, errors as fractions):
 * {"tessera": "calibrate", "ranks", "cores", "oversubscribed", "compute_ranks", "threads",
 *  "quick", "host", "date", "openblas", "mpi", "elapsed_s",
 *  "gemm": [{"m","n","k","flops","reps","time_s","flops_per_s","eff","model_s"}], "gemm_bf16" (GPUs,
 *  the same fields, eff against the bf16 peak),
 *  "elementwise": [{"kernel","rows","cols","bytes","reps","time_s","bytes_per_s","model_s"}],
 *  "attention": [{"T","H","KV","D","pass","flops","reps","time_s","flops_per_s","model_s"}],
 *  "collectives": [{"collective","ranks","groups","bytes","count","reps","time_s","algbw",
 *                   "busbw","model_s"}],
 *  "fits": [{"collective" ("all" for the shared fit),"points","latency_s","busbw",
 *            "rms_error","max_error","spec_rms_error","spec_max_error"}],
 *  "system": the profile (ts_calib_profile)}.
 * The caller frees *out with cJSON_Delete. */
ts_status ts_calib_json(const ts_calib *c, cJSON **out);

/* The profile `-o` writes: the fitted spec in models/system.c's schema (it loads back with
 * ts_system_load), each measured figure written {"value": x, "source": "how it was measured"}.
 * The caller frees *out with cJSON_Delete. */
ts_status ts_calib_profile(const ts_calib *c, cJSON **out);

#endif
