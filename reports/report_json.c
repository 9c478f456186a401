/* The report's JSON form (schema in report.h): every number the pages show. */
#include "reports/report.h"

#include <string.h>

#include "common/json.h"
#include "planner/plan_json.h"

#define NUM(obj, key, v) TS_CJSON_GOTO(cJSON_AddNumberToObject((obj), (key), (v)), res, fail)
#define STR(obj, key, v) TS_CJSON_GOTO(cJSON_AddStringToObject((obj), (key), (v)), res, fail)
#define BOOL(obj, key, v) TS_CJSON_GOTO(cJSON_AddBoolToObject((obj), (key), (v)), res, fail)
#define OBJ(var, parent, key) TS_CJSON_GOTO((var) = cJSON_AddObjectToObject((parent), (key)), res, fail)
#define ARR(var, parent, key) TS_CJSON_GOTO((var) = cJSON_AddArrayToObject((parent), (key)), res, fail)

/* Appends a new object to `arr`; NULL when out of memory. */
static cJSON *push_object(cJSON *arr) {
    cJSON *o = cJSON_CreateObject();
    if (o) cJSON_AddItemToArray(arr, o);
    return o;
}

static ts_status question_json(const ts_report *r, cJSON *root) {
    ts_status res = TS_OK;
    const ts_problem *pb = &r->pb;
    const ts_eval *best = &r->layouts[0];
    char text[256];
    cJSON *q, *a;
    OBJ(q, root, "question");
    STR(q, "model", pb->model.name);
    STR(q, "system", pb->sys.name);
    STR(q, "gpu", pb->sys.gpu_name);
    NUM(q, "gpus", pb->gpus);
    NUM(q, "global_batch", (double)pb->train.global_batch);
    NUM(q, "seq", (double)pb->train.seq);
    STR(q, "dtype", ts_dtype_names[pb->train.dtype]);
    BOOL(q, "flash_attention", pb->train.flash_attention);
    NUM(q, "layouts", r->n_layouts);
    OBJ(a, root, "answer");
    ts_layout_format(&best->layout, text, sizeof text);
    STR(a, "layout", text);
    NUM(a, "step_s", best->step_s);
    NUM(a, "tokens_per_s", best->tokens_per_s);
    NUM(a, "tflops_per_gpu", best->tflops_per_gpu);
    NUM(a, "mfu", best->mfu);
    NUM(a, "memory_bytes", best->mem.total);
    NUM(a, "usable_bytes", pb->usable_bytes);
    NUM(a, "band_lo_s", r->band_lo_s);
    NUM(a, "band_hi_s", r->band_hi_s);
    BOOL(a, "band_measured_on_gpu", r->band_on_gpu);
    STR(a, "band_gpus", r->band_gpus);
    BOOL(a, "tight", r->tight);
    STR(a, "stack", pb->train.stack.name);
    if (r->tie[0]) STR(a, "tie", r->tie);
    if (r->against[0]) STR(a, "against", r->against);
fail:
    return res;
}

static ts_status kinds_json(cJSON *parent, const char *key, const double *kind_s, double divide) {
    ts_status res = TS_OK;
    cJSON *k;
    OBJ(k, parent, key);
    for (int i = 0; i < TS_OP_KIND_COUNT; i++) NUM(k, ts_op_kind_names[i], kind_s[i] / divide);
fail:
    return res;
}

static ts_status simulation_json(const ts_report *r, cJSON *root) {
    ts_status res = TS_OK;
    char text[256];
    cJSON *s, *stages;
    OBJ(s, root, "simulation");
    ts_layout_format(&r->prog.layout, text, sizeof text);
    STR(s, "layout", text);
    NUM(s, "step_s", r->sim.step_s);
    NUM(s, "closed_form_step_s", r->layouts[0].step_s);
    NUM(s, "bubble_fraction", r->sim.bubble_fraction);
    NUM(s, "microbatches", r->prog.layout.microbatches);
    NUM(s, "ops", (double)r->prog.total_ops);
    ARR(stages, s, "stages");
    for (int i = 0; i < r->prog.pp; i++) {
        cJSON *o = push_object(stages);
        TS_CJSON_GOTO(o, res, fail);
        NUM(o, "stage", i);
        NUM(o, "busy_s", r->sim.stages[i].busy_s);
        NUM(o, "bubble_s", r->sim.stages[i].bubble_s);
        NUM(o, "exposed_comm_s", r->sim.stages[i].exposed_comm_s);
    }
    TS_CHECK_GOTO(kinds_json(s, "kind_s_per_rank", r->sim.kind_s, r->prog.pp), res, fail);
fail:
    return res;
}

