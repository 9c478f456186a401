/* exec/run.h without MPI: the reports of a hand-filled run result (the `tessera run --json`
 * document's fields and values, the table byte for byte, the optional MoE, gauge and planner
 * parts), the options' defaults and the fault injection read from the environment, and
 * common/stats.h's ts_quantile that the step-time figures use. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"
#include "exec/run.h"
#include "tests/helpers.h"

enum { WORLD = 2, STEPS = 3 };

static float losses[STEPS] = {6.5f, 6.25f, 6.0f};
static double step_s[STEPS] = {0.5, 0.25, 0.375};
static double mem[WORLD * TS_RUN_MEM_KINDS] = {1e6, 2e6, 3e6, 4e6, 5e6, 1e6, 2e6, 3e6, 6e6, 5e6};
static double speed[STEPS] = {4e10, 5e10, 6e10};
static double readings[WORLD * (STEPS + 1)] = {4e10, 4e10, 5e10, 6e10, 4e10, 5e10, 5e10, 6e10};

/* Two DP ranks of tiny, three steps of which one warm-up; dense, no gauge, no planner memory. */
static ts_run_result hand_filled(void) {
    ts_run_result r;
    ts_run_result_init(&r);
    r.pb = test_problem("tiny", "cpu-localhost", WORLD, 8, 64, 1);
    cr_assert_eq(ts_layout_parse("test", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=4,vpp=1,sched=1f1b,recompute=none",
                                 &r.layout), TS_OK, "%s", ts_error_message());
    r.plan_dtype = TS_DTYPE_BF16;
    r.world = WORLD, r.steps = STEPS, r.warmup = 1;
    r.losses = losses, r.step_s = step_s, r.mem = mem;
    r.median_s = 0.3125, r.p10_s = 0.2625, r.p90_s = 0.3625;
    for (int k = 0; k < TS_OP_KIND_COUNT; k++) r.kind_s[k] = 0.01 * (k + 1);
    double worst[TS_RUN_MEM_KINDS] = {1e6, 2e6, 3e6, 6e6, 5e6};
    memcpy(r.mem_worst, worst, sizeof worst);
    return r;
}

static double num_at(const cJSON *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *at = o;
    for (char *save = NULL, *key = strtok_r(buf, ".", &save); key; key = strtok_r(NULL, ".", &save))
        at = cJSON_GetObjectItemCaseSensitive(at, key);
    cr_assert(cJSON_IsNumber(at), "%s is not a number", path);
    return at->valuedouble;
}

