/* The memory of a plan for CPU ranks, as the CPU executor holds it (see memory_exec.h). */
#include "planner/memory_exec.h"

#include <math.h>
#include <stdlib.h>

#include "common/stats.h"
#include "planner/memory_exec_buffers.h"
#include "program/program.h"
#include "program/schedule.h"

ts_exec_entry ts_exec_entry_of(const ts_exec_dims *d, int head, int moe) {
    size_t T = d->T, Tl = d->Tl, C = d->C, Tm = moe ? d->Tm : T; /* Tm: the MLP block's rows */
    ts_exec_entry z = {0};
    z.K = moe ? d->K : 0;
    size_t TK = Tm * z.K;
    z.F = moe ? d->Fer : d->Fr;
    z.R = moe ? TK * d->ep : T; /* an expert set can get every EP peer's rows */
    if (head) {
        z.floats = Tl * C + T * C + Tl + T * d->Vr + 3 * T; /* xf, lnf, rstdf, logits, ce_max/sum/tgt */
        return z;
    }
    /* x, ln1, rstd1, qkv, att, lse, mid, ln2, rstd2, gate, up, act, out (exec/act_cache.h) */
    z.floats = Tl * C + T * C + Tl + T * d->QKVr + T * d->Qr + T * d->Hr + Tl * C + Tm * C + Tl + 3 * z.R * z.F +
               Tl * C;
    if (moe) {
        z.floats += 2 * Tm * d->E + TK + 2 * TK * C + 2 * z.R * C; /* logits, probs, weight, xe, ye, xr, yr */
        z.dev_ints = 3 * TK;
        z.host_ints = d->E + 1 + 2 * d->ep + d->ep * d->El;
    }
    return z;
}

void ts_exec_dims_of(const ts_problem *pb, const ts_layout *l, ts_exec_dims *out) {
    const ts_model *m = &pb->model;
    size_t tp = (size_t)l->tp, D = (size_t)m->head_dim, Hr = (size_t)m->heads / tp, KVr = (size_t)m->kv_heads / tp;
    size_t T = (size_t)l->mbs * (size_t)(pb->train.seq / l->cp), etp = (size_t)ts_layout_etp(l);
    size_t Tl = l->sp ? T / tp : T;
    *out = (ts_exec_dims){.T = T, .Tl = Tl, .Tm = etp < tp ? Tl : T, .C = (size_t)m->hidden, .Hr = Hr, .Qr = Hr * D,
                          .QKVr = Hr * D + 2 * KVr * D, .Fr = (size_t)m->ffn_hidden / tp,
                          .Fer = (size_t)m->moe.expert_ffn / etp, .Vr = (size_t)m->vocab / tp,
                          .E = (size_t)m->moe.experts, .K = (size_t)m->moe.top_k, .ep = (size_t)l->ep};
    out->El = out->E ? out->E / out->ep : 0;
}

int ts_memory_exec_applies(const ts_system *s) { return ts_system_cpu_ranks(s); }

/* Bytes of the output-gradient copy a B op of part `part` stashes for its W op (exec/ops_*.c
 * tr_wgrad_stash: dout is (rows, OC)); a MoE layer's experts at the mean Tm·K rows (Tm: the
 * tokens it routes; the peak's share is moe_peak_bytes's). */
static double stash_bytes(const ts_exec_dims *d, int part) {
    double T = (double)d->T, rows = (double)d->Tm * (double)d->K;
    switch (part) {
    case TS_PART_PROJ:
    case TS_PART_FC2: return 4.0 * T * (double)d->C;
    case TS_PART_QKV: return 4.0 * T * (double)d->QKVr;
    case TS_PART_FC1: return 4.0 * 2.0 * T * (double)d->Fr;
    case TS_PART_HEAD: return 4.0 * T * (double)d->Vr;
    case TS_PART_ROUTER: return 4.0 * (double)d->Tm * (double)d->E;
    case TS_PART_EXPERT_FC2: return 4.0 * rows * (double)d->C;
    case TS_PART_EXPERT_FC1: return 4.0 * 2.0 * rows * (double)d->Fer;
    default: return 0;
    }
}

/* The experts' stashes follow routing: each (MoE layer, micro-batch) backward on each rank of the
 * EP group draws the rows that rank's experts got. The peak is a maximum over the step, so it
 * sees the extreme of those draws, not the busiest rank's mean (ts_moe_load_factor, which paces
 * the collectives): rows = Tm·K·(1 + cv_rank · E[max of n standard normals] / √k) for k draws
 * live at once (their sum spreads by √k), n the step's draws (the stage's expert backwards × ep),
 * cv_rank = load_cv / √(experts / ep) as in models/model.h. A token's top-K experts are
 * distinct, so it sends a rank at most min(K, local experts) rows: at most Tm·min(K, El)·ep rows
 * reach one rank, the bound an unbalanced router reaches (tiny-moe, no balancing loss, cv 0.83:
 * every validate case's measured peak is at it). */
