/* The sweep over systems and GPU counts: GPU lists, the searches, JSON and table (see sweep.h). */
#include "reports/sweep.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json.h"
#include "common/paths.h"
#include "planner/budget.h"
#include "reports/numfmt.h"
#include "reports/ranking.h"

#define MAX_GPUS (1 << 24)

/* A size in [1, max], the whole of [s, e). */
static int parse_count(const char *s, const char *e, int64_t max, long long *out) {
    if (s == e || (size_t)(e - s) > 12) return 0;
    char buf[16];
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = '\0';
    char *end = NULL;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end != '\0' || buf[0] == '-' || buf[0] == '+' || v < 1 || v > max) return 0;
    *out = v;
    return 1;
}

static ts_status push(const char *what, const char *noun, int64_t *out, int *n, int cap, long long v) {
    if (*n > 0 && v <= out[*n - 1])
        return TS_FAIL(TS_ERR_INPUT, "%s: expected increasing %ss, got %lld after %lld", what, noun, v,
                       (long long)out[*n - 1]);
    if (*n == cap) return TS_FAIL(TS_ERR_INPUT, "%s: expected at most %d %ss", what, cap, noun);
    out[(*n)++] = v;
    return TS_OK;
}

/* "A,B,C" and ranges "A..B" (A, 2A, 4A, ... up to B) of `noun`s ("GPU count") in [1, max], at
 * most cap. */
static ts_status parse_list(const char *what, const char *noun, const char *text, int64_t max, int cap, int64_t *out,
                            int *n) {
    *n = 0;
    if (text[0] == '\0')
        return TS_FAIL(TS_ERR_INPUT, "%s: expected %ss such as 8,16,32 or a range such as 8..1024, got \"\"", what,
                       noun);
    for (const char *item = text;;) {
        const char *end = item + strcspn(item, ",");
        const char *dots = strstr(item, "..");
        long long a, b;
        if (dots && dots < end) {
            if (!parse_count(item, dots, max, &a) || !parse_count(dots + 2, end, max, &b) || b < a)
                return TS_FAIL(TS_ERR_INPUT, "%s: expected a range A..B of %ss with 1 <= A <= B <= %lld, got \"%.*s\"",
                               what, noun, (long long)max, (int)(end - item), item);
            for (long long v = a; v <= b; v *= 2) TS_CHECK(push(what, noun, out, n, cap, v));
        } else {
            if (!parse_count(item, end, max, &a))
                return TS_FAIL(TS_ERR_INPUT, "%s: expected a %s in [1, %lld], got \"%.*s\"", what, noun,
                               (long long)max, (int)(end - item), item);
            TS_CHECK(push(what, noun, out, n, cap, a));
        }
        if (*end == '\0') break;
        item = end + 1;
    }
    return TS_OK;
}

ts_status ts_sweep_parse_gpus(const char *what, const char *text, int *gpus, int *n) {
    int64_t v[TS_SWEEP_MAX_COUNTS];
    TS_CHECK(parse_list(what, "GPU count", text, MAX_GPUS, TS_SWEEP_MAX_COUNTS, v, n));
    for (int i = 0; i < *n; i++) gpus[i] = (int)v[i];
    return TS_OK;
}

ts_status ts_sweep_parse_sizes(const char *what, const char *text, int64_t max, int64_t *out, int *n) {
    return parse_list(what, "size", text, max, TS_SWEEP_MAX_SIZES, out, n);
}

ts_status ts_sweep_parse_prices(const char *what, const char *text, ts_sweep_spec *spec) {
    char buf[2048];
    if (snprintf(buf, sizeof buf, "%s", text) >= (int)sizeof buf) return TS_FAIL(TS_ERR_INPUT, "%s: too long", what);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '='), *end = NULL;
        const char *num = eq ? eq + 1 : item;
        double v = strtod(num, &end);
        if (end == num || *end != '\0' || !(v >= 0 && v <= 1e6))
            return TS_FAIL(TS_ERR_INPUT, "%s: expected USD per GPU-hour in [0, 1e6] (2.5, or SYSTEM=2.5,...), got \"%s\"",
                           what, num);
        if (!eq && !spec->price_is_default)
            return TS_FAIL(TS_ERR_INPUT, "%s: expected one price for every system, got a second one in \"%s\"",
                           what, text);
        if (!eq) {
            spec->price_per_gpu_hour = v;
            spec->price_is_default = 0;
            continue;
        }
        *eq = '\0';
        int s = 0;
        while (s < spec->n_systems && strcmp(spec->systems[s].name, item) != 0) s++;
        if (s == spec->n_systems) return TS_FAIL(TS_ERR_INPUT, "%s: \"%s\" is not one of the swept systems", what, item);
        if (spec->prices[s] != 0) return TS_FAIL(TS_ERR_INPUT, "%s: %s given twice", what, item);
        spec->prices[s] = v > 0 ? v : -1; /* -1: free, told apart from "not given" */
    }
    return TS_OK;
}

