/* Markdown and CSV forms of the report (see text.h). */
#include "reports/text.h"

#include <math.h>
#include <string.h>

#include "reports/markup.h"

static const char *const mem_names[] = {"weights", "grads", "optimizer", "activations", "buffers"};

static void mem_values(const ts_memory *m, double *v) {
    v[0] = m->weights, v[1] = m->grads, v[2] = m->optimizer, v[3] = m->activations, v[4] = m->buffers;
}

static const char *const time_names[] = {"compute", "bubble", "tp", "cp", "ep", "pp", "dp", "optimizer"};
static const char *const time_keys[] = {"compute", "pp_bubble", "tp_comm", "cp_comm",
                                        "ep_comm", "pp_comm",   "dp_comm", "optimizer"};
#define N_TIME 8

static void time_values(const ts_time_split *t, double *v) {
    v[0] = t->compute, v[1] = t->pp_bubble, v[2] = t->tp_comm, v[3] = t->cp_comm;
    v[4] = t->ep_comm, v[5] = t->pp_comm, v[6] = t->dp_comm, v[7] = t->optimizer;
}

/* Markdown table cells must not contain '|'. */
static void md_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else fputc(*s, f);
    }
}

static void md_question(const ts_report *r, FILE *f) {
    const ts_problem *pb = &r->pb;
    const ts_eval *b = &r->layouts[0];
    char text[256];
    ts_layout_format(&b->layout, text, sizeof text);
    fprintf(f, "# Tessera report: %s on %d × %s\n\n", pb->model.name, pb->gpus, pb->sys.name);
    fprintf(f, "**Question.** Which parallel layout trains %s fastest on %d × %s (%s), with a global batch of "
               "%lld sequences of %lld tokens in %s with %s attention, among the plan's %d layouts?\n\n",
            pb->model.name, pb->gpus, pb->sys.name, pb->sys.gpu_name, (long long)pb->train.global_batch,
            (long long)pb->train.seq, ts_dtype_names[pb->train.dtype],
            pb->train.flash_attention ? "fused (flash)" : "unfused", r->n_layouts);
    fprintf(f, "**Answer.** `%s` trains it in %.3f s per step, %.0f tokens/s, at %.1f%% MFU (%.1f TFLOP/s per "
               "GPU), using %.1f of %.1f usable GB per GPU.\n\n",
            text, b->step_s, b->tokens_per_s, 100 * b->mfu, b->tflops_per_gpu, b->mem.total / 1e9,
            pb->usable_bytes / 1e9);
}

static void md_capacity(const ts_report *r, FILE *f) {
    const ts_capacity *c = &r->capacity;
    fputs("## What it takes to train\n\n| figure | value | unit |\n|---|---:|---|\n", f);
    fprintf(f, "| tokens to train on | %.4g | tokens |\n", c->tokens);
    fprintf(f, "| throughput of the best layout | %.0f | tokens/s |\n", c->tokens_per_s);
    fprintf(f, "| time to train (tokens ÷ tokens/s) | %.1f | days |\n", c->train_days);
    fprintf(f, "| GPU-hours | %.0f | GPU-hours |\n", c->gpu_hours);
    fprintf(f, "| cost at %.2f USD per GPU-hour%s | %.0f | USD |\n", r->opts.price_per_gpu_hour,
            r->opts.price_is_default ? " (the default price; set it with --price)" : "", c->cost_usd);
    if (r->pb.sys.power_w > 0)
        fprintf(f, "| energy at %.0f W per GPU (board power only) | %.0f | kWh |\n", r->pb.sys.power_w,
                c->energy_kwh);
    fputc('\n', f);
}

static void md_layouts(const ts_report *r, FILE *f) {
    fputs("## Top layouts\n\n| # | layout | micro-batches | memory GB/GPU | step s | tokens/s | TFLOP/s per GPU "
          "| MFU % |\n|---:|---|---:|---:|---:|---:|---:|---:|\n", f);
    for (int i = 0; i < r->n_layouts; i++) {
        const ts_eval *e = &r->layouts[i];
        char text[256];
        ts_layout_format(&e->layout, text, sizeof text);
        fprintf(f, "| %d | `%s` | %d | %.1f | %.3f | %.0f | %.1f | %.1f |\n", i + 1, text, e->layout.microbatches,
                e->mem.total / 1e9, e->step_s, e->tokens_per_s, e->tflops_per_gpu, 100 * e->mfu);
    }
    fputs("\n## Memory per GPU (worst rank), GB\n\n| # |", f);
    for (int k = 0; k < 5; k++) fprintf(f, " %s |", mem_names[k]);
    fprintf(f, " total |\n|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < r->n_layouts; i++) {
        double v[5];
        mem_values(&r->layouts[i].mem, v);
        fprintf(f, "| %d |", i + 1);
        for (int k = 0; k < 5; k++) fprintf(f, " %.1f |", v[k] / 1e9);
        fprintf(f, " %.1f |\n", r->layouts[i].mem.total / 1e9);
    }
    fprintf(f, "\nUsable per GPU: %.1f GB (HBM less the system's reserve and allocator head-room).\n\n",
            r->pb.usable_bytes / 1e9);
    fputs("## Where the step time goes, s (exposed communication only)\n\n| # |", f);
    for (int k = 0; k < N_TIME; k++) fprintf(f, " %s |", time_names[k]);
    fputs(" step |\n|---:|", f);
    for (int k = 0; k <= N_TIME; k++) fputs("---:|", f);
    fputc('\n', f);
    for (int i = 0; i < r->n_layouts; i++) {
        double v[N_TIME];
        time_values(&r->layouts[i].time, v);
        fprintf(f, "| %d |", i + 1);
        for (int k = 0; k < N_TIME; k++) fprintf(f, " %.3f |", v[k]);
        fprintf(f, " %.3f |\n", r->layouts[i].step_s);
    }
    fputc('\n', f);
}

