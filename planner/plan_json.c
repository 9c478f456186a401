/* plan.json writer and reader (schema in plan_json.h). */
#include "planner/plan_json.h"

#include "program/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "planner/partition.h"

#define TS_PLAN_VERSION 1 /* written, and the only one read: a plan from another version is refused */

static int add_num(cJSON *o, const char *k, double v) { return cJSON_AddNumberToObject(o, k, v) != NULL; }

cJSON *ts_eval_to_json(const ts_eval *e, int rank) {
    const ts_layout *l = &e->layout;
    char text[256];
    ts_layout_format(l, text, sizeof text);
    cJSON *o = cJSON_CreateObject(), *mem = NULL, *t = NULL;
    if (o == NULL) return NULL;
    int ok = add_num(o, "rank", rank) && cJSON_AddStringToObject(o, "layout", text) &&
             add_num(o, "dp", l->dp) && add_num(o, "tp", l->tp) && add_num(o, "pp", l->pp) &&
             add_num(o, "cp", l->cp) && add_num(o, "ep", l->ep) && add_num(o, "sp", l->sp) &&
             add_num(o, "zero", l->zero) && add_num(o, "mbs", l->mbs) &&
             add_num(o, "microbatches", l->microbatches) && add_num(o, "vpp", l->vpp) &&
             cJSON_AddStringToObject(o, "schedule", ts_schedule_names[l->schedule]) &&
             cJSON_AddStringToObject(o, "recompute", ts_recompute_names[l->recompute]) &&
             add_num(o, "worst_stage", e->worst_stage) && add_num(o, "fits", e->fits) &&
             (mem = cJSON_AddObjectToObject(o, "memory_bytes")) != NULL &&
             add_num(mem, "weights", e->mem.weights) && add_num(mem, "grads", e->mem.grads) &&
             add_num(mem, "optimizer", e->mem.optimizer) &&
             add_num(mem, "activations", e->mem.activations) &&
             add_num(mem, "buffers", e->mem.buffers) && add_num(mem, "total", e->mem.total) &&
             add_num(o, "step_s", e->step_s) && (t = cJSON_AddObjectToObject(o, "time_s")) != NULL &&
             add_num(t, "compute", e->time.compute) && add_num(t, "tp_comm", e->time.tp_comm) &&
             add_num(t, "cp_comm", e->time.cp_comm) && add_num(t, "ep_comm", e->time.ep_comm) &&
             add_num(t, "pp_comm", e->time.pp_comm) && add_num(t, "pp_bubble", e->time.pp_bubble) &&
             add_num(t, "dp_comm", e->time.dp_comm) && add_num(t, "optimizer", e->time.optimizer) &&
             add_num(o, "tokens_per_s", e->tokens_per_s) &&
             add_num(o, "tflops_per_gpu", e->tflops_per_gpu) &&
             add_num(o, "hw_tflops_per_gpu", e->hw_tflops_per_gpu) && add_num(o, "mfu", e->mfu);
    /* the experts' TP, when apart from tp (program/layout.h) */
    if (ok && l->etp > 0 && l->etp != l->tp) ok = add_num(o, "etp", l->etp);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Uneven stages: "stages": [{"layers", "recompute", "chunks": [layers per chunk] (vpp > 1)}],
 * and how the program ended: "partition_status" (optimal | node-limit) and "partition_bound_s",
 * the lower bound of the slowest stage's seconds per micro-batch it proved. */
static ts_status add_stages(cJSON *layout, const ts_split *s) {
    ts_status res = TS_OK;
    cJSON *arr = NULL;
    TS_CJSON_GOTO(cJSON_AddStringToObject(layout, "partition_status", ts_partition_status_names[s->status]), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(layout, "partition_bound_s", s->bound_s), res, exit);
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(layout, "stages"), res, exit);
    for (int i = 0; i < s->pp; i++) {
        cJSON *o = cJSON_CreateObject();
        TS_CJSON_GOTO(o, res, exit);
        cJSON_AddItemToArray(arr, o);
        int n = 0;
        for (int c = 0; c < s->vpp; c++) n += s->layers[ts_sched_chunk(s->schedule, s->pp, s->vpp, i, c)];
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "layers", n), res, exit);
        TS_CJSON_GOTO(cJSON_AddStringToObject(o, "recompute", ts_recompute_names[s->recompute[i]]), res, exit);
        if (s->vpp > 1) {
            cJSON *ch = NULL;
            TS_CJSON_GOTO(ch = cJSON_AddArrayToObject(o, "chunks"), res, exit);
            for (int c = 0; c < s->vpp; c++) {
                cJSON *v = cJSON_CreateNumber(s->layers[ts_sched_chunk(s->schedule, s->pp, s->vpp, i, c)]);
                TS_CJSON_GOTO(v, res, exit);
                cJSON_AddItemToArray(ch, v);
            }
        }
    }
