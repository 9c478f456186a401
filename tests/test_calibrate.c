/* `tessera calibrate`: the fit (exec/calibrate.h) on synthetic rows whose answer is exact, and the
 * command as users run it.
 *
 * Suite `calibrate_fit` builds rows from known figures through planner/cost.h itself (the same
 * formulas the fit inverts) and checks the fit gives those figures back: collective latency and bus
 * bandwidth (exactly, and within 2% under ±1% noise), the GEMM peak and efficiency curve, memory
 * bandwidth and attention efficiency; the profile it writes loads back with ts_system_load.
 * Suite `mpi` (like tests/test_exec_parity.c: needs `mpirun`, select with --filter 'mpi/?*'):
 * `calibrate --quick` on 2 ranks writes a profile that ts_system_load reads and `plan` accepts.
 * Suite `calibrate_cli`: --help and refusals, which stop before any rank starts. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "common/json.h"
#include "exec/calibrate_quality.h"
#include "common/stats.h"
#include "exec/backend.h"
#include "exec/calibrate.h"
#include "models/system.h"
#include "planner/cost.h"
#include "tests/helpers.h"

#define LAT_S 3e-6
#define BUSBW 4e9

static ts_system known_system(void) {
    ts_system s;
    cr_assert_eq(ts_system_load("cpu-localhost", &s), TS_OK, "cpu-localhost: %s", ts_error_message());
    s.link_latency_s = LAT_S, s.link_bytes_per_s = BUSBW, s.link_busbw_eff = 1;
    s.gpus_per_node = 8;
    return s;
}

/* Every collective over groups of 2, 4 and 8 (send-recv: 2), 1 KB .. 256 MB, timed by ts_coll_s
 * on `s`, times (1 + noise · (±1 alternating)). Returns the row count. */
static int synthetic_colls(ts_calib_coll *rows, const ts_system *s, double noise) {
    int n = 0;
    for (int c = 0; c < TS_COLL_COUNT; c++)
        for (int g = 2; g <= (c == TS_COLL_SENDRECV ? 2 : 8); g *= 2)
            for (double bytes = 1024; bytes <= 256.0 * 1048576; bytes *= 4) {
                double t = ts_coll_s(s, (ts_coll)c, g, bytes, TS_LINK_NVLINK);
                rows[n] = (ts_calib_coll){.coll = (ts_coll)c, .ranks = g, .groups = 8 / g, .reps = 1,
                                          .bytes = bytes, .time_s = t * (1 + noise * (n % 2 ? 1 : -1))};
                n++;
            }
    return n;
}

Test(calibrate_fit, recovers_latency_and_bandwidth_exactly) {
    ts_system s = known_system();
    static ts_calib_coll rows[TS_CALIB_MAX_COLL];
    int n = synthetic_colls(rows, &s, 0);
    ts_calib_coll_fit fit;
    cr_assert_eq(ts_calib_fit_coll(rows, n, &fit), TS_OK, "%s", ts_error_message());
    cr_expect_eq(fit.points, n);
    cr_expect(fabs(fit.latency_s / LAT_S - 1) < 1e-6, "latency %.9g s, expected %g", fit.latency_s, LAT_S);
    cr_expect(fabs(fit.busbw_bytes_per_s / BUSBW - 1) < 1e-6, "busbw %.9g, expected %g", fit.busbw_bytes_per_s, BUSBW);
    cr_expect(fit.rms_error < 1e-6 && fit.max_error < 1e-6, "errors %g, %g on exact rows", fit.rms_error, fit.max_error);
    /* One collective alone: send-recv rows only. */
    int first = n - 9;
    cr_assert_eq(rows[first].coll, TS_COLL_SENDRECV);
    cr_assert_eq(ts_calib_fit_coll(rows + first, 9, &fit), TS_OK, "%s", ts_error_message());
    cr_expect(fabs(fit.latency_s / LAT_S - 1) < 1e-6, "send-recv latency %.9g s", fit.latency_s);
    cr_expect(fabs(fit.busbw_bytes_per_s / BUSBW - 1) < 1e-6, "send-recv busbw %.9g", fit.busbw_bytes_per_s);
}

Test(calibrate_fit, recovers_latency_and_bandwidth_under_noise) {
    ts_system s = known_system();
    static ts_calib_coll rows[TS_CALIB_MAX_COLL];
    int n = synthetic_colls(rows, &s, 0.01);
    ts_calib_coll_fit fit;
    cr_assert_eq(ts_calib_fit_coll(rows, n, &fit), TS_OK, "%s", ts_error_message());
    cr_expect(fabs(fit.latency_s / LAT_S - 1) < 0.02, "latency %.9g s, expected %g", fit.latency_s, LAT_S);
    cr_expect(fabs(fit.busbw_bytes_per_s / BUSBW - 1) < 0.02, "busbw %.9g, expected %g", fit.busbw_bytes_per_s, BUSBW);
    cr_expect(fit.max_error < 0.03, "max error %g with 1%% noise", fit.max_error);
}

Test(calibrate_fit, latency_is_never_negative) {
    /* Pure bandwidth, with small messages measured a little fast: the unconstrained optimum has a
     * negative latency; the fit must clamp it to 0 and still find the bandwidth. */
    ts_calib_coll rows[8];
    for (int i = 0; i < 8; i++) {
        double bytes = 1024.0 * (1 << (2 * i));
        rows[i] = (ts_calib_coll){.coll = TS_COLL_SENDRECV, .ranks = 2, .bytes = bytes,
                                  .time_s = bytes / BUSBW * (i < 2 ? 0.9 : 1.0)};
    }
    ts_calib_coll_fit fit;
    cr_assert_eq(ts_calib_fit_coll(rows, 8, &fit), TS_OK, "%s", ts_error_message());
    cr_expect(fit.latency_s == 0, "latency %g s", fit.latency_s);
    cr_expect(fabs(fit.busbw_bytes_per_s / BUSBW - 1) < 0.1, "busbw %g", fit.busbw_bytes_per_s);
}

Test(calibrate_fit, refuses_rows_without_time) {
    ts_calib_coll row = {.coll = TS_COLL_ALLREDUCE, .ranks = 2, .bytes = 1024, .time_s = 0};
    ts_calib_coll_fit fit;
    cr_expect_eq(ts_calib_fit_coll(&row, 1, &fit), TS_ERR_INPUT);
    cr_expect_eq(ts_calib_fit_coll(&row, 0, &fit), TS_ERR_INPUT);
}