static void md_timeline(const ts_report *r, FILE *f) {
    char text[256];
    ts_layout_format(&r->prog.layout, text, sizeof text);
    fprintf(f, "## Pipeline timeline of the best layout\n\nOne training step of `%s` (%d micro-batches, %lld ops), "
               "simulated op by op on one rank per stage: %.4f s against %.4f s by the closed form; pipeline "
               "bubble %.1f%% of the step.\n\n| stage | busy s | bubble s | exposed comm s |\n|---:|---:|---:|---:|\n",
            text, r->prog.layout.microbatches, (long long)r->prog.total_ops, r->sim.step_s, r->layouts[0].step_s,
            100 * r->sim.bubble_fraction);
    for (int s = 0; s < r->prog.pp; s++)
        fprintf(f, "| %d | %.4f | %.4f | %.4f |\n", s, r->sim.stages[s].busy_s, r->sim.stages[s].bubble_s,
                r->sim.stages[s].exposed_comm_s);
    if (r->has_run) {
        const ts_run_summary *m = &r->run;
        char best[256];
        ts_layout_format(&r->layouts[0].layout, best, sizeof best);
        fprintf(f, "\n### Measured\n\n%s ran `%s`%s", r->run_file, m->layout,
                strcmp(m->layout, best) == 0 ? " (the best layout)" : " — not the best layout above, so compare with care");
        if (m->ranks) fprintf(f, " on %d ranks", m->ranks);
        if (m->steps) fprintf(f, " for %d steps", m->steps);
        fprintf(f, ": step time median %.4f s (p10 %.4f s, p90 %.4f s) against %.4f s simulated; loss %.4f → %.4f.\n",
                m->step_median_s, m->step_p10_s, m->step_p90_s, r->sim.step_s, m->loss_first, m->loss_last);
    }
    fprintf(f, "\n| op kind | simulated s per rank |%s\n|---|---:|%s\n", r->has_run ? " measured s per rank |" : "",
            r->has_run ? "---:|" : "");
    for (int k = 0; k < TS_OP_KIND_COUNT; k++) {
        fprintf(f, "| %s | %.4f |", ts_op_kind_names[k], r->sim.kind_s[k] / r->prog.pp);
        if (r->has_run) fprintf(f, " %.4f |", r->run.kind_s[k]);
        fputc('\n', f);
    }
    fputc('\n', f);
}

static void md_figures(FILE *f, const ts_report_figure *fig, int n) {
    fputs("| figure | value | unit |\n|---|---:|---|\n", f);
    for (int i = 0; i < n; i++) {
        double shown = fig[i].value / ts_html_unit_scale(fig[i].unit);
        fprintf(f, "| %s | ", fig[i].label);
        if (fig[i].decimals >= 0) fprintf(f, "%.*f", fig[i].decimals, shown);
        else fprintf(f, "%.*g", -fig[i].decimals, shown);
        fprintf(f, " | %s |\n", fig[i].unit);
    }
    fputc('\n', f);
}

static void md_assumptions(const ts_report *r, FILE *f) {
    const ts_system *s = &r->pb.sys;
    ts_report_figure figs[TS_REPORT_MAX_FIGURES];
    fprintf(f, "## Assumptions\n\n### System: %s (%s)\n\nSource: ", s->name, s->gpu_name);
    md_text(f, s->source);
    fputs("\n\n", f);
    md_figures(f, figs, ts_report_system_figures(r, figs));
    fputs("GEMM efficiency (achieved ÷ peak) by FLOPs of one GEMM, log-linear between points: ", f);
    for (int i = 0; i < s->gemm_eff.n; i++)
        fprintf(f, "%s%.3g FLOPs → %.0f%%", i ? "; " : "", s->gemm_eff.flops[i], 100 * s->gemm_eff.eff[i]);
    fprintf(f, ".\n\n### Training\n\n%s compute and activations, %s attention.\n\n", ts_dtype_names[r->pb.train.dtype],
            r->pb.train.flash_attention ? "fused (flash)" : "unfused");
    md_figures(f, figs, ts_report_training_figures(r, figs));
    fputs("### Formulas and their sources\n\n", f);
    for (int i = 0; ts_report_sources[i]; i++) fprintf(f, "- %s\n", ts_report_sources[i]);
}

