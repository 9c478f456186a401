/* The run driver (exec/run.h): sets up this rank, trains the steps, gathers on rank 0. */
#include "exec/run.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/stats.h"
#include "exec/kernel_table.h"
#include "exec/speed_gauge.h"
#include "exec/watchdog.h"
#include "planner/partition.h"
#include "planner/plan_json.h"

const char *const ts_run_mem_names[TS_RUN_MEM_KINDS] = {"weights", "grads", "optimizer", "activations", "buffers"};

/* What each rank sends rank 0 at the end: its memory peaks (ts_run_mem_names), then its MoE
 * routing sums (ts_trainer_moe_load). */
enum { RANK_STATS = TS_RUN_MEM_KINDS + 3, STAT_MOE_DEV = TS_RUN_MEM_KINDS, STAT_MOE_EVEN, STAT_ORIGIN };

/* One rank's part of the run while it trains; freed by job_close. */
typedef struct {
    ts_runtime rt;
    const ts_backend *be;
    ts_trainer *tr;
    ts_watchdog *dog;
    float *time_buf;   /* one float of backend memory: the backend's collectives take no host buffers */
    ts_gauge gauge;    /* CPU ranks read it between steps, outside the timed steps */
    int gauged;
    ts_op_span *spans; /* (this stage's n_ops) the last step's */
    double *readings;  /* (steps + 1) this rank's gauge readings */
} job;

void ts_run_opts_defaults(ts_run_opts *o) {
    memset(o, 0, sizeof *o);
    o->steps = 10;
    o->warmup = 2;
    o->threads = 1;
    o->timeout_s = 1800; /* torch.distributed's default process-group timeout, 30 min */
    o->device = TS_DEVICE_CPU;
    ts_train_opts_defaults(&o->train);
    o->log = stderr;
    o->fault.rank = -1;
}

void ts_run_fault_from_env(ts_run_fault *f) {
    const char *rank = getenv("TESSERA_FAULT_RANK"), *step = getenv("TESSERA_FAULT_STEP");
    f->rank = rank ? atoi(rank) : -1;
    f->step = step ? atoi(step) : 0;
    f->mode = getenv("TESSERA_FAULT_MODE");
}

/* o's problem as the executor trains it: fp32. */
static ts_problem trained_problem(const ts_run_opts *o) {
    ts_problem pb = o->pb;
    ts_train_set_dtype(&pb.train, TS_DTYPE_FP32);
    return pb;
}

/* The plan's layout `index` with its stages (its uneven split when it has one) and the step
 * program every rank walks. */
static ts_status load_program(const ts_run_opts *o, const ts_problem *pb, const ts_layout *layout,
                              ts_program *prog) {
    ts_split split;
    int has_split = 0;
    ts_status res = ts_plan_read_split(o->plan, pb, layout, o->index, &split, &has_split);
    ts_program_opts po = ts_program_opts_of(has_split ? &split : NULL);
    if (res == TS_OK) res = ts_program_build(pb, layout, &po, prog);
    if (has_split) ts_split_free(&split);
    return res;
}

ts_status ts_run_check(const ts_run_opts *o) {
    ts_problem pb = trained_problem(o);
    TS_CHECK(ts_trainer_check(&pb, &o->layout));
    if (o->plan == NULL) return TS_OK;
    /* The plan's stages and the program are what every rank reads first: a plan they refuse is
     * said once, here, not by every rank. */
    ts_program prog;
    TS_CHECK(load_program(o, &pb, &o->layout, &prog));
    ts_program_free(&prog);
    return TS_OK;
}

void ts_run_result_init(ts_run_result *r) {
    memset(r, 0, sizeof *r);
    r->moe_load_cv = -1;
}

void ts_run_result_free(ts_run_result *r) {
    free(r->losses);
    free(r->step_s);
    free(r->mem);
    free(r->speed);
    free(r->readings);
    free(r->spans);
    free(r->span_off);
    if (r->has_prog) ts_program_free(&r->prog);
    ts_run_result_init(r);
}

/* The runtime, the program (on the plan's uneven stages when it has them), the backend, the
 * trainer and the watchdog of this rank. */
static ts_status job_open(const ts_run_opts *o, job *j, ts_run_result *r) {
    ts_watchdog_arm_startup(ts_world_rank_now(), o->timeout_s);
    TS_CHECK(ts_runtime_init(&j->rt, &r->layout));
    r->rank = j->rt.rank;
    r->world = j->rt.size;
    TS_CHECK(load_program(o, &r->pb, &r->layout, &r->prog));
    r->has_prog = 1;
    j->be = o->device == TS_DEVICE_CUDA ? ts_backend_cuda(j->rt.world, j->rt.comm, TS_GROUP_COUNT)
                                        : ts_backend_cpu(o->threads);
    if (j->be != NULL && o->bf16) j->be = ts_backend_bf16(j->be);
    if (j->be == NULL) return ts_error_status();
    TS_CHECK(ts_trainer_init(&j->tr, &r->pb, &r->prog, &j->rt, j->be, &o->train));
    TS_CHECK(ts_watchdog_init(&j->dog, &j->rt, &r->prog, o->timeout_s));
    ts_trainer_watch(j->tr, ts_watchdog_op_slot(j->dog));
    return j->be->alloc(sizeof *j->time_buf, (void **)&j->time_buf);
}