typedef struct {
    double cv_rank; /* spread of a rank's rows over its mean */
    double z;       /* E[max of the step's draws], in standard deviations */
    double bound;   /* the most rows a rank can get, over the mean Tm·K */
} moe_peak;

static moe_peak moe_peak_of(const ts_stage_program *sp, const ts_problem *pb, const ts_exec_dims *d) {
    moe_peak p = {0, 0, 1};
    if (d->ep <= 1 || d->E == 0 || d->K == 0) return p;
    int draws = 0;
    for (int i = 0; i < sp->n_ops; i++)
        draws += sp->ops[i].phase == TS_PHASE_BWD && sp->ops[i].part == TS_PART_EXPERT_FC2 &&
                 sp->ops[i].kind == TS_OP_GEMM;
    p.cv_rank = pb->model.moe.load_cv / sqrt((double)d->E / (double)d->ep);
    p.z = ts_expected_max_normal(draws * (int)d->ep);
    p.bound = (double)(d->K < d->El ? d->K : d->El) * (double)d->ep / (double)d->K;
    return p;
}

/* The experts' stash bytes at mean rows `mean_bytes` held by k draws, at the peak's share. */
static double moe_peak_bytes(const moe_peak *p, double mean_bytes, int k) {
    if (k <= 0) return mean_bytes;
    double f = 1.0 + p->cv_rank * p->z / sqrt((double)k);
    return mean_bytes * (f < p->bound ? f : p->bound);
}

static double entry_bytes(const ts_exec_dims *d, int head, int moe) {
    ts_exec_entry z = ts_exec_entry_of(d, head, moe);
    return 4.0 * (double)(z.floats + z.dev_ints); /* fp32 and int32 on the backend */
}

/* Which activation entry an op uses (exec/trainer.c run_op): a layer's, the head's (`layers`),
 * or none (-1). */
static int entry_of(const ts_op *op, int layers) {
    switch (op->part) {
    case TS_PART_HEAD:
    case TS_PART_LOSS: return layers;
    case TS_PART_EMBED:
    case TS_PART_TP_EMBED:
    case TS_PART_GRAD_REDUCE:
    case TS_PART_PARAM_GATHER:
    case TS_PART_OPTIMIZER:
    case TS_PART_PP_ACT:
    case TS_PART_PP_GRAD:
    case TS_PART_MIRROR_GRAD:
    case TS_PART_ZERO_GRAD:
    case TS_PART_GRAD_ACCUM:
    case TS_PART_AMAX_REDUCE: return -1;
    default: return op->layer;
    }
}

/* The peak of the activations one stage's program holds, walked in the executor's issue order
 * (program.h ts_unpair_order): an entry from its first op to its layer's last weight gradient
 * (the QKV W; the head's own W), each stash from its B op to its W op. */
static ts_status stage_acts(const ts_stage_program *sp, const ts_problem *pb, const ts_exec_dims *d, int mbs,
                            double *peak) {
    int layers = pb->model.layers + pb->model.mtp_layers;
    unsigned char *live = calloc((size_t)(layers + 1) * (size_t)mbs, 1);
    int32_t *order = malloc(((size_t)sp->n_ops + 1) * sizeof *order);
    if (live == NULL || order == NULL) {
        free(live), free(order);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory walking a stage's activations");
    }
    for (int i = 0; i < sp->n_ops; i++) order[i] = i;
    ts_status res = ts_unpair_order(sp, order, sp->n_ops);
    if (res != TS_OK) {
        free(live), free(order);
        return res;
    }
    /* `now` holds all but the experts' stashes, `expert` those at mean rows, of `draws[0|1]`
     * (layer, micro-batch) draws whose FC2 and FC1 stashes are live */
    double now = 0, expert = 0;
    int draws[2] = {0, 0};
    moe_peak mp = moe_peak_of(sp, pb, d);
    *peak = 0;
    for (int x = 0; x < sp->n_ops; x++) {
        const ts_op *op = &sp->ops[order[x]];
        int e = entry_of(op, layers);
        if (e < 0 || op->mb < 0 || op->mb >= mbs) continue;
        unsigned char *on = &live[(size_t)e * (size_t)mbs + (size_t)op->mb];
        int head = e == layers;
        double bytes = entry_bytes(d, head, !head && ts_model_layer_is_moe(&pb->model, e));
        int ex = op->part == TS_PART_EXPERT_FC2 ? 0 : op->part == TS_PART_EXPERT_FC1 ? 1 : -1;
        double *held = ex >= 0 ? &expert : &now;
        if (!*on) now += bytes, *on = 1;
        int gemm = op->kind == TS_OP_GEMM; /* the router's TP sum (experts apart from TP) stashes nothing */
        if (op->phase == TS_PHASE_BWD && gemm) {
            *held += stash_bytes(d, op->part);
            if (ex >= 0) draws[ex]++;
        }
        int k = draws[0] > draws[1] ? draws[0] : draws[1];
        double total = now + moe_peak_bytes(&mp, expert, k);
        if (total > *peak) *peak = total;
        if (op->phase == TS_PHASE_WGRAD && gemm) {
            *held -= stash_bytes(d, op->part);
            if (ex >= 0) draws[ex]--;
            if (op->part == (head ? TS_PART_HEAD : TS_PART_QKV)) now -= bytes, *on = 0;
        }
    }
    free(live);
    free(order);
    return TS_OK;
}

