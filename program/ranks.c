/* Rank order and group membership (see ranks.h). */
#include "program/ranks.h"

#include <limits.h>
#include <stddef.h>

#include "common/checked.h"

const char *const ts_group_names[] = {"tp", "cp", "dp", "pp", "dpcp", "ep", "edp", "etp", NULL};

int ts_rank_count(const ts_layout *l) {
    int64_t n, sizes[] = {l->tp, l->cp, l->dp, l->pp};
    return ts_mul_i64(sizes, 4, &n) && n >= 0 && n <= INT_MAX ? (int)n : -1;
}

ts_coords ts_rank_coords(const ts_layout *l, int rank) {
    ts_coords c;
    c.tp = rank % l->tp;
    rank /= l->tp;
    c.cp = rank % l->cp;
    rank /= l->cp;
    c.dp = rank % l->dp;
    c.pp = rank / l->dp;
    return c;
}

int ts_rank_of(const ts_layout *l, ts_coords c) {
    return c.tp + l->tp * (c.cp + l->cp * (c.dp + l->dp * c.pp));
}

int ts_group_size(const ts_layout *l, ts_group g) {
    switch (g) {
    case TS_GROUP_TP: return l->tp;
    case TS_GROUP_CP: return l->cp;
    case TS_GROUP_DP: return l->dp;
    case TS_GROUP_PP: return l->pp;
    case TS_GROUP_DPCP: return l->dp * l->cp;
    case TS_GROUP_EP: return l->ep;
    case TS_GROUP_EDP: return l->tp * l->dp * l->cp / (l->ep * ts_layout_etp(l));
    case TS_GROUP_ETP: return ts_layout_etp(l);
    default: return 1;
    }
}

int ts_group_stride(const ts_layout *l, ts_group g) {
    switch (g) {
    case TS_GROUP_TP: return 1;
    case TS_GROUP_CP: return l->tp;
    case TS_GROUP_DP: return l->tp * l->cp;
    case TS_GROUP_PP: return l->tp * l->cp * l->dp;
    case TS_GROUP_DPCP: return l->tp;
    case TS_GROUP_EP: return ts_layout_etp(l);
    case TS_GROUP_EDP: return ts_layout_etp(l) * l->ep;
    case TS_GROUP_ETP: return 1;
    default: return 1;
    }
}

int ts_group_members(const ts_layout *l, ts_group g, int rank, int *out) {
    int n = ts_group_size(l, g), stride = ts_group_stride(l, g);
    int first = ts_group_id(l, g, rank);
    int self = 0;
    for (int i = 0; i < n; i++) {
        out[i] = first + i * stride;
        if (out[i] == rank) self = i;
    }
    return self;
}

/* The lowest member of `rank`'s expert group g (EP, EDP, ETP): its position q in the stage
 * (ranks.h) with the group's own coordinate zeroed in q = etp_i + etp·(ep_i + ep·edp_i). */
static int expert_group_id(const ts_layout *l, ts_group g, int rank) {
    int stage = l->tp * l->cp * l->dp, etp = ts_layout_etp(l);
    int q = rank % stage, e = q % etp, p = q / etp % l->ep, d = q / (etp * l->ep);
    if (g == TS_GROUP_ETP) e = 0;
    else if (g == TS_GROUP_EP) p = 0;
    else d = 0;
    return rank - q + e + etp * (p + l->ep * d);
}

int ts_group_id(const ts_layout *l, ts_group g, int rank) {
    if (g == TS_GROUP_EP || g == TS_GROUP_EDP || g == TS_GROUP_ETP) return expert_group_id(l, g, rank);
    ts_coords c = ts_rank_coords(l, rank);
    switch (g) {
    case TS_GROUP_TP: c.tp = 0; break;
    case TS_GROUP_CP: c.cp = 0; break;
    case TS_GROUP_DP: c.dp = 0; break;
    case TS_GROUP_PP: c.pp = 0; break;
    case TS_GROUP_DPCP: c.cp = 0, c.dp = 0; break;
    default: break;
    }
    return ts_rank_of(l, c);
}

int ts_domain_block(const ts_layout *l, int domain_gpus) {
    int spans[] = {l->tp, l->tp * l->cp, l->tp * l->ep, l->tp * l->cp * l->dp};
    int n = (int)(sizeof spans / sizeof spans[0]), block = 1;
    for (int i = 0; i < n; i++) {
        if (spans[i] > domain_gpus || spans[i] <= block) continue;
        int nests = 1;
        for (int j = 0; j < n && nests; j++)
            if (spans[j] <= spans[i] && spans[i] % spans[j] != 0) nests = 0;
        if (nests) block = spans[i];
    }
    return block;
}

int ts_domain_ranks(const ts_layout *l, int domain_gpus) {
    int block = ts_domain_block(l, domain_gpus);
    return domain_gpus / block * block;
}

int ts_rank_gpu(const ts_layout *l, int domain_gpus, int rank) {
    int per = ts_domain_ranks(l, domain_gpus);
    return rank / per * domain_gpus + rank % per;
}