/* This rank's buffers for the steps, and on rank 0 those of what it gathers. */
static ts_status job_buffers(job *j, ts_run_result *r) {
    int steps = r->steps, world = r->world;
    j->spans = calloc((size_t)r->prog.stages[j->rt.coords.pp].n_ops + 1, sizeof *j->spans);
    j->readings = calloc((size_t)steps + 1, sizeof *j->readings);
    r->losses = calloc((size_t)steps, sizeof *r->losses);
    r->step_s = calloc((size_t)steps, sizeof *r->step_s);
    if (!j->spans || !j->readings || !r->losses || !r->step_s) return TS_FAIL(TS_ERR_NOMEM, "out of memory");
    if (r->rank != 0) return TS_OK;
    r->speed = calloc((size_t)steps, sizeof *r->speed);
    r->readings = calloc((size_t)world * (steps + 1), sizeof *r->readings);
    r->mem = calloc((size_t)world * TS_RUN_MEM_KINDS, sizeof *r->mem);
    r->span_off = calloc((size_t)world + 1, sizeof *r->span_off);
    if (!r->speed || !r->readings || !r->mem || !r->span_off) return TS_FAIL(TS_ERR_NOMEM, "out of memory");
    for (int k = 0; k < world; k++)
        r->span_off[k + 1] = r->span_off[k] + r->prog.stages[ts_rank_coords(&r->layout, k).pp].n_ops;
    r->spans = calloc((size_t)r->span_off[world] + 1, sizeof *r->spans);
    return r->spans ? TS_OK : TS_FAIL(TS_ERR_NOMEM, "out of memory gathering results");
}

/* The slowest rank's `mine`, through the job's one float of backend memory. */
static ts_status slowest_s(const job *j, float mine, float *slowest) {
    TS_CHECK(j->be->kernels->to_device(j->time_buf, &mine, sizeof mine));
    TS_CHECK(j->be->all_reduce_max(j->rt.world, j->time_buf, j->time_buf, 1));
    return j->be->kernels->to_host(slowest, j->time_buf, sizeof *slowest);
}

/* The injected fault of o->fault when it is this rank's at step s. */
static ts_status injected_fault(const ts_run_opts *o, int rank, int s) {
    const ts_run_fault *f = &o->fault;
    if (f->rank != rank || f->step != s) return TS_OK;
    if (f->mode && strcmp(f->mode, "kill") == 0) raise(SIGKILL);
    if (f->mode && strcmp(f->mode, "stop") == 0) raise(SIGSTOP);
    return TS_FAIL(TS_ERR_EXTERNAL, "injected fault at step %d (TESSERA_FAULT_RANK)", s);
}

/* The steps, timed as the slowest rank's, the gauge read before the first and after each. */
static ts_status train(const ts_run_opts *o, job *j, ts_run_result *r) {
    const ts_backend *be = j->be;
    j->gauged = o->device == TS_DEVICE_CPU;
    if (j->gauged) {
        TS_CHECK(ts_gauge_init(&j->gauge, be));
        TS_CHECK(ts_gauge_read(&j->gauge, &j->readings[0]));
    }
    for (int s = 0; s < r->steps; s++) {
        ts_watchdog_arm(j->dog, TS_WATCH_STEP, s);
        TS_CHECK(injected_fault(o, r->rank, s));
        double t0 = be->now_s();
        TS_CHECK(ts_trainer_step(j->tr, s, &r->losses[s], j->spans));
        float slowest = 0;
        TS_CHECK(slowest_s(j, (float)(be->now_s() - t0), &slowest));
        r->step_s[s] = slowest;
        if (j->gauged) TS_CHECK(ts_gauge_read(&j->gauge, &j->readings[s + 1]));
        if (r->rank == 0 && o->log && o->log_steps)
            fprintf(o->log, "step %d/%d: loss %.6f, %.3f s\n", s + 1, r->steps, r->losses[s], r->step_s[s]);
    }
    ts_trainer_watch(j->tr, NULL);
    ts_watchdog_arm(j->dog, TS_WATCH_RESULTS, r->steps);
    return TS_OK;
}

