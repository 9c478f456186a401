/* Published runs that name their stack (validation/published/older-stacks.json, the stacks of
 * their era; megatron-bridge.json, NVIDIA's Megatron-Bridge performance tables): each row names
 * its stack (models/stacks/), model, system, batch and the layout fields the source publishes as
 * pins (--fix syntax); the prediction is the planner's best layout under those pins and that
 * stack. Row fields: "id", "source", "stack", "model", "vocab" (optional: the run's padded
 * vocabulary), "system", "gpus", "global_batch_seqs", "seq_len", "dtype", "pins"; optional
 * "fp8_recipe" (a --fp8-recipe name), "fp8_param_gather" (FP8 primary weights) and "partition"
 * (a --partition mode; default uniform, the even split); "measured": {"train_step_s"},
 * {"tokens_per_s_per_gpu"} (the step is global_batch_seqs · seq_len / (it · gpus)) or
 * {"hw_tflops_per_gpu"} (TFLOP/s counted with recompute, SC'21 eq. 3); MoE rows (megatron-bridge-
 * moe.json) may state their recipe's expert settings (ts_pub_moe_settings's fields), its
 * "recompute_modules" (the row's recompute is then selective; a pin saying otherwise is refused) and
 * "mem_headroom" (--mem-headroom as a fraction; 0 where the published layout needs the memory the
 * default reserve keeps free: it ran). See published.h. */
#include "planner/published.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/json.h"
#include "planner/partition.h"
#include "planner/published_cache.h"

/* The row's problem: its model (vocabulary as run), system, batch, dtype and stack. */
static ts_status row_problem(const ts_jreader *r, const cJSON *row, ts_pub_cache *cache, ts_pub_case *c,
                             ts_problem *pb, int *modules) {
    char model[64], system[64], stack[64];
    int64_t gpus, batch, seq, vocab;
    int dtype, recipe, param_gather;
    double headroom;
    TS_CHECK(ts_jr_str(r, row, "model", 1, NULL, model, sizeof model));
    TS_CHECK(ts_jr_str(r, row, "system", 1, NULL, system, sizeof system));
    TS_CHECK(ts_jr_str(r, row, "stack", 1, NULL, stack, sizeof stack));
    TS_CHECK(ts_jr_int(r, row, "gpus", 1, 1, 1 << 24, 0, &gpus));
    TS_CHECK(ts_jr_int(r, row, "global_batch_seqs", 1, 1, 1 << 30, 0, &batch));
    TS_CHECK(ts_jr_int(r, row, "seq_len", 1, 1, 1 << 27, 0, &seq));
    TS_CHECK(ts_jr_int(r, row, "vocab", 0, 0, 1 << 30, 0, &vocab));
    TS_CHECK(ts_jr_enum(r, row, "dtype", 1, ts_dtype_names, 0, &dtype));
    TS_CHECK(ts_jr_enum(r, row, "fp8_recipe", 0, ts_fp8_recipe_names, TS_FP8_DELAYED, &recipe));
    TS_CHECK(ts_jr_bool(r, row, "fp8_param_gather", 0, 0, &param_gather));
    TS_CHECK(ts_jr_num(r, row, "mem_headroom", 0, 0, 0.9, -1, &headroom));
    ts_model m;
    ts_system s;
    ts_train t;
    TS_CHECK(ts_pub_cache_model(cache, model, &m));
    if (vocab > 0) m.vocab = vocab;
    TS_CHECK(ts_pub_cache_system(cache, system, &s));
    snprintf(c->gpu, sizeof c->gpu, "%s", s.gpu_name);
    c->gemm_eff = s.gemm_eff;
    ts_train_defaults(&t);
    ts_train_set_dtype(&t, (ts_dtype)dtype);
    t.global_batch = batch;
    t.seq = seq;
    t.fp8_recipe = (ts_fp8_recipe)recipe;
    t.fp8_param_gather = param_gather;
    if (headroom >= 0) t.mem_headroom_frac = headroom;
    TS_CHECK(ts_pub_moe_settings(r, row, &m, &t));
    TS_CHECK(ts_pub_recompute_modules(r, row, &t, modules));
    TS_CHECK(ts_pub_cache_stack(cache, stack, &t.stack));
    snprintf(c->model, sizeof c->model, "%s", model);
    snprintf(c->stack, sizeof c->stack, "%s", stack);
    c->fp8 = dtype == TS_DTYPE_FP8;
    c->moe = m.moe.experts > 0;
    c->gpus = (int)gpus;
    return ts_problem_init(pb, &m, &s, &t, c->gpus);
}

/* The row's measurement into c (measured, is_tflops): step seconds, TFLOP/s per GPU, or the step
 * its tokens per second per GPU make. */