Test(run_report, json_holds_what_the_result_says) {
    ts_run_result r = hand_filled();
    cJSON *doc = NULL;
    cr_assert_eq(ts_run_result_json(&r, &doc), TS_OK, "%s", ts_error_message());
    cr_expect_str_eq(cJSON_GetObjectItem(doc, "layout")->valuestring,
                     "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=4,vpp=1,sched=1f1b,recompute=none");
    cr_expect_str_eq(cJSON_GetObjectItem(doc, "model")->valuestring, "tiny");
    cr_expect_str_eq(cJSON_GetObjectItem(doc, "plan_dtype")->valuestring, "bf16");
    cr_expect_eq(num_at(doc, "ranks"), WORLD);
    cr_expect_eq(num_at(doc, "steps"), STEPS);
    cr_expect_eq(num_at(doc, "warmup"), 1);
    cr_expect_eq(num_at(doc, "step_s.median"), 0.3125);
    cr_expect_eq(num_at(doc, "step_s.p10"), 0.2625);
    cr_expect_eq(num_at(doc, "step_s.p90"), 0.3625);
    const cJSON *each = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "step_s"), "each");
    const cJSON *ls = cJSON_GetObjectItem(doc, "losses");
    cr_assert(cJSON_GetArraySize(each) == STEPS && cJSON_GetArraySize(ls) == STEPS);
    for (int s = 0; s < STEPS; s++) {
        cr_expect_eq(cJSON_GetArrayItem(each, s)->valuedouble, step_s[s]);
        cr_expect_eq(cJSON_GetArrayItem(ls, s)->valuedouble, losses[s]);
    }
    char path[64];
    for (int k = 0; k < TS_OP_KIND_COUNT; k++) {
        snprintf(path, sizeof path, "kind_s.%s", ts_op_kind_names[k]);
        cr_expect_eq(num_at(doc, path), 0.01 * (k + 1), "%s", path);
    }
    cr_expect_eq(num_at(doc, "memory_bytes.activations"), 6e6);
    cr_expect_eq(num_at(doc, "memory_bytes.total"), 17e6);
    const cJSON *byrank = cJSON_GetObjectItem(doc, "memory_bytes_by_rank");
    cr_assert_eq(cJSON_GetArraySize(byrank), WORLD);
    for (int k = 0; k < WORLD; k++) {
        const cJSON *m = cJSON_GetArrayItem(byrank, k);
        cr_expect_eq(num_at(m, "rank"), k);
        cr_expect_eq(num_at(m, "stage"), 0);
        for (int c = 0; c < TS_RUN_MEM_KINDS; c++)
            cr_expect_eq(num_at(m, ts_run_mem_names[c]), mem[TS_RUN_MEM_KINDS * k + c]);
    }
    /* Dense, no gauge, no planner evaluation: their keys are absent. */
    static const char *const absent[] = {"moe_load_cv", "gauge", "planner_memory_bytes"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        cr_expect_null(cJSON_GetObjectItem(doc, absent[i]), "%s present", absent[i]);
    cJSON_Delete(doc);
}

Test(run_report, json_optional_parts) {
    ts_run_result r = hand_filled();
    r.moe_load_cv = 0.25;
    r.speed = speed, r.readings = readings;
    r.gauge_median = 5.5e10, r.gauge_lo = 5e10, r.gauge_hi = 6e10, r.gauge_step_flop = 1.5e10;
    r.has_plan_eval = 1;
    r.plan_eval.mem = (ts_memory){.weights = 1, .grads = 2, .optimizer = 4, .activations = 8, .buffers = 16};
    cJSON *doc = NULL;
    cr_assert_eq(ts_run_result_json(&r, &doc), TS_OK, "%s", ts_error_message());
    cr_expect_eq(num_at(doc, "moe_load_cv"), 0.25);
    cr_expect_eq(num_at(doc, "gauge.median_flops_per_s"), 5.5e10);
    cr_expect_eq(num_at(doc, "gauge.step_flop_median"), 1.5e10);
    const cJSON *g = cJSON_GetObjectItem(doc, "gauge");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(g, "flops_per_s")), STEPS);
    const cJSON *per_rank = cJSON_GetObjectItem(g, "readings_flops_per_s");
    cr_assert_eq(cJSON_GetArraySize(per_rank), WORLD);
    for (int k = 0; k < WORLD; k++)
        for (int s = 0; s <= STEPS; s++)
            cr_expect_eq(cJSON_GetArrayItem(cJSON_GetArrayItem(per_rank, k), s)->valuedouble,
                         readings[k * (STEPS + 1) + s]);
    cr_expect_eq(num_at(doc, "planner_memory_bytes.buffers"), 16);
    cr_expect_eq(num_at(doc, "planner_memory_bytes.total"), 31);
    cJSON_Delete(doc);
}

/* The table into a string. */
static char *printed(const ts_run_result *r) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cr_assert_eq(ts_run_result_print(f, r), TS_OK, "%s", ts_error_message());
    fclose(f);
    return text;
}

