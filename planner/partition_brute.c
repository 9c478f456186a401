/* The optimum by enumeration (see partition.h): every contiguous split of the layers into the
 * pp·vpp virtual stages (each at least one layer) × every allowed policy per stage, evaluated by
 * ts_partition_evaluate — C(L-1, V-1)·K^pp candidates, so only for small instances. The readable
 * reference the GLPK program (partition_ilp.c) is diffed against in the tests. */
#include "planner/partition.h"

#include <math.h>
#include <string.h>

#include "planner/partition_impl.h"

typedef struct {
    const ts_partition_problem *p;
    ts_split cur, *best;
    double best_obj_s, best_sum_s;
    int found;
} brute_ctx;


/* Every policy assignment for the current layer split. */
static void brute_policies(brute_ctx *b, int stage) {
    const ts_partition_problem *p = b->p;
    if (stage == p->pp) {
        if (!ts_partition_evaluate(p, &b->cur)) return;
        double t = ts_partition_objective_s(p, &b->cur), sum = ts_part_sum_s(&b->cur);
        if (!b->found || t < b->best_obj_s || (t == b->best_obj_s && sum < b->best_sum_s)) {
            int V = p->pp * p->vpp;
            memcpy(b->best->layers, b->cur.layers, (size_t)V * sizeof *b->cur.layers);
            memcpy(b->best->recompute, b->cur.recompute, (size_t)p->pp * sizeof *b->cur.recompute);
            ts_partition_evaluate(p, b->best);
            b->best_obj_s = t;
            b->best_sum_s = sum;
            b->found = 1;
        }
        return;
    }
    for (int k = 0; k < K_POL; k++) {
        if (!policy_allowed(p, k)) continue;
        b->cur.recompute[stage] = (ts_recompute)k;
        brute_policies(b, stage + 1);
    }
}

/* Every composition of the remaining layers into virtual stages g..V-1, each at least one. */
static void brute_layers(brute_ctx *b, int g, int left) {
    int V = b->p->pp * b->p->vpp;
    if (g == V - 1) {
        b->cur.layers[g] = left;
        if (ts_part_chunks_even(b->p, b->cur.layers)) brute_policies(b, 0);
        return;
    }
    for (int n = 1; n <= left - (V - 1 - g); n++) {
        b->cur.layers[g] = n;
        brute_layers(b, g + 1, left - n);
    }
}

static double binomial(int n, int k) {
    double r = 1;
    for (int i = 1; i <= k; i++) r = r * (n - k + i) / i;
    return r;
}

ts_status ts_partition_brute(const ts_partition_problem *p, ts_split *out) {
    int V = p->pp * p->vpp;
    if (V > p->layers)
        return TS_FAIL(TS_ERR_INFEASIBLE, "%d×%d virtual stages exceed %d layers", p->pp, p->vpp, p->layers);
    int n_pol = 0;
    for (int k = 0; k < K_POL; k++) n_pol += policy_allowed(p, k);
    double candidates = binomial(p->layers - 1, V - 1) * pow(n_pol, p->pp);
    if (candidates > 1e7)
        return TS_FAIL(TS_ERR_INPUT, "partition brute force: %.3g candidates, more than 10^7", candidates);
    brute_ctx b = {.p = p, .best = out};
    TS_CHECK(ts_split_init(out, p->pp, p->vpp));
    out->schedule = p->schedule;
    ts_status res = ts_split_init(&b.cur, p->pp, p->vpp);
    b.cur.schedule = p->schedule;
    if (res != TS_OK) {
        ts_split_free(out);
        return res;
    }
    brute_layers(&b, 0, p->layers);
    ts_split_free(&b.cur);
    out->objective_s = out->bound_s = b.best_obj_s;
    if (!b.found) {
        ts_split_free(out);
        return TS_FAIL(TS_ERR_INFEASIBLE, "no contiguous split of %d layers over %d×%d stages fits",
                       p->layers, p->pp, p->vpp);
    }
    return TS_OK;
}
