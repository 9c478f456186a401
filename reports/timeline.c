/* Pixel-resolution pipeline timelines (see timeline.h). */
#include "reports/timeline.h"

#include <math.h>
#include <stdlib.h>

ts_status ts_timeline_init(ts_timeline *t, int rows, int columns, double span_s) {
    *t = (ts_timeline){.rows = rows, .columns = columns, .span_s = span_s};
    if (rows < 1 || columns < 1 || !(span_s > 0) || !isfinite(span_s))
        return TS_FAIL(TS_ERR_INPUT, "timeline: %d rows, %d columns over %g s: expected at least one of each "
                       "over a positive span", rows, columns, span_s);
    size_t cells = (size_t)rows * (size_t)columns;
    t->phase = malloc(cells * sizeof *t->phase);
    t->busy_s = calloc(cells * TS_PHASE_COUNT, sizeof *t->busy_s);
    if (t->phase == NULL || t->busy_s == NULL) {
        ts_timeline_free(t);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory for a %d × %d timeline", rows, columns);
    }
    return TS_OK;
}

void ts_timeline_add(ts_timeline *t, int row, double start_s, double end_s, int phase) {
    if (row < 0 || row >= t->rows || phase < 0 || phase >= TS_PHASE_COUNT) return;
    double w = t->span_s / t->columns;
    start_s = fmax(start_s, 0);
    end_s = fmin(end_s, t->span_s);
    if (!(end_s > start_s)) return;
    int c0 = (int)(start_s / w), c1 = (int)(end_s / w);
    if (c1 >= t->columns) c1 = t->columns - 1;
    double *busy = t->busy_s + (size_t)row * (size_t)t->columns * TS_PHASE_COUNT;
    for (int c = c0; c <= c1; c++) {
        double lo = fmax(start_s, c * w), hi = fmin(end_s, (c + 1) * w);
        if (hi > lo) busy[(size_t)c * TS_PHASE_COUNT + (size_t)phase] += hi - lo;
    }
}

void ts_timeline_finish(ts_timeline *t) {
    double w = t->span_s / t->columns;
    for (size_t cell = 0; cell < (size_t)t->rows * (size_t)t->columns; cell++) {
        const double *b = t->busy_s + cell * TS_PHASE_COUNT;
        double total = 0, most = 0;
        int best = TS_TIMELINE_IDLE;
        for (int p = 0; p < TS_PHASE_COUNT; p++) {
            total += b[p];
            if (b[p] > most) most = b[p], best = p;
        }
        t->phase[cell] = (int8_t)(total >= 0.5 * w ? best : TS_TIMELINE_IDLE);
    }
    free(t->busy_s);
    t->busy_s = NULL;
}

void ts_timeline_free(ts_timeline *t) {
    free(t->phase);
    free(t->busy_s);
    t->phase = NULL;
    t->busy_s = NULL;
}

ts_status ts_timeline_from_sim(const ts_program *prog, const ts_sim_result *r, ts_timeline *out) {
    TS_CHECK(ts_timeline_init(out, prog->pp, TS_TIMELINE_COLUMNS, r->step_s));
    for (int s = 0; s < prog->pp; s++) {
        const ts_rank_spans *rk = NULL;
        for (int i = 0; i < r->n_ranks && rk == NULL; i++)
            if (r->ranks[i].stage == s) rk = &r->ranks[i];
        if (rk == NULL) continue;
        const ts_stage_program *sp = &prog->stages[s];
        for (int i = 0; i < sp->n_ops; i++)
            if (sp->ops[i].stream == TS_STREAM_COMPUTE)
                ts_timeline_add(out, s, rk->spans[i].start_s, rk->spans[i].end_s, sp->ops[i].phase);
    }
    ts_timeline_finish(out);
    return TS_OK;
}