/* The parameters the planner puts on stage i outside its layers (the embedding on the first,
 * the head and final norm on the last), per rank. */
static double edge_params(const ts_stages *st, const ts_problem *pb, int i) {
    const ts_param_count *pc = &pb->params;
    double expert_all = pb->model.moe.experts > 0 ? pb->model.moe.experts * pc->expert : 0;
    double layers = st->n_dense[i] * pc->per_layer_dense + st->n_moe[i] * (pc->per_layer_moe - expert_all);
    double edge = st->params[i] - layers / st->shard.tp;
    return edge > 0 ? edge : 0;
}

/* Stage i's layers' states: the planner's, less the edges it counts there. */
static void layer_states(const ts_stages *st, const ts_problem *pb, const ts_layout *l, int i, ts_memory *out) {
    const ts_train *tr = &pb->train;
    double dpc = (double)l->dp * l->cp, pe = edge_params(st, pb, i);
    ts_stages_states(st, pb, l->zero, i, out);
    out->weights -= tr->weight_bytes * (l->zero >= 3 ? pe / dpc : pe);
    out->grads -= tr->grad_bytes * (l->zero >= 2 ? pe / dpc : pe);
    out->optimizer -= tr->optimizer_bytes * (l->zero >= 1 ? pe / dpc : pe);
}

/* Parameters outside the layers, the embedding and the head: the final norm (and any other;
 * planner/stages.c build_weights puts them on the last stage). */
static double outside_params(const ts_problem *pb) {
    const ts_param_count *pc = &pb->params;
    double layers = 0;
    for (int j = 0; j < pb->model.layers; j++)
        layers += ts_model_layer_is_moe(&pb->model, j) ? pc->per_layer_moe : pc->per_layer_dense;
    return pc->total - pc->embedding - pc->lm_head - layers;
}

/* The edges' states where the stage program puts them (under ZB-V and DualPipe the first stage
 * holds the head too), kept at ZeRO-1 (exec/param_store.c): weights and gradients whole, the
 * optimizer's sharded under ZeRO-1 and up. A tied head on the embedding's stage reads its
 * segment. */
static void edge_states(const ts_stage_program *sp, const ts_problem *pb, const ts_layout *l, ts_memory *m) {
    const ts_param_count *pc = &pb->params;
    const ts_train *tr = &pb->train;
    double e = 0, head = pc->lm_head > 0 ? pc->lm_head : (double)pb->model.vocab * pb->model.hidden;
    if (sp->seg.seg_embed >= 0) e += pc->embedding;
    if (sp->seg.seg_head >= 0) e += (pc->lm_head > 0 || sp->seg.seg_embed < 0 ? head : 0) + outside_params(pb);
    e /= l->tp;
    m->weights += tr->weight_bytes * e;
    m->grads += tr->grad_bytes * e;
    m->optimizer += tr->optimizer_bytes * (l->zero >= 1 ? e / ((double)l->dp * l->cp) : e);
}

static void take_max(ts_memory *m, const ts_memory *x) {
    if (x->weights > m->weights) m->weights = x->weights;
    if (x->grads > m->grads) m->grads = x->grads;
    if (x->optimizer > m->optimizer) m->optimizer = x->optimizer;
    if (x->activations > m->activations) m->activations = x->activations;
    if (x->buffers > m->buffers) m->buffers = x->buffers;
}

ts_status ts_memory_exec_price(const ts_stages *st, const ts_problem *pb, const ts_layout *l, ts_memory *mem) {
    ts_program prog;
    TS_CHECK_CTX(ts_program_build(pb, l, NULL, &prog), "pricing the executor's memory");
    ts_exec_dims d;
    ts_exec_dims_of(pb, l, &d);
    ts_memory worst = {0};
    ts_status res = TS_OK;
    for (int i = 0; i < l->pp && res == TS_OK; i++) {
        ts_memory m;
        layer_states(st, pb, l, i, &m);
        if (ts_schedules[l->schedule].dual) { /* DualPipe: the mirror stage's layers too */
            ts_memory x;
            layer_states(st, pb, l, l->pp - 1 - i, &x);
            m.weights += x.weights, m.grads += x.grads, m.optimizer += x.optimizer, m.buffers += x.buffers;
        }
        edge_states(&prog.stages[i], pb, l, &m);
        res = ts_memory_exec_buffers(&prog, pb, &d, i, &m.buffers); /* in place of the GPU's */
        if (res == TS_OK) res = stage_acts(&prog.stages[i], pb, &d, prog.layout.microbatches, &m.activations);
        take_max(&worst, &m);
    }
    ts_program_free(&prog);
    TS_CHECK(res);
    worst.total = worst.weights + worst.grads + worst.optimizer + worst.activations + worst.buffers;
    *mem = worst;
    return TS_OK;
}
