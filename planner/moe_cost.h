/* What an MoE layer's expert-parallel collectives cost, as the dispatchers run them (the sizes
 * come from the layer recipe, program/recipe_moe.c; formulas and sources in moe_cost.c). One
 * function, used by the closed form (planner/layer.c) and by the op pricing the simulator uses
 * (planner/op_cost.c), so both charge the same. */
#ifndef TS_MOE_COST_H
#define TS_MOE_COST_H

#include "models/coll.h"
#include "program/problem.h"

/* Seconds one EP collective `c` of `bytes` (nccl-tests' size: the rank's whole buffer) over an
 * EP group of `ep` ranks, `stride` apart in the rank order (the experts' TP degree), leaves on
 * the critical path: its transfer over NVLink and the NIC as the problem's dispatcher moves it,
 * plus the wait for the group's last rank (cost.h ts_sync_wait_s; a rank is in lockstep with
 * the `lockstep` ranks of its TP×CP group), times 1 - train.moe_a2a_overlap. */
double ts_moe_coll_s(const ts_problem *pb, int ep, int stride, int lockstep, ts_coll c, double bytes);
/* The same collective's transfer alone, nothing hidden. */
double ts_moe_coll_alone_s(const ts_problem *pb, int ep, int stride, ts_coll c, double bytes);

/* One EP collective as a step program's op: the seconds it runs on its stream (the part not
 * hidden, 1 - train.moe_a2a_overlap of the transfer and of the wait), and the seconds the SMs its hidden part
 * holds (ts_moe_comm_sm_frac) take from the computation beside it. They add up to
 * ts_moe_coll_s, what the closed form charges. */
double ts_moe_op_s(const ts_problem *pb, int ep, int stride, int lockstep, ts_coll c, double bytes);
double ts_moe_op_sm_s(const ts_problem *pb, int ep, int stride, ts_coll c, double bytes);

/* The SMs the EP dispatch and combine kernels hold while they run beside computation, as a
 * fraction of the GPU's: the stack's comm_sm_frac, or DeepEP's TS_DEEPEP_SMS of the system's
 * sms under the deepep dispatcher, the larger (moe_cost.c); 0 when neither is stated. */
#define TS_DEEPEP_SMS 20.0
double ts_moe_comm_sm_frac(const ts_problem *pb);

/* The nodes a token's copies reach at most: the model's node-limited routing (router_groups,
 * router_group_topk: a token's experts lie in at most router_group_topk groups; a group's
 * experts span ep/router_groups ranks) over an EP group spanning `nodes` nodes of
 * `per_node` of its ranks each; `nodes` when the routing is not limited. */
double ts_moe_node_limit(const ts_moe *x, int ep, int per_node, int nodes);

/* Seconds for a grouped GEMM (the local experts' GEMMs: Megatron-Core's --moe-grouped-gemm)
 * of `count` GEMMs m×n×k in `dt`, `tokens` of m, n, k being the token dimension (formula in
 * moe_cost.c): one kernel when `streams` is 0 (CUTLASS, DeepGEMM), else one GEMM per expert
 * over `streams` CUDA streams at once (Transformer Engine's GroupedLinear; the stack's
 * grouped_gemm_streams); with `grouped` 0 the `count` GEMMs run one after another
 * (Megatron-Core's SequentialMLP), each priced alone. */
double ts_grouped_gemm_s(const ts_system *s, ts_dtype dt, double m, double n, double k, double count, double tokens,
                         int grouped, int streams);

#endif
