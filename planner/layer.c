/* Per-layer closed form: the layer recipe (program/recipe.h: every GEMM shape, element-wise
 * byte count and collective size, with their sources) priced on the system and summed, with the
 * activation memory of one layer for one micro-batch on one GPU.
 *
 * Backward is twice the GEMMs (input and weight gradients; Narayanan et al. SC'21 §3.5:
 * "backward pass 2× forward") and 2.5× the fused attention (FlashAttention-2's backward runs 5
 * GEMMs to the forward's 2, Dao 2023 §3.1). TP: 2 block collectives in forward and 2 in backward,
 * the backward ones overlapped with weight-gradient GEMMs; full recompute repeats the forward
 * two. CP: the exchange of its kind (program/recipe.c), the ring's steps exposed where a block's
 * transfer outlasts the attention of the block in flight. EP: dispatch and combine in forward and again in backward.
 *
 * Activation memory follows Korthikanti et al. 2022 §4 (Table 2), generalised to GQA and gated
 * MLPs: per layer s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes with TP, everything /t with SP, the 5as/h
 * term dropped under selective recompute (or by fused attention, which keeps only the fp32
 * log-sum-exp), and 2·s·b·h (the layer input) under full recompute. */
#include "planner/layer.h"

#include <math.h>


#include "planner/cost.h"
#include "planner/moe_cost.h"
#include "planner/op_cost.h"

static int mlp_matrices(const ts_model *m) { return m->activation == TS_ACT_SWIGLU ? 3 : 2; }

/* Activation bytes an MLP of hidden f keeps per token, TP-sharded part (Korthikanti: GeLU input
 * and output 2·4h each = 16 sbh for f = 4h; a gated MLP keeps gate, up and their product). The
 * product (GeLU output) is the second GEMM's input alone: `in_bytes` per element
 * (ts_gemm_input_saved_bytes, 1 under FP8). */
static double mlp_act_bytes_per_token(const ts_model *m, double f_rank, double in_bytes) {
    return (mlp_matrices(m) == 3 ? 4.0 : 2.0) * f_rank + in_bytes * f_rank;
}

typedef ts_layer_fwd fwd_parts;

/* A GEMM of the recipe in its own precision (program/recipe.h ts_gemm_dtype: under fp8 the
 * linear layers run FP8, the rest BF16). */
static double gemm_s(const ts_problem *pb, const ts_gemm_shape *g) {
    return ts_gemm_s(&pb->sys, ts_gemm_dtype(pb, g->part), g->m, g->n, g->k);
}

/* A forward GEMM of the layer, the local experts' as a grouped GEMM when `grouped`
 * (planner/moe_cost.h). */
static double fwd_gemm_s(const ts_problem *pb, const ts_gemm_shape *g, int grouped) {
    ts_dtype dt = ts_gemm_dtype(pb, g->part);
    return grouped ? ts_grouped_gemm_s(&pb->sys, dt, g->m, g->n, g->k, g->count, g->m, pb->train.moe_grouped_gemm,
                                       pb->train.stack.grouped_gemm_streams)
                   : ts_gemm_s(&pb->sys, dt, g->m, g->n, g->k);
}

static double gemm_flops(const ts_gemm_shape *g) { return 2.0 * g->m * g->n * g->k * g->count; }

/* Adds a GEMM of the layer to p's forward GEMM time and its FP8 share, and its weight gradient
 * (W = k × n over the m tokens, at the backward's rate and no faster than its memory traffic:
 * planner/op_cost.h) to p's. Returns its forward time. */
static double add_gemm(const ts_problem *pb, const ts_gemm_shape *g, int grouped, fwd_parts *p) {
    ts_dtype dt = ts_gemm_dtype(pb, g->part);
    double t = fwd_gemm_s(pb, g, grouped);
    p->gemm_s += t;
    if (dt == TS_DTYPE_FP8) p->fp8_gemm_s += t;
    p->wgrad_s += ts_wgrad_op_s(pb, g->part, ts_gemm_bwd_scale(&pb->sys, dt) * t, g->n, g->k, g->m, grouped ? g->count : 1);
    return t;
}

