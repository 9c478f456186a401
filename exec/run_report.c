/* The reports of a run's result on rank 0 (exec/run.h): the `tessera run --json` document, the
 * '#' table and the Chrome trace of the last step. They format what ts_run computed; nothing
 * here talks to MPI. */
#include <stdlib.h>

#include "common/json.h"
#include "exec/run.h"
#include "program/trace.h"

/* Adds the array `key` of n doubles to `o`. */
static ts_status add_doubles(cJSON *o, const char *key, const double *v, int n) {
    cJSON *arr = cJSON_CreateDoubleArray(v, n);
    if (!cJSON_AddItemToObject(o, key, arr)) {
        cJSON_Delete(arr);
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory adding %s", key);
    }
    return TS_OK;
}

/* "gauge": {"flops_per_s": [per step], "readings_flops_per_s": [per rank: [before step 0, after
 * each step]], "median_flops_per_s", "step_flop_median"}. */
static ts_status gauge_json(cJSON *o, const ts_run_result *r) {
    ts_status res = TS_OK;
    cJSON *g, *arr;
    TS_CJSON_GOTO(g = cJSON_AddObjectToObject(o, "gauge"), res, exit);
    TS_CHECK(add_doubles(g, "flops_per_s", r->speed, r->steps));
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(g, "readings_flops_per_s"), res, exit);
    for (int k = 0; k < r->world; k++) {
        cJSON *mine = cJSON_CreateDoubleArray(r->readings + (size_t)k * (r->steps + 1), r->steps + 1);
        if (!cJSON_AddItemToArray(arr, mine)) {
            cJSON_Delete(mine);
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory adding rank %d's gauge readings", k);
        }
    }
    TS_CJSON_GOTO(cJSON_AddNumberToObject(g, "median_flops_per_s", r->gauge_median), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(g, "step_flop_median", r->gauge_step_flop), res, exit);
exit:
    return res;
}

/* {the categories of ts_run_mem_names, "total"} of bytes v into parent[key] (or a new array
 * element when key is NULL), plus "rank" and "stage" first when rank >= 0. */
static ts_status memory_json(cJSON *parent, const char *key, const double *v, int rank, int stage) {
    ts_status res = TS_OK;
    cJSON *m = key ? cJSON_AddObjectToObject(parent, key) : cJSON_CreateObject();
    TS_CJSON_GOTO(m, res, fail);
    if (!key && !cJSON_AddItemToArray(parent, m)) {
        cJSON_Delete(m);
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory adding a rank's memory");
    }
    if (rank >= 0) {
        TS_CJSON_GOTO(cJSON_AddNumberToObject(m, "rank", rank), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(m, "stage", stage), res, fail);
    }
    double sum = 0;
    for (int k = 0; k < TS_RUN_MEM_KINDS; k++) {
        TS_CJSON_GOTO(cJSON_AddNumberToObject(m, ts_run_mem_names[k], v[k]), res, fail);
        sum += v[k];
    }
    TS_CJSON_GOTO(cJSON_AddNumberToObject(m, "total", sum), res, fail);
fail:
    return res;
}

/* "step_s": {"median", "p10", "p90", "each"} and "losses". */
static ts_status steps_json(cJSON *o, const ts_run_result *r) {
    ts_status res = TS_OK;
    cJSON *ss, *ls;
    TS_CJSON_GOTO(ss = cJSON_AddObjectToObject(o, "step_s"), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(ss, "median", r->median_s), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(ss, "p10", r->p10_s), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(ss, "p90", r->p90_s), res, exit);
    TS_CHECK(add_doubles(ss, "each", r->step_s, r->steps));
    TS_CJSON_GOTO(ls = cJSON_AddArrayToObject(o, "losses"), res, exit);
    for (int s = 0; s < r->steps; s++) {
        cJSON *n = cJSON_CreateNumber(r->losses[s]);
        TS_CJSON_GOTO(n, res, exit);
        if (!cJSON_AddItemToArray(ls, n)) {
            cJSON_Delete(n);
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory adding a loss");
        }
    }
exit:
    return res;
}

/* "memory_bytes" (the worst rank's), "memory_bytes_by_rank" (stages differ: the embedding, the
 * head, the layers they hold) and "planner_memory_bytes". */
