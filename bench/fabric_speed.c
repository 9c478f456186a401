/* Benchmark: what fabric tiers cost the simulator. Llama-3-405B on 16384 H100s (Llama 3 paper
 * §3.3.2: TP 8, PP 16, DP 128), every rank simulated, on the flat fabric of h100-sxm-dgx and on
 * the three-tier rail-optimized fabric of h100-superpod (same nodes; its DP groups cross the
 * spine, its pipeline transfers the core, and each such flow also crosses the rank's NIC link).
 * Each system's step is built and simulated `reps` times, flat and tiered alternating so that
 * a shared machine's drift hits both alike; the figure is the median simulate time (ts_simulate,
 * CLOCK_MONOTONIC) and the ratio tiered / flat.
 *
 * Target: ratio < 1.5 (issue 25). Exit 1 when it is missed or a configuration fails; 2 on bad
 * flags. Output: '#' lines echoing the parameters, a units row, one row per fabric; --json the
 * same as one JSON document. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_args.h"
#include "planner/search.h"
#include "program/program.h"
#include "sim/engine.h"

#define TARGET_RATIO 1.5
#define REPS_DEFAULT 3
#define REPS_MAX 15

static const char *const systems[] = {"h100-sxm-dgx", "h100-superpod"};
#define PINS "tp=8,pp=16,dp=128"

typedef struct {
    ts_problem pb;
    ts_program prog;
    double sim_s[REPS_MAX];
    double step_s;
    int64_t events;
} fabric_run;

static ts_status setup(const char *system, fabric_run *r) {
    ts_model m;
    ts_system s;
    ts_train t;
    ts_train_defaults(&t);
    t.global_batch = 2048;
    t.seq = 8192;
    TS_CHECK(ts_model_load("llama3-405b", &m));
    TS_CHECK(ts_system_load(system, &s));
    TS_CHECK(ts_problem_init(&r->pb, &m, &s, &t, 16384));
    ts_search_opts o;
    ts_search_opts_defaults(&o);
    o.top_k = 1;
    TS_CHECK(ts_pins_parse("pins", PINS, &o.pins));
    ts_search_result sr;
    ts_status st = ts_search(&r->pb, &o, &sr);
    if (st == TS_OK) st = ts_program_build(&r->pb, &sr.best[0].layout, NULL, &r->prog);
    ts_search_result_free(&sr);
    return st;
}

static ts_status simulate_once(fabric_run *r, int rep) {
    ts_sim_opts so = {.full = 1, .stats_spans_only = 1};
    ts_sim_result res;
    double t0 = bench_now_s();
    TS_CHECK(ts_simulate(&r->pb, &r->prog, &so, &res));
    r->sim_s[rep] = bench_now_s() - t0;
    r->step_s = res.step_s;
    r->events = res.events;
    ts_sim_result_free(&res);
    return TS_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void print(const fabric_run *runs, const double *med, double ratio, int reps, int json) {
    if (json) {
        cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "rows");
        cJSON_AddStringToObject(root, "bench", "fabric_speed");
        cJSON_AddStringToObject(root, "config", "llama3-405b@16384 " PINS " every rank");
        cJSON_AddNumberToObject(root, "reps", reps);
        for (int i = 0; i < 2; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "system", systems[i]);
            cJSON_AddNumberToObject(o, "tiers", runs[i].pb.sys.n_tiers);
            cJSON_AddNumberToObject(o, "sim_s", med[i]);
            cJSON_AddNumberToObject(o, "events", (double)runs[i].events);
            cJSON_AddNumberToObject(o, "step_s", runs[i].step_s);
            cJSON_AddItemToArray(rows, o);
        }
        cJSON_AddNumberToObject(root, "ratio", ratio);
        cJSON_AddNumberToObject(root, "target_ratio", TARGET_RATIO);
        char *text = cJSON_Print(root);
        if (text) puts(text);
        free(text);
        cJSON_Delete(root);
        return;
    }
    printf("# fabric_speed: llama3-405b on 16384 GPUs, %s, every rank simulated; median of %d simulations\n", PINS,
           reps);
    printf("# target: tiered / flat simulate time < %.1f\n", TARGET_RATIO);
    printf("%-16s %6s %10s %12s %10s\n", "system", "tiers", "sim", "events", "step");
    printf("%-16s %6s %10s %12s %10s\n", "", "", "s", "", "s");
    for (int i = 0; i < 2; i++)
        printf("%-16s %6d %10.3f %12lld %10.4f\n", systems[i], runs[i].pb.sys.n_tiers, med[i],
               (long long)runs[i].events, runs[i].step_s);
    printf("# ratio tiered / flat: %.3f%s\n", ratio, ratio < TARGET_RATIO ? "" : "  TARGET MISSED");
}

int main(int argc, char **argv) {
    int reps = REPS_DEFAULT, json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N (1..%d)] [--json]\n", argv[0], REPS_MAX);
            return 2;
        }
    }
    if (reps < 1 || reps > REPS_MAX) {
        fprintf(stderr, "%s: --reps: expected 1..%d, got %d\n", argv[0], REPS_MAX, reps);
        return 2;
    }
    static fabric_run runs[2];
    for (int i = 0; i < 2; i++)
        if (setup(systems[i], &runs[i]) != TS_OK) {
            fprintf(stderr, "fabric_speed: %s: %s\n", systems[i], ts_error_message());
            return 1;
        }
    for (int rep = 0; rep < reps; rep++)
        for (int i = 0; i < 2; i++)
            if (simulate_once(&runs[i], rep) != TS_OK) {
                fprintf(stderr, "fabric_speed: %s: %s\n", systems[i], ts_error_message());
                return 1;
            }
    double med[2] = {median(runs[0].sim_s, reps), median(runs[1].sim_s, reps)};
    double ratio = med[1] / med[0];
    print(runs, med, ratio, reps, json);
    for (int i = 0; i < 2; i++) ts_program_free(&runs[i].prog);
    return ratio < TARGET_RATIO ? 0 : 1;
}
