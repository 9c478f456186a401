/* calibrate's in-situ pass at the plan's shapes and on GPUs (exec/calibrate.h, ts_calib_situ):
 * how a device trains and prices (ts_situ_mode_of), the factors on a GPU's profile (the bf16 peak
 * scaled, the fp32 peak kept, no gauge or spread), `--situ-model` / `--situ-mbs` refused before any
 * rank starts, and (suite `mpi`) a CPU calibration whose pass trains another model in micro-batches
 * of 2: measured.in_situ names them and counts that program's ops. No GPU is needed: the GPU's half
 * of the pass is priced here on CPU samples (tests/test_calibrate.c,
 * in_situ_sums_on_gpus_price_bf16_as_timed). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec/calibrate.h"
#include "models/model.h"
#include "models/system.h"
#include "program/program.h"
#include "tests/helpers.h"

Test(calibrate_situ, mode_per_device) {
    ts_situ_mode cpu = ts_situ_mode_of(TS_DEVICE_CPU), gpu = ts_situ_mode_of(TS_DEVICE_CUDA);
    cr_expect(cpu.dtype == TS_DTYPE_FP32 && !cpu.bf16 && cpu.gauged, "CPU ranks: fp32 as today, the gauge read");
    cr_expect(gpu.dtype == TS_DTYPE_BF16 && gpu.bf16 && !gpu.gauged, "GPUs: bf16 as GPU plans, no gauge");
}

/* A GPU's profile (h100-sxm-dgx's figures) after an in-situ pass with the given factors. */
static void gpu_calib(ts_calib *c, const double *f) {
    memset(c, 0, sizeof *c);
    cr_assert_eq(ts_system_load("h100-sxm-dgx", &c->system), TS_OK, "%s", ts_error_message());
    c->device = TS_DEVICE_CUDA;
    c->situ = (ts_calib_situ){.model = "llama3.2-1b.json", .batch = 4, .seq = 2048, .mbs = 2,
                              .mode = ts_situ_mode_of(TS_DEVICE_CUDA), .steps = 3, .timed = 2, .ranks = 1,
                              .step_s = 1, .step_raw_s = 1, .step_cv = 0.125, .gauge_flops_per_s = 3.5e10};
    for (int k = 0; k < TS_SITU_COUNT; k++)
        c->situ.kind[k] = (ts_calib_situ_kind){.ops = 10, .model_s = 0.2, .time_s = 0.2 * f[k]};
}

/* On GPUs each kind's bf16 time moves by its factor; the fp32 and fp8 peaks stay (their own grids),
 * and node.speed_cv and the gauge stay 0 whatever the pass measured. */
Test(calibrate_situ, gpu_factors_scale_the_bf16_peak_only) {
    static ts_calib c;
    const double f[TS_SITU_COUNT] = {2.4, 20.8, 2.36, 1.34}; /* an H100 step's kinds over its microbenchmark profile's */
    gpu_calib(&c, f);
    ts_system before = c.system;
    ts_calib_situ_apply(&c);
    const ts_system *s = &c.system;
    /* kernel_latency_s is not scaled: at these sizes it is under 1e-4 of the time */
    test_expect_situ_scaled(s, &before, TS_DTYPE_BF16, 4096, 2048, 2048, 1e12, f, 1e-3);
    cr_expect_eq(s->peak_flops[TS_DTYPE_FP32], before.peak_flops[TS_DTYPE_FP32], "fp32 keeps its own grid's peak");
    cr_expect_eq(s->peak_flops[TS_DTYPE_FP8], before.peak_flops[TS_DTYPE_FP8], "fp8 keeps its own grid's peak");
    cr_expect(s->speed_cv == 0 && s->speed_cv_window_s == 0 && s->speed_cv_decay == 0, "no spread on GPUs: %g",
              s->speed_cv);
    cr_expect_eq(s->gauge_flops_per_s, 0, "no gauge on GPUs");
}

