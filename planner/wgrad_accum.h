/* What accumulating a weight gradient into main_grad costs beyond the GEMM, as measured.
 *
 * Megatron-Core's gradient-accumulation fusion has each weight-gradient GEMM add into the
 * weight's main_grad (cuBLAS beta = 1: Transformer Engine's fp8_gemm / gemm with
 * out=main_grad, accumulate=True), which reads and writes main_grad where a plain GEMM writes
 * its output once. How much of that traffic shows was measured on one H100 (bench/fp8_gemms
 * --wgrad --sweep, validation/gpu/): what beta = 1 adds, as a share x of main_grad's read and write
 * at HBM speed (T), falls from about 1.2 for a GEMM much shorter than T (few tokens against a
 * large weight: an expert's share of a micro-batch) to about 0.13-0.19 for one many times longer
 * (thousands of tokens: the traffic hides under the compute, not wholly). One curve per main_grad
 * dtype, in r = the plain GEMM's time over T:
 *
 *     x(r) = x_inf + (x0 - x_inf) / (1 + (r / r_half)^power)
 *
 * fitted by least squares on the added seconds (ts_accum_fit). The planner prices with it
 * (planner/cost.h ts_wgrad_gemm_s); tests/test_wgrad_accum.c checks that its constants are what
 * fitting the committed measurements gives. */
#ifndef TS_WGRAD_ACCUM_H
#define TS_WGRAD_ACCUM_H

#include "common/status.h"

typedef struct {
    double x0, x_inf, r_half, power;
} ts_accum_curve;

/* The curve measured for a main_grad of `grad_bytes` an element: bf16's (2 bytes or fewer) or
 * fp32's (more). */
const ts_accum_curve *ts_accum_curve_for(double grad_bytes);

/* Seconds that adding into main_grad adds to a GEMM whose plain run takes gemm_s, where
 * main_grad's read and write take traffic_s at HBM speed: x(gemm_s / traffic_s) · traffic_s. 0
 * where either is not positive. */
double ts_accum_added_s(const ts_accum_curve *c, double gemm_s, double traffic_s);

/* One measured GEMM: its plain time, main_grad's traffic time and what beta = 1 added. */
typedef struct {
    double gemm_s, traffic_s, added_s;
} ts_accum_point;

/* Measured points. Owns its array. */
typedef struct {
    int n, cap;
    ts_accum_point *pt;
} ts_accum_points;

void ts_accum_points_init(ts_accum_points *p);
void ts_accum_points_free(ts_accum_points *p);
/* Appends the points of one main_grad dtype (grad_bytes 2: bf16, 4: fp32) read from `path`, the
 * output of bench/fp8_gemms --wgrad --sweep (lines "dt m n k compute add16 add32 gpu +bf16 +fp32
 * x16 x32", ms) or --wgrad --gemms (lines "  part dt m n k xC plan add16 add32 gpu +bf16 +fp32");
 * other lines are skipped, and a GEMM whose figures read "-" or nan (no GPU) is not a point.
 * TS_ERR_IO naming the file when it cannot be read, TS_ERR_INPUT when it holds no point. */
ts_status ts_accum_points_read(ts_accum_points *p, const char *path, int grad_bytes);

/* The curve minimising the squared error of the added seconds over the points: for each
 * (r_half, power) on a grid (r_half 0.10..4.00 by 0.01, power 0.5..6.0 by 0.5: half-integers,
 * which the planner raises to without pow()) x0 and x_inf are linear least squares, closed form. TS_ERR_INPUT with fewer than 4 points. *rms_s: the
 * fit's root-mean-square error in seconds (may be NULL). */
ts_status ts_accum_fit(const ts_accum_points *p, ts_accum_curve *out, double *rms_s);

/* The points' totals, seconds: what beta = 1 added as measured, what curve c gives, what the
 * roofline floor gives (the traffic beyond the plain GEMM, max(0, traffic - GEMM)) and what the
 * additive reading gives (all the traffic). How a curve is checked on GEMMs it was not fitted on. */
typedef struct {
    double measured_s, curve_s, floor_s, additive_s;
} ts_accum_totals;
void ts_accum_totals_of(const ts_accum_points *p, const ts_accum_curve *c, ts_accum_totals *out);

#endif