/* Every rank's gauge readings on rank 0, and the steps' speeds from them. */
static ts_status gather_gauge(job *j, ts_run_result *r) {
    if (!j->gauged) {
        free(r->speed);
        free(r->readings);
        r->speed = r->readings = NULL;
        return TS_OK;
    }
    TS_CHECK(ts_gauge_world_readings(&j->rt, j->readings, r->steps, r->readings));
    if (r->rank != 0) return TS_OK;
    int *stage = malloc((size_t)r->world * sizeof *stage);
    if (stage == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory");
    for (int k = 0; k < r->world; k++) stage[k] = ts_rank_coords(&r->layout, k).pp;
    ts_gauge_step_speeds(r->readings, stage, r->world, r->steps, r->speed);
    free(stage);
    return TS_OK;
}

/* The trained parameters, assembled on rank 0 and written to o->params. Collective. */
static ts_status write_params(const ts_run_opts *o, job *j) {
    size_t n = 0;
    TS_CHECK(ts_trainer_param_count(j->tr, &n));
    float *p = j->rt.rank == 0 ? malloc(n * sizeof *p) : NULL;
    if (j->rt.rank == 0 && p == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the parameters");
    ts_status res = ts_trainer_gather_params(j->tr, p);
    if (res == TS_OK && j->rt.rank == 0) res = ts_write_file_atomic(o->params, (const char *)p, n * sizeof *p);
    free(p);
    return res;
}

/* The last step's spans and the memory and routing figures of every rank, on rank 0 (rank r's
 * stats at stats + RANK_STATS·r). */
static ts_status gather_results(job *j, ts_run_result *r, double *stats) {
    ts_status res = TS_OK;
    int world = r->world, n_ops = r->prog.stages[j->rt.coords.pp].n_ops;
    int *counts = NULL, *offs = NULL, *nstat = NULL, *stat_off = NULL;
    if (r->rank == 0) {
        counts = calloc((size_t)world, sizeof *counts), offs = calloc((size_t)world, sizeof *offs);
        nstat = calloc((size_t)world, sizeof *nstat), stat_off = calloc((size_t)world, sizeof *stat_off);
        if (!counts || !offs || !nstat || !stat_off) {
            res = TS_FAIL(TS_ERR_NOMEM, "out of memory gathering results");
            goto exit;
        }
        for (int k = 0; k < world; k++) { /* in doubles: a span is two */
            counts[k] = 2 * (r->span_off[k + 1] - r->span_off[k]), offs[k] = 2 * r->span_off[k];
            nstat[k] = RANK_STATS, stat_off[k] = RANK_STATS * k;
        }
    }
    TS_CHECK_GOTO(ts_runtime_gather(&j->rt, (const double *)j->spans, 2 * n_ops, (double *)r->spans, counts, offs),
                  res, exit);
    ts_exec_memory em = ts_trainer_memory(j->tr);
    double mine[RANK_STATS] = {em.weights, em.grads, em.optimizer, em.activations, em.buffers};
    ts_trainer_moe_load(j->tr, &mine[STAT_MOE_DEV], &mine[STAT_MOE_EVEN]);
    mine[STAT_ORIGIN] = ts_trainer_step_origin_s(j->tr);
    TS_CHECK_GOTO(ts_runtime_gather(&j->rt, mine, RANK_STATS, stats, nstat, stat_off), res, exit);
exit:
    free(counts);
    free(offs);
    free(nstat);
    free(stat_off);
    return res;
}

/* Over the measured steps: the gauge's median, lowest and highest speed, and the median of step
 * time × speed, the step's work in gauge FLOPs (exec/speed_gauge.h). */
static ts_status gauge_summary(ts_run_result *r) {
    int n = r->steps - r->warmup;
    double *v = malloc((size_t)n * sizeof *v), *w = malloc((size_t)n * sizeof *w);
    if (v == NULL || w == NULL) {
        free(v);
        free(w);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for the speed gauge's figures");
    }
    r->gauge_lo = INFINITY, r->gauge_hi = 0;
    for (int i = 0; i < n; i++) {
        v[i] = r->speed[r->warmup + i];
        w[i] = r->step_s[r->warmup + i] * r->speed[r->warmup + i];
        r->gauge_lo = fmin(r->gauge_lo, v[i]);
        r->gauge_hi = fmax(r->gauge_hi, v[i]);
    }
    r->gauge_median = ts_median(v, n);
    r->gauge_step_flop = ts_median(w, n);
    free(v);
    free(w);
    return TS_OK;
}

/* Every rank's spans on one time line: each rank times its ops from its own start of the step
 * (its clock's origin); shifted by that origin less the earliest rank's, a collective's spans
 * show when each member arrived, and so how long each waited for the last (sim/compare_wait.h).
 * The origins are CLOCK_MONOTONIC readings, one clock on one host; ranks on several hosts keep
 * their offsets (each host's clock has its own zero). */
static void align_spans(ts_run_result *r, const double *stats) {
    double first = INFINITY;
    for (int k = 0; k < r->world; k++) first = fmin(first, stats[RANK_STATS * k + STAT_ORIGIN]);
    for (int k = 0; k < r->world; k++) {
        double shift = stats[RANK_STATS * k + STAT_ORIGIN] - first;
        ts_op_span *span = r->spans + r->span_off[k];
        for (int i = 0; i < r->span_off[k + 1] - r->span_off[k]; i++) span[i].start_s += shift, span[i].end_s += shift;
    }
}

/* Rank 0's figures from what it gathered: step-time quantiles, time by op kind, the worst rank's
 * memory, the routing spread, the gauge and the planner's evaluation. */
static ts_status summarize(const ts_run_opts *o, ts_run_result *r, const double *stats) {
    int measured = r->steps - r->warmup, world = r->world;
    double *sorted = malloc((size_t)measured * sizeof *sorted), moe_dev = 0, moe_even = 0;
    if (sorted == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory");
    memcpy(sorted, r->step_s + r->warmup, (size_t)measured * sizeof *sorted);
    qsort(sorted, (size_t)measured, sizeof *sorted, ts_cmp_double);
    r->median_s = ts_quantile(sorted, measured, 0.5);
    r->p10_s = ts_quantile(sorted, measured, 0.1);
    r->p90_s = ts_quantile(sorted, measured, 0.9);
    free(sorted);
    for (int k = 0; k < world; k++) {
        const ts_stage_program *sp = &r->prog.stages[ts_rank_coords(&r->layout, k).pp];
        const ts_op_span *span = r->spans + r->span_off[k];
        for (int i = 0; i < sp->n_ops; i++) r->kind_s[sp->ops[i].kind] += (span[i].end_s - span[i].start_s) / world;
        for (int c = 0; c < TS_RUN_MEM_KINDS; c++) {
            r->mem[TS_RUN_MEM_KINDS * k + c] = stats[RANK_STATS * k + c];
            r->mem_worst[c] = fmax(r->mem_worst[c], stats[RANK_STATS * k + c]);
        }
        moe_dev += stats[RANK_STATS * k + STAT_MOE_DEV];
        moe_even += stats[RANK_STATS * k + STAT_MOE_EVEN];
    }
    r->moe_load_cv = moe_even > 0 ? sqrt(moe_dev / moe_even) : -1;
    align_spans(r, stats);
    if (r->speed) TS_CHECK(gauge_summary(r));
    int uneven = 0;
    r->has_plan_eval = ts_plan_evaluate(o->plan, &r->pb, &r->layout, o->index, &r->plan_eval, NULL, &uneven) == TS_OK;
    return TS_OK;
}

static void job_close(const ts_run_opts *o, job *j) {
    ts_gauge_free(&j->gauge);
    free(j->spans);
    free(j->readings);
    j->be->free(j->time_buf);
    ts_watchdog_free(j->dog);
    ts_trainer_free(j->tr);
    if (o->device == TS_DEVICE_CUDA) ts_backend_cuda_free(j->rt.world, j->rt.comm, TS_GROUP_COUNT);
    ts_runtime_free(&j->rt);
}

ts_status ts_run(const ts_run_opts *o, ts_run_result *out) {
    ts_run_result_init(out);
    out->pb = trained_problem(o);
    out->layout = o->layout;
    out->plan_dtype = o->pb.train.dtype;
    out->steps = o->steps;
    out->warmup = o->warmup;
    /* On the heap: on failure it stays as it is, with the trainer and the watchdog pointing
     * into it, until the caller ends the job. */
    job *j = calloc(1, sizeof *j);
    if (j == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory");
    TS_CHECK(job_open(o, j, out));
    if (out->rank == 0 && o->log && out->plan_dtype != TS_DTYPE_FP32)
        fprintf(o->log, "tessera run: note: the plan is for %s; the executor trains %s, and "
                        "planner_memory_bytes is the planner's memory for fp32\n", ts_dtype_names[out->plan_dtype],
                o->bf16 ? "bf16 mixed precision in fp32 allocations" : "in fp32");
    TS_CHECK(job_buffers(j, out));
    TS_CHECK(train(o, j, out));
    TS_CHECK(gather_gauge(j, out));
    if (o->params) TS_CHECK(write_params(o, j));
    double *stats = out->rank == 0 ? calloc((size_t)out->world * RANK_STATS, sizeof *stats) : NULL;
    if (out->rank == 0 && stats == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory gathering results");
    ts_status res = gather_results(j, out, stats);
    if (res == TS_OK && out->rank == 0) res = summarize(o, out, stats);
    free(stats);
    TS_CHECK(res);
    job_close(o, j);
    free(j);
    return TS_OK;
}
