/* Predictions for the published measurements (see published.h). */
#include "planner/published.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/json.h"
#include "planner/published_cache.h"
#include "program/schedule.h"

#define RANK_DEPTH 10          /* distinct (t, p, d) examined */
#define RANK_SEARCH_DEPTH 5000 /* layouts ranked to find them */

static ts_status num_at(const char *file, const cJSON *row, const char *obj, const char *key,
                        double *out) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(row, obj);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        return TS_FAIL(TS_ERR_INPUT, "%s: %s.%s: expected a number, got %s", file, obj, key,
                       ts_json_type_name(v));
    *out = v->valuedouble;
    return TS_OK;
}

/* Best layout under `pins`; TS_ERR_INPUT when no valid layout exists under them, TS_ERR_INFEASIBLE
 * when none fits. */
static ts_status best_under(const ts_problem *pb, const ts_pins *pins, ts_eval *out) {
    ts_search_opts o;
    ts_search_opts_defaults(&o);
    o.top_k = 1;
    o.pins = *pins;
    ts_search_result r;
    ts_status st = ts_search(pb, &o, &r);
    if (st == TS_OK) *out = r.best[0];
    ts_search_result_free(&r);
    return st;
}

static ts_status megatron_case(const char *file, const cJSON *row, int ranks, ts_pub_cache *cache,
                               ts_pub_case *c) {
    double params_b, gpus, tp, pp, dp, batch, seq, tflops;
    TS_CHECK(num_at(file, row, "model", "params_b", &params_b));
    TS_CHECK(num_at(file, row, "hardware", "count", &gpus));
    TS_CHECK(num_at(file, row, "layout", "tp", &tp));
    TS_CHECK(num_at(file, row, "layout", "pp", &pp));
    TS_CHECK(num_at(file, row, "derived", "dp", &dp));
    TS_CHECK(num_at(file, row, "training", "global_batch_seqs", &batch));
    TS_CHECK(num_at(file, row, "model", "seq_len", &seq));
    TS_CHECK(num_at(file, row, "measured", "tflops_per_gpu", &tflops));
    c->kind = TS_PUB_MEGATRON_TFLOPS;
    snprintf(c->model, sizeof c->model, "megatron-gpt-%gb", params_b);
    c->gpus = (int)gpus, c->tp = (int)tp, c->pp = (int)pp, c->dp = (int)dp, c->cp = 1;
    c->measured = tflops;

    ts_model m;
    ts_system s;
    ts_train t;
    ts_problem pb;
    TS_CHECK(ts_pub_cache_model(cache, c->model, &m));
    TS_CHECK(ts_pub_cache_system(cache, "a100-80g-dgx", &s));
    snprintf(c->gpu, sizeof c->gpu, "%s", s.gpu_name);
    c->gemm_eff = s.gemm_eff;
    ts_train_defaults(&t);
    t.global_batch = (int64_t)batch;
    t.seq = (int64_t)seq;
    /* 2021 Megatron-LM (models/stacks/megatron-lm-2021.json): unfused softmax, blocking pipeline
     * transfers, gradients reduced after the backward, no ZeRO, SP or CP. */
    TS_CHECK(ts_pub_cache_stack(cache, "megatron-lm-2021", &t.stack));
    snprintf(c->stack, sizeof c->stack, "%s", t.stack.name);
    TS_CHECK(ts_problem_init(&pb, &m, &s, &t, c->gpus));

    /* Table 1's runs recompute every layer (SC'21 §3.5). */
    ts_pins era = {0};
    ts_pins_set(&era, TS_PIN_RECOMPUTE, TS_RECOMPUTE_FULL);

    ts_pins pins = era;
    ts_pins_set(&pins, TS_PIN_TP, c->tp);
    ts_pins_set(&pins, TS_PIN_PP, c->pp);
    ts_pins_set(&pins, TS_PIN_DP, c->dp);
    ts_pins with_sched = pins;
    ts_pins_set(&with_sched, TS_PIN_SCHED, c->pp > 1 ? TS_SCHED_INTERLEAVED : TS_SCHED_1F1B);
    ts_eval e;
    ts_status st = best_under(&pb, &with_sched, &e);
    if (st == TS_ERR_INPUT) {
        ts_error_clear(); /* interleaving impossible for this row: any schedule */
        st = best_under(&pb, &pins, &e);
    }
    TS_CHECK(st);
    c->predicted = e.hw_tflops_per_gpu;
    ts_layout_format(&e.layout, c->layout, sizeof c->layout);
    if (!ranks) return TS_OK;

    /* Rank among distinct (t, p, d): Table 1 publishes only those; micro-batch and chunking
     * variants of one (t, p, d) count once, at their best. */
    ts_search_opts o;
    ts_search_opts_defaults(&o);
    o.top_k = RANK_SEARCH_DEPTH;
    o.pins = era;
    o.schedules = (1u << TS_SCHED_1F1B) | (1u << TS_SCHED_INTERLEAVED); /* Megatron-LM 2021 */
    ts_search_result r;
    TS_CHECK(ts_search(&pb, &o, &r));
    c->rank = 0;
    int seen[RANK_DEPTH][3], n_seen = 0;
    for (int i = 0; i < r.n_best && n_seen < RANK_DEPTH && !c->rank; i++) {
        const ts_layout *l = &r.best[i].layout;
        int dup = 0;
        for (int j = 0; j < n_seen; j++)
            dup |= seen[j][0] == l->tp && seen[j][1] == l->pp && seen[j][2] == l->dp;
        if (dup) continue;
        seen[n_seen][0] = l->tp, seen[n_seen][1] = l->pp, seen[n_seen][2] = l->dp;
        n_seen++;
        if (l->tp == c->tp && l->pp == c->pp && l->dp == c->dp) c->rank = n_seen;
    }
    ts_search_result_free(&r);
    return TS_OK;
}

