/* The trainer: owns this rank's parts and runs the step loop over its stage program (see
 * trainer.h). The parts, each behind its own header:
 *   exec/trainer_shape.h  the shard's shapes, the stage's layers, the memory tally;
 *   exec/trainer_data.h   the tokens and positions this rank sees;
 *   exec/param_store.h    weights, gradients, optimizer state and their ZeRO sharding
 *                         (exec/param_layout.h: the tensors in them and their place in the model);
 *   exec/act_cache.h      what the forward keeps for the backward, per layer and micro-batch;
 *   exec/wgrad_queue.h    weight-gradient GEMMs deferred to their W ops;
 *   exec/op_ctx.h         what the per-part ops share: their context and workspace;
 *   exec/ops_attn.h, ops_mlp.h, ops_moe.h, ops_edge.h, ops_comm.h, ops_optim.h  the ops.
 * The trainer dispatches each op of the program, in the order exec/op_streams.h gives, to the
 * part it belongs to, handing it the store's views and the cache's entry it works on. */
#include <stdlib.h>

#include "exec/act_cache.h"
#include "exec/op_ctx.h"
#include "exec/ops_attn.h"
#include "exec/ops_comm.h"
#include "exec/ops_edge.h"
#include "exec/ops_mlp.h"
#include "exec/ops_moe.h"
#include "exec/ops_optim.h"
#include "exec/param_store.h"
#include "exec/reference.h"
#include "exec/trainer.h"
#include "exec/trainer_data.h"
#include "exec/trainer_shape.h"
#include "exec/watchdog.h"
#include "exec/wgrad_queue.h"
#include "program/schedule.h"

struct ts_trainer {
    volatile sig_atomic_t *watch_op; /* ts_trainer_watch's, or NULL */
    const ts_runtime *rt;
    const ts_backend *be;
    ts_train_opts opts;
    int step; /* the step running */
    double origin_s; /* the last step's spans' zero on the backend's clock (now_s) */

    tr_shape shape;
    tr_tally tally;
    tr_data data;
    tr_store store;
    tr_cache cache;
    tr_wgrad_queue wgrad;
    tr_work work;
    tr_stats stats;
    tr_sends sends;
    tr_op_ctx ctx; /* the ops' view of the above */

    const ts_stage_program *stage_prog; /* this stage's program */
    ts_op_streams streams;      /* each op's stream and wait, DP ops' segments, issue order */
    ts_op_clock *clock;         /* the backend's per-op marks */
    float *loss_buf;            /* (1) backend memory: the step's loss, all-reduced */
};

void ts_train_opts_defaults(ts_train_opts *o) {
    *o = (ts_train_opts){.seed = 1234, .text = NULL, .lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f,
                         .eps = 1e-8f, .weight_decay = 0.1f, .order = TS_ORDER_PROGRAM};
}

/* ---- Set-up ------------------------------------------------------------------------------ */

ts_status ts_trainer_check(const ts_problem *pb, const ts_layout *l) {
    const ts_model *m = &pb->model;
    /* The reference's checks of what it implements, without building it: its parameters are the
     * whole model's (20 GB at 1B parameters, and a minute of initialisation). */
    TS_CHECK(ts_ref_check(m, 1, 1));
    if (m->tied_embeddings && l->pp > 1)
        return TS_FAIL(TS_ERR_INPUT, "the executor does not share tied embeddings across pipeline stages "
                                     "(%s is tied; use pp=1 or an untied model)", m->name);
    if (m->kv_heads % l->tp != 0)
        return TS_FAIL(TS_ERR_INPUT, "the executor needs tp=%d to divide %d kv heads", l->tp, m->kv_heads);
    if (m->vocab % l->tp != 0)
        return TS_FAIL(TS_ERR_INPUT, "the executor needs tp=%d to divide the vocabulary %lld", l->tp,
                       (long long)m->vocab);
    /* ZeRO-2/3 reduce each layer's gradients as its backward ends, and its shared one-layer
     * gradient buffer would mix the norms' gradients of one layer's B with another's W. */
    if (ts_schedules[l->schedule].splits_w && l->zero >= 2)
        return TS_FAIL(TS_ERR_INPUT, "the executor runs ZB-H1 only with zero <= 1 (got zero=%d)", l->zero);
    if (m->mtp_layers > 0) return TS_FAIL(TS_ERR_INPUT, "the executor does not run MTP modules");
    if (m->moe.experts > 0 && m->moe.router_groups > 1 && m->moe.experts % m->moe.router_groups != 0)
        return TS_FAIL(TS_ERR_INPUT, "the executor needs router_groups=%d to divide %d experts", m->moe.router_groups,
                       m->moe.experts);
    long long T = (long long)l->mbs * pb->train.seq / l->cp;
    if (pb->train.seq % (2 * l->cp) != 0 || (l->sp && T % l->tp != 0))
        return TS_FAIL(TS_ERR_INPUT, "the executor needs seq divisible by 2·cp and, under SP, the "
                                     "%lld tokens of a micro-batch divisible by tp", T);
    return TS_OK;
}

