/* Inline SVG charts (see svg.h). Geometry is in user units (CSS pixels at 100%); every
 * coordinate is printed with one decimal. */
#include "reports/svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/markup.h"

#define FONT "font-family=\"Helvetica,Arial,sans-serif\""

/* Colour-blind-friendly palette (Tableau 10). */
static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
#define N_PALETTE (sizeof palette / sizeof palette[0])

static const char *const phase_colors[TS_PHASE_COUNT] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
                                                         "#9c755f"};

/* The colour of a phase in Gantt charts and legends; light grey for idle. */
static const char *phase_color(int phase) {
    return phase >= 0 && phase < TS_PHASE_COUNT ? phase_colors[phase] : "#eeeeee";
}

/* A "nice" tick step (1, 2 or 5 × 10^k) giving about five intervals up to `max`. */
static double nice_step(double max) {
    if (!(max > 0) || !isfinite(max)) return 1;
    double raw = max / 5, mag = pow(10, floor(log10(raw))), norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

/* An axis tick label: 0, 0.25, 40, 500k, 1.5M. */
static void tick_label(char *buf, size_t cap, double v) {
    if (fabs(v) >= 1e6) snprintf(buf, cap, "%gM", v / 1e6);
    else if (fabs(v) >= 1e4) snprintf(buf, cap, "%gk", v / 1e3);
    else snprintf(buf, cap, "%g", v);
}

/* A <text> element of class `cls` (none when NULL). */
static void text_el(FILE *f, const char *cls, double x, double y, const char *anchor, int size, const char *s) {
    fputs("<text", f);
    if (cls) fprintf(f, " class=\"%s\"", cls);
    fprintf(f, " x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\" " FONT ">", x, y, anchor, size);
    ts_html_escape(f, s);
    fputs("</text>\n", f);
}

static void text_at(FILE *f, double x, double y, const char *anchor, int size, const char *s) {
    text_el(f, NULL, x, y, anchor, size, s);
}

/* An axis tick label: class "tick" tells it from the report's numbers, which the tables beside
 * the charts carry tagged (the tests allow untagged numbers in ticks only). */
static void tick_at(FILE *f, double x, double y, const char *anchor, const char *s) {
    text_el(f, "tick", x, y, anchor, 11, s);
}

/* A legend of coloured squares and names from (x, y), left to right. */
static void legend(FILE *f, double x, double y, int n, const char *const *names, const char *const *colors) {
    for (int i = 0; i < n; i++) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"11\" height=\"11\" fill=\"%s\"/>\n", x, y - 10, colors[i]);
        text_at(f, x + 15, y, "start", 12, names[i]);
        x += 28 + 7.0 * (double)strlen(names[i]);
    }
}

/* Vertical grid lines and tick labels for [0, axis_max] along [x0, x0 + w]. */
static void x_ticks(FILE *f, double x0, double w, double y_top, double y_bottom, double axis_max, double step) {
    for (int i = 0; i * step <= axis_max * (1 + 1e-9); i++) {
        double v = i * step, x = x0 + w * v / axis_max;
        char label[32];
        tick_label(label, sizeof label, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", x, y_top, x,
                y_bottom);
        tick_at(f, x, y_bottom + 14, "middle", label);
    }
}

void ts_svg_stacked_bars(FILE *f, const ts_svg_bars *c) {
    /* Row labels are right-aligned against the plot: room for the longest at about 6.2 px per
     * character of 11 px Helvetica, so a long label is not cut off at the left edge. */
    size_t longest = 0;
    for (int r = 0; r < c->rows; r++)
        if (strlen(c->row_labels[r]) > longest) longest = strlen(c->row_labels[r]);
    const double width = 1100, label_w = fmax(300, 6.2 * (double)longest + 16), right = 40;
    const double plot_w = width - label_w - right, top = 36, bar_h = 20, gap = 8;
    double height = top + c->rows * (bar_h + gap) + 44;
    double max = c->limit > 0 ? c->limit : 0;
    for (int r = 0; r < c->rows; r++) {
        double sum = 0;
        for (int s = 0; s < c->series; s++) sum += c->values[r * c->series + s];
        max = fmax(max, sum);
    }
    double step = nice_step(max * 1.05), axis_max = step * ceil(max * 1.05 / step);
    if (!(axis_max > 0)) axis_max = 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
            width, height, width, height);
    legend(f, label_w, 16, c->series, c->series_names, c->colors);
    double y_bottom = top + c->rows * (bar_h + gap);
    x_ticks(f, label_w, plot_w, top - 4, y_bottom, axis_max, step);
    for (int r = 0; r < c->rows; r++) {
        double y = top + r * (bar_h + gap), x = label_w;
        text_at(f, label_w - 8, y + bar_h - 6, "end", 11, c->row_labels[r]);
        for (int s = 0; s < c->series; s++) {
            double w = plot_w * c->values[r * c->series + s] / axis_max;
            if (!(w > 0)) continue;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", x, y,
                    w, bar_h, c->colors[s]);
            ts_html_escape(f, c->series_names[s]);
            fputs("</title></rect>\n", f);
            x += w;
        }
    }
    if (c->limit > 0) {
        double x = label_w + plot_w * c->limit / axis_max;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" stroke-width=\"2\" "
                   "stroke-dasharray=\"6,4\"/>\n", x, top - 6, x, y_bottom);
        text_at(f, x - 4, top - 8, "end", 11, c->limit_label);
    }
    text_at(f, label_w + plot_w / 2, height - 6, "middle", 12, c->axis_label);
    fputs("</svg>\n", f);
}

