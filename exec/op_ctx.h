/* What the trainer's per-part ops share: the context every op handler gets (backend, runtime,
 * shapes, data, the workspace, the deferred weight gradients and the step's statistics), the
 * workspace itself, and the steps several blocks take (the TP collective that closes a block, a
 * norm's backward under SP).
 *
 * Ops run in program order (on a GPU, queued in order on one compute stream), so an op may leave
 * its result in the workspace where the next op of the same slot reads it: `cur` carries the
 * residual stream forward through a slot, `dcur` its gradient backward. Tensors are backend
 * memory and every computation goes through the kernel table `k`; what the host decides with
 * (the router's choices, the all-to-all counts, each token's loss) is copied to host buffers
 * explicitly. On the CPU those copies are memcpy, so results are those of the kernels called
 * directly.
 *
 * Tensor parallelism follows Megatron-LM: QKV and the MLP's gate/up are column-parallel (this
 * rank's heads and slice), the output projection and down projection row-parallel with an
 * all-reduce after them (a reduce-scatter under SP, whose blocks start with an all-gather); the
 * embedding and LM head are vocab-parallel. Backward mirrors it: each block's input gradient is
 * all-reduced (reduce-scattered under SP) across TP. */
#ifndef TS_OP_CTX_H
#define TS_OP_CTX_H

#include "exec/kernel_table.h"
#include "exec/trainer_data.h"
#include "exec/trainer_shape.h"
#include "exec/wgrad_queue.h"

/* The tensors flowing through the current slot and the ops' scratch (backend memory, counted
 * under buffers), and the host buffers the ops plan with. */
typedef struct {
    float *cur;   /* (Tl, C) forward: the next layer's input */
    float *dcur;  /* (Tl, C) backward: gradient of the current residual */
    float *dmid;  /* (Tl, C) */
    float *dfull; /* (T, C) SP-gathered gradient or the block's partial input gradient */
    float *dln;   /* (T, C) */
    float *proj;  /* (T, C) partial block output */
    float *rows;  /* (T, C) scratch: SP shards, a block's local rows */
    float *datt, *dqkv;        /* (T, Qr), (T, QKVr) */
    float *dact, *dgate, *dup; /* (max(T, T·K·ep), max(Fr, Fer)) */
    float *dxe, *dye, *dxr, *dyr, *dweight, *dlogits_r; /* MoE backward */
    float *dlogits;            /* (T, Vr) */
    /* CP ring attention (ops_attn.c): two blocks, one in use while the other is received; each
     * holds one member's keys and values (T, 2·KVD), then in backward their gradients (T, 2·KVD). */
    float *ring[2];
    int ring_cur;               /* the block in use */
    ts_request *ring_send;      /* forward: the send of ring[ring_cur] under way, or NULL */
    float *ring_out, *ring_lse; /* (Ts, Qr), (Ts, Hr) one key block's attention before its merge */
    float *scratch;             /* (T) attention (Ts per call) and the per-token losses */
    float *norm_grad;           /* (C) SP: a norm's weight gradient before its TP all-reduce */
    float *router_grad;         /* (E, C) experts apart from TP: the router's, before its TP sum */
    int mlp_open;               /* backward: an MLP block awaits its closing norm backward */

    int *ep_counts;                                 /* host (ep·El) rows per (peer, expert) */
    int *a2a;                                       /* host (4·ep) all-to-all-v counts, displacements */
    int *host_expert, *host_slot, *host_slot_token; /* host (T·K): ts_moe_plan's in and outs */
    float *host_loss;                               /* host (T) one micro-batch's per-token losses */
} tr_work;

/* Allocates the workspace for shape `s`. tr_work_free releases it (also after a failure), first
 * waiting for a ring send a failed step left under way. */
ts_status tr_work_init(tr_work *w, const tr_shape *s, const ts_backend *be, tr_tally *tally);
void tr_work_free(tr_work *w, const ts_backend *be);

/* What the ops add up over a step (loss) and over the run (the router's spread). */
typedef struct {
    double loss_sum;                /* this rank's share of the step's mean loss */
    double moe_dev_sq, moe_even_sq; /* ts_trainer_moe_load */
} tr_stats;

typedef struct {
    const ts_backend *be;
    const ts_kernels *k; /* be->kernels */
    const ts_runtime *rt;
    const tr_shape *s;
    const tr_data *data;
    tr_work *w;
    tr_wgrad_queue *wq;
    tr_stats *stats;
} tr_op_ctx;

/* This rank's communicator of group `g`. */
ts_comm *tr_comm(const tr_op_ctx *c, ts_group g);

/* n floats from src to dst (both backend memory); n zero floats at p. */
ts_status tr_copy_floats(const tr_op_ctx *c, float *dst, const float *src, size_t n);
ts_status tr_zero_floats(const tr_op_ctx *c, float *p, size_t n);

/* A block's output partial sums (T, C) reduced across TP: all-reduce, or reduce-scatter to this
 * rank's Tl rows under SP. Returns where the Tl rows are. */
ts_status tr_tp_close(const tr_op_ctx *c, float *partial, float **rows);

/* A norm's backward over the Tl rows: dx += its input gradient, dw += its weight gradient; under
 * SP each TP rank saw a shard of the tokens, so the shards' sums are all-reduced across TP before
 * they are added. */
ts_status tr_norm_bwd(const tr_op_ctx *c, float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd);

/* Backward, a block's SP all-gather: the residual's gradient rows from every TP rank, in dfull. */
ts_status tr_sp_gather_bwd(const tr_op_ctx *c);

#endif
