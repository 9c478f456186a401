/* The rank order and group membership of planner/ranks.h (suite `ranks`, no MPI needed): the
 * mapping the planner, the simulator and the executor's communicators (exec/runtime.c splits
 * MPI_COMM_WORLD by ts_group_id and checks each communicator's members against
 * ts_group_members at start-up) all rely on.
 *
 * Two kinds of check: Megatron-LM's own example, spelled out group by group (16 GPUs, tp=2,
 * pp=4: the docstring of megatron/core/parallel_state.py initialize_model_parallel), and, for a
 * layout using every dimension, each group's members against a brute-force reading of its
 * definition in ranks.h (ranks that differ only in the named coordinates). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "program/ranks.h"

#define MAX_RANKS 64

static ts_layout layout_of(int tp, int cp, int dp, int pp, int ep) {
    return (ts_layout){.dp = dp, .tp = tp, .pp = pp, .cp = cp, .ep = ep, .mbs = 1, .vpp = 1};
}

/* Every instance of group g, each as written in `want` (rows of `size` ascending ranks). */
static void expect_groups(const ts_layout *l, ts_group g, int n_groups, int size, const int *want) {
    cr_assert_eq(ts_group_size(l, g), size, "%s groups of %d, expected %d", ts_group_names[g], ts_group_size(l, g),
                 size);
    for (int i = 0; i < n_groups; i++) {
        const int *row = want + (size_t)i * size;
        for (int k = 0; k < size; k++) {
            int got[MAX_RANKS];
            int self = ts_group_members(l, g, row[k], got);
            cr_expect_eq(self, k, "%s group of rank %d: index %d, expected %d", ts_group_names[g], row[k], self, k);
            cr_expect(memcmp(got, row, (size_t)size * sizeof *got) == 0,
                      "%s group of rank %d: [%d, %d, ...], expected [%d, %d, ...]", ts_group_names[g], row[k], got[0],
                      size > 1 ? got[1] : -1, row[0], size > 1 ? row[1] : -1);
            cr_expect_eq(ts_group_id(l, g, row[k]), row[0], "%s group id of rank %d", ts_group_names[g], row[k]);
        }
    }
}

Test(ranks, megatron_16_gpus_tp2_pp4) {
    ts_layout l = layout_of(2, 1, 2, 4, 1);
    cr_assert_eq(ts_rank_count(&l), 16);
    static const int tp[8][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}};
    static const int pp[4][4] = {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}};
    static const int dp[8][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}};
    expect_groups(&l, TS_GROUP_TP, 8, 2, &tp[0][0]);
    expect_groups(&l, TS_GROUP_PP, 4, 4, &pp[0][0]);
    expect_groups(&l, TS_GROUP_DP, 8, 2, &dp[0][0]);
    /* Without CP the gradient group is the DP group. */
    expect_groups(&l, TS_GROUP_DPCP, 8, 2, &dp[0][0]);
}

/* 8 ranks, tp=2, cp=2, dp=2 with ep=2: TP innermost, then CP, then DP; EP takes consecutive
 * members of DP×CP (here the CP pairs), EDP the members at the same place in their EP group. */
