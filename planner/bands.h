/* Uncertainty bands: how far the planner's step times have been from measured ones, by feature
 * family and GPU, so that every prediction carries the range a measurement is likely to fall in.
 *
 * The residuals are the planner's own, computed when asked: every published run in
 * validation/published/ (planner/published.h) predicted by the current code under the stack it
 * ran on, its step-time error e = (predicted - measured) / measured. A family's band is the
 * range [min e, max e] of its runs on the problem's stack; a prediction p then reads as a
 * measured step in [p / (1 + max e), p / (1 + min e)]. A layout belongs to every family it
 * shows (dense or FP8, MoE, CP > 1, 1024 GPUs or more: scale) and takes the widest of their
 * bands; a run counts in the families its layout shows, except that an MoE run counts in the MoE
 * family alone (an MoE layout takes MoE's band beside its precision's, a dense one no MoE error).
 * The planner errs by GPU, with the GPU's efficiency curves (docs/calibration-and-
 * validation.md: Megatron-Bridge's FP8 runs within 9% on H100, 7.6% on B200, 14.6% on GB200, the
 * GB300's on a placeholder curve). So a plan takes the runs on its own GPU when the
 * stack has some there; else those on the GPUs whose system files carry its GEMM efficiency curve
 * (H800 and H200 take H100's runs, the Hopper curve being theirs); else every GPU's runs, and the
 * plan says whose band it took. Within that set of runs a family without a run takes their widest
 * band; with no set at all (no run on the stack), the widest band of all stacks' runs. A family
 * that takes a wider band than its own is named unmeasured. */
#ifndef TS_BANDS_H
#define TS_BANDS_H

#include "planner/problem.h"

typedef enum { TS_FAM_DENSE, TS_FAM_FP8, TS_FAM_MOE, TS_FAM_CP, TS_FAM_SCALE, TS_FAM_COUNT } ts_family;
extern const char *const ts_family_names[]; /* "dense", "fp8", "moe", "cp", "scale" */

#define TS_BAND_SCALE_GPUS 1024 /* the scale family: runs on this many GPUs or more */
#define TS_BAND_MAX_GPUS 8      /* distinct GPUs kept for the band's text */

typedef struct {
    int n;              /* published runs */
    double err_min, err_max; /* their step-time errors' range */
} ts_band_stat;

typedef struct {
    char name[64];                  /* a system spec's gpu name */
    ts_eff_curve gemm_eff;          /* its system file's GEMM efficiency curve (the first run's) */
    ts_band_stat fam[TS_FAM_COUNT]; /* runs on this stack and GPU, by family */
    ts_band_stat all;               /* every run on this stack and GPU */
} ts_band_gpu;

typedef struct {
    ts_band_stat fam[TS_FAM_COUNT]; /* runs on this stack, by family */
    ts_band_stat stack_all;         /* every run on this stack */
    ts_band_stat all;               /* every run on any stack */
    ts_band_gpu gpus[TS_BAND_MAX_GPUS]; /* the runs on this stack by GPU (the first
                                           TS_BAND_MAX_GPUS GPUs; later ones count above only) */
    int n_gpus;
} ts_bands;

/* Predicts the published runs of `dir` (validation/published) and gathers the residuals of runs
 * on stack `stack` (a profile name); the runs of MoE models only when `moe` (the plan's model is
 * MoE): a dense plan takes no MoE error, so they are not predicted for it. */
ts_status ts_bands_compute(const char *dir, const char *stack, int moe, ts_bands *out);

/* Whether a run on the stack was measured on GPU `gpu_name` (a system spec's gpu_name). */
int ts_bands_measured_on(const ts_bands *b, const char *gpu_name);

/* The runs a plan on system `sys` takes (see above): their families and widest band into *out
 * (out->name: ""), and which of b->gpus they ran on (bit i for b->gpus[i]). Returns 0 when they
 * are the stack's runs on every GPU (or all stacks' when the stack has none), else 1 (its GPU)
 * or 2 (GPUs of its GEMM curve). */
int ts_bands_runs_for(const ts_bands *b, const ts_system *sys, ts_band_gpu *out, unsigned *gpus);
/* The GPUs of `gpus` (bits as above; 0: every GPU), "H100 SXM5 80GB, ...", into buf (truncated
 * at cap). */
void ts_bands_gpus_text(const ts_bands *b, unsigned gpus, char *buf, size_t cap);

/* One prediction's band. */
typedef struct {
    double lo_s, hi_s;   /* measured step likely within */
    unsigned families;   /* bit per ts_family the layout belongs to */
    unsigned unmeasured; /* of those, families without a published run on the stack */
} ts_band;

void ts_band_of(const ts_bands *b, const ts_problem *pb, const ts_layout *l, double step_s, ts_band *out);

/* Two bands overlap: neither layout is faster for sure. */
int ts_bands_overlap(const ts_band *a, const ts_band *b);

#endif
