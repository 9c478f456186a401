/* Stage aggregation and the step's closed form (see stages.h).
 *
 * Step time (Narayanan et al. SC'21 eq. 1, extended):
 *   step = m·(t_f + t_b + t_rc + exposed TP/CP/EP per micro-batch)       slowest stage
 *        + m·v·(FP8 delayed scaling's amax reductions, both ways)        amax_times
 *        + bubble(schedule)                                              schedule.c
 *        + (2·(m + p - 1) + (1 - pp_comm_overlap)·2·m·(v - 1))·t_p2p    PP send/recv
 *        + exposed DP / ZeRO traffic + optimizer step.
 * DP: gradients reduce while the last micro-batch runs backward through the stage's last model
 * chunk and ZeRO's parameter all-gather runs under the next step's first forward (Megatron-LM overlap_grad_reduce /
 * overlap_param_gather); ZeRO-3 gathers each layer's parameters per micro-batch in forward and
 * backward and reduce-scatters its gradients (Rajbhandari et al. 2020 §7: 1.5× the volume).
 * Only the fraction dp_comm_overlap of a window can be used, and hidden traffic slows compute by
 * overlap_slowdown (system file).
 * Memory per rank (ZeRO paper §3.1, §5): weights + gradients + optimizer states sharded per stage
 * over the DP×CP group (experts over DP×CP/EP), activations × micro-batches in flight, buffers.
 * Optimizer step: Adam reads and writes fp32 master, momentum and variance (24 bytes), reads the
 * gradient and writes the 16-bit weight, for the parameters this rank updates (memory bound).
 * DualPipe (DeepSeek-V3 §3.2.1): the slowest pair of mirrored stages' mean work, its F&B pairs
 * hiding TP/CP traffic, the mirror stages' gradient exchange, both chunks' DP traffic (see
 * ts_stages_step and docs/planner.md). */
#include "planner/stages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost.h"
#include "program/ranks.h"
#include "program/schedule.h"

ts_status ts_stages_init(ts_stages *st, int cap) {
    *st = (ts_stages){0};
    ts_status res = TS_OK;
    st->cap = cap;
    st->params = calloc((size_t)cap * 8, sizeof(double));
    TS_ALLOC_GOTO(st->params, res, fail);
    st->first_of_run = calloc((size_t)cap * 6, sizeof(int));
    TS_ALLOC_GOTO(st->first_of_run, res, fail);
    st->kind_sum = calloc((size_t)cap, sizeof *st->kind_sum);
    TS_ALLOC_GOTO(st->kind_sum, res, fail);
    st->kind_busy = calloc((size_t)cap, sizeof *st->kind_busy);
    TS_ALLOC_GOTO(st->kind_busy, res, fail);
    st->n_dense = st->first_of_run + cap;
    st->n_moe = st->first_of_run + 2 * cap;
    st->kind_of = st->first_of_run + 3 * cap;
    st->kind_first = st->first_of_run + 4 * cap;
    st->kind_count = st->first_of_run + 5 * cap;
    st->expert_params = st->params + cap;
    st->act_bytes = st->params + 2 * cap;
    st->extra_bytes = st->params + 3 * cap;
    st->states_bytes = st->params + 4 * cap;
    return TS_OK;
fail:
    ts_stages_free(st);
    return res;
}

void ts_stages_free(ts_stages *st) {
    free(st->chunk_f);
    free(st->params);
    free(st->first_of_run);
    free(st->kind_sum);
    free(st->kind_busy);
    *st = (ts_stages){0};
}

/* MoE layers among [0, x): layers first_dense, first_dense+every, ... */
static int moe_below(const ts_model *m, int x) {
    if (m->moe.experts == 0 || x <= m->moe.first_dense) return 0;
    int every = m->moe.every > 0 ? m->moe.every : 1;
    return (x - m->moe.first_dense + every - 1) / every;
}

static double max_d(double a, double b) { return a > b ? a : b; }

void ts_shard_costs_new_ep(const ts_problem *pb, int ep, ts_shard_costs out[TS_RECOMPUTE_COUNT]) {
    ts_shard sh = out[0].shard;
    sh.ep = ep;
    ts_layer_cost moe[TS_RECOMPUTE_COUNT];
    if (pb->model.moe.experts > 0) ts_layer_costs_with(pb, &sh, 1, &out[0].attn, moe);
    for (int rc = 0; rc < TS_RECOMPUTE_COUNT; rc++) {
        out[rc].shard.ep = ep;
        if (pb->model.moe.experts > 0) out[rc].moe = moe[rc];
    }
}

void ts_shard_costs_all(const ts_problem *pb, const ts_shard *sh, ts_shard_costs out[TS_RECOMPUTE_COUNT]) {
    ts_layer_cost dense[TS_RECOMPUTE_COUNT], moe[TS_RECOMPUTE_COUNT], head, embed;
    ts_layer_fwd attn;
    ts_layer_attention_of(pb, sh, &attn);
    ts_layer_costs_with(pb, sh, 0, &attn, dense);
    if (pb->model.moe.experts > 0) ts_layer_costs_with(pb, sh, 1, &attn, moe);
    ts_head_cost_of(pb, sh, &head);
    ts_embed_cost_of(pb, sh, &embed);
    for (int rc = 0; rc < TS_RECOMPUTE_COUNT; rc++) {
        out[rc].shard = *sh;
        out[rc].shard.recompute = (ts_recompute)rc;
        out[rc].dense = dense[rc];
        out[rc].moe = pb->model.moe.experts > 0 ? moe[rc] : dense[rc];
        out[rc].head = head;
        out[rc].embed = embed;
        out[rc].attn = attn;
    }
}

void ts_stages_build(ts_stages *st, const ts_problem *pb, const ts_shard_costs *costs, int pp) {
    ts_stages_build_split(st, pb, costs, pp, NULL);
}

