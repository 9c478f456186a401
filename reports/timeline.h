/* A pipeline timeline at pixel resolution: what the compute stream of one rank per stage does
 * over one step, for drawing as a Gantt chart.
 *
 * A step can hold hundreds of thousands of ops (every GEMM of every layer and micro-batch), far
 * more than a chart can show or an SVG should carry. So the step is cut into `columns` equal
 * slices per row; every op adds its overlap with each slice to its phase (ts_phase), and a slice
 * takes the phase that kept it busiest, or none (idle) when ops cover less than half of it. The
 * chart then draws one rectangle per run of slices of the same phase: at most `columns` per row,
 * exact to one slice, and the same for simulated spans and measured ones. */
#ifndef TS_TIMELINE_H
#define TS_TIMELINE_H

#include <stdint.h>

#include "sim/engine.h"

#define TS_TIMELINE_COLUMNS 1000
#define TS_TIMELINE_IDLE (-1)

typedef struct {
    int rows;        /* pipeline stages */
    int columns;
    double span_s;   /* the columns cover [0, span_s) */
    int8_t *phase;   /* (rows × columns) dominant ts_phase, or TS_TIMELINE_IDLE, once finished */
    double *busy_s;  /* (rows × columns × TS_PHASE_COUNT) accumulated busy time; freed by finish */
} ts_timeline;

/* An empty timeline of `rows` rows over span_s > 0; ts_timeline_free releases it. */
ts_status ts_timeline_init(ts_timeline *t, int rows, int columns, double span_s);
/* Adds one op of `phase` on `row` from start_s to end_s (clipped to the span). */
void ts_timeline_add(ts_timeline *t, int row, double start_s, double end_s, int phase);
/* Picks each column's phase; no more ts_timeline_add afterwards. */
void ts_timeline_finish(ts_timeline *t);
void ts_timeline_free(ts_timeline *t);

/* The compute stream of each stage's first simulated rank in `r`, a simulation of `prog`. */
ts_status ts_timeline_from_sim(const ts_program *prog, const ts_sim_result *r, ts_timeline *out);

#endif
