/* The outcome of the validation experiment as JSON and as a table (reports/validate.h). */
#include <math.h>
#include <stdio.h>

#include "common/json.h"
#include "common/stats.h"
#include "reports/validate.h"

/* Adds the array `key` of the passes' figures to `c`. */
static ts_status add_runs(cJSON *c, const char *key, const double *v, int n) {
    cJSON *arr = cJSON_CreateDoubleArray(v, n);
    if (arr == NULL || !cJSON_AddItemToObject(c, key, arr)) {
        cJSON_Delete(arr);
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing %s", key);
    }
    return TS_OK;
}

/* A case's "replay": the first pass's replay, each pass's error and their median. */
static ts_status case_replay_json(const ts_validate_result *r, const ts_validate_case *vc, cJSON *c) {
    cJSON *rp = NULL;
    TS_CHECK(ts_replay_json(&vc->replay, &rp));
    if (!cJSON_AddItemToObject(c, "replay", rp)) {
        cJSON_Delete(rp);
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing a replay");
    }
    TS_CHECK(add_runs(rp, "errors", vc->replay_errors, r->repeat));
    cJSON_DeleteItemFromObjectCaseSensitive(rp, "error");
    if (!cJSON_AddNumberToObject(rp, "error", vc->replay_error))
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing a replay");
    return TS_OK;
}

/* One case: the comparison's JSON (sim/compare.h) with the experiment's fields added. */
static ts_status case_json(const ts_validate_result *r, const ts_validate_case *vc, cJSON *arr) {
    ts_status st = TS_OK;
    cJSON *c = NULL;
    TS_CHECK(ts_compare_json(&vc->cmp, &c));
    cJSON_AddItemToArray(arr, c);
    const ts_compare *x = &vc->cmp;
    TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "case", vc->index + 1), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "ranks", vc->ranks), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "simulated_s", x->simulated_step_s), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "measured_s", x->measured_step_s), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "error", x->step_error), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "measured_raw_s", x->measured_raw_step_s), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "raw_error", vc->raw_error), st, fail);
    TS_CHECK(add_runs(c, "measured_runs_s", vc->run_s, r->repeat));
    TS_CHECK(add_runs(c, "measured_raw_runs_s", vc->raw_s, r->repeat));
    TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "measured_spread", vc->run_spread), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(c, "measured_raw_spread", vc->raw_spread), st, fail);
    if (r->replayed) TS_CHECK(case_replay_json(r, vc, c));
    TS_CHECK(ts_validate_memory_json(&vc->memory, c));
fail:
    return st;
}

static ts_status memory_summary_json(const ts_validate_result *r, cJSON *root) {
    cJSON *o = cJSON_AddObjectToObject(root, "memory"), *med = NULL, *max = NULL;
    if (o) med = cJSON_AddObjectToObject(o, "median_abs_error"), max = cJSON_AddObjectToObject(o, "max_abs_error");
    if (med == NULL || max == NULL) return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing memory errors");
    for (int k = 0; k < TS_VALIDATE_MEM_KINDS; k++)
        if (!cJSON_AddNumberToObject(med, ts_validate_mem_names[k], r->memory_median_abs_error[k]) ||
            !cJSON_AddNumberToObject(max, ts_validate_mem_names[k], r->memory_max_abs_error[k]))
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing memory errors");
    return TS_OK;
}

/* The memory table: per case, the planner's error per category against the measured peak. */
static void print_memory(FILE *f, const ts_validate_result *r) {
    int known = 0;
    for (int i = 0; i < r->n; i++) known += r->cases[i].memory.known;
    if (known == 0) return;
    fprintf(f, "# memory: planner against the measured peak (worst rank), (predicted - measured) / measured\n");
    fprintf(f, "%-4s", "#");
    for (int k = 0; k < TS_VALIDATE_MEM_KINDS; k++) fprintf(f, " %12s", ts_validate_mem_names[k]);
    fprintf(f, "\n");
    for (int i = 0; i < r->n; i++) {
        const ts_validate_memory *m = &r->cases[i].memory;
        if (!m->known) continue;
        fprintf(f, "%-4d", r->cases[i].index + 1);
        for (int k = 0; k < TS_VALIDATE_MEM_KINDS; k++) fprintf(f, " %+11.1f%%", 100 * m->error[k]);
        fprintf(f, "\n");
    }
    fprintf(f, "# memory median |error|:");
    for (int k = 0; k < TS_VALIDATE_MEM_KINDS; k++)
        fprintf(f, " %s %.1f%%", ts_validate_mem_names[k], 100 * r->memory_median_abs_error[k]);
    fprintf(f, "\n# memory worst |error|: ");
    for (int k = 0; k < TS_VALIDATE_MEM_KINDS; k++)
        fprintf(f, " %s %.1f%%", ts_validate_mem_names[k], 100 * r->memory_max_abs_error[k]);
    fprintf(f, "\n");
}