/* The attention block's forward parts from its recipe. */
static void attention_parts(const ts_problem *pb, const ts_shard *sh, fwd_parts *p) {
    const ts_system *s = &pb->sys;
    ts_dtype dt = ts_attention_dtype(pb);
    ts_attn_recipe recipe;
    const ts_attn_recipe *r = &recipe;
    ts_attn_recipe_of(pb, sh, &recipe);
    p->q_heads = r->q_heads;
    p->kv_heads = r->kv_heads;
    p->qk_dim = r->qk_dim;
    p->v_dim = r->v_dim;
    p->core_flops = r->core_flops;
    p->kv_block_bytes = r->kv_block_bytes;
    p->cp_fwd = r->cp_fwd;
    p->cp_bwd = r->cp_bwd;
    for (int i = 0; i < r->n_qkv; i++) {
        double t = add_gemm(pb, &r->qkv[i], 0, p);
        if (r->qkv_up & (1u << i)) p->qkv_up_s += t, p->qkv_up_flops += gemm_flops(&r->qkv[i]);
    }
    add_gemm(pb, &r->proj, 0, p);
    p->matmul_params_rank += r->matmul_params;
    p->amax_gemms += r->amax_gemms;
    p->elem_bytes += r->rotary_bytes + r->gate_bytes;
    p->fp8_cast_bytes += r->fp8_cast_bytes[0] + r->fp8_cast_bytes[1];
    p->fp8_cast_bwd_bytes += r->fp8_cast_bwd_bytes;
    if (pb->train.flash_attention) {
        /* Only the causal half is computed; under CP the rank's attention runs as cp ring-step
         * kernels. */
        double kernel = 0.5 * r->core_flops / r->core_kernels;
        p->attn_fwd_s = ts_attention_s(s, dt, 0.5 * r->core_flops, kernel);
        p->attn_bwd_s = ts_attention_s(s, dt, 2.5 * 0.5 * r->core_flops, 2.5 * kernel);
    } else {
        /* the score GEMMs' traffic is scores_bytes' */
        const ts_gemm_shape *qk = &r->scores_qk, *av = &r->scores_av;
        ts_dtype sdt = ts_gemm_dtype(pb, qk->part);
        p->attn_fwd_s = ts_gemm_compute_s(s, sdt, qk->m, qk->n, qk->k) + ts_gemm_compute_s(s, sdt, av->m, av->n, av->k) +
                        ts_memory_s(s, r->scores_bytes, 1);
        p->attn_bwd_s = 2.0 * p->attn_fwd_s;
    }
}

/* Forward parts of the MLP (dense) or the experts (MoE) of one layer, from its recipe. */
static void mlp_parts(const ts_problem *pb, const ts_mlp_recipe *r, fwd_parts *p) {
    if (!r->moe) {
        add_gemm(pb, &r->fc1, 0, p);
        add_gemm(pb, &r->fc2, 0, p);
    } else {
        /* the local experts as grouped GEMMs (planner/moe_cost.h) */
        add_gemm(pb, &r->fc1, 1, p);
        add_gemm(pb, &r->fc2, 1, p);
        add_gemm(pb, &r->router, 0, p);
    }
    p->matmul_params_rank += r->matmul_params;
    p->amax_gemms += r->amax_gemms;
    p->elem_bytes += r->act_bytes;
    p->copy_bytes += r->copy_bytes;
    p->fp8_cast_bytes += r->fp8_cast_bytes[0] + r->fp8_cast_bytes[1];
    p->fp8_cast_bwd_bytes += r->fp8_cast_bwd_bytes[0] + r->fp8_cast_bwd_bytes[1];
    if (r->shared) {
        add_gemm(pb, &r->shared_fc1, 0, p);
        add_gemm(pb, &r->shared_fc2, 0, p);
        p->elem_bytes += r->shared_act_bytes;
    }
}

/* CP's exchange in one pass beside an attention core of attn_s (program/recipe.h ts_cp_pass): the
 * ring's exposed steps (cost.h ts_cp_ring_exposed_s; unfused attention, whose kernels the ring
 * does not pace, hides the ring's transfers behind the whole core), then the exposed collectives,
 * as the simulator runs the step program's ops (planner/op_cost.c). */
static double cp_pass_s(const ts_problem *pb, int cp, const ts_cp_pass *c, double attn_s, ts_link link) {
    const ts_system *s = &pb->sys;
    double t = 0;
    for (int i = 0; i < 2; i++) {
        const ts_cp_coll *x = &c->around[i];
        if (x->coll < 0) continue;
        if (x->steps == 0) {
            t += ts_coll_s(s, (ts_coll)x->coll, cp, x->bytes, link);
        } else if (i == 0 && pb->train.flash_attention) {
            t += ts_cp_ring_exposed_s(s, link, x->steps, x->step_bytes, attn_s);
        } else {
            double all = ts_cp_ring_exposed_s(s, link, x->steps, x->step_bytes, 0);
            double left = all - (i == 0 && !s->serial_ops ? attn_s : 0);
            t += left > 0 ? left : 0;
        }
    }
    return t;
}

/* What a layer costs whatever its recompute policy: compute times, the one-collective times and
 * the activation terms that each policy then combines (layer_finish). */
