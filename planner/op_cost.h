/* The price of one step-program op on a system: seconds it takes alone (no contention; compute
 * with a core to itself, before CPU ranks share their node's cores, sim/cores.h), from
 * planner/cost.h: GEMM roofline, attention, memory-bound kernels, collectives by the link their
 * group crosses in the rank order; the CP ring (a collective with m > 0 steps, program.h) as it runs
 * beside its attention. The simulator costs every op with it; calibration compares
 * measured ops with it. */
#ifndef TS_OP_COST_H
#define TS_OP_COST_H

#include "program/program.h"

double ts_op_cost_s(const ts_problem *pb, const ts_layout *l, const ts_op *op);

/* Seconds for the weight-gradient GEMMs of a GEMM of `part` (count of them, W(m×n) over k tokens)
 * whose compute takes `compute_s`: planner/cost.h ts_wgrad_gemm_s with the recipe's operand bytes
 * and the stack's accumulation (into main_grad of the reduced gradients' bytes, program/problem.h
 * ts_grad_reduce_bytes, where grad_accum_bytes is 0). The closed form
 * (planner/layer.c) and the step program's WGRAD ops both price them here. */
double ts_wgrad_op_s(const ts_problem *pb, int part, double compute_s, double m, double n, double k, double count);

#endif