double ts_sweep_price(const ts_sweep_spec *spec, int s) {
    double p = spec->prices[s], own = spec->systems[s].price_per_gpu_hour;
    if (p != 0) return p > 0 ? p : 0;
    return spec->price_is_default && own > 0 ? own : spec->price_per_gpu_hour;
}

int ts_sweep_price_is_example(const ts_sweep_spec *spec, int s) {
    return spec->prices[s] == 0 && spec->price_is_default;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The pick `tessera plan --top 1` makes for the problem (reports/ranking.h: the tie with the
 * fastest broken toward robustness; uneven stages by the sweep's --partition), into row->best. */
static ts_status plan_pick(const ts_problem *pb, const ts_search_opts *o, const ts_partition_opts *po,
                           const ts_bands *stats, ts_sweep_row *row) {
    ts_ranking_opts ro;
    ts_ranking_opts_defaults(&ro);
    ro.stats = stats;
    ro.partition = *po;
    ts_ranking rk;
    ts_status st = ts_ranking_make(pb, o, &ro, &rk);
    if (st == TS_OK) row->best = rk.search.best[0];
    ts_ranking_free(&rk);
    return st;
}

/* One (system, GPU count, batch, seq): the best layout, or why there is none. */
static ts_status sweep_one(const ts_sweep_spec *spec, const ts_bands *stats, ts_sweep_row *row) {
    ts_problem pb;
    ts_train t = spec->train;
    t.global_batch = row->global_batch;
    t.seq = row->seq;
    TS_CHECK(ts_problem_init(&pb, &spec->model, &spec->systems[row->system], &t, row->gpus));
    ts_search_opts o = spec->search;
    o.top_k = 1;
    ts_search_result r;
    ts_status st = ts_search_partitioned(&pb, &o, &spec->partition, &r);
    if (st == TS_OK) {
        double price = ts_sweep_price(spec, row->system);
        row->fits = 1;
        ts_search_result_free(&r);
        TS_CHECK(plan_pick(&pb, &o, &spec->partition, stats, row));
        row->cost_per_mtok = price * row->gpus / 3600 / row->best.tokens_per_s * 1e6;
    } else if (st == TS_ERR_INFEASIBLE && r.has_closest) {
        snprintf(row->reason, sizeof row->reason, "nothing fits: needs %.1f GB/GPU, %.1f GB usable",
                 r.closest.mem.total / 1e9, pb.usable_bytes / 1e9);
    } else if (st == TS_ERR_INFEASIBLE || st == TS_ERR_INPUT) {
        snprintf(row->reason, sizeof row->reason, "%s", ts_error_message());
    }
    ts_search_result_free(&r);
    if (st == TS_ERR_INFEASIBLE || st == TS_ERR_INPUT) {
        ts_error_clear();
        st = TS_OK;
    }
    return st;
}

/* With budgets: the (GPU count, batch) the budget search picks for the row's budget
 * (planner/budget.h: the best seconds per sequence on at most that many GPUs, the batch within
 * the tolerance), into row->gpus and row->global_batch, as `tessera plan --gpus-max` picks; when
 * nothing fits within the budget, the reason. */
static ts_status budget_pick(const ts_sweep_spec *spec, ts_sweep_row *row) {
    row->gpus_max = row->gpus;
    row->batch_requested = row->global_batch;
    ts_problem base;
    ts_train t = spec->train;
    t.global_batch = row->global_batch;
    t.seq = row->seq;
    TS_CHECK(ts_problem_init(&base, &spec->model, &spec->systems[row->system], &t, row->gpus));
    ts_budget_opts bo = {.gpus_max = row->gpus, .batch_tolerance = spec->batch_tolerance,
                         .exact_gpus = !spec->gpus_are_max};
    ts_budget_result br;
    ts_status st = ts_budget_search(&base, &spec->search, &spec->partition, &bo, &br);
    if (st == TS_OK) {
        row->gpus = br.choices[0].gpus;
        row->global_batch = br.choices[0].global_batch;
    } else if (st == TS_ERR_INFEASIBLE) {
        snprintf(row->reason, sizeof row->reason, "%s", ts_error_message());
        ts_error_clear();
        st = TS_OK;
    }
    ts_budget_result_free(&br);
    return st;
}

/* The recommendations: the row with the most tokens/s (ties: fewer GPUs, the first) and the
 * one with the least cost per token. */
static void recommend(ts_sweep_result *r) {
    int fast = -1, cheap = -1;
    for (int i = 0; i < r->n_rows; i++) {
        const ts_sweep_row *row = &r->rows[i];
        if (!row->fits) continue;
        if (fast < 0 || row->best.tokens_per_s > r->rows[fast].best.tokens_per_s) fast = i;
        if (cheap < 0 || row->cost_per_mtok < r->rows[cheap].cost_per_mtok) cheap = i;
    }
    if (fast >= 0) r->rows[fast].fastest = 1;
    if (cheap >= 0) r->rows[cheap].cheapest = 1;
}

ts_status ts_sweep_run(const ts_sweep_spec *spec, ts_sweep_result *out) {
    memset(out, 0, sizeof *out);
    int nb = spec->batches ? spec->n_batches : 1, nl = spec->seqs ? spec->n_seqs : 1;
    int total = spec->n_gpus * nb * nl * spec->n_systems;
    out->rows = calloc(total > 0 ? (size_t)total : 1, sizeof *out->rows);
    if (out->rows == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d sweep rows", total);
    double t0 = now_s();
    ts_bands stats;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/validation/published", ts_data_dir());
    TS_CHECK(ts_bands_compute(dir, spec->train.stack.name, spec->model.moe.experts > 0, &stats));
    for (int g = 0; g < spec->n_gpus; g++)
        for (int b = 0; b < nb; b++)
            for (int l = 0; l < nl; l++)
                for (int s = 0; s < spec->n_systems; s++) {
                    ts_sweep_row *row = &out->rows[out->n_rows];
                    row->gpus = spec->gpus[g];
                    row->system = s;
                    row->global_batch = spec->batches ? spec->batches[b] : spec->train.global_batch;
                    row->seq = spec->seqs ? spec->seqs[l] : spec->train.seq;
                    if (spec->budget) TS_CHECK(budget_pick(spec, row));
                    if (row->reason[0] == '\0') TS_CHECK(sweep_one(spec, &stats, row));
                    out->n_fit += row->fits;
                    out->n_rows++;
                    if (spec->progress) spec->progress(spec->progress_ctx, out->n_rows, total);
                }
    out->search_s = now_s() - t0;
    recommend(out);
    if (out->n_fit == 0 && total > 0) {
        const ts_sweep_row *last = &out->rows[out->n_rows - 1];
        return TS_FAIL(TS_ERR_INFEASIBLE, "nothing fits at any GPU count of the sweep; at %d × %s: %s", last->gpus,
                       spec->systems[last->system].name, last->reason);
    }
    return TS_OK;
}

void ts_sweep_result_free(ts_sweep_result *r) {
    free(r->rows);
    r->rows = NULL;
    r->n_rows = 0;
}

#define NUM(obj, key, v) TS_CJSON_GOTO(cJSON_AddNumberToObject((obj), (key), (v)), res, fail)
#define STR(obj, key, v) TS_CJSON_GOTO(cJSON_AddStringToObject((obj), (key), (v)), res, fail)
#define BOOL(obj, key, v) TS_CJSON_GOTO(cJSON_AddBoolToObject((obj), (key), (v)), res, fail)

/* A list of sizes as a JSON array (one = the request's value when the list is NULL). */
static ts_status add_sizes(cJSON *root, const char *key, const int64_t *v, int n, int64_t one) {
    cJSON *arr = cJSON_AddArrayToObject(root, key);
    if (arr == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the sweep JSON");
    for (int i = 0; i < (v ? n : 1); i++) {
        cJSON *x = cJSON_CreateNumber((double)(v ? v[i] : one));
        if (x == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the sweep JSON");
        cJSON_AddItemToArray(arr, x);
    }
    return TS_OK;
}

ts_status ts_sweep_to_json(const ts_sweep_spec *spec, const ts_sweep_result *r, cJSON **out) {
    ts_status res = TS_OK;
    cJSON *root = cJSON_CreateObject(), *arr;
    TS_CJSON_GOTO(root, res, fail);
    STR(root, "tessera", "sweep");
    STR(root, "model", spec->model.name);
    NUM(root, "global_batch", (double)spec->train.global_batch);
    NUM(root, "seq", (double)spec->train.seq);
    STR(root, "dtype", ts_dtype_names[spec->train.dtype]);
    STR(root, "fix", spec->fix ? spec->fix : "");
    NUM(root, "price_per_gpu_hour", spec->price_per_gpu_hour);
    BOOL(root, "price_is_default", spec->price_is_default);
    TS_CJSON_GOTO(arr = cJSON_AddObjectToObject(root, "prices"), res, fail);
    for (int s = 0; s < spec->n_systems; s++) NUM(arr, spec->systems[s].name, ts_sweep_price(spec, s));
    TS_CHECK_GOTO(add_sizes(root, "global_batches", spec->batches, spec->n_batches, spec->train.global_batch), res, fail);
    TS_CHECK_GOTO(add_sizes(root, "seqs", spec->seqs, spec->n_seqs, spec->train.seq), res, fail);
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "systems"), res, fail);
    for (int s = 0; s < spec->n_systems; s++) {
        cJSON *name = cJSON_CreateString(spec->systems[s].name);
        TS_CJSON_GOTO(name, res, fail);
        cJSON_AddItemToArray(arr, name);
    }
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "gpus"), res, fail);
    for (int g = 0; g < spec->n_gpus; g++) {
        cJSON *v = cJSON_CreateNumber(spec->gpus[g]);
        TS_CJSON_GOTO(v, res, fail);
        cJSON_AddItemToArray(arr, v);
    }
    if (spec->budget) {
        TS_CJSON_GOTO(arr = cJSON_AddObjectToObject(root, "budget"), res, fail);
        BOOL(arr, "gpus_max", spec->gpus_are_max);
        NUM(arr, "batch_tolerance", spec->batch_tolerance);
    }
    NUM(root, "search_s", r->search_s);
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "rows"), res, fail);
    for (int i = 0; i < r->n_rows; i++) {
        const ts_sweep_row *row = &r->rows[i];
        cJSON *o = cJSON_CreateObject();
        TS_CJSON_GOTO(o, res, fail);
        cJSON_AddItemToArray(arr, o);
        NUM(o, "gpus", row->gpus);
        STR(o, "system", spec->systems[row->system].name);
        NUM(o, "global_batch", (double)row->global_batch);
        NUM(o, "seq", (double)row->seq);
        BOOL(o, "fits", row->fits);
        if (spec->budget) {
            NUM(o, "gpus_max", row->gpus_max);
            NUM(o, "global_batch_requested", (double)row->batch_requested);
            if (row->fits) NUM(o, "idle_gpus", row->gpus_max - row->gpus);
        }
        if (!row->fits) {
            STR(o, "reason", row->reason);
            continue;
        }
        char text[256];
        ts_layout_format(&row->best.layout, text, sizeof text);
        STR(o, "layout", text);
        NUM(o, "step_s", row->best.step_s);
        NUM(o, "tokens_per_s", row->best.tokens_per_s);
        NUM(o, "tflops_per_gpu", row->best.tflops_per_gpu);
        NUM(o, "mfu", row->best.mfu);
        NUM(o, "memory_bytes", row->best.mem.total);
        NUM(o, "price_per_gpu_hour", ts_sweep_price(spec, row->system));
        NUM(o, "cost_per_mtok", row->cost_per_mtok);
        BOOL(o, "fastest", row->fastest);
        BOOL(o, "cheapest", row->cheapest);
    }
    *out = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    *out = NULL;
    return res;
}