/* The GPU profile's sources and measured.in_situ say what the pass trained and how. */
Test(calibrate_situ, gpu_profile_says_what_ran) {
    static ts_calib c;
    const double f[TS_SITU_COUNT] = {2, 3, 4, 5};
    gpu_calib(&c, f);
    c.n_gemm = c.n_gemm_bf16 = 27; /* the grids' row counts, as the sources say them */
    ts_calib_situ_apply(&c);
    cJSON *doc = NULL;
    cr_assert_eq(ts_calib_profile(&c, &doc), TS_OK, "%s", ts_error_message());
    char *text = cJSON_PrintUnformatted(doc);
    const char *says[] = {
        "bf16 GEMM rate (fp32 accumulation) over 27 (m, n, k) shapes (NT, NN, TN); then the in-situ factor (gemm "
        "2.000; trained llama3.2-1b.json, global batch 4 of 2048 tokens in micro-batches of 2, bf16 mixed precision "
        "priced as bf16; exec/calibrate.h)",
        "sgemm rate over 27 (m, n, k) shapes (NT, NN, TN); the in-situ pass trained bf16 and leaves it",
        "in-situ factors (gemm 2.000, attention 3.000; trained llama3.2-1b.json",
    };
    for (size_t i = 0; i < sizeof says / sizeof says[0]; i++) cr_expect(strstr(text, says[i]) != NULL, "%zu: %.600s", i, text);
    cr_expect(strstr(text, "skipped") == NULL, "%.600s", text);
    free(text);
    const cJSON *situ = json_obj(json_obj(doc, "measured", "$"), "in_situ", "$.measured");
    cr_expect_str_eq(json_str(situ, "model", "$.measured.in_situ"), "llama3.2-1b.json");
    cr_expect_str_eq(json_str(situ, "precision", "$.measured.in_situ"), "bf16");
    cr_expect_str_eq(json_str(situ, "dtype", "$.measured.in_situ"), "bf16");
    cr_expect_eq(json_num(situ, "mbs", "$.measured.in_situ"), 2);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(situ, "gauged")), "no gauge on GPUs");
    cJSON_Delete(doc);
}

/* Bad --situ-model / --situ-mbs values: exit 2 and one line naming the option, before any rank. */
Test(calibrate_situ, bad_model_and_mbs_exit_2_naming_the_option) {
    const char *cases[][6] = {
        {"calibrate", "--situ-model", "no-such-model", NULL, NULL, "--situ-model: "},
        {"calibrate", "--situ-model", "deepseek-v3", NULL, NULL, "--situ-model deepseek-v3: "},
        {"calibrate", "--situ-mbs", "3", NULL, NULL, "--situ-mbs: 3 does not divide the in-situ batch 4"},
        {"calibrate", "--situ-mbs", "0", NULL, NULL, "--situ-mbs: expected an integer"},
        {"calibrate", "--situ-model", "tiny-moe", "--situ-seq", "257", "--situ-seq: expected an integer in [1, 256] "
                                                                      "(tiny-moe's max_seq)"},
        {"calibrate", "--no-in-situ", "--situ-mbs", "2", NULL, "--situ-mbs needs the in-situ pass"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[6] = {cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4], NULL};
        cli_result r = run_argv(argv);
        cr_expect_eq(r.status, 2, "%s %s: exit %d", cases[i][1], cases[i][2], r.status);
        cr_expect(one_line_error(r.err, "calibrate"), "%s %s: stderr: %s", cases[i][1], cases[i][2], r.err);
        cr_expect(strstr(r.err, cases[i][5]) != NULL, "%s %s: stderr: %s", cases[i][1], cases[i][2], r.err);
        cr_expect_eq(r.out_len, 0, "stdout: %s", r.out);
        cli_result_free(&r);
    }
}

Test(calibrate_situ, help_names_the_shape_flags) {
    cli_result r = run_cli("calibrate", "--help", NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "--situ-model M") && strstr(r.out, "--situ-mbs N"), "%s", r.out);
    cr_expect(strstr(r.out, "skipped") == NULL, "the GPU paragraph: %s", r.out);
    cli_result_free(&r);
}

/* The compute ops of one rank's step of `model`, batch of seq tokens in micro-batches of mbs, by
 * in-situ kind (the pass's program: dp = tp = pp = 1). */
