/* A pipeline's stages for one shard: what each stage holds (parameters, activations per
 * micro-batch) and the per-micro-batch times of the slowest stage. Built once per
 * (tp, cp, ep, sp, mbs, recompute, pp) and reused for every ZeRO stage and schedule.
 *
 * Layers are split contiguously; when pp does not divide the layer count, stages 1..(L mod pp)
 * take one extra layer, so the first stage (embedding, most micro-batches in flight) and the last
 * (LM head, logits) are not the ones made heavier. */
#ifndef TS_STAGES_H
#define TS_STAGES_H

#include "planner/layer.h"

/* Data-parallel traffic and the optimizer step of a rank's parameters, seconds. */
typedef struct {
    double allreduce_s, reduce_scatter_s, allgather_s;
    /* One micro-batch's pass of ZeRO-2/3's per-layer collectives (program.c param_gather and the
     * per-layer reduce-scatters): the same bytes, but a collective's latency per layer */
    double layer_gather_s, layer_reduce_s;
    double optimizer_s[2]; /* unsharded, sharded over DP×CP */
    /* ZeRO 0-2 issue the whole-stage collectives above bucket by bucket (program.c
     * grad_reductions, param_gathers: train.bucket_bytes, per model chunk), each paying its
     * latency: one more bucket's, and how many layers fill a bucket of gradients and of weights */
    double more_allreduce_s, more_ring_s, more_expert_ring_s;
    int layers, moe_layers, grad_bucket_layers, weight_bucket_layers;
} ts_dp_times;

typedef struct {
    int pp, cap;
    ts_shard shard;
    double *params;        /* (pp) non-expert parameters on one rank of the stage */
    double *expert_params; /* (pp) expert parameters on one rank */
    double *act_bytes;     /* (pp) activations of one micro-batch for the whole stage, and */
    double *extra_bytes;   /* (pp) its transient bytes (a recomputed layer, logits); set for
                              the first stage of each kind and of each run */
    int *first_of_run;     /* (n_runs) first stage of each run of identical stages: the worst
                              rank of a run is its first, as micro-batches in flight never grow
                              with the stage index under any schedule */
    int n_runs;
    int *kind_of;          /* (pp) each stage's kind: stages with the same layers and edges */
    int *kind_first, *kind_count; /* (n_kinds) a kind's first stage and its number of stages */
    int n_kinds;
    int *n_dense, *n_moe;  /* (pp) layers of each stage by kind (MTP counted as MoE) */
    ts_layer_cost slow;      /* the slowest stage's times per micro-batch (ts_layer_cost's time
                                fields: its layers', embedding's and head's summed) */
    int slowest;
    /* DualPipe's stage i runs half the micro-batches through its chunk and half through the
     * mirrored stage p-1-i's (schedule.h, dual): the stage whose pair is the slowest
     * (ts_stages_dual_times gives their mean per micro-batch; memory stays per stage). */
    int dual_slowest;
    ts_layer_cost *kind_sum; /* (cap) a kind's per-micro-batch times, summed over its layers */
    double *kind_busy;       /* (cap) and their busy time (compute and exposed communication) */
    int biggest;             /* stage with the most parameters: it paces DP and the optimizer */
    ts_dp_times dp;          /* the biggest stage's (dp = gpus / (tp·cp·pp)) */
    ts_dp_times dual_dp;     /* DualPipe: the biggest mirrored pair's, both chunks held on each */
    double p2p_s;            /* one pipeline transfer of a micro-batch, seconds */
    double mirror_s;         /* DualPipe: the largest exchange of both chunks' gradients with the
                                mirror stage (program.c mirror_grads), seconds */
    /* one rank's parameters of the largest dense layer, of the largest MoE layer apart from its
     * experts, and of its experts (ZeRO-3's gathered copies: stages.c zero3_params) */
    double max_dense_params, max_moe_shared_params, max_expert_params;
    double *states_bytes;    /* (4 × cap) per ZeRO stage and stage: weights, gradients, optimizer
                                and the buffers that do not depend on the micro-batch */
    double mb_buffer_bytes;  /* TP/SP and pipeline buffers of one micro-batch, on every stage */
    /* The part built from tp, cp, ep and pp alone (parameters, their states, DP traffic, the
     * optimizer step) is kept by the next even build with the same four on the same problem: */
    const ts_problem *weights_pb;
    int weights_key[5];      /* tp, cp, ep, etp, pp */
    double hw_over_model;    /* executed / model FLOPs over the whole model */
    /* An uneven split's interleaved chunks (vpp > 1): each global chunk's forward and backward
     * time per micro-batch, its share of exposed communication included; ts_stages_step takes
     * their schedule's timeline for the bubble (n_chunks 0: the even formula) */
    double *chunk_f;         /* (2 × chunk_cap) forwards, then backwards from chunk_f + chunk_cap */
    int n_chunks, chunk_cap;
} ts_stages;