/* Layers of stage i under a split: its chunks' ranges, counted by kind. */
static void split_counts(const ts_model *m, const ts_stage_split *sp, int pp, int i, int *n_dense, int *n_moe) {
    int first = 0, n = 0, moe = 0;
    for (int g = 0; g < pp * sp->vpp; g++) {
        if (ts_sched_stage(sp->schedule, pp, sp->vpp, g) == i) {
            n += sp->layers[g];
            moe += moe_below(m, first + sp->layers[g]) - moe_below(m, first);
        }
        first += sp->layers[g];
    }
    *n_dense = n - moe;
    *n_moe = moe;
}

/* Layers of stage i, by kind: the even split (stages 1..L mod pp one more) or the given one;
 * DeepSeek-V3's MTP module sits after the last layer, on the last stage. */
static void stage_layers(const ts_model *m, int pp, const ts_stage_split *split, int i, int *n_dense, int *n_moe) {
    if (split) {
        split_counts(m, split, pp, i, n_dense, n_moe);
    } else {
        int first, n;
        ts_even_split(m->layers, pp, 1, i, &first, &n);
        *n_moe = moe_below(m, first + n) - moe_below(m, first);
        *n_dense = n - *n_moe;
    }
    if (i == pp - 1) *n_moe += m->mtp_layers;
}

static void build_weights(ts_stages *st, const ts_problem *pb, const ts_shard *sh, int pp, const ts_stage_split *split);
static void build_work(ts_stages *st, const ts_problem *pb, const ts_shard_costs *costs, int pp,
                       const ts_stage_split *split);

void ts_stages_build_split(ts_stages *st, const ts_problem *pb, const ts_shard_costs *costs, int pp,
                           const ts_stage_split *split) {
    const ts_shard *sh = &costs->shard;
    int key[5] = {sh->tp, sh->cp, sh->ep, ts_shard_etp(sh), pp};
    int same = split == NULL && st->weights_pb == pb && memcmp(key, st->weights_key, sizeof key) == 0;
    st->pp = pp;
    st->shard = *sh;
    if (!same) {
        build_weights(st, pb, sh, pp, split);
        /* An uneven split's weights are not reused: the key does not say which split. */
        st->weights_pb = split ? NULL : pb;
        memcpy(st->weights_key, key, sizeof key);
    }
    build_work(st, pb, costs, pp, split);
}

static void stage_states(const ts_stages *st, const ts_problem *pb, int z, int i, ts_memory *out);

/* Stages alike (the same layers by kind, both or neither the first and the last) share a kind,
 * numbered in order of first appearance; a run is a stretch of stages of one kind. Under an
 * uneven split every stage is its own kind (each has its own recompute policy). */
static void stage_kinds(ts_stages *st, int pp, int uneven) {
    st->n_kinds = st->n_runs = 0;
    for (int i = 0; i < pp; i++) {
        int k = -1;
        for (int j = 0; j < st->n_kinds && k < 0 && !uneven; j++) {
            int f = st->kind_first[j];
            if (st->n_dense[f] == st->n_dense[i] && st->n_moe[f] == st->n_moe[i] && (f == 0) == (i == 0) &&
                (f == pp - 1) == (i == pp - 1))
                k = j;
        }
        if (k < 0) {
            k = st->n_kinds++;
            st->kind_first[k] = i;
            st->kind_count[k] = 0;
        }
        st->kind_of[i] = k;
        st->kind_count[k]++;
        if (i == 0 || st->kind_of[i - 1] != k) st->first_of_run[st->n_runs++] = i;
    }
}

/* Latency of `count` more ring collectives over n ranks on `link` than the one ts_coll_s
 * prices: n - 1 steps each (planner/cost.c, reduce-scatter and all-gather). */
static double more_rings_s(const ts_system *s, int count, int n, ts_link link) {
    return count > 0 && n > 1 ? count * (n - 1) * ts_link_latency_s(s, link) : 0;
}

/* Layers of `layer_bytes` each that fill a DP bucket of `bucket_bytes` (program.c closes one once
 * it holds that much), at least 1, at most `layers`. */
static int bucket_layers(double bucket_bytes, double layer_bytes, int layers) {
    if (!(layer_bytes > 0) || layers <= 0) return 1;
    double k = ceil(bucket_bytes / layer_bytes);
    return k < 1 ? 1 : k > layers ? layers : (int)k;
}

/* The buckets program.c issues for `layers` layers in `v` model chunks of near-equal layers
 * (a chunk's last bucket closes with it), `k` layers a bucket. */
static int bucket_count(int layers, int v, int k) {
    if (layers <= 0 || k <= 0) return 0;
    if (v > layers) v = layers;
    if (v < 1) v = 1;
    int base = layers / v, rem = layers % v;
    return rem * ((base + k) / k) + (v - rem) * ((base + k - 1) / k);
}

/* The latency the whole-stage figures of `d` leave out: each bucket but one (its DP×CP ring's, or
 * the all-reduce's under ZeRO-0) and each MoE layer's expert collective but one (gathers and
 * reductions alike, over the experts' group); `v` model chunks a stage. */
static double bucket_latency_s(const ts_dp_times *d, int v, int zero, int gather) {
    int k = gather ? d->weight_bucket_layers : d->grad_bucket_layers;
    int more = bucket_count(d->layers, v, k) - 1, more_moe = d->moe_layers - 1;
    if (more < 0) more = 0;
    if (more_moe < 0) more_moe = 0;
    if (zero == 0 && !gather) return more * d->more_allreduce_s + more_moe * 2.0 * d->more_expert_ring_s;
    return more * d->more_ring_s + more_moe * d->more_expert_ring_s;
}

/* The gradient reduction, parameter gathering (over DP×CP, experts over DP×CP/EP) and optimizer
 * step of `ne` non-expert and `ex` expert parameters on a rank, held in `layers` layers of which
 * `moe_layers` have experts. ZeRO-2/3 run their collectives layer by layer, as the step program
 * issues them (program.c param_gather, slot_layer_backward): the shared parameters over DP×CP,
 * each expert layer's over the experts' group; a collective pays its latency once per layer. */