void ts_svg_gantt(FILE *f, const ts_timeline *t) { ts_svg_gantt_on(f, t, t->span_s); }

void ts_svg_gantt_on(FILE *f, const ts_timeline *t, double axis_span_s) {
    if (!(axis_span_s >= t->span_s)) axis_span_s = t->span_s;
    const double width = 1100, label_w = 90, right = 30, axis_w = width - label_w - right, top = 36;
    const double plot_w = axis_span_s > 0 ? axis_w * t->span_s / axis_span_s : axis_w;
    double row_h = t->rows <= 16 ? 18 : fmax(3, 288.0 / t->rows), gap = row_h >= 12 ? 4 : 1;
    double y_bottom = top + t->rows * (row_h + gap), height = y_bottom + 40;
    double step = nice_step(axis_span_s), col_w = plot_w / t->columns;
    int label_every = row_h >= 10 ? 1 : (int)ceil(12 / (row_h + gap));
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
            width, height, width, height);
    const char *names[TS_PHASE_COUNT + 1], *colors[TS_PHASE_COUNT + 1];
    for (int p = 0; p < TS_PHASE_COUNT; p++) names[p] = ts_phase_names[p], colors[p] = phase_colors[p];
    names[TS_PHASE_COUNT] = "idle", colors[TS_PHASE_COUNT] = phase_color(TS_TIMELINE_IDLE);
    legend(f, label_w, 16, TS_PHASE_COUNT + 1, names, colors);
    x_ticks(f, label_w, axis_w, top - 4, y_bottom, axis_span_s, step);
    for (int r = 0; r < t->rows; r++) {
        double y = top + r * (row_h + gap);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", label_w, y, plot_w,
                row_h, phase_color(TS_TIMELINE_IDLE));
        if (r % label_every == 0) {
            char label[32];
            snprintf(label, sizeof label, "stage %d", r);
            text_at(f, label_w - 8, y + row_h / 2 + 4, "end", 11, label);
        }
        const int8_t *ph = t->phase + (size_t)r * (size_t)t->columns;
        for (int c = 0; c < t->columns;) {
            int end = c + 1;
            while (end < t->columns && ph[end] == ph[c]) end++;
            if (ph[c] != TS_TIMELINE_IDLE)
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                        label_w + c * col_w, y, (end - c) * col_w, row_h, phase_colors[ph[c]]);
            c = end;
        }
    }
    text_at(f, label_w + axis_w / 2, height - 6, "middle", 12, "time in the step (s)");
    fputs("</svg>\n", f);
}

ts_status ts_svg_line_chart(FILE *f, const ts_svg_lines *c) {
    const double width = 1000, height = 300, left = 80, right = 190, top = 34, bottom = 48;
    const double plot_w = width - left - right, plot_h = height - top - bottom;
    double max = 0;
    for (int i = 0; i < c->series * c->points; i++)
        if (isfinite(c->y[i])) max = fmax(max, c->y[i]);
    double step = nice_step(max * 1.05), axis_max = step * ceil(max * 1.05 / step);
    if (!(axis_max > 0)) axis_max = 1, step = 0.2;
    double lx0 = log2(c->x[0]), lx1 = log2(c->x[c->points - 1]);
    double *xs = malloc((size_t)c->points * sizeof *xs);
    if (xs == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory drawing \"%s\"", c->title);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
            width, height, width, height);
    text_at(f, left, 18, "start", 14, c->title);
    for (int i = 0; i * step <= axis_max * (1 + 1e-9); i++) {
        double v = i * step, y = top + plot_h * (1 - v / axis_max);
        char label[32];
        tick_label(label, sizeof label, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", left, y,
                left + plot_w, y);
        tick_at(f, left - 6, y + 4, "end", label);
    }
    int n = c->points;
    for (int p = 0; p < n; p++) {
        xs[p] = lx1 > lx0 ? left + plot_w * (log2(c->x[p]) - lx0) / (lx1 - lx0) : left + plot_w / 2;
        char label[32];
        snprintf(label, sizeof label, "%g", c->x[p]);
        tick_at(f, xs[p], top + plot_h + 16, "middle", label);
    }
    text_at(f, left + plot_w / 2, height - 8, "middle", 12, "GPUs");
    fprintf(f, "<text transform=\"translate(16,%.1f) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\" " FONT ">",
            top + plot_h / 2);
    ts_html_escape(f, c->y_label);
    fputs("</text>\n", f);
    for (int s = 0; s < c->series; s++) {
        const char *color = palette[(size_t)s % N_PALETTE];
        const double *y = c->y + (size_t)s * (size_t)c->points;
        int in_line = 0;
        for (int p = 0; p < n; p++) {
            if (!isfinite(y[p])) {
                if (in_line) fputs("\"/>\n", f);
                in_line = 0;
                continue;
            }
            double py = top + plot_h * (1 - y[p] / axis_max);
            if (!in_line)
                fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
            fprintf(f, "%s%.1f,%.1f", in_line ? " " : "", xs[p], py);
            in_line = 1;
        }
        if (in_line) fputs("\"/>\n", f);
        for (int p = 0; p < n; p++)
            if (isfinite(y[p]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", xs[p],
                        top + plot_h * (1 - y[p] / axis_max), color);
        double ly = top + 14 + 20 * s;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>\n", left + plot_w + 16, ly - 5,
                color);
        text_at(f, left + plot_w + 36, ly, "start", 12, c->series_names[s]);
    }
    free(xs);
    fputs("</svg>\n", f);
    return TS_OK;
}
