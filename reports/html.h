/* The report as one self-contained HTML page: inline CSS and SVG, no scripts, nothing fetched.
 *
 * Sections: the question and its answer in one sentence; capacity (time, GPU-hours, cost,
 * energy); the top layouts; memory per GPU as stacked bars against the usable-HBM line; the step
 * time split per layout as stacked bars; the best layout's simulated pipeline timeline (and the
 * measured one and measured figures when the report has a run); the assumptions. Every number
 * shown is a tagged span keyed by its path in the report's JSON form (reports/markup.h), and the
 * page holds no timestamp, so the same report always gives the same bytes. */
#ifndef TS_HTML_H
#define TS_HTML_H

#include <stdio.h>

#include "reports/report.h"

ts_status ts_report_write_html(const ts_report *r, FILE *f);

#endif