static void dp_times(const ts_problem *pb, const ts_shard *sh, int pp, double ne, double ex, int layers,
                     int moe_layers, ts_dp_times *out) {
    const ts_system *s = &pb->sys;
    int dpc = pb->gpus / (sh->tp * sh->cp * pp) * sh->cp, edp = dpc * sh->tp / (ts_shard_etp(sh) * sh->ep);
    ts_link link = ts_group_link(s, sh->tp, dpc), elink = ts_group_link(s, ts_shard_etp(sh) * sh->ep, edp);
    /* on the wire in the stack's gradient-reduction dtype */
    double gb = ts_grad_reduce_bytes(&pb->train) * ne, egb = ts_grad_reduce_bytes(&pb->train) * ex;
    double wb = ts_weight_elem_bytes(pb) * ne, ewb = ts_weight_elem_bytes(pb) * ex;
    out->allreduce_s = ts_coll_s(s, TS_COLL_ALLREDUCE, dpc, gb, link) + ts_coll_s(s, TS_COLL_ALLREDUCE, edp, egb, elink);
    out->reduce_scatter_s = ts_coll_s(s, TS_COLL_REDUCE_SCATTER, dpc, gb, link) +
                            ts_coll_s(s, TS_COLL_REDUCE_SCATTER, edp, egb, elink);
    out->allgather_s = ts_coll_s(s, TS_COLL_ALLGATHER, dpc, wb, link) + ts_coll_s(s, TS_COLL_ALLGATHER, edp, ewb, elink);
    out->layer_gather_s = ts_coll_s(s, TS_COLL_ALLGATHER, dpc, wb, link) + more_rings_s(s, layers - 1, dpc, link) +
                          ts_coll_s(s, TS_COLL_ALLGATHER, edp, ewb, elink) +
                          (ex > 0 ? more_rings_s(s, moe_layers - 1, edp, elink) : 0);
    out->layer_reduce_s = out->reduce_scatter_s + more_rings_s(s, layers - 1, dpc, link) +
                          more_rings_s(s, moe_layers - 1, edp, elink);
    /* Buckets: layers of ~ne/layers parameters each until train.bucket_bytes (a partial one
     * closes the chunk); the experts' gradients one reduction per MoE layer (program.c). */
    double bucket_bytes = pb->train.bucket_bytes;
    out->layers = layers, out->moe_layers = moe_layers;
    out->grad_bucket_layers = bucket_layers(bucket_bytes, layers > 0 ? gb / layers : 0, layers);
    out->weight_bucket_layers = bucket_layers(bucket_bytes, layers > 0 ? wb / layers : 0, layers);
    out->more_ring_s = more_rings_s(s, 1, dpc, link);
    out->more_expert_ring_s = ex > 0 ? more_rings_s(s, 1, edp, elink) : 0;
    /* an all-reduce's latency, ring's or tree's (cost.c), as of a collective of one byte */
    out->more_allreduce_s = ts_coll_s(s, TS_COLL_ALLREDUCE, dpc, 1.0, link);
    double per_param = 24.0 + pb->train.grad_bytes + ts_weight_elem_bytes(pb);
    out->optimizer_s[0] = ts_optimizer_s(s, per_param * (ne + ex)) * pb->compute_scale;
    out->optimizer_s[1] = ts_optimizer_s(s, per_param * (ne / dpc + ex / edp)) * pb->compute_scale;
}

/* What depends on tp, cp, ep and pp only: each stage's layers by kind (build_work reads them),
 * its parameters and their states under every ZeRO stage, the biggest stage's data-parallel traffic and the optimizer step. */
static void build_weights(ts_stages *st, const ts_problem *pb, const ts_shard *sh, int pp, const ts_stage_split *split) {
    const ts_model *m = &pb->model;
    const ts_param_count *pc = &pb->params;
    double t = sh->tp;
    double expert_all = m->moe.experts > 0 ? m->moe.experts * pc->expert : 0;
    double moe_dense_part = pc->per_layer_moe - expert_all; /* attention, router, shared experts */
    double et = ts_shard_etp(sh); /* the experts are split over etp·ep */
    int n_moe_all = moe_below(m, m->layers);
    st->max_dense_params = n_moe_all < m->layers ? pc->per_layer_dense / t : 0;
    st->max_moe_shared_params = n_moe_all > 0 ? moe_dense_part / t : 0;
    st->max_expert_params = n_moe_all > 0 ? expert_all / (et * sh->ep) : 0;

    double outside = pc->total - pc->embedding - pc->lm_head -
                     (m->layers - n_moe_all) * pc->per_layer_dense - n_moe_all * pc->per_layer_moe;
    for (int i = 0; i < pp; i++) {
        stage_layers(m, pp, split, i, &st->n_dense[i], &st->n_moe[i]);
        double ne = st->n_dense[i] * pc->per_layer_dense + st->n_moe[i] * moe_dense_part;
        double ex = st->n_moe[i] * expert_all;
        if (i == 0) ne += pc->embedding;
        if (i == pp - 1) {
            /* A tied LM head keeps its own copy of the embedding on the last stage (pp > 1); the
             * final norm (and any other parameter outside the layers) sits there too. */
            ne += pc->lm_head > 0 ? pc->lm_head : (pp > 1 ? (double)m->vocab * m->hidden : 0);
            ne += outside;
        }
        st->params[i] = ne / t;
        st->expert_params[i] = ex / (et * sh->ep);
    }
    stage_kinds(st, pp, split != NULL);

    /* The biggest stage's data-parallel traffic and optimizer step, computed once for all ZeRO
     * stages and schedules; under DualPipe the biggest pair of mirrored stages', whose chunks
     * both are reduced and updated on each of the two (program.c grad_reductions after
     * mirror_grads). */
    st->biggest = 0;
    int pair = 0;
    for (int i = 1; i < pp; i++) {
        if (st->params[i] + st->expert_params[i] > st->params[st->biggest] + st->expert_params[st->biggest])
            st->biggest = i;
        if (st->params[i] + st->expert_params[i] + st->params[pp - 1 - i] + st->expert_params[pp - 1 - i] >
            st->params[pair] + st->expert_params[pair] + st->params[pp - 1 - pair] + st->expert_params[pp - 1 - pair])
            pair = i;
    }
    int b = st->biggest, q = pp - 1 - pair;
    dp_times(pb, sh, pp, st->params[b], st->expert_params[b], st->n_dense[b] + st->n_moe[b], st->n_moe[b], &st->dp);
    dp_times(pb, sh, pp, st->params[pair] + st->params[q], st->expert_params[pair] + st->expert_params[q],
             st->n_dense[pair] + st->n_moe[pair] + (q != pair ? st->n_dense[q] + st->n_moe[q] : 0),
             st->n_moe[pair] + (q != pair ? st->n_moe[q] : 0), &st->dual_dp);

    /* DualPipe's stages i and p-1-i hold copies of each other's chunk and swap their gradients
     * after the last weight gradients, before the DP reduction (program.c mirror_grads, as
     * DeepSeek's examples/example_dualpipe.py sums the copies): both chunks' gradients each way,
     * over the pipeline's link. */
    const ts_system *s = &pb->sys;
    double mirror_bytes = pb->train.grad_bytes * (st->params[pair] + st->expert_params[pair] + st->params[pp - 1 - pair] +
                                                  st->expert_params[pp - 1 - pair]);
    st->mirror_s = pp > 1 ? ts_coll_s(s, TS_COLL_SENDRECV, 2, mirror_bytes, ts_group_link(s, pb->gpus / pp, 2)) : 0;

    /* States per ZeRO stage and stage; a stage equal to the previous one copies it. */
    for (int z = 0; z < 4; z++)
        for (int i = 0; i < pp; i++) {
            double *out = &st->states_bytes[z * st->cap + i];
            if (i > 0 && st->params[i] == st->params[i - 1] && st->expert_params[i] == st->expert_params[i - 1]) {
                *out = out[-1];
            } else {
                ts_memory mem;
                stage_states(st, pb, z, i, &mem);
                *out = mem.total;
            }
        }
}

