/* Cost functions shared by the planner's closed form and the simulator (one source of truth).
 *
 * Compute is a roofline: a GEMM takes flops / (peak × efficiency(flops)) with the efficiency curve
 * of the system file, or its operands' HBM traffic where that is longer; a memory-bound kernel
 * takes bytes / (HBM bandwidth × hbm_eff).
 * Collectives use NCCL's ring and tree costs (nccl-tests' bus-bandwidth convention, see
 * nccl-tests doc/PERFORMANCE.md): a ring all-reduce of B bytes over n ranks moves 2(n-1)/n·B per
 * rank, all-gather / reduce-scatter / all-to-all (n-1)/n·B, at the bus bandwidth of the slowest
 * link the group crosses; latency is paid per ring step (ring) or per tree level (tree), and the
 * faster of the two is taken, as NCCL's tuner does. */
#ifndef TS_COST_H
#define TS_COST_H

#include "models/system.h"
#include "models/coll.h"

/* The links a collective can cross: the scale-up domain's (NVLink, Infinity Fabric), then the
 * scale-out fabric up to its leaf (NIC; a flat fabric has only this), spine or core tier
 * (models/system.h ts_tier): TS_LINK_NIC + k for tier k. */
typedef enum { TS_LINK_NVLINK, TS_LINK_NIC, TS_LINK_SPINE, TS_LINK_CORE, TS_LINK_COUNT } ts_link;
extern const char *const ts_link_names[]; /* "nvlink", "nic", "spine", "core" */

/* How many of the link kinds a system has: 2 (NVLink, NIC) on a flat fabric, 1 + tiers else. */
int ts_link_kinds(const ts_system *s);


/* Seconds for a GEMM C(m×n) = A(m×k)·B(k×n) in `dt`: flops / (peak[dt] × ts_gemm_eff), or its
 * HBM traffic (ts_gemm_memory_s) where that takes longer (few tokens against a large weight). */
double ts_gemm_s(const ts_system *s, ts_dtype dt, double m, double n, double k);
/* Its compute alone, flops / (peak[dt] × ts_gemm_eff): for unfused attention's score GEMMs, whose
 * traffic the recipe prices apart (program/recipe.h scores_bytes). */
double ts_gemm_compute_s(const ts_system *s, ts_dtype dt, double m, double n, double k);
/* The HBM floor of `count` such GEMMs: A and B read once (1 byte an element in FP8, 4 in fp32, 2
 * else), C written (FP8 GEMMs write BF16), at hbm_bytes_per_s × hbm_eff. The efficiency curves
 * are measured on shapes that are compute-bound, so they do not hold this. 0 on CPU ranks, whose
 * GEMM curves are measured in situ (ts_system_cpu_ranks). */
double ts_gemm_memory_s(const ts_system *s, ts_dtype dt, double m, double n, double k, double count);
/* A GEMM's efficiency (achieved / the peak of `dt`) at `flops`: the system's FP8 curve for FP8
 * and its 16-bit curve for bf16 and fp16 when it has them, else its GEMM curve; without an FP8 curve an FP8 GEMM takes the GEMM curve
 * times TS_FP8_EFF_FALLBACK (cost.c says where it comes from). */
double ts_gemm_eff(const ts_system *s, ts_dtype dt, double flops);

/* How much longer a backward GEMM (dgrad, wgrad) of `dt` takes than the curve gives: 1 /
 * efficiency.gemm_fp8_bwd for FP8 where the system states it (Transformer Engine runs the
 * backward's FP8 GEMMs with split accumulation, the forward's with fast accumulation), else 1. */
double ts_gemm_bwd_scale(const ts_system *s, ts_dtype dt);
/* Seconds for `count` weight-gradient GEMMs, each W(m×n) += X(k×m)ᵀ·dY(k×n) over k tokens,
 * whose compute takes `compute_s` in all. The plain GEMM takes the longer of that and its HBM
 * traffic (the roofline bound: Williams, Waterman and Patterson, CACM 2009): the two inputs read
 * once, `in_bytes` an element, the gradient written in 2 bytes. Where it accumulates into
 * main_grad of `grad_bytes` an element (Megatron-Core's gradient_accumulation_fusion, the
 * stack's grad_accum_bytes 0; 0: it does not), the accumulation adds what planner/wgrad_accum.h
 * measured: nearly all of main_grad's read and write for few tokens against a large weight (an
 * expert's share of a micro-batch), a small share under thousands. CPU ranks: compute_s. */
double ts_wgrad_gemm_s(const ts_system *s, double compute_s, double m, double n, double k, double count,
                       double in_bytes, double grad_bytes);
/* Seconds for `flops` of fused attention (flash attention) in `dt`, run as kernels of
 * `kernel_flops` each: attention_eff is reached by large kernels; smaller ones (short sequences,
 * each ring step of context parallelism) lose efficiency as GEMMs of that size do, relative to
 * the GEMM curve's plateau. Each kernel (flops / kernel_flops of them) adds kernel_latency_s.
 * FP8 attention (FlashAttention-3's FP8 path) runs at TS_FP8_ATTENTION_RATIO × attention_eff of
 * the FP8 peak (cost.c). */
double ts_attention_s(const ts_system *s, ts_dtype dt, double flops, double kernel_flops);
/* Seconds for `kernels` memory-bound kernels that move `bytes` through HBM in all: bytes at the
 * achieved bandwidth plus kernel_latency_s each. */
