/* The experts' ops (see ops_moe.h). */
#include "exec/ops_moe.h"

#include "exec/ops_mlp.h"

/* ---- Routing and the EP exchange ------------------------------------------------------------- */

/* The router's choices go to the host, which plans the dispatch (ts_moe_plan: the counts size
 * the EP all-to-alls) and sends the slots back for the gather and combine kernels. */
static ts_status plan_experts(const tr_op_ctx *c, tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t TK = (size_t)s->Tm * s->K;
    TS_CHECK(c->k->to_host(w->host_expert, a->expert, TK * sizeof(int)));
    ts_moe_plan(a->offset, w->host_slot_token, w->host_slot, w->host_expert, s->Tm, s->E, s->K);
    TS_CHECK(c->k->to_device(a->slot_token, w->host_slot_token, TK * sizeof(int)));
    return c->k->to_device(a->slot, w->host_slot, TK * sizeof(int));
}

/* One expert's load of one routing beside the even share (ts_trainer_moe_load). */
static void note_expert_load(const tr_op_ctx *c, int load, double even) {
    c->stats->moe_dev_sq += (load - even) * (load - even);
    c->stats->moe_even_sq += even * even;
}

/* Rows of local expert `el` in the expert-major buffers: start and count (returned too). */
static int expert_rows(const tr_op_ctx *c, const tr_acts *a, int el, int *start, int *count) {
    if (c->s->l->ep == 1) {
        *start = a->offset[el];
        *count = a->offset[el + 1] - a->offset[el];
        return *count;
    }
    int s = 0, n = 0, El = c->s->El;
    for (int e = 0; e <= el; e++)
        for (int r = 0; r < c->s->l->ep; r++) {
            int k = a->src_expert_rows[r * El + e];
            if (e < el) s += k;
            else n += k;
        }
    *start = s;
    *count = n;
    return n;
}

/* Between source-major (as all-to-all-v delivers: per peer, per expert) and expert-major (per
 * expert, per peer) row order; `to_expert` picks the direction. */
static ts_status reorder_rows(const tr_op_ctx *c, const tr_acts *a, const float *src, float *dst, int to_expert) {
    int ep = c->s->l->ep, El = c->s->El;
    size_t C = (size_t)c->s->C, peer_off = 0;
    for (int r = 0; r < ep; r++) {
        size_t within = 0;
        for (int e = 0; e < El; e++) {
            int n = a->src_expert_rows[r * El + e];
            int start, count;
            expert_rows(c, a, e, &start, &count);
            size_t exp_off = (size_t)start;
            for (int q = 0; q < r; q++) exp_off += (size_t)a->src_expert_rows[q * El + e];
            const float *from = to_expert ? src + (peer_off + within) * C : src + exp_off * C;
            float *to = to_expert ? dst + exp_off * C : dst + (peer_off + within) * C;
            TS_CHECK(tr_copy_floats(c, to, from, (size_t)n * C));
            within += (size_t)n;
        }
        peer_off += within;
    }
    return TS_OK;
}

/* All-to-all-v of rows between EP peers: send_rows[r] rows to peer r, recv_rows[r] back. */
static ts_status exchange_rows(const tr_op_ctx *c, const float *in, const int *send_rows, float *out,
                               const int *recv_rows) {
    int ep = c->s->l->ep, C = c->s->C;
    int *sc = c->w->a2a, *sd = sc + ep, *rc = sd + ep, *rd = rc + ep;
    int so = 0, ro = 0;
    for (int r = 0; r < ep; r++) {
        sc[r] = send_rows[r] * C, sd[r] = so, so += sc[r];
        rc[r] = recv_rows[r] * C, rd[r] = ro, ro += rc[r];
    }
    return c->be->all_to_all_v(tr_comm(c, TS_GROUP_EP), in, sc, sd, out, rc, rd);
}

/* ---- Forward ---------------------------------------------------------------------------------- */

