/* plan.json: written by ts_plan_to_json, read back by ts_plan_read (same problem, same layouts in
 * order), holding every field DESIGN.md promises, and bad plans refused naming the JSON path. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "planner/plan_json.h"
#include "tests/helpers.h"

/* Searches and renders the plan; returns the printed JSON (caller frees) and the result. */
static char *plan_text(const ts_problem *pb, const char *fix, int top_k, ts_search_result *r) {
    ts_search_opts o;
    ts_search_opts_defaults(&o);
    o.top_k = top_k;
    if (fix) cr_assert_eq(ts_pins_parse("--fix", fix, &o.pins), TS_OK, "%s", ts_error_message());
    ts_error_clear();
    cr_assert_eq(ts_search(pb, &o, r), TS_OK, "%s", ts_error_message());
    cJSON *root = NULL;
    cr_assert_eq(ts_plan_to_json(pb, &o, fix, r, &root), TS_OK, "%s", ts_error_message());
    char *text = cJSON_Print(root);
    cr_assert_not_null(text);
    cJSON_Delete(root);
    return text;
}

static void round_trip(const char *model, const char *sys, int gpus, int64_t batch, int64_t seq,
                       int flash, const char *fix) {
    ts_problem pb = test_problem(model, sys, gpus, batch, seq, flash);
    ts_search_result r;
    char *text = plan_text(&pb, fix, 7, &r);
    char *path = test_write_temp(text);
    ts_problem back;
    ts_layout *ls = NULL;
    int n = -1;
    ts_error_clear();
    cr_assert_eq(ts_plan_read(path, &back, &ls, &n), TS_OK, "%s", ts_error_message());
    cr_expect_str_eq(back.model.name, pb.model.name);
    cr_expect_str_eq(back.sys.name, pb.sys.name);
    cr_expect_eq(back.gpus, pb.gpus);
    cr_expect_eq(back.train.global_batch, pb.train.global_batch);
    cr_expect_eq(back.train.seq, pb.train.seq);
    cr_expect_eq(back.train.flash_attention, pb.train.flash_attention);
    cr_expect_eq(back.train.dtype, pb.train.dtype);
    cr_expect_eq(back.params.total, pb.params.total, "embedded model re-counts the same");
    cr_expect_eq(back.usable_bytes, pb.usable_bytes, "embedded system gives the same usable memory");
    cr_assert_eq(n, r.n_best);
    for (int i = 0; i < n; i++) {
        char a[256], b[256];
        ts_layout_format(&ls[i], a, sizeof a);
        ts_layout_format(&r.best[i].layout, b, sizeof b);
        cr_expect_eq(memcmp(&ls[i], &r.best[i].layout, sizeof(ts_layout)), 0, "#%d: read %s, wrote %s",
                     i, a, b);
        /* The read-back problem evaluates the layout to the same step time. */
        ts_eval e;
        cr_assert_eq(ts_evaluate(&back, &ls[i], &e), TS_OK, "%s", ts_error_message());
        cr_expect(e.step_s == r.best[i].step_s, "#%d %s: %.17g s after the round trip, %.17g before",
                  i, a, e.step_s, r.best[i].step_s);
    }
    free(ls);
    test_remove_temp(path);
    cJSON_free(text);
    ts_search_result_free(&r);
}

Test(planner_json, plan_round_trips) {
    round_trip("llama2-7b", "h100-sxm-dgx", 16, 256, 4096, 1, NULL);
    round_trip("tiny-moe", "h100-sxm-dgx", 8, 64, 256, 1, "ep=2");
    round_trip("megatron-gpt-1.7b", "a100-80g-dgx", 32, 512, 2048, 0, "pp=2");
}

static void expect_number(const cJSON *o, const char *path, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    cr_expect(cJSON_IsNumber(v), "%s.%s: expected a number, got %s", path, key, ts_json_type_name(v));
}

/* cJSON prints 15 significant digits when they read back within DBL_EPSILON (cJSON's
 * compare_double), so numbers survive to about 2 ulp. */
static void expect_close(const cJSON *o, const char *key, double want, const char *path) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    double got = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    cr_expect(fabs(got - want) <= 4e-16 * fabs(want), "%s.%s: %.17g in JSON, %.17g in memory", path,
              key, got, want);
}

static void expect_string(const cJSON *o, const char *path, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    cr_expect(cJSON_IsString(v), "%s.%s: expected a string, got %s", path, key, ts_json_type_name(v));
}

