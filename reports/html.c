/* The report's HTML page (see html.h). */
#include "reports/html.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "reports/markup.h"
#include "reports/svg.h"

#define MAX_CHART_ROWS 10 /* bars drawn per chart: the best ten layouts */
/* Said in words under the charts, as the page shows no number that is not in its JSON form. */
#define MAX_CHART_ROWS_WORD "ten"
_Static_assert(MAX_CHART_ROWS == 10, "MAX_CHART_ROWS_WORD names MAX_CHART_ROWS");

static const char *const mem_names[] = {"weights", "grads", "optimizer", "activations", "buffers"};
static const char *const mem_colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f"};
#define N_MEM 5

/* The step split: JSON key under time_s, legend name, colour. */
static const struct {
    const char *key, *name, *color;
} time_parts[] = {{"compute", "compute", "#4e79a7"},     {"pp_bubble", "pipeline bubble", "#bab0ac"},
                  {"tp_comm", "TP comm", "#f28e2b"},      {"cp_comm", "CP comm", "#edc948"},
                  {"ep_comm", "EP comm", "#b07aa1"},      {"pp_comm", "PP send/recv", "#ff9da7"},
                  {"dp_comm", "DP/ZeRO comm", "#e15759"}, {"optimizer", "optimizer", "#59a14f"}};
#define N_TIME (sizeof time_parts / sizeof time_parts[0])

static double mem_part(const ts_memory *m, int i) {
    const double v[N_MEM] = {m->weights, m->grads, m->optimizer, m->activations, m->buffers};
    return v[i];
}

static double time_part(const ts_time_split *t, size_t i) {
    const double v[N_TIME] = {t->compute, t->pp_bubble, t->tp_comm, t->cp_comm,
                              t->ep_comm, t->pp_comm,   t->dp_comm, t->optimizer};
    return v[i];
}

/* Chart rows are labelled "#3 dp4 tp1 pp4 cp2 vpp5": dp, tp and pp always, then each other
 * field only where the charted layouts differ in it, so the labels are as short as they can be
 * while no two read the same (the layouts table gives each in full). */
#define N_EXTRA 8 /* cp, ep, sp, zero, mbs, vpp, schedule, recompute */

static int extra_value(const ts_layout *l, int k) {
    const int v[N_EXTRA] = {l->cp, l->ep, l->sp, l->zero, l->mbs, l->vpp, (int)l->schedule, (int)l->recompute};
    return v[k];
}

static int extra_text(const ts_layout *l, int k, char *buf, size_t cap) {
    static const char *const prefix[N_EXTRA] = {"cp", "ep", "sp", "zero", "mbs", "vpp"};
    if (k == 6) return snprintf(buf, cap, " %s", ts_schedule_names[l->schedule]);
    if (k == 7) return snprintf(buf, cap, " rc-%s", ts_recompute_names[l->recompute]);
    return snprintf(buf, cap, " %s%d", prefix[k], extra_value(l, k));
}

static void short_label(const ts_layout *l, int rank, const int *shown, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "#%d dp%d tp%d pp%d", rank, l->dp, l->tp, l->pp);
    for (int k = 0; k < N_EXTRA && n < cap; k++)
        if (shown[k]) n += (size_t)extra_text(l, k, buf + n, cap - n);
}

static void th(FILE *f, const char *cls, const char *text) {
    fprintf(f, "<th%s>", cls[0] ? " class=\"r\"" : "");
    ts_html_escape(f, text);
    fputs("</th>", f);
}

static void td_num(FILE *f, const char *unit, int decimals, double v, const char *keyfmt, ...)
    __attribute__((format(printf, 5, 6)));
static void td_num(FILE *f, const char *unit, int decimals, double v, const char *keyfmt, ...) {
    char key[160];
    va_list ap;
    va_start(ap, keyfmt);
    vsnprintf(key, sizeof key, keyfmt, ap);
    va_end(ap);
    fputs("<td class=\"r\">", f);
    ts_html_num(f, key, unit, decimals, v);
    fputs("</td>", f);
}

