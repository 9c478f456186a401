/* The step-program builder (see program.h).
 *
 * For each pipeline stage it walks the schedule's slot order (program/schedule.h) and expands
 * every slot into ops, instantiating the layer recipe (program/recipe.h) that the planner's
 * closed form also prices, so the two cost the same work: T = mbs·seq/cp tokens per rank, h
 * hidden, t TP, r = 1/t under SP else 1.
 *
 *   forward of a layer   NORM1 (norm, bias-dropout-add, rotary) [SP: all-gather] QKV ATTN
 *                        [CP: the ring beside ATTN, or its collectives around it] PROJ, TP all-reduce (SP:
 *                        reduce-scatter) of T·h, NORM2 [SP: all-gather] FC1 ACT FC2, TP
 *                        all-reduce / reduce-scatter; MoE: ROUTER, EP all-to-all DISPATCH,
 *                        EXPERT_FC1 ACT FC2 (all local experts in one op), shared experts as
 *                        FC1/ACT/FC2, all-to-all COMBINE.
 *   backward of a layer  the same in reverse: input-gradient GEMMs, then the block's TP
 *                        collective, which the weight-gradient GEMMs of the block overlap
 *                        (Megatron's async TP all-reduce); under ZB-H1 the weight-gradient GEMMs
 *                        move to W slots. Full recompute replays the layer's forward first;
 *                        selective replays ATTN.
 *   pipeline             RECV before a chunk, SEND after it: 2·T·h/t bytes (scatter/gather).
 *   data parallel        ZeRO 0/1: gradient buckets (train.bucket_bytes) reduced over DP×CP on
 *                        the DP stream once the last micro-batch's gradients of their layers
 *                        exist (all-reduce; reduce-scatter under ZeRO-1, whose parameter
 *                        all-gather is issued at the start of the step and awaited by the first
 *                        forward of the bucket's layers, as Megatron's overlap_param_gather);
 *                        ZeRO-2 reduce-scatters every micro-batch; ZeRO-3 gathers each layer's
 *                        parameters before its forward and backward and reduce-scatters its
 *                        gradients after. Expert parameters and gradients go over the EDP
 *                        group, each MoE layer's experts in collectives of their own.
 *   optimizer            28 bytes per updated parameter, after the reductions.
 *   grad-accum           on stacks that accumulate gradients apart from the weight-gradient GEMMs
 *                        (models/stack.h grad_accum_bytes), after each chunk's backward of a
 *                        micro-batch (its W under a split W): a memory-bound pass over the chunk's
 *                        gradients, grad_accum_bytes each
 *   amax-reduce          FP8 with delayed scaling: at the end of each chunk's forward (before
 *                        the send or the head) and of its backward (before grad-accum and the
 *                        send), Transformer Engine's amax all-reduce, over TP then DP×CP, on the
 *                        compute stream (amax_reduce)
 *   zero-grad            the step's first op: a memory-bound pass writing the gradients this rank
 *                        accumulates into (Megatron's zero_grad_buffer at the start of train_step;
 *                        the executor's tr_store_zero_grads): every gradient of the stage, or under
 *                        ZeRO-2/3 this rank's shard (the one-layer buffers are zeroed as they are
 *                        reduced). */
#include "program/program.h"

#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "program/data.h"
#include "program/recipe.h"
#include "program/schedule.h"

const char *const ts_op_kind_names[] = {"gemm", "attention", "elementwise", "optimizer",
                                        "collective", "send", "recv", NULL};
const char *const ts_phase_names[] = {"fwd", "bwd", "wgrad", "recompute", "step", NULL};
const char *const ts_stream_names[] = {"compute", "tp-comm", "dp-comm", "pp-send", "pp-recv", "ep-comm", NULL};
const char *const ts_part_names[] = {
    "embed", "norm1", "qkv", "attn", "proj", "norm2", "fc1", "act", "fc2", "router", "dispatch",
    "expert-fc1", "expert-act", "expert-fc2", "combine", "head", "loss", "tp-attn", "tp-mlp",
    "sp-gather-attn", "sp-gather-mlp", "cp-ring", "tp-embed", "pp-act", "pp-grad", "grad-reduce",
    "param-gather", "optimizer", "mirror-grad", "zero-grad", "grad-accum", "amax-reduce", NULL};

#define NO_OP UINT32_MAX

/* A block's GEMMs in the order the kernels run them (forward shapes, program/recipe.h); run
 * forward (m×k·k×n), for the input gradient (m×n·n×k) or the weight gradient (k×m·m×n): the same
 * FLOPs. */
#define MAX_BLOCK_GEMMS 8

typedef struct {
    ts_gemm_shape g[MAX_BLOCK_GEMMS];
    int n;
} gemm_list;

/* Sizes shared by every op of a stage, and the layer recipe (dense, MoE) its ops instantiate. */
typedef struct {
    const ts_problem *pb;
    const ts_layout *l;
    const ts_program_opts *opts;
    ts_stage_program *sp;
    int stage;
    int flash;
    ts_attn_recipe attn;
    ts_mlp_recipe mlp[2];   /* dense, MoE */
    ts_edge_recipe edge;
    gemm_list qkv, proj;    /* the attention block's GEMMs */
    gemm_list qkv_up;       /* MLA: of qkv, those recompute module mla_up_proj redoes */
    gemm_list fc1[2], fc2[2]; /* the MLP block's h→f and f→h sides, dense and MoE */
    gemm_list router, experts_in; /* MoE's fc1 split at the EP dispatch */
    gemm_list routed_in, routed_out, shared_in, shared_out; /* the routed and the shared experts'
                                                               GEMMs apart (shared-expert overlap) */
    gemm_list head;           /* the LM head's GEMM */
    int oom;       /* an allocation failed or the ops reached max_ops (recorded in the error); the
                    * build is abandoned */
    int64_t ops_before; /* ops of the stages built before this one */
    int pairs;     /* F&B pairs emitted (their ops' tag alternates) */
} builder;

static int64_t max_ops = TS_PROGRAM_DEFAULT_MAX_OPS;
void ts_program_set_max_ops(int64_t n) { max_ops = n; }
int64_t ts_program_max_ops(void) { return max_ops; }

/* Fewest ops one layer adds per micro-batch: the forward and backward of its attention and MLP
 * blocks come to 16 in the smallest case (`sim --model tiny --gpus 4 --global-batch 64 --fix
 * pp=1,mbs=1,recompute=none --dump-program`: 1393 ops for 16 micro-batches × 4 layers, 21.8 per
 * layer with the embedding, head and optimizer; TP, SP, PP, recompute and MoE only add ops). */
#define MIN_OPS_PER_LAYER_PASS 16

/* Refuses a program estimated over the limit before anything is allocated. */
static ts_status check_size(const ts_problem *pb, const ts_layout *l) {
    int64_t layers = pb->model.layers + pb->model.mtp_layers, est = INT64_MAX, f[] = {l->microbatches, layers, MIN_OPS_PER_LAYER_PASS};
    if (ts_mul_i64(f, 3, &est) && est <= max_ops) return TS_OK;
    return TS_FAIL(TS_ERR_INPUT, "the step program would hold at least %lld ops (%d micro-batches × %lld layers × %d), "
                   "over the limit of %lld (--max-ops raises it)", (long long)est, l->microbatches,
                   (long long)layers, MIN_OPS_PER_LAYER_PASS, (long long)max_ops);
}

/* Room for one more op and its dependencies; on failure records the error and sets b->oom. */
static int grow(builder *b) {
    ts_stage_program *sp = b->sp;
    if (b->oom) return 0;
    if (b->ops_before + sp->n_ops >= max_ops) {
        TS_FAIL(TS_ERR_INPUT, "the step program reached the limit of %lld ops at stage %d (--max-ops raises it)",
                (long long)max_ops, b->stage);
        b->oom = 1;
        return 0;
    }
    if (sp->n_ops == sp->cap_ops) {
        int cap = sp->cap_ops ? 2 * sp->cap_ops : 1024;
        ts_op *ops = realloc(sp->ops, (size_t)cap * sizeof *ops);
        if (ops == NULL) goto fail;
        sp->ops = ops;
        sp->cap_ops = cap;
    }
    if (sp->n_deps + 4 > sp->cap_deps) {
        int cap = sp->cap_deps ? 2 * sp->cap_deps : 2048;
        uint32_t *deps = realloc(sp->deps, (size_t)cap * sizeof *deps);
        if (deps == NULL) goto fail;
        sp->deps = deps;
        sp->cap_deps = cap;
    }
    return 1;
fail:
    TS_FAIL(TS_ERR_NOMEM, "out of memory building the program of stage %d", b->stage);
    b->oom = 1;
    return 0;
}

/* The op being emitted: its context (phase, layer, micro-batch, chunk). */
typedef struct {
    int phase, layer, mb, chunk;
} ctx;

/* Appends an op with up to three dependencies (NO_OP entries ignored); returns its index, or
 * NO_OP when out of memory (the error is recorded). */
