/* The step program: for a model, layout and schedule, the ordered ops one training step runs on
 * each pipeline stage, with their dependencies. Built once here; the simulator (sim/engine.h)
 * costs and times it, the executor (exec/) runs it for real. Neither re-derives the schedule.
 *
 * Every rank of a pipeline stage runs the same program (TP, CP, DP and EP peers behave alike),
 * so a program holds one op list per stage; ranks map to stages through planner/ranks.h.
 *
 * Ops of one stage program execute in list order on their stream; an op also waits for its
 * dependencies (earlier ops of the same program). Cross-rank matching:
 *   - COLL: the k-th collective on group g of a rank matches the k-th collective on g of every
 *     other member (members share a stage, hence a program);
 *   - SEND/RECV: matched by key (source stage, destination stage, phase, micro-batch, chunk),
 *     where `chunk` of a SEND or RECV is the global model chunk that produced the data (the
 *     sender's, placed by the schedule: program/schedule.h ts_chunk_global), so both ends carry
 *     the same key.
 *
 * Shapes are per rank (after TP/CP/EP sharding). Sizes come from the layer recipe
 * (program/recipe.h), which the planner's closed form prices too, so the simulator and the closed
 * form cost the same work; program.c says how each op instantiates it. */
#ifndef TS_PROGRAM_H
#define TS_PROGRAM_H

#include <stdint.h>
#include <stdio.h>

#include "models/coll.h"
#include "program/problem.h"
#include "program/ranks.h"

typedef enum {
    TS_OP_GEMM,        /* C(m×n) = A(m×k)·B(k×n), flops = 2mnk (× count for batched experts) */
    TS_OP_ATTENTION,   /* fused attention core: flops, run as `m` kernels (CP ring steps) */
    TS_OP_ELEMENTWISE, /* memory-bound kernel: bytes through HBM */
    TS_OP_OPTIMIZER,   /* Adam over this rank's shard: bytes through HBM */
    TS_OP_COLL,        /* collective `coll` over `group`, nccl-tests size `bytes` */
    TS_OP_SEND,        /* pipeline send of `bytes` to stage `peer` */
    TS_OP_RECV,        /* pipeline receive of `bytes` from stage `peer` */
    TS_OP_KIND_COUNT
} ts_op_kind;
extern const char *const ts_op_kind_names[];

typedef enum {
    TS_PHASE_FWD,
    TS_PHASE_BWD,       /* input gradients (B); under 1F1B/GPipe/interleaved also W */
    TS_PHASE_WGRAD,     /* weight gradients (W), split from B under ZB-H1 */
    TS_PHASE_RECOMPUTE, /* forward work repeated in backward */
    TS_PHASE_STEP,      /* gradient reduction, parameter gathering, optimizer */
    TS_PHASE_COUNT
} ts_phase;
extern const char *const ts_phase_names[];

typedef enum {
    TS_STREAM_COMPUTE,
    TS_STREAM_TP,      /* TP, SP, CP and EP traffic: on the critical path of the layer */
    TS_STREAM_DP,      /* gradient buckets, ZeRO gathers and reduce-scatters */
    TS_STREAM_PP_SEND,
    TS_STREAM_PP_RECV,
    TS_STREAM_EP,      /* EP dispatch and combine under Megatron-Core's combined 1F1B, which runs them
                          on a stream of their own (otherwise on TS_STREAM_TP) */
    TS_STREAM_COUNT
} ts_stream;
extern const char *const ts_stream_names[];

/* What part of the model an op belongs to (its name in dumps and traces). */
typedef enum {
    TS_PART_EMBED, TS_PART_NORM1, TS_PART_QKV, TS_PART_ATTN, TS_PART_PROJ, TS_PART_NORM2,
    TS_PART_FC1, TS_PART_ACT, TS_PART_FC2, TS_PART_ROUTER, TS_PART_DISPATCH, TS_PART_EXPERT_FC1,
    TS_PART_EXPERT_ACT, TS_PART_EXPERT_FC2, TS_PART_COMBINE, TS_PART_HEAD, TS_PART_LOSS,
    TS_PART_TP_ATTN, TS_PART_TP_MLP, TS_PART_SP_GATHER_ATTN, TS_PART_SP_GATHER_MLP,
    TS_PART_CP_RING, TS_PART_TP_EMBED, TS_PART_PP_ACT, TS_PART_PP_GRAD, TS_PART_GRAD_REDUCE,
    TS_PART_PARAM_GATHER, TS_PART_OPTIMIZER,
    TS_PART_MIRROR_GRAD, /* DualPipe: a chunk's gradients exchanged with the stage holding its other copy */
    TS_PART_ZERO_GRAD,   /* the step's first op: the gradients this rank accumulates into set to zero */
    TS_PART_GRAD_ACCUM,  /* after a micro-batch's backward of a chunk: its gradients accumulated in a
                            pass of their own (the stack's grad_accum_bytes) */
    TS_PART_AMAX_REDUCE, /* FP8 delayed scaling: the amaxes all-reduced (MAX) at the end of a chunk's
                            forward and of its backward, on the compute stream (program.c) */
    TS_PART_COUNT
} ts_part;
extern const char *const ts_part_names[];