Test(run_report, table) {
    ts_run_result r = hand_filled();
    char *text = printed(&r);
    cr_expect_str_eq(text,
                     "# tessera run: tiny, dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=4,vpp=1,sched=1f1b,recompute=none, "
                     "2 ranks, 3 steps (1 warm-up)\n"
                     "# loss: first 6.500000, last 6.000000\n"
                     "# step: median 0.3125 s, p10 0.2625 s, p90 0.3625 s\n"
                     "# time by op kind (last step, mean over ranks): gemm 0.0100 s attention 0.0200 s elementwise "
                     "0.0300 s optimizer 0.0400 s collective 0.0500 s send 0.0600 s recv 0.0700 s\n"
                     "# memory per rank (peak, worst rank): weights 1.00 MB, grads 2.00 MB, optimizer 3.00 MB, "
                     "activations 6.00 MB, buffers 5.00 MB\n");
    free(text);
    r.moe_load_cv = 0.25;
    r.speed = speed, r.readings = readings;
    r.gauge_median = 5.5e10, r.gauge_lo = 5e10, r.gauge_hi = 6e10;
    text = printed(&r);
    const char *gauge = find_line(text, "# speed gauge");
    cr_assert_not_null(gauge, "%s", text);
    cr_expect(starts_with(gauge, "# speed gauge (exec/speed_gauge.h): 55.00 GFLOP/s per core, median of the "
                                 "measured steps (50.00 to 60.00)\n# MoE routing: tokens per expert vary by 0.250 "
                                 "of the even share"), "%s", gauge);
    free(text);
}

Test(run_report, options) {
    ts_run_opts o;
    ts_run_opts_defaults(&o);
    cr_expect_eq(o.steps, 10);
    cr_expect_eq(o.warmup, 2);
    cr_expect_eq(o.timeout_s, 1800);
    cr_expect_eq(o.fault.rank, -1);
    cr_expect(o.params == NULL && o.log == stderr && !o.log_steps);
    setenv("TESSERA_FAULT_RANK", "3", 1);
    unsetenv("TESSERA_FAULT_STEP");
    setenv("TESSERA_FAULT_MODE", "stop", 1);
    ts_run_fault_from_env(&o.fault);
    cr_expect(o.fault.rank == 3 && o.fault.step == 0 && strcmp(o.fault.mode, "stop") == 0);
    unsetenv("TESSERA_FAULT_RANK");
    unsetenv("TESSERA_FAULT_MODE");
    ts_run_fault_from_env(&o.fault);
    cr_expect(o.fault.rank == -1 && o.fault.mode == NULL);
}

Test(run_report, check_refuses_what_the_trainer_refuses) {
    ts_run_opts o;
    ts_run_opts_defaults(&o);
    o.pb = test_problem("tiny", "cpu-localhost", 2, 8, 64, 1);
    cr_assert_eq(ts_layout_parse("test", "dp=2,tp=1,pp=1,cp=1,ep=1,sp=0,zero=1,mbs=4,vpp=1,sched=1f1b,recompute=none",
                                 &o.layout), TS_OK);
    cr_expect_eq(ts_run_check(&o), TS_OK, "%s", ts_error_message());
    cr_assert_eq(ts_layout_parse("test", "dp=1,tp=1,pp=2,cp=1,ep=1,sp=0,zero=2,mbs=4,vpp=1,sched=zb-h1,recompute=none",
                                 &o.layout), TS_OK);
    cr_expect_eq(ts_run_check(&o), TS_ERR_INPUT, "ZB-H1 with ZeRO-2 is refused");
}

/* ts_quantile: linear between the nearest ranks, the ends exact. */
Test(run_report, quantile) {
    double v[] = {1, 2, 4, 8};
    cr_expect_eq(ts_quantile(v, 4, 0), 1);
    cr_expect_eq(ts_quantile(v, 4, 1), 8);
    cr_expect_eq(ts_quantile(v, 4, 0.5), 3);
    cr_expect(fabs(ts_quantile(v, 4, 0.9) - 6.8) < 1e-12, "p90 %g", ts_quantile(v, 4, 0.9));
    cr_expect_eq(ts_quantile(v, 1, 0.5), 1);
    cr_expect_eq(ts_quantile(v, 0, 0.5), 0);
}