/* A row naming its zoo model: the model's published layer count (the recipes' proxy
 * configurations cut it) and, for an MoE model, the expert layout: ep, and etp (tp's when not given). */
static ts_status zoo_row(const char *file, const cJSON *row, ts_model *m, ts_pins *pins) {
    double layers, ep;
    TS_CHECK(num_at(file, row, "model", "layers", &layers));
    if (layers < 1 || layers > m->layers)
        return TS_FAIL(TS_ERR_INPUT, "%s: model.layers: expected 1 to %d, got %g", file, m->layers, layers);
    m->layers = (int)layers;
    if (m->moe.experts == 0) return TS_OK;
    TS_CHECK(num_at(file, row, "layout", "ep", &ep));
    if (m->moe.first_dense >= m->layers) m->moe.first_dense = 0;
    ts_pins_set(pins, TS_PIN_EP, (int)ep);
    /* A row without etp ran its experts over the whole TP group (before Megatron-Core core_r0.10.0
     * no other split existed), so the search may not split them apart. */
    const cJSON *layout = cJSON_GetObjectItemCaseSensitive(row, "layout");
    const cJSON *etp = cJSON_GetObjectItemCaseSensitive(layout, "etp");
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(layout, "tp");
    if (cJSON_IsNumber(etp)) ts_pins_set(pins, TS_PIN_ETP, etp->valueint);
    else if (cJSON_IsNumber(tp)) ts_pins_set(pins, TS_PIN_ETP, tp->valueint);
    return TS_OK;
}

/* The recipe's attention kernel (training.attention_backend: "fused", the default, or "flash" where
 * the recipe sets NVTE_FUSED_ATTN=0). */
static ts_status attn_backend_of(const char *file, const cJSON *row, ts_attn_backend *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(row, "training"),
                                                      "attention_backend");
    *out = TS_ATTN_FUSED;
    if (v == NULL) return TS_OK;
    for (int i = 0; cJSON_IsString(v) && ts_attn_backend_names[i]; i++)
        if (strcmp(v->valuestring, ts_attn_backend_names[i]) == 0) return *out = (ts_attn_backend)i, TS_OK;
    return TS_FAIL(TS_ERR_INPUT, "%s: training.attention_backend: expected \"fused\" or \"flash\"", file);
}

