/* What a calibration says about FP8 (see calibrate.h): whether the GPU has it, and the one line
 * that tells where the profile's FP8 figures come from. */
#include <stdio.h>

#include "exec/calibrate.h"

int ts_calib_fp8_capable(int cc) { return cc >= TS_CALIB_FP8_MIN_CC; }

void ts_calib_fp8_note(const ts_calib *c, char *buf, size_t cap) {
    const ts_system *s = &c->system;
    const char *curve = s->gemm_eff_fp8.n > 0 ? "the template's FP8 curve" : "no FP8 curve (the template has none)";
    if (c->n_gemm_fp8 > 0)
        snprintf(buf, cap, "fp8: measured on %d shapes (cuBLASLt E4M3, compute capability %d.%d): peak %.4g TFLOP/s, "
                 "efficiency.gemm_fp8 %d points (rms err %.1f%%)", c->n_gemm_fp8, c->gpu_cc / 10, c->gpu_cc % 10,
                 1e-12 * s->peak_flops[TS_DTYPE_FP8], s->gemm_eff_fp8.n, 100 * c->gemm_fp8_rms_error);
    else if (c->device == TS_DEVICE_CUDA)
        snprintf(buf, cap, "fp8: not measured: %s has compute capability %d.%d, FP8 needs %d.%d: the profile keeps %s, "
                 "peak_flops.fp8 0 (no FP8)", c->gpu[0] ? c->gpu : "the GPU", c->gpu_cc / 10, c->gpu_cc % 10,
                 TS_CALIB_FP8_MIN_CC / 10, TS_CALIB_FP8_MIN_CC % 10, curve);
    else
        snprintf(buf, cap, "fp8: not measured on CPU ranks: the profile keeps %s, peak_flops.fp8 0 (no FP8)", curve);
}
