/* A planning problem (model, system, GPU count, training options) and what evaluating one
 * layout of it yields: memory per GPU on the worst rank and the step-time split.
 *
 * ts_problem is a plain value filled by ts_problem_init; it owns no heap memory. */
#ifndef TS_PROBLEM_H
#define TS_PROBLEM_H

#include <stdint.h>

#include "models/model.h"
#include "models/system.h"
#include "planner/layout.h"

typedef struct {
    int64_t global_batch;   /* sequences per step */
    int64_t seq;            /* tokens per sequence */
    ts_dtype dtype;         /* compute and activation precision */
    int flash_attention;    /* fused attention: no s×s scores kept, causal half computed */
    int tp_across_nodes;    /* allow TP groups to span nodes */
    double weight_bytes;    /* bytes per parameter: weights (2, ZeRO paper's mixed precision) */
    double grad_bytes;      /* gradients (2) */
    double optimizer_bytes; /* Adam: fp32 master, momentum, variance (12; ZeRO paper's K) */
    double bucket_bytes;    /* DP gradient communication bucket */
    double activation_scale; /* activation bytes relative to 16-bit ones (fp32: 2) */
} ts_train;

/* Defaults: global batch 1024, seq 4096, bf16, flash attention, TP inside a node, 2+2+12
 * bytes/param, 40M-parameter buckets. (ts_problem_init refuses seq > the model's max_seq; the
 * CLI lowers its default seq to max_seq.) */
void ts_train_defaults(ts_train *t);

/* Sets the precision and what follows from it: 16-bit (bf16, fp16; fp8 keeps 16-bit master
 * weights and activations) trains with 2+2+12 bytes per parameter (ZeRO paper's mixed-precision
 * Adam) and 16-bit activations; fp32 with 4+4+8 (weights, gradients, Adam's two moments) and
 * 32-bit activations. */
void ts_train_set_dtype(ts_train *t, ts_dtype d);

typedef struct {
    ts_model model;
    ts_system sys;
    ts_train train;
    int gpus;
    ts_param_count params;
    double model_flops_per_step; /* forward+backward, no recompute (Megatron/PaLM convention) */
    double usable_bytes;         /* per GPU, after reserve and head-room */
    double compute_scale;        /* compute ops' time multiplier for ranks sharing cores and
                                    ranks in lockstep (cost.h ts_compute_scale × ts_lockstep_scale) */
} ts_problem;

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

/* Why a layout is not valid for the problem (divisibility, limits), or NULL when valid.
 * `buf` receives the message (NULL: no message, a fixed string is returned). Memory is not
 * checked here (see ts_eval.fits). */
const char *ts_layout_invalid(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap);
/* The same for a layout whose stages may come from an explicit split (explicit_split = 1; see
 * planner/partition.h): interleaving then needs a layer in each of the pp·vpp chunks, not
 * pp·vpp dividing the layers. */
const char *ts_layout_invalid_split(const ts_problem *pb, const ts_layout *l, int explicit_split, char *buf,
                                    size_t cap);
/* The parts of those checks that concern only the ZeRO stage (given pp and the rest), and only
 * the schedule and vpp (whatever the ZeRO stage); ts_layout_invalid runs them last, the search
 * alone where it checked the rest already. `buf` may be NULL (no message). */
const char *ts_zero_invalid(const ts_problem *pb, const ts_layout *l, char *buf, size_t cap);
const char *ts_schedule_invalid(const ts_problem *pb, const ts_layout *l, int explicit_split, char *buf, size_t cap);

/* Evaluates one layout (the planner's closed form). `l->microbatches` is derived. Invalid
 * layout: TS_ERR_INPUT with the reason. */
ts_status ts_evaluate(const ts_problem *pb, const ts_layout *l, ts_eval *out);

#endif
