/* calibrate's in-situ pass (see calibrate.h, ts_calib_situ): the trainer of `tessera run` on each
 * compute rank (one rank each), each op's measured time beside the fitted spec's, summed by kind,
 * the ranks' spread, and the spec scaled. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"
#include "exec/bf16_ref.h"
#include "exec/calibrate.h"
#include "exec/runtime.h"
#include "exec/speed_gauge.h"
#include "exec/trainer.h"
#include "planner/op_cost.h"
#include "planner/problem.h"
#include "program/program.h"

const char *const ts_situ_kind_names[] = {"gemm", "attention", "elementwise", "optimizer", NULL};

/* The kind an op of the program counts under; -1 for communication (none on one rank). */
static int situ_kind(int op_kind) {
    switch ((ts_op_kind)op_kind) {
    case TS_OP_GEMM: return TS_SITU_GEMM;
    case TS_OP_ATTENTION: return TS_SITU_ATTENTION;
    case TS_OP_ELEMENTWISE: return TS_SITU_ELEMENTWISE;
    case TS_OP_OPTIMIZER: return TS_SITU_OPTIMIZER;
    default: return -1;
    }
}

ts_situ_shape ts_calib_situ_shape(const ts_calib_opts *o) {
    return (ts_situ_shape){.model = o->situ_model ? o->situ_model : TS_SITU_MODEL,
                           .batch = o->situ_batch > 0 ? o->situ_batch : TS_SITU_BATCH,
                           .seq = o->situ_seq > 0 ? o->situ_seq : TS_SITU_SEQ,
                           .mbs = o->situ_mbs > 0 ? o->situ_mbs : 1};
}

ts_situ_mode ts_situ_mode_of(ts_device device) {
    if (device == TS_DEVICE_CUDA) return (ts_situ_mode){.dtype = TS_DTYPE_BF16, .bf16 = 1, .gauged = 0};
    return (ts_situ_mode){.dtype = TS_DTYPE_FP32, .bf16 = 0, .gauged = 1};
}

/* The one-rank problem and layout of the pass, shape `sh` on spec `sys`, priced in `dtype`. */
static ts_status situ_problem(const ts_system *sys, const ts_situ_shape *sh, ts_dtype dtype, ts_problem *pb,
                              ts_layout *l) {
    ts_model m;
    ts_train t;
    if (strlen(sh->model) >= TS_SITU_MODEL_MAX)
        return TS_FAIL(TS_ERR_INPUT, "calibrate: the in-situ model's name or path is longer than %d bytes",
                       TS_SITU_MODEL_MAX - 1);
    TS_CHECK_CTX(ts_model_load(sh->model, &m), "calibrate: the in-situ model");
    ts_train_defaults(&t);
    ts_train_set_dtype(&t, dtype);
    t.global_batch = sh->batch;
    t.seq = sh->seq;
    if (sh->batch < 1 || sh->seq < 1 || sh->seq > m.max_seq)
        return TS_FAIL(TS_ERR_INPUT, "calibrate: the in-situ pass needs a batch >= 1 and 1 to %d tokens (%s's "
                                     "max_seq), got batch %d of %d", (int)m.max_seq, sh->model, sh->batch, sh->seq);
    if (sh->mbs < 1 || sh->batch % sh->mbs != 0)
        return TS_FAIL(TS_ERR_INPUT, "calibrate: the in-situ micro-batch size %d does not divide its batch %d", sh->mbs,
                       sh->batch);
    TS_CHECK(ts_problem_init(pb, &m, sys, &t, 1));
    *l = (ts_layout){.dp = 1, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .mbs = sh->mbs, .vpp = 1,
                     .microbatches = sh->batch / sh->mbs, .schedule = TS_SCHED_1F1B,
                     .recompute = TS_RECOMPUTE_NONE};
    char why[256];
    if (ts_layout_invalid(pb, l, why, sizeof why))
        return TS_FAIL(TS_ERR_INPUT, "calibrate: the in-situ layout is not valid: %s", why);
    return TS_OK;
}

/* The problem the trainer trains, as `tessera run` does (exec/run.c): fp32, whatever the pricing
 * dtype; the kernel table sets the numerics (ts_situ_mode.bf16). The program's ops are the same
 * in fp32 and bf16 (only their bytes differ), so the samples line up with the priced program's. */
#define SITU_TRAINED_DTYPE TS_DTYPE_FP32

ts_status ts_calib_situ_check(const ts_system *sys, const ts_situ_shape *sh) {
    ts_problem pb;
    ts_layout l;
    TS_CHECK(situ_problem(sys, sh, SITU_TRAINED_DTYPE, &pb, &l));
    return ts_trainer_check(&pb, &l);
}

