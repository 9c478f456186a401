/* Is a calibration good enough to plan with? Fit quality and machine stability, judged after
 * `tessera calibrate` measured (exec/calibrate.h).
 *
 * Fit quality: a fit whose root-mean-square relative error over its own points exceeds a limit
 * misprices the ops it stands for by about that much. The limits follow from what `tessera
 * validate` holds the simulator to (median 5%, worst 15%, docs/calibration-and-validation.md):
 * GEMMs, with attention the largest part of a CPU step (about 40% each of tiny's measured step,
 * `tessera compare` of the matrix's case 2 in docs/calibration-and-validation.md), may be off by
 * no more than the worst-case target, 15% (and so may fp8 GEMMs, an FP8 plan's linear layers, where
 * a GPU measured them); the smaller kinds and attention, whose in-situ factor
 * rescales it, by twice that; collectives, under 1% of those steps on one host, by 50%.
 *
 * Stability: the load average over the last minute against the cores (getloadavg(3)) and, after the
 * in-situ pass, the ranks' spread at the same step (node.speed_cv) against the same 5%. */
#ifndef TS_CALIBRATE_QUALITY_H
#define TS_CALIBRATE_QUALITY_H

#include <stdio.h>

#include "exec/calibrate.h"

#define TS_CALIB_GEMM_RMS_LIMIT 0.15
#define TS_CALIB_KERNEL_RMS_LIMIT 0.30
#define TS_CALIB_COLL_RMS_LIMIT 0.50
#define TS_CALIB_SPREAD_LIMIT 0.05

typedef struct {
    int warnings;            /* lines below that are warnings */
    int n;
    char lines[8][200];      /* "fit: GEMM rms error 61.9% > 15%: ..." */
    double load_avg_1min;    /* -1 unknown */
    long cores;
} ts_calib_quality;

/* Judges `c` as measured now on this machine (its load average now, getloadavg(3)). */
void ts_calib_quality_judge(const ts_calib *c, ts_calib_quality *out);
/* The same with the load given (-1: unknown) on `cores` cores. */
void ts_calib_quality_judge_at(const ts_calib *c, double load_avg_1min, long cores, ts_calib_quality *out);

/* The lines, "# warning: ..." or "# ok: ...", to `f`. */
void ts_calib_quality_print(FILE *f, const ts_calib_quality *q);

#endif