static ts_status capacity_json(const ts_report *r, cJSON *root) {
    ts_status res = TS_OK;
    const ts_capacity *c = &r->capacity;
    cJSON *o;
    OBJ(o, root, "capacity");
    NUM(o, "tokens", c->tokens);
    NUM(o, "tokens_per_s", c->tokens_per_s);
    NUM(o, "train_s", c->train_s);
    NUM(o, "train_days", c->train_days);
    NUM(o, "gpu_hours", c->gpu_hours);
    NUM(o, "price_per_gpu_hour", r->opts.price_per_gpu_hour);
    BOOL(o, "price_is_default", r->opts.price_is_default);
    NUM(o, "cost_usd", c->cost_usd);
    if (r->pb.sys.power_w > 0) {
        NUM(o, "power_w", r->pb.sys.power_w);
        NUM(o, "energy_kwh", c->energy_kwh);
    }
fail:
    return res;
}

static ts_status measured_json(const ts_report *r, cJSON *root) {
    ts_status res = TS_OK;
    const ts_run_summary *m = &r->run;
    char best[256];
    ts_layout_format(&r->layouts[0].layout, best, sizeof best);
    cJSON *o, *s;
    OBJ(o, root, "measured");
    STR(o, "file", r->run_file);
    STR(o, "layout", m->layout);
    BOOL(o, "same_layout", strcmp(m->layout, best) == 0);
    if (m->ranks) NUM(o, "ranks", m->ranks);
    if (m->steps) NUM(o, "steps", m->steps);
    OBJ(s, o, "step_s");
    NUM(s, "median", m->step_median_s);
    NUM(s, "p10", m->step_p10_s);
    NUM(s, "p90", m->step_p90_s);
    NUM(o, "loss_first", m->loss_first);
    NUM(o, "loss_last", m->loss_last);
    TS_CHECK_GOTO(kinds_json(o, "kind_s_per_rank", m->kind_s, 1), res, fail);
    /* (simulated − measured) / measured per kind, the kinds the run timed (the HTML's column). */
    cJSON *err;
    OBJ(err, o, "kind_error");
    for (int k = 0; k < TS_OP_KIND_COUNT; k++)
        if (m->kind_s[k] > 0) NUM(err, ts_op_kind_names[k], (r->sim.kind_s[k] / r->prog.pp - m->kind_s[k]) / m->kind_s[k]);
    if (r->has_run_trace) STR(o, "trace", r->run_trace_file);
fail:
    return res;
}

static ts_status figures_json(cJSON *obj, const ts_report_figure *f, int n) {
    ts_status res = TS_OK;
    for (int i = 0; i < n; i++) NUM(obj, f[i].key, f[i].value);
fail:
    return res;
}

static ts_status assumptions_json(const ts_report *r, cJSON *root) {
    ts_status res = TS_OK;
    ts_report_figure figs[TS_REPORT_MAX_FIGURES];
    cJSON *a, *sys, *tr, *pts, *src;
    OBJ(a, root, "assumptions");
    OBJ(sys, a, "system");
    STR(sys, "name", r->pb.sys.name);
    STR(sys, "gpu", r->pb.sys.gpu_name);
    STR(sys, "source", r->pb.sys.source);
    TS_CHECK_GOTO(figures_json(sys, figs, ts_report_system_figures(r, figs)), res, fail);
    ARR(pts, sys, "gemm_efficiency_points");
    for (int i = 0; i < r->pb.sys.gemm_eff.n; i++) {
        double pair[2] = {r->pb.sys.gemm_eff.flops[i], r->pb.sys.gemm_eff.eff[i]};
        cJSON *p = cJSON_CreateDoubleArray(pair, 2);
        TS_CJSON_GOTO(p, res, fail);
        cJSON_AddItemToArray(pts, p);
    }
    OBJ(tr, a, "training");
    STR(tr, "dtype", ts_dtype_names[r->pb.train.dtype]);
    BOOL(tr, "flash_attention", r->pb.train.flash_attention);
    TS_CHECK_GOTO(figures_json(tr, figs, ts_report_training_figures(r, figs)), res, fail);
    ARR(src, a, "sources");
    for (int i = 0; ts_report_sources[i]; i++) {
        cJSON *s = cJSON_CreateString(ts_report_sources[i]);
        TS_CJSON_GOTO(s, res, fail);
        cJSON_AddItemToArray(src, s);
    }
fail:
    return res;
}

ts_status ts_report_to_json(const ts_report *r, cJSON **out) {
    ts_status res = TS_OK;
    cJSON *root = cJSON_CreateObject(), *arr;
    TS_CJSON_GOTO(root, res, fail);
    STR(root, "tessera", "report");
    NUM(root, "version", 1);
    STR(root, "plan", r->plan_file);
    TS_CHECK_GOTO(question_json(r, root), res, fail);
    ARR(arr, root, "layouts");
    for (int i = 0; i < r->n_layouts; i++) {
        cJSON *e = ts_eval_to_json(&r->layouts[i], i + 1);
        TS_CJSON_GOTO(e, res, fail);
        cJSON_AddItemToArray(arr, e);
    }
    TS_CHECK_GOTO(simulation_json(r, root), res, fail);
    TS_CHECK_GOTO(capacity_json(r, root), res, fail);
    if (r->has_run) TS_CHECK_GOTO(measured_json(r, root), res, fail);
    TS_CHECK_GOTO(assumptions_json(r, root), res, fail);
    *out = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    *out = NULL;
    return res;
}