exit:
    return res;
}

ts_status ts_plan_to_json(const ts_problem *pb, const ts_search_opts *opts, const char *fix,
                          const ts_search_result *r, cJSON **out) {
    ts_status res = TS_OK;
    cJSON *root = cJSON_CreateObject(), *req = NULL, *arr = NULL;
    TS_CJSON_GOTO(root, res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "tessera", "plan"), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "version", TS_PLAN_VERSION), res, fail);
    TS_CJSON_GOTO(req = cJSON_AddObjectToObject(root, "request"), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "model", pb->model.name), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "system", pb->sys.name), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "gpus", pb->gpus), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "global_batch", (double)pb->train.global_batch), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "seq", (double)pb->train.seq), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "dtype", ts_dtype_names[pb->train.dtype]), res, fail);
    if (pb->train.dtype == TS_DTYPE_FP8) {
        TS_CJSON_GOTO(cJSON_AddStringToObject(req, "fp8_recipe", ts_fp8_recipe_names[pb->train.fp8_recipe]), res, fail);
        TS_CJSON_GOTO(cJSON_AddBoolToObject(req, "fp8_attention", pb->train.fp8_attention), res, fail);
        if (pb->train.fp8_param_gather)
            TS_CJSON_GOTO(cJSON_AddBoolToObject(req, "fp8_param_gather", 1), res, fail);
    }
    TS_CJSON_GOTO(cJSON_AddBoolToObject(req, "flash_attention", pb->train.flash_attention), res, fail);
    TS_CJSON_GOTO(cJSON_AddBoolToObject(req, "tp_across_nodes", pb->train.tp_across_nodes), res, fail);
    /* Written only when not the default, so plans made before the option read as they did. */
    if (pb->train.cp_kind != TS_CP_RING)
        TS_CJSON_GOTO(cJSON_AddStringToObject(req, "cp_kind", ts_cp_kind_names[pb->train.cp_kind]), res, fail);
    if (pb->train.attn_backend != TS_ATTN_FUSED)
        TS_CJSON_GOTO(cJSON_AddStringToObject(req, "attention_backend", ts_attn_backend_names[pb->train.attn_backend]),
                      res, fail);
    if (pb->train.moe_dispatcher != TS_MOE_DISPATCH_AUTO)
        TS_CJSON_GOTO(cJSON_AddStringToObject(req, "moe_dispatcher", ts_moe_dispatcher_names[pb->train.moe_dispatcher]),
                      res, fail);
    if (pb->train.moe_a2a_overlap > 0)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "moe_a2a_overlap", pb->train.moe_a2a_overlap), res, fail);
    if (pb->train.moe_fp8_dispatch)
        TS_CJSON_GOTO(cJSON_AddBoolToObject(req, "moe_fp8_dispatch", 1), res, fail);
    if (!pb->train.moe_grouped_gemm)
        TS_CJSON_GOTO(cJSON_AddBoolToObject(req, "moe_grouped_gemm", 0), res, fail);
    if (pb->train.moe_combined_1f1b)
        TS_CJSON_GOTO(cJSON_AddBoolToObject(req, "overlap_moe_expert_parallel_comm", 1), res, fail);
    if (pb->train.moe_shared_expert_overlap)
        TS_CJSON_GOTO(cJSON_AddBoolToObject(req, "moe_shared_expert_overlap", 1), res, fail);
    if (pb->train.ce_fusion >= 0)
        TS_CJSON_GOTO(cJSON_AddStringToObject(req, "cross_entropy", ts_ce_names[!pb->train.ce_fusion]), res, fail);
    if (pb->train.recompute_modules != TS_RCM_DEFAULT) {
        cJSON *mods = cJSON_AddArrayToObject(req, "recompute_modules");
        TS_CJSON_GOTO(mods, res, fail);
        for (int i = 0; i < TS_RCM_COUNT; i++)
            if (pb->train.recompute_modules & TS_RCM_BIT(i)) {
                cJSON *name = cJSON_CreateString(ts_recompute_module_names[i]);
                TS_CJSON_GOTO(name, res, fail);
                cJSON_AddItemToArray(mods, name);
            }
    }
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "stack", pb->train.stack.name), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "mem_headroom_bytes", pb->headroom_bytes), res, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "objective", ts_objective_names[opts->objective]), res, fail);
    /* The memory objective's stated trade (planner/objective.c): the slowdown allowed, the
     * fastest step time and the cap. */
    if (r->step_cap_s > 0) {
        TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "max_slowdown", opts->max_slowdown), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "fastest_step_s", r->fastest_step_s), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "step_cap_s", r->step_cap_s), res, fail);
    }
    TS_CJSON_GOTO(cJSON_AddStringToObject(req, "fix", fix ? fix : ""), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(req, "top", opts->top_k), res, fail);
    cJSON *model = ts_model_to_json(&pb->model), *sys = ts_system_to_json(&pb->sys);
    if (model) cJSON_AddItemToObject(root, "model", model);
    if (sys) cJSON_AddItemToObject(root, "system", sys);
    /* The FP8 GEMM curve prices nothing outside FP8 plans: they alone carry it. */
    if (sys && pb->train.dtype != TS_DTYPE_FP8)
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(sys, "efficiency"), "gemm_fp8");
    TS_CJSON_GOTO(model && sys ? model : NULL, res, fail);
    /* The model's size as people quote it (issue 19): every parameter, and those a token uses. */
    cJSON *params;
    TS_CJSON_GOTO(params = cJSON_AddObjectToObject(root, "params"), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(params, "total", pb->params.total), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(params, "active", pb->params.active), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "searched", (double)r->searched), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "evaluated", (double)r->evaluated), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "feasible", (double)r->feasible), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "search_s", r->search_s), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "usable_bytes", pb->usable_bytes), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "headroom_bytes", pb->headroom_bytes), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "partitioned", r->partitioned), res, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "partition_s", r->partition_s), res, fail);
    if (r->partition_errors) {
        TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "partition_errors", r->partition_errors), res, fail);
        TS_CJSON_GOTO(cJSON_AddStringToObject(root, "partition_error", r->partition_error), res, fail);
    }
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "layouts"), res, fail);
    for (int i = 0; i < r->n_best; i++) {
        cJSON *e = ts_eval_to_json(&r->best[i], i + 1);
        TS_CJSON_GOTO(e, res, fail);
        cJSON_AddItemToArray(arr, e);
        if (r->splits && r->splits[i].pp > 0) TS_CHECK_GOTO(add_stages(e, &r->splits[i]), res, fail);
    }
    *out = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    *out = NULL;
    return res;
}

