/* HTML building blocks shared by the report and sweep pages: escaping, tagged numbers, and the
 * page frame with its inline style sheet (no scripts, no network).
 *
 * Every number a page shows from its JSON form is printed through ts_html_num, which wraps it as
 *     <span class="n" data-key="layouts[0].step_s" data-unit="GB">12.3</span>
 * where data-key is the number's path in the page's JSON form ("a.b[2].c") and data-unit says
 * how the shown number relates to the JSON one: shown = json / scale(unit). Strings taken from
 * the JSON form are wrapped the same way by ts_html_str (class "s", no unit). Tests read these
 * spans back and compare them with the JSON form; ts_html_unit_scale is the table they use. */
#ifndef TS_MARKUP_H
#define TS_MARKUP_H

#include <stdio.h>

/* Writes `s` with & < > " ' escaped (HTML text and attribute values alike). */
void ts_html_escape(FILE *f, const char *s);

/* The scale of a data-unit: "" 1, "%" 0.01, "MB" 1e6, "GB" 1e9, "GB/s" 1e9, "TB/s" 1e12,
 * "TFLOP/s" 1e12, "us" 1e-6, "W" 1; 0 for an unknown unit. */
double ts_html_unit_scale(const char *unit);

/* A tagged number: value / scale(unit) printed with `decimals` digits after the point, or with
 * -decimals significant digits (%g) when decimals < 0. The unit itself is not printed. */
void ts_html_num(FILE *f, const char *key, const char *unit, int decimals, double value);
/* The same with the key built printf-style from `keyfmt` (e.g. "layouts[%d].mfu"). */
void ts_html_numf(FILE *f, const char *unit, int decimals, double value, const char *keyfmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A tagged string. */
void ts_html_str(FILE *f, const char *key, const char *text);
void ts_html_strf(FILE *f, const char *text, const char *keyfmt, ...) __attribute__((format(printf, 3, 4)));

/* "<!DOCTYPE html>...<body>" with the escaped title and the style sheet, and the closing tags. */
void ts_html_begin(FILE *f, const char *title);
void ts_html_end(FILE *f);

#endif
