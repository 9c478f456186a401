/* Capacity comparison across systems (see sweep.h, ts_capacity): per system the cheapest GPU
 * count that trains the tokens in time, its days, cost and energy, and the recommendation; as
 * text, JSON and HTML bar charts. */
#include "reports/sweep.h"

#include <math.h>
#include <stdlib.h>

#include "common/json.h"
#include "reports/markup.h"
#include "reports/numfmt.h"
#include "program/ranks.h"
#include "reports/svg.h"

#define SECONDS_PER_DAY 86400.0

/* Whether pick `a` beats pick `b`: meeting the deadline first, then cost, then days. */
static int better(const ts_buy_pick *a, const ts_buy_pick *b) {
    if (b->row < 0) return a->row >= 0;
    if (a->row < 0) return 0;
    if (a->meets_deadline != b->meets_deadline) return a->meets_deadline;
    if (a->cost_usd != b->cost_usd) return a->cost_usd < b->cost_usd;
    return a->days < b->days;
}

/* The pick of system `s`: of its fitting rows the best by `better` (the cheapest in time, else the
 * fastest, since a late pick only competes on cost with other late ones after days). */
static ts_buy_pick pick_system(const ts_sweep_spec *spec, const ts_sweep_result *r, int s, double tokens,
                                    double max_days) {
    const ts_system *sys = &spec->systems[s];
    ts_buy_pick best = {.row = -1}, fastest = {.row = -1};
    for (int i = 0; i < r->n_rows; i++) {
        const ts_sweep_row *row = &r->rows[i];
        if (row->system != s || !row->fits || !(row->best.tokens_per_s > 0)) continue;
        ts_buy_pick p = {.row = i, .price_per_gpu_hour = ts_sweep_price(spec, s),
                              .price_is_example = ts_sweep_price_is_example(spec, s) ? sys->price_is_example : 0,
                              .power_per_gpu_w = ts_system_power_per_gpu_w(sys)};
        /* GPUs a domain leaves idle under the placement (EP64 on NVL72: 8 a rack) are paid for. */
        p.occupied_gpus = ts_rank_gpu(&row->best.layout, ts_system_domain_gpus(sys), row->gpus - 1) + 1;
        p.days = tokens / row->best.tokens_per_s / SECONDS_PER_DAY;
        p.cost_usd = p.price_per_gpu_hour * p.occupied_gpus * 24.0 * p.days;
        p.energy_mwh = p.power_per_gpu_w * p.occupied_gpus * 24.0 * p.days / 1e6;
        p.meets_deadline = max_days <= 0 || p.days <= max_days;
        if (p.meets_deadline && better(&p, &best)) best = p;
        if (fastest.row < 0 || p.days < fastest.days) fastest = p;
    }
    return best.row >= 0 ? best : fastest;
}

ts_status ts_capacity_compare(const ts_sweep_spec *spec, const ts_sweep_result *r, double tokens, double max_days,
                              ts_buy *out) {
    if (!(tokens > 0))
        return TS_FAIL(TS_ERR_INPUT, "--tokens: expected a positive number of training tokens, got %g", tokens);
    *out = (ts_buy){.tokens = tokens, .max_days = max_days, .n_picks = spec->n_systems, .recommended = -1};
    for (int s = 0; s < spec->n_systems; s++) {
        out->picks[s] = pick_system(spec, r, s, tokens, max_days);
        if (out->picks[s].row >= 0 && (out->recommended < 0 || better(&out->picks[s], &out->picks[out->recommended])))
            out->recommended = s;
    }
    return TS_OK;
}

#define NUM(obj, key, v) TS_CJSON_GOTO(cJSON_AddNumberToObject((obj), (key), (v)), res, fail)
#define STR(obj, key, v) TS_CJSON_GOTO(cJSON_AddStringToObject((obj), (key), (v)), res, fail)
#define BOOL(obj, key, v) TS_CJSON_GOTO(cJSON_AddBoolToObject((obj), (key), (v)), res, fail)