static void program_kinds(const char *model, int batch, int seq, int mbs, int *ops) {
    ts_model m;
    cr_assert_eq(ts_model_load(model, &m), TS_OK, "%s", ts_error_message());
    ts_problem pb = test_problem_of(&m, "cpu-localhost", 1, batch, seq, 1);
    ts_train_set_dtype(&pb.train, TS_DTYPE_FP32);
    ts_layout l = {.dp = 1, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .mbs = mbs, .vpp = 1, .microbatches = batch / mbs,
                   .schedule = TS_SCHED_1F1B, .recompute = TS_RECOMPUTE_NONE};
    ts_program prog;
    cr_assert_eq(ts_program_build(&pb, &l, NULL, &prog), TS_OK, "%s", ts_error_message());
    const ts_op_kind kinds[TS_SITU_COUNT] = {TS_OP_GEMM, TS_OP_ATTENTION, TS_OP_ELEMENTWISE, TS_OP_OPTIMIZER};
    for (int k = 0; k < TS_SITU_COUNT; k++) {
        ops[k] = 0;
        for (int i = 0; i < prog.stages[0].n_ops; i++) ops[k] += prog.stages[0].ops[i].kind == kinds[k];
    }
    ts_program_free(&prog);
}

/* --situ-model and --situ-mbs train those shapes: tiny-moe in micro-batches of 2, every op of its
 * program counted by kind, named in measured.in_situ and in the sources. */
Test(mpi, calibrate_situ_trains_the_model_and_mbs, .timeout = 300) {
    char *dir = make_temp_dir(), profile[PATH_MAX];
    snprintf(profile, sizeof profile, "%s/profile.json", dir);
    const char *args[] = {"calibrate",    "--quick",    "--ranks",    "2",  "--situ-model", "tiny-moe",
                          "--situ-batch", "4",          "--situ-seq", "32", "--situ-mbs",   "2",
                          "--situ-steps", "2",          "-o",         profile, NULL};
    cli_result r = run_argv_timeout(args, 240);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cli_result_free(&r);
    char *text = read_file(profile);
    cr_assert(text != NULL, "no profile at %s", profile);
    cr_expect(strstr(text, "trained tiny-moe, global batch 4 of 32 tokens in micro-batches of 2, fp32") != NULL,
              "sources: %.600s", text);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    cr_assert(doc != NULL);
    const cJSON *situ = json_obj(json_obj(doc, "measured", "$"), "in_situ", "$.measured");
    cr_expect_str_eq(json_str(situ, "model", "$.measured.in_situ"), "tiny-moe");
    cr_expect_str_eq(json_str(situ, "precision", "$.measured.in_situ"), "fp32", "CPU ranks train fp32");
    cr_expect(json_num(situ, "mbs", "$.measured.in_situ") == 2 && json_num(situ, "global_batch", "$.measured.in_situ") == 4 &&
              json_num(situ, "seq", "$.measured.in_situ") == 32);
    int want[TS_SITU_COUNT];
    program_kinds("tiny-moe", 4, 32, 2, want);
    const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(situ, "kinds");
    cr_assert_eq(cJSON_GetArraySize(kinds), TS_SITU_COUNT);
    for (int k = 0; k < TS_SITU_COUNT; k++) {
        const cJSON *x = cJSON_GetArrayItem(kinds, k);
        cr_expect_eq(json_num(x, "ops", "$.in_situ.kinds[]"), want[k], "%s: the program's ops", ts_situ_kind_names[k]);
    }
    cr_expect(want[TS_SITU_GEMM] > 0 && want[TS_SITU_ATTENTION] > 0);
    cJSON_Delete(doc);
    remove_dir(dir);
}

/* The options' shape, unset fields at the defaults: what calibrate checks before the ranks start is
 * what the pass trains. */
Test(calibrate_situ, shape_of_the_options) {
    ts_calib_opts none = {0};
    ts_situ_shape d = ts_calib_situ_shape(&none);
    cr_expect_str_eq(d.model, TS_SITU_MODEL);
    cr_expect(d.batch == TS_SITU_BATCH && d.seq == TS_SITU_SEQ && d.mbs == 1, "%d x %d, mbs %d", d.batch, d.seq, d.mbs);
    ts_calib_opts some = {.situ_model = "bench/llama3.2-1b.json", .situ_batch = 4, .situ_seq = 2048, .situ_mbs = 2};
    ts_situ_shape s = ts_calib_situ_shape(&some);
    cr_expect_str_eq(s.model, "bench/llama3.2-1b.json");
    cr_expect(s.batch == 4 && s.seq == 2048 && s.mbs == 2, "%d x %d, mbs %d", s.batch, s.seq, s.mbs);
}