static uint32_t emit(builder *b, const ctx *c, ts_op op, uint32_t d0, uint32_t d1, uint32_t d2) {
    if (!grow(b)) return NO_OP;
    ts_stage_program *sp = b->sp;
    op.phase = (uint8_t)c->phase;
    op.layer = c->layer;
    op.mb = c->mb;
    if (op.kind != TS_OP_SEND && op.kind != TS_OP_RECV) op.chunk = (int32_t)c->chunk;
    op.dep0 = (uint32_t)sp->n_deps;
    op.ndeps = 0;
    uint32_t d[3] = {d0, d1, d2};
    for (int i = 0; i < 3; i++)
        if (d[i] != NO_OP) {
            sp->deps[sp->n_deps++] = d[i];
            op.ndeps++;
        }
    sp->ops[sp->n_ops] = op;
    return (uint32_t)sp->n_ops++;
}

static uint32_t gemm_after(builder *b, const ctx *c, uint32_t dep, int part, double m, double n,
                           double k, double count) {
    ts_op op = {.kind = TS_OP_GEMM, .stream = TS_STREAM_COMPUTE, .part = (uint8_t)part,
                .m = m, .n = n, .k = k, .flops = count * 2.0 * m * n * k, .peer = -1};
    return emit(b, c, op, dep, NO_OP, NO_OP);
}

static uint32_t elementwise2(builder *b, const ctx *c, int part, double bytes, uint32_t d0, uint32_t d1) {
    ts_op op = {.kind = TS_OP_ELEMENTWISE, .stream = TS_STREAM_COMPUTE, .part = (uint8_t)part,
                .bytes = bytes, .peer = -1};
    return emit(b, c, op, d0, d1, NO_OP);
}

static uint32_t elementwise(builder *b, const ctx *c, int part, double bytes, uint32_t dep) {
    return elementwise2(b, c, part, bytes, dep, NO_OP);
}

static uint32_t coll(builder *b, const ctx *c, int part, int stream, ts_group g, ts_coll kind,
                     double bytes, uint32_t dep) {
    if (ts_group_size(b->l, g) <= 1) return NO_OP;
    ts_op op = {.kind = TS_OP_COLL, .stream = (uint8_t)stream, .part = (uint8_t)part,
                .group = (uint8_t)g, .coll = (uint8_t)kind, .bytes = bytes, .peer = -1};
    return emit(b, c, op, dep, NO_OP, NO_OP);
}

/* The TP collective closing a block: all-reduce, or reduce-scatter under SP. */
static uint32_t tp_close(builder *b, const ctx *c, int part, uint32_t dep) {
    return coll(b, c, part, TS_STREAM_TP, TS_GROUP_TP,
                b->l->sp ? TS_COLL_REDUCE_SCATTER : TS_COLL_ALLREDUCE, b->mlp[0].tp_bytes, dep);
}

/* Under SP, the all-gather opening a block. */
static uint32_t sp_open(builder *b, const ctx *c, int part, uint32_t dep) {
    if (!b->l->sp) return NO_OP;
    return coll(b, c, part, TS_STREAM_TP, TS_GROUP_TP, TS_COLL_ALLGATHER, b->mlp[0].tp_bytes, dep);
}

/* One EP collective (dispatch or combine; program/recipe_moe.c): toward the experts (the forward
 * dispatch, the backward combine's output gradients) or back from them. */
static uint32_t ep_a2a(builder *b, const ctx *c, int part, uint32_t dep) {
    const ts_mlp_recipe *r = &b->mlp[1];
    int to = (part == TS_PART_DISPATCH) == (c->phase != TS_PHASE_BWD);
    /* Megatron-Core's combined 1F1B issues the dispatch and combine on a communication stream of
     * their own (model_chunk_schedule_plan.py: create_node(comm_stream, ...)), where the TP
     * collectives beside them do not queue */
    int stream = b->pb->train.moe_combined_1f1b ? TS_STREAM_EP : TS_STREAM_TP;
    return coll(b, c, part, stream, TS_GROUP_EP, to ? r->to_coll : r->from_coll, to ? r->to_bytes : r->from_bytes,
                dep);
}

/* The MLP block's opening SP all-gather and closing TP collective of its recipe's size (MoE
 * under SP: the routed copies' gather and reduce-scatter, program/recipe_moe.c), unless the MoE
 * block has none (experts apart from TP: recipe.h tp_block). */
static uint32_t mlp_sp_open(builder *b, const ctx *c, int moe, uint32_t dep) {
    if (!b->mlp[moe].tp_block || !b->l->sp) return NO_OP;
    return coll(b, c, TS_PART_SP_GATHER_MLP, TS_STREAM_TP, TS_GROUP_TP, TS_COLL_ALLGATHER, b->mlp[moe].tp_bytes, dep);
}
static uint32_t mlp_tp_close(builder *b, const ctx *c, int moe, uint32_t dep) {
    if (!b->mlp[moe].tp_block) return NO_OP;
    return coll(b, c, TS_PART_TP_MLP, TS_STREAM_TP, TS_GROUP_TP, b->l->sp ? TS_COLL_REDUCE_SCATTER : TS_COLL_ALLREDUCE,
                b->mlp[moe].tp_bytes, dep);
}

static void add_gemm(gemm_list *gl, const ts_gemm_shape *g) { gl->g[gl->n++] = *g; }

/* The recipe's blocks as the GEMM lists the ops run: fc1 is the h→f side (MoE: the router, the
 * local experts, the shared experts), `experts_in` the same without the router (the EP
 * dispatch sits between them). */
static void block_lists(builder *b) {
    for (int i = 0; i < b->attn.n_qkv; i++) {
        add_gemm(&b->qkv, &b->attn.qkv[i]);
        if (b->attn.qkv_up & (1u << i)) add_gemm(&b->qkv_up, &b->attn.qkv[i]);
    }
    add_gemm(&b->proj, &b->attn.proj);
    for (int moe = 0; moe < 2; moe++) {
        const ts_mlp_recipe *r = &b->mlp[moe];
        if (moe) add_gemm(&b->fc1[moe], &r->router);
        add_gemm(&b->fc1[moe], &r->fc1);
        add_gemm(&b->fc2[moe], &r->fc2);
        if (r->shared) {
            add_gemm(&b->fc1[moe], &r->shared_fc1);
            add_gemm(&b->fc2[moe], &r->shared_fc2);
        }
    }
    add_gemm(&b->head, &b->edge.head);
    if (b->edge.mtp_proj.count > 0) add_gemm(&b->head, &b->edge.mtp_proj);
    add_gemm(&b->router, &b->mlp[1].router);
    for (int i = 1; i < b->fc1[1].n; i++) add_gemm(&b->experts_in, &b->fc1[1].g[i]);
    add_gemm(&b->routed_in, &b->mlp[1].fc1);
    add_gemm(&b->routed_out, &b->mlp[1].fc2);
    if (b->mlp[1].shared) {
        add_gemm(&b->shared_in, &b->mlp[1].shared_fc1);
        add_gemm(&b->shared_out, &b->mlp[1].shared_fc2);
    }
}

/* Bytes of the layer's first norm pass (with rotary and the output gate), its second, and its
 * activation pass. */
static double norm1_bytes(const builder *b) {
    return b->mlp[0].norm_bytes + b->attn.rotary_bytes + b->attn.gate_bytes;
}
static double norm2_bytes(const builder *b) { return b->mlp[0].norm_bytes; }
static double act_pass_bytes(const builder *b, int moe) {
    return b->mlp[moe].act_bytes + (b->mlp[moe].shared ? b->mlp[moe].shared_act_bytes : 0);
}

/* FP8 casts (program/recipe.c) ride in those passes, as Transformer Engine fuses them into the
 * norm (LayerNormLinear) and the activation: forward, the attention block's inputs in the first
 * norm, the h→f inputs in the second, the f→h inputs in the activation; backward, the incoming
 * gradient's in the second norm's, the h→f outputs' in the activation's, the attention block's
 * in the first norm's. Zero unless fp8. */
static double norm1_cast(const builder *b) { return b->attn.fp8_cast_bytes[0] + b->attn.fp8_cast_bytes[1]; }
static double norm1_cast_bwd(const builder *b) { return b->attn.fp8_cast_bwd_bytes; }

static uint32_t run_gemms(builder *b, const ctx *c, const gemm_list *gl, int dir, uint32_t dep) {
    uint32_t last = NO_OP;
    for (int i = 0; i < gl->n; i++) {
        const ts_gemm_shape *g = &gl->g[i];
        uint32_t d = i == 0 ? dep : NO_OP; /* the block's first GEMM carries the dependency */
        uint32_t op = dir == 0   ? gemm_after(b, c, d, g->part, g->m, g->n, g->k, g->count)
                      : dir == 1 ? gemm_after(b, c, d, g->part, g->m, g->k, g->n, g->count)
                                 : gemm_after(b, c, d, g->part, g->n, g->k, g->m, g->count);
        if (op == NO_OP) return NO_OP;
        last = op;
    }
    return last;
}

/* The attention core: fused (flash) as one op of `flops_factor` times the forward's causal half,
 * or unfused as `passes` rounds of the score GEMMs and their element-wise pass; returns the last
 * op. */
static uint32_t attention_core(builder *b, const ctx *c, uint32_t dep, double flops_factor, int passes) {
    const ts_attn_recipe *r = &b->attn;
    if (b->flash) {
        ts_op op = {.kind = TS_OP_ATTENTION, .stream = TS_STREAM_COMPUTE, .part = TS_PART_ATTN,
                    .m = r->core_kernels, .flops = flops_factor * 0.5 * r->core_flops, .peer = -1};
        return emit(b, c, op, dep, NO_OP, NO_OP);
    }
    uint32_t attn = NO_OP;
    for (int i = 0; i < passes; i++) {
        run_gemms(b, c, &(gemm_list){.g = {r->scores_qk, r->scores_av}, .n = 2}, 0, i == 0 ? dep : NO_OP);
        attn = elementwise(b, c, TS_PART_ATTN, r->scores_bytes, NO_OP);
    }
    return attn;
}