ts_status ts_capacity_add_json(const ts_sweep_spec *spec, const ts_sweep_result *r, const ts_buy *c,
                               cJSON *root) {
    ts_status res = TS_OK;
    cJSON *cap = cJSON_AddObjectToObject(root, "capacity"), *arr;
    TS_CJSON_GOTO(cap, res, fail);
    NUM(cap, "tokens", c->tokens);
    NUM(cap, "max_days", c->max_days);
    if (c->recommended >= 0) STR(cap, "recommended", spec->systems[c->recommended].name);
    else TS_CJSON_GOTO(cJSON_AddNullToObject(cap, "recommended"), res, fail);
    TS_CJSON_GOTO(arr = cJSON_AddArrayToObject(cap, "systems"), res, fail);
    for (int s = 0; s < c->n_picks; s++) {
        const ts_buy_pick *p = &c->picks[s];
        cJSON *o = cJSON_CreateObject();
        TS_CJSON_GOTO(o, res, fail);
        cJSON_AddItemToArray(arr, o);
        STR(o, "system", spec->systems[s].name);
        BOOL(o, "fits", p->row >= 0);
        if (p->row < 0) continue;
        const ts_sweep_row *row = &r->rows[p->row];
        char text[256];
        ts_layout_format(&row->best.layout, text, sizeof text);
        NUM(o, "gpus", row->gpus);
        NUM(o, "occupied_gpus", p->occupied_gpus);
        STR(o, "layout", text);
        NUM(o, "days", p->days);
        NUM(o, "cost_usd", p->cost_usd);
        NUM(o, "price_per_gpu_hour", p->price_per_gpu_hour);
        BOOL(o, "price_is_example", p->price_is_example);
        NUM(o, "power_per_gpu_w", p->power_per_gpu_w);
        NUM(o, "energy_mwh", p->energy_mwh);
        BOOL(o, "meets_deadline", p->meets_deadline);
    }
    return TS_OK;
fail:
    return res;
}

ts_status ts_capacity_print(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r, const ts_buy *c) {
    char a[48], b[48], e[48];
    fprintf(f, "# capacity: %s tokens%s", ts_fmt_count(c->tokens, a, sizeof a), c->max_days > 0 ? " within " : "");
    if (c->max_days > 0) fprintf(f, "%s days", ts_fmt_sig(c->max_days, 3, a, sizeof a));
    fputs("; per system the cheapest GPU count in time; held = GPUs paid for (the ranks and the domain GPUs they "
          "leave idle); * = recommended, ! = misses the deadline, e = example price\n", f);
    fprintf(f, "#  %-16s %6s %6s %9s %13s %9s %7s %9s\n", "system", "gpus", "held", "days", "cost", "USD/GPU-h",
            "W/GPU", "energy");
    fprintf(f, "#  %-16s %6s %6s %9s %13s %9s %7s %9s\n", "", "", "", "d", "USD", "", "W", "MWh");
    for (int s = 0; s < c->n_picks; s++) {
        const ts_buy_pick *p = &c->picks[s];
        fprintf(f, "%c  %-16s ", s == c->recommended ? '*' : ' ', spec->systems[s].name);
        if (p->row < 0) {
            fputs("(nothing fits at any GPU count of the sweep)\n", f);
            continue;
        }
        fprintf(f, "%6d %6d %9s%c %12s %8.2f%c %7.0f %9s\n", r->rows[p->row].gpus, p->occupied_gpus,
                ts_fmt_sig(p->days, 3, a, sizeof a), p->meets_deadline ? ' ' : '!', ts_fmt_usd(p->cost_usd, b, sizeof b),
                p->price_per_gpu_hour, p->price_is_example ? 'e' : ' ', p->power_per_gpu_w,
                ts_fmt_sig(p->energy_mwh, 3, e, sizeof e));
    }
    if (c->recommended >= 0) {
        const ts_buy_pick *p = &c->picks[c->recommended];
        fprintf(f, "# recommended: %s, %d GPUs, %s days, %s\n", spec->systems[c->recommended].name,
                r->rows[p->row].gpus, ts_fmt_sig(p->days, 3, a, sizeof a), ts_fmt_usd(p->cost_usd, b, sizeof b));
    }
    if (ferror(f) || fflush(f) != 0) return TS_FAIL(TS_ERR_IO, "write failed while printing the capacity comparison");
    return TS_OK;
}