/* What a plan's request holds: the problem read back, and the search's settings it records
 * (objective, fix, top, partition..., refine: reports/ranking.c), which nothing reads. A key
 * outside them is a typo ("dtpye": "fp8" would plan bf16 silently): refused. */
static const char *const request_keys[] = {
    "model", "system", "gpus", "global_batch", "seq", "dtype", "fp8_recipe", "fp8_attention", "fp8_param_gather",
    "flash_attention", "attention_backend", "tp_across_nodes", "cp_kind", "moe_dispatcher", "moe_a2a_overlap",
    "moe_fp8_dispatch", "moe_grouped_gemm", "overlap_moe_expert_parallel_comm", "moe_shared_expert_overlap", "cross_entropy", "recompute_modules", "stack", "mem_headroom_bytes", "objective", "max_slowdown", "fix", "top", "partition", "partition_objective",
    "partition_node_limit", "refine", NULL};

/* The request's software stack (a zoo name; absent in plans written before stacks: the
 * unrestricted one) and memory headroom; an unknown name fails as the zoo says. */
static ts_status read_stack(const ts_jreader *rr, const cJSON *req, ts_train *t) {
    char name[64];
    TS_CHECK(ts_jr_str(rr, req, "stack", 0, "", name, sizeof name));
    TS_CHECK(ts_jr_num(rr, req, "mem_headroom_bytes", 0, 0, 1e15, 0, &t->mem_headroom_bytes));
    if (!name[0] || strcmp(name, "any") == 0) return TS_OK;
    return ts_stack_load(name, ts_schedule_names, ts_recompute_names, &t->stack);
}