static void question_and_answer(const ts_report *r, FILE *f) {
    const ts_problem *pb = &r->pb;
    const ts_eval *b = &r->layouts[0];
    char text[256];
    ts_layout_format(&b->layout, text, sizeof text);
    fputs("<h1>Tessera report: ", f);
    ts_html_str(f, "question.model", pb->model.name);
    fputs(" on ", f);
    ts_html_num(f, "question.gpus", "", 0, pb->gpus);
    fputs(" × ", f);
    ts_html_str(f, "question.system", pb->sys.name);
    fputs("</h1>\n<h2>The question and the answer</h2>\n<p>Which parallel layout trains ", f);
    ts_html_str(f, "question.model", pb->model.name);
    fputs(" fastest on ", f);
    ts_html_num(f, "question.gpus", "", 0, pb->gpus);
    fputs(" × ", f);
    ts_html_str(f, "question.system", pb->sys.name);
    fputs(" (", f);
    ts_html_str(f, "question.gpu", pb->sys.gpu_name);
    fputs("), with a global batch of ", f);
    ts_html_num(f, "question.global_batch", "", 0, (double)pb->train.global_batch);
    fputs(" sequences of ", f);
    ts_html_num(f, "question.seq", "", 0, (double)pb->train.seq);
    fputs(" tokens in ", f);
    ts_html_str(f, "question.dtype", ts_dtype_names[pb->train.dtype]);
    fprintf(f, "%s, among the plan's ", pb->train.flash_attention ? " with fused (flash) attention" : " with unfused attention");
    ts_html_num(f, "question.layouts", "", 0, r->n_layouts);
    fputs(" layouts?</p>\n<p class=\"answer\"><code>", f);
    ts_html_str(f, "answer.layout", text);
    fputs("</code> trains it in ", f);
    ts_html_num(f, "answer.step_s", "", 3, b->step_s);
    fputs(" s per step (a measured step likely ", f);
    ts_html_num(f, "answer.band_lo_s", "", 3, r->band_lo_s);
    fputs("-", f);
    ts_html_num(f, "answer.band_hi_s", "", 3, r->band_hi_s);
    fputs(" s), ", f);
    ts_html_num(f, "answer.tokens_per_s", "", 0, b->tokens_per_s);
    fputs(" tokens/s, at ", f);
    ts_html_num(f, "answer.mfu", "%", 1, b->mfu);
    fputs("% MFU (", f);
    ts_html_num(f, "answer.tflops_per_gpu", "", 1, b->tflops_per_gpu);
    fputs(" TFLOP/s per GPU), using ", f);
    ts_html_num(f, "answer.memory_bytes", "GB", 1, b->mem.total);
    fputs(" of ", f);
    ts_html_num(f, "answer.usable_bytes", "GB", 1, pb->usable_bytes);
    fputs(r->tight ? " usable GB per GPU (tight: within 5% of the line), on the " : " usable GB per GPU, on the ", f);
    ts_html_str(f, "answer.stack", pb->train.stack.name);
    fputs(" stack.</p>\n", f);
    if (!r->band_on_gpu) {
        fputs("<p><b>Band.</b> No published run behind it was measured on the ", f);
        ts_html_str(f, "question.gpu", pb->sys.gpu_name);
        fputs(": the band is that of runs on ", f);
        ts_html_str(f, "answer.band_gpus", r->band_gpus);
        fputs(", and may not hold on this GPU (docs/calibration-and-validation.md).</p>\n", f);
    }
    if (r->tie[0]) {
        fputs("<p><b>Tie.</b> ", f);
        ts_html_str(f, "answer.tie", r->tie);
        fputs(".</p>\n", f);
    }
    if (r->against[0]) {
        fputs("<p><b>Against the named layout.</b> ", f);
        ts_html_str(f, "answer.against", r->against);
        fputs(".</p>\n", f);
    }
}