/* Which figure of a pick a chart shows. */
typedef enum { SHOW_DAYS, SHOW_GPUS, SHOW_COST, SHOW_ENERGY } shown;

static double shown_value(const ts_sweep_result *r, const ts_buy_pick *p, shown w) {
    if (p->row < 0) return 0;
    switch (w) {
    case SHOW_DAYS: return p->days;
    case SHOW_GPUS: return r->rows[p->row].gpus;
    case SHOW_COST: return p->cost_usd / 1e6;
    case SHOW_ENERGY: return p->energy_mwh;
    }
    return 0;
}

/* One bar per system; the recommended one in the second series' colour, so it stands out. */
static void bars(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r, const ts_buy *c, shown w,
                      const char *question, const char *axis) {
    static const char *const series[] = {"other systems", "recommended"};
    static const char *const colors[] = {"#8aa4c8", "#e07b00"};
    const char *labels[TS_SWEEP_MAX_SYSTEMS];
    double values[2 * TS_SWEEP_MAX_SYSTEMS];
    for (int s = 0; s < c->n_picks; s++) {
        labels[s] = spec->systems[s].name;
        double v = shown_value(r, &c->picks[s], w);
        values[2 * s] = s == c->recommended ? 0 : v;
        values[2 * s + 1] = s == c->recommended ? v : 0;
    }
    fputs("<h3>", f);
    ts_html_escape(f, question);
    fputs("</h3>\n", f);
    ts_svg_bars chart = {.rows = c->n_picks, .series = 2, .row_labels = labels, .series_names = series,
                         .colors = colors, .values = values, .axis_label = axis,
                         .limit = w == SHOW_DAYS ? c->max_days : 0, .limit_label = "deadline"};
    ts_svg_stacked_bars(f, &chart);
}

ts_status ts_capacity_write_html(FILE *f, const ts_sweep_spec *spec, const ts_sweep_result *r,
                                 const ts_buy *c) {
    fputs("<h2>Which system to buy</h2>\n<p>Training ", f);
    ts_html_num(f, "capacity.tokens", "", 0, c->tokens);
    fputs(" tokens", f);
    if (c->max_days > 0) {
        fputs(" within ", f);
        ts_html_num(f, "capacity.max_days", "", 1, c->max_days);
        fputs(" days", f);
    }
    fputs(": per system the cheapest GPU count of the sweep that does it in time. ", f);
    if (c->recommended >= 0) {
        const ts_buy_pick *p = &c->picks[c->recommended];
        fputs("<strong>Recommended: ", f);
        ts_html_str(f, "capacity.recommended", spec->systems[c->recommended].name);
        fputs(", ", f);
        ts_html_numf(f, "", 0, r->rows[p->row].gpus, "capacity.systems[%d].gpus", c->recommended);
        fputs(" GPUs, ", f);
        ts_html_numf(f, "", 1, p->days, "capacity.systems[%d].days", c->recommended);
        fputs(" days, ", f);
        ts_html_numf(f, "", 0, p->cost_usd, "capacity.systems[%d].cost_usd", c->recommended);
        fputs(" USD.</strong>", f);
    }
    fputs("</p>\n", f);
    bars(f, spec, r, c, SHOW_DAYS, "How many days?", "days");
    bars(f, spec, r, c, SHOW_GPUS, "How many GPUs?", "GPUs");
    bars(f, spec, r, c, SHOW_COST, "What does it cost?", "million USD");
    bars(f, spec, r, c, SHOW_ENERGY, "How much energy?", "MWh");
    fputs("<p class=\"note\">Prices marked as examples in the system files are illustrative; set one with "
          "--price. Energy is watts per GPU (the rack's when the file gives it) times GPU-hours.</p>\n", f);
    return TS_OK;
}