/* One CP collective around the attention core (recipe.h ts_cp_pass: i = 0 before, 1 after). Ring
 * CP's carry their steps (m) and step bytes (n), and the ring beside the core, fused, the FLOPs of
 * the attention it overlaps, by which the planner prices it as it runs (planner/op_cost.h). */
static uint32_t cp_coll(builder *b, const ctx *c, const ts_cp_pass *p, int i, double flops, uint32_t dep) {
    const ts_cp_coll *x = &p->around[i];
    if (b->l->cp <= 1 || x->coll < 0) return NO_OP;
    ts_op op = {.kind = TS_OP_COLL, .stream = TS_STREAM_TP, .part = TS_PART_CP_RING, .group = TS_GROUP_CP,
                .coll = (uint8_t)x->coll, .bytes = x->bytes, .peer = -1};
    if (x->steps > 0) {
        op.m = x->steps;
        op.n = x->step_bytes;
        op.flops = i == 0 && b->flash ? flops : 0;
    }
    return emit(b, c, op, dep, NO_OP, NO_OP);
}

/* The attention core of one pass (`factor` times the forward's FLOPs, `passes` unfused rounds)
 * with CP's exchange around it: the ring beside the core, or a collective the core waits on
 * (all-gather, all-to-all), then one after the core. Returns the op the next GEMM waits on: the
 * one after, else the ring, else the core. */
static uint32_t attention_pass(builder *b, const ctx *c, const ts_cp_pass *p, uint32_t dep, double factor,
                               int passes) {
    int beside = p->around[0].steps > 0;
    uint32_t before = cp_coll(b, c, p, 0, factor * 0.5 * b->attn.core_flops, dep);
    uint32_t attn = attention_core(b, c, beside || before == NO_OP ? dep : before, factor, passes);
    uint32_t after = cp_coll(b, c, p, 1, 0, attn);
    if (after != NO_OP) return after;
    return beside && before != NO_OP ? before : attn;
}

/* The attention core forward (and CP's exchange around it); returns the op the next GEMM waits
 * on. */
static uint32_t attention_fwd(builder *b, const ctx *c, uint32_t dep) {
    return attention_pass(b, c, &b->attn.cp_fwd, dep, 1.0, 1);
}

/* The backward: 2.5× the fused forward (FlashAttention-2, Dao 2023 §3.1), or the unfused
 * forward twice. CP: ring, K and V come around again beside it with their gradients' accumulator,
 * which takes one hop home after it; all-gather, K and V gathered again before it and dK, dV
 * reduce-scattered after it; a2a, dO in and dQ, dK, dV out. */
static uint32_t attention_bwd(builder *b, const ctx *c, uint32_t dep) {
    return attention_pass(b, c, &b->attn.cp_bwd, dep, 2.5, 2);
}

/* Megatron-Core's --moe-shared-expert-overlap (moe/shared_experts.py, token_dispatcher.py): the
 * shared experts run on a stream of their own, their FC1 and activation while the dispatch's
 * all-to-all is in flight, their FC2 while the combine's is; here they are ordered on the
 * computation stream so that the EP collective runs beside them. */
static int shared_overlap(const builder *b, int moe) {
    return moe && b->l->ep > 1 && b->mlp[1].shared && b->pb->train.moe_shared_expert_overlap;
}

/* The MoE block's forward from the dispatch to the combine with the shared experts beside the
 * two all-to-alls: `in` the block's input, `disp` the dispatch. Returns the combine. */
static uint32_t shared_overlap_fwd(builder *b, const ctx *c, uint32_t in, uint32_t disp, uint32_t *shared_last) {
    const ts_mlp_recipe *r = &b->mlp[1];
    uint32_t s = run_gemms(b, c, &b->shared_in, 0, in);
    s = elementwise(b, c, TS_PART_ACT, r->shared_act_bytes, s);
    uint32_t x = run_gemms(b, c, &b->routed_in, 0, disp);
    x = elementwise(b, c, TS_PART_ACT, r->act_bytes + r->copy_bytes + r->fp8_cast_bytes[1], x);
    x = run_gemms(b, c, &b->routed_out, 0, x);
    *shared_last = run_gemms(b, c, &b->shared_out, 0, s); /* beside the combine issued after it */
    return ep_a2a(b, c, TS_PART_COMBINE, x);
}

/* The same backward from the block's output gradient `out` (`gathered`: under SP, the shared
 * experts' gathered input, else NO_OP): the shared experts' FC2 and activation beside the
 * combine's all-to-all, their FC1 beside the dispatch's. Returns the router's input gradient. */
static uint32_t shared_overlap_bwd(builder *b, const ctx *c, uint32_t out, uint32_t gathered, uint32_t *shared_last) {
    const ts_mlp_recipe *r = &b->mlp[1];
    uint32_t comb = ep_a2a(b, c, TS_PART_COMBINE, out);
    uint32_t s = run_gemms(b, c, &b->shared_out, 1, gathered != NO_OP ? gathered : out);
    s = elementwise(b, c, TS_PART_ACT, 2.0 * r->shared_act_bytes, s);
    uint32_t x = run_gemms(b, c, &b->routed_out, 1, comb);
    x = elementwise(b, c, TS_PART_ACT, 2.0 * r->act_bytes + r->copy_bytes + r->fp8_cast_bwd_bytes[0], x);
    x = run_gemms(b, c, &b->routed_in, 1, x);
    uint32_t disp = ep_a2a(b, c, TS_PART_DISPATCH, x);
    *shared_last = run_gemms(b, c, &b->shared_in, 1, s);
    return run_gemms(b, c, &b->router, 1, disp);
}

/* Forward of one layer; its first op waits on `dep` and `dep2` (a RECV, a parameter gather).
 * Returns the op the next layer waits on (its TP collective or last compute op). */
static uint32_t mlp_block_fwd(builder *b, const ctx *c, int moe, uint32_t t, int norm);

static uint32_t layer_fwd(builder *b, const ctx *c, int moe, uint32_t dep, uint32_t dep2) {
    uint32_t x = elementwise2(b, c, TS_PART_NORM1, norm1_bytes(b) + norm1_cast(b), dep, dep2);
    uint32_t g = sp_open(b, c, TS_PART_SP_GATHER_ATTN, x);
    x = run_gemms(b, c, &b->qkv, 0, g);
    uint32_t a = attention_fwd(b, c, x);
    x = run_gemms(b, c, &b->proj, 0, a == x ? NO_OP : a);
    return mlp_block_fwd(b, c, moe, tp_close(b, c, TS_PART_TP_ATTN, x), 1);
}

/* The MLP (or MoE) block's forward from the attention block's end `t` (`norm`: its norm first;
 * else `t` is the norm's output, as recompute module moe takes it); returns its last op. */
static uint32_t mlp_block_fwd(builder *b, const ctx *c, int moe, uint32_t t, int norm) {
    uint32_t x = norm ? elementwise(b, c, TS_PART_NORM2, norm2_bytes(b) + b->mlp[moe].fp8_cast_bytes[0], t) : t;
    uint32_t g = mlp_sp_open(b, c, moe, x);
    int ep = moe && b->l->ep > 1;
    if (shared_overlap(b, moe)) {
        uint32_t in = g != NO_OP ? g : x, shared_last;
        uint32_t comb = shared_overlap_fwd(b, c, in, ep_a2a(b, c, TS_PART_DISPATCH, run_gemms(b, c, &b->router, 0, in)),
                                           &shared_last);
        /* the shared experts' output joins the combined tokens (token_dispatcher.py
         * combine_postprocess: output += shared_expert_output; its bytes stay with the layer's
         * element-wise passes, as without the overlap) */
        x = elementwise2(b, c, TS_PART_COMBINE, 0, comb, shared_last);
        t = mlp_tp_close(b, c, moe, x);
        return t != NO_OP ? t : x;
    }
    if (ep) {
        x = run_gemms(b, c, &b->router, 0, g);
        g = ep_a2a(b, c, TS_PART_DISPATCH, x);
    }
    x = run_gemms(b, c, ep ? &b->experts_in : &b->fc1[moe], 0, g);
    x = elementwise(b, c, TS_PART_ACT, act_pass_bytes(b, moe) + b->mlp[moe].copy_bytes + b->mlp[moe].fp8_cast_bytes[1],
                    NO_OP);
    x = run_gemms(b, c, &b->fc2[moe], 0, NO_OP);
    if (ep) x = ep_a2a(b, c, TS_PART_COMBINE, x);
    t = mlp_tp_close(b, c, moe, x);
    return t != NO_OP ? t : x;
}

/* With the experts apart from TP (etp < tp, under SP) the router is replicated over TP but sees
 * each rank's own rows: its weight gradient (E·h) is summed across TP after its weight-gradient
 * GEMM, as the executor does it (exec/ops_moe.h tr_moe_router_wgrad), per micro-batch.
 * Megatron-Core marks the router's weight `sequence_parallel` (moe/router.py) and sums it once per
 * step with the norms' in finalize_model_grads; per micro-batch it is m times that, E·h·4 bytes
 * each (DeepSeek-V3: 7.3 MB), small beside the step's EP traffic. */
