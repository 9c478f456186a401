/* The trainer's internal state, shared by trainer.c (set-up, parameters, optimizer, the step
 * loop) and trainer_ops.c (what each op of the program does). Not a public surface.
 *
 * Sizes: C hidden, T tokens of a micro-batch on this rank (mbs·seq/cp), Tl the rows held between
 * blocks (T/tp under SP, else T), Hr/KVr local query/kv heads, Qr = Hr·D, KVD = KVr·D,
 * QKVr = Qr + 2·KVD, Fr this rank's MLP slice (F/tp), El local experts with slices Fer.
 *
 * Memory. Tensors (parameters, gradients, optimizer states, activations, scratch, token ids and
 * positions the kernels read) are the backend's memory (be->alloc: host on the CPU, device on a
 * GPU), and only the kernel table (be->kernels) touches them. What the host decides with lives in
 * host memory and is copied explicitly: the batch's tokens and positions (copied to the device per
 * step), each token's loss, the router's choices (to plan the expert dispatch on the host) and
 * the all-to-all counts. On the CPU those copies are memcpy, so results are those of the kernels
 * called directly. */
#ifndef TS_TRAINER_IMPL_H
#define TS_TRAINER_IMPL_H

#include "exec/kernel_table.h"
#include "exec/kernels.h"
#include "exec/op_streams.h"
#include "exec/reference.h"
#include "exec/trainer.h"

/* One layer's tensors on this rank (parameters or gradients). */
typedef struct {
    float *attn_norm; /* (C) */
    float *qkv;       /* (QKVr, C): local query heads, then their keys, then values */
    float *attn_out;  /* (C, Qr) */
    float *mlp_norm;  /* (C) */
    float *router;    /* (E, C), MoE layers */
    float *gate, *up; /* (El, Fr or Fer, C); a dense layer is El = 1 */
    float *down;      /* (El, C, Fr or Fer) */
} tr_layer;

/* Parameters reduced and sharded together: one layer's non-expert tensors (over DP×CP), one MoE
 * layer's local experts (over EP's data-parallel group), the embedding, the final norm with the
 * LM head. ZeRO >= 1 gives each member `part` elements of the optimizer state; ZeRO >= 2 of the
 * gradients; ZeRO-3 of the parameters. */
typedef struct {
    size_t n, part;      /* elements; per-member share (n padded to a multiple of members) */
    int group;           /* ts_group reduced over */
    int members, index;  /* group size and this rank's place in it */
    int zero;            /* the ZeRO stage that applies to this segment */
    float *param;        /* (n), or under ZeRO-3 the last gathered copy (NULL when released) */
    float *grad;         /* (n); under ZeRO-2/3 a one-layer buffer shared by all segments */
    int owns_grad;       /* grad is this segment's own allocation */
    float *param_shard;  /* (part) ZeRO-3 */
    float *grad_shard;   /* (part) ZeRO >= 1 */
    float *adam_m, *adam_v; /* (part) under ZeRO >= 1, else (n) */
} tr_segment;

/* Activations of one layer (or the head) for one micro-batch, from forward to backward: the
 * tensors in one device allocation `dev`, the MoE counts the host plans with after the struct. */
typedef struct {
    size_t bytes;             /* of both allocations */
    void *dev;
    float *x;                 /* (Tl, C) layer input */
    float *ln1, *rstd1;       /* (T, C), (Tl) */
    float *qkv;               /* (T, QKVr) after rotary */
    float *att, *lse;         /* (T, Qr), (T, Hr) */
    float *mid;               /* (Tl, C) */
    float *ln2, *rstd2;       /* (T, C), (Tl) */
    float *gate, *up, *act;   /* (T, Fr) dense; MoE (rows, Fer) */
    float *out;               /* (Tl, C) */
    /* MoE */
    float *logits, *probs, *weight;          /* (T, E), (T, E), (T, K) */
    int *expert, *slot, *slot_token; /* device: (T, K), (T, K), (T·K) */
    int *offset;              /* host: (E + 1) */
    float *xe, *ye;           /* (T·K, C) rows in slot order (by expert), at the source */
    float *xr, *yr;           /* (rows, C) rows this rank's experts process, by local expert */
    int rows;
    int *send_rows, *recv_rows; /* host: (ep) rows to / from each EP peer */
    int *src_expert_rows;     /* host: (ep, El) rows each peer sent for each of our experts */
    /* head (last chunk) */
    float *xf;                /* (Tl, C) the final norm's input */
    float *lnf, *rstdf, *logits_v, *ce_max, *ce_sum, *ce_tgt; /* (T, C), (Tl), (T, Vr), (T)... */
} tr_acts;

/* A weight-gradient GEMM deferred to its WGRAD op: dw (OC, IC) += dout^T (OC, T) · in (T, IC). */
typedef struct {
    float *dw;
    float *dout; /* owned copy (backend memory) */
    const float *in;
    int T, IC, OC;
} tr_wgrad;

typedef struct {
    int layer, mb, part; /* layer -1: the LM head */
    int n, cap;
    tr_wgrad *w;
} tr_wgrad_entry;

struct ts_trainer {
    volatile sig_atomic_t *watch_op; /* ts_trainer_watch's, or NULL */
    const ts_problem *pb;
    const ts_program *prog;
    const ts_runtime *rt;
    const ts_backend *be;
    const ts_kernels *k; /* be->kernels */
    ts_train_opts opts;
    const ts_model *m;
    const ts_layout *l;
    int stage, tp_i, cp_i, dp_i, ep_i;

