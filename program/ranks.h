/* The rank order (DESIGN.md, Megatron-LM): TP innermost, then CP, then DP, PP outermost; EP
 * groups fold into DP×CP. One mapping for the planner (which link a group crosses), the
 * simulator (which ranks share a NIC) and the executor (MPI/NCCL communicators).
 *
 *   rank = tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i))
 *
 * Groups (members differ only in the named coordinates):
 *   TP: tp_i          CP: cp_i          DP: dp_i          PP: pp_i
 *   DPCP (gradients, ZeRO shards): cp_i and dp_i  (the "data-parallel with context" group)
 *   Experts (Megatron-Core's expert rank generator, order "tp-ep-dp-pp" with the experts' own
 *   TP size etp = ts_layout_etp): a stage's tp·cp·dp ranks, numbered q = tp_i + tp·(cp_i + cp·dp_i),
 *   are re-split as q = etp_i + etp·(ep_i + ep·edp_i), so an EP group may span TP ranks and DP
 *   ranks alike (DeepSeek-V3 on H100: tp=2, etp=1, ep=64 over tp×dp = 2×32):
 *   ETP: etp_i (stride 1)   EP: ep_i (stride etp)   EDP (expert data parallel): edp_i (stride etp·ep).
 *   With etp = tp these are the TP group, the ep consecutive members of DPCP containing the rank
 *   (stride tp) and the members of DPCP with the same position in their EP group. */
#ifndef TS_RANKS_H
#define TS_RANKS_H

#include "program/layout.h"

typedef enum {
    TS_GROUP_TP,
    TS_GROUP_CP,
    TS_GROUP_DP,
    TS_GROUP_PP,
    TS_GROUP_DPCP,
    TS_GROUP_EP,
    TS_GROUP_EDP,
    TS_GROUP_ETP,
    TS_GROUP_COUNT
} ts_group;
extern const char *const ts_group_names[]; /* "tp","cp","dp","pp","dpcp","ep","edp","etp"; NULL-ended */

typedef struct {
    int tp, cp, dp, pp; /* coordinates of a rank */
} ts_coords;

/* dp×tp×pp×cp, checked: -1 when it does not fit an int (a layout ts_layout_invalid accepts has
 * the problem's GPU count). */
int ts_rank_count(const ts_layout *l);
ts_coords ts_rank_coords(const ts_layout *l, int rank);
int ts_rank_of(const ts_layout *l, ts_coords c);

/* Size of `g` and the stride between consecutive members in the rank order. */
int ts_group_size(const ts_layout *l, ts_group g);
int ts_group_stride(const ts_layout *l, ts_group g);

/* Members of `rank`'s group `g` in ascending order into `out` (room for ts_group_size); returns
 * the rank's index among them. */
int ts_group_members(const ts_layout *l, ts_group g, int rank, int *out);

/* A number identifying `rank`'s instance of group `g` (the same for every member): the lowest
 * member's rank. */
int ts_group_id(const ts_layout *l, ts_group g, int rank);

/* Placement on scale-up domains of `domain_gpus` GPUs (NVL72: 72), for the planner and the
 * simulator; the executor keeps the rank order as its mapping. Consecutive ranks fill a domain
 * in whole blocks of the rank order's inner groups, TP first, then CP and EP (their spans tp,
 * tp·cp and tp·ep, and the DP×CP group's): the block is the largest of those spans that fits the
 * domain and that every smaller one divides, so each group no wider than the block lies inside
 * one domain. A domain then holds ts_domain_ranks = ⌊domain / block⌋ · block ranks; the rest of
 * its GPUs stay idle (an NVL72 rack running EP64 uses 64 of its 72 GPUs, as NVL72 jobs placed
 * by rack segments do). */
int ts_domain_block(const ts_layout *l, int domain_gpus);
int ts_domain_ranks(const ts_layout *l, int domain_gpus);
/* The GPU (domain · domain_gpus + slot) that `rank` runs on under that placement. */
int ts_rank_gpu(const ts_layout *l, int domain_gpus, int rank);

#endif
