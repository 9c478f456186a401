/* reports/validate.h without running anything: the JSON form and the table of a hand-filled
 * outcome (two cases, two passes, with and without the speed gauge), and the defaults. The
 * experiment itself runs in tests/test_validate.c. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/validate.h"
#include "tests/helpers.h"

static ts_compare_kind kinds[2] = {
    {.kind = "gemm", .ops = 10, .simulated_s = 0.2, .measured_s = 0.25, .error = -0.2, .median_abs_op_error = 0.1},
    {.kind = "attention", .ops = 4, .simulated_s = 0.1, .measured_s = 0.05, .error = 1.0, .median_abs_op_error = 0.5},
};

static ts_validate_case one_case(int index, int ranks, const char *layout, double sim, double meas, double raw) {
    ts_validate_case c = {.index = index, .ranks = ranks};
    snprintf(c.cmp.layout, sizeof c.cmp.layout, "%s", layout);
    snprintf(c.cmp.model, sizeof c.cmp.model, "tiny");
    c.cmp.ops = 14;
    c.cmp.simulated_step_s = sim, c.cmp.measured_step_s = meas, c.cmp.step_error = (sim - meas) / meas;
    c.cmp.measured_raw_step_s = raw, c.cmp.speed = 1;
    c.cmp.n_kinds = 2, c.cmp.kinds = kinds;
    c.raw_s[0] = raw * 0.9, c.raw_s[1] = raw * 1.1;
    c.run_s[0] = meas * 0.75, c.run_s[1] = meas * 1.25;
    c.raw_error = (sim - raw) / raw;
    c.run_spread = 0.5, c.raw_spread = 0.2;
    return c;
}

#define L1 "dp=1,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"
#define L2 "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"

static ts_validate_result hand_filled(ts_validate_case *cases) {
    cases[0] = one_case(0, 1, L1, 0.5, 0.4, 0.5);
    cases[1] = one_case(1, 2, L2, 0.3, 0.4, 0.4);
    ts_validate_result r = {.steps = 8, .repeat = 2, .batch = 8, .seq = 128, .n = 2, .cases = cases,
                            .median_abs_error = 0.25, .max_abs_error = 0.25, .median_abs_raw_error = 0.125,
                            .max_abs_raw_error = 0.25, .median_spread = 0.5, .median_raw_spread = 0.2};
    snprintf(r.system, sizeof r.system, "profile.json");
    return r;
}

Test(validate_report, json) {
    ts_validate_case cases[2];
    ts_validate_result r = hand_filled(cases);
    cJSON *root = NULL;
    cr_assert_eq(ts_validate_json(&r, &root), TS_OK, "%s", ts_error_message());
    cr_expect_str_eq(json_str(root, "system", "$"), "profile.json");
    cr_expect_eq(json_num(root, "repeat", "$"), 2);
    cr_expect_str_eq(json_str(root, "precision", "$"), "fp32");
    cr_expect_eq(json_num(root, "median_abs_error", "$"), 0.25);
    cr_expect_eq(json_num(root, "max_abs_raw_error", "$"), 0.25);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "cases");
    cr_assert_eq(cJSON_GetArraySize(arr), 2);
    const cJSON *c = cJSON_GetArrayItem(arr, 1);
    cr_expect_str_eq(json_str(c, "layout", "$.cases[1]"), L2);
    cr_expect_eq(json_num(c, "case", "$.cases[1]"), 2);
    cr_expect_eq(json_num(c, "ranks", "$.cases[1]"), 2);
    cr_expect_eq(json_num(c, "simulated_s", "$.cases[1]"), 0.3);
    cr_expect_eq(json_num(c, "measured_s", "$.cases[1]"), 0.4);
    cr_expect_eq(json_num(c, "error", "$.cases[1]"), cases[1].cmp.step_error);
    cr_expect_eq(json_num(c, "raw_error", "$.cases[1]"), cases[1].raw_error);
    cr_expect_eq(json_num(c, "measured_spread", "$.cases[1]"), 0.5);
    cr_expect_eq(json_num(c, "measured_raw_spread", "$.cases[1]"), 0.2);
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(c, "measured_runs_s");
    cr_assert_eq(cJSON_GetArraySize(runs), 2, "one per pass");
    cr_expect_eq(cJSON_GetArrayItem(runs, 1)->valuedouble, cases[1].run_s[1]);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c, "kinds")), 2, "the comparison's kinds");
    cJSON_Delete(root);
}

static char *printed(const ts_validate_result *r) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cr_assert_eq(ts_validate_print(f, r), TS_OK, "%s", ts_error_message());
    fclose(f);
    return text;
}

Test(validate_report, table) {
    ts_validate_case cases[2];
    ts_validate_result r = hand_filled(cases);
    char *text = printed(&r);
    char want[4096];
    snprintf(want, sizeof want,
             "# system profile.json; 8 sequences of 128 tokens, fp32; measured: median step of 5 steps after 3\n"
             "# warm-up, median over the passes; spread: (max - min) / median of the passes\n"
             "%-4s %-9s %-78s %5s %11s %11s %8s %7s  worst op kind\n"
             "1    tiny      %-78s     1      0.5000      0.4000   +25.0%%   50.0%%  attention +100%%\n"
             "2    tiny      %-78s     2      0.3000      0.4000   -25.0%%   50.0%%  attention +100%%\n"
             "# 2 layouts: median |error| 25.0%%, worst 25.0%%; median spread 50.0%% over 2 passes\n",
             "#", "model", "layout", "ranks", "simulated_s", "measured_s", "error", "spread", L1, L2);
    cr_expect_str_eq(text, want);
    free(text);
    /* With the gauge: the raw columns and the line as timed; one pass: no spread. */
    cases[0].cmp.gauged = cases[1].cmp.gauged = 1;
    r.repeat = 1;
    text = printed(&r);
    cr_expect(strstr(text, "# raw_s: as timed, raw_error against it\n") != NULL, "%s", text);
    cr_expect(strstr(text, "0.5000     +0.0%  attention") != NULL, "%s", text);
    cr_expect(strstr(text, "# as timed: median |raw_error| 12.5%, worst 25.0%\n") != NULL, "%s", text);
    cr_expect(strstr(text, "spread") == NULL, "%s", text);
    free(text);
}

