/* The partition problem (see partition.h): its instance of a planning problem, what a split
 * costs under it (ts_partition_evaluate, the reference every solver is checked against), the
 * planner's uniform split, the objectives, why no split fits, and a split's cost under the
 * planner's closed form (planner/stages.c). The solvers are partition_brute.c (enumeration) and
 * partition_ilp.c (the GLPK program, which states the model in full); the split type is
 * split.c's and the planner's use of all this partition_search.c's. */
#include "planner/partition.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "planner/partition_impl.h"
#include "planner/stages.h"
#include "program/schedule.h"

const char *const ts_partition_status_names[] = {"optimal", "node-limit", "infeasible", "no-split", NULL};
const char *const ts_partition_objective_names[] = {"stage", "step", NULL};

ts_status ts_partition_problem_init(ts_partition_problem *p, int layers, int pp, int vpp) {
    *p = (ts_partition_problem){.layers = layers, .pp = pp, .vpp = vpp, .n_kinds = 1, .node_limit = TS_PART_DEFAULT_NODES,
                                .schedule = vpp > 1 ? TS_SCHED_INTERLEAVED : TS_SCHED_1F1B};
    ts_status res = TS_OK;
    if (layers < 1 || pp < 1 || vpp < 1)
        return TS_FAIL(TS_ERR_INPUT, "partition: expected layers, pp, vpp >= 1, got %d, %d, %d", layers, pp, vpp);
    p->kind = calloc((size_t)layers, sizeof *p->kind);
    TS_ALLOC_GOTO(p->kind, res, fail);
    /* One block carved into the per-stage views. */
    size_t n = (size_t)pp * (3 * K_POL + 2);
    p->fixed_time_s = calloc(n, sizeof(double));
    TS_ALLOC_GOTO(p->fixed_time_s, res, fail);
    p->fixed_act_bytes = p->fixed_time_s + (size_t)pp * K_POL;
    p->fixed_extra_bytes = p->fixed_time_s + (size_t)2 * pp * K_POL;
    p->fixed_state_bytes = p->fixed_time_s + (size_t)3 * pp * K_POL;
    p->in_flight = p->fixed_state_bytes + pp;
    return TS_OK;
fail:
    ts_partition_problem_free(p);
    return res;
}

void ts_partition_problem_free(ts_partition_problem *p) {
    free(p->kind);
    free(p->fixed_time_s);
    *p = (ts_partition_problem){0};
}

int ts_partition_evaluate(const ts_partition_problem *p, ts_split *s) {
    int pp = p->pp, V = pp * p->vpp;
    int *first = malloc((size_t)(V + 1) * sizeof *first);
    if (first == NULL) return 0;
    first[0] = 0;
    for (int g = 0; g < V; g++) first[g + 1] = first[g] + s->layers[g];
    s->fits = first[V] == p->layers;
    s->max_stage_s = -1;
    double worst = -1;
    for (int i = 0; i < pp; i++) {
        int k = s->recompute[i];
        double t = p->fixed_time_s[i * K_POL + k], act = p->fixed_act_bytes[i * K_POL + k];
        double state = p->fixed_state_bytes[i], extra = p->fixed_extra_bytes[i * K_POL + k];
        for (int c = 0; c < p->vpp; c++) {
            int g = ts_sched_chunk(p->schedule, pp, p->vpp, i, c);
            if (s->layers[g] < 1) s->fits = 0;
            for (int x = first[g]; x < first[g + 1] && x < p->layers; x++) {
                int kd = p->kind[x];
                t += p->time_s[kd][k];
                act += p->act_bytes[kd][k];
                state += p->state_bytes[kd];
                if (p->peak_bytes[kd][k] > extra) extra = p->peak_bytes[kd][k];
            }
        }
        s->stage_s[i] = t;
        s->stage_bytes[i] = state + p->in_flight[i] * act + extra;
        if (t > s->max_stage_s) {
            s->max_stage_s = t;
            s->slowest = i;
        }
        if (s->stage_bytes[i] > worst) {
            worst = s->stage_bytes[i];
            s->worst = i;
        }
        if (s->stage_bytes[i] > p->usable_bytes || !policy_allowed(p, k)) s->fits = 0;
    }
    free(first);
    return s->fits;
}

void ts_partition_uniform(const ts_partition_problem *p, ts_recompute rc, ts_split *s) {
    /* The even split over all pp·vpp chunks (stages 1..L mod V one layer more; with vpp = 1 the
     * planner's even split of stages), the uneven remainder allowed. */
    int V = p->pp * p->vpp, first;
    for (int g = 0; g < V; g++) ts_even_split(p->layers, V, 1, g, &first, &s->layers[g]);
    s->schedule = p->schedule;
    for (int i = 0; i < p->pp; i++) s->recompute[i] = rc;
    ts_partition_evaluate(p, s);
}

double ts_part_sum_s(const ts_split *s) {
    double t = 0;
    for (int i = 0; i < s->pp; i++) t += s->stage_s[i];
    return t;
}

