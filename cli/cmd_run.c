/* `tessera run`: trains a plan's layout for real on MPI ranks (CPU: OpenBLAS + Open MPI; GPU:
 * cuBLAS + NCCL, one GPU per rank), op by op as the step program says, and reports losses, step
 * times and memory. Started without an MPI launcher it starts `mpirun` itself with the layout's
 * rank count. */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/json.h"
#include "common/stats.h"
#include "exec/kernel_table.h"
#include "exec/launch.h"
#include "exec/runtime.h"
#include "exec/speed_gauge.h"
#include "exec/trainer.h"
#include "exec/watchdog.h"
#include "planner/partition.h"
#include "planner/plan_json.h"
#include "program/trace.h"

static void help(void) {
    printf("usage: tessera run --plan plan.json [options]\n"
           "\n"
           "Trains the plan's layout for real on MPI ranks: each rank runs its stage's step program\n"
           "(OpenBLAS GEMMs and Open MPI collectives, or with --device cuda cuBLAS and NCCL on one GPU\n"
           "per rank), the transformer's losses are the same as on one rank. Without an MPI launcher\n"
           "it starts mpirun with the layout's rank count itself (--oversubscribe when the ranks\n"
           "exceed the cores, and it says so). It trains fp32 whatever dtype the plan was made for,\n"
           "says so on stderr, and reports the planner's memory for fp32.\n"
           "\n"
           "  -p, --plan FILE     a plan written by tessera plan -o\n"
           "  -i, --index I       which layout of the plan, 1-based (default 1)\n"
           "  -n, --steps N       training steps (default 10)\n"
           "  -w, --warmup W      steps left out of the step-time statistics (default 2)\n"
           "  -t, --trace FILE    write the last step's measured ops as a Chrome trace\n"
           "      --timeout S     end the job when start-up, a training step or gathering the\n"
           "                      results takes longer than S seconds (a rank stalled or died),\n"
           "                      naming the ranks of the node that hold it up (default 1800,\n"
           "                      torch.distributed's default; 0: no limit)\n"
           "      --json          print the summary as JSON instead of a table\n"
           "      --threads N     OpenBLAS threads per rank (default 1)\n"
           "      --seed S        parameter and data seed (default 1234)\n"
           "      --text FILE     train on a text file's bytes instead of the synthetic stream\n"
           "      --lr LR         AdamW learning rate (default 3e-3)\n"
           "      --params FILE   write the trained parameters (float32, exec/reference.h's order)\n"
           "      --device D      cpu (default) or cuda (needs make CUDA=1; see README, CUDA)\n"
           "      --stream-order O  program (default), dp-early or dp-late: issue the gradient\n"
           "                      reductions and parameter gathers (the DP stream) as early or as\n"
           "                      late as their waits allow, as a GPU may run them beside the\n"
           "                      backward; the losses must not change (a check of the waits on\n"
           "                      CPU ranks, exec/op_streams.h)\n"
           "  -h, --help          this help\n"
           "\n"
           "Fault injection for tests: TESSERA_FAULT_RANK=r makes rank r fail at step\n"
           "TESSERA_FAULT_STEP (default 0); the job ends with a message naming the rank.\n"
           "TESSERA_FAULT_MODE=kill makes it SIGKILL itself instead, =stop SIGSTOP itself (a\n"
           "stalled rank: the other ranks end the job after --timeout).\n"
           "Exit status: 0 ok, 2 bad input, 1 a rank failed.\n");
}

/* The slowest rank's `mine`, through `buf` (one float of backend memory: the backend's
 * collectives take no host buffers). */
static ts_status slowest_s(const ts_backend *be, ts_comm *world, float *buf, float mine, float *slowest) {
    TS_CHECK(be->kernels->to_device(buf, &mine, sizeof mine));
    TS_CHECK(be->all_reduce_max(world, buf, buf, 1));
    return be->kernels->to_host(slowest, buf, sizeof *slowest);
}