/* A whole calibration from figures: GEMMs on the curve of `truth`, memory kernels at 7 GB/s,
 * attention at efficiency 0.3, each memory or attention kernel `kernel_latency_s` more,
 * collectives at LAT_S and BUSBW. */
static void synthetic_calib_at(ts_calib *c, const ts_system *truth, double kernel_latency_s) {
    memset(c, 0, sizeof *c);
    c->ranks = 2, c->cores = 2, c->threads = 1, c->compute_ranks = 2, c->quick = 1;
    snprintf(c->host, sizeof c->host, "testhost");
    snprintf(c->date, sizeof c->date, "2026-11-21T00:00:00Z");
    c->host_memory_bytes = 16e9;
    static const int dims[] = {64, 256, 1024};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++) {
                ts_calib_gemm *g = &c->gemm[c->n_gemm++];
                *g = (ts_calib_gemm){.m = dims[i], .n = dims[j], .k = dims[k], .reps = 1};
                g->flops = 2.0 * g->m * g->n * g->k;
                g->time_s = ts_gemm_compute_s(truth, TS_DTYPE_FP32, g->m, g->n, g->k);
            }
    for (int i = 0; i < 4; i++) {
        ts_calib_mem *m = &c->mem[c->n_mem++];
        *m = (ts_calib_mem){.kernel = "swiglu", .rows = 256 << i, .cols = 688, .reps = 1};
        m->bytes = 12.0 * m->rows * m->cols;
        m->time_s = kernel_latency_s + m->bytes / 7e9;
    }
    ts_system att = *truth;
    att.attention_eff = 0.3;
    att.kernel_latency_s = kernel_latency_s;
    for (int t = 64; t <= 512; t *= 2) {
        ts_calib_attn *a = &c->attn[c->n_attn++];
        *a = (ts_calib_attn){.T = t, .H = 8, .KV = 4, .D = 32, .reps = 1, .flops = 2.0 * t * t * 8 * 32};
        a->time_s = ts_attention_s(&att, TS_DTYPE_FP32, a->flops, a->flops);
    }
    c->n_coll = synthetic_colls(c->coll, truth, 0);
}

static void synthetic_calib(ts_calib *c, const ts_system *truth) { synthetic_calib_at(c, truth, 0); }

/* Writes c's profile to a file and loads it as a system spec. */
static void profile_loads_back(const ts_calib *c, ts_system *back) {
    cJSON *doc = NULL;
    cr_assert_eq(ts_calib_profile(c, &doc), TS_OK, "%s", ts_error_message());
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    char *path = test_write_temp(text);
    free(text);
    cr_assert_eq(ts_system_load(path, back), TS_OK, "%s", ts_error_message());
    test_remove_temp(path);
}

/* The profile of `c` holds `needle` (in a source string, say). */
static void expect_profile_has(const ts_calib *c, const char *needle) {
    cJSON *doc = NULL;
    cr_assert_eq(ts_calib_profile(c, &doc), TS_OK, "%s", ts_error_message());
    char *text = cJSON_PrintUnformatted(doc);
    cr_expect(strstr(text, needle) != NULL, "%.400s", text);
    free(text);
    cJSON_Delete(doc);
}

Test(calibrate_fit, spec_from_synthetic_rows_loads_back) {
    ts_system truth = known_system();
    truth.peak_flops[TS_DTYPE_FP32] = 4e10;
    /* The grid's FLOP counts are 2·4^i·64³, one point each: a curve on exactly those points. */
    truth.gemm_eff.n = 7;
    for (int i = 0; i < 7; i++) truth.gemm_eff.flops[i] = 2.0 * pow(4, i) * 64 * 64 * 64;
    double eff[] = {0.3, 0.5, 0.7, 0.9, 1.0, 0.95, 0.9};
    memcpy(truth.gemm_eff.eff, eff, sizeof eff);
    static ts_calib c;
    synthetic_calib_at(&c, &truth, 4e-6);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    const ts_system *s = &c.system;
    cr_expect(fabs(s->peak_flops[TS_DTYPE_FP32] / 4e10 - 1) < 1e-9, "peak %g", s->peak_flops[TS_DTYPE_FP32]);
    cr_expect_eq(s->gemm_eff.n, 7);
    for (int i = 0; i < s->gemm_eff.n && i < 7; i++) {
        cr_expect(fabs(s->gemm_eff.flops[i] / truth.gemm_eff.flops[i] - 1) < 1e-9, "curve flops[%d] %g", i,
                  s->gemm_eff.flops[i]);
        cr_expect(fabs(s->gemm_eff.eff[i] - eff[i]) < 1e-9, "curve eff[%d] %g, expected %g", i, s->gemm_eff.eff[i], eff[i]);
    }
    cr_expect(c.gemm_rms_error < 1e-9, "GEMM rms error %g", c.gemm_rms_error);
    cr_expect(fabs(s->hbm_bytes_per_s * s->hbm_eff / 7e9 - 1) < 1e-9, "memory %g B/s", s->hbm_bytes_per_s * s->hbm_eff);
    cr_expect(fabs(s->kernel_latency_s / 4e-6 - 1) < 1e-6, "kernel latency %g s", s->kernel_latency_s);
    cr_expect(c.mem_rms_error < 1e-9, "memory rms error %g", c.mem_rms_error);
    cr_expect(fabs(s->attention_eff / 0.3 - 1) < 1e-9, "attention efficiency %g", s->attention_eff);
    cr_expect(c.attn_rms_error < 1e-9, "attention rms error %g", c.attn_rms_error);
    cr_expect(fabs(s->link_latency_s / LAT_S - 1) < 1e-6 && fabs(s->link_bytes_per_s / BUSBW - 1) < 1e-6,
              "link %g s, %g B/s", s->link_latency_s, s->link_bytes_per_s);
    cr_expect_eq(s->cores_per_node, 2);
    cr_expect(s->gpus_per_node >= 8, "node.gpus %d", s->gpus_per_node);
    cr_expect(s->serial_ops, "serial_ops");

    /* The profile is the zoo's schema: it loads back to the same figures. */
    ts_system back;
    profile_loads_back(&c, &back);
    cr_expect(back.peak_flops[TS_DTYPE_FP32] == s->peak_flops[TS_DTYPE_FP32]);
    cr_expect(back.link_bytes_per_s == s->link_bytes_per_s && back.link_latency_s == s->link_latency_s);
    cr_expect(back.cores_per_node == 2 && back.serial_ops == 1 && back.gemm_eff.n == s->gemm_eff.n);
    cr_expect(back.kernel_latency_s == s->kernel_latency_s);

    /* Rows whose time grows faster than their bytes would need a negative latency: none. */
    for (int i = 0; i < c.n_mem; i++) c.mem[i].time_s = 1e-5 * pow(c.mem[i].bytes / c.mem[0].bytes, 2);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    cr_expect_eq(s->kernel_latency_s, 0, "kernel latency %g s from convex rows", s->kernel_latency_s);
    cr_expect(s->hbm_bytes_per_s > 0);
}

