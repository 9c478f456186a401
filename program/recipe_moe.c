/* The routed experts of an MoE layer, written once (see recipe.h; the attention, the shared
 * experts and the dense MLP are in recipe.c).
 *
 * Experts (GShard; Megatron-Core MoE). The ep ranks of an EP group hold E/ep experts each. Each
 * rank routes R tokens, top_k copies of each: R = T/t under SP, T without. The experts' TP degree
 * etp is tp (the experts split like the dense MLP: the TP group shares its T tokens, each rank
 * runs 1/t of every expert) or 1 (Megatron-Core --expert-tensor-parallel-size 1: the EP group
 * spans TP ranks too, each routing its own T/t tokens to whole experts; program/ranks.h). A
 * local expert takes, balanced, (etp = tp: T, else R)·top_k·ep/E copies; every rank runs the
 * busiest rank's share, cf times that (models/model.h ts_moe_load_factor: the capacity, or the
 * imbalance of dropless routing), as the EP collectives wait for it.
 *
 * Dispatch and combine (program/problem.h ts_moe_dispatcher): alltoall and deepep send each
 * rank's R·top_k copies of h (an all-to-all of that buffer each way; where they cross the NIC,
 * planner/moe_cost.c); allgather gathers the EP group's tokens, ep·R·h, to every rank and
 * reduce-scatters the same back. The copies to the experts go FP8 when asked (DeepSeek-V3
 * §3.3.2: 1 byte per element plus an fp32 scale per 1×128 tile), the way back stays 16-bit.
 *
 * TP under SP (Megatron-Core's MoEAlltoAllTokenDispatcher): no all-gather before the router;
 * with etp = tp the copies received over EP are all-gathered over TP and reduce-scattered back,
 * T·top_k·cf·h at 16 bits each way (the recipe's MLP-block TP size), plus the shared experts'
 * own T·h. With etp = 1 only the shared experts have TP collectives. The dispatcher's gather and
 * reduce-scatter are autograd functions of their own (gather_from_sequence_parallel_region,
 * reduce_scatter_to_sequence_parallel_region in token_dispatcher.py), not a linear layer's
 * asynchronous collectives: in backward the experts' output gradients are gathered before their
 * GEMMs and their input gradients reduce-scattered after the experts' weight gradients, with
 * nothing beside them (tp_dispatcher; the shared experts' share, T of T·(top_k·cf + 1) tokens,
 * is priced with them).
 *
 * Permutation (Megatron-Core's moe_permute / moe_unpermute, fused or not, both memory-bound):
 * before the dispatch the R·top_k copies are gathered into expert order (read and write
 * R·top_k·h), after the combine each token's top_k copies are read and summed into one (read
 * R·top_k·h, write R·h): 2·R·h·(3·top_k + 1) bytes at 16 bits, charged with the experts'
 * activation pass (and twice in backward, as that pass is). With more than one local expert the
 * alltoall dispatcher reorders the copies it received from [EP rank][expert] to [expert][EP rank]
 * chunks after the dispatch and back before the combine (sort_chunks_by_idxs in Megatron-Core's
 * MoEAlltoAllTokenDispatcher, a copy of the rank's routed copies each time, read and written at
 * 16 bits), and SequentialMLP concatenates its experts' outputs (one more copy); a copy's
 * backward is one copy (copy_bytes, with the activation pass once each way). */
#include "program/recipe.h"

#include "models/coll.h"
#include "program/program.h"

int ts_shard_etp(const ts_shard *sh) { return sh->etp > 0 ? sh->etp : sh->tp; }

ts_moe_dispatcher ts_moe_dispatcher_of(const ts_problem *pb) {
    ts_moe_dispatcher d = pb->train.moe_dispatcher;
    if (d != TS_MOE_DISPATCH_AUTO) return d;
    const ts_moe *x = &pb->model.moe;
    return x->router_groups > 0 && x->router_group_topk > 0 ? TS_MOE_DISPATCH_DEEPEP : TS_MOE_DISPATCH_ALLTOALL;
}