typedef struct {
    double fwd_s, bwd_s, wgrad_s, attn_fwd_s;
    double gemm_fwd_flops, core_fwd_flops;
    double tp_one_s, tp_close_s; /* the two blocks' TP collectives in one pass; the closing ones */
    double tp_disp_s, tp_disp_open_s; /* of them, the MoE dispatcher's (recipe.h tp_dispatcher);
                                         its opening gather */
    double cp_fwd_s, cp_bwd_s;   /* exposed CP ring in forward, in backward */
    double a2a_s;                /* the EP collectives to and from the experts, one pass */
    double a2a_to_s;             /* of it, the one toward the experts (forward dispatch, backward
                                    combine) */
    double pre_fwd_s, pre_bwd_s; /* the attention block's forward and backward computation (what
                                    runs before the dispatch: Megatron-Core's pre_dispatch) */
    double mlp_wgrad_s;          /* the MLP's (experts') weight-gradient GEMMs */
    double shared_hidden_s;      /* of the EP collectives, what the shared experts hide (forward and
                                    backward) under --moe-shared-expert-overlap, net of the
                                    overlap_slowdown on them */
    double act_attn_bytes;       /* activations of the attention block but its scores, unscaled */
    double act_mlp_bytes;        /* activations of the MLP or experts, unscaled */
    double scores_bytes[TS_RECOMPUTE_COUNT]; /* attention scores kept under each policy */
    double input_bytes;          /* the layer input (what full recompute keeps), before scaling */
    double amax_gemms;           /* FP8 delayed scaling: GEMMs whose amaxes are reduced */
    /* recompute=selective as the problem's modules make it (selective_parts) */
    int sel_core;                /* core_attn among them: the core and CP's exchange again */
    int sel_ep;                  /* moe: the dispatch and combine again */
    double sel_fwd_s;            /* the forward work the modules redo, the core's included */
    double sel_flops;            /* its FLOPs, beyond the model's */
    double sel_drop_bytes;       /* activation bytes they drop (the scores apart), unscaled */
    double sel_tp_s;             /* mlp, moe: the MLP block's TP collectives again, one pass */
} layer_parts;

void ts_layer_attention_of(const ts_problem *pb, const ts_shard *sh, ts_layer_fwd *out) {
    *out = (ts_layer_fwd){0};
    attention_parts(pb, sh, out);
}

/* Megatron-Core's --moe-shared-expert-overlap (moe/shared_experts.py): the shared experts' FC1
 * and activation run beside the dispatch, their FC2 beside the combine, and their backward
 * beside the two again (combine's, then dispatch's), as program.c orders them; each hides what of
 * its all-to-all it outlasts, at the system's overlap_slowdown on it (the simulator's). */
static double shared_hidden_s(const ts_problem *pb, const ts_mlp_recipe *r, const layer_parts *p) {
    const ts_system *s = &pb->sys;
    double to = p->a2a_to_s, from = p->a2a_s - p->a2a_to_s, scale = pb->compute_scale;
    double fc1 = gemm_s(pb, &r->shared_fc1) * scale, fc2 = gemm_s(pb, &r->shared_fc2) * scale;
    double act = ts_memory_s(s, r->shared_act_bytes, 1) * scale, act_bwd = ts_memory_s(s, 2.0 * r->shared_act_bytes, 1) * scale;
    double hidden = fmin(to, fc1 + act) + fmin(from, fc2) + fmin(to, fc2 + act_bwd) + fmin(from, fc1);
    return hidden * (1.0 - s->overlap_slowdown);
}

/* The MoE block's forward GEMMs (router, local experts grouped, shared experts): what recompute
 * module moe redoes. */
static void moe_block_gemms(const ts_problem *pb, const ts_mlp_recipe *mr, double *t, double *flops) {
    const ts_gemm_shape *one[] = {&mr->router, &mr->shared_fc1, &mr->shared_fc2};
    *t += fwd_gemm_s(pb, &mr->fc1, 1) + fwd_gemm_s(pb, &mr->fc2, 1);
    *flops += gemm_flops(&mr->fc1) + gemm_flops(&mr->fc2);
    for (int i = 0; i < (mr->shared ? 3 : 1); i++) *t += fwd_gemm_s(pb, one[i], 0), *flops += gemm_flops(one[i]);
}

/* recompute=selective as the problem's modules make it (problem.h ts_recompute_module), op for op
 * as program.c's selective_recompute emits them: the forward work each redoes, its FLOPs and the
 * activation bytes it drops (Megatron-Core frees them: output-discarding checkpoints for
 * mla_up_proj, layernorm and moe_act, ordinary ones for the blocks). Needs out's attention core,
 * model FLOPs and MLP activations; `mlp_tp_s` is one pass of the MLP block's TP collectives. */
