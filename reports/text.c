/* Markdown and CSV forms of the report (see text.h). */
#include "reports/text.h"

#include "reports/numfmt.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/json.h"
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
    char tok[64];
    fprintf(f, "**Answer.** `%s` trains it in %.3f s per step (a measured step likely %.3f-%.3f s), %s tokens/s, "
               "at %.1f%% MFU (%.1f TFLOP/s per GPU), using %.1f of %.1f usable GB per GPU%s, on the %s stack.\n\n",
            text, b->step_s, r->band_lo_s, r->band_hi_s, ts_fmt_count(b->tokens_per_s, tok, sizeof tok), 100 * b->mfu,
            b->tflops_per_gpu, b->mem.total / 1e9, pb->usable_bytes / 1e9,
            r->tight ? " (tight: within 5% of the line)" : "", pb->train.stack.name);
    if (!r->band_on_gpu)
        fprintf(f, "**Band.** No published run behind it was measured on the %s: the band is that of runs on %s, "
                   "and may not hold on this GPU (docs/calibration-and-validation.md).\n\n",
                pb->sys.gpu_name, r->band_gpus);
    if (r->tie[0]) fprintf(f, "**Tie.** %s.\n\n", r->tie);
    if (r->against[0]) fprintf(f, "**Against the named layout.** %s.\n\n", r->against);
}

static void md_capacity(const ts_report *r, FILE *f) {
    const ts_capacity *c = &r->capacity;
    char a[64], b[64];
    fputs("## What it takes to train\n\n| figure | value | unit |\n|---|---:|---|\n", f);
    fprintf(f, "| tokens to train on | %s | tokens |\n", ts_fmt_count(c->tokens, a, sizeof a));
    fprintf(f, "| throughput of the best layout | %s | tokens/s |\n", ts_fmt_count(c->tokens_per_s, a, sizeof a));
    fprintf(f, "| time to train (tokens ÷ tokens/s) | %s | days |\n", ts_fmt_sig(c->train_days, 3, a, sizeof a));
    fprintf(f, "| GPU-hours | %s | GPU-hours |\n", ts_fmt_count(c->gpu_hours, a, sizeof a));
    fprintf(f, "| cost at %s per GPU-hour%s | %s | USD |\n", ts_fmt_usd(r->opts.price_per_gpu_hour, a, sizeof a),
            r->opts.price_is_default ? " (the default price; set it with --price)" : "",
            ts_fmt_usd(c->cost_usd, b, sizeof b));
    if (r->pb.sys.power_w > 0)
        fprintf(f, "| energy at %.0f W per GPU (board power only) | %s | kWh |\n", r->pb.sys.power_w,
                ts_fmt_count(c->energy_kwh, a, sizeof a));
    fputc('\n', f);
}