static uint32_t router_tp_sum(builder *b, const ctx *c, int moe, uint32_t dep) {
    if (!moe || ts_layout_etp(b->l) >= b->l->tp) return NO_OP;
    double bytes = ts_grad_reduce_bytes(&b->pb->train) * (double)b->pb->model.moe.experts * (double)b->pb->model.hidden;
    return coll(b, c, TS_PART_ROUTER, TS_STREAM_TP, TS_GROUP_TP, TS_COLL_ALLREDUCE, bytes, dep);
}

/* The weight gradients of a block (`a` then `b_`), which run beside its closing collective. */
static uint32_t block_wgrad(builder *b, const ctx *c, const gemm_list *first, const gemm_list *second,
                            uint32_t dep) {
    ctx w = *c;
    w.phase = TS_PHASE_WGRAD;
    run_gemms(b, &w, first, 2, dep);
    return run_gemms(b, &w, second, 2, NO_OP);
}

/* Backward of one layer (input gradients; weight gradients too unless `split_w`); its first op
 * waits on `dep` and `dep2`. */
static uint32_t layer_bwd(builder *b, const ctx *c, int moe, int split_w, uint32_t dep, uint32_t dep2) {
    int ep = moe && b->l->ep > 1, disp = b->mlp[moe].tp_dispatcher;
    /* Under SP each block's saved input is all-gathered again for its weight gradients; that
     * gather and the block's closing collective run beside the GEMMs (Korthikanti et al. 2022
     * §4.2.2), so only the input-gradient GEMMs wait on the previous block. The MoE dispatcher's
     * gather and reduce-scatter (recipe.h tp_dispatcher) do not: the experts' GEMMs wait for the
     * gather (behind it on the TP stream when the combine's all-to-all is there), and their
     * weight gradients for the reduce-scatter, which Megatron-Core runs after them. */
    uint32_t x = elementwise2(b, c, TS_PART_NORM2, 2.0 * norm2_bytes(b) + b->mlp[moe].fp8_cast_bwd_bytes[1], dep, dep2);
    uint32_t g = mlp_sp_open(b, c, moe, x), shared_last = NO_OP;
    if (shared_overlap(b, moe)) {
        x = shared_overlap_bwd(b, c, x, g, &shared_last);
    } else {
        uint32_t in = ep ? ep_a2a(b, c, TS_PART_COMBINE, x) : NO_OP;
        x = run_gemms(b, c, &b->fc2[moe], 1, in != NO_OP || !disp ? in : g);
        x = elementwise(b, c, TS_PART_ACT,
                        2.0 * act_pass_bytes(b, moe) + b->mlp[moe].copy_bytes + b->mlp[moe].fp8_cast_bwd_bytes[0], NO_OP);
        if (ep) {
            x = run_gemms(b, c, &b->experts_in, 1, NO_OP);
            x = run_gemms(b, c, &b->router, 1, ep_a2a(b, c, TS_PART_DISPATCH, x));
        } else {
            x = run_gemms(b, c, &b->fc1[moe], 1, NO_OP);
        }
    }
    if (shared_last != NO_OP) x = elementwise2(b, c, TS_PART_ROUTER, 0, x, shared_last); /* both input gradients */
    uint32_t t = mlp_tp_close(b, c, moe, x);
    if (!split_w) {
        ctx w = *c;
        w.phase = TS_PHASE_WGRAD;
        router_tp_sum(b, &w, moe, block_wgrad(b, c, &b->fc2[moe], &b->fc1[moe], disp && t != NO_OP ? t : g));
    }
    x = elementwise(b, c, TS_PART_NORM1, 2.0 * norm1_bytes(b) + norm1_cast_bwd(b), t);
    g = sp_open(b, c, TS_PART_SP_GATHER_ATTN, x);
    x = run_gemms(b, c, &b->proj, 1, NO_OP);
    uint32_t a = attention_bwd(b, c, x);
    x = run_gemms(b, c, &b->qkv, 1, a == x ? NO_OP : a);
    t = tp_close(b, c, TS_PART_TP_ATTN, x);
    if (!split_w) x = block_wgrad(b, c, &b->proj, &b->qkv, g);
    return t != NO_OP ? t : x;
}

/* Weight gradients of one layer (ZB-H1's W). */
static uint32_t layer_wgrad(builder *b, const ctx *c, int moe) {
    run_gemms(b, c, &b->fc2[moe], 2, NO_OP);
    router_tp_sum(b, c, moe, run_gemms(b, c, &b->fc1[moe], 2, NO_OP));
    run_gemms(b, c, &b->proj, 2, NO_OP);
    return run_gemms(b, c, &b->qkv, 2, NO_OP);
}

/* Layers [first, first + count) of global chunk g, which runs model chunk c (DualPipe holds each
 * twice; program/schedule.h ts_chunk_model), layers past the model's last being the MTP module,
 * charged to the last chunk as MoE layers: the planner's even split, or the uneven one of the
 * options. The executor reads its layers from the program, so both honour it. */
static void chunk_layers(const ts_problem *pb, const ts_layout *l, const ts_program_opts *opts, int g, int *first,
                         int *count) {
    int n = ts_model_chunks(l);
    g = ts_chunk_model(l, g);
    if (opts && opts->chunk_layers) {
        *first = 0;
        for (int i = 0; i < g; i++) *first += opts->chunk_layers[i];
        *count = opts->chunk_layers[g];
    } else if (n == l->pp) {
        ts_even_split(pb->model.layers, l->pp, 1, g, first, count);
    } else {
        ts_even_split(pb->model.layers, l->pp, l->vpp, g, first, count);
    }
    if (g == n - 1) *count += pb->model.mtp_layers;
}

/* ZeRO-3's all-gathers of one layer's parameters: the shared ones over DP×CP, the experts' over
 * their own DP group (EDP), as Megatron FSDP shards expert parameters over the expert-data-parallel
 * group and the executor keeps them (exec/param_store.c); a group of one rank gathers nothing (its
 * segment is not sharded), so experts whose EDP group is one rank stay whole. Returns the last. */
static uint32_t param_gather(builder *b, const ctx *c, int layer) {
    double sh, ex;
    ts_layer_params_rank(b->pb, b->l->tp, b->l->ep, b->l->etp, layer, &sh, &ex);
    ctx at = *c;
    at.layer = layer;
    double wb = ts_weight_elem_bytes(b->pb);
    uint32_t last = coll(b, &at, TS_PART_PARAM_GATHER, TS_STREAM_DP, TS_GROUP_DPCP, TS_COLL_ALLGATHER, wb * sh, NO_OP);
    if (ex > 0) {
        uint32_t op = coll(b, &at, TS_PART_PARAM_GATHER, TS_STREAM_DP, TS_GROUP_EDP, TS_COLL_ALLGATHER, wb * ex, NO_OP);
        if (op != NO_OP) last = op;
    }
    return last;
}

/* Per-stage bookkeeping for data-parallel traffic. */
typedef struct {
    uint32_t *last_grad; /* (layers + mtp) op after which the layer's gradients are complete */
    uint32_t *gather;    /* (layers + mtp) ZeRO-1 parameter all-gather the first forward awaits */
} dp_state;

/* What every slot of a stage shares. */
typedef struct {
    const ts_schedule_info *si;
    dp_state *dp;
    int zero, dpc;          /* ZeRO stage; the DP×CP group that reduces gradients */
    int edp;                /* the experts' data-parallel group (ranks.h; > dpc apart from TP) */
    int skip;               /* no embedding, head and loss (ts_program_opts.skip_edges) */
    ts_recompute recompute; /* this stage's policy */
    double gb, wb;          /* gradient and weight bytes per parameter */
    double rb;              /* gradient bytes per parameter on the wire (ts_grad_reduce_bytes) */
    double amax_gemms;      /* FP8 delayed scaling: the stage's GEMMs whose amaxes are reduced */
} stage_ctx;

/* Whether the stage has data-parallel traffic: DP×CP, or the experts' EDP group alone (experts
 * apart from TP span the TP ranks, so dp·cp = 1 may still reduce them). */
static int dp_traffic(const stage_ctx *st) { return st->dpc > 1 || st->edp > 1; }

/* A pipeline transfer of chunk `g`'s activations or gradients to or from `peer`. */
static uint32_t p2p(builder *b, const ctx *c, int kind, int part, int peer, int g, uint32_t dep) {
    ts_op op = {.kind = (uint8_t)kind, .stream = (uint8_t)(kind == TS_OP_SEND ? TS_STREAM_PP_SEND : TS_STREAM_PP_RECV),
                .part = (uint8_t)part, .group = TS_GROUP_PP, .bytes = b->edge.p2p_bytes, .peer = peer,
                .chunk = (int32_t)g};
    return emit(b, c, op, dep, NO_OP, NO_OP);
}

/* ZeRO-1/2: parameter all-gathers at the start of the step, one per bucket in forward order,
 * over DP×CP; the experts' over their own DP group, one per MoE layer before its bucket's, as
 * Megatron-Core's DDP keeps expert parameters in buffers of the expert-data-parallel group (and
 * the executor shards them so, exec/param_store.c). */