void ts_validate_within_cores(ts_validate_result *r, int cores) {
    r->within_cores = cores > 0 ? cores : 0;
    r->n_within = 0;
    r->within_median_abs_error = r->within_max_abs_error = NAN;
    if (cores <= 0) return;
    double err[TS_VALIDATE_CASES], worst = 0;
    for (int i = 0; i < r->n && r->n_within < TS_VALIDATE_CASES; i++) {
        if (r->cases[i].ranks > cores) continue;
        double e = fabs(r->cases[i].cmp.step_error);
        err[r->n_within++] = e;
        worst = fmax(worst, e);
    }
    if (r->n_within == 0) return;
    r->within_median_abs_error = ts_median(err, r->n_within);
    r->within_max_abs_error = worst;
}

static ts_status within_cores_json(const ts_validate_result *r, cJSON *root) {
    if (r->within_cores <= 0) return TS_OK;
    cJSON *o = cJSON_AddObjectToObject(root, "within_cores");
    if (o == NULL || !cJSON_AddNumberToObject(o, "cores", r->within_cores) ||
        !cJSON_AddNumberToObject(o, "cases", r->n_within) ||
        !cJSON_AddNumberToObject(o, "median_abs_error", r->within_median_abs_error) ||
        !cJSON_AddNumberToObject(o, "max_abs_error", r->within_max_abs_error))
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing the within-cores summary");
    return TS_OK;
}

/* The cases within the cores apart, when some are not: past the cores the scheduler's time slices
 * add an error of their own. */
static void print_within_cores(FILE *f, const ts_validate_result *r) {
    if (r->within_cores <= 0 || r->n_within >= r->n) return;
    if (r->n_within > 0)
        fprintf(f, "# within the cores (at most %d ranks): %d layouts, median |error| %.1f%%, worst %.1f%%\n",
                r->within_cores, r->n_within, 100 * r->within_median_abs_error, 100 * r->within_max_abs_error);
    fprintf(f, "# the other %d run more ranks than the %d cores: the operating system time-slices them, which the "
               "simulator shares out evenly (docs/calibration-and-validation.md, oversubscribed ranks)\n",
            r->n - r->n_within, r->within_cores);
}

static ts_status noise_json(const ts_validate_noise *n, cJSON *root) {
    cJSON *o = cJSON_AddObjectToObject(root, "noise");
    if (o == NULL || !cJSON_AddNumberToObject(o, "load_avg_1min", n->load_avg_1min) ||
        !cJSON_AddNumberToObject(o, "cores", (double)n->cores) ||
        !cJSON_AddNumberToObject(o, "step_spread", n->step_spread) ||
        !cJSON_AddNumberToObject(o, "gauge_spread", n->gauge_spread) ||
        !cJSON_AddNumberToObject(o, "repeat_spread", n->repeat_spread) ||
        !cJSON_AddBoolToObject(o, "judgeable", n->judgeable) || !cJSON_AddStringToObject(o, "verdict", n->verdict))
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory writing the noise verdict");
    return TS_OK;
}

ts_status ts_validate_json(const ts_validate_result *r, cJSON **out) {
    ts_status st = TS_OK;
    cJSON *root = cJSON_CreateObject(), *arr;
    TS_CJSON_GOTO(root, st, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "system", r->system), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "repeat", r->repeat), st, fail);
    TS_CJSON_GOTO(cJSON_AddStringToObject(root, "precision", r->bf16 ? "bf16" : "fp32"), st, fail);
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "cases"), st, fail);
    for (int i = 0; i < r->n; i++) TS_CHECK_GOTO(case_json(r, &r->cases[i], arr), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "median_abs_error", r->median_abs_error), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "max_abs_error", r->max_abs_error), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "median_abs_raw_error", r->median_abs_raw_error), st, fail);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(root, "max_abs_raw_error", r->max_abs_raw_error), st, fail);
    TS_CHECK_GOTO(noise_json(&r->noise, root), st, fail);
    TS_CHECK_GOTO(memory_summary_json(r, root), st, fail);
    TS_CHECK_GOTO(within_cores_json(r, root), st, fail);
    if (r->replayed) {
        cJSON *rp;
        TS_CJSON_GOTO(rp = cJSON_AddObjectToObject(root, "replay"), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(rp, "median_abs_error", r->replay_median_abs_error), st, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(rp, "max_abs_error", r->replay_max_abs_error), st, fail);
    }
    *out = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    return st;
}