static void selective_parts(const ts_problem *pb, const ts_shard *sh, int moe, const ts_layer_fwd *attn,
                            const ts_mlp_recipe *mr, double in_bytes, double mlp_tp_s, layer_parts *out) {
    const ts_model *m = &pb->model;
    const ts_system *s = &pb->sys;
    unsigned rm = pb->train.recompute_modules;
    double T = (double)sh->mbs * pb->train.seq / sh->cp, h = (double)m->hidden, sc = pb->compute_scale;
    double rep = sh->sp ? 1.0 / sh->tp : 1.0, t = 0, flops = 0, drop = 0;
    int dense_mlp = !moe && (rm & TS_RCM_BIT(TS_RCM_MLP)), whole_moe = moe && (rm & TS_RCM_BIT(TS_RCM_MOE));
    out->sel_core = (rm & TS_RCM_BIT(TS_RCM_CORE_ATTN)) != 0;
    if (out->sel_core) t += out->attn_fwd_s, flops += out->core_fwd_flops;
    if ((rm & TS_RCM_BIT(TS_RCM_MLA_UP_PROJ)) && m->mla.kv_lora_rank > 0) {
        t += attn->qkv_up_s * sc, flops += attn->qkv_up_flops;
        drop += 2.0 * T * attn->q_heads * (2.0 * attn->qk_dim + attn->v_dim); /* q, k, v; the latents stay */
    }
    if (rm & TS_RCM_BIT(TS_RCM_LAYERNORM)) { /* the dense MLP block rebuilds the second itself */
        t += (dense_mlp ? 1.0 : 2.0) * ts_memory_s(s, mr->norm_bytes, 1) * sc;
        drop += (dense_mlp ? 1.0 : 2.0) * in_bytes * T * h * rep;
    }
    if (dense_mlp) { /* from the block's input: norm (TE fuses it into FC1), FC1, activation, FC2 */
        t += (fwd_gemm_s(pb, &mr->fc1, 0) + fwd_gemm_s(pb, &mr->fc2, 0)) * sc +
             (ts_memory_s(s, mr->norm_bytes + mr->fp8_cast_bytes[0], 1) +
              ts_memory_s(s, mr->act_bytes + mr->copy_bytes + mr->fp8_cast_bytes[1], 1)) * sc;
        flops += gemm_flops(&mr->fc1) + gemm_flops(&mr->fc2);
        drop += out->act_mlp_bytes + in_bytes * T * h * rep;
        out->sel_tp_s = mlp_tp_s;
    }
    if (whole_moe) { /* from the norm's output: router, dispatch, experts, combine */
        double g = 0;
        moe_block_gemms(pb, mr, &g, &flops);
        t += g * sc + ts_memory_s(s, mr->act_bytes + (mr->shared ? mr->shared_act_bytes : 0) + mr->copy_bytes +
                                         mr->fp8_cast_bytes[1], 1) * sc;
        drop += out->act_mlp_bytes;
        out->sel_ep = sh->ep > 1;
        out->sel_tp_s = mr->tp_block ? mlp_tp_s : 0;
    }
    if (moe && !whole_moe && (rm & TS_RCM_BIT(TS_RCM_MOE_ACT))) {
        t += ts_memory_s(s, mr->act_bytes - mr->permute_bytes, 1) * sc;
        drop += mr->routed_tokens * in_bytes * mr->fc2.k; /* the routed experts' FC2 inputs */
    }
    if (moe && !whole_moe && mr->shared && (rm & TS_RCM_BIT(TS_RCM_SHARED_EXPERTS))) {
        t += (fwd_gemm_s(pb, &mr->shared_fc1, 0) + fwd_gemm_s(pb, &mr->shared_fc2, 0) +
              ts_memory_s(s, mr->shared_act_bytes, 1)) * sc;
        flops += gemm_flops(&mr->shared_fc1) + gemm_flops(&mr->shared_fc2);
        drop += T * mlp_act_bytes_per_token(m, (double)m->moe.shared_ffn * m->moe.shared_experts / sh->tp, in_bytes);
    }
    out->sel_fwd_s = t;
    out->sel_flops = flops;
    out->sel_drop_bytes = drop;
}

/* One TP collective of `bytes` over the shard's TP group. */
static double tp_coll_s(const ts_problem *pb, const ts_shard *sh, ts_coll c, double bytes) {
    return ts_coll_s(&pb->sys, c, sh->tp, bytes, ts_group_link(&pb->sys, 1, sh->tp));
}