/* The request's lists and prices, echoed. */
static void print_request(FILE *f, const ts_sweep_spec *spec) {
    int cp = spec->train.cp_kind != TS_CP_RING;
    fprintf(f, "# tessera sweep: %s, batch", spec->model.name);
    for (int b = 0; b < (spec->batches ? spec->n_batches : 1); b++)
        fprintf(f, "%s%lld", b ? "," : " ", (long long)(spec->batches ? spec->batches[b] : spec->train.global_batch));
    fputs(" ×", f);
    for (int l = 0; l < (spec->seqs ? spec->n_seqs : 1); l++)
        fprintf(f, "%s%lld", l ? "," : " ", (long long)(spec->seqs ? spec->seqs[l] : spec->train.seq));
    char mods[200];
    fprintf(f, " tokens, %s%s%s%s%s%s%s; systems:", ts_dtype_names[spec->train.dtype],
            spec->train.flash_attention ? ", flash attention" : "", cp ? ", CP " : "",
            cp ? ts_cp_kind_names[spec->train.cp_kind] : "", ts_recompute_modules_said(&spec->train, mods, sizeof mods),
            spec->fix ? ", fix " : "", spec->fix ? spec->fix : "");
    for (int s = 0; s < spec->n_systems; s++) fprintf(f, " %s", spec->systems[s].name);
    fputs("\n# best layout per (GPUs, batch, seq, system) by step time; USD per GPU-hour:", f);
    for (int s = 0; s < spec->n_systems; s++) {
        char usd[32];
        const char *whose = !ts_sweep_price_is_example(spec, s) ? ""
                            : spec->systems[s].price_per_gpu_hour > 0 ? " (its system file's example)" : " (default)";
        fprintf(f, " %s %s%s%s", spec->systems[s].name, ts_fmt_usd(ts_sweep_price(spec, s), usd, sizeof usd), whose,
                s + 1 < spec->n_systems ? "," : "");
    }
    fputs("; set them with --price\n", f);
    if (spec->budget) {
        fprintf(f, "# budgets: %s GPUs per row%s", spec->gpus_are_max ? "at most the swept" : "exactly the swept",
                spec->gpus_are_max ? " (--gpus-max; whole nodes below it)" : "");
        if (spec->batch_tolerance > 0) fprintf(f, ", the batch within ±%.3g%% (--batch-tolerance)", 100 * spec->batch_tolerance);
        fputs("; max: the budget, idle: its GPUs left unused\n", f);
    }
}