static void md_layouts(const ts_report *r, FILE *f) {
    fputs("## Top layouts\n\n| # | layout | micro-batches | memory GB/GPU | step s | tokens/s | TFLOP/s per GPU "
          "| MFU % |\n|---:|---|---:|---:|---:|---:|---:|---:|\n", f);
    for (int i = 0; i < r->n_layouts; i++) {
        const ts_eval *e = &r->layouts[i];
        char text[256];
        ts_layout_format(&e->layout, text, sizeof text);
        char tok[64];
        fprintf(f, "| %d | `%s` | %d | %.1f | %.3f | %s | %.1f | %.1f |\n", i + 1, text, e->layout.microbatches,
                e->mem.total / 1e9, e->step_s, ts_fmt_count(e->tokens_per_s, tok, sizeof tok), e->tflops_per_gpu,
                100 * e->mfu);
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
    for (int i = 0; i < s->gemm_eff.n; i++) {
        char fl[48];
        fprintf(f, "%s%s FLOPs → %.0f%%", i ? "; " : "", ts_fmt_sig_words(s->gemm_eff.flops[i], 3, fl, sizeof fl),
                100 * s->gemm_eff.eff[i]);
    }
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

static void csv_value(FILE *f, const cJSON *item) {
    if (cJSON_IsNumber(item)) csv_number(f, item->valuedouble);
    else if (cJSON_IsBool(item)) fputs(cJSON_IsTrue(item) ? "true" : "false", f);
    else if (cJSON_IsString(item)) csv_field(f, item->valuestring);
}

static int csv_is_scalar(const cJSON *item) { return !cJSON_IsObject(item) && !cJSON_IsArray(item); }

/* The column of member `child` of the nested object `parent`, the unit kept last: "step_s" and
 * "median" make "step_median_s". */
static void csv_nested_name(FILE *f, const char *parent, const char *child) {
    size_t n = strlen(parent);
    if (n > 2 && strcmp(parent + n - 2, "_s") == 0) fprintf(f, "%.*s_%s_s", (int)(n - 2), parent, child);
    else fprintf(f, "%s_%s", parent, child);
}

/* The header (`header` set) or the values of the row of `obj`: its scalars in member order, an
 * object of scalars in its place as one column each (csv_nested_name); arrays and the op kinds
 * are tables of their own. */
static void csv_cells(FILE *f, const cJSON *obj, int header) {
    const char *sep = "";
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (csv_is_scalar(c)) {
            fputs(sep, f), sep = ",";
            if (header) csv_field(f, c->string);
            else csv_value(f, c);
        } else if (cJSON_IsObject(c) && strcmp(c->string, "kind_s_per_rank") != 0 &&
                   strcmp(c->string, "kind_error") != 0) { /* per kind: the op_kinds table's */
            for (const cJSON *g = c->child; g; g = g->next) {
                fputs(sep, f), sep = ",";
                if (header) csv_nested_name(f, c->string, g->string);
                else csv_value(f, g);
            }
        }
    }
    fputc('\n', f);
}

/* A table's writer: `root` is the report's JSON form, `item` the member the table is made of
 * (NULL for layouts). */
typedef ts_status (*csv_writer)(const ts_report *r, const cJSON *root, const cJSON *item, FILE *f);

/* One row per layout, from the evaluated layouts. */
static ts_status csv_layouts(const ts_report *r, const cJSON *root, const cJSON *item, FILE *f) {
    (void)root, (void)item;
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
    return TS_OK;
}

/* One row: the object's scalars. */
static ts_status csv_object(const ts_report *r, const cJSON *root, const cJSON *item, FILE *f) {
    (void)r, (void)root;
    csv_cells(f, item, 1);
    csv_cells(f, item, 0);
    return TS_OK;
}

/* One row per object of an array of alike objects. */
static ts_status csv_objects(const ts_report *r, const cJSON *root, const cJSON *item, FILE *f) {
    (void)r, (void)root;
    if (item->child) csv_cells(f, item->child, 1);
    for (const cJSON *c = item->child; c; c = c->next) csv_cells(f, c, 0);
    return TS_OK;
}

/* One row per op kind: simulation.kind_s_per_rank, and measured's and the error
 * (measured.kind_error) beside it with a run. */
static ts_status csv_op_kinds(const ts_report *r, const cJSON *root, const cJSON *item, FILE *f) {
    (void)r;
    const cJSON *measured = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "measured"),
                                                             "kind_s_per_rank");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "measured"),
                                                          "kind_error");
    fprintf(f, "kind,simulated_s_per_rank%s\n", measured ? ",measured_s_per_rank,error" : "");
    for (const cJSON *c = item->child; c; c = c->next) {
        csv_field(f, c->string);
        fputc(',', f);
        csv_value(f, c);
        if (measured) {
            fputc(',', f);
            csv_value(f, cJSON_GetObjectItemCaseSensitive(measured, c->string));
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(error, c->string);
            fputc(',', f);
            if (e) csv_value(f, e);
            else fputs("\"\"", f); /* empty where the run timed no op of the kind */
        }
        fputc('\n', f);
    }
    return TS_OK;
}

/* One row per [flops, efficiency] point of the GEMM efficiency curve. */
static ts_status csv_gemm_points(const ts_report *r, const cJSON *root, const cJSON *item, FILE *f) {
    (void)r, (void)root;
    fputs("gemm_flops,efficiency\n", f);
    for (const cJSON *p = item->child; p; p = p->next) {
        csv_value(f, cJSON_GetArrayItem(p, 0));
        fputc(',', f);
        csv_value(f, cJSON_GetArrayItem(p, 1));
        fputc('\n', f);
    }
    return TS_OK;
}

/* One row per string of an array. */
static ts_status csv_strings(const ts_report *r, const cJSON *root, const cJSON *item, FILE *f) {
    (void)r, (void)root;
    fputs("source\n", f);
    for (const cJSON *c = item->child; c; c = c->next) {
        csv_value(f, c);
        fputc('\n', f);
    }
    return TS_OK;
}

/* The tables in the order they are written (text.h), each with the JSON member it is made of;
 * a table whose member is absent (measured, without a run) is not written. */