/* The request's training options (everything ts_train holds but the stack and the headroom). */
static ts_status read_train(const ts_jreader *rr, const cJSON *req, ts_train *t) {
    int flash, across, dt, fp8_recipe, fp8_attention, cp_kind, moe_disp, attn_backend;
    TS_CHECK(ts_jr_int(rr, req, "global_batch", 1, 1, 1 << 30, 0, &t->global_batch));
    TS_CHECK(ts_jr_int(rr, req, "seq", 1, 1, 1LL << 27, 0, &t->seq));
    TS_CHECK(ts_jr_enum(rr, req, "dtype", 0, ts_dtype_names, TS_DTYPE_BF16, &dt));
    TS_CHECK(ts_jr_bool(rr, req, "flash_attention", 0, 1, &flash));
    TS_CHECK(ts_jr_bool(rr, req, "tp_across_nodes", 0, 0, &across));
    TS_CHECK(ts_jr_enum(rr, req, "fp8_recipe", 0, ts_fp8_recipe_names, TS_FP8_DELAYED, &fp8_recipe));
    TS_CHECK(ts_jr_bool(rr, req, "fp8_attention", 0, 0, &fp8_attention));
    TS_CHECK(ts_jr_bool(rr, req, "fp8_param_gather", 0, 0, &t->fp8_param_gather));
    TS_CHECK(ts_jr_enum(rr, req, "cp_kind", 0, ts_cp_kind_names, TS_CP_RING, &cp_kind));
    TS_CHECK(ts_jr_enum(rr, req, "attention_backend", 0, ts_attn_backend_names, TS_ATTN_FUSED, &attn_backend));
    TS_CHECK(ts_jr_enum(rr, req, "moe_dispatcher", 0, ts_moe_dispatcher_names, TS_MOE_DISPATCH_AUTO, &moe_disp));
    TS_CHECK(ts_jr_num(rr, req, "moe_a2a_overlap", 0, 0, 1, 0, &t->moe_a2a_overlap));
    TS_CHECK(ts_jr_bool(rr, req, "moe_fp8_dispatch", 0, 0, &t->moe_fp8_dispatch));
    TS_CHECK(ts_jr_bool(rr, req, "moe_grouped_gemm", 0, 1, &t->moe_grouped_gemm));
    TS_CHECK(ts_jr_bool(rr, req, "overlap_moe_expert_parallel_comm", 0, 0, &t->moe_combined_1f1b));
    TS_CHECK(ts_jr_bool(rr, req, "moe_shared_expert_overlap", 0, 0, &t->moe_shared_expert_overlap));
    if (t->moe_combined_1f1b && t->moe_shared_expert_overlap) /* as the CLI refuses it */
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.moe_shared_expert_overlap: excludes overlap_moe_expert_parallel_comm",
                       rr->file, rr->path);
    if (t->moe_combined_1f1b && t->moe_a2a_overlap > 0) /* as the CLI refuses it (cli/problem_args.c) */
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.overlap_moe_expert_parallel_comm: takes moe_a2a_overlap 0, got %g", rr->file,
                       rr->path, t->moe_a2a_overlap);
    TS_CHECK(ts_jr_enum_set(rr, req, "recompute_modules", 0, ts_recompute_module_names, TS_RCM_DEFAULT,
                            &t->recompute_modules));
    int ce;
    TS_CHECK(ts_jr_enum(rr, req, "cross_entropy", 0, ts_ce_names, -1, &ce));
    t->ce_fusion = ce < 0 ? -1 : ce == 0;
    t->moe_dispatcher = (ts_moe_dispatcher)moe_disp;
    ts_train_set_dtype(t, (ts_dtype)dt);
    t->fp8_recipe = (ts_fp8_recipe)fp8_recipe;
    t->fp8_attention = fp8_attention;
    t->flash_attention = flash;
    t->attn_backend = (ts_attn_backend)attn_backend;
    t->tp_across_nodes = across;
    t->cp_kind = (ts_cp_kind)cp_kind;
    return TS_OK;
}