/* The recommendations in words. */
static void print_recommendations(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r) {
    for (int i = 0; i < r->n_rows; i++) {
        const ts_sweep_row *row = &r->rows[i];
        if (!row->fastest && !row->cheapest) continue;
        char tok[48], usd[48];
        fprintf(f, "# recommended (%s%s%s): %d × %s, batch %lld × %lld: %s tokens/s, %s per 1M tokens\n",
                row->fastest ? "fastest" : "", row->fastest && row->cheapest ? ", " : "",
                row->cheapest ? "cheapest per token" : "", row->gpus, spec->systems[row->system].name,
                (long long)row->global_batch, (long long)row->seq, ts_fmt_count(row->best.tokens_per_s, tok, sizeof tok),
                ts_fmt_usd(row->cost_per_mtok, usd, sizeof usd));
    }
}

ts_status ts_sweep_print(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r) {
    print_request(f, spec);
    fprintf(f, "#%5s", "gpus");
    if (spec->budget) fprintf(f, " %5s %5s", "max", "idle");
    fprintf(f, " %-14s %6s %6s %-82s %9s %11s %6s %9s", "system", "batch", "seq", "layout", "step", "tokens/s", "MFU",
            "USD/Mtok");
    fprintf(f, "\n#%5s", "");
    if (spec->budget) fprintf(f, " %5s %5s", "", "");
    fprintf(f, " %-14s %6s %6s %-82s %9s %11s %6s %9s", "", "", "", "", "s", "", "%", "");
    fputc('\n', f);
    for (int i = 0; i < r->n_rows; i++) {
        const ts_sweep_row *row = &r->rows[i];
        fprintf(f, " %5d", row->gpus);
        if (spec->budget && row->fits) fprintf(f, " %5d %5d", row->gpus_max, row->gpus_max - row->gpus);
        else if (spec->budget) fprintf(f, " %5d %5s", row->gpus_max, "-");
        fprintf(f, " %-14s %6lld %6lld ", spec->systems[row->system].name, (long long)row->global_batch,
                (long long)row->seq);
        if (!row->fits) {
            fprintf(f, "(%s)\n", row->reason);
            continue;
        }
        char text[256], tok[48], usd[48];
        ts_layout_format(&row->best.layout, text, sizeof text);
        fprintf(f, "%-82s %9.3f %11s %6.1f %9s", text, row->best.step_s,
                ts_fmt_count(row->best.tokens_per_s, tok, sizeof tok), 100 * row->best.mfu,
                ts_fmt_usd(row->cost_per_mtok, usd, sizeof usd));
        if (row->fastest || row->cheapest)
            fprintf(f, "  <- %s%s%s", row->fastest ? "fastest" : "", row->fastest && row->cheapest ? ", " : "",
                    row->cheapest ? "cheapest" : "");
        fputc('\n', f);
    }
    print_recommendations(f, spec, r);
    fprintf(f, "# %d of %d rows fit; %d searches in %.3f s\n", r->n_fit, r->n_rows, r->n_rows, r->search_s);
    if (ferror(f) || fflush(f) != 0) return TS_FAIL(TS_ERR_IO, "write failed while printing the sweep");
    return TS_OK;
}