ts_status ts_pub_moe_settings(const ts_jreader *r, const cJSON *obj, ts_model *m, ts_train *t) {
    int disp, pad, balance;
    double cf;
    TS_CHECK(ts_jr_enum(r, obj, "moe_dispatcher", 0, ts_moe_dispatcher_names, t->moe_dispatcher, &disp));
    TS_CHECK(ts_jr_num(r, obj, "moe_capacity_factor", 0, 1e-3, 1e3, 0, &cf));
    TS_CHECK(ts_jr_bool(r, obj, "moe_pad_to_capacity", 0, 1, &pad));
    TS_CHECK(ts_jr_bool(r, obj, "moe_grouped_gemm", 0, t->moe_grouped_gemm, &t->moe_grouped_gemm));
    TS_CHECK(ts_jr_bool(r, obj, "overlap_moe_expert_parallel_comm", 0, t->moe_combined_1f1b, &t->moe_combined_1f1b));
    TS_CHECK(ts_jr_bool(r, obj, "moe_shared_expert_overlap", 0, t->moe_shared_expert_overlap,
                        &t->moe_shared_expert_overlap));
    TS_CHECK(ts_jr_bool(r, obj, "moe_force_balance", 0, 0, &balance));
    t->moe_dispatcher = (ts_moe_dispatcher)disp;
    if (cf > 0) {
        m->moe.capacity_factor = cf;
        m->moe.capacity_unpadded = !pad;
    }
    if (balance) m->moe.load_cv = 0; /* every expert its even share */
    return TS_OK;
}

ts_status ts_pub_recompute_modules(const ts_jreader *r, const cJSON *obj, ts_train *t, int *given) {
    *given = cJSON_GetObjectItemCaseSensitive(obj, "recompute_modules") != NULL;
    return ts_jr_enum_set(r, obj, "recompute_modules", 0, ts_recompute_module_names, TS_RCM_DEFAULT,
                          &t->recompute_modules);
}

/* The recipe's loss kernel where the row states it (training.cross_entropy_fusion: NeMo 1.0's
 * hydra recipes leave Megatron-Core's default, unfused, unless their config sets it); absent, the
 * stack's. */
static ts_status ce_fusion_of(const char *file, const cJSON *row, ts_train *t) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(row, "training"),
                                                      "cross_entropy_fusion");
    if (v == NULL) return TS_OK;
    if (!cJSON_IsBool(v))
        return TS_FAIL(TS_ERR_INPUT, "%s: training.cross_entropy_fusion: expected true or false, got %s", file,
                       ts_json_type_name(v));
    t->ce_fusion = cJSON_IsTrue(v);
    return TS_OK;
}

/* A caller's look at each NVIDIA row as it is predicted (ts_published_visit); NULL: none. */
typedef struct {
    ts_pub_visit_fn fn;
    void *ctx;
} pub_visitor;

/* Leaves c->predicted 0 (and predicts nothing) when the row trains an MoE model and `moe_runs`
 * is 0. */