static void layer_parts_of(const ts_problem *pb, const ts_shard *sh, int moe, const ts_layer_fwd *attn_parts,
                           layer_parts *out) {
    const ts_model *m = &pb->model;
    const ts_system *s = &pb->sys;
    double T = (double)sh->mbs * pb->train.seq / sh->cp;
    double h = (double)m->hidden, seq = (double)pb->train.seq;
    double rep = sh->sp ? 1.0 / sh->tp : 1.0; /* replicated parts are split only under SP */
    fwd_parts p = *attn_parts;
    const fwd_parts *ar_ = attn_parts;
    ts_mlp_recipe mr;
    ts_mlp_recipe_of(pb, sh, moe, &mr);
    mlp_parts(pb, &mr, &p);
    /* CPU ranks sharing cores compute slower (cost.h ts_compute_scale). */
    p.gemm_s *= pb->compute_scale;
    p.wgrad_s *= pb->compute_scale;
    p.attn_fwd_s *= pb->compute_scale;
    p.attn_bwd_s *= pb->compute_scale;
    /* The layer's two norm + bias-dropout-add passes. */
    p.elem_bytes += 2.0 * mr.norm_bytes;
    /* The step program's three element-wise ops a layer each way: norm and rotary, norm, the
     * activation (unfused attention's softmax is in attn_fwd_s / attn_bwd_s); FP8 casts ride
     * in them. */
    double elem_s = ts_memory_s(s, p.elem_bytes + p.copy_bytes + p.fp8_cast_bytes, 3) * pb->compute_scale;
    double elem_bwd_s = ts_memory_s(s, 2.0 * p.elem_bytes + p.copy_bytes + p.fp8_cast_bwd_bytes, 3) * pb->compute_scale;

    /* the FP8 input-gradient GEMMs beyond the curve's time (the weight gradients' is in wgrad_s) */
    double fp8_dgrad_s = (ts_gemm_bwd_scale(s, TS_DTYPE_FP8) - 1.0) * p.fp8_gemm_s * pb->compute_scale;

    *out = (layer_parts){0};
    /* the attention block's share: its GEMMs and core, the element-wise time by its bytes */
    double a_bytes = ar_->elem_bytes + mr.norm_bytes + ar_->fp8_cast_bytes, all_bytes = p.elem_bytes + p.copy_bytes + p.fp8_cast_bytes;
    double a_share = all_bytes > 0 ? a_bytes / all_bytes : 0, a_gemm_s = ar_->gemm_s * pb->compute_scale;
    out->pre_fwd_s = a_gemm_s + p.attn_fwd_s + a_share * elem_s;
    out->pre_bwd_s = a_gemm_s + ar_->wgrad_s * pb->compute_scale + p.attn_bwd_s + a_share * elem_bwd_s +
                     (ts_gemm_bwd_scale(s, TS_DTYPE_FP8) - 1.0) * ar_->fp8_gemm_s * pb->compute_scale;
    out->mlp_wgrad_s = p.wgrad_s - ar_->wgrad_s * pb->compute_scale;
    out->fwd_s = p.gemm_s + p.attn_fwd_s + elem_s;
    out->bwd_s = p.gemm_s + fp8_dgrad_s + p.wgrad_s + p.attn_bwd_s + elem_bwd_s;
    out->wgrad_s = p.wgrad_s;
    out->attn_fwd_s = p.attn_fwd_s;
    out->amax_gemms = p.amax_gemms;

    /* Model FLOPs (full s² attention convention). */
    double ar = ar_->q_heads, qk = ar_->qk_dim, vd = ar_->v_dim;
    out->core_fwd_flops = ar_->core_flops;
    out->gemm_fwd_flops = 2.0 * T * p.matmul_params_rank;

    /* TP: 4 collectives of T·h·2 bytes (6 with full recompute), ring over the TP group. */
    double mlp_tp_s = 0;
    if (sh->tp > 1) {
        /* `close` ends a block (all-reduce, or reduce-scatter under SP); SP also opens each
         * block with an all-gather. The attention block's are of T·h, the MLP block's of its
         * recipe's size (MoE: program/recipe_moe.c), or none. */
        double close_s[2], open_s[2];
        for (int i = 0; i < 2; i++) {
            double bytes = i == 0 ? 2.0 * T * h : mr.tp_block ? mr.tp_bytes : 0;
            close_s[i] = tp_coll_s(pb, sh, sh->sp ? TS_COLL_REDUCE_SCATTER : TS_COLL_ALLREDUCE, bytes);
            open_s[i] = sh->sp ? tp_coll_s(pb, sh, TS_COLL_ALLGATHER, bytes) : 0;
        }
        out->tp_close_s = close_s[0] + close_s[1];
        mlp_tp_s = close_s[1] + open_s[1];
        out->tp_one_s = close_s[0] + open_s[0] + close_s[1] + open_s[1];
        if (mr.tp_dispatcher) out->tp_disp_s = close_s[1] + open_s[1], out->tp_disp_open_s = open_s[1];
    }
    /* CP (program/recipe.c): the ring exposed step by step where a block's transfer outlasts the
     * attention of the block in flight; the all-gather and all-to-all kinds' collectives whole. */
    if (sh->cp > 1) {
        ts_link link = ts_group_link(s, sh->tp, sh->cp);
        out->cp_fwd_s = cp_pass_s(pb, sh->cp, &ar_->cp_fwd, p.attn_fwd_s, link);
        out->cp_bwd_s = cp_pass_s(pb, sh->cp, &ar_->cp_bwd, p.attn_bwd_s, link);
    }
    /* EP: dispatch + combine (each pass: forward, backward, recompute), as the dispatcher runs
     * them (planner/moe_cost.h). */
    if (moe && sh->ep > 1) {
        int stride = ts_shard_etp(sh);
        int lockstep = sh->tp * sh->cp;
        out->a2a_to_s = ts_moe_coll_s(pb, sh->ep, stride, lockstep, (ts_coll)mr.to_coll, mr.to_bytes);
        out->a2a_s = out->a2a_to_s + ts_moe_coll_s(pb, sh->ep, stride, lockstep, (ts_coll)mr.from_coll, mr.from_bytes);
        if (mr.shared && pb->train.moe_shared_expert_overlap) out->shared_hidden_s = shared_hidden_s(pb, &mr, out);
    }

    /* Activations (Korthikanti 2022 Table 2, generalised; bytes). */
    double g = ar_->kv_heads, d = m->head_dim;
    /* the two norms' inputs, 16-bit; their outputs, the QKV and first MLP GEMMs' inputs alone */
    double in_bytes = ts_gemm_input_saved_bytes(pb);
    double replicated = T * h * (4 + 2 * in_bytes + (m->dropout ? 2 : 0)) * rep;
    double attn;
    if (m->mla.kv_lora_rank > 0) {
        const ts_mla *a = &m->mla;
        attn = 2.0 * T * (a->q_lora_rank + a->kv_lora_rank + a->qk_rope_dim) +
               2.0 * T * ar * (2.0 * qk + 2.0 * vd);
    } else {
        attn = 2.0 * T * (2.0 * ar * d + 2.0 * g * d); /* Q, K, V and the output projection input */
        /* the output gate's backward reads the gate and the core's output, both beside the gated
         * product the projection keeps */
        if (m->attn_gate) attn += 2.0 * T * 2.0 * ar * d;
    }
    for (int rc = 0; rc < TS_RECOMPUTE_COUNT; rc++) {
        double scores = 0;
        if (pb->train.flash_attention) scores = 4.0 * T * ar; /* fp32 log-sum-exp */
        else if (rc != TS_RECOMPUTE_SELECTIVE || !(pb->train.recompute_modules & TS_RCM_BIT(TS_RCM_CORE_ATTN)))
            scores = (m->dropout ? 5.0 : 2.0) * ar * T * seq / sh->cp;
        out->scores_bytes[rc] = scores;
    }
    double mlp;
    if (!moe) {
        mlp = T * mlp_act_bytes_per_token(m, (double)m->ffn_hidden / sh->tp, in_bytes);
    } else {
        const ts_moe *x = &m->moe;
        mlp = mr.routed_tokens * (in_bytes * h + mlp_act_bytes_per_token(m, (double)x->expert_ffn / ts_shard_etp(sh), in_bytes));
        if (x->shared_experts > 0)
            mlp += T * mlp_act_bytes_per_token(m, (double)x->shared_ffn * x->shared_experts / sh->tp, in_bytes);
    }
    out->act_attn_bytes = replicated + attn;
    out->act_mlp_bytes = mlp;
    selective_parts(pb, sh, moe, ar_, &mr, in_bytes, mlp_tp_s, out);
    out->input_bytes = 2.0 * T * h * rep;
}

