/* Problem set-up and one-layout evaluation (see problem.h). */
#include <stdio.h>

#include "planner/cost.h"
#include "planner/memory_exec.h"
#include "planner/problem.h"
#include "program/schedule.h"
#include "planner/stack_rules.h"
#include "planner/stages.h"

ts_status ts_problem_init(ts_problem *pb, const ts_model *m, const ts_system *s,
                          const ts_train *t, int gpus) {
    if (gpus < 1 || gpus > (1 << 24))
        return TS_FAIL(TS_ERR_INPUT, "--gpus: expected an integer in [1, %d], got %d", 1 << 24, gpus);
    if (t->global_batch < 1 || t->global_batch > (1 << 30))
        return TS_FAIL(TS_ERR_INPUT, "--global-batch: expected an integer in [1, %d], got %lld",
                       1 << 30, (long long)t->global_batch);
    if (t->seq < 1 || ts_seq_extends(m, t->seq) < 0)
        return TS_FAIL(TS_ERR_INPUT, "--seq: expected an integer in [1, %lld] (%s's max_seq: its positions "
                       "are a learned table), got %lld", (long long)m->max_seq, m->name, (long long)t->seq);
    if (s->peak_flops[t->dtype] <= 0)
        return TS_FAIL(TS_ERR_INPUT, "--dtype %s: %s has no %s peak in its system file",
                       ts_dtype_names[t->dtype], s->name, ts_dtype_names[t->dtype]);
    if (t->dtype == TS_DTYPE_FP8 && t->fp8_recipe == TS_FP8_MXFP8 && !s->mxfp8)
        return TS_FAIL(TS_ERR_INPUT, "--fp8-recipe mxfp8: %s has no MXFP8 tensor cores (gpu.mxfp8 in its system file); "
                       "use delayed or tensorwise", s->name);
    char why[256];
    if (ts_recompute_modules_invalid(m, t, why, sizeof why))
        return TS_FAIL(TS_ERR_INPUT, "--recompute-modules: %s", why);
    *pb = (ts_problem){.model = *m, .sys = *s, .train = *t, .gpus = gpus};
    ts_model_params(m, &pb->params);
    TS_CHECK(ts_stack_apply(pb));
    pb->compute_scale = ts_compute_scale(s, gpus) * ts_lockstep_scale(s, gpus, 0);

    /* Model FLOPs per step: the per-layer model FLOPs of one unsharded sequence (layer.c), summed
     * over layers and the LM head, times the global batch. */
    ts_shard one = {.tp = 1, .cp = 1, .ep = 1, .sp = 0, .mbs = 1, .recompute = TS_RECOMPUTE_NONE};
    ts_layer_cost dense, moe, head;
    ts_layer_cost_of(pb, &one, 0, &dense);
    ts_layer_cost_of(pb, &one, 1, &moe);
    ts_head_cost_of(pb, &one, &head);
    int n_moe = 0;
    for (int i = 0; i < m->layers; i++) n_moe += ts_model_layer_is_moe(m, i);
    double per_seq = (m->layers - n_moe) * dense.model_flops + n_moe * moe.model_flops + head.model_flops;
    pb->model_flops_per_step = per_seq * (double)t->global_batch;
    return TS_OK;
}

ts_status ts_evaluate(const ts_problem *pb, const ts_layout *in, ts_eval *out) {
    char why[256], text[256];
    if (ts_layout_invalid(pb, in, why, sizeof why)) {
        ts_layout_format(in, text, sizeof text);
        return TS_FAIL(TS_ERR_INPUT, "layout %s is not valid here: %s", text, why);
    }
    ts_layout l = *in;
    l.microbatches = (int)(pb->train.global_batch / ((long long)l.dp * l.mbs));
    ts_stages st;
    TS_CHECK(ts_stages_init(&st, l.pp));
    ts_shard sh = {l.tp, l.cp, l.ep, l.sp, l.mbs, TS_RECOMPUTE_NONE, l.etp};
    ts_shard_costs costs[TS_RECOMPUTE_COUNT];
    ts_shard_costs_all(pb, &sh, costs);
    ts_stages_build(&st, pb, &costs[l.recompute], l.pp);
    ts_stages_finish(&st, pb, &l, out);
    /* CPU ranks: the memory the executor that runs the plan holds (planner/memory_exec.h), for
     * this one layout (the search ranks and checks fits by the model's figures). */
    ts_status res = ts_memory_exec_applies(&pb->sys) ? ts_memory_exec_price(&st, pb, &l, &out->mem) : TS_OK;
    ts_stages_free(&st);
    return res;
}
