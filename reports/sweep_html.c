/* The sweep as an HTML page: the table and line charts of throughput, MFU and cost per million
 * tokens against GPUs, one line per system (see sweep.h). Numbers are tagged with their path in
 * the sweep's JSON form (reports/markup.h); no timestamps or timings, so reruns match. */
#include "reports/sweep.h"

#include <math.h>
#include <stdlib.h>

#include "reports/markup.h"
#include "reports/svg.h"

static void table(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r) {
    fputs("<table>\n<tr><th class=\"r\">GPUs</th><th>system</th><th class=\"r\">batch</th><th class=\"r\">seq</th>"
          "<th>best layout</th><th class=\"r\">step s</th>"
          "<th class=\"r\">tokens/s</th><th class=\"r\">MFU %</th><th class=\"r\">USD per 1M tokens</th></tr>\n", f);
    for (int i = 0; i < r->n_rows; i++) {
        const ts_sweep_row *row = &r->rows[i];
        /* The recommendations stand out (bold, and said in words after the layout). */
        fputs(row->fastest || row->cheapest ? "<tr style=\"font-weight:bold\"><td class=\"r\">" : "<tr><td class=\"r\">",
              f);
        ts_html_numf(f, "", 0, row->gpus, "rows[%d].gpus", i);
        fputs("</td><td>", f);
        ts_html_strf(f, spec->systems[row->system].name, "rows[%d].system", i);
        fputs("</td><td class=\"r\">", f);
        ts_html_numf(f, "", 0, (double)row->global_batch, "rows[%d].global_batch", i);
        fputs("</td><td class=\"r\">", f);
        ts_html_numf(f, "", 0, (double)row->seq, "rows[%d].seq", i);
        if (!row->fits) {
            fputs("</td><td colspan=\"5\">", f);
            ts_html_strf(f, row->reason, "rows[%d].reason", i);
            fputs("</td></tr>\n", f);
            continue;
        }
        char text[256];
        ts_layout_format(&row->best.layout, text, sizeof text);
        fputs("</td><td><code>", f);
        ts_html_strf(f, text, "rows[%d].layout", i);
        fputs("</code>", f);
        if (row->fastest || row->cheapest)
            fprintf(f, " — recommended: %s%s%s", row->fastest ? "fastest" : "", row->fastest && row->cheapest ? ", " : "",
                    row->cheapest ? "cheapest per token" : "");
        fputs("</td><td class=\"r\">", f);
        ts_html_numf(f, "", 3, row->best.step_s, "rows[%d].step_s", i);
        fputs("</td><td class=\"r\">", f);
        ts_html_numf(f, "", 0, row->best.tokens_per_s, "rows[%d].tokens_per_s", i);
        fputs("</td><td class=\"r\">", f);
        ts_html_numf(f, "%", 1, row->best.mfu, "rows[%d].mfu", i);
        fputs("</td><td class=\"r\">", f);
        ts_html_numf(f, "", 4, row->cost_per_mtok, "rows[%d].cost_per_mtok", i);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* Which figure of a row a chart plots. */
typedef enum { PLOT_TOKENS, PLOT_MFU, PLOT_COST } plot;

static double plotted(const ts_sweep_row *row, plot p) {
    if (!row->fits) return NAN;
    return p == PLOT_TOKENS ? row->best.tokens_per_s : p == PLOT_MFU ? 100 * row->best.mfu : row->cost_per_mtok;
}

/* One line per (system, batch, seq) against GPUs: rows are GPU-major, so row i is series
 * i % per_count at count i / per_count; a series is named by its system, and by its batch and
 * sequence length when the sweep has several. */
static ts_status chart(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r, plot p, const char *title,
                       const char *y_label) {
    size_t n = (size_t)spec->n_gpus, per_count = n ? (size_t)r->n_rows / n : 0;
    int variants = (int)(per_count / (size_t)spec->n_systems);
    double *x = malloc(n * sizeof *x), *y = malloc(n * per_count * sizeof *y);
    const char **names = malloc(per_count * sizeof *names);
    char (*labels)[96] = malloc(per_count * sizeof *labels);
    ts_status res = TS_OK;
    if (x == NULL || y == NULL || names == NULL || labels == NULL) {
        res = TS_FAIL(TS_ERR_NOMEM, "out of memory drawing the sweep charts");
        goto exit;
    }
    for (size_t g = 0; g < n; g++) x[g] = spec->gpus[g];
    for (size_t k = 0; k < per_count; k++) {
        const ts_sweep_row *row = &r->rows[k];
        if (variants > 1)
            snprintf(labels[k], sizeof labels[k], "%s, %lld × %lld", spec->systems[row->system].name,
                     (long long)row->global_batch, (long long)row->seq);
        else snprintf(labels[k], sizeof labels[k], "%s", spec->systems[row->system].name);
        names[k] = labels[k];
    }
    for (int i = 0; i < r->n_rows; i++) y[((size_t)i % per_count) * n + (size_t)i / per_count] = plotted(&r->rows[i], p);
    ts_svg_lines c = {.title = title, .y_label = y_label, .points = (int)n, .x = x, .series = (int)per_count,
                      .series_names = names, .y = y};
    res = ts_svg_line_chart(f, &c);
exit:
    free(x);
    free(y);
    free(names);
    free(labels);
    return res;
}

ts_status ts_sweep_write_html(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r) {
    char title[256];
    snprintf(title, sizeof title, "Tessera sweep: %s", spec->model.name);
    ts_html_begin(f, title);
    fputs("<h1>Tessera sweep: ", f);
    ts_html_escape(f, spec->model.name);
    fputs("</h1>\n<p>The best layout of ", f);
    ts_html_str(f, "model", spec->model.name);
    fputs(" at each GPU count and system, for a global batch of ", f);
    ts_html_num(f, "global_batch", "", 0, (double)spec->train.global_batch);
    fputs(" sequences of ", f);
    ts_html_num(f, "seq", "", 0, (double)spec->train.seq);
    fputs(" tokens in ", f);
    ts_html_str(f, "dtype", ts_dtype_names[spec->train.dtype]);
    if (spec->fix) {
        fputs(" with the pins ", f);
        ts_html_str(f, "fix", spec->fix);
    }
    fputs(". Cost at", f);
    int example = 0;
    for (int s = 0; s < spec->n_systems; s++) {
        example |= ts_sweep_price_is_example(spec, s);
        fprintf(f, "%s ", s ? "," : "");
        ts_html_numf(f, "", 2, ts_sweep_price(spec, s), "prices.%s", spec->systems[s].name);
        fputs(" USD per GPU-hour on ", f);
        ts_html_escape(f, spec->systems[s].name);
    }
    fputs(example ? " (a price no --price set is the system file's example, else the default).</p>\n" : ".</p>\n", f);
    TS_CHECK(chart(f, spec, r, PLOT_TOKENS, "Throughput", "tokens/s"));
    TS_CHECK(chart(f, spec, r, PLOT_MFU, "Model FLOPs utilisation", "MFU %"));
    TS_CHECK(chart(f, spec, r, PLOT_COST, "Cost per million tokens", "USD / 1M tokens"));
    if (spec->capacity) TS_CHECK(ts_capacity_write_html(f, spec, r, spec->capacity));
    fputs("<h2>Best layout per GPU count and system</h2>\n", f);
    table(f, spec, r);
    fputs("<p class=\"note\">Gaps in the lines are GPU counts where nothing fits. Made by "
          "<code>tessera sweep</code>; the planner's closed form (see the README's model section).</p>\n", f);
    ts_html_end(f);
    if (ferror(f)) return TS_FAIL(TS_ERR_IO, "write failed while writing the sweep page");
    return TS_OK;
}