ts_status ts_report_write_markdown(const ts_report *r, FILE *f) {
    md_question(r, f);
    md_capacity(r, f);
    md_layouts(r, f);
    md_timeline(r, f);
    md_assumptions(r, f);
    if (ferror(f)) return TS_FAIL(TS_ERR_IO, "write failed while writing the Markdown report");
    return TS_OK;
}

/* One CSV field: quoted, with quotes doubled, when it holds a comma, a quote or a line break
 * (RFC 4180 §2.6-2.7); as is otherwise. */
static void csv_field(FILE *f, const char *s) {
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A JSON number as a CSV value: integers (counts, bytes) exactly, other numbers to ten
 * significant digits, which is all the report's figures carry and keeps the golden file stable
 * under last-bit differences of the arithmetic. */
static void csv_number(FILE *f, double v) {
    if (v == floor(v) && fabs(v) < 1e15) fprintf(f, "%.0f", v);
    else fprintf(f, "%.10g", v);
}

/* The scalars under `item` as "section,key,value" rows, key being the path below the section
 * ("stages[0].busy_s"); `path` (room `cap`) holds the path so far, `len` chars of it. */
static ts_status csv_section_rows(FILE *f, const char *section, const cJSON *item, char *path, size_t len,
                                  size_t cap) {
    if (cJSON_IsObject(item) || cJSON_IsArray(item)) {
        int i = 0;
        for (const cJSON *c = item->child; c; c = c->next, i++) {
            int n = cJSON_IsArray(item) ? snprintf(path + len, cap - len, "[%d]", i)
                                        : snprintf(path + len, cap - len, "%s%s", len ? "." : "", c->string);
            if (n < 0 || len + (size_t)n >= cap)
                return TS_FAIL(TS_ERR_IO, "writing the CSV report: the key %s.%s... is longer than %zu characters",
                               section, path, cap - 1);
            TS_CHECK(csv_section_rows(f, section, c, path, len + (size_t)n, cap));
        }
        return TS_OK;
    }
    csv_field(f, section);
    fputc(',', f);
    csv_field(f, path);
    fputc(',', f);
    if (cJSON_IsNumber(item)) csv_number(f, item->valuedouble);
    else if (cJSON_IsBool(item)) fputs(cJSON_IsTrue(item) ? "true" : "false", f);
    else if (cJSON_IsString(item)) csv_field(f, item->valuestring);
    fputc('\n', f);
    return TS_OK;
}

ts_status ts_report_write_csv(const ts_report *r, FILE *f) {
    fputs("rank,layout,dp,tp,pp,cp,ep,sp,zero,mbs,microbatches,vpp,schedule,recompute,worst_stage", f);
    for (int k = 0; k < 5; k++) fprintf(f, ",memory_%s_bytes", mem_names[k]);
    fputs(",memory_total_bytes,step_s", f);
    for (int k = 0; k < N_TIME; k++) fprintf(f, ",%s_s", time_keys[k]);
    fputs(",tokens_per_s,tflops_per_gpu,hw_tflops_per_gpu,mfu\n", f);
    for (int i = 0; i < r->n_layouts; i++) {
        const ts_eval *e = &r->layouts[i];
        const ts_layout *l = &e->layout;
        char text[256];
        ts_layout_format(l, text, sizeof text);
        fprintf(f, "%d,", i + 1);
        csv_field(f, text);
        fprintf(f, ",%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%s,%s,%d", l->dp, l->tp, l->pp, l->cp, l->ep, l->sp, l->zero,
                l->mbs, l->microbatches, l->vpp, ts_schedule_names[l->schedule], ts_recompute_names[l->recompute],
                e->worst_stage);
        double m[5], t[N_TIME];
        mem_values(&e->mem, m);
        time_values(&e->time, t);
        for (int k = 0; k < 5; k++) fprintf(f, ",%.0f", m[k]);
        fprintf(f, ",%.0f,%.6f", e->mem.total, e->step_s);
        for (int k = 0; k < N_TIME; k++) fprintf(f, ",%.6f", t[k]);
        fprintf(f, ",%.1f,%.3f,%.3f,%.6f\n", e->tokens_per_s, e->tflops_per_gpu, e->hw_tflops_per_gpu, e->mfu);
    }
    /* The rest of the report, walked from its JSON form so the two cannot drift apart: each
     * object at the top (question, answer, simulation, capacity, measured, assumptions); not the
     * layouts array (the table above) nor the top-level scalars (the plan's file name would make
     * the same report differ by where the plan lies). */
    cJSON *root = NULL;
    TS_CHECK(ts_report_to_json(r, &root));
    fputs("\nsection,key,value\n", f);
    char path[256];
    ts_status res = TS_OK;
    for (const cJSON *s = root->child; s && res == TS_OK; s = s->next) {
        if (!cJSON_IsObject(s)) continue;
        path[0] = '\0';
        res = csv_section_rows(f, s->string, s, path, 0, sizeof path);
    }
    cJSON_Delete(root);
    TS_CHECK(res);
    if (ferror(f)) return TS_FAIL(TS_ERR_IO, "write failed while writing the CSV report");
    return TS_OK;
}
