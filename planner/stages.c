/* Stage aggregation and the step's closed form (see stages.h).
 *
 * Step time (Narayanan et al. SC'21 eq. 1, extended):
 *   step = m·(t_f + t_b + t_rc + exposed TP/CP/EP per micro-batch)       slowest stage
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
 * gradient and writes the 16-bit weight, for the parameters this rank updates (memory bound). */
#include "planner/stages.h"

#include <stdlib.h>

#include "planner/cost.h"
#include "planner/schedule.h"

ts_status ts_stages_init(ts_stages *st, int cap) {
    *st = (ts_stages){0};
    ts_status res = TS_OK;
    st->cap = cap;
    st->params = calloc((size_t)cap * 8, sizeof(double));
    TS_ALLOC_GOTO(st->params, res, fail);
    st->first_of_run = calloc((size_t)cap, sizeof(int));
    TS_ALLOC_GOTO(st->first_of_run, res, fail);
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
    free(st->params);
    free(st->first_of_run);
    *st = (ts_stages){0};
}

/* MoE layers among [0, x): layers first_dense, first_dense+every, ... */
static int moe_below(const ts_model *m, int x) {
    if (m->moe.experts == 0 || x <= m->moe.first_dense) return 0;
    int every = m->moe.every > 0 ? m->moe.every : 1;
    return (x - m->moe.first_dense + every - 1) / every;
}

static double max_d(double a, double b) { return a > b ? a : b; }

static void prepare(ts_stages *st, const ts_problem *pb);

void ts_shard_costs_of(const ts_problem *pb, const ts_shard *sh, ts_shard_costs *out) {
    out->shard = *sh;
    ts_layer_cost_of(pb, sh, 0, &out->dense);
    if (pb->model.moe.experts > 0) ts_layer_cost_of(pb, sh, 1, &out->moe);
    else out->moe = out->dense;
    ts_head_cost_of(pb, sh, &out->head);
    ts_embed_cost_of(pb, sh, &out->embed);
}

void ts_shard_costs_all(const ts_problem *pb, const ts_shard *sh, ts_shard_costs out[TS_RECOMPUTE_COUNT]) {
    ts_layer_cost dense[TS_RECOMPUTE_COUNT], moe[TS_RECOMPUTE_COUNT], head, embed;
    ts_layer_costs_of(pb, sh, 0, dense);
    if (pb->model.moe.experts > 0) ts_layer_costs_of(pb, sh, 1, moe);
    ts_head_cost_of(pb, sh, &head);
    ts_embed_cost_of(pb, sh, &embed);
    for (int rc = 0; rc < TS_RECOMPUTE_COUNT; rc++) {
        out[rc].shard = *sh;
        out[rc].shard.recompute = (ts_recompute)rc;
        out[rc].dense = dense[rc];
        out[rc].moe = pb->model.moe.experts > 0 ? moe[rc] : dense[rc];
        out[rc].head = head;
        out[rc].embed = embed;
    }
}

void ts_stages_build(ts_stages *st, const ts_problem *pb, const ts_shard_costs *costs, int pp) {
    ts_stages_build_split(st, pb, costs, pp, NULL);
}

/* Layers of stage i under a split: its chunks' ranges, counted by kind. */
static void split_counts(const ts_model *m, const ts_stage_split *sp, int pp, int i, int *n_dense, int *n_moe) {
    int first = 0, n = 0, moe = 0;
    for (int g = 0; g < pp * sp->vpp; g++) {
        if (g % pp == i) {
            n += sp->layers[g];
            moe += moe_below(m, first + sp->layers[g]) - moe_below(m, first);
        }
        first += sp->layers[g];
    }
    *n_dense = n - moe;
    *n_moe = moe;
}