/* The fields DESIGN.md lists for `plan --json`, with their values checked against the result. */
Test(planner_json, plan_has_every_documented_field) {
    ts_problem pb = test_problem("llama2-7b", "h100-sxm-dgx", 16, 256, 4096, 1);
    ts_search_result r;
    char *text = plan_text(&pb, "pp=2", 3, &r);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root);
    cr_expect_str_eq(cJSON_GetObjectItemCaseSensitive(root, "tessera")->valuestring, "plan");
    expect_number(root, "$", "searched");
    expect_number(root, "$", "feasible");
    expect_number(root, "$", "search_s");
    cr_expect_eq(cJSON_GetObjectItemCaseSensitive(root, "searched")->valuedouble, (double)r.searched);
    cr_expect_eq(cJSON_GetObjectItemCaseSensitive(root, "feasible")->valuedouble, (double)r.feasible);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    cr_assert(cJSON_IsArray(arr));
    cr_assert_eq(cJSON_GetArraySize(arr), r.n_best);
    static const char *const ints[] = {"dp", "tp", "pp", "cp", "ep", "sp", "zero", "mbs",
                                       "microbatches", "vpp"};
    static const char *const mems[] = {"weights", "grads", "optimizer", "activations", "buffers", "total"};
    static const char *const times[] = {"compute", "tp_comm", "cp_comm", "ep_comm",
                                        "pp_comm", "pp_bubble", "dp_comm", "optimizer"};
    for (int i = 0; i < r.n_best; i++) {
        const cJSON *o = cJSON_GetArrayItem(arr, i);
        const ts_eval *e = &r.best[i];
        char path[32], text_l[256];
        snprintf(path, sizeof path, "$.layouts[%d]", i);
        expect_string(o, path, "layout");
        ts_layout_format(&e->layout, text_l, sizeof text_l);
        cr_expect_str_eq(cJSON_GetObjectItemCaseSensitive(o, "layout")->valuestring, text_l);
        const int vals[] = {e->layout.dp, e->layout.tp, e->layout.pp, e->layout.cp, e->layout.ep,
                            e->layout.sp, e->layout.zero, e->layout.mbs, e->layout.microbatches,
                            e->layout.vpp};
        for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
            expect_number(o, path, ints[k]);
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, ints[k]);
            if (v) cr_expect_eq(v->valuedouble, (double)vals[k], "%s.%s", path, ints[k]);
        }
        expect_string(o, path, "schedule");
        expect_string(o, path, "recompute");
        cr_expect_str_eq(cJSON_GetObjectItemCaseSensitive(o, "schedule")->valuestring,
                         ts_schedule_names[e->layout.schedule]);
        cr_expect_str_eq(cJSON_GetObjectItemCaseSensitive(o, "recompute")->valuestring,
                         ts_recompute_names[e->layout.recompute]);
        const cJSON *mem = cJSON_GetObjectItemCaseSensitive(o, "memory_bytes");
        cr_assert(cJSON_IsObject(mem), "%s.memory_bytes", path);
        const double memv[] = {e->mem.weights, e->mem.grads, e->mem.optimizer, e->mem.activations,
                               e->mem.buffers, e->mem.total};
        for (size_t k = 0; k < sizeof mems / sizeof mems[0]; k++) {
            expect_number(mem, path, mems[k]);
            expect_close(mem, mems[k], memv[k], path);
        }
        expect_number(o, path, "step_s");
        expect_close(o, "step_s", e->step_s, path);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "time_s");
        cr_assert(cJSON_IsObject(t), "%s.time_s", path);
        const double tv[] = {e->time.compute, e->time.tp_comm, e->time.cp_comm, e->time.ep_comm,
                             e->time.pp_comm, e->time.pp_bubble, e->time.dp_comm, e->time.optimizer};
        for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
            expect_number(t, path, times[k]);
            expect_close(t, times[k], tv[k], path);
        }
        expect_number(o, path, "tokens_per_s");
        expect_number(o, path, "tflops_per_gpu");
        expect_number(o, path, "mfu");
        expect_close(o, "mfu", e->mfu, path);
        expect_close(o, "tokens_per_s", e->tokens_per_s, path);
        expect_close(o, "tflops_per_gpu", e->tflops_per_gpu, path);
    }
    cJSON_Delete(root);
    cJSON_free(text);
    ts_search_result_free(&r);
}

/* Rewrites a good plan with `edit` applied and expects ts_plan_read to refuse it, its message
 * naming the file and every needle. */