static void param_gathers(builder *b, const stage_ctx *st) {
    const ts_layout *l = b->l;
    ctx c = {TS_PHASE_STEP, -1, -1, 0};
    for (int ch = 0; ch < l->vpp; ch++) {
        int first, count;
        chunk_layers(b->pb, l, b->opts, ts_chunk_global(l, b->stage, ch), &first, &count);
        double bucket = 0;
        uint32_t last = NO_OP; /* the DP stream runs its ops in order: a forward awaits the last */
        c.chunk = ch;
        for (int j = first; j < first + count; j++) {
            double sh, ex;
            ts_layer_params_rank(b->pb, l->tp, l->ep, l->etp, j, &sh, &ex);
            bucket += st->wb * sh;
            c.layer = j;
            uint32_t op = ex > 0 ? coll(b, &c, TS_PART_PARAM_GATHER, TS_STREAM_DP, TS_GROUP_EDP, TS_COLL_ALLGATHER,
                                        st->wb * ex, NO_OP)
                                 : NO_OP;
            if (op != NO_OP) last = op;
            if (bucket >= b->pb->train.bucket_bytes || j == first + count - 1) {
                op = coll(b, &c, TS_PART_PARAM_GATHER, TS_STREAM_DP, TS_GROUP_DPCP, TS_COLL_ALLGATHER, bucket, NO_OP);
                if (op != NO_OP) last = op;
                for (int k = j; k >= first && st->dp->gather[k] == NO_OP; k--) st->dp->gather[k] = last;
                bucket = 0;
            }
        }
    }
}

/* FP8 delayed scaling's amax reduction at the end of a chunk's forward or backward (recipe.c,
 * "Amax reductions"): every amax the rank holds (`amax_gemms` of the stage), all-reduced (MAX)
 * over TP×DP×CP, written as an all-reduce over TP then one over DP×CP (MAX is associative;
 * NCCL's tree for a group spanning nodes also runs within the node, then across), each left out
 * when its group has one member. On the compute stream, as TE runs it (async_op=False): the next
 * kernels wait for it. Returns the last op, or `dep` when there is none. */
static uint32_t amax_reduce(builder *b, const stage_ctx *st, const ctx *c, uint32_t dep) {
    if (st->amax_gemms <= 0) return dep;
    double bytes = ts_amax_reduce_bytes(st->amax_gemms, c->phase == TS_PHASE_FWD);
    uint32_t x = dep;
    static const ts_group groups[] = {TS_GROUP_TP, TS_GROUP_DPCP};
    for (int i = 0; i < 2; i++) {
        uint32_t op = coll(b, c, TS_PART_AMAX_REDUCE, TS_STREAM_COMPUTE, groups[i], TS_COLL_ALLREDUCE, bytes, x);
        if (op != NO_OP) x = op;
    }
    return x;
}

/* A forward slot of global chunk g (layers [first, first + count)). */
static void slot_forward(builder *b, const stage_ctx *st, const ts_slot *sl, int g, int first, int count) {
    const ts_layout *l = b->l;
    ctx c = {TS_PHASE_FWD, -1, sl->mb, sl->chunk};
    uint32_t x = NO_OP;
    if (!ts_chunk_opens(l, g)) {
        x = p2p(b, &c, TS_OP_RECV, TS_PART_PP_ACT, ts_chunk_stage(l, g - 1), g - 1, NO_OP);
    } else if (!st->skip) {
        x = elementwise(b, &c, TS_PART_EMBED, b->edge.embed_bytes, NO_OP);
        uint32_t t = coll(b, &c, TS_PART_TP_EMBED, TS_STREAM_TP, TS_GROUP_TP,
                          l->sp ? TS_COLL_REDUCE_SCATTER : TS_COLL_ALLREDUCE, b->edge.embed_tp_bytes, x);
        if (t != NO_OP) x = t;
    }
    for (int j = first; j < first + count; j++) {
        c.layer = j;
        /* Parameters: ZeRO-3 gathers the layer's for every micro-batch; ZeRO-1's step-start
         * gather is awaited by the first micro-batch. */
        uint32_t params = sl->mb == 0 ? st->dp->gather[j] : NO_OP;
        if (st->zero == 3 && dp_traffic(st)) params = param_gather(b, &c, j);
        x = layer_fwd(b, &c, ts_recipe_layer_is_moe(b->pb, j), x, params);
    }
    c.layer = -1;
    x = amax_reduce(b, st, &c, x); /* the chunk's fp8_autocast exits before the send and the head */
    if (!ts_chunk_closes(l, g)) {
        p2p(b, &c, TS_OP_SEND, TS_PART_PP_ACT, ts_chunk_stage(l, g + 1), g, x);
    } else if (!st->skip) {
        run_gemms(b, &c, &b->head, 0, NO_OP);
        elementwise(b, &c, TS_PART_LOSS, b->edge.loss_fwd_bytes, NO_OP);
    }
}

/* recompute=selective: what the problem's recompute modules redo before the layer's backward
 * (program/problem.h ts_recompute_module), op for op as planner/layer.c prices it; returns the
 * last op, or `dep` when none runs. */
static uint32_t selective_recompute(builder *b, const ctx *c, int moe, uint32_t dep) {
    unsigned rm = b->pb->train.recompute_modules;
    const ts_mlp_recipe *r = &b->mlp[moe];
    int dense_mlp = !moe && (rm & TS_RCM_BIT(TS_RCM_MLP)), whole_moe = moe && (rm & TS_RCM_BIT(TS_RCM_MOE));
    uint32_t x = dep;
    if (rm & TS_RCM_BIT(TS_RCM_LAYERNORM)) { /* the dense MLP block rebuilds the second itself */
        x = elementwise(b, c, TS_PART_NORM1, r->norm_bytes, x);
        if (!dense_mlp) x = elementwise(b, c, TS_PART_NORM2, r->norm_bytes, x);
    }
    if ((rm & TS_RCM_BIT(TS_RCM_MLA_UP_PROJ)) && b->qkv_up.n > 0) x = run_gemms(b, c, &b->qkv_up, 0, x);
    if (rm & TS_RCM_BIT(TS_RCM_CORE_ATTN)) x = attention_fwd(b, c, x);
    if (dense_mlp || whole_moe) x = mlp_block_fwd(b, c, moe, x, dense_mlp);
    if (moe && !whole_moe && (rm & TS_RCM_BIT(TS_RCM_MOE_ACT)))
        x = elementwise(b, c, TS_PART_ACT, r->act_bytes - r->permute_bytes, x);
    if (moe && !whole_moe && r->shared && (rm & TS_RCM_BIT(TS_RCM_SHARED_EXPERTS))) {
        x = run_gemms(b, c, &b->shared_in, 0, x);
        x = elementwise(b, c, TS_PART_ACT, r->shared_act_bytes, x);
        x = run_gemms(b, c, &b->shared_out, 0, x);
    }
    return x;
}

/* The backward of one layer in a backward slot: its recompute first, then input (and, unless
 * W is apart, weight) gradients, then ZeRO-2/3's reduce-scatter of them. */
static uint32_t slot_layer_backward(builder *b, const stage_ctx *st, const ctx *c, int j, int split_w, uint32_t x,
                                    uint32_t params) {
    int moe = ts_recipe_layer_is_moe(b->pb, j);
    uint32_t dep = x;
    ctx r = *c;
    r.phase = TS_PHASE_RECOMPUTE;
    if (st->recompute == TS_RECOMPUTE_FULL) {
        dep = layer_fwd(b, &r, moe, dep, params);
        params = NO_OP;
    } else if (st->recompute == TS_RECOMPUTE_SELECTIVE) {
        dep = selective_recompute(b, &r, moe, dep);
    }
    x = layer_bwd(b, c, moe, split_w, dep, params);
    if (!split_w) st->dp->last_grad[j] = x;
    if (st->zero >= 2 && dp_traffic(st) && !split_w) {
        double sh, ex;
        ts_layer_params_rank(b->pb, b->l->tp, b->l->ep, b->l->etp, j, &sh, &ex);
        coll(b, c, TS_PART_GRAD_REDUCE, TS_STREAM_DP, TS_GROUP_DPCP, TS_COLL_REDUCE_SCATTER, st->rb * sh, x);
        if (ex > 0) coll(b, c, TS_PART_GRAD_REDUCE, TS_STREAM_DP, TS_GROUP_EDP, TS_COLL_REDUCE_SCATTER, st->rb * ex, x);
    }
    return x;
}

static void chunk_params(builder *b, int g, double *shared, double *experts);

/* The chunk's gradients accumulated after its weight gradients of micro-batch `mb` (`dep`), on
 * stacks that do it in a pass of their own: DeepSpeed's BF16_Optimizer converts each bf16
 * gradient to fp32 and adds it into an fp32 copy after every micro-batch (runtime/bf16_optimizer.py,
 * called by the pipeline engine after each backward); Megatron-Core accumulates inside the
 * weight-gradient GEMM (gradient_accumulation_fusion) and has none. Every gradient of the chunk,
 * under ZeRO-2/3 too. Returns the op, or `dep` when the stack has none. */
static uint32_t grad_accum(builder *b, const ts_slot *sl, int g, uint32_t dep) {
    double per = b->pb->train.stack.grad_accum_bytes;
    if (per <= 0 || dep == NO_OP) return dep;
    double sh, ex;
    chunk_params(b, g, &sh, &ex);
    ctx c = {TS_PHASE_BWD, -1, sl->mb, sl->chunk};
    ts_op op = {.kind = TS_OP_ELEMENTWISE, .stream = TS_STREAM_COMPUTE, .part = TS_PART_GRAD_ACCUM,
                .bytes = per * (sh + ex), .peer = -1, .chunk = (int32_t)g};
    return emit(b, &c, op, dep, NO_OP, NO_OP);
}