double ts_partition_objective_s(const ts_partition_problem *p, const ts_split *s) {
    if (p->objective != TS_PART_OBJ_STEP) return s->max_stage_s;
    double beta = p->bubble_per_stage;
    return p->microbatches * s->max_stage_s + beta * (ts_part_sum_s(s) - s->max_stage_s);
}


/* The infeasibility in words: the uniform split with each stage's least-memory policy. */
void ts_part_explain_infeasible(const ts_partition_problem *p, ts_partition_info *info) {
    char *why = info->why;
    size_t cap = sizeof info->why;
    int V = p->pp * p->vpp;
    info->short_stage = 0;
    info->short_bytes = INFINITY;
    if (V > p->layers) {
        snprintf(why, cap, "%d×%d virtual stages exceed the %d layers (each needs at least one)", p->pp, p->vpp,
                 p->layers);
        return;
    }
    ts_split s;
    if (ts_split_init(&s, p->pp, p->vpp) != TS_OK) {
        snprintf(why, cap, "no split fits (out of memory explaining why)");
        return;
    }
    ts_partition_uniform(p, TS_RECOMPUTE_NONE, &s);
    for (int i = 0; i < p->pp; i++) {
        double best = INFINITY;
        for (int k = 0; k < K_POL; k++) {
            if (!policy_allowed(p, k)) continue;
            ts_recompute keep = s.recompute[i];
            s.recompute[i] = (ts_recompute)k;
            ts_partition_evaluate(p, &s);
            if (s.stage_bytes[i] < best) best = s.stage_bytes[i];
            else s.recompute[i] = keep;
        }
    }
    ts_partition_evaluate(p, &s);
    int i = s.worst;
    info->short_stage = i;
    info->short_bytes = s.stage_bytes[i] - p->usable_bytes;
    char text[1024];
    ts_split_format(&s, text, sizeof text);
    /* the figures first: a caller may cut the split's text (nothing_kept in partition_search.c) */
    snprintf(why, cap,
             "no contiguous split of %d layers over %d×%d stages fits in %.1f GB: under the uniform split "
             "stage %d needs %.1f GB, short by %.1f GB (%.300s)",
             p->layers, p->pp, p->vpp, p->usable_bytes / 1e9, i, s.stage_bytes[i] / 1e9,
             (s.stage_bytes[i] - p->usable_bytes) / 1e9, text);
    ts_split_free(&s);
}

/* ---- the instance of a planning problem ----------------------------------------------------- */