/* Megatron-Core's combined 1F1B on one layer: the forward of one micro-batch beside the backward
 * of another, their sides issued as TransformerLayerSchedulePlan.run orders them (model_chunk_
 * schedule_plan.py; program.c interleave_pair): on the EP stream the backward's combine, the
 * forward's dispatch, the backward's dispatch, the forward's combine; on the computation stream
 * the forward's attention, the backward's experts (input gradients), the forward's experts, then
 * the backward's expert weight gradients and attention, which the step program orders after the
 * backward's dispatch (Megatron-Core runs the expert weight gradients before it, unless
 * --delay-wgrad-compute defers them). Each waits for its inputs. Returns the pair's time beyond
 * its computation: the EP traffic left exposed, per micro-batch (each runs one forward and one
 * backward of the layer, paired), and the slowdown of the computation that runs beside the
 * hidden part (the simulator's: computation that starts with an EP transfer in flight): the
 * system's overlap_slowdown, or the SMs the dispatcher's kernels hold where that is more
 * (moe_cost.h ts_moe_comm_sm_frac: DeepEP's 20). */
static double combined_exposed_s(const ts_problem *pb, const layer_parts *p) {
    double to = p->a2a_to_s, from = p->a2a_s - p->a2a_to_s;
    double af = p->pre_fwd_s, ab = p->pre_bwd_s, mf = p->fwd_s - af, mw = p->mlp_wgrad_s, md = p->bwd_s - ab - mw;
    double comb_b = to, disp_f = to, disp_b = from, comb_f = from;
    double start = fmax(af, comb_b);               /* attention forward beside the backward's combine */
    double t_md = start + md;                      /* experts' input gradients */
    double d_f = start + disp_f;                   /* the forward's dispatch */
    double d_b = fmax(d_f, t_md) + disp_b;         /* the backward's dispatch */
    double t_mf = fmax(t_md, d_f) + mf;            /* experts' forward, after its dispatch */
    double c_f = fmax(d_b, t_mf) + comb_f;         /* the forward's combine */
    double t_ab = fmax(t_mf, d_b) + mw + ab;       /* weight gradients and attention's backward */
    double span = fmax(t_ab, c_f), busy = af + ab + mf + md + mw;
    double exposed = span > busy ? span - busy : 0, hidden = 2.0 * (to + from) - exposed;
    double slowdown = fmax(pb->sys.overlap_slowdown, ts_moe_comm_sm_frac(pb));
    return exposed + slowdown * fmin(fmax(hidden, 0), busy);
}