/* Collectives of different speeds (Open MPI's reductions on CPU ranks run at a fraction of its
 * copies' bandwidth): the spec keeps one shared link and a factor per kind, and prices every row
 * far better than the shared fit alone; the factors load back from the profile. */
Test(calibrate_fit, each_collective_kind_keeps_its_bandwidth) {
    ts_system truth = known_system();
    double want[TS_COLL_COUNT] = {0.34, 0.2, 1.0, 0.9, 1.5};
    memcpy(truth.coll_busbw, want, sizeof want);
    static ts_calib c;
    synthetic_calib(&c, &truth);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    const ts_system *s = &c.system;
    cr_expect_gt(c.fit_all.rms_error, 0.3, "one bandwidth for all: %g rms", c.fit_all.rms_error);
    cr_expect_lt(c.fit_all.spec_rms_error, 0.1, "with a factor per kind: %g rms", c.fit_all.spec_rms_error);
    for (int k = 0; k < TS_COLL_COUNT; k++) {
        double got = s->link_bytes_per_s * s->coll_busbw[k], exp = BUSBW * want[k];
        cr_expect(fabs(got / exp - 1) < 0.15, "%s: %g B/s, expected %g", ts_coll_names[k], got, exp);
    }
    cr_expect_lt(s->coll_busbw[TS_COLL_REDUCE_SCATTER], s->coll_busbw[TS_COLL_ALLREDUCE]);
    cr_expect_lt(s->coll_busbw[TS_COLL_ALLREDUCE], s->coll_busbw[TS_COLL_ALLGATHER]);
    ts_system back;
    profile_loads_back(&c, &back);
    for (int k = 0; k < TS_COLL_COUNT; k++)
        cr_expect_eq(back.coll_busbw[k], s->coll_busbw[k], "%s", ts_coll_names[k]);
    /* the planner prices a collective at its kind's bandwidth */
    double rs = ts_coll_s(&back, TS_COLL_REDUCE_SCATTER, 2, 64e6, TS_LINK_NVLINK);
    double ag = ts_coll_s(&back, TS_COLL_ALLGATHER, 2, 64e6, TS_LINK_NVLINK);
    cr_expect_gt(rs, 3 * ag, "reduce-scatter %g s, all-gather %g s", rs, ag);
}

/* A GPU calibration's spec names the GPU and its memory as the CUDA backend reported them (the
 * fit itself runs on the CPU, so this is checked without a GPU), and says where they came from. */
Test(calibrate_fit, cuda_spec_takes_the_gpu_name_and_memory) {
    ts_system truth = known_system();
    static ts_calib c;
    synthetic_calib(&c, &truth);
    c.device = TS_DEVICE_CUDA;
    snprintf(c.gpu, sizeof c.gpu, "NVIDIA H100 80GB HBM3");
    c.gpu_memory_bytes = 85045395456.0;
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    cr_expect_str_eq(c.system.gpu_name, "NVIDIA H100 80GB HBM3");
    cr_expect_eq(c.system.hbm_bytes, 85045395456.0);
    cr_expect_eq(c.system.cores_per_node, 0);
    cr_expect_eq(c.system.serial_ops, 0);
    ts_system back;
    profile_loads_back(&c, &back);
    cr_expect_str_eq(back.gpu_name, "NVIDIA H100 80GB HBM3");
    cr_expect_eq(back.hbm_bytes, 85045395456.0);
    cJSON *doc = NULL;
    cr_assert_eq(ts_calib_profile(&c, &doc), TS_OK, "%s", ts_error_message());
    char *text = cJSON_PrintUnformatted(doc);
    cr_expect(strstr(text, "totalGlobalMem") != NULL, "hbm_bytes' source names CUDA: %.300s", text);
    cr_expect(strstr(text, "\"gpu\":\"NVIDIA H100 80GB HBM3\"") != NULL, "measured.gpu");
    free(text);
    cJSON_Delete(doc);

    /* Without a reported memory size the template's stays, and the source says so. */
    c.gpu_memory_bytes = 0;
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    cr_expect_eq(c.system.hbm_bytes, truth.hbm_bytes);
    expect_profile_has(&c, "the template's: the GPU did not report its memory");
}

/* A GPU's bf16 grid (ts_backend.gemm_bf16) sets the bf16 peak to its best rate, the rows carry
 * the bf16 model time, the JSON lists them and the profile says how it was measured; without
 * bf16 rows the bf16 peak is the fp32 figure and says so. */