static ts_status router_fwd(const tr_op_ctx *c, tr_layer P, tr_acts *a) {
    const ts_kernels *k = c->k;
    const tr_shape *s = c->s;
    int TK = s->Tm * s->K;
    TS_CHECK(k->linear_fwd(a->logits, a->ln2, P.router, s->Tm, s->C, s->E));
    TS_CHECK(k->router_fwd(a->probs, a->expert, a->weight, a->logits, s->Tm, s->E, s->K, s->G, s->M));
    TS_CHECK(plan_experts(c, a));
    TS_CHECK(k->moe_gather_fwd(a->xe, a->ln2, a->slot_token, TK, s->C));
    if (s->l->ep == 1) {
        for (int e = 0; e < s->E; e++) note_expert_load(c, a->offset[e + 1] - a->offset[e], (double)TK / s->E);
        a->rows = TK;
        TS_CHECK(tr_copy_floats(c, a->xr, a->xe, (size_t)TK * s->C));
    }
    return TS_OK;
}

/* The rows to each EP peer's experts: counts exchanged first (they size the all-to-all-v), then
 * the rows, put in expert-major order. */
static ts_status dispatch_fwd(const tr_op_ctx *c, tr_acts *a) {
    const tr_shape *s = c->s;
    int ep = s->l->ep, El = s->El;
    int *cnt = c->w->ep_counts;
    for (int r = 0; r < ep; r++) {
        a->send_rows[r] = 0;
        for (int e = 0; e < El; e++) {
            int g = r * El + e;
            cnt[g] = a->offset[g + 1] - a->offset[g];
            a->send_rows[r] += cnt[g];
        }
    }
    TS_CHECK(c->be->all_to_all_int(tr_comm(c, TS_GROUP_EP), cnt, a->src_expert_rows, El));
    a->rows = 0;
    for (int r = 0; r < ep; r++) {
        a->recv_rows[r] = 0;
        for (int e = 0; e < El; e++) a->recv_rows[r] += a->src_expert_rows[r * El + e];
        a->rows += a->recv_rows[r];
    }
    for (int e = 0; e < El; e++) { /* each local expert's load from the whole EP group */
        int load = 0;
        for (int r = 0; r < ep; r++) load += a->src_expert_rows[r * El + e];
        note_expert_load(c, load, (double)s->Tm * s->K * ep / s->E);
    }
    TS_CHECK(exchange_rows(c, a->xe, a->send_rows, c->w->dxr, a->recv_rows));
    return reorder_rows(c, a, c->w->dxr, a->xr, 1);
}

static ts_status experts_fwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_acts *a) {
    const tr_shape *s = c->s;
    size_t C = (size_t)s->C, F = (size_t)s->Fer;
    int st, n;
    for (int e = 0; e < s->El; e++) {
        if (expert_rows(c, a, e, &st, &n) == 0) continue;
        size_t r = (size_t)st;
        if (op->part == TS_PART_EXPERT_FC1) {
            size_t w = (size_t)e * F * C;
            TS_CHECK(c->k->linear_fwd(a->gate + r * F, a->xr + r * C, P.gate + w, n, s->C, s->Fer));
            TS_CHECK(c->k->linear_fwd(a->up + r * F, a->xr + r * C, P.up + w, n, s->C, s->Fer));
        } else {
            TS_CHECK(c->k->linear_fwd(a->yr + r * C, a->act + r * F, P.down + (size_t)e * C * F, n, s->Fer, s->C));
        }
    }
    return TS_OK;
}

ts_status tr_moe_fwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_acts *a) {
    const tr_shape *s = c->s;
    size_t C = (size_t)s->C;
    switch (op->part) {
    case TS_PART_ROUTER:
        return router_fwd(c, P, a);
    case TS_PART_DISPATCH:
        return dispatch_fwd(c, a);
    case TS_PART_EXPERT_FC1:
        return experts_fwd(c, op, P, a);
    case TS_PART_EXPERT_FC2:
        TS_CHECK(experts_fwd(c, op, P, a));
        if (s->l->ep > 1) return TS_OK; /* COMBINE brings the rows back */
        TS_CHECK(tr_copy_floats(c, a->ye, a->yr, (size_t)a->rows * C));
        TS_CHECK(c->k->moe_combine_fwd(c->w->proj, a->ye, a->weight, a->slot, s->Tm, s->K, s->C));
        return tr_mlp_close_fwd(c, op, a);
    case TS_PART_COMBINE:
        TS_CHECK(reorder_rows(c, a, a->yr, c->w->dxr, 0));
        TS_CHECK(exchange_rows(c, c->w->dxr, a->recv_rows, a->ye, a->send_rows));
        TS_CHECK(c->k->moe_combine_fwd(c->w->proj, a->ye, a->weight, a->slot, s->Tm, s->K, s->C));
        return tr_mlp_close_fwd(c, op, a);
    default:
        return TS_FAIL(TS_ERR_INPUT, "the experts have no forward for part \"%s\"", ts_part_names[op->part]);
    }
}

