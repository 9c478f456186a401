/* The expert-parallel dispatch and combine as they run (see moe_cost.h).
 *
 * An EP group of n ranks, s apart in the rank order, holds g = min(n, max(1, gpus_per_node / s))
 * of its ranks on each of N = n / g nodes. A rank sends B bytes of routed token copies (the
 * recipe's buffer), spread evenly over the n ranks' experts.
 *
 * alltoall (Megatron-Core, one NCCL all-to-all): each copy goes to its expert's rank, so
 * B·(n - g)/n leaves the node over the rank's NIC and B·(g - 1)/n crosses NVLink, both at once;
 * the slower of the two, plus a latency per peer as NCCL's all-to-all pays it (models/coll.h,
 * planner/cost.c ts_coll_s, whose formula this is when the group fits in a node).
 *
 * deepep (DeepEP; DeepSeek-V3 §3.2.2): a token is sent over IB once to each node that holds one
 * of its experts, then forwarded over NVLink to those GPUs; the combine reduces inside the node
 * first and crosses IB once per node back. A token's top_k copies land, uniformly, on
 * D = N·(1 - (1 - 1/N)^top_k) distinct nodes (balls into bins), at most M under node-limited
 * routing (ts_moe_node_limit; DeepSeek-V3: top_k 8 over at most 4 of 8 groups, one group per
 * node at EP64, so D = 4 where 5.25 unlimited). Of those, (N - 1)/N are other nodes: NIC bytes
 * (B / top_k)·D·(N - 1)/N, NVLink bytes B·(g - 1)/g, at once. Latency: one NIC hop per node.
 *
 * allgather: the gathered buffer over the group's slowest link, as NCCL's ring (ts_coll_s).
 *
 * Each collective also waits for the group's last rank when the group reaches across model
 * replicas (cost.h ts_sync_wait_s): Megatron-Core's dispatcher blocks on its tokens.
 *
 * Overlap: train.moe_a2a_overlap hides that fraction under computation. Megatron-Core runs the
 * EP collectives exposed by default (its MoE README: --overlap-moe-expert-parallel-comm, batch-
 * level overlap of one micro-batch's all-to-all with another's compute, is opt-in since MCore
 * v0.14, program/sched_combined.c, as is --moe-shared-expert-overlap, program.c); DeepSeek-V3's DualPipe hides them fully (§3.2.1),
 * which a schedule models by running them beside another micro-batch; a stack that states its
 * overlap (models/stacks/deepseek-v3.json: 1) sets the fraction's default.
 *
 * SMs held by communication. Hidden communication is not free where its kernels run on the SMs:
 * DeepSeek-V3 gives 20 of the H800's 132 SMs to its all-to-all kernels (§3.2.2, §3.5.1: "we
 * allocate 20 out of the 132 SMs ... which will limit the computational throughput"), so while
 * a hidden transfer of t seconds runs, computation proceeds at 1 - f of its rate (f =
 * ts_moe_comm_sm_frac, 20/132): it finishes f·t later than alone (as long as the computation
 * outlasts the transfer, the point of hiding it). That f·t is charged beside the exposed part.
 * f is the stack's comm_sm_frac where it states one; the deepep dispatcher's kernels hold
 * DeepEP's 20 SMs on any stack (deep_ep/buffer.py: Buffer.num_sms = 20; Megatron-Core's
 * moe_deepep_num_sms, "historical default 20"), a fraction of the GPU's (the system's sms; not
 * charged where the system file states none). NCCL's all-to-all runs on a few channels' SMs:
 * the system's overlap_slowdown, as every overlapped collective.
 *
 * Grouped GEMM. The local experts run as one kernel (MegaBlocks, Gale et al. 2022 §5: one
 * block-sparse / grouped kernel instead of a batch of padded ones; Megatron-Core's default
 * --moe-grouped-gemm), so its efficiency is the GEMM curve's at the kernel's total FLOPs, not at
 * one expert's. But every expert's token dimension is cut into tiles of 128 rows (the
 * threadblock tile of Hopper's CUTLASS and cuBLAS GEMMs, and DeepGEMM's grouped kernels'
 * alignment, DeepSeek's DeepGEMM README: "M-axis ... aligned to 128"): an expert of m tokens
 * computes ceil(m/128)·128 rows, on average m + 64 as the experts' loads vary, and at least 128:
 * small experts (fine-grained MoE, small micro-batches, large EP) pay for it. CPU ranks have no
 * grouped kernel: the executor runs one OpenBLAS GEMM per expert, priced each alone; so is
 * Megatron-Core's SequentialMLP (--moe-grouped-gemm off, train.moe_grouped_gemm = 0), a loop of one
 * TE linear layer per local expert (megatron/core/transformer/moe/experts.py). */
#include "planner/moe_cost.h"

#include <math.h>

#include "planner/cost.h"
#include "program/recipe.h"

double ts_moe_node_limit(const ts_moe *x, int ep, int per_node, int nodes) {
    if (x->router_groups <= 0 || x->router_group_topk <= 0 || x->router_group_topk >= x->router_groups)
        return nodes;
    /* nodes one group's experts span (at least one) */
    double span = (double)ep / ((double)x->router_groups * per_node);
    double m = x->router_group_topk * (span > 1.0 ? span : 1.0);
    return m < nodes ? m : nodes;
}