void ts_stages_build_split(ts_stages *st, const ts_problem *pb, const ts_shard_costs *costs, int pp,
                           const ts_stage_split *split) {
    const ts_model *m = &pb->model;
    const ts_param_count *pc = &pb->params;
    const ts_shard *sh = &costs->shard;
    ts_layer_cost dense = costs->dense, moe = costs->moe, head = costs->head, embed = costs->embed;

    st->pp = pp;
    st->shard = *sh;
    double t = sh->tp;
    double expert_all = m->moe.experts > 0 ? m->moe.experts * pc->expert : 0;
    double moe_dense_part = pc->per_layer_moe - expert_all; /* attention, router, shared experts */
    st->max_layer_params = max_d(pc->per_layer_dense, moe_dense_part + expert_all / sh->ep) / t;

    int n_moe_all = moe_below(m, m->layers);
    double outside = pc->total - pc->embedding - pc->lm_head -
                     (m->layers - n_moe_all) * pc->per_layer_dense - n_moe_all * pc->per_layer_moe;
    int base = m->layers / pp, rem = m->layers % pp, first = 0;
    double slowest_s = -1, hw = 0, model = 0;
    ts_layer_cost sum = {0};
    int prev_dense = -1, prev_moe = -1; /* a middle stage equal to the previous one is copied */
    for (int i = 0; i < pp; i++) {
        int n = base + (i >= 1 && i <= rem ? 1 : 0);
        int n_moe = moe_below(m, first + n) - moe_below(m, first);
        int n_dense = n - n_moe;
        if (split) {
            split_counts(m, split, pp, i, &n_dense, &n_moe);
            const ts_shard_costs *k = &split->costs[split->recompute[i]];
            dense = k->dense, moe = k->moe, head = k->head, embed = k->embed;
        }
        if (i == pp - 1) n_moe += m->mtp_layers; /* DeepSeek-V3 MTP module sits after the last layer */
        first += n;
        int edge = i == 0 || i == pp - 1 || split != NULL; /* uneven stages are never copied */
        if (!edge && i > 1 && n_dense == prev_dense && n_moe == prev_moe) {
            st->params[i] = st->params[i - 1];
            st->expert_params[i] = st->expert_params[i - 1];
            st->act_bytes[i] = st->act_bytes[i - 1];
            st->extra_bytes[i] = st->extra_bytes[i - 1];
            hw += sum.hw_flops;
            model += sum.model_flops;
            continue;
        }
        prev_dense = edge ? -1 : n_dense;
        prev_moe = edge ? -1 : n_moe;

        double ne = n_dense * pc->per_layer_dense + n_moe * moe_dense_part;
        double ex = n_moe * expert_all;
        double act = n_dense * dense.act_bytes + n_moe * moe.act_bytes;
        double extra = max_d(n_dense ? dense.peak_bytes : 0, n_moe ? moe.peak_bytes : 0);
        sum = (ts_layer_cost){0};
        const ts_layer_cost *parts[4] = {&dense, &moe, &embed, &head};
        double count[4] = {n_dense, n_moe, i == 0, i == pp - 1};
        for (int k = 0; k < 4; k++) {
            sum.fwd_s += count[k] * parts[k]->fwd_s;
            sum.bwd_s += count[k] * parts[k]->bwd_s;
            sum.wgrad_s += count[k] * parts[k]->wgrad_s;
            sum.recompute_s += count[k] * parts[k]->recompute_s;
            sum.tp_s += count[k] * parts[k]->tp_s;
            sum.tp_split_w_s += count[k] * parts[k]->tp_split_w_s;
            sum.cp_s += count[k] * parts[k]->cp_s;
            sum.ep_s += count[k] * parts[k]->ep_s;
            sum.model_flops += count[k] * parts[k]->model_flops;
            sum.hw_flops += count[k] * parts[k]->hw_flops;
        }
        if (i == 0) {
            ne += pc->embedding;
            act += embed.act_bytes;
        }
        if (i == pp - 1) {
            /* A tied LM head keeps its own copy of the embedding on the last stage (pp > 1); the
             * final norm (and any other parameter outside the layers) sits there too. */
            ne += pc->lm_head > 0 ? pc->lm_head : (pp > 1 ? (double)m->vocab * m->hidden : 0);
            ne += outside;
            extra = max_d(extra, head.act_bytes);
        }
        st->params[i] = ne / t;
        st->expert_params[i] = ex / (t * sh->ep);
        st->act_bytes[i] = act;
        st->extra_bytes[i] = extra;
        hw += sum.hw_flops;
        model += sum.model_flops;

        double busy = sum.fwd_s + sum.bwd_s + sum.recompute_s + sum.tp_s + sum.cp_s + sum.ep_s;
        if (busy > slowest_s) {
            slowest_s = busy;
            st->slowest = i;
            st->fwd_s = sum.fwd_s;
            st->bwd_s = sum.bwd_s;
            st->wgrad_s = sum.wgrad_s;
            st->recompute_s = sum.recompute_s;
            st->tp_s = sum.tp_s;
            st->tp_split_w_s = sum.tp_split_w_s;
            st->cp_s = sum.cp_s;
            st->ep_s = sum.ep_s;
        }
    }
    st->hw_over_model = model > 0 ? hw / model : 1.0;
    st->n_runs = 0;
    for (int i = 0; i < pp; i++)
        if (i == 0 || st->params[i] != st->params[i - 1] || st->expert_params[i] != st->expert_params[i - 1] ||
            st->act_bytes[i] != st->act_bytes[i - 1] || st->extra_bytes[i] != st->extra_bytes[i - 1])
            st->first_of_run[st->n_runs++] = i;

    /* Communication that depends only on the shard and pp, computed once for all ZeRO stages
     * and schedules: the biggest stage's gradient reduction and parameter gathering over DP×CP
     * (experts over DP×CP/EP), and one pipeline transfer of a micro-batch's activations
     * (b·s·h/t with the scatter/gather optimisation, Narayanan et al. SC'21 §4.1). */
    const ts_system *s = &pb->sys;
    int dpc = pb->gpus / (sh->tp * sh->cp * pp) * sh->cp, edp = dpc / sh->ep;
    st->biggest = 0;
    for (int i = 1; i < pp; i++)
        if (st->params[i] + st->expert_params[i] > st->params[st->biggest] + st->expert_params[st->biggest])
            st->biggest = i;
    ts_link link = ts_group_link(s, sh->tp, dpc), elink = ts_group_link(s, sh->tp * sh->ep, edp);
    double gb = pb->train.grad_bytes * st->params[st->biggest];
    double egb = pb->train.grad_bytes * st->expert_params[st->biggest];
    double wb = pb->train.weight_bytes * st->params[st->biggest];
    double ewb = pb->train.weight_bytes * st->expert_params[st->biggest];
    st->dp_allreduce_s = ts_coll_s(s, TS_COLL_ALLREDUCE, dpc, gb, link) +
                         ts_coll_s(s, TS_COLL_ALLREDUCE, edp, egb, elink);
    st->dp_reduce_scatter_s = ts_coll_s(s, TS_COLL_REDUCE_SCATTER, dpc, gb, link) +
                              ts_coll_s(s, TS_COLL_REDUCE_SCATTER, edp, egb, elink);
    st->dp_allgather_s = ts_coll_s(s, TS_COLL_ALLGATHER, dpc, wb, link) +
                         ts_coll_s(s, TS_COLL_ALLGATHER, edp, ewb, elink);
    double T = (double)sh->mbs * pb->train.seq / sh->cp;
    st->p2p_s = pp > 1 ? ts_coll_s(s, TS_COLL_SENDRECV, 2, 2.0 * T * m->hidden / sh->tp,
                                   ts_group_link(s, pb->gpus / pp, 2))
                       : 0;
    prepare(st, pb);
}