Test(calibrate_fit, bf16_grid_sets_the_bf16_peak) {
    ts_system truth = known_system();
    truth.peak_flops[TS_DTYPE_FP32] = 5e13;
    truth.peak_flops[TS_DTYPE_BF16] = 7e14;
    static ts_calib c;
    synthetic_calib(&c, &truth);
    c.device = TS_DEVICE_CUDA;
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    cr_expect_eq(c.system.peak_flops[TS_DTYPE_BF16], c.system.peak_flops[TS_DTYPE_FP32], "no bf16 rows");
    expect_profile_has(&c, "not measured (the backend has no bf16 GEMM)");

    for (int i = 0; i < c.n_gemm; i++) {
        ts_calib_gemm *g = &c.gemm_bf16[c.n_gemm_bf16++];
        *g = c.gemm[i];
        g->time_s = ts_gemm_compute_s(&truth, TS_DTYPE_BF16, g->m, g->n, g->k);
    }
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    double fp32 = c.system.peak_flops[TS_DTYPE_FP32], bf16 = c.system.peak_flops[TS_DTYPE_BF16];
    cr_expect(fabs(bf16 / fp32 - 14) < 1e-9, "bf16 peak %g over fp32 %g, expected 14x", bf16, fp32);
    for (int i = 0; i < c.n_gemm_bf16; i++)
        cr_expect(fabs(c.gemm_bf16[i].model_s / c.gemm_bf16[i].time_s - 1) < 1e-9, "bf16 row %d: model %g s, measured %g s",
                  i, c.gemm_bf16[i].model_s, c.gemm_bf16[i].time_s);
    ts_system back;
    profile_loads_back(&c, &back);
    cr_expect(fabs(back.peak_flops[TS_DTYPE_BF16] / bf16 - 1) < 1e-12, "loaded back %.17g, fitted %.17g", back.peak_flops[TS_DTYPE_BF16], bf16);
    expect_profile_has(&c, "best per-rank bf16 GEMM rate (fp32 accumulation) over 27");
    cJSON *doc = NULL;
    cr_assert_eq(ts_calib_json(&c, &doc), TS_OK, "%s", ts_error_message());
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "gemm_bf16");
    cr_expect(cJSON_IsArray(rows) && cJSON_GetArraySize(rows) == 27, "gemm_bf16 rows");
    cJSON_Delete(doc);
    c.gemm_bf16[3].time_s = 0;
    ts_error_clear();
    cr_expect_eq(ts_calib_fit(&c, &truth), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "bf16 GEMM row 3") != NULL, "%s", ts_error_message());
}

/* A GPU's bf16 GEMMs reach their peak at other sizes than its fp32 ones: the bf16 grid gets its
 * own curve (efficiency.gemm_bf16), which prices each bf16 row as measured while the fp32 rows
 * keep theirs, and the profile carries it and loads back. */
Test(calibrate_fit, bf16_grid_fits_its_own_curve) {
    ts_system truth = known_system(), truth16 = known_system();
    truth.peak_flops[TS_DTYPE_FP32] = 5e13;
    truth16.peak_flops[TS_DTYPE_BF16] = 7e14;
    for (int i = 0; i < truth16.gemm_eff.n; i++) /* ten times slower below a GFLOP */
        if (truth16.gemm_eff.flops[i] < 1e9) truth16.gemm_eff.eff[i] *= 0.1;
    static ts_calib c;
    synthetic_calib(&c, &truth);
    c.device = TS_DEVICE_CUDA;
    for (int i = 0; i < c.n_gemm; i++) {
        ts_calib_gemm *g = &c.gemm_bf16[c.n_gemm_bf16++];
        *g = c.gemm[i];
        g->time_s = ts_gemm_compute_s(&truth16, TS_DTYPE_BF16, g->m, g->n, g->k);
    }
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    const ts_system *s = &c.system;
    cr_assert_gt(s->gemm_eff_bf16.n, 0, "a bf16 curve");
    for (int i = 0; i < c.n_gemm_bf16; i++)
        cr_expect(fabs(c.gemm_bf16[i].model_s / c.gemm_bf16[i].time_s - 1) < 1e-9, "bf16 row %d: model %g s, measured %g s",
                  i, c.gemm_bf16[i].model_s, c.gemm_bf16[i].time_s);
    for (int i = 0; i < c.n_gemm; i++)
        cr_expect(fabs(c.gemm[i].model_s / c.gemm[i].time_s - 1) < 1e-9, "fp32 row %d", i);
    double small = 2.0 * 64 * 64 * 64;
    cr_expect(ts_gemm_eff(s, TS_DTYPE_BF16, small) < 0.2 * ts_gemm_eff(s, TS_DTYPE_FP32, small), "bf16 %g, fp32 %g",
              ts_gemm_eff(s, TS_DTYPE_BF16, small), ts_gemm_eff(s, TS_DTYPE_FP32, small));
    cr_expect_eq(c.gemm_bf16_rms_error < 1e-9, 1, "rms %g", c.gemm_bf16_rms_error);

    ts_system back;
    profile_loads_back(&c, &back);
    cr_assert_eq(back.gemm_eff_bf16.n, s->gemm_eff_bf16.n);
    for (int i = 0; i < back.gemm_eff_bf16.n; i++)
        cr_expect(fabs(back.gemm_eff_bf16.eff[i] / s->gemm_eff_bf16.eff[i] - 1) < 1e-12, "point %d", i);
    expect_profile_has(&c, "bf16 GEMM rate / peak_flops.bf16 by FLOPs (2mnk) over 27 shapes");

    /* without bf16 rows (CPU ranks) no bf16 curve: the GEMM curve serves bf16 */
    c.n_gemm_bf16 = 0;
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    cr_expect_eq(c.system.gemm_eff_bf16.n, 0);
    cr_expect_eq(ts_gemm_eff(&c.system, TS_DTYPE_BF16, small), ts_gemm_eff(&c.system, TS_DTYPE_FP32, small));
}

/* The in-situ factors scale each kind's modelled time by exactly its factor, and the profile
 * records them and loads back. */
Test(calibrate_fit, in_situ_factors_scale_each_kind) {
    ts_system truth = known_system();
    static ts_calib c;
    synthetic_calib(&c, &truth);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    ts_system before = c.system;
    const double f[TS_SITU_COUNT] = {1.25, 0.8, 1.6, 0.5};
    c.situ = (ts_calib_situ){.steps = 9, .timed = 8, .step_s = 1, .step_cv = 0.125, .gauge_flops_per_s = 3.5e10};
    for (int k = 0; k < TS_SITU_COUNT; k++)
        c.situ.kind[k] = (ts_calib_situ_kind){.ops = 10, .model_s = 0.2, .time_s = 0.2 * f[k]};
    ts_calib_situ_apply(&c);
    const ts_system *s = &c.system;
    cr_expect_eq(s->speed_cv, 0.125, "the steps' spread is node.speed_cv");
    cr_expect_eq(s->gauge_flops_per_s, 3.5e10, "the gauge's median is node.gauge_flops_per_s");
    for (int k = 0; k < TS_SITU_COUNT; k++)
        cr_expect(fabs(c.situ.kind[k].factor / f[k] - 1) < 1e-12, "%s factor %g", ts_situ_kind_names[k], c.situ.kind[k].factor);
    test_expect_situ_scaled(s, &before, TS_DTYPE_FP32, 512, 512, 512, 1e6, f, 1e-9);

    cJSON *doc = NULL;
    cr_assert_eq(ts_calib_profile(&c, &doc), TS_OK, "%s", ts_error_message());
    const cJSON *situ = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "measured"), "in_situ");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(situ, "kinds")), TS_SITU_COUNT);
    cJSON_Delete(doc);
    ts_system back;
    profile_loads_back(&c, &back);
    cr_expect_eq(back.speed_cv, 0.125, "node.speed_cv written and read back");
    cr_expect_eq(back.gauge_flops_per_s, 3.5e10, "node.gauge_flops_per_s written and read back");
    cr_expect(fabs(back.optimizer_eff / s->optimizer_eff - 1) < 1e-12 && fabs(back.hbm_bytes_per_s / s->hbm_bytes_per_s - 1) < 1e-12,
              "optimizer %.17g vs %.17g, memory %.17g vs %.17g B/s", back.optimizer_eff, s->optimizer_eff, back.hbm_bytes_per_s, s->hbm_bytes_per_s);
}

