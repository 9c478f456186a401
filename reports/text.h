/* The report as text: Markdown (every section of the HTML page, its charts as the tables beside
 * them, numbers in the page's formats) and CSV (the layouts table, one row per layout, numbers in
 * the JSON form's units: bytes, seconds, fractions). Deterministic, for golden files. */
#ifndef TS_TEXT_H
#define TS_TEXT_H

#include <stdio.h>

#include "reports/report.h"

ts_status ts_report_write_markdown(const ts_report *r, FILE *f);
ts_status ts_report_write_csv(const ts_report *r, FILE *f);

#endif