/* ---- Backward --------------------------------------------------------------------------------- */

/* The combine's backward at the source: each row's gradient is its routing weight times the
 * output gradient; each weight's gradient is the row's output against it. Under expert TP the
 * expert outputs are partial sums over the F slices, so the weights' gradients are summed across
 * the ETP group (the TP group when etp = tp; whole experts, etp = 1, need no sum). */
static ts_status combine_bwd(const tr_op_ctx *c, const tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t TK = (size_t)s->Tm * s->K;
    TS_CHECK(tr_zero_floats(c, w->dye, TK * s->C));
    TS_CHECK(tr_zero_floats(c, w->dweight, TK));
    TS_CHECK(c->k->moe_combine_bwd(w->dye, w->dweight, w->dfull, a->ye, a->weight, a->slot, s->Tm, s->K, s->C));
    if (s->etp > 1) TS_CHECK(c->be->all_reduce(tr_comm(c, TS_GROUP_ETP), w->dweight, w->dweight, TK));
    return TS_OK;
}

/* The experts' down projections: dact from dyr, their weight gradients stashed. */
static ts_status expert_fc2_bwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_layer G, tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t C = (size_t)s->C, F = (size_t)s->Fer;
    TS_CHECK(tr_zero_floats(c, w->dln, (size_t)s->Tm * C));
    if (s->l->ep == 1) {
        TS_CHECK(combine_bwd(c, a));
        TS_CHECK(tr_copy_floats(c, w->dyr, w->dye, (size_t)a->rows * C));
    }
    TS_CHECK(tr_zero_floats(c, w->dact, (size_t)a->rows * F));
    int st, n;
    for (int e = 0; e < s->El; e++) {
        if (expert_rows(c, a, e, &st, &n) == 0) continue;
        size_t r = (size_t)st, wo = (size_t)e * C * F;
        TS_CHECK(c->k->linear_bwd_input(w->dact + r * F, w->dyr + r * C, P.down + wo, n, s->Fer, s->C));
        TS_CHECK(tr_wgrad_stash(c->wq, op->layer, op->mb, TS_PART_EXPERT_FC2, G.down + wo, w->dyr + r * C,
                                a->act + r * F, n, s->Fer, s->C));
    }
    return TS_OK;
}

/* The experts' gate and up projections: dxr from dgate and dup, their weight gradients stashed;
 * without EP the rows' gradients go straight back to their tokens. */
static ts_status expert_fc1_bwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_layer G, tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    size_t C = (size_t)s->C, F = (size_t)s->Fer;
    TS_CHECK(tr_zero_floats(c, w->dxr, (size_t)a->rows * C));
    int st, n;
    for (int e = 0; e < s->El; e++) {
        if (expert_rows(c, a, e, &st, &n) == 0) continue;
        size_t wo = (size_t)e * F * C, r = (size_t)st;
        TS_CHECK(c->k->linear_bwd_input(w->dxr + r * C, w->dgate + r * F, P.gate + wo, n, s->C, s->Fer));
        TS_CHECK(c->k->linear_bwd_input(w->dxr + r * C, w->dup + r * F, P.up + wo, n, s->C, s->Fer));
        TS_CHECK(tr_wgrad_stash(c->wq, op->layer, op->mb, TS_PART_EXPERT_FC1, G.gate + wo, w->dgate + r * F,
                                a->xr + r * C, n, s->C, s->Fer));
        TS_CHECK(tr_wgrad_stash(c->wq, op->layer, op->mb, TS_PART_EXPERT_FC1, G.up + wo, w->dup + r * F,
                                a->xr + r * C, n, s->C, s->Fer));
    }
    if (s->l->ep == 1) TS_CHECK(c->k->moe_gather_bwd(w->dln, w->dxr, a->slot_token, s->Tm * s->K, s->C));
    return TS_OK;
}

