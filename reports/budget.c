/* The budget's answer as lines and JSON (see budget.h). */
#include "reports/budget.h"

#include "common/json.h"
#include "reports/numfmt.h"

ts_status ts_budget_print(FILE *f, int64_t batch_requested, const ts_budget_opts *bo, const ts_budget_result *r) {
    const ts_budget_choice *b = &r->choices[0];
    char idle[64], change[96];
    int n_idle = bo->gpus_max - b->gpus;
    snprintf(idle, sizeof idle, n_idle ? "%d idle" : "none idle", n_idle);
    long long d = (long long)(b->global_batch - batch_requested);
    if (d == 0) snprintf(change, sizeof change, "the requested %lld", (long long)batch_requested);
    else snprintf(change, sizeof change, "%lld (%+lld sequences per step, %+.1f%%, from %lld)",
                  (long long)b->global_batch, d, 100.0 * (double)d / (double)batch_requested,
                  (long long)batch_requested);
    char tol[64] = " exactly";
    if (bo->batch_tolerance > 0) snprintf(tol, sizeof tol, " ±%.3g%% (--batch-tolerance)", 100 * bo->batch_tolerance);
    fprintf(f, "# budget: %s %d GPUs%s, global batch %lld%s: %d (GPU count, batch) pairs searched",
            bo->exact_gpus ? "exactly" : "at most", bo->gpus_max, bo->exact_gpus ? "" : " (--gpus-max)",
            (long long)batch_requested, tol, r->searched);
    if (r->pruned_counts)
        fprintf(f, ", %d smaller counts left out (too few GPUs to be faster)", r->pruned_counts);
    if (r->searched >= TS_BUDGET_MAX_SEARCHES)
        fprintf(f, ", stopped at the limit of %d searches (the largest counts first)", TS_BUDGET_MAX_SEARCHES);
    fputc('\n', f);
    fprintf(f, "# budget pick: %d GPUs (%s), global batch %s\n", b->gpus, idle, change);
    for (int i = 1; i < r->n; i++) {
        char text[256], tok[32];
        ts_layout_format(&r->choices[i].best.layout, text, sizeof text);
        ts_fmt_count(r->choices[i].best.tokens_per_s, tok, sizeof tok);
        fprintf(f, "#   next %d: %d GPUs, batch %lld: %s tokens/s, MFU %.1f%% (%s)\n", i, r->choices[i].gpus,
                (long long)r->choices[i].global_batch, tok, 100 * r->choices[i].best.mfu, text);
    }
    return ferror(f) ? TS_FAIL(TS_ERR_IO, "write failed while printing the budget") : TS_OK;
}

#define NUM(obj, key, v) TS_CJSON_GOTO(cJSON_AddNumberToObject((obj), (key), (v)), res, exit)

ts_status ts_budget_add_json(cJSON *root, int64_t batch_requested, const ts_budget_opts *bo,
                             const ts_budget_result *r) {
    ts_status res = TS_OK;
    cJSON *o, *arr;
    const ts_budget_choice *b = &r->choices[0];
    TS_CJSON_GOTO(o = cJSON_AddObjectToObject(root, "budget"), res, exit);
    NUM(o, "gpus_max", bo->gpus_max);
    NUM(o, "batch_tolerance", bo->batch_tolerance);
    NUM(o, "global_batch_requested", (double)batch_requested);
    NUM(o, "gpus", b->gpus);
    NUM(o, "idle_gpus", bo->gpus_max - b->gpus);
    NUM(o, "global_batch", (double)b->global_batch);
    NUM(o, "batch_change", (double)(b->global_batch - batch_requested));
    NUM(o, "searched", r->searched);
    NUM(o, "pruned_counts", r->pruned_counts);
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(o, "choices"), res, exit);
    for (int i = 0; i < r->n; i++) {
        cJSON *c = cJSON_CreateObject();
        TS_CJSON_GOTO(c, res, exit);
        cJSON_AddItemToArray(arr, c);
        char text[256];
        ts_layout_format(&r->choices[i].best.layout, text, sizeof text);
        NUM(c, "gpus", r->choices[i].gpus);
        NUM(c, "global_batch", (double)r->choices[i].global_batch);
        TS_CJSON_GOTO(cJSON_AddStringToObject(c, "layout", text), res, exit);
        NUM(c, "step_s", r->choices[i].best.step_s);
        NUM(c, "tokens_per_s", r->choices[i].best.tokens_per_s);
        NUM(c, "mfu", r->choices[i].best.mfu);
    }
exit:
    return res;
}