Test(validate_report, defaults) {
    ts_validate_opts o;
    ts_validate_opts_defaults(&o);
    cr_expect(o.max_ranks == 8 && o.steps == 8 && o.repeat == 1 && o.situ_steps == 16);
    cr_expect(o.batch == 8 && o.seq == 128 && o.log == stderr);
    cr_expect(o.system == NULL && o.dir == NULL);
    for (int i = 0; i < TS_VALIDATE_CASES; i++) cr_expect_eq(o.only[i], 0);
}

/* The noise verdict, the replay column and the memory table. */
Test(validate_report, noise_replay_and_memory) {
    ts_validate_case cases[2];
    ts_validate_result r = hand_filled(cases);
    r.noise.load_avg_1min = 11.5, r.noise.cores = 2;
    ts_validate_noise_judge(&r.noise, 0.34, 0.03, NAN);
    cr_expect(!r.noise.judgeable);
    cr_expect(strstr(r.noise.verdict, "too noisy to judge 5%: steps of the same run spread 34.0%") != NULL, "%s",
              r.noise.verdict);
    r.replayed = 1, r.replay_median_abs_error = 0.01, r.replay_max_abs_error = 0.03;
    cases[0].replay_error = 0.01, cases[1].replay_error = -0.03;
    cases[0].memory = (ts_validate_memory){.known = 1, .predicted = {100, 100, 200, 90, 50},
                                           .measured = {100, 100, 200, 100, 10},
                                           .error = {0, 0, 0, -0.1, 4.0}};
    r.memory_median_abs_error[3] = 0.1, r.memory_max_abs_error[3] = 0.1;
    char *text = printed(&r);
    cr_expect(strstr(text, "   +1.0%  attention") != NULL, "%s", text);
    cr_expect(strstr(text, "# machine: too noisy to judge 5%") != NULL, "%s", text);
    cr_expect(strstr(text, "# so the step errors above are not a verdict on the simulator; the replay") != NULL, "%s",
              text);
    cr_expect(strstr(text, "median |error| 1.0%, worst 3.0%") != NULL, "%s", text);
    cr_expect(strstr(text, "-10.0%") != NULL && strstr(text, "+400.0%") != NULL, "%s", text);
    free(text);
    cJSON *root = NULL;
    cr_assert_eq(ts_validate_json(&r, &root), TS_OK, "%s", ts_error_message());
    const cJSON *noise = cJSON_GetObjectItemCaseSensitive(root, "noise");
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(noise, "judgeable")));
    cr_expect_eq(json_num(noise, "step_spread", "$.noise"), 0.34);
    cr_expect_eq(json_num(json_obj(root, "replay", "$"), "max_abs_error", "$.replay"), 0.03);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "cases"), 0);
    const cJSON *act = json_obj(json_obj(c0, "memory", "$.cases[0]"), "activations", "memory");
    cr_expect_eq(json_num(act, "error", "activations"), -0.1);
    cr_expect_eq(json_num(json_obj(json_obj(root, "memory", "$"), "median_abs_error", "m"), "activations", "m"), 0.1);
    cJSON_Delete(root);
    /* A steady machine: the verdict says so and no caveat follows. */
    ts_validate_noise_judge(&r.noise, 0.02, 0.01, 0.03);
    cr_expect(r.noise.judgeable);
    cr_expect(strstr(r.noise.verdict, "steady enough to judge 5%: passes of the same case spread 3.0%") != NULL, "%s",
              r.noise.verdict);
}

