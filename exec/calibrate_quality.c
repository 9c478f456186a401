/* Fit quality and machine stability of a calibration (see calibrate_quality.h). */
#include "exec/calibrate_quality.h"

#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((format(printf, 3, 4))) static void add(ts_calib_quality *q, int warning, const char *fmt, ...) {
    if (q->n == (int)(sizeof q->lines / sizeof q->lines[0])) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->lines[q->n++], sizeof q->lines[0], fmt, ap);
    va_end(ap);
    q->warnings += warning;
}

static void fit(ts_calib_quality *q, const char *what, double rms, double limit) {
    if (rms > limit)
        add(q, 1, "warning: %s fit off by %.1f%% rms over its points (limit %.0f%%): the spec misprices these ops "
                  "by about that much", what, 100 * rms, 100 * limit);
    else add(q, 0, "ok: %s fit %.1f%% rms (limit %.0f%%)", what, 100 * rms, 100 * limit);
}

void ts_calib_quality_judge(const ts_calib *c, ts_calib_quality *out) {
    double load[1];
    ts_calib_quality_judge_at(c, getloadavg(load, 1) == 1 ? load[0] : -1, sysconf(_SC_NPROCESSORS_ONLN), out);
}

void ts_calib_quality_judge_at(const ts_calib *c, double load_avg_1min, long cores, ts_calib_quality *out) {
    *out = (ts_calib_quality){.load_avg_1min = load_avg_1min, .cores = cores};
    if (c->n_gemm > 0) fit(out, "GEMM", c->gemm_rms_error, TS_CALIB_GEMM_RMS_LIMIT);
    /* FP8 GEMMs carry an FP8 plan's linear layers as the fp32 ones carry a CPU step: same limit. */
    if (c->n_gemm_bf16 > 0) fit(out, "bf16 GEMM", c->gemm_bf16_rms_error, TS_CALIB_GEMM_RMS_LIMIT);
    if (c->n_gemm_fp8 > 0) fit(out, "fp8 GEMM", c->gemm_fp8_rms_error, TS_CALIB_GEMM_RMS_LIMIT);
    if (c->n_mem > 0) fit(out, "memory-bound kernel", c->mem_rms_error, TS_CALIB_KERNEL_RMS_LIMIT);
    if (c->n_attn > 0) fit(out, "attention", c->attn_rms_error, TS_CALIB_KERNEL_RMS_LIMIT);
    if (c->fit_all.points > 0) fit(out, "collective (shared)", c->fit_all.spec_rms_error, TS_CALIB_COLL_RMS_LIMIT);
    /* Our own ranks count in the load while they run: more than one runnable process per core
     * besides them means other work shared the cores. */
    if (load_avg_1min >= 0 && cores > 0 && load_avg_1min > (double)cores + 1)
        add(out, 1, "warning: load average %.1f on %ld cores: other work shared the cores while measuring",
            load_avg_1min, cores);
    if (c->situ.steps > 0 && c->situ.step_cv > TS_CALIB_SPREAD_LIMIT)
        add(out, 1, "warning: ranks in lockstep spread %.1f%% at the same step (limit %.0f%%): too noisy to judge a 5%% "
                    "error with this profile", 100 * c->situ.step_cv, 100 * TS_CALIB_SPREAD_LIMIT);
}

void ts_calib_quality_print(FILE *f, const ts_calib_quality *q) {
    for (int i = 0; i < q->n; i++) fprintf(f, "# %s\n", q->lines[i]);
}