/* What depends on the whole shard: activations, the slowest stage's times, the micro-batch's
 * buffers and pipeline transfer, the runs of identical stages. */
/* sum += n × c, over the times and FLOPs a stage adds up. */
static void add_scaled(ts_layer_cost *sum, double n, const ts_layer_cost *c) {
    sum->fwd_s += n * c->fwd_s;
    sum->bwd_s += n * c->bwd_s;
    sum->wgrad_s += n * c->wgrad_s;
    sum->recompute_s += n * c->recompute_s;
    sum->tp_s += n * c->tp_s;
    sum->tp_split_w_s += n * c->tp_split_w_s;
    sum->cp_s += n * c->cp_s;
    sum->ep_s += n * c->ep_s;
    sum->ep_paired_s += n * c->ep_paired_s;
    sum->model_flops += n * c->model_flops;
    sum->hw_flops += n * c->hw_flops;
    sum->amax_gemms += n * c->amax_gemms;
    sum->amax_tp_s += n * c->amax_tp_s;
    sum->amax_dp_s += n * c->amax_dp_s;
}

static double busy_of(const ts_layer_cost *c) {
    return c->fwd_s + c->bwd_s + c->recompute_s + c->tp_s + c->cp_s + c->ep_s;
}

/* DualPipe's stages by their mirrored pairs: stage i and p-1-i each run m/2 micro-batches
 * through either chunk, so both do the mean of the two stages' work per micro-batch. */
static void dual_slowest(ts_stages *st, int pp) {
    double slowest_s = -1;
    for (int i = 0; i < (pp + 1) / 2; i++) {
        double busy = st->kind_busy[st->kind_of[i]] + st->kind_busy[st->kind_of[pp - 1 - i]];
        if (busy > slowest_s) slowest_s = busy, st->dual_slowest = i;
    }
}

void ts_stages_dual_times(const ts_stages *st, ts_layer_cost *out) {
    int i = st->dual_slowest;
    *out = (ts_layer_cost){0};
    add_scaled(out, 0.5, &st->kind_sum[st->kind_of[i]]);
    add_scaled(out, 0.5, &st->kind_sum[st->kind_of[st->pp - 1 - i]]);
}

/* FP8 delayed scaling's amax reductions of a stage holding `gemms` GEMMs (program.c
 * amax_reduce): at the end of each chunk's forward and of its backward, every amax of the rank
 * all-reduced over TP, then over DP×CP, on the compute stream, the latter waiting for the
 * replicas' last rank (cost.h ts_sync_wait_s); one chunk's pair of each. */
static void amax_times(const ts_problem *pb, const ts_shard *sh, int pp, ts_layer_cost *sum) {
    const ts_system *s = &pb->sys;
    int dpc = pb->gpus / (sh->tp * sh->cp * pp) * sh->cp;
    ts_link tp_link = ts_group_link(s, 1, sh->tp), dp_link = ts_group_link(s, sh->tp, dpc);
    double wait_s = ts_sync_wait_s(s, sh->tp * dpc, sh->tp * sh->cp);
    sum->amax_tp_s = sum->amax_dp_s = 0;
    for (int fwd = 0; fwd < 2; fwd++) {
        double bytes = ts_amax_reduce_bytes(sum->amax_gemms, fwd);
        sum->amax_tp_s += ts_coll_s(s, TS_COLL_ALLREDUCE, sh->tp, bytes, tp_link);
        sum->amax_dp_s += ts_coll_s(s, TS_COLL_ALLREDUCE, dpc, bytes, dp_link) + wait_s;
    }
}

/* Per micro-batch: `n` layers of `c` as a slot of the timeline sees them, forward and backward,
 * each with its share of the exposed communication (ts_stages_step's tf and tb). */