/* A backward slot of global chunk g (`split_w`: input gradients only); returns its last op. */
static uint32_t slot_backward(builder *b, const stage_ctx *st, const ts_slot *sl, int g, int split_w, int first,
                              int count) {
    const ts_layout *l = b->l;
    ctx c = {TS_PHASE_BWD, -1, sl->mb, sl->chunk};
    uint32_t x = NO_OP;
    if (!ts_chunk_closes(l, g)) {
        x = p2p(b, &c, TS_OP_RECV, TS_PART_PP_GRAD, ts_chunk_stage(l, g + 1), g + 1, NO_OP);
    } else if (!st->skip) {
        x = elementwise(b, &c, TS_PART_LOSS, b->edge.loss_bwd_bytes, NO_OP);
        run_gemms(b, &c, &b->head, 1, NO_OP);
        if (!split_w) {
            ctx w = c;
            w.phase = TS_PHASE_WGRAD;
            x = run_gemms(b, &w, &b->head, 2, NO_OP);
        }
    }
    /* ZeRO-3 gathers each layer's parameters one layer ahead, so the gather of the next layer
     * does not queue behind this layer's gradient reduce-scatter on the DP stream. */
    int zero3 = st->zero == 3 && dp_traffic(st);
    uint32_t next_params = zero3 ? param_gather(b, &c, first + count - 1) : NO_OP;
    for (int j = first + count - 1; j >= first; j--) {
        c.layer = j;
        uint32_t params = next_params;
        if (zero3 && j > first) next_params = param_gather(b, &c, j - 1);
        x = slot_layer_backward(b, st, &c, j, split_w, x, params);
    }
    c.layer = -1;
    /* after the backward of the chunk's first FP8 module (its first layer's QKV) */
    x = amax_reduce(b, st, &c, x);
    /* accumulated before the gradient goes upstream: the pipeline engine accumulates at the end of
     * its backward instruction, before SendGrad */
    if (!split_w) x = grad_accum(b, sl, g, x);
    if (!ts_chunk_opens(l, g)) {
        p2p(b, &c, TS_OP_SEND, TS_PART_PP_GRAD, ts_chunk_stage(l, g - 1), g, x);
    } else if (!st->skip) {
        x = elementwise(b, &c, TS_PART_EMBED, b->edge.embed_bytes, x);
    }
    return x;
}

/* A weight-gradient slot (ZB-H1's W) of global chunk g; returns its last op. */
static uint32_t slot_wgrad(builder *b, const stage_ctx *st, const ts_slot *sl, int g, int first, int count) {
    ctx c = {TS_PHASE_WGRAD, -1, sl->mb, sl->chunk};
    uint32_t x = NO_OP;
    if (ts_chunk_closes(b->l, g) && !st->skip) x = run_gemms(b, &c, &b->head, 2, NO_OP);
    for (int j = first + count - 1; j >= first; j--) {
        c.layer = j;
        x = layer_wgrad(b, &c, ts_recipe_layer_is_moe(b->pb, j));
        st->dp->last_grad[j] = x;
    }
    return x;
}

/* Gradient reduction (ZeRO 0/1): buckets in backward order, each once the last gradients of its
 * layers exist; experts over the EDP group. Returns the last reduction. */
static uint32_t grad_reductions(builder *b, const stage_ctx *st) {
    const ts_layout *l = b->l;
    ctx c = {TS_PHASE_STEP, -1, -1, 0};
    uint32_t reduce_last = NO_OP;
    ts_coll red = st->zero == 0 ? TS_COLL_ALLREDUCE : TS_COLL_REDUCE_SCATTER;
    for (int ch = l->vpp - 1; ch >= 0; ch--) {
        int first, count;
        chunk_layers(b->pb, l, b->opts, ts_chunk_global(l, b->stage, ch), &first, &count);
        double bucket = 0;
        c.chunk = ch;
        for (int j = first + count - 1; j >= first; j--) {
            double sh, ex;
            ts_layer_params_rank(b->pb, l->tp, l->ep, l->etp, j, &sh, &ex);
            bucket += st->rb * sh;
            c.layer = j;
            if (ex > 0)
                reduce_last = coll(b, &c, TS_PART_GRAD_REDUCE, TS_STREAM_DP, TS_GROUP_EDP, red, st->rb * ex,
                                   st->dp->last_grad[j]);
            if (bucket >= b->pb->train.bucket_bytes || j == first) {
                uint32_t op = coll(b, &c, TS_PART_GRAD_REDUCE, TS_STREAM_DP, TS_GROUP_DPCP, red, bucket,
                                   st->dp->last_grad[j]);
                if (op != NO_OP) reduce_last = op;
                bucket = 0;
            }
        }
    }
    return reduce_last;
}

/* The optimizer: 24 bytes of Adam state plus a gradient and a weight per updated parameter,
 * after the reductions and the last weight gradients. */
static void optimizer(builder *b, const stage_ctx *st, uint32_t reduce_last, uint32_t last_w) {
    const ts_layout *l = b->l;
    ctx c = {TS_PHASE_STEP, -1, -1, 0};
    double updated = 0;
    for (int ch = 0; ch < l->vpp; ch++) {
        int first, count;
        chunk_layers(b->pb, l, b->opts, ts_chunk_global(l, b->stage, ch), &first, &count);
        for (int j = first; j < first + count; j++) {
            double sh, ex;
            ts_layer_params_rank(b->pb, l->tp, l->ep, l->etp, j, &sh, &ex);
            updated += st->zero >= 1 ? sh / st->dpc + ex / st->edp : sh + ex;
        }
    }
    ts_op opt = {.kind = TS_OP_OPTIMIZER, .stream = TS_STREAM_COMPUTE, .part = TS_PART_OPTIMIZER,
                 .bytes = (24.0 + st->gb + st->wb) * updated, .peer = -1};
    emit(b, &c, opt, reduce_last, last_w, NO_OP);
}

/* Adds dependency `dep` to op `i` (its list moves to the end of the stage's dependencies). */
static void add_dep(builder *b, uint32_t i, uint32_t dep) {
    ts_stage_program *sp = b->sp;
    ts_op *op = &sp->ops[i];
    if (dep == NO_OP || b->oom) return;
    if (sp->n_deps + (int)op->ndeps + 1 > sp->cap_deps) {
        int cap = 2 * sp->cap_deps + (int)op->ndeps + 1;
        uint32_t *deps = realloc(sp->deps, (size_t)cap * sizeof *deps);
        if (deps == NULL) {
            TS_FAIL(TS_ERR_NOMEM, "out of memory building the program of stage %d", b->stage);
            b->oom = 1;
            return;
        }
        sp->deps = deps;
        sp->cap_deps = cap;
    }
    memmove(sp->deps + sp->n_deps, sp->deps + op->dep0, op->ndeps * sizeof *sp->deps);
    op->dep0 = (uint32_t)sp->n_deps;
    sp->n_deps += (int)op->ndeps;
    sp->deps[sp->n_deps++] = dep;
    op->ndeps++;
}

/* The first op of kind `kind` on stream `stream` in [from, to), or NO_OP. */
static uint32_t find_op(const ts_stage_program *sp, uint32_t from, uint32_t to, int kind, int stream) {
    for (uint32_t i = from; i < to; i++)
        if (sp->ops[i].kind == kind && sp->ops[i].stream == stream) return i;
    return NO_OP;
}

/* The pair is one unit, as DualPipe's _forward_backward_chunk runs it: both inputs are received
 * before either computes, both outputs sent after both computed. */
static void pair_lockstep(builder *b, uint32_t start, uint32_t mid) {
    ts_stage_program *sp = b->sp;
    uint32_t end = (uint32_t)sp->n_ops, last = NO_OP;
    for (uint32_t i = mid; i < end; i++)
        if (sp->ops[i].stream == TS_STREAM_COMPUTE) last = i;
    for (int k = TS_OP_GEMM; k <= TS_OP_ELEMENTWISE; k++) {
        uint32_t first = find_op(sp, start, mid, k, TS_STREAM_COMPUTE);
        if (first != NO_OP) {
            add_dep(b, first, find_op(sp, mid, end, TS_OP_RECV, TS_STREAM_PP_RECV));
            break;
        }
    }
    uint32_t send = find_op(sp, start, mid, TS_OP_SEND, TS_STREAM_PP_SEND);
    if (send != NO_OP) add_dep(b, send, last);
}

/* Whether every dependency of `op` at or after `start` has its place in the new order. */
static int deps_placed(const ts_stage_program *sp, const ts_op *op, uint32_t start, const uint32_t *pos) {
    for (uint32_t d = 0; d < op->ndeps; d++) {
        uint32_t dep = sp->deps[op->dep0 + d];
        if (dep >= start && dep != NO_OP && pos[dep - start] == NO_OP) return 0;
    }
    return 1;
}

/* Where a paired side hands over to the other: DualPipe at every transfer or collective; Megatron-
 * Core's combined 1F1B at its EP dispatches and combines only (the TP collectives run inline). */
