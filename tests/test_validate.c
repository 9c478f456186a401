/* `tessera validate` as users run it: one real case of the matrix (the one-rank layout, on the
 * zoo's cpu-localhost spec, so no calibration), trained in two passes, gives the DESIGN.md
 * "validate" JSON with the per-op-kind comparison and each pass's measured step; the files it
 * keeps are there; bad flags exit 2 with one line. The
 * accuracy of the whole matrix is a benchmark (make bench), not a test. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "tests/helpers.h"

static void no_leak_check(void) {
    /* validate runs the executor, so Open MPI: its allocations at exit are not ours (as in
     * test_exec_parity.c); no effect without the sanitizers. */
    const char *old = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

/* measured.in_situ.KEY of a profile written by tessera calibrate. */
static double situ_of(const char *path, const char *key) {
    cJSON *root = NULL;
    cr_assert_eq(ts_json_load_file(path, &root), TS_OK, "%s", ts_error_message());
    double v = json_num(json_obj(json_obj(root, "measured", "$"), "in_situ", "$.measured"), key, "$.measured.in_situ");
    cJSON_Delete(root);
    return v;
}

Test(validate, one_case_gives_design_json, .init = no_leak_check, .timeout = 120) {
    char *dir = make_temp_dir();
    char *spec = test_data_path("models/systems/cpu-localhost.json");
    cli_result r = run_cli("validate", "--system", spec, "--only", "1", "--steps", "4", "--repeat", "2", "--keep",
                           dir, "--replay", "--json", NULL);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cJSON *root = parse_json_output(&r, "validate --json");
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    cr_assert(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) == 1, "one case expected");
    const cJSON *c = cases->child;
    cr_expect_str_eq(json_str(c, "layout", "$.cases[0]"),
                     "dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none");
    double sim = json_num(c, "simulated_s", "$.cases[0]"), meas = json_num(c, "measured_s", "$.cases[0]");
    double err = json_num(c, "error", "$.cases[0]");
    cr_expect(sim > 0 && meas > 0, "simulated %g s, measured %g s", sim, meas);
    cr_expect(fabs(err - (sim - meas) / meas) < 1e-9, "error %g", err);
    cr_expect_eq(json_num(root, "median_abs_error", "$"), fabs(err));
    cr_expect_eq(json_num(root, "max_abs_error", "$"), fabs(err));
    cr_expect_str_eq(json_str(root, "precision", "$"), "fp32", "CPU ranks train fp32");
    /* Two passes: the measured step is the median (mean) of the two runs' steps. */
    cr_expect_eq(json_num(root, "repeat", "$"), 2);
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(c, "measured_runs_s");
    cr_assert(cJSON_IsArray(runs) && cJSON_GetArraySize(runs) == 2, "two measured runs");
    double r0 = cJSON_GetArrayItem(runs, 0)->valuedouble, r1 = cJSON_GetArrayItem(runs, 1)->valuedouble;
    cr_expect(r0 > 0 && r1 > 0, "runs %g, %g s", r0, r1);
    cr_expect(fabs(meas - 0.5 * (r0 + r1)) < 1e-12 * meas, "measured %g s from runs %g, %g s", meas, r0, r1);
    cr_expect(fabs(json_num(c, "measured_spread", "$.cases[0]") - fabs(r0 - r1) / meas) < 1e-9);
    /* The zoo's spec has no speed gauge: the step as timed is the one compared. */
    cr_expect_eq(json_num(c, "measured_raw_s", "$.cases[0]"), meas);
    cr_expect_eq(json_num(c, "raw_error", "$.cases[0]"), err);
    cr_expect_eq(json_num(root, "median_abs_raw_error", "$"), fabs(err));
    /* Per-op-kind errors: the one-rank step has GEMMs, attention, element-wise ops and the
     * optimizer, and no communication. */
    const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(c, "kinds");
    cr_assert(cJSON_IsArray(kinds));
    int gemm = 0;
    for (const cJSON *k = kinds->child; k; k = k->next) {
        const char *kind = json_str(k, "kind", "$.cases[0].kinds[]");
        cr_expect(strncmp(kind, "collective", 10) != 0 && strcmp(kind, "send") != 0, "kind %s on one rank", kind);
        gemm += strcmp(kind, "gemm") == 0 && json_num(k, "ops", "kinds[]") > 0 && json_num(k, "measured_s", "kinds[]") > 0;
    }
    cr_expect_eq(gemm, 1);
    /* Replay: one rank, every op at its measured time: the program's part of the step less the
     * executor's own moments between ops (0.01% in a run on a loaded VM), the rest (batch load,
     * loss reduction) outside it; each pass replayed, the median kept. */
    const cJSON *rp = json_obj(c, "replay", "$.cases[0]");
    double rep = json_num(rp, "replayed_s", "replay"), ops_s = json_num(rp, "measured_ops_s", "replay");
    cr_expect(rep <= ops_s * (1 + 1e-9) && rep > 0.95 * ops_s, "replayed %g s, the run's ops %g s", rep, ops_s);
    cr_expect(json_num(rp, "measured_s", "replay") >= ops_s);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rp, "errors")), 2);
    cr_expect_eq(json_num(json_obj(root, "replay", "$"), "max_abs_error", "$.replay"),
                 fabs(json_num(rp, "error", "replay")));
    const cJSON *noise = json_obj(root, "noise", "$");
    cr_expect(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(noise, "judgeable")));
    cr_expect(json_num(noise, "step_spread", "$.noise") >= 0);
    const cJSON *mem = json_obj(json_obj(c, "memory", "$.cases[0]"), "weights", "memory");
    cr_expect(json_num(mem, "measured_bytes", "weights") > 0);
    cJSON_Delete(root);
    cli_result_free(&r);
    char names[4096];
    list_dir(dir, names, sizeof names);
    cr_expect(strstr(names, "case-01.plan.json") && strstr(names, "case-01.sim.trace.json") &&
              strstr(names, "case-01.run.trace.json") && strstr(names, "case-01.r2.run.json"), "kept: %s", names);
    free(spec);
    remove_dir(dir);
}