/* One policy's costs from the parts. */
static void layer_finish(const ts_problem *pb, const ts_shard *sh, const layer_parts *p, ts_recompute rc,
                         ts_layer_cost *out) {
    const ts_system *s = &pb->sys;
    int full = rc == TS_RECOMPUTE_FULL;
    *out = (ts_layer_cost){0};
    out->fwd_s = p->fwd_s;
    out->bwd_s = p->bwd_s;
    out->wgrad_s = p->wgrad_s;
    out->amax_gemms = p->amax_gemms;
    int sel = rc == TS_RECOMPUTE_SELECTIVE;
    if (full) out->recompute_s = p->fwd_s;
    else if (sel) out->recompute_s = p->sel_fwd_s;

    /* Executed FLOPs add what recompute repeats. */
    out->model_flops = 3.0 * (p->gemm_fwd_flops + p->core_fwd_flops);
    out->hw_flops = out->model_flops + (full ? p->gemm_fwd_flops + p->core_fwd_flops : sel ? p->sel_flops : 0);

    if (sh->tp > 1) {
        /* Forward (and recomputed forward) collectives sit on the critical path unless the
         * system overlaps TP communication (tp_comm_overlap); the backward's two run
         * asynchronously under the weight-gradient GEMMs (Megatron-LM's async TP all-reduce /
         * reduce-scatter), exposed only beyond them, but for the MoE dispatcher's, which run
         * in backward as in forward (recipe.h tp_dispatcher). */
        double pass = p->tp_one_s, disp = p->tp_disp_s, hid = pass - disp;
        double fwd_count = full ? 2.0 : 1.0, again = sel ? p->sel_tp_s : 0; /* selective's blocks */
        double bwd_left = hid - p->wgrad_s;
        if (s->serial_ops)
            out->tp_s = (fwd_count + 1.0) * pass + again; /* nothing runs under a collective */
        else
            out->tp_s = (fwd_count * pass + disp + again) * (1.0 - s->tp_comm_overlap) + (bwd_left > 0 ? bwd_left : 0) +
                        s->overlap_slowdown * (bwd_left > 0 ? p->wgrad_s : hid);
        /* With W apart, the backward's closing collectives have no GEMM to hide under; its SP
         * all-gathers feed the later W and stay hidden, but the dispatcher's. */
        out->tp_split_w_s = (fwd_count * pass + again + p->tp_close_s + p->tp_disp_open_s) * (1.0 - s->tp_comm_overlap);
    }
    /* Full recompute replays the layer's forward, selective its attention: CP's exchange too. */
    if (sh->cp > 1) out->cp_s = p->cp_fwd_s + p->cp_bwd_s + (full || (sel && p->sel_core) ? p->cp_fwd_s : 0);
    /* full recompute, and selective's moe module, dispatch and combine a third time */
    double ep_again = full || (sel && p->sel_ep) ? p->a2a_s : 0;
    out->ep_s = 2.0 * p->a2a_s + ep_again - p->shared_hidden_s;
    out->ep_paired_s = pb->train.moe_combined_1f1b && p->a2a_s > 0 && !full ? combined_exposed_s(pb, p) + ep_again
                                                                            : out->ep_s;

    double kept = (p->act_attn_bytes + p->scores_bytes[rc] + p->act_mlp_bytes - (sel ? p->sel_drop_bytes : 0)) *
                  pb->train.activation_scale;
    if (full) {
        out->act_bytes = p->input_bytes * pb->train.activation_scale;
        out->peak_bytes = kept; /* one layer's activations rebuilt during its backward */
    } else {
        out->act_bytes = kept;
    }
}