static ts_status nvidia_case(const char *file, const cJSON *row, int moe_runs, ts_pub_cache *cache,
                             const pub_visitor *visit, ts_pub_case *c) {
    double gpus, tp, pp, cp, dp, mbs, batch, seq, step, vocab = 0;
    TS_CHECK(num_at(file, row, "hardware", "count", &gpus));
    TS_CHECK(num_at(file, row, "layout", "tp", &tp));
    TS_CHECK(num_at(file, row, "layout", "pp", &pp));
    TS_CHECK(num_at(file, row, "layout", "cp", &cp));
    TS_CHECK(num_at(file, row, "layout", "dp", &dp));
    TS_CHECK(num_at(file, row, "training", "micro_batch", &mbs));
    TS_CHECK(num_at(file, row, "training", "global_batch_seqs", &batch));
    TS_CHECK(num_at(file, row, "training", "seq_len", &seq));
    TS_CHECK(num_at(file, row, "measured", "train_step_s", &step));
    const cJSON *vpp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(row, "layout"),
                                                        "virtual_pipeline_stages");
    int fp8 = strstr(c->id, "-fp8-") != NULL;
    const cJSON *zoo = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(row, "model"), "zoo");
    snprintf(c->model, sizeof c->model, "%s",
             cJSON_IsString(zoo) ? zoo->valuestring : strstr(c->id, "gpt3-175b") ? "gpt3-175b" : "nemotron4-15b");
    c->gpus = (int)gpus, c->tp = (int)tp, c->pp = (int)pp, c->dp = (int)dp, c->cp = (int)cp;
    c->measured = step;

    ts_model m;
    ts_system s;
    ts_train t;
    ts_problem pb;
    TS_CHECK(ts_pub_cache_model(cache, c->model, &m));
    if (cJSON_IsString(zoo)) TS_CHECK(zoo_row(file, row, &m, &c->pins));
    int moe = m.moe.experts > 0;
    c->kind = moe ? (fp8 ? TS_PUB_NVIDIA_MOE_STEP_FP8 : TS_PUB_NVIDIA_MOE_STEP)
                  : (fp8 ? TS_PUB_NVIDIA_STEP_FP8 : TS_PUB_NVIDIA_STEP);
    c->fp8 = fp8;
    c->moe = moe;
    if (moe && !moe_runs) return TS_OK;
    /* The recipes pad GPT-3's vocabulary to 51200 (the case records it). */
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(row, "model"), "vocab");
    if (cJSON_IsNumber(v)) vocab = v->valuedouble;
    if (vocab > 0) m.vocab = (int64_t)vocab;
    TS_CHECK(ts_pub_cache_system(cache, "h100-sxm-dgx", &s));
    snprintf(c->gpu, sizeof c->gpu, "%s", s.gpu_name);
    c->gemm_eff = s.gemm_eff;
    ts_train_defaults(&t);
    t.global_batch = (int64_t)batch;
    t.seq = (int64_t)seq;
    if (fp8) ts_train_set_dtype(&t, TS_DTYPE_FP8);
    TS_CHECK(attn_backend_of(file, row, &t.attn_backend));
    /* the recipe's settings in the row's "training" object */
    const cJSON *training = cJSON_GetObjectItemCaseSensitive(row, "training");
    ts_jreader root, tr;
    ts_jreader_root(&root, file);
    ts_jreader_child(&root, "training", 0, &tr);
    if (moe) TS_CHECK(ts_pub_moe_settings(&tr, training, &m, &t));
    /* FP8 primary weights where the recipe keeps them (NeMo's fp8_params) */
    const cJSON *fpg = cJSON_GetObjectItemCaseSensitive(training, "fp8_param_gather");
    t.fp8_param_gather = fp8 && cJSON_IsTrue(fpg);
    TS_CHECK(ce_fusion_of(file, row, &t));
    int modules = 0;
    TS_CHECK(ts_pub_recompute_modules(&tr, training, &t, &modules));
    TS_CHECK(ts_pub_cache_stack(cache, "megatron-core", &t.stack));
    snprintf(c->stack, sizeof c->stack, "%s", t.stack.name);
    TS_CHECK(ts_problem_init(&pb, &m, &s, &t, c->gpus));

    ts_pins pins = c->pins;
    ts_pins_set(&pins, TS_PIN_TP, c->tp);
    ts_pins_set(&pins, TS_PIN_PP, c->pp);
    ts_pins_set(&pins, TS_PIN_CP, (int)cp);
    ts_pins_set(&pins, TS_PIN_DP, c->dp);
    ts_pins_set(&pins, TS_PIN_MBS, (int)mbs);
    if (modules) ts_pins_set(&pins, TS_PIN_RECOMPUTE, TS_RECOMPUTE_SELECTIVE); /* the recipe's selective */
    if (vpp) {
        int n = cJSON_IsString(vpp) ? atoi(vpp->valuestring) : cJSON_IsNumber(vpp) ? vpp->valueint : 0;
        if (n > 1) {
            ts_pins_set(&pins, TS_PIN_VPP, n);
            ts_pins_set(&pins, TS_PIN_SCHED, TS_SCHED_INTERLEAVED);
        }
    }
    ts_eval e;
    ts_status st = best_under(&pb, &pins, &e);
    if (st == TS_ERR_INFEASIBLE || st == TS_ERR_INPUT) {
        /* The row's pins leave the planner nothing to price: said in its layout column and kept out
         * of the errors (c->unfit), as the older-stack rows' misses are, so one row does not stop
         * the others. */
        snprintf(c->layout, sizeof c->layout, "%s: %.200s", st == TS_ERR_INFEASIBLE ? "does not fit" : "not plannable",
                 ts_error_message());
        ts_error_clear();
        c->unfit = 1;
        return TS_OK;
    }
    TS_CHECK(st);
    c->predicted = e.step_s;
    ts_layout_format(&e.layout, c->layout, sizeof c->layout);
    if (visit) TS_CHECK(visit->fn(c, &pb, &e.layout, visit->ctx));
    return TS_OK;
}