static ts_status row_measured(const ts_jreader *r, const cJSON *row, const ts_problem *pb, ts_pub_case *c) {
    static const char *const keys[] = {"train_step_s", "tokens_per_s_per_gpu", "hw_tflops_per_gpu", NULL};
    const cJSON *meas;
    ts_jreader mr;
    TS_CHECK(ts_jr_obj(r, row, "measured", 1, &meas));
    ts_jreader_child(r, "measured", 0, &mr);
    TS_CHECK(ts_jr_known_keys(&mr, meas, keys));
    int which = 0;
    while (keys[which] && !cJSON_GetObjectItemCaseSensitive(meas, keys[which])) which++;
    if (!keys[which])
        return TS_FAIL(TS_ERR_INPUT, "%s: %s: expected one of train_step_s, tokens_per_s_per_gpu, hw_tflops_per_gpu",
                       mr.file, mr.path);
    TS_CHECK(ts_jr_num(&mr, meas, keys[which], 1, 1e-6, 1e9, 0, &c->measured));
    c->is_tflops = which == 2;
    if (which == 1) c->measured = (double)pb->train.global_batch * pb->train.seq / (c->measured * c->gpus);
    return TS_OK;
}

/* The best layout under the pins, its stages split as `mode` says (the search fills res whatever
 * it returns). */
static ts_status row_search(const ts_problem *pb, const ts_pins *pins, int mode, ts_search_result *res) {
    ts_search_opts o;
    ts_search_opts_defaults(&o);
    o.top_k = 1;
    o.pins = *pins;
    ts_partition_opts po;
    ts_partition_opts_defaults(&po);
    po.mode = (ts_partition_mode)mode;
    return ts_search_partitioned(pb, &o, &po, res);
}

/* Predicts nothing (c->moe set, c->predicted 0) for a row of an MoE model when `moe_runs` is 0. */
static ts_status stack_case(const char *file, int idx, const cJSON *row, ts_pub_kind kind, int moe_runs,
                            ts_pub_cache *cache, ts_pub_case *c) {
    ts_jreader root, r;
    ts_jreader_root(&root, file);
    ts_jreader_child(&root, NULL, idx, &r);
    TS_CHECK(ts_jr_str(&r, row, "id", 1, NULL, c->id, sizeof c->id));
    c->kind = kind;
    ts_problem pb;
    int modules;
    TS_CHECK(row_problem(&r, row, cache, c, &pb, &modules));
    if (c->moe && !moe_runs) return TS_OK;
    char pins_text[256], what[300];
    TS_CHECK(ts_jr_str(&r, row, "pins", 1, NULL, pins_text, sizeof pins_text));
    snprintf(what, sizeof what, "%s: %s.pins", file, r.path);
    ts_pins pins;
    TS_CHECK(ts_pins_parse(what, pins_text, &pins));
    /* the recipe's modules are what its selective recompute does */
    if (modules && (pins.mask & (1u << TS_PIN_RECOMPUTE)) && pins.value.recompute != TS_RECOMPUTE_SELECTIVE)
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.recompute_modules: the recipe's modules need recompute=selective, the pins "
                       "say recompute=%s", file, r.path, ts_recompute_names[pins.value.recompute]);
    if (modules) ts_pins_set(&pins, TS_PIN_RECOMPUTE, TS_RECOMPUTE_SELECTIVE);
    TS_CHECK(row_measured(&r, row, &pb, c));
    int mode;
    TS_CHECK(ts_jr_enum(&r, row, "partition", 0, ts_partition_mode_names, TS_PARTITION_UNIFORM, &mode));

    ts_search_result res;
    ts_status st = row_search(&pb, &pins, mode, &res);
    if (st == TS_OK) {
        const ts_eval *e = &res.best[0];
        c->tp = e->layout.tp, c->pp = e->layout.pp, c->dp = e->layout.dp, c->cp = e->layout.cp;
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

ts_status ts_published_stacks_run(const char *path, ts_pub_kind kind, int moe_runs, ts_pub_cache *cache,
                                  ts_pub_case **cases, int *n, int *cap) {
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
        TS_CHECK_GOTO(ts_grow((void **)cases, *n, cap, sizeof **cases, "published runs"), res, exit);
        ts_pub_case *c = &(*cases)[*n];
        memset(c, 0, sizeof *c);
        TS_CHECK_GOTO(stack_case(path, idx++, row, kind, moe_runs, cache, c), res, exit);
        if (!c->moe || moe_runs) (*n)++; /* else the slot is reused */
    }
exit:
    cJSON_Delete(root);
    return res;
}
