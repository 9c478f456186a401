/* HTML escaping, tagged numbers and the page frame (see markup.h). */
#include "reports/markup.h"

#include <stdarg.h>
#include <string.h>

#include "reports/numfmt.h"

void ts_html_escape(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

static const struct {
    const char *unit;
    double scale;
} units[] = {{"", 1}, {"%", 0.01}, {"MB", 1e6}, {"GB", 1e9}, {"GB/s", 1e9}, {"TB/s", 1e12},
             {"TFLOP/s", 1e12}, {"us", 1e-6}, {"W", 1}};

double ts_html_unit_scale(const char *unit) {
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(unit, units[i].unit) == 0) return units[i].scale;
    return 0;
}

/* Numbers for people (reports/numfmt.h): fixed decimals grouped by thousands, or -decimals
 * significant digits with words from a billion — never 6.898e+10. */
static void put_number(FILE *f, int decimals, double shown) {
    char buf[96];
    fputs(decimals >= 0 ? ts_fmt_fixed(shown, decimals, buf, sizeof buf)
                        : ts_fmt_sig_words(shown, -decimals, buf, sizeof buf), f);
}

void ts_html_num(FILE *f, const char *key, const char *unit, int decimals, double value) {
    fputs("<span class=\"n\" data-key=\"", f);
    ts_html_escape(f, key);
    fputs("\" data-unit=\"", f);
    ts_html_escape(f, unit);
    fputs("\">", f);
    put_number(f, decimals, value / ts_html_unit_scale(unit));
    fputs("</span>", f);
}

void ts_html_numf(FILE *f, const char *unit, int decimals, double value, const char *keyfmt, ...) {
    char key[256];
    va_list ap;
    va_start(ap, keyfmt);
    vsnprintf(key, sizeof key, keyfmt, ap);
    va_end(ap);
    ts_html_num(f, key, unit, decimals, value);
}

void ts_html_str(FILE *f, const char *key, const char *text) {
    fputs("<span class=\"s\" data-key=\"", f);
    ts_html_escape(f, key);
    fputs("\">", f);
    ts_html_escape(f, text);
    fputs("</span>", f);
}

void ts_html_strf(FILE *f, const char *text, const char *keyfmt, ...) {
    char key[256];
    va_list ap;
    va_start(ap, keyfmt);
    vsnprintf(key, sizeof key, keyfmt, ap);
    va_end(ap);
    ts_html_str(f, key, text);
}

/* Plain, printable, no web fonts: the page must render the same offline. */
static const char style[] =
    "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1d2329;"
    "margin:24px auto;max-width:1280px;padding:0 16px;line-height:1.45}"
    "h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.6em;"
    "border-bottom:1px solid #d0d7de;padding-bottom:.2em}"
    "p.answer{font-size:1.1em;background:#f3f7fb;border-left:4px solid #2f6fb0;padding:10px 14px}"
    "table{border-collapse:collapse;font-size:.9em;margin:8px 0}"
    "th,td{border:1px solid #d0d7de;padding:3px 7px}th{background:#f0f3f6;text-align:left}"
    "td.r,th.r{text-align:right}tr.best td{background:#eef7ee}"
    "span.n{font-variant-numeric:tabular-nums}"
    "code{font-size:.92em}svg{display:block;margin:6px 0}"
    ".note{color:#57606a;font-size:.9em}"
    "ul.sources li{font-size:.9em}";

void ts_html_begin(FILE *f, const char *title) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    ts_html_escape(f, title);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n", style);
}

void ts_html_end(FILE *f) { fputs("</body>\n</html>\n", f); }