static void expect_bad_plan(void (*edit)(cJSON *root), const char *const *needles) {
    ts_problem pb = test_problem("tiny", "h100-sxm-dgx", 8, 64, 256, 1);
    ts_search_result r;
    char *text = plan_text(&pb, NULL, 3, &r);
    ts_search_result_free(&r);
    cJSON *root = cJSON_Parse(text);
    cJSON_free(text);
    cr_assert_not_null(root);
    edit(root);
    char *bad = cJSON_Print(root);
    cJSON_Delete(root);
    char *path = test_write_temp(bad);
    cJSON_free(bad);
    ts_problem back;
    ts_layout *ls = (ts_layout *)1;
    int n = -1;
    ts_error_clear();
    cr_expect_eq(ts_plan_read(path, &back, &ls, &n), TS_ERR_INPUT, "accepted: %s", ts_error_message());
    const char *msg = ts_error_message();
    cr_expect(strstr(msg, path) != NULL, "message \"%s\" should name the file", msg);
    for (int i = 0; needles[i]; i++)
        cr_expect(strstr(msg, needles[i]) != NULL, "message \"%s\" should mention \"%s\"", msg, needles[i]);
    cr_expect_null(ls, "no layouts on failure");
    cr_expect_eq(n, 0);
    test_remove_temp(path);
}

static void set_kind_sim(cJSON *root) {
    cJSON_ReplaceItemInObjectCaseSensitive(root, "tessera", cJSON_CreateString("sim"));
}
static void set_layout_garbage(cJSON *root) {
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "layouts"), 1);
    cJSON_ReplaceItemInObjectCaseSensitive(l, "layout", cJSON_CreateString("dp=8,tp=banana"));
}
static void set_layout_missing_key(cJSON *root) {
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "layouts"), 0);
    cJSON_ReplaceItemInObjectCaseSensitive(l, "layout", cJSON_CreateString("dp=8,tp=1"));
}
static void set_layout_wrong_gpus(cJSON *root) {
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "layouts"), 2);
    cJSON_ReplaceItemInObjectCaseSensitive(
        l, "layout",
        cJSON_CreateString("dp=4,tp=1,pp=1,cp=1,ep=1,sp=0,zero=0,mbs=1,vpp=1,sched=1f1b,recompute=none"));
}
static void set_layout_number(cJSON *root) {
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "layouts"), 0);
    cJSON_ReplaceItemInObjectCaseSensitive(l, "layout", cJSON_CreateNumber(8));
}
static void drop_tessera(cJSON *root) { cJSON_DeleteItemFromObjectCaseSensitive(root, "tessera"); }
static void set_layouts_object(cJSON *root) {
    cJSON_ReplaceItemInObjectCaseSensitive(root, "layouts", cJSON_CreateObject());
}
static void set_gpus_string(cJSON *root) {
    cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    cJSON_ReplaceItemInObjectCaseSensitive(req, "gpus", cJSON_CreateString("8"));
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

Test(planner_json, bad_plans_name_the_json_path) {
    expect_bad_plan(set_kind_sim, NEEDLES("$.tessera", "plan", "sim"));
    expect_bad_plan(drop_tessera, NEEDLES("tessera"));
    expect_bad_plan(set_layout_garbage, NEEDLES("$.layouts[1].layout", "tp=banana"));
    expect_bad_plan(set_layout_missing_key, NEEDLES("$.layouts[0].layout", "pp"));
    expect_bad_plan(set_layout_wrong_gpus, NEEDLES("$.layouts[2].layout", "8 GPUs"));
    expect_bad_plan(set_layout_number, NEEDLES("layouts[0]", "layout"));
    expect_bad_plan(set_layouts_object, NEEDLES("$.layouts", "array"));
    expect_bad_plan(set_gpus_string, NEEDLES("request", "gpus"));
}

Test(planner_json, missing_file_is_an_io_error) {
    ts_problem pb;
    ts_layout *ls = NULL;
    int n = -1;
    ts_error_clear();
    ts_status st = ts_plan_read("/nonexistent/tessera-plan.json", &pb, &ls, &n);
    cr_expect(st == TS_ERR_IO || st == TS_ERR_INPUT, "%s", ts_status_name(st));
    cr_expect(strstr(ts_error_message(), "/nonexistent/tessera-plan.json") != NULL, "%s",
              ts_error_message());
    cr_expect_null(ls);
}
