/* What the trainer's parts share and nothing else: the shapes of this rank's shard of the model,
 * the layers its stage runs, and a tally of the bytes it holds by category. The parameter store
 * (exec/param_store.h), the activation cache (exec/act_cache.h), the ops (exec/op_ctx.h) and the
 * trainer (exec/trainer.c) read a tr_shape; none of them is known here.
 *
 * Sizes: C hidden, T tokens of a micro-batch on this rank (mbs·seq/cp), Tl the rows held between
 * blocks (T/tp under SP, else T), Hr/KVr local query/kv heads, Qr = Hr·D, KVD = KVr·D,
 * QKVr = Qr + 2·KVD, Fr this rank's MLP slice (F/tp), El local experts (from e0) with slices Fer
 * (Fe/etp, from etp_i·Fer), Vr this rank's vocabulary rows (from v0).
 *
 * Experts apart from TP (etp = 1 < tp, under SP: Megatron-Core --expert-tensor-parallel-size 1):
 * a MoE layer's block is not split over TP. Each rank routes its own Tm = Tl rows (no SP
 * all-gather before the router, no TP collective after the combine), its EP group spans TP ranks
 * (program/ranks.h) and its experts are whole. With etp = tp the TP group shares the T tokens
 * (Tm = T) and each rank runs its F slice of every local expert. */
#ifndef TS_TRAINER_SHAPE_H
#define TS_TRAINER_SHAPE_H

#include "exec/backend.h"
#include "exec/runtime.h"
#include "planner/memory_exec.h"
#include "program/program.h"

typedef struct {
    const ts_model *m;
    const ts_layout *l;
    int stage, tp_i, cp_i, dp_i, ep_i, etp_i; /* this rank's place in the layout */
    int etp; /* the experts' TP degree (ts_layout_etp) */

    int C, V, Vr, v0, H, KV, D, Hr, KVr, Qr, KVD, QKVr, F, Fr, E, El, e0, K, Fe, Fer;
    int G, M; /* node-limited routing: the K experts from the M best of G groups (0: no limit) */
    int seq, Ts, mbs, B, T, Tl, m_mb, cp;
    int Tm; /* rows a MoE layer routes on this rank: T, or Tl with the experts apart from TP */

    int n_local;    /* layers on this stage */
    int *global_of; /* (n_local) global layer of a local one, ascending */
    int *local_of;  /* (layers) local layer of a global one; -1: not on this stage */
    int *chunk_of;  /* (n_local) the local chunk running a local layer */
} tr_shape;

/* The shapes for the rank `rt` places in `l` (of problem `pb`), and the layers the stage program
 * `sp` names. `pb` and `l` must outlive the shape; tr_shape_free releases the layer maps (also
 * after a failure). TS_ERR_NOMEM. */
ts_status tr_shape_init(tr_shape *s, const ts_problem *pb, const ts_layout *l, const ts_runtime *rt,
                        const ts_stage_program *sp);
void tr_shape_free(tr_shape *s);

/* The shapes the planner sizes this rank's memory with (planner/memory_exec.h): the executor's
 * activation entries, workspace and segments are sized from them by the planner's functions. */
void tr_shape_dims(const tr_shape *s, ts_exec_dims *out);

/* Whether global layer `global` is a mixture-of-experts layer. */
int tr_shape_is_moe(const tr_shape *s, int global);

/* Whether global layer `global`'s MLP block is split over TP, opened by the SP all-gather and
 * closed by the TP collective: a dense layer, or a MoE layer whose experts split over TP
 * (etp = tp; program/recipe_moe.c tp_block). */
int tr_shape_mlp_tp(const tr_shape *s, int global);

/* Whether the experts are apart from TP (etp < tp): the router, replicated over TP, sees each
 * rank's own rows, so its weight gradient is summed across TP (ops_moe.h). */
int tr_shape_experts_apart(const tr_shape *s);

/* ---- Memory tally ---------------------------------------------------------------------------- */

/* The categories of ts_exec_memory (exec/trainer.h). */
typedef enum {
    TR_MEM_WEIGHTS,
    TR_MEM_GRADS,
    TR_MEM_OPTIMIZER,
    TR_MEM_ACTIVATIONS,
    TR_MEM_BUFFERS,
    TR_MEM_COUNT
} tr_mem;

/* Bytes held by category now and at their peak. */
typedef struct {
    double live[TR_MEM_COUNT], peak[TR_MEM_COUNT];
} tr_tally;

/* `bytes` more (negative: fewer) of category `mem`. */
void tr_tally_add(tr_tally *t, tr_mem mem, double bytes);

/* n zero floats of backend memory, counted under `mem`. */
ts_status tr_alloc_floats(const ts_backend *be, tr_tally *t, tr_mem mem, size_t n, float **out);

#endif
