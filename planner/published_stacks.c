/* Published runs on the software stacks of their era (validation/published/older-stacks.json):
 * each row names its stack (models/stacks/), model, system, batch and the layout fields the
 * source publishes as pins (--fix syntax); the prediction is the planner's best layout under
 * those pins and that stack. Row fields: "id", "source", "stack", "model", "vocab" (optional: the
 * run's padded vocabulary), "system", "gpus", "global_batch_seqs", "seq_len", "dtype", "pins",
 * "measured": {"train_step_s"} or {"hw_tflops_per_gpu"} (TFLOP/s counted with recompute, SC'21
 * eq. 3). See published.h. */
#include "planner/published.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "planner/published_cache.h"

/* The row's problem: its model (vocabulary as run), system, batch, dtype and stack. */
static ts_status row_problem(const ts_jreader *r, const cJSON *row, ts_pub_cache *cache, ts_pub_case *c,
                             ts_problem *pb) {
    char model[64], system[64], stack[64];
    int64_t gpus, batch, seq, vocab;
    int dtype;
    TS_CHECK(ts_jr_str(r, row, "model", 1, NULL, model, sizeof model));
    TS_CHECK(ts_jr_str(r, row, "system", 1, NULL, system, sizeof system));
    TS_CHECK(ts_jr_str(r, row, "stack", 1, NULL, stack, sizeof stack));
    TS_CHECK(ts_jr_int(r, row, "gpus", 1, 1, 1 << 24, 0, &gpus));
    TS_CHECK(ts_jr_int(r, row, "global_batch_seqs", 1, 1, 1 << 30, 0, &batch));
    TS_CHECK(ts_jr_int(r, row, "seq_len", 1, 1, 1 << 27, 0, &seq));
    TS_CHECK(ts_jr_int(r, row, "vocab", 0, 0, 1 << 30, 0, &vocab));
    TS_CHECK(ts_jr_enum(r, row, "dtype", 1, ts_dtype_names, 0, &dtype));
    ts_model m;
    ts_system s;
    ts_train t;
    TS_CHECK(ts_pub_cache_model(cache, model, &m));
    if (vocab > 0) m.vocab = vocab;
    TS_CHECK(ts_pub_cache_system(cache, system, &s));
    snprintf(c->gpu, sizeof c->gpu, "%s", s.gpu_name);
    ts_train_defaults(&t);
    ts_train_set_dtype(&t, (ts_dtype)dtype);
    t.global_batch = batch;
    t.seq = seq;
    TS_CHECK(ts_pub_cache_stack(cache, stack, &t.stack));
    snprintf(c->model, sizeof c->model, "%s", model);
    snprintf(c->stack, sizeof c->stack, "%s", stack);
    c->gpus = (int)gpus;
    return ts_problem_init(pb, &m, &s, &t, c->gpus);
}

static ts_status stack_case(const char *file, int idx, const cJSON *row, ts_pub_cache *cache, ts_pub_case *c) {
    ts_jreader root, r, mr;
    ts_jreader_root(&root, file);
    ts_jreader_child(&root, NULL, idx, &r);
    TS_CHECK(ts_jr_str(&r, row, "id", 1, NULL, c->id, sizeof c->id));
    c->kind = TS_PUB_OLDER_STACK;
    ts_problem pb;
    TS_CHECK(row_problem(&r, row, cache, c, &pb));
    char pins_text[256], what[300];
    TS_CHECK(ts_jr_str(&r, row, "pins", 1, NULL, pins_text, sizeof pins_text));
    snprintf(what, sizeof what, "%s: %s.pins", file, r.path);
    ts_pins pins;
    TS_CHECK(ts_pins_parse(what, pins_text, &pins));
    const cJSON *meas;
    TS_CHECK(ts_jr_obj(&r, row, "measured", 1, &meas));
    ts_jreader_child(&r, "measured", 0, &mr);
    c->is_tflops = cJSON_GetObjectItemCaseSensitive(meas, "hw_tflops_per_gpu") != NULL;
    TS_CHECK(ts_jr_num(&mr, meas, c->is_tflops ? "hw_tflops_per_gpu" : "train_step_s", 1, 1e-6, 1e6, 0,
                       &c->measured));

    ts_search_opts o;
    ts_search_opts_defaults(&o);
    o.top_k = 1;
    o.pins = pins;
    ts_search_result res;
    ts_status st = ts_search(&pb, &o, &res);
    if (st == TS_OK) {
        const ts_eval *e = &res.best[0];
        c->tp = e->layout.tp, c->pp = e->layout.pp, c->dp = e->layout.dp;
        c->predicted = c->is_tflops ? e->hw_tflops_per_gpu : e->step_s;
        ts_layout_format(&e->layout, c->layout, sizeof c->layout);
    }
    if (st == TS_ERR_INFEASIBLE) { /* a miss of the memory model, reported as such */
        snprintf(c->layout, sizeof c->layout, "does not fit: %.200s", res.reason);
        ts_error_clear();
        c->unfit = 1;
        ts_search_result_free(&res);
        return TS_OK;
    }
    ts_search_result_free(&res);
    TS_CHECK_CTX(st, "%s: %s (%s)", file, r.path, c->id);
    c->error = (c->predicted - c->measured) / c->measured;
    c->step_error = c->is_tflops ? c->measured / c->predicted - 1 : c->error;
    return TS_OK;
}

ts_status ts_published_stacks_run(const char *path, ts_pub_cache *cache, ts_pub_case **cases, int *n, int *cap) {
    cJSON *root = NULL;
    ts_status res = TS_OK;
    TS_CHECK(ts_json_load_file(path, &root));
    if (!cJSON_IsArray(root)) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $: expected an array of runs, got %s", path, ts_json_type_name(root));
        goto exit;
    }
    const cJSON *row;
    int idx = 0;
    cJSON_ArrayForEach(row, root) {
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 16;
            ts_pub_case *grown = realloc(*cases, (size_t)*cap * sizeof **cases);
            TS_ALLOC_GOTO(grown, res, exit);
            *cases = grown;
        }
        ts_pub_case *c = &(*cases)[*n];
        memset(c, 0, sizeof *c);
        TS_CHECK_GOTO(stack_case(path, idx++, row, cache, c), res, exit);
        (*n)++;
    }
exit:
    cJSON_Delete(root);
    return res;
}
