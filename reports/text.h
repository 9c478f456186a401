/* The report as text: Markdown (every section of the HTML page, its charts as the tables beside
 * them, numbers in the page's formats) and CSV (numbers in the JSON form's units: bytes, seconds,
 * fractions): the layouts table, one row per layout, then an empty line and "section,key,value"
 * rows holding every value of the JSON form's other sections, key being the value's path under
 * its section ("stages[0].busy_s"). Deterministic, for golden files. */
#ifndef TS_TEXT_H
#define TS_TEXT_H

#include <stdio.h>

#include "reports/report.h"

ts_status ts_report_write_markdown(const ts_report *r, FILE *f);
ts_status ts_report_write_csv(const ts_report *r, FILE *f);

#endif