static ts_status memories_json(cJSON *o, const ts_run_result *r) {
    ts_status res = TS_OK;
    cJSON *byrank;
    TS_CHECK(memory_json(o, "memory_bytes", r->mem_worst, -1, 0));
    TS_CJSON_GOTO(byrank = cJSON_AddArrayToObject(o, "memory_bytes_by_rank"), res, exit);
    for (int k = 0; k < r->world; k++)
        TS_CHECK(memory_json(byrank, NULL, r->mem + (size_t)TS_RUN_MEM_KINDS * k, k, ts_rank_coords(&r->layout, k).pp));
exit:
    return res;
}

static ts_status run_json(cJSON *o, const ts_run_result *r) {
    ts_status res = TS_OK;
    char text[256];
    cJSON *ks;
    ts_layout_format(&r->layout, text, sizeof text);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "layout", text), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "model", r->pb.model.name), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "dtype", ts_dtype_names[r->pb.train.dtype]), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "plan_dtype", ts_dtype_names[r->plan_dtype]), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "ranks", r->world), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "steps", r->steps), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "warmup", r->warmup), res, exit);
    TS_CHECK(steps_json(o, r));
    TS_CJSON_GOTO(ks = cJSON_AddObjectToObject(o, "kind_s"), res, exit);
    for (int k = 0; k < TS_OP_KIND_COUNT; k++)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(ks, ts_op_kind_names[k], r->kind_s[k]), res, exit);
    TS_CHECK(memories_json(o, r));
    if (r->moe_load_cv >= 0) TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "moe_load_cv", r->moe_load_cv), res, exit);
    if (r->speed) TS_CHECK(gauge_json(o, r));
    if (r->has_plan_eval) {
        const ts_memory *pm = &r->plan_eval.mem;
        double v[TS_RUN_MEM_KINDS] = {pm->weights, pm->grads, pm->optimizer, pm->activations, pm->buffers};
        TS_CHECK(memory_json(o, "planner_memory_bytes", v, -1, 0));
    }
exit:
    return res;
}

ts_status ts_run_result_json(const ts_run_result *r, cJSON **out) {
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory for the run's JSON");
    ts_status res = run_json(o, r);
    if (res != TS_OK) {
        cJSON_Delete(o);
        return res;
    }
    *out = o;
    return TS_OK;
}

ts_status ts_run_result_print(FILE *f, const ts_run_result *r) {
    char text[256];
    ts_layout_format(&r->layout, text, sizeof text);
    const double *w = r->mem_worst;
    fprintf(f, "# tessera run: %s, %s, %d ranks, %d steps (%d warm-up)\n", r->pb.model.name, text, r->world,
            r->steps, r->warmup);
    fprintf(f, "# loss: first %.6f, last %.6f\n", r->losses[0], r->losses[r->steps - 1]);
    fprintf(f, "# step: median %.4f s, p10 %.4f s, p90 %.4f s\n", r->median_s, r->p10_s, r->p90_s);
    fprintf(f, "# time by op kind (last step, mean over ranks):");
    for (int k = 0; k < TS_OP_KIND_COUNT; k++) fprintf(f, " %s %.4f s", ts_op_kind_names[k], r->kind_s[k]);
    fprintf(f, "\n# memory per rank (peak, worst rank): weights %.2f MB, grads %.2f MB, optimizer %.2f MB, "
               "activations %.2f MB, buffers %.2f MB\n",
            w[0] / 1e6, w[1] / 1e6, w[2] / 1e6, w[3] / 1e6, w[4] / 1e6);
    if (r->speed)
        fprintf(f, "# speed gauge (exec/speed_gauge.h): %.2f GFLOP/s per core, median of the measured steps "
                   "(%.2f to %.2f)\n", r->gauge_median / 1e9, r->gauge_lo / 1e9, r->gauge_hi / 1e9);
    if (r->moe_load_cv >= 0)
        fprintf(f, "# MoE routing: tokens per expert vary by %.3f of the even share (coefficient of "
                   "variation; the model's moe.load_cv)\n", r->moe_load_cv);
    return TS_OK;
}

ts_status ts_run_result_trace(const ts_run_result *r, const char *path) {
    ts_rank_spans *ranks = calloc((size_t)r->world, sizeof *ranks);
    if (ranks == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the trace");
    for (int k = 0; k < r->world; k++) {
        ranks[k].rank = k;
        ranks[k].stage = ts_rank_coords(&r->layout, k).pp;
        ranks[k].spans = r->spans + r->span_off[k];
    }
    ts_step_spans s = {.n_ranks = r->world, .ranks = ranks, .step_s = r->step_s[r->steps - 1],
                       .gauge_flops_per_s = r->speed ? r->speed[r->steps - 1] : 0};
    ts_status res = ts_trace_write(path, "run", &r->pb, &r->prog, &s);
    free(ranks);
    return res;
}