/* The router's backward. Experts split over TP: the router is replicated across TP on the same T
 * rows while dln holds TP partial sums, so one rank adds its (whole) contribution and every rank
 * has the same weight gradient. Experts apart from TP: each rank's rows are its own, dln is whole
 * (every rank adds), and the weight gradient of its rows goes to w->router_grad, summed across TP
 * after the router's W op (tr_moe_router_wgrad). */
static ts_status router_bwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_layer G, tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    TS_CHECK(tr_zero_floats(c, w->dlogits_r, (size_t)s->Tm * s->E));
    TS_CHECK(c->k->router_bwd(w->dlogits_r, w->dweight, a->probs, a->expert, s->Tm, s->E, s->K));
    int apart = tr_shape_experts_apart(s);
    if (apart || s->tp_i == 0) TS_CHECK(c->k->linear_bwd_input(w->dln, w->dlogits_r, P.router, s->Tm, s->C, s->E));
    return tr_wgrad_stash(c->wq, op->layer, op->mb, TS_PART_ROUTER, apart ? w->router_grad : G.router, w->dlogits_r,
                          a->ln2, s->Tm, s->C, s->E);
}

/* Experts apart from TP: the router's W GEMM (kind gemm) into w->router_grad, then the program's
 * TP all-reduce after it (kind collective, program/program.c router_tp_sum) sums the TP ranks'
 * shares and adds them to G.router. Megatron-Core marks the router's weight `sequence_parallel`
 * (moe/router.py) so that finalize_model_grads sums it across TP, as it does the norms'. */
ts_status tr_moe_router_wgrad(const tr_op_ctx *c, const ts_op *op, tr_layer G) {
    const tr_shape *s = c->s;
    if (!tr_shape_experts_apart(s)) return tr_wgrad_run(c->wq, op->layer, op->mb, TS_PART_ROUTER);
    size_t n = (size_t)s->E * s->C;
    float *g = c->w->router_grad;
    if (op->kind == TS_OP_GEMM) {
        TS_CHECK(tr_zero_floats(c, g, n));
        return tr_wgrad_run(c->wq, op->layer, op->mb, TS_PART_ROUTER);
    }
    TS_CHECK(c->be->all_reduce(tr_comm(c, TS_GROUP_TP), g, g, n));
    return c->k->add(G.router, G.router, g, n);
}

ts_status tr_moe_bwd(const tr_op_ctx *c, const ts_op *op, tr_layer P, tr_layer G, tr_acts *a) {
    const tr_shape *s = c->s;
    tr_work *w = c->w;
    switch (op->part) {
    case TS_PART_COMBINE: /* backward of the combine: the rows' gradients go to their experts */
        TS_CHECK(combine_bwd(c, a));
        TS_CHECK(exchange_rows(c, w->dye, a->send_rows, w->dxr, a->recv_rows));
        return reorder_rows(c, a, w->dxr, w->dyr, 1);
    case TS_PART_EXPERT_FC2:
        return expert_fc2_bwd(c, op, P, G, a);
    case TS_PART_EXPERT_FC1:
        return expert_fc1_bwd(c, op, P, G, a);
    case TS_PART_DISPATCH: /* backward of the dispatch: the inputs' gradients come home */
        TS_CHECK(reorder_rows(c, a, w->dxr, w->dyr, 0));
        TS_CHECK(exchange_rows(c, w->dyr, a->recv_rows, w->dxe, a->send_rows));
        return c->k->moe_gather_bwd(w->dln, w->dxe, a->slot_token, s->Tm * s->K, s->C);
    case TS_PART_ROUTER:
        return router_bwd(c, op, P, G, a);
    default:
        return TS_FAIL(TS_ERR_INPUT, "the experts have no backward for part \"%s\"", ts_part_names[op->part]);
    }
}