static void add_slot_times(const ts_layer_cost *c, double n, double *f, double *b) {
    double comm = c->tp_s + c->cp_s + c->ep_s;
    *f += n * (c->fwd_s + comm / 3.0);
    *b += n * (c->bwd_s + c->recompute_s + comm * 2.0 / 3.0);
}

/* Each global chunk's forward and backward times under an uneven interleaved split, its stage's
 * recompute policy, the embedding with the first chunk and the head (and MTP) with the last.
 * Leaves n_chunks 0 when the split is not interleaved, its chunks hold equal layers, or memory
 * runs out (the even formula then). */
static void chunk_times(ts_stages *st, const ts_problem *pb, int pp, const ts_stage_split *sp) {
    const ts_model *m = &pb->model;
    st->n_chunks = 0;
    int n_g = pp * sp->vpp;
    if (sp->vpp <= 1 || ts_schedules[sp->schedule].fixed_vpp || ts_schedules[sp->schedule].splits_w) return;
    int uneven = 0; /* chunks of equal layers keep the even formula, as the search prices them */
    for (int g = 1; g < n_g && !uneven; g++) uneven = sp->layers[g] != sp->layers[0];
    if (!uneven) return;
    if (n_g > st->chunk_cap) {
        double *grown = realloc(st->chunk_f, 2 * (size_t)n_g * sizeof *grown);
        if (grown == NULL) return;
        st->chunk_f = grown;
        st->chunk_cap = n_g;
    }
    for (int g = 0, first = 0; g < n_g; first += sp->layers[g], g++) {
        const ts_shard_costs *c = &sp->costs[sp->recompute[ts_sched_stage(sp->schedule, pp, sp->vpp, g)]];
        int n_moe = moe_below(m, first + sp->layers[g]) - moe_below(m, first), n_dense = sp->layers[g] - n_moe;
        double f = 0, b = 0;
        add_slot_times(&c->dense, n_dense, &f, &b);
        add_slot_times(&c->moe, n_moe + (g == n_g - 1 ? m->mtp_layers : 0), &f, &b);
        if (g == 0) add_slot_times(&c->embed, 1, &f, &b);
        if (g == n_g - 1) add_slot_times(&c->head, 1, &f, &b);
        st->chunk_f[g] = f;
        st->chunk_f[st->chunk_cap + g] = b;
    }
    st->n_chunks = n_g;
}

static void build_work(ts_stages *st, const ts_problem *pb, const ts_shard_costs *costs, int pp,
                       const ts_stage_split *split) {
    const ts_model *m = &pb->model;
    const ts_shard *sh = &costs->shard;
    double slowest_s = -1, hw = 0, model = 0;
    /* One stage of each kind stands for all (kinds are in order of first appearance, so the
     * slowest is the earliest stage of the slowest kind). */
    for (int k = 0; k < st->n_kinds; k++) {
        int i = st->kind_first[k], n_dense = st->n_dense[i], n_moe = st->n_moe[i];
        const ts_shard_costs *c = split ? &split->costs[split->recompute[i]] : costs;
        ts_layer_cost sum = {0};
        if (n_dense) add_scaled(&sum, n_dense, &c->dense);
        if (n_moe) add_scaled(&sum, n_moe, &c->moe);
        if (i == 0) add_scaled(&sum, 1, &c->embed);
        if (i == pp - 1) add_scaled(&sum, 1, &c->head);
        /* the stack's gradient accumulation pass after each micro-batch's backward (program.c
         * grad_accum), one kernel a chunk there, one here */
        double accum = pb->train.stack.grad_accum_bytes * (st->params[i] + st->expert_params[i]);
        sum.bwd_s += ts_memory_s(&pb->sys, accum, 1) * pb->compute_scale;
        if (sum.amax_gemms > 0) amax_times(pb, sh, pp, &sum);
        double act = n_dense * c->dense.act_bytes + n_moe * c->moe.act_bytes;
        double extra = max_d(n_dense ? c->dense.peak_bytes : 0, n_moe ? c->moe.peak_bytes : 0);
        if (i == 0) act += c->embed.act_bytes;
        if (i == pp - 1) extra = max_d(extra, c->head.act_bytes);
        st->act_bytes[i] = act;
        st->extra_bytes[i] = extra;
        hw += st->kind_count[k] * sum.hw_flops;
        model += st->kind_count[k] * sum.model_flops;

        double busy = busy_of(&sum);
        st->kind_sum[k] = sum;
        st->kind_busy[k] = busy;
        if (busy > slowest_s) {
            slowest_s = busy;
            st->slowest = i;
            st->slow = sum;
        }
    }
    st->hw_over_model = model > 0 ? hw / model : 1.0;
    if (split) chunk_times(st, pb, pp, split);
    else st->n_chunks = 0;
    dual_slowest(st, pp);
    /* Memory reads the first stage of each run: its kind's figures. */
    for (int r = 0; r < st->n_runs; r++) {
        int i = st->first_of_run[r], f = st->kind_first[st->kind_of[i]];
        st->act_bytes[i] = st->act_bytes[f];
        st->extra_bytes[i] = st->extra_bytes[f];
    }

    /* TP/SP collective buffers and pipeline send/recv buffers of one micro-batch, and one
     * pipeline transfer of its activations (b·s·h/t with the scatter/gather optimisation,
     * Narayanan et al. SC'21 §4.1). */
    const ts_system *s = &pb->sys;
    double T = (double)sh->mbs * pb->train.seq / sh->cp, h = (double)m->hidden;
    st->mb_buffer_bytes = (sh->tp > 1 ? 2.0 * 2.0 * T * h : 0) + (pp > 1 ? 2.0 * 2.0 * T * h / sh->tp : 0);
    ts_edge_recipe edge;
    ts_edge_recipe_of(pb, sh, &edge);
    st->p2p_s = pp > 1 ? ts_coll_s(s, TS_COLL_SENDRECV, 2, edge.p2p_bytes, ts_group_link(s, pb->gpus / pp, 2)) : 0;
}