static void capacity(const ts_report *r, FILE *f) {
    const ts_capacity *c = &r->capacity;
    fputs("<h2>What it takes to train</h2>\n<table>\n<tr><th>figure</th><th class=\"r\">value</th><th>unit</th></tr>\n", f);
    fputs("<tr><td>tokens to train on</td><td class=\"r\">", f);
    ts_html_num(f, "capacity.tokens", "", -4, c->tokens);
    fputs("</td><td>tokens</td></tr>\n<tr><td>throughput of the best layout</td><td class=\"r\">", f);
    ts_html_num(f, "capacity.tokens_per_s", "", 0, c->tokens_per_s);
    fputs("</td><td>tokens/s</td></tr>\n<tr><td>time to train (tokens ÷ tokens/s)</td><td class=\"r\">", f);
    ts_html_num(f, "capacity.train_days", "", 1, c->train_days);
    fputs("</td><td>days</td></tr>\n<tr><td>GPU-hours</td><td class=\"r\">", f);
    ts_html_num(f, "capacity.gpu_hours", "", 0, c->gpu_hours);
    fputs("</td><td>GPU-hours</td></tr>\n<tr><td>cost at ", f);
    ts_html_num(f, "capacity.price_per_gpu_hour", "", 2, r->opts.price_per_gpu_hour);
    fprintf(f, " USD per GPU-hour%s</td><td class=\"r\">",
            r->opts.price_is_default ? " (the default price; set it with --price)" : "");
    ts_html_num(f, "capacity.cost_usd", "", 0, c->cost_usd);
    fputs("</td><td>USD</td></tr>\n", f);
    if (r->pb.sys.power_w > 0) {
        fputs("<tr><td>energy at ", f);
        ts_html_num(f, "capacity.power_w", "", 0, r->pb.sys.power_w);
        fputs(" W per GPU (board power only)</td><td class=\"r\">", f);
        ts_html_num(f, "capacity.energy_kwh", "", 0, c->energy_kwh);
        fputs("</td><td>kWh</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void layouts_table(const ts_report *r, FILE *f) {
    fputs("<h2>Top layouts</h2>\n<table>\n<tr>", f);
    th(f, "r", "#");
    th(f, "", "layout");
    th(f, "r", "micro-batches");
    th(f, "r", "memory GB/GPU");
    th(f, "r", "step s");
    th(f, "r", "tokens/s");
    th(f, "r", "TFLOP/s per GPU");
    th(f, "r", "MFU %");
    fputs("</tr>\n", f);
    for (int i = 0; i < r->n_layouts; i++) {
        const ts_eval *e = &r->layouts[i];
        char text[256];
        ts_layout_format(&e->layout, text, sizeof text);
        fprintf(f, "<tr%s>", i == 0 ? " class=\"best\"" : "");
        td_num(f, "", 0, i + 1, "layouts[%d].rank", i);
        fputs("<td><code>", f);
        ts_html_strf(f, text, "layouts[%d].layout", i);
        fputs("</code></td>", f);
        td_num(f, "", 0, e->layout.microbatches, "layouts[%d].microbatches", i);
        td_num(f, "GB", 1, e->mem.total, "layouts[%d].memory_bytes.total", i);
        td_num(f, "", 3, e->step_s, "layouts[%d].step_s", i);
        td_num(f, "", 0, e->tokens_per_s, "layouts[%d].tokens_per_s", i);
        td_num(f, "", 1, e->tflops_per_gpu, "layouts[%d].tflops_per_gpu", i);
        td_num(f, "%", 1, e->mfu, "layouts[%d].mfu", i);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* Row labels for the charts; the caller frees the array (the strings live in `buf`). */
static const char **chart_labels(const ts_report *r, int rows, char (*buf)[96]) {
    int shown[N_EXTRA] = {0};
    for (int k = 0; k < N_EXTRA; k++)
        for (int i = 1; i < rows; i++)
            shown[k] |= extra_value(&r->layouts[i].layout, k) != extra_value(&r->layouts[0].layout, k);
    const char **labels = malloc((size_t)rows * sizeof *labels);
    for (int i = 0; labels && i < rows; i++) {
        short_label(&r->layouts[i].layout, i + 1, shown, buf[i], sizeof buf[i]);
        labels[i] = buf[i];
    }
    return labels;
}

static ts_status memory_section(const ts_report *r, FILE *f) {
    int rows = r->n_layouts < MAX_CHART_ROWS ? r->n_layouts : MAX_CHART_ROWS;
    char buf[MAX_CHART_ROWS][96];
    double values[MAX_CHART_ROWS * N_MEM];
    const char **labels = chart_labels(r, rows, buf);
    if (labels == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory drawing the memory chart");
    for (int i = 0; i < rows; i++)
        for (int k = 0; k < N_MEM; k++) values[i * N_MEM + k] = mem_part(&r->layouts[i].mem, k) / 1e9;
    fputs("<h2>Memory per GPU (worst rank)</h2>\n", f);
    if (rows < r->n_layouts)
        fputs("<p class=\"note\">The chart shows the best " MAX_CHART_ROWS_WORD " layouts.</p>\n", f);
    ts_svg_bars c = {.rows = rows, .series = N_MEM, .row_labels = labels, .series_names = mem_names,
                     .colors = mem_colors, .values = values, .axis_label = "GB per GPU",
                     .limit = r->pb.usable_bytes / 1e9, .limit_label = "usable HBM"};
    ts_svg_stacked_bars(f, &c);
    free(labels);
    fputs("<table>\n<tr>", f);
    th(f, "r", "#");
    for (int k = 0; k < N_MEM; k++) th(f, "r", mem_names[k]);
    th(f, "r", "total GB");
    fputs("</tr>\n", f);
    for (int i = 0; i < r->n_layouts; i++) {
        const ts_memory *m = &r->layouts[i].mem;
        fputs("<tr>", f);
        td_num(f, "", 0, i + 1, "layouts[%d].rank", i);
        for (int k = 0; k < N_MEM; k++) {
            td_num(f, "GB", 1, mem_part(m, k), "layouts[%d].memory_bytes.%s", i, mem_names[k]);
        }
        td_num(f, "GB", 1, m->total, "layouts[%d].memory_bytes.total", i);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n<p class=\"note\">Usable memory is HBM less the system's reserve and allocator "
          "head-room (see the assumptions).</p>\n", f);
    return TS_OK;
}

static ts_status time_section(const ts_report *r, FILE *f) {
    int rows = r->n_layouts < MAX_CHART_ROWS ? r->n_layouts : MAX_CHART_ROWS;
    char buf[MAX_CHART_ROWS][96];
    double values[MAX_CHART_ROWS * N_TIME];
    const char *names[N_TIME], *colors[N_TIME];
    const char **labels = chart_labels(r, rows, buf);
    if (labels == NULL) return TS_FAIL(TS_ERR_NOMEM, "out of memory drawing the step-time chart");
    for (size_t k = 0; k < N_TIME; k++) names[k] = time_parts[k].name, colors[k] = time_parts[k].color;
    for (int i = 0; i < rows; i++)
        for (size_t k = 0; k < N_TIME; k++) values[(size_t)i * N_TIME + k] = time_part(&r->layouts[i].time, k);
    fputs("<h2>Where the step time goes</h2>\n", f);
    if (rows < r->n_layouts)
        fputs("<p class=\"note\">The chart shows the best " MAX_CHART_ROWS_WORD " layouts.</p>\n", f);
    ts_svg_bars c = {.rows = rows, .series = (int)N_TIME, .row_labels = labels, .series_names = names,
                     .colors = colors, .values = values, .axis_label = "seconds per step (closed form)"};
    ts_svg_stacked_bars(f, &c);
    free(labels);
    fputs("<table>\n<tr>", f);
    th(f, "r", "#");
    for (size_t k = 0; k < N_TIME; k++) th(f, "r", names[k]);
    th(f, "r", "step s");
    fputs("</tr>\n", f);
    for (int i = 0; i < r->n_layouts; i++) {
        fputs("<tr>", f);
        td_num(f, "", 0, i + 1, "layouts[%d].rank", i);
        for (size_t k = 0; k < N_TIME; k++) {
            td_num(f, "", 3, time_part(&r->layouts[i].time, k), "layouts[%d].time_s.%s", i, time_parts[k].key);
        }
        td_num(f, "", 3, r->layouts[i].step_s, "layouts[%d].step_s", i);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n<p class=\"note\">Communication columns count only what is exposed (not hidden "
          "behind compute).</p>\n", f);
    return TS_OK;
}

static void kinds_table(const ts_report *r, FILE *f) {
    fputs("<table>\n<tr><th>op kind</th><th class=\"r\">simulated s per rank</th>", f);
    if (r->has_run) fputs("<th class=\"r\">measured s per rank</th><th class=\"r\">error</th>", f);
    fputs("</tr>\n", f);
    for (int k = 0; k < TS_OP_KIND_COUNT; k++) {
        fputs("<tr><td>", f);
        ts_html_escape(f, ts_op_kind_names[k]);
        fputs("</td><td class=\"r\">", f);
        ts_html_numf(f, "", 4, r->sim.kind_s[k] / r->prog.pp, "simulation.kind_s_per_rank.%s", ts_op_kind_names[k]);
        if (r->has_run) {
            fputs("</td><td class=\"r\">", f);
            ts_html_numf(f, "", 4, r->run.kind_s[k], "measured.kind_s_per_rank.%s", ts_op_kind_names[k]);
            /* (simulated − measured) / measured, as tessera compare; blank where nothing ran. */
            double sim_s = r->sim.kind_s[k] / r->prog.pp, err = (sim_s - r->run.kind_s[k]) / r->run.kind_s[k];
            fputs("</td><td class=\"r\">", f);
            if (r->run.kind_s[k] > 0) {
                ts_html_numf(f, "%", 1, err, "measured.kind_error.%s", ts_op_kind_names[k]);
                fputs("%", f);
            }
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void measured_figures(const ts_report *r, FILE *f) {
    const ts_run_summary *m = &r->run;
    char best[256];
    ts_layout_format(&r->layouts[0].layout, best, sizeof best);
    fputs("<h3>Measured</h3>\n<p>", f);
    ts_html_str(f, "measured.file", r->run_file);
    fputs(" ran <code>", f);
    ts_html_str(f, "measured.layout", m->layout);
    fprintf(f, "</code>%s", strcmp(m->layout, best) == 0 ? " (the best layout)"
                                                       : " — not the best layout above, so compare with care");
    if (m->ranks) {
        fputs(" on ", f);
        ts_html_num(f, "measured.ranks", "", 0, m->ranks);
        fputs(" ranks", f);
    }
    if (m->steps) {
        fputs(" for ", f);
        ts_html_num(f, "measured.steps", "", 0, m->steps);
        fputs(" steps", f);
    }
    fputs(": step time median ", f);
    ts_html_num(f, "measured.step_s.median", "", 4, m->step_median_s);
    fputs(" s (p10 ", f);
    ts_html_num(f, "measured.step_s.p10", "", 4, m->step_p10_s);
    fputs(" s, p90 ", f);
    ts_html_num(f, "measured.step_s.p90", "", 4, m->step_p90_s);
    fputs(" s) against ", f);
    ts_html_num(f, "simulation.step_s", "", 4, r->sim.step_s);
    fputs(" s simulated; loss ", f);
    ts_html_num(f, "measured.loss_first", "", 4, m->loss_first);
    fputs(" → ", f);
    ts_html_num(f, "measured.loss_last", "", 4, m->loss_last);
    fputs(".</p>\n", f);
}

static void timeline_section(const ts_report *r, FILE *f) {
    char text[256];
    ts_layout_format(&r->prog.layout, text, sizeof text);
    fputs("<h2>Pipeline timeline of the best layout</h2>\n<p>One training step of <code>", f);
    ts_html_str(f, "simulation.layout", text);
    fputs("</code> (", f);
    ts_html_num(f, "simulation.microbatches", "", 0, r->prog.layout.microbatches);
    fputs(" micro-batches, ", f);
    ts_html_num(f, "simulation.ops", "", 0, (double)r->prog.total_ops);
    fputs(" ops), simulated op by op on one rank per stage: ", f);
    ts_html_num(f, "simulation.step_s", "", 4, r->sim.step_s);
    fputs(" s against ", f);
    ts_html_num(f, "simulation.closed_form_step_s", "", 4, r->layouts[0].step_s);
    fputs(" s by the closed form; pipeline bubble ", f);
    ts_html_num(f, "simulation.bubble_fraction", "%", 1, r->sim.bubble_fraction);
    fputs("% of the step. Compute ops are coloured by phase.</p>\n", f);
    /* Simulated and measured on one axis: the longer step's. */
    double axis_s = r->has_run_trace ? fmax(r->sim_timeline.span_s, r->run_timeline.span_s) : r->sim_timeline.span_s;
    ts_svg_gantt_on(f, &r->sim_timeline, axis_s);
    fputs("<table>\n<tr><th class=\"r\">stage</th><th class=\"r\">busy s</th><th class=\"r\">bubble s</th>"
          "<th class=\"r\">exposed comm s</th></tr>\n", f);
    for (int s = 0; s < r->prog.pp; s++) {
        fputs("<tr>", f);
        td_num(f, "", 0, s, "simulation.stages[%d].stage", s);
        td_num(f, "", 4, r->sim.stages[s].busy_s, "simulation.stages[%d].busy_s", s);
        td_num(f, "", 4, r->sim.stages[s].bubble_s, "simulation.stages[%d].bubble_s", s);
        td_num(f, "", 4, r->sim.stages[s].exposed_comm_s, "simulation.stages[%d].exposed_comm_s", s);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    if (r->has_run) measured_figures(r, f);
    kinds_table(r, f);
    if (r->has_run_trace) {
        fputs("<h3>Measured timeline</h3>\n<p>From ", f);
        ts_html_str(f, "measured.trace", r->run_trace_file);
        fputs(": the compute stream of each stage's first rank in the traced step, on the simulated timeline's "
              "axis.</p>\n", f);
        ts_svg_gantt_on(f, &r->run_timeline, axis_s);
    }
}

static void figures_table(FILE *f, const char *group, const ts_report_figure *fig, int n) {
    fputs("<table>\n", f);
    for (int i = 0; i < n; i++) {
        fputs("<tr><td>", f);
        ts_html_escape(f, fig[i].label);
        fputs("</td><td class=\"r\">", f);
        ts_html_numf(f, fig[i].unit, fig[i].decimals, fig[i].value, "assumptions.%s.%s", group, fig[i].key);
        fputs("</td><td>", f);
        ts_html_escape(f, fig[i].unit);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void assumptions(const ts_report *r, FILE *f) {
    const ts_system *s = &r->pb.sys;
    ts_report_figure figs[TS_REPORT_MAX_FIGURES];
    fputs("<h2>Assumptions</h2>\n<h3>System: ", f);
    ts_html_str(f, "assumptions.system.name", s->name);
    fputs(" (", f);
    ts_html_str(f, "assumptions.system.gpu", s->gpu_name);
    fputs(")</h3>\n<p class=\"note\">Source: ", f);
    ts_html_str(f, "assumptions.system.source", s->source);
    fputs("</p>\n", f);
    figures_table(f, "system", figs, ts_report_system_figures(r, figs));
    fputs("<p>GEMM efficiency (achieved ÷ peak) by FLOPs of one GEMM, log-linear between points: ", f);
    for (int i = 0; i < s->gemm_eff.n; i++) {
        fputs(i ? "; " : "", f);
        ts_html_numf(f, "", -3, s->gemm_eff.flops[i], "assumptions.system.gemm_efficiency_points[%d][0]", i);
        fputs(" FLOPs → ", f);
        ts_html_numf(f, "%", 0, s->gemm_eff.eff[i], "assumptions.system.gemm_efficiency_points[%d][1]", i);
        fputs("%", f);
    }
    fputs(".</p>\n<h3>Training</h3>\n<p>", f);
    ts_html_str(f, "assumptions.training.dtype", ts_dtype_names[r->pb.train.dtype]);
    fprintf(f, " compute and activations, %s attention.</p>\n",
            r->pb.train.flash_attention ? "fused (flash)" : "unfused");
    figures_table(f, "training", figs, ts_report_training_figures(r, figs));
    fputs("<h3>Formulas and their sources</h3>\n<ul class=\"sources\">\n", f);
    for (int i = 0; ts_report_sources[i]; i++) {
        fputs("<li>", f);
        ts_html_strf(f, ts_report_sources[i], "assumptions.sources[%d]", i);
        fputs("</li>\n", f);
    }
    fputs("</ul>\n<p class=\"note\">Made by <code>tessera report</code> from ", f);
    ts_html_str(f, "plan", r->plan_file);
    fputs(".</p>\n", f);
}

ts_status ts_report_write_html(const ts_report *r, FILE *f) {
    char title[256];
    snprintf(title, sizeof title, "Tessera report: %s on %d × %s", r->pb.model.name, r->pb.gpus, r->pb.sys.name);
    ts_html_begin(f, title);
    question_and_answer(r, f);
    capacity(r, f);
    layouts_table(r, f);
    TS_CHECK(memory_section(r, f));
    TS_CHECK(time_section(r, f));
    timeline_section(r, f);
    assumptions(r, f);
    ts_html_end(f);
    if (ferror(f)) return TS_FAIL(TS_ERR_IO, "write failed while writing the HTML report");
    return TS_OK;
}