ts_status ts_partition_problem_of(const ts_problem *pb, const ts_layout *l, unsigned policies,
                                  ts_partition_problem *out) {
    const ts_model *m = &pb->model;
    const ts_param_count *pc = &pb->params;
    const ts_train *tr = &pb->train;
    int pp = l->pp, L = m->layers;
    TS_CHECK(ts_partition_problem_init(out, L, pp, l->vpp));
    out->schedule = l->schedule;
    out->policies = policies;
    out->usable_bytes = pb->usable_bytes;
    int moe_model = m->moe.experts > 0;
    out->n_kinds = moe_model ? 2 : 1;
    for (int x = 0; x < L; x++) out->kind[x] = moe_model ? ts_model_layer_is_moe(m, x) : 0;

    ts_shard_costs costs[K_POL];
    ts_shard sh = {l->tp, l->cp, l->ep, l->sp, l->mbs, TS_RECOMPUTE_NONE, l->etp};
    ts_shard_costs_all(pb, &sh, costs);
    int splits_w = ts_schedules[l->schedule].splits_w;
#define BUSY(c) ((c).fwd_s + (c).bwd_s + (c).recompute_s + (splits_w ? (c).tp_split_w_s : (c).tp_s) + (c).cp_s + (c).ep_s)

    /* The step objective's m and β: the schedule's bubble over (p-1) stages of one layer's
     * forward and backward (schedule.c's closed forms; stages.c splits the exposed TP/CP/EP
     * traffic a third to forward, two thirds to backward), per second of that time. */
    out->microbatches = l->microbatches;
    if (pp > 1) {
        const ts_layer_cost *d = &costs[TS_RECOMPUTE_NONE].dense;
        double comm = (splits_w ? d->tp_split_w_s : d->tp_s) + d->cp_s + d->ep_s;
        double tf = d->fwd_s + comm / 3.0, tb = d->bwd_s + comm * 2.0 / 3.0;
        if (tf + tb > 0)
            out->bubble_per_stage = ts_schedules[l->schedule].bubble_s(pp, l->vpp, tf, tb, d->wgrad_s) / ((pp - 1) * (tf + tb));
    }

    /* States per parameter, as stage_states in stages.c: ZeRO-1 shards the optimizer, -2 the
     * gradients, -3 the weights, over DP×CP (experts over DP×CP/EP). */
    double t = l->tp, dpc = (double)pb->gpus / (l->tp * l->cp * pp) * l->cp, edp = dpc / l->ep;
    int z = l->zero;
    double per_ne = (tr->weight_bytes * (z >= 3 ? 1 / dpc : 1) + tr->grad_bytes * (z >= 2 ? 1 / dpc : 1) +
                     tr->optimizer_bytes * (z >= 1 ? 1 / dpc : 1)) / t;
    double per_ex = (tr->weight_bytes * (z >= 3 ? 1 / edp : 1) + tr->grad_bytes * (z >= 2 ? 1 / edp : 1) +
                     tr->optimizer_bytes * (z >= 1 ? 1 / edp : 1)) / (t * l->ep);
    double expert_all = moe_model ? m->moe.experts * pc->expert : 0;
    double moe_ne = pc->per_layer_moe - expert_all;
    double state_kind[2] = {pc->per_layer_dense * per_ne, moe_ne * per_ne + expert_all * per_ex};
    for (int kd = 0; kd < out->n_kinds; kd++) {
        out->state_bytes[kd] = state_kind[kd];
        for (int k = 0; k < K_POL; k++) {
            const ts_layer_cost *c = kd ? &costs[k].moe : &costs[k].dense;
            out->time_s[kd][k] = BUSY(*c);
            out->act_bytes[kd][k] = c->act_bytes;
            out->peak_bytes[kd][k] = c->peak_bytes;
        }
    }

    /* Buffers (stage_states): TP/SP collective buffers, pipeline send/recv, two DP buckets (the
     * full bucket: gradients of a stage exceed it for every real layer), ZeRO-3's gathered
     * layers. */
    double T = (double)l->mbs * tr->seq / l->cp, h = (double)m->hidden;
    double max_layer = fmax(pc->per_layer_dense, moe_ne + expert_all / l->ep) / t;
    double buffers = (l->tp > 1 ? 4.0 * T * h : 0) + (pp > 1 ? 4.0 * T * h / l->tp : 0) + 2.0 * tr->bucket_bytes +
                     (z >= 3 ? 2.0 * tr->weight_bytes * max_layer : 0);
    int n_moe_all = 0;
    for (int x = 0; x < L; x++) n_moe_all += moe_model && ts_model_layer_is_moe(m, x);
    double outside = pc->total - pc->embedding - pc->lm_head - (L - n_moe_all) * pc->per_layer_dense -
                     n_moe_all * pc->per_layer_moe;
    for (int s = 0; s < pp; s++) {
        out->fixed_state_bytes[s] = buffers;
        out->in_flight[s] = ts_schedules[l->schedule].in_flight(pp, s, l->microbatches, l->vpp);
    }
    for (int k = 0; k < K_POL; k++) {
        const ts_shard_costs *c = &costs[k];
        out->fixed_time_s[0 * K_POL + k] += BUSY(c->embed);
        out->fixed_act_bytes[0 * K_POL + k] += c->embed.act_bytes;
        int last = pp - 1;
        out->fixed_time_s[last * K_POL + k] += BUSY(c->head) + m->mtp_layers * BUSY(c->moe);
        out->fixed_act_bytes[last * K_POL + k] += m->mtp_layers * c->moe.act_bytes;
        double extra = c->head.act_bytes;
        if (m->mtp_layers > 0) extra = fmax(extra, c->moe.peak_bytes);
        out->fixed_extra_bytes[last * K_POL + k] = extra;
    }
#undef BUSY
    out->fixed_state_bytes[0] += pc->embedding * per_ne;
    double head_params = pc->lm_head > 0 ? pc->lm_head : (pp > 1 ? (double)m->vocab * m->hidden : 0);
    out->fixed_state_bytes[pp - 1] += (head_params + outside) * per_ne;
    if (m->mtp_layers > 0) out->fixed_state_bytes[pp - 1] += m->mtp_layers * state_kind[moe_model ? 1 : 0];
    return TS_OK;
}

ts_status ts_evaluate_split(const ts_problem *pb, const ts_layout *in, const ts_split *s, ts_eval *out) {
    if (s->pp != in->pp || s->vpp != in->vpp)
        return TS_FAIL(TS_ERR_INPUT, "split for pp=%d, vpp=%d given to a layout with pp=%d, vpp=%d", s->pp, s->vpp,
                       in->pp, in->vpp);
    ts_layout l = *in;
    l.microbatches = (int)(pb->train.global_batch / ((long long)l.dp * l.mbs));
    ts_shard_costs costs[K_POL];
    ts_shard sh = {l.tp, l.cp, l.ep, l.sp, l.mbs, TS_RECOMPUTE_NONE, l.etp};
    ts_shard_costs_all(pb, &sh, costs);
    ts_stages st;
    TS_CHECK(ts_stages_init(&st, l.pp));
    ts_stage_split sp = {.vpp = s->vpp, .schedule = s->schedule, .layers = s->layers, .recompute = s->recompute,
                         .costs = costs};
    ts_stages_build_split(&st, pb, &costs[l.recompute], l.pp, &sp);
    ts_stages_finish(&st, pb, &l, out);
    ts_stages_free(&st);
    return TS_OK;
}
