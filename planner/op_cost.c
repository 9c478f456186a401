/* What one op of a step program costs alone (see op_cost.h). */
#include "planner/op_cost.h"

#include "planner/cost.h"
#include "program/recipe.h"

double ts_op_cost_s(const ts_problem *pb, const ts_layout *l, const ts_op *op) {
    const ts_system *s = &pb->sys;
    switch ((ts_op_kind)op->kind) {
    case TS_OP_GEMM: {
        /* in the precision the recipe gives its part (FP8 linear layers, BF16 the rest) */
        double one = 2.0 * op->m * op->n * op->k;
        if (one <= 0) return 0;
        double t = ts_gemm_s(s, ts_gemm_dtype(pb, op->part), op->m, op->n, op->k);
        return op->flops > one ? t * (op->flops / one) : t;
    }
    case TS_OP_ATTENTION:
        return ts_attention_s(s, ts_attention_dtype(pb), op->flops, op->flops / (op->m > 1 ? op->m : 1));
    case TS_OP_ELEMENTWISE: return ts_memory_s(s, op->bytes, 1);
    case TS_OP_OPTIMIZER: return ts_optimizer_s(s, op->bytes);
    case TS_OP_COLL: {
        ts_group g = (ts_group)op->group;
        int n = ts_group_size(l, g);
        if (n <= 1) return 0;
        double t = ts_coll_s(s, (ts_coll)op->coll, n, op->bytes, ts_group_link(s, ts_group_stride(l, g), n));
        /* TP traffic that the system pipelines under GEMMs (tp_comm_overlap, e.g. Transformer
         * Engine's userbuffers) is hidden at that fraction, as in the closed form. */
        return g == TS_GROUP_TP ? t * (1.0 - s->tp_comm_overlap) : t;
    }
    case TS_OP_SEND:
    case TS_OP_RECV:
        return ts_coll_s(s, TS_COLL_SENDRECV, 2, op->bytes,
                         ts_group_link(s, ts_group_stride(l, TS_GROUP_PP), 2));
    case TS_OP_KIND_COUNT: break;
    }
    return 0;
}
