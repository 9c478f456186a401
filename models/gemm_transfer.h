/* A GPU's GEMM efficiency curve carried over from another GPU's by measured ratios.
 *
 * A system file's BF16 curve (models/system.h ts_eff_curve) is the efficiency real training code
 * reaches, fitted to published step times where there are some (h100-sxm-dgx.json: the dgxc rows).
 * A GPU without such runs gets that curve times the ratio of the two GPUs' GEMM efficiencies as
 * one harness measured both on the same shapes: OpenXLA's default matmul performance table
 * (validation/xla/, 375 shapes b×m×n×k, 256..4096, timed on sm_90 and sm_100). What the fitted
 * curve absorbs beyond the GEMM kernels (framework overheads, clocks under load) is thereby
 * assumed the same on both GPUs; the ratio is what the measurement says of the kernels.
 *
 * Per decade of FLOPs (the shapes whose log10(2·b·m·n·k) rounds to it) the median ratio
 * (to_per_s / to_peak) / (from_per_s / from_peak) at the median FLOPs; the curve's points are
 * from(F) · ratio(F) at those FLOPs, and beyond the largest measured shape the last ratio is held
 * (a point at hold_flops). bench/gemm_transfer prints it; tests/test_gemm_transfer.c checks that
 * the committed system files carry it. */
#ifndef TS_GEMM_TRANSFER_H
#define TS_GEMM_TRANSFER_H

#include "common/status.h"
#include "models/system.h"

/* A GEMM shape measured on both GPUs: its FLOPs (2·b·m·n·k) and each GPU's FLOP/s. */
typedef struct {
    double flops, from_per_s, to_per_s;
} ts_gemm_pair;

/* The shapes measured on both. Owns its array. */
typedef struct {
    int n, cap;
    ts_gemm_pair *pt;
} ts_gemm_pairs;

void ts_gemm_pairs_init(ts_gemm_pairs *p);
void ts_gemm_pairs_free(ts_gemm_pairs *p);

/* Reads an XLA matmul table as CSV (header "sm,b,m,n,k,dtype,flops_per_s") and keeps the shapes
 * of `dtype` (e.g. "bf16xbf16->bf16") measured on both `from_sm` and `to_sm`. TS_ERR_INPUT naming
 * the file and line for a malformed line, a shape given twice, or no shape on both. */
ts_status ts_gemm_pairs_read(ts_gemm_pairs *p, const char *path, const char *from_sm, const char *to_sm,
                             const char *dtype);

#define TS_GEMM_RATIO_BINS_MAX 16

typedef struct {
    double flops; /* the median FLOPs of the decade's shapes (geometric) */
    double ratio; /* their median efficiency ratio, to over from */
    int shapes;
} ts_gemm_ratio_bin;

/* The decades' ratios (see above), FLOPs ascending; returns how many (at most max). */
int ts_gemm_ratio_bins(const ts_gemm_pairs *p, double from_peak, double to_peak, ts_gemm_ratio_bin *bins, int max);

/* The carried curve: one point per bin, from(F)·ratio at the bin's FLOPs (FLOPs to 3 significant
 * digits, efficiency to 3 decimals, as the system files write them), then hold_flops at the last
 * ratio when beyond the last bin. TS_ERR_INPUT when there is no bin or too many. */
ts_status ts_gemm_curve_transfer(const ts_gemm_ratio_bin *bins, int n, const ts_eff_curve *from, double hold_flops,
                                 ts_eff_curve *out);

#endif