void ts_layer_cost_of(const ts_problem *pb, const ts_shard *sh, int moe, ts_layer_cost *out) {
    ts_layer_fwd attn;
    layer_parts p;
    ts_layer_attention_of(pb, sh, &attn);
    layer_parts_of(pb, sh, moe, &attn, &p);
    layer_finish(pb, sh, &p, sh->recompute, out);
}

void ts_layer_costs_with(const ts_problem *pb, const ts_shard *sh, int moe, const ts_layer_fwd *attn,
                         ts_layer_cost out[TS_RECOMPUTE_COUNT]) {
    layer_parts p;
    layer_parts_of(pb, sh, moe, attn, &p);
    for (int rc = 0; rc < TS_RECOMPUTE_COUNT; rc++) layer_finish(pb, sh, &p, (ts_recompute)rc, &out[rc]);
}

void ts_head_cost_of(const ts_problem *pb, const ts_shard *sh, ts_layer_cost *out) {
    const ts_system *s = &pb->sys;
    ts_edge_recipe e;
    ts_edge_recipe_of(pb, sh, &e);
    const ts_gemm_shape *g = &e.head, *p = &e.mtp_proj;
    /* the head once per prediction (the model's and each MTP depth's), the MTP projections */
    double head_s = gemm_s(pb, g) * g->count, proj_s = p->count > 0 ? gemm_s(pb, p) * p->count : 0;
    double gemm = (head_s + proj_s) * pb->compute_scale;
    double wgrad = (ts_wgrad_op_s(pb, g->part, head_s, g->n, g->k, g->m, g->count) +
                    (p->count > 0 ? ts_wgrad_op_s(pb, p->part, proj_s, p->n, p->k, p->m, p->count) : 0)) *
                   pb->compute_scale;
    double loss_fwd_s = ts_memory_s(s, e.loss_fwd_bytes, 1) * pb->compute_scale;
    double loss_bwd_s = ts_memory_s(s, e.loss_bwd_bytes, 1) * pb->compute_scale;
    *out = (ts_layer_cost){0};
    out->fwd_s = gemm + loss_fwd_s;
    out->bwd_s = gemm + wgrad + loss_bwd_s;
    out->wgrad_s = wgrad;
    out->model_flops = out->hw_flops = 3.0 * 2.0 * (g->m * g->n * g->k * g->count + p->m * p->n * p->k * p->count);
    /* fp32 logits and the 16-bit input the head keeps (Korthikanti 2022, extra terms 4·s·b·v/t),
     * per prediction */
    out->act_bytes = g->count * (4.0 * g->m * g->n + 2.0 * g->m * g->k * (sh->sp ? 1.0 / sh->tp : 1.0) *
                                                         pb->train.activation_scale);
}

void ts_embed_cost_of(const ts_problem *pb, const ts_shard *sh, ts_layer_cost *out) {
    double T = (double)sh->mbs * pb->train.seq / sh->cp;
    double h = (double)pb->model.hidden;
    double rep = sh->sp ? 1.0 / sh->tp : 1.0;
    ts_edge_recipe e;
    ts_edge_recipe_of(pb, sh, &e);
    *out = (ts_layer_cost){0};
    out->fwd_s = ts_memory_s(&pb->sys, e.embed_bytes, 1) * pb->compute_scale;
    out->bwd_s = out->fwd_s;
    /* Vocab-parallel embedding ends in an all-reduce (reduce-scatter under SP) over TP. */
    if (sh->tp > 1) {
        ts_link link = ts_group_link(&pb->sys, 1, sh->tp);
        out->tp_s = ts_coll_s(&pb->sys, sh->sp ? TS_COLL_REDUCE_SCATTER : TS_COLL_ALLREDUCE, sh->tp,
                              e.embed_tp_bytes, link) * (1.0 - pb->sys.tp_comm_overlap);
        out->tp_split_w_s = out->tp_s;
    }
    /* Korthikanti 2022 extra term p·s·b·h/t: the embedding's dropout mask, 1 byte each. */
    out->act_bytes = pb->model.dropout ? T * h * rep * pb->train.activation_scale : 0.0;
}