/* Exposed DP time: traffic beyond what its overlap window can hide, plus the slowdown that the
 * hidden part inflicts on compute. */
static double exposed(const ts_system *s, double traffic_s, double window_s) {
    if (s->serial_ops) return traffic_s;
    double hide = s->dp_comm_overlap * window_s;
    double hidden = traffic_s < hide ? traffic_s : hide;
    return traffic_s - hidden + s->overlap_slowdown * hidden;
}

/* ZeRO-3 on a stage of `ne` non-expert and `ex` expert parameters a rank, whose shared ones are
 * sharded over `dpc` ranks and experts over `edp` (program.c param_gather): the parameters it
 * leaves whole (those of a one-rank group) and those of the largest layer's gathered copy. */
static void zero3_params(const ts_stages *st, double ne, double ex, double dpc, double edp, double *held_whole,
                         double *gathered) {
    int sh = dpc > 1, exs = edp > 1;
    *held_whole = (sh ? 0 : ne) + (exs ? 0 : ex);
    *gathered = max_d(sh ? st->max_dense_params : 0, (sh ? st->max_moe_shared_params : 0) +
                                                         (exs ? st->max_expert_params : 0));
}

/* Weights, gradients, optimizer states and the micro-batch-independent buffers of stage i under
 * ZeRO stage z (activations and st->mb_buffer_bytes excluded), for the data-parallel degree the
 * stages were built for. */
static void stage_states(const ts_stages *st, const ts_problem *pb, int z, int i, ts_memory *out) {
    const ts_train *tr = &pb->train;
    const ts_shard *sh = &st->shard;
    double dpc = (double)pb->gpus / (sh->tp * sh->cp * st->pp) * sh->cp, edp = dpc * sh->tp / (ts_shard_etp(sh) * sh->ep);
    double ne = st->params[i], ex = st->expert_params[i];
    double sharded = ne / dpc + ex / edp, whole = ne + ex, held_whole, gathered;
    zero3_params(st, ne, ex, dpc, edp, &held_whole, &gathered);
    out->weights = ts_weight_elem_bytes(pb) * (z >= 3 ? sharded : whole);
    /* FP8 copies of the weights (program/recipe.h): of every layer held, or under ZeRO-3 of the
     * gathered layers and the parameters it leaves whole (embedding and head counted too: an
     * upper bound). */
    out->weights += ts_fp8_weight_copy_bytes(pb) * (z >= 3 ? 2.0 * gathered + held_whole : whole);
    out->grads = tr->grad_bytes * (z >= 2 ? sharded : whole);
    out->optimizer = tr->optimizer_bytes * (z >= 1 ? sharded : whole);
    /* Two DP buckets, and under ZeRO-3 the gathered parameters of the layer running and the one
     * prefetched. */
    double grad_all = tr->grad_bytes * whole;
    out->buffers = 2.0 * (grad_all < tr->bucket_bytes ? grad_all : tr->bucket_bytes) +
                   (z >= 3 ? 2.0 * ts_weight_elem_bytes(pb) * gathered : 0);
    out->activations = 0;
    out->total = out->weights + out->grads + out->optimizer + out->buffers;
}

void ts_stages_states(const ts_stages *st, const ts_problem *pb, int z, int i, ts_memory *out) {
    stage_states(st, pb, z, i, out);
}

/* DualPipe's stage i also holds a copy of stage p-1-i's chunk (DeepSeek-V3 Table 2: "Parameter
 * 2×"), with its gradients, optimizer states and the buffers stage_states counts with them (the
 * executor keeps them all, exec/param_store.h): the stage whose states join stage i's, or -1. */
static int mirror_of(const ts_layout *l, int i) {
    return ts_schedules[l->schedule].dual ? l->pp - 1 - i : -1;
}

static double states_of(const double *states, const ts_layout *l, int i) {
    int j = mirror_of(l, i);
    return states[i] + (j >= 0 ? states[j] : 0);
}

static void add_states(ts_memory *m, const ts_memory *x) {
    m->weights += x->weights;
    m->grads += x->grads;
    m->optimizer += x->optimizer;
    m->buffers += x->buffers;
    m->total += x->total;
}

/* One micro-batch's activations on stage i: its layers', or under DualPipe the mean of its two
 * chunks' (the p + 1 in flight are of both; DeepSeek-V3 Table 2 counts them alike). */
static double act_unit(const ts_stages *st, const ts_layout *l, int i) {
    int j = mirror_of(l, i);
    return j < 0 ? st->act_bytes[i] : 0.5 * (st->act_bytes[i] + st->act_bytes[st->kind_first[st->kind_of[j]]]);
}

/* Stage i's activations and micro-batch buffers under the layout's schedule: what memory adds to
 * the states, summed alike everywhere so every caller's total agrees to the bit. */
static double acts_sum(const ts_stages *st, double unit, double in_flight, int i) {
    return st->mb_buffer_bytes + unit * in_flight + st->extra_bytes[i];
}

static double stage_act_bytes(const ts_stages *st, const ts_layout *l, int i) {
    return acts_sum(st, act_unit(st, l, i), ts_schedules[l->schedule].in_flight(l->pp, i, l->microbatches, l->vpp), i);
}

void ts_stages_run_acts(const ts_stages *st, const ts_layout *l, double *acts) {
    const ts_schedule_info *si = &ts_schedules[l->schedule];
    if (si->dual) {
        for (int r = 0; r < st->n_runs; r++) acts[r] = stage_act_bytes(st, l, st->first_of_run[r]);
        return;
    }
    /* Without mirrored chunks a stage's unit is its own activations (act_unit), the search's
     * common case looked up once per schedule rather than per stage. */
    for (int r = 0; r < st->n_runs; r++) {
        int i = st->first_of_run[r];
        acts[r] = acts_sum(st, st->act_bytes[i], si->in_flight(l->pp, i, l->microbatches, l->vpp), i);
    }
}

