/* The sweep over systems and GPU counts: GPU lists, the searches, JSON and table (see sweep.h). */
#include "reports/sweep.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json.h"
#include "common/paths.h"
#include "reports/ranking.h"

#define MAX_GPUS (1 << 24)

/* A count in [1, MAX_GPUS], the whole of [s, e). */
static int parse_count(const char *s, const char *e, long long *out) {
    if (s == e || (size_t)(e - s) > 12) return 0;
    char buf[16];
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = '\0';
    char *end = NULL;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end != '\0' || buf[0] == '-' || buf[0] == '+' || v < 1 || v > MAX_GPUS) return 0;
    *out = v;
    return 1;
}

static ts_status push(const char *what, int *gpus, int *n, long long v) {
    if (*n > 0 && v <= gpus[*n - 1])
        return TS_FAIL(TS_ERR_INPUT, "%s: expected increasing GPU counts, got %lld after %d", what, v, gpus[*n - 1]);
    if (*n == TS_SWEEP_MAX_COUNTS)
        return TS_FAIL(TS_ERR_INPUT, "%s: expected at most %d GPU counts", what, TS_SWEEP_MAX_COUNTS);
    gpus[(*n)++] = (int)v;
    return TS_OK;
}

ts_status ts_sweep_parse_gpus(const char *what, const char *text, int *gpus, int *n) {
    *n = 0;
    if (text[0] == '\0')
        return TS_FAIL(TS_ERR_INPUT, "%s: expected GPU counts such as 8,16,32 or a range such as 8..1024, got \"\"", what);
    for (const char *item = text;;) {
        const char *end = item + strcspn(item, ",");
        const char *dots = strstr(item, "..");
        long long a, b;
        if (dots && dots < end) {
            if (!parse_count(item, dots, &a) || !parse_count(dots + 2, end, &b) || b < a)
                return TS_FAIL(TS_ERR_INPUT, "%s: expected a range A..B of GPU counts with 1 <= A <= B <= %d, "
                               "got \"%.*s\"", what, MAX_GPUS, (int)(end - item), item);
            for (long long v = a; v <= b; v *= 2) TS_CHECK(push(what, gpus, n, v));
        } else {
            if (!parse_count(item, end, &a))
                return TS_FAIL(TS_ERR_INPUT, "%s: expected a GPU count in [1, %d], got \"%.*s\"", what, MAX_GPUS,
                               (int)(end - item), item);
            TS_CHECK(push(what, gpus, n, a));
        }
        if (*end == '\0') break;
        item = end + 1;
    }
    return TS_OK;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The pick `tessera plan --top 1` makes for the problem (reports/ranking.h: the tie with the
 * fastest broken toward robustness), into row->best. */
static ts_status plan_pick(const ts_problem *pb, const ts_search_opts *o, const ts_bands *stats, ts_sweep_row *row) {
    ts_ranking_opts ro;
    ts_ranking_opts_defaults(&ro);
    ro.stats = stats;
    ts_ranking rk;
    ts_status st = ts_ranking_make(pb, o, &ro, &rk);
    if (st == TS_OK) row->best = rk.search.best[0];
    ts_ranking_free(&rk);
    return st;
}

/* One (system, GPU count): the best layout, or why there is none. */
static ts_status sweep_one(const ts_sweep_spec *spec, const ts_system *sys, const ts_bands *stats, ts_sweep_row *row) {
    ts_problem pb;
    TS_CHECK(ts_problem_init(&pb, &spec->model, sys, &spec->train, row->gpus));
    ts_search_opts o = spec->search;
    o.top_k = 1;
    ts_search_result r;
    ts_status st = ts_search(&pb, &o, &r);
    if (st == TS_OK) {
        row->fits = 1;
        ts_search_result_free(&r);
        TS_CHECK(plan_pick(&pb, &o, stats, row));
        row->cost_per_mtok = spec->price_per_gpu_hour * row->gpus / 3600 / row->best.tokens_per_s * 1e6;
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

ts_status ts_sweep_run(const ts_sweep_spec *spec, ts_sweep_result *out) {
    memset(out, 0, sizeof *out);
    int total = spec->n_gpus * spec->n_systems;
    out->rows = calloc(total > 0 ? (size_t)total : 1, sizeof *out->rows);
    if (out->rows == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d sweep rows", total);
    double t0 = now_s();
    ts_bands stats;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/validation/published", ts_data_dir());
    TS_CHECK(ts_bands_compute(dir, spec->train.stack.name, &stats));
    for (int g = 0; g < spec->n_gpus; g++)
        for (int s = 0; s < spec->n_systems; s++) {
            ts_sweep_row *row = &out->rows[out->n_rows];
            row->gpus = spec->gpus[g];
            row->system = s;
            TS_CHECK(sweep_one(spec, &spec->systems[s], &stats, row));
            out->n_fit += row->fits;
            out->n_rows++;
            if (spec->progress) spec->progress(spec->progress_ctx, out->n_rows, total);
        }
    out->search_s = now_s() - t0;
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
    NUM(root, "search_s", r->search_s);
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(root, "rows"), res, fail);
    for (int i = 0; i < r->n_rows; i++) {
        const ts_sweep_row *row = &r->rows[i];
        cJSON *o = cJSON_CreateObject();
        TS_CJSON_GOTO(o, res, fail);
        cJSON_AddItemToArray(arr, o);
        NUM(o, "gpus", row->gpus);
        STR(o, "system", spec->systems[row->system].name);
        BOOL(o, "fits", row->fits);
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
        NUM(o, "cost_per_mtok", row->cost_per_mtok);
    }
    *out = root;
    return TS_OK;
fail:
    cJSON_Delete(root);
    *out = NULL;
    return res;
}

ts_status ts_sweep_print(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r) {
    int cp = spec->train.cp_kind != TS_CP_RING;
    fprintf(f, "# tessera sweep: %s, batch %lld × %lld tokens, %s%s%s%s%s%s; systems:", spec->model.name,
            (long long)spec->train.global_batch, (long long)spec->train.seq, ts_dtype_names[spec->train.dtype],
            spec->train.flash_attention ? ", flash attention" : "", cp ? ", CP " : "",
            cp ? ts_cp_kind_names[spec->train.cp_kind] : "", spec->fix ? ", fix " : "", spec->fix ? spec->fix : "");
    for (int s = 0; s < spec->n_systems; s++) fprintf(f, " %s", spec->systems[s].name);
    fprintf(f, "\n# best layout per (GPUs, system) by step time; cost at %.2f USD per GPU-hour%s\n",
            spec->price_per_gpu_hour, spec->price_is_default ? " (default; set it with --price)" : "");
    fprintf(f, "#%5s %-14s %-82s %9s %10s %6s %9s\n", "gpus", "system", "layout", "step", "tokens/s", "MFU",
            "USD/Mtok");
    fprintf(f, "#%5s %-14s %-82s %9s %10s %6s %9s\n", "", "", "", "s", "", "%", "");
    for (int i = 0; i < r->n_rows; i++) {
        const ts_sweep_row *row = &r->rows[i];
        fprintf(f, " %5d %-14s ", row->gpus, spec->systems[row->system].name);
        if (!row->fits) {
            fprintf(f, "(%s)\n", row->reason);
            continue;
        }
        char text[256];
        ts_layout_format(&row->best.layout, text, sizeof text);
        fprintf(f, "%-82s %9.3f %10.0f %6.1f %9.4f\n", text, row->best.step_s, row->best.tokens_per_s,
                100 * row->best.mfu, row->cost_per_mtok);
    }
    fprintf(f, "# %d of %d (GPUs, system) pairs fit; %d searches in %.3f s\n", r->n_fit, r->n_rows, r->n_rows,
            r->search_s);
    if (ferror(f) || fflush(f) != 0) return TS_FAIL(TS_ERR_IO, "write failed while printing the sweep");
    return TS_OK;
}
