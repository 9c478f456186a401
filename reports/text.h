/* The report as text: Markdown (every section of the HTML page, its charts as the tables beside
 * them, numbers in the page's formats) and CSV, deterministic, for golden files.
 *
 * CSV is one tidy table per file: one header row, one observation per row, one variable per
 * column, numbers in the JSON form's units (bytes, seconds, fractions) named in the column
 * ("step_s", "memory_total_bytes"). The tables, in the order they are written:
 *   layouts          one row per layout of the plan, re-evaluated
 *   question, answer, simulation
 *                    one row each: the scalars of that object of the JSON form
 *   stages           one row per pipeline stage of the simulated best layout
 *   op_kinds         one row per op kind: simulated (and, with a run, measured) s per rank
 *   capacity, measured (with a run only), system, training
 *                    one row each, as above (system and training are assumptions.system and
 *                    .training; measured.step_s's median, p10, p90 are step_median_s, ...)
 *   gemm_efficiency  one row per point of the system's GEMM efficiency curve
 *   sources          one row per formula source
 * Every table but layouts is walked from the JSON form, so the two cannot drift apart. */
#ifndef TS_TEXT_H
#define TS_TEXT_H

#include <stdio.h>

#include "reports/report.h"

ts_status ts_report_write_markdown(const ts_report *r, FILE *f);

#define TS_REPORT_CSV_MAX_FILES 16
/* The files ts_report_write_csv wrote, in order; the caller owns the struct. */
typedef struct {
    int n;
    char path[TS_REPORT_CSV_MAX_FILES][4096];
} ts_report_csv_files;

/* Writes every table to its own file. `dest` ending in '/' or naming an existing directory:
 * DEST/TABLE.csv; otherwise a prefix: DEST-TABLE.csv (a trailing ".csv" of DEST dropped, so
 * -o out/plan.csv writes out/plan-layouts.csv). The directory must exist (TS_ERR_INPUT naming it
 * otherwise), and no target may be a directory. All files are first written to temporaries
 * beside their targets, then renamed into place one after another: a failure before the renames
 * removes every temporary and leaves no file; a rename failing (rare: the checks above come
 * first) leaves the files before it in place and no temporary. No file is ever half-written.
 * `written` lists the files in place, also after a failure. */
ts_status ts_report_write_csv(const ts_report *r, const char *dest, ts_report_csv_files *written);

#endif