size_t ts_situ_sample_count(int steps, int n_ops) { return (size_t)steps * n_ops + 2 * (size_t)steps + 1; }

/* The spread of ranks in lockstep that the speed gauge does not see: at each timed step, the
 * ranks' times, each at its own gauge speed (× at, the step's speed over the median), standard
 * deviation over mean (sample variance, n - 1), as a root mean square over the steps. With one
 * rank, the steps' own spread over time at the gauge's speed (node.speed_cv's meaning: how far a
 * core's speed is from the others' at the same moment; one core's drift over time stands in). */
static double situ_spread(const double *samples, const double *at, int ranks, int steps, int n_ops, int first,
                          double *v) {
    size_t per = ts_situ_sample_count(steps, n_ops);
    int timed = steps - first;
    if (ranks < 2) {
        for (int j = 0; j < timed; j++) v[j] = samples[(size_t)steps * n_ops + first + j] * at[j];
        return timed >= TS_SITU_MIN_CV_STEPS ? ts_cv(v, timed) : 0;
    }
    double sum_sq = 0;
    for (int j = 0; j < timed; j++) {
        for (int r = 0; r < ranks; r++) v[r] = samples[r * per + (size_t)steps * n_ops + first + j] * at[r * timed + j];
        double cv = ts_cv(v, ranks);
        sum_sq += cv * cv;
    }
    return sqrt(sum_sq / timed);
}

/* The ranks' spread over spans of 1, 2, 4, ... ops, each rank's times at its gauge speed, and its
 * decay (calibrate.h, ts_calib_situ). */
static void situ_spans(ts_calib_situ *s, const double *samples, const double *at, int ranks, int steps, int n_ops,
                       int first, double *v) {
    size_t per = ts_situ_sample_count(steps, n_ops);
    int timed = steps - first;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    s->n_spans = 0;
    for (int w = 1; w <= n_ops && s->n_spans < TS_SITU_MAX_SPANS; w *= 2) {
        double sum_sq = 0, sum_s = 0;
        int n = 0;
        for (int j = first; j < steps; j++)
            for (int i0 = 0; i0 + w <= n_ops; i0 += w, n++) {
                double mean = 0;
                for (int r = 0; r < ranks; r++) {
                    const double *op = samples + r * per + (size_t)j * n_ops + i0;
                    v[r] = 0;
                    for (int i = 0; i < w; i++) v[r] += op[i];
                    v[r] *= at[r * timed + j - first];
                    mean += v[r] / ranks;
                }
                double cv = ts_cv(v, ranks);
                sum_sq += cv * cv;
                sum_s += mean;
            }
        double cv = sqrt(sum_sq / n), span = sum_s / n;
        s->span_s[s->n_spans] = span;
        s->span_cv[s->n_spans++] = cv;
        if (!(cv > 0 && span > 0)) continue;
        double x = log(span), y = -log(cv);
        sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    int n = s->n_spans;
    double den = n * sxx - sx * sx;
    s->cv_decay = n >= 2 && den > 0 ? fmin(1, fmax(0, (n * sxy - sx * sy) / den)) : 0;
}

/* Each timed sample (r, j)'s speed over the median's into at[r·timed + j] and that median into
 * s->gauge_flops_per_s: rank r's timed step j at the mean of its gauge readings either side. Without
 * the gauge (ts_situ_mode.gauged 0), every sample as timed (1) and no median (0). */
static void situ_speeds(ts_calib_situ *s, const double *samples, int ranks, int steps, int n_ops, int first, double *v,
                        double *at) {
    size_t per = ts_situ_sample_count(steps, n_ops);
    int timed = steps - first, n = ranks * timed;
    if (!s->mode.gauged) {
        for (int i = 0; i < n; i++) at[i] = 1;
        s->gauge_flops_per_s = 0;
        return;
    }
    for (int r = 0; r < ranks; r++) {
        const double *reading = samples + r * per + (size_t)steps * n_ops + steps;
        for (int j = 0; j < timed; j++) v[r * timed + j] = 0.5 * (reading[first + j] + reading[first + j + 1]);
    }
    memcpy(at, v, (size_t)n * sizeof *at);
    s->gauge_flops_per_s = ts_median(v, n);
    for (int i = 0; i < n; i++) at[i] /= s->gauge_flops_per_s;
}

ts_status ts_calib_situ_sums(ts_calib *c, const ts_situ_shape *sh, const double *samples, int ranks, int steps) {
    if (ranks < 1 || steps < 2)
        return TS_FAIL(TS_ERR_INPUT, "calibrate: the in-situ sums need >= 1 rank and >= 2 steps, got %d and %d", ranks, steps);
    ts_status res = TS_OK;
    ts_problem pb;
    ts_layout l;
    ts_program prog = {0};
    ts_situ_mode mode = ts_situ_mode_of(c->device);
    TS_CHECK(situ_problem(&c->system, sh, mode.dtype, &pb, &l));
    TS_CHECK(ts_program_build(&pb, &l, NULL, &prog));
    const ts_stage_program *sp = &prog.stages[0];
    int n_ops = sp->n_ops, first = 1; /* the first step warms up (allocation, caches) */
    int timed = steps - first, n = ranks * timed;
    size_t per = ts_situ_sample_count(steps, n_ops);
    double *v = malloc((size_t)(n > ranks ? n : ranks) * sizeof *v), *at = malloc((size_t)n * sizeof *at);
    TS_ALLOC_GOTO(v, res, exit);
    TS_ALLOC_GOTO(at, res, exit);
    ts_calib_situ *s = &c->situ;
    *s = (ts_calib_situ){.batch = sh->batch, .seq = sh->seq, .mbs = sh->mbs, .mode = mode, .steps = steps,
                         .timed = timed, .ranks = ranks};
    snprintf(s->model, sizeof s->model, "%s", sh->model);
    situ_speeds(s, samples, ranks, steps, n_ops, first, v, at);
    for (int i = 0; i < n_ops; i++) {
        int k = situ_kind(sp->ops[i].kind);
        if (k < 0) continue;
        for (int r = 0; r < ranks; r++)
            for (int j = 0; j < timed; j++)
                v[r * timed + j] = samples[r * per + (size_t)(first + j) * n_ops + i] * at[r * timed + j];
        s->kind[k].ops++;
        s->kind[k].time_s += ts_median(v, n);
        s->kind[k].model_s += ts_op_cost_s(&pb, &l, &sp->ops[i]);
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < ranks; r++)
            for (int j = 0; j < timed; j++)
                v[r * timed + j] = samples[r * per + (size_t)steps * n_ops + first + j] * (pass ? at[r * timed + j] : 1);
        *(pass ? &s->step_s : &s->step_raw_s) = ts_median(v, n);
    }
    s->step_cv = situ_spread(samples, at, ranks, steps, n_ops, first, v);
    if (ranks >= 2) situ_spans(s, samples, at, ranks, steps, n_ops, first, v);
exit:
    free(v);
    free(at);
    ts_program_free(&prog);
    return res;
}

