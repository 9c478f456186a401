/* The executor's trainer: runs one rank's step program (sim/program.h) for real on a backend,
 * training the transformer of exec/reference.h split over the layout's ranks.
 *
 * Each op of the rank's stage program is executed in program order by a handler that knows what
 * the op means for this rank's shard (e.g. "fwd L3 mb2 qkv": the QKV projection of layer 3 for
 * micro-batch 2 with this rank's heads), and is timed by the backend (backend.h op_begin: the
 * clock on CPUs, CUDA events on GPUs). Gradient reductions and parameter gathers run on the DP
 * stream, so on a GPU they overlap the backward; exec/op_streams.h says what each op waits for. Parallel forms: DP; TP (Megatron column/row parallel, vocab-parallel embedding and
 * cross-entropy); SP (norms on sequence shards, all-gather / reduce-scatter around blocks); PP
 * with the program's schedule (GPipe, 1F1B, interleaved, ZB-H1 with W apart); CP (ring attention:
 * keys and values passed round the CP ring by send/recv, partial attentions merged by log-sum-exp,
 * their gradients passed round in backward; load-balanced causal chunks); EP (tokens dispatched to the ranks owning their experts and combined back with
 * all-to-all-v); ZeRO-1/2/3 with optimizer states, gradients and parameters sharded over DP×CP
 * (experts over their DP group); recompute none / selective / full.
 *
 * Tensors live in the backend's memory and every kernel runs through its kernel table
 * (exec/kernel_table.h), so the same code trains on CPU ranks and on GPUs (one per rank).
 *
 * Parameters are initialised from exec/reference.h's index-addressable generator, so every
 * layout starts from the one-rank model exactly; data is the reference's synthetic stream (or a
 * text file), each rank taking its replica's sequences and its CP chunks. Losses are means over
 * the global batch, as the reference computes them.
 *
 * ZB-H1 defers every weight-gradient GEMM to its W op, the experts' and the router's included.
 *
 * Not supported (ts_trainer_check says so, TS_ERR_INPUT): models the reference does not
 * implement, tied embeddings with pp > 1, tp not dividing kv_heads or the vocabulary, ZB-H1 with
 * ZeRO-2/3, MTP modules, seq not divisible by 2·cp, and under SP a micro-batch's tokens not
 * divisible by tp. */
#ifndef TS_TRAINER_H
#define TS_TRAINER_H

#include <signal.h>

#include <stdint.h>

#include "exec/backend.h"
#include "exec/op_streams.h"
#include "exec/runtime.h"
#include "program/span.h"

typedef struct {
    uint64_t seed;        /* parameters and synthetic data */
    const char *text;     /* train on this text file's bytes instead (NULL: synthetic) */
    float lr, beta1, beta2, eps, weight_decay;
    ts_stream_order order; /* the order ops are issued in (exec/op_streams.h) */
} ts_train_opts;

/* seed 1234, AdamW lr 3e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1, program order. */
void ts_train_opts_defaults(ts_train_opts *o);

/* Bytes this rank holds by category, at their peak over the steps so far. */
typedef struct {
    double weights, grads, optimizer, activations, buffers;
} ts_exec_memory;

typedef struct ts_trainer ts_trainer; /* opaque */

/* Whether the executor can train layout `l` of `pb`: TS_OK, or TS_ERR_INPUT with one line saying
 * what it refuses. Needs no MPI, so `tessera run` asks before it starts any rank. */
ts_status ts_trainer_check(const ts_problem *pb, const ts_layout *l);

/* Sets up this rank's shard of the model for `prog` (built for `pb` and the runtime's layout).
 * `pb`, `prog`, `rt` and `be` must outlive the trainer. */
ts_status ts_trainer_init(ts_trainer **out, const ts_problem *pb, const ts_program *prog,
                          const ts_runtime *rt, const ts_backend *be, const ts_train_opts *opts);
void ts_trainer_free(ts_trainer *t);

/* Runs training step `step` (0-based): the whole program, then the optimizer. `*loss` receives the
 * step's mean loss on every rank; `spans` (the stage program's n_ops, may be NULL) the measured
 * start and end of every op in seconds from the step's start. */
ts_status ts_trainer_step(ts_trainer *t, int step, float *loss, ts_op_span *spans);
/* The last step's start on the backend's clock (ts_backend.now_s), the zero of its spans: ranks
 * of one host share the clock, so their spans line up on it (exec/run.c). */
double ts_trainer_step_origin_s(const ts_trainer *t);
/* From now on each step stores in *op the index of the op it runs, then TS_WATCH_SENDS once they
 * are done (it waits for its pipeline sends and the loss's all-reduce): exec/watchdog.h reads it
 * from a signal handler. NULL stops it. */
void ts_trainer_watch(ts_trainer *t, volatile sig_atomic_t *op);

ts_exec_memory ts_trainer_memory(const ts_trainer *t);
/* How evenly the router spread tokens over the experts whose loads this rank saw (all experts
 * with ep = 1, its local ones otherwise), summed over the MoE layers and micro-batches so far:
 * Σ (load − even load)² and Σ even load², load = tokens an expert received. Summed over the ranks,
 * sqrt(first / second) is the model's moe.load_cv. Both 0 for dense models. */
void ts_trainer_moe_load(const ts_trainer *t, double *dev_sq, double *even_sq);

/* How many parameters the whole model has (exec/reference.h's n_params). */
ts_status ts_trainer_param_count(const ts_trainer *t, size_t *n);

/* The full parameters in exec/reference.h's layout (ts_ref n_params floats, tensor order as there)
 * assembled on world rank 0 into `out` (other ranks pass NULL); a collective call. */
ts_status ts_trainer_gather_params(ts_trainer *t, float *out);

#endif