Test(validate, bad_flags) {
    static const char *const bad[][3] = {
        {"--only", "99", "--only: expected an integer in [1, 24]"},
        {"--steps", "2", "--steps: expected an integer in [4, 1000]"},
        {"--repeat", "0", "--repeat: expected an integer in [1, 20]"},
        {"--situ-steps", "1", "--situ-steps: expected an integer in [2, 1000]"},
        {"--system", "/nonexistent.json", "nonexistent"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cli_result r = run_cli("validate", bad[i][0], bad[i][1], "--only", "1", NULL);
        cr_expect_eq(r.status, 2, "%s %s: exit %d", bad[i][0], bad[i][1], r.status);
        cr_expect(strstr(r.err, bad[i][2]) != NULL, "%s %s: %s", bad[i][0], bad[i][1], r.err);
        cli_result_free(&r);
    }
    cli_result r = run_cli("validate", "--help", NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "usage: tessera validate") != NULL);
    cli_result_free(&r);
}

Test(validate, failed_run_leaves_no_partial_output, .init = no_leak_check, .timeout = 120) {
    /* The run's JSON goes to case-NN.run.json only when the run succeeds (cli_spawn writes it
     * atomically): an injected failure leaves the plan and the simulated trace, nothing else. */
    char *dir = make_temp_dir();
    char *spec = test_data_path("models/systems/cpu-localhost.json");
    setenv("TESSERA_FAULT_RANK", "0", 1);
    setenv("TESSERA_FAULT_STEP", "1", 1);
    setenv("TESSERA_FAULT_MODE", "fail", 1);
    cli_result r = run_cli("validate", "--system", spec, "--only", "1", "--steps", "4", "--keep", dir, NULL);
    unsetenv("TESSERA_FAULT_RANK");
    unsetenv("TESSERA_FAULT_STEP");
    unsetenv("TESSERA_FAULT_MODE");
    cr_expect_eq(r.status, 1, "stderr: %s", r.err);
    cr_expect(strstr(r.err, "failed with exit status") != NULL, "stderr: %s", r.err);
    char names[4096];
    list_dir(dir, names, sizeof names);
    cr_expect(strstr(names, "case-01.plan.json") != NULL, "kept: %s", names);
    cr_expect(strstr(names, "run.json") == NULL && strstr(names, ".tmp") == NULL, "left: %s", names);
    cli_result_free(&r);
    free(spec);
    remove_dir(dir);
}

/* Without --system, each pass calibrates, in situ at the matrix's batch and length; the simulation
 * uses the calibration whose in-situ step is the median of the passes' (with two, the faster
 * one), and says which. */