static int hands_over(const builder *b, const ts_op *op) {
    if (b->pb->train.moe_combined_1f1b) return op->kind == TS_OP_COLL && op->group == TS_GROUP_EP;
    return op->stream != TS_STREAM_COMPUTE;
}

/* An F&B pair: ops [start, mid) (a forward) and [mid, end) (a backward of another micro-batch)
 * are interleaved so that each one's communication runs beside the other's computation, as
 * DeepSeek-V3 §3.2.1 overlaps them: ops are taken from one until it hands over (hands_over; or
 * reaches an op whose dependencies are not yet placed: the forward's send, which waits for the
 * pair's end), then from the other. DualPipe starts with the forward; Megatron-Core's combined
 * 1F1B with the backward, whose combine runs beside the forward's attention, the forward's
 * dispatch beside the backward's expert GEMMs, and so on layer by layer
 * (model_chunk_schedule_plan.py TransformerLayerSchedulePlan.run). The two share no data, so each
 * keeps its own order; dependencies and the recorded gradient ops follow their ops. Returns `last`
 * renumbered. */
static uint32_t interleave_pair(builder *b, dp_state *dp, uint32_t start, uint32_t mid, uint32_t last) {
    ts_stage_program *sp = b->sp;
    pair_lockstep(b, start, mid);
    uint32_t end = (uint32_t)sp->n_ops, n = end - start;
    ts_op *tmp = malloc((size_t)n * sizeof *tmp);
    uint32_t *pos = malloc((size_t)n * sizeof *pos);
    if (!tmp || !pos || b->oom) {
        free(tmp), free(pos);
        if (!b->oom) TS_FAIL(TS_ERR_NOMEM, "out of memory pairing the slots of stage %d", b->stage);
        b->oom = 1;
        return last;
    }
    memcpy(tmp, sp->ops + start, (size_t)n * sizeof *tmp);
    for (uint32_t k = 0; k < n; k++) pos[k] = NO_OP;
    uint32_t cur[2] = {start, mid}, lim[2] = {mid, end};
    int side = b->pb->train.moe_combined_1f1b ? 1 : 0;
    for (uint32_t k = 0; k < n; k++) {
        if (cur[side] == lim[side] || !deps_placed(sp, &tmp[cur[side] - start], start, pos)) side ^= 1;
        uint32_t old = cur[side]++;
        pos[old - start] = start + k;
        sp->ops[start + k] = tmp[old - start];
        sp->ops[start + k].pair = (uint8_t)(1 + b->pairs % 2);
        if (hands_over(b, &tmp[old - start]) && cur[side ^ 1] < lim[side ^ 1]) side ^= 1;
    }
    for (uint32_t k = start; k < end; k++)
        for (uint32_t d = 0; d < sp->ops[k].ndeps; d++) {
            uint32_t *dep = &sp->deps[sp->ops[k].dep0 + d];
            if (*dep >= start && *dep != NO_OP) *dep = pos[*dep - start];
        }
    for (int j = 0; j < b->pb->model.layers + b->pb->model.mtp_layers; j++)
        if (dp->last_grad[j] != NO_OP && dp->last_grad[j] >= start) dp->last_grad[j] = pos[dp->last_grad[j] - start];
    if (last != NO_OP && last >= start) last = pos[last - start];
    b->pairs++;
    free(tmp);
    free(pos);
    return last;
}

/* F&B pairs (ts_op.pair: DualPipe's, Megatron-Core's combined 1F1B) are issued interleaved so
 * that the simulator overlaps each one's communication with the other's computation; a CPU rank,
 * whose MPI calls block, gains nothing from that and its workspace holds one slot at a time, so
 * each side runs whole, first the one the pair opens with (DualPipe's forward; combined 1F1B's
 * backward, which frees its micro-batch's activations before the forward stores its own, as
 * Megatron-Core's layer-by-layer release keeps the peak at 1F1B's). The two touch different
 * micro-batches, so no data. */
ts_status ts_unpair_order(const ts_stage_program *sp, int32_t *order, int n) {
    int32_t *tmp = NULL;
    for (int k = 0; k < n;) {
        int tag = sp->ops[order[k]].pair, end = k + 1;
        if (tag == 0) {
            k++;
            continue;
        }
        while (end < n && sp->ops[order[end]].pair == tag) end++;
        if (tmp == NULL && (tmp = malloc((size_t)n * sizeof *tmp)) == NULL)
            return TS_FAIL(TS_ERR_NOMEM, "out of memory ordering %d ops", n);
        int m = 0, first_fwd = sp->ops[order[k]].phase == TS_PHASE_FWD;
        for (int side = 0; side < 2; side++)
            for (int i = k; i < end; i++)
                if ((sp->ops[order[i]].phase == TS_PHASE_FWD) == (side == 0 ? first_fwd : !first_fwd))
                    tmp[m++] = order[i];
        memcpy(order + k, tmp, (size_t)m * sizeof *tmp);
        k = end;
    }
    free(tmp);
    return TS_OK;
}

/* This rank's parameters of global chunk `g`: the layers' shared ones (with the embedding when the
 * chunk opens the model, the untied LM head when it closes it) and the experts'. */
static void chunk_params(builder *b, int g, double *shared, double *experts) {
    const ts_layout *l = b->l;
    int first, count;
    chunk_layers(b->pb, l, b->opts, g, &first, &count);
    *shared = *experts = 0;
    for (int j = first; j < first + count; j++) {
        double sh, ex;
        ts_layer_params_rank(b->pb, l->tp, l->ep, l->etp, j, &sh, &ex);
        *shared += sh;
        *experts += ex;
    }
    double edge = (double)b->pb->model.vocab * b->pb->model.hidden / l->tp;
    *shared += (ts_chunk_opens(l, g) ? edge : 0) + (ts_chunk_closes(l, g) && !b->pb->model.tied_embeddings ? edge : 0);
}

/* The step's first op: the gradients this rank accumulates into, set to zero (Megatron-LM's
 * model.zero_grad_buffer() at the start of train_step, megatron/training/training.py; the
 * executor's tr_store_zero_grads). A memory-bound pass writing every gradient of the stage's
 * chunks, or under ZeRO-2/3 this rank's shard of them (the one-layer buffers the executor
 * reduces from are zeroed as they are reduced). */
static void zero_grads(builder *b, const stage_ctx *st) {
    const ts_layout *l = b->l;
    double held = 0;
    for (int ch = 0; ch < l->vpp; ch++) {
        double sh, ex;
        chunk_params(b, ts_chunk_global(l, b->stage, ch), &sh, &ex);
        held += st->zero >= 2 ? sh / st->dpc + ex / st->edp : sh + ex;
    }
    ctx c = {TS_PHASE_STEP, -1, -1, 0};
    ts_op op = {.kind = TS_OP_ELEMENTWISE, .stream = TS_STREAM_COMPUTE, .part = TS_PART_ZERO_GRAD,
                .bytes = st->gb * held, .peer = -1};
    emit(b, &c, op, NO_OP, NO_OP, NO_OP);
}

/* DualPipe keeps two copies of every chunk, on stage s and on p-1-s (DeepSeek's example sums the
 * two copies' gradients before the update, examples/example_dualpipe.py): each local chunk's
 * gradients go to the other copy's stage and that copy's come back, after the stage's last
 * weight gradients (`last_w`); the reductions and the optimizer then wait on the receive. Every
 * send is posted before the first receive (two stages may hold each other's copies). Returns the
 * last receive. */
static uint32_t mirror_grads(builder *b, const stage_ctx *st, uint32_t last_w) {
    const ts_layout *l = b->l;
    int n = ts_model_chunks(l);
    uint32_t recv = NO_OP;
    for (int k = 0; k < 2 * l->vpp; k++) {
        int ch = k % l->vpp, is_recv = k >= l->vpp;
        int g = ts_chunk_global(l, b->stage, ch), other = g < n ? g + n : g - n, first, count;
        chunk_layers(b->pb, l, b->opts, g, &first, &count);
        double sh, ex;
        chunk_params(b, g, &sh, &ex);
        double params = sh + ex;
        ctx c = {TS_PHASE_STEP, -1, -1, ch};
        int peer = ts_chunk_stage(l, other);
        ts_op op = {.kind = TS_OP_SEND, .stream = TS_STREAM_PP_SEND, .part = TS_PART_MIRROR_GRAD, .group = TS_GROUP_PP,
                    .bytes = st->gb * params, .peer = peer, .chunk = (int32_t)g};
        if (!is_recv) {
            emit(b, &c, op, last_w, NO_OP, NO_OP);
            continue;
        }
        op.kind = TS_OP_RECV, op.stream = TS_STREAM_PP_RECV, op.chunk = (int32_t)other;
        recv = emit(b, &c, op, NO_OP, NO_OP, NO_OP);
        for (int j = first; j < first + count; j++) st->dp->last_grad[j] = recv;
    }
    return recv;
}

/* The ops of one slot of the order. Returns the slot's last weight-gradient op, or NO_OP. */
static uint32_t run_slot(builder *b, const stage_ctx *st, const ts_slot *sl) {
    int g = ts_chunk_global(b->l, b->stage, sl->chunk), first, count;
    chunk_layers(b->pb, b->l, b->opts, g, &first, &count);
    if (sl->kind == TS_SLOT_F) {
        slot_forward(b, st, sl, g, first, count);
        return NO_OP;
    }
    if (sl->kind == TS_SLOT_W) return grad_accum(b, sl, g, slot_wgrad(b, st, sl, g, first, count));
    int split_w = st->si->splits_w || sl->kind == TS_SLOT_BI;
    uint32_t x = slot_backward(b, st, sl, g, split_w, first, count);
    return split_w ? NO_OP : x;
}

