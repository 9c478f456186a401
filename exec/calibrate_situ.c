/* calibrate's in-situ pass (see calibrate.h, ts_calib_situ): the trainer of `tessera run` on one
 * rank, each op's measured time beside the fitted spec's, summed by kind, and the spec scaled. */
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"
#include "exec/calibrate.h"
#include "exec/runtime.h"
#include "exec/speed_gauge.h"
#include "exec/trainer.h"
#include "sim/engine.h"
#include "sim/program.h"

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

/* The one-rank problem and layout of the pass, `batch` sequences of `seq` tokens, on the spec
 * fitted so far. */
static ts_status situ_problem(const ts_calib *c, int batch, int seq, ts_problem *pb, ts_layout *l) {
    ts_model m;
    ts_train t;
    TS_CHECK(ts_model_load(TS_SITU_MODEL, &m));
    ts_train_defaults(&t);
    ts_train_set_dtype(&t, TS_DTYPE_FP32); /* the executor computes in fp32 */
    t.global_batch = batch;
    t.seq = seq;
    if (batch < 1 || seq < 1 || seq > m.max_seq)
        return TS_FAIL(TS_ERR_INPUT, "calibrate: the in-situ pass needs a batch >= 1 and 1 to %d tokens (%s's "
                                     "max_seq), got batch %d of %d", (int)m.max_seq, TS_SITU_MODEL, batch, seq);
    TS_CHECK(ts_problem_init(pb, &m, &c->system, &t, 1));
    *l = (ts_layout){.dp = 1, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .mbs = 1, .vpp = 1,
                     .microbatches = batch, .schedule = TS_SCHED_1F1B,
                     .recompute = TS_RECOMPUTE_NONE};
    char why[256];
    if (ts_layout_invalid(pb, l, why, sizeof why))
        return TS_FAIL(TS_ERR_INPUT, "calibrate: the in-situ layout is not valid: %s", why);
    return TS_OK;
}

/* Sums, per kind, each op's median measured time over the timed steps and its modelled time.
 * Times are put at the timed steps' median gauge speed first (speed_gauge.h: × the step's speed
 * over it), so that the pass's figures hold at one speed, the one the profile records. The
 * spread (node.speed_cv) is the steps' as timed: how far one core's speed moves, which ranks in
 * lockstep on several cores wait on; measured steps are put at the ranks' mean speed, which
 * leaves that wait in them. */
static ts_status situ_sums(ts_calib *c, const ts_problem *pb, const ts_layout *l, const ts_stage_program *sp,
                           const ts_op_span *spans, const double *step_s, const double *speed) {
    ts_calib_situ *s = &c->situ;
    int first = s->steps - s->timed;
    double *v = malloc((size_t)(s->timed > 0 ? s->timed : 1) * sizeof *v);
    double *at = malloc((size_t)(s->timed > 0 ? s->timed : 1) * sizeof *at);
    if (v == NULL || at == NULL) {
        free(v);
        free(at);
        return TS_FAIL(TS_ERR_NOMEM, "calibrate: out of memory for the in-situ times");
    }
    for (int j = 0; j < s->timed; j++) v[j] = speed[first + j];
    s->gauge_flops_per_s = ts_median(v, s->timed);
    for (int j = 0; j < s->timed; j++) at[j] = speed[first + j] / s->gauge_flops_per_s;
    for (int i = 0; i < sp->n_ops; i++) {
        int k = situ_kind(sp->ops[i].kind);
        if (k < 0) continue;
        for (int j = 0; j < s->timed; j++) {
            const ts_op_span *o = &spans[(size_t)(first + j) * sp->n_ops + i];
            v[j] = (o->end_s - o->start_s) * at[j];
        }
        s->kind[k].ops++;
        s->kind[k].time_s += ts_median(v, s->timed);
        s->kind[k].model_s += ts_op_cost_s(pb, l, &sp->ops[i]);
    }
    for (int j = 0; j < s->timed; j++) v[j] = step_s[first + j];
    s->step_cv = s->timed >= TS_SITU_MIN_CV_STEPS ? ts_cv(v, s->timed) : 0;
    s->step_raw_s = ts_median(v, s->timed);
    for (int j = 0; j < s->timed; j++) v[j] = step_s[first + j] * at[j];
    s->step_s = ts_median(v, s->timed);
    free(v);
    free(at);
    return TS_OK;
}