Test(mpi, validate_calibrates_each_pass, .init = no_leak_check, .timeout = 300) {
    char *dir = make_temp_dir();
    const char *args[] = {"validate", "--only", "1",  "--steps", "4",    "--repeat", "2",    "--situ-steps", "2",
                          "--seq",    "64",     "-b", "4",       "--keep", dir,        "--json", NULL};
    cli_result r = run_argv_timeout(args, 280);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cJSON *root = parse_json_output(&r, "validate --json");
    char p1[PATH_MAX], p2[PATH_MAX];
    snprintf(p1, sizeof p1, "%s/profile.p1.json", dir);
    snprintf(p2, sizeof p2, "%s/profile.p2.json", dir);
    /* The in-situ steps' work in gauge FLOPs: the calibration with the median one is chosen. */
    double work1 = situ_of(p1, "step_s") * situ_of(p1, "gauge_flops_per_s");
    double work2 = situ_of(p2, "step_s") * situ_of(p2, "gauge_flops_per_s");
    for (int p = 0; p < 2; p++) {
        const char *path = p ? p2 : p1;
        cr_expect_eq(situ_of(path, "seq"), 64, "%s: in situ at the matrix's length", path);
        cr_expect_eq(situ_of(path, "global_batch"), 4, "%s: in situ at the matrix's batch", path);
    }
    cr_assert(work1 > 0 && work2 > 0, "in-situ work %g, %g FLOP", work1, work2);
    const char *system = json_str(root, "system", "$");
    cr_expect_str_eq(system, work1 <= work2 ? p1 : p2, "simulated with %s (in-situ %g vs %g FLOP)", system, work1, work2);
    cr_expect(strstr(r.err, "the calibration with the median in-situ step") != NULL, "stderr: %s", r.err);
    /* Each pass's step at the chosen calibration's speed: its gauge work over the profile's
     * node.gauge_flops_per_s; the step as timed beside it. */
    ts_system chosen;
    cr_assert_eq(ts_system_load(system, &chosen), TS_OK, "%s", ts_error_message());
    cr_assert(chosen.gauge_flops_per_s > 0, "the profile has no gauge");
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "cases"), 0);
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(c, "measured_runs_s");
    const cJSON *raw = cJSON_GetObjectItemCaseSensitive(c, "measured_raw_runs_s");
    cr_assert(cJSON_GetArraySize(at) == 2 && cJSON_GetArraySize(raw) == 2, "two runs each");
    for (int p = 0; p < 2; p++) {
        char run[PATH_MAX];
        if (p == 0) snprintf(run, sizeof run, "%s/case-01.run.json", dir);
        else snprintf(run, sizeof run, "%s/case-01.r2.run.json", dir);
        cJSON *doc = NULL;
        cr_assert_eq(ts_json_load_file(run, &doc), TS_OK, "%s", ts_error_message());
        double flop = json_num(json_obj(doc, "gauge", "$"), "step_flop_median", "$.gauge");
        double step = json_num(json_obj(doc, "step_s", "$"), "median", "$.step_s");
        cr_expect(fabs(cJSON_GetArrayItem(at, p)->valuedouble / (flop / chosen.gauge_flops_per_s) - 1) < 1e-12,
                  "pass %d at the calibration's speed", p + 1);
        cr_expect_eq(cJSON_GetArrayItem(raw, p)->valuedouble, step, "pass %d as timed", p + 1);
        cJSON_Delete(doc);
    }
    cJSON_Delete(root);
    cli_result_free(&r);
    remove_dir(dir);
}

/* --repeat-to: passes until the cases' passes agree to the fraction; 1 (100%) holds after the
 * least, two passes. */
Test(validate, repeat_to_stops_once_settled, .init = no_leak_check, .timeout = 120) {
    char *spec = test_data_path("models/systems/cpu-localhost.json");
    cli_result r = run_cli("validate", "--system", spec, "--only", "1", "--steps", "4", "--repeat-to", "1", "--json",
                           NULL);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cJSON *root = parse_json_output(&r, "validate --json");
    cr_expect_eq(json_num(root, "repeat", "$"), 2);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "cases")->child;
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c, "measured_raw_runs_s")), 2);
    cJSON_Delete(root);
    cli_result_free(&r);
    free(spec);
}