double ts_memory_s(const ts_system *s, double bytes, double kernels);
/* The optimizer step over `bytes` of states, gradients and weights, one kernel: memory bound at
 * the optimizer's own efficiency (the bandwidth term / optimizer_eff). */
double ts_optimizer_s(const ts_system *s, double bytes);

/* Ranks that share CPU cores (node.cores > 0) compute slower once a node holds more ranks than
 * cores: the system's compute figures are those of one rank with a core to itself, so with
 * n = min(gpus, node.gpus) ranks on a node compute takes max(1, n / node.cores) times as long.
 * 1 for devices (node.cores = 0). */
double ts_compute_scale(const ts_system *s, int gpus);

/* Ranks that synchronise run at the pace of the slowest: when ranks' compute times over the same
 * span differ with coefficient of variation σ (a shared machine's noise, independent per core),
 * a span of n such ranks between two synchronisations takes, in expectation, the largest of n
 * draws, 1 + σ · E[max of n standard normals] times the mean (the effect of system noise on
 * bulk-synchronous programs: Petrini et al. SC'03, Hoefler et al. SC'10). n counts the cores the
 * job computes on: min(ranks on a node, node.cores) per node, or the ranks on devices. σ depends
 * on the span: short spans catch the cores' speeds apart, long ones average over their phases
 * (Hoefler et al. SC'10: the interval between synchronisations decides the noise's cost). With
 * `window_s` the compute time between a rank's synchronisations, σ = node.speed_cv ·
 * (window_s / node.speed_cv_window_s)^-node.speed_cv_decay, or node.speed_cv itself when the
 * decay is 0 or window_s <= 0 (the span unknown: the one speed_cv was measured over). 1 when
 * speed_cv is 0 or one rank. Compute ops' times (planner and simulator) carry this factor; the
 * planner's closed form passes 0. */
double ts_lockstep_scale(const ts_system *s, int gpus, double window_s);

/* Seconds a blocking collective spanning model replicas waits, in expectation, for its last
 * rank. Ranks reach the same collective at instants spread with standard deviation σ =
 * node.sync_jitter_s (transient differences between GPUs: kernel durations under power
 * management, host and network noise; a persistently slow GPU gates a synchronous step however
 * often the step synchronises, so it is not this), and the collective ends after the last of
 * them: for n ranks, σ · E[max of n standard normals] after the mean (the bulk-synchronous noise
 * model of Petrini et al. SC'03 and Hoefler et al. SC'10, as ts_lockstep_scale). A rank arrives
 * already in lockstep with the `lockstep_ranks` of its TP×CP group, whose collectives run in
 * every layer and whose spread the calibrated efficiencies hold; a collective over a group
 * whose members lie `span_ranks` apart in a stage's rank order (stride × size) waits on
 * max(span, lockstep) ranks, so it adds σ · (E[max of those] − E[max of lockstep]). Charged on
 * the collectives that hold the compute stream and reach across replicas: FP8 delayed
 * scaling's amax reductions over TP×DP×CP (program.c amax_reduce) and the expert all-to-alls
 * (planner/moe_cost.h). 0 when σ is 0 or the group stays inside the lockstep group. */
double ts_sync_wait_s(const ts_system *s, int span_ranks, int lockstep_ranks);

/* The link a group of `size` ranks, `stride` apart in the rank order, crosses: NVLink when all
 * members sit in one scale-up domain (domains hold domain_gpus consecutive ranks: program/ranks.h
 * ts_domain_ranks places whole blocks of the rank order in a domain), else the lowest fabric
 * tier whose switch group holds the group's span, the NIC on a flat fabric. */
ts_link ts_group_link(const ts_system *s, int stride, int size);
/* Achievable bytes/s per GPU: the domain link's or the NIC's times its busbw efficiency, over
 * tiers the NIC's divided by the oversubscription of every tier up to this one. */
double ts_link_busbw(const ts_system *s, ts_link link);
/* Per ring step or tree level: the domain's latency, or the fabric's plus every tier's crossed. */
double ts_link_latency_s(const ts_system *s, ts_link link);

/* Seconds for collective `c` of `bytes` (nccl-tests' size: the full buffer) over `n` ranks. On a
 * flat fabric ring and tree all-reduce move the same bus volume and the one with fewer latency
 * steps wins. Across fabric tiers (models/system.h) the tree runs at TS_TREE_BUSBW_FACTOR of the
 * ring's bus bandwidth (NCCL src/graph/tuning.cc, Simple protocol), so the tree wins small
 * messages and the ring large ones, as NCCL's tuner picks them by size. */
double ts_coll_s(const ts_system *s, ts_coll c, int n, double bytes, ts_link link);

/* Ring context parallelism as it runs (ring attention, Liu et al. 2023; Megatron-LM's CP): the
 * attention of `attn_s` runs as steps + 1 kernels of equal work (load-balanced causal chunks,
 * program/recipe.c), and beside each but the last the next block, `step_bytes`, is passed to the
 * next rank over `link`. Kernel i + 1 starts when both kernel i and its block are done, so each
 * of the `steps` steps is exposed by max(0, transfer − attn_s / (steps + 1)), latency included:
 * the seconds the ring adds to the attention. With attn_s = 0 (nothing to overlap) or on a system
 * that runs one op at a time (serial_ops), every transfer is exposed. */
double ts_cp_ring_exposed_s(const ts_system *s, ts_link link, int steps, double step_bytes, double attn_s);

#endif