/* A counting sync for ts_calib_situ_run: fails on call number `fail_at` (0: never). */
typedef struct {
    int calls, fail_at;
} sync_count;

static ts_status count_sync(void *ctx) {
    sync_count *s = ctx;
    return ++s->calls == s->fail_at ? TS_FAIL(TS_ERR_EXTERNAL, "sync %d refused", s->calls) : TS_OK;
}

/* The fit of the synthetic rows (known_system's figures), as the in-situ pass starts from. */
static void fitted_calib(ts_calib *c) {
    ts_system truth = known_system();
    synthetic_calib(c, &truth);
    cr_assert_eq(ts_calib_fit(c, &truth), TS_OK, "%s", ts_error_message());
}

/* The in-situ pass trains on MPI_COMM_SELF, so these tests start MPI in-process (a singleton
 * MPI_Init), whose start-up allocations Open MPI leaves behind at exit: not Tessera's memory, so
 * under LeakSanitizer (make check) the test's thread is not tracked while the pass runs. */
static void track_leaks(int on) {
#if defined(__SANITIZE_ADDRESS__)
    if (on) __lsan_enable();
    else __lsan_disable();
#else
    (void)on;
#endif
}

/* The in-situ shape of these tests: tiny, batch 1 of 16 tokens. */
static const ts_situ_shape tiny16 = {.model = "tiny", .batch = 1, .seq = 16, .mbs = 1};

/* A real in-situ pass of `steps` steps (tiny16) on the fitted spec `c`. */
static double *situ_samples(const ts_calib *c, int steps, size_t *count) {
    sync_count sc = {0};
    double *samples = NULL;
    track_leaks(0);
    ts_status st = ts_calib_situ_run(c, &tiny16, steps, count_sync, &sc, &samples, count);
    track_leaks(1);
    cr_assert_eq(st, TS_OK, "%s", ts_error_message());
    cr_expect_eq(sc.calls, steps, "one sync before each step");
    return samples;
}

/* The pass syncs before every step, and keeps every appointment when it fails; a failing sync
 * ends it. */
Test(calibrate_fit, in_situ_run_keeps_every_sync) {
    static ts_calib c;
    fitted_calib(&c);
    size_t count = 0;
    double *samples = situ_samples(&c, 3, &count);
    int n_ops = (int)((count - 7) / 3);
    cr_expect_eq(ts_situ_sample_count(3, n_ops), count, "%zu doubles for %d ops", count, n_ops);
    for (size_t i = 0; i < count; i++) cr_expect(samples[i] > 0, "sample %zu is %g", i, samples[i]);
    free(samples);

    sync_count sc = {0};
    ts_error_clear();
    const ts_situ_shape too_long = {.model = "tiny", .batch = 1, .seq = 100000, .mbs = 1};
    cr_expect_eq(ts_calib_situ_run(&c, &too_long, 4, count_sync, &sc, &samples, &count), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "in-situ pass needs") != NULL, "%s", ts_error_message());
    cr_expect(samples == NULL && count == 0);
    cr_expect_eq(sc.calls, 4, "a failed pass still meets the other ranks before each of its steps");

    sc = (sync_count){.fail_at = 2};
    ts_error_clear();
    cr_expect_eq(ts_calib_situ_run(&c, &tiny16, 4, count_sync, &sc, &samples, &count), TS_ERR_EXTERNAL);
    cr_expect(strstr(ts_error_message(), "sync 2 refused") != NULL, "%s", ts_error_message());
    cr_expect_eq(sc.calls, 2, "no sync after a failed one");
    cr_expect(samples == NULL && count == 0);
}

/* Ranks' samples pool at the gauge's speed: a second rank at half speed (every time doubled, every
 * reading halved) does the same work, so each kind's time × the gauge is one rank's, and leaves
 * no spread the gauge did not see; the same rank with the readings unchanged spreads (node.speed_cv)
 * alike over every span; one rank alone gives its steps' spread over time. */