double ts_stages_memory_acts(const ts_stages *st, const ts_layout *l, const double *acts, int *worst_stage) {
    const double *states = st->states_bytes + l->zero * st->cap;
    int dual = ts_schedules[l->schedule].dual;
    double worst = -1;
    for (int r = 0; r < st->n_runs; r++) {
        int i = st->first_of_run[r];
        double total = (dual ? states_of(states, l, i) : states[i]) + acts[r];
        if (total > worst) {
            worst = total;
            if (worst_stage) *worst_stage = i;
        }
    }
    return worst;
}

double ts_stages_memory(const ts_stages *st, const ts_layout *l, int *worst_stage) {
    const double *states = st->states_bytes + l->zero * st->cap;
    double worst = -1;
    for (int r = 0; r < st->n_runs; r++) {
        int i = st->first_of_run[r];
        double total = states_of(states, l, i) + stage_act_bytes(st, l, i);
        if (total > worst) {
            worst = total;
            if (worst_stage) *worst_stage = i;
        }
    }
    return worst;
}

/* DualPipe's F&B pairs run one micro-batch's forward beside another's backward, each one's
 * communication beside the other's computation (DeepSeek-V3 §3.2.1, Fig. 4; program.c
 * interleave_pair, which switches sides at every collective): of a paired micro-batch's exposed
 * TP and CP traffic `comm_s` (a third in its forward, two thirds in its backward, as the
 * bubble's split), what the partner's computation covers is hidden, at the system's
 * overlap_slowdown on that computation; the micro-batches the order runs unpaired (warm-up and
 * cool-down; the fewest pairs, on stages 0 and p-1) expose theirs. Returns the fraction of
 * m·comm_s left on the critical path.
 * The EP all-to-all is not credited: each side's dispatch follows its router (microseconds of
 * computation) and both queue on the one collective stream, so the pairing leaves an exposed
 * all-to-all exposed (tests/test_dualpipe_closed_form.c: Mixtral 8x7B, TP2 EP8, Megatron-Core's
 * exposed EP); a stack that hides it states so (moe_a2a_overlap, its SM share charged apart). */
/* Of a micro-batch's exposed TP and EP traffic (`tp_s`, c->ep_s), the seconds on the scale-out
 * fabric: the groups that leave the scale-up domain (ranks.h places TP innermost, experts by etp
 * and ep). Exposed, that traffic holds the NIC for as long as it is exposed; DP traffic crossing
 * the NIC too shares its bandwidth, so it hides under the windows' computation, not under those
 * transfers (the simulator's links, sim/network.h, share a NIC among the transfers in flight the
 * same way). CP's ring is left out: its exposed part is what outlasts the attention beside it,
 * not the time its transfers hold the NIC. */
static double nic_comm_s(const ts_problem *pb, const ts_layout *l, const ts_layer_cost *c, double tp_s) {
    const ts_system *s = &pb->sys;
    double nic = 0;
    /* TP leaves the domain only where asked (the search keeps it inside otherwise) */
    if (pb->train.tp_across_nodes && tp_s > 0 && ts_group_link(s, 1, l->tp) != TS_LINK_NVLINK) nic += tp_s;
    if (c->ep_s > 0 && ts_group_link(s, ts_layout_etp(l), l->ep) != TS_LINK_NVLINK) nic += c->ep_s;
    return nic;
}

static double pair_exposed(const ts_problem *pb, const ts_layout *l, const ts_layer_cost *c, double comm_s) {
    const ts_system *s = &pb->sys;
    if (comm_s <= 0 || s->serial_ops) return 1;
    double fwd = c->fwd_s, bwd = c->bwd_s + c->recompute_s;
    double hidden = fmin(comm_s / 3.0, bwd) + fmin(comm_s * 2.0 / 3.0, fwd);
    double paired = (double)ts_dualpipe_pairs(l->pp, l->microbatches, 0) / l->microbatches;
    return 1.0 - paired * hidden / comm_s * (1.0 - s->overlap_slowdown);
}

/* The bubble of an uneven interleaved split: its schedule's timeline with each chunk's own times
 * (schedule.h ts_sched_timeline_chunks_s: the order's dependencies, communication free) less the
 * busiest stage's work. The even formula assumes chunks of equal time; a split's differ by a layer,
 * and the pipeline's fill and drain wait on the larger ones. `formula_s` when the timeline fails. */
static double chunked_bubble_s(const ts_stages *st, const ts_layout *l, double formula_s) {
    const double *chunk_b = st->chunk_f + st->chunk_cap;
    double span = ts_sched_timeline_chunks_s(l, l->microbatches, st->chunk_f, chunk_b), busiest = 0;
    if (span < 0) return formula_s;
    for (int s = 0; s < l->pp; s++) {
        double work = 0;
        for (int j = 0; j < l->vpp; j++) {
            int g = ts_chunk_global(l, s, j);
            work += st->chunk_f[g] + chunk_b[g];
        }
        if (work > busiest) busiest = work;
    }
    double bubble = span - l->microbatches * busiest;
    return bubble > 0 ? bubble : 0;
}

