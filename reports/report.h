/* The capacity-planning report of a plan: everything `tessera report` shows, computed once and
 * then written as HTML (reports/html.h), Markdown or CSV (reports/text.h) or JSON (here).
 *
 * From a plan file it re-evaluates every layout with this build's closed form, simulates the
 * best (first) layout's step program in representative mode (one rank per stage, sim/engine.h)
 * for its timeline, and derives the capacity figures of the best layout:
 *
 *   time to train  = tokens / tokens_per_s          (tokens_per_s = global_batch·seq / step_s)
 *   GPU-hours      = gpus · time / 3600
 *   cost           = GPU-hours · price               (USD per GPU-hour, default 2.0)
 *   energy         = GPU-hours · power_w / 1000 kWh  (GPU board power only; none when unknown)
 *
 * Optionally it reads what a real run measured (reports/measured.h).
 *
 * JSON form ("tessera": "report"; seconds, bytes, fractions as everywhere):
 *   {"tessera", "version", "plan",
 *    "question": {"model", "system", "gpu", "gpus", "global_batch", "seq", "dtype",
 *                 "flash_attention", "layouts"},
 *    "answer": {"layout", "step_s", "tokens_per_s", "tflops_per_gpu", "mfu", "memory_bytes",
 *               "usable_bytes", "band_lo_s", "band_hi_s", "band_measured_on_gpu", "band_gpus",
 *               "tight", "stack", "tie", "against"},
 *               ("tie" and "against" only when the plan has them)
 *    "layouts": [plan_json.h's layout objects, re-evaluated],
 *    "simulation": {"layout", "step_s", "closed_form_step_s", "bubble_fraction", "microbatches",
 *                   "ops", "stages": [{"stage", "busy_s", "bubble_s", "exposed_comm_s"}],
 *                   "kind_s_per_rank": {"gemm", ...}},
 *    "capacity": {"tokens", "tokens_per_s", "train_s", "train_days", "gpu_hours",
 *                 "price_per_gpu_hour", "price_is_default", "cost_usd", "power_w", "energy_kwh"},
 *    "measured": {"file", "layout", "same_layout", "ranks", "steps", "step_s": {"median", "p10",
 *                 "p90"}, "loss_first", "loss_last", "kind_s_per_rank": {...}, "trace"},
 *    "assumptions": {"system": {...}, "training": {...}, "sources": ["...", ...]}}
 * "measured" is present only with a run file, "power_w"/"energy_kwh" only when the system's power
 * is known. The pages print every number they show from this form (reports/markup.h). */
#ifndef TS_REPORT_H
#define TS_REPORT_H

#include <cjson/cJSON.h>

#include "planner/problem.h"
#include "reports/measured.h"
#include "reports/timeline.h"

#define TS_REPORT_DEFAULT_TOKENS 1e12
#define TS_REPORT_DEFAULT_PRICE 2.0 /* USD per GPU-hour: an on-demand-ish H100 price, a placeholder */

typedef struct {
    double tokens;             /* tokens to train on */
    double price_per_gpu_hour; /* USD */
    int price_is_default;      /* the report says the price is the default */
    const char *run_json;      /* `tessera run --json` output, or NULL */
    const char *run_trace;     /* `tessera run --trace` output, or NULL */
} ts_report_opts;

void ts_report_opts_defaults(ts_report_opts *o);

typedef struct {
    double tokens, tokens_per_s, train_s, train_days, gpu_hours, cost_usd;
    double energy_kwh; /* 0 when the system's power is unknown */
} ts_capacity;

typedef struct {
    char plan_file[1024];
    ts_report_opts opts;
    ts_problem pb;
    ts_eval *layouts; /* (n_layouts) the plan's layouts in its order, re-evaluated; [0] is best */
    int n_layouts;
    ts_program prog;  /* the best layout's step program */
    ts_sim_result sim;
    ts_timeline sim_timeline;
    ts_capacity capacity;
    /* How sure, and why (planner/bands.h, reports/ranking.h): the best layout's band from this
     * build's residuals on the plan's stack, whether its memory is tight, and the plan's tie and
     * --against sentences ("" when the plan has none). */
    double band_lo_s, band_hi_s;
    int band_on_gpu;      /* a published run behind the band was measured on the plan's GPU */
    char band_gpus[256];  /* the GPUs those runs were measured on, comma-separated */
    int tight;
    char tie[1024], against[1024];
    int has_run, has_run_trace;
    char run_file[1024], run_trace_file[1024];
    ts_run_summary run;
    ts_timeline run_timeline;
} ts_report;

/* Builds the report; ts_report_free releases it (also after a failure). Bad plan or run files:
 * TS_ERR_INPUT naming the file and field; an empty plan: TS_ERR_INPUT. */
ts_status ts_report_build(const char *plan_file, const ts_report_opts *opts, ts_report *out);
void ts_report_free(ts_report *r);

/* The JSON form above; the caller frees *out with cJSON_Delete. */
ts_status ts_report_to_json(const ts_report *r, cJSON **out);

/* The parts of the system and training the report lists as assumptions, and the formulas'
 * sources, as (label, JSON key, unit, decimals) tables shared by the writers. */
typedef struct {
    const char *label;   /* "HBM per GPU" */
    const char *key;     /* "hbm_bytes", under assumptions.system or assumptions.training */
    const char *unit;    /* a reports/markup.h data-unit */
    int decimals;        /* as ts_html_num */
    double value;
} ts_report_figure;

/* Fills `out` (room for TS_REPORT_MAX_FIGURES) and returns how many. */
#define TS_REPORT_MAX_FIGURES 48
int ts_report_system_figures(const ts_report *r, ts_report_figure *out);
int ts_report_training_figures(const ts_report *r, ts_report_figure *out);
extern const char *const ts_report_sources[]; /* NULL-terminated */

#endif
