/* What the trainer's parts share and nothing else: the shapes of this rank's shard of the model,
 * the layers its stage runs, and a tally of the bytes it holds by category. The parameter store
 * (exec/param_store.h), the activation cache (exec/act_cache.h), the ops (exec/op_ctx.h) and the
 * trainer (exec/trainer.c) read a tr_shape; none of them is known here.
 *
 * Sizes: C hidden, T tokens of a micro-batch on this rank (mbs·seq/cp), Tl the rows held between
 * blocks (T/tp under SP, else T), Hr/KVr local query/kv heads, Qr = Hr·D, KVD = KVr·D,
 * QKVr = Qr + 2·KVD, Fr this rank's MLP slice (F/tp), El local experts (from e0) with slices Fer,
 * Vr this rank's vocabulary rows (from v0). */
#ifndef TS_TRAINER_SHAPE_H
#define TS_TRAINER_SHAPE_H

#include "exec/backend.h"
#include "exec/runtime.h"
#include "planner/memory_exec.h"
#include "program/program.h"

typedef struct {
    const ts_model *m;
    const ts_layout *l;
    int stage, tp_i, cp_i, dp_i, ep_i; /* this rank's place in the layout */

    int C, V, Vr, v0, H, KV, D, Hr, KVr, Qr, KVD, QKVr, F, Fr, E, El, e0, K, Fe, Fer;
    int G, M; /* node-limited routing: the K experts from the M best of G groups (0: no limit) */
    int seq, Ts, mbs, B, T, Tl, m_mb, cp;

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
