/* The table of op durations replacing the simulator's costs (see cost_override.h). */
#include "sim/cost_override.h"

#include <math.h>
#include <stdlib.h>

#include "program/ranks.h"

ts_status ts_cost_override_init(ts_cost_override *t, const ts_program *prog) {
    *t = (ts_cost_override){0};
    int n = ts_rank_count(&prog->layout);
    t->first = malloc(((size_t)n + 1) * sizeof *t->first);
    if (t->first == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory for %d ranks' op durations", n);
    t->n_ranks = n;
    t->first[0] = 0;
    for (int r = 0; r < n; r++) t->first[r + 1] = t->first[r] + prog->stages[ts_rank_coords(&prog->layout, r).pp].n_ops;
    t->dur_s = malloc(((size_t)t->first[n] + 1) * sizeof *t->dur_s);
    t->start_s = calloc((size_t)n + 1, sizeof *t->start_s);
    t->alone = calloc((size_t)t->first[n] + 1, sizeof *t->alone);
    if (t->dur_s == NULL || t->start_s == NULL || t->alone == NULL) {
        ts_cost_override_free(t);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for %lld op durations", (long long)t->first[n]);
    }
    for (int64_t i = 0; i < t->first[n]; i++) t->dur_s[i] = NAN;
    return TS_OK;
}

void ts_cost_override_free(ts_cost_override *t) {
    free(t->first);
    free(t->dur_s);
    free(t->start_s);
    free(t->alone);
    *t = (ts_cost_override){0};
}

/* TS_ERR_INPUT unless op `op` of `rank` is in the table. */
static ts_status check_key(const ts_cost_override *t, int rank, int op) {
    if (rank < 0 || rank >= t->n_ranks)
        return TS_FAIL(TS_ERR_INPUT, "op duration of rank %d: the layout has ranks 0 to %d", rank, t->n_ranks - 1);
    int64_t n_ops = t->first[rank + 1] - t->first[rank];
    if (op < 0 || op >= n_ops)
        return TS_FAIL(TS_ERR_INPUT, "op duration of rank %d op %d: its stage program has ops 0 to %lld", rank, op,
                       (long long)n_ops - 1);
    return TS_OK;
}

ts_status ts_cost_override_set_alone(ts_cost_override *t, int rank, int op) {
    TS_CHECK(check_key(t, rank, op));
    t->alone[t->first[rank] + op] = 1;
    return TS_OK;
}

ts_status ts_cost_override_set(ts_cost_override *t, int rank, int op, double dur_s) {
    TS_CHECK(check_key(t, rank, op));
    if (!isfinite(dur_s) || dur_s < 0)
        return TS_FAIL(TS_ERR_INPUT, "op duration of rank %d op %d: expected a finite number ≥ 0, got %g", rank, op,
                       dur_s);
    double *d = &t->dur_s[t->first[rank] + op];
    t->n_set += isnan(*d);
    *d = dur_s;
    return TS_OK;
}

ts_status ts_cost_override_set_start(ts_cost_override *t, int rank, double start_s) {
    if (rank < 0 || rank >= t->n_ranks || !isfinite(start_s) || start_s < 0)
        return TS_FAIL(TS_ERR_INPUT, "step start of rank %d: expected a rank below %d and a time ≥ 0, got %g", rank,
                       t->n_ranks, start_s);
    t->start_s[rank] = start_s;
    return TS_OK;
}