double ts_moe_dispatch_elem_bytes(const ts_problem *pb) {
    int fp8 = pb->train.moe_fp8_dispatch ||
              (pb->train.dtype == TS_DTYPE_FP8 && ts_moe_dispatcher_of(pb) == TS_MOE_DISPATCH_DEEPEP);
    return fp8 ? 1.0 + 4.0 / 128.0 : 2.0;
}

void ts_moe_recipe_fill(const ts_problem *pb, const ts_shard *sh, double T, ts_mlp_recipe *out) {
    const ts_model *m = &pb->model;
    const ts_moe *x = &m->moe;
    double h = (double)m->hidden, k = x->top_k;
    int etp = ts_shard_etp(sh);
    double in_mats = m->activation == TS_ACT_SWIGLU ? 2 : 1, mats = in_mats + 1;
    double R = sh->sp ? T / sh->tp : T;        /* tokens this rank routes */
    double fed = etp == sh->tp ? T : R;        /* tokens its experts see from each EP rank */
    double cf = ts_moe_load_factor(x, sh->ep);
    double local = (double)x->experts / sh->ep, tok = fed * k * cf * sh->ep / x->experts;
    double fr = (double)x->expert_ffn / etp;
    out->router = (ts_gemm_shape){TS_PART_ROUTER, T, x->experts, h, 1};
    out->fc1 = (ts_gemm_shape){TS_PART_EXPERT_FC1, tok, in_mats * fr, h, local};
    out->fc2 = (ts_gemm_shape){TS_PART_EXPERT_FC2, tok, h, fr, local};
    out->routed_tokens = fed * k * cf;
    /* Model FLOPs per token of the TP group, whichever way the experts are split. */
    out->matmul_params = k * mats * h * (double)x->expert_ffn / sh->tp + h * x->experts;
    out->permute_bytes = 2.0 * R * h * (3.0 * k + 1.0);
    /* the reorders: Megatron-Core's with more than one local expert, the CPU executor's always
     * (exec/ops_moe.c reorder_rows); SequentialMLP's concatenation on GPUs */
    int cpu = ts_system_cpu_ranks(&pb->sys);
    int reorder = ts_moe_dispatcher_of(pb) == TS_MOE_DISPATCH_ALLTOALL && (local > 1 || cpu);
    double copies = (reorder ? 2.0 : 0.0) + (local > 1 && !cpu && !pb->train.moe_grouped_gemm ? 1.0 : 0.0);
    out->copy_bytes = copies * 2.0 * 2.0 * out->routed_tokens * h; /* read and written, 16-bit */
    out->tp_block = etp == sh->tp || x->shared_experts > 0;
    if (sh->sp && sh->tp > 1) {
        /* Megatron-Core's dispatcher under SP: the router sees the rank's T/t tokens; with etp = tp
         * the copies an EP rank receives are all-gathered over TP before the experts and
         * reduce-scattered after (tp·R·top_k·cf copies of h); shared experts gather and
         * reduce-scatter the T tokens as a dense MLP does. */
        out->tp_bytes = 2.0 * h * ((etp == sh->tp ? T * k * cf : 0) + (x->shared_experts > 0 ? T : 0));
        out->tp_dispatcher = etp == sh->tp;
    }
    if (ts_moe_dispatcher_of(pb) == TS_MOE_DISPATCH_ALLGATHER) {
        out->to_coll = TS_COLL_ALLGATHER;
        out->from_coll = TS_COLL_REDUCE_SCATTER;
        out->to_bytes = out->from_bytes = 2.0 * sh->ep * R * h;
    } else {
        out->to_coll = out->from_coll = TS_COLL_ALLTOALL;
        out->to_bytes = ts_moe_dispatch_elem_bytes(pb) * R * k * h;
        out->from_bytes = 2.0 * R * k * h;
    }
}
