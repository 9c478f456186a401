/* The `tessera sim` summary: JSON and table (see summary.h). */
#include "sim/summary.h"

#include <math.h>

#include "common/json.h"

static int full_of(const ts_problem *pb, const ts_sim_result *r) { return r->n_ranks == pb->gpus; }

/* The largest factor on a stage's compute for ranks in lockstep (engine.h ts_stage_stats). */
static double lockstep_of(const ts_program *prog, const ts_sim_result *r) {
    double most = 1;
    for (int i = 0; i < prog->pp; i++) most = fmax(most, r->stages[i].lockstep_scale);
    return most;
}

ts_status ts_sim_summary_json(const ts_problem *pb, const ts_program *prog, const ts_sim_result *r,
                              double closed_form_step_s, cJSON **out) {
    ts_status res = TS_OK;
    char layout[256];
    ts_layout_format(&prog->layout, layout, sizeof layout);
    cJSON *root = cJSON_CreateObject(), *stages = NULL, *kinds = NULL;
    TS_CJSON_GOTO(root, res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "layout", layout), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "step_s", r->step_s), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "bubble_fraction", r->bubble_fraction), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "events", (double)r->events), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "sim_s", r->sim_s), res, fail);
    TS_CJSON_GOTO(stages = cJSON_AddArrayToObject(root, "stages"), res, fail);
    for (int s = 0; s < prog->pp; s++) {
        const ts_stage_stats *st = &r->stages[s];
        cJSON *o = cJSON_CreateObject();
        TS_CJSON_GOTO(o, res, fail);
        cJSON_AddItemToArray(stages, o);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "stage", s), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "busy_s", st->busy_s), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "bubble_s", st->bubble_s), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "exposed_comm_s", st->exposed_comm_s), res, fail);
    }
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "closed_form_step_s", closed_form_step_s), res, fail);
    TS_CJSON_GOTO(kinds = cJSON_AddObjectToObject(root, "kind_s"), res, fail);
    for (int k = 0; k < TS_OP_KIND_COUNT; k++)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(kinds, ts_op_kind_names[k], r->kind_s[k]), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "ranks", r->n_ranks), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "full", full_of(pb, r)), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "model", pb->model.name), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "system", pb->sys.name), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "gpus", pb->gpus), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "ops", (double)prog->total_ops), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "microbatches", prog->layout.microbatches), res, fail);
    if (pb->sys.speed_cv > 0)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "lockstep_scale", lockstep_of(prog, r)), res, fail);
    *out = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    *out = NULL;
    return res;
}

ts_status ts_sim_summary_print(FILE *f, const ts_problem *pb, const ts_program *prog,
                               const ts_sim_result *r, double closed_form_step_s) {
    const ts_system *s = &pb->sys;
    char layout[256];
    ts_layout_format(&prog->layout, layout, sizeof layout);
    fprintf(f, "# tessera sim: %s on %d × %s (%s), batch %lld × %lld tokens, %s%s%s%s\n", pb->model.name,
            pb->gpus, s->name, s->gpu_name, (long long)pb->train.global_batch,
            (long long)pb->train.seq, ts_dtype_names[pb->train.dtype],
            pb->train.flash_attention ? ", flash attention" : "", pb->train.cp_kind != TS_CP_RING ? ", CP " : "",
            pb->train.cp_kind != TS_CP_RING ? ts_cp_kind_names[pb->train.cp_kind] : "");
    fprintf(f, "# layout: %s (%d micro-batch%s, %lld ops per step)\n", layout,
            prog->layout.microbatches, prog->layout.microbatches == 1 ? "" : "es",
            (long long)prog->total_ops);
    if (full_of(pb, r))
        fprintf(f, "# simulated every rank (%d)\n", r->n_ranks);
    else
        fprintf(f, "# simulated %d of %d ranks (one per stage; its TP, CP, DP and EP peers behave alike)\n",
                r->n_ranks, pb->gpus);
    double delta = closed_form_step_s > 0 ? 100 * (r->step_s - closed_form_step_s) / closed_form_step_s : 0;
    fprintf(f, "# step: simulated %.6g s, closed form %.6g s (%+.1f%%); bubble %.1f%% of the step\n",
            r->step_s, closed_form_step_s, delta, 100 * r->bubble_fraction);
    if (s->speed_cv > 0)
        fprintf(f, "# compute × %.4g: node.speed_cv %.3g, ranks in lockstep wait for the slowest\n",
                lockstep_of(prog, r), s->speed_cv);
    fprintf(f, "#%5s %12s %12s %12s\n", "stage", "busy", "bubble", "exposed_comm");
    fprintf(f, "#%5s %12s %12s %12s\n", "", "s", "s", "s");
    for (int i = 0; i < prog->pp; i++) {
        const ts_stage_stats *st = &r->stages[i];
        fprintf(f, " %5d %12.6g %12.6g %12.6g\n", i, st->busy_s, st->bubble_s, st->exposed_comm_s);
    }
    fprintf(f, "# time by op kind, summed over one rank per stage (s):");
    for (int k = 0; k < TS_OP_KIND_COUNT; k++)
        fprintf(f, " %s %.6g", ts_op_kind_names[k], r->kind_s[k]);
    fprintf(f, "\n# %lld events, simulated in %.3f s\n", (long long)r->events, r->sim_s);
    if (ferror(f) || fflush(f) != 0) return TS_FAIL(TS_ERR_IO, "write failed while printing the simulation");
    return TS_OK;
}
