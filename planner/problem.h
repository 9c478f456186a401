/* Setting up a planning problem (program/problem.h: model, system, GPU count, training options)
 * with what the planner derives from it, and what evaluating one layout of it yields: memory
 * per GPU on the worst rank and the step-time split. */
#ifndef TS_PROBLEM_H
#define TS_PROBLEM_H

#include "program/problem.h"

/* Checks the request (gpus ≥ 1, batch and seq positive and ≤ max_seq, dtype supported by the
 * GPU) and derives the counts. TS_ERR_INPUT with a one-line reason otherwise. */
ts_status ts_problem_init(ts_problem *pb, const ts_model *m, const ts_system *s,
                          const ts_train *t, int gpus);

typedef struct {
    double weights, grads, optimizer, activations, buffers, total; /* bytes per GPU */
} ts_memory;

typedef struct {
    double compute;   /* forward, backward and recompute on the slowest stage */
    double tp_comm;   /* exposed TP all-reduce / SP all-gather + reduce-scatter */
    double cp_comm;   /* exposed CP ring exchange */
    double ep_comm;   /* exposed EP all-to-all */
    double pp_comm;   /* pipeline send/recv on the critical path */
    double pp_bubble; /* pipeline fill and drain */
    double dp_comm;   /* exposed gradient reduction / ZeRO gathers */
    double optimizer; /* optimizer step (memory bound) */
} ts_time_split;

typedef struct {
    ts_layout layout;
    ts_memory mem;     /* worst rank */
    int worst_stage;   /* pipeline stage of the worst rank */
    ts_time_split time;
    double step_s;
    double tokens_per_s;
    double tflops_per_gpu;    /* model FLOPs (no recompute) per second per GPU, in TFLOP/s */
    double hw_tflops_per_gpu; /* executed FLOPs incl. recompute (Megatron SC'21 eq. 3 style) */
    double mfu;               /* model FLOPs utilisation, fraction of dense peak */
    int fits;                 /* mem.total <= usable */
} ts_eval;

/* Evaluates one layout (the planner's closed form). `l->microbatches` is derived. Invalid
 * layout: TS_ERR_INPUT with the reason. */
ts_status ts_evaluate(const ts_problem *pb, const ts_layout *l, ts_eval *out);

#endif