static double quantile(const double *sorted, int n, double q) {
    if (n == 0) return 0;
    double pos = q * (n - 1);
    int lo = (int)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

/* An injected fault of TESSERA_FAULT_MODE on this rank (fail is handled by the caller). */
static void inject_signal_fault(const char *mode) {
    if (mode && strcmp(mode, "kill") == 0) raise(SIGKILL);
    if (mode && strcmp(mode, "stop") == 0) raise(SIGSTOP);
}

/* What rank 0 reports in --json, gathered from every rank. */
typedef struct {
    const ts_problem *pb;     /* as trained (fp32) */
    const ts_layout *layout;
    ts_dtype plan_dtype;      /* what the plan was made for */
    int world, steps, warmup;
    const double *sorted;     /* (steps - warmup) measured step times, ascending */
    const float *losses;      /* (steps) */
    const double *kind_s;     /* (TS_OP_KIND_COUNT) last step by op kind, mean over ranks */
    const double *mems;       /* (world, RANK_STATS) each rank's peak bytes by category, ... */
    const double *worst;      /* (5) the largest of each category over the ranks */
    double moe_load_cv;       /* measured (ts_trainer_moe_load over the ranks); < 0: dense */
    const ts_eval *plan_eval; /* the planner's evaluation of the layout; NULL when it failed */
    const double *speed;      /* (steps) speed gauge per step (ts_gauge_step_speeds); NULL: not read */
    const double *readings;   /* (world, steps + 1) each rank's gauge readings (speed_gauge.h) */
    const double *step_s;     /* (steps) as timed */
} run_report;

/* Over the measured steps: the gauge's median, lowest and highest speed, and the median of step
 * time × speed, the step's work in gauge FLOPs (exec/speed_gauge.h). */
typedef struct {
    double median_flops_per_s, lo_flops_per_s, hi_flops_per_s, step_flop;
} gauge_stats;

static ts_status gauge_summary(const double *speed, const double *step_s, int steps, int warmup, gauge_stats *g) {
    int n = steps - warmup;
    double *v = malloc((size_t)n * sizeof *v), *w = malloc((size_t)n * sizeof *w);
    if (v == NULL || w == NULL) {
        free(v);
        free(w);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for the speed gauge's figures");
    }
    *g = (gauge_stats){.lo_flops_per_s = INFINITY, .hi_flops_per_s = 0};
    for (int i = 0; i < n; i++) {
        v[i] = speed[warmup + i];
        w[i] = step_s[warmup + i] * speed[warmup + i];
        g->lo_flops_per_s = fmin(g->lo_flops_per_s, v[i]);
        g->hi_flops_per_s = fmax(g->hi_flops_per_s, v[i]);
    }
    g->median_flops_per_s = ts_median(v, n);
    g->step_flop = ts_median(w, n);
    free(v);
    free(w);
    return TS_OK;
}

/* "gauge": {"flops_per_s": [per step], "readings_flops_per_s": [per rank: [before step 0, after
 * each step]], "median_flops_per_s", "step_flop_median"}. */
static ts_status gauge_json(cJSON *o, const run_report *r) {
    ts_status res = TS_OK;
    cJSON *g, *arr;
    gauge_stats gs;
    TS_CHECK(gauge_summary(r->speed, r->step_s, r->steps, r->warmup, &gs));
    TS_CJSON_GOTO(g = cJSON_AddObjectToObject(o, "gauge"), res, exit);
    TS_CJSON_GOTO(arr = cJSON_CreateDoubleArray(r->speed, r->steps), res, exit);
    if (!cJSON_AddItemToObject(g, "flops_per_s", arr)) {
        cJSON_Delete(arr);
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory adding the gauge's readings");
    }
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(g, "readings_flops_per_s"), res, exit);
    for (int k = 0; k < r->world; k++) {
        cJSON *mine = cJSON_CreateDoubleArray(r->readings + (size_t)k * (r->steps + 1), r->steps + 1);
        if (!cJSON_AddItemToArray(arr, mine)) {
            cJSON_Delete(mine);
            return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory adding rank %d's gauge readings", k);
        }
    }
    TS_CJSON_GOTO(cJSON_AddNumberToObject(g, "median_flops_per_s", gs.median_flops_per_s), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(g, "step_flop_median", gs.step_flop), res, exit);
exit:
    return res;
}

static const char *const mem_cat[] = {"weights", "grads", "optimizer", "activations", "buffers"};

/* What each rank reports at the end: its five memory peaks (mem_cat), then its MoE routing sums
 * (ts_trainer_moe_load). */
enum { RANK_STATS = 7, STAT_MOE_DEV = 5, STAT_MOE_EVEN = 6 };

/* {the five categories, "total"} of bytes v into parent[key] (or a new array element when key is
 * NULL), plus "rank" and "stage" when rank >= 0. */