ts_status ts_calib_situ_measure(ts_calib *c, const ts_backend *be, int steps, int batch, int seq) {
    if (steps < 2) return TS_FAIL(TS_ERR_INPUT, "calibrate: the in-situ pass needs at least 2 steps, got %d", steps);
    ts_status res = TS_OK;
    ts_problem pb;
    ts_layout l;
    ts_program prog = {0};
    ts_runtime rt = {0};
    ts_trainer *tr = NULL;
    ts_op_span *spans = NULL;
    double *step_s = NULL, *readings = NULL, *speed = NULL;
    ts_gauge gauge = {0};
    memset(&c->situ, 0, sizeof c->situ);
    TS_CHECK(situ_problem(c, batch, seq, &pb, &l));
    c->situ.batch = batch;
    c->situ.seq = seq;
    TS_CHECK_GOTO(ts_program_build(&pb, &l, NULL, &prog), res, exit);
    TS_CHECK_GOTO(ts_runtime_init_self(&rt, &l), res, exit);
    ts_train_opts opts;
    ts_train_opts_defaults(&opts);
    TS_CHECK_GOTO(ts_trainer_init(&tr, &pb, &prog, &rt, be, &opts), res, exit);
    const ts_stage_program *sp = &prog.stages[0];
    spans = calloc((size_t)steps * sp->n_ops, sizeof *spans);
    step_s = calloc((size_t)steps, sizeof *step_s);
    TS_ALLOC_GOTO(spans, res, exit);
    readings = calloc((size_t)steps + 1, sizeof *readings);
    speed = calloc((size_t)steps, sizeof *speed);
    TS_ALLOC_GOTO(step_s, res, exit);
    TS_ALLOC_GOTO(readings, res, exit);
    TS_ALLOC_GOTO(speed, res, exit);
    TS_CHECK_GOTO(ts_gauge_init(&gauge, be), res, exit);
    TS_CHECK_GOTO(ts_gauge_read(&gauge, &readings[0]), res, exit);
    for (int s = 0; s < steps; s++) {
        float loss;
        double t0 = be->now_s();
        TS_CHECK_GOTO(ts_trainer_step(tr, s, &loss, spans + (size_t)s * sp->n_ops), res, exit);
        step_s[s] = be->now_s() - t0;
        TS_CHECK_GOTO(ts_gauge_read(&gauge, &readings[s + 1]), res, exit);
    }
    ts_gauge_step_speeds(readings, 1, steps, speed);
    c->situ.steps = steps;
    c->situ.timed = steps - 1; /* the first step warms up (allocation, caches) */
    TS_CHECK_GOTO(situ_sums(c, &pb, &l, sp, spans, step_s, speed), res, exit);
exit:
    ts_gauge_free(&gauge);
    free(spans);
    free(step_s);
    free(readings);
    free(speed);
    ts_trainer_free(tr);
    ts_runtime_free(&rt);
    ts_program_free(&prog);
    return res;
}

static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

void ts_calib_situ_apply(ts_calib *c) {
    ts_calib_situ *s = &c->situ;
    ts_system *sys = &c->system;
    double f[TS_SITU_COUNT];
    for (int k = 0; k < TS_SITU_COUNT; k++) {
        ts_calib_situ_kind *x = &s->kind[k];
        x->factor = x->ops > 0 && x->model_s > 0 && x->time_s > 0 ? x->time_s / x->model_s : 1.0;
        f[k] = x->factor;
    }
    /* Times are inversely proportional to each figure; the bounds are the loader's. */
    sys->peak_flops[TS_DTYPE_FP32] /= f[TS_SITU_GEMM];
    sys->peak_flops[TS_DTYPE_BF16] /= f[TS_SITU_GEMM];
    sys->attention_eff = clamp(sys->attention_eff * f[TS_SITU_GEMM] / f[TS_SITU_ATTENTION], 1e-3, 1);
    sys->hbm_bytes_per_s /= f[TS_SITU_ELEMENTWISE];
    sys->optimizer_eff = clamp(sys->optimizer_eff * f[TS_SITU_ELEMENTWISE] / f[TS_SITU_OPTIMIZER], 1e-3, 100);
    sys->speed_cv = clamp(s->step_cv, 0, 1);
    sys->gauge_flops_per_s = s->gauge_flops_per_s;
}