/* The GEMMs of every layer the stage holds, in all its chunks, whose amaxes FP8 delayed scaling
 * reduces (TE's one buffer per rank: amax_reduce). */
static double stage_amax_gemms(builder *b) {
    const ts_layout *l = b->l;
    double n = 0;
    for (int ch = 0; ch < l->vpp; ch++) {
        int first, count;
        chunk_layers(b->pb, l, b->opts, ts_chunk_global(l, b->stage, ch), &first, &count);
        for (int j = first; j < first + count; j++)
            n += b->attn.amax_gemms + b->mlp[ts_recipe_layer_is_moe(b->pb, j)].amax_gemms;
    }
    return n;
}

static ts_status build_stage(builder *b, dp_state *dp) {
    const ts_problem *pb = b->pb;
    const ts_layout *l = b->l;
    int p = l->pp, v = l->vpp, m = l->microbatches, s = b->stage;
    stage_ctx st = {
        .si = &ts_schedules[l->schedule], .dp = dp, .zero = l->zero, .dpc = l->dp * l->cp,
        .edp = ts_group_size(l, TS_GROUP_EDP),
        .skip = b->opts && b->opts->skip_edges,
        .recompute = b->opts && b->opts->stage_recompute ? b->opts->stage_recompute[s] : l->recompute,
        .gb = pb->train.grad_bytes, .wb = ts_weight_elem_bytes(pb), .rb = ts_grad_reduce_bytes(&pb->train),
        .amax_gemms = stage_amax_gemms(b),
    };
    ts_slot *slots = malloc((size_t)3 * m * v * sizeof *slots);
    if (slots == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the schedule of stage %d", s);
    int n_slots = st.si->order(p, v, m, s, slots);
    if (pb->train.moe_combined_1f1b && (n_slots = ts_sched_combined_1f1b(slots, n_slots)) < 0) {
        free(slots);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for the combined 1F1B order of stage %d", s);
    }
    for (int i = 0; i < pb->model.layers + pb->model.mtp_layers; i++) dp->last_grad[i] = dp->gather[i] = NO_OP;

    if (!st.skip) zero_grads(b, &st);
    if ((st.zero == 1 || st.zero == 2) && dp_traffic(&st)) param_gathers(b, &st);
    uint32_t last_w = NO_OP;
    for (int i = 0; i < n_slots && !b->oom; i++) {
        uint32_t start = (uint32_t)b->sp->n_ops, x = run_slot(b, &st, &slots[i]);
        if (slots[i].pair && i + 1 < n_slots) {
            uint32_t mid = (uint32_t)b->sp->n_ops;
            x = run_slot(b, &st, &slots[++i]);
            if (!b->oom) x = interleave_pair(b, dp, start, mid, x);
        }
        if (x != NO_OP) last_w = x;
    }
    if (st.si->dual && !b->oom) last_w = mirror_grads(b, &st, last_w);
    uint32_t reduce_last = st.zero <= 1 && dp_traffic(&st) ? grad_reductions(b, &st) : NO_OP;
    optimizer(b, &st, reduce_last, last_w);
    free(slots);
    if (b->oom) return ts_error_status();
    return ts_stage_data_build(pb, l, s, b->sp);
}

ts_status ts_program_build(const ts_problem *pb, const ts_layout *in, const ts_program_opts *opts,
                           ts_program *out) {
    memset(out, 0, sizeof *out);
    char why[256], text[256];
    if (ts_layout_invalid_split(pb, in, opts && opts->chunk_layers, why, sizeof why)) {
        ts_layout_format(in, text, sizeof text);
        return TS_FAIL(TS_ERR_INPUT, "layout %s is not valid here: %s", text, why);
    }
    if (opts && opts->chunk_layers) {
        int sum = 0, V = in->pp * in->vpp;
        for (int g = 0; g < V; g++) {
            if (opts->chunk_layers[g] < 1)
                return TS_FAIL(TS_ERR_INPUT, "uneven stages: chunk %d holds %d layers, expected at least 1", g,
                               opts->chunk_layers[g]);
            sum += opts->chunk_layers[g];
        }
        if (sum != pb->model.layers)
            return TS_FAIL(TS_ERR_INPUT, "uneven stages hold %d layers, expected the model's %d", sum,
                           pb->model.layers);
    }
    out->layout = *in;
    out->layout.microbatches = (int)(pb->train.global_batch / ((long long)in->dp * in->mbs));
    out->pp = in->pp;
    TS_CHECK(check_size(pb, &out->layout));
    ts_status res = TS_OK;
    int n_layers = pb->model.layers + pb->model.mtp_layers;
    dp_state dp = {0};
    out->stages = calloc((size_t)in->pp, sizeof *out->stages);
    dp.last_grad = malloc((size_t)n_layers * sizeof *dp.last_grad);
    dp.gather = malloc((size_t)n_layers * sizeof *dp.gather);
    if (!out->stages || !dp.last_grad || !dp.gather) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory for the program of %d stages", in->pp);
        goto exit;
    }
    const ts_model *m = &pb->model;
    builder b = {
        .pb = pb, .l = &out->layout, .opts = opts,
        .flash = pb->train.flash_attention,
    };
    ts_shard sh = {.tp = in->tp, .cp = in->cp, .ep = in->ep, .sp = in->sp, .mbs = in->mbs, .recompute = in->recompute,
                   .etp = in->etp};
    ts_attn_recipe_of(pb, &sh, &b.attn);
    ts_mlp_recipe_of(pb, &sh, 0, &b.mlp[0]);
    if (m->moe.experts > 0) ts_mlp_recipe_of(pb, &sh, 1, &b.mlp[1]);
    else b.mlp[1] = b.mlp[0]; /* no MoE layer */
    ts_edge_recipe_of(pb, &sh, &b.edge);
    block_lists(&b);
    for (int s = 0; s < in->pp; s++) {
        b.stage = s;
        b.sp = &out->stages[s];
        TS_CHECK_GOTO(build_stage(&b, &dp), res, exit);
        out->total_ops += out->stages[s].n_ops;
        b.ops_before = out->total_ops;
    }
exit:
    free(dp.last_grad);
    free(dp.gather);
    if (res != TS_OK) ts_program_free(out);
    return res;
}

void ts_program_free(ts_program *p) {
    for (int s = 0; p->stages && s < p->pp; s++) {
        free(p->stages[s].ops);
        free(p->stages[s].deps);
        ts_stage_data_free(&p->stages[s]);
    }
    free(p->stages);
    memset(p, 0, sizeof *p);
}

const char *ts_op_label(const ts_op *op, char *buf, size_t cap) {
    char where[64] = "";
    if (op->layer >= 0 && op->mb >= 0)
        snprintf(where, sizeof where, " L%d mb%d c%d", op->layer, op->mb, op->chunk);
    else if (op->mb >= 0)
        snprintf(where, sizeof where, " mb%d c%d", op->mb, op->chunk);
    else if (op->layer >= 0)
        snprintf(where, sizeof where, " L%d", op->layer);
    snprintf(buf, cap, "%s%s %s", ts_phase_names[op->phase], where, ts_part_names[op->part]);
    return buf;
}

ts_status ts_program_dump(const ts_program *p, FILE *f) {
    char text[256];
    ts_layout_format(&p->layout, text, sizeof text);
    fprintf(f, "# step program: %s, %d micro-batches, %lld ops\n", text, p->layout.microbatches,
            (long long)p->total_ops);
    for (int s = 0; s < p->pp; s++) {
        const ts_stage_program *sp = &p->stages[s];
        fprintf(f, "# stage %d: %d ops\n", s, sp->n_ops);
        for (int i = 0; i < sp->n_ops; i++) {
            const ts_op *op = &sp->ops[i];
            char label[128];
            fprintf(f, "%d.%d %-34s %-11s %-8s", s, i, ts_op_label(op, label, sizeof label),
                    ts_op_kind_names[op->kind], ts_stream_names[op->stream]);
            switch (op->kind) {
            case TS_OP_GEMM:
                fprintf(f, " m=%.0f n=%.0f k=%.0f flops=%.4g", op->m, op->n, op->k, op->flops);
                break;
            case TS_OP_ATTENTION: fprintf(f, " flops=%.4g kernels=%.0f", op->flops, op->m); break;
            case TS_OP_COLL:
                fprintf(f, " %s %s bytes=%.4g", ts_coll_names[op->coll], ts_group_names[op->group], op->bytes);
                break;
            case TS_OP_SEND:
            case TS_OP_RECV:
                fprintf(f, " %s stage %d chunk %d bytes=%.4g", op->kind == TS_OP_SEND ? "to" : "from",
                        op->peer, op->chunk, op->bytes);
                break;
            default: fprintf(f, " bytes=%.4g", op->bytes); break;
            }
            if (op->ndeps) {
                fprintf(f, " after");
                for (uint32_t d = 0; d < op->ndeps; d++) fprintf(f, " %u", sp->deps[op->dep0 + d]);
            }
            if (fputc('\n', f) == EOF) return TS_FAIL(TS_ERR_IO, "write failed while dumping the program");
        }
    }
    return TS_OK;
}