Test(validate_report, run_spreads_from_run_json) {
    char *path = test_write_temp("{\"step_s\": {\"median\": 1, \"each\": [9, 1.0, 1.2, 0.9, 1.1]},"
                                 " \"gauge\": {\"flops_per_s\": [5, 10, 10, 11, 9]}}");
    double steps = -1, gauge = -1;
    cr_assert_eq(ts_run_spreads(path, 1, &steps, &gauge), TS_OK, "%s", ts_error_message());
    /* After the warm-up step: (1.2 - 0.9) / median 1.05; gauge (11 - 9) / 10. */
    cr_expect(fabs(steps - 0.3 / 1.05) < 1e-12, "%g", steps);
    cr_expect(fabs(gauge - 0.2) < 1e-12, "%g", gauge);
    test_remove_temp(path);
    path = test_write_temp("{\"step_s\": {\"median\": 1}}");
    cr_expect_eq(ts_run_spreads(path, 1, &steps, &gauge), TS_ERR_INPUT);
    test_remove_temp(path);
}

/* CPU ranks past the cores: the cases within them summarised apart, in the table and the JSON;
 * none apart when every case fits, or on GPUs (0 cores). */
Test(validate_report, within_the_cores) {
    ts_validate_case cases[3];
    ts_validate_result r = hand_filled(cases);
    cases[2] = one_case(2, 4, L2, 0.2, 0.4, 0.4); /* -50%, on 4 ranks */
    r.n = 3;
    ts_validate_within_cores(&r, 2);
    cr_expect_eq(r.within_cores, 2);
    cr_expect_eq(r.n_within, 2, "the 1- and 2-rank cases");
    cr_expect(fabs(r.within_median_abs_error - 0.25) < 1e-12 && fabs(r.within_max_abs_error - 0.25) < 1e-12,
              "%g %g: the 4-rank case's -50%% left out", r.within_median_abs_error, r.within_max_abs_error);
    char *text = printed(&r);
    cr_expect(strstr(text, "# within the cores (at most 2 ranks): 2 layouts, median |error| 25.0%, worst 25.0%\n") !=
                  NULL, "%s", text);
    cr_expect(strstr(text, "# the other 1 run more ranks than the 2 cores") != NULL, "%s", text);
    free(text);
    cJSON *root = NULL;
    cr_assert_eq(ts_validate_json(&r, &root), TS_OK, "%s", ts_error_message());
    const cJSON *w = json_obj(root, "within_cores", "$");
    cr_expect_eq(json_num(w, "cores", "$.within_cores"), 2);
    cr_expect_eq(json_num(w, "cases", "$.within_cores"), 2);
    cr_expect(fabs(json_num(w, "max_abs_error", "$.within_cores") - 0.25) < 1e-12);
    cJSON_Delete(root);
    /* Every case within 4 cores: nothing printed apart. */
    ts_validate_within_cores(&r, 4);
    cr_expect_eq(r.n_within, 3);
    text = printed(&r);
    cr_expect(strstr(text, "within the cores") == NULL, "%s", text);
    free(text);
    /* On GPUs: no summary, in the JSON neither. */
    ts_validate_within_cores(&r, 0);
    cr_expect_eq(r.within_cores, 0);
    cr_expect(isnan(r.within_max_abs_error));
    cr_assert_eq(ts_validate_json(&r, &root), TS_OK, "%s", ts_error_message());
    cr_expect_null(cJSON_GetObjectItemCaseSensitive(root, "within_cores"));
    cJSON_Delete(root);
}

/* On GPUs the runs train bf16 mixed precision: the head line and the JSON say so. */
Test(validate_report, says_the_precision_trained) {
    ts_validate_case cases[2];
    ts_validate_result r = hand_filled(cases);
    r.bf16 = 1;
    char *text = printed(&r);
    cr_expect(strstr(text, "8 sequences of 128 tokens, bf16;") != NULL, "%s", text);
    free(text);
    cJSON *root = NULL;
    cr_assert_eq(ts_validate_json(&r, &root), TS_OK, "%s", ts_error_message());
    cr_expect_str_eq(json_str(root, "precision", "$"), "bf16");
    cJSON_Delete(root);
}