typedef struct {
    uint8_t kind;   /* ts_op_kind */
    uint8_t phase;  /* ts_phase */
    uint8_t stream; /* ts_stream */
    uint8_t part;   /* ts_part */
    uint8_t group;  /* ts_group of COLL (TS_GROUP_PP for SEND/RECV) */
    uint8_t coll;   /* ts_coll of COLL */
    uint8_t pair;   /* DualPipe's F&B: 1 or 2, alternating pair by pair, on the ops of a forward and a
                       backward issued interleaved (the executor may run each whole); 0 otherwise */
    uint8_t spare;  /* always 0: with it and a 32-bit chunk the struct has no padding, so designated
                       initializers set every byte and two programs compare with memcmp */
    int32_t chunk;  /* model chunk on this stage (interleaved), 0 otherwise; SEND/RECV: see above */
    int32_t layer;  /* global layer index, -1 when none */
    int32_t mb;     /* micro-batch, -1 when none */
    int32_t peer;   /* SEND/RECV: the other stage */
    uint32_t dep0;  /* dependencies: deps[dep0 .. dep0+ndeps) of the stage program */
    uint32_t ndeps;
    double m, n, k; /* GEMM shape; `count` GEMMs of it (experts) in `flops`; ATTENTION: m
                       kernels; COLL: m > 0 ring CP's steps of n bytes (recipe.h ts_cp_coll) */
    double flops;   /* GEMM and attention FLOPs; the CP ring: the attention's it runs beside */
    double bytes;   /* element-wise/optimizer HBM bytes; COLL/SEND/RECV message bytes */
} ts_op;
_Static_assert(sizeof(ts_op) == 8 * sizeof(uint8_t) + 6 * sizeof(int32_t) + 5 * sizeof(double),
               "ts_op has no padding bytes");

/* The stage's parameter segments and the resources ops touch (program/data.h). */
/* The stage's segments. */
typedef struct {
    int layers;            /* the model's layers, MTP included */
    int n_local;           /* layers on this stage */
    int32_t *local_of;     /* (layers) local index of a global layer; -1: not on this stage */
    int n_seg;             /* 2·n_local + 2 */
    int seg_embed, seg_head; /* segment indices; -1 when not on this stage */
    int head_uses_embed;   /* tied embeddings: the head reads the embedding's segment */
    int vpp;
    int32_t *chunk_lo, *chunk_hi; /* (vpp) global layers [lo, hi) of each local chunk */
    int8_t *grad_buffer;   /* (n_seg) the one-layer gradient buffer (0 or 1) a segment's gradients
                              live in under ZeRO-2/3; -1: its own */
} ts_stage_segments;

/* One resource an op touches: parameters P(s) = s, gradients G(s) = n_seg + s, one-layer
 * gradient buffer b 2·n_seg + b. */
typedef struct {
    int32_t res;
    uint8_t write;
} ts_access;

typedef struct {
    ts_op *ops;       /* (n_ops) in issue order */
    int n_ops, cap_ops;
    uint32_t *deps;   /* (n_deps) op indices: timing and data dependencies (program/data.h) */
    int n_deps, cap_deps;
    ts_stage_segments seg; /* the stage's parameter segments */
    int32_t *segs;         /* DP ops' segments, in the order they are reduced or gathered */
    uint32_t *seg_start;   /* (n_ops + 1) op i's: segs[seg_start[i] .. seg_start[i + 1]) */
} ts_stage_program;

typedef struct {
    int skip_edges; /* leave out embedding, LM head and loss (uniform stages for schedule tests) */
    /* Uneven stages (planner/partition.h), both NULL for the planner's even split; the caller
     * owns them: */
    const int *chunk_layers;             /* (pp·vpp) layers of each global chunk (program/schedule.h) */
    const ts_recompute *stage_recompute; /* (pp) each stage's recompute policy */
} ts_program_opts;

typedef struct {
    ts_layout layout; /* microbatches derived */
    int pp;
    ts_stage_program *stages; /* (pp) */
    int64_t total_ops;        /* over the stage programs */
} ts_program;

/* The most ops a step program may hold, over its stages (docs/reliability.md, "Limits"): a
 * request beyond it (a global batch of millions of micro-batches) is refused before it is built,
 * or, should the estimate fall short, when it reaches the limit, with TS_ERR_INPUT naming the
 * limit and --max-ops, which raises it. Process-wide; the default is TS_PROGRAM_DEFAULT_MAX_OPS. */
#define TS_PROGRAM_DEFAULT_MAX_OPS 20000000LL
void ts_program_set_max_ops(int64_t max_ops);
int64_t ts_program_max_ops(void);

/* Builds the program of one step. The layout must be valid for the problem (TS_ERR_INPUT with
 * the reason otherwise). `opts` may be NULL. ts_program_free releases it. */
ts_status ts_program_build(const ts_problem *pb, const ts_layout *l, const ts_program_opts *opts,
                           ts_program *out);
void ts_program_free(ts_program *p);

/* The order a rank whose calls block (the CPU executor) issues `order`'s n ops of `sp` in: each
 * F&B pair's two sides whole, the side the pair opens with first (program.c). */
ts_status ts_unpair_order(const ts_stage_program *sp, int32_t *order, int n);

/* "fwd L3 mb2 c0 qkv" style label. */
const char *ts_op_label(const ts_op *op, char *buf, size_t cap);

/* One line per op, per stage: index, label, kind, stream, shape or bytes, dependencies. */
ts_status ts_program_dump(const ts_program *p, FILE *f);

#endif
