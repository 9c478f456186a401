/* What one op of a step program costs alone (see op_cost.h). */
#include "planner/op_cost.h"

#include "planner/cost.h"
#include "planner/moe_cost.h"
#include "program/recipe.h"

/* Ring CP (op->m steps of op->n bytes each), beside an attention of op->flops in m + 1 kernels:
 * from the attention's start to the ring's end, the attention plus what the ring exposes
 * (cost.h ts_cp_ring_exposed_s); without FLOPs to overlap (unfused attention, the accumulators'
 * hop home) or on a serial system, the transfers alone. */
static double cp_ring_s(const ts_problem *pb, const ts_op *op, ts_link link) {
    const ts_system *s = &pb->sys;
    int steps = (int)op->m;
    if (op->flops <= 0 || s->serial_ops) return ts_cp_ring_exposed_s(s, link, steps, op->n, 0);
    double attn = ts_attention_s(s, ts_attention_dtype(pb), op->flops, op->flops / (steps + 1)) * pb->compute_scale;
    return attn + ts_cp_ring_exposed_s(s, link, steps, op->n, attn);
}

double ts_wgrad_op_s(const ts_problem *pb, int part, double compute_s, double m, double n, double k, double count) {
    double main_grad_bytes = pb->train.stack.grad_accum_bytes <= 0 ? ts_grad_reduce_bytes(&pb->train) : 0;
    return ts_wgrad_gemm_s(&pb->sys, compute_s, m, n, k, count, ts_gemm_operand_bytes(pb, part), main_grad_bytes);
}

double ts_op_cost_s(const ts_problem *pb, const ts_layout *l, const ts_op *op) {
    const ts_system *s = &pb->sys;
    switch ((ts_op_kind)op->kind) {
    case TS_OP_GEMM: {
        /* in the precision the recipe gives its part (FP8 linear layers, BF16 the rest) */
        double one = 2.0 * op->m * op->n * op->k;
        if (one <= 0) return 0;
        ts_dtype dt = ts_gemm_dtype(pb, op->part);
        int bwd = op->phase == TS_PHASE_BWD || op->phase == TS_PHASE_WGRAD;
        double scale = bwd ? ts_gemm_bwd_scale(s, dt) : 1.0;
        /* the local experts as one grouped GEMM (moe_cost.h); tokens are m, or k in the
         * weight gradient */
        double count = op->flops > one ? op->flops / one : 1.0, t;
        if (op->part == TS_PART_EXPERT_FC1 || op->part == TS_PART_EXPERT_FC2)
            t = scale * ts_grouped_gemm_s(s, dt, op->m, op->n, op->k, count, op->phase == TS_PHASE_WGRAD ? op->k : op->m,
                                          pb->train.moe_grouped_gemm, pb->train.stack.grouped_gemm_streams);
        else if (op->part == TS_PART_ATTN) /* unfused scores: their traffic is the element-wise op's */
            t = scale * ts_gemm_compute_s(s, dt, op->m, op->n, op->k) * count;
        else
            t = scale * ts_gemm_s(s, dt, op->m, op->n, op->k) * count;
        /* the weight gradient (W = m × n over k tokens) is no faster than its memory traffic */
        return op->phase == TS_PHASE_WGRAD ? ts_wgrad_op_s(pb, op->part, t, op->m, op->n, op->k, count) : t;
    }
    case TS_OP_ATTENTION:
        return ts_attention_s(s, ts_attention_dtype(pb), op->flops, op->flops / (op->m > 1 ? op->m : 1));
    case TS_OP_ELEMENTWISE: return ts_memory_s(s, op->bytes, 1);
    case TS_OP_OPTIMIZER: return ts_optimizer_s(s, op->bytes);
    case TS_OP_COLL: {
        ts_group g = (ts_group)op->group;
        int n = ts_group_size(l, g);
        if (n <= 1) return 0;
        ts_link link = ts_group_link(s, ts_group_stride(l, g), n);
        if (op->m > 0) return cp_ring_s(pb, op, link);
        int lockstep = l->tp * l->cp;
        if (g == TS_GROUP_EP) return ts_moe_op_s(pb, n, ts_group_stride(l, g), lockstep, (ts_coll)op->coll, op->bytes);
        double t = ts_coll_s(s, (ts_coll)op->coll, n, op->bytes, link);
        /* the amax reduction over DP×CP waits for the replicas' last rank (cost.h ts_sync_wait_s) */
        if (op->part == TS_PART_AMAX_REDUCE && op->bytes > 0) t += ts_sync_wait_s(s, n * ts_group_stride(l, g), lockstep);
        /* TP traffic that the system pipelines under GEMMs (tp_comm_overlap, e.g. Transformer
         * Engine's userbuffers) is hidden at that fraction, as in the closed form; the FP8 amax
         * reduction is no GEMM's and blocks the compute stream (program.c amax_reduce). */
        return g == TS_GROUP_TP && op->part != TS_PART_AMAX_REDUCE ? t * (1.0 - s->tp_comm_overlap) : t;
    }
    case TS_OP_SEND:
    case TS_OP_RECV:
        return ts_coll_s(s, TS_COLL_SENDRECV, 2, op->bytes,
                         ts_group_link(s, ts_group_stride(l, TS_GROUP_PP), 2));
    case TS_OP_KIND_COUNT: break;
    }
    return 0;
}