/* The trainer of the pass's program on this rank's backend for c->device in its mode (the bf16
 * table where mode.bf16); *owned when the caller must close the CUDA backend (ts_backend_self). */
static ts_status situ_trainer(const ts_calib *c, const ts_problem *pb, const ts_program *prog, ts_runtime *rt,
                              int *owned, const ts_backend **be, ts_trainer **tr) {
    *be = ts_backend_self(c->device, c->threads > 0 ? c->threads : 1, rt, owned);
    if (*be == NULL) {
        *owned = 0;
        return ts_error_context(__FILE__, __LINE__, "calibrate: the in-situ pass on %s", ts_device_name(c->device));
    }
    if (ts_situ_mode_of(c->device).bf16 && (*be = ts_backend_bf16(*be)) == NULL) return ts_error_status();
    ts_train_opts opts;
    ts_train_opts_defaults(&opts);
    return ts_trainer_init(tr, pb, prog, rt, *be, &opts);
}

ts_status ts_calib_situ_run(const ts_calib *c, const ts_situ_shape *sh, int steps, ts_situ_sync sync, void *ctx,
                            double **samples, size_t *count) {
    ts_status res = TS_OK, synced = TS_OK;
    ts_problem pb;
    ts_layout l;
    ts_program prog = {0};
    ts_runtime rt = {0};
    const ts_backend *be = NULL;
    ts_trainer *tr = NULL;
    ts_op_span *spans = NULL;
    ts_gauge gauge = {0};
    int calls = 0, owned = 0; /* calls of sync; the CUDA backend to close */
    int gauged = ts_situ_mode_of(c->device).gauged;
    *samples = NULL;
    *count = 0;
    if (steps < 2) {
        res = TS_FAIL(TS_ERR_INPUT, "calibrate: the in-situ pass needs at least 2 steps, got %d", steps);
        goto exit;
    }
    TS_CHECK_GOTO(situ_problem(&c->system, sh, SITU_TRAINED_DTYPE, &pb, &l), res, exit);
    TS_CHECK_GOTO(ts_program_build(&pb, &l, NULL, &prog), res, exit);
    TS_CHECK_GOTO(ts_runtime_init_self(&rt, &l), res, exit);
    TS_CHECK_GOTO(situ_trainer(c, &pb, &prog, &rt, &owned, &be, &tr), res, exit);
    int n_ops = prog.stages[0].n_ops;
    *count = ts_situ_sample_count(steps, n_ops);
    *samples = calloc(*count, sizeof **samples);
    spans = calloc((size_t)n_ops, sizeof *spans);
    TS_ALLOC_GOTO(*samples, res, exit);
    TS_ALLOC_GOTO(spans, res, exit);
    double *op_s = *samples, *step_s = op_s + (size_t)steps * n_ops, *readings = step_s + steps;
    if (gauged) {
        TS_CHECK_GOTO(ts_gauge_init(&gauge, be), res, exit);
        TS_CHECK_GOTO(ts_gauge_read(&gauge, &readings[0]), res, exit);
    }
    for (int s = 0; s < steps; s++) {
        float loss;
        calls++;
        TS_CHECK_GOTO(synced = sync(ctx), res, exit);
        double t0 = be->now_s();
        TS_CHECK_GOTO(ts_trainer_step(tr, s, &loss, spans), res, exit);
        step_s[s] = be->now_s() - t0;
        for (int i = 0; i < n_ops; i++) op_s[(size_t)s * n_ops + i] = spans[i].end_s - spans[i].start_s;
        if (gauged) TS_CHECK_GOTO(ts_gauge_read(&gauge, &readings[s + 1]), res, exit);
    }
exit:
    /* The other ranks wait for this one before every step: after a failure it still keeps the
     * appointments left, unless a sync itself failed (then the others are gone). */
    while (synced == TS_OK && calls < steps) {
        calls++;
        synced = sync(ctx);
    }
    if (res != TS_OK) {
        free(*samples);
        *samples = NULL;
        *count = 0;
    }
    ts_gauge_free(&gauge);
    free(spans);
    ts_trainer_free(tr);
    if (owned) ts_backend_cuda_free(rt.world, rt.comm, TS_GROUP_COUNT);
    ts_runtime_free(&rt);
    ts_program_free(&prog);
    return res;
}