Test(calibrate_fit, in_situ_sums_pool_ranks_at_the_gauge_speed) {
    static ts_calib c;
    fitted_calib(&c);
    int steps = 6;
    size_t count = 0;
    double *one = situ_samples(&c, steps, &count);
    int n_ops = (int)((count - 2 * steps - 1) / steps);
    double *two = malloc(2 * count * sizeof *two);
    cr_assert(two != NULL);
    memcpy(two, one, count * sizeof *two);
    size_t readings = (size_t)steps * n_ops + steps;
    for (size_t i = 0; i < count; i++) two[count + i] = i < readings ? 2 * one[i] : 0.5 * one[i];

    cr_assert_eq(ts_calib_situ_sums(&c, &tiny16, one, 1, steps), TS_OK, "%s", ts_error_message());
    ts_calib_situ alone = c.situ;
    cr_assert_eq(ts_calib_situ_sums(&c, &tiny16, two, 2, steps), TS_OK, "%s", ts_error_message());
    ts_calib_situ pair = c.situ;
    cr_expect(alone.ranks == 1 && pair.ranks == 2 && pair.steps == steps && pair.timed == steps - 1);
    double t[8];
    const double *step_s = one + (size_t)steps * n_ops, *reading = step_s + steps;
    for (int j = 1; j < steps; j++) t[j - 1] = step_s[j] * 0.5 * (reading[j] + reading[j + 1]); /* in gauge work */
    cr_expect(fabs(alone.step_cv - ts_cv(t, steps - 1)) < 1e-12, "one rank: spread over time at the gauge's speed %g",
              alone.step_cv);
    cr_expect(fabs(pair.step_cv) < 1e-9, "the gauge saw the slower rank: no spread left (%g)", pair.step_cv);
    cr_expect(pair.gauge_flops_per_s < alone.gauge_flops_per_s, "the slower rank's readings pool in");
    for (int k = 0; k < TS_SITU_COUNT; k++) {
        cr_expect_eq(pair.kind[k].ops, alone.kind[k].ops);
        cr_expect(fabs(pair.kind[k].model_s / alone.kind[k].model_s - 1) < 1e-12);
        double w1 = alone.kind[k].time_s * alone.gauge_flops_per_s, w2 = pair.kind[k].time_s * pair.gauge_flops_per_s;
        cr_expect(fabs(w2 / w1 - 1) < 1e-9, "%s: work %g alone, %g in the pair", ts_situ_kind_names[k], w1, w2);
    }
    cr_expect(fabs(pair.step_s * pair.gauge_flops_per_s / (alone.step_s * alone.gauge_flops_per_s) - 1) < 1e-9);
    cr_expect(pair.step_raw_s > alone.step_raw_s, "as timed, the slower rank's steps pool in");
    cr_expect_eq(alone.n_spans, 0, "one rank: no spread between ranks");
    /* Rank 1 twice as slow at every op with the same readings, unseen by the gauge: the same
     * spread (times t and 2t: sd t/√2 over mean 1.5t) over every span, no decay. */
    memcpy(two + count + readings, one + readings, (count - readings) * sizeof *two);
    cr_assert_eq(ts_calib_situ_sums(&c, &tiny16, two, 2, steps), TS_OK, "%s", ts_error_message());
    pair = c.situ;
    cr_expect(fabs(pair.step_cv - sqrt(2) / 3) < 1e-9, "two ranks: spread at each step %g", pair.step_cv);
    cr_assert(pair.n_spans >= 4, "%d spans", pair.n_spans);
    for (int i = 0; i < pair.n_spans; i++)
        cr_expect(fabs(pair.span_cv[i] - sqrt(2) / 3) < 1e-9, "span %d: %g", i, pair.span_cv[i]);
    cr_expect(fabs(pair.cv_decay) < 1e-9, "decay %g", pair.cv_decay);
    /* Wider spans hold more: the widest above the narrowest (a span's windows start at the step's
     * first op, so with an odd count of ops the pairs leave the last op, the optimizer, out, and
     * the pairs' mean need not exceed the single ops'). */
    cr_expect(pair.span_s[pair.n_spans - 1] > pair.span_s[0] && pair.span_s[pair.n_spans - 1] < pair.step_raw_s * 1.5);
    /* Rank 1 alternately half and one and a half times as slow: over one op the ranks are far
     * apart, over many the differences cancel, so the spread decays. The ops' times are drawn
     * (seeded) around the measured mean instead of measured: a loaded machine's outliers would
     * keep the differences from cancelling. */
    double mean_op_s = 0;
    for (size_t i = 0; i < (size_t)steps * n_ops; i++) mean_op_s += one[i] / ((double)steps * n_ops);
    uint64_t seed = 18;
    for (int j = 0; j < steps; j++)
        for (int i = 0; i < n_ops; i++) {
            double op_s = mean_op_s * (0.5 + (double)(test_next_u64(&seed) >> 11) / (double)(1ull << 53));
            two[(size_t)j * n_ops + i] = op_s;
            two[count + (size_t)j * n_ops + i] = op_s * (i % 2 ? 1.5 : 0.5);
        }
    cr_assert_eq(ts_calib_situ_sums(&c, &tiny16, two, 2, steps), TS_OK, "%s", ts_error_message());
    cr_expect(c.situ.span_cv[0] > 2 * c.situ.span_cv[c.situ.n_spans - 1], "one op %g, the step %g", c.situ.span_cv[0],
              c.situ.span_cv[c.situ.n_spans - 1]);
    cr_expect(c.situ.cv_decay > 0 && c.situ.cv_decay <= 1, "decay %g", c.situ.cv_decay);
    ts_calib_situ_apply(&c);
    cr_expect(c.system.speed_cv_window_s == c.situ.step_raw_s && c.system.speed_cv_decay == c.situ.cv_decay,
              "node.speed_cv_window_s %g, node.speed_cv_decay %g", c.system.speed_cv_window_s, c.system.speed_cv_decay);
    cr_expect_eq(ts_calib_situ_sums(&c, &tiny16, one, 0, steps), TS_ERR_INPUT);
    free(one);
    free(two);
}

/* On GPUs (ts_situ_mode_of) the same samples are priced as a bf16 plan is and taken as timed: the
 * ops and their kinds are the fp32 program's (the samples line up), the modelled GEMM and
 * element-wise sums are bf16's (twice the peak here, half the bytes), each kind's time is its ops'
 * medians as timed, and there is no gauge. */
Test(calibrate_fit, in_situ_sums_on_gpus_price_bf16_as_timed) {
    static ts_calib c;
    fitted_calib(&c);
    c.system.peak_flops[TS_DTYPE_BF16] = 2 * c.system.peak_flops[TS_DTYPE_FP32];
    int steps = 4;
    size_t count = 0;
    double *one = situ_samples(&c, steps, &count);
    int n_ops = (int)((count - 2 * steps - 1) / steps);
    cr_assert_eq(ts_calib_situ_sums(&c, &tiny16, one, 1, steps), TS_OK, "%s", ts_error_message());
    ts_calib_situ cpu = c.situ;
    c.device = TS_DEVICE_CUDA;
    cr_assert_eq(ts_calib_situ_sums(&c, &tiny16, one, 1, steps), TS_OK, "%s", ts_error_message());
    ts_calib_situ gpu = c.situ;
    cr_expect(cpu.mode.dtype == TS_DTYPE_FP32 && gpu.mode.dtype == TS_DTYPE_BF16 && gpu.mode.bf16, "modes recorded");
    cr_expect_str_eq(gpu.model, "tiny");
    cr_expect(gpu.mbs == 1 && gpu.batch == 1 && gpu.seq == 16);
    double t[8], total_s = 0;
    for (int i = 0; i < n_ops; i++) {
        for (int j = 1; j < steps; j++) t[j - 1] = one[(size_t)j * n_ops + i];
        total_s += ts_median(t, steps - 1);
    }
    int ops = 0;
    double sum_s = 0;
    for (int k = 0; k < TS_SITU_COUNT; k++) {
        cr_expect_eq(gpu.kind[k].ops, cpu.kind[k].ops, "%s: the same ops", ts_situ_kind_names[k]);
        ops += gpu.kind[k].ops, sum_s += gpu.kind[k].time_s;
    }
    cr_assert_eq(ops, n_ops, "one rank: every op is compute");
    cr_expect(fabs(sum_s / total_s - 1) < 1e-12, "as timed: %g s, the ops' medians %g s", sum_s, total_s);
    cr_expect(gpu.kind[TS_SITU_GEMM].model_s < 0.75 * cpu.kind[TS_SITU_GEMM].model_s, "GEMMs at the bf16 peak: %g vs %g s",
              gpu.kind[TS_SITU_GEMM].model_s, cpu.kind[TS_SITU_GEMM].model_s);
    cr_expect(gpu.kind[TS_SITU_ELEMENTWISE].model_s < cpu.kind[TS_SITU_ELEMENTWISE].model_s, "bf16 bytes: %g vs %g s",
              gpu.kind[TS_SITU_ELEMENTWISE].model_s, cpu.kind[TS_SITU_ELEMENTWISE].model_s);
    cr_expect(gpu.gauge_flops_per_s == 0 && cpu.gauge_flops_per_s > 0, "no gauge on GPUs (%g)", gpu.gauge_flops_per_s);
    cr_expect_eq(gpu.step_s, gpu.step_raw_s, "steps as timed");
    free(one);
}

