/* Benchmark: how fast `tessera sweep` answers the capacity-planning question "Llama-3-70B on 8 to
 * 1024 GPUs, H100 vs B200: throughput, MFU and cost per token?" — the whole sweep through the
 * library (reports/sweep.h: one search per (system, GPU count), 2 systems × 8 counts), repeated
 * until at least --min-s seconds of timing have accumulated (CLOCK_MONOTONIC, mean per sweep).
 *
 * Target: one sweep under 2 s. Output: '#' lines echoing every parameter, then the sweep's table
 * (ts_sweep_print) and a verdict line; --json prints the sweep's JSON form with the timing
 * instead (the nccl-tests -J habit). Exit status 1 when the target is missed or a problem fails
 * to load. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_args.h"
#include "common/json.h"
#include "reports/report.h"
#include "reports/sweep.h"

#define TARGET_S 2.0
#define MODEL "llama3-70b"
#define GPUS "8..1024"
static const char *const system_names[] = {"h100-sxm-dgx", "b200-dgx"};
#define N_SYSTEMS (sizeof system_names / sizeof system_names[0])

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int fail(const char *what) {
    fprintf(stderr, "sweep_speed: %s: %s\n", what, ts_error_message());
    return 1;
}

int main(int argc, char **argv) {
    int json = 0;
    double min_s = 1.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--min-s") == 0 && i + 1 < argc) {
            if (!bench_parse_min_s("sweep_speed", argv[++i], &min_s)) return 2;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: sweep_speed [--json] [--min-s S]\n"
                   "  --json     print the sweep as JSON (with the timing) instead of the table\n"
                   "  --min-s S  seconds of timing to accumulate (default 1)\n");
            return 0;
        } else {
            fprintf(stderr, "sweep_speed: unexpected argument \"%s\"\n", argv[i]);
            return 2;
        }
    }

    ts_system systems[N_SYSTEMS];
    int gpus[TS_SWEEP_MAX_COUNTS], n_gpus = 0;
    ts_sweep_spec spec = {.systems = systems, .n_systems = (int)N_SYSTEMS,
                          .price_per_gpu_hour = TS_REPORT_DEFAULT_PRICE, .price_is_default = 1};
    ts_train_defaults(&spec.train);
    ts_search_opts_defaults(&spec.search);
    if (ts_model_load(MODEL, &spec.model) != TS_OK) return fail(MODEL);
    for (size_t s = 0; s < N_SYSTEMS; s++)
        if (ts_system_load(system_names[s], &systems[s]) != TS_OK) return fail(system_names[s]);
    if (ts_sweep_parse_gpus("gpus", GPUS, gpus, &n_gpus) != TS_OK) return fail("gpus");
    spec.gpus = gpus, spec.n_gpus = n_gpus;

    ts_sweep_result r = {0};
    int reps = 0;
    double total_s = 0, fastest_s = 1e300;
    do {
        ts_sweep_result_free(&r);
        double t0 = now_s();
        if (ts_sweep_run(&spec, &r) != TS_OK) return fail("sweep");
        double dt = now_s() - t0;
        total_s += dt;
        if (dt < fastest_s) fastest_s = dt;
        reps++;
    } while (total_s < min_s);
    double mean_s = total_s / reps;
    int met = mean_s < TARGET_S;

    ts_status st;
    if (json) {
        cJSON *root = NULL;
        st = ts_sweep_to_json(&spec, &r, &root);
        if (st == TS_OK && (!cJSON_AddNumberToObject(root, "reps", reps) ||
                            !cJSON_AddNumberToObject(root, "mean_s", mean_s) ||
                            !cJSON_AddNumberToObject(root, "fastest_s", fastest_s) ||
                            !cJSON_AddNumberToObject(root, "target_s", TARGET_S)))
            st = TS_FAIL(TS_ERR_NOMEM, "out of memory");
        if (st == TS_OK) st = ts_json_write_file("-", root);
        cJSON_Delete(root);
    } else {
        printf("# sweep_speed: %s on %s, %s; GPUs %s; batch %lld × %lld tokens; target < %.1f s per sweep\n",
               MODEL, system_names[0], system_names[1], GPUS, (long long)spec.train.global_batch,
               (long long)spec.train.seq, TARGET_S);
        st = ts_sweep_print(stdout, &spec, &r);
        printf("# %d searches per sweep, %d sweeps: mean %.3f s, fastest %.3f s per sweep — %s\n", r.n_rows, reps,
               mean_s, fastest_s, met ? "target met" : "TARGET MISSED");
    }
    ts_sweep_result_free(&r);
    if (st != TS_OK) return fail("output");
    return met ? 0 : 1;
}