/* Exposed DP time: traffic beyond what its overlap window can hide, plus the slowdown that the
 * hidden part inflicts on compute. */
static double exposed(const ts_system *s, double traffic_s, double window_s) {
    if (s->serial_ops) return traffic_s;
    double hide = s->dp_comm_overlap * window_s;
    double hidden = traffic_s < hide ? traffic_s : hide;
    return traffic_s - hidden + s->overlap_slowdown * hidden;
}

/* Weights, gradients, optimizer states and buffers of stage i under ZeRO stage z (activations
 * excluded), for the data-parallel degree the stages were built for. */
static void stage_states(const ts_stages *st, const ts_problem *pb, int z, int i, ts_memory *out) {
    const ts_train *tr = &pb->train;
    const ts_shard *sh = &st->shard;
    double dpc = (double)pb->gpus / (sh->tp * sh->cp * st->pp) * sh->cp, edp = dpc / sh->ep;
    double ne = st->params[i], ex = st->expert_params[i];
    double sharded = ne / dpc + ex / edp, whole = ne + ex;
    double T = (double)sh->mbs * tr->seq / sh->cp, h = (double)pb->model.hidden;
    out->weights = tr->weight_bytes * (z >= 3 ? sharded : whole);
    out->grads = tr->grad_bytes * (z >= 2 ? sharded : whole);
    out->optimizer = tr->optimizer_bytes * (z >= 1 ? sharded : whole);
    /* TP/SP collective buffers, pipeline send/recv buffers, two DP buckets, and under ZeRO-3 the
     * gathered parameters of the layer running and the one prefetched. */
    double grad_all = tr->grad_bytes * whole;
    out->buffers = (sh->tp > 1 ? 2.0 * 2.0 * T * h : 0) + (st->pp > 1 ? 2.0 * 2.0 * T * h / sh->tp : 0) +
                   2.0 * (grad_all < tr->bucket_bytes ? grad_all : tr->bucket_bytes) +
                   (z >= 3 ? 2.0 * tr->weight_bytes * st->max_layer_params : 0);
    out->activations = 0;
    out->total = out->weights + out->grads + out->optimizer + out->buffers;
}