Test(ranks, tp2_cp2_dp2_ep2_spelled_out) {
    ts_layout l = layout_of(2, 2, 2, 1, 2);
    static const int cp[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
    static const int dp[4][2] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
    static const int dpcp[2][4] = {{0, 2, 4, 6}, {1, 3, 5, 7}};
    static const int ep[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
    static const int edp[4][2] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
    expect_groups(&l, TS_GROUP_CP, 4, 2, &cp[0][0]);
    expect_groups(&l, TS_GROUP_DP, 4, 2, &dp[0][0]);
    expect_groups(&l, TS_GROUP_DPCP, 2, 4, &dpcp[0][0]);
    expect_groups(&l, TS_GROUP_EP, 4, 2, &ep[0][0]);
    expect_groups(&l, TS_GROUP_EDP, 4, 2, &edp[0][0]);
}

/* Whether rank s is in rank r's group g, read off the definitions in ranks.h. */
static int same_group(const ts_layout *l, ts_group g, int r, int s) {
    ts_coords a = ts_rank_coords(l, r), b = ts_rank_coords(l, s);
    int ia = a.cp + l->cp * a.dp, ib = b.cp + l->cp * b.dp; /* place in DP×CP */
    switch (g) {
    case TS_GROUP_TP: return a.cp == b.cp && a.dp == b.dp && a.pp == b.pp;
    case TS_GROUP_CP: return a.tp == b.tp && a.dp == b.dp && a.pp == b.pp;
    case TS_GROUP_DP: return a.tp == b.tp && a.cp == b.cp && a.pp == b.pp;
    case TS_GROUP_PP: return a.tp == b.tp && a.cp == b.cp && a.dp == b.dp;
    case TS_GROUP_DPCP: return a.tp == b.tp && a.pp == b.pp;
    case TS_GROUP_EP: return a.tp == b.tp && a.pp == b.pp && ia / l->ep == ib / l->ep;
    case TS_GROUP_EDP: return a.tp == b.tp && a.pp == b.pp && ia % l->ep == ib % l->ep;
    default: return 0;
    }
}

Test(ranks, every_group_matches_its_definition) {
    /* Every dimension above 1, each size distinct so a swapped stride shows. */
    const ts_layout layouts[] = {layout_of(2, 3, 2, 2, 3), layout_of(4, 1, 3, 1, 3), layout_of(1, 2, 4, 3, 4)};
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        const ts_layout *l = &layouts[li];
        int n = ts_rank_count(l);
        cr_assert(n <= MAX_RANKS);
        for (int r = 0; r < n; r++) {
            ts_coords c = ts_rank_coords(l, r);
            cr_expect_eq(ts_rank_of(l, c), r, "layout %zu: rank %d round-trips to %d", li, r, ts_rank_of(l, c));
            cr_expect_eq(r, c.tp + l->tp * (c.cp + l->cp * (c.dp + l->dp * c.pp)), "layout %zu rank %d", li, r);
        }
        for (int g = 0; g < TS_GROUP_COUNT; g++) {
            int covered[MAX_RANKS] = {0};
            for (int r = 0; r < n; r++) {
                int got[MAX_RANKS], want[MAX_RANKS], m = 0, self = -1;
                for (int s = 0; s < n; s++)
                    if (same_group(l, (ts_group)g, r, s)) {
                        if (s == r) self = m;
                        want[m++] = s;
                    }
                cr_assert_eq(ts_group_size(l, (ts_group)g), m, "layout %zu: %s group of rank %d has %d members, "
                             "ts_group_size says %d", li, ts_group_names[g], r, m, ts_group_size(l, (ts_group)g));
                int idx = ts_group_members(l, (ts_group)g, r, got);
                cr_expect_eq(idx, self, "layout %zu: rank %d is member %d of its %s group, not %d", li, r, self,
                             ts_group_names[g], idx);
                cr_expect(memcmp(got, want, (size_t)m * sizeof *got) == 0,
                          "layout %zu: %s group of rank %d differs from its definition", li, ts_group_names[g], r);
                cr_expect_eq(ts_group_id(l, (ts_group)g, r), want[0], "layout %zu: %s group id of rank %d", li,
                             ts_group_names[g], r);
                for (int k = 1; k < m; k++)
                    cr_expect_eq(want[k] - want[k - 1], ts_group_stride(l, (ts_group)g),
                                 "layout %zu: %s group of rank %d is not evenly strided", li, ts_group_names[g], r);
                if (self == 0)
                    for (int k = 0; k < m; k++) covered[want[k]]++;
            }
            for (int r = 0; r < n; r++)
                cr_expect_eq(covered[r], 1, "layout %zu: rank %d is in %d %s groups", li, r, covered[r],
                             ts_group_names[g]);
        }
    }
}

/* Placement on a 72-GPU NVLink domain (NVL72): TP, then EP and CP, stay inside a domain; a
 * domain holds whole blocks of them and leaves the remainder idle. */
static int domain_of(const ts_layout *l, int rank) { return ts_rank_gpu(l, 72, rank) / 72; }

static void expect_groups_in_domains(const ts_layout *l, ts_group g) {
    int members[4096];
    for (int r = 0; r < ts_rank_count(l); r++) {
        int n = ts_group_size(l, g);
        ts_group_members(l, g, r, members);
        for (int k = 1; k < n; k++)
            cr_expect_eq(domain_of(l, members[k]), domain_of(l, members[0]),
                         "%s group of rank %d: member %d in domain %d, member %d in domain %d", ts_group_names[g], r,
                         members[k], domain_of(l, members[k]), members[0], domain_of(l, members[0]));
    }
}

Test(ranks, nvl72_domain_holds_tp_then_ep_and_cp) {
    /* EP64 over tp=1: blocks of 64, 8 GPUs of each rack idle. */
    ts_layout ep64 = layout_of(1, 1, 128, 2, 64);
    cr_assert_eq(ts_domain_block(&ep64, 72), 64);
    cr_assert_eq(ts_domain_ranks(&ep64, 72), 64);
    cr_expect_eq(ts_rank_gpu(&ep64, 72, 63), 63);
    cr_expect_eq(ts_rank_gpu(&ep64, 72, 64), 72, "rank 64 starts the second rack");
    cr_expect_eq(ts_rank_gpu(&ep64, 72, 200), 3 * 72 + 200 - 192, "rank 200: 9th of the fourth rack");
    expect_groups_in_domains(&ep64, TS_GROUP_EP);

    /* tp=4, cp=2, ep=8 (EP spans tp·ep = 32, CP tp·cp = 8): the block is 32, two per rack. */
    ts_layout mixed = layout_of(4, 2, 16, 1, 8);
    cr_assert_eq(ts_domain_block(&mixed, 72), 32);
    cr_assert_eq(ts_domain_ranks(&mixed, 72), 64);
    expect_groups_in_domains(&mixed, TS_GROUP_TP);
    expect_groups_in_domains(&mixed, TS_GROUP_CP);
    expect_groups_in_domains(&mixed, TS_GROUP_EP);

    /* tp=8, ep=9: EP spans exactly a rack, nothing idle. */
    ts_layout full = layout_of(8, 1, 18, 1, 9);
    cr_assert_eq(ts_domain_ranks(&full, 72), 72);
    expect_groups_in_domains(&full, TS_GROUP_EP);
    cr_expect_eq(ts_rank_gpu(&full, 72, 72), 72);

    /* tp=8 and a DP group wider than a rack: TP blocks of 8 fill all 72 GPUs. */
    ts_layout dense = layout_of(8, 1, 16, 1, 1);
    cr_assert_eq(ts_domain_block(&dense, 72), 8);
    cr_assert_eq(ts_domain_ranks(&dense, 72), 72);
    expect_groups_in_domains(&dense, TS_GROUP_TP);

    /* An 8-GPU HGX domain with the same EP64 layout: EP leaves the domain, TP (1) trivially not. */
    cr_assert_eq(ts_domain_ranks(&ep64, 8), 8);
    cr_expect_eq(ts_rank_gpu(&ep64, 8, 100), 100, "blocks of 8 fill 8-GPU domains: the rank order itself");
}