static ts_status memory_json(cJSON *parent, const char *key, const double *v, int rank, int stage) {
    ts_status res = TS_OK;
    cJSON *m = key ? cJSON_AddObjectToObject(parent, key) : cJSON_CreateObject();
    TS_CJSON_GOTO(m, res, fail);
    if (!key && !cJSON_AddItemToArray(parent, m)) {
        cJSON_Delete(m);
        return TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory adding a rank's memory");
    }
    if (rank >= 0) {
        TS_CJSON_GOTO(cJSON_AddNumberToObject(m, "rank", rank), res, fail);
        TS_CJSON_GOTO(cJSON_AddNumberToObject(m, "stage", stage), res, fail);
    }
    double sum = 0;
    for (int k = 0; k < 5; k++) {
        TS_CJSON_GOTO(cJSON_AddNumberToObject(m, mem_cat[k], v[k]), res, fail);
        sum += v[k];
    }
    TS_CJSON_GOTO(cJSON_AddNumberToObject(m, "total", sum), res, fail);
fail:
    return res;
}

static ts_status run_json(const run_report *r) {
    ts_status res = TS_OK;
    char text[256];
    ts_layout_format(r->layout, text, sizeof text);
    int measured = r->steps - r->warmup;
    cJSON *o = cJSON_CreateObject(), *ss, *ls, *ks, *byrank;
    TS_CJSON_GOTO(o, res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "layout", text), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "model", r->pb->model.name), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "dtype", ts_dtype_names[r->pb->train.dtype]), res, exit);
    TS_CJSON_GOTO(cJSON_AddStringToObject(o, "plan_dtype", ts_dtype_names[r->plan_dtype]), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "ranks", r->world), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "steps", r->steps), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "warmup", r->warmup), res, exit);
    TS_CJSON_GOTO(ss = cJSON_AddObjectToObject(o, "step_s"), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(ss, "median", quantile(r->sorted, measured, 0.5)), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(ss, "p10", quantile(r->sorted, measured, 0.1)), res, exit);
    TS_CJSON_GOTO(cJSON_AddNumberToObject(ss, "p90", quantile(r->sorted, measured, 0.9)), res, exit);
    cJSON *each = cJSON_CreateDoubleArray(r->step_s, r->steps);
    if (!cJSON_AddItemToObject(ss, "each", each)) {
        cJSON_Delete(each);
        res = TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory adding the step times");
        goto exit;
    }
    TS_CJSON_GOTO(ls = cJSON_AddArrayToObject(o, "losses"), res, exit);
    for (int s = 0; s < r->steps; s++) {
        cJSON *n = cJSON_CreateNumber(r->losses[s]);
        TS_CJSON_GOTO(n, res, exit);
        if (!cJSON_AddItemToArray(ls, n)) {
            cJSON_Delete(n);
            res = TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory adding a loss");
            goto exit;
        }
    }
    TS_CJSON_GOTO(ks = cJSON_AddObjectToObject(o, "kind_s"), res, exit);
    for (int k = 0; k < TS_OP_KIND_COUNT; k++)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(ks, ts_op_kind_names[k], r->kind_s[k]), res, exit);
    TS_CHECK_GOTO(memory_json(o, "memory_bytes", r->worst, -1, 0), res, exit);
    /* Each rank's peaks: stages differ (the embedding, the head, the layers they hold). */
    TS_CJSON_GOTO(byrank = cJSON_AddArrayToObject(o, "memory_bytes_by_rank"), res, exit);
    for (int k = 0; k < r->world; k++)
        TS_CHECK_GOTO(memory_json(byrank, NULL, r->mems + RANK_STATS * (size_t)k, k, ts_rank_coords(r->layout, k).pp), res,
                      exit);
    if (r->moe_load_cv >= 0)
        TS_CJSON_GOTO(cJSON_AddNumberToObject(o, "moe_load_cv", r->moe_load_cv), res, exit);
    if (r->speed) TS_CHECK_GOTO(gauge_json(o, r), res, exit);
    if (r->plan_eval) {
        const ts_memory *pm = &r->plan_eval->mem;
        double v[5] = {pm->weights, pm->grads, pm->optimizer, pm->activations, pm->buffers};
        TS_CHECK_GOTO(memory_json(o, "planner_memory_bytes", v, -1, 0), res, exit);
    }
    res = ts_json_write_file("-", o);
exit:
    cJSON_Delete(o);
    return res;
}

