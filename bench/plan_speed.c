/* Benchmark: how fast the layout search is. For three published-scale problems it times the
 * whole search (ts_search) with branch and bound (prune = 1, what `tessera plan` runs) and by
 * brute force (prune = 0, every valid layout evaluated), each repeated until at least --min-s
 * seconds of timing have accumulated (CLOCK_MONOTONIC, mean per search).
 *
 *   layouts/s = evaluated layouts / brute-force search time (one core: the search is serial)
 *
 * Targets: >= 10 million layouts/s, and every search (pruned and brute force) under 1 s.
 * The brute-force search is also the reference for the pruned one: both must return the same
 * ranked layouts (search.h promises the bound drops nothing better), else the row fails.
 *
 * Output: a table whose '#' header echoes every parameter, with a units row; --json prints the
 * same rows as one JSON document instead (the nccl-tests -J habit).
 * Exit status 1 when a search takes >= 1 s, the two searches disagree or a problem fails to load;
 * a missed layouts/s target is reported ("TARGET MISSED") but does not fail the run. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_args.h"
#include "common/paths.h"
#include "planner/search.h"

#define TARGET_LAYOUTS_PER_S 10e6
#define TARGET_SEARCH_S 1.0

typedef struct {
    const char *label;
    const char *model, *system;
    int gpus;
    long long global_batch, seq;
    const char *why; /* where the configuration comes from */
} bench_config;

/* DeepSeek-V3 was trained on H800s with a batch that ramps to 15360 sequences of 4K tokens
 * (DeepSeek-V3 report §4.2); 15360 = 2^10 · 15 has many divisors, so the space is large.
 * Llama 3 405B: 16K H100s, 8K-token sequences in its main stage (Llama 3 paper §3.3). */