/* Kinds the pass did not see keep their figures. */
Test(calibrate_fit, in_situ_without_ops_changes_nothing) {
    ts_system truth = known_system();
    static ts_calib c;
    synthetic_calib(&c, &truth);
    cr_assert_eq(ts_calib_fit(&c, &truth), TS_OK, "%s", ts_error_message());
    ts_system before = c.system;
    c.situ = (ts_calib_situ){.steps = 3, .timed = 2};
    ts_calib_situ_apply(&c);
    cr_expect(memcmp(&before, &c.system, sizeof before) == 0, "the spec changed");
    for (int k = 0; k < TS_SITU_COUNT; k++) cr_expect_eq(c.situ.kind[k].factor, 1.0);
}

Test(calibrate_fit, curve_merges_to_the_schema_limit) {
    /* 30 distinct FLOP counts: the curve keeps TS_EFF_POINTS_MAX points, strictly increasing (the
     * loader refuses anything else), spanning the measured range. */
    static ts_calib c;
    memset(&c, 0, sizeof c);
    c.ranks = c.cores = 2;
    for (int i = 0; i < 30; i++) {
        ts_calib_gemm *g = &c.gemm[c.n_gemm++];
        *g = (ts_calib_gemm){.m = 16 + 8 * i, .n = 64, .k = 64, .reps = 1};
        g->flops = 2.0 * g->m * g->n * g->k;
        g->time_s = g->flops / (1e10 * (0.2 + 0.02 * i));
    }
    ts_system tmpl = known_system();
    cr_assert_eq(ts_calib_fit(&c, &tmpl), TS_OK, "%s", ts_error_message());
    const ts_eff_curve *e = &c.system.gemm_eff;
    cr_expect_eq(e->n, TS_EFF_POINTS_MAX);
    cr_expect(e->flops[0] == c.gemm[0].flops && e->flops[e->n - 1] == c.gemm[29].flops, "range %g..%g", e->flops[0],
              e->flops[e->n - 1]);
    for (int i = 1; i < e->n; i++) cr_expect(e->flops[i] > e->flops[i - 1], "flops[%d] %g not increasing", i, e->flops[i]);
    for (int i = 0; i < e->n; i++) cr_expect(e->eff[i] > 0 && e->eff[i] <= 1, "eff[%d] %g", i, e->eff[i]);
    cr_expect(c.gemm_rms_error < 0.05, "rms error %g after merging", c.gemm_rms_error);
}

/* ---- the command ------------------------------------------------------------------------------ */