/* One all-to-all of B bytes per rank, by the dispatcher, over n ranks, g per node, N nodes. */
static double a2a_s(const ts_problem *pb, ts_moe_dispatcher d, int n, int g, double B) {
    const ts_system *s = &pb->sys;
    double nvl_bytes_per_s = ts_link_busbw(s, TS_LINK_NVLINK), nic_bytes_per_s = ts_link_busbw(s, TS_LINK_NIC);
    int N = (n + g - 1) / g;
    if (d == TS_MOE_DISPATCH_DEEPEP) {
        const ts_moe *x = &pb->model.moe;
        double k = x->top_k > 0 ? x->top_k : 1;
        double D = N * (1.0 - pow(1.0 - 1.0 / N, k)), M = ts_moe_node_limit(x, n, g, N);
        if (D > M) D = M;
        double nic_s = B / k * D * (N - 1.0) / N / nic_bytes_per_s, nvl_s = B * (g - 1.0) / g / nvl_bytes_per_s;
        return fmax(nic_s, nvl_s) + (N - 1) * s->nic_latency_s + s->link_latency_s;
    }
    double nic_s = B * (double)(n - g) / n / nic_bytes_per_s, nvl_s = B * (g - 1.0) / n / nvl_bytes_per_s;
    return fmax(nic_s, nvl_s) + (n - 1) * s->nic_latency_s;
}

double ts_moe_coll_alone_s(const ts_problem *pb, int ep, int stride, ts_coll c, double bytes) {
    const ts_system *s = &pb->sys;
    if (ep <= 1 || bytes <= 0) return 0;
    ts_link link = ts_group_link(s, stride, ep);
    ts_moe_dispatcher d = ts_moe_dispatcher_of(pb);
    double coll_s;
    if (c != TS_COLL_ALLTOALL || link == TS_LINK_NVLINK || d == TS_MOE_DISPATCH_ALLGATHER) {
        coll_s = ts_coll_s(s, c, ep, bytes, link);
    } else {
        int g = s->gpus_per_node / stride;
        g = g < 1 ? 1 : g > ep ? ep : g;
        coll_s = a2a_s(pb, d, ep, g, bytes);
    }
    return coll_s;
}

double ts_moe_comm_sm_frac(const ts_problem *pb) {
    double f = pb->train.stack.comm_sm_frac;
    if (ts_moe_dispatcher_of(pb) == TS_MOE_DISPATCH_DEEPEP && pb->sys.sms > 0)
        f = fmax(f, TS_DEEPEP_SMS / pb->sys.sms);
    return f;
}

double ts_moe_coll_s(const ts_problem *pb, int ep, int stride, int lockstep, ts_coll c, double bytes) {
    double coll_s = ts_moe_coll_alone_s(pb, ep, stride, c, bytes);
    double hidden = pb->train.moe_a2a_overlap;
    return ts_moe_op_s(pb, ep, stride, lockstep, c, bytes) + coll_s * hidden * ts_moe_comm_sm_frac(pb);
}

/* The EP collective as a step program's op: its exposed part on its stream, and the SM share of
 * its hidden part charged to the computation beside it (DeepSeek-V3 §3.2.2: "computation SMs"
 * given to the communication kernels while they run), not to the stream where a pairing
 * schedule would hide it too (sim/engine.c). Together they are ts_moe_coll_s. */
double ts_moe_op_s(const ts_problem *pb, int ep, int stride, int lockstep, ts_coll c, double bytes) {
    if (ep <= 1 || bytes <= 0) return 0;
    double wait_s = ts_sync_wait_s(&pb->sys, ep * stride, lockstep);
    return (ts_moe_coll_alone_s(pb, ep, stride, c, bytes) + wait_s) * (1.0 - pb->train.moe_a2a_overlap);
}

double ts_moe_op_sm_s(const ts_problem *pb, int ep, int stride, ts_coll c, double bytes) {
    double f = ts_moe_comm_sm_frac(pb);
    if (f <= 0 || pb->train.moe_a2a_overlap <= 0) return 0;
    return ts_moe_coll_alone_s(pb, ep, stride, c, bytes) * pb->train.moe_a2a_overlap * f;
}

/* The threadblock tile along the token dimension (rows). */
#define TS_GROUPED_TILE_ROWS 128.0

double ts_grouped_gemm_s(const ts_system *s, ts_dtype dt, double m, double n, double k, double count, double tokens,
                         int grouped, int streams) {
    double one = 2.0 * m * n * k;
    if (one <= 0 || tokens <= 0) return 0;
    /* CPU ranks (serial_ops, or cores shared) run the executor's one BLAS GEMM per expert, as
     * SequentialMLP runs one cuBLAS GEMM per expert */
    if (!grouped || ts_system_cpu_ranks(s)) return count * ts_gemm_s(s, dt, m, n, k);
    /* an expert's load varies around the mean (ts_moe_load_factor), so its last tile is half
     * empty on average; none computes less than one tile */
    double padded = fmax(TS_GROUPED_TILE_ROWS, tokens + 0.5 * TS_GROUPED_TILE_ROWS);
    double flops = one * count * padded / tokens;
    /* the GEMMs that share the GPU at once: all of them in one kernel, else one per stream */
    double together = streams > 0 && streams < count ? streams : count;
    double eff = ts_gemm_eff(s, dt, one * together * padded / tokens);
    return fmax(flops / (s->peak_flops[dt] * eff), ts_gemm_memory_s(s, dt, m, n, k, count));
}