static const bench_config configs[] = {
    {"llama2-70b@64", "llama2-70b", "h100-sxm-dgx", 64, 1024, 4096, "the README's question"},
    {"llama3-405b@16384", "llama3-405b", "h100-sxm-dgx", 16384, 2048, 8192, "Llama 3 §3.3"},
    {"deepseek-v3@2048", "deepseek-v3", "h800-dgx", 2048, 15360, 4096, "DeepSeek-V3 §4.2"},
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

typedef struct {
    int64_t searched, evaluated_pruned, evaluated_brute, feasible;
    int reps_pruned, reps_brute;
    double pruned_s, brute_s; /* mean per search */
    double layouts_per_s;     /* evaluated_brute / brute_s */
    double best_step_s;
    char best[256];
    int same;     /* pruned and brute force agree on the ranked layouts */
    int rate_ok, time_ok;
} bench_row;

/* Runs the search until min_s has accumulated; the last result is kept in *out. */
static ts_status time_search(const ts_problem *pb, const ts_search_opts *o, double min_s,
                             ts_search_result *out, double *mean_s, int *reps) {
    double total = 0;
    int n = 0;
    memset(out, 0, sizeof *out);
    do {
        ts_search_result_free(out);
        double t0 = bench_now_s();
        ts_status st = ts_search(pb, o, out);
        total += bench_now_s() - t0;
        n++;
        if (st != TS_OK) return st;
    } while (total < min_s);
    *mean_s = total / n;
    *reps = n;
    return TS_OK;
}

static int same_layouts(const ts_search_result *a, const ts_search_result *b) {
    if (a->n_best != b->n_best) return 0;
    for (int i = 0; i < a->n_best; i++)
        if (memcmp(&a->best[i].layout, &b->best[i].layout, sizeof a->best[i].layout) != 0 ||
            a->best[i].step_s != b->best[i].step_s)
            return 0;
    return 1;
}

static ts_status run_config(const bench_config *c, int top_k, double min_s, bench_row *row) {
    ts_model m;
    ts_system s;
    ts_train t;
    ts_problem pb;
    ts_train_defaults(&t);
    t.global_batch = c->global_batch;
    t.seq = c->seq;
    TS_CHECK(ts_model_load(c->model, &m));
    TS_CHECK(ts_system_load(c->system, &s));
    TS_CHECK(ts_problem_init(&pb, &m, &s, &t, c->gpus));

    ts_search_opts o;
    ts_search_opts_defaults(&o);
    o.top_k = top_k;
    ts_search_result pruned, brute;
    o.prune = 1;
    ts_status st = time_search(&pb, &o, min_s, &pruned, &row->pruned_s, &row->reps_pruned);
    if (st != TS_OK) {
        ts_search_result_free(&pruned);
        return st;
    }
    o.prune = 0;
    st = time_search(&pb, &o, min_s, &brute, &row->brute_s, &row->reps_brute);
    if (st == TS_OK) {
        row->searched = brute.searched;
        row->evaluated_pruned = pruned.evaluated;
        row->evaluated_brute = brute.evaluated;
        row->feasible = brute.feasible;
        row->layouts_per_s = (double)brute.evaluated / row->brute_s;
        row->best_step_s = brute.n_best ? brute.best[0].step_s : 0;
        if (brute.n_best) ts_layout_format(&brute.best[0].layout, row->best, sizeof row->best);
        row->same = same_layouts(&pruned, &brute) && pruned.searched == brute.searched;
        row->rate_ok = row->layouts_per_s >= TARGET_LAYOUTS_PER_S;
        row->time_ok = row->pruned_s < TARGET_SEARCH_S && row->brute_s < TARGET_SEARCH_S;
    }
    ts_search_result_free(&pruned);
    ts_search_result_free(&brute);
    return st;
}

static void usage(FILE *f) {
    fprintf(f, "usage: plan_speed [--json] [--min-s S] [--top K]\n"
               "  --json     print the rows as one JSON document instead of the table\n"
               "  --min-s S  seconds of timing per search and configuration (default 0.5)\n"
               "  --top K    layouts kept by each search (default 10, as tessera plan)\n");
}

int main(int argc, char **argv) {
    int json = 0, top_k = 10;
    double min_s = 0.5;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--min-s") == 0 && i + 1 < argc) {
            if (!bench_parse_min_s("plan_speed", argv[++i], &min_s)) return 2;
        } else if (strcmp(argv[i], "--top") == 0 && i + 1 < argc) {
            long k = strtol(argv[++i], &end, 10);
            if (*end || k < 1 || k > 100000) {
                fprintf(stderr, "plan_speed: --top: expected an integer in [1, 100000], got \"%s\"\n", argv[i]);
                return 2;
            }
            top_k = (int)k;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "plan_speed: unexpected argument \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }

    bench_row rows[N_CONFIGS];
    memset(rows, 0, sizeof rows);
    int failed = 0;
    for (size_t i = 0; i < N_CONFIGS; i++) {
        ts_error_clear();
        if (run_config(&configs[i], top_k, min_s, &rows[i]) != TS_OK) {
            fprintf(stderr, "plan_speed: %s: %s\n", configs[i].label, ts_error_message());
            return 1;
        }
        if (!rows[i].time_ok || !rows[i].same) failed = 1;
    }

    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "bench", "plan_speed");
        cJSON *params = cJSON_AddObjectToObject(root, "params");
        cJSON_AddStringToObject(params, "data_dir", ts_data_dir());
        cJSON_AddNumberToObject(params, "top", top_k);
        cJSON_AddNumberToObject(params, "min_s", min_s);
        cJSON_AddNumberToObject(params, "target_layouts_per_s", TARGET_LAYOUTS_PER_S);
        cJSON_AddNumberToObject(params, "target_search_s", TARGET_SEARCH_S);
        cJSON *arr = cJSON_AddArrayToObject(root, "rows");
        for (size_t i = 0; i < N_CONFIGS; i++) {
            const bench_config *c = &configs[i];
            const bench_row *r = &rows[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "config", c->label);
            cJSON_AddStringToObject(o, "model", c->model);
            cJSON_AddStringToObject(o, "system", c->system);
            cJSON_AddNumberToObject(o, "gpus", c->gpus);
            cJSON_AddNumberToObject(o, "global_batch", (double)c->global_batch);
            cJSON_AddNumberToObject(o, "seq", (double)c->seq);
            cJSON_AddNumberToObject(o, "searched", (double)r->searched);
            cJSON_AddNumberToObject(o, "evaluated_pruned", (double)r->evaluated_pruned);
            cJSON_AddNumberToObject(o, "evaluated_brute", (double)r->evaluated_brute);
            cJSON_AddNumberToObject(o, "feasible", (double)r->feasible);
            cJSON_AddNumberToObject(o, "layouts_per_s", r->layouts_per_s);
            cJSON_AddNumberToObject(o, "pruned_s", r->pruned_s);
            cJSON_AddNumberToObject(o, "brute_s", r->brute_s);
            cJSON_AddNumberToObject(o, "reps_pruned", r->reps_pruned);
            cJSON_AddNumberToObject(o, "reps_brute", r->reps_brute);
            cJSON_AddNumberToObject(o, "best_step_s", r->best_step_s);
            cJSON_AddStringToObject(o, "best", r->best);
            cJSON_AddBoolToObject(o, "same_answer", r->same);
            cJSON_AddBoolToObject(o, "rate_target_met", r->rate_ok);
            cJSON_AddBoolToObject(o, "time_target_met", r->time_ok);
            cJSON_AddItemToArray(arr, o);
        }
        char *text = cJSON_Print(root);
        if (text == NULL) {
            fprintf(stderr, "plan_speed: out of memory printing JSON\n");
            return 1;
        }
        printf("%s\n", text);
        free(text);
        cJSON_Delete(root);
        return failed;
    }

    printf("# plan_speed: ts_search, pruned (prune=1) and brute force (prune=0), top %d, objective time,\n"
           "#   bf16, flash attention, TP inside a node; >= %.2f s of timing per search (mean shown);\n"
           "#   zoo %s\n", top_k, min_s, ts_data_dir());
    for (size_t i = 0; i < N_CONFIGS; i++)
        printf("#   %-18s %s on %d × %s, global batch %lld × seq %lld (%s)\n", configs[i].label,
               configs[i].model, configs[i].gpus, configs[i].system, configs[i].global_batch,
               configs[i].seq, configs[i].why);
    printf("# targets: >= %.0f M layouts/s (evaluated / brute-force time, one core); every search < %.1f s\n",
           TARGET_LAYOUTS_PER_S / 1e6, TARGET_SEARCH_S);
    printf("#%-18s %9s %9s %9s %8s %9s %9s %9s %5s %5s %9s %6s  %s\n", "config", "searched", "eval",
           "eval", "fit", "layouts/s", "search", "search", "reps", "reps", "best", "same", "verdict");
    printf("#%-18s %9s %9s %9s %8s %9s %9s %9s %5s %5s %9s %6s  %s\n", "", "", "pruned", "brute", "",
           "M/s", "pruned s", "brute s", "prune", "brute", "step s", "answer", "");
    for (size_t i = 0; i < N_CONFIGS; i++) {
        const bench_row *r = &rows[i];
        printf(" %-18s %9lld %9lld %9lld %8lld %9.2f %9.4f %9.4f %5d %5d %9.3f %6s  %s%s%s\n",
               configs[i].label, (long long)r->searched, (long long)r->evaluated_pruned,
               (long long)r->evaluated_brute, (long long)r->feasible, r->layouts_per_s / 1e6,
               r->pruned_s, r->brute_s, r->reps_pruned, r->reps_brute, r->best_step_s, r->same ? "yes" : "NO",
               r->rate_ok && r->time_ok ? "target met" : "TARGET MISSED",
               r->rate_ok ? "" : " (layouts/s)", r->time_ok ? "" : " (time >= 1 s)");
    }
    for (size_t i = 0; i < N_CONFIGS; i++) printf("# best %-18s %s\n", configs[i].label, rows[i].best);
    if (failed) printf("# FAILED: a search took >= %.1f s or pruned and brute force disagree\n", TARGET_SEARCH_S);
    return failed;
}