static const struct {
    const char *name, *json_path;
    csv_writer write;
} csv_tables[] = {
    {"layouts", NULL, csv_layouts},
    {"question", "question", csv_object},
    {"answer", "answer", csv_object},
    {"simulation", "simulation", csv_object},
    {"stages", "simulation.stages", csv_objects},
    {"op_kinds", "simulation.kind_s_per_rank", csv_op_kinds},
    {"capacity", "capacity", csv_object},
    {"measured", "measured", csv_object},
    {"system", "assumptions.system", csv_object},
    {"gemm_efficiency", "assumptions.system.gemm_efficiency_points", csv_gemm_points},
    {"training", "assumptions.training", csv_object},
    {"sources", "assumptions.sources", csv_strings},
};
#define N_CSV_TABLES (int)(sizeof csv_tables / sizeof csv_tables[0])

/* The member at a dotted path of object keys ("assumptions.system"); NULL when absent. */
static const cJSON *csv_member(const cJSON *root, const char *path) {
    const cJSON *item = root;
    while (item && *path) {
        char key[64];
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        item = cJSON_GetObjectItemCaseSensitive(item, key);
        path += n + (path[n] == '.');
    }
    return item;
}

/* Where the tables go (text.h): `base` becomes the directory ending in '/' (*is_dir) or the
 * prefix without a trailing ".csv"; its directory must exist. */
static ts_status csv_destination(const char *dest, char *base, size_t cap, int *is_dir) {
    struct stat st;
    size_t n = strlen(dest);
    *is_dir = (n > 0 && dest[n - 1] == '/') || (stat(dest, &st) == 0 && S_ISDIR(st.st_mode));
    if (!*is_dir && n > 4 && strcmp(dest + n - 4, ".csv") == 0) n -= 4;
    if (n + 2 >= cap) return TS_FAIL(TS_ERR_INPUT, "%.200s...: path too long", dest);
    snprintf(base, cap, "%.*s%s", (int)n, dest, *is_dir && dest[n - 1] != '/' ? "/" : "");
    if (*is_dir) {
        if (stat(base, &st) != 0 || !S_ISDIR(st.st_mode))
            return TS_FAIL(TS_ERR_INPUT, "%s: no such directory for the CSV tables", base);
        return TS_OK;
    }
    const char *slash = strrchr(base, '/');
    if (slash == NULL) return TS_OK;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - base + 1), base);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return TS_FAIL(TS_ERR_INPUT, "%s-*.csv: no such directory %s for the CSV tables", base, dir);
    return TS_OK;
}

/* Opens every table's temporary and writes it; then renames them all into place. */
ts_status ts_report_write_csv(const ts_report *r, const char *dest, ts_report_csv_files *written) {
    ts_status res = TS_OK;
    cJSON *root = NULL;
    ts_atomic_file *af = NULL;
    int n = 0, committed = 0, is_dir;
    char base[4096];
    written->n = 0;
    TS_CHECK(csv_destination(dest, base, sizeof base, &is_dir));
    TS_CHECK(ts_report_to_json(r, &root));
    TS_ALLOC_GOTO(af = calloc(N_CSV_TABLES, sizeof *af), res, exit);
    for (int t = 0; t < N_CSV_TABLES; t++) {
        const cJSON *item = csv_tables[t].json_path ? csv_member(root, csv_tables[t].json_path) : NULL;
        if (csv_tables[t].json_path && item == NULL) continue;
        char *path = written->path[n];
        if (snprintf(path, sizeof written->path[n], "%s%s%s.csv", base, is_dir ? "" : "-", csv_tables[t].name) >=
            (int)sizeof written->path[n]) {
            res = TS_FAIL(TS_ERR_INPUT, "%.200s...: path too long", base);
            goto exit;
        }
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            res = TS_FAIL(TS_ERR_INPUT, "%s: is a directory, not a CSV file", path);
            goto exit;
        }
        TS_CHECK_GOTO(ts_atomic_open(path, &af[n]), res, exit);
        FILE *f = af[n++].f;
        TS_CHECK_CTX_GOTO(csv_tables[t].write(r, root, item, f), res, exit, "CSV table %s", csv_tables[t].name);
        if (ferror(f) || fflush(f) != 0) {
            res = TS_FAIL(TS_ERR_IO, "%s: write failed: %s", path, strerror(errno));
            goto exit;
        }
    }
    for (; committed < n; committed++)
        TS_CHECK_CTX_GOTO(ts_atomic_commit(&af[committed]), res, exit, "CSV files: %d of %d in place", committed, n);
exit:
    for (int i = 0; af && i < n; i++) ts_atomic_abort(&af[i]); /* no-op for the committed */
    written->n = res == TS_OK ? n : committed;
    free(af);
    cJSON_Delete(root);
    return res;
}