/* Allocates room for up to `cap` stages; ts_stages_free releases it. */
ts_status ts_stages_init(ts_stages *st, int cap);
void ts_stages_free(ts_stages *st);

/* The per-layer costs of one shard, independent of pp (the search reuses them across pp). */
typedef struct {
    ts_shard shard;
    ts_layer_cost dense, moe, head, embed;
    ts_layer_fwd attn; /* the layers' attention parts (ts_shard_costs_all, for ts_shard_costs_new_ep) */
} ts_shard_costs;

/* The costs under every recompute policy (out[rc]; sh->recompute is ignored), the parts they
 * share costed once: what the search and the stage partitioner compare. */
void ts_shard_costs_all(const ts_problem *pb, const ts_shard *sh, ts_shard_costs out[TS_RECOMPUTE_COUNT]);

/* `out` of ts_shard_costs_all moved to another ep: only the MoE layers' costs depend on ep, so
 * only they are recomputed. */
void ts_shard_costs_new_ep(const ts_problem *pb, int ep, ts_shard_costs out[TS_RECOMPUTE_COUNT]);

/* Fills `st` for the problem, the shard's costs and pipeline depth (pp <= cap, pp <= layers).
 * The problem must stay the same object, unchanged, across the builds of one ts_stages (it keys
 * the reuse of the weights part); ts_stages_init starts afresh. */
void ts_stages_build(ts_stages *st, const ts_problem *pb, const ts_shard_costs *costs, int pp);

/* Uneven stages (planner/partition.h): the layers of each virtual stage and each physical
 * stage's recompute policy, in place of the even split. The caller owns the arrays. */
typedef struct {
    int vpp;
    ts_schedule schedule;          /* whose placement puts global chunks on stages */
    const int *layers;             /* (pp·vpp) layers of each global chunk */
    const ts_recompute *recompute; /* (pp) policy of each stage */
    const ts_shard_costs *costs;   /* (TS_RECOMPUTE_COUNT) the shard's costs under each policy */
} ts_stage_split;

/* ts_stages_build with an optional split (NULL: the even split). */
void ts_stages_build_split(ts_stages *st, const ts_problem *pb, const ts_shard_costs *costs, int pp,
                           const ts_stage_split *split);

/* Completes an evaluation: memory on the worst rank, time split and throughput for the layout's
 * ZeRO stage, schedule and vpp, given `st` built for its shard and pp. */
void ts_stages_finish(const ts_stages *st, const ts_problem *pb, const ts_layout *l, ts_eval *out);

/* Stage i's weights, gradients, optimizer states and micro-batch-independent buffers under ZeRO
 * stage z (no activations, no mirror copy, no st->mb_buffer_bytes): what ts_stages_finish counts
 * for the worst stage, for any stage (planner/memory_exec.c reads every stage's). */
void ts_stages_states(const ts_stages *st, const ts_problem *pb, int z, int i, ts_memory *out);

/* The two numbers the search ranks by, without the rest of ts_stages_finish: worst-rank memory
 * (and its stage, if wanted) and step time (its split, if wanted). Same values as finish. */
double ts_stages_memory(const ts_stages *st, const ts_layout *l, int *worst_stage);
/* ts_stages_memory in two steps, so that the search sums the activations once for every ZeRO
 * stage: the activations and micro-batch buffers of each run under l's schedule into acts
 * (room for n_runs), then the worst-rank memory under l's ZeRO stage and schedule from them
 * (DualPipe's stage i adds the states of its copy of stage p-1-i's chunk). */
void ts_stages_run_acts(const ts_stages *st, const ts_layout *l, double *acts);
double ts_stages_memory_acts(const ts_stages *st, const ts_layout *l, const double *acts, int *worst_stage);
/* DualPipe's per-micro-batch times: the mean of the slowest pair of mirrored stages'. */
void ts_stages_dual_times(const ts_stages *st, ts_layer_cost *out);
double ts_stages_step(const ts_stages *st, const ts_problem *pb, const ts_layout *l, ts_time_split *split);

#endif