/* What every ZeRO stage and schedule under these stages shares: states per run, optimizer time. */
static void prepare(ts_stages *st, const ts_problem *pb) {
    for (int z = 0; z < 4; z++)
        for (int r = 0; r < st->n_runs; r++) {
            ts_memory m;
            stage_states(st, pb, z, st->first_of_run[r], &m);
            st->states_bytes[z * st->cap + r] = m.total;
        }
    const ts_shard *sh = &st->shard;
    double dpc = (double)pb->gpus / (sh->tp * sh->cp * st->pp) * sh->cp, edp = dpc / sh->ep;
    double ne = st->params[st->biggest], ex = st->expert_params[st->biggest];
    double per_param = 24.0 + pb->train.grad_bytes + pb->train.weight_bytes;
    st->optimizer_s[0] = ts_memory_s(&pb->sys, per_param * (ne + ex)) * pb->compute_scale;
    st->optimizer_s[1] = ts_memory_s(&pb->sys, per_param * (ne / dpc + ex / edp)) * pb->compute_scale;
}

double ts_stages_memory(const ts_stages *st, const ts_layout *l, int *worst_stage) {
    const ts_schedule_info *sched = &ts_schedules[l->schedule];
    const double *states = st->states_bytes + l->zero * st->cap;
    double worst = -1;
    for (int r = 0; r < st->n_runs; r++) {
        int i = st->first_of_run[r];
        double total = states[r] + st->act_bytes[i] * sched->in_flight(l->pp, i, l->microbatches, l->vpp) +
                       st->extra_bytes[i];
        if (total > worst) {
            worst = total;
            if (worst_stage) *worst_stage = i;
        }
    }
    return worst;
}