/* The ops' streams and waits (exec/op_streams.h), the store's segments checked against the
 * program's. */
static ts_status streams_init(ts_trainer *t) {
    const tr_shape *s = &t->shape;
    ts_seg_map map = {.layers = s->m->layers, .local_of = s->local_of, .n_local = s->n_local,
                      .seg_embed = t->store.seg_embed, .seg_head = t->store.seg_head,
                      .grad_buffer = t->store.grad_buffer};
    TS_CHECK(ts_op_streams_init(&t->streams, t->stage_prog, &map, t->opts.order));
    return t->be->clock_init(t->stage_prog->n_ops, &t->clock);
}

ts_status ts_trainer_init(ts_trainer **out, const ts_problem *pb, const ts_program *prog,
                          const ts_runtime *rt, const ts_backend *be, const ts_train_opts *opts) {
    *out = NULL;
    const ts_layout *l = &prog->layout;
    TS_CHECK(ts_trainer_check(pb, l));
    ts_status res = TS_OK;
    ts_trainer *t = calloc(1, sizeof *t);
    if (t == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the trainer");
    *t = (ts_trainer){.rt = rt, .be = be, .opts = *opts, .stage_prog = &prog->stages[rt->coords.pp]};
    tr_wgrad_init(&t->wgrad, be, &t->tally);
    tr_sends_init(&t->sends, &t->tally);
    t->ctx = (tr_op_ctx){.be = be, .k = be->kernels, .rt = rt, .s = &t->shape, .data = &t->data, .w = &t->work,
                         .wq = &t->wgrad, .stats = &t->stats};
    TS_CHECK_GOTO(tr_shape_init(&t->shape, pb, l, rt, t->stage_prog), res, fail);
    TS_CHECK_GOTO(tr_store_init(&t->store, &t->shape, l->zero, be, rt->comm, &t->tally, opts->seed), res, fail);
    TS_CHECK_GOTO(streams_init(t), res, fail);
    TS_CHECK_GOTO(tr_cache_init(&t->cache, &t->shape, be, &t->tally), res, fail);
    TS_CHECK_GOTO(tr_work_init(&t->work, &t->shape, be, &t->tally), res, fail);
    TS_CHECK_GOTO(tr_data_init(&t->data, &t->shape, be), res, fail);
    TS_CHECK_GOTO(be->alloc(sizeof(float), (void **)&t->loss_buf), res, fail);
    *out = t;
    return TS_OK;
fail:
    ts_trainer_free(t);
    return res;
}

void ts_trainer_free(ts_trainer *t) {
    if (t == NULL) return;
    const ts_backend *be = t->be;
    tr_cache_free(&t->cache);
    tr_work_free(&t->work, be);
    tr_wgrad_free(&t->wgrad);
    tr_sends_free(&t->sends, be);
    tr_store_free(&t->store);
    ts_op_streams_free(&t->streams);
    be->clock_free(t->clock);
    tr_data_free(&t->data, be);
    be->free(t->loss_buf);
    tr_shape_free(&t->shape);
    free(t);
}

/* ---- Dispatch ------------------------------------------------------------------------------ */

/* An op of a layer: its weight gradients (W), or the block it belongs to, given the layer's
 * views in the store and its activations for the op's micro-batch. */
static ts_status run_layer_op(ts_trainer *t, const ts_op *op) {
    const tr_op_ctx *c = &t->ctx;
    int j = t->shape.local_of[op->layer];
    tr_acts *a;
    TS_CHECK(tr_cache_get(&t->cache, j, op->mb, &a));
    if (op->phase == TS_PHASE_WGRAD) {
        ts_status st = op->part == TS_PART_ROUTER ? tr_moe_router_wgrad(c, op, tr_store_grads(&t->store, j))
                                                  : tr_wgrad_run(&t->wgrad, op->layer, op->mb, op->part);
        /* The layer's last weight gradient: its activations are done with. */
        if (op->part == TS_PART_QKV) tr_cache_release(&t->cache, j, op->mb);
        return st;
    }
    tr_layer P = tr_store_params(&t->store, j), G = tr_store_grads(&t->store, j);
    int bwd = op->phase == TS_PHASE_BWD;
    switch (op->part) {
    case TS_PART_NORM1:
        /* Backward, the attention block starts: without TP no collective closed the MLP's. */
        if (bwd) TS_CHECK(tr_mlp_close_open_bwd(c, P, G, a));
        return bwd ? tr_attn_bwd(c, op, P, G, a) : tr_attn_fwd(c, op, P, a);
    case TS_PART_SP_GATHER_ATTN:
    case TS_PART_QKV:
    case TS_PART_CP_RING:
    case TS_PART_ATTN:
    case TS_PART_PROJ:
    case TS_PART_TP_ATTN: return bwd ? tr_attn_bwd(c, op, P, G, a) : tr_attn_fwd(c, op, P, a);
    case TS_PART_NORM2:
    case TS_PART_SP_GATHER_MLP:
    case TS_PART_FC1:
    case TS_PART_ACT:
    case TS_PART_FC2:
    case TS_PART_TP_MLP: return bwd ? tr_mlp_bwd(c, op, P, G, a) : tr_mlp_fwd(c, op, P, a);
    case TS_PART_ROUTER:
    case TS_PART_DISPATCH:
    case TS_PART_EXPERT_FC1:
    case TS_PART_EXPERT_FC2:
    case TS_PART_COMBINE: return bwd ? tr_moe_bwd(c, op, P, G, a) : tr_moe_fwd(c, op, P, a);
    default:
        return TS_FAIL(TS_ERR_INPUT, "the executor has no %s for part \"%s\"", bwd ? "backward" : "forward",
                       ts_part_names[op->part]);
    }
}

/* The embedding, head or loss; the head's W op runs its weight gradient and frees its
 * activations. */
static ts_status run_edge_op(ts_trainer *t, const ts_op *op) {
    int head = t->shape.n_local; /* the cache's entry for the head */
    tr_acts *a = NULL;
    if (op->part == TS_PART_HEAD || op->part == TS_PART_LOSS) TS_CHECK(tr_cache_get(&t->cache, head, op->mb, &a));
    if (op->part == TS_PART_HEAD && op->phase == TS_PHASE_WGRAD) {
        ts_status st = tr_wgrad_run(&t->wgrad, -1, op->mb, TS_PART_HEAD);
        tr_cache_release(&t->cache, head, op->mb);
        return st;
    }
    return tr_edge_op(&t->ctx, op, tr_store_edge_params(&t->store), tr_store_edge_grads(&t->store), a);
}

static ts_status run_op(ts_trainer *t, int i) {
    const ts_op *op = &t->stage_prog->ops[i];
    /* The segments a DP op reduces or gathers, in order (exec/op_streams.h lists them). */
    const int32_t *segs = t->streams.segs + t->streams.seg_start[i];
    int n_segs = (int)(t->streams.seg_start[i + 1] - t->streams.seg_start[i]);
    switch (op->part) {
    case TS_PART_GRAD_REDUCE: return tr_grad_reduce_op(&t->store, segs, n_segs);
    case TS_PART_PARAM_GATHER: return tr_param_gather_op(&t->store, op, segs, n_segs);
    case TS_PART_OPTIMIZER: return tr_optimizer_op(&t->store, &t->opts, t->shape.l->zero, t->step);
    case TS_PART_ZERO_GRAD: return tr_store_zero_grads(&t->store);
    /* the executor accumulates inside its weight-gradient ops (Megatron-Core's way); the pass
     * prices stacks that accumulate apart and has nothing left to do here */
    case TS_PART_GRAD_ACCUM: return TS_OK;
    /* FP8 delayed scaling's amax reduction: the executor trains fp32 (exec/run.c), nothing to reduce */
    case TS_PART_AMAX_REDUCE: return TS_OK;
    case TS_PART_PP_ACT:
    case TS_PART_PP_GRAD: return tr_pipe_op(&t->ctx, &t->sends, op);
    case TS_PART_MIRROR_GRAD: return tr_mirror_op(&t->ctx, &t->sends, &t->store, op);
    case TS_PART_EMBED:
    case TS_PART_TP_EMBED:
    case TS_PART_HEAD:
    case TS_PART_LOSS: return run_edge_op(t, op);
    default: return run_layer_op(t, op);
    }
}

/* ---- The step ------------------------------------------------------------------------------ */

void ts_trainer_watch(ts_trainer *t, volatile sig_atomic_t *op) { t->watch_op = op; }

/* Op i on its stream, after the op of the other stream it waits for, timed by the backend. */
static ts_status run_timed(ts_trainer *t, int i) {
    TS_CHECK(t->be->op_begin(t->clock, i, ts_op_on_dp(&t->stage_prog->ops[i]), t->streams.after[i]));
    TS_CHECK(run_op(t, i));
    return t->be->op_end(t->clock, i);
}

ts_status ts_trainer_step(ts_trainer *t, int step, float *loss, ts_op_span *spans) {
    t->step = step;
    TS_CHECK(tr_data_load(&t->data, &t->shape, t->ctx.k, t->opts.seed, t->opts.text, step));
    t->stats.loss_sum = 0;
    t->origin_s = t->be->now_s(); /* the op clock's origin, on the backend's clock */
    TS_CHECK(t->be->step_begin(t->clock));
    for (int k = 0; k < t->stage_prog->n_ops; k++) {
        int i = t->streams.order[k];
        if (t->watch_op) *t->watch_op = i;
        char label[128];
        const ts_op *op = &t->stage_prog->ops[i];
        TS_CHECK_CTX(run_timed(t, i), "op %d \"%s\"", i, ts_op_label(op, label, sizeof label));
    }
    if (spans) TS_CHECK(t->be->spans(t->clock, spans));
    if (t->watch_op) *t->watch_op = TS_WATCH_SENDS;
    TS_CHECK(tr_sends_wait(&t->sends, t->be));
    /* The backend's collectives take its own memory: the loss goes through loss_buf. */
    float mine = (float)t->stats.loss_sum;
    TS_CHECK(t->ctx.k->to_device(t->loss_buf, &mine, sizeof mine));
    TS_CHECK(t->be->all_reduce(t->rt->world, t->loss_buf, t->loss_buf, 1));
    return t->ctx.k->to_host(loss, t->loss_buf, sizeof *loss);
}

double ts_trainer_step_origin_s(const ts_trainer *t) { return t->origin_s; }

ts_exec_memory ts_trainer_memory(const ts_trainer *t) {
    const double *p = t->tally.peak;
    return (ts_exec_memory){.weights = p[TR_MEM_WEIGHTS], .grads = p[TR_MEM_GRADS],
                            .optimizer = p[TR_MEM_OPTIMIZER], .activations = p[TR_MEM_ACTIVATIONS],
                            .buffers = p[TR_MEM_BUFFERS]};
}

void ts_trainer_moe_load(const ts_trainer *t, double *dev_sq, double *even_sq) {
    *dev_sq = t->stats.moe_dev_sq;
    *even_sq = t->stats.moe_even_sq;
}

ts_status ts_trainer_param_count(const ts_trainer *t, size_t *n) {
    ts_ref probe;
    TS_CHECK(ts_ref_init(&probe, t->shape.m, 1, 1, t->opts.seed));
    *n = probe.n_params;
    ts_ref_free(&probe);
    return TS_OK;
}

ts_status ts_trainer_gather_params(ts_trainer *t, float *out) {
    size_t n;
    TS_CHECK(ts_trainer_param_count(t, &n));
    return tr_store_assemble(&t->store, t->rt->world, n, out);
}
