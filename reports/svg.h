/* Inline SVG charts for the HTML pages: stacked horizontal bars with an optional limit line,
 * a pipeline Gantt chart, and line charts over GPU counts. Plain SVG 1.1 elements, coordinates
 * printed with fixed formats, so a page is byte-identical from run to run and renders anywhere
 * (no scripts, no fonts to fetch). Labels are escaped; the charts show no report numbers except
 * axis ticks, which are <text class="tick"> (the tables beside them carry the tagged numbers,
 * reports/markup.h). */
#ifndef TS_SVG_H
#define TS_SVG_H

#include <stdio.h>

#include "reports/timeline.h"

/* rows × series values, drawn as one bar per row, series stacked left to right. */
typedef struct {
    int rows, series;
    const char *const *row_labels;   /* (rows) */
    const char *const *series_names; /* (series), in the legend */
    const char *const *colors;       /* (series) CSS colours */
    const double *values;            /* (rows × series), display units, >= 0 */
    const char *axis_label;          /* under the x axis, e.g. "GB per GPU" */
    double limit;                    /* a dashed vertical line at this value; <= 0: none */
    const char *limit_label;         /* beside the line */
} ts_svg_bars;

void ts_svg_stacked_bars(FILE *f, const ts_svg_bars *c);

/* The timeline's rows ("stage 0", ...) as bars coloured by phase, with a time axis in seconds
 * and a phase legend. */
void ts_svg_gantt(FILE *f, const ts_timeline *t);
/* The same on an axis of axis_span_s ≥ t->span_s seconds, so that two timelines drawn on one axis
 * (simulated and measured) compare by eye. */
void ts_svg_gantt_on(FILE *f, const ts_timeline *t, double axis_span_s);

/* Lines over GPU counts (x on a log2 axis, one tick per count), one line per series; NaN y
 * values leave gaps (nothing fits there). */
typedef struct {
    const char *title;               /* above the plot */
    const char *y_label;             /* beside the y axis */
    int points;
    const double *x;                 /* (points) GPU counts, increasing */
    int series;
    const char *const *series_names; /* (series) */
    const double *y;                 /* (series × points) */
} ts_svg_lines;

ts_status ts_svg_line_chart(FILE *f, const ts_svg_lines *c);

#endif