static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

void ts_calib_situ_apply(ts_calib *c) {
    ts_calib_situ *s = &c->situ;
    ts_system *sys = &c->system;
    ts_situ_mode mode = ts_situ_mode_of(c->device);
    double f[TS_SITU_COUNT];
    for (int k = 0; k < TS_SITU_COUNT; k++) {
        ts_calib_situ_kind *x = &s->kind[k];
        x->factor = x->ops > 0 && x->model_s > 0 && x->time_s > 0 ? x->time_s / x->model_s : 1.0;
        f[k] = x->factor;
    }
    /* Times are inversely proportional to each figure; the bounds are the loader's. On CPU ranks
     * fp32 and bf16 are one GEMM path (sgemm; plans in bf16 cost as fp32). On GPUs the pass trained
     * bf16 GEMMs (tensor cores), so the factor scales the bf16 peak, which GPU plans price on; the
     * fp32 peak is left alone: fp32 GEMMs are other kernels (cuBLAS SIMT sgemm, no bf16 casts
     * around them) with their own measured grid, whose speed inside a step the pass did not see
     * (fp8 keeps its own grid likewise). The schema has one attention efficiency for every dtype:
     * on GPUs it becomes bf16's in-step figure, so fp32 plans' attention there moves with it. */
    if (mode.dtype != TS_DTYPE_BF16) sys->peak_flops[TS_DTYPE_FP32] /= f[TS_SITU_GEMM];
    sys->peak_flops[TS_DTYPE_BF16] /= f[TS_SITU_GEMM];
    sys->attention_eff = clamp(sys->attention_eff * f[TS_SITU_GEMM] / f[TS_SITU_ATTENTION], 1e-3, 1);
    sys->hbm_bytes_per_s /= f[TS_SITU_ELEMENTWISE];
    sys->optimizer_eff = clamp(sys->optimizer_eff * f[TS_SITU_ELEMENTWISE] / f[TS_SITU_OPTIMIZER], 1e-3, 100);
    /* The spread and the gauge only where gauged: 0 on GPUs (calibrate.h, ts_calib_situ). */
    double cv = mode.gauged ? clamp(s->step_cv, 0, 1) : 0;
    sys->speed_cv = cv;
    sys->speed_cv_window_s = cv > 0 ? s->step_raw_s : 0;
    sys->speed_cv_decay = cv > 0 ? s->cv_decay : 0;
    sys->gauge_flops_per_s = mode.gauged ? s->gauge_flops_per_s : 0;
}