/* The op kind whose summed time is furthest off, for the table's last column. */
static const ts_compare_kind *worst_kind(const ts_compare *c) {
    const ts_compare_kind *w = NULL;
    for (int k = 0; k < c->n_kinds; k++)
        if (isfinite(c->kinds[k].error) && (w == NULL || fabs(c->kinds[k].error) > fabs(w->error))) w = &c->kinds[k];
    return w;
}

/* The '#' lines above the rows and the header. */
static void print_head(FILE *f, const ts_validate_result *r, int gauged) {
    fprintf(f, "# system %s; %lld sequences of %lld tokens, %s; measured: median step of %d steps after %d\n"
               "# warm-up%s\n",
            r->system, (long long)r->batch, (long long)r->seq, r->bf16 ? "bf16" : "fp32", r->steps - TS_VALIDATE_WARMUP,
            TS_VALIDATE_WARMUP,
            r->repeat > 1 ? ", median over the passes; spread: (max - min) / median of the passes" : "");
    if (gauged)
        fprintf(f, "# measured_s: at the calibration's speed on the speed gauge (exec/speed_gauge.h), error against it;\n"
                   "# raw_s: as timed, raw_error against it\n");
    fprintf(f, "%-4s %-9s %-78s %5s %11s %11s %8s", "#", "model", "layout", "ranks", "simulated_s", "measured_s",
            "error");
    if (r->repeat > 1) fprintf(f, " %7s", "spread");
    if (gauged) fprintf(f, " %9s %9s", "raw_s", "raw_error");
    if (r->replayed) fprintf(f, " %8s", "replay");
    fprintf(f, "  %s\n", "worst op kind");
}

ts_status ts_validate_print(FILE *f, const ts_validate_result *r) {
    int n = r->n, gauged = n > 0 && r->cases[0].cmp.gauged;
    print_head(f, r, gauged);
    for (int i = 0; i < n; i++) {
        const ts_validate_case *vc = &r->cases[i];
        const ts_compare *c = &vc->cmp;
        const ts_compare_kind *w = worst_kind(c);
        fprintf(f, "%-4d %-9s %-78s %5d %11.4f %11.4f %+7.1f%%", vc->index + 1, c->model, c->layout, vc->ranks,
                c->simulated_step_s, c->measured_step_s, 100 * c->step_error);
        if (r->repeat > 1) fprintf(f, " %6.1f%%", 100 * vc->run_spread);
        if (gauged) fprintf(f, " %9.4f %+8.1f%%", c->measured_raw_step_s, 100 * vc->raw_error);
        if (r->replayed) fprintf(f, " %+7.1f%%", 100 * vc->replay_error);
        if (w) fprintf(f, "  %s %+.0f%%", w->kind, 100 * w->error);
        fprintf(f, "\n");
    }
    fprintf(f, "# %d layouts: median |error| %.1f%%, worst %.1f%%", n, 100 * r->median_abs_error,
            100 * r->max_abs_error);
    if (r->repeat > 1) fprintf(f, "; median spread %.1f%% over %d passes", 100 * r->median_spread, r->repeat);
    fprintf(f, "\n");
    if (gauged) {
        fprintf(f, "# as timed: median |raw_error| %.1f%%, worst %.1f%%", 100 * r->median_abs_raw_error,
                100 * r->max_abs_raw_error);
        if (r->repeat > 1) fprintf(f, "; median spread %.1f%%", 100 * r->median_raw_spread);
        fprintf(f, "\n");
    }
    print_within_cores(f, r);
    print_memory(f, r);
    if (r->noise.verdict[0]) fprintf(f, "# machine: %s\n", r->noise.verdict);
    if (r->noise.verdict[0] && !r->noise.judgeable)
        fprintf(f, "# so the step errors above are not a verdict on the simulator%s\n",
                r->replayed ? "; the replay below runs on the measured times and is" : " (--replay gives one)");
    if (r->replayed)
        fprintf(f, "# replay (each run's compute at its measured times, the rest simulated): median |error| %.1f%%, "
                   "worst %.1f%%\n", 100 * r->replay_median_abs_error, 100 * r->replay_max_abs_error);
    return TS_OK;
}