double ts_stages_step(const ts_stages *st, const ts_problem *pb, const ts_layout *l, ts_time_split *split) {
    const ts_system *s = &pb->sys;
    int p = l->pp, v = l->vpp, m = l->microbatches, dpc = l->dp * l->cp;
    ts_time_split t = {0};
    double tp = ts_schedules[l->schedule].splits_w ? st->tp_split_w_s : st->tp_s;
    double comm_mb = tp + st->cp_s + st->ep_s;
    double tf = st->fwd_s + comm_mb / 3.0, tb = st->bwd_s + st->recompute_s + comm_mb * 2.0 / 3.0;
    t.compute = m * (st->fwd_s + st->bwd_s + st->recompute_s);
    t.tp_comm = m * tp;
    t.cp_comm = m * st->cp_s;
    t.ep_comm = m * st->ep_s;
    t.pp_bubble = p > 1 ? ts_schedules[l->schedule].bubble_s(p, v, tf, tb, st->wgrad_s) : 0;
    /* Each micro-batch's forward and backward transfers sit on the critical path once per stage
     * boundary it waits at; interleaving adds 2·m·(v-1) transfers, hidden behind the other
     * chunks' compute at the system's pp_comm_overlap (the simulator, which overlaps them,
     * agrees within a percent). */
    t.pp_comm = (2.0 * ((double)m + p - 1) + (1.0 - s->pp_comm_overlap) * 2.0 * m * (v - 1)) * st->p2p_s;
    if (dpc > 1) {
        /* The windows are one model chunk's work: with interleaving the last backward (and the
         * next step's first forward) on a stage covers 1/v of its layers. */
        tf /= v;
        tb /= v;
        if (l->zero == 0) {
            t.dp_comm = exposed(s, st->dp_allreduce_s, tb);
        } else if (l->zero == 1) {
            t.dp_comm = exposed(s, st->dp_reduce_scatter_s, tb) + exposed(s, st->dp_allgather_s, tf);
        } else if (l->zero == 2) {
            /* Sharded gradients cannot accumulate locally: every micro-batch's gradients are
             * reduce-scattered as its backward runs (DeepSpeed ZeRO-2). */
            t.dp_comm = m * exposed(s, st->dp_reduce_scatter_s, tb) + exposed(s, st->dp_allgather_s, tf);
        } else {
            /* ZeRO-3: per micro-batch, gather for forward, gather + reduce-scatter in backward. */
            t.dp_comm = m * (exposed(s, st->dp_allgather_s, tf) +
                             exposed(s, st->dp_allgather_s + st->dp_reduce_scatter_s, tb));
        }
    }
    t.optimizer = st->optimizer_s[l->zero >= 1];
    if (split) *split = t;
    return t.compute + t.tp_comm + t.cp_comm + t.ep_comm + t.pp_comm + t.pp_bubble + t.dp_comm +
           t.optimizer;
}

void ts_stages_finish(const ts_stages *st, const ts_problem *pb, const ts_layout *l, ts_eval *out) {
    const ts_train *tr = &pb->train;
    ts_stages_memory(st, l, &out->worst_stage);
    int i = out->worst_stage;
    stage_states(st, pb, l->zero, i, &out->mem);
    out->mem.activations = st->act_bytes[i] * ts_schedules[l->schedule].in_flight(l->pp, i, l->microbatches, l->vpp) +
                           st->extra_bytes[i];
    out->mem.total += out->mem.activations;
    out->fits = out->mem.total <= pb->usable_bytes;

    out->step_s = ts_stages_step(st, pb, l, &out->time);
    double tokens = (double)tr->global_batch * tr->seq;
    out->tokens_per_s = tokens / out->step_s;
    out->tflops_per_gpu = pb->model_flops_per_step / out->step_s / pb->gpus / 1e12;
    out->hw_tflops_per_gpu = out->tflops_per_gpu * st->hw_over_model;
    out->mfu = pb->model_flops_per_step / (out->step_s * pb->gpus * pb->sys.peak_flops[tr->dtype]);
    out->layout = *l;
}