    int C, V, Vr, v0, H, KV, D, Hr, KVr, Qr, KVD, QKVr, F, Fr, E, El, e0, K, Fe, Fer;
    int seq, Ts, mbs, B, T, Tl, m_mb, cp;
    int split_w; /* the schedule runs W apart */

    int n_local, *global_of, *local_of; /* layers on this stage; local index of a global layer */
    int first_global, last_global;      /* on the first and last stage: layer 0, layer L-1 */

    int n_seg;
    tr_segment *seg; /* [2·j] shared and [2·j+1] experts of local layer j, then embedding, head */
    int seg_embed, seg_head; /* -1 when not on this stage */
    float *grad_layer[2];    /* ZeRO-2/3: one layer's gradients (the largest segment pair) each;
                                local layer j's in grad_layer[j % 2], so that on a GPU layer j's
                                reduction overlaps layer j - 1's backward (exec/op_streams.h) */

    tr_acts ***acts; /* (n_local + 1) × (m_mb): per layer and micro-batch; [n_local] the head */
    int step;        /* the step running */

    /* the activation flowing through the current slot */
    float *cur;   /* (Tl, C) forward: the next layer's input */
    float *dcur;  /* (Tl, C) backward: gradient of the current residual */
    float *dmid;  /* (Tl, C) */
    float *dfull; /* (T, C) SP-gathered gradient or the block's partial input gradient */
    float *dln;   /* (T, C) */
    float *proj;  /* (T, C) partial block output */
    float *rows;  /* (T, C) scratch: SP shards, a block's local rows */
    float *datt, *dqkv;       /* (T, Qr), (T, QKVr) */
    float *dact, *dgate, *dup; /* (max(T, T·K), max(Fr, Fer)) */
    float *dxe, *dye, *dxr, *dyr, *dweight, *dlogits_r; /* MoE backward */
    float *dlogits;           /* (T, Vr) */
    /* CP ring attention (trainer_ops.c): two blocks, one in use while the other is received; each
     * holds one member's keys and values (T, 2·KVD), then in backward their gradients (T, 2·KVD). */
    float *ring[2];
    int ring_cur;             /* the block in use */
    ts_request *ring_send;    /* forward: the send of ring[ring_cur] under way, or NULL */
    float *ring_out, *ring_lse; /* (Ts, Qr), (Ts, Hr) one key block's attention before its merge */
    int *ep_counts;           /* (ep·El) rows per (peer, expert) */
    int *a2a;                 /* (4·ep) all-to-all-v counts and displacements */
    int mlp_open;             /* backward: an MLP block awaits its closing norm backward */
    float *scratch;           /* (T) attention (Ts per call) and the per-token losses */
    float *norm_grad;         /* (C) SP: a norm's weight gradient before its TP all-reduce */

    int *tokens;                 /* host (B, seq + 1) */
    int *inputs, *targets, *pos; /* host (m_mb, T) */
    int *kv_pos;                 /* host (cp·Ts) key positions of one sequence, CP member-major */
    int *dev_inputs, *dev_targets, *dev_pos, *dev_kv_pos; /* their copies in backend memory */
    int *host_expert, *host_slot, *host_slot_token;       /* host (T·K): ts_moe_plan's in and outs */
    float *host_loss;            /* host (T) one micro-batch's per-token losses */
    float *loss_buf;             /* (1) backend memory: the step's loss, all-reduced */

    int n_wgrad, cap_wgrad;
    tr_wgrad_entry *wgrad;

    int n_sends, cap_sends;
    ts_request **sends;
    float **send_bufs; /* backend memory, freed once the send completes */

    int *chunk_lo, *chunk_hi;      /* (vpp) global layers [lo, hi) of each local chunk */
    int8_t *grad_buffer;           /* (n_seg) which grad_layer a segment's gradients are in; -1 */
    ts_op_streams streams;         /* each op's stream and wait, DP ops' segments, issue order */
    ts_op_clock *clock;            /* the backend's per-op marks */
    int z3_layers[2], z3_n;        /* ZeRO-3: local layers whose parameters are gathered */
    float *shard_tmp;              /* (largest part) a reduce-scatter's result before it is added */

    double loss_sum;
    double moe_dev_sq, moe_even_sq; /* ts_trainer_moe_load */
    ts_exec_memory mem, live;
};

/* trainer_ops.c */
ts_status tr_run_op(ts_trainer *t, const ts_op *op);
/* trainer.c: the segment views of a local layer's parameters and gradients. */
tr_layer tr_layer_params(const ts_trainer *t, int local);
tr_layer tr_layer_grads(const ts_trainer *t, int local);
ts_status tr_acts_get(ts_trainer *t, int local, int mb, tr_acts **out);
void tr_acts_release(ts_trainer *t, int local, int mb);
/* Optimizer-side work of bucket and step ops (trainer.c). */
ts_status tr_grad_reduce(ts_trainer *t, const ts_op *op);
ts_status tr_param_gather(ts_trainer *t, const ts_op *op);
ts_status tr_optimizer(ts_trainer *t);
/* Memory accounting: `bytes` more (or fewer) of `category` (offset into ts_exec_memory). */
void tr_account(ts_trainer *t, double *category_live, double bytes);

#endif