ts_status ts_plan_read(const char *file, ts_problem *pb, ts_layout **layouts, int *n) {
    *layouts = NULL;
    *n = 0;
    cJSON *root = NULL;
    ts_status res = TS_OK;
    ts_layout *ls = NULL;
    TS_CHECK(ts_json_load_file(file, &root));
    ts_jreader r, rr;
    ts_jreader_root(&r, file);
    if (!cJSON_IsObject(root)) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $: expected a plan object, got %s", file, ts_json_type_name(root));
        goto exit;
    }
    char kind[32];
    TS_CHECK_GOTO(ts_jr_str(&r, root, "tessera", 1, NULL, kind, sizeof kind), res, exit);
    if (strcmp(kind, "plan") != 0) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.tessera: expected \"plan\", got \"%s\"", file, kind);
        goto exit;
    }
    int64_t version;
    TS_CHECK_GOTO(ts_jr_int(&r, root, "version", 1, 0, INT32_MAX, 0, &version), res, exit);
    if (version != TS_PLAN_VERSION) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.version: expected %d (the plan format this tessera reads), "
                      "got %lld: re-run `tessera plan` to write it again", file, TS_PLAN_VERSION,
                      (long long)version);
        goto exit;
    }
    const cJSON *req, *jm, *js;
    TS_CHECK_GOTO(ts_jr_obj(&r, root, "request", 1, &req), res, exit);
    TS_CHECK_GOTO(ts_jr_obj(&r, root, "model", 1, &jm), res, exit);
    TS_CHECK_GOTO(ts_jr_obj(&r, root, "system", 1, &js), res, exit);
    ts_model m;
    ts_system s;
    ts_train t;
    ts_train_defaults(&t);
    /* The embedded specs' messages name their paths from $ of the spec: say which one. */
    char mfile[4200], sfile[4200];
    snprintf(mfile, sizeof mfile, "%s ($.model)", file);
    snprintf(sfile, sizeof sfile, "%s ($.system)", file);
    TS_CHECK_GOTO(ts_model_from_json(mfile, jm, &m), res, exit);
    TS_CHECK_GOTO(ts_system_from_json(sfile, js, &s), res, exit);
    ts_jreader_child(&r, "request", 0, &rr);
    TS_CHECK_GOTO(ts_jr_known_keys(&rr, req, request_keys), res, exit);
    int64_t gpus;
    TS_CHECK_GOTO(ts_jr_int(&rr, req, "gpus", 1, 1, 1 << 24, 0, &gpus), res, exit);
    TS_CHECK_GOTO(read_train(&rr, req, &t), res, exit);
    ts_dtype dt = t.dtype;
    /* ts_problem_init checks these too, but names the command-line flags. */
    if (ts_seq_extends(&m, t.seq) < 0) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.request.seq: expected an integer in [1, %lld] "
                      "($.model.max_seq: learned positions), got %lld", file, (long long)m.max_seq, (long long)t.seq);
        goto exit;
    }
    if (s.peak_flops[dt] <= 0) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.request.dtype: \"%s\" has no peak in "
                      "$.system.gpu.peak_flops", file, ts_dtype_names[dt]);
        goto exit;
    }
    char bad[256];
    if (ts_recompute_modules_invalid(&m, &t, bad, sizeof bad)) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.request.recompute_modules: %s", file, bad);
        goto exit;
    }
    TS_CHECK_GOTO(read_stack(&rr, req, &t), res, exit);
    TS_CHECK_GOTO(ts_problem_init(pb, &m, &s, &t, (int)gpus), res, exit);

    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    if (!cJSON_IsArray(arr)) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.layouts: expected an array, got %s", file, ts_json_type_name(arr));
        goto exit;
    }
    int count = cJSON_GetArraySize(arr);
    ls = calloc(count > 0 ? (size_t)count : 1, sizeof *ls);
    TS_ALLOC_GOTO(ls, res, exit);
    /* Walk the list (cJSON_GetArrayItem(arr, i) restarts from the head: quadratic, minutes for a
     * plan of 100000 layouts). */
    const cJSON *item = arr->child;
    for (int i = 0; i < count; i++, item = item->next) {
        ts_jreader er;
        ts_jreader_child(&r, "layouts", 0, &er);
        snprintf(er.path, sizeof er.path, "$.layouts[%d]", i);
        char text[256], what[300];
        TS_CHECK_GOTO(ts_jr_str(&er, item, "layout", 1, NULL, text, sizeof text), res, exit);
        snprintf(what, sizeof what, "%s: %s.layout", file, er.path);
        TS_CHECK_GOTO(ts_layout_parse(what, text, &ls[i]), res, exit);
        /* A layout with "stages" (an explicit split) may interleave chunks that do not divide
         * the layers evenly; ts_plan_read_split checks the split itself. */
        char why[256];
        int explicit_split = cJSON_GetObjectItemCaseSensitive(item, "stages") != NULL;
        if (ts_layout_invalid_split(pb, &ls[i], explicit_split, why, sizeof why)) {
            res = TS_FAIL(TS_ERR_INPUT, "%s: %s.layout: \"%s\" is not valid for this plan: %s", file,
                          er.path, text, why);
            goto exit;
        }
        ls[i].microbatches = (int)(pb->train.global_batch / ((long long)ls[i].dp * ls[i].mbs));
    }
    *layouts = ls;
    *n = count;
    ls = NULL;