Test(calibrate_cli, help_on_stdout) {
    cli_result r = run_cli("calibrate", "--help", NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(starts_with(r.out, "usage: tessera calibrate"), "stdout: %s", r.out);
    cr_expect(strstr(r.out, "--quick") && strstr(r.out, "--ranks") && strstr(r.out, "--threads"), "%s", r.out);
    cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
    cli_result_free(&r);
}

Test(calibrate_cli, bad_arguments_exit_2_with_one_line) {
    const char *cases[][4] = {
        {"calibrate", "--ranks", "1", NULL},   {"calibrate", "--ranks", "two", NULL},
        {"calibrate", "--threads", "0", NULL}, {"calibrate", "--bogus", NULL, NULL},
        {"calibrate", "stray", NULL, NULL},    {"calibrate", "-o", NULL, NULL},
        {"calibrate", "--device", "bogus", NULL}, {"calibrate", "--situ-steps", "1", NULL},
        {"calibrate", "--situ-batch", "0", NULL}, {"calibrate", "--situ-seq", "999", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_result r = run_argv(cases[i]);
        cr_expect_eq(r.status, 2, "%s %s: exit %d", cases[i][1], cases[i][2] ? cases[i][2] : "", r.status);
        cr_expect(one_line_error(r.err, "calibrate"), "%s: stderr: %s", cases[i][1], r.err);
        cr_expect_eq(r.out_len, 0, "%s: stdout: %s", cases[i][1], r.out);
        cli_result_free(&r);
    }
}

Test(calibrate_cli, device_flag_is_checked) {
    cli_result r = run_cli("calibrate", "--device", "bogus", NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--device: expected cpu or cuda, got \"bogus\"") != NULL, "%s", r.err);
    cr_expect(one_line_error(r.err, "calibrate"), "%s", r.err);
    cli_result_free(&r);
    r = run_cli("calibrate", "--help", NULL);
    cr_expect(strstr(r.out, "--device") != NULL, "help lists --device");
    cli_result_free(&r);
}

Test(mpi, calibrate_quick_profile_plans, .timeout = 300) {
    char *dir = make_temp_dir(), profile[PATH_MAX];
    snprintf(profile, sizeof profile, "%s/profile.json", dir);
    const char *args[] = {"calibrate", "--quick",      "--ranks", "2", "--situ-steps", "5", "--situ-batch",
                          "2",         "--situ-seq", "64",      "--json", "-o",         profile, NULL};
    cli_result r = run_argv_timeout(args, 240);
    cJSON *root = parse_json_output(&r, "calibrate --quick --json");
    cr_expect_eq(json_num(root, "ranks", "$"), 2);
    const char *arrays[] = {"gemm", "elementwise", "attention", "collectives", "fits"};
    for (int i = 0; i < 5; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, arrays[i]);
        cr_expect(cJSON_IsArray(a) && cJSON_GetArraySize(a) > 0, "$.%s is not a non-empty array", arrays[i]);
    }
    const cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "collectives"), 0);
    cr_assert(row != NULL);
    cr_expect(json_num(row, "time_s", "$.collectives[0]") > 0 && json_num(row, "busbw", "$.collectives[0]") > 0);
    json_obj(root, "system", "$");
    /* The in-situ pass ran the trainer: every compute kind has ops and a positive factor. */
    const cJSON *situ = json_obj(root, "in_situ", "$"), *kinds = cJSON_GetObjectItemCaseSensitive(situ, "kinds");
    cr_expect_eq(json_num(situ, "steps", "$.in_situ"), 5, "--situ-steps 5");
    cr_expect_eq(json_num(situ, "global_batch", "$.in_situ"), 2, "--situ-batch 2");
    cr_expect_eq(json_num(situ, "seq", "$.in_situ"), 64, "--situ-seq 64");
    cr_expect_eq(json_num(situ, "timed", "$.in_situ"), 4, "the first step warms up");
    cr_expect_eq(json_num(situ, "ranks", "$.in_situ"), json_num(root, "compute_ranks", "$"),
                 "every compute rank trains at once");
    double step_cv = json_num(situ, "step_cv", "$.in_situ");
    cr_expect(step_cv > 0 && step_cv < 1, "the ranks' steps spread: %g", step_cv);
    /* The speed gauge read between the steps; the step at its median speed is within the
     * gauge's own spread of the step as timed. */
    double gauge = json_num(situ, "gauge_flops_per_s", "$.in_situ");
    double step = json_num(situ, "step_s", "$.in_situ"), raw = json_num(situ, "step_raw_s", "$.in_situ");
    cr_expect(gauge > 1e8 && gauge < 1e13, "gauge %g FLOP/s", gauge);
    cr_expect(step > 0.5 * raw && step < 2 * raw, "step %g s at the gauge's speed, %g s as timed", step, raw);
    cr_expect_eq(cJSON_GetArraySize(kinds), TS_SITU_COUNT);
    for (int k = 0; k < cJSON_GetArraySize(kinds); k++) {
        const cJSON *x = cJSON_GetArrayItem(kinds, k);
        cr_expect(json_num(x, "ops", "$.in_situ.kinds[]") > 0 && json_num(x, "factor", "$.in_situ.kinds[]") > 0,
                  "in-situ kind %d has no ops or factor", k);
    }
    cJSON_Delete(root);
    cli_result_free(&r);

    ts_system s;
    cr_assert_eq(ts_system_load(profile, &s), TS_OK, "%s", ts_error_message());
    cr_expect_eq(s.cores_per_node, (int)sysconf(_SC_NPROCESSORS_ONLN));
    cr_expect(fabs(s.speed_cv - step_cv) < 1e-12, "node.speed_cv %g, in-situ spread %g", s.speed_cv, step_cv);
    cr_expect(fabs(s.gauge_flops_per_s / gauge - 1) < 1e-12, "node.gauge_flops_per_s %g, in situ %g", s.gauge_flops_per_s,
              gauge);
    cr_expect(s.gpus_per_node >= 8 && s.serial_ops, "node.gpus %d, serial_ops %d", s.gpus_per_node, s.serial_ops);
    cr_expect(s.peak_flops[TS_DTYPE_FP32] > 1e8 && s.gemm_eff.n >= 2, "peak %g over %d points",
              s.peak_flops[TS_DTYPE_FP32], s.gemm_eff.n);
    /* a latency fitted on two ranks of a loaded 2-core machine (make check runs beside other
     * suites) reached 10.5 ms once: the bound catches a unit slip (seconds as ms: 1000x), not load */
    cr_expect(s.link_bytes_per_s > 1e6 && s.link_latency_s < 0.1, "link %g B/s, %g s", s.link_bytes_per_s,
              s.link_latency_s);

    cli_result p = run_cli("plan", "-m", "tiny", "-s", profile, "--gpus", "2", "--global-batch", "8", "--seq", "64",
                           "--dtype", "fp32", NULL);
    cr_expect_eq(p.status, 0, "plan on the profile: exit %d: %s", p.status, p.err);
    cr_expect(strstr(p.out, "# best:") != NULL, "plan printed no best layout: %s", p.out);
    cli_result_free(&p);
    remove_dir(dir);
}

/* exec/calibrate_quality.h: a fit beyond its limit is a warning (what calibrate --strict refuses);
 * fits within it are "ok" lines. */
Test(calibrate_quality, fits_beyond_their_limits_warn) {
    static ts_calib c;
    memset(&c, 0, sizeof c);
    c.n_gemm = 7, c.gemm_rms_error = 0.619;
    c.n_mem = 5, c.mem_rms_error = 0.10;
    ts_calib_quality q;
    ts_calib_quality_judge_at(&c, 0.5, 2, &q);
    cr_expect_eq(q.warnings, 1);
    cr_expect(strstr(q.lines[0], "warning: GEMM fit off by 61.9% rms") != NULL, "%s", q.lines[0]);
    cr_expect(strstr(q.lines[1], "ok: memory-bound kernel fit 10.0% rms") != NULL, "%s", q.lines[1]);
    c.gemm_rms_error = 0.05;
    ts_calib_quality_judge_at(&c, 0.5, 2, &q);
    cr_expect_eq(q.warnings, 0);
    c.situ.steps = 5, c.situ.step_cv = 0.2;
    ts_calib_quality_judge_at(&c, 0.5, 2, &q);
    cr_expect_eq(q.warnings, 1, "a 20%% spread in lockstep warns");
    ts_calib_quality_judge_at(&c, 11.5, 2, &q);
    cr_expect_eq(q.warnings, 2, "and so does a load of 11.5 on 2 cores");
    cr_expect(strstr(q.lines[q.n - 1], "load average 11.5 on 2 cores") != NULL || strstr(q.lines[q.n - 2], "load") != NULL);
}