static ts_status run_file(const char *path, int want_megatron, int ranks, int moe_runs, ts_pub_cache *cache,
                          const pub_visitor *visit, ts_pub_case **cases, int *n, int *cap) {
    cJSON *root = NULL;
    ts_status res = TS_OK;
    TS_CHECK(ts_json_load_file(path, &root));
    const cJSON *row;
    cJSON_ArrayForEach(row, root) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(row, "id");
        if (!cJSON_IsString(id)) continue;
        int megatron = strncmp(id->valuestring, "megatron21-t1-", 14) == 0;
        int nvidia = strncmp(id->valuestring, "nvidia-dgxc-", 12) == 0 &&
                     (strstr(id->valuestring, "-bf16-") || strstr(id->valuestring, "-fp8-"));
        if (!(want_megatron ? megatron : nvidia)) continue;
        TS_CHECK_GOTO(ts_grow((void **)cases, *n, cap, sizeof **cases, "published runs"), res, exit);
        ts_pub_case *c = &(*cases)[*n];
        memset(c, 0, sizeof *c);
        snprintf(c->id, sizeof c->id, "%s", id->valuestring);
        TS_CHECK_GOTO(megatron ? megatron_case(path, row, ranks, cache, c)
                               : nvidia_case(path, row, moe_runs, cache, visit, c),
                      res, exit);
        if (c->moe && !moe_runs) continue; /* not predicted: the slot is reused */
        c->is_tflops = megatron;
        if (!c->unfit) {
            c->error = (c->predicted - c->measured) / c->measured;
            c->step_error = megatron ? c->measured / c->predicted - 1 : c->error;
        }
        (*n)++;
    }
exit:
    cJSON_Delete(root);
    return res;
}

static ts_status published_run(const char *dir, int ranks, int moe_runs, ts_pub_cache *cache, ts_pub_case **cases,
                               int *n) {
    static const char *const stack_files[] = {"older-stacks.json", "megatron-bridge.json", "megatron-bridge-moe.json"};
    static const ts_pub_kind stack_kinds[] = {TS_PUB_OLDER_STACK, TS_PUB_BRIDGE_STEP, TS_PUB_BRIDGE_MOE_STEP};
    *cases = NULL;
    *n = 0;
    int cap = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/megatron-sc21-table1.json", dir);
    ts_status res = run_file(path, 1, ranks, moe_runs, cache, NULL, cases, n, &cap);
    if (res == TS_OK) {
        snprintf(path, sizeof path, "%s/published-cases.json", dir);
        res = run_file(path, 0, ranks, moe_runs, cache, NULL, cases, n, &cap);
    }
    for (size_t f = 0; f < sizeof stack_kinds / sizeof stack_kinds[0] && res == TS_OK; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, stack_files[f]);
        res = ts_published_stacks_run(path, stack_kinds[f], moe_runs, cache, cases, n, &cap);
    }
    if (res != TS_OK) {
        free(*cases);
        *cases = NULL;
        *n = 0;
    }
    return res;
}

/* Both public entries with a cache of their own: one load per distinct model, system and stack. */
static ts_status published_cached(const char *dir, int ranks, int moe_runs, ts_pub_case **cases, int *n) {
    ts_pub_cache cache;
    ts_pub_cache_init(&cache);
    ts_status res = published_run(dir, ranks, moe_runs, &cache, cases, n);
    ts_pub_cache_free(&cache);
    return res;
}

ts_status ts_published_run(const char *dir, ts_pub_case **cases, int *n) {
    return published_cached(dir, 1, 1, cases, n);
}

ts_status ts_published_errors(const char *dir, ts_pub_case **cases, int *n) {
    return published_cached(dir, 0, 1, cases, n);
}

ts_status ts_published_errors_scoped(const char *dir, int moe_runs, ts_pub_case **cases, int *n) {
    return published_cached(dir, 0, moe_runs, cases, n);
}

ts_status ts_published_errors_with(const char *dir, ts_pub_cache *cache, ts_pub_case **cases, int *n) {
    return published_run(dir, 0, 1, cache, cases, n);
}

ts_status ts_published_visit(const char *dir, ts_pub_visit_fn fn, void *ctx) {
    char path[4096];
    snprintf(path, sizeof path, "%s/published-cases.json", dir);
    ts_pub_cache cache;
    ts_pub_cache_init(&cache);
    ts_pub_case *cases = NULL;
    int n = 0, cap = 0;
    pub_visitor visit = {fn, ctx};
    ts_status res = run_file(path, 0, 0, 1, &cache, &visit, &cases, &n, &cap);
    free(cases);
    ts_pub_cache_free(&cache);
    return res;
}