exit:
    free(ls);
    cJSON_Delete(root);
    return res;
}

ts_status ts_plan_read_split(const char *file, const ts_problem *pb, const ts_layout *l, int index, ts_split *out,
                             int *has) {
    *has = 0;
    cJSON *root = NULL;
    ts_status res = TS_OK;
    TS_CHECK(ts_json_load_file(file, &root));
    const cJSON *arr = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "layouts"), index);
    const cJSON *stages = arr ? cJSON_GetObjectItemCaseSensitive(arr, "stages") : NULL;
    char path[64];
    snprintf(path, sizeof path, "$.layouts[%d].stages", index);
    if (stages == NULL) goto exit;
    if (!cJSON_IsArray(stages) || cJSON_GetArraySize(stages) != l->pp) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: %s: expected an array of pp = %d stages, got %s", file, path, l->pp,
                      cJSON_IsArray(stages) ? "another count" : ts_json_type_name(stages));
        goto exit;
    }
    TS_CHECK_GOTO(ts_split_init(out, l->pp, l->vpp), res, exit);
    out->schedule = l->schedule;
    int total = 0;
    for (int i = 0; i < l->pp; i++) {
        ts_jreader r;
        ts_jreader_root(&r, file);
        snprintf(r.path, sizeof r.path, "%s[%d]", path, i);
        const cJSON *o = cJSON_GetArrayItem(stages, i);
        int64_t n;
        int rc;
        TS_CHECK_GOTO(ts_jr_int(&r, o, "layers", 1, l->vpp, pb->model.layers, 0, &n), res, fail);
        TS_CHECK_GOTO(ts_jr_enum(&r, o, "recompute", 1, ts_recompute_names, 0, &rc), res, fail);
        out->recompute[i] = (ts_recompute)rc;
        const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(o, "chunks");
        if (l->vpp == 1) {
            out->layers[i] = (int)n;
        } else {
            int sum = 0;
            if (!cJSON_IsArray(chunks) || cJSON_GetArraySize(chunks) != l->vpp) {
                res = TS_FAIL(TS_ERR_INPUT, "%s: %s.chunks: expected an array of vpp = %d layer counts", file, r.path,
                              l->vpp);
                goto fail;
            }
            for (int c = 0; c < l->vpp; c++) {
                const cJSON *v = cJSON_GetArrayItem(chunks, c);
                /* Range first: (int) of a double outside int's range (1e300) is undefined. */
                if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1 && v->valuedouble <= pb->model.layers) ||
                    v->valuedouble != (int)v->valuedouble) {
                    res = TS_FAIL(TS_ERR_INPUT, "%s: %s.chunks[%d]: expected an integer >= 1", file, r.path, c);
                    goto fail;
                }
                out->layers[ts_chunk_global(l, i, c)] = v->valueint;
                sum += v->valueint;
            }
            if (sum != n) {
                res = TS_FAIL(TS_ERR_INPUT, "%s: %s.chunks: add up to %d, expected its %lld layers", file, r.path, sum,
                              (long long)n);
                goto fail;
            }
        }
        total += (int)n;
    }
    if (total != pb->model.layers) {
        res = TS_FAIL(TS_ERR_INPUT, "%s: %s: the stages hold %d layers, expected the model's %d", file, path, total,
                      pb->model.layers);
        goto fail;
    }
    *has = 1;
    goto exit;
fail:
    ts_split_free(out);
exit:
    cJSON_Delete(root);
    return res;
}

ts_status ts_plan_evaluate(const char *file, const ts_problem *pb, const ts_layout *l, int index, ts_eval *out,
                           ts_split *split, int *has) {
    ts_split mine;
    ts_split *s = split ? split : &mine;
    TS_CHECK(ts_plan_read_split(file, pb, l, index, s, has));
    ts_status res = *has ? ts_evaluate_split(pb, l, s, out) : ts_evaluate(pb, l, out);
    if (*has && (split == NULL || res != TS_OK)) {
        ts_split_free(s);
        *has = 0;
    }
    return res;
}