double ts_stages_step(const ts_stages *st, const ts_problem *pb, const ts_layout *l, ts_time_split *split) {
    const ts_system *s = &pb->sys;
    /* DualPipe's two chunks per stage are two copies of one, a micro-batch visiting one of them:
     * transfers and DP windows are 1F1B's. */
    int dual = ts_schedules[l->schedule].dual;
    int p = l->pp, v = dual ? 1 : l->vpp, m = l->microbatches, dpc = l->dp * l->cp;
    ts_time_split t = {0};
    /* the slowest stage's per micro-batch, or DualPipe's slowest pair of mirrored stages' */
    ts_layer_cost pair;
    if (dual) ts_stages_dual_times(st, &pair);
    const ts_layer_cost *c = dual ? &pair : &st->slow;
    double tp = ts_schedules[l->schedule].splits_w ? c->tp_split_w_s : c->tp_s;
    double comm_mb = tp + c->cp_s + c->ep_s;
    double tf = c->fwd_s + comm_mb / 3.0, tb = c->bwd_s + c->recompute_s + comm_mb * 2.0 / 3.0;
    double left = dual ? pair_exposed(pb, l, c, tp + c->cp_s) : 1;
    /* FP8 delayed scaling's amax reductions block the compute stream at each chunk's forward and
     * backward end (program.c amax_reduce): exposed, in TP's and DP's shares, in the bubble's
     * stage times half each way (the two are latency alike), no window for DP traffic;
     * DualPipe's pairing hides none of them. */
    double amax_mb = v * (c->amax_tp_s + c->amax_dp_s);
    t.compute = m * (c->fwd_s + c->bwd_s + c->recompute_s);
    t.tp_comm = m * (tp * left + v * c->amax_tp_s);
    t.cp_comm = m * c->cp_s * left;
    /* Megatron-Core's combined 1F1B: the slowest stage's paired forwards and backwards expose the
     * pair's share (planner/layer.h ep_paired_s), the rest all of it */
    double paired = pb->train.moe_combined_1f1b ? ts_combined_1f1b_paired(l, st->slowest) : 0;
    t.ep_comm = m * (c->ep_s - paired * (c->ep_s - c->ep_paired_s));
    t.pp_bubble = p > 1 ? ts_schedules[l->schedule].bubble_s(p, v, tf + amax_mb / 2.0, tb + amax_mb / 2.0, c->wgrad_s) : 0;
    if (st->n_chunks == p * l->vpp && st->n_chunks > 0) t.pp_bubble = chunked_bubble_s(st, l, t.pp_bubble);
    /* Each micro-batch's forward and backward transfers sit on the critical path once per stage
     * boundary it waits at; interleaving adds 2·m·(v-1) transfers, hidden behind the other
     * chunks' compute at the system's pp_comm_overlap (the simulator, which overlaps them,
     * agrees within a percent). */
    t.pp_comm = (2.0 * ((double)m + p - 1) + (1.0 - s->pp_comm_overlap) * 2.0 * m * (v - 1)) * st->p2p_s +
                (dual ? st->mirror_s : 0);
    const ts_dp_times *dpt = dual ? &st->dual_dp : &st->dp;
    /* DP×CP, or the experts' own group alone (experts apart from TP span the TP ranks) */
    if (dpc > 1 || ts_group_size(l, TS_GROUP_EDP) > 1) {
        /* The windows are one model chunk's work: with interleaving the last backward (and the
         * next step's first forward) on a stage covers 1/v of its layers. */
        double nic = nic_comm_s(pb, l, c, tp);
        if (nic > 0 && ts_group_link(s, l->tp, dpc) != TS_LINK_NVLINK) {
            tf -= nic / 3.0;
            tb -= nic * 2.0 / 3.0;
        }
        tf /= v;
        tb /= v;
        /* DualPipe reduces the gradients once the mirror stage's copies came back, after the
         * last backward (program.c mirror_grads): nothing left to hide them under. */
        double tb_last = dual ? 0 : tb;
        double gather_s = dpt->allgather_s + bucket_latency_s(dpt, l->vpp, l->zero, 1);
        if (l->zero == 0) {
            t.dp_comm = exposed(s, dpt->allreduce_s + bucket_latency_s(dpt, l->vpp, 0, 0), tb_last);
        } else if (l->zero == 1) {
            t.dp_comm = exposed(s, dpt->reduce_scatter_s + bucket_latency_s(dpt, l->vpp, 1, 0), tb_last) +
                        exposed(s, gather_s, tf);
        } else if (l->zero == 2) {
            /* Sharded gradients cannot accumulate locally: every micro-batch's gradients are
             * reduce-scattered as its backward runs (DeepSpeed ZeRO-2). */
            t.dp_comm = m * exposed(s, dpt->layer_reduce_s, tb) + exposed(s, gather_s, tf);
        } else {
            /* ZeRO-3: per micro-batch, gather for forward, gather + reduce-scatter in backward. */
            t.dp_comm = m * (exposed(s, dpt->layer_gather_s, tf) + exposed(s, dpt->layer_gather_s + dpt->layer_reduce_s, tb));
        }
    }
    t.dp_comm += m * v * c->amax_dp_s;
    t.optimizer = dpt->optimizer_s[l->zero >= 1];
    if (split) *split = t;
    return t.compute + t.tp_comm + t.cp_comm + t.ep_comm + t.pp_comm + t.pp_bubble + t.dp_comm +
           t.optimizer;
}

void ts_stages_finish(const ts_stages *st, const ts_problem *pb, const ts_layout *l, ts_eval *out) {
    const ts_train *tr = &pb->train;
    ts_stages_memory(st, l, &out->worst_stage);
    int i = out->worst_stage;
    stage_states(st, pb, l->zero, i, &out->mem);
    if (mirror_of(l, i) >= 0) {
        ts_memory copy;
        stage_states(st, pb, l->zero, mirror_of(l, i), &copy);
        add_states(&out->mem, &copy);
    }
    out->mem.buffers += st->mb_buffer_bytes;
    out->mem.activations =
        act_unit(st, l, i) * ts_schedules[l->schedule].in_flight(l->pp, i, l->microbatches, l->vpp) + st->extra_bytes[i];
    out->mem.total += stage_act_bytes(st, l, i); /* as ts_stages_memory sums it */
    out->fits = out->mem.total <= pb->usable_bytes;

    out->step_s = ts_stages_step(st, pb, l, &out->time);
    double tokens = (double)tr->global_batch * tr->seq;
    out->tokens_per_s = tokens / out->step_s;
    out->tflops_per_gpu = pb->model_flops_per_step / out->step_s / pb->gpus / 1e12;
    out->hw_tflops_per_gpu = out->tflops_per_gpu * st->hw_over_model;
    out->mfu = pb->model_flops_per_step / (out->step_s * pb->gpus * pb->sys.peak_flops[tr->dtype]);
    out->layout = *l;
}