/* Fails the whole job from any rank: the message names the rank (ts_runtime_abort). */
static _Noreturn void rank_fail(const ts_runtime *rt, ts_status st) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ts_error_message());
    ts_runtime_abort(rt, ts_exit_code(st), msg);
}

int cmd_run(int argc, char **argv) {
    const char *cmd = "run", *plan = NULL, *trace = NULL, *params_out = NULL;
    int index = 1, steps = 10, warmup = 2, json = 0, threads = 1;
    double timeout_s = 1800; /* torch.distributed's default process-group timeout, 30 min */
    ts_device device = TS_DEVICE_CPU;
    ts_train_opts opts;
    ts_train_opts_defaults(&opts);
    enum { OPT_JSON = 256, OPT_THREADS, OPT_SEED, OPT_TEXT, OPT_LR, OPT_PARAMS, OPT_DEVICE, OPT_TIMEOUT,
           OPT_ORDER };
    static const struct option longs[] = {
        {"plan", required_argument, 0, 'p'},   {"index", required_argument, 0, 'i'},
        {"steps", required_argument, 0, 'n'},  {"warmup", required_argument, 0, 'w'},
        {"trace", required_argument, 0, 't'},  {"json", no_argument, 0, OPT_JSON},
        {"threads", required_argument, 0, OPT_THREADS}, {"seed", required_argument, 0, OPT_SEED},
        {"text", required_argument, 0, OPT_TEXT}, {"lr", required_argument, 0, OPT_LR},
        {"params", required_argument, 0, OPT_PARAMS}, {"device", required_argument, 0, OPT_DEVICE},
        {"timeout", required_argument, 0, OPT_TIMEOUT}, {"stream-order", required_argument, 0, OPT_ORDER},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":p:i:n:w:t:h", longs, NULL)) != -1) {
        switch (c) {
        case 'p': plan = optarg; break;
        case 'i': index = (int)cli_int(cmd, "--index", optarg, 1, 1000000); break;
        case 'n': steps = (int)cli_int(cmd, "--steps", optarg, 1, 1000000); break;
        case 'w': warmup = (int)cli_int(cmd, "--warmup", optarg, 0, 1000000); break;
        case 't': trace = optarg; break;
        case OPT_JSON: json = 1; break;
        case OPT_THREADS: threads = (int)cli_int(cmd, "--threads", optarg, 1, 256); break;
        case OPT_SEED: opts.seed = (uint64_t)cli_int(cmd, "--seed", optarg, 0, INT64_MAX); break;
        case OPT_TEXT: opts.text = optarg; break;
        case OPT_PARAMS: params_out = optarg; break;
        case OPT_DEVICE:
            if (ts_device_parse(optarg, &device) != TS_OK) cli_usage_error(cmd, "%s", ts_error_message());
            break;
        case OPT_ORDER:
            if (ts_stream_order_parse(optarg, &opts.order) != TS_OK) cli_usage_error(cmd, "%s", ts_error_message());
            break;
        case OPT_TIMEOUT: timeout_s = cli_num(cmd, "--timeout", optarg, 0, 86400); break;
        case OPT_LR: opts.lr = (float)cli_num(cmd, "--lr", optarg, 1e-9, 1); break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (!plan) cli_usage_error(cmd, "--plan is required");
    if (ts_device_runnable(device) != TS_OK) cli_fail(cmd, ts_error_status());
    if (warmup >= steps) cli_usage_error(cmd, "--warmup %d leaves no step of %d to measure", warmup, steps);

    ts_problem pb;
    ts_layout *layouts = NULL;
    int n_layouts = 0;
    ts_status st = ts_plan_read(plan, &pb, &layouts, &n_layouts);
    /* A rank of a running job that cannot load the plan (a file its node lacks, or that changed
     * under the job) ends the job, naming itself. */
    if (st != TS_OK && ts_runtime_under_mpi()) rank_fail(NULL, st);
    if (st != TS_OK) cli_fail(cmd, st);
    if (index > n_layouts) cli_usage_error(cmd, "--index: %s holds %d layouts, got %d", plan, n_layouts, index);
    ts_layout layout = layouts[index - 1];
    free(layouts);
    /* The executor trains fp32 whatever precision the plan was made for (plan defaults to bf16):
     * the problem becomes fp32 here, so the program's byte counts and the planner memory reported
     * beside the measured one are those of what runs (4 + 4 + 8 bytes per parameter, 4-byte
     * activations), not the plan's. */
    ts_dtype plan_dtype = pb.train.dtype;
    ts_train_set_dtype(&pb.train, TS_DTYPE_FP32);
    if (!ts_runtime_under_mpi()) {
        /* A layout the executor refuses is said once, here, before any rank starts (inside an
         * existing mpirun, ts_trainer_init says it on every rank). */
        st = ts_trainer_check(&pb, &layout);
        if (st != TS_OK) cli_fail(cmd, st);
        cli_launch_mpirun(cmd, ts_rank_count(&layout), argc, argv);
    }

    ts_watchdog_arm_startup(ts_world_rank_now(), timeout_s);
    ts_runtime rt;
    st = ts_runtime_init(&rt, &layout);
    if (st != TS_OK) rank_fail(NULL, st);
    ts_program prog;
    ts_split split; /* uneven stages, when the plan chose them: the program carries them */
    int has_split = 0;
    st = ts_plan_read_split(plan, &pb, &layout, index - 1, &split, &has_split);
    ts_program_opts po = ts_program_opts_of(has_split ? &split : NULL);
    if (st == TS_OK) st = ts_program_build(&pb, &layout, &po, &prog);
    if (has_split) ts_split_free(&split);
    if (st != TS_OK) rank_fail(&rt, st);
    const ts_backend *be = device == TS_DEVICE_CUDA ? ts_backend_cuda(rt.world, rt.comm, TS_GROUP_COUNT)
                                                    : ts_backend_cpu(threads);
    if (be == NULL) rank_fail(&rt, ts_error_status());
    ts_trainer *tr;
    st = ts_trainer_init(&tr, &pb, &prog, &rt, be, &opts);
    if (st != TS_OK) rank_fail(&rt, st);
    ts_watchdog *dog;
    st = ts_watchdog_init(&dog, &rt, &prog, timeout_s);
    if (st != TS_OK) rank_fail(&rt, st);
    ts_trainer_watch(tr, ts_watchdog_op_slot(dog));
    float *time_buf = NULL;
    st = be->alloc(sizeof *time_buf, (void **)&time_buf);
    if (st != TS_OK) rank_fail(&rt, st);

    if (rt.rank == 0 && plan_dtype != TS_DTYPE_FP32)
        fprintf(stderr, "tessera run: note: the plan is for %s; the executor trains in fp32, and "
                        "planner_memory_bytes is the planner's memory for fp32\n", ts_dtype_names[plan_dtype]);
    const char *fault = getenv("TESSERA_FAULT_RANK"), *fault_step = getenv("TESSERA_FAULT_STEP");
    int n_ops = prog.stages[rt.coords.pp].n_ops;
    ts_op_span *spans = calloc((size_t)n_ops, sizeof *spans);
    float *losses = calloc((size_t)steps, sizeof *losses);
    double *step_s = calloc((size_t)steps, sizeof *step_s);
    /* CPU ranks read the speed gauge between steps (exec/speed_gauge.h), outside the timed steps. */
    double *readings = calloc((size_t)steps + 1, sizeof *readings), *speed = calloc((size_t)steps, sizeof *speed);
    double *world_readings = calloc((size_t)rt.size * (steps + 1), sizeof *world_readings); /* rank 0's */
    ts_gauge gauge = {0};
    int gauged = device == TS_DEVICE_CPU;
    if (!spans || !losses || !step_s || !readings || !speed || !world_readings)
        rank_fail(&rt, TS_FAIL(TS_ERR_NOMEM, "out of memory"));
    if (gauged && (st = ts_gauge_init(&gauge, be)) == TS_OK) st = ts_gauge_read(&gauge, &readings[0]);
    if (st != TS_OK) rank_fail(&rt, st);
    for (int s = 0; s < steps; s++) {
        ts_watchdog_arm(dog, TS_WATCH_STEP, s);
        if (fault && atoi(fault) == rt.rank && (fault_step ? atoi(fault_step) : 0) == s) {
            inject_signal_fault(getenv("TESSERA_FAULT_MODE"));
            rank_fail(&rt, TS_FAIL(TS_ERR_EXTERNAL, "injected fault at step %d (TESSERA_FAULT_RANK)", s));
        }
        double t0 = be->now_s();
        st = ts_trainer_step(tr, s, &losses[s], spans);
        if (st != TS_OK) rank_fail(&rt, st);
        float slowest = 0;
        st = slowest_s(be, rt.world, time_buf, (float)(be->now_s() - t0), &slowest);
        if (st != TS_OK) rank_fail(&rt, st);
        step_s[s] = slowest;
        if (gauged && (st = ts_gauge_read(&gauge, &readings[s + 1])) != TS_OK) rank_fail(&rt, st);
        if (rt.rank == 0 && !json)
            fprintf(stderr, "step %d/%d: loss %.6f, %.3f s\n", s + 1, steps, losses[s], step_s[s]);
    }
    ts_trainer_watch(tr, NULL);
    ts_watchdog_arm(dog, TS_WATCH_RESULTS, steps);
    if (gauged && (st = ts_gauge_world_readings(&rt, readings, steps, world_readings)) != TS_OK) rank_fail(&rt, st);
    if (gauged && rt.rank == 0) {
        int *stage = malloc((size_t)rt.size * sizeof *stage);
        if (stage == NULL) rank_fail(&rt, TS_FAIL(TS_ERR_NOMEM, "out of memory"));
        for (int k = 0; k < rt.size; k++) stage[k] = ts_rank_coords(&layout, k).pp;
        ts_gauge_step_speeds(world_readings, stage, rt.size, steps, speed);
        free(stage);
    }

    if (params_out) {
        size_t n = 0;
        st = ts_trainer_param_count(tr, &n);
        float *p = rt.rank == 0 && st == TS_OK ? malloc(n * sizeof *p) : NULL;
        if (st == TS_OK) st = ts_trainer_gather_params(tr, p);
        if (st == TS_OK && rt.rank == 0) st = ts_write_file_atomic(params_out, (const char *)p, n * sizeof *p);
        free(p);
        if (st != TS_OK) rank_fail(&rt, st);
    }

    /* The last step's spans of every rank, and the memory of every rank, on rank 0. */
    int world = rt.size;
    int *counts = calloc((size_t)world, sizeof *counts), *offs = calloc((size_t)world, sizeof *offs);
    int total = 0;
    for (int r = 0; r < world; r++) {
        counts[r] = 2 * prog.stages[ts_rank_coords(&layout, r).pp].n_ops;
        offs[r] = total;
        total += counts[r];
    }
    double *all = calloc((size_t)total + 1, sizeof *all), *mine = calloc((size_t)2 * n_ops + 1, sizeof *mine);
    double *mems = calloc((size_t)world * RANK_STATS + 1, sizeof *mems);
    for (int i = 0; i < n_ops; i++) mine[2 * i] = spans[i].start_s, mine[2 * i + 1] = spans[i].end_s;
    st = ts_runtime_gather(&rt, mine, 2 * n_ops, all, counts, offs);
    ts_exec_memory em = ts_trainer_memory(tr);
    double statv[RANK_STATS] = {em.weights, em.grads, em.optimizer, em.activations, em.buffers};
    ts_trainer_moe_load(tr, &statv[STAT_MOE_DEV], &statv[STAT_MOE_EVEN]);
    int *nstat = calloc((size_t)world, sizeof *nstat), *stat_off = calloc((size_t)world, sizeof *stat_off);
    if (!counts || !offs || !all || !mine || !mems || !nstat || !stat_off)
        rank_fail(&rt, TS_FAIL(TS_ERR_NOMEM, "out of memory gathering results"));
    for (int r = 0; r < world; r++) nstat[r] = RANK_STATS, stat_off[r] = RANK_STATS * r;
    if (st == TS_OK) st = ts_runtime_gather(&rt, statv, RANK_STATS, mems, nstat, stat_off);
    if (st != TS_OK) rank_fail(&rt, st);

    int rc = 0;
    if (rt.rank == 0) {
        int measured = steps - warmup;
        double *sorted = malloc((size_t)measured * sizeof *sorted);
        memcpy(sorted, step_s + warmup, (size_t)measured * sizeof *sorted);
        qsort(sorted, (size_t)measured, sizeof *sorted, ts_cmp_double);
        double kind_s[TS_OP_KIND_COUNT] = {0}, worst[5] = {0}, moe_dev = 0, moe_even = 0;
        for (int r = 0; r < world; r++) {
            const ts_stage_program *sp = &prog.stages[ts_rank_coords(&layout, r).pp];
            for (int i = 0; i < sp->n_ops; i++)
                kind_s[sp->ops[i].kind] += (all[offs[r] + 2 * i + 1] - all[offs[r] + 2 * i]) / world;
            for (int k = 0; k < 5; k++) worst[k] = fmax(worst[k], mems[RANK_STATS * r + k]);
            moe_dev += mems[RANK_STATS * r + STAT_MOE_DEV];
            moe_even += mems[RANK_STATS * r + STAT_MOE_EVEN];
        }
        ts_eval plan_eval;
        int uneven = 0;
        ts_status pe = ts_plan_evaluate(plan, &pb, &layout, index - 1, &plan_eval, NULL, &uneven);
        char text[256];
        ts_layout_format(&layout, text, sizeof text);
        if (json) {
            run_report rep = {.pb = &pb, .layout = &layout, .plan_dtype = plan_dtype, .world = world,
                              .steps = steps, .warmup = warmup, .sorted = sorted, .losses = losses,
                              .kind_s = kind_s, .mems = mems, .worst = worst,
                              .moe_load_cv = moe_even > 0 ? sqrt(moe_dev / moe_even) : -1,
                              .plan_eval = pe == TS_OK ? &plan_eval : NULL,
                              .speed = gauged ? speed : NULL, .readings = world_readings, .step_s = step_s};
            st = run_json(&rep);
        } else {
            printf("# tessera run: %s, %s, %d ranks, %d steps (%d warm-up)\n", pb.model.name, text, world,
                   steps, warmup);
            printf("# loss: first %.6f, last %.6f\n", losses[0], losses[steps - 1]);
            printf("# step: median %.4f s, p10 %.4f s, p90 %.4f s\n", quantile(sorted, measured, 0.5),
                   quantile(sorted, measured, 0.1), quantile(sorted, measured, 0.9));
            printf("# time by op kind (last step, mean over ranks):");
            for (int k = 0; k < TS_OP_KIND_COUNT; k++) printf(" %s %.4f s", ts_op_kind_names[k], kind_s[k]);
            printf("\n# memory per rank (peak, worst rank): weights %.2f MB, grads %.2f MB, optimizer %.2f MB, "
                   "activations %.2f MB, buffers %.2f MB\n",
                   worst[0] / 1e6, worst[1] / 1e6, worst[2] / 1e6, worst[3] / 1e6, worst[4] / 1e6);
            gauge_stats gs;
            if (gauged && (st = gauge_summary(speed, step_s, steps, warmup, &gs)) == TS_OK)
                printf("# speed gauge (exec/speed_gauge.h): %.2f GFLOP/s per core, median of the measured steps "
                       "(%.2f to %.2f)\n", gs.median_flops_per_s / 1e9, gs.lo_flops_per_s / 1e9, gs.hi_flops_per_s / 1e9);
            if (moe_even > 0)
                printf("# MoE routing: tokens per expert vary by %.3f of the even share (coefficient of "
                       "variation; the model's moe.load_cv)\n", sqrt(moe_dev / moe_even));
        }
        if (st == TS_OK && trace) {
            ts_rank_spans *ranks = calloc((size_t)world, sizeof *ranks);
            for (int k = 0; ranks && k < world; k++) {
                ranks[k].rank = k;
                ranks[k].stage = ts_rank_coords(&layout, k).pp;
                ranks[k].spans = (ts_op_span *)(all + offs[k]);
            }
            ts_step_spans r = {.n_ranks = world, .ranks = ranks, .step_s = step_s[steps - 1],
                               .gauge_flops_per_s = gauged ? speed[steps - 1] : 0};
            st = ranks ? ts_trace_write(trace, "run", &pb, &prog, &r) : TS_FAIL(TS_ERR_NOMEM, "out of memory for the trace");
            free(ranks);
        }
        if (st != TS_OK) {
            fprintf(stderr, "tessera run: %s\n", ts_error_message());
            rc = ts_exit_code(st);
        }
        free(sorted);
    }
    free(all);
    free(mine);
    free(mems);
    free(nstat);
    free(stat_off);
    free(counts);
    free(offs);
    free(spans);
    free(losses);
    free(step_s);
    free(readings);
    free(world_readings);
    free(speed);
    ts_gauge_free(&gauge);
    be->free(time_buf);
    ts_watchdog_free(dog);
    ts_trainer_free(tr);
    if (device == TS_DEVICE_CUDA) ts_backend_cuda_free(rt.world, rt.comm, TS_GROUP_COUNT);
    ts_program_free(&prog);
    ts_runtime_free(&rt);
    ts_runtime_finalize();
    return rc;
}
