/* The best (GPU count, global batch) within a budget (see budget.h). */
#include "planner/budget.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/problem.h"

/* The objective per sequence of a layout of problem q (see budget.h). */
static double key_of(const ts_problem *q, ts_objective obj, const ts_eval *e) {
    if (obj == TS_OBJ_TIME) return e->step_s / (double)q->train.global_batch;
    return ts_objective_value(q, obj, e);
}

/* Keeps the best TS_BUDGET_KEEP choices, sorted (insertion; ties keep the first found, that is
 * the larger count, then the batch nearer the request). */
static void offer(ts_budget_result *r, const ts_budget_choice *c) {
    int pos = r->n < TS_BUDGET_KEEP ? r->n : TS_BUDGET_KEEP - 1;
    if (r->n == TS_BUDGET_KEEP && !(c->key < r->choices[pos].key)) return;
    while (pos > 0 && c->key < r->choices[pos - 1].key) {
        r->choices[pos] = r->choices[pos - 1];
        pos--;
    }
    r->choices[pos] = *c;
    if (r->n < TS_BUDGET_KEEP) r->n++;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The batches for count g within [lo, hi]: the request, and the multiples of each divisor d of
 * g nearest it (d is a possible dp; dp·mbs must divide the batch), sorted by distance from the
 * request, duplicates removed. Returns how many (at most cap). */
static int batches_for(int g, int64_t want, int64_t lo, int64_t hi, int64_t *out, int cap) {
    int n = 0;
    out[n++] = want;
    for (int64_t e = 1; e * e <= g && n + 4 <= cap; e++) { /* each divisor pair e, g/e */
        if (g % e) continue;
        int64_t pair[2] = {e, g / e};
        for (int k = 0; k < (pair[0] == pair[1] ? 1 : 2); k++) {
            int64_t d = pair[k], below = want / d * d, above = below + d;
            if (below >= lo && below >= 1) out[n++] = below;
            if (above <= hi) out[n++] = above;
        }
    }
    qsort(out, (size_t)n, sizeof *out, cmp_i64);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || out[i] != out[k - 1]) out[k++] = out[i];
    /* Nearest the request first: a tie in the objective then keeps the smaller change. */
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && llabs(out[j] - want) < llabs(out[j - 1] - want); j--) {
            int64_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return k;
}

/* The next GPU count below g: whole nodes (the multiple of a node below g first), and below one
 * node every count. */
static int next_count(int g, int gpn) {
    if (g <= gpn) return g - 1;
    return g % gpn ? g / gpn * gpn : g - gpn;
}

/* One (count, batch): its best layout offered. Nothing valid or nothing fitting there is
 * expected and cleared. */
static ts_status search_one(const ts_problem *base, const ts_search_opts *so, const ts_partition_opts *po, int g,
                            int64_t batch, ts_budget_result *out) {
    ts_problem q;
    ts_train t = base->train;
    t.global_batch = batch;
    TS_CHECK(ts_problem_init(&q, &base->model, &base->sys, &t, g));
    ts_search_opts o = *so;
    o.top_k = 1;
    ts_search_result r;
    ts_status st = po ? ts_search_partitioned(&q, &o, po, &r) : ts_search(&q, &o, &r);
    out->searched++;
    if (st == TS_OK) {
        ts_budget_choice c = {.gpus = g, .global_batch = batch, .best = r.best[0]};
        c.key = key_of(&q, so->objective, &c.best);
        offer(out, &c);
    }
    ts_search_result_free(&r);
    if (st == TS_ERR_INFEASIBLE || st == TS_ERR_INPUT) {
        ts_error_clear();
        st = TS_OK;
    }
    return st;
}

ts_status ts_budget_search(const ts_problem *base, const ts_search_opts *so, const ts_partition_opts *po,
                           const ts_budget_opts *bo, ts_budget_result *out) {
    memset(out, 0, sizeof *out);
    if (bo->gpus_max < 1) return TS_FAIL(TS_ERR_INPUT, "--gpus-max: expected at least 1 GPU, got %d", bo->gpus_max);
    if (!(bo->batch_tolerance >= 0 && bo->batch_tolerance < 1))
        return TS_FAIL(TS_ERR_INPUT, "--batch-tolerance: expected a fraction in [0, 1), got %g", bo->batch_tolerance);
    out->choices = calloc(TS_BUDGET_KEEP, sizeof *out->choices);
    if (out->choices == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the budget's choices");
    int64_t want = base->train.global_batch;
    int64_t lo = (int64_t)ceil((double)want * (1 - bo->batch_tolerance));
    int64_t hi = (int64_t)floor((double)want * (1 + bo->batch_tolerance));
    if (lo < 1) lo = 1;
    int gpn = base->sys.gpus_per_node > 0 ? base->sys.gpus_per_node : 1;
    /* Model FLOPs per sequence at every GPU's dense peak: no layout of g GPUs does a sequence
     * faster than flops_per_seq / (g · peak). */
    double flops_per_seq = base->model_flops_per_step / (double)want;
    double peak = base->sys.peak_flops[base->train.dtype];
    int64_t batches[2 * 4096 + 1];
    ts_status st = TS_OK;
    for (int g = bo->gpus_max; g >= 1 && out->searched < TS_BUDGET_MAX_SEARCHES;
         g = bo->exact_gpus ? 0 : next_count(g, gpn)) {
        if (so->objective == TS_OBJ_TIME && out->n > 0 && peak > 0 &&
            flops_per_seq / ((double)g * peak) > out->choices[0].key) {
            for (; g >= 1; g = next_count(g, gpn)) out->pruned_counts++;
            break;
        }
        int nb = batches_for(g, want, lo, hi, batches, (int)(sizeof batches / sizeof batches[0]));
        for (int i = 0; i < nb && out->searched < TS_BUDGET_MAX_SEARCHES; i++)
            TS_CHECK_GOTO(search_one(base, so, po, g, batches[i], out), st, fail);
    }
    if (out->n > 0) return TS_OK;
    return TS_FAIL(TS_ERR_INFEASIBLE, "nothing fits %s on at most %d × %s with a global batch of %lld%s: %d "
                   "(GPU count, batch) pairs searched", base->model.name, bo->gpus_max, base->sys.name,
                   (long long)want, bo->batch_tolerance > 0 ? " within the tolerance" : "", out->searched);
fail:
    ts_budget_result_free(out);
    return st;
}

void ts_budget_result_free(ts_budget_result *r) {
    free(r->choices);
    r->choices = NULL;
    r->n = 0;
}
